/*
 * history.c - what the parts of a run did before this one: carried in the
 * checkpoint's "run" metadata (a JSON object), so that the summary of a
 * resumed run describes the whole run (its images, the wall and training
 * time of every part, the best validation over all of them, the damaged
 * records met, the file --init started it from) and not only the part
 * that wrote it. Time a part spent after its last checkpoint (a killed
 * run) is not in it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "train/loop/loop_internal.h"

/* This part so far, as an entry of "parts". */
static cJSON *this_part(const run *r, const nn_train_result *res, double now)
{
	cJSON *p = cJSON_CreateObject();
	if (!p)
		return NULL;
	cJSON_AddNumberToObject(p, "world", r->dp.world);
	cJSON_AddNumberToObject(p, "batch_per_rank", r->o->optim.batch_size);
	cJSON_AddNumberToObject(p, "threads", r->ctx.threads);
	cJSON_AddNumberToObject(p, "first_step", (double)r->part.at.step);
	cJSON_AddNumberToObject(p, "steps", (double)(res->steps > r->part.at.step
						      ? res->steps - r->part.at.step
						      : 0));
	cJSON_AddNumberToObject(p, "images", (double)(res->images - r->part.hist.images));
	cJSON_AddNumberToObject(p, "train_s", r->log.t_part > 0 ? now - r->log.t_part : 0);
	cJSON_AddNumberToObject(p, "wall_s", now - r->log.t_run);
	return p;
}

/* The earlier parts and this one (NULL when out of memory). */
cJSON *loop_history_parts(const run *r, const nn_train_result *res)
{
	cJSON *a = r->part.hist.parts_json ? cJSON_Parse(r->part.hist.parts_json)
				       : cJSON_CreateArray();
	if (!a)
		return NULL;
	cJSON *p = this_part(r, res, ims_now());
	if (p)
		cJSON_AddItemToArray(a, p);
	return a;
}

/*
 * A run started with --init says what it started from, in every
 * checkpoint's "run" and in summary.json, so a fine-tuned model names
 * its origin after any number of resumed parts (--resume and --init
 * exclude each other: the record is made once, here, and carried). The
 * path is kept as given, escaped as imshard prints names (control
 * characters and bytes that are not UTF-8 as \xHH): metadata must be
 * UTF-8, and a name from outside must not rewrite a terminal that shows
 * it. Its size and the CRC-32C of all its bytes name the very file read
 * ("verified": its own checksum was there and matched); the counts and
 * flags say what of it was taken.
 */
int loop_history_init(run *r, const nn_load_report *rep, ims_error *err)
{
	const nn_train_opts *o = r->o;
	const size_t cap = 4 * strlen(o->net.init) + 1; /* each byte \xHH at most */
	char *path = malloc(cap);
	cJSON *j = cJSON_CreateObject();
	int ok = path && j;
	if (ok) {
		char crc[16];
		snprintf(crc, sizeof(crc), "%08x", rep->file_crc32c);
		ok = cJSON_AddStringToObject(j, "path", ims_escape(o->net.init, path, cap)) &&
		     cJSON_AddNumberToObject(j, "bytes", (double)rep->file_bytes) &&
		     cJSON_AddStringToObject(j, "crc32c", crc) &&
		     cJSON_AddBoolToObject(j, "verified", rep->verified) &&
		     cJSON_AddNumberToObject(j, "loaded", rep->loaded) &&
		     cJSON_AddNumberToObject(j, "missing", rep->n_missing) &&
		     cJSON_AddNumberToObject(j, "ignored", rep->n_unexpected) &&
		     cJSON_AddNumberToObject(j, "reinit", rep->n_reinit) &&
		     cJSON_AddBoolToObject(j, "init_partial", o->net.init_partial) &&
		     cJSON_AddBoolToObject(j, "reset_head", o->net.reset_head) &&
		     cJSON_AddBoolToObject(j, "other_classes", rep->head_reset == 2) &&
		     cJSON_AddBoolToObject(j, "freeze_backbone", o->net.freeze_backbone);
	}
	free(path);
	cJSON_free(r->part.hist.init_json);
	r->part.hist.init_json = ok ? cJSON_PrintUnformatted(j) : NULL;
	cJSON_Delete(j);
	RETURN_IF(!r->part.hist.init_json, err, IMS_ENOMEM,
		  "cannot train: out of memory");
	return 0;
}

/* The run so far, for a checkpoint written now: malloc'd JSON text, NULL
 * when out of memory. */
char *loop_history_save(run *r, const nn_train_result *res)
{
	const double now = ims_now();
	ims_json_watch(); /* the checkpoint's history: whole, or none */
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON *parts = loop_history_parts(r, res);
	if (parts)
		cJSON_AddItemToObject(j, "parts", parts);
	cJSON_AddNumberToObject(j, "images", (double)res->images);
	cJSON_AddNumberToObject(j, "train_s", r->log.t_part > 0 ? now - r->log.t_start : 0);
	cJSON_AddNumberToObject(j, "wall_s", r->part.hist.wall_s + (now - r->log.t_run));
	cJSON_AddNumberToObject(j, "startup_s",
				r->part.hist.startup_s + (r->log.t_part > 0
							     ? r->log.t_part - r->log.t_run
							     : 0));
	cJSON_AddNumberToObject(j, "val_s", r->log.val_s);
	cJSON_AddNumberToObject(j, "checkpoint_s", r->log.ckpt_s);
	/* this one included: the count once it is written */
	cJSON_AddNumberToObject(j, "checkpoints", (double)(r->log.ckpts + 1));
	cJSON_AddNumberToObject(j, "data_wait_s", r->part.hist.wait_s + res->wait_s);
	cJSON_AddNumberToObject(j, "val_top1", res->val_top1);
	cJSON_AddNumberToObject(j, "val_top5", res->val_top5);
	cJSON_AddNumberToObject(j, "val_records", (double)res->val_records);
	cJSON_AddNumberToObject(j, "val_bad_records", (double)res->val_bad_records);
	cJSON_AddNumberToObject(j, "best_val_top1", res->best_top1);
	cJSON_AddNumberToObject(j, "best_epoch", res->best_epoch);
	cJSON_AddNumberToObject(j, "best_wall_s", res->best_wall_s);
	cJSON_AddNumberToObject(j, "epochs_done", res->epochs_done);
	cJSON_AddNumberToObject(j, "bad_records", (double)r->bad.total);
	cJSON *first = cJSON_AddArrayToObject(j, "bad_record_indices");
	for (int i = 0; first && i < r->bad.n_first; i++)
		cJSON_AddItemToArray(first, cJSON_CreateNumber((double)r->bad.first[i]));
	cJSON_AddNumberToObject(j, "lr_batch", r->sched.lr_batch);
	if (r->bad.ck_json) {
		cJSON *eb = cJSON_Parse(r->bad.ck_json);
		if (!eb) {
			cJSON_Delete(j);
			return NULL;
		}
		cJSON_AddItemToObject(j, "epoch_bad", eb);
	}
	if (r->part.hist.init_json) {
		cJSON *init = cJSON_Parse(r->part.hist.init_json);
		if (!init) {
			cJSON_Delete(j);
			return NULL;
		}
		cJSON_AddItemToObject(j, "init", init);
	}
	char *text = ims_json_print(j, 0);
	cJSON_Delete(j);
	return text;
}

/* A number of the history object: finite and >= 0 (best_epoch may be
 * -1), or 0 when absent. */
static int num(const cJSON *j, const char *key, double lo, double *v,
	       const char *path, ims_error *err)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, key);
	*v = 0;
	if (!x)
		return 0;
	RETURN_IF(!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < lo,
		  err, IMS_ECORRUPT,
		  "cannot resume from '%s': its run history has no valid '%s'", path,
		  key);
	*v = x->valuedouble;
	return 0;
}

/*
 * Restores the earlier parts from a checkpoint's "run" text (NULL: a
 * checkpoint from before it was kept, whose totals start at 0): into
 * r->part.hist (with --init's record, when the run has one), r->log,
 * r->bad, r->sched.lr_batch and res's totals.
 */
int loop_history_load(run *r, const char *text, nn_train_result *res,
		      const char *path, ims_error *err)
{
	if (!text)
		return 0;
	int oom = 0;
	cJSON *j = ims_json_parse(text, strlen(text) + 1, 1, NULL, &oom);
	/* memory running out says nothing of the checkpoint */
	RETURN_IF(oom, err, IMS_ENOMEM,
		  "cannot resume from '%s': out of memory for its run history", path);
	if (j && !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		j = NULL;
	}
	RETURN_IF(!j, err, IMS_ECORRUPT,
		  "cannot resume from '%s': its run history is not a JSON object", path);
	double v[19];
	static const char *const keys[19] = {
		"images", "train_s", "wall_s", "startup_s", "val_s", "checkpoint_s",
		"data_wait_s", "val_top1", "val_top5", "val_records", "val_bad_records",
		"best_val_top1", "best_epoch", "best_wall_s", "epochs_done",
		"bad_records", "lr_batch", "checkpoints", NULL};
	int rc = 0;
	for (int i = 0; !rc && keys[i]; i++)
		rc = num(j, keys[i], !strcmp(keys[i], "best_epoch") ? -1 : 0, &v[i], path,
			 err);
	const cJSON *parts = cJSON_GetObjectItemCaseSensitive(j, "parts");
	const cJSON *first = cJSON_GetObjectItemCaseSensitive(j, "bad_record_indices");
	/* absent from checkpoints written before it was kept, and from a
	 * run not started with --init */
	const cJSON *init = cJSON_GetObjectItemCaseSensitive(j, "init");
	if (!rc && ((parts && !cJSON_IsArray(parts)) ||
		    (first && !cJSON_IsArray(first)) || (init && !cJSON_IsObject(init))))
		rc = ims_fail(err, IMS_ECORRUPT,
			      "cannot resume from '%s': its run history is malformed", path);
	if (rc) {
		cJSON_Delete(j);
		return rc;
	}
	res->images = (uint64_t)v[0];
	r->part.hist.images = res->images;
	res->train_s = v[1];
	r->part.hist.wall_s = v[2];
	r->part.hist.startup_s = v[3];
	r->log.val_s = v[4];
	r->log.ckpt_s = v[5];
	r->log.ckpts = (uint64_t)v[17];
	r->part.hist.wait_s = v[6];
	res->val_top1 = v[7];
	res->val_top5 = v[8];
	res->val_records = (uint64_t)v[9];
	res->val_bad_records = (uint64_t)v[10];
	res->best_top1 = v[11];
	res->best_epoch = (int)v[12];
	res->best_wall_s = v[13];
	res->epochs_done = (int)v[14];
	r->bad.total = (uint64_t)v[15];
	res->bad_records = r->bad.total;
	if (v[16] >= 1)
		r->sched.lr_batch = (int)v[16];
	const cJSON *x;
	cJSON_ArrayForEach(x, first)
	{
		if (r->bad.n_first < LOOP_BAD_LISTED && cJSON_IsNumber(x) && x->valuedouble >= 0)
			r->bad.first[r->bad.n_first++] = (uint64_t)x->valuedouble;
	}
	if (parts) {
		r->part.hist.parts = cJSON_GetArraySize(parts);
		r->part.hist.parts_json = cJSON_PrintUnformatted(parts);
		if (!r->part.hist.parts_json)
			rc = ims_fail(err, IMS_ENOMEM, "cannot resume: out of memory");
	}
	if (!rc)
		rc = loop_bad_restore(r, cJSON_GetObjectItemCaseSensitive(j, "epoch_bad"),
				      path, err);
	if (!rc && init) {
		r->part.hist.init_json = cJSON_PrintUnformatted(init);
		if (!r->part.hist.init_json)
			rc = ims_fail(err, IMS_ENOMEM, "cannot resume: out of memory");
	}
	cJSON_Delete(j);
	return rc;
}

void loop_history_release(run *r)
{
	cJSON_free(r->part.hist.parts_json);
	r->part.hist.parts_json = NULL;
	cJSON_free(r->part.hist.init_json);
	r->part.hist.init_json = NULL;
	cJSON_free(r->bad.ck_json);
	r->bad.ck_json = NULL;
}
