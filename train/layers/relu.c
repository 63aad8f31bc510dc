/*
 * relu.c - the rectifier, CPU reference kernels.
 *
 * y = x < 0 ? 0 : x rather than max(x, 0): a NaN passes through, as in
 * PyTorch, so a diverging run shows up in the loss instead of being
 * silently zeroed here. Element-wise, so in-place use (y == x, dx == dy)
 * is fine.
 */
#include "train/nn_internal.h"

/* Below this many elements a loop stays on one thread: forking costs more. */
#define RELU_PAR_MIN 65536

int nn_cpu_relu_forward(nn_ctx *ctx, size_t count, const float *x, float *y,
			ims_error *err)
{
	(void)err;
	const int nt = count < RELU_PAR_MIN ? 1 : ctx->threads;
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		y[i] = x[i] < 0.0f ? 0.0f : x[i];
	return 0;
}

int nn_cpu_relu_backward(nn_ctx *ctx, size_t count, const float *y,
			 const float *dy, float *dx, ims_error *err)
{
	(void)err;
	if (!dx)
		return 0;
	const int nt = count < RELU_PAR_MIN ? 1 : ctx->threads;
	/* dy is loaded whatever the sign of y, so this is a vector select;
	 * a conditional load stays a branch per element, and the signs of y
	 * are a coin toss (the mispredictions made this pass 4x slower than
	 * the forward one) */
	if (ctx->dx_overwrite) {
#pragma omp parallel for num_threads(nt) schedule(static)
		for (size_t i = 0; i < count; i++) {
			const float g = dy[i];
			dx[i] = y[i] > 0.0f ? g : 0.0f;
		}
		return 0;
	}
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++) {
		const float g = dy[i];
		dx[i] += y[i] > 0.0f ? g : 0.0f;
	}
	return 0;
}
