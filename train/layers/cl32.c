/*
 * cl32.c - channels-last in fp32 on the CPU: the CPU's twin of the
 * device's fp32 NHWC path (--channels-last on with --precision fp32).
 *
 * Each entry transposes what it reads from n x hw x c into NCHW copies
 * in the context's workspace, runs the layer's NCHW fp32 kernel on them
 * and transposes what it writes back. A gradient added into dx is
 * transposed in first and the kernel adds to it as it does in NCHW, so
 * every entry gives the NCHW run's bits, accumulation order included
 * (tests/train/test_channels_last.c). Convolution weights arrive as the
 * model's c_out x kh x kw x c_in copy and are read as n = c_out images of
 * kh x kw pixels; the weight gradient is NCHW's (c_out x c_in x kh x kw)
 * in either layout.
 */
#include <string.h>

#include "train/layers/mixed_internal.h"
#include "train/nn_internal.h"

#define CL_PAR_MIN 65536

/* dst (n x c x hw) = src (n x hw x c) */
static void to_nchw(const nn_ctx *ctx, int n, int c, size_t hw,
		    const float *src, float *dst)
{
	const size_t planes = (size_t)n * (size_t)c;
	const int nt = planes * hw < CL_PAR_MIN ? 1 : ctx->threads;
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const float *in = src + p / (size_t)c * hw * (size_t)c + p % (size_t)c;
		float *out = dst + p * hw;
		for (size_t j = 0; j < hw; j++)
			out[j] = in[j * (size_t)c];
	}
}

/* dst (n x hw x c) = src (n x c x hw) */
static void to_nhwc(const nn_ctx *ctx, int n, int c, size_t hw,
		    const float *src, float *dst)
{
	const size_t planes = (size_t)n * (size_t)c;
	const int nt = planes * hw < CL_PAR_MIN ? 1 : ctx->threads;
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		float *out = dst + p / (size_t)c * hw * (size_t)c + p % (size_t)c;
		const float *in = src + p * hw;
		for (size_t j = 0; j < hw; j++)
			out[j * (size_t)c] = in[j];
	}
}

/* dx's NCHW copy before a backward kernel runs: its values when the
 * kernel adds to them, nothing to copy when it overwrites */
static void dx_in(const nn_ctx *ctx, int n, int c, size_t hw, const float *dx,
		  float *copy)
{
	if (dx && !ctx->dx_overwrite)
		to_nchw(ctx, n, c, hw, dx, copy);
}

static void dx_out(const nn_ctx *ctx, int n, int c, size_t hw,
		   const float *copy, float *dx)
{
	if (dx)
		to_nhwc(ctx, n, c, hw, copy, dx);
}

/* ---- convolution ------------------------------------------------------------ */

int nn_cpu_cl32_conv_forward(nn_ctx *ctx, const nn_conv_desc *d,
			     const float *x, const float *w, const float *b,
			     float *y, ims_error *err)
{
	static const char what[] = "run a convolution";
	FORWARD_IF_ERR(nn_conv_check_desc(d, what, err));
	RETURN_IF(!x || !w || !y, err, IMS_EINVAL,
		  "cannot run a convolution: missing %s",
		  !x ? "input" : !w ? "weights" : "output");
	const size_t hw_in = (size_t)d->h_in * d->w_in,
		     hw_out = (size_t)d->h_out * d->w_out, k = (size_t)d->kh * d->kw;
	const int cg = d->c_in / d->groups;
	const size_t count[3] = {(size_t)d->n * d->c_in * hw_in,
				 (size_t)d->c_out * cg * k,
				 (size_t)d->n * d->c_out * hw_out};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	to_nchw(ctx, d->n, d->c_in, hw_in, x, f[0]);
	to_nchw(ctx, d->c_out, cg, k, w, f[1]);
	nn_conv_desc nd = *d;
	nd.nhwc = 0;
	FORWARD_IF_ERR(nn_cpu_conv_forward(ctx, &nd, f[0], f[1], b, f[2], err));
	to_nhwc(ctx, d->n, d->c_out, hw_out, f[2], y);
	return 0;
}

int nn_cpu_cl32_conv_backward(nn_ctx *ctx, const nn_conv_desc *d,
			      const float *x, const float *w, const float *dy,
			      float *dx, float *dw, float *db, ims_error *err)
{
	static const char what[] = "run a convolution backward";
	FORWARD_IF_ERR(nn_conv_check_desc(d, what, err));
	RETURN_IF(!dy || (dw && !x) || (dx && !w), err, IMS_EINVAL,
		  "cannot run a convolution backward: missing %s",
		  !dy ? "output gradient" : dw && !x ? "input" : "weights");
	const size_t hw_in = (size_t)d->h_in * d->w_in,
		     hw_out = (size_t)d->h_out * d->w_out, k = (size_t)d->kh * d->kw;
	const int cg = d->c_in / d->groups;
	const size_t nx = (size_t)d->n * d->c_in * hw_in;
	const size_t count[4] = {(size_t)d->n * d->c_out * hw_out, dw ? nx : 0,
				 dx ? (size_t)d->c_out * cg * k : 0, dx ? nx : 0};
	float *f[4];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 4, f, what, err));
	to_nchw(ctx, d->n, d->c_out, hw_out, dy, f[0]);
	if (dw)
		to_nchw(ctx, d->n, d->c_in, hw_in, x, f[1]);
	if (dx)
		to_nchw(ctx, d->c_out, cg, k, w, f[2]);
	dx_in(ctx, d->n, d->c_in, hw_in, dx, f[3]);
	nn_conv_desc nd = *d;
	nd.nhwc = 0;
	FORWARD_IF_ERR(nn_cpu_conv_backward(ctx, &nd, f[1], f[2], f[0],
					    dx ? f[3] : NULL, dw, db, err));
	dx_out(ctx, d->n, d->c_in, hw_in, f[3], dx);
	return 0;
}

/* ---- batch norm --------------------------------------------------------------- */

static size_t bn_hw(const nn_bn_desc *d)
{
	return (size_t)d->h * d->w;
}

static nn_bn_desc bn_nchw(const nn_bn_desc *d)
{
	nn_bn_desc nd = *d;
	nd.nhwc = 0;
	return nd;
}

int nn_cpu_cl32_bn_forward_train(nn_ctx *ctx, const nn_bn_desc *d,
				 const float *x, const float *gamma,
				 const float *beta, float *running_mean,
				 float *running_var, float *save_mean,
				 float *save_invstd, float *y, ims_error *err)
{
	static const char what[] = "batch-normalise (training)";
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	const size_t n = (size_t)d->n * d->c * bn_hw(d), count[2] = {n, n};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 2, f, what, err));
	to_nchw(ctx, d->n, d->c, bn_hw(d), x, f[0]);
	const nn_bn_desc nd = bn_nchw(d);
	FORWARD_IF_ERR(nn_cpu_bn_forward_train(ctx, &nd, f[0], gamma, beta,
					       running_mean, running_var,
					       save_mean, save_invstd, f[1],
					       err));
	to_nhwc(ctx, d->n, d->c, bn_hw(d), f[1], y);
	return 0;
}

int nn_cpu_cl32_bn_forward_eval(nn_ctx *ctx, const nn_bn_desc *d,
				const float *x, const float *gamma,
				const float *beta, const float *running_mean,
				const float *running_var, float *y,
				ims_error *err)
{
	static const char what[] = "batch-normalise (evaluation)";
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	const size_t n = (size_t)d->n * d->c * bn_hw(d), count[2] = {n, n};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 2, f, what, err));
	to_nchw(ctx, d->n, d->c, bn_hw(d), x, f[0]);
	const nn_bn_desc nd = bn_nchw(d);
	FORWARD_IF_ERR(nn_cpu_bn_forward_eval(ctx, &nd, f[0], gamma, beta,
					      running_mean, running_var, f[1],
					      err));
	to_nhwc(ctx, d->n, d->c, bn_hw(d), f[1], y);
	return 0;
}

int nn_cpu_cl32_bn_backward(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
			    const float *gamma, const float *save_mean,
			    const float *save_invstd, const float *dy,
			    float *dx, float *dgamma, float *dbeta,
			    ims_error *err)
{
	static const char what[] = "backpropagate batch-norm";
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	const size_t n = (size_t)d->n * d->c * bn_hw(d);
	const size_t count[3] = {n, n, dx ? n : 0};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	to_nchw(ctx, d->n, d->c, bn_hw(d), x, f[0]);
	to_nchw(ctx, d->n, d->c, bn_hw(d), dy, f[1]);
	dx_in(ctx, d->n, d->c, bn_hw(d), dx, f[2]);
	const nn_bn_desc nd = bn_nchw(d);
	FORWARD_IF_ERR(nn_cpu_bn_backward(ctx, &nd, f[0], gamma, save_mean,
					  save_invstd, f[1], dx ? f[2] : NULL,
					  dgamma, dbeta, err));
	dx_out(ctx, d->n, d->c, bn_hw(d), f[2], dx);
	return 0;
}

int nn_cpu_cl32_bn_backward_frozen(nn_ctx *ctx, const nn_bn_desc *d,
				   const float *x, const float *gamma,
				   const float *running_mean,
				   const float *running_var, const float *dy,
				   float *dx, float *dgamma, float *dbeta,
				   ims_error *err)
{
	static const char what[] = "backpropagate batch-norm";
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	const size_t n = (size_t)d->n * d->c * bn_hw(d);
	const size_t count[3] = {n, n, dx ? n : 0};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	to_nchw(ctx, d->n, d->c, bn_hw(d), x, f[0]);
	to_nchw(ctx, d->n, d->c, bn_hw(d), dy, f[1]);
	dx_in(ctx, d->n, d->c, bn_hw(d), dx, f[2]);
	const nn_bn_desc nd = bn_nchw(d);
	FORWARD_IF_ERR(nn_cpu_bn_backward_frozen(ctx, &nd, f[0], gamma,
						 running_mean, running_var, f[1],
						 dx ? f[2] : NULL, dgamma,
						 dbeta, err));
	dx_out(ctx, d->n, d->c, bn_hw(d), f[2], dx);
	return 0;
}

/* ---- pooling ------------------------------------------------------------------ */

int nn_cpu_cl32_maxpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
				const float *x, float *y, int32_t *argmax,
				ims_error *err)
{
	static const char what[] = "max-pool";
	FORWARD_IF_ERR(nn_maxpool_check_desc(d, what, err));
	RETURN_IF(!argmax, err, IMS_EINVAL, "cannot %s: no argmax", what);
	const size_t nx = pool_nx(d), ny = pool_ny(d);
	/* x, y and the argmax in NCHW order (int32 in a float buffer) */
	const size_t count[3] = {nx, ny, ny};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	int32_t *am = (int32_t *)(void *)f[2];
	to_nchw(ctx, d->n, d->c, pool_hw_in(d), x, f[0]);
	const nn_pool_desc nd = nchw_pool(d);
	FORWARD_IF_ERR(nn_cpu_maxpool_forward(ctx, &nd, f[0], f[1], am, err));
	to_nhwc(ctx, d->n, d->c, pool_hw_out(d), f[1], y);
	nn_mp_argmax_l(1, d->n, d->c, pool_hw_out(d), am, argmax);
	return 0;
}

int nn_cpu_cl32_maxpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
				 const int32_t *argmax, const float *dy,
				 float *dx, ims_error *err)
{
	static const char what[] = "backpropagate max-pool";
	FORWARD_IF_ERR(nn_maxpool_check_desc(d, what, err));
	if (!dx)
		return 0;
	RETURN_IF(!argmax, err, IMS_EINVAL, "cannot %s: no argmax", what);
	const size_t nx = pool_nx(d), ny = pool_ny(d);
	const size_t count[3] = {ny, nx, ny};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	int32_t *am = (int32_t *)(void *)f[2];
	nn_mp_argmax_l(0, d->n, d->c, pool_hw_out(d), argmax, am);
	to_nchw(ctx, d->n, d->c, pool_hw_out(d), dy, f[0]);
	dx_in(ctx, d->n, d->c, pool_hw_in(d), dx, f[1]);
	const nn_pool_desc nd = nchw_pool(d);
	FORWARD_IF_ERR(nn_cpu_maxpool_backward(ctx, &nd, am, f[0], f[1], err));
	dx_out(ctx, d->n, d->c, pool_hw_in(d), f[1], dx);
	return 0;
}

int nn_cpu_cl32_avgpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
				const float *x, float *y, ims_error *err)
{
	static const char what[] = "average-pool";
	FORWARD_IF_ERR(nn_avgpool_check_desc(d, what, err));
	const size_t count[2] = {pool_nx(d), pool_ny(d)};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 2, f, what, err));
	to_nchw(ctx, d->n, d->c, pool_hw_in(d), x, f[0]);
	const nn_pool_desc nd = nchw_pool(d);
	FORWARD_IF_ERR(nn_cpu_avgpool_forward(ctx, &nd, f[0], f[1], err));
	to_nhwc(ctx, d->n, d->c, pool_hw_out(d), f[1], y);
	return 0;
}

int nn_cpu_cl32_avgpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
				 const float *dy, float *dx, ims_error *err)
{
	static const char what[] = "backpropagate average-pool";
	FORWARD_IF_ERR(nn_avgpool_check_desc(d, what, err));
	if (!dx)
		return 0;
	const size_t count[2] = {pool_ny(d), pool_nx(d)};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 2, f, what, err));
	to_nchw(ctx, d->n, d->c, pool_hw_out(d), dy, f[0]);
	dx_in(ctx, d->n, d->c, pool_hw_in(d), dx, f[1]);
	const nn_pool_desc nd = nchw_pool(d);
	FORWARD_IF_ERR(nn_cpu_avgpool_backward(ctx, &nd, f[0], f[1], err));
	dx_out(ctx, d->n, d->c, pool_hw_in(d), f[1], dx);
	return 0;
}

/* ---- the model's input and weight copies ---------------------------------- */

int nn_cpu_cl32_from_f32_nhwc(nn_ctx *ctx, int n, int c, size_t hw,
			      const float *src, float *dst)
{
	to_nhwc(ctx, n, c, hw, src, dst);
	return 0;
}
