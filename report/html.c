/*
 * html.c - the report page: one self-contained HTML file (inline SVG and
 * CSS, no script, no URL outside the page) that prints as it shows.
 *
 * Every sentence that interprets numbers is built from the figures of
 * analyze.c, with the numbers in it; the thresholds that pick a wording
 * (when a term "did not shrink", when ranks are "even") are stated where
 * they are used.
 */
#define _GNU_SOURCE
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NUM 48 /* room for one formatted number */

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

/* ---- small helpers ------------------------------------------------------------ */

static void td(rep_buf *b, const char *cls, const char *text)
{
	rb_puts(b, cls ? "<td class=\"l\">" : "<td>");
	rb_html(b, text);
	rb_puts(b, "</td>");
}

static void td_num(rep_buf *b, double v)
{
	char n[NUM];
	td(b, NULL, rep_fmt(n, sizeof(n), v));
}

static void td_s(rep_buf *b, double v)
{
	char n[NUM];
	td(b, NULL, rep_fmt_s(n, sizeof(n), v));
}

static void td_pct(rep_buf *b, double v)
{
	char n[NUM];
	td(b, NULL, rep_fmt_pct(n, sizeof(n), v));
}

static void th_row(rep_buf *b, const char *const *cols)
{
	rb_puts(b, "<tr>");
	for (; *cols; cols++) {
		rb_puts(b, "<th>");
		rb_html(b, *cols);
		rb_puts(b, "</th>");
	}
	rb_puts(b, "</tr>\n");
}

static const char *fmt(char *buf, double v)
{
	return rep_fmt(buf, NUM, v);
}

static const char *fmt_s(char *buf, double v)
{
	return rep_fmt_s(buf, NUM, v);
}

static const char *fmt_pct(char *buf, double v)
{
	return rep_fmt_pct(buf, NUM, v);
}

static const char *ranks_word(int w)
{
	return w == 1 ? "rank" : "ranks";
}

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

static void head(rep_buf *b, const rep_report *r)
{
	rb_puts(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
		   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
		   "<meta name=\"generator\" content=\"imshard report " IMS_VERSION_STRING "\">\n<title>");
	rb_html(b, r->title);
	rb_printf(b, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>", css);
	rb_html(b, r->title);
	rb_printf(b, "</h1>\n<p>%zu run%s, read from imshard-train's logs by "
		     "<code>imshard report</code> " IMS_VERSION_STRING ".</p>\n<nav>",
		  r->n_runs, r->n_runs == 1 ? "" : "s");
	rb_puts(b, "<a href=\"#runs\">runs</a>");
	if (r->n_groups)
		rb_puts(b, "<a href=\"#scaling\">scaling</a>");
	if (r->n_runs > 1 || r->opts.target_acc >= 0)
		rb_puts(b, "<a href=\"#accuracy\">accuracy across runs</a>");
	for (size_t i = 0; i < r->n_runs; i++) {
		rb_printf(b, "<a href=\"#run-%zu\">", i);
		rb_html(b, r->runs[i].label);
		rb_puts(b, "</a>");
	}
	rb_puts(b, "<a href=\"#definitions\">definitions</a></nav>\n");
}

static size_t total_diags(const rep_report *r)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n_runs; i++)
		n += r->runs[i].n_diags_total;
	return n;
}

static void runs_table(rep_buf *b, const rep_report *r)
{
	rb_puts(b, "<section id=\"runs\">\n<h2>Runs</h2>\n<table>\n");
	static const char *const cols[] = {
		"run", "ranks", "model", "batch / rank (global)", "epochs", "images",
		"train_s", "start-up", "images/s (all ranks)",
		"steady images/s per rank", "final top-1", "best top-1 (epoch)",
		"loader stall", "busy max/min", "status", NULL};
	th_row(b, cols);
	for (size_t i = 0; i < r->n_runs; i++) {
		const rep_run *run = &r->runs[i];
		const rep_stats *st = &r->stats[i];
		const rep_summary *s = &run->sum;
		char n1[NUM], n2[NUM], t[160];
		rb_printf(b, "<tr><td class=\"l\"><a href=\"#run-%zu\">", i);
		rb_html(b, run->label);
		rb_puts(b, "</a></td>");
		rb_printf(b, "<td>%d</td>", st->world);
		td(b, "l", s->model ? s->model : "?");
		snprintf(t, sizeof(t), "%s (%s)", fmt(n1, st->batch_per_rank),
			 fmt(n2, st->global_batch));
		td(b, NULL, t);
		td_num(b, s->epochs);
		td_num(b, st->images);
		td_s(b, st->train_s);
		td_s(b, s->startup_s);
		td_num(b, s->images_per_s);
		td_num(b, st->speed);
		td_pct(b, st->final_top1);
		snprintf(t, sizeof(t), "%s (%s)", fmt_pct(n1, st->best_top1),
			 isfinite(st->best_epoch) ? fmt(n2, st->best_epoch + 1) : "n/a");
		td(b, NULL, t);
		td_pct(b, st->stall_fraction);
		td_num(b, st->busy_ratio);
		if (!run->has_summary)
			snprintf(t, sizeof(t), "no summary.json: the run did not finish");
		else if (run->n_diags_total)
			snprintf(t, sizeof(t), "%zu line%s skipped", run->n_diags_total,
				 run->n_diags_total == 1 ? "" : "s");
		else
			snprintf(t, sizeof(t), "complete");
		td(b, "l", t);
		rb_puts(b, "</tr>\n");
	}
	rb_puts(b, "</table>\n<p>Epochs are counted from 1 here (epoch 1 ends at 1.0 on the epoch axes); "
		   "the logs count from 0. train_s is the wall time of training after start-up.</p>\n");
	if (total_diags(r)) {
		rb_puts(b, "<h3 id=\"diagnostics\">Skipped lines</h3>\n<p class=\"note\">These lines "
			   "of the logs could not be used and were left out of every figure:</p>\n"
			   "<div class=\"diag\">");
		for (size_t i = 0; i < r->n_runs; i++) {
			const rep_run *run = &r->runs[i];
			for (size_t k = 0; k < run->n_diags; k++) {
				rb_html(b, run->diags[k]);
				rb_puts(b, "\n");
			}
			if (run->n_diags_total > run->n_diags)
				rb_printf(b, "... and %zu more in %s\n",
					  run->n_diags_total - run->n_diags, run->dir);
		}
		rb_puts(b, "</div>\n");
	}
	rb_puts(b, "</section>\n");
}

/* ---- scaling ------------------------------------------------------------------- */

/* Is this term one that "did not shrink"? A term shrank when the baseline's
 * (per image) is at least 1.15x this run's: smaller changes are within the
 * noise of a shared machine. */
static int shrank(double base, double here)
{
	return here <= 0 || base / here >= 1.15;
}

static void explain_steady(rep_buf *b, const rep_report *r, const rep_group *g,
			   size_t a)
{
	const rep_compare *c = &g->cmp[a];
	const rep_stats *st = &r->stats[g->members[a]];
	const rep_stats *bs = &r->stats[g->baseline];
	char n1[NUM], n2[NUM], n3[NUM], n4[NUM];
	/* one buffer per number of a call: arguments are all formatted first */
	rb_printf(b, "<li><b>Steady steps</b> (speedup_speed): %s images/s per rank "
		     "at %d ranks against %s at 1 rank, ",
		  fmt(n1, st->speed), st->world, fmt(n2, bs->speed));
	rb_printf(b, "so speedup_speed = %d &times; %s / %s = %s, efficiency %s.", st->world,
		  fmt(n1, st->speed), fmt(n2, bs->speed), fmt(n3, c->speedup_speed),
		  fmt(n4, c->eff_speed));
	if (!c->has_per_image) {
		rb_puts(b, " (The step's parts per image need the batch size from summary.json.)</li>\n");
		return;
	}
	double bt = 0, t = 0;
	for (int k = 0; k < 4; k++) {
		bt += c->base_per_image_ms[k];
		t += c->per_image_ms[k];
	}
	static const char *const part[4] = {"data wait", "compute", "communication",
					    "other"};
	rb_printf(b, " Per image, one rank spent %s ms in a steady step at %d ranks and %s ms at 1 rank",
		  fmt(n1, t), st->world, fmt(n2, bt));
	/* the parts by how much they moved, largest first */
	int ord[4] = {0, 1, 2, 3};
	double d[4];
	for (int k = 0; k < 4; k++)
		d[k] = c->per_image_ms[k] - c->base_per_image_ms[k];
	for (int i = 1; i < 4; i++)
		for (int j = i; j > 0 && fabs(d[ord[j]]) > fabs(d[ord[j - 1]]); j--) {
			int tmp = ord[j];
			ord[j] = ord[j - 1];
			ord[j - 1] = tmp;
		}
	rb_puts(b, ":");
	/* a part under 1% of the step at both sizes is left out; under 0.1%
	 * it reads as ~0 (a 1-rank allreduce of a few numbers, say) */
	for (int i = 0, said = 0; i < 4; i++) {
		int k = ord[i];
		double here = c->per_image_ms[k], base = c->base_per_image_ms[k];
		if (fmax(here, base) < 0.01 * fmax(t, bt))
			continue;
		rb_printf(b, "%s %s %s ms (%s at 1 rank, %s%s)", said ? "," : "", part[k],
			  fabs(here) < 1e-3 * t ? "~0" : fmt(n1, here),
			  fabs(base) < 1e-3 * bt ? "~0" : fmt(n2, base),
			  d[k] >= 0 ? "+" : "&minus;", fmt(n3, fabs(d[k])));
		said = 1;
	}
	rb_puts(b, ".");
	double dc = c->base_per_image_ms[1] > 0
			    ? c->per_image_ms[1] / c->base_per_image_ms[1] - 1
			    : NAN;
	if (isfinite(dc) && dc > 0.05) {
		rb_printf(b, " Compute per image rose %s", fmt_pct(n1, dc));
		if (st->batch_per_rank < bs->batch_per_rank)
			rb_printf(b, " (each rank computes a batch of %s instead of %s, and ranks share the machine)",
				  fmt(n2, st->batch_per_rank), fmt(n3, bs->batch_per_rank));
		else
			rb_puts(b, " (the ranks compete for the same cores and memory bandwidth)");
		rb_puts(b, ".");
	}
	rb_puts(b, "</li>\n");
}

static void explain_balance(rep_buf *b, const rep_stats *st, const rep_stats *bs)
{
	char n1[NUM], n2[NUM], n3[NUM];
	if (!isfinite(st->busy_ratio)) {
		rb_puts(b, "<li><b>Rank balance</b>: not known (no per-rank busy times in the logs).</li>\n");
		return;
	}
	double mx = st->ranks[st->busy_max_rank].busy_s;
	double mn = st->ranks[st->busy_min_rank].busy_s;
	double mean = 0, comm = 0;
	for (int r = 0; r < st->world; r++) {
		mean += st->ranks[r].busy_s / st->world;
		comm += st->ranks[r].comm_s / st->world;
	}
	rb_printf(b, "<li><b>Rank balance</b>: compute (busy) time per rank from %s (rank %d) "
		     "to %s (rank %d), max/min %s. ",
		  fmt_s(n1, mn), st->busy_min_rank, fmt_s(n2, mx), st->busy_max_rank,
		  fmt(n3, st->busy_ratio));
	/* within 5% the ranks are as even as timing noise allows */
	if (st->busy_ratio < 1.05)
		rb_puts(b, "The ranks were even: imbalance cost little here.");
	else
		rb_printf(b, "Steps are synchronous, so every rank waits at each allreduce for the "
			     "slowest: about %s per rank went to waiting for rank %d, counted as "
			     "communication.",
			  fmt_s(n1, mx - mean), st->busy_max_rank);
	if (isfinite(comm)) {
		rb_printf(b, " Communication took %s per rank in all (%s of train_s)",
			  fmt_s(n1, comm), fmt_pct(n2, comm / st->train_s));
		if (isfinite(bs->ranks[0].comm_s))
			rb_printf(b, "; %s at 1 rank", fmt_s(n3, bs->ranks[0].comm_s));
		rb_puts(b, ".");
	}
	rb_puts(b, "</li>\n");
}

static void explain_stalls(rep_buf *b, const rep_stats *st, const rep_stats *bs)
{
	char n1[NUM], n2[NUM];
	if (!isfinite(st->stall_fraction))
		return;
	rb_printf(b, "<li><b>Loader stalls</b>: rank 0 waited for data %s of train_s at %d ranks, %s at 1 rank.",
		  fmt_pct(n1, st->stall_fraction), st->world, fmt_pct(n2, bs->stall_fraction));
	/* past 5% the loader, not the model, sets part of the pace */
	if (st->stall_fraction > 0.05)
		rb_puts(b, " The loader did not keep up: more loader threads (--threads) or a "
			   "smaller decode (--resize when packing) would help.");
	rb_puts(b, "</li>\n");
}

static void explain_time(rep_buf *b, const rep_report *r, const rep_group *g,
			 size_t a)
{
	const rep_compare *c = &g->cmp[a];
	const rep_stats *st = &r->stats[g->members[a]];
	const rep_stats *bs = &r->stats[g->baseline];
	char n1[NUM], n2[NUM], n3[NUM], n4[NUM];
	if (!isfinite(c->speedup_time)) {
		rb_puts(b, "<li><b>Wall time</b>: speedup_time needs both runs' summary.json "
			   "(train_s).</li>\n");
		return;
	}
	rb_printf(b, "<li><b>Wall time</b> (speedup_time): train_s %s at 1 rank",
		  fmt_s(n1, bs->train_s));
	if (c->time_per_image)
		rb_printf(b, " for %s images, %s per %s images",
			  fmt(n2, bs->images), fmt_s(n3, bs->train_s * c->images_ratio),
			  fmt(n4, st->images));
	rb_printf(b, ", %s at %d ranks: speedup_time %s, efficiency %s.",
		  fmt_s(n1, st->train_s), st->world, fmt(n2, c->speedup_time),
		  fmt(n3, c->eff_time));
	if (!c->has_terms || !isfinite(c->ideal_s)) {
		rb_puts(b, " (The split of train_s needs steps and batch sizes in the logs.)</li>\n");
		return;
	}
	double extra = st->train_s - c->ideal_s;
	rb_printf(b, " Had every part of train_s shrunk by speedup_speed (%s), this run would "
		     "have taken %s; it took %s, %s %s.",
		  fmt(n1, c->speedup_speed), fmt_s(n2, c->ideal_s), fmt_s(n3, st->train_s),
		  fmt_s(n4, fabs(extra)), extra >= 0 ? "more" : "less");
	/* The gap is the sum of the parts' excesses. The steady parts are
	 * taken together: speedup_speed is their own rate, so only their
	 * sum says something here (their split is the bullet above). */
	double se = 0, sb = 0, sw = 0;
	for (int k = 0; k <= REP_T_OTHER; k++) {
		se += c->excess[k];
		sb += c->base_terms[k];
		sw += c->terms[k];
	}
	int ord[REP_N_TERMS - REP_T_WARMUP];
	int n = 0;
	for (int k = REP_T_WARMUP; k < REP_N_TERMS; k++)
		ord[n++] = k;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && fabs(c->excess[ord[j]]) > fabs(c->excess[ord[j - 1]]); j--) {
			int t = ord[j];
			ord[j] = ord[j - 1];
			ord[j - 1] = t;
		}
	/* under 2% of the gap (and under 1 ms) is not worth a word */
	double small = fmax(0.02 * fabs(extra), 1e-3);
	int said = 0;
	for (int i = 0; i < n; i++) {
		int k = ord[i];
		if (!(fabs(c->excess[k]) >= small))
			continue;
		rb_printf(b, "%s %s %s here, %s at 1 rank (%s): %s%s",
			  said ? ";" : " Outside the steady steps:", rep_term_names[k],
			  fmt_s(n1, c->terms[k]), fmt_s(n2, c->base_terms[k]),
			  c->excess[k] < 0           ? "shrank more than the steps"
			  : shrank(c->base_terms[k], c->terms[k]) ? "shrank less than the steps"
								  : "did not shrink",
			  c->excess[k] >= 0 ? "+" : "&minus;", fmt_s(n3, fabs(c->excess[k])));
		said = 1;
	}
	if (said)
		rb_puts(b, ".");
	else
		rb_puts(b, " Outside the steady steps nothing moved the figure by more than 2%.");
	if (isfinite(c->steady_speedup_time) && fabs(se) >= small) {
		char n5[NUM];
		rb_printf(b, " The steady steps took %s here, %s at 1 rank, a time speedup of %s "
			     "against speedup_speed %s: %s%s",
			  fmt_s(n1, sw), fmt_s(n2, sb), fmt(n3, c->steady_speedup_time),
			  fmt(n4, c->speedup_speed), se >= 0 ? "+" : "&minus;", fmt_s(n5, fabs(se)));
		/* speed is per image, the steady time leaves out each run's
		 * first interval, which holds more of a rank's images at W */
		rb_puts(b, " (the warm-up intervals left out of both hold different shares of "
			   "the runs' images).");
	}
	rb_printf(b, " Hence speedup_time %s %s speedup_speed %s.</li>\n",
		  fmt(n1, c->speedup_time),
		  c->speedup_time < c->speedup_speed - 0.005   ? "&lt;"
		  : c->speedup_time > c->speedup_speed + 0.005 ? "&gt;"
							       : "&asymp;",
		  fmt(n2, c->speedup_speed));
}

/* One row of the terms table. */
static void term_row(rep_buf *b, const char *name, int sub, double base,
		     double here, double ideal, double excess)
{
	rb_puts(b, sub ? "<tr><td class=\"l\">&nbsp;&nbsp;&nbsp;" : "<tr><th class=\"l\">");
	rb_html(b, name);
	rb_puts(b, sub ? "</td>" : "</th>");
	td_s(b, base);
	td_s(b, here);
	td_s(b, ideal);
	td_s(b, excess);
	rb_puts(b, "</tr>\n");
}

static void terms_table(rep_buf *b, const rep_compare *c, int world)
{
	if (!c->has_terms)
		return;
	rb_printf(b, "<table><tr><th class=\"l\">part of train_s</th><th>1 rank%s</th><th>%d ranks</th>"
		     "<th>ideal (1 rank / speedup_speed)</th><th>excess</th></tr>\n",
		  c->time_per_image ? " (per image, scaled)" : "", world);
	double tot[4] = {0, 0, 0, 0}, steady[4] = {0, 0, 0, 0};
	for (int k = 0; k < REP_N_TERMS; k++) {
		double v[4] = {c->base_terms[k], c->terms[k],
			       c->base_terms[k] / c->speedup_speed, c->excess[k]};
		for (int i = 0; i < 4; i++) {
			tot[i] += v[i];
			if (k <= REP_T_OTHER)
				steady[i] += v[i];
		}
	}
	term_row(b, "steady steps", 0, steady[0], steady[1], steady[2], steady[3]);
	for (int k = 0; k < REP_N_TERMS; k++) {
		if (k == REP_T_WARMUP)
			rb_puts(b, "<tr><th class=\"l\" colspan=\"5\">outside the steady steps</th></tr>\n");
		term_row(b, rep_term_names[k], 1, c->base_terms[k], c->terms[k],
			 c->base_terms[k] / c->speedup_speed, c->excess[k]);
	}
	term_row(b, "train_s", 0, tot[0], tot[1], tot[2], tot[3]);
	rb_puts(b, "</table>\n");
}

static void group_charts(rep_buf *b, const rep_report *r, const rep_group *g,
			 size_t gi)
{
	size_t n = g->n_members;
	double *w = malloc(n * sizeof(double));
	double *ss = malloc(n * sizeof(double)), *stt = malloc(n * sizeof(double));
	double *es = malloc(n * sizeof(double)), *et = malloc(n * sizeof(double));
	double *vals = calloc(n * REP_N_TERMS, sizeof(double));
	const char **cats = calloc(n, sizeof(char *));
	char **catbuf = calloc(n, sizeof(char *));
	if (!w || !ss || !stt || !es || !et || !vals || !cats || !catbuf) {
		b->oom = 1;
		goto out;
	}
	double wmax = 1;
	for (size_t a = 0; a < n; a++) {
		w[a] = r->stats[g->members[a]].world;
		wmax = fmax(wmax, w[a]);
		ss[a] = g->cmp[a].speedup_speed;
		stt[a] = g->cmp[a].speedup_time;
		es[a] = g->cmp[a].eff_speed;
		et[a] = g->cmp[a].eff_time;
	}
	double ix[2] = {1, wmax}, iy[2] = {1, wmax}, ey[2] = {1, 1};
	int xlog = wmax > 8;
	char id[64];
	rb_puts(b, "<div class=\"figs\">");
	svg_series sp[3] = {
		{"throughput-based (speed)", w, ss, n, SVG_LINE | SVG_MARKERS, 0},
		{"wall-time-based (time)", w, stt, n, SVG_LINE | SVG_MARKERS, 1},
		{"ideal", ix, iy, 2, SVG_LINE | SVG_DASHED, 7}};
	snprintf(id, sizeof(id), "g%zu-speedup", gi);
	svg_chart c1 = {id, "speedup", "Speedup against ranks", "ranks (world size)",
			"speedup over 1 rank", xlog, 1, !xlog, NAN};
	svg_line_chart(b, &c1, sp, 3);
	svg_series ep[3] = {
		{"throughput-based (speed)", w, es, n, SVG_LINE | SVG_MARKERS, 0},
		{"wall-time-based (time)", w, et, n, SVG_LINE | SVG_MARKERS, 1},
		{"ideal", ix, ey, 2, SVG_LINE | SVG_DASHED, 7}};
	snprintf(id, sizeof(id), "g%zu-efficiency", gi);
	svg_chart c2 = {id, "efficiency", "Efficiency against ranks", "ranks (world size)",
			"efficiency (speedup / ranks)", xlog, 1, !xlog, 1.0};
	svg_line_chart(b, &c2, ep, 3);
	/* where each run's train_s went */
	int any = 0;
	for (size_t a = 0; a < n; a++) {
		const rep_stats *st = &r->stats[g->members[a]];
		if (asprintf(&catbuf[a], "%s (%d)", r->runs[g->members[a]].label, st->world) < 0) {
			catbuf[a] = NULL;
			b->oom = 1;
			goto out;
		}
		cats[a] = catbuf[a];
		for (int k = 0; k < REP_N_TERMS; k++)
			vals[a * REP_N_TERMS + k] = st->has_terms ? st->terms[k] : NAN;
		any |= st->has_terms;
	}
	if (any) {
		static const int colors[REP_N_TERMS] = {0, 1, 3, 7, 4, 2, 5, 8};
		snprintf(id, sizeof(id), "g%zu-decomposition", gi);
		svg_bars bars = {id, "decomposition", "Where train_s went (mean over ranks)",
				 "seconds", cats, n, rep_term_names, colors, REP_N_TERMS,
				 vals, NULL};
		svg_stacked_bars(b, &bars);
	}
	rb_puts(b, "</div>\n");
out:
	if (catbuf)
		for (size_t a = 0; a < n; a++)
			free(catbuf[a]);
	free(catbuf);
	free(cats);
	free(vals);
	free(w);
	free(ss);
	free(stt);
	free(es);
	free(et);
}

static void group_section(rep_buf *b, const rep_report *r, const rep_group *g,
			  size_t gi)
{
	char n1[NUM], n2[NUM], n3[NUM];
	rb_printf(b, "<h3 id=\"group-%zu\">%s</h3>\n<p>Runs that share <code>", gi,
		  g->mode == REP_SCALE_RANK_BATCH ? "Scaling at the same batch per rank"
						  : "Scaling at the same global batch");
	rb_html(b, g->key);
	rb_puts(b, "</code>.");
	if (g->baseline < 0) {
		rb_puts(b, " <span class=\"note\">No 1-rank run of this job: no speedup can be "
			   "computed. Add a run with the same options on one rank.</span></p>\n");
	} else {
		rb_puts(b, " Baseline: <b>");
		rb_html(b, r->runs[g->baseline].label);
		rb_puts(b, "</b> (1 rank).</p>\n");
	}
	int multi_base = 0;
	for (size_t a = 0; a < g->n_members; a++)
		multi_base += r->stats[g->members[a]].world == 1;
	if (multi_base > 1)
		rb_puts(b, "<p class=\"note\">More than one 1-rank run: the first one given is the "
			   "baseline.</p>\n");
	rb_puts(b, "<table>\n");
	static const char *const cols[] = {
		"run", "ranks", "batch / rank", "global batch", "images", "train_s",
		"steady images/s per rank", "total steady images/s", "speedup_speed",
		"efficiency (speed)", "speedup_time", "efficiency (time)", NULL};
	th_row(b, cols);
	int per_image = 0;
	for (size_t a = 0; a < g->n_members; a++) {
		const rep_stats *st = &r->stats[g->members[a]];
		const rep_compare *c = &g->cmp[a];
		per_image |= c->time_per_image;
		rb_puts(b, "<tr><td class=\"l\">");
		rb_html(b, r->runs[g->members[a]].label);
		rb_printf(b, "</td><td>%d</td>", st->world);
		td_num(b, st->batch_per_rank);
		td_num(b, st->global_batch);
		td_num(b, st->images);
		td_s(b, st->train_s);
		td_num(b, st->speed);
		td_num(b, st->total_speed);
		td_num(b, c->speedup_speed);
		td_num(b, c->eff_speed);
		td_num(b, c->speedup_time);
		td_num(b, c->eff_time);
		rb_puts(b, "</tr>\n");
	}
	rb_puts(b, "</table>\n");
	if (per_image)
		rb_puts(b, "<p class=\"note\">These runs trained different numbers of images, so "
			   "speedup_time compares time per image: train_s(1) / images(1) over "
			   "train_s(W) / images(W).</p>\n");
	if (g->baseline < 0)
		return;
	group_charts(b, r, g, gi);
	const rep_stats *bs = &r->stats[g->baseline];
	for (size_t a = 0; a < g->n_members; a++) {
		if ((long)g->members[a] == g->baseline || r->stats[g->members[a]].world == 1)
			continue;
		const rep_stats *st = &r->stats[g->members[a]];
		const rep_compare *c = &g->cmp[a];
		rb_puts(b, "<div class=\"why\"><h4>Why ");
		rb_html(b, r->runs[g->members[a]].label);
		rb_printf(b, " (%d ranks) has speedup_speed %s", st->world,
			  fmt(n1, c->speedup_speed));
		rb_printf(b, " and speedup_time %s</h4>\n", fmt(n1, c->speedup_time));
		if (c->time_per_image)
			rb_printf(b, "<p>It trained %s images and the baseline %s: the baseline's "
				     "times below are scaled by %s to the same images.</p>\n",
				  fmt(n1, st->images), fmt(n2, bs->images),
				  fmt(n3, c->images_ratio));
		rb_puts(b, "<ul>\n");
		explain_steady(b, r, g, a);
		explain_balance(b, st, bs);
		explain_stalls(b, st, bs);
		explain_time(b, r, g, a);
		rb_puts(b, "</ul>\n");
		terms_table(b, c, st->world);
		rb_puts(b, "</div>\n");
	}
}

static void scaling(rep_buf *b, const rep_report *r)
{
	if (!r->n_groups) {
		if (r->n_runs > 1)
			rb_puts(b, "<section id=\"scaling\"><h2>Scaling</h2><p class=\"note\">No two runs "
				   "are the same job at different world sizes (same options but world, "
				   "and a summary.json each), so there is no speedup to show. See "
				   "<a href=\"#definitions\">definitions</a>.</p></section>\n");
		return;
	}
	rb_puts(b, "<section id=\"scaling\">\n<h2>Scaling</h2>\n<p>Speedup and efficiency against the "
		   "number of ranks, both ways: <b>speedup_speed</b> = W &times; steady images/s per rank "
		   "at W / that at 1 rank (steps only), and <b>speedup_time</b> = train_s(1) / "
		   "train_s(W) (all of training after start-up: steps, warm-up, validation, "
		   "checkpoints). Efficiency = speedup / W. Below each group, the difference is "
		   "taken apart from the logged times.</p>\n");
	for (size_t i = 0; i < r->n_groups; i++)
		group_section(b, r, &r->groups[i], i);
	rb_puts(b, "</section>\n");
}

/* ---- accuracy across runs ------------------------------------------------------ */

static void across(rep_buf *b, const rep_report *r)
{
	size_t n = r->n_runs;
	rb_puts(b, "<section id=\"accuracy\">\n<h2>Accuracy across runs</h2>\n");
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
			     r->stats[i].world, ranks_word(r->stats[i].world),
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
	rb_puts(b, "<div class=\"figs\">");
	svg_chart c1 = {"all-val-epoch", "val-epoch", "Validation top-1 against epoch",
			"epoch", "top-1 (%)", 0, 0, 1, NAN};
	svg_line_chart(b, &c1, se, ns);
	svg_chart c2 = {"all-val-time", "val-time", "Validation top-1 against wall time",
			"seconds of training (after start-up)", "top-1 (%)", 0, 0, 0, NAN};
	if (!svg_line_chart(b, &c2, st, nt))
		rb_puts(b, "<p class=\"note\">No val line has wall_s: no chart against time.</p>");
	rb_puts(b, "</div>\n");

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
		rb_puts(b, "<div class=\"figs\">");
		size_t at = 0;
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
			snprintf(lab[k], sizeof(lab[k]), "%d %s", worlds[k], ranks_word(worlds[k]));
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
			snprintf(lab[k], sizeof(lab[k]), "batch %g per rank", batches[k]);
			bs[k] = (svg_series){lab[k], bx + n + start, by + n + start, at - start,
					     SVG_MARKERS | SVG_LINE, k};
		}
		svg_chart c4 = {"all-acc-world", "acc-world", "Final top-1 against ranks",
				"ranks (world size)", "top-1 (%)", 0, 0, 1, NAN};
		svg_line_chart(b, &c4, bs, (size_t)nb);
		rb_puts(b, "</div>\n");
	}
	free(bx);
	free(by);
	free(bs);
	free(lab);

	if (r->opts.target_acc >= 0) {
		char n1[NUM];
		rb_printf(b, "<h3 id=\"target\">Time to %s validation top-1</h3>\n<table>\n",
			  fmt_pct(n1, r->opts.target_acc));
		static const char *const cols[] = {"run", "ranks", "global batch", "epochs",
						   "seconds of training", "seconds with start-up",
						   NULL};
		th_row(b, cols);
		for (size_t i = 0; i < n; i++) {
			const rep_stats *s = &r->stats[i];
			rb_puts(b, "<tr><td class=\"l\">");
			rb_html(b, r->runs[i].label);
			rb_printf(b, "</td><td>%d</td>", s->world);
			td_num(b, s->global_batch);
			if (!s->target_reached) {
				char t[96];
				snprintf(t, sizeof(t), "not reached (best %s)",
					 fmt_pct(n1, s->best_top1));
				rb_puts(b, "<td class=\"l\" colspan=\"3\">");
				rb_html(b, t);
				rb_puts(b, "</td></tr>\n");
				continue;
			}
			td_num(b, s->target_epochs);
			td_s(b, s->target_wall_s);
			td_s(b, s->target_wall_s + r->runs[i].sum.startup_s);
			rb_puts(b, "</tr>\n");
		}
		rb_puts(b, "</table>\n<p>Reached at the end of the first epoch whose validation top-1 "
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
	rb_puts(b, "</section>\n");
}

/* ---- one run ---------------------------------------------------------------------- */

static void run_notes(rep_buf *b, const rep_run *run, const rep_stats *st)
{
	rb_puts(b, "<ul class=\"note\">");
#define NOTE(...)                                   \
	do {                                        \
		rb_puts(b, "<li>");                 \
		rb_printf(b, __VA_ARGS__);          \
		rb_puts(b, "</li>");                \
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
		     run->n_diags_total, run->n_diags_total == 1 ? "" : "s");
#undef NOTE
	rb_puts(b, "</ul>\n");
}

static void run_curves(rep_buf *b, const rep_run *run, size_t i,
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
	rb_puts(b, "<div class=\"figs\">");
	snprintf(id, sizeof(id), "r%zu-loss-epoch", i);
	svg_chart c1 = {id, "loss-epoch", "Loss against epoch", "epoch", "loss", 0, 1, 0, NAN};
	if (!svg_line_chart(b, &c1, loss_e, 2))
		rb_puts(b, "<p class=\"note\">No loss to draw.</p>");
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
		rb_puts(b, "<p class=\"note\">No wall_s in the logs: no curves against time.</p>");
	rb_puts(b, "</div>\n");
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

static void run_throughput(rep_buf *b, const rep_run *run, const rep_stats *st,
			   size_t i)
{
	size_t n = run->n_train;
	if (!n)
		return;
	int W = st->world;
	int timed = !(run->missing & REP_MISSING_WALL);
	const rep_train_line **l = malloc(n * sizeof(*l));
	double *x = malloc(n * sizeof(double)), *y = malloc(n * sizeof(double));
	double *stall = malloc(n * sizeof(double));
	int nser = W <= MAX_RANK_SERIES ? W : 3;
	svg_series *s = calloc((size_t)nser, sizeof(*s));
	svg_series *sst = calloc((size_t)nser, sizeof(*sst));
	char (*names)[32] = calloc((size_t)nser, sizeof(*names));
	if (!l || !x || !y || !stall || !s || !sst || !names) {
		b->oom = 1;
		goto out;
	}
	double B = st->batch_per_rank;
	if (W <= MAX_RANK_SERIES) {
		size_t at = 0;
		for (int r = 0; r < W; r++) {
			size_t k = rank_lines(run, r, l);
			for (size_t j = 0; j < k; j++) {
				x[at + j] = timed ? l[j]->wall_s
						  : rep_epoch_position(st, l[j]->epoch, l[j]->step);
				y[at + j] = l[j]->images_per_s;
				/* the interval's step time: from the rate when the batch
				 * is known, else the logged parts stand for it */
				double step = isfinite(B) && l[j]->images_per_s > 0
						      ? 1e3 * B / l[j]->images_per_s
						      : l[j]->data_wait_ms + l[j]->compute_ms +
								l[j]->comm_ms;
				stall[at + j] = step > 0 ? 100 * fmin(l[j]->data_wait_ms / step, 1) : NAN;
			}
			snprintf(names[r], sizeof(names[r]), "rank %d", r);
			s[r] = (svg_series){names[r], x + at, y + at, k, SVG_LINE, r};
			sst[r] = (svg_series){names[r], x + at, stall + at, k, SVG_LINE, r};
			at += k;
		}
	} else {
		/* many ranks: per step, the mean, slowest and fastest rank */
		for (size_t j = 0; j < n; j++)
			l[j] = &run->train[j];
		qsort(l, n, sizeof(*l), cmp_line_step);
		size_t m = 0;
		/* x, y and stall hold the mean, slowest and fastest here */
		double *mean = x, *lo = y, *hi = stall;
		double *xs = malloc(n * sizeof(double));
		if (!xs) {
			b->oom = 1;
			goto out;
		}
		for (size_t j = 0; j < n;) {
			size_t e = j;
			double sum = 0, mn = INFINITY, mx = -INFINITY, xsum = 0;
			for (; e < n && l[e]->step == l[j]->step; e++) {
				sum += l[e]->images_per_s;
				mn = fmin(mn, l[e]->images_per_s);
				mx = fmax(mx, l[e]->images_per_s);
				xsum += timed ? l[e]->wall_s
					      : rep_epoch_position(st, l[e]->epoch, l[e]->step);
			}
			xs[m] = xsum / (double)(e - j);
			mean[m] = sum / (double)(e - j);
			lo[m] = mn;
			hi[m] = mx;
			m++;
			j = e;
		}
		char id[64];
		snprintf(id, sizeof(id), "r%zu-throughput", i);
		svg_series agg[3] = {{"mean over ranks", xs, mean, m, SVG_LINE, 0},
				     {"slowest rank", xs, lo, m, SVG_LINE, 3},
				     {"fastest rank", xs, hi, m, SVG_LINE, 2}};
		svg_chart c = {id, "throughput", "Images/s per rank over time",
			       timed ? "seconds of training (after start-up)" : "epoch",
			       "images/s per rank", 0, 1, 0, NAN};
		rb_puts(b, "<div class=\"figs\">");
		svg_line_chart(b, &c, agg, 3);
		rb_puts(b, "</div>\n");
		free(xs);
		goto out;
	}
	char id[64];
	rb_puts(b, "<div class=\"figs\">");
	snprintf(id, sizeof(id), "r%zu-throughput", i);
	svg_chart c = {id, "throughput", "Images/s per rank over time",
		       timed ? "seconds of training (after start-up)" : "epoch",
		       "images/s per rank", 0, 1, 0, NAN};
	svg_line_chart(b, &c, s, (size_t)W);
	snprintf(id, sizeof(id), "r%zu-stall", i);
	svg_chart c2 = {id, "stall", "Loader stall: data wait / step time",
			timed ? "seconds of training (after start-up)" : "epoch",
			"data wait (% of step)", 0, 1, 0, NAN};
	svg_line_chart(b, &c2, sst, (size_t)W);
	rb_puts(b, "</div>\n");
out:
	free(l);
	free(x);
	free(y);
	free(stall);
	free(s);
	free(sst);
	free(names);
}

static void run_breakdown(rep_buf *b, const rep_run *run, const rep_stats *st,
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
	char callout[200] = "", n1[NUM], n2[NUM], n3[NUM];
	if (isfinite(st->busy_ratio))
		snprintf(callout, sizeof(callout),
			 "busy max/min %s: rank %d computed %s, rank %d %s",
			 fmt(n1, st->busy_ratio), st->busy_max_rank,
			 fmt_s(n2, st->ranks[st->busy_max_rank].busy_s), st->busy_min_rank,
			 fmt_s(n3, st->ranks[st->busy_min_rank].busy_s));
	static const char *const seg[3] = {"data wait", "compute", "communication"};
	static const int colors[3] = {1, 0, 3};
	char id[64];
	snprintf(id, sizeof(id), "r%zu-breakdown", i);
	svg_bars bars = {id, "breakdown",
			 totals ? "Step time per rank, whole run" : "Steady step time per rank",
			 totals ? "seconds" : "ms per step", cats, (size_t)W, seg, colors,
			 3, v, callout[0] ? callout : NULL};
	rb_puts(b, "<div class=\"figs\">");
	if (!svg_stacked_bars(b, &bars))
		rb_puts(b, "<p class=\"note\">No step times to draw.</p>");

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
			rb_puts(b, "<p class=\"note\">More than 32 GPUs: the first 32 are drawn.</p>");
		free(x);
		free(u);
		free(m);
		free(su);
		free(sm);
		free(names);
	}
	rb_puts(b, "</div>\n");
out:
	free(v);
	free(cat);
	free(cats);
}

static void rank_table(rep_buf *b, const rep_stats *st)
{
	rb_puts(b, "<table>\n");
	static const char *const cols[] = {
		"rank", "steady images/s", "step ms", "data wait ms", "compute ms",
		"comm ms", "other ms", "busy s (run)", "data wait s (run)", "comm s (run)",
		"data wait / train_s", NULL};
	th_row(b, cols);
	int shown = st->world <= 64 ? st->world : 64;
	for (int r = 0; r < shown; r++) {
		const rep_rank_stats *rs = &st->ranks[r];
		rb_printf(b, "<tr><td>%d</td>", r);
		td_num(b, rs->speed);
		td_num(b, rs->step_ms);
		td_num(b, rs->wait_ms);
		td_num(b, rs->compute_ms);
		td_num(b, rs->comm_ms);
		td_num(b, rs->step_ms - rs->wait_ms - rs->compute_ms - rs->comm_ms);
		td_num(b, rs->busy_s);
		td_num(b, rs->wait_s);
		td_num(b, rs->comm_s);
		td_pct(b, rs->wait_s / st->train_s);
		rb_puts(b, "</tr>\n");
	}
	rb_puts(b, "</table>\n");
	if (shown < st->world)
		rb_printf(b, "<p class=\"note\">The first 64 of %d ranks (all are in ranks.csv).</p>\n",
			  st->world);
}

static void run_section(rep_buf *b, const rep_report *r, size_t i)
{
	const rep_run *run = &r->runs[i];
	const rep_stats *st = &r->stats[i];
	const rep_summary *s = &run->sum;
	char n1[NUM], n2[NUM], n3[NUM];
	rb_printf(b, "<section class=\"run\" id=\"run-%zu\">\n<h2>Run ", i);
	rb_html(b, run->label);
	rb_puts(b, "</h2>\n<p>Folder <code>");
	rb_html(b, run->dir);
	rb_printf(b, "</code>: %d %s", st->world, ranks_word(st->world));
	if (run->has_summary) {
		rb_printf(b, " &times; batch %s (global %s), ", fmt(n1, st->batch_per_rank),
			  fmt(n2, st->global_batch));
		rb_html(b, s->model ? s->model : "?");
		rb_puts(b, " on ");
		rb_html(b, s->device ? s->device : "?");
		rb_printf(b, ", %s thread%s per rank; train_s %s after %s start-up.",
			  fmt(n1, s->threads), s->threads == 1 ? "" : "s", fmt_s(n2, st->train_s),
			  fmt_s(n3, s->startup_s));
	} else
		rb_puts(b, ".");
	rb_printf(b, " %zu train, %zu val and %zu gpu lines.</p>\n", run->n_train,
		  run->n_val, run->n_gpu);
	rb_printf(b, "<p class=\"big\">Steady speed %s images/s per rank (%s in all)",
		  fmt(n1, st->speed), fmt(n2, st->total_speed));
	if (isfinite(st->final_top1))
		rb_printf(b, "; final validation top-1 %s", fmt_pct(n1, st->final_top1));
	if (isfinite(st->stall_fraction))
		rb_printf(b, "; loader stall %s", fmt_pct(n1, st->stall_fraction));
	if (isfinite(st->busy_ratio))
		rb_printf(b, "; busy max/min %s", fmt(n1, st->busy_ratio));
	rb_puts(b, ".</p>\n");
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
		rb_puts(b, "<p>train_s split (mean over ranks): ");
		for (int k = 0; k < REP_N_TERMS; k++)
			rb_printf(b, "%s%s %s", k ? ", " : "", rep_term_names[k],
				  fmt_s(n1, st->terms[k]));
		rb_puts(b, ".</p>\n");
	}
	if (s->n_options) {
		rb_puts(b, "<h3>Options</h3>\n<table>");
		/* four pairs a row keeps the table short on paper */
		for (size_t k = 0; k < s->n_options; k++) {
			if (k % 4 == 0)
				rb_puts(b, k ? "</tr>\n<tr>" : "<tr>");
			rb_puts(b, "<th class=\"l\">");
			rb_html(b, s->options[k].key);
			rb_puts(b, "</th>");
			td(b, "l", s->options[k].value);
		}
		rb_puts(b, "</tr></table>\n");
	}
	rb_puts(b, "</section>\n");
}

/* ---- definitions ------------------------------------------------------------------- */

static void definitions(rep_buf *b)
{
	rb_puts(b,
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
	rep_buf b;
	rb_init(&b);
	head(&b, r);
	runs_table(&b, r);
	scaling(&b, r);
	/* one run has no "across", but the target table still answers */
	if (r->n_runs > 1 || r->opts.target_acc >= 0)
		across(&b, r);
	for (size_t i = 0; i < r->n_runs; i++)
		run_section(&b, r, i);
	definitions(&b);
	rb_puts(&b, "</body>\n</html>\n");
	*out = rb_take(&b, len);
	RETURN_IF(!*out, err, IMS_ENOMEM, "cannot render the report: out of memory");
	return 0;
}
