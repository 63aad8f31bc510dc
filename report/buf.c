/*
 * buf.c - what the page and the CSV files append to their text buffer
 * (common's ims_buf): escaping, number formats and table cells.
 */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* n bytes of well-formed UTF-8 text as HTML. */
static void html_text(ims_buf *b, const char *s, size_t n)
{
	const char *run = s, *end = s + n;
	for (; s < end; s++) {
		const unsigned char c = (unsigned char)*s;
		const char *rep = NULL;
		size_t skip = 1;
		switch (c) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		default: break;
		}
		/* control characters (from a log's strings: C0 but TAB and
		 * LF, DEL, C1) are not allowed in an HTML document; show
		 * them as '?' */
		if (!rep && ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F))
			rep = "?";
		if (!rep && c == 0xC2 && s + 1 < end && (unsigned char)s[1] < 0xA0) {
			rep = "?";
			skip = 2;
		}
		if (rep) {
			ims_buf_append(b, run, (size_t)(s - run));
			ims_buf_puts(b, rep);
			s += skip - 1;
			run = s + 1;
		}
	}
	ims_buf_append(b, run, (size_t)(end - run));
}

void rb_html(ims_buf *b, const char *s)
{
	if (!s)
		return;
	/* the page is UTF-8: a byte that is not part of well-formed UTF-8
	 * (a Latin-1 class name, a folder name from another system, a name
	 * cut inside a character) is written as the text \xHH, as imshard
	 * prints such names, so the page stays a valid document */
	size_t bad;
	while (!ims_utf8_valid(s, &bad)) {
		html_text(b, s, bad);
		ims_buf_printf(b, "\\x%02x", (unsigned char)s[bad]);
		s += bad + 1;
	}
	html_text(b, s, strlen(s));
}

void rb_csv(ims_buf *b, const char *s)
{
	size_t bad;
	if (!s || ims_utf8_valid(s, &bad)) {
		ims_buf_csv(b, s);
		return;
	}
	/* as rb_html: the files are UTF-8, other bytes are the text \xHH */
	ims_buf t = {0};
	while (!ims_utf8_valid(s, &bad)) {
		ims_buf_append(&t, s, bad);
		ims_buf_printf(&t, "\\x%02x", (unsigned char)s[bad]);
		s += bad + 1;
	}
	ims_buf_puts(&t, s);
	if (t.oom)
		b->oom = 1;
	else
		ims_buf_csv(b, t.text);
	ims_buf_release(&t);
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
