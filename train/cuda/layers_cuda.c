/*
 * layers_cuda.c - the backend entries of the layers that are own kernels
 * only (ReLU, pooling, dropout, add, softmax cross-entropy): the CPU
 * kernels' argument checks, then the launch (the kernels are in the .cu
 * files named in cuda_kernels.h), and the conversions between float and
 * the activation type (half.cu). Activations are of the context's
 * activation type (ctx->precision).
 *
 * The checks are the CPU's, with the same messages, so a bad call fails
 * the same way on either backend. One difference: max-pool backward does
 * not read argmax on the host to check it (that would wait for the
 * device); an entry outside its window adds nothing instead of failing.
 */
#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"

static cudaStream_t stream_of(nn_ctx *ctx)
{
	return nn_cuda_dev_of(ctx)->stream;
}

static int prec_of(const nn_ctx *ctx)
{
	return ctx->precision;
}

int nn_cuda_relu_forward(nn_ctx *ctx, size_t count, const void *x, void *y,
			 ims_error *err)
{
	CUDA_CHECK(err, "run relu on cuda",
		   nn_cuda_k_relu_forward(stream_of(ctx), prec_of(ctx), count,
					  x, y));
	return 0;
}

int nn_cuda_relu_backward(nn_ctx *ctx, size_t count, const void *y,
			  const void *dy, void *dx, ims_error *err)
{
	if (!dx)
		return 0;
	CUDA_CHECK(err, "backpropagate relu on cuda",
		   nn_cuda_k_relu_backward(stream_of(ctx), prec_of(ctx), count,
					   y, dy, dx, ctx->dx_overwrite));
	return 0;
}

int nn_cuda_maxpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
			    const void *x, void *y, int32_t *argmax,
			    ims_error *err)
{
	FORWARD_IF_ERR(nn_maxpool_check_desc(d, "max-pool", err));
	FORWARD_IF_ERR(nn_layout_check(d->nhwc, "max-pool", err));
	CUDA_CHECK(err, "max-pool on cuda",
		   nn_cuda_k_maxpool_forward(stream_of(ctx), prec_of(ctx), d, x,
					     y, argmax));
	return 0;
}

int nn_cuda_maxpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			     const int32_t *argmax, const void *dy, void *dx,
			     ims_error *err)
{
	FORWARD_IF_ERR(nn_maxpool_check_desc(d, "backpropagate max-pool", err));
	FORWARD_IF_ERR(nn_layout_check(d->nhwc, "backpropagate max-pool",
				       err));
	if (!dx)
		return 0;
	CUDA_CHECK(err, "backpropagate max-pool on cuda",
		   nn_cuda_k_maxpool_backward(stream_of(ctx), prec_of(ctx), d,
					      argmax, dy, dx,
					      ctx->dx_overwrite));
	return 0;
}

int nn_cuda_avgpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
			    const void *x, void *y, ims_error *err)
{
	FORWARD_IF_ERR(nn_avgpool_check_desc(d, "average-pool", err));
	FORWARD_IF_ERR(nn_layout_check(d->nhwc, "average-pool", err));
	CUDA_CHECK(err, "average-pool on cuda",
		   nn_cuda_k_avgpool_forward(stream_of(ctx), prec_of(ctx), d, x,
					     y));
	return 0;
}

int nn_cuda_avgpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			     const void *dy, void *dx, ims_error *err)
{
	FORWARD_IF_ERR(nn_avgpool_check_desc(d, "backpropagate average-pool",
					     err));
	FORWARD_IF_ERR(nn_layout_check(d->nhwc,
				       "backpropagate average-pool", err));
	if (!dx)
		return 0;
	CUDA_CHECK(err, "backpropagate average-pool on cuda",
		   nn_cuda_k_avgpool_backward(stream_of(ctx), prec_of(ctx), d,
					      dy, dx, ctx->dx_overwrite));
	return 0;
}

static int check_p(float p, const char *what, ims_error *err)
{
	RETURN_IF(!(p >= 0.0f && p < 1.0f), err, IMS_EINVAL,
		  "cannot %s: probability %g is outside [0, 1)", what, (double)p);
	return 0;
}

int nn_cuda_dropout_forward(nn_ctx *ctx, size_t count, float p,
			    uint64_t seed, const nn_dropout_place *at,
			    const void *x, void *y, uint8_t *mask,
			    ims_error *err)
{
	FORWARD_IF_ERR(check_p(p, "apply dropout", err));
	FORWARD_IF_ERR(nn_dropout_check_place(at, count, "apply dropout", err));
	const nn_dropout_place one = {count, 0, 1};
	if (!at)
		at = &one;
	/* the CPU's scale, computed the CPU's way */
	const float scale = 1.0f / (1.0f - p);
	CUDA_CHECK(err, "apply dropout on cuda",
		   nn_cuda_k_dropout_forward(stream_of(ctx), prec_of(ctx), count,
					     p, scale, seed, at->per_sample,
					     at->rank, at->world, x, y, mask));
	return 0;
}

int nn_cuda_dropout_backward(nn_ctx *ctx, size_t count, float p,
			     const uint8_t *mask, const void *dy, void *dx,
			     ims_error *err)
{
	static const char what[] = "backpropagate dropout";
	FORWARD_IF_ERR(check_p(p, what, err));
	if (!dx)
		return 0;
	RETURN_IF(p != 0.0f && !mask, err, IMS_EINVAL, "cannot %s: no mask",
		  what);
	const float scale = 1.0f / (1.0f - p);
	CUDA_CHECK(err, "backpropagate dropout on cuda",
		   nn_cuda_k_dropout_backward(stream_of(ctx), prec_of(ctx),
					      count, scale,
					      p == 0.0f ? NULL : mask, dy, dx,
					      ctx->dx_overwrite));
	return 0;
}

int nn_cuda_add_forward(nn_ctx *ctx, size_t count, const void *a,
			const void *b, void *y, ims_error *err)
{
	CUDA_CHECK(err, "add on cuda",
		   nn_cuda_k_add(stream_of(ctx), prec_of(ctx), count, a, b, y,
				 0));
	return 0;
}

int nn_cuda_add_relu_forward(nn_ctx *ctx, size_t count, const void *a,
			     const void *b, void *y, ims_error *err)
{
	CUDA_CHECK(err, "add and relu on cuda",
		   nn_cuda_k_add(stream_of(ctx), prec_of(ctx), count, a, b, y,
				 1));
	return 0;
}

int nn_cuda_accumulate(nn_ctx *ctx, size_t count, const void *dy, void *dx,
		       ims_error *err)
{
	if (!dx || !count)
		return 0;
	if (ctx->dx_overwrite) {
		if (dx != dy)
			CUDA_CHECK(err, "copy a gradient on cuda",
				   cudaMemcpyAsync(dx, dy,
						   count * nn_act_bytes(ctx->precision),
						   cudaMemcpyDeviceToDevice,
						   stream_of(ctx)));
		return 0;
	}
	CUDA_CHECK(err, "accumulate a gradient on cuda",
		   nn_cuda_k_accumulate(stream_of(ctx), prec_of(ctx), count, dy,
					dx));
	return 0;
}

/* fp32: a copy (the model does not call these then; tests may) */
static int copy_f32(nn_ctx *ctx, const char *what, size_t count,
		    const void *src, void *dst, ims_error *err)
{
	if (dst != src)
		CUDA_CHECK(err, what,
			   cudaMemcpyAsync(dst, src, count * sizeof(float),
					   cudaMemcpyDeviceToDevice,
					   stream_of(ctx)));
	return 0;
}

int nn_cuda_act_from_f32(nn_ctx *ctx, size_t count, const float *src,
			 void *dst, ims_error *err)
{
	static const char what[] = "convert to the activation type on cuda";
	FORWARD_IF_ERR(nn_cuda_check_precision(ctx, what, err));
	if (!count)
		return 0;
	if (ctx->precision == NN_PREC_FP32)
		return copy_f32(ctx, what, count, src, dst, err);
	CUDA_CHECK(err, what,
		   nn_cuda_k_to_half(stream_of(ctx), ctx->precision, count, src,
				     dst));
	return 0;
}

int nn_cuda_act_from_f32_nhwc(nn_ctx *ctx, int n, int c, size_t hw,
			      const float *src, void *dst, ims_error *err)
{
	static const char what[] =
		"convert to the activation type channels-last on cuda";
	FORWARD_IF_ERR(nn_cuda_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(1, what, err));
	RETURN_IF(n < 0 || c < 1 || (n && (!src || !dst)), err, IMS_EINVAL,
		  "cannot %s: %d x %d x %zu values", what, n, c, hw);
	CUDA_CHECK(err, what,
		   nn_cuda_k_to_half_nhwc(stream_of(ctx), ctx->precision, n, c,
					  hw, src, dst));
	return 0;
}

int nn_cuda_act_to_f32(nn_ctx *ctx, size_t count, const void *src, float *dst,
		       ims_error *err)
{
	static const char what[] = "convert from the activation type on cuda";
	FORWARD_IF_ERR(nn_cuda_check_precision(ctx, what, err));
	if (!count)
		return 0;
	if (ctx->precision == NN_PREC_FP32)
		return copy_f32(ctx, what, count, src, dst, err);
	CUDA_CHECK(err, what,
		   nn_cuda_k_from_half(stream_of(ctx), ctx->precision, count, src,
				       dst, 0));
	return 0;
}

int nn_cuda_softmax_xent(nn_ctx *ctx, int n, int k, const float *logits,
			 const int32_t *labels, float smoothing, float scale,
			 double *loss_sum, float *dlogits, ims_error *err)
{
	static const char what[] = "compute the cross-entropy loss";
	FORWARD_IF_ERR(nn_xent_check(n, k, smoothing, err));
	void *ws = nn_cuda_workspace(ctx, nn_cuda_k_xent_workspace(n), err);
	if (!ws)
		return ims_fail_context(err, "cannot %s", what);
	nn_cuda_xent_result res;
	CUDA_CHECK(err, "compute the cross-entropy loss on cuda",
		   nn_cuda_k_xent(stream_of(ctx), n, k, logits, labels,
				  smoothing, scale, dlogits, ws, &res));
	RETURN_IF(res.bad_sample >= 0, err, IMS_EINVAL,
		  "cannot %s: sample %d has label %d, outside [0, %d)", what,
		  (int)res.bad_sample, (int)res.bad_label, k);
	if (loss_sum)
		*loss_sum = res.loss_sum;
	return 0;
}

int nn_cuda_xent_tally(nn_ctx *ctx, int n, int k, const float *logits,
		       const int32_t *labels, float smoothing, float scale,
		       float *dlogits, int64_t step, nn_tally *tally,
		       ims_error *err)
{
	FORWARD_IF_ERR(nn_xent_check(n, k, smoothing, err));
	void *ws = nn_cuda_workspace(ctx, nn_cuda_k_xent_tally_workspace(n), err);
	if (!ws)
		return ims_fail_context(err, "cannot compute the cross-entropy loss");
	CUDA_CHECK(err, "compute the cross-entropy loss on cuda",
		   nn_cuda_k_xent_tally(stream_of(ctx), n, k, logits, labels,
					smoothing, scale, dlogits, step, ws,
					tally));
	return 0;
}
