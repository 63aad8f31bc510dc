/*
 * step.c - one training step and one epoch of them.
 *
 * A step: next batch (onto the device), forward, loss, backward (its
 * gradients sent to the other ranks in buckets as they become final),
 * allreduce, update. Its time is split into data wait (blocked on the
 * loader or on the batch's copy), compute (forward, backward, optimiser)
 * and communication (allreduces); a rank's busy time is its compute time,
 * and the summary compares ranks by it.
 *
 * Mixed precision (--precision bf16|fp16, cuda only): the context's
 * precision makes convolutions and linear layers compute on 16-bit copies
 * (train/cuda/); parameters, gradients, optimiser state and activations
 * stay fp32. fp16 adds dynamic loss scaling (train/loss_scale.h): the
 * loss gradient is multiplied by S, and after the gradient allreduce one
 * device pass unscales the gradients and looks for Inf/NaN; the flag is
 * summed over ranks with the step's statistics, so every rank skips the
 * same steps. A forward pass that overflows (a 16-bit result beyond
 * 65504) leaves a loss that is not finite: with fp16 that step is skipped
 * and S halved too (nn_loss_scale_check_loss), and the batch-norm
 * statistics it changed are put back, as its Inf or NaN would stay in
 * them; bf16 and fp32 stop there.
 *
 * On a device in fp32 and bf16 no step waits for the device to read its
 * loss: the loss and top-1 hits are summed in device memory
 * (nn_xent_tally) and read when an interval is reported (every
 * --log-every steps and at an epoch's end), or looked at before a
 * checkpoint is written; a step whose loss was not finite stops the run
 * there, named by its step (loop_read_tally). fp16, whose every step
 * decides on its loss and gradients, reads them each step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/loop/loop_internal.h"

/* What a step reads and what it learnt. */
typedef struct step_io {
	const float *x;             /* the batch where the kernels read it */
	const int32_t *labels;      /* ... and its labels */
	const int32_t *host_labels; /* the labels on the host */
	int slot;                   /* staging slot to release, or -1 */
	const float *logits;
	double stats[7];            /* loss sum, top-1 hits, samples,
				       overflow flag, records that could not
				       be loaded, ranks asked to stop, ranks
				       without a batch: summed over ranks */
	int forward_overflow;       /* fp16: the loss was not finite */
} step_io;

/* fp16: room for the buffers and counters a step's forward pass may
 * spoil, made before the first step (no allocation inside one). */
int loop_setup_overflow(run *r, ims_error *err)
{
	if (!r->fp16.scaler.enabled)
		return 0;
	size_t nb, nc;
	(void)nn_model_buffers(r->m, &nb);
	(void)nn_model_counters(r->m, &nc);
	if (nb) {
		r->fp16.saved_buffers = nn_ctx_alloc(&r->ctx, nb * sizeof(float));
		RETURN_IF(!r->fp16.saved_buffers, err, IMS_ENOMEM,
			  "cannot keep the model's batch-norm statistics for "
			  "fp16's overflow check: out of %s memory",
			  nn_ctx_device(&r->ctx));
	}
	if (nc) {
		r->fp16.saved_counters = malloc(nc * sizeof(int64_t));
		RETURN_IF(!r->fp16.saved_counters, err, IMS_ENOMEM,
			  "cannot keep the model's counters for fp16's overflow "
			  "check: out of memory");
	}
	return 0;
}

/* fp16: the buffers and counters kept as they are before the forward
 * pass (back 0), or put back (back 1); a copy within the device, queued. */
static int step_keep_buffers(run *r, int back, ims_error *err)
{
	size_t nb, nc;
	float *b = nn_model_buffers(r->m, &nb);
	int64_t *c = nn_model_counters(r->m, &nc);
	if (nb)
		FORWARD_IF_ERR(nn_ctx_copy(&r->ctx, back ? b : r->fp16.saved_buffers,
					   back ? r->fp16.saved_buffers : b,
					   nb * sizeof(float), err));
	if (nc)
		memcpy(back ? c : r->fp16.saved_counters, back ? r->fp16.saved_counters : c,
		       nc * sizeof(int64_t));
	return 0;
}

/*
 * The loss of the global batch and its gradient. Each rank's share is
 * scaled by 1 / (batch x ranks), so the gradient allreduce's sum is
 * already the mean and no pass over the gradients divides it (every
 * rank's batch has the same size; NCCL averages on the device). fp16
 * multiplies it by the loss scale S (1 otherwise, bit for bit). The top-1
 * hits are scored on the host (from logits read back on a device).
 */
static int step_loss(run *r, const aug_batch *b, uint64_t step, step_io *io,
		     ims_error *err)
{
	const float ranks = r->dp.nccl ? 1.0f : (float)r->dp.world;
	const float scale = nn_loss_scale_value(&r->fp16.scaler);
	io->stats[2] = b->count;
	if (r->st.defer_loss) {
		/* the labels are checked here, on the host where they are,
		 * as nn_softmax_xent would; the loss and top-1 go to the
		 * device's tally, read when the interval is reported */
		for (int i = 0; i < b->count; i++)
			RETURN_IF(io->host_labels[i] < 0 ||
					  io->host_labels[i] >= r->data.classes,
				  err, IMS_EINVAL,
				  "cannot compute the cross-entropy loss: sample %d has label %d, outside [0, %d)",
				  i, (int)io->host_labels[i], r->data.classes);
		return nn_xent_tally(&r->ctx, b->count, r->data.classes,
				     io->logits, io->labels,
				     r->o->optim.label_smoothing,
				     scale / ((float)b->count * ranks),
				     r->dlogits, (int64_t)step + 1, r->st.tally,
				     err);
	}
	double loss = 0;
	FORWARD_IF_ERR(nn_softmax_xent(&r->ctx, b->count, r->data.classes,
				       io->logits, io->labels,
				       r->o->optim.label_smoothing,
				       scale / ((float)b->count * ranks), &loss,
				       r->dlogits, err));
	if (r->st.stage)
		FORWARD_IF_ERR(loop_read_logits(r, &io->logits, b->count, err));
	io->stats[0] = loss;
	io->stats[1] = nn_topk_correct(b->count, r->data.classes, io->logits,
				       io->host_labels, 1, NULL);
	return 0;
}

/*
 * The gradients summed over ranks (the rest of the buckets backward
 * started), fp16's overflow check on the identical sums, and the step's
 * statistics summed with the overflow flag, so every rank decides alike.
 * A NaN or infinite loss is fp16's forward overflow (the step skipped,
 * the statistics it changed put back) or ends the run here.
 */
static int step_allreduce(run *r, uint64_t step, step_io *io,
			  loop_interval *iv, ims_error *err)
{
	size_t np;
	float *g = nn_model_grads(r->m, &np);
	double c0 = ims_now();
	/* with the gradients, the running statistics each rank's batch
	 * moved are averaged: every rank holds one model after each step,
	 * so the checkpoint of any step (a signal's, --max-steps') is what
	 * the run goes on from, and --checkpoint-every changes nothing it
	 * computes */
	if (r->dp.nccl) {
		/* ncclAvg: the mean, on the device; the buckets backward
		 * did not start are queued here, or were in its recording
		 * (graphs.c), then the statistics, and the host waits for
		 * them all */
		if (!r->graphs.flushed)
			FORWARD_IF_ERR(dp_nccl_flush(r->dp.nccl, err));
		r->graphs.flushed = 0;
		FORWARD_IF_ERR(loop_average_step_statistics(r, err));
		FORWARD_IF_ERR(dp_nccl_wait(r->dp.nccl, err));
		(void)dp_nccl_take_seconds(r->dp.nccl);
	} else if (r->dp.world > 1) {
		FORWARD_IF_ERR(dp_buckets_finish(r->dp.buckets, err));
		(void)dp_buckets_take_seconds(r->dp.buckets);
		FORWARD_IF_ERR(loop_average_step_statistics(r, err));
	}
	double c1 = ims_now();
	iv->comm_s += c1 - c0;
	int found_inf = 0;
	if (r->fp16.scaler.enabled) {
		if (step + 1 == r->hooks.inf_grad_step) {
			const float inf = INFINITY;
			FORWARD_IF_ERR(nn_ctx_to_device(&r->ctx,
							g + nn_model_last_grad(r->m), &inf,
							sizeof(inf), err));
		}
		FORWARD_IF_ERR(nn_unscale_check(&r->ctx, g, np,
						1.0f / nn_loss_scale_value(&r->fp16.scaler),
						&found_inf, err));
	}
	double c2 = ims_now();
	iv->compute_s += c2 - c1;
	io->stats[3] = found_inf;
	/* a signal reaches the ranks at different moments: summed here,
	 * the first step after which any rank saw it is every rank's last */
	io->stats[5] = r->o->out.stop && *r->o->out.stop;
	FORWARD_IF_ERR(dp_allreduce_sum_f64(r->dp.comm, io->stats, 7, err));
	iv->comm_s += ims_now() - c2;
	r->part.interrupted = io->stats[5] > 0;
	if (io->stats[6] > 0) {
		/* a rank could not load its batch (step_without_batch): every
		 * rank ends here, none updated, and each that failed names
		 * itself */
		r->failed.ranks = (int)io->stats[6];
		r->failed.here = 0;
		r->failed.alike = 0;
		return ims_fail(err, IMS_EIO,
				"%d of %d ranks could not load their batch of step "
				"%llu (named on stderr): stopping",
				(int)io->stats[6], r->dp.world,
				(unsigned long long)step + 1);
	}
	const int verdict = nn_loss_scale_check_loss(&r->fp16.scaler, io->stats[0]);
	if (verdict == NN_LOSS_STOP) {
		/* the loss summed over ranks: every rank stops here alike */
		loop_failed_alike(r);
		return ims_fail(err, IMS_EINVAL,
				"loss is %s at step %llu%s: stopping (lower --lr or "
				"check the data; the last checkpoint written before "
				"this step is kept)",
				isnan(io->stats[0]) ? "NaN" : "infinite",
				(unsigned long long)step + 1,
				r->fp16.scaler.enabled ? " with the fp16 loss scale at 1" : "");
	}
	if (verdict == NN_LOSS_OVERFLOW) {
		io->stats[3] = 1;
		io->forward_overflow = 1;
		FORWARD_IF_ERR(step_keep_buffers(r, 1, err));
	} else if (io->stats[3] > 0 && nn_loss_scale_at_floor(&r->fp16.scaler)) {
		/* backward overflowed at S = 1: halving can go no lower, and
		 * every later step would be skipped alike, a run that trains
		 * nothing and ends in success. The flag is summed over ranks:
		 * every rank stops here alike. */
		loop_failed_alike(r);
		return ims_fail(err, IMS_EINVAL,
				"gradients overflowed at step %llu with the fp16 "
				"loss scale at 1: stopping (lower --lr, or train in "
				"bf16, whose range is fp32's; the last checkpoint "
				"written before this step is kept)",
				(unsigned long long)step + 1);
	}
	return loop_bad_step(r, (uint64_t)io->stats[4], step, err);
}

/* The optimiser's update at the step's rate, unless fp16's gradients
 * overflowed (the step is then skipped and the scale halved). */
static int step_update(run *r, uint64_t step, const step_io *io,
		       loop_interval *iv, ims_error *err)
{
	double t0 = ims_now();
	const float scale = nn_loss_scale_value(&r->fp16.scaler);
	float *p = nn_model_params(r->m, NULL);
	float *g = nn_model_grads(r->m, NULL);
	if (nn_loss_scale_update(&r->fp16.scaler, io->stats[3] > 0)) {
		FORWARD_IF_ERR(nn_optim_step(r->opt, p, g, r->segs, r->nsegs,
					     nn_lr_at_position(&r->sched.lr, r->sched.pos), err));
	} else if (r->log.ev.step_skipped) {
		r->log.ev.step_skipped(r->log.ev.ctx, step + 1, scale,
				       nn_loss_scale_value(&r->fp16.scaler),
				       io->forward_overflow);
	}
	if (io->slot >= 0)
		FORWARD_IF_ERR(nn_stage_done(&r->ctx, r->st.stage, io->slot, err));
	iv->compute_s += ims_now() - t0;
	return 0;
}

/*
 * One training step on batch b. ahead: the loop trains another batch of
 * this epoch after this one, which a device run takes from the loader
 * during this step (loop_take_ahead).
 */
/* --profile: the clock once the device has done what is queued (0 when
 * this step is not profiled). */
static int prof_clock(run *r, int on, double *t, ims_error *err)
{
	*t = 0;
	return on ? nn_ctx_sync_now(&r->ctx, t, err) : 0;
}

static int train_step(run *r, const aug_batch *b, uint64_t step, int ahead,
		      loop_interval *iv, ims_error *err)
{
	const nn_train_opts *o = r->o;
	/* --profile K: steps 3 to K + 2 of this part, after the first two
	 * have chosen algorithms and warmed caches */
	const uint64_t k = step - r->log.step0;
	const int prof = o->out.profile > 0 && k >= 2 &&
			 k < 2 + (uint64_t)o->out.profile;
	nn_train_profile *pf = &r->log.prof;
	double p0, p1, p2, p3, p4;
	step_io io = {.x = b->data, .labels = b->labels,
		      .host_labels = b->labels, .slot = -1};
	/* what the batch holds, read before a batch taken ahead lets the
	 * loader reuse its memory */
	/* samples standing in for a bad record: each bad record once (a
	 * stand-in that failed too is another record's own place) */
	io.stats[4] = b->bad_listed;
	loop_bad_batch(r, b);
	if (r->hooks.trained)
		r->hooks.trained(r->hooks.trained_ctx, r->dp.rank, (int)b->epoch, step,
				 b->indices, b->count);
	/* next batch, on the device: a batch taken ahead was poisoned
	 * before its copy was queued */
	if (r->st.ahead_slot < 0)
		FORWARD_IF_ERR(loop_poison(r, b, step, err));
	FORWARD_IF_ERR(loop_stage_inputs(r, b, &io.x, &io.labels, &io.slot,
					 &iv->wait_s, err));
	FORWARD_IF_ERR(prof_clock(r, prof, &p0, err));
	nn_model_set_profile(r->m, prof ? &pf->layers : NULL);
	double t0 = ims_now();
	if (r->fp16.scaler.enabled)
		FORWARD_IF_ERR(step_keep_buffers(r, 0, err));
	/* forward (queued on a device; the loss below waits for it),
	 * replayed from a recording after a part's first two steps */
	const int replay = k >= 2;
	FORWARD_IF_ERR(loop_graph_forward(r, replay, io.x, b->count,
					  ims_hash64(o->seed, step), &io.logits,
					  err));
	r->dp.averaged = 0; /* each rank's batch moved its statistics */
	if (ahead && r->st.stage && !o->data.synthetic) {
		double w = 0;
		FORWARD_IF_ERR(loop_take_ahead(r, b, step + 1, &w, err));
		iv->wait_s += w;
		t0 += w; /* not compute */
		p0 += w;
		io.host_labels = r->st.held_labels;
	}
	/* loss */
	FORWARD_IF_ERR(prof_clock(r, prof, &p1, err));
	FORWARD_IF_ERR(step_loss(r, b, step, &io, err));
	FORWARD_IF_ERR(prof_clock(r, prof, &p2, err));
	/* backward; time inside MPI during it is communication */
	FORWARD_IF_ERR(loop_graph_backward(r, replay, io.x, r->dlogits, b->count,
					   o->net.freeze_backbone, err));
	nn_model_set_profile(r->m, NULL);
	const double t1 = ims_now();
	const double in_backward = dp_buckets_take_seconds(r->dp.buckets);
	iv->compute_s += t1 - t0 - in_backward;
	iv->comm_s += in_backward;
	/* allreduce */
	FORWARD_IF_ERR(prof_clock(r, prof, &p3, err));
	FORWARD_IF_ERR(step_allreduce(r, step, &io, iv, err));
	FORWARD_IF_ERR(prof_clock(r, prof, &p4, err));
	/* update */
	FORWARD_IF_ERR(step_update(r, step, &io, iv, err));
	if (prof) {
		double p5;
		FORWARD_IF_ERR(prof_clock(r, prof, &p5, err));
		pf->steps++;
		pf->loss_s += p2 - p1;
		pf->allreduce_s += p4 - p3;
		pf->update_s += p5 - p4;
		pf->step_s += p5 - p0;
	}
	/* a skipped overflowed step's loss is not finite: the interval's
	 * loss and accuracy are those of the steps whose loss was, its
	 * images/s every step's */
	iv->samples += io.stats[2];
	if (!io.forward_overflow) {
		iv->loss_sum += io.stats[0];
		iv->correct += io.stats[1];
		iv->scored += io.stats[2];
	}
	return 0;
}

/*
 * This rank could not load step's batch (rc; its error says why). Alone
 * it stops; among ranks it still joins the step's collectives, its
 * gradient buckets as they are (no update follows) and the statistics
 * flagging its failure, so every rank learns of it there and ends after
 * this step: none is left waiting in a collective, the job ends without
 * an abort, and each rank that failed names itself with its own reason.
 */
static int step_without_batch(run *r, uint64_t step, loop_interval *iv,
			      int rc)
{
	if (r->dp.world < 2)
		return rc;
	step_io io = {.slot = -1};
	io.stats[6] = 1;
	ims_error agreed;
	if (step_allreduce(r, step, &io, iv, &agreed) < 0 && r->failed.ranks > 0)
		r->failed.here = 1;
	return rc;
}

/* The batch of step s of this epoch: the --synthetic one, the one taken
 * ahead during the previous step, or the loader's next. 1 when the epoch
 * has no more. */
static int next_batch(run *r, int epoch, uint64_t s, aug_batch *b,
		      ims_error *err)
{
	loop_data *d = &r->data;
	if (r->o->data.synthetic) {
		*b = (aug_batch){.data = d->synth_x,
				 .labels = d->synth_labels,
				 .indices = d->synth_indices,
				 .padded = d->synth_padded,
				 .count = r->o->optim.batch_size,
				 .epoch = (uint64_t)epoch,
				 .step = s};
		return 0;
	}
	if (r->st.ahead_taken) {
		*b = r->st.ahead;
		r->st.ahead_taken = 0;
		if (r->st.ahead_rc < 0)
			*err = r->st.ahead_err;
		return r->st.ahead_rc;
	}
	return loop_loader_next(r, d->train, b, err);
}

/* Reports the interval and adds its times to the run's. */
static int close_interval(run *r, nn_train_result *res, int epoch,
			  uint64_t step, loop_interval *iv, ims_error *err)
{
	FORWARD_IF_ERR(loop_read_tally(r, iv, 1, err));
	int rc = loop_report_interval(r, epoch, step, iv, err);
	r->log.busy_s += iv->compute_s;
	res->wait_s += iv->wait_s;
	r->log.comm_s += iv->comm_s;
	memset(iv, 0, sizeof(*iv));
	iv->t0 = ims_now();
	return rc;
}

/*
 * The steps of one epoch, from *step on, starting at global position
 * `position` of the epoch's order (0, or where a resumed run's checkpoint
 * stopped: the loader's shares start there, at this run's ranks and batch
 * size). *stop is set when max_steps is reached or the ranks agreed to
 * stop (r->part.interrupted), and *done to the steps of
 * this epoch trained. Reports the epoch's last interval; checkpoints every
 * --checkpoint-every steps but the one it ends at (the caller's).
 */
int loop_train_epoch(run *r, nn_train_result *res, int epoch,
		     uint64_t position, uint64_t *step, uint64_t max_steps,
		     int *stop, uint64_t *done, ims_error *err)
{
	const nn_train_opts *o = r->o;
	const uint64_t steps = position ? aug_loader_batches_at(r->data.train, position)
					: r->data.steps_per_epoch;
	const uint64_t global = (uint64_t)o->optim.batch_size * (uint64_t)r->dp.world;
	if (!o->data.synthetic)
		FORWARD_IF_ERR(loop_loader_start(r, r->data.train, (uint64_t)epoch,
						 position, err));
	/* the schedule counts whole epochs of this run's steps; a resumed
	 * epoch's first step sits where its position falls among them */
	const double sched0 = (double)epoch * (double)r->data.steps_per_epoch +
			      (double)position / (double)global;
	loop_bad_epoch_start(r, epoch, position);
	loop_interval iv;
	memset(&iv, 0, sizeof(iv));
	iv.t0 = ims_now();
	*done = 0;
	for (uint64_t s = 0; s < steps; s++) {
		aug_batch b;
		double w0 = ims_now();
		int rc = next_batch(r, epoch, s, &b, err);
		if (rc == 1)
			break;
		if (rc < 0)
			return step_without_batch(r, *step, &iv, rc);
		*done = s + 1;
		iv.wait_s += ims_now() - w0;
		/* another batch of this epoch follows this one */
		const int ahead = s + 1 < steps && *step + 1 < max_steps;
		r->sched.pos = sched0 + (double)s;
		FORWARD_IF_ERR(train_step(r, &b, *step, ahead, &iv, err));
		++*step;
		iv.steps++;
		iv.images += (uint64_t)b.count;
		res->images += (uint64_t)b.count * (uint64_t)r->dp.world;
		res->steps = *step;
		if (o->out.log_every > 0 && *step % (uint64_t)o->out.log_every == 0)
			FORWARD_IF_ERR(close_interval(r, res, epoch, *step, &iv, err));
		/* the epoch's last step, --max-steps' and a stop's are
		 * checkpointed by the caller, after validation: once */
		const int ends = s + 1 == steps || *step >= max_steps ||
				 r->part.interrupted;
		if (!ends && o->out.checkpoint_every > 0 &&
		    *step % (uint64_t)o->out.checkpoint_every == 0) {
			/* no checkpoint from weights a bad step spoilt */
			FORWARD_IF_ERR(loop_read_tally(r, &iv, 0, err));
			dp_set_phase(r->dp.comm, "the checkpoint");
			FORWARD_IF_ERR(loop_save_checkpoint(r, res, epoch,
							    position + (s + 1) * global,
							    *step, err));
			dp_set_phase(r->dp.comm, "training");
		}
		if (*step >= max_steps || r->part.interrupted) {
			*stop = 1;
			break;
		}
	}
	return close_interval(r, res, epoch, *step, &iv, err);
}
