/*
 * writer.c - appends records to a split's shards and publishes the split.
 *
 * Life of a split: rio_writer_open takes NAME.lock and removes what an
 * interrupted run left; records go to one shard at a time
 * (writer_shard.c: NAME-SSSSS.mdb.partial, NAME-SSSSS.mdb.compact once
 * full and durable). Only rio_writer_finish, once every shard is
 * durable, renames them to NAME-SSSSS-of-NNNNN.mdb (N is known only
 * then) and writes NAME.json.
 * A crash at any point leaves no manifest, and the next open removes the
 * leftovers.
 */
#define _GNU_SOURCE
#include "recordio.h"
#include "writer_internal.h"

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

char *rio_xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static int is_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

int rio_split_file_kind(const char *fname, const char *name)
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
		int k = rio_split_file_kind(ls.e[i].name, name);
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
	return lock_split(w->dir, w->name, w->lock.path, &w->lock.fd, err);
}

static void release_lock(rio_lock *l)
{
	if (l->fd >= 0) {
		unlink(l->path);
		close(l->fd);
		l->fd = -1;
	}
}

int rio_lock_take(const char *dir, const char *name, rio_lock **out,
		  ims_error *err)
{
	*out = NULL;
	RETURN_IF(!dir || !rio_split_name_ok(name), err, IMS_EINVAL,
		  "cannot lock a split: bad folder or name");
	rio_lock *l = calloc(1, sizeof(*l));
	RETURN_IF(!l, err, IMS_ENOMEM, "cannot lock split '%s/%s': out of memory", dir, name);
	l->fd = -1;
	l->path = rio_xasprintf("%s/%s.lock", dir[0] ? dir : ".", name);
	int rc = l->path ? lock_split(dir, name, l->path, &l->fd, err) :
			   ims_fail(err, IMS_ENOMEM, "cannot lock split '%s/%s': out of memory", dir, name);
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


int rio_writer_open(const rio_writer_opts *o, rio_writer **out, ims_error *err)
{
	*out = NULL;
	RETURN_IF(!o || !o->dir || !o->name || !o->name[0], err, IMS_EINVAL,
		  "cannot open writer: output folder and name are required");
	RETURN_IF(!rio_split_name_ok(o->name), err, IMS_EINVAL,
		  "split name '%s' is not a plain name (a file name: no '/', not '.' or '..')",
		  o->name);
	rio_writer *w = calloc(1, sizeof(*w));
	RETURN_IF(!w, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", o->dir, o->name);
	w->lock.fd = -1;
	w->written.n_extra = -1;
	w->dir = strdup(o->dir[0] ? o->dir : ".");
	w->name = strdup(o->name);
	w->shard_bytes_max = o->shard_bytes;
	w->txn_bytes = o->txn_bytes ? o->txn_bytes : DEFAULT_TXN_BYTES;
	w->shard.map_size = o->initial_map_size ? o->initial_map_size : DEFAULT_MAP_SIZE;
	w->force = o->force;
	int rc = 0;
	if (!w->dir || !w->name)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", o->dir, o->name);
	GOTO_IF_ERR(fail, rc, ims_mkdir_p_created(w->dir, &w->created_dir, err));
	if (access(w->dir, W_OK) != 0)
		GOTO_FAIL(fail, rc, err, IMS_EIO, "cannot write to folder '%s': %s",
			  w->dir, strerror(errno));
	w->lock.path = rio_xasprintf("%s/%s.lock", w->dir, w->name);
	if (!w->lock.path)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", o->dir, o->name);
	GOTO_IF_ERR(fail, rc, take_lock(w, err));

	char manifest[4096];
	GOTO_IF_ERR(fail, rc, ims_path_join(manifest, sizeof(manifest), w->dir, w->name, err));
	strncat(manifest, ".json", sizeof(manifest) - strlen(manifest) - 1);
	struct stat st;
	int exists = stat(manifest, &st) == 0;
	/* Not a file: no split of ours, and nothing --force should replace. */
	if (exists && !S_ISREG(st.st_mode))
		GOTO_FAIL(fail, rc, err, IMS_EEXIST,
			  "'%s' is %s, not a split's manifest: remove it or choose another name",
			  manifest, ims_file_kind(st.st_mode));
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
	return w->written.count;
}

size_t rio_writer_shards(const rio_writer *w)
{
	/* as rio_writer_finish: the open shard is closed into one, and an
	 * empty split gets one */
	size_t n = w->written.n_shards + (w->shard.env ? 1 : 0);
	return n ? n : 1;
}

int rio_writer_new_shard(rio_writer *w, ims_error *err)
{
	if (!w->shard.env || w->shard.records == 0)
		return 0;
	return rio_writer_close_shard(w, err);
}

static int count_label(rio_writer *w, int32_t label, ims_error *err)
{
	size_t l = (size_t)label;
	if (l >= w->written.n_counts) {
		size_t n = w->written.n_counts ? w->written.n_counts : 16;
		while (n <= l)
			n *= 2;
		uint64_t *c = realloc(w->written.class_counts, n * sizeof(*c));
		RETURN_IF(!c, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", w->dir, w->name);
		memset(c + w->written.n_counts, 0,
		       (n - w->written.n_counts) * sizeof(*c));
		w->written.class_counts = c;
		w->written.n_counts = n;
	}
	w->written.class_counts[l]++;
	return 0;
}

int rio_writer_add(rio_writer *w, const rio_record *rec, ims_error *err)
{
	RETURN_IF(rec->label > 100000000, err, IMS_EINVAL,
		  "label %d is implausibly large (more than 100 million classes)",
		  (int)rec->label);
	if (w->written.n_extra < 0)
		w->written.n_extra = rec->n_extra;
	RETURN_IF(rec->n_extra != w->written.n_extra, err, IMS_EINVAL,
		  "record %llu has %u extra labels, earlier records have %d",
		  (unsigned long long)w->written.count, rec->n_extra, w->written.n_extra);
	size_t hlen = rio_header_size(rec->n_extra);
	size_t vlen = hlen + rec->payload_len;
	if (w->shard.env && w->shard_bytes_max && w->shard.records > 0 &&
	    w->shard.bytes + vlen > w->shard_bytes_max)
		FORWARD_IF_ERR(rio_writer_close_shard(w, err));
	if (!w->shard.env)
		FORWARD_IF_ERR(rio_writer_open_shard(w, err));
	if (w->batch.buf_len + vlen > w->batch.buf_cap) {
		size_t cap = w->batch.buf_cap ? w->batch.buf_cap : (1u << 20);
		while (cap < w->batch.buf_len + vlen)
			cap *= 2;
		uint8_t *b = realloc(w->batch.buf, cap);
		RETURN_IF(!b, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", w->dir, w->name);
		w->batch.buf = b;
		w->batch.buf_cap = cap;
	}
	if (w->batch.n == w->batch.val_cap) {
		size_t cap = w->batch.val_cap ? w->batch.val_cap * 2 : 256;
		size_t *l = realloc(w->batch.val_len, cap * sizeof(*l));
		RETURN_IF(!l, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", w->dir, w->name);
		w->batch.val_len = l;
		w->batch.val_cap = cap;
	}
	uint8_t *dst = w->batch.buf + w->batch.buf_len;
	int h = rio_header_encode(rec, dst, err);
	if (h < 0)
		return ims_fail_context(err, "cannot write record %llu",
					(unsigned long long)w->written.count);
	memcpy(dst + hlen, rec->payload, rec->payload_len);
	FORWARD_IF_ERR(count_label(w, rec->label, err));
	if (w->batch.n == 0)
		w->batch.first = w->written.count;
	w->batch.val_len[w->batch.n++] = vlen;
	/* An overflow value takes ceil((16-byte page header + value) / page). */
	w->batch.pages += (vlen + 16 + w->shard.psize - 1) / w->shard.psize;
	w->batch.buf_len += vlen;
	rio_digest_add(&w->shard.digest, w->written.count, dst, hlen);
	w->shard.records++;
	w->shard.bytes += vlen;
	w->written.count++;
	if (w->batch.buf_len >= w->txn_bytes)
		FORWARD_IF_ERR(rio_writer_flush_batch(w, err));
	return 0;
}

static void free_writer(rio_writer *w)
{
	if (w->shard.env) {
		mdb_env_close(w->shard.env);
		w->shard.env = NULL;
	}
	release_lock(&w->lock);
	for (size_t i = 0; i < w->written.n_shards; i++)
		free(w->written.shards[i].path);
	free(w->written.shards);
	free(w->batch.buf);
	free(w->batch.val_len);
	free(w->written.class_counts);
	free(w->shard.work_path);
	free(w->lock.path);
	free(w->dir);
	free(w->created_dir);
	free(w->name);
	free(w);
}

void rio_writer_abort(rio_writer *w)
{
	if (!w)
		return;
	if (w->shard.env) {
		mdb_env_close(w->shard.env);
		w->shard.env = NULL;
	}
	if (w->shard.work_path)
		unlink(w->shard.work_path);
	for (size_t i = 0; i < w->written.n_shards; i++)
		unlink(w->written.shards[i].path);
	release_lock(&w->lock);
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
	char *text = NULL;          /* the new manifest */
	char text_tmp[4200];        /* its temporary, written before the switch */
	int text_fd = -1;
	char *mpath = NULL;         /* *manifest_path's copy */
	if (manifest_path)
		*manifest_path = NULL;

	if ((meta->errors_tmp != NULL) != (meta->errors_file != NULL) ||
	    (meta->errors_file && (!meta->errors_file[0] || strchr(meta->errors_file, '/'))))
		GOTO_FAIL(out, rc, err, IMS_EINVAL,
			  "an errors file needs both a plain file name and its temporary");
	/* Labels must name classes the manifest lists. */
	size_t n_classes = meta->n_classes;
	for (size_t l = n_classes; l < w->written.n_counts; l++)
		if (w->written.class_counts[l])
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "label %zu has no class name (%zu classes given)", l,
				  n_classes);

	/* An empty split still gets one (empty) shard so readers need no
	 * special case. */
	if (!w->shard.env && w->written.n_shards == 0)
		GOTO_IF_ERR(out, rc, rio_writer_open_shard(w, err));
	GOTO_IF_ERR(out, rc, rio_writer_close_shard(w, err));

	GOTO_IF_ERR(out, rc, ims_path_join(manifest, sizeof(manifest), w->dir, w->name, err));
	strncat(manifest, ".json", sizeof(manifest) - strlen(manifest) - 1);

	/* Everything that takes memory is done before the old split is
	 * touched: the manifest's fields, the shards' final names and the
	 * manifest's text, written to its temporary. Memory running out
	 * after the old manifest went would leave neither split (a failed
	 * --force must leave the old one whole). */
	m.format_version = RIO_MANIFEST_VERSION;
	m.name = strdup(w->name);
	m.encoding = strdup(meta->encoding ? meta->encoding : "keep");
	m.records = w->written.count;
	m.n_extra_labels = w->written.n_extra < 0 ? 0 : (unsigned)w->written.n_extra;
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
	m.shards = calloc(w->written.n_shards, sizeof(*m.shards));
	finals = calloc(w->written.n_shards, sizeof(char *));
	if (!m.name || !m.encoding || !m.created_by || !m.created_at ||
	    (meta->errors_file && !m.errors_file) ||
	    (meta->options_json && !m.options_json) ||
	    !m.classes || !m.class_counts || !m.shards || !finals)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", w->dir, w->name);
	m.n_classes = n_classes;
	for (size_t i = 0; i < n_classes; i++) {
		m.classes[i] = strdup(meta->classes[i]);
		if (!m.classes[i])
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", w->dir, w->name);
		m.class_counts[i] = i < w->written.n_counts ?
					    w->written.class_counts[i] : 0;
	}
	m.n_shards = w->written.n_shards;
	for (size_t i = 0; i < w->written.n_shards; i++) {
		rio_shard_info *s = &m.shards[i];
		s->file = rio_xasprintf("%s-%05zu-of-%05zu.mdb", w->name, i,
					w->written.n_shards);
		finals[i] = rio_xasprintf("%s/%s", w->dir, s->file ? s->file : "");
		if (!s->file || !finals[i])
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot write split '%s/%s': out of memory", w->dir, w->name);
		/* the working file is the shard: renaming keeps its size */
		struct stat st;
		if (stat(w->written.shards[i].path, &st) != 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot stat '%s': %s",
				  w->written.shards[i].path, strerror(errno));
		s->first = w->written.shards[i].first;
		s->records = w->written.shards[i].records;
		s->bytes = (uint64_t)st.st_size;
		s->digest = w->written.shards[i].digest;
	}
	char errs[4096]; /* the errors file published, or an old one removed */
	GOTO_IF_ERR(out, rc, ims_path_join(errs, sizeof(errs), w->dir,
					   meta->errors_file ? meta->errors_file : w->name, err));
	if (!meta->errors_file)
		strncat(errs, ".errors.tsv", sizeof(errs) - strlen(errs) - 1);
	text = rio_manifest_to_json(&m);
	if (text) {
		size_t tl = strlen(text);
		char *withnl = realloc(text, tl + 2);
		if (withnl) {
			withnl[tl] = '\n';
			withnl[tl + 1] = '\0';
		} else {
			free(text);
		}
		text = withnl;
	}
	if (!text)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot write manifest '%s': out of memory",
			  manifest);
	if (manifest_path) {
		mpath = strdup(manifest);
		if (!mpath)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot write manifest '%s': out of memory",
				  manifest);
	}
	GOTO_IF_ERR(out, rc, ims_temp_write(manifest, text, strlen(text), 0, text_tmp,
					    sizeof(text_tmp), &text_fd, err));

	/* Replacing: the old split stops existing before any shard of it is
	 * touched, so a crash in between leaves no manifest over mixed
	 * shards. */
	if (access(manifest, F_OK) == 0) {
		ims_error ignore;
		int lrc = rio_manifest_load(manifest, &old, &ignore);
		/* an old manifest not read for memory would leave its shards
		 * that the new split does not overwrite behind, unnamed:
		 * stop while the old split is still whole */
		if (lrc == IMS_ENOMEM)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM,
				  "cannot replace split '%s': out of memory", manifest);
		if (lrc < 0)
			memset(&old, 0, sizeof(old));
		if (unlink(manifest) != 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot remove old manifest '%s': %s",
				  manifest, strerror(errno));
		GOTO_IF_ERR(out, rc, ims_fsync_parent(manifest, err));
	}

	for (size_t i = 0; i < w->written.n_shards; i++) {
		if (rename(w->written.shards[i].path, finals[i]) != 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot rename '%s' to '%s': %s",
				  w->written.shards[i].path, finals[i], strerror(errno));
		renamed = i + 1;
	}
	/* Shards of the replaced split that the new one did not overwrite. */
	for (size_t i = 0; i < old.n_shards; i++) {
		int kept = 0;
		for (size_t j = 0; j < m.n_shards; j++)
			kept |= strcmp(old.shards[i].file, m.shards[j].file) == 0;
		if (!kept && rio_split_file_kind(old.shards[i].file, w->name) == 1) {
			char p[4096];
			if (ims_path_join(p, sizeof(p), w->dir, old.shards[i].file, NULL) == 0)
				unlink(p);
		}
	}
	/* The errors file belongs to the split it describes: published with
	 * it, after the old manifest is gone, so that a run failing earlier
	 * leaves the replaced split's own file as it was. */
	if (meta->errors_tmp) {
		if (rename(meta->errors_tmp, errs) != 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot rename '%s' to '%s': %s",
				  meta->errors_tmp, errs, strerror(errno));
	} else if (unlink(errs) != 0 && errno != ENOENT) {
		GOTO_FAIL(out, rc, err, IMS_EIO, "cannot remove old errors file '%s': %s",
			  errs, strerror(errno));
	}
	GOTO_IF_ERR(out, rc, ims_fsync_parent(manifest, err));
	rc = ims_temp_publish(text_fd, text_tmp, manifest, err);
	text_fd = -1; /* published or removed */
	if (rc < 0)
		goto out;
	if (manifest_path) {
		*manifest_path = mpath;
		mpath = NULL;
	}
	/* Published: nothing left for abort to remove. */
	for (size_t i = 0; i < w->written.n_shards; i++) {
		free(w->written.shards[i].path);
		w->written.shards[i].path = NULL;
	}
	w->written.n_shards = 0;
out:
	if (text_fd >= 0)
		ims_temp_discard(text_fd, text_tmp);
	free(text);
	free(mpath);
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
