/*
 * test_cuda_kernels_bn.c - test_cuda_kernels's batch-norm kernels against
 * the CPU, on the host: channels-last batch norm (bn_nhwc.cu) against the
 * CPU's twin, and reduce.cu's channel sums (bias gradients) and frozen
 * batch norm's backward. The rules are test_cuda_kernels.c's.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "cuda_kernels_test.h"
#include "nn_test_util.h"

/* ---- bn_nhwc.cu -------------------------------------------------------- */

static void bn_case(int prec, int n, int c, int hw, float shift, int relu,
		    int off)
{
	char what[96], name[160];
	snprintf(what, sizeof(what), "%s bn %dx%dx%dx%d%s%s, off %d",
		 pname(prec), n, hw, hw, c, shift != 0 ? " shifted" : "",
		 relu ? " relu" : "", off);
	const size_t m = (size_t)n * hw * hw, cnt = m * (size_t)c;
	nn_bn_desc d = {n, c, hw, hw, 1e-5f, 0.1f, 1, relu};
	cpu.precision = prec;
	tensor x = trand(prec, cnt, 0, 21, -2 + shift, 3 + shift, 0);
	tensor dy = trand(prec, cnt, 0, 22, -1, 1, 0);
	tensor dx0 = trand(prec, cnt, 0, 23, -1, 1, 0);
	tensor kx = tcopy(prec, &x, cnt, off), kdy = tcopy(prec, &dy, cnt, off);
	tensor y = tnew(prec, cnt, 0), ky = tnew(prec, cnt, off);
	float *g = nn_test_alloc(c), *b = nn_test_alloc(c);
	nn_test_fill(g, c, 24, 0.5f, 1.5f);
	nn_test_fill(b, c, 25, -0.5f, 0.5f);
	float *st = nn_test_alloc(8 * (size_t)c);
	float *rm = st, *rv = st + c, *sm = st + 2 * c, *si = st + 3 * c;
	float *krm = st + 4 * c, *krv = st + 5 * c, *ksm = st + 6 * c;
	float *ksi = st + 7 * c;
	for (int i = 0; i < c; i++)
		rm[i] = krm[i] = 0.25f, rv[i] = krv[i] = 2.0f;
	void *ws = aligned_alloc(256, (nn_cuda_k_bn_nhwc_workspace(m, c) + 255) /
					      256 * 256);
	CHECK(ws != NULL);

	CHECK_OK(cpu.be->bn_forward_train(&cpu, &d, x.p, g, b, rm, rv, sm, si,
					  y.p, &err),
		 &err);
	KERNEL_OK(nn_cuda_k_bn_nhwc_forward_train(NULL, prec, m, c, d.eps,
						  d.momentum, kx.p, g, b, krm,
						  krv, ksm, ksi, ky.p, relu, ws));
	const char *sn[4] = {"running mean", "running var", "saved mean",
			     "saved 1/std"};
	for (int k = 0; k < 4; k++) {
		snprintf(name, sizeof(name), "%s: %s", what, sn[k]);
		near(name, st + (size_t)k * c, st + (size_t)(4 + k) * c, c, 1e-5,
		     1e-3);
	}
	snprintf(name, sizeof(name), "%s: y", what);
	near_act(prec, name, y.p, ky.p, cnt, 1.0);

	float *dg = nn_test_alloc(c), *db = nn_test_alloc(c);
	float *kdg = nn_test_alloc(c), *kdb = nn_test_alloc(c);
	for (int over = 0; over < 2; over++) {
		tensor dx = tcopy(prec, &dx0, cnt, 0);
		tensor kdx = tcopy(prec, &dx0, cnt, off);
		cpu.dx_overwrite = over;
		CHECK_OK(cpu.be->bn_backward(&cpu, &d, x.p, g, sm, si, dy.p, dx.p,
					     dg, db, &err),
			 &err);
		KERNEL_OK(nn_cuda_k_bn_nhwc_backward(NULL, prec, m, c, kx.p, g,
						     sm, si, kdy.p, kdx.p, kdg,
						     kdb, over, ws));
		snprintf(name, sizeof(name), "%s: dx (%s)", what,
			 over ? "overwritten" : "added to");
		near_act(prec, name, dx.p, kdx.p, cnt, 1.0);
		snprintf(name, sizeof(name), "%s: dgamma", what);
		near(name, dg, kdg, c, 1e-5, 1e-2);
		snprintf(name, sizeof(name), "%s: dbeta", what);
		near(name, db, kdb, c, 1e-5, 1e-2);
		tfree(&dx), tfree(&kdx);
	}
	/* dgamma alone: no dx, no dbeta */
	memset(kdg, 0, (size_t)c * sizeof(float));
	KERNEL_OK(nn_cuda_k_bn_nhwc_backward(NULL, prec, m, c, kx.p, g, sm, si,
					     kdy.p, NULL, kdg, NULL, 1, ws));
	snprintf(name, sizeof(name), "%s: dgamma alone", what);
	near(name, dg, kdg, c, 1e-5, 1e-2);
	cpu.dx_overwrite = 0;

	CHECK_OK(cpu.be->bn_forward_eval(&cpu, &d, x.p, g, b, rm, rv, y.p, &err),
		 &err);
	KERNEL_OK(nn_cuda_k_bn_nhwc_forward_eval(NULL, prec, m, c, d.eps, kx.p,
						 g, b, rm, rv, ky.p, relu));
	snprintf(name, sizeof(name), "%s: evaluation y", what);
	near_act(prec, name, y.p, ky.p, cnt, 1.0);

	cpu.precision = NN_PREC_FP32;
	free(ws), free(st), free(g), free(b), free(dg), free(db), free(kdg);
	free(kdb);
	tfree(&x), tfree(&dy), tfree(&dx0), tfree(&kx), tfree(&kdy);
	tfree(&y), tfree(&ky);
}

void test_bn_nhwc(void)
{
	for (int prec = NN_PREC_FP32; prec <= NN_PREC_FP16; prec++) {
		/* prec, n, c, hw, shift, relu, off */
		bn_case(prec, 4, 8, 5, 0, 1, 0);     /* one vector per row */
		bn_case(prec, 3, 6, 5, 0, 1, 0);     /* 6 channels: single values */
		bn_case(prec, 9, 40, 7, 50, 0, 0);   /* 40 = 32 + 8; mean >> std */
		bn_case(prec, 2, 64, 14, 0, 1, 1);   /* unaligned */
		bn_case(prec, 2, 64, 136, 0, 0, 0);  /* 36992 rows: the slice cap */
		bn_case(prec, 1, 2048, 3, 0, 1, 0);  /* 64 channel groups */
	}
}

/* ---- reduce.cu --------------------------------------------------------- */

/* The bias gradient: per channel, the sum of dy over images and plane, in
 * double (the kernel's tree adds in another order). */
static void channel_sum_case(int prec, int n, int c, size_t hw)
{
	char name[96];
	const size_t cnt = (size_t)n * c * hw;
	tensor dy = trand(prec, cnt, 0, 71, -1, 1, 0);
	float *want = nn_test_alloc(c), *got = nn_test_alloc(c);
	for (int ch = 0; ch < c; ch++) {
		double sum = 0;
		for (int i = 0; i < n; i++)
			for (size_t j = 0; j < hw; j++)
				sum += tget(prec, dy.p, ((size_t)i * c + ch) * hw + j);
		want[ch] = (float)sum;
	}
	KERNEL_OK(nn_cuda_k_channel_sum(NULL, prec, n, c, hw, dy.p, got));
	snprintf(name, sizeof(name), "%s channel sum %dx%dx%zu", pname(prec), n,
		 c, hw);
	near(name, want, got, c, 1e-6, 1e-3);
	free(want), free(got);
	tfree(&dy);
}

/* Frozen batch norm's backward (NCHW) against the CPU's, both dx modes */
static void frozen_case(int prec, int n, int c, int hw)
{
	char name[96];
	const size_t cnt = (size_t)n * c * hw * hw;
	nn_bn_desc d = {n, c, hw, hw, 1e-5f, 0.1f, 0, 0};
	cpu.precision = prec;
	tensor x = trand(prec, cnt, 0, 81, -2, 3, 0);
	tensor dy = trand(prec, cnt, 0, 82, -1, 1, 0);
	float *g = nn_test_alloc(c), *rm = nn_test_alloc(c), *rv = nn_test_alloc(c);
	nn_test_fill(g, c, 83, 0.5f, 1.5f);
	nn_test_fill(rm, c, 84, -0.5f, 0.5f);
	nn_test_fill(rv, c, 85, 0.5f, 2.0f);
	float *dg = nn_test_alloc(c), *db = nn_test_alloc(c);
	float *kdg = nn_test_alloc(c), *kdb = nn_test_alloc(c);
	for (int over = 0; over < 2; over++) {
		tensor dx = tcopy(prec, &x, cnt, 0), kdx = tcopy(prec, &x, cnt, 0);
		cpu.dx_overwrite = over;
		CHECK_OK(cpu.be->bn_backward_frozen(&cpu, &d, x.p, g, rm, rv, dy.p,
						    dx.p, dg, db, &err),
			 &err);
		KERNEL_OK(nn_cuda_k_bn_frozen_backward(NULL, prec, &d, x.p, g, rm,
						       rv, dy.p, kdx.p, kdg, kdb,
						       over));
		snprintf(name, sizeof(name), "%s frozen bn dx (%s)", pname(prec),
			 over ? "overwritten" : "added to");
		near_act(prec, name, dx.p, kdx.p, cnt, 1.0);
		snprintf(name, sizeof(name), "%s frozen bn dgamma", pname(prec));
		near(name, dg, kdg, c, 1e-5, 1e-2);
		snprintf(name, sizeof(name), "%s frozen bn dbeta", pname(prec));
		near(name, db, kdb, c, 1e-5, 1e-2);
		tfree(&dx), tfree(&kdx);
	}
	cpu.dx_overwrite = 0;
	cpu.precision = NN_PREC_FP32;
	free(g), free(rm), free(rv), free(dg), free(db), free(kdg), free(kdb);
	tfree(&x), tfree(&dy);
}

void test_reduce(void)
{
	for (int prec = NN_PREC_FP32; prec <= NN_PREC_FP16; prec++) {
		channel_sum_case(prec, 3, 5, 49);
		channel_sum_case(prec, 2, 3, 1000); /* more than a block's threads */
		frozen_case(prec, 2, 5, 7);
		frozen_case(prec, 3, 4, 12);
	}
}
