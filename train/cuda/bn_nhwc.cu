/*
 * bn_nhwc.cu - batch norm over channels-last (N x H x W x C) activations:
 * training forward, evaluation forward and backward, the CPU's formulas
 * (train/layers/batchnorm.c). cuDNN's spatial batch norm takes NHWC
 * descriptors but runs them through its one-channel-per-block kernels,
 * which read a channel's values C apart: 50x slower than these on an
 * H200 (resnet50, bf16), whatever its mode.
 *
 * The tensor is m = N*H*W rows of c values. Statistics: blocks of
 * BN_TX channels x BN_TY row lanes, each over BN_ROWS rows, so a warp
 * reads BN_TX neighbouring channels of one row; every block writes its
 * per-channel partial sums (double) to the workspace, and one thread per
 * channel adds a channel's partials in block order. The order is fixed,
 * so results do not depend on scheduling.
 *
 * Forward: sums of x - k and (x - k)^2 with k = the channel's first
 * value (a shift, so the variance's subtraction does not cancel when
 * |mean| >> std), mean = k + S1/m, biased var = (S2 - S1^2/m)/m, then
 * the CPU's running averages (unbiased variance) and its centred
 * y = ((x - mu) - delta) * (invstd gamma) + beta, mu the float mean and
 * delta what float lost of it. Backward: sums of dy, dy (x - mu) and
 * x - mu, then the CPU's dgamma, dbeta and dx.
 */
#include <math.h>

#include "train/cuda/act_types.cuh"
#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_launch.cuh"

#define BN_TX 32
#define BN_TY 8
#define BN_ROWS 256

static unsigned row_blocks(size_t m)
{
	return (unsigned)((m + BN_ROWS - 1) / BN_ROWS);
}

/* per-channel coefficients the elementwise pass reads: 4 floats each */
enum { CO_A, CO_B, CO_C, CO_D, CO_N };

/* bytes of the partial sums, 256-aligned: the coefficients follow */
static size_t part_bytes(size_t m, int c)
{
	const size_t part = (size_t)row_blocks(m) * (size_t)c * 3 * sizeof(double);
	return (part + 255) & ~(size_t)255;
}

extern "C" size_t nn_cuda_k_bn_nhwc_workspace(size_t m, int c)
{
	return part_bytes(m, c) + (size_t)c * CO_N * sizeof(float);
}

/*
 * Partial sums of one block's rows, three per channel:
 *   forward (dy NULL): x - k, (x - k)^2, unused;
 *   backward: dy, dy (x - mu), x - mu.
 */
template <typename T>
__global__ static void bn_partial(size_t m, int c, const T *x, const T *dy,
				  const float *mu, double *part)
{
	__shared__ double sh[3][BN_TY][BN_TX];
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int ch = blockIdx.x * BN_TX + tx;
	const size_t r0 = (size_t)blockIdx.y * BN_ROWS;
	const size_t r1 = r0 + BN_ROWS < m ? r0 + BN_ROWS : m;
	double a = 0, b = 0, e = 0;
	if (ch < c) {
		if (!dy) {
			const double k = nn_ld(x, (size_t)ch);
			for (size_t r = r0 + ty; r < r1; r += BN_TY) {
				const double v = nn_ld(x, r * c + ch) - k;
				a += v;
				b += v * v;
			}
		} else {
			const float u = mu[ch];
			for (size_t r = r0 + ty; r < r1; r += BN_TY) {
				const float xm = nn_ld(x, r * c + ch) - u;
				const double g = nn_ld(dy, r * c + ch);
				a += g;
				b += g * (double)xm;
				e += xm;
			}
		}
	}
	sh[0][ty][tx] = a;
	sh[1][ty][tx] = b;
	sh[2][ty][tx] = e;
	__syncthreads();
	if (ty || ch >= c)
		return;
	for (int i = 1; i < BN_TY; i++) {
		a += sh[0][i][tx];
		b += sh[1][i][tx];
		e += sh[2][i][tx];
	}
	double *p = part + ((size_t)blockIdx.y * c + ch) * 3;
	p[0] = a;
	p[1] = b;
	p[2] = e;
}

/* one thread per channel: the statistics, running averages and the
 * normalisation's coefficients */
template <typename T>
__global__ static void bn_stats(size_t m, int c, unsigned nb, const T *x,
				const double *part, float eps, float momentum,
				const float *gamma, float *rm, float *rv,
				float *save_mean, float *save_invstd,
				float *co)
{
	const int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= c)
		return;
	double s1 = 0, s2 = 0;
	for (unsigned b = 0; b < nb; b++) {
		s1 += part[((size_t)b * c + ch) * 3];
		s2 += part[((size_t)b * c + ch) * 3 + 1];
	}
	const double md = (double)m;
	const double mean = (double)nn_ld(x, (size_t)ch) + s1 / md;
	double var = (s2 - s1 * s1 / md) / md;
	var = var > 0 ? var : 0;
	const float mu = (float)mean;
	const float invstd = (float)(1.0 / sqrt(var + (double)eps));
	save_mean[ch] = mu;
	save_invstd[ch] = invstd;
	const double mom = momentum;
	rm[ch] = (float)((1.0 - mom) * rm[ch] + mom * mean);
	rv[ch] = (float)((1.0 - mom) * rv[ch] + mom * var * md / (md - 1.0));
	co[ch * CO_N + CO_A] = mu;
	co[ch * CO_N + CO_B] = (float)(mean - (double)mu);
	co[ch * CO_N + CO_C] = invstd * gamma[ch];
}

/* y = v, then with relu the ReLU layer's operation on the stored value
 * (rounded first, so -0 stays -0 as it does there) */
template <typename T>
__device__ static inline void put(T *y, size_t i, float v, int relu)
{
	nn_st(y, i, v);
	if (relu) {
		const float q = nn_ld(y, i);
		if (q < 0.0f)
			nn_st(y, i, 0.0f);
	}
}

template <typename T>
__global__ static void bn_normalise(size_t total, int c, const T *x,
				    const float *co, const float *beta, T *y,
				    int relu)
{
	NN_CUDA_FOR_EACH(i, total)
	{
		const float *k = co + (i % (size_t)c) * CO_N;
		const float v = ((nn_ld(x, i) - k[CO_A]) - k[CO_B]) * k[CO_C] +
				beta[i % (size_t)c];
		put(y, i, v, relu);
	}
}

/* evaluation: the running statistics, as nn_cpu_bn_forward_eval */
template <typename T>
__global__ static void bn_eval(size_t total, int c, float eps, const T *x,
			       const float *gamma, const float *beta,
			       const float *rm, const float *rv, T *y, int relu)
{
	NN_CUDA_FOR_EACH(i, total)
	{
		const size_t ch = i % (size_t)c;
		const float invstd = (float)(1.0 / sqrt((double)rv[ch] + (double)eps));
		put(y, i, (nn_ld(x, i) - rm[ch]) * (invstd * gamma[ch]) + beta[ch],
		    relu);
	}
}

/* one thread per channel: dgamma, dbeta and the coefficients of dx */
__global__ static void bn_grad_stats(size_t m, int c, unsigned nb,
				     const double *part, const float *gamma,
				     const float *save_invstd, float *dgamma,
				     float *dbeta, float *co)
{
	const int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= c)
		return;
	double s = 0, sdx = 0, sx = 0;
	for (unsigned b = 0; b < nb; b++) {
		const double *p = part + ((size_t)b * c + ch) * 3;
		s += p[0];
		sdx += p[1];
		sx += p[2];
	}
	const double md = (double)m;
	const double delta = sx / md;
	const double sum_dyx = sdx - delta * s;
	const double inv = save_invstd[ch];
	if (dbeta)
		dbeta[ch] = (float)s;
	if (dgamma)
		dgamma[ch] = (float)(sum_dyx * inv);
	co[ch * CO_N + CO_A] = (float)(gamma[ch] * inv);
	co[ch * CO_N + CO_B] = (float)(s / md);
	co[ch * CO_N + CO_C] = (float)(inv * inv * sum_dyx / md);
	co[ch * CO_N + CO_D] = (float)delta;
}

template <typename T>
__global__ static void bn_dx(size_t total, int c, const T *x, const T *dy,
			     const float *mu, const float *co, T *dx,
			     int overwrite)
{
	NN_CUDA_FOR_EACH(i, total)
	{
		const size_t ch = i % (size_t)c;
		const float *k = co + ch * CO_N;
		const float v = k[CO_A] * (nn_ld(dy, i) - k[CO_B] -
					   ((nn_ld(x, i) - mu[ch]) - k[CO_D]) *
						   k[CO_C]);
		nn_st(dx, i, overwrite ? v : nn_ld(dx, i) + v);
	}
}

/* how the training forward and the backward launch over m rows of c */
typedef struct bn_launch {
	dim3 grid, block;   /* bn_partial */
	unsigned per;       /* blocks of 128 for the one-thread-per-channel kernels */
	unsigned nb;        /* row blocks: partial sums per channel */
	size_t total;       /* elements */
	float *co;          /* the coefficients, in ws after the partial sums */
} bn_launch;

static bn_launch launch_of(size_t m, int c, void *ws)
{
	bn_launch l;
	l.nb = row_blocks(m);
	l.grid = dim3((unsigned)((c + BN_TX - 1) / BN_TX), l.nb);
	l.block = dim3(BN_TX, BN_TY);
	l.per = (unsigned)((c + 127) / 128);
	l.total = m * (size_t)c;
	l.co = (float *)((char *)ws + part_bytes(m, c));
	return l;
}

extern "C" cudaError_t nn_cuda_k_bn_nhwc_forward_train(
	cudaStream_t s, int prec, size_t m, int c, float eps, float momentum,
	const void *x, const float *gamma, const float *beta, float *rm,
	float *rv, float *save_mean, float *save_invstd, void *y, int relu,
	void *ws)
{
	if (!m || c <= 0)
		return cudaSuccess;
	const bn_launch l = launch_of(m, c, ws);
	NN_CUDA_DISPATCH(prec, T, {
		bn_partial<T><<<l.grid, l.block, 0, s>>>(m, c, (const T *)x, NULL,
							 NULL, (double *)ws);
		bn_stats<T><<<l.per, 128, 0, s>>>(m, c, l.nb, (const T *)x,
						  (const double *)ws, eps,
						  momentum, gamma, rm, rv,
						  save_mean, save_invstd, l.co);
		bn_normalise<T><<<nn_cuda_blocks(l.total), NN_CUDA_THREADS, 0, s>>>(
			l.total, c, (const T *)x, l.co, beta, (T *)y, relu);
	});
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_bn_nhwc_forward_eval(
	cudaStream_t s, int prec, size_t m, int c, float eps, const void *x,
	const float *gamma, const float *beta, const float *rm,
	const float *rv, void *y, int relu)
{
	const size_t total = m * (size_t)(c > 0 ? c : 0);
	if (!total)
		return cudaSuccess;
	NN_CUDA_DISPATCH(prec, T,
			 bn_eval<T><<<nn_cuda_blocks(total), NN_CUDA_THREADS, 0,
				      s>>>(total, c, eps, (const T *)x, gamma,
					   beta, rm, rv, (T *)y, relu));
	return cudaGetLastError();
}

extern "C" cudaError_t nn_cuda_k_bn_nhwc_backward(
	cudaStream_t s, int prec, size_t m, int c, const void *x,
	const float *gamma, const float *save_mean, const float *save_invstd,
	const void *dy, void *dx, float *dgamma, float *dbeta, int overwrite,
	void *ws)
{
	if (!m || c <= 0)
		return cudaSuccess;
	const bn_launch l = launch_of(m, c, ws);
	NN_CUDA_DISPATCH(prec, T, {
		bn_partial<T><<<l.grid, l.block, 0, s>>>(m, c, (const T *)x,
							 (const T *)dy, save_mean,
							 (double *)ws);
		bn_grad_stats<<<l.per, 128, 0, s>>>(m, c, l.nb,
						    (const double *)ws, gamma,
						    save_invstd, dgamma, dbeta,
						    l.co);
		if (dx)
			bn_dx<T><<<nn_cuda_blocks(l.total), NN_CUDA_THREADS, 0, s>>>(
				l.total, c, (const T *)x, (const T *)dy,
				save_mean, l.co, (T *)dx, overwrite);
	});
	return cudaGetLastError();
}
