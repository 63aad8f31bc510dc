/*
 * cuda_kernels_test.c - test_cuda_kernels's tensors and comparisons
 * (cuda_kernels_test.h).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "cuda_kernels_test.h"
#include "nn_test_util.h"

nn_ctx cpu;
ims_error err;

const char *pname(int prec)
{
	return prec == NN_PREC_BF16 ? "bf16" : prec == NN_PREC_FP16 ? "fp16" : "fp32";
}

size_t esize(int prec)
{
	return prec == NN_PREC_FP32 ? sizeof(float) : sizeof(uint16_t);
}

tensor tnew(int prec, size_t n, int off)
{
	tensor t;
	t.base = aligned_alloc(64, ((n + (size_t)off) * esize(prec) + 64) / 64 * 64);
	CHECK(t.base != NULL);
	t.p = t.base + (size_t)off * esize(prec);
	return t;
}

void tfree(tensor *t)
{
	free(t->base);
}

/* f rounded into the tensor's type */
void tset(int prec, tensor *t, const float *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (prec == NN_PREC_FP32)
			((float *)t->p)[i] = f[i];
		else
			((uint16_t *)t->p)[i] = prec == NN_PREC_BF16
							? ims_f32_to_bf16(f[i])
							: ims_f32_to_f16(f[i]);
	}
}

float tget(int prec, const void *p, size_t i)
{
	if (prec == NN_PREC_FP32)
		return ((const float *)p)[i];
	const uint16_t h = ((const uint16_t *)p)[i];
	return prec == NN_PREC_BF16 ? ims_bf16_to_f32(h) : ims_f16_to_f32(h);
}

/* a tensor of random values in [lo, hi), with -0, +0 and (with nan) a
 * NaN among them */
tensor trand(int prec, size_t n, int off, uint64_t seed, float lo,
		    float hi, int nan)
{
	float *f = nn_test_alloc(n);
	nn_test_fill(f, n, seed, lo, hi);
	if (n > 3) {
		f[1] = -0.0f;
		f[2] = 0.0f;
		if (nan)
			f[3] = NAN;
	}
	tensor t = tnew(prec, n, off);
	tset(prec, &t, f, n);
	free(f);
	return t;
}

tensor tcopy(int prec, const tensor *src, size_t n, int off)
{
	tensor t = tnew(prec, n, off);
	memcpy(t.p, src->p, n * esize(prec));
	return t;
}

void same(const char *what, const void *want, const void *got,
		 size_t bytes)
{
	test_checks_++;
	if (memcmp(want, got, bytes)) {
		size_t i = 0;
		while (((const uint8_t *)want)[i] == ((const uint8_t *)got)[i])
			i++;
		fprintf(stderr, "%s: differs from the CPU from byte %zu of %zu\n",
			what, i, bytes);
		test_failures_++;
	}
}

/* n values of prec: the same bits, or both NaN (a NaN's payload is the
 * converting function's choice) */
void same_act(int prec, const char *what, const void *want,
		     const void *got, size_t n)
{
	const size_t e = esize(prec);
	test_checks_++;
	for (size_t i = 0; i < n; i++) {
		const float w = tget(prec, want, i), g = tget(prec, got, i);
		if (memcmp((const char *)want + i * e, (const char *)got + i * e,
			   e) &&
		    !(isnan(w) && isnan(g))) {
			fprintf(stderr, "%s[%zu]: cpu %.9g, kernel %.9g\n", what,
				i, (double)w, (double)g);
			test_failures_++;
			return;
		}
	}
}

/* |got - want| <= rtol max(|want|, floor) for each float */
void near(const char *what, const float *want, const float *got,
		 size_t n, double rtol, double floor)
{
	test_checks_++;
	for (size_t i = 0; i < n; i++) {
		const double w = want[i], g = got[i];
		const double scale = fabs(w) > floor ? fabs(w) : floor;
		if (!(fabs(g - w) <= rtol * scale)) {
			fprintf(stderr, "%s[%zu]: cpu %.9g, kernel %.9g\n", what, i,
				w, g);
			test_failures_++;
			return;
		}
	}
}

/* each 16-bit (or float) value within one rounding step of the CPU's:
 * |got - want| <= 2^-p max(|want|, floor) */
void near_act(int prec, const char *what, const void *want,
		     const void *got, size_t n, double floor)
{
	const double step = prec == NN_PREC_BF16 ? 0x1p-7
			    : prec == NN_PREC_FP16 ? 0x1p-10
						   : 0x1p-20;
	test_checks_++;
	for (size_t i = 0; i < n; i++) {
		const double w = tget(prec, want, i), g = tget(prec, got, i);
		const double scale = fabs(w) > floor ? fabs(w) : floor;
		if (!(fabs(g - w) <= step * scale)) {
			fprintf(stderr, "%s[%zu]: cpu %.9g, kernel %.9g\n", what, i,
				w, g);
			test_failures_++;
			return;
		}
	}
}
