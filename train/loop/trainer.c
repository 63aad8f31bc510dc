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
	o->net.model = "convnet7";
	o->net.device = "cpu";
	o->optim.epochs = 1;
	o->optim.batch_size = 32;
	o->optim.lr = 0.1;
	o->optim.optimizer = NN_OPTIM_SGD;
	o->optim.momentum = 0.9;
	o->optim.weight_decay = 1e-4;
	o->optim.schedule = NN_LR_COSINE;
	o->data.size = 224;
	o->data.augment = "flip";
	o->data.val_crop_frac = 0.875;
	o->net.precision = "fp32";
	o->net.tf32 = -1;
	o->seed = 1;
	o->out.log_every = 10;
	o->comm.bucket_mb = 1024;
	o->comm.collective_timeout = 600;
	o->data.max_bad_records = -1;
	o->data.mean[0] = 123.675f;
	o->data.mean[1] = 116.28f;
	o->data.mean[2] = 103.53f;
	o->data.std[0] = 58.395f;
	o->data.std[1] = 57.12f;
	o->data.std[2] = 57.375f;
}

void loop_reached(run *r, const char *phase)
{
	if (r->hooks.reached)
		r->hooks.reached(r->hooks.reached_ctx, r->dp.rank, phase);
}

/* The ranks agreed to stop after step (o->out.stop) in epoch: its
 * checkpoint is written, summary.json is not, as the run is not done. */
static int stopped(run *r, int epoch, uint64_t step, ims_error *err)
{
	char safe[4 * 4096], where[4 * 4096 + 128];
	if (r->o->out.checkpoint_dir)
		snprintf(where, sizeof(where),
			 "the checkpoint in '%s' is at that step; go on with --resume",
			 ims_escape(r->o->out.checkpoint_dir, safe, sizeof(safe)));
	else
		snprintf(where, sizeof(where),
			 "no --checkpoint-dir, so the steps trained are not kept");
	loop_failed_alike(r);
	return ims_fail(err, IMS_EINTR,
			"interrupted after step %llu of %llu, in epoch %d of %d: %s",
			(unsigned long long)step,
			(unsigned long long)r->log.step_end, epoch + 1,
			r->o->optim.epochs, where);
}

/* The ranks agree on whether to go on once set up (o->out.stop set while
 * they were): a stop then trains nothing and starts no log. */
static int go_on(run *r, ims_error *err)
{
	double asked = r->o->out.stop && *r->o->out.stop;
	FORWARD_IF_ERR(dp_allreduce_sum_f64(r->dp.comm, &asked, 1, err));
	if (asked == 0)
		return 0;
	loop_failed_alike(r);
	return ims_fail(err, IMS_EINTR,
			"interrupted before the first step: nothing was trained");
}

/*
 * Everything before the first step, in the order a failure is best
 * reported in (the device first: a host without one hears so at once).
 * The folders are locked before anything in them is read or written; a
 * resumed run reads its checkpoint before its schedule is set up (the
 * schedule follows the run's first part) and before metrics.jsonl is
 * opened, so a run with nothing left to train writes nothing.
 */
static int set_up(run *r, nn_train_result *res, ims_error *err)
{
	/* What each rank sets up alone (the device, the splits, the
	 * loaders) is agreed on before the next collective: a rank that
	 * failed still joins it, so the ranks end together and a failure
	 * every rank met alike (a path given to all, a batch larger than
	 * each rank's share) is told once, not once per rank with an abort
	 * of the job. */
	int rc = loop_check_opts(r->o, r->dp.world, err);
	if (!rc)
		rc = loop_open_context(r, err);
	/* after the device, before any folder is made */
	if (!rc)
		rc = loop_check_resumable(r->o, err);
	FORWARD_IF_ERR(loop_agree_setup(r, rc, "train", err));
	FORWARD_IF_ERR(loop_agree(r, err));
	rc = loop_open_loaders(r, err);
	if (!rc && r->o->data.synthetic)
		rc = loop_make_synthetic(r, err);
	if (!rc)
		rc = loop_check_overlap(r, err);
	FORWARD_IF_ERR(loop_agree_setup(r, rc, "train", err));
	/* the model and what it needs, each rank's own memory: a rank out
	 * of it still joins the agreement (before: it left, and its peers'
	 * next collective aborted the job, a line from each rank) */
	FORWARD_IF_ERR(loop_agree_setup(r, loop_make_model(r, err), "train", err));
	FORWARD_IF_ERR(loop_share_model(r, err));
	rc = loop_setup_overflow(r, err);
	if (!rc)
		rc = loop_setup_optim(r, err);
	if (!rc)
		rc = loop_setup_buckets(r, err);
	if (!rc)
		rc = loop_setup_device(r, err);
	if (!rc)
		rc = loop_reserve_memory(r, err);
	if (!rc)
		rc = loop_setup_graphs(r, err);
	FORWARD_IF_ERR(loop_agree_setup(r, rc, "train", err));
	/* rank 0's folders, then each rank's checkpoint (each reads its
	 * own --checkpoint-dir): a resumed run every rank refuses alike
	 * (another --seed) is told once too */
	rc = loop_take_locks(r, err);
	if (!rc)
		rc = loop_check_outputs(r, err);
	if (!rc)
		rc = loop_check_earlier_run(r, err);
	if (!rc)
		rc = loop_open_checkpoints(r, res, err);
	FORWARD_IF_ERR(loop_agree_setup(r, rc, "train", err));
	FORWARD_IF_ERR(loop_share_run_id(r, err));
	FORWARD_IF_ERR(loop_agree_resume(r, err));
	FORWARD_IF_ERR(loop_agree_setup(r, loop_check_resumed_logs(r, err),
					"train", err));
	FORWARD_IF_ERR(loop_setup_schedule(r, err));
	if (r->part.complete)
		return loop_report_resumed(r, err);
	FORWARD_IF_ERR(go_on(r, err));
	FORWARD_IF_ERR(loop_open_metrics(r, err));
	FORWARD_IF_ERR(loop_start_line(r, err));
	if (r->part.resumed)
		FORWARD_IF_ERR(loop_report_resumed(r, err));
	/* doubts about what was accepted, once the run will start */
	loop_warn_val_is_train(r);
	loop_warn_overlap(r);
	loop_report_start(r);
	return 0;
}

/* The epochs from r->part.at on, each validated and checkpointed, then the
 * totals and summary.json; a stop (o->out.stop) ends them early. */
static int train(run *r, nn_train_result *res, ims_error *err)
{
	const nn_train_opts *o = r->o;
	r->log.t_part = ims_now();
	/* the training clock goes on from the earlier parts' */
	r->log.t_start = r->log.t_part - res->train_s;
	const double startup = r->log.t_part - r->log.t_run;
	uint64_t step = r->part.at.step;
	uint64_t max_steps = o->optim.max_steps > 0 ? (uint64_t)o->optim.max_steps : UINT64_MAX;
	uint64_t all = r->sched.total_steps; /* resume-aware: loop_setup_schedule */
	r->log.step0 = step;
	r->log.step_end = all < max_steps ? all : max_steps;
	int stop = step >= max_steps;
	const uint64_t global = (uint64_t)o->optim.batch_size * (uint64_t)r->dp.world;
	for (int epoch = r->part.at.epoch; epoch < o->optim.epochs && !stop; epoch++) {
		uint64_t done;
		const uint64_t from = epoch == r->part.at.epoch ? r->part.at.position : 0;
		dp_set_phase(r->dp.comm, "training");
		FORWARD_IF_ERR(loop_train_epoch(r, res, epoch, from, &step, max_steps,
						&stop, &done, err));
		/* the end of an epoch resumes at the start of the next; a
		 * stop inside one resumes after its last trained position */
		const int whole = done >= (from ? aug_loader_batches_at(r->data.train, from)
						: r->data.steps_per_epoch);
		FORWARD_IF_ERR(loop_bad_epoch(r, epoch, step, whole, err));
		/* a stop at --max-steps' step (or the run's last) ends the
		 * run as it would have ended anyway: done, not interrupted */
		const int interrupted = r->part.interrupted && step < max_steps;
		/* the run's last validation also writes its per-class files;
		 * an interrupted epoch is validated when it is whole (the
		 * checkpoint then says it is done), else when resumed */
		dp_set_phase(r->dp.comm, "validation");
		loop_reached(r, "validation");
		if (whole || !interrupted)
			FORWARD_IF_ERR(loop_validate(r, res, epoch, step, r->log.t_start,
						     (stop && !interrupted) ||
							     epoch + 1 == o->optim.epochs,
						     err));
		res->epochs_done = epoch + 1;
		dp_set_phase(r->dp.comm, "the checkpoint");
		FORWARD_IF_ERR(loop_save_checkpoint(r, res, whole ? epoch + 1 : epoch,
						    whole ? 0 : from + done * global,
						    step, err));
		if (interrupted && (!whole || epoch + 1 < o->optim.epochs))
			return stopped(r, epoch, step, err);
	}
	dp_set_phase(r->dp.comm, "the run's end");
	loop_reached(r, "the run's end");
	FORWARD_IF_ERR(nn_ctx_sync(&r->ctx, err)); /* the device's queued work counts */
	double t_end = ims_now();
	res->train_s = t_end - r->log.t_start;
	res->startup_s = r->part.hist.startup_s + startup;
	res->wall_s = r->part.hist.wall_s + (t_end - r->log.t_run);
	res->images_per_s = res->train_s > 0 ? res->images / res->train_s : 0;
	res->busy_s = r->log.busy_s;
	res->profile = r->log.prof;
	res->loss_scale = nn_loss_scale_value(&r->fp16.scaler);
	res->skipped_steps = r->fp16.scaler.skipped;
	res->bad_records = r->bad.total;
	return loop_write_summary(r, res, err);
}

/*
 * A resumed run with nothing left to train whose --log-dir lacks
 * summary.json: the job was lost at its end, after its last checkpoint
 * (which records the whole run), so the summary is written now, this
 * part's times added (rank 0's folder decides, for every rank).
 */
static int complete_summary(run *r, nn_train_result *res, ims_error *err)
{
	int missing = 0;
	if (r->dp.rank == 0)
		FORWARD_IF_ERR(loop_summary_missing(r, &missing, err));
	FORWARD_IF_ERR(dp_broadcast(r->dp.comm, &missing, sizeof(missing), 0, err));
	if (!missing)
		return 0;
	dp_set_phase(r->dp.comm, "the run's end");
	const double now = ims_now();
	res->startup_s = r->part.hist.startup_s + (now - r->log.t_run);
	res->wall_s = r->part.hist.wall_s + (now - r->log.t_run);
	res->images_per_s = res->train_s > 0 ? res->images / res->train_s : 0;
	res->loss_scale = nn_loss_scale_value(&r->fp16.scaler);
	res->skipped_steps = r->fp16.scaler.skipped;
	res->bad_records = r->bad.total;
	FORWARD_IF_ERR(loop_write_summary(r, res, err));
	res->summary_written = 1;
	return 0;
}

/* Frees what set_up made: the staging slots (their queued copies done)
 * before the loaders' (pinned) memory those copies read, and that memory
 * before the context it came from. */
static void tear_down(run *r)
{
	loop_close_metrics(r);
	loop_history_release(r);
	loop_graphs_release(r);
	loop_free_stage(r);
	loop_free_data(r);
	nn_optim_free(r->opt);
	if (r->ctx_ok)
		nn_ctx_free(&r->ctx, r->fp16.saved_buffers);
	free(r->fp16.saved_counters);
	nn_model_free(r->m);
	free(r->segs);
	loop_free_device(r);
	dp_nccl_free(r->dp.nccl);
	dp_buckets_free(r->dp.buckets);
	if (r->ctx_ok)
		nn_ctx_release(&r->ctx);
	/* last: nothing of this run writes in its folders after this */
	loop_release_locks(r);
}

int nn_train_run(const nn_train_opts *o, dp_comm *comm, nn_train_result *res,
		 ims_error *err)
{
	memset(res, 0, sizeof(*res));
	res->best_epoch = -1;
	run r;
	memset(&r, 0, sizeof(r));
	r.log.t_run = ims_now();
	r.o = o;
	r.lock_fd[0] = r.lock_fd[1] = -1;
	if (o->hooks)
		r.hooks = *o->hooks;
	if (o->events)
		r.log.ev = *o->events;
	r.dp.comm = comm;
	r.dp.rank = dp_rank(comm);
	r.dp.world = dp_world(comm);
	r.log.metrics_fd = -1;
	r.st.ahead_slot = -1;
	dp_set_phase(comm, "the set-up");
	int rc = set_up(&r, res, err);
	if (!rc && r.part.complete) {
		res->nothing_to_do = r.part.complete;
		rc = complete_summary(&r, res, err);
	}
	else if (!rc)
		rc = train(&r, res, err);
	if (rc < 0) {
		res->failed_ranks = r.failed.ranks;
		res->failed_here = r.failed.here;
		res->failed_alike = r.failed.alike;
	}
	tear_down(&r);
	dp_set_phase(comm, NULL);
	return rc;
}
