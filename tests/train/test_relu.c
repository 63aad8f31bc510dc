/* test_relu.c - ReLU: known values (NaN passes through), dx += dy where
 * y > 0, a finite-difference check, in-place use, NULL dx, and the same
 * bits on 1 and 2 threads. */
#include <math.h>

#include "nn_test_util.h"
#include "train/nn_internal.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

static void test_values(void)
{
	float x[6] = {-2, -0.0f, 0, 0.5f, 3, NAN}, y[6];
	CHECK_OK(nn_cpu_relu_forward(&ctx1, 6, x, y, &err), &err);
	CHECK(y[0] == 0 && y[1] == 0 && y[2] == 0);
	CHECK(y[3] == 0.5f && y[4] == 3);
	CHECK(isnan(y[5]));

	float dy[6] = {1, 2, 3, 4, 5, 6};
	float dx[6] = {10, 10, 10, 10, 10, 10};
	CHECK_OK(nn_cpu_relu_backward(&ctx1, 6, y, dy, dx, &err), &err);
	float want[6] = {10, 10, 10, 14, 15, 10};
	CHECK_MEM(dx, want, sizeof(dx));
	CHECK_OK(nn_cpu_relu_backward(&ctx1, 6, y, dy, NULL, &err), &err);
	CHECK_OK(nn_cpu_relu_forward(&ctx1, 0, x, y, &err), &err);

	/* in place */
	CHECK_OK(nn_cpu_relu_forward(&ctx1, 5, x, x, &err), &err);
	CHECK(x[0] == 0 && x[3] == 0.5f && x[4] == 3);
}

typedef struct {
	size_t n;
	float *x;
} relu_case;

static void relu_fwd(void *ud, float *y)
{
	relu_case *t = ud;
	nn_cpu_relu_forward(&ctx1, t->n, t->x, y, NULL);
}

static void test_gradient(void)
{
	enum { N = 200 };
	relu_case t = {N, nn_test_alloc(N)};
	float *y = nn_test_alloc(N), *r = nn_test_alloc(N);
	float *dx = nn_test_alloc(N);
	nn_test_fill(t.x, N, 1, -1, 1);
	/* keep inputs away from the kink, where the difference is one-sided */
	for (int i = 0; i < N; i++)
		if (fabsf(t.x[i]) < 0.05f)
			t.x[i] = t.x[i] < 0 ? -0.5f : 0.5f;
	nn_test_fill(r, N, 2, -1, 1);
	relu_fwd(&t, y);
	CHECK_OK(nn_cpu_relu_backward(&ctx1, N, y, r, dx, &err), &err);
	CHECK_EQ_INT(nn_test_gradcheck("relu dx", relu_fwd, &t, t.x, N, dx, r,
				       N, N, 1e-2f, 1e-4, 1e-3), 0);
	free(t.x), free(y), free(r), free(dx);
}

static void test_threads(void)
{
	size_t n = 300001;
	float *x = nn_test_alloc(n), *dy = nn_test_alloc(n);
	float *y[2], *dx[2];
	nn_ctx *ctxs[2] = {&ctx1, &ctx2};
	nn_test_fill(x, n, 3, -1, 1);
	nn_test_fill(dy, n, 4, -1, 1);
	for (int k = 0; k < 2; k++) {
		y[k] = nn_test_alloc(n), dx[k] = nn_test_alloc(n);
		nn_test_fill(dx[k], n, 5, -1, 1);
		CHECK_OK(nn_cpu_relu_forward(ctxs[k], n, x, y[k], &err), &err);
		CHECK_OK(nn_cpu_relu_backward(ctxs[k], n, y[k], dy, dx[k], &err),
			 &err);
	}
	CHECK_MEM(y[0], y[1], n * sizeof(float));
	CHECK_MEM(dx[0], dx[1], n * sizeof(float));
	free(x), free(dy);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(dx[k]);
}

/* ctx->dx_overwrite: dx = mask dy over garbage, the same as dx += into 0. */
typedef struct relu_ow_case {
	size_t n;
	float *y, *dy;
} relu_ow_case;

static int relu_dx(nn_ctx *ctx, void *ud, float *dx)
{
	relu_ow_case *c = ud;
	return nn_cpu_relu_backward(ctx, c->n, c->y, c->dy, dx, &err);
}

static void test_overwrite(void)
{
	relu_ow_case c = {.n = 100003};
	c.y = nn_test_alloc(c.n);
	c.dy = nn_test_alloc(c.n);
	nn_test_fill(c.y, c.n, 1, -1, 1);
	nn_test_fill(c.dy, c.n, 2, -1, 1);
	CHECK_EQ_INT(nn_test_overwrite("relu", &ctx1, relu_dx, &c, c.n), 0);
	CHECK_EQ_INT(nn_test_overwrite("relu", &ctx2, relu_dx, &c, c.n), 0);
	free(c.y), free(c.dy);
}

/* In place (y == x; dx == dy with dx_overwrite), as the memory plan runs
 * it: the out-of-place bits, on both thread counts, past the parallel
 * threshold. */
static void test_in_place(void)
{
	const size_t n = 200003;
	float *x = nn_test_alloc(n), *y = nn_test_alloc(n), *dy = nn_test_alloc(n);
	float *dx = nn_test_alloc(n), *buf = nn_test_alloc(n);
	nn_test_fill(x, n, 31, -1, 1);
	nn_test_fill(dy, n, 32, -1, 1);
	nn_ctx *ctxs[2] = {&ctx1, &ctx2};
	for (int c = 0; c < 2; c++) {
		CHECK_OK(nn_cpu_relu_forward(ctxs[c], n, x, y, &err), &err);
		memcpy(buf, x, n * sizeof(float));
		CHECK_OK(nn_cpu_relu_forward(ctxs[c], n, buf, buf, &err), &err);
		CHECK(memcmp(buf, y, n * sizeof(float)) == 0);
		ctxs[c]->dx_overwrite = 1;
		CHECK_OK(nn_cpu_relu_backward(ctxs[c], n, y, dy, dx, &err), &err);
		memcpy(buf, dy, n * sizeof(float));
		CHECK_OK(nn_cpu_relu_backward(ctxs[c], n, y, buf, buf, &err), &err);
		ctxs[c]->dx_overwrite = 0;
		CHECK(memcmp(buf, dx, n * sizeof(float)) == 0);
	}
	free(x);
	free(y);
	free(dy);
	free(dx);
	free(buf);
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&ctx1, 1, &err), &err);
	CHECK_OK(nn_ctx_init_cpu(&ctx2, 2, &err), &err);
	test_values();
	test_gradient();
	test_threads();
	test_overwrite();
	test_in_place();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
