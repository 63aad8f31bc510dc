/*
 * cuda_kernels.h - the CUDA backend's own kernels (what neither cuDNN nor
 * cuBLAS has), as plain C launchers exported from the .cu files beside
 * this header. Each queues its kernels on `stream` and returns
 * cudaGetLastError() (cudaSuccess when queued); none waits for the device
 * except nn_cuda_k_xent, which reads its result back. Pointers are device
 * memory. A count of 0 launches nothing.
 *
 * Semantics are those of the CPU reference kernels in train/layers/ (see
 * nn_internal.h): `overwrite` is ctx->dx_overwrite (dx = ... instead of
 * dx += ...). The gathers that replace the CPU's scatters (pooling
 * backward) add each input's terms in the CPU's order, so they give the
 * CPU's bits; reductions run in double with a fixed order, so results do
 * not depend on scheduling.
 */
#ifndef IMSHARD_CUDA_KERNELS_H
#define IMSHARD_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "train/nn_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Activations (x, y, dx, dy) are of the type of `prec` (NN_PREC_*: float,
 * or bf16 / fp16 values, act_types.cuh); an unknown prec returns
 * cudaErrorInvalidValue. Biases, statistics and parameter gradients are
 * float.
 */

/* elementwise.cu */
cudaError_t nn_cuda_k_relu_forward(cudaStream_t s, int prec, size_t count,
				   const void *x, void *y);
cudaError_t nn_cuda_k_relu_backward(cudaStream_t s, int prec, size_t count,
				    const void *y, const void *dy, void *dx,
				    int overwrite);
/* y = a + b; with relu, then y = relu(y) on the stored sum */
cudaError_t nn_cuda_k_add(cudaStream_t s, int prec, size_t count,
			  const void *a, const void *b, void *y, int relu);
/* dx += dy */
cudaError_t nn_cuda_k_accumulate(cudaStream_t s, int prec, size_t count,
				 const void *dy, void *dx);
/* keep i when p == 0 or the top 53 bits of ims_hash64(seed, g) / 2^53
 * >= p, g the global index of i (nn_dropout_place: i itself when world
 * is 1, else (rank + k * world) * per_sample + f for i = k * per_sample
 * + f); y = keep ? x * scale : 0 (y = x when p == 0); mask may be NULL */
cudaError_t nn_cuda_k_dropout_forward(cudaStream_t s, int prec, size_t count,
				      float p, float scale, uint64_t seed,
				      size_t per_sample, int rank, int world,
				      const void *x, void *y, uint8_t *mask);
/* dx (+)= mask ? dy * scale : 0; mask NULL means all kept with scale 1 */
cudaError_t nn_cuda_k_dropout_backward(cudaStream_t s, int prec, size_t count,
				       float scale, const uint8_t *mask,
				       const void *dy, void *dx, int overwrite);
/* y[n, c, j] = round(y + b[c]) over n x c planes of hw values: the bias
 * of a 16-bit convolution or linear product */
cudaError_t nn_cuda_k_add_bias(cudaStream_t s, int prec, int n, int c,
			       size_t hw, const float *b, void *y);
/* y[i, o] = b[o] for i < n, o < out (the bias an fp32 GEMM then adds to) */
cudaError_t nn_cuda_k_fill_rows(cudaStream_t s, int n, int out,
				const float *b, float *y);

/* reduce.cu */
/* db[c] = sum over n < N, j < hw of dy[(n C + c) hw + j], in double */
cudaError_t nn_cuda_k_channel_sum(cudaStream_t s, int prec, int n, int c,
				  size_t hw, const void *dy, float *db);
/* nn_cpu_bn_backward_frozen; dx, dgamma, dbeta may be NULL */
cudaError_t nn_cuda_k_bn_frozen_backward(cudaStream_t s, int prec,
					 const nn_bn_desc *d, const void *x,
					 const float *gamma,
					 const float *running_mean,
					 const float *running_var,
					 const void *dy, void *dx,
					 float *dgamma, float *dbeta,
					 int overwrite);

/* bn_nhwc.cu: batch norm over m = N*H*W rows of c channels (channels-
 * last), the CPU's formulas; training forward and backward need
 * nn_cuda_k_bn_nhwc_workspace(m, c) bytes of workspace ws */
size_t nn_cuda_k_bn_nhwc_workspace(size_t m, int c);
cudaError_t nn_cuda_k_bn_nhwc_forward_train(
	cudaStream_t s, int prec, size_t m, int c, float eps, float momentum,
	const void *x, const float *gamma, const float *beta, float *rm,
	float *rv, float *save_mean, float *save_invstd, void *y, int relu,
	void *ws);
/* relu: y = relu(y) after the store, the ReLU layer's operation */
cudaError_t nn_cuda_k_bn_nhwc_forward_eval(
	cudaStream_t s, int prec, size_t m, int c, float eps, const void *x,
	const float *gamma, const float *beta, const float *rm,
	const float *rv, void *y, int relu);
/* dx (+)= ..., dgamma and dbeta overwritten; each may be NULL */
cudaError_t nn_cuda_k_bn_nhwc_backward(
	cudaStream_t s, int prec, size_t m, int c, const void *x,
	const float *gamma, const float *save_mean, const float *save_invstd,
	const void *dy, void *dx, float *dgamma, float *dbeta, int overwrite,
	void *ws);

/* pool.cu; descriptors already checked */
cudaError_t nn_cuda_k_maxpool_forward(cudaStream_t s, int prec,
				      const nn_pool_desc *d, const void *x,
				      void *y, int32_t *argmax);
cudaError_t nn_cuda_k_maxpool_backward(cudaStream_t s, int prec,
				       const nn_pool_desc *d,
				       const int32_t *argmax, const void *dy,
				       void *dx, int overwrite);
cudaError_t nn_cuda_k_avgpool_forward(cudaStream_t s, int prec,
				      const nn_pool_desc *d, const void *x,
				      void *y);
cudaError_t nn_cuda_k_avgpool_backward(cudaStream_t s, int prec,
				       const nn_pool_desc *d, const void *dy,
				       void *dx, int overwrite);

/* softmax_xent.cu */
/* What nn_cuda_k_xent reads back: the first sample whose label is outside
 * [0, K) (-1 when none) with that label, and the loss sum. */
typedef struct nn_cuda_xent_result {
	double loss_sum;
	int32_t bad_sample;
	int32_t bad_label;
} nn_cuda_xent_result;
/*
 * Bytes of workspace nn_cuda_k_xent needs for n samples (per-sample
 * losses and the result).
 */
size_t nn_cuda_k_xent_workspace(int n);
/*
 * nn_cpu_softmax_xent's computation: checks the labels first (nothing is
 * written to dlogits when one is bad), per-sample losses in double, their
 * sum in index order. Waits for the stream and fills *out.
 */
cudaError_t nn_cuda_k_xent(cudaStream_t s, int n, int k, const float *logits,
			   const int32_t *labels, float smoothing, float scale,
			   float *dlogits, void *workspace,
			   nn_cuda_xent_result *out);

/* nn_xent_tally's kernels (queued, nothing copied back) and the
 * workspace they need for n samples. */
size_t nn_cuda_k_xent_tally_workspace(int n);
cudaError_t nn_cuda_k_xent_tally(cudaStream_t s, int n, int k,
				 const float *logits, const int32_t *labels,
				 float smoothing, float scale, float *dlogits,
				 int64_t step, void *workspace, nn_tally *tally);

/* optim.cu: train/optim.c's sgd_run and adam_run (see nn_backend's
 * sgd_update and adam_update), the CPU's bits */
cudaError_t nn_cuda_k_sgd(cudaStream_t s, float *p, const float *g,
			  float *buf, const nn_optim_runs *r, float wd,
			  float mom, int first, int nesterov, float neg_lr);
cudaError_t nn_cuda_k_adam(cudaStream_t s, float *p, const float *g, float *m,
			   float *v, const nn_optim_runs *r,
			   const nn_adam_scalars *c, float l2, int decoupled);

/* half.cu: mixed precision (ctx->precision NN_PREC_BF16 or NN_PREC_FP16;
 * any other value fails with cudaErrorInvalidValue): the model's 16-bit
 * input and weight copies, the logits widened for the loss, the loss
 * gradient rounded, 16-bit weight gradients widened */
/* y[i] = x[i] rounded to the 16-bit type (nearest even; beyond its range
 * +-Inf); y holds count 16-bit values */
cudaError_t nn_cuda_k_to_half(cudaStream_t s, int precision, size_t count,
			      const float *x, void *y);
/* y[i] = (float)x[i], or y[i] += (float)x[i] with add */
cudaError_t nn_cuda_k_from_half(cudaStream_t s, int precision, size_t count,
				const void *x, float *y, int add);
/* Channels-last: x is n x c x hw floats, y the same values rounded as
 * n x hw x c (the model's input and convolution weight copies); these
 * two also take NN_PREC_FP32, a transposing copy */
cudaError_t nn_cuda_k_to_half_nhwc(cudaStream_t s, int precision, int n,
				   int c, size_t hw, const float *x, void *y);
/* ... and back: x is n x hw x c 16-bit values, y (+)= them as n x c x hw
 * floats (a channels-last convolution's weight gradient) */
cudaError_t nn_cuda_k_from_half_nhwc(cudaStream_t s, int precision, int n,
				     int c, size_t hw, const void *x, float *y,
				     int add);
/* x[i] = x[i] rounded to the 16-bit type and widened back: the value of
 * a 16-bit weight gradient, kept in fp32 */
cudaError_t nn_cuda_k_round_f32(cudaStream_t s, int precision, size_t count,
				float *x);
/* *found = 0, then for every i: *found = 1 if g[i] is Inf or NaN, and
 * g[i] *= inv (rounded once) */
cudaError_t nn_cuda_k_unscale_check(cudaStream_t s, size_t count, float *g,
				    float inv, int *found);

#ifdef __cplusplus
}
#endif

#endif
