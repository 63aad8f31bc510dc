/*
 * test_ds_caltech256.c - the caltech256 adapter on a fixture made by
 * tests/fixtures/make_caltech256.py: all 257 real class folders (1-3 tiny
 * JPEGs each, 10 in 001.ak47 and 257.clutter), 198.spider/RENAME2, the
 * empty 056.dog/greg/vision309/, greyscale JPEGs.
 *
 * Checks: row counts, labels of named files, class names and order,
 * stratified val counts per class, --no-clutter, ROOT given as the
 * 256_ObjectCategories folder itself, determinism, the notes, and the
 * errors (wrong root, a stray folder) and warnings (a partial download).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/datasets.h"
#include "test.h"
#include "ds_test_util.h"

static char tmpdir[1024];

static void make_tmpdir(void)
{
	test_tmpdir(tmpdir, sizeof(tmpdir), "test_ds_caltech256");
}

/* Images the fixture puts in class NNN (1-based). */
static int per_class(int n)
{
	return (n == 1 || n == 257) ? 10 : 1 + (n - 1) % 3;
}

static int val_share(int n)
{
	return (int)floor(n * 0.2 + 0.5 + 1e-9);
}

static const ds_list *split(const ds_dataset *d, const char *name)
{
	for (int i = 0; i < d->n_splits; i++)
		if (strcmp(d->splits[i].name, name) == 0)
			return &d->splits[i].list;
	return NULL;
}

static const ds_entry *find_row(const ds_dataset *d, const char *path)
{
	for (int s = 0; s < d->n_splits; s++)
		for (size_t i = 0; i < d->splits[s].list.count; i++)
			if (strcmp(d->splits[s].list.items[i].path, path) == 0)
				return &d->splits[s].list.items[i];
	return NULL;
}

static int load(const char *root, const ds_convert_opts *o, ds_dataset *d,
		ims_error *err)
{
	memset(d, 0, sizeof(*d));
	return ds_adapter_caltech256.load(root, o, d, err);
}

static void test_default(const char *root)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	ims_error err;
	CHECK_OK(load(root, &o, &d, &err), &err);
	CHECK_EQ_INT(d.n_splits, 2);
	const ds_list *tr = split(&d, "train"), *va = split(&d, "val");
	CHECK(tr && va);
	if (!tr || !va) {
		ds_dataset_release(&d);
		return;
	}
	int total = 0, total_val = 0;
	for (int n = 1; n <= 257; n++) {
		total += per_class(n);
		total_val += val_share(per_class(n));
	}
	CHECK_EQ_INT(tr->count + va->count, total);
	CHECK_EQ_INT(va->count, total_val);
	CHECK_EQ_INT(tr->n_classes, 257);
	CHECK_EQ_INT(va->n_classes, 257);
	CHECK_EQ_STR(tr->classes[0], "001.ak47");
	CHECK_EQ_STR(tr->classes[14], "015.bonsai-101");
	CHECK_EQ_STR(tr->classes[55], "056.dog");
	CHECK_EQ_STR(tr->classes[255], "256.toad");
	CHECK_EQ_STR(tr->classes[256], "257.clutter");
	CHECK_EQ_STR(va->classes[256], "257.clutter");
	for (int c = 0; c < 257; c++) {
		CHECK_EQ_INT(count_label(va, c), val_share(per_class(c + 1)));
		CHECK_EQ_INT(count_label(tr, c) + count_label(va, c), per_class(c + 1));
	}
	CHECK_EQ_INT(count_label(va, 0), 2);
	CHECK_EQ_INT(count_label(va, 256), 2);

	const ds_entry *e = find_row(&d, "256_ObjectCategories/001.ak47/001_0001.jpg");
	CHECK(e != NULL);
	if (e) {
		CHECK_EQ_INT(e->label, 0);
		CHECK_EQ_INT(e->index, 0);
	}
	e = find_row(&d, "256_ObjectCategories/257.clutter/257_0010.jpg");
	CHECK(e != NULL);
	if (e) {
		CHECK_EQ_INT(e->label, 256);
		CHECK_EQ_INT(e->index, total - 1);
	}
	e = find_row(&d, "256_ObjectCategories/015.bonsai-101/015_0003.jpg");
	CHECK(e && e->label == 14);
	e = find_row(&d, "256_ObjectCategories/014.blimp/014_0002.jpg"); /* greyscale */
	CHECK(e && e->label == 13);
	CHECK(find_row(&d, "256_ObjectCategories/198.spider/RENAME2") == NULL);
	check_paths_exist(root, &d);

	CHECK(has_note(&d, "non-image file", "256_ObjectCategories/198.spider/RENAME2"));
	CHECK(has_note(&d, "nested folder", "256_ObjectCategories/056.dog/greg"));
	CHECK(!has_note(&d, "partial", NULL));
	CHECK_EQ_INT(d.n_notes, 2);
	for (size_t i = 0; i < d.n_notes; i++)
		fprintf(stderr, "note: %s\n", d.notes[i]);

	/* Same seed: identical lists; another seed: another val. */
	ds_dataset d2;
	CHECK_OK(load(root, &o, &d2, &err), &err);
	CHECK(same_rows(split(&d2, "train"), tr));
	CHECK(same_rows(split(&d2, "val"), va));
	ds_dataset_release(&d2);
	o.seed = 7;
	CHECK_OK(load(root, &o, &d2, &err), &err);
	CHECK(!same_rows(split(&d2, "val"), va));
	CHECK_EQ_INT(split(&d2, "val")->count, va->count);
	ds_dataset_release(&d2);

	/* Another ratio; 0 gives train only. */
	o.seed = 0;
	o.val_ratio = 0.5;
	CHECK_OK(load(root, &o, &d2, &err), &err);
	CHECK_EQ_INT(count_label(split(&d2, "val"), 0), 5);
	ds_dataset_release(&d2);
	o.val_ratio = 0;
	CHECK_OK(load(root, &o, &d2, &err), &err);
	CHECK_EQ_INT(d2.n_splits, 1);
	CHECK_EQ_INT(d2.splits[0].list.count, total);
	ds_dataset_release(&d2);
	o.val_ratio = 1;
	CHECK_EQ_INT(load(root, &o, &d2, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "cannot split Caltech-256: --val-ratio must be in [0, 1), got 1") != NULL);
	/* [0, 1), as the command and Python take it: 0.995 is a share */
	o.val_ratio = 0.995;
	CHECK_OK(load(root, &o, &d2, &err), &err);
	CHECK_EQ_INT(d2.n_splits, 2);
	ds_dataset_release(&d2);
	ds_dataset_release(&d);
}

static void test_no_clutter(const char *root)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	o.no_clutter = 1;
	ds_dataset d;
	ims_error err;
	CHECK_OK(load(root, &o, &d, &err), &err);
	const ds_list *tr = split(&d, "train"), *va = split(&d, "val");
	CHECK(tr && va);
	if (tr && va) {
		CHECK_EQ_INT(tr->n_classes, 256);
		CHECK_EQ_STR(tr->classes[255], "256.toad");
		int total = 0;
		for (int n = 1; n <= 256; n++)
			total += per_class(n);
		CHECK_EQ_INT(tr->count + va->count, total);
		CHECK_EQ_INT(count_label(tr, 256) + count_label(va, 256), 0);
		CHECK(find_row(&d, "256_ObjectCategories/257.clutter/257_0001.jpg") == NULL);
		const ds_entry *e = find_row(&d, "256_ObjectCategories/256.toad/256_0001.jpg");
		CHECK(e && e->label == 255);
		CHECK(!has_note(&d, "partial", NULL));
	}
	ds_dataset_release(&d);
}

/* ROOT may be the 256_ObjectCategories folder itself. */
static void test_categories_root(const char *root)
{
	char cats[4096];
	snprintf(cats, sizeof(cats), "%s/256_ObjectCategories", root);
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	ims_error err;
	CHECK_OK(load(cats, &o, &d, &err), &err);
	const ds_entry *e = find_row(&d, "001.ak47/001_0001.jpg");
	CHECK(e && e->label == 0);
	e = find_row(&d, "257.clutter/257_0001.jpg");
	CHECK(e && e->label == 256);
	CHECK(has_note(&d, "non-image file", "'198.spider/RENAME2'"));
	check_paths_exist(cats, &d);
	ds_dataset_release(&d);
}

static void test_errors(void)
{
	char empty[2048], bad[2048];
	snprintf(empty, sizeof(empty), "%s/empty", tmpdir);
	mkdir(empty, 0755);
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	ims_error err;
	CHECK_EQ_INT(load(empty, &o, &d, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "256_ObjectCategories") && strstr(err.msg, empty));
	CHECK_EQ_INT(d.n_splits, 0);
	snprintf(bad, sizeof(bad), "%s/missing", tmpdir);
	CHECK_EQ_INT(load(bad, &o, &d, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, bad) != NULL);

	/* A partial download: a note, not an error. Then a stray folder. */
	char part[2048];
	snprintf(part, sizeof(part), "%s/partial", tmpdir);
	CHECK_EQ_INT(sh("/usr/bin/python3 \"$IMS_SRC/tests/fixtures/make_caltech256.py\" '%s' && "
			"rm -r '%s/256_ObjectCategories/256.toad'", part, part), 0);
	CHECK_OK(load(part, &o, &d, &err), &err);
	CHECK(has_note(&d, "found 256 class folders", "expected 257"));
	CHECK_EQ_INT(split(&d, "train")->n_classes, 256);
	ds_dataset_release(&d);
	/* a class folder emptied: kept, and the note counts it */
	CHECK_EQ_INT(sh("rm -f '%s/256_ObjectCategories/002.american-flag/'*%s", part, ""), 0);
	CHECK_OK(load(part, &o, &d, &err), &err);
	CHECK(has_note(&d, "1 class folder holds no image", "labels do not shift"));
	ds_dataset_release(&d);
	CHECK_EQ_INT(sh("mkdir -p '%s/256_ObjectCategories/misc' && touch "
			"'%s/256_ObjectCategories/misc/a.jpg'", part, part), 0);
	CHECK_EQ_INT(load(part, &o, &d, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "'256_ObjectCategories/misc'") != NULL);
	CHECK_EQ_INT(d.n_splits, 0);
	fprintf(stderr, "expected error: %s\n", err.msg);
}

/* A file (or a broken link) where a class folder belongs: refused, naming
 * it, since skipping it would shift the label of every class after it. */
static void test_class_file(void)
{
	char root[2048];
	snprintf(root, sizeof(root), "%s/classfile", tmpdir);
	CHECK_EQ_INT(sh("/usr/bin/python3 \"$IMS_SRC/tests/fixtures/make_caltech256.py\" '%s' && "
			"cd '%s/256_ObjectCategories' && rm -r 001.ak47 && echo x > 001.ak47",
			root, root), 0);
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	ims_error err;
	CHECK_EQ_INT(load(root, &o, &d, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "'256_ObjectCategories/001.ak47' is a file") != NULL);
	CHECK(strstr(err.msg, "remove it") != NULL);
	CHECK(strchr(err.msg, '\n') == NULL);
	CHECK_EQ_INT(d.n_splits, 0);
	fprintf(stderr, "expected error: %s\n", err.msg);
	/* ROOT given as the categories folder: named relative to it */
	char cats[2100];
	snprintf(cats, sizeof(cats), "%s/256_ObjectCategories", root);
	CHECK_EQ_INT(load(cats, &o, &d, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "'001.ak47' is a file") != NULL);
	/* a broken link in its place */
	CHECK_EQ_INT(sh("cd '%s' && rm 001.ak47 && ln -s nowhere 001.ak47%s", cats, ""), 0);
	CHECK_EQ_INT(load(root, &o, &d, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "'256_ObjectCategories/001.ak47' is a broken link") != NULL);
	/* removed, as the message says: labels are the folders present */
	CHECK_EQ_INT(sh("rm '%s/001.ak47'%s", cats, ""), 0);
	CHECK_OK(load(root, &o, &d, &err), &err);
	CHECK(has_note(&d, "found 256 class folders", "expected 257"));
	ds_dataset_release(&d);
}

int main(void)
{
	if (!getenv("IMS_SRC")) {
		fprintf(stderr, "IMS_SRC is not set\n");
		return TEST_SKIP;
	}
	make_tmpdir();
	char root[2048];
	snprintf(root, sizeof(root), "%s/caltech", tmpdir);
	if (sh("/usr/bin/python3 \"$IMS_SRC/tests/fixtures/make_caltech256.py\" '%s'%s",
	       root, "") != 0) {
		fprintf(stderr, "cannot make the fixture in '%s'\n", root);
		return 1;
	}
	test_default(root);
	test_no_clutter(root);
	test_categories_root(root);
	test_errors();
	test_class_file();
	int rc = TEST_EXIT();
	if (rc == 0)
		sh("rm -rf '%s'%s", tmpdir, "");
	return rc;
}
