/*
 * test_cuda_kernels.c - the CUDA backend's own kernels (cuda_kernels.h)
 * against the CPU backend, run on the host (cuda_host_run.h): every
 * machine checks what the kernels compute, and the GPU tests
 * (test_backend_cuda) are left to check that the device runs them alike.
 * The batch-norm kernels are in test_cuda_kernels_bn.c, the tensors and
 * comparisons in cuda_kernels_test.c.
 *
 * Rules, as test_backend_cuda's:
 *  - ReLU, add, accumulate, dropout (values and mask), pooling (values,
 *    argmax, gradients), biases, the 16-bit conversions and the unscale
 *    check:
 *    the CPU's bits, in fp32, bf16 and fp16, over counts that leave a
 *    tail after the 16-byte vectors and with tensors off 16-byte
 *    alignment (the single-value kernels).
 *  - Channels-last batch norm (bn_nhwc.cu) against the CPU's twin (16
 *    bits: mixed.c; fp32: cl32.c): the statistics and dgamma/dbeta to
 *    1e-5 relative (both sum in double, in other orders), y and dx to one
 *    16-bit rounding step of each element (a float result on either side
 *    of a rounding boundary), in fp32 to 2^-20 relative (the evaluation
 *    formula's order differs by an ulp or two), at shapes that pick each
 *    of the kernels' paths. Pooling and the channels-last copies in fp32
 *    too.
 *  - Cross-entropy and its tally: the loss sum to 1e-12 relative, dlogits
 *    to 1e-6, the tally's hits, NaN step and bad-label step exactly.
 *  - Bias gradients (channel sums) to 1e-6 of a double sum; frozen batch
 *    norm's dx within one rounding, dgamma and dbeta to 1e-5.
 *  - SGD (momentum, Nesterov) and Adam(W) over three steps, the runs cut
 *    by train/optim.c for a device context: the host loops' bits.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "cuda_kernels_test.h"
#include "nn_test_util.h"

/* ---- elementwise.cu ---------------------------------------------------- */

static void elementwise_case(int prec, size_t n, int off)
{
	char what[64], name[128];
	snprintf(what, sizeof(what), "%s, %zu values, off %d", pname(prec), n,
		 off);
	cpu.precision = prec;
	tensor a = trand(prec, n, 0, 11, -1, 1, 1);
	tensor b = trand(prec, n, 0, 12, -1, 1, 0);
	tensor ka = tcopy(prec, &a, n, off), kb = tcopy(prec, &b, n, off);
	tensor y = tnew(prec, n, 0), ky = tnew(prec, n, off);

	CHECK_OK(cpu.be->add_forward(&cpu, n, a.p, b.p, y.p, &err), &err);
	KERNEL_OK(nn_cuda_k_add(NULL, prec, n, ka.p, kb.p, ky.p, 0));
	snprintf(name, sizeof(name), "add, %s", what);
	same_act(prec, name, y.p, ky.p, n);
	CHECK_OK(cpu.be->add_relu_forward(&cpu, n, a.p, b.p, y.p, &err), &err);
	KERNEL_OK(nn_cuda_k_add(NULL, prec, n, ka.p, kb.p, ky.p, 1));
	snprintf(name, sizeof(name), "add + relu, %s", what);
	same_act(prec, name, y.p, ky.p, n);
	CHECK_OK(cpu.be->add_forward(&cpu, n, a.p, b.p, y.p, &err), &err);
	KERNEL_OK(nn_cuda_k_add(NULL, prec, n, ka.p, kb.p, ky.p, 0));

	CHECK_OK(cpu.be->accumulate(&cpu, n, a.p, y.p, &err), &err);
	KERNEL_OK(nn_cuda_k_accumulate(NULL, prec, n, ka.p, ky.p));
	snprintf(name, sizeof(name), "accumulate, %s", what);
	same_act(prec, name, y.p, ky.p, n);

	CHECK_OK(cpu.be->relu_forward(&cpu, n, y.p, y.p, &err), &err);
	KERNEL_OK(nn_cuda_k_relu_forward(NULL, prec, n, ky.p, ky.p));
	snprintf(name, sizeof(name), "relu in place, %s", what);
	same_act(prec, name, y.p, ky.p, n);

	for (int over = 0; over < 2; over++) {
		tensor dx = tcopy(prec, &b, n, 0), kdx = tcopy(prec, &b, n, off);
		cpu.dx_overwrite = over;
		CHECK_OK(cpu.be->relu_backward(&cpu, n, y.p, a.p, dx.p, &err), &err);
		KERNEL_OK(nn_cuda_k_relu_backward(NULL, prec, n, ky.p, ka.p, kdx.p,
						  over));
		snprintf(name, sizeof(name), "relu dx (%s), %s",
			 over ? "overwritten" : "added to", what);
		same_act(prec, name, dx.p, kdx.p, n);

		/* dropout p 0.3 (mask), p 0 (a copy, no mask), and p 0.3
		 * as rank 2 of 3 with samples of the largest divisor of n
		 * up to 64 (the global index) */
		size_t per = 1;
		for (size_t d = 2; d <= 64; d++)
			if (n % d == 0)
				per = d;
		const nn_dropout_place at = {per, 2, 3};
		for (int k = 0; k < 3; k++) {
			const float p = k == 1 ? 0.0f : 0.3f;
			const nn_dropout_place *pl = k == 2 ? &at : NULL;
			uint8_t *mask = malloc(n), *kmask = malloc(n);
			cpu.dx_overwrite = 0;
			uint8_t *cm = k == 1 ? NULL : mask;
			CHECK_OK(cpu.be->dropout_forward(&cpu, n, p, 77, pl,
							 a.p, y.p, cm, &err),
				 &err);
			KERNEL_OK(nn_cuda_k_dropout_forward(
				NULL, prec, n, p, 1.0f / (1.0f - p), 77,
				pl ? pl->per_sample : n, pl ? pl->rank : 0,
				pl ? pl->world : 1, ka.p, ky.p,
				k == 1 ? NULL : kmask));
			snprintf(name, sizeof(name), "dropout p %g%s, %s",
				 (double)p, pl ? " (rank 2 of 3)" : "", what);
			same_act(prec, name, y.p, ky.p, n);
			if (k != 1)
				same(name, mask, kmask, n);
			cpu.dx_overwrite = over;
			CHECK_OK(cpu.be->dropout_backward(&cpu, n, p, mask, b.p, dx.p,
							  &err),
				 &err);
			KERNEL_OK(nn_cuda_k_dropout_backward(
				NULL, prec, n, 1.0f / (1.0f - p),
				k == 1 ? NULL : kmask, kb.p, kdx.p, over));
			snprintf(name, sizeof(name),
				 "dropout p %g%s dx (%s), %s", (double)p,
				 pl ? " (rank 2 of 3)" : "",
				 over ? "overwritten" : "added to", what);
			same_act(prec, name, dx.p, kdx.p, n);
			free(mask), free(kmask);
		}
		tfree(&dx), tfree(&kdx);
	}
	cpu.dx_overwrite = 0;
	cpu.precision = NN_PREC_FP32;
	tfree(&a), tfree(&b), tfree(&ka), tfree(&kb), tfree(&y), tfree(&ky);
}

/* the bias of a 16-bit product (round(y + b[c]) over planes; channels-
 * last calls it with n*hw rows of c and hw 1), an fp32 GEMM's bias rows,
 * and a weight gradient rounded to 16 bits in place */
static void bias_case(int prec)
{
	char name[64];
	const int n = 3, c = 5;
	const size_t hw = 37, cnt = (size_t)n * c * hw;
	float *b = nn_test_alloc(c), *want = nn_test_alloc(cnt);
	nn_test_fill(b, c, 61, -2, 2);
	tensor y = trand(prec, cnt, 0, 62, -1, 1, 0);
	for (size_t i = 0; i < cnt; i++)
		want[i] = tget(prec, y.p, i) + b[i / hw % c];
	tensor w = tnew(prec, cnt, 0);
	tset(prec, &w, want, cnt);
	KERNEL_OK(nn_cuda_k_add_bias(NULL, prec, n, c, hw, b, y.p));
	snprintf(name, sizeof(name), "%s add_bias", pname(prec));
	same_act(prec, name, w.p, y.p, cnt);
	tfree(&y), tfree(&w);
	if (prec == NN_PREC_FP32) {
		float *rows = nn_test_alloc(cnt);
		KERNEL_OK(nn_cuda_k_fill_rows(NULL, (int)(cnt / c), c, b, rows));
		for (size_t i = 0; i < cnt; i++)
			want[i] = b[i % c];
		same("fill_rows", want, rows, cnt * sizeof(float));
		free(rows);
	} else {
		float *g = nn_test_alloc(cnt);
		nn_test_fill(g, cnt, 63, -1000, 1000);
		for (size_t i = 0; i < cnt; i++)
			want[i] = prec == NN_PREC_BF16
					  ? ims_bf16_to_f32(ims_f32_to_bf16(g[i]))
					  : ims_f16_to_f32(ims_f32_to_f16(g[i]));
		KERNEL_OK(nn_cuda_k_round_f32(NULL, prec, cnt, g));
		snprintf(name, sizeof(name), "%s round_f32", pname(prec));
		same_act(NN_PREC_FP32, name, want, g, cnt);
		free(g);
	}
	free(b), free(want);
}

static void test_elementwise(void)
{
	for (int prec = NN_PREC_FP32; prec <= NN_PREC_FP16; prec++)
		bias_case(prec);
	for (int prec = NN_PREC_FP32; prec <= NN_PREC_FP16; prec++) {
		elementwise_case(prec, 5, 0);
		elementwise_case(prec, 1003, 0); /* vectors and a tail */
		elementwise_case(prec, 1003, 1); /* unaligned: one value at a time */
		elementwise_case(prec, 4096, 0);
	}
}

/* ---- pool.cu ----------------------------------------------------------- */

static void pool_case(int prec, nn_pool_desc d, int max, const char *shape)
{
	char what[96], name[160];
	snprintf(what, sizeof(what), "%s %s %s%s", pname(prec),
		 max ? "maxpool" : "avgpool", shape, d.nhwc ? " nhwc" : "");
	const size_t nx = (size_t)d.n * d.c * d.h_in * d.w_in;
	const size_t ny = (size_t)d.n * d.c * d.h_out * d.w_out;
	cpu.precision = prec;
	tensor x = trand(prec, nx, 0, 31, -1, 1, 0);
	tensor dy = trand(prec, ny, 0, 32, -1, 1, 0);
	tensor y = tnew(prec, ny, 0), ky = tnew(prec, ny, 0);
	int32_t *am = calloc(ny, sizeof(int32_t)), *kam = calloc(ny, sizeof(int32_t));
	if (max) {
		CHECK_OK(cpu.be->maxpool_forward(&cpu, &d, x.p, y.p, am, &err), &err);
		KERNEL_OK(nn_cuda_k_maxpool_forward(NULL, prec, &d, x.p, ky.p, kam));
		snprintf(name, sizeof(name), "%s: argmax", what);
		same(name, am, kam, ny * sizeof(int32_t));
	} else {
		CHECK_OK(cpu.be->avgpool_forward(&cpu, &d, x.p, y.p, &err), &err);
		KERNEL_OK(nn_cuda_k_avgpool_forward(NULL, prec, &d, x.p, ky.p));
	}
	snprintf(name, sizeof(name), "%s: y", what);
	same_act(prec, name, y.p, ky.p, ny);
	for (int over = 0; over < 2; over++) {
		tensor dx = tcopy(prec, &x, nx, 0), kdx = tcopy(prec, &x, nx, 0);
		cpu.dx_overwrite = over;
		if (max) {
			CHECK_OK(cpu.be->maxpool_backward(&cpu, &d, am, dy.p, dx.p,
							  &err),
				 &err);
			KERNEL_OK(nn_cuda_k_maxpool_backward(NULL, prec, &d, kam,
							     dy.p, kdx.p, over));
		} else {
			CHECK_OK(cpu.be->avgpool_backward(&cpu, &d, dy.p, dx.p, &err),
				 &err);
			KERNEL_OK(nn_cuda_k_avgpool_backward(NULL, prec, &d, dy.p,
							     kdx.p, over));
		}
		snprintf(name, sizeof(name), "%s: dx (%s)", what,
			 over ? "overwritten" : "added to");
		same_act(prec, name, dx.p, kdx.p, nx);
		tfree(&dx), tfree(&kdx);
	}
	cpu.dx_overwrite = 0;
	cpu.precision = NN_PREC_FP32;
	free(am), free(kam);
	tfree(&x), tfree(&dy), tfree(&y), tfree(&ky);
}

static void test_pool(void)
{
	for (int prec = NN_PREC_FP32; prec <= NN_PREC_FP16; prec++)
		for (int nhwc = 0; nhwc < 2; nhwc++) {
			nn_pool_desc d;
			CHECK_OK(nn_pool_desc_init(&d, 2, 5, 9, 9, 3, 2, 1, &err),
				 &err);
			d.nhwc = nhwc;
			pool_case(prec, d, 1, "3x3/2 pad 1");
			CHECK_OK(nn_pool_desc_init(&d, 2, 5, 8, 8, 2, 2, 0, &err),
				 &err);
			d.nhwc = nhwc;
			pool_case(prec, d, 0, "2x2/2");
			CHECK_OK(nn_pool_desc_init_adaptive(&d, 2, 5, 7, 7, 1, 1,
							    &err),
				 &err);
			d.nhwc = nhwc;
			pool_case(prec, d, 0, "adaptive 1x1");
			CHECK_OK(nn_pool_desc_init_adaptive(&d, 2, 5, 7, 9, 3, 2,
							    &err),
				 &err);
			d.nhwc = nhwc;
			pool_case(prec, d, 0, "adaptive 3x2");
		}
}

/* ---- half.cu ----------------------------------------------------------- */

/* fp32 channels-last's copies: the input and weights transposed, and the
 * weight gradient back */
static void cl32_copy_case(void)
{
	const size_t n = 3 * 7 * 47;
	float *f = nn_test_alloc(n), *want = nn_test_alloc(n);
	float *got = nn_test_alloc(n), *back = nn_test_alloc(n);
	nn_test_fill(f, n, 45, -3, 3);
	CHECK_OK(cpu.be->act_from_f32_nhwc(&cpu, 3, 7, 47, f, want, &err), &err);
	KERNEL_OK(nn_cuda_k_to_half_nhwc(NULL, NN_PREC_FP32, 3, 7, 47, f, got));
	same_act(NN_PREC_FP32, "fp32 channels-last copy", want, got, n);
	KERNEL_OK(nn_cuda_k_from_half_nhwc(NULL, NN_PREC_FP32, 3, 7, 47, got,
					   back, 0));
	same_act(NN_PREC_FP32, "fp32 channels-last copy, back", f, back, n);
	free(f), free(want), free(got), free(back);
}

static void half_case(int prec)
{
	char name[96];
	const size_t n = 3150; /* the largest channels-last shape below */
	cpu.precision = prec;
	float *f = nn_test_alloc(n);
	nn_test_fill(f, n, 41, -70000, 70000); /* fp16 overflows to Inf */
	f[0] = NAN, f[1] = -0.0f, f[2] = 1e-30f;
	tensor h = tnew(prec, n, 0), kh = tnew(prec, n, 0);
	CHECK_OK(cpu.be->act_from_f32(&cpu, n, f, h.p, &err), &err);
	KERNEL_OK(nn_cuda_k_to_half(NULL, prec, n, f, kh.p));
	snprintf(name, sizeof(name), "%s: rounded", pname(prec));
	same_act(prec, name, h.p, kh.p, n);
	float *w = nn_test_alloc(n), *kw = nn_test_alloc(n);
	CHECK_OK(cpu.be->act_to_f32(&cpu, n, h.p, w, &err), &err);
	KERNEL_OK(nn_cuda_k_from_half(NULL, prec, n, kh.p, kw, 0));
	snprintf(name, sizeof(name), "%s: widened", pname(prec));
	same_act(NN_PREC_FP32, name, w, kw, n);
	/* channels-last: 3 images of 7 channels x 47 values (a part of a
	 * tile each way), and a weight's shape, 5 x 70 channels x 3x3 (three
	 * channel tiles) */
	const int shapes[2][3] = {{3, 7, 47}, {5, 70, 9}};
	for (int k = 0; k < 2; k++) {
		const int in = shapes[k][0], ic = shapes[k][1], ihw = shapes[k][2];
		const size_t cnt = (size_t)in * ic * ihw, plane = (size_t)ic * ihw;
		CHECK_OK(cpu.be->act_from_f32_nhwc(&cpu, in, ic, ihw, f, h.p, &err),
			 &err);
		KERNEL_OK(nn_cuda_k_to_half_nhwc(NULL, prec, in, ic, ihw, f, kh.p));
		snprintf(name, sizeof(name), "%s: rounded channels-last %dx%dx%d",
			 pname(prec), in, ic, ihw);
		same_act(prec, name, h.p, kh.p, cnt);
		/* and back, added to: element (i, c, j) of the 16-bit copy
		 * returns to where it came from */
		memcpy(kw, f, cnt * sizeof(float));
		KERNEL_OK(nn_cuda_k_from_half_nhwc(NULL, prec, in, ic, ihw, kh.p, kw,
						   1));
		for (size_t i = 0; i < cnt; i++)
			w[i] = f[i] + tget(prec, h.p,
					   (i / plane) * plane +
						   (i % ihw) * ic + (i / ihw) % ic);
		snprintf(name, sizeof(name), "%s: widened from channels-last %dx%dx%d",
			 pname(prec), in, ic, ihw);
		same_act(NN_PREC_FP32, name, w, kw, cnt);
	}
	cpu.precision = NN_PREC_FP32;
	free(f), free(w), free(kw);
	tfree(&h), tfree(&kh);
}

static void unscale_case(size_t n, size_t bad_at, float bad)
{
	float *g = nn_test_alloc(n ? n : 1), *kg = nn_test_alloc(n ? n : 1);
	nn_test_fill(g, n, 51, -100, 100);
	if (bad_at < n)
		g[bad_at] = bad;
	memcpy(kg, g, n * sizeof(float));
	int found = -1, kfound = -1;
	CHECK_OK(nn_unscale_check(&cpu, g, n, 1.0f / 1024, &found, &err),
		 &err);
	KERNEL_OK(nn_cuda_k_unscale_check(NULL, n, kg, 1.0f / 1024, &kfound));
	CHECK_EQ_INT(kfound, found);
	same_act(NN_PREC_FP32, "unscaled gradients", g, kg, n);
	free(g), free(kg);
}

static void test_half(void)
{
	half_case(NN_PREC_BF16);
	half_case(NN_PREC_FP16);
	cl32_copy_case();
	unscale_case(1003, 1003, 0);
	unscale_case(1003, 500, INFINITY);
	unscale_case(1003, 0, NAN);
	unscale_case(0, 0, 0);
}

/* ---- softmax_xent.cu --------------------------------------------------- */

static void xent_case(int n, int k, float smoothing)
{
	char name[96];
	const size_t nz = (size_t)n * k;
	float *z = nn_test_alloc(nz), *g = nn_test_alloc(nz);
	float *kg = nn_test_alloc(nz);
	int32_t *labels = calloc((size_t)n, sizeof(int32_t));
	nn_test_fill(z, nz, 61, -5, 5);
	for (int i = 0; i < n; i++)
		labels[i] = (int32_t)((i * 7919u) % (unsigned)k);
	double loss = 0;
	CHECK_OK(nn_cpu_softmax_xent(&cpu, n, k, z, labels, smoothing, 1.0f / n,
				     &loss, g, &err),
		 &err);
	void *ws = malloc(nn_cuda_k_xent_workspace(n));
	nn_cuda_xent_result r;
	KERNEL_OK(nn_cuda_k_xent(NULL, n, k, z, labels, smoothing, 1.0f / n, kg,
				 ws, &r));
	snprintf(name, sizeof(name), "xent n %d k %d smoothing %g: dlogits", n,
		 k, (double)smoothing);
	near(name, g, kg, nz, 1e-6, 1e-6);
	CHECK_NEAR(r.loss_sum, loss, 1e-12 * fabs(loss));
	CHECK_EQ_INT(r.bad_sample, -1);
	/* a bad label: found, and dlogits left alone */
	labels[n / 2] = k;
	memset(kg, 0, nz * sizeof(float));
	KERNEL_OK(nn_cuda_k_xent(NULL, n, k, z, labels, smoothing, 1.0f / n, kg,
				 ws, &r));
	CHECK_EQ_INT(r.bad_sample, n / 2);
	CHECK_EQ_INT(r.bad_label, k);
	CHECK_EQ_INT(kg[0] == 0.0f && kg[nz - 1] == 0.0f, 1);
	free(ws), free(z), free(g), free(kg), free(labels);
}

/* The tally (nn_xent_tally's kernels): three steps added up, a NaN
 * loss's step noted, a bad label's step noted with nothing else changed */
static void tally_case(int n, int k, float smoothing)
{
	char name[96];
	snprintf(name, sizeof(name), "xent tally n %d k %d: dlogits", n, k);
	const size_t nz = (size_t)n * k;
	float *z = nn_test_alloc(nz), *g = nn_test_alloc(nz);
	float *kg = nn_test_alloc(nz);
	int32_t *labels = calloc((size_t)n, sizeof(int32_t));
	void *ws = malloc(nn_cuda_k_xent_tally_workspace(n));
	nn_tally ct = {0}, kt = {0};
	for (int step = 1; step <= 3; step++) {
		nn_test_tally_inputs(z, labels, n, k, step);
		CHECK_OK(nn_cpu_xent_tally(&cpu, n, k, z, labels, smoothing,
					   1.0f / n, g, step, &ct, &err),
			 &err);
		KERNEL_OK(nn_cuda_k_xent_tally(NULL, n, k, z, labels, smoothing,
					       1.0f / n, kg, step, ws, &kt));
		if (step != 2)
			near(name, g, kg, nz, 1e-6, 1e-6);
	}
	CHECK(isnan(ct.loss_sum) && isnan(kt.loss_sum));
	CHECK_EQ_INT((int)kt.correct, (int)ct.correct);
	CHECK_EQ_INT((int)kt.nonfinite_step, 2);
	CHECK_EQ_INT((int)kt.bad_label_step, 0);
	nn_tally c2 = {0}, k2 = {0};
	CHECK_OK(nn_cpu_xent_tally(&cpu, n, k, z, labels, smoothing, 1.0f / n,
				   g, 4, &c2, &err),
		 &err);
	KERNEL_OK(nn_cuda_k_xent_tally(NULL, n, k, z, labels, smoothing,
				       1.0f / n, kg, 4, ws, &k2));
	CHECK_NEAR(k2.loss_sum, c2.loss_sum, 1e-12 * fabs(c2.loss_sum));
	CHECK_EQ_INT((int)k2.correct, (int)c2.correct);
	labels[n - 1] = k;
	memcpy(g, kg, nz * sizeof(float));
	KERNEL_OK(nn_cuda_k_xent_tally(NULL, n, k, z, labels, smoothing,
				       1.0f / n, kg, 5, ws, &k2));
	CHECK_EQ_INT((int)k2.bad_label_step, 5);
	CHECK_EQ_INT((int)k2.correct, (int)c2.correct);
	same("tally: dlogits left alone after a bad label", g, kg,
	     nz * sizeof(float));
	free(ws), free(z), free(g), free(kg), free(labels);
}

static void test_xent(void)
{
	tally_case(6, 10, 0);
	tally_case(33, 1000, 0.1f);
	xent_case(4, 10, 0);
	xent_case(33, 1000, 0.1f);
	xent_case(1, 2, 0.5f);
}

/* ---- optim.cu ---------------------------------------------------------- */

/* A context whose update entries are the kernels: train/optim.c then cuts
 * its batches of runs as it does for a device and hands them over. */
static nn_backend kernel_be;
static nn_ctx kernel_ctx;

static int k_sgd(nn_ctx *c, float *p, const float *g, float *buf,
		 const nn_optim_runs *r, float wd, float mom, int first,
		 int nesterov, float neg_lr, ims_error *e)
{
	(void)c;
	cudaError_t rc = nn_cuda_k_sgd(NULL, p, g, buf, r, wd, mom, first,
				       nesterov, neg_lr);
	return rc == cudaSuccess ? 0 : ims_fail(e, IMS_EIO, "sgd kernel: %d", rc);
}

static int k_adam(nn_ctx *c, float *p, const float *g, float *m, float *v,
		  const nn_optim_runs *r, const nn_adam_scalars *sc, float l2,
		  int decoupled, ims_error *e)
{
	(void)c;
	cudaError_t rc = nn_cuda_k_adam(NULL, p, g, m, v, r, sc, l2, decoupled);
	return rc == cudaSuccess ? 0 : ims_fail(e, IMS_EIO, "adam kernel: %d", rc);
}

/* three steps of the host loops and of the kernels: the same bits in the
 * parameters and every state buffer */
static void optim_case(int kind, int nesterov, double wd,
		       const nn_optim_segment *segs, size_t nsegs, size_t n)
{
	float *p = nn_test_alloc(n), *kp = nn_test_alloc(n);
	float *g = nn_test_alloc(n);
	nn_test_fill(p, n, 11 + (uint64_t)kind, -1, 1);
	memcpy(kp, p, n * sizeof(float));
	nn_optim_opts o;
	nn_optim_opts_init(&o, kind);
	if (kind == NN_OPTIM_SGD) {
		o.momentum = 0.9;
		o.nesterov = nesterov;
	}
	o.weight_decay = wd;
	nn_optim *host = NULL, *k = NULL;
	CHECK_OK(nn_optim_create(&o, n, &host, &err), &err);
	o.ctx = &kernel_ctx;
	CHECK_OK(nn_optim_create(&o, n, &k, &err), &err);
	for (int step = 0; step < 3; step++) {
		nn_test_fill(g, n, 100 + (uint64_t)step, -0.5f, 0.5f);
		const double lr = 0.1 / (step + 1);
		CHECK_OK(nn_optim_step(host, p, g, segs, nsegs, lr, &err), &err);
		CHECK_OK(nn_optim_step(k, kp, g, segs, nsegs, lr, &err), &err);
	}
	char name[96];
	snprintf(name, sizeof(name), "optimiser %d%s, %zu segments", kind,
		 nesterov ? " nesterov" : "", nsegs);
	same(name, p, kp, n * sizeof(float));
	for (size_t i = 0; i < nn_optim_state_count(host); i++)
		same(name, nn_optim_state(host, i), nn_optim_state(k, i),
		     n * sizeof(float));
	nn_optim_free(host);
	nn_optim_free(k);
	free(p), free(kp), free(g);
}

static void test_optim(void)
{
	kernel_be = *cpu.be;
	kernel_be.sgd_update = k_sgd;
	kernel_be.adam_update = k_adam;
	CHECK_OK(nn_ctx_init_cpu(&kernel_ctx, 1, &err), &err);
	kernel_ctx.be = &kernel_be;
	const nn_optim_segment three[3] = {
		{0, 4000, 1, 1},    /* decay */
		{4000, 3000, 0, 1}, /* no decay (batch norm, bias) */
		{7000, 2000, 1, 0}, /* frozen */
	};
	optim_case(NN_OPTIM_SGD, 0, 1e-4, three, 3, 10003);
	optim_case(NN_OPTIM_SGD, 1, 5e-4, three, 3, 10003);
	optim_case(NN_OPTIM_ADAM, 0, 1e-2, three, 3, 10003);
	optim_case(NN_OPTIM_ADAMW, 0, 1e-2, three, 3, 10003);
	/* 300 tensors, gaps, frozen and undecayed ones: two batches of runs */
	enum { NS = 300 };
	size_t n;
	nn_optim_segment *many = nn_test_segments(NS, 900, &n);
	optim_case(NN_OPTIM_SGD, 1, 5e-4, many, NS, n);
	optim_case(NN_OPTIM_ADAMW, 0, 1e-2, many, NS, n);
	free(many);
	kernel_ctx.be = cpu.be;
	nn_ctx_release(&kernel_ctx);
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&cpu, 1, &err), &err);
	test_elementwise();
	test_bn_nhwc();
	test_pool();
	test_half();
	test_xent();
	test_reduce();
	test_optim();
	nn_ctx_release(&cpu);
	return TEST_EXIT();
}
