/*
 * reader.c - opens a split read-only and serves zero-copy record views.
 *
 * Every shard is opened MDB_RDONLY|MDB_NOLOCK|MDB_NOTLS|MDB_NOSUBDIR and
 * checked against the manifest at open time (size, record count, first and
 * last key), so a swapped, truncated or foreign shard is refused before
 * training starts rather than discovered mid-epoch. Cursors open one read
 * transaction per shard lazily; views point into the map and stay valid
 * until the cursor closes.
 */
#define _GNU_SOURCE
#include "recordio.h"

#include <errno.h>
#include <libgen.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct shard {
	MDB_env *env;
	MDB_dbi dbi;
	char *path;
	uint64_t first, records;
} shard;

struct rio_reader {
	rio_manifest m;
	shard *shards;
	size_t n_shards;
};

struct rio_cursor {
	rio_reader *r;
	unsigned check;
	MDB_txn **txn;
	MDB_cursor **cur;
	int last_shard;
	uint64_t last_index;
};

static uint64_t key_to_u64(const MDB_val *k)
{
	const uint8_t *p = k->mv_data;
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

static void u64_to_key(uint64_t v, uint8_t *kb)
{
	for (int b = 0; b < 8; b++)
		kb[b] = (uint8_t)(v >> (56 - 8 * b));
}

static int check_shard(shard *s, const rio_shard_info *info, ims_error *err)
{
	struct stat st;
	RETURN_IF(stat(s->path, &st) != 0, err,
		  errno == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
		  "cannot open shard '%s': %s", s->path, strerror(errno));
	RETURN_IF((uint64_t)st.st_size != info->bytes, err, IMS_ECORRUPT,
		  "shard '%s' is %llu bytes but the manifest says %llu (truncated or replaced?)",
		  s->path, (unsigned long long)st.st_size,
		  (unsigned long long)info->bytes);
	int rc = mdb_env_create(&s->env);
	if (!rc)
		rc = mdb_env_open(s->env, s->path,
				  MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | MDB_NOSUBDIR,
				  0444);
	MDB_txn *txn = NULL;
	if (!rc)
		rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, NULL, 0, &s->dbi);
	if (rc) {
		if (txn)
			mdb_txn_abort(txn);
		return ims_fail(err, rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH ?
					     IMS_ECORRUPT : IMS_ELMDB,
				"cannot open shard '%s': %s", s->path, mdb_strerror(rc));
	}
	MDB_stat ms;
	rc = mdb_stat(txn, s->dbi, &ms);
	if (!rc && ms.ms_entries != info->records) {
		mdb_txn_abort(txn);
		return ims_fail(err, IMS_ECORRUPT,
				"shard '%s' holds %zu records but the manifest says %llu",
				s->path, ms.ms_entries,
				(unsigned long long)info->records);
	}
	if (!rc && info->records > 0) {
		MDB_cursor *c;
		MDB_val k, v;
		rc = mdb_cursor_open(txn, s->dbi, &c);
		uint64_t first = 0, last = 0;
		int bad = 0;
		if (!rc) {
			rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
			bad |= !rc && k.mv_size != RIO_KEY_SIZE;
			if (!rc && !bad)
				first = key_to_u64(&k);
		}
		if (!rc && !bad) {
			rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
			bad |= !rc && k.mv_size != RIO_KEY_SIZE;
			if (!rc && !bad)
				last = key_to_u64(&k);
		}
		if (!rc)
			mdb_cursor_close(c);
		if (!rc && (bad || first != info->first ||
			    last != info->first + info->records - 1)) {
			mdb_txn_abort(txn);
			return ims_fail(err, IMS_ECORRUPT,
					"shard '%s' holds records %llu..%llu but the manifest says %llu..%llu",
					s->path, (unsigned long long)first,
					(unsigned long long)last,
					(unsigned long long)info->first,
					(unsigned long long)(info->first + info->records - 1));
		}
	}
	mdb_txn_abort(txn);
	if (rc)
		return ims_fail(err, IMS_ECORRUPT, "cannot read shard '%s': %s",
				s->path, mdb_strerror(rc));
	s->first = info->first;
	s->records = info->records;
	return 0;
}

int rio_reader_open(const char *manifest_path, rio_reader **out, ims_error *err)
{
	*out = NULL;
	rio_reader *r = calloc(1, sizeof(*r));
	RETURN_IF(!r, err, IMS_ENOMEM, "out of memory");
	int rc = rio_manifest_load(manifest_path, &r->m, err);
	if (rc < 0) {
		free(r);
		return rc;
	}
	char dirbuf[4096];
	snprintf(dirbuf, sizeof(dirbuf), "%s", manifest_path);
	const char *dir = dirname(dirbuf);
	r->shards = calloc(r->m.n_shards, sizeof(*r->shards));
	if (!r->shards)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "out of memory");
	r->n_shards = r->m.n_shards;
	for (size_t i = 0; i < r->n_shards; i++) {
		shard *s = &r->shards[i];
		if (asprintf(&s->path, "%s/%s", dir, r->m.shards[i].file) < 0) {
			s->path = NULL;
			GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "out of memory");
		}
		GOTO_IF_ERR(fail, rc, check_shard(s, &r->m.shards[i], err));
	}
	*out = r;
	return 0;
fail:
	rio_reader_close(r);
	return rc;
}

void rio_reader_close(rio_reader *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_shards; i++) {
		if (r->shards[i].env)
			mdb_env_close(r->shards[i].env);
		free(r->shards[i].path);
	}
	free(r->shards);
	rio_manifest_release(&r->m);
	free(r);
}

uint64_t rio_reader_count(const rio_reader *r)
{
	return r->m.records;
}

const rio_manifest *rio_reader_manifest(const rio_reader *r)
{
	return &r->m;
}

const char *rio_reader_shard_path(const rio_reader *r, size_t i)
{
	return i < r->n_shards ? r->shards[i].path : NULL;
}

int rio_reader_shard_of(const rio_reader *r, uint64_t index)
{
	if (index >= r->m.records)
		return -1;
	size_t lo = 0, hi = r->n_shards;
	/* Last shard whose first <= index; empty shards share a first with
	 * their successor, so prefer the one that actually holds records. */
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (r->shards[mid].first <= index)
			lo = mid;
		else
			hi = mid;
	}
	while (lo > 0 && r->shards[lo].records == 0)
		lo--;
	while (index >= r->shards[lo].first + r->shards[lo].records)
		lo++;
	return (int)lo;
}

int rio_cursor_open(rio_reader *r, unsigned check, rio_cursor **out,
		    ims_error *err)
{
	*out = NULL;
	rio_cursor *c = calloc(1, sizeof(*c));
	RETURN_IF(!c, err, IMS_ENOMEM, "out of memory");
	c->txn = calloc(r->n_shards, sizeof(*c->txn));
	c->cur = calloc(r->n_shards, sizeof(*c->cur));
	if (!c->txn || !c->cur) {
		free(c->txn);
		free(c->cur);
		free(c);
		return ims_fail(err, IMS_ENOMEM, "out of memory");
	}
	c->r = r;
	c->check = check;
	c->last_shard = -1;
	*out = c;
	return 0;
}

void rio_cursor_close(rio_cursor *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->r->n_shards; i++) {
		if (c->cur[i])
			mdb_cursor_close(c->cur[i]);
		if (c->txn[i])
			mdb_txn_abort(c->txn[i]);
	}
	free(c->txn);
	free(c->cur);
	free(c);
}

int rio_cursor_get(rio_cursor *c, uint64_t index, rio_record *rec,
		   ims_error *err)
{
	rio_reader *r = c->r;
	int si = rio_reader_shard_of(r, index);
	RETURN_IF(si < 0, err, IMS_EINVAL,
		  "record %llu is out of range (the split holds %llu)",
		  (unsigned long long)index, (unsigned long long)r->m.records);
	shard *s = &r->shards[si];
	int rc;
	if (!c->txn[si]) {
		rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &c->txn[si]);
		if (!rc)
			rc = mdb_cursor_open(c->txn[si], s->dbi, &c->cur[si]);
		if (rc) {
			if (c->txn[si])
				mdb_txn_abort(c->txn[si]);
			c->txn[si] = NULL;
			return ims_fail(err, IMS_ELMDB, "cannot read shard '%s': %s",
					s->path, mdb_strerror(rc));
		}
	}
	MDB_val k, v;
	if (c->last_shard == si && index == c->last_index + 1) {
		rc = mdb_cursor_get(c->cur[si], &k, &v, MDB_NEXT);
	} else {
		uint8_t kb[RIO_KEY_SIZE];
		u64_to_key(index, kb);
		k.mv_size = RIO_KEY_SIZE;
		k.mv_data = kb;
		rc = mdb_cursor_get(c->cur[si], &k, &v, MDB_SET_KEY);
	}
	c->last_shard = -1;
	if (rc == MDB_NOTFOUND)
		return ims_fail(err, IMS_ENOTFOUND, "record %llu is missing from shard '%s'",
				(unsigned long long)index, s->path);
	if (rc)
		return ims_fail(err, IMS_ECORRUPT, "cannot read record %llu from shard '%s': %s",
				(unsigned long long)index, s->path, mdb_strerror(rc));
	if (k.mv_size != RIO_KEY_SIZE || key_to_u64(&k) != index)
		return ims_fail(err, IMS_ECORRUPT,
				"shard '%s' is out of order: expected record %llu",
				s->path, (unsigned long long)index);
	c->last_shard = si;
	c->last_index = index;
	rc = rio_record_decode(v.mv_data, v.mv_size, rec, c->check, err);
	if (rc < 0)
		return ims_fail_context(err, "record %llu in shard '%s'",
					(unsigned long long)index, s->path);
	return 0;
}
