/*
 * backend_cuda_test.c - what test_backend_cuda's files share
 * (backend_cuda_test.h): the two contexts, moving tensors to and from the
 * device, and the comparisons under the stated tolerances.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend_cuda_test.h"
#include "common/common.h"
#include "nn_test_util.h"
#include "test.h"

nn_ctx cpu, gpu;
ims_error err;
int cl;

/* ---- device helpers ---------------------------------------------------- */

void *up_bytes(const void *h, size_t bytes)
{
	void *d = gpu.be->alloc(&gpu, bytes);
	if (!d) {
		fprintf(stderr, "out of device memory (%zu bytes)\n", bytes);
		exit(1);
	}
	if (h && bytes && gpu.be->to_device(&gpu, d, h, bytes, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	return d;
}

float *up(const float *h, size_t n)
{
	return up_bytes(h, n * sizeof(float));
}

/* A host copy of n floats (or bytes) of device memory; the caller frees. */
void *down_bytes(const void *d, size_t bytes)
{
	void *h = malloc(bytes ? bytes : 1);
	if (!h || (bytes && gpu.be->to_host(&gpu, h, d, bytes, &err))) {
		fprintf(stderr, "cannot copy from the device: %s\n", err.msg);
		exit(1);
	}
	return h;
}

float *down(const float *d, size_t n)
{
	return down_bytes(d, n * sizeof(float));
}

void dfree(void *d)
{
	gpu.be->free(&gpu, d);
}

float *host_copy(const float *h, size_t n)
{
	float *c = nn_test_alloc(n);
	memcpy(c, h, n * sizeof(float));
	return c;
}

float *filled(size_t n, float v)
{
	float *c = nn_test_alloc(n);
	for (size_t i = 0; i < n; i++)
		c[i] = v;
	return c;
}

/* ---- comparisons ------------------------------------------------------- */

/* The stated tolerance; prints the first few failures. */
int near(const char *what, const float *want, const float *got, size_t n)
{
	double scale = 0;
	for (size_t i = 0; i < n; i++)
		scale = fmax(scale, fabs((double)want[i]));
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		double a = want[i], b = got[i];
		double ref = fmax(fmax(fabs(a), fabs(b)), FLOOR * scale);
		if (!(fabs(a - b) <= RTOL * ref) && !(a == b)) {
			if (bad < 5)
				fprintf(stderr, "%s[%zu]: cpu %.9g, cuda %.9g\n",
					what, i, a, b);
			bad++;
		}
	}
	if (bad)
		fprintf(stderr, "%s: %d of %zu outside tolerance\n", what, bad, n);
	test_checks_++;
	test_failures_ += bad != 0;
	return bad;
}

/* The same bits (NaN included). */
int same(const char *what, const void *want, const void *got, size_t bytes)
{
	test_checks_++;
	if (!memcmp(want, got, bytes))
		return 0;
	const uint8_t *a = want, *b = got;
	size_t i = 0;
	while (a[i] == b[i])
		i++;
	fprintf(stderr, "%s: differs from byte %zu of %zu\n", what, i, bytes);
	test_failures_++;
	return 1;
}

/* The same floats: equal bits, or both NaN (a NaN's payload may differ:
 * the GPU's arithmetic returns its canonical NaN). */
int same_floats(const char *what, const float *want, const float *got, size_t n)
{
	test_checks_++;
	for (size_t i = 0; i < n; i++) {
		if (isnan(want[i]) && isnan(got[i]))
			continue;
		if (memcmp(&want[i], &got[i], sizeof(float))) {
			fprintf(stderr, "%s[%zu]: cpu %.9g, cuda %.9g (of %zu)\n",
				what, i, (double)want[i], (double)got[i], n);
			test_failures_++;
			return 1;
		}
	}
	return 0;
}

/* A device result against a host one, then freed. */
void near_dev(const char *what, const float *want, float *d, size_t n)
{
	float *h = down(d, n);
	near(what, want, h, n);
	free(h);
}

void same_dev(const char *what, const void *want, void *d, size_t bytes)
{
	void *h = down_bytes(d, bytes);
	same(what, want, h, bytes);
	free(h);
}

void same_dev_f(const char *what, const float *want, float *d, size_t n)
{
	float *h = down(d, n);
	same_floats(what, want, h, n);
	free(h);
}

/* ---- 16 bits ------------------------------------------------------------ */

const char *prec_name(int prec)
{
	return prec == NN_PREC_BF16 ? "bf16" : "fp16";
}

uint16_t *h16(int prec, const float *f, size_t n)
{
	uint16_t *h = malloc((n ? n : 1) * sizeof(uint16_t));
	CHECK(h != NULL);
	for (size_t i = 0; i < n; i++)
		h[i] = prec == NN_PREC_BF16 ? ims_f32_to_bf16(f[i])
					    : ims_f32_to_f16(f[i]);
	return h;
}

uint16_t *h16_nan(int prec, size_t n)
{
	uint16_t *h = malloc((n ? n : 1) * sizeof(uint16_t));
	CHECK(h != NULL);
	for (size_t i = 0; i < n; i++)
		h[i] = prec == NN_PREC_BF16 ? 0x7fc0 : 0x7e00;
	return h;
}

float *widen16(int prec, const uint16_t *h, size_t n)
{
	float *f = nn_test_alloc(n);
	for (size_t i = 0; i < n; i++)
		f[i] = prec == NN_PREC_BF16 ? ims_bf16_to_f32(h[i])
					    : ims_f16_to_f32(h[i]);
	return f;
}

/* |got - want|_2 <= tol |want|_2 on floats */
void near_norm(const char *what, const float *want, const float *got, size_t n,
	       double tol)
{
	double diff = 0, norm = 0;
	for (size_t i = 0; i < n; i++) {
		double e = (double)got[i] - (double)want[i];
		diff += e * e;
		norm += (double)want[i] * (double)want[i];
	}
	diff = sqrt(diff);
	norm = sqrt(norm);
	test_checks_++;
	if (!(diff <= tol * norm)) {
		fprintf(stderr, "%s: |cuda - cpu| %.3g, |cpu| %.3g: %.3g relative, "
			"tolerance %.3g\n", what, diff, norm,
			norm > 0 ? diff / norm : diff, tol);
		test_failures_++;
	}
}

/* A 16-bit device tensor against the CPU's 16-bit result, by norm. */
void near16_dev(int prec, const char *what, const uint16_t *want, void *d,
		size_t n, double tol)
{
	uint16_t *got = down_bytes(d, n * sizeof(uint16_t));
	float *w = widen16(prec, want, n), *g = widen16(prec, got, n);
	near_norm(what, w, g, n, tol);
	free(got), free(w), free(g);
}

void near_f_dev(const char *what, const float *want, float *d, size_t n,
		double tol)
{
	float *got = down(d, n);
	near_norm(what, want, got, n, tol);
	free(got);
}
