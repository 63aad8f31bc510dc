/*
 * nn_internal.h - the layer kernels of imshard's network library and the
 * backend table that dispatches them. Private to the network library
 * (train/ itself, train/layers/, train/cuda/) and its tests; its public
 * interface, the context (nn_ctx) included, is train/nn.h.
 *
 * Conventions, the same for every layer:
 *   - Activations are float, NCHW, contiguous. Dense activations are
 *     [N, F] (an NCHW tensor with H = W = 1 reads the same). Through the
 *     backend table they may be 16-bit instead (mixed precision, below);
 *     the nn_cpu_* kernels of each layer are the fp32 reference.
 *   - Weights use PyTorch's layouts so torchvision state_dict tensors load
 *     unchanged: conv [C_out, C_in/groups, KH, KW], linear [out, in].
 *   - Backward ACCUMULATES into dx (dx += ...), because in a residual graph
 *     one activation feeds two layers; with ctx->dx_overwrite set it
 *     overwrites dx instead (the model sets it for the first writer of
 *     each activation gradient in a pass). Parameter gradients (dw, db,
 *     dgamma, dbeta) are OVERWRITTEN: each parameter is used once per step.
 *     Any of dx, dw, db may be NULL to skip computing it (first layer,
 *     frozen layers).
 *   - In place: relu_forward, add_forward and dropout_forward accept an
 *     output equal to an input, and relu_backward dx equal to dy when
 *     ctx->dx_overwrite is set; the memory plan (train/model_plan.c)
 *     runs them so, and every backend's kernels must give the same bits
 *     in place as out of place.
 *   - Every function returns 0 or a negative IMS_E* code with a message in
 *     err; they only fail on an inconsistent descriptor or out of memory.
 *   - Results are deterministic: the same inputs and ctx->threads give the
 *     same bits. Reductions the kernels do themselves (batch-norm
 *     statistics, bias gradients, loss sums) use a fixed order that does
 *     not depend on the thread count either; GEMMs inside the BLAS may.
 *
 * Threads: a nn_ctx is used by one thread at a time; kernels parallelise
 * internally with OpenMP (ctx->threads) and the BLAS.
 */
#ifndef IMSHARD_NN_INTERNAL_H
#define IMSHARD_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "train/nn.h"

/* ---- convolution (layers/conv.c) --------------------------------------- */

typedef struct nn_conv_desc {
	int n, c_in, h_in, w_in;
	int c_out, h_out, w_out;
	int kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
	int groups;
	int bias; /* 1: a bias vector of c_out follows the weights */
	/* 1: channels-last (see nn_layout_check): x, y, dx, dy are
	 * N x H x W x C and the (16-bit) weights c_out x kh x kw x c_in/groups;
	 * dw stays c_out x c_in/groups x kh x kw */
	int nhwc;
} nn_conv_desc;

/*
 * Fills d for a square kernel k, stride, padding and dilation (PyTorch's
 * Conv2d arithmetic: h_out = (h_in + 2 pad - dil (k - 1) - 1) / stride + 1).
 * Fails when a size is < 1, c_in or c_out is not a multiple of groups, or
 * the output would be empty.
 */
int nn_conv_desc_init(nn_conv_desc *d, int n, int c_in, int h_in, int w_in,
		      int c_out, int k, int stride, int pad, int dil,
		      int groups, int bias, ims_error *err);
/* Checks a descriptor (also one made or edited by hand) as every
 * backend's kernels do; `what` starts the message ("run a convolution"). */
int nn_conv_check_desc(const nn_conv_desc *d, const char *what,
		       ims_error *err);
/* y[N, C_out, H_out, W_out] = conv(x, w) + b (b NULL when !d->bias). */
int nn_cpu_conv_forward(nn_ctx *ctx, const nn_conv_desc *d, const float *x,
			const float *w, const float *b, float *y,
			ims_error *err);
int nn_cpu_conv_backward(nn_ctx *ctx, const nn_conv_desc *d, const float *x,
			 const float *w, const float *dy, float *dx,
			 float *dw, float *db, ims_error *err);

/* ---- linear (layers/linear.c) ------------------------------------------ */

typedef struct nn_linear_desc {
	int n, in, out;
	int bias;
} nn_linear_desc;

/* Checks a descriptor as every backend's kernels do. */
int nn_linear_check_desc(const nn_linear_desc *d, const char *what,
			 ims_error *err);
/* y[N, out] = x[N, in] w[out, in]^T + b[out] */
int nn_cpu_linear_forward(nn_ctx *ctx, const nn_linear_desc *d,
			  const float *x, const float *w, const float *b,
			  float *y, ims_error *err);
int nn_cpu_linear_backward(nn_ctx *ctx, const nn_linear_desc *d,
			   const float *x, const float *w, const float *dy,
			   float *dx, float *dw, float *db, ims_error *err);

/* ---- batch normalisation (layers/batchnorm.c) -------------------------- */

typedef struct nn_bn_desc {
	int n, c, h, w;
	float eps;      /* torchvision: 1e-5 */
	float momentum; /* torchvision: 0.1; running = (1-m) running + m batch */
	int nhwc;       /* 1: x, y, dx, dy are N x H x W x C */
	/* 1: the forwards end with the ReLU that reads y in place (y =
	 * relu(BN(x)), relu applied to the stored value as the ReLU layer
	 * would); the backwards ignore it */
	int relu;
} nn_bn_desc;

/* Checks the shape and eps as every backend's kernels do. */
int nn_bn_check_desc(const nn_bn_desc *d, const char *what, ims_error *err);
/*
 * Training mode: normalises with the batch statistics over (N, H, W),
 * updates running_mean/running_var in place (the running variance takes
 * the unbiased batch variance, as PyTorch does) and saves the batch mean
 * and 1/sqrt(var + eps) (biased var) for the backward pass.
 */
int nn_cpu_bn_forward_train(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
			    const float *gamma, const float *beta,
			    float *running_mean, float *running_var,
			    float *save_mean, float *save_invstd, float *y,
			    ims_error *err);
/* Evaluation mode: normalises with the running statistics. */
int nn_cpu_bn_forward_eval(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
			   const float *gamma, const float *beta,
			   const float *running_mean,
			   const float *running_var, float *y, ims_error *err);
/* Backward of the training-mode forward. */
int nn_cpu_bn_backward(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
		       const float *gamma, const float *save_mean,
		       const float *save_invstd, const float *dy, float *dx,
		       float *dgamma, float *dbeta, ims_error *err);

/*
 * Backward of the evaluation-mode forward used in training ("frozen"
 * batch norm: running statistics are constants, not updated): dx +=
 * dy gamma / sqrt(var + eps), dgamma = sum dy xhat, dbeta = sum dy.
 */
int nn_cpu_bn_backward_frozen(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
			      const float *gamma, const float *running_mean,
			      const float *running_var, const float *dy,
			      float *dx, float *dgamma, float *dbeta,
			      ims_error *err);

/* ---- ReLU (layers/relu.c) ---------------------------------------------- */

int nn_cpu_relu_forward(nn_ctx *ctx, size_t count, const float *x, float *y,
			ims_error *err);
/* dx += dy where y > 0 (y is the forward output). */
int nn_cpu_relu_backward(nn_ctx *ctx, size_t count, const float *y,
			 const float *dy, float *dx, ims_error *err);

/* ---- pooling (layers/maxpool.c, layers/avgpool.c) ---------------------- */

typedef struct nn_pool_desc {
	int n, c, h_in, w_in, h_out, w_out;
	int kh, kw, stride_h, stride_w, pad_h, pad_w;
	int adaptive; /* 1: PyTorch AdaptiveAvgPool2d windows, k/stride/pad unused */
	/* 1: x, y, dx, dy (and a max pool's argmax, one per output) are
	 * N x H x W x C; argmax stays the offset within the (n, c) plane */
	int nhwc;
} nn_pool_desc;

/*
 * Fixed windows, PyTorch's MaxPool2d / AvgPool2d arithmetic with
 * ceil_mode=False: h_out = (h_in + 2 pad - k) / stride + 1. Fails when
 * pad > k / 2 (as PyTorch does) or the output is empty.
 */
int nn_pool_desc_init(nn_pool_desc *d, int n, int c, int h_in, int w_in,
		      int k, int stride, int pad, ims_error *err);
/*
 * Checks a fixed-window descriptor, also one made or edited by hand
 * (rectangular windows): the rules of nn_pool_desc_init and outputs that
 * match its arithmetic. Both pools use it (layers/maxpool.c).
 */
int nn_pool_check_fixed(const nn_pool_desc *d, const char *what,
			ims_error *err);
/*
 * Adaptive average pooling to (h_out, w_out): window i spans
 * [floor(i h_in / h_out), ceil((i + 1) h_in / h_out)).
 */
int nn_pool_desc_init_adaptive(nn_pool_desc *d, int n, int c, int h_in,
			       int w_in, int h_out, int w_out,
			       ims_error *err);

/* The checks of each pool's kernels: max pooling takes fixed windows
 * only, average pooling fixed or adaptive ones. */
int nn_maxpool_check_desc(const nn_pool_desc *d, const char *what,
			  ims_error *err);
int nn_avgpool_check_desc(const nn_pool_desc *d, const char *what,
			  ims_error *err);
/*
 * Max pooling. Padding counts as -infinity. argmax (N*C*H_out*W_out
 * int32, caller-owned) records the winning input offset within its plane
 * for the backward pass; ties go to the first in row-major order.
 */
int nn_cpu_maxpool_forward(nn_ctx *ctx, const nn_pool_desc *d, const float *x,
			   float *y, int32_t *argmax, ims_error *err);
int nn_cpu_maxpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			    const int32_t *argmax, const float *dy, float *dx,
			    ims_error *err);
/*
 * Average pooling, fixed (count_include_pad=True, PyTorch's default) or
 * adaptive windows.
 */
int nn_cpu_avgpool_forward(nn_ctx *ctx, const nn_pool_desc *d, const float *x,
			   float *y, ims_error *err);
int nn_cpu_avgpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			    const float *dy, float *dx, ims_error *err);

/* ---- dropout (layers/dropout.c) ---------------------------------------- */

/*
 * Where a rank's batch sits in the global batch of all ranks, which the
 * loader deals out in turn: rank `rank` of `world` holds global samples
 * rank + k * world (k = 0, 1, ...), so its element k * per_sample + f is
 * element (rank + k * world) * per_sample + f of the one-rank batch.
 * Dropout draws each element's mask from that global index, so N ranks
 * drop what one rank given the whole batch would. NULL, or world = 1,
 * is one rank: the global index is the element's own.
 */
typedef struct nn_dropout_place {
	size_t per_sample; /* elements per sample: count / n */
	int rank, world;   /* 0 <= rank < world */
} nn_dropout_place;

/* Checks at (may be NULL) against a tensor of count elements: IMS_EINVAL
 * unless 0 <= rank < world and, with world > 1, per_sample >= 1 divides
 * count. */
int nn_dropout_check_place(const nn_dropout_place *at, size_t count,
			   const char *what, ims_error *err);

/*
 * Inverted dropout: y = x * keep / (1 - p). Whether element i is kept is a
 * pure function of (seed, its global index under at) (a counter-based
 * hash), so it does not depend on thread count or rank count; mask (count
 * bytes, caller-owned) records it. p in [0, 1); at as above (NULL: one
 * rank).
 */
int nn_cpu_dropout_forward(nn_ctx *ctx, size_t count, float p, uint64_t seed,
			   const nn_dropout_place *at, const float *x, float *y,
			   uint8_t *mask, ims_error *err);
int nn_cpu_dropout_backward(nn_ctx *ctx, size_t count, float p,
			    const uint8_t *mask, const float *dy, float *dx,
			    ims_error *err);

/* ---- element-wise: residual add, flatten (layers/add.c) ----- */

/* y = a + b */
int nn_cpu_add_forward(nn_ctx *ctx, size_t count, const float *a,
		       const float *b, float *y, ims_error *err);
/* y = relu(a + b): add, then the ReLU layer's operation on the sum */
int nn_cpu_add_relu_forward(nn_ctx *ctx, size_t count, const float *a,
			    const float *b, float *y, ims_error *err);
/*
 * dx += dy: the backward of add (called once per input), of flatten
 * (a reshaping view) and of any identity.
 */
int nn_cpu_accumulate(nn_ctx *ctx, size_t count, const float *dy, float *dx,
		      ims_error *err);

/* ---- softmax cross-entropy (layers/softmax_xent.c) --------------------- */

/*
 * Softmax cross-entropy of logits[N, K] against integer labels, with label
 * smoothing s (PyTorch's CrossEntropyLoss(label_smoothing=s): target
 * (1 - s) one-hot + s / K). *loss_sum gets the SUM of per-sample losses
 * (double, so ranks can sum and divide). When dlogits is not NULL it is
 * OVERWRITTEN with scale * d(loss_sum)/d(logits), so scale = 1/N gives the
 * gradient of the mean. A label outside [0, K) fails with IMS_EINVAL.
 * On a device backend logits, labels and dlogits are device pointers and
 * loss_sum a host one (the call waits for the device to finish).
 */
/* The shape and smoothing checks every backend's softmax_xent makes
 * first (n, k >= 1; smoothing in [0, 1]). */
int nn_xent_check(int n, int k, float smoothing, ims_error *err);
int nn_cpu_softmax_xent(nn_ctx *ctx, int n, int k, const float *logits,
			const int32_t *labels, float smoothing, float scale,
			double *loss_sum, float *dlogits, ims_error *err);
/* nn_xent_tally on host memory: the CPU's, and the reference of a
 * device's xent_tally. */
int nn_cpu_xent_tally(nn_ctx *ctx, int n, int k, const float *logits,
		      const int32_t *labels, float smoothing, float scale,
		      float *dlogits, int64_t step, nn_tally *tally,
		      ims_error *err);
/* nn_topk_correct, the host's score of logits, is public (train/nn.h). */

/* ---- optimiser updates (train/optim.c's per-element math) -------------- */

/* Adam's per-step scalars, computed once per step in double as PyTorch's
 * adam.py does in Python, then rounded where a tensor op takes them
 * (train/optim.c fills them; device kernels read them). */
typedef struct nn_adam_scalars {
	float w1;          /* 1 - beta1: lerp weight */
	float beta2;       /* exp_avg_sq.mul_(beta2) */
	float w2;          /* addcmul_ value 1 - beta2 */
	float neg_step;    /* addcdiv_ value -lr / (1 - beta1^t) */
	float bc2_sqrt;    /* sqrt(1 - beta2^t) */
	float eps;
	float decay_mul;   /* AdamW: 1 - lr wd */
} nn_adam_scalars;

/*
 * One update covers many tensors: train/optim.c cuts a step's trained
 * segments into batches of up to NN_OPTIM_RUNS runs of the contiguous
 * parameter block (a resnet50's 161 trained tensors make one batch, so
 * one launch), and the CPU's loops and the device's kernels walk the
 * same batch. Run r is elements [offset[r], offset[r] + count[r]) of the
 * block, with weight decay when decay[r]; it is cut into blocks of
 * NN_OPTIM_BLOCK elements numbered from first[r]. 3 KiB: it travels by
 * value as a kernel parameter, with no device memory to manage.
 */
#define NN_OPTIM_RUNS 240
#define NN_OPTIM_BLOCK 4096
typedef struct nn_optim_runs {
	uint32_t n;      /* runs */
	uint32_t blocks; /* blocks of all runs */
	uint32_t offset[NN_OPTIM_RUNS];
	uint32_t count[NN_OPTIM_RUNS];
	uint32_t first[NN_OPTIM_RUNS];
	uint8_t decay[NN_OPTIM_RUNS];
} nn_optim_runs;

#ifdef __CUDACC__
#define NN_HOST_DEVICE __host__ __device__
#else
#define NN_HOST_DEVICE
#endif

/* Block b's elements [*lo, *hi) and its run's decay flag: the run is the
 * last whose first block is <= b (binary search; r->n >= 1). */
static inline NN_HOST_DEVICE int nn_optim_block(const nn_optim_runs *r,
						uint32_t b, size_t *lo,
						size_t *hi)
{
	uint32_t a = 0, z = r->n - 1;
	while (a < z) {
		uint32_t mid = (a + z + 1) / 2;
		if (r->first[mid] <= b)
			a = mid;
		else
			z = mid - 1;
	}
	size_t end = (size_t)r->offset[a] + r->count[a];
	*lo = (size_t)r->offset[a] + (size_t)(b - r->first[a]) * NN_OPTIM_BLOCK;
	*hi = *lo + NN_OPTIM_BLOCK < end ? *lo + NN_OPTIM_BLOCK : end;
	return r->decay[a];
}

/* ---- mixed precision on the CPU (layers/mixed.c) ------------------------ */

/*
 * The CPU backend's table entries (nn_backend_cpu): with ctx->precision
 * NN_PREC_FP32 each is the fp32 kernel above; with NN_PREC_BF16 or
 * NN_PREC_FP16 activations and convolution/linear weights are 16-bit
 * values (uint16_t) and the entries compute the mixed-precision graph
 * the device computes (see "Mixed precision" at the backend table).
 * Their arguments are the table's.
 */
int nn_cpu_mp_conv_forward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			   const void *w, const float *b, void *y,
			   ims_error *err);
int nn_cpu_mp_conv_backward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			    const void *w, const void *dy, void *dx, float *dw,
			    float *db, ims_error *err);
int nn_cpu_mp_linear_forward(nn_ctx *ctx, const nn_linear_desc *d,
			     const void *x, const void *w, const float *b,
			     void *y, ims_error *err);
int nn_cpu_mp_linear_backward(nn_ctx *ctx, const nn_linear_desc *d,
			      const void *x, const void *w, const void *dy,
			      void *dx, float *dw, float *db, ims_error *err);
int nn_cpu_mp_bn_forward_train(nn_ctx *ctx, const nn_bn_desc *d,
			       const void *x, const float *gamma,
			       const float *beta, float *running_mean,
			       float *running_var, float *save_mean,
			       float *save_invstd, void *y, ims_error *err);
int nn_cpu_mp_bn_forward_eval(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			      const float *gamma, const float *beta,
			      const float *running_mean,
			      const float *running_var, void *y,
			      ims_error *err);
int nn_cpu_mp_bn_backward(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			  const float *gamma, const float *save_mean,
			  const float *save_invstd, const void *dy, void *dx,
			  float *dgamma, float *dbeta, ims_error *err);
int nn_cpu_mp_bn_backward_frozen(nn_ctx *ctx, const nn_bn_desc *d,
				 const void *x, const float *gamma,
				 const float *running_mean,
				 const float *running_var, const void *dy,
				 void *dx, float *dgamma, float *dbeta,
				 ims_error *err);
int nn_cpu_mp_relu_forward(nn_ctx *ctx, size_t count, const void *x, void *y,
			   ims_error *err);
int nn_cpu_mp_relu_backward(nn_ctx *ctx, size_t count, const void *y,
			    const void *dy, void *dx, ims_error *err);
int nn_cpu_mp_maxpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
			      const void *x, void *y, int32_t *argmax,
			      ims_error *err);
int nn_cpu_mp_maxpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			       const int32_t *argmax, const void *dy, void *dx,
			       ims_error *err);
int nn_cpu_mp_avgpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
			      const void *x, void *y, ims_error *err);
int nn_cpu_mp_avgpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			       const void *dy, void *dx, ims_error *err);
int nn_cpu_mp_dropout_forward(nn_ctx *ctx, size_t count, float p,
			      uint64_t seed, const nn_dropout_place *at,
			      const void *x, void *y, uint8_t *mask,
			      ims_error *err);
int nn_cpu_mp_dropout_backward(nn_ctx *ctx, size_t count, float p,
			       const uint8_t *mask, const void *dy, void *dx,
			       ims_error *err);
int nn_cpu_mp_add_forward(nn_ctx *ctx, size_t count, const void *a,
			  const void *b, void *y, ims_error *err);
int nn_cpu_mp_add_relu_forward(nn_ctx *ctx, size_t count, const void *a,
			       const void *b, void *y, ims_error *err);
int nn_cpu_mp_accumulate(nn_ctx *ctx, size_t count, const void *dy, void *dx,
			 ims_error *err);
int nn_cpu_mp_from_f32(nn_ctx *ctx, size_t count, const float *src, void *dst,
		       ims_error *err);
int nn_cpu_mp_from_f32_nhwc(nn_ctx *ctx, int n, int c, size_t hw,
			    const float *src, void *dst, ims_error *err);
int nn_cpu_mp_to_f32(nn_ctx *ctx, size_t count, const void *src, float *dst,
		     ims_error *err);
/*
 * The CPU backend's state, ctx->dev: the fp32 workspace of the 16-bit
 * entries, allocated on their first use. A context whose ctx->dev is
 * another backend's state built on the CPU's table (the staged twin,
 * stage_host.c) starts that state with an nn_cpu_state, so the 16-bit
 * entries find theirs there, and frees its buffers with
 * nn_cpu_state_clear.
 */
typedef struct nn_cpu_state {
	float *wide;
	size_t wide_floats;
} nn_cpu_state;

/* Frees s's buffers (s itself stays); NULL accepted. */
void nn_cpu_state_clear(nn_cpu_state *s);
/* Frees the CPU backend's state; the table's release. */
void nn_cpu_release(nn_ctx *ctx);

/*
 * The rule of nn_ctx_freeze_workspace, for every workspace of a context:
 * 0 when a workspace of `have` bytes may grow to `want`; once frozen,
 * IMS_ELIMIT with a message naming `which` and both sizes.
 */
int nn_ctx_workspace_grow(nn_ctx *ctx, size_t have, size_t want,
			  const char *which, ims_error *err);

/*
 * Channels-last (a descriptor's nhwc = 1, nn_model_create with
 * ctx->channels_last): activations stored N x H x W x C, as cuDNN's
 * tensor-core kernels read them, with no transpose around each call. The
 * model lays its weight copy out as the kernels want it
 * (nn_backend.act_from_f32_nhwc): 16-bit values in mixed precision, a
 * copy of the fp32 ones in fp32 (TF32's tensor cores want NHWC too; on
 * the CPU, train/layers/cl32.c). This is the check every layout-aware
 * entry runs: nhwc 0 or 1.
 */
static inline int nn_layout_check(int nhwc, const char *what, ims_error *err)
{
	RETURN_IF(nhwc != 0 && nhwc != 1, err, IMS_EINVAL,
		  "cannot %s: layout flag %d is not 0 (NCHW) or 1 (NHWC)", what,
		  nhwc);
	return 0;
}

/* Bytes of one activation value in precision p (NN_PREC_*): 4 or 2; 0
 * for an unknown precision. */
static inline size_t nn_act_bytes(int p)
{
	return p == NN_PREC_FP32 ? 4 : p == NN_PREC_BF16 || p == NN_PREC_FP16 ? 2 : 0;
}

/* ---- backend table ----------------------------------------------------- */

/*
 * The kernels of one device. Model code calls these and nothing else, so a
 * CUDA backend slots in by filling the same table with device kernels;
 * pointers then address device memory.
 *
 * Mixed precision (ctx->precision NN_PREC_BF16 or NN_PREC_FP16): every
 * activation argument (x, y, a, b of add, dx, dy) and the weights w of
 * convolution and linear layers hold 16-bit values of that type; biases,
 * batch-norm parameters and statistics, and every parameter gradient
 * (dw, db, dgamma, dbeta) stay float. Each kernel reads 16-bit values
 * (exact in fp32), computes in fp32 (every sum, GEMM and batch-norm
 * statistic accumulated in fp32 or wider), and rounds to nearest even
 * once where it stores a 16-bit result; a gradient added into dx is
 * rounded once after the addition. Two places round twice, as the device
 * does: a convolution or linear layer with a bias rounds its product to
 * 16 bits, adds the bias in fp32 and rounds again; the weight gradient dw
 * of a convolution or linear layer is rounded to 16 bits (the 16-bit
 * weight's gradient) before it is stored as float. With NN_PREC_FP32
 * every such pointer is float and nothing is rounded.
 */
struct nn_backend {
	const char *name; /* "cpu", "cuda" */
	int (*conv_forward)(nn_ctx *, const nn_conv_desc *, const void *x,
			    const void *w, const float *b, void *y,
			    ims_error *);
	int (*conv_backward)(nn_ctx *, const nn_conv_desc *, const void *x,
			     const void *w, const void *dy, void *dx,
			     float *dw, float *db, ims_error *);
	int (*linear_forward)(nn_ctx *, const nn_linear_desc *, const void *x,
			      const void *w, const float *b, void *y,
			      ims_error *);
	int (*linear_backward)(nn_ctx *, const nn_linear_desc *,
			       const void *x, const void *w, const void *dy,
			       void *dx, float *dw, float *db, ims_error *);
	int (*bn_forward_train)(nn_ctx *, const nn_bn_desc *, const void *x,
				const float *gamma, const float *beta,
				float *running_mean, float *running_var,
				float *save_mean, float *save_invstd, void *y,
				ims_error *);
	int (*bn_forward_eval)(nn_ctx *, const nn_bn_desc *, const void *x,
			       const float *gamma, const float *beta,
			       const float *running_mean,
			       const float *running_var, void *y, ims_error *);
	int (*bn_backward)(nn_ctx *, const nn_bn_desc *, const void *x,
			   const float *gamma, const float *save_mean,
			   const float *save_invstd, const void *dy, void *dx,
			   float *dgamma, float *dbeta, ims_error *);
	int (*bn_backward_frozen)(nn_ctx *, const nn_bn_desc *, const void *x,
				  const float *gamma, const float *running_mean,
				  const float *running_var, const void *dy,
				  void *dx, float *dgamma, float *dbeta,
				  ims_error *);
	int (*relu_forward)(nn_ctx *, size_t, const void *x, void *y,
			    ims_error *);
	int (*relu_backward)(nn_ctx *, size_t, const void *y, const void *dy,
			     void *dx, ims_error *);
	int (*maxpool_forward)(nn_ctx *, const nn_pool_desc *, const void *x,
			       void *y, int32_t *argmax, ims_error *);
	int (*maxpool_backward)(nn_ctx *, const nn_pool_desc *,
				const int32_t *argmax, const void *dy,
				void *dx, ims_error *);
	int (*avgpool_forward)(nn_ctx *, const nn_pool_desc *, const void *x,
			       void *y, ims_error *);
	int (*avgpool_backward)(nn_ctx *, const nn_pool_desc *,
				const void *dy, void *dx, ims_error *);
	int (*dropout_forward)(nn_ctx *, size_t, float, uint64_t,
			       const nn_dropout_place *at, const void *x,
			       void *y, uint8_t *mask, ims_error *);
	int (*dropout_backward)(nn_ctx *, size_t, float, const uint8_t *mask,
				const void *dy, void *dx, ims_error *);
	int (*add_forward)(nn_ctx *, size_t, const void *a, const void *b,
			   void *y, ims_error *);
	/* y = relu(a + b), the ReLU applied to the stored sum as the ReLU
	 * layer would: a residual block's add and the ReLU after it in one
	 * pass (the model's, where the plan runs that ReLU in place) */
	int (*add_relu_forward)(nn_ctx *, size_t, const void *a,
				const void *b, void *y, ims_error *);
	/* dx += dy, or dx = dy with ctx->dx_overwrite; both activations */
	int (*accumulate)(nn_ctx *, size_t, const void *dy, void *dx,
			  ims_error *);
	/* Logits and their gradient are float whatever the precision: the
	 * model widens its last output before the loss. */
	int (*softmax_xent)(nn_ctx *, int, int, const float *, const int32_t *,
			    float, float, double *, float *, ims_error *);
	/* nn_xent_tally on the device, queued (NULL on the CPU, whose
	 * callers run nn_cpu_xent_tally). */
	int (*xent_tally)(nn_ctx *, int n, int k, const float *logits,
			  const int32_t *labels, float smoothing, float scale,
			  float *dlogits, int64_t step, nn_tally *tally,
			  ims_error *);
	/* Between float and the activation type: dst = src rounded to it
	 * (from_f32) or widened from it (to_f32), count values; a copy in
	 * fp32. The model's 16-bit input, weight copy, logits and loss
	 * gradient go through these. */
	int (*act_from_f32)(nn_ctx *, size_t count, const float *src,
			    void *dst, ims_error *);
	int (*act_to_f32)(nn_ctx *, size_t count, const void *src, float *dst,
			  ims_error *);
	/* Channels-last copies, 16 bits only: src is n x c x hw floats, dst
	 * gets the same values rounded, as n x hw x c. The model's input
	 * (N x 3 x H x W into N x H x W x 3) and a convolution's weight copy
	 * (c_out x c_in x kh*kw into c_out x kh*kw x c_in) go through it. */
	int (*act_from_f32_nhwc)(nn_ctx *, int n, int c, size_t hw,
				 const float *src, void *dst, ims_error *);
	/* Device memory: zeroed allocation (NULL when out of memory), free
	 * (NULL accepted), set to zero, copies in and out of host memory
	 * (both wait for the device), and a copy within device memory
	 * (queued: it waits for nothing). */
	void *(*alloc)(nn_ctx *, size_t bytes);
	void (*free)(nn_ctx *, void *);
	int (*zero)(nn_ctx *, void *, size_t bytes, ims_error *);
	int (*to_device)(nn_ctx *, void *dst, const void *src, size_t bytes,
			 ims_error *);
	int (*to_host)(nn_ctx *, void *dst, const void *src, size_t bytes,
		       ims_error *);
	int (*copy)(nn_ctx *, void *dst, const void *src, size_t bytes,
		    ims_error *);
	/* Frees ctx->dev (streams, handles, workspace); NULL when the
	 * backend keeps no state. Called by nn_ctx_release. */
	void (*release)(nn_ctx *);

	/* ---- plan time (nn_model_prepare): NULL on the CPU ---- */

	/* Chooses the algorithms of convolution d (ctx->conv_algo,
	 * ctx->precision, ctx->tf32) for forward, and for backward data
	 * (when dx is not NULL) and filter, and reserves their workspace. x,
	 * w, y, dy, dx, dw are buffers of the layer's shapes that the
	 * choice may read and overwrite (benchmarking times candidates on
	 * them). */
	int (*conv_prepare)(nn_ctx *, const nn_conv_desc *, const void *x,
			    const void *w, void *y, void *dy, void *dx,
			    float *dw, ims_error *);
	/* Reserves the workspace of the loss of up to n samples of k
	 * classes, and of fp16's gradient check. */
	int (*loss_prepare)(nn_ctx *, int n, int k, ims_error *);
	/* Reserves the workspace a batch norm of this shape needs (NULL:
	 * none). */
	int (*bn_prepare)(nn_ctx *, const nn_bn_desc *, ims_error *);
	/* Allocates the workspace reserved so far (nn_ctx_freeze_workspace
	 * then refuses growth). */
	int (*workspace_freeze)(nn_ctx *, ims_error *);

	/* ---- device-only entries: NULL on the CPU backend, whose callers
	 * then run their host code (train/optim.c's OpenMP loops; batches
	 * read in place). ---- */

	/* One SGD update of a batch of runs of the parameter block (p, g
	 * and buf are the blocks' starts; one launch), train/optim.c's
	 * sgd_run on the device: d = g (+ wd p in a decayed run); momentum:
	 * buf = first ? d : buf mom + d, d = nesterov ? d + mom buf : buf;
	 * p = p + neg_lr d. buf is NULL without momentum. Queued; does not
	 * wait. */
	int (*sgd_update)(nn_ctx *, float *p, const float *g, float *buf,
			  const nn_optim_runs *runs, float wd, float mom,
			  int first, int nesterov, float neg_lr, ims_error *);
	/* One Adam(W) update of a batch of runs, train/optim.c's adam_run
	 * on the device; in a decayed run l2 (Adam's L2 penalty, 0 for
	 * none) and decoupled (AdamW's p *= decay_mul) apply. Queued; does
	 * not wait. */
	int (*adam_update)(nn_ctx *, float *p, const float *g, float *m,
			   float *v, const nn_optim_runs *runs,
			   const nn_adam_scalars *s, float l2, int decoupled,
			   ims_error *);
	/*
	 * Input staging, double-buffered. stage_create makes two device
	 * slots of x_bytes (batch) and label_bytes (labels) each, a copy
	 * stream and events. stage_put queues the copy of host x and labels
	 * (pinned memory copies asynchronously; pageable memory works but is
	 * staged by the driver) into slot (0 or 1) on the copy stream, after
	 * the work that last used the slot (stage_done) has finished on the
	 * device. stage_get blocks the host until the slot's copy is done
	 * (the host batch may be reused after it returns), makes the compute
	 * stream wait for it too, and gives the slot's device pointers.
	 * stage_done marks the slot free once the compute work queued so far
	 * has run (call it after the step that reads the slot is queued).
	 * stage_reuse fails when a queued copy still reads host memory the
	 * caller is about to give back (nn_stage_reuse). Every one keeps the
	 * slot protocol of train/stage_slots.h. stage_free waits for the
	 * queued copies and accepts NULL. (Slots live in
	 * train/cuda/train_cuda.c, and in train/stage_host.c for the CPU
	 * twin.)
	 */
	int (*stage_create)(nn_ctx *, size_t x_bytes, size_t label_bytes,
			    nn_stage **out, ims_error *);
	int (*stage_put)(nn_stage *, int slot, const void *x, size_t x_bytes,
			 const int32_t *labels, size_t label_bytes,
			 ims_error *);
	int (*stage_get)(nn_stage *, int slot, float **x, int32_t **labels,
			 ims_error *);
	int (*stage_done)(nn_stage *, int slot, ims_error *);
	int (*stage_reuse)(nn_stage *, const void *host, ims_error *);
	void (*stage_free)(nn_stage *);
	/* Host memory for the batches stage_put copies from (the loader's
	 * ring): page-locked on a device, so copies run asynchronously on
	 * the copy engine; NULL when out of memory. host_memory names it
	 * for the log ("pinned memory (cudaHostAlloc)"). */
	void *(*host_alloc)(nn_ctx *, size_t bytes);
	void (*host_free)(nn_ctx *, void *);
	const char *host_memory;
	/* fp16 loss scaling's gradient check (train/loss_scale.h): sets
	 * *found_inf to 1 when any of g[0..n) is Inf or NaN, else 0, and
	 * multiplies every g[i] by inv (the 1/S that unscales them). One
	 * pass on the device; waits for it to read the flag back. */
	int (*unscale_check)(nn_ctx *, float *g, size_t n, float inv,
			     int *found_inf, ims_error *);
	/* Blocks the host until every piece of work queued on the context
	 * has run; reports an asynchronous device error. */
	int (*sync)(nn_ctx *, ims_error *);
	/* Recording (nn_ctx_record_begin and the rest, nn.h): graph_end
	 * gives an opaque replayable recording, or NULL; graph_free accepts
	 * NULL. train/cuda/train_cuda.c (CUDA graphs); the CPU twin's in
	 * train/record_host.c. */
	int (*graph_begin)(nn_ctx *, ims_error *);
	int (*graph_end)(nn_ctx *, int keep, void **out, ims_error *);
	int (*graph_launch)(nn_ctx *, void *graph, ims_error *);
	void (*graph_free)(nn_ctx *, void *graph);
	/* The device's PCI bus id ("0000:3b:00.0") into buf (len bytes),
	 * which NVML finds it by (train/gpumon.h). */
	int (*pci_bus_id)(nn_ctx *, char *buf, int len, ims_error *);
	/* nn_ctx_describe's line; NULL: "" (the CPU) */
	int (*describe)(const nn_ctx *, char *buf, size_t cap);
};

extern const nn_backend nn_backend_cpu;

#endif
