/*
 * parts.c - a run in parts: imshard-train appends each part of a resumed
 * run (one process per rank, one mpirun) to the same metrics.jsonl, after a
 * "start" line (and a "resume" line) that says where the part starts, with
 * how many ranks, and which run it continues (run_id).
 *
 * A part killed after its last checkpoint logged steps the next part
 * trains again from that checkpoint. Those lines describe work that was
 * thrown away: counted in a steady speed or drawn beside the lines that
 * replaced them, a step would count twice. They are superseded: dropped
 * here and counted per part, so that every figure sees each step once, as
 * the run's totals (summary.json) do.
 *
 * Ranks are checked against their own part: a resume with fewer ranks
 * leaves the earlier part's higher ranks in the file, and they are the
 * run's lines, not damaged ones.
 */
#define _GNU_SOURCE
#include "report_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A whole number of key in [lo, hi], else -1 (absent or bad: the part is
 * still a part, with that field unknown). */
static double whole(const cJSON *o, const char *key, double lo, double hi)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
	    v->valuedouble < lo || v->valuedouble > hi ||
	    v->valuedouble != floor(v->valuedouble))
		return -1;
	return v->valuedouble;
}

int rep_part_line(rep_run *run, const char *file, size_t ln, const cJSON *o,
		  int resume)
{
	rep_part *last = run->parts.n ? &run->parts.list[run->parts.n - 1] : NULL;
	const rep_lines *ls = &run->lines;
	/* the trainer writes a part's resume line right after its start
	 * line; a resume line alone (older logs) starts a part itself */
	int fresh = last && !(ls->n_train && ls->train[ls->n_train - 1].line > last->line) &&
		    !(ls->n_val && ls->val[ls->n_val - 1].line > last->line) &&
		    !(ls->n_gpu && ls->gpu[ls->n_gpu - 1].line > last->line);
	if (resume && fresh && !last->resumed) {
		last->resumed = 1;
		double w = whole(o, "world_was", 1, REP_MAX_RANKS);
		last->world_was = w > 0 ? (int)w : 0;
		if (!last->world) {
			w = whole(o, "world", 1, REP_MAX_RANKS);
			last->world = w > 0 ? (int)w : 0;
		}
		return 0;
	}
	/* doubled when full (n a power of two): one more each time copied
	 * the array at every start line, quadratic in a log of many parts */
	const size_t n = run->parts.n;
	rep_part *p = run->parts.list;
	if ((n & (n - 1)) == 0) {
		p = realloc(run->parts.list, (n < 8 ? 8 : 2 * n) * sizeof(*p));
		if (!p)
			return IMS_ENOMEM;
		run->parts.list = p;
	}
	p = &run->parts.list[run->parts.n++];
	memset(p, 0, sizeof(*p));
	p->line = ln;
	double v = whole(o, "step", 0, 1e15);
	p->step = v >= 0 ? (int64_t)v : -1;
	v = whole(o, "epoch", 0, 1e7);
	p->epoch = v >= 0 ? (int)v : -1;
	v = whole(o, "world", 1, REP_MAX_RANKS);
	p->world = v > 0 ? (int)v : 0;
	p->resumed = resume;
	if (resume) {
		v = whole(o, "world_was", 1, REP_MAX_RANKS);
		p->world_was = v > 0 ? (int)v : 0;
	}
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "run_id");
	if (cJSON_IsString(id) && strlen(id->valuestring) < sizeof(p->run_id))
		memcpy(p->run_id, id->valuestring, strlen(id->valuestring) + 1);
	else if (id)
		return rep_diag(run, file, ln, "'run_id' is not a string of under %d bytes: "
				"the part is read without it",
				REP_RUN_ID_MAX);
	if (p->step < 0)
		return rep_diag(run, file, ln,
				"%s line without a valid 'step': earlier lines are "
				"not checked against it",
				resume ? "resume" : "start");
	return 0;
}

/* The part that holds line ln: the last one starting before it; -1 for
 * lines before the first part. Parts are in file order: a binary search,
 * since every line asks (a file of many parts stays linear). */
static long part_of(const rep_parts *parts, size_t ln)
{
	size_t lo = 0, hi = parts->n; /* parts [0, lo) start before ln */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (parts->list[mid].line < ln)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long)lo - 1;
}

/*
 * Numbers the parts' run_ids: id_no[k] is the same for equal ids, from 0,
 * and -1 for a part without one. Returns the number of distinct ids (a
 * part without one adds none: an older trainer's part resumed by a newer
 * one is one run), or IMS_ENOMEM. O(P log P): a file of many parts is not
 * quadratic.
 */
static long number_ids(const rep_parts *parts, long *id_no)
{
	const size_t n = parts->n;
	const char **ids = calloc(n ? n : 1, sizeof(*ids));
	if (!ids)
		return IMS_ENOMEM;
	for (size_t k = 0; k < n; k++)
		ids[k] = parts->list[k].run_id;
	const long k = ims_number_names(ids, n, id_no);
	/* "" sorts first: when a part has no id, 0 is its number, and the
	 * ids' numbers start at 1 */
	long empty = 0;
	for (size_t j = 0; k >= 0 && j < n; j++)
		empty |= !ids[j][0];
	for (size_t j = 0; k >= 0 && j < n; j++)
		id_no[j] = ids[j][0] ? id_no[j] - empty : -1;
	free(ids);
	return k < 0 ? IMS_ENOMEM : k - empty;
}

/*
 * A line of part j (-1: before the first part) at step s was trained
 * again when a later part of the same run starts before s: a part
 * continues the run when its run_id is the line's part's (both known),
 * else when its resume line says so; another run's start line supersedes
 * nothing. first[j + 1] receives the smallest start step of such a later
 * part (INT64_MAX: none), so that the line is redone when s > first[j + 1].
 * One pass from the last part back, keeping the smallest start per id.
 */
static int later_starts(const rep_parts *parts, int64_t *first)
{
	const size_t n = parts->n;
	long *id_no = malloc((n ? n : 1) * sizeof(*id_no));
	int64_t *by_id = malloc((n ? n : 1) * sizeof(*by_id));
	if (!id_no || !by_id) {
		free(id_no);
		free(by_id);
		return IMS_ENOMEM;
	}
	long ids = number_ids(parts, id_no);
	if (ids < 0) {
		free(id_no);
		free(by_id);
		return IMS_ENOMEM;
	}
	for (long i = 0; i < ids; i++)
		by_id[i] = INT64_MAX;
	/* the later parts' smallest start: with this id; resumed without an
	 * id; resumed, any id */
	int64_t resumed_no_id = INT64_MAX, resumed_any = INT64_MAX;
	for (size_t j = n; j-- > 0;) {
		const rep_part *p = &parts->list[j];
		first[j + 1] = id_no[j] >= 0 ? (by_id[id_no[j]] < resumed_no_id
							? by_id[id_no[j]]
							: resumed_no_id)
					     : resumed_any;
		if (p->step < 0)
			continue;
		if (id_no[j] >= 0 && p->step < by_id[id_no[j]])
			by_id[id_no[j]] = p->step;
		if (p->resumed && id_no[j] < 0 && p->step < resumed_no_id)
			resumed_no_id = p->step;
		if (p->resumed && p->step < resumed_any)
			resumed_any = p->step;
	}
	first[0] = resumed_any; /* lines before the first part have no id */
	free(id_no);
	free(by_id);
	return 0;
}

/* Whether line ln at step was trained again (later_starts). */
static int redone(const rep_parts *parts, const int64_t *first, size_t ln,
		  int64_t step)
{
	return step > first[part_of(parts, ln) + 1];
}

/* Drops superseded lines, counting them (train lines per part). gpu
 * lines follow the train line of their interval on the same rank: they
 * go with it. */
static int supersede(rep_run *run)
{
	unsigned char *gone_rank = NULL;
	if (run->parts.n < 2)
		return 0;
	int64_t *first = malloc((run->parts.n + 1) * sizeof(*first));
	if (!first || later_starts(&run->parts, first) < 0) {
		free(first);
		return IMS_ENOMEM;
	}
	if (run->lines.n_gpu) {
		gone_rank = calloc(REP_MAX_RANKS, 1);
		if (!gone_rank) {
			free(first);
			return IMS_ENOMEM;
		}
	}
	size_t k = 0, g = 0, gk = 0;
	for (size_t i = 0; i < run->lines.n_train; i++) {
		const rep_train_line *l = &run->lines.train[i];
		/* gpu lines before this train line take their rank's last */
		for (; g < run->lines.n_gpu && run->lines.gpu[g].line < l->line; g++) {
			if (gone_rank[run->lines.gpu[g].rank])
				run->parts.n_superseded_gpu++;
			else
				run->lines.gpu[gk++] = run->lines.gpu[g];
		}
		int gone = redone(&run->parts, first, l->line, l->step);
		if (gone_rank)
			gone_rank[l->rank] = (unsigned char)gone;
		if (!gone) {
			run->lines.train[k++] = *l;
			continue;
		}
		run->parts.n_superseded++;
		long pi = part_of(&run->parts, l->line);
		if (pi < 0)
			continue; /* before the first start line: not a part's */
		rep_part *p = &run->parts.list[pi];
		if (!p->superseded || l->step < p->superseded_lo)
			p->superseded_lo = l->step;
		if (!p->superseded || l->step > p->superseded_hi)
			p->superseded_hi = l->step;
		p->superseded++;
	}
	run->lines.n_train = k;
	for (; g < run->lines.n_gpu; g++) {
		if (gone_rank[run->lines.gpu[g].rank])
			run->parts.n_superseded_gpu++;
		else
			run->lines.gpu[gk++] = run->lines.gpu[g];
	}
	if (gone_rank)
		run->lines.n_gpu = gk;
	free(gone_rank);
	k = 0;
	for (size_t i = 0; i < run->lines.n_val; i++) {
		const rep_val_line *v = &run->lines.val[i];
		if (redone(&run->parts, first, v->line, v->step))
			run->parts.n_superseded_val++;
		else
			run->lines.val[k++] = run->lines.val[i];
	}
	run->lines.n_val = k;
	free(first);
	return 0;
}

/* The ranks a line of rank `rank` at line ln may have: its part's world,
 * else the largest the run had; *why names the source. 0: unknown. */
static int world_for(const rep_run *run, size_t ln, int widest,
		     const char **why)
{
	long pi = part_of(&run->parts, ln);
	if (pi >= 0 && run->parts.list[pi].world) {
		*why = "its part's start line says world";
		return run->parts.list[pi].world;
	}
	*why = run->sum.world ? "summary.json says world" : "the start lines say world";
	return widest;
}

/* Each part is a new process: its first interval per rank holds the
 * start-up (first touches, the loader's first batches, compilation) as
 * the run's first does, and is marked a warm-up. Lines before the first
 * part (logs without start lines) count as one part. */
static int mark_warmups(rep_run *run)
{
	unsigned char *seen = calloc(REP_MAX_RANKS, 1);
	if (!seen)
		return IMS_ENOMEM;
	size_t p = 0; /* parts that start before the current line */
	for (size_t i = 0; i < run->lines.n_train; i++) {
		rep_train_line *l = &run->lines.train[i];
		size_t q = p;
		while (q < run->parts.n && run->parts.list[q].line < l->line)
			q++;
		if (q != p) {
			memset(seen, 0, REP_MAX_RANKS);
			p = q;
		}
		l->warmup = !seen[l->rank];
		seen[l->rank] = 1;
	}
	free(seen);
	return 0;
}

/* Lines of ranks their part (or the run) does not have are dropped,
 * named. */
static int check_ranks(rep_run *run, const char *file, int widest)
{
	size_t k = 0;
	const char *why;
	for (size_t i = 0; i < run->lines.n_train; i++) {
		const rep_train_line *l = &run->lines.train[i];
		int w = world_for(run, l->line, widest, &why);
		if (!w || l->rank < w) {
			run->lines.train[k++] = *l;
			continue;
		}
		FORWARD_IF_ERR(rep_diag_skip(run, file, l->line, "rank %d, but %s %d: line skipped",
					l->rank, why, w));
	}
	run->lines.n_train = k;
	k = 0;
	for (size_t i = 0; i < run->lines.n_gpu; i++) {
		const rep_gpu_line *l = &run->lines.gpu[i];
		int w = world_for(run, l->line, widest, &why);
		if (!w || l->rank < w) {
			run->lines.gpu[k++] = *l;
			continue;
		}
		FORWARD_IF_ERR(rep_diag_skip(run, file, l->line, "rank %d, but %s %d: line skipped",
					l->rank, why, w));
	}
	run->lines.n_gpu = k;
	return 0;
}

/* The lock file's second line: the mark of the job that last trained
 * into the folder, the same in every rank-local --log-dir of that job.
 * The lines carry the run_id only when the run has a --checkpoint-dir. */
static int read_job_mark(rep_run *run, const char *dir)
{
	char path[4200], text[128];
	run->rank_local.job_mark[0] = '\0';
	snprintf(path, sizeof(path), "%s/imshard-train.lock", dir);
	/* ims_fopen_read refuses what is not a regular file without
	 * blocking on it: a FIFO at the lock's name would hang a plain
	 * fopen */
	ims_error e;
	FILE *f = ims_fopen_read(path, &e);
	if (!f && e.code == IMS_ENOTFOUND)
		return 0;
	/* memory running out says nothing of the file: no diagnostic
	 * blaming it on a page that would then pass for complete */
	if (!f && e.code == IMS_ENOMEM)
		return IMS_ENOMEM;
	if (!f)
		return rep_diag(run, path, 0, "%s: the folder's job mark is not read", e.msg);
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	char *nl = strchr(text, '\n');
	if (nl && strspn(nl + 1, "0123456789abcdef") == 16 &&
	    strspn(nl + 1, "0") < 16) {
		memcpy(run->rank_local.job_mark, nl + 1, 16);
		run->rank_local.job_mark[16] = '\0';
	}
	return 0;
}

int rep_parts_settle(rep_run *run, const char *file)
{
	FORWARD_IF_ERR(read_job_mark(run, run->dir));
	FORWARD_IF_ERR(supersede(run));
	/* after superseding: a killed part's first interval that was
	 * trained again is gone with the rest of its replayed lines */
	FORWARD_IF_ERR(mark_warmups(run));
	/* the widest part: summary.json's world is the last part's */
	int widest = run->sum.world;
	for (size_t i = 0; i < run->parts.n; i++)
		if (run->parts.list[i].world > widest)
			widest = run->parts.list[i].world;
	FORWARD_IF_ERR(check_ranks(run, file, widest));
	/* the run's shape is its last part's, as summary.json's */
	int last = run->parts.n ? run->parts.list[run->parts.n - 1].world : 0;
	run->world = run->sum.world ? run->sum.world : last;
	if (!run->world) {
		int hi = -1;
		for (size_t i = 0; i < run->lines.n_train; i++)
			hi = run->lines.train[i].rank > hi ? run->lines.train[i].rank : hi;
		for (size_t i = 0; i < run->lines.n_gpu; i++)
			hi = run->lines.gpu[i].rank > hi ? run->lines.gpu[i].rank : hi;
		run->world = hi + 1 > 0 ? hi + 1 : 1;
	}
	long *id_no = malloc((run->parts.n ? run->parts.n : 1) * sizeof(*id_no));
	long ids = id_no ? number_ids(&run->parts, id_no) : IMS_ENOMEM;
	free(id_no);
	if (ids < 0)
		return IMS_ENOMEM;
	run->parts.n_run_ids = (int)ids;
	/* with the superseded lines gone a resumed run's clock only goes
	 * forward (each part starts it at the checkpoint's train_s) */
	double t = -1;
	for (size_t i = 0; i < run->lines.n_train; i++) {
		const rep_train_line *l = &run->lines.train[i];
		if (l->rank != 0 || isnan(l->wall_s))
			continue;
		if (l->wall_s < t)
			run->parts.wall_goes_back = 1;
		t = l->wall_s;
	}
	return 0;
}
