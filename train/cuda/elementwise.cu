/*
 * elementwise.cu - the backend's element-wise kernels: ReLU, residual add,
 * gradient accumulation, dropout, the bias of a 16-bit product, and the
 * bias rows of an fp32 linear layer.
 *
 * Each mirrors its CPU reference (train/layers/relu.c, add.c, dropout.c,
 * linear.c; in 16 bits train/layers/mixed.c) operation for operation,
 * products rounded on their own (__fmul_rn) so that no multiply-add is
 * fused where the CPU rounds twice: in fp32 the results are the CPU's
 * bits. The dropout mask is the CPU's counter-based draw,
 * ims_hash64(seed, i) (common/rng.c), recomputed here, so both backends
 * drop the same elements. Activations are of type T (act_types.cuh).
 *
 * ReLU, add and accumulate, the ones a resnet runs over every activation,
 * also come as vector kernels that move 16 bytes per access (nn_vec):
 * they run when every pointer is 16-byte aligned (the plan's arena is
 * aligned to 256, so the model's are), the single-value kernel taking
 * the count's last count mod N values and any unaligned call. Each value
 * goes through the same operations either way.
 */
#include <stdint.h>

#include "train/cuda/act_types.cuh"
#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_launch.cuh"

template <typename T>
__global__ static void relu_forward(size_t count, const T *x, T *y)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const float v = nn_ld(x, i);
		nn_st(y, i, v < 0.0f ? 0.0f : v); /* NaN passes, as on the CPU */
	}
}

template <typename T>
__global__ static void relu_backward(size_t count, const T *y, const T *dy,
				     T *dx, int overwrite)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const float g = nn_ld(y, i) > 0.0f ? nn_ld(dy, i) : 0.0f;
		nn_st(dx, i, overwrite ? g : nn_ld(dx, i) + g);
	}
}

/* with relu, the ReLU layer's operation on the stored sum */
template <typename T>
__global__ static void add(size_t count, const T *a, const T *b, T *y,
			   int relu)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		nn_st(y, i, nn_ld(a, i) + nn_ld(b, i));
		if (relu) {
			const float v = nn_ld(y, i);
			nn_st(y, i, v < 0.0f ? 0.0f : v);
		}
	}
}

template <typename T>
__global__ static void accumulate(size_t count, const T *dy, T *dx)
{
	NN_CUDA_FOR_EACH(i, count)
	nn_st(dx, i, nn_ld(dx, i) + nn_ld(dy, i));
}

template <typename T>
__global__ static void relu_forward_v(size_t nv, const T *x, T *y)
{
	NN_CUDA_FOR_EACH(j, nv)
	{
		nn_vec<T> v = nn_ldv(x, j);
#pragma unroll
		for (int k = 0; k < nn_vec<T>::N; k++) {
			const float f = v.get(k);
			v.set(k, f < 0.0f ? 0.0f : f);
		}
		nn_stv(y, j, v);
	}
}

template <typename T>
__global__ static void relu_backward_v(size_t nv, const T *y, const T *dy,
				       T *dx, int overwrite)
{
	NN_CUDA_FOR_EACH(j, nv)
	{
		const nn_vec<T> a = nn_ldv(y, j), d = nn_ldv(dy, j);
		nn_vec<T> o;
		if (!overwrite)
			o = nn_ldv((const T *)dx, j);
#pragma unroll
		for (int k = 0; k < nn_vec<T>::N; k++) {
			const float g = a.get(k) > 0.0f ? d.get(k) : 0.0f;
			o.set(k, overwrite ? g : o.get(k) + g);
		}
		nn_stv(dx, j, o);
	}
}

template <typename T>
__global__ static void add_v(size_t nv, const T *a, const T *b, T *y,
			     int relu)
{
	NN_CUDA_FOR_EACH(j, nv)
	{
		const nn_vec<T> u = nn_ldv(a, j), v = nn_ldv(b, j);
		nn_vec<T> o;
#pragma unroll
		for (int k = 0; k < nn_vec<T>::N; k++) {
			o.set(k, u.get(k) + v.get(k));
			if (relu) {
				const float f = o.get(k);
				o.set(k, f < 0.0f ? 0.0f : f);
			}
		}
		nn_stv(y, j, o);
	}
}

template <typename T>
__global__ static void accumulate_v(size_t nv, const T *dy, T *dx)
{
	NN_CUDA_FOR_EACH(j, nv)
	{
		const nn_vec<T> d = nn_ldv(dy, j);
		nn_vec<T> o = nn_ldv((const T *)dx, j);
#pragma unroll
		for (int k = 0; k < nn_vec<T>::N; k++)
			o.set(k, o.get(k) + d.get(k));
		nn_stv(dx, j, o);
	}
}

/* how many of count values the vector kernel takes: 0 unless every
 * pointer is 16-byte aligned */
template <typename T>
static size_t vectors(size_t count, const void *a, const void *b,
		      const void *c)
{
	if (!nn_vec_aligned(a) || !nn_vec_aligned(b) || !nn_vec_aligned(c))
		return 0;
	return count / nn_vec<T>::N;
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

/* Local element i's index in the batch of all ranks: rank + k * world is
 * the global sample of local sample k (the CPU's global_index). */
__device__ static inline uint64_t global_index(size_t i, uint64_t per_sample,
					       int rank, int world)
{
	if (world == 1)
		return i;
	const uint64_t f = i % per_sample, k = i / per_sample;
	return ((uint64_t)rank + k * (uint64_t)world) * per_sample + f;
}

template <typename T>
__global__ static void dropout_forward(size_t count, double p, float scale,
				       uint64_t seed, uint64_t per_sample,
				       int rank, int world, const T *x, T *y,
				       uint8_t *mask)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		int keep = 1;
		float v = nn_ld(x, i);
		if (p != 0.0) {
			const uint64_t g =
				global_index(i, per_sample, rank, world);
			keep = (double)(hash64(seed, g) >> 11) * INV_2_53 >= p;
			v = keep ? __fmul_rn(v, scale) : 0.0f;
		}
		nn_st(y, i, v);
		if (mask)
			mask[i] = (uint8_t)keep;
	}
}

template <typename T>
__global__ static void dropout_backward(size_t count, float scale,
					const uint8_t *mask, const T *dy, T *dx,
					int overwrite)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const float d = nn_ld(dy, i);
		const float g = !mask ? d : mask[i] ? __fmul_rn(d, scale) : 0.0f;
		nn_st(dx, i, (overwrite ? 0.0f : nn_ld(dx, i)) + g);
	}
}

/* y = round(y + b[c]): the bias of a 16-bit convolution or linear
 * product, planes of hw values */
template <typename T>
__global__ static void add_bias(size_t count, int c, size_t hw,
				const float *b, T *y)
{
	NN_CUDA_FOR_EACH(i, count)
	nn_st(y, i, nn_ld(y, i) + b[(i / hw) % (size_t)c]);
}

__global__ static void fill_rows(size_t count, int out, const float *b,
				 float *y)
{
	NN_CUDA_FOR_EACH(i, count)
	y[i] = b[i % (size_t)out];
}

#define LAUNCH(kernel, count, T, s, ...)                                       \
	NN_LAUNCH_OVER(kernel<T>, count, s)(__VA_ARGS__)

extern "C" cudaError_t nn_cuda_k_relu_forward(cudaStream_t s, int prec,
					      size_t count, const void *x,
					      void *y)
{
	if (!count)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T, {
		const size_t nv = vectors<T>(count, x, y, NULL);
		const size_t v = nv * nn_vec<T>::N, rest = count - v;
		if (nv)
			LAUNCH(relu_forward_v, nv, T, s, nv, (const T *)x, (T *)y);
		if (rest)
			LAUNCH(relu_forward, rest, T, s, rest, (const T *)x + v,
			       (T *)y + v);
	});
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_relu_backward(cudaStream_t s, int prec,
					       size_t count, const void *y,
					       const void *dy, void *dx,
					       int overwrite)
{
	if (!count)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T, {
		const size_t nv = vectors<T>(count, y, dy, dx);
		const size_t v = nv * nn_vec<T>::N, rest = count - v;
		if (nv)
			LAUNCH(relu_backward_v, nv, T, s, nv, (const T *)y,
			       (const T *)dy, (T *)dx, overwrite);
		if (rest)
			LAUNCH(relu_backward, rest, T, s, rest, (const T *)y + v,
			       (const T *)dy + v, (T *)dx + v, overwrite);
	});
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_add(cudaStream_t s, int prec, size_t count,
				     const void *a, const void *b, void *y,
				     int relu)
{
	if (!count)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T, {
		const size_t nv = vectors<T>(count, a, b, y);
		const size_t v = nv * nn_vec<T>::N, rest = count - v;
		if (nv)
			LAUNCH(add_v, nv, T, s, nv, (const T *)a, (const T *)b,
			       (T *)y, relu);
		if (rest)
			LAUNCH(add, rest, T, s, rest, (const T *)a + v,
			       (const T *)b + v, (T *)y + v, relu);
	});
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_accumulate(cudaStream_t s, int prec,
					    size_t count, const void *dy,
					    void *dx)
{
	if (!count)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T, {
		const size_t nv = vectors<T>(count, dy, dx, NULL);
		const size_t v = nv * nn_vec<T>::N, rest = count - v;
		if (nv)
			LAUNCH(accumulate_v, nv, T, s, nv, (const T *)dy,
			       (T *)dx);
		if (rest)
			LAUNCH(accumulate, rest, T, s, rest, (const T *)dy + v,
			       (T *)dx + v);
	});
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_dropout_forward(
	cudaStream_t s, int prec, size_t count, float p, float scale,
	uint64_t seed, size_t per_sample, int rank, int world, const void *x,
	void *y, uint8_t *mask)
{
	if (!count)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 LAUNCH(dropout_forward, count, T, s, count, (double)p,
				scale, seed, (uint64_t)per_sample, rank, world,
				(const T *)x, (T *)y, mask));
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_dropout_backward(cudaStream_t s, int prec,
						  size_t count, float scale,
						  const uint8_t *mask,
						  const void *dy, void *dx,
						  int overwrite)
{
	if (!count)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 LAUNCH(dropout_backward, count, T, s, count, scale,
				mask, (const T *)dy, (T *)dx, overwrite));
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_add_bias(cudaStream_t s, int prec, int n,
					  int c, size_t hw, const float *b,
					  void *y)
{
	const size_t count = (size_t)n * (size_t)c * hw;
	if (!count)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 LAUNCH(add_bias, count, T, s, count, c, hw, b,
				(T *)y));
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_fill_rows(cudaStream_t s, int n, int out,
					   const float *b, float *y)
{
	size_t count = (size_t)n * (size_t)out;
	if (count)
		NN_LAUNCH_OVER(fill_rows, count, s)(count, out, b, y);
	return cudaGetLastError();
}
