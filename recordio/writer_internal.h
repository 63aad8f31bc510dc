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

/* A split's lock file NAME.lock, held with flock (writer.c: lock_split)
 * by rio_lock_take and by a writer for its whole life. Owns path; fd is
 * -1 when not held. */
struct rio_lock {
	int fd;
	char *path;
};

/*
 * The shard being written: its LMDB environment on the working file and
 * what its manifest entry will say (writer_shard.c). env is NULL between
 * shards. Owns env and work_path.
 */
typedef struct rio_shard_state {
	MDB_env *env;
	MDB_dbi dbi;
	uint64_t map_size;      /* kept across shards: the next one starts at
				   the size this one grew to */
	char *work_path;
	uint64_t first, records, bytes;
	rio_digest digest;
	uint64_t reserved;      /* bytes of the working file fallocated */
	uint64_t since_remap;   /* bytes committed since the map was last opened */
	uint64_t psize;         /* LMDB's page size: the OS page size (4 KiB on
				   x86-64, up to 64 KiB elsewhere) */
} rio_shard_state;

/*
 * Records of the open transaction batch, concatenated in buf, kept until
 * the commit succeeds so that MDB_MAP_FULL can be replayed
 * (rio_writer_flush_batch). Owns buf and val_len; both are reused from
 * batch to batch.
 */
typedef struct rio_batch {
	uint8_t *buf;
	size_t buf_len, buf_cap;
	size_t *val_len;        /* each record's length, n of val_cap used */
	size_t n, val_cap;
	uint64_t pages;         /* overflow pages the batch needs, at most */
	uint64_t first;         /* the first record's number (its key) */
} rio_batch;

/*
 * What the split holds so far, for its manifest (rio_writer_finish):
 * records added, their classes, and the shards finished, as .compact
 * files. Owns class_counts, shards and every shards[i].path.
 */
typedef struct rio_written {
	uint64_t count;
	int n_extra; /* -1 until the first record fixes it */
	uint64_t *class_counts;
	size_t n_counts;
	done_shard *shards;
	size_t n_shards, shards_cap;
} rio_written;

/* The split being written (owns dir, name and created_dir), and its
 * rooms. */
struct rio_writer {
	char *dir, *name;
	char *created_dir;        /* outermost folder open made, removed on abort */
	uint64_t shard_bytes_max; /* 0: new shards only by rio_writer_new_shard */
	uint64_t txn_bytes;       /* a batch is written once it holds this much */
	int force;
	int order;                /* RIO_ORDER_*, for the manifest */
	rio_lock lock;            /* NAME.lock, held until finish or abort */

	rio_shard_state shard;    /* the shard being written */
	rio_batch batch;          /* its records not yet committed */
	rio_written written;      /* what the manifest will list */
};

/* Is fname one of the files of split `name`: a working or compacted shard
 * NAME-SSSSS.mdb.partial / .compact (0), a final shard
 * NAME-SSSSS-of-NNNNN.mdb (1), or neither (-1)? */
int rio_split_file_kind(const char *fname, const char *name);

/* vasprintf into a new string; NULL when out of memory. */
char *rio_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- writer_shard.c ----------------------------------------------------- */

/* Starts shard written.n_shards as its working file, empty, at record
 * written.count. */
int rio_writer_open_shard(rio_writer *w, ims_error *err);
/* Writes the pending batch in one transaction. */
int rio_writer_flush_batch(rio_writer *w, ims_error *err);
/* Flushes, syncs and closes the open shard (none: a no-op) and appends it,
 * as its .compact file, to w->written.shards. */
int rio_writer_close_shard(rio_writer *w, ims_error *err);

#endif
