/*
 * model_pass.c - a model's forward and backward passes, the host's share
 * of a replayed one, and their preparation (algorithms and workspaces
 * chosen before the first step).
 *
 * Node outputs, their gradients and what backward reads again live in
 * the arena placed by the memory plan (model_plan.c), bound to the nodes
 * at the start of each forward. All device work goes through ctx->be, so
 * the same graph runs on any backend.
 */
#include <stdio.h>
#include <string.h>

#include "train/model_internal.h"

/* ---- forward and backward ------------------------------------------------ */

static float *tensor_ptr(nn_model *m, float *base, int t)
{
	return t < 0 ? NULL : base + m->graph.tensors[t].offset;
}

/* Convolution and linear weights as the kernels take them: the copy in
 * mixed precision or channels-last. */
static const void *weight_ptr(nn_model *m, int t)
{
	if (t < 0)
		return NULL;
	if (!nn_model_copies(m))
		return m->store.params + m->graph.tensors[t].offset;
	return (const char *)m->form.params16 +
	       m->graph.tensors[t].offset * m->form.act_bytes;
}

const char *const nn_profile_kinds[NN_PROF_KINDS] = {
	"conv", "batchnorm", "relu", "pool", "linear", "add", "dropout", "convert"};

void nn_model_set_profile(nn_model *m, nn_profile *p)
{
	m->hooks.prof = p;
}

static int prof_kind(nn_op op)
{
	switch (op) {
	case NN_OP_CONV:
		return NN_PROF_CONV;
	case NN_OP_BN:
		return NN_PROF_BN;
	case NN_OP_RELU:
		return NN_PROF_RELU;
	case NN_OP_MAXPOOL:
	case NN_OP_AVGPOOL:
		return NN_PROF_POOL;
	case NN_OP_LINEAR:
		return NN_PROF_LINEAR;
	case NN_OP_ADD:
		return NN_PROF_ADD;
	case NN_OP_DROPOUT:
		return NN_PROF_DROPOUT;
	case NN_OP_FLATTEN:
		break;
	}
	return -1;
}

/* Profiling: the clock once the kernels queued so far are done (0 and
 * nothing waited for without a profile). */
static int prof_now(nn_model *m, double *t, ims_error *err)
{
	*t = 0;
	return m->hooks.prof ? nn_ctx_sync_now(m->ctx, t, err) : 0;
}

/* Adds the time since t0 (the kernels since done) to kind's sum. */
static int prof_add(nn_model *m, int kind, int backward, double t0,
		    ims_error *err)
{
	nn_profile *p = m->hooks.prof;
	if (!p || kind < 0)
		return 0;
	double t;
	FORWARD_IF_ERR(prof_now(m, &t, err));
	(backward ? p->backward_s : p->forward_s)[kind] += t - t0;
	return 0;
}

/*
 * The forward pass's copies (nn_model_copies), made once per pass. Mixed
 * precision: the batch rounded into the plan's input buffer, and every
 * parameter rounded into the weight copy (one pass over the contiguous
 * block, so the optimiser's update of the fp32 master weights reaches
 * the next forward, and no layer rounds its weights itself). Channels-
 * last: the batch goes in as N x H x W x 3, and each convolution wider
 * than 1x1 has its copy rewritten c_out x kh x kw x c_in (a 1x1 one is
 * the same either way); in fp32 the copies are the same values.
 */
static int input_copies(nn_model *m, const float *x, int n, ims_error *err)
{
	nn_ctx *ctx = m->ctx;
	const nn_backend *be = ctx->be;
	const nn_node *first = NULL;
	for (int i = 0; i < m->graph.n_nodes && !first; i++)
		if (m->graph.nodes[i].in0 < 0)
			first = &m->graph.nodes[i];
	const size_t hw = (size_t)m->in_h * m->in_w;
	if (first && m->form.channels_last)
		FORWARD_IF_ERR(be->act_from_f32_nhwc(ctx, n, 3, hw, x,
						     m->form.x16, err));
	else if (first)
		FORWARD_IF_ERR(be->act_from_f32(ctx, (size_t)n * 3 * hw, x,
						m->form.x16, err));
	FORWARD_IF_ERR(be->act_from_f32(ctx, m->store.n_params, m->store.params,
					m->form.params16, err));
	for (int i = 0; i < m->graph.n_nodes && m->form.channels_last; i++) {
		const nn_node *nd = &m->graph.nodes[i];
		const nn_conv_desc *d = &nd->conv;
		if (nd->op != NN_OP_CONV || d->kh * d->kw == 1)
			continue;
		FORWARD_IF_ERR(be->act_from_f32_nhwc(
			ctx, d->c_out, d->c_in / d->groups, (size_t)d->kh * d->kw,
			tensor_ptr(m, m->store.params, nd->wt),
			(void *)weight_ptr(m, nd->wt), err));
	}
	return 0;
}

/*
 * 1 when node i is a batch norm or an add whose output the next node, a
 * ReLU, overwrites in place (the plan made them share bytes): that ReLU
 * then runs inside node i's kernels (nn_bn_desc.relu, add_relu_forward)
 * and its own node does nothing. Backward is unchanged: the ReLU's
 * backward reads the same y.
 */
static int relu_fused(const nn_model *m, int i)
{
	if (i < 0 || i + 1 >= m->graph.n_nodes)
		return 0;
	const nn_node *b = &m->graph.nodes[i], *r = &m->graph.nodes[i + 1];
	return (b->op == NN_OP_BN || b->op == NN_OP_ADD) &&
	       r->op == NN_OP_RELU && r->in0 == i && b->y && r->y == b->y;
}

/* A pass (" backward", or "" for forward) runs in the precision the
 * model was built for: its context may not have changed since. */
static int same_precision(const nn_model *m, const char *pass, ims_error *err)
{
	RETURN_IF(m->ctx->precision != m->form.precision, err, IMS_EINVAL,
		  "cannot run %s%s: it was built for precision %d, its context "
		  "now says %d",
		  m->name, pass, m->form.precision, m->ctx->precision);
	return 0;
}

/* The binding of a forward pass that trains or evaluates. */
static nn_plan_mode forward_mode(const nn_model *m, int train)
{
	return !train ? NN_MODE_EVAL
	       : m->mem.use == NN_USE_TRAIN_HEAD ? NN_MODE_HEAD
						 : NN_MODE_TRAIN;
}

/*
 * What a finished forward pass leaves on the host: each batch norm that
 * used batch statistics counts the batch, backward learns which batch it
 * differentiates, and the logits are named. The device's work is not
 * here, so that a replayed recording (nn_model_forward_host) leaves the
 * host exactly as running the pass does.
 */
static void forward_done(nn_model *m, const float *x, int n, int train,
			 const float **logits)
{
	const nn_graph *g = &m->graph;
	for (int i = 0; i < g->n_nodes && train && !m->frozen_bn; i++)
		if (g->nodes[i].op == NN_OP_BN)
			m->store.counters[g->tensors[g->nodes[i].nbt].offset]++;
	m->last.n = n;
	m->last.train = train;
	m->last.x = x;
	*logits = m->form.precision != NN_PREC_FP32
			  ? m->form.logits32
			  : g->nodes[g->n_nodes - 1].y;
}

int nn_model_forward(nn_model *m, const float *x, int n, int train,
		     uint64_t dropout_seed, const float **logits,
		     ims_error *err)
{
	nn_graph *g = &m->graph;
	RETURN_IF(n < 1 || n > m->max_batch, err, IMS_EINVAL,
		  "cannot run %s on a batch of %d: built for 1..%d", m->name,
		  n, m->max_batch);
	RETURN_IF(train && m->mem.use == NN_USE_EVAL, err, IMS_EINVAL,
		  "cannot train %s: its memory is planned for evaluation only",
		  m->name);
	RETURN_IF(!m->mem.arena, err, IMS_ENOMEM,
		  "cannot run %s: its activations could not be allocated", m->name);
	RETURN_IF(m->store.unset, err, IMS_EINVAL,
		  "cannot run %s: its weights were never loaded (made for a load "
		  "of every tensor, which did not happen)", m->name);
	nn_ctx *ctx = m->ctx;
	FORWARD_IF_ERR(same_precision(m, "", err));
	const nn_backend *be = ctx->be;
	const int half = m->form.precision != NN_PREC_FP32;
	const int copies = nn_model_copies(m);
	/* a failed pass leaves nothing for backward to read */
	m->last = (nn_last_pass){0};
	nn_mem_bind(m, forward_mode(m, train));
	double t0;
	FORWARD_IF_ERR(prof_now(m, &t0, err));
	if (copies) {
		FORWARD_IF_ERR(input_copies(m, x, n, err));
		FORWARD_IF_ERR(prof_add(m, NN_PROF_CONVERT, 0, t0, err));
	}
	const void *xin = copies ? m->form.x16 : (const void *)x;
	for (int i = 0; i < g->n_nodes; i++) {
		nn_node *nd = &g->nodes[i];
		FORWARD_IF_ERR(prof_now(m, &t0, err));
		const void *in = nd->in0 < 0 ? xin : g->nodes[nd->in0].y;
		size_t count = (size_t)n * nd->c * nd->h * nd->w;
		/* gamma for batch norm, the weights' 16-bit copy for
		 * convolution and linear layers */
		const void *w = nd->op == NN_OP_BN
					? tensor_ptr(m, m->store.params, nd->wt)
					: weight_ptr(m, nd->wt);
		float *b = tensor_ptr(m, m->store.params, nd->bt);
		switch (nd->op) {
		case NN_OP_CONV: {
			nn_conv_desc d = nd->conv;
			d.n = n;
			FORWARD_IF_ERR(be->conv_forward(ctx, &d, in, w, b, nd->y, err));
			break;
		}
		case NN_OP_BN: {
			nn_bn_desc d = nd->bn;
			d.n = n;
			d.relu = relu_fused(m, i);
			float *rm = tensor_ptr(m, m->store.buffers, nd->rm);
			float *rv = tensor_ptr(m, m->store.buffers, nd->rv);
			if (train && !m->frozen_bn) {
				FORWARD_IF_ERR(be->bn_forward_train(
					ctx, &d, in, w, b, rm, rv, nd->save_mean,
					nd->save_invstd, nd->y, err));
			} else {
				FORWARD_IF_ERR(be->bn_forward_eval(ctx, &d, in, w, b,
								   rm, rv, nd->y, err));
			}
			break;
		}
		case NN_OP_RELU:
			if (!relu_fused(m, i - 1))
				FORWARD_IF_ERR(be->relu_forward(ctx, count, in,
								nd->y, err));
			break;
		case NN_OP_MAXPOOL: {
			nn_pool_desc d = nd->pool;
			d.n = n;
			FORWARD_IF_ERR(be->maxpool_forward(ctx, &d, in, nd->y,
							   nd->argmax, err));
			break;
		}
		case NN_OP_AVGPOOL: {
			nn_pool_desc d = nd->pool;
			d.n = n;
			FORWARD_IF_ERR(be->avgpool_forward(ctx, &d, in, nd->y, err));
			break;
		}
		case NN_OP_LINEAR: {
			nn_linear_desc d = nd->lin;
			d.n = n;
			FORWARD_IF_ERR(be->linear_forward(ctx, &d, in, w, b, nd->y, err));
			break;
		}
		case NN_OP_DROPOUT: {
			/* p = 0 copies: evaluation runs the same node. Masks
			 * follow each sample's place in the global batch, so
			 * ranks do not all drop the same units. */
			const nn_dropout_place at = {count / (size_t)n, m->rank,
						     m->world};
			FORWARD_IF_ERR(be->dropout_forward(
				ctx, count, train ? nd->drop_p : 0.0f,
				ims_hash64(dropout_seed, (uint64_t)i), &at, in,
				nd->y, nd->mask, err));
			break;
		}
		case NN_OP_FLATTEN:
			break;
		case NN_OP_ADD:
			FORWARD_IF_ERR((relu_fused(m, i) ? be->add_relu_forward
							 : be->add_forward)(
				ctx, count, in, g->nodes[nd->in1].y, nd->y, err));
			break;
		}
		FORWARD_IF_ERR(prof_add(m, prof_kind(nd->op), 0, t0, err));
		FORWARD_IF_ERR(nn_mem_poison_after(m, i, err));
	}
	const nn_node *last = &g->nodes[g->n_nodes - 1];
	if (half) {
		/* the loss reads float: the 16-bit logits widened */
		FORWARD_IF_ERR(prof_now(m, &t0, err));
		FORWARD_IF_ERR(be->act_to_f32(ctx, (size_t)n * last->c, last->y,
					      m->form.logits32, err));
		FORWARD_IF_ERR(prof_add(m, NN_PROF_CONVERT, 0, t0, err));
	}
	forward_done(m, x, n, train, logits);
	if (m->hooks.prof)
		m->hooks.prof->forwards++;
	return 0;
}

int nn_model_forward_host(nn_model *m, const float *x, int n, int train,
			  const float **logits, ims_error *err)
{
	RETURN_IF(n < 1 || n > m->max_batch || !m->mem.arena ||
			  (train && m->mem.use == NN_USE_EVAL),
		  err, IMS_EINVAL,
		  "cannot account for a replayed pass of %s on a batch of %d",
		  m->name, n);
	m->last = (nn_last_pass){0};
	nn_mem_bind(m, forward_mode(m, train));
	forward_done(m, x, n, train, logits);
	return 0;
}

void nn_model_set_grad_hook(nn_model *m, nn_grad_ready_fn fn, void *ud)
{
	m->hooks.grad_ready = fn;
	m->hooks.grad_ud = ud;
}

/*
 * Where the final gradients start once nodes i.. have run backward: the
 * end of the highest parameter tensor of the nodes before i (theirs are
 * still to come). Parameters are laid out in node order, so this is node
 * i's own first parameter, but nothing here depends on that.
 */
static size_t grads_ready_from(const nn_graph *g, int i)
{
	size_t end = 0;
	for (int j = 0; j < i; j++) {
		const nn_node *nd = &g->nodes[j];
		const int t[2] = {nd->wt, nd->bt};
		for (int k = 0; k < 2; k++)
			if (t[k] >= 0) {
				size_t e = g->tensors[t[k]].offset + g->tensors[t[k]].count;
				end = e > end ? e : end;
			}
	}
	return end;
}

/*
 * Before a kernel writes a gradient into node i's dy: the first writer in
 * a pass overwrites (ctx->dx_overwrite), later ones add. No-op for the
 * model input (i < 0) and when nothing is written (dx NULL).
 */
static void begin_dx(nn_model *m, int i, const void *dx)
{
	m->ctx->dx_overwrite = 0;
	if (!dx || (i = nn_node_owner(m, i)) < 0)
		return;
	m->ctx->dx_overwrite = !m->graph.nodes[i].dy_set;
	m->graph.nodes[i].dy_set = 1;
}

int nn_model_backward(nn_model *m, const float *dlogits, int head_only,
		      ims_error *err)
{
	nn_graph *g = &m->graph;
	RETURN_IF(!m->last.train || m->last.n < 1, err, IMS_EINVAL,
		  "cannot run %s backward: no training forward pass before it",
		  m->name);
	RETURN_IF(!head_only && m->mem.mode == NN_MODE_HEAD, err, IMS_EINVAL,
		  "cannot run %s backward through every layer: its memory is "
		  "planned for training the head alone",
		  m->name);
	nn_ctx *ctx = m->ctx;
	FORWARD_IF_ERR(same_precision(m, " backward", err));
	const nn_backend *be = ctx->be;
	const int half = m->form.precision != NN_PREC_FP32;
	const int n = m->last.n;
	/* the plan's steps: the loss gradient, then node i at 2N - i */
	const int steps_n = g->n_nodes;
	/* Gradients accumulate into node outputs' gradients (an output can
	 * feed two nodes): the first writer of each overwrites it instead, so
	 * nothing is zeroed first; flatten shares its input's. Parameter
	 * gradients are overwritten by their layer, except a frozen
	 * backbone's, which stay zero. */
	for (int i = 0; i < g->n_nodes; i++)
		g->nodes[i].dy_set = 0;
	if (head_only)
		FORWARD_IF_ERR(be->zero(ctx, m->store.grads,
					m->store.n_params * sizeof(float),
					err));
	nn_node *last = &g->nodes[g->n_nodes - 1];
	begin_dx(m, g->n_nodes - 1, last->dy);
	/* the first writer of the logits' gradient overwrites it; in mixed
	 * precision the float gradient is rounded into it */
	double t_in;
	FORWARD_IF_ERR(prof_now(m, &t_in, err));
	int rc = half ? be->act_from_f32(ctx, (size_t)n * last->c, dlogits,
					 last->dy, err)
		      : be->accumulate(ctx, (size_t)n * last->c, dlogits,
				       last->dy, err);
	ctx->dx_overwrite = 0;
	FORWARD_IF_ERR(rc);
	FORWARD_IF_ERR(prof_add(m, half ? NN_PROF_CONVERT : -1, 1, t_in, err));
	FORWARD_IF_ERR(nn_mem_poison_after(m, steps_n, err));
	for (int i = g->n_nodes - 1; i >= 0; i--) {
		nn_node *nd = &g->nodes[i];
		if (head_only && !nd->head)
			break;
		double t0;
		FORWARD_IF_ERR(prof_now(m, &t0, err));
		if (nd->op != NN_OP_FLATTEN && !g->nodes[nn_node_owner(m, i)].dy_set) {
			/* an output nothing downstream used: its gradient is 0 */
			FORWARD_IF_ERR(be->zero(ctx, nd->dy,
						(size_t)n * nd->c * nd->h * nd->w *
							m->form.act_bytes,
						err));
			g->nodes[nn_node_owner(m, i)].dy_set = 1;
		}
		const nn_node *src = nd->in0 < 0 ? NULL : &g->nodes[nd->in0];
		const void *in = src ? src->y
			       : nn_model_copies(m) ? m->form.x16
						    : (const void *)m->last.x;
		/* no gradient for the model input, nor into a frozen backbone */
		void *dx = src && (!head_only || src->head) ? src->dy : NULL;
		size_t count = (size_t)n * nd->c * nd->h * nd->w;
		const void *w = nd->op == NN_OP_BN
					? tensor_ptr(m, m->store.params, nd->wt)
					: weight_ptr(m, nd->wt);
		float *dw = tensor_ptr(m, m->store.grads, nd->wt);
		float *db = tensor_ptr(m, m->store.grads, nd->bt);
		int rc = 0;
		if (nd->op != NN_OP_FLATTEN)
			begin_dx(m, nd->in0, dx);
		switch (nd->op) {
		case NN_OP_CONV: {
			nn_conv_desc d = nd->conv;
			d.n = n;
			rc = be->conv_backward(ctx, &d, in, w, nd->dy, dx, dw, db, err);
			break;
		}
		case NN_OP_BN: {
			nn_bn_desc d = nd->bn;
			d.n = n;
			if (m->frozen_bn)
				rc = be->bn_backward_frozen(
					ctx, &d, in, w,
					tensor_ptr(m, m->store.buffers, nd->rm),
					tensor_ptr(m, m->store.buffers, nd->rv),
					nd->dy, dx, dw, db, err);
			else
				rc = be->bn_backward(ctx, &d, in, w, nd->save_mean,
						     nd->save_invstd, nd->dy, dx, dw,
						     db, err);
			break;
		}
		case NN_OP_RELU:
			if (dx)
				rc = be->relu_backward(ctx, count, nd->y, nd->dy, dx,
						       err);
			break;
		case NN_OP_MAXPOOL: {
			nn_pool_desc d = nd->pool;
			d.n = n;
			if (dx)
				rc = be->maxpool_backward(ctx, &d, nd->argmax, nd->dy,
							  dx, err);
			break;
		}
		case NN_OP_AVGPOOL: {
			nn_pool_desc d = nd->pool;
			d.n = n;
			if (dx)
				rc = be->avgpool_backward(ctx, &d, nd->dy, dx, err);
			break;
		}
		case NN_OP_LINEAR: {
			nn_linear_desc d = nd->lin;
			d.n = n;
			rc = be->linear_backward(ctx, &d, in, w, nd->dy, dx, dw, db,
						 err);
			break;
		}
		case NN_OP_DROPOUT:
			if (dx)
				rc = be->dropout_backward(ctx, count, nd->drop_p,
							  nd->mask, nd->dy, dx, err);
			break;
		case NN_OP_FLATTEN:
			break;
		case NN_OP_ADD: {
			/* dx == dy: the plan made this gradient the first
			 * input's (model_plan.c), the copy is done */
			if (dx && dx != nd->dy)
				rc = be->accumulate(ctx, count, nd->dy, dx, err);
			const nn_node *src1 = &g->nodes[nd->in1];
			void *dx1 = !head_only || src1->head ? src1->dy : NULL;
			if (!rc && dx1) {
				begin_dx(m, nd->in1, dx1);
				rc = be->accumulate(ctx, count, nd->dy, dx1, err);
			}
			break;
		}
		}
		ctx->dx_overwrite = 0;
		FORWARD_IF_ERR(rc);
		/* the layer's own kernels; the gradient hook's allreduce is
		 * not the layer's */
		FORWARD_IF_ERR(prof_add(m, prof_kind(nd->op), 1, t0, err));
		FORWARD_IF_ERR(nn_mem_poison_after(m, 2 * steps_n - i, err));
		if (m->hooks.grad_ready && (nd->wt >= 0 || nd->bt >= 0))
			FORWARD_IF_ERR(m->hooks.grad_ready(
				m->hooks.grad_ud, grads_ready_from(g, i), err));
	}
	if (m->hooks.prof)
		m->hooks.prof->backwards++;
	return 0;
}

/* ---- plan time ------------------------------------------------------------ */

int nn_model_prepare(nn_model *m, ims_error *err)
{
	nn_graph *g = &m->graph;
	nn_ctx *ctx = m->ctx;
	const nn_backend *be = ctx->be;
	if (!be->conv_prepare)
		return 0;
	RETURN_IF(!m->mem.arena, err, IMS_ENOMEM,
		  "cannot prepare %s: its activations could not be allocated",
		  m->name);
	RETURN_IF(ctx->precision != m->form.precision, err, IMS_EINVAL,
		  "cannot prepare %s: it was built for precision %d, its "
		  "context now says %d",
		  m->name, m->form.precision, ctx->precision);
	/* the buffers of the widest pass the use runs: a convolution's
	 * input, output and both gradients are live together there, so
	 * they are distinct bytes the choice may overwrite */
	const nn_plan_mode mode = m->mem.use == NN_USE_EVAL ? NN_MODE_EVAL
				  : m->mem.use == NN_USE_TRAIN_HEAD
					  ? NN_MODE_HEAD
					  : NN_MODE_TRAIN;
	m->last = (nn_last_pass){0};
	nn_mem_bind(m, mode);
	/* without copies the caller's batch is read, which is not here yet:
	 * a stand-in */
	void *xin = m->form.x16;
	const int stand_in = !nn_model_copies(m);
	if (stand_in) {
		xin = be->alloc(ctx, (size_t)m->max_batch * 3 * m->in_h *
					     m->in_w * sizeof(float));
		RETURN_IF(!xin, err, IMS_ENOMEM,
			  "cannot prepare %s for batches of %d: out of memory",
			  m->name, m->max_batch);
	}
	int rc = 0;
	for (int i = 0; i < g->n_nodes && !rc; i++) {
		nn_node *nd = &g->nodes[i];
		if (nd->op != NN_OP_CONV)
			continue;
		const nn_node *src = nd->in0 < 0 ? NULL : &g->nodes[nd->in0];
		/* backward runs here in this mode: the plan gave it a gradient */
		const int back = nd->dy != NULL;
		rc = be->conv_prepare(ctx, &nd->conv, src ? src->y : xin,
				      weight_ptr(m, nd->wt), nd->y, nd->dy,
				      back && src ? src->dy : NULL,
				      back ? tensor_ptr(m, m->store.grads,
							       nd->wt)
					   : NULL,
				      err);
	}
	if (stand_in)
		be->free(ctx, xin);
	FORWARD_IF_ERR(rc);
	for (int i = 0; i < g->n_nodes && be->bn_prepare; i++) {
		nn_bn_desc d = g->nodes[i].bn;
		d.n = m->max_batch;
		if (g->nodes[i].op == NN_OP_BN)
			FORWARD_IF_ERR(be->bn_prepare(ctx, &d, err));
	}
	if (be->loss_prepare)
		FORWARD_IF_ERR(be->loss_prepare(ctx, m->max_batch, m->classes, err));
	return nn_ctx_freeze_workspace(ctx, err);
}
