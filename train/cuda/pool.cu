/*
 * pool.cu - max and average pooling (fixed windows, and adaptive ones for
 * the average), forward and backward.
 *
 * Forward: one thread per output, scanning its window in row-major order
 * as the CPU does (train/layers/maxpool.c, avgpool.c): for max pooling a
 * value wins when greater than the best so far or NaN, so ties go to the
 * first element, the last NaN is recorded, and a window of -infinity
 * records its first real element; argmax is the offset within the (n, c)
 * input plane. Average sums run in double in the same order.
 *
 * Channels-last (the descriptor's nhwc): tensors are N x H x W x C, and
 * argmax (one per output, in y's order) still holds the offset within
 * the (n, c) input plane; only where each value lives changes (at,
 * where), not the order of any sum.
 *
 * Backward: the CPU scatters each output gradient into dx in output
 * order; here one thread per input element gathers the outputs whose
 * window covers it, in that same order, so each dx element gets the same
 * additions in the same order (the CPU's bits) and no two threads write
 * one element. A max-pool output whose argmax is not inside its window
 * (a corrupt argmax; the CPU refuses one outside the plane) adds nothing.
 *
 * Values are of the activation type T (act_types.cuh). In 16 bits a
 * backward sums an element's terms from zero and rounds dx + sum once
 * (the CPU's 16-bit path runs the fp32 scatter into a zeroed copy);
 * in fp32 it continues from dx as the CPU's scatter does.
 */
#include <math.h>
#include <stdint.h>

#include "train/cuda/act_types.cuh"
#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_launch.cuh"

/* The fields of nn_pool_desc the kernels read, by value; small: every
 * index fits 32 bits, so the divisions that place an element take 32-bit
 * arithmetic (a 64-bit one is several times the instructions). */
typedef struct pool_args {
	int h_in, w_in, h_out, w_out;
	int kh, kw, sh, sw, ph, pw;
	int adaptive;
	int c, nhwc;
	int small;
} pool_args;

static pool_args args_of(const nn_pool_desc *d)
{
	const size_t in = (size_t)d->h_in * d->w_in, out = (size_t)d->h_out * d->w_out;
	const size_t most = (size_t)d->n * d->c * (in > out ? in : out);
	pool_args a = {d->h_in,     d->w_in,     d->h_out, d->w_out,
		       d->kh,       d->kw,       d->stride_h, d->stride_w,
		       d->pad_h,    d->pad_w,    d->adaptive, d->c,
		       d->nhwc,     most <= UINT32_MAX};
	return a;
}

/* Where plane p's values live (p = n C + c; planes of `plane` values):
 * value j at base + j step, in NCHW (step 1) or, with a.nhwc, NHWC
 * (step C). Computed once per thread. */
typedef struct plane_ix {
	size_t base, step;
} plane_ix;

__device__ static inline plane_ix plane_of(const pool_args &a, size_t p,
					   size_t plane)
{
	plane_ix ix;
	if (!a.nhwc) {
		ix.base = p * plane;
		ix.step = 1;
	} else {
		const size_t c = (size_t)a.c;
		ix.base = (a.small ? (unsigned)p / (unsigned)c : p / c) * plane * c +
			  (a.small ? (unsigned)p % (unsigned)c : p % c);
		ix.step = c;
	}
	return ix;
}

__device__ static inline size_t at(const plane_ix &ix, size_t j)
{
	return ix.base + j * ix.step;
}

/* The plane *p and offset *j of element i (at's inverse). */
__device__ static inline void where(const pool_args &a, size_t i,
				    size_t plane, size_t *p, size_t *j)
{
	if (a.small) {
		const unsigned u = (unsigned)i, pl = (unsigned)plane,
			       c = (unsigned)a.c;
		if (!a.nhwc) {
			*p = u / pl;
			*j = u % pl;
		} else {
			const unsigned t = u / c;
			*j = t % pl;
			*p = (size_t)(t / pl) * c + u % c;
		}
		return;
	}
	if (!a.nhwc) {
		*p = i / plane;
		*j = i % plane;
		return;
	}
	const size_t c = (size_t)a.c, t = i / c;
	*j = t % plane;
	*p = t / plane * c + i % c;
}

/* row and column of offset j in a plane w wide (planes are < 2^31) */
__device__ static inline void row_col(size_t j, int w, int *r, int *col)
{
	*r = (int)((unsigned)j / (unsigned)w);
	*col = (int)((unsigned)j % (unsigned)w);
}

/* Input span [*s, *e) of output o along one axis and the length the
 * average divides by (avgpool.c's span). */
__device__ static inline int span(int adaptive, int o, int in, int out, int k,
				  int stride, int pad, int *s, int *e)
{
	if (adaptive) {
		*s = (int)((long long)o * in / out);
		*e = (int)(((long long)(o + 1) * in + out - 1) / out);
		return *e - *s;
	}
	int a = o * stride - pad;
	*s = a < 0 ? 0 : a;
	*e = a + k < in ? a + k : in;
	return k;
}

/* The fixed-window outputs along one axis whose window covers input i:
 * o * stride - pad <= i < o * stride - pad + k, o in [0, out). */
__device__ static inline void covering(int i, int k, int stride, int pad,
				       int out, int *lo, int *hi)
{
	const int first = i + pad - k + 1; /* o * stride >= first */
	*lo = first <= 0 ? 0 : (first + stride - 1) / stride;
	const int last = (i + pad) / stride; /* o * stride <= i + pad */
	*hi = last + 1 < out ? last + 1 : out;
}

template <typename T>
__global__ static void maxpool_forward(pool_args a, size_t total, const T *x,
				       T *y, int32_t *argmax)
{
	const size_t in_plane = (size_t)a.h_in * a.w_in;
	const size_t out_plane = (size_t)a.h_out * a.w_out;
	NN_CUDA_FOR_EACH(i, total)
	{
		size_t p, oj;
		where(a, i, out_plane, &p, &oj);
		int oh, ow;
		row_col(oj, a.w_out, &oh, &ow);
		const plane_ix xin = plane_of(a, p, in_plane);
		int hs = oh * a.sh - a.ph, ws = ow * a.sw - a.pw;
		const int he = hs + a.kh < a.h_in ? hs + a.kh : a.h_in;
		const int we = ws + a.kw < a.w_in ? ws + a.kw : a.w_in;
		hs = hs < 0 ? 0 : hs;
		ws = ws < 0 ? 0 : ws;
		float best = -INFINITY;
		int32_t arg = hs * a.w_in + ws;
		for (int ih = hs; ih < he; ih++)
			for (int iw = ws; iw < we; iw++) {
				const float v = nn_ld(
					x, at(xin, (size_t)ih * a.w_in + iw));
				if (v > best || v != v) {
					best = v;
					arg = ih * a.w_in + iw;
				}
			}
		nn_st(y, i, best);
		argmax[i] = arg;
	}
}

/* dx = sum, overwriting or adding as described at the top */
template <typename T>
__device__ static inline float start_of(const T *dx, size_t i, int overwrite)
{
	return overwrite || nn_half_t<T>::value ? 0.0f : nn_ld(dx, i);
}

template <typename T>
__device__ static inline void finish(T *dx, size_t i, float acc, int overwrite)
{
	nn_st(dx, i, nn_half_t<T>::value && !overwrite ? nn_ld(dx, i) + acc : acc);
}

template <typename T>
__global__ static void maxpool_backward(pool_args a, size_t total,
					const int32_t *argmax, const T *dy,
					T *dx, int overwrite)
{
	const size_t in_plane = (size_t)a.h_in * a.w_in;
	const size_t out_plane = (size_t)a.h_out * a.w_out;
	NN_CUDA_FOR_EACH(i, total)
	{
		size_t p, ij;
		where(a, i, in_plane, &p, &ij);
		int ih, iw;
		row_col(ij, a.w_in, &ih, &iw);
		const plane_ix yout = plane_of(a, p, out_plane);
		const int32_t me = ih * a.w_in + iw;
		int oh0, oh1, ow0, ow1;
		covering(ih, a.kh, a.sh, a.ph, a.h_out, &oh0, &oh1);
		covering(iw, a.kw, a.sw, a.pw, a.w_out, &ow0, &ow1);
		float acc = start_of(dx, i, overwrite);
		for (int oh = oh0; oh < oh1; oh++)
			for (int ow = ow0; ow < ow1; ow++) {
				const size_t o = at(yout, (size_t)oh * a.w_out + ow);
				if (argmax[o] == me)
					acc += nn_ld(dy, o);
			}
		finish(dx, i, acc, overwrite);
	}
}

template <typename T>
__global__ static void avgpool_forward(pool_args a, size_t total, const T *x,
				       T *y)
{
	const size_t in_plane = (size_t)a.h_in * a.w_in;
	const size_t out_plane = (size_t)a.h_out * a.w_out;
	NN_CUDA_FOR_EACH(i, total)
	{
		size_t p, oj;
		where(a, i, out_plane, &p, &oj);
		int oh, ow;
		row_col(oj, a.w_out, &oh, &ow);
		const plane_ix xin = plane_of(a, p, in_plane);
		int hs, he, ws, we;
		const int lh = span(a.adaptive, oh, a.h_in, a.h_out, a.kh, a.sh,
				    a.ph, &hs, &he);
		const int lw = span(a.adaptive, ow, a.w_in, a.w_out, a.kw, a.sw,
				    a.pw, &ws, &we);
		double s = 0;
		for (int ih = hs; ih < he; ih++)
			for (int iw = ws; iw < we; iw++)
				s += nn_ld(x, at(xin, (size_t)ih * a.w_in + iw));
		nn_st(y, i, (float)(s / ((double)lh * lw)));
	}
}

/* The outputs along one axis whose window covers input i: a range for
 * fixed windows; adaptive ones are tested one by one (outputs are few). */
__device__ static inline void avg_covering(const pool_args &a, int horiz,
					   int i, int *lo, int *hi)
{
	const int out = horiz ? a.w_out : a.h_out;
	if (a.adaptive) {
		*lo = 0;
		*hi = out;
		return;
	}
	if (horiz)
		covering(i, a.kw, a.sw, a.pw, out, lo, hi);
	else
		covering(i, a.kh, a.sh, a.ph, out, lo, hi);
}

template <typename T>
__global__ static void avgpool_backward(pool_args a, size_t total,
					const T *dy, T *dx, int overwrite)
{
	const size_t in_plane = (size_t)a.h_in * a.w_in;
	const size_t out_plane = (size_t)a.h_out * a.w_out;
	NN_CUDA_FOR_EACH(i, total)
	{
		size_t p, ij;
		where(a, i, in_plane, &p, &ij);
		int ih, iw;
		row_col(ij, a.w_in, &ih, &iw);
		const plane_ix yout = plane_of(a, p, out_plane);
		int oh0, oh1, ow0, ow1;
		avg_covering(a, 0, ih, &oh0, &oh1);
		avg_covering(a, 1, iw, &ow0, &ow1);
		float acc = start_of(dx, i, overwrite);
		for (int oh = oh0; oh < oh1; oh++) {
			int hs, he;
			const int lh = span(a.adaptive, oh, a.h_in, a.h_out,
					    a.kh, a.sh, a.ph, &hs, &he);
			if (ih < hs || ih >= he)
				continue;
			for (int ow = ow0; ow < ow1; ow++) {
				int ws, we;
				const int lw = span(a.adaptive, ow, a.w_in,
						    a.w_out, a.kw, a.sw, a.pw,
						    &ws, &we);
				if (iw < ws || iw >= we)
					continue;
				acc += (float)(nn_ld(dy, at(yout, (size_t)oh * a.w_out +
								  ow)) /
					       ((double)lh * lw));
			}
		}
		finish(dx, i, acc, overwrite);
	}
}

static size_t planes_of(const nn_pool_desc *d)
{
	return (size_t)d->n * (size_t)d->c;
}

#define LAUNCH(kernel, total, T, s, ...)                                       \
	NN_LAUNCH_OVER(kernel<T>, total, s)(__VA_ARGS__)

extern "C" cudaError_t nn_cuda_k_maxpool_forward(cudaStream_t s, int prec,
						 const nn_pool_desc *d,
						 const void *x, void *y,
						 int32_t *argmax)
{
	const size_t total = planes_of(d) * d->h_out * d->w_out;
	if (!total)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 LAUNCH(maxpool_forward, total, T, s, args_of(d), total,
				(const T *)x, (T *)y, argmax));
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_maxpool_backward(cudaStream_t s, int prec,
						  const nn_pool_desc *d,
						  const int32_t *argmax,
						  const void *dy, void *dx,
						  int overwrite)
{
	const size_t total = planes_of(d) * d->h_in * d->w_in;
	if (!total)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 LAUNCH(maxpool_backward, total, T, s, args_of(d),
				total, argmax, (const T *)dy, (T *)dx,
				overwrite));
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_avgpool_forward(cudaStream_t s, int prec,
						 const nn_pool_desc *d,
						 const void *x, void *y)
{
	const size_t total = planes_of(d) * d->h_out * d->w_out;
	if (!total)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 LAUNCH(avgpool_forward, total, T, s, args_of(d), total,
				(const T *)x, (T *)y));
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_avgpool_backward(cudaStream_t s, int prec,
						  const nn_pool_desc *d,
						  const void *dy, void *dx,
						  int overwrite)
{
	const size_t total = planes_of(d) * d->h_in * d->w_in;
	if (!total)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 LAUNCH(avgpool_backward, total, T, s, args_of(d),
				total, (const T *)dy, (T *)dx, overwrite));
	return cudaGetLastError();
}
