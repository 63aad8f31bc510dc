/*
 * linear.c - the fully connected layer (PyTorch's Linear), CPU reference
 * kernels: one sgemm per product.
 *
 * x [N, in], w [out, in] (PyTorch's layout), b [out], y [N, out]:
 *   y  = x w^T + b      y's columns split between threads
 *   dx += dy w          dx's columns split between threads, beta = 1
 *   dw = dy^T x         dw's rows split between threads, beta = 0
 *   db = sum_n dy       in double, n in order, one thread per block
 * As in conv.c, one OpenMP team runs single-threaded GEMMs on disjoint
 * slices of the output rather than letting OpenBLAS start its own threads
 * beside OpenMP's. Each output element is computed by one thread in an
 * order fixed by the shape and ctx->threads; the bias gradient does not
 * depend on the threads at all.
 */
#include <cblas.h>
#include <omp.h>

#include "train/nn_internal.h"

/* Outputs per block of the bias gradient: one thread's double sums. */
#define LINEAR_DB_BLOCK 256
/* Layers under this many multiply-adds stay on one thread. */
#define LINEAR_PAR_MIN_MACS (1u << 18)
/* Thread slices start at multiples of this many floats (64 bytes). */
#define LINEAR_ALIGN 16

int nn_linear_check_desc(const nn_linear_desc *d, const char *what,
		      ims_error *err)
{
	RETURN_IF(!d, err, IMS_EINVAL, "cannot %s: no descriptor", what);
	RETURN_IF(d->n < 1 || d->in < 1 || d->out < 1, err, IMS_EINVAL,
		  "cannot %s: invalid shape %dx%d -> %d (all must be >= 1)",
		  what, d->n, d->in, d->out);
	RETURN_IF(d->bias != 0 && d->bias != 1, err, IMS_EINVAL,
		  "cannot %s: bias flag %d is not 0 or 1", what, d->bias);
	/* Each factor is an int, so the products fit in size_t on 64 bits;
	 * what can overflow is their size in bytes on 32. */
	const size_t lim = SIZE_MAX / sizeof(float);
	const size_t n = (size_t)d->n, in = (size_t)d->in, out = (size_t)d->out;
	RETURN_IF(n > lim / in || n > lim / out || out > lim / in, err,
		  IMS_ELIMIT, "cannot %s: shape %dx%d -> %d is too large", what,
		  d->n, d->in, d->out);
	return 0;
}

static int team_size(const nn_ctx *ctx, const nn_linear_desc *d)
{
	double macs = (double)d->n * d->in * d->out;
	return ctx->threads < 1 || macs < LINEAR_PAR_MIN_MACS ? 1 : ctx->threads;
}

static void set_blas_threads(int n)
{
	if (openblas_get_num_threads() != n)
		openblas_set_num_threads(n);
}

/* Thread t's share [*lo, *hi) of n, cut at multiples of LINEAR_ALIGN. */
static void split(int n, int t, int nt, int *lo, int *hi)
{
	long long units = ((long long)n + LINEAR_ALIGN - 1) / LINEAR_ALIGN;
	long long l = units * t / nt * LINEAR_ALIGN;
	long long h = units * (t + 1) / nt * LINEAR_ALIGN;
	*lo = (int)(l < n ? l : n);
	*hi = (int)(h < n ? h : n);
}

int nn_cpu_linear_forward(nn_ctx *ctx, const nn_linear_desc *d,
			  const float *x, const float *w, const float *b,
			  float *y, ims_error *err)
{
	FORWARD_IF_ERR(nn_linear_check_desc(d, "run a linear layer", err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a linear layer: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	const int nt = team_size(ctx, d);
	const size_t in = (size_t)d->in, out = (size_t)d->out;
	set_blas_threads(1);
#pragma omp parallel num_threads(nt)
	{
		/* the team may be smaller than asked (nested parallelism) */
		int o0, o1;
		split(d->out, omp_get_thread_num(), omp_get_num_threads(), &o0,
		      &o1);
		if (o0 < o1) {
			/* the bias goes in first and the GEMM adds to it */
			if (d->bias)
				for (size_t i = 0; i < (size_t)d->n; i++)
					for (int o = o0; o < o1; o++)
						y[i * out + o] = b[o];
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
				    d->n, o1 - o0, d->in, 1.0f, x, d->in,
				    w + o0 * in, d->in,
				    d->bias ? 1.0f : 0.0f, y + o0, d->out);
		}
	}
	return 0;
}

/* db[o] = sum_n dy[n, o], blocks of outputs per thread, n in order. */
static void bias_grad(const nn_linear_desc *d, const float *dy, float *db,
		      int nt)
{
	const int blocks = (d->out + LINEAR_DB_BLOCK - 1) / LINEAR_DB_BLOCK;
#pragma omp parallel for num_threads(nt) schedule(static)
	for (int bl = 0; bl < blocks; bl++) {
		double s[LINEAR_DB_BLOCK] = {0};
		const int o0 = bl * LINEAR_DB_BLOCK;
		const int len = d->out - o0 < LINEAR_DB_BLOCK ? d->out - o0
							      : LINEAR_DB_BLOCK;
		for (size_t i = 0; i < (size_t)d->n; i++) {
			const float *row = dy + i * d->out + o0;
			for (int j = 0; j < len; j++)
				s[j] += row[j];
		}
		for (int j = 0; j < len; j++)
			db[o0 + j] = (float)s[j];
	}
}

int nn_cpu_linear_backward(nn_ctx *ctx, const nn_linear_desc *d,
			   const float *x, const float *w, const float *dy,
			   float *dx, float *dw, float *db, ims_error *err)
{
	FORWARD_IF_ERR(nn_linear_check_desc(d, "run a linear layer backward", err));
	if (!d->bias)
		db = NULL;
	RETURN_IF(!dy || (dw && !x) || (dx && !w), err, IMS_EINVAL,
		  "cannot run a linear layer backward: missing %s",
		  !dy ? "output gradient" : dw && !x ? "input" : "weights");
	const int nt = team_size(ctx, d);
	const size_t in = (size_t)d->in;
	if (db)
		bias_grad(d, dy, db, nt);
	if (!dx && !dw)
		return 0;
	set_blas_threads(1);
#pragma omp parallel num_threads(nt)
	{
		const int t = omp_get_thread_num(), team = omp_get_num_threads();
		int lo, hi;
		split(d->in, t, team, &lo, &hi);
		if (dx && lo < hi)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
				    d->n, hi - lo, d->out, 1.0f, dy, d->out,
				    w + lo, d->in, ctx->dx_overwrite ? 0.0f : 1.0f,
				    dx + lo, d->in);
		split(d->out, t, team, &lo, &hi);
		if (dw && lo < hi)
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans,
				    hi - lo, d->in, d->n, 1.0f, dy + lo, d->out,
				    x, d->in, 0.0f, dw + lo * in, d->in);
	}
	return 0;
}
