/*
 * cuda_internal.h - the CUDA backend's private state and check macros,
 * shared by its C translation units (ctx_cuda.c and the cuDNN and cuBLAS
 * callers). Kernels live in .cu files behind cuda_kernels.h.
 *
 * Caveats:
 *  - One nn_cuda_dev per context, used by one host thread at a time. All
 *    work is queued on dev->stream; cuDNN and cuBLAS are bound to it, so
 *    the order of calls is the order of execution and a call returning
 *    does not mean the device has finished (to_host, zero-copy readers
 *    and softmax_xent wait).
 *  - The workspace is one device buffer reused by every call. Calls are
 *    ordered on one stream, so a later call may reuse it while an earlier
 *    one is still queued; growing it frees the old buffer, which cudaFree
 *    does only after the device is idle, NCCL's kernels included. A
 *    training run therefore reserves what every kernel will need at plan
 *    time (nn_model_prepare: conv_prepare, loss_prepare) and freezes the
 *    workspace before its first step; from then on nothing grows it
 *    (nn_ctx_workspace_grow refuses) and convolutions choose among the
 *    algorithms that fit. cuBLAS gets a workspace of its own at set-up.
 */
#ifndef IMSHARD_CUDA_INTERNAL_H
#define IMSHARD_CUDA_INTERNAL_H

#include <cublas_v2.h>

#include "train/cuda/cublas_dl.h"
#include <cuda_runtime.h>
#include <cudnn.h>

#include "train/conv_algo.h"
#include "train/nn_internal.h"

typedef struct nn_cuda_dev {
	int device;
	cudaStream_t stream;
	cudnnHandle_t cudnn;
	cublasHandle_t cublas;
	/* descriptors set before each use (setting allocates nothing) */
	cudnnTensorDescriptor_t x_desc, y_desc, bias_desc, bn_desc;
	cudnnFilterDescriptor_t w_desc;
	cudnnConvolutionDescriptor_t conv_desc;
	/* the workspace: cuDNN's, and the kernels' scratch; ws_reserved is
	 * the most nn_cuda_reserve was asked for */
	void *ws;
	size_t ws_bytes, ws_reserved;
	/* cuBLAS's own workspace (cublasSetWorkspace) */
	void *blas_ws;
	/* convolution algorithms, one entry per shape, precision, math and
	 * mode (train/conv_algo.h) */
	nn_algo_cache algos;
	int sm_major; /* compute capability */
} nn_cuda_dev;

/* cuBLAS's workspace: what NVIDIA recommends for Hopper (32 MiB). */
#define NN_CUDA_BLAS_WS ((size_t)32 << 20)

/* The most workspace a convolution algorithm may ask for: faster ones
 * that want more are passed over. */
#define NN_CUDA_WS_MAX ((size_t)1 << 30)

extern const nn_backend nn_backend_cuda;

static inline nn_cuda_dev *nn_cuda_dev_of(nn_ctx *ctx)
{
	return (nn_cuda_dev *)ctx->dev;
}

/*
 * Turn a failed CUDA runtime, cuDNN or cuBLAS status into an ims_error:
 * "cannot WHAT: LIBRARY error NAME (message) at FILE:LINE". Out of
 * memory maps to IMS_ENOMEM, everything else to IMS_EIO. Return the code.
 */
int nn_cuda_fail_rt(ims_error *err, cudaError_t e, const char *what,
		    const char *file, int line);
int nn_cuda_fail_dnn(ims_error *err, cudnnStatus_t s, const char *what,
		     const char *file, int line);
int nn_cuda_fail_blas(ims_error *err, cublasStatus_t s, const char *what,
		      const char *file, int line);

/* Return from the calling function when a call fails. */
#define CUDA_CHECK(err, what, call)                                            \
	do {                                                                   \
		cudaError_t cuda_e_ = (call);                                  \
		if (cuda_e_ != cudaSuccess)                                    \
			return nn_cuda_fail_rt((err), cuda_e_, (what),         \
					       __FILE__, __LINE__);            \
	} while (0)

#define CUDNN_CHECK(err, what, call)                                           \
	do {                                                                   \
		cudnnStatus_t cudnn_s_ = (call);                               \
		if (cudnn_s_ != CUDNN_STATUS_SUCCESS)                          \
			return nn_cuda_fail_dnn((err), cudnn_s_, (what),       \
						__FILE__, __LINE__);           \
	} while (0)

#define CUBLAS_CHECK(err, what, call)                                          \
	do {                                                                   \
		cublasStatus_t cublas_s_ = (call);                             \
		if (cublas_s_ != CUBLAS_STATUS_SUCCESS)                        \
			return nn_cuda_fail_blas((err), cublas_s_, (what),     \
						 __FILE__, __LINE__);          \
	} while (0)

/*
 * At least `bytes` of device workspace (256-byte aligned), valid until the
 * next call; NULL with err set when device memory runs out, or when it
 * would grow after nn_ctx_freeze_workspace (IMS_ELIMIT).
 */
void *nn_cuda_workspace(nn_ctx *ctx, size_t bytes, ims_error *err);
/* The same for a use that does not recur (timing algorithms): the size
 * frozen later need not hold it. */
void *nn_cuda_workspace_temp(nn_ctx *ctx, size_t bytes, ims_error *err);
/* Plan time: the workspace will need `bytes` (allocated by
 * nn_ctx_freeze_workspace). */
void nn_cuda_reserve(nn_ctx *ctx, size_t bytes);
/* The workspace a call may use without growing it: everything while it
 * may grow (up to `cap`), what is allocated once frozen. */
size_t nn_cuda_ws_limit(nn_ctx *ctx, size_t cap);

/* Rounds a byte count up to 256, so carved workspace pieces stay aligned
 * for any type. */
static inline size_t nn_cuda_round256(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

/* Whether ctx computes convolutions and linear layers in 16 bits
 * (nn_ctx.precision); an unknown value fails in the layers, not here. */
static inline int nn_cuda_is_half(const nn_ctx *ctx)
{
	return ctx->precision != NN_PREC_FP32;
}

/* Fails with one line when ctx->precision is none of NN_PREC_*. */
static inline int nn_cuda_check_precision(const nn_ctx *ctx, const char *what,
					  ims_error *err)
{
	RETURN_IF(ctx->precision != NN_PREC_FP32 &&
			  ctx->precision != NN_PREC_BF16 &&
			  ctx->precision != NN_PREC_FP16,
		  err, IMS_EINVAL, "cannot %s: unknown precision %d", what,
		  ctx->precision);
	return 0;
}

/* The layer entries of the backend table (one file per family); their
 * arguments are the table's (train/nn_internal.h): activations and
 * convolution/linear weights of the context's activation type. */
int nn_cuda_conv_forward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			 const void *w, const float *b, void *y,
			 ims_error *err);
int nn_cuda_conv_backward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			  const void *w, const void *dy, void *dx, float *dw,
			  float *db, ims_error *err);
int nn_cuda_conv_prepare(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			 const void *w, void *y, void *dy, void *dx, float *dw,
			 ims_error *err);
void nn_cuda_conv_release(nn_cuda_dev *dev);

int nn_cuda_linear_forward(nn_ctx *ctx, const nn_linear_desc *d,
			   const void *x, const void *w, const float *b,
			   void *y, ims_error *err);
int nn_cuda_linear_backward(nn_ctx *ctx, const nn_linear_desc *d,
			    const void *x, const void *w, const void *dy,
			    void *dx, float *dw, float *db, ims_error *err);

int nn_cuda_bn_prepare(nn_ctx *ctx, const nn_bn_desc *d, ims_error *err);
int nn_cuda_bn_forward_train(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			     const float *gamma, const float *beta,
			     float *running_mean, float *running_var,
			     float *save_mean, float *save_invstd, void *y,
			     ims_error *err);
int nn_cuda_bn_forward_eval(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			    const float *gamma, const float *beta,
			    const float *running_mean,
			    const float *running_var, void *y, ims_error *err);
int nn_cuda_bn_backward(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			const float *gamma, const float *save_mean,
			const float *save_invstd, const void *dy, void *dx,
			float *dgamma, float *dbeta, ims_error *err);
int nn_cuda_bn_backward_frozen(nn_ctx *ctx, const nn_bn_desc *d,
			       const void *x, const float *gamma,
			       const float *running_mean,
			       const float *running_var, const void *dy,
			       void *dx, float *dgamma, float *dbeta,
			       ims_error *err);

/* layers_cuda.c: the layers that are own kernels only, and the
 * conversions between float and the activation type */
int nn_cuda_relu_forward(nn_ctx *ctx, size_t count, const void *x, void *y,
			 ims_error *err);
int nn_cuda_relu_backward(nn_ctx *ctx, size_t count, const void *y,
			  const void *dy, void *dx, ims_error *err);
int nn_cuda_maxpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
			    const void *x, void *y, int32_t *argmax,
			    ims_error *err);
int nn_cuda_maxpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			     const int32_t *argmax, const void *dy, void *dx,
			     ims_error *err);
int nn_cuda_avgpool_forward(nn_ctx *ctx, const nn_pool_desc *d,
			    const void *x, void *y, ims_error *err);
int nn_cuda_avgpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			     const void *dy, void *dx, ims_error *err);
int nn_cuda_dropout_forward(nn_ctx *ctx, size_t count, float p,
			    uint64_t seed, const nn_dropout_place *at,
			    const void *x, void *y, uint8_t *mask,
			    ims_error *err);
int nn_cuda_dropout_backward(nn_ctx *ctx, size_t count, float p,
			     const uint8_t *mask, const void *dy, void *dx,
			     ims_error *err);
int nn_cuda_add_forward(nn_ctx *ctx, size_t count, const void *a,
			const void *b, void *y, ims_error *err);
int nn_cuda_add_relu_forward(nn_ctx *ctx, size_t count, const void *a,
			     const void *b, void *y, ims_error *err);
int nn_cuda_accumulate(nn_ctx *ctx, size_t count, const void *dy, void *dx,
		       ims_error *err);
int nn_cuda_act_from_f32(nn_ctx *ctx, size_t count, const float *src,
			 void *dst, ims_error *err);
int nn_cuda_act_to_f32(nn_ctx *ctx, size_t count, const void *src,
		       float *dst, ims_error *err);
int nn_cuda_act_from_f32_nhwc(nn_ctx *ctx, int n, int c, size_t hw,
			      const float *src, void *dst, ims_error *err);
int nn_cuda_softmax_xent(nn_ctx *ctx, int n, int k, const float *logits,
			 const int32_t *labels, float smoothing, float scale,
			 double *loss_sum, float *dlogits, ims_error *err);
int nn_cuda_xent_tally(nn_ctx *ctx, int n, int k, const float *logits,
		       const int32_t *labels, float smoothing, float scale,
		       float *dlogits, int64_t step, nn_tally *tally,
		       ims_error *err);

/* train_cuda.c: the optimiser updates, input staging and sync entries
 * (nn_internal.h's backend table says what each does) */
int nn_cuda_sgd_update(nn_ctx *ctx, float *p, const float *g, float *buf,
		       const nn_optim_runs *r, float wd, float mom, int first,
		       int nesterov, float neg_lr, ims_error *err);
int nn_cuda_adam_update(nn_ctx *ctx, float *p, const float *g, float *m,
			float *v, const nn_optim_runs *r,
			const nn_adam_scalars *s, float l2, int decoupled,
			ims_error *err);
int nn_cuda_unscale_check(nn_ctx *ctx, float *g, size_t n, float inv,
			  int *found_inf, ims_error *err);
int nn_cuda_loss_prepare(nn_ctx *ctx, int n, int k, ims_error *err);
int nn_cuda_sync(nn_ctx *ctx, ims_error *err);
int nn_cuda_pci_bus_id(nn_ctx *ctx, char *buf, int len, ims_error *err);
int nn_cuda_graph_begin(nn_ctx *ctx, ims_error *err);
int nn_cuda_graph_end(nn_ctx *ctx, int keep, void **out, ims_error *err);
int nn_cuda_graph_launch(nn_ctx *ctx, void *graph, ims_error *err);
void nn_cuda_graph_free(nn_ctx *ctx, void *graph);
int nn_cuda_stage_create(nn_ctx *ctx, size_t x_bytes, size_t label_bytes,
			 nn_stage **out, ims_error *err);
int nn_cuda_stage_put(nn_stage *s, int slot, const void *x, size_t x_bytes,
		      const int32_t *labels, size_t label_bytes, ims_error *err);
int nn_cuda_stage_get(nn_stage *s, int slot, float **x, int32_t **labels,
		      ims_error *err);
int nn_cuda_stage_done(nn_stage *s, int slot, ims_error *err);
int nn_cuda_stage_reuse(nn_stage *s, const void *host, ims_error *err);
void nn_cuda_stage_free(nn_stage *s);
void *nn_cuda_host_alloc(nn_ctx *ctx, size_t bytes);
void nn_cuda_host_free(nn_ctx *ctx, void *p);

#endif
