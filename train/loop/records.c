/*
 * records.c - records the loader could not read or decode. In training
 * each was replaced by another record of the rank's share (so batches stay
 * full and ranks equal); in validation the stand-ins are left out. Either
 * way they are counted over all ranks, the first few named, and told: a
 * progress event and metrics.jsonl's "epoch" and "val" lines, the run's
 * total and first indices in summary.json, and --max-bad-records ends a
 * run that meets more of them than that in one epoch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "train/loop/loop_internal.h"

/* v kept among the smallest LOOP_BAD_LISTED distinct indices of list
 * (ascending, *n of them): the same listing whatever order the epoch's
 * shuffle met them in. */
void loop_bad_keep(uint64_t *list, int *n, uint64_t v)
{
	int i = 0;
	while (i < *n && list[i] < v)
		i++;
	if ((i < *n && list[i] == v) || i >= LOOP_BAD_LISTED)
		return;
	int last = *n < LOOP_BAD_LISTED ? *n : LOOP_BAD_LISTED - 1;
	memmove(list + i + 1, list + i, (size_t)(last - i) * sizeof(*list));
	list[i] = v;
	if (*n < LOOP_BAD_LISTED)
		++*n;
}

/* This rank's smallest few of the batch, before its memory is reused. */
void loop_bad_batch(run *r, const aug_batch *b)
{
	loop_bad *bad = &r->bad;
	if (!b->bad_listed)
		return;
	if (!bad->reason[0] && b->bad_reason)
		snprintf(bad->reason, sizeof(bad->reason), "%s", b->bad_reason);
	for (int i = 0; i < b->bad_listed; i++)
		loop_bad_keep(bad->mine, &bad->n_mine, b->bad_indices[i]);
}

/* The epoch's counts start from 0, or, for an epoch resumed inside, from
 * its earlier part's (loop_bad_restore). */
void loop_bad_epoch_start(run *r, int epoch, uint64_t position)
{
	loop_bad *bad = &r->bad;
	if (!position || !bad->carried) {
		bad->epoch_count = 0;
		bad->n_mine = 0;
		bad->reason[0] = 0;
	}
	bad->carried = 0;
	bad->epoch = epoch;
}

/* A step's count, summed over ranks: --max-bad-records ends the run here,
 * on every rank at the same step. The limit is an epoch's: a damaged
 * record is met once in every epoch, so a run's total would hold the same
 * few records against it again each epoch, and a limit fit for the data
 * would end a longer run of the same data. */
int loop_bad_step(run *r, uint64_t count, uint64_t step, ims_error *err)
{
	loop_bad *bad = &r->bad;
	bad->epoch_count += count;
	bad->total += count;
	const int64_t limit = r->o->data.max_bad_records;
	if (limit < 0 || bad->epoch_count <= (uint64_t)limit)
		return 0;
	char list[160] = "";
	size_t len = 0;
	for (int i = 0; i < bad->n_mine && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%llu",
					i ? ", " : "", (unsigned long long)bad->mine[i]);
	/* the count is the step's sum over ranks: every rank stops here,
	 * none left in a collective, so the job ends without an abort (which
	 * could kill a rank before it named its records), each rank naming
	 * its own */
	r->failed.ranks = r->dp.world;
	r->failed.here = 1;
	r->failed.alike = 0;
	return ims_fail(err, IMS_EINVAL,
			"%llu training %s of epoch %d could not be loaded by step "
			"%llu, more than --max-bad-records %lld%s%s%s%s: stopping "
			"(check the split with 'imshard verify')",
			(unsigned long long)bad->epoch_count,
			ims_plural(bad->epoch_count, "record", "records"),
			bad->epoch + 1, (unsigned long long)step + 1, (long long)limit,
			len ? " (this rank's: " : "",
			len ? ims_plural((uint64_t)bad->n_mine, "record ", "records ") : "",
			list, len ? ")" : "");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Every rank's smallest few (mine), gathered: the smallest LOOP_BAD_LISTED
 * distinct ones, ascending, into out. Collective: every rank calls it.
 */
static int gather_first(run *r, const uint64_t *mine, int n_mine, uint64_t *out,
			int *n_out, ims_error *err)
{
	const int world = r->dp.world;
	double my[LOOP_BAD_LISTED];
	for (int i = 0; i < LOOP_BAD_LISTED; i++)
		my[i] = i < n_mine ? (double)mine[i] : -1.0; /* exact below 2^53 */
	double *all = malloc((size_t)world * LOOP_BAD_LISTED * sizeof(double));
	uint64_t *got = malloc((size_t)world * LOOP_BAD_LISTED * sizeof(uint64_t));
	int rc = 0;
	if (!all || !got)
		rc = ims_fail(err, IMS_ENOMEM, "cannot list bad records: out of memory");
	if (!rc)
		rc = dp_allgather_f64(r->dp.comm, my, LOOP_BAD_LISTED, all, err);
	size_t n = 0;
	for (size_t i = 0; !rc && i < (size_t)world * LOOP_BAD_LISTED; i++)
		if (all[i] >= 0)
			got[n++] = (uint64_t)all[i];
	if (!rc) {
		qsort(got, n, sizeof(*got), cmp_u64);
		*n_out = 0;
		for (size_t i = 0; i < n; i++)
			loop_bad_keep(out, n_out, got[i]);
	}
	free(all);
	free(got);
	return rc;
}

/*
 * The reason to tell with the gathered indices: rank 0's when it met a
 * record, else the lowest rank's that did, copied into reason on every
 * rank (only rank 0 tells it, and it may have met none). Collective.
 */
static int share_reason(run *r, char reason[IMS_ERRMSG_MAX], ims_error *err)
{
	const int world = r->dp.world;
	if (world == 1)
		return 0;
	double mine = reason[0] ? 1.0 : 0.0;
	double *all = malloc((size_t)world * sizeof(double));
	RETURN_IF(!all, err, IMS_ENOMEM, "cannot tell why records could not be "
		  "loaded: out of memory");
	int rc = dp_allgather_f64(r->dp.comm, &mine, 1, all, err);
	int root = 0;
	while (!rc && root < world && all[root] == 0.0)
		root++;
	free(all);
	if (rc || root == 0 || root == world)
		return rc;
	return dp_broadcast(r->dp.comm, reason, IMS_ERRMSG_MAX, root, err);
}

static cJSON *indices_json(const uint64_t *v, int n)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
	return a;
}

/*
 * After an epoch's training (every rank): its count and first records,
 * gathered; metrics.jsonl's "epoch" line (rank 0), the event when there
 * were any, the run's first few kept for the summary. complete: the
 * epoch was trained to its end (else a stop inside it, whose resumed
 * part writes the epoch's line again, counting from its start).
 */
int loop_bad_epoch(run *r, int epoch, uint64_t step, int complete, ims_error *err)
{
	loop_bad *bad = &r->bad;
	uint64_t first[LOOP_BAD_LISTED];
	int n = 0;
	FORWARD_IF_ERR(gather_first(r, bad->mine, bad->n_mine, first, &n, err));
	for (int i = 0; i < n; i++)
		loop_bad_keep(bad->first, &bad->n_first, first[i]);
	if (bad->epoch_count) /* a sum over ranks: every rank takes this path */
		FORWARD_IF_ERR(share_reason(r, bad->reason, err));
	if (r->dp.rank == 0) {
		cJSON *j = loop_metrics_object("epoch");
		cJSON_AddNumberToObject(j, "epoch", epoch);
		cJSON_AddNumberToObject(j, "step", (double)step);
		cJSON_AddBoolToObject(j, "complete", complete);
		cJSON_AddNumberToObject(j, "bad_records", (double)bad->epoch_count);
		cJSON_AddItemToObject(j, "bad_record_indices", indices_json(first, n));
		FORWARD_IF_ERR(loop_metrics_line(r, j, err));
	}
	if (bad->epoch_count && r->log.ev.records_replaced) {
		nn_train_bad b = {.epoch = epoch,
				  .count = bad->epoch_count,
				  .total = bad->total,
				  .indices = first,
				  .listed = n,
				  .reason = bad->reason};
		r->log.ev.records_replaced(r->log.ev.ctx, &b);
	}
	return 0;
}

/*
 * Before a checkpoint (every rank, a collective): the epoch's count so
 * far, every rank's smallest and the reason it would tell, as JSON text
 * in r->bad.ck_json on rank 0 for the checkpoint's run history, so that
 * a run resumed inside the epoch counts and names the whole epoch at its
 * end, as the run never stopped does (loop_bad_restore).
 */
int loop_bad_checkpoint(run *r, ims_error *err)
{
	loop_bad *bad = &r->bad;
	const int world = r->dp.world;
	cJSON_free(bad->ck_json);
	bad->ck_json = NULL;
	double my[LOOP_BAD_LISTED + 1];
	for (int i = 0; i < LOOP_BAD_LISTED; i++)
		my[i] = i < bad->n_mine ? (double)bad->mine[i] : -1.0;
	my[LOOP_BAD_LISTED] = bad->reason[0] ? 1.0 : 0.0;
	const size_t row = LOOP_BAD_LISTED + 1;
	double *all = malloc((size_t)world * row * sizeof(double));
	RETURN_IF(!all, err, IMS_ENOMEM, "cannot checkpoint: out of memory");
	int rc = dp_allgather_f64(r->dp.comm, my, row, all, err);
	/* the lowest rank that met one tells its reason (share_reason) */
	int root = 0;
	while (!rc && root < world && all[(size_t)root * row + LOOP_BAD_LISTED] == 0.0)
		root++;
	char why[IMS_ERRMSG_MAX];
	snprintf(why, sizeof(why), "%s", bad->reason);
	if (!rc && root > 0 && root < world)
		rc = dp_broadcast(r->dp.comm, why, IMS_ERRMSG_MAX, root, err);
	if (!rc && r->dp.rank == 0) {
		ims_json_watch(); /* the checkpoint's bad records: whole, or none */
		cJSON *j = cJSON_CreateObject();
		cJSON *ranks = cJSON_AddArrayToObject(j, "ranks");
		for (int k = 0; ranks && k < world; k++) {
			cJSON *a = cJSON_CreateArray();
			for (int i = 0; a && i < LOOP_BAD_LISTED; i++)
				if (all[(size_t)k * row + (size_t)i] >= 0)
					cJSON_AddItemToArray(a, cJSON_CreateNumber(
						all[(size_t)k * row + (size_t)i]));
			cJSON_AddItemToArray(ranks, a);
		}
		cJSON_AddNumberToObject(j, "count", (double)bad->epoch_count);
		cJSON_AddStringToObject(j, "reason", root < world ? why : "");
		cJSON_AddNumberToObject(j, "reason_rank", root < world ? root : 0);
		bad->ck_json = ims_json_print(j, 0);
		cJSON_Delete(j);
		if (!bad->ck_json)
			rc = ims_fail(err, IMS_ENOMEM, "cannot checkpoint: out of memory");
	}
	free(all);
	return rc;
}

/*
 * Resumed: the epoch's records so far from the checkpoint's run history
 * (json: its "epoch_bad" object, NULL in checkpoints written before it
 * was kept): the count on every rank; with the ranks the checkpoint's
 * run had, each rank's own smallest and the reason on the rank that
 * would tell it; with others, all of them and the reason on rank 0.
 */
int loop_bad_restore(run *r, const void *json, const char *path, ims_error *err)
{
	const cJSON *j = json;
	loop_bad *bad = &r->bad;
	if (!j)
		return 0;
	const cJSON *count = cJSON_GetObjectItemCaseSensitive(j, "count");
	const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(j, "ranks");
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(j, "reason");
	const cJSON *rr = cJSON_GetObjectItemCaseSensitive(j, "reason_rank");
	RETURN_IF(!cJSON_IsObject(j) || !cJSON_IsNumber(count) || count->valuedouble < 0 ||
			  !cJSON_IsArray(ranks) || !cJSON_IsString(reason) ||
			  !cJSON_IsNumber(rr),
		  err, IMS_ECORRUPT,
		  "cannot resume from '%s': its run history's epoch_bad is malformed", path);
	const int same = cJSON_GetArraySize(ranks) == r->dp.world;
	bad->epoch_count = (uint64_t)count->valuedouble;
	bad->n_mine = 0;
	bad->reason[0] = 0;
	const cJSON *a;
	int k = 0;
	cJSON_ArrayForEach(a, ranks)
	{
		const cJSON *x;
		const int keep = same ? k == r->dp.rank : r->dp.rank == 0;
		cJSON_ArrayForEach(x, a)
		{
			if (keep && cJSON_IsNumber(x) && x->valuedouble >= 0)
				loop_bad_keep(bad->mine, &bad->n_mine,
					      (uint64_t)x->valuedouble);
		}
		k++;
	}
	if (same ? (int)rr->valuedouble == r->dp.rank : r->dp.rank == 0)
		snprintf(bad->reason, sizeof(bad->reason), "%s", reason->valuestring);
	bad->carried = 1;
	return 0;
}

/* After a validation (every rank): its records that could not be loaded
 * (count, over all ranks), told when there were any. */
int loop_bad_validation(run *r, int epoch, const uint64_t *mine, int n_mine,
			const char *reason, uint64_t count, ims_error *err)
{
	uint64_t first[LOOP_BAD_LISTED];
	int n = 0;
	FORWARD_IF_ERR(gather_first(r, mine, n_mine, first, &n, err));
	char why[IMS_ERRMSG_MAX];
	snprintf(why, sizeof(why), "%s", reason ? reason : "");
	if (count)
		FORWARD_IF_ERR(share_reason(r, why, err));
	r->bad.val_count = count;
	if (count && r->log.ev.records_replaced) {
		nn_train_bad b = {.epoch = epoch,
				  .validation = 1,
				  .count = count,
				  .total = count,
				  .indices = first,
				  .listed = n,
				  .reason = why};
		r->log.ev.records_replaced(r->log.ev.ctx, &b);
	}
	return 0;
}
