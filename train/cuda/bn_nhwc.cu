/*
 * bn_nhwc.cu - batch norm over channels-last (N x H x W x C) activations:
 * training forward, evaluation forward and backward, the CPU's formulas
 * (train/layers/batchnorm.c). cuDNN's spatial batch norm takes NHWC
 * descriptors but runs them through its one-channel-per-block kernels,
 * which read a channel's values C apart: 50x slower than these on an
 * H200 (resnet50, bf16), whatever its mode.
 *
 * The tensor is m = N*H*W rows of c values. Statistics, in two
 * kernels:
 *   1. blocks of BN_TX channels x BN_TY row lanes, each over one slice
 *      of rows, so a warp reads BN_TX neighbouring channels of one row;
 *      every block writes its per-channel partial sums (double) to the
 *      workspace;
 *   2. blocks of BN_TX channels x BN_SY lanes: lane l adds the partials
 *      of slices l, l + BN_SY, ... in order, then lane 0 adds the lanes
 *      in order.
 * The slices are a function of (m, c) alone (split_of): about BN_BLOCKS
 * blocks in all, none under BN_MIN_ROWS rows. So sums are added in one
 * fixed order, and results do not depend on scheduling or the device.
 *
 * Forward: sums of x - k and (x - k)^2 with k = the channel's first
 * value (a shift, so the variance's subtraction does not cancel when
 * |mean| >> std), mean = k + S1/m, biased var = (S2 - S1^2/m)/m, then
 * the CPU's running averages (unbiased variance) and its centred
 * y = ((x - mu) - delta) * (invstd gamma) + beta, mu the float mean and
 * delta what float lost of it. Backward: sums of dy, dy (x - mu) and
 * x - mu, then the CPU's dgamma, dbeta and dx.
 *
 * The element-wise passes read per-channel coefficients that kernel 2
 * writes, one array of c floats each, and, when c is a multiple of the
 * vector width and the tensors are 16-byte aligned, move 16 bytes of
 * activations per access (nn_vec) with the coefficients 4 at a time.
 */
#include <math.h>
#include <stdint.h>

#include "train/cuda/act_types.cuh"
#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_launch.cuh"

#define BN_TX 32
#define BN_TY 8
#define BN_SY 32
#define BN_MIN_ROWS 64
#define BN_BLOCKS 2048

static unsigned channel_groups(int c)
{
	return (unsigned)((c + BN_TX - 1) / BN_TX);
}

/* the most slices the statistics of m rows of c channels take; the
 * workspace is sized by it, and it grows with m */
static unsigned max_slices(size_t m, int c)
{
	size_t cap = BN_BLOCKS / channel_groups(c);
	size_t want = (m + BN_MIN_ROWS - 1) / BN_MIN_ROWS;
	cap = cap ? cap : 1;
	want = want ? want : 1;
	return (unsigned)(want < cap ? want : cap);
}

/* the statistics' slices: nb of `rows` rows, the last one shorter */
typedef struct bn_split {
	unsigned nb;
	size_t rows;
} bn_split;

static bn_split split_of(size_t m, int c)
{
	bn_split sp;
	const unsigned most = max_slices(m, c);
	sp.rows = (m + most - 1) / most;
	sp.nb = (unsigned)((m + sp.rows - 1) / sp.rows);
	return sp;
}

/* per-channel coefficients the element-wise passes read: CO_N arrays of
 * c floats */
enum { CO_A, CO_B, CO_C, CO_D, CO_E, CO_N };

/* bytes of the partial sums, three arrays of nb x c doubles, 256-aligned:
 * the coefficients follow */
static size_t part_bytes(size_t m, int c)
{
	const size_t part = (size_t)max_slices(m, c) * (size_t)c * 3 *
			    sizeof(double);
	return (part + 255) & ~(size_t)255;
}

extern "C" size_t nn_cuda_k_bn_nhwc_workspace(size_t m, int c)
{
	return part_bytes(m, c) + (size_t)c * CO_N * sizeof(float);
}

/* the channel of element i: 32-bit arithmetic where the tensor allows */
__device__ __forceinline__ static unsigned chan(size_t i, unsigned c,
						int small)
{
	return small ? (unsigned)i % c : (unsigned)(i % c);
}

/*
 * Partial sums of one slice of rows (blockIdx.y), three arrays of nb x c
 * (part[(k nb + slice) c + ch]):
 *   forward (dy NULL): x - k, (x - k)^2 (the third is not written);
 *   backward: dy, dy (x - mu), x - mu.
 */
template <typename T>
__global__ static void bn_partial(size_t m, int c, size_t rows, const T *x,
				  const T *dy, const float *mu, double *part)
{
	__shared__ double sh[3][BN_TY][BN_TX];
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int ch = blockIdx.x * BN_TX + tx;
	const size_t r0 = (size_t)blockIdx.y * rows;
	const size_t r1 = r0 + rows < m ? r0 + rows : m;
	double a = 0, b = 0, e = 0;
	if (ch < c) {
		if (!dy) {
			const double k = nn_ld(x, (size_t)ch);
#pragma unroll 4
			for (size_t r = r0 + ty; r < r1; r += BN_TY) {
				const double v = nn_ld(x, r * c + ch) - k;
				a += v;
				b += v * v;
			}
		} else {
			const float u = mu[ch];
#pragma unroll 4
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
	const size_t nb = gridDim.y, at = (size_t)blockIdx.y * c + ch;
	part[at] = a;
	part[nb * c + at] = b;
	if (dy)
		part[2 * nb * c + at] = e;
}

/*
 * Kernel 2's sums: the first `arrays` partial arrays of channel ch added
 * over the nb slices, lanes (threadIdx.y) over strided slices, then the
 * lanes in order. Every thread of the block calls it; thread (tx, 0)
 * gets the totals in s.
 */
__device__ static void add_slices(int c, unsigned nb, const double *part,
				  int arrays, double s[3])
{
	__shared__ double sh[3][BN_SY][BN_TX];
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int ch = blockIdx.x * BN_TX + tx;
	for (int k = 0; k < 3; k++)
		s[k] = 0;
	if (ch < c)
		for (unsigned b = ty; b < nb; b += BN_SY)
			for (int k = 0; k < arrays; k++)
				s[k] += part[((size_t)k * nb + b) * c + ch];
	for (int k = 0; k < 3; k++)
		sh[k][ty][tx] = s[k];
	__syncthreads();
	if (ty)
		return;
	for (int i = 1; i < BN_SY; i++)
		for (int k = 0; k < 3; k++)
			s[k] += sh[k][i][tx];
}

/* the statistics, running averages and the normalisation's coefficients:
 * A = mu, B = delta, C = invstd gamma, D = beta */
template <typename T>
__global__ static void bn_stats(size_t m, int c, unsigned nb, const T *x,
				const double *part, float eps, float momentum,
				const float *gamma, const float *beta, float *rm,
				float *rv, float *save_mean,
				float *save_invstd, float *co)
{
	double s[3];
	add_slices(c, nb, part, 2, s);
	const int ch = blockIdx.x * BN_TX + threadIdx.x;
	if (threadIdx.y || ch >= c)
		return;
	const double md = (double)m;
	const double mean = (double)nn_ld(x, (size_t)ch) + s[0] / md;
	double var = (s[1] - s[0] * s[0] / md) / md;
	var = var > 0 ? var : 0;
	const float mu = (float)mean;
	const float invstd = (float)(1.0 / sqrt(var + (double)eps));
	save_mean[ch] = mu;
	save_invstd[ch] = invstd;
	const double mom = momentum;
	rm[ch] = (float)((1.0 - mom) * rm[ch] + mom * mean);
	rv[ch] = (float)((1.0 - mom) * rv[ch] + mom * var * md / (md - 1.0));
	co[CO_A * c + ch] = mu;
	co[CO_B * c + ch] = (float)(mean - (double)mu);
	co[CO_C * c + ch] = invstd * gamma[ch];
	co[CO_D * c + ch] = beta[ch];
}

/* dgamma, dbeta and the coefficients of dx: A = gamma invstd, B = mean
 * dy, C = invstd^2 sum(dy xhat)/m, D = delta, E = mu */
__global__ static void bn_grad_stats(size_t m, int c, unsigned nb,
				     const double *part, const float *gamma,
				     const float *save_mean,
				     const float *save_invstd, float *dgamma,
				     float *dbeta, float *co)
{
	double s[3];
	add_slices(c, nb, part, 3, s);
	const int ch = blockIdx.x * BN_TX + threadIdx.x;
	if (threadIdx.y || ch >= c)
		return;
	const double md = (double)m;
	const double delta = s[2] / md;
	const double sum_dyx = s[1] - delta * s[0];
	const double inv = save_invstd[ch];
	if (dbeta)
		dbeta[ch] = (float)s[0];
	if (dgamma)
		dgamma[ch] = (float)(sum_dyx * inv);
	co[CO_A * c + ch] = (float)(gamma[ch] * inv);
	co[CO_B * c + ch] = (float)(s[0] / md);
	co[CO_C * c + ch] = (float)(inv * inv * sum_dyx / md);
	co[CO_D * c + ch] = (float)delta;
	co[CO_E * c + ch] = save_mean[ch];
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
__global__ static void bn_normalise(size_t total, int c, int small,
				    const T *x, const float *co, T *y, int relu)
{
	NN_CUDA_FOR_EACH(i, total)
	{
		const unsigned ch = chan(i, (unsigned)c, small);
		const float v = ((nn_ld(x, i) - co[CO_A * c + ch]) -
				 co[CO_B * c + ch]) *
					co[CO_C * c + ch] +
				co[CO_D * c + ch];
		put(y, i, v, relu);
	}
}

/* four coefficients of array k from channel ch on (ch a multiple of 4,
 * c too: 16-byte aligned) */
__device__ __forceinline__ static float4 co4(const float *co, int k, int c,
					     unsigned ch)
{
	return *reinterpret_cast<const float4 *>(co + (size_t)k * c + ch);
}

__device__ __forceinline__ static float lane(const float4 &f, int k)
{
	return k == 0 ? f.x : k == 1 ? f.y : k == 2 ? f.z : f.w;
}

/* bn_normalise over 16-byte vectors; c is a multiple of N */
template <typename T>
__global__ static void bn_normalise_v(size_t nv, int c, int small,
				      const T *x, const float *co, T *y,
				      int relu)
{
	NN_CUDA_FOR_EACH(j, nv)
	{
		const unsigned ch = chan(j * nn_vec<T>::N, (unsigned)c, small);
		nn_vec<T> v = nn_ldv(x, j);
#pragma unroll
		for (int q = 0; q < nn_vec<T>::N; q += 4) {
			const float4 a = co4(co, CO_A, c, ch + q);
			const float4 b = co4(co, CO_B, c, ch + q);
			const float4 g = co4(co, CO_C, c, ch + q);
			const float4 d = co4(co, CO_D, c, ch + q);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				v.set(q + k, ((v.get(q + k) - lane(a, k)) -
					      lane(b, k)) *
						     lane(g, k) +
					     lane(d, k));
				if (relu && v.get(q + k) < 0.0f)
					v.set(q + k, 0.0f);
			}
		}
		nn_stv(y, j, v);
	}
}

/* evaluation: the running statistics, as nn_cpu_bn_forward_eval */
template <typename T>
__global__ static void bn_eval(size_t total, int c, int small, float eps,
			       const T *x, const float *gamma,
			       const float *beta, const float *rm,
			       const float *rv, T *y, int relu)
{
	NN_CUDA_FOR_EACH(i, total)
	{
		const unsigned ch = chan(i, (unsigned)c, small);
		const float invstd = (float)(1.0 / sqrt((double)rv[ch] + (double)eps));
		put(y, i, (nn_ld(x, i) - rm[ch]) * (invstd * gamma[ch]) + beta[ch],
		    relu);
	}
}

template <typename T>
__global__ static void bn_dx(size_t total, int c, int small, const T *x,
			     const T *dy, const float *co, T *dx, int overwrite)
{
	NN_CUDA_FOR_EACH(i, total)
	{
		const unsigned ch = chan(i, (unsigned)c, small);
		const float v =
			co[CO_A * c + ch] *
			(nn_ld(dy, i) - co[CO_B * c + ch] -
			 ((nn_ld(x, i) - co[CO_E * c + ch]) - co[CO_D * c + ch]) *
				 co[CO_C * c + ch]);
		nn_st(dx, i, overwrite ? v : nn_ld(dx, i) + v);
	}
}

/* bn_dx over 16-byte vectors; c is a multiple of N */
template <typename T>
__global__ static void bn_dx_v(size_t nv, int c, int small, const T *x,
			       const T *dy, const float *co, T *dx,
			       int overwrite)
{
	NN_CUDA_FOR_EACH(j, nv)
	{
		const unsigned ch = chan(j * nn_vec<T>::N, (unsigned)c, small);
		const nn_vec<T> xv = nn_ldv(x, j), g = nn_ldv(dy, j);
		nn_vec<T> o;
		if (!overwrite)
			o = nn_ldv((const T *)dx, j);
#pragma unroll
		for (int q = 0; q < nn_vec<T>::N; q += 4) {
			const float4 a = co4(co, CO_A, c, ch + q);
			const float4 b = co4(co, CO_B, c, ch + q);
			const float4 cc = co4(co, CO_C, c, ch + q);
			const float4 d = co4(co, CO_D, c, ch + q);
			const float4 e = co4(co, CO_E, c, ch + q);
#pragma unroll
			for (int k = 0; k < 4; k++) {
				const float v =
					lane(a, k) *
					(g.get(q + k) - lane(b, k) -
					 ((xv.get(q + k) - lane(e, k)) -
					  lane(d, k)) *
						 lane(cc, k));
				o.set(q + k, overwrite ? v : o.get(q + k) + v);
			}
		}
		nn_stv(dx, j, o);
	}
}

/* how the training forward and the backward launch over m rows of c */
typedef struct bn_launch {
	dim3 grid, block;   /* bn_partial */
	dim3 sgrid, sblock; /* bn_stats, bn_grad_stats */
	bn_split sp;        /* the slices */
	size_t total;       /* elements */
	int small;          /* total < 2^32: 32-bit channel arithmetic */
	float *co;          /* the coefficients, in ws after the partial sums */
} bn_launch;

static bn_launch launch_of(size_t m, int c, void *ws)
{
	bn_launch l;
	l.sp = split_of(m, c);
	l.grid = dim3(channel_groups(c), l.sp.nb);
	l.block = dim3(BN_TX, BN_TY);
	l.sgrid = dim3(channel_groups(c));
	l.sblock = dim3(BN_TX, BN_SY);
	l.total = m * (size_t)c;
	l.small = l.total <= UINT32_MAX;
	l.co = (float *)((char *)ws + part_bytes(m, c));
	return l;
}

/* vectors of N values the element-wise pass takes: all of them when c is
 * a multiple of N and every tensor is 16-byte aligned, else none */
template <typename T>
static size_t pass_vectors(const bn_launch &l, int c, const void *a,
			   const void *b, const void *d)
{
	if (c % nn_vec<T>::N || !nn_vec_aligned(a) || !nn_vec_aligned(b) ||
	    !nn_vec_aligned(d))
		return 0;
	return l.total / nn_vec<T>::N;
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
		NN_LAUNCH(bn_partial<T>, l.grid, l.block, s)(
			m, c, l.sp.rows, (const T *)x, NULL, NULL, (double *)ws);
		NN_LAUNCH(bn_stats<T>, l.sgrid, l.sblock, s)(
			m, c, l.sp.nb, (const T *)x, (const double *)ws, eps,
			momentum, gamma, beta, rm, rv, save_mean, save_invstd,
			l.co);
		const size_t nv = pass_vectors<T>(l, c, x, y, NULL);
		if (nv)
			NN_LAUNCH_OVER(bn_normalise_v<T>, nv, s)(
				nv, c, l.small, (const T *)x, l.co, (T *)y, relu);
		else
			NN_LAUNCH_OVER(bn_normalise<T>, l.total, s)(
				l.total, c, l.small, (const T *)x, l.co, (T *)y,
				relu);
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
			 NN_LAUNCH_OVER(bn_eval<T>, total, s)(
				 total, c, total <= UINT32_MAX, eps, (const T *)x,
				 gamma, beta, rm, rv, (T *)y, relu));
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
		NN_LAUNCH(bn_partial<T>, l.grid, l.block, s)(
			m, c, l.sp.rows, (const T *)x, (const T *)dy, save_mean,
			(double *)ws);
		NN_LAUNCH(bn_grad_stats, l.sgrid, l.sblock, s)(
			m, c, l.sp.nb, (const double *)ws, gamma, save_mean,
			save_invstd, dgamma, dbeta, l.co);
		const size_t nv = dx ? pass_vectors<T>(l, c, x, dy, dx) : 0;
		if (nv)
			NN_LAUNCH_OVER(bn_dx_v<T>, nv, s)(
				nv, c, l.small, (const T *)x, (const T *)dy, l.co,
				(T *)dx, overwrite);
		else if (dx)
			NN_LAUNCH_OVER(bn_dx<T>, l.total, s)(
				l.total, c, l.small, (const T *)x, (const T *)dy,
				l.co, (T *)dx, overwrite);
	});
	return cudaGetLastError();
}
