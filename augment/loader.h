/*
 * loader.h - the loader of the augment library (loader.c: its life, the
 * epoch's share and the ring; loader_sample.c: one batch filled) and the
 * loop that measures it (bench.c): a rank's share of a packed split, read
 * through recordio, decoded and augmented by OpenMP workers into a ring
 * of batches. augment.h includes it: its users need only augment.h, and
 * the codec, region decoding and transforms the loader uses are
 * described there.
 */
#ifndef IMSHARD_AUGMENT_LOADER_H
#define IMSHARD_AUGMENT_LOADER_H

#include "augment/augment.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the loader --------------------------------------------------------
 *
 * Reads a packed split for one rank and hands out batches of augmented
 * samples, prepared ahead of the consumer by OpenMP workers into a ring of
 * buffers: page-aligned host memory, or the caller's (opts.host: a
 * trainer on a GPU passes its pinned allocator, so batches copy to the
 * device asynchronously); which one is said once on stderr unless quiet.
 * The loader itself knows nothing of devices.
 *
 * Each epoch, every rank takes its share of a (seed, epoch) permutation
 * (rio_partition): shares are disjoint, cover the split and have the same
 * length on every rank (pad or drop, see remainder), so every rank gets
 * the same number of batches. Each sample's crop and augmentation come
 * from (seed, epoch, record index) alone: a batch is bit-identical
 * whatever the thread count, and a record is augmented the same way
 * whatever the rank count. A record that cannot be read or decoded is
 * replaced by the next record of the rank's share, counted and named in
 * the stats and in the batch it was met in (aug_batch.replaced and
 * bad_*): training does not stop for one bad record, and a consumer that
 * must count each record once (validation) leaves the stand-ins out.
 *
 * Caveats: an aug_loader is used by one consumer thread; it runs its own
 * producer thread and OpenMP team. A batch's memory is reused once the
 * next aug_loader_next call returns (with hold_batches: once it is given
 * back). Do not fork with a loader open.
 * ------------------------------------------------------------------------ */

typedef struct aug_loader aug_loader;

/*
 * Host memory for the batch ring, from the caller. alloc returns bytes of
 * memory for one batch (NULL when out of memory: aug_loader_open then
 * fails with IMS_ENOMEM); free gives back what alloc returned, never
 * NULL; both get ud, and are called from the thread that opens and closes
 * the loader. The memory is written by the loader's workers and read by
 * the consumer; nothing else touches it. name describes it for the log
 * line ("pinned memory (cudaHostAlloc)"; NULL: "memory from the caller's
 * allocator"). alloc NULL (the default) is page-aligned host memory.
 */
typedef struct aug_host_alloc {
	void *(*alloc)(void *ud, size_t bytes);
	void (*free)(void *ud, void *p);
	void *ud;
	const char *name;
} aug_host_alloc;

/* The most decoding threads a loader takes: past it OpenMP may fail to
 * make them, and libgomp then aborts the process. */
#define AUG_MAX_THREADS 1024

typedef struct aug_loader_opts {
	const char *manifest;   /* NAME.json of the split */
	int rank, world;        /* 0 <= rank < world (1 rank: 0, 1) */
	uint64_t seed;
	int batch_size;         /* samples per batch, per rank (the ring
				   takes room for at most the rank's share:
				   a batch larger than the split costs no
				   more memory than the split) */
	int train;              /* 1: shuffled each epoch, training transform;
				   0: file order, validation transform */
	aug_transform_opts transform; /* output size, layout, dtype, mean/std,
					 augmentations */
	int threads;            /* OpenMP workers, 0..AUG_MAX_THREADS (0 = all
				   cores) */
	int prefetch;           /* batches prepared ahead (ring depth; 0 = 3) */
	int drop_remainder;     /* 1: shares drop the records that do not divide
				   evenly among ranks (default for train);
				   0: the last ranks repeat records (pad) */
	int drop_last;          /* 1: drop a final partial batch (default for
				   train); 0: the last batch may be short (the
				   same length on every rank) */
	int shard_owning;       /* each rank reads only shards s with
				   s % world == rank (node-local data); every
				   rank then uses as many records as the rank
				   owning the fewest, the rest dropped and
				   reported */
	aug_host_alloc host;    /* batch memory (default: page-aligned host
				   memory) */
	int quiet;              /* no log line about memory */
	int hold_batches;       /* 1: a batch stays the caller's until given
				   back with aug_loader_release (any order),
				   not merely until the next aug_loader_next;
				   for consumers that keep several batches
				   alive (language bindings' zero-copy views).
				   With every ring slot held, aug_loader_next
				   fails (IMS_ELIMIT) instead of waiting
				   forever. 0: the default described above */
	/* Warnings the caller should show, one line each, called from
	 * aug_loader_open (may be NULL): shard-owning mode on a split whose
	 * manifest says its records are not shuffled (each rank would read
	 * whole shards of a list that may be sorted by class). */
	void (*event)(void *ctx, const char *msg);
	void *event_ctx;
} aug_loader_opts;

/* Defaults: batch 32, prefetch 3, transform for `train`, drop_remainder
 * and drop_last = train. */
void aug_loader_opts_init(aug_loader_opts *o, int train);

typedef struct aug_batch {
	void *data;              /* count samples, aug_sample_bytes(&transform)
				    bytes each, contiguous; NCHW or NHWC per
				    sample; valid until the next
				    aug_loader_next */
	const int32_t *labels;   /* count labels */
	const uint64_t *indices; /* count global record indices (after any
				    replacement of bad records) */
	const uint8_t *padded;   /* count flags: 1 = a repeated record added so
				    shares are equal (exclude from metrics) */
	const uint8_t *replaced; /* count flags: 1 = this sample stands in for
				    a record that could not be read or decoded
				    (it is a later record of the share, which
				    may also have its own place: exclude from
				    metrics that count records once) */
	int bad_records;         /* records that could not be loaded for this
				    batch (a sample may have tried several) */
	const uint64_t *bad_indices; /* bad_listed global record indices: the
					record each replaced sample stood in
					for, in sample order */
	int bad_listed;
	const char *bad_reason;  /* why bad_indices[0] could not be loaded
				    (one line naming the record; "" when
				    bad_records is 0) */
	int count;
	uint64_t epoch, step;    /* step within the epoch, from 0 */
	double wait_seconds;     /* how long aug_loader_next blocked */
} aug_batch;

/*
 * Opens the split and checks the options. Starts nothing: the first
 * aug_loader_start_epoch does. Errors: the reader's, IMS_EINVAL (bad
 * options, threads past AUG_MAX_THREADS among them, or a split too small
 * for one batch per rank), IMS_ENOMEM (the message names the split, what
 * could not be allocated and what needs less: the rank's share of
 * records, the batches of the ring, the workers' readers and decoders).
 */
int aug_loader_open(const aug_loader_opts *o, aug_loader **out, ims_error *err);

/* Batches every rank gets per epoch. */
uint64_t aug_loader_batches_per_epoch(const aug_loader *l);

/* Batches every rank gets in an epoch started at global position
 * `position` (aug_loader_start_epoch_at): the whole epoch's at 0, 0 when
 * the share from there holds no batch. */
uint64_t aug_loader_batches_at(const aug_loader *l, uint64_t position);
/* Records this rank uses per epoch, and how many were padded / dropped
 * across all ranks (the log should say so). */
void aug_loader_share(const aug_loader *l, uint64_t *per_rank, uint64_t *padded,
		      uint64_t *dropped);

/* Starts producing the batches of epoch (any order of epochs; stops a
 * running one). */
int aug_loader_start_epoch(aug_loader *l, uint64_t epoch, ims_error *err);

/*
 * As aug_loader_start_epoch, but the epoch's first `position` positions of
 * its order were consumed already, by a run that may have had another
 * rank count or batch size (global positions: all ranks' samples, as
 * rio_partition's offset): this rank takes position + rank + k * world.
 * Batches count from step 0 again and there are aug_loader_batches_at(l,
 * position) of them (perhaps none). In shard-owning mode, where each rank
 * has its own records, position must be a multiple of the world (each
 * rank consumed position / world of its own; IMS_EINVAL otherwise).
 * IMS_ENOMEM names the split and what could not be allocated (the
 * epoch's order of this rank's records in shard-owning mode, the
 * producer thread).
 */
int aug_loader_start_epoch_at(aug_loader *l, uint64_t epoch, uint64_t position,
			      ims_error *err);

/*
 * The next batch of the current epoch into *b: returns 0, 1 when the epoch
 * is over (b untouched), or a negative code: a record that could not be
 * replaced; IMS_ECHANGED when a shard changed on disk while being read
 * (never replaced: all its records are suspect); IMS_ENOMEM when memory
 * ran out reading or decoding a record (never replaced nor counted bad:
 * the record is not at fault); no epoch started; the loader stopped;
 * or, with hold_batches, IMS_ELIMIT when every batch of the ring is
 * still held.
 */
int aug_loader_next(aug_loader *l, aug_batch *b, ims_error *err);

/*
 * aug_loader_next that waits at most timeout_s seconds for the batch to be
 * ready (< 0: no limit) and returns 2 when it was not (nothing taken; call
 * again). For consumers that must react to something else while waiting,
 * such as an interpreter checking for Ctrl-C between calls.
 */
int aug_loader_next_timed(aug_loader *l, aug_batch *b, double timeout_s,
			  ims_error *err);

/*
 * Gives a batch taken in hold_batches mode back to the loader, which may
 * then refill its memory: b (as aug_loader_next filled it) and its arrays
 * must not be used afterwards. Any order; also after aug_loader_stop or a
 * new aug_loader_start_epoch (a held batch survives both). Errors:
 * IMS_EINVAL (not opened with hold_batches, or b is not a held batch).
 */
int aug_loader_release(aug_loader *l, const aug_batch *b, ims_error *err);

/*
 * Stops the producer thread for good (joined when this returns; its
 * OpenMP workers, told to exit as it ends, are gone moments later) while every batch handed out stays readable
 * until aug_loader_close: for a consumer that must end the threads now but
 * free the memory only once its last view of a batch is gone. Afterwards
 * aug_loader_next and aug_loader_start_epoch fail (IMS_EINVAL). Takes as
 * long as the samples the workers are on: the batch being filled is
 * abandoned (never handed out). NULL is fine; twice is harmless.
 */
void aug_loader_stop(aug_loader *l);

typedef struct aug_loader_stats {
	uint64_t images, batches;   /* produced since open */
	uint64_t bad_records;       /* records replaced: each bad record
				       once per pass, at its own place (a
				       stand-in that failed too is counted
				       where it is the share's own) */
	char last_bad[IMS_ERRMSG_MAX]; /* the latest replaced record and why */
	double wait_seconds;        /* consumer time blocked in next() */
	/* worker times, summed over threads, of the batches filled (or
	 * abandoned by a stop) so far: the batch being filled is added
	 * when it is done */
	double read_seconds;        /* worker time reading records */
	double decode_seconds;      /* ... decoding */
	double augment_seconds;     /* ... warping */
	double produce_seconds;     /* wall time spent filling batches (not waiting
				       for a free slot) */
	int pinned;                 /* 1 when the ring is the caller's memory
				       (opts.host: pinned, for a trainer on a
				       device), 0 for page-aligned host memory */
	int prefetch;               /* the ring's depth: batches prepared
				       ahead (opts.prefetch, or its default) */
} aug_loader_stats;

void aug_loader_get_stats(const aug_loader *l, aug_loader_stats *s);

/* Stops the producer and frees everything. NULL is fine. */
void aug_loader_close(aug_loader *l);


/* ---- measuring the loader (augment/bench.c) ----------------------------
 *
 * The measuring loop of `imshard bench-load`, as a library call so every
 * front end (the command line, language bindings) measures the same way:
 * open a loader, take its batches as fast as they come from epoch 0 on
 * until a time or epoch limit, report throughput and where the time went.
 * ------------------------------------------------------------------------ */

typedef struct aug_bench_opts {
	aug_loader_opts loader; /* what to load (aug_loader_opts_init first) */
	int epochs;             /* stop after this many epochs (0 = no limit) */
	double seconds;         /* stop once this much measured wall time has
				   passed (0 = no limit); at least one of the
				   two limits must be set (IMS_EINVAL) */
	volatile int *cancel;   /* when it becomes non-zero, stop (reported as
				   interrupted): after the batch just taken,
				   or within AUG_BENCH_WAIT_SLICE seconds
				   while waiting for one, which is then
				   abandoned where its workers are */
	/* Called with every batch taken, on the calling thread, before the
	 * next is taken; its time is left out of the measurement. A negative
	 * return stops the run with that code (fill err). May be NULL. */
	int (*on_batch)(void *ctx, const aug_batch *b, ims_error *err);
	/* Called after every batch with the batches taken so far and the
	 * total when an epoch limit sets one (else 0). May be NULL. */
	void (*progress)(void *ctx, uint64_t batches, uint64_t total);
	/* Called on the calling thread every AUG_BENCH_WAIT_SLICE seconds
	 * while it waits for a batch: for a caller that must notice
	 * something meanwhile and set *cancel (an interpreter, whose Ctrl-C
	 * only its own thread sees). May be NULL. */
	void (*waiting)(void *ctx);
	void *ctx;
} aug_bench_opts;

/* The seconds between two looks at *cancel (and calls of waiting) while
 * a batch is awaited: a slow batch (large images, a slow disk) does not
 * delay a stop. */
#define AUG_BENCH_WAIT_SLICE 0.05

/* Defaults: the training loader (aug_loader_opts_init(&loader, 1)), no
 * epoch limit, 10 seconds. */
void aug_bench_opts_init(aug_bench_opts *o);

typedef struct aug_bench_result {
	uint64_t images, batches;
	uint64_t epochs_done;       /* whole epochs */
	double epochs;              /* batches / batches per epoch */
	double seconds;             /* measured wall time (on_batch excluded) */
	double images_per_s;
	double stall_fraction;      /* consumer wait / wall time */
	uint64_t batches_per_epoch;
	uint64_t records_per_rank;  /* per epoch */
	uint64_t padded, dropped;   /* across ranks, per epoch */
	int threads;                /* workers used (0 resolved to the cores) */
	int interrupted;            /* stopped by *cancel */
	aug_loader_stats stats;     /* the loader's, at the end */
} aug_bench_result;

/*
 * Runs the measurement. Returns 0 (also when interrupted: *r holds what
 * was measured, r->interrupted is 1), or a negative code: the loader's
 * (open, start, a batch that could not be made) or on_batch's; *r then
 * holds what was measured before the failure.
 * Threads: runs the loader's threads; call from one thread.
 */
int aug_bench_run(const aug_bench_opts *o, aug_bench_result *r, ims_error *err);

/*
 * One loader sample (o's layout and dtype, aug_sample_bytes(o) bytes at
 * sample) as 8-bit RGB HWC in out (allocated o->out_w x o->out_h x 3):
 * normalisation undone (value * std + mean; u8 is taken as it is),
 * rounded to nearest and clamped to 0..255, NaN to 0. For looking at what
 * a network is fed. Errors: IMS_EINVAL (bad options), IMS_ENOMEM.
 */
int aug_sample_to_rgb8(const void *sample, const aug_transform_opts *o,
		       aug_image *out, ims_error *err);

/* ---- end of measuring the loader ---- */

#ifdef __cplusplus
}
#endif

#endif
