/* test_conv.c - convolution: a hand-computed case, forward and backward
 * against direct loops in double over strides, padding, dilation, groups
 * (depthwise included), rectangular kernels and batch sizes that exercise
 * the kernels' blocking (one image in place, several staged, a short last
 * block, column slices that cut rows and images), dx accumulating, NULL
 * gradients and repeatable bits on 1 and 2 threads; finite-difference
 * checks on 1; the descriptor's errors. */
#include <limits.h>
#include <math.h>

#include "nn_test_util.h"
#include "train/nn_internal.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

/* A descriptor set by hand: rectangular fields, PyTorch's arithmetic. */
static nn_conv_desc make_desc(int n, int c_in, int h, int w, int c_out,
			      int kh, int kw, int sh, int sw, int ph, int pw,
			      int dh, int dw, int groups, int bias)
{
	nn_conv_desc d = {
		.n = n, .c_in = c_in, .h_in = h, .w_in = w, .c_out = c_out,
		.kh = kh, .kw = kw, .stride_h = sh, .stride_w = sw,
		.pad_h = ph, .pad_w = pw, .dil_h = dh, .dil_w = dw,
		.groups = groups, .bias = bias,
	};
	d.h_out = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
	d.w_out = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
	return d;
}

static size_t x_size(const nn_conv_desc *d)
{
	return (size_t)d->n * d->c_in * d->h_in * d->w_in;
}
static size_t y_size(const nn_conv_desc *d)
{
	return (size_t)d->n * d->c_out * d->h_out * d->w_out;
}
static size_t w_size(const nn_conv_desc *d)
{
	return (size_t)d->c_out * (d->c_in / d->groups) * d->kh * d->kw;
}

/*
 * The definition, one term at a time, calling visit(x index, w index,
 * y index) for every product x * w that lands in y. The reference forward
 * and backward passes are both this loop.
 */
typedef void (*term_fn)(void *ud, size_t xi, size_t wi, size_t yi);

/* The terms of output (n, co, oh, ow), at index yi. */
static void visit_output(const nn_conv_desc *d, int n, int co, int oh, int ow,
			 size_t yi, term_fn visit, void *ud)
{
	const int cg_in = d->c_in / d->groups, cg_out = d->c_out / d->groups;
	const int g = co / cg_out;
	for (int ci = 0; ci < cg_in; ci++) {
		const int c = g * cg_in + ci;
		for (int ki = 0; ki < d->kh; ki++) {
			int ih = oh * d->stride_h - d->pad_h + ki * d->dil_h;
			if (ih < 0 || ih >= d->h_in)
				continue;
			for (int kj = 0; kj < d->kw; kj++) {
				int iw = ow * d->stride_w - d->pad_w +
					 kj * d->dil_w;
				if (iw < 0 || iw >= d->w_in)
					continue;
				size_t xi = ((size_t)n * d->c_in + c) * d->h_in;
				size_t wi = ((size_t)co * cg_in + ci) * d->kh;
				xi = (xi + ih) * d->w_in + iw;
				wi = (wi + ki) * d->kw + kj;
				visit(ud, xi, wi, yi);
			}
		}
	}
}

static void for_each_term(const nn_conv_desc *d, term_fn visit, void *ud)
{
	size_t yi = 0;
	for (int n = 0; n < d->n; n++)
		for (int co = 0; co < d->c_out; co++)
			for (int oh = 0; oh < d->h_out; oh++)
				for (int ow = 0; ow < d->w_out; ow++)
					visit_output(d, n, co, oh, ow, yi++,
						     visit, ud);
}

typedef struct {
	const float *x, *w, *dy;
	double *y, *yabs;         /* forward: sum and sum of |terms| */
	double *dx, *dxabs, *dw, *dwabs;
} ref_state;

static void ref_fwd_term(void *ud, size_t xi, size_t wi, size_t yi)
{
	ref_state *s = ud;
	double t = (double)s->x[xi] * s->w[wi];
	s->y[yi] += t;
	s->yabs[yi] += fabs(t);
}

static void ref_bwd_term(void *ud, size_t xi, size_t wi, size_t yi)
{
	ref_state *s = ud;
	double tx = (double)s->dy[yi] * s->w[wi];
	double tw = (double)s->dy[yi] * s->x[xi];
	s->dx[xi] += tx;
	s->dxabs[xi] += fabs(tx);
	s->dw[wi] += tw;
	s->dwabs[wi] += fabs(tw);
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

/* Counts entries off by more than rtol times the sum of |terms| (which
 * bounds float rounding, whatever the cancellation) plus atol. */
static int count_bad(const char *what, const float *got, const double *want,
		     const double *abs_sum, size_t n, double offset)
{
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		double tol = 1e-5 * (abs_sum[i] + fabs(offset)) + 1e-6;
		double diff = fabs((double)got[i] - (want[i] + offset));
		if (!(diff <= tol)) {
			if (bad < 3)
				fprintf(stderr, "%s[%zu]: got %.9g, want %.9g\n",
					what, i, got[i], want[i] + offset);
			bad++;
		}
	}
	return bad;
}

/* ---- a hand-computed case ---------------------------------------------- */

static void test_hand(void)
{
	/* x = 1..9 (3x3), w = [1 2; 3 4], no padding: every window by hand */
	float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 2, 3, 4};
	float b = 0.5f, y[4];
	nn_conv_desc d;
	CHECK_OK(nn_conv_desc_init(&d, 1, 1, 3, 3, 1, 2, 1, 0, 1, 1, 1, &err),
		 &err);
	CHECK_EQ_INT(d.h_out, 2);
	CHECK_EQ_INT(d.w_out, 2);
	CHECK_OK(nn_cpu_conv_forward(&ctx1, &d, x, w, &b, y, &err), &err);
	float want_y[4] = {37.5f, 47.5f, 67.5f, 77.5f};
	CHECK_MEM(y, want_y, sizeof(y));

	float dy[4] = {1, 1, 1, 1}, dx[9], dw[4], db = -1;
	for (int i = 0; i < 9; i++)
		dx[i] = 100;
	CHECK_OK(nn_cpu_conv_backward(&ctx1, &d, x, w, dy, dx, dw, &db, &err),
		 &err);
	float want_dx[9] = {101, 103, 102, 104, 110, 106, 103, 107, 104};
	float want_dw[4] = {12, 16, 24, 28};
	CHECK_MEM(dx, want_dx, sizeof(dx));
	CHECK_MEM(dw, want_dw, sizeof(dw));
	CHECK(db == 4.0f);

	/* stride 2, padding 1: the windows hang over the top and left */
	CHECK_OK(nn_conv_desc_init(&d, 1, 1, 3, 3, 1, 2, 2, 1, 1, 1, 0, &err),
		 &err);
	CHECK_EQ_INT(d.h_out, 2);
	CHECK_OK(nn_cpu_conv_forward(&ctx1, &d, x, w, NULL, y, &err), &err);
	float want_y2[4] = {4, 18, 36, 77};
	CHECK_MEM(y, want_y2, sizeof(y));
}

/* ---- the general cases ------------------------------------------------- */

typedef struct {
	const char *name;
	nn_conv_desc d;
} conv_case;

typedef struct {
	nn_ctx *ctx;
	const nn_conv_desc *d;
	float *x, *w, *b;
} fwd_state;

static void conv_fwd(void *ud, float *y)
{
	fwd_state *s = ud;
	nn_cpu_conv_forward(s->ctx, s->d, s->x, s->w, s->b, y, NULL);
}

/* Finite differences of L = sum(y * dy) against a fresh backward pass
 * (dx, dw, db are scratch of the right sizes). */
static void gradchecks(const char *name, nn_ctx *ctx, const nn_conv_desc *d,
		       float *x, float *w, float *b, float *dy, float *dx,
		       float *dw, float *db)
{
	const size_t nx = x_size(d), ny = y_size(d), nw = w_size(d);
	fwd_state fs = {ctx, d, x, w, d->bias ? b : NULL};
	char what[160];
	memset(dx, 0, nx * sizeof(float));
	CHECK_OK(nn_cpu_conv_backward(ctx, d, x, w, dy, dx, dw,
				      d->bias ? db : NULL, &err),
		 &err);
	snprintf(what, sizeof(what), "%s dx", name);
	CHECK_EQ_INT(nn_test_gradcheck(what, conv_fwd, &fs, x, nx, dx, dy, ny,
				       12, 5e-2f, 2e-3, 2e-3), 0);
	snprintf(what, sizeof(what), "%s dw", name);
	CHECK_EQ_INT(nn_test_gradcheck(what, conv_fwd, &fs, w, nw, dw, dy, ny,
				       12, 5e-2f, 2e-3, 2e-3), 0);
	if (d->bias) {
		snprintf(what, sizeof(what), "%s db", name);
		CHECK_EQ_INT(nn_test_gradcheck(what, conv_fwd, &fs, b,
					       (size_t)d->c_out, db, dy, ny, 12,
					       5e-2f, 2e-3, 2e-3), 0);
	}
}

static void run_case(const conv_case *c, nn_ctx *ctx, uint64_t seed)
{
	const nn_conv_desc *d = &c->d;
	const size_t nx = x_size(d), ny = y_size(d), nw = w_size(d);
	const size_t nb = (size_t)d->c_out;
	float *x = nn_test_alloc(nx), *w = nn_test_alloc(nw);
	float *b = nn_test_alloc(nb), *y = nn_test_alloc(ny);
	float *y2 = nn_test_alloc(ny), *dy = nn_test_alloc(ny);
	float *dx = nn_test_alloc(nx), *dw = nn_test_alloc(nw);
	float *db = nn_test_alloc(nb);
	nn_test_fill(x, nx, seed, -1, 1);
	nn_test_fill(w, nw, seed + 1, -1, 1);
	nn_test_fill(b, nb, seed + 2, -1, 1);
	nn_test_fill(dy, ny, seed + 3, -1, 1);
	const float *bias = d->bias ? b : NULL;
	char what[160];

	/* forward against the definition */
	ref_state rs = {.x = x, .w = w, .dy = dy};
	rs.y = dalloc(ny), rs.yabs = dalloc(ny);
	rs.dx = dalloc(nx), rs.dxabs = dalloc(nx);
	rs.dw = dalloc(nw), rs.dwabs = dalloc(nw);
	for_each_term(d, ref_fwd_term, &rs);
	for_each_term(d, ref_bwd_term, &rs);
	if (d->bias)
		for (size_t i = 0; i < ny; i++) {
			size_t co = i / ((size_t)d->h_out * d->w_out) % nb;
			rs.y[i] += b[co];
			rs.yabs[i] += fabs(b[co]);
		}
	double *ref_db = dalloc(nb), *ref_dbabs = dalloc(nb);
	for (size_t i = 0; i < ny; i++) {
		size_t co = i / ((size_t)d->h_out * d->w_out) % nb;
		ref_db[co] += dy[i];
		ref_dbabs[co] += fabs(dy[i]);
	}
	CHECK_OK(nn_cpu_conv_forward(ctx, d, x, w, bias, y, &err), &err);
	snprintf(what, sizeof(what), "%s (%d threads) y", c->name,
		 ctx->threads);
	CHECK_EQ_INT(count_bad(what, y, rs.y, rs.yabs, ny, 0), 0);

	/* the same bits again */
	CHECK_OK(nn_cpu_conv_forward(ctx, d, x, w, bias, y2, &err), &err);
	CHECK_MEM(y, y2, ny * sizeof(float));

	/* backward against the definition: dx accumulates onto 0.25,
	 * dw and db overwrite garbage */
	for (size_t i = 0; i < nx; i++)
		dx[i] = 0.25f;
	for (size_t i = 0; i < nw; i++)
		dw[i] = 12345.0f;
	for (size_t i = 0; i < nb; i++)
		db[i] = 12345.0f;
	CHECK_OK(nn_cpu_conv_backward(ctx, d, x, w, dy, dx, dw,
				      d->bias ? db : NULL, &err),
		 &err);
	snprintf(what, sizeof(what), "%s (%d threads) dx", c->name,
		 ctx->threads);
	CHECK_EQ_INT(count_bad(what, dx, rs.dx, rs.dxabs, nx, 0.25), 0);
	snprintf(what, sizeof(what), "%s (%d threads) dw", c->name,
		 ctx->threads);
	CHECK_EQ_INT(count_bad(what, dw, rs.dw, rs.dwabs, nw, 0), 0);
	if (d->bias) {
		snprintf(what, sizeof(what), "%s (%d threads) db", c->name,
			 ctx->threads);
		CHECK_EQ_INT(count_bad(what, db, ref_db, ref_dbabs, nb, 0), 0);
	}

	/* repeat, and each gradient alone (NULL for the others): same bits */
	float *dx2 = nn_test_alloc(nx), *dw2 = nn_test_alloc(nw);
	float *db2 = nn_test_alloc(nb);
	for (size_t i = 0; i < nx; i++)
		dx2[i] = 0.25f;
	CHECK_OK(nn_cpu_conv_backward(ctx, d, x, w, dy, dx2, dw2,
				      d->bias ? db2 : NULL, &err),
		 &err);
	CHECK_MEM(dx, dx2, nx * sizeof(float));
	CHECK_MEM(dw, dw2, nw * sizeof(float));
	if (d->bias)
		CHECK_MEM(db, db2, nb * sizeof(float));
	for (size_t i = 0; i < nx; i++)
		dx2[i] = 0.25f;
	memset(dw2, 0, nw * sizeof(float));
	memset(db2, 0, nb * sizeof(float));
	CHECK_OK(nn_cpu_conv_backward(ctx, d, NULL, w, dy, dx2, NULL, NULL,
				      &err),
		 &err);
	CHECK_MEM(dx, dx2, nx * sizeof(float));
	CHECK_OK(nn_cpu_conv_backward(ctx, d, x, NULL, dy, NULL, dw2, NULL,
				      &err),
		 &err);
	CHECK_MEM(dw, dw2, nw * sizeof(float));
	if (d->bias) {
		CHECK_OK(nn_cpu_conv_backward(ctx, d, NULL, NULL, dy, NULL,
					      NULL, db2, &err),
			 &err);
		CHECK_MEM(db, db2, nb * sizeof(float));
	}
	CHECK_OK(nn_cpu_conv_backward(ctx, d, x, w, dy, NULL, NULL, NULL,
				      &err),
		 &err);

	/* finite differences on one thread only: 2 threads were just held
	 * to the same reference, and their barriers crawl when the machine
	 * is busy with other tests */
	if (ctx->threads == 1)
		gradchecks(c->name, ctx, d, x, w, b, dy, dx, dw, db);

	free(rs.y), free(rs.yabs), free(rs.dx), free(rs.dxabs);
	free(rs.dw), free(rs.dwabs), free(ref_db), free(ref_dbabs);
	free(x), free(w), free(b), free(y), free(y2), free(dy);
	free(dx), free(dw), free(db), free(dx2), free(dw2), free(db2);
}

static void test_cases(void)
{
	const conv_case cases[] = {
		{"3x3", make_desc(1, 3, 5, 5, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1)},
		{"3x3 pad 1 stride 2 groups 2",
		 make_desc(2, 4, 7, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2, 1)},
		{"depthwise dilation 2 pad 2",
		 make_desc(2, 4, 9, 8, 4, 3, 3, 1, 1, 2, 2, 2, 2, 4, 0)},
		{"depthwise, 2 outputs per channel",
		 make_desc(2, 4, 6, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1)},
		{"groups 4",
		 make_desc(3, 8, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 4, 1)},
		{"1x1", make_desc(3, 6, 6, 7, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1)},
		{"1x1 stride 2",
		 make_desc(2, 6, 7, 7, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0)},
		{"5x5 stride 3 pad 2",
		 make_desc(2, 3, 10, 9, 5, 5, 5, 3, 3, 2, 2, 1, 1, 1, 1)},
		{"7x7 stride 2 pad 3 (stem)",
		 make_desc(2, 3, 16, 15, 4, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0)},
		{"rectangular 2x3",
		 make_desc(2, 3, 8, 11, 4, 2, 3, 1, 2, 1, 0, 2, 1, 1, 1)},
		{"rectangular 3x1 groups 3",
		 make_desc(1, 3, 7, 5, 6, 3, 1, 2, 1, 0, 2, 1, 3, 3, 1)},
		{"rectangular 3x1, no padding, large planes",
		 make_desc(2, 2, 40, 30, 3, 3, 1, 1, 1, 0, 0, 1, 1, 1, 0)},
		{"kernel larger than input",
		 make_desc(2, 2, 2, 3, 3, 3, 5, 1, 1, 1, 2, 1, 1, 1, 1)},
		{"padding wider than the kernel",
		 make_desc(1, 2, 3, 3, 2, 2, 2, 1, 3, 3, 2, 1, 1, 1, 1)},
		{"1x1 output",
		 make_desc(4, 3, 3, 3, 5, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1)},
		/* strides 1 and 2 build col from a zero-bordered copy of each plane
		 * held on the stack; a plane too large for it takes the
		 * generic walk */
		{"stride 1, padded plane too large for the stack copy",
		 make_desc(1, 1, 130, 129, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0)},
		/* big enough to run on 2 threads: column slices cut rows and
		 * images (3x5 planes), blocks of several images */
		{"threaded, several blocks and a short last one",
		 make_desc(37, 4, 10, 10, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1)},
		{"threaded, 3x5 planes",
		 make_desc(37, 16, 6, 10, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1)},
		/* one image per block, y written in place; 3 images with a
		 * 2-image block on 2 threads (a short last block) */
		{"threaded, 34x34 planes",
		 make_desc(3, 8, 34, 34, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1)},
		/* 1x1 straight from x (one image per block) and through im2col
		 * (several) */
		{"threaded 1x1, large planes",
		 make_desc(2, 12, 40, 30, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1)},
		{"threaded 1x1 groups 2, small planes",
		 make_desc(40, 32, 5, 5, 32, 1, 1, 1, 1, 0, 0, 1, 1, 2, 0)},
		{"threaded depthwise",
		 make_desc(8, 32, 12, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, 1)},
		/* 3x3 stride 1 padding 1 with >= 16 channels: Winograd's
		 * (odd planes drop a tile's last row/column; a 1x1 plane is
		 * one tile with one output) */
		{"Winograd, odd planes",
		 make_desc(3, 16, 7, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1)},
		{"Winograd, 1x1 planes",
		 make_desc(4, 24, 1, 1, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0)},
		/* 2 threads x 1100 tiles: blocks of 512 cut across images */
		{"Winograd, several tile blocks",
		 make_desc(60, 16, 12, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1)},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_case(&cases[i], &ctx1, 100 + i * 10);
		run_case(&cases[i], &ctx2, 100 + i * 10);
	}
}

/*
 * 1 and 2 threads: the bias gradient is the same bits (a fixed-order
 * sum); the rest comes from GEMMs cut differently, so only close.
 */
static void test_threads(void)
{
	nn_conv_desc d = make_desc(37, 16, 6, 10, 24, 3, 3, 2, 2, 1, 1, 1, 1,
				   1, 1);
	const size_t nx = x_size(&d), ny = y_size(&d), nw = w_size(&d);
	float *x = nn_test_alloc(nx), *w = nn_test_alloc(nw);
	float *b = nn_test_alloc(24), *dy = nn_test_alloc(ny);
	float *y1 = nn_test_alloc(ny), *y2 = nn_test_alloc(ny);
	float *db1 = nn_test_alloc(24), *db2 = nn_test_alloc(24);
	nn_test_fill(x, nx, 7, -1, 1);
	nn_test_fill(w, nw, 8, -1, 1);
	nn_test_fill(b, 24, 9, -1, 1);
	nn_test_fill(dy, ny, 10, -1, 1);
	CHECK_OK(nn_cpu_conv_forward(&ctx1, &d, x, w, b, y1, &err), &err);
	CHECK_OK(nn_cpu_conv_forward(&ctx2, &d, x, w, b, y2, &err), &err);
	double worst = 0;
	for (size_t i = 0; i < ny; i++)
		worst = fmax(worst, fabs((double)y1[i] - y2[i]));
	CHECK_NEAR(worst, 0, 1e-5);
	CHECK_OK(nn_cpu_conv_backward(&ctx1, &d, x, w, dy, NULL, NULL, db1,
				      &err),
		 &err);
	CHECK_OK(nn_cpu_conv_backward(&ctx2, &d, x, w, dy, NULL, NULL, db2,
				      &err),
		 &err);
	CHECK_MEM(db1, db2, 24 * sizeof(float));
	free(x), free(w), free(b), free(dy), free(y1), free(y2);
	free(db1), free(db2);
}

/* ---- errors ------------------------------------------------------------ */

static void expect_fail(int rc, int code)
{
	CHECK_EQ_INT(rc, code);
	CHECK_EQ_INT(err.code, code);
	CHECK(strncmp(err.msg, "cannot ", 7) == 0);
	ims_error_clear(&err);
}

static void test_errors(void)
{
	nn_conv_desc d;
	/* groups: zero, and channels that are not multiples */
	expect_fail(nn_conv_desc_init(&d, 1, 4, 8, 8, 4, 3, 1, 1, 1, 0, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 6, 8, 8, 8, 3, 1, 1, 1, 4, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 8, 8, 8, 6, 3, 1, 1, 1, 4, 0,
				      &err),
		    IMS_EINVAL);
	/* empty output: a 5x5 kernel on 3x3, or dilated past the input */
	expect_fail(nn_conv_desc_init(&d, 1, 1, 3, 3, 1, 5, 1, 0, 1, 1, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 1, 5, 5, 1, 3, 1, 0, 3, 1, 0,
				      &err),
		    IMS_EINVAL);
	/* sizes < 1, negative padding, a bias flag that is not 0 or 1 */
	expect_fail(nn_conv_desc_init(&d, -1, 1, 5, 5, 1, 3, 1, 0, 1, 1, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 0, 5, 5, 1, 3, 1, 0, 1, 1, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 1, 5, -5, 1, 3, 1, 0, 1, 1, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 1, 5, 5, 1, 0, 1, 0, 1, 1, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 1, 5, 5, 1, 3, 0, 0, 1, 1, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 1, 5, 5, 1, 3, 1, -1, 1, 1, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 1, 5, 5, 1, 3, 1, 0, 0, 1, 0,
				      &err),
		    IMS_EINVAL);
	expect_fail(nn_conv_desc_init(&d, 1, 1, 5, 5, 1, 3, 1, 0, 1, 1, 2,
				      &err),
		    IMS_EINVAL);
	/* too large: a plane past INT_MAX elements, padding past int,
	 * weights past INT_MAX */
	expect_fail(nn_conv_desc_init(&d, 1, 1, 65536, 65536, 1, 1, 1, 0, 1, 1,
				      0, &err),
		    IMS_ELIMIT);
	expect_fail(nn_conv_desc_init(&d, 1, 1, 5, 5, 1, 3, 1,
				      INT_MAX / 2, 1, 1, 0, &err),
		    IMS_ELIMIT);
	expect_fail(nn_conv_desc_init(&d, 1, 65536, 3, 3, 65536, 3, 1, 1, 1,
				      1, 0, &err),
		    IMS_ELIMIT);
	expect_fail(nn_conv_desc_init(NULL, 1, 1, 5, 5, 1, 3, 1, 0, 1, 1, 0,
				      &err),
		    IMS_EINVAL);

	/* the kernels check a descriptor set by hand, and their pointers */
	float x[25] = {0}, w[9] = {0}, y[9], b[1] = {0};
	d = make_desc(1, 1, 5, 5, 1, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1);
	d.h_out = 4;
	expect_fail(nn_cpu_conv_forward(&ctx1, &d, x, w, b, y, &err),
		    IMS_EINVAL);
	expect_fail(nn_cpu_conv_backward(&ctx1, &d, x, w, y, x, w, b, &err),
		    IMS_EINVAL);
	d.h_out = 3;
	expect_fail(nn_cpu_conv_forward(&ctx1, &d, x, w, NULL, y, &err),
		    IMS_EINVAL);
	expect_fail(nn_cpu_conv_forward(&ctx1, NULL, x, w, b, y, &err),
		    IMS_EINVAL);
	expect_fail(nn_cpu_conv_backward(&ctx1, &d, NULL, w, y, NULL, w, NULL,
					 &err),
		    IMS_EINVAL);
	d.groups = 2;
	expect_fail(nn_cpu_conv_forward(&ctx1, &d, x, w, b, y, &err),
		    IMS_EINVAL);
}

/* ctx->dx_overwrite: col2im clears the planes it fills, the in-place 1x1
 * GEMM runs with beta 0; one-image and several-image blocks, groups. */
typedef struct conv_dx_case {
	nn_conv_desc d;
	float *x, *w, *dy, *dw, *db;
} conv_dx_case;

static int conv_dx(nn_ctx *ctx, void *ud, float *dx)
{
	conv_dx_case *c = ud;
	return nn_cpu_conv_backward(ctx, &c->d, c->x, c->w, c->dy, dx, c->dw, c->db,
				    &err);
}

static void test_overwrite(void)
{
	const nn_conv_desc cases[] = {
		make_desc(37, 4, 10, 10, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
		make_desc(3, 8, 34, 34, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
		make_desc(2, 12, 40, 30, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1),
		make_desc(40, 32, 5, 5, 32, 1, 1, 1, 1, 0, 0, 1, 1, 2, 0),
		make_desc(6, 16, 12, 12, 24, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0),
		make_desc(5, 16, 9, 7, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0),
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		conv_dx_case c = {.d = cases[k]};
		const nn_conv_desc *d = &c.d;
		size_t nx = (size_t)d->n * d->c_in * d->h_in * d->w_in;
		size_t nw = (size_t)d->c_out * (d->c_in / d->groups) * d->kh * d->kw;
		size_t ny = (size_t)d->n * d->c_out * d->h_out * d->w_out;
		c.x = nn_test_alloc(nx), c.w = nn_test_alloc(nw);
		c.dy = nn_test_alloc(ny), c.dw = nn_test_alloc(nw);
		c.db = nn_test_alloc((size_t)d->c_out);
		nn_test_fill(c.x, nx, 40 + k, -1, 1);
		nn_test_fill(c.w, nw, 50 + k, -1, 1);
		nn_test_fill(c.dy, ny, 60 + k, -1, 1);
		CHECK_EQ_INT(nn_test_overwrite("conv", &ctx1, conv_dx, &c, nx), 0);
		CHECK_EQ_INT(nn_test_overwrite("conv", &ctx2, conv_dx, &c, nx), 0);
		free(c.x), free(c.w), free(c.dy), free(c.dw), free(c.db);
	}
}

int main(void)
{
	if (nn_ctx_init_cpu(&ctx1, 1, &err) || nn_ctx_init_cpu(&ctx2, 2, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	test_hand();
	/* both paths against the definition: im2col everywhere, then
	 * Winograd wherever it applies (3x3, stride 1, padding 1, >= 16
	 * channels; the default picks it only for large enough layers) */
	for (int wino = 0; wino < 2; wino++) {
		ctx1.winograd = ctx2.winograd = wino ? NN_WINO_ALL : NN_WINO_OFF;
		test_cases();
		test_overwrite();
	}
	ctx1.winograd = ctx2.winograd = NN_WINO_AUTO;
	test_cases();
	test_threads();
	test_errors();
	test_overwrite();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
