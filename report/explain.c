/*
 * explain.c - the scaling part of the page: for each group of runs that
 * are the same job at different world sizes, the table of speedups both
 * ways, the speedup, efficiency and train_s-split charts, and for each
 * run against the 1-rank baseline the explanation of both figures.
 *
 * Every sentence is built from analyze.c's figures, with the numbers in
 * it; the thresholds that pick a wording (when a part "did not shrink",
 * when ranks are "even", when the loader "did not keep up") are stated
 * where they are used.
 */
#define _GNU_SOURCE
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * How a part of train_s changed from 1 rank to W, in words: "1.60x faster",
 * "did not shrink", "grew 2.23x". Within 15% either way it "did not
 * shrink": smaller changes are within the noise of a shared machine.
 */
static const char *change(char *buf, double base, double here)
{
	char n[REP_NUM];
	double f = here > 0 ? base / here : INFINITY;
	if (!isfinite(f) && base > 0)
		snprintf(buf, REP_NUM, "gone");
	else if (f >= 1.15)
		snprintf(buf, REP_NUM, "%sx faster", rep_fmt_n(n, f));
	else if (f > 1 / 1.15 || !(base > 0))
		snprintf(buf, REP_NUM, "%s", base > 0 ? "did not shrink" : "new");
	else
		snprintf(buf, REP_NUM, "grew %sx", rep_fmt_n(n, 1 / f));
	return buf;
}

static void explain_steady(ims_buf *b, const rep_report *r, const rep_group *g,
			   size_t a)
{
	const rep_compare *c = &g->cmp[a];
	const rep_stats *st = &r->stats[g->members[a]];
	const rep_stats *bs = &r->stats[g->baseline];
	char n1[REP_NUM], n2[REP_NUM], n3[REP_NUM], n4[REP_NUM];
	/* one buffer per number of a call: arguments are all formatted first */
	ims_buf_printf(b, "<li><b>Steady steps</b> (speedup_speed): %s images/s per rank "
		     "at %d ranks against %s at 1 rank, ",
		  rep_fmt_n(n1, st->speed), st->world, rep_fmt_n(n2, bs->speed));
	ims_buf_printf(b, "so speedup_speed = %d &times; %s / %s = %s, efficiency %s.", st->world,
		  rep_fmt_n(n1, st->speed), rep_fmt_n(n2, bs->speed), rep_fmt_n(n3, c->speedup_speed),
		  rep_fmt_n(n4, c->eff_speed));
	if (!c->has_per_image) {
		ims_buf_puts(b, " (The step's parts per image need the batch size from summary.json.)</li>\n");
		return;
	}
	double bt = 0, t = 0;
	for (int k = 0; k < 4; k++) {
		bt += c->base_per_image_ms[k];
		t += c->per_image_ms[k];
	}
	static const char *const part[4] = {"data wait", "compute", "communication",
					    "other"};
	ims_buf_printf(b, " Per image, one rank spent %s ms in a steady step at %d ranks and %s ms at 1 rank",
		  rep_fmt_n(n1, t), st->world, rep_fmt_n(n2, bt));
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
	ims_buf_puts(b, ":");
	/* a part under 1% of the step at both sizes is left out; under 0.1%
	 * it reads as ~0 (a 1-rank allreduce of a few numbers, say) */
	for (int i = 0, said = 0; i < 4; i++) {
		int k = ord[i];
		double here = c->per_image_ms[k], base = c->base_per_image_ms[k];
		if (fmax(here, base) < 0.01 * fmax(t, bt))
			continue;
		ims_buf_printf(b, "%s %s %s ms (%s at 1 rank, %s%s)", said ? "," : "", part[k],
			  fabs(here) < 1e-3 * t ? "~0" : rep_fmt_n(n1, here),
			  fabs(base) < 1e-3 * bt ? "~0" : rep_fmt_n(n2, base),
			  d[k] >= 0 ? "+" : "&minus;", rep_fmt_n(n3, fabs(d[k])));
		said = 1;
	}
	ims_buf_puts(b, ".");
	double dc = c->base_per_image_ms[1] > 0
			    ? c->per_image_ms[1] / c->base_per_image_ms[1] - 1
			    : NAN;
	if (isfinite(dc) && dc > 0.05) {
		ims_buf_printf(b, " Compute per image rose %s", rep_fmt_pct_n(n1, dc));
		if (st->batch_per_rank < bs->batch_per_rank)
			ims_buf_printf(b, " (each rank computes a batch of %s instead of %s, and ranks share the machine)",
				  rep_fmt_n(n2, st->batch_per_rank), rep_fmt_n(n3, bs->batch_per_rank));
		else
			ims_buf_puts(b, " (the ranks compete for the same cores and memory bandwidth)");
		ims_buf_puts(b, ".");
	}
	ims_buf_puts(b, "</li>\n");
}

static void explain_balance(ims_buf *b, const rep_stats *st, const rep_stats *bs)
{
	char n1[REP_NUM], n2[REP_NUM], n3[REP_NUM];
	if (!isfinite(st->busy_ratio)) {
		ims_buf_puts(b, "<li><b>Rank balance</b>: not known (no per-rank busy times in the logs).</li>\n");
		return;
	}
	double mx = st->ranks[st->busy_max_rank].busy_s;
	double mn = st->ranks[st->busy_min_rank].busy_s;
	double mean = 0, comm = 0;
	for (int r = 0; r < st->world; r++) {
		mean += st->ranks[r].busy_s / st->world;
		comm += st->ranks[r].comm_s / st->world;
	}
	ims_buf_printf(b, "<li><b>Rank balance</b>: compute (busy) time per rank from %s (rank %d) "
		     "to %s (rank %d), max/min %s. ",
		  rep_fmt_s_n(n1, mn), st->busy_min_rank, rep_fmt_s_n(n2, mx), st->busy_max_rank,
		  rep_fmt_n(n3, st->busy_ratio));
	/* within 5% the ranks are as even as timing noise allows */
	if (st->busy_ratio < 1.05)
		ims_buf_puts(b, "The ranks were even: imbalance cost little here.");
	else
		ims_buf_printf(b, "Steps are synchronous, so every rank waits at each allreduce for the "
			     "slowest: about %s per rank went to waiting for rank %d, counted as "
			     "communication.",
			  rep_fmt_s_n(n1, mx - mean), st->busy_max_rank);
	if (isfinite(comm)) {
		ims_buf_printf(b, " Communication took %s per rank in all (%s of train_s)",
			  rep_fmt_s_n(n1, comm), rep_fmt_pct_n(n2, comm / st->train_s));
		if (isfinite(bs->ranks[0].comm_s))
			ims_buf_printf(b, "; %s at 1 rank", rep_fmt_s_n(n3, bs->ranks[0].comm_s));
		ims_buf_puts(b, ".");
	}
	ims_buf_puts(b, "</li>\n");
}

static void explain_stalls(ims_buf *b, const rep_stats *st, const rep_stats *bs)
{
	char n1[REP_NUM], n2[REP_NUM];
	if (!isfinite(st->stall_fraction))
		return;
	ims_buf_printf(b, "<li><b>Loader stalls</b>: rank 0 waited for data %s of train_s at %d ranks, %s at 1 rank.",
		  rep_fmt_pct_n(n1, st->stall_fraction), st->world, rep_fmt_pct_n(n2, bs->stall_fraction));
	/* past 5% the loader, not the model, sets part of the pace */
	if (st->stall_fraction > 0.05)
		ims_buf_puts(b, " The loader did not keep up: more loader threads (--threads) or a "
			   "smaller decode (--resize when packing) would help.");
	ims_buf_puts(b, "</li>\n");
}

static void explain_time(ims_buf *b, const rep_report *r, const rep_group *g,
			 size_t a)
{
	const rep_compare *c = &g->cmp[a];
	const rep_stats *st = &r->stats[g->members[a]];
	const rep_stats *bs = &r->stats[g->baseline];
	char n1[REP_NUM], n2[REP_NUM], n3[REP_NUM], n4[REP_NUM];
	if (!isfinite(c->speedup_time)) {
		ims_buf_puts(b, "<li><b>Wall time</b>: speedup_time needs both runs' summary.json "
			   "(train_s).</li>\n");
		return;
	}
	ims_buf_printf(b, "<li><b>Wall time</b> (speedup_time): train_s %s at 1 rank",
		  rep_fmt_s_n(n1, bs->train_s));
	if (c->time_per_image)
		ims_buf_printf(b, " for %s images, %s per %s images",
			  rep_fmt_n(n2, bs->images), rep_fmt_s_n(n3, bs->train_s * c->images_ratio),
			  rep_fmt_n(n4, st->images));
	ims_buf_printf(b, ", %s at %d ranks: speedup_time %s, efficiency %s.",
		  rep_fmt_s_n(n1, st->train_s), st->world, rep_fmt_n(n2, c->speedup_time),
		  rep_fmt_n(n3, c->eff_time));
	if (!c->has_terms || !isfinite(c->ideal_s)) {
		ims_buf_puts(b, " (The split of train_s needs steps and batch sizes in the logs.)</li>\n");
		return;
	}
	double extra = st->train_s - c->ideal_s;
	ims_buf_printf(b, " Had every part of train_s changed as the steady steps did (speedup_speed "
		     "%s), this run would have taken %s; it took %s, %s %s.",
		  rep_fmt_n(n1, c->speedup_speed), rep_fmt_s_n(n2, c->ideal_s), rep_fmt_s_n(n3, st->train_s),
		  rep_fmt_s_n(n4, fabs(extra)), extra >= 0 ? "more" : "less");
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
		char how[REP_NUM];
		ims_buf_printf(b, "%s %s %s here, %s at 1 rank (%s): %s%s",
			  said ? ";" : " Outside the steady steps:", rep_term_names[k],
			  rep_fmt_s_n(n1, c->terms[k]), rep_fmt_s_n(n2, c->base_terms[k]),
			  change(how, c->base_terms[k], c->terms[k]),
			  c->excess[k] >= 0 ? "+" : "&minus;", rep_fmt_s_n(n3, fabs(c->excess[k])));
		said = 1;
	}
	if (said)
		ims_buf_puts(b, ".");
	else
		ims_buf_puts(b, " Outside the steady steps nothing moved the figure by more than 2%.");
	if (isfinite(c->steady_speedup_time) && fabs(se) >= small) {
		char n5[REP_NUM];
		ims_buf_printf(b, " The steady steps took %s here, %s at 1 rank, a time speedup of %s "
			     "against speedup_speed %s: %s%s",
			  rep_fmt_s_n(n1, sw), rep_fmt_s_n(n2, sb), rep_fmt_n(n3, c->steady_speedup_time),
			  rep_fmt_n(n4, c->speedup_speed), se >= 0 ? "+" : "&minus;", rep_fmt_s_n(n5, fabs(se)));
		/* speed is per image, the steady time leaves out each run's
		 * first interval, which holds more of a rank's images at W */
		ims_buf_puts(b, " (the warm-up intervals left out of both hold different shares of "
			   "the runs' images).");
	}
	ims_buf_printf(b, " Hence speedup_time %s %s speedup_speed %s.</li>\n",
		  rep_fmt_n(n1, c->speedup_time),
		  c->speedup_time < c->speedup_speed - 0.005   ? "&lt;"
		  : c->speedup_time > c->speedup_speed + 0.005 ? "&gt;"
							       : "&asymp;",
		  rep_fmt_n(n2, c->speedup_speed));
}

/* One row of the terms table. */
static void term_row(ims_buf *b, const char *name, int sub, double base,
		     double here, double ideal, double excess)
{
	ims_buf_puts(b, sub ? "<tr><td class=\"l\">&nbsp;&nbsp;&nbsp;" : "<tr><th class=\"l\">");
	rb_html(b, name);
	ims_buf_puts(b, sub ? "</td>" : "</th>");
	rb_td_s(b, base);
	rb_td_s(b, here);
	rb_td_s(b, ideal);
	rb_td_s(b, excess);
	ims_buf_puts(b, "</tr>\n");
}

static void terms_table(ims_buf *b, const rep_compare *c, int world)
{
	if (!c->has_terms)
		return;
	ims_buf_printf(b, "<table><tr><th class=\"l\">part of train_s</th><th>1 rank%s</th><th>%d ranks</th>"
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
			ims_buf_puts(b, "<tr><th class=\"l\" colspan=\"5\">outside the steady steps</th></tr>\n");
		term_row(b, rep_term_names[k], 1, c->base_terms[k], c->terms[k],
			 c->base_terms[k] / c->speedup_speed, c->excess[k]);
	}
	term_row(b, "train_s", 0, tot[0], tot[1], tot[2], tot[3]);
	ims_buf_puts(b, "</table>\n");
}

static void group_charts(ims_buf *b, const rep_report *r, const rep_group *g,
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
	ims_buf_puts(b, "<div class=\"figs\">");
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
	ims_buf_puts(b, "</div>\n");
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

static void group_section(ims_buf *b, const rep_report *r, const rep_group *g,
			  size_t gi)
{
	char n1[REP_NUM], n2[REP_NUM], n3[REP_NUM];
	ims_buf_printf(b, "<h3 id=\"group-%zu\">%s</h3>\n<p>Runs that share <code>", gi,
		  g->mode == REP_SCALE_RANK_BATCH ? "Scaling at the same batch per rank"
						  : "Scaling at the same global batch");
	rb_html(b, g->key);
	ims_buf_puts(b, "</code>.");
	if (g->baseline < 0) {
		ims_buf_puts(b, " <span class=\"note\">No 1-rank run of this job: no speedup can be "
			   "computed. Add a run with the same options on one rank.</span></p>\n");
	} else {
		ims_buf_puts(b, " Baseline: <b>");
		rb_html(b, r->runs[g->baseline].label);
		ims_buf_puts(b, "</b> (1 rank).</p>\n");
	}
	int multi_base = 0;
	for (size_t a = 0; a < g->n_members; a++)
		multi_base += r->stats[g->members[a]].world == 1;
	if (multi_base > 1)
		ims_buf_puts(b, "<p class=\"note\">More than one 1-rank run: the first one given is the "
			   "baseline.</p>\n");
	ims_buf_puts(b, "<table>\n");
	static const char *const cols[] = {
		"run", "ranks", "threads / rank", "batch / rank", "global batch",
		"images", "train_s", "steady images/s per rank", "total steady images/s", "speedup_speed",
		"efficiency (speed)", "speedup_time", "efficiency (time)", NULL};
	rb_th_row(b, cols);
	int per_image = 0;
	for (size_t a = 0; a < g->n_members; a++) {
		const rep_stats *st = &r->stats[g->members[a]];
		const rep_compare *c = &g->cmp[a];
		per_image |= c->time_per_image;
		ims_buf_puts(b, "<tr><td class=\"l\">");
		rb_html(b, r->runs[g->members[a]].label);
		ims_buf_printf(b, "</td><td>%d</td>", st->world);
		rb_td_num(b, r->runs[g->members[a]].sum.threads);
		rb_td_num(b, st->batch_per_rank);
		rb_td_num(b, st->global_batch);
		rb_td_num(b, st->images);
		rb_td_s(b, st->train_s);
		rb_td_num(b, st->speed);
		rb_td_num(b, st->total_speed);
		rb_td_num(b, c->speedup_speed);
		rb_td_num(b, c->eff_speed);
		rb_td_num(b, c->speedup_time);
		rb_td_num(b, c->eff_time);
		ims_buf_puts(b, "</tr>\n");
	}
	ims_buf_puts(b, "</table>\n");
	if (per_image)
		ims_buf_puts(b, "<p class=\"note\">These runs trained different numbers of images, so "
			   "speedup_time compares time per image: train_s(1) / images(1) over "
			   "train_s(W) / images(W).</p>\n");
	int threads_differ = 0;
	for (size_t a = 1; a < g->n_members; a++) {
		double t0 = r->runs[g->members[0]].sum.threads;
		double t = r->runs[g->members[a]].sum.threads;
		threads_differ |= !(isnan(t0) && isnan(t)) && t0 != t;
	}
	if (threads_differ)
		ims_buf_puts(b, "<p class=\"note\">These runs use different threads per rank "
			   "(column threads / rank): the speedups compare the jobs as run, "
			   "ranks x threads cores each, not ranks alone.</p>\n");
	if (g->baseline < 0)
		return;
	group_charts(b, r, g, gi);
	const rep_stats *bs = &r->stats[g->baseline];
	for (size_t a = 0; a < g->n_members; a++) {
		if ((long)g->members[a] == g->baseline || r->stats[g->members[a]].world == 1)
			continue;
		const rep_stats *st = &r->stats[g->members[a]];
		const rep_compare *c = &g->cmp[a];
		ims_buf_puts(b, "<div class=\"why\"><h4>Why ");
		rb_html(b, r->runs[g->members[a]].label);
		ims_buf_printf(b, " (%d ranks) has speedup_speed %s", st->world,
			  rep_fmt_n(n1, c->speedup_speed));
		ims_buf_printf(b, " and speedup_time %s</h4>\n", rep_fmt_n(n1, c->speedup_time));
		if (c->time_per_image)
			ims_buf_printf(b, "<p>It trained %s images and the baseline %s: the baseline's "
				     "times below are scaled by %s to the same images.</p>\n",
				  rep_fmt_n(n1, st->images), rep_fmt_n(n2, bs->images),
				  rep_fmt_n(n3, c->images_ratio));
		ims_buf_puts(b, "<ul>\n");
		explain_steady(b, r, g, a);
		explain_balance(b, st, bs);
		explain_stalls(b, st, bs);
		explain_time(b, r, g, a);
		ims_buf_puts(b, "</ul>\n");
		terms_table(b, c, st->world);
		ims_buf_puts(b, "</div>\n");
	}
}

void rep_html_scaling(ims_buf *b, const rep_report *r)
{
	if (!r->n_groups) {
		if (r->n_runs > 1)
			ims_buf_puts(b, "<section id=\"scaling\"><h2>Scaling</h2><p class=\"note\">No two runs "
				   "are the same job at different world sizes (same options but world, "
				   "and a summary.json each), so there is no speedup to show. See "
				   "<a href=\"#definitions\">definitions</a>.</p></section>\n");
		return;
	}
	ims_buf_puts(b, "<section id=\"scaling\">\n<h2>Scaling</h2>\n<p>Speedup and efficiency against the "
		   "number of ranks, both ways: <b>speedup_speed</b> = W &times; steady images/s per rank "
		   "at W / that at 1 rank (steps only), and <b>speedup_time</b> = train_s(1) / "
		   "train_s(W) (all of training after start-up: steps, warm-up, validation, "
		   "checkpoints). Efficiency = speedup / W. Below each group, the difference is "
		   "taken apart from the logged times.</p>\n");
	for (size_t i = 0; i < r->n_groups; i++)
		group_section(b, r, &r->groups[i], i);
	ims_buf_puts(b, "</section>\n");
}

