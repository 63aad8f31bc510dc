/*
 * conv_cuda.c - 2-D convolution on the device through cuDNN (NCHW,
 * PyTorch's Conv2d: cross-correlation, groups, dilation), and the bias
 * gradient by an own reduction (reduce.cu).
 *
 * Channels-last (d->nhwc): x, y and the 16-bit weight copy are NHWC
 * descriptors (the filter c_out x kh x kw x c_in), the weight gradient
 * is widened back into c_out x c_in x kh x kw, and the bias kernels see
 * n*h*w rows of c_out.
 *
 * Tensors are of the context's activation type: fp32, or bf16/fp16 in
 * mixed precision, where x, w and y (dx, dw, dy) are 16-bit descriptors
 * and the convolution computes in fp32 (the documented PSEUDO_HALF_CONFIG
 * and PSEUDO_BFLOAT16_CONFIG: fp32 accumulation). The model hands the
 * weights' 16-bit copy it makes once per forward; nothing is converted
 * here except the weight gradient, which cuDNN writes in the filter's
 * type into the workspace and which is widened into the fp32 gradient.
 *
 * Algorithms (ctx->conv_algo, train/conv_algo.h): per shape (the whole
 * descriptor, batch size included), precision, TF32 setting and mode,
 * each direction keeps a ranked list of candidates: timed on the layer's
 * own buffers by cudnnFind*AlgorithmEx (benchmark; once per shape, as
 * torch.backends.cudnn.benchmark), or cuDNN's heuristic ranking
 * (cudnnGet*Algorithm_v7; the deterministic mode keeps its deterministic
 * entries). A call runs the cached choice, or falls back down the list
 * when a candidate returns NOT_SUPPORTED or EXECUTION_FAILED or its
 * workspace cannot be had; the one that ran is cached. Math: fp32 without
 * TF32 runs every candidate with CUDNN_FMA_MATH (plain fp32 products, as
 * PyTorch with TF32 off); fp32 with TF32 and the 16-bit types run each
 * with the math type it was ranked with (tensor cores). No candidate
 * ranked with TENSOR_OP_MATH_ALLOW_CONVERSION is used: it would round
 * fp32 data to fp16.
 *
 * Plan time (nn_cuda_conv_prepare, from nn_model_prepare) ranks every
 * layer's shape at the model's batch size, with the workspace free to
 * grow (benchmarking gets up to NN_CUDA_WS_MAX), and reserves what the
 * chosen candidates need; the workspace is then frozen, and a shape first
 * seen later (a short last batch) ranks within what is allocated. Its
 * backward-data candidates are then ranked by the heuristic, since
 * timing them would overwrite a dx that may hold gradients.
 *
 * Blending: forward writes y (beta 0), then adds the bias (fp32:
 * cudnnAddTensor; 16 bits: an own kernel that rounds y + b once more);
 * backward-data adds into dx (beta 1) or overwrites it with
 * ctx->dx_overwrite (beta 0: cuDNN then does not read dx, so NaN there
 * does no harm); backward-filter overwrites dw.
 */
#include <stdlib.h>
#include <string.h>

#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"

enum { DIR_FWD, DIR_DATA, DIR_FILTER };

static const char *const dir_name[NN_ALGO_DIRS] = {"forward", "backward-data",
						   "backward-filter"};

/* The cache key: everything that changes the ranking. */
typedef struct conv_key {
	nn_conv_desc d;
	int precision, tf32, mode;
} conv_key;

/* cuDNN's type for the tensors of a convolution in `precision` */
static cudnnDataType_t data_type(int precision)
{
	return precision == NN_PREC_BF16   ? CUDNN_DATA_BFLOAT16
	       : precision == NN_PREC_FP16 ? CUDNN_DATA_HALF
					   : CUDNN_DATA_FLOAT;
}

/* The math type candidates are ranked with. */
static cudnnMathType_t rank_math(const nn_ctx *ctx)
{
	if (ctx->precision != NN_PREC_FP32)
		return CUDNN_TENSOR_OP_MATH;
	return ctx->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

/* The math type a ranked candidate runs with. */
static cudnnMathType_t run_math(const nn_ctx *ctx, cudnnMathType_t ranked)
{
	return ctx->precision == NN_PREC_FP32 && !ctx->tf32 ? CUDNN_FMA_MATH
							    : ranked;
}

/* x, y and w described with the activation type; the convolution
 * computes in fp32 whatever the tensors are */
static int set_descs(nn_cuda_dev *dev, const nn_conv_desc *d, int precision,
		     ims_error *err)
{
	static const char what[] = "describe a convolution to cuDNN";
	const cudnnDataType_t t = data_type(precision);
	/* channels-last: the filter too (c_out x kh x kw x c_in, the
	 * model's copy), as the tensor-core kernels read it */
	const cudnnTensorFormat_t f = d->nhwc ? CUDNN_TENSOR_NHWC
					      : CUDNN_TENSOR_NCHW;
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->x_desc, f, t, d->n,
					       d->c_in, d->h_in, d->w_in));
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->y_desc, f, t, d->n,
					       d->c_out, d->h_out, d->w_out));
	CUDNN_CHECK(err, what,
		    cudnnSetFilter4dDescriptor(dev->w_desc, t, f, d->c_out,
					       d->c_in / d->groups, d->kh,
					       d->kw));
	CUDNN_CHECK(err, what,
		    cudnnSetConvolution2dDescriptor(
			    dev->conv_desc, d->pad_h, d->pad_w, d->stride_h,
			    d->stride_w, d->dil_h, d->dil_w,
			    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
	CUDNN_CHECK(err, what,
		    cudnnSetConvolutionGroupCount(dev->conv_desc, d->groups));
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

static int set_math(nn_cuda_dev *dev, cudnnMathType_t m, ims_error *err)
{
	CUDNN_CHECK(err, "describe a convolution to cuDNN",
		    cudnnSetConvolutionMathType(dev->conv_desc, m));
	return 0;
}

static size_t conv_nw(const nn_conv_desc *d)
{
	return (size_t)d->c_out * (d->c_in / d->groups) * d->kh * d->kw;
}

/* Workspace a direction needs beside cuDNN's: the weight gradient cuDNN
 * writes before it reaches the fp32 gradient, c_out x c_in x kh x kw: in
 * 16 bits, to be widened; channels-last in fp32, c_out x kh x kw x c_in,
 * to be transposed (a 1x1 filter is the same either way). */
static size_t extra_bytes(const nn_ctx *ctx, const nn_conv_desc *d, int dir)
{
	if (dir != DIR_FILTER)
		return 0;
	if (ctx->precision == NN_PREC_FP32 && !(d->nhwc && d->kh * d->kw > 1))
		return 0;
	return nn_cuda_round256(conv_nw(d) * nn_act_bytes(ctx->precision));
}

/* ---- ranking -------------------------------------------------------------- */

/* The fields every cuDNN perf struct shares, into a candidate. */
#define FILL_CAND(list, perf, count, ctx)                                      \
	do {                                                                   \
		(list)->n = 0;                                                 \
		for (int i_ = 0; i_ < (count) && i_ < NN_ALGO_MAX; i_++) {     \
			nn_algo_cand *c_ = &(list)->c[(list)->n++];            \
			c_->algo = (int)(perf)[i_].algo;                        \
			c_->math = (int)run_math((ctx), (perf)[i_].mathType);  \
			c_->workspace = (perf)[i_].memory;                     \
			c_->deterministic =                                    \
				(perf)[i_].determinism == CUDNN_DETERMINISTIC; \
			c_->usable = (perf)[i_].status ==                       \
					     CUDNN_STATUS_SUCCESS &&           \
				     (perf)[i_].mathType !=                    \
					     CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION; \
			c_->ms = (perf)[i_].time;                              \
		}                                                              \
		(list)->ranked = 1;                                            \
	} while (0)

/* The layer's buffers a benchmark may time candidates on (NULL members:
 * rank by the heuristic instead). */
typedef struct conv_bufs {
	const void *x, *w, *dy;
	void *y, *dx;
	float *dw; /* fp32; in 16 bits the filter's copy is workspace */
} conv_bufs;

/* A workspace for cudnnFind*: as much as may be had up to
 * NN_CUDA_WS_MAX before the freeze (half of the device's free memory at
 * most), what is allocated after it. */
static void *find_workspace(nn_ctx *ctx, size_t *bytes, ims_error *err)
{
	size_t want = nn_cuda_ws_limit(ctx, NN_CUDA_WS_MAX);
	if (!ctx->workspace_frozen) {
		size_t free_b = 0, total_b = 0;
		if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess &&
		    free_b / 2 < want)
			want = free_b / 2;
	}
	*bytes = want;
	if (!want)
		return NULL;
	void *ws = nn_cuda_workspace_temp(ctx, want, err);
	if (!ws)
		*bytes = 0;
	return ws;
}

static int rank_heuristic(nn_ctx *ctx, int dir, nn_algo_list *l,
			  ims_error *err)
{
	static const char what[] = "rank convolution algorithms";
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	int got = 0;
	FORWARD_IF_ERR(set_math(dev, rank_math(ctx), err));
	if (dir == DIR_FWD) {
		cudnnConvolutionFwdAlgoPerf_t p[NN_ALGO_MAX];
		CUDNN_CHECK(err, what,
			    cudnnGetConvolutionForwardAlgorithm_v7(
				    dev->cudnn, dev->x_desc, dev->w_desc,
				    dev->conv_desc, dev->y_desc, NN_ALGO_MAX,
				    &got, p));
		FILL_CAND(l, p, got, ctx);
	} else if (dir == DIR_DATA) {
		cudnnConvolutionBwdDataAlgoPerf_t p[NN_ALGO_MAX];
		CUDNN_CHECK(err, what,
			    cudnnGetConvolutionBackwardDataAlgorithm_v7(
				    dev->cudnn, dev->w_desc, dev->y_desc,
				    dev->conv_desc, dev->x_desc, NN_ALGO_MAX,
				    &got, p));
		FILL_CAND(l, p, got, ctx);
	} else {
		cudnnConvolutionBwdFilterAlgoPerf_t p[NN_ALGO_MAX];
		CUDNN_CHECK(err, what,
			    cudnnGetConvolutionBackwardFilterAlgorithm_v7(
				    dev->cudnn, dev->x_desc, dev->y_desc,
				    dev->conv_desc, dev->w_desc, NN_ALGO_MAX,
				    &got, p));
		FILL_CAND(l, p, got, ctx);
	}
	/* the heuristic's sizes were asked with the ranking math; a
	 * candidate runs with its own, whose size cuDNN gives exactly */
	for (int i = 0; i < l->n; i++) {
		nn_algo_cand *c = &l->c[i];
		if (!c->usable)
			continue;
		FORWARD_IF_ERR(set_math(dev, (cudnnMathType_t)c->math, err));
		cudnnStatus_t s;
		if (dir == DIR_FWD)
			s = cudnnGetConvolutionForwardWorkspaceSize(
				dev->cudnn, dev->x_desc, dev->w_desc,
				dev->conv_desc, dev->y_desc,
				(cudnnConvolutionFwdAlgo_t)c->algo, &c->workspace);
		else if (dir == DIR_DATA)
			s = cudnnGetConvolutionBackwardDataWorkspaceSize(
				dev->cudnn, dev->w_desc, dev->y_desc,
				dev->conv_desc, dev->x_desc,
				(cudnnConvolutionBwdDataAlgo_t)c->algo,
				&c->workspace);
		else
			s = cudnnGetConvolutionBackwardFilterWorkspaceSize(
				dev->cudnn, dev->x_desc, dev->y_desc,
				dev->conv_desc, dev->w_desc,
				(cudnnConvolutionBwdFilterAlgo_t)c->algo,
				&c->workspace);
		if (s != CUDNN_STATUS_SUCCESS)
			c->usable = 0; /* this math does not run it */
	}
	return 0;
}

/* cudnnFind*AlgorithmEx on the layer's buffers: candidates fastest
 * first, each with the time and workspace it took. */
static int rank_benchmark(nn_ctx *ctx, const nn_conv_desc *d, int dir,
			  const conv_bufs *b, nn_algo_list *l, ims_error *err)
{
	static const char what[] = "time convolution algorithms";
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	size_t ws_bytes = 0;
	const size_t extra = extra_bytes(ctx, d, dir);
	char *ws = find_workspace(ctx, &ws_bytes, err);
	if (!ws && ws_bytes)
		return ims_fail_context(err, "cannot %s", what);
	ws_bytes = ws_bytes > extra ? ws_bytes - extra : 0;
	void *find_ws = ws_bytes ? ws + extra : NULL;
	void *dw_out = extra ? (void *)ws : (void *)b->dw;
	int got = 0;
	FORWARD_IF_ERR(set_math(dev, rank_math(ctx), err));
	if (dir == DIR_FWD) {
		cudnnConvolutionFwdAlgoPerf_t p[NN_ALGO_MAX];
		CUDNN_CHECK(err, what,
			    cudnnFindConvolutionForwardAlgorithmEx(
				    dev->cudnn, dev->x_desc, b->x, dev->w_desc,
				    b->w, dev->conv_desc, dev->y_desc, b->y,
				    NN_ALGO_MAX, &got, p, find_ws, ws_bytes));
		FILL_CAND(l, p, got, ctx);
	} else if (dir == DIR_DATA) {
		cudnnConvolutionBwdDataAlgoPerf_t p[NN_ALGO_MAX];
		CUDNN_CHECK(err, what,
			    cudnnFindConvolutionBackwardDataAlgorithmEx(
				    dev->cudnn, dev->w_desc, b->w, dev->y_desc,
				    b->dy, dev->conv_desc, dev->x_desc, b->dx,
				    NN_ALGO_MAX, &got, p, find_ws, ws_bytes));
		FILL_CAND(l, p, got, ctx);
	} else {
		cudnnConvolutionBwdFilterAlgoPerf_t p[NN_ALGO_MAX];
		CUDNN_CHECK(err, what,
			    cudnnFindConvolutionBackwardFilterAlgorithmEx(
				    dev->cudnn, dev->x_desc, b->x, dev->y_desc,
				    b->dy, dev->conv_desc, dev->w_desc, dw_out,
				    NN_ALGO_MAX, &got, p, find_ws, ws_bytes));
		FILL_CAND(l, p, got, ctx);
	}
	return 0;
}

/* Ranks list `dir` of d's entry unless ranked: by benchmark when the
 * mode asks for it and buffers are given, else by the heuristic. */
static int rank(nn_ctx *ctx, const nn_conv_desc *d, int dir,
		const conv_bufs *b, nn_algo_list *l, ims_error *err)
{
	if (l->ranked)
		return 0;
	const int bench =
		ctx->conv_algo == NN_ALGO_BENCHMARK && b && b->x && b->w &&
		(dir != DIR_FWD || b->y) &&
		(dir != DIR_DATA || (b->dy && b->dx)) &&
		(dir != DIR_FILTER || (b->dy && (b->dw || extra_bytes(ctx, d, dir))));
	int rc = bench ? rank_benchmark(ctx, d, dir, b, l, err)
		       : rank_heuristic(ctx, dir, l, err);
	if (rc)
		return ims_fail_context(err, "cannot choose a %s %s algorithm",
					nn_algo_mode_name(ctx->conv_algo)
						? nn_algo_mode_name(ctx->conv_algo)
						: "?",
					dir_name[dir]);
	return 0;
}

/* The cache entry of d in the context's precision, TF32 and mode. */
static int entry_of(nn_ctx *ctx, const nn_conv_desc *d, nn_algo_entry **e,
		    ims_error *err)
{
	conv_key k;
	memset(&k, 0, sizeof(k));
	k.d = *d;
	k.precision = ctx->precision;
	k.tf32 = ctx->precision == NN_PREC_FP32 && ctx->tf32;
	k.mode = ctx->conv_algo;
	int added;
	return nn_algo_cache_get(&nn_cuda_dev_of(ctx)->algos, &k, sizeof(k), e,
				 &added, err);
}

void nn_cuda_conv_release(nn_cuda_dev *dev)
{
	nn_algo_cache_release(&dev->algos);
}

/* ---- running ---------------------------------------------------------------- */

/* One try: the call's arguments and the direction. */
typedef struct conv_try {
	nn_ctx *ctx;
	const nn_conv_desc *d;
	int dir;
	const void *x, *w, *dy;
	void *y, *dx;
	float *dw;
	const float *beta; /* backward data: 0 overwrites, 1 adds */
} conv_try;

/* cuDNN's statuses a lower-ranked algorithm may not share. */
static int fallback_status(cudnnStatus_t s)
{
	return s == CUDNN_STATUS_NOT_SUPPORTED ||
	       s == CUDNN_STATUS_EXECUTION_FAILED;
}

static int try_one(void *ud, const nn_algo_cand *c, ims_error *err)
{
	static const char what[] = "run a convolution on cuda";
	conv_try *t = ud;
	nn_ctx *ctx = t->ctx;
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const size_t extra = extra_bytes(ctx, t->d, t->dir);
	const size_t need = extra + nn_cuda_round256(c->workspace);
	char *ws = NULL;
	if (need) {
		ims_error local;
		ws = nn_cuda_workspace(ctx, need, &local);
		if (!ws) {
			/* out of device memory, or frozen: a candidate that
			 * needs less may still run */
			if (local.code == IMS_ENOMEM || local.code == IMS_ELIMIT)
				return NN_ALGO_UNSUPPORTED;
			if (err)
				*err = local;
			return local.code;
		}
	}
	void *cws = c->workspace ? ws + extra : NULL;
	const float one = 1.0f, zero = 0.0f;
	FORWARD_IF_ERR(set_math(dev, (cudnnMathType_t)c->math, err));
	cudnnStatus_t s;
	if (t->dir == DIR_FWD)
		s = cudnnConvolutionForward(
			dev->cudnn, &one, dev->x_desc, t->x, dev->w_desc, t->w,
			dev->conv_desc, (cudnnConvolutionFwdAlgo_t)c->algo, cws,
			c->workspace, &zero, dev->y_desc, t->y);
	else if (t->dir == DIR_DATA)
		s = cudnnConvolutionBackwardData(
			dev->cudnn, &one, dev->w_desc, t->w, dev->y_desc, t->dy,
			dev->conv_desc, (cudnnConvolutionBwdDataAlgo_t)c->algo,
			cws, c->workspace, t->beta, dev->x_desc, t->dx);
	else
		s = cudnnConvolutionBackwardFilter(
			dev->cudnn, &one, dev->x_desc, t->x, dev->y_desc, t->dy,
			dev->conv_desc, (cudnnConvolutionBwdFilterAlgo_t)c->algo,
			cws, c->workspace, &zero, dev->w_desc,
			extra ? (void *)ws : (void *)t->dw);
	if (fallback_status(s))
		return NN_ALGO_UNSUPPORTED;
	CUDNN_CHECK(err, what, s);
	/* widened into the fp32 gradient, which stays c_out x c_in x kh x
	 * kw in either layout */
	const nn_conv_desc *d = t->d;
	if (t->dir == DIR_FILTER && extra && d->nhwc && d->kh * d->kw > 1)
		CUDA_CHECK(err, what,
			   nn_cuda_k_from_half_nhwc(dev->stream, ctx->precision,
						    d->c_out, d->c_in / d->groups,
						    (size_t)d->kh * d->kw, ws,
						    t->dw, 0));
	else if (t->dir == DIR_FILTER && extra)
		CUDA_CHECK(err, what,
			   nn_cuda_k_from_half(dev->stream, ctx->precision,
					       conv_nw(d), ws, t->dw, 0));
	return NN_ALGO_RAN;
}

/* Runs direction t->dir of an entry's list, ranking it first if needed
 * (descriptors set). */
static int run_dir(conv_try *t, nn_algo_entry *e, const conv_bufs *b,
		   ims_error *err)
{
	nn_ctx *ctx = t->ctx;
	nn_algo_list *l = &e->dir[t->dir];
	FORWARD_IF_ERR(rank(ctx, t->d, t->dir, b, l, err));
	const size_t limit = nn_cuda_ws_limit(ctx, NN_CUDA_WS_MAX);
	const size_t extra = extra_bytes(ctx, t->d, t->dir);
	char what[96];
	snprintf(what, sizeof(what), "run a %s convolution on cuda",
		 dir_name[t->dir]);
	return nn_algo_run(l, ctx->conv_algo, limit > extra ? limit - extra : 0,
			   try_one, t, what, err);
}

static int check_args(nn_ctx *ctx, const nn_conv_desc *d, const char *what,
		      ims_error *err)
{
	FORWARD_IF_ERR(nn_conv_check_desc(d, what, err));
	FORWARD_IF_ERR(nn_cuda_check_precision(ctx, what, err));
	FORWARD_IF_ERR(nn_layout_check(d->nhwc, what, err));
	RETURN_IF(!nn_algo_mode_name(ctx->conv_algo), err, IMS_EINVAL,
		  "cannot %s: unknown algorithm mode %d", what, ctx->conv_algo);
	return 0;
}

/* y += b per channel */
static int add_bias(nn_ctx *ctx, const nn_conv_desc *d, const float *b,
		    void *y, ims_error *err)
{
	static const char what[] = "run a convolution on cuda";
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const size_t hw = (size_t)d->h_out * d->w_out;
	/* channels-last: n*hw rows of c_out values, one bias each */
	if (ctx->precision != NN_PREC_FP32) {
		CUDA_CHECK(err, what,
			   nn_cuda_k_add_bias(dev->stream, ctx->precision,
					      d->nhwc ? (int)(d->n * hw) : d->n,
					      d->c_out, d->nhwc ? 1 : hw, b, y));
		return 0;
	}
	const float one = 1.0f;
	CUDNN_CHECK(err, what,
		    cudnnSetTensor4dDescriptor(dev->bias_desc, CUDNN_TENSOR_NCHW,
					       CUDNN_DATA_FLOAT, 1, d->c_out, 1,
					       1));
	CUDNN_CHECK(err, what,
		    cudnnAddTensor(dev->cudnn, &one, dev->bias_desc, b, &one,
				   dev->y_desc, y));
	return 0;
}

int nn_cuda_conv_forward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			 const void *w, const float *b, void *y,
			 ims_error *err)
{
	FORWARD_IF_ERR(check_args(ctx, d, "run a convolution", err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a convolution: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	nn_algo_entry *e;
	FORWARD_IF_ERR(set_descs(nn_cuda_dev_of(ctx), d, ctx->precision, err));
	FORWARD_IF_ERR(entry_of(ctx, d, &e, err));
	conv_try t = {.ctx = ctx, .d = d, .dir = DIR_FWD, .x = x, .w = w, .y = y};
	const conv_bufs bufs = {.x = x, .w = w, .y = y};
	FORWARD_IF_ERR(run_dir(&t, e, &bufs, err));
	if (d->bias)
		FORWARD_IF_ERR(add_bias(ctx, d, b, y, err));
	return 0;
}

int nn_cuda_conv_backward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			  const void *w, const void *dy, void *dx, float *dw,
			  float *db, ims_error *err)
{
	static const char what[] = "run a convolution backward on cuda";
	FORWARD_IF_ERR(check_args(ctx, d, "run a convolution backward", err));
	if (!d->bias)
		db = NULL;
	RETURN_IF(!dy || (dw && !x) || (dx && !w), err, IMS_EINVAL,
		  "cannot run a convolution backward: missing %s",
		  !dy ? "output gradient" : dw && !x ? "input" : "weights");
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const size_t hw = (size_t)d->h_out * d->w_out;
	if (db)
		CUDA_CHECK(err, what,
			   nn_cuda_k_channel_sum(dev->stream, ctx->precision,
						 d->nhwc ? (int)(d->n * hw) : d->n,
						 d->c_out, d->nhwc ? 1 : hw, dy,
						 db));
	if (!dx && !dw)
		return 0;
	nn_algo_entry *e;
	FORWARD_IF_ERR(set_descs(dev, d, ctx->precision, err));
	FORWARD_IF_ERR(entry_of(ctx, d, &e, err));
	const float one = 1.0f, zero = 0.0f;
	conv_try t = {.ctx = ctx, .d = d, .x = x, .w = w, .dy = dy, .dx = dx,
		      .dw = dw, .beta = ctx->dx_overwrite ? &zero : &one};
	/* timing backward-data here would overwrite a dx that may hold
	 * gradients: a shape first seen now ranks it by the heuristic */
	const conv_bufs bufs = {.x = x, .w = w, .dy = dy, .dw = dw};
	if (dw) {
		t.dir = DIR_FILTER;
		FORWARD_IF_ERR(run_dir(&t, e, &bufs, err));
	}
	if (dx) {
		t.dir = DIR_DATA;
		FORWARD_IF_ERR(run_dir(&t, e, &bufs, err));
	}
	return 0;
}

/* ---- plan time ----------------------------------------------------------------- */

int nn_cuda_conv_prepare(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			 const void *w, void *y, void *dy, void *dx, float *dw,
			 ims_error *err)
{
	FORWARD_IF_ERR(check_args(ctx, d, "prepare a convolution", err));
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	FORWARD_IF_ERR(set_descs(dev, d, ctx->precision, err));
	const conv_bufs bufs = {.x = x, .w = w, .dy = dy, .y = y, .dx = dx,
				.dw = dw};
	const int dirs[3] = {DIR_FWD, dy && dw ? DIR_FILTER : -1,
			     dy && dx ? DIR_DATA : -1};
	for (int k = 0; k < 3; k++) {
		if (dirs[k] < 0)
			continue;
		nn_algo_entry *e;
		FORWARD_IF_ERR(entry_of(ctx, d, &e, err));
		nn_algo_list *l = &e->dir[dirs[k]];
		FORWARD_IF_ERR(rank(ctx, d, dirs[k], &bufs, l, err));
		const int i = nn_algo_next(l, ctx->conv_algo, NN_CUDA_WS_MAX);
		RETURN_IF(i < 0, err, IMS_EUNSUPPORTED,
			  "cannot run a convolution on cuda: cuDNN offers no "
			  "%s %s algorithm for %dx%dx%dx%d -> %d channels, "
			  "kernel %dx%d, stride %dx%d, groups %d",
			  nn_algo_mode_name(ctx->conv_algo), dir_name[dirs[k]],
			  d->n, d->c_in, d->h_in, d->w_in, d->c_out, d->kh,
			  d->kw, d->stride_h, d->stride_w, d->groups);
		nn_cuda_reserve(ctx, extra_bytes(ctx, d, dirs[k]) +
					     nn_cuda_round256(l->c[i].workspace));
	}
	return 0;
}
