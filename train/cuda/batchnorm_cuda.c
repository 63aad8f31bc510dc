/*
 * batchnorm_cuda.c - 2-D batch normalisation on the device: cuDNN's
 * spatial batch norm (training forward, inference forward, training
 * backward) and an own kernel for the frozen backward (reduce.cu), which
 * cuDNN does not have.
 *
 * cuDNN's semantics are the CPU's (train/layers/batchnorm.c): statistics
 * per channel over (N, H, W); running = (1 - momentum) running + momentum
 * batch, the running variance taking the unbiased batch variance; the
 * saved statistics are the batch mean and 1/sqrt(var + eps) of the biased
 * variance, so either backend's backward takes the other's. cuDNN computes
 * the statistics in fp32, the CPU in double with a centring correction:
 * they agree to about 1e-6 relative unless |mean| >> std.
 *
 * Channels-last (d->nhwc): own kernels (bn_nhwc.cu; cuDNN's batch norm
 * reads an NHWC tensor a channel at a time, 50x slower), with workspace
 * reserved at plan time (nn_cuda_bn_prepare); the frozen kernel sees the
 * tensor as n*h*w 1x1 images.
 *
 * Mixed precision: x, y, dx and dy are of the 16-bit activation type
 * (the tensor descriptor says so); the parameters, the running and saved
 * statistics and dgamma/dbeta stay fp32 (cudnnDeriveBNTensorDescriptor
 * makes their descriptor fp32), and cuDNN computes the statistics in
 * fp32.
 *
 * Blending: the forwards overwrite y; the backward adds into dx (data
 * beta 1) or overwrites it with ctx->dx_overwrite (beta 0, dx not read),
 * and overwrites dgamma and dbeta (parameter beta 0). cuDNN always writes
 * all three, so a NULL one is pointed at workspace.
 */
#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"

/* x_desc: the activation; bn_desc: its 1xCx1x1 parameter shape. */
static int set_descs(nn_ctx *ctx, const nn_bn_desc *d, ims_error *err)
{
	static const char what[] = "describe a batch norm to cuDNN";
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	FORWARD_IF_ERR(nn_cuda_check_precision(ctx, "batch-normalise", err));
	FORWARD_IF_ERR(nn_layout_check(d->nhwc, "batch-normalise", err));
	const cudnnDataType_t t = ctx->precision == NN_PREC_BF16
					  ? CUDNN_DATA_BFLOAT16
				  : ctx->precision == NN_PREC_FP16
					  ? CUDNN_DATA_HALF
					  : CUDNN_DATA_FLOAT;
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->x_desc,
					       d->nhwc ? CUDNN_TENSOR_NHWC
						       : CUDNN_TENSOR_NCHW,
					       t, d->n, d->c, d->h, d->w));
	CUDNN_CHECK(err, what,
		    cudnnDeriveBNTensorDescriptor(dev->bn_desc, dev->x_desc,
						  CUDNN_BATCHNORM_SPATIAL));
	return 0;
}

static size_t rows(const nn_bn_desc *d)
{
	return (size_t)d->n * d->h * d->w;
}

/* NCHW: the fused ReLU as the ReLU layer runs it, in place */
static int fused_relu(nn_ctx *ctx, const nn_bn_desc *d, void *y,
		      ims_error *err)
{
	if (!d->relu)
		return 0;
	CUDA_CHECK(err, "batch-normalise on cuda",
		   nn_cuda_k_relu_forward(nn_cuda_dev_of(ctx)->stream,
					  ctx->precision,
					  rows(d) * (size_t)d->c, y, y));
	return 0;
}

int nn_cuda_bn_prepare(nn_ctx *ctx, const nn_bn_desc *d, ims_error *err)
{
	FORWARD_IF_ERR(nn_bn_check_desc(d, "prepare a batch norm", err));
	if (d->nhwc)
		nn_cuda_reserve(ctx, nn_cuda_k_bn_nhwc_workspace(rows(d), d->c));
	return 0;
}

int nn_cuda_bn_forward_train(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			     const float *gamma, const float *beta,
			     float *running_mean, float *running_var,
			     float *save_mean, float *save_invstd, void *y,
			     ims_error *err)
{
	static const char what[] = "batch-normalise (training)";
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	RETURN_IF(!(d->momentum >= 0.0f && d->momentum <= 1.0f), err,
		  IMS_EINVAL, "cannot %s: momentum %g is outside [0, 1]", what,
		  (double)d->momentum);
	const size_t m = (size_t)d->n * d->h * d->w;
	RETURN_IF(m < 2, err, IMS_EINVAL,
		  "cannot %s: expected more than 1 value per channel, got "
		  "N=%d, H=%d, W=%d",
		  what, d->n, d->h, d->w);
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	if (d->nhwc) {
		FORWARD_IF_ERR(nn_cuda_check_precision(ctx, what, err));
		FORWARD_IF_ERR(nn_layout_check(d->nhwc, what, err));
		void *ws = nn_cuda_workspace(
			ctx, nn_cuda_k_bn_nhwc_workspace(m, d->c), err);
		if (!ws)
			return ims_fail_context(err, "cannot %s", what);
		CUDA_CHECK(err, "batch-normalise (training) on cuda",
			   nn_cuda_k_bn_nhwc_forward_train(
				   dev->stream, ctx->precision, m, d->c, d->eps,
				   d->momentum, x, gamma, beta, running_mean,
				   running_var, save_mean, save_invstd, y, d->relu,
				   ws));
		return 0;
	}
	const float one = 1.0f, zero = 0.0f;
	FORWARD_IF_ERR(set_descs(ctx, d, err));
	CUDNN_CHECK(err, "batch-normalise (training) on cuda",
		    cudnnBatchNormalizationForwardTraining(
			    dev->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
			    dev->x_desc, x, dev->x_desc, y, dev->bn_desc, gamma,
			    beta, (double)d->momentum, running_mean,
			    running_var, (double)d->eps, save_mean,
			    save_invstd));
	return fused_relu(ctx, d, y, err);
}

int nn_cuda_bn_forward_eval(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			    const float *gamma, const float *beta,
			    const float *running_mean,
			    const float *running_var, void *y, ims_error *err)
{
	static const char what[] = "batch-normalise (evaluation)";
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	if (d->nhwc) {
		FORWARD_IF_ERR(nn_cuda_check_precision(ctx, what, err));
		FORWARD_IF_ERR(nn_layout_check(d->nhwc, what, err));
		CUDA_CHECK(err, "batch-normalise (evaluation) on cuda",
			   nn_cuda_k_bn_nhwc_forward_eval(
				   dev->stream, ctx->precision, rows(d), d->c,
				   d->eps, x, gamma, beta, running_mean,
				   running_var, y, d->relu));
		return 0;
	}
	const float one = 1.0f, zero = 0.0f;
	FORWARD_IF_ERR(set_descs(ctx, d, err));
	CUDNN_CHECK(err, "batch-normalise (evaluation) on cuda",
		    cudnnBatchNormalizationForwardInference(
			    dev->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
			    dev->x_desc, x, dev->x_desc, y, dev->bn_desc, gamma,
			    beta, running_mean, running_var, (double)d->eps));
	FORWARD_IF_ERR(fused_relu(ctx, d, y, err));
	return 0;
}

int nn_cuda_bn_backward(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			const float *gamma, const float *save_mean,
			const float *save_invstd, const void *dy, void *dx,
			float *dgamma, float *dbeta, ims_error *err)
{
	static const char what[] = "backpropagate batch-norm";
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	if (!dx && !dgamma && !dbeta)
		return 0;
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	if (d->nhwc) {
		FORWARD_IF_ERR(nn_cuda_check_precision(ctx, what, err));
		FORWARD_IF_ERR(nn_layout_check(d->nhwc, what, err));
		void *ws = nn_cuda_workspace(
			ctx, nn_cuda_k_bn_nhwc_workspace(rows(d), d->c), err);
		if (!ws)
			return ims_fail_context(err, "cannot %s", what);
		CUDA_CHECK(err, "backpropagate batch-norm on cuda",
			   nn_cuda_k_bn_nhwc_backward(
				   dev->stream, ctx->precision, rows(d), d->c, x,
				   gamma, save_mean, save_invstd, dy, dx, dgamma,
				   dbeta, ctx->dx_overwrite, ws));
		return 0;
	}
	/* stand-ins for the outputs the caller does not want */
	const size_t count = (size_t)d->n * d->c * d->h * d->w;
	const size_t dx_bytes =
		dx ? 0 : nn_cuda_round256(count * nn_act_bytes(ctx->precision));
	const size_t c_bytes = nn_cuda_round256((size_t)d->c * sizeof(float));
	const size_t need = dx_bytes + (dgamma ? 0 : c_bytes) +
			    (dbeta ? 0 : c_bytes);
	if (need) {
		char *ws = nn_cuda_workspace(ctx, need, err);
		if (!ws)
			return ims_fail_context(err, "cannot %s", what);
		if (!dx)
			dx = ws;
		ws += dx_bytes;
		if (!dgamma) {
			dgamma = (float *)ws;
			ws += c_bytes;
		}
		if (!dbeta)
			dbeta = (float *)ws;
	}
	const float one = 1.0f, zero = 0.0f;
	/* a stand-in dx is never read: beta 0 */
	const float *data_beta = dx_bytes || ctx->dx_overwrite ? &zero : &one;
	FORWARD_IF_ERR(set_descs(ctx, d, err));
	CUDNN_CHECK(err, "backpropagate batch-norm on cuda",
		    cudnnBatchNormalizationBackward(
			    dev->cudnn, CUDNN_BATCHNORM_SPATIAL, &one,
			    data_beta, &one, &zero, dev->x_desc, x,
			    dev->x_desc, dy, dev->x_desc, dx, dev->bn_desc,
			    gamma, dgamma, dbeta, (double)d->eps, save_mean,
			    save_invstd));
	return 0;
}

int nn_cuda_bn_backward_frozen(nn_ctx *ctx, const nn_bn_desc *d,
			       const void *x, const float *gamma,
			       const float *running_mean,
			       const float *running_var, const void *dy,
			       void *dx, float *dgamma, float *dbeta,
			       ims_error *err)
{
	static const char what[] = "backpropagate frozen batch-norm";
	FORWARD_IF_ERR(nn_bn_check_desc(d, what, err));
	FORWARD_IF_ERR(nn_cuda_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d->nhwc, what, err));
	if (!dx && !dgamma && !dbeta)
		return 0;
	/* the kernel reads NCHW; channels-last is n*h*w 1x1 "images" of c
	 * channels, the same statistics over the same values */
	nn_bn_desc k = *d;
	if (d->nhwc) {
		k.n = d->n * d->h * d->w;
		k.h = k.w = 1;
		k.nhwc = 0;
	}
	CUDA_CHECK(err, "backpropagate frozen batch-norm on cuda",
		   nn_cuda_k_bn_frozen_backward(
			   nn_cuda_dev_of(ctx)->stream, ctx->precision, &k, x, gamma,
			   running_mean, running_var, dy, dx, dgamma, dbeta,
			   ctx->dx_overwrite));
	return 0;
}
