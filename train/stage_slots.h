/*
 * stage_slots.h - the slot protocol of batch staging (nn.h's nn_stage_*),
 * kept by every staging backend alike: the CUDA one (train/cuda/
 * train_cuda.c) and its CPU twin (train/stage_host.c), so the twin fails
 * where the device would silently read or overwrite the wrong bytes.
 *
 * A slot is FREE (it may be filled), QUEUED (a copy into it was queued
 * from host memory the caller must not reuse yet) or READ (its copy was
 * waited for and a step reads it until stage_done). The rules:
 *   - put only into a FREE slot: not while its copy is queued (the host
 *     memory of the first batch would be dropped unwaited), nor while a
 *     step still reads it (the copy would overwrite its input);
 *   - get only a QUEUED slot (else the step would read a stale batch);
 *   - done only a READ slot;
 *   - host memory is reused (given back to the loader) only when no
 *     QUEUED slot copies from it.
 * Private to the network library.
 */
#ifndef IMSHARD_STAGE_SLOTS_H
#define IMSHARD_STAGE_SLOTS_H

#include <stddef.h>

#include "common/common.h"

enum { NN_SLOT_FREE = 0, NN_SLOT_QUEUED, NN_SLOT_READ };

typedef struct nn_stage_slots {
	int state[2];
	const void *src[2]; /* the host batch a QUEUED slot copies from */
	size_t src_bytes[2];
} nn_stage_slots;

static inline int nn_slots_check(int slot, ims_error *err)
{
	RETURN_IF(slot < 0 || slot > 1, err, IMS_EINVAL,
		  "cannot use batch slot %d: there are two (0, 1)", slot);
	return 0;
}

/* A copy of host bytes [x, x + bytes) into slot is being queued. */
static inline int nn_slots_put(nn_stage_slots *s, int slot, const void *x,
			       size_t bytes, ims_error *err)
{
	FORWARD_IF_ERR(nn_slots_check(slot, err));
	RETURN_IF(s->state[slot] == NN_SLOT_QUEUED, err, IMS_EINVAL,
		  "cannot stage a batch into slot %d: the copy queued into it "
		  "before was never waited for (nn_stage_get)",
		  slot);
	RETURN_IF(s->state[slot] == NN_SLOT_READ, err, IMS_EINVAL,
		  "cannot stage a batch into slot %d: a step still reads it "
		  "(nn_stage_done was not called)",
		  slot);
	s->state[slot] = NN_SLOT_QUEUED;
	s->src[slot] = x;
	s->src_bytes[slot] = bytes;
	return 0;
}

/* The slot's copy is being waited for. */
static inline int nn_slots_get(nn_stage_slots *s, int slot, ims_error *err)
{
	FORWARD_IF_ERR(nn_slots_check(slot, err));
	RETURN_IF(s->state[slot] != NN_SLOT_QUEUED, err, IMS_EINVAL,
		  "cannot take staged batch %d: no copy was queued into it",
		  slot);
	s->state[slot] = NN_SLOT_READ;
	s->src[slot] = NULL;
	s->src_bytes[slot] = 0;
	return 0;
}

/* The step that reads the slot is queued. */
static inline int nn_slots_done(nn_stage_slots *s, int slot, ims_error *err)
{
	FORWARD_IF_ERR(nn_slots_check(slot, err));
	RETURN_IF(s->state[slot] != NN_SLOT_READ, err, IMS_EINVAL,
		  "cannot release batch slot %d: no step reads it", slot);
	s->state[slot] = NN_SLOT_FREE;
	return 0;
}

/* The QUEUED slot whose copy reads from [p, p + bytes), else -1. */
static inline int nn_slots_reading(const nn_stage_slots *s, const void *p,
				   size_t bytes)
{
	const char *lo = p, *hi = lo + bytes;
	for (int i = 0; i < 2; i++) {
		const char *a = s->src[i], *b = a + s->src_bytes[i];
		if (s->state[i] == NN_SLOT_QUEUED && a < hi && lo < b)
			return i;
	}
	return -1;
}

/* Host memory from `host` on is about to be refilled by its owner. */
static inline int nn_slots_reuse(const nn_stage_slots *s, const void *host,
				 ims_error *err)
{
	int slot = nn_slots_reading(s, host, 1);
	RETURN_IF(slot >= 0, err, IMS_EINVAL,
		  "cannot give a batch's host memory back: its copy into slot "
		  "%d is still queued (nn_stage_get first)",
		  slot);
	return 0;
}

#endif
