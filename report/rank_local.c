/*
 * rank_local.c - a rank-local --log-dir given beside its run's folder.
 *
 * A rank whose --log-dir is a folder of its own (storage local to its
 * node) writes its train and gpu lines there, after the run's start line.
 * Drawn as a run of its own, its ranks would be missing from the run and
 * guessed at the others' speed there. So a folder without summary.json or
 * rank 0's lines that is another given folder's run (same run_id, which
 * every rank of a run shares; without one, the same job mark in the lock
 * files) has its lines joined to that run, and is no longer a run of the
 * report: the run's notes name it (rep_run.rank_local.merged).
 *
 * Each folder's lines were settled when it was read (rep_parts_settle):
 * superseded lines and warm-ups are worked out against the parts of the
 * file a line is in, since line numbers are per file. Only then are they
 * joined; nothing after the join looks at a line's number but to order
 * lines of one rank, which all come from one folder.
 *
 * A folder whose ranks the run already has (two folders of one rank) is
 * not joined: its lines would count twice. It stays a run of its own, and
 * both sections name each other. (The same folder given twice never gets
 * here: the command refuses it.)
 */
#define _GNU_SOURCE
#include "report_internal.h"

#include <stdlib.h>
#include <string.h>

/* A run's id: its first part's run_id, "" when unknown. */
static const char *run_id_of(const rep_run *run)
{
	return run->parts.n ? run->parts.list[0].run_id : "";
}

/* One run: the same run_id, or without one (no --checkpoint-dir in logs
 * of earlier versions) the same job's mark in the lock files. */
static int same_run(const rep_run *a, const rep_run *b)
{
	const char *x = run_id_of(a), *y = run_id_of(b);
	if (x[0] || y[0])
		return strcmp(x, y) == 0;
	const char *ma = a->rank_local.job_mark, *mb = b->rank_local.job_mark;
	return ma[0] && strcmp(ma, mb) == 0;
}

static int has_rank0(const rep_run *run)
{
	for (size_t i = 0; i < run->lines.n_train; i++)
		if (run->lines.train[i].rank == 0)
			return 1;
	return 0;
}

/* Sets rank_local.of_run: a folder without summary.json or rank 0's lines
 * that is another given folder's run holds that run's other ranks. */
static void link_rank_local(rep_report *r)
{
	for (size_t j = 0; j < r->n_runs; j++) {
		rep_run *run = &r->runs[j];
		run->rank_local.of_run = -1;
		const char *id = run_id_of(run);
		if ((!id[0] && !run->rank_local.job_mark[0]) || run->has_summary ||
		    has_rank0(run))
			continue;
		for (size_t i = 0; i < r->n_runs; i++)
			if (i != j && same_run(run, &r->runs[i]) &&
			    (r->runs[i].has_summary || has_rank0(&r->runs[i]))) {
				run->rank_local.of_run = (long)i;
				break;
			}
	}
}

/* Marks in seen[] the ranks of run's train and gpu lines. */
static void ranks_of(const rep_run *run, unsigned char *seen)
{
	for (size_t i = 0; i < run->lines.n_train; i++)
		seen[run->lines.train[i].rank] = 1;
	for (size_t i = 0; i < run->lines.n_gpu; i++)
		seen[run->lines.gpu[i].rank] = 1;
}

/* Whether folder's lines can join run: it has train lines, only lines
 * of ranks that run has and no line of its own for (a rank counted
 * twice would be worse than one guessed), and nothing that is rank 0's
 * (validation, an evaluation) that the run's own would be confused with.
 * 1, 0, or IMS_ENOMEM. */
static int joinable(const rep_run *run, const rep_run *folder)
{
	if (!folder->lines.n_train || folder->lines.n_val || folder->classes)
		return 0;
	unsigned char *seen = calloc(REP_MAX_RANKS, 2);
	if (!seen)
		return IMS_ENOMEM;
	unsigned char *theirs = seen + REP_MAX_RANKS;
	ranks_of(run, seen);
	ranks_of(folder, theirs);
	int ok = 1;
	for (int k = 0; k < REP_MAX_RANKS && ok; k++)
		ok = !theirs[k] || (!seen[k] && k < run->world);
	free(seen);
	return ok;
}

/* Moves folder's lines, counts and diagnostics into run, as its merged
 * folder number run->rank_local.n_merged + 1. folder is left to be
 * released (its dir taken). 0 or IMS_ENOMEM (run unchanged but for grown
 * arrays). */
static int join(rep_run *run, rep_run *folder)
{
	rep_merged *m = realloc(run->rank_local.merged,
				(run->rank_local.n_merged + 1) * sizeof(*m));
	if (!m)
		return IMS_ENOMEM;
	run->rank_local.merged = m;
	rep_train_line *t = realloc(run->lines.train,
				    (run->lines.n_train + folder->lines.n_train) * sizeof(*t));
	if (!t)
		return IMS_ENOMEM;
	run->lines.train = t;
	if (folder->lines.n_gpu) {
		rep_gpu_line *g = realloc(run->lines.gpu,
					  (run->lines.n_gpu + folder->lines.n_gpu) * sizeof(*g));
		if (!g)
			return IMS_ENOMEM;
		run->lines.gpu = g;
	}
	int k = (int)run->rank_local.n_merged + 1;
	m = &run->rank_local.merged[run->rank_local.n_merged++];
	m->dir = folder->dir;
	folder->dir = NULL;
	m->n_train = folder->lines.n_train;
	m->n_gpu = folder->lines.n_gpu;
	for (size_t i = 0; i < folder->lines.n_train; i++) {
		run->lines.train[run->lines.n_train] = folder->lines.train[i];
		run->lines.train[run->lines.n_train++].folder = k;
	}
	for (size_t i = 0; i < folder->lines.n_gpu; i++) {
		run->lines.gpu[run->lines.n_gpu] = folder->lines.gpu[i];
		run->lines.gpu[run->lines.n_gpu++].folder = k;
	}
	run->lines.missing |= folder->lines.missing;
	run->parts.n_superseded += folder->parts.n_superseded;
	run->parts.n_superseded_gpu += folder->parts.n_superseded_gpu;
	/* the same run's parts, in the same order: a part's lines that a
	 * later part trained again are counted with the run's part */
	if (folder->parts.n == run->parts.n)
		for (size_t i = 0; i < run->parts.n; i++) {
			rep_part *p = &run->parts.list[i];
			const rep_part *q = &folder->parts.list[i];
			if (!q->superseded)
				continue;
			if (!p->superseded || q->superseded_lo < p->superseded_lo)
				p->superseded_lo = q->superseded_lo;
			if (!p->superseded || q->superseded_hi > p->superseded_hi)
				p->superseded_hi = q->superseded_hi;
			p->superseded += q->superseded;
		}
	/* its skipped lines name their own file: they read the same here */
	for (size_t i = 0; i < folder->diags.n; i++) {
		if (!run->diags.list) {
			run->diags.list = calloc(REP_MAX_DIAGS, sizeof(*run->diags.list));
			if (!run->diags.list)
				return IMS_ENOMEM;
		}
		if (run->diags.n < REP_MAX_DIAGS) {
			run->diags.list[run->diags.n++] = folder->diags.list[i];
			folder->diags.list[i] = NULL;
		}
	}
	run->diags.n_total += folder->diags.n_total;
	run->diags.n_skipped_lines += folder->diags.n_skipped_lines;
	return 0;
}

int rep_rank_local_join(rep_report *r)
{
	link_rank_local(r);
	if (!r->n_runs)
		return 0;
	long *to = malloc(r->n_runs * sizeof(*to));
	if (!to)
		return IMS_ENOMEM;
	int rc = 0;
	for (size_t j = 0; j < r->n_runs; j++) {
		to[j] = 0;
		rep_run *folder = &r->runs[j];
		if (folder->rank_local.of_run < 0)
			continue;
		rep_run *run = &r->runs[folder->rank_local.of_run];
		rc = joinable(run, folder);
		if (rc < 0)
			goto out;
		if (!rc)
			continue;
		rc = join(run, folder);
		if (rc < 0)
			goto out;
		to[j] = -1;
	}
	/* drop the joined folders; the others keep their order, and a
	 * folder left unjoined points at its run's new index (a run is
	 * never joined: it has summary.json or rank 0's lines) */
	size_t n = 0;
	for (size_t j = 0; j < r->n_runs; j++) {
		if (to[j] < 0) {
			rep_run_release(&r->runs[j]);
			continue;
		}
		to[j] = (long)n;
		if (n != j)
			r->runs[n] = r->runs[j];
		n++;
	}
	for (size_t j = 0; j < n; j++)
		if (r->runs[j].rank_local.of_run >= 0)
			r->runs[j].rank_local.of_run = to[r->runs[j].rank_local.of_run];
	r->n_runs = n;
out:
	free(to);
	return rc;
}
