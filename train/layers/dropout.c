/*
 * dropout.c - inverted dropout, CPU reference kernels.
 *
 * Element i is kept when the top 53 bits of ims_hash64(seed, i), read as
 * a uniform number in [0, 1), are >= p: a counter-based draw, so the mask
 * depends on (seed, i) alone and not on the thread count or on the order
 * elements are visited. A CUDA kernel computing the same hash reproduces
 * the CPU mask bit for bit. Kept elements are scaled by 1 / (1 - p) so
 * the expected activation is unchanged and evaluation needs no rescaling.
 */
#include "train/nn_internal.h"

/* Below this many elements a loop stays on one thread: forking costs more. */
#define DROPOUT_PAR_MIN 32768

static int check_p(float p, const char *what, ims_error *err)
{
	RETURN_IF(!(p >= 0.0f && p < 1.0f), err, IMS_EINVAL,
		  "cannot %s: probability %g is outside [0, 1)", what, (double)p);
	return 0;
}

static inline int keep(uint64_t seed, size_t i, double p)
{
	return (double)(ims_hash64(seed, (uint64_t)i) >> 11) * 0x1.0p-53 >= p;
}

int nn_cpu_dropout_forward(nn_ctx *ctx, size_t count, float p, uint64_t seed,
			   const float *x, float *y, uint8_t *mask,
			   ims_error *err)
{
	FORWARD_IF_ERR(check_p(p, "apply dropout", err));
	const int nt = count < DROPOUT_PAR_MIN ? 1 : ctx->threads;
	if (p == 0.0f) {
		/* Everything kept: y = x exactly, mask all ones. */
#pragma omp parallel for num_threads(nt) schedule(static)
		for (size_t i = 0; i < count; i++) {
			y[i] = x[i];
			if (mask)
				mask[i] = 1;
		}
		return 0;
	}
	const float scale = 1.0f / (1.0f - p);
	const double pd = p;
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++) {
		int k = keep(seed, i, pd);
		y[i] = k ? x[i] * scale : 0.0f;
		if (mask)
			mask[i] = (uint8_t)k;
	}
	return 0;
}

int nn_cpu_dropout_backward(nn_ctx *ctx, size_t count, float p,
			    const uint8_t *mask, const float *dy, float *dx,
			    ims_error *err)
{
	static const char what[] = "backpropagate dropout";
	FORWARD_IF_ERR(check_p(p, what, err));
	if (!dx)
		return 0;
	const int nt = count < DROPOUT_PAR_MIN ? 1 : ctx->threads;
	const int ow = ctx->dx_overwrite;
	if (p == 0.0f) {
#pragma omp parallel for num_threads(nt) schedule(static)
		for (size_t i = 0; i < count; i++)
			dx[i] = (ow ? 0.0f : dx[i]) + dy[i];
		return 0;
	}
	RETURN_IF(!mask, err, IMS_EINVAL, "cannot %s: no mask", what);
	const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++)
		dx[i] = (ow ? 0.0f : dx[i]) + (mask[i] ? dy[i] * scale : 0.0f);
	return 0;
}
