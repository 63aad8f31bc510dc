/*
 * report_internal.h - what the report library's files share and nobody
 * else needs: a growing text buffer, the SVG charts, number formatting.
 */
#ifndef IMSHARD_REPORT_INTERNAL_H
#define IMSHARD_REPORT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "report/report.h"

/* ---- buf.c: text appended to an ims_buf -------------------------------- */

/*
 * Pages and CSV files are built in an ims_buf (common.h) with its appends,
 * whose allocation failure is sticky: a page is built without checking
 * every append and checked once at the end (ims_buf_take, or oom).
 */

/* s with & < > " ' escaped for HTML text and attribute values; control
 * characters (but TAB and LF) as '?', bytes that are not well-formed
 * UTF-8 as the text \xHH: the page is always valid UTF-8. */
void rb_html(ims_buf *b, const char *s);
/* s as one CSV cell (ims_buf_csv, common.h), bytes that are not
 * well-formed UTF-8 written as the text \xHH. NULL: nothing. */
void rb_csv(ims_buf *b, const char *s);
/* A number for CSV: %.10g, empty when not finite. */
void rb_csv_num(ims_buf *b, double v);

/* Table cells and a header row, text escaped (left: left-aligned). */
void rb_td(ims_buf *b, int left, const char *text);
void rb_td_num(ims_buf *b, double v);  /* rep_fmt */
void rb_td_s(ims_buf *b, double v);    /* rep_fmt_s */
void rb_td_pct(ims_buf *b, double v);  /* rep_fmt_pct */
void rb_th_row(ims_buf *b, const char *const *cols); /* NULL-terminated */

/* A number for people: 3 significant digits ("1.91", "0.0302", "2516"),
 * "n/a" when not finite. Returns buf. */
const char *rep_fmt(char *buf, size_t len, double v);
/* Seconds: "1.91 s", "12.3 ms" under 0.1 s, "n/a". */
const char *rep_fmt_s(char *buf, size_t len, double v);
/* Percent of a fraction: "3.0%". */
const char *rep_fmt_pct(char *buf, size_t len, double v);

/* The formats above into a REP_NUM-byte buffer: one buffer per number in
 * a call, since every argument is formatted before the call runs. */
#define REP_NUM 48
static inline const char *rep_fmt_n(char *buf, double v)
{
	return rep_fmt(buf, REP_NUM, v);
}
static inline const char *rep_fmt_s_n(char *buf, double v)
{
	return rep_fmt_s(buf, REP_NUM, v);
}
static inline const char *rep_fmt_pct_n(char *buf, double v)
{
	return rep_fmt_pct(buf, REP_NUM, v);
}
static inline const char *rep_ranks_word(int w)
{
	return ims_plural((uint64_t)w, "rank", "ranks");
}

/* ---- svg.c: charts ------------------------------------------------------ */

#define SVG_MAX_POINTS 600 /* longer series are drawn as bucket means */

enum {
	SVG_LINE = 1,     /* joined by a line */
	SVG_MARKERS = 2,  /* a dot per point */
	SVG_DASHED = 4    /* the line dashed (references: ideal speedup) */
};

typedef struct svg_series {
	const char *name;     /* legend text; NULL: not in the legend */
	const double *x, *y;  /* n points; non-finite points are gaps */
	size_t n;
	int style;            /* SVG_* bits; 0 means SVG_LINE */
	int color;            /* palette index */
} svg_series;

typedef struct svg_chart {
	const char *id;       /* unique in the page */
	const char *kind;     /* the data-chart attribute: what it draws */
	const char *title, *xlabel, *ylabel;
	int x_log2;           /* x on a log2 axis (x <= 0 are gaps) */
	int y_zero;           /* include 0 in the y range */
	int x_integer;        /* x ticks at integers only (epochs, world sizes) */
	double y_max_at_least; /* the y range reaches at least this (NAN: none) */
} svg_chart;

/*
 * Appends an <svg class="chart" data-chart=KIND id=ID> line chart.
 * Returns the number of points drawn; 0 means no finite point, and then
 * nothing is appended.
 */
size_t svg_line_chart(ims_buf *b, const svg_chart *c, const svg_series *s,
		      size_t n_series);

typedef struct svg_bars {
	const char *id, *kind, *title, *ylabel;
	const char *const *categories; /* one per bar */
	size_t n_cat;
	const char *const *segments;   /* stacked parts, bottom first */
	const int *colors;             /* palette index per segment */
	size_t n_seg;
	const double *values;          /* n_cat x n_seg, row-major; <= 0
					  and non-finite draw nothing */
	const char *callout;           /* a line under the title, or NULL */
} svg_bars;

/* Appends a stacked bar chart. Returns the number of bar segments drawn; 0
 * means nothing is appended. */
size_t svg_stacked_bars(ims_buf *b, const svg_bars *c);

/* The palette's colour for an index (wraps around). */
const char *svg_color(int i);

/* ---- explain.c: the scaling section of the page -------------------------- */

/* Appends the scaling section (groups, charts, explanations), or a note
 * that no runs form a group when there are several runs. */
void rep_html_scaling(ims_buf *b, const rep_report *r);

/* ---- classes.c: a run's evaluation ---------------------------------------- */

/* Appends per-class accuracy and the confusion matrix of run (index
 * run_i on the page) when its folder holds an evaluation. */
void rep_html_classes(ims_buf *b, const rep_run *run, size_t run_i);
/* html_run.c: run i's section of the page. */
void rep_html_run(ims_buf *b, const rep_report *r, size_t i);

/* ---- run.c and parts.c: reading a run folder ------------------------------ */

/* Records the diagnostic "FILE:LINE: why" of run ("FILE: why" for line 0).
 * 0 or IMS_ENOMEM. Past REP_MAX_DIAGS only the count grows. */
int rep_diag(rep_run *run, const char *file, size_t line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* rep_diag of a line of metrics.jsonl that is skipped: counted in
 * run->diags.n_skipped_lines as well (runs.csv's skipped_lines). */
int rep_diag_skip(rep_run *run, const char *file, size_t line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The diagnostic "FILE[:LINE]: WHAT is (are) not valid UTF-8: the bad
 * bytes are shown as \xHH" when n_bad > 0 strings of a file are not
 * well-formed UTF-8 (the page and the CSV files write such bytes as \xHH:
 * rb_html, rb_csv); nothing when n_bad is 0. 0 or IMS_ENOMEM. */
int rep_diag_text(rep_run *run, const char *file, size_t line, size_t n_bad,
		  const char *what);

/* The diagnostic "FILE: SIZE bytes, more than WHAT (limit LIMIT bytes):
 * DONE" of a file too large to parse. 0 or IMS_ENOMEM. */
int rep_diag_size(rep_run *run, const char *file, uint64_t size, uint64_t limit,
		  const char *what, const char *done);

struct cJSON;
/* A "start" line (resume 0) or a "resume" line (resume 1) of metrics.jsonl
 * at line ln: begins a part of the run (a resume line right after its
 * part's start line completes that part). 0 or IMS_ENOMEM. */
int rep_part_line(rep_run *run, const char *file, size_t ln,
		  const struct cJSON *o, int resume);
/* Once every line is read: drops the lines later parts trained again
 * (counted), and those of ranks their part (or summary.json) does not
 * have (diagnosed); sets run->world, parts.n_run_ids and
 * parts.wall_goes_back. 0 or IMS_ENOMEM. */
int rep_parts_settle(rep_run *run, const char *file);

/* ---- rank_local.c: a rank-local --log-dir beside its run --------------------- */

/* Links each rank-local folder to its run (rank_local.of_run) and joins its
 * lines to that run's where no rank would count twice, dropping the folder
 * from r->runs. Before labelling. 0 or IMS_ENOMEM. */
int rep_rank_local_join(rep_report *r);

#endif
