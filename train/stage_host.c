/*
 * stage_host.c - the CPU twin of a device's batch staging
 * (nn_ctx_init_cpu_staged; imshard-train's IMSHARD_TEST_HOST_STAGE).
 *
 * The device loop's host side (batches staged into two slots, the next
 * one taken from the loader while a step runs, logits read back, a
 * separate context for validation's loss) normally runs only with a GPU.
 * With this table the CPU backend runs it too, its "device" being host
 * memory, so tests hold the loop to the plain CPU loop's results bit for
 * bit on a machine without a GPU.
 *
 * It behaves as the device does where timing matters, so that a loop
 * that breaks the protocol fails here instead of reading the wrong bytes
 * on a GPU:
 *   - a copy is not made when it is queued (stage_put) but when the step
 *     first reads the slot (stage_get), as an asynchronous copy may run
 *     as late as that: host memory reused before then changes what is
 *     copied, and is caught (the source's CRC-32C at put and at get);
 *   - the slot protocol (train/stage_slots.h) is enforced: no slot
 *     refilled while its copy is queued or a step reads it, no host batch
 *     given back (nn_stage_reuse) while a copy from it is queued;
 *   - host memory for batches (the loader's ring) freed while a copy from
 *     it is still queued ends the process with one line on stderr
 *     (abort): a free cannot report an error, and on a device the copy
 *     engine would read freed memory. The stage must be freed (its copies
 *     drained) before the memory it copies from.
 * Passes are recorded and replayed as on a device (CUDA graphs), by
 * record_host.c.
 * Its 16-bit entries and fp16 gradient pass are the CPU backend's own
 * (train/layers/mixed.c, nn_unscale_check's host loop), so the loop's
 * mixed precision and loss-scaling protocol run here too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/host_twin.h"
#include "train/stage_slots.h"

/* A copy queued into a slot, made when the slot is read. */
typedef struct host_copy {
	const void *x;
	const int32_t *labels;
	size_t x_bytes, label_bytes;
	uint32_t x_crc, label_crc; /* of the source when it was queued */
} host_copy;

typedef struct host_stage {
	nn_ctx *ctx;
	void *x[2];
	int32_t *labels[2];
	size_t x_bytes, label_bytes;
	nn_stage_slots slots;
	host_copy queued[2];
} host_stage;

/* Host batch memory: a page of header holding the size (so a free can
 * be checked against the copies queued from it), then whole pages, as
 * the loader's own default memory. */
#define HOST_HEADER 4096

static void *host_alloc(nn_ctx *ctx, size_t bytes)
{
	(void)ctx;
	void *p = NULL;
	if (bytes > SIZE_MAX - 2 * HOST_HEADER ||
	    posix_memalign(&p, HOST_HEADER, HOST_HEADER + (bytes ? bytes : 1)))
		return NULL;
	*(size_t *)p = bytes;
	return (char *)p + HOST_HEADER;
}

static void host_free(nn_ctx *ctx, void *p)
{
	if (!p)
		return;
	char *base = (char *)p - HOST_HEADER;
	const size_t bytes = *(size_t *)base;
	host_twin *t = ctx->dev;
	int slot = t && t->stage ? nn_slots_reading(&t->stage->slots, p, bytes)
				 : -1;
	if (slot >= 0) {
		fprintf(stderr,
			"imshard: staged batches: host memory freed while its "
			"copy into slot %d is still queued (free the stage, "
			"which waits for its copies, first)\n",
			slot);
		abort();
	}
	free(base);
}

static void stage_free(nn_stage *st)
{
	host_stage *s = (host_stage *)st;
	if (!s)
		return;
	/* the device would finish its queued copies before its slots go;
	 * here they are dropped, their sources untouched */
	host_twin *t = s->ctx->dev;
	if (t && t->stage == s)
		t->stage = NULL;
	for (int i = 0; i < 2; i++) {
		free(s->x[i]);
		free(s->labels[i]);
	}
	free(s);
}

/* Slots aligned as the loader's batches are, zeroed. */
static void *slot_alloc(size_t bytes)
{
	void *p = NULL;
	size_t n = (bytes + 63) & ~(size_t)63;
	if (posix_memalign(&p, 64, n ? n : 64))
		return NULL;
	memset(p, 0, n ? n : 64);
	return p;
}

static int stage_create(nn_ctx *ctx, size_t x_bytes, size_t label_bytes,
			nn_stage **out, ims_error *err)
{
	host_twin *t = ctx->dev;
	RETURN_IF(t->stage, err, IMS_EINVAL,
		  "cannot stage batches: this context stages already");
	host_stage *s = calloc(1, sizeof(*s));
	int ok = s != NULL;
	for (int i = 0; ok && i < 2; i++) {
		s->x[i] = slot_alloc(x_bytes);
		s->labels[i] = slot_alloc(label_bytes);
		ok = s->x[i] && s->labels[i];
	}
	if (s)
		s->ctx = ctx;
	if (!ok) {
		stage_free((nn_stage *)s);
		return ims_fail(err, IMS_ENOMEM, "cannot stage batches: out of memory");
	}
	s->x_bytes = x_bytes;
	s->label_bytes = label_bytes;
	t->stage = s;
	*out = (nn_stage *)s;
	return 0;
}

static int stage_put(nn_stage *st, int slot, const void *x, size_t x_bytes,
		     const int32_t *labels, size_t label_bytes, ims_error *err)
{
	host_stage *s = (host_stage *)st;
	RETURN_IF(x_bytes > s->x_bytes || label_bytes > s->label_bytes, err,
		  IMS_EINVAL,
		  "cannot stage a batch: %zu + %zu bytes for slots of %zu + %zu",
		  x_bytes, label_bytes, s->x_bytes, s->label_bytes);
	FORWARD_IF_ERR(nn_slots_put(&s->slots, slot, x, x_bytes, err));
	s->queued[slot] = (host_copy){
		.x = x,
		.labels = labels,
		.x_bytes = x_bytes,
		.label_bytes = label_bytes,
		.x_crc = ims_crc32c(0, x, x_bytes),
		.label_crc = ims_crc32c(0, labels, label_bytes),
	};
	return 0;
}

/* The queued copy runs now, from the bytes its source holds now. */
static int stage_get(nn_stage *st, int slot, float **x, int32_t **labels,
		     ims_error *err)
{
	host_stage *s = (host_stage *)st;
	FORWARD_IF_ERR(nn_slots_get(&s->slots, slot, err));
	const host_copy *c = &s->queued[slot];
	RETURN_IF(ims_crc32c(0, c->x, c->x_bytes) != c->x_crc ||
			  ims_crc32c(0, c->labels, c->label_bytes) != c->label_crc,
		  err, IMS_EINVAL,
		  "cannot take staged batch %d: its host memory changed while "
		  "its copy was queued (reused before the copy ran)",
		  slot);
	memcpy(s->x[slot], c->x, c->x_bytes);
	memcpy(s->labels[slot], c->labels, c->label_bytes);
	*x = s->x[slot];
	*labels = s->labels[slot];
	return 0;
}

static int stage_done(nn_stage *st, int slot, ims_error *err)
{
	return nn_slots_done(&((host_stage *)st)->slots, slot, err);
}

static int stage_reuse(nn_stage *st, const void *host, ims_error *err)
{
	return nn_slots_reuse(&((host_stage *)st)->slots, host, err);
}

static void twin_release(nn_ctx *ctx)
{
	host_twin *t = ctx->dev;
	if (t) {
		nn_host_record_release(t);
		nn_cpu_state_clear(&t->cpu);
	}
	free(ctx->dev);
	ctx->dev = NULL;
}

static const nn_backend *staged_table(void)
{
	static nn_backend b;
	if (!b.name) {
		b = nn_backend_cpu;
		b.release = twin_release;
		b.stage_create = stage_create;
		b.stage_put = stage_put;
		b.stage_get = stage_get;
		b.stage_done = stage_done;
		b.stage_reuse = stage_reuse;
		b.stage_free = stage_free;
		b.host_alloc = host_alloc;
		b.host_free = host_free;
		b.host_memory = "page-aligned host memory (staged as for a device)";
		/* passes recorded and replayed as a device's (record_host.c) */
		nn_host_record_install(&b);
		b.name = "cpu";
	}
	return &b;
}

int nn_ctx_init_cpu_staged(nn_ctx *ctx, int threads, ims_error *err)
{
	FORWARD_IF_ERR(nn_ctx_init_cpu(ctx, threads, err));
	host_twin *t = calloc(1, sizeof(*t));
	RETURN_IF(!t, err, IMS_ENOMEM, "cannot set up a context: out of memory");
	ctx->dev = t;
	ctx->be = staged_table();
	return 0;
}
