/*
 * writer_internal.h - what the split writer's two files share: the
 * writer's state, and the life of one shard in LMDB (writer_shard.c) as
 * writer.c (the split: its folder, lock, records and manifest) drives
 * it. Not a public header.
 */
#ifndef IMSHARD_RECORDIO_WRITER_INTERNAL_H
#define IMSHARD_RECORDIO_WRITER_INTERNAL_H

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

#include "recordio.h"

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

/* Is fname one of the files of split `name`: a working or compacted shard
 * NAME-SSSSS.mdb.partial / .compact (0), a final shard
 * NAME-SSSSS-of-NNNNN.mdb (1), or neither (-1)? */
int rio_split_file_kind(const char *fname, const char *name);

/* vasprintf into a new string; NULL when out of memory. */
char *rio_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- writer_shard.c ----------------------------------------------------- */

/* Starts shard n_done as its working file, empty, at record w->count. */
int rio_writer_open_shard(rio_writer *w, ims_error *err);
/* Writes the pending batch in one transaction. */
int rio_writer_flush_batch(rio_writer *w, ims_error *err);
/* Flushes, syncs and closes the open shard (none: a no-op) and appends it,
 * as its .compact file, to w->done. */
int rio_writer_close_shard(rio_writer *w, ims_error *err);

#endif
