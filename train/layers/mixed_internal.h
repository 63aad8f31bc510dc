/*
 * mixed_internal.h - what the CPU's 16-bit entries share (mixed.c: the
 * helpers; mixed_pool.c: pooling, dropout and the conversions). Every
 * helper takes the context whose precision (bf16 or fp16) and threads
 * it uses; "layout" arguments are a descriptor's nhwc (channels-last:
 * the 16-bit tensor n x hw x c, its fp32 copy n x c x hw).
 */
#ifndef IMSHARD_MIXED_INTERNAL_H
#define IMSHARD_MIXED_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "train/nn_internal.h"

/* 1 in 16 bits */
int nn_mp_is_half(const nn_ctx *ctx);
/* IMS_EINVAL for an unknown precision */
int nn_mp_check_precision(const nn_ctx *ctx, const char *what, ims_error *err);
/* k fp32 buffers of count[i] floats from the context's workspace (out[i]
 * NULL for a zero count); contents undefined */
int nn_mp_wide_bufs(nn_ctx *ctx, const size_t *count, int k, float **out,
		    const char *what, ims_error *err);
/* dst[i] = src[i] widened, count values */
void nn_mp_widen(const nn_ctx *ctx, size_t count, const void *src, float *dst);
/* dst = round(src), or round(dst + src) with add */
void nn_mp_store(const nn_ctx *ctx, size_t count, const float *src, void *dst,
		 int add);
/* nn_mp_widen and nn_mp_store of n x c x hw values in layout nhwc */
void nn_mp_widen_l(const nn_ctx *ctx, int nhwc, int n, int c, size_t hw,
		   const void *src, float *dst);
void nn_mp_store_l(const nn_ctx *ctx, int nhwc, int n, int c, size_t hw,
		   const float *src, void *dst, int add);
/* a max pool's argmax between NCHW order and NHWC (to_nhwc 1: n x c x hw
 * into n x hw x c) */
void nn_mp_argmax_l(int to_nhwc, int n, int c, size_t hw, const int32_t *src,
		    int32_t *dst);

/* A pooling descriptor's element counts (x, y), plane sizes (in, out),
 * and the descriptor for the NCHW fp32 kernels the entries call. */
static inline size_t pool_nx(const nn_pool_desc *d)
{
	return (size_t)d->n * d->c * d->h_in * d->w_in;
}

static inline size_t pool_ny(const nn_pool_desc *d)
{
	return (size_t)d->n * d->c * d->h_out * d->w_out;
}

static inline size_t pool_hw_in(const nn_pool_desc *d)
{
	return (size_t)d->h_in * d->w_in;
}

static inline size_t pool_hw_out(const nn_pool_desc *d)
{
	return (size_t)d->h_out * d->w_out;
}

static inline nn_pool_desc nchw_pool(const nn_pool_desc *d)
{
	nn_pool_desc nd = *d;
	nd.nhwc = 0;
	return nd;
}

/* fp32 channels-last (cl32.c): the NCHW fp32 kernels between transposes,
 * the NCHW run's bits; the descriptors' nhwc is 1 */
int nn_cpu_cl32_conv_forward(nn_ctx *ctx, const nn_conv_desc *d,
			     const float *x, const float *w, const float *b,
			     float *y, ims_error *err);
int nn_cpu_cl32_conv_backward(nn_ctx *ctx, const nn_conv_desc *d,
			      const float *x, const float *w, const float *dy,
			      float *dx, float *dw, float *db, ims_error *err);
int nn_cpu_cl32_bn_forward_train(nn_ctx *ctx, const nn_bn_desc *d,
				 const float *x, const float *gamma,
				 const float *beta, float *running_mean,
				 float *running_var, float *save_mean,
				 float *save_invstd, float *y, ims_error *err);
int nn_cpu_cl32_bn_forward_eval(nn_ctx *ctx, const nn_bn_desc *d,
				const float *x, const float *gamma,
				const float *beta, const float *running_mean,
				const float *running_var, float *y,
				ims_error *err);
int nn_cpu_cl32_bn_backward(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
			    const float *gamma, const float *save_mean,
			    const float *save_invstd, const float *dy,
			    float *dx, float *dgamma, float *dbeta,
			    ims_error *err);
int nn_cpu_cl32_bn_backward_frozen(nn_ctx *ctx, const nn_bn_desc *d,
				   const float *x, const float *gamma,
				   const float *running_mean,
				   const float *running_var, const float *dy,
				   float *dx, float *dgamma, float *dbeta,
				   ims_error *err);
int nn_cpu_cl32_maxpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
				const float *x, float *y, int32_t *argmax,
				ims_error *err);
int nn_cpu_cl32_maxpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
				 const int32_t *argmax, const float *dy,
				 float *dx, ims_error *err);
int nn_cpu_cl32_avgpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
				const float *x, float *y, ims_error *err);
int nn_cpu_cl32_avgpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
				 const float *dy, float *dx, ims_error *err);
/* dst (n x hw x c) = src (n x c x hw) */
int nn_cpu_cl32_from_f32_nhwc(nn_ctx *ctx, int n, int c, size_t hw,
			      const float *src, float *dst);

/*
 * Runs a backward kernel that writes dx into the fp32 copy dx32 with the
 * overwrite convention, then stores it into the 16-bit dx with the
 * caller's convention (ctx->dx_overwrite); BACKWARD_INTO_L stores it in
 * layout nhwc, n x c x hw values.
 */
#define BACKWARD_INTO_L(ctx, nhwc, n, c, hw, dx, dx32, call)                   \
	do {                                                                   \
		const int over_ = (ctx)->dx_overwrite;                         \
		(ctx)->dx_overwrite = 1;                                       \
		int rc_ = (call);                                              \
		(ctx)->dx_overwrite = over_;                                   \
		FORWARD_IF_ERR(rc_);                                           \
		if (dx)                                                        \
			nn_mp_store_l((ctx), (nhwc), (n), (c), (hw), (dx32),   \
				      (dx), !over_);                           \
	} while (0)
/* count values, no layout: nn_mp_store_l of one plane */
#define BACKWARD_INTO(ctx, dx, dx32, count, call)                              \
	BACKWARD_INTO_L(ctx, 0, 1, 1, count, dx, dx32, call)

#endif
