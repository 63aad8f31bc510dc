/*
 * buf.c - what the page and the CSV files append to their text buffer
 * (common's ims_buf): escaping, number formats and table cells.
 */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rb_html(ims_buf *b, const char *s)
{
	if (!s)
		return;
	const char *run = s;
	for (; *s; s++) {
		const char *rep = NULL;
		switch (*s) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		default: break;
		}
		/* control characters (from a log's strings) would make the
		 * page invalid XML-ish text; show them as '?' */
		if (!rep && (unsigned char)*s < 0x20 && *s != '\t' && *s != '\n')
			rep = "?";
		if (rep) {
			ims_buf_append(b, run, (size_t)(s - run));
			ims_buf_puts(b, rep);
			run = s + 1;
		}
	}
	ims_buf_append(b, run, (size_t)(s - run));
}

void rb_csv_num(ims_buf *b, double v)
{
	if (isfinite(v))
		ims_buf_printf(b, "%.10g", v);
}

const char *rep_fmt(char *buf, size_t len, double v)
{
	if (!isfinite(v)) {
		snprintf(buf, len, "n/a");
		return buf;
	}
	/* 3 significant digits, but never an exponent for the sizes a run
	 * has (images/s in the thousands, fractions down to 1e-4) */
	double a = fabs(v);
	/* counts print as counts (batch 32, not 32.00), also when the
	 * arithmetic that made them left a last-bit error */
	if (a == 0 || (fabs(a - round(a)) < 1e-9 * a && a < 1e15))
		snprintf(buf, len, "%.0f", v);
	else if (a >= 1000)
		snprintf(buf, len, "%.0f", v);
	else if (a >= 100)
		snprintf(buf, len, "%.1f", v);
	else if (a >= 1)
		snprintf(buf, len, "%.2f", v);
	else if (a >= 1e-5) {
		/* 3 significant digits without an exponent, at most 7 places */
		int d = 2 - (int)floor(log10(a));
		snprintf(buf, len, "%.*f", d > 7 ? 7 : d, v);
	} else
		snprintf(buf, len, "%.1e", v);
	return buf;
}

const char *rep_fmt_s(char *buf, size_t len, double v)
{
	if (!isfinite(v)) {
		snprintf(buf, len, "n/a");
		return buf;
	}
	char n[32];
	if (fabs(v) < 0.1 && v != 0)
		snprintf(buf, len, "%s ms", rep_fmt(n, sizeof(n), v * 1e3));
	else
		snprintf(buf, len, "%s s", rep_fmt(n, sizeof(n), v));
	return buf;
}

const char *rep_fmt_pct(char *buf, size_t len, double v)
{
	if (!isfinite(v))
		snprintf(buf, len, "n/a");
	else if (fabs(v) < 0.001 && v != 0)
		snprintf(buf, len, "%.2f%%", 100 * v);
	else
		snprintf(buf, len, "%.1f%%", 100 * v);
	return buf;
}

void rb_td(ims_buf *b, int left, const char *text)
{
	ims_buf_puts(b, left ? "<td class=\"l\">" : "<td>");
	rb_html(b, text);
	ims_buf_puts(b, "</td>");
}

void rb_td_num(ims_buf *b, double v)
{
	char n[REP_NUM];
	rb_td(b, 0, rep_fmt(n, sizeof(n), v));
}

void rb_td_s(ims_buf *b, double v)
{
	char n[REP_NUM];
	rb_td(b, 0, rep_fmt_s(n, sizeof(n), v));
}

void rb_td_pct(ims_buf *b, double v)
{
	char n[REP_NUM];
	rb_td(b, 0, rep_fmt_pct(n, sizeof(n), v));
}

void rb_th_row(ims_buf *b, const char *const *cols)
{
	ims_buf_puts(b, "<tr>");
	for (; *cols; cols++) {
		ims_buf_puts(b, "<th>");
		rb_html(b, *cols);
		ims_buf_puts(b, "</th>");
	}
	ims_buf_puts(b, "</tr>\n");
}
