/*
 * overlap.c - whether --val holds images --train holds too. The split
 * digests tell only the same records in the same shards (setup.c's
 * warning); the same images packed twice, as two splits of one list or
 * from lists that overlap, digest apart and would be validated on without
 * a word. A record is known here by its payload's CRC-32C and length,
 * read from its header alone (no payload page is touched), and a pair
 * found in both splits is compared byte for byte before it counts.
 * imshard eval asks the same of its split, against the training split
 * the checkpoint records (nn_eval_train_overlap).
 *
 * Cost: every validation record's header (less than the first
 * validation reads), and the headers of at most NN_OVERLAP_SAMPLE
 * training records spread over the split, so a large training split
 * costs no more than a small one; the count is then an estimate.
 */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "loop_internal.h"
#include "recordio/recordio.h"

/* A validation record: its payload's CRC-32C and length, and where it is. */
typedef struct {
	uint64_t id;
	uint64_t index : 63;
	uint64_t found : 1; /* a training record's payload, byte for byte */
} ov_key;

static uint64_t record_id(const rio_record *rec)
{
	return (uint64_t)rec->payload_crc << 32 | rec->payload_len;
}

static int by_id(const void *a, const void *b)
{
	const ov_key *x = a, *y = b;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* A record the check could not read is the loader's to name and count
 * (records.c); only memory running out, or a shard that changed, ends
 * the check, as either would end the run. */
static int fatal(int rc)
{
	return rc == IMS_ENOMEM || rc == IMS_ECHANGED;
}

/* Every readable validation record's key into *keys (malloc'd), sorted. */
static int val_keys(rio_cursor *c, uint64_t n, const char *path, ov_key **keys,
		    size_t *n_keys, ims_error *err)
{
	*keys = malloc((n ? n : 1) * sizeof(ov_key));
	RETURN_IF(!*keys, err, IMS_ENOMEM,
		  "cannot look for training images in '%s': out of memory "
		  "for %llu records", path, (unsigned long long)n);
	size_t k = 0;
	for (uint64_t i = 0; i < n; i++) {
		rio_record rec;
		int rc = rio_cursor_get(c, i, &rec, err);
		if (rc && fatal(rc))
			return rc;
		if (!rc)
			(*keys)[k++] = (ov_key){record_id(&rec), i, 0};
	}
	qsort(*keys, k, sizeof(ov_key), by_id);
	*n_keys = k;
	return 0;
}

/* The first validation record holding rec's payload byte for byte, or
 * -1; every one that holds it is marked found (a split holding an image
 * twice counts both records). */
static int64_t find(rio_cursor *vc, ov_key *keys, size_t n_keys,
		    const rio_record *rec, ims_error *err, int *rc)
{
	const uint64_t id = record_id(rec);
	size_t lo = 0, hi = n_keys;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (keys[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	int64_t at = -1;
	for (size_t i = lo; i < n_keys && keys[i].id == id; i++) {
		rio_record v;
		*rc = rio_cursor_get(vc, keys[i].index, &v, err);
		if (*rc && fatal(*rc))
			return -1;
		if (*rc) {
			/* not read this time: v holds nothing to compare */
			*rc = 0;
			continue;
		}
		if (!memcmp(v.payload, rec->payload, rec->payload_len)) {
			keys[i].found = 1;
			if (at < 0)
				at = (int64_t)keys[i].index;
		}
	}
	return at;
}

/* Looks for train's images in val (both manifests' paths) into *ov. */
static int find_overlap(const char *train, const char *val, nn_overlap *ov,
			ims_error *err)
{
	memset(ov, 0, sizeof(*ov));
	rio_reader *tr = NULL, *vr = NULL;
	rio_cursor *tc = NULL, *vc = NULL;
	ov_key *keys = NULL;
	size_t n_keys = 0;
	int rc = rio_reader_open(train, &tr, err);
	if (!rc)
		rc = rio_reader_open(val, &vr, err);
	if (!rc)
		rc = rio_cursor_open(tr, 0, &tc, err);
	if (!rc)
		rc = rio_cursor_open(vr, 0, &vc, err);
	if (!rc)
		rc = val_keys(vc, rio_reader_count(vr), val, &keys, &n_keys, err);
	const uint64_t n = tr ? rio_reader_count(tr) : 0;
	const uint64_t sample = n < NN_OVERLAP_SAMPLE ? n : NN_OVERLAP_SAMPLE;
	for (uint64_t s = 0; !rc && n_keys && s < sample; s++) {
		/* spread over the split: packing order is often by class */
		const uint64_t i = (uint64_t)((unsigned __int128)s * n / sample);
		rio_record rec;
		int got = rio_cursor_get(tc, i, &rec, err);
		if (got) {
			rc = fatal(got) ? got : 0;
			continue;
		}
		const int64_t at = find(vc, keys, n_keys, &rec, err, &rc);
		if (at >= 0 && !ov->shared++) {
			ov->train_index = i;
			ov->index = (uint64_t)at;
		}
	}
	if (rc)
		ov->shared = 0;
	ov->sampled = sample;
	ov->train_records = n;
	ov->records = vr ? rio_reader_count(vr) : 0;
	for (size_t i = 0; i < n_keys; i++)
		ov->found += keys[i].found;
	free(keys);
	rio_cursor_close(tc);
	rio_cursor_close(vc);
	rio_reader_close(tr);
	rio_reader_close(vr);
	/* a split that cannot be opened is the loaders' to name: only what
	 * ends the run ends the check */
	return rc && fatal(rc) ? rc : 0;
}

int loop_check_overlap(run *r, ims_error *err)
{
	memset(&r->data.overlap, 0, sizeof(r->data.overlap));
	const nn_train_opts *o = r->o;
	/* the same records are said already (setup.c); --synthetic trains
	 * on no record; the warning is rank 0's */
	if (!o->data.val_manifest || o->data.synthetic || r->dp.rank != 0 ||
	    (r->data.val_digest == r->data.train_digest &&
	     r->data.val_records == r->data.train_records))
		return 0;
	return find_overlap(o->data.train_manifest, o->data.val_manifest,
			    &r->data.overlap, err);
}

/* The recorded training split's path (options' "train"), into path;
 * "" when the weights record none. */
static int recorded_train(const st_file *weights, char *path, size_t cap,
			  ims_error *err)
{
	path[0] = '\0';
	const char *opts = st_metadata_get(weights, "options");
	int oom = 0;
	cJSON *j = opts ? ims_json_parse(opts, strlen(opts) + 1, 1, NULL, &oom) : NULL;
	RETURN_IF(oom, err, IMS_ENOMEM,
		  "cannot read '%s': out of memory for its run's options (its "
		  "training split)", st_path(weights));
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "train");
	if (cJSON_IsString(t) && strlen(t->valuestring) < cap)
		snprintf(path, cap, "%s", t->valuestring);
	cJSON_Delete(j);
	return 0;
}

/* Whether the manifest at path is a split of records records digesting
 * to digest: 1, 0 (another, or none there), or IMS_ENOMEM. */
static int is_split(const char *path, uint64_t records, uint64_t digest,
		    ims_error *err)
{
	rio_manifest m = {0};
	ims_error e;
	int rc = rio_manifest_load(path, &m, &e);
	if (rc)
		return rc == IMS_ENOMEM ? ims_fail(err, rc, "%s", e.msg) : 0;
	rc = m.records == records && loop_split_digest(&m) == digest;
	rio_manifest_release(&m);
	return rc;
}

int nn_eval_train_overlap(const st_file *weights, const char *split, int *found,
			  nn_overlap *out, char *train, size_t train_cap,
			  ims_error *err)
{
	memset(out, 0, sizeof(*out));
	*found = NN_TRAIN_UNRECORDED;
	train[0] = '\0';
	const char *d = st_metadata_get(weights, "train_digest");
	const char *n = st_metadata_get(weights, "train_records");
	if (!d || !n)
		return 0;
	const uint64_t digest = strtoull(d, NULL, 16);
	const uint64_t records = strtoull(n, NULL, 10);
	int rc = is_split(split, records, digest, err);
	if (rc)
		return rc < 0 ? rc : (*found = NN_TRAIN_SAME, 0);
	FORWARD_IF_ERR(recorded_train(weights, train, train_cap, err));
	*found = NN_TRAIN_MISSING;
	rc = train[0] ? is_split(train, records, digest, err) : 0;
	if (rc <= 0)
		return rc;
	*found = NN_TRAIN_SEARCHED;
	return find_overlap(train, split, out, err);
}

void nn_overlap_say(const nn_overlap *ov, const char *train, const char *val,
		      const char *flag, char *msg, size_t cap)
{
	char count[200];
	if (ov->sampled == ov->train_records) {
		snprintf(count, sizeof(count), "%llu", (unsigned long long)ov->found);
	} else {
		/* the sample's share of the training split found in val, over
		 * the whole of it: the images the two hold alike */
		double est = (double)ov->shared * (double)ov->train_records /
			     (double)ov->sampled;
		if (est > (double)ov->records)
			est = (double)ov->records;
		snprintf(count, sizeof(count),
			 "about %.0f (from %llu of the training split's %llu "
			 "records looked at, %llu of them found)",
			 est, (unsigned long long)ov->sampled,
			 (unsigned long long)ov->train_records,
			 (unsigned long long)ov->shared);
	}
	snprintf(msg, cap,
		 "%s'%s' holds images of the training split '%s': %s of its %llu "
		 "records are byte for byte training records (record %llu is "
		 "training record %llu)",
		 flag, val, train, count, (unsigned long long)ov->records,
		 (unsigned long long)ov->index, (unsigned long long)ov->train_index);
}

void loop_warn_overlap(run *r)
{
	const nn_overlap *ov = &r->data.overlap;
	if (!ov->shared || !r->log.ev.warning)
		return;
	char msg[2 * 4096 + 600];
	nn_overlap_say(ov, r->o->data.train_manifest, r->o->data.val_manifest, "--val ",
			 msg, sizeof(msg) - 80);
	size_t n = strlen(msg);
	snprintf(msg + n, sizeof(msg) - n,
		 "; its accuracy is partly on images the run trains on");
	r->log.ev.warning(r->log.ev.ctx, msg);
}
