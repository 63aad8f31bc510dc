/*
 * elementwise.cu - the backend's element-wise kernels: ReLU, residual add,
 * gradient accumulation, dropout and the bias rows of a linear layer.
 *
 * Each mirrors its CPU reference (train/layers/relu.c, add.c, dropout.c,
 * linear.c) operation for operation, products rounded on their own
 * (__fmul_rn) so that no multiply-add is fused where the CPU rounds
 * twice: the results are the CPU's bits. The dropout mask is the CPU's
 * counter-based draw, ims_hash64(seed, i) (common/rng.c), recomputed
 * here, so both backends drop the same elements.
 */
#include <stdint.h>

#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_launch.cuh"

__global__ static void relu_forward(size_t count, const float *x, float *y)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const float v = x[i];
		y[i] = v < 0.0f ? 0.0f : v; /* NaN passes, as on the CPU */
	}
}

__global__ static void relu_backward(size_t count, const float *y,
				     const float *dy, float *dx, int overwrite)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const float g = y[i] > 0.0f ? dy[i] : 0.0f;
		dx[i] = overwrite ? g : dx[i] + g;
	}
}

__global__ static void add(size_t count, const float *a, const float *b,
			   float *y)
{
	NN_CUDA_FOR_EACH(i, count)
	y[i] = a[i] + b[i];
}

__global__ static void accumulate(size_t count, const float *dy, float *dx)
{
	NN_CUDA_FOR_EACH(i, count)
	dx[i] += dy[i];
}

/* common/rng.c's splitmix64 and ims_hash64, bit for bit */
__device__ static inline uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

__device__ static inline uint64_t hash64(uint64_t a, uint64_t b)
{
	uint64_t x = a;
	uint64_t h = splitmix64(&x);
	x = h ^ b;
	return splitmix64(&x);
}

/* 2^-53, exact */
#define INV_2_53 (1.0 / 9007199254740992.0)

__global__ static void dropout_forward(size_t count, double p, float scale,
				       uint64_t seed, const float *x, float *y,
				       uint8_t *mask)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		int keep = 1;
		float v = x[i];
		if (p != 0.0) {
			keep = (double)(hash64(seed, (uint64_t)i) >> 11) *
				       INV_2_53 >=
			       p;
			v = keep ? __fmul_rn(v, scale) : 0.0f;
		}
		y[i] = v;
		if (mask)
			mask[i] = (uint8_t)keep;
	}
}

__global__ static void dropout_backward(size_t count, float scale,
					const uint8_t *mask, const float *dy,
					float *dx, int overwrite)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const float g = !mask ? dy[i]
			      : mask[i] ? __fmul_rn(dy[i], scale) : 0.0f;
		dx[i] = (overwrite ? 0.0f : dx[i]) + g;
	}
}

__global__ static void fill_rows(size_t count, int out, const float *b,
				 float *y)
{
	NN_CUDA_FOR_EACH(i, count)
	y[i] = b[i % (size_t)out];
}

extern "C" cudaError_t nn_cuda_k_relu_forward(cudaStream_t s, size_t count,
					      const float *x, float *y)
{
	if (count)
		relu_forward<<<nn_cuda_blocks(count), NN_CUDA_THREADS, 0, s>>>(
			count, x, y);
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_relu_backward(cudaStream_t s, size_t count,
					       const float *y, const float *dy,
					       float *dx, int overwrite)
{
	if (count)
		relu_backward<<<nn_cuda_blocks(count), NN_CUDA_THREADS, 0, s>>>(
			count, y, dy, dx, overwrite);
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_add(cudaStream_t s, size_t count,
				     const float *a, const float *b, float *y)
{
	if (count)
		add<<<nn_cuda_blocks(count), NN_CUDA_THREADS, 0, s>>>(count, a,
								      b, y);
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_accumulate(cudaStream_t s, size_t count,
					    const float *dy, float *dx)
{
	if (count)
		accumulate<<<nn_cuda_blocks(count), NN_CUDA_THREADS, 0, s>>>(
			count, dy, dx);
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_dropout_forward(cudaStream_t s, size_t count,
						 float p, float scale,
						 uint64_t seed, const float *x,
						 float *y, uint8_t *mask)
{
	if (count)
		dropout_forward<<<nn_cuda_blocks(count), NN_CUDA_THREADS, 0,
				  s>>>(count, (double)p, scale, seed, x, y, mask);
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_dropout_backward(cudaStream_t s,
						  size_t count, float scale,
						  const uint8_t *mask,
						  const float *dy, float *dx,
						  int overwrite)
{
	if (count)
		dropout_backward<<<nn_cuda_blocks(count), NN_CUDA_THREADS, 0,
				   s>>>(count, scale, mask, dy, dx, overwrite);
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_fill_rows(cudaStream_t s, int n, int out,
					   const float *b, float *y)
{
	size_t count = (size_t)n * (size_t)out;
	if (count)
		fill_rows<<<nn_cuda_blocks(count), NN_CUDA_THREADS, 0, s>>>(
			count, out, b, y);
	return cudaGetLastError();
}
