/*
 * trainer.c - the data-parallel training loop behind imshard-train.
 *
 * Every rank runs this same loop on its share of each epoch: load a batch
 * (augment/ loader), forward, loss, backward, allreduce-average the
 * gradient block, optimiser step. Ranks start from rank 0's weights and
 * apply identical updates, so they stay identical by construction; the
 * loader gives every rank the same number of batches, so no rank waits in
 * an allreduce for work another rank does not have.
 *
 * Time is split per step into data wait (blocked on the loader), compute
 * (forward, backward, optimiser) and communication (allreduces); a rank's
 * busy time is its compute time, and the summary compares ranks by it.
 *
 * On a device backend (--device cuda) the model, its gradients and the
 * optimiser's state live in device memory; each batch is copied to one of
 * two device slots on a copy stream (the backend's stage_* entries), so
 * the copy overlaps the previous step's backward and update still running
 * on the device, and data wait also counts the host blocked on that copy.
 * The loss comes back with softmax_xent, the logits once per step for the
 * accuracy; validation reads its logits back and scores them on the host.
 *
 * Mixed precision (--precision bf16|fp16, cuda only): the context's
 * precision makes convolutions and linear layers compute on 16-bit copies
 * (train/cuda/); parameters, gradients, optimiser state and activations
 * stay fp32. fp16 adds dynamic loss scaling (train/loss_scale.h): the
 * loss gradient is multiplied by S, and after the gradient allreduce one
 * device pass unscales the gradients and looks for Inf/NaN; the flag is
 * summed over ranks with the step's statistics, so every rank skips the
 * same steps.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "augment/augment.h"
#include "recordio/recordio.h"
#include "train/dp_nccl.h"
#include "train/gpumon.h"
#include "train/loss_scale.h"
#include "train/nn_internal.h"
#include "train/train.h"

void nn_train_opts_init(nn_train_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->model = "convnet7";
	o->device = "cpu";
	o->epochs = 1;
	o->batch_size = 32;
	o->lr = 0.1;
	o->optimizer = NN_OPTIM_SGD;
	o->momentum = 0.9;
	o->weight_decay = 1e-4;
	o->schedule = NN_LR_COSINE;
	o->size = 224;
	o->augment = "flip";
	o->precision = "fp32";
	o->seed = 1;
	o->log_every = 10;
	o->bucket_mb = 1024;
	o->collective_timeout = 600;
	o->mean[0] = 123.675f;
	o->mean[1] = 116.28f;
	o->mean[2] = 103.53f;
	o->std[0] = 58.395f;
	o->std[1] = 57.12f;
	o->std[2] = 57.375f;
}

/* ---- small helpers ------------------------------------------------------- */

typedef struct run {
	const nn_train_opts *o;
	dp_comm *comm;
	int rank, world;
	nn_ctx ctx;
	int ctx_ok;
	aug_loader *train, *val;
	nn_model *m;
	nn_optim *opt;
	nn_optim_segment *segs;
	size_t nsegs;
	nn_lr_schedule lr;
	int classes;
	uint64_t steps_per_epoch;
	int metrics_fd;
	char ckpt_path[4096];
	float *dlogits;
	int32_t *labels;
	double t_start;             /* training clock's zero (after start-up) */
	double wait_s, compute_s, comm_s; /* this rank's step time split */
	double val_s, ckpt_s;       /* validation and checkpoint time */
	/* --synthetic: the one batch every step trains on */
	float *synth_x;
	int32_t *synth_labels;
	uint8_t *synth_padded;
	uint64_t *synth_indices;
	dp_buckets *buckets;        /* gradient allreduce overlapping backward */
	uint64_t nan_step;          /* fault injection: poison this step's batch (0: none) */
	uint64_t inf_step;          /* fault injection: an Inf gradient at this step (0: none) */
	nn_loss_scale scaler;       /* fp16's loss scale; disabled otherwise */
	/* device backends only (stage != NULL) */
	nn_stage *stage;            /* batches copied to the device */
	int slot;                   /* the slot the next batch goes to */
	/* the next batch, taken from the loader while this step computes,
	 * its copy queued in slot ahead_slot (-1: none taken); the loader
	 * then reuses the current batch's memory, so its labels are kept */
	aug_batch ahead;
	int ahead_taken, ahead_rc, ahead_slot;
	int32_t *held_labels;
	float *host_logits;         /* logits read back, batch x classes */
	nn_ctx hctx;                /* host context: validation's loss */
	int hctx_ok;
	float *synth_dev_x;         /* --synthetic: the batch, on the device */
	int32_t *synth_dev_labels;
	int device;                 /* this rank's GPU (CUDA ordinal) */
	dp_nccl *nccl;              /* several ranks on a device: NCCL */
	nn_gpumon *gpumon;          /* NVML, NULL when absent: no gpu lines */
} run;

/* One JSON line appended with a single write(): ranks share the file and
 * O_APPEND keeps each line whole. */
static void metrics_line(run *r, cJSON *obj)
{
	if (r->metrics_fd < 0) {
		cJSON_Delete(obj);
		return;
	}
	char *s = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	if (!s)
		return;
	size_t n = strlen(s);
	char *line = malloc(n + 2);
	if (line) {
		memcpy(line, s, n);
		line[n] = '\n';
		ssize_t w = write(r->metrics_fd, line, n + 1);
		(void)w; /* metrics are best effort; training goes on */
		free(line);
	}
	free(s);
}

static int log_path(const nn_train_opts *o, const char *file, char *out,
		    size_t len, ims_error *err)
{
	return ims_path_join(out, len, o->log_dir, file, err);
}

static int check_opts(const nn_train_opts *o, ims_error *err)
{
	RETURN_IF(!o->train_manifest, err, IMS_EINVAL,
		  "cannot train: no training split (--train)");
	RETURN_IF(!o->val_manifest, err, IMS_EINVAL,
		  "cannot train: no validation split (--val)");
	RETURN_IF(strcmp(o->device, "cpu") && strcmp(o->device, "cuda"), err,
		  IMS_EINVAL, "cannot train on device '%s': use cpu or cuda",
		  o->device);
	RETURN_IF(strcmp(o->precision, "fp32") &&
			  strcmp(o->precision, "bf16") &&
			  strcmp(o->precision, "fp16"),
		  err, IMS_EINVAL, "unknown precision '%s': use fp32, bf16 or fp16",
		  o->precision);
	RETURN_IF(strcmp(o->precision, "fp32") && strcmp(o->device, "cuda"),
		  err, IMS_EUNSUPPORTED,
		  "cannot train with --precision %s on the %s: mixed precision "
		  "is a --device cuda option (the cpu computes in fp32)",
		  o->precision, o->device);
	RETURN_IF(o->epochs < 1, err, IMS_EINVAL, "cannot train %d epochs",
		  o->epochs);
	RETURN_IF(o->batch_size < 1, err, IMS_EINVAL,
		  "cannot train with batches of %d", o->batch_size);
	RETURN_IF(!(o->lr > 0) || !isfinite(o->lr), err, IMS_EINVAL,
		  "cannot train with learning rate %g", o->lr);
	RETURN_IF(o->warmup_epochs < 0 || o->warmup_epochs > o->epochs, err,
		  IMS_EINVAL, "cannot warm up for %g of %d epochs",
		  o->warmup_epochs, o->epochs);
	RETURN_IF(o->label_smoothing < 0 || o->label_smoothing >= 1, err,
		  IMS_EINVAL, "label smoothing %g is outside [0, 1)",
		  o->label_smoothing);
	RETURN_IF(o->resume && !o->checkpoint_dir, err, IMS_EINVAL,
		  "cannot resume without --checkpoint-dir");
	RETURN_IF(o->resume && o->init, err, IMS_EINVAL,
		  "--resume and --init exclude each other: a resumed run "
		  "continues from its checkpoint");
	RETURN_IF(o->freeze_backbone && !o->init, err, IMS_EINVAL,
		  "--freeze-backbone needs --init weights to freeze");
	RETURN_IF(!(o->bucket_mb > 0) || o->bucket_mb > 1024, err, IMS_EINVAL,
		  "gradient buckets of %g MiB: use more than 0 and at most 1024",
		  o->bucket_mb);
	return 0;
}

/* The class lists of both splits must agree: labels are indices. */
static int load_classes(run *r, ims_error *err)
{
	rio_manifest a = {0}, b = {0};
	int rc = rio_manifest_load(r->o->train_manifest, &a, err);
	if (rc)
		return rc;
	rc = rio_manifest_load(r->o->val_manifest, &b, err);
	if (rc) {
		rio_manifest_release(&a);
		return rc;
	}
	if (a.n_classes != b.n_classes) {
		rc = ims_fail(err, IMS_EINVAL,
			      "cannot train: '%s' has %zu classes but '%s' has %zu "
			      "(pack both splits from one class list)",
			      r->o->train_manifest, a.n_classes,
			      r->o->val_manifest, b.n_classes);
	} else {
		for (size_t i = 0; i < a.n_classes && !rc; i++)
			if (strcmp(a.classes[i], b.classes[i]))
				rc = ims_fail(err, IMS_EINVAL,
					      "cannot train: class %zu is '%s' in '%s' "
					      "but '%s' in '%s'",
					      i, a.classes[i], r->o->train_manifest,
					      b.classes[i], r->o->val_manifest);
	}
	if (!rc && a.n_classes < 2)
		rc = ims_fail(err, IMS_EINVAL,
			      "cannot train on '%s': it has %zu class",
			      r->o->train_manifest, a.n_classes);
	r->classes = (int)a.n_classes;
	rio_manifest_release(&a);
	rio_manifest_release(&b);
	return rc;
}

/* The loader's warnings, said once by rank 0. */
static void loader_event(void *ctx, const char *msg)
{
	const run *r = ctx;
	char safe[4 * IMS_ERRMSG_MAX];
	if (r->rank == 0 && !r->o->quiet)
		fprintf(stderr, "imshard-train: warning: %s\n",
			ims_escape(msg, safe, sizeof(safe)));
}

static int open_loaders(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	aug_loader_opts lo;
	aug_loader_opts_init(&lo, 1);
	lo.manifest = o->train_manifest;
	lo.rank = r->rank;
	lo.world = r->world;
	lo.seed = o->seed;
	lo.batch_size = o->batch_size;
	lo.threads = o->threads;
	lo.quiet = r->rank != 0 || o->quiet;
	lo.shard_owning = o->shard_owning;
	lo.event = loader_event;
	lo.event_ctx = r;
	lo.transform.out_w = lo.transform.out_h = o->size;
	FORWARD_IF_ERR(aug_transform_parse(o->augment ? o->augment : "none",
					   &lo.transform, err));
	memcpy(lo.transform.mean, o->mean, sizeof(o->mean));
	memcpy(lo.transform.std, o->std, sizeof(o->std));
	FORWARD_IF_ERR(aug_loader_open(&lo, &r->train, err));

	aug_loader_opts vo;
	aug_loader_opts_init(&vo, 0);
	vo.manifest = o->val_manifest;
	vo.rank = r->rank;
	vo.world = r->world;
	vo.seed = o->seed;
	vo.batch_size = o->batch_size;
	vo.threads = o->threads;
	vo.quiet = 1;
	/* every record once: ranks pad to equal shares, padded samples are
	 * flagged and left out of the metric; a short last batch is kept */
	vo.drop_remainder = 0;
	vo.drop_last = 0;
	vo.transform.out_w = vo.transform.out_h = o->size;
	memcpy(vo.transform.mean, o->mean, sizeof(o->mean));
	memcpy(vo.transform.std, o->std, sizeof(o->std));
	FORWARD_IF_ERR(aug_loader_open(&vo, &r->val, err));
	r->steps_per_epoch = aug_loader_batches_per_epoch(r->train);
	return 0;
}

/*
 * --synthetic: one batch of standard-normal pixels (Box-Muller over the
 * counter-based generator, so the same for a rank whatever the threads)
 * and uniform labels, from (seed, rank). The train loader is opened for
 * its class list and epoch length but never started, so no decoding
 * competes with the compute threads.
 */
static int make_synthetic(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	const size_t n = (size_t)o->batch_size;
	const size_t per = (size_t)3 * o->size * o->size;
	r->synth_x = malloc(n * per * sizeof(float));
	r->synth_labels = malloc(n * sizeof(int32_t));
	r->synth_padded = calloc(n, 1);
	r->synth_indices = malloc(n * sizeof(uint64_t));
	RETURN_IF(!r->synth_x || !r->synth_labels || !r->synth_padded ||
			  !r->synth_indices,
		  err, IMS_ENOMEM, "cannot make a synthetic batch of %zu: out of memory",
		  n);
	ims_rng g;
	ims_rng_seed(&g, o->seed, 0x53594e54ull + (uint64_t)r->rank);
	for (size_t i = 0; i < n * per; i += 2) {
		double u1 = ims_rng_uniform(&g), u2 = ims_rng_uniform(&g);
		double rad = sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300));
		r->synth_x[i] = (float)(rad * cos(2 * M_PI * u2));
		if (i + 1 < n * per)
			r->synth_x[i + 1] = (float)(rad * sin(2 * M_PI * u2));
	}
	for (size_t i = 0; i < n; i++) {
		r->synth_labels[i] = (int32_t)ims_rng_below(&g, (uint64_t)r->classes);
		r->synth_indices[i] = i;
	}
	return 0;
}

static int setup_optim(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	int nt = nn_model_tensor_count(r->m);
	r->segs = calloc((size_t)nt, sizeof(*r->segs));
	RETURN_IF(!r->segs, err, IMS_ENOMEM, "cannot train: out of memory");
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *t = nn_model_tensor(r->m, i);
		if (t->kind == NN_TENSOR_RUNNING || t->kind == NN_TENSOR_COUNTER)
			continue;
		nn_optim_segment *s = &r->segs[r->nsegs++];
		s->offset = t->offset;
		s->count = t->count;
		s->decay = t->kind == NN_TENSOR_WEIGHT || !o->no_bn_bias_decay;
		s->trainable = !o->freeze_backbone || t->head;
	}
	nn_optim_opts oo;
	nn_optim_opts_init(&oo, o->optimizer);
	if (o->optimizer == NN_OPTIM_SGD) {
		oo.momentum = o->momentum;
		oo.nesterov = o->nesterov;
	}
	oo.weight_decay = o->weight_decay;
	oo.threads = r->ctx.threads;
	oo.ctx = &r->ctx; /* state on its device; the CPU's stays on the host */
	size_t np;
	nn_model_params(r->m, &np);
	FORWARD_IF_ERR(nn_optim_create(&oo, np, &r->opt, err));

	/* the schedule spans --epochs; --max-steps only stops early, so a
	 * run stopped and resumed follows the uninterrupted run's rates */
	uint64_t total = (uint64_t)o->epochs * r->steps_per_epoch;
	nn_lr_opts lo;
	nn_lr_opts_init(&lo);
	lo.base_lr = o->lr;
	lo.world = r->world;
	lo.no_scaling = o->no_lr_scaling;
	lo.warmup_steps = (int64_t)llround(o->warmup_epochs *
					   (double)r->steps_per_epoch);
	lo.decay = o->schedule;
	if (o->schedule == NN_LR_STEP) {
		/* x0.1 at half and three quarters of the run */
		lo.gamma = 0.1;
		lo.milestones[0] = (int64_t)(total / 2 > 0 ? total / 2 : 1);
		lo.milestones[1] = (int64_t)(total * 3 / 4 > (uint64_t)lo.milestones[0]
						     ? total * 3 / 4
						     : (uint64_t)lo.milestones[0] + 1);
		lo.n_milestones = 2;
	} else if (o->schedule == NN_LR_COSINE) {
		lo.total_steps = (int64_t)total > lo.warmup_steps
					 ? (int64_t)total
					 : lo.warmup_steps + 1;
	}
	return nn_lr_schedule_init(&r->lr, &lo, err);
}

/* Sum over ranks of a few doubles (loss, hits, counts). */
static int reduce(run *r, double *v, size_t n, double *comm_s, ims_error *err)
{
	double t0 = ims_now();
	int rc = dp_allreduce_sum_f64(r->comm, v, n, err);
	*comm_s += ims_now() - t0;
	return rc;
}

static int top_hits(const float *logits, int n, int k, const int32_t *labels,
		    const uint8_t *skip, int topk)
{
	return nn_topk_correct(n, k, logits, labels, topk, skip);
}

/* ---- inputs on the device --------------------------------------------------- */

/* Queues the copy of batch b into staging slot `slot`. */
static int stage_put(run *r, int slot, const aug_batch *b, ims_error *err)
{
	const size_t per = (size_t)3 * r->o->size * r->o->size * sizeof(float);
	return r->ctx.be->stage_put(r->stage, slot, b->data, per * (size_t)b->count,
				    b->labels, sizeof(int32_t) * (size_t)b->count,
				    err);
}

/*
 * Where the kernels read batch b: in place on the CPU backend (nothing
 * changes); on a device, the --synthetic batch's device copy, the slot
 * its copy was queued in during the previous step (take_ahead), or the
 * next staging slot, its copy queued now; waited for either way (*slot
 * says which, to hand to stage_done once the step is queued; -1 when
 * none). The host batch may be reused when this returns. *wait_s (may be
 * NULL) gets the time blocked on the copy.
 */
static int stage_inputs(run *r, const aug_batch *b, const float **x,
			const int32_t **labels, int *slot, double *wait_s,
			ims_error *err)
{
	*slot = -1;
	if (!r->stage)
		return 0;
	if (b->data == r->synth_x && r->synth_dev_x) {
		*x = r->synth_dev_x;
		*labels = r->synth_dev_labels;
		return 0;
	}
	const nn_backend *be = r->ctx.be;
	float *dx;
	int32_t *dl;
	if (r->ahead_slot >= 0) {
		/* its copy was queued during the previous step */
		*slot = r->ahead_slot;
		r->ahead_slot = -1;
	} else {
		*slot = r->slot;
		r->slot ^= 1;
		FORWARD_IF_ERR(stage_put(r, *slot, b, err));
	}
	double t0 = ims_now();
	FORWARD_IF_ERR(be->stage_get(r->stage, *slot, &dx, &dl, err));
	if (wait_s)
		*wait_s += ims_now() - t0;
	*x = dx;
	*labels = dl;
	return 0;
}

/* On a device: copies n rows of logits to the host (waits for the
 * device) and points *logits at them. */
static int read_logits(run *r, const float **logits, int n, ims_error *err)
{
	FORWARD_IF_ERR(r->ctx.be->to_host(&r->ctx, r->host_logits, *logits,
					  (size_t)n * r->classes * sizeof(float),
					  err));
	*logits = r->host_logits;
	return 0;
}

/*
 * A device run's buffers: the staging slots, logits read back, dlogits
 * in device memory, --synthetic's batch copied once, and a host context
 * for validation's per-sample loss. Nothing on the CPU backend.
 */
static int setup_device(run *r, ims_error *err)
{
	const nn_backend *be = r->ctx.be;
	if (!be->stage_create)
		return 0;
	const nn_train_opts *o = r->o;
	const size_t n = (size_t)o->batch_size;
	const size_t x_bytes = n * 3 * (size_t)o->size * o->size * sizeof(float);
	FORWARD_IF_ERR(be->stage_create(&r->ctx, x_bytes, n * sizeof(int32_t),
					&r->stage, err));
	r->host_logits = malloc(n * (size_t)r->classes * sizeof(float));
	r->held_labels = malloc(n * sizeof(int32_t));
	RETURN_IF(!r->host_logits || !r->held_labels, err, IMS_ENOMEM,
		  "cannot train: out of memory");
	FORWARD_IF_ERR(nn_ctx_init_cpu(&r->hctx, 1, err));
	r->hctx_ok = 1;
	char pci[64] = "";
	if (be->pci_bus_id)
		FORWARD_IF_ERR(be->pci_bus_id(&r->ctx, pci, (int)sizeof(pci), err));
	const char *why = NULL;
	r->gpumon = nn_gpumon_open(NULL, pci, r->device, &why);
	if (!r->gpumon && !o->quiet)
		fprintf(stderr,
			"imshard-train: rank %d: no gpu lines in metrics.jsonl: %s\n",
			r->rank, why ? why : "NVML is unusable");
	if (o->synthetic) {
		r->synth_dev_x = be->alloc(&r->ctx, x_bytes);
		r->synth_dev_labels = be->alloc(&r->ctx, n * sizeof(int32_t));
		RETURN_IF(!r->synth_dev_x || !r->synth_dev_labels, err, IMS_ENOMEM,
			  "cannot copy the synthetic batch to the %s: out of device memory",
			  be->name);
		FORWARD_IF_ERR(be->to_device(&r->ctx, r->synth_dev_x, r->synth_x,
					     x_bytes, err));
		FORWARD_IF_ERR(be->to_device(&r->ctx, r->synth_dev_labels,
					     r->synth_labels, n * sizeof(int32_t),
					     err));
	}
	return 0;
}

/* ---- validation ---------------------------------------------------------- */

static int validate_timed(run *r, nn_train_result *res, int epoch,
			  uint64_t step, double wall0, ims_error *err);

/* Validation's own time goes to the summary, so a report can tell it from
 * training when it compares wall times. */
static int validate(run *r, nn_train_result *res, int epoch, uint64_t step,
		    double wall0, ims_error *err)
{
	double t0 = ims_now();
	int rc = validate_timed(r, res, epoch, step, wall0, err);
	r->val_s += ims_now() - t0;
	return rc;
}

static int validate_timed(run *r, nn_train_result *res, int epoch,
			  uint64_t step, double wall0, ims_error *err)
{
	const nn_train_opts *o = r->o;
	/* Ranks normalised with their own batches' statistics; evaluate one
	 * model: the average of the ranks' running statistics. */
	size_t nb;
	float *buf = nn_model_buffers(r->m, &nb);
	double dummy = 0;
	if (r->nccl) {
		FORWARD_IF_ERR(dp_nccl_allreduce_avg(r->nccl, buf, nb, err));
	} else if (r->world > 1) {
		double t0 = ims_now();
		FORWARD_IF_ERR(dp_allreduce_sum_f32(r->comm, buf, nb, err));
		for (size_t i = 0; i < nb; i++)
			buf[i] /= (float)r->world;
		dummy += ims_now() - t0;
	}
	double t_val = ims_now();
	FORWARD_IF_ERR(aug_loader_start_epoch(r->val, 0, err));
	double sums[4] = {0, 0, 0, 0}; /* loss, top1, top5, records */
	for (;;) {
		aug_batch b;
		int rc = aug_loader_next(r->val, &b, err);
		if (rc < 0)
			return rc;
		if (rc == 1)
			break;
		const float *logits;
		const float *x = b.data;
		const int32_t *labels = b.labels;
		int slot = -1;
		FORWARD_IF_ERR(stage_inputs(r, &b, &x, &labels, &slot, NULL, err));
		FORWARD_IF_ERR(nn_model_forward(r->m, x, b.count, 0, 0, &logits,
						err));
		/* scored on the host: on a device, from logits read back */
		nn_ctx *lctx = &r->ctx;
		if (r->stage) {
			FORWARD_IF_ERR(read_logits(r, &logits, b.count, err));
			FORWARD_IF_ERR(r->ctx.be->stage_done(r->stage, slot, err));
			lctx = &r->hctx;
		}
		for (int i = 0; i < b.count; i++) {
			if (b.padded[i])
				continue;
			double l;
			FORWARD_IF_ERR(lctx->be->softmax_xent(lctx, 1, r->classes,
							   logits + (size_t)i * r->classes,
							   b.labels + i, 0, 1, &l, NULL,
							   err));
			sums[0] += l;
			sums[3] += 1;
		}
		sums[1] += top_hits(logits, b.count, r->classes, b.labels,
				    b.padded, 1);
		sums[2] += top_hits(logits, b.count, r->classes, b.labels,
				    b.padded, r->classes < 5 ? r->classes : 5);
	}
	FORWARD_IF_ERR(reduce(r, sums, 4, &dummy, err));
	double top1 = sums[3] > 0 ? sums[1] / sums[3] : 0;
	double top5 = sums[3] > 0 ? sums[2] / sums[3] : 0;
	double wall = ims_now() - wall0;
	res->val_top1 = top1;
	res->val_top5 = top5;
	res->val_records = (uint64_t)sums[3];
	if (top1 > res->best_top1 || res->best_epoch < 0) {
		res->best_top1 = top1;
		res->best_epoch = epoch;
		res->best_wall_s = wall;
	}
	if (r->rank == 0) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddStringToObject(j, "type", "val");
		cJSON_AddNumberToObject(j, "epoch", epoch);
		cJSON_AddNumberToObject(j, "step", (double)step);
		cJSON_AddNumberToObject(j, "loss", sums[3] > 0 ? sums[0] / sums[3] : 0);
		cJSON_AddNumberToObject(j, "top1", top1);
		cJSON_AddNumberToObject(j, "top5", top5);
		cJSON_AddNumberToObject(j, "records", sums[3]);
		cJSON_AddNumberToObject(j, "wall_s", wall);
		cJSON_AddNumberToObject(j, "val_s", ims_now() - t_val);
		metrics_line(r, j);
		if (!o->quiet)
			fprintf(stderr,
				"imshard-train: epoch %d validation: top-1 %.2f%%, "
				"top-5 %.2f%%, loss %.4f (%.0f records)\n",
				epoch + 1, 100 * top1, 100 * top5,
				sums[3] > 0 ? sums[0] / sums[3] : 0, sums[3]);
	}
	return 0;
}

/* ---- checkpoints --------------------------------------------------------- */

/* The options that shaped a run, as the checkpoint metadata and
 * summary.json record them. NULL when out of memory. */
static cJSON *options_json(const run *r)
{
	const nn_train_opts *o = r->o;
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "train", o->train_manifest);
	cJSON_AddStringToObject(j, "val", o->val_manifest);
	cJSON_AddNumberToObject(j, "epochs", o->epochs);
	cJSON_AddNumberToObject(j, "batch_size", o->batch_size);
	cJSON_AddNumberToObject(j, "lr", o->lr);
	cJSON_AddNumberToObject(j, "lr_peak", nn_lr_peak(&r->lr));
	cJSON_AddStringToObject(j, "model", o->model);
	cJSON_AddNumberToObject(j, "size", o->size);
	cJSON_AddNumberToObject(j, "threads", r->ctx.threads);
	cJSON_AddNumberToObject(j, "world", r->world);
	cJSON_AddNumberToObject(j, "seed", (double)o->seed);
	cJSON_AddStringToObject(j, "optimizer",
				o->optimizer == NN_OPTIM_ADAM    ? "adam"
				: o->optimizer == NN_OPTIM_ADAMW ? "adamw"
								 : "sgd");
	cJSON_AddBoolToObject(j, "nesterov", o->nesterov);
	cJSON_AddStringToObject(j, "device", o->device ? o->device : "cpu");
	cJSON_AddStringToObject(j, "precision", o->precision ? o->precision : "fp32");
	cJSON_AddNumberToObject(j, "max_steps", (double)o->max_steps);
	cJSON_AddNumberToObject(j, "momentum", o->momentum);
	cJSON_AddNumberToObject(j, "weight_decay", o->weight_decay);
	cJSON_AddNumberToObject(j, "warmup_epochs", o->warmup_epochs);
	cJSON_AddStringToObject(j, "schedule",
				o->schedule == NN_LR_STEP       ? "step"
				: o->schedule == NN_LR_CONSTANT ? "constant"
								: "cosine");
	cJSON_AddBoolToObject(j, "no_lr_scaling", o->no_lr_scaling);
	cJSON_AddStringToObject(j, "augment", o->augment ? o->augment : "none");
	cJSON_AddNumberToObject(j, "label_smoothing", o->label_smoothing);
	cJSON_AddBoolToObject(j, "freeze_bn", o->freeze_bn);
	cJSON_AddBoolToObject(j, "freeze_backbone", o->freeze_backbone);
	cJSON_AddBoolToObject(j, "synthetic", o->synthetic);
	cJSON_AddNumberToObject(j, "bucket_mb", o->bucket_mb);
	return j;
}

static int save_checkpoint(run *r, int epoch, uint64_t epoch_step,
			   uint64_t step, ims_error *err)
{
	if (!r->o->checkpoint_dir || r->rank != 0)
		return 0;
	char e[32], es[32], s[32], w[32], seed[32], cls[32], size[32];
	snprintf(e, sizeof(e), "%d", epoch);
	snprintf(es, sizeof(es), "%llu", (unsigned long long)epoch_step);
	snprintf(s, sizeof(s), "%llu", (unsigned long long)step);
	snprintf(w, sizeof(w), "%d", r->world);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)r->o->seed);
	snprintf(cls, sizeof(cls), "%d", r->classes);
	snprintf(size, sizeof(size), "%d", r->o->size);
	/* the options that shaped the run, for a person reading the file;
	 * resuming checks model, classes and size itself */
	cJSON *j = options_json(r);
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
	double t0 = ims_now();
	int rc = nn_checkpoint_save(r->ckpt_path, r->m, r->opt, meta, err);
	r->ckpt_s += ims_now() - t0;
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
		    cls != (uint64_t)r->classes || size != (uint64_t)r->o->size))
		rc = ims_fail(err, IMS_EINVAL,
			      "cannot resume from '%s': it holds %s for %llu classes "
			      "at %llu px, this run trains %s for %d classes at %d px",
			      r->ckpt_path, model ? model : "?",
			      (unsigned long long)cls, (unsigned long long)size,
			      r->o->model, r->classes, r->o->size);
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

/* ---- the loop ------------------------------------------------------------ */

/* nn_model_backward's hook: send what backward has finished. */
static int grads_ready(void *ud, size_t ready, ims_error *err)
{
	run *r = ud;
	return dp_buckets_ready(r->buckets, ready, err);
}

static int grads_ready_nccl(void *ud, size_t ready, ims_error *err)
{
	run *r = ud;
	return dp_nccl_ready(r->nccl, ready, err);
}

/*
 * With several ranks, gradients are summed in buckets of --bucket-mb from
 * the last layer's down, each started as soon as backward has finished it
 * and progressed between layers, so most of the allreduce overlaps the
 * rest of backward.
 */
static int setup_buckets(run *r, ims_error *err)
{
	if (r->world < 2)
		return 0;
	size_t np;
	float *g = nn_model_grads(r->m, &np);
	double floats = r->o->bucket_mb * 1048576.0 / sizeof(float);
	if (r->nccl) {
		/* on the device: NCCL on its own stream (dp_nccl.h) */
		FORWARD_IF_ERR(dp_nccl_buckets(r->nccl, g, np,
					       floats < 1 ? 1 : (size_t)floats, err));
		nn_model_set_grad_hook(r->m, grads_ready_nccl, r);
		return 0;
	}
	FORWARD_IF_ERR(dp_buckets_create(r->comm, g, np,
					 floats < 1 ? 1 : (size_t)floats,
					 &r->buckets, err));
	nn_model_set_grad_hook(r->m, grads_ready, r);
	return 0;
}

/*
 * Fault injection for tests of what a bad batch does to a run: with
 * IMSHARD_INJECT_NAN_STEP=N (from 1), the first pixel of step N's batch is
 * made NaN, on every rank or only on rank IMSHARD_INJECT_NAN_RANK.
 */
/* *step = the step number (from 1) in environment variable name, 0 when
 * it is unset. */
static int env_step(const char *name, uint64_t *step, ims_error *err)
{
	*step = 0;
	const char *s = getenv(name);
	if (!s)
		return 0;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	RETURN_IF(errno || end == s || *end || n == 0 || s[0] == '-', err,
		  IMS_EINVAL, "%s must be a step number from 1, got '%s'", name, s);
	*step = n;
	return 0;
}

static int fault_injection(run *r, ims_error *err)
{
	uint64_t n;
	FORWARD_IF_ERR(env_step("IMSHARD_INJECT_NAN_STEP", &n, err));
	if (!n)
		return 0;
	const char *rank = getenv("IMSHARD_INJECT_NAN_RANK");
	if (rank && atoi(rank) != r->rank)
		return 0;
	r->nan_step = n;
	return 0;
}

/*
 * Fault injection for tests of fp16's loss scaling: with
 * IMSHARD_INJECT_INF_GRAD_STEP=N (from 1), after step N's gradient
 * allreduce the last gradient element (the head's, trained in every mode)
 * is set to +Inf on every rank, as an overflow in backward would leave
 * it: the step must be skipped and the scale halved. fp16 only: the other
 * precisions check no gradients.
 */
static int inf_injection(run *r, ims_error *err)
{
	uint64_t n;
	FORWARD_IF_ERR(env_step("IMSHARD_INJECT_INF_GRAD_STEP", &n, err));
	if (!n)
		return 0;
	RETURN_IF(!r->scaler.enabled, err, IMS_EINVAL,
		  "IMSHARD_INJECT_INF_GRAD_STEP needs --precision fp16 (only "
		  "fp16 checks gradients for overflow)");
	r->inf_step = n;
	return 0;
}

/* IMSHARD_INJECT_NAN_STEP: poisons batch b when it is step `step`'s
 * (from 0), before its copy to a device is queued. */
static int poison(run *r, const aug_batch *b, uint64_t step, ims_error *err)
{
	if (step + 1 != r->nan_step || b->count < 1)
		return 0;
	((float *)b->data)[0] = NAN;
	/* the synthetic batch's device copy is poisoned too */
	if (r->synth_dev_x && b->data == r->synth_x)
		FORWARD_IF_ERR(r->ctx.be->to_device(&r->ctx, r->synth_dev_x,
						    r->synth_x, sizeof(float), err));
	return 0;
}

/*
 * On a device, with the loader's input: takes the next batch (step
 * next_step's) from the loader and queues its copy into the other
 * staging slot, while the device still computes this step, so the copy
 * overlaps compute instead of following it. The loader reuses batch b's
 * memory once it hands out the next, so b's labels, still needed on the
 * host, are kept first. The loader's wait counts as data wait.
 */
static int take_ahead(run *r, const aug_batch *b, uint64_t next_step,
		      double *wait_s, ims_error *err)
{
	memcpy(r->held_labels, b->labels, sizeof(int32_t) * (size_t)b->count);
	double t0 = ims_now();
	int rc = aug_loader_next(r->train, &r->ahead, err);
	*wait_s += ims_now() - t0;
	if (rc < 0)
		return rc;
	r->ahead_taken = 1;
	r->ahead_rc = rc;
	if (rc == 1) /* the epoch ended early: nothing to copy */
		return 0;
	FORWARD_IF_ERR(poison(r, &r->ahead, next_step, err));
	r->ahead_slot = r->slot;
	r->slot ^= 1;
	return stage_put(r, r->ahead_slot, &r->ahead, err);
}

/*
 * One training step on batch b. ahead: the loop trains another batch of
 * this epoch after this one, which a device run may take from the loader
 * during this step (take_ahead).
 */
static int train_step(run *r, const aug_batch *b, uint64_t step, int ahead,
		      double times[3], double sums[3], ims_error *err)
{
	const nn_train_opts *o = r->o;
	/* a batch taken ahead was poisoned before its copy was queued */
	if (r->ahead_slot < 0)
		FORWARD_IF_ERR(poison(r, b, step, err));
	const float *x = b->data;
	const int32_t *labels = b->labels;
	int slot = -1;
	FORWARD_IF_ERR(stage_inputs(r, b, &x, &labels, &slot, &times[0], err));
	double t0 = ims_now();
	const float *logits;
	FORWARD_IF_ERR(nn_model_forward(r->m, x, b->count, 1,
					ims_hash64(o->seed, step), &logits, err));
	/* forward is queued on the device; the loss below waits for it */
	const int32_t *host_labels = b->labels;
	if (ahead && r->stage && !o->synthetic) {
		double w = 0;
		FORWARD_IF_ERR(take_ahead(r, b, step + 1, &w, err));
		times[0] += w;
		t0 += w; /* not compute */
		host_labels = r->held_labels;
	}
	double loss = 0;
	/* The gradient of the mean loss over the global batch: each rank's
	 * share is scaled by 1 / (batch x ranks) here, so the allreduce's sum
	 * is already the mean and no pass over the gradients divides it (every
	 * rank's batch has the same size; NCCL averages on the device). fp16
	 * multiplies it by the loss scale S (1 otherwise, bit for bit). */
	const float ranks = r->nccl ? 1.0f : (float)r->world;
	const float scale = nn_loss_scale_value(&r->scaler);
	FORWARD_IF_ERR(r->ctx.be->softmax_xent(&r->ctx, b->count, r->classes, logits,
					   labels, o->label_smoothing,
					   scale / ((float)b->count * ranks), &loss,
					   r->dlogits, err));
	if (r->stage)
		FORWARD_IF_ERR(read_logits(r, &logits, b->count, err));
	double hits = top_hits(logits, b->count, r->classes, host_labels, NULL, 1);
	FORWARD_IF_ERR(nn_model_backward(r->m, r->dlogits, o->freeze_backbone,
					 err));
	double t1 = ims_now();
	/* time inside MPI during backward is communication */
	const double in_backward = dp_buckets_take_seconds(r->buckets);
	times[1] += t1 - t0 - in_backward;
	times[2] += in_backward;

	/* gradients: the sum over ranks is the global batch's mean (the loss
	 * gradient was scaled above) */
	size_t np;
	float *g = nn_model_grads(r->m, &np);
	double c0 = ims_now();
	if (r->nccl) {
		/* ncclAvg: the mean, on the device */
		FORWARD_IF_ERR(dp_nccl_finish(r->nccl, err));
		(void)dp_nccl_take_seconds(r->nccl);
	} else if (r->world > 1) {
		FORWARD_IF_ERR(dp_buckets_finish(r->buckets, err));
		(void)dp_buckets_take_seconds(r->buckets);
	}
	double c1 = ims_now();
	times[2] += c1 - c0;
	/* fp16: unscale the (allreduced, so identical) gradients and look
	 * for an overflow, in one pass on the device */
	int found_inf = 0;
	if (r->scaler.enabled) {
		RETURN_IF(!r->ctx.be->unscale_check, err, IMS_EUNSUPPORTED,
			  "cannot train with --precision fp16 on the %s",
			  r->ctx.be->name);
		if (step + 1 == r->inf_step) {
			const float inf = INFINITY;
			FORWARD_IF_ERR(r->ctx.be->to_device(&r->ctx, g + np - 1, &inf,
							    sizeof(inf), err));
		}
		FORWARD_IF_ERR(r->ctx.be->unscale_check(&r->ctx, g, np, 1.0f / scale,
							&found_inf, err));
	}
	double c2 = ims_now();
	times[1] += c2 - c1;
	/* the overflow flag summed too: every rank decides alike */
	double stats[4] = {loss, hits, b->count, found_inf};
	FORWARD_IF_ERR(dp_allreduce_sum_f64(r->comm, stats, 4, err));
	times[2] += ims_now() - c2;
	RETURN_IF(!isfinite(stats[0]), err, IMS_EINVAL,
		  "loss is %s at step %llu: stopping (lower --lr or check the "
		  "data; the last checkpoint written before this step is kept)",
		  isnan(stats[0]) ? "NaN" : "infinite",
		  (unsigned long long)step + 1);

	double t2 = ims_now();
	float *p = nn_model_params(r->m, NULL);
	if (nn_loss_scale_update(&r->scaler, stats[3] > 0)) {
		FORWARD_IF_ERR(nn_optim_step(r->opt, p, g, r->segs, r->nsegs,
					     nn_lr_at(&r->lr, (int64_t)step), err));
	} else if (r->rank == 0 && !o->quiet) {
		fprintf(stderr,
			"imshard-train: step %llu: fp16 gradients overflowed at loss "
			"scale %g: step skipped, scale now %g\n",
			(unsigned long long)step + 1, (double)scale,
			(double)nn_loss_scale_value(&r->scaler));
	}
	if (slot >= 0)
		FORWARD_IF_ERR(r->ctx.be->stage_done(r->stage, slot, err));
	times[1] += ims_now() - t2;
	sums[0] += stats[0];
	sums[1] += stats[1];
	sums[2] += stats[2];
	return 0;
}

/* The rank's GPU now (NVML), after each train line; nothing without it. */
static void gpu_line(run *r)
{
	nn_gpu_sample s;
	char line[512];
	if (!r->gpumon || r->metrics_fd < 0 || nn_gpumon_sample(r->gpumon, &s))
		return;
	int n = nn_gpu_line(line, sizeof(line) - 1, r->rank, r->device,
			    ims_now() - r->t_start, &s);
	if (n < 0)
		return;
	line[n] = '\n';
	ssize_t w = write(r->metrics_fd, line, (size_t)n + 1);
	(void)w; /* best effort, as metrics_line */
}

static void log_interval(run *r, int epoch, uint64_t step, double times[3],
			 double sums[3], int steps, double span, uint64_t images)
{
	if (steps == 0)
		return;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "type", "train");
	cJSON_AddNumberToObject(j, "rank", r->rank);
	cJSON_AddNumberToObject(j, "epoch", epoch);
	cJSON_AddNumberToObject(j, "step", (double)step);
	cJSON_AddNumberToObject(j, "loss", sums[2] > 0 ? sums[0] / sums[2] : 0);
	cJSON_AddNumberToObject(j, "accuracy", sums[2] > 0 ? sums[1] / sums[2] : 0);
	cJSON_AddNumberToObject(j, "lr", nn_lr_at(&r->lr, (int64_t)step - 1));
	cJSON_AddNumberToObject(j, "images_per_s", span > 0 ? images / span : 0);
	cJSON_AddNumberToObject(j, "data_wait_ms", 1e3 * times[0] / steps);
	cJSON_AddNumberToObject(j, "compute_ms", 1e3 * times[1] / steps);
	cJSON_AddNumberToObject(j, "comm_ms", 1e3 * times[2] / steps);
	cJSON_AddNumberToObject(j, "steps", steps); /* in this interval */
	cJSON_AddNumberToObject(j, "wall_s", ims_now() - r->t_start);
	/* fp16's loss scale now and steps skipped so far (1 and 0 otherwise) */
	cJSON_AddNumberToObject(j, "loss_scale", nn_loss_scale_value(&r->scaler));
	cJSON_AddNumberToObject(j, "skipped_steps", (double)r->scaler.skipped);
	metrics_line(r, j);
	gpu_line(r);
	if (r->rank == 0 && !r->o->quiet)
		fprintf(stderr,
			"imshard-train: epoch %d step %llu/%llu loss %.4f acc %.1f%% "
			"lr %.4g %.0f img/s (wait %.0f ms, compute %.0f ms, comm %.0f ms "
			"per step)\n",
			epoch + 1, (unsigned long long)step,
			(unsigned long long)(r->steps_per_epoch * (uint64_t)r->o->epochs),
			sums[2] > 0 ? sums[0] / sums[2] : 0,
			sums[2] > 0 ? 100 * sums[1] / sums[2] : 0,
			nn_lr_at(&r->lr, (int64_t)step - 1),
			span > 0 ? images * r->world / span : 0,
			1e3 * times[0] / steps, 1e3 * times[1] / steps,
			1e3 * times[2] / steps);
}

static int write_summary(run *r, nn_train_result *res, double busy,
			 ims_error *err)
{
	/* per rank: compute (busy), data wait, communication */
	double mine[3] = {busy, res->wait_s, r->comm_s};
	double *all = calloc((size_t)r->world * 3, sizeof(double));
	RETURN_IF(!all, err, IMS_ENOMEM, "cannot summarise: out of memory");
	int rc = dp_allgather_f64(r->comm, mine, 3, all, err);
	double mx = 0, mn = INFINITY;
	for (int i = 0; !rc && i < r->world; i++) {
		mx = all[3 * i] > mx ? all[3 * i] : mx;
		mn = all[3 * i] < mn ? all[3 * i] : mn;
	}
	res->busy_ratio = mn > 0 ? mx / mn : 1;
	if (rc || r->rank != 0 || !r->o->log_dir) {
		free(all);
		return rc;
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "world", r->world);
	cJSON_AddStringToObject(j, "model", r->o->model);
	cJSON_AddStringToObject(j, "device", r->o->device);
	cJSON_AddNumberToObject(j, "threads", r->ctx.threads);
	cJSON_AddNumberToObject(j, "batch_per_rank", r->o->batch_size);
	cJSON_AddNumberToObject(j, "global_batch", (double)r->o->batch_size * r->world);
	cJSON_AddNumberToObject(j, "lr_per_rank", r->o->lr);
	cJSON_AddNumberToObject(j, "lr_peak", nn_lr_peak(&r->lr));
	cJSON_AddNumberToObject(j, "epochs", res->epochs_done);
	cJSON_AddNumberToObject(j, "steps", (double)res->steps);
	cJSON_AddNumberToObject(j, "images", (double)res->images);
	cJSON_AddNumberToObject(j, "wall_s", res->wall_s);
	cJSON_AddNumberToObject(j, "train_s", res->train_s);
	cJSON_AddNumberToObject(j, "startup_s", res->startup_s);
	cJSON_AddNumberToObject(j, "images_per_s", res->images_per_s);
	static const char *const split[3] = {"busy_s", "data_wait_s_per_rank",
					     "comm_s_per_rank"};
	for (int k = 0; k < 3; k++) {
		cJSON *b = cJSON_AddArrayToObject(j, split[k]);
		for (int i = 0; i < r->world; i++)
			cJSON_AddItemToArray(b, cJSON_CreateNumber(all[3 * i + k]));
	}
	cJSON_AddNumberToObject(j, "busy_max_min_ratio", res->busy_ratio);
	cJSON_AddNumberToObject(j, "data_wait_s", res->wait_s);
	cJSON_AddNumberToObject(j, "stall_fraction",
				res->train_s > 0 ? res->wait_s / res->train_s : 0);
	cJSON_AddNumberToObject(j, "val_top1", res->val_top1);
	cJSON_AddNumberToObject(j, "val_top5", res->val_top5);
	cJSON_AddNumberToObject(j, "best_val_top1", res->best_top1);
	cJSON_AddNumberToObject(j, "best_epoch", res->best_epoch); /* from 0, as in metrics.jsonl */
	cJSON_AddNumberToObject(j, "best_wall_s", res->best_wall_s);
	cJSON_AddNumberToObject(j, "val_s", r->val_s);
	cJSON_AddNumberToObject(j, "checkpoint_s", r->ckpt_s);
	cJSON_AddNumberToObject(j, "loss_scale", res->loss_scale);
	cJSON_AddNumberToObject(j, "skipped_steps", (double)res->skipped_steps);
	nn_model_memory mem;
	nn_model_memory_info(r->m, &mem);
	cJSON_AddNumberToObject(j, "activation_bytes", (double)mem.activation_bytes);
	cJSON_AddNumberToObject(j, "activation_bytes_per_image",
				mem.activation_bytes_per_image);
	cJSON *opts = options_json(r);
	if (opts)
		cJSON_AddItemToObject(j, "options", opts);
	free(all);
	char *text = cJSON_Print(j);
	cJSON_Delete(j);
	RETURN_IF(!text, err, IMS_ENOMEM, "cannot summarise: out of memory");
	char path[4096];
	rc = log_path(r->o, "summary.json", path, sizeof(path), err);
	if (!rc) {
		size_t n = strlen(text);
		text[n] = '\n'; /* replaces the terminator: written by length */
		rc = ims_write_file_atomic(path, text, n + 1, err);
	}
	free(text);
	return rc;
}

/*
 * --device cuda with several ranks needs NCCL in the build: refused
 * before anything starts otherwise.
 */
static int check_cuda(int world, ims_error *err)
{
	RETURN_IF(world > 1 && !dp_nccl_available(), err, IMS_EUNSUPPORTED,
		  "cannot train on cuda with %d ranks: this build has no NCCL "
		  "(configured without it, MPI or the CUDA backend); run one "
		  "rank or use --device cpu",
		  world);
	return 0;
}

/* The GPU of this process: its node-local rank under a launcher (one
 * process per GPU), else 0. */
static int local_device(void)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
					   "MPI_LOCALRANKID", "SLURM_LOCALID",
					   NULL};
	for (int i = 0; vars[i]; i++) {
		const char *s = getenv(vars[i]);
		if (s && *s)
			return atoi(s);
	}
	return 0;
}

int nn_train_run(const nn_train_opts *o, dp_comm *comm, nn_train_result *res,
		 ims_error *err)
{
	FORWARD_IF_ERR(check_opts(o, err));
	if (!strcmp(o->device, "cuda"))
		FORWARD_IF_ERR(check_cuda(dp_world(comm), err));
	double start = ims_now();
	run r;
	memset(&r, 0, sizeof(r));
	r.o = o;
	r.comm = comm;
	r.rank = dp_rank(comm);
	r.world = dp_world(comm);
	r.metrics_fd = -1;
	r.ahead_slot = -1;
	memset(res, 0, sizeof(*res));
	res->best_epoch = -1;
	int rc = 0;

	if (!strcmp(o->device, "cuda")) {
		/* no usable GPU: nn_ctx_init_cuda's one line (no driver, no
		 * device, a build without the backend) before anything else */
		r.device = local_device();
		GOTO_IF_ERR(out, rc, nn_ctx_init_cuda(&r.ctx, r.device, err));
		r.ctx_ok = 1;
		r.ctx.precision = !strcmp(o->precision, "bf16")   ? NN_PREC_BF16
				  : !strcmp(o->precision, "fp16") ? NN_PREC_FP16
								  : NN_PREC_FP32;
	}
	nn_loss_scale_init(&r.scaler, !strcmp(o->precision, "fp16"));
	GOTO_IF_ERR(out, rc, dp_set_timeout(comm, o->collective_timeout, err));
	GOTO_IF_ERR(out, rc, fault_injection(&r, err));
	GOTO_IF_ERR(out, rc, inf_injection(&r, err));
	GOTO_IF_ERR(out, rc, load_classes(&r, err));
	if (!r.ctx_ok) {
		GOTO_IF_ERR(out, rc, nn_ctx_init_cpu(&r.ctx, o->threads, err));
		r.ctx_ok = 1;
		/* tests: the device loop's host side on the CPU (backend_cpu.c),
		 * one rank (several would take the GPU's NCCL path) */
		if (getenv("IMSHARD_TEST_HOST_STAGE")) {
			if (r.world > 1)
				GOTO_FAIL(out, rc, err, IMS_EINVAL,
					  "IMSHARD_TEST_HOST_STAGE is for one rank");
			r.ctx.be = nn_backend_cpu_host_staged();
		}
	}
	GOTO_IF_ERR(out, rc, open_loaders(&r, err));
	if (o->synthetic)
		GOTO_IF_ERR(out, rc, make_synthetic(&r, err));
	GOTO_IF_ERR(out, rc, nn_model_create(&r.ctx, o->model, r.classes, o->size,
					     o->size, o->batch_size, o->seed, &r.m,
					     err));
	nn_model_freeze_bn(r.m, o->freeze_bn);
	/* a frozen backbone's activations are not kept for a backward that
	 * never reaches them */
	if (o->freeze_backbone)
		GOTO_IF_ERR(out, rc, nn_model_set_use(r.m, NN_USE_TRAIN_HEAD, err));
	if (o->init) {
		nn_load_report rep;
		memset(&rep, 0, sizeof(rep));
		GOTO_IF_ERR(out, rc, nn_checkpoint_load_init(o->init, r.m, &rep, err));
		if (r.rank == 0 && !o->quiet) {
			fprintf(stderr, "imshard-train: loaded %d tensors from '%s'\n",
				rep.loaded, o->init);
			for (int i = 0; i < rep.n_reinit; i++)
				fprintf(stderr,
					"imshard-train: head '%s' has another shape in "
					"'%s': re-initialised\n",
					rep.reinit[i], o->init);
			for (int i = 0; i < rep.n_missing; i++)
				fprintf(stderr,
					"imshard-train: '%s' is not in '%s': kept as "
					"initialised\n",
					rep.missing[i], o->init);
			for (int i = 0; i < rep.n_unexpected; i++)
				fprintf(stderr,
					"imshard-train: '%s' in '%s' is not a tensor of "
					"%s: ignored\n",
					rep.unexpected[i], o->init, o->model);
		}
		nn_load_report_release(&rep);
	}
	/* Every rank starts from rank 0's weights and statistics. */
	size_t np, nb;
	float *params = nn_model_params(r.m, &np);
	float *bufs = nn_model_buffers(r.m, &nb);
	if (r.world > 1 && r.ctx.be->stage_create) {
		/* one GPU per rank: NCCL, its id sent over MPI */
		GOTO_IF_ERR(out, rc, dp_nccl_create(comm, &r.ctx, o->collective_timeout,
						    &r.nccl, err));
		GOTO_IF_ERR(out, rc, dp_nccl_broadcast(r.nccl, params, np, 0, err));
		GOTO_IF_ERR(out, rc, dp_nccl_broadcast(r.nccl, bufs, nb, 0, err));
	} else {
		GOTO_IF_ERR(out, rc, dp_broadcast(comm, params, np * sizeof(float), 0, err));
		GOTO_IF_ERR(out, rc, dp_broadcast(comm, bufs, nb * sizeof(float), 0, err));
	}
	GOTO_IF_ERR(out, rc, setup_optim(&r, err));
	GOTO_IF_ERR(out, rc, setup_buckets(&r, err));

	GOTO_IF_ERR(out, rc, setup_device(&r, err));
	r.dlogits = r.stage ? r.ctx.be->alloc(&r.ctx, (size_t)o->batch_size *
							  r.classes * sizeof(float))
			    : calloc((size_t)o->batch_size * r.classes, sizeof(float));
	if (!r.dlogits)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot train: out of memory");
	if (o->log_dir) {
		GOTO_IF_ERR(out, rc, ims_mkdir_p(o->log_dir, err));
		char path[4096];
		GOTO_IF_ERR(out, rc, log_path(o, "metrics.jsonl", path, sizeof(path), err));
		/* rank 0 starts the file afresh unless resuming; the others
		 * wait for that before appending */
		if (r.rank == 0 && !o->resume) {
			/* O_NOFOLLOW: a link planted at the name is refused,
			 * never written through */
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
			if (fd >= 0)
				close(fd);
		}
		GOTO_IF_ERR(out, rc, dp_barrier(comm, err));
		r.metrics_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
				    0644);
		if (r.metrics_fd < 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot open '%s': %s", path,
				  errno == ELOOP ? "it is a symbolic link (refused: it would be written through)" :
						   strerror(errno));
	}
	int epoch0 = 0;
	uint64_t skip = 0, step = 0;
	if (o->checkpoint_dir) {
		if (r.rank == 0) {
			GOTO_IF_ERR(out, rc, ims_mkdir_p(o->checkpoint_dir, err));
			/* what a run killed while writing a checkpoint left */
			ims_temp_sweep(o->checkpoint_dir, "checkpoint.safetensors", NULL);
		}
		GOTO_IF_ERR(out, rc, ims_path_join(r.ckpt_path, sizeof(r.ckpt_path),
						   o->checkpoint_dir,
						   "checkpoint.safetensors", err));
		if (o->resume) {
			/* every rank reads the same file: no broadcast needed */
			GOTO_IF_ERR(out, rc, resume(&r, &epoch0, &skip, &step, err));
			if (r.rank == 0 && !o->quiet)
				fprintf(stderr,
					"imshard-train: resuming from '%s' at epoch %d, "
					"step %llu\n",
					r.ckpt_path, epoch0 + 1, (unsigned long long)step);
		}
	}
	if (r.rank == 0 && !o->quiet) {
		uint64_t per, pad, drop;
		aug_loader_share(r.train, &per, &pad, &drop);
		fprintf(stderr,
			"imshard-train: %s, %d classes, %d rank%s x batch %d, %llu "
			"steps per epoch (%llu records per rank, %llu dropped so ranks "
			"are equal); lr %g per rank, %g with %d rank%s (%s)\n",
			o->model, r.classes, r.world, r.world > 1 ? "s" : "",
			o->batch_size, (unsigned long long)r.steps_per_epoch,
			(unsigned long long)per, (unsigned long long)drop, o->lr,
			nn_lr_peak(&r.lr), r.world, r.world > 1 ? "s" : "",
			o->no_lr_scaling ? "scaling off" : "linear scaling rule");
		nn_model_memory mem;
		nn_model_memory_info(r.m, &mem);
		fprintf(stderr,
			"imshard-train: activations: %.1f MiB planned for batches "
			"of %d (%.2f MiB per image)\n",
			(double)mem.activation_bytes / 1048576.0, mem.max_batch,
			mem.activation_bytes_per_image / 1048576.0);
		if (o->synthetic)
			fprintf(stderr,
				"imshard-train: --synthetic: every step trains on one "
				"fixed random batch per rank (nothing decoded); "
				"validation reads %s\n",
				o->val_manifest);
	}

	double t_start = ims_now();
	r.t_start = t_start;
	res->startup_s = t_start - start;
	double busy = 0;
	uint64_t max_steps = o->max_steps > 0 ? (uint64_t)o->max_steps : UINT64_MAX;
	int stop = step >= max_steps;
	for (int epoch = epoch0; epoch < o->epochs && !stop; epoch++) {
		if (!o->synthetic)
			GOTO_IF_ERR(out, rc, aug_loader_start_epoch(r.train,
								    (uint64_t)epoch, err));
		double times[3] = {0, 0, 0}, sums[3] = {0, 0, 0};
		int in_interval = 0;
		uint64_t interval_images = 0;
		double interval_t0 = ims_now();
		uint64_t done = 0; /* steps of this epoch trained (or replayed) */
		for (uint64_t s = 0; s < r.steps_per_epoch; s++) {
			aug_batch b;
			double w0 = ims_now();
			if (o->synthetic) {
				b = (aug_batch){.data = r.synth_x,
						.labels = r.synth_labels,
						.indices = r.synth_indices,
						.padded = r.synth_padded,
						.count = o->batch_size,
						.epoch = (uint64_t)epoch,
						.step = s};
				rc = 0;
			} else if (r.ahead_taken) {
				/* taken during the previous step */
				b = r.ahead;
				rc = r.ahead_rc;
				r.ahead_taken = 0;
			} else {
				rc = aug_loader_next(r.train, &b, err);
			}
			if (rc == 1) {
				rc = 0;
				break;
			}
			if (rc < 0)
				goto out;
			/* a resumed epoch replays the batches it already
			 * trained on without training: same order after */
			done = s + 1;
			if (epoch == epoch0 && s < skip)
				continue;
			times[0] += ims_now() - w0;
			/* another batch of this epoch follows this one */
			const int ahead = s + 1 < r.steps_per_epoch &&
					  step + 1 < max_steps;
			GOTO_IF_ERR(out, rc, train_step(&r, &b, step, ahead, times,
							sums, err));
			step++;
			in_interval++;
			interval_images += (uint64_t)b.count;
			res->images += (uint64_t)b.count * (uint64_t)r.world;
			res->steps = step;
			if (o->log_every > 0 && step % (uint64_t)o->log_every == 0) {
				log_interval(&r, epoch, step, times, sums, in_interval,
					     ims_now() - interval_t0, interval_images);
				busy += times[1];
				res->wait_s += times[0];
				r.comm_s += times[2];
				times[0] = times[1] = times[2] = 0;
				sums[0] = sums[1] = sums[2] = 0;
				in_interval = 0;
				interval_images = 0;
				interval_t0 = ims_now();
			}
			if (o->checkpoint_every > 0 &&
			    step % (uint64_t)o->checkpoint_every == 0)
				GOTO_IF_ERR(out, rc, save_checkpoint(&r, epoch, s + 1,
								     step, err));
			if (step >= max_steps) {
				stop = 1;
				break;
			}
		}
		log_interval(&r, epoch, step, times, sums, in_interval,
			     ims_now() - interval_t0, interval_images);
		busy += times[1];
		res->wait_s += times[0];
		r.comm_s += times[2];
		GOTO_IF_ERR(out, rc, validate(&r, res, epoch, step, t_start, err));
		res->epochs_done = epoch + 1;
		/* the end of an epoch resumes at the start of the next; a
		 * stop inside one resumes after its last trained step */
		int whole = done >= r.steps_per_epoch;
		GOTO_IF_ERR(out, rc, save_checkpoint(&r, whole ? epoch + 1 : epoch,
						     whole ? 0 : done, step, err));
	}
	if (r.ctx.be->sync) /* the device's queued work counts */
		GOTO_IF_ERR(out, rc, r.ctx.be->sync(&r.ctx, err));
	double t_end = ims_now();
	res->train_s = t_end - t_start;
	res->wall_s = t_end - start;
	res->images_per_s = res->train_s > 0 ? res->images / res->train_s : 0;
	res->busy_s = busy;
	res->loss_scale = nn_loss_scale_value(&r.scaler);
	res->skipped_steps = r.scaler.skipped;
	GOTO_IF_ERR(out, rc, write_summary(&r, res, busy, err));
out:
	if (r.metrics_fd >= 0)
		close(r.metrics_fd);
	aug_loader_close(r.train);
	aug_loader_close(r.val);
	nn_optim_free(r.opt);
	nn_model_free(r.m);
	free(r.segs);
	if (r.stage) {
		r.ctx.be->free(&r.ctx, r.dlogits);
		r.ctx.be->free(&r.ctx, r.synth_dev_x);
		r.ctx.be->free(&r.ctx, r.synth_dev_labels);
		r.ctx.be->stage_free(r.stage);
	} else {
		free(r.dlogits);
	}
	free(r.host_logits);
	free(r.held_labels);
	nn_gpumon_close(r.gpumon);
	dp_nccl_free(r.nccl);
	if (r.hctx_ok)
		nn_ctx_release(&r.hctx);
	free(r.synth_x);
	free(r.synth_labels);
	free(r.synth_padded);
	free(r.synth_indices);
	dp_buckets_free(r.buckets);
	if (r.ctx_ok)
		nn_ctx_release(&r.ctx);
	return rc;
}
