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
 * shard we check what LMDB would trust (check_meta, check_tree) with
 * pread, map exactly the file's bytes, and check that every key and value
 * LMDB hands back lies inside them before anything reads it.
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

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <lmdb.h>
#include <stdarg.h>
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

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t key_to_u64(const MDB_val *k)
{
	return be64(k->mv_data);
}

static void u64_to_key(uint64_t v, uint8_t *kb)
{
	for (int b = 0; b < 8; b++)
		kb[b] = (uint8_t)(v >> (56 - 8 * b));
}

/*
 * LMDB 0.9's file layout on a 64-bit host (mdb.c: MDB_page, MDB_meta,
 * MDB_db), as far as the checks need it. Pages 0 and 1 are meta pages;
 * LMDB uses the one with the larger transaction id (page 0 on a tie).
 */
enum {
	LM_PAGEHDR = 16,        /* pgno u64, pad u16, flags u16, lower u16, upper u16 */
	LM_P_FLAGS = 10,
	LM_P_META = 0x08,
	LM_META = LM_PAGEHDR,   /* MDB_meta follows the page header */
	LM_MAGIC = LM_META + 0, /* u32 0xBEEFC0DE */
	LM_VERSION = LM_META + 4,
	LM_PSIZE = LM_META + 24,     /* free DB's md_pad holds the page size */
	LM_MAIN = LM_META + 72,      /* main DB's MDB_db */
	LM_MAIN_FLAGS = LM_MAIN + 4, /* u16 */
	LM_MAIN_DEPTH = LM_MAIN + 6, /* u16 */
	LM_MAIN_ENTRIES = LM_MAIN + 32,
	LM_MAIN_ROOT = LM_MAIN + 40,
	LM_LAST_PG = LM_META + 120,
	LM_TXNID = LM_META + 128,
	LM_META_END = LM_META + 136
};
_Static_assert(sizeof(size_t) == 8 && sizeof(void *) == 8,
	       "the offsets above are LMDB's layout on a 64-bit host");
#define LM_MAGIC_VALUE 0xBEEFC0DEu
#define LM_DATA_VERSION 1
#define LM_MIN_PSIZE 512
#define LM_MAX_PSIZE 32768 /* LMDB's MAX_PAGESIZE */
#define LM_P_INVALID UINT64_MAX

static uint16_t ld16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}
static uint32_t ld32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}
static uint64_t ld64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* What the meta page LMDB will use says about the main database. */
typedef struct lm_layout {
	uint32_t psize;
	uint64_t last_pg; /* pages 0..last_pg are in use */
	uint64_t root;    /* LM_P_INVALID when empty */
	uint64_t entries;
	unsigned depth;
	uint64_t first_key; /* file offset of the first record's key */
} lm_layout;

/*
 * Reads both meta pages with pread and checks what LMDB would otherwise
 * take on trust: magic, version, a page size LMDB could have written, a
 * file of whole pages that holds every page the meta counts, a main
 * database without flags (imshard writes none, and DUPSORT & co. would
 * send LMDB into sub-page code) and a root page inside the file.
 */
static int check_meta(int fd, const char *path, uint64_t size, lm_layout *lay,
		      ims_error *err)
{
	uint8_t meta[2][LM_META_END];
	uint32_t psize = 0;
	int rc = 0;
	for (int i = 0; i < 2 && !rc; i++) {
		/* page 1 sits at the page size that page 0 states */
		uint64_t at = i ? psize : 0;
		ssize_t n = size >= at + LM_META_END ?
				    pread(fd, meta[i], LM_META_END, (off_t)at) : 0;
		if (n < 0)
			rc = ims_fail(err, IMS_EIO, "cannot read shard '%s': %s",
				      path, strerror(errno));
		else if (n != LM_META_END)
			rc = ims_fail(err, IMS_ECORRUPT,
				      "cannot open shard '%s': %llu bytes cannot hold LMDB's meta page %d (truncated?)",
				      path, (unsigned long long)size, i);
		else if (!(ld16(meta[i] + LM_P_FLAGS) & LM_P_META) ||
			 ld32(meta[i] + LM_MAGIC) != LM_MAGIC_VALUE)
			rc = ims_fail(err, IMS_EFORMAT,
				      "cannot open shard '%s': not an LMDB file (meta page %d has no LMDB magic)",
				      path, i);
		else if (ld32(meta[i] + LM_VERSION) != LM_DATA_VERSION)
			rc = ims_fail(err, IMS_EFORMAT,
				      "cannot open shard '%s': LMDB data version %u, this build reads %d",
				      path, ld32(meta[i] + LM_VERSION), LM_DATA_VERSION);
		else if (i == 0) {
			psize = ld32(meta[0] + LM_PSIZE);
			if (psize < LM_MIN_PSIZE || psize > LM_MAX_PSIZE ||
			    (psize & (psize - 1)))
				rc = ims_fail(err, IMS_ECORRUPT,
					      "cannot open shard '%s': page size %u is not one LMDB writes",
					      path, psize);
			else if (size % psize != 0 || size < 2ull * psize)
				rc = ims_fail(err, IMS_ECORRUPT,
					      "cannot open shard '%s': %llu bytes is not a whole number of %u-byte pages (truncated?)",
					      path, (unsigned long long)size, psize);
		} else if (ld32(meta[1] + LM_PSIZE) != psize)
			rc = ims_fail(err, IMS_ECORRUPT,
				      "cannot open shard '%s': its meta pages disagree on the page size (%u, %u)",
				      path, psize, ld32(meta[1] + LM_PSIZE));
	}
	if (rc)
		return rc;
	const uint8_t *m = meta[ld64(meta[0] + LM_TXNID) < ld64(meta[1] + LM_TXNID)];
	lay->psize = psize;
	lay->last_pg = ld64(m + LM_LAST_PG);
	lay->root = ld64(m + LM_MAIN_ROOT);
	lay->entries = ld64(m + LM_MAIN_ENTRIES);
	lay->depth = ld16(m + LM_MAIN_DEPTH);
	uint64_t pages = size / psize;
	RETURN_IF(lay->last_pg < 1 || lay->last_pg >= pages, err, IMS_ECORRUPT,
		  "cannot open shard '%s': its meta page counts %llu pages, the file holds %llu (truncated?)",
		  path, (unsigned long long)lay->last_pg + 1,
		  (unsigned long long)pages);
	RETURN_IF(ld16(m + LM_MAIN_FLAGS) != 0, err, IMS_ECORRUPT,
		  "cannot open shard '%s': main database has flags 0x%x, imshard writes none",
		  path, ld16(m + LM_MAIN_FLAGS));
	if (lay->root == LM_P_INVALID)
		RETURN_IF(lay->entries != 0, err, IMS_ECORRUPT,
			  "cannot open shard '%s': an empty tree holding %llu records",
			  path, (unsigned long long)lay->entries);
	else
		RETURN_IF(lay->root < 2 || lay->root > lay->last_pg, err,
			  IMS_ECORRUPT,
			  "cannot open shard '%s': root page %llu is outside pages 2..%llu",
			  path, (unsigned long long)lay->root,
			  (unsigned long long)lay->last_pg);
	return 0;
}

/* Branch and leaf pages (mdb.c: MDB_page, MDB_node). */
enum {
	LM_P_LOWER = 12, /* u16: end of the node offsets, from the page start */
	LM_P_UPPER = 14, /* u16: start of the nodes */
	LM_P_BRANCH = 0x01,
	LM_P_LEAF = 0x02,
	/* branch, leaf, overflow, meta, LEAF2, sub-page: what a page is */
	LM_P_KIND = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40,
	LM_NODE = 8, /* lo u16, hi u16, flags u16, key size u16; key; data */
	LM_F_BIGDATA = 0x01 /* the data is an overflow page number */
};
/* LMDB's cursors hold at most CURSOR_STACK (32) pages of a path. */
#define LM_MAX_DEPTH 32

static int damaged(ims_error *err, const char *path, uint64_t pgno,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int damaged(ims_error *err, const char *path, uint64_t pgno,
		   const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ims_fail(err, IMS_ECORRUPT,
			"cannot open shard '%s': page %llu is damaged: %s", path,
			(unsigned long long)pgno, what);
}

/* The header and node table of tree page pgno (read into p): everything
 * LMDB reads from it without checking. n receives the node count. */
static int check_page(const char *path, const lm_layout *lay,
		      const uint8_t *p, uint64_t pgno, int kind, unsigned *n,
		      ims_error *err)
{
	unsigned flags = ld16(p + LM_P_FLAGS), lower = ld16(p + LM_P_LOWER),
		 upper = ld16(p + LM_P_UPPER);
	if (ld64(p) != pgno)
		return damaged(err, path, pgno, "it says it is page %llu",
			       (unsigned long long)ld64(p));
	if ((flags & LM_P_KIND) != (unsigned)kind)
		return damaged(err, path, pgno, "flags 0x%x where a %s page belongs",
			       flags, kind == LM_P_LEAF ? "leaf" : "branch");
	if (lower < LM_PAGEHDR || lower > upper || upper > lay->psize ||
	    (lower - LM_PAGEHDR) % 2)
		return damaged(err, path, pgno, "free space %u..%u", lower, upper);
	*n = (lower - LM_PAGEHDR) / 2;
	/* LMDB asserts that a branch of the main database has two children
	 * or more, and never leaves a leaf empty. */
	if (*n < (kind == LM_P_BRANCH ? 2u : 1u))
		return damaged(err, path, pgno, "%u nodes", *n);
	for (unsigned i = 0; i < *n; i++) {
		unsigned off = ld16(p + LM_PAGEHDR + 2 * i);
		if (off < upper || off + LM_NODE > lay->psize ||
		    off + LM_NODE + ld16(p + off + 6) > lay->psize)
			return damaged(err, path, pgno, "node %u lies outside the page", i);
	}
	return 0;
}

/* Where the in-order walk of the leaves stands. */
typedef struct lm_walk {
	uint64_t count; /* records so far */
	uint64_t prev;  /* the last key, when count > 0 */
	uint64_t floor; /* the next key may not be below this separator */
} lm_walk;

/* The records of leaf page pgno: 8-byte keys in increasing order from
 * where the walk stands, values inside the page or, on overflow pages,
 * inside the file (from the node's size and page number: the pages
 * themselves are not read). */
static int check_leaf(const char *path, lm_layout *lay, const uint8_t *p,
		      uint64_t pgno, unsigned n, lm_walk *w, ims_error *err)
{
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *node = p + ld16(p + LM_PAGEHDR + 2 * i);
		unsigned flags = ld16(node + 4), ksize = ld16(node + 6);
		uint64_t dsize = ld16(node) | (uint64_t)ld16(node + 2) << 16;
		uint64_t room = lay->psize - (uint64_t)(node - p) - LM_NODE - ksize;
		if (ksize != RIO_KEY_SIZE)
			return damaged(err, path, pgno, "node %u has a %u-byte key", i, ksize);
		uint64_t key = be64(node + LM_NODE);
		if (w->count && key <= w->prev)
			return damaged(err, path, pgno, "key %llu follows key %llu",
				       (unsigned long long)key,
				       (unsigned long long)w->prev);
		if (key < w->floor)
			return damaged(err, path, pgno,
				       "key %llu lies left of its branch's key %llu",
				       (unsigned long long)key,
				       (unsigned long long)w->floor);
		if (!w->count)
			lay->first_key = pgno * lay->psize +
					 (uint64_t)(node - p) + LM_NODE;
		w->prev = key;
		if (flags == 0) {
			if (dsize > room)
				return damaged(err, path, pgno,
					       "the value of node %u runs past the page", i);
		} else if (flags == LM_F_BIGDATA) {
			if (room < 8)
				return damaged(err, path, pgno, "node %u lies outside the page", i);
			uint64_t ov = ld64(node + LM_NODE + ksize);
			if (ov < 2 || ov > lay->last_pg ||
			    dsize > (lay->last_pg + 1 - ov) * lay->psize - LM_PAGEHDR)
				return damaged(err, path, pgno,
					       "the value of node %u (%llu bytes on page %llu) runs past the file",
					       i, (unsigned long long)dsize,
					       (unsigned long long)ov);
		} else {
			return damaged(err, path, pgno, "node %u has flags 0x%x", i, flags);
		}
		w->count++;
	}
	return 0;
}

static int read_page(int fd, const char *path, const lm_layout *lay,
		     uint64_t pgno, uint8_t *buf, ims_error *err)
{
	ssize_t n = pread(fd, buf, lay->psize, (off_t)(pgno * lay->psize));
	RETURN_IF(n != (ssize_t)lay->psize, err, IMS_EIO,
		  "cannot read page %llu of shard '%s': %s",
		  (unsigned long long)pgno, path,
		  n < 0 ? strerror(errno) : "the file is shorter than it was");
	return 0;
}

/* Asks the kernel for the children of a checked branch page at once: on a
 * cold shard they are scattered among the values' pages, and read one by
 * one each would wait for the disk in turn. */
static void prefetch_children(int fd, const lm_layout *lay, const uint8_t *p,
			      unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *node = p + ld16(p + LM_PAGEHDR + 2 * i);
		uint64_t child = ld16(node) | (uint64_t)ld16(node + 2) << 16 |
				 (uint64_t)ld16(node + 4) << 32;
		if (child <= lay->last_pg)
			posix_fadvise(fd, (off_t)(child * lay->psize), lay->psize,
				      POSIX_FADV_WILLNEED);
	}
}

/*
 * Walks the main database's branch and leaf pages once, from the root,
 * and checks everything of them that LMDB's cursors take on trust (LMDB
 * reads nodes at the offsets a page states, follows child page numbers
 * through branches whatever their kind, treats flagged nodes as
 * sub-databases, and asserts or faults on what it does not expect):
 * each page's number and kind, branch pages above leaf pages and every
 * leaf at the depth the meta page states, node offsets and sizes inside
 * the page, child page numbers inside the file and each page reached once
 * (no cycle, no shared subtree: the walk is linear in the tree's pages),
 * and, per leaf, 8-byte keys in increasing order, values inside the file
 * and as many records as the meta page states. With those, every key is
 * one of first..last, and a cursor never leaves the file.
 *
 * Cost: one pass over the branch and leaf pages, which LMDB would read for
 * the first lookups anyway. Overflow pages (any value over ~2 KB with 4 KB
 * pages: every real image) are never read here, so opening stays cheap
 * however many gigabytes of images a shard holds: records of 2 KB or more
 * take ~26 bytes of leaf each, about 150 per 4 KB leaf page. An 836 MB
 * shard of 42,500 images has 676 such pages (2.7 MB): its open took
 * 0.7-1.0 ms instead of 0.03 ms from the page cache, and 7-8 ms instead of
 * 16-23 ms with the file out of the cache (docs/RELIABILITY.md).
 */
static int check_tree(int fd, const char *path, lm_layout *lay, ims_error *err)
{
	if (lay->root == LM_P_INVALID)
		return lay->depth == 0 ? 0 :
		       ims_fail(err, IMS_ECORRUPT,
				"cannot open shard '%s': an empty tree of depth %u",
				path, lay->depth);
	if (lay->depth < 1 || lay->depth > LM_MAX_DEPTH)
		return ims_fail(err, IMS_ECORRUPT,
				"cannot open shard '%s': its tree is %u pages deep",
				path, lay->depth);
	/* one page buffer per level of the path from the root */
	uint8_t *seen = calloc(lay->last_pg / 8 + 1, 1);
	uint8_t *pages = malloc((size_t)lay->depth * lay->psize);
	if (!seen || !pages) {
		free(seen);
		free(pages);
		return ims_fail(err, IMS_ENOMEM, "out of memory");
	}
	struct {
		uint64_t pgno;
		unsigned n, next;
	} path_[LM_MAX_DEPTH];
	lm_walk w = {0, 0, 0};
	unsigned top = 0, leaf_level = lay->depth - 1;
	path_[0].pgno = lay->root;
	path_[0].next = 0;
	seen[lay->root / 8] |= (uint8_t)(1u << lay->root % 8);
	int rc = read_page(fd, path, lay, lay->root, pages, err);
	if (!rc)
		rc = check_page(path, lay, pages, lay->root,
				leaf_level ? LM_P_BRANCH : LM_P_LEAF, &path_[0].n,
				err);
	if (!rc && leaf_level)
		prefetch_children(fd, lay, pages, path_[0].n);
	while (!rc) {
		const uint8_t *p = pages + (size_t)top * lay->psize;
		if (top == leaf_level) {
			rc = check_leaf(path, lay, p, path_[top].pgno, path_[top].n,
					&w, err);
			if (rc || top == 0)
				break;
			top--;
			continue;
		}
		if (path_[top].next == path_[top].n) {
			if (top == 0)
				break;
			top--;
			continue;
		}
		const uint8_t *node = p + ld16(p + LM_PAGEHDR + 2 * path_[top].next);
		uint64_t child = ld16(node) | (uint64_t)ld16(node + 2) << 16 |
				 (uint64_t)ld16(node + 4) << 32;
		if (child < 2 || child > lay->last_pg) {
			rc = damaged(err, path, path_[top].pgno,
				     "node %u points to page %llu, outside pages 2..%llu",
				     path_[top].next, (unsigned long long)child,
				     (unsigned long long)lay->last_pg);
			break;
		}
		if (seen[child / 8] & (1u << child % 8)) {
			rc = damaged(err, path, path_[top].pgno,
				     "node %u points to page %llu, reached before",
				     path_[top].next, (unsigned long long)child);
			break;
		}
		/* LMDB's lookups pick child i by the key of node i (node 0's
		 * is unused): it must sit between the subtrees it separates,
		 * or records are in the tree but no lookup finds them. */
		if (path_[top].next > 0) {
			unsigned ks = ld16(node + 6);
			uint64_t sep = ks == RIO_KEY_SIZE ? be64(node + LM_NODE) : 0;
			if (ks != RIO_KEY_SIZE || (w.count && w.prev >= sep)) {
				rc = damaged(err, path, path_[top].pgno,
					     "node %u has a bad key", path_[top].next);
				break;
			}
			if (sep > w.floor)
				w.floor = sep;
		}
		seen[child / 8] |= (uint8_t)(1u << child % 8);
		path_[top].next++;
		top++;
		path_[top].pgno = child;
		path_[top].next = 0;
		uint8_t *cp = pages + (size_t)top * lay->psize;
		rc = read_page(fd, path, lay, child, cp, err);
		if (!rc)
			rc = check_page(path, lay, cp, child,
					top == leaf_level ? LM_P_LEAF : LM_P_BRANCH,
					&path_[top].n, err);
		if (!rc && top < leaf_level)
			prefetch_children(fd, lay, cp, path_[top].n);
	}
	free(pages);
	free(seen);
	if (!rc && w.count != lay->entries)
		rc = ims_fail(err, IMS_ECORRUPT,
			      "cannot open shard '%s': its leaves hold %llu records, its meta page says %llu",
			      path, (unsigned long long)w.count,
			      (unsigned long long)lay->entries);
	return rc;
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
	rc = check_meta(fd, s->path, info->bytes, &lay, err);
	if (!rc)
		rc = check_tree(fd, s->path, &lay, err);
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
		return ims_fail(err, IMS_ECORRUPT, "cannot read shard '%s': %s",
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
		s->guard = -1;
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
		return ims_fail(err, IMS_ECORRUPT, "cannot read record %llu from shard '%s': %s",
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
	return 0;
}
