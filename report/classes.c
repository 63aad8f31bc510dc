/*
 * classes.c - a run folder's evaluation files (eval.json, confusion.csv:
 * written by imshard-train's last validation, or by `imshard eval -o` into
 * the folder) read into rep_classes, and drawn on the run's part of the
 * page: per-class accuracy and the confusion matrix.
 *
 * Like the logs, the files are untrusted: what does not parse, or a
 * confusion.csv that does not agree with eval.json (another evaluation's,
 * one being rewritten), becomes a diagnostic and is not drawn.
 */
#define _GNU_SOURCE
#include "report_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_COUNT 1e15      /* records per class, plausibly */
#define MIN_FIELD 1024      /* bytes of a confusion.csv field kept at least
			       (counts); names: the longest of eval.json's */

/* ---- eval.json -------------------------------------------------------------- */

static int bad(rep_run *run, const char *file, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A diagnostic on file (0 or IMS_ENOMEM). */
static int bad(rep_run *run, const char *file, const char *fmt, ...)
{
	char why[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return rep_run_diag(run, file, why);
}

/* A number in [lo, hi], integral when integer; NAN when absent or not. */
static double num(const cJSON *o, const char *key, double lo, double hi, int integer)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
	    v->valuedouble > hi || (integer && v->valuedouble != floor(v->valuedouble)))
		return NAN;
	return v->valuedouble;
}

static char *str(const cJSON *o, const char *key, int *oom)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!cJSON_IsString(v))
		return NULL;
	char *s = strdup(v->valuestring);
	*oom |= !s;
	return s;
}

/*
 * An upper bound on the values of a JSON text: 1 + its commas and opening
 * brackets outside strings (a container of k values holds k - 1 commas).
 * What a parse would make a node of each for, counted without allocating.
 */
static size_t json_values(const char *s, size_t len)
{
	size_t n = 1;
	int in_string = 0;
	for (size_t i = 0; i < len; i++) {
		const char ch = s[i];
		if (in_string) {
			if (ch == '\\')
				i++; /* the escaped character, a quote among them */
			else if (ch == '"')
				in_string = 0;
		} else if (ch == '"')
			in_string = 1;
		else if (ch == ',' || ch == '[' || ch == '{')
			n++;
	}
	return n;
}

void rep_classes_release(rep_classes *c)
{
	if (!c)
		return;
	free(c->program);
	free(c->split);
	for (int i = 0; c->names && i < c->n; i++)
		free(c->names[i]);
	free(c->names);
	free(c->records);
	free(c->top1);
	free(c->top5);
	free(c->matrix);
	free(c->confused);
	memset(c, 0, sizeof(*c));
}

/* A class's top1 and top5: numbers in [0, 1] when it has records; without
 * one it has no accuracy (NAN): null, or an older file's 0. 1 valid. */
static int read_scores(const cJSON *e, double records, double *top1,
		       double *top5)
{
	*top1 = num(e, "top1", 0, 1, 0);
	*top5 = num(e, "top5", 0, 1, 0);
	if (isnan(records))
		return 0;
	if (records > 0)
		return !isnan(*top1) && !isnan(*top5);
	const int ok = (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(e, "top1")) &&
			cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(e, "top5"))) ||
		       (*top1 == 0 && *top5 == 0);
	*top1 = *top5 = NAN;
	return ok;
}

/* eval.json's per_class array into c. 1 read, 0 bad (diagnosed), < 0
 * IMS_ENOMEM. */
static int read_per_class(rep_run *run, const char *file, const cJSON *o,
			  rep_classes *c)
{
	const cJSON *pc = cJSON_GetObjectItemCaseSensitive(o, "per_class");
	int n = cJSON_IsArray(pc) ? cJSON_GetArraySize(pc) : 0;
	if (n < 1 || n > REP_MAX_CLASSES) {
		int rc = bad(run, file, "'per_class' is not an array of 1 to %d classes: "
			     "per-class accuracy not drawn", REP_MAX_CLASSES);
		return rc < 0 ? rc : 0;
	}
	c->n = n;
	c->names = calloc((size_t)n, sizeof(char *));
	c->records = malloc((size_t)n * sizeof(double));
	c->top1 = malloc((size_t)n * sizeof(double));
	c->top5 = malloc((size_t)n * sizeof(double));
	if (!c->names || !c->records || !c->top1 || !c->top5)
		return IMS_ENOMEM;
	int i = 0, oom = 0;
	size_t not_text = 0; /* names that are not UTF-8 */
	const cJSON *e;
	cJSON_ArrayForEach(e, pc)
	{
		c->names[i] = str(e, "name", &oom);
		c->records[i] = num(e, "records", 0, MAX_COUNT, 1);
		if (oom)
			return IMS_ENOMEM;
		if (!c->names[i] || !read_scores(e, c->records[i], &c->top1[i], &c->top5[i])) {
			int rc = bad(run, file, "per_class[%d] lacks a name, records, top1 or "
				     "top5 (or one is out of range): per-class accuracy not drawn",
				     i);
			return rc < 0 ? rc : 0;
		}
		not_text += !ims_utf8_valid(c->names[i], NULL);
		i++;
	}
	char what[64];
	snprintf(what, sizeof(what), "%zu class name%s", not_text, not_text == 1 ? "" : "s");
	int rc = rep_diag_text(run, file, 0, not_text, what);
	return rc < 0 ? rc : 1;
}

/* ---- confusion.csv ----------------------------------------------------------- */

/*
 * confusion.csv is read as a stream, never whole: a class count x class
 * count table grows with the square of the classes (at least 2 bytes a
 * cell: 20 GB at REP_MAX_CLASSES), so no fixed read limit fits both a
 * large evaluation and a junk file. Memory is the chunk, one field, and
 * the matrix when it is drawn.
 */
#define CSV_CHUNK 65536

typedef struct csv_in {
	FILE *f;
	char *buf;          /* CSV_CHUNK bytes read ahead */
	size_t pos, end;
	uint64_t total;     /* bytes read so far */
	uint64_t limit;     /* past this many the file reads as ended */
	int over, failed;   /* past the limit; a read error (errno kept) */
	int err_no;
} csv_in;

/* The next byte, not taken; EOF at the end (or past the limit, or on a
 * read error: flagged). */
static int in_peek(csv_in *in)
{
	if (in->pos == in->end) {
		if (in->over || in->failed || feof(in->f))
			return EOF;
		in->pos = 0;
		in->end = fread(in->buf, 1, CSV_CHUNK, in->f);
		if (in->end == 0) {
			if (ferror(in->f)) {
				in->failed = 1;
				in->err_no = errno ? errno : EIO;
			}
			return EOF;
		}
		in->total += in->end;
		if (in->total > in->limit) {
			/* grown since its size was taken: stop at the limit */
			in->over = 1;
			in->end = 0;
			return EOF;
		}
	}
	return (unsigned char)in->buf[in->pos];
}

/*
 * The next CSV field into out (at most cap - 1 bytes): quoted fields may
 * hold commas, doubled quotes and line breaks. Returns ',' when another
 * field of the row follows, '\n' at the end of a row (or of the text), 0
 * when the field is malformed or longer than cap - 1 bytes (cut, it would
 * be read as another name or count).
 */
static int csv_next(csv_in *in, char *out, size_t cap)
{
	size_t n = 0;
	int cut = 0, ch;
	if (in_peek(in) == '"') {
		for (in->pos++;;) {
			if ((ch = in_peek(in)) == EOF)
				return 0;
			in->pos++;
			if (ch == '"') {
				if (in_peek(in) != '"')
					break;
				in->pos++;
			}
			if (n + 1 < cap)
				out[n++] = (char)ch;
			else
				cut = 1;
		}
	} else
		while ((ch = in_peek(in)) != EOF && ch != ',' && ch != '\n' && ch != '\r') {
			in->pos++;
			if (n + 1 < cap)
				out[n++] = (char)ch;
			else
				cut = 1;
		}
	out[n] = '\0';
	if (cut)
		return 0;
	if (in_peek(in) == '\r')
		in->pos++;
	ch = in_peek(in);
	if (ch == EOF || ch == '\n') {
		in->pos += ch == '\n';
		return '\n';
	}
	if (ch != ',')
		return 0;
	in->pos++;
	return ',';
}

/* Whether a field read is the class name as written: itself, or with the '
 * that the writers (ims_csv_quoting) put first to a name a spreadsheet
 * would run as a formula ("=x", "-x", "@x"). */
static int is_name(const char *field, const char *name)
{
	if (!strcmp(field, name))
		return 1;
	return field[0] == '\'' && ims_csv_quoting(name) == 2 && !strcmp(field + 1, name);
}

/* Decimal digits of a whole number v >= 0. */
static uint64_t digits(double v)
{
	uint64_t d = 1;
	for (; v >= 10; v /= 10)
		d++;
	return d;
}

/*
 * The most bytes of a confusion.csv that goes with c: what imshard-train
 * and `imshard eval -o` write for its classes (a name quoted with a '
 * first, each quote doubled, at most 2 x its bytes + 3; a count at most
 * the digits of its row's records, since the row's counts add up to
 * them), CRLF line ends allowed. A larger file is not the evaluation's.
 */
static uint64_t confusion_limit(const rep_classes *c)
{
	const uint64_t n = (uint64_t)c->n;
	uint64_t b = sizeof("true/predicted") + 1;
	for (int i = 0; i < c->n; i++) {
		const uint64_t name = 2 * (uint64_t)strlen(c->names[i]) + 3;
		b += 1 + name;                                    /* header */
		b += name + n * (1 + digits(c->records[i])) + 2; /* its row */
	}
	return b;
}

/* Keeps the REP_MAX_CONFUSED largest off-diagonal counts, largest first
 * (ties: the earlier cell first). */
static void keep_confused(rep_classes *c, int truth, int pred, double count)
{
	size_t k = c->n_confused;
	if (k == REP_MAX_CONFUSED && count <= c->confused[k - 1].count)
		return;
	if (k < REP_MAX_CONFUSED)
		c->n_confused++;
	else
		k--;
	while (k > 0 && c->confused[k - 1].count < count) {
		c->confused[k] = c->confused[k - 1];
		k--;
	}
	c->confused[k] = (rep_confused){truth, pred, count};
}

/*
 * confusion.csv against c (names, per-class records and top-1 hits). 1
 * read, 0 absent or bad (diagnosed), < 0 IMS_ENOMEM.
 */
static int read_confusion(rep_run *run, const char *path, rep_classes *c)
{
	struct stat st;
	int fd = -1;
	ims_error e;
	if (ims_open_read(path, &fd, &st, &e) < 0) {
		if (e.code == IMS_ENOTFOUND)
			return 0;
		int rc = bad(run, path, "%s: the confusion matrix is not drawn", e.msg);
		return rc < 0 ? rc : 0;
	}
	const uint64_t limit = confusion_limit(c);
	char what[80];
	snprintf(what, sizeof(what), "eval.json's %d %s", c->n,
		 c->n == 1 ? "class takes" : "classes take");
	/* told by its size before a byte is read (confusion_limit says why) */
	if ((uint64_t)st.st_size > limit) {
		close(fd);
		int rc = rep_diag_size(run, path, (uint64_t)st.st_size, limit, what,
				       "the confusion matrix is not drawn");
		return rc < 0 ? rc : 0;
	}
	csv_in in = {fdopen(fd, "rb"), malloc(CSV_CHUNK), 0, 0, 0, limit, 0, 0, 0};
	const size_t n = (size_t)c->n;
	/* a field is kept up to the longest name and one byte more: a name
	 * of any length is compared whole (with a formula's guard too), and
	 * a longer field, cut, still matches none */
	size_t cap = MIN_FIELD;
	for (size_t k = 0; k < n; k++)
		cap = strlen(c->names[k]) + 2 > cap ? strlen(c->names[k]) + 2 : cap;
	char *field = malloc(cap);
	c->confused = calloc(REP_MAX_CONFUSED, sizeof(rep_confused));
	if (n <= REP_MAX_MATRIX)
		c->matrix = calloc(n * n, sizeof(double));
	int rc = 1;
	if (!in.f || !in.buf || !field || !c->confused ||
	    (n <= REP_MAX_MATRIX && !c->matrix)) {
		if (!in.f)
			close(fd);
		rc = IMS_ENOMEM;
		goto out;
	}
	const char *why = NULL;
	int sep = csv_next(&in, field, cap);
	if (sep != ',' || strcmp(field, "true/predicted"))
		why = "does not start with 'true/predicted'";
	for (size_t j = 0; !why && j < n; j++) {
		sep = csv_next(&in, field, cap);
		if (!sep || (sep == '\n') != (j == n - 1) || !is_name(field, c->names[j]))
			why = "its columns are not eval.json's classes";
	}
	for (size_t i = 0; !why && i < n; i++) {
		sep = csv_next(&in, field, cap);
		if (sep != ',' || !is_name(field, c->names[i])) {
			why = "its rows are not eval.json's classes";
			break;
		}
		double sum = 0, hit = NAN;
		for (size_t j = 0; j < n; j++) {
			sep = csv_next(&in, field, cap);
			char *tail;
			errno = 0;
			double v = strtod(field, &tail);
			if (!sep || (sep == '\n') != (j == n - 1) || !*field || *tail ||
			    errno || !(v >= 0 && v <= MAX_COUNT) || v != floor(v)) {
				why = "a count is not a whole number";
				break;
			}
			sum += v;
			if (i == j)
				hit = v;
			else if (v > 0)
				keep_confused(c, (int)i, (int)j, v);
			if (c->matrix)
				c->matrix[i * n + j] = v;
		}
		/* the hits are top1 x records rounded; eval.json prints
		 * top1 to full precision */
		if (!why && (sum != c->records[i] ||
			     fabs(hit - c->top1[i] * c->records[i]) > 0.5))
			why = "its counts disagree with eval.json's (written by another "
			      "evaluation?)";
	}
	if (!why && in_peek(&in) != EOF)
		why = "it has rows after the last class";
	/* what ended the text early decides, not what was read of it */
	char failed[160];
	if (in.failed) {
		snprintf(failed, sizeof(failed), "cannot read it: %s", strerror(in.err_no));
		why = failed;
	}
	if (in.over) {
		fclose(in.f);
		in.f = NULL;
		why = NULL;
		free(c->matrix);
		c->matrix = NULL;
		c->n_confused = 0;
		rc = rep_diag_size(run, path, in.total, limit, what,
				   "the confusion matrix is not drawn");
		rc = rc < 0 ? rc : 0;
	}
	if (why) {
		free(c->matrix);
		c->matrix = NULL;
		c->n_confused = 0;
		rc = bad(run, path, "%s: the confusion matrix is not drawn", why);
		rc = rc < 0 ? rc : 0;
	} else if (rc == 1)
		c->has_confusion = 1;
out:
	if (in.f)
		fclose(in.f);
	free(in.buf);
	free(field);
	return rc;
}

int rep_classes_load(rep_run *run, const char *dir, ims_error *err)
{
	char path[4096], csv[4096];
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), dir, "eval.json", err));
	FORWARD_IF_ERR(ims_path_join(csv, sizeof(csv), dir, "confusion.csv", err));
	struct stat st;
	const int found = stat(path, &st) == 0;
	if (!found && errno == ENOENT)
		return 0; /* no evaluation in this folder: nothing to draw */
	char what[80];
	snprintf(what, sizeof(what), "an evaluation of up to %d classes takes",
		 REP_MAX_CLASSES);
	int rc = 0, oom = 0;
	/* REP_MAX_EVAL and REP_MAX_EVAL_VALUES say why: neither the bytes
	 * nor the nodes of a junk file are allocated */
	if (found && S_ISREG(st.st_mode) && (uint64_t)st.st_size > REP_MAX_EVAL) {
		rc = rep_diag_size(run, path, (uint64_t)st.st_size, REP_MAX_EVAL, what,
				   "not drawn");
		return rc < 0 ? ims_fail(err, rc, "cannot read '%s': out of memory", path) : 0;
	}
	uint8_t *data = NULL;
	size_t len = 0;
	ims_error e;
	if (ims_read_file(path, &data, &len, REP_MAX_EVAL, &e) < 0) {
		if (e.code == IMS_ENOMEM)
			return ims_fail(err, IMS_ENOMEM, "%s", e.msg);
		rc = bad(run, path, "%s: not drawn", e.msg);
		return rc < 0 ? ims_fail(err, rc, "cannot read '%s': out of memory", path) : 0;
	}
	const size_t values = json_values((const char *)data, len);
	if (values > REP_MAX_EVAL_VALUES) {
		free(data);
		rc = bad(run, path, "%zu JSON values in %zu bytes, more than %s "
			 "(limit %zu values): not drawn",
			 values, len, what, REP_MAX_EVAL_VALUES);
		return rc < 0 ? ims_fail(err, rc, "cannot read '%s': out of memory", path) : 0;
	}
	cJSON *o = ims_json_parse((const char *)data, len, 0, NULL, &oom);
	free(data);
	if (!o && oom)
		return ims_fail(err, IMS_ENOMEM, "cannot read '%s': out of memory", path);
	rep_classes *c = calloc(1, sizeof(*c));
	if (!c) {
		rc = IMS_ENOMEM;
		goto out;
	}
	if (!cJSON_IsObject(o)) {
		rc = bad(run, path, "not a JSON object (truncated?): ignored");
		goto out;
	}
	c->program = str(o, "program", &oom);
	c->split = str(o, "split", &oom);
	double epoch = num(o, "epoch", 0, 1e7, 1);
	c->epoch = isnan(epoch) ? -1 : (int)epoch;
	c->n_records = num(o, "records", 0, MAX_COUNT, 1);
	c->top1_all = num(o, "top1", 0, 1, 0);
	c->top5_all = num(o, "top5", 0, 1, 0);
	c->loss = num(o, "loss", 0, 1e300, 0);
	if (oom) {
		rc = IMS_ENOMEM;
		goto out;
	}
	if (rep_diag_text(run, path, 0, c->program && !ims_utf8_valid(c->program, NULL),
			  "'program'") < 0 ||
	    rep_diag_text(run, path, 0, c->split && !ims_utf8_valid(c->split, NULL),
			  "'split'") < 0) {
		rc = IMS_ENOMEM;
		goto out;
	}
	rc = read_per_class(run, path, o, c);
	if (rc == 1) {
		rc = read_confusion(run, csv, c);
		if (rc >= 0) {
			run->classes = c;
			c = NULL;
			rc = 0;
		}
	}
out:
	cJSON_Delete(o);
	rep_classes_release(c);
	free(c);
	if (rc == IMS_ENOMEM)
		return ims_fail(err, IMS_ENOMEM, "cannot read '%s': out of memory", path);
	return rc < 0 ? rc : 0;
}

/* ---- drawing ------------------------------------------------------------------ */

#define CW 480.0
#define FONT "font-family=\"sans-serif\" font-size=\"11\""

/* Classes in the order drawn: all in label order when few, else the
 * REP_MAX_BARS of lowest top-1 (ties: fewer top-5 hits, then label). */
static const rep_classes *g_sort; /* qsort has no context argument */

static int cmp_worst(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	const rep_classes *c = g_sort;
	/* classes without a record (no accuracy, NAN) last: they are not
	 * the worst, they were not measured */
	const int nx = isnan(c->top1[x]), ny = isnan(c->top1[y]);
	if (nx != ny)
		return nx - ny;
	if (nx)
		return x - y;
	if (c->top1[x] != c->top1[y])
		return c->top1[x] < c->top1[y] ? -1 : 1;
	if (c->top5[x] != c->top5[y])
		return c->top5[x] < c->top5[y] ? -1 : 1;
	return x - y;
}

/* A class's label on the page: its name, cut past 24 bytes (what fits
 * left of the bars; the bar's tooltip has it whole). */
static void short_name(ims_buf *b, const char *s)
{
	size_t n = strlen(s);
	if (n <= 24) {
		rb_html(b, s);
		return;
	}
	const size_t k = ims_utf8_prefix(s, 22);
	char cut[32];
	memcpy(cut, s, k);
	cut[k] = '\0';
	rb_html(b, cut);
	ims_buf_puts(b, "&hellip;");
}

/* Horizontal bars: top-5 (light) behind top-1, one row per class. */
static void accuracy_bars(ims_buf *b, const rep_classes *c, const int *order,
			  size_t n, size_t run_i)
{
	const double row = 16, top = 34, left = 170, right = 60;
	const double pw = CW - left - right, h = top + row * (double)n + 24;
	ims_buf_printf(b, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" id=\"per-class-%zu\" "
		     "data-chart=\"per-class\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" "
		     "role=\"img\" aria-label=\"Per-class accuracy\"><title>Per-class accuracy</title>"
		     "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>"
		     "<text x=\"%.0f\" y=\"16\" " FONT " font-weight=\"bold\" text-anchor=\"middle\">"
		     "Per-class accuracy</text>",
		  run_i, CW, h, CW, h, CW, h, CW / 2);
	ims_buf_printf(b, "<rect x=\"%.0f\" y=\"22\" width=\"10\" height=\"8\" fill=\"%s\"/>"
		     "<text x=\"%.0f\" y=\"30\" " FONT ">top-1</text>"
		     "<rect x=\"%.0f\" y=\"22\" width=\"10\" height=\"8\" fill=\"%s\" opacity=\"0.3\"/>"
		     "<text x=\"%.0f\" y=\"30\" " FONT ">top-5</text>",
		  left, svg_color(0), left + 14, left + 60, svg_color(0), left + 74);
	for (int t = 0; t <= 4; t++) {
		double x = left + pw * t / 4;
		ims_buf_printf(b, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/>"
			     "<text x=\"%.1f\" y=\"%.0f\" " FONT " text-anchor=\"middle\">%d%%</text>",
			  x, top, x, top + row * (double)n, x, top + row * (double)n + 14, 25 * t);
	}
	char n1[REP_NUM], n2[REP_NUM];
	for (size_t r = 0; r < n; r++) {
		int k = order[r];
		double y = top + row * (double)r;
		ims_buf_printf(b, "<text x=\"%.0f\" y=\"%.1f\" " FONT " text-anchor=\"end\">",
			  left - 6, y + 12);
		short_name(b, c->names[k]);
		ims_buf_puts(b, "</text>");
		if (isnan(c->top1[k])) { /* no record: no bar, not a 0% one */
			ims_buf_printf(b, "<text x=\"%.0f\" y=\"%.1f\" " FONT
				     " fill=\"#888\">no records</text>",
				  left + 4, y + 12);
			continue;
		}
		ims_buf_printf(b, "<rect class=\"mark\" x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" "
			     "fill=\"%s\" opacity=\"0.3\"/>",
			  left, y + 2, pw * c->top5[k], svg_color(0));
		ims_buf_printf(b, "<rect class=\"mark\" x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"12\" "
			     "fill=\"%s\"><title>",
			  left, y + 2, pw * c->top1[k], svg_color(0));
		rb_html(b, c->names[k]);
		ims_buf_printf(b, ": top-1 %s, top-5 %s of %.0f records</title></rect>",
			  rep_fmt_pct_n(n1, c->top1[k]), rep_fmt_pct_n(n2, c->top5[k]),
			  c->records[k]);
		ims_buf_printf(b, "<text x=\"%.0f\" y=\"%.1f\" " FONT ">%s</text>",
			  left + pw + 4, y + 12, rep_fmt_pct_n(n1, c->top1[k]));
	}
	ims_buf_puts(b, "</svg>\n");
}

/* The matrix as a table: counts, each cell shaded by its share of the
 * true class's records. */
static void matrix_table(ims_buf *b, const rep_classes *c)
{
	const size_t n = (size_t)c->n;
	ims_buf_puts(b, "<table class=\"confusion\"><tr><th class=\"l\">true \\ predicted</th>");
	for (size_t j = 0; j < n; j++) {
		ims_buf_puts(b, "<th title=\"");
		rb_html(b, c->names[j]);
		ims_buf_printf(b, "\">%zu</th>", j);
	}
	ims_buf_puts(b, "</tr>\n");
	for (size_t i = 0; i < n; i++) {
		ims_buf_printf(b, "<tr><th class=\"l\">%zu ", i);
		short_name(b, c->names[i]);
		ims_buf_puts(b, "</th>");
		for (size_t j = 0; j < n; j++) {
			double v = c->matrix[i * n + j];
			double share = c->records[i] > 0 ? v / c->records[i] : 0;
			/* the diagonal in the palette's first colour, errors in red */
			if (v > 0)
				ims_buf_printf(b, "<td style=\"background:rgba(%s,%.2f)\">%.0f</td>",
					  i == j ? "31,119,180" : "214,39,40", 0.1 + 0.8 * share, v);
			else
				ims_buf_puts(b, "<td>0</td>");
		}
		ims_buf_puts(b, "</tr>\n");
	}
	ims_buf_puts(b, "</table>\n");
}

void rep_html_classes(ims_buf *b, const rep_run *run, size_t run_i)
{
	const rep_classes *c = run->classes;
	if (!c)
		return;
	char n1[REP_NUM], n2[REP_NUM];
	ims_buf_puts(b, "<h3>Per-class accuracy</h3>\n<p>From <code>eval.json</code>");
	if (c->program) {
		ims_buf_puts(b, " (");
		rb_html(b, c->program);
		if (c->epoch >= 0)
			ims_buf_printf(b, ", after epoch %d", c->epoch + 1);
		ims_buf_puts(b, ")");
	}
	if (c->split) {
		ims_buf_puts(b, " on <code>");
		rb_html(b, c->split);
		ims_buf_puts(b, "</code>");
	}
	ims_buf_printf(b, ": %d classes", c->n);
	if (isfinite(c->n_records))
		ims_buf_printf(b, ", %.0f records", c->n_records);
	if (isfinite(c->top1_all))
		ims_buf_printf(b, ", top-1 %s", rep_fmt_pct_n(n1, c->top1_all));
	if (isfinite(c->top5_all))
		ims_buf_printf(b, ", top-5 %s", rep_fmt_pct_n(n2, c->top5_all));
	ims_buf_puts(b, ". Every class is in <code>per_class.csv</code>.</p>\n");

	size_t n = (size_t)c->n, shown = n < REP_MAX_BARS ? n : REP_MAX_BARS;
	int *order = malloc(n * sizeof(int));
	if (!order) {
		b->oom = 1;
		return;
	}
	for (size_t k = 0; k < n; k++)
		order[k] = (int)k;
	if (n > REP_MAX_BARS) {
		g_sort = c;
		qsort(order, n, sizeof(int), cmp_worst);
		ims_buf_printf(b, "<p class=\"note\">The %zu classes of lowest top-1 of %zu.</p>\n",
			  shown, n);
	}
	ims_buf_puts(b, "<div class=\"figs\">");
	accuracy_bars(b, c, order, shown, run_i);
	ims_buf_puts(b, "</div>\n");
	free(order);

	ims_buf_puts(b, "<h3>Confusion matrix</h3>\n");
	if (!c->has_confusion) {
		ims_buf_puts(b, "<p class=\"note\">No <code>confusion.csv</code> beside eval.json, "
			   "or one that does not agree with it (see the diagnostics).</p>\n");
		return;
	}
	if (c->matrix) {
		ims_buf_puts(b, "<p>Rows: the true class; columns: the predicted class (numbered as "
			   "the rows). Counts of records; the shade is the share of the true "
			   "class's records.</p>\n");
		matrix_table(b, c);
	} else
		ims_buf_printf(b, "<p>%d classes are too many to draw as a matrix (the whole matrix "
			     "is in <code>confusion.csv</code>); the most frequent confusions:</p>\n",
			  c->n);
	if (!c->n_confused) {
		ims_buf_puts(b, "<p>No record was predicted as another class.</p>\n");
		return;
	}
	if (c->matrix)
		ims_buf_puts(b, "<p>The most frequent confusions:</p>\n");
	static const char *const cols[] = {"true class", "predicted as", "records",
					   "share of the true class", NULL};
	ims_buf_puts(b, "<table>");
	rb_th_row(b, cols);
	for (size_t k = 0; k < c->n_confused; k++) {
		const rep_confused *e = &c->confused[k];
		ims_buf_puts(b, "<tr>");
		rb_td(b, 1, c->names[e->truth]);
		rb_td(b, 1, c->names[e->pred]);
		ims_buf_printf(b, "<td>%.0f</td>", e->count);
		rb_td_pct(b, c->records[e->truth] > 0 ? e->count / c->records[e->truth] : NAN);
		ims_buf_puts(b, "</tr>\n");
	}
	ims_buf_puts(b, "</table>\n");
}
