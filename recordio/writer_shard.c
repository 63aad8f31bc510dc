/*
 * writer_shard.c - one shard of a split being written, in LMDB: its
 * working file, the batched write transactions, map growth, disk space
 * and compaction. writer.c decides when a shard opens and closes and
 * what becomes of it afterwards (writer_internal.h).
 *
 * Life of a shard: records go to NAME-SSSSS.mdb.partial (MDB_NOSYNC,
 * MDB_NOLOCK: one writer, guarded by NAME.lock), batched into write
 * transactions of about txn_bytes. A full shard is synced and becomes
 * NAME-SSSSS.mdb.compact: compacted by a copy when its freelist is worth
 * reclaiming, renamed otherwise.
 *
 * Map growth: the transaction's records are kept in our own buffer until
 * the commit succeeds, so MDB_MAP_FULL (from a put or the commit) is
 * handled by aborting, doubling the map and replaying the batch. The user
 * never chooses a map size.
 *
 * MDB_WRITEMAP: LMDB writes pages straight into the shared file mapping
 * instead of into malloc'd pages that it then write()s: one copy of every
 * byte less, which halves keep-mode packing time. Two hazards come with
 * it and are handled here:
 *  - a store into a hole of a sparse file on a full disk raises SIGBUS.
 *    Before each batch, the file's blocks are reserved with
 *    posix_fallocate for a conservative estimate of the pages the batch
 *    can touch, so a full disk is a clean IMS_EIO before any page is
 *    written;
 *  - touched pages of the mapping count as resident memory. After every
 *    REMAP_BYTES written the environment is closed and reopened, which
 *    unmaps them (the data stays in the page cache, dirty until written
 *    back, and the final fsync covers the whole file), so memory stays
 *    bounded whatever the shard size.
 * The file is truncated to its used pages when the shard is closed.
 */
#define _GNU_SOURCE
#include "recordio.h"
#include "writer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int lmdb_fail(ims_error *err, int rc, const char *what, const char *path)
{
	/* LMDB's ENOMEM (its environment, a transaction, compaction's
	 * buffers) is memory running out, as the reader takes it: it was
	 * IMS_ELMDB, "Cannot allocate memory", which Python raised as
	 * imshard.Error, not MemoryError */
	if (rc == ENOMEM)
		return ims_fail(err, IMS_ENOMEM, "cannot %s '%s': out of memory", what, path);
	int code = IMS_ELMDB;
	if (rc == ENOSPC || rc == EIO || rc == EACCES || rc == EROFS ||
	    rc == EDQUOT || rc == ENOENT)
		code = IMS_EIO;
	return ims_fail(err, code, "cannot %s '%s': %s", what, path,
			mdb_strerror(rc));
}

static int reserve_space(rio_writer *w, ims_error *err);

/* Opens (fresh: creates) the working file's environment and its database. */
static int open_env(rio_writer *w, int fresh, ims_error *err)
{
	if (fresh) {
		unlink(w->shard.work_path);
		w->shard.reserved = 0;
	}
	w->shard.since_remap = 0;
	int rc = mdb_env_create(&w->shard.env);
	if (rc)
		return lmdb_fail(err, rc, "create LMDB environment for",
				 w->shard.work_path);
	rc = mdb_env_set_mapsize(w->shard.env, (size_t)w->shard.map_size);
	if (!rc)
		rc = mdb_env_open(w->shard.env, w->shard.work_path,
				  MDB_NOSUBDIR | MDB_NOSYNC | MDB_NOLOCK | MDB_WRITEMAP, 0644);
	if (!rc) {
		MDB_stat st;
		rc = mdb_env_stat(w->shard.env, &st);
		if (!rc)
			w->shard.psize = st.ms_psize;
	}
	if (!rc && fresh) {
		/* Blocks for the first pages before anything goes through the
		 * map (see reserve_space). */
		int r = reserve_space(w, err);
		if (r < 0) {
			mdb_env_close(w->shard.env);
			w->shard.env = NULL;
			unlink(w->shard.work_path);
			return r;
		}
	}
	MDB_txn *txn = NULL;
	if (!rc)
		rc = mdb_txn_begin(w->shard.env, NULL, 0, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, NULL, 0, &w->shard.dbi);
	if (!rc) {
		rc = mdb_txn_commit(txn);
		txn = NULL;
	}
	if (rc) {
		if (txn)
			mdb_txn_abort(txn);
		mdb_env_close(w->shard.env);
		w->shard.env = NULL;
		unlink(w->shard.work_path);
		return lmdb_fail(err, rc, "create shard", w->shard.work_path);
	}
	return 0;
}

int rio_writer_open_shard(rio_writer *w, ims_error *err)
{
	size_t idx = w->written.n_shards;
	free(w->shard.work_path);
	w->shard.work_path = rio_xasprintf("%s/%s-%05zu.mdb.partial", w->dir, w->name, idx);
	RETURN_IF(!w->shard.work_path, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", w->dir, w->name);
	RETURN_IF(idx > 99999, err, IMS_ELIMIT,
		  "cannot start shard %zu of '%s': at most 100000 shards (use a larger --shard-size)",
		  idx, w->name);
	FORWARD_IF_ERR(open_env(w, 1, err));
	w->shard.first = w->written.count;
	w->shard.records = 0;
	w->shard.bytes = 0;
	rio_digest_begin(&w->shard.digest, w->name, idx);
	return 0;
}

static int grow_map(rio_shard_state *s, ims_error *err)
{
	uint64_t next = s->map_size * 2;
	int rc = mdb_env_set_mapsize(s->env, (size_t)next);
	if (rc)
		return lmdb_fail(err, rc, "grow the map of", s->work_path);
	s->map_size = next;
	return 0;
}


/*
 * Reserves disk blocks for every page the pending batch can touch: pages
 * up to the last used one, plus the batch's overflow pages, plus leaf and
 * branch pages copied on write, with a generous margin. Pages reused from
 * the freelist lie below the last used page, so they are covered too.
 */
static int reserve_space(rio_writer *w, ims_error *err)
{
	MDB_envinfo info;
	int rc = mdb_env_info(w->shard.env, &info);
	if (rc)
		return lmdb_fail(err, rc, "inspect", w->shard.work_path);
	uint64_t pages = (uint64_t)info.me_last_pgno + 1 + w->batch.pages +
			 w->batch.n / 64 + 256;
	uint64_t want = pages * w->shard.psize;
	want = (want + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	while (want > w->shard.map_size)
		FORWARD_IF_ERR(grow_map(&w->shard, err));
	if (want <= w->shard.reserved)
		return 0;
	int fd;
	rc = mdb_env_get_fd(w->shard.env, &fd);
	if (rc)
		return lmdb_fail(err, rc, "inspect", w->shard.work_path);
	rc = posix_fallocate(fd, (off_t)w->shard.reserved,
			     (off_t)(want - w->shard.reserved));
	if (rc)
		return ims_fail(err, IMS_EIO, "cannot write shard '%s': %s", w->shard.work_path,
				strerror(rc));
	w->shard.reserved = want;
	return 0;
}

/* Written pages stay mapped, and so count as our memory, until the map
 * goes: reopen the environment every REMAP_BYTES. */
#define REMAP_BYTES (32u << 20)

static int maybe_remap(rio_writer *w, ims_error *err)
{
	if (w->shard.since_remap < REMAP_BYTES)
		return 0;
	mdb_env_close(w->shard.env);
	w->shard.env = NULL;
	return open_env(w, 0, err);
}

/* Writes the pending batch in one transaction, growing the map and
 * replaying as often as MDB_MAP_FULL demands. */
int rio_writer_flush_batch(rio_writer *w, ims_error *err)
{
	if (w->batch.n == 0)
		return 0;
	FORWARD_IF_ERR(reserve_space(w, err));
	for (;;) {
		MDB_txn *txn;
		int rc = mdb_txn_begin(w->shard.env, NULL, 0, &txn);
		if (rc)
			return lmdb_fail(err, rc, "begin a write transaction in",
					 w->shard.work_path);
		size_t off = 0;
		for (size_t i = 0; i < w->batch.n && !rc; i++) {
			uint8_t kb[RIO_KEY_SIZE];
			uint64_t k = w->batch.first + i;
			for (int b = 0; b < 8; b++)
				kb[b] = (uint8_t)(k >> (56 - 8 * b));
			MDB_val key = {RIO_KEY_SIZE, kb};
			MDB_val val = {w->batch.val_len[i], w->batch.buf + off};
			rc = mdb_put(txn, w->shard.dbi, &key, &val, MDB_APPEND);
			off += w->batch.val_len[i];
		}
		if (rc) {
			mdb_txn_abort(txn);
		} else {
			rc = mdb_txn_commit(txn);
		}
		if (rc == MDB_MAP_FULL) {
			FORWARD_IF_ERR(grow_map(&w->shard, err));
			continue;
		}
		if (rc)
			return lmdb_fail(err, rc, "write records to", w->shard.work_path);
		break;
	}
	w->shard.since_remap += w->batch.buf_len;
	w->batch.n = 0;
	w->batch.pages = 0;
	w->batch.buf_len = 0;
	return maybe_remap(w, err);
}

static int fsync_path(const char *path, ims_error *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	RETURN_IF(fd < 0, err, IMS_EIO, "cannot open '%s': %s", path,
		  strerror(errno));
	int rc = 0;
	if (fsync(fd) != 0)
		rc = ims_fail(err, IMS_EIO, "cannot sync '%s': %s", path,
			      strerror(errno));
	close(fd);
	return rc;
}

/*
 * Pages on the shard's freelist versus pages in the file. Append-only
 * writing frees only the few branch and meta pages each transaction
 * copies, so a finished shard is normally compact already.
 */
static int free_pages(const rio_shard_state *s, size_t *free_out, size_t *total_out)
{
	MDB_envinfo info;
	int rc = mdb_env_info(s->env, &info);
	if (rc)
		return rc;
	*total_out = info.me_last_pgno + 1;
	*free_out = 0;
	MDB_txn *txn;
	rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return rc;
	MDB_cursor *cur;
	rc = mdb_cursor_open(txn, 0 /* FREE_DBI */, &cur);
	if (!rc) {
		MDB_val k, v;
		/* Each freelist value is a page list whose first word is its
		 * length (LMDB's IDL layout). */
		while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0)
			if (v.mv_size >= sizeof(size_t))
				*free_out += *(const size_t *)v.mv_data;
		if (rc == MDB_NOTFOUND)
			rc = 0;
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(txn);
	return rc;
}

/*
 * Flushes and syncs the open shard and leaves it as its .compact file:
 * copied with MDB_CP_COMPACT when more than 1% of it is free pages,
 * renamed as it is otherwise (a copy would only double the disk writes).
 */
int rio_writer_close_shard(rio_writer *w, ims_error *err)
{
	if (!w->shard.env)
		return 0;
	FORWARD_IF_ERR(rio_writer_flush_batch(w, err));
	/* Room for the finished shard first: the abort removes the files
	 * named in w->written, so a .compact file made before a failed grow
	 * would be left behind, untracked. */
	if (w->written.n_shards == w->written.shards_cap) {
		size_t cap = w->written.shards_cap ? w->written.shards_cap * 2 : 8;
		done_shard *d = realloc(w->written.shards, cap * sizeof(*d));
		RETURN_IF(!d, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", w->dir, w->name);
		w->written.shards = d;
		w->written.shards_cap = cap;
	}
	char *compact = rio_xasprintf("%s/%s-%05zu.mdb.compact", w->dir, w->name,
				  w->written.n_shards);
	RETURN_IF(!compact, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", w->dir, w->name);
	unlink(compact);
	size_t nfree = 0, total = 0;
	int rc = mdb_env_sync(w->shard.env, 1);
	if (!rc)
		rc = free_pages(&w->shard, &nfree, &total);
	int copy = !rc && nfree * 100 > total;
	if (copy)
		rc = mdb_env_copy2(w->shard.env, compact, MDB_CP_COMPACT);
	if (rc) {
		unlink(compact);
		free(compact);
		return lmdb_fail(err, rc, "compact shard", w->shard.work_path);
	}
	mdb_env_close(w->shard.env);
	w->shard.env = NULL;
	if (copy) {
		if (fsync_path(compact, err) < 0) {
			/* not in w->written yet: the abort would not know it */
			unlink(compact);
			free(compact);
			return err ? err->code : IMS_EIO;
		}
		unlink(w->shard.work_path);
	} else {
		/* The map and our reservation run past the last page; readers
		 * never look there. */
		if (truncate(w->shard.work_path, (off_t)(total * w->shard.psize)) != 0 ||
		    fsync_path(w->shard.work_path, err) < 0 ||
		    rename(w->shard.work_path, compact) != 0) {
			int e = errno;
			free(compact);
			return ims_fail(err, IMS_EIO, "cannot finish shard '%s': %s",
					w->shard.work_path, strerror(e));
		}
	}
	w->written.shards[w->written.n_shards++] = (done_shard){
		compact, w->shard.first, w->shard.records,
		rio_digest_value(&w->shard.digest)};
	return 0;
}
