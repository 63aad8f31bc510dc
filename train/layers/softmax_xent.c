/*
 * softmax_xent.c - softmax cross-entropy with label smoothing, and top-k
 * accuracy, CPU reference.
 *
 * Per sample, with lse = log sum_j exp(z_j) computed as
 * max + log sum exp(z_j - max) (no overflow for any finite logits):
 *   -log p_j = lse - z_j
 *   loss     = (1 - s) (lse - z_label) + s (lse - mean_j z_j)
 * which is PyTorch's CrossEntropyLoss(label_smoothing=s) against the
 * target (1 - s) onehot + s / K, and
 *   dloss/dz_j = p_j - target_j.
 * Each sample is computed in double by one thread; the per-sample losses
 * are then added in index order, so loss_sum is the same on any thread
 * count.
 */
#include <math.h>

#include "train/nn_internal.h"

/* Below this many logits a loop stays on one thread: forking costs more. */
#define XENT_PAR_MIN 32768

int nn_xent_check(int n, int k, float smoothing, ims_error *err)
{
	static const char what[] = "compute the cross-entropy loss";
	RETURN_IF(n < 1 || k < 1, err, IMS_EINVAL,
		  "cannot %s: invalid shape %dx%d (samples and classes must be >= 1)",
		  what, n, k);
	RETURN_IF(!(smoothing >= 0.0f && smoothing <= 1.0f), err, IMS_EINVAL,
		  "cannot %s: label smoothing %g is outside [0, 1]", what,
		  (double)smoothing);
	return 0;
}

int nn_cpu_softmax_xent(nn_ctx *ctx, int n, int k, const float *logits,
			const int32_t *labels, float smoothing, float scale,
			double *loss_sum, float *dlogits, ims_error *err)
{
	static const char what[] = "compute the cross-entropy loss";
	FORWARD_IF_ERR(nn_xent_check(n, k, smoothing, err));
	/* All labels first, so a bad one leaves the outputs untouched. */
	for (int i = 0; i < n; i++)
		RETURN_IF(labels[i] < 0 || labels[i] >= k, err, IMS_EINVAL,
			  "cannot %s: sample %d has label %d, outside [0, %d)",
			  what, i, (int)labels[i], k);
	double *loss = (double *)nn_ctx_scratch(ctx, 2 * (size_t)n, err);
	if (!loss)
		return IMS_ENOMEM;
	const double s = smoothing, on = 1.0 - s, off = s / k;
	const int nt = (size_t)n * k < XENT_PAR_MIN ? 1 : ctx->threads;

#pragma omp parallel for num_threads(nt) schedule(static)
	for (int i = 0; i < n; i++) {
		const float *z = logits + (size_t)i * k;
		const int label = labels[i];
		float mx = z[0];
		for (int j = 1; j < k; j++)
			mx = z[j] > mx ? z[j] : mx;
		double se = 0, sz = 0;
		for (int j = 0; j < k; j++) {
			se += exp((double)z[j] - mx);
			sz += z[j];
		}
		const double lse = mx + log(se);
		const double z_label = z[label];
		loss[i] = on * (lse - z_label) + s * (lse - sz / k);
		if (!dlogits)
			continue;
		float *g = dlogits + (size_t)i * k;
		for (int j = 0; j < k; j++) {
			double t = j == label ? on + off : off;
			g[j] = (float)(scale * (exp((double)z[j] - lse) - t));
		}
	}
	if (loss_sum) {
		double total = 0;
		for (int i = 0; i < n; i++)
			total += loss[i];
		*loss_sum = total;
	}
	return 0;
}

int nn_cpu_xent_tally(nn_ctx *ctx, int n, int k, const float *logits,
		      const int32_t *labels, float smoothing, float scale,
		      float *dlogits, int64_t step, nn_tally *t, ims_error *err)
{
	FORWARD_IF_ERR(nn_xent_check(n, k, smoothing, err));
	for (int i = 0; i < n; i++)
		if (labels[i] < 0 || labels[i] >= k) {
			if (!t->bad_label_step)
				t->bad_label_step = step;
			return 0;
		}
	double loss = 0;
	FORWARD_IF_ERR(nn_cpu_softmax_xent(ctx, n, k, logits, labels, smoothing,
					   scale, &loss, dlogits, err));
	t->loss_sum += loss;
	t->correct += nn_topk_correct(n, k, logits, labels, 1, NULL);
	if (!isfinite(loss) && !t->nonfinite_step)
		t->nonfinite_step = step;
	return 0;
}

int nn_topk_correct(int n, int k, const float *logits, const int32_t *labels,
		    int topk, const uint8_t *skip)
{
	int correct = 0;
	for (int i = 0; i < n; i++) {
		if (skip && skip[i])
			continue;
		const int label = labels[i];
		if (label < 0 || label >= k)
			continue; /* no such class: never correct */
		const float *z = logits + (size_t)i * k;
		const float v = z[label];
		if (isnan(v))
			continue;
		/* The label's place in a stable descending sort: classes
		 * above it, and classes equal to it with a smaller index. */
		int rank = 0;
		for (int j = 0; j < k && rank < topk; j++)
			rank += z[j] > v || (z[j] == v && j < label);
		correct += rank < topk;
	}
	return correct;
}
