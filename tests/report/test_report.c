/*
 * test_report.c - the report as a whole (report/report.c): runs keep the
 * order given, labels are short and unique, a folder that cannot be read
 * fails alone and leaves the report usable, the page is written whole.
 */
#define _GNU_SOURCE
#include <unistd.h>

#include "rep_test_util.h"

static char tmp[4096];

#define LINE_AT(rank, step, ips)                                                \
	"{\"type\":\"train\",\"rank\":" #rank ",\"epoch\":0,\"step\":" #step     \
	",\"loss\":2,\"accuracy\":0.5,\"images_per_s\":" #ips                    \
	",\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":5,\"wall_s\":1}\n"
#define START_AT(step)                                                          \
	"{\"type\":\"start\",\"run_id\":\"m-1\",\"epoch\":0,\"step\":" #step     \
	",\"world\":2}\n"

/* A 2-rank run whose rank 1 logged into a folder of its own, resumed once
 * from step 5 after a part killed at step 10: rank 0's folder and rank 1's
 * hold the parts at different line numbers, so each folder's replayed
 * lines are found in its own file before the two are merged. Rank 1's
 * figures are then measured, not guessed, and its folder is no run of its
 * own; the same folder given again cannot join (rank 1 would count twice)
 * and stays a run that names the other. */
static void test_rank_local_merge(void)
{
	char m0[4200], m1[4200];
	rep_test_sub(m0, sizeof(m0), tmp, "m0");
	rep_test_sub(m1, sizeof(m1), tmp, "m1");
	rep_test_write(m0, "metrics.jsonl",
		       START_AT(0) LINE_AT(0, 5, 50) LINE_AT(0, 10, 100)
		       "{\"type\":\"val\",\"epoch\":0,\"step\":10,\"top1\":0.5}\n"
		       START_AT(5) LINE_AT(0, 10, 100) LINE_AT(0, 15, 100) LINE_AT(0, 20, 100),
		       NULL, 0);
	rep_test_write(m0, "summary.json", "{\"world\":2,\"batch_per_rank\":10}", NULL, 0);
	rep_test_write(m1, "metrics.jsonl",
		       START_AT(0) LINE_AT(1, 5, 40) LINE_AT(1, 10, 80)
		       START_AT(5) LINE_AT(1, 10, 80) LINE_AT(1, 15, 80) LINE_AT(1, 20, 80),
		       NULL, 0);
	rep_report r;
	rep_report_init(&r, NULL);
	ims_error err;
	CHECK_OK(rep_report_add_run(&r, m0, &err), &err);
	CHECK_OK(rep_report_add_run(&r, m1, &err), &err);
	CHECK_OK(rep_report_add_run(&r, m1, &err), &err);
	CHECK_OK(rep_report_analyze(&r, &err), &err);
	CHECK_EQ_U64(r.n_runs, 2);
	const rep_run *run = &r.runs[0];
	CHECK_EQ_U64(run->rank_local.n_merged, 1);
	if (run->rank_local.n_merged) {
		CHECK_EQ_STR(run->rank_local.merged[0].dir, m1);
		CHECK_EQ_U64(run->rank_local.merged[0].n_train, 4);
	}
	CHECK_EQ_U64(run->lines.n_train, 8);
	CHECK_EQ_U64(run->parts.n_superseded, 2); /* step 10 of part 1, both ranks */
	CHECK_EQ_U64(run->parts.list[0].superseded, 2);
	CHECK_EQ_INT(run->rank_local.of_run, -1);
	/* rank 1: steps 15 and 20 at 80 (5 and part 2's 10 are warm-ups) */
	const rep_stats *st = &r.stats[0];
	CHECK_EQ_INT(st->world, 2);
	CHECK_EQ_INT(st->ranks[1].lines, 4);
	CHECK_NEAR(st->ranks[1].speed, 80, 1e-9);
	CHECK_NEAR(st->ranks[0].speed, 100, 1e-9);
	CHECK_NEAR(st->speed, 90, 1e-9);
	CHECK_NEAR(st->ranks[1].busy_s, 4 * 5 * 0.09, 1e-9);
	CHECK_NEAR(st->busy_ratio, 1, 1e-9);
	/* the copy stays a run of its own, pointing at the run */
	CHECK_EQ_INT(r.runs[1].rank_local.of_run, 0);
	CHECK_EQ_U64(r.runs[1].lines.n_train, 4);
	CHECK_EQ_STR(r.runs[1].label, "m1");
	rep_report_release(&r);
}

int main(void)
{
	test_tmpdir(tmp, sizeof(tmp), "test_report");
	char x1[4200], x2[4200], y1[4200];
	rep_test_sub(x1, sizeof(x1), tmp, "x");
	rep_test_sub(y1, sizeof(y1), tmp, "y");
	mkdir(x1, 0755);
	mkdir(y1, 0755);
	rep_test_sub(x1, sizeof(x1), tmp, "x/run");
	rep_test_sub(x2, sizeof(x2), tmp, "y/run/");
	rep_test_sub(y1, sizeof(y1), tmp, "solo");
	rep_test_run_a(x1);
	rep_test_run_b(x2);
	rep_test_run_e(y1);

	rep_report r;
	rep_report_init(&r, NULL);
	CHECK(r.opts.target_acc < 0);
	ims_error err;
	CHECK_OK(rep_report_add_run(&r, x1, &err), &err);
	char missing[4300];
	snprintf(missing, sizeof(missing), "%s/none", tmp);
	CHECK_EQ_INT(rep_report_add_run(&r, missing, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "none") != NULL);
	CHECK_OK(rep_report_add_run(&r, x2, &err), &err);
	CHECK_OK(rep_report_add_run(&r, y1, &err), &err);
	CHECK_OK(rep_report_add_run(&r, y1, &err), &err); /* the same thrice */
	CHECK_OK(rep_report_add_run(&r, y1, &err), &err);
	CHECK_EQ_U64(r.n_runs, 5);
	CHECK_OK(rep_report_analyze(&r, &err), &err);
	/* "run" twice: the paths as given; "solo" twice: numbered */
	CHECK_EQ_STR(r.runs[0].label, x1);
	CHECK_EQ_STR(r.runs[1].label, x2);
	CHECK_EQ_STR(r.runs[2].label, y1);
	char want[4300];
	snprintf(want, sizeof(want), "%s #2", y1);
	CHECK_EQ_STR(r.runs[3].label, want);
	snprintf(want, sizeof(want), "%s #3", y1);
	CHECK_EQ_STR(r.runs[4].label, want);
	CHECK_EQ_STR(r.title, "imshard run report");
	CHECK_EQ_INT(rep_report_analyze(&r, &err), IMS_EINVAL);
	CHECK_EQ_INT(rep_report_add_run(&r, x1, &err), IMS_EINVAL);
	CHECK_EQ_INT(r.stats[1].world, 2);
	/* weak a+b; strong b with the copies of e (the first is the baseline) */
	CHECK_EQ_U64(r.n_groups, 2);

	char page[4300];
	snprintf(page, sizeof(page), "%s/out.html", tmp);
	CHECK_OK(rep_report_write_html(&r, page, &err), &err);
	FILE *f = fopen(page, "rb");
	CHECK(f != NULL);
	if (f) {
		char head[16] = {0};
		CHECK(fread(head, 1, 15, f) == 15);
		CHECK(strcmp(head, "<!DOCTYPE html>") == 0);
		fseek(f, -8, SEEK_END);
		char tail[9] = {0};
		CHECK(fread(tail, 1, 8, f) == 8);
		CHECK(strcmp(tail, "</html>\n") == 0);
		fclose(f);
	}
	snprintf(page, sizeof(page), "%s/no/such/folder/out.html", tmp);
	CHECK(rep_report_write_html(&r, page, &err) < 0);
	rep_report_release(&r);
	rep_report_release(&r); /* released twice: harmless */

	/* basenames when they differ; a title of one's own */
	rep_opts o = {"Mine", -1};
	rep_report_init(&r, &o);
	CHECK_OK(rep_report_add_run(&r, x1, &err), &err);
	CHECK_OK(rep_report_add_run(&r, y1, &err), &err);
	CHECK_OK(rep_report_analyze(&r, &err), &err);
	CHECK_EQ_STR(r.runs[0].label, "run");
	CHECK_EQ_STR(r.runs[1].label, "solo");
	CHECK_EQ_STR(r.title, "Mine");
	CHECK_EQ_U64(r.n_groups, 0);
	rep_report_release(&r);
	test_rank_local_merge();
	if (!test_failures_)
		test_rm_tree(tmp);
	return TEST_EXIT();
}
