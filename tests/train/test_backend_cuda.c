/*
 * test_backend_cuda.c - every entry of the CUDA backend against the CPU
 * backend (the reference) on random inputs: forward and backward, several
 * shapes per layer, accumulating and overwriting dx, NULL dx/dw/db.
 * On a machine without a GPU (or in a build without the CUDA backend) it
 * prints one line and exits 77 (skipped); on a GPU host that cannot run
 * it, and with IMSHARD_REQUIRE_GPU=1, it fails (gpu_test.h).
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

#include "common/common.h"
#include "nn_test_util.h"
#include "gpu_test.h"
#include "test.h"
#include "train/nn_internal.h"

#define RTOL 1e-4
#define FLOOR 1e-2
#define TOL_BF16 1e-2
#define TOL_FP16 2e-3

static nn_ctx cpu, gpu;
static ims_error err;
/* the 16-bit cases' layout: 1 runs them channels-last (descriptors'
 * nhwc) on both backends, the CPU's twin the reference */
static int cl;

/* ---- device helpers ---------------------------------------------------- */

static void *up_bytes(const void *h, size_t bytes)
{
	void *d = gpu.be->alloc(&gpu, bytes);
	if (!d) {
		fprintf(stderr, "out of device memory (%zu bytes)\n", bytes);
		exit(1);
	}
	if (h && bytes && gpu.be->to_device(&gpu, d, h, bytes, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	return d;
}

static float *up(const float *h, size_t n)
{
	return up_bytes(h, n * sizeof(float));
}

/* A host copy of n floats (or bytes) of device memory; the caller frees. */
static void *down_bytes(const void *d, size_t bytes)
{
	void *h = malloc(bytes ? bytes : 1);
	if (!h || (bytes && gpu.be->to_host(&gpu, h, d, bytes, &err))) {
		fprintf(stderr, "cannot copy from the device: %s\n", err.msg);
		exit(1);
	}
	return h;
}

static float *down(const float *d, size_t n)
{
	return down_bytes(d, n * sizeof(float));
}

static void dfree(void *d)
{
	gpu.be->free(&gpu, d);
}

static float *host_copy(const float *h, size_t n)
{
	float *c = nn_test_alloc(n);
	memcpy(c, h, n * sizeof(float));
	return c;
}

static float *filled(size_t n, float v)
{
	float *c = nn_test_alloc(n);
	for (size_t i = 0; i < n; i++)
		c[i] = v;
	return c;
}

/* ---- comparisons ------------------------------------------------------- */

/* The stated tolerance; prints the first few failures. */
static int near(const char *what, const float *want, const float *got,
		size_t n)
{
	double scale = 0;
	for (size_t i = 0; i < n; i++)
		scale = fmax(scale, fabs((double)want[i]));
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		double a = want[i], b = got[i];
		double ref = fmax(fmax(fabs(a), fabs(b)), FLOOR * scale);
		if (!(fabs(a - b) <= RTOL * ref) && !(a == b)) {
			if (bad < 5)
				fprintf(stderr, "%s[%zu]: cpu %.9g, cuda %.9g\n",
					what, i, a, b);
			bad++;
		}
	}
	if (bad)
		fprintf(stderr, "%s: %d of %zu outside tolerance\n", what, bad, n);
	test_checks_++;
	test_failures_ += bad != 0;
	return bad;
}

/* The same bits (NaN included). */
static int same(const char *what, const void *want, const void *got,
		size_t bytes)
{
	test_checks_++;
	if (!memcmp(want, got, bytes))
		return 0;
	const uint8_t *a = want, *b = got;
	size_t i = 0;
	while (a[i] == b[i])
		i++;
	fprintf(stderr, "%s: differs from byte %zu of %zu\n", what, i, bytes);
	test_failures_++;
	return 1;
}

/* The same floats: equal bits, or both NaN (a NaN's payload may differ:
 * the GPU's arithmetic returns its canonical NaN). */
static int same_floats(const char *what, const float *want, const float *got,
		       size_t n)
{
	test_checks_++;
	for (size_t i = 0; i < n; i++) {
		if (isnan(want[i]) && isnan(got[i]))
			continue;
		if (memcmp(&want[i], &got[i], sizeof(float))) {
			fprintf(stderr, "%s[%zu]: cpu %.9g, cuda %.9g (of %zu)\n",
				what, i, (double)want[i], (double)got[i], n);
			test_failures_++;
			return 1;
		}
	}
	return 0;
}

/* A device result against a host one, then freed. */
static void near_dev(const char *what, const float *want, float *d, size_t n)
{
	float *h = down(d, n);
	near(what, want, h, n);
	free(h);
}

static void same_dev(const char *what, const void *want, void *d,
		     size_t bytes)
{
	void *h = down_bytes(d, bytes);
	same(what, want, h, bytes);
	free(h);
}

static void same_dev_f(const char *what, const float *want, float *d,
		       size_t n)
{
	float *h = down(d, n);
	same_floats(what, want, h, n);
	free(h);
}

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

/*
 * fp32 channels-last (nhwc descriptors, the KRSC weight copy) against
 * the CPU's channels-last twin (train/layers/cl32.c): convolution y, dx
 * (accumulated), dw (c_out x c_in x kh x kw on both) and db; batch norm
 * y, running statistics, dx, dgamma, dbeta; max pooling y.
 */
static void cl32_case(int n, int c_in, int hw, int c_out, int k, int stride,
		      int bias)
{
	char what[96], name[160];
	snprintf(what, sizeof(what), "fp32 nhwc conv %dx%d s%d %dx%d %d->%d%s", k,
		 k, stride, hw, hw, c_in, c_out, bias ? " bias" : "");
	nn_conv_desc d;
	CHECK_OK(nn_conv_desc_init(&d, n, c_in, hw, hw, c_out, k, stride, k / 2,
				   1, 1, bias, &err),
		 &err);
	d.nhwc = 1;
	const size_t nx = (size_t)n * c_in * hw * hw;
	const size_t ny = (size_t)n * c_out * d.h_out * d.w_out;
	const size_t nw = (size_t)c_out * c_in * k * k;
	float *x = nn_test_alloc(nx), *w = nn_test_alloc(nw), *b = nn_test_alloc(c_out);
	float *dy = nn_test_alloc(ny), *dx = nn_test_alloc(nx), *y = nn_test_alloc(ny);
	float *dw = nn_test_alloc(nw), *db = nn_test_alloc(c_out);
	nn_test_fill(x, nx, 31, -1, 1);
	nn_test_fill(w, nw, 32, -0.5f, 0.5f);
	nn_test_fill(b, c_out, 33, -1, 1);
	nn_test_fill(dy, ny, 34, -1, 1);
	nn_test_fill(dx, nx, 35, -1, 1);
	float *gx = up(x, nx), *gw = up(w, nw), *gb = up(b, c_out);
	float *gdy = up(dy, ny), *gdx = up(dx, nx), *gy = up(NULL, ny);
	float *gdw = up(NULL, nw), *gdb = up(NULL, c_out);
	CHECK_OK(cpu.be->conv_forward(&cpu, &d, x, w, bias ? b : NULL, y, &err),
		 &err);
	CHECK_OK(cpu.be->conv_backward(&cpu, &d, x, w, dy, dx, dw,
				       bias ? db : NULL, &err),
		 &err);
	CHECK_OK(gpu.be->conv_forward(&gpu, &d, gx, gw, bias ? gb : NULL, gy,
				      &err),
		 &err);
	CHECK_OK(gpu.be->conv_backward(&gpu, &d, gx, gw, gdy, gdx, gdw,
				       bias ? gdb : NULL, &err),
		 &err);
	snprintf(name, sizeof(name), "%s y", what);
	near_dev(name, y, gy, ny);
	snprintf(name, sizeof(name), "%s dx (accumulated)", what);
	near_dev(name, dx, gdx, nx);
	snprintf(name, sizeof(name), "%s dw", what);
	near_dev(name, dw, gdw, nw);
	if (bias) {
		snprintf(name, sizeof(name), "%s db", what);
		near_dev(name, db, gdb, c_out);
	}
	/* the output's batch norm (then its pooling), channels-last */
	const int c = c_out, ho = d.h_out;
	nn_bn_desc bd = {n, c, ho, ho, 1e-5f, 0.1f, 1, 0};
	float *g = filled(c, 1.25f), *be = filled(c, 0.5f), *st = filled(4 * (size_t)c, 1);
	float *dg = nn_test_alloc(c), *dbe = nn_test_alloc(c), *by = nn_test_alloc(ny);
	float *gg = up(g, c), *gbe = up(be, c), *gst = up(st, 4 * (size_t)c);
	float *gdg = up(NULL, c), *gdbe = up(NULL, c), *gby = up(NULL, ny);
	CHECK_OK(cpu.be->bn_forward_train(&cpu, &bd, y, g, be, st, st + c,
					  st + 2 * c, st + 3 * c, by, &err),
		 &err);
	CHECK_OK(gpu.be->bn_forward_train(&gpu, &bd, gy, gg, gbe, gst, gst + c,
					  gst + 2 * c, gst + 3 * c, gby, &err),
		 &err);
	snprintf(name, sizeof(name), "%s, bn y", what);
	near_dev(name, by, gby, ny);
	snprintf(name, sizeof(name), "%s, bn statistics", what);
	near_dev(name, st, gst, 4 * (size_t)c);
	CHECK_OK(cpu.be->bn_backward(&cpu, &bd, y, g, st + 2 * c, st + 3 * c, dy,
				     by, dg, dbe, &err),
		 &err);
	CHECK_OK(gpu.be->bn_backward(&gpu, &bd, gy, gg, gst + 2 * c, gst + 3 * c,
				     gdy, gby, gdg, gdbe, &err),
		 &err);
	snprintf(name, sizeof(name), "%s, bn dx", what);
	near_dev(name, by, gby, ny);
	snprintf(name, sizeof(name), "%s, bn dgamma", what);
	near_dev(name, dg, gdg, c);
	snprintf(name, sizeof(name), "%s, bn dbeta", what);
	near_dev(name, dbe, gdbe, c);
	dfree(gx), dfree(gw), dfree(gb), dfree(gdy), dfree(gdx), dfree(gy);
	dfree(gdw), dfree(gdb), dfree(gg), dfree(gbe), dfree(gst), dfree(gdg);
	dfree(gdbe), dfree(gby);
	free(x), free(w), free(b), free(dy), free(dx), free(y), free(dw), free(db);
	free(g), free(be), free(st), free(dg), free(dbe), free(by);
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
	/* fp32 channels-last: n, c_in, hw, c_out, k, stride, bias */
	cl32_case(2, 8, 9, 16, 3, 1, 1);
	cl32_case(2, 16, 8, 32, 1, 2, 0);
	cl32_case(2, 3, 23, 8, 7, 2, 0);

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

/* ---- mixed precision: 16-bit activations against the CPU's ---------- */

static const char *prec_name(int prec)
{
	return prec == NN_PREC_BF16 ? "bf16" : "fp16";
}

static uint16_t *h16(int prec, const float *f, size_t n)
{
	uint16_t *h = malloc((n ? n : 1) * sizeof(uint16_t));
	CHECK(h != NULL);
	for (size_t i = 0; i < n; i++)
		h[i] = prec == NN_PREC_BF16 ? ims_f32_to_bf16(f[i])
					    : ims_f32_to_f16(f[i]);
	return h;
}

static uint16_t *h16_nan(int prec, size_t n)
{
	uint16_t *h = malloc((n ? n : 1) * sizeof(uint16_t));
	CHECK(h != NULL);
	for (size_t i = 0; i < n; i++)
		h[i] = prec == NN_PREC_BF16 ? 0x7fc0 : 0x7e00;
	return h;
}

static float *widen16(int prec, const uint16_t *h, size_t n)
{
	float *f = nn_test_alloc(n);
	for (size_t i = 0; i < n; i++)
		f[i] = prec == NN_PREC_BF16 ? ims_bf16_to_f32(h[i])
					    : ims_f16_to_f32(h[i]);
	return f;
}

/* |got - want|_2 <= tol |want|_2 on floats */
static void near_norm(const char *what, const float *want, const float *got,
		      size_t n, double tol)
{
	double diff = 0, norm = 0;
	for (size_t i = 0; i < n; i++) {
		double e = (double)got[i] - (double)want[i];
		diff += e * e;
		norm += (double)want[i] * (double)want[i];
	}
	diff = sqrt(diff);
	norm = sqrt(norm);
	test_checks_++;
	if (!(diff <= tol * norm)) {
		fprintf(stderr, "%s: |cuda - cpu| %.3g, |cpu| %.3g: %.3g relative, "
			"tolerance %.3g\n", what, diff, norm,
			norm > 0 ? diff / norm : diff, tol);
		test_failures_++;
	}
}

/* A 16-bit device tensor against the CPU's 16-bit result, by norm. */
static void near16_dev(int prec, const char *what, const uint16_t *want,
		       void *d, size_t n, double tol)
{
	uint16_t *got = down_bytes(d, n * sizeof(uint16_t));
	float *w = widen16(prec, want, n), *g = widen16(prec, got, n);
	near_norm(what, w, g, n, tol);
	free(got), free(w), free(g);
}

static void near_f_dev(const char *what, const float *want, float *d,
		       size_t n, double tol)
{
	float *got = down(d, n);
	near_norm(what, want, got, n, tol);
	free(got);
}

/*
 * Convolution or linear layer in 16 bits: the same 16-bit inputs on both
 * backends, y, dx (accumulated and overwritten), dw and db compared by
 * norm.
 */
typedef struct half_layer {
	int conv;
	nn_conv_desc cd;
	nn_linear_desc ld;
	size_t nx, nw, ny, nb;
	int bias;
} half_layer;

static int hl_fwd(nn_ctx *c, const half_layer *L, const void *x,
		  const void *w, const float *b, void *y)
{
	return L->conv ? c->be->conv_forward(c, &L->cd, x, w, b, y, &err)
		       : c->be->linear_forward(c, &L->ld, x, w, b, y, &err);
}

static int hl_bwd(nn_ctx *c, const half_layer *L, const void *x,
		  const void *w, const void *dy, void *dx, float *dw, float *db)
{
	return L->conv
		       ? c->be->conv_backward(c, &L->cd, x, w, dy, dx, dw, db, &err)
		       : c->be->linear_backward(c, &L->ld, x, w, dy, dx, dw, db,
						&err);
}

static void half_layer_case(int prec, const half_layer *L, const char *what)
{
	const double tol = prec == NN_PREC_BF16 ? TOL_BF16 : TOL_FP16;
	char name[240];
	float *x = nn_test_alloc(L->nx), *w = nn_test_alloc(L->nw);
	float *b = nn_test_alloc(L->nb), *dy = nn_test_alloc(L->ny);
	float *dx0 = nn_test_alloc(L->nx);
	nn_test_fill(x, L->nx, 41, -1, 1);
	nn_test_fill(w, L->nw, 42, -0.5f, 0.5f);
	nn_test_fill(b, L->nb, 43, -1, 1);
	nn_test_fill(dy, L->ny, 44, -1, 1);
	nn_test_fill(dx0, L->nx, 45, -1, 1);
	uint16_t *xh = h16(prec, x, L->nx), *wh = h16(prec, w, L->nw);
	uint16_t *dyh = h16(prec, dy, L->ny), *dxa = h16(prec, dx0, L->nx);
	uint16_t *y = h16_nan(prec, L->ny), *dxo = h16_nan(prec, L->nx);
	float *dw = nn_test_alloc(L->nw), *db = nn_test_alloc(L->nb);
	const float *bb = L->bias ? b : NULL;
	cpu.precision = gpu.precision = prec;
	/* the CPU's mixed-precision graph, the reference */
	CHECK_OK(hl_fwd(&cpu, L, xh, wh, bb, y), &err);
	CHECK_OK(hl_bwd(&cpu, L, xh, wh, dyh, dxa, dw, L->bias ? db : NULL),
		 &err);
	cpu.dx_overwrite = 1;
	CHECK_OK(hl_bwd(&cpu, L, xh, wh, dyh, dxo, NULL, NULL), &err);
	cpu.dx_overwrite = 0;

	const size_t h2 = sizeof(uint16_t);
	uint16_t *dx0h = h16(prec, dx0, L->nx);
	void *gx = up_bytes(xh, L->nx * h2), *gw = up_bytes(wh, L->nw * h2);
	void *gdy = up_bytes(dyh, L->ny * h2), *gy = up_bytes(NULL, L->ny * h2);
	void *gdx = up_bytes(dx0h, L->nx * h2);
	float *gb = up(b, L->nb), *gdw = up(NULL, L->nw), *gdb = up(NULL, L->nb);
	CHECK_OK(hl_fwd(&gpu, L, gx, gw, L->bias ? gb : NULL, gy), &err);
	snprintf(name, sizeof(name), "%s y", what);
	near16_dev(prec, name, y, gy, L->ny, tol);
	CHECK_OK(hl_bwd(&gpu, L, gx, gw, gdy, gdx, gdw, L->bias ? gdb : NULL),
		 &err);
	snprintf(name, sizeof(name), "%s dx (accumulated)", what);
	near16_dev(prec, name, dxa, gdx, L->nx, tol);
	snprintf(name, sizeof(name), "%s dw", what);
	near_f_dev(name, dw, gdw, L->nw, tol);
	if (L->bias) {
		snprintf(name, sizeof(name), "%s db", what);
		near_f_dev(name, db, gdb, L->nb, tol);
	}
	uint16_t *nan_x = h16_nan(prec, L->nx);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, L->nx * h2, &err), &err);
	gpu.dx_overwrite = 1;
	CHECK_OK(hl_bwd(&gpu, L, gx, gw, gdy, gdx, NULL, NULL), &err);
	gpu.dx_overwrite = 0;
	snprintf(name, sizeof(name), "%s dx (overwritten)", what);
	near16_dev(prec, name, dxo, gdx, L->nx, tol);
	cpu.precision = gpu.precision = NN_PREC_FP32;

	dfree(gx), dfree(gw), dfree(gb), dfree(gdy), dfree(gy), dfree(gdx);
	dfree(gdw), dfree(gdb);
	free(x), free(w), free(b), free(dy), free(dx0), free(xh), free(wh);
	free(dyh), free(dxa), free(y), free(dxo), free(dw), free(db);
	free(dx0h), free(nan_x);
}

static void conv_half_case(int prec, int n, int c_in, int hw, int c_out, int k,
			   int stride, int pad, int groups, int bias)
{
	char what[160];
	snprintf(what, sizeof(what), "%s%s conv n%d c%d->%d %dx%d k%d s%d p%d g%d b%d",
		 prec_name(prec), cl ? " nhwc" : "", n, c_in, c_out, hw, hw, k,
		 stride, pad, groups, bias);
	half_layer L;
	memset(&L, 0, sizeof(L));
	L.conv = 1;
	CHECK_OK(nn_conv_desc_init(&L.cd, n, c_in, hw, hw, c_out, k, stride, pad,
				   1, groups, bias, &err),
		 &err);
	L.cd.nhwc = cl;
	L.nx = (size_t)n * c_in * hw * hw;
	L.ny = (size_t)n * c_out * L.cd.h_out * L.cd.w_out;
	L.nw = (size_t)c_out * (c_in / groups) * k * k;
	L.nb = (size_t)c_out;
	L.bias = bias;
	half_layer_case(prec, &L, what);
}

static void linear_half_case(int prec, int n, int in, int out, int bias)
{
	char what[96];
	snprintf(what, sizeof(what), "%s linear n%d %d->%d b%d", prec_name(prec),
		 n, in, out, bias);
	half_layer L;
	memset(&L, 0, sizeof(L));
	L.ld = (nn_linear_desc){n, in, out, bias};
	L.nx = (size_t)n * in;
	L.ny = (size_t)n * out;
	L.nw = (size_t)out * in;
	L.nb = (size_t)out;
	L.bias = bias;
	half_layer_case(prec, &L, what);
}

/* Batch norm, ReLU, add, accumulate and max pooling in 16 bits against
 * the CPU's: the elementwise ones bit for bit (one fp32 operation each,
 * rounded once), batch norm by norm, its fp32 statistics to RTOL. */
/* the precision's name, and the layout when channels-last */
static const char *pcl(int prec)
{
	if (!cl)
		return prec_name(prec);
	return prec == NN_PREC_BF16 ? "bf16 nhwc" : "fp16 nhwc";
}

static void half_other_case(int prec)
{
	const double tol = prec == NN_PREC_BF16 ? TOL_BF16 : TOL_FP16;
	const size_t h2 = sizeof(uint16_t);
	nn_bn_desc bd = {4, 8, 5, 5, 1e-5f, 0.1f, cl, 0};
	const size_t n = (size_t)4 * 8 * 5 * 5;
	float *x = nn_test_alloc(n), *dy = nn_test_alloc(n);
	float *g = nn_test_alloc(8), *be = nn_test_alloc(8);
	nn_test_fill(x, n, 71, -2, 3);
	nn_test_fill(dy, n, 72, -1, 1);
	nn_test_fill(g, 8, 73, 0.5f, 1.5f);
	nn_test_fill(be, 8, 74, -0.5f, 0.5f);
	uint16_t *xh = h16(prec, x, n), *dyh = h16(prec, dy, n);
	uint16_t *y = h16_nan(prec, n), *dx = h16(prec, dy, n);
	float rm[8] = {0}, rv[8] = {1, 1, 1, 1, 1, 1, 1, 1}, sm[8], si[8];
	float dg[8], db[8];
	cpu.precision = gpu.precision = prec;
	CHECK_OK(cpu.be->bn_forward_train(&cpu, &bd, xh, g, be, rm, rv, sm, si, y,
					  &err),
		 &err);
	CHECK_OK(cpu.be->bn_backward(&cpu, &bd, xh, g, sm, si, dyh, dx, dg, db,
				     &err),
		 &err);
	void *gx = up_bytes(xh, n * h2), *gy = up_bytes(NULL, n * h2);
	void *gdy = up_bytes(dyh, n * h2), *gdx = up_bytes(dyh, n * h2);
	float rv1[8] = {1, 1, 1, 1, 1, 1, 1, 1};
	float *gg = up(g, 8), *gbe = up(be, 8), *grm = up(NULL, 8);
	float *grv = up(rv1, 8), *gsm = up(NULL, 8), *gsi = up(NULL, 8);
	float *gdg = up(NULL, 8), *gdb = up(NULL, 8);
	CHECK_OK(gpu.be->bn_forward_train(&gpu, &bd, gx, gg, gbe, grm, grv, gsm,
					  gsi, gy, &err),
		 &err);
	CHECK_OK(gpu.be->bn_backward(&gpu, &bd, gx, gg, gsm, gsi, gdy, gdx, gdg,
				     gdb, &err),
		 &err);
	char name[96];
	snprintf(name, sizeof(name), "%s bn y", pcl(prec));
	near16_dev(prec, name, y, gy, n, tol);
	snprintf(name, sizeof(name), "%s bn dx (accumulated)", pcl(prec));
	near16_dev(prec, name, dx, gdx, n, tol);
	snprintf(name, sizeof(name), "%s bn running mean", pcl(prec));
	near_dev(name, rm, grm, 8);
	snprintf(name, sizeof(name), "%s bn dgamma", pcl(prec));
	near_f_dev(name, dg, gdg, 8, tol);
	/* frozen: the running statistics just made */
	memcpy(dx, dyh, n * h2);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, dyh, n * h2, &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, grm, rm, sizeof(rm), &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, grv, rv, sizeof(rv), &err), &err);
	CHECK_OK(cpu.be->bn_backward_frozen(&cpu, &bd, xh, g, rm, rv, dyh, dx, dg,
					    db, &err),
		 &err);
	CHECK_OK(gpu.be->bn_backward_frozen(&gpu, &bd, gx, gg, grm, grv, gdy, gdx,
					    gdg, gdb, &err),
		 &err);
	snprintf(name, sizeof(name), "%s bn frozen dx", pcl(prec));
	near16_dev(prec, name, dx, gdx, n, tol);
	snprintf(name, sizeof(name), "%s bn frozen dgamma", pcl(prec));
	near_f_dev(name, dg, gdg, 8, tol);
	snprintf(name, sizeof(name), "%s bn frozen dbeta", pcl(prec));
	near_f_dev(name, db, gdb, 8, tol);

	/* a fused ReLU (bd.relu), training and evaluation: the device's
	 * against the CPU's, each running statistic from the same values */
	nn_bn_desc br = bd;
	br.relu = 1;
	float rm2[8], rv2[8];
	memcpy(rm2, rm, sizeof(rm2));
	memcpy(rv2, rv, sizeof(rv2));
	CHECK_OK(gpu.be->to_device(&gpu, grm, rm, sizeof(rm), &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, grv, rv, sizeof(rv), &err), &err);
	CHECK_OK(cpu.be->bn_forward_train(&cpu, &br, xh, g, be, rm2, rv2, sm, si,
					  y, &err),
		 &err);
	CHECK_OK(gpu.be->bn_forward_train(&gpu, &br, gx, gg, gbe, grm, grv, gsm,
					  gsi, gy, &err),
		 &err);
	snprintf(name, sizeof(name), "%s bn y, fused relu", pcl(prec));
	near16_dev(prec, name, y, gy, n, tol);
	CHECK_OK(cpu.be->bn_forward_eval(&cpu, &br, xh, g, be, rm2, rv2, y, &err),
		 &err);
	CHECK_OK(gpu.be->bn_forward_eval(&gpu, &br, gx, gg, gbe, grm, grv, gy,
					 &err),
		 &err);
	snprintf(name, sizeof(name), "%s bn eval y, fused relu", pcl(prec));
	near16_dev(prec, name, y, gy, n, tol);

	/* add, accumulate, relu: the same bits */
	CHECK_OK(cpu.be->add_forward(&cpu, n, xh, dyh, y, &err), &err);
	CHECK_OK(gpu.be->add_forward(&gpu, n, gx, gdy, gy, &err), &err);
	snprintf(name, sizeof(name), "%s add", pcl(prec));
	same_dev(name, y, gy, n * h2);
	memcpy(dx, xh, n * h2);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, xh, n * h2, &err), &err);
	CHECK_OK(cpu.be->accumulate(&cpu, n, dyh, dx, &err), &err);
	CHECK_OK(gpu.be->accumulate(&gpu, n, gdy, gdx, &err), &err);
	snprintf(name, sizeof(name), "%s accumulate", pcl(prec));
	same_dev(name, dx, gdx, n * h2);
	CHECK_OK(cpu.be->relu_forward(&cpu, n, xh, y, &err), &err);
	CHECK_OK(gpu.be->relu_forward(&gpu, n, gx, gy, &err), &err);
	snprintf(name, sizeof(name), "%s relu", pcl(prec));
	same_dev(name, y, gy, n * h2);
	CHECK_OK(cpu.be->relu_backward(&cpu, n, y, dyh, dx, &err), &err);
	CHECK_OK(gpu.be->relu_backward(&gpu, n, gy, gdy, gdx, &err), &err);
	snprintf(name, sizeof(name), "%s relu dx", pcl(prec));
	same_dev(name, dx, gdx, n * h2);
	/* max pooling: the same bits and argmax */
	nn_pool_desc pd;
	CHECK_OK(nn_pool_desc_init(&pd, 4, 8, 5, 5, 3, 2, 1, &err), &err);
	pd.nhwc = cl;
	const size_t np = (size_t)4 * 8 * pd.h_out * pd.w_out;
	int32_t *am = malloc(np * sizeof(int32_t));
	int32_t *gam = up_bytes(NULL, np * sizeof(int32_t));
	CHECK_OK(cpu.be->maxpool_forward(&cpu, &pd, xh, y, am, &err), &err);
	CHECK_OK(gpu.be->maxpool_forward(&gpu, &pd, gx, gy, gam, &err), &err);
	snprintf(name, sizeof(name), "%s maxpool", pcl(prec));
	same_dev(name, y, gy, np * h2);
	snprintf(name, sizeof(name), "%s maxpool argmax", pcl(prec));
	same_dev(name, am, gam, np * sizeof(int32_t));
	/* backward into dx added to, then average pooling (fixed and
	 * adaptive) both ways: one rounding of the same fp32 sums */
	memcpy(dx, xh, n * h2);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, xh, n * h2, &err), &err);
	CHECK_OK(cpu.be->maxpool_backward(&cpu, &pd, am, dyh, dx, &err), &err);
	CHECK_OK(gpu.be->maxpool_backward(&gpu, &pd, gam, gdy, gdx, &err), &err);
	snprintf(name, sizeof(name), "%s maxpool dx", pcl(prec));
	same_dev(name, dx, gdx, n * h2);
	for (int ad = 0; ad < 2; ad++) {
		if (ad)
			CHECK_OK(nn_pool_desc_init_adaptive(&pd, 4, 8, 5, 5, 1, 1,
							    &err),
				 &err);
		else
			CHECK_OK(nn_pool_desc_init(&pd, 4, 8, 5, 5, 2, 2, 0, &err),
				 &err);
		pd.nhwc = cl;
		const size_t na = (size_t)4 * 8 * pd.h_out * pd.w_out;
		CHECK_OK(cpu.be->avgpool_forward(&cpu, &pd, xh, y, &err), &err);
		CHECK_OK(gpu.be->avgpool_forward(&gpu, &pd, gx, gy, &err), &err);
		snprintf(name, sizeof(name), "%s avgpool%s", pcl(prec),
			 ad ? " adaptive" : "");
		same_dev(name, y, gy, na * h2);
		memcpy(dx, xh, n * h2);
		CHECK_OK(gpu.be->to_device(&gpu, gdx, xh, n * h2, &err), &err);
		CHECK_OK(cpu.be->avgpool_backward(&cpu, &pd, dyh, dx, &err), &err);
		CHECK_OK(gpu.be->avgpool_backward(&gpu, &pd, gdy, gdx, &err), &err);
		snprintf(name, sizeof(name), "%s avgpool%s dx", pcl(prec),
			 ad ? " adaptive" : "");
		same_dev(name, dx, gdx, n * h2);
	}
	/* the model's channels-last input copy */
	if (cl) {
		CHECK_OK(cpu.be->act_from_f32_nhwc(&cpu, 4, 8, 25, x, y, &err),
			 &err);
		float *gxf = up(x, n);
		CHECK_OK(gpu.be->act_from_f32_nhwc(&gpu, 4, 8, 25, gxf, gy, &err),
			 &err);
		snprintf(name, sizeof(name), "%s from_f32_nhwc", pcl(prec));
		same_dev(name, y, gy, n * h2);
		dfree(gxf);
	}
	cpu.precision = gpu.precision = NN_PREC_FP32;

	dfree(gx), dfree(gy), dfree(gdy), dfree(gdx), dfree(gg), dfree(gbe);
	dfree(grm), dfree(grv), dfree(gsm), dfree(gsi), dfree(gdg), dfree(gdb);
	dfree(gam);
	free(x), free(dy), free(g), free(be), free(xh), free(dyh), free(y);
	free(dx), free(am);
}

/* fp16's gradient check: unscaled values and the flag, against the host */
/*
 * 16-bit batch norm at the shapes that pick the device kernels' other
 * paths (channels-last: bn_nhwc.cu): many rows (the statistics' slice
 * cap), channels not a multiple of the 16-byte vector (single-value
 * passes) or of the 32-channel block, an offset mean, and x and y moved
 * off 16-byte alignment by `off` values. Training forward (y, running
 * and saved statistics), backward (dx accumulated then overwritten,
 * dgamma, dbeta) and evaluation, against the CPU. cuDNN (NCHW) is not
 * handed unaligned tensors: off applies channels-last only.
 */
static void half_bn_case(int prec, int n, int c, int hw, float shift,
			 int relu, int off)
{
	off = cl ? off : 0;
	const double tol = prec == NN_PREC_BF16 ? TOL_BF16 : TOL_FP16;
	const size_t h2 = sizeof(uint16_t), cnt = (size_t)n * c * hw * hw;
	nn_bn_desc bd = {n, c, hw, hw, 1e-5f, 0.1f, cl, relu};
	float *x = nn_test_alloc(cnt), *dy = nn_test_alloc(cnt);
	float *g = nn_test_alloc(c), *be = nn_test_alloc(c);
	nn_test_fill(x, cnt, 81, -2 + shift, 3 + shift);
	nn_test_fill(dy, cnt, 82, -1, 1);
	nn_test_fill(g, c, 83, 0.5f, 1.5f);
	nn_test_fill(be, c, 84, -0.5f, 0.5f);
	uint16_t *xh = h16(prec, x, cnt), *dyh = h16(prec, dy, cnt);
	uint16_t *y = h16_nan(prec, cnt), *dx = h16(prec, x, cnt);
	float *rm = filled(c, 0), *rv = filled(c, 1), *sm = nn_test_alloc(c);
	float *si = nn_test_alloc(c), *dg = nn_test_alloc(c), *db = nn_test_alloc(c);
	uint16_t *gxb = up_bytes(NULL, (cnt + off) * h2);
	uint16_t *gyb = up_bytes(NULL, (cnt + off) * h2);
	void *gx = gxb + off, *gy = gyb + off;
	void *gdy = up_bytes(dyh, cnt * h2), *gdx = up_bytes(xh, cnt * h2);
	float *gg = up(g, c), *gbe = up(be, c), *grm = up(rm, c), *grv = up(rv, c);
	float *gsm = up(NULL, c), *gsi = up(NULL, c), *gdg = up(NULL, c);
	float *gdb = up(NULL, c);
	CHECK_OK(gpu.be->to_device(&gpu, gx, xh, cnt * h2, &err), &err);
	cpu.precision = gpu.precision = prec;
	char name[128], what[96];
	snprintf(what, sizeof(what), "%s bn %dx%dx%dx%d%s%s, off %d", pcl(prec),
		 n, c, hw, hw, shift != 0 ? " shifted" : "",
		 relu ? " relu" : "", off);
	CHECK_OK(cpu.be->bn_forward_train(&cpu, &bd, xh, g, be, rm, rv, sm, si, y,
					  &err),
		 &err);
	CHECK_OK(gpu.be->bn_forward_train(&gpu, &bd, gx, gg, gbe, grm, grv, gsm,
					  gsi, gy, &err),
		 &err);
	snprintf(name, sizeof(name), "%s: y", what);
	near16_dev(prec, name, y, gy, cnt, tol);
	snprintf(name, sizeof(name), "%s: running mean", what);
	near_dev(name, rm, grm, c);
	snprintf(name, sizeof(name), "%s: running var", what);
	near_dev(name, rv, grv, c);
	snprintf(name, sizeof(name), "%s: saved mean", what);
	near_dev(name, sm, gsm, c);
	snprintf(name, sizeof(name), "%s: saved 1/std", what);
	near_dev(name, si, gsi, c);
	for (int over = 0; over < 2; over++) {
		cpu.dx_overwrite = gpu.dx_overwrite = over;
		CHECK_OK(cpu.be->bn_backward(&cpu, &bd, xh, g, sm, si, dyh, dx, dg,
					     db, &err),
			 &err);
		CHECK_OK(gpu.be->bn_backward(&gpu, &bd, gx, gg, gsm, gsi, gdy, gdx,
					     gdg, gdb, &err),
			 &err);
		snprintf(name, sizeof(name), "%s: dx (%s)", what,
			 over ? "overwritten" : "accumulated");
		near16_dev(prec, name, dx, gdx, cnt, tol);
		snprintf(name, sizeof(name), "%s: dgamma", what);
		near_f_dev(name, dg, gdg, c, tol);
		snprintf(name, sizeof(name), "%s: dbeta", what);
		near_f_dev(name, db, gdb, c, tol);
	}
	cpu.dx_overwrite = gpu.dx_overwrite = 0;
	CHECK_OK(cpu.be->bn_forward_eval(&cpu, &bd, xh, g, be, rm, rv, y, &err),
		 &err);
	/* both with the CPU's running statistics */
	CHECK_OK(gpu.be->to_device(&gpu, grm, rm, c * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, grv, rv, c * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->bn_forward_eval(&gpu, &bd, gx, gg, gbe, grm, grv, gy,
					 &err),
		 &err);
	snprintf(name, sizeof(name), "%s: evaluation y", what);
	near16_dev(prec, name, y, gy, cnt, tol);
	cpu.precision = gpu.precision = NN_PREC_FP32;
	dfree(gxb), dfree(gyb), dfree(gdy), dfree(gdx), dfree(gg), dfree(gbe);
	dfree(grm), dfree(grv), dfree(gsm), dfree(gsi), dfree(gdg), dfree(gdb);
	free(x), free(dy), free(g), free(be), free(xh), free(dyh), free(y);
	free(dx), free(rm), free(rv), free(sm), free(si), free(dg), free(db);
}

/*
 * Add, accumulate and ReLU in 16 bits over a count that leaves a tail
 * after the 16-byte vectors, with every pointer `off` values past
 * alignment (the single-value kernels) or aligned (the vector kernels
 * and the tail): the CPU's bits.
 */
static void half_ew_case(int prec, size_t cnt, int off)
{
	const size_t h2 = sizeof(uint16_t);
	float *a = nn_test_alloc(cnt), *b = nn_test_alloc(cnt);
	nn_test_fill(a, cnt, 91, -1, 1);
	nn_test_fill(b, cnt, 92, -1, 1);
	uint16_t *ah = h16(prec, a, cnt), *bh = h16(prec, b, cnt);
	uint16_t *y = h16(prec, a, cnt), *dx = h16(prec, b, cnt);
	uint16_t *ga0 = up_bytes(NULL, (cnt + off) * h2);
	uint16_t *gb0 = up_bytes(NULL, (cnt + off) * h2);
	uint16_t *gy0 = up_bytes(NULL, (cnt + off) * h2);
	uint16_t *ga = ga0 + off, *gb = gb0 + off, *gy = gy0 + off;
	CHECK_OK(gpu.be->to_device(&gpu, ga, ah, cnt * h2, &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, gb, bh, cnt * h2, &err), &err);
	cpu.precision = gpu.precision = prec;
	char what[64], name[128];
	snprintf(what, sizeof(what), "%s %zu values, off %d", prec_name(prec), cnt,
		 off);
	CHECK_OK(cpu.be->add_forward(&cpu, cnt, ah, bh, y, &err), &err);
	CHECK_OK(gpu.be->add_forward(&gpu, cnt, ga, gb, gy, &err), &err);
	snprintf(name, sizeof(name), "%s: add", what);
	same_dev(name, y, gy, cnt * h2);
	CHECK_OK(cpu.be->add_relu_forward(&cpu, cnt, ah, bh, y, &err), &err);
	CHECK_OK(gpu.be->add_relu_forward(&gpu, cnt, ga, gb, gy, &err), &err);
	snprintf(name, sizeof(name), "%s: add + relu", what);
	same_dev(name, y, gy, cnt * h2);
	CHECK_OK(cpu.be->add_forward(&cpu, cnt, ah, bh, y, &err), &err);
	CHECK_OK(gpu.be->add_forward(&gpu, cnt, ga, gb, gy, &err), &err);
	CHECK_OK(cpu.be->accumulate(&cpu, cnt, ah, y, &err), &err);
	CHECK_OK(gpu.be->accumulate(&gpu, cnt, ga, gy, &err), &err);
	snprintf(name, sizeof(name), "%s: accumulate", what);
	same_dev(name, y, gy, cnt * h2);
	CHECK_OK(cpu.be->relu_forward(&cpu, cnt, y, y, &err), &err);
	CHECK_OK(gpu.be->relu_forward(&gpu, cnt, gy, gy, &err), &err);
	snprintf(name, sizeof(name), "%s: relu in place", what);
	same_dev(name, y, gy, cnt * h2);
	for (int over = 0; over < 2; over++) {
		memcpy(dx, bh, cnt * h2);
		CHECK_OK(gpu.be->to_device(&gpu, gb, bh, cnt * h2, &err), &err);
		cpu.dx_overwrite = gpu.dx_overwrite = over;
		CHECK_OK(cpu.be->relu_backward(&cpu, cnt, y, ah, dx, &err), &err);
		CHECK_OK(gpu.be->relu_backward(&gpu, cnt, gy, ga, gb, &err), &err);
		snprintf(name, sizeof(name), "%s: relu dx (%s)", what,
			 over ? "overwritten" : "accumulated");
		same_dev(name, dx, gb, cnt * h2);
	}
	cpu.dx_overwrite = gpu.dx_overwrite = 0;
	cpu.precision = gpu.precision = NN_PREC_FP32;
	dfree(ga0), dfree(gb0), dfree(gy0);
	free(a), free(b), free(ah), free(bh), free(y), free(dx);
}

static void unscale_case(size_t n, size_t bad_at, float bad)
{
	float *g = nn_test_alloc(n);
	nn_test_fill(g, n, 61, -65536, 65536);
	if (bad_at < n)
		g[bad_at] = bad;
	float *dg = up(g, n);
	int found = -1;
	CHECK_OK(gpu.be->unscale_check(&gpu, dg, n, 1.0f / 65536, &found, &err),
		 &err);
	CHECK_EQ_INT(found, bad_at < n);
	for (size_t i = 0; i < n; i++)
		g[i] *= 1.0f / 65536; /* a power of two: exact on both sides */
	float *back = down(dg, n);
	same_floats("unscaled gradients", g, back, n);
	free(back);
	dfree(dg);
	free(g);
}

static void test_mixed(void)
{
	for (int i = 0; i < 4; i++) {
		const int prec = i % 2 ? NN_PREC_FP16 : NN_PREC_BF16;
		cl = i / 2;
		/* prec, n, c_in, hw, c_out, k, stride, pad, groups, bias */
		conv_half_case(prec, 2, 3, 9, 4, 3, 1, 1, 1, 1);   /* 3 channels in */
		conv_half_case(prec, 3, 8, 8, 16, 3, 2, 1, 1, 0);  /* stride 2 */
		conv_half_case(prec, 2, 16, 7, 32, 1, 1, 0, 1, 1); /* 1x1 */
		conv_half_case(prec, 2, 3, 23, 8, 7, 2, 3, 1, 0);  /* 7x7 stem */
		conv_half_case(prec, 2, 8, 9, 8, 3, 2, 1, 8, 0);   /* depthwise */
		conv_half_case(prec, 4, 64, 14, 64, 3, 1, 1, 1, 0); /* tensor-core sized */
		/* prec, n, in, out, bias */
		linear_half_case(prec, 4, 7, 5, 1);
		linear_half_case(prec, 32, 512, 10, 1);
		linear_half_case(prec, 64, 256, 128, 0);
		half_other_case(prec);
		/* prec, n, c, hw, shift, relu, off */
		half_bn_case(prec, 8, 64, 96, 0, 1, 0);  /* 73728 rows */
		half_bn_case(prec, 3, 6, 5, 0, 1, 0);    /* 6 channels */
		half_bn_case(prec, 9, 40, 7, 50, 0, 0);  /* 40: 32 + 8 */
		half_bn_case(prec, 4, 64, 14, 0, 1, 1);  /* unaligned */
		half_bn_case(prec, 4, 2048, 7, 0, 0, 0); /* resnet50's last */
		half_ew_case(prec, 100003, 0);
		half_ew_case(prec, 100003, 1);
		half_ew_case(prec, 5, 0);
	}
	cl = 0;
	/* an unknown precision fails with one line, nothing run */
	nn_linear_desc d = {1, 1, 1, 0};
	float *g = up(NULL, 4);
	gpu.precision = 7;
	CHECK_EQ_INT(gpu.be->linear_forward(&gpu, &d, g, g, NULL, g, &err),
		     IMS_EINVAL);
	gpu.precision = NN_PREC_FP32;
	dfree(g);
	unscale_case(100003, 100003, 0);      /* all finite */
	unscale_case(100003, 77777, INFINITY);
	unscale_case(100003, 5, -INFINITY);
	unscale_case(100003, 100002, NAN);
	unscale_case(0, 0, 0);
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

/* ---- element-wise ------------------------------------------------------- */

static void test_elementwise(void)
{
	const size_t sizes[] = {1, 1000, 300001};
	for (int s = 0; s < 3; s++) {
		const size_t n = sizes[s];
		float *x = nn_test_alloc(n), *b = nn_test_alloc(n);
		float *dy = nn_test_alloc(n), *dx0 = nn_test_alloc(n);
		nn_test_fill(x, n, 41, -1, 1);
		nn_test_fill(b, n, 42, -1, 1);
		nn_test_fill(dy, n, 43, -1, 1);
		nn_test_fill(dx0, n, 44, -1, 1);
		if (n > 4) {
			x[0] = 0.0f, x[1] = -0.0f, x[2] = NAN, x[3] = -INFINITY;
		}
		float *y = nn_test_alloc(n), *dxa = host_copy(dx0, n);
		float *dxo = filled(n, NAN);
		float *gx = up(x, n), *gb = up(b, n), *gdy = up(dy, n);
		float *gy = up(NULL, n), *gdx = up(dx0, n);
		float *nan_x = filled(n, NAN);

		/* relu */
		CHECK_OK(nn_cpu_relu_forward(&cpu, n, x, y, &err), &err);
		CHECK_OK(gpu.be->relu_forward(&gpu, n, gx, gy, &err), &err);
		same_dev_f("relu y", y, gy, n);
		CHECK_OK(nn_cpu_relu_backward(&cpu, n, y, dy, dxa, &err), &err);
		CHECK_OK(gpu.be->relu_backward(&gpu, n, gy, gdy, gdx, &err), &err);
		same_dev_f("relu dx (accumulated)", dxa, gdx, n);
		cpu.dx_overwrite = gpu.dx_overwrite = 1;
		CHECK_OK(nn_cpu_relu_backward(&cpu, n, y, dy, dxo, &err), &err);
		CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, n * sizeof(float), &err),
			 &err);
		CHECK_OK(gpu.be->relu_backward(&gpu, n, gy, gdy, gdx, &err), &err);
		cpu.dx_overwrite = gpu.dx_overwrite = 0;
		same_dev_f("relu dx (overwritten)", dxo, gdx, n);
		CHECK_OK(gpu.be->relu_backward(&gpu, n, gy, gdy, NULL, &err), &err);

		/* add and accumulate */
		CHECK_OK(nn_cpu_add_forward(&cpu, n, x, b, y, &err), &err);
		CHECK_OK(gpu.be->add_forward(&gpu, n, gx, gb, gy, &err), &err);
		same_dev_f("add y", y, gy, n);
		memcpy(dxa, dx0, n * sizeof(float));
		CHECK_OK(gpu.be->to_device(&gpu, gdx, dx0, n * sizeof(float), &err),
			 &err);
		CHECK_OK(nn_cpu_accumulate(&cpu, n, dy, dxa, &err), &err);
		CHECK_OK(gpu.be->accumulate(&gpu, n, gdy, gdx, &err), &err);
		same_dev_f("accumulate", dxa, gdx, n);
		gpu.dx_overwrite = 1;
		CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, n * sizeof(float), &err),
			 &err);
		CHECK_OK(gpu.be->accumulate(&gpu, n, gdy, gdx, &err), &err);
		gpu.dx_overwrite = 0;
		same_dev_f("accumulate (overwritten)", dy, gdx, n);
		CHECK_OK(gpu.be->accumulate(&gpu, n, gdy, NULL, &err), &err);

		/* dropout: the same mask, the same values */
		const float ps[] = {0.0f, 0.1f, 0.5f};
		for (int k = 0; k < 3; k++) {
			uint8_t *mask = calloc(n, 1);
			uint8_t *gmask = up_bytes(NULL, n);
			CHECK_OK(nn_cpu_dropout_forward(&cpu, n, ps[k], 77 + k, x,
							y, mask, &err),
				 &err);
			CHECK_OK(gpu.be->dropout_forward(&gpu, n, ps[k], 77 + k,
							 gx, gy, gmask, &err),
				 &err);
			same_dev_f("dropout y", y, gy, n);
			same_dev("dropout mask", mask, gmask, n);
			memcpy(dxa, dx0, n * sizeof(float));
			CHECK_OK(gpu.be->to_device(&gpu, gdx, dx0,
						   n * sizeof(float), &err),
				 &err);
			CHECK_OK(nn_cpu_dropout_backward(&cpu, n, ps[k], mask, dy,
							 dxa, &err),
				 &err);
			CHECK_OK(gpu.be->dropout_backward(&gpu, n, ps[k], gmask,
							  gdy, gdx, &err),
				 &err);
			same_dev_f("dropout dx (accumulated)", dxa, gdx, n);
			cpu.dx_overwrite = gpu.dx_overwrite = 1;
			CHECK_OK(nn_cpu_dropout_backward(&cpu, n, ps[k], mask, dy,
							 dxo, &err),
				 &err);
			CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x,
						   n * sizeof(float), &err),
				 &err);
			CHECK_OK(gpu.be->dropout_backward(&gpu, n, ps[k], gmask,
							  gdy, gdx, &err),
				 &err);
			cpu.dx_overwrite = gpu.dx_overwrite = 0;
			same_dev_f("dropout dx (overwritten)", dxo, gdx, n);
			/* no mask kept */
			CHECK_OK(gpu.be->dropout_forward(&gpu, n, ps[k], 77 + k,
							 gx, gy, NULL, &err),
				 &err);
			same_dev_f("dropout y (no mask)", y, gy, n);
			free(mask);
			dfree(gmask);
		}
		CHECK_EQ_INT(gpu.be->dropout_forward(&gpu, n, 1.0f, 1, gx, gy,
						     NULL, &err),
			     IMS_EINVAL);

		dfree(gx), dfree(gb), dfree(gdy), dfree(gy), dfree(gdx);
		free(x), free(b), free(dy), free(dx0), free(y), free(dxa);
		free(dxo), free(nan_x);
	}
	/* count 0 launches nothing and succeeds */
	CHECK_OK(gpu.be->relu_forward(&gpu, 0, NULL, NULL, &err), &err);
	CHECK_OK(gpu.be->add_forward(&gpu, 0, NULL, NULL, NULL, &err), &err);
}

/* ---- pooling ------------------------------------------------------------ */

/* Both pools on one descriptor (max only for fixed windows): forward,
 * argmax and backward in both modes, bit for bit. */
static void pool_case(const nn_pool_desc *d, const char *what, int ties)
{
	char name[160];
	const size_t nx = (size_t)d->n * d->c * d->h_in * d->w_in;
	const size_t ny = (size_t)d->n * d->c * d->h_out * d->w_out;
	float *x = nn_test_alloc(nx), *dy = nn_test_alloc(ny);
	float *dx0 = nn_test_alloc(nx);
	nn_test_fill(x, nx, 51, -1, 1);
	if (ties) /* a few distinct values: many ties for the argmax rule */
		for (size_t i = 0; i < nx; i++)
			x[i] = floorf(x[i] * 2.0f);
	nn_test_fill(dy, ny, 52, -1, 1);
	nn_test_fill(dx0, nx, 53, -1, 1);
	float *y = nn_test_alloc(ny), *dxa = host_copy(dx0, nx);
	float *dxo = filled(nx, NAN), *nan_x = filled(nx, NAN);
	float *gx = up(x, nx), *gdy = up(dy, ny), *gy = up(NULL, ny);
	float *gdx = up(dx0, nx);

	if (!d->adaptive) {
		int32_t *am = calloc(ny, sizeof(int32_t));
		int32_t *gam = up_bytes(NULL, ny * sizeof(int32_t));
		CHECK_OK(nn_cpu_maxpool_forward(&cpu, d, x, y, am, &err), &err);
		CHECK_OK(gpu.be->maxpool_forward(&gpu, d, gx, gy, gam, &err),
			 &err);
		snprintf(name, sizeof(name), "%s max y", what);
		same_dev_f(name, y, gy, ny);
		snprintf(name, sizeof(name), "%s max argmax", what);
		same_dev(name, am, gam, ny * sizeof(int32_t));
		CHECK_OK(nn_cpu_maxpool_backward(&cpu, d, am, dy, dxa, &err),
			 &err);
		CHECK_OK(gpu.be->maxpool_backward(&gpu, d, gam, gdy, gdx, &err),
			 &err);
		snprintf(name, sizeof(name), "%s max dx (accumulated)", what);
		same_dev_f(name, dxa, gdx, nx);
		cpu.dx_overwrite = gpu.dx_overwrite = 1;
		CHECK_OK(nn_cpu_maxpool_backward(&cpu, d, am, dy, dxo, &err),
			 &err);
		CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, nx * sizeof(float),
					   &err),
			 &err);
		CHECK_OK(gpu.be->maxpool_backward(&gpu, d, gam, gdy, gdx, &err),
			 &err);
		cpu.dx_overwrite = gpu.dx_overwrite = 0;
		snprintf(name, sizeof(name), "%s max dx (overwritten)", what);
		same_dev_f(name, dxo, gdx, nx);
		free(am);
		dfree(gam);
	}

	memcpy(dxa, dx0, nx * sizeof(float));
	CHECK_OK(gpu.be->to_device(&gpu, gdx, dx0, nx * sizeof(float), &err),
		 &err);
	CHECK_OK(nn_cpu_avgpool_forward(&cpu, d, x, y, &err), &err);
	CHECK_OK(gpu.be->avgpool_forward(&gpu, d, gx, gy, &err), &err);
	snprintf(name, sizeof(name), "%s avg y", what);
	same_dev_f(name, y, gy, ny);
	CHECK_OK(nn_cpu_avgpool_backward(&cpu, d, dy, dxa, &err), &err);
	CHECK_OK(gpu.be->avgpool_backward(&gpu, d, gdy, gdx, &err), &err);
	snprintf(name, sizeof(name), "%s avg dx (accumulated)", what);
	same_dev_f(name, dxa, gdx, nx);
	cpu.dx_overwrite = gpu.dx_overwrite = 1;
	for (size_t i = 0; i < nx; i++)
		dxo[i] = NAN;
	CHECK_OK(nn_cpu_avgpool_backward(&cpu, d, dy, dxo, &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, nx * sizeof(float), &err),
		 &err);
	CHECK_OK(gpu.be->avgpool_backward(&gpu, d, gdy, gdx, &err), &err);
	cpu.dx_overwrite = gpu.dx_overwrite = 0;
	snprintf(name, sizeof(name), "%s avg dx (overwritten)", what);
	same_dev_f(name, dxo, gdx, nx);

	dfree(gx), dfree(gdy), dfree(gy), dfree(gdx);
	free(x), free(dy), free(dx0), free(y), free(dxa), free(dxo), free(nan_x);
}

static void fixed(int n, int c, int hw, int k, int stride, int pad, int ties)
{
	nn_pool_desc d;
	char what[96];
	snprintf(what, sizeof(what), "pool n%d c%d %dx%d k%d s%d p%d%s", n, c,
		 hw, hw, k, stride, pad, ties ? " ties" : "");
	CHECK_OK(nn_pool_desc_init(&d, n, c, hw, hw, k, stride, pad, &err),
		 &err);
	pool_case(&d, what, ties);
}

static void adaptive(int n, int c, int h, int w, int ho, int wo)
{
	nn_pool_desc d;
	char what[96];
	snprintf(what, sizeof(what), "adaptive pool n%d c%d %dx%d -> %dx%d", n,
		 c, h, w, ho, wo);
	CHECK_OK(nn_pool_desc_init_adaptive(&d, n, c, h, w, ho, wo, &err), &err);
	pool_case(&d, what, 0);
}

static void test_pool(void)
{
	fixed(2, 3, 12, 3, 2, 1, 0); /* ResNet's stem pool */
	fixed(2, 3, 12, 3, 2, 1, 1);
	fixed(2, 4, 8, 2, 2, 0, 0);  /* VGG's */
	fixed(2, 4, 8, 2, 2, 0, 1);
	fixed(1, 2, 9, 3, 1, 1, 1);  /* overlapping, stride 1 */
	fixed(1, 2, 11, 5, 3, 2, 1); /* stride 3 */
	adaptive(2, 3, 7, 7, 1, 1);  /* the global pool */
	adaptive(2, 3, 5, 7, 3, 2);  /* overlapping windows */
	adaptive(1, 2, 3, 3, 5, 4);  /* more outputs than inputs */

	/* a window of -infinity records its first real element */
	nn_pool_desc d;
	CHECK_OK(nn_pool_desc_init(&d, 1, 1, 4, 4, 3, 2, 1, &err), &err);
	float x[16];
	for (int i = 0; i < 16; i++)
		x[i] = -INFINITY;
	x[5] = NAN;
	float y[4];
	int32_t am[4];
	CHECK_OK(nn_cpu_maxpool_forward(&cpu, &d, x, y, am, &err), &err);
	float *gx = up(x, 16), *gy = up(NULL, 4);
	int32_t *gam = up_bytes(NULL, sizeof(am));
	CHECK_OK(gpu.be->maxpool_forward(&gpu, &d, gx, gy, gam, &err), &err);
	same_dev_f("maxpool -inf/NaN y", y, gy, 4);
	same_dev("maxpool -inf/NaN argmax", am, gam, sizeof(am));
	dfree(gx), dfree(gy), dfree(gam);
}

/* ---- softmax cross-entropy --------------------------------------------- */

static void xent_case(int n, int k, float smoothing)
{
	char what[96], name[160];
	snprintf(what, sizeof(what), "xent n%d k%d s%g", n, k, (double)smoothing);
	const size_t nz = (size_t)n * k;
	float *z = nn_test_alloc(nz), *g = nn_test_alloc(nz);
	int32_t *labels = calloc((size_t)n, sizeof(int32_t));
	nn_test_fill(z, nz, 61, -5, 5);
	for (int i = 0; i < n; i++)
		labels[i] = (int32_t)((i * 7919u) % (unsigned)k);
	double loss = 0, gloss = -1;
	CHECK_OK(nn_cpu_softmax_xent(&cpu, n, k, z, labels, smoothing,
				     1.0f / n, &loss, g, &err),
		 &err);
	float *gz = up(z, nz), *gg = up(NULL, nz);
	int32_t *gl = up_bytes(labels, (size_t)n * sizeof(int32_t));
	CHECK_OK(gpu.be->softmax_xent(&gpu, n, k, gz, gl, smoothing, 1.0f / n,
				      &gloss, gg, &err),
		 &err);
	test_checks_++;
	if (!(fabs(loss - gloss) <= 1e-9 * fabs(loss))) {
		fprintf(stderr, "%s loss: cpu %.17g, cuda %.17g\n", what, loss,
			gloss);
		test_failures_++;
	}
	snprintf(name, sizeof(name), "%s dlogits", what);
	near_dev(name, g, gg, nz);
	/* no gradient wanted; then no loss wanted */
	gloss = -1;
	CHECK_OK(gpu.be->softmax_xent(&gpu, n, k, gz, gl, smoothing, 1.0f,
				      &gloss, NULL, &err),
		 &err);
	CHECK_NEAR(gloss, loss, 1e-9 * fabs(loss));
	CHECK_OK(gpu.be->softmax_xent(&gpu, n, k, gz, gl, smoothing, 1.0f / n,
				      NULL, gg, &err),
		 &err);
	near_dev(name, g, gg, nz);

	/* a bad label fails as on the CPU and leaves dlogits alone */
	labels[n - 1] = k;
	float *nan_z = filled(nz, NAN);
	CHECK_OK(gpu.be->to_device(&gpu, gl, labels, (size_t)n * sizeof(int32_t),
				   &err),
		 &err);
	CHECK_OK(gpu.be->to_device(&gpu, gg, nan_z, nz * sizeof(float), &err),
		 &err);
	ims_error cerr = {0};
	CHECK_EQ_INT(nn_cpu_softmax_xent(&cpu, n, k, z, labels, smoothing, 1.0f,
					 &loss, g, &cerr),
		     IMS_EINVAL);
	CHECK_EQ_INT(gpu.be->softmax_xent(&gpu, n, k, gz, gl, smoothing, 1.0f,
					  &gloss, gg, &err),
		     IMS_EINVAL);
	CHECK_EQ_STR(err.msg, cerr.msg);
	same_dev_f("xent dlogits untouched", nan_z, gg, nz);

	dfree(gz), dfree(gg), dfree(gl);
	free(z), free(g), free(labels), free(nan_z);
}

/* The training step's variant: the tally in device memory against the
 * CPU's over three steps (ties and a NaN logit in the top-1), then a bad
 * label noted with its step and nothing else changed. */
static void tally_case(int n, int k, float smoothing)
{
	char what[96];
	snprintf(what, sizeof(what), "xent tally n%d k%d s%g", n, k,
		 (double)smoothing);
	const size_t nz = (size_t)n * k;
	float *z = nn_test_alloc(nz), *g = nn_test_alloc(nz);
	int32_t *labels = calloc((size_t)n, sizeof(int32_t));
	float *gz = up(NULL, nz), *gg = up(NULL, nz);
	int32_t *gl = up_bytes(NULL, (size_t)n * sizeof(int32_t));
	nn_tally ct = {0}, ht;
	nn_tally *dt = up_bytes(&ct, sizeof(ct));
	for (int step = 1; step <= 3; step++) {
		nn_test_fill(z, nz, 70 + (uint64_t)step, -3, 3);
		for (int i = 0; i < n; i++) {
			labels[i] = (int32_t)((i * 31u + (unsigned)step) % (unsigned)k);
			if (i % 3 == 0 && k > 1) /* a tie with class 0 */
				z[(size_t)i * k + labels[i]] = z[(size_t)i * k];
		}
		if (step == 2)
			z[0] = NAN;
		CHECK_OK(gpu.be->to_device(&gpu, gz, z, nz * sizeof(float), &err),
			 &err);
		CHECK_OK(gpu.be->to_device(&gpu, gl, labels,
					   (size_t)n * sizeof(int32_t), &err),
			 &err);
		CHECK_OK(nn_cpu_xent_tally(&cpu, n, k, z, labels, smoothing,
					   1.0f / n, g, step, &ct, &err),
			 &err);
		CHECK_OK(gpu.be->xent_tally(&gpu, n, k, gz, gl, smoothing,
					    1.0f / n, gg, step, dt, &err),
			 &err);
		if (step != 2)
			near_dev(what, g, gg, nz);
	}
	CHECK_OK(gpu.be->to_host(&gpu, &ht, dt, sizeof(ht), &err), &err);
	/* step 2's loss is NaN: so are the sums, and step 2 is noted */
	CHECK(isnan(ct.loss_sum) && isnan(ht.loss_sum));
	CHECK(ht.correct == ct.correct);
	CHECK_EQ_U64((uint64_t)ht.nonfinite_step, 2);
	CHECK_EQ_U64((uint64_t)ct.nonfinite_step, 2);
	CHECK_EQ_U64((uint64_t)ht.bad_label_step, 0);
	/* a fresh tally: finite sums within double rounding of the CPU's */
	nn_tally c2 = {0}, h2;
	CHECK_OK(gpu.be->to_device(&gpu, dt, &c2, sizeof(c2), &err), &err);
	nn_test_fill(z, nz, 80, -3, 3);
	CHECK_OK(gpu.be->to_device(&gpu, gz, z, nz * sizeof(float), &err), &err);
	CHECK_OK(nn_cpu_xent_tally(&cpu, n, k, z, labels, smoothing, 1.0f / n,
				   g, 4, &c2, &err),
		 &err);
	CHECK_OK(gpu.be->xent_tally(&gpu, n, k, gz, gl, smoothing, 1.0f / n, gg,
				    4, dt, &err),
		 &err);
	/* a bad label: noted with its step, nothing else changed */
	labels[n - 1] = k;
	CHECK_OK(gpu.be->to_device(&gpu, gl, labels, (size_t)n * sizeof(int32_t),
				   &err),
		 &err);
	float *before = down(gg, nz);
	CHECK_OK(gpu.be->xent_tally(&gpu, n, k, gz, gl, smoothing, 1.0f / n, gg,
				    5, dt, &err),
		 &err);
	CHECK_OK(nn_cpu_xent_tally(&cpu, n, k, z, labels, smoothing, 1.0f / n,
				   g, 5, &c2, &err),
		 &err);
	CHECK_OK(gpu.be->to_host(&gpu, &h2, dt, sizeof(h2), &err), &err);
	CHECK_NEAR(h2.loss_sum, c2.loss_sum, 1e-9 * fabs(c2.loss_sum));
	CHECK(h2.correct == c2.correct);
	CHECK_EQ_U64((uint64_t)h2.bad_label_step, 5);
	CHECK_EQ_U64((uint64_t)c2.bad_label_step, 5);
	CHECK_EQ_U64((uint64_t)h2.nonfinite_step, 0);
	same_dev_f("xent tally dlogits untouched by a bad label", before, gg, nz);
	free(before);
	dfree(gz), dfree(gg), dfree(gl), dfree(dt);
	free(z), free(g), free(labels);
}

static void test_xent(void)
{
	tally_case(7, 10, 0.0f);
	tally_case(64, 1000, 0.1f);
	xent_case(7, 10, 0.0f);
	xent_case(7, 10, 0.1f);
	xent_case(64, 1000, 0.1f);
	xent_case(1, 1, 0.0f);
	xent_case(300, 3, 1.0f);
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
	nn_ctx_release(&gpu);
	nn_ctx_release(&cpu);
	return TEST_EXIT();
}
