/* test_partition.c - rank shares: disjoint, covering, equal lengths for
 * every world size 1..8, deterministic, reshuffled per epoch; an epoch
 * continued from a position with another rank count sees each record of
 * the rest once; sizes whose byte counts overflow are refused, not
 * written past. */
#include "rio_test_util.h"
#include "test.h"

/* rio_partition with the fields of the old positional call. */
static int part(uint64_t n, int rank, int world, uint64_t epoch, uint64_t seed,
		int shuffle, rio_remainder mode, uint64_t offset, uint64_t *out,
		rio_partition_info *info, ims_error *e)
{
	rio_partition_opts o;
	rio_partition_opts_init(&o);
	o.n = n;
	o.rank = rank;
	o.world = world;
	o.epoch = epoch;
	o.seed = seed;
	o.shuffle = shuffle;
	o.remainder = mode;
	o.offset = offset;
	return rio_partition(&o, out, info, e);
}

static void check_world(uint64_t n, int world, rio_remainder mode, int shuffle)
{
	ims_error e;
	uint64_t per = rio_partition_size(n, world, mode);
	uint64_t *out = malloc((per + 1) * sizeof(*out));
	int *seen = calloc(n, sizeof(int));
	uint64_t total = 0;
	rio_partition_info info = {0};
	for (int r = 0; r < world; r++) {
		CHECK_OK(part(n, r, world, 3, 99, shuffle, mode, 0, out, &info, &e), &e);
		CHECK_EQ_U64(info.per_rank, per);
		for (uint64_t k = 0; k < per; k++) {
			CHECK(out[k] < n);
			if (out[k] < n)
				seen[out[k]]++;
		}
		total += per;
	}
	uint64_t dup = 0, missing = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (seen[i] == 0)
			missing++;
		if (seen[i] > 1)
			dup += (uint64_t)seen[i] - 1;
	}
	if (mode == RIO_REMAINDER_PAD) {
		CHECK_EQ_U64(missing, 0);      /* covering */
		CHECK_EQ_U64(dup, info.padded); /* only the stated padding repeats */
		CHECK_EQ_U64(total, n + info.padded);
		CHECK(info.padded < (uint64_t)world);
	} else {
		CHECK_EQ_U64(dup, 0); /* disjoint */
		CHECK_EQ_U64(missing, info.dropped);
		CHECK_EQ_U64(total + info.dropped, n);
		CHECK(info.dropped < (uint64_t)world);
	}
	free(out);
	free(seen);
}

/*
 * An epoch of n records started at w1 ranks and continued from position p
 * at w2 ranks: the first part's shares (positions [0, p), p a multiple of
 * w1) and the rest's (DROP) see no record twice, and miss exactly the
 * rest's dropped ones, the last of the order.
 */
static void check_offsets(void)
{
	ims_error e;
	const uint64_t n = 103;
	uint64_t order[103], out[103];
	CHECK_OK(part(n, 0, 1, 4, 21, 1, RIO_REMAINDER_DROP, 0, order, NULL, &e), &e);
	for (int w1 = 1; w1 <= 4; w1++)
		for (int w2 = 1; w2 <= 4; w2++)
			for (uint64_t p = 0; p < n; p += (uint64_t)w1 * 7) {
				int seen[103] = {0};
				for (int r = 0; r < w1; r++) {
					CHECK_OK(part(n, r, w1, 4, 21, 1, RIO_REMAINDER_DROP, 0,
						      out, NULL, &e), &e);
					for (uint64_t k = 0; k < p / (uint64_t)w1; k++)
						seen[out[k]]++;
				}
				rio_partition_info info;
				for (int r = 0; r < w2; r++) {
					CHECK_OK(part(n, r, w2, 4, 21, 1, RIO_REMAINDER_DROP, p,
						      out, &info, &e), &e);
					CHECK_EQ_U64(info.per_rank, (n - p) / (uint64_t)w2);
					for (uint64_t k = 0; k < info.per_rank; k++) {
						/* the global position of the order */
						CHECK_EQ_U64(out[k], order[p + (uint64_t)r + k * (uint64_t)w2]);
						seen[out[k]]++;
					}
				}
				uint64_t twice = 0, missed = 0;
				for (uint64_t i = 0; i < n; i++) {
					twice += seen[i] > 1;
					missed += seen[i] == 0;
				}
				CHECK_EQ_U64(twice, 0);
				CHECK_EQ_U64(missed, info.dropped);
				/* the dropped ones end the order */
				for (uint64_t i = n - info.dropped; i < n; i++)
					CHECK_EQ_INT(seen[order[i]], 0);
			}
	/* PAD wraps to the offset, never before it */
	rio_partition_info info;
	CHECK_OK(part(10, 2, 3, 0, 0, 0, RIO_REMAINDER_PAD, 6, out, &info, &e), &e);
	CHECK_EQ_U64(info.per_rank, 2);
	CHECK_EQ_U64(info.padded, 2);
	CHECK_EQ_U64(out[0], 8);
	CHECK_EQ_U64(out[1], 7); /* position 5 of the rest wraps to 1: record 7 */
}

/*
 * Sizes near 2^64. The shuffled order takes n * 8 bytes, which wraps for
 * n >= 2^61: it must be refused by name, not allocated short and written
 * past. Counts and padding must not wrap either.
 */
static void check_huge(void)
{
	ims_error e;
	uint64_t out[4];
	rio_partition_info info;
	const uint64_t wraps = (1ull << 61) + 1; /* * 8 wraps to 8 */
	ims_error_clear(&e);
	CHECK_EQ_INT(part(wraps, 0, 1, 0, 0, 1, RIO_REMAINDER_DROP, wraps - 2, out,
			  NULL, &e), IMS_ENOMEM);
	CHECK(strstr(e.msg, "2305843009213693953 records") != NULL);
	ims_error_clear(&e);
	CHECK_EQ_INT(part(UINT64_MAX, 1, 2, 0, 0, 1, RIO_REMAINDER_PAD,
			  UINT64_MAX - 3, out, NULL, &e), IMS_ENOMEM);
	CHECK(strstr(e.msg, "18446744073709551615 records") != NULL);

	/* (n + w - 1) / w wrapped to 0 */
	CHECK_EQ_U64(rio_partition_size(UINT64_MAX, 2, RIO_REMAINDER_PAD),
		     1ull << 63);
	CHECK_EQ_U64(rio_partition_size(UINT64_MAX, 1, RIO_REMAINDER_PAD),
		     UINT64_MAX);
	CHECK_EQ_U64(rio_partition_size(UINT64_MAX, 2, RIO_REMAINDER_DROP),
		     (1ull << 63) - 1);

	/* unshuffled, the last positions of the largest split */
	CHECK_OK(part(UINT64_MAX, 1, 2, 0, 0, 0, RIO_REMAINDER_PAD,
		      UINT64_MAX - 3, out, &info, &e), &e);
	CHECK_EQ_U64(info.per_rank, 2);
	CHECK_EQ_U64(info.padded, 1);
	CHECK_EQ_U64(out[0], UINT64_MAX - 2);
	CHECK_EQ_U64(out[1], UINT64_MAX - 3); /* position 3 of 3 wraps to 0 */
}

int main(void)
{
	ims_error e;
	uint64_t sizes[] = {1, 7, 8, 9, 100, 1001, 4096};
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (int w = 1; w <= 8; w++)
			for (int shuffle = 0; shuffle < 2; shuffle++) {
				if (sizes[s] >= (uint64_t)w)
					check_world(sizes[s], w, RIO_REMAINDER_DROP, shuffle);
				check_world(sizes[s], w, RIO_REMAINDER_PAD, shuffle);
			}

	/* Deterministic for (seed, epoch); another epoch reshuffles; another
	 * seed differs; no shuffle is the identity stride. */
	uint64_t a[100], b[100], c[100], d[100];
	CHECK_OK(part(400, 1, 4, 5, 7, 1, RIO_REMAINDER_PAD, 0, a, NULL, &e), &e);
	CHECK_OK(part(400, 1, 4, 5, 7, 1, RIO_REMAINDER_PAD, 0, b, NULL, &e), &e);
	CHECK_OK(part(400, 1, 4, 6, 7, 1, RIO_REMAINDER_PAD, 0, c, NULL, &e), &e);
	CHECK_OK(part(400, 1, 4, 5, 8, 1, RIO_REMAINDER_PAD, 0, d, NULL, &e), &e);
	CHECK_MEM(a, b, sizeof(a));
	CHECK(memcmp(a, c, sizeof(a)) != 0);
	CHECK(memcmp(a, d, sizeof(a)) != 0);
	CHECK_OK(part(400, 1, 4, 5, 7, 0, RIO_REMAINDER_PAD, 0, a, NULL, &e), &e);
	for (int k = 0; k < 100; k++)
		CHECK_EQ_U64(a[k], 1 + 4 * (uint64_t)k);

	/* The union of all ranks' shares at world W equals the single-rank
	 * order's set, so N-rank and 1-rank epochs see the same data. */
	uint64_t n = 10;
	rio_partition_info info;
	uint64_t o[3];
	CHECK_OK(part(n, 2, 4, 0, 1, 1, RIO_REMAINDER_PAD, 0, o, &info, &e), &e);
	CHECK_EQ_U64(info.per_rank, 3);
	CHECK_EQ_U64(info.padded, 2);
	CHECK_OK(part(n, 2, 4, 0, 1, 1, RIO_REMAINDER_DROP, 0, o, &info, &e), &e);
	CHECK_EQ_U64(info.per_rank, 2);
	CHECK_EQ_U64(info.dropped, 2);

	/* Bad arguments. */
	CHECK_EQ_INT(part(10, 4, 4, 0, 0, 0, RIO_REMAINDER_PAD, 0, o, NULL, &e), IMS_EINVAL);
	CHECK_EQ_INT(part(10, 0, 0, 0, 0, 0, RIO_REMAINDER_PAD, 0, o, NULL, &e), IMS_EINVAL);
	CHECK_EQ_INT(part(0, 0, 1, 0, 0, 0, RIO_REMAINDER_PAD, 0, o, NULL, &e), IMS_EINVAL);
	CHECK_EQ_INT(part(10, 0, 1, 0, 0, 0, RIO_REMAINDER_PAD, 10, o, NULL, &e), IMS_EINVAL);
	CHECK_EQ_U64(rio_partition_size(10, 3, RIO_REMAINDER_PAD), 4);
	CHECK_EQ_U64(rio_partition_size(10, 3, RIO_REMAINDER_DROP), 3);
	check_offsets();
	check_huge();
	return TEST_EXIT();
}
