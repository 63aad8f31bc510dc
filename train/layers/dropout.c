/*
 * dropout.c - inverted dropout, CPU reference kernels.
 *
 * Element i is kept when the top 53 bits of ims_hash64(seed, i), read as
 * a uniform number in [0, 1), are >= p: a counter-based draw, so the mask
 * depends on (seed, i) alone and not on the thread count or on the order
 * elements are visited. A CUDA kernel computing the same hash reproduces
 * the CPU mask bit for bit. i is the element's index in the batch of all
 * ranks (nn_dropout_place), not in this rank's share, so that ranks draw
 * different masks and N ranks drop what one rank with their whole batch
 * would. Kept elements are scaled by 1 / (1 - p) so the expected
 * activation is unchanged and evaluation needs no rescaling.
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

int nn_dropout_check_place(const nn_dropout_place *at, size_t count,
			   const char *what, ims_error *err)
{
	if (!at)
		return 0;
	RETURN_IF(at->world < 1 || at->rank < 0 || at->rank >= at->world, err,
		  IMS_EINVAL, "cannot %s: rank %d is not one of %d", what,
		  at->rank, at->world);
	const int whole = at->per_sample >= 1 && count % at->per_sample == 0;
	RETURN_IF(at->world > 1 && !whole, err, IMS_EINVAL,
		  "cannot %s: %zu elements are not samples of %zu", what, count,
		  at->per_sample);
	return 0;
}

static inline int keep(uint64_t seed, uint64_t i, double p)
{
	return (double)(ims_hash64(seed, i) >> 11) * 0x1.0p-53 >= p;
}

/* Local element i's index in the one-rank batch (world > 1). */
static inline uint64_t global_index(const nn_dropout_place *at, size_t i)
{
	const uint64_t f = i % at->per_sample, k = i / at->per_sample;
	return ((uint64_t)at->rank + k * (uint64_t)at->world) * at->per_sample +
	       f;
}

int nn_cpu_dropout_forward(nn_ctx *ctx, size_t count, float p, uint64_t seed,
			   const nn_dropout_place *at, const float *x, float *y,
			   uint8_t *mask, ims_error *err)
{
	FORWARD_IF_ERR(check_p(p, "apply dropout", err));
	FORWARD_IF_ERR(nn_dropout_check_place(at, count, "apply dropout", err));
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
	const nn_dropout_place *g = at && at->world > 1 ? at : NULL;
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t i = 0; i < count; i++) {
		int k = keep(seed, g ? global_index(g, i) : i, pd);
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
