/*
 * html_run.c - one run's section of the report page (html.c): its
 * figures, notes, loss and accuracy curves, throughput and time
 * breakdown charts, the rank table, its per-class part (classes.c) and
 * its options.
 */
#define _GNU_SOURCE
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- per-step series of a run ------------------------------------------------ */

/* The run's train lines merged per step (every rank logs the same
 * allreduced loss and accuracy; wall_s differs by the ranks' clocks). */
typedef struct steps_series {
	size_t n;
	double *epoch, *wall, *loss, *acc;
} steps_series;

static int cmp_line_step(const void *a, const void *b)
{
	const rep_train_line *x = *(const rep_train_line *const *)a;
	const rep_train_line *y = *(const rep_train_line *const *)b;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static void steps_free(steps_series *s)
{
	free(s->epoch);
	free(s->wall);
	free(s->loss);
	free(s->acc);
	memset(s, 0, sizeof(*s));
}

static int steps_build(const rep_run *run, const rep_stats *st, steps_series *s)
{
	memset(s, 0, sizeof(*s));
	size_t n = run->lines.n_train;
	if (!n)
		return 0;
	const rep_train_line **l = malloc(n * sizeof(*l));
	s->epoch = malloc(n * sizeof(double));
	s->wall = malloc(n * sizeof(double));
	s->loss = malloc(n * sizeof(double));
	s->acc = malloc(n * sizeof(double));
	if (!l || !s->epoch || !s->wall || !s->loss || !s->acc) {
		free(l);
		steps_free(s);
		return IMS_ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		l[i] = &run->lines.train[i];
	qsort(l, n, sizeof(*l), cmp_line_step);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		double wall = 0, loss = 0, acc = 0;
		for (; j < n && l[j]->step == l[i]->step && l[j]->epoch == l[i]->epoch; j++) {
			wall += l[j]->wall_s;
			loss += l[j]->loss;
			acc += l[j]->accuracy;
		}
		double k = (double)(j - i);
		s->epoch[s->n] = rep_epoch_position(st, l[i]->epoch, l[i]->step);
		s->wall[s->n] = wall / k; /* NAN when any lacks wall_s */
		s->loss[s->n] = loss / k;
		s->acc[s->n] = acc / k;
		s->n++;
		i = j;
	}
	free(l);
	return 0;
}

/* ---- one run ---------------------------------------------------------------------- */

/* A resumed run is one run in parts (its start and resume lines say so):
 * where each part began, and the lines of killed parts that the next one
 * trained again, which no figure counts. */
static void run_parts_notes(ims_buf *b, const rep_run *run)
{
	const rep_parts *ps = &run->parts;
	if (ps->n_run_ids > 1) {
		ims_buf_printf(b, "<li>metrics.jsonl holds the lines of %d runs (start "
			       "lines with different run_id): curves overlap.</li>",
			       ps->n_run_ids);
		return;
	}
	if (ps->n > 1) {
		ims_buf_printf(b, "<li>One run in %zu parts, resumed from its checkpoint",
			       ps->n);
		for (size_t k = 1; k < ps->n; k++) {
			const rep_part *p = &ps->list[k];
			const rep_part *q = &ps->list[k - 1];
			ims_buf_puts(b, k == 1 ? " at" : k + 1 == ps->n ? " and at" : ", at");
			if (p->step >= 0)
				ims_buf_printf(b, " step %lld", (long long)p->step);
			else
				ims_buf_printf(b, " line %zu", p->line);
			if (p->epoch >= 0)
				ims_buf_printf(b, " (epoch %d)", p->epoch + 1);
			int was = p->world_was ? p->world_was : q->world;
			if (was && p->world && was != p->world)
				ims_buf_printf(b, " with %d %s instead of %d", p->world,
					       rep_ranks_word(p->world), was);
		}
		ims_buf_puts(b, ".");
		int worlds = 0;
		for (size_t k = 1; k < ps->n; k++)
			worlds |= ps->list[k].world && ps->list[0].world &&
				  ps->list[k].world != ps->list[0].world;
		if (worlds)
			ims_buf_printf(b, " Per-rank figures are the last part's %d %s; "
				       "the earlier parts' other ranks are in the curves.",
				       run->world, rep_ranks_word(run->world));
		/* a resumed part starts a new process: its first interval
		 * holds start-up work as the run's first does */
		ims_buf_puts(b, " Each resumed part's first interval is a warm-up, left out of "
			     "the steady speed as the run's first is.</li>");
	}
	if (ps->n_superseded + ps->n_superseded_val + ps->n_superseded_gpu) {
		ims_buf_printf(b, "<li>%zu train line%s", ps->n_superseded,
			       ims_plural(ps->n_superseded, "", "s"));
		if (ps->n_superseded_val)
			ims_buf_printf(b, ", %zu val line%s", ps->n_superseded_val,
				       ims_plural(ps->n_superseded_val, "", "s"));
		if (ps->n_superseded_gpu)
			ims_buf_printf(b, ", %zu gpu line%s", ps->n_superseded_gpu,
				       ims_plural(ps->n_superseded_gpu, "", "s"));
		ims_buf_puts(b, " logged after a part's last checkpoint");
		const char *sep = " (";
		for (size_t k = 0; k < ps->n; k++) {
			const rep_part *p = &ps->list[k];
			if (!p->superseded)
				continue;
			ims_buf_printf(b, "%spart %zu: the intervals ending at steps %lld to %lld", sep, k + 1,
				       (long long)p->superseded_lo,
				       (long long)p->superseded_hi);
			sep = "; ";
		}
		ims_buf_puts(b, sep[0] == ';' ? ")" : "");
		ims_buf_puts(b, " were trained again by the next part: its lines replace "
			     "them, and no figure or curve counts them.</li>");
	}
}

/* The ranks of run that have train lines from folder (rep_train_line's;
 * -1: any), as "1, 2" into t. */
static void ranks_with_lines(const rep_run *run, int folder, char *t, size_t len)
{
	size_t at = 0;
	t[0] = '\0';
	for (int k = 0; k < run->world && k < REP_MAX_RANKS && at + 16 < len; k++)
		for (size_t n = 0; n < run->lines.n_train; n++)
			if (run->lines.train[n].rank == k &&
			    (folder < 0 || run->lines.train[n].folder == folder)) {
				at += (size_t)snprintf(t + at, len - at, "%s%d", at ? ", " : "", k);
				break;
			}
}

/* A rank-local --log-dir given beside its run's folder: its lines joined
 * the run (rank_local.c), and the notes say which ranks' lines came from
 * which folder. One that could not join (its ranks are the run's already)
 * and the run are named on each other, so neither stands alone as if it
 * were a run of its own. */
static void rank_local_notes(ims_buf *b, const rep_report *r, size_t i)
{
	const rep_run *run = &r->runs[i];
	char t[200];
	if (run->rank_local.n_merged) {
		ranks_with_lines(run, 0, t, sizeof(t));
		ims_buf_puts(b, "<ul class=\"note\"><li>This run's lines come from more than "
			     "one folder, merged (each folder's superseded lines worked out "
			     "in its own file first):");
		if (t[0])
			ims_buf_printf(b, " rank %s from this folder;", t);
		for (size_t k = 0; k < run->rank_local.n_merged; k++) {
			const rep_merged *m = &run->rank_local.merged[k];
			ranks_with_lines(run, (int)k + 1, t, sizeof(t));
			ims_buf_printf(b, "%s rank %s from its rank-local --log-dir <code>",
				       k ? ";" : "", t);
			rb_html(b, m->dir);
			ims_buf_printf(b, "</code> (%zu train line%s; the same run_id, or job mark)",
				       m->n_train, ims_plural(m->n_train, "", "s"));
		}
		ims_buf_puts(b, ". Their figures are measured from their own lines.</li></ul>\n");
	}
	if (run->rank_local.of_run >= 0) {
		ranks_with_lines(run, -1, t, sizeof(t));
		ims_buf_printf(b, "<ul class=\"note\"><li>This folder is a rank-local "
			       "--log-dir of run <a href=\"#run-%ld\">",
			       run->rank_local.of_run);
		rb_html(b, r->runs[run->rank_local.of_run].label);
		ims_buf_printf(b, "</a> (the same run_id, or job mark): it holds the lines of rank %s "
			       "of that run's %d, not merged (no train lines, or lines "
			       "the run cannot take: ranks it has lines of already, validation, an "
			       "evaluation), so its figures here are those ranks' alone.</li></ul>\n",
			       t, run->world);
	}
	for (size_t j = 0; j < r->n_runs; j++) {
		if (r->runs[j].rank_local.of_run != (long)i)
			continue;
		ranks_with_lines(&r->runs[j], -1, t, sizeof(t));
		ims_buf_printf(b, "<ul class=\"note\"><li>The lines of rank %s of this run "
			       "are in its rank-local --log-dir, shown as run <a href=\"#run-%zu\">",
			       t, j);
		rb_html(b, r->runs[j].label);
		ims_buf_puts(b, "</a>.</li></ul>\n");
	}
}

static void run_notes(ims_buf *b, const rep_run *run, const rep_stats *st)
{
	ims_buf_puts(b, "<ul class=\"note\">");
#define NOTE(...)                                   \
	do {                                        \
		ims_buf_puts(b, "<li>");                 \
		ims_buf_printf(b, __VA_ARGS__);          \
		ims_buf_puts(b, "</li>");                \
	} while (0)
	if (!run->has_summary)
		NOTE("No summary.json: the run did not finish (or is still running). "
		     "What metrics.jsonl holds is shown; train_s, per-rank totals, the "
		     "split of train_s and the options are not known.");
	if (!run->lines.n_train)
		NOTE("No usable train line in metrics.jsonl.");
	if (run->lines.missing & REP_MISSING_STEPS)
		NOTE("Some train lines lack \"steps\" (older logs): each line counts as one "
		     "interval of equal weight, and the split of train_s is not computed.");
	if (run->lines.missing & REP_MISSING_WALL)
		NOTE("Some train lines lack \"wall_s\" (older logs): curves are drawn "
		     "against epoch only, throughput against epoch.");
	if (run->lines.missing & REP_MISSING_VAL_S)
		NOTE("Some val lines lack \"val_s\".");
	run_parts_notes(b, run);
	if (run->parts.wall_goes_back && run->parts.n_run_ids <= 1)
		NOTE("wall_s goes back in metrics.jsonl where no part's start line "
		     "explains it: the file may hold more than one run; curves overlap.");
	/* a rank-local --log-dir holds its ranks' lines elsewhere; the
	 * speed then stands on a guess, which the page must own up to */
	int silent = 0;
	for (int r = 0; r < st->world && run->lines.n_train; r++)
		silent += st->ranks[r].lines == 0;
	if (silent)
		NOTE("%d of %d ranks have no train line in this metrics.jsonl (their "
		     "logs are in another --log-dir, or they died first): each is taken "
		     "to run at the mean steady speed of the others.",
		     silent, st->world);
	if (!st->warmup_excluded && st->world && run->lines.n_train)
		NOTE("Some rank logged a single interval: its warm-up is part of its steady "
		     "speed (log more often with --log-every).");
	if (run->diags.n_total)
		NOTE("%zu diagnostic%s, each saying what was skipped, ignored or shown "
		     "changed (see <a href=\"#diagnostics\">diagnostics</a>).",
		     run->diags.n_total, ims_plural(run->diags.n_total, "", "s"));
#undef NOTE
	ims_buf_puts(b, "</ul>\n");
}

static void run_curves(ims_buf *b, const rep_run *run, size_t i,
		       const steps_series *ss)
{
	size_t nv = run->lines.n_val;
	double *ve = malloc((nv ? nv : 1) * sizeof(double));
	double *vt = malloc((nv ? nv : 1) * sizeof(double));
	double *vl = malloc((nv ? nv : 1) * sizeof(double));
	double *v1 = malloc((nv ? nv : 1) * sizeof(double));
	double *v5 = malloc((nv ? nv : 1) * sizeof(double));
	double *ta = malloc((ss->n ? ss->n : 1) * sizeof(double));
	if (!ve || !vt || !vl || !v1 || !v5 || !ta) {
		b->oom = 1;
		goto out;
	}
	for (size_t v = 0; v < nv; v++) {
		ve[v] = run->lines.val[v].epoch + 1.0;
		vt[v] = run->lines.val[v].wall_s;
		vl[v] = run->lines.val[v].loss;
		v1[v] = 100 * run->lines.val[v].top1;
		v5[v] = 100 * run->lines.val[v].top5;
	}
	for (size_t k = 0; k < ss->n; k++)
		ta[k] = 100 * ss->acc[k];
	int vstyle = SVG_LINE | SVG_MARKERS;
	char id[64];
	svg_series loss_e[2] = {{"training (interval mean)", ss->epoch, ss->loss, ss->n, SVG_LINE, 0},
				{"validation", ve, vl, nv, vstyle, 1}};
	svg_series acc_e[3] = {{"training (interval mean)", ss->epoch, ta, ss->n, SVG_LINE, 0},
			       {"validation top-1", ve, v1, nv, vstyle, 1},
			       {"validation top-5", ve, v5, nv, vstyle, 2}};
	ims_buf_puts(b, "<div class=\"figs\">");
	snprintf(id, sizeof(id), "r%zu-loss-epoch", i);
	svg_chart c1 = {id, "loss-epoch", "Loss against epoch", "epoch", "loss", 0, 1, 0, NAN};
	if (!svg_line_chart(b, &c1, loss_e, 2))
		ims_buf_puts(b, "<p class=\"note\">No loss to draw.</p>");
	snprintf(id, sizeof(id), "r%zu-accuracy-epoch", i);
	svg_chart c2 = {id, "accuracy-epoch", "Accuracy against epoch", "epoch",
			"accuracy (%)", 0, 1, 0, NAN};
	svg_line_chart(b, &c2, acc_e, 3);
	svg_series loss_t[2] = {{"training (interval mean)", ss->wall, ss->loss, ss->n, SVG_LINE, 0},
				{"validation", vt, vl, nv, vstyle, 1}};
	svg_series acc_t[3] = {{"training (interval mean)", ss->wall, ta, ss->n, SVG_LINE, 0},
			       {"validation top-1", vt, v1, nv, vstyle, 1},
			       {"validation top-5", vt, v5, nv, vstyle, 2}};
	snprintf(id, sizeof(id), "r%zu-loss-time", i);
	svg_chart c3 = {id, "loss-time", "Loss against wall time",
			"seconds of training (after start-up)", "loss", 0, 1, 0, NAN};
	size_t drawn = svg_line_chart(b, &c3, loss_t, 2);
	snprintf(id, sizeof(id), "r%zu-accuracy-time", i);
	svg_chart c4 = {id, "accuracy-time", "Accuracy against wall time",
			"seconds of training (after start-up)", "accuracy (%)", 0, 1, 0, NAN};
	drawn += svg_line_chart(b, &c4, acc_t, 3);
	if (!drawn)
		ims_buf_puts(b, "<p class=\"note\">No wall_s in the logs: no curves against time.</p>");
	ims_buf_puts(b, "</div>\n");
out:
	free(ve);
	free(vt);
	free(vl);
	free(v1);
	free(v5);
	free(ta);
}

/* Lines of one rank in step order (indices into run->lines.train). */
static size_t rank_lines(const rep_run *run, int rank, const rep_train_line **out)
{
	size_t k = 0;
	for (size_t i = 0; i < run->lines.n_train; i++)
		if (run->lines.train[i].rank == rank)
			out[k++] = &run->lines.train[i];
	qsort(out, k, sizeof(*out), cmp_line_step);
	return k;
}

#define MAX_RANK_SERIES 8 /* more ranks: mean, min and max over ranks */

/* Where one train line sits on the time (or epoch) axis, its images/s,
 * and its loader stall in percent of the interval's step time (from the
 * rate when the batch is known, else the logged parts stand for the step). */
static void line_point(const rep_train_line *l, const rep_stats *st, int timed,
		       double *x, double *ips, double *stall)
{
	double B = st->batch_per_rank;
	*x = timed ? l->wall_s : rep_epoch_position(st, l->epoch, l->step);
	*ips = l->images_per_s;
	double step = isfinite(B) && l->images_per_s > 0
			      ? 1e3 * B / l->images_per_s
			      : l->data_wait_ms + l->compute_ms + l->comm_ms;
	*stall = step > 0 ? 100 * fmin(l->data_wait_ms / step, 1) : NAN;
}

static void run_throughput(ims_buf *b, const rep_run *run, const rep_stats *st,
			   size_t i)
{
	size_t n = run->lines.n_train;
	if (!n)
		return;
	int W = st->world;
	int timed = !(run->lines.missing & REP_MISSING_WALL);
	int per_rank = W <= MAX_RANK_SERIES;
	const rep_train_line **l = malloc(n * sizeof(*l));
	/* per line; with many ranks, per step: columns 0-2 images/s (mean,
	 * slowest, fastest), 3-4 stall (mean, worst) */
	double *x = malloc(n * sizeof(double));
	double *col[5];
	int ok = l && x;
	for (int k = 0; k < 5; k++)
		ok &= (col[k] = malloc(n * sizeof(double))) != NULL;
	int nser = per_rank ? W : 3;
	svg_series *s = calloc((size_t)nser, sizeof(*s));
	svg_series *sst = calloc((size_t)nser, sizeof(*sst));
	char (*names)[32] = calloc((size_t)nser, sizeof(*names));
	if (!ok || !s || !sst || !names) {
		b->oom = 1;
		goto out;
	}
	size_t ns = 0, nst = 0;
	if (per_rank) {
		size_t at = 0;
		for (int r = 0; r < W; r++) {
			size_t k = rank_lines(run, r, l);
			for (size_t j = 0; j < k; j++)
				line_point(l[j], st, timed, &x[at + j], &col[0][at + j],
					   &col[3][at + j]);
			snprintf(names[r], sizeof(names[r]), "rank %d", r);
			s[r] = (svg_series){names[r], x + at, col[0] + at, k, SVG_LINE, r};
			sst[r] = (svg_series){names[r], x + at, col[3] + at, k, SVG_LINE, r};
			at += k;
		}
		ns = nst = (size_t)W;
	} else {
		/* many ranks: per step, the mean and the extremes over ranks */
		for (size_t j = 0; j < n; j++)
			l[j] = &run->lines.train[j];
		qsort(l, n, sizeof(*l), cmp_line_step);
		size_t m = 0;
		for (size_t j = 0; j < n;) {
			size_t e = j;
			double xs = 0, sum = 0, mn = INFINITY, mx = -INFINITY;
			double ssum = 0, smax = -INFINITY;
			for (; e < n && l[e]->step == l[j]->step; e++) {
				double px, ips, stall;
				line_point(l[e], st, timed, &px, &ips, &stall);
				xs += px;
				sum += ips;
				mn = fmin(mn, ips);
				mx = fmax(mx, ips);
				ssum += stall;
				smax = fmax(smax, stall);
			}
			double k = (double)(e - j);
			x[m] = xs / k;
			col[0][m] = sum / k;
			col[1][m] = mn;
			col[2][m] = mx;
			col[3][m] = ssum / k;
			col[4][m] = smax;
			m++;
			j = e;
		}
		s[0] = (svg_series){"mean over ranks", x, col[0], m, SVG_LINE, 0};
		s[1] = (svg_series){"slowest rank", x, col[1], m, SVG_LINE, 3};
		s[2] = (svg_series){"fastest rank", x, col[2], m, SVG_LINE, 2};
		sst[0] = (svg_series){"mean over ranks", x, col[3], m, SVG_LINE, 0};
		sst[1] = (svg_series){"worst rank", x, col[4], m, SVG_LINE, 3};
		ns = 3;
		nst = 2;
	}
	char id[64];
	ims_buf_puts(b, "<div class=\"figs\">");
	snprintf(id, sizeof(id), "r%zu-throughput", i);
	svg_chart c = {id, "throughput", "Images/s per rank over time",
		       timed ? "seconds of training (after start-up)" : "epoch",
		       "images/s per rank", 0, 1, 0, NAN};
	svg_line_chart(b, &c, s, ns);
	snprintf(id, sizeof(id), "r%zu-stall", i);
	svg_chart c2 = {id, "stall", "Loader stall: data wait / step time",
			timed ? "seconds of training (after start-up)" : "epoch",
			"data wait (% of step)", 0, 1, 0, NAN};
	svg_line_chart(b, &c2, sst, nst);
	ims_buf_puts(b, "</div>\n");
out:
	free(l);
	free(x);
	for (int k = 0; k < 5; k++)
		free(col[k]); /* each set, to memory or NULL */
	free(s);
	free(sst);
	free(names);
}

static void run_breakdown(ims_buf *b, const rep_run *run, const rep_stats *st,
			  size_t i)
{
	int W = st->world;
	double *v = calloc((size_t)W * 3, sizeof(double));
	char (*cat)[16] = calloc((size_t)W, sizeof(*cat));
	const char **cats = calloc((size_t)W, sizeof(char *));
	if (!v || !cat || !cats) {
		b->oom = 1;
		goto out;
	}
	/* totals when known; else steady ms per step */
	int totals = 1;
	for (int r = 0; r < W; r++)
		totals &= isfinite(st->ranks[r].busy_s) && isfinite(st->ranks[r].wait_s) &&
			  isfinite(st->ranks[r].comm_s);
	for (int r = 0; r < W; r++) {
		const rep_rank_stats *rs = &st->ranks[r];
		v[3 * r + 0] = totals ? rs->wait_s : rs->wait_ms;
		v[3 * r + 1] = totals ? rs->busy_s : rs->compute_ms;
		v[3 * r + 2] = totals ? rs->comm_s : rs->comm_ms;
		snprintf(cat[r], sizeof(cat[r]), "rank %d", r);
		cats[r] = cat[r];
	}
	char callout[200] = "", n1[REP_NUM], n2[REP_NUM], n3[REP_NUM];
	if (isfinite(st->busy_ratio))
		snprintf(callout, sizeof(callout),
			 "busy max/min %s: rank %d computed %s, rank %d %s",
			 rep_fmt_n(n1, st->busy_ratio), st->busy_max_rank,
			 rep_fmt_s_n(n2, st->ranks[st->busy_max_rank].busy_s), st->busy_min_rank,
			 rep_fmt_s_n(n3, st->ranks[st->busy_min_rank].busy_s));
	static const char *const seg[3] = {"data wait", "compute", "communication"};
	static const int colors[3] = {1, 0, 3};
	char id[64];
	snprintf(id, sizeof(id), "r%zu-breakdown", i);
	svg_bars bars = {id, "breakdown",
			 totals ? "Step time per rank, whole run" : "Steady step time per rank",
			 totals ? "seconds" : "ms per step", cats, (size_t)W, seg, colors,
			 3, v, callout[0] ? callout : NULL};
	ims_buf_puts(b, "<div class=\"figs\">");
	if (!svg_stacked_bars(b, &bars))
		ims_buf_puts(b, "<p class=\"note\">No step times to draw.</p>");

	/* GPU panels, when the CUDA backend logged them */
	if (run->lines.n_gpu) {
		size_t n = run->lines.n_gpu;
		int keys[32][2], nk = 0, dropped = 0;
		for (size_t k = 0; k < n; k++) {
			int seen = 0;
			for (int j = 0; j < nk; j++)
				seen |= keys[j][0] == run->lines.gpu[k].rank &&
					keys[j][1] == run->lines.gpu[k].device;
			if (!seen && nk < 32) {
				keys[nk][0] = run->lines.gpu[k].rank;
				keys[nk][1] = run->lines.gpu[k].device;
				nk++;
			} else if (!seen)
				dropped = 1;
		}
		double *x = malloc(n * sizeof(double)), *u = malloc(n * sizeof(double));
		double *m = malloc(n * sizeof(double));
		svg_series *su = calloc((size_t)nk, sizeof(*su)), *sm = calloc((size_t)nk, sizeof(*sm));
		char (*names)[40] = calloc((size_t)nk, sizeof(*names));
		if (!x || !u || !m || !su || !sm || !names) {
			b->oom = 1;
		} else {
			size_t at = 0;
			double total = 0;
			for (int j = 0; j < nk; j++) {
				size_t start = at;
				for (size_t k = 0; k < n; k++) {
					const rep_gpu_line *g = &run->lines.gpu[k];
					if (g->rank != keys[j][0] || g->device != keys[j][1])
						continue;
					x[at] = g->wall_s;
					u[at] = g->util;
					m[at++] = g->mem_used_mib;
					if (isfinite(g->mem_total_mib))
						total = fmax(total, g->mem_total_mib);
				}
				snprintf(names[j], sizeof(names[j]), "rank %d GPU %d", keys[j][0],
					 keys[j][1]);
				su[j] = (svg_series){names[j], x + start, u + start, at - start, SVG_LINE, j};
				sm[j] = (svg_series){names[j], x + start, m + start, at - start, SVG_LINE, j};
			}
			snprintf(id, sizeof(id), "r%zu-gpu-util", i);
			svg_chart cu = {id, "gpu-util", "GPU utilisation per GPU",
					"seconds of training (after start-up)", "utilisation (%)",
					0, 1, 0, 100};
			svg_line_chart(b, &cu, su, (size_t)nk);
			snprintf(id, sizeof(id), "r%zu-gpu-mem", i);
			char title[80];
			snprintf(title, sizeof(title), "GPU memory per GPU%s%s%s",
				 total > 0 ? " (of " : "",
				 total > 0 ? rep_fmt(n1, sizeof(n1), total) : "",
				 total > 0 ? " MiB)" : "");
			svg_chart cm = {id, "gpu-mem", title, "seconds of training (after start-up)",
					"memory used (MiB)", 0, 1, 0, total > 0 ? total : NAN};
			svg_line_chart(b, &cm, sm, (size_t)nk);
		}
		if (dropped)
			ims_buf_puts(b, "<p class=\"note\">More than 32 GPUs: the first 32 are drawn.</p>");
		free(x);
		free(u);
		free(m);
		free(su);
		free(sm);
		free(names);
	}
	ims_buf_puts(b, "</div>\n");
out:
	free(v);
	free(cat);
	free(cats);
}

static void rank_table(ims_buf *b, const rep_stats *st)
{
	ims_buf_puts(b, "<table>\n");
	static const char *const cols[] = {
		"rank", "steady images/s", "step ms", "data wait ms", "compute ms",
		"comm ms", "other ms", "busy s (run)", "data wait s (run)", "comm s (run)",
		"data wait / train_s", NULL};
	rb_th_row(b, cols);
	int shown = st->world <= 64 ? st->world : 64;
	for (int r = 0; r < shown; r++) {
		const rep_rank_stats *rs = &st->ranks[r];
		ims_buf_printf(b, "<tr><td>%d</td>", r);
		rb_td_num(b, rs->speed);
		rb_td_num(b, rs->step_ms);
		rb_td_num(b, rs->wait_ms);
		rb_td_num(b, rs->compute_ms);
		rb_td_num(b, rs->comm_ms);
		rb_td_num(b, rs->step_ms - rs->wait_ms - rs->compute_ms - rs->comm_ms);
		rb_td_num(b, rs->busy_s);
		rb_td_num(b, rs->wait_s);
		rb_td_num(b, rs->comm_s);
		rb_td_pct(b, rs->wait_s / st->train_s);
		ims_buf_puts(b, "</tr>\n");
	}
	ims_buf_puts(b, "</table>\n");
	if (shown < st->world)
		ims_buf_printf(b, "<p class=\"note\">The first 64 of %d ranks (all are in ranks.csv).</p>\n",
			  st->world);
}

void rep_html_run(ims_buf *b, const rep_report *r, size_t i)
{
	const rep_run *run = &r->runs[i];
	const rep_stats *st = &r->stats[i];
	const rep_summary *s = &run->sum;
	char n1[REP_NUM], n2[REP_NUM], n3[REP_NUM];
	ims_buf_printf(b, "<section class=\"run\" id=\"run-%zu\">\n<h2>Run ", i);
	rb_html(b, run->label);
	ims_buf_puts(b, "</h2>\n<p>Folder <code>");
	rb_html(b, run->dir);
	ims_buf_printf(b, "</code>: %d %s", st->world, rep_ranks_word(st->world));
	if (run->has_summary) {
		ims_buf_printf(b, " &times; batch %s (global %s), ", rep_fmt_n(n1, st->batch_per_rank),
			  rep_fmt_n(n2, st->global_batch));
		rb_html(b, s->model ? s->model : "?");
		ims_buf_puts(b, " on ");
		rb_html(b, s->device ? s->device : "?");
		ims_buf_printf(b, ", %s thread%s per rank; train_s %s after %s start-up.",
			  rep_fmt_n(n1, s->threads), ims_plural(s->threads == 1 ? 1 : 2, "", "s"), rep_fmt_s_n(n2, st->train_s),
			  rep_fmt_s_n(n3, s->startup_s));
		if (s->init_path) {
			ims_buf_puts(b, " Fine-tuned from <code>");
			rb_html(b, s->init_path);
			ims_buf_puts(b, "</code>.");
		}
	} else
		ims_buf_puts(b, ".");
	ims_buf_printf(b, " %zu train, %zu val and %zu gpu lines.</p>\n", run->lines.n_train,
		  run->lines.n_val, run->lines.n_gpu);
	ims_buf_printf(b, "<p class=\"big\">Steady speed %s images/s per rank (%s in all)",
		  rep_fmt_n(n1, st->speed), rep_fmt_n(n2, st->total_speed));
	if (isfinite(st->final_top1))
		ims_buf_printf(b, "; final validation top-1 %s", rep_fmt_pct_n(n1, st->final_top1));
	if (isfinite(st->stall_fraction))
		ims_buf_printf(b, "; loader stall %s", rep_fmt_pct_n(n1, st->stall_fraction));
	if (isfinite(st->busy_ratio))
		ims_buf_printf(b, "; busy max/min %s", rep_fmt_n(n1, st->busy_ratio));
	ims_buf_puts(b, ".</p>\n");
	run_notes(b, run, st);
	rank_local_notes(b, r, i);

	steps_series ss;
	if (steps_build(run, st, &ss) < 0) {
		b->oom = 1;
		return;
	}
	run_curves(b, run, i, &ss);
	run_throughput(b, run, st, i);
	run_breakdown(b, run, st, i);
	steps_free(&ss);
	rank_table(b, st);
	if (st->has_terms) {
		ims_buf_puts(b, "<p>train_s split (mean over ranks): ");
		for (int k = 0; k < REP_N_TERMS; k++)
			ims_buf_printf(b, "%s%s %s", k ? ", " : "", rep_term_names[k],
				  rep_fmt_s_n(n1, st->terms[k]));
		ims_buf_puts(b, ".</p>\n");
	}
	rep_html_classes(b, run, i);
	if (s->n_options) {
		ims_buf_puts(b, "<h3>Options</h3>\n<table>");
		/* four pairs a row keeps the table short on paper */
		for (size_t k = 0; k < s->n_options; k++) {
			if (k % 4 == 0)
				ims_buf_puts(b, k ? "</tr>\n<tr>" : "<tr>");
			ims_buf_puts(b, "<th class=\"l\">");
			rb_html(b, s->options[k].key);
			ims_buf_puts(b, "</th>");
			rb_td(b, 1, s->options[k].value);
		}
		ims_buf_puts(b, "</tr></table>\n");
	}
	ims_buf_puts(b, "</section>\n");
}
