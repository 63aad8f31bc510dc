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
 *
 * Mixed precision (ctx->precision bf16 or fp16): cuDNN's convolutions
 * take x, w and y (dx, dw, dy) of one type, so x, w and dy are rounded
 * into 16-bit copies in the workspace (half.cu), cuDNN runs on those with
 * the convolution descriptor's compute type CUDNN_DATA_FLOAT (the
 * documented PSEUDO_HALF_CONFIG / PSEUDO_BFLOAT16_CONFIG: fp32
 * accumulation) into a 16-bit result, and that is widened into the fp32
 * tensor: y and dw overwritten, dx added to or overwritten as above. The
 * bias and its gradient stay fp32. Algorithms are chosen per precision
 * (the cache key holds it) with the descriptor's math type set to
 * CUDNN_TENSOR_OP_MATH, preferring those cuDNN ranks as tensor-op math,
 * still deterministic only; each then runs with the math type it was
 * ranked with, as PyTorch does.
 */
#include <stdlib.h>
#include <string.h>

#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"

/* More than any cuDNN 9 reports for one direction (8, 6, 7). */
#define ALGO_SLOTS 16

/* cuDNN's type for the tensors of a convolution in `precision` */
static cudnnDataType_t data_type(int precision)
{
	return precision == NN_PREC_BF16   ? CUDNN_DATA_BFLOAT16
	       : precision == NN_PREC_FP16 ? CUDNN_DATA_HALF
					   : CUDNN_DATA_FLOAT;
}

static const char *precision_name(int precision)
{
	return precision == NN_PREC_BF16   ? "bf16"
	       : precision == NN_PREC_FP16 ? "fp16"
					   : "fp32";
}

/* x, y and w described with `precision`'s type; the convolution computes
 * in fp32 whatever the tensors are */
static int set_descs(nn_cuda_dev *dev, const nn_conv_desc *d, int precision,
		     ims_error *err)
{
	static const char what[] = "describe a convolution to cuDNN";
	const cudnnDataType_t t = data_type(precision);
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->x_desc, CUDNN_TENSOR_NCHW,
					       t, d->n, d->c_in, d->h_in,
					       d->w_in));
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->y_desc, CUDNN_TENSOR_NCHW,
					       t, d->n, d->c_out, d->h_out,
					       d->w_out));
	CUDNN_CHECK(err, what,
		    cudnnSetFilter4dDescriptor(dev->w_desc, t,
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
		    cudnnSetConvolutionMathType(dev->conv_desc,
						precision == NN_PREC_FP32
							? CUDNN_FMA_MATH
							: CUDNN_TENSOR_OP_MATH));
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
 * deterministic, workspace within bounds; on the first pass ranked with
 * math type `first` (FMA in fp32, tensor-op math in 16 bits), on the
 * second any math but ALLOW_CONVERSION (a conversion of fp32 data to 16
 * bits in fp32, and 16-bit data needs none); -1 when none.
 */
#define PICK_ALGO(perf, count, first, pick)                                    \
	do {                                                                   \
		(pick) = -1;                                                   \
		for (int pass_ = 0; pass_ < 2 && (pick) < 0; pass_++)          \
			for (int i_ = 0; i_ < (count) && (pick) < 0; i_++)     \
				if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && \
				    (perf)[i_].determinism ==                  \
					    CUDNN_DETERMINISTIC &&             \
				    (perf)[i_].memory <= NN_CUDA_WS_MAX &&     \
				    ((perf)[i_].mathType == (first) ||         \
				     (pass_ && (perf)[i_].mathType !=          \
						       CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))) \
					(pick) = i_;                           \
	} while (0)

static int no_algo(ims_error *err, const char *dir, const nn_conv_desc *d,
		   int precision)
{
	return ims_fail(err, IMS_EUNSUPPORTED,
			"cannot run a convolution on cuda: cuDNN offers no "
			"deterministic %s %s algorithm for %dx%dx%dx%d -> %d "
			"channels, kernel %dx%d, stride %dx%d, groups %d",
			precision_name(precision), dir, d->n, d->c_in, d->h_in,
			d->w_in, d->c_out, d->kh, d->kw, d->stride_h,
			d->stride_w, d->groups);
}

/* The math type a picked algorithm runs with: FMA in fp32 (never TF32),
 * in 16 bits the one cuDNN ranked it with. */
static cudnnMathType_t run_math(int precision, cudnnMathType_t ranked)
{
	return precision == NN_PREC_FP32 ? CUDNN_FMA_MATH : ranked;
}

/* Sets the descriptor's math type for one direction's call. */
static int set_math(nn_cuda_dev *dev, cudnnMathType_t m, ims_error *err)
{
	CUDNN_CHECK(err, "describe a convolution to cuDNN",
		    cudnnSetConvolutionMathType(dev->conv_desc, m));
	return 0;
}

/* Ranks and picks the three algorithms of one shape in one precision
 * (descriptors set for it). */
static int choose(nn_cuda_dev *dev, const nn_conv_desc *d, int precision,
		  nn_cuda_conv_algo *a, ims_error *err)
{
	static const char what[] = "choose convolution algorithms";
	const int half = precision != NN_PREC_FP32;
	const cudnnMathType_t rank_math =
		half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
	cudnnHandle_t h = dev->cudnn;
	int got = 0, pick;
	memset(a, 0, sizeof(*a));
	a->key = *d;
	a->precision = precision;

	cudnnConvolutionFwdAlgoPerf_t fwd[ALGO_SLOTS];
	FORWARD_IF_ERR(set_math(dev, rank_math, err));
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionForwardAlgorithm_v7(
			    h, dev->x_desc, dev->w_desc, dev->conv_desc,
			    dev->y_desc, ALGO_SLOTS, &got, fwd));
	PICK_ALGO(fwd, got, rank_math, pick);
	if (pick < 0)
		return no_algo(err, "forward", d, precision);
	a->fwd = fwd[pick].algo;
	a->fwd_math = run_math(precision, fwd[pick].mathType);
	FORWARD_IF_ERR(set_math(dev, a->fwd_math, err));
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionForwardWorkspaceSize(
			    h, dev->x_desc, dev->w_desc, dev->conv_desc,
			    dev->y_desc, a->fwd, &a->fwd_bytes));

	cudnnConvolutionBwdDataAlgoPerf_t data[ALGO_SLOTS];
	FORWARD_IF_ERR(set_math(dev, rank_math, err));
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionBackwardDataAlgorithm_v7(
			    h, dev->w_desc, dev->y_desc, dev->conv_desc,
			    dev->x_desc, ALGO_SLOTS, &got, data));
	PICK_ALGO(data, got, rank_math, pick);
	if (pick < 0)
		return no_algo(err, "backward-data", d, precision);
	a->bwd_data = data[pick].algo;
	a->data_math = run_math(precision, data[pick].mathType);
	FORWARD_IF_ERR(set_math(dev, a->data_math, err));
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionBackwardDataWorkspaceSize(
			    h, dev->w_desc, dev->y_desc, dev->conv_desc,
			    dev->x_desc, a->bwd_data, &a->data_bytes));

	cudnnConvolutionBwdFilterAlgoPerf_t filt[ALGO_SLOTS];
	FORWARD_IF_ERR(set_math(dev, rank_math, err));
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionBackwardFilterAlgorithm_v7(
			    h, dev->x_desc, dev->y_desc, dev->conv_desc,
			    dev->w_desc, ALGO_SLOTS, &got, filt));
	PICK_ALGO(filt, got, rank_math, pick);
	if (pick < 0)
		return no_algo(err, "backward-filter", d, precision);
	a->bwd_filter = filt[pick].algo;
	a->filter_math = run_math(precision, filt[pick].mathType);
	FORWARD_IF_ERR(set_math(dev, a->filter_math, err));
	CUDNN_CHECK(err, what,
		    cudnnGetConvolutionBackwardFilterWorkspaceSize(
			    h, dev->x_desc, dev->y_desc, dev->conv_desc,
			    dev->w_desc, a->bwd_filter, &a->filter_bytes));
	return 0;
}

/* The cached algorithms of d's shape in `precision`, choosing them the
 * first time (descriptors set for it). */
static int algos_for(nn_cuda_dev *dev, const nn_conv_desc *d, int precision,
		     const nn_cuda_conv_algo **out, ims_error *err)
{
	for (int i = 0; i < dev->n_algos; i++)
		if (dev->algos[i].precision == precision &&
		    !memcmp(&dev->algos[i].key, d, sizeof(*d))) {
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
	FORWARD_IF_ERR(choose(dev, d, precision, a, err));
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

/* bytes of one 16-bit value */
#define HALF_BYTES 2

/*
 * Carves the workspace into cuDNN's `ws_bytes` first, then one 16-bit
 * buffer of count[i] values for each i < k with count[i] > 0 (out[i],
 * NULL for a zero count); *ws gets cuDNN's part (NULL when it needs
 * none).
 */
static int carve(nn_ctx *ctx, size_t ws_bytes, const size_t *count, int k,
		 void **ws, void **out, ims_error *err)
{
	size_t total = nn_cuda_round256(ws_bytes);
	*ws = NULL;
	for (int i = 0; i < k; i++)
		total += nn_cuda_round256(count[i] * HALF_BYTES);
	char *p = nn_cuda_workspace(ctx, total ? total : 256, err);
	if (!p)
		return ims_fail_context(err, "cannot run a convolution");
	*ws = ws_bytes ? p : NULL;
	p += nn_cuda_round256(ws_bytes);
	for (int i = 0; i < k; i++) {
		out[i] = count[i] ? p : NULL;
		p += nn_cuda_round256(count[i] * HALF_BYTES);
	}
	return 0;
}

/* y += b per channel, y fp32 (the descriptors may be 16-bit: y_desc is
 * set to fp32 for it) */
static int add_bias(nn_cuda_dev *dev, const nn_conv_desc *d, const float *b,
		    float *y, ims_error *err)
{
	static const char what[] = "run a convolution on cuda";
	const float one = 1.0f;
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->y_desc, CUDNN_TENSOR_NCHW,
					       CUDNN_DATA_FLOAT, d->n, d->c_out,
					       d->h_out, d->w_out));
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->bias_desc, CUDNN_TENSOR_NCHW,
					       CUDNN_DATA_FLOAT, 1, d->c_out, 1,
					       1));
	CUDNN_CHECK(err, what,
		    cudnnAddTensor(dev->cudnn, &one, dev->bias_desc, b, &one,
				   dev->y_desc, y));
	return 0;
}

int nn_cuda_conv_forward(nn_ctx *ctx, const nn_conv_desc *d, const float *x,
			 const float *w, const float *b, float *y,
			 ims_error *err)
{
	static const char what[] = "run a convolution on cuda";
	FORWARD_IF_ERR(nn_conv_check_desc(d, "run a convolution", err));
	FORWARD_IF_ERR(nn_cuda_check_precision(ctx, "run a convolution", err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a convolution: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const int prec = ctx->precision;
	const nn_cuda_conv_algo *a;
	void *ws = NULL;
	const float one = 1.0f, zero = 0.0f;
	FORWARD_IF_ERR(set_descs(dev, d, prec, err));
	FORWARD_IF_ERR(algos_for(dev, d, prec, &a, err));
	FORWARD_IF_ERR(set_math(dev, a->fwd_math, err));
	if (prec == NN_PREC_FP32) {
		FORWARD_IF_ERR(workspace(ctx, a->fwd_bytes, &ws, err));
		CUDNN_CHECK(err, what,
			    cudnnConvolutionForward(dev->cudnn, &one,
						    dev->x_desc, x, dev->w_desc,
						    w, dev->conv_desc, a->fwd, ws,
						    a->fwd_bytes, &zero,
						    dev->y_desc, y));
	} else {
		/* x, w rounded to 16 bits; y16 widened into y */
		const size_t nx = (size_t)d->n * d->c_in * d->h_in * d->w_in;
		const size_t nw = (size_t)d->c_out * (d->c_in / d->groups) *
				  d->kh * d->kw;
		const size_t ny = (size_t)d->n * d->c_out * d->h_out * d->w_out;
		const size_t count[3] = {nx, nw, ny};
		void *h[3];
		FORWARD_IF_ERR(carve(ctx, a->fwd_bytes, count, 3, &ws, h, err));
		CUDA_CHECK(err, what,
			   nn_cuda_k_to_half(dev->stream, prec, nx, x, h[0]));
		CUDA_CHECK(err, what,
			   nn_cuda_k_to_half(dev->stream, prec, nw, w, h[1]));
		CUDNN_CHECK(err, what,
			    cudnnConvolutionForward(dev->cudnn, &one,
						    dev->x_desc, h[0],
						    dev->w_desc, h[1],
						    dev->conv_desc, a->fwd, ws,
						    a->fwd_bytes, &zero,
						    dev->y_desc, h[2]));
		CUDA_CHECK(err, what,
			   nn_cuda_k_from_half(dev->stream, prec, ny, h[2], y,
					       0));
	}
	if (d->bias)
		FORWARD_IF_ERR(add_bias(dev, d, b, y, err));
	return 0;
}

/* dx and dw from 16-bit copies of x, w and dy (db already done; the
 * descriptors and algorithms set for ctx->precision) */
static int conv_backward_half(nn_ctx *ctx, const nn_conv_desc *d,
			      const nn_cuda_conv_algo *a, const float *x,
			      const float *w, const float *dy, float *dx,
			      float *dw, ims_error *err)
{
	static const char what[] = "run a convolution backward on cuda";
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const int prec = ctx->precision;
	const float one = 1.0f, zero = 0.0f;
	const size_t nx = (size_t)d->n * d->c_in * d->h_in * d->w_in;
	const size_t nw = (size_t)d->c_out * (d->c_in / d->groups) * d->kh *
			  d->kw;
	const size_t ny = (size_t)d->n * d->c_out * d->h_out * d->w_out;
	/* dy16, then x16 and dw16 for dw, w16 and dx16 for dx */
	const size_t count[5] = {ny, dw ? nx : 0, dw ? nw : 0, dx ? nw : 0,
				 dx ? nx : 0};
	size_t need = 0;
	if (dw && a->filter_bytes > need)
		need = a->filter_bytes;
	if (dx && a->data_bytes > need)
		need = a->data_bytes;
	void *ws = NULL, *h[5];
	FORWARD_IF_ERR(carve(ctx, need, count, 5, &ws, h, err));
	CUDA_CHECK(err, what, nn_cuda_k_to_half(dev->stream, prec, ny, dy, h[0]));
	if (dw) {
		CUDA_CHECK(err, what,
			   nn_cuda_k_to_half(dev->stream, prec, nx, x, h[1]));
		FORWARD_IF_ERR(set_math(dev, a->filter_math, err));
		CUDNN_CHECK(err, what,
			    cudnnConvolutionBackwardFilter(
				    dev->cudnn, &one, dev->x_desc, h[1],
				    dev->y_desc, h[0], dev->conv_desc,
				    a->bwd_filter, ws, a->filter_bytes, &zero,
				    dev->w_desc, h[2]));
		CUDA_CHECK(err, what,
			   nn_cuda_k_from_half(dev->stream, prec, nw, h[2], dw,
					       0));
	}
	if (dx) {
		CUDA_CHECK(err, what,
			   nn_cuda_k_to_half(dev->stream, prec, nw, w, h[3]));
		FORWARD_IF_ERR(set_math(dev, a->data_math, err));
		CUDNN_CHECK(err, what,
			    cudnnConvolutionBackwardData(
				    dev->cudnn, &one, dev->w_desc, h[3],
				    dev->y_desc, h[0], dev->conv_desc,
				    a->bwd_data, ws, a->data_bytes, &zero,
				    dev->x_desc, h[4]));
		CUDA_CHECK(err, what,
			   nn_cuda_k_from_half(dev->stream, prec, nx, h[4], dx,
					       !ctx->dx_overwrite));
	}
	return 0;
}

int nn_cuda_conv_backward(nn_ctx *ctx, const nn_conv_desc *d, const float *x,
			  const float *w, const float *dy, float *dx,
			  float *dw, float *db, ims_error *err)
{
	static const char what[] = "run a convolution backward on cuda";
	FORWARD_IF_ERR(nn_conv_check_desc(d, "run a convolution backward", err));
	FORWARD_IF_ERR(nn_cuda_check_precision(
		ctx, "run a convolution backward", err));
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
	FORWARD_IF_ERR(set_descs(dev, d, ctx->precision, err));
	FORWARD_IF_ERR(algos_for(dev, d, ctx->precision, &a, err));
	if (ctx->precision != NN_PREC_FP32)
		return conv_backward_half(ctx, d, a, x, w, dy, dx, dw, err);
	size_t need = 0;
	if (dw && a->filter_bytes > need)
		need = a->filter_bytes;
	if (dx && a->data_bytes > need)
		need = a->data_bytes;
	FORWARD_IF_ERR(workspace(ctx, need, &ws, err));
	FORWARD_IF_ERR(set_math(dev, CUDNN_FMA_MATH, err));
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
