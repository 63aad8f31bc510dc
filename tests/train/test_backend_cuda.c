/*
 * test_backend_cuda.c - every entry of the CUDA backend against the CPU
 * backend (the reference) on random inputs: forward and backward, several
 * shapes per layer, accumulating and overwriting dx, NULL dx/dw/db.
 * On a machine without a GPU (or in a build without the CUDA backend) it
 * prints one line and exits 77 (skipped); on a GPU host that cannot run
 * it, and with IMSHARD_REQUIRE_GPU=1, it fails (gpu_test.h). This file
 * holds the fp32 entries that run cuDNN and cuBLAS (convolution, linear,
 * batch norm) and main; test_backend_cuda_kernels.c the fp32 entries of
 * the backend's own kernels (element-wise, pooling, cross-entropy);
 * test_backend_cuda_mixed.c the 16-bit cases and fp32 channels-last;
 * backend_cuda_test.c what they share.
 *
 * Tolerances:
 *  - cuDNN and cuBLAS results (convolution, linear, batch norm) and the
 *    own reductions (bias gradients, frozen batch norm, cross-entropy):
 *    |gpu - cpu| <= RTOL * max(|cpu|, |gpu|, FLOOR * max|cpu|), RTOL =
 *    1e-4 (the fp32 bound) and FLOOR = 1e-2, so elements far
 *    below the tensor's scale (sums that cancel) are held to 1e-6 of the
 *    largest element instead of to their own size. The loss sum, a
 *    double, to 1e-9 relative.
 *  - The kernels that reproduce the CPU's operations in its order (ReLU,
 *    add, accumulate, dropout and its mask, max pooling with its argmax
 *    and tie rule, average pooling): the same bits.
 *  - Overwrite mode (ctx->dx_overwrite) runs over a dx full of NaN; the
 *    result must match the CPU's overwrite result under the same rules,
 *    so a NaN read from dx shows up as a failure.
 *  - Mixed precision (ctx->precision bf16 / fp16: 16-bit activations and
 *    weights, fp32 sums) against the CPU's mixed precision on the same
 *    16-bit inputs (train/layers/mixed.c, the reference): convolution,
 *    linear and batch norm y, dx (accumulated and overwritten), dw and db
 *    by the relative error of the tensor's norm, |gpu - cpu|_2 <= TOL
 *    |cpu|_2, with TOL_BF16 = 1e-2 and TOL_FP16 = 2e-3: the sums run in
 *    other orders, and a result near a rounding boundary rounds the
 *    other way, 2^-8 (2^-11) relative for that element; the tolerances
 *    are 5x the norm of that were every element to flip. Add,
 *    accumulate, ReLU and max pooling (one fp32 operation per element,
 *    rounded once): the same bits. Every 16-bit case runs twice, NCHW
 *    and channels-last (descriptors' nhwc), against the CPU in the same
 *    layout: max and average pooling, their backward and the input copy
 *    the same bits; frozen batch norm by norm.
 *  - The device runs with TF32 off and deterministic convolution
 *    algorithms (the parity settings).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend_cuda_test.h"
#include "common/common.h"
#include "nn_test_util.h"
#include "gpu_test.h"
#include "test.h"

/* ---- convolution -------------------------------------------------------- */

static void conv_case(int n, int c_in, int hw, int c_out, int k, int stride,
		      int pad, int dil, int groups, int bias)
{
	char what[160];
	snprintf(what, sizeof(what),
		 "conv n%d c%d->%d %dx%d k%d s%d p%d d%d g%d b%d", n, c_in, c_out,
		 hw, hw, k, stride, pad, dil, groups, bias);
	nn_conv_desc d;
	if (nn_conv_desc_init(&d, n, c_in, hw, hw, c_out, k, stride, pad, dil,
			      groups, bias, &err)) {
		fprintf(stderr, "%s: %s\n", what, err.msg);
		CHECK(0);
		return;
	}
	const size_t nx = (size_t)n * c_in * hw * hw;
	const size_t ny = (size_t)n * c_out * d.h_out * d.w_out;
	const size_t nw = (size_t)c_out * (c_in / groups) * k * k;
	const size_t nb = (size_t)c_out;
	float *x = nn_test_alloc(nx), *w = nn_test_alloc(nw);
	float *b = nn_test_alloc(nb), *dy = nn_test_alloc(ny);
	float *dx0 = nn_test_alloc(nx);
	nn_test_fill(x, nx, 11, -1, 1);
	nn_test_fill(w, nw, 12, -0.5f, 0.5f);
	nn_test_fill(b, nb, 13, -1, 1);
	nn_test_fill(dy, ny, 14, -1, 1);
	nn_test_fill(dx0, nx, 15, -1, 1);

	/* CPU reference */
	float *y = nn_test_alloc(ny), *dxa = host_copy(dx0, nx);
	float *dxo = filled(nx, NAN), *dw = nn_test_alloc(nw);
	float *db = nn_test_alloc(nb);
	CHECK_OK(nn_cpu_conv_forward(&cpu, &d, x, w, bias ? b : NULL, y, &err),
		 &err);
	CHECK_OK(nn_cpu_conv_backward(&cpu, &d, x, w, dy, dxa, dw,
				      bias ? db : NULL, &err),
		 &err);
	cpu.dx_overwrite = 1;
	CHECK_OK(nn_cpu_conv_backward(&cpu, &d, x, w, dy, dxo, NULL, NULL, &err),
		 &err);
	cpu.dx_overwrite = 0;

	/* CUDA */
	float *gx = up(x, nx), *gw = up(w, nw), *gb = up(b, nb);
	float *gdy = up(dy, ny), *gy = up(NULL, ny), *gdx = up(dx0, nx);
	float *gdw = up(NULL, nw), *gdb = up(NULL, nb);
	char name[200];
	CHECK_OK(gpu.be->conv_forward(&gpu, &d, gx, gw, bias ? gb : NULL, gy,
				      &err),
		 &err);
	snprintf(name, sizeof(name), "%s y", what);
	near_dev(name, y, gy, ny);
	CHECK_OK(gpu.be->conv_backward(&gpu, &d, gx, gw, gdy, gdx, gdw,
				       bias ? gdb : NULL, &err),
		 &err);
	snprintf(name, sizeof(name), "%s dx (accumulated)", what);
	near_dev(name, dxa, gdx, nx);
	snprintf(name, sizeof(name), "%s dw", what);
	near_dev(name, dw, gdw, nw);
	if (bias) {
		snprintf(name, sizeof(name), "%s db", what);
		near_dev(name, db, gdb, nb);
	}
	/* overwrite over NaN, dw and db skipped */
	dfree(gdx);
	float *nan_x = filled(nx, NAN);
	gdx = up(nan_x, nx);
	gpu.dx_overwrite = 1;
	CHECK_OK(gpu.be->conv_backward(&gpu, &d, gx, gw, gdy, gdx, NULL, NULL,
				       &err),
		 &err);
	gpu.dx_overwrite = 0;
	snprintf(name, sizeof(name), "%s dx (overwritten)", what);
	near_dev(name, dxo, gdx, nx);
	/* dw only (dx NULL): dw again */
	CHECK_OK(gpu.be->zero(&gpu, gdw, nw * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->conv_backward(&gpu, &d, gx, gw, gdy, NULL, gdw, NULL,
				       &err),
		 &err);
	snprintf(name, sizeof(name), "%s dw (dx NULL)", what);
	near_dev(name, dw, gdw, nw);

	dfree(gx), dfree(gw), dfree(gb), dfree(gdy), dfree(gy), dfree(gdx);
	dfree(gdw), dfree(gdb);
	free(x), free(w), free(b), free(dy), free(dx0), free(y), free(dxa);
	free(dxo), free(dw), free(db), free(nan_x);
}

static void test_conv(void)
{
	/* n, c_in, hw, c_out, k, stride, pad, dil, groups, bias */
	conv_case(2, 3, 9, 4, 3, 1, 1, 1, 1, 1);    /* 3x3 same */
	conv_case(2, 3, 9, 4, 3, 1, 1, 1, 1, 0);    /* no bias */
	conv_case(3, 8, 8, 16, 3, 2, 1, 1, 1, 0);   /* 3x3 stride 2 */
	conv_case(2, 16, 7, 8, 1, 1, 0, 1, 1, 1);   /* 1x1 */
	conv_case(2, 16, 8, 32, 1, 2, 0, 1, 1, 0);  /* 1x1 stride 2 */
	conv_case(2, 3, 23, 8, 7, 2, 3, 1, 1, 0);   /* 7x7 stem */
	conv_case(2, 8, 10, 8, 3, 1, 2, 2, 1, 1);   /* dilation 2 */
	conv_case(2, 8, 9, 12, 3, 1, 1, 1, 4, 1);   /* groups 4 */
	conv_case(2, 8, 9, 8, 3, 2, 1, 1, 8, 0);    /* depthwise stride 2 */
	conv_case(1, 4, 5, 6, 5, 1, 0, 1, 2, 1);    /* 5x5 valid, groups 2 */

	/* a bad descriptor fails as on the CPU */
	nn_conv_desc d;
	CHECK_OK(nn_conv_desc_init(&d, 1, 3, 8, 8, 4, 3, 1, 1, 1, 1, 0, &err),
		 &err);
	d.h_out = 7;
	float *g = up(NULL, 1024);
	CHECK_EQ_INT(gpu.be->conv_forward(&gpu, &d, g, g, NULL, g, &err),
		     IMS_EINVAL);
	dfree(g);
}

/* ---- linear ------------------------------------------------------------- */

static void linear_case(int n, int in, int out, int bias)
{
	char what[96], name[160];
	snprintf(what, sizeof(what), "linear n%d %d->%d b%d", n, in, out, bias);
	nn_linear_desc d = {n, in, out, bias};
	const size_t nx = (size_t)n * in, ny = (size_t)n * out;
	const size_t nw = (size_t)out * in;
	float *x = nn_test_alloc(nx), *w = nn_test_alloc(nw);
	float *b = nn_test_alloc(out), *dy = nn_test_alloc(ny);
	float *dx0 = nn_test_alloc(nx);
	nn_test_fill(x, nx, 21, -1, 1);
	nn_test_fill(w, nw, 22, -0.5f, 0.5f);
	nn_test_fill(b, out, 23, -1, 1);
	nn_test_fill(dy, ny, 24, -1, 1);
	nn_test_fill(dx0, nx, 25, -1, 1);
	float *y = nn_test_alloc(ny), *dxa = host_copy(dx0, nx);
	float *dxo = filled(nx, NAN), *dw = nn_test_alloc(nw);
	float *db = nn_test_alloc(out);
	CHECK_OK(nn_cpu_linear_forward(&cpu, &d, x, w, b, y, &err), &err);
	CHECK_OK(nn_cpu_linear_backward(&cpu, &d, x, w, dy, dxa, dw, db, &err),
		 &err);
	cpu.dx_overwrite = 1;
	CHECK_OK(nn_cpu_linear_backward(&cpu, &d, x, w, dy, dxo, NULL, NULL,
					&err),
		 &err);
	cpu.dx_overwrite = 0;

	float *gx = up(x, nx), *gw = up(w, nw), *gb = up(b, out);
	float *gdy = up(dy, ny), *gy = up(NULL, ny), *gdx = up(dx0, nx);
	float *gdw = up(NULL, nw), *gdb = up(NULL, out);
	CHECK_OK(gpu.be->linear_forward(&gpu, &d, gx, gw, gb, gy, &err), &err);
	snprintf(name, sizeof(name), "%s y", what);
	near_dev(name, y, gy, ny);
	CHECK_OK(gpu.be->linear_backward(&gpu, &d, gx, gw, gdy, gdx, gdw, gdb,
					 &err),
		 &err);
	snprintf(name, sizeof(name), "%s dx (accumulated)", what);
	near_dev(name, dxa, gdx, nx);
	snprintf(name, sizeof(name), "%s dw", what);
	near_dev(name, dw, gdw, nw);
	if (bias) {
		snprintf(name, sizeof(name), "%s db", what);
		near_dev(name, db, gdb, out);
	}
	float *nan_x = filled(nx, NAN);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, nx * sizeof(float), &err),
		 &err);
	gpu.dx_overwrite = 1;
	CHECK_OK(gpu.be->linear_backward(&gpu, &d, gx, gw, gdy, gdx, NULL, NULL,
					 &err),
		 &err);
	gpu.dx_overwrite = 0;
	snprintf(name, sizeof(name), "%s dx (overwritten)", what);
	near_dev(name, dxo, gdx, nx);
	dfree(gx), dfree(gw), dfree(gb), dfree(gdy), dfree(gy), dfree(gdx);
	dfree(gdw), dfree(gdb);
	free(x), free(w), free(b), free(dy), free(dx0), free(y), free(dxa);
	free(dxo), free(dw), free(db), free(nan_x);
}

static void test_linear(void)
{
	linear_case(4, 7, 5, 1);
	linear_case(4, 7, 5, 0);
	linear_case(32, 512, 10, 1);
	linear_case(3, 100, 1000, 1);
	linear_case(1, 1, 1, 1);
}

/* ---- batch norm --------------------------------------------------------- */

static void bn_case(int n, int c, int hw, float offset)
{
	char what[96], name[160];
	snprintf(what, sizeof(what), "bn n%d c%d %dx%d +%g", n, c, hw, hw,
		 (double)offset);
	nn_bn_desc d = {n, c, hw, hw, 1e-5f, 0.1f, 0, 0};
	const size_t nx = (size_t)n * c * hw * hw;
	float *x = nn_test_alloc(nx), *dy = nn_test_alloc(nx);
	float *dx0 = nn_test_alloc(nx), *gam = nn_test_alloc(c);
	float *bet = nn_test_alloc(c), *rm = nn_test_alloc(c);
	float *rv = nn_test_alloc(c);
	nn_test_fill(x, nx, 31, -2, 2);
	for (size_t i = 0; i < nx; i++)
		x[i] += offset;
	nn_test_fill(dy, nx, 32, -1, 1);
	nn_test_fill(dx0, nx, 33, -1, 1);
	nn_test_fill(gam, c, 34, 0.5f, 1.5f);
	nn_test_fill(bet, c, 35, -0.5f, 0.5f);
	nn_test_fill(rm, c, 36, -0.2f, 0.2f);
	nn_test_fill(rv, c, 37, 0.5f, 2.0f);

	/* training forward */
	float *y = nn_test_alloc(nx), *crm = host_copy(rm, c);
	float *crv = host_copy(rv, c), *sm = nn_test_alloc(c);
	float *si = nn_test_alloc(c);
	CHECK_OK(nn_cpu_bn_forward_train(&cpu, &d, x, gam, bet, crm, crv, sm, si,
					 y, &err),
		 &err);
	float *gx = up(x, nx), *ggam = up(gam, c), *gbet = up(bet, c);
	float *grm = up(rm, c), *grv = up(rv, c), *gsm = up(NULL, c);
	float *gsi = up(NULL, c), *gy = up(NULL, nx);
	CHECK_OK(gpu.be->bn_forward_train(&gpu, &d, gx, ggam, gbet, grm, grv,
					  gsm, gsi, gy, &err),
		 &err);
	snprintf(name, sizeof(name), "%s y (train)", what);
	near_dev(name, y, gy, nx);
	snprintf(name, sizeof(name), "%s running mean", what);
	near_dev(name, crm, grm, c);
	snprintf(name, sizeof(name), "%s running var", what);
	near_dev(name, crv, grv, c);
	snprintf(name, sizeof(name), "%s save mean", what);
	near_dev(name, sm, gsm, c);
	snprintf(name, sizeof(name), "%s save invstd", what);
	near_dev(name, si, gsi, c);

	/* evaluation forward, with the original running statistics */
	CHECK_OK(nn_cpu_bn_forward_eval(&cpu, &d, x, gam, bet, rm, rv, y, &err),
		 &err);
	CHECK_OK(gpu.be->to_device(&gpu, grm, rm, c * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, grv, rv, c * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->bn_forward_eval(&gpu, &d, gx, ggam, gbet, grm, grv, gy,
					 &err),
		 &err);
	snprintf(name, sizeof(name), "%s y (eval)", what);
	near_dev(name, y, gy, nx);

	/* training backward from the CPU's saved statistics, both modes */
	CHECK_OK(gpu.be->to_device(&gpu, gsm, sm, c * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, gsi, si, c * sizeof(float), &err), &err);
	float *gdy = up(dy, nx), *gdx = up(dx0, nx), *gdg = up(NULL, c);
	float *gdb = up(NULL, c);
	float *dxa = host_copy(dx0, nx), *dxo = filled(nx, NAN);
	float *dg = nn_test_alloc(c), *dbt = nn_test_alloc(c);
	float *nan_x = filled(nx, NAN);
	CHECK_OK(nn_cpu_bn_backward(&cpu, &d, x, gam, sm, si, dy, dxa, dg, dbt,
				    &err),
		 &err);
	cpu.dx_overwrite = 1;
	CHECK_OK(nn_cpu_bn_backward(&cpu, &d, x, gam, sm, si, dy, dxo, NULL,
				    NULL, &err),
		 &err);
	cpu.dx_overwrite = 0;
	CHECK_OK(gpu.be->bn_backward(&gpu, &d, gx, ggam, gsm, gsi, gdy, gdx, gdg,
				     gdb, &err),
		 &err);
	snprintf(name, sizeof(name), "%s dx (accumulated)", what);
	near_dev(name, dxa, gdx, nx);
	snprintf(name, sizeof(name), "%s dgamma", what);
	near_dev(name, dg, gdg, c);
	snprintf(name, sizeof(name), "%s dbeta", what);
	near_dev(name, dbt, gdb, c);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, nx * sizeof(float), &err),
		 &err);
	gpu.dx_overwrite = 1;
	CHECK_OK(gpu.be->bn_backward(&gpu, &d, gx, ggam, gsm, gsi, gdy, gdx,
				     NULL, NULL, &err),
		 &err);
	gpu.dx_overwrite = 0;
	snprintf(name, sizeof(name), "%s dx (overwritten)", what);
	near_dev(name, dxo, gdx, nx);
	/* parameters only (dx NULL) */
	CHECK_OK(gpu.be->zero(&gpu, gdg, c * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->bn_backward(&gpu, &d, gx, ggam, gsm, gsi, gdy, NULL,
				     gdg, NULL, &err),
		 &err);
	snprintf(name, sizeof(name), "%s dgamma (dx NULL)", what);
	near_dev(name, dg, gdg, c);

	/* frozen backward, both modes */
	memcpy(dxa, dx0, nx * sizeof(float));
	CHECK_OK(nn_cpu_bn_backward_frozen(&cpu, &d, x, gam, rm, rv, dy, dxa, dg,
					   dbt, &err),
		 &err);
	cpu.dx_overwrite = 1;
	for (size_t i = 0; i < nx; i++)
		dxo[i] = NAN;
	CHECK_OK(nn_cpu_bn_backward_frozen(&cpu, &d, x, gam, rm, rv, dy, dxo,
					   NULL, NULL, &err),
		 &err);
	cpu.dx_overwrite = 0;
	CHECK_OK(gpu.be->to_device(&gpu, gdx, dx0, nx * sizeof(float), &err),
		 &err);
	CHECK_OK(gpu.be->bn_backward_frozen(&gpu, &d, gx, ggam, grm, grv, gdy,
					    gdx, gdg, gdb, &err),
		 &err);
	snprintf(name, sizeof(name), "%s frozen dx (accumulated)", what);
	near_dev(name, dxa, gdx, nx);
	snprintf(name, sizeof(name), "%s frozen dgamma", what);
	near_dev(name, dg, gdg, c);
	snprintf(name, sizeof(name), "%s frozen dbeta", what);
	near_dev(name, dbt, gdb, c);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, nx * sizeof(float), &err),
		 &err);
	gpu.dx_overwrite = 1;
	CHECK_OK(gpu.be->bn_backward_frozen(&gpu, &d, gx, ggam, grm, grv, gdy,
					    gdx, NULL, NULL, &err),
		 &err);
	gpu.dx_overwrite = 0;
	snprintf(name, sizeof(name), "%s frozen dx (overwritten)", what);
	near_dev(name, dxo, gdx, nx);

	dfree(gx), dfree(ggam), dfree(gbet), dfree(grm), dfree(grv);
	dfree(gsm), dfree(gsi), dfree(gy), dfree(gdy), dfree(gdx), dfree(gdg);
	dfree(gdb);
	free(x), free(dy), free(dx0), free(gam), free(bet), free(rm), free(rv);
	free(y), free(crm), free(crv), free(sm), free(si), free(dxa), free(dxo);
	free(dg), free(dbt), free(nan_x);
}

static void test_batchnorm(void)
{
	bn_case(4, 3, 5, 0);
	bn_case(2, 16, 8, 3);
	bn_case(8, 5, 1, 0); /* H = W = 1: statistics over the batch only */
	bn_case(1, 2, 2, 0);

	/* one value per channel fails as on the CPU */
	nn_bn_desc d = {1, 2, 1, 1, 1e-5f, 0.1f, 0, 0};
	float *g = up(NULL, 64);
	CHECK_EQ_INT(gpu.be->bn_forward_train(&gpu, &d, g, g, g, g, g, g, g, g,
					      &err),
		     IMS_EINVAL);
	dfree(g);
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&cpu, 2, &err), &err);
	/* skipped only on a machine without a GPU (gpu_test.h) */
	int rc = gpu_test_open(&gpu, 0, &err);
	if (rc) {
		nn_ctx_release(&cpu);
		return rc;
	}
	/* parity: fp32 products, the same algorithms every run */
	gpu.tf32 = 0;
	gpu.conv_algo = NN_ALGO_DETERMINISTIC;
	test_conv();
	test_linear();
	test_batchnorm();
	test_elementwise();
	test_pool();
	test_xent();
	test_mixed();
	test_cl32();
	nn_ctx_release(&gpu);
	nn_ctx_release(&cpu);
	return TEST_EXIT();
}
