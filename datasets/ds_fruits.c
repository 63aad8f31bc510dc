/*
 * ds_fruits.c - the "fruits" adapter: Fresh and rotten fruits (Kaggle),
 *
 *     ROOT/dataset/train/<class>/<image>.png
 *     ROOT/dataset/test/<class>/<image>.png
 *
 * Six classes: freshapples, freshbanana, freshoranges, rottenapples,
 * rottenbanana, rottenoranges; labels are the sorted folder names. The
 * archive often nests the root once more (dataset/dataset/train) and some
 * copies say Train/Test, so the dataset folder is searched for: the one
 * folder at most SEARCH_DEPTH levels below ROOT that holds a train and a
 * test folder, matched case-insensitively (__MACOSX shadow trees are
 * skipped). Two such folders are an error naming both (the user picks one
 * by passing it as ROOT).
 *
 * Splits: the dataset's own train and test; with val_ratio > 0 also val,
 * drawn stratified out of train with the seed. Each of train/ and test/ is
 * listed by ds_scan_folder; both must hold the same class folders. File
 * names with spaces, dots and augmentation prefixes are ordinary files.
 * Row index: train rows 0..n-1 in sorted order, test rows n.. after them.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "datasets.h"
#include "ds_folders_internal.h"

#define SEARCH_DEPTH 4

static const char *const expected_classes[] = {
	"freshapples",  "freshbanana",  "freshoranges",
	"rottenapples", "rottenbanana", "rottenoranges"};
#define N_EXPECTED 6

/* One folder holding train/ and test/; paths relative to ROOT. */
typedef struct candidate {
	char *dir;   /* "" for ROOT itself, else "dataset/dataset" */
	char *train; /* "dataset/dataset/Train" */
	char *test;
} candidate;

typedef struct search {
	const char *root;
	candidate found[2]; /* the first two found */
	int n;
	ims_error *err;
} search;

static void candidate_release(candidate *c)
{
	free(c->dir);
	free(c->train);
	free(c->test);
	memset(c, 0, sizeof(*c));
}

/*
 * Visits folder rel (relative to root; "" is root) at depth: records it
 * when it holds train and test folders (not descending into those), else
 * descends into its subfolders in sorted order while depth < SEARCH_DEPTH.
 */
static int visit(search *s, const char *rel, int depth)
{
	char *abs = *rel ? dsf_join(s->root, rel) : strdup(s->root);
	RETURN_IF(!abs, s->err, IMS_ENOMEM, "cannot search '%s': out of memory", s->root);
	ims_dir_listing ls = {0};
	int rc = ims_dir_list(abs, 0, &ls, s->err);
	if (rc < 0) {
		free(abs);
		return depth == 0 ? rc : 0; /* an unreadable subfolder is no candidate */
	}
	const char *train = NULL, *test = NULL;
	const char **subs = calloc(ls.n ? ls.n : 1, sizeof(*subs));
	size_t n_subs = 0;
	if (!subs)
		GOTO_FAIL(out, rc, s->err, IMS_ENOMEM, "cannot search '%s': out of memory",
			  s->root);
	for (size_t i = 0; i < ls.n; i++) {
		const char *name = ls.e[i].name;
		/* macOS zips carry a shadow tree of resource forks. */
		if (ls.e[i].kind != IMS_KIND_FOLDER || strcmp(name, "__MACOSX") == 0)
			continue;
		if (!train && strcasecmp(name, "train") == 0)
			train = name;
		else if (!test && strcasecmp(name, "test") == 0)
			test = name;
		subs[n_subs++] = name;
	}
	if (train && test) {
		if (s->n < 2) {
			candidate *c = &s->found[s->n];
			c->dir = strdup(rel);
			c->train = dsf_join(rel, train);
			c->test = dsf_join(rel, test);
			if (!c->dir || !c->train || !c->test)
				GOTO_FAIL(out, rc, s->err, IMS_ENOMEM,
					  "cannot search '%s': out of memory", s->root);
		}
		s->n++;
		/* Other subfolders may still hold another copy. */
	}
	for (size_t i = 0; i < n_subs && depth < SEARCH_DEPTH && rc == 0; i++) {
		if (subs[i] == train || subs[i] == test)
			continue;
		char *child = dsf_join(rel, subs[i]);
		if (!child)
			GOTO_FAIL(out, rc, s->err, IMS_ENOMEM,
				  "cannot search '%s': out of memory", s->root);
		rc = visit(s, child, depth + 1);
		free(child);
	}
out:
	free(subs);
	ims_dir_listing_release(&ls);
	free(abs);
	return rc;
}

static const char *shown(const char *rel)
{
	return *rel ? rel : ".";
}

/* Fails naming the class folders only one of the two splits holds (the
 * first few of them). */
static int compare_classes(const ds_list *a, const char *a_dir, const ds_list *b,
			   const char *b_dir, ims_error *err)
{
	char diff[320] = "";
	size_t len = 0, n = 0, i = 0, j = 0;
	while (i < a->n_classes || j < b->n_classes) {
		int c = i == a->n_classes   ? 1
			: j == b->n_classes ? -1
					    : strcmp(a->classes[i], b->classes[j]);
		if (c == 0) {
			i++;
			j++;
			continue;
		}
		const char *name = c < 0 ? a->classes[i++] : b->classes[j++];
		if (n++ < 4 && len < sizeof(diff)) {
			int w = snprintf(diff + len, sizeof(diff) - len, "%s'%s/%s'",
					 len ? ", " : "", c < 0 ? a_dir : b_dir, name);
			len = w < 0 ? sizeof(diff) : len + (size_t)w;
		}
	}
	RETURN_IF(n > 0, err, IMS_EFORMAT,
		  "cannot read the fruits dataset: '%s' and '%s' must hold the same "
		  "class folders, but %zu differ%s: %s%s",
		  a_dir, b_dir, n, n == 1 ? "s" : "", diff, n > 4 ? ", ..." : "");
	return 0;
}

/* Lists ROOT/rel into out (paths relative to ROOT) and notes what the scan
 * skipped. */
static int scan_split(const char *root, const char *rel, uint64_t index_base,
		      ds_list *out, ds_dataset *d, dsf_ignored *ig, ims_error *err)
{
	ds_list l;
	ds_list_init(&l);
	ds_scan_report rep;
	char *abs = dsf_join(root, rel);
	RETURN_IF(!abs, err, IMS_ENOMEM, "cannot list '%s': out of memory", root);
	int rc;
	GOTO_IF_ERR(out, rc, ds_scan_folder(abs, NULL, &l, &rep, err));
	GOTO_IF_ERR(out, rc, dsf_note_ignored(d, abs, rel, &l, ig, err));
	if (rep.ignored_nested)
		GOTO_IF_ERR(out, rc, DSF_NOTE(d, err, "ignored %zu image%s in nested "
					      "folders of '%s'", rep.ignored_nested,
					      rep.ignored_nested == 1 ? "" : "s", rel));
	if (rep.empty_classes)
		GOTO_IF_ERR(out, rc, DSF_NOTE(d, err, "%zu class folder%s of '%s' hold%s "
					      "no image", rep.empty_classes,
					      rep.empty_classes == 1 ? "" : "s", rel,
					      rep.empty_classes == 1 ? "s" : ""));
	GOTO_IF_ERR(out, rc, dsf_copy_prefixed(&l, rel, index_base, out, err));
out:
	ds_list_release(&l);
	free(abs);
	return rc;
}

static int load_fruits(const char *root, const ds_convert_opts *o,
		       ds_dataset *out, ims_error *err)
{
	double val = o->val_ratio < 0 ? 0 : o->val_ratio;
	FORWARD_IF_ERR(dsf_check_ratios("the fruits dataset", val, 0, err));
	RETURN_IF(ims_path_kind(root) != IMS_KIND_FOLDER, err, IMS_ENOTFOUND,
		  "cannot read the fruits dataset under '%s': no such folder", root);
	search s;
	memset(&s, 0, sizeof(s));
	s.root = root;
	s.err = err;
	ds_list train_all, test_all;
	ds_list_init(&train_all);
	ds_list_init(&test_all);
	int rc;
	GOTO_IF_ERR(out, rc, visit(&s, "", 0));
	if (s.n == 0)
		GOTO_FAIL(out, rc, err, IMS_ENOTFOUND,
			  "cannot read the fruits dataset under '%s': no folder up to %d "
			  "levels below it holds both a 'train' and a 'test' folder "
			  "(expected ROOT/dataset/train/<class>/*.png)",
			  root, SEARCH_DEPTH);
	if (s.n > 1)
		GOTO_FAIL(out, rc, err, IMS_EFORMAT,
			  "cannot read the fruits dataset under '%s': %d folders hold "
			  "train and test, '%s' and '%s'%s; pass the one to use as ROOT",
			  root, s.n, shown(s.found[0].dir), shown(s.found[1].dir),
			  s.n > 2 ? " and more" : "");
	const candidate *c = &s.found[0];
	if (*c->dir)
		GOTO_IF_ERR(out, rc, DSF_NOTE(out, err, "dataset found in '%s'", c->dir));

	dsf_ignored ig;
	memset(&ig, 0, sizeof(ig));
	GOTO_IF_ERR(out, rc, scan_split(root, c->train, 0, &train_all, out, &ig, err));
	GOTO_IF_ERR(out, rc, scan_split(root, c->test, train_all.count, &test_all, out,
					&ig, err));
	GOTO_IF_ERR(out, rc, dsf_note_unnamed(out, &ig, err));
	GOTO_IF_ERR(out, rc, compare_classes(&train_all, c->train, &test_all, c->test, err));
	/* Another class set is still listed (sorted names), but said. */
	for (size_t k = 0; k < N_EXPECTED; k++) {
		int have = 0;
		for (size_t i = 0; i < train_all.n_classes && !have; i++)
			have = strcmp(train_all.classes[i], expected_classes[k]) == 0;
		if (!have)
			GOTO_IF_ERR(out, rc, DSF_NOTE(out, err, "no class folder '%s' in "
						      "'%s' (one of the usual six)",
						      expected_classes[k], c->train));
	}
	for (size_t i = 0; i < train_all.n_classes; i++) {
		int usual = 0;
		for (size_t k = 0; k < N_EXPECTED && !usual; k++)
			usual = strcmp(train_all.classes[i], expected_classes[k]) == 0;
		if (!usual)
			GOTO_IF_ERR(out, rc, DSF_NOTE(out, err, "unexpected class folder "
						      "'%s/%s' (listed as a class)",
						      c->train, train_all.classes[i]));
	}

	ds_split_list *tr = ds_dataset_add_split(out, "train");
	ds_split_list *va = val > 0 ? ds_dataset_add_split(out, "val") : NULL;
	ds_split_list *te = ds_dataset_add_split(out, "test");
	if (!tr || (val > 0 && !va) || !te)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot list '%s': out of memory", root);
	GOTO_IF_ERR(out, rc, ds_split(&train_all, val, 0, o->seed, &tr->list,
				      va ? &va->list : NULL, NULL, err));
	te->list = test_all;
	ds_list_init(&test_all);
out:
	candidate_release(&s.found[0]);
	candidate_release(&s.found[1]);
	ds_list_release(&train_all);
	ds_list_release(&test_all);
	if (rc < 0)
		ds_dataset_release(out);
	return rc;
}

const ds_adapter ds_adapter_fruits = {
	"fruits",
	"Fresh and rotten fruits: dataset/train and dataset/test (found however "
	"nested, any case), 6 classes",
	load_fruits, NULL};
