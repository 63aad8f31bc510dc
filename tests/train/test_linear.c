/* test_linear.c - the fully connected layer: a hand-computed case,
 * forward and backward against loops in double for several shapes (some
 * large enough to run on 2 threads, with slices that are not multiples of
 * the alignment), dx accumulating, NULL gradients and repeatable bits on
 * 1 and 2 threads, finite-difference checks on 1, and the descriptor's
 * errors. */
#include <limits.h>
#include <math.h>

#include "nn_test_util.h"
#include "train/nn_internal.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

static void test_hand(void)
{
	/* x [2, 3], w [2, 3], b [2] */
	nn_linear_desc d = {.n = 2, .in = 3, .out = 2, .bias = 1};
	float x[6] = {1, 2, 3, 4, 5, 6}, w[6] = {1, 0, -1, 0.5f, 0.5f, 0.5f};
	float b[2] = {10, -1}, y[4];
	CHECK_OK(nn_cpu_linear_forward(&ctx1, &d, x, w, b, y, &err), &err);
	float want_y[4] = {8, 2, 8, 6.5f};
	CHECK_MEM(y, want_y, sizeof(y));

	float dy[4] = {1, 2, 3, 4}, dx[6], dw[6], db[2] = {-7, -7};
	for (int i = 0; i < 6; i++)
		dx[i] = 1;
	CHECK_OK(nn_cpu_linear_backward(&ctx1, &d, x, w, dy, dx, dw, db, &err),
		 &err);
	/* dx = dy w (+1), dw = dy^T x, db = column sums of dy */
	float want_dx[6] = {3, 2, 1, 6, 3, 0};
	float want_dw[6] = {13, 17, 21, 18, 24, 30};
	float want_db[2] = {4, 6};
	CHECK_MEM(dx, want_dx, sizeof(dx));
	CHECK_MEM(dw, want_dw, sizeof(dw));
	CHECK_MEM(db, want_db, sizeof(db));

	d.bias = 0;
	CHECK_OK(nn_cpu_linear_forward(&ctx1, &d, x, w, NULL, y, &err), &err);
	float want_y0[4] = {-2, 3, -2, 7.5f};
	CHECK_MEM(y, want_y0, sizeof(y));
}

typedef struct {
	nn_ctx *ctx;
	const nn_linear_desc *d;
	float *x, *w, *b;
} fwd_state;

static void lin_fwd(void *ud, float *y)
{
	fwd_state *s = ud;
	nn_cpu_linear_forward(s->ctx, s->d, s->x, s->w, s->b, y, NULL);
}

/* Entries off by more than 1e-5 of the sum of |terms| plus 1e-6. */
static int count_bad(const char *what, const float *got, const double *want,
		     const double *abs_sum, size_t n)
{
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		double tol = 1e-5 * abs_sum[i] + 1e-6;
		if (!(fabs((double)got[i] - want[i]) <= tol)) {
			if (bad < 3)
				fprintf(stderr, "%s[%zu]: got %.9g, want %.9g\n",
					what, i, got[i], want[i]);
			bad++;
		}
	}
	return bad;
}

static double *dalloc(size_t n)
{
	double *p = calloc(n ? n : 1, sizeof(double));
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

/* Finite differences of L = sum(y * dy) against a fresh backward pass
 * (dx, dw, db are scratch of the right sizes). */
static void gradchecks(nn_ctx *ctx, const nn_linear_desc *d, float *x,
		       float *w, float *b, float *dy, float *dx, float *dw,
		       float *db)
{
	const size_t n = (size_t)d->n, in = (size_t)d->in, out = (size_t)d->out;
	fwd_state fs = {ctx, d, x, w, d->bias ? b : NULL};
	memset(dx, 0, n * in * sizeof(float));
	CHECK_OK(nn_cpu_linear_backward(ctx, d, x, w, dy, dx, dw,
					d->bias ? db : NULL, &err),
		 &err);
	CHECK_EQ_INT(nn_test_gradcheck("linear dx", lin_fwd, &fs, x, n * in,
				       dx, dy, n * out, 12, 5e-2f, 2e-3, 2e-3),
		     0);
	CHECK_EQ_INT(nn_test_gradcheck("linear dw", lin_fwd, &fs, w, out * in,
				       dw, dy, n * out, 12, 5e-2f, 2e-3, 2e-3),
		     0);
	if (d->bias)
		CHECK_EQ_INT(nn_test_gradcheck("linear db", lin_fwd, &fs, b,
					       out, db, dy, n * out, 12, 5e-2f,
					       2e-3, 2e-3),
			     0);
}

static void run_case(nn_linear_desc d, nn_ctx *ctx, uint64_t seed)
{
	const size_t n = (size_t)d.n, in = (size_t)d.in, out = (size_t)d.out;
	float *x = nn_test_alloc(n * in), *w = nn_test_alloc(out * in);
	float *b = nn_test_alloc(out), *y = nn_test_alloc(n * out);
	float *y2 = nn_test_alloc(n * out), *dy = nn_test_alloc(n * out);
	float *dx = nn_test_alloc(n * in), *dw = nn_test_alloc(out * in);
	float *db = nn_test_alloc(out), *dx2 = nn_test_alloc(n * in);
	float *dw2 = nn_test_alloc(out * in), *db2 = nn_test_alloc(out);
	nn_test_fill(x, n * in, seed, -1, 1);
	nn_test_fill(w, out * in, seed + 1, -1, 1);
	nn_test_fill(b, out, seed + 2, -1, 1);
	nn_test_fill(dy, n * out, seed + 3, -1, 1);
	char what[96];

	/* the reference, in double, with sums of |terms| for tolerances */
	double *ry = dalloc(n * out), *ryabs = dalloc(n * out);
	double *rdx = dalloc(n * in), *rdxabs = dalloc(n * in);
	double *rdw = dalloc(out * in), *rdwabs = dalloc(out * in);
	double *rdb = dalloc(out), *rdbabs = dalloc(out);
	for (size_t i = 0; i < n; i++)
		for (size_t o = 0; o < out; o++) {
			double s = d.bias ? b[o] : 0, sa = fabs(s);
			for (size_t k = 0; k < in; k++) {
				double t = (double)x[i * in + k] * w[o * in + k];
				s += t, sa += fabs(t);
				double g = dy[i * out + o];
				rdx[i * in + k] += g * w[o * in + k];
				rdxabs[i * in + k] += fabs(g * w[o * in + k]);
				rdw[o * in + k] += g * x[i * in + k];
				rdwabs[o * in + k] += fabs(g * x[i * in + k]);
			}
			ry[i * out + o] = s, ryabs[i * out + o] = sa;
			rdb[o] += dy[i * out + o];
			rdbabs[o] += fabs(dy[i * out + o]);
		}
	/* dx accumulates onto 0.5 */
	for (size_t i = 0; i < n * in; i++)
		rdx[i] += 0.5, rdxabs[i] += 0.5;

	const float *bias = d.bias ? b : NULL;
	CHECK_OK(nn_cpu_linear_forward(ctx, &d, x, w, bias, y, &err), &err);
	snprintf(what, sizeof(what), "%dx%d->%d bias %d (%d threads) y", d.n,
		 d.in, d.out, d.bias, ctx->threads);
	CHECK_EQ_INT(count_bad(what, y, ry, ryabs, n * out), 0);
	CHECK_OK(nn_cpu_linear_forward(ctx, &d, x, w, bias, y2, &err), &err);
	CHECK_MEM(y, y2, n * out * sizeof(float));

	for (size_t i = 0; i < n * in; i++)
		dx[i] = 0.5f;
	for (size_t i = 0; i < out * in; i++)
		dw[i] = 12345.0f;
	for (size_t i = 0; i < out; i++)
		db[i] = 12345.0f;
	CHECK_OK(nn_cpu_linear_backward(ctx, &d, x, w, dy, dx, dw,
					d.bias ? db : NULL, &err),
		 &err);
	snprintf(what, sizeof(what), "%dx%d->%d (%d threads) dx", d.n, d.in,
		 d.out, ctx->threads);
	CHECK_EQ_INT(count_bad(what, dx, rdx, rdxabs, n * in), 0);
	snprintf(what, sizeof(what), "%dx%d->%d (%d threads) dw", d.n, d.in,
		 d.out, ctx->threads);
	CHECK_EQ_INT(count_bad(what, dw, rdw, rdwabs, out * in), 0);
	if (d.bias) {
		snprintf(what, sizeof(what), "%dx%d->%d (%d threads) db", d.n,
			 d.in, d.out, ctx->threads);
		CHECK_EQ_INT(count_bad(what, db, rdb, rdbabs, out), 0);
	}

	/* each gradient alone, the others NULL: the same bits */
	for (size_t i = 0; i < n * in; i++)
		dx2[i] = 0.5f;
	CHECK_OK(nn_cpu_linear_backward(ctx, &d, NULL, w, dy, dx2, NULL, NULL,
					&err),
		 &err);
	CHECK_MEM(dx, dx2, n * in * sizeof(float));
	CHECK_OK(nn_cpu_linear_backward(ctx, &d, x, NULL, dy, NULL, dw2, NULL,
					&err),
		 &err);
	CHECK_MEM(dw, dw2, out * in * sizeof(float));
	if (d.bias) {
		CHECK_OK(nn_cpu_linear_backward(ctx, &d, NULL, NULL, dy, NULL,
						NULL, db2, &err),
			 &err);
		CHECK_MEM(db, db2, out * sizeof(float));
	}

	/* finite differences on one thread only (2 threads were just held
	 * to the same reference) */
	if (ctx->threads == 1)
		gradchecks(ctx, &d, x, w, b, dy, dx, dw, db);

	free(ry), free(ryabs), free(rdx), free(rdxabs), free(rdw);
	free(rdwabs), free(rdb), free(rdbabs);
	free(x), free(w), free(b), free(y), free(y2), free(dy), free(dx);
	free(dw), free(db), free(dx2), free(dw2), free(db2);
}

static void test_cases(void)
{
	const nn_linear_desc cases[] = {
		{.n = 1, .in = 1, .out = 1, .bias = 1},
		{.n = 3, .in = 5, .out = 7, .bias = 1},
		{.n = 4, .in = 17, .out = 3, .bias = 0},
		{.n = 1, .in = 300, .out = 10, .bias = 1},
		/* past the threading threshold, slices of 16 that do not
		 * divide in or out; more outputs than one db block */
		{.n = 32, .in = 129, .out = 301, .bias = 1},
		{.n = 9, .in = 515, .out = 70, .bias = 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_case(cases[i], &ctx1, 40 + 10 * i);
		run_case(cases[i], &ctx2, 40 + 10 * i);
	}
}

/* The bias gradient is a fixed-order sum: the same bits on 1 and 2
 * threads. The GEMMs are cut differently, so y is only close. */
static void test_threads(void)
{
	nn_linear_desc d = {.n = 32, .in = 129, .out = 301, .bias = 1};
	const size_t ny = 32 * 301;
	float *x = nn_test_alloc(32 * 129), *w = nn_test_alloc(301 * 129);
	float *b = nn_test_alloc(301), *dy = nn_test_alloc(ny);
	float *y1 = nn_test_alloc(ny), *y2 = nn_test_alloc(ny);
	float *db1 = nn_test_alloc(301), *db2 = nn_test_alloc(301);
	nn_test_fill(x, 32 * 129, 1, -1, 1);
	nn_test_fill(w, 301 * 129, 2, -1, 1);
	nn_test_fill(b, 301, 3, -1, 1);
	nn_test_fill(dy, ny, 4, -1, 1);
	CHECK_OK(nn_cpu_linear_forward(&ctx1, &d, x, w, b, y1, &err), &err);
	CHECK_OK(nn_cpu_linear_forward(&ctx2, &d, x, w, b, y2, &err), &err);
	double worst = 0;
	for (size_t i = 0; i < ny; i++)
		worst = fmax(worst, fabs((double)y1[i] - y2[i]));
	CHECK_NEAR(worst, 0, 1e-4);
	CHECK_OK(nn_cpu_linear_backward(&ctx1, &d, x, w, dy, NULL, NULL, db1,
					&err),
		 &err);
	CHECK_OK(nn_cpu_linear_backward(&ctx2, &d, x, w, dy, NULL, NULL, db2,
					&err),
		 &err);
	CHECK_MEM(db1, db2, 301 * sizeof(float));
	free(x), free(w), free(b), free(dy), free(y1), free(y2);
	free(db1), free(db2);
}

static void expect_fail(int rc, int code)
{
	CHECK_EQ_INT(rc, code);
	CHECK_EQ_INT(err.code, code);
	CHECK(strncmp(err.msg, "cannot ", 7) == 0);
	ims_error_clear(&err);
}

static void test_errors(void)
{
	float x[4] = {0}, w[4] = {0}, y[4], b[2] = {0};
	nn_linear_desc d = {.n = 0, .in = 2, .out = 2, .bias = 0};
	expect_fail(nn_cpu_linear_forward(&ctx1, &d, x, w, NULL, y, &err),
		    IMS_EINVAL);
	d = (nn_linear_desc){.n = 2, .in = -1, .out = 2, .bias = 0};
	expect_fail(nn_cpu_linear_forward(&ctx1, &d, x, w, NULL, y, &err),
		    IMS_EINVAL);
	d = (nn_linear_desc){.n = 2, .in = 2, .out = 0, .bias = 0};
	expect_fail(nn_cpu_linear_backward(&ctx1, &d, x, w, y, x, w, NULL,
					   &err),
		    IMS_EINVAL);
	d = (nn_linear_desc){.n = 2, .in = 2, .out = 2, .bias = 2};
	expect_fail(nn_cpu_linear_forward(&ctx1, &d, x, w, b, y, &err),
		    IMS_EINVAL);
	d.bias = 1;
	expect_fail(nn_cpu_linear_forward(&ctx1, &d, x, w, NULL, y, &err),
		    IMS_EINVAL);
	expect_fail(nn_cpu_linear_forward(&ctx1, NULL, x, w, b, y, &err),
		    IMS_EINVAL);
	expect_fail(nn_cpu_linear_backward(&ctx1, &d, NULL, w, y, NULL, w,
					   NULL, &err),
		    IMS_EINVAL);
	expect_fail(nn_cpu_linear_backward(&ctx1, &d, x, NULL, y, x, NULL,
					   NULL, &err),
		    IMS_EINVAL);
	if (sizeof(size_t) < 8) {
		d = (nn_linear_desc){.n = INT_MAX, .in = INT_MAX, .out = 1};
		expect_fail(nn_cpu_linear_forward(&ctx1, &d, x, w, NULL, y,
						  &err),
			    IMS_ELIMIT);
	}
}

/* ctx->dx_overwrite: the dx GEMM with beta 0 over garbage. */
typedef struct lin_dx_case {
	nn_linear_desc d;
	float *x, *w, *dy, *dw, *db;
} lin_dx_case;

static int lin_dx(nn_ctx *ctx, void *ud, float *dx)
{
	lin_dx_case *c = ud;
	return nn_cpu_linear_backward(ctx, &c->d, c->x, c->w, c->dy, dx, c->dw,
				      c->db, &err);
}

static void test_overwrite(void)
{
	lin_dx_case c = {.d = {.n = 32, .in = 129, .out = 301, .bias = 1}};
	size_t nx = 32 * 129, nw = 129 * 301, ny = 32 * 301;
	c.x = nn_test_alloc(nx), c.w = nn_test_alloc(nw), c.dy = nn_test_alloc(ny);
	c.dw = nn_test_alloc(nw), c.db = nn_test_alloc(301);
	nn_test_fill(c.x, nx, 6, -1, 1);
	nn_test_fill(c.w, nw, 7, -1, 1);
	nn_test_fill(c.dy, ny, 8, -1, 1);
	CHECK_EQ_INT(nn_test_overwrite("linear", &ctx1, lin_dx, &c, nx), 0);
	CHECK_EQ_INT(nn_test_overwrite("linear", &ctx2, lin_dx, &c, nx), 0);
	free(c.x), free(c.w), free(c.dy), free(c.dw), free(c.db);
}

int main(void)
{
	if (nn_ctx_init_cpu(&ctx1, 1, &err) || nn_ctx_init_cpu(&ctx2, 2, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	test_hand();
	test_cases();
	test_threads();
	test_errors();
	test_overwrite();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
