/* fuzz_report.c - run folders as `imshard report` reads them (report/):
 * the input is split at each 0x1e byte into DIR/metrics.jsonl,
 * DIR/summary.json, DIR/eval.json, DIR/confusion.csv and
 * DIR/imshard-train.lock, then DIR2/metrics.jsonl and DIR2/summary.json
 * (a second run, or the same run's rank-local folder); files without a
 * part are absent. An empty eval.json part with a confusion.csv part
 * makes an eval.json from that confusion.csv (its header's names, its
 * rows' sums and diagonal): confusion.csv is read only against classes
 * that fit it, which changed bytes seldom keep, so without it the counts,
 * the quoting of names and the file's size limit are reached from few
 * inputs. Both are loaded, analysed and rendered as the page and
 * the CSV files. Checked: the page is whole, valid UTF-8 and has no markup
 * from the logs, and every CSV file is valid UTF-8 and every row has its
 * header's fields, with no line break outside quotes (other control
 * characters from the logs are kept in the CSV files: the data as it
 * is). */
#include <ctype.h>
#include <math.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "fuzz_util.h"
#include "report/report.h"

static const char *const files[] = {"a/metrics.jsonl", "a/summary.json", "a/eval.json",
				    "a/confusion.csv", "a/imshard-train.lock",
				    "b/metrics.jsonl", "b/summary.json"};
#define N_FILES (sizeof(files) / sizeof(files[0]))

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		abort();
	char *s = NULL;
	size_t cap = 0;
	*len = 0;
	for (;;) {
		if (cap - *len < 4096) {
			cap = cap * 2 + 4096;
			s = realloc(s, cap + 1);
			if (!s)
				abort();
		}
		size_t n = fread(s + *len, 1, cap - *len, f);
		*len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	s[*len] = 0;
	return s;
}

/* Every record of the CSV text s has as many fields as the first
 * (RFC 4180 quoting), and no CR outside quotes; 0 when so. */
static int csv_bad(const char *s, size_t len)
{
	long want = -1, fields = 1;
	int quoted = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (quoted) {
			if (c == '"') {
				if (i + 1 < len && s[i + 1] == '"')
					i++;
				else
					quoted = 0;
			}
			continue;
		}
		if (c == '"')
			quoted = 1;
		else if (c == ',')
			fields++;
		else if (c == '\n') {
			if (want < 0)
				want = fields;
			else if (fields != want)
				return 1;
			fields = 1;
		} else if (c == '\r')
			return 1; /* a line break outside quotes */
	}
	return quoted || (len && s[len - 1] != '\n');
}

#define DERIVED_MAX 200 /* classes an eval.json is made with at most */

/*
 * The next RFC 4180 field of [*p, end) into a malloc'd string (doubled
 * quotes undone); *last is set when it ends its record (a line break, CRLF
 * too, or the text's end). NULL when the text is used up.
 */
static char *csv_field(const char **p, const char *end, int *last)
{
	const char *s = *p;
	if (s >= end)
		return NULL;
	char *f = malloc((size_t)(end - s) + 1);
	if (!f)
		abort();
	size_t n = 0;
	int quoted = 0;
	for (; s < end; s++) {
		if (quoted) {
			if (*s != '"')
				f[n++] = *s;
			else if (s + 1 < end && s[1] == '"')
				f[n++] = *s++;
			else
				quoted = 0;
		} else if (*s == '"')
			quoted = 1;
		else if (*s == ',' || *s == '\n' || *s == '\r')
			break;
		else
			f[n++] = *s;
	}
	f[n] = '\0';
	*last = s >= end || *s != ',';
	if (s < end && *s == '\r')
		s++;
	*p = s < end ? s + 1 : s;
	return f;
}

/* Writes DIR/eval.json for the confusion.csv text [csv, csv + len): the
 * header's names after its first field (a formula's ' guard dropped),
 * each row's counts (read as numbers, 0 when not) summed as the class's
 * records, its diagonal as the top-1 hits. */
static void derive_eval(const uint8_t *csv, size_t len)
{
	const char *p = (const char *)csv, *end = p + len;
	cJSON *o = cJSON_CreateObject(), *pc = cJSON_AddArrayToObject(o, "per_class");
	double sum[DERIVED_MAX] = {0}, diag[DERIVED_MAX] = {0};
	int n = 0, last = 0;
	char *f = csv_field(&p, end, &last);
	int more = f && !last;
	free(f);
	while (more && n < DERIVED_MAX && (f = csv_field(&p, end, &last))) {
		cJSON *e = cJSON_CreateObject();
		/* the writers' guard of a formula is not the name's */
		const int guard = f[0] == '\'' && ims_csv_quoting(f + 1) == 2;
		cJSON_AddStringToObject(e, "name", f + guard);
		cJSON_AddItemToArray(pc, e);
		free(f);
		more = !last;
		n++;
	}
	for (int i = 0; i < n && p < end; i++) {
		last = 0;
		free(csv_field(&p, end, &last));
		for (int j = 0; !last && (f = csv_field(&p, end, &last)); j++) {
			double v = strtod(f, NULL);
			free(f);
			v = isfinite(v) && v >= 0 && v <= 1e15 ? floor(v) : 0;
			sum[i] += v;
			if (i == j)
				diag[i] = v;
		}
	}
	for (int i = 0; i < n; i++) {
		cJSON *e = cJSON_GetArrayItem(pc, i);
		cJSON_AddNumberToObject(e, "records", sum[i]);
		if (sum[i] > 0) {
			cJSON_AddNumberToObject(e, "top1", diag[i] / sum[i]);
			cJSON_AddNumberToObject(e, "top5", 1);
		} else {
			cJSON_AddNullToObject(e, "top1");
			cJSON_AddNullToObject(e, "top5");
		}
	}
	char *text = cJSON_PrintUnformatted(o), path[700];
	if (!text)
		abort();
	fuzz_file("a/eval.json", (const uint8_t *)text, strlen(text), path, sizeof(path));
	free(text);
	cJSON_Delete(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char root[600], path[700], a[700], b[700], out[700];
	snprintf(root, sizeof(root), "%s", fuzz_dir());
	snprintf(a, sizeof(a), "%s/a", root);
	snprintf(b, sizeof(b), "%s/b", root);
	snprintf(out, sizeof(out), "%s/csv", root);
	mkdir(a, 0755);
	mkdir(b, 0755);
	size_t at = 0;
	int present[N_FILES] = {0};
	size_t start[N_FILES] = {0}, len[N_FILES] = {0};
	for (size_t k = 0; k < N_FILES; k++) {
		snprintf(path, sizeof(path), "%s/%s", root, files[k]);
		if (at > size) {
			unlink(path);
			continue;
		}
		present[k] = 1;
		const uint8_t *e = size > at ? memchr(data + at, 0x1e, size - at) : NULL;
		size_t n = e ? (size_t)(e - (data + at)) : size - at;
		char p[700];
		fuzz_file(files[k], data + at, n, p, sizeof(p));
		start[k] = at;
		len[k] = n;
		at += n + 1;
	}
	if (present[2] && !len[2] && present[3])
		derive_eval(data + start[3], len[3]);

	rep_opts o = {"fuzz", 0.5};
	rep_report r;
	ims_error err;
	rep_report_init(&r, &o);
	int rc = rep_report_add_run(&r, a, &err);
	if (rc == 0 && present[5])
		rc = rep_report_add_run(&r, b, &err);
	if (rc == 0 && rep_report_analyze(&r, &err) == 0) {
		for (size_t i = 0; i < r.n_runs; i++) {
			const rep_diags *d = &r.runs[i].diags;
			if (d->n > REP_MAX_DIAGS || d->n > d->n_total ||
			    d->n_skipped_lines > d->n_total)
				__builtin_trap();
		}
		char *html = NULL;
		size_t len = 0;
		if (rep_report_html(&r, &html, &len, &err) != 0)
			__builtin_trap();
		if (strlen(html) != len || len < 8 || strcmp(html + len - 8, "</html>\n") != 0 ||
		    !ims_utf8_valid(html, NULL))
			__builtin_trap();
		for (size_t i = 0; i + 7 <= len; i++)
			if (html[i] == '<' && strncasecmp(html + i, "<script", 7) == 0)
				__builtin_trap();
		free(html);
		if (rep_report_write_csv(&r, out, &err) != 0)
			__builtin_trap();
		for (size_t k = 0; rep_csv_names[k]; k++) {
			snprintf(path, sizeof(path), "%s/%s", out, rep_csv_names[k]);
			size_t n;
			char *s = slurp(path, &n);
			if (csv_bad(s, n) || strlen(s) != n || !ims_utf8_valid(s, NULL))
				__builtin_trap();
			free(s);
		}
	}
	rep_report_release(&r);
	return 0;
}
