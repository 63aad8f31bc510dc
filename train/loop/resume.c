/*
 * resume.c - the loop's checkpoint glue: CHECKPOINT_DIR/checkpoint.safetensors
 * written by rank 0 (train/checkpoint.h) with the run's position, options,
 * history and fp16 scaler in its metadata, and --resume, which every rank
 * reads from that same file (no broadcast needed) to continue where it
 * stopped.
 *
 * The position is global: the positions of the epoch's order trained, all
 * ranks' samples together. The order is a function of (seed, epoch) and
 * the split alone, so the rest of the epoch is the same records whatever
 * the rank count and batch size of the part that continues it; a resumed
 * run may change those (the schedule is re-derived, setup.c), never what
 * gives the position its meaning (seed, model, size, classes, the split,
 * the epochs a decaying schedule spans, the ranks' own shards under
 * --shard-owning).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "train/loop/loop_internal.h"

int loop_save_checkpoint(run *r, const nn_train_result *res, int epoch,
			 uint64_t position, uint64_t step, ims_error *err)
{
	if (!r->o->out.checkpoint_dir)
		return 0;
	/* one model, as after validation (every rank, a collective): the
	 * ranks go on from the average, as a run resumed from it does */
	FORWARD_IF_ERR(loop_average_statistics(r, err));
	FORWARD_IF_ERR(loop_bad_checkpoint(r, err));
	loop_reached(r, "the checkpoint");
	if (r->dp.rank != 0)
		return 0;
	char e[32], ep[32], s[32], w[32], b[32], seed[32], cls[32], size[32];
	char nrec[32], dig[32], vrec[32], vdig[32];
	snprintf(e, sizeof(e), "%d", epoch);
	snprintf(ep, sizeof(ep), "%llu", (unsigned long long)position);
	snprintf(s, sizeof(s), "%llu", (unsigned long long)step);
	snprintf(w, sizeof(w), "%d", r->dp.world);
	snprintf(b, sizeof(b), "%d", r->o->optim.batch_size);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)r->o->seed);
	snprintf(cls, sizeof(cls), "%d", r->data.classes);
	snprintf(size, sizeof(size), "%d", r->o->data.size);
	snprintf(nrec, sizeof(nrec), "%llu", (unsigned long long)r->data.train_records);
	snprintf(dig, sizeof(dig), "%016llx", (unsigned long long)r->data.train_digest);
	snprintf(vrec, sizeof(vrec), "%llu", (unsigned long long)r->data.val_records);
	snprintf(vdig, sizeof(vdig), "%016llx", (unsigned long long)r->data.val_digest);
	/* the options that shaped the run, for a person reading the file
	 * and for what a resumed run may change */
	/* what a resume trains with: whole, or no checkpoint */
	ims_json_watch();
	cJSON *j = loop_options_json(r);
	RETURN_IF(!j, err, IMS_ENOMEM, "cannot checkpoint: out of memory");
	char *opts = ims_json_print(j, 0);
	cJSON_Delete(j);
	char *hist = loop_history_save(r, res);
	cJSON_free(r->bad.ck_json);
	r->bad.ck_json = NULL;
	if (!opts || !hist) {
		free(opts);
		cJSON_free(hist);
		return ims_fail(err, IMS_ENOMEM, "cannot checkpoint: out of memory");
	}
	/* the skipped count in every precision, then fp16's scale and
	 * good-step count; without fp16 the NULL key ends the list before
	 * them (an fp16 run resumed from it must not start from S = 1) */
	char ls[NN_LOSS_SCALE_META_LEN], lg[NN_LOSS_SCALE_META_LEN];
	char sk[NN_LOSS_SCALE_META_LEN];
	nn_loss_scale_format(&r->fp16.scaler, ls, lg, sk);
	const char *meta[] = {"epoch", e, "epoch_position", ep, "step", s,
			      "world", w, "batch_size", b, "seed", seed,
			      "model", r->o->net.model, "classes", cls, "size", size,
			      "train_split", r->data.train_name,
			      "train_records", nrec, "train_digest", dig,
			      "val_split", r->data.val_name, "val_records", vrec,
			      "val_digest", vdig,
			      "options", opts, "run", hist,
			      "run_id", r->part.run_id,
			      "skipped_steps", sk,
			      r->fp16.scaler.enabled ? "loss_scale" : NULL, ls,
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
	r->log.ckpts += !rc;
	nn_model_card_text_release(&card);
	free(opts);
	cJSON_free(hist);
	return rc;
}

static int meta_u64(const st_file *f, const char *key, uint64_t *v, ims_error *err)
{
	const char *s = st_metadata_get(f, key);
	char *end;
	errno = 0;
	unsigned long long x = s ? strtoull(s, &end, 10) : 0;
	RETURN_IF(!s || errno || *end || end == s || s[0] == '-', err, IMS_ECORRUPT,
		  "cannot resume from '%s': no valid '%s' in its metadata",
		  st_path(f), key);
	*v = x;
	return 0;
}

/*
 * The split a resumed run reads as `which` ("train" or "val": --train,
 * --val) against the one its checkpoint records as which_split,
 * which_records and which_digest: the same name, record count and
 * digest, wherever it lies now. A checkpoint without them (written
 * before they were kept; "val" with 0 records: a run without --val)
 * compares nothing.
 */
static int same_split(const st_file *f, const char *which, const char *name_now,
		      uint64_t records_now, uint64_t digest_now,
		      const char *manifest, ims_error *err)
{
	char key[32];
	snprintf(key, sizeof(key), "%s_split", which);
	const char *name = st_metadata_get(f, key);
	snprintf(key, sizeof(key), "%s_digest", which);
	const char *digest = st_metadata_get(f, key);
	uint64_t n;
	snprintf(key, sizeof(key), "%s_records", which);
	if (!name || !digest)
		return 0;
	FORWARD_IF_ERR(meta_u64(f, key, &n, err));
	const int train = !strcmp(which, "train");
	if (!train && n == 0)
		return 0;
	char now[32];
	snprintf(now, sizeof(now), "%016llx", (unsigned long long)digest_now);
	RETURN_IF(n != records_now || strcmp(digest, now) || strcmp(name, name_now),
		  err, IMS_EINVAL,
		  "cannot resume from '%s': the %s split differs: its run %s on "
		  "split '%s' (%llu records, digest %s), --%s '%s' is split '%s' "
		  "(%llu records, digest %s); %s",
		  st_path(f), train ? "training" : "validation",
		  train ? "trained" : "validated", name, (unsigned long long)n,
		  digest, which, manifest, name_now,
		  (unsigned long long)records_now, now,
		  train ? "the position in the epoch counts that split's records"
			: "its best validation would compare epochs scored on two "
			  "splits (resume with that split's --val, or without "
			  "--val, or score the checkpoint with 'imshard eval')");
	return 0;
}

/* The checkpoint's options object into *out (NULL when absent or not
 * JSON); IMS_ENOMEM when memory ran out reading it, which must neither
 * skip the checks it feeds nor call the checkpoint damaged. */
static int meta_options(const run *r, const st_file *f, cJSON **out, ims_error *err)
{
	const char *s = st_metadata_get(f, "options");
	int oom = 0;
	cJSON *j = s ? ims_json_parse(s, strlen(s) + 1, 1, NULL, &oom) : NULL;
	RETURN_IF(oom, err, IMS_ENOMEM,
		  "cannot resume from '%s': out of memory for its options", r->ckpt_path);
	if (j && !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		j = NULL;
	}
	*out = j;
	return 0;
}

static double opt_num(const cJSON *o, const char *key, double dflt)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

static const char *opt_str(const cJSON *o, const char *key)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* A value of the options object as text ("true", "0.1", "cosine"). */
static void value_text(const cJSON *x, char *out, size_t len)
{
	if (cJSON_IsString(x))
		snprintf(out, len, "%s", x->valuestring);
	else if (cJSON_IsBool(x))
		snprintf(out, len, "%s", cJSON_IsTrue(x) ? "on" : "off");
	else if (cJSON_IsNumber(x))
		snprintf(out, len, "%.10g", x->valuedouble);
	else
		snprintf(out, len, "?");
}

/*
 * The options other than those handled by name (ranks and batch, which
 * re-derive the schedule; what is refused; what says nothing about the
 * run) that differ between the checkpoint's run and this one, as
 * "name was -> now, ..." into out. IMS_ENOMEM when this run's options
 * could not be had whole: a member dropped for memory would pass for an
 * option unchanged, and the resume would go on without saying it.
 */
static int changed_options(run *r, const cJSON *was, char *out, size_t len,
			   ims_error *err)
{
	static const char *const skip[] = {"world", "batch_size", "lr_peak",
					   "max_steps", "model", "size", "seed",
					   "train", "val", "epochs", NULL};
	out[0] = 0;
	ims_json_watch();
	cJSON *now = loop_options_json(r);
	/* printed only to learn whether the tree is whole */
	char *whole = ims_json_print(now, 0);
	free(whole);
	if (!whole) {
		cJSON_Delete(now);
		return ims_fail(err, IMS_ENOMEM,
				"cannot resume from '%s': out of memory comparing its "
				"options with this run's", r->ckpt_path);
	}
	const cJSON *x;
	size_t n = 0;
	cJSON_ArrayForEach(x, now)
	{
		int skipped = 0;
		for (const char *const *k = skip; *k; k++)
			skipped |= !strcmp(*k, x->string);
		const cJSON *y = cJSON_GetObjectItemCaseSensitive(was, x->string);
		if (skipped || !y || cJSON_Compare(x, y, 1))
			continue;
		/* a float option written widened (0.1000000015) by an earlier
		 * version is the same setting */
		if (!strcmp(x->string, "label_smoothing") && cJSON_IsNumber(x) &&
		    cJSON_IsNumber(y) && (float)x->valuedouble == (float)y->valuedouble)
			continue;
		char a[64], b[64];
		value_text(y, a, sizeof(a));
		value_text(x, b, sizeof(b));
		if (n < len)
			n += (size_t)snprintf(out + n, len - n, "%s%s %s -> %s", n ? ", " : "",
					      x->string, a, b);
	}
	cJSON_Delete(now);
	return 0;
}

/* The settings that give the position its meaning: each must be as the
 * checkpoint's run had it. */
static int check_same(run *r, const st_file *f, const cJSON *was, uint64_t world_was,
		      ims_error *err)
{
	const nn_train_opts *o = r->o;
	const char *path = r->ckpt_path;
	uint64_t cls, size, seed;
	FORWARD_IF_ERR(meta_u64(f, "classes", &cls, err));
	FORWARD_IF_ERR(meta_u64(f, "size", &size, err));
	FORWARD_IF_ERR(meta_u64(f, "seed", &seed, err));
	const char *model = st_metadata_get(f, "model");
	RETURN_IF(!model || strcmp(model, o->net.model), err, IMS_EINVAL,
		  "cannot resume from '%s' with --model %s: its run trains %s "
		  "(resume with --model %s, or start a new run)",
		  path, o->net.model, model ? model : "?", model ? model : "?");
	RETURN_IF(size != (uint64_t)o->data.size, err, IMS_EINVAL,
		  "cannot resume from '%s' with --size %d: its run trains at --size "
		  "%llu (resume with --size %llu)",
		  path, o->data.size, (unsigned long long)size, (unsigned long long)size);
	RETURN_IF(cls != (uint64_t)r->data.classes, err, IMS_EINVAL,
		  "cannot resume from '%s': its run has %llu classes, the splits "
		  "given now have %d",
		  path, (unsigned long long)cls, r->data.classes);
	RETURN_IF(seed != o->seed, err, IMS_EINVAL,
		  "cannot resume from '%s' with --seed %llu: its run used --seed %llu "
		  "(every epoch's order and augmentation come from it; resume with "
		  "--seed %llu)",
		  path, (unsigned long long)o->seed, (unsigned long long)seed,
		  (unsigned long long)seed);
	/* the normalisation the weights learnt on: a checkpoint of its run
	 * keeps it in the model card, as --mean/--std would write it */
	static const char *const norm_keys[2] = {"mean", "std"};
	const float *norm_now[2] = {o->data.mean, o->data.std};
	for (int i = 0; i < 2; i++) {
		const char *was_v = st_metadata_get(f, norm_keys[i]);
		float w[3];
		if (!was_v || sscanf(was_v, "%g,%g,%g", &w[0], &w[1], &w[2]) != 3 ||
		    !memcmp(w, norm_now[i], sizeof(w)))
			continue;
		char now[80], was_t[80];
		snprintf(now, sizeof(now), "%g,%g,%g", (double)norm_now[i][0],
			 (double)norm_now[i][1], (double)norm_now[i][2]);
		snprintf(was_t, sizeof(was_t), "%g,%g,%g", (double)w[0], (double)w[1],
			 (double)w[2]);
		return ims_fail(err, IMS_EINVAL,
				"cannot resume from '%s' with --%s %s: its run "
				"normalised its inputs with --%s %s, which its weights "
				"learnt on (resume with --%s %s, or start a new run)",
				path, norm_keys[i], now, norm_keys[i], was_t,
				norm_keys[i], was_t);
	}
	FORWARD_IF_ERR(same_split(f, "train", r->data.train_name,
				  r->data.train_records, r->data.train_digest,
				  o->data.train_manifest, err));
	/* the best validation compares every part's epochs: scored on
	 * another split they cannot be compared (resuming without --val,
	 * or adding one to a run that had none, compares nothing) */
	if (o->data.val_manifest)
		FORWARD_IF_ERR(same_split(f, "val", r->data.val_name,
					  r->data.val_records, r->data.val_digest,
					  o->data.val_manifest, err));
	/* the epochs a decaying schedule spans shape it: another count would
	 * put this run somewhere else on another curve */
	const int epochs_was = (int)opt_num(was, "epochs", o->optim.epochs);
	const char *sched_was = opt_str(was, "schedule");
	const int decays = o->optim.schedule != NN_LR_CONSTANT ||
			   (sched_was && strcmp(sched_was, "constant"));
	RETURN_IF(decays && epochs_was != o->optim.epochs, err, IMS_EINVAL,
		  "cannot resume from '%s' with --epochs %d: its run was set up for "
		  "--epochs %d, over which its learning-rate schedule decays (resume "
		  "with --epochs %d, or start a new run)",
		  path, o->optim.epochs, epochs_was, epochs_was);
	const cJSON *owning = cJSON_GetObjectItemCaseSensitive(was, "shard_owning");
	const int owning_was = cJSON_IsTrue(owning);
	RETURN_IF(owning && owning_was != (o->data.shard_owning != 0), err, IMS_EINVAL,
		  "cannot resume from '%s' %s --shard-owning: its run %s it (the "
		  "position in the epoch means records of the ranks' own shards in "
		  "one, of the whole split in the other)",
		  path, o->data.shard_owning ? "with" : "without",
		  owning_was ? "had" : "did not have");
	RETURN_IF(o->data.shard_owning && world_was != (uint64_t)r->dp.world, err,
		  IMS_EINVAL,
		  "cannot resume from '%s' with %d ranks under --shard-owning: its "
		  "run had %llu (each rank reads its own shards, so the rest of an "
		  "epoch cannot move to other ranks)",
		  path, r->dp.world, (unsigned long long)world_was);
	return 0;
}

/*
 * What would otherwise fail on the first tensor that does not fit, named
 * as the setting that differs: another model, class count, optimiser, or
 * SGD with momentum against SGD without (the one keeps a momentum buffer
 * per tensor, the other none). Read from f, the checkpoint the load takes
 * next, before the load verifies it; the model and classes are checked
 * again, verified, by check_same.
 */
static int check_state(run *r, const st_file *f, ims_error *err)
{
	const nn_train_opts *o = r->o;
	const char *path = r->ckpt_path;
	char model[64], cls[32], optim[16] = "";
	const char *m = st_metadata_get(f, "model");
	const char *c = st_metadata_get(f, "classes");
	snprintf(model, sizeof(model), "%s", m ? m : "");
	snprintf(cls, sizeof(cls), "%s", c ? c : "");
	cJSON *was = NULL;
	FORWARD_IF_ERR(meta_options(r, f, &was, err));
	const char *opt_was = opt_str(was, "optimizer");
	if (opt_was)
		snprintf(optim, sizeof(optim), "%s", opt_was);
	const double momentum_was = opt_num(was, "momentum", o->optim.momentum);
	cJSON_Delete(was);
	RETURN_IF(m && strcmp(model, o->net.model), err, IMS_EINVAL,
		  "cannot resume from '%s' with --model %s: its run trains %s "
		  "(resume with --model %s, or start a new run)",
		  path, o->net.model, model, model);
	char now[32];
	snprintf(now, sizeof(now), "%d", r->data.classes);
	RETURN_IF(c && strcmp(cls, now), err, IMS_EINVAL,
		  "cannot resume from '%s': its run has %s classes, the splits "
		  "given now have %d",
		  path, cls, r->data.classes);
	const char *opt_now = o->optim.optimizer == NN_OPTIM_ADAM    ? "adam"
			      : o->optim.optimizer == NN_OPTIM_ADAMW ? "adamw"
								     : "sgd";
	RETURN_IF(optim[0] && strcmp(optim, opt_now), err, IMS_EINVAL,
		  "cannot resume from '%s' with --optimizer %s: its run used "
		  "--optimizer %s, whose state the checkpoint holds (resume with "
		  "--optimizer %s, or start a new run)",
		  path, opt_now, optim, optim);
	RETURN_IF(!strcmp(opt_now, "sgd") && (momentum_was == 0) != (o->optim.momentum == 0),
		  err, IMS_EINVAL,
		  "cannot resume from '%s' with --momentum %g: its run used "
		  "--momentum %g, and SGD keeps momentum buffers only with a "
		  "momentum (resume with a momentum %s 0, or start a new run)",
		  path, o->optim.momentum, momentum_was,
		  momentum_was == 0 ? "of" : "above");
	return 0;
}

/* Restores the run's state and its position into r->part.at, and what the
 * resumed event tells into r->part.resume. The checkpoint is opened once:
 * its settings, its tensors and its position are one file's, whatever
 * replaces it meanwhile (a run still writing its next one). */
static int resume(run *r, nn_train_result *res, ims_error *err)
{
	const nn_train_opts *o = r->o;
	st_file *f = NULL;
	FORWARD_IF_ERR(st_open(r->ckpt_path, &f, err));
	int rc = check_state(r, f, err);
	if (!rc)
		rc = nn_checkpoint_load_resume_file(f, r->m, r->opt, err);
	if (rc) {
		st_close(f);
		return rc;
	}
	cJSON *was = NULL;
	uint64_t e = 0, pos = 0, s = 0, world = 1;
	rc = meta_options(r, f, &was, err);
	if (!rc && !was)
		rc = ims_fail(err, IMS_ECORRUPT,
			      "cannot resume from '%s': no valid 'options' in its "
			      "metadata", r->ckpt_path);
	if (!rc)
		rc = meta_u64(f, "epoch", &e, err);
	if (!rc)
		rc = meta_u64(f, "step", &s, err);
	if (!rc)
		rc = meta_u64(f, "world", &world, err);
	if (!rc)
		rc = check_same(r, f, was, world, err);
	/* what an earlier run's batch was: its own key, else its options */
	uint64_t batch_was = (uint64_t)opt_num(was, "batch_size", o->optim.batch_size);
	if (!rc && st_metadata_get(f, "batch_size"))
		rc = meta_u64(f, "batch_size", &batch_was, err);
	if (!rc && st_metadata_get(f, "epoch_position")) {
		rc = meta_u64(f, "epoch_position", &pos, err);
	} else if (!rc) {
		/* written before positions were: steps of its own batch */
		uint64_t es;
		rc = meta_u64(f, "epoch_step", &es, err);
		pos = es * batch_was * world;
	}
	if (!rc && (e > (uint64_t)INT32_MAX || (pos && pos >= r->data.train_records)))
		rc = ims_fail(err, IMS_ECORRUPT,
			      "cannot resume from '%s': its position (epoch %llu, "
			      "position %llu) is outside a split of %llu records",
			      r->ckpt_path, (unsigned long long)e,
			      (unsigned long long)pos,
			      (unsigned long long)r->data.train_records);
	if (!rc)
		rc = nn_loss_scale_restore(&r->fp16.scaler,
					   st_metadata_get(f, "loss_scale"),
					   st_metadata_get(f, "loss_scale_good_steps"),
					   st_metadata_get(f, "skipped_steps"),
					   r->ckpt_path, err);
	r->sched.lr_batch = (int)batch_was;
	if (!rc)
		rc = loop_history_load(r, st_metadata_get(f, "run"), res, r->ckpt_path,
				       err);
	if (!rc)
		rc = changed_options(r, was, r->part.changed, sizeof(r->part.changed), err);
	if (!rc) {
		const char *id = st_metadata_get(f, "run_id");
		snprintf(r->part.run_id, sizeof(r->part.run_id), "%s",
			 id && strlen(id) < sizeof(r->part.run_id) ? id : "");
		const char *sum = st_metadata_get(f, "checksum");
		r->part.checkpoint_id = ims_hash64(
			ims_hash64(sum ? ims_crc32c(0, sum, strlen(sum)) : 0, s),
			ims_hash64(e, pos));
		r->part.at.epoch = (int)e;
		r->part.at.position = pos;
		r->part.at.step = s;
		res->steps = s;
		r->part.resume = (nn_train_resume){
			.path = r->ckpt_path,
			.epoch = (int)e,
			.step = s,
			.position = pos,
			.verified = st_metadata_get(f, "checksum") != NULL,
			.world_was = (int)world,
			.batch_was = (int)batch_was,
			.world = r->dp.world,
			.batch = o->optim.batch_size,
			.lr_peak_was = opt_num(was, "lr_peak", 0),
			.changed = r->part.changed,
		};
		const uint64_t max = o->optim.max_steps > 0 ? (uint64_t)o->optim.max_steps : UINT64_MAX;
		r->part.complete = e >= (uint64_t)o->optim.epochs ? 1 : s >= max ? 2 : 0;
		r->part.resume.complete = r->part.complete;
	}
	cJSON_Delete(was);
	st_close(f);
	return rc;
}

/*
 * Every rank's run_id is rank 0's: a new run's is made on each rank from
 * its own clock and pid, and a rank-local --log-dir's start line must
 * name the run rank 0's folder names. A resumed run's is its
 * checkpoint's, the same file on every rank (loop_agree_resume).
 */
int loop_share_run_id(run *r, ims_error *err)
{
	if (r->dp.world < 2 || r->o->out.resume)
		return 0;
	return dp_broadcast(r->dp.comm, r->part.run_id, sizeof(r->part.run_id), 0,
			    err);
}

/*
 * --checkpoint-dir: made by rank 0, and with --resume the run's state,
 * position (r->part.at) and history read back; a fresh run starts at 0.
 */
int loop_check_resumable(const nn_train_opts *o, ims_error *err)
{
	if (!o->out.resume || !o->out.checkpoint_dir)
		return 0;
	const char *dir = o->out.checkpoint_dir;
	char path[4096];
	struct stat st;
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), dir, "checkpoint.safetensors", err));
	RETURN_IF(stat(dir, &st) != 0 && errno == ENOENT, err, IMS_ENOTFOUND,
		  "cannot resume from '%s': no such folder (--checkpoint-dir of "
		  "the run to continue; without --resume a new run starts there)",
		  dir);
	RETURN_IF(lstat(path, &st) != 0 && errno == ENOENT, err, IMS_ENOTFOUND,
		  "cannot resume from '%s': it holds no checkpoint.safetensors "
		  "(the run stopped before its first checkpoint, or wrote them "
		  "elsewhere; without --resume a new run starts there)",
		  dir);
	return 0;
}

int loop_open_checkpoints(run *r, nn_train_result *res, ims_error *err)
{
	const nn_train_opts *o = r->o;
	memset(&r->part.at, 0, sizeof(r->part.at));
	r->sched.lr_batch = o->optim.batch_size;
	if (!o->out.resume) {
		/* a new run: an id its logs, checkpoints and summary carry,
		 * so a later part, or a report, can tell its own lines from
		 * another run's; rank 0's, every rank's (loop_share_run_id) */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(r->part.run_id, sizeof(r->part.run_id), "%016llx",
			 (unsigned long long)ims_hash64(
				 ims_hash64((uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec),
				 (uint64_t)getpid()));
	}
	if (!o->out.checkpoint_dir)
		return 0;
	if (r->dp.rank == 0) {
		FORWARD_IF_ERR(ims_mkdir_p(o->out.checkpoint_dir, err));
		/* what a run killed while writing a checkpoint left */
		ims_temp_sweep(o->out.checkpoint_dir, "checkpoint.safetensors", NULL);
	}
	FORWARD_IF_ERR(ims_path_join(r->ckpt_path, sizeof(r->ckpt_path),
				     o->out.checkpoint_dir, "checkpoint.safetensors",
				     err));
	if (!o->out.resume)
		return 0;
	FORWARD_IF_ERR(resume(r, res, err));
	r->part.resumed = 1;
	return 0;
}

/*
 * The resumed event, with the schedule's new peak and what is left of the
 * epoch, and metrics.jsonl's "resume" line (rank 0; none when there is
 * nothing to train, which writes nothing).
 */
int loop_report_resumed(run *r, ims_error *err)
{
	nn_train_resume *v = &r->part.resume;
	const uint64_t global = (uint64_t)r->o->optim.batch_size * (uint64_t)r->dp.world;
	v->lr_peak = nn_lr_peak(&r->sched.lr);
	if (!r->part.complete && v->epoch < r->o->optim.epochs) {
		v->rest_steps = aug_loader_batches_at(r->data.train, v->position);
		v->rest_unused = r->data.train_records - v->position - v->rest_steps * global;
	}
	if (r->log.ev.resumed)
		r->log.ev.resumed(r->log.ev.ctx, v);
	if (r->part.complete || r->dp.rank != 0)
		return 0;
	cJSON *j = loop_metrics_object("resume");
	cJSON_AddNumberToObject(j, "epoch", v->epoch);
	cJSON_AddNumberToObject(j, "step", (double)v->step);
	cJSON_AddNumberToObject(j, "epoch_position", (double)v->position);
	cJSON_AddNumberToObject(j, "world_was", v->world_was);
	cJSON_AddNumberToObject(j, "world", v->world);
	cJSON_AddNumberToObject(j, "batch_was", v->batch_was);
	cJSON_AddNumberToObject(j, "batch", v->batch);
	cJSON_AddNumberToObject(j, "global_batch_was", (double)v->world_was * v->batch_was);
	cJSON_AddNumberToObject(j, "global_batch", (double)global);
	cJSON_AddNumberToObject(j, "lr_peak_was", v->lr_peak_was);
	cJSON_AddNumberToObject(j, "lr_peak", v->lr_peak);
	cJSON_AddNumberToObject(j, "steps_per_epoch", (double)r->data.steps_per_epoch);
	cJSON_AddNumberToObject(j, "rest_steps", (double)v->rest_steps);
	cJSON_AddNumberToObject(j, "rest_unused", (double)v->rest_unused);
	cJSON_AddStringToObject(j, "changed", v->changed);
	cJSON_AddBoolToObject(j, "verified", v->verified);
	return loop_metrics_line(r, j, err);
}
