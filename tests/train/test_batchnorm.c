/* test_batchnorm.c - batch norm: hand-computed statistics and running
 * updates over two steps, a double reference on random shapes (including
 * |mean| >> std), evaluation mode, finite-difference gradients of x, gamma
 * and beta, dx accumulation, NULL outputs, bit-identical results on 1 and
 * 2 threads, and descriptor errors. */
#include <math.h>

#include "nn_test_util.h"
#include "train/nn_internal.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

static size_t count_of(const nn_bn_desc *d)
{
	return (size_t)d->n * d->c * d->h * d->w;
}

/* Training-mode forward in double, straight from the definition. */
static void ref_forward(const nn_bn_desc *d, const float *x, const float *g,
			const float *b, double *mean, double *var, double *y)
{
	size_t hw = (size_t)d->h * d->w, m = (size_t)d->n * hw;
	for (int c = 0; c < d->c; c++) {
		double s = 0, q = 0;
		for (int n = 0; n < d->n; n++)
			for (size_t i = 0; i < hw; i++)
				s += x[((size_t)n * d->c + c) * hw + i];
		double mu = s / m;
		for (int n = 0; n < d->n; n++)
			for (size_t i = 0; i < hw; i++) {
				double t = x[((size_t)n * d->c + c) * hw + i] - mu;
				q += t * t;
			}
		mean[c] = mu;
		var[c] = q / m;
		double inv = 1.0 / sqrt(var[c] + d->eps);
		for (int n = 0; n < d->n; n++)
			for (size_t i = 0; i < hw; i++) {
				size_t j = ((size_t)n * d->c + c) * hw + i;
				y[j] = (x[j] - mu) * inv * g[c] + b[c];
			}
	}
}

/* Two channels, N=2, H=1, W=2: mean, variance and outputs by hand, then
 * the running statistics after a second step on 2x the input. */
static void test_known_values(void)
{
	nn_bn_desc d = {.n = 2, .c = 2, .h = 1, .w = 2, .eps = 1e-5f,
			.momentum = 0.1f};
	/* [n][c][w]: channel 0 holds 1 2 3 4, channel 1 10 10.5 11 9.5 */
	float x[8] = {1, 2, 10, 10.5f, 3, 4, 11, 9.5f};
	float g[2] = {2, 0.5f}, b[2] = {0.5f, -1};
	float rm[2] = {0, 0}, rv[2] = {1, 1}, sm[2], si[2], y[8];
	CHECK_OK(nn_cpu_bn_forward_train(&ctx1, &d, x, g, b, rm, rv, sm, si, y,
					 &err), &err);
	CHECK_NEAR(sm[0], 2.5, 1e-6);
	CHECK_NEAR(sm[1], 10.25, 1e-6);
	CHECK_NEAR(si[0], 1 / sqrt(1.25 + 1e-5), 1e-6);
	CHECK_NEAR(si[1], 1 / sqrt(0.3125 + 1e-5), 1e-6);
	/* running variance takes the unbiased variance (m / (m - 1)) */
	CHECK_NEAR(rm[0], 0.1 * 2.5, 1e-6);
	CHECK_NEAR(rm[1], 0.1 * 10.25, 1e-6);
	CHECK_NEAR(rv[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-6);
	CHECK_NEAR(rv[1], 0.9 + 0.1 * 1.25 / 3.0, 1e-6);
	double inv0 = 1 / sqrt(1.25 + 1e-5), inv1 = 1 / sqrt(0.3125 + 1e-5);
	CHECK_NEAR(y[0], (1 - 2.5) * inv0 * 2 + 0.5, 1e-5);
	CHECK_NEAR(y[5], (4 - 2.5) * inv0 * 2 + 0.5, 1e-5);
	CHECK_NEAR(y[2], (10 - 10.25) * inv1 * 0.5 - 1, 1e-5);
	CHECK_NEAR(y[7], (9.5 - 10.25) * inv1 * 0.5 - 1, 1e-5);

	for (int i = 0; i < 8; i++)
		x[i] *= 2;
	CHECK_OK(nn_cpu_bn_forward_train(&ctx1, &d, x, g, b, rm, rv, sm, si, y,
					 &err), &err);
	CHECK_NEAR(rm[0], 0.9 * 0.25 + 0.1 * 5.0, 1e-6);
	CHECK_NEAR(rm[1], 0.9 * 1.025 + 0.1 * 20.5, 1e-6);
	CHECK_NEAR(rv[0], 0.9 * (0.9 + 0.1 * 5.0 / 3.0) + 0.1 * 20.0 / 3.0, 1e-6);
	CHECK_NEAR(rv[1], 0.9 * (0.9 + 0.1 * 1.25 / 3.0) + 0.1 * 5.0 / 3.0, 1e-6);

	/* evaluation normalises with the running statistics, not the batch */
	float ye[8];
	CHECK_OK(nn_cpu_bn_forward_eval(&ctx1, &d, x, g, b, rm, rv, ye, &err),
		 &err);
	for (int i = 0; i < 8; i++) {
		int c = (i / 2) % 2;
		double want = (x[i] - rm[c]) / sqrt((double)rv[c] + 1e-5) * g[c] + b[c];
		CHECK_NEAR(ye[i], want, 1e-5);
	}
}

/* Random shapes against the double reference, training and eval. */
static void test_reference(void)
{
	static const int shapes[][4] = {
		{2, 3, 4, 5}, {1, 2, 3, 3}, {4, 3, 1, 1}, {3, 5, 7, 2}, {1, 1, 1, 2}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		nn_bn_desc d = {.n = shapes[s][0], .c = shapes[s][1],
				.h = shapes[s][2], .w = shapes[s][3],
				.eps = 1e-5f, .momentum = 0.1f};
		size_t cnt = count_of(&d);
		float *x = nn_test_alloc(cnt), *y = nn_test_alloc(cnt);
		float *g = nn_test_alloc(d.c), *b = nn_test_alloc(d.c);
		float *rm = nn_test_alloc(d.c), *rv = nn_test_alloc(d.c);
		float *sm = nn_test_alloc(d.c), *si = nn_test_alloc(d.c);
		double *ym = calloc(cnt, sizeof(double));
		double *mean = calloc(d.c, sizeof(double));
		double *var = calloc(d.c, sizeof(double));
		nn_test_fill(x, cnt, 10 + s, -2, 3);
		nn_test_fill(g, d.c, 20 + s, 0.5f, 1.5f);
		nn_test_fill(b, d.c, 30 + s, -1, 1);
		nn_test_fill(rm, d.c, 40 + s, -1, 1);
		nn_test_fill(rv, d.c, 50 + s, 0.5f, 2);
		float *rm0 = nn_test_alloc(d.c), *rv0 = nn_test_alloc(d.c);
		memcpy(rm0, rm, d.c * sizeof(float));
		memcpy(rv0, rv, d.c * sizeof(float));
		CHECK_OK(nn_cpu_bn_forward_train(&ctx1, &d, x, g, b, rm, rv, sm,
						 si, y, &err), &err);
		ref_forward(&d, x, g, b, mean, var, ym);
		double m = (double)d.n * d.h * d.w;
		for (int c = 0; c < d.c; c++) {
			CHECK_NEAR(sm[c], mean[c], 1e-6);
			CHECK_NEAR(si[c], 1 / sqrt(var[c] + d.eps), 1e-5 * si[c]);
			CHECK_NEAR(rm[c], 0.9 * rm0[c] + 0.1 * mean[c], 1e-6);
			CHECK_NEAR(rv[c], 0.9 * rv0[c] + 0.1 * var[c] * m / (m - 1),
				   1e-5);
		}
		for (size_t i = 0; i < cnt; i++)
			CHECK_NEAR(y[i], ym[i], 1e-5);

		CHECK_OK(nn_cpu_bn_forward_eval(&ctx1, &d, x, g, b, rm0, rv0, y,
						&err), &err);
		size_t hw = (size_t)d.h * d.w;
		for (size_t i = 0; i < cnt; i++) {
			int c = (int)(i / hw % d.c);
			double want = (x[i] - rm0[c]) / sqrt((double)rv0[c] + d.eps) *
					      g[c] + b[c];
			CHECK_NEAR(y[i], want, 1e-5);
		}
		free(x), free(y), free(g), free(b), free(rm), free(rv);
		free(sm), free(si), free(ym), free(mean), free(var);
		free(rm0), free(rv0);
	}
}

/* A large mean over a small spread (post-ReLU-like): E[x^2] - E[x]^2 in
 * float would lose the variance entirely. */
static void test_offset_precision(void)
{
	nn_bn_desc d = {.n = 4, .c = 2, .h = 8, .w = 8, .eps = 1e-5f,
			.momentum = 0.1f};
	size_t cnt = count_of(&d);
	float *x = nn_test_alloc(cnt), *y = nn_test_alloc(cnt);
	double *ym = calloc(cnt, sizeof(double)), mean[2], var[2];
	nn_test_fill(x, cnt, 7, -0.01f, 0.01f);
	for (size_t i = 0; i < cnt; i++)
		x[i] += 1000.0f;
	float g[2] = {1, 1}, b[2] = {0, 0}, rm[2] = {0}, rv[2] = {1, 1};
	float sm[2], si[2];
	CHECK_OK(nn_cpu_bn_forward_train(&ctx1, &d, x, g, b, rm, rv, sm, si, y,
					 &err), &err);
	ref_forward(&d, x, g, b, mean, var, ym);
	for (int c = 0; c < 2; c++)
		CHECK_NEAR(si[c], 1 / sqrt(var[c] + d.eps), 1e-4 * si[c]);
	for (size_t i = 0; i < cnt; i++)
		CHECK_NEAR(y[i], ym[i], 1e-4);

	/* the backward pass against its formula in double */
	float *dy = nn_test_alloc(cnt), *dx = nn_test_alloc(cnt);
	float dg[2], db[2];
	nn_test_fill(dy, cnt, 8, -1, 1);
	CHECK_OK(nn_cpu_bn_backward(&ctx1, &d, x, g, sm, si, dy, dx, dg, db,
				    &err), &err);
	size_t hw = (size_t)d.h * d.w, m = (size_t)d.n * hw;
	for (int c = 0; c < 2; c++) {
		double inv = 1 / sqrt(var[c] + d.eps), s = 0, sx = 0;
		for (int n = 0; n < d.n; n++)
			for (size_t i = 0; i < hw; i++) {
				size_t j = ((size_t)n * 2 + c) * hw + i;
				s += dy[j];
				sx += dy[j] * (x[j] - mean[c]) * inv;
			}
		CHECK_NEAR(db[c], s, 1e-4);
		CHECK_NEAR(dg[c], sx, 1e-4 * fabs(sx) + 1e-4);
		for (int n = 0; n < d.n; n++)
			for (size_t i = 0; i < hw; i++) {
				size_t j = ((size_t)n * 2 + c) * hw + i;
				double xh = (x[j] - mean[c]) * inv;
				double want = inv * (dy[j] - s / m - xh * sx / m);
				CHECK_NEAR(dx[j], want, 1e-4 * inv);
			}
	}
	free(x), free(y), free(ym), free(dy), free(dx);
}

typedef struct bn_case {
	nn_bn_desc d;
	float *x, *g, *b, *rm, *rv, *sm, *si;
} bn_case;

static void bn_fwd(void *ud, float *y)
{
	bn_case *t = ud;
	ims_error e;
	/* running statistics do not affect y; reset them so repeated calls
	 * stay finite */
	for (int c = 0; c < t->d.c; c++)
		t->rm[c] = 0, t->rv[c] = 1;
	if (nn_cpu_bn_forward_train(&ctx1, &t->d, t->x, t->g, t->b, t->rm,
				    t->rv, t->sm, t->si, y, &e))
		fprintf(stderr, "forward failed: %s\n", e.msg);
}

static void test_gradients(void)
{
	static const int shapes[][4] = {
		{2, 3, 4, 5}, {1, 2, 3, 3}, {4, 3, 1, 1}, {1, 1, 5, 1}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		bn_case t = {.d = {.n = shapes[s][0], .c = shapes[s][1],
				   .h = shapes[s][2], .w = shapes[s][3],
				   .eps = 1e-5f, .momentum = 0.1f}};
		int C = t.d.c;
		size_t cnt = count_of(&t.d);
		t.x = nn_test_alloc(cnt);
		t.g = nn_test_alloc(C), t.b = nn_test_alloc(C);
		t.rm = nn_test_alloc(C), t.rv = nn_test_alloc(C);
		t.sm = nn_test_alloc(C), t.si = nn_test_alloc(C);
		float *y = nn_test_alloc(cnt), *r = nn_test_alloc(cnt);
		float *dx = nn_test_alloc(cnt);
		float *dg = nn_test_alloc(C), *db = nn_test_alloc(C);
		nn_test_fill(t.x, cnt, 100 + s, -2, 2);
		nn_test_fill(t.g, C, 200 + s, 0.5f, 1.5f);
		nn_test_fill(t.b, C, 300 + s, -1, 1);
		nn_test_fill(r, cnt, 400 + s, -1, 1);
		bn_fwd(&t, y);
		CHECK_OK(nn_cpu_bn_backward(&ctx1, &t.d, t.x, t.g, t.sm, t.si, r,
					    dx, dg, db, &err), &err);
		CHECK_EQ_INT(nn_test_gradcheck("bn dx", bn_fwd, &t, t.x, cnt, dx,
					       r, cnt, 64, 1e-2f, 2e-3, 1e-2), 0);
		CHECK_EQ_INT(nn_test_gradcheck("bn dgamma", bn_fwd, &t, t.g, C,
					       dg, r, cnt, 64, 1e-2f, 2e-3, 1e-2), 0);
		CHECK_EQ_INT(nn_test_gradcheck("bn dbeta", bn_fwd, &t, t.b, C,
					       db, r, cnt, 64, 1e-2f, 2e-3, 1e-2), 0);

		/* the checks left perturbed statistics behind */
		bn_fwd(&t, y);
		/* dx accumulates; dgamma and dbeta are overwritten */
		float *acc = nn_test_alloc(cnt);
		nn_test_fill(acc, cnt, 500 + s, -1, 1);
		float *want = nn_test_alloc(cnt);
		for (size_t i = 0; i < cnt; i++)
			want[i] = acc[i] + dx[i];
		float dg2[8], db2[8];
		for (int c = 0; c < C; c++)
			dg2[c] = db2[c] = 1e9f;
		CHECK_OK(nn_cpu_bn_backward(&ctx1, &t.d, t.x, t.g, t.sm, t.si, r,
					    acc, dg2, db2, &err), &err);
		CHECK_MEM(acc, want, cnt * sizeof(float));
		CHECK_MEM(dg2, dg, C * sizeof(float));
		CHECK_MEM(db2, db, C * sizeof(float));

		/* NULL outputs are skipped without changing the others */
		float *dx2 = nn_test_alloc(cnt);
		CHECK_OK(nn_cpu_bn_backward(&ctx1, &t.d, t.x, t.g, t.sm, t.si, r,
					    dx2, NULL, NULL, &err), &err);
		CHECK_MEM(dx2, dx, cnt * sizeof(float));
		for (int c = 0; c < C; c++)
			dg2[c] = db2[c] = 0;
		CHECK_OK(nn_cpu_bn_backward(&ctx1, &t.d, t.x, t.g, t.sm, t.si, r,
					    NULL, dg2, NULL, &err), &err);
		CHECK_MEM(dg2, dg, C * sizeof(float));
		CHECK_OK(nn_cpu_bn_backward(&ctx1, &t.d, t.x, t.g, t.sm, t.si, r,
					    NULL, NULL, db2, &err), &err);
		CHECK_MEM(db2, db, C * sizeof(float));
		CHECK_OK(nn_cpu_bn_backward(&ctx1, &t.d, t.x, t.g, t.sm, t.si, r,
					    NULL, NULL, NULL, &err), &err);

		free(t.x), free(t.g), free(t.b), free(t.rm), free(t.rv);
		free(t.sm), free(t.si), free(y), free(r), free(dx), free(dg);
		free(db), free(acc), free(want), free(dx2);
	}
}

static void bn_eval_fwd(void *ud, float *y)
{
	bn_case *t = ud;
	ims_error e;
	if (nn_cpu_bn_forward_eval(&ctx1, &t->d, t->x, t->g, t->b, t->rm,
				   t->rv, y, &e))
		fprintf(stderr, "forward failed: %s\n", e.msg);
}

/* Frozen statistics: the backward of the evaluation-mode forward. */
static void test_frozen_gradients(void)
{
	static const int shapes[][4] = {{2, 3, 4, 5}, {1, 2, 3, 3}, {3, 4, 1, 1}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		bn_case t = {.d = {.n = shapes[s][0], .c = shapes[s][1],
				   .h = shapes[s][2], .w = shapes[s][3],
				   .eps = 1e-5f, .momentum = 0.1f}};
		int C = t.d.c;
		size_t cnt = count_of(&t.d);
		t.x = nn_test_alloc(cnt);
		t.g = nn_test_alloc(C), t.b = nn_test_alloc(C);
		t.rm = nn_test_alloc(C), t.rv = nn_test_alloc(C);
		float *r = nn_test_alloc(cnt), *dx = nn_test_alloc(cnt);
		float *dg = nn_test_alloc(C), *db = nn_test_alloc(C);
		nn_test_fill(t.x, cnt, 110 + s, -2, 2);
		nn_test_fill(t.g, C, 210 + s, 0.5f, 1.5f);
		nn_test_fill(t.b, C, 310 + s, -1, 1);
		nn_test_fill(t.rm, C, 410 + s, -0.5f, 0.5f);
		nn_test_fill(t.rv, C, 510 + s, 0.5f, 2);
		nn_test_fill(r, cnt, 610 + s, -1, 1);
		nn_test_fill(dx, cnt, 710 + s, -1, 1);
		float *pre = nn_test_alloc(cnt);
		memcpy(pre, dx, cnt * sizeof(float));
		CHECK_OK(nn_cpu_bn_backward_frozen(&ctx1, &t.d, t.x, t.g, t.rm, t.rv,
						   r, dx, dg, db, &err), &err);
		/* dx accumulated: subtract what was there */
		for (size_t i = 0; i < cnt; i++)
			dx[i] -= pre[i];
		CHECK_EQ_INT(nn_test_gradcheck("frozen bn dx", bn_eval_fwd, &t, t.x,
					       cnt, dx, r, cnt, 64, 1e-2f, 1e-4, 1e-3), 0);
		CHECK_EQ_INT(nn_test_gradcheck("frozen bn dgamma", bn_eval_fwd, &t,
					       t.g, C, dg, r, cnt, 64, 1e-2f, 1e-4, 1e-3), 0);
		CHECK_EQ_INT(nn_test_gradcheck("frozen bn dbeta", bn_eval_fwd, &t,
					       t.b, C, db, r, cnt, 64, 1e-2f, 1e-4, 1e-3), 0);
		free(t.x), free(t.g), free(t.b), free(t.rm), free(t.rv);
		free(r), free(dx), free(dg), free(db), free(pre);
	}
}

/* Big enough to run multi-threaded: 1 and 2 threads give the same bits. */
static void test_threads(void)
{
	nn_bn_desc d = {.n = 8, .c = 16, .h = 24, .w = 24, .eps = 1e-5f,
			.momentum = 0.1f};
	size_t cnt = count_of(&d);
	float *x = nn_test_alloc(cnt), *dy = nn_test_alloc(cnt);
	float *y[2], *dx[2], *ye[2], st[2][6][16];
	float g[16], b[16];
	nn_test_fill(x, cnt, 1, -1, 3);
	nn_test_fill(dy, cnt, 2, -1, 1);
	nn_test_fill(g, 16, 3, 0.5f, 1.5f);
	nn_test_fill(b, 16, 4, -1, 1);
	nn_ctx *ctxs[2] = {&ctx1, &ctx2};
	for (int k = 0; k < 2; k++) {
		y[k] = nn_test_alloc(cnt), dx[k] = nn_test_alloc(cnt);
		ye[k] = nn_test_alloc(cnt);
		float *rm = st[k][0], *rv = st[k][1], *sm = st[k][2];
		float *si = st[k][3], *dg = st[k][4], *db = st[k][5];
		for (int c = 0; c < 16; c++)
			rm[c] = 0, rv[c] = 1;
		CHECK_OK(nn_cpu_bn_forward_train(ctxs[k], &d, x, g, b, rm, rv, sm,
						 si, y[k], &err), &err);
		CHECK_OK(nn_cpu_bn_backward(ctxs[k], &d, x, g, sm, si, dy, dx[k],
					    dg, db, &err), &err);
		CHECK_OK(nn_cpu_bn_forward_eval(ctxs[k], &d, x, g, b, rm, rv,
						ye[k], &err), &err);
	}
	CHECK_MEM(y[0], y[1], cnt * sizeof(float));
	CHECK_MEM(dx[0], dx[1], cnt * sizeof(float));
	CHECK_MEM(ye[0], ye[1], cnt * sizeof(float));
	CHECK_MEM(st[0], st[1], sizeof(st[0]));
	free(x), free(dy);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(dx[k]), free(ye[k]);
}

static void test_errors(void)
{
	float x[4] = {1, 2, 3, 4}, y[4], g[4] = {1, 1, 1, 1}, b[4] = {0};
	float rm[4] = {0}, rv[4] = {1, 1, 1, 1}, sm[4], si[4];
	/* one value per channel has no variance: PyTorch refuses it too */
	nn_bn_desc d = {.n = 1, .c = 4, .h = 1, .w = 1, .eps = 1e-5f,
			.momentum = 0.1f};
	CHECK_EQ_INT(nn_cpu_bn_forward_train(&ctx1, &d, x, g, b, rm, rv, sm, si,
					     y, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "more than 1 value per channel") != NULL);
	CHECK_EQ_INT(rm[0], 0);
	/* ... but evaluation is fine */
	CHECK_OK(nn_cpu_bn_forward_eval(&ctx1, &d, x, g, b, rm, rv, y, &err),
		 &err);
	d = (nn_bn_desc){.n = 2, .c = 0, .h = 1, .w = 2, .eps = 1e-5f,
			 .momentum = 0.1f};
	CHECK_EQ_INT(nn_cpu_bn_forward_eval(&ctx1, &d, x, g, b, rm, rv, y, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "invalid shape 2x0x1x2") != NULL);
	CHECK_EQ_INT(nn_cpu_bn_backward(&ctx1, &d, x, g, sm, si, x, y, NULL,
					NULL, &err), IMS_EINVAL);
	d.c = 1;
	d.eps = -1;
	CHECK_EQ_INT(nn_cpu_bn_forward_train(&ctx1, &d, x, g, b, rm, rv, sm, si,
					     y, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "eps") != NULL);
	d.eps = 1e-5f;
	d.momentum = 1.5f;
	CHECK_EQ_INT(nn_cpu_bn_forward_train(&ctx1, &d, x, g, b, rm, rv, sm, si,
					     y, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "momentum") != NULL);
	CHECK_EQ_INT(nn_cpu_bn_forward_train(&ctx1, NULL, x, g, b, rm, rv, sm,
					     si, y, &err), IMS_EINVAL);
}

/* ctx->dx_overwrite, batch statistics and frozen ones. */
typedef struct bn_dx_case {
	nn_bn_desc d;
	int frozen;
	float *x, *g, *b, *rm, *rv, *sm, *si, *dy, *dg, *dbeta;
} bn_dx_case;

static int bn_dx(nn_ctx *ctx, void *ud, float *dx)
{
	bn_dx_case *c = ud;
	if (c->frozen)
		return nn_cpu_bn_backward_frozen(ctx, &c->d, c->x, c->g, c->rm, c->rv,
						 c->dy, dx, c->dg, c->dbeta, &err);
	return nn_cpu_bn_backward(ctx, &c->d, c->x, c->g, c->sm, c->si, c->dy, dx,
				  c->dg, c->dbeta, &err);
}

static void test_overwrite(void)
{
	bn_dx_case c = {.d = {.n = 8, .c = 16, .h = 17, .w = 15, .eps = 1e-5f,
			      .momentum = 0.1f}};
	size_t n = (size_t)8 * 16 * 17 * 15;
	c.x = nn_test_alloc(n), c.dy = nn_test_alloc(n);
	float *y = nn_test_alloc(n);
	c.g = nn_test_alloc(16), c.b = nn_test_alloc(16), c.rm = nn_test_alloc(16);
	c.rv = nn_test_alloc(16), c.sm = nn_test_alloc(16), c.si = nn_test_alloc(16);
	c.dg = nn_test_alloc(16), c.dbeta = nn_test_alloc(16);
	nn_test_fill(c.x, n, 30, -2, 3);
	nn_test_fill(c.dy, n, 31, -1, 1);
	nn_test_fill(c.g, 16, 32, 0.5f, 1.5f);
	nn_test_fill(c.rv, 16, 33, 0.5f, 2);
	CHECK_OK(nn_cpu_bn_forward_train(&ctx1, &c.d, c.x, c.g, c.b, c.rm, c.rv,
					 c.sm, c.si, y, &err), &err);
	for (c.frozen = 0; c.frozen < 2; c.frozen++) {
		CHECK_EQ_INT(nn_test_overwrite("batchnorm", &ctx1, bn_dx, &c, n), 0);
		CHECK_EQ_INT(nn_test_overwrite("batchnorm", &ctx2, bn_dx, &c, n), 0);
	}
	free(c.x), free(c.dy), free(y), free(c.g), free(c.b), free(c.rm);
	free(c.rv), free(c.sm), free(c.si), free(c.dg), free(c.dbeta);
}

/* d.relu: the forwards end with the ReLU layer's operation, the same
 * bits as the two layers apart; a flag other than 0 and 1 is refused */
static void test_fused_relu(void)
{
	nn_bn_desc d = {.n = 3, .c = 5, .h = 4, .w = 3, .eps = 1e-5f,
			.momentum = 0.1f};
	const size_t n = (size_t)3 * 5 * 4 * 3;
	float *x = nn_test_alloc(n), *y = nn_test_alloc(n), *yf = nn_test_alloc(n);
	float g[5], b[5], rm[2][5] = {{0}}, rv[2][5], sm[5], si[5];
	nn_test_fill(x, n, 61, -2, 3);
	nn_test_fill(g, 5, 62, 0.5f, 1.5f);
	nn_test_fill(b, 5, 63, -0.5f, 0.5f);
	for (int i = 0; i < 5; i++)
		rv[0][i] = rv[1][i] = 1;
	CHECK_OK(nn_cpu_bn_forward_train(&ctx2, &d, x, g, b, rm[0], rv[0], sm, si,
					 y, &err), &err);
	CHECK_OK(nn_cpu_relu_forward(&ctx2, n, y, y, &err), &err);
	d.relu = 1;
	CHECK_OK(nn_cpu_bn_forward_train(&ctx2, &d, x, g, b, rm[1], rv[1], sm, si,
					 yf, &err), &err);
	CHECK_MEM(y, yf, n * sizeof(float));
	CHECK_MEM(rm[0], rm[1], sizeof(rm[0]));
	int negative = 0;
	for (size_t i = 0; i < n; i++)
		negative += yf[i] < 0;
	CHECK_EQ_INT(negative, 0);
	d.relu = 0;
	CHECK_OK(nn_cpu_bn_forward_eval(&ctx2, &d, x, g, b, rm[0], rv[0], y, &err),
		 &err);
	CHECK_OK(nn_cpu_relu_forward(&ctx2, n, y, y, &err), &err);
	d.relu = 1;
	CHECK_OK(nn_cpu_bn_forward_eval(&ctx2, &d, x, g, b, rm[0], rv[0], yf, &err),
		 &err);
	CHECK_MEM(y, yf, n * sizeof(float));
	d.relu = 2;
	CHECK_EQ_INT(nn_cpu_bn_forward_eval(&ctx2, &d, x, g, b, rm[0], rv[0], yf,
					    &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "relu flag 2") != NULL);
	free(x), free(y), free(yf);
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&ctx1, 1, &err), &err);
	CHECK_OK(nn_ctx_init_cpu(&ctx2, 2, &err), &err);
	test_known_values();
	test_reference();
	test_offset_precision();
	test_gradients();
	test_frozen_gradients();
	test_threads();
	test_errors();
	test_overwrite();
	test_fused_relu();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
