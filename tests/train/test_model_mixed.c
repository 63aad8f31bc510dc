/*
 * test_model_mixed.c - whole models in mixed precision on the CPU
 * (ctx->precision bf16 / fp16, train/model.c with train/layers/mixed.c)
 * against the same models in fp32. Three SGD steps (momentum 0.9,
 * Nesterov, weight decay 1e-4, batch 8, 10 classes, inputs uniform in
 * [-1, 1)) from the same initial weights (same seed) and batches; four
 * relative differences from fp32: the worst step's loss, the first step's
 * gradients |g - g32|_2 / |g32|_2 over all parameters, the updates
 * (weights after minus before) alike, and the running statistics.
 *
 *  - With frozen batch norm (running statistics, the same affine map for
 *    every batch) the graphs are well conditioned and the tolerances are
 *    fixed, about 2.5x what was measured (in parentheses):
 *      convnet7 16 px bf16: loss 1e-3 (2.5e-5), gradients 0.12 (0.046),
 *        updates 0.15 (0.057); fp16: 1e-4 (2.5e-6), 0.02 (0.006), 0.03
 *        (0.011);
 *      resnet18 32 px bf16: 5e-3 (1e-3), 0.3 (0.14), 0.6 (0.29); fp16:
 *        3e-3 (9e-4), 0.08 (0.028), 0.25 (0.11);
 *      resnet50 32 px bf16, lr 1e-3 (its unnormalised activations grow
 *        too fast for 1e-2): 0.05 (0.022), 0.25 (0.094), 0.4 (0.17);
 *      vgg16 32 px bf16 (no batch norm at all): 1e-3 (5e-5), 0.25
 *        (0.11), 0.35 (0.14).
 *    A layer is within about 2e-3 of fp32 in bf16 (test_mixed); the
 *    first layers' gradients are sums that cancel, where that grows.
 *  - With batch statistics over 8 samples (the ResNets' last stage is 1x1
 *    at 32 px: 8 values per channel) the graphs are ill conditioned:
 *    rounding only the input to bf16 in an fp32 run already moves
 *    resnet50's first gradients by 128% and resnet18's by 20%. These
 *    runs' first gradients, updates and running statistics are held to 3
 *    times that input-only difference (measured in the same test) plus
 *    0.05: measured 2.3x for resnet18 and 1.1x for resnet50. Their losses
 *    are printed and must be finite, not held: after two updates the
 *    trajectories have parted (resnet50's third loss differs by 22% in
 *    bf16, 4.6x the input-only difference).
 *  - Every value finite; the same run twice gives the same bits (mixed
 *    precision on the CPU is deterministic); the 16-bit weight copy each
 *    forward pass reads is the fp32 master weights rounded, made again
 *    after every update.
 *  - The memory plan sizes 16-bit activations at 2 bytes: planned
 *    training bytes per image in bf16 between 45% and 60% of fp32's (the
 *    argmax, dropout masks and batch-norm statistics stay the same
 *    size); printed for each model.
 *
 * resnet50 and vgg16 run alone with their name as argument (slow tests).
 */
#include <math.h>
#include <string.h>

#include "common/common.h"
#include "nn_test_util.h"
#include "test.h"
#include "train/model_internal.h"

#define STEPS 3
#define CLASSES 10
#define BATCH 8

static ims_error err;

typedef struct result {
	double loss[STEPS];
	float *init, *params, *buffers, *grads;
	size_t np, nb;
} result;

static void result_free(result *r)
{
	free(r->init);
	free(r->params);
	free(r->buffers);
	free(r->grads);
	memset(r, 0, sizeof(*r));
}

static float *copy_of(const float *p, size_t n)
{
	float *q = nn_test_alloc(n);
	memcpy(q, p, n * sizeof(float));
	return q;
}

/* Every parameter's 16-bit copy is the master weight rounded. */
static int weight_copy_current(nn_model *m)
{
	const uint16_t *h = m->form.params16;
	for (size_t i = 0; i < m->store.n_params; i++) {
		uint16_t want = m->form.precision == NN_PREC_BF16
					? ims_f32_to_bf16(m->store.params[i])
					: ims_f32_to_f16(m->store.params[i]);
		if (h[i] != want)
			return 0;
	}
	return 1;
}

/* fp32 runs whose input is rounded to bf16 / fp16: the sensitivity
 * baseline of a model */
enum { ROUND_IN_BF16 = 10 + NN_PREC_BF16, ROUND_IN_FP16 = 10 + NN_PREC_FP16 };

static void run(const char *model, int hw, int precision, int frozen_bn,
		double lr, result *res)
{
	memset(res, 0, sizeof(*res));
	nn_ctx ctx;
	CHECK_OK(nn_ctx_init_cpu(&ctx, 2, &err), &err);
	ctx.precision = precision >= 10 ? NN_PREC_FP32 : precision;
	nn_model *m = NULL;
	CHECK_OK(nn_model_create(&ctx, model, CLASSES, hw, hw, BATCH, 7, &m, &err),
		 &err);
	if (!m) {
		nn_ctx_release(&ctx);
		return;
	}
	nn_model_freeze_bn(m, frozen_bn);
	/* does nothing on the CPU: run as the trainer runs it */
	CHECK_OK(nn_model_prepare(m, &err), &err);
	int nt = nn_model_tensor_count(m);
	nn_optim_segment *segs = calloc((size_t)nt, sizeof(*segs));
	size_t nsegs = 0;
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *t = nn_model_tensor(m, i);
		if (t->kind == NN_TENSOR_RUNNING || t->kind == NN_TENSOR_COUNTER)
			continue;
		segs[nsegs++] = (nn_optim_segment){t->offset, t->count,
						   t->kind == NN_TENSOR_WEIGHT, 1};
	}
	nn_optim_opts oo;
	nn_optim_opts_init(&oo, NN_OPTIM_SGD);
	oo.momentum = 0.9;
	oo.nesterov = 1;
	oo.weight_decay = 1e-4;
	oo.threads = 2;
	nn_optim *opt = NULL;
	size_t np;
	float *p = nn_model_params(m, &np);
	CHECK_OK(nn_optim_create(&oo, np, &opt, &err), &err);
	res->init = copy_of(p, np);
	res->np = np;
	const size_t in_floats = (size_t)BATCH * 3 * hw * hw;
	float *x = nn_test_alloc(in_floats);
	float *dl = nn_test_alloc((size_t)BATCH * CLASSES);
	int32_t labels[BATCH];
	int copy_ok = 1;
	for (int s = 0; s < STEPS; s++) {
		nn_test_fill(x, in_floats, 300 + (uint64_t)s, -1, 1);
		for (size_t i = 0; precision >= 10 && i < in_floats; i++)
			x[i] = precision == ROUND_IN_BF16
				       ? ims_bf16_to_f32(ims_f32_to_bf16(x[i]))
				       : ims_f16_to_f32(ims_f32_to_f16(x[i]));
		for (int i = 0; i < BATCH; i++)
			labels[i] = (s * 7 + i * 3) % CLASSES;
		const float *logits;
		CHECK_OK(nn_model_forward(m, x, BATCH, 1, (uint64_t)s, &logits, &err),
			 &err);
		if (ctx.precision != NN_PREC_FP32)
			copy_ok &= weight_copy_current(m);
		CHECK_OK(ctx.be->softmax_xent(&ctx, BATCH, CLASSES, logits, labels,
					      0, 1.0f / BATCH, &res->loss[s], dl,
					      &err),
			 &err);
		CHECK_OK(nn_model_backward(m, dl, 0, &err), &err);
		if (s == 0)
			res->grads = copy_of(nn_model_grads(m, NULL), np);
		CHECK_OK(nn_optim_step(opt, p, nn_model_grads(m, NULL), segs, nsegs,
				       lr, &err),
			 &err);
	}
	CHECK(copy_ok);
	res->params = copy_of(p, np);
	float *b = nn_model_buffers(m, &res->nb);
	res->buffers = copy_of(b, res->nb);
	free(x);
	free(dl);
	free(segs);
	nn_optim_free(opt);
	nn_model_free(m);
	nn_ctx_release(&ctx);
}

/* |a - b|_2 (differences from base when given) and |b|_2 into *norm */
static double diff_l2(const float *a, const float *b, const float *base,
		      size_t n, double *norm)
{
	double d = 0, r = 0;
	for (size_t i = 0; i < n; i++) {
		double da = (double)a[i] - (base ? base[i] : 0);
		double db = (double)b[i] - (base ? base[i] : 0);
		d += (da - db) * (da - db);
		r += db * db;
	}
	*norm = sqrt(r);
	return sqrt(d);
}

/* Relative differences of a run from the fp32 one: the worst step's
 * loss, the first step's gradients, the updates after STEPS steps, the
 * running statistics. */
typedef struct diffs {
	double loss, grad, update, stats;
} diffs;

static diffs differ(const result *h, const result *f)
{
	diffs d = {0, 0, 0, 0};
	for (int s = 0; s < STEPS; s++)
		d.loss = fmax(d.loss, fabs(f->loss[s] - h->loss[s]) / fabs(f->loss[s]));
	double norm, x = diff_l2(h->grads, f->grads, NULL, f->np, &norm);
	d.grad = x / norm;
	x = diff_l2(h->params, f->params, f->init, f->np, &norm);
	d.update = x / norm;
	x = diff_l2(h->buffers, f->buffers, NULL, f->nb, &norm);
	d.stats = f->nb && norm > 0 ? x / norm : 0;
	return d;
}

/*
 * The mixed run against fp32: within `t` (relative), or with k > 0
 * within k times the differences rounding only the input gives (an fp32
 * run on the input rounded to the 16-bit type) plus `t`.
 */
static void compare(const char *model, int hw, int precision, int frozen_bn,
		    double lr, diffs t, double k)
{
	const char *pn = precision == NN_PREC_BF16 ? "bf16" : "fp16";
	result f, h, again, base;
	memset(&base, 0, sizeof(base));
	run(model, hw, NN_PREC_FP32, frozen_bn, lr, &f);
	run(model, hw, precision, frozen_bn, lr, &h);
	if (!f.params || !h.params) {
		CHECK(0);
		result_free(&f);
		result_free(&h);
		return;
	}
	CHECK(!memcmp(f.init, h.init, f.np * sizeof(float))); /* same seed */
	int finite = 1;
	for (size_t i = 0; i < h.np; i++)
		finite &= isfinite(h.params[i]) && isfinite(h.grads[i]);
	for (size_t i = 0; i < h.nb; i++)
		finite &= isfinite(h.buffers[i]);
	CHECK(finite);
	diffs d = differ(&h, &f), lim = t;
	if (k > 0) {
		run(model, hw, 10 + precision, frozen_bn, lr, &base);
		diffs b = differ(&base, &f);
		printf("%s, fp32 on the input rounded to %s: losses %.3g, step-1 "
		       "gradients %.3g, updates %.3g, running statistics %.3g "
		       "relative\n", model, pn, b.loss, b.grad, b.update, b.stats);
		lim.loss += k * b.loss;
		lim.grad += k * b.grad;
		lim.update += k * b.update;
		lim.stats += k * b.stats;
	}
	printf("%s %s%s, lr %g: losses %.3g (tolerance %.3g), step-1 gradients "
	       "%.3g (%.3g), updates %.3g (%.3g), running statistics %.3g (%.3g) "
	       "relative of fp32\n",
	       model, pn, frozen_bn ? " (frozen batch norm)" : "", lr, d.loss,
	       lim.loss, d.grad, lim.grad, d.update, lim.update, d.stats,
	       lim.stats);
	/* calibrated runs: the losses after two updates of a chaotic
	 * trajectory are printed, not held (see the top) */
	CHECK(k > 0 || d.loss <= lim.loss);
	for (int s = 0; s < STEPS; s++)
		CHECK(isfinite(h.loss[s]));
	CHECK(d.grad <= lim.grad);
	CHECK(d.update <= lim.update);
	CHECK(d.stats <= lim.stats);
	/* deterministic: the same run, the same bits */
	run(model, hw, precision, frozen_bn, lr, &again);
	CHECK(again.params && !memcmp(again.params, h.params, h.np * sizeof(float)));
	CHECK(again.buffers &&
	      !memcmp(again.buffers, h.buffers, h.nb * sizeof(float)));
	result_free(&f);
	result_free(&h);
	result_free(&again);
	result_free(&base);
}

/* Planned training bytes per image, fp32 against bf16. */
static void memory(const char *model, int hw, int batch)
{
	size_t bytes[2] = {0, 0};
	for (int k = 0; k < 2; k++) {
		nn_ctx ctx;
		nn_model *m = NULL;
		CHECK_OK(nn_ctx_init_cpu(&ctx, 1, &err), &err);
		ctx.precision = k ? NN_PREC_BF16 : NN_PREC_FP32;
		CHECK_OK(nn_model_create(&ctx, model, CLASSES, hw, hw, batch, 7, &m,
					 &err),
			 &err);
		if (m) {
			nn_model_memory mm;
			nn_model_memory_info(m, &mm);
			bytes[k] = mm.train_bytes;
			CHECK_EQ_INT(mm.precision, ctx.precision);
			if (k)
				CHECK(mm.weight_copy_bytes >=
				      m->store.n_params * 2);
		}
		nn_model_free(m);
		nn_ctx_release(&ctx);
	}
	double ratio = bytes[0] ? (double)bytes[1] / (double)bytes[0] : 0;
	printf("%s %d px: planned training activations %.1f KiB/image fp32, "
	       "%.1f KiB/image bf16 (%.0f%%)\n",
	       model, hw, bytes[0] / 1024.0 / batch, bytes[1] / 1024.0 / batch,
	       100 * ratio);
	CHECK(ratio >= 0.45 && ratio <= 0.60);
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : "";
	/* floors of the calibrated comparisons */
	const diffs floor = {0.01, 0.05, 0.05, 0.05};
	if (!strcmp(only, "vgg16")) {
		/* no batch norm: well conditioned, fixed bounds */
		compare("vgg16", 32, NN_PREC_BF16, 0, 0.01,
			(diffs){1e-3, 0.25, 0.35, 0}, 0);
		memory("vgg16", 64, 4);
		return TEST_EXIT();
	}
	if (!strcmp(only, "resnet50")) {
		compare("resnet50", 32, NN_PREC_BF16, 1, 0.001,
			(diffs){0.05, 0.25, 0.4, 0}, 0);
		compare("resnet50", 32, NN_PREC_BF16, 0, 0.01, floor, 3);
		memory("resnet50", 64, 4);
		return TEST_EXIT();
	}
	/* loss, step-1 gradients, updates, running statistics */
	compare("convnet7", 16, NN_PREC_BF16, 1, 0.01,
		(diffs){1e-3, 0.12, 0.15, 0}, 0);
	compare("convnet7", 16, NN_PREC_FP16, 1, 0.01,
		(diffs){1e-4, 0.02, 0.03, 0}, 0);
	compare("resnet18", 32, NN_PREC_BF16, 1, 0.01,
		(diffs){5e-3, 0.3, 0.6, 0}, 0);
	compare("resnet18", 32, NN_PREC_FP16, 1, 0.01,
		(diffs){3e-3, 0.08, 0.25, 0}, 0);
	compare("resnet18", 32, NN_PREC_BF16, 0, 0.01, floor, 3);
	memory("convnet7", 32, 4);
	memory("resnet18", 64, 4);
	return TEST_EXIT();
}
