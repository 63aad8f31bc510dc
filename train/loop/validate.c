/*
 * validate.c - validation after each epoch: every record of the split
 * once over all ranks (shares padded to equal length, padded samples
 * flagged and not counted; a record that cannot be loaded is left out and
 * reported, the sample standing in for it not counted either), top-1,
 * top-5 and the mean loss, scored on the host by the pass `imshard eval`
 * runs too (evaluate.c). A NaN or infinite mean loss ends the run, as it
 * does in training. Without --val, only the ranks' statistics are
 * averaged.
 */
#include <math.h>
#include <string.h>

#include "train/loop/loop_internal.h"

/* The ranks' running statistics averaged (a collective); on a device
 * queued only, or waited for too. */
static int average(run *r, int wait, ims_error *err)
{
	size_t nb;
	float *buf = nn_model_buffers(r->m, &nb);
	if (r->dp.nccl && wait) {
		FORWARD_IF_ERR(dp_nccl_allreduce_avg(r->dp.nccl, buf, nb, err));
	} else if (r->dp.nccl) {
		FORWARD_IF_ERR(dp_nccl_allreduce_avg_queue(r->dp.nccl, buf, nb, err));
	} else {
		FORWARD_IF_ERR(dp_allreduce_sum_f32(r->dp.comm, buf, nb, err));
		for (size_t i = 0; i < nb; i++)
			buf[i] /= (float)r->dp.world;
	}
	r->dp.averaged = 1;
	return 0;
}

/*
 * Ranks normalised with their own batches' statistics; evaluate one model:
 * the average of the ranks' running statistics. Not twice over the same
 * step (a checkpoint after validation): with three ranks x + x + x can
 * round, and the average would drift from the value every rank holds.
 * Nor ever with --freeze-bn: no step moves them, every rank holds the
 * broadcast (or resumed) ones, and averaging those at three ranks
 * changed about 1 value in 6 by a bit at each validation and checkpoint.
 */
int loop_average_statistics(run *r, ims_error *err)
{
	if (r->dp.averaged || r->dp.world < 2 || r->o->net.freeze_bn)
		return 0;
	return average(r, 1, err);
}

int loop_average_step_statistics(run *r, ims_error *err)
{
	size_t nb;
	(void)nn_model_buffers(r->m, &nb);
	if (r->dp.world < 2 || r->o->net.freeze_bn || !nb)
		return 0;
	return average(r, 0, err);
}

/*
 * The run's last validation with --log-dir: what each record was
 * predicted as, written by rank 0 as LOGDIR/per_class.csv,
 * confusion.csv, predictions.csv and eval.json (nn_eval_write), as
 * `imshard eval -o` writes them.
 */
static int write_eval_files(run *r, const loop_eval *e, int epoch,
			    uint64_t step, ims_error *err)
{
	nn_eval_result res;
	FORWARD_IF_ERR(loop_eval_result(r, e, &res, err)); /* collective */
	int rc = 0;
	if (r->dp.rank == 0) {
		nn_eval_origin origin = {"imshard-train", NULL, r->o->data.val_manifest,
					 epoch, step, r->o->net.precision};
		rc = nn_eval_write(r->o->out.log_dir, &res, &r->card, &origin, err);
	}
	nn_eval_result_release(&res);
	return rc;
}

static int validate_timed(run *r, nn_train_result *res, int epoch,
			  uint64_t step, double wall0, int last, ims_error *err)
{
	/* averaged without --val too: the checkpoint holds one model */
	FORWARD_IF_ERR(loop_average_statistics(r, err));
	if (!r->data.val)
		return 0;
	double t_val = ims_now();
	loop_eval e;
	memset(&e, 0, sizeof(e));
	e.want_rows = last && r->o->out.log_dir;
	int rc = loop_eval_pass(r, r->data.val, &e, err);
	if (!rc)
		rc = loop_bad_validation(r, epoch, e.bad_mine, e.n_bad_mine,
					 e.bad_reason, (uint64_t)e.sums[4], err);
	if (!rc && e.want_rows)
		rc = write_eval_files(r, &e, epoch, step, err);
	double sums[5]; /* loss, top1, top5, records, bad records */
	memcpy(sums, e.sums, sizeof(sums));
	loop_eval_free(&e);
	if (rc)
		return rc;
	nn_train_validation v = {
		.epoch = epoch,
		.step = step,
		.top1 = sums[3] > 0 ? sums[1] / sums[3] : 0,
		.top5 = sums[3] > 0 ? sums[2] / sums[3] : 0,
		.loss = sums[3] > 0 ? sums[0] / sums[3] : 0,
		.records = (uint64_t)sums[3],
		.bad_records = (uint64_t)sums[4],
	};
	/* a model that evaluates to NaN (a running variance gone negative)
	 * must not be checkpointed as if it had been validated */
	RETURN_IF(!isfinite(v.loss), err, IMS_EINVAL,
		  "validation loss is %s after epoch %d (step %llu): stopping (the "
		  "model computes non-finite outputs; lower --lr or check --init's "
		  "weights; the last checkpoint written before it is kept)",
		  isnan(v.loss) ? "NaN" : "infinite", epoch + 1,
		  (unsigned long long)step);
	double wall = ims_now() - wall0;
	res->val_top1 = v.top1;
	res->val_top5 = v.top5;
	res->val_records = v.records;
	res->val_bad_records = v.bad_records;
	if (v.top1 > res->best_top1 || res->best_epoch < 0) {
		res->best_top1 = v.top1;
		res->best_epoch = epoch;
		res->best_wall_s = wall;
	}
	v.seconds = ims_now() - t_val;
	return loop_report_validation(r, &v, wall, err);
}

/* Validation's own time goes to the summary, so a report can tell it from
 * training when it compares wall times. */
int loop_validate(run *r, nn_train_result *res, int epoch, uint64_t step,
		  double wall0, int last, ims_error *err)
{
	double t0 = ims_now();
	int rc = validate_timed(r, res, epoch, step, wall0, last, err);
	r->log.val_s += ims_now() - t0;
	return rc;
}
