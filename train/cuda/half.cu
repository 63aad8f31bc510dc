/*
 * half.cu - the kernels of mixed precision (--precision bf16 / fp16):
 * conversions between fp32 and the 16-bit activation type (the model's
 * input and weight copies, its logits and loss gradient, 16-bit weight
 * gradients widened or rounded), and fp16's gradient check (loss
 * scaling, train/loss_scale.h).
 *
 * Rounding is to nearest even (__float2bfloat16_rn, __float2half_rn);
 * a value beyond the 16-bit range becomes +-Inf (fp16 above 65504), which
 * is what the gradient check then finds. Widening is exact.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "train/cuda/act_types.cuh"
#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_launch.cuh"

__global__ static void to_bf16(size_t count, const float *x,
			       __nv_bfloat16 *y)
{
	NN_CUDA_FOR_EACH(i, count)
	y[i] = __float2bfloat16_rn(x[i]);
}

__global__ static void to_fp16(size_t count, const float *x, __half *y)
{
	NN_CUDA_FOR_EACH(i, count)
	y[i] = __float2half_rn(x[i]);
}

__global__ static void from_bf16(size_t count, const __nv_bfloat16 *x,
				 float *y, int add)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const float v = __bfloat162float(x[i]);
		y[i] = add ? y[i] + v : v;
	}
}

__global__ static void from_fp16(size_t count, const __half *x, float *y,
				 int add)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const float v = __half2float(x[i]);
		y[i] = add ? y[i] + v : v;
	}
}

__global__ static void round_bf16(size_t count, float *x)
{
	NN_CUDA_FOR_EACH(i, count)
	x[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

__global__ static void round_fp16(size_t count, float *x)
{
	NN_CUDA_FOR_EACH(i, count)
	x[i] = __half2float(__float2half_rn(x[i]));
}

/* Channels-last copies: element (i, ch, j) of an n x c x hw fp32 tensor
 * and of the n x hw x c 16-bit one. One thread per 16-bit element, so
 * the 16-bit side is written (or read) in order. */
template <typename H>
__global__ static void to_half_nhwc(size_t count, int c, size_t hw,
				    const float *x, H *y)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const size_t ch = i % (size_t)c, t = i / (size_t)c;
		const size_t j = t % hw, img = t / hw;
		nn_st(y, i, x[(img * (size_t)c + ch) * hw + j]);
	}
}

template <typename H>
__global__ static void from_half_nhwc(size_t count, int c, size_t hw,
				      const H *x, float *y, int add)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const size_t ch = i % (size_t)c, t = i / (size_t)c;
		const size_t j = t % hw, img = t / hw;
		float *o = y + (img * (size_t)c + ch) * hw + j;
		const float v = nn_ld(x, i);
		*o = add ? *o + v : v;
	}
}

/* Every thread that sees a non-finite value writes the same 1, so the
 * unordered stores need no atomics. */
__global__ static void unscale_check(size_t count, float *g, float inv,
				     int *found)
{
	NN_CUDA_FOR_EACH(i, count)
	{
		const float v = g[i];
		if (!isfinite(v))
			*found = 1;
		g[i] = __fmul_rn(v, inv);
	}
}

extern "C" cudaError_t nn_cuda_k_to_half(cudaStream_t s, int precision,
					 size_t count, const float *x, void *y)
{
	if (!count)
		return cudaSuccess;
	if (precision == NN_PREC_BF16)
		NN_LAUNCH_OVER(to_bf16, count, s)(
			count, x, (__nv_bfloat16 *)y);
	else if (precision == NN_PREC_FP16)
		NN_LAUNCH_OVER(to_fp16, count, s)(count, x, (__half *)y);
	else
		return cudaErrorInvalidValue;
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_from_half(cudaStream_t s, int precision,
					   size_t count, const void *x,
					   float *y, int add)
{
	if (!count)
		return cudaSuccess;
	if (precision == NN_PREC_BF16)
		NN_LAUNCH_OVER(from_bf16, count, s)(
			count, (const __nv_bfloat16 *)x, y, add);
	else if (precision == NN_PREC_FP16)
		NN_LAUNCH_OVER(from_fp16, count, s)(
			count, (const __half *)x, y, add);
	else
		return cudaErrorInvalidValue;
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_round_f32(cudaStream_t s, int precision,
					   size_t count, float *x)
{
	if (!count)
		return cudaSuccess;
	if (precision == NN_PREC_BF16)
		NN_LAUNCH_OVER(round_bf16, count, s)(count, x);
	else if (precision == NN_PREC_FP16)
		NN_LAUNCH_OVER(round_fp16, count, s)(count, x);
	else
		return cudaErrorInvalidValue;
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_unscale_check(cudaStream_t s, size_t count,
					       float *g, float inv,
					       int *found)
{
	cudaError_t e = cudaMemsetAsync(found, 0, sizeof(int), s);
	if (e != cudaSuccess || !count)
		return e;
	NN_LAUNCH_OVER(unscale_check, count, s)(
		count, g, inv, found);
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_to_half_nhwc(cudaStream_t s, int precision,
					      int n, int c, size_t hw,
					      const float *x, void *y)
{
	const size_t count = (size_t)n * (size_t)c * hw;
	if (!count)
		return cudaSuccess;
	NN_CUDA_DISPATCH(precision, T,
			 NN_LAUNCH_OVER(to_half_nhwc<T>, count, s)(
				 count, c, hw, x, (T *)y));
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_from_half_nhwc(cudaStream_t s, int precision,
						int n, int c, size_t hw,
						const void *x, float *y,
						int add)
{
	const size_t count = (size_t)n * (size_t)c * hw;
	if (!count)
		return cudaSuccess;
	NN_CUDA_DISPATCH(precision, T,
			 NN_LAUNCH_OVER(from_half_nhwc<T>, count, s)(
				 count, c, hw, (const T *)x, y, add));
	return cudaGetLastError();
}
