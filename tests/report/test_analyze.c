/*
 * test_analyze.c - the derived figures (report/analyze.c) on fixture runs
 * whose values are worked out by hand in rep_test_util.h: steady speed
 * without the warm-up interval, the split of train_s, speedup and
 * efficiency both ways (per image when the image counts differ), the
 * excess of each term, balance, time to target, grouping, epoch positions.
 */
#define _GNU_SOURCE
#include <math.h>

#include "rep_test_util.h"

#define TOL 1e-9

static char tmp[4096];

static void load(rep_run *r, rep_stats *st, const char *sub,
		 void (*make)(const char *), double target)
{
	char dir[4200];
	ims_error err;
	rep_test_sub(dir, sizeof(dir), tmp, sub);
	if (make)
		make(dir);
	CHECK_OK(rep_run_load(r, dir, &err), &err);
	CHECK_OK(rep_stats_compute(r, target, st, &err), &err);
}

static void test_one_rank(void)
{
	rep_run r;
	rep_stats st;
	load(&r, &st, "a", rep_test_run_a, 0.5);
	CHECK_EQ_INT(st.world, 1);
	CHECK(st.warmup_excluded);
	CHECK_NEAR(st.speed, 100, TOL); /* 50 (warm-up) left out */
	CHECK_NEAR(st.total_speed, 100, TOL);
	CHECK_NEAR(st.ranks[0].step_ms, 100, TOL);
	CHECK_NEAR(st.ranks[0].wait_ms, 1, TOL);
	CHECK_NEAR(st.ranks[0].compute_ms, 95, TOL);
	CHECK_NEAR(st.ranks[0].steady_s, 1.0, TOL);
	CHECK_NEAR(st.ranks[0].warmup_s, 1.0, TOL);
	CHECK_NEAR(st.ranks[0].busy_s, 1.7, TOL); /* summary's word */
	CHECK(st.has_terms);
	CHECK_NEAR(st.terms[REP_T_COMPUTE], 0.95, TOL);
	CHECK_NEAR(st.terms[REP_T_WAIT], 0.01, TOL);
	CHECK_NEAR(st.terms[REP_T_COMM], 0, TOL);
	CHECK_NEAR(st.terms[REP_T_OTHER], 0.04, TOL);
	CHECK_NEAR(st.terms[REP_T_WARMUP], 1.0, TOL);
	CHECK_NEAR(st.terms[REP_T_VAL], 0.2, TOL); /* summary, not the val line's 0.15 */
	CHECK_NEAR(st.terms[REP_T_CKPT], 0.1, TOL);
	CHECK_NEAR(st.terms[REP_T_REST], 0.2, TOL);
	double sum = 0;
	for (int k = 0; k < REP_N_TERMS; k++)
		sum += st.terms[k];
	CHECK_NEAR(sum, st.train_s, TOL);
	CHECK_NEAR(st.busy_ratio, 1, TOL);
	CHECK_NEAR(st.stall_fraction, 0.008, TOL);
	CHECK(st.target_set && st.target_reached);
	CHECK_NEAR(st.target_epochs, 1, 0);
	CHECK_NEAR(st.target_wall_s, 2.2, TOL);
	CHECK_NEAR(st.final_top1, 0.5, TOL);
	CHECK(st.key[0] && strstr(st.key[0], "batch_per_rank=10"));
	CHECK(st.key[1] && strstr(st.key[1], "global_batch=10"));
	/* work-neutral options stay out of the key, work options stay in */
	CHECK(st.key[0] && !strstr(st.key[0], "seed=") && !strstr(st.key[0], "lr="));
	CHECK(st.key[0] && strstr(st.key[0], "model=convnet7") && strstr(st.key[0], "size=32"));
	rep_stats_release(&st);
	rep_run_release(&r);
}

static void test_two_ranks_and_compare(void)
{
	rep_run ra, rb;
	rep_stats a, b;
	load(&ra, &a, "a", NULL, 0.55);
	load(&rb, &b, "b", rep_test_run_b, 0.55);
	CHECK_NEAR(b.ranks[0].speed, 80, TOL);
	CHECK_NEAR(b.ranks[1].speed, 60, TOL);
	CHECK_NEAR(b.speed, 70, TOL);
	CHECK_NEAR(b.total_speed, 140, TOL);
	CHECK_NEAR(b.ranks[1].step_ms, 1000.0 / 6, 1e-9);
	CHECK_NEAR(b.busy_ratio, 2.4 / 1.8, TOL);
	CHECK_EQ_INT(b.busy_max_rank, 1);
	CHECK_EQ_INT(b.busy_min_rank, 0);
	CHECK(b.has_terms);
	CHECK_NEAR(b.terms[REP_T_COMPUTE], 0.975, TOL);
	CHECK_NEAR(b.terms[REP_T_WAIT], 0.01, TOL);
	CHECK_NEAR(b.terms[REP_T_COMM], 0.445, TOL);
	CHECK_NEAR(b.terms[REP_T_OTHER], (1.0 / 6 * 10 - 1.61) / 2, 1e-9);
	CHECK_NEAR(b.terms[REP_T_WARMUP], 1.25, TOL);
	CHECK_NEAR(b.terms[REP_T_REST], 4.0 - (0.975 + 0.01 + 0.445 + (10.0 / 6 - 1.61) / 2 + 1.25 + 0.3 + 0.1), 1e-9);
	/* the target is first met after the second epoch */
	CHECK_NEAR(b.target_epochs, 2, 0);
	CHECK_NEAR(b.target_wall_s, 3.9, TOL);
	CHECK(!a.target_reached);
	CHECK(isnan(a.target_epochs));
	/* same job at both world sizes, whatever the seed and lr */
	CHECK(a.key[0] && b.key[0] && strcmp(a.key[0], b.key[0]) == 0);
	CHECK(a.key[1] && b.key[1] && strcmp(a.key[1], b.key[1]) != 0);

	rep_compare c;
	rep_compare_runs(&a, &b, &c);
	CHECK_NEAR(c.speedup_speed, 1.4, TOL);
	CHECK_NEAR(c.eff_speed, 0.7, TOL);
	CHECK(c.time_per_image);
	CHECK_NEAR(c.images_ratio, 2, TOL);
	CHECK_NEAR(c.speedup_time, 2 * 2.5 / 4.0, TOL);
	CHECK_NEAR(c.eff_time, 0.625, TOL);
	CHECK(c.has_terms);
	CHECK_NEAR(c.ideal_s, 5.0 / 1.4, TOL);
	CHECK_NEAR(c.base_terms[REP_T_WARMUP], 2.0, TOL);
	CHECK_NEAR(c.excess[REP_T_COMPUTE], 0.975 - 1.9 / 1.4, TOL);
	CHECK_NEAR(c.excess[REP_T_WARMUP], 1.25 - 2.0 / 1.4, TOL);
	CHECK_NEAR(c.excess[REP_T_COMM], 0.445, TOL);
	double ex = 0;
	for (int k = 0; k < REP_N_TERMS; k++)
		ex += c.excess[k];
	/* the excesses are exactly the gap between the two speedups */
	CHECK_NEAR(ex, 4.0 - 5.0 / 1.4, 1e-9);
	CHECK_NEAR(c.steady_speedup_time, 2.0 / (0.975 + 0.01 + 0.445 + (10.0 / 6 - 1.61) / 2), 1e-9);
	CHECK(c.has_per_image);
	CHECK_NEAR(c.base_per_image_ms[1], 9.5, TOL);
	CHECK_NEAR(c.base_per_image_ms[3], 0.4, TOL);
	CHECK_NEAR(c.per_image_ms[2], 4.45, TOL);
	CHECK_NEAR(c.per_image_ms[3], ((125 + 1000.0 / 6) / 2 - 1 - 97.5 - 44.5) / 10, 1e-9);

	/* a run against itself: all ones */
	rep_compare_runs(&a, &a, &c);
	CHECK_NEAR(c.speedup_speed, 1, TOL);
	CHECK_NEAR(c.speedup_time, 1, TOL);
	CHECK(!c.time_per_image);
	for (int k = 0; k < REP_N_TERMS; k++)
		CHECK_NEAR(c.excess[k], 0, 1e-12);

	rep_stats_release(&a);
	rep_stats_release(&b);
	rep_run_release(&ra);
	rep_run_release(&rb);
}

static void test_no_summary(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "nosum");
	rep_test_run_b(dir);
	char p[4300];
	snprintf(p, sizeof(p), "%s/summary.json", dir);
	remove(p);
	rep_run r;
	rep_stats st;
	load(&r, &st, "nosum", NULL, -1);
	CHECK_EQ_INT(st.world, 2);
	CHECK_NEAR(st.speed, 70, TOL); /* metrics alone give the speed */
	CHECK(isnan(st.ranks[0].step_ms));
	CHECK(!st.has_terms);
	CHECK(!st.key[0] && !st.key[1]);
	CHECK(isnan(st.train_s));
	/* busy from the lines: 5 x (150 + 95 + 95) ms and 5 x (160 + 100 + 100) */
	CHECK_NEAR(st.ranks[0].busy_s, 1.7, TOL);
	CHECK_NEAR(st.ranks[1].busy_s, 1.8, TOL);
	CHECK_NEAR(st.busy_ratio, 1.8 / 1.7, TOL);
	/* stall from the steady parts: 1 / (1 + 95 + 29) */
	CHECK_NEAR(st.stall_fraction, 1.0 / 125, TOL);
	CHECK_NEAR(st.final_top1, 0.6, TOL);
	CHECK_NEAR(st.best_top1, 0.6, TOL);
	CHECK_NEAR(st.best_epoch, 1, 0);
	CHECK(!st.target_set);
	rep_stats_release(&st);
	rep_run_release(&r);
}

static void test_single_interval_and_old(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "one");
	/* rank 0 logs once (its warm-up stays in), no steps or wall_s */
	rep_test_write(dir, "metrics.jsonl",
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":5,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":80,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n"
		"{\"type\":\"train\",\"rank\":1,\"epoch\":0,\"step\":5,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":40,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n"
		"{\"type\":\"train\",\"rank\":1,\"epoch\":0,\"step\":10,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":60,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n"
		"{\"type\":\"train\",\"rank\":1,\"epoch\":0,\"step\":15,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":30,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n",
		NULL, 0);
	rep_run r;
	rep_stats st;
	load(&r, &st, "one", NULL, -1);
	CHECK(!st.ranks[0].warmup_excluded);
	CHECK(st.ranks[1].warmup_excluded);
	CHECK(!st.warmup_excluded);
	CHECK_NEAR(st.ranks[0].speed, 80, TOL);
	CHECK_NEAR(st.ranks[1].speed, 2 / (1.0 / 60 + 1.0 / 30), TOL); /* harmonic: 40 */
	CHECK_NEAR(st.speed, 60, TOL);
	CHECK(isnan(st.ranks[0].busy_s)); /* without steps, no totals */
	CHECK(isnan(st.busy_ratio));
	rep_stats_release(&st);
	rep_run_release(&r);
}

static void test_epoch_position(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "epochs");
	rep_test_write(dir, "metrics.jsonl",
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":5,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":80,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":5,\"wall_s\":1}\n"
		"{\"type\":\"val\",\"epoch\":0,\"step\":10,\"top1\":0.4}\n"
		"{\"type\":\"val\",\"epoch\":1,\"step\":20,\"top1\":0.45}\n"
		"{\"type\":\"train\",\"rank\":0,\"epoch\":2,\"step\":25,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":80,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":5,\"wall_s\":3}\n"
		"{\"type\":\"train\",\"rank\":0,\"epoch\":2,\"step\":27,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":80,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":2,\"wall_s\":3.5}\n",
		NULL, 0);
	rep_run r;
	rep_stats st;
	load(&r, &st, "epochs", NULL, -1);
	CHECK_EQ_U64(st.n_epochs, 3);
	CHECK_NEAR(rep_epoch_position(&st, 0, 5), 0.5, TOL);
	CHECK_NEAR(rep_epoch_position(&st, 0, 10), 1.0, TOL);
	CHECK_NEAR(rep_epoch_position(&st, 1, 15), 1.5, TOL);
	/* epoch 2 has no val line: measured against epoch 1's 10 steps */
	CHECK_NEAR(rep_epoch_position(&st, 2, 25), 2.5, TOL);
	CHECK_NEAR(rep_epoch_position(&st, 2, 27), 2.7, TOL);
	/* an epoch the logs know nothing of sits at its end */
	CHECK_NEAR(rep_epoch_position(&st, 7, 70), 8.0, TOL);
	rep_stats_release(&st);
	rep_run_release(&r);
}

/* Fake figures for the grouping: only world and keys matter to it. */
static void fake(rep_stats *st, int world, const char *weak, const char *strong,
		 double speed)
{
	memset(st, 0, sizeof(*st));
	st->world = world;
	st->key[0] = weak ? strdup(weak) : NULL;
	st->key[1] = strong ? strdup(strong) : NULL;
	st->speed = speed;
	st->total_speed = speed * world;
	st->train_s = st->images = st->batch_per_rank = NAN;
}

static void test_groups(void)
{
	rep_stats s[7];
	fake(&s[0], 2, "k1 b=16", "k1 g=32", 90);  /* weak with 3, 5 */
	fake(&s[1], 1, "k1 b=32", "k1 g=32", 100); /* strong with 0 */
	fake(&s[2], 4, "k2 b=16", "k2 g=64", 50);  /* alone: no group */
	fake(&s[3], 1, "k1 b=16", "k1 g=16", 95);  /* baseline of the weak group */
	fake(&s[4], 2, "k3 b=8", "k3 g=16", 40);   /* k3: worlds 2 and 4, no 1 */
	fake(&s[5], 4, "k1 b=16", "k1 g=64", 80);
	fake(&s[6], 4, "k3 b=8", "k3 g=32", 30);
	rep_group *g;
	size_t ng;
	ims_error err;
	CHECK_OK(rep_groups_compute(s, 7, &g, &ng, &err), &err);
	CHECK_EQ_U64(ng, 3);
	if (ng == 3) {
		/* weak k1: worlds 1, 2, 4 in that order; baseline run 3 */
		CHECK_EQ_INT(g[0].mode, REP_SCALE_RANK_BATCH);
		CHECK_EQ_U64(g[0].n_members, 3);
		CHECK_EQ_U64(g[0].members[0], 3);
		CHECK_EQ_U64(g[0].members[1], 0);
		CHECK_EQ_U64(g[0].members[2], 5);
		CHECK_EQ_INT(g[0].baseline, 3);
		CHECK_NEAR(g[0].cmp[1].speedup_speed, 180.0 / 95, TOL);
		CHECK_NEAR(g[0].cmp[2].eff_speed, 320.0 / 95 / 4, TOL);
		CHECK_NEAR(g[0].cmp[0].speedup_speed, 1, TOL);
		/* weak k3: no world-1 run, so nothing to compare */
		CHECK_EQ_STR(g[1].key, "k3 b=8");
		CHECK_EQ_INT(g[1].baseline, -1);
		CHECK(isnan(g[1].cmp[0].speedup_speed) && isnan(g[1].cmp[1].speedup_time));
		/* strong k1 g=32: runs 1 (world 1) and 0 (world 2) */
		CHECK_EQ_INT(g[2].mode, REP_SCALE_GLOBAL_BATCH);
		CHECK_EQ_U64(g[2].n_members, 2);
		CHECK_EQ_U64(g[2].members[0], 1);
		CHECK_EQ_INT(g[2].baseline, 1);
		CHECK_NEAR(g[2].cmp[1].speedup_speed, 1.8, TOL);
		CHECK(isnan(g[2].cmp[1].speedup_time)); /* no train_s */
	}
	rep_groups_release(g, ng);
	/* no runs, no groups */
	CHECK_OK(rep_groups_compute(s, 0, &g, &ng, &err), &err);
	CHECK(!g && ng == 0);
	for (int i = 0; i < 7; i++) {
		free(s[i].key[0]);
		free(s[i].key[1]);
	}
}

/* Runs started from other weights are other jobs: a fine-tuned run's time
 * to an accuracy says nothing of a run from scratch's scaling. The file's
 * CRC tells starts apart, its path where a summary lacks the CRC. */
static void run_b_init(const char *dir)
{
	rep_test_run_b(dir);
	rep_test_summary_add(dir, "\"init\":{\"path\":\"w/x.safetensors\",\"bytes\":8,"
				  "\"crc32c\":\"0a1b2c3d\"},");
}

static void run_a_init_moved(const char *dir)
{
	rep_test_run_a(dir);
	rep_test_summary_add(dir, "\"init\":{\"path\":\"other/x.safetensors\",\"bytes\":8,"
				  "\"crc32c\":\"0a1b2c3d\"},");
}

static void run_b_init_other(const char *dir)
{
	rep_test_run_b(dir);
	rep_test_summary_add(dir, "\"init\":{\"path\":\"w/x.safetensors\",\"bytes\":8,"
				  "\"crc32c\":\"ffffffff\"},");
}

static void test_init_keys(void)
{
	rep_run r[4];
	rep_stats st[4];
	load(&r[0], &st[0], "i0", rep_test_run_a, -1);
	load(&r[1], &st[1], "i1", run_b_init, -1);
	load(&r[2], &st[2], "i2", run_a_init_moved, -1);
	load(&r[3], &st[3], "i3", run_b_init_other, -1);
	for (int i = 0; i < 4; i++)
		CHECK(st[i].key[0] != NULL);
	if (st[0].key[0] && st[1].key[0] && st[2].key[0] && st[3].key[0]) {
		/* from scratch (1 rank) against fine-tuned (2 ranks): apart */
		CHECK(strcmp(st[0].key[0], st[1].key[0]) != 0);
		/* the same bytes at another path: one job */
		CHECK(strcmp(st[1].key[0], st[2].key[0]) == 0);
		CHECK(strstr(st[1].key[0], "init=0a1b2c3d ") != NULL);
		/* other bytes: apart */
		CHECK(strcmp(st[2].key[0], st[3].key[0]) != 0);
	}
	CHECK(r[1].sum.init_crc32c && strcmp(r[1].sum.init_crc32c, "0a1b2c3d") == 0);
	CHECK(!r[0].sum.init_crc32c && !r[0].sum.init_path);
	for (int i = 0; i < 4; i++) {
		rep_stats_release(&st[i]);
		rep_run_release(&r[i]);
	}
}

int main(void)
{
	test_tmpdir(tmp, sizeof(tmp), "test_analyze");
	test_one_rank();
	test_two_ranks_and_compare();
	test_no_summary();
	test_single_interval_and_old();
	test_epoch_position();
	test_groups();
	test_init_keys();
	if (!test_failures_)
		test_rm_tree(tmp);
	return TEST_EXIT();
}
