/*
 * test_train_cuda.c - training on the CUDA backend against the CPU
 * backend (the reference): the pieces the training loop adds on top of the
 * layer kernels (test_backend_cuda checks those).
 *
 *  - Optimiser updates (optim.cu): SGD (momentum, Nesterov, weight decay,
 *    a segment without decay, a frozen one; and 700 tensors, several
 *    launches of many runs each), Adam and AdamW, 3 steps from
 *    the same parameters, gradients and state: the CPU's bits exactly
 *    (both round every operation on its own).
 *  - Three training steps of convnet7 and resnet18 (32 px, batch 4, 10
 *    classes, inputs uniform in [-1, 1), SGD momentum 0.9, Nesterov,
 *    weight decay 1e-4, lr 0.01) on both backends from the same initial
 *    weights (same seed) and batches, checked after every step: for
 *    every tensor, with D = weights after minus before, |D_gpu - D_cpu|_2
 *    <= max(TOL |D_cpu|_2, SPREAD |D_q - D_cpu|_2) + 1e-7 sqrt(count),
 *    where q is a third run on the CPU whose initial weights were
 *    multiplied by 1 + u, |u| < 1e-6 (a rounding-level difference in
 *    every layer; in 16 bits |u| < 2^-9, half an ulp of the bf16 copy
 *    the layers read, since 1e-6 would not change it), and SPREAD = 4. TOL = 2e-3 for convnet7 and 5e-3 for
 *    resnet18. The spread term is there because this resnet18 is
 *    chaotic at this size: batch norm over 4 samples (its last stage is
 *    1x1 at 32 px) makes a 1e-7 change of the initial weights move the
 *    step-3 loss by 1% and some updates by 38% on the CPU alone, which is
 *    what the device showed, while step 1 stays within 1e-3 of the bound's
 *    scale, so a wrong kernel still shows there. Running statistics
 *    alike, relative to their values. The loss: within max(1e-3
 *    relative, SPREAD x the perturbed run's distance).
 *  - The same three steps of convnet7 in bf16 (16-bit activations and
 *    weight copy, fp32 sums) on both backends: the device against the
 *    CPU's mixed-precision graph, its reference (train/layers/mixed.c):
 *    TOL_BF16 = 5e-2 and the loss within 2e-2 relative. A bf16 layer is
 *    within 1e-2 of the CPU's (test_backend_cuda; the sums run in other
 *    orders and a result near a rounding boundary rounds the other way),
 *    20x the fp32 per-op bound; the fp32 case's 2e-3 scaled alike gives
 *    4e-2. Then resnet18 in bf16 channels-last (NHWC activations, the
 *    weight copy c_out x kh x kw x c_in) on both sides, under the same
 *    bounds, at 64 px: at 32 px its last stage normalises 4 values per
 *    channel, and bf16 rounding alone moved the device's step-1 loss 4%
 *    from the CPU's; its loss is held to the bound at step 1 only (the
 *    forward graph), the tensors at every step. The CPU's twin computes
 *    its NCHW bits (test_channels_last).
 *  - fp16 loss scaling on convnet7 (starting at S = 1024, so that no
 *    step overflows on its own): step 1's unscaled gradients match the
 *    CPU's fp16 ones within TOL_BF16 (fp16 rounds finer than bf16);
 *    an Inf put into one gradient of step 2 is found, the step is skipped
 *    (weights, momentum and the optimiser's step count keep their bits)
 *    and S halves to 512; step 3 applies again.
 *  - A checkpoint saved from the GPU model and optimiser resumes into a
 *    CPU model and optimiser with the GPU's bits (to_host staging).
 *  - The memory plan on the device: three steps of convnet7 and resnet18
 *    with the plan (dead buffers poisoned with NaN as they die) give the
 *    bits of the same steps with every output and gradient in its own
 *    bytes (ctx->memory_plan, train/model_plan.c), as on the CPU
 *    (test_model_plan).
 *
 * With --cpu (test_train_cuda_cpu, label unit, run by CI) a one-thread
 * CPU context stands in for the device: the same scenarios, fp16's skip
 * and the per-step bounds included, on every machine. It caught the
 * fp16 case putting its Inf into the padding after the last tensor,
 * where backward never writes, so step 3 found it again.
 *
 * On a machine without a GPU (or in a build without the CUDA backend) it
 * prints one line and exits 77 (skipped); on a GPU host that cannot run
 * it, and with IMSHARD_REQUIRE_GPU=1, it fails (gpu_test.h).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn_test_util.h"
#include "gpu_test.h"
#include "test.h"
#include "train/loss_scale.h"
#include "train/nn_internal.h"
#include "train/checkpoint.h"

#define TOL_BF16 5e-2

static nn_ctx cpu, gpu;
static ims_error err;
static char dir[4096];

static float *to_dev(const void *h, size_t bytes)
{
	float *d = gpu.be->alloc(&gpu, bytes);
	CHECK(d != NULL);
	CHECK_OK(gpu.be->to_device(&gpu, d, h, bytes, &err), &err);
	return d;
}

static float *to_host_copy(const void *d, size_t bytes)
{
	float *h = malloc(bytes ? bytes : 1);
	CHECK(h != NULL);
	CHECK_OK(gpu.be->to_host(&gpu, h, d, bytes, &err), &err);
	return h;
}

/* ---- optimiser updates: bit for bit --------------------------------------- */

static void optim_case(int kind, int nesterov, double wd,
		       const nn_optim_segment *segs, size_t nsegs, size_t n)
{
	float *p = nn_test_alloc(n), *g = nn_test_alloc(n);
	nn_test_fill(p, n, 11 + (uint64_t)kind, -1, 1);
	float *dp = to_dev(p, n * sizeof(float));
	nn_optim_opts o;
	nn_optim_opts_init(&o, kind);
	if (kind == NN_OPTIM_SGD) {
		o.momentum = 0.9;
		o.nesterov = nesterov;
	}
	o.weight_decay = wd;
	nn_optim *hc = NULL, *dc = NULL;
	CHECK_OK(nn_optim_create(&o, n, &hc, &err), &err);
	o.ctx = &gpu;
	CHECK_OK(nn_optim_create(&o, n, &dc, &err), &err);
	for (int step = 0; step < 3; step++) {
		nn_test_fill(g, n, 100 + (uint64_t)step, -0.5f, 0.5f);
		float *dg = to_dev(g, n * sizeof(float));
		double lr = 0.1 / (step + 1);
		CHECK_OK(nn_optim_step(hc, p, g, segs, nsegs, lr, &err), &err);
		CHECK_OK(nn_optim_step(dc, dp, dg, segs, nsegs, lr, &err), &err);
		gpu.be->free(&gpu, dg);
	}
	float *back = to_host_copy(dp, n * sizeof(float));
	size_t diff = 0;
	for (size_t i = 0; i < n; i++)
		if (memcmp(&back[i], &p[i], sizeof(float)) && diff++ == 0)
			printf("optim kind %d nesterov %d: p[%zu] gpu %.9g cpu %.9g\n",
			       kind, nesterov, i, back[i], p[i]);
	CHECK_EQ_U64(diff, 0);
	for (size_t s = 0; s < nn_optim_state_count(hc); s++) {
		float *st = to_host_copy(nn_optim_state(dc, s), n * sizeof(float));
		CHECK(memcmp(st, nn_optim_state(hc, s), n * sizeof(float)) == 0);
		free(st);
	}
	CHECK_EQ_U64((uint64_t)nn_optim_step_count(dc), 3);
	free(back);
	nn_optim_free(hc);
	nn_optim_free(dc);
	gpu.be->free(&gpu, dp);
	free(p);
	free(g);
}

static void test_optim(void)
{
	const nn_optim_segment three[3] = {
		{0, 40000, 1, 1},     /* decay */
		{40000, 30000, 0, 1}, /* no decay (batch norm, bias) */
		{70000, 20000, 1, 0}, /* frozen */
	};
	optim_case(NN_OPTIM_SGD, 0, 1e-4, three, 3, 100003);
	optim_case(NN_OPTIM_SGD, 1, 5e-4, three, 3, 100003);
	optim_case(NN_OPTIM_ADAM, 0, 1e-2, three, 3, 100003);
	optim_case(NN_OPTIM_ADAMW, 0, 1e-2, three, 3, 100003);
	/* 700 tensors, gaps, frozen and undecayed ones: three batches of
	 * runs, three launches */
	enum { NS = 700 };
	size_t n;
	nn_optim_segment *many = nn_test_segments(NS, 9000, &n);
	optim_case(NN_OPTIM_SGD, 1, 5e-4, many, NS, n);
	optim_case(NN_OPTIM_ADAMW, 0, 1e-2, many, NS, n);
	free(many);
}

/* ---- three training steps ------------------------------------------------- */

typedef struct side {
	nn_ctx *ctx;
	nn_model *m;
	nn_optim *opt;
	nn_optim_segment *segs;
	size_t nsegs;
	float *x, *dlogits; /* the ctx's memory */
	int32_t *labels;
} side;

static void side_open(side *s, nn_ctx *ctx, const char *model, int n,
		      int size, int classes)
{
	memset(s, 0, sizeof(*s));
	s->ctx = ctx;
	CHECK_OK(nn_model_create(ctx, model, classes, size, size, n, 7, &s->m,
				 &err),
		 &err);
	int nt = nn_model_tensor_count(s->m);
	s->segs = calloc((size_t)nt, sizeof(*s->segs));
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *t = nn_model_tensor(s->m, i);
		if (t->kind == NN_TENSOR_RUNNING || t->kind == NN_TENSOR_COUNTER)
			continue;
		s->segs[s->nsegs++] = (nn_optim_segment){
			t->offset, t->count, t->kind == NN_TENSOR_WEIGHT, 1};
	}
	nn_optim_opts o;
	nn_optim_opts_init(&o, NN_OPTIM_SGD);
	o.momentum = 0.9;
	o.nesterov = 1;
	o.weight_decay = 1e-4;
	o.ctx = ctx;
	size_t np;
	nn_model_params(s->m, &np);
	CHECK_OK(nn_optim_create(&o, np, &s->opt, &err), &err);
	size_t xb = (size_t)n * 3 * size * size * sizeof(float);
	s->x = ctx->be->alloc(ctx, xb);
	s->labels = ctx->be->alloc(ctx, (size_t)n * sizeof(int32_t));
	s->dlogits = ctx->be->alloc(ctx, (size_t)n * classes * sizeof(float));
	CHECK(s->x && s->labels && s->dlogits);
}

static void side_close(side *s)
{
	s->ctx->be->free(s->ctx, s->x);
	s->ctx->be->free(s->ctx, s->labels);
	s->ctx->be->free(s->ctx, s->dlogits);
	nn_optim_free(s->opt);
	nn_model_free(s->m);
	free(s->segs);
}

static double side_step(side *s, const float *x, const int32_t *labels,
			int n, int size, int classes, int step)
{
	size_t xb = (size_t)n * 3 * size * size * sizeof(float);
	CHECK_OK(s->ctx->be->to_device(s->ctx, s->x, x, xb, &err), &err);
	CHECK_OK(s->ctx->be->to_device(s->ctx, s->labels, labels,
				       (size_t)n * sizeof(int32_t), &err),
		 &err);
	const float *logits;
	CHECK_OK(nn_model_forward(s->m, s->x, n, 1, (uint64_t)step, &logits,
				  &err),
		 &err);
	double loss = 0;
	CHECK_OK(s->ctx->be->softmax_xent(s->ctx, n, classes, logits, s->labels,
					  0, 1.0f / (float)n, &loss, s->dlogits,
					  &err),
		 &err);
	CHECK_OK(nn_model_backward(s->m, s->dlogits, 0, &err), &err);
	float *p = nn_model_params(s->m, NULL);
	float *g = nn_model_grads(s->m, NULL);
	CHECK_OK(nn_optim_step(s->opt, p, g, s->segs, s->nsegs, 0.01, &err),
		 &err);
	return loss;
}

/* |a - b|_2 over |b|_2 (0 when both are 0) */
static double rel_l2(const float *a, const float *b, const float *base,
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

/* Multiplies every parameter by 1 + u, u uniform in [-eps, eps): a
 * rounding-level difference in every layer, as another summation order
 * makes. */
static void perturb(side *s, double eps)
{
	size_t np;
	float *p = nn_model_params(s->m, &np);
	ims_rng r;
	ims_rng_seed(&r, 99, 1);
	for (size_t i = 0; i < np; i++)
		p[i] *= (float)(1.0 + eps * (2 * ims_rng_uniform(&r) - 1));
}

/*
 * The device's tensors (d_p, d_b on the host) against the CPU's (c) after
 * a step: every update D = weights - init within TOL |D_cpu| or within
 * SPREAD x what a rounding-level perturbation of the CPU run (q) moved
 * it, whichever is larger. Returns the worst ratio of the difference to
 * its bound.
 */
#define SPREAD 4.0
static double check_tensors(const char *model, int step, const side *c,
			    const side *q, const float *d_p, const float *d_b,
			    const float *init, const float *q_init, double tol)
{
	const float *pc = nn_model_params(c->m, NULL);
	const float *bc = nn_model_buffers(c->m, NULL);
	const float *pq = nn_model_params(q->m, NULL);
	const float *bq = nn_model_buffers(q->m, NULL);
	double worst = 0;
	for (int i = 0; i < nn_model_tensor_count(c->m); i++) {
		const nn_tensor_info *t = nn_model_tensor(c->m, i);
		if (t->kind == NN_TENSOR_COUNTER)
			continue;
		const int running = t->kind == NN_TENSOR_RUNNING;
		const float *cv = (running ? bc : pc) + t->offset;
		const float *qv = (running ? bq : pq) + t->offset;
		const float *dv = (running ? d_b : d_p) + t->offset;
		const float *base = running ? NULL : init + t->offset;
		const float *qbase = running ? NULL : q_init + t->offset;
		double norm, spread = 0, diff = rel_l2(dv, cv, base, t->count, &norm);
		for (size_t k = 0; k < t->count; k++) {
			double a = (double)qv[k] - (qbase ? qbase[k] : 0);
			double b = (double)cv[k] - (base ? base[k] : 0);
			spread += (a - b) * (a - b);
		}
		spread = sqrt(spread);
		double bound = fmax(tol * norm, SPREAD * spread) +
			       (running ? 1e-6 : 1e-7) * sqrt((double)t->count);
		if (diff / bound > worst)
			worst = diff / bound;
		if (!(diff <= bound)) {
			printf("%s step %d: %s of %s differs: |gpu - cpu| %.3g, "
			       "|cpu| %.3g, perturbed cpu %.3g from cpu\n",
			       model, step + 1, running ? "value" : "update",
			       t->name, diff, norm, spread);
			CHECK(0);
		}
	}
	return worst;
}

static void train_case(const char *model, double tol, int precision, int cl,
		       int size)
{
	const int n = 4, classes = 10;
	const double loss_tol = precision == NN_PREC_FP32 ? 1e-3 : 2e-2;
	side c, d, q;
	gpu.precision = precision;
	cpu.precision = precision; /* the device is held to the CPU's graph */
	/* channels-last: the CPU's twin (the NCHW bits) the reference */
	cpu.channels_last = gpu.channels_last = cl ? NN_CL_ON : NN_CL_OFF;
	side_open(&c, &cpu, model, n, size, classes);
	side_open(&d, &gpu, model, n, size, classes);
	side_open(&q, &cpu, model, n, size, classes);
	cpu.channels_last = gpu.channels_last = NN_CL_OFF;
	CHECK(nn_model_channels_last(d.m) == cl);
	/* rounding-level for the precision: 1e-6 of fp32's weights, half a
	 * bf16 ulp (2^-9) of the weights a 16-bit run reads */
	perturb(&q, precision == NN_PREC_FP32 ? 1e-6 : 1.0 / 512);
	size_t np, nb;
	float *p0 = nn_model_params(c.m, &np);
	nn_model_buffers(c.m, &nb);
	float *init = malloc(np * sizeof(float));
	float *q_init = malloc(np * sizeof(float));
	memcpy(init, p0, np * sizeof(float));
	memcpy(q_init, nn_model_params(q.m, NULL), np * sizeof(float));
	float *dinit = to_host_copy(nn_model_params(d.m, NULL), np * sizeof(float));
	CHECK(memcmp(init, dinit, np * sizeof(float)) == 0); /* same seed */
	size_t per = (size_t)3 * size * size;
	float *x = nn_test_alloc((size_t)n * per);
	int32_t labels[4];
	float *pg = NULL, *bg = NULL;
	for (int step = 0; step < 3; step++) {
		nn_test_fill(x, (size_t)n * per, 300 + (uint64_t)step, -1, 1);
		for (int i = 0; i < n; i++)
			labels[i] = (step * 7 + i * 3) % classes;
		double lc = side_step(&c, x, labels, n, size, classes, step);
		double lg = side_step(&d, x, labels, n, size, classes, step);
		double lq = side_step(&q, x, labels, n, size, classes, step);
		free(pg);
		free(bg);
		pg = to_host_copy(nn_model_params(d.m, NULL), np * sizeof(float));
		bg = to_host_copy(nn_model_buffers(d.m, NULL), nb * sizeof(float));
		double worst = check_tensors(model, step, &c, &q, pg, bg, init,
					     q_init, tol);
		printf("%s (gpu precision %d%s) step %d: loss cpu %.6f gpu %.6f "
		       "perturbed cpu %.6f; worst tensor at %.3g of its bound\n",
		       model, precision, cl ? ", channels-last" : "", step + 1,
		       lc, lg, lq, worst);
		/* resnet18 in 16 bits: the loss of step 1 only (the forward
		 * graph); later ones depend on weights the tensor checks
		 * above already bound, and one perturbed run does not
		 * measure how far bf16 rounding throws them (step 3 moved 8%
		 * on an H200 where the perturbed CPU moved 1.5%) */
		if (precision == NN_PREC_FP32 || step == 0 ||
		    strcmp(model, "resnet18"))
			CHECK(fabs(lc - lg) <= fmax(loss_tol * fabs(lc),
						    SPREAD * fabs(lc - lq)) +
						       1e-5);
	}
	side_close(&q);
	free(q_init);

	/* a checkpoint from the GPU resumes on the CPU with the GPU's bits */
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s.safetensors", dir, model);
	const char *meta[] = {"model", model, NULL};
	CHECK_OK(nn_checkpoint_save(path, d.m, d.opt, meta, &err), &err);
	side h;
	side_open(&h, &cpu, model, n, size, classes);
	CHECK_OK(nn_checkpoint_load_resume(path, h.m, h.opt, NULL, &err), &err);
	CHECK(memcmp(nn_model_params(h.m, NULL), pg, np * sizeof(float)) == 0);
	CHECK(memcmp(nn_model_buffers(h.m, NULL), bg, nb * sizeof(float)) == 0);
	float *mom = to_host_copy(nn_optim_state(d.opt, 0), np * sizeof(float));
	CHECK(memcmp(nn_optim_state(h.opt, 0), mom, np * sizeof(float)) == 0);
	CHECK_EQ_U64((uint64_t)nn_optim_step_count(h.opt), 3);
	/* and back onto the GPU (to_device staging) */
	side_close(&d);
	side_open(&d, &gpu, model, n, size, classes);
	CHECK_OK(nn_checkpoint_load_resume(path, d.m, d.opt, NULL, &err), &err);
	float *again = to_host_copy(nn_model_params(d.m, NULL), np * sizeof(float));
	CHECK(memcmp(again, pg, np * sizeof(float)) == 0);
	unlink(path);
	free(again);
	free(mom);
	side_close(&h);
	side_close(&c);
	side_close(&d);
	free(init);
	free(dinit);
	free(pg);
	free(bg);
	free(x);
	gpu.precision = NN_PREC_FP32;
	cpu.precision = NN_PREC_FP32;
}

/* ---- the memory plan on the device ----------------------------------------- */

static void plan_case(const char *model)
{
	const int n = 4, size = 32, classes = 10;
	side a, b;
	gpu.memory_plan = NN_MEMPLAN_OFF;
	side_open(&a, &gpu, model, n, size, classes);
	gpu.memory_plan = NN_MEMPLAN_POISON;
	side_open(&b, &gpu, model, n, size, classes);
	gpu.memory_plan = NN_MEMPLAN_ON;
	size_t np, nb;
	nn_model_params(a.m, &np);
	nn_model_buffers(a.m, &nb);
	size_t per = (size_t)3 * size * size;
	float *x = nn_test_alloc((size_t)n * per);
	int32_t labels[4];
	for (int step = 0; step < 3; step++) {
		nn_test_fill(x, (size_t)n * per, 400 + (uint64_t)step, -1, 1);
		for (int i = 0; i < n; i++)
			labels[i] = (step * 5 + i) % classes;
		double la = side_step(&a, x, labels, n, size, classes, step);
		double lb = side_step(&b, x, labels, n, size, classes, step);
		CHECK(memcmp(&la, &lb, sizeof(la)) == 0);
	}
	float *pa = to_host_copy(nn_model_params(a.m, NULL), np * sizeof(float));
	float *pb = to_host_copy(nn_model_params(b.m, NULL), np * sizeof(float));
	float *ba = to_host_copy(nn_model_buffers(a.m, NULL), nb * sizeof(float));
	float *bb = to_host_copy(nn_model_buffers(b.m, NULL), nb * sizeof(float));
	CHECK(memcmp(pa, pb, np * sizeof(float)) == 0);
	CHECK(memcmp(ba, bb, nb * sizeof(float)) == 0);
	nn_model_memory ma, mb;
	nn_model_memory_info(a.m, &ma);
	nn_model_memory_info(b.m, &mb);
	printf("%s on the device: activations %zu bytes planned, %zu unplanned\n",
	       model, mb.activation_bytes, ma.activation_bytes);
	CHECK(mb.activation_bytes < ma.activation_bytes);
	free(pa);
	free(pb);
	free(ba);
	free(bb);
	free(x);
	side_close(&a);
	side_close(&b);
}

/* ---- fp16 loss scaling ------------------------------------------------------ */

/* |a - b|_2 <= tol |b|_2 */
static int near_l2(const float *a, const float *b, size_t n, double tol,
		   double *ratio)
{
	double norm;
	double diff = rel_l2(a, b, NULL, n, &norm);
	*ratio = norm > 0 ? diff / norm : diff;
	return diff <= tol * norm;
}

/* One step as the trainer takes it in fp16: loss gradient times S,
 * backward, unscale and check, then apply or skip. Returns whether it
 * applied. */
static int fp16_step(side *s, nn_loss_scale *ls, const float *x,
		     const int32_t *labels, int n, int size, int classes,
		     int step, int inject)
{
	size_t np;
	float *g = nn_model_grads(s->m, &np);
	float *p = nn_model_params(s->m, NULL);
	size_t xb = (size_t)n * 3 * size * size * sizeof(float);
	CHECK_OK(gpu.be->to_device(&gpu, s->x, x, xb, &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, s->labels, labels,
				   (size_t)n * sizeof(int32_t), &err),
		 &err);
	const float *logits;
	CHECK_OK(nn_model_forward(s->m, s->x, n, 1, (uint64_t)step, &logits,
				  &err),
		 &err);
	double loss = 0;
	const float scale = nn_loss_scale_value(ls);
	CHECK_OK(gpu.be->softmax_xent(&gpu, n, classes, logits, s->labels, 0,
				      scale / (float)n, &loss, s->dlogits, &err),
		 &err);
	CHECK_OK(nn_model_backward(s->m, s->dlogits, 0, &err), &err);
	if (inject) {
		/* into the last gradient backward writes: the block's last
		 * float is padding, where an Inf would outlive this step */
		const float inf = INFINITY;
		CHECK_OK(gpu.be->to_device(&gpu, g + nn_model_last_grad(s->m), &inf,
					   sizeof(inf), &err),
			 &err);
	}
	int found = -1;
	CHECK_OK(nn_unscale_check(&gpu, g, np, 1.0f / scale, &found, &err), &err);
	CHECK_EQ_INT(found, inject);
	if (!nn_loss_scale_update(ls, found))
		return 0;
	CHECK_OK(nn_optim_step(s->opt, p, g, s->segs, s->nsegs, 0.01, &err),
		 &err);
	return 1;
}

static void test_fp16_scaling(void)
{
	const int n = 4, size = 32, classes = 10;
	side c, d;
	gpu.precision = NN_PREC_FP16;
	cpu.precision = NN_PREC_FP16;
	side_open(&c, &cpu, "convnet7", n, size, classes);
	side_open(&d, &gpu, "convnet7", n, size, classes);
	size_t np;
	nn_model_params(d.m, &np);
	nn_loss_scale ls;
	nn_loss_scale_init(&ls, 1);
	ls.scale = 1024.0f;
	size_t per = (size_t)3 * size * size;
	float *x = nn_test_alloc((size_t)n * per);
	int32_t labels[4];
	for (int step = 0; step < 3; step++) {
		nn_test_fill(x, (size_t)n * per, 500 + (uint64_t)step, -1, 1);
		for (int i = 0; i < n; i++)
			labels[i] = (step * 5 + i * 3) % classes;
		float *p0 = to_host_copy(nn_model_params(d.m, NULL),
					 np * sizeof(float));
		float *m0 = to_host_copy(nn_optim_state(d.opt, 0),
					 np * sizeof(float));
		int64_t count0 = nn_optim_step_count(d.opt);
		int applied = fp16_step(&d, &ls, x, labels, n, size, classes,
					step, step == 1);
		if (step == 0) {
			/* the unscaled gradients against the CPU's fp16 ones */
			side_step(&c, x, labels, n, size, classes, step);
			float *gg = to_host_copy(nn_model_grads(d.m, NULL),
						 np * sizeof(float));
			double ratio;
			CHECK(near_l2(gg, nn_model_grads(c.m, NULL), np, TOL_BF16,
				      &ratio));
			printf("fp16 step 1: gradients %.3g relative from the "
			       "cpu's fp16\n",
			       ratio);
			free(gg);
		}
		CHECK_EQ_INT(applied, step != 1);
		float *p1 = to_host_copy(nn_model_params(d.m, NULL),
					 np * sizeof(float));
		float *m1 = to_host_copy(nn_optim_state(d.opt, 0),
					 np * sizeof(float));
		if (step == 1) {
			/* skipped: the same bits, S halved, one skip counted */
			CHECK(memcmp(p0, p1, np * sizeof(float)) == 0);
			CHECK(memcmp(m0, m1, np * sizeof(float)) == 0);
			CHECK_EQ_U64((uint64_t)nn_optim_step_count(d.opt),
				     (uint64_t)count0);
			CHECK(nn_loss_scale_value(&ls) == 512.0f);
			CHECK_EQ_U64(ls.skipped, 1);
		} else {
			CHECK(memcmp(p0, p1, np * sizeof(float)) != 0);
			CHECK_EQ_U64((uint64_t)nn_optim_step_count(d.opt),
				     (uint64_t)count0 + 1);
		}
		for (size_t i = 0; i < np; i++)
			if (!isfinite(p1[i])) {
				printf("fp16 step %d: parameter %zu is %g\n",
				       step + 1, i, (double)p1[i]);
				CHECK(0);
				break;
			}
		free(p0), free(p1), free(m0), free(m1);
	}
	CHECK(nn_loss_scale_value(&ls) == 512.0f);
	side_close(&c);
	side_close(&d);
	free(x);
	gpu.precision = NN_PREC_FP32;
	cpu.precision = NN_PREC_FP32;
}

/* --channels-last auto: on for a device in 16 bits, and in fp32 with
 * TF32; off without TF32, and on the CPU (the twin's "device"). */
static void layout_auto_case(void)
{
	const int dev = !strcmp(gpu.be->name, "cuda");
	static const struct {
		int precision, tf32, want;
	} cases[] = {
		{NN_PREC_BF16, 0, 1},
		{NN_PREC_FP32, 1, 1},
		{NN_PREC_FP32, 0, 0},
	};
	const int tf32 = gpu.tf32, precision = gpu.precision;
	gpu.channels_last = NN_CL_AUTO;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		nn_model *m = NULL;
		gpu.precision = cases[i].precision;
		gpu.tf32 = cases[i].tf32;
		CHECK_OK(nn_model_create(&gpu, "resnet18", 10, 32, 32, 2, 7, &m,
					 &err),
			 &err);
		CHECK_EQ_INT(nn_model_channels_last(m), dev && cases[i].want);
		nn_model_free(m);
	}
	gpu.channels_last = NN_CL_OFF;
	gpu.tf32 = tf32;
	gpu.precision = precision;
}

int main(int argc, char **argv)
{
	CHECK_OK(nn_ctx_init_cpu(&cpu, 2, &err), &err);
	if (argc > 1 && !strcmp(argv[1], "--cpu")) {
		/* the CPU twin CI runs: the same scenarios with a second CPU
		 * context (one thread) in the device's place */
		CHECK_OK(nn_ctx_init_cpu(&gpu, 1, &err), &err);
	} else {
		/* skipped only on a machine without a GPU (gpu_test.h) */
		int rc = gpu_test_open(&gpu, 0, &err);
		if (rc) {
			nn_ctx_release(&cpu);
			return rc;
		}
	}
	/* parity: fp32 products, the same algorithms every run */
	gpu.tf32 = 0;
	gpu.conv_algo = NN_ALGO_DETERMINISTIC;
	test_tmpdir(dir, sizeof(dir), "train-cuda");
	test_optim();
	train_case("convnet7", 2e-3, NN_PREC_FP32, 0, 32);
	train_case("resnet18", 5e-3, NN_PREC_FP32, 0, 32);
	train_case("convnet7", TOL_BF16, NN_PREC_BF16, 0, 32);
	train_case("resnet18", TOL_BF16, NN_PREC_BF16, 1, 64);
	layout_auto_case();
	plan_case("convnet7");
	plan_case("resnet18");
	test_fp16_scaling();
	rmdir(dir);
	nn_ctx_release(&gpu);
	nn_ctx_release(&cpu);
	return TEST_EXIT();
}
