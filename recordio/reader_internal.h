/*
 * reader_internal.h - what the reader's two files share: the check of a
 * shard's LMDB structure that runs before LMDB opens it (lmdb_check.c)
 * and what it finds out about the file for reader.c. Not a public
 * header.
 */
#ifndef IMSHARD_RECORDIO_READER_INTERNAL_H
#define IMSHARD_RECORDIO_READER_INTERNAL_H

#include <stdint.h>

#include "recordio.h"

/* A big-endian uint64, as keys are stored. */
static inline uint64_t rio_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* What the meta page LMDB will use says about the main database. */
typedef struct lm_layout {
	uint32_t psize;
	uint64_t last_pg; /* pages 0..last_pg are in use */
	uint64_t root;    /* UINT64_MAX (LM_P_INVALID) when empty */
	uint64_t entries;
	unsigned depth;
	uint64_t first_key; /* file offset of the first record's key */
} lm_layout;

/*
 * Checks shard file fd (path, for messages; size bytes, as the manifest
 * gives them) as LMDB would read it: both meta pages, then every branch
 * and leaf page of the main database (lmdb_check.c says what and why),
 * filling *lay. 0, or IMS_ECORRUPT, IMS_EFORMAT (not an LMDB file),
 * IMS_EIO or IMS_ENOMEM with a message naming the shard.
 */
int rio_lmdb_check(int fd, const char *path, uint64_t size, lm_layout *lay,
		   ims_error *err);

#endif
