/*
 * test.h - the tiny assertion header of imshard's C tests.
 *
 * Every check prints file:line and both values when it fails and marks the
 * test failed; the test keeps going so one run reports every failure.
 * main() ends with `return TEST_EXIT();`. A test that needs something the
 * machine lacks returns TEST_SKIP (77, CTest's SKIP_RETURN_CODE).
 */
#ifndef IMSHARD_TEST_H
#define IMSHARD_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_tmp.h"

#define TEST_SKIP 77

/* one pair per test program, however many of its files include this
 * header (weak: the linker keeps one) */
__attribute__((weak)) int test_failures_;
__attribute__((weak)) int test_checks_;

#define CHECK(cond)                                                            \
	do {                                                                   \
		test_checks_++;                                                \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			test_failures_++;                                      \
		}                                                              \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                     \
	do {                                                                   \
		long long va_ = (long long)(a), vb_ = (long long)(b);          \
		test_checks_++;                                                \
		if (va_ != vb_) {                                              \
			fprintf(stderr,                                        \
				"%s:%d: CHECK_EQ_INT failed: %s == %s (%lld vs %lld)\n", \
				__FILE__, __LINE__, #a, #b, va_, vb_);         \
			test_failures_++;                                      \
		}                                                              \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                     \
	do {                                                                   \
		uint64_t va_ = (uint64_t)(a), vb_ = (uint64_t)(b);             \
		test_checks_++;                                                \
		if (va_ != vb_) {                                              \
			fprintf(stderr,                                        \
				"%s:%d: CHECK_EQ_U64 failed: %s == %s (%" PRIu64 \
				" vs %" PRIu64 ")\n",                          \
				__FILE__, __LINE__, #a, #b, va_, vb_);         \
			test_failures_++;                                      \
		}                                                              \
	} while (0)

#define CHECK_EQ_STR(a, b)                                                     \
	do {                                                                   \
		const char *va_ = (a), *vb_ = (b);                             \
		test_checks_++;                                                \
		if (!va_ || !vb_ || strcmp(va_, vb_) != 0) {                   \
			fprintf(stderr,                                        \
				"%s:%d: CHECK_EQ_STR failed: %s == %s (\"%s\" vs \"%s\")\n", \
				__FILE__, __LINE__, #a, #b, va_ ? va_ : "(null)", \
				vb_ ? vb_ : "(null)");                         \
			test_failures_++;                                      \
		}                                                              \
	} while (0)

#define CHECK_NEAR(a, b, tol)                                                  \
	do {                                                                   \
		double va_ = (double)(a), vb_ = (double)(b);                   \
		test_checks_++;                                                \
		if (!(va_ - vb_ <= (tol) && vb_ - va_ <= (tol))) {             \
			fprintf(stderr,                                        \
				"%s:%d: CHECK_NEAR failed: %s ~ %s (%.9g vs %.9g, tol %g)\n", \
				__FILE__, __LINE__, #a, #b, va_, vb_,          \
				(double)(tol));                                \
			test_failures_++;                                      \
		}                                                              \
	} while (0)

#define CHECK_MEM(a, b, n)                                                     \
	do {                                                                   \
		test_checks_++;                                                \
		if (memcmp((a), (b), (n)) != 0) {                              \
			fprintf(stderr, "%s:%d: CHECK_MEM failed: %s vs %s (%zu bytes)\n", \
				__FILE__, __LINE__, #a, #b, (size_t)(n));      \
			test_failures_++;                                      \
		}                                                              \
	} while (0)

/* Status-code check that also prints the library's message. */
#define CHECK_OK(expr, errp)                                                   \
	do {                                                                   \
		int rc_ = (expr);                                              \
		test_checks_++;                                                \
		if (rc_ != 0) {                                                \
			fprintf(stderr, "%s:%d: CHECK_OK failed: %s -> %d (%s)\n", \
				__FILE__, __LINE__, #expr, rc_,                \
				(errp)->msg);                    \
			test_failures_++;                                      \
		}                                                              \
	} while (0)

#define TEST_EXIT()                                                            \
	(fprintf(stderr, "%d checks, %d failed\n", test_checks_, test_failures_), \
	 test_failures_ ? 1 : 0)

#endif
