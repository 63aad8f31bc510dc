/*
 * switch.c - replacing the splits of a convert's folder all or nothing.
 *
 * A convert writes every split (shards, manifests, lists, errors files)
 * and classes.txt into OUTDIR/.imshard-convert first. Only when all of
 * them are written does it commit (a COMMIT file, written atomically) and
 * switch:
 *   1. remove OUTDIR's managed files: every old manifest first (from then
 *      on no old split exists), then their shards, lists, errors files and
 *      classes.txt; then write MOVING;
 *   2. move the staged files into OUTDIR, the manifests last; remove the
 *      staging folder.
 * Several manifests cannot appear in one atomic step, so the folder passes
 * through states holding some of the new splits and none of the old; it
 * never holds a manifest of each. A kill before the commit leaves the old
 * splits untouched; after it, the next convert into OUTDIR finishes the
 * switch (phase 1 again when MOVING is missing: it only removes; phase 2
 * moves what is still staged). Each step is fsynced before the next.
 */
#define _GNU_SOURCE
#include "pack_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const pack_managed_splits[PACK_N_SUBSET_SPLITS] = {"train", "val",
							       "test"};

#define COMMIT_FILE "COMMIT"
#define MOVING_FILE "MOVING"

static int all_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* 2 for a managed split's manifest, 1 for another managed file, 0 for a
 * file that is not a convert's. Lock files are the lock holder's. */
static int managed_kind(const char *f)
{
	if (strcmp(f, "classes.txt") == 0)
		return 1;
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++) {
		const char *s = pack_managed_splits[i];
		size_t n = strlen(s);
		if (strncmp(f, s, n) != 0)
			continue;
		const char *r = f + n;
		if (strcmp(r, ".json") == 0)
			return 2;
		if (strcmp(r, ".lst") == 0 || strcmp(r, ".errors.tsv") == 0 ||
		    strcmp(r, ".errors.tsv.partial") == 0)
			return 1;
		size_t rl = strlen(r);
		/* -SSSSS-of-NNNNN.mdb, and a writer's -SSSSS.mdb.partial and
		 * -SSSSS.mdb.compact left by a killed pack */
		if (rl == 19 && r[0] == '-' && all_digits(r + 1, 5) &&
		    strncmp(r + 6, "-of-", 4) == 0 && all_digits(r + 10, 5) &&
		    strcmp(r + 15, ".mdb") == 0)
			return 1;
		if (rl == 18 && r[0] == '-' && all_digits(r + 1, 5) &&
		    (strcmp(r + 6, ".mdb.partial") == 0 ||
		     strcmp(r + 6, ".mdb.compact") == 0))
			return 1;
	}
	return 0;
}

static int join(char *out, size_t len, const char *dir, const char *name,
		ims_error *err)
{
	int n = snprintf(out, len, "%s/%s", dir, name);
	RETURN_IF(n < 0 || (size_t)n >= len, err, IMS_EINVAL,
		  "path '%s/%s' is too long", dir, name);
	return 0;
}

static int fsync_dir(const char *dir, ims_error *err)
{
	char p[4200];
	FORWARD_IF_ERR(join(p, sizeof(p), dir, ".", err));
	return ims_fsync_parent(p, err);
}

static void step(pack_step_fn fn, void *ctx, int *n)
{
	if (fn)
		fn(ctx, *n);
	(*n)++;
}

int pack_stage_check_out(const char *out, ims_error *err)
{
	ims_dir_listing ls = {0};
	int rc = ims_dir_list(out, 0, &ls, err);
	if (rc == IMS_ENOTFOUND)
		rc = 0;
	for (size_t i = 0; i < ls.n && rc == 0; i++) {
		if (!managed_kind(ls.e[i].name) || ls.e[i].kind == IMS_KIND_FILE)
			continue;
		char p[4200];
		struct stat st;
		rc = join(p, sizeof(p), out, ls.e[i].name, err);
		/* lstat: a link is unlinked, whatever it points to */
		if (rc == 0 && lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			rc = ims_fail(err, IMS_EEXIST,
				      "'%s' is a folder, where convert writes a file of its own: remove it or write elsewhere",
				      p);
	}
	ims_dir_listing_release(&ls);
	return rc;
}

/* Removes dir's managed files of one kind. */
static int remove_kind(const char *dir, int kind, pack_step_fn fn, void *ctx,
		       int *n, ims_error *err)
{
	ims_dir_listing ls = {0};
	int rc = ims_dir_list(dir, 0, &ls, err);
	for (size_t i = 0; i < ls.n && rc == 0; i++) {
		if (managed_kind(ls.e[i].name) != kind)
			continue;
		char p[4200];
		rc = join(p, sizeof(p), dir, ls.e[i].name, err);
		step(fn, ctx, n);
		if (rc == 0 && unlink(p) != 0 && errno != ENOENT)
			rc = ims_fail(err, IMS_EIO, "cannot remove '%s': %s", p,
				      strerror(errno));
	}
	ims_dir_listing_release(&ls);
	FORWARD_IF_ERR(rc);
	return fsync_dir(dir, err);
}

/* Moves stage's files of one kind into out. */
static int move_kind(const char *stage, const char *out, int kind,
		     pack_step_fn fn, void *ctx, int *n, ims_error *err)
{
	ims_dir_listing ls = {0};
	int rc = ims_dir_list(stage, 0, &ls, err);
	for (size_t i = 0; i < ls.n && rc == 0; i++) {
		const char *name = ls.e[i].name;
		if (managed_kind(name) != kind)
			continue;
		char from[4200], to[4200];
		rc = join(from, sizeof(from), stage, name, err);
		if (rc == 0)
			rc = join(to, sizeof(to), out, name, err);
		step(fn, ctx, n);
		if (rc == 0 && rename(from, to) != 0)
			rc = ims_fail(err, IMS_EIO, "cannot move '%s' to '%s': %s",
				      from, to, strerror(errno));
	}
	ims_dir_listing_release(&ls);
	FORWARD_IF_ERR(rc);
	return fsync_dir(out, err);
}

static int exists(const char *dir, const char *name)
{
	char p[4200];
	struct stat st;
	return join(p, sizeof(p), dir, name, NULL) == 0 && lstat(p, &st) == 0;
}

static int write_marker(const char *stage, const char *name, ims_error *err)
{
	char p[4200];
	FORWARD_IF_ERR(join(p, sizeof(p), stage, name, err));
	static const char text[] = "imshard convert: switching to the splits staged here\n";
	FORWARD_IF_ERR(ims_write_file_atomic(p, text, sizeof(text) - 1, err));
	return fsync_dir(stage, err);
}

/* Removes every entry of dir (files only: a stage holds nothing else)
 * and dir itself. */
static int remove_dir(const char *dir, ims_error *err)
{
	ims_dir_listing ls = {0};
	ims_error e;
	int rc = ims_dir_list(dir, IMS_DIR_HIDDEN, &ls, &e);
	if (rc == IMS_ENOTFOUND)
		return 0; /* removed already */
	if (rc < 0) {
		if (err)
			*err = e;
		return rc;
	}
	for (size_t i = 0; i < ls.n; i++) {
		char p[4200];
		if (join(p, sizeof(p), dir, ls.e[i].name, err) < 0 ||
		    (unlink(p) != 0 && errno != ENOENT)) {
			rc = ims_fail(err, IMS_EIO, "cannot remove '%s': %s", p,
				      strerror(errno));
			break;
		}
	}
	ims_dir_listing_release(&ls);
	FORWARD_IF_ERR(rc);
	RETURN_IF(rmdir(dir) != 0 && errno != ENOENT, err, IMS_EIO,
		  "cannot remove folder '%s': %s", dir, strerror(errno));
	return 0;
}

/* Phases 1 and 2 from wherever a committed switch stopped. */
static int finish(const char *out, const char *stage, pack_step_fn fn,
		  void *ctx, int *n, ims_error *err)
{
	if (!exists(stage, MOVING_FILE)) {
		FORWARD_IF_ERR(remove_kind(out, 2, fn, ctx, n, err));
		FORWARD_IF_ERR(remove_kind(out, 1, fn, ctx, n, err));
		step(fn, ctx, n);
		FORWARD_IF_ERR(write_marker(stage, MOVING_FILE, err));
	}
	FORWARD_IF_ERR(move_kind(stage, out, 1, fn, ctx, n, err));
	FORWARD_IF_ERR(move_kind(stage, out, 2, fn, ctx, n, err));
	step(fn, ctx, n);
	FORWARD_IF_ERR(remove_dir(stage, err));
	return fsync_dir(out, err);
}

static int stage_path(const char *out, char *stage, size_t len,
		      ims_error *err)
{
	return join(stage, len, out, PACK_STAGE_NAME, err);
}

int pack_stage_recover(const char *out, pack_step_fn fn, void *ctx,
		       int *finished, ims_error *err)
{
	if (finished)
		*finished = 0;
	char stage[4200];
	FORWARD_IF_ERR(stage_path(out, stage, sizeof(stage), err));
	struct stat st;
	if (lstat(stage, &st) != 0)
		return 0;
	RETURN_IF(!S_ISDIR(st.st_mode), err, IMS_EEXIST,
		  "'%s' is in the way of a convert's staging folder; remove it",
		  stage);
	if (!exists(stage, COMMIT_FILE))
		return remove_dir(stage, err);
	int n = 0;
	int rc = finish(out, stage, fn, ctx, &n, err);
	if (rc < 0)
		return ims_fail_context(err,
					"cannot finish an interrupted convert into '%s'",
					out);
	if (finished)
		*finished = 1;
	return 0;
}

int pack_stage_create(const char *out, char *stage, size_t len,
		      ims_error *err)
{
	FORWARD_IF_ERR(stage_path(out, stage, len, err));
	FORWARD_IF_ERR(remove_dir(stage, err));
	RETURN_IF(mkdir(stage, 0755) != 0, err, IMS_EIO,
		  "cannot create staging folder '%s': %s", stage, strerror(errno));
	return 0;
}

void pack_stage_discard(const char *out)
{
	char stage[4200];
	if (stage_path(out, stage, sizeof(stage), NULL) == 0 &&
	    !exists(stage, COMMIT_FILE))
		remove_dir(stage, NULL);
}

int pack_stage_switch(const char *out, pack_step_fn fn, void *ctx,
		      ims_error *err)
{
	char stage[4200];
	FORWARD_IF_ERR(stage_path(out, stage, sizeof(stage), err));
	int n = 0;
	step(fn, ctx, &n);
	FORWARD_IF_ERR(write_marker(stage, COMMIT_FILE, err));
	int rc = finish(out, stage, fn, ctx, &n, err);
	if (rc < 0)
		return ims_fail_context(err,
					"the new splits are committed but the switch stopped (the next convert into '%s' finishes it)",
					out);
	return 0;
}
