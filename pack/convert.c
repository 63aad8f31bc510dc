/*
 * convert.c - a downloaded dataset into packed splits: adapter -> subsets
 * -> lists and class names -> pack_run for each split.
 *
 * The adapter (datasets/ds_<name>.c) reads the layout into one list per
 * split; everything after that is the same for every dataset, so it lives
 * here rather than in each tool that converts.
 */
#define _GNU_SOURCE
#include "pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pack_internal.h"
#include "recordio/recordio.h"

void pack_convert_opts_init(pack_convert_opts *o)
{
	memset(o, 0, sizeof(*o));
	ds_convert_opts_init(&o->dataset);
	pack_opts_init(&o->pack);
}

void pack_convert_report_release(pack_convert_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_refused; i++)
		free((char *)r->refused[i].name);
	free(r->refused);
	r->refused = NULL;
	r->n_refused = 0;
}

static int subset_index(const char *split)
{
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++)
		if (strcmp(split, pack_managed_splits[i]) == 0)
			return i;
	return -1;
}

static int cancelled(const pack_convert_opts *o)
{
	return o->pack.cancel && *o->pack.cancel;
}

/* The short classes of a subset report, named from the list's classes.
 * names are borrowed when own is 0, copied otherwise. */
static pack_short_class *short_classes(const ds_list *l,
				       const ds_subset_report *r, int own,
				       size_t *n)
{
	*n = 0;
	pack_short_class *c = calloc(r->short_classes ? r->short_classes : 1,
				     sizeof(*c));
	if (!c)
		return NULL;
	for (size_t k = 0; k < r->n_classes && *n < r->short_classes; k++) {
		if (!r->available || r->available[k] >= r->wanted[k])
			continue;
		const char *name = k < l->n_classes ? l->classes[k] : "?";
		c[*n].name = own ? strdup(name) : name;
		c[*n].label = k;
		c[*n].available = r->available[k];
		c[*n].wanted = r->wanted[k];
		if (!c[*n].name) {
			for (size_t i = 0; i < *n; i++)
				free((char *)c[i].name);
			free(c);
			*n = 0;
			return NULL;
		}
		(*n)++;
	}
	return c;
}

/* Takes split sp's subset, when one was asked for, in place. */
static int take_subset(const pack_convert_opts *o, ds_split_list *sp,
		       pack_convert_report *rep, ims_error *err)
{
	int i = subset_index(sp->name);
	if (i < 0 || (!o->subset[i].per_class && !o->subset[i].total))
		return 0;
	ds_subset_report r;
	memset(&r, 0, sizeof(r));
	ds_list sub;
	ds_list_init(&sub);
	int rc = ds_subset(&sp->list, o->subset[i].per_class,
			   o->subset[i].total, o->dataset.seed, o->allow_short,
			   &sub, &r, err);
	if (rc < 0) {
		ims_fail_context(err, "%s", sp->name);
		if (r.short_classes)
			rep->refused = short_classes(&sp->list, &r, 1,
						     &rep->n_refused);
		goto out;
	}
	if (r.short_classes && o->short_classes) {
		size_t n;
		pack_short_class *c = short_classes(&sp->list, &r, 0, &n);
		if (c)
			o->short_classes(o->ctx, sp->name, c, n);
		free(c);
	}
	ds_list_release(&sp->list);
	sp->list = sub;
	ds_list_init(&sub);
out:
	ds_subset_report_release(&r);
	ds_list_release(&sub);
	return rc;
}

/* Records of the smallest and largest class of a written split. */
static int summarize(const char *manifest, pack_convert_split *s,
		     ims_error *err)
{
	rio_manifest m;
	FORWARD_IF_ERR(rio_manifest_load(manifest, &m, err));
	uint64_t lo = UINT64_MAX, hi = 0;
	for (size_t c = 0; c < m.n_classes; c++) {
		lo = m.class_counts[c] < lo ? m.class_counts[c] : lo;
		hi = m.class_counts[c] > hi ? m.class_counts[c] : hi;
	}
	s->records = m.records;
	s->classes = m.n_classes;
	s->fewest = m.n_classes ? lo : 0;
	s->most = hi;
	rio_manifest_release(&m);
	return 0;
}

/* A split with no record is refused before any split is packed: one
 * carved by a ratio says why (each class's share is rounded, so a small
 * ratio of small classes takes nothing). */
static int check_not_empty(const pack_convert_opts *o, const ds_split_list *sp,
			   ims_error *err)
{
	if (sp->list.count)
		return 0;
	const int val = strcmp(sp->name, "val") == 0;
	const double ratio = val ? o->dataset.val_ratio
			   : strcmp(sp->name, "test") == 0 ? o->dataset.test_ratio : 0;
	if (ratio > 0)
		return ims_fail(err, IMS_EINVAL,
				"split '%s' is empty: --%s-ratio %g takes each class's "
				"share rounded, and a class needs %zu records for "
				"one; every class here has fewer (raise --%s-ratio, "
				"or leave it out)",
				sp->name, val ? "val" : "test", ratio,
				ds_split_class_needs(ratio), val ? "val" : "test");
	return ims_fail(err, IMS_EINVAL, "split '%s' is empty", sp->name);
}

static int pack_split(const pack_convert_opts *o, const ds_dataset *d,
		      const ds_split_list *sp, const char *stage,
		      pack_convert_split *out, ims_error *err)
{
	char lst[4200];
	snprintf(lst, sizeof(lst), "%s/%s.lst", o->out_dir, sp->name);
	pack_opts po = o->pack;
	po.root = o->root;
	po.out_dir = stage;
	po.name = sp->name;
	po.source = lst; /* where it will be */
	po.force = 0;    /* the staging folder starts empty */
	po.discard_errors = 1; /* a failed split's stage goes: name no file in it */
	po.read_row = d->rows_are_records ? o->adapter->read_row : NULL;
	po.order = o->no_shuffle ? PACK_ORDER_LIST : PACK_ORDER_SHUFFLED;
	if (o->split_begin)
		o->split_begin(o->ctx, sp->name, sp->list.count);
	pack_report pr;
	int rc = pack_run(&sp->list, &po, &pr, err);
	if (rc < 0) {
		if (rc != IMS_EINTR)
			ims_fail_context(err, "%s", sp->name);
		return rc;
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", sp->name);
	out->listed = pr.listed;
	out->skipped = pr.skipped;
	out->bytes_in = pr.bytes_in;
	out->bytes_out = pr.bytes_out;
	out->shards = pr.shards;
	out->shards_left_out = pr.shards_left_out;
	out->seconds = pr.seconds;
	FORWARD_IF_ERR(summarize(pr.manifest, out, err));
	/* Reported where they will be once the convert is done. */
	snprintf(out->manifest, sizeof(out->manifest), "%s/%s.json", o->out_dir,
		 sp->name);
	if (pr.errors[0])
		snprintf(out->errors, sizeof(out->errors), "%s/%s.errors.tsv",
			 o->out_dir, sp->name);
	if (o->split_end)
		o->split_end(o->ctx, out);
	return 0;
}

/* The managed splits of out that exist (have a manifest), as "train, val"
 * into buf; their number. */
static int old_splits(const char *out, char *buf, size_t len)
{
	int n = 0;
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s.json", out, pack_managed_splits[i]);
		if (access(p, F_OK) != 0)
			continue;
		int w = snprintf(buf + used, len - used, "%s%s", n ? ", " : "",
				 pack_managed_splits[i]);
		if (w > 0 && used + (size_t)w < len)
			used += (size_t)w;
		n++;
	}
	return n;
}

/* Refuses (without force) to replace or remove an existing split; a
 * split this run would remove is named first, as the less expected. */
static int check_replace(const pack_convert_opts *o, const ds_dataset *d,
			 ims_error *err)
{
	for (int pass = 0; pass < 2 && !o->pack.force; pass++) {
		for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++) {
			const char *name = pack_managed_splits[i];
			char p[4200];
			snprintf(p, sizeof(p), "%s/%s.json", o->out_dir, name);
			int written = 0;
			for (int s = 0; s < d->n_splits; s++)
				written |= strcmp(d->splits[s].name, name) == 0;
			if (written != pass || access(p, F_OK) != 0)
				continue;
			if (written)
				return ims_fail(err, IMS_EEXIST,
						"split '%s' already exists; use --force to replace it",
						p);
			return ims_fail(err, IMS_EEXIST,
					"split '%s' of an earlier convert would be removed "
					"(this run writes no %s split, and splits of two "
					"converts must not mix); use --force to remove it",
					p, name);
		}
	}
	return 0;
}

/* Writes every split into the staging folder: subsets, shuffle, lists,
 * class names, shards and manifests. */
static int stage_splits(const pack_convert_opts *o, ds_dataset *d,
			const char *stage, pack_convert_report *rep,
			ims_error *err)
{
	for (int s = 0; s < d->n_splits; s++) {
		ds_split_list *sp = &d->splits[s];
		rep->stage = PACK_CONVERT_SUBSET;
		snprintf(rep->failed_split, sizeof(rep->failed_split), "%s", sp->name);
		FORWARD_IF_ERR(take_subset(o, sp, rep, err));
		FORWARD_IF_ERR(check_not_empty(o, sp, err));
		/* After the subset, so that a subset is the same whether or
		 * not the records are shuffled. */
		if (!o->no_shuffle)
			ds_list_shuffle(&sp->list, o->dataset.seed);
		rep->stage = PACK_CONVERT_WRITE;
		char p[4400];
		snprintf(p, sizeof(p), "%s/%s.lst", stage, sp->name);
		FORWARD_IF_ERR(ds_list_write(p, &sp->list, err));
	}
	rep->failed_split[0] = '\0';
	char p[4400];
	snprintf(p, sizeof(p), "%s/classes.txt", stage);
	FORWARD_IF_ERR(ds_classes_write(p, &d->splits[0].list, err));
	for (int s = 0; s < d->n_splits; s++) {
		ds_split_list *sp = &d->splits[s];
		snprintf(rep->failed_split, sizeof(rep->failed_split), "%s", sp->name);
		RETURN_IF(cancelled(o), err, IMS_EINTR, "interrupted");
		FORWARD_IF_ERR(pack_split(o, d, sp, stage, &rep->splits[rep->n_splits], err));
		rep->n_splits++;
	}
	rep->failed_split[0] = '\0';
	return 0;
}

int pack_convert(const pack_convert_opts *o, pack_convert_report *rep,
		 ims_error *err)
{
	memset(rep, 0, sizeof(*rep));
	rep->stage = PACK_CONVERT_OPTIONS;
	RETURN_IF(!o->adapter || !o->root || !o->out_dir, err, IMS_EINVAL,
		  "cannot convert: adapter, dataset root and output folder are required");
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++)
		RETURN_IF(o->subset[i].per_class && o->subset[i].total, err,
			  IMS_EINVAL, "give --per-class-%s or --%s-total, not both",
			  pack_managed_splits[i], pack_managed_splits[i]);
	/* a split in a folder under the dataset root would be read back by
	 * the next convert: for a folder layout that folder becomes a class
	 * and shifts every label after it (files directly in the root belong
	 * to no class: the root itself is fine) */
	RETURN_IF(ims_path_within(o->out_dir, o->root) &&
			  !ims_path_within(o->root, o->out_dir),
		  err, IMS_EINVAL,
		  "output folder '%s' is inside the dataset root '%s', where a later "
		  "convert would read it (a folder layout takes it for a class and "
		  "shifts every label after it): write in the root itself or outside it",
		  o->out_dir, o->root);

	ds_dataset d;
	memset(&d, 0, sizeof(d));
	rio_lock *locks[PACK_N_SUBSET_SPLITS] = {NULL};
	int rc = 0, staged = 0, touching = 0;
	char stage[4200];
	char *made = NULL; /* the outermost folder of out_dir this run made */
	rep->stage = PACK_CONVERT_LOAD;
	GOTO_IF_ERR(out, rc, o->adapter->load(o->root, &o->dataset, &d, err));
	d.adapter = o->adapter;
	for (size_t i = 0; i < d.n_notes && o->note; i++)
		o->note(o->ctx, d.notes[i]);
	if (d.n_splits == 0)
		GOTO_FAIL(out, rc, err, IMS_ENOTFOUND,
			  "the %s adapter found no split under '%s'", o->adapter->name,
			  o->root);
	/* Every split has the dataset's class names: refuse names a manifest
	 * cannot hold before anything is written. */
	GOTO_IF_ERR(out, rc, pack_check_names(&d.splits[0].list, NULL, err));
	rep->stage = PACK_CONVERT_OPTIONS;
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++) {
		int found = 0;
		for (int s = 0; s < d.n_splits; s++)
			found |= strcmp(d.splits[s].name, pack_managed_splits[i]) == 0;
		if ((o->subset[i].per_class || o->subset[i].total) && !found)
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "--per-class-%s/--%s-total: %s has no %s split",
				  pack_managed_splits[i], pack_managed_splits[i],
				  o->adapter->name, pack_managed_splits[i]);
	}

	/* The splits' locks, for the whole run: no pack writes them while
	 * they are staged and switched, and no other convert shares the
	 * staging folder. Then what an interrupted convert left is finished
	 * or discarded, and replacing is refused before anything is written. */
	rep->stage = PACK_CONVERT_WRITE;
	/* Before the recovery too: a folder at a managed name would stop the
	 * switch an earlier convert committed, every time. */
	GOTO_IF_ERR(out, rc, pack_stage_check_out(o->out_dir, err));
	GOTO_IF_ERR(out, rc, ims_mkdir_p_created(o->out_dir, &made, err));
	touching = 1;
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++)
		GOTO_IF_ERR(out, rc, rio_lock_take(o->out_dir, pack_managed_splits[i],
						   &locks[i], err));
	GOTO_IF_ERR(out, rc, pack_stage_recover(o->out_dir, o->switch_step, o->ctx,
						NULL, err));
	touching = 0; /* the refusal says what to do itself */
	GOTO_IF_ERR(out, rc, check_replace(o, &d, err));
	touching = 1;
	GOTO_IF_ERR(out, rc, pack_stage_create(o->out_dir, stage, sizeof(stage), err));
	staged = 1;
	GOTO_IF_ERR(out, rc, stage_splits(o, &d, stage, rep, err));
	if (cancelled(o))
		GOTO_FAIL(out, rc, err, IMS_EINTR, "interrupted");
	staged = 2; /* committed: from here the switch is finished, not undone */
	GOTO_IF_ERR(out, rc, pack_stage_switch(o->out_dir, o->switch_step, o->ctx, err));
	rep->stage = PACK_CONVERT_DONE;
out:
	if (rc < 0 && staged == 1)
		pack_stage_discard(o->out_dir);
	if (rc < 0 && touching && staged < 2) {
		char kept[64];
		int n = old_splits(o->out_dir, kept, sizeof(kept));
		if (n)
			snprintf(rep->outcome, sizeof(rep->outcome),
				 "nothing was replaced: '%s' keeps its earlier splits %s",
				 o->out_dir, kept);
		else
			snprintf(rep->outcome, sizeof(rep->outcome),
				 "no split was written to '%s'", o->out_dir);
		/* The message says what was kept; with nothing to keep it is
		 * the cause alone. */
		if (err && rc != IMS_EINTR && n) {
			char why[IMS_ERRMSG_MAX];
			snprintf(why, sizeof(why), "%s", err->msg);
			ims_fail(err, rc, "%s; %s", why, rep->outcome);
		}
	}
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++)
		rio_lock_release(locks[i]);
	/* A failed convert into a folder it made leaves no empty folder
	 * (after the locks, whose files are in it). */
	if (rc < 0 && staged < 2)
		ims_rmdir_created(o->out_dir, made);
	free(made);
	ds_dataset_release(&d);
	return rc;
}
