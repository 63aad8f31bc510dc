/*
 * test_html.c - the page (report/html.c) from fixture runs: every run's
 * charts and the charts across runs are there with drawn marks, time to
 * the target, a run without summary.json and GPU lines are shown, skipped
 * lines are named, a fine-tuned run names its --init file, a summary
 * without a thread count is drawn, and nothing on the page reaches
 * outside it.
 */
#define _GNU_SOURCE
#include <math.h>

#include "rep_test_util.h"

static char tmp[4096];

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The <svg> element with this id, as a new string (NULL if absent). */
static char *chart(const char *page, const char *id)
{
	char key[128];
	snprintf(key, sizeof(key), "id=\"%s\"", id);
	const char *at = strstr(page, key);
	if (!at)
		return NULL;
	const char *start = at;
	while (start > page && strncmp(start, "<svg", 4) != 0)
		start--;
	const char *end = strstr(at, "</svg>");
	return end ? strndup(start, (size_t)(end - start + 6)) : NULL;
}

/* A chart exists, is of its kind and has at least `marks` data marks. */
static void check_chart(const char *page, const char *id, const char *kind,
			size_t marks)
{
	char *c = chart(page, id);
	CHECK(c != NULL);
	if (!c) {
		fprintf(stderr, "  no chart '%s'\n", id);
		return;
	}
	char k[96];
	snprintf(k, sizeof(k), "data-chart=\"%s\"", kind);
	CHECK(strstr(c, k) != NULL);
	size_t n = count(c, "class=\"mark\"");
	CHECK(n >= marks);
	if (n < marks)
		fprintf(stderr, "  chart '%s' has %zu marks, want %zu\n", id, n, marks);
	CHECK(strstr(c, "nan") == NULL && strstr(c, "inf\"") == NULL);
	free(c);
}

static char *render(rep_report *r, const char *const *subs, size_t n, double target)
{
	rep_opts o = {"Fixture <runs>", target};
	rep_report_init(r, &o);
	ims_error err;
	for (size_t i = 0; i < n; i++) {
		char dir[4200];
		rep_test_sub(dir, sizeof(dir), tmp, subs[i]);
		CHECK_OK(rep_report_add_run(r, dir, &err), &err);
	}
	CHECK_OK(rep_report_analyze(r, &err), &err);
	char *page = NULL;
	size_t len = 0;
	CHECK_OK(rep_report_html(r, &page, &len, &err), &err);
	CHECK(page && strlen(page) == len);
	return page;
}

static void test_scaling_page(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "a");
	rep_test_run_a(dir);
	rep_test_sub(dir, sizeof(dir), tmp, "b");
	rep_test_run_b(dir);
	rep_test_sub(dir, sizeof(dir), tmp, "e");
	rep_test_run_e(dir);
	const char *subs[3] = {"a", "b", "e"};
	rep_report r;
	char *page = render(&r, subs, 3, 0.55);
	if (!page)
		return;
	CHECK_EQ_U64(r.n_groups, 2);
	/* self-contained: no script, no fetch, no stylesheet link */
	CHECK(strstr(page, "<script") == NULL);
	CHECK(strstr(page, "src=") == NULL);
	CHECK(strstr(page, "<link") == NULL);
	CHECK(strstr(page, "@import") == NULL && strstr(page, "url(") == NULL);
	CHECK(count(page, "http") == count(page, "xmlns=\"http://www.w3.org/2000/svg\""));
	CHECK(strstr(page, "@media print") != NULL);
	CHECK(strstr(page, "<title>Fixture &lt;runs&gt;</title>") != NULL);
	CHECK_EQ_U64(count(page, "<svg"), count(page, "</svg>"));
	CHECK_EQ_U64(count(page, "<section"), count(page, "</section>"));
	CHECK_EQ_U64(count(page, "<table"), count(page, "</table>"));

	/* per run */
	static const char *const kinds[] = {"loss-epoch", "accuracy-epoch", "loss-time",
					    "accuracy-time", "throughput", "stall",
					    "breakdown"};
	for (int run = 0; run < 3; run++)
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			char id[64];
			snprintf(id, sizeof(id), "r%d-%s", run, kinds[k]);
			check_chart(page, id, kinds[k], 1);
		}
	CHECK(strstr(page, "id=\"r0-gpu-util\"") == NULL);
	/* across runs and per group */
	check_chart(page, "all-val-epoch", "val-epoch", 4);
	check_chart(page, "all-val-time", "val-time", 4);
	check_chart(page, "all-acc-batch", "acc-batch", 3);
	check_chart(page, "all-acc-world", "acc-world", 3);
	/* the breakdown calls out the ratio: 2.4 / 1.8 */
	char *bd = chart(page, "r1-breakdown");
	CHECK(bd && strstr(bd, "busy max/min 1.33: rank 1 computed 2.40 s, rank 0 1.80 s"));
	free(bd);

	/* the scaling section is explain.c's (test_explain.c): here, that it is in */
	CHECK(strstr(page, "<section id=\"scaling\">") != NULL);
	CHECK_EQ_U64(count(page, "<div class=\"why\">"), 2);
	/* best top-1 with its epoch counted from 1, as the page says */
	CHECK(strstr(page, "<td>60.0% (2)</td>") != NULL);
	/* time to the target */
	CHECK(strstr(page, "Time to 55.0% validation top-1") != NULL);
	CHECK(strstr(page, "not reached (best 50.0%)") != NULL);
	CHECK(strstr(page, "<td>2</td><td>3.90 s</td><td>4.20 s</td>") != NULL);
	free(page);
	rep_report_release(&r);
}

static void test_partial_runs(void)
{
	char dir[4200];
	/* died: no summary, a truncated last line, GPU lines */
	rep_test_sub(dir, sizeof(dir), tmp, "died");
	rep_test_write(dir, "metrics.jsonl",
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":5,\"loss\":2.3,\"accuracy\":0.1,\"lr\":0.1,\"images_per_s\":50,\"data_wait_ms\":2,\"compute_ms\":150,\"comm_ms\":0,\"steps\":5,\"wall_s\":1.0}\n"
		"{\"type\":\"gpu\",\"rank\":0,\"device\":0,\"wall_s\":0.5,\"util\":80,\"mem_used_mib\":5000,\"mem_total_mib\":16000}\n"
		"{\"type\":\"gpu\",\"rank\":0,\"device\":0,\"wall_s\":1.0,\"util\":95,\"mem_used_mib\":5200,\"mem_total_mib\":16000}\n"
		"{\"type\":\"gpu\",\"rank\":1,\"device\":1,\"wall_s\":0.5,\"util\":10,\"mem_used_mib\":3000,\"mem_total_mib\":16000}\n"
		"{\"type\":\"gpu\",\"rank\":1,\"device\":1,\"wall_s\":1.0,\"util\":15,\"mem_used_mib\":3100,\"mem_total_mib\":16000}\n"
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":2.0,\"accuracy\":0.2,\"lr\":0.1,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":95,\"comm_ms\":0,\"steps\":5,\"wall_s\":1.5}\n"
		"{\"type\":\"train\",\"rank\":1,\"epoch\":0,\"step\":10,\"lo",
		NULL, 0);
	/* old: no steps, no wall_s */
	rep_test_sub(dir, sizeof(dir), tmp, "old");
	rep_test_write(dir, "metrics.jsonl",
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":5,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n"
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":1.9,\"accuracy\":0.55,\"images_per_s\":110,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n"
		"{\"type\":\"val\",\"epoch\":0,\"step\":10,\"top1\":0.4}\n",
		NULL, 0);
	const char *subs[2] = {"died", "old"};
	rep_report r;
	char *page = render(&r, subs, 2, -1);
	if (!page)
		return;
	CHECK_EQ_U64(r.n_groups, 0);
	CHECK(strstr(page, "No two runs are the same job") != NULL);
	CHECK(strstr(page, "No summary.json: the run did not finish") != NULL);
	CHECK(strstr(page, "no summary.json: the run did not finish") != NULL);
	check_chart(page, "r0-gpu-util", "gpu-util", 2); /* a line per GPU */
	check_chart(page, "r0-gpu-mem", "gpu-mem", 2);
	CHECK(strstr(page, "rank 1 GPU 1") != NULL);
	CHECK(strstr(page, "GPU memory per GPU (of 16000 MiB)") != NULL);
	check_chart(page, "r0-loss-epoch", "loss-epoch", 1);
	check_chart(page, "r0-throughput", "throughput", 1);
	/* the truncated line is named with its file and line */
	char want[4300];
	snprintf(want, sizeof(want), "%s/died/metrics.jsonl:7: truncated line", tmp);
	CHECK(strstr(page, want) != NULL);
	CHECK(strstr(page, "id=\"diagnostics\"") != NULL);
	/* old logs: curves against epoch, none against time, said so */
	check_chart(page, "r1-loss-epoch", "loss-epoch", 1); /* its val line has no loss */
	CHECK(strstr(page, "id=\"r1-loss-time\"") == NULL);
	CHECK(strstr(page, "lack \"wall_s\"") != NULL);
	CHECK(strstr(page, "lack \"steps\"") != NULL);
	CHECK(strstr(page, "No wall_s in the logs: no curves against time.") != NULL);
	/* "died" has no val line, "old" one without wall_s */
	CHECK(strstr(page, "No val line has wall_s") != NULL);
	CHECK_EQ_U64(count(page, "<svg"), count(page, "</svg>"));
	free(page);
	rep_report_release(&r);

	/* not analysed: refused */
	rep_report_init(&r, NULL);
	char *p = NULL;
	size_t len;
	ims_error err;
	CHECK_EQ_INT(rep_report_html(&r, &p, &len, &err), IMS_EINVAL);
	CHECK(p == NULL);
	rep_report_release(&r);
}

/* A run fine-tuned with --init names its file, escaped for HTML; a run
 * from scratch says nothing; an init without a path is named. */
static void test_fine_tuned(void)
{
	char dir[4200];
	static const char *const names[3] = {"ft", "scratch", "noinit"};
	rep_test_sub(dir, sizeof(dir), tmp, "ft");
	rep_test_run_a(dir);
	rep_test_sub(dir, sizeof(dir), tmp, "scratch");
	rep_test_run_a(dir);
	rep_test_sub(dir, sizeof(dir), tmp, "noinit");
	rep_test_run_a(dir);
	static const char *const init[2] = {
		"\"init\":{\"path\":\"w/<r18>.safetensors\",\"bytes\":8,\"crc32c\":\"0a1b2c3d\"},",
		"\"init\":{\"bytes\":8},"};
	for (int i = 0; i < 2; i++) {
		rep_test_sub(dir, sizeof(dir), tmp, names[2 * i]);
		rep_test_summary_add(dir, init[i]);
	}
	rep_report r;
	char *page = render(&r, names, 3, -1);
	if (!page)
		return;
	CHECK(strstr(page, "start-up. Fine-tuned from <code>w/&lt;r18&gt;.safetensors</code>.") != NULL);
	CHECK_EQ_U64(count(page, "Fine-tuned from"), 1);
	CHECK(strstr(page, "noinit/summary.json: &#39;init&#39; has no &#39;path&#39; string") != NULL);
	free(page);
	rep_report_release(&r);
}

/* A summary whose "threads" is refused (not a number) or absent: the
 * run's line says n/a and the page is drawn (the count was converted to
 * an integer to choose "thread" or "threads": undefined for NaN). */
static void test_threads_unknown(void)
{
	char dir[4200];
	static const char *const names[1] = {"nothreads"};
	rep_test_sub(dir, sizeof(dir), tmp, names[0]);
	rep_test_run_a(dir);
	rep_test_summary_add(dir, "\"threads\":\"many\",");
	rep_report r;
	char *page = render(&r, names, 1, -1);
	if (!page)
		return;
	CHECK(strstr(page, "n/a threads per rank") != NULL);
	free(page);
	rep_report_release(&r);
}

/* Ten ranks: the per-step mean and extremes instead of a line per rank. */
static void test_many_ranks(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "ten");
	char *text = calloc(1, 1 << 16);
	size_t n = 0;
	for (int step = 5; step <= 15; step += 5)
		for (int r = 0; r < 10; r++)
			n += (size_t)snprintf(text + n, (1 << 16) - n,
				"{\"type\":\"train\",\"rank\":%d,\"epoch\":0,\"step\":%d,\"loss\":2,"
				"\"accuracy\":0.5,\"images_per_s\":%d,\"data_wait_ms\":%d,\"compute_ms\":90,"
				"\"comm_ms\":5,\"steps\":5,\"wall_s\":%g}\n",
				r, step, 100 + 10 * r, r, step / 5.0);
	rep_test_write(dir, "metrics.jsonl", text, NULL, 0);
	free(text);
	const char *subs[1] = {"ten"};
	rep_report r;
	char *page = render(&r, subs, 1, -1);
	if (!page)
		return;
	CHECK_EQ_INT(r.stats[0].world, 10);
	check_chart(page, "r0-throughput", "throughput", 3);
	check_chart(page, "r0-stall", "stall", 2);
	check_chart(page, "r0-breakdown", "breakdown", 29); /* 3 parts x 10, rank 0 waited 0 */
	char *c = chart(page, "r0-throughput");
	CHECK(c && strstr(c, "slowest rank") && strstr(c, "fastest rank") && !strstr(c, "rank 9"));
	free(c);
	c = chart(page, "r0-stall");
	CHECK(c && strstr(c, "worst rank"));
	free(c);
	CHECK(strstr(page, "<tr><td>9</td>") != NULL); /* the rank table has every rank */
	free(page);
	rep_report_release(&r);
}

int main(void)
{
	test_tmpdir(tmp, sizeof(tmp), "test_html");
	test_scaling_page();
	test_partial_runs();
	test_fine_tuned();
	test_many_ranks();
	test_threads_unknown();
	if (!test_failures_)
		test_rm_tree(tmp);
	return TEST_EXIT();
}
