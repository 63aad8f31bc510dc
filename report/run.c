/*
 * run.c - reads a run folder (an imshard-train --log-dir): metrics.jsonl
 * line by line and summary.json, checking every field's type and range.
 *
 * The logs are appended by several processes and may end mid-line when a
 * run dies, so nothing in them is trusted: a bad line becomes a diagnostic
 * "FILE:LINE: why" and is skipped, and the load goes on.
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

/* Plausibility bounds: well beyond any real run, small enough that sums
 * and chart ranges of many values stay finite. */
#define BIG 1e15
#define MAX_EPOCH 1e7
#define MAX_OPTIONS 200

/* ---- diagnostics ----------------------------------------------------------- */

static int vdiag(rep_diags *d, const char *file, size_t line, const char *fmt,
		 va_list ap)
{
	d->n_total++;
	if (d->n >= REP_MAX_DIAGS)
		return 0;
	if (!d->list) {
		d->list = calloc(REP_MAX_DIAGS, sizeof(*d->list));
		if (!d->list)
			return IMS_ENOMEM;
	}
	char why[400];
	vsnprintf(why, sizeof(why), fmt, ap);
	char *msg;
	int n = line ? asprintf(&msg, "%s:%zu: %s", file, line, why)
		     : asprintf(&msg, "%s: %s", file, why);
	if (n < 0)
		return IMS_ENOMEM;
	d->list[d->n++] = msg;
	return 0;
}

int rep_diag(rep_run *run, const char *file, size_t line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = vdiag(&run->diags, file, line, fmt, ap);
	va_end(ap);
	return rc;
}

int rep_diag_skip(rep_run *run, const char *file, size_t line, const char *fmt, ...)
{
	run->diags.n_skipped_lines++;
	va_list ap;
	va_start(ap, fmt);
	int rc = vdiag(&run->diags, file, line, fmt, ap);
	va_end(ap);
	return rc;
}

int rep_run_diag(rep_run *run, const char *file, const char *why)
{
	return rep_diag(run, file, 0, "%s", why);
}

int rep_diag_text(rep_run *run, const char *file, size_t line, size_t n_bad,
		  const char *what)
{
	if (!n_bad)
		return 0;
	return rep_diag(run, file, line, "%s %s not valid UTF-8: the bad bytes are "
			"shown as \\xHH", what, n_bad == 1 ? "is" : "are");
}

int rep_diag_size(rep_run *run, const char *file, uint64_t size, uint64_t limit,
		  const char *what, const char *done)
{
	return rep_diag(run, file, 0, "%llu bytes, more than %s (limit %llu bytes): %s",
			(unsigned long long)size, what, (unsigned long long)limit, done);
}

/* ---- fields ------------------------------------------------------------------ */

enum { F_OK = 1, F_ABSENT = 0, F_BAD = -1 };

/*
 * Reads number key of o into *out within [lo, hi] (integral when integer).
 * F_ABSENT when the key is missing; F_BAD with why filled when it is not a
 * number in range.
 */
static int num_field(const cJSON *o, const char *key, double lo, double hi,
		     int integer, double *out, char *why, size_t why_len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return F_ABSENT;
	if (cJSON_IsNull(v)) {
		snprintf(why, why_len, "'%s' is null (NaN or infinite when written)", key);
		return F_BAD;
	}
	if (!cJSON_IsNumber(v)) {
		snprintf(why, why_len, "'%s' is not a number", key);
		return F_BAD;
	}
	double d = v->valuedouble;
	if (!isfinite(d)) {
		snprintf(why, why_len, "'%s' is not finite", key);
		return F_BAD;
	}
	if (d < lo || d > hi) {
		snprintf(why, why_len, "'%s' is %g, outside %g..%g", key, d, lo, hi);
		return F_BAD;
	}
	if (integer && d != floor(d)) {
		snprintf(why, why_len, "'%s' is %g, not a whole number", key, d);
		return F_BAD;
	}
	*out = d;
	return F_OK;
}

/* A field list: one table per line type, checked in order. */
typedef struct field {
	const char *key;
	double lo, hi;
	int integer, required;
	size_t offset; /* of a double in the scratch struct */
} field;

typedef struct scratch {
	double rank, epoch, step, steps, loss, accuracy, lr, ips, wait, compute,
		comm, wall, top1, top5, records, val_s, device, util, mem, mem_total;
} scratch;

#define F(k, lo, hi, i, r, m) {k, lo, hi, i, r, offsetof(scratch, m)}

static const field train_fields[] = {
	F("rank", 0, REP_MAX_RANKS - 1, 1, 1, rank),
	F("epoch", 0, MAX_EPOCH, 1, 1, epoch),
	F("step", 0, BIG, 1, 1, step),
	F("loss", 0, BIG, 0, 1, loss),
	F("accuracy", 0, 1, 0, 1, accuracy),
	F("images_per_s", 0, BIG, 0, 1, ips),
	F("data_wait_ms", 0, BIG, 0, 1, wait),
	F("compute_ms", 0, BIG, 0, 1, compute),
	F("comm_ms", 0, BIG, 0, 1, comm),
	F("lr", 0, BIG, 0, 0, lr),
	F("steps", 1, 1e9, 1, 0, steps),
	F("wall_s", 0, BIG, 0, 0, wall),
	{NULL, 0, 0, 0, 0, 0}};

static const field val_fields[] = {
	F("epoch", 0, MAX_EPOCH, 1, 1, epoch),
	F("step", 0, BIG, 1, 1, step),
	F("top1", 0, 1, 0, 1, top1),
	F("top5", 0, 1, 0, 0, top5),
	F("loss", 0, BIG, 0, 0, loss),
	F("records", 0, BIG, 1, 0, records),
	F("wall_s", 0, BIG, 0, 0, wall),
	F("val_s", 0, BIG, 0, 0, val_s),
	{NULL, 0, 0, 0, 0, 0}};

static const field gpu_fields[] = {
	F("rank", 0, REP_MAX_RANKS - 1, 1, 1, rank),
	F("device", 0, 1e6, 1, 1, device),
	F("wall_s", 0, BIG, 0, 1, wall),
	F("util", 0, 100, 0, 1, util),
	F("mem_used_mib", 0, BIG, 0, 1, mem),
	F("mem_total_mib", 0, BIG, 0, 0, mem_total),
	{NULL, 0, 0, 0, 0, 0}};

#undef F

/*
 * Fills sc from o by the table: absent optional fields become NAN. Returns
 * 0, or -1 with why filled for the first bad or missing required field.
 */
static int read_fields(const cJSON *o, const field *f, scratch *sc, char *why,
		       size_t why_len, const char *type)
{
	/* a train interval whose every step fp16 skipped (a forward
	 * overflow) has neither: both null, no value. A lone null is a
	 * number that was NaN or infinite when written. */
	const int no_loss =
		!strcmp(type, "train") &&
		cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "loss")) &&
		cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "accuracy"));
	for (; f->key; f++) {
		double *dst = (double *)((char *)sc + f->offset);
		*dst = NAN;
		if (no_loss && (!strcmp(f->key, "loss") || !strcmp(f->key, "accuracy")))
			continue;
		int rc = num_field(o, f->key, f->lo, f->hi, f->integer, dst, why,
				   why_len);
		if (rc == F_BAD)
			return -1;
		if (rc == F_ABSENT && f->required) {
			snprintf(why, why_len, "%s line lacks '%s'", type, f->key);
			return -1;
		}
	}
	return 0;
}

/* ---- growing arrays ----------------------------------------------------------- */

static int push(void **arr, size_t *n, size_t *cap, size_t size)
{
	if (*n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 64;
	void *p = realloc(*arr, c * size);
	if (!p)
		return IMS_ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

typedef struct caps {
	size_t train, val, gpu;
} caps;

/* ---- metrics.jsonl ---------------------------------------------------------- */

/* One line (without its newline; too_long: only its start is there, the
 * whole is longer than REP_MAX_LINE). 0, or IMS_ENOMEM. */
static int parse_line(rep_run *run, caps *cap, const char *file, size_t ln,
		      const char *text, size_t len, int last_unterminated,
		      int too_long)
{
	size_t i = 0;
	while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r'))
		i++;
	if (i == len && !too_long)
		return 0; /* blank: nothing was meant */
	if (too_long)
		return rep_diag_skip(run, file, ln, "line is longer than %d bytes: line skipped", REP_MAX_LINE);
	if (memchr(text, '\0', len))
		return rep_diag_skip(run, file, ln, "line holds a NUL byte: line skipped");
	const char *end = NULL;
	int oom = 0;
	cJSON *o = ims_json_parse(text, len, 0, &end, &oom);
	if (!o && oom)
		return IMS_ENOMEM; /* not the line's fault: the report stops */
	if (!o)
		return rep_diag_skip(run, file, ln, "%s",
			    last_unterminated
				    ? "truncated line (the file ends inside it): line skipped"
				    : "not valid JSON (truncated or damaged line?): line skipped");
	int rc = 0;
	/* two appenders' lines run together parse as the first alone */
	for (; end && end < text + len; end++)
		if (*end != ' ' && *end != '\t' && *end != '\r') {
			rc = rep_diag_skip(run, file, ln,
				  "text after the JSON object (two lines run together?): "
				  "line skipped");
			goto out;
		}
	char why[256];
	scratch sc;
	if (!cJSON_IsObject(o)) {
		rc = rep_diag_skip(run, file, ln, "not a JSON object: line skipped");
		goto out;
	}
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
	if (!cJSON_IsString(t)) {
		rc = rep_diag_skip(run, file, ln, "no \"type\" string: line skipped");
		goto out;
	}
	if (strcmp(t->valuestring, "train") == 0) {
		if (read_fields(o, train_fields, &sc, why, sizeof(why), "train") < 0) {
			rc = rep_diag_skip(run, file, ln, "%s: line skipped", why);
			goto out;
		}
		if (push((void **)&run->lines.train, &run->lines.n_train, &cap->train,
			 sizeof(*run->lines.train))) {
			rc = IMS_ENOMEM;
			goto out;
		}
		rep_train_line *l = &run->lines.train[run->lines.n_train++];
		l->rank = (int)sc.rank;
		l->epoch = (int)sc.epoch;
		l->step = (int64_t)sc.step;
		l->steps = isnan(sc.steps) ? 0 : (int)sc.steps;
		l->loss = sc.loss;
		l->accuracy = sc.accuracy;
		l->lr = sc.lr;
		l->images_per_s = sc.ips;
		l->data_wait_ms = sc.wait;
		l->compute_ms = sc.compute;
		l->comm_ms = sc.comm;
		l->wall_s = sc.wall;
		l->line = ln;
		l->folder = 0;
		if (isnan(sc.steps))
			run->lines.missing |= REP_MISSING_STEPS;
		if (isnan(sc.wall))
			run->lines.missing |= REP_MISSING_WALL;
	} else if (strcmp(t->valuestring, "val") == 0) {
		if (read_fields(o, val_fields, &sc, why, sizeof(why), "val") < 0) {
			rc = rep_diag_skip(run, file, ln, "%s: line skipped", why);
			goto out;
		}
		if (!isnan(sc.top5) && sc.top5 < sc.top1) {
			rc = rep_diag_skip(run, file, ln, "'top5' %g is below 'top1' %g: line skipped",
				  sc.top5, sc.top1);
			goto out;
		}
		if (push((void **)&run->lines.val, &run->lines.n_val, &cap->val,
			 sizeof(*run->lines.val))) {
			rc = IMS_ENOMEM;
			goto out;
		}
		rep_val_line *l = &run->lines.val[run->lines.n_val++];
		l->epoch = (int)sc.epoch;
		l->step = (int64_t)sc.step;
		l->loss = sc.loss;
		l->top1 = sc.top1;
		l->top5 = sc.top5;
		l->records = sc.records;
		l->wall_s = sc.wall;
		l->val_s = sc.val_s;
		l->line = ln;
		if (isnan(sc.wall))
			run->lines.missing |= REP_MISSING_VAL_WALL;
		if (isnan(sc.val_s))
			run->lines.missing |= REP_MISSING_VAL_S;
	} else if (strcmp(t->valuestring, "gpu") == 0) {
		if (read_fields(o, gpu_fields, &sc, why, sizeof(why), "gpu") < 0) {
			rc = rep_diag_skip(run, file, ln, "%s: line skipped", why);
			goto out;
		}
		if (!isnan(sc.mem_total) && sc.mem > sc.mem_total) {
			rc = rep_diag_skip(run, file, ln,
				  "'mem_used_mib' %g exceeds 'mem_total_mib' %g: line skipped",
				  sc.mem, sc.mem_total);
			goto out;
		}
		if (push((void **)&run->lines.gpu, &run->lines.n_gpu, &cap->gpu,
			 sizeof(*run->lines.gpu))) {
			rc = IMS_ENOMEM;
			goto out;
		}
		rep_gpu_line *l = &run->lines.gpu[run->lines.n_gpu++];
		l->rank = (int)sc.rank;
		l->device = (int)sc.device;
		l->wall_s = sc.wall;
		l->util = sc.util;
		l->mem_used_mib = sc.mem;
		l->mem_total_mib = sc.mem_total;
		l->line = ln;
		l->folder = 0;
	} else if (strcmp(t->valuestring, "start") == 0 ||
		   strcmp(t->valuestring, "resume") == 0) {
		/* each part's start and a resumed part's settings: where
		 * the run's parts begin (parts.c) */
		rc = rep_part_line(run, file, ln, o,
				   strcmp(t->valuestring, "resume") == 0);
	} else if (strcmp(t->valuestring, "epoch") == 0) {
		/* imshard-train's damaged-record counts per epoch
		 * (docs/TRAINING.md): not drawn */
	} else {
		/* the name is cut between characters: a cut inside one
		 * would put a bad byte into the diagnostic, and with it
		 * into the page and skipped.csv */
		const char *type = t->valuestring;
		size_t k = ims_utf8_prefix(type, 39);
		rc = rep_diag_skip(run, file, ln, "unknown line type '%.*s'%s: line skipped",
				   (int)k, type, type[k] ? "..." : "");
	}
out:
	cJSON_Delete(o);
	return rc;
}

/*
 * metrics.jsonl line by line, in bounded memory: only the first
 * REP_MAX_LINE + 1 bytes of a line are kept, since a longer line is skipped
 * anyway. Reading a line whole (getline) would take memory in proportion
 * to a damaged file, and on running out fail as if the file ended there.
 */
typedef struct line_reader {
	FILE *f;
	char *in;          /* READ_CHUNK bytes read ahead */
	size_t pos, end;
	char *line;        /* LINE_CAP bytes: the kept part, NUL-terminated */
} line_reader;

#define READ_CHUNK 65536
#define LINE_CAP (REP_MAX_LINE + 2)

/*
 * The next line into r->line: *len is its full length without the
 * newline, *terminated whether a newline ended it. Returns 1 for a line,
 * 0 at the end, -1 on a read error (errno set).
 */
static int next_line(line_reader *r, size_t *len, int *terminated)
{
	size_t n = 0;
	int any = 0;
	for (;;) {
		if (r->pos == r->end) {
			r->pos = 0;
			r->end = fread(r->in, 1, READ_CHUNK, r->f);
			if (r->end == 0) {
				if (ferror(r->f))
					return -1;
				break;
			}
		}
		any = 1;
		const char *s = r->in + r->pos;
		size_t avail = r->end - r->pos;
		const char *nl = memchr(s, '\n', avail);
		size_t take = nl ? (size_t)(nl - s) : avail;
		if (n < LINE_CAP - 1) {
			size_t keep = LINE_CAP - 1 - n < take ? LINE_CAP - 1 - n : take;
			memcpy(r->line + n, s, keep);
		}
		n += take;
		r->pos += take + (nl ? 1 : 0);
		if (nl) {
			*terminated = 1;
			goto done;
		}
	}
	if (!any)
		return 0;
	*terminated = 0;
done:
	r->line[n < LINE_CAP - 1 ? n : LINE_CAP - 1] = '\0';
	*len = n;
	return 1;
}

static int read_metrics(rep_run *run, const char *path, ims_error *err)
{
	ims_error oe;
	FILE *f = ims_fopen_read(path, &oe);
	if (!f && oe.code == IMS_ENOTFOUND)
		return ims_fail(err, IMS_ENOTFOUND, "%s: no metrics.jsonl", run->dir);
	if (!f) {
		if (err)
			*err = oe;
		return oe.code;
	}
	caps cap = {0, 0, 0};
	line_reader lr = {f, malloc(READ_CHUNK), 0, 0, malloc(LINE_CAP)};
	if (!lr.in || !lr.line) {
		free(lr.in);
		free(lr.line);
		fclose(f);
		return ims_fail(err, IMS_ENOMEM, "cannot read '%s': out of memory", path);
	}
	size_t len = 0;
	int terminated = 0, got, rc = 0;
	errno = 0;
	while ((got = next_line(&lr, &len, &terminated)) > 0) {
		run->lines.n_read++;
		/* a line too long is judged by its length alone: its kept
		 * part is never parsed */
		rc = parse_line(run, &cap, path, run->lines.n_read, lr.line,
				len < LINE_CAP - 1 ? len : LINE_CAP - 1, !terminated,
				len > REP_MAX_LINE);
		if (rc < 0)
			break;
		errno = 0;
	}
	if (!rc && got < 0)
		rc = ims_fail(err, IMS_EIO, "cannot read '%s': %s", path,
			      strerror(errno ? errno : EIO));
	else if (rc == IMS_ENOMEM)
		ims_fail(err, rc, "cannot read '%s': out of memory", path);
	free(lr.in);
	free(lr.line);
	fclose(f);
	return rc;
}

/* ---- summary.json -------------------------------------------------------------- */

/* A string of the summary: *out NULL (with a diagnostic when present but
 * not a string). 0 or IMS_ENOMEM. */
static int sum_string(rep_run *run, const char *file, const cJSON *o,
		      const char *key, char **out)
{
	*out = NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v)
		return 0;
	if (!cJSON_IsString(v))
		return rep_diag(run, file, 0, "'%s' is not a string: ignored", key);
	*out = strdup(v->valuestring);
	if (!*out)
		return IMS_ENOMEM;
	char what[64];
	snprintf(what, sizeof(what), "'%s'", key);
	return rep_diag_text(run, file, 0, !ims_utf8_valid(*out, NULL), what);
}

/* A number of the summary: NAN (with a diagnostic) when bad. */
static int sum_num(rep_run *run, const char *file, const cJSON *o,
		   const char *key, double lo, double hi, double *out)
{
	char why[256];
	*out = NAN;
	if (num_field(o, key, lo, hi, 0, out, why, sizeof(why)) == F_BAD) {
		*out = NAN;
		return rep_diag(run, file, 0, "%s: ignored", why);
	}
	return 0;
}

/* A per-rank array: world non-negative numbers, else NULL (diagnosed). */
static int sum_array(rep_run *run, const char *file, const cJSON *o,
		     const char *key, int world, double **out)
{
	*out = NULL;
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!a)
		return 0;
	if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != world)
		return rep_diag(run, file, 0, "'%s' is not an array of %d numbers (one per rank): "
			    "ignored",
			    key, world);
	double *v = malloc(sizeof(double) * (size_t)world);
	if (!v)
		return IMS_ENOMEM;
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, a)
	{
		if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) ||
		    e->valuedouble < 0 || e->valuedouble > BIG) {
			free(v);
			return rep_diag(run, file, 0, "'%s'[%d] is not a number of seconds: '%s' ignored",
				    key, i, key);
		}
		v[i++] = e->valuedouble;
	}
	*out = v;
	return 0;
}

static int read_options(rep_run *run, const char *file, const cJSON *o)
{
	const cJSON *opts = cJSON_GetObjectItemCaseSensitive(o, "options");
	if (!opts)
		return 0;
	if (!cJSON_IsObject(opts))
		return rep_diag(run, file, 0, "'options' is not an object: ignored");
	int n = cJSON_GetArraySize(opts);
	if (n > MAX_OPTIONS) {
		FORWARD_IF_ERR(rep_diag(run, file, 0, "'options' has %d entries: the first %d are kept",
				    n, MAX_OPTIONS));
		n = MAX_OPTIONS;
	}
	rep_summary *s = &run->sum;
	s->options = calloc((size_t)(n ? n : 1), sizeof(*s->options));
	if (!s->options)
		return IMS_ENOMEM;
	size_t not_text = 0; /* options whose key or value is not UTF-8 */
	const cJSON *e;
	cJSON_ArrayForEach(e, opts)
	{
		if (s->n_options >= (size_t)n)
			break;
		char *value = NULL;
		if (cJSON_IsString(e))
			value = strdup(e->valuestring);
		else if (cJSON_IsBool(e))
			value = strdup(cJSON_IsTrue(e) ? "true" : "false");
		else if (cJSON_IsNumber(e)) {
			if (asprintf(&value, "%.15g", e->valuedouble) < 0)
				value = NULL;
		} else
			value = cJSON_PrintUnformatted(e);
		char *key = strdup(e->string ? e->string : "");
		if (!value || !key) {
			free(value);
			free(key);
			return IMS_ENOMEM;
		}
		s->options[s->n_options].key = key;
		s->options[s->n_options].value = value;
		s->n_options++;
		not_text += !ims_utf8_valid(key, NULL) || !ims_utf8_valid(value, NULL);
	}
	char what[64];
	snprintf(what, sizeof(what), "%zu of the options", not_text);
	return rep_diag_text(run, file, 0, not_text, what);
}

static int read_summary(rep_run *run, const char *path, ims_error *err)
{
	uint8_t *data = NULL;
	size_t len = 0;
	ims_error e;
	struct stat st;
	const int found = stat(path, &st) == 0;
	if (!found && errno == ENOENT)
		return 0; /* the run died or is still going: said on the page */
	/* told apart from a file of other errors: its size and the limit
	 * (REP_MAX_SUMMARY says why), before anything is read */
	if (found && S_ISREG(st.st_mode) && (uint64_t)st.st_size > REP_MAX_SUMMARY)
		return rep_diag_size(run, path, (uint64_t)st.st_size, REP_MAX_SUMMARY,
				     "imshard-train writes", "ignored");
	if (ims_read_file(path, &data, &len, REP_MAX_SUMMARY, &e) < 0) {
		if (e.code == IMS_ENOMEM)
			return ims_fail(err, IMS_ENOMEM, "%s", e.msg);
		return rep_diag(run, path, 0, "%s: ignored", e.msg);
	}
	int oom = 0;
	cJSON *o = ims_json_parse((const char *)data, len, 0, NULL, &oom);
	free(data);
	if (!o && oom)
		return ims_fail(err, IMS_ENOMEM, "cannot read '%s': out of memory", path);
	if (!o)
		return rep_diag(run, path, 0, "not valid JSON (truncated?): ignored");
	int rc = 0;
	if (!cJSON_IsObject(o)) {
		rc = rep_diag(run, path, 0, "not a JSON object: ignored");
		goto out;
	}
	run->has_summary = 1;
	rep_summary *s = &run->sum;
	double world = NAN;
	GOTO_IF_ERR(out, rc, sum_num(run, path, o, "world", 1, REP_MAX_RANKS, &world));
	if (!isnan(world) && world != floor(world)) {
		GOTO_IF_ERR(out, rc, rep_diag(run, path, 0, "'world' is not a whole number: ignored"));
		world = NAN;
	}
	s->world = isnan(world) ? 0 : (int)world;
	GOTO_IF_ERR(out, rc, sum_string(run, path, o, "model", &s->model));
	GOTO_IF_ERR(out, rc, sum_string(run, path, o, "device", &s->device));
	/* a fine-tuned run names the file it started from */
	const cJSON *init = cJSON_GetObjectItemCaseSensitive(o, "init");
	if (init && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(init, "path")))
		GOTO_IF_ERR(out, rc, rep_diag(run, path, 0, "'init' has no 'path' string: ignored"));
	else if (init) {
		GOTO_IF_ERR(out, rc, sum_string(run, path, init, "path", &s->init_path));
		GOTO_IF_ERR(out, rc, sum_string(run, path, init, "crc32c", &s->init_crc32c));
	}
	/* best_epoch is -1 to the trainer until a validation ran */
	static const struct {
		const char *key;
		size_t off;
		double lo, hi;
	} nums[] = {
#define N(k, lo, hi) {#k, offsetof(rep_summary, k), lo, hi}
		N(threads, 1, 1e6), N(batch_per_rank, 1, 1e9),
		N(global_batch, 1, 1e12), N(lr_per_rank, 0, BIG),
		N(lr_peak, 0, BIG), N(epochs, 0, MAX_EPOCH), N(steps, 0, BIG),
		N(images, 0, BIG), N(wall_s, 0, BIG), N(train_s, 0, BIG),
		N(startup_s, 0, BIG), N(images_per_s, 0, BIG),
		N(busy_max_min_ratio, 0, BIG), N(data_wait_s, 0, BIG),
		N(stall_fraction, 0, 1), N(val_top1, 0, 1), N(val_top5, 0, 1),
		N(best_val_top1, 0, 1), N(best_epoch, -1, MAX_EPOCH),
		N(best_wall_s, 0, BIG), N(val_s, 0, BIG), N(checkpoint_s, 0, BIG),
#undef N
	};
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		GOTO_IF_ERR(out, rc, sum_num(run, path, o, nums[i].key, nums[i].lo,
					     nums[i].hi,
					     (double *)((char *)s + nums[i].off)));
	if (s->best_epoch < 0)
		s->best_epoch = NAN;
	if (s->world > 0) {
		GOTO_IF_ERR(out, rc, sum_array(run, path, o, "busy_s", s->world, &s->busy_s));
		GOTO_IF_ERR(out, rc, sum_array(run, path, o, "data_wait_s_per_rank",
					       s->world, &s->data_wait_s_per_rank));
		GOTO_IF_ERR(out, rc, sum_array(run, path, o, "comm_s_per_rank", s->world,
					       &s->comm_s_per_rank));
	}
	GOTO_IF_ERR(out, rc, read_options(run, path, o));
out:
	cJSON_Delete(o);
	if (rc == IMS_ENOMEM)
		ims_fail(err, rc, "cannot read '%s': out of memory", path);
	return rc;
}

/* ---- the run ------------------------------------------------------------------ */

/* Every summary number starts absent. */
static void summary_init(rep_summary *s)
{
	memset(s, 0, sizeof(*s));
	double *nums[] = {&s->threads, &s->batch_per_rank, &s->global_batch,
			  &s->lr_per_rank, &s->lr_peak, &s->epochs, &s->steps,
			  &s->images, &s->wall_s, &s->train_s, &s->startup_s,
			  &s->images_per_s, &s->busy_max_min_ratio, &s->data_wait_s,
			  &s->stall_fraction, &s->val_top1, &s->val_top5,
			  &s->best_val_top1, &s->best_epoch, &s->best_wall_s,
			  &s->val_s, &s->checkpoint_s};
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
		*nums[i] = NAN;
}

int rep_run_load(rep_run *run, const char *dir, ims_error *err)
{
	memset(run, 0, sizeof(*run));
	summary_init(&run->sum);
	run->dir = strdup(dir);
	RETURN_IF(!run->dir, err, IMS_ENOMEM, "out of memory");
	struct stat st;
	int rc = 0;
	if (stat(dir, &st) != 0)
		GOTO_FAIL(fail, rc, err, errno == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
			  "cannot open run folder '%s': %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		GOTO_FAIL(fail, rc, err, IMS_EINVAL,
			  "'%s' is not a folder (give imshard-train's --log-dir)", dir);
	char metrics[4096], summary[4096];
	GOTO_IF_ERR(fail, rc, ims_path_join(metrics, sizeof(metrics), dir,
					    "metrics.jsonl", err));
	GOTO_IF_ERR(fail, rc, ims_path_join(summary, sizeof(summary), dir,
					    "summary.json", err));
	GOTO_IF_ERR(fail, rc, read_metrics(run, metrics, err));
	GOTO_IF_ERR(fail, rc, read_summary(run, summary, err));
	GOTO_IF_ERR(fail, rc, rep_classes_load(run, dir, err));
	rc = rep_parts_settle(run, metrics);
	if (rc < 0)
		GOTO_FAIL(fail, rc, err, rc, "cannot read '%s': out of memory", metrics);
	return 0;
fail:
	rep_run_release(run);
	return rc;
}

void rep_run_release(rep_run *run)
{
	if (!run)
		return;
	free(run->dir);
	free(run->label);
	free(run->lines.train);
	free(run->lines.val);
	free(run->lines.gpu);
	free(run->parts.list);
	for (size_t i = 0; i < run->rank_local.n_merged; i++)
		free(run->rank_local.merged[i].dir);
	free(run->rank_local.merged);
	for (size_t i = 0; i < run->diags.n; i++)
		free(run->diags.list[i]);
	free(run->diags.list);
	rep_summary *s = &run->sum;
	free(s->model);
	free(s->device);
	free(s->init_path);
	free(s->init_crc32c);
	free(s->busy_s);
	free(s->data_wait_s_per_rank);
	free(s->comm_s_per_rank);
	for (size_t i = 0; i < s->n_options; i++) {
		free(s->options[i].key);
		free(s->options[i].value);
	}
	free(s->options);
	rep_classes_release(run->classes);
	free(run->classes);
	memset(run, 0, sizeof(*run));
}
