/*
 * test_explain.c - the scaling section (report/explain.c) on the fixture
 * runs of rep_test_util.h: the group tables carry the speedups and
 * efficiencies both ways, the charts are drawn, and the explanation of a
 * 2-rank run against the 1-rank run says, with the hand-worked numbers,
 * why speedup_speed is below 2 and why speedup_time differs from it; a
 * group without a 1-rank run says it has no speedup.
 */
#define _GNU_SOURCE
#include <math.h>

#include "report/report_internal.h"
#include "rep_test_util.h"

static char tmp[4096];

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The scaling section of a report over tmp/<sub> for each sub. */
static char *section(const char *const *subs, size_t n)
{
	rep_report r;
	rep_report_init(&r, NULL);
	ims_error err;
	for (size_t i = 0; i < n; i++) {
		char dir[4200];
		rep_test_sub(dir, sizeof(dir), tmp, subs[i]);
		CHECK_OK(rep_report_add_run(&r, dir, &err), &err);
	}
	CHECK_OK(rep_report_analyze(&r, &err), &err);
	ims_buf b = {0};
	rep_html_scaling(&b, &r);
	rep_report_release(&r);
	return ims_buf_take(&b, NULL);
}

#define HAS(s, text)                                                           \
	do {                                                                   \
		CHECK(strstr((s), (text)) != NULL);                            \
		if (!strstr((s), (text)))                                      \
			fprintf(stderr, "  missing: %s\n", (text));            \
	} while (0)

static void test_explanation(void)
{
	const char *subs[3] = {"a", "b", "e"};
	char *s = section(subs, 3);
	if (!s)
		return;
	HAS(s, "<section id=\"scaling\">");
	HAS(s, "Scaling at the same batch per rank");
	HAS(s, "Scaling at the same global batch");
	HAS(s, "batch_per_rank=10</code>. Baseline: <b>a</b> (1 rank)");
	/* the group tables: b against a (per image), b against e */
	HAS(s, "<td>1.40</td><td>0.700</td><td>1.25</td><td>0.625</td>");
	HAS(s, "<td>1.40</td><td>0.700</td><td>0.938</td><td>0.469</td>");
	HAS(s, "speedup_time compares time per image");
	CHECK_EQ_U64(count(s, "data-chart=\"speedup\""), 2);
	CHECK_EQ_U64(count(s, "data-chart=\"efficiency\""), 2);
	CHECK_EQ_U64(count(s, "data-chart=\"decomposition\""), 2);
	CHECK_EQ_U64(count(s, "<div class=\"why\">"), 2);
	/* why speedup_speed is 1.40: 70 images/s per rank against 100, and per
	 * image communication appeared (4.45 ms) and compute rose (9.75 vs 9.5) */
	HAS(s, "speedup_speed = 2 &times; 70 / 100 = 1.40, efficiency 0.700");
	HAS(s, "one rank spent 14.58 ms in a steady step at 2 ranks and 10 ms at 1 rank");
	HAS(s, "communication 4.45 ms (~0 at 1 rank, +4.45)");
	HAS(s, "compute 9.75 ms (9.50 at 1 rank, +0.250)");
	/* balance: 1.8 s and 2.4 s of compute */
	HAS(s, "from 1.80 s (rank 0) to 2.40 s (rank 1), max/min 1.33");
	HAS(s, "about 0.300 s per rank went to waiting for rank 1");
	HAS(s, "rank 0 waited for data 0.5% of train_s at 2 ranks, 0.8% at 1 rank");
	/* why speedup_time is 1.25: 2 x 2.5 s per 300 images against 4 s */
	HAS(s, "train_s 2.50 s at 1 rank for 150 images, 5 s per 300 images, 4 s at 2 ranks: "
	       "speedup_time 1.25, efficiency 0.625");
	HAS(s, "(speedup_speed 1.40), this run would have taken 3.57 s; it took 4 s, 0.429 s more");
	HAS(s, "rest 0.892 s here, 0.400 s at 1 rank (grew 2.23x): +0.606 s");
	HAS(s, "validation 0.300 s here, 0.400 s at 1 rank (1.33x faster): +14.29 ms");
	HAS(s, "warm-up interval 1.25 s here, 2 s at 1 rank (1.60x faster): &minus;0.179 s");
	HAS(s, "checkpoints 0.100 s here, 0.200 s at 1 rank (2x faster): &minus;42.86 ms");
	HAS(s, "a time speedup of 1.37 against speedup_speed 1.40: +29.76 ms");
	HAS(s, "Hence speedup_time 1.25 &lt; speedup_speed 1.40.");
	/* the table of parts: steady subtotal, the four parts, the rest, the sum */
	HAS(s, "<tr><th class=\"l\">steady steps</th><td>2 s</td><td>1.46 s</td><td>1.43 s</td><td>29.76 ms</td></tr>");
	HAS(s, "<tr><th class=\"l\">train_s</th><td>5 s</td><td>4 s</td><td>3.57 s</td><td>0.429 s</td></tr>");
	/* strong scaling: b against e, 300 images against 200 */
	HAS(s, "It trained 300 images and the baseline 200: the baseline's times below are "
	       "scaled by 1.50 to the same images.");
	HAS(s, "checkpoints 0.100 s here, 0 s at 1 rank (new): +0.100 s");
	HAS(s, "Hence speedup_time 0.938 &lt; speedup_speed 1.40.");
	free(s);
}

static void test_no_baseline(void)
{
	/* b at world 2 and a copy of it claiming world 4: a group, no 1 rank */
	char dir[4200], p[4300];
	rep_test_sub(dir, sizeof(dir), tmp, "b4");
	rep_test_run_b(dir);
	snprintf(p, sizeof(p), "%s/summary.json", dir);
	FILE *f = fopen(p, "rb");
	char text[8192] = {0};
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = '\0';
	char *w = strstr(text, "\"world\":2");
	CHECK(w != NULL);
	if (w)
		w[8] = '4';
	char *bw = strstr(text, "\"busy_s\":[1.8,2.4]");
	if (bw)
		memcpy(bw, "\"busy_s\":null     ", 18);
	rep_test_write(dir, "summary.json", text, NULL, 0);
	const char *subs[2] = {"b", "b4"};
	char *s = section(subs, 2);
	if (!s)
		return;
	HAS(s, "No 1-rank run of this job: no speedup can be computed.");
	CHECK(strstr(s, "data-chart=\"speedup\"") == NULL);
	CHECK(strstr(s, "<div class=\"why\">") == NULL);
	HAS(s, "<td>n/a</td><td>n/a</td><td>n/a</td><td>n/a</td>");
	free(s);

	/* runs that are not the same job: said so */
	const char *two[2] = {"a", "e"};
	s = section(two, 2);
	if (s)
		HAS(s, "No two runs are the same job at different world sizes");
	free(s);
	/* one run: nothing to say */
	const char *one[1] = {"a"};
	s = section(one, 1);
	CHECK(s && s[0] == '\0');
	free(s);
}

int main(void)
{
	test_tmpdir(tmp, sizeof(tmp), "test_explain");
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "a");
	rep_test_run_a(dir);
	rep_test_sub(dir, sizeof(dir), tmp, "b");
	rep_test_run_b(dir);
	rep_test_sub(dir, sizeof(dir), tmp, "e");
	rep_test_run_e(dir);
	test_explanation();
	test_no_baseline();
	if (!test_failures_)
		test_rm_tree(tmp);
	return TEST_EXIT();
}
