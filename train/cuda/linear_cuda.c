/*
 * linear_cuda.c - the fully connected layer on the device: cuBLAS for the
 * products, own kernels for the bias (elementwise.cu, reduce.cu).
 *
 * cuBLAS is column-major; a row-major [R, C] matrix is the column-major
 * [C, R] one with leading dimension C. With x [N, in], w [out, in],
 * y [N, out] row-major (PyTorch's layouts) that gives:
 *   y  = x w^T + b   Y [out, N]  = W^T [out, in] X [in, N]   (T, N)
 *   dx (+)= dy w     DX [in, N]  = W [in, out] DY [out, N]   (N, N)
 *   dw = dy^T x      DW [in, out] = X [in, N] DY^T [N, out]  (N, T)
 * where W, X, DY, ... are the column-major views. dx is added to (beta 1)
 * or, with ctx->dx_overwrite, overwritten (beta 0, which cuBLAS does not
 * read); dw is overwritten.
 *
 * fp32: sgemm; the bias is written first and the GEMM adds to it (beta
 * 1), as on the CPU. TF32 (ctx->tf32) sets CUBLAS_TF32_TENSOR_OP_MATH for
 * the call, otherwise the default math keeps fp32 products.
 *
 * Mixed precision (ctx->precision bf16 or fp16): x, w (the model's 16-bit
 * weight copy), y, dx and dy are 16-bit; cublasGemmEx multiplies 16-bit
 * A and B with CUBLAS_COMPUTE_32F (fp32 accumulation, tensor cores) into
 * a 16-bit y or dx, rounded once (dx after adding, with beta 1). The bias
 * is then added to the rounded product and rounded again (add_bias, the
 * convolution's rule). dw is written in fp32 and rounded to 16 bits in
 * place, the value a 16-bit weight gradient would have (the CPU's
 * reference rounds at the same places, train/layers/mixed.c).
 */
#include <limits.h>

#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"

static cudaDataType half_type(const nn_ctx *ctx)
{
	return ctx->precision == NN_PREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

static int set_math(nn_ctx *ctx, const char *what, ims_error *err)
{
	const int tf32 = ctx->precision == NN_PREC_FP32 && ctx->tf32;
	CUBLAS_CHECK(err, what,
		     nn_cublas()->set_math_mode(nn_cuda_dev_of(ctx)->cublas,
						tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
						     : CUBLAS_DEFAULT_MATH));
	return 0;
}

/* C (ct: 16-bit or fp32, ldc) = A B (16-bit) + beta C */
static int gemm_half(nn_ctx *ctx, const char *what, cublasOperation_t ta,
		     cublasOperation_t tb, int m, int n, int k, const void *a,
		     int lda, const void *b, int ldb, float beta, void *c,
		     cudaDataType ct, int ldc, ims_error *err)
{
	const float one = 1.0f;
	const cudaDataType t = half_type(ctx);
	CUBLAS_CHECK(err, what,
		     nn_cublas()->gemm_ex(nn_cuda_dev_of(ctx)->cublas, ta, tb, m,
					  n, k, &one, a, t, lda, b, t, ldb,
					  &beta, c, ct, ldc, CUBLAS_COMPUTE_32F,
					  CUBLAS_GEMM_DEFAULT));
	return 0;
}

static int linear_forward_half(nn_ctx *ctx, const nn_linear_desc *d,
			       const void *x, const void *w, const float *b,
			       void *y, ims_error *err)
{
	static const char what[] = "run a linear layer on cuda";
	FORWARD_IF_ERR(gemm_half(ctx, what, CUBLAS_OP_T, CUBLAS_OP_N, d->out,
				 d->n, d->in, w, d->in, x, d->in, 0.0f, y,
				 half_type(ctx), d->out, err));
	if (d->bias)
		CUDA_CHECK(err, what,
			   nn_cuda_k_add_bias(nn_cuda_dev_of(ctx)->stream,
					      ctx->precision, d->n, d->out, 1, b,
					      y));
	return 0;
}

/* dx and dw of the linear layer in 16 bits (db already done) */
static int linear_backward_half(nn_ctx *ctx, const nn_linear_desc *d,
				const void *x, const void *w, const void *dy,
				void *dx, float *dw, ims_error *err)
{
	static const char what[] = "run a linear layer backward on cuda";
	if (dx)
		FORWARD_IF_ERR(gemm_half(ctx, what, CUBLAS_OP_N, CUBLAS_OP_N,
					 d->in, d->n, d->out, w, d->in, dy,
					 d->out, ctx->dx_overwrite ? 0.0f : 1.0f,
					 dx, half_type(ctx), d->in, err));
	if (dw) {
		FORWARD_IF_ERR(gemm_half(ctx, what, CUBLAS_OP_N, CUBLAS_OP_T,
					 d->in, d->out, d->n, x, d->in, dy,
					 d->out, 0.0f, dw, CUDA_R_32F, d->in,
					 err));
		CUDA_CHECK(err, what,
			   nn_cuda_k_round_f32(nn_cuda_dev_of(ctx)->stream,
					       ctx->precision,
					       (size_t)d->out * d->in, dw));
	}
	return 0;
}

int nn_cuda_linear_forward(nn_ctx *ctx, const nn_linear_desc *d,
			   const void *x, const void *w, const float *b,
			   void *y, ims_error *err)
{
	static const char what[] = "run a linear layer on cuda";
	FORWARD_IF_ERR(nn_linear_check_desc(d, "run a linear layer", err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a linear layer: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	FORWARD_IF_ERR(nn_cuda_check_precision(ctx, "run a linear layer", err));
	FORWARD_IF_ERR(set_math(ctx, what, err));
	if (nn_cuda_is_half(ctx))
		return linear_forward_half(ctx, d, x, w, b, y, err);
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	const float one = 1.0f, zero = 0.0f;
	if (d->bias)
		CUDA_CHECK(err, what,
			   nn_cuda_k_fill_rows(dev->stream, d->n, d->out, b, y));
	CUBLAS_CHECK(err, what,
		     nn_cublas()->sgemm(dev->cublas, CUBLAS_OP_T, CUBLAS_OP_N,
					d->out, d->n, d->in, &one, w, d->in, x,
					d->in, d->bias ? &one : &zero, y,
					d->out));
	return 0;
}

int nn_cuda_linear_backward(nn_ctx *ctx, const nn_linear_desc *d,
			    const void *x, const void *w, const void *dy,
			    void *dx, float *dw, float *db, ims_error *err)
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
			   nn_cuda_k_channel_sum(dev->stream, ctx->precision,
						 d->n, d->out, 1, dy, db));
	if (!dx && !dw)
		return 0;
	FORWARD_IF_ERR(set_math(ctx, what, err));
	if (nn_cuda_is_half(ctx))
		return linear_backward_half(ctx, d, x, w, dy, dx, dw, err);
	if (dx)
		CUBLAS_CHECK(err, what,
			     nn_cublas()->sgemm(dev->cublas, CUBLAS_OP_N,
						CUBLAS_OP_N, d->in, d->n, d->out,
						&one, w, d->in, dy, d->out,
						ctx->dx_overwrite ? &zero : &one,
						dx, d->in));
	if (dw)
		CUBLAS_CHECK(err, what,
			     nn_cublas()->sgemm(dev->cublas, CUBLAS_OP_N,
						CUBLAS_OP_T, d->in, d->out, d->n,
						&one, x, d->in, dy, d->out, &zero,
						dw, d->in));
	return 0;
}
