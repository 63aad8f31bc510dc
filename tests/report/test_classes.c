/*
 * test_classes.c - a run folder's evaluation (report/classes.c): eval.json
 * and confusion.csv read with their names quoted as CSV (and guarded
 * against spreadsheet formulas), the matrix and the most frequent
 * confusions; a confusion.csv that disagrees with eval.json (other names,
 * other counts, cut short, larger than its classes take) and a damaged
 * eval.json become diagnostics and are not drawn, while the run still
 * loads; the page draws per-class accuracy and the matrix, and past the
 * limits the worst classes and the confusions alone.
 */
#define _GNU_SOURCE
#include <math.h>

#include "rep_test_util.h"

static char tmp[4096];

static int has_diag(const rep_run *r, const char *text)
{
	for (size_t i = 0; i < r->diags.n; i++)
		if (strstr(r->diags.list[i], text))
			return 1;
	return 0;
}

/* 3 classes, 10 records: the second name holds a comma and a quote. */
#define EVAL_JSON                                                               \
	"{\"program\":\"imshard-train\",\"split\":\"p/val.json\",\"epoch\":1,"     \
	"\"records\":10,\"top1\":0.6,\"top5\":1,\"topk\":3,\"loss\":0.9,"           \
	"\"per_class\":[{\"name\":\"cat\",\"records\":4,\"top1\":0.75,\"top5\":1},"   \
	"{\"name\":\"dog, \\\"big\\\"\",\"records\":3,\"top1\":0.3333333333333333,\"top5\":1}," \
	"{\"name\":\"<eel>\",\"records\":3,\"top1\":0.6666666666666666,\"top5\":1}]}\n"
#define CONFUSION_HEAD "true/predicted,cat,\"dog, \"\"big\"\"\",<eel>\n"
#define CONFUSION                                                               \
	CONFUSION_HEAD "cat,3,1,0\n\"dog, \"\"big\"\"\",2,1,0\n<eel>,0,1,2\n"

static void load(const char *dir, rep_run *r)
{
	ims_error err;
	CHECK_OK(rep_run_load(r, dir, &err), &err);
}

static void test_read(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "good");
	rep_test_run_a(dir);
	rep_run r;
	load(dir, &r);
	CHECK(r.classes == NULL); /* no eval.json: nothing, and no diagnostic */
	CHECK_EQ_U64(r.diags.n_total, 0);
	rep_run_release(&r);

	rep_test_write(dir, "eval.json", EVAL_JSON, NULL, 0);
	rep_test_write(dir, "confusion.csv", CONFUSION, NULL, 0);
	load(dir, &r);
	CHECK_EQ_U64(r.diags.n_total, 0);
	const rep_classes *c = r.classes;
	CHECK(c != NULL);
	if (c) {
		CHECK_EQ_INT(c->n, 3);
		CHECK_EQ_STR(c->names[1], "dog, \"big\"");
		CHECK_EQ_STR(c->program, "imshard-train");
		CHECK_EQ_INT(c->epoch, 1);
		CHECK_NEAR(c->top1_all, 0.6, 0);
		CHECK_NEAR(c->records[0], 4, 0);
		CHECK(c->has_confusion && c->matrix);
		if (c->matrix) {
			CHECK_NEAR(c->matrix[0 * 3 + 1], 1, 0);
			CHECK_NEAR(c->matrix[1 * 3 + 0], 2, 0);
			CHECK_NEAR(c->matrix[2 * 3 + 2], 2, 0);
		}
		/* off-diagonal cells, largest first, ties in reading order */
		CHECK_EQ_U64(c->n_confused, 3);
		if (c->n_confused == 3) {
			CHECK(c->confused[0].truth == 1 && c->confused[0].pred == 0);
			CHECK_NEAR(c->confused[0].count, 2, 0);
			CHECK(c->confused[1].truth == 0 && c->confused[1].pred == 1);
			CHECK(c->confused[2].truth == 2 && c->confused[2].pred == 1);
		}
	}
	rep_run_release(&r);
	/* CRLF line ends are CSV too */
	rep_test_write(dir, "confusion.csv",
		       "true/predicted,cat,\"dog, \"\"big\"\"\",<eel>\r\ncat,3,1,0\r\n"
		       "\"dog, \"\"big\"\"\",2,1,0\r\n<eel>,0,1,2\r\n",
		       NULL, 0);
	load(dir, &r);
	CHECK(r.classes && r.classes->has_confusion);
	CHECK_EQ_U64(r.diags.n_total, 0);
	rep_run_release(&r);
}

/* A confusion.csv that does not go with eval.json: diagnosed, not drawn;
 * per-class accuracy still is. */
static void bad_confusion(const char *dir, const char *csv, const char *why)
{
	rep_test_write(dir, "confusion.csv", csv, NULL, 0);
	rep_run r;
	load(dir, &r);
	CHECK(r.classes != NULL);
	if (r.classes) {
		CHECK(!r.classes->has_confusion);
		CHECK(r.classes->matrix == NULL);
		CHECK_EQ_U64(r.classes->n_confused, 0);
	}
	CHECK(has_diag(&r, why));
	CHECK(has_diag(&r, "confusion.csv: "));
	CHECK(has_diag(&r, "the confusion matrix is not drawn"));
	if (!has_diag(&r, why))
		fprintf(stderr, "  no diagnostic '%s' (%zu)\n", why, r.diags.n);
	rep_run_release(&r);
}

static void test_disagreeing(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "disagree");
	rep_test_run_a(dir);
	rep_test_write(dir, "eval.json", EVAL_JSON, NULL, 0);
	/* another class's name; names in another order */
	bad_confusion(dir, "true/predicted,cat,dog,<eel>\ncat,3,1,0\ndog,2,1,0\n<eel>,0,1,2\n",
		      "its columns are not eval.json's classes");
	bad_confusion(dir,
		      CONFUSION_HEAD "cat,3,1,0\n<eel>,0,1,2\n\"dog, \"\"big\"\"\",2,1,0\n",
		      "its rows are not eval.json's classes");
	/* a row that sums to other records; a diagonal that is not top-1 */
	bad_confusion(dir, CONFUSION_HEAD "cat,3,1,1\n\"dog, \"\"big\"\"\",2,1,0\n<eel>,0,1,2\n",
		      "disagree with eval.json's");
	bad_confusion(dir, CONFUSION_HEAD "cat,2,2,0\n\"dog, \"\"big\"\"\",2,1,0\n<eel>,0,1,2\n",
		      "disagree with eval.json's");
	/* counts that are not whole numbers, a short row, a cut quote, rows
	 * past the last class, an empty file */
	bad_confusion(dir, CONFUSION_HEAD "cat,3,1.5,0\n\"dog, \"\"big\"\"\",2,1,0\n<eel>,0,1,2\n",
		      "a count is not a whole number");
	bad_confusion(dir, CONFUSION_HEAD "cat,3,1\n\"dog, \"\"big\"\"\",2,1,0\n<eel>,0,1,2\n",
		      "a count is not a whole number");
	bad_confusion(dir, CONFUSION_HEAD "cat,3,1,0\n\"dog, ", "its rows are not");
	bad_confusion(dir, CONFUSION "x,1,1,1\n", "rows after the last class");
	bad_confusion(dir, "", "does not start with");
	/* the page: the accuracy drawn, the matrix's absence said */
	rep_report rep;
	rep_report_init(&rep, NULL);
	ims_error err;
	CHECK_OK(rep_report_add_run(&rep, dir, &err), &err);
	CHECK_OK(rep_report_analyze(&rep, &err), &err);
	char *page = NULL;
	size_t len = 0;
	CHECK_OK(rep_report_html(&rep, &page, &len, &err), &err);
	CHECK(page && strstr(page, "data-chart=\"per-class\""));
	CHECK(page && strstr(page, "or one that does not agree with it"));
	CHECK(page && !strstr(page, "class=\"confusion\""));
	free(page);
	rep_report_release(&rep);
}

/*
 * A confusion.csv larger than its classes take is one diagnostic naming
 * its size and the limit, read no further (before: read whole up to 256
 * MiB, in memory, and said to have "rows after the last class").
 */
static void test_confusion_limit(void)
{
	char dir[4200], path[4300];
	rep_test_sub(dir, sizeof(dir), tmp, "limit");
	rep_test_run_a(dir);
	rep_test_write(dir, "eval.json", EVAL_JSON, NULL, 0);
	const size_t junk = 1 << 16;
	char *text = malloc(sizeof(CONFUSION) + junk);
	CHECK(text != NULL);
	if (!text)
		return;
	memcpy(text, CONFUSION, sizeof(CONFUSION) - 1);
	memset(text + sizeof(CONFUSION) - 1, '0', junk);
	text[sizeof(CONFUSION) - 1 + junk] = '\0';
	rep_test_write(dir, "confusion.csv", text, path, sizeof(path));
	free(text);
	rep_run r;
	load(dir, &r);
	CHECK(r.classes && !r.classes->has_confusion && !r.classes->matrix);
	CHECK_EQ_U64(r.diags.n_total, 1);
	char want[4600];
	snprintf(want, sizeof(want), "%s: %zu bytes, more than eval.json's 3 classes take "
		 "(limit ", path, sizeof(CONFUSION) - 1 + junk);
	CHECK(r.diags.n == 1 && strncmp(r.diags.list[0], want, strlen(want)) == 0);
	CHECK(has_diag(&r, "bytes): the confusion matrix is not drawn"));
	/* the limit holds the file as written, not the junk */
	unsigned long long limit = 0;
	if (r.diags.n == 1 && strncmp(r.diags.list[0], want, strlen(want)) == 0)
		limit = strtoull(r.diags.list[0] + strlen(want), NULL, 10);
	CHECK(limit >= sizeof(CONFUSION) - 1 && limit < junk);
	rep_run_release(&r);
}

/*
 * Names a spreadsheet would run as a formula are written with a ' first
 * (ims_csv_quoting): read back, they are still eval.json's classes
 * (before: "its columns are not eval.json's classes", not drawn).
 */
static void test_guarded_names(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "guarded");
	rep_test_run_a(dir);
	rep_test_write(dir, "eval.json",
		       "{\"records\":3,\"top1\":0.6666666666666666,\"per_class\":["
		       "{\"name\":\"=sum\",\"records\":2,\"top1\":1,\"top5\":1},"
		       "{\"name\":\"-x\",\"records\":1,\"top1\":0,\"top5\":1}]}\n",
		       NULL, 0);
	/* as the writers put it down (train/loop/eval_files.c) */
	rep_test_write(dir, "confusion.csv",
		       "true/predicted,\"'=sum\",\"'-x\"\n\"'=sum\",2,0\n\"'-x\",1,0\n",
		       NULL, 0);
	rep_run r;
	load(dir, &r);
	CHECK(r.classes && r.classes->has_confusion && r.classes->matrix);
	CHECK_EQ_U64(r.diags.n_total, 0);
	rep_run_release(&r);
	/* a ' that no guard explains is another name */
	bad_confusion(dir, "true/predicted,'=sum,'x\n'=sum,2,0\n'x,1,0\n",
		      "its columns are not eval.json's classes");
}

static void bad_eval(const char *dir, const char *json, const char *why)
{
	rep_test_write(dir, "eval.json", json, NULL, 0);
	rep_run r;
	load(dir, &r);
	CHECK(r.classes == NULL);
	CHECK(has_diag(&r, why));
	if (!has_diag(&r, why))
		fprintf(stderr, "  no diagnostic '%s'\n", why);
	CHECK_EQ_U64(r.lines.n_train, 3); /* the run itself still loads */
	rep_run_release(&r);
}

/*
 * An eval.json of REP_MAX_EVAL_VALUES values is read, one of a value more
 * is not parsed (named with the count and the limit). Commas, brackets
 * and an escaped quote inside the class name are no values.
 */
static void test_eval_values(const char *dir)
{
	/* 8 values beside the k numbers of "x": the root, per_class, its
	 * entry and four members, x */
	const size_t k = REP_MAX_EVAL_VALUES - 8;
	const char head[] = "{\"per_class\":[{\"name\":\"a,[{\\\"\",\"records\":1,"
			    "\"top1\":1,\"top5\":1}],\"x\":[";
	size_t cap = sizeof(head) + 2 * (k + 1) + 4;
	char *j = malloc(cap);
	CHECK(j != NULL);
	if (!j)
		return;
	for (int more = 0; more < 2; more++) {
		size_t n = k + (size_t)more;
		memcpy(j, head, sizeof(head) - 1);
		char *p = j + sizeof(head) - 1;
		for (size_t i = 0; i < n; i++) {
			*p++ = '0';
			*p++ = i + 1 < n ? ',' : ']';
		}
		memcpy(p, "}\n", 3);
		rep_test_write(dir, "eval.json", j, NULL, 0);
		rep_run r;
		load(dir, &r);
		char want[256];
		snprintf(want, sizeof(want), "eval.json: %zu JSON values in %zu bytes, more "
			 "than an evaluation of up to %d classes takes (limit %zu values): "
			 "not drawn", REP_MAX_EVAL_VALUES + 1, strlen(j), REP_MAX_CLASSES,
			 REP_MAX_EVAL_VALUES);
		CHECK_EQ_INT(r.classes != NULL, !more);
		CHECK_EQ_INT(has_diag(&r, want), more);
		if (r.classes)
			CHECK_EQ_STR(r.classes->names[0], "a,[{\"");
		rep_run_release(&r);
	}
	free(j);
}

static void test_bad_eval(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "badeval");
	rep_test_run_a(dir);
	rep_test_write(dir, "confusion.csv", CONFUSION, NULL, 0);
	bad_eval(dir, "{\"per_class\":[{\"name\":\"cat\"", "not a JSON object");
	bad_eval(dir, "[1,2]", "not a JSON object");
	bad_eval(dir, "{\"records\":10}", "'per_class' is not an array");
	bad_eval(dir, "{\"per_class\":[]}", "'per_class' is not an array");
	bad_eval(dir, "{\"per_class\":[{\"name\":\"cat\",\"records\":4,\"top1\":1.5,\"top5\":1}]}",
		 "per_class[0] lacks");
	bad_eval(dir, "{\"per_class\":[{\"name\":\"cat\",\"records\":4,\"top1\":1,\"top5\":1},"
		      "{\"records\":4,\"top1\":1,\"top5\":1}]}",
		 "per_class[1] lacks");
	bad_eval(dir, "{\"per_class\":[{\"name\":\"cat\",\"records\":4.5,\"top1\":1,\"top5\":1}]}",
		 "per_class[0] lacks");
	test_eval_values(dir);
}

/* n classes, one record each, every record predicted as the next class
 * but the first `right` ones; top-1 of class k is 1 for k < right. */
static void write_many(const char *dir, int n, int right)
{
	size_t cap = (size_t)n * (size_t)n * 2 + (size_t)n * 100 + 200;
	char *j = malloc(cap), *c = malloc(cap);
	if (!j || !c)
		exit(1);
	size_t jl = (size_t)snprintf(j, cap, "{\"per_class\":[");
	size_t cl = (size_t)snprintf(c, cap, "true/predicted");
	for (int k = 0; k < n; k++) {
		jl += (size_t)snprintf(j + jl, cap - jl,
				       "%s{\"name\":\"c%d\",\"records\":1,\"top1\":%d,\"top5\":1}",
				       k ? "," : "", k, k < right);
		cl += (size_t)snprintf(c + cl, cap - cl, ",c%d", k);
	}
	snprintf(j + jl, cap - jl, "]}\n");
	cl += (size_t)snprintf(c + cl, cap - cl, "\n");
	for (int i = 0; i < n; i++) {
		cl += (size_t)snprintf(c + cl, cap - cl, "c%d", i);
		int pred = i < right ? i : (i + 1) % n;
		for (int k = 0; k < n; k++)
			cl += (size_t)snprintf(c + cl, cap - cl, ",%d", k == pred);
		cl += (size_t)snprintf(c + cl, cap - cl, "\n");
	}
	rep_test_write(dir, "eval.json", j, NULL, 0);
	rep_test_write(dir, "confusion.csv", c, NULL, 0);
	free(j);
	free(c);
}

static char *page_of(const char *dir, rep_report *rep)
{
	rep_report_init(rep, NULL);
	ims_error err;
	CHECK_OK(rep_report_add_run(rep, dir, &err), &err);
	CHECK_OK(rep_report_analyze(rep, &err), &err);
	char *page = NULL;
	size_t len = 0;
	CHECK_OK(rep_report_html(rep, &page, &len, &err), &err);
	return page;
}

/* Bars of the per-class chart of page p. */
static size_t bars(const char *p)
{
	const char *s = p ? strstr(p, "data-chart=\"per-class\"") : NULL;
	const char *e = s ? strstr(s, "</svg>") : NULL;
	if (!e)
		return 0;
	size_t n = 0;
	for (const char *q = s; (q = strstr(q, "class=\"mark\"")) && q < e; q++)
		n++;
	return n;
}

static void test_page(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "page");
	rep_test_run_a(dir);
	rep_test_write(dir, "eval.json", EVAL_JSON, NULL, 0);
	rep_test_write(dir, "confusion.csv", CONFUSION, NULL, 0);
	rep_report rep;
	char *p = page_of(dir, &rep);
	CHECK(p && strstr(p, "<h3>Per-class accuracy</h3>"));
	CHECK(p && strstr(p, "(imshard-train, after epoch 2)"));
	CHECK(p && strstr(p, "<h3>Confusion matrix</h3>"));
	CHECK(p && strstr(p, "class=\"confusion\""));
	/* names escaped, never raw */
	CHECK(p && strstr(p, "&lt;eel&gt;") && !strstr(p, "<eel>"));
	CHECK(p && strstr(p, "dog, &quot;big&quot;"));
	/* 3 classes: 2 bars each; the matrix's 9 cells, then the confusions */
	CHECK_EQ_U64(bars(p), 6);
	CHECK(p && strstr(p, "dog, &quot;big&quot;: top-1 33.3%, top-5 100.0% of 3 records"));
	CHECK(p && strstr(p, "The most frequent confusions"));
	CHECK(p && !strstr(p, "nan") && !strstr(p, "inf\""));
	free(p);
	rep_report_release(&rep);

	/* past REP_MAX_MATRIX classes: no matrix, the confusions listed */
	write_many(dir, REP_MAX_MATRIX + 5, 2);
	p = page_of(dir, &rep);
	CHECK(rep.runs[0].classes && rep.runs[0].classes->has_confusion &&
	      !rep.runs[0].classes->matrix);
	CHECK(p && !strstr(p, "class=\"confusion\""));
	CHECK(p && strstr(p, "are too many to draw as a matrix"));
	CHECK_EQ_U64(rep.runs[0].classes ? rep.runs[0].classes->n_confused : 0,
		     REP_MAX_CONFUSED);
	free(p);
	rep_report_release(&rep);

	/* past REP_MAX_BARS classes: the worst of them, said so */
	write_many(dir, REP_MAX_BARS + 10, REP_MAX_BARS);
	p = page_of(dir, &rep);
	char note[200];
	snprintf(note, sizeof(note), "The %d classes of lowest top-1 of %d.", REP_MAX_BARS,
		 REP_MAX_BARS + 10);
	CHECK(p && strstr(p, note));
	CHECK_EQ_U64(bars(p), 2 * REP_MAX_BARS);
	/* the 10 wrong classes come first, the right ones from c0 on */
	CHECK(p && strstr(p, ">c60</text>") && strstr(p, ">c0</text>") &&
	      !strstr(p, ">c50</text>"));
	free(p);
	rep_report_release(&rep);
}

/* A class the split holds no record of has no accuracy: null in this
 * version's eval.json, 0 in older ones. Not a 0% bar, and never among
 * the worst classes (before: drawn as 0%, and first of the worst). */
static void test_no_records(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "norecords");
	rep_test_run_a(dir);
	const char *csv = CONFUSION_HEAD "cat,3,1,0\n\"dog, \"\"big\"\"\",2,1,0\n<eel>,0,0,0\n";
	const char *forms[] = {"null", "0"};
	for (int f = 0; f < 2; f++) {
		char json[1024];
		snprintf(json, sizeof(json),
			 "{\"records\":7,\"top1\":0.5714285714285714,\"top5\":1,"
			 "\"per_class\":[{\"name\":\"cat\",\"records\":4,\"top1\":0.75,\"top5\":1},"
			 "{\"name\":\"dog, \\\"big\\\"\",\"records\":3,\"top1\":0.3333333333333333,\"top5\":1},"
			 "{\"name\":\"<eel>\",\"records\":0,\"top1\":%s,\"top5\":%s}]}\n",
			 forms[f], forms[f]);
		rep_test_write(dir, "eval.json", json, NULL, 0);
		rep_test_write(dir, "confusion.csv", csv, NULL, 0);
		rep_run r;
		load(dir, &r);
		CHECK_EQ_U64(r.diags.n_total, 0);
		CHECK(r.classes && r.classes->has_confusion && isnan(r.classes->top1[2]));
		rep_run_release(&r);
		rep_report rep;
		char *p = page_of(dir, &rep);
		CHECK_EQ_U64(bars(p), 4); /* cat's and dog's, none for <eel> */
		CHECK(p && strstr(p, "no records</text>"));
		CHECK(p && !strstr(p, "nan") && !strstr(p, "NaN"));
		free(p);
		rep_report_release(&rep);
	}
	/* a score without a record is not a valid class */
	bad_eval(dir, "{\"per_class\":[{\"name\":\"cat\",\"records\":0,\"top1\":0.5,\"top5\":1}]}",
		 "per_class[0] lacks");
	bad_eval(dir, "{\"per_class\":[{\"name\":\"cat\",\"records\":3,\"top1\":null,\"top5\":null}]}",
		 "per_class[0] lacks");

	/* past REP_MAX_BARS: the 10 classes without a record are not the
	 * worst; c10 (top-1 0) is */
	const int n = REP_MAX_BARS + 10;
	size_t cap = (size_t)n * 80 + 64, len = 0;
	char *j = malloc(cap);
	if (!j)
		exit(1);
	len += (size_t)snprintf(j, cap, "{\"per_class\":[");
	for (int k = 0; k < n; k++)
		len += (size_t)snprintf(j + len, cap - len,
					k < 10 ? "%s{\"name\":\"c%d\",\"records\":0,\"top1\":null,\"top5\":null}"
					       : "%s{\"name\":\"c%d\",\"records\":1,\"top1\":%d,\"top5\":1}",
					k ? "," : "", k, k > 10);
	snprintf(j + len, cap - len, "]}\n");
	rep_test_write(dir, "eval.json", j, NULL, 0);
	free(j);
	rep_test_write(dir, "confusion.csv", "", NULL, 0);
	rep_report rep;
	char *p = page_of(dir, &rep);
	CHECK(p && strstr(p, ">c10</text>"));
	CHECK(p && !strstr(p, ">c0</text>") && !strstr(p, ">c9</text>"));
	CHECK(p && !strstr(p, "no records</text>"));
	free(p);
	rep_report_release(&rep);
}

/* Names that are not UTF-8 (a Latin-1 class name, a split path from
 * another system) are drawn with \xHH for their bad bytes and said once
 * per file and field; the page stays valid UTF-8. Before, the bytes went
 * into the page raw and nothing was said. */
static void test_not_utf8(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "latin1");
	rep_test_run_a(dir);
	rep_test_write(dir, "eval.json",
		       "{\"split\":\"p/v\xe4l.json\",\"records\":3,\"top1\":0.6666666666666666,"
		       "\"top5\":1,\"per_class\":["
		       "{\"name\":\"caf\xe9\",\"records\":1,\"top1\":1,\"top5\":1},"
		       "{\"name\":\"ok\",\"records\":1,\"top1\":1,\"top5\":1},"
		       "{\"name\":\"cut\xe2\x82\",\"records\":1,\"top1\":0,\"top5\":1}]}\n",
		       NULL, 0);
	rep_test_write(dir, "confusion.csv",
		       "true/predicted,caf\xe9,ok,cut\xe2\x82\ncaf\xe9,1,0,0\nok,0,1,0\n"
		       "cut\xe2\x82,1,0,0\n",
		       NULL, 0);
	rep_run r;
	load(dir, &r);
	CHECK(r.classes && r.classes->has_confusion);
	CHECK_EQ_U64(r.diags.n_total, 2);
	CHECK(has_diag(&r, "eval.json: 2 class names are not valid UTF-8: the bad bytes "
			   "are shown as \\xHH"));
	CHECK(has_diag(&r, "eval.json: 'split' is not valid UTF-8"));
	rep_run_release(&r);
	rep_report rep;
	char *p = page_of(dir, &rep);
	CHECK(p && ims_utf8_valid(p, NULL));
	/* the names are shown, not said to be left out, nor counted as
	 * skipped lines */
	CHECK(p && !strstr(p, "could not be used and were left out"));
	CHECK(p && !strstr(p, "lines skipped") && !strstr(p, "Skipped lines"));
	CHECK(p && strstr(p, "2 diagnostics, each saying what was skipped"));
	CHECK(p && strstr(p, "caf\\xe9") && strstr(p, "cut\\xe2\\x82") &&
	      strstr(p, "p/v\\xe4l.json"));
	free(p);
	rep_report_release(&rep);
}

/* A class name of any length is matched whole between eval.json and
 * confusion.csv (before: the CSV's fields were cut at 1024 bytes, and a
 * longer name made the file "not eval.json's classes"); a field longer
 * than every name is still refused, not cut into a match. */
static void test_long_name(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "longname");
	rep_test_run_a(dir);
	const size_t L = 3000;
	char *name = malloc(L + 1), *json = malloc(2 * L + 512), *csv = malloc(4 * L + 512);
	if (!name || !json || !csv)
		exit(1);
	memset(name, 'x', L);
	name[L] = '\0';
	name[L / 2] = ','; /* quoted in the CSV */
	snprintf(json, 2 * L + 512,
		 "{\"per_class\":[{\"name\":\"%s\",\"records\":2,\"top1\":0.5,\"top5\":1},"
		 "{\"name\":\"b\",\"records\":1,\"top1\":1,\"top5\":1}]}\n",
		 name);
	rep_test_write(dir, "eval.json", json, NULL, 0);
	snprintf(csv, 4 * L + 512, "true/predicted,\"%s\",b\n\"%s\",1,1\nb,0,1\n", name, name);
	rep_test_write(dir, "confusion.csv", csv, NULL, 0);
	rep_run r;
	load(dir, &r);
	CHECK_EQ_U64(r.diags.n_total, 0);
	CHECK(r.classes && r.classes->has_confusion && r.classes->n_confused == 1);
	rep_run_release(&r);
	/* the same name with one more byte in the CSV: not eval.json's */
	snprintf(csv, 4 * L + 512, "true/predicted,\"%sy\",b\n\"%s\",1,1\nb,0,1\n", name, name);
	bad_confusion(dir, csv, "its columns are not eval.json's classes");
	free(name);
	free(json);
	free(csv);
}

int main(void)
{
	test_tmpdir(tmp, sizeof(tmp), "test_classes");
	test_read();
	test_disagreeing();
	test_confusion_limit();
	test_guarded_names();
	test_bad_eval();
	test_page();
	test_no_records();
	test_not_utf8();
	test_long_name();
	if (!test_failures_)
		test_rm_tree(tmp);
	return TEST_EXIT();
}
