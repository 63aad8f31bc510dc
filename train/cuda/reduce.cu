/*
 * reduce.cu - per-channel reductions: the bias gradients of convolution
 * and linear layers, and the backward pass of frozen batch norm (cuDNN
 * has no backward for its inference-mode forward).
 *
 * One block per channel: thread t sums elements t, t + 256, ... of the
 * channel's N*HW values in double, then nn_cuda_block_sum combines the
 * threads in a fixed tree. The order differs from the CPU's (plane by
 * plane, n in order) but is fixed, so results are deterministic and
 * within double rounding of the CPU's. The gradients and inputs read are
 * of the activation type T (act_types.cuh); the sums and the parameter
 * gradients are double and float.
 */
#include <math.h>

#include "train/cuda/act_types.cuh"
#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_launch.cuh"

template <typename T>
__global__ static void channel_sum(int n, int c, size_t hw, const T *dy,
				   float *db)
{
	__shared__ double sh[NN_CUDA_THREADS];
	const int ch = blockIdx.x;
	const size_t m = (size_t)n * hw;
	double s = 0.0;
	for (size_t i = threadIdx.x; i < m; i += blockDim.x) {
		const size_t img = i / hw, j = i - img * hw;
		s += nn_ld(dy, (img * (size_t)c + ch) * hw + j);
	}
	s = nn_cuda_block_sum(s, sh);
	if (threadIdx.x == 0)
		db[ch] = (float)s;
}

/*
 * With invstd = 1/sqrt(var + eps) (double, as on the CPU):
 *   dx (+)= dy * (float)(gamma invstd), dbeta = sum dy,
 *   dgamma = invstd * sum dy (x - mean), x - mean in float.
 */
template <typename T>
__global__ static void bn_frozen_backward(int n, int c, size_t hw, float eps,
					  const T *x, const float *gamma,
					  const float *rm, const float *rv,
					  const T *dy, T *dx, float *dgamma,
					  float *dbeta, int overwrite)
{
	__shared__ double sh[NN_CUDA_THREADS];
	const int ch = blockIdx.x;
	const double invstd = 1.0 / sqrt((double)rv[ch] + (double)eps);
	const float mu = rm[ch];
	const float g = (float)((double)gamma[ch] * invstd);
	const size_t m = (size_t)n * hw;
	double s = 0.0, sx = 0.0;
	for (size_t i = threadIdx.x; i < m; i += blockDim.x) {
		const size_t img = i / hw, j = i - img * hw;
		const size_t at = (img * (size_t)c + ch) * hw + j;
		const float d = nn_ld(dy, at);
		s += d;
		sx += (double)d * (double)(nn_ld(x, at) - mu);
		if (dx) {
			const float v = __fmul_rn(d, g);
			nn_st(dx, at, overwrite ? v : nn_ld(dx, at) + v);
		}
	}
	s = nn_cuda_block_sum(s, sh);
	sx = nn_cuda_block_sum(sx, sh);
	if (threadIdx.x == 0) {
		if (dbeta)
			dbeta[ch] = (float)s;
		if (dgamma)
			dgamma[ch] = (float)(sx * invstd);
	}
}

extern "C" cudaError_t nn_cuda_k_channel_sum(cudaStream_t s, int prec, int n,
					     int c, size_t hw, const void *dy,
					     float *db)
{
	if (n <= 0 || c <= 0 || !hw)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 NN_LAUNCH(channel_sum<T>, (unsigned)c, NN_CUDA_THREADS,
				   s)(n, c, hw, (const T *)dy, db));
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_bn_frozen_backward(
	cudaStream_t s, int prec, const nn_bn_desc *d, const void *x,
	const float *gamma, const float *running_mean,
	const float *running_var, const void *dy, void *dx, float *dgamma,
	float *dbeta, int overwrite)
{
	const size_t hw = (size_t)d->h * (size_t)d->w;
	if (d->n <= 0 || d->c <= 0 || !hw)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 NN_LAUNCH(bn_frozen_backward<T>, (unsigned)d->c,
				   NN_CUDA_THREADS, s)(
				 d->n, d->c, hw, d->eps, (const T *)x, gamma,
				 running_mean, running_var, (const T *)dy,
				 (T *)dx, dgamma, dbeta, overwrite));
	return cudaGetLastError();
}
