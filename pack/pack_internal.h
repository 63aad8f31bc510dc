/*
 * pack_internal.h - what convert.c and switch.c share: the staging folder
 * of a convert and the switch that replaces a folder's splits by it.
 */
#ifndef IMSHARD_PACK_INTERNAL_H
#define IMSHARD_PACK_INTERNAL_H

#include "pack.h"

/* Inside OUTDIR: where a convert writes everything before the switch. */
#define PACK_STAGE_NAME ".imshard-convert"

/* The split names a convert owns in OUTDIR (with classes.txt), in the
 * order of pack_convert_opts.subset: "train", "val", "test". */
extern const char *const pack_managed_splits[PACK_N_SUBSET_SPLITS];

/* Refuses (IMS_EINVAL) a split name or class name that is not UTF-8 (a
 * manifest is UTF-8 JSON), and class names that a classes file could not
 * hold (ims_name_line_problem) or that repeat. split may be NULL. */
int pack_check_names(const ds_list *list, const char *split, ims_error *err);

/* Called before each step of a switch (tests stop a process there). */
typedef void (*pack_step_fn)(void *ctx, int step);

/*
 * Finishes or discards what an earlier convert left in out/PACK_STAGE_NAME:
 * a committed switch is carried to its end (the new splits appear), an
 * uncommitted staging folder is removed (the old splits stay). Call with
 * the managed splits' locks held. *finished (may be NULL) is set to 1 when
 * a switch was finished. IMS_EIO.
 */
int pack_stage_recover(const char *out, pack_step_fn step, void *ctx,
		       int *finished, ims_error *err);

/* Refuses (IMS_EEXIST, naming it) a folder in out at the name of a file
 * the switch removes or moves in (a split's manifest, shard, list or
 * errors file, classes.txt), which would stop a committed switch. An out
 * that does not exist is fine. IMS_EIO. */
int pack_stage_check_out(const char *out, ims_error *err);

/* Creates out/PACK_STAGE_NAME, empty (removing an uncommitted one). */
int pack_stage_create(const char *out, char *stage, size_t len,
		      ims_error *err);

/* Removes an uncommitted staging folder and everything in it. */
void pack_stage_discard(const char *out);

/*
 * Commits the staging folder and switches: every managed file in out (the
 * splits train, val and test with their shards, lists and errors files,
 * and classes.txt) is removed, manifests first, then the staged files are
 * moved in, manifests last. From the commit on, a failure or a kill is
 * finished by pack_stage_recover. IMS_EIO.
 */
int pack_stage_switch(const char *out, pack_step_fn step, void *ctx,
		      ims_error *err);

#endif
