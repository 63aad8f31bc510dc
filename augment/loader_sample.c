/*
 * loader_sample.c - one batch of the loader filled: each sample read,
 * decoded at the scale its crop needs and warped straight into the slot,
 * in parallel over the batch's samples; a record that cannot be loaded is
 * replaced by the next of the rank's share, named and counted (one whose
 * reading or decoding ran out of memory fails the batch), and a run
 * of them fails the batch with a message that says how much was tried.
 * The ring and the producer that calls this are loader.c's.
 */
#include <ctype.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "augment.h"
#include "augment_internal.h"
#include "loader_internal.h"
#include "recordio/recordio.h"

/* Tries per sample before an epoch gives up on a run of bad records. */
#define MAX_TRIES 16

/* One sample into dst: read, decode what the plan needs, warp. */
static int load_sample(aug_loader *l, aug_worker *w, uint64_t index, void *dst,
		       int32_t *label, ims_error *err)
{
	const aug_transform_opts *tr = &l->o.transform;
	double t0 = ims_now();
	rio_record rec;
	FORWARD_IF_ERR(rio_cursor_get(w->cur, index, &rec, err));
	double t1 = ims_now();
	w->read_s += t1 - t0;
	*label = rec.label;
	aug_plan plan;
	const aug_image *src;
	aug_image view;
	if (rec.encoding == RIO_ENC_RAW) {
		view = (aug_image){(uint8_t *)rec.payload, (int)rec.width, (int)rec.height,
				   rec.channels, (size_t)rec.width * rec.channels, 0};
		if (rec.channels == 4) {
			/* Alpha over white, as every decode to RGB does. */
			FORWARD_IF_ERR(aug_image_alloc(&w->img, view.width, view.height, 3, err));
			for (int y = 0; y < view.height; y++)
				aug_composite_row(view.pixels + (size_t)y * view.stride,
						  w->img.pixels + (size_t)y * w->img.stride,
						  view.width, 3);
			view = w->img;
		}
		FORWARD_IF_ERR(aug_sample_plan(tr, view.width, view.height, l->o.seed,
					       l->part.epoch, index, &plan, err));
		src = &view;
	} else {
		/* the same path as any encoded image (render.c) */
		int swap = rec.orientation >= 5;
		int uw = (int)(swap ? rec.height : rec.width);
		int uh = (int)(swap ? rec.width : rec.height);
		double times[2] = {0, 0};
		int rc = aug_render(w->codec, rec.payload, rec.payload_len, uw, uh, tr,
				    l->o.seed, l->part.epoch, index, &w->img, dst, times, err);
		w->decode_s += times[0];
		w->augment_s += times[1];
		return rc;
	}
	double t2 = ims_now();
	w->decode_s += t2 - t1;
	int rc = aug_warp(src, &plan, tr, dst, err);
	w->augment_s += ims_now() - t2;
	return rc;
}

/* Whether msg already names record index (the reader's messages do:
 * "record 5 in shard ..."; a decoder's do not), so that the loader's
 * context does not say it twice ("record 5: record 5 in shard"). */
static int names_record(const char *msg, uint64_t index)
{
	char name[32];
	int n = snprintf(name, sizeof(name), "record %llu", (unsigned long long)index);
	for (const char *p = strstr(msg, name); p; p = strstr(p + 1, name))
		if (!isdigit((unsigned char)p[n]))
			return 1;
	return 0;
}

/* Moves the workers' stage times into l->stats (l->ring.mu held, the
 * fill's threads joined): aug_loader_get_stats then reads them under the
 * lock, never while a worker adds to them. */
static void take_worker_times(aug_loader *l)
{
	for (int t = 0; t < l->threads; t++) {
		aug_worker *w = &l->workers[t];
		l->stats.read_seconds += w->read_s;
		l->stats.decode_seconds += w->decode_s;
		l->stats.augment_seconds += w->augment_s;
		w->read_s = w->decode_s = w->augment_s = 0;
	}
}

void aug_loader_fill(aug_loader *l, aug_slot *s, uint64_t step)
{
	const uint64_t per = l->part.epoch_per_rank;
	uint64_t first = step * (uint64_t)l->o.batch_size;
	uint64_t left = per - first;
	int count = left < (uint64_t)l->o.batch_size ? (int)left : l->o.batch_size;
	/* s->step was set by produce under l->ring.mu: the consumer reads it
	 * there while this fills, to find the slot of the step it wants */
	s->count = count;
	s->rc = 0;
	uint64_t bad = 0;
	char last_bad[IMS_ERRMSG_MAX] = "";
	int first_bad_j = count; /* the lowest sample that replaced a record */
	/* a share shorter than MAX_TRIES: each of its records once */
	const int tries = per < MAX_TRIES ? (int)per : MAX_TRIES;
#pragma omp parallel for num_threads(l->threads) schedule(dynamic, 1) reduction(+ : bad)
	for (int j = 0; j < count; j++) {
		if (__atomic_load_n(&l->ring.stop, __ATOMIC_RELAXED))
			continue; /* stopping: the rest is never handed out */
		aug_worker *w = &l->workers[omp_get_thread_num()];
		uint64_t pos = first + (uint64_t)j;
		uint64_t index = l->part.share[pos];
		uint8_t *dst = (uint8_t *)s->data + (size_t)j * l->sample_bytes;
		ims_error e;
		int rc = -1;
		s->replaced[j] = 0;
		for (int t = 0; t < tries; t++) {
			rc = load_sample(l, w, index, dst, &s->labels[j], &e);
			if (rc < 0 && rc != IMS_ECHANGED && !names_record(e.msg, index))
				ims_fail_context(&e, "record %llu",
						 (unsigned long long)index);
			/* A shard that changed under the reader is no damaged
			 * record to replace: every record of it is suspect. Nor
			 * is a record whose decoding ran out of memory: the
			 * next one would be counted bad too, and scores left
			 * without it, for want of memory, not data. */
			if (rc == 0 || rc == IMS_ECHANGED || rc == IMS_ENOMEM)
				break;
			bad++;
			if (t == 0) {
				s->replaced[j] = 1;
				s->bad_first[j] = index;
			}
#pragma omp critical(aug_loader_bad)
			{
				memcpy(last_bad, e.msg, sizeof(last_bad));
				if (t == 0 && j < first_bad_j) {
					first_bad_j = j;
					memcpy(s->bad_msg, e.msg, sizeof(s->bad_msg));
				}
			}
			/* The next record of this rank's share: deterministic,
			 * whatever the thread count. */
			index = l->part.share[(pos + (uint64_t)t + 1) % per];
		}
		s->indices[j] = index;
		s->padded[j] = l->part.share_pad[pos];
		if (rc < 0) {
#pragma omp critical(aug_loader_fail)
			{
				s->rc = rc;
				s->err = e;
				/* one rank's share is the whole split; an epoch
				 * resumed past its start tried what was left of
				 * it, not the whole share */
				char whose[128];
				const char *of = l->part.epoch_position ? "left of" : "of";
				int n = l->o.world > 1
						? snprintf(whose, sizeof(whose), "rank %d's share", l->o.rank)
						: snprintf(whose, sizeof(whose), "the split");
				if (l->part.epoch_position)
					snprintf(whose + n, sizeof(whose) - (size_t)n,
						 " in this epoch (resumed at position %llu)",
						 (unsigned long long)l->part.epoch_position);
				if (rc == IMS_ECHANGED || rc == IMS_ENOMEM)
					; /* no run of bad records: nothing tried */
				else if (tries == 1)
					ims_fail_context(&s->err, "the only record %s %s could not be loaded",
							 of, whose);
				else if ((uint64_t)tries == per)
					ims_fail_context(&s->err, "none of the %d records %s %s could be loaded; the last",
							 tries, of, whose);
				else
					ims_fail_context(&s->err, "%d records in a row could not be loaded; the last",
							 MAX_TRIES);
			}
		}
	}
	if (__atomic_load_n(&l->ring.stop, __ATOMIC_RELAXED)) {
		s->rc = ims_fail(&s->err, IMS_EINTR, "the loader was stopped");
		/* left at the samples it had: nothing counted but the time */
		pthread_mutex_lock(&l->ring.mu);
		take_worker_times(l);
		pthread_mutex_unlock(&l->ring.mu);
		return;
	}
	/* in sample order, whatever thread met them */
	s->n_bad = (int)bad;
	s->n_bad_listed = 0;
	for (int j = 0; j < count; j++)
		if (s->replaced[j])
			s->bad_list[s->n_bad_listed++] = s->bad_first[j];
	if (!bad)
		s->bad_msg[0] = 0;
	pthread_mutex_lock(&l->ring.mu);
	/* records, not attempts: a stand-in that failed too is counted at
	 * its own place in the share */
	l->stats.bad_records += (uint64_t)s->n_bad_listed;
	if (bad)
		snprintf(l->stats.last_bad, sizeof(l->stats.last_bad), "%s", last_bad);
	l->stats.images += (uint64_t)count;
	l->stats.batches++;
	take_worker_times(l);
	pthread_mutex_unlock(&l->ring.mu);
}
