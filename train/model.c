/*
 * model.c - a model's storage and initialisation (its graph is built by
 * model_build.c's builders, its passes run in model_pass.c).
 *
 * Storage is four blocks per model (parameters, their gradients, float
 * buffers, int64 counters) so that data parallelism averages gradients in
 * one allreduce and a checkpoint is a walk over the tensor list. Node
 * outputs, their gradients and what backward reads again live in one
 * arena placed by the memory plan (model_plan.c), bound to the nodes at
 * the start of each forward. All device work goes through ctx->be, so the
 * same graph runs on any backend.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model_internal.h"

/* ---- storage and initialisation ----------------------------------------- */

static double normal(ims_rng *r)
{
	/* Box-Muller; 1 - u keeps the log's argument in (0, 1]. */
	double u = 1.0 - ims_rng_uniform(r), v = ims_rng_uniform(r);
	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static int init_weights(nn_model *m, uint64_t seed, ims_error *err)
{
	const nn_graph *g = &m->graph;
	nn_ctx *ctx = m->ctx;
	nn_store *s = &m->store;
	float *hp = calloc(s->n_params ? s->n_params : 1, sizeof(float));
	float *hb = calloc(s->n_buffers ? s->n_buffers : 1, sizeof(float));
	int rc = 0;
	if (!hp || !hb) {
		rc = ims_fail(err, IMS_ENOMEM, "cannot initialise %s: out of memory",
			      m->name);
		goto out;
	}
	for (int i = 0; i < g->n_tensors; i++) {
		const nn_tensor_info *t = &g->tensors[i];
		if (t->kind == NN_TENSOR_COUNTER)
			continue;
		float *v = (t->kind == NN_TENSOR_RUNNING ? hb : hp) + t->offset;
		/* one stream per tensor: a model's tensors do not shift when
		 * another tensor changes size (e.g. the head's class count) */
		ims_rng r;
		ims_rng_seed(&r, seed, ims_hash64(0x696e6974, (uint64_t)i));
		double bound = g->fan_in[i] > 0 ? 1.0 / sqrt(g->fan_in[i]) : 0;
		double sd = g->fan_out[i] > 0 ? sqrt(2.0 / g->fan_out[i]) : 0;
		for (size_t k = 0; k < t->count; k++) {
			switch (g->inits[i]) {
			case NN_INIT_ZERO:
				v[k] = 0;
				break;
			case NN_INIT_ONE:
				v[k] = 1;
				break;
			case NN_INIT_KAIMING_FAN_OUT:
				v[k] = (float)(sd * normal(&r));
				break;
			case NN_INIT_UNIFORM_FAN_IN:
				v[k] = (float)(bound * (2 * ims_rng_uniform(&r) - 1));
				break;
			case NN_INIT_NORMAL_001:
				v[k] = (float)(0.01 * normal(&r));
				break;
			}
		}
	}
	GOTO_IF_ERR(out, rc, ctx->be->to_device(ctx, s->params, hp,
						s->n_params * sizeof(float), err));
	GOTO_IF_ERR(out, rc, ctx->be->to_device(ctx, s->buffers, hb,
						s->n_buffers * sizeof(float), err));
	memset(s->counters, 0, (s->n_counters ? s->n_counters : 1) * sizeof(int64_t));
out:
	free(hp);
	free(hb);
	return rc;
}

static void *dev_alloc(nn_model *m, size_t bytes, int *fail)
{
	void *p = m->ctx->be->alloc(m->ctx, bytes ? bytes : 1);
	if (!p)
		*fail = 1;
	return p;
}

static int allocate(nn_model *m, ims_error *err)
{
	const nn_graph *g = &m->graph;
	int fail = 0;
	nn_store *s = &m->store;
	s->params = dev_alloc(m, s->n_params * sizeof(float), &fail);
	s->grads = dev_alloc(m, s->n_params * sizeof(float), &fail);
	s->buffers = dev_alloc(m, s->n_buffers * sizeof(float), &fail);
	if (nn_model_copies(m))
		m->form.params16 = dev_alloc(m, s->n_params * m->form.act_bytes,
					     &fail);
	if (m->form.precision != NN_PREC_FP32)
		m->form.logits32 = dev_alloc(
			m, (size_t)m->max_batch * m->classes * sizeof(float),
			&fail);
	s->counters = calloc(s->n_counters ? s->n_counters : 1, sizeof(int64_t));
	if (!s->counters)
		fail = 1;
	RETURN_IF(fail, err, IMS_ENOMEM,
		  "cannot allocate %s for batches of %d: out of memory",
		  m->name, m->max_batch);
	/* no architecture flattens the model input itself */
	for (int i = 0; i < g->n_nodes; i++)
		RETURN_IF(g->nodes[i].op == NN_OP_FLATTEN && g->nodes[i].in0 < 0,
			  err, IMS_EINVAL, "cannot build %s: flatten of the input",
			  m->name);
	return nn_mem_create(m, err);
}

int nn_model_channels_last(const nn_model *m)
{
	return m ? m->form.channels_last : 0;
}

const char *const *nn_model_names(void)
{
	return nn_models_known;
}

/* Parameters, buffers and counters 0: for a model whose every tensor a
 * load writes next (nn_model_create_unset). */
static int zero_weights(nn_model *m, ims_error *err)
{
	nn_ctx *ctx = m->ctx;
	nn_store *s = &m->store;
	FORWARD_IF_ERR(ctx->be->zero(ctx, s->params, s->n_params * sizeof(float), err));
	FORWARD_IF_ERR(ctx->be->zero(ctx, s->buffers, s->n_buffers * sizeof(float), err));
	memset(s->counters, 0, (s->n_counters ? s->n_counters : 1) * sizeof(int64_t));
	s->unset = 1;
	return 0;
}

/* A model's fields before its graph is built (NULL when out of memory). */
static nn_model *shell(nn_ctx *ctx, const char *name, int classes, int in_h,
		       int in_w, int max_batch)
{
	nn_model *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->classes = classes;
	m->in_h = in_h;
	m->in_w = in_w;
	m->max_batch = max_batch;
	m->world = 1;
	m->ctx = ctx;
	m->form.precision = ctx->precision;
	m->form.act_bytes = nn_act_bytes(ctx->precision);
	return m;
}

/* The least square input side, up to 512, that name's graph builds for
 * (0 when none, or out of memory): what a build for too small an input
 * tells the user to give. Only graphs are built, no weights. */
static int least_side(nn_ctx *ctx, const char *name, int classes)
{
	for (int side = 1; side <= 512; side++) {
		nn_model *t = shell(ctx, name, classes, side, side, 1);
		if (!t)
			return 0;
		ims_error e;
		t->graph.build_err = &e;
		int rc = nn_models_build(t, name, &e);
		if (!rc)
			rc = t->graph.build_rc;
		t->graph.build_err = NULL;
		nn_model_free(t);
		if (!rc)
			return side;
		if (rc == IMS_ENOMEM)
			return 0;
	}
	return 0;
}

/* draw: 1 to initialise the weights from seed, 0 to leave them 0 and the
 * model unset. */
static int create(nn_ctx *ctx, const char *name, int classes, int in_h,
		  int in_w, int max_batch, int draw, uint64_t seed,
		  nn_model **out, ims_error *err)
{
	RETURN_IF(!ctx || !name || !out, err, IMS_EINVAL,
		  "cannot build a model: missing argument");
	*out = NULL;
	RETURN_IF(classes < 1, err, IMS_EINVAL,
		  "cannot build '%s': %d classes", name, classes);
	RETURN_IF(in_h < 1 || in_w < 1 || in_h > 8192 || in_w > 8192, err,
		  IMS_EINVAL, "cannot build '%s' for %dx%d inputs", name, in_w,
		  in_h);
	RETURN_IF(max_batch < 1 || max_batch > 65536, err, IMS_EINVAL,
		  "cannot build '%s' for batches of %d", name, max_batch);
	RETURN_IF(strlen(name) >= sizeof(((nn_model *)0)->name), err,
		  IMS_EINVAL, "unknown model '%s'", name);
	nn_model *m = shell(ctx, name, classes, in_h, in_w, max_batch);
	RETURN_IF(!m, err, IMS_ENOMEM, "cannot build '%s': out of memory", name);
	if (!m->form.act_bytes) {
		free(m);
		return ims_fail(err, IMS_EINVAL,
				"cannot build '%s': unknown precision %d", name,
				ctx->precision);
	}
	ims_error local;
	m->graph.build_err = err ? err : &local;
	int rc = nn_models_build(m, name, m->graph.build_err);
	if (!rc && m->graph.build_rc)
		rc = m->graph.build_rc;
	if (rc == IMS_EINVAL) {
		/* an input its pooling leaves no pixel of: say what fits */
		const int side = least_side(ctx, name, classes);
		if (side > (in_h < in_w ? in_h : in_w))
			ims_fail(m->graph.build_err, IMS_EINVAL,
				 "cannot build %s for %dx%d inputs: it needs inputs of "
				 "at least %dx%d", name, in_w, in_h, side, side);
	}
	if (!rc) {
		/* The head is the last layer, a linear one: what fine-tuning
		 * re-initialises and --freeze-backbone trains alone. */
		nn_node *last = &m->graph.nodes[m->graph.n_nodes - 1];
		if (last->op != NN_OP_LINEAR)
			rc = ims_fail(m->graph.build_err, IMS_EINVAL,
				      "cannot build %s: it does not end in a linear layer",
				      name);
		else {
			last->head = 1;
			m->graph.tensors[last->wt].head = 1;
			m->graph.tensors[last->bt].head = 1;
		}
	}
	if (!rc)
		rc = nn_b_layout(m, m->graph.build_err);
	if (!rc)
		rc = allocate(m, err);
	if (!rc)
		rc = draw ? init_weights(m, seed, err) : zero_weights(m, err);
	m->graph.build_err = NULL;
	if (rc) {
		nn_model_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

int nn_model_create(nn_ctx *ctx, const char *name, int classes, int in_h,
		    int in_w, int max_batch, uint64_t seed, nn_model **out,
		    ims_error *err)
{
	return create(ctx, name, classes, in_h, in_w, max_batch, 1, seed, out, err);
}

int nn_model_create_unset(nn_ctx *ctx, const char *name, int classes, int in_h,
			  int in_w, int max_batch, nn_model **out, ims_error *err)
{
	return create(ctx, name, classes, in_h, in_w, max_batch, 0, 0, out, err);
}

void nn_model_set_loaded(nn_model *m)
{
	if (m)
		m->store.unset = 0;
}

int nn_model_weights_unset(const nn_model *m)
{
	return m ? m->store.unset : 0;
}

void nn_model_free(nn_model *m)
{
	if (!m)
		return;
	nn_ctx *ctx = m->ctx;
	nn_mem_release(m);
	for (int i = 0; i < m->graph.n_tensors; i++)
		free((char *)m->graph.tensors[i].name);
	ctx->be->free(ctx, m->store.params);
	ctx->be->free(ctx, m->store.grads);
	ctx->be->free(ctx, m->store.buffers);
	ctx->be->free(ctx, m->form.params16);
	ctx->be->free(ctx, m->form.logits32);
	free(m->store.counters);
	free(m->graph.nodes);
	free(m->graph.tensors);
	free(m->graph.inits);
	free(m->graph.fan_in);
	free(m->graph.fan_out);
	free(m);
}

const char *nn_model_name(const nn_model *m) { return m->name; }
void nn_model_freeze_bn(nn_model *m, int on) { m->frozen_bn = on != 0; }

int nn_model_check_train_batch(const nn_model *m, int n, ims_error *err)
{
	const nn_graph *g = &m->graph;
	for (int i = 0; !m->frozen_bn && i < g->n_nodes; i++) {
		const nn_node *d = &g->nodes[i];
		const int64_t hw = (int64_t)d->h * d->w;
		if (d->op != NN_OP_BN || (int64_t)n * hw >= 2)
			continue;
		/* the layer's name: its weight's without ".weight" */
		const char *name = d->wt >= 0 ? g->tensors[d->wt].name : "?";
		const char *dot = strrchr(name, '.');
		const size_t len = dot ? (size_t)(dot - name) : strlen(name);
		return ims_fail(err, IMS_EINVAL,
				"cannot train %s at %dx%d with batches of %d: its "
				"batch norm '%.*s' would see %d value%s per channel "
				"(%dx%d per sample), and training batch norm needs "
				"more than one; use batches of %d or more, a larger "
				"size, or frozen batch norm",
				m->name, m->in_h, m->in_w, n, (int)len, name,
				(int)(n * hw), n * hw == 1 ? "" : "s", d->h, d->w,
				(int)((2 + hw - 1) / hw));
	}
	return 0;
}

int nn_model_set_rank(nn_model *m, int rank, int world, ims_error *err)
{
	RETURN_IF(world < 1 || rank < 0 || rank >= world, err, IMS_EINVAL,
		  "cannot place %s on rank %d of %d", m->name, rank, world);
	m->rank = rank;
	m->world = world;
	return 0;
}
int nn_model_classes(const nn_model *m) { return m->classes; }
int nn_model_input_size(const nn_model *m) { return m->in_h; }
int nn_model_tensor_count(const nn_model *m) { return m->graph.n_tensors; }
double nn_model_macs(const nn_model *m) { return m->graph.macs; }

const nn_tensor_info *nn_model_tensor(const nn_model *m, int i)
{
	return i >= 0 && i < m->graph.n_tensors ? &m->graph.tensors[i] : NULL;
}

int nn_model_find(const nn_model *m, const char *name)
{
	for (int i = 0; i < m->graph.n_tensors; i++)
		if (!strcmp(m->graph.tensors[i].name, name))
			return i;
	return -1;
}

size_t nn_model_last_grad(const nn_model *m)
{
	size_t last = 0;
	for (int i = 0; i < m->graph.n_tensors; i++) {
		const nn_tensor_info *t = &m->graph.tensors[i];
		if (t->kind != NN_TENSOR_RUNNING && t->kind != NN_TENSOR_COUNTER &&
		    t->count && t->offset + t->count - 1 > last)
			last = t->offset + t->count - 1;
	}
	return last;
}

float *nn_model_params(nn_model *m, size_t *count)
{
	if (count)
		*count = m->store.n_params;
	return m->store.params;
}

float *nn_model_grads(nn_model *m, size_t *count)
{
	if (count)
		*count = m->store.n_params;
	return m->store.grads;
}

float *nn_model_buffers(nn_model *m, size_t *count)
{
	if (count)
		*count = m->store.n_buffers;
	return m->store.buffers;
}

const void *nn_model_arena(const nn_model *m) { return m->mem.arena; }

int nn_model_has_dropout(const nn_model *m)
{
	const nn_graph *g = &m->graph;
	for (int i = 0; i < g->n_nodes; i++)
		if (g->nodes[i].op == NN_OP_DROPOUT && g->nodes[i].drop_p > 0)
			return 1;
	return 0;
}

nn_ctx *nn_model_ctx(nn_model *m)
{
	return m->ctx;
}

int64_t *nn_model_counters(nn_model *m, size_t *count)
{
	if (count)
		*count = m->store.n_counters;
	return m->store.counters;
}
