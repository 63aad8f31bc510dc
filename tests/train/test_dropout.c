/* test_dropout.c - inverted dropout: p = 0 passes through, kept values
 * scaled by 1 / (1 - p), keep fraction near 1 - p, the mask a function of
 * the seed (same seed, same mask; another seed, another mask) and not of
 * the thread count, backward with a fixed mask, bad probabilities, and
 * a rank's mask the one-rank batch's at its samples' global places. */
#include <math.h>

#include "nn_test_util.h"
#include "train/nn_internal.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

static void test_pass_through(void)
{
	enum { N = 100 };
	float x[N], y[N], dx[N], dy[N];
	uint8_t mask[N];
	nn_test_fill(x, N, 1, -1, 1);
	nn_test_fill(dy, N, 2, -1, 1);
	memset(mask, 7, N);
	CHECK_OK(nn_cpu_dropout_forward(&ctx1, N, 0, 42, NULL, x, y, mask,
					&err),
		 &err);
	CHECK_MEM(y, x, sizeof(x));
	int ones = 0;
	for (int i = 0; i < N; i++)
		ones += mask[i] == 1;
	CHECK_EQ_INT(ones, N);
	/* no mask needed when nothing is dropped */
	CHECK_OK(nn_cpu_dropout_forward(&ctx1, N, 0, 42, NULL, x, y, NULL,
					&err),
		 &err);
	for (int i = 0; i < N; i++)
		dx[i] = 1;
	CHECK_OK(nn_cpu_dropout_backward(&ctx1, N, 0, NULL, dy, dx, &err), &err);
	for (int i = 0; i < N; i++)
		CHECK(dx[i] == 1 + dy[i]);
}

static void test_statistics(void)
{
	const size_t n = 100000;
	const float p = 0.3f;
	float *x = nn_test_alloc(n), *y = nn_test_alloc(n);
	uint8_t *m1 = malloc(n), *m2 = malloc(n), *m3 = malloc(n);
	nn_test_fill(x, n, 3, 0.5f, 1.5f);
	CHECK_OK(nn_cpu_dropout_forward(&ctx1, n, p, 1234, NULL, x, y, m1,
					&err),
		 &err);
	size_t kept = 0, bad = 0;
	const float scale = 1.0f / (1.0f - p);
	for (size_t i = 0; i < n; i++) {
		kept += m1[i];
		bad += m1[i] > 1;
		bad += y[i] != (m1[i] ? x[i] * scale : 0.0f);
	}
	CHECK_EQ_INT(bad, 0);
	/* binomial std is 0.0015; 0.01 is over 6 of them */
	CHECK_NEAR((double)kept / n, 1 - p, 0.01);

	CHECK_OK(nn_cpu_dropout_forward(&ctx1, n, p, 1234, NULL, x, y, m2,
					&err),
		 &err);
	CHECK_MEM(m1, m2, n);
	CHECK_OK(nn_cpu_dropout_forward(&ctx1, n, p, 1235, NULL, x, y, m3,
					&err),
		 &err);
	size_t diff = 0;
	for (size_t i = 0; i < n; i++)
		diff += m1[i] != m3[i];
	/* independent masks differ at 2 p (1 - p) = 42% of places */
	CHECK_NEAR((double)diff / n, 2 * p * (1 - p), 0.01);

	/* a prefix of a longer tensor has the same mask: element i depends
	 * on (seed, i) only */
	CHECK_OK(nn_cpu_dropout_forward(&ctx1, 1000, p, 1234, NULL, x, y, m3,
					&err),
		 &err);
	CHECK_MEM(m1, m3, 1000);

	/* a large p */
	CHECK_OK(nn_cpu_dropout_forward(&ctx1, n, 0.9f, 9, NULL, x, y, m2,
					&err),
		 &err);
	kept = 0;
	for (size_t i = 0; i < n; i++)
		kept += m2[i];
	CHECK_NEAR((double)kept / n, 0.1, 0.01);
	free(x), free(y), free(m1), free(m2), free(m3);
}

static void test_threads(void)
{
	const size_t n = 200003;
	float *x = nn_test_alloc(n), *dy = nn_test_alloc(n);
	float *y[2], *dx[2];
	uint8_t *mask[2];
	nn_ctx *ctxs[2] = {&ctx1, &ctx2};
	nn_test_fill(x, n, 4, -1, 1);
	nn_test_fill(dy, n, 5, -1, 1);
	for (int k = 0; k < 2; k++) {
		y[k] = nn_test_alloc(n), dx[k] = nn_test_alloc(n);
		mask[k] = malloc(n);
		CHECK_OK(nn_cpu_dropout_forward(ctxs[k], n, 0.5f, 77, NULL, x,
						y[k], mask[k], &err),
			 &err);
		CHECK_OK(nn_cpu_dropout_backward(ctxs[k], n, 0.5f, mask[k], dy,
						 dx[k], &err), &err);
	}
	CHECK_MEM(mask[0], mask[1], n);
	CHECK_MEM(y[0], y[1], n * sizeof(float));
	CHECK_MEM(dx[0], dx[1], n * sizeof(float));
	free(x), free(dy);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(dx[k]), free(mask[k]);
}

typedef struct {
	size_t n;
	float p;
	uint64_t seed;
	float *x;
	uint8_t *mask;
} drop_case;

static void drop_fwd(void *ud, float *y)
{
	drop_case *t = ud;
	nn_cpu_dropout_forward(&ctx1, t->n, t->p, t->seed, NULL, t->x, y,
			       t->mask, NULL);
}

/* The mask is fixed by the seed, so finite differences see the same
 * function the backward pass differentiates. */
static void test_gradient(void)
{
	enum { N = 300 };
	drop_case t = {N, 0.4f, 5, nn_test_alloc(N), malloc(N)};
	float *y = nn_test_alloc(N), *r = nn_test_alloc(N);
	float *dx = nn_test_alloc(N), *pre = nn_test_alloc(N);
	nn_test_fill(t.x, N, 6, -1, 1);
	nn_test_fill(r, N, 7, -1, 1);
	nn_test_fill(pre, N, 8, -1, 1);
	drop_fwd(&t, y);
	CHECK_OK(nn_cpu_dropout_backward(&ctx1, N, t.p, t.mask, r, dx, &err),
		 &err);
	CHECK_EQ_INT(nn_test_gradcheck("dropout dx", drop_fwd, &t, t.x, N, dx,
				       r, N, N, 1e-2f, 1e-4, 1e-3), 0);
	/* accumulation into a pre-filled dx */
	float *acc = nn_test_alloc(N);
	memcpy(acc, pre, N * sizeof(float));
	CHECK_OK(nn_cpu_dropout_backward(&ctx1, N, t.p, t.mask, r, acc, &err),
		 &err);
	int bad = 0;
	for (int i = 0; i < N; i++)
		bad += acc[i] != pre[i] + dx[i];
	CHECK_EQ_INT(bad, 0);
	CHECK_OK(nn_cpu_dropout_backward(&ctx1, N, t.p, t.mask, r, NULL, &err),
		 &err);
	free(t.x), free(t.mask), free(y), free(r), free(dx), free(pre);
	free(acc);
}

static void test_errors(void)
{
	float x[4] = {1, 2, 3, 4}, y[4];
	uint8_t m[4];
	const float bad[] = {1.0f, -0.1f, 1.5f, NAN};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ_INT(nn_cpu_dropout_forward(&ctx1, 4, bad[i], 1, NULL,
						    x, y, m, &err),
			     IMS_EINVAL);
		CHECK(strstr(err.msg, "outside [0, 1)") != NULL);
		CHECK_EQ_INT(nn_cpu_dropout_backward(&ctx1, 4, bad[i], m, x, y,
						     &err), IMS_EINVAL);
	}
	CHECK_EQ_INT(nn_cpu_dropout_backward(&ctx1, 4, 0.5f, NULL, x, y, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "no mask") != NULL);
}

/* ctx->dx_overwrite: dropped elements are written 0, not left alone. */
typedef struct drop_ow_case {
	size_t n;
	float p;
	uint8_t *mask;
	float *dy;
} drop_ow_case;

static int drop_dx(nn_ctx *ctx, void *ud, float *dx)
{
	drop_ow_case *c = ud;
	return nn_cpu_dropout_backward(ctx, c->n, c->p, c->mask, c->dy, dx, &err);
}

static void test_overwrite(void)
{
	const size_t n = 100001;
	float *x = nn_test_alloc(n), *y = nn_test_alloc(n);
	drop_ow_case c = {.n = n, .mask = malloc(n), .dy = nn_test_alloc(n)};
	nn_test_fill(x, n, 4, -1, 1);
	nn_test_fill(c.dy, n, 5, -1, 1);
	for (int k = 0; k < 2; k++) {
		c.p = k ? 0.3f : 0.0f;
		CHECK_OK(nn_cpu_dropout_forward(&ctx1, n, c.p, 9, NULL, x, y,
						c.mask, &err),
			 &err);
		CHECK_EQ_INT(nn_test_overwrite("dropout", &ctx1, drop_dx, &c, n), 0);
		CHECK_EQ_INT(nn_test_overwrite("dropout", &ctx2, drop_dx, &c, n), 0);
	}
	free(x), free(y), free(c.mask), free(c.dy);
}

/* In place (y == x), as the memory plan runs it: the out-of-place bits
 * and mask, for p = 0 (evaluation) and p = 0.3, past the parallel
 * threshold. */
static void test_in_place(void)
{
	const size_t n = 200003;
	float *x = nn_test_alloc(n), *y = nn_test_alloc(n), *buf = nn_test_alloc(n);
	uint8_t *m1 = malloc(n), *m2 = malloc(n);
	nn_test_fill(x, n, 51, -1, 1);
	const float ps[2] = {0.0f, 0.3f};
	for (int k = 0; k < 2; k++) {
		CHECK_OK(nn_cpu_dropout_forward(&ctx2, n, ps[k], 9, NULL, x, y,
						m1, &err),
			 &err);
		memcpy(buf, x, n * sizeof(float));
		CHECK_OK(nn_cpu_dropout_forward(&ctx2, n, ps[k], 9, NULL, buf,
						buf, m2, &err),
			 &err);
		CHECK(memcmp(buf, y, n * sizeof(float)) == 0);
		CHECK(memcmp(m1, m2, n) == 0);
	}
	free(x);
	free(y);
	free(buf);
	free(m1);
	free(m2);
}

/*
 * Rank r of N with a local batch of B samples of F elements holds global
 * samples r + k * N: its mask and values are the one-rank mask's and
 * values at (r + k * N) * F + f, so N ranks drop what one rank with the
 * whole batch does. A short last batch (fewer samples on a rank) too,
 * and bad placements are refused.
 */
static void test_ranks(void)
{
	enum { B = 5, F = 7001, W = 3 };
	const size_t nl = (size_t)B * F, ng = (size_t)W * B * F;
	const float p = 0.4f, scale = 1.0f / (1.0f - p);
	float *x = nn_test_alloc(ng), *y = nn_test_alloc(ng);
	float *xl = nn_test_alloc(nl), *yl = nn_test_alloc(nl);
	uint8_t *m = malloc(ng), *ml = malloc(nl), *m0 = malloc(nl);
	nn_test_fill(x, ng, 61, 0.5f, 1.5f);
	CHECK_OK(nn_cpu_dropout_forward(&ctx1, ng, p, 31, NULL, x, y, m, &err),
		 &err);
	const nn_dropout_place one = {F, 0, 1};
	for (int b = B; b >= B - 1; b--) {
		const size_t cnt = (size_t)b * F;
		for (int r = 0; r < W; r++) {
			for (int k = 0; k < b; k++)
				memcpy(xl + (size_t)k * F,
				       x + ((size_t)r + (size_t)k * W) * F,
				       F * sizeof(float));
			const nn_dropout_place at = {F, r, W};
			/* two threads: the placement is per element too */
			CHECK_OK(nn_cpu_dropout_forward(&ctx2, cnt, p, 31, &at,
							xl, yl, ml, &err),
				 &err);
			size_t bad = 0;
			for (int k = 0; k < b; k++) {
				const size_t g =
					((size_t)r + (size_t)k * W) * F;
				const size_t l = (size_t)k * F;
				bad += memcmp(ml + l, m + g, F) != 0;
				bad += memcmp(yl + l, y + g,
					      F * sizeof(float)) != 0;
			}
			CHECK_EQ_INT(bad, 0);
			if (r == 0)
				memcpy(m0, ml, cnt);
			else
				CHECK(memcmp(m0, ml, cnt) != 0);
		}
	}
	/* one rank, placed or not, is the element's own index */
	CHECK_OK(nn_cpu_dropout_forward(&ctx1, nl, p, 31, &one, x, yl, ml,
					&err),
		 &err);
	CHECK_MEM(ml, m, nl);
	CHECK_MEM(yl, y, nl * sizeof(float));
	for (size_t i = 0; i < nl; i++)
		CHECK(yl[i] == (ml[i] ? x[i] * scale : 0.0f));
	const nn_dropout_place bad[] = {{F, 3, 3}, {F, -1, 3}, {F, 0, 0},
					{0, 1, 3}, {F + 1, 1, 3}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ_INT(nn_cpu_dropout_forward(&ctx1, nl, p, 31, &bad[i],
						    x, yl, ml, &err),
			     IMS_EINVAL);
	free(x), free(y), free(xl), free(yl), free(m), free(ml), free(m0);
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&ctx1, 1, &err), &err);
	CHECK_OK(nn_ctx_init_cpu(&ctx2, 2, &err), &err);
	test_pass_through();
	test_statistics();
	test_threads();
	test_gradient();
	test_errors();
	test_overwrite();
	test_in_place();
	test_ranks();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
