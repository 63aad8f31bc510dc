/*
 * mixed.c - the CPU backend's table entries, and the mixed-precision
 * graph on the CPU (--precision bf16|fp16): the reference the device's
 * 16-bit path is held to (train/nn_internal.h, "Mixed precision").
 *
 * With ctx->precision fp32 each entry is its layer's fp32 kernel. In 16
 * bits activations and convolution/linear weights arrive as 16-bit
 * values; an entry widens what it reads into fp32 copies (exact), runs
 * the layer's fp32 kernel on them (so every sum, GEMM and batch-norm
 * statistic accumulates in fp32 or double, as on the device), and rounds
 * what it stores to nearest even, once:
 *   - y = round(f(x)); a gradient into dx: round(f(dy)) overwriting it, or
 *     round(dx + f(dy)) adding to it (the fp32 kernel writes f(dy) into a
 *     copy with the overwrite convention, then one rounding);
 *   - a bias is added to the rounded product and rounded again, and a
 *     weight gradient is rounded to 16 bits before it is stored as
 *     float: the two places the device rounds twice (cuDNN writes a
 *     16-bit product and a 16-bit filter gradient);
 *   - ReLU, residual add and gradient accumulation read and write 16-bit
 *     values directly: one operation each, rounded once, so no copies.
 * Parameter gradients, biases and batch-norm statistics stay float.
 *
 * The fp32 copies live in a workspace of the context's own (ctx->dev),
 * apart from ctx->scratch, which the fp32 kernels use for their own
 * im2col and Winograd buffers during the same call.
 */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "train/layers/mixed_internal.h"
#include "train/nn_internal.h"

/* Below this many elements a loop stays on one thread. */
#define MP_PAR_MIN 65536

void nn_cpu_state_clear(nn_cpu_state *s)
{
	if (!s)
		return;
	free(s->wide);
	s->wide = NULL;
	s->wide_floats = 0;
}

void nn_cpu_release(nn_ctx *ctx)
{
	nn_cpu_state_clear(ctx->dev);
	free(ctx->dev);
	ctx->dev = NULL;
}

int nn_mp_is_half(const nn_ctx *ctx)
{
	return ctx->precision != NN_PREC_FP32;
}

int nn_mp_check_precision(const nn_ctx *ctx, const char *what,
			   ims_error *err)
{
	RETURN_IF(!nn_act_bytes(ctx->precision), err, IMS_EINVAL,
		  "cannot %s: unknown precision %d", what, ctx->precision);
	return 0;
}

static size_t round64(size_t floats)
{
	return (floats + 15) & ~(size_t)15;
}

/*
 * Carves k fp32 buffers of count[i] floats from the workspace (out[i]
 * NULL for a zero count). Contents are undefined.
 */
int nn_mp_wide_bufs(nn_ctx *ctx, const size_t *count, int k, float **out,
		     const char *what, ims_error *err)
{
	size_t total = 0;
	for (int i = 0; i < k; i++)
		total += round64(count[i]);
	nn_cpu_state *s = ctx->dev;
	if (!s) {
		s = calloc(1, sizeof(*s));
		RETURN_IF(!s, err, IMS_ENOMEM, "cannot %s: out of memory", what);
		ctx->dev = s;
	}
	if (total > s->wide_floats) {
		FORWARD_IF_ERR(nn_ctx_workspace_grow(
			ctx, s->wide_floats * sizeof(float), total * sizeof(float),
			"cpu 16-bit workspace", err));
		void *p = NULL;
		RETURN_IF(total > SIZE_MAX / sizeof(float) ||
				  posix_memalign(&p, 64, total * sizeof(float)),
			  err, IMS_ENOMEM,
			  "cannot %s: out of memory for a %zu-float workspace",
			  what, total);
		free(s->wide);
		s->wide = p;
		s->wide_floats = total;
	}
	float *p = s->wide;
	for (int i = 0; i < k; i++) {
		out[i] = count[i] ? p : NULL;
		p += round64(count[i]);
	}
	return 0;
}

static inline float widen1(int prec, uint16_t h)
{
	return prec == NN_PREC_BF16 ? ims_bf16_to_f32(h) : ims_f16_to_f32(h);
}

static inline uint16_t round1(int prec, float f)
{
	return prec == NN_PREC_BF16 ? ims_f32_to_bf16(f) : ims_f32_to_f16(f);
}

static int threads_for(const nn_ctx *ctx, size_t count)
{
	return count < MP_PAR_MIN ? 1 : ctx->threads;
}

/* dst[i] = src[i] widened, count values */
void nn_mp_widen(const nn_ctx *ctx, size_t count, const void *src, float *dst)
{
	const uint16_t *h = src;
	const int prec = ctx->precision, nt = threads_for(ctx, count);
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		dst[i] = widen1(prec, h[i]);
}

/* dst = round(src), or round(dst + src) with add */
void nn_mp_store(const nn_ctx *ctx, size_t count, const float *src, void *dst,
		  int add)
{
	uint16_t *h = dst;
	const int prec = ctx->precision, nt = threads_for(ctx, count);
	if (add) {
#pragma omp parallel for num_threads(nt) schedule(static)
		for (size_t i = 0; i < count; i++)
			h[i] = round1(prec, widen1(prec, h[i]) + src[i]);
		return;
	}
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		h[i] = round1(prec, src[i]);
}

/* y[n, c, j] = round(y + b[c]) over planes of hw values */
static void add_bias(const nn_ctx *ctx, int n, int c, size_t hw, const float *b,
		     void *y)
{
	uint16_t *h = y;
	const int prec = ctx->precision;
	const size_t planes = (size_t)n * (size_t)c;
	const int nt = threads_for(ctx, planes * hw);
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const float bc = b[p % (size_t)c];
		uint16_t *row = h + p * hw;
		for (size_t j = 0; j < hw; j++)
			row[j] = round1(prec, widen1(prec, row[j]) + bc);
	}
}

/* w[i] = w[i] rounded to 16 bits, kept as float */
static void round_in_place(const nn_ctx *ctx, size_t count, float *w)
{
	const int prec = ctx->precision, nt = threads_for(ctx, count);
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		w[i] = widen1(prec, round1(prec, w[i]));
}

/*
 * Channels-last (a descriptor's nhwc): the 16-bit tensor is n x hw x c,
 * its fp32 copy n x c x hw, so the fp32 kernels run unchanged and the
 * results are the NCHW run's bits. widen_l and store_l are widen and
 * store with that transpose folded in (plain ones when !nhwc).
 */
void nn_mp_widen_l(const nn_ctx *ctx, int nhwc, int n, int c, size_t hw,
		    const void *src, float *dst)
{
	const size_t planes = (size_t)n * (size_t)c;
	if (!nhwc) {
		nn_mp_widen(ctx, planes * hw, src, dst);
		return;
	}
	const uint16_t *h = src;
	const int prec = ctx->precision, nt = threads_for(ctx, planes * hw);
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const uint16_t *in = h + p / (size_t)c * hw * (size_t)c +
				     p % (size_t)c;
		float *out = dst + p * hw;
		for (size_t j = 0; j < hw; j++)
			out[j] = widen1(prec, in[j * (size_t)c]);
	}
}

void nn_mp_store_l(const nn_ctx *ctx, int nhwc, int n, int c, size_t hw,
		    const float *src, void *dst, int add)
{
	const size_t planes = (size_t)n * (size_t)c;
	if (!nhwc) {
		nn_mp_store(ctx, planes * hw, src, dst, add);
		return;
	}
	uint16_t *h = dst;
	const int prec = ctx->precision, nt = threads_for(ctx, planes * hw);
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		uint16_t *out = h + p / (size_t)c * hw * (size_t)c +
				p % (size_t)c;
		const float *in = src + p * hw;
		for (size_t j = 0; j < hw; j++) {
			const float v = add ? widen1(prec, out[j * (size_t)c]) + in[j]
					    : in[j];
			out[j * (size_t)c] = round1(prec, v);
		}
	}
}

/* A max pool's argmax between NCHW order (the fp32 kernel's) and NHWC
 * (the caller's): to_nhwc 1 reads n x c x hw, writes n x hw x c. */
void nn_mp_argmax_l(int to_nhwc, int n, int c, size_t hw, const int32_t *src,
		     int32_t *dst)
{
	for (size_t p = 0; p < (size_t)n * (size_t)c; p++) {
		const size_t base = p / (size_t)c * hw * (size_t)c + p % (size_t)c;
		for (size_t j = 0; j < hw; j++) {
			if (to_nhwc)
				dst[base + j * (size_t)c] = src[p * hw + j];
			else
				dst[p * hw + j] = src[base + j * (size_t)c];
		}
	}
}

/* ---- convolution ------------------------------------------------------------ */

static size_t conv_nx(const nn_conv_desc *d)
{
	return (size_t)d->n * d->c_in * d->h_in * d->w_in;
}

static size_t conv_nw(const nn_conv_desc *d)
{
	return (size_t)d->c_out * (d->c_in / d->groups) * d->kh * d->kw;
}

static size_t conv_ny(const nn_conv_desc *d)
{
	return (size_t)d->n * d->c_out * d->h_out * d->w_out;
}

int nn_cpu_mp_conv_forward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			   const void *w, const float *b, void *y,
			   ims_error *err)
{
	static const char what[] = "run a convolution";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_conv_forward
				     : nn_cpu_conv_forward)(ctx, d, x, w, b, y, err);
	FORWARD_IF_ERR(nn_conv_check_desc(d, what, err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a convolution: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	const size_t count[3] = {conv_nx(d), conv_nw(d), conv_ny(d)};
	const size_t hw_in = (size_t)d->h_in * d->w_in,
		     hw_out = (size_t)d->h_out * d->w_out;
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c_in, hw_in, x, f[0]);
	nn_mp_widen_l(ctx, d->nhwc, d->c_out, d->c_in / d->groups,
		(size_t)d->kh * d->kw, w, f[1]);
	nn_conv_desc nb = *d;
	nb.bias = 0;
	nb.nhwc = 0;
	FORWARD_IF_ERR(nn_cpu_conv_forward(ctx, &nb, f[0], f[1], NULL, f[2], err));
	nn_mp_store_l(ctx, d->nhwc, d->n, d->c_out, hw_out, f[2], y, 0);
	/* channels-last: n*hw rows of c_out, one bias each */
	if (d->bias && d->nhwc)
		add_bias(ctx, (int)(d->n * hw_out), d->c_out, 1, b, y);
	else if (d->bias)
		add_bias(ctx, d->n, d->c_out, hw_out, b, y);
	return 0;
}

int nn_cpu_mp_conv_backward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			    const void *w, const void *dy, void *dx, float *dw,
			    float *db, ims_error *err)
{
	static const char what[] = "run a convolution backward";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_conv_backward
				     : nn_cpu_conv_backward)(ctx, d, x, w, dy, dx,
							     dw, db, err);
	FORWARD_IF_ERR(nn_conv_check_desc(d, what, err));
	if (!d->bias)
		db = NULL;
	RETURN_IF(!dy || (dw && !x) || (dx && !w), err, IMS_EINVAL,
		  "cannot run a convolution backward: missing %s",
		  !dy ? "output gradient" : dw && !x ? "input" : "weights");
	/* dy, then x for dw, w and dx for dx */
	const size_t count[4] = {conv_ny(d), dw ? conv_nx(d) : 0,
				 dx ? conv_nw(d) : 0, dx ? conv_nx(d) : 0};
	const size_t hw_in = (size_t)d->h_in * d->w_in,
		     hw_out = (size_t)d->h_out * d->w_out;
	float *f[4];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 4, f, what, err));
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c_out, hw_out, dy, f[0]);
	if (dw)
		nn_mp_widen_l(ctx, d->nhwc, d->n, d->c_in, hw_in, x, f[1]);
	if (dx)
		nn_mp_widen_l(ctx, d->nhwc, d->c_out, d->c_in / d->groups,
			(size_t)d->kh * d->kw, w, f[2]);
	nn_conv_desc nd = *d;
	nd.nhwc = 0;
	BACKWARD_INTO_L(ctx, d->nhwc, d->n, d->c_in, hw_in, dx, f[3],
			nn_cpu_conv_backward(ctx, &nd, f[1], f[2], f[0], f[3],
					     dw, db, err));
	if (dw)
		round_in_place(ctx, conv_nw(d), dw);
	return 0;
}

/* ---- linear ----------------------------------------------------------------- */

int nn_cpu_mp_linear_forward(nn_ctx *ctx, const nn_linear_desc *d,
			     const void *x, const void *w, const float *b,
			     void *y, ims_error *err)
{
	static const char what[] = "run a linear layer";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	if (!nn_mp_is_half(ctx))
		return nn_cpu_linear_forward(ctx, d, x, w, b, y, err);
	FORWARD_IF_ERR(nn_linear_check_desc(d, what, err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a linear layer: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	const size_t count[3] = {(size_t)d->n * d->in, (size_t)d->out * d->in,
				 (size_t)d->n * d->out};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	nn_mp_widen(ctx, count[0], x, f[0]);
	nn_mp_widen(ctx, count[1], w, f[1]);
	nn_linear_desc nb = *d;
	nb.bias = 0;
	FORWARD_IF_ERR(nn_cpu_linear_forward(ctx, &nb, f[0], f[1], NULL, f[2],
					     err));
	nn_mp_store(ctx, count[2], f[2], y, 0);
	if (d->bias)
		add_bias(ctx, d->n, d->out, 1, b, y);
	return 0;
}

int nn_cpu_mp_linear_backward(nn_ctx *ctx, const nn_linear_desc *d,
			      const void *x, const void *w, const void *dy,
			      void *dx, float *dw, float *db, ims_error *err)
{
	static const char what[] = "run a linear layer backward";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	if (!nn_mp_is_half(ctx))
		return nn_cpu_linear_backward(ctx, d, x, w, dy, dx, dw, db, err);
	FORWARD_IF_ERR(nn_linear_check_desc(d, what, err));
	if (!d->bias)
		db = NULL;
	RETURN_IF(!dy || (dw && !x) || (dx && !w), err, IMS_EINVAL,
		  "cannot run a linear layer backward: missing %s",
		  !dy ? "output gradient" : dw && !x ? "input" : "weights");
	const size_t nx = (size_t)d->n * d->in, nw = (size_t)d->out * d->in;
	const size_t count[4] = {(size_t)d->n * d->out, dw ? nx : 0,
				 dx ? nw : 0, dx ? nx : 0};
	float *f[4];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 4, f, what, err));
	nn_mp_widen(ctx, count[0], dy, f[0]);
	if (dw)
		nn_mp_widen(ctx, count[1], x, f[1]);
	if (dx)
		nn_mp_widen(ctx, count[2], w, f[2]);
	BACKWARD_INTO(ctx, dx, f[3], count[3],
		      nn_cpu_linear_backward(ctx, d, f[1], f[2], f[0], f[3], dw,
					     db, err));
	if (dw)
		round_in_place(ctx, nw, dw);
	return 0;
}

/* ---- batch normalisation ------------------------------------------------------ */

static size_t bn_count(const nn_bn_desc *d)
{
	return (size_t)d->n * d->c * d->h * d->w;
}

/* d for the fp32 kernels, which read the NCHW copies; a fused ReLU
 * runs after the 16-bit store instead (the ReLU layer's operation on the
 * rounded value: -0 stays -0, as there) */
static nn_bn_desc nchw_bn(const nn_bn_desc *d)
{
	nn_bn_desc nd = *d;
	nd.nhwc = 0;
	nd.relu = 0;
	return nd;
}

int nn_cpu_mp_bn_forward_train(nn_ctx *ctx, const nn_bn_desc *d,
			       const void *x, const float *gamma,
			       const float *beta, float *running_mean,
			       float *running_var, float *save_mean,
			       float *save_invstd, void *y, ims_error *err)
{
	static const char what[] = "batch-normalise (training)";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_bn_forward_train
				     : nn_cpu_bn_forward_train)(ctx, d, x, gamma, beta,
					       running_mean, running_var,
					       save_mean, save_invstd, y, err);
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	const size_t n = bn_count(d), count[2] = {n, n};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 2, f, what, err));
	const size_t hw = (size_t)d->h * d->w;
	const nn_bn_desc nd = nchw_bn(d);
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, hw, x, f[0]);
	FORWARD_IF_ERR(nn_cpu_bn_forward_train(ctx, &nd, f[0], gamma, beta,
					       running_mean, running_var,
					       save_mean, save_invstd, f[1],
					       err));
	nn_mp_store_l(ctx, d->nhwc, d->n, d->c, hw, f[1], y, 0);
	return d->relu ? nn_cpu_mp_relu_forward(ctx, n, y, y, err) : 0;
}

int nn_cpu_mp_bn_forward_eval(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			      const float *gamma, const float *beta,
			      const float *running_mean,
			      const float *running_var, void *y, ims_error *err)
{
	static const char what[] = "batch-normalise (evaluation)";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_bn_forward_eval
				     : nn_cpu_bn_forward_eval)(ctx, d, x, gamma, beta,
					      running_mean, running_var, y, err);
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	const size_t n = bn_count(d), count[2] = {n, n};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 2, f, what, err));
	const size_t hw = (size_t)d->h * d->w;
	const nn_bn_desc nd = nchw_bn(d);
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, hw, x, f[0]);
	FORWARD_IF_ERR(nn_cpu_bn_forward_eval(ctx, &nd, f[0], gamma, beta,
					      running_mean, running_var, f[1],
					      err));
	nn_mp_store_l(ctx, d->nhwc, d->n, d->c, hw, f[1], y, 0);
	return d->relu ? nn_cpu_mp_relu_forward(ctx, n, y, y, err) : 0;
}

int nn_cpu_mp_bn_backward(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			  const float *gamma, const float *save_mean,
			  const float *save_invstd, const void *dy, void *dx,
			  float *dgamma, float *dbeta, ims_error *err)
{
	static const char what[] = "backpropagate batch-norm";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_bn_backward
				     : nn_cpu_bn_backward)(ctx, d, x, gamma, save_mean,
					  save_invstd, dy, dx, dgamma, dbeta,
					  err);
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	if (!dx && !dgamma && !dbeta)
		return 0;
	const size_t n = bn_count(d), count[3] = {n, n, dx ? n : 0};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	const size_t hw = (size_t)d->h * d->w;
	const nn_bn_desc nd = nchw_bn(d);
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, hw, x, f[0]);
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, hw, dy, f[1]);
	BACKWARD_INTO_L(ctx, d->nhwc, d->n, d->c, hw, dx, f[2],
			nn_cpu_bn_backward(ctx, &nd, f[0], gamma, save_mean,
					   save_invstd, f[1], f[2], dgamma,
					   dbeta, err));
	return 0;
}

int nn_cpu_mp_bn_backward_frozen(nn_ctx *ctx, const nn_bn_desc *d,
				 const void *x, const float *gamma,
				 const float *running_mean,
				 const float *running_var, const void *dy,
				 void *dx, float *dgamma, float *dbeta,
				 ims_error *err)
{
	static const char what[] = "backpropagate frozen batch-norm";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_bn_backward_frozen
				     : nn_cpu_bn_backward_frozen)(ctx, d, x, gamma, running_mean,
						 running_var, dy, dx, dgamma,
						 dbeta, err);
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	if (!dx && !dgamma && !dbeta)
		return 0;
	const size_t n = bn_count(d), count[3] = {n, n, dx ? n : 0};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	const size_t hw = (size_t)d->h * d->w;
	const nn_bn_desc nd = nchw_bn(d);
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, hw, x, f[0]);
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, hw, dy, f[1]);
	BACKWARD_INTO_L(ctx, d->nhwc, d->n, d->c, hw, dx, f[2],
			nn_cpu_bn_backward_frozen(ctx, &nd, f[0], gamma,
						  running_mean, running_var,
						  f[1], f[2], dgamma, dbeta,
						  err));
	return 0;
}

/* ---- ReLU, add, accumulate: 16-bit values read and written directly ------------- */

int nn_cpu_mp_relu_forward(nn_ctx *ctx, size_t count, const void *x, void *y,
			   ims_error *err)
{
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, "run relu", err));
	if (!nn_mp_is_half(ctx))
		return nn_cpu_relu_forward(ctx, count, x, y, err);
	const uint16_t *hx = x;
	uint16_t *hy = y;
	const int prec = ctx->precision, nt = threads_for(ctx, count);
	/* x < 0 ? 0 : x, as the fp32 kernel: NaN passes, -0 stays -0 */
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		hy[i] = widen1(prec, hx[i]) < 0.0f ? 0 : hx[i];
	return 0;
}

int nn_cpu_mp_relu_backward(nn_ctx *ctx, size_t count, const void *y,
			    const void *dy, void *dx, ims_error *err)
{
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, "backpropagate relu", err));
	if (!nn_mp_is_half(ctx))
		return nn_cpu_relu_backward(ctx, count, y, dy, dx, err);
	if (!dx)
		return 0;
	const uint16_t *hy = y, *hdy = dy;
	uint16_t *hdx = dx;
	const int prec = ctx->precision, nt = threads_for(ctx, count);
	if (ctx->dx_overwrite) {
		/* exact: dy's value or +0 (dx may be dy) */
#pragma omp parallel for num_threads(nt) schedule(static)
		for (size_t i = 0; i < count; i++)
			hdx[i] = widen1(prec, hy[i]) > 0.0f ? hdy[i] : 0;
		return 0;
	}
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++) {
		const float g = widen1(prec, hdy[i]);
		hdx[i] = round1(prec, widen1(prec, hdx[i]) +
					      (widen1(prec, hy[i]) > 0.0f ? g : 0.0f));
	}
	return 0;
}

int nn_cpu_mp_add_forward(nn_ctx *ctx, size_t count, const void *a,
			  const void *b, void *y, ims_error *err)
{
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, "add", err));
	if (!nn_mp_is_half(ctx))
		return nn_cpu_add_forward(ctx, count, a, b, y, err);
	const uint16_t *ha = a, *hb = b;
	uint16_t *hy = y;
	const int prec = ctx->precision, nt = threads_for(ctx, count);
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		hy[i] = round1(prec, widen1(prec, ha[i]) + widen1(prec, hb[i]));
	return 0;
}

/* the sum rounded, then the ReLU layer's operation on the stored value */
int nn_cpu_mp_add_relu_forward(nn_ctx *ctx, size_t count, const void *a,
			       const void *b, void *y, ims_error *err)
{
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, "add", err));
	if (!nn_mp_is_half(ctx))
		return nn_cpu_add_relu_forward(ctx, count, a, b, y, err);
	const uint16_t *ha = a, *hb = b;
	uint16_t *hy = y;
	const int prec = ctx->precision, nt = threads_for(ctx, count);
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++) {
		const uint16_t q =
			round1(prec, widen1(prec, ha[i]) + widen1(prec, hb[i]));
		hy[i] = widen1(prec, q) < 0.0f ? 0 : q;
	}
	return 0;
}

int nn_cpu_mp_accumulate(nn_ctx *ctx, size_t count, const void *dy, void *dx,
			 ims_error *err)
{
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, "accumulate a gradient", err));
	if (!nn_mp_is_half(ctx))
		return nn_cpu_accumulate(ctx, count, dy, dx, err);
	if (!dx)
		return 0;
	const uint16_t *hdy = dy;
	uint16_t *hdx = dx;
	if (ctx->dx_overwrite) {
		if (dx != dy)
			memcpy(dx, dy, count * sizeof(uint16_t));
		return 0;
	}
	const int prec = ctx->precision, nt = threads_for(ctx, count);
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		hdx[i] = round1(prec, widen1(prec, hdx[i]) + widen1(prec, hdy[i]));
	return 0;
}
