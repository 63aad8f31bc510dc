/*
 * test_channels_last.c - channels-last on the CPU (a descriptor's nhwc,
 * nn_model_create with ctx->channels_last; train/layers/mixed.c and
 * train/model.c): the twin the device's NHWC path is held to.
 *
 *  - Every layout-aware entry of the backend table (convolution forward
 *    and backward, batch norm's four, max and average pooling, the
 *    channels-last input copy) run on NHWC data gives the NCHW run's
 *    results, transposed, bit for bit: outputs, dx added into and
 *    overwritten, dw (which stays c_out x c_in x kh x kw), db, dgamma,
 *    dbeta, batch statistics, running averages, a max pool's argmax (in
 *    the output's order). In bf16 (train/layers/mixed.c) and in fp32
 *    (train/layers/cl32.c).
 *  - A layout flag other than 0 and 1 is refused.
 *  - A resnet18 made channels-last computes the NCHW model's logits,
 *    gradients and running statistics bit for bit, over two steps, in
 *    bf16 and in fp32. NN_CL_AUTO on the CPU stays NCHW; NN_CL_ON is
 *    refused for a model whose classifier reads a wider map (vgg16).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "nn_test_util.h"
#include "test.h"
#include "train/nn_internal.h"

static nn_ctx ctx;
static ims_error err;

/* n x c x hw elements of es bytes into a new n x hw x c copy */
static void *to_nhwc(const void *src, size_t es, int n, int c, size_t hw)
{
	const char *s = src;
	char *d = malloc((size_t)n * c * hw * es + 1);
	for (size_t p = 0; p < (size_t)n * c; p++)
		for (size_t j = 0; j < hw; j++)
			memcpy(d + ((p / c * hw + j) * c + p % c) * es,
			       s + (p * hw + j) * es, es);
	return d;
}

/* bytes of one activation in the context's precision */
static size_t es;

/* count random activations in [lo, hi): bf16 values, or floats in fp32 */
static void *rand_act(size_t count, uint64_t seed, float lo, float hi)
{
	float *f = nn_test_alloc(count);
	nn_test_fill(f, count, seed, lo, hi);
	if (es == sizeof(float))
		return f;
	uint16_t *h = malloc(count * 2 + 2);
	for (size_t i = 0; i < count; i++)
		h[i] = ims_f32_to_bf16(f[i]);
	free(f);
	return h;
}

static void *dup(const void *p, size_t bytes)
{
	void *d = malloc(bytes + 1);
	memcpy(d, p, bytes);
	return d;
}

/* CHECK that the NHWC result b is the NCHW result a transposed */
static void same_t(const char *what, const void *a, const void *b, size_t es,
		   int n, int c, size_t hw)
{
	void *t = to_nhwc(a, es, n, c, hw);
	if (memcmp(t, b, (size_t)n * c * hw * es))
		fprintf(stderr, "%s: channels-last differs from NCHW\n", what);
	CHECK_MEM(t, b, (size_t)n * c * hw * es);
	free(t);
}

/* ---- convolution --------------------------------------------------------------- */

static void conv_case(int n, int c_in, int hw, int c_out, int k, int stride,
		      int bias)
{
	nn_conv_desc d;
	CHECK_OK(nn_conv_desc_init(&d, n, c_in, hw, hw, c_out, k, stride, k / 2,
				   1, 1, bias, &err),
		 &err);
	const size_t hi = (size_t)hw * hw, ho = (size_t)d.h_out * d.w_out;
	const size_t nx = (size_t)n * c_in * hi, ny = (size_t)n * c_out * ho;
	const size_t nw = (size_t)c_out * c_in * k * k;
	void *x = rand_act(nx, 1, -1, 1), *w = rand_act(nw, 2, -0.5f, 0.5f);
	void *dy = rand_act(ny, 3, -1, 1), *dx0 = rand_act(nx, 4, -1, 1);
	float *b = nn_test_alloc(c_out);
	nn_test_fill(b, c_out, 5, -1, 1);
	void *xt = to_nhwc(x, es, n, c_in, hi), *dyt = to_nhwc(dy, es, n, c_out, ho);
	void *wt = to_nhwc(w, es, c_out, c_in, (size_t)k * k);
	void *y = malloc(ny * es), *yt = malloc(ny * es);
	float *dw = nn_test_alloc(nw), *dwt = nn_test_alloc(nw);
	float *db = nn_test_alloc(c_out), *dbt = nn_test_alloc(c_out);
	char what[96];
	snprintf(what, sizeof(what), "conv %dx%d stride %d %dx%d->%d%s", k, k,
		 stride, hw, hw, c_out, bias ? " bias" : "");
	nn_conv_desc dt = d;
	dt.nhwc = 1;
	CHECK_OK(ctx.be->conv_forward(&ctx, &d, x, w, b, y, &err), &err);
	CHECK_OK(ctx.be->conv_forward(&ctx, &dt, xt, wt, b, yt, &err), &err);
	same_t(what, y, yt, es, n, c_out, ho);
	for (int over = 0; over < 2; over++) {
		void *dx = dup(dx0, nx * es);
		void *dxt = to_nhwc(dx0, es, n, c_in, hi);
		ctx.dx_overwrite = over;
		CHECK_OK(ctx.be->conv_backward(&ctx, &d, x, w, dy, dx, dw, db, &err),
			 &err);
		CHECK_OK(ctx.be->conv_backward(&ctx, &dt, xt, wt, dyt, dxt, dwt,
					       dbt, &err),
			 &err);
		same_t(what, dx, dxt, es, n, c_in, hi);
		CHECK_MEM(dw, dwt, nw * sizeof(float));
		if (bias)
			CHECK_MEM(db, dbt, c_out * sizeof(float));
		free(dx), free(dxt);
	}
	ctx.dx_overwrite = 0;
	free(x), free(w), free(dy), free(dx0), free(b), free(xt), free(dyt);
	free(wt), free(y), free(yt), free(dw), free(dwt), free(db), free(dbt);
}

/* ---- batch norm ---------------------------------------------------------------- */

static void bn_case(int n, int c, int hw)
{
	nn_bn_desc d = {.n = n, .c = c, .h = hw, .w = hw, .eps = 1e-5f,
			.momentum = 0.1f};
	nn_bn_desc dt = d;
	dt.nhwc = 1;
	const size_t p = (size_t)hw * hw, nx = (size_t)n * c * p;
	void *x = rand_act(nx, 11, -2, 3), *dy = rand_act(nx, 12, -1, 1);
	void *dx0 = rand_act(nx, 13, -1, 1);
	void *xt = to_nhwc(x, es, n, c, p), *dyt = to_nhwc(dy, es, n, c, p);
	float *g = nn_test_alloc(c), *be = nn_test_alloc(c);
	nn_test_fill(g, c, 14, 0.5f, 1.5f);
	nn_test_fill(be, c, 15, -0.5f, 0.5f);
	/* running statistics, batch statistics, parameter gradients: one
	 * set per layout */
	float *st[2][6];
	for (int l = 0; l < 2; l++)
		for (int i = 0; i < 6; i++) {
			st[l][i] = nn_test_alloc(c);
			nn_test_fill(st[l][i], c, 16 + i, 0.5f, 1.0f);
		}
	void *y = malloc(nx * es), *yt = malloc(nx * es);
	CHECK_OK(ctx.be->bn_forward_train(&ctx, &d, x, g, be, st[0][0], st[0][1],
					  st[0][2], st[0][3], y, &err),
		 &err);
	CHECK_OK(ctx.be->bn_forward_train(&ctx, &dt, xt, g, be, st[1][0],
					  st[1][1], st[1][2], st[1][3], yt, &err),
		 &err);
	same_t("bn train y", y, yt, es, n, c, p);
	for (int i = 0; i < 4; i++)
		CHECK_MEM(st[0][i], st[1][i], c * sizeof(float));
	CHECK_OK(ctx.be->bn_forward_eval(&ctx, &d, x, g, be, st[0][0], st[0][1],
					 y, &err),
		 &err);
	CHECK_OK(ctx.be->bn_forward_eval(&ctx, &dt, xt, g, be, st[1][0],
					 st[1][1], yt, &err),
		 &err);
	same_t("bn eval y", y, yt, es, n, c, p);
	/* a fused ReLU (d.relu): the ReLU after the store, so -0 stays -0
	 * as the ReLU layer leaves it */
	nn_bn_desc dr = d, drt = dt;
	dr.relu = drt.relu = 1;
	void *yr = malloc(nx * es);
	CHECK_OK(ctx.be->bn_forward_eval(&ctx, &dr, x, g, be, st[0][0], st[0][1],
					 yr, &err),
		 &err);
	CHECK_OK(ctx.be->relu_forward(&ctx, nx, y, y, &err), &err);
	CHECK_MEM(y, yr, nx * es);
	CHECK_OK(ctx.be->bn_forward_eval(&ctx, &drt, xt, g, be, st[1][0],
					 st[1][1], yt, &err),
		 &err);
	same_t("bn eval y, fused relu", y, yt, es, n, c, p);
	free(yr);
	for (int frozen = 0; frozen < 2; frozen++)
		for (int over = 0; over < 2; over++) {
			void *dx = dup(dx0, nx * es);
			void *dxt = to_nhwc(dx0, es, n, c, p);
			ctx.dx_overwrite = over;
			if (frozen) {
				CHECK_OK(ctx.be->bn_backward_frozen(
						 &ctx, &d, x, g, st[0][0], st[0][1],
						 dy, dx, st[0][4], st[0][5], &err),
					 &err);
				CHECK_OK(ctx.be->bn_backward_frozen(
						 &ctx, &dt, xt, g, st[1][0],
						 st[1][1], dyt, dxt, st[1][4],
						 st[1][5], &err),
					 &err);
			} else {
				CHECK_OK(ctx.be->bn_backward(&ctx, &d, x, g, st[0][2],
							     st[0][3], dy, dx,
							     st[0][4], st[0][5],
							     &err),
					 &err);
				CHECK_OK(ctx.be->bn_backward(&ctx, &dt, xt, g,
							     st[1][2], st[1][3],
							     dyt, dxt, st[1][4],
							     st[1][5], &err),
					 &err);
			}
			same_t(frozen ? "bn frozen dx" : "bn dx", dx, dxt, es, n, c,
			       p);
			CHECK_MEM(st[0][4], st[1][4], c * sizeof(float));
			CHECK_MEM(st[0][5], st[1][5], c * sizeof(float));
			free(dx), free(dxt);
		}
	ctx.dx_overwrite = 0;
	for (int l = 0; l < 2; l++)
		for (int i = 0; i < 6; i++)
			free(st[l][i]);
	free(x), free(dy), free(dx0), free(xt), free(dyt), free(g), free(be);
	free(y), free(yt);
}

/* ---- pooling ------------------------------------------------------------------- */

static void pool_case(int maxpool, const nn_pool_desc *d)
{
	nn_pool_desc dt = *d;
	dt.nhwc = 1;
	const int n = d->n, c = d->c;
	const size_t hi = (size_t)d->h_in * d->w_in, ho = (size_t)d->h_out * d->w_out;
	const size_t nx = (size_t)n * c * hi, ny = (size_t)n * c * ho;
	void *x = rand_act(nx, 21, -2, 2), *dy = rand_act(ny, 22, -1, 1);
	void *dx0 = rand_act(nx, 23, -1, 1);
	void *xt = to_nhwc(x, es, n, c, hi), *dyt = to_nhwc(dy, es, n, c, ho);
	void *y = malloc(ny * es), *yt = malloc(ny * es);
	int32_t *am = malloc(ny * 4), *amt = malloc(ny * 4);
	const char *what = maxpool ? "maxpool" : "avgpool";
	if (maxpool) {
		CHECK_OK(ctx.be->maxpool_forward(&ctx, d, x, y, am, &err), &err);
		CHECK_OK(ctx.be->maxpool_forward(&ctx, &dt, xt, yt, amt, &err),
			 &err);
		same_t("maxpool argmax", am, amt, 4, n, c, ho);
	} else {
		CHECK_OK(ctx.be->avgpool_forward(&ctx, d, x, y, &err), &err);
		CHECK_OK(ctx.be->avgpool_forward(&ctx, &dt, xt, yt, &err), &err);
	}
	same_t(what, y, yt, es, n, c, ho);
	for (int over = 0; over < 2; over++) {
		void *dx = dup(dx0, nx * es);
		void *dxt = to_nhwc(dx0, es, n, c, hi);
		ctx.dx_overwrite = over;
		if (maxpool) {
			CHECK_OK(ctx.be->maxpool_backward(&ctx, d, am, dy, dx, &err),
				 &err);
			CHECK_OK(ctx.be->maxpool_backward(&ctx, &dt, amt, dyt, dxt,
							  &err),
				 &err);
		} else {
			CHECK_OK(ctx.be->avgpool_backward(&ctx, d, dy, dx, &err),
				 &err);
			CHECK_OK(ctx.be->avgpool_backward(&ctx, &dt, dyt, dxt, &err),
				 &err);
		}
		same_t(what, dx, dxt, es, n, c, hi);
		free(dx), free(dxt);
	}
	ctx.dx_overwrite = 0;
	free(x), free(dy), free(dx0), free(xt), free(dyt), free(y), free(yt);
	free(am), free(amt);
}

/* ---- the input copy, refusals ------------------------------------------------ */

static void test_copy_and_refusals(void)
{
	const int n = 3, c = 5;
	const size_t hw = 7, count = (size_t)n * c * hw;
	float *src = nn_test_alloc(count);
	nn_test_fill(src, count, 31, -3, 3);
	void *a = malloc(count * es), *b = malloc(count * es);
	CHECK_OK(ctx.be->act_from_f32(&ctx, count, src, a, &err), &err);
	CHECK_OK(ctx.be->act_from_f32_nhwc(&ctx, n, c, hw, src, b, &err), &err);
	same_t("from_f32_nhwc", a, b, es, n, c, hw);

	nn_conv_desc d;
	CHECK_OK(nn_conv_desc_init(&d, 1, 2, 4, 4, 2, 3, 1, 1, 1, 1, 0, &err),
		 &err);
	float *buf = nn_test_alloc(256);
	d.nhwc = 2;
	CHECK(ctx.be->conv_forward(&ctx, &d, buf, buf, NULL, buf, &err) ==
	      IMS_EINVAL);
	CHECK(strstr(err.msg, "layout flag 2") != NULL);
	nn_bn_desc bd = {.n = 2, .c = 2, .h = 2, .w = 2, .eps = 1e-5f,
			 .momentum = 0.1f, .nhwc = -1};
	CHECK(ctx.be->bn_forward_eval(&ctx, &bd, buf, buf, buf, buf, buf, buf,
				      &err) == IMS_EINVAL);
	free(src), free(a), free(b), free(buf);
}

/* ---- a whole model ------------------------------------------------------------- */

static nn_model *make(const char *name, int cl, int prec, int *rc)
{
	nn_model *m = NULL;
	const int keep = ctx.precision;
	ctx.channels_last = cl;
	ctx.precision = prec;
	*rc = nn_model_create(&ctx, name, 10, 32, 32, 2, 7, &m, &err);
	ctx.channels_last = NN_CL_OFF;
	ctx.precision = keep;
	return m;
}

static void test_model(int prec)
{
	int rc;
	nn_model *m[2] = {make("resnet18", NN_CL_OFF, prec, &rc), NULL};
	CHECK_OK(rc, &err);
	m[1] = make("resnet18", NN_CL_ON, prec, &rc);
	CHECK_OK(rc, &err);
	if (!m[0] || !m[1])
		return;
	CHECK(nn_model_channels_last(m[0]) == 0);
	CHECK(nn_model_channels_last(m[1]) == 1);
	const size_t nx = 2 * 3 * 32 * 32;
	float *x = nn_test_alloc(nx), *dl = nn_test_alloc(20);
	nn_test_fill(x, nx, 41, -2, 2);
	nn_test_fill(dl, 20, 42, -0.1f, 0.1f);
	for (int step = 0; step < 2; step++) {
		const float *lg[2];
		size_t np, nb;
		float *g[2], *p[2], *bu[2];
		for (int l = 0; l < 2; l++) {
			CHECK_OK(nn_model_forward(m[l], x, 2, 1, 0, &lg[l], &err),
				 &err);
			CHECK_OK(nn_model_backward(m[l], dl, 0, &err), &err);
			g[l] = nn_model_grads(m[l], &np);
			p[l] = nn_model_params(m[l], &np);
			bu[l] = nn_model_buffers(m[l], &nb);
		}
		CHECK_MEM(lg[0], lg[1], 20 * sizeof(float));
		CHECK_MEM(g[0], g[1], np * sizeof(float));
		CHECK_MEM(bu[0], bu[1], nb * sizeof(float));
		/* a plain update, so the second step's weight copies differ */
		for (int l = 0; l < 2; l++)
			for (size_t i = 0; i < np; i++)
				p[l][i] -= 0.05f * g[l][i];
	}
	free(x), free(dl);
	nn_model_free(m[0]);
	nn_model_free(m[1]);

	nn_model *a = make("resnet18", NN_CL_AUTO, prec, &rc);
	CHECK_OK(rc, &err);
	CHECK(a && nn_model_channels_last(a) == 0); /* the CPU: no gain */
	nn_model_free(a);
	CHECK(!make("vgg16", NN_CL_ON, prec, &rc));
	CHECK(rc == IMS_EUNSUPPORTED && strstr(err.msg, "512x7x7"));
	CHECK(!make("resnet18", 7, NN_PREC_BF16, &rc));
	CHECK(rc == IMS_EINVAL);
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&ctx, 2, &err), &err);
	const int precs[2] = {NN_PREC_BF16, NN_PREC_FP32};
	for (int k = 0; k < 2; k++) {
		ctx.precision = precs[k];
		es = nn_act_bytes(ctx.precision);
		conv_case(2, 5, 9, 7, 3, 1, 1);
		conv_case(2, 6, 9, 4, 3, 2, 0);
		conv_case(3, 4, 6, 8, 1, 1, 0);
		conv_case(1, 3, 17, 8, 7, 2, 0); /* resnet's stem */
		bn_case(3, 5, 4);
		bn_case(2, 3, 1);
		nn_pool_desc d;
		CHECK_OK(nn_pool_desc_init(&d, 2, 5, 9, 9, 3, 2, 1, &err), &err);
		pool_case(1, &d);
		pool_case(0, &d);
		CHECK_OK(nn_pool_desc_init_adaptive(&d, 3, 6, 5, 5, 1, 1, &err),
			 &err);
		pool_case(0, &d);
		test_copy_and_refusals();
		test_model(precs[k]);
	}
	nn_ctx_release(&ctx);
	return TEST_EXIT();
}
