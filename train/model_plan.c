/*
 * model_plan.c - where a model's activations live: a memory plan made
 * once per model and batch size, the same for every backend.
 *
 * Every buffer a pass writes is a value: a node's output (ACT), its
 * gradient (GRAD), max pooling's argmax, dropout's mask, batch norm's
 * saved statistics. Walking the pass as model.c runs it gives each value
 * a lifetime in steps, from its first writer to its last reader:
 *   - a forward output lives until the last forward reader, or until the
 *     backward of the node that needs it again: convolution, linear and
 *     batch norm read their input (x), ReLU its output (as the mask);
 *     add, pooling and dropout read neither, so e.g. a batch norm's
 *     output that only feeds an add dies in forward;
 *   - a gradient lives from the backward of its input's last consumer
 *     (the first writer, which overwrites it) to its producer's backward;
 *   - what a pass never runs has no buffer: evaluation keeps no
 *     gradients and no saved statistics, and a backward that trains the
 *     head alone keeps only what the head reads.
 * Values are then merged where a kernel works in place (it reads x[i]
 * before it writes y[i] at the same index):
 *   - forward ReLU, add and dropout write into their input's buffer when
 *     that input is read by nothing after them (ReLU's own backward then
 *     reads the buffer as its output, which it is);
 *   - backward ReLU writes its input's gradient into its own gradient's
 *     buffer when it is that gradient's first writer (it overwrites);
 *   - add, first writer of its first input's gradient, makes that
 *     gradient its own: the copy model.c would make is skipped
 *     (model.c sees dx == dy).
 * A merge needs the one value's lifetime to end at the step where the
 * other's starts, so at any other step the two are never both live.
 * Groups of merged values get offsets in one arena from nn_mp_assign
 * (greedy by size, train/memplan.c).
 *
 * Nothing of this changes what a kernel computes: the same kernels run
 * in the same order on the same values, so a planned model's results are
 * an unplanned one's bit for bit (tests/train/test_memplan.c).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "train/model_internal.h"

/* Offsets in the arena are multiples of this: cuDNN and vector loads
 * want aligned tensors, and 256 is what cudaMalloc gives. */
#define NN_ARENA_ALIGN 256

#define VAL(node, kind) ((node) * NN_V_KINDS + (kind))

int nn_node_owner(const nn_model *m, int i)
{
	while (i >= 0 && m->graph.nodes[i].op == NN_OP_FLATTEN)
		i = m->graph.nodes[i].in0;
	return i;
}

size_t nn_value_bytes(const nn_model *m, int v)
{
	const nn_node *nd = &m->graph.nodes[v / NN_V_KINDS];
	if (v % NN_V_KINDS == NN_V_INPUT)
		return v / NN_V_KINDS == 0 && nn_model_copies(m)
			       ? (size_t)m->max_batch * 3 * m->in_h * m->in_w *
					 m->form.act_bytes
			       : 0;
	if (nd->op == NN_OP_FLATTEN)
		return 0;
	size_t count = (size_t)m->max_batch * nd->c * nd->h * nd->w;
	switch (v % NN_V_KINDS) {
	case NN_V_ACT:
	case NN_V_GRAD:
		return count * m->form.act_bytes;
	case NN_V_ARGMAX:
		return nd->op == NN_OP_MAXPOOL ? count * sizeof(int32_t) : 0;
	case NN_V_MASK:
		return nd->op == NN_OP_DROPOUT ? count : 0;
	default:
		return nd->op == NN_OP_BN ? 2 * (size_t)nd->c * sizeof(float) : 0;
	}
}

/* ---- lifetimes ------------------------------------------------------------ */

/* Lifetimes of values, then of groups (union-find over values). */
typedef struct lives {
	int n;             /* values */
	int *first, *last; /* per value; first > last: never touched */
	int *parent;       /* union-find */
	int *gfirst, *glast; /* per root: the group's hull */
	size_t *gbytes;      /* per root: the largest member */
} lives;

static void touch(lives *l, int v, int t)
{
	if (t < l->first[v])
		l->first[v] = t;
	if (t > l->last[v])
		l->last[v] = t;
}

static int step_fwd(int j) { return j; }
static int step_loss(int n) { return n; }
static int step_bwd(int n, int j) { return 2 * n - j; }

/* Whether node j's backward runs in this mode, and whether it writes the
 * gradient of its input node `in` (not the owner: as model.c asks). */
static int runs_backward(const nn_model *m, nn_plan_mode mode, int j)
{
	return mode == NN_MODE_TRAIN ||
	       (mode == NN_MODE_HEAD && m->graph.nodes[j].head);
}

static int wants_dx(const nn_model *m, nn_plan_mode mode, int in)
{
	return in >= 0 && (mode == NN_MODE_TRAIN || m->graph.nodes[in].head);
}

/* The model input's 16-bit copy (mixed precision), written before the
 * first forward kernel. */
#define VAL_INPUT VAL(0, NN_V_INPUT)

/* The reads and writes of one pass in mode, as model.c makes them. */
static void walk(const nn_model *m, nn_plan_mode mode, lives *l)
{
	const int n = m->graph.n_nodes;
	const int train = mode != NN_MODE_EVAL;
	touch(l, VAL_INPUT, step_fwd(0));
	for (int j = 0; j < n; j++) {
		const nn_node *nd = &m->graph.nodes[j];
		if (nd->op == NN_OP_FLATTEN)
			continue;
		const int t = step_fwd(j);
		if (nd->in0 >= 0)
			touch(l, VAL(nn_node_owner(m, nd->in0), NN_V_ACT), t);
		else
			touch(l, VAL_INPUT, t);
		if (nd->op == NN_OP_ADD)
			touch(l, VAL(nn_node_owner(m, nd->in1), NN_V_ACT), t);
		touch(l, VAL(j, NN_V_ACT), t);
		if (nd->op == NN_OP_MAXPOOL)
			touch(l, VAL(j, NN_V_ARGMAX), t);
		else if (nd->op == NN_OP_DROPOUT)
			touch(l, VAL(j, NN_V_MASK), t);
		else if (nd->op == NN_OP_BN && train)
			touch(l, VAL(j, NN_V_STATS), t);
	}
	const int last = nn_node_owner(m, n - 1);
	touch(l, VAL(last, NN_V_ACT), train ? step_bwd(n, -1) : step_fwd(n));
	if (!train)
		return;
	touch(l, VAL(last, NN_V_GRAD), step_loss(n));
	for (int j = n - 1; j >= 0; j--) {
		const nn_node *nd = &m->graph.nodes[j];
		if (!runs_backward(m, mode, j))
			break;
		if (nd->op == NN_OP_FLATTEN)
			continue;
		const int t = step_bwd(n, j);
		const int src = nd->in0 >= 0 ? nn_node_owner(m, nd->in0) : -1;
		touch(l, VAL(j, NN_V_GRAD), t);
		switch (nd->op) {
		case NN_OP_CONV:
		case NN_OP_LINEAR:
			touch(l, src >= 0 ? VAL(src, NN_V_ACT) : VAL_INPUT, t);
			break;
		case NN_OP_BN:
			touch(l, src >= 0 ? VAL(src, NN_V_ACT) : VAL_INPUT, t);
			touch(l, VAL(j, NN_V_STATS), t);
			break;
		case NN_OP_RELU:
			touch(l, VAL(j, NN_V_ACT), t);
			break;
		case NN_OP_MAXPOOL:
			touch(l, VAL(j, NN_V_ARGMAX), t);
			break;
		case NN_OP_DROPOUT:
			touch(l, VAL(j, NN_V_MASK), t);
			break;
		default:
			break;
		}
		if (wants_dx(m, mode, nd->in0))
			touch(l, VAL(src, NN_V_GRAD), t);
		if (nd->op == NN_OP_ADD && wants_dx(m, mode, nd->in1))
			touch(l, VAL(nn_node_owner(m, nd->in1), NN_V_GRAD), t);
	}
}

static int root(lives *l, int v)
{
	while (l->parent[v] != v) {
		l->parent[v] = l->parent[l->parent[v]];
		v = l->parent[v];
	}
	return v;
}

/*
 * Lets value v take value u's buffer at step t: u's group is read by
 * nothing after t, v's is written by nothing before it, and v fits.
 * Returns 1 when merged.
 */
static int hand_over(lives *l, int u, int v, int t)
{
	if (l->first[u] > l->last[u] || l->first[v] > l->last[v])
		return 0;
	int ru = root(l, u), rv = root(l, v);
	if (ru == rv || l->glast[ru] != t || l->gfirst[rv] != t ||
	    l->gbytes[rv] > l->gbytes[ru])
		return 0;
	l->parent[rv] = ru;
	l->glast[ru] = l->glast[rv];
	return 1;
}

/* The in-place merges described at the top of the file. */
static void merge_in_place(const nn_model *m, nn_plan_mode mode, lives *l)
{
	const int n = m->graph.n_nodes;
	for (int j = 0; j < n; j++) {
		const nn_node *nd = &m->graph.nodes[j];
		if (nd->op != NN_OP_RELU && nd->op != NN_OP_ADD &&
		    nd->op != NN_OP_DROPOUT)
			continue;
		const int t = step_fwd(j);
		int a = nn_node_owner(m, nd->in0);
		if (a >= 0 && hand_over(l, VAL(a, NN_V_ACT), VAL(j, NN_V_ACT), t))
			continue;
		int b = nd->op == NN_OP_ADD ? nn_node_owner(m, nd->in1) : -1;
		if (b >= 0)
			hand_over(l, VAL(b, NN_V_ACT), VAL(j, NN_V_ACT), t);
	}
	if (mode == NN_MODE_EVAL)
		return;
	for (int j = n - 1; j >= 0 && runs_backward(m, mode, j); j--) {
		const nn_node *nd = &m->graph.nodes[j];
		if ((nd->op != NN_OP_RELU && nd->op != NN_OP_ADD) ||
		    !wants_dx(m, mode, nd->in0))
			continue;
		int a = nn_node_owner(m, nd->in0);
		if (nd->op == NN_OP_ADD && a == nn_node_owner(m, nd->in1))
			continue; /* x + x: both writes go to one gradient */
		hand_over(l, VAL(j, NN_V_GRAD), VAL(a, NN_V_GRAD), step_bwd(n, j));
	}
}

static void lives_free(lives *l)
{
	free(l->first);
	free(l->last);
	free(l->parent);
	free(l->gfirst);
	free(l->glast);
	free(l->gbytes);
}

void nn_plan_release(nn_plan *p);

/*
 * Makes the plan of mode: unplanned (NN_MEMPLAN_OFF) gives every value a
 * training pass writes its own bytes for the whole pass, whatever the
 * mode, as models were allocated before plans.
 */
static int plan_make(const nn_model *m, nn_plan_mode mode, int unplanned,
		     nn_plan *p, ims_error *err)
{
	const nn_graph *g = &m->graph;
	memset(p, 0, sizeof(*p));
	const int nv = g->n_nodes * NN_V_KINDS;
	lives l = {.n = nv};
	l.first = malloc((size_t)nv * sizeof(int));
	l.last = malloc((size_t)nv * sizeof(int));
	l.parent = malloc((size_t)nv * sizeof(int));
	l.gfirst = malloc((size_t)nv * sizeof(int));
	l.glast = malloc((size_t)nv * sizeof(int));
	l.gbytes = malloc((size_t)nv * sizeof(size_t));
	p->group = malloc((size_t)nv * sizeof(int));
	p->bufs = calloc((size_t)nv, sizeof(nn_mp_buf));
	int rc = 0;
	if (!l.first || !l.last || !l.parent || !l.gfirst || !l.glast ||
	    !l.gbytes || !p->group || !p->bufs) {
		rc = ims_fail(err, IMS_ENOMEM, "cannot plan %s's memory: out of memory",
			      m->name);
		goto out;
	}
	for (int v = 0; v < nv; v++) {
		l.first[v] = INT_MAX;
		l.last[v] = -1;
	}
	walk(m, unplanned ? NN_MODE_TRAIN : mode, &l);
	p->steps = (unplanned || mode != NN_MODE_EVAL) ? step_bwd(g->n_nodes, -1) + 1
						       : step_fwd(g->n_nodes) + 1;
	for (int v = 0; v < nv; v++) {
		if (unplanned && l.first[v] <= l.last[v]) {
			l.first[v] = 0;
			l.last[v] = p->steps - 1;
		}
		l.parent[v] = v;
		l.gfirst[v] = l.first[v];
		l.glast[v] = l.last[v];
		l.gbytes[v] = nn_value_bytes(m, v);
	}
	if (!unplanned)
		merge_in_place(m, mode, &l);
	/* groups in order of their roots; p->group first holds each
	 * root's group, then every member's */
	p->n_bufs = 0;
	for (int v = 0; v < nv; v++) {
		p->group[v] = -1;
		if (l.first[v] > l.last[v] || !nn_value_bytes(m, v) ||
		    root(&l, v) != v)
			continue;
		nn_mp_buf *b = &p->bufs[p->n_bufs];
		b->bytes = l.gbytes[v];
		b->first = l.gfirst[v];
		b->last = l.glast[v];
		p->group[v] = p->n_bufs++;
	}
	for (int v = 0; v < nv; v++)
		if (l.first[v] <= l.last[v] && nn_value_bytes(m, v))
			p->group[v] = p->group[root(&l, v)];
	rc = nn_mp_assign(p->bufs, p->n_bufs, NN_ARENA_ALIGN, &p->bytes, err);
out:
	lives_free(&l);
	if (rc)
		nn_plan_release(p);
	return rc;
}

void nn_plan_release(nn_plan *p)
{
	free(p->group);
	free(p->bufs);
	memset(p, 0, sizeof(*p));
}

/* ---- the arena ------------------------------------------------------------ */

/* The modes a use runs: its training pass (if any) and evaluation. */
static size_t use_bytes(const nn_model *m, int use)
{
	const nn_plan *pl = m->mem.plans;
	size_t e = pl[NN_MODE_EVAL].bytes;
	size_t t = use == NN_USE_TRAIN	    ? pl[NN_MODE_TRAIN].bytes
		   : use == NN_USE_TRAIN_HEAD ? pl[NN_MODE_HEAD].bytes
					      : 0;
	return t > e ? t : e;
}

static int poison_range(nn_model *m, size_t offset, size_t bytes,
			ims_error *err)
{
	nn_ctx *ctx = m->ctx;
	char *base = m->mem.arena;
	while (bytes) {
		size_t k = bytes < m->mem.poison_bytes ? bytes : m->mem.poison_bytes;
		FORWARD_IF_ERR(ctx->be->to_device(ctx, base + offset, m->mem.poison,
						  k, err));
		offset += k;
		bytes -= k;
	}
	return 0;
}

static int arena_alloc(nn_model *m, size_t bytes, ims_error *err)
{
	nn_ctx *ctx = m->ctx;
	ctx->be->free(ctx, m->mem.arena);
	m->mem.arena = ctx->be->alloc(ctx, bytes ? bytes : 1);
	m->mem.arena_bytes = m->mem.arena ? bytes : 0;
	RETURN_IF(!m->mem.arena, err, IMS_ENOMEM,
		  "cannot allocate %zu bytes of activations for %s at batch %d: "
		  "out of memory",
		  bytes, m->name, m->max_batch);
	/* a fresh arena reads as dead buffers do, not as zeros */
	if (m->mem.kind == NN_MEMPLAN_POISON)
		FORWARD_IF_ERR(poison_range(m, 0, bytes, err));
	return 0;
}

int nn_mem_create(nn_model *m, ims_error *err)
{
	nn_model_mem *mm = &m->mem;
	mm->kind = m->ctx->memory_plan;
	RETURN_IF(mm->kind < NN_MEMPLAN_ON || mm->kind > NN_MEMPLAN_POISON, err,
		  IMS_EINVAL, "cannot build %s: unknown memory plan %d", m->name,
		  mm->kind);
	mm->use = NN_USE_TRAIN;
	mm->mode = NN_MODE_TRAIN;
	int rc = 0;
	for (int k = 0; k < NN_MODES && !rc; k++)
		rc = plan_make(m, (nn_plan_mode)k, mm->kind == NN_MEMPLAN_OFF,
			       &mm->plans[k], err);
	nn_plan unplanned;
	if (!rc)
		rc = plan_make(m, NN_MODE_TRAIN, 1, &unplanned, err);
	if (!rc) {
		mm->unplanned_bytes = unplanned.bytes;
		nn_plan_release(&unplanned);
	}
	if (!rc && mm->kind == NN_MEMPLAN_POISON) {
		mm->poison_bytes = (size_t)1 << 20;
		mm->poison = malloc(mm->poison_bytes);
		if (!mm->poison)
			rc = ims_fail(err, IMS_ENOMEM, "cannot build %s: out of memory",
				      m->name);
		else
			memset(mm->poison, 0xff, mm->poison_bytes);
	}
	if (!rc)
		rc = arena_alloc(m, use_bytes(m, mm->use), err);
	if (rc)
		nn_mem_release(m);
	else
		nn_mem_bind(m, NN_MODE_TRAIN);
	return rc;
}

void nn_mem_release(nn_model *m)
{
	nn_model_mem *mm = &m->mem;
	for (int k = 0; k < NN_MODES; k++)
		nn_plan_release(&mm->plans[k]);
	if (mm->arena)
		m->ctx->be->free(m->ctx, mm->arena);
	mm->arena = NULL;
	mm->arena_bytes = 0;
	free(mm->poison);
	mm->poison = NULL;
}

static void *value_ptr(const nn_model *m, const nn_plan *p, int v)
{
	int g = p->group[v];
	return g < 0 ? NULL : (char *)m->mem.arena + p->bufs[g].offset;
}

void nn_mem_bind(nn_model *m, nn_plan_mode mode)
{
	const nn_plan *p = &m->mem.plans[mode];
	m->mem.mode = mode;
	for (int j = 0; j < m->graph.n_nodes; j++) {
		nn_node *nd = &m->graph.nodes[j];
		if (nd->op == NN_OP_FLATTEN) {
			/* its input comes first, so is bound already */
			nd->y = m->graph.nodes[nd->in0].y;
			nd->dy = m->graph.nodes[nd->in0].dy;
			continue;
		}
		nd->y = value_ptr(m, p, VAL(j, NN_V_ACT));
		nd->dy = value_ptr(m, p, VAL(j, NN_V_GRAD));
		nd->argmax = value_ptr(m, p, VAL(j, NN_V_ARGMAX));
		nd->mask = value_ptr(m, p, VAL(j, NN_V_MASK));
		nd->save_mean = value_ptr(m, p, VAL(j, NN_V_STATS));
		nd->save_invstd = nd->save_mean ? nd->save_mean + nd->c : NULL;
	}
	m->form.x16 = m->graph.n_nodes ? value_ptr(m, p, VAL_INPUT) : NULL;
}

int nn_mem_poison_after(nn_model *m, int step, ims_error *err)
{
	if (m->mem.kind != NN_MEMPLAN_POISON)
		return 0;
	const nn_plan *p = &m->mem.plans[m->mem.mode];
	for (int g = 0; g < p->n_bufs; g++)
		if (p->bufs[g].last == step)
			FORWARD_IF_ERR(poison_range(m, p->bufs[g].offset,
						    p->bufs[g].bytes, err));
	return 0;
}

/* ---- the public side -------------------------------------------------------- */

int nn_model_set_use(nn_model *m, nn_model_use use, ims_error *err)
{
	RETURN_IF(!m, err, IMS_EINVAL, "cannot plan a model's memory: no model");
	RETURN_IF(use != NN_USE_TRAIN && use != NN_USE_TRAIN_HEAD &&
			  use != NN_USE_EVAL,
		  err, IMS_EINVAL, "cannot plan %s's memory: unknown use %d",
		  m->name, (int)use);
	size_t want = use_bytes(m, use);
	if (want != m->mem.arena_bytes)
		FORWARD_IF_ERR(arena_alloc(m, want, err));
	m->mem.use = use;
	/* nothing bound survives a new arena: the next forward binds */
	m->last = (nn_last_pass){0};
	nn_mem_bind(m, use == NN_USE_EVAL ? NN_MODE_EVAL
			  : use == NN_USE_TRAIN_HEAD ? NN_MODE_HEAD
						     : NN_MODE_TRAIN);
	return 0;
}

void nn_model_memory_info(const nn_model *m, nn_model_memory *out)
{
	memset(out, 0, sizeof(*out));
	out->max_batch = m->max_batch;
	out->use = m->mem.use;
	out->activation_bytes = m->mem.arena_bytes;
	out->activation_bytes_per_image =
		(double)m->mem.arena_bytes / (double)m->max_batch;
	out->train_bytes = m->mem.plans[NN_MODE_TRAIN].bytes;
	out->head_bytes = m->mem.plans[NN_MODE_HEAD].bytes;
	out->eval_bytes = m->mem.plans[NN_MODE_EVAL].bytes;
	out->unplanned_bytes = m->mem.unplanned_bytes;
	out->precision = m->form.precision;
	if (nn_model_copies(m))
		out->weight_copy_bytes = m->store.n_params * m->form.act_bytes;
	if (m->form.precision != NN_PREC_FP32)
		out->weight_copy_bytes += (size_t)m->max_batch * m->classes *
					  sizeof(float);
}
