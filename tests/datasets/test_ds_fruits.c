/*
 * test_ds_fruits.c - the fruits adapter on fixtures made by
 * tests/fixtures/make_fruits.py: the six classes as RGBA/RGB PNGs named
 * like the real screenshots (spaces, dots, augmentation prefixes), in the
 * plain layout (dataset/train, dataset/test), nested once more
 * (dataset/dataset/...) and with Train/Test capitalised.
 *
 * Checks: row counts per split, labels of named files, class names and
 * order, the test rows' indices after train's, the val split drawn from
 * train (stratified counts, disjoint), determinism, the root search, and
 * the errors: no dataset, two candidate folders, mismatched class folders.
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

static const char *const classes[6] = {"freshapples",  "freshbanana",
				       "freshoranges", "rottenapples",
				       "rottenbanana", "rottenoranges"};

static void make_tmpdir(void)
{
	test_tmpdir(tmpdir, sizeof(tmpdir), "test_ds_fruits");
}

/* Makes tmpdir/name with make_fruits.py and flags; returns its path. */
static const char *fixture(const char *name, const char *flags, char *out,
			   size_t len)
{
	if ((size_t)snprintf(out, len, "%s/%s", tmpdir, name) >= len)
		exit(1);
	if (sh("/usr/bin/python3 \"$IMS_SRC/tests/fixtures/make_fruits.py\" '%s' %s",
	       out, flags) != 0) {
		fprintf(stderr, "cannot make the fixture '%s'\n", out);
		exit(1);
	}
	return out;
}

/* The fixture's images per class k. */
static int n_train(int k)
{
	return 5 + k;
}

static int n_test(int k)
{
	return 2 + k % 2;
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

static int load(const char *root, const ds_convert_opts *o, ds_dataset *d,
		ims_error *err)
{
	memset(d, 0, sizeof(*d));
	return ds_adapter_fruits.load(root, o, d, err);
}

/* The layout with its train and test folders at dir (relative to root). */
static void check_layout(const char *root, const char *dir, const char *train_name,
			 const char *test_name)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	ims_error err;
	CHECK_OK(load(root, &o, &d, &err), &err);
	CHECK_EQ_INT(d.n_splits, 2);
	CHECK_EQ_STR(d.splits[0].name, "train");
	CHECK_EQ_STR(d.splits[1].name, "test");
	const ds_list *tr = split(&d, "train"), *te = split(&d, "test");
	if (!tr || !te) {
		CHECK(0);
		ds_dataset_release(&d);
		return;
	}
	int total_train = 0, total_test = 0;
	for (int k = 0; k < 6; k++) {
		total_train += n_train(k);
		total_test += n_test(k);
		CHECK_EQ_INT(count_label(tr, k), n_train(k));
		CHECK_EQ_INT(count_label(te, k), n_test(k));
	}
	CHECK_EQ_INT(tr->count, total_train);
	CHECK_EQ_INT(te->count, total_test);
	CHECK_EQ_INT(tr->n_classes, 6);
	CHECK_EQ_INT(te->n_classes, 6);
	for (int k = 0; k < 6 && tr->n_classes == 6 && te->n_classes == 6; k++) {
		CHECK_EQ_STR(tr->classes[k], classes[k]);
		CHECK_EQ_STR(te->classes[k], classes[k]);
	}
	/* Named files: spaces, dots, augmentation prefixes. */
	char p[1024];
	const char *sep = *dir ? "/" : "";
	snprintf(p, sizeof(p), "%s%s%s/freshapples/Screen Shot 2018-06-07 at 1.00.00 PM.png",
		 dir, sep, train_name);
	const ds_entry *e = find_in(tr, p);
	CHECK(e != NULL);
	if (e) {
		CHECK_EQ_INT(e->label, 0);
		CHECK_EQ_INT(e->index, 0);
	}
	snprintf(p, sizeof(p),
		 "%s%s%s/rottenoranges/saltandpepper_Screen Shot 2018-06-12 at 5.57.43 PM.png",
		 dir, sep, train_name);
	e = find_in(tr, p);
	CHECK(e && e->label == 5);
	snprintf(p, sizeof(p),
		 "%s%s%s/rottenbanana/rotated_by_15_Screen Shot 2018-06-11 at 3.57.59 PM.png",
		 dir, sep, test_name);
	e = find_in(te, p);
	CHECK(e && e->label == 4);
	/* Test rows follow train rows in the index column. */
	CHECK_EQ_INT(te->items[0].index, total_train);
	check_paths_exist(root, &d);
	if (*dir)
		CHECK(has_note(&d, "dataset found in", dir));
	else
		CHECK_EQ_INT(d.n_notes, 0);
	ds_dataset_release(&d);
}

static void test_val(const char *root)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	o.val_ratio = 0.2;
	ds_dataset d, d2;
	ims_error err;
	CHECK_OK(load(root, &o, &d, &err), &err);
	CHECK_EQ_INT(d.n_splits, 3);
	const ds_list *tr = split(&d, "train"), *va = split(&d, "val"),
		      *te = split(&d, "test");
	if (!tr || !va || !te) {
		CHECK(0);
		ds_dataset_release(&d);
		return;
	}
	for (int k = 0; k < 6; k++) {
		int want = (int)floor(n_train(k) * 0.2 + 0.5 + 1e-9);
		CHECK_EQ_INT(count_label(va, k), want);
		CHECK_EQ_INT(count_label(tr, k), n_train(k) - want);
		CHECK_EQ_INT(count_label(te, k), n_test(k));
	}
	CHECK_EQ_INT(va->n_classes, 6);
	size_t shared = 0;
	for (size_t i = 0; i < va->count; i++) {
		shared += find_in(tr, va->items[i].path) != NULL;
		CHECK(strstr(va->items[i].path, "dataset/train/") != NULL);
	}
	CHECK_EQ_INT(shared, 0);

	CHECK_OK(load(root, &o, &d2, &err), &err);
	CHECK(same_rows(split(&d2, "val"), va));
	CHECK(same_rows(split(&d2, "train"), tr));
	CHECK(same_rows(split(&d2, "test"), te));
	ds_dataset_release(&d2);
	o.seed = 99;
	CHECK_OK(load(root, &o, &d2, &err), &err);
	CHECK(!same_rows(split(&d2, "val"), va));
	CHECK(same_rows(split(&d2, "test"), te));
	ds_dataset_release(&d2);
	ds_dataset_release(&d);
}

static void test_errors(const char *plain)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	ims_error err;
	char p[2048];

	/* No train/test pair anywhere. */
	snprintf(p, sizeof(p), "%s/nothing/dataset/train/freshapples", tmpdir);
	CHECK_EQ_INT(sh("mkdir -p '%s'%s", p, ""), 0);
	snprintf(p, sizeof(p), "%s/nothing", tmpdir);
	CHECK_EQ_INT(load(p, &o, &d, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, p) && strstr(err.msg, "'test'"));
	CHECK_EQ_INT(d.n_splits, 0);
	snprintf(p, sizeof(p), "%s/missing", tmpdir);
	CHECK_EQ_INT(load(p, &o, &d, &err), IMS_ENOTFOUND);

	/* Two candidates: dataset/ and dataset/dataset/. */
	char two[1024];
	fixture("two", "", two, sizeof(two));
	CHECK_EQ_INT(sh("cp -r '%s/dataset' '%s/copy'", two, two), 0);
	CHECK_EQ_INT(sh("mv '%s/copy' '%s/dataset/dataset'", two, two), 0);
	CHECK_EQ_INT(load(two, &o, &d, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "'dataset'") && strstr(err.msg, "'dataset/dataset'"));
	fprintf(stderr, "expected error: %s\n", err.msg);
	/* Passing one of them as ROOT resolves it. */
	snprintf(p, sizeof(p), "%s/dataset/dataset", two);
	CHECK_OK(load(p, &o, &d, &err), &err);
	CHECK(find_in(split(&d, "train"), "train/freshapples/Screen Shot 2018-06-07 at 1.00.00 PM.png") != NULL);
	ds_dataset_release(&d);

	/* A class folder only train holds, then one only test holds. */
	char odd[1024];
	fixture("odd", "--capitalised", odd, sizeof(odd));
	CHECK_EQ_INT(sh("mv '%s/dataset/Test/freshbanana' '%s/freshbanana'", odd, odd), 0);
	CHECK_EQ_INT(load(odd, &o, &d, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "'dataset/Train/freshbanana'") && strstr(err.msg, "'dataset/Test'"));
	CHECK(strstr(err.msg, "1 differs") != NULL);
	fprintf(stderr, "expected error: %s\n", err.msg);
	CHECK_EQ_INT(sh("mv '%s/freshbanana' '%s/dataset/Test/freshbananas'", odd, odd), 0);
	CHECK_EQ_INT(load(odd, &o, &d, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "'dataset/Test/freshbananas'") &&
	      strstr(err.msg, "'dataset/Train/freshbanana'"));
	fprintf(stderr, "expected error: %s\n", err.msg);
	CHECK_EQ_INT(d.n_splits, 0);

	/* Ignored entries are named; non-PNG images are listed. */
	CHECK_EQ_INT(sh("mv '%s/dataset/Test/freshbananas' '%s/dataset/Test/freshbanana'", odd,
			odd), 0);
	CHECK_EQ_INT(sh("touch '%s/dataset/Train/freshapples/Thumbs.db' '%s/dataset/Train/notes.txt'",
			odd, odd), 0);
	CHECK_EQ_INT(sh("mkdir '%s/dataset/Train/freshapples/extra' && cp "
			"'%s/dataset/Train/freshapples/Screen Shot 2018-06-07 at 1.00.00 PM.png' "
			"'%s/dataset/Train/freshapples/extra/x.png'",
			odd, odd) == 0 ? 0 : 1, 1); /* three %s: made below instead */
	snprintf(p, sizeof(p), "%s/dataset/Train/freshapples/extra", odd);
	CHECK_EQ_INT(sh("mkdir -p '%s' && touch '%s/x.png'", p, p), 0);
	CHECK_OK(load(odd, &o, &d, &err), &err);
	CHECK(has_note(&d, "non-image file", "'dataset/Train/freshapples/Thumbs.db'"));
	CHECK(has_note(&d, "file", "'dataset/Train/notes.txt'"));
	CHECK(has_note(&d, "nested folder", "'dataset/Train/freshapples/extra'"));
	CHECK(has_note(&d, "1 image in nested folders", NULL));
	for (size_t i = 0; i < d.n_notes; i++)
		fprintf(stderr, "note: %s\n", d.notes[i]);
	ds_dataset_release(&d);
	(void)plain;
}

int main(void)
{
	if (!getenv("IMS_SRC")) {
		fprintf(stderr, "IMS_SRC is not set\n");
		return TEST_SKIP;
	}
	make_tmpdir();
	char plain[1024], nested[1024], caps[1024];
	fixture("plain", "", plain, sizeof(plain));
	fixture("nested", "--nested", nested, sizeof(nested));
	fixture("caps", "--nested --capitalised", caps, sizeof(caps));
	check_layout(plain, "dataset", "train", "test");
	check_layout(nested, "dataset/dataset", "train", "test");
	/* A macOS zip's shadow tree is no second candidate. */
	CHECK_EQ_INT(sh("mkdir -p '%s/__MACOSX/dataset/dataset/Train' '%s/__MACOSX/dataset/dataset/Test'",
			caps, caps), 0);
	check_layout(caps, "dataset/dataset", "Train", "Test");
	/* ROOT may be the dataset folder itself, or hold train/test. */
	char p[2048];
	snprintf(p, sizeof(p), "%s/dataset", plain);
	check_layout(p, "", "train", "test");
	test_val(plain);
	test_errors(plain);
	int rc = TEST_EXIT();
	if (rc == 0)
		sh("rm -rf '%s'%s", tmpdir, "");
	return rc;
}
