/*
 * cuda_kernels_test.h - shared by test_cuda_kernels's files:
 * test_cuda_kernels.c (the rules, the element-wise, pooling, 16-bit,
 * cross-entropy and optimiser kernels, main) and test_cuda_kernels_bn.c
 * (channels-last batch norm, and reduce.cu's channel sums and frozen
 * batch norm); defined in cuda_kernels_test.c. The kernels run on the
 * host (cuda_host_run.h), so pointers are host memory.
 */
#ifndef IMSHARD_CUDA_KERNELS_TEST_H
#define IMSHARD_CUDA_KERNELS_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "test.h"
#include "train/cuda/cuda_kernels.h"
#include "train/nn_internal.h"

/* the reference: a one-thread CPU context */
extern nn_ctx cpu;
extern ims_error err;

/* "fp32", "bf16" or "fp16"; the bytes of one value of prec */
const char *pname(int prec);
size_t esize(int prec);

/* A tensor of n values of prec, `off` values past a 64-byte boundary;
 * free with tfree. */
typedef struct tensor {
	char *base;
	void *p;
} tensor;

tensor tnew(int prec, size_t n, int off);
void tfree(tensor *t);
/* f rounded into the tensor's type; value i widened to float */
void tset(int prec, tensor *t, const float *f, size_t n);
float tget(int prec, const void *p, size_t i);
/* a tensor of random values in [lo, hi), with -0, +0 and (with nan) a
 * NaN among them */
tensor trand(int prec, size_t n, int off, uint64_t seed, float lo, float hi,
	     int nan);
tensor tcopy(int prec, const tensor *src, size_t n, int off);

/* Comparisons, each one check, printing the first difference:
 *   same: the same bytes;
 *   same_act: n values of prec, the same bits or both NaN (a NaN's
 *     payload is the converting function's choice);
 *   near: |got - want| <= rtol max(|want|, floor) for each float;
 *   near_act: each value within one rounding step of prec of the CPU's,
 *     2^-p max(|want|, floor) (fp32: 2^-20). */
void same(const char *what, const void *want, const void *got, size_t bytes);
void same_act(int prec, const char *what, const void *want, const void *got,
	      size_t n);
void near(const char *what, const float *want, const float *got, size_t n,
	  double rtol, double floor);
void near_act(int prec, const char *what, const void *want, const void *got,
	      size_t n, double floor);

/* a kernel's launch, one check: cudaSuccess */
#define KERNEL_OK(call)                                                        \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		test_checks_++;                                                \
		if (e_ != cudaSuccess) {                                       \
			fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__,   \
				__LINE__, #call, (int)e_);                     \
			test_failures_++;                                      \
		}                                                              \
	} while (0)

/* test_cuda_kernels_bn.c */
void test_bn_nhwc(void);
void test_reduce(void);

#endif
