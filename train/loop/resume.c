/*
 * resume.c - the loop's checkpoint glue: CHECKPOINT_DIR/checkpoint.safetensors
 * written by rank 0 (train/checkpoint.h) with the run's position, options
 * and fp16 scaler in its metadata, and --resume, which every rank reads
 * from that same file (no broadcast needed) to continue where it stopped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "train/loop/loop_internal.h"

int loop_save_checkpoint(run *r, int epoch, uint64_t epoch_step,
			 uint64_t step, ims_error *err)
{
	if (!r->o->checkpoint_dir || r->dp.rank != 0)
		return 0;
	char e[32], es[32], s[32], w[32], seed[32], cls[32], size[32];
	snprintf(e, sizeof(e), "%d", epoch);
	snprintf(es, sizeof(es), "%llu", (unsigned long long)epoch_step);
	snprintf(s, sizeof(s), "%llu", (unsigned long long)step);
	snprintf(w, sizeof(w), "%d", r->dp.world);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)r->o->seed);
	snprintf(cls, sizeof(cls), "%d", r->data.classes);
	snprintf(size, sizeof(size), "%d", r->o->size);
	/* the options that shaped the run, for a person reading the file;
	 * resuming checks model, classes and size itself */
	cJSON *j = loop_options_json(r);
	RETURN_IF(!j, err, IMS_ENOMEM, "cannot checkpoint: out of memory");
	char *opts = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	RETURN_IF(!opts, err, IMS_ENOMEM, "cannot checkpoint: out of memory");
	/* the skipped count in every precision, then fp16's scale and
	 * good-step count; without fp16 the NULL key ends the list before
	 * them (an fp16 run resumed from it must not start from S = 1) */
	char ls[NN_LOSS_SCALE_META_LEN], lg[NN_LOSS_SCALE_META_LEN];
	char sk[NN_LOSS_SCALE_META_LEN];
	nn_loss_scale_format(&r->scaler, ls, lg, sk);
	const char *meta[] = {"epoch", e, "epoch_step", es, "step", s,
			      "world", w, "seed", seed, "model", r->o->model,
			      "classes", cls, "size", size, "options", opts,
			      "skipped_steps", sk,
			      r->scaler.enabled ? "loss_scale" : NULL, ls,
			      "loss_scale_good_steps", lg, NULL};
	/* then the model card (train/model_card.h): all that eval, predict
	 * and export need besides the weights */
	nn_model_card_text card;
	const char *all[sizeof(meta) / sizeof(meta[0]) + 2 * 8];
	size_t n = 0;
	int rc = nn_model_card_format(&r->card, &card, err);
	for (size_t i = 0; !rc && meta[i]; i += 2) {
		all[n++] = meta[i];
		all[n++] = meta[i + 1];
	}
	for (size_t i = 0; !rc && card.kv[i]; i++)
		all[n++] = card.kv[i];
	all[n] = NULL;
	double t0 = ims_now();
	if (!rc)
		rc = nn_checkpoint_save(r->ckpt_path, r->m, r->opt, all, err);
	r->log.ckpt_s += ims_now() - t0;
	nn_model_card_text_release(&card);
	free(opts);
	return rc;
}

static int meta_u64(st_file *f, const char *key, uint64_t *v, ims_error *err)
{
	const char *s = st_metadata_get(f, key);
	char *end;
	errno = 0;
	unsigned long long x = s ? strtoull(s, &end, 10) : 0;
	RETURN_IF(!s || errno || *end || end == s, err, IMS_ECORRUPT,
		  "cannot resume from '%s': no valid '%s' in its metadata",
		  st_path(f), key);
	*v = x;
	return 0;
}

/* Restores the run's state; epoch and epoch_step say where to go on. */
static int resume(run *r, int *epoch, uint64_t *epoch_step, uint64_t *step,
		  ims_error *err)
{
	st_file *f = NULL;
	FORWARD_IF_ERR(nn_checkpoint_load_resume(r->ckpt_path, r->m, r->opt, &f,
						 err));
	uint64_t e = 0, es = 0, s = 0, cls = 0, size = 0;
	int rc = meta_u64(f, "epoch", &e, err);
	if (!rc)
		rc = meta_u64(f, "epoch_step", &es, err);
	if (!rc)
		rc = meta_u64(f, "step", &s, err);
	if (!rc)
		rc = meta_u64(f, "classes", &cls, err);
	if (!rc)
		rc = meta_u64(f, "size", &size, err);
	const char *model = rc ? NULL : st_metadata_get(f, "model");
	if (!rc && (!model || strcmp(model, r->o->model) ||
		    cls != (uint64_t)r->data.classes || size != (uint64_t)r->o->size))
		rc = ims_fail(err, IMS_EINVAL,
			      "cannot resume from '%s': it holds %s for %llu classes "
			      "at %llu px, this run trains %s for %d classes at %d px",
			      r->ckpt_path, model ? model : "?",
			      (unsigned long long)cls, (unsigned long long)size,
			      r->o->model, r->data.classes, r->o->size);
	if (!rc)
		rc = nn_loss_scale_restore(&r->scaler,
					   st_metadata_get(f, "loss_scale"),
					   st_metadata_get(f, "loss_scale_good_steps"),
					   st_metadata_get(f, "skipped_steps"),
					   r->ckpt_path, err);
	st_close(f);
	if (rc)
		return rc;
	*epoch = (int)e;
	*epoch_step = es;
	*step = s;
	return 0;
}

/*
 * --checkpoint-dir: made by rank 0, and with --resume the run's position
 * read back (epoch from 0, the steps of that epoch already trained, the
 * steps in all); all 0 otherwise.
 */
int loop_open_checkpoints(run *r, int *epoch, uint64_t *epoch_step,
			  uint64_t *step, ims_error *err)
{
	const nn_train_opts *o = r->o;
	*epoch = 0;
	*epoch_step = *step = 0;
	if (!o->checkpoint_dir)
		return 0;
	if (r->dp.rank == 0) {
		FORWARD_IF_ERR(ims_mkdir_p(o->checkpoint_dir, err));
		/* what a run killed while writing a checkpoint left */
		ims_temp_sweep(o->checkpoint_dir, "checkpoint.safetensors", NULL);
	}
	FORWARD_IF_ERR(ims_path_join(r->ckpt_path, sizeof(r->ckpt_path),
				     o->checkpoint_dir, "checkpoint.safetensors",
				     err));
	if (!o->resume)
		return 0;
	FORWARD_IF_ERR(resume(r, epoch, epoch_step, step, err));
	if (r->log.ev.resumed)
		r->log.ev.resumed(r->log.ev.ctx, r->ckpt_path, *epoch, *step);
	return 0;
}
