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

/* The records the loader reads: the split, and in shard-owning mode the
 * part of it this rank owns. Owns the manifest path, the reader and
 * owned. */
typedef struct aug_source {
	char *manifest;
	rio_reader *reader;
	uint64_t n;       /* records in the split */
	uint64_t *owned;  /* shard-owning mode: this rank's records; NULL
			     otherwise */
	uint64_t n_owned;
} aug_source;

/* This rank's share of an epoch: its sizes for a whole epoch, those of
 * the epoch under way, and the record indices of that epoch's share.
 * Owns share and share_pad. */
typedef struct aug_share {
	uint64_t per_rank, padded, dropped, batches;
	uint64_t epoch;
	/* the current epoch's share and batches: fewer than per_rank and
	 * batches when it started past position 0 */
	uint64_t epoch_per_rank, epoch_batches;
	uint64_t epoch_position; /* where the current epoch started */
	uint64_t *share;         /* the epoch's record indices, epoch_per_rank of
				    them (room for per_rank) */
	uint8_t *share_pad;      /* 1 where share repeats a record as padding */
} aug_share;

/* The ring of batches between the producer thread and the consumer, and
 * the producer's state; mu guards the slots' states, stop and stats.
 * Owns ring (each slot's buffers). */
typedef struct aug_ring {
	int k;            /* slots */
	aug_slot *slots;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t producer;
	int running, stop;
	int stopped;      /* aug_loader_stop was called */
	uint64_t next_step; /* the step the consumer takes next */
	int held;         /* slot the consumer holds, or -1 */
} aug_ring;

/* The loader behind the opaque handle of loader.h. */
struct aug_loader {
	aug_loader_opts o;
	aug_source src;
	aug_share part;
	size_t sample_bytes;
	int threads;
	aug_worker *workers; /* threads of them */
	aug_ring ring;
	aug_loader_stats stats; /* under ring.mu */
};

/*
 * Fills slot s with batch `step` of the current epoch (l->part.share from
 * step * batch_size), loading each sample with l->threads OpenMP threads
 * and replacing a record that cannot be loaded with the next of the
 * share. Called by the producer thread alone, without l->ring.mu; takes it to
 * add to l->stats. s->rc < 0 (and s->err) when the batch could not be
 * filled: a run of bad records, a changed shard, or l->ring.stop set.
 */
void aug_loader_fill(aug_loader *l, aug_slot *s, uint64_t step);

#endif
