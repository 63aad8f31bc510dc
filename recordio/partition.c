/*
 * partition.c - each rank's share of an epoch, computed locally.
 *
 * All ranks derive the same permutation from (seed, epoch) and take a
 * strided slice of it, so shares are disjoint and cover the split without
 * any communication, and every rank gets the same count: unequal counts
 * would leave one rank waiting forever in an allreduce.
 */
#include "recordio.h"

#include <stdlib.h>

uint64_t rio_partition_size(uint64_t n, int world, rio_remainder mode)
{
	if (world <= 0)
		return 0;
	uint64_t w = (uint64_t)world;
	return mode == RIO_REMAINDER_DROP ? n / w : (n + w - 1) / w;
}

int rio_partition(uint64_t n, int rank, int world, uint64_t epoch,
		  uint64_t seed, int shuffle, rio_remainder mode, uint64_t *out,
		  rio_partition_info *info, ims_error *err)
{
	RETURN_IF(world <= 0 || rank < 0 || rank >= world, err, IMS_EINVAL,
		  "rank %d is not in a world of %d", rank, world);
	RETURN_IF(mode != RIO_REMAINDER_PAD && mode != RIO_REMAINDER_DROP, err,
		  IMS_EINVAL, "unknown remainder mode %d", (int)mode);
	RETURN_IF(n == 0, err, IMS_EINVAL, "cannot partition an empty split");
	uint64_t per = rio_partition_size(n, world, mode);
	uint64_t *perm = NULL;
	if (shuffle) {
		perm = malloc(n * sizeof(*perm));
		RETURN_IF(!perm, err, IMS_ENOMEM,
			  "cannot partition %llu records: out of memory",
			  (unsigned long long)n);
		for (uint64_t i = 0; i < n; i++)
			perm[i] = i;
		ims_rng rng;
		ims_rng_seed(&rng, seed, ims_hash64(0x70617274ull, epoch));
		for (uint64_t i = n - 1; i > 0; i--) {
			uint64_t j = ims_rng_below(&rng, i + 1);
			uint64_t t = perm[i];
			perm[i] = perm[j];
			perm[j] = t;
		}
	}
	uint64_t w = (uint64_t)world;
	for (uint64_t k = 0; k < per; k++) {
		uint64_t pos = (uint64_t)rank + k * w;
		/* Past the end only under PAD: wrap to the start of the order
		 * (more than once when there are fewer records than ranks). */
		if (pos >= n)
			pos %= n;
		out[k] = perm ? perm[pos] : pos;
	}
	free(perm);
	if (info) {
		info->per_rank = per;
		info->padded = per * w > n ? per * w - n : 0;
		info->dropped = per * w < n ? n - per * w : 0;
	}
	return 0;
}
