/* test_maxpool.c - max pooling: a 4x4 plane by hand (2x2/2 and 3x3/2
 * padded), ties to the first element, a naive reference over strides and
 * paddings, finite differences, dx accumulation, NULL dx, the same bits on
 * 1 and 2 threads, and descriptor and argmax errors. */
#include <math.h>

#include "nn_test_util.h"
#include "train/nn_internal.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

static const float plane[16] = {
	1, 3, 2, 4,
	5, 6, 1, 2,
	7, 2, 9, 0,
	3, 8, 4, 4,
};

static void test_known(void)
{
	nn_pool_desc d;
	float y[4];
	int32_t am[4];
	CHECK_OK(nn_pool_desc_init(&d, 1, 1, 4, 4, 2, 2, 0, &err), &err);
	CHECK_EQ_INT(d.h_out, 2);
	CHECK_EQ_INT(d.w_out, 2);
	CHECK_EQ_INT(d.adaptive, 0);
	CHECK_OK(nn_cpu_maxpool_forward(&ctx1, &d, plane, y, am, &err), &err);
	const float want[4] = {6, 4, 8, 9};
	const int32_t want_am[4] = {5, 3, 13, 10};
	CHECK_MEM(y, want, sizeof(want));
	CHECK_MEM(am, want_am, sizeof(want_am));

	/* ResNet's stem pool: 3x3, stride 2, padding 1 */
	CHECK_OK(nn_pool_desc_init(&d, 1, 1, 4, 4, 3, 2, 1, &err), &err);
	CHECK_EQ_INT(d.h_out, 2);
	CHECK_OK(nn_cpu_maxpool_forward(&ctx1, &d, plane, y, am, &err), &err);
	const float want3[4] = {6, 6, 8, 9};
	const int32_t want3_am[4] = {5, 5, 13, 10};
	CHECK_MEM(y, want3, sizeof(want3));
	CHECK_MEM(am, want3_am, sizeof(want3_am));

	float dy[4] = {1, 2, 3, 4}, dx[16];
	for (int i = 0; i < 16; i++)
		dx[i] = 0.5f;
	CHECK_OK(nn_cpu_maxpool_backward(&ctx1, &d, am, dy, dx, &err), &err);
	for (int i = 0; i < 16; i++) {
		float w = 0.5f + (i == 5 ? 3 : i == 13 ? 3 : i == 10 ? 4 : 0);
		CHECK(dx[i] == w);
	}
	CHECK_OK(nn_cpu_maxpool_backward(&ctx1, &d, am, dy, NULL, &err), &err);

	CHECK_OK(nn_pool_desc_init(&d, 64, 64, 112, 112, 3, 2, 1, &err), &err);
	CHECK_EQ_INT(d.h_out, 56);
	CHECK_EQ_INT(d.w_out, 56);
}

/* All equal: each window reports its first real element. Padding never
 * wins, even against -infinity inputs. */
static void test_ties(void)
{
	nn_pool_desc d;
	float x[9], y[16];
	int32_t am[16];
	CHECK_OK(nn_pool_desc_init(&d, 1, 1, 3, 3, 2, 1, 1, &err), &err);
	CHECK_EQ_INT(d.h_out, 4);
	for (int v = 0; v < 2; v++) {
		for (int i = 0; i < 9; i++)
			x[i] = v ? -INFINITY : 2.5f;
		CHECK_OK(nn_cpu_maxpool_forward(&ctx1, &d, x, y, am, &err), &err);
		for (int oh = 0; oh < 4; oh++)
			for (int ow = 0; ow < 4; ow++) {
				int first = (oh > 0 ? oh - 1 : 0) * 3 +
					    (ow > 0 ? ow - 1 : 0);
				CHECK_EQ_INT(am[oh * 4 + ow], first);
				CHECK(y[oh * 4 + ow] == x[0]);
			}
	}
	/* a NaN wins its windows, so it propagates */
	for (int i = 0; i < 9; i++)
		x[i] = (float)i;
	x[4] = NAN;
	CHECK_OK(nn_cpu_maxpool_forward(&ctx1, &d, x, y, am, &err), &err);
	CHECK(isnan(y[5]) && am[5] == 4);
	CHECK(y[0] == 0 && am[0] == 0);
}

/* Naive reference: every window offset, padding skipped. */
static void ref_maxpool(const nn_pool_desc *d, const float *x, float *y,
			int32_t *am)
{
	for (int p = 0; p < d->n * d->c; p++)
		for (int oh = 0; oh < d->h_out; oh++)
			for (int ow = 0; ow < d->w_out; ow++) {
				float best = -INFINITY;
				int arg = -1;
				for (int i = 0; i < d->kh; i++)
					for (int j = 0; j < d->kw; j++) {
						int ih = oh * d->stride_h - d->pad_h + i;
						int iw = ow * d->stride_w - d->pad_w + j;
						if (ih < 0 || ih >= d->h_in || iw < 0 ||
						    iw >= d->w_in)
							continue;
						float v = x[(size_t)p * d->h_in * d->w_in +
							    ih * d->w_in + iw];
						if (arg < 0 || v > best)
							best = v, arg = ih * d->w_in + iw;
					}
				size_t o = ((size_t)p * d->h_out + oh) * d->w_out + ow;
				y[o] = best;
				am[o] = arg;
			}
}

/* Distinct values 0.01 apart in random order, so a step of 1e-3 never
 * changes a window's winner. */
static void fill_distinct(float *x, size_t n, uint64_t seed)
{
	ims_rng r;
	ims_rng_seed(&r, seed, 1);
	for (size_t i = 0; i < n; i++)
		x[i] = 0.01f * (float)i - 0.005f * (float)n;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = ims_rng_below(&r, i + 1);
		float t = x[i];
		x[i] = x[j];
		x[j] = t;
	}
}

typedef struct {
	nn_pool_desc d;
	float *x;
	int32_t *am;
} pool_case;

static void pool_fwd(void *ud, float *y)
{
	pool_case *t = ud;
	nn_cpu_maxpool_forward(&ctx1, &t->d, t->x, y, t->am, NULL);
}

static void test_reference_and_gradients(void)
{
	static const int cases[][7] = {
		/* n, c, h, w, k, stride, pad */
		{2, 3, 7, 7, 3, 2, 1}, {1, 2, 5, 6, 2, 1, 1},
		{2, 2, 6, 5, 3, 1, 0}, {1, 1, 4, 4, 2, 2, 0},
		{1, 2, 9, 9, 3, 3, 1}, {1, 1, 1, 1, 1, 1, 0},
		{3, 1, 8, 3, 5, 2, 2},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const int *c = cases[k];
		pool_case t;
		CHECK_OK(nn_pool_desc_init(&t.d, c[0], c[1], c[2], c[3], c[4], c[5],
					   c[6], &err), &err);
		size_t nx = (size_t)c[0] * c[1] * c[2] * c[3];
		size_t ny = (size_t)c[0] * c[1] * t.d.h_out * t.d.w_out;
		t.x = nn_test_alloc(nx);
		t.am = calloc(ny, sizeof(int32_t));
		float *y = nn_test_alloc(ny), *yr = nn_test_alloc(ny);
		int32_t *amr = calloc(ny, sizeof(int32_t));
		fill_distinct(t.x, nx, 10 + k);
		CHECK_OK(nn_cpu_maxpool_forward(&ctx1, &t.d, t.x, y, t.am, &err),
			 &err);
		ref_maxpool(&t.d, t.x, yr, amr);
		CHECK_MEM(y, yr, ny * sizeof(float));
		CHECK_MEM(t.am, amr, ny * sizeof(int32_t));

		float *r = nn_test_alloc(ny), *dx = nn_test_alloc(nx);
		float *acc = nn_test_alloc(nx);
		nn_test_fill(r, ny, 20 + k, -1, 1);
		nn_test_fill(acc, nx, 30 + k, -1, 1);
		CHECK_OK(nn_cpu_maxpool_backward(&ctx1, &t.d, t.am, r, dx, &err),
			 &err);
		CHECK_EQ_INT(nn_test_gradcheck("maxpool dx", pool_fwd, &t, t.x, nx,
					       dx, r, ny, 200, 1e-3f, 1e-3, 1e-3),
			     0);
		/* the check ran forward on perturbed inputs; values are distinct
		 * enough that argmax is back to the original */
		pool_fwd(&t, y);
		float *want = nn_test_alloc(nx);
		for (size_t i = 0; i < nx; i++)
			want[i] = acc[i] + dx[i];
		CHECK_OK(nn_cpu_maxpool_backward(&ctx1, &t.d, t.am, r, acc, &err),
			 &err);
		/* not bit-exact: with overlapping windows the sum is
		 * (pre + r1) + r2 against pre + (r1 + r2) */
		for (size_t i = 0; i < nx; i++)
			CHECK_NEAR(acc[i], want[i], 1e-6);
		free(t.x), free(t.am), free(y), free(yr), free(amr), free(r);
		free(dx), free(acc), free(want);
	}
}

/* The documented scan over arbitrary values: row-major, strict >, a NaN
 * wins (the last one), -infinity loses to nothing but keeps the first
 * real element. */
static void ref_scan(const nn_pool_desc *d, const float *x, float *y,
		     int32_t *am)
{
	for (int p = 0; p < d->n * d->c; p++)
		for (int oh = 0; oh < d->h_out; oh++)
			for (int ow = 0; ow < d->w_out; ow++) {
				float best = -INFINITY;
				int arg = -1;
				for (int i = 0; i < d->kh; i++)
					for (int j = 0; j < d->kw; j++) {
						int ih = oh * d->stride_h - d->pad_h + i;
						int iw = ow * d->stride_w - d->pad_w + j;
						if (ih < 0 || ih >= d->h_in || iw < 0 ||
						    iw >= d->w_in)
							continue;
						float v = x[(size_t)p * d->h_in * d->w_in +
							    ih * d->w_in + iw];
						if (arg < 0)
							arg = ih * d->w_in + iw;
						if (v > best || isnan(v))
							best = v, arg = ih * d->w_in + iw;
					}
				size_t o = ((size_t)p * d->h_out + oh) * d->w_out + ow;
				y[o] = best;
				am[o] = arg;
			}
}

/* Ties, NaNs and -infinity everywhere, odd planes (the 2x2 window drops
 * the last row and column), on the 2x2 stride-2 path and the generic one:
 * both follow the documented scan exactly. */
static void test_special_values(void)
{
	static const int cases[][7] = {
		{2, 3, 7, 5, 2, 2, 0}, {1, 2, 8, 8, 2, 2, 0},
		{2, 2, 7, 9, 3, 2, 1}, {1, 1, 6, 6, 3, 1, 1},
	};
	static const float pool[5] = {-INFINITY, NAN, 0.0f, 1.0f, 2.0f};
	ims_rng r;
	ims_rng_seed(&r, 99, 1);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const int *c = cases[k];
		nn_pool_desc d;
		CHECK_OK(nn_pool_desc_init(&d, c[0], c[1], c[2], c[3], c[4], c[5],
					   c[6], &err), &err);
		size_t nx = (size_t)c[0] * c[1] * c[2] * c[3];
		size_t ny = (size_t)c[0] * c[1] * d.h_out * d.w_out;
		for (int round = 0; round < 20; round++) {
			float *x = nn_test_alloc(nx), *y = nn_test_alloc(ny);
			float *yr = nn_test_alloc(ny);
			int32_t *am = calloc(ny, sizeof(int32_t));
			int32_t *amr = calloc(ny, sizeof(int32_t));
			for (size_t i = 0; i < nx; i++)
				x[i] = pool[ims_rng_below(&r, round < 10 ? 5 : 3)];
			CHECK_OK(nn_cpu_maxpool_forward(&ctx1, &d, x, y, am, &err),
				 &err);
			ref_scan(&d, x, yr, amr);
			CHECK_MEM(am, amr, ny * sizeof(int32_t));
			for (size_t i = 0; i < ny; i++)
				CHECK(isnan(y[i]) ? isnan(yr[i]) : y[i] == yr[i]);
			free(x), free(y), free(yr), free(am), free(amr);
		}
	}
}

static void test_threads(void)
{
	nn_pool_desc d;
	CHECK_OK(nn_pool_desc_init(&d, 4, 8, 56, 56, 3, 2, 1, &err), &err);
	size_t nx = 4 * 8 * 56 * 56, ny = 4 * 8 * (size_t)d.h_out * d.w_out;
	float *x = nn_test_alloc(nx), *dy = nn_test_alloc(ny);
	float *y[2], *dx[2];
	int32_t *am[2];
	nn_ctx *ctxs[2] = {&ctx1, &ctx2};
	nn_test_fill(x, nx, 1, -1, 1);
	nn_test_fill(dy, ny, 2, -1, 1);
	for (int k = 0; k < 2; k++) {
		y[k] = nn_test_alloc(ny), dx[k] = nn_test_alloc(nx);
		am[k] = calloc(ny, sizeof(int32_t));
		CHECK_OK(nn_cpu_maxpool_forward(ctxs[k], &d, x, y[k], am[k], &err),
			 &err);
		CHECK_OK(nn_cpu_maxpool_backward(ctxs[k], &d, am[k], dy, dx[k],
						 &err), &err);
	}
	CHECK_MEM(y[0], y[1], ny * sizeof(float));
	CHECK_MEM(am[0], am[1], ny * sizeof(int32_t));
	CHECK_MEM(dx[0], dx[1], nx * sizeof(float));
	free(x), free(dy);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(dx[k]), free(am[k]);
}

static void test_errors(void)
{
	nn_pool_desc d;
	CHECK_EQ_INT(nn_pool_desc_init(&d, 1, 1, 8, 8, 3, 2, 2, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "exceeds half the 3x3 window") != NULL);
	CHECK_EQ_INT(nn_pool_desc_init(&d, 1, 1, 2, 2, 3, 1, 0, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "empty output") != NULL);
	CHECK_EQ_INT(nn_pool_desc_init(&d, 1, 1, 8, 8, 2, 0, 0, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "stride") != NULL);
	CHECK_EQ_INT(nn_pool_desc_init(&d, 1, 1, 8, 8, 0, 1, 0, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "window 0x0 is empty") != NULL);
	CHECK_EQ_INT(nn_pool_desc_init(&d, 0, 1, 8, 8, 2, 2, 0, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "invalid input shape 0x1x8x8") != NULL);
	CHECK_EQ_INT(nn_pool_desc_init(&d, 1, 1, 8, 8, 2, 2, -1, &err),
		     IMS_EINVAL);
	CHECK_EQ_INT(nn_pool_desc_init(NULL, 1, 1, 8, 8, 2, 2, 0, &err),
		     IMS_EINVAL);

	float x[16], y[4], dx[16];
	int32_t am[4];
	memcpy(x, plane, sizeof(x));
	CHECK_OK(nn_pool_desc_init(&d, 1, 1, 4, 4, 2, 2, 0, &err), &err);
	nn_pool_desc bad = d;
	bad.h_out = 3;
	CHECK_EQ_INT(nn_cpu_maxpool_forward(&ctx1, &bad, x, y, am, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "does not match") != NULL);
	bad = d;
	bad.pad_h = 1;
	CHECK_EQ_INT(nn_cpu_maxpool_forward(&ctx1, &bad, x, y, am, &err),
		     IMS_EINVAL);
	CHECK_OK(nn_pool_desc_init_adaptive(&bad, 1, 1, 4, 4, 2, 2, &err), &err);
	CHECK_EQ_INT(nn_cpu_maxpool_forward(&ctx1, &bad, x, y, am, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "adaptive") != NULL);

	/* a corrupt argmax is refused before dx is touched */
	float dy[4] = {1, 1, 1, 1};
	int32_t wild[4] = {0, 5, 16, 2};
	memset(dx, 0, sizeof(dx));
	CHECK_EQ_INT(nn_cpu_maxpool_backward(&ctx1, &d, wild, dy, dx, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "argmax 16 of output 2") != NULL);
	float zero[16] = {0};
	CHECK_MEM(dx, zero, sizeof(dx));
	wild[2] = -1;
	CHECK_EQ_INT(nn_cpu_maxpool_backward(&ctx1, &d, wild, dy, dx, &err),
		     IMS_EINVAL);
}

/* ctx->dx_overwrite: each plane is cleared before the scatter. */
typedef struct pool_dx_case {
	nn_pool_desc d;
	int32_t *am;
	float *dy;
} pool_dx_case;

static int max_dx(nn_ctx *ctx, void *ud, float *dx)
{
	pool_dx_case *c = ud;
	return nn_cpu_maxpool_backward(ctx, &c->d, c->am, c->dy, dx, &err);
}

static void test_overwrite(void)
{
	static const int cases[][7] = {
		{4, 8, 32, 32, 2, 2, 0}, {3, 16, 28, 28, 3, 2, 1}, {2, 3, 7, 9, 3, 1, 1},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const int *q = cases[k];
		pool_dx_case c;
		CHECK_OK(nn_pool_desc_init(&c.d, q[0], q[1], q[2], q[3], q[4], q[5],
					   q[6], &err), &err);
		size_t nx = (size_t)q[0] * q[1] * q[2] * q[3];
		size_t ny = (size_t)q[0] * q[1] * c.d.h_out * c.d.w_out;
		float *x = nn_test_alloc(nx), *y = nn_test_alloc(ny);
		c.am = calloc(ny, sizeof(int32_t));
		c.dy = nn_test_alloc(ny);
		nn_test_fill(x, nx, 10 + k, -1, 1);
		nn_test_fill(c.dy, ny, 20 + k, -1, 1);
		CHECK_OK(nn_cpu_maxpool_forward(&ctx1, &c.d, x, y, c.am, &err), &err);
		CHECK_EQ_INT(nn_test_overwrite("maxpool", &ctx1, max_dx, &c, nx), 0);
		CHECK_EQ_INT(nn_test_overwrite("maxpool", &ctx2, max_dx, &c, nx), 0);
		free(x), free(y), free(c.am), free(c.dy);
	}
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&ctx1, 1, &err), &err);
	CHECK_OK(nn_ctx_init_cpu(&ctx2, 2, &err), &err);
	test_known();
	test_ties();
	test_reference_and_gradients();
	test_special_values();
	test_threads();
	test_errors();
	test_overwrite();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
