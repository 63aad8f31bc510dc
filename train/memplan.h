/*
 * memplan.h - offsets for buffers with known lifetimes in one arena, so
 * that buffers never live at the same time share bytes. Private to
 * train/ (the model's activation plan, train/model_plan.c) and its tests.
 *
 * A lifetime is an inclusive range of steps [first, last]: the step that
 * first writes the buffer to the step that last reads it. Two buffers
 * whose ranges share a step are live together (a kernel at that step may
 * read one while it writes the other) and get disjoint bytes; a buffer
 * that hands its bytes to the next one at the same step (an in-place
 * kernel) is one buffer to this planner, merged by the caller.
 *
 * Pure functions on caller-owned arrays; no allocation beyond a
 * temporary index array, any thread.
 */
#ifndef IMSHARD_MEMPLAN_H
#define IMSHARD_MEMPLAN_H

#include <stddef.h>

#include "common/common.h"

typedef struct nn_mp_buf {
	size_t bytes;    /* 0: needs no bytes (offset set to 0) */
	int first, last; /* live over steps [first, last], first <= last */
	size_t offset;   /* out: from the arena's start, a multiple of align */
} nn_mp_buf;

/*
 * Greedy by size over lifetimes: buffers are placed largest first (ties:
 * earlier first step, then lower index, so the result depends on the
 * input alone); each goes to the lowest offset where it overlaps no
 * already placed buffer whose lifetime meets its own. Sizes are rounded
 * up to align (a power of two). *arena gets the bytes the placement
 * spans. Errors: IMS_EINVAL (align not a power of two, first > last),
 * IMS_ELIMIT (sizes overflow), IMS_ENOMEM.
 */
int nn_mp_assign(nn_mp_buf *b, int n, size_t align, size_t *arena,
		 ims_error *err);

/*
 * Checks a placement: returns 1 and the indices (*i < *j) of the first
 * pair of buffers that are live at a common step and share a byte, 0
 * when there is none.
 */
int nn_mp_find_overlap(const nn_mp_buf *b, int n, int *i, int *j);

#endif
