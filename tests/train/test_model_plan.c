/*
 * test_model_plan.c - the activation memory plan (train/model_plan.c):
 *   - a planned model trains bit for bit as an unplanned one (every
 *     output and gradient its own bytes): losses, gradients, weights,
 *     running statistics, counters and evaluation logits after a few SGD
 *     steps of each model, with a short last batch, frozen batch norm and
 *     a head-only backward; also with every dead buffer poisoned with
 *     NaN, so a read past a planned lifetime cannot go unseen;
 *   - poisoning does catch a lifetime cut short;
 *   - no two buffers live at one step share a byte, in every plan of
 *     every model;
 *   - what the plan promises: ReLU and add in place, batch norm's input
 *     kept for its backward and nothing more, gradients handed on,
 *     evaluation without gradients, a head-only plan keeping only the
 *     head's input;
 *   - the device memory a model allocates for its activations, counted
 *     through the backend table, within a budget per image;
 *   - nn_model_set_use and its refusals.
 *
 * Run with "vgg16" for VGG-16 alone (138 M parameters: a slow test).
 */
#include <math.h>
#include <string.h>

#include "nn_test_util.h"
#include "test.h"
#include "train/model_internal.h"

#define STEPS 3
#define CLASSES 5

typedef struct result {
	double loss[STEPS];
	float *params, *grads, *buffers, *eval;
	size_t np, nb, ne;
	int64_t counters[256];
	size_t nc;
} result;

static void result_free(result *r)
{
	free(r->params);
	free(r->grads);
	free(r->buffers);
	free(r->eval);
	memset(r, 0, sizeof(*r));
}

static float *copy_of(const float *p, size_t n)
{
	float *q = nn_test_alloc(n);
	memcpy(q, p, n * sizeof(float));
	return q;
}

typedef struct run_opts {
	const char *model;
	int hw, batch;
	int kind;      /* NN_MEMPLAN_* */
	int use;       /* nn_model_use */
	int frozen_bn;
	int tamper;    /* cut the first batch norm input's life short */
} run_opts;

/*
 * STEPS training steps of SGD (momentum 0.9, weight decay 1e-4) on fixed
 * random batches, the last one short by one sample, then an evaluation
 * forward. Everything comparable goes into *res.
 */
static int run(const run_opts *o, result *res)
{
	memset(res, 0, sizeof(*res));
	ims_error err;
	nn_ctx ctx;
	CHECK_OK(nn_ctx_init_cpu(&ctx, 2, &err), &err);
	ctx.memory_plan = o->kind;
	nn_model *m = NULL;
	int rc = nn_model_create(&ctx, o->model, CLASSES, o->hw, o->hw, o->batch,
				 11, &m, &err);
	CHECK_OK(rc, &err);
	if (rc) {
		nn_ctx_release(&ctx);
		return rc;
	}
	nn_model_freeze_bn(m, o->frozen_bn);
	if (o->use != NN_USE_TRAIN)
		CHECK_OK(nn_model_set_use(m, o->use, &err), &err);
	if (o->tamper) {
		/* the first batch norm's input dies right after its forward:
		 * backward then reads NaN */
		nn_plan *p = &m->mem.plans[NN_MODE_TRAIN];
		for (int j = 0; j < m->graph.n_nodes; j++)
			if (m->graph.nodes[j].op == NN_OP_BN) {
				int g = p->group[m->graph.nodes[j].in0 * NN_V_KINDS +
						 NN_V_ACT];
				p->bufs[g].last = j;
				break;
			}
	}
	const int head_only = o->use == NN_USE_TRAIN_HEAD;
	nn_optim_opts oo;
	nn_optim_opts_init(&oo, NN_OPTIM_SGD);
	oo.momentum = 0.9;
	oo.weight_decay = 1e-4;
	oo.threads = 2;
	nn_optim *opt = NULL;
	size_t np;
	float *p = nn_model_params(m, &np);
	CHECK_OK(nn_optim_create(&oo, np, &opt, &err), &err);
	const size_t in_floats = (size_t)o->batch * 3 * o->hw * o->hw;
	float *x = nn_test_alloc(in_floats);
	float *dl = nn_test_alloc((size_t)o->batch * CLASSES);
	int32_t labels[64];
	for (int i = 0; i < o->batch && i < 64; i++)
		labels[i] = (i * 3 + 1) % CLASSES;
	for (int s = 0; s < STEPS && !rc; s++) {
		const int n = s == STEPS - 1 ? o->batch - 1 : o->batch;
		nn_test_fill(x, in_floats, 100 + (uint64_t)s, -2, 2);
		const float *logits;
		rc = nn_model_forward(m, x, n, 1, 7 + (uint64_t)s, &logits, &err);
		if (!rc)
			rc = ctx.be->softmax_xent(&ctx, n, CLASSES, logits, labels, 0,
						  1.0f / (float)n, &res->loss[s], dl, &err);
		if (!rc)
			rc = nn_model_backward(m, dl, head_only, &err);
		if (!rc && s == STEPS - 1)
			res->grads = copy_of(nn_model_grads(m, NULL), np);
		if (!rc)
			rc = nn_optim_step(opt, p, nn_model_grads(m, NULL), NULL, 0,
					   0.05, &err);
	}
	if (!o->tamper)
		CHECK_OK(rc, &err);
	if (!rc) {
		const float *logits;
		nn_test_fill(x, in_floats, 200, -2, 2);
		CHECK_OK(nn_model_forward(m, x, o->batch, 0, 0, &logits, &err), &err);
		res->ne = (size_t)o->batch * CLASSES;
		res->eval = copy_of(logits, res->ne);
		res->params = copy_of(p, np);
		res->np = np;
		float *b = nn_model_buffers(m, &res->nb);
		res->buffers = copy_of(b, res->nb);
		int64_t *c = nn_model_counters(m, &res->nc);
		CHECK(res->nc <= 256);
		memcpy(res->counters, c, (res->nc < 256 ? res->nc : 256) * sizeof(int64_t));
	}
	free(x);
	free(dl);
	nn_optim_free(opt);
	nn_model_free(m);
	nn_ctx_release(&ctx);
	return rc;
}

static int same_floats(const char *what, const char *name, const float *a,
		       const float *b, size_t n)
{
	if (!a || !b)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float))) {
			fprintf(stderr, "%s %s: %s[%zu] %.9g vs %.9g\n", name, what,
				"element", i, (double)a[i], (double)b[i]);
			return 0;
		}
	return 1;
}

/* Bits of everything a run produced, against the unplanned run's. */
static void same_result(const char *name, const result *a, const result *b)
{
	for (int s = 0; s < STEPS; s++) {
		CHECK(memcmp(&a->loss[s], &b->loss[s], sizeof(double)) == 0);
		if (memcmp(&a->loss[s], &b->loss[s], sizeof(double)))
			fprintf(stderr, "%s: step %d loss %.17g vs %.17g\n", name, s,
				a->loss[s], b->loss[s]);
	}
	CHECK(a->np == b->np && a->nb == b->nb && a->nc == b->nc &&
	      a->ne == b->ne);
	CHECK(same_floats("gradients", name, a->grads, b->grads, a->np));
	CHECK(same_floats("weights", name, a->params, b->params, a->np));
	CHECK(same_floats("running statistics", name, a->buffers, b->buffers, a->nb));
	CHECK(same_floats("evaluation logits", name, a->eval, b->eval, a->ne));
	CHECK(memcmp(a->counters, b->counters, a->nc * sizeof(int64_t)) == 0);
}

static void planned_equals_unplanned(const char *model, int hw, int batch,
				     int frozen, int use, int poison_only)
{
	char name[96];
	snprintf(name, sizeof(name), "%s %dpx%s%s", model, hw,
		 frozen ? " frozen-bn" : "",
		 use == NN_USE_TRAIN_HEAD ? " head-only" : "");
	run_opts o = {model, hw, batch, NN_MEMPLAN_OFF, use, frozen, 0};
	result off, on;
	if (run(&o, &off))
		return;
	/* the losses moved: the runs are not vacuous */
	CHECK(isfinite(off.loss[0]) && off.loss[0] > 0);
	if (!poison_only) {
		o.kind = NN_MEMPLAN_ON;
		if (!run(&o, &on)) {
			same_result(name, &on, &off);
			result_free(&on);
		}
	}
	o.kind = NN_MEMPLAN_POISON;
	if (!run(&o, &on)) {
		same_result(name, &on, &off);
		result_free(&on);
	}
	result_free(&off);
}

/* A lifetime cut short is caught: the poisoned run's gradients are NaN. */
static void poison_catches(void)
{
	run_opts o = {"convnet7", 16, 4, NN_MEMPLAN_POISON, NN_USE_TRAIN, 0, 1};
	result r;
	run(&o, &r);
	int nan = 0;
	for (size_t i = 0; r.grads && i < r.np; i++)
		nan |= isnan(r.grads[i]);
	CHECK(r.grads != NULL && nan);
	result_free(&r);
}

/* ---- the plans' shape ------------------------------------------------------ */

static int grp(const nn_model *m, nn_plan_mode mode, int node, int kind)
{
	return m->mem.plans[mode].group[node * NN_V_KINDS + kind];
}

static const nn_mp_buf *bufof(const nn_model *m, nn_plan_mode mode, int node,
			      int kind)
{
	int g = grp(m, mode, node, kind);
	return g < 0 ? NULL : &m->mem.plans[mode].bufs[g];
}

/* Readers of node i's output, through flatten. */
static int consumers(const nn_model *m, int i)
{
	int c = 0;
	for (int j = 0; j < m->graph.n_nodes; j++) {
		const nn_node *nd = &m->graph.nodes[j];
		if (nd->op == NN_OP_FLATTEN)
			continue;
		c += nn_node_owner(m, nd->in0) == i;
		c += nd->op == NN_OP_ADD && nn_node_owner(m, nd->in1) == i;
	}
	return c;
}

static void plan_shape(const char *model, int hw)
{
	ims_error err;
	nn_ctx ctx;
	CHECK_OK(nn_ctx_init_cpu(&ctx, 1, &err), &err);
	nn_model *m = NULL;
	CHECK_OK(nn_model_create(&ctx, model, CLASSES, hw, hw, 2, 1, &m, &err), &err);
	if (!m) {
		nn_ctx_release(&ctx);
		return;
	}
	const int N = m->graph.n_nodes;
	const int last = N - 1;
	const int head_in = nn_node_owner(m, m->graph.nodes[last].in0);
	int relus = 0, adds = 0, bns = 0;
	for (int mode = 0; mode < NN_MODES; mode++) {
		const nn_plan *p = &m->mem.plans[mode];
		int i = -1, j = -1;
		CHECK_EQ_INT(nn_mp_find_overlap(p->bufs, p->n_bufs, &i, &j), 0);
		CHECK(p->bytes <= m->mem.arena_bytes);
		for (int g = 0; g < p->n_bufs; g++)
			CHECK(p->bufs[g].last < p->steps);
	}
	for (int j = 0; j < N; j++) {
		const nn_node *nd = &m->graph.nodes[j];
		if (nd->op == NN_OP_FLATTEN)
			continue;
		const int in = nn_node_owner(m, nd->in0);
		/* evaluation: no gradients, no saved statistics, every output
		 * but the logits dead by the end of the forward */
		CHECK_EQ_INT(grp(m, NN_MODE_EVAL, j, NN_V_GRAD), -1);
		CHECK_EQ_INT(grp(m, NN_MODE_EVAL, j, NN_V_STATS), -1);
		const nn_mp_buf *e = bufof(m, NN_MODE_EVAL, j, NN_V_ACT);
		const int eg = grp(m, NN_MODE_EVAL, j, NN_V_ACT);
		CHECK(e && (eg == grp(m, NN_MODE_EVAL, last, NN_V_ACT) || e->last < N));
		/* head-only: the head's input and the logits live into
		 * backward, nothing else; one gradient */
		const nn_mp_buf *h = bufof(m, NN_MODE_HEAD, j, NN_V_ACT);
		const int hg = grp(m, NN_MODE_HEAD, j, NN_V_ACT);
		CHECK(h && (hg == grp(m, NN_MODE_HEAD, last, NN_V_ACT) ||
			    hg == grp(m, NN_MODE_HEAD, head_in, NN_V_ACT) ||
			    h->last < N));
		CHECK((grp(m, NN_MODE_HEAD, j, NN_V_GRAD) >= 0) == (j == last));
		/* training: gradients live from their first writer, the last
		 * consumer's backward (step 2N - consumer), to their own */
		const nn_mp_buf *g = bufof(m, NN_MODE_TRAIN, j, NN_V_GRAD);
		CHECK(g && g->last >= 2 * N - j);
		if (nd->op == NN_OP_RELU && in >= 0 && consumers(m, in) == 1 &&
		    m->graph.nodes[in].op != NN_OP_RELU) {
			relus++;
			for (int mode = 0; mode < NN_MODES; mode++)
				CHECK_EQ_INT(grp(m, mode, j, NN_V_ACT),
					     grp(m, mode, in, NN_V_ACT));
			/* backward in place too */
			CHECK_EQ_INT(grp(m, NN_MODE_TRAIN, j, NN_V_GRAD),
				     grp(m, NN_MODE_TRAIN, in, NN_V_GRAD));
		}
		if (nd->op == NN_OP_ADD) {
			adds++;
			CHECK_EQ_INT(grp(m, NN_MODE_TRAIN, j, NN_V_ACT),
				     grp(m, NN_MODE_TRAIN, in, NN_V_ACT));
			CHECK_EQ_INT(grp(m, NN_MODE_TRAIN, j, NN_V_GRAD),
				     grp(m, NN_MODE_TRAIN, in, NN_V_GRAD));
			/* a shortcut's batch norm output is not kept past the
			 * add: backward needs it nowhere */
			int b = nn_node_owner(m, nd->in1);
			if (m->graph.nodes[b].op == NN_OP_BN)
				CHECK_EQ_INT(bufof(m, NN_MODE_TRAIN, b, NN_V_ACT)->last, j);
		}
		if (nd->op == NN_OP_BN) {
			bns++;
			/* its input kept for its backward, its statistics too */
			CHECK(bufof(m, NN_MODE_TRAIN, in, NN_V_ACT)->last >= 2 * N - j);
			CHECK_EQ_INT(bufof(m, NN_MODE_TRAIN, j, NN_V_STATS)->last,
				     2 * N - j);
			CHECK_EQ_U64(bufof(m, NN_MODE_TRAIN, j, NN_V_STATS)->bytes,
				     2 * nd->c * sizeof(float));
		}
	}
	if (!strcmp(model, "vgg16"))
		CHECK_EQ_INT(relus, 15); /* 13 after convolutions, 2 after linears */
	else if (!strcmp(model, "resnet50"))
		CHECK(relus == 49 && adds == 16 && bns == 53);
	else if (!strcmp(model, "resnet18"))
		CHECK(relus == 17 && adds == 8 && bns == 20);
	else
		CHECK(relus == 6 && bns == 5);
	nn_model_memory mi;
	nn_model_memory_info(m, &mi);
	CHECK_EQ_U64(mi.activation_bytes, mi.train_bytes);
	CHECK(mi.eval_bytes < mi.train_bytes && mi.head_bytes < mi.train_bytes);
	CHECK(mi.train_bytes < mi.unplanned_bytes / 2);
	CHECK_EQ_INT(mi.max_batch, 2);
	nn_model_free(m);
	nn_ctx_release(&ctx);
}

/* ---- uses ------------------------------------------------------------------ */

static void uses(void)
{
	ims_error err;
	nn_ctx ctx;
	CHECK_OK(nn_ctx_init_cpu(&ctx, 1, &err), &err);
	nn_model *m = NULL;
	CHECK_OK(nn_model_create(&ctx, "resnet18", CLASSES, 32, 32, 4, 1, &m, &err),
		 &err);
	if (!m) {
		nn_ctx_release(&ctx);
		return;
	}
	float *x = nn_test_alloc(4 * 3 * 32 * 32), *r = nn_test_alloc(4 * CLASSES);
	nn_test_fill(x, 4 * 3 * 32 * 32, 1, -1, 1);
	nn_test_fill(r, 4 * CLASSES, 2, -1, 1);
	const float *logits;
	nn_model_memory mi;
	nn_model_memory_info(m, &mi);
	const size_t train = mi.train_bytes;

	CHECK_OK(nn_model_set_use(m, NN_USE_EVAL, &err), &err);
	nn_model_memory_info(m, &mi);
	CHECK_EQ_U64(mi.activation_bytes, mi.eval_bytes);
	CHECK_EQ_INT(mi.use, NN_USE_EVAL);
	CHECK_EQ_INT(nn_model_forward(m, x, 4, 1, 0, &logits, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "evaluation only") != NULL);
	CHECK_OK(nn_model_forward(m, x, 4, 0, 0, &logits, &err), &err);
	CHECK_EQ_INT(nn_model_backward(m, r, 0, &err), IMS_EINVAL);

	CHECK_OK(nn_model_set_use(m, NN_USE_TRAIN_HEAD, &err), &err);
	nn_model_memory_info(m, &mi);
	CHECK_EQ_U64(mi.activation_bytes, mi.head_bytes);
	CHECK_OK(nn_model_forward(m, x, 4, 1, 0, &logits, &err), &err);
	CHECK_EQ_INT(nn_model_backward(m, r, 0, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "head alone") != NULL);
	CHECK_OK(nn_model_forward(m, x, 4, 1, 0, &logits, &err), &err);
	CHECK_OK(nn_model_backward(m, r, 1, &err), &err);

	/* back to training: the arena grows again, a forward is needed
	 * before a backward */
	CHECK_OK(nn_model_set_use(m, NN_USE_TRAIN, &err), &err);
	nn_model_memory_info(m, &mi);
	CHECK_EQ_U64(mi.activation_bytes, train);
	CHECK_EQ_INT(nn_model_backward(m, r, 0, &err), IMS_EINVAL);
	CHECK_OK(nn_model_forward(m, x, 4, 1, 0, &logits, &err), &err);
	CHECK_OK(nn_model_backward(m, r, 0, &err), &err);
	CHECK_EQ_INT(nn_model_set_use(m, (nn_model_use)7, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "unknown use 7") != NULL);
	free(x);
	free(r);
	nn_model_free(m);

	ctx.memory_plan = 9;
	CHECK_EQ_INT(nn_model_create(&ctx, "convnet7", 3, 16, 16, 2, 1, &m, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "memory plan 9") != NULL);
	nn_ctx_release(&ctx);
}

/* ---- device memory, counted ------------------------------------------------ */

static size_t live_bytes, peak_bytes;

/* The CPU backend's memory with a size header, so frees can be counted. */
static void *count_alloc(nn_ctx *ctx, size_t bytes)
{
	char *p = nn_backend_cpu.alloc(ctx, bytes + 64);
	if (!p)
		return NULL;
	memcpy(p, &bytes, sizeof(bytes));
	live_bytes += bytes;
	peak_bytes = live_bytes > peak_bytes ? live_bytes : peak_bytes;
	return p + 64;
}

static void count_free(nn_ctx *ctx, void *q)
{
	if (!q)
		return;
	char *p = (char *)q - 64;
	size_t bytes;
	memcpy(&bytes, p, sizeof(bytes));
	live_bytes -= bytes;
	nn_backend_cpu.free(ctx, p);
}

/*
 * resnet18 at 112 px, batch 32 (bench/train's case): the device memory a
 * model allocates beyond its parameters, gradients and running statistics
 * is its activations, at most 6 MiB per image (planned: 5.10; every output
 * and gradient its own: 16.1; PyTorch's autograd saves 5.21 for backward,
 * bench/train/README.md).
 * A training step allocates nothing more from the backend.
 */
static void activation_budget(void)
{
	static nn_backend counting;
	counting = nn_backend_cpu;
	counting.alloc = count_alloc;
	counting.free = count_free;
	ims_error err;
	nn_ctx ctx;
	CHECK_OK(nn_ctx_init_cpu(&ctx, 2, &err), &err);
	ctx.be = &counting;
	const int batch = 32, hw = 112;
	nn_model *m = NULL;
	CHECK_OK(nn_model_create(&ctx, "resnet18", 10, hw, hw, batch, 1, &m, &err),
		 &err);
	if (m) {
		size_t np, nb;
		nn_model_params(m, &np);
		nn_model_buffers(m, &nb);
		size_t model = (2 * np + nb) * sizeof(float);
		size_t act = peak_bytes - model;
		double per_image = (double)act / batch / (1 << 20);
		fprintf(stderr, "resnet18 %dpx: %.2f MiB of activations per image\n",
			hw, per_image);
		CHECK(per_image <= 6.0);
		float *x = nn_test_alloc((size_t)batch * 3 * hw * hw);
		float *r = nn_test_alloc((size_t)batch * 10);
		nn_test_fill(x, (size_t)batch * 3 * hw * hw, 1, -1, 1);
		nn_test_fill(r, (size_t)batch * 10, 2, -1, 1);
		const float *logits;
		size_t before = peak_bytes;
		CHECK_OK(nn_model_forward(m, x, batch, 1, 0, &logits, &err), &err);
		CHECK_OK(nn_model_backward(m, r, 0, &err), &err);
		CHECK_EQ_U64(peak_bytes, before);
		free(x);
		free(r);
	}
	nn_model_free(m);
	CHECK_EQ_U64(live_bytes, 0);
	nn_ctx_release(&ctx);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "vgg16")) {
		/* one run at a time: each holds 1.7 GB of weights, gradients
		 * and momentum */
		planned_equals_unplanned("vgg16", 32, 2, 0, NN_USE_TRAIN, 1);
		plan_shape("vgg16", 32);
		return TEST_EXIT();
	}
	planned_equals_unplanned("convnet7", 16, 4, 0, NN_USE_TRAIN, 0);
	planned_equals_unplanned("convnet7", 16, 4, 1, NN_USE_TRAIN, 0);
	planned_equals_unplanned("resnet18", 32, 4, 0, NN_USE_TRAIN, 0);
	planned_equals_unplanned("resnet18", 32, 4, 1, NN_USE_TRAIN, 0);
	planned_equals_unplanned("resnet18", 32, 4, 0, NN_USE_TRAIN_HEAD, 0);
	planned_equals_unplanned("resnet50", 32, 4, 0, NN_USE_TRAIN, 0);
	poison_catches();
	plan_shape("convnet7", 16);
	plan_shape("resnet18", 32);
	plan_shape("resnet50", 32);
	uses();
	activation_budget();
	return TEST_EXIT();
}
