/*
 * ds_caltech256.c - the "caltech256" adapter: Caltech-256 as extracted from
 * 256_ObjectCategories.tar,
 *
 *     ROOT/256_ObjectCategories/NNN.name/NNN_MMMM.jpg
 *
 * (ROOT may also be the 256_ObjectCategories folder itself). 257 class
 * folders 001.ak47 ... 256.toad and 257.clutter; the label is the sorted
 * folder index, so the NNN. prefix orders them and clutter is 256. There
 * is no official split: a stratified validation split is drawn with the
 * seed (val_ratio, default 0.2).
 *
 * Listing is ds_scan_folder (non-recursive), so the real oddities fall out
 * of it: 198.spider/RENAME2 is no image and the empty nested folder
 * 056.dog/greg/vision309/ holds none; both are named in notes. Greyscale
 * JPEGs are the packer's business. Every class folder must be named
 * NNN.name, and everything named NNN.name must be a folder, or the labels
 * would shift: anything else is an error.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets.h"
#include "ds_folders_internal.h"

#define CATEGORIES "256_ObjectCategories"
#define CLUTTER "257.clutter"
#define FULL_CLASSES 257
#define DEFAULT_VAL_RATIO 0.2

/* "NNN.x...": three digits, a dot, something. */
static int is_class_name(const char *s)
{
	return s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9' &&
	       s[2] >= '0' && s[2] <= '9' && s[3] == '.' && s[4] != '\0';
}

/* 1 when dir holds at least one visible NNN.name folder. */
static int holds_class_folder(const char *dir)
{
	ims_dir_listing ls = {0};
	int found = 0;
	if (ims_dir_list(dir, 0, &ls, NULL) == 0)
		for (size_t i = 0; i < ls.n && !found; i++)
			found = is_class_name(ls.e[i].name) &&
				ls.e[i].kind == IMS_KIND_FOLDER;
	ims_dir_listing_release(&ls);
	return found;
}

/*
 * Refuses an entry of cats named like a class (NNN.name) that is no folder
 * (a file, a broken link): the scan would skip it and every label after it
 * would move down by one, which nothing in training would notice.
 */
static int refuse_class_files(const char *cats, const char *prefix,
			      ims_error *err)
{
	ims_dir_listing ls = {0};
	int rc = ims_dir_list(cats, 0, &ls, err);
	for (size_t i = 0; rc == 0 && i < ls.n; i++)
		if (is_class_name(ls.e[i].name) && ls.e[i].kind != IMS_KIND_FOLDER)
			rc = ims_fail(err, IMS_EFORMAT,
				      "cannot read Caltech-256: '%s%s%s' is %s, not a class "
				      "folder (remove it: skipping it would shift every "
				      "label after it)",
				      prefix, *prefix ? "/" : "", ls.e[i].name,
				      ls.e[i].kind == IMS_KIND_FILE ? "a file" :
				      ls.e[i].kind == IMS_KIND_BROKEN ? "a broken link" :
				      "no folder");
	ims_dir_listing_release(&ls);
	return rc;
}

/*
 * The folder holding the class folders: ROOT/256_ObjectCategories, or ROOT
 * itself when it holds NNN.name folders. *prefix is "256_ObjectCategories"
 * or "" (row paths are relative to ROOT); *cats is malloc'd.
 */
static int find_categories(const char *root, char **cats, const char **prefix,
			   ims_error *err)
{
	*cats = NULL;
	RETURN_IF(ims_path_kind(root) != IMS_KIND_FOLDER, err, IMS_ENOTFOUND,
		  "cannot read Caltech-256 under '%s': no such folder", root);
	char *sub = dsf_join(root, CATEGORIES);
	RETURN_IF(!sub, err, IMS_ENOMEM, "cannot read '%s': out of memory", root);
	if (ims_path_kind(sub) == IMS_KIND_FOLDER) {
		*cats = sub;
		*prefix = CATEGORIES;
		return 0;
	}
	free(sub);
	RETURN_IF(!holds_class_folder(root), err, IMS_ENOTFOUND,
		  "cannot read Caltech-256 under '%s': no folder '" CATEGORIES
		  "' and no class folder like '001.ak47' in it (expected "
		  "ROOT/" CATEGORIES "/NNN.name/NNN_MMMM.jpg)",
		  root);
	*cats = strdup(root);
	RETURN_IF(!*cats, err, IMS_ENOMEM, "cannot read '%s': out of memory", root);
	*prefix = "";
	return 0;
}

/* Copies all into kept, without the rows and the class of 257.clutter
 * (labels after it, if any, move down by one). */
static int drop_clutter(const ds_list *all, ds_list *kept, int *dropped,
			ims_error *err)
{
	int32_t clutter = -1;
	*dropped = 0;
	for (size_t c = 0; c < all->n_classes; c++)
		if (strcmp(all->classes[c], CLUTTER) == 0)
			clutter = (int32_t)c;
	for (size_t c = 0; c < all->n_classes; c++)
		if ((int32_t)c != clutter)
			FORWARD_IF_ERR(ds_list_add_class(kept, all->classes[c], NULL, err));
	FORWARD_IF_ERR(ds_list_reserve(kept, all->count, err));
	for (size_t i = 0; i < all->count; i++) {
		const ds_entry *e = &all->items[i];
		if (clutter >= 0 && e->label == clutter) {
			(*dropped)++;
			continue;
		}
		int32_t label = clutter >= 0 && e->label > clutter ? e->label - 1 : e->label;
		FORWARD_IF_ERR(ds_list_append(kept, e->index, label, NULL, 0, e->path, err));
	}
	return 0;
}

static int load_caltech256(const char *root, const ds_convert_opts *o,
			   ds_dataset *out, ims_error *err)
{
	double val = o->val_ratio < 0 ? DEFAULT_VAL_RATIO : o->val_ratio;
	FORWARD_IF_ERR(dsf_check_ratios("Caltech-256", val, 0, err));
	char *cats = NULL;
	const char *prefix = "";
	ds_list scanned, all, kept;
	ds_list_init(&scanned);
	ds_list_init(&all);
	ds_list_init(&kept);
	ds_scan_report rep;
	int rc;
	GOTO_IF_ERR(out, rc, find_categories(root, &cats, &prefix, err));
	GOTO_IF_ERR(out, rc, refuse_class_files(cats, prefix, err));
	ds_scan_opts so = {NULL, 0};
	GOTO_IF_ERR(out, rc, ds_scan_folder(cats, &so, &scanned, &rep, err));
	for (size_t c = 0; c < scanned.n_classes; c++)
		if (!is_class_name(scanned.classes[c]))
			GOTO_FAIL(out, rc, err, IMS_EFORMAT,
				  "cannot read Caltech-256: unexpected folder '%s%s%s' "
				  "(class folders are named NNN.name, like '001.ak47'; "
				  "move it away, it would shift the labels)",
				  prefix, *prefix ? "/" : "", scanned.classes[c]);

	/* What the scan skipped, named: RENAME2, 056.dog/greg, ... */
	dsf_ignored ig;
	memset(&ig, 0, sizeof(ig));
	GOTO_IF_ERR(out, rc, dsf_note_ignored(out, cats, prefix, &scanned, &ig, err));
	GOTO_IF_ERR(out, rc, dsf_note_unnamed(out, &ig, err));
	if (rep.ignored_nested)
		GOTO_IF_ERR(out, rc, DSF_NOTE(out, err, "ignored %zu image%s inside "
						     "nested folders", rep.ignored_nested,
						     rep.ignored_nested == 1 ? "" : "s"));
	if (rep.empty_classes)
		GOTO_IF_ERR(out, rc, DSF_NOTE(out, err, "%zu class folder%s hold%s no "
						     "image (kept as classes, so labels "
						     "do not shift)", rep.empty_classes,
						     rep.empty_classes == 1 ? "" : "s",
						     rep.empty_classes == 1 ? "s" : ""));

	GOTO_IF_ERR(out, rc, dsf_copy_prefixed(&scanned, prefix, 0, &all, err));
	ds_list_release(&scanned);
	int has_clutter = 0;
	for (size_t c = 0; c < all.n_classes; c++)
		has_clutter |= strcmp(all.classes[c], CLUTTER) == 0;
	const ds_list *src = &all;
	if (o->no_clutter) {
		int dropped;
		GOTO_IF_ERR(out, rc, drop_clutter(&all, &kept, &dropped, err));
		if (kept.count == 0)
			GOTO_FAIL(out, rc, err, IMS_ENOTFOUND,
				  "cannot read Caltech-256 under '%s': no image outside " CLUTTER,
				  root);
		src = &kept;
	}
	size_t want = FULL_CLASSES - (o->no_clutter ? 1 : 0);
	if (src->n_classes != want)
		GOTO_IF_ERR(out, rc, DSF_NOTE(out, err, "found %zu class folders, "
						     "expected %zu%s: a partial download? "
						     "(labels are the sorted index of the "
						     "folders present)",
						     src->n_classes, want,
						     o->no_clutter ? " without " CLUTTER : ""));
	else if (!o->no_clutter && !has_clutter)
		GOTO_IF_ERR(out, rc, DSF_NOTE(out, err, "no " CLUTTER " folder: "
						     "labels are the sorted index of the "
						     "folders present"));

	ds_split_list *tr = ds_dataset_add_split(out, "train");
	ds_split_list *va = val > 0 ? ds_dataset_add_split(out, "val") : NULL;
	if (!tr || (val > 0 && !va))
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot list '%s': out of memory", root);
	GOTO_IF_ERR(out, rc, ds_split(src, val, 0, o->seed, &tr->list,
				      va ? &va->list : NULL, NULL, err));
out:
	free(cats);
	ds_list_release(&scanned);
	ds_list_release(&all);
	ds_list_release(&kept);
	if (rc < 0)
		ds_dataset_release(out);
	return rc;
}

const ds_adapter ds_adapter_caltech256 = {
	"caltech256",
	"Caltech-256: 256_ObjectCategories/NNN.name/*.jpg, 257 classes "
	"(--no-clutter: 256), stratified --val-ratio split (default 0.2)",
	load_caltech256, NULL};
