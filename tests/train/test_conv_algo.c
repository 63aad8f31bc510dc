/*
 * test_conv_algo.c - choosing convolution algorithms (train/conv_algo.h)
 * with a fake ranked list and fake failures, as the CUDA backend drives
 * it with cuDNN's:
 *   - the first eligible candidate runs and becomes the choice; later
 *     runs try the choice first;
 *   - NOT_SUPPORTED / EXECUTION_FAILED (NN_ALGO_UNSUPPORTED) falls back
 *     to the next in rank order, and the failed one is never tried again;
 *   - candidates whose workspace exceeds the limit, that the ranking
 *     marked unusable, or (deterministic mode) that are not deterministic
 *     are passed over; a choice that no longer fits (a smaller limit) is
 *     left for the next eligible one;
 *   - a fatal error stops at once with its code and message;
 *   - none eligible: IMS_EUNSUPPORTED naming every candidate and why;
 *   - the per-shape cache: one entry per key, found again, three
 *     unranked directions, keys too long refused; mode names.
 */
#include <string.h>

#include "test.h"
#include "train/conv_algo.h"

/* The fake device: what each algorithm number does when tried. */
typedef struct fake {
	int result[16]; /* NN_ALGO_RAN, NN_ALGO_UNSUPPORTED or < 0 */
	int tried[32];  /* algorithm numbers in the order tried */
	int n_tried;
} fake;

static int fake_try(void *ud, const nn_algo_cand *c, ims_error *err)
{
	fake *f = ud;
	f->tried[f->n_tried++] = c->algo;
	int r = f->result[c->algo];
	if (r < 0)
		return ims_fail(err, r, "device lost while running algo %d", c->algo);
	return r;
}

/* Ranked: algo 5 (2 MiB), 3 (nondeterministic), 1, 0 (unusable), 2. */
static void ranked(nn_algo_list *l)
{
	nn_algo_list_init(l);
	const nn_algo_cand c[] = {
		{5, 1, (size_t)2 << 20, 1, 1, -1}, {3, 0, 1024, 0, 1, -1},
		{1, 0, 4096, 1, 1, -1},            {0, 0, 0, 1, 0, -1},
		{2, 0, 0, 1, 1, -1},
	};
	memcpy(l->c, c, sizeof(c));
	l->n = 5;
	l->ranked = 1;
}

static void reset(fake *f)
{
	f->n_tried = 0;
}

int main(void)
{
	ims_error err;
	nn_algo_list l;
	fake f;
	memset(&f, 0, sizeof(f));
	const size_t big = (size_t)1 << 30;

	/* the best runs and is kept */
	ranked(&l);
	CHECK_OK(nn_algo_run(&l, NN_ALGO_HEURISTIC, big, fake_try, &f, "run it",
			     &err),
		 &err);
	CHECK_EQ_INT(l.chosen, 0);
	CHECK_EQ_INT(f.n_tried, 1);
	CHECK_EQ_INT(f.tried[0], 5);

	/* it fails at run time: fall back to 3, never try 5 again */
	reset(&f);
	f.result[5] = NN_ALGO_UNSUPPORTED;
	CHECK_OK(nn_algo_run(&l, NN_ALGO_HEURISTIC, big, fake_try, &f, "run it",
			     &err),
		 &err);
	CHECK_EQ_INT(f.n_tried, 2);
	CHECK_EQ_INT(f.tried[0], 5);
	CHECK_EQ_INT(f.tried[1], 3);
	CHECK_EQ_INT(l.c[l.chosen].algo, 3);
	CHECK(l.failed & 1u);
	f.result[5] = NN_ALGO_RAN; /* would run now: must not be retried */
	reset(&f);
	CHECK_OK(nn_algo_run(&l, NN_ALGO_HEURISTIC, big, fake_try, &f, "run it",
			     &err),
		 &err);
	CHECK_EQ_INT(f.n_tried, 1);
	CHECK_EQ_INT(f.tried[0], 3);

	/* deterministic mode passes over 3 (and the failed 5): 1 */
	reset(&f);
	CHECK_OK(nn_algo_run(&l, NN_ALGO_DETERMINISTIC, big, fake_try, &f,
			     "run it", &err),
		 &err);
	CHECK_EQ_INT(f.n_tried, 1);
	CHECK_EQ_INT(f.tried[0], 1);

	/* a workspace limit of 1000 bytes: 5 (2 MiB), 3 (1024), 1 (4096)
	 * do not fit, 0 is unusable: 2 */
	ranked(&l);
	reset(&f);
	CHECK_EQ_INT(nn_algo_next(&l, NN_ALGO_HEURISTIC, 1000), 4);
	CHECK_OK(nn_algo_run(&l, NN_ALGO_HEURISTIC, 1000, fake_try, &f, "run it",
			     &err),
		 &err);
	CHECK_EQ_INT(f.n_tried, 1);
	CHECK_EQ_INT(f.tried[0], 2);
	/* a choice that no longer fits is left: 5 ran with room, then the
	 * limit shrinks to what a frozen workspace holds */
	ranked(&l);
	reset(&f);
	CHECK_OK(nn_algo_run(&l, NN_ALGO_HEURISTIC, big, fake_try, &f, "run it",
			     &err),
		 &err);
	CHECK_EQ_INT(l.c[l.chosen].algo, 5);
	reset(&f);
	CHECK_OK(nn_algo_run(&l, NN_ALGO_HEURISTIC, 4096, fake_try, &f, "run it",
			     &err),
		 &err);
	CHECK_EQ_INT(f.tried[0], 3);

	/* a fatal error stops the search with its code */
	ranked(&l);
	reset(&f);
	f.result[5] = IMS_EIO;
	CHECK_EQ_INT(nn_algo_run(&l, NN_ALGO_HEURISTIC, big, fake_try, &f,
				 "run it", &err),
		     IMS_EIO);
	CHECK_EQ_INT(f.n_tried, 1);
	CHECK(strstr(err.msg, "device lost") != NULL);
	CHECK_EQ_INT(l.chosen, -1);
	f.result[5] = NN_ALGO_RAN;

	/* all fail: one message naming each and why */
	ranked(&l);
	reset(&f);
	for (int a = 0; a < 6; a++)
		f.result[a] = NN_ALGO_UNSUPPORTED;
	CHECK_EQ_INT(nn_algo_run(&l, NN_ALGO_DETERMINISTIC, 2048, fake_try, &f,
				 "run a convolution", &err),
		     IMS_EUNSUPPORTED);
	CHECK_EQ_INT(f.n_tried, 1); /* 2 alone was eligible */
	CHECK(strstr(err.msg, "cannot run a convolution: no deterministic "
			      "algorithm ran within a 2048-byte workspace") != NULL);
	CHECK(strstr(err.msg, "5 ranked") != NULL);
	CHECK(strstr(err.msg, "algo 5 (workspace)") != NULL);
	CHECK(strstr(err.msg, "algo 3 (nondeterministic)") != NULL);
	CHECK(strstr(err.msg, "algo 1 (workspace)") != NULL);
	CHECK(strstr(err.msg, "algo 0 (not supported)") != NULL);
	CHECK(strstr(err.msg, "algo 2 (failed)") != NULL);
	/* an empty list (nothing ranked) fails alike */
	nn_algo_list_init(&l);
	CHECK_EQ_INT(nn_algo_run(&l, NN_ALGO_BENCHMARK, big, fake_try, &f,
				 "run it", &err),
		     IMS_EUNSUPPORTED);
	CHECK(strstr(err.msg, "0 ranked") != NULL);

	/* the cache */
	nn_algo_cache c;
	memset(&c, 0, sizeof(c));
	nn_algo_entry *e = NULL, *e2 = NULL;
	int added = 0;
	int k1[4] = {1, 2, 3, 4}, k2[4] = {1, 2, 3, 5};
	CHECK_OK(nn_algo_cache_get(&c, k1, sizeof(k1), &e, &added, &err), &err);
	CHECK_EQ_INT(added, 1);
	for (int d = 0; d < NN_ALGO_DIRS; d++) {
		CHECK_EQ_INT(e->dir[d].ranked, 0);
		CHECK_EQ_INT(e->dir[d].chosen, -1);
	}
	e->dir[1].chosen = 2;
	for (int i = 0; i < 100; i++) { /* grows past its first capacity */
		int k[4] = {9, 9, 9, i};
		CHECK_OK(nn_algo_cache_get(&c, k, sizeof(k), &e2, &added, &err),
			 &err);
	}
	CHECK_OK(nn_algo_cache_get(&c, k1, sizeof(k1), &e, &added, &err), &err);
	CHECK_EQ_INT(added, 0);
	CHECK_EQ_INT(e->dir[1].chosen, 2);
	CHECK_OK(nn_algo_cache_get(&c, k2, sizeof(k2), &e2, &added, &err), &err);
	CHECK_EQ_INT(added, 1);
	CHECK_EQ_INT(c.n, 102);
	unsigned char huge[NN_ALGO_KEY_MAX + 1] = {0};
	CHECK_EQ_INT(nn_algo_cache_get(&c, huge, sizeof(huge), &e, &added, &err),
		     IMS_EINVAL);
	nn_algo_cache_release(&c);
	CHECK_EQ_INT(c.n, 0);
	nn_algo_cache_release(NULL);

	CHECK_EQ_STR(nn_algo_mode_name(NN_ALGO_BENCHMARK), "benchmark");
	CHECK_EQ_INT(nn_algo_mode_parse("deterministic"), NN_ALGO_DETERMINISTIC);
	CHECK_EQ_INT(nn_algo_mode_parse("heuristic"), NN_ALGO_HEURISTIC);
	CHECK_EQ_INT(nn_algo_mode_parse("fastest"), -1);
	CHECK(nn_algo_mode_name(7) == NULL);
	return TEST_EXIT();
}
