/*
 * conv_algo.h - choosing a convolution algorithm: a ranked list of
 * candidates per direction of each shape, tried in order until one runs,
 * with what ran cached. Private to the network library; the CUDA
 * backend's cuDNN calls (train/cuda/conv_cuda.c) fill the lists and run
 * the candidates, and tests/train/test_conv_algo.c drives the same logic
 * on the CPU with fake lists and fake failures.
 *
 * A candidate is eligible in a mode when the ranking did not mark it
 * unusable, it did not fail at run time before, its workspace fits the
 * limit, and, in NN_ALGO_DETERMINISTIC, it is deterministic. Running a
 * direction tries the cached choice first (if still eligible), then the
 * eligible candidates in rank order; a try that reports
 * NN_ALGO_UNSUPPORTED (cuDNN's NOT_SUPPORTED or EXECUTION_FAILED, or its
 * workspace could not be had) marks the candidate failed for good and
 * falls back to the next; the one that ran becomes the choice.
 *
 * Pure logic on caller-owned structs; one thread per list or cache.
 */
#ifndef IMSHARD_CONV_ALGO_H
#define IMSHARD_CONV_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "train/nn.h"

/* More than any cuDNN 9 ranks for one direction (8, 6, 7). */
#define NN_ALGO_MAX 16

typedef struct nn_algo_cand {
	int algo;          /* the backend's algorithm number */
	int math;          /* the backend's math type to run it with */
	size_t workspace;  /* bytes it needs */
	int deterministic; /* 1: the same inputs give the same bits */
	int usable;        /* 0: the ranking reported it cannot run */
	float ms;          /* benchmark: its measured time; < 0 unknown */
} nn_algo_cand;

/* One direction of one shape. */
typedef struct nn_algo_list {
	nn_algo_cand c[NN_ALGO_MAX];
	int n;           /* candidates, in rank order (best first) */
	int chosen;      /* the candidate that ran last, -1 before any */
	uint32_t failed; /* bit i: candidate i failed at run time */
	int ranked;      /* 1 once the list was filled */
} nn_algo_list;

/* An empty, unranked list. */
void nn_algo_list_init(nn_algo_list *l);

/* Whether candidate i may run in mode (NN_ALGO_*) with ws_limit bytes. */
int nn_algo_eligible(const nn_algo_list *l, int i, int mode, size_t ws_limit);

/* The candidate a run would try first (the choice if still eligible,
 * else the first eligible one), or -1 when none is. */
int nn_algo_next(const nn_algo_list *l, int mode, size_t ws_limit);

/* What one try reports besides a fatal error (< 0). */
enum { NN_ALGO_RAN = 0, NN_ALGO_UNSUPPORTED = 1 };

/* Runs candidate c; returns NN_ALGO_RAN, NN_ALGO_UNSUPPORTED (try the
 * next) or a negative IMS_E* code with err filled (stop: a device error
 * that another algorithm would not cure). */
typedef int (*nn_algo_try_fn)(void *ud, const nn_algo_cand *c,
			      ims_error *err);

/*
 * Runs one direction as described at the top: returns 0 when a candidate
 * ran (l->chosen is it), the try's error when one was fatal, and
 * IMS_EUNSUPPORTED when none was eligible or all failed, with a message
 * "cannot <what>: no <mode> algorithm ran (N ranked: ...)" that lists
 * what was tried and why each was passed over.
 */
int nn_algo_run(nn_algo_list *l, int mode, size_t ws_limit, nn_algo_try_fn fn,
		void *ud, const char *what, ims_error *err);

/* The name of a mode: "benchmark", "heuristic", "deterministic"; NULL
 * for an unknown one. nn_algo_mode_parse gives the mode of a name or -1. */
const char *nn_algo_mode_name(int mode);
int nn_algo_mode_parse(const char *name);

/* ---- the per-shape cache ------------------------------------------------- */

#define NN_ALGO_KEY_MAX 128
#define NN_ALGO_DIRS 3 /* forward, backward data, backward filter */

typedef struct nn_algo_entry {
	unsigned char key[NN_ALGO_KEY_MAX];
	size_t key_len;
	nn_algo_list dir[NN_ALGO_DIRS];
} nn_algo_entry;

typedef struct nn_algo_cache {
	nn_algo_entry *e;
	int n, cap;
} nn_algo_cache;

/*
 * The entry of key (key_len <= NN_ALGO_KEY_MAX bytes), added with three
 * unranked lists when absent (*added set to 1). The pointer lives until
 * the next call that adds. Errors: IMS_EINVAL (key too long),
 * IMS_ENOMEM.
 */
int nn_algo_cache_get(nn_algo_cache *c, const void *key, size_t key_len,
		      nn_algo_entry **out, int *added, ims_error *err);
/* Frees the entries; c may be zeroed or NULL. */
void nn_algo_cache_release(nn_algo_cache *c);

#endif
