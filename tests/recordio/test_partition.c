/* test_partition.c - rank shares: disjoint, covering, equal lengths for
 * every world size 1..8, deterministic, reshuffled per epoch. */
#include "rio_test_util.h"
#include "test.h"

static void check_world(uint64_t n, int world, rio_remainder mode, int shuffle)
{
	ims_error e;
	uint64_t per = rio_partition_size(n, world, mode);
	uint64_t *out = malloc((per + 1) * sizeof(*out));
	int *seen = calloc(n, sizeof(int));
	uint64_t total = 0;
	rio_partition_info info = {0};
	for (int r = 0; r < world; r++) {
		CHECK_OK(rio_partition(n, r, world, 3, 99, shuffle, mode, out, &info, &e), &e);
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
	CHECK_OK(rio_partition(400, 1, 4, 5, 7, 1, RIO_REMAINDER_PAD, a, NULL, &e), &e);
	CHECK_OK(rio_partition(400, 1, 4, 5, 7, 1, RIO_REMAINDER_PAD, b, NULL, &e), &e);
	CHECK_OK(rio_partition(400, 1, 4, 6, 7, 1, RIO_REMAINDER_PAD, c, NULL, &e), &e);
	CHECK_OK(rio_partition(400, 1, 4, 5, 8, 1, RIO_REMAINDER_PAD, d, NULL, &e), &e);
	CHECK_MEM(a, b, sizeof(a));
	CHECK(memcmp(a, c, sizeof(a)) != 0);
	CHECK(memcmp(a, d, sizeof(a)) != 0);
	CHECK_OK(rio_partition(400, 1, 4, 5, 7, 0, RIO_REMAINDER_PAD, a, NULL, &e), &e);
	for (int k = 0; k < 100; k++)
		CHECK_EQ_U64(a[k], 1 + 4 * (uint64_t)k);

	/* The union of all ranks' shares at world W equals the single-rank
	 * order's set, so N-rank and 1-rank epochs see the same data. */
	uint64_t n = 10;
	rio_partition_info info;
	uint64_t o[3];
	CHECK_OK(rio_partition(n, 2, 4, 0, 1, 1, RIO_REMAINDER_PAD, o, &info, &e), &e);
	CHECK_EQ_U64(info.per_rank, 3);
	CHECK_EQ_U64(info.padded, 2);
	CHECK_OK(rio_partition(n, 2, 4, 0, 1, 1, RIO_REMAINDER_DROP, o, &info, &e), &e);
	CHECK_EQ_U64(info.per_rank, 2);
	CHECK_EQ_U64(info.dropped, 2);

	/* Bad arguments. */
	CHECK_EQ_INT(rio_partition(10, 4, 4, 0, 0, 0, RIO_REMAINDER_PAD, o, NULL, &e), IMS_EINVAL);
	CHECK_EQ_INT(rio_partition(10, 0, 0, 0, 0, 0, RIO_REMAINDER_PAD, o, NULL, &e), IMS_EINVAL);
	CHECK_EQ_INT(rio_partition(0, 0, 1, 0, 0, 0, RIO_REMAINDER_PAD, o, NULL, &e), IMS_EINVAL);
	CHECK_EQ_U64(rio_partition_size(10, 3, RIO_REMAINDER_PAD), 4);
	CHECK_EQ_U64(rio_partition_size(10, 3, RIO_REMAINDER_DROP), 3);
	return TEST_EXIT();
}
