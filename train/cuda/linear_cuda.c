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
 *
 * Mixed precision (ctx->precision bf16 or fp16): the GEMMs' inputs (x, w,
 * dy) are rounded into 16-bit copies in the workspace (half.cu) and
 * multiplied by cublasGemmEx with 16-bit A and B, fp32 C and
 * CUBLAS_COMPUTE_32F (a combination cuBLAS lists for both CUDA_R_16BF and
 * CUDA_R_16F; tensor cores under the default math mode), so y, dx and dw
 * are written straight into their fp32 tensors with the same beta rules.
 * The bias and its gradient stay fp32. Weights are rounded on every call:
 * they are small beside the activations, and a cached copy would have to
 * follow every optimiser step.
 */
#include <limits.h>

#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"

/* bytes of one 16-bit value */
#define HALF_BYTES 2

static cudaDataType half_type(const nn_ctx *ctx)
{
	return ctx->precision == NN_PREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* C (fp32, ldc) = A B (16-bit, as ctx->precision says) + beta C */
static int gemm_half(nn_ctx *ctx, const char *what, cublasOperation_t ta,
		     cublasOperation_t tb, int m, int n, int k, const void *a,
		     int lda, const void *b, int ldb, float beta, float *c,
		     int ldc, ims_error *err)
{
	const float one = 1.0f;
	const cudaDataType t = half_type(ctx);
	CUBLAS_CHECK(err, what,
		     nn_cublas()->gemm_ex(nn_cuda_dev_of(ctx)->cublas, ta, tb, m,
					  n, k, &one, a, t, lda, b, t, ldb,
					  &beta, c, CUDA_R_32F, ldc,
					  CUBLAS_COMPUTE_32F,
					  CUBLAS_GEMM_DEFAULT));
	return 0;
}

/*
 * Rounds up to three fp32 tensors (NULL: skipped) into 16-bit copies
 * carved from the workspace; out[i] gets each copy (NULL for a skipped
 * one).
 */
static int to_half3(nn_ctx *ctx, const char *what, const float *const src[3],
		    const size_t count[3], void *out[3], ims_error *err)
{
	size_t total = 0;
	for (int i = 0; i < 3; i++)
		if (src[i])
			total += nn_cuda_round256(count[i] * HALF_BYTES);
	char *ws = nn_cuda_workspace(ctx, total ? total : 256, err);
	if (!ws)
		return ims_fail_context(err, "cannot %s", what);
	for (int i = 0; i < 3; i++) {
		out[i] = NULL;
		if (!src[i])
			continue;
		out[i] = ws;
		CUDA_CHECK(err, what,
			   nn_cuda_k_to_half(nn_cuda_dev_of(ctx)->stream,
					     ctx->precision, count[i], src[i],
					     ws));
		ws += nn_cuda_round256(count[i] * HALF_BYTES);
	}
	return 0;
}

static int linear_forward_half(nn_ctx *ctx, const nn_linear_desc *d,
			       const float *x, const float *w, const float *b,
			       float *y, ims_error *err)
{
	static const char what[] = "run a linear layer on cuda";
	const float *src[3] = {x, w, NULL};
	const size_t count[3] = {(size_t)d->n * d->in, (size_t)d->out * d->in, 0};
	void *h[3];
	FORWARD_IF_ERR(to_half3(ctx, what, src, count, h, err));
	if (d->bias)
		CUDA_CHECK(err, what,
			   nn_cuda_k_fill_rows(nn_cuda_dev_of(ctx)->stream, d->n,
					       d->out, b, y));
	return gemm_half(ctx, what, CUBLAS_OP_T, CUBLAS_OP_N, d->out, d->n,
			 d->in, h[1], d->in, h[0], d->in, d->bias ? 1.0f : 0.0f,
			 y, d->out, err);
}

/* dx and dw of the linear layer from 16-bit copies (db already done) */
static int linear_backward_half(nn_ctx *ctx, const nn_linear_desc *d,
				const float *x, const float *w,
				const float *dy, float *dx, float *dw,
				ims_error *err)
{
	static const char what[] = "run a linear layer backward on cuda";
	const float *src[3] = {dy, dw ? x : NULL, dx ? w : NULL};
	const size_t count[3] = {(size_t)d->n * d->out, (size_t)d->n * d->in,
				 (size_t)d->out * d->in};
	void *h[3];
	FORWARD_IF_ERR(to_half3(ctx, what, src, count, h, err));
	if (dx)
		FORWARD_IF_ERR(gemm_half(ctx, what, CUBLAS_OP_N, CUBLAS_OP_N,
					 d->in, d->n, d->out, h[2], d->in, h[0],
					 d->out, ctx->dx_overwrite ? 0.0f : 1.0f,
					 dx, d->in, err));
	if (dw)
		FORWARD_IF_ERR(gemm_half(ctx, what, CUBLAS_OP_N, CUBLAS_OP_T,
					 d->in, d->out, d->n, h[1], d->in, h[0],
					 d->out, 0.0f, dw, d->in, err));
	return 0;
}

int nn_cuda_linear_forward(nn_ctx *ctx, const nn_linear_desc *d,
			   const float *x, const float *w, const float *b,
			   float *y, ims_error *err)
{
	static const char what[] = "run a linear layer on cuda";
	FORWARD_IF_ERR(nn_linear_check_desc(d, "run a linear layer", err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a linear layer: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	FORWARD_IF_ERR(nn_cuda_check_precision(ctx, "run a linear layer", err));
	if (nn_cuda_is_half(ctx))
		return linear_forward_half(ctx, d, x, w, b, y, err);
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
	FORWARD_IF_ERR(nn_cuda_check_precision(
		ctx, "run a linear layer backward", err));
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const float one = 1.0f, zero = 0.0f;
	if (db)
		CUDA_CHECK(err, what,
			   nn_cuda_k_channel_sum(dev->stream, d->n, d->out, 1,
						 dy, db));
	if (nn_cuda_is_half(ctx))
		return dx || dw ? linear_backward_half(ctx, d, x, w, dy, dx, dw,
						       err)
				: 0;
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
