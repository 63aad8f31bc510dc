/*
 * reader.c - opens a split read-only and serves zero-copy record views.
 *
 * Every shard is opened MDB_RDONLY|MDB_NOLOCK|MDB_NOTLS|MDB_NOSUBDIR and
 * checked against the manifest at open time (size, record count, first and
 * last key), so a swapped, truncated or foreign shard is refused before
 * training starts rather than discovered mid-epoch. Cursors open one read
 * transaction per shard lazily; views point into the map and stay valid
 * until the cursor closes.
 *
 * LMDB trusts its file: a damaged page number, node offset or value size
 * makes it read outside the page or past the end of the file (SIGSEGV,
 * SIGBUS), or trip an assert (abort). A shard is outside input (copied
 * between machines, half-downloaded, bit-rotted), so before LMDB sees a
 * shard we check what LMDB would trust (lmdb_check.c) with pread, map
 * exactly the file's bytes, and check that every key and value LMDB
 * hands back lies inside them before anything reads it.
 *
 * A shard can also change after it was checked: truncated or rewritten in
 * place (cp over it, rsync --inplace) while a run reads it. Pages past the
 * new end fault with SIGBUS, pages rewritten in place hold other records.
 * Two defences, because neither suffices alone: before each record is
 * touched, the file's size and modification time are compared with those
 * checked at open (an fstat, ~0.2 us: a clean IMS_ECHANGED naming the
 * shard, for a change made before the read); and every map is registered
 * with ims_mapguard, so a program that installs its handler gets the shard
 * named when the truncation lands during a read, between the check and
 * the last byte (there is no check that can close that window: the pages
 * go away under the reader).
 */
#define _GNU_SOURCE
#include "recordio.h"
#include "reader_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct shard {
	MDB_env *env;
	MDB_dbi dbi;
	char *path;
	uint64_t first, records;
	const uint8_t *map; /* the file's bytes, as LMDB mapped them */
	uint64_t size;
	int fd;             /* LMDB's descriptor of the file */
	struct timespec mtime; /* as checked at open */
	int guard;          /* ims_mapguard handle, or -1 */
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

/* LMDB's error as ours: memory running out is not the shard's fault
 * (verify then gives no verdict), anything else is `otherwise`. */
static int lmdb_code(int rc, int otherwise)
{
	return rc == ENOMEM ? IMS_ENOMEM : otherwise;
}

static uint64_t key_to_u64(const MDB_val *k)
{
	return rio_be64(k->mv_data);
}

static void u64_to_key(uint64_t v, uint8_t *kb)
{
	for (int b = 0; b < 8; b++)
		kb[b] = (uint8_t)(v >> (56 - 8 * b));
}

/* Whether v's bytes lie inside the shard's file. */
static int in_file(const shard *s, const MDB_val *v)
{
	uintptr_t p = (uintptr_t)v->mv_data, base = (uintptr_t)s->map;
	return p >= base && p - base <= s->size && v->mv_size <= s->size - (p - base);
}

/* Whether the shard's file is still what was checked at open. */
static int shard_unchanged(const shard *s, ims_error *err)
{
	struct stat st;
	RETURN_IF(fstat(s->fd, &st) != 0, err, IMS_EIO,
		  "cannot stat shard '%s': %s", s->path, strerror(errno));
	RETURN_IF((uint64_t)st.st_size != s->size ||
			  st.st_mtim.tv_sec != s->mtime.tv_sec ||
			  st.st_mtim.tv_nsec != s->mtime.tv_nsec,
		  err, IMS_ECHANGED,
		  "shard '%s' changed while being read (%llu bytes, %llu when opened): truncated or rewritten in place; stopping",
		  s->path, (unsigned long long)st.st_size, (unsigned long long)s->size);
	return 0;
}

static int check_shard(shard *s, const rio_shard_info *info, ims_error *err)
{
	/* A regular file, or nothing: a FIFO here would block LMDB's open. */
	int fd;
	struct stat st;
	ims_error oe;
	int rc = ims_open_read(s->path, &fd, &st, &oe);
	int e = errno; /* of the call that failed */
	if (rc == IMS_EFORMAT)
		return ims_fail(err, rc, "cannot open shard '%s': not a regular file (%s)",
				s->path, ims_file_kind(st.st_mode));
	if (rc < 0)
		return ims_fail(err, rc, "cannot open shard '%s': %s", s->path,
				strerror(e));
	if ((uint64_t)st.st_size != info->bytes) {
		close(fd);
		return ims_fail(err, IMS_ECORRUPT,
				"shard '%s' is %llu bytes but the manifest says %llu (truncated or replaced?)",
				s->path, (unsigned long long)st.st_size,
				(unsigned long long)info->bytes);
	}
	/* LMDB sees the shard only once these pass. */
	lm_layout lay = {0};
	rc = rio_lmdb_check(fd, s->path, info->bytes, &lay, err);
	close(fd);
	if (rc)
		return rc;
	/* Map the file and no more: the meta page's map size is the writer's
	 * and may run past the end of the file, where a read is SIGBUS. */
	rc = mdb_env_create(&s->env);
	if (!rc)
		rc = mdb_env_set_mapsize(s->env, (size_t)info->bytes);
	if (!rc)
		rc = mdb_env_open(s->env, s->path,
				  MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | MDB_NOSUBDIR,
				  0444);
	MDB_envinfo ei;
	if (!rc)
		rc = mdb_env_info(s->env, &ei);
	if (!rc && ei.me_mapsize != info->bytes)
		return ims_fail(err, IMS_ELMDB,
				"cannot open shard '%s': LMDB mapped %zu bytes of a %llu-byte file",
				s->path, ei.me_mapsize, (unsigned long long)info->bytes);
	/* LMDB opened the path again: it must have found the file checked
	 * above, not one put there meanwhile. */
	struct stat now;
	if (!rc)
		rc = mdb_env_get_fd(s->env, &s->fd);
	if (!rc && (fstat(s->fd, &now) != 0 || now.st_dev != st.st_dev ||
		    now.st_ino != st.st_ino))
		return ims_fail(err, IMS_ECHANGED,
				"cannot open shard '%s': it was replaced while being opened",
				s->path);
	s->mtime = st.st_mtim;
	MDB_txn *txn = NULL;
	if (!rc)
		rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, NULL, 0, &s->dbi);
	if (rc) {
		if (txn)
			mdb_txn_abort(txn);
		return ims_fail(err, rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH ?
					     IMS_ECORRUPT : lmdb_code(rc, IMS_ELMDB),
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
		MDB_cursor *c = NULL;
		MDB_val k, v;
		rc = mdb_cursor_open(txn, s->dbi, &c);
		uint64_t first = 0, last = 0;
		int bad = 0;
		if (!rc)
			rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
		if (!rc) {
			/* LMDB does not say where it mapped the file (mdb_env_info's
			 * me_mapaddr is the meta page's field), but the first key
			 * points into the map at the offset the walk found it at;
			 * a map starts on a memory page. */
			s->map = (const uint8_t *)k.mv_data - lay.first_key;
			s->size = info->bytes;
			if ((uintptr_t)s->map % (uintptr_t)sysconf(_SC_PAGESIZE)) {
				mdb_cursor_close(c);
				mdb_txn_abort(txn);
				return ims_fail(err, IMS_ELMDB,
						"cannot open shard '%s': LMDB's first key is not where the file has it",
						s->path);
			}
			bad |= k.mv_size != RIO_KEY_SIZE;
			if (!bad)
				first = key_to_u64(&k);
		}
		if (!rc && !bad) {
			rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
			bad |= !rc && (k.mv_size != RIO_KEY_SIZE || !in_file(s, &k));
			if (!rc && !bad)
				last = key_to_u64(&k);
		}
		/* a read-only transaction's cursors outlive its abort */
		if (c)
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
		return ims_fail(err, lmdb_code(rc, IMS_ECORRUPT), "cannot read shard '%s': %s",
				s->path, mdb_strerror(rc));
	s->first = info->first;
	s->records = info->records;
	if (s->map)
		s->guard = ims_mapguard_add(s->map, (size_t)s->size, s->path);
	return 0;
}

int rio_reader_open(const char *manifest_path, rio_reader **out, ims_error *err)
{
	*out = NULL;
	rio_reader *r = calloc(1, sizeof(*r));
	RETURN_IF(!r, err, IMS_ENOMEM, "cannot open split '%s': out of memory", manifest_path);
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
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "cannot open split '%s': out of memory", manifest_path);
	r->n_shards = r->m.n_shards;
	for (size_t i = 0; i < r->n_shards; i++) {
		shard *s = &r->shards[i];
		s->guard = -1;
		if (asprintf(&s->path, "%s/%s", dir, r->m.shards[i].file) < 0) {
			s->path = NULL;
			GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "cannot open split '%s': out of memory", manifest_path);
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
		ims_mapguard_remove(r->shards[i].guard);
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
	RETURN_IF(!c, err, IMS_ENOMEM, "cannot read split '%s' (%zu shards): out of memory", r->m.name, r->n_shards);
	c->txn = calloc(r->n_shards, sizeof(*c->txn));
	c->cur = calloc(r->n_shards, sizeof(*c->cur));
	if (!c->txn || !c->cur) {
		free(c->txn);
		free(c->cur);
		free(c);
		return ims_fail(err, IMS_ENOMEM, "cannot read split '%s' (%zu shards): out of memory", r->m.name, r->n_shards);
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
			return ims_fail(err, lmdb_code(rc, IMS_ELMDB), "cannot read shard '%s': %s",
					s->path, mdb_strerror(rc));
		}
	}
	/* Before LMDB touches a page of the map (see the top of the file). */
	rc = shard_unchanged(s, err);
	if (rc < 0) {
		c->last_shard = -1;
		return rc;
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
		return ims_fail(err, lmdb_code(rc, IMS_ECORRUPT), "cannot read record %llu from shard '%s': %s",
				(unsigned long long)index, s->path, mdb_strerror(rc));
	/* Before anything reads them: LMDB takes value sizes and overflow
	 * page numbers from the file as they are. */
	if (!in_file(s, &k) || !in_file(s, &v))
		return ims_fail(err, IMS_ECORRUPT,
				"cannot read record %llu from shard '%s': its %s runs past the end of the file",
				(unsigned long long)index, s->path,
				in_file(s, &k) ? "value" : "key");
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
	/* The writer gives every record of a split the same count and
	 * records it in the manifest; readers size and print the extra
	 * labels by the manifest (info, extract's list), so a record that
	 * disagrees is as damaged as one with a bad checksum. */
	if (rec->n_extra != r->m.n_extra_labels)
		return ims_fail(err, IMS_ECORRUPT,
				"record %llu in shard '%s': %u extra %s, the manifest's \"extra_labels\" is %u",
				(unsigned long long)index, s->path, rec->n_extra,
				ims_plural(rec->n_extra, "label", "labels"),
				r->m.n_extra_labels);
	/* The writer refuses a label without a class name, and readers
	 * index the manifest's classes by it (the trainer's loss, eval's
	 * confusion matrix, extract's list): one past them is a damaged
	 * record, replaced by the loader, rather than the end of a run. */
	if ((uint64_t)rec->label >= r->m.n_classes)
		return ims_fail(err, IMS_ECORRUPT,
				"record %llu in shard '%s': label %d has no class (the manifest lists %zu)",
				(unsigned long long)index, s->path, (int)rec->label,
				r->m.n_classes);
	return 0;
}
