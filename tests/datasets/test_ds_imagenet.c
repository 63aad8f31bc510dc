/*
 * test_ds_imagenet.c - the ImageNet adapter on fixtures of both layouts
 * (tests/fixtures/make_imagenet.py): counts, sorted-wnid labels (devkit IDs
 * mapped, Kaggle CSV first tokens, sorted val folders), classes, row order,
 * determinism, notes, and every error naming its culprit.
 */
#define _GNU_SOURCE
#include "datasets/datasets.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What make_imagenet.py writes (see its docstring). */
static const char *const wnids[] = {"n01440764", "n01751748", "n02012849",
				    "n02100735", "n02105855", "n02113186",
				    "n02119789", "n02963159", "n03126707",
				    "n15075141"};
static const int train_counts[] = {4, 3, 5, 3, 4, 3, 4, 3, 3, 4};
#define N_CLASSES 10
#define N_TRAIN 36
#define N_VAL 20
#define SEA_SNAKE 1 /* sorted index of n01751748, devkit ID 490 */

static char scratch[4096];
static const char *src_dir;

/* Makes a fixture; returns its root (static buffer per call site). */
static const char *make(const char *name, const char *layout, const char *broken)
{
	static char roots[16][8192];
	static int next;
	char *root = roots[next++ % 16];
	snprintf(root, 8192, "%s/%s", scratch, name);
	char cmd[16384];
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 '%s/tests/fixtures/make_imagenet.py' '%s' "
		 "--layout %s%s%s",
		 src_dir, root, layout, broken ? " --broken " : "",
		 broken ? broken : "");
	int rc = system(cmd);
	if (rc != 0) {
		fprintf(stderr, "fixture command failed (%d): %s\n", rc, cmd);
		exit(1);
	}
	return root;
}

static int load(const char *root, ds_dataset *d, ims_error *err)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	memset(d, 0, sizeof(*d));
	ims_error_clear(err);
	return ds_adapter_imagenet.load(root, &o, d, err);
}

static const ds_list *split(const ds_dataset *d, const char *name)
{
	for (int i = 0; i < d->n_splits; i++)
		if (strcmp(d->splits[i].name, name) == 0)
			return &d->splits[i].list;
	return NULL;
}

static int has_note(const ds_dataset *d, const char *text)
{
	for (size_t i = 0; i < d->n_notes; i++)
		if (strstr(d->notes[i], text))
			return 1;
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* Checks the common shape of a loaded fixture; prefix is where train/ and
 * val/ lie ("ILSVRC/Data/CLS-LOC/" or ""). */
static void check_dataset(const ds_dataset *d, const char *prefix, int sorted_val)
{
	CHECK_EQ_INT(d->n_splits, 2);
	CHECK_EQ_INT(d->rows_are_records, 0);
	const ds_list *tr = split(d, "train"), *va = split(d, "val");
	CHECK(tr && va);
	if (!tr || !va)
		return;
	CHECK_EQ_STR(d->splits[0].name, "train");
	CHECK_EQ_STR(d->splits[1].name, "val");
	for (int s = 0; s < 2; s++) {
		const ds_list *l = s ? va : tr;
		CHECK_EQ_INT(l->n_classes, N_CLASSES);
		for (size_t k = 0; k < l->n_classes && k < N_CLASSES; k++)
			CHECK_EQ_STR(l->classes[k], wnids[k]);
		for (size_t i = 0; i < l->count; i++) {
			CHECK_EQ_U64(l->items[i].index, i);
			CHECK(l->items[i].label >= 0 && l->items[i].label < N_CLASSES);
			CHECK_EQ_INT(strncmp(l->items[i].path, prefix, strlen(prefix)), 0);
			CHECK_EQ_INT(l->items[i].n_extra, 0);
		}
	}
	CHECK_EQ_INT(tr->count, N_TRAIN);
	CHECK_EQ_INT(va->count, N_VAL);

	/* Train: sorted wnid, then byte-wise sorted file name; the path is
	 * PREFIX train/<wnid>/<file>, its wnid the class of the label. */
	size_t counts[N_CLASSES] = {0};
	char want[512];
	int found_png = 0;
	for (size_t i = 0; i < tr->count; i++) {
		const ds_entry *e = &tr->items[i];
		if (e->label < 0 || e->label >= N_CLASSES)
			continue;
		counts[e->label]++;
		snprintf(want, sizeof(want), "%strain/%s/%s_", prefix, wnids[e->label],
			 wnids[e->label]);
		CHECK_EQ_INT(strncmp(e->path, want, strlen(want)), 0);
		if (i > 0) {
			const ds_entry *p = &tr->items[i - 1];
			CHECK(p->label < e->label ||
			      (p->label == e->label && strcmp(p->path, e->path) < 0));
		}
		found_png |= strcmp(base_name(e->path), "n02105855_2933.JPEG") == 0 &&
			     e->label == 4;
	}
	for (int k = 0; k < N_CLASSES; k++)
		CHECK_EQ_INT(counts[k], train_counts[k]);
	CHECK(found_png); /* listed by name; the packer finds it is a PNG */

	/* Val: image-number order, two per class; image 1 is the sea snake. */
	size_t vcounts[N_CLASSES] = {0};
	for (size_t i = 0; i < va->count; i++) {
		const ds_entry *e = &va->items[i];
		snprintf(want, sizeof(want), "ILSVRC2012_val_%08zu.JPEG", i + 1);
		CHECK_EQ_STR(base_name(e->path), want);
		if (e->label >= 0 && e->label < N_CLASSES) {
			vcounts[e->label]++;
			if (sorted_val)
				snprintf(want, sizeof(want), "%sval/%s/ILSVRC2012_val_%08zu.JPEG",
					 prefix, wnids[e->label], i + 1);
			else
				snprintf(want, sizeof(want), "%sval/ILSVRC2012_val_%08zu.JPEG",
					 prefix, i + 1);
			CHECK_EQ_STR(e->path, want);
		}
	}
	for (int k = 0; k < N_CLASSES; k++)
		CHECK_EQ_INT(vcounts[k], 2);
	CHECK_EQ_INT(va->items[0].label, SEA_SNAKE);
	CHECK(has_note(d, "partial set"));
	CHECK(has_note(d, "test"));
}

static void check_same_labels(const ds_dataset *a, const ds_dataset *b)
{
	for (int s = 0; s < 2; s++) {
		const ds_list *x = &a->splits[s].list, *y = &b->splits[s].list;
		CHECK_EQ_INT(x->count, y->count);
		for (size_t i = 0; i < x->count && i < y->count; i++) {
			CHECK_EQ_INT(x->items[i].label, y->items[i].label);
			CHECK_EQ_STR(base_name(x->items[i].path), base_name(y->items[i].path));
		}
	}
}

static void check_same(const ds_dataset *a, const ds_dataset *b)
{
	CHECK_EQ_INT(a->n_splits, b->n_splits);
	CHECK_EQ_INT(a->n_notes, b->n_notes);
	check_same_labels(a, b);
	for (int s = 0; s < 2 && s < a->n_splits && s < b->n_splits; s++)
		for (size_t i = 0; i < a->splits[s].list.count &&
				   i < b->splits[s].list.count; i++)
			CHECK_EQ_STR(a->splits[s].list.items[i].path,
				     b->splits[s].list.items[i].path);
}

/* Loads a broken fixture: expects code and every piece of text in the
 * message, and nothing left in the dataset. */
static void expect_error(const char *root, int code, const char *t1,
			 const char *t2)
{
	ds_dataset d;
	ims_error err;
	int rc = load(root, &d, &err);
	CHECK_EQ_INT(rc, code);
	CHECK_EQ_INT(err.code, code);
	if (t1 && !strstr(err.msg, t1)) {
		fprintf(stderr, "  message '%s' lacks '%s'\n", err.msg, t1);
		CHECK(0);
	}
	if (t2 && !strstr(err.msg, t2)) {
		fprintf(stderr, "  message '%s' lacks '%s'\n", err.msg, t2);
		CHECK(0);
	}
	CHECK_EQ_INT(d.n_splits, 0);
	CHECK_EQ_INT(d.n_notes, 0);
	ds_dataset_release(&d);
}

int main(void)
{
	src_dir = getenv("IMS_SRC");
	if (!src_dir) {
		fprintf(stderr, "IMS_SRC is not set\n");
		return 1;
	}
	if (access("/usr/bin/python3", X_OK) != 0 ||
	    system("/usr/bin/python3 -c 'import PIL' 2>/dev/null") != 0) {
		fprintf(stderr, "skipped: needs /usr/bin/python3 with PIL\n");
		return TEST_SKIP;
	}
	test_tmpdir(scratch, sizeof(scratch), "ds_imagenet");
	ims_error err;
	ds_dataset kg, dk, ds, again;

	/* Kaggle layout. */
	const char *kroot = make("kaggle", "kaggle", NULL);
	CHECK_OK(load(kroot, &kg, &err), &err);
	check_dataset(&kg, "ILSVRC/Data/CLS-LOC/", 0);
	CHECK(split(&kg, "train") && split(&kg, "val"));

	/* devkit, flat val: ground-truth IDs map to the same sorted labels. */
	const char *droot = make("devkit", "devkit", NULL);
	CHECK_OK(load(droot, &dk, &err), &err);
	check_dataset(&dk, "", 0);
	if (dk.n_splits == 2 && dk.splits[1].list.count > 0) {
		/* not the devkit ID (490) nor its position in map_clsloc.txt */
		CHECK_EQ_INT(dk.splits[1].list.items[0].label, SEA_SNAKE);
	}
	if (kg.n_splits == 2 && dk.n_splits == 2)
		check_same_labels(&kg, &dk);

	/* devkit, val sorted into wnid folders: labels from the folders. */
	const char *sroot = make("sorted", "devkit-sorted", NULL);
	CHECK_OK(load(sroot, &ds, &err), &err);
	check_dataset(&ds, "", 1);
	CHECK(has_note(&ds, "wnid folders"));
	if (ds.n_splits == 2 && dk.n_splits == 2)
		check_same_labels(&ds, &dk);

	/* Determinism: a second load gives the same rows and notes. */
	CHECK_OK(load(kroot, &again, &err), &err);
	check_same(&kg, &again);
	ds_dataset_release(&again);
	CHECK_OK(load(droot, &again, &err), &err);
	check_same(&dk, &again);
	ds_dataset_release(&again);

	/* A mapping class without a train folder is a note, not an error. */
	const char *nt = make("notrain", "devkit", "no-train");
	CHECK_OK(load(nt, &again, &err), &err);
	if (again.n_splits == 2) {
		CHECK_EQ_INT(again.splits[0].list.count, N_TRAIN - 3);
		CHECK_EQ_INT(again.splits[0].list.n_classes, N_CLASSES);
		CHECK_EQ_INT(again.splits[1].list.count, N_VAL);
	}
	CHECK(has_note(&again, "'n02963159'"));
	ds_dataset_release(&again);

	/* Errors, each naming its culprit. */
	expect_error(make("k-unknown", "kaggle", "unknown-wnid"), IMS_ENOTFOUND,
		     "ILSVRC/Data/CLS-LOC/train/n09999999", "LOC_synset_mapping.txt");
	expect_error(make("d-unknown", "devkit", "unknown-wnid"), IMS_ENOTFOUND,
		     "train/n09999999", "map_clsloc.txt");
	expect_error(make("s-unknown", "devkit-sorted", "unknown-wnid"),
		     IMS_ENOTFOUND, "train/n09999999", "map_clsloc.txt");
	expect_error(make("k-missing", "kaggle", "missing-image"), IMS_ENOTFOUND,
		     "LOC_val_solution.csv' line ", "'ILSVRC2012_val_00000005'");
	expect_error(make("d-missing", "devkit", "missing-image"), IMS_ENOTFOUND,
		     "ILSVRC2012_validation_ground_truth.txt' line 5:",
		     "'ILSVRC2012_val_00000005'");
	expect_error(make("k-unlabeled", "kaggle", "unlabeled"), IMS_ENOTFOUND,
		     "val/ILSVRC2012_val_00000009.JPEG'", "LOC_val_solution.csv");
	expect_error(make("d-unlabeled", "devkit", "unlabeled"), IMS_ENOTFOUND,
		     "val/ILSVRC2012_val_00000021.JPEG'",
		     "ILSVRC2012_validation_ground_truth.txt' has 20 lines");
	expect_error(make("s-unlabeled", "devkit-sorted", "unlabeled"),
		     IMS_ENOTFOUND, "val/ILSVRC2012_val_00000021.JPEG'",
		     "wnid folders");
	expect_error(make("k-bad", "kaggle", "bad-label"), IMS_EFORMAT,
		     "LOC_val_solution.csv' line ", "'n09999999'");
	expect_error(make("d-bad", "devkit", "bad-label"), IMS_EFORMAT,
		     "ILSVRC2012_validation_ground_truth.txt' line 3:", "ID 731");

	/* Missing label files, and no layout at all. */
	char p[8192];
	const char *km = make("k-nocsv", "kaggle", NULL);
	snprintf(p, sizeof(p), "%s/LOC_val_solution.csv", km);
	CHECK_EQ_INT(unlink(p), 0);
	expect_error(km, IMS_ENOTFOUND, "LOC_val_solution.csv", NULL);
	const char *dm = make("d-nogt", "devkit", NULL);
	snprintf(p, sizeof(p), "%s/ILSVRC2012_devkit_t12/data/"
		 "ILSVRC2012_validation_ground_truth.txt", dm);
	CHECK_EQ_INT(unlink(p), 0);
	expect_error(dm, IMS_ENOTFOUND, "ILSVRC2012_validation_ground_truth.txt", NULL);
	snprintf(p, sizeof(p), "%s/map_clsloc.txt", dm);
	CHECK_EQ_INT(unlink(p), 0);
	expect_error(dm, IMS_ENOTFOUND, "missing", "map_clsloc.txt");
	snprintf(p, sizeof(p), "%s/empty", scratch);
	CHECK_EQ_INT(mkdir(p, 0755), 0);
	expect_error(p, IMS_ENOTFOUND, "LOC_synset_mapping.txt", "map_clsloc.txt");
	/* a mapping file holding a NUL byte is refused (found by
	 * fuzz_imagenet: its buffer leaked, which the ASan build catches) */
	const char *kn = make("k-nul", "kaggle", NULL);
	snprintf(p, sizeof(p), "%s/LOC_synset_mapping.txt", kn);
	FILE *f = fopen(p, "ab");
	CHECK(f != NULL);
	if (f) {
		fputc(0, f);
		fclose(f);
	}
	expect_error(kn, IMS_EFORMAT, "not a text file", "LOC_synset_mapping.txt");

	ds_dataset_release(&kg);
	ds_dataset_release(&dk);
	ds_dataset_release(&ds);
	return test_tmp_done(scratch, TEST_EXIT());
}
