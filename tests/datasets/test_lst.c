/*
 * test_lst.c - im2rec .lst files (datasets/lst.c): reading and writing,
 * malformed lines, the label bound, absolute paths under ROOT.
 *
 * Lists are written as text into a fresh folder under $IMS_TMP, in the
 * shapes real tools produce them: im2rec's `3.000000` float labels,
 * pack-label extra columns, CRLF files from Windows, iNaturalist paths with
 * spaces and non-ASCII names.
 */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/datasets.h"
#include "test.h"
#include "list_test_util.h"

/* Files named like ims_write_file_atomic's temporaries. */
static int count_tmp_files(void)
{
	ims_dir_listing ls = {0};
	int n = 0;
	if (ims_dir_list(tmpdir, IMS_DIR_HIDDEN, &ls, NULL) == 0)
		for (size_t i = 0; i < ls.n; i++)
			n += strstr(ls.e[i].name, ".tmp.") != NULL;
	ims_dir_listing_release(&ls);
	return n;
}

static void test_round_trip(void)
{
	ims_error err;
	ds_list a, b;
	ds_list_init(&a);
	ds_list_init(&b);
	const char *paths[] = {
		"train_val_images/Aves/Anas superciliosa × platyrhynchos/0a1b2c3d4e5f60718293a4b5c6d7e8f9.jpg",
		"dataset/train/freshapples/Screen Shot 2018-06-08 at 4.59.36 PM.png",
		"256_ObjectCategories/198.spider/198_0001.jpg",
		"..hidden-but-legal/..x.jpg",
		"a/b..c/d.jpg",
	};
	float ex[3][2] = {{0.25f, -1.5f}, {100.0f, 0.0f}, {0.125f, 3.0f}};
	for (int i = 0; i < 5; i++)
		CHECK_OK(ds_list_append(&a, (uint64_t)i * 1000 + 3, i * 7,
					ex[i % 3], 2, paths[i], &err),
			 &err);
	CHECK_OK(ds_list_append(&a, UINT64_MAX, INT32_MAX, ex[0], 2, "big.jpg", &err), &err);
	const char *p = tmp_path("rt.lst");
	CHECK_OK(ds_list_write(p, &a, &err), &err);
	char *text = slurp(p);
	CHECK(text != NULL);
	if (text)
		CHECK(strncmp(text,
			      "3\t0\t0.250000\t-1.500000\ttrain_val_images/Aves/Anas "
			      "superciliosa × platyrhynchos/"
			      "0a1b2c3d4e5f60718293a4b5c6d7e8f9.jpg\n"
			      "1003\t7\t100.000000\t0.000000\tdataset/train/",
			      120) == 0);
	CHECK_OK(ds_list_read(p, &b, &err), &err);
	CHECK_EQ_INT(b.count, a.count);
	for (size_t i = 0; i < a.count && i < b.count; i++) {
		CHECK_EQ_U64(b.items[i].index, a.items[i].index);
		CHECK_EQ_INT(b.items[i].label, a.items[i].label);
		CHECK_EQ_INT(b.items[i].n_extra, 2);
		CHECK(b.items[i].extra[0] == a.items[i].extra[0]);
		CHECK(b.items[i].extra[1] == a.items[i].extra[1]);
		CHECK_EQ_STR(b.items[i].path, a.items[i].path);
	}
	CHECK_EQ_INT(b.n_classes, 0); /* reading does not touch classes */

	/* Writing b again gives the same bytes. */
	const char *p2 = tmp_path("rt2.lst");
	CHECK_OK(ds_list_write(p2, &b, &err), &err);
	char *t1 = strdup(slurp(p));
	char *t2 = slurp(p2);
	CHECK(t1 && t2 && strcmp(t1, t2) == 0);
	free(t1);

	/* No leftover temporary files. */
	CHECK_EQ_INT(count_tmp_files(), 0);

	/* Reading appends to what the list holds. */
	CHECK_OK(ds_list_read(p, &b, &err), &err);
	CHECK_EQ_INT(b.count, 2 * a.count);

	/* An empty list writes an empty file and reads back empty. */
	ds_list e;
	ds_list_init(&e);
	const char *pe = tmp_path("empty.lst");
	CHECK_OK(ds_list_write(pe, &e, &err), &err);
	CHECK_OK(ds_list_read(pe, &e, &err), &err);
	CHECK_EQ_INT(e.count, 0);
	ds_list_release(&e);
	ds_list_release(&a);
	ds_list_release(&b);
}

/* Extra labels read back as the same float: im2rec's %f where that is
 * exact, else the fewest digits that are (before: %f always, 1e-7 written
 * as 0.000000 and 0.1234567 as 0.123457). */
static void test_extra_label_precision(void)
{
	ims_error err;
	char buf[64];
	const float v[] = {1e-7f, 0.1234567f, 0.25f, -1.5f, 123456789.0f, 1e30f,
			   -FLT_MAX, FLT_MIN, 1e-45f, 0.1f, 3.0f};
	const char *want[] = {"1e-07", "0.1234567", "0.250000", "-1.500000",
			      "123456792.000000", NULL, NULL, NULL, "1.4013e-45",
			      "0.100000", "3.000000"};
	enum { N = sizeof(v) / sizeof(v[0]) };
	ds_list a, b;
	ds_list_init(&a);
	ds_list_init(&b);
	for (int i = 0; i < N; i++) {
		CHECK(ds_format_extra_label(v[i], buf, sizeof(buf)) > 0);
		CHECK(strtof(buf, NULL) == v[i]);
		if (want[i])
			CHECK_EQ_STR(buf, want[i]);
		CHECK_OK(ds_list_append(&a, (uint64_t)i, 0, &v[i], 1, "a.jpg", &err), &err);
	}
	CHECK(ds_format_extra_label(NAN, buf, sizeof(buf)) < 0);
	CHECK(ds_format_extra_label(1.0f, buf, 4) < 0);
	const char *p = tmp_path("precision.lst");
	CHECK_OK(ds_list_write(p, &a, &err), &err);
	CHECK_OK(ds_list_read(p, &b, &err), &err);
	CHECK_EQ_INT(b.count, N);
	for (size_t i = 0; i < a.count && i < b.count; i++)
		CHECK(b.items[i].extra[0] == a.items[i].extra[0]);
	ds_list_release(&a);
	ds_list_release(&b);
}

static void test_read_im2rec(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	/* im2rec writes every label with %f; a BOM, CRLF and blank lines
	 * from Windows editors; paths with spaces. */
	const char text[] = "\xEF\xBB\xBF"
			    "0\t3.000000\t001.ak47/001_0001.jpg\r\n"
			    "\r\n"
			    "1\t3.0\tdir with spaces/a b.jpg\r\n"
			    "   \n"
			    "2\t12\tAves/Anas superciliosa × platyrhynchos/x.jpg\n"
			    "17\t0.000000\tlast/no-newline.JPEG";
	const char *p = tmp_path("im2rec.lst");
	write_text(p, text, sizeof(text) - 1);
	CHECK_OK(ds_list_read(p, &l, &err), &err);
	CHECK_EQ_INT(l.count, 4);
	if (l.count == 4) {
		CHECK_EQ_U64(l.items[0].index, 0);
		CHECK_EQ_INT(l.items[0].label, 3);
		CHECK_EQ_STR(l.items[0].path, "001.ak47/001_0001.jpg");
		CHECK_EQ_INT(l.items[1].label, 3);
		CHECK_EQ_STR(l.items[1].path, "dir with spaces/a b.jpg");
		CHECK_EQ_INT(l.items[2].label, 12);
		CHECK_EQ_STR(l.items[2].path,
			     "Aves/Anas superciliosa × platyrhynchos/x.jpg");
		CHECK_EQ_U64(l.items[3].index, 17);
		CHECK_EQ_INT(l.items[3].label, 0);
		CHECK_EQ_STR(l.items[3].path, "last/no-newline.JPEG");
		CHECK_EQ_INT(l.items[3].n_extra, 0);
	}
	ds_list_release(&l);

	/* Multiple label columns (im2rec --pack-label): first integral, the
	 * rest float extra labels. */
	const char multi[] = "0\t2.000000\t0.500000\t-0.25\t1e-3\tcat/1.jpg\n"
			     "1\t5\t1\t2\t3\tdog/2.jpg\n";
	p = tmp_path("multi.lst");
	write_text(p, multi, sizeof(multi) - 1);
	CHECK_OK(ds_list_read(p, &l, &err), &err);
	CHECK_EQ_INT(l.count, 2);
	if (l.count == 2) {
		CHECK_EQ_INT(l.items[0].label, 2);
		CHECK_EQ_INT(l.items[0].n_extra, 3);
		CHECK(l.items[0].extra[0] == 0.5f);
		CHECK(l.items[0].extra[1] == -0.25f);
		CHECK(l.items[0].extra[2] == 1e-3f);
		CHECK_EQ_INT(l.items[1].label, 5);
		CHECK(l.items[1].extra[2] == 3.0f);
		CHECK_EQ_STR(l.items[1].path, "dog/2.jpg");
	}
	ds_list_release(&l);

	/* A file of only blank lines is an empty list. */
	p = tmp_path("blank.lst");
	write_text(p, "\n\r\n\n", 4);
	CHECK_OK(ds_list_read(p, &l, &err), &err);
	CHECK_EQ_INT(l.count, 0);
	ds_list_release(&l);

	/* Missing file. */
	CHECK_EQ_INT(ds_list_read(tmp_path("nope.lst"), &l, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "nope.lst") != NULL);
	CHECK(strstr(err.msg, "No such file") != NULL);
}

/* Each bad line comes third, after two good rows. */
static void expect_bad(const char *bad, size_t bad_len, const char *why)
{
	static int n;
	char name[64];
	snprintf(name, sizeof(name), "bad%02d.lst", n++);
	const char *p = tmp_path(name);
	char text[512];
	const char good[] = "0\t1\tgood/a.jpg\n1\t2\tgood/b.jpg\n";
	memcpy(text, good, sizeof(good) - 1);
	memcpy(text + sizeof(good) - 1, bad, bad_len);
	memcpy(text + sizeof(good) - 1 + bad_len, "\n3\t1\tgood/c.jpg\n", 16);
	write_text(p, text, sizeof(good) - 1 + bad_len + 16);

	ims_error err;
	ims_error_clear(&err);
	ds_list l;
	ds_list_init(&l);
	CHECK_OK(ds_list_append(&l, 99, 0, NULL, 0, "kept.jpg", &err), &err);
	int rc = ds_list_read(p, &l, &err);
	CHECK_EQ_INT(rc, IMS_EFORMAT);
	char want[256];
	snprintf(want, sizeof(want), "cannot read list '%s': line 3: ", p);
	if (strncmp(err.msg, want, strlen(want)) != 0 || !strstr(err.msg, why)) {
		fprintf(stderr, "  bad line '%.*s': message '%s', want '%s...%s'\n",
			(int)bad_len, bad, err.msg, want, why);
		CHECK(0);
	}
	/* The rows read before the error are dropped; earlier ones kept. */
	CHECK_EQ_INT(l.count, 1);
	CHECK_EQ_STR(l.items[0].path, "kept.jpg");
	ds_list_release(&l);
}

#define BAD(s, why) expect_bad(s, sizeof(s) - 1, why)

static void test_malformed(void)
{
	BAD("5\t1", "2 columns, expected index<TAB>label<TAB>path");
	BAD("5 1 spaced/not/tabbed.jpg", "1 column,");
	BAD("x\t1\tp.jpg", "index 'x' is not a non-negative integer");
	BAD("3.0\t1\tp.jpg", "index '3.0' is not a non-negative integer");
	BAD("-1\t1\tp.jpg", "index '-1' is negative");
	BAD("\t1\tp.jpg", "empty index column");
	BAD("99999999999999999999999\t1\tp.jpg", "index '99999999999999999999999' is too large");
	BAD("5\t3.5\tp.jpg", "label '3.5' is not an integer");
	BAD("5\t-2\tp.jpg", "label '-2' is negative");
	BAD("5\t-2.000000\tp.jpg", "label '-2.000000' is negative");
	BAD("5\tcat\tp.jpg", "label 'cat' is not a number");
	BAD("5\tnan\tp.jpg", "label 'nan' is not a number");
	BAD("5\tinf\tp.jpg", "label 'inf' is not a number");
	BAD("5\t0x10\tp.jpg", "label '0x10' is not a number");
	BAD("5\t1e999\tp.jpg", "'1e999' is not a finite number");
	BAD("5\t3000000000\tp.jpg", "label '3000000000' is too large");
	BAD("5\t2147483648.000000\tp.jpg", "label '2147483648.000000' is too large");
	/* Written so that strtod's value would pass silently. */
	BAD("5\t1e2\tp.jpg", "label '1e2' has an exponent");
	BAD("5\t1.5E1\tp.jpg", "label '1.5E1' has an exponent");
	BAD("5\t3.00000000000000000001\tp.jpg", "label '3.00000000000000000001' is not an integer");
	BAD("5\t-0\tp.jpg", "label '-0' is negative");
	BAD("5\t\tp.jpg", "label column 1 is empty");
	BAD("5\t1\t0.5\tp.jpg", "2 label columns, but line 1 has 1");
	BAD("5\t1\t", "empty path");
	BAD("5\t1\t   ", "empty path");
	BAD("5\t1\t/data/imagenet/../x.JPEG", "path '/data/imagenet/../x.JPEG' has a '..' component");
	BAD("5\t1\t../x.jpg", "path '../x.jpg' has a '..' component");
	BAD("5\t1\ta/../../etc/passwd", "'..' component");
	BAD("5\t1\ta/..", "'..' component");
	BAD("5\t1\t..", "'..' component");
	BAD("5\t1\x00\tp.jpg", "contains a NUL byte");

	/* Extra label columns: same rules, with the column named. */
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	const char extra_nan[] = "0\t1\t0.5\ta.jpg\n1\t1\tnan\tb.jpg\n";
	const char *p = tmp_path("extra_nan.lst");
	write_text(p, extra_nan, sizeof(extra_nan) - 1);
	CHECK_EQ_INT(ds_list_read(p, &l, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 2: label column 2: 'nan' is not a number") != NULL);
	const char extra_big[] = "0\t1\t1e300\ta.jpg\n";
	p = tmp_path("extra_big.lst");
	write_text(p, extra_big, sizeof(extra_big) - 1);
	CHECK_EQ_INT(ds_list_read(p, &l, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 1: label column 2") != NULL);
	CHECK(strstr(err.msg, "out of float range") != NULL);
	CHECK_EQ_INT(l.count, 0);

	/* Too many label columns. */
	char wide[1024];
	int n = snprintf(wide, sizeof(wide), "0");
	for (int i = 0; i < DS_MAX_EXTRA_LABELS + 2; i++)
		n += snprintf(wide + n, sizeof(wide) - (size_t)n, "\t1");
	n += snprintf(wide + n, sizeof(wide) - (size_t)n, "\tp.jpg\n");
	p = tmp_path("wide.lst");
	write_text(p, wide, (size_t)n);
	CHECK_EQ_INT(ds_list_read(p, &l, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 1: more than 65 label columns") != NULL);
	ds_list_release(&l);

	/* The line number counts blank lines too. */
	const char later[] = "0\t1\ta.jpg\n\n\n\r\n1\t1.5\tb.jpg\n";
	p = tmp_path("later.lst");
	write_text(p, later, sizeof(later) - 1);
	CHECK_EQ_INT(ds_list_read(p, &l, &err), IMS_EFORMAT);
	char want[600];
	snprintf(want, sizeof(want),
		 "cannot read list '%s': line 5: label '1.5' is not an integer", p);
	CHECK_EQ_STR(err.msg, want);
	ds_list_release(&l);
}

static void test_write_refuses(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	const char *p = tmp_path("refused.lst");
	const char *bad[] = {"/abs/../x.jpg", "a/../b.jpg", "tab\there.jpg", "new\nline.jpg", ""};
	for (int i = 0; i < 5; i++) {
		ds_list_release(&l);
		CHECK_OK(ds_list_append(&l, 0, 0, NULL, 0, "fine.jpg", &err), &err);
		CHECK_OK(ds_list_append(&l, 1, 0, NULL, 0, bad[i], &err), &err);
		CHECK_EQ_INT(ds_list_write(p, &l, &err), IMS_EINVAL);
		CHECK(strstr(err.msg, "row 1") != NULL);
		CHECK(!file_exists(p)); /* nothing half-written */
	}
	ds_list_release(&l);
	float inf = 1.0f / 0.0f;
	CHECK_OK(ds_list_append(&l, 0, 0, &inf, 1, "x.jpg", &err), &err);
	CHECK_EQ_INT(ds_list_write(p, &l, &err), IMS_EINVAL);
	CHECK(!file_exists(p));
	ds_list_release(&l);

	/* A folder that does not exist: an error naming the file, once
	 * (before: "cannot write list 'F': cannot create 'F.tmp.PID'", then
	 * "cannot write list 'F': cannot write 'F'") */
	CHECK_OK(ds_list_append(&l, 0, 0, NULL, 0, "x.jpg", &err), &err);
	CHECK_EQ_INT(ds_list_write(tmp_path("no/such/dir.lst"), &l, &err), IMS_EIO);
	CHECK(strstr(err.msg, "cannot write '") == err.msg);
	CHECK(strstr(err.msg, "dir.lst") != NULL);
	CHECK(strstr(strstr(err.msg, "dir.lst") + 1, "dir.lst") == NULL);
	CHECK(strstr(err.msg, "No such file or directory") != NULL);
	ds_list_release(&l);
}

/* Many rows: reading and writing stay linear (this would crawl if not). */
static void test_many_rows(void)
{
	ims_error err;
	ds_list a, b;
	ds_list_init(&a);
	ds_list_init(&b);
	char path[64];
	const size_t n = 200000;
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "n%08zu/n%08zu_%zu.JPEG", i % 1000, i % 1000, i);
		if (ds_list_append(&a, i, (int32_t)(i % 1000), NULL, 0, path, &err) < 0)
			break;
	}
	CHECK_EQ_INT(a.count, n);
	const char *p = tmp_path("many.lst");
	double t0 = ims_now();
	CHECK_OK(ds_list_write(p, &a, &err), &err);
	CHECK_OK(ds_list_read(p, &b, &err), &err);
	double dt = ims_now() - t0;
	CHECK_EQ_INT(b.count, n);
	if (b.count == n) {
		CHECK_EQ_STR(b.items[n - 1].path, a.items[n - 1].path);
		CHECK_EQ_INT(b.items[n - 1].label, 999);
	}
	CHECK(dt < 10.0);
	ds_list_release(&a);
	ds_list_release(&b);
}

/* Writes text to a fresh list file and reads it with max_label into l
 * (which may hold rows and classes already). */
static int read_with(const char *text, int64_t max_label, ds_list *l,
		     ims_error *err)
{
	static int n;
	char name[64];
	snprintf(name, sizeof(name), "bound%02d.lst", n++);
	const char *p = tmp_path(name);
	write_text(p, text, strlen(text));
	ds_list_read_opts o;
	ds_list_read_opts_init(&o);
	o.max_label = max_label;
	return ds_list_read_with(p, &o, l, err);
}

/* Labels are class ids: bounded by the class names, or the list's own
 * distinct labels, or --max-label; never past DS_LABEL_CEILING. Here as a
 * .lst is read (the line named, the rows kept); the bound itself is
 * test_labels.c's. */
static void test_label_bound(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	/* The reproduction: one row, label 99999999. */
	CHECK_EQ_INT(read_with("0\t99999999\tcircle/circle_0000.jpg\n",
			       DS_LABEL_AUTO, &l, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "bound00.lst': line 1: label 99999999 is far beyond "
			      "the 1 distinct label of the list") != NULL);
	CHECK(strstr(err.msg, "--max-label N") != NULL);
	CHECK_EQ_INT(l.count, 0);
	/* The line named is the row's line (blank lines counted). */
	CHECK_EQ_INT(read_with("0\t1\ta.jpg\n\n1\t2\tb.jpg\n2\t2147483647\tc.jpg\n",
			       DS_LABEL_AUTO, &l, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 4: label 2147483647 is far beyond the 3 "
			      "distinct labels") != NULL);
	/* Below 1024 needs no declaration, however few labels are used. */
	CHECK_OK(read_with("0\t0\ta.jpg\n1\t1023\tb.jpg\n", DS_LABEL_AUTO, &l, &err), &err);
	CHECK_EQ_INT(l.count, 2);
	ds_list_release(&l);
	CHECK_EQ_INT(read_with("0\t0\ta.jpg\n1\t1024\tb.jpg\n", DS_LABEL_AUTO, &l, &err),
		     IMS_EFORMAT);
	CHECK(strstr(err.msg, "labels stay below 1024") != NULL);
	/* Past 1024: 16 x the distinct labels. 100 labels 0..98 and 1599. */
	char big[4096];
	size_t len = 0;
	for (int i = 0; i < 99; i++)
		len += (size_t)snprintf(big + len, sizeof(big) - len, "%d\t%d\tx%d.jpg\n", i, i, i);
	snprintf(big + len, sizeof(big) - len, "99\t1599\tlast.jpg\n");
	CHECK_OK(read_with(big, DS_LABEL_AUTO, &l, &err), &err);
	CHECK_EQ_INT(l.count, 100);
	size_t distinct = 0;
	CHECK_OK(ds_list_distinct_labels(&l, &distinct, &err), &err);
	CHECK_EQ_U64(distinct, 100);
	ds_list_release(&l);
	snprintf(big + len, sizeof(big) - len, "99\t1600\tlast.jpg\n");
	CHECK_EQ_INT(read_with(big, DS_LABEL_AUTO, &l, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 100: label 1600 is far beyond the 100 distinct labels") != NULL);
	/* --max-label: up to N, and only N. */
	CHECK_OK(read_with("0\t0\ta.jpg\n1\t500000\tb.jpg\n", 500000, &l, &err), &err);
	ds_list_release(&l);
	CHECK_EQ_INT(read_with("0\t0\ta.jpg\n1\t7\tb.jpg\n", 6, &l, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 2: label 7 is above --max-label 6") != NULL);
	CHECK_EQ_INT(read_with("0\t0\ta.jpg\n", DS_LABEL_CEILING + 1LL, &l, &err), IMS_EINVAL);
	/* Never past the ceiling, whatever the spread. */
	CHECK_EQ_INT(read_with("0\t1048576\ta.jpg\n", DS_LABEL_CEILING, &l, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "above --max-label 1048575") != NULL);
	/* Class names bound the labels: each needs one. */
	CHECK_OK(ds_list_add_class(&l, "cat", NULL, &err), &err);
	CHECK_OK(ds_list_add_class(&l, "dog", NULL, &err), &err);
	CHECK_OK(read_with("0\t1\ta.jpg\n", DS_LABEL_AUTO, &l, &err), &err);
	CHECK_EQ_INT(read_with("1\t0\tb.jpg\n2\t2\tc.jpg\n", DS_LABEL_AUTO, &l, &err),
		     IMS_EFORMAT);
	CHECK(strstr(err.msg, "line 2: label 2 has no class name: the class names give 2 "
			      "(labels 0 to 1)") != NULL);
	CHECK_EQ_INT(l.count, 1); /* the earlier row kept, the new ones dropped */
	/* ... unless --max-label says more. */
	CHECK_OK(read_with("1\t0\tb.jpg\n2\t2\tc.jpg\n", 2, &l, &err), &err);
	CHECK_EQ_INT(l.count, 3);
	ds_list_release(&l);
	/* DS_LABEL_ANY (ds_list_read): any int32. */
	CHECK_OK(read_with("0\t2147483647\ta.jpg\n", DS_LABEL_ANY, &l, &err), &err);
	size_t bad = 0;
	CHECK_EQ_INT(ds_list_check_labels(&l, 0, DS_LABEL_AUTO, &bad, &err), IMS_EINVAL);
	CHECK_EQ_U64(bad, 0);
	ds_list_release(&l);
}

/* Absolute paths (im2rec's lists often hold them) are read and written as
 * they are; with a ROOT they must lie under it, as given or resolved. */
static void test_absolute_paths(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	char text[8192];
	snprintf(text, sizeof(text), "0\t0\t%s/img/a.jpg\n1\t0\trel/b.jpg\n", tmpdir);
	const char *p = tmp_path("abs.lst");
	write_text(p, text, strlen(text));
	CHECK_OK(ds_list_read(p, &l, &err), &err);
	CHECK_EQ_INT(l.count, 2);
	const char *w = tmp_path("abs_out.lst");
	CHECK_OK(ds_list_write(w, &l, &err), &err); /* subset keeps them */
	ds_list_release(&l);
	ds_list_read_opts o;
	ds_list_read_opts_init(&o);
	char root[4200];
	snprintf(root, sizeof(root), "%s/img/", tmpdir); /* a trailing slash is fine */
	o.root = root;
	CHECK_OK(ds_list_read_with(p, &o, &l, &err), &err);
	ds_list_release(&l);
	o.root = "/"; /* everything absolute is under / */
	CHECK_OK(ds_list_read_with(p, &o, &l, &err), &err);
	ds_list_release(&l);
	/* Under ROOT reached through a link: either form counts. */
	char link[4200];
	snprintf(link, sizeof(link), "%s/img", tmpdir);
	CHECK(mkdir(link, 0755) == 0);
	snprintf(link, sizeof(link), "%s/imglink", tmpdir);
	char target[4200];
	snprintf(target, sizeof(target), "%s/img", tmpdir);
	CHECK(symlink(target, link) == 0);
	o.root = link;
	CHECK_OK(ds_list_read_with(p, &o, &l, &err), &err);
	ds_list_release(&l);
	/* Outside ROOT (a sibling folder whose name starts alike, too). */
	snprintf(root, sizeof(root), "%s/im", tmpdir);
	o.root = root;
	CHECK_EQ_INT(ds_list_read_with(p, &o, &l, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "abs.lst': line 1: path '") != NULL);
	CHECK(strstr(err.msg, "/img/a.jpg' is not under ROOT") != NULL);
	CHECK_EQ_INT(l.count, 0);
	size_t bad = 9;
	CHECK_OK(ds_list_read(p, &l, &err), &err);
	CHECK_EQ_INT(ds_list_check_paths(&l, 0, root, &bad, &err), IMS_EINVAL);
	CHECK_EQ_U64(bad, 0);
	CHECK_OK(ds_list_check_paths(&l, 0, NULL, NULL, &err), &err);
	ds_list_release(&l);
}

int main(void)
{
	make_tmpdir("test_lst");
	test_round_trip();
	test_extra_label_precision();
	test_read_im2rec();
	test_malformed();
	test_write_refuses();
	test_many_rows();
	test_label_bound();
	test_absolute_paths();
	return test_tmp_done(tmpdir, TEST_EXIT());
}
