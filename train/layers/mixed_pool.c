/*
 * mixed_pool.c - the CPU backend's pooling, dropout and conversion
 * entries: through fp32 copies in 16 bits (mixed.c's rules), either
 * layout for pooling.
 */
#include <string.h>

#include "common/common.h"
#include "train/layers/mixed_internal.h"
#include "train/nn_internal.h"

/* ---- pooling and dropout: through fp32 copies ---------------------------------- */

int nn_cpu_mp_maxpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
			      const void *x, void *y, int32_t *argmax,
			      ims_error *err)
{
	static const char what[] = "max-pool";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_maxpool_forward
				     : nn_cpu_maxpool_forward)(ctx, d, x, y, argmax, err);
	FORWARD_IF_ERR(nn_maxpool_check_desc(d, what, err));
	RETURN_IF(!argmax, err, IMS_EINVAL, "cannot %s: no argmax", what);
	/* x, y, and channels-last the argmax in NCHW order (int32 in a
	 * float buffer of the same size) */
	const size_t count[3] = {pool_nx(d), pool_ny(d), d->nhwc ? pool_ny(d) : 0};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	const nn_pool_desc nd = nchw_pool(d);
	int32_t *am = d->nhwc ? (int32_t *)(void *)f[2] : argmax;
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, pool_hw_in(d), x, f[0]);
	FORWARD_IF_ERR(nn_cpu_maxpool_forward(ctx, &nd, f[0], f[1], am, err));
	nn_mp_store_l(ctx, d->nhwc, d->n, d->c, pool_hw_out(d), f[1], y, 0);
	if (d->nhwc)
		nn_mp_argmax_l(1, d->n, d->c, pool_hw_out(d), am, argmax);
	return 0;
}

int nn_cpu_mp_maxpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			       const int32_t *argmax, const void *dy, void *dx,
			       ims_error *err)
{
	static const char what[] = "backpropagate max-pool";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_maxpool_backward
				     : nn_cpu_maxpool_backward)(ctx, d, argmax, dy, dx, err);
	FORWARD_IF_ERR(nn_maxpool_check_desc(d, what, err));
	if (!dx)
		return 0;
	RETURN_IF(!argmax, err, IMS_EINVAL, "cannot %s: no argmax", what);
	const size_t count[3] = {pool_ny(d), pool_nx(d), d->nhwc ? pool_ny(d) : 0};
	float *f[3];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 3, f, what, err));
	const nn_pool_desc nd = nchw_pool(d);
	const int32_t *am = argmax;
	if (d->nhwc) {
		nn_mp_argmax_l(0, d->n, d->c, pool_hw_out(d), argmax,
			 (int32_t *)(void *)f[2]);
		am = (const int32_t *)(void *)f[2];
	}
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, pool_hw_out(d), dy, f[0]);
	BACKWARD_INTO_L(ctx, d->nhwc, d->n, d->c, pool_hw_in(d), dx, f[1],
			nn_cpu_maxpool_backward(ctx, &nd, am, f[0], f[1], err));
	return 0;
}

int nn_cpu_mp_avgpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
			      const void *x, void *y, ims_error *err)
{
	static const char what[] = "average-pool";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_avgpool_forward
				     : nn_cpu_avgpool_forward)(ctx, d, x, y, err);
	FORWARD_IF_ERR(nn_avgpool_check_desc(d, what, err));
	const size_t count[2] = {pool_nx(d), pool_ny(d)};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 2, f, what, err));
	const nn_pool_desc nd = nchw_pool(d);
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, pool_hw_in(d), x, f[0]);
	FORWARD_IF_ERR(nn_cpu_avgpool_forward(ctx, &nd, f[0], f[1], err));
	nn_mp_store_l(ctx, d->nhwc, d->n, d->c, pool_hw_out(d), f[1], y, 0);
	return 0;
}

int nn_cpu_mp_avgpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			       const void *dy, void *dx, ims_error *err)
{
	static const char what[] = "backpropagate average-pool";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d ? d->nhwc : 0, what, err));
	if (!nn_mp_is_half(ctx))
		return (d && d->nhwc ? nn_cpu_cl32_avgpool_backward
				     : nn_cpu_avgpool_backward)(ctx, d, dy, dx, err);
	FORWARD_IF_ERR(nn_avgpool_check_desc(d, what, err));
	if (!dx)
		return 0;
	const size_t count[2] = {pool_ny(d), pool_nx(d)};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, count, 2, f, what, err));
	const nn_pool_desc nd = nchw_pool(d);
	nn_mp_widen_l(ctx, d->nhwc, d->n, d->c, pool_hw_out(d), dy, f[0]);
	BACKWARD_INTO_L(ctx, d->nhwc, d->n, d->c, pool_hw_in(d), dx, f[1],
			nn_cpu_avgpool_backward(ctx, &nd, f[0], f[1], err));
	return 0;
}

int nn_cpu_mp_dropout_forward(nn_ctx *ctx, size_t count, float p,
			      uint64_t seed, const nn_dropout_place *at,
			      const void *x, void *y, uint8_t *mask,
			      ims_error *err)
{
	static const char what[] = "apply dropout";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	if (!nn_mp_is_half(ctx))
		return nn_cpu_dropout_forward(ctx, count, p, seed, at, x, y,
					      mask, err);
	const size_t c[2] = {count, count};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, c, 2, f, what, err));
	nn_mp_widen(ctx, count, x, f[0]);
	FORWARD_IF_ERR(nn_cpu_dropout_forward(ctx, count, p, seed, at, f[0],
					      f[1], mask, err));
	nn_mp_store(ctx, count, f[1], y, 0);
	return 0;
}

int nn_cpu_mp_dropout_backward(nn_ctx *ctx, size_t count, float p,
			       const uint8_t *mask, const void *dy, void *dx,
			       ims_error *err)
{
	static const char what[] = "backpropagate dropout";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	if (!nn_mp_is_half(ctx))
		return nn_cpu_dropout_backward(ctx, count, p, mask, dy, dx, err);
	if (!dx)
		return 0;
	const size_t c[2] = {count, count};
	float *f[2];
	FORWARD_IF_ERR(nn_mp_wide_bufs(ctx, c, 2, f, what, err));
	nn_mp_widen(ctx, count, dy, f[0]);
	BACKWARD_INTO(ctx, dx, f[1], count,
		      nn_cpu_dropout_backward(ctx, count, p, mask, f[0], f[1],
					      err));
	return 0;
}

/* ---- conversions ------------------------------------------------------------- */

int nn_cpu_mp_from_f32(nn_ctx *ctx, size_t count, const float *src, void *dst,
		       ims_error *err)
{
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, "convert to the activation type",
				       err));
	if (!nn_mp_is_half(ctx)) {
		if (dst != src)
			memcpy(dst, src, count * sizeof(float));
		return 0;
	}
	nn_mp_store(ctx, count, src, dst, 0);
	return 0;
}

int nn_cpu_mp_from_f32_nhwc(nn_ctx *ctx, int n, int c, size_t hw,
			    const float *src, void *dst, ims_error *err)
{
	static const char what[] = "convert to the activation type channels-last";
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(1, what, err));
	RETURN_IF(n < 0 || c < 1 || (n && (!src || !dst)), err, IMS_EINVAL,
		  "cannot %s: %d x %d x %zu values", what, n, c, hw);
	if (!nn_mp_is_half(ctx))
		return nn_cpu_cl32_from_f32_nhwc(ctx, n, c, hw, src, dst);
	nn_mp_store_l(ctx, 1, n, c, hw, src, dst, 0);
	return 0;
}

int nn_cpu_mp_to_f32(nn_ctx *ctx, size_t count, const void *src, float *dst,
		     ims_error *err)
{
	FORWARD_IF_ERR(nn_mp_check_precision(ctx, "convert from the activation type",
				       err));
	if (!nn_mp_is_half(ctx)) {
		if (dst != src)
			memcpy(dst, src, count * sizeof(float));
		return 0;
	}
	nn_mp_widen(ctx, count, src, dst);
	return 0;
}
