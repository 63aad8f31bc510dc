/*
 * buf.c - the growing text buffer the page and the CSV files are built in,
 * with the escaping, number formats and table cells they need.
 */
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rb_init(rep_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void rb_free(rep_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Room for n more bytes and the terminator. */
static int grow(rep_buf *b, size_t n)
{
	if (b->oom)
		return -1;
	if (n > SIZE_MAX / 4 - b->len) {
		b->oom = 1;
		return -1;
	}
	size_t need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < need)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void rb_putn(rep_buf *b, const char *s, size_t n)
{
	if (grow(b, n) < 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void rb_puts(rep_buf *b, const char *s)
{
	rb_putn(b, s, strlen(s));
}

void rb_vprintf(rep_buf *b, const char *fmt, va_list ap)
{
	if (b->oom)
		return;
	va_list ap2;
	va_copy(ap2, ap);
	char small[256];
	int n = vsnprintf(small, sizeof(small), fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		rb_putn(b, small, (size_t)n);
		return;
	}
	if (grow(b, (size_t)n) < 0)
		return;
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void rb_printf(rep_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	rb_vprintf(b, fmt, ap);
	va_end(ap);
}

void rb_html(rep_buf *b, const char *s)
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
			rb_putn(b, run, (size_t)(s - run));
			rb_puts(b, rep);
			run = s + 1;
		}
	}
	rb_putn(b, run, (size_t)(s - run));
}

void rb_csv(rep_buf *b, const char *s)
{
	if (!s)
		return;
	if (!strpbrk(s, ",\"\r\n")) {
		rb_puts(b, s);
		return;
	}
	rb_putn(b, "\"", 1);
	for (const char *c = s; *c; c++) {
		if (*c == '"')
			rb_putn(b, "\"", 1);
		rb_putn(b, c, 1);
	}
	rb_putn(b, "\"", 1);
}

void rb_csv_num(rep_buf *b, double v)
{
	if (isfinite(v))
		rb_printf(b, "%.10g", v);
}

char *rb_take(rep_buf *b, size_t *len)
{
	if (b->oom) {
		rb_free(b);
		return NULL;
	}
	/* an empty buffer still gives a string */
	if (!b->p && grow(b, 0) < 0)
		return NULL;
	b->p[b->len] = '\0';
	char *p = b->p;
	if (len)
		*len = b->len;
	memset(b, 0, sizeof(*b));
	return p;
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

void rb_td(rep_buf *b, int left, const char *text)
{
	rb_puts(b, left ? "<td class=\"l\">" : "<td>");
	rb_html(b, text);
	rb_puts(b, "</td>");
}

void rb_td_num(rep_buf *b, double v)
{
	char n[REP_NUM];
	rb_td(b, 0, rep_fmt(n, sizeof(n), v));
}

void rb_td_s(rep_buf *b, double v)
{
	char n[REP_NUM];
	rb_td(b, 0, rep_fmt_s(n, sizeof(n), v));
}

void rb_td_pct(rep_buf *b, double v)
{
	char n[REP_NUM];
	rb_td(b, 0, rep_fmt_pct(n, sizeof(n), v));
}

void rb_th_row(rep_buf *b, const char *const *cols)
{
	rb_puts(b, "<tr>");
	for (; *cols; cols++) {
		rb_puts(b, "<th>");
		rb_html(b, *cols);
		rb_puts(b, "</th>");
	}
	rb_puts(b, "</tr>\n");
}
