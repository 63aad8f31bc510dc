/*
 * buf.c - the growable byte buffer every library builds encoded images,
 * list files, JSON headers and report pages in.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

void ims_buf_release(ims_buf *b)
{
	if (!b)
		return;
	free(b->data);
	memset(b, 0, sizeof(*b));
}

static int resize_to(ims_buf *b, size_t cap, ims_error *err)
{
	uint8_t *p = realloc(b->data, cap ? cap : 1);
	RETURN_IF(!p, err, IMS_ENOMEM, "cannot allocate %zu bytes: out of memory",
		  cap);
	b->data = p;
	b->cap = cap ? cap : 1;
	return 0;
}

int ims_buf_reserve(ims_buf *b, size_t cap, ims_error *err)
{
	if (cap <= b->cap && b->data)
		return 0;
	return resize_to(b, cap, err);
}

int ims_buf_grow(ims_buf *b, size_t more, ims_error *err)
{
	RETURN_IF(more > SIZE_MAX / 4 - b->len, err, IMS_ENOMEM,
		  "cannot allocate %zu more bytes: out of memory", more);
	size_t need = b->len + more + 1;
	if (need <= b->cap && b->data)
		return 0;
	/* 64 bytes first: small texts (a file name, a JSON header) are the
	 * common case; doubling keeps a long run of appends linear. */
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	return resize_to(b, cap, err);
}

int ims_buf_append(ims_buf *b, const void *p, size_t n)
{
	if (b->oom)
		return IMS_ENOMEM;
	if (ims_buf_grow(b, n, NULL) < 0) {
		b->oom = 1;
		return IMS_ENOMEM;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int ims_buf_puts(ims_buf *b, const char *s)
{
	return ims_buf_append(b, s, strlen(s));
}

int ims_buf_vprintf(ims_buf *b, const char *fmt, va_list ap)
{
	if (b->oom)
		return IMS_ENOMEM;
	/* one pass into a small stack buffer for the usual short piece */
	va_list ap2;
	va_copy(ap2, ap);
	char small[256];
	int n = vsnprintf(small, sizeof(small), fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		b->oom = 1;
		return IMS_ENOMEM;
	}
	if ((size_t)n < sizeof(small))
		return ims_buf_append(b, small, (size_t)n);
	if (ims_buf_grow(b, (size_t)n, NULL) < 0) {
		b->oom = 1;
		return IMS_ENOMEM;
	}
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int ims_buf_printf(ims_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = ims_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

char *ims_buf_take(ims_buf *b, size_t *len)
{
	if (b->oom || ims_buf_grow(b, 0, NULL) < 0) {
		ims_buf_release(b);
		return NULL;
	}
	b->data[b->len] = '\0';
	char *p = (char *)b->data;
	if (len)
		*len = b->len;
	memset(b, 0, sizeof(*b));
	return p;
}

/* Whether s is a plain decimal number ("-0.5", "+3", "1e-3"): what a
 * spreadsheet reads as a number, not a formula. */
static int plain_number(const char *s)
{
	if (s[strspn(s, "0123456789+-.eE")] != '\0')
		return 0;
	char *end;
	double v = strtod(s, &end);
	return end != s && *end == '\0' && isfinite(v);
}

int ims_csv_quoting(const char *s)
{
	/* a text cell a spreadsheet would run as a formula (class names,
	 * paths and option values are the user's) starts with a ' that
	 * makes it text; a plain number stays a number */
	if (s[0] && strchr("=+-@\t\r", s[0]) && !plain_number(s))
		return 2;
	return strpbrk(s, ",\"\r\n") ? 1 : 0;
}

int ims_buf_csv(ims_buf *b, const char *s)
{
	if (!s)
		return b->oom ? IMS_ENOMEM : 0;
	int q = ims_csv_quoting(s);
	if (!q)
		return ims_buf_puts(b, s);
	ims_buf_puts(b, q == 2 ? "\"'" : "\"");
	for (const char *c = s; *c; c++) {
		if (*c == '"')
			ims_buf_append(b, "\"", 1);
		ims_buf_append(b, c, 1);
	}
	return ims_buf_append(b, "\"", 1);
}
