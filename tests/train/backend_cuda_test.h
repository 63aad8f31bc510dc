/*
 * backend_cuda_test.h - shared by test_backend_cuda's files:
 * test_backend_cuda.c (the rules, the fp32 cuDNN and cuBLAS entries,
 * main), test_backend_cuda_kernels.c (the fp32 entries of the backend's
 * own kernels) and test_backend_cuda_mixed.c (16 bits in both layouts,
 * fp32 channels-last); defined in backend_cuda_test.c.
 */
#ifndef IMSHARD_BACKEND_CUDA_TEST_H
#define IMSHARD_BACKEND_CUDA_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "train/nn_internal.h"

/* the tolerances of test_backend_cuda.c's header */
#define RTOL 1e-4
#define FLOOR 1e-2
#define TOL_BF16 1e-2
#define TOL_FP16 2e-3

extern nn_ctx cpu, gpu;
extern ims_error err;
/* the 16-bit cases' layout: 1 runs them channels-last (descriptors'
 * nhwc) on both backends, the CPU's twin the reference */
extern int cl;

/* Device memory: up copies h there (NULL: left uninitialised), down
 * makes a host copy the caller frees; either exits on failure. */
void *up_bytes(const void *h, size_t bytes);
float *up(const float *h, size_t n);
void *down_bytes(const void *d, size_t bytes);
float *down(const float *d, size_t n);
void dfree(void *d);
/* host arrays: a copy of h, n copies of v */
float *host_copy(const float *h, size_t n);
float *filled(size_t n, float v);

/* Comparisons, each one check: near under RTOL and FLOOR, the same bytes,
 * the same floats (NaN equal); the _dev ones read a device tensor. They
 * print the first few differences. */
int near(const char *what, const float *want, const float *got, size_t n);
int same(const char *what, const void *want, const void *got, size_t bytes);
int same_floats(const char *what, const float *want, const float *got,
		size_t n);
void near_dev(const char *what, const float *want, float *d, size_t n);
void same_dev(const char *what, const void *want, void *d, size_t bytes);
void same_dev_f(const char *what, const float *want, float *d, size_t n);

/* 16 bits: the precision's name; n floats rounded to it (h16) or n NaN
 * (h16_nan), widened back (widen16); comparisons by norm, |got - want|_2
 * <= tol |want|_2, of floats, of a device 16-bit tensor against the
 * CPU's, and of a device float tensor */
const char *prec_name(int prec);
uint16_t *h16(int prec, const float *f, size_t n);
uint16_t *h16_nan(int prec, size_t n);
float *widen16(int prec, const uint16_t *h, size_t n);
void near_norm(const char *what, const float *want, const float *got,
	       size_t n, double tol);
void near16_dev(int prec, const char *what, const uint16_t *want, void *d,
		size_t n, double tol);
void near_f_dev(const char *what, const float *want, float *d, size_t n,
		double tol);

/* test_backend_cuda_kernels.c: element-wise, pooling, cross-entropy */
void test_elementwise(void);
void test_pool(void);
void test_xent(void);

/* test_backend_cuda_mixed.c: the 16-bit cases, then fp32 channels-last */
void test_mixed(void);
void test_cl32(void);

#endif
