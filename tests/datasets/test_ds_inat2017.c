/*
 * test_ds_inat2017.c - the iNaturalist 2017 adapter on trees written by
 * tests/fixtures/make_inat2017.py (the real layout and JSON schema, with
 * ids in no order, annotations in another order than images, non-ASCII
 * species names and images no JSON names): counts per split, labels in
 * both label modes, keep_classes, the ignored-images note, determinism,
 * and every error case with the culprit named.
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/datasets.h"
#include "test.h"

#define PIN_TRAIN_FILE                                                         \
	"train_val_images/Aves/Anas superciliosa \xc3\x97 platyrhynchos/"      \
	"00c0ffee00c0ffee00c0ffee00c0ffee.jpg"
#define PIN_VAL_FILE                                                           \
	"train_val_images/Protozoa/Fuligo septica/"                            \
	"0000000000000000000000000000beef.jpg"
#define HYBRID "Anas superciliosa \xc3\x97 platyrhynchos"

/* The fixture's numbers. */
enum { N_TRAIN = 53, N_VAL = 29, N_SPECIES = 17, N_SUPERS = 13 };

static const char *const supers_sorted[N_SUPERS] = {
	"Actinopterygii", "Amphibia", "Animalia", "Arachnida", "Aves",
	"Chromista",      "Fungi",    "Insecta",  "Mammalia",  "Mollusca",
	"Plantae",        "Protozoa", "Reptilia"};

static const char *const ten[10] = {"Amphibia", "Animalia", "Arachnida",
				    "Aves",     "Fungi",    "Insecta",
				    "Mammalia", "Mollusca", "Plantae",
				    "Reptilia"};

static char tmpdir[1024];

/* Writes the fixture (with --broken kind unless NULL) into tmpdir/name. */
static const char *make_fixture(const char *name, const char *kind)
{
	static char root[2048];
	const char *src = getenv("IMS_SRC");
	if (!src || !*src)
		src = ".";
	snprintf(root, sizeof(root), "%s/%s", tmpdir, name);
	char cmd[4096];
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 '%s/tests/fixtures/make_inat2017.py' '%s'%s%s",
		 src, root, kind ? " --broken " : "", kind ? kind : "");
	if (system(cmd) != 0) {
		fprintf(stderr, "fixture generator failed: %s\n", cmd);
		exit(1);
	}
	return root;
}

static const ds_entry *find_row(const ds_list *l, uint64_t index)
{
	for (size_t i = 0; i < l->count; i++)
		if (l->items[i].index == index)
			return &l->items[i];
	return NULL;
}

/* Path component k (0 = "train_val_images") of a row, into buf. */
static const char *component(const char *path, int k, char *buf, size_t n)
{
	for (; k > 0 && path; k--) {
		path = strchr(path, '/');
		if (path)
			path++;
	}
	if (!path)
		return "";
	size_t len = strcspn(path, "/");
	snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), path);
	return buf;
}

static int load(const char *root, const char *label, const char *keep,
		ds_dataset *d, ims_error *err)
{
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	o.label = label;
	o.keep_classes = keep;
	memset(d, 0, sizeof(*d));
	ims_error_clear(err);
	return ds_adapter_inat2017.load(root, &o, d, err);
}

/* Every row's folder (component 1 = supercategory, 2 = species) is the
 * class of its label: annotations were matched to the right images. */
static void check_rows_match_folders(const ds_dataset *d, int comp)
{
	for (int s = 0; s < d->n_splits; s++) {
		const ds_list *l = &d->splits[s].list;
		int bad = 0;
		for (size_t i = 0; i < l->count; i++) {
			char buf[256];
			const ds_entry *e = &l->items[i];
			if (e->label < 0 || (size_t)e->label >= l->n_classes ||
			    strcmp(component(e->path, comp, buf, sizeof(buf)),
				   l->classes[e->label]) != 0) {
				if (!bad++)
					fprintf(stderr, "row '%s' has label %d\n", e->path,
						(int)e->label);
			}
		}
		CHECK_EQ_INT(bad, 0);
	}
}

static void check_same_classes(const ds_dataset *d)
{
	const ds_list *a = &d->splits[0].list, *b = &d->splits[1].list;
	CHECK_EQ_INT(a->n_classes, b->n_classes);
	for (size_t i = 0; i < a->n_classes && i < b->n_classes; i++)
		CHECK_EQ_STR(a->classes[i], b->classes[i]);
}

static void test_species(const char *root)
{
	ds_dataset d;
	ims_error err;
	CHECK_OK(load(root, NULL, NULL, &d, &err), &err);
	CHECK_EQ_INT(d.n_splits, 2);
	if (d.n_splits != 2)
		return;
	CHECK_EQ_STR(d.splits[0].name, "train");
	CHECK_EQ_STR(d.splits[1].name, "val");
	const ds_list *tr = &d.splits[0].list, *va = &d.splits[1].list;
	CHECK_EQ_INT(tr->count, N_TRAIN);
	CHECK_EQ_INT(va->count, N_VAL);
	CHECK_EQ_INT(tr->n_classes, N_SPECIES);
	check_same_classes(&d);
	/* classes = names in category id order, UTF-8 kept (train2017.json
	 * spells the name with \u00d7, val2017.json in raw UTF-8) */
	CHECK_EQ_STR(tr->classes[0], "Quercus agrifolia");
	CHECK_EQ_STR(tr->classes[1], HYBRID);
	CHECK_EQ_STR(tr->classes[14], "Quercus \xc3\x97 alvordiana");
	CHECK_EQ_STR(tr->classes[16], "Cygnus olor");
	check_rows_match_folders(&d, 2);
	/* rows in JSON image order; index = image id */
	CHECK_EQ_U64(tr->items[0].index, 123456);
	CHECK_EQ_STR(tr->items[0].path, PIN_TRAIN_FILE);
	CHECK_EQ_INT(tr->items[0].label, 1);
	CHECK_EQ_U64(va->items[va->count - 1].index, 7);
	CHECK_EQ_STR(va->items[va->count - 1].path, PIN_VAL_FILE);
	CHECK_EQ_INT(va->items[va->count - 1].label, 6);
	CHECK(find_row(va, 123456) == NULL);
	CHECK(find_row(tr, 7) == NULL);
	/* the three images no JSON names: one note */
	CHECK_EQ_INT(d.n_notes, 1);
	if (d.n_notes == 1) {
		CHECK(strstr(d.notes[0], "ignored 3 images") != NULL);
		CHECK(strstr(d.notes[0], "train2017.json") != NULL);
	}
	/* deterministic */
	ds_dataset d2;
	CHECK_OK(load(root, "species", NULL, &d2, &err), &err);
	if (d2.n_splits == 2) {
		for (int s = 0; s < 2; s++) {
			const ds_list *a = &d.splits[s].list, *b = &d2.splits[s].list;
			CHECK_EQ_INT(a->count, b->count);
			for (size_t i = 0; i < a->count && i < b->count; i++) {
				CHECK_EQ_U64(a->items[i].index, b->items[i].index);
				CHECK_EQ_INT(a->items[i].label, b->items[i].label);
				CHECK_EQ_STR(a->items[i].path, b->items[i].path);
			}
		}
	}
	ds_dataset_release(&d2);
	ds_dataset_release(&d);
}

static void test_supercategory(const char *root)
{
	ds_dataset d;
	ims_error err;
	CHECK_OK(load(root, "supercategory", NULL, &d, &err), &err);
	CHECK_EQ_INT(d.n_splits, 2);
	if (d.n_splits != 2)
		return;
	const ds_list *tr = &d.splits[0].list, *va = &d.splits[1].list;
	CHECK_EQ_INT(tr->count, N_TRAIN);
	CHECK_EQ_INT(va->count, N_VAL);
	CHECK_EQ_INT(tr->n_classes, N_SUPERS);
	check_same_classes(&d);
	for (size_t i = 0; i < N_SUPERS && i < tr->n_classes; i++)
		CHECK_EQ_STR(tr->classes[i], supers_sorted[i]);
	check_rows_match_folders(&d, 1);
	const ds_entry *e = find_row(tr, 123456);
	CHECK(e && e->label == 4); /* Aves */
	e = find_row(va, 7);
	CHECK(e && e->label == 11); /* Protozoa */
	size_t counts[N_SUPERS];
	CHECK_EQ_INT(ds_list_num_classes(tr), N_SUPERS);
	ds_list_class_counts(tr, counts);
	CHECK_EQ_INT(counts[4], 14);  /* Aves: 5 + 7 + 2 */
	CHECK_EQ_INT(counts[10], 8);  /* Plantae: 6 + 2 */
	CHECK_EQ_INT(counts[11], 1);  /* Protozoa */
	ds_list_class_counts(va, counts);
	CHECK_EQ_INT(counts[4], 6);
	CHECK_EQ_INT(counts[7], 3);   /* Insecta */
	ds_dataset_release(&d);
}

static void test_keep(const char *root)
{
	ds_dataset d;
	ims_error err;
	/* the 10 taxonomic classes task, names given in no order */
	CHECK_OK(load(root, "supercategory",
		      "Reptilia,Amphibia,Animalia,Arachnida,Aves,Fungi,Insecta,"
		      "Mammalia,Mollusca,Plantae",
		      &d, &err),
		 &err);
	if (d.n_splits == 2) {
		const ds_list *tr = &d.splits[0].list, *va = &d.splits[1].list;
		CHECK_EQ_INT(tr->n_classes, 10);
		check_same_classes(&d);
		for (size_t i = 0; i < 10 && i < tr->n_classes; i++)
			CHECK_EQ_STR(tr->classes[i], ten[i]);
		/* minus Actinopterygii 2/1, Chromista 1/1, Protozoa 1/1 */
		CHECK_EQ_INT(tr->count, N_TRAIN - 4);
		CHECK_EQ_INT(va->count, N_VAL - 3);
		check_rows_match_folders(&d, 1);
		const ds_entry *e = find_row(tr, 123456);
		CHECK(e && e->label == 3); /* Aves */
		CHECK(find_row(va, 7) == NULL);
		size_t counts[10];
		ds_list_class_counts(tr, counts);
		CHECK_EQ_INT(counts[0], 3);  /* Amphibia */
		CHECK_EQ_INT(counts[3], 14); /* Aves */
		CHECK_EQ_INT(counts[9], 3);  /* Reptilia */
		int kept_note = 0;
		for (size_t i = 0; i < d.n_notes; i++)
			kept_note += strstr(d.notes[i], "kept 10 of 13") != NULL;
		CHECK_EQ_INT(kept_note, 1);
	}
	ds_dataset_release(&d);

	/* species mode keeps id order: the hybrid (id 1) before Cygnus (16) */
	CHECK_OK(load(root, "species", "Cygnus olor, " HYBRID, &d, &err), &err);
	if (d.n_splits == 2) {
		const ds_list *tr = &d.splits[0].list, *va = &d.splits[1].list;
		CHECK_EQ_INT(tr->n_classes, 2);
		check_same_classes(&d);
		if (tr->n_classes == 2) {
			CHECK_EQ_STR(tr->classes[0], HYBRID);
			CHECK_EQ_STR(tr->classes[1], "Cygnus olor");
		}
		CHECK_EQ_INT(tr->count, 5 + 2);
		CHECK_EQ_INT(va->count, 2 + 1);
		check_rows_match_folders(&d, 2);
		CHECK_EQ_INT(tr->items[0].label, 0);
		CHECK_EQ_STR(tr->items[0].path, PIN_TRAIN_FILE);
	}
	ds_dataset_release(&d);

	/* unknown names and modes */
	CHECK_EQ_INT(load(root, "supercategory", "Aves,Dinosauria", &d, &err),
		     IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "'Dinosauria'") != NULL);
	CHECK_EQ_INT(d.n_splits, 0);
	CHECK_EQ_INT(load(root, "species", "Aves", &d, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "'Aves'") != NULL);
	CHECK_EQ_INT(load(root, "supercategory", "Aves,,Fungi", &d, &err),
		     IMS_EINVAL);
	CHECK_EQ_INT(load(root, "genus", NULL, &d, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "'genus'") != NULL);
	ds_dataset_release(&d);
}

static void expect_broken(const char *kind, int code, const char *want1,
			  const char *want2)
{
	char name[64];
	snprintf(name, sizeof(name), "broken-%s", kind);
	const char *root = make_fixture(name, kind);
	ds_dataset d;
	ims_error err;
	int rc = load(root, NULL, NULL, &d, &err);
	CHECK_EQ_INT(rc, code);
	CHECK_EQ_INT(d.n_splits, 0);
	if (getenv("IMS_VERBOSE"))
		fprintf(stderr, "%s: %s\n", kind, err.msg);
	if (!strstr(err.msg, want1) || (want2 && !strstr(err.msg, want2))) {
		fprintf(stderr, "%s: message '%s' lacks '%s' or '%s'\n", kind,
			err.msg, want1, want2 ? want2 : "");
		CHECK(0);
	}
	ds_dataset_release(&d);
}

static void test_errors(void)
{
	expect_broken("unknown-image", IMS_ECORRUPT,
		      "annotation 424242 names image id 123456, which "
		      "val2017.json does not list",
		      "/val2017.json'");
	expect_broken("missing-file", IMS_ENOTFOUND, "'" PIN_TRAIN_FILE "'",
		      "train2017.json");
	expect_broken("truncated", IMS_ECORRUPT, "/train2017.json'", "JSON");
	expect_broken("both-splits", IMS_ECORRUPT, "'" PIN_TRAIN_FILE "'",
		      "val2017.json (id 654321)");
	expect_broken("both-splits", IMS_ECORRUPT, "disjoint", "id 123456");
	expect_broken("no-annotation", IMS_ECORRUPT,
		      "image id 7 ('" PIN_VAL_FILE "') has no annotation",
		      "/val2017.json'");
	expect_broken("unknown-category", IMS_ECORRUPT,
		      "annotation 31337 names category id 5000", "/train2017.json'");
	expect_broken("duplicate-id", IMS_ECORRUPT, "image id 123456 appears twice",
		      "/train2017.json'");
	expect_broken("missing-json", IMS_ENOTFOUND, "/val2017.json'", NULL);
	/* the field named is the one at fault (before: "a name") */
	expect_broken("slash-super", IMS_ECORRUPT,
		      "category 2 has a supercategory with a line break or '/' "
		      "('Plantae/Fungi')",
		      "/train2017.json'");
	expect_broken("missing-key", IMS_ECORRUPT, "'annotations'",
		      "/val2017.json'");

	ds_dataset d;
	ims_error err;
	char nowhere[1100];
	snprintf(nowhere, sizeof(nowhere), "%s/nowhere", tmpdir);
	CHECK_EQ_INT(load(nowhere, NULL, NULL, &d, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "train2017.json") != NULL);
	ds_dataset_release(&d);
}

int main(void)
{
	test_tmpdir(tmpdir, sizeof(tmpdir), "test_ds_inat2017");
	const char *root = make_fixture("ok", NULL);
	test_species(root);
	test_supercategory(root);
	test_keep(root);
	test_errors();
	return test_tmp_done(tmpdir, TEST_EXIT());
}
