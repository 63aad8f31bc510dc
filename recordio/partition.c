/*
 * partition.c - each rank's share of an epoch, computed locally.
 *
 * All ranks derive the same permutation from (seed, epoch) and take a
 * strided slice of it, so shares are disjoint and cover the split without
 * any communication, and every rank gets the same count: unequal counts
 * would leave one rank waiting forever in an allreduce. Positions before
 * an offset were consumed by an earlier part of the run (which may have
 * had another rank count): the slice starts after them.
 */
#include "recordio.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

uint64_t rio_partition_size(uint64_t n, int world, rio_remainder mode)
{
	if (world <= 0)
		return 0;
	uint64_t w = (uint64_t)world;
	/* not (n + w - 1) / w: that wraps to 0 for n near 2^64 */
	return mode == RIO_REMAINDER_DROP ? n / w : n / w + (n % w != 0);
}

void rio_partition_opts_init(rio_partition_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->world = 1;
	o->shuffle = 1;
	o->remainder = RIO_REMAINDER_DROP;
}

uint64_t rio_partition_count(const rio_partition_opts *o)
{
	if (o->offset >= o->n)
		return 0;
	return rio_partition_size(o->n - o->offset, o->world, o->remainder);
}

int rio_partition(const rio_partition_opts *o, uint64_t *out,
		  rio_partition_info *info, ims_error *err)
{
	const uint64_t n = o->n;
	RETURN_IF(o->world <= 0 || o->rank < 0 || o->rank >= o->world, err,
		  IMS_EINVAL, "rank %d is not in a world of %d", o->rank, o->world);
	RETURN_IF(o->remainder != RIO_REMAINDER_PAD &&
			  o->remainder != RIO_REMAINDER_DROP,
		  err, IMS_EINVAL, "unknown remainder mode %d", (int)o->remainder);
	RETURN_IF(n == 0, err, IMS_EINVAL, "cannot partition an empty split");
	RETURN_IF(o->offset >= n, err, IMS_EINVAL,
		  "cannot start an epoch of %llu records at position %llu",
		  (unsigned long long)n, (unsigned long long)o->offset);
	const uint64_t rest = n - o->offset;
	uint64_t per = rio_partition_count(o);
	uint64_t *perm = NULL;
	if (o->shuffle) {
		/* n * 8 wraps for n >= 2^61: a small buffer the shuffle below
		 * would then write n entries into. */
		RETURN_IF(n > SIZE_MAX / sizeof(*perm), err, IMS_ENOMEM,
			  "cannot partition %llu records: their order needs more than %zu bytes",
			  (unsigned long long)n, (size_t)SIZE_MAX);
		perm = malloc(n * sizeof(*perm));
		RETURN_IF(!perm, err, IMS_ENOMEM,
			  "cannot partition %llu records: their order needs %llu bytes (out of memory)",
			  (unsigned long long)n,
			  (unsigned long long)(n * sizeof(*perm)));
		for (uint64_t i = 0; i < n; i++)
			perm[i] = i;
		ims_rng rng;
		ims_rng_seed(&rng, o->seed, ims_hash64(0x70617274ull, o->epoch));
		for (uint64_t i = n - 1; i > 0; i--) {
			uint64_t j = ims_rng_below(&rng, i + 1);
			uint64_t t = perm[i];
			perm[i] = perm[j];
			perm[j] = t;
		}
	}
	uint64_t w = (uint64_t)o->world;
	for (uint64_t k = 0; k < per; k++) {
		/* k * w <= rest - 1, so rank + k * w wraps only when rest is
		 * within world of 2^64, and then the true position lies in
		 * [rest, 2 * rest): one subtraction, in wrapping arithmetic,
		 * takes it back. */
		uint64_t pos;
		if (__builtin_add_overflow((uint64_t)o->rank, k * w, &pos))
			pos -= rest;
		/* Past the end only under PAD: wrap to the start of the rest
		 * of the order (more than once when it holds fewer records
		 * than ranks). */
		else if (pos >= rest)
			pos %= rest;
		pos += o->offset;
		out[k] = perm ? perm[pos] : pos;
	}
	free(perm);
	if (info) {
		info->per_rank = per;
		/* per * w itself can wrap when rest is near 2^64 */
		uint64_t part = rest % w;
		info->padded = o->remainder == RIO_REMAINDER_PAD && part ? w - part : 0;
		info->dropped = o->remainder == RIO_REMAINDER_DROP ? part : 0;
	}
	return 0;
}
