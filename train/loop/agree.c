/*
 * agree.c - every rank started for the same run. mpirun starts each rank
 * from its own command line (a launcher script, an MPMD colon, a node
 * whose copy of the split is out of date), and ranks that differ would
 * hang in a collective of another size, corrupt memory in one (another
 * model's weights broadcast into this one's), or train apart without a
 * word. So before the first collective that depends on them, every rank
 * gathers every rank's fingerprint of each option that shapes the
 * computation or its collectives, and of the splits (their records
 * and shard digests, not their paths: node-local copies may lie elsewhere),
 * and all refuse alike with one line naming the first option that
 * differs. What may differ per rank is left out: --threads,
 * --loader-threads, --quiet, --verbose, --force (rank 0's folders), and
 * the folders' paths (only whether each is given).
 */
#include <stdlib.h>
#include <string.h>

#include "train/loop/loop_internal.h"

static uint64_t of_bytes(const void *p, size_t n)
{
	return ims_hash64(ims_crc32c(0, p, n), n);
}

uint64_t loop_fingerprint_str(const char *s)
{
	return s ? of_bytes(s, strlen(s)) : 0x6e756c6cu; /* "null" */
}

#define of_str loop_fingerprint_str

static uint64_t of_f64(double v)
{
	return of_bytes(&v, sizeof(v));
}

static uint64_t of_i64(int64_t v)
{
	return ims_hash64((uint64_t)v, 0x69363475u);
}

static const char *or_auto(const char *mode)
{
	return mode ? mode : "auto";
}

/* The options, in --help's order; n is the count. */
static int fingerprints(const run *r, fingerprint *f)
{
	const nn_train_opts *o = r->o;
	int n = 0;
#define FP(flag_, h_) f[n++] = (fingerprint){(flag_), (h_)}
	FP("--train (the split's records)",
	   ims_hash64(r->data.train_records, r->data.train_digest));
	FP("--train (its class names)", loop_fingerprint_names(&r->card));
	FP("--val (the split's records, or none)", r->data.val_digest);
	FP("--model", of_str(o->net.model));
	FP("--size", of_i64(o->data.size));
	FP("--augment", of_str(o->data.augment));
	FP("--val-crop-frac", of_f64(o->data.val_crop_frac));
	FP("--mean", of_bytes(o->data.mean, sizeof(o->data.mean)));
	FP("--std", of_bytes(o->data.std, sizeof(o->data.std)));
	FP("--shard-owning", of_i64(o->data.shard_owning));
	FP("--max-bad-records", of_i64(o->data.max_bad_records));
	FP("--synthetic", of_i64(o->data.synthetic));
	FP("--device", of_str(o->net.device));
	FP("--precision", of_str(o->net.precision));
	/* as the context runs them, and auto whether given or left out: a
	 * rank given a default and one left to it agree */
	FP("--cudnn-algo", of_i64(r->ctx.conv_algo));
	FP("--tf32", of_i64(r->ctx.tf32));
	FP("--channels-last", of_str(or_auto(o->net.channels_last)));
	FP("--cuda-graphs", of_str(or_auto(o->net.cuda_graphs)));
	FP("--init (given or not)", of_i64(o->net.init != NULL));
	FP("--init-partial", of_i64(o->net.init_partial));
	FP("--reset-head", of_i64(o->net.reset_head));
	FP("--freeze-backbone", of_i64(o->net.freeze_backbone));
	FP("--freeze-bn", of_i64(o->net.freeze_bn));
	FP("--epochs", of_i64(o->optim.epochs));
	FP("--max-steps", of_i64(o->optim.max_steps));
	FP("--batch-size", of_i64(o->optim.batch_size));
	FP("--lr", of_f64(o->optim.lr));
	FP("--no-lr-scaling", of_i64(o->optim.no_lr_scaling));
	FP("--optimizer", of_i64(o->optim.optimizer));
	FP("--momentum", of_f64(o->optim.momentum));
	FP("--nesterov", of_i64(o->optim.nesterov));
	FP("--weight-decay", of_f64(o->optim.weight_decay));
	FP("--no-bn-bias-decay", of_i64(o->optim.no_bn_bias_decay));
	FP("--warmup-epochs", of_f64(o->optim.warmup_epochs));
	FP("--schedule", of_i64(o->optim.schedule));
	FP("--label-smoothing", of_f64(o->optim.label_smoothing));
	FP("--seed", of_i64((int64_t)o->seed));
	FP("--checkpoint-dir (given or not)", of_i64(o->out.checkpoint_dir != NULL));
	FP("--resume", of_i64(o->out.resume));
	FP("--checkpoint-every", of_i64(o->out.checkpoint_every));
	FP("--log-dir (given or not)", of_i64(o->out.log_dir != NULL));
	FP("--log-every", of_i64(o->out.log_every));
	FP("--profile", of_i64(o->out.profile));
	FP("--bucket-mb", of_f64(o->comm.bucket_mb));
	FP("--collective-timeout", of_f64(o->comm.collective_timeout));
#undef FP
	return n;
}

uint64_t loop_fingerprint_names(const nn_model_card *c)
{
	uint64_t h = (uint64_t)c->classes;
	for (int i = 0; i < c->classes && c->class_names; i++)
		h = ims_hash64(h, of_str(c->class_names[i]));
	return h;
}

int loop_agree_on(run *r, const fingerprint *f, int n, const char *verb,
		  ims_error *err)
{
	if (r->dp.world < 2)
		return 0;
	/* 52 bits of each: a double holds them exactly */
	double *mine = calloc((size_t)n, sizeof(double));
	double *all = calloc((size_t)r->dp.world * (size_t)n, sizeof(double));
	if (!mine || !all) {
		free(mine);
		free(all);
		return ims_fail(err, IMS_ENOMEM, "cannot %s: out of memory", verb);
	}
	for (int i = 0; i < n; i++)
		mine[i] = (double)(f[i].h >> 12);
	int rc = dp_allgather_f64(r->dp.comm, mine, (size_t)n, all, err);
	for (int i = 0; !rc && i < n; i++)
		for (int k = 1; !rc && k < r->dp.world; k++)
			if (all[(size_t)k * (size_t)n + (size_t)i] != all[i]) {
				/* every rank compared the same table */
				rc = ims_fail(err, IMS_EINVAL,
					 "cannot %s: ranks 0 and %d were started "
					 "with different %s: every rank must be "
					 "started with the same options and splits",
					 verb, k, f[i].flag);
				loop_failed_alike(r);
			}
	free(mine);
	free(all);
	return rc;
}

void loop_failed_alike(run *r)
{
	r->failed.ranks = r->dp.world;
	r->failed.here = 1;
	r->failed.alike = 1;
}

int loop_agree_setup(run *r, int rc, const char *verb, ims_error *err)
{
	r->failed.ranks = r->failed.here = r->failed.alike = rc < 0;
	if (r->dp.world < 2)
		return rc;
	if (r->failed.out_of_step) {
		/* its gather would pair with a collective of the peers' that
		 * this rank left out: before, both waited until
		 * --collective-timeout */
		r->failed.ranks = r->failed.here = r->failed.alike = 0;
		return rc;
	}
	/* whether each rank failed, and a digest of its message: ranks that
	 * all failed alike (a path every rank was given) are told once */
	const double mine[2] = {rc < 0,
				rc < 0 ? (double)(loop_fingerprint_str(err->msg) >> 12) : 0};
	double *all = malloc((size_t)r->dp.world * 2 * sizeof(double));
	ims_error e;
	int arc = all ? dp_allgather_f64(r->dp.comm, mine, 2, all, &e)
		      : ims_fail(&e, IMS_ENOMEM, "cannot %s: out of memory", verb);
	if (arc < 0) {
		/* not agreed: this rank's failure is its own (the caller
		 * aborts the job) */
		free(all);
		r->failed.ranks = r->failed.here = r->failed.alike = 0;
		if (rc < 0)
			return rc;
		*err = e;
		return arc;
	}
	int failed = 0, alike = 1;
	for (int k = 0; k < r->dp.world; k++) {
		failed += all[2 * (size_t)k] != 0;
		alike = alike && all[2 * (size_t)k] != 0 &&
			all[2 * (size_t)k + 1] == all[1];
	}
	free(all);
	r->failed.ranks = failed;
	r->failed.alike = alike;
	if (rc < 0 || failed == 0)
		return rc;
	return ims_fail(err, IMS_EINVAL,
			"cannot %s: %d of %d ranks could not set up (named on "
			"stderr)",
			verb, failed, r->dp.world);
}

#define MAX_FINGERPRINTS 64 /* fingerprints() makes 45 */

int loop_agree(run *r, ims_error *err)
{
	fingerprint f[MAX_FINGERPRINTS];
	const int n = fingerprints(r, f);
	return loop_agree_on(r, f, n, "train", err);
}

int loop_agree_resume(run *r, ims_error *err)
{
	if (r->dp.world < 2 || !r->part.resumed)
		return 0;
	double mine[3] = {(double)(r->part.checkpoint_id >> 12),
			  (double)r->part.at.step, (double)r->part.at.epoch};
	double *all = malloc((size_t)r->dp.world * 3 * sizeof(double));
	RETURN_IF(!all, err, IMS_ENOMEM, "cannot resume: out of memory");
	int rc = dp_allgather_f64(r->dp.comm, mine, 3, all, err);
	for (int k = 1; !rc && k < r->dp.world; k++) {
		const double *o = all + 3 * (size_t)k;
		if (o[0] == all[0])
			continue;
		/* the same step and epoch: what differs is the content (the
		 * weights of another run, or another position in the epoch) */
		if (o[1] == all[1] && o[2] == all[2])
			rc = ims_fail(err, IMS_EINVAL,
				      "cannot resume: ranks 0 and %d read different "
				      "checkpoints (both at step %.0f of epoch %.0f, "
				      "with other contents: other weights or another "
				      "position in the epoch): every rank must resume "
				      "from the same file",
				      k, all[1], all[2] + 1);
		else
			rc = ims_fail(err, IMS_EINVAL,
				      "cannot resume: ranks 0 and %d read different "
				      "checkpoints (rank 0's is at step %.0f of epoch "
				      "%.0f, rank %d's at step %.0f of epoch %.0f): "
				      "every rank must resume from the same file",
				      k, all[1], all[2] + 1, k, o[1], o[2] + 1);
		loop_failed_alike(r);
	}
	free(all);
	return rc;
}
