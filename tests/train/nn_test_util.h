/*
 * nn_test_util.h - shared helpers of the layer tests: deterministic random
 * tensors and a finite-difference gradient check.
 *
 * The check uses the scalar L = sum_i y_i r_i for a fixed random r, so
 * dL/dy = r is what the backward pass is fed, and compares dL/dv[j] from
 * the backward pass with a central difference (L(v+h) - L(v-h)) / 2h,
 * accumulated in double. Forward passes run in float, so the difference is
 * noisy at about 1e-7 * |L| / h: tolerances are stated per call.
 */
#ifndef IMSHARD_NN_TEST_UTIL_H
#define IMSHARD_NN_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"
#include "train/nn.h"
#include "train/optim.h"
#include "test.h"

/* Fills v[0..n) with uniform values in [lo, hi) from (seed, stream). */
static inline void nn_test_fill(float *v, size_t n, uint64_t seed, float lo,
				float hi)
{
	ims_rng r;
	ims_rng_seed(&r, seed, 0x6e6e);
	for (size_t i = 0; i < n; i++)
		v[i] = lo + (hi - lo) * (float)ims_rng_uniform(&r);
}

static inline float *nn_test_alloc(size_t n)
{
	float *p = calloc(n ? n : 1, sizeof(float));
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

/*
 * ns parameter tensors as the optimiser's batching sees a large model's:
 * a gap before every third, sizes (i * 7919) % max_count (some empty),
 * every other one without decay, every fifth frozen. *total: the floats
 * they span. The caller frees the array.
 */
static inline nn_optim_segment *nn_test_segments(int ns, size_t max_count,
						 size_t *total)
{
	nn_optim_segment *sg = calloc((size_t)ns, sizeof(*sg));
	if (!sg) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	size_t n = 0;
	for (int i = 0; i < ns; i++) {
		n += (size_t)(i % 3 == 0); /* a gap */
		size_t count = (size_t)i * 7919 % max_count;
		sg[i] = (nn_optim_segment){n, count, i % 2 == 0, i % 5 != 4};
		n += count;
	}
	*total = n;
	return sg;
}

/*
 * The cross-entropy tally's inputs at step (1, 2, 3, ...): n x k logits
 * in [-3, 3), labels that move with the step, every third sample's label
 * logit tied with class 0's, and at step 2 a NaN as the first logit.
 */
static inline void nn_test_tally_inputs(float *z, int32_t *labels, int n,
					int k, int step)
{
	nn_test_fill(z, (size_t)n * k, 70 + (uint64_t)step, -3, 3);
	for (int i = 0; i < n; i++) {
		labels[i] = (int32_t)((i * 31u + (unsigned)step) % (unsigned)k);
		if (i % 3 == 0 && k > 1) /* a tie with class 0 */
			z[(size_t)i * k + labels[i]] = z[(size_t)i * k];
	}
	if (step == 2)
		z[0] = NAN;
}

/* Runs one backward kernel writing n floats of dx: 0 or an error code. */
typedef int (*nn_test_dx_fn)(nn_ctx *ctx, void *ud, float *dx);

/*
 * The overwrite convention (ctx->dx_overwrite): the kernel run over a dx
 * full of NaN with the flag set must give what it adds into a zeroed dx
 * without it, element for element (== so that -0 and +0 agree), on ctx's
 * threads. Returns the number of differing elements (printing the first).
 * The flag is left clear.
 */
static inline int nn_test_overwrite(const char *what, nn_ctx *ctx,
				    nn_test_dx_fn fn, void *ud, size_t n)
{
	float *add = nn_test_alloc(n), *over = nn_test_alloc(n);
	for (size_t i = 0; i < n; i++)
		over[i] = NAN;
	ctx->dx_overwrite = 0;
	int rc = fn(ctx, ud, add);
	ctx->dx_overwrite = 1;
	int rc2 = fn(ctx, ud, over);
	ctx->dx_overwrite = 0;
	int bad = rc || rc2 ? (int)n : 0;
	for (size_t i = 0; !rc && !rc2 && i < n; i++)
		if (!(add[i] == over[i])) {
			if (!bad)
				fprintf(stderr, "%s: dx[%zu] overwritten %g, added %g\n",
					what, i, (double)over[i], (double)add[i]);
			bad++;
		}
	free(add);
	free(over);
	return bad;
}

/* Recomputes the forward output into y from the current inputs. */
typedef void (*nn_test_forward_fn)(void *ud, float *y);

static inline double nn_test_loss(nn_test_forward_fn fwd, void *ud, float *y,
				  const float *r, size_t ny)
{
	fwd(ud, y);
	double s = 0;
	for (size_t i = 0; i < ny; i++)
		s += (double)y[i] * r[i];
	return s;
}

/*
 * Checks `grad` (the analytic dL/dv, L = sum y r) against central
 * differences at `probes` entries of v spread over its length (all when
 * nv <= probes), step h. An entry passes when
 * |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|).
 * Returns the number of failing entries and prints the first few.
 * v is restored exactly.
 */
static inline int nn_test_gradcheck(const char *what, nn_test_forward_fn fwd,
				    void *ud, float *v, size_t nv,
				    const float *grad, const float *r,
				    size_t ny, int probes, float h, double atol,
				    double rtol)
{
	float *y = nn_test_alloc(ny);
	int bad = 0;
	size_t step = nv <= (size_t)probes ? 1 : nv / (size_t)probes;
	for (size_t j = 0; j < nv; j += step) {
		float keep = v[j];
		v[j] = keep + h;
		double lp = nn_test_loss(fwd, ud, y, r, ny);
		v[j] = keep - h;
		double lm = nn_test_loss(fwd, ud, y, r, ny);
		v[j] = keep;
		/* the step actually taken, after float rounding */
		double hh = ((double)(keep + h) - (double)(keep - h));
		double num = (lp - lm) / hh;
		double ana = grad[j];
		double tol = atol + rtol * fmax(fabs(ana), fabs(num));
		if (fabs(ana - num) > tol) {
			if (bad < 5)
				fprintf(stderr,
					"%s: gradient of entry %zu: analytic %.7g, "
					"numeric %.7g\n",
					what, j, ana, num);
			bad++;
		}
	}
	free(y);
	return bad;
}

#endif
