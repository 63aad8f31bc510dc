/*
 * conv_cuda.c - 2-D convolution on the device through cuDNN (fp32, NCHW,
 * PyTorch's Conv2d: cross-correlation, groups, dilation), and the bias
 * gradient by an own reduction (reduce.cu).
 *
 * Algorithms: for each shape (the whole descriptor, batch size included)
 * cuDNN's heuristics (cudnnGet*Algorithm_v7, which runs nothing on the
 * device) rank its algorithms once; we take the best one that is
 * deterministic (the interface promises the same bits for the same
 * inputs) and needs at most NN_CUDA_WS_MAX of workspace, preferring
 * those it ranks as plain fp32 (CUDNN_FMA_MATH). Every call runs with
 * CUDNN_FMA_MATH set on the descriptor whatever the ranking said (as
 * PyTorch does with TF32 off), so no algorithm rounds inputs to TF32 on
 * Ampere and later; one that cannot run that way fails with cuDNN's
 * message. The choice and its workspace size (asked with FMA math set)
 * are cached in the context; the workspace itself is the context's,
 * grown to the largest need seen.
 *
 * Blending: forward writes y (beta 0), then adds the bias (cudnnAddTensor);
 * backward-data adds into dx (beta 1) or overwrites it with
 * ctx->dx_overwrite (beta 0: cuDNN then does not read dx, so NaN there
 * does no harm); backward-filter overwrites dw.
 */
#include <stdlib.h>
#include <string.h>

#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"

/* More than any cuDNN 9 reports for one direction (8, 6, 7). */
#define ALGO_SLOTS 16

static int set_descs(nn_cuda_dev *dev, const nn_conv_desc *d, ims_error *err)
{
	static const char what[] = "describe a convolution to cuDNN";
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->x_desc, CUDNN_TENSOR_NCHW,
					       CUDNN_DATA_FLOAT, d->n, d->c_in,
					       d->h_in, d->w_in));
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->y_desc, CUDNN_TENSOR_NCHW,
					       CUDNN_DATA_FLOAT, d->n, d->c_out,
					       d->h_out, d->w_out));
	CUDNN_CHECK(err, what,
		    cudnnSetFilter4dDescriptor(dev->w_desc, CUDNN_DATA_FLOAT,
					       CUDNN_TENSOR_NCHW, d->c_out,
					       d->c_in / d->groups, d->kh,
					       d->kw));
	CUDNN_CHECK(err, what,
		    cudnnSetConvolution2dDescriptor(
			    dev->conv_desc, d->pad_h, d->pad_w, d->stride_h,
			    d->stride_w, d->dil_h, d->dil_w,
			    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
	CUDNN_CHECK(err, what,
		    cudnnSetConvolutionGroupCount(dev->conv_desc, d->groups));
	CUDNN_CHECK(err, what,
		    cudnnSetConvolutionMathType(dev->conv_desc, CUDNN_FMA_MATH));
	int n, c, h, w;
	CUDNN_CHECK(err, what,
		    cudnnGetConvolution2dForwardOutputDim(dev->conv_desc,
							  dev->x_desc,
							  dev->w_desc, &n, &c,
							  &h, &w));
	RETURN_IF(n != d->n || c != d->c_out || h != d->h_out || w != d->w_out,
		  err, IMS_EINVAL,
		  "cannot run a convolution on cuda: cuDNN makes the output "
		  "%dx%dx%dx%d, the descriptor says %dx%dx%dx%d",
		  n, c, h, w, d->n, d->c_out, d->h_out, d->w_out);
	return 0;
}

/*
 * The index of the first usable entry of perf[0..count): status success,
 * deterministic, workspace within bounds; on the first pass ranked as FMA
 * math, on the second any math but fp16 conversion; -1 when none.
 */
#define PICK_ALGO(perf, count, pick)                                           \
	do {                                                                   \
		(pick) = -1;                                                   \
		for (int pass_ = 0; pass_ < 2 && (pick) < 0; pass_++)          \
			for (int i_ = 0; i_ < (count) && (pick) < 0; i_++)     \
				if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && \
				    (perf)[i_].determinism ==                  \
					    CUDNN_DETERMINISTIC &&             \
				    (perf)[i_].memory <= NN_CUDA_WS_MAX &&     \
				    ((perf)[i_].mathType == CUDNN_FMA_MATH ||  \
				     (pass_ && (perf)[i_].mathType !=          \
						       CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))) \
					(pick) = i_;                           \
	} while (0)

static int no_algo(ims_error *err, const char *dir, const nn_conv_desc *d)
{
	return ims_fail(err, IMS_EUNSUPPORTED,
			"cannot run a convolution on cuda: cuDNN offers no "
			"deterministic fp32 %s algorithm for %dx%dx%dx%d -> %d "
			"channels, kernel %dx%d, stride %dx%d, groups %d",
			dir, d->n, d->c_in, d->h_in, d->w_in, d->c_out, d->kh,
			d->kw, d->stride_h, d->stride_w, d->groups);
}

/* Ranks and picks the three algorithms of one shape (descriptors set). */
static int choose(nn_cuda_dev *dev, const nn_conv_desc *d,
		  nn_cuda_conv_algo *a, ims_error *err)
{
	static const char what[] = "choose convolution algorithms";
	cudnnHandle_t h = dev->cudnn;
	int got = 0, pick;
	memset(a, 0, sizeof(*a));
	a->key = *d;

	cudnnConvolutionFwdAlgoPerf_t fwd[ALGO_SLOTS];
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionForwardAlgorithm_v7(
			    h, dev->x_desc, dev->w_desc, dev->conv_desc,
			    dev->y_desc, ALGO_SLOTS, &got, fwd));
	PICK_ALGO(fwd, got, pick);
	if (pick < 0)
		return no_algo(err, "forward", d);
	a->fwd = fwd[pick].algo;
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionForwardWorkspaceSize(
			    h, dev->x_desc, dev->w_desc, dev->conv_desc,
			    dev->y_desc, a->fwd, &a->fwd_bytes));

	cudnnConvolutionBwdDataAlgoPerf_t data[ALGO_SLOTS];
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionBackwardDataAlgorithm_v7(
			    h, dev->w_desc, dev->y_desc, dev->conv_desc,
			    dev->x_desc, ALGO_SLOTS, &got, data));
	PICK_ALGO(data, got, pick);
	if (pick < 0)
		return no_algo(err, "backward-data", d);
	a->bwd_data = data[pick].algo;
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionBackwardDataWorkspaceSize(
			    h, dev->w_desc, dev->y_desc, dev->conv_desc,
			    dev->x_desc, a->bwd_data, &a->data_bytes));

	cudnnConvolutionBwdFilterAlgoPerf_t filt[ALGO_SLOTS];
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionBackwardFilterAlgorithm_v7(
			    h, dev->x_desc, dev->y_desc, dev->conv_desc,
			    dev->w_desc, ALGO_SLOTS, &got, filt));
	PICK_ALGO(filt, got, pick);
	if (pick < 0)
		return no_algo(err, "backward-filter", d);
	a->bwd_filter = filt[pick].algo;
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionBackwardFilterWorkspaceSize(
			    h, dev->x_desc, dev->y_desc, dev->conv_desc,
			    dev->w_desc, a->bwd_filter, &a->filter_bytes));
	return 0;
}

/* The cached algorithms of d's shape, choosing them the first time
 * (descriptors set). */
static int algos_for(nn_cuda_dev *dev, const nn_conv_desc *d,
		     const nn_cuda_conv_algo **out, ims_error *err)
{
	for (int i = 0; i < dev->n_algos; i++)
		if (!memcmp(&dev->algos[i].key, d, sizeof(*d))) {
			*out = &dev->algos[i];
			return 0;
		}
	if (dev->n_algos == dev->cap_algos) {
		int cap = dev->cap_algos ? 2 * dev->cap_algos : 32;
		void *p = realloc(dev->algos, (size_t)cap * sizeof(*dev->algos));
		RETURN_IF(!p, err, IMS_ENOMEM,
			  "cannot run a convolution on cuda: out of memory");
		dev->algos = p;
		dev->cap_algos = cap;
	}
	nn_cuda_conv_algo *a = &dev->algos[dev->n_algos];
	FORWARD_IF_ERR(choose(dev, d, a, err));
	dev->n_algos++;
	*out = a;
	return 0;
}

void nn_cuda_conv_release(nn_cuda_dev *dev)
{
	free(dev->algos);
	dev->algos = NULL;
	dev->n_algos = dev->cap_algos = 0;
}

/* bytes of workspace, or NULL for none (no allocation) */
static int workspace(nn_ctx *ctx, size_t bytes, void **ws, ims_error *err)
{
	*ws = NULL;
	if (!bytes)
		return 0;
	*ws = nn_cuda_workspace(ctx, bytes, err);
	return *ws ? 0 : ims_fail_context(err, "cannot run a convolution");
}

int nn_cuda_conv_forward(nn_ctx *ctx, const nn_conv_desc *d, const float *x,
			 const float *w, const float *b, float *y,
			 ims_error *err)
{
	static const char what[] = "run a convolution on cuda";
	FORWARD_IF_ERR(nn_conv_check_desc(d, "run a convolution", err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a convolution: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const nn_cuda_conv_algo *a;
	void *ws;
	const float one = 1.0f, zero = 0.0f;
	FORWARD_IF_ERR(set_descs(dev, d, err));
	FORWARD_IF_ERR(algos_for(dev, d, &a, err));
	FORWARD_IF_ERR(workspace(ctx, a->fwd_bytes, &ws, err));
	CUDNN_CHECK(err, what,
		    cudnnConvolutionForward(dev->cudnn, &one, dev->x_desc, x,
					    dev->w_desc, w, dev->conv_desc,
					    a->fwd, ws, a->fwd_bytes, &zero,
					    dev->y_desc, y));
	if (d->bias) {
		CUDNN_CHECK(err, what,
			    cudnnSetTensor4dDescriptor(dev->bias_desc,
						       CUDNN_TENSOR_NCHW,
						       CUDNN_DATA_FLOAT, 1,
						       d->c_out, 1, 1));
		CUDNN_CHECK(err, what,
			    cudnnAddTensor(dev->cudnn, &one, dev->bias_desc, b,
					   &one, dev->y_desc, y));
	}
	return 0;
}

int nn_cuda_conv_backward(nn_ctx *ctx, const nn_conv_desc *d, const float *x,
			  const float *w, const float *dy, float *dx,
			  float *dw, float *db, ims_error *err)
{
	static const char what[] = "run a convolution backward on cuda";
	FORWARD_IF_ERR(nn_conv_check_desc(d, "run a convolution backward", err));
	if (!d->bias)
		db = NULL;
	RETURN_IF(!dy || (dw && !x) || (dx && !w), err, IMS_EINVAL,
		  "cannot run a convolution backward: missing %s",
		  !dy ? "output gradient" : dw && !x ? "input" : "weights");
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	if (db)
		CUDA_CHECK(err, what,
			   nn_cuda_k_channel_sum(dev->stream, d->n, d->c_out,
						 (size_t)d->h_out * d->w_out,
						 dy, db));
	if (!dx && !dw)
		return 0;
	const nn_cuda_conv_algo *a;
	void *ws;
	const float one = 1.0f, zero = 0.0f;
	FORWARD_IF_ERR(set_descs(dev, d, err));
	FORWARD_IF_ERR(algos_for(dev, d, &a, err));
	size_t need = 0;
	if (dw && a->filter_bytes > need)
		need = a->filter_bytes;
	if (dx && a->data_bytes > need)
		need = a->data_bytes;
	FORWARD_IF_ERR(workspace(ctx, need, &ws, err));
	if (dw) {
		CUDNN_CHECK(err, what,
			    cudnnConvolutionBackwardFilter(
				    dev->cudnn, &one, dev->x_desc, x,
				    dev->y_desc, dy, dev->conv_desc,
				    a->bwd_filter, ws, a->filter_bytes, &zero,
				    dev->w_desc, dw));
	}
	if (dx) {
		CUDNN_CHECK(err, what,
			    cudnnConvolutionBackwardData(
				    dev->cudnn, &one, dev->w_desc, w,
				    dev->y_desc, dy, dev->conv_desc,
				    a->bwd_data, ws, a->data_bytes,
				    ctx->dx_overwrite ? &zero : &one,
				    dev->x_desc, dx));
	}
	return 0;
}
