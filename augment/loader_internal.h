/*
 * loader_internal.h - what loader.c (the loader's life, the epoch's share,
 * the ring and its producer) and loader_sample.c (filling one batch:
 * samples loaded, bad records replaced and counted) share: the loader's
 * state and its slots. The manual is loader.h; nothing outside those two
 * files includes this.
 */
#ifndef IMSHARD_AUGMENT_LOADER_INTERNAL_H
#define IMSHARD_AUGMENT_LOADER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "augment/augment.h"
#include "recordio/recordio.h"

/* One batch of the ring: its samples and what the fill found. */
typedef struct aug_slot {
	void *data;
	int32_t *labels;
	uint64_t *indices;
	uint8_t *padded;
	uint8_t *replaced;   /* per sample: stands in for a bad record */
	uint64_t *bad_first; /* per sample: the first record it replaced */
	uint64_t *bad_list;  /* the replaced samples' bad_first, in order */
	int n_bad, n_bad_listed;
	char bad_msg[IMS_ERRMSG_MAX]; /* why bad_list[0] could not be loaded */
	int count;
	uint64_t step;
	int state;
	int rc;          /* < 0 when the batch could not be filled */
	ims_error err;
} aug_slot;

/* One OpenMP thread of the fill: its own cursor, decoder and scratch
 * image, and the seconds it spent in each stage. */
typedef struct aug_worker {
	rio_cursor *cur;
	aug_codec *codec;
	aug_image img;
	double read_s, decode_s, augment_s;
} aug_worker;

/* The loader behind the opaque handle of loader.h. */
struct aug_loader {
	aug_loader_opts o;
	char *manifest;
	rio_reader *reader;
	uint64_t n;
	uint64_t per_rank, padded, dropped, batches;
	/* the current epoch's share and batches: fewer than per_rank and
	 * batches when it started past position 0 */
	uint64_t epoch_per_rank, epoch_batches;
	uint64_t epoch_position; /* where the current epoch started */
	size_t sample_bytes;
	int threads;

	/* shard-owning mode: the records each rank owns */
	uint64_t *owned;
	uint64_t n_owned;

	int k;
	aug_slot *ring;
	aug_worker *workers;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t producer;
	int running, stop;
	int stopped; /* aug_loader_stop was called */
	uint64_t epoch;
	uint64_t *share;
	uint8_t *share_pad;
	uint64_t next_step;
	int held; /* ring index the consumer holds, or -1 */

	aug_loader_stats stats;
};

/*
 * Fills slot s with batch `step` of the current epoch (l->share from
 * step * batch_size), loading each sample with l->threads OpenMP threads
 * and replacing a record that cannot be loaded with the next of the
 * share. Called by the producer thread alone, without l->mu; takes it to
 * add to l->stats. s->rc < 0 (and s->err) when the batch could not be
 * filled: a run of bad records, a changed shard, or l->stop set.
 */
void aug_loader_fill(aug_loader *l, aug_slot *s, uint64_t step);

#endif
