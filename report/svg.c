/*
 * svg.c - hand-written SVG charts: lines against a linear or log2 axis, and
 * stacked bars. Every chart is one <svg class="chart" data-chart=KIND>
 * element; the marks that carry data have class "mark" (legend swatches
 * "key"), so a test can find each chart and check it drew something.
 *
 * Coordinates are written with one decimal: a chart is 480 units wide, so
 * that is finer than any screen or printer resolves, and keeps long series
 * small.
 */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CW 480.0           /* chart width */
#define PL 62.0            /* plot left */
#define PR 14.0            /* right margin */
#define PLOT_H 190.0
#define FONT "font-family=\"sans-serif\" font-size=\"11\""

static const char *const palette[] = {
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

const char *svg_color(int i)
{
	int n = (int)(sizeof(palette) / sizeof(palette[0]));
	return palette[((i % n) + n) % n];
}

/* ---- axes ----------------------------------------------------------------- */

typedef struct axis {
	double lo, hi, step; /* linear: data units; log2: exponents */
	int log2;
} axis;

static double nice_step(double range, int target, int integer)
{
	double raw = range / target;
	double mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	double nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
	double step = nf * mag;
	if (integer && step < 1)
		step = 1;
	if (integer)
		step = ceil(step);
	return step;
}

/* A range [mn, mx] of finite data widened to whole ticks. */
static void axis_linear(axis *a, double mn, double mx, int integer)
{
	if (mx - mn <= 1e-12 * fmax(fabs(mx), 1)) {
		/* one value: a range around it */
		double pad = mx == 0 ? 1 : fabs(mx) * 0.1;
		if (integer && pad < 1)
			pad = 1;
		mn -= pad;
		mx += pad;
	}
	a->log2 = 0;
	a->step = nice_step(mx - mn, 4, integer);
	a->lo = floor(mn / a->step + 1e-9) * a->step;
	a->hi = ceil(mx / a->step - 1e-9) * a->step;
}

static void axis_log2(axis *a, double mn, double mx)
{
	a->log2 = 1;
	a->lo = floor(log2(mn) + 1e-9);
	a->hi = ceil(log2(mx) - 1e-9);
	if (a->hi <= a->lo) {
		a->lo -= 1;
		a->hi += 1;
	}
	a->step = a->hi - a->lo > 8 ? ceil((a->hi - a->lo) / 8) : 1;
}

/* 0..1 along the axis. */
static double axis_frac(const axis *a, double v)
{
	if (a->log2)
		v = log2(v);
	return (v - a->lo) / (a->hi - a->lo);
}

static void tick_label(char *buf, size_t len, const axis *a, double v)
{
	if (a->log2) {
		snprintf(buf, len, "%g", exp2(v));
		return;
	}
	int d = 0;
	while (d < 6) {
		double s = a->step * pow(10, d);
		if (fabs(s - round(s)) < 1e-6 * fmax(1, s))
			break;
		d++;
	}
	if (fabs(v) < a->step * 1e-9)
		v = 0; /* never "-0" */
	snprintf(buf, len, "%.*f", d, v);
}

/* ---- shared pieces -------------------------------------------------------- */

static void open_svg(ims_buf *b, const char *id, const char *kind,
		     const char *title, double h)
{
	ims_buf_puts(b, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" id=\"");
	rb_html(b, id);
	ims_buf_puts(b, "\" data-chart=\"");
	rb_html(b, kind);
	ims_buf_printf(b, "\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"",
		  CW, h, CW, h);
	rb_html(b, title);
	ims_buf_puts(b, "\"><title>");
	rb_html(b, title);
	ims_buf_printf(b, "</title><rect class=\"bg\" x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>",
		  CW, h);
	ims_buf_printf(b, "<text x=\"%.0f\" y=\"16\" " FONT " font-weight=\"bold\" text-anchor=\"middle\">",
		  CW / 2);
	rb_html(b, title);
	ims_buf_puts(b, "</text>");
}

/* Approximate width of a label in 11px sans-serif. */
static double text_w(const char *s)
{
	return 6.2 * (double)strlen(s);
}

/* Rows a legend of these names needs across the chart. */
static int legend_rows(const char *const *names, size_t n)
{
	double x = PL;
	int rows = 0;
	for (size_t i = 0; i < n; i++) {
		if (!names[i])
			continue;
		double w = 20 + text_w(names[i]) + 14;
		if (rows == 0 || x + w > CW - PR) {
			rows++;
			x = PL;
		}
		x += w;
	}
	return rows;
}

static void legend(ims_buf *b, const char *const *names, const int *colors,
		   const int *dashed, size_t n, double y0)
{
	double x = PL, y = y0;
	int started = 0;
	for (size_t i = 0; i < n; i++) {
		if (!names[i])
			continue;
		double w = 20 + text_w(names[i]) + 14;
		if (started && x + w > CW - PR) {
			x = PL;
			y += 15;
		}
		started = 1;
		ims_buf_printf(b, "<rect class=\"key\" x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"%s\" fill=\"%s\"/>",
			  x, y - 5, dashed && dashed[i] ? "2" : "4", svg_color(colors[i]));
		ims_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT ">", x + 20, y);
		rb_html(b, names[i]);
		ims_buf_puts(b, "</text>");
		x += w;
	}
}

/* Horizontal grid lines and labels of a y axis; the frame. */
static void y_axis(ims_buf *b, const axis *ya, double top, double ph,
		   const char *ylabel)
{
	int n = (int)round((ya->hi - ya->lo) / ya->step);
	for (int i = 0; i <= n && i <= 50; i++) {
		double v = ya->lo + i * ya->step;
		double y = top + ph * (1 - axis_frac(ya, v));
		char lab[48];
		tick_label(lab, sizeof(lab), ya, v);
		ims_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e3e3e3\"/>",
			  PL, y, CW - PR, y);
		ims_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " text-anchor=\"end\">%s</text>",
			  PL - 5, y + 4, lab);
	}
	ims_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>",
		  PL, top, CW - PR - PL, ph);
	if (ylabel) {
		ims_buf_printf(b, "<text " FONT " text-anchor=\"middle\" transform=\"translate(14 %.1f) rotate(-90)\">",
			  top + ph / 2);
		rb_html(b, ylabel);
		ims_buf_puts(b, "</text>");
	}
}

/* ---- line charts ------------------------------------------------------------ */

typedef struct pt {
	double x, y;
} pt;

/* The points of a series as drawn: bucket means past SVG_MAX_POINTS,
 * non-finite (and, on a log axis, non-positive x) as NAN gaps. */
static size_t series_points(const svg_series *s, int xlog, pt *out)
{
	size_t n = s->n;
	if (n <= SVG_MAX_POINTS) {
		for (size_t i = 0; i < n; i++) {
			out[i].x = s->x[i];
			out[i].y = s->y[i];
			if (!isfinite(out[i].x) || !isfinite(out[i].y) ||
			    (xlog && out[i].x <= 0))
				out[i].x = out[i].y = NAN;
		}
		return n;
	}
	for (size_t k = 0; k < SVG_MAX_POINTS; k++) {
		size_t a = k * n / SVG_MAX_POINTS, e = (k + 1) * n / SVG_MAX_POINTS;
		double sx = 0, sy = 0;
		size_t c = 0;
		for (size_t i = a; i < e; i++) {
			if (!isfinite(s->x[i]) || !isfinite(s->y[i]) ||
			    (xlog && s->x[i] <= 0))
				continue;
			sx += s->x[i];
			sy += s->y[i];
			c++;
		}
		out[k].x = c ? sx / c : NAN;
		out[k].y = c ? sy / c : NAN;
	}
	return SVG_MAX_POINTS;
}

size_t svg_line_chart(ims_buf *b, const svg_chart *c, const svg_series *s,
		      size_t n_series)
{
	size_t total = 0, most = 0;
	for (size_t i = 0; i < n_series; i++) {
		size_t k = s[i].n > SVG_MAX_POINTS ? SVG_MAX_POINTS : s[i].n;
		total += k;
		most = k > most ? k : most;
	}
	if (!total)
		return 0;
	pt *p = malloc(most * sizeof(*p));
	const char **names = calloc(n_series, sizeof(*names));
	int *colors = calloc(n_series, sizeof(int));
	int *dashed = calloc(n_series, sizeof(int));
	if (!p || !names || !colors || !dashed) {
		b->oom = 1;
		free(p);
		free(names);
		free(colors);
		free(dashed);
		return 0;
	}
	/* data range */
	double xmn = INFINITY, xmx = -INFINITY, ymn = INFINITY, ymx = -INFINITY;
	size_t finite = 0;
	for (size_t i = 0; i < n_series; i++) {
		size_t k = series_points(&s[i], c->x_log2, p);
		for (size_t j = 0; j < k; j++) {
			if (isnan(p[j].x))
				continue;
			finite++;
			xmn = fmin(xmn, p[j].x);
			xmx = fmax(xmx, p[j].x);
			ymn = fmin(ymn, p[j].y);
			ymx = fmax(ymx, p[j].y);
		}
		names[i] = s[i].name;
		colors[i] = s[i].color;
		dashed[i] = (s[i].style & SVG_DASHED) != 0;
	}
	if (!finite) {
		free(p);
		free(names);
		free(colors);
		free(dashed);
		return 0;
	}
	if (c->y_zero) {
		ymn = fmin(ymn, 0);
		ymx = fmax(ymx, 0);
	}
	if (isfinite(c->y_max_at_least))
		ymx = fmax(ymx, c->y_max_at_least);
	axis xa, ya;
	if (c->x_log2)
		axis_log2(&xa, xmn, xmx);
	else
		axis_linear(&xa, xmn, xmx, c->x_integer);
	axis_linear(&ya, ymn, ymx, 0);

	int rows = legend_rows(names, n_series);
	double top = 30, pw = CW - PR - PL;
	double h = top + PLOT_H + 38 + rows * 15 + (rows ? 6 : 0);
	open_svg(b, c->id, c->kind, c->title, h);
	y_axis(b, &ya, top, PLOT_H, c->ylabel);
	/* x ticks */
	int nt = (int)round((xa.hi - xa.lo) / xa.step);
	for (int i = 0; i <= nt && i <= 50; i++) {
		double v = xa.lo + i * xa.step;
		double x = PL + pw * (v - xa.lo) / (xa.hi - xa.lo);
		char lab[48];
		tick_label(lab, sizeof(lab), &xa, v);
		ims_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>",
			  x, top + PLOT_H, x, top + PLOT_H + 4);
		ims_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " text-anchor=\"middle\">%s</text>",
			  x, top + PLOT_H + 15, lab);
	}
	if (c->xlabel) {
		ims_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " text-anchor=\"middle\">",
			  PL + pw / 2, top + PLOT_H + 30);
		rb_html(b, c->xlabel);
		ims_buf_puts(b, "</text>");
	}
	/* series */
	size_t drawn = 0;
	for (size_t i = 0; i < n_series; i++) {
		size_t k = series_points(&s[i], c->x_log2, p);
		int style = s[i].style ? s[i].style : SVG_LINE;
		const char *col = svg_color(s[i].color);
		/* lines first, dots over them; a point with no neighbour gets a
		 * dot even on a plain line, or it would not show */
		int in_path = 0;
		for (size_t j = 0; j < k && (style & SVG_LINE); j++) {
			if (isnan(p[j].x))
				continue;
			int last = j + 1 == k || isnan(p[j + 1].x);
			if (!in_path && last)
				continue;
			double x = PL + pw * axis_frac(&xa, p[j].x);
			double y = top + PLOT_H * (1 - axis_frac(&ya, p[j].y));
			if (!in_path) {
				ims_buf_printf(b, "<path class=\"mark\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.7\"%s d=\"M%.1f,%.1f",
					  col,
					  style & SVG_DASHED ? " stroke-dasharray=\"5 4\"" : "",
					  x, y);
				in_path = 1;
			} else
				ims_buf_printf(b, "L%.1f,%.1f", x, y);
			if (last) {
				ims_buf_puts(b, "\"/>");
				in_path = 0;
			}
		}
		for (size_t j = 0; j < k; j++) {
			if (isnan(p[j].x))
				continue;
			drawn++;
			int alone = (j == 0 || isnan(p[j - 1].x)) &&
				    (j + 1 == k || isnan(p[j + 1].x));
			if (!(style & SVG_MARKERS) && !alone)
				continue;
			ims_buf_printf(b, "<circle class=\"mark\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.8\" fill=\"%s\"/>",
				  PL + pw * axis_frac(&xa, p[j].x),
				  top + PLOT_H * (1 - axis_frac(&ya, p[j].y)), col);
		}
	}
	legend(b, names, colors, dashed, n_series, top + PLOT_H + 48);
	ims_buf_puts(b, "</svg>\n");
	free(p);
	free(names);
	free(colors);
	free(dashed);
	return drawn;
}

/* ---- stacked bars ------------------------------------------------------------- */

size_t svg_stacked_bars(ims_buf *b, const svg_bars *c)
{
	double mx = 0;
	size_t marks = 0;
	for (size_t i = 0; i < c->n_cat; i++) {
		double sum = 0;
		for (size_t k = 0; k < c->n_seg; k++) {
			double v = c->values[i * c->n_seg + k];
			if (isfinite(v) && v > 0) {
				sum += v;
				marks++;
			}
		}
		mx = fmax(mx, sum);
	}
	if (!marks || !(mx > 0))
		return 0;
	axis ya;
	axis_linear(&ya, 0, mx, 0);
	int rows = legend_rows(c->segments, c->n_seg);
	double top = c->callout ? 44 : 30, pw = CW - PR - PL;
	double h = top + PLOT_H + 38 + rows * 15 + 6;
	open_svg(b, c->id, c->kind, c->title, h);
	if (c->callout) {
		ims_buf_printf(b, "<text class=\"callout\" x=\"%.0f\" y=\"32\" " FONT " text-anchor=\"middle\" fill=\"#a00\">",
			  CW / 2);
		rb_html(b, c->callout);
		ims_buf_puts(b, "</text>");
	}
	y_axis(b, &ya, top, PLOT_H, c->ylabel);
	double slot = pw / (double)c->n_cat;
	double bw = fmin(slot * 0.64, 56);
	size_t every = c->n_cat > 16 ? (c->n_cat + 15) / 16 : 1;
	for (size_t i = 0; i < c->n_cat; i++) {
		double x = PL + slot * (i + 0.5) - bw / 2;
		double base = 0;
		for (size_t k = 0; k < c->n_seg; k++) {
			double v = c->values[i * c->n_seg + k];
			if (!isfinite(v) || v <= 0)
				continue;
			double y0 = top + PLOT_H * (1 - axis_frac(&ya, base));
			double y1 = top + PLOT_H * (1 - axis_frac(&ya, base + v));
			/* a sliver still shows: at least a tenth of a unit */
			double hgt = fmax(y0 - y1, 0.1);
			ims_buf_printf(b, "<rect class=\"mark\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
				  x, y0 - hgt, bw, hgt, svg_color(c->colors[k]));
			rb_html(b, c->categories[i]);
			ims_buf_puts(b, ": ");
			rb_html(b, c->segments[k]);
			char num[32];
			ims_buf_printf(b, " %s</title></rect>", rep_fmt(num, sizeof(num), v));
			base += v;
		}
		if (i % every == 0) {
			ims_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" " FONT " text-anchor=\"middle\">",
				  PL + slot * (i + 0.5), top + PLOT_H + 15);
			rb_html(b, c->categories[i]);
			ims_buf_puts(b, "</text>");
		}
	}
	int *zero = calloc(c->n_seg ? c->n_seg : 1, sizeof(int));
	if (!zero)
		b->oom = 1;
	else
		legend(b, c->segments, c->colors, zero, c->n_seg, top + PLOT_H + 34);
	free(zero);
	ims_buf_puts(b, "</svg>\n");
	return marks;
}
