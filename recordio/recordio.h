/*
 * recordio.h - imshard's record files: the record layout, the shard writer,
 * the shard reader, the manifest and rank partitioning.
 *
 * A dataset split is N LMDB files NAME-SSSSS-of-NNNNN.mdb (MDB_NOSUBDIR)
 * plus a manifest NAME.json, written last and atomically: a split without a
 * manifest does not exist. Keys are the global record index as 8-byte
 * big-endian unsigned integers, so a cursor walk is a sequential read and
 * every language's LMDB binding can read them. Values are a fixed
 * little-endian header followed by the payload. docs/FORMAT.md is the
 * byte-level specification.
 *
 * Caveats:
 *  - Depends on LMDB only; knows nothing of image formats.
 *  - A rio_writer is used by one thread. Packing is parallel upstream of
 *    it: workers prepare payloads and CRCs, one thread appends them.
 *  - A rio_reader is immutable after open and may be shared by threads;
 *    each thread reads through its own rio_cursor. Views returned by a
 *    cursor point into the shard's memory map: no copy is made, and they
 *    stay valid until that cursor is closed (not merely until the next
 *    call), because the shards are opened read-only and imshard never
 *    changes a split that has a manifest while it is read. Another
 *    program may (truncating or rewriting a shard in place): reads then
 *    fail with IMS_ECHANGED, checked before each record, and a view read
 *    after the file shrank faults with SIGBUS, which a program can turn
 *    into a message naming the shard with ims_mapguard_install (every
 *    shard map is registered with ims_mapguard while open).
 *  - Readers open shards with MDB_RDONLY|MDB_NOLOCK|MDB_NOTLS: no lock file
 *    is created, read-only media work, and a reader must not run while a
 *    writer rewrites the same split (the writer never touches a split that
 *    has a manifest unless asked to overwrite it).
 *  - Do not fork with a writer open.
 */
#ifndef IMSHARD_RECORDIO_H
#define IMSHARD_RECORDIO_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- record layout ---------------------------------------------------- */

#define RIO_RECORD_VERSION 1       /* a record header's version field */
#define RIO_MANIFEST_VERSION 2     /* the manifest's format_version written */
#define RIO_MANIFEST_VERSION_MIN 1 /* oldest read: its digests are weak */
#define RIO_MAGIC "IMSR"          /* bytes 49 4D 53 52 */
#define RIO_HEADER_FIXED 48       /* bytes before the extra labels */
#define RIO_MAX_EXTRA_LABELS 64
#define RIO_KEY_SIZE 8            /* big-endian uint64 global index */

/* What the payload is. */
typedef enum rio_encoding {
	RIO_ENC_JPEG = 1,
	RIO_ENC_PNG = 2,
	RIO_ENC_RAW = 3 /* width*height*channels bytes, interleaved, rows top-first */
} rio_encoding;

/* Record flags. */
#define RIO_FLAG_ORIGINAL 0x01 /* payload is the source file's bytes, unchanged */

/*
 * One record. As written: fill every field and point payload at the bytes.
 * As read: payload (and only payload) points into the shard's map.
 */
typedef struct rio_record {
	uint8_t encoding;    /* rio_encoding */
	uint8_t flags;       /* RIO_FLAG_* */
	uint8_t channels;    /* channels the payload decodes to: 1, 3 or 4 */
	uint8_t orientation; /* EXIF orientation 1..8 still to apply after decoding
				the payload (1 = already upright) */
	int32_t label;       /* class id, >= 0 */
	uint32_t width;      /* payload's decoded size, before orientation */
	uint32_t height;
	uint32_t orig_width; /* source image's upright size, before any resize */
	uint32_t orig_height;
	uint16_t n_extra;    /* extra float labels (im2rec pack-label) */
	float extra[RIO_MAX_EXTRA_LABELS];
	const uint8_t *payload;
	uint32_t payload_len;
	uint32_t payload_crc; /* CRC-32C of payload */
} rio_record;

/* Header size for n_extra extra labels: RIO_HEADER_FIXED + 4 * n_extra. */
size_t rio_header_size(unsigned n_extra);

/*
 * Writes rec's header (including its own CRC) into out, which must hold
 * rio_header_size(rec->n_extra) bytes; rec->payload_len and payload_crc
 * must already be set. Returns the header size, or a negative code when a
 * field is out of range.
 */
int rio_header_encode(const rio_record *rec, uint8_t *out, ims_error *err);

/* Bits for rio_record_decode's check argument. */
#define RIO_CHECK_PAYLOAD_CRC 0x01

/*
 * Parses a stored value (header + payload, len bytes) into rec without
 * copying the payload (rec->payload points into value). Always checks the
 * magic, version, header CRC, lengths, field ranges and the reserved
 * bytes (0); with
 * RIO_CHECK_PAYLOAD_CRC also the payload's CRC. Errors: IMS_EFORMAT (bad
 * magic or unknown version), IMS_ECORRUPT (anything else).
 */
int rio_record_decode(const void *value, size_t len, rio_record *rec,
		      unsigned check, ims_error *err);

/* "jpeg", "png", "raw" or "unknown". */
const char *rio_encoding_name(int encoding);

/*
 * Whether rec is what a manifest's pack mode says every record of the
 * split is: "keep" records carry RIO_FLAG_ORIGINAL (JPEG, PNG, or raw
 * pixels read from the dataset's own files), "jpeg", "png" and "raw"
 * records have that encoding and not the flag. Returns 0, or IMS_ECORRUPT
 * with what the record is instead.
 */
int rio_record_check_mode(const char *mode, const rio_record *rec,
			  ims_error *err);

/* ---- manifest ----------------------------------------------------------- */

typedef struct rio_shard_info {
	char *file;       /* file name, relative to the manifest's folder */
	uint64_t first;   /* global index of its first record */
	uint64_t records;
	uint64_t bytes;   /* file size */
	/* Format 2: rio_digest of the shard. Format 1: CRC-32C chained over
	 * its records' headers, which depends on nothing but the record
	 * count (each header ends with its own CRC) and proves nothing. */
	uint64_t digest;
} rio_shard_info;

/* Record order of a split, the manifest's optional "shuffled" key: whether
 * the records were shuffled before packing, or lie in the order of a list
 * that may be sorted by class (which matters to readers that take whole
 * shards, such as the loader's shard-owning mode). */
enum {
	RIO_ORDER_UNKNOWN = 0,  /* not recorded ("shuffled" absent) */
	RIO_ORDER_LIST = 1,     /* "shuffled": false */
	RIO_ORDER_SHUFFLED = 2  /* "shuffled": true */
};

typedef struct rio_manifest {
	int format_version;  /* RIO_MANIFEST_VERSION_MIN..RIO_MANIFEST_VERSION */
	char *name;          /* split name: NAME of NAME.json */
	uint64_t records;
	char *encoding;      /* pack mode: keep, jpeg, png or raw (others are
				refused at load) */
	char **classes;      /* class names, label i = classes[i] */
	size_t n_classes;
	uint64_t *class_counts; /* n_classes entries */
	unsigned n_extra_labels; /* extra float labels of every record (a
				    record with another count is refused
				    when read) */
	rio_shard_info *shards;
	size_t n_shards;
	uint64_t skipped;    /* source files the packer skipped */
	char *errors_file;   /* NAME.errors.tsv, or NULL when none were skipped */
	char *created_by;    /* "imshard 0.1.0" */
	char *created_at;    /* ISO 8601 UTC */
	char *options_json;  /* the packer's options as a JSON object text, or NULL */
	int order;           /* RIO_ORDER_* */
} rio_manifest;

/* 1 when name can name a split (NAME of NAME.json): a plain file name
 * (ims_plain_name: not empty, no '/', not "." or ".."), else 0. Readers
 * refuse a manifest whose "name" is not, and writers a name that is not,
 * so that no split is written that readers refuse. */
int rio_split_name_ok(const char *name);

/* Loads and validates a manifest (a known format version and encoding,
 * consistent counts, shard ranges contiguous from 0, shard i of n named
 * NAME-iiiii-of-nnnnn.mdb after the split's name). Fills m; release with
 * rio_manifest_release. The file must be a regular file (a FIFO is
 * refused, not waited on). Format 1 manifests load with their weak
 * digests (see rio_shard_info). */
int rio_manifest_load(const char *path, rio_manifest *m, ims_error *err);

/* 1 when path is a regular file (not followed through a symbolic link)
 * whose JSON object says "format": "imshard", a split's manifest whether
 * or not it loads; 0 for anything else (absent, another file). No answer,
 * and the caller must not replace or remove the file, when it is there
 * but cannot be read: IMS_EIO (no read permission, a failed read; err
 * names the file and the cause) or IMS_ENOMEM (memory ran out reading or
 * parsing it). Its "name", when a string, goes into name (cap bytes, ""
 * when none). What a command checks before it replaces or removes a file
 * at a name of its own (eval.json, summary.json) in a folder a split may
 * share. */
int rio_manifest_at(const char *path, char *name, size_t cap, ims_error *err);

/* Frees everything m owns and zeroes it. NULL and zeroed are fine. */
void rio_manifest_release(rio_manifest *m);

/*
 * Whether m's class names are names `imshard pack` writes: UTF-8, each
 * one line of a classes file (not empty, not only spaces, no line break
 * or TAB: ims_name_line_problem) and none repeated, so that a classes
 * file made from them (extract's) packs again. Returns 0, or
 * IMS_ECORRUPT naming the first bad class. Loading does not apply it (a
 * split so named still reads and trains); rio_verify reports it, and
 * writers of classes files refuse before writing.
 */
int rio_manifest_check_classes(const rio_manifest *m, ims_error *err);

/* The manifest as pretty JSON text (malloc'd, caller frees), in the format
 * m->format_version names (format 2 writes digests as strings of 16 hex
 * digits, format 1 as numbers). NULL when out of memory. */
char *rio_manifest_to_json(const rio_manifest *m);

/* Writes m to path atomically (ims_write_file_atomic), as
 * rio_manifest_to_json gives it. */
int rio_manifest_save(const char *path, const rio_manifest *m, ims_error *err);

/*
 * Rewrites the manifest at path as format RIO_MANIFEST_VERSION with new
 * shard digests (digests[i] for shard i, computed with rio_digest over
 * every record as it is now), atomically and holding the split's lock (a
 * pack of the split is refused meanwhile, and this is refused during one:
 * IMS_EEXIST). expect is the manifest the digests were computed against:
 * when the file now says anything else (the split was packed again
 * meanwhile) nothing is written (IMS_ECHANGED). Everything but the
 * version and the digests is kept.
 */
int rio_manifest_rehash(const char *path, const rio_manifest *expect,
			const uint64_t *digests, ims_error *err);

/* ---- shard digest ------------------------------------------------------ */

/*
 * A shard's digest (manifest format 2, docs/FORMAT.md): FNV-1a, 64 bits,
 * over RIO_DIGEST_TAG, the split's name and a NUL, the shard's index in
 * the split (8 bytes, big-endian), then for each record in key order its
 * key (8 bytes, big-endian) and its whole stored header (header_len
 * bytes: every field, the label(s) and the payload's CRC). Nothing fed to
 * it ends in a checksum of what precedes it, so unlike format 1's chained
 * CRC it does not collapse to a constant; the split's name and the shard
 * index tie a shard to its place. Not cryptographic: it catches mistakes
 * (shards swapped, re-packed, copied from another split), not forgery by
 * someone who can also edit the manifest.
 */
#define RIO_DIGEST_TAG "imshard-digest-2" /* 16 bytes, no NUL */

typedef struct rio_digest {
	uint64_t h;
} rio_digest;

/* Starts the digest of shard `shard` (0-based) of split `name`. */
void rio_digest_begin(rio_digest *d, const char *name, uint64_t shard);

/* Adds one record: its key and its stored header (header_len bytes). */
void rio_digest_add(rio_digest *d, uint64_t key, const uint8_t *header,
		    size_t header_len);

/* Adds a record as read (rio_cursor_get): its header is encoded again,
 * which gives the stored bytes back for any record that decoded. Returns
 * 0, or a negative code for fields out of range. */
int rio_digest_add_record(rio_digest *d, uint64_t key, const rio_record *rec,
			  ims_error *err);

/* The digest so far. */
uint64_t rio_digest_value(const rio_digest *d);

/* ---- writer ----------------------------------------------------------- */

typedef struct rio_writer rio_writer;

typedef struct rio_writer_opts {
	const char *dir;   /* output folder (created when missing) */
	const char *name;  /* split name; files are dir/name-SSSSS-of-NNNNN.mdb */
	/* Start a new shard before a record would take the current one past
	 * this many bytes (0 = only when rio_writer_new_shard is called). */
	uint64_t shard_bytes;
	/* Replace an existing split of this name instead of refusing. */
	int force;
	/* Initial LMDB map size; 0 = 1 GiB. The map doubles on MDB_MAP_FULL,
	 * so this only matters to tests that force growth. */
	uint64_t initial_map_size;
	/* Bytes of records per write transaction; 0 = 8 MiB. */
	uint64_t txn_bytes;
} rio_writer_opts;

/*
 * Prepares to write split `name` in `dir`. Refuses (IMS_EEXIST) when
 * dir/name.json exists, unless force. Takes an exclusive lock
 * (dir/name.lock) so two packs cannot write the same split. Removes the
 * leftovers of an interrupted run: working files and shards without a
 * manifest. Nothing visible as a dataset exists until rio_writer_finish.
 */
int rio_writer_open(const rio_writer_opts *opts, rio_writer **out,
		    ims_error *err);

/*
 * Appends a record with the next global index (0, 1, 2, ...). Copies the
 * payload; it need only live for the call. rec->payload_crc must be the
 * payload's CRC-32C (compute it in parallel workers with ims_crc32c).
 */
int rio_writer_add(rio_writer *w, const rio_record *rec, ims_error *err);

/* Closes the current shard (when it holds records) so the next record
 * starts a new one. */
int rio_writer_new_shard(rio_writer *w, ims_error *err);

/* Records appended so far. */
uint64_t rio_writer_count(const rio_writer *w);

/* The shards rio_writer_finish would publish now: those closed, the open
 * one, and one for a split without records. Read before finishing, it
 * needs no manifest read back (which memory could fail). */
size_t rio_writer_shards(const rio_writer *w);

/* What the split's manifest says beyond what the writer knows. */
typedef struct rio_writer_meta {
	const char *encoding;          /* pack mode, e.g. "keep" */
	const char *const *classes;    /* names; n_classes may exceed max label+1 */
	size_t n_classes;
	uint64_t skipped;
	const char *errors_file;       /* file name in dir, or NULL */
	/* The errors file's content: a complete, synced temporary file in dir
	 * that rio_writer_finish renames to errors_file when it publishes the
	 * split, or NULL (then errors_file must be NULL too). With no errors
	 * file, dir/NAME.errors.tsv (docs/FORMAT.md) of a replaced split, or
	 * of a failed run, is removed at that point instead. */
	const char *errors_tmp;
	const char *options_json;      /* JSON object text, or NULL */
} rio_writer_meta;

/*
 * A split's lock: dir/name.lock, held (flock) by a writer for as long as it
 * writes the split. Take it to change a split's files by other means (a
 * convert replacing its splits from a staging folder), so that no writer
 * works on them meanwhile. IMS_EEXIST when another process holds it (the
 * message names the lock file); IMS_EIO, IMS_ENOMEM. The lock is a
 * process's: do not share it across fork.
 */
typedef struct rio_lock rio_lock;
int rio_lock_take(const char *dir, const char *name, rio_lock **out,
		  ims_error *err);
/* Releases the lock, removing its file, and frees l. NULL is fine. */
void rio_lock_release(rio_lock *l);

/* Records in the manifest whether the records were shuffled (RIO_ORDER_*;
 * the default, RIO_ORDER_UNKNOWN, records nothing). */
void rio_writer_set_order(rio_writer *w, int order);

/*
 * Finishes: commits, syncs and compacts every shard, removes a replaced
 * split's manifest, gives the shards their final names (SSSSS-of-NNNNN),
 * removes the replaced split's surplus shards, publishes the errors file
 * (m->errors_tmp), and writes the manifest last, atomically. Frees w
 * whatever the outcome. On a failure before the replaced manifest is
 * removed (committing or compacting a shard, or memory running out: all
 * of it, the manifest's text included, is taken first), the replaced
 * split stays whole, errors file included; after it (a failed rename or
 * sync), no manifest exists. On failure
 * m->errors_tmp is left where it is, for the caller. m->n_classes must
 * exceed every label written (IMS_EINVAL otherwise). *manifest_path (may
 * be NULL) receives the path written (malloc'd).
 */
int rio_writer_finish(rio_writer *w, const rio_writer_meta *m,
		      char **manifest_path, ims_error *err);

/* Abandons the split: removes working files and frees w. NULL is fine. */
void rio_writer_abort(rio_writer *w);

/* ---- reader ----------------------------------------------------------- */

typedef struct rio_reader rio_reader;
typedef struct rio_cursor rio_cursor;

/*
 * Opens the split described by a manifest: loads it, opens every shard
 * read-only and checks each against the manifest (a regular file, present,
 * size and record count as stated); any disagreement is refused with a
 * message saying what differs. A manifest or shard that is a FIFO or
 * another non-regular file is refused (IMS_EFORMAT), never waited on.
 *
 * A damaged shard file is refused, never read blindly: before LMDB sees a
 * shard, its meta pages and its whole B-tree of branch and leaf pages are
 * checked (page numbers, bounds, node offsets, key order, value extents,
 * record count), so that a shard that opens serves every record it holds,
 * and every view lies inside the file. Errors: IMS_EFORMAT (not an LMDB
 * file), IMS_ECORRUPT (the message names the shard, the page and what is
 * wrong with it). Cost: one read of the branch and leaf pages, about one
 * 4 KB page per 150 records of 2 KB or more; the values' own (overflow)
 * pages are not read, so a shard's payload CRCs are checked only as
 * records are read (RIO_CHECK_PAYLOAD_CRC, `imshard verify`).
 */
int rio_reader_open(const char *manifest_path, rio_reader **out,
		    ims_error *err);

/* Closes the reader. Every cursor must be closed first. NULL is fine. */
void rio_reader_close(rio_reader *r);

uint64_t rio_reader_count(const rio_reader *r);
const rio_manifest *rio_reader_manifest(const rio_reader *r);
/* Path of shard i (within the manifest's folder). */
const char *rio_reader_shard_path(const rio_reader *r, size_t i);

/* A cursor reads records for one thread. check: RIO_CHECK_* bits applied
 * to every read (the header CRC is always checked). */
int rio_cursor_open(rio_reader *r, unsigned check, rio_cursor **out,
		    ims_error *err);
void rio_cursor_close(rio_cursor *c);

/*
 * Reads record `index` (0 <= index < count) into rec. rec->payload points
 * into the map and is valid until the cursor is closed. Reading indices in
 * increasing order is a sequential walk (no tree descent per record).
 * Errors: IMS_EINVAL (index out of range), IMS_ENOTFOUND (key missing
 * from its shard), IMS_ECORRUPT / IMS_EFORMAT (damaged record, or one
 * whose number of extra labels is not the manifest's extra_labels, or
 * whose label is not below the manifest's class count: the message names
 * the shard and index), IMS_ECHANGED (the shard's size or
 * modification time is no longer what was checked at open: it was
 * truncated or rewritten; no record of it can be trusted, so stop rather
 * than retry). Costs one fstat per call for that check.
 */
int rio_cursor_get(rio_cursor *c, uint64_t index, rio_record *rec,
		   ims_error *err);

/* Shard holding record index, or -1 when out of range. */
int rio_reader_shard_of(const rio_reader *r, uint64_t index);

/* ---- verifying a split ------------------------------------------------ */

/*
 * What `imshard verify` and Split.verify check, read through r: every
 * record's header and payload CRC-32C, its label against the classes, its
 * number of extra labels and its encoding against the manifest's, each
 * shard's digest (format 2; format 1 digests depend only on record counts
 * and are not compared), the class counts and the class names
 * (rio_manifest_check_classes). recordio never looks inside a payload: a caller that
 * decodes images does so in check.
 */
typedef struct rio_verify_opts {
	int threads;        /* shards checked at once (the caller's thread is
			       one of them); < 1: 1 */
	unsigned max_named; /* bad records named one by one; 0: 100 */
	/* An extra check of each record that passed the others, called from
	 * the thread checking its shard; worker (0 .. threads-1) numbers that
	 * thread, so per-thread state such as a decoder is kept by worker.
	 * Returns 0, or < 0 with err filled ("record N: ..."): the record is
	 * bad. NULL: none. */
	int (*check)(void *ctx, int worker, uint64_t index,
		     const rio_record *rec, ims_error *err);
	/* Each problem as one line without a prefix: a bad record ("record
	 * 5 in shard 'F': payload checksum mismatch ...") or an unreadable
	 * shard, in shard and record order whatever the thread count (a
	 * shard's lines come once every shard before it is read; the first
	 * max_named in that order are named, the rest counted), then after
	 * the reads the bad records by class
	 * ("bad records by class: 'b' 2 of 100, ...", the classes with most
	 * first, each bad record under the label its header gives; none when
	 * no bad record's header could be read), the shards' encoding and
	 * digest findings, the class names and the class counts. Never
	 * called concurrently. */
	void (*problem)(void *ctx, const char *line);
	/* Records checked so far, every 256 records of a shard and at each
	 * shard's end. Nonzero stops the check (rio_verify returns
	 * IMS_EINTR). Never called concurrently with itself or problem. */
	int (*progress)(void *ctx, uint64_t done);
	void *ctx;
} rio_verify_opts;

/* threads 1, max_named 100, no callbacks. */
void rio_verify_opts_init(rio_verify_opts *o);

typedef struct rio_verify_result {
	uint64_t checked;    /* records read */
	uint64_t bad;        /* records that failed a check */
	int ok;              /* nothing is wrong with the split */
	int digests_checked; /* the manifest is format 2: digests compared */
} rio_verify_result;

/*
 * Checks the split of r. Returns 0 when the check ran to its end, whatever
 * it found (res->ok says whether the split is good; opts->problem was told
 * each problem); IMS_EINTR when progress stopped it, IMS_ENOMEM, IMS_EINVAL.
 * digests, when not NULL, receives n_shards entries: each shard's format 2
 * digest as read (what `imshard verify --rehash` writes after a clean
 * check).
 */
int rio_verify(rio_reader *r, const rio_verify_opts *opts,
	       rio_verify_result *res, uint64_t *digests, ims_error *err);

/* A file beside a split's manifest, named as one of the split's files,
 * that is not part of the split. */
typedef enum rio_stray_kind {
	RIO_STRAY_SHARD = 1,  /* NAME-SSSSS-of-NNNNN.mdb that the manifest does
				 not list (copied in, or of another pack) */
	RIO_STRAY_WORKING = 2 /* NAME-SSSSS.mdb.partial or .compact: a working
				 file of a pack that was interrupted (or is
				 running); the next pack of NAME removes it */
} rio_stray_kind;

/*
 * Finds the files in dir, the folder of m's manifest, that are named as
 * files of split m->name but that m does not list; nothing reads them as
 * part of the split, so a check that passes says nothing of them. fn is
 * called with each file's name (in dir) and kind, in byte-wise order.
 * Returns how many were found, or IMS_EIO/IMS_ENOTFOUND/IMS_ENOMEM when
 * dir cannot be listed.
 */
int rio_split_strays(const char *dir, const rio_manifest *m,
		     void (*fn)(void *ctx, const char *file, rio_stray_kind kind),
		     void *ctx, ims_error *err);

/* ---- partitioning across ranks ---------------------------------------- */

/* What to do with the n mod world records that do not divide evenly. */
typedef enum rio_remainder {
	RIO_REMAINDER_PAD = 0, /* every rank gets ceil(n/world): the last ranks
				  repeat records from the start of the order */
	RIO_REMAINDER_DROP = 1 /* every rank gets floor(n/world): the last
				  n mod world records of the epoch's order are
				  left out (different ones each epoch) */
} rio_remainder;

typedef struct rio_partition_info {
	uint64_t per_rank; /* records each rank gets this epoch */
	uint64_t padded;   /* repeated records, all ranks together */
	uint64_t dropped;  /* records no rank gets this epoch */
} rio_partition_info;

/* Records per rank for n records over world ranks. */
uint64_t rio_partition_size(uint64_t n, int world, rio_remainder mode);

/* Which share of which epoch rio_partition computes. */
typedef struct rio_partition_opts {
	uint64_t n;            /* records in the split (> 0) */
	int rank, world;       /* 0 <= rank < world */
	uint64_t epoch, seed;  /* the order is drawn from (seed, epoch) */
	int shuffle;           /* 0: the identity order (validation) */
	rio_remainder remainder; /* RIO_REMAINDER_PAD or _DROP */
	uint64_t offset;       /* positions of the epoch's order already
				  consumed (a run resumed inside an epoch,
				  perhaps with another rank count): the shares
				  cover positions offset..n-1; offset < n */
} rio_partition_opts;

/* Defaults: n 0, rank 0 of 1, epoch 0, seed 0, shuffled, DROP, offset 0. */
void rio_partition_opts_init(rio_partition_opts *o);

/* Records per rank that rio_partition(o) gives:
 * rio_partition_size(o->n - o->offset, o->world, o->remainder); 0 for
 * options it would refuse. */
uint64_t rio_partition_count(const rio_partition_opts *o);

/*
 * Rank o->rank's share of an epoch. The epoch's order is a permutation of
 * 0..n-1 drawn from (seed, epoch) when shuffle is set, else the identity;
 * rank r takes positions offset+r, offset+r+world, offset+r+2*world, ...
 * of it. Every rank gets exactly rio_partition_count(o) indices, written to
 * out (which must hold that many); without padding the shares are
 * disjoint and their union is the order from offset on (PAD: positions
 * past the end wrap to offset) or all of it but `dropped` (DROP: the last
 * positions). So a run that consumed positions [0, p) of an epoch, with
 * any rank count, continues with offset p and any other rank count: no
 * record is seen twice or skipped. Any rank computes its share alone: no
 * communication. info (may be NULL) counts over the positions from offset.
 * Errors: IMS_EINVAL (rank outside the world, unknown remainder mode,
 * n == 0, offset >= n), IMS_ENOMEM (the shuffled order's n * 8 bytes
 * cannot be allocated, or overflow a size_t: the message names n).
 */
int rio_partition(const rio_partition_opts *o, uint64_t *out,
		  rio_partition_info *info, ims_error *err);

#ifdef __cplusplus
}
#endif

#endif
