/* test_avgpool.c - average pooling: a 4x4 plane by hand, padding counted
 * in the divisor (count_include_pad), adaptive 5->3 windows by hand, global
 * and enlarging adaptive pools, a naive double reference, finite
 * differences for fixed and adaptive windows, dx accumulation, NULL dx, the
 * same bits on 1 and 2 threads, and descriptor errors. */
#include <math.h>

#include "nn_test_util.h"
#include "train/nn_internal.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

static void test_known(void)
{
	static const float plane[16] = {
		1, 3, 2, 4,
		5, 6, 1, 2,
		7, 2, 9, 0,
		3, 8, 4, 4,
	};
	nn_pool_desc d;
	float y[25];
	CHECK_OK(nn_pool_desc_init(&d, 1, 1, 4, 4, 2, 2, 0, &err), &err);
	CHECK_OK(nn_cpu_avgpool_forward(&ctx1, &d, plane, y, &err), &err);
	CHECK(y[0] == 3.75f && y[1] == 2.25f && y[2] == 5 && y[3] == 4.25f);

	/* padding counts in the divisor: a 3x3 window on a corner sees 4
	 * ones and 5 zeros */
	float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
	CHECK_OK(nn_pool_desc_init(&d, 1, 1, 3, 3, 3, 1, 1, &err), &err);
	CHECK_EQ_INT(d.h_out, 3);
	CHECK_OK(nn_cpu_avgpool_forward(&ctx1, &d, ones, y, &err), &err);
	const float want_pad[9] = {4 / 9.0f, 6 / 9.0f, 4 / 9.0f, 6 / 9.0f, 1,
				   6 / 9.0f, 4 / 9.0f, 6 / 9.0f, 4 / 9.0f};
	for (int i = 0; i < 9; i++)
		CHECK_NEAR(y[i], want_pad[i], 1e-7);
	/* ... and in the backward pass */
	float dy[9], dx[9] = {0};
	for (int i = 0; i < 9; i++)
		dy[i] = 9;
	CHECK_OK(nn_cpu_avgpool_backward(&ctx1, &d, dy, dx, &err), &err);
	const float want_dx[9] = {4, 6, 4, 6, 9, 6, 4, 6, 4};
	CHECK_MEM(dx, want_dx, sizeof(dx));
	CHECK_OK(nn_cpu_avgpool_backward(&ctx1, &d, dy, NULL, &err), &err);

	/* adaptive 5 -> 3: windows [0, 2), [1, 4), [3, 5) on each axis;
	 * x = 5 i + j, so y = 5 mean(rows) + mean(cols) */
	float x[25];
	for (int i = 0; i < 25; i++)
		x[i] = (float)i;
	CHECK_OK(nn_pool_desc_init_adaptive(&d, 1, 1, 5, 5, 3, 3, &err), &err);
	CHECK_EQ_INT(d.adaptive, 1);
	CHECK_OK(nn_cpu_avgpool_forward(&ctx1, &d, x, y, &err), &err);
	const double m[3] = {0.5, 2, 3.5};
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 3; b++)
			CHECK_NEAR(y[a * 3 + b], 5 * m[a] + m[b], 1e-6);
	/* the middle window is 3x3, the corners 2x2 */
	float g[9] = {0, 0, 0, 0, 9, 0, 0, 0, 0}, gx[25] = {0};
	CHECK_OK(nn_cpu_avgpool_backward(&ctx1, &d, g, gx, &err), &err);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++) {
			int in = i >= 1 && i < 4 && j >= 1 && j < 4;
			CHECK(gx[i * 5 + j] == (in ? 1.0f : 0.0f));
		}

	/* global pooling: the mean of the plane */
	CHECK_OK(nn_pool_desc_init_adaptive(&d, 1, 1, 5, 5, 1, 1, &err), &err);
	CHECK_OK(nn_cpu_avgpool_forward(&ctx1, &d, x, y, &err), &err);
	CHECK(y[0] == 12);

	/* enlarging, 3 -> 5: windows [0,1) [0,2) [1,2) [1,3) [2,3) */
	CHECK_OK(nn_pool_desc_init_adaptive(&d, 1, 1, 1, 3, 1, 5, &err), &err);
	CHECK_OK(nn_cpu_avgpool_forward(&ctx1, &d, x, y, &err), &err);
	const float up[5] = {0, 0.5f, 1, 1.5f, 2};
	CHECK_MEM(y, up, sizeof(up));
}

/* Naive double reference; adaptive bounds from floor/ceil in double. */
static void ref_avgpool(const nn_pool_desc *d, const float *x, double *y)
{
	for (int p = 0; p < d->n * d->c; p++)
		for (int oh = 0; oh < d->h_out; oh++)
			for (int ow = 0; ow < d->w_out; ow++) {
				double s = 0;
				int cnt;
				const float *xp = x + (size_t)p * d->h_in * d->w_in;
				if (d->adaptive) {
					int hs = (int)floor((double)oh * d->h_in / d->h_out);
					int he = (int)ceil((double)(oh + 1) * d->h_in / d->h_out);
					int ws = (int)floor((double)ow * d->w_in / d->w_out);
					int we = (int)ceil((double)(ow + 1) * d->w_in / d->w_out);
					for (int i = hs; i < he; i++)
						for (int j = ws; j < we; j++)
							s += xp[i * d->w_in + j];
					cnt = (he - hs) * (we - ws);
				} else {
					for (int i = 0; i < d->kh; i++)
						for (int j = 0; j < d->kw; j++) {
							int ih = oh * d->stride_h - d->pad_h + i;
							int iw = ow * d->stride_w - d->pad_w + j;
							if (ih >= 0 && ih < d->h_in && iw >= 0 &&
							    iw < d->w_in)
								s += xp[ih * d->w_in + iw];
						}
					cnt = d->kh * d->kw;
				}
				y[((size_t)p * d->h_out + oh) * d->w_out + ow] = s / cnt;
			}
}

typedef struct {
	nn_pool_desc d;
	float *x;
} pool_case;

static void pool_fwd(void *ud, float *y)
{
	pool_case *t = ud;
	nn_cpu_avgpool_forward(&ctx1, &t->d, t->x, y, NULL);
}

static void test_reference_and_gradients(void)
{
	static const int cases[][8] = {
		/* adaptive, n, c, h, w, then k, stride, pad or h_out, w_out */
		{0, 2, 3, 7, 7, 3, 2, 1}, {0, 1, 2, 5, 6, 2, 1, 1},
		{0, 1, 1, 6, 6, 3, 3, 0}, {0, 2, 2, 4, 5, 3, 1, 1},
		{0, 1, 1, 1, 1, 1, 1, 0}, {1, 2, 3, 5, 5, 3, 3, 0},
		{1, 1, 2, 7, 7, 1, 1, 0}, {1, 1, 1, 3, 4, 5, 2, 0},
		{1, 2, 2, 10, 6, 4, 3, 0}, {1, 1, 1, 7, 7, 7, 7, 0},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const int *c = cases[k];
		pool_case t;
		if (c[0])
			CHECK_OK(nn_pool_desc_init_adaptive(&t.d, c[1], c[2], c[3],
							    c[4], c[5], c[6], &err),
				 &err);
		else
			CHECK_OK(nn_pool_desc_init(&t.d, c[1], c[2], c[3], c[4],
						   c[5], c[6], c[7], &err), &err);
		size_t nx = (size_t)c[1] * c[2] * c[3] * c[4];
		size_t ny = (size_t)c[1] * c[2] * t.d.h_out * t.d.w_out;
		t.x = nn_test_alloc(nx);
		float *y = nn_test_alloc(ny);
		double *yr = calloc(ny, sizeof(double));
		nn_test_fill(t.x, nx, 10 + k, -1, 1);
		CHECK_OK(nn_cpu_avgpool_forward(&ctx1, &t.d, t.x, y, &err), &err);
		ref_avgpool(&t.d, t.x, yr);
		for (size_t i = 0; i < ny; i++)
			CHECK_NEAR(y[i], yr[i], 1e-6);

		float *r = nn_test_alloc(ny), *dx = nn_test_alloc(nx);
		float *acc = nn_test_alloc(nx);
		nn_test_fill(r, ny, 20 + k, -1, 1);
		nn_test_fill(acc, nx, 30 + k, -1, 1);
		CHECK_OK(nn_cpu_avgpool_backward(&ctx1, &t.d, r, dx, &err), &err);
		CHECK_EQ_INT(nn_test_gradcheck(c[0] ? "adaptive avgpool dx"
						    : "avgpool dx",
					       pool_fwd, &t, t.x, nx, dx, r, ny,
					       200, 1e-2f, 1e-4, 1e-3), 0);
		float *want = nn_test_alloc(nx);
		for (size_t i = 0; i < nx; i++)
			want[i] = acc[i] + dx[i];
		CHECK_OK(nn_cpu_avgpool_backward(&ctx1, &t.d, r, acc, &err), &err);
		/* overlapping windows add in another order: not bit-exact */
		for (size_t i = 0; i < nx; i++)
			CHECK_NEAR(acc[i], want[i], 1e-6);
		free(t.x), free(y), free(yr), free(r), free(dx), free(acc);
		free(want);
	}
}

static void test_threads(void)
{
	nn_pool_desc ds[3];
	CHECK_OK(nn_pool_desc_init(&ds[0], 8, 16, 28, 28, 3, 2, 1, &err), &err);
	CHECK_OK(nn_pool_desc_init_adaptive(&ds[1], 8, 16, 28, 28, 7, 7, &err),
		 &err);
	CHECK_OK(nn_pool_desc_init_adaptive(&ds[2], 8, 16, 28, 28, 5, 6, &err),
		 &err);
	size_t nx = 8 * 16 * 28 * 28;
	float *x = nn_test_alloc(nx), *dy = nn_test_alloc(nx);
	nn_test_fill(x, nx, 1, -1, 1);
	nn_test_fill(dy, nx, 2, -1, 1);
	nn_ctx *ctxs[2] = {&ctx1, &ctx2};
	for (int k = 0; k < 3; k++) {
		size_t ny = 8 * 16 * (size_t)ds[k].h_out * ds[k].w_out;
		float *y[2], *dx[2];
		for (int t = 0; t < 2; t++) {
			y[t] = nn_test_alloc(ny), dx[t] = nn_test_alloc(nx);
			CHECK_OK(nn_cpu_avgpool_forward(ctxs[t], &ds[k], x, y[t],
							&err), &err);
			CHECK_OK(nn_cpu_avgpool_backward(ctxs[t], &ds[k], dy, dx[t],
							 &err), &err);
		}
		CHECK_MEM(y[0], y[1], ny * sizeof(float));
		CHECK_MEM(dx[0], dx[1], nx * sizeof(float));
		for (int t = 0; t < 2; t++)
			free(y[t]), free(dx[t]);
	}
	free(x), free(dy);
}

static void test_errors(void)
{
	nn_pool_desc d;
	CHECK_EQ_INT(nn_pool_desc_init_adaptive(&d, 1, 1, 5, 5, 0, 3, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "output 0x3 is empty") != NULL);
	CHECK_EQ_INT(nn_pool_desc_init_adaptive(&d, 1, 1, 0, 5, 1, 1, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "invalid input shape 1x1x0x5") != NULL);
	CHECK_EQ_INT(nn_pool_desc_init_adaptive(NULL, 1, 1, 5, 5, 1, 1, &err),
		     IMS_EINVAL);

	float x[64] = {0}, y[64];
	CHECK_OK(nn_pool_desc_init(&d, 1, 1, 8, 8, 3, 2, 1, &err), &err);
	nn_pool_desc bad = d;
	bad.pad_h = 2;
	CHECK_EQ_INT(nn_cpu_avgpool_forward(&ctx1, &bad, x, y, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "exceeds half") != NULL);
	bad = d;
	bad.w_out = 5;
	CHECK_EQ_INT(nn_cpu_avgpool_forward(&ctx1, &bad, x, y, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "does not match") != NULL);
	CHECK_EQ_INT(nn_cpu_avgpool_backward(&ctx1, &bad, x, y, &err),
		     IMS_EINVAL);
	bad = d;
	bad.stride_w = 0;
	CHECK_EQ_INT(nn_cpu_avgpool_forward(&ctx1, &bad, x, y, &err),
		     IMS_EINVAL);
	bad = d;
	bad.h_in = 1;
	bad.kh = 5;
	bad.pad_h = 1;
	CHECK_EQ_INT(nn_cpu_avgpool_forward(&ctx1, &bad, x, y, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "empty output") != NULL);
	CHECK_OK(nn_pool_desc_init_adaptive(&bad, 1, 1, 8, 8, 2, 2, &err), &err);
	bad.w_out = -1;
	CHECK_EQ_INT(nn_cpu_avgpool_forward(&ctx1, &bad, x, y, &err),
		     IMS_EINVAL);
	CHECK_EQ_INT(nn_cpu_avgpool_forward(&ctx1, NULL, x, y, &err),
		     IMS_EINVAL);
}

/* ctx->dx_overwrite: each plane is cleared before the scatter. */
typedef struct pool_dx_case {
	nn_pool_desc d;
	int32_t *am;
	float *dy;
} pool_dx_case;

static int avg_dx(nn_ctx *ctx, void *ud, float *dx)
{
	pool_dx_case *c = ud;
	return nn_cpu_avgpool_backward(ctx, &c->d, c->dy, dx, &err);
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
		(void)y;
		CHECK_EQ_INT(nn_test_overwrite("avgpool", &ctx1, avg_dx, &c, nx), 0);
		CHECK_EQ_INT(nn_test_overwrite("avgpool", &ctx2, avg_dx, &c, nx), 0);
		free(x), free(y), free(c.am), free(c.dy);
	}
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&ctx1, 1, &err), &err);
	CHECK_OK(nn_ctx_init_cpu(&ctx2, 2, &err), &err);
	test_known();
	test_reference_and_gradients();
	test_threads();
	test_errors();
	test_overwrite();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
