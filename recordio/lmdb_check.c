/*
 * lmdb_check.c - what LMDB would take on trust in a shard's file,
 * checked with pread before LMDB opens it (reader.c calls it for every
 * shard).
 *
 * LMDB trusts its file: a damaged page number, node offset or value size
 * makes it read outside the page or past the end of the file (SIGSEGV,
 * SIGBUS), or trip an assert (abort). A shard is outside input (copied
 * between machines, half-downloaded, bit-rotted), so its meta pages and
 * its tree of branch and leaf pages are checked here first.
 */
#define _GNU_SOURCE
#include "recordio.h"
#include "reader_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
		uint64_t key = rio_be64(node + LM_NODE);
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
		return ims_fail(err, IMS_ENOMEM, "cannot open shard '%s': out of memory for its %u-level page path", path, lay->depth);
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
			uint64_t sep = ks == RIO_KEY_SIZE ? rio_be64(node + LM_NODE) : 0;
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

int rio_lmdb_check(int fd, const char *path, uint64_t size, lm_layout *lay,
		   ims_error *err)
{
	int rc = check_meta(fd, path, size, lay, err);
	if (!rc)
		rc = check_tree(fd, path, lay, err);
	return rc;
}
