/* test_add.c - residual add and gradient accumulation: exact values,
 * aliasing (y = a + y, in place), finite differences through add, NULL dx,
 * and the same bits on 1 and 2 threads; add + ReLU in one pass against
 * the two layers. */
#include <math.h>
#include <string.h>

#include "nn_test_util.h"
#include "train/nn_internal.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

static void test_values(void)
{
	float a[4] = {1, -2, 0.5f, 1e30f}, b[4] = {2, 2, 0.25f, -1e30f}, y[4];
	CHECK_OK(nn_cpu_add_forward(&ctx1, 4, a, b, y, &err), &err);
	float want[4] = {3, 0, 0.75f, 0};
	CHECK_MEM(y, want, sizeof(y));

	/* in place: y may be one of the inputs */
	CHECK_OK(nn_cpu_add_forward(&ctx1, 4, a, b, b, &err), &err);
	CHECK_MEM(b, want, sizeof(b));

	float dx[3] = {1, 2, 3}, dy[3] = {0.5f, -2, 4};
	CHECK_OK(nn_cpu_accumulate(&ctx1, 3, dy, dx, &err), &err);
	float acc[3] = {1.5f, 0, 7};
	CHECK_MEM(dx, acc, sizeof(dx));
	CHECK_OK(nn_cpu_accumulate(&ctx1, 3, dy, NULL, &err), &err);
	CHECK_OK(nn_cpu_add_forward(&ctx1, 0, a, b, y, &err), &err);
}

typedef struct {
	size_t n;
	float *a, *b;
} add_case;

static void add_fwd(void *ud, float *y)
{
	add_case *t = ud;
	nn_cpu_add_forward(&ctx1, t->n, t->a, t->b, y, NULL);
}

/* The backward of add is one accumulate per input, into pre-filled
 * gradients (a residual branch adds to what the shortcut left). */
static void test_gradient(void)
{
	enum { N = 64 };
	add_case t = {N, nn_test_alloc(N), nn_test_alloc(N)};
	float *r = nn_test_alloc(N), *da = nn_test_alloc(N);
	float *db = nn_test_alloc(N), *pre = nn_test_alloc(N);
	nn_test_fill(t.a, N, 1, -1, 1);
	nn_test_fill(t.b, N, 2, -1, 1);
	nn_test_fill(r, N, 3, -1, 1);
	nn_test_fill(pre, N, 4, -1, 1);
	CHECK_OK(nn_cpu_accumulate(&ctx1, N, r, da, &err), &err);
	memcpy(db, pre, N * sizeof(float));
	CHECK_OK(nn_cpu_accumulate(&ctx1, N, r, db, &err), &err);
	for (int i = 0; i < N; i++) {
		CHECK(db[i] == pre[i] + r[i]);
		db[i] -= pre[i];
	}
	CHECK_EQ_INT(nn_test_gradcheck("add da", add_fwd, &t, t.a, N, da, r, N,
				       N, 1e-2f, 1e-4, 1e-3), 0);
	CHECK_EQ_INT(nn_test_gradcheck("add db", add_fwd, &t, t.b, N, db, r, N,
				       N, 1e-2f, 1e-4, 1e-3), 0);
	free(t.a), free(t.b), free(r), free(da), free(db), free(pre);
}

static void test_threads(void)
{
	size_t n = 250007;
	float *a = nn_test_alloc(n), *b = nn_test_alloc(n);
	float *y[2], *dx[2];
	nn_ctx *ctxs[2] = {&ctx1, &ctx2};
	nn_test_fill(a, n, 5, -1, 1);
	nn_test_fill(b, n, 6, -1, 1);
	for (int k = 0; k < 2; k++) {
		y[k] = nn_test_alloc(n), dx[k] = nn_test_alloc(n);
		nn_test_fill(dx[k], n, 7, -1, 1);
		CHECK_OK(nn_cpu_add_forward(ctxs[k], n, a, b, y[k], &err), &err);
		CHECK_OK(nn_cpu_accumulate(ctxs[k], n, a, dx[k], &err), &err);
	}
	CHECK_MEM(y[0], y[1], n * sizeof(float));
	CHECK_MEM(dx[0], dx[1], n * sizeof(float));
	CHECK(y[0][n - 1] == a[n - 1] + b[n - 1]);
	free(a), free(b);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(dx[k]);
}

/* ctx->dx_overwrite: dx = dy over garbage, the same as dx += dy into 0. */
static int acc_dx(nn_ctx *ctx, void *ud, float *dx)
{
	return nn_cpu_accumulate(ctx, 70001, ud, dx, &err);
}

static void test_overwrite(void)
{
	float *dy = nn_test_alloc(70001);
	nn_test_fill(dy, 70001, 3, -1, 1);
	CHECK_EQ_INT(nn_test_overwrite("accumulate", &ctx1, acc_dx, dy, 70001), 0);
	CHECK_EQ_INT(nn_test_overwrite("accumulate", &ctx2, acc_dx, dy, 70001), 0);
	free(dy);
}

/* In place (y == a or y == b), as the memory plan runs it: the
 * out-of-place bits, past the parallel threshold. */
static void test_in_place(void)
{
	const size_t n = 200003;
	float *a = nn_test_alloc(n), *b = nn_test_alloc(n), *y = nn_test_alloc(n);
	float *buf = nn_test_alloc(n);
	nn_test_fill(a, n, 41, -1, 1);
	nn_test_fill(b, n, 42, -1, 1);
	CHECK_OK(nn_cpu_add_forward(&ctx2, n, a, b, y, &err), &err);
	memcpy(buf, a, n * sizeof(float));
	CHECK_OK(nn_cpu_add_forward(&ctx2, n, buf, b, buf, &err), &err);
	CHECK(memcmp(buf, y, n * sizeof(float)) == 0);
	memcpy(buf, b, n * sizeof(float));
	CHECK_OK(nn_cpu_add_forward(&ctx2, n, a, buf, buf, &err), &err);
	CHECK(memcmp(buf, y, n * sizeof(float)) == 0);
	free(a);
	free(b);
	free(y);
	free(buf);
}

/* add + ReLU in one pass: add then the ReLU layer, bit for bit (NaN
 * passes, -0 stays -0), in place too, on 1 and 2 threads */
static void test_add_relu(void)
{
	const size_t n = 200003;
	float *a = nn_test_alloc(n), *b = nn_test_alloc(n), *want = nn_test_alloc(n);
	float *y = nn_test_alloc(n);
	nn_test_fill(a, n, 51, -1, 1);
	nn_test_fill(b, n, 52, -1, 1);
	a[0] = NAN, a[1] = -0.0f, b[1] = -0.0f, a[2] = INFINITY, b[3] = -INFINITY;
	CHECK_OK(nn_cpu_add_forward(&ctx1, n, a, b, want, &err), &err);
	CHECK_OK(nn_cpu_relu_forward(&ctx1, n, want, want, &err), &err);
	CHECK(isnan(want[0]) && signbit(want[1]) && want[3] == 0.0f);
	for (int t = 0; t < 2; t++) {
		nn_ctx *c = t ? &ctx2 : &ctx1;
		CHECK_OK(nn_cpu_add_relu_forward(c, n, a, b, y, &err), &err);
		CHECK_MEM(y, want, n * sizeof(float));
		memcpy(y, b, n * sizeof(float));
		CHECK_OK(nn_cpu_add_relu_forward(c, n, a, y, y, &err), &err);
		CHECK_MEM(y, want, n * sizeof(float));
	}
	free(a), free(b), free(want), free(y);
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
	test_add_relu();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
