/*
 * trainer.c - nn_train_run: set a run up, train its epochs (each followed
 * by validation and a checkpoint), write the summary, tear down. The
 * step itself is step.c's; loop_internal.h lists who does what.
 */
#include <stdlib.h>
#include <string.h>

#include "train/loop/loop_internal.h"

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
	o->val_crop_frac = 0.875;
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

/* Where a resumed (or fresh) run starts. */
typedef struct start_at {
	int epoch;
	uint64_t epoch_step; /* steps of that epoch already trained */
	uint64_t step;       /* steps in all */
} start_at;

/* Everything before the first step, in the order a failure is best
 * reported in (the device first: a host without one hears so at once). */
static int set_up(run *r, start_at *at, ims_error *err)
{
	FORWARD_IF_ERR(loop_open_context(r, err));
	FORWARD_IF_ERR(loop_open_loaders(r, err));
	if (r->o->synthetic)
		FORWARD_IF_ERR(loop_make_synthetic(r, err));
	FORWARD_IF_ERR(loop_make_model(r, err));
	FORWARD_IF_ERR(loop_setup_overflow(r, err));
	FORWARD_IF_ERR(loop_setup_optim(r, err));
	FORWARD_IF_ERR(loop_setup_buckets(r, err));
	FORWARD_IF_ERR(loop_setup_device(r, err));
	FORWARD_IF_ERR(loop_open_metrics(r, err));
	FORWARD_IF_ERR(loop_open_checkpoints(r, &at->epoch, &at->epoch_step,
					     &at->step, err));
	loop_report_start(r);
	return 0;
}

/* The epochs from `at` on, each validated and checkpointed, then the
 * totals and summary.json. start: nn_train_run's clock at its start. */
static int train(run *r, nn_train_result *res, double start,
		 const start_at *at, ims_error *err)
{
	const nn_train_opts *o = r->o;
	r->log.t_start = ims_now();
	res->startup_s = r->log.t_start - start;
	uint64_t step = at->step;
	uint64_t max_steps = o->max_steps > 0 ? (uint64_t)o->max_steps : UINT64_MAX;
	uint64_t all = r->data.steps_per_epoch * (uint64_t)o->epochs;
	r->log.step0 = step;
	r->log.step_end = all < max_steps ? all : max_steps;
	int stop = step >= max_steps;
	for (int epoch = at->epoch; epoch < o->epochs && !stop; epoch++) {
		uint64_t done;
		FORWARD_IF_ERR(loop_train_epoch(r, res, epoch,
						epoch == at->epoch ? at->epoch_step : 0,
						&step, max_steps, &stop, &done, err));
		/* the run's last validation also writes its per-class files */
		FORWARD_IF_ERR(loop_validate(r, res, epoch, step, r->log.t_start,
					     stop || epoch + 1 == o->epochs, err));
		res->epochs_done = epoch + 1;
		/* the end of an epoch resumes at the start of the next; a
		 * stop inside one resumes after its last trained step */
		int whole = done >= r->data.steps_per_epoch;
		FORWARD_IF_ERR(loop_save_checkpoint(r, whole ? epoch + 1 : epoch,
						    whole ? 0 : done, step, err));
	}
	FORWARD_IF_ERR(nn_ctx_sync(&r->ctx, err)); /* the device's queued work counts */
	double t_end = ims_now();
	res->train_s = t_end - r->log.t_start;
	res->wall_s = t_end - start;
	res->images_per_s = res->train_s > 0 ? res->images / res->train_s : 0;
	res->busy_s = r->log.busy_s;
	res->loss_scale = nn_loss_scale_value(&r->scaler);
	res->skipped_steps = r->scaler.skipped;
	return loop_write_summary(r, res, err);
}

/* Frees what set_up made: the staging slots (their queued copies done)
 * before the loaders' (pinned) memory those copies read, and that memory
 * before the context it came from. */
static void tear_down(run *r)
{
	loop_close_metrics(r);
	loop_free_stage(r);
	loop_free_data(r);
	nn_optim_free(r->opt);
	if (r->ctx_ok)
		nn_ctx_free(&r->ctx, r->saved_buffers);
	free(r->saved_counters);
	nn_model_free(r->m);
	free(r->segs);
	loop_free_device(r);
	dp_nccl_free(r->dp.nccl);
	dp_buckets_free(r->dp.buckets);
	if (r->ctx_ok)
		nn_ctx_release(&r->ctx);
}

int nn_train_run(const nn_train_opts *o, dp_comm *comm, nn_train_result *res,
		 ims_error *err)
{
	FORWARD_IF_ERR(loop_check_opts(o, dp_world(comm), err));
	double start = ims_now();
	run r;
	memset(&r, 0, sizeof(r));
	r.o = o;
	if (o->hooks)
		r.hooks = *o->hooks;
	if (o->events)
		r.log.ev = *o->events;
	r.dp.comm = comm;
	r.dp.rank = dp_rank(comm);
	r.dp.world = dp_world(comm);
	r.log.metrics_fd = -1;
	r.st.ahead_slot = -1;
	memset(res, 0, sizeof(*res));
	res->best_epoch = -1;
	start_at at;
	memset(&at, 0, sizeof(at));
	int rc = set_up(&r, &at, err);
	if (!rc)
		rc = train(&r, res, start, &at, err);
	tear_down(&r);
	return rc;
}
