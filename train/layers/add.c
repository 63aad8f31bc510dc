/*
 * add.c - element-wise addition (residual connections) and gradient
 * accumulation, CPU reference kernels.
 *
 * nn_cpu_accumulate is the backward of every identity-like op: add (once
 * per input), flatten and the shortcut of a residual block. Element-wise,
 * so y may alias a or b.
 */
#include <string.h>

#include "train/nn_internal.h"

/* Below this many elements a loop stays on one thread: forking costs more. */
#define ADD_PAR_MIN 65536

int nn_cpu_add_forward(nn_ctx *ctx, size_t count, const float *a,
		       const float *b, float *y, ims_error *err)
{
	(void)err;
	const int nt = count < ADD_PAR_MIN ? 1 : ctx->threads;
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		y[i] = a[i] + b[i];
	return 0;
}

int nn_cpu_add_relu_forward(nn_ctx *ctx, size_t count, const float *a,
			    const float *b, float *y, ims_error *err)
{
	(void)err;
	const int nt = count < ADD_PAR_MIN ? 1 : ctx->threads;
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++) {
		const float v = a[i] + b[i];
		y[i] = v < 0.0f ? 0.0f : v; /* NaN passes, as in relu.c */
	}
	return 0;
}

int nn_cpu_accumulate(nn_ctx *ctx, size_t count, const float *dy, float *dx,
		      ims_error *err)
{
	(void)err;
	if (!dx)
		return 0;
	const int nt = count < ADD_PAR_MIN ? 1 : ctx->threads;
	if (ctx->dx_overwrite) {
		memcpy(dx, dy, count * sizeof(float));
		return 0;
	}
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		dx[i] += dy[i];
	return 0;
}
