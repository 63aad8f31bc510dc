/*
 * writer.c - appends records to LMDB shards and publishes a split.
 *
 * Life of a shard: records go to NAME-SSSSS.mdb.partial (MDB_NOSYNC,
 * MDB_NOLOCK: one writer, guarded by NAME.lock), batched into write
 * transactions of about txn_bytes. A full shard is synced and becomes
 * NAME-SSSSS.mdb.compact: compacted by a copy when its freelist is worth
 * reclaiming, renamed otherwise. Only
 * rio_writer_finish, once every shard is durable, renames them to
 * NAME-SSSSS-of-NNNNN.mdb (N is known only then) and writes NAME.json.
 * A crash at any point leaves no manifest, and the next open removes the
 * leftovers.
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

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MAP_SIZE (1ull << 30)
#define DEFAULT_TXN_BYTES (8ull << 20)

typedef struct done_shard {
	char *path; /* the .compact file */
	uint64_t first, records;
	uint64_t digest;
} done_shard;

struct rio_writer {
	char *dir, *name;
	char *created_dir; /* outermost folder open made, removed on abort */
	uint64_t shard_bytes_max;
	uint64_t txn_bytes;
	int force;
	int lock_fd;
	char *lock_path;
	int order; /* RIO_ORDER_*, for the manifest */

	/* Current shard; env is NULL between shards. */
	MDB_env *env;
	MDB_dbi dbi;
	uint64_t map_size;
	char *work_path;
	uint64_t shard_first, shard_records, shard_bytes;
	rio_digest shard_digest;

	/* Records of the open transaction batch, concatenated. */
	uint8_t *buf;
	size_t buf_len, buf_cap;
	size_t *val_len;
	size_t n_pending, pending_cap;
	uint64_t pending_pages; /* overflow pages the batch needs, at most */
	uint64_t reserved;      /* bytes of the working file fallocated */
	uint64_t since_remap;   /* bytes committed since the map was last opened */
	uint64_t psize;         /* LMDB's page size: the OS page size (4 KiB on
				   x86-64, up to 64 KiB elsewhere) */
	uint64_t pending_first;

	uint64_t count;
	int n_extra; /* -1 until the first record fixes it */
	uint64_t *class_counts;
	size_t n_counts;

	done_shard *done;
	size_t n_done, done_cap;
};

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static int lmdb_fail(ims_error *err, int rc, const char *what, const char *path)
{
	int code = IMS_ELMDB;
	if (rc == ENOSPC || rc == EIO || rc == EACCES || rc == EROFS ||
	    rc == EDQUOT || rc == ENOENT)
		code = IMS_EIO;
	return ims_fail(err, code, "cannot %s '%s': %s", what, path,
			mdb_strerror(rc));
}

/* Is fname one of our files for split `name`: a working or compacted shard
 * (kind 0) or a final shard NAME-DDDDD-of-DDDDD.mdb (kind 1)? */
static int is_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

static int classify(const char *fname, const char *name)
{
	size_t nl = strlen(name);
	if (strncmp(fname, name, nl) != 0 || fname[nl] != '-')
		return -1;
	const char *rest = fname + nl + 1;
	size_t rl = strlen(rest);
	/* SSSSS then ".mdb.partial" or ".mdb.compact", 12 characters each */
	if (rl == 5 + 12 && is_digits(rest, 5) &&
	    (strcmp(rest + 5, ".mdb.partial") == 0 || strcmp(rest + 5, ".mdb.compact") == 0))
		return 0;
	if (rl == 5 + 4 + 5 + 4 && is_digits(rest, 5) &&
	    strncmp(rest + 5, "-of-", 4) == 0 && is_digits(rest + 9, 5) &&
	    strcmp(rest + 14, ".mdb") == 0)
		return 1;
	return -1;
}

/* Removes our working files and, when finals is set, final shards too. */
static int remove_leftovers(const char *dir, const char *name, int finals,
			    ims_error *err)
{
	ims_dir_listing ls = {0};
	int rc = ims_dir_list(dir, IMS_DIR_HIDDEN, &ls, err);
	for (size_t i = 0; i < ls.n && rc == 0; i++) {
		int k = classify(ls.e[i].name, name);
		if (k < 0 || (k == 1 && !finals))
			continue;
		char path[4096];
		if (ims_path_join(path, sizeof(path), dir, ls.e[i].name, err) < 0) {
			rc = IMS_EINVAL;
			break;
		}
		if (unlink(path) != 0 && errno != ENOENT) {
			rc = ims_fail(err, IMS_EIO, "cannot remove stale file '%s': %s",
				      path, strerror(errno));
			break;
		}
	}
	ims_dir_listing_release(&ls);
	return rc;
}

/* Takes split dir/name's lock file lock_path; its descriptor in *fd. */
static int lock_split(const char *dir, const char *name, const char *lock_path,
		      int *fd_out, ims_error *err)
{
	for (int tries = 0; tries < 10; tries++) {
		/* O_NOFOLLOW: never create or lock a file a link points to */
		int fd = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
		RETURN_IF(fd < 0, err, IMS_EIO, "cannot create lock file '%s': %s",
			  lock_path, strerror(errno));
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			int e = errno;
			close(fd);
			if (e == EWOULDBLOCK)
				return ims_fail(err, IMS_EEXIST,
						"cannot write split '%s/%s': another process is writing it (lock '%s')",
						dir, name, lock_path);
			return ims_fail(err, IMS_EIO, "cannot lock '%s': %s",
					lock_path, strerror(e));
		}
		/* The previous holder may have unlinked the file after we
		 * opened it; only a lock on the file still at the path counts. */
		struct stat a, b;
		if (fstat(fd, &a) == 0 && stat(lock_path, &b) == 0 &&
		    a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
			*fd_out = fd;
			return 0;
		}
		close(fd);
	}
	return ims_fail(err, IMS_EIO, "cannot lock '%s': it keeps being replaced",
			lock_path);
}

static int take_lock(rio_writer *w, ims_error *err)
{
	return lock_split(w->dir, w->name, w->lock_path, &w->lock_fd, err);
}

static void release_lock(rio_writer *w)
{
	if (w->lock_fd >= 0) {
		unlink(w->lock_path);
		close(w->lock_fd);
		w->lock_fd = -1;
	}
}

struct rio_lock {
	int fd;
	char *path;
};

int rio_lock_take(const char *dir, const char *name, rio_lock **out,
		  ims_error *err)
{
	*out = NULL;
	RETURN_IF(!dir || !rio_split_name_ok(name), err, IMS_EINVAL,
		  "cannot lock a split: bad folder or name");
	rio_lock *l = calloc(1, sizeof(*l));
	RETURN_IF(!l, err, IMS_ENOMEM, "out of memory");
	l->fd = -1;
	l->path = xasprintf("%s/%s.lock", dir[0] ? dir : ".", name);
	int rc = l->path ? lock_split(dir, name, l->path, &l->fd, err) :
			   ims_fail(err, IMS_ENOMEM, "out of memory");
	if (rc < 0) {
		free(l->path);
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

void rio_lock_release(rio_lock *l)
{
	if (!l)
		return;
	unlink(l->path);
	close(l->fd);
	free(l->path);
	free(l);
}

static int reserve_space(rio_writer *w, ims_error *err);

/* Opens (fresh: creates) the working file's environment and its database. */
static int open_env(rio_writer *w, int fresh, ims_error *err)
{
	if (fresh) {
		unlink(w->work_path);
		w->reserved = 0;
	}
	w->since_remap = 0;
	int rc = mdb_env_create(&w->env);
	if (rc)
		return lmdb_fail(err, rc, "create LMDB environment for", w->work_path);
	rc = mdb_env_set_mapsize(w->env, (size_t)w->map_size);
	if (!rc)
		rc = mdb_env_open(w->env, w->work_path,
				  MDB_NOSUBDIR | MDB_NOSYNC | MDB_NOLOCK | MDB_WRITEMAP, 0644);
	if (!rc) {
		MDB_stat st;
		rc = mdb_env_stat(w->env, &st);
		if (!rc)
			w->psize = st.ms_psize;
	}
	if (!rc && fresh) {
		/* Blocks for the first pages before anything goes through the
		 * map (see reserve_space). */
		int r = reserve_space(w, err);
		if (r < 0) {
			mdb_env_close(w->env);
			w->env = NULL;
			unlink(w->work_path);
			return r;
		}
	}
	MDB_txn *txn = NULL;
	if (!rc)
		rc = mdb_txn_begin(w->env, NULL, 0, &txn);
	if (!rc)
		rc = mdb_dbi_open(txn, NULL, 0, &w->dbi);
	if (!rc) {
		rc = mdb_txn_commit(txn);
		txn = NULL;
	}
	if (rc) {
		if (txn)
			mdb_txn_abort(txn);
		mdb_env_close(w->env);
		w->env = NULL;
		unlink(w->work_path);
		return lmdb_fail(err, rc, "create shard", w->work_path);
	}
	return 0;
}

static int open_shard(rio_writer *w, ims_error *err)
{
	size_t idx = w->n_done;
	free(w->work_path);
	w->work_path = xasprintf("%s/%s-%05zu.mdb.partial", w->dir, w->name, idx);
	RETURN_IF(!w->work_path, err, IMS_ENOMEM, "out of memory");
	RETURN_IF(idx > 99999, err, IMS_ELIMIT,
		  "cannot start shard %zu of '%s': at most 100000 shards (use a larger --shard-size)",
		  idx, w->name);
	FORWARD_IF_ERR(open_env(w, 1, err));
	w->shard_first = w->count;
	w->shard_records = 0;
	w->shard_bytes = 0;
	rio_digest_begin(&w->shard_digest, w->name, idx);
	return 0;
}

static int grow_map(rio_writer *w, ims_error *err)
{
	uint64_t next = w->map_size * 2;
	int rc = mdb_env_set_mapsize(w->env, (size_t)next);
	if (rc)
		return lmdb_fail(err, rc, "grow the map of", w->work_path);
	w->map_size = next;
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
	int rc = mdb_env_info(w->env, &info);
	if (rc)
		return lmdb_fail(err, rc, "inspect", w->work_path);
	uint64_t pages = (uint64_t)info.me_last_pgno + 1 + w->pending_pages +
			 w->n_pending / 64 + 256;
	uint64_t want = pages * w->psize;
	want = (want + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	while (want > w->map_size)
		FORWARD_IF_ERR(grow_map(w, err));
	if (want <= w->reserved)
		return 0;
	int fd;
	rc = mdb_env_get_fd(w->env, &fd);
	if (rc)
		return lmdb_fail(err, rc, "inspect", w->work_path);
	rc = posix_fallocate(fd, (off_t)w->reserved, (off_t)(want - w->reserved));
	if (rc)
		return ims_fail(err, IMS_EIO, "cannot write shard '%s': %s", w->work_path,
				strerror(rc));
	w->reserved = want;
	return 0;
}

/* Written pages stay mapped, and so count as our memory, until the map
 * goes: reopen the environment every REMAP_BYTES. */
#define REMAP_BYTES (32u << 20)

static int maybe_remap(rio_writer *w, ims_error *err)
{
	if (w->since_remap < REMAP_BYTES)
		return 0;
	mdb_env_close(w->env);
	w->env = NULL;
	return open_env(w, 0, err);
}

/* Writes the pending batch in one transaction, growing the map and
 * replaying as often as MDB_MAP_FULL demands. */
static int flush_batch(rio_writer *w, ims_error *err)
{
	if (w->n_pending == 0)
		return 0;
	FORWARD_IF_ERR(reserve_space(w, err));
	for (;;) {
		MDB_txn *txn;
		int rc = mdb_txn_begin(w->env, NULL, 0, &txn);
		if (rc)
			return lmdb_fail(err, rc, "begin a write transaction in",
					 w->work_path);
		size_t off = 0;
		for (size_t i = 0; i < w->n_pending && !rc; i++) {
			uint8_t kb[RIO_KEY_SIZE];
			uint64_t k = w->pending_first + i;
			for (int b = 0; b < 8; b++)
				kb[b] = (uint8_t)(k >> (56 - 8 * b));
			MDB_val key = {RIO_KEY_SIZE, kb};
			MDB_val val = {w->val_len[i], w->buf + off};
			rc = mdb_put(txn, w->dbi, &key, &val, MDB_APPEND);
			off += w->val_len[i];
		}
		if (rc) {
			mdb_txn_abort(txn);
		} else {
			rc = mdb_txn_commit(txn);
		}
		if (rc == MDB_MAP_FULL) {
			FORWARD_IF_ERR(grow_map(w, err));
			continue;
		}
		if (rc)
			return lmdb_fail(err, rc, "write records to", w->work_path);
		break;
	}
	w->since_remap += w->buf_len;
	w->n_pending = 0;
	w->pending_pages = 0;
	w->buf_len = 0;
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
static int free_pages(rio_writer *w, size_t *free_out, size_t *total_out)
{
	MDB_envinfo info;
	int rc = mdb_env_info(w->env, &info);
	if (rc)
		return rc;
	*total_out = info.me_last_pgno + 1;
	*free_out = 0;
	MDB_txn *txn;
	rc = mdb_txn_begin(w->env, NULL, MDB_RDONLY, &txn);
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
static int close_shard(rio_writer *w, ims_error *err)
{
	if (!w->env)
		return 0;
	FORWARD_IF_ERR(flush_batch(w, err));
	char *compact = xasprintf("%s/%s-%05zu.mdb.compact", w->dir, w->name,
				  w->n_done);
	RETURN_IF(!compact, err, IMS_ENOMEM, "out of memory");
	unlink(compact);
	size_t nfree = 0, total = 0;
	int rc = mdb_env_sync(w->env, 1);
	if (!rc)
		rc = free_pages(w, &nfree, &total);
	int copy = !rc && nfree * 100 > total;
	if (copy)
		rc = mdb_env_copy2(w->env, compact, MDB_CP_COMPACT);
	if (rc) {
		unlink(compact);
		free(compact);
		return lmdb_fail(err, rc, "compact shard", w->work_path);
	}
	mdb_env_close(w->env);
	w->env = NULL;
	if (copy) {
		if (fsync_path(compact, err) < 0) {
			free(compact);
			return err ? err->code : IMS_EIO;
		}
		unlink(w->work_path);
	} else {
		/* The map and our reservation run past the last page; readers
		 * never look there. */
		if (truncate(w->work_path, (off_t)(total * w->psize)) != 0 ||
		    fsync_path(w->work_path, err) < 0 ||
		    rename(w->work_path, compact) != 0) {
			int e = errno;
			free(compact);
			return ims_fail(err, IMS_EIO, "cannot finish shard '%s': %s",
					w->work_path, strerror(e));
		}
	}
	if (w->n_done == w->done_cap) {
		size_t cap = w->done_cap ? w->done_cap * 2 : 8;
		done_shard *d = realloc(w->done, cap * sizeof(*d));
		if (!d) {
			free(compact);
			return ims_fail(err, IMS_ENOMEM, "out of memory");
		}
		w->done = d;
		w->done_cap = cap;
	}
	w->done[w->n_done++] = (done_shard){compact, w->shard_first,
					     w->shard_records,
					     rio_digest_value(&w->shard_digest)};
	return 0;
}

int rio_writer_open(const rio_writer_opts *o, rio_writer **out, ims_error *err)
{
	*out = NULL;
	RETURN_IF(!o || !o->dir || !o->name || !o->name[0], err, IMS_EINVAL,
		  "cannot open writer: output folder and name are required");
	RETURN_IF(!rio_split_name_ok(o->name), err, IMS_EINVAL,
		  "split name '%s' is not a plain name (a file name: no '/', not '.' or '..')",
		  o->name);
	rio_writer *w = calloc(1, sizeof(*w));
	RETURN_IF(!w, err, IMS_ENOMEM, "out of memory");
	w->lock_fd = -1;
	w->n_extra = -1;
	w->dir = strdup(o->dir[0] ? o->dir : ".");
	w->name = strdup(o->name);
	w->shard_bytes_max = o->shard_bytes;
	w->txn_bytes = o->txn_bytes ? o->txn_bytes : DEFAULT_TXN_BYTES;
	w->map_size = o->initial_map_size ? o->initial_map_size : DEFAULT_MAP_SIZE;
	w->force = o->force;
	int rc = 0;
	if (!w->dir || !w->name)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "out of memory");
	GOTO_IF_ERR(fail, rc, ims_mkdir_p_created(w->dir, &w->created_dir, err));
	if (access(w->dir, W_OK) != 0)
		GOTO_FAIL(fail, rc, err, IMS_EIO, "cannot write to folder '%s': %s",
			  w->dir, strerror(errno));
	w->lock_path = xasprintf("%s/%s.lock", w->dir, w->name);
	if (!w->lock_path)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "out of memory");
	GOTO_IF_ERR(fail, rc, take_lock(w, err));

	char manifest[4096];
	GOTO_IF_ERR(fail, rc, ims_path_join(manifest, sizeof(manifest), w->dir, w->name, err));
	strncat(manifest, ".json", sizeof(manifest) - strlen(manifest) - 1);
	int exists = access(manifest, F_OK) == 0;
	if (exists && !w->force)
		GOTO_FAIL(fail, rc, err, IMS_EEXIST,
			  "split '%s' already exists; use --force to replace it",
			  manifest);
	/* Without a manifest, final-named shards are an interrupted run's. */
	GOTO_IF_ERR(fail, rc, remove_leftovers(w->dir, w->name, !exists, err));
	*out = w;
	return 0;
fail:
	rio_writer_abort(w);
	return rc;
}

void rio_writer_set_order(rio_writer *w, int order)
{
	w->order = order;
}

uint64_t rio_writer_count(const rio_writer *w)
{
	return w->count;
}

int rio_writer_new_shard(rio_writer *w, ims_error *err)
{
	if (!w->env || w->shard_records == 0)
		return 0;
	return close_shard(w, err);
}

static int count_label(rio_writer *w, int32_t label, ims_error *err)
{
	size_t l = (size_t)label;
	if (l >= w->n_counts) {
		size_t n = w->n_counts ? w->n_counts : 16;
		while (n <= l)
			n *= 2;
		uint64_t *c = realloc(w->class_counts, n * sizeof(*c));
		RETURN_IF(!c, err, IMS_ENOMEM, "out of memory");
		memset(c + w->n_counts, 0, (n - w->n_counts) * sizeof(*c));
		w->class_counts = c;
		w->n_counts = n;
	}
	w->class_counts[l]++;
	return 0;
}

int rio_writer_add(rio_writer *w, const rio_record *rec, ims_error *err)
{
	RETURN_IF(rec->label > 100000000, err, IMS_EINVAL,
		  "label %d is implausibly large (more than 100 million classes)",
		  (int)rec->label);
	if (w->n_extra < 0)
		w->n_extra = rec->n_extra;
	RETURN_IF(rec->n_extra != w->n_extra, err, IMS_EINVAL,
		  "record %llu has %u extra labels, earlier records have %d",
		  (unsigned long long)w->count, rec->n_extra, w->n_extra);
	size_t hlen = rio_header_size(rec->n_extra);
	size_t vlen = hlen + rec->payload_len;
	if (w->env && w->shard_bytes_max && w->shard_records > 0 &&
	    w->shard_bytes + vlen > w->shard_bytes_max)
		FORWARD_IF_ERR(close_shard(w, err));
	if (!w->env)
		FORWARD_IF_ERR(open_shard(w, err));
	if (w->buf_len + vlen > w->buf_cap) {
		size_t cap = w->buf_cap ? w->buf_cap : (1u << 20);
		while (cap < w->buf_len + vlen)
			cap *= 2;
		uint8_t *b = realloc(w->buf, cap);
		RETURN_IF(!b, err, IMS_ENOMEM, "out of memory");
		w->buf = b;
		w->buf_cap = cap;
	}
	if (w->n_pending == w->pending_cap) {
		size_t cap = w->pending_cap ? w->pending_cap * 2 : 256;
		size_t *l = realloc(w->val_len, cap * sizeof(*l));
		RETURN_IF(!l, err, IMS_ENOMEM, "out of memory");
		w->val_len = l;
		w->pending_cap = cap;
	}
	uint8_t *dst = w->buf + w->buf_len;
	int h = rio_header_encode(rec, dst, err);
	if (h < 0)
		return ims_fail_context(err, "cannot write record %llu",
					(unsigned long long)w->count);
	memcpy(dst + hlen, rec->payload, rec->payload_len);
	FORWARD_IF_ERR(count_label(w, rec->label, err));
	if (w->n_pending == 0)
		w->pending_first = w->count;
	w->val_len[w->n_pending++] = vlen;
	/* An overflow value takes ceil((16-byte page header + value) / page). */
	w->pending_pages += (vlen + 16 + w->psize - 1) / w->psize;
	w->buf_len += vlen;
	rio_digest_add(&w->shard_digest, w->count, dst, hlen);
	w->shard_records++;
	w->shard_bytes += vlen;
	w->count++;
	if (w->buf_len >= w->txn_bytes)
		FORWARD_IF_ERR(flush_batch(w, err));
	return 0;
}

static void free_writer(rio_writer *w)
{
	if (w->env) {
		mdb_env_close(w->env);
		w->env = NULL;
	}
	release_lock(w);
	for (size_t i = 0; i < w->n_done; i++)
		free(w->done[i].path);
	free(w->done);
	free(w->buf);
	free(w->val_len);
	free(w->class_counts);
	free(w->work_path);
	free(w->lock_path);
	free(w->dir);
	free(w->created_dir);
	free(w->name);
	free(w);
}

void rio_writer_abort(rio_writer *w)
{
	if (!w)
		return;
	if (w->env) {
		mdb_env_close(w->env);
		w->env = NULL;
	}
	if (w->work_path)
		unlink(w->work_path);
	for (size_t i = 0; i < w->n_done; i++)
		unlink(w->done[i].path);
	release_lock(w);
	/* Folders this writer made go too, when nothing else is in them. */
	ims_rmdir_created(w->dir, w->created_dir);
	free_writer(w);
}

static void utc_now(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int rio_writer_finish(rio_writer *w, const rio_writer_meta *meta,
		      char **manifest_path, ims_error *err)
{
	int rc = 0;
	rio_manifest m;
	memset(&m, 0, sizeof(m));
	rio_manifest old;
	memset(&old, 0, sizeof(old));
	char **finals = NULL;
	size_t renamed = 0; /* shards given their final names */
	char manifest[4096];
	if (manifest_path)
		*manifest_path = NULL;

	if ((meta->errors_tmp != NULL) != (meta->errors_file != NULL) ||
	    (meta->errors_file && (!meta->errors_file[0] || strchr(meta->errors_file, '/'))))
		GOTO_FAIL(out, rc, err, IMS_EINVAL,
			  "an errors file needs both a plain file name and its temporary");
	/* Labels must name classes the manifest lists. */
	size_t n_classes = meta->n_classes;
	for (size_t l = n_classes; l < w->n_counts; l++)
		if (w->class_counts[l])
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "label %zu has no class name (%zu classes given)", l,
				  n_classes);

	/* An empty split still gets one (empty) shard so readers need no
	 * special case. */
	if (!w->env && w->n_done == 0)
		GOTO_IF_ERR(out, rc, open_shard(w, err));
	GOTO_IF_ERR(out, rc, close_shard(w, err));

	GOTO_IF_ERR(out, rc, ims_path_join(manifest, sizeof(manifest), w->dir, w->name, err));
	strncat(manifest, ".json", sizeof(manifest) - strlen(manifest) - 1);

	/* Replacing: the old split stops existing before any shard of it is
	 * touched, so a crash in between leaves no manifest over mixed
	 * shards. */
	if (access(manifest, F_OK) == 0) {
		ims_error ignore;
		if (rio_manifest_load(manifest, &old, &ignore) < 0)
			memset(&old, 0, sizeof(old));
		if (unlink(manifest) != 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot remove old manifest '%s': %s",
				  manifest, strerror(errno));
		GOTO_IF_ERR(out, rc, ims_fsync_parent(manifest, err));
	}

	m.format_version = RIO_MANIFEST_VERSION;
	m.name = strdup(w->name);
	m.encoding = strdup(meta->encoding ? meta->encoding : "keep");
	m.records = w->count;
	m.n_extra_labels = w->n_extra < 0 ? 0 : (unsigned)w->n_extra;
	m.skipped = meta->skipped;
	m.order = w->order;
	m.errors_file = meta->errors_file ? strdup(meta->errors_file) : NULL;
	m.created_by = strdup("imshard " IMS_VERSION_STRING);
	char when[32];
	utc_now(when, sizeof(when));
	m.created_at = strdup(when);
	m.options_json = meta->options_json ? strdup(meta->options_json) : NULL;
	m.classes = calloc(n_classes ? n_classes : 1, sizeof(char *));
	m.class_counts = calloc(n_classes ? n_classes : 1, sizeof(uint64_t));
	m.shards = calloc(w->n_done, sizeof(*m.shards));
	finals = calloc(w->n_done, sizeof(char *));
	if (!m.name || !m.encoding || !m.created_by || !m.created_at ||
	    !m.classes || !m.class_counts || !m.shards || !finals)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "out of memory");
	m.n_classes = n_classes;
	for (size_t i = 0; i < n_classes; i++) {
		m.classes[i] = strdup(meta->classes[i]);
		if (!m.classes[i])
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "out of memory");
		m.class_counts[i] = i < w->n_counts ? w->class_counts[i] : 0;
	}
	m.n_shards = w->n_done;
	for (size_t i = 0; i < w->n_done; i++) {
		rio_shard_info *s = &m.shards[i];
		s->file = xasprintf("%s-%05zu-of-%05zu.mdb", w->name, i, w->n_done);
		finals[i] = xasprintf("%s/%s", w->dir, s->file ? s->file : "");
		if (!s->file || !finals[i])
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "out of memory");
		if (rename(w->done[i].path, finals[i]) != 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot rename '%s' to '%s': %s",
				  w->done[i].path, finals[i], strerror(errno));
		renamed = i + 1;
		struct stat st;
		if (stat(finals[i], &st) != 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot stat '%s': %s",
				  finals[i], strerror(errno));
		s->first = w->done[i].first;
		s->records = w->done[i].records;
		s->bytes = (uint64_t)st.st_size;
		s->digest = w->done[i].digest;
	}
	/* Shards of the replaced split that the new one did not overwrite. */
	for (size_t i = 0; i < old.n_shards; i++) {
		int kept = 0;
		for (size_t j = 0; j < m.n_shards; j++)
			kept |= strcmp(old.shards[i].file, m.shards[j].file) == 0;
		if (!kept && classify(old.shards[i].file, w->name) == 1) {
			char p[4096];
			if (ims_path_join(p, sizeof(p), w->dir, old.shards[i].file, NULL) == 0)
				unlink(p);
		}
	}
	/* The errors file belongs to the split it describes: published with
	 * it, after the old manifest is gone, so that a run failing earlier
	 * leaves the replaced split's own file as it was. */
	if (meta->errors_tmp) {
		char errs[4096];
		GOTO_IF_ERR(out, rc, ims_path_join(errs, sizeof(errs), w->dir,
						   meta->errors_file, err));
		if (rename(meta->errors_tmp, errs) != 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot rename '%s' to '%s': %s",
				  meta->errors_tmp, errs, strerror(errno));
	} else {
		char *errs = xasprintf("%s/%s.errors.tsv", w->dir, w->name);
		if (!errs)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "out of memory");
		if (unlink(errs) != 0 && errno != ENOENT)
			rc = ims_fail(err, IMS_EIO, "cannot remove old errors file '%s': %s",
				      errs, strerror(errno));
		free(errs);
		if (rc < 0)
			goto out;
	}
	GOTO_IF_ERR(out, rc, ims_fsync_parent(manifest, err));
	GOTO_IF_ERR(out, rc, rio_manifest_save(manifest, &m, err));
	if (manifest_path)
		*manifest_path = strdup(manifest);
	/* Published: nothing left for abort to remove. */
	for (size_t i = 0; i < w->n_done; i++) {
		free(w->done[i].path);
		w->done[i].path = NULL;
	}
	w->n_done = 0;
out:
	/* A failure after the renames: the final-named shards are no split
	 * (no manifest), and abort knows them only by their working names. */
	for (size_t i = 0; rc < 0 && i < renamed; i++)
		unlink(finals[i]);
	if (finals)
		for (size_t i = 0; i < m.n_shards; i++)
			free(finals[i]);
	free(finals);
	rio_manifest_release(&m);
	rio_manifest_release(&old);
	if (rc < 0)
		rio_writer_abort(w);
	else
		free_writer(w);
	return rc;
}
