/*
 * test_memplan.c - the arena placement (train/memplan.c): buffers whose
 * lifetimes meet never share a byte, buffers that never live together
 * reuse bytes, the greedy order and arena size on hand-worked cases, the
 * overlap finder catches a broken placement, bad arguments.
 */
#include <string.h>

#include "common/common.h"
#include "test.h"
#include "train/memplan.h"

static nn_mp_buf buf(size_t bytes, int first, int last)
{
	return (nn_mp_buf){.bytes = bytes, .first = first, .last = last};
}

static void hand_worked(void)
{
	ims_error err;
	size_t arena = 0;
	/* A [0,2] and B [3,5] never live together: one place. C [1,4] meets
	 * both: its own. Largest first: A at 0; B (same size, later start)
	 * at 0 beside nothing it meets; C at 1024. */
	nn_mp_buf b[3] = {buf(1000, 0, 2), buf(1000, 3, 5), buf(500, 1, 4)};
	CHECK_OK(nn_mp_assign(b, 3, 256, &arena, &err), &err);
	CHECK_EQ_U64(b[0].offset, 0);
	CHECK_EQ_U64(b[1].offset, 0);
	CHECK_EQ_U64(b[2].offset, 1024);
	CHECK_EQ_U64(arena, 1536);

	/* lifetimes that share one step (a kernel reads one and writes the
	 * other) do not share bytes */
	nn_mp_buf t[2] = {buf(64, 0, 2), buf(64, 2, 4)};
	CHECK_OK(nn_mp_assign(t, 2, 64, &arena, &err), &err);
	CHECK(t[0].offset != t[1].offset);
	CHECK_EQ_U64(arena, 128);

	/* largest first: Y [0,9] at 0, X [0,1] after it, and Z [5,9],
	 * which meets Y but not X, reuses X's bytes */
	nn_mp_buf g[3] = {buf(4096, 0, 1), buf(8192, 0, 9), buf(2048, 5, 9)};
	CHECK_OK(nn_mp_assign(g, 3, 256, &arena, &err), &err);
	CHECK_EQ_U64(g[1].offset, 0);
	CHECK_EQ_U64(g[0].offset, 8192);
	CHECK_EQ_U64(g[2].offset, 8192);
	CHECK_EQ_U64(arena, 12288);

	/* zero-byte buffers take nothing */
	nn_mp_buf z[2] = {buf(0, 0, 9), buf(10, 0, 9)};
	CHECK_OK(nn_mp_assign(z, 2, 16, &arena, &err), &err);
	CHECK_EQ_U64(arena, 16);
	CHECK_OK(nn_mp_assign(NULL, 0, 16, &arena, &err), &err);
	CHECK_EQ_U64(arena, 0);
}

/* The largest sum of sizes live at one step: no placement does better. */
static size_t live_peak(const nn_mp_buf *b, int n, int steps, size_t align)
{
	size_t peak = 0;
	for (int s = 0; s < steps; s++) {
		size_t sum = 0;
		for (int i = 0; i < n; i++)
			if (b[i].first <= s && s <= b[i].last)
				sum += (b[i].bytes + align - 1) & ~(align - 1);
		peak = sum > peak ? sum : peak;
	}
	return peak;
}

static void random_lifetimes(void)
{
	ims_rng r;
	ims_rng_seed(&r, 42, 1);
	enum { N = 300, STEPS = 120 };
	static nn_mp_buf b[N];
	for (int round = 0; round < 20; round++) {
		size_t total = 0;
		for (int i = 0; i < N; i++) {
			int a = (int)(ims_rng_uniform(&r) * STEPS);
			int len = (int)(ims_rng_uniform(&r) * ims_rng_uniform(&r) * STEPS);
			b[i] = buf(1 + (size_t)(ims_rng_uniform(&r) * 100000), a,
				   a + len < STEPS ? a + len : STEPS - 1);
			if (round % 4 == 0 && i % 3 == 0)
				b[i].bytes = 4096; /* equal sizes: the tie rules */
			total += (b[i].bytes + 255) & ~(size_t)255;
		}
		size_t arena = 0;
		ims_error err;
		CHECK_OK(nn_mp_assign(b, N, 256, &arena, &err), &err);
		int i = -1, j = -1;
		CHECK_EQ_INT(nn_mp_find_overlap(b, N, &i, &j), 0);
		size_t lo = live_peak(b, N, STEPS, 256);
		CHECK(arena >= lo);
		CHECK(arena < total); /* reuse happened */
		size_t end = 0;
		for (int k = 0; k < N; k++) {
			CHECK_EQ_U64(b[k].offset % 256, 0);
			size_t e = b[k].offset + b[k].bytes;
			end = e > end ? e : end;
		}
		CHECK(end <= arena);
		/* greedy by size stays near the bound on such inputs */
		CHECK(arena <= lo + lo / 2);
		/* the same input gives the same placement */
		static nn_mp_buf again[N];
		memcpy(again, b, sizeof(b));
		size_t arena2 = 0;
		CHECK_OK(nn_mp_assign(again, N, 256, &arena2, &err), &err);
		CHECK_EQ_U64(arena2, arena);
		CHECK(memcmp(again, b, sizeof(b)) == 0);
	}
}

static void overlap_found(void)
{
	/* two live buffers sharing one byte are reported; touching ends or
	 * disjoint lifetimes are not */
	nn_mp_buf b[4] = {buf(100, 0, 3), buf(100, 3, 6), buf(100, 7, 9),
			  buf(100, 0, 9)};
	b[0].offset = 0;
	b[1].offset = 100;
	b[2].offset = 0;
	b[3].offset = 200;
	int i = -1, j = -1;
	CHECK_EQ_INT(nn_mp_find_overlap(b, 4, &i, &j), 0);
	b[1].offset = 99; /* meets b[0] at step 3, shares byte 99 */
	CHECK_EQ_INT(nn_mp_find_overlap(b, 4, &i, &j), 1);
	CHECK_EQ_INT(i, 0);
	CHECK_EQ_INT(j, 1);
	b[1].offset = 100;
	b[2].offset = 250; /* b[3] lives at 7..9 too */
	CHECK_EQ_INT(nn_mp_find_overlap(b, 4, &i, &j), 1);
	CHECK_EQ_INT(i, 2);
	CHECK_EQ_INT(j, 3);
}

static void bad_arguments(void)
{
	ims_error err;
	size_t arena = 7;
	nn_mp_buf b[1] = {buf(10, 0, 1)};
	CHECK_EQ_INT(nn_mp_assign(b, 1, 48, &arena, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "power of two") != NULL);
	b[0] = buf(10, 5, 4);
	CHECK_EQ_INT(nn_mp_assign(b, 1, 64, &arena, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "buffer 0") != NULL);
	b[0] = buf(SIZE_MAX - 10, 0, 1);
	CHECK_EQ_INT(nn_mp_assign(b, 1, 64, &arena, &err), IMS_ELIMIT);
}

int main(void)
{
	hand_worked();
	random_lifetimes();
	overlap_found();
	bad_arguments();
	return TEST_EXIT();
}
