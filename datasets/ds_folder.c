/*
 * ds_folder.c - the "folder" adapter: any tree of class subfolders
 * (torchvision ImageFolder / im2rec layout), ROOT/<class>/<image>.
 *
 * Listing is ds_scan_folder (with --recursive, im2rec's rule); the splits
 * are one stratified ds_split of the whole list with the seed: train, plus
 * val when val_ratio > 0 and test when test_ratio > 0. Labels are the
 * scan's (byte-wise sorted folder names). Everything the scan skipped is
 * reported as notes: counts always, and in non-recursive mode the names of
 * the first few skipped entries.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets.h"
#include "ds_folders_internal.h"

static const char *plural(size_t n)
{
	return n == 1 ? "" : "s";
}

static int note_report(ds_dataset *d, const ds_scan_report *r,
		       const char *exts, ims_error *err)
{
	int rc = 0;
	if (r->ignored_files && rc == 0)
		rc = ds_dataset_note(d, "ignored %zu file%s not matching %s", r->ignored_files,
				     plural(r->ignored_files), exts);
	if (r->broken_links && rc == 0)
		rc = ds_dataset_note(d, "ignored %zu broken link%s (target missing, or "
				     "the links loop)",
				     r->broken_links, plural(r->broken_links));
	if (r->link_loops && rc == 0)
		rc = ds_dataset_note(d, "ignored %zu link%s that lead%s back to a folder "
				     "already being listed ('%s'%s; not walked twice)",
				     r->link_loops, plural(r->link_loops),
				     r->link_loops == 1 ? "s" : "",
				     r->loop_first, r->link_loops == 1 ? "" : " first");
	if (r->special_files && rc == 0)
		rc = ds_dataset_note(d, "ignored %zu entr%s named like an image that "
				     "%s no regular file ('%s'%s: a FIFO, socket or device)",
				     r->special_files, r->special_files == 1 ? "y" : "ies",
				     r->special_files == 1 ? "is" : "are", r->special_first,
				     r->special_files == 1 ? "" : " first");
	if (r->ignored_nested && rc == 0)
		rc = ds_dataset_note(d, "ignored %zu image%s in nested folders (use "
				     "--recursive to make every folder a class)",
				     r->ignored_nested, plural(r->ignored_nested));
	if (r->unlistable && rc == 0)
		rc = ds_dataset_note(d, "ignored %zu image%s whose name%s a TAB or "
				     "a line break, which a list row cannot hold",
				     r->unlistable, plural(r->unlistable),
				     r->unlistable == 1 ? " holds" : "s hold");
	if (r->empty_classes && rc == 0)
		rc = ds_dataset_note(d, "%zu class folder%s hold%s no image (labels "
				     "still count %s)",
				     r->empty_classes, plural(r->empty_classes),
				     r->empty_classes == 1 ? "s" : "",
				     r->empty_classes == 1 ? "it" : "them");
	if (r->loose_files && rc == 0)
		rc = ds_dataset_note(d, "ignored %zu image%s directly in ROOT (not in a "
				     "class folder)",
				     r->loose_files, plural(r->loose_files));
	RETURN_IF(rc < 0, err, IMS_ENOMEM, "cannot add a note: out of memory");
	return 0;
}

static int load_folder(const char *root, const ds_convert_opts *o,
		       ds_dataset *out, ims_error *err)
{
	double val = o->val_ratio < 0 ? 0 : o->val_ratio;
	/* only val_ratio has a "not given" (< 0): a negative test share is
	 * refused, not taken for 0 */
	char what[4200];
	snprintf(what, sizeof(what), "'%s'", root);
	FORWARD_IF_ERR(dsf_check_ratios(what, val, o->test_ratio, err));
	double test = o->test_ratio;
	const char *exts = o->exts ? o->exts : ".jpg,.jpeg,.png";
	ds_scan_opts so = {exts, o->recursive};
	ds_scan_report rep;
	ds_list all;
	ds_list_init(&all);
	int rc = ds_scan_folder(root, &so, &all, &rep, err);
	if (rc < 0)
		goto out;

	ds_split_list *tr = ds_dataset_add_split(out, "train");
	ds_split_list *va = val > 0 ? ds_dataset_add_split(out, "val") : NULL;
	ds_split_list *te = test > 0 ? ds_dataset_add_split(out, "test") : NULL;
	if (!tr || (val > 0 && !va) || (test > 0 && !te))
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot list '%s': out of memory", root);
	GOTO_IF_ERR(out, rc, ds_split(&all, val, test, o->seed, &tr->list,
				      va ? &va->list : NULL, te ? &te->list : NULL, err));

	GOTO_IF_ERR(out, rc, note_report(out, &rep, exts, err));
	if (!o->recursive && (rep.ignored_files || rep.broken_links || rep.ignored_nested ||
				rep.loose_files)) {
		dsf_ignored ig;
		memset(&ig, 0, sizeof(ig));
		GOTO_IF_ERR(out, rc, dsf_note_ignored(out, root, "", &all, &ig, err));
		GOTO_IF_ERR(out, rc, dsf_note_unnamed(out, &ig, err));
	}
out:
	ds_list_release(&all);
	if (rc < 0)
		ds_dataset_release(out);
	return rc;
}

const ds_adapter ds_adapter_folder = {
	"folder", "any tree of class subfolders (ImageFolder / im2rec layout)",
	load_folder, NULL};
