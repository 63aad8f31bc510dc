/*
 * linear_cuda.c - the fully connected layer on the device: cuBLAS sgemm
 * for the products, own kernels for the bias (elementwise.cu, reduce.cu).
 *
 * cuBLAS is column-major; a row-major [R, C] matrix is the column-major
 * [C, R] one with leading dimension C. With x [N, in], w [out, in],
 * y [N, out] row-major (PyTorch's layouts) that gives:
 *   y  = x w^T + b   Y [out, N]  = W^T [out, in] X [in, N]   (T, N)
 *   dx (+)= dy w     DX [in, N]  = W [in, out] DY [out, N]   (N, N)
 *   dw = dy^T x      DW [in, out] = X [in, N] DY^T [N, out]  (N, T)
 * where W, X, DY, ... are the column-major views. As on the CPU the bias
 * is written first and the GEMM adds to it (beta 1); dx is added to
 * (beta 1) or, with ctx->dx_overwrite, overwritten (beta 0, which cuBLAS
 * does not read); dw is overwritten.
 */
#include <limits.h>

#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"

int nn_cuda_linear_forward(nn_ctx *ctx, const nn_linear_desc *d,
			   const float *x, const float *w, const float *b,
			   float *y, ims_error *err)
{
	static const char what[] = "run a linear layer on cuda";
	FORWARD_IF_ERR(nn_linear_check_desc(d, "run a linear layer", err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a linear layer: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const float one = 1.0f, zero = 0.0f;
	if (d->bias)
		CUDA_CHECK(err, what,
			   nn_cuda_k_fill_rows(dev->stream, d->n, d->out, b, y));
	CUBLAS_CHECK(err, what,
		     nn_cublas()->sgemm(dev->cublas, CUBLAS_OP_T, CUBLAS_OP_N, d->out,
				 d->n, d->in, &one, w, d->in, x, d->in,
				 d->bias ? &one : &zero, y, d->out));
	return 0;
}

int nn_cuda_linear_backward(nn_ctx *ctx, const nn_linear_desc *d,
			    const float *x, const float *w, const float *dy,
			    float *dx, float *dw, float *db, ims_error *err)
{
	static const char what[] = "run a linear layer backward on cuda";
	FORWARD_IF_ERR(nn_linear_check_desc(d, "run a linear layer backward",
					    err));
	if (!d->bias)
		db = NULL;
	RETURN_IF(!dy || (dw && !x) || (dx && !w), err, IMS_EINVAL,
		  "cannot run a linear layer backward: missing %s",
		  !dy ? "output gradient" : dw && !x ? "input" : "weights");
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const float one = 1.0f, zero = 0.0f;
	if (db)
		CUDA_CHECK(err, what,
			   nn_cuda_k_channel_sum(dev->stream, d->n, d->out, 1,
						 dy, db));
	if (dx)
		CUBLAS_CHECK(err, what,
			     nn_cublas()->sgemm(dev->cublas, CUBLAS_OP_N, CUBLAS_OP_N,
					 d->in, d->n, d->out, &one, w, d->in,
					 dy, d->out,
					 ctx->dx_overwrite ? &zero : &one, dx,
					 d->in));
	if (dw)
		CUBLAS_CHECK(err, what,
			     nn_cublas()->sgemm(dev->cublas, CUBLAS_OP_N, CUBLAS_OP_T,
					 d->in, d->out, d->n, &one, x, d->in,
					 dy, d->out, &zero, dw, d->in));
	return 0;
}
