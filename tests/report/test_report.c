/*
 * test_report.c - the report as a whole (report/report.c): runs keep the
 * order given, labels are short and unique, a folder that cannot be read
 * fails alone and leaves the report usable, the page is written whole.
 */
#define _GNU_SOURCE
#include <unistd.h>

#include "rep_test_util.h"

static char tmp[4096];

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
	if (!test_failures_)
		test_rm_tree(tmp);
	return TEST_EXIT();
}
