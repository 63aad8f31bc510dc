/*
 * history.c - what the parts of a run did before this one: carried in the
 * checkpoint's "run" metadata (a JSON object), so that the summary of a
 * resumed run describes the whole run (its images, the wall and training
 * time of every part, the best validation over all of them, the damaged
 * records met) and not only the part that wrote it. Time a part spent
 * after its last checkpoint (a killed run) is not in it.
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

/* The run so far, for a checkpoint written now: malloc'd JSON text, NULL
 * when out of memory. */
char *loop_history_save(run *r, const nn_train_result *res)
{
	const double now = ims_now();
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
	char *text = cJSON_PrintUnformatted(j);
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
 * r->part.hist, r->log, r->bad, r->sched.lr_batch and res's totals.
 */
int loop_history_load(run *r, const char *text, nn_train_result *res,
		      const char *path, ims_error *err)
{
	if (!text)
		return 0;
	cJSON *j = cJSON_Parse(text);
	RETURN_IF(!j || !cJSON_IsObject(j), err, IMS_ECORRUPT,
		  "cannot resume from '%s': its run history is not a JSON object", path);
	double v[18];
	static const char *const keys[18] = {
		"images", "train_s", "wall_s", "startup_s", "val_s", "checkpoint_s",
		"data_wait_s", "val_top1", "val_top5", "val_records", "val_bad_records",
		"best_val_top1", "best_epoch", "best_wall_s", "epochs_done",
		"bad_records", "lr_batch", NULL};
	int rc = 0;
	for (int i = 0; !rc && keys[i]; i++)
		rc = num(j, keys[i], !strcmp(keys[i], "best_epoch") ? -1 : 0, &v[i], path,
			 err);
	const cJSON *parts = cJSON_GetObjectItemCaseSensitive(j, "parts");
	const cJSON *first = cJSON_GetObjectItemCaseSensitive(j, "bad_record_indices");
	if (!rc && ((parts && !cJSON_IsArray(parts)) || (first && !cJSON_IsArray(first))))
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
	cJSON_Delete(j);
	return rc;
}

void loop_history_release(run *r)
{
	cJSON_free(r->part.hist.parts_json);
	r->part.hist.parts_json = NULL;
}
