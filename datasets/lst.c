/*
 * lst.c - im2rec .lst files: reading and writing rows, and the path rules
 * both keep.
 *
 * Lists reach 1.3M rows (ImageNet train), so reading loads the file at once
 * and parses it in place: one pass to count lines (to size the rows array
 * once), one pass over the lines splitting at TABs, no per-line stdio. Each
 * path is its own allocation so callers (and ds_list_release) can free
 * rows individually.
 */
#define _GNU_SOURCE
#include "datasets.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- path rules shared by reading and writing ---------------------------- */

/* Paths are relative to ROOT, or absolute and under it (im2rec users have
 * lists of absolute paths); never with a '..' component, which could climb
 * out of ROOT either way. Whether an absolute path lies under ROOT is
 * known only with ROOT: ds_list_check_paths. */

static const char EMPTY_PATH[] = "empty path";

/* Returns NULL when a list path is acceptable, else why not. */
static const char *bad_path_reason(const char *p, size_t len)
{
	size_t k = 0;
	while (k < len && (p[k] == ' ' || p[k] == '\t' || p[k] == '\r'))
		k++;
	if (k == len)
		return EMPTY_PATH;
	/* A '..' component anywhere: "..", "../x", "x/..", "x/../y". */
	for (size_t i = 0; i + 1 < len; i++) {
		if (p[i] == '.' && p[i + 1] == '.' && (i == 0 || p[i - 1] == '/') &&
		    (i + 2 == len || p[i + 2] == '/'))
			return "has a '..' component; list paths must stay inside "
			       "ROOT";
	}
	return NULL;
}

/* root without trailing slashes into out ("/" gives ""). */
static void strip_slashes(const char *root, char *out, size_t len)
{
	snprintf(out, len, "%s", root);
	size_t n = strlen(out);
	while (n > 0 && out[n - 1] == '/')
		out[--n] = '\0';
}

/* Does absolute path p lie under the folder base (no trailing slash)? */
static int lies_under(const char *p, const char *base)
{
	size_t n = strlen(base);
	return strncmp(p, base, n) == 0 && p[n] == '/' && p[n + 1] != '\0';
}

int ds_list_check_paths(const ds_list *l, size_t first, const char *root,
			size_t *bad_row, ims_error *err)
{
	if (!root)
		return 0;
	/* ROOT as given (when absolute) and as resolved: a list may use either
	 * form of a folder reached through a link. */
	char given[4096] = "", real[4096] = "";
	int have_given = root[0] == '/', have_real = 0;
	if (have_given)
		strip_slashes(root, given, sizeof(given));
	char *r = realpath(root, NULL);
	if (r) {
		strip_slashes(r, real, sizeof(real));
		have_real = 1;
		free(r);
	}
	for (size_t i = first; i < l->count; i++) {
		const char *p = l->items[i].path;
		/* rows that came from elsewhere than a list file (the Python
		 * package's) meet the reader's rule here */
		const char *why = bad_path_reason(p, strlen(p));
		if (why) {
			if (bad_row)
				*bad_row = i;
			return ims_fail(err, IMS_EINVAL, "path '%s' %s", p, why);
		}
		if (p[0] != '/')
			continue;
		if ((have_given && lies_under(p, given)) || (have_real && lies_under(p, real)))
			continue;
		if (bad_row)
			*bad_row = i;
		return ims_fail(err, IMS_EINVAL,
				"path '%s' is not under ROOT '%s' (an absolute path "
				"must lie under ROOT)",
				p, root);
	}
	return 0;
}

size_t ds_path_space_hint(const char *root, const char *path, char *buf,
			  size_t len)
{
	if (len == 0)
		return 0;
	buf[0] = '\0';
	size_t n = strlen(path), a = 0, b = n;
	while (a < n && path[a] == ' ')
		a++;
	while (b > a && path[b - 1] == ' ')
		b--;
	if (a == 0 && b == n)
		return 0;
	const char *where = a && b < n ? "starts and ends with a space" :
			    a ? "starts with a space" : "ends with a space";
	/* the name without the spaces, when that file exists, is what the
	 * row most likely meant: say so, but never pack it in its place */
	char trimmed[4096], full[8192];
	int exists = 0;
	if (b > a && b - a < sizeof(trimmed)) {
		memcpy(trimmed, path + a, b - a);
		trimmed[b - a] = '\0';
		exists = (root ? ims_path_join(full, sizeof(full), root, trimmed, NULL) == 0 :
				 snprintf(full, sizeof(full), "%s", trimmed) < (int)sizeof(full)) &&
			 ims_path_kind(full) == IMS_KIND_FILE;
	}
	char shown[600];
	int w = exists ? snprintf(buf, len, " (the path %s; '%s', without %s, exists: "
				  "fix the list row)", where,
				  ims_escape(trimmed, shown, sizeof(shown)),
				  a && b < n ? "them" : "it") :
			 snprintf(buf, len, " (the path %s)", where);
	return w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1;
}

/* ---- reading ------------------------------------------------------------- */

typedef struct line_ctx {
	const char *file;
	size_t line;
	ims_error *err;
} line_ctx;

static int line_fail(const line_ctx *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int line_fail(const line_ctx *c, int code, const char *fmt, ...)
{
	char why[IMS_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return ims_fail(c->err, code, "cannot read list '%s': line %zu: %s",
			c->file, c->line, why);
}

static int is_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Trims spaces around a field [*b, *e). */
static void trim(char **b, char **e)
{
	while (*b < *e && is_space(**b))
		(*b)++;
	while (*e > *b && is_space((*e)[-1]))
		(*e)--;
}

/* Index column: decimal digits only (im2rec writes %d). */
static int parse_index(const line_ctx *c, char *b, char *e, uint64_t *out)
{
	trim(&b, &e);
	int n = (int)(e - b);
	if (n == 0)
		return line_fail(c, IMS_EFORMAT, "empty index column");
	if (*b == '-')
		return line_fail(c, IMS_EFORMAT, "index '%.*s' is negative",
				 n > 40 ? 40 : n, b);
	uint64_t v = 0;
	for (char *p = b; p < e; p++) {
		if (*p < '0' || *p > '9')
			return line_fail(c, IMS_EFORMAT,
					 "index '%.*s' is not a non-negative integer",
					 n > 40 ? 40 : n, b);
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return line_fail(c, IMS_EFORMAT, "index '%.*s' is too large",
					 n > 40 ? 40 : n, b);
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/*
 * A plain decimal number: [+-]digits[.digits][(e|E)[+-]digits], at least
 * one digit before the exponent. Rejects what strtod would also take but no
 * list should hold: "nan", "inf", hex floats, empty strings.
 */
static int is_decimal(const char *b, const char *e)
{
	const char *p = b;
	int digits = 0;
	if (p < e && (*p == '+' || *p == '-'))
		p++;
	while (p < e && *p >= '0' && *p <= '9')
		p++, digits++;
	if (p < e && *p == '.') {
		p++;
		while (p < e && *p >= '0' && *p <= '9')
			p++, digits++;
	}
	if (!digits)
		return 0;
	if (p < e && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < e && (*p == '+' || *p == '-'))
			p++;
		int ed = 0;
		while (p < e && *p >= '0' && *p <= '9')
			p++, ed++;
		if (!ed)
			return 0;
	}
	return p == e;
}

/* Parses a label field into *v; col is 1-based among label columns. */
static int parse_number(const line_ctx *c, char *b, char *e, int col,
			double *v)
{
	trim(&b, &e);
	int n = (int)(e - b);
	int shown = n > 40 ? 40 : n;
	if (n == 0)
		return line_fail(c, IMS_EFORMAT, "label column %d is empty", col);
	if (!is_decimal(b, e)) {
		if (col == 1)
			return line_fail(c, IMS_EFORMAT, "label '%.*s' is not a number",
					 shown, b);
		return line_fail(c, IMS_EFORMAT,
				 "label column %d: '%.*s' is not a number", col, shown,
				 b);
	}
	char save = *e;
	*e = '\0'; /* in place: the byte after a field is a TAB or line end */
	errno = 0;
	double d = strtod(b, NULL);
	*e = save;
	if (!isfinite(d))
		return line_fail(c, IMS_EFORMAT,
				 "label column %d: '%.*s' is not a finite number", col,
				 shown, b);
	*v = d;
	return 0;
}

/*
 * First label: a class id, written as decimal digits with at most a
 * fraction of zeros (`3`, `3.000000`: im2rec writes labels with %f).
 * Checked on the text rather than on strtod's value: `1e2` would be 100
 * and `3.00000000000000000001` would round to 3, both silently.
 */
static int parse_label(const line_ctx *c, char *b, char *e, int32_t *out)
{
	char *tb = b, *te = e;
	trim(&tb, &te);
	int n = (int)(te - tb);
	int shown = n > 40 ? 40 : n;
	if (n > 0 && n <= 9) {
		int32_t v = 0;
		char *p = tb;
		for (; p < te && *p >= '0' && *p <= '9'; p++)
			v = v * 10 + (*p - '0');
		if (p == te) {
			*out = v;
			return 0;
		}
	}
	double d;
	FORWARD_IF_ERR(parse_number(c, b, e, 1, &d));
	char *p = tb;
	if (*p == '-')
		return line_fail(c, IMS_EFORMAT, "label '%.*s' is negative", shown,
				 tb);
	if (memchr(tb, 'e', (size_t)n) || memchr(tb, 'E', (size_t)n))
		return line_fail(c, IMS_EFORMAT,
				 "label '%.*s' has an exponent; a label is a class "
				 "id written as an integer",
				 shown, tb);
	if (*p == '+')
		p++;
	int64_t v = 0;
	int big = 0;
	for (; p < te && *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (*p - '0');
		if (v > INT32_MAX) {
			big = 1;
			v = INT32_MAX;
		}
	}
	if (p < te && *p == '.')
		for (p++; p < te; p++)
			if (*p != '0')
				return line_fail(c, IMS_EFORMAT,
						 "label '%.*s' is not an integer",
						 shown, tb);
	if (big)
		return line_fail(c, IMS_EFORMAT, "label '%.*s' is too large", shown,
				 tb);
	*out = (int32_t)v;
	return 0;
}

/* Reads rows into l; when lines is not NULL, *lines gets the line number
 * of every row appended (malloc'd, the caller frees). */
static int read_list(const char *path, ds_list *l, size_t **lines,
		     ims_error *err)
{
	uint8_t *data = NULL;
	size_t len = 0;
	int rc = ims_read_file(path, &data, &len, 0, err);
	if (rc < 0)
		return rc; /* "cannot open 'x.lst': No such file or directory" */
	char *buf = (char *)data;
	char *end = buf + len;
	size_t start_count = l->count;
	line_ctx c = {path, 0, err};

	/* A NUL byte would silently cut a path short: find its line. */
	char *nul = memchr(buf, '\0', len);
	if (nul) {
		c.line = 1;
		for (char *p = buf; p < nul; p++)
			c.line += *p == '\n';
		rc = line_fail(&c, IMS_EFORMAT, "contains a NUL byte (not a text "
						"list?)");
		goto out;
	}

	size_t n_lines = 1;
	for (char *p = buf; (p = memchr(p, '\n', (size_t)(end - p))); p++)
		n_lines++;
	GOTO_IF_ERR(out, rc, ds_list_reserve(l, l->count + n_lines, err));
	if (lines) {
		*lines = malloc(n_lines * sizeof(size_t));
		if (!*lines)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM,
				  "cannot read list '%s': out of memory", path);
	}

	char *p = buf;
	if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
		p += 3; /* UTF-8 byte order mark from Windows editors */
	int want_cols = 0;
	size_t first_line = 0;
	float extra[DS_MAX_EXTRA_LABELS];
	/* index, first label, extra labels, path; +1 for the end sentinel */
	enum { MAX_COLS = DS_MAX_EXTRA_LABELS + 3 };
	char *cols[MAX_COLS + 1];
	while (p < end) {
		c.line++;
		char *eol = memchr(p, '\n', (size_t)(end - p));
		char *next = eol ? eol + 1 : end;
		char *le = eol ? eol : end;
		if (le > p && le[-1] == '\r')
			le--;
		char *q = p;
		while (q < le && is_space(*q))
			q++;
		if (q == le) { /* blank line */
			p = next;
			continue;
		}
		/* Column starts; cols[k] .. cols[k+1]-1 is column k. */
		int ncols = 0;
		cols[ncols++] = p;
		for (char *t = p; (t = memchr(t, '\t', (size_t)(le - t))); t++) {
			if (ncols == MAX_COLS) {
				ncols++;
				break;
			}
			cols[ncols++] = t + 1;
		}
		if (ncols > MAX_COLS)
			GOTO_FAIL(out, rc, err, IMS_EFORMAT,
				  "cannot read list '%s': line %zu: more than %d "
				  "label columns",
				  path, c.line, DS_MAX_EXTRA_LABELS + 1);
		if (ncols < 3)
			GOTO_FAIL(out, rc, err, IMS_EFORMAT,
				  "cannot read list '%s': line %zu: %d column%s, "
				  "expected index<TAB>label<TAB>path",
				  path, c.line, ncols, ncols == 1 ? "" : "s");
		if (!want_cols) {
			want_cols = ncols;
			first_line = c.line;
		} else if (ncols != want_cols) {
			GOTO_FAIL(out, rc, err, IMS_EFORMAT,
				  "cannot read list '%s': line %zu: %d label "
				  "columns, but line %zu has %d",
				  path, c.line, ncols - 2, first_line,
				  want_cols - 2);
		}
		cols[ncols] = le + 1; /* so column k ends at cols[k+1] - 1 */

		uint64_t index = 0;
		int32_t label = 0;
		GOTO_IF_ERR(out, rc, parse_index(&c, cols[0], cols[1] - 1, &index));
		GOTO_IF_ERR(out, rc, parse_label(&c, cols[1], cols[2] - 1, &label));
		int n_extra = ncols - 3;
		for (int k = 0; k < n_extra; k++) {
			double d;
			GOTO_IF_ERR(out, rc,
				    parse_number(&c, cols[2 + k], cols[3 + k] - 1,
						 k + 2, &d));
			if (fabs(d) > FLT_MAX) {
				rc = line_fail(&c, IMS_EFORMAT,
					       "label column %d: %g is out of float "
					       "range",
					       k + 2, d);
				goto out;
			}
			extra[k] = (float)d;
		}
		char *pb = cols[ncols - 1];
		size_t plen = (size_t)(le - pb);
		const char *why = bad_path_reason(pb, plen);
		if (why) {
			if (why == EMPTY_PATH)
				rc = line_fail(&c, IMS_EFORMAT, "%s", why);
			else
				rc = line_fail(&c, IMS_EFORMAT, "path '%.*s' %s",
					       plen > 200 ? 200 : (int)plen, pb, why);
			goto out;
		}
		*le = '\0'; /* in place: ds_list_append copies the path */
		GOTO_IF_ERR(out, rc,
			    ds_list_append(l, index, label, extra, n_extra, pb, err));
		if (lines)
			(*lines)[l->count - 1 - start_count] = c.line;
		p = next;
	}
	rc = 0;
out:
	if (rc < 0) {
		for (size_t i = start_count; i < l->count; i++) {
			free(l->items[i].path);
			free(l->items[i].extra);
		}
		l->count = start_count;
		if (lines) {
			free(*lines);
			*lines = NULL;
		}
	}
	free(data);
	return rc;
}

int ds_list_read(const char *path, ds_list *l, ims_error *err)
{
	return read_list(path, l, NULL, err);
}

void ds_list_read_opts_init(ds_list_read_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->max_label = DS_LABEL_AUTO;
}

/* Drops rows first .. count-1 of l. */
static void drop_rows(ds_list *l, size_t first)
{
	for (size_t i = first; i < l->count; i++) {
		free(l->items[i].path);
		free(l->items[i].extra);
	}
	l->count = first;
}

int ds_list_read_with(const char *path, const ds_list_read_opts *o,
		      ds_list *l, ims_error *err)
{
	ds_list_read_opts defaults;
	if (!o) {
		ds_list_read_opts_init(&defaults);
		o = &defaults;
	}
	size_t first = l->count;
	size_t *lines = NULL;
	FORWARD_IF_ERR(read_list(path, l, &lines, err));
	size_t bad = SIZE_MAX;
	int rc = ds_list_check_paths(l, first, o->root, &bad, err);
	if (rc == 0)
		rc = ds_list_check_labels(l, first, o->max_label, &bad, err);
	if (rc < 0) {
		if (rc == IMS_EINVAL && bad != SIZE_MAX && err) {
			line_ctx c = {path, lines[bad - first], err};
			char why[IMS_ERRMSG_MAX];
			snprintf(why, sizeof(why), "%s", err->msg);
			rc = line_fail(&c, IMS_EFORMAT, "%s", why);
		}
		drop_rows(l, first);
	}
	free(lines);
	return rc;
}

/* ---- writing ------------------------------------------------------------- */

int ds_format_extra_label(float v, char *buf, size_t len)
{
	if (!isfinite(v))
		return -1;
	int n = snprintf(buf, len, "%f", (double)v);
	if (n < 0 || (size_t)n >= len)
		return -1;
	if (strtof(buf, NULL) == v)
		return n;
	/* the fewest digits that read back: what a person wrote, usually */
	for (int digits = 6;; digits++) {
		n = snprintf(buf, len, "%.*g", digits, (double)v);
		if (n < 0 || (size_t)n >= len)
			return -1;
		if (digits == 9 || strtof(buf, NULL) == v)
			return n;
	}
}

/* Appends v in decimal; the caller reserved 20 bytes. */
static void sb_put_u64(ims_buf *b, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		b->text[b->len++] = tmp[--n];
}

int ds_list_write(const char *path, const ds_list *l, ims_error *err)
{
	ims_buf b = {0};
	int rc = ds_list_format(l, path, &b, err);
	/* its message names path once: "cannot write 'PATH': ..." (a
	 * context here said it twice) */
	if (!rc)
		rc = ims_write_file_atomic(path, b.text ? b.text : "", b.len, err);
	ims_buf_release(&b);
	return rc;
}

int ds_list_format(const ds_list *l, const char *path, ims_buf *out,
		   ims_error *err)
{
	ims_buf b = {0};
	int rc = 0;
	for (size_t i = 0; i < l->count; i++) {
		const ds_entry *e = &l->items[i];
		size_t plen = strlen(e->path);
		const char *why = bad_path_reason(e->path, plen);
		if (!why && strpbrk(e->path, "\t\n\r"))
			why = "holds a TAB or line break, which the list format "
			      "cannot store";
		if (why)
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "cannot write list '%s': row %zu: path '%s' %s",
				  path, i, e->path, why);
		if (e->label < 0)
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "cannot write list '%s': row %zu: label %d is "
				  "negative",
				  path, i, (int)e->label);
		if (e->n_extra < 0 || e->n_extra > DS_MAX_EXTRA_LABELS)
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "cannot write list '%s': row %zu: %d extra labels",
				  path, i, e->n_extra);
		/* 20 index + TAB + 10 label + TAB + path + LF, extra below */
		if (ims_buf_grow(&b, 34 + plen, NULL) != 0)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM,
				  "cannot write list '%s': out of memory", path);
		sb_put_u64(&b, e->index);
		b.text[b.len++] = '\t';
		sb_put_u64(&b, (uint64_t)e->label);
		b.text[b.len++] = '\t';
		for (int k = 0; k < e->n_extra; k++) {
			char num[64];
			double v = e->extra[k];
			if (!isfinite(v))
				GOTO_FAIL(out, rc, err, IMS_EINVAL,
					  "cannot write list '%s': row %zu: extra "
					  "label %d is not finite",
					  path, i, k + 1);
			int n = ds_format_extra_label(e->extra[k], num, sizeof(num) - 1);
			if (n < 0)
				GOTO_FAIL(out, rc, err, IMS_EINVAL,
					  "cannot write list '%s': row %zu: extra "
					  "label %d is too large",
					  path, i, k + 1);
			num[n++] = '\t';
			if (ims_buf_grow(&b, (size_t)n + plen + 2, NULL) != 0)
				GOTO_FAIL(out, rc, err, IMS_ENOMEM,
					  "cannot write list '%s': out of memory",
					  path);
			memcpy(b.text + b.len, num, (size_t)n);
			b.len += (size_t)n;
		}
		memcpy(b.text + b.len, e->path, plen);
		b.len += plen;
		b.text[b.len++] = '\n';
	}
	*out = b;
	return 0;
out:
	ims_buf_release(&b);
	return rc;
}
