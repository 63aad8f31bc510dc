/*
 * ds_folders_internal.h - small helpers shared by the class-folder adapters
 * (ds_folder.c, ds_caltech256.c, ds_fruits.c). Not a public header.
 *
 * Listing itself is ds_scan_folder's job; these helpers only move a scanned
 * list under a prefix (when the scanned folder lies below the root the user
 * gave) and name, for the notes, what a non-recursive scan left out: files
 * that are not images and nested folders. ds_scan_report only counts them,
 * and an empty nested folder (Caltech-256's 056.dog/greg/vision309/) is not
 * counted at all.
 */
#ifndef IMSHARD_DS_FOLDERS_INTERNAL_H
#define IMSHARD_DS_FOLDERS_INTERNAL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets.h"

/* Notes naming single ignored entries stop after this many; one more note
 * gives the count of the rest. */
#define DSF_MAX_NAMED 20

/* ds_dataset_note that fills err when it fails: 0 or IMS_ENOMEM. */
#define DSF_NOTE(d, err, ...)                                                  \
	(ds_dataset_note((d), __VA_ARGS__) < 0                                 \
		 ? ims_fail((err), IMS_ENOMEM, "cannot add a note: out of memory") \
		 : 0)

/* "a/b" into a fresh malloc'd string (either part may be empty). */
static inline char *dsf_join(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	char *s = malloc(na + nb + 2);
	if (!s)
		return NULL;
	memcpy(s, a, na);
	size_t k = na;
	if (na && nb)
		s[k++] = '/';
	memcpy(s + k, b, nb + 1);
	return s;
}

/*
 * Copies in's class names and rows into the empty list out, each path
 * becoming prefix/path (unchanged when prefix is empty) and each index
 * index_base + index.
 */
static inline int dsf_copy_prefixed(const ds_list *in, const char *prefix,
				    uint64_t index_base, ds_list *out,
				    ims_error *err)
{
	FORWARD_IF_ERR(ds_list_copy_classes(out, in, err));
	FORWARD_IF_ERR(ds_list_reserve(out, in->count, err));
	for (size_t i = 0; i < in->count; i++) {
		const ds_entry *e = &in->items[i];
		char *p = dsf_join(prefix, e->path);
		RETURN_IF(!p, err, IMS_ENOMEM, "cannot list '%s': out of memory",
			  prefix);
		int rc = ds_list_append(out, index_base + e->index, e->label,
					e->extra, e->n_extra, p, err);
		free(p);
		FORWARD_IF_ERR(rc);
	}
	return 0;
}

/* ds_check_split_ratios, its message prefixed with "cannot split WHAT: ". */
static inline int dsf_check_ratios(const char *what, double val, double test,
				   ims_error *err)
{
	ims_error e;
	ims_error_clear(&e);
	int rc = ds_check_split_ratios(val, test, &e);
	return rc < 0 ? ims_fail(err, rc, "cannot split %s: %s", what, e.msg) : 0;
}

static inline int dsf_cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Counts of what dsf_note_ignored found. */
typedef struct dsf_ignored {
	size_t named;       /* notes written so far (shared between calls) */
	size_t unnamed;     /* entries past DSF_MAX_NAMED */
	size_t files;       /* non-image files in class folders */
	size_t folders;     /* nested folders in class folders */
	size_t loose;       /* files directly in the scanned folder */
} dsf_ignored;

static inline int dsf_note_one(ds_dataset *d, dsf_ignored *ig,
			       const char *what, const char *shown,
			       const char *cls, const char *name,
			       const char *tail, ims_error *err)
{
	if (ig->named >= DSF_MAX_NAMED) {
		ig->unnamed++;
		return 0;
	}
	ig->named++;
	int rc = ds_dataset_note(d, "ignored %s '%s%s%s%s%s'%s", what, shown,
				 *shown ? "/" : "", cls ? cls : "", cls ? "/" : "",
				 name, tail);
	RETURN_IF(rc < 0, err, IMS_ENOMEM, "cannot add a note: out of memory");
	return 0;
}

/*
 * Names, as notes of d, what the non-recursive scan of dir into l left
 * out: entries of dir that are no folder, and in each class folder the
 * nested folders and the entries that are no row of l (files whose
 * extension did not match, broken links, FIFOs and the like). shown is dir's path relative to the root the
 * user gave ("" for the root itself), for the notes. Only visible names
 * (not starting with '.'), as ds_scan_folder, in sorted order. l must be
 * a non-recursive scan of dir: paths "class/file", classes = folder
 * names, each class's rows contiguous (ds_scan_folder's order).
 */
static inline int dsf_note_ignored(ds_dataset *d, const char *dir,
				   const char *shown, const ds_list *l,
				   dsf_ignored *ig, ims_error *err)
{
	int rc = 0;
	char *path = NULL;
	ims_dir_listing ls = {0};
	const char **names = malloc((l->count ? l->count : 1) * sizeof(*names));
	RETURN_IF(!names, err, IMS_ENOMEM, "cannot list '%s': out of memory", dir);
	GOTO_IF_ERR(out, rc, ims_dir_list(dir, 0, &ls, err));
	for (size_t i = 0; i < ls.n; i++) {
		if (ls.e[i].kind != IMS_KIND_FOLDER) {
			ig->loose++;
			GOTO_IF_ERR(out, rc, dsf_note_one(d, ig, "file", shown, NULL,
							  ls.e[i].name,
							  " (not in a class folder)", err));
		}
	}
	size_t row = 0;
	for (size_t c = 0; c < l->n_classes; c++) {
		const char *cls = l->classes[c];
		size_t clen = strlen(cls), k = 0;
		for (; row < l->count && (size_t)l->items[row].label == c; row++)
			if (strncmp(l->items[row].path, cls, clen) == 0 &&
			    l->items[row].path[clen] == '/')
				names[k++] = l->items[row].path + clen + 1;
		qsort(names, k, sizeof(*names), dsf_cmp_str);
		free(path);
		path = dsf_join(dir, cls);
		if (!path)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot list '%s': out of memory", dir);
		GOTO_IF_ERR(out, rc, ims_dir_list(path, 0, &ls, err));
		for (size_t i = 0; i < ls.n && rc == 0; i++) {
			const char *key = ls.e[i].name;
			if (ls.e[i].kind == IMS_KIND_FOLDER) {
				ig->folders++;
				rc = dsf_note_one(d, ig, "nested folder", shown, cls, key,
						  " (images must lie directly in the "
						  "class folder)", err);
			} else if (!bsearch(&key, names, k, sizeof(*names), dsf_cmp_str)) {
				/* a FIFO named like an image is no "non-image
				 * file": the user looks for the wrong thing */
				const int kind = ls.e[i].kind;
				ig->files++;
				rc = dsf_note_one(d, ig,
						  kind == IMS_KIND_BROKEN  ? "broken link"
						  : kind == IMS_KIND_OTHER ? "entry that is no regular file"
									   : "non-image file",
						  shown, cls, key,
						  kind == IMS_KIND_BROKEN
							  ? " (its target is missing, or the links loop)"
						  : kind == IMS_KIND_OTHER ? " (a FIFO, socket or device)"
									   : "",
						  err);
			}
		}
		if (rc < 0)
			goto out;
	}
out:
	ims_dir_listing_release(&ls);
	free(path);
	free(names);
	return rc;
}

/* The closing note for entries past DSF_MAX_NAMED. */
static inline int dsf_note_unnamed(ds_dataset *d, const dsf_ignored *ig,
				   ims_error *err)
{
	if (!ig->unnamed)
		return 0;
	RETURN_IF(ds_dataset_note(d, "ignored %zu more non-image files or nested "
				  "folders (not named)", ig->unnamed) < 0,
		  err, IMS_ENOMEM, "cannot add a note: out of memory");
	return 0;
}

#endif
