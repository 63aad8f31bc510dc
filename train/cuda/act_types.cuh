/*
 * act_types.cuh - the activation types of the backend's own kernels:
 * float (fp32) or, in mixed precision, __nv_bfloat16 / __half
 * (ctx->precision, train/nn_internal.h). Kernels are templates over the
 * type T; they read values through nn_ld (exact widening to float),
 * compute in float (or double, for sums) and store through nn_st, which
 * rounds to nearest even once, as the CPU's 16-bit path does
 * (train/layers/mixed.c).
 */
#ifndef IMSHARD_ACT_TYPES_CUH
#define IMSHARD_ACT_TYPES_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>

#include "train/nn.h"

__device__ __forceinline__ float nn_ld(const float *p, size_t i)
{
	return p[i];
}

__device__ __forceinline__ float nn_ld(const __nv_bfloat16 *p, size_t i)
{
	return __bfloat162float(p[i]);
}

__device__ __forceinline__ float nn_ld(const __half *p, size_t i)
{
	return __half2float(p[i]);
}

__device__ __forceinline__ void nn_st(float *p, size_t i, float v)
{
	p[i] = v;
}

__device__ __forceinline__ void nn_st(__nv_bfloat16 *p, size_t i, float v)
{
	p[i] = __float2bfloat16_rn(v);
}

__device__ __forceinline__ void nn_st(__half *p, size_t i, float v)
{
	p[i] = __float2half_rn(v);
}

/*
 * Sixteen bytes of activations moved as one word: N values of T, loaded
 * and stored with one 128-bit access where nn_ld/nn_st make N accesses
 * of 2 (or 4) bytes. get and set widen and round exactly as nn_ld and
 * nn_st do, so a kernel gives the same bits either way.
 */
template <typename T> struct nn_bits;
template <> struct nn_bits<float> {
	typedef float word;
	__device__ __forceinline__ static float widen(word w) { return w; }
	__device__ __forceinline__ static word round(float v) { return v; }
};
template <> struct nn_bits<__nv_bfloat16> {
	typedef unsigned short word;
	__device__ __forceinline__ static float widen(word w)
	{
		return __bfloat162float(__ushort_as_bfloat16(w));
	}
	__device__ __forceinline__ static word round(float v)
	{
		return __bfloat16_as_ushort(__float2bfloat16_rn(v));
	}
};
template <> struct nn_bits<__half> {
	typedef unsigned short word;
	__device__ __forceinline__ static float widen(word w)
	{
		return __half2float(__ushort_as_half(w));
	}
	__device__ __forceinline__ static word round(float v)
	{
		return __half_as_ushort(__float2half_rn(v));
	}
};

template <typename T> struct __align__(16) nn_vec {
	enum { N = 16 / sizeof(T) };
	typename nn_bits<T>::word w[N];
	__device__ __forceinline__ float get(int k) const
	{
		return nn_bits<T>::widen(w[k]);
	}
	__device__ __forceinline__ void set(int k, float v)
	{
		w[k] = nn_bits<T>::round(v);
	}
};

/* vector j of p: elements j N .. j N + N - 1; p is 16-byte aligned */
template <typename T>
__device__ __forceinline__ nn_vec<T> nn_ldv(const T *p, size_t j)
{
	return reinterpret_cast<const nn_vec<T> *>(p)[j];
}

template <typename T>
__device__ __forceinline__ void nn_stv(T *p, size_t j, const nn_vec<T> &v)
{
	reinterpret_cast<nn_vec<T> *>(p)[j] = v;
}

/* 1 when p (NULL counts) can be read and written as nn_vec words */
static inline int nn_vec_aligned(const void *p)
{
	return ((size_t)p & 15) == 0;
}

/* 1 for the 16-bit types: a gradient added into dx is then summed apart
 * and rounded once into it (round(dx + sum)), where fp32 keeps the CPU
 * kernels' running sum from dx (dx + a + b). */
template <typename T> struct nn_half_t {
	static const bool value = sizeof(T) == 2;
};

/*
 * Runs the statement(s) with T the activation type of precision `prec`
 * (NN_PREC_*); an unknown precision returns cudaErrorInvalidValue from
 * the enclosing function.
 */
#define NN_CUDA_DISPATCH(prec, T, ...)                                         \
	do {                                                                   \
		switch (prec) {                                                \
		case NN_PREC_FP32: {                                           \
			typedef float T;                                       \
			__VA_ARGS__;                                           \
			break;                                                 \
		}                                                              \
		case NN_PREC_BF16: {                                           \
			typedef __nv_bfloat16 T;                               \
			__VA_ARGS__;                                           \
			break;                                                 \
		}                                                              \
		case NN_PREC_FP16: {                                           \
			typedef __half T;                                      \
			__VA_ARGS__;                                           \
			break;                                                 \
		}                                                              \
		default:                                                       \
			return cudaErrorInvalidValue;                          \
		}                                                              \
	} while (0)

#endif
