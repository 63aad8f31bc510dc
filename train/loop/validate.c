/*
 * validate.c - validation after each epoch: every record of the split
 * once over all ranks (shares padded to equal length, padded samples
 * flagged and not counted; a record that cannot be loaded is left out and
 * reported, the sample standing in for it not counted either), top-1,
 * top-5 and the mean loss, scored on the host. A NaN or infinite mean
 * loss ends the run, as it does in training.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/loop/loop_internal.h"

/* This rank's records that validation could not load. */
typedef struct val_bad {
	uint64_t mine[LOOP_BAD_LISTED];
	int n_mine;
	char reason[IMS_ERRMSG_MAX];
} val_bad;

/*
 * Ranks normalised with their own batches' statistics; evaluate one model:
 * the average of the ranks' running statistics.
 */
static int average_statistics(run *r, ims_error *err)
{
	size_t nb;
	float *buf = nn_model_buffers(r->m, &nb);
	if (r->dp.nccl)
		return dp_nccl_allreduce_avg(r->dp.nccl, buf, nb, err);
	if (r->dp.world > 1) {
		FORWARD_IF_ERR(dp_allreduce_sum_f32(r->dp.comm, buf, nb, err));
		for (size_t i = 0; i < nb; i++)
			buf[i] /= (float)r->dp.world;
	}
	return 0;
}

/* Adds one batch's loss sum, top-1 and top-5 hits, record count and
 * records that could not be loaded to sums (padded samples and stand-ins
 * for bad records left out). */
static int score_batch(run *r, const aug_batch *b, double sums[5],
		       val_bad *vb, ims_error *err)
{
	const float *logits;
	const float *x = b->data;
	const int32_t *labels = b->labels;
	const int classes = r->data.classes;
	int slot = -1;
	uint8_t *skip = r->bad.val_skip;
	for (int i = 0; i < b->count; i++)
		skip[i] = b->padded[i] || b->replaced[i];
	sums[4] += b->bad_listed; /* each bad record once, as in training */
	if (b->bad_listed && !vb->reason[0])
		snprintf(vb->reason, sizeof(vb->reason), "%s", b->bad_reason);
	for (int i = 0; i < b->bad_listed; i++)
		loop_bad_keep(vb->mine, &vb->n_mine, b->bad_indices[i]);
	FORWARD_IF_ERR(loop_stage_inputs(r, b, &x, &labels, &slot, NULL, err));
	FORWARD_IF_ERR(nn_model_forward(r->m, x, b->count, 0, 0, &logits, err));
	/* scored on the host: on a device, from logits read back */
	nn_ctx *lctx = &r->ctx;
	if (r->st.stage) {
		FORWARD_IF_ERR(loop_read_logits(r, &logits, b->count, err));
		FORWARD_IF_ERR(nn_stage_done(&r->ctx, r->st.stage, slot, err));
		lctx = &r->st.hctx;
	}
	for (int i = 0; i < b->count; i++) {
		if (skip[i])
			continue;
		double l;
		FORWARD_IF_ERR(nn_softmax_xent(lctx, 1, classes,
					       logits + (size_t)i * classes,
					       b->labels + i, 0, 1, &l, NULL, err));
		sums[0] += l;
		sums[3] += 1;
	}
	sums[1] += nn_topk_correct(b->count, classes, logits, b->labels, 1, skip);
	sums[2] += nn_topk_correct(b->count, classes, logits, b->labels,
				   classes < 5 ? classes : 5, skip);
	return 0;
}

static int validate_timed(run *r, nn_train_result *res, int epoch,
			  uint64_t step, double wall0, ims_error *err)
{
	FORWARD_IF_ERR(average_statistics(r, err));
	double t_val = ims_now();
	FORWARD_IF_ERR(aug_loader_start_epoch(r->data.val, 0, err));
	if (!r->bad.val_skip) {
		r->bad.val_skip = malloc((size_t)r->o->batch_size);
		RETURN_IF(!r->bad.val_skip, err, IMS_ENOMEM,
			  "cannot validate: out of memory");
	}
	double sums[5] = {0, 0, 0, 0, 0}; /* loss, top1, top5, records, bad */
	val_bad vb;
	memset(&vb, 0, sizeof(vb));
	for (;;) {
		aug_batch b;
		int rc = aug_loader_next(r->data.val, &b, err);
		if (rc < 0)
			return rc;
		if (rc == 1)
			break;
		FORWARD_IF_ERR(score_batch(r, &b, sums, &vb, err));
	}
	FORWARD_IF_ERR(dp_allreduce_sum_f64(r->dp.comm, sums, 5, err));
	FORWARD_IF_ERR(loop_bad_validation(r, epoch, vb.mine, vb.n_mine, vb.reason,
					   (uint64_t)sums[4], err));
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
		  double wall0, ims_error *err)
{
	double t0 = ims_now();
	int rc = validate_timed(r, res, epoch, step, wall0, err);
	r->log.val_s += ims_now() - t0;
	return rc;
}
