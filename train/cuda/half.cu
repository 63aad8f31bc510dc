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

/*
 * Channels-last copies: element (i, ch, j) of an n x c x hw fp32 tensor
 * and of the n x hw x c one of type T. A transpose per image in tiles of
 * TILE x TILE through shared memory, so that both the read and the write
 * of a warp are TILE neighbouring elements (a thread per element would
 * make one of the two strided: c_in apart for a weight copy's reads, or
 * hw apart). Blocks: TILE x TILE_ROWS threads, grid (hw tiles, c tiles,
 * images).
 */
#define TILE 32
#define TILE_ROWS 8

template <typename T>
__global__ static void to_half_nhwc(int c, size_t hw, const float *x, T *y)
{
	__shared__ float tile[TILE][TILE + 1];
	const size_t img = blockIdx.z, j0 = (size_t)blockIdx.x * TILE;
	const int c0 = blockIdx.y * TILE, tx = threadIdx.x;
	const float *xi = x + img * (size_t)c * hw;
	T *yi = y + img * hw * (size_t)c;
	for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
		const int ch = c0 + r;
		const size_t j = j0 + tx;
		if (ch < c && j < hw)
			tile[r][tx] = xi[(size_t)ch * hw + j];
	}
	__syncthreads();
	for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
		const size_t j = j0 + r;
		const int ch = c0 + tx;
		if (ch < c && j < hw)
			nn_st(yi, j * (size_t)c + ch, tile[tx][r]);
	}
}

template <typename T>
__global__ static void from_half_nhwc(int c, size_t hw, const T *x, float *y,
				      int add)
{
	__shared__ float tile[TILE][TILE + 1];
	const size_t img = blockIdx.z, j0 = (size_t)blockIdx.x * TILE;
	const int c0 = blockIdx.y * TILE, tx = threadIdx.x;
	const T *xi = x + img * hw * (size_t)c;
	float *yi = y + img * (size_t)c * hw;
	for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
		const size_t j = j0 + r;
		const int ch = c0 + tx;
		if (ch < c && j < hw)
			tile[r][tx] = nn_ld(xi, j * (size_t)c + ch);
	}
	__syncthreads();
	for (int r = threadIdx.y; r < TILE; r += TILE_ROWS) {
		const int ch = c0 + r;
		const size_t j = j0 + tx;
		if (ch < c && j < hw) {
			float *o = yi + (size_t)ch * hw + j;
			const float v = tile[tx][r];
			*o = add ? *o + v : v;
		}
	}
}

/* the transposes' grids: images in groups a grid's z reaches */
#define MAX_GRID_Z 65535

static dim3 tiles(int c, size_t hw, int images)
{
	return dim3((unsigned)((hw + TILE - 1) / TILE),
		    (unsigned)((c + TILE - 1) / TILE), (unsigned)images);
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
	NN_CUDA_DISPATCH(precision, T, {
		for (int i = 0; i < n; i += MAX_GRID_Z) {
			const int k = n - i < MAX_GRID_Z ? n - i : MAX_GRID_Z;
			NN_LAUNCH(to_half_nhwc<T>, tiles(c, hw, k),
				  dim3(TILE, TILE_ROWS), s)(
				c, hw, x + (size_t)i * c * hw,
				(T *)y + (size_t)i * c * hw);
		}
	});
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
	NN_CUDA_DISPATCH(precision, T, {
		for (int i = 0; i < n; i += MAX_GRID_Z) {
			const int k = n - i < MAX_GRID_Z ? n - i : MAX_GRID_Z;
			NN_LAUNCH(from_half_nhwc<T>, tiles(c, hw, k),
				  dim3(TILE, TILE_ROWS), s)(
				c, hw, (const T *)x + (size_t)i * c * hw,
				y + (size_t)i * c * hw, add);
		}
	});
	return cudaGetLastError();
}
