/*
 * test_conv_winograd.c - the Winograd path of the convolution
 * (train/layers/conv_winograd.c): which layers take it, and its y, dx
 * and dw against the im2col path (ctx->winograd) on the shapes the
 * models use and the edges of its tiling. test_conv.c holds both paths
 * to the definition.
 */
#include <math.h>
#include <string.h>

#include "train/conv_winograd.h"
#include "nn_test_util.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

static nn_conv_desc desc(int n, int c_in, int h, int w, int c_out, int k,
			 int stride, int pad, int dil, int groups)
{
	nn_conv_desc d;
	if (nn_conv_desc_init(&d, n, c_in, h, w, c_out, k, stride, pad, dil,
			      groups, 0, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	return d;
}

static void test_eligible(void)
{
	CHECK(nn_wino_eligible(&(nn_conv_desc){0}) == 0);
	nn_conv_desc d = desc(2, 64, 28, 28, 64, 3, 1, 1, 1, 1);
	CHECK(nn_wino_eligible(&d));
	d = desc(2, 16, 1, 1, 16, 3, 1, 1, 1, 1); /* 1x1 planes */
	CHECK(nn_wino_eligible(&d));
	d = desc(2, 64, 28, 28, 64, 3, 2, 1, 1, 1); /* strided */
	CHECK(!nn_wino_eligible(&d));
	d = desc(2, 64, 28, 28, 64, 3, 1, 0, 1, 1); /* unpadded */
	CHECK(!nn_wino_eligible(&d));
	d = desc(2, 64, 28, 28, 64, 3, 1, 2, 2, 1); /* dilated */
	CHECK(!nn_wino_eligible(&d));
	d = desc(2, 64, 28, 28, 64, 3, 1, 1, 1, 2); /* grouped */
	CHECK(!nn_wino_eligible(&d));
	d = desc(2, 64, 28, 28, 64, 1, 1, 0, 1, 1); /* 1x1 kernel */
	CHECK(!nn_wino_eligible(&d));
	d = desc(2, 3, 32, 32, 64, 3, 1, 1, 1, 1); /* a stem: 3 channels */
	CHECK(!nn_wino_eligible(&d));
	d = desc(2, 64, 32, 32, 8, 3, 1, 1, 1, 1); /* 8 outputs */
	CHECK(!nn_wino_eligible(&d));
	d = desc(1, 16, 126, 126, 16, 3, 1, 1, 1, 1); /* bordered: 128^2 */
	CHECK(nn_wino_eligible(&d));
	d = desc(1, 16, 127, 127, 16, 3, 1, 1, 1, 1); /* 130^2 > 16384 */
	CHECK(!nn_wino_eligible(&d));

	/* what the default (NN_WINO_AUTO) picks: y and dx need 256 tiles
	 * a thread, dw 64 channels each side */
	d = desc(32, 512, 4, 4, 512, 3, 1, 1, 1, 1); /* 128 tiles */
	CHECK(!nn_wino_use_data(&d, 1));
	CHECK(nn_wino_use_weights(&d));
	d = desc(32, 256, 7, 7, 256, 3, 1, 1, 1, 1); /* 512 tiles */
	CHECK(nn_wino_use_data(&d, 1));
	CHECK(nn_wino_use_data(&d, 2));
	CHECK(!nn_wino_use_data(&d, 3));
	d = desc(32, 32, 16, 16, 64, 3, 1, 1, 1, 1);
	CHECK(nn_wino_use_data(&d, 2));
	CHECK(!nn_wino_use_weights(&d));
	d = desc(32, 64, 16, 16, 32, 3, 1, 1, 1, 1);
	CHECK(!nn_wino_use_weights(&d));
	d = desc(32, 64, 28, 28, 64, 3, 2, 1, 1, 1); /* not eligible */
	CHECK(!nn_wino_use_data(&d, 1));
	CHECK(!nn_wino_use_weights(&d));
}

/* Largest |a - b| over the largest |b|. */
static double rel_diff(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num = fmax(num, fabs((double)a[i] - b[i]));
		den = fmax(den, fabs((double)b[i]));
	}
	return den > 0 ? num / den : num;
}

/*
 * y, dx (accumulated onto 0.5) and dw by both paths on ctx: within 2e-5
 * of the largest value (the paths round differently; test_conv.c bounds
 * each against the exact sums), and the Winograd path gives the same bits
 * when repeated.
 */
static void compare_paths(const char *name, nn_ctx *ctx, const nn_conv_desc *d,
			  uint64_t seed)
{
	const size_t nx = (size_t)d->n * d->c_in * d->h_in * d->w_in;
	const size_t ny = (size_t)d->n * d->c_out * d->h_out * d->w_out;
	const size_t nw = (size_t)d->c_out * d->c_in * 9;
	float *x = nn_test_alloc(nx), *w = nn_test_alloc(nw);
	float *dy = nn_test_alloc(ny), *b = nn_test_alloc((size_t)d->c_out);
	float *y[2], *dx[2], *dw[2];
	nn_test_fill(x, nx, seed, -1, 1);
	nn_test_fill(w, nw, seed + 1, -1, 1);
	nn_test_fill(dy, ny, seed + 2, -1, 1);
	nn_test_fill(b, (size_t)d->c_out, seed + 3, -1, 1);
	nn_conv_desc db = *d;
	db.bias = 1;
	for (int k = 0; k < 2; k++) {
		y[k] = nn_test_alloc(ny), dx[k] = nn_test_alloc(nx);
		dw[k] = nn_test_alloc(nw);
		for (size_t i = 0; i < nx; i++)
			dx[k][i] = 0.5f;
		ctx->winograd = k ? NN_WINO_OFF : NN_WINO_ALL;
		CHECK_OK(nn_cpu_conv_forward(ctx, &db, x, w, b, y[k], &err), &err);
		CHECK_OK(nn_cpu_conv_backward(ctx, d, x, w, dy, dx[k], dw[k], NULL,
					      &err),
			 &err);
	}
	ctx->winograd = NN_WINO_ALL;
	double ry = rel_diff(y[0], y[1], ny), rx = rel_diff(dx[0], dx[1], nx);
	double rw = rel_diff(dw[0], dw[1], nw);
	if (!(ry < 2e-5 && rx < 2e-5 && rw < 2e-5))
		fprintf(stderr, "%s (%d threads): y %.3g dx %.3g dw %.3g\n", name,
			ctx->threads, ry, rx, rw);
	CHECK(ry < 2e-5);
	CHECK(rx < 2e-5);
	CHECK(rw < 2e-5);

	float *again = nn_test_alloc(nw > ny ? nw : ny);
	CHECK_OK(nn_cpu_conv_forward(ctx, &db, x, w, b, again, &err), &err);
	CHECK_MEM(again, y[0], ny * sizeof(float));
	CHECK_OK(nn_cpu_conv_backward(ctx, d, x, NULL, dy, NULL, again, NULL,
				      &err),
		 &err);
	CHECK_MEM(again, dw[0], nw * sizeof(float));
	free(again);
	free(x), free(w), free(dy), free(b);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(dx[k]), free(dw[k]);
}

static void test_paths(void)
{
	struct {
		const char *name;
		nn_conv_desc d;
	} cases[] = {
		/* resnet18's stages at 112x112, a smaller batch */
		{"layer1", desc(4, 64, 28, 28, 64, 3, 1, 1, 1, 1)},
		{"layer3", desc(4, 256, 7, 7, 256, 3, 1, 1, 1, 1)},
		{"layer4", desc(4, 512, 4, 4, 512, 3, 1, 1, 1, 1)},
		/* channels that change and are not multiples of the 16 x 16
		 * kernel blocks; odd planes */
		{"17 -> 40, 5x9", desc(3, 17, 5, 9, 40, 3, 1, 1, 1, 1)},
		{"40 -> 17, 9x5", desc(3, 40, 9, 5, 17, 3, 1, 1, 1, 1)},
		{"1x1 planes", desc(5, 16, 1, 1, 16, 3, 1, 1, 1, 1)},
		{"1x2 planes", desc(5, 16, 1, 2, 24, 3, 1, 1, 1, 1)},
		/* more tiles than one block of the forward pass (512) and of
		 * the weight gradient (4 Mi floats / (16 x 32) = 8192): blocks
		 * cut inside images */
		{"several blocks", desc(70, 16, 30, 30, 16, 3, 1, 1, 1, 1)},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK(nn_wino_eligible(&cases[i].d));
		compare_paths(cases[i].name, &ctx1, &cases[i].d, 10 + 7 * i);
		compare_paths(cases[i].name, &ctx2, &cases[i].d, 10 + 7 * i);
	}
}

typedef struct {
	nn_conv_desc d;
	float *x, *w, *dy, *dw;
} dx_case;

static int run_dx(nn_ctx *ctx, void *ud, float *dx)
{
	dx_case *c = ud;
	return nn_cpu_conv_backward(ctx, &c->d, c->x, c->w, c->dy, dx, c->dw,
				    NULL, &err);
}

static void test_overwrite(void)
{
	dx_case c = {.d = desc(6, 24, 9, 7, 16, 3, 1, 1, 1, 1)};
	const size_t nx = (size_t)6 * 24 * 9 * 7, ny = (size_t)6 * 16 * 9 * 7;
	const size_t nw = (size_t)16 * 24 * 9;
	c.x = nn_test_alloc(nx), c.w = nn_test_alloc(nw);
	c.dy = nn_test_alloc(ny), c.dw = nn_test_alloc(nw);
	nn_test_fill(c.x, nx, 1, -1, 1);
	nn_test_fill(c.w, nw, 2, -1, 1);
	nn_test_fill(c.dy, ny, 3, -1, 1);
	CHECK_EQ_INT(nn_test_overwrite("winograd", &ctx1, run_dx, &c, nx), 0);
	CHECK_EQ_INT(nn_test_overwrite("winograd", &ctx2, run_dx, &c, nx), 0);
	free(c.x), free(c.w), free(c.dy), free(c.dw);
}

int main(void)
{
	if (nn_ctx_init_cpu(&ctx1, 1, &err) || nn_ctx_init_cpu(&ctx2, 2, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	ctx1.winograd = ctx2.winograd = NN_WINO_ALL;
	test_eligible();
	test_paths();
	test_overwrite();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
