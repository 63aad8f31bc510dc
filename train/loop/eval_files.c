/*
 * eval_files.c - nn_eval_write: an evaluation as files a person opens in a
 * spreadsheet or pandas (per_class.csv, confusion.csv, predictions.csv)
 * and one that programs read (eval.json: `imshard report` draws per-class
 * accuracy and the confusion matrix from it and confusion.csv). All four
 * are built in memory before the folder is touched, then each written
 * atomically, eval.json last and an earlier eval.json removed first, so a
 * folder whose eval.json is there holds the CSV files of that same
 * evaluation or of a later one being written, never those of a later one
 * that failed partway; a folder made for a write that failed is removed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "recordio/recordio.h"
#include "train/eval.h"

/* A CSV field as ims_buf_csv writes it: a class name is the user's
 * folder name, which a spreadsheet must not run as a formula. */
static void csv_field(FILE *f, const char *s)
{
	int q = ims_csv_quoting(s);
	if (!q) {
		fputs(s, f);
		return;
	}
	fputs(q == 2 ? "\"'" : "\"", f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static double frac(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

/* One file of the evaluation, its text built before any is written. */
typedef struct {
	const char *name;
	char *text; /* malloc'd (open_memstream's), freed by the writer */
	size_t len;
} eval_text;

/* Closes f (an open_memstream of t's text): its text is whole, or
 * IMS_ENOMEM. */
static int finish_text(FILE *f, eval_text *t, ims_error *err)
{
	int bad = ferror(f);
	fclose(f);
	if (!bad && t->text)
		return 0;
	free(t->text);
	t->text = NULL;
	return ims_fail(err, IMS_ENOMEM, "cannot write '%s': out of memory", t->name);
}

#define OPEN_TEXT(f, t, err)                                                    \
	do {                                                                   \
		(f) = open_memstream(&(t)->text, &(t)->len);                   \
		RETURN_IF(!(f), err, IMS_ENOMEM,                               \
			  "cannot write '%s': out of memory", (t)->name);      \
	} while (0)

static int per_class_text(eval_text *t, const nn_eval_result *r,
			  const nn_model_card *c, ims_error *err)
{
	FILE *f;
	OPEN_TEXT(f, t, err);
	fputs("class,name,records,top1_correct,top1,top5_correct,top5\n", f);
	for (int k = 0; k < r->classes; k++) {
		fprintf(f, "%d,", k);
		csv_field(f, c->class_names[k]);
		/* a class the split holds no record of has no accuracy: its
		 * fields are empty, not a 0 that reads as every record missed */
		if (!r->class_records[k]) {
			fputs(",0,0,,0,\n", f);
			continue;
		}
		fprintf(f, ",%llu,%llu,%.6f,%llu,%.6f\n",
			(unsigned long long)r->class_records[k],
			(unsigned long long)r->class_top1[k],
			frac(r->class_top1[k], r->class_records[k]),
			(unsigned long long)r->class_topk[k],
			frac(r->class_topk[k], r->class_records[k]));
	}
	return finish_text(f, t, err);
}

/*
 * The matrix a row at a time: the predictions sorted by true class
 * (counting sort over class_records), so memory is one row, not
 * classes x classes (5089 classes would take 200 MB as a matrix).
 */
static int confusion_text(eval_text *t, const nn_eval_result *r,
			  const nn_model_card *c, ims_error *err)
{
	const size_t k = (size_t)r->classes;
	uint64_t *start = calloc(k + 1, sizeof(uint64_t));
	uint64_t *row = calloc(k, sizeof(uint64_t));
	int32_t *by_true = malloc((r->n ? r->n : 1) * sizeof(int32_t));
	int rc = 0;
	if (!start || !row || !by_true) {
		rc = ims_fail(err, IMS_ENOMEM,
			      "cannot write the confusion matrix: out of memory");
		goto out;
	}
	for (size_t i = 0; i < k; i++)
		start[i + 1] = start[i] + r->class_records[i];
	for (uint64_t i = 0; i < r->n; i++)
		if (r->label[i] >= 0 && (size_t)r->label[i] < k)
			by_true[start[r->label[i]]++] = r->pred[i];
	for (size_t i = k; i > 0; i--) /* back to the starts */
		start[i] = start[i - 1];
	start[0] = 0;
	FILE *f = open_memstream(&t->text, &t->len);
	if (!f) {
		rc = ims_fail(err, IMS_ENOMEM,
			      "cannot write the confusion matrix: out of memory");
		goto out;
	}
	fputs("true/predicted", f);
	for (size_t j = 0; j < k; j++) {
		fputc(',', f);
		csv_field(f, c->class_names[j]);
	}
	fputc('\n', f);
	for (size_t i = 0; i < k; i++) {
		memset(row, 0, k * sizeof(uint64_t));
		for (uint64_t p = start[i]; p < start[i] + r->class_records[i]; p++)
			if (by_true[p] >= 0 && (size_t)by_true[p] < k)
				row[by_true[p]]++;
		csv_field(f, c->class_names[i]);
		for (size_t j = 0; j < k; j++)
			fprintf(f, ",%llu", (unsigned long long)row[j]);
		fputc('\n', f);
	}
	rc = finish_text(f, t, err);
out:
	free(start);
	free(row);
	free(by_true);
	return rc;
}

static int predictions_text(eval_text *t, const nn_eval_result *r,
			    const nn_model_card *c, ims_error *err)
{
	FILE *f;
	OPEN_TEXT(f, t, err);
	fputs("index,label,label_name,predicted,predicted_name,confidence,top5\n", f);
	for (uint64_t i = 0; i < r->n; i++) {
		fprintf(f, "%llu,%d,", (unsigned long long)r->index[i], r->label[i]);
		csv_field(f, c->class_names[r->label[i]]);
		fprintf(f, ",%d,", r->pred[i]);
		csv_field(f, c->class_names[r->pred[i]]);
		fprintf(f, ",%.6f,%d\n", (double)r->confidence[i], r->in_topk[i]);
	}
	return finish_text(f, t, err);
}

static cJSON *summary(const nn_eval_result *r, const nn_model_card *c,
		      const nn_eval_origin *o)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "program", o->program);
	if (o->weights)
		cJSON_AddStringToObject(j, "weights", o->weights);
	cJSON_AddStringToObject(j, "split", o->split);
	if (o->epoch >= 0) {
		cJSON_AddNumberToObject(j, "epoch", o->epoch);
		cJSON_AddNumberToObject(j, "step", (double)o->step);
	}
	cJSON_AddStringToObject(j, "model", c->model);
	cJSON_AddNumberToObject(j, "size", c->size);
	cJSON_AddNumberToObject(j, "val_crop_frac", c->val_crop_frac);
	if (o->precision)
		cJSON_AddStringToObject(j, "precision", o->precision);
	cJSON_AddNumberToObject(j, "records", (double)r->records);
	cJSON_AddNumberToObject(j, "top1", r->top1);
	cJSON_AddNumberToObject(j, "top5", r->top5);
	cJSON_AddNumberToObject(j, "topk", r->topk);
	cJSON_AddNumberToObject(j, "loss", r->loss);
	cJSON_AddNumberToObject(j, "bad_records", (double)r->bad_records);
	cJSON *pc = cJSON_AddArrayToObject(j, "per_class");
	for (int k = 0; pc && k < r->classes; k++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddItemToArray(pc, e);
		cJSON_AddStringToObject(e, "name", c->class_names[k]);
		cJSON_AddNumberToObject(e, "records", (double)r->class_records[k]);
		if (!r->class_records[k]) { /* no record: no accuracy */
			cJSON_AddNullToObject(e, "top1");
			cJSON_AddNullToObject(e, "top5");
			continue;
		}
		cJSON_AddNumberToObject(e, "top1", frac(r->class_top1[k], r->class_records[k]));
		cJSON_AddNumberToObject(e, "top5", frac(r->class_topk[k], r->class_records[k]));
	}
	return j;
}

/* eval.json's text, ended by a newline. */
static int eval_json_text(eval_text *t, const nn_eval_result *res,
			  const nn_model_card *card, const nn_eval_origin *origin,
			  ims_error *err)
{
	ims_json_watch(); /* eval.json without a member is not written */
	cJSON *j = summary(res, card, origin);
	char *text = ims_json_print(j, 1);
	cJSON_Delete(j);
	RETURN_IF(!text, err, IMS_ENOMEM, "cannot write '%s': out of memory", t->name);
	t->len = strlen(text);
	text[t->len++] = '\n'; /* replaces the terminator: written by length */
	t->text = text;
	return 0;
}

int nn_eval_write(const char *dir, const nn_eval_result *res,
		  const nn_model_card *card, const nn_eval_origin *origin,
		  ims_error *err)
{
	RETURN_IF(!res->class_records || !(card->have & NN_CARD_NAMES) ||
			  card->classes != res->classes,
		  err, IMS_EINVAL,
		  "cannot write an evaluation into '%s': no per-record results "
		  "or class names",
		  dir);
	/* Every text is made before the folder is touched: memory running
	 * out leaves it as it was, not with some of the CSV files new. */
	eval_text t[] = {{"per_class.csv", NULL, 0}, {"confusion.csv", NULL, 0},
			 {"predictions.csv", NULL, 0}, {"eval.json", NULL, 0}};
	enum { N_TEXTS = sizeof(t) / sizeof(t[0]) };
	int rc = per_class_text(&t[0], res, card, err);
	if (!rc)
		rc = confusion_text(&t[1], res, card, err);
	if (!rc)
		rc = predictions_text(&t[2], res, card, err);
	if (!rc)
		rc = eval_json_text(&t[3], res, card, origin, err);
	char *created = NULL;
	if (!rc)
		rc = ims_mkdir_p_created(dir, &created, err);
	char path[4200];
	if (!rc)
		rc = ims_path_join(path, sizeof(path), dir, "eval.json", err);
	if (!rc && unlink(path) < 0 && errno != ENOENT)
		rc = ims_fail(err, IMS_EIO, "cannot remove the earlier '%s': %s", path,
			      strerror(errno));
	int written = 0;
	for (; !rc && written < N_TEXTS; written++) {
		rc = ims_path_join(path, sizeof(path), dir, t[written].name, err);
		if (!rc)
			rc = ims_write_file_atomic(path, t[written].text, t[written].len, err);
	}
	/* a folder this call made holds nothing of a failed evaluation */
	if (rc && created) {
		for (int i = 0; i < written; i++)
			if (ims_path_join(path, sizeof(path), dir, t[i].name, NULL) == 0)
				unlink(path);
		ims_rmdir_created(dir, created);
	}
	free(created);
	for (int i = 0; i < N_TEXTS; i++)
		free(t[i].text);
	return rc;
}

int nn_eval_check_output(const char *dir, ims_error *err)
{
	static const char *const names[] = {"per_class.csv", "confusion.csv",
					    "predictions.csv", "eval.json"};
	struct stat st;
	if (stat(dir, &st) != 0) {
		if (errno != ENOENT)
			return 0; /* said by nn_eval_write */
		/* made by nn_eval_write after the pass: one that cannot be
		 * made (a parent without write permission) is found now, by
		 * making it and removing what was made */
		char *created = NULL;
		if (ims_mkdir_p_created(dir, &created, err) < 0)
			return ims_fail_context(err, "cannot write the evaluation into '%s'", dir);
		ims_rmdir_created(dir, created);
		free(created);
		return 0;
	}
	RETURN_IF(!S_ISDIR(st.st_mode), err, IMS_EEXIST,
		  "cannot write the evaluation into '%s': it is %s, not a folder",
		  dir, ims_file_kind(st.st_mode));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[4096];
		FORWARD_IF_ERR(ims_path_join(path, sizeof(path), dir, names[i], err));
		RETURN_IF(lstat(path, &st) == 0 && S_ISDIR(st.st_mode), err,
			  IMS_EEXIST,
			  "cannot write the evaluation into '%s': '%s' is a folder; "
			  "remove or rename it",
			  dir, path);
		/* split 'eval' packed into dir: its manifest would be
		 * replaced, the split lost */
		char split[256], safe[300];
		ims_error e;
		const int at = rio_manifest_at(path, split, sizeof(split), &e);
		/* unread, it may be a split's manifest: not to be replaced */
		RETURN_IF(at < 0, err, at,
			  "cannot write the evaluation into '%s': %s; make it "
			  "readable, or give -o a folder of its own", dir, e.msg);
		RETURN_IF(at, err, IMS_EEXIST,
			  "cannot write the evaluation into '%s': '%s' is the "
			  "manifest of split '%s', which its eval.json would "
			  "replace; give -o a folder of its own",
			  dir, path, ims_escape(split, safe, sizeof(safe)));
	}
	/* a folder where no file can be created (no write permission, a
	 * read-only mount) fails the first file's temporary, after the
	 * evaluation it was to hold: tried now with eval.json's temporary,
	 * removed at once */
	char path[4096];
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), dir, "eval.json", err));
	ims_error e;
	RETURN_IF(ims_temp_try(path, &e) < 0, err, IMS_EIO,
		  "cannot write the evaluation into '%s': no file can be created "
		  "there (%s); give -o a folder it can write", dir, strerror(errno));
	return 0;
}
