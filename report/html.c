/*
 * html.c - the report page: one self-contained HTML file (inline SVG and
 * CSS, no script, no URL outside the page) that prints as it shows: the
 * run table, diagnostics, accuracy across runs, each run's charts and
 * tables, the definitions. The scaling section is explain.c's, each run's
 * section html_run.c's.
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
		n += r->runs[i].diags.n_total;
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
		else if (run->diags.n_total) /* not all are skips: each says */
			snprintf(t, sizeof(t), "%zu diagnostic%s", run->diags.n_total,
				 ims_plural(run->diags.n_total, "", "s"));
		else
			snprintf(t, sizeof(t), "complete");
		rb_td(b, 1, t);
		ims_buf_puts(b, "</tr>\n");
	}
	ims_buf_puts(b, "</table>\n<p>Epochs are counted from 1 here (epoch 1 ends at 1.0 on the epoch axes); "
		   "the logs count from 0. train_s is the wall time of training after start-up.</p>\n");
	if (total_diags(r)) {
		/* most are lines left out; some are a file's values (not
		 * drawn, or text shown with \xHH), and each says which */
		ims_buf_puts(b, "<h3 id=\"diagnostics\">Diagnostics</h3>\n<p class=\"note\">These lines "
			   "and values of the run folders could not be used as written: each "
			   "says what was left out of every figure, or how it is shown:</p>\n"
			   "<div class=\"diag\">");
		for (size_t i = 0; i < r->n_runs; i++) {
			const rep_run *run = &r->runs[i];
			for (size_t k = 0; k < run->diags.n; k++) {
				rb_html(b, run->diags.list[k]);
				ims_buf_puts(b, "\n");
			}
			if (run->diags.n_total > run->diags.n) {
				/* the folder's name is the user's: escaped */
				ims_buf_printf(b, "... and %zu more in ",
					  run->diags.n_total - run->diags.n);
				rb_html(b, run->dir);
				ims_buf_puts(b, "\n");
			}
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
		size_t k = run->lines.n_val;
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
			xe[i][v] = run->lines.val[v].epoch + 1.0;
			xt[i][v] = run->lines.val[v].wall_s;
			y[i][v] = 100 * run->lines.val[v].top1;
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

/* ---- definitions ------------------------------------------------------------------- */

static void definitions(ims_buf *b)
{
	ims_buf_puts(b,
		"<section id=\"definitions\">\n<h2>Definitions</h2>\n<dl>\n"
		"<dt>steady speed</dt><dd>A rank's images/s over its logged intervals after the "
		"first, and after each resumed part's first (the warm-up intervals, which hold the "
		"start-up; the run's first is kept when it is the only one): images over seconds, "
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
		rep_html_run(&b, r, i);
	definitions(&b);
	ims_buf_puts(&b, "</body>\n</html>\n");
	*out = ims_buf_take(&b, len);
	RETURN_IF(!*out, err, IMS_ENOMEM, "cannot render the report: out of memory");
	return 0;
}
