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
