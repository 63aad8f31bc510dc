/*
 * html.c - the report page: one self-contained HTML file (inline SVG and
 * CSS, no script, no URL outside the page) that prints as it shows: the
 * run table, skipped lines, accuracy across runs, each run's charts and
 * tables, the definitions. The scaling section is explain.c's.
 */
#define _GNU_SOURCE
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char css[] =
	"body{font-family:sans-serif;margin:1.5em auto;max-width:1000px;color:#222;"
	"line-height:1.4;padding:0 1em}"
	"h1{font-size:1.6em;margin-bottom:.2em}"
	"h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}"
	"h3{margin-top:1.4em}h4{margin:.8em 0 .3em}"
	"table{border-collapse:collapse;font-size:.8em;margin:.5em 0;display:block;"
	"overflow-x:auto;max-width:100%}"
	"th,td{border:1px solid #ddd;padding:.2em .4em;text-align:right;vertical-align:top}"
	"th{background:#f4f4f4}.l{text-align:left}"
	".figs{display:flex;flex-wrap:wrap;gap:10px;margin:.6em 0}"
	"svg.chart{max-width:100%;height:auto;border:1px solid #eee}"
	"code{font-size:.85em;word-break:break-all}"
	".note{color:#8a5a00}.diag{font-family:monospace;font-size:.8em;white-space:pre-wrap}"
	".why{background:#f8f8f4;border-left:3px solid #bbb;padding:.2em 1em;margin:.8em 0}"
	".big{font-size:1.15em}"
	"nav a{margin-right:1em}"
	"@media print{body{max-width:none;margin:0;padding:0}nav{display:none}"
	"svg.chart,table,.why{break-inside:avoid}a{color:inherit;text-decoration:none}"
	".figs{gap:2mm}svg.chart{width:48%;height:auto}"
	"h2{break-after:avoid}}"
	"@page{size:A4;margin:12mm}";

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
	size_t n = run->n_train;
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
		l[i] = &run->train[i];
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

/* ---- the page head and the run table ------------------------------------------ */

static void head(ims_buf *b, const rep_report *r)
{
	ims_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
		   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
		   "<meta name=\"generator\" content=\"imshard report " IMS_VERSION_STRING "\">\n<title>");
	rb_html(b, r->title);
	ims_buf_printf(b, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", css);
	rb_html(b, r->title);
	ims_buf_printf(b, "</h1>\n<p>%zu run%s, read from imshard-train's logs by "
		     "<code>imshard report</code> " IMS_VERSION_STRING ".</p>\n<nav>",
		  r->n_runs, ims_plural(r->n_runs, "", "s"));
	ims_buf_puts(b, "<a href=\"#runs\">runs</a>");
	if (r->n_groups)
		ims_buf_puts(b, "<a href=\"#scaling\">scaling</a>");
	if (r->n_runs > 1 || r->opts.target_acc >= 0)
		ims_buf_puts(b, "<a href=\"#accuracy\">accuracy across runs</a>");
	for (size_t i = 0; i < r->n_runs; i++) {
		ims_buf_printf(b, "<a href=\"#run-%zu\">", i);
		rb_html(b, r->runs[i].label);
		ims_buf_puts(b, "</a>");
	}
	ims_buf_puts(b, "<a href=\"#definitions\">definitions</a></nav>\n");
}

static size_t total_diags(const rep_report *r)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n_runs; i++)
		n += r->runs[i].n_diags_total;
	return n;
}

static void runs_table(ims_buf *b, const rep_report *r)
{
	ims_buf_puts(b, "<section id=\"runs\">\n<h2>Runs</h2>\n<table>\n");
	static const char *const cols[] = {
		"run", "ranks", "model", "batch / rank (global)", "epochs", "images",
		"train_s", "start-up", "images/s (all ranks)",
		"steady images/s per rank", "final top-1", "best top-1 (epoch)",
		"loader stall", "busy max/min", "status", NULL};
	rb_th_row(b, cols);
	for (size_t i = 0; i < r->n_runs; i++) {
		const rep_run *run = &r->runs[i];
		const rep_stats *st = &r->stats[i];
		const rep_summary *s = &run->sum;
		char n1[REP_NUM], n2[REP_NUM], t[160];
		ims_buf_printf(b, "<tr><td class=\"l\"><a href=\"#run-%zu\">", i);
		rb_html(b, run->label);
		ims_buf_puts(b, "</a></td>");
		ims_buf_printf(b, "<td>%d</td>", st->world);
		rb_td(b, 1, s->model ? s->model : "?");
		snprintf(t, sizeof(t), "%s (%s)", rep_fmt_n(n1, st->batch_per_rank),
			 rep_fmt_n(n2, st->global_batch));
		rb_td(b, 0, t);
		rb_td_num(b, s->epochs);
		rb_td_num(b, st->images);
		rb_td_s(b, st->train_s);
		rb_td_s(b, s->startup_s);
		rb_td_num(b, s->images_per_s);
		rb_td_num(b, st->speed);
		rb_td_pct(b, st->final_top1);
		snprintf(t, sizeof(t), "%s (%s)", rep_fmt_pct_n(n1, st->best_top1),
			 isfinite(st->best_epoch) ? rep_fmt_n(n2, st->best_epoch + 1) : "n/a");
		rb_td(b, 0, t);
		rb_td_pct(b, st->stall_fraction);
		rb_td_num(b, st->busy_ratio);
		if (!run->has_summary)
			snprintf(t, sizeof(t), "no summary.json: the run did not finish");
		else if (run->n_diags_total)
			snprintf(t, sizeof(t), "%zu line%s skipped", run->n_diags_total,
				 ims_plural(run->n_diags_total, "", "s"));
		else
			snprintf(t, sizeof(t), "complete");
		rb_td(b, 1, t);
		ims_buf_puts(b, "</tr>\n");
	}
	ims_buf_puts(b, "</table>\n<p>Epochs are counted from 1 here (epoch 1 ends at 1.0 on the epoch axes); "
		   "the logs count from 0. train_s is the wall time of training after start-up.</p>\n");
	if (total_diags(r)) {
		ims_buf_puts(b, "<h3 id=\"diagnostics\">Skipped lines</h3>\n<p class=\"note\">These lines "
			   "of the logs could not be used and were left out of every figure:</p>\n"
			   "<div class=\"diag\">");
		for (size_t i = 0; i < r->n_runs; i++) {
			const rep_run *run = &r->runs[i];
			for (size_t k = 0; k < run->n_diags; k++) {
				rb_html(b, run->diags[k]);
				ims_buf_puts(b, "\n");
			}
			if (run->n_diags_total > run->n_diags)
				ims_buf_printf(b, "... and %zu more in %s\n",
					  run->n_diags_total - run->n_diags, run->dir);
		}
		ims_buf_puts(b, "</div>\n");
	}
	ims_buf_puts(b, "</section>\n");
}

/* ---- accuracy across runs ------------------------------------------------------ */

/*
 * A series' n points (x, y) sorted by x, the points at one x merged into
 * their mean y, so that a line never runs back or straight up between
 * two runs at the same x (repeated seeds, runs that differ in threads).
 * Returns the points left; *merged is set when two shared an x.
 */
static size_t by_x(double *x, double *y, size_t n, int *merged)
{
	for (size_t i = 1; i < n; i++) {
		double xi = x[i], yi = y[i];
		size_t j = i;
		for (; j > 0 && x[j - 1] > xi; j--) {
			x[j] = x[j - 1];
			y[j] = y[j - 1];
		}
		x[j] = xi;
		y[j] = yi;
	}
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		size_t e = i;
		double sum = 0;
		for (; e < n && x[e] == x[i]; e++)
			sum += y[e];
		*merged |= e - i > 1;
		x[k] = x[i];
		y[k++] = sum / (double)(e - i);
		i = e;
	}
	return k;
}

static void across(ims_buf *b, const rep_report *r)
{
	size_t n = r->n_runs;
	ims_buf_puts(b, "<section id=\"accuracy\">\n<h2>Accuracy across runs</h2>\n");
	svg_series *se = calloc(n + 1, sizeof(*se)), *st = calloc(n + 1, sizeof(*st));
	double **xe = calloc(n, sizeof(double *)), **xt = calloc(n, sizeof(double *));
	double **y = calloc(n, sizeof(double *));
	char **names = calloc(n, sizeof(char *));
	if (!se || !st || !xe || !xt || !y || !names) {
		b->oom = 1;
		goto out;
	}
	double emax = 1, tmax = 0;
	size_t nt = 0;
	for (size_t i = 0; i < n; i++) {
		const rep_run *run = &r->runs[i];
		size_t k = run->n_val;
		xe[i] = malloc((k ? k : 1) * sizeof(double));
		xt[i] = malloc((k ? k : 1) * sizeof(double));
		y[i] = malloc((k ? k : 1) * sizeof(double));
		if (!xe[i] || !xt[i] || !y[i] ||
		    asprintf(&names[i], "%s (%d %s, batch %g)", run->label,
			     r->stats[i].world, rep_ranks_word(r->stats[i].world),
			     r->stats[i].global_batch) < 0) {
			names[i] = NULL;
			b->oom = 1;
			goto out;
		}
		int timed = 1;
		for (size_t v = 0; v < k; v++) {
			xe[i][v] = run->val[v].epoch + 1.0;
			xt[i][v] = run->val[v].wall_s;
			y[i][v] = 100 * run->val[v].top1;
			emax = fmax(emax, xe[i][v]);
			if (isfinite(xt[i][v]))
				tmax = fmax(tmax, xt[i][v]);
			else
				timed = 0;
		}
		se[i] = (svg_series){names[i], xe[i], y[i], k, SVG_LINE | SVG_MARKERS, (int)i};
		st[nt++] = (svg_series){names[i], xt[i], y[i], timed ? k : 0,
					SVG_LINE | SVG_MARKERS, (int)i};
	}
	double tx[2] = {1, emax}, ty[2], twx[2] = {0, tmax};
	if (r->opts.target_acc >= 0) {
		ty[0] = ty[1] = 100 * r->opts.target_acc;
		se[n] = (svg_series){"target", tx, ty, 2, SVG_LINE | SVG_DASHED, 7};
		st[nt++] = (svg_series){"target", twx, ty, tmax > 0 ? 2 : 0,
					SVG_LINE | SVG_DASHED, 7};
	}
	size_t ns = n + (r->opts.target_acc >= 0);
	ims_buf_puts(b, "<div class=\"figs\">");
	svg_chart c1 = {"all-val-epoch", "val-epoch", "Validation top-1 against epoch",
			"epoch", "top-1 (%)", 0, 0, 1, NAN};
	svg_line_chart(b, &c1, se, ns);
	svg_chart c2 = {"all-val-time", "val-time", "Validation top-1 against wall time",
			"seconds of training (after start-up)", "top-1 (%)", 0, 0, 0, NAN};
	if (!svg_line_chart(b, &c2, st, nt))
		ims_buf_puts(b, "<p class=\"note\">No val line has wall_s: no chart against time.</p>");
	ims_buf_puts(b, "</div>\n");

	/* final accuracy against batch and ranks: one series per world size,
	 * and one per batch per rank */
	int worlds[64], nw = 0;
	double batches[64];
	int nb = 0;
	for (size_t i = 0; i < n; i++) {
		const rep_stats *s = &r->stats[i];
		if (!isfinite(s->final_top1) || !isfinite(s->global_batch))
			continue;
		int seen = 0;
		for (int k = 0; k < nw; k++)
			seen |= worlds[k] == s->world;
		if (!seen && nw < 64)
			worlds[nw++] = s->world;
		seen = 0;
		for (int k = 0; k < nb; k++)
			seen |= batches[k] == s->batch_per_rank;
		if (!seen && nb < 64)
			batches[nb++] = s->batch_per_rank;
	}
	/* [0, n): against batch; [n, 2n): against ranks */
	double *bx = malloc(2 * n * sizeof(double)), *by = malloc(2 * n * sizeof(double));
	svg_series *bs = calloc((size_t)(nw > nb ? nw : nb) + 1, sizeof(*bs));
	char (*lab)[48] = calloc((size_t)(nw > nb ? nw : nb) + 1, sizeof(*lab));
	if (!bx || !by || !bs || !lab) {
		b->oom = 1;
	} else if (n > 1 && nw) {
		ims_buf_puts(b, "<div class=\"figs\">");
		size_t at = 0;
		int repeated = 0;
		for (int k = 0; k < nw; k++) {
			size_t start = at;
			for (size_t i = 0; i < n; i++) {
				const rep_stats *s = &r->stats[i];
				if (s->world != worlds[k] || !isfinite(s->final_top1) ||
				    !isfinite(s->global_batch))
					continue;
				bx[at] = s->global_batch;
				by[at++] = 100 * s->final_top1;
			}
			at = start + by_x(bx + start, by + start, at - start, &repeated);
			snprintf(lab[k], sizeof(lab[k]), "%d %s", worlds[k], rep_ranks_word(worlds[k]));
			bs[k] = (svg_series){lab[k], bx + start, by + start, at - start,
					     SVG_MARKERS | SVG_LINE, k};
		}
		svg_chart c3 = {"all-acc-batch", "acc-batch", "Final top-1 against global batch",
				"global batch", "top-1 (%)", 1, 0, 0, NAN};
		svg_line_chart(b, &c3, bs, (size_t)nw);
		at = 0;
		for (int k = 0; k < nb; k++) {
			size_t start = at;
			for (size_t i = 0; i < n; i++) {
				const rep_stats *s = &r->stats[i];
				if (s->batch_per_rank != batches[k] || !isfinite(s->final_top1))
					continue;
				bx[n + at] = s->world;
				by[n + at++] = 100 * s->final_top1;
			}
			at = start + by_x(bx + n + start, by + n + start, at - start, &repeated);
			snprintf(lab[k], sizeof(lab[k]), "batch %g per rank", batches[k]);
			bs[k] = (svg_series){lab[k], bx + n + start, by + n + start, at - start,
					     SVG_MARKERS | SVG_LINE, k};
		}
		svg_chart c4 = {"all-acc-world", "acc-world", "Final top-1 against ranks",
				"ranks (world size)", "top-1 (%)", 0, 0, 1, NAN};
		svg_line_chart(b, &c4, bs, (size_t)nb);
		ims_buf_puts(b, "</div>\n");
		if (repeated)
			ims_buf_puts(b, "<p class=\"note\">Where several runs share a point "
				   "(repeated seeds, other threads per rank) the two charts "
				   "above draw their mean top-1.</p>\n");
	}
	free(bx);
	free(by);
	free(bs);
	free(lab);

	if (r->opts.target_acc >= 0) {
		char n1[REP_NUM];
		ims_buf_printf(b, "<h3 id=\"target\">Time to %s validation top-1</h3>\n<table>\n",
			  rep_fmt_pct_n(n1, r->opts.target_acc));
		static const char *const cols[] = {"run", "ranks", "global batch", "epochs",
						   "seconds of training", "seconds with start-up",
						   NULL};
		rb_th_row(b, cols);
		for (size_t i = 0; i < n; i++) {
			const rep_stats *s = &r->stats[i];
			ims_buf_puts(b, "<tr><td class=\"l\">");
			rb_html(b, r->runs[i].label);
			ims_buf_printf(b, "</td><td>%d</td>", s->world);
			rb_td_num(b, s->global_batch);
			if (!s->target_reached) {
				char t[96];
				snprintf(t, sizeof(t), "not reached (best %s)",
					 rep_fmt_pct_n(n1, s->best_top1));
				ims_buf_puts(b, "<td class=\"l\" colspan=\"3\">");
				rb_html(b, t);
				ims_buf_puts(b, "</td></tr>\n");
				continue;
			}
			rb_td_num(b, s->target_epochs);
			rb_td_s(b, s->target_wall_s);
			rb_td_s(b, s->target_wall_s + r->runs[i].sum.startup_s);
			ims_buf_puts(b, "</tr>\n");
		}
		ims_buf_puts(b, "</table>\n<p>Reached at the end of the first epoch whose validation top-1 "
			   "is at least the target; the seconds are that validation's wall_s (since "
			   "training started, after start-up).</p>\n");
	}
out:
	for (size_t i = 0; i < n && xe && xt && y && names; i++) {
		free(xe[i]);
		free(xt[i]);
		free(y[i]);
		free(names[i]);
	}
	free(se);
	free(st);
	free(xe);
	free(xt);
	free(y);
	free(names);
	ims_buf_puts(b, "</section>\n");
}

/* ---- one run ---------------------------------------------------------------------- */

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
	if (!run->n_train)
		NOTE("No usable train line in metrics.jsonl.");
	if (run->missing & REP_MISSING_STEPS)
		NOTE("Some train lines lack \"steps\" (older logs): each line counts as one "
		     "interval of equal weight, and the split of train_s is not computed.");
	if (run->missing & REP_MISSING_WALL)
		NOTE("Some train lines lack \"wall_s\" (older logs): curves are drawn "
		     "against epoch only, throughput against epoch.");
	if (run->missing & REP_MISSING_VAL_S)
		NOTE("Some val lines lack \"val_s\".");
	if (run->wall_goes_back)
		NOTE("wall_s goes back in metrics.jsonl: the file holds more than one "
		     "run (resumed into the same --log-dir?); curves overlap.");
	if (!st->warmup_excluded && st->world && run->n_train)
		NOTE("Some rank logged a single interval: its warm-up is part of its steady "
		     "speed (log more often with --log-every).");
	if (run->n_diags_total)
		NOTE("%zu line%s skipped (see <a href=\"#diagnostics\">skipped lines</a>).",
		     run->n_diags_total, ims_plural(run->n_diags_total, "", "s"));
#undef NOTE
	ims_buf_puts(b, "</ul>\n");
}

static void run_curves(ims_buf *b, const rep_run *run, size_t i,
		       const steps_series *ss)
{
	size_t nv = run->n_val;
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
		ve[v] = run->val[v].epoch + 1.0;
		vt[v] = run->val[v].wall_s;
		vl[v] = run->val[v].loss;
		v1[v] = 100 * run->val[v].top1;
		v5[v] = 100 * run->val[v].top5;
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

/* Lines of one rank in step order (indices into run->train). */
static size_t rank_lines(const rep_run *run, int rank, const rep_train_line **out)
{
	size_t k = 0;
	for (size_t i = 0; i < run->n_train; i++)
		if (run->train[i].rank == rank)
			out[k++] = &run->train[i];
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
	size_t n = run->n_train;
	if (!n)
		return;
	int W = st->world;
	int timed = !(run->missing & REP_MISSING_WALL);
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
			l[j] = &run->train[j];
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
	if (run->n_gpu) {
		size_t n = run->n_gpu;
		int keys[32][2], nk = 0, dropped = 0;
		for (size_t k = 0; k < n; k++) {
			int seen = 0;
			for (int j = 0; j < nk; j++)
				seen |= keys[j][0] == run->gpu[k].rank &&
					keys[j][1] == run->gpu[k].device;
			if (!seen && nk < 32) {
				keys[nk][0] = run->gpu[k].rank;
				keys[nk][1] = run->gpu[k].device;
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
					const rep_gpu_line *g = &run->gpu[k];
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

static void run_section(ims_buf *b, const rep_report *r, size_t i)
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
			  rep_fmt_n(n1, s->threads), ims_plural(s->threads, "", "s"), rep_fmt_s_n(n2, st->train_s),
			  rep_fmt_s_n(n3, s->startup_s));
	} else
		ims_buf_puts(b, ".");
	ims_buf_printf(b, " %zu train, %zu val and %zu gpu lines.</p>\n", run->n_train,
		  run->n_val, run->n_gpu);
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

/* ---- definitions ------------------------------------------------------------------- */

static void definitions(ims_buf *b)
{
	ims_buf_puts(b,
		"<section id=\"definitions\">\n<h2>Definitions</h2>\n<dl>\n"
		"<dt>steady speed</dt><dd>A rank's images/s over its logged intervals after the "
		"first (the warm-up interval; kept when it is the only one): images over seconds, "
		"i.e. the steps-weighted harmonic mean of the train lines' images_per_s. A run's "
		"speed is the mean over its ranks.</dd>\n"
		"<dt>speedup_speed</dt><dd>W &times; speed(W) / speed(1): total steady images/s at "
		"W ranks over the 1-rank run's. It sees only training steps.</dd>\n"
		"<dt>speedup_time</dt><dd>train_s(1) / train_s(W), train_s being the wall time of "
		"training after start-up (steps, warm-up, validation, checkpoints). When the runs "
		"trained different numbers of images, per image: (train_s(1) / images(1)) / "
		"(train_s(W) / images(W)).</dd>\n"
		"<dt>efficiency</dt><dd>speedup / W, both ways.</dd>\n"
		"<dt>the split of train_s</dt><dd>Mean over ranks: steady compute, data wait and "
		"communication (the logged per-step times &times; steps), other step time (steady "
		"interval time left over: logging, the loader hand-off), the warm-up interval, "
		"validation (val_s), checkpoints (checkpoint_s) and the rest (train_s minus all "
		"those: epoch starts, gaps between intervals). Periodic checkpoints "
		"(--checkpoint-every) fall inside step intervals and are counted twice, which can "
		"make the rest negative.</dd>\n"
		"<dt>excess</dt><dd>A part's seconds at W ranks minus the 1-rank run's divided by "
		"speedup_speed: what it adds over a run in which everything shrank like the steady "
		"steps. The excesses sum to train_s(W) &minus; train_s(1) / speedup_speed, the gap "
		"between the two speedups.</dd>\n"
		"<dt>scaling groups</dt><dd>Runs are the same job when their summary.json options "
		"agree except world and the options that do not change the work of a step (lr, "
		"lr_peak, seed, epochs, max_steps, momentum, weight_decay, nesterov, warmup_epochs, "
		"schedule, no_lr_scaling, label_smoothing); batch_size is replaced by the batch kept "
		"equal: per rank (weak scaling) or global (strong scaling). A group needs two world "
		"sizes; its baseline is its first 1-rank run.</dd>\n"
		"<dt>busy max/min</dt><dd>The largest over the smallest of the ranks' compute "
		"seconds (busy_s).</dd>\n"
		"<dt>loader stall</dt><dd>Rank 0's data wait over train_s (summary.json's "
		"stall_fraction); in the per-interval chart, data wait over the interval's step "
		"time.</dd>\n"
		"</dl>\n</section>\n");
}

int rep_report_html(const rep_report *r, char **out, size_t *len, ims_error *err)
{
	RETURN_IF(!r->analyzed, err, IMS_EINVAL, "cannot render a report before it is analysed");
	ims_buf b = {0};
	head(&b, r);
	runs_table(&b, r);
	rep_html_scaling(&b, r);
	/* one run has no "across", but the target table still answers */
	if (r->n_runs > 1 || r->opts.target_acc >= 0)
		across(&b, r);
	for (size_t i = 0; i < r->n_runs; i++)
		run_section(&b, r, i);
	definitions(&b);
	ims_buf_puts(&b, "</body>\n</html>\n");
	*out = ims_buf_take(&b, len);
	RETURN_IF(!*out, err, IMS_ENOMEM, "cannot render the report: out of memory");
	return 0;
}
