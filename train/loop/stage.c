/*
 * stage.c - batches on a device (--device cuda, or the CPU twin of
 * nn_ctx_init_cpu_staged). The model, its gradients and the optimiser's
 * state live in device memory; each batch is copied from the loader's
 * pinned ring into one of two device slots on a copy stream, and the next
 * batch is taken from the loader and its copy queued while the current
 * step still computes, so the copy overlaps compute instead of following
 * it. Data wait counts the host blocked on the loader and on that copy.
 * In fp32 and bf16 the steps' loss and top-1 are summed on the device and
 * read once per reported interval (loop_read_tally); fp16, which decides
 * each step on them, reads the loss with the softmax and the logits for
 * the accuracy every step. Validation scores logits read back on a host
 * context.
 *
 * On the CPU backend none of this exists: kernels read the loader's batch
 * in place and every function here returns at once.
 */
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "train/loop/loop_internal.h"

static void *host_alloc(void *ud, size_t bytes)
{
	return nn_ctx_host_alloc(ud, bytes);
}

static void host_free(void *ud, void *p)
{
	nn_ctx_host_free(ud, p);
}

/* The loader's ring in the backend's host memory for batches (pinned on
 * a device, so copies run on the copy engine); its default page-aligned
 * memory on the CPU backend, whose kernels need nothing more. */
void loop_host_memory(run *r, aug_loader_opts *lo)
{
	const char *what = nn_ctx_host_memory(&r->ctx);
	if (!what)
		return;
	lo->host.alloc = host_alloc;
	lo->host.free = host_free;
	lo->host.ud = &r->ctx;
	lo->host.name = what;
}

/*
 * A device run's buffers: the staging slots, logits read back, a host
 * context for validation's per-sample loss, the GPU monitor, and
 * --synthetic's batch copied once; then the loss gradient (device memory
 * on every backend).
 */
int loop_setup_device(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	const size_t n = (size_t)o->optim.batch_size;
	const size_t x_bytes = n * 3 * (size_t)o->data.size * o->data.size * sizeof(float);
	loop_stage *st = &r->st;
	if (nn_ctx_has_staging(&r->ctx)) {
		FORWARD_IF_ERR(nn_stage_create(&r->ctx, x_bytes, n * sizeof(int32_t),
					       &st->stage, err));
		st->host_logits = malloc(n * (size_t)r->data.classes * sizeof(float));
		st->held_labels = malloc(n * sizeof(int32_t));
		RETURN_IF(!st->host_logits || !st->held_labels, err, IMS_ENOMEM,
			  "cannot train: out of memory");
		FORWARD_IF_ERR(nn_ctx_init_cpu(&st->hctx, 1, err));
		st->hctx_ok = 1;
		/* fp16 decides each step on its loss and gradients, so it
		 * reads them each step */
		st->defer_loss = !r->fp16.scaler.enabled;
		if (st->defer_loss) {
			static const nn_tally zero;
			st->tally = nn_ctx_alloc(&r->ctx, sizeof(nn_tally));
			RETURN_IF(!st->tally, err, IMS_ENOMEM,
				  "cannot train: out of %s memory",
				  nn_ctx_device(&r->ctx));
			FORWARD_IF_ERR(nn_ctx_to_device(&r->ctx, st->tally, &zero,
							sizeof(zero), err));
		}
		char pci[64] = "";
		FORWARD_IF_ERR(nn_ctx_pci_bus_id(&r->ctx, pci, (int)sizeof(pci), err));
		nn_ctx_describe(&r->ctx, r->log.stack, sizeof(r->log.stack));
		const char *why = NULL;
		r->log.gpumon = nn_gpumon_open(NULL, pci, r->log.device, &why);
		if (!r->log.gpumon)
			loop_rank_note(r, "rank %d: no gpu lines in metrics.jsonl: %s",
				       r->dp.rank, why ? why : "NVML is unusable");
		if (o->data.synthetic) {
			loop_data *d = &r->data;
			d->synth_dev_x = nn_ctx_alloc(&r->ctx, x_bytes);
			d->synth_dev_labels = nn_ctx_alloc(&r->ctx, n * sizeof(int32_t));
			RETURN_IF(!d->synth_dev_x || !d->synth_dev_labels, err,
				  IMS_ENOMEM,
				  "cannot copy the synthetic batch to the %s: out of "
				  "device memory",
				  nn_ctx_device(&r->ctx));
			FORWARD_IF_ERR(nn_ctx_to_device(&r->ctx, d->synth_dev_x,
							d->synth_x, x_bytes, err));
			FORWARD_IF_ERR(nn_ctx_to_device(&r->ctx, d->synth_dev_labels,
							d->synth_labels,
							n * sizeof(int32_t), err));
		}
	}
	r->dlogits = nn_ctx_alloc(&r->ctx, n * (size_t)r->data.classes * sizeof(float));
	RETURN_IF(!r->dlogits, err, IMS_ENOMEM, "cannot train: out of memory");
	return 0;
}

/* The staging slots, after their queued copies are done: before the
 * loaders' memory those copies read from is freed, on every exit (an
 * error leaves the copy of a batch taken ahead queued). */
void loop_free_stage(run *r)
{
	if (!r->ctx_ok)
		return;
	nn_stage_free(&r->ctx, r->st.stage);
	r->st.stage = NULL;
}

void loop_free_device(run *r)
{
	loop_stage *st = &r->st;
	if (!r->ctx_ok)
		return;
	loop_free_stage(r);
	nn_ctx_free(&r->ctx, r->dlogits);
	nn_ctx_free(&r->ctx, st->tally);
	nn_ctx_free(&r->ctx, r->data.synth_dev_x);
	nn_ctx_free(&r->ctx, r->data.synth_dev_labels);
	free(st->host_logits);
	free(st->held_labels);
	nn_gpumon_close(r->log.gpumon);
	if (st->hctx_ok)
		nn_ctx_release(&st->hctx);
}

/* Which of loop_stage.lent is loader l's. */
static const void **lent_by(run *r, aug_loader *l)
{
	return &r->st.lent[l == r->data.train ? 0 : 1];
}

/*
 * The loader refills the batch it lent last when it hands out the next
 * or starts an epoch; on a device a copy from it may still be queued,
 * which the stage refuses (nn_stage_reuse) rather than let the copy read
 * the next batch's bytes.
 */
int loop_loader_next(run *r, aug_loader *l, aug_batch *b, ims_error *err)
{
	const void **lent = lent_by(r, l);
	FORWARD_IF_ERR(nn_stage_reuse(&r->ctx, r->st.stage, *lent, err));
	*lent = NULL;
	int rc = aug_loader_next(l, b, err);
	if (rc == 0)
		*lent = b->data;
	return rc;
}

int loop_loader_start(run *r, aug_loader *l, uint64_t epoch,
		      uint64_t position, ims_error *err)
{
	const void **lent = lent_by(r, l);
	FORWARD_IF_ERR(nn_stage_reuse(&r->ctx, r->st.stage, *lent, err));
	*lent = NULL;
	return aug_loader_start_epoch_at(l, epoch, position, err);
}

/* Queues the copy of batch b into staging slot `slot`. */
static int stage_put(run *r, int slot, const aug_batch *b, ims_error *err)
{
	const size_t per = (size_t)3 * r->o->data.size * r->o->data.size * sizeof(float);
	return nn_stage_put(&r->ctx, r->st.stage, slot, b->data,
			    per * (size_t)b->count, b->labels,
			    sizeof(int32_t) * (size_t)b->count, err);
}

/*
 * Where the kernels read batch b: in place on the CPU backend (nothing
 * changes); on a device, the --synthetic batch's device copy, the slot
 * its copy was queued in during the previous step (loop_take_ahead), or
 * the next staging slot, its copy queued now; waited for either way
 * (*slot says which, to hand to nn_stage_done once the step is queued; -1
 * when none). The host batch may be reused when this returns. *wait_s
 * (may be NULL) gets the time blocked on the copy.
 */
int loop_stage_inputs(run *r, const aug_batch *b, const float **x,
		      const int32_t **labels, int *slot, double *wait_s,
		      ims_error *err)
{
	loop_stage *st = &r->st;
	*slot = -1;
	if (!st->stage)
		return 0;
	if (b->data == r->data.synth_x && r->data.synth_dev_x) {
		*x = r->data.synth_dev_x;
		*labels = r->data.synth_dev_labels;
		return 0;
	}
	float *dx;
	int32_t *dl;
	if (st->ahead_slot >= 0) {
		/* its copy was queued during the previous step */
		*slot = st->ahead_slot;
		st->ahead_slot = -1;
	} else {
		*slot = st->slot;
		st->slot ^= 1;
		FORWARD_IF_ERR(stage_put(r, *slot, b, err));
	}
	double t0 = ims_now();
	FORWARD_IF_ERR(nn_stage_get(&r->ctx, st->stage, *slot, &dx, &dl, err));
	if (wait_s)
		*wait_s += ims_now() - t0;
	*x = dx;
	*labels = dl;
	return 0;
}

/* On a device: copies n rows of logits to the host (waits for the
 * device) and points *logits at them. */
int loop_read_logits(run *r, const float **logits, int n, ims_error *err)
{
	FORWARD_IF_ERR(nn_ctx_to_host(&r->ctx, r->st.host_logits, *logits,
				      (size_t)n * r->data.classes * sizeof(float),
				      err));
	*logits = r->st.host_logits;
	return 0;
}

/*
 * A deferred-loss run's tally: read from the device (this wait, once per
 * reported interval, is the only one a step of fp32 or bf16 has), summed
 * over ranks, each rank's first troubled step shared. A step whose loss
 * was not finite, or whose batch had a label outside the classes, stops
 * the run here, named. reset: the interval takes the sums and the tally
 * starts again; otherwise it is only looked at (before a checkpoint, so
 * that none is written from weights a bad step spoilt).
 */
int loop_read_tally(run *r, loop_interval *iv, int reset, ims_error *err)
{
	static const nn_tally zero;
	loop_stage *st = &r->st;
	if (!st->defer_loss)
		return 0;
	nn_tally t;
	FORWARD_IF_ERR(nn_ctx_to_host(&r->ctx, &t, st->tally, sizeof(t), err));
	const size_t nv = 2 + 2 * (size_t)r->dp.world;
	double *v = calloc(nv, sizeof(double));
	RETURN_IF(!v, err, IMS_ENOMEM, "cannot train: out of memory");
	v[0] = t.loss_sum;
	v[1] = t.correct;
	v[2 + 2 * (size_t)r->dp.rank] = (double)t.nonfinite_step;
	v[3 + 2 * (size_t)r->dp.rank] = (double)t.bad_label_step;
	int rc = dp_allreduce_sum_f64(r->dp.comm, v, nv, err);
	double nonfinite = 0, bad_label = 0;
	for (int i = 0; !rc && i < r->dp.world; i++) {
		double a = v[2 + 2 * (size_t)i], b = v[3 + 2 * (size_t)i];
		if (a > 0 && (nonfinite == 0 || a < nonfinite))
			nonfinite = a;
		if (b > 0 && (bad_label == 0 || b < bad_label))
			bad_label = b;
	}
	const double loss = v[0], correct = v[1];
	free(v);
	FORWARD_IF_ERR(rc);
	RETURN_IF(bad_label > 0, err, IMS_EINVAL,
		  "cannot compute the cross-entropy loss: a sample of step %.0f has a label outside [0, %d)",
		  bad_label, r->data.classes);
	RETURN_IF(nonfinite > 0, err, IMS_EINVAL,
		  "loss is %s at step %.0f: stopping (lower --lr or check the "
		  "data; the last checkpoint written before this step is kept)",
		  isnan(loss) ? "NaN" : "infinite", nonfinite);
	if (!reset)
		return 0;
	iv->loss_sum += loss;
	iv->correct += correct;
	return nn_ctx_to_device(&r->ctx, st->tally, &zero, sizeof(zero), err);
}

/* The nan_step hook: poisons batch b when it is step `step`'s (from 0),
 * before its copy to a device is queued. */
int loop_poison(run *r, const aug_batch *b, uint64_t step, ims_error *err)
{
	if (step + 1 != r->hooks.nan_step || b->count < 1)
		return 0;
	((float *)b->data)[0] = NAN;
	/* the synthetic batch's device copy is poisoned too */
	if (r->data.synth_dev_x && b->data == r->data.synth_x)
		FORWARD_IF_ERR(nn_ctx_to_device(&r->ctx, r->data.synth_dev_x,
						r->data.synth_x, sizeof(float), err));
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
int loop_take_ahead(run *r, const aug_batch *b, uint64_t next_step,
		    double *wait_s, ims_error *err)
{
	loop_stage *st = &r->st;
	memcpy(st->held_labels, b->labels, sizeof(int32_t) * (size_t)b->count);
	double t0 = ims_now();
	int rc = loop_loader_next(r, r->data.train, &st->ahead, &st->ahead_err);
	*wait_s += ims_now() - t0;
	st->ahead_taken = 1;
	st->ahead_rc = rc;
	/* told as the next step's batch (next_batch): this step goes on
	 * through its collectives, which the other ranks are in */
	if (rc < 0)
		return 0;
	if (rc == 1) /* the epoch ended early: nothing to copy */
		return 0;
	FORWARD_IF_ERR(loop_poison(r, &st->ahead, next_step, err));
	st->ahead_slot = st->slot;
	st->slot ^= 1;
	return stage_put(r, st->ahead_slot, &st->ahead, err);
}
