/*
 * test_ds_folder.c - the folder adapter on a small class-folder tree made
 * here (the adapter lists files and never reads them, so they are empty):
 * three classes of 4, 8 and 12 images, an empty class folder, a non-image
 * file, a nested folder with an image, an image directly in ROOT.
 *
 * Checks: splits and their stratified counts per class (train only by
 * default, val/test with their ratios), labels and class names, the notes
 * for every scan-report counter, determinism, --recursive and --exts, and
 * the errors (missing root, bad ratios).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/datasets.h"
#include "test.h"
#include "ds_test_util.h"

static char tmpdir[1024];
static char root[2048];

static void make_tmpdir(void)
{
	test_tmpdir(tmpdir, sizeof(tmpdir), "test_ds_folder");
	snprintf(root, sizeof(root), "%s/root", tmpdir);
}

/* Creates root/rel (a file, or a folder when rel ends with '/'). */
static void touch(const char *rel)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", root, rel);
	for (char *s = p + strlen(tmpdir) + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST) {
			perror(p);
			exit(1);
		}
		*s = '/';
	}
	if (p[strlen(p) - 1] == '/')
		return;
	FILE *f = fopen(p, "wb");
	if (!f) {
		perror(p);
		exit(1);
	}
	fclose(f);
}

static const ds_list *split(const ds_dataset *d, const char *name)
{
	for (int i = 0; i < d->n_splits; i++)
		if (strcmp(d->splits[i].name, name) == 0)
			return &d->splits[i].list;
	return NULL;
}

static const ds_entry *find_in(const ds_list *l, const char *path)
{
	for (size_t i = 0; l && i < l->count; i++)
		if (strcmp(l->items[i].path, path) == 0)
			return &l->items[i];
	return NULL;
}

static int load(const ds_convert_opts *o, ds_dataset *d, ims_error *err)
{
	memset(d, 0, sizeof(*d));
	return ds_adapter_folder.load(root, o, d, err);
}

static void make_tree(void)
{
	char rel[256];
	const char *cls[3] = {"apple", "Banana split", "cherry"}; /* sorted: B, a, c */
	int n[3] = {4, 8, 12};
	for (int c = 0; c < 3; c++)
		for (int i = 0; i < n[c]; i++) {
			snprintf(rel, sizeof(rel), "%s/img %02d.%s", cls[c], i,
				 i % 4 == 3 ? "PNG" : "jpg");
			touch(rel);
		}
	touch("durian/");              /* an empty class */
	touch("apple/readme.txt");     /* a non-image file */
	touch("cherry/more/deep.jpg"); /* a nested image */
	touch("loose.jpg");            /* an image in no class */
}

static void test_default(void)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	ims_error err;
	CHECK_OK(load(&o, &d, &err), &err);
	CHECK_EQ_INT(d.n_splits, 1);
	const ds_list *tr = split(&d, "train");
	CHECK(tr != NULL);
	if (!tr) {
		ds_dataset_release(&d);
		return;
	}
	CHECK_EQ_INT(tr->count, 24);
	CHECK_EQ_INT(tr->n_classes, 4);
	if (tr->n_classes == 4) {
		CHECK_EQ_STR(tr->classes[0], "Banana split");
		CHECK_EQ_STR(tr->classes[1], "apple");
		CHECK_EQ_STR(tr->classes[2], "cherry");
		CHECK_EQ_STR(tr->classes[3], "durian");
	}
	const ds_entry *e = find_in(tr, "Banana split/img 00.jpg");
	CHECK(e && e->label == 0 && e->index == 0);
	e = find_in(tr, "apple/img 03.PNG");
	CHECK(e && e->label == 1);
	e = find_in(tr, "cherry/img 11.PNG");
	CHECK(e && e->label == 2 && e->index == 23);
	CHECK(find_in(tr, "apple/readme.txt") == NULL);
	CHECK(find_in(tr, "cherry/more/deep.jpg") == NULL);
	CHECK(has_note(&d, "ignored 1 file not matching", ".jpg,.jpeg,.png"));
	CHECK(has_note(&d, "ignored 1 image in nested folders", "--recursive"));
	CHECK(has_note(&d, "1 class folder holds no image", NULL));
	CHECK(has_note(&d, "ignored 1 image directly in ROOT", NULL));
	CHECK(has_note(&d, "non-image file", "'apple/readme.txt'"));
	CHECK(has_note(&d, "nested folder", "'cherry/more'"));
	CHECK(has_note(&d, "file", "'loose.jpg'"));
	for (size_t i = 0; i < d.n_notes; i++)
		fprintf(stderr, "note: %s\n", d.notes[i]);
	ds_dataset_release(&d);
}

static void test_splits(void)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	o.val_ratio = 0.25;
	o.test_ratio = 0.25;
	o.seed = 5;
	ds_dataset d, d2;
	ims_error err;
	CHECK_OK(load(&o, &d, &err), &err);
	CHECK_EQ_INT(d.n_splits, 3);
	const ds_list *tr = split(&d, "train"), *va = split(&d, "val"),
		      *te = split(&d, "test");
	CHECK(tr && va && te);
	if (!tr || !va || !te) {
		ds_dataset_release(&d);
		return;
	}
	/* 8, 4, 12 images: a quarter each to val and test. */
	int n[3] = {8, 4, 12};
	for (int c = 0; c < 3; c++) {
		CHECK_EQ_INT(count_label(va, c), n[c] / 4);
		CHECK_EQ_INT(count_label(te, c), n[c] / 4);
		CHECK_EQ_INT(count_label(tr, c), n[c] - n[c] / 2);
	}
	CHECK_EQ_INT(va->n_classes, 4);
	CHECK_EQ_INT(te->n_classes, 4);
	CHECK_EQ_STR(te->classes[0], "Banana split");
	size_t shared = 0;
	for (size_t i = 0; i < va->count; i++)
		shared += find_in(tr, va->items[i].path) || find_in(te, va->items[i].path);
	CHECK_EQ_INT(shared, 0);

	CHECK_OK(load(&o, &d2, &err), &err);
	CHECK(same_rows(split(&d2, "train"), tr));
	CHECK(same_rows(split(&d2, "val"), va));
	CHECK(same_rows(split(&d2, "test"), te));
	ds_dataset_release(&d2);
	o.seed = 6;
	CHECK_OK(load(&o, &d2, &err), &err);
	CHECK(!same_rows(split(&d2, "val"), va) || !same_rows(split(&d2, "test"), te));
	ds_dataset_release(&d2);

	/* Test only; val_ratio < 0 means none. */
	o.val_ratio = -1;
	o.test_ratio = 0.5;
	CHECK_OK(load(&o, &d2, &err), &err);
	CHECK_EQ_INT(d2.n_splits, 2);
	CHECK(split(&d2, "val") == NULL);
	CHECK_EQ_INT(split(&d2, "test") ? split(&d2, "test")->count : 0, 12);
	ds_dataset_release(&d2);

	o.val_ratio = 0.6;
	CHECK_EQ_INT(load(&o, &d2, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, ": --val-ratio plus --test-ratio must be below 1, got 0.6 + 0.5") != NULL);
	CHECK_EQ_INT(d2.n_splits, 0);
	/* the command's and Python's rule: [0, 1) each, so 0.995 is a share
	 * and a negative test share no "none" */
	o.val_ratio = 0.995;
	o.test_ratio = 0;
	CHECK_OK(load(&o, &d2, &err), &err);
	ds_dataset_release(&d2);
	o.val_ratio = 0.2;
	o.test_ratio = -0.5;
	CHECK_EQ_INT(load(&o, &d2, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, ": --test-ratio must be in [0, 1), got -0.5") != NULL);
	CHECK_EQ_INT(d2.n_splits, 0);
	o.test_ratio = 1;
	CHECK_EQ_INT(load(&o, &d2, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, ": --test-ratio must be in [0, 1), got 1") != NULL);
	ds_dataset_release(&d);
}

static void test_recursive_exts(void)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	o.recursive = 1;
	ds_dataset d;
	ims_error err;
	CHECK_OK(load(&o, &d, &err), &err);
	const ds_list *tr = split(&d, "train");
	CHECK(tr && tr->count == 25);
	if (tr) {
		/* im2rec's order: cherry labelled before cherry/more. */
		CHECK_EQ_INT(tr->n_classes, 4);
		const ds_entry *e = find_in(tr, "cherry/more/deep.jpg");
		CHECK(e && e->label == 3);
		if (tr->n_classes == 4)
			CHECK_EQ_STR(tr->classes[3], "cherry/more");
	}
	ds_dataset_release(&d);

	ds_convert_opts_init(&o);
	o.exts = "png";
	CHECK_OK(load(&o, &d, &err), &err);
	tr = split(&d, "train");
	CHECK(tr && tr->count == 6);
	CHECK(has_note(&d, "not matching png", NULL));
	ds_dataset_release(&d);

	o.exts = "";
	CHECK_EQ_INT(load(&o, &d, &err), IMS_EINVAL);
}

/*
 * An entry named like an image that is no regular file (a FIFO) is
 * named, as what it is: in the count's note, and among the ignored
 * entries not as a "non-image file" (before: the count's note named
 * none, and the list of ignored entries called the FIFO a non-image
 * file).
 */
static void test_special_files(void)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/apple/fifo.jpg", root);
	if (mkfifo(p, 0644) != 0) {
		perror(p);
		exit(1);
	}
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	ims_error err;
	CHECK_OK(load(&o, &d, &err), &err);
	CHECK(find_in(split(&d, "train"), "apple/fifo.jpg") == NULL);
	CHECK(has_note(&d, "ignored 1 entry named like an image that is no regular file",
		       "('apple/fifo.jpg': a FIFO, socket or device)"));
	CHECK(!has_note(&d, "non-image file", "'apple/fifo.jpg'"));
	CHECK(has_note(&d, "ignored entry that is no regular file 'apple/fifo.jpg'",
		       "(a FIFO, socket or device)"));
	CHECK(has_note(&d, "non-image file", "'apple/readme.txt'"));
	for (size_t i = 0; i < d.n_notes; i++)
		fprintf(stderr, "note: %s\n", d.notes[i]);
	ds_dataset_release(&d);
	unlink(p);
}

static void test_errors(void)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	ims_error err;
	memset(&d, 0, sizeof(d));
	char missing[4096];
	snprintf(missing, sizeof(missing), "%s/missing", tmpdir);
	CHECK_EQ_INT(ds_adapter_folder.load(missing, &o, &d, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, missing) != NULL);
	CHECK_EQ_INT(d.n_splits, 0);
}

int main(void)
{
	make_tmpdir();
	make_tree();
	test_default();
	test_splits();
	test_recursive_exts();
	test_special_files();
	test_errors();
	int rc = TEST_EXIT();
	if (rc == 0) {
		char cmd[2048];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove '%s'\n", tmpdir);
	}
	return rc;
}
