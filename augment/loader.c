/*
 * loader.c - batches of augmented samples for one rank, prepared ahead:
 * the loader's life (open, close, stats), each epoch's share of the split,
 * and the ring of batch slots turned by a producer thread and the consumer.
 *
 * A producer thread walks the epoch's batches in order; for each it waits
 * for a free slot of the ring, has it filled (loader_sample.c: an OpenMP
 * parallel loop over the batch's samples, read -> region decode at the
 * scale the crop needs -> one affine warp straight into the slot, bad
 * records replaced), and marks it full. The consumer's aug_loader_next
 * takes full slots in order and gives the previous one back. Everything a
 * sample looks like comes from (seed, epoch, record index), never from
 * which thread or rank made it.
 */
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "augment.h"
#include "augment_internal.h"
#include "loader_internal.h"
#include "recordio/recordio.h"

/* A slot's state, changed under l->ring.mu: the producer takes a free one and
 * fills it, the consumer holds a full one until it gives it back. */
enum { SLOT_FREE = 0, SLOT_FILLING = 1, SLOT_FULL = 2, SLOT_HELD = 3 };

void aug_loader_opts_init(aug_loader_opts *o, int train)
{
	memset(o, 0, sizeof(*o));
	o->world = 1;
	o->batch_size = 32;
	o->train = train;
	o->prefetch = 3;
	o->drop_remainder = train;
	o->drop_last = train;
	aug_transform_opts_init(&o->transform, train);
}

/* The ring's memory: the caller's allocator, else page-aligned host
 * memory (whole pages, so the batch of one slot shares none with
 * another's). */
static void *alloc_batch(aug_loader *l, size_t bytes)
{
	const aug_host_alloc *h = &l->o.host;
	if (h->alloc)
		return h->alloc(h->ud, bytes);
	void *p = NULL;
	if (posix_memalign(&p, 4096, bytes) != 0)
		return NULL;
	return p;
}

static void free_batch(aug_loader *l, void *p)
{
	if (!p)
		return;
	if (l->o.host.alloc)
		l->o.host.free(l->o.host.ud, p);
	else
		free(p);
}

/* Records of the shards rank r owns in shard-owning mode. */
static uint64_t owned_count(const rio_manifest *m, int r, int world)
{
	uint64_t c = 0;
	for (size_t s = (size_t)r; s < m->n_shards; s += (size_t)world)
		c += m->shards[s].records;
	return c;
}

int aug_loader_open(const aug_loader_opts *o, aug_loader **out, ims_error *err)
{
	*out = NULL;
	RETURN_IF(!o || !o->manifest, err, IMS_EINVAL, "cannot open loader: no manifest given");
	RETURN_IF(o->world < 1 || o->rank < 0 || o->rank >= o->world, err, IMS_EINVAL,
		  "rank %d is not in a world of %d", o ? o->rank : 0, o ? o->world : 0);
	RETURN_IF(o->batch_size < 1, err, IMS_EINVAL, "batch size %d is not positive",
		  o->batch_size);
	RETURN_IF(o->threads < 0 || o->prefetch < 0, err, IMS_EINVAL,
		  "threads and prefetch must not be negative");
	RETURN_IF(o->threads > AUG_MAX_THREADS, err, IMS_EINVAL,
		  "cannot open loader with %d threads: at most %d", o->threads,
		  AUG_MAX_THREADS);
	aug_loader *l = calloc(1, sizeof(*l));
	RETURN_IF(!l, err, IMS_ENOMEM, "cannot load '%s': out of memory for the loader",
		  o->manifest);
	l->o = *o;
	l->ring.held = -1;
	pthread_mutex_init(&l->ring.mu, NULL);
	pthread_cond_init(&l->ring.cv, NULL);
	int rc = 0;
	l->src.manifest = strdup(o->manifest);
	if (!l->src.manifest)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM,
			  "cannot load '%s': out of memory for the loader", o->manifest);
	l->o.manifest = l->src.manifest;
	GOTO_IF_ERR(fail, rc, aug_transform_check(&o->transform, err));
	l->sample_bytes = aug_sample_bytes(&o->transform);
	rc = rio_reader_open(o->manifest, &l->src.reader, err);
	if (rc == IMS_ENOMEM)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM,
			  "cannot load '%s': out of memory for opening its shards",
			  o->manifest);
	if (rc < 0)
		goto fail;
	l->src.n = rio_reader_count(l->src.reader);
	const rio_manifest *m = rio_reader_manifest(l->src.reader);
	uint64_t w = (uint64_t)o->world;
	if (o->shard_owning) {
		uint64_t least = UINT64_MAX, total = 0;
		for (int r = 0; r < o->world; r++) {
			uint64_t c = owned_count(m, r, o->world);
			least = c < least ? c : least;
			total += c;
		}
		if (least == 0)
			GOTO_FAIL(fail, rc, err, IMS_EINVAL,
				  "shard-owning mode: %zu %s cannot give each of %d "
				  "ranks records (pack the split into at least %d "
				  "shards, or read it without shard-owning mode)",
				  m->n_shards, ims_plural(m->n_shards, "shard", "shards"),
				  o->world, o->world);
		l->part.per_rank = least;
		l->part.dropped = total - least * w;
		l->src.n_owned = owned_count(m, o->rank, o->world);
		l->src.owned = malloc(l->src.n_owned * sizeof(uint64_t));
		if (!l->src.owned)
			GOTO_FAIL(fail, rc, err, IMS_ENOMEM,
				  "cannot load '%s': out of memory for the %llu record "
				  "indices of rank %d's shards, %zu bytes (more ranks "
				  "or a smaller split need less)",
				  o->manifest, (unsigned long long)l->src.n_owned, o->rank,
				  (size_t)l->src.n_owned * sizeof(uint64_t));
		uint64_t k = 0;
		for (size_t s = (size_t)o->rank; s < m->n_shards; s += (size_t)o->world)
			for (uint64_t i = 0; i < m->shards[s].records; i++)
				l->src.owned[k++] = m->shards[s].first + i;
		/* Whole shards per rank are a fair sample of the classes only
		 * when the records were shuffled before packing. */
		if (m->order == RIO_ORDER_LIST && o->event) {
			char msg[IMS_ERRMSG_MAX];
			snprintf(msg, sizeof(msg),
				 "shard-owning mode on '%s', whose records are not shuffled "
				 "(packed in list order, perhaps sorted by class): each rank "
				 "reads whole shards, so ranks may see different classes; "
				 "pack it shuffled ('imshard convert' does by default, "
				 "'imshard pack --shuffle')",
				 o->manifest);
			o->event(o->event_ctx, msg);
		}
	} else {
		rio_remainder mode = o->drop_remainder ? RIO_REMAINDER_DROP : RIO_REMAINDER_PAD;
		/* Dropping the remainder leaves such ranks nothing. Padding
		 * does not: rio_partition wraps round the order as often as
		 * it takes and share_pad flags the repeats, so a validation
		 * split smaller than the job is still evaluated, each record
		 * counted once, as one rank evaluates it. */
		if (l->src.n < w && mode == RIO_REMAINDER_DROP)
			GOTO_FAIL(fail, rc, err, IMS_EINVAL,
				  "'%s' holds %llu %s, fewer than the %d ranks",
				  o->manifest, (unsigned long long)l->src.n,
				  ims_plural(l->src.n, "record", "records"), o->world);
		l->part.per_rank = rio_partition_size(l->src.n, o->world, mode);
		l->part.padded = mode == RIO_REMAINDER_PAD ? l->part.per_rank * w - l->src.n : 0;
		l->part.dropped = mode == RIO_REMAINDER_DROP ? l->src.n - l->part.per_rank * w : 0;
	}
	uint64_t b = (uint64_t)o->batch_size;
	l->part.batches = o->drop_last ? l->part.per_rank / b : (l->part.per_rank + b - 1) / b;
	/* the split named, and the batch said to be per rank: a batch
	 * taken for the global one is the usual cause */
	if (l->part.batches == 0 && o->world == 1)
		GOTO_FAIL(fail, rc, err, IMS_EINVAL,
			  "'%s' holds %llu %s, not enough for one batch of %d",
			  o->manifest, (unsigned long long)l->part.per_rank,
			  ims_plural(l->part.per_rank, "record", "records"), o->batch_size);
	if (l->part.batches == 0)
		GOTO_FAIL(fail, rc, err, IMS_EINVAL,
			  "'%s' gives each of the %d ranks %llu %s, not enough for one batch of %d (a batch is per rank)",
			  o->manifest, o->world, (unsigned long long)l->part.per_rank,
			  ims_plural(l->part.per_rank, "record", "records"), o->batch_size);
	l->part.share = malloc(l->part.per_rank * sizeof(uint64_t));
	l->part.share_pad = calloc(l->part.per_rank, 1);
	if (!l->part.share || !l->part.share_pad)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM,
			  "cannot load '%s': out of memory for the rank's share of "
			  "%llu records, %zu bytes (more ranks or a smaller split "
			  "need less)",
			  o->manifest, (unsigned long long)l->part.per_rank,
			  (size_t)l->part.per_rank * (sizeof(uint64_t) + 1));

	l->threads = o->threads > 0 ? o->threads : omp_get_num_procs();
	l->workers = calloc((size_t)l->threads, sizeof(aug_worker));
	if (!l->workers)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM,
			  "cannot load '%s': out of memory for %d worker threads "
			  "(fewer threads need less)",
			  o->manifest, l->threads);
	for (int t = 0; t < l->threads; t++) {
		rc = rio_cursor_open(l->src.reader, RIO_CHECK_PAYLOAD_CRC, &l->workers[t].cur, err);
		if (rc == 0)
			rc = aug_codec_create(&l->workers[t].codec, err);
		if (rc == IMS_ENOMEM)
			GOTO_FAIL(fail, rc, err, IMS_ENOMEM,
				  "cannot load '%s': out of memory for the reader and "
				  "decoder of worker thread %d of %d (fewer threads need less)",
				  o->manifest, t + 1, l->threads);
		if (rc < 0)
			goto fail;
	}

	if (o->host.alloc && !o->host.free)
		GOTO_FAIL(fail, rc, err, IMS_EINVAL,
			  "cannot open loader: a host allocator without its free");
	l->stats.pinned = o->host.alloc != NULL;
	if (!o->quiet)
		fprintf(stderr, "imshard: loader: batches in %s\n",
			!o->host.alloc ? "page-aligned host memory"
			: o->host.name ? o->host.name
				       : "memory from the caller's allocator");
	l->ring.k = o->prefetch > 0 ? o->prefetch : 3;
	l->stats.prefetch = l->ring.k;
	l->ring.slots = calloc((size_t)l->ring.k, sizeof(aug_slot));
	if (!l->ring.slots)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM,
			  "cannot load '%s': out of memory for a ring of %d batches "
			  "(a smaller prefetch needs less)",
			  o->manifest, l->ring.k);
	/* A batch holds no more than the share: a batch larger than the
	 * split (validation keeps the short last batch) gets room for the
	 * share, not for the batch size. */
	const size_t cap = b < l->part.per_rank ? (size_t)b : (size_t)l->part.per_rank;
	for (int i = 0; i < l->ring.k; i++) {
		aug_slot *s = &l->ring.slots[i];
		s->data = alloc_batch(l, l->sample_bytes * cap);
		s->labels = calloc(cap, sizeof(int32_t));
		s->indices = calloc(cap, sizeof(uint64_t));
		s->padded = calloc(cap, 1);
		s->replaced = calloc(cap, 1);
		s->bad_first = calloc(cap, sizeof(uint64_t));
		s->bad_list = calloc(cap, sizeof(uint64_t));
		if (!s->data || !s->labels || !s->indices || !s->padded ||
		    !s->replaced || !s->bad_first || !s->bad_list)
			GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "cannot load '%s': out of memory for %d batches of %zu bytes (a smaller batch, image size or prefetch needs less)",
				  o->manifest, l->ring.k, l->sample_bytes * cap);
	}
	*out = l;
	return 0;
fail:
	aug_loader_close(l);
	return rc;
}

uint64_t aug_loader_batches_per_epoch(const aug_loader *l)
{
	return l->part.batches;
}

/* This rank's share of an epoch started at global position `position`,
 * and where it starts in the rank's own order (shard-owning mode); 0
 * records when nothing is left. */
static uint64_t share_from(const aug_loader *l, uint64_t position,
			   uint64_t *local_start)
{
	*local_start = 0;
	if (position == 0)
		return l->part.per_rank;
	if (l->o.shard_owning) {
		/* each rank consumed position / world of its own records */
		uint64_t mine = position / (uint64_t)l->o.world;
		*local_start = mine;
		return mine < l->part.per_rank ? l->part.per_rank - mine : 0;
	}
	rio_partition_opts po;
	rio_partition_opts_init(&po);
	po.n = l->src.n;
	po.rank = l->o.rank;
	po.world = l->o.world;
	po.remainder = l->o.drop_remainder ? RIO_REMAINDER_DROP : RIO_REMAINDER_PAD;
	po.offset = position;
	return rio_partition_count(&po);
}

static uint64_t batches_of(const aug_loader *l, uint64_t per)
{
	uint64_t b = (uint64_t)l->o.batch_size;
	return l->o.drop_last ? per / b : (per + b - 1) / b;
}

uint64_t aug_loader_batches_at(const aug_loader *l, uint64_t position)
{
	uint64_t start;
	return batches_of(l, share_from(l, position, &start));
}

void aug_loader_share(const aug_loader *l, uint64_t *per_rank, uint64_t *padded,
		      uint64_t *dropped)
{
	if (per_rank)
		*per_rank = l->part.per_rank;
	if (padded)
		*padded = l->part.padded;
	if (dropped)
		*dropped = l->part.dropped;
}


/* A free slot, or NULL (l->ring.mu held). Any free one: with hold_batches the
 * caller may keep any slot for long, and the others must go on turning. */
static aug_slot *free_slot(aug_loader *l)
{
	for (int i = 0; i < l->ring.k; i++)
		if (l->ring.slots[i].state == SLOT_FREE)
			return &l->ring.slots[i];
	return NULL;
}

/* The slot being filled with, or holding, batch `step`; NULL when the
 * producer has not taken one for it yet (l->ring.mu held). */
static aug_slot *slot_of_step(aug_loader *l, uint64_t step)
{
	for (int i = 0; i < l->ring.k; i++) {
		aug_slot *s = &l->ring.slots[i];
		if ((s->state == SLOT_FILLING || s->state == SLOT_FULL) && s->step == step)
			return s;
	}
	return NULL;
}

static void *produce(void *arg)
{
	aug_loader *l = arg;
	for (uint64_t step = 0; step < l->part.epoch_batches; step++) {
		aug_slot *s;
		pthread_mutex_lock(&l->ring.mu);
		while (!(s = free_slot(l)) && !l->ring.stop)
			pthread_cond_wait(&l->ring.cv, &l->ring.mu);
		if (l->ring.stop) {
			pthread_mutex_unlock(&l->ring.mu);
			break;
		}
		s->state = SLOT_FILLING;
		s->step = step;
		pthread_mutex_unlock(&l->ring.mu);
		double t0 = ims_now();
		aug_loader_fill(l, s, step);
		pthread_mutex_lock(&l->ring.mu);
		l->stats.produce_seconds += ims_now() - t0;
		s->state = SLOT_FULL;
		pthread_cond_broadcast(&l->ring.cv);
		int failed = s->rc < 0;
		pthread_mutex_unlock(&l->ring.mu);
		if (failed)
			break;
	}
	return NULL;
}

static void stop_producer(aug_loader *l)
{
	if (!l->ring.running)
		return;
	pthread_mutex_lock(&l->ring.mu);
	__atomic_store_n(&l->ring.stop, 1, __ATOMIC_RELAXED); /* fill() reads it unlocked */
	pthread_cond_broadcast(&l->ring.cv);
	pthread_mutex_unlock(&l->ring.mu);
	pthread_join(l->ring.producer, NULL);
	l->ring.running = 0;
	l->ring.stop = 0;
}

int aug_loader_start_epoch(aug_loader *l, uint64_t epoch, ims_error *err)
{
	return aug_loader_start_epoch_at(l, epoch, 0, err);
}

int aug_loader_start_epoch_at(aug_loader *l, uint64_t epoch, uint64_t position,
			      ims_error *err)
{
	RETURN_IF(l->ring.stopped, err, IMS_EINVAL,
		  "cannot start an epoch: the loader was stopped");
	RETURN_IF(l->o.shard_owning && position % (uint64_t)l->o.world, err, IMS_EINVAL,
		  "cannot start epoch %llu at position %llu in shard-owning mode: "
		  "not a multiple of the %d ranks (each rank's records are its own)",
		  (unsigned long long)epoch, (unsigned long long)position, l->o.world);
	stop_producer(l);
	/* Batches the caller still holds (hold mode) stay untouched until
	 * given back: the producer waits for them like for any busy slot. */
	for (int i = 0; i < l->ring.k; i++)
		if (l->ring.slots[i].state != SLOT_HELD || !l->o.hold_batches)
			l->ring.slots[i].state = SLOT_FREE;
	l->ring.held = -1;
	l->ring.next_step = 0;
	l->part.epoch = epoch;
	l->part.epoch_position = position;
	uint64_t local_start;
	l->part.epoch_per_rank = share_from(l, position, &local_start);
	l->part.epoch_batches = batches_of(l, l->part.epoch_per_rank);
	if (l->part.epoch_per_rank == 0) {
		/* nothing left of this epoch: next() says it is over */
	} else if (l->o.shard_owning) {
		/* This rank's records, shuffled from (seed, epoch), cut to the
		 * count every rank can give, from where an earlier part of
		 * the run stopped. */
		uint64_t n = l->src.n_owned;
		uint64_t *tmp = malloc(n * sizeof(uint64_t));
		RETURN_IF(!tmp, err, IMS_ENOMEM,
			  "cannot start epoch %llu of '%s': out of memory for the "
			  "%llu records of rank %d's shards, %zu bytes (more ranks "
			  "or a smaller split need less)",
			  (unsigned long long)epoch, l->src.manifest,
			  (unsigned long long)n, l->o.rank, (size_t)n * sizeof(uint64_t));
		memcpy(tmp, l->src.owned, n * sizeof(uint64_t));
		if (l->o.train) {
			ims_rng rng;
			ims_rng_seed(&rng, l->o.seed, ims_hash64(0x6f776eull, epoch));
			for (uint64_t i = n - 1; i > 0; i--) {
				uint64_t j = ims_rng_below(&rng, i + 1);
				uint64_t t = tmp[i];
				tmp[i] = tmp[j];
				tmp[j] = t;
			}
		}
		memcpy(l->part.share, tmp + local_start, l->part.epoch_per_rank * sizeof(uint64_t));
		free(tmp);
		memset(l->part.share_pad, 0, l->part.epoch_per_rank);
	} else {
		rio_partition_opts po;
		rio_partition_opts_init(&po);
		po.n = l->src.n;
		po.rank = l->o.rank;
		po.world = l->o.world;
		po.epoch = epoch;
		po.seed = l->o.seed;
		po.shuffle = l->o.train;
		po.remainder = l->o.drop_remainder ? RIO_REMAINDER_DROP : RIO_REMAINDER_PAD;
		po.offset = position;
		FORWARD_IF_ERR(rio_partition(&po, l->part.share, NULL, err));
		/* padded: positions past the end of the order, wrapped */
		for (uint64_t k = 0; k < l->part.epoch_per_rank; k++)
			l->part.share_pad[k] = position + (uint64_t)l->o.rank +
						  k * (uint64_t)l->o.world >= l->src.n;
	}
	const int e = pthread_create(&l->ring.producer, NULL, produce, l);
	if (e != 0)
		return ims_fail(err, e == EAGAIN ? IMS_ENOMEM : IMS_EIO,
				"cannot start the loader's producer thread for '%s': %s%s",
				l->src.manifest, strerror(e),
				e == EAGAIN ? " (out of memory or a limit on "
					      "threads or memory)"
					    : "");
	l->ring.running = 1;
	return 0;
}

int aug_loader_next_timed(aug_loader *l, aug_batch *b, double timeout_s,
			  ims_error *err)
{
	RETURN_IF(!l->ring.running, err, IMS_EINVAL,
		  l->ring.stopped ? "the loader was stopped" :
			       "no epoch started (call aug_loader_start_epoch first)");
	pthread_mutex_lock(&l->ring.mu);
	if (l->ring.held >= 0) {
		l->ring.slots[l->ring.held].state = SLOT_FREE;
		l->ring.held = -1;
		pthread_cond_broadcast(&l->ring.cv);
	}
	if (l->ring.next_step >= l->part.epoch_batches) {
		pthread_mutex_unlock(&l->ring.mu);
		return 1;
	}
	double t0 = ims_now();
	int timed_out = 0;
	aug_slot *s;
	struct timespec until;
	if (timeout_s >= 0)
		ims_deadline(timeout_s, &until);
	while (!(s = slot_of_step(l, l->ring.next_step)) || s->state != SLOT_FULL) {
		if (!s && !free_slot(l)) {
			/* Only in hold mode: every slot is held, so the producer
			 * cannot start this batch, and we would wait forever. */
			l->stats.wait_seconds += ims_now() - t0;
			pthread_mutex_unlock(&l->ring.mu);
			return ims_fail(err, IMS_ELIMIT,
					"cannot take the next batch: all %d batches of the ring are still held (give one back, or copy batches out)",
					l->ring.k);
		}
		if (timeout_s < 0) {
			pthread_cond_wait(&l->ring.cv, &l->ring.mu);
		} else if (pthread_cond_timedwait(&l->ring.cv, &l->ring.mu, &until) == ETIMEDOUT) {
			s = slot_of_step(l, l->ring.next_step);
			timed_out = !s || s->state != SLOT_FULL;
			break;
		}
	}
	double waited = ims_now() - t0;
	l->stats.wait_seconds += waited;
	if (timed_out) {
		pthread_mutex_unlock(&l->ring.mu);
		return 2;
	}
	if (s->rc < 0) {
		int rc = s->rc;
		if (err)
			*err = s->err;
		pthread_mutex_unlock(&l->ring.mu);
		return rc;
	}
	s->state = SLOT_HELD;
	if (!l->o.hold_batches)
		l->ring.held = (int)(s - l->ring.slots);
	l->ring.next_step++;
	pthread_mutex_unlock(&l->ring.mu);
	b->data = s->data;
	b->labels = s->labels;
	b->indices = s->indices;
	b->padded = s->padded;
	b->replaced = s->replaced;
	b->bad_records = s->n_bad;
	b->bad_indices = s->bad_list;
	b->bad_listed = s->n_bad_listed;
	b->bad_reason = s->bad_msg;
	b->count = s->count;
	b->epoch = l->part.epoch;
	b->step = s->step;
	b->wait_seconds = waited;
	return 0;
}

int aug_loader_next(aug_loader *l, aug_batch *b, ims_error *err)
{
	return aug_loader_next_timed(l, b, -1.0, err);
}

int aug_loader_release(aug_loader *l, const aug_batch *b, ims_error *err)
{
	RETURN_IF(!l || !b, err, IMS_EINVAL, "cannot give a batch back: no loader or batch");
	RETURN_IF(!l->o.hold_batches, err, IMS_EINVAL,
		  "cannot give a batch back: the loader was not opened with hold_batches");
	pthread_mutex_lock(&l->ring.mu);
	for (int i = 0; i < l->ring.k; i++) {
		aug_slot *s = &l->ring.slots[i];
		if (s->data == b->data && s->state == SLOT_HELD) {
			s->state = SLOT_FREE;
			pthread_cond_broadcast(&l->ring.cv);
			pthread_mutex_unlock(&l->ring.mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&l->ring.mu);
	return ims_fail(err, IMS_EINVAL, "cannot give a batch back: it is not a held batch of this loader");
}

void aug_loader_stop(aug_loader *l)
{
	if (!l)
		return;
	stop_producer(l);
	l->ring.stopped = 1;
}

void aug_loader_get_stats(const aug_loader *l, aug_loader_stats *st)
{
	aug_loader *m = (aug_loader *)l;
	pthread_mutex_lock(&m->ring.mu);
	*st = l->stats;
	pthread_mutex_unlock(&m->ring.mu);
}

void aug_loader_close(aug_loader *l)
{
	if (!l)
		return;
	stop_producer(l);
	if (l->ring.slots)
		for (int i = 0; i < l->ring.k; i++) {
			free_batch(l, l->ring.slots[i].data);
			free(l->ring.slots[i].labels);
			free(l->ring.slots[i].indices);
			free(l->ring.slots[i].padded);
			free(l->ring.slots[i].replaced);
			free(l->ring.slots[i].bad_first);
			free(l->ring.slots[i].bad_list);
		}
	free(l->ring.slots);
	if (l->workers)
		for (int t = 0; t < l->threads; t++) {
			rio_cursor_close(l->workers[t].cur);
			aug_codec_destroy(l->workers[t].codec);
			aug_image_release(&l->workers[t].img);
		}
	free(l->workers);
	rio_reader_close(l->src.reader);
	free(l->part.share);
	free(l->part.share_pad);
	free(l->src.owned);
	free(l->src.manifest);
	pthread_mutex_destroy(&l->ring.mu);
	pthread_cond_destroy(&l->ring.cv);
	free(l);
}
