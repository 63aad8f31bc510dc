/*
 * model_build.c - the builders models.c writes architectures with: each
 * appends a node (and its named tensors, in torchvision's registration
 * order) to the model's graph, checking shapes as it goes; the first
 * error is kept in the model and later builders do nothing. Once the
 * graph is whole, nn_b_layout settles its activations' layout.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/model_internal.h"

/* ---- building ------------------------------------------------------------ */

static int grow(void **p, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return 0;
	int n = *cap ? *cap * 2 : 64;
	while (n < need)
		n *= 2;
	void *q = realloc(*p, (size_t)n * elem);
	if (!q)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}

static int build_fail(nn_model *m, int code, const char *fmt, const char *a)
{
	if (!m->graph.build_rc)
		m->graph.build_rc = ims_fail(m->graph.build_err, code, fmt, a);
	return -1;
}

static int new_node(nn_model *m, nn_op op, int in0)
{
	nn_graph *g = &m->graph;
	if (g->build_rc)
		return -1;
	if (in0 < -1 || in0 >= g->n_nodes)
		return build_fail(m, IMS_EINVAL, "cannot build %s: bad node", m->name);
	if (grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1,
		 sizeof(nn_node)))
		return build_fail(m, IMS_ENOMEM, "cannot build %s: out of memory",
				  m->name);
	nn_node *nd = &g->nodes[g->n_nodes];
	memset(nd, 0, sizeof(*nd));
	nd->op = op;
	nd->in0 = in0;
	nd->in1 = -1;
	nd->wt = nd->bt = nd->rm = nd->rv = nd->nbt = -1;
	if (in0 < 0) {
		nd->c = 3;
		nd->h = m->in_h;
		nd->w = m->in_w;
	} else {
		nd->c = g->nodes[in0].c;
		nd->h = g->nodes[in0].h;
		nd->w = g->nodes[in0].w;
	}
	return g->n_nodes++;
}

static int new_tensor(nn_model *m, const char *prefix, const char *suffix,
		      nn_tensor_kind kind, int ndim, const int64_t *shape,
		      nn_init init, int fan_in, int fan_out)
{
	nn_graph *g = &m->graph;
	if (g->build_rc)
		return -1;
	int n = g->n_tensors;
	if (grow((void **)&g->tensors, &g->cap_tensors, n + 1,
		 sizeof(nn_tensor_info)))
		return build_fail(m, IMS_ENOMEM, "cannot build %s: out of memory",
				  m->name);
	/* the side arrays follow the tensor array's capacity */
	void *a = realloc(g->inits, (size_t)g->cap_tensors * sizeof(nn_init));
	if (a)
		g->inits = a;
	void *b = realloc(g->fan_in, (size_t)g->cap_tensors * sizeof(int));
	if (b)
		g->fan_in = b;
	void *c = realloc(g->fan_out, (size_t)g->cap_tensors * sizeof(int));
	if (c)
		g->fan_out = c;
	size_t len = strlen(prefix) + strlen(suffix) + 2;
	char *name = malloc(len);
	if (!a || !b || !c || !name) {
		free(name);
		return build_fail(m, IMS_ENOMEM, "cannot build %s: out of memory",
				  m->name);
	}
	snprintf(name, len, "%s.%s", prefix, suffix);
	nn_tensor_info *t = &g->tensors[n];
	memset(t, 0, sizeof(*t));
	t->name = name;
	t->kind = kind;
	t->ndim = ndim;
	t->count = 1;
	for (int i = 0; i < ndim; i++) {
		t->shape[i] = shape[i];
		t->count *= (size_t)shape[i];
	}
	switch (kind) {
	case NN_TENSOR_RUNNING:
		t->offset = m->store.n_buffers;
		m->store.n_buffers += t->count;
		break;
	case NN_TENSOR_COUNTER:
		t->offset = m->store.n_counters;
		m->store.n_counters += t->count;
		break;
	default:
		/* 16-float alignment keeps every tensor on its own cache
		 * lines; the padding is never read. */
		t->offset = m->store.n_params;
		m->store.n_params += (t->count + 15) & ~(size_t)15;
		break;
	}
	g->inits[n] = init;
	g->fan_in[n] = fan_in;
	g->fan_out[n] = fan_out;
	g->n_tensors++;
	return n;
}

int nn_b_conv(nn_model *m, const char *name, int in, int c_out, int k,
	      int stride, int pad, int bias, nn_init winit)
{
	nn_graph *g = &m->graph;
	int id = new_node(m, NN_OP_CONV, in);
	if (id < 0)
		return -1;
	nn_node *nd = &g->nodes[id];
	if (nn_conv_desc_init(&nd->conv, m->max_batch, nd->c, nd->h, nd->w,
			      c_out, k, stride, pad, 1, 1, bias, g->build_err) < 0) {
		g->build_rc = g->build_err->code;
		ims_fail_context(g->build_err, "cannot build %s: layer '%s'",
				 m->name, name);
		return -1;
	}
	int64_t ws[4] = {c_out, nd->c, k, k};
	int fan_in = nd->c * k * k, fan_out = c_out * k * k;
	g->macs += (double)c_out * nd->conv.h_out * nd->conv.w_out * fan_in;
	nd->wt = new_tensor(m, name, "weight", NN_TENSOR_WEIGHT, 4, ws, winit,
			    fan_in, fan_out);
	if (bias) {
		int64_t bs[1] = {c_out};
		nd->bt = new_tensor(m, name, "bias", NN_TENSOR_BIAS, 1, bs,
				    winit == NN_INIT_UNIFORM_FAN_IN
					    ? NN_INIT_UNIFORM_FAN_IN
					    : NN_INIT_ZERO,
				    fan_in, fan_out);
	}
	nd->c = c_out;
	nd->h = nd->conv.h_out;
	nd->w = nd->conv.w_out;
	return g->build_rc ? -1 : id;
}

int nn_b_bn(nn_model *m, const char *name, int in)
{
	int id = new_node(m, NN_OP_BN, in);
	if (id < 0)
		return -1;
	nn_node *nd = &m->graph.nodes[id];
	nd->bn.n = m->max_batch;
	nd->bn.c = nd->c;
	nd->bn.h = nd->h;
	nd->bn.w = nd->w;
	nd->bn.eps = 1e-5f;
	nd->bn.momentum = 0.1f;
	int64_t s[1] = {nd->c};
	nd->wt = new_tensor(m, name, "weight", NN_TENSOR_NORM, 1, s,
			    NN_INIT_ONE, 0, 0);
	nd->bt = new_tensor(m, name, "bias", NN_TENSOR_NORM, 1, s,
			    NN_INIT_ZERO, 0, 0);
	nd->rm = new_tensor(m, name, "running_mean", NN_TENSOR_RUNNING, 1, s,
			    NN_INIT_ZERO, 0, 0);
	nd->rv = new_tensor(m, name, "running_var", NN_TENSOR_RUNNING, 1, s,
			    NN_INIT_ONE, 0, 0);
	nd->nbt = new_tensor(m, name, "num_batches_tracked", NN_TENSOR_COUNTER,
			     0, NULL, NN_INIT_ZERO, 0, 0);
	return m->graph.build_rc ? -1 : id;
}

int nn_b_relu(nn_model *m, int in)
{
	return new_node(m, NN_OP_RELU, in);
}

int nn_b_maxpool(nn_model *m, int in, int k, int stride, int pad)
{
	nn_graph *g = &m->graph;
	int id = new_node(m, NN_OP_MAXPOOL, in);
	if (id < 0)
		return -1;
	nn_node *nd = &g->nodes[id];
	if (nn_pool_desc_init(&nd->pool, m->max_batch, nd->c, nd->h, nd->w, k,
			      stride, pad, g->build_err) < 0) {
		g->build_rc = g->build_err->code;
		ims_fail_context(g->build_err, "cannot build %s for %dx%d inputs",
				 m->name, m->in_w, m->in_h);
		return -1;
	}
	nd->h = nd->pool.h_out;
	nd->w = nd->pool.w_out;
	return id;
}

int nn_b_adaptive_avgpool(nn_model *m, int in, int h, int w)
{
	nn_graph *g = &m->graph;
	int id = new_node(m, NN_OP_AVGPOOL, in);
	if (id < 0)
		return -1;
	nn_node *nd = &g->nodes[id];
	if (nn_pool_desc_init_adaptive(&nd->pool, m->max_batch, nd->c, nd->h,
				       nd->w, h, w, g->build_err) < 0) {
		g->build_rc = g->build_err->code;
		ims_fail_context(g->build_err, "cannot build %s", m->name);
		return -1;
	}
	nd->h = h;
	nd->w = w;
	return id;
}

int nn_b_flatten(nn_model *m, int in)
{
	int id = new_node(m, NN_OP_FLATTEN, in);
	if (id < 0)
		return -1;
	nn_node *nd = &m->graph.nodes[id];
	nd->c = nd->c * nd->h * nd->w;
	nd->h = nd->w = 1;
	return id;
}

int nn_b_linear(nn_model *m, const char *name, int in, int out,
		nn_init winit, nn_init binit)
{
	int id = new_node(m, NN_OP_LINEAR, in);
	if (id < 0)
		return -1;
	nn_node *nd = &m->graph.nodes[id];
	if (nd->h != 1 || nd->w != 1)
		return build_fail(m, IMS_EINVAL,
				  "cannot build layer '%s': input is not flat", name);
	nd->lin.n = m->max_batch;
	nd->lin.in = nd->c;
	nd->lin.out = out;
	nd->lin.bias = 1;
	m->graph.macs += (double)nd->c * out;
	int64_t ws[2] = {out, nd->c}, bs[1] = {out};
	nd->wt = new_tensor(m, name, "weight", NN_TENSOR_WEIGHT, 2, ws, winit,
			    nd->c, out);
	nd->bt = new_tensor(m, name, "bias", NN_TENSOR_BIAS, 1, bs, binit,
			    nd->c, out);
	nd->c = out;
	return m->graph.build_rc ? -1 : id;
}

int nn_b_dropout(nn_model *m, int in, float p)
{
	int id = new_node(m, NN_OP_DROPOUT, in);
	if (id >= 0)
		m->graph.nodes[id].drop_p = p;
	return id;
}

int nn_b_add(nn_model *m, int a, int b)
{
	int id = new_node(m, NN_OP_ADD, a);
	if (id < 0)
		return -1;
	nn_node *nd = &m->graph.nodes[id];
	if (b < 0 || b >= id || m->graph.nodes[b].c != nd->c ||
	    m->graph.nodes[b].h != nd->h || m->graph.nodes[b].w != nd->w)
		return build_fail(m, IMS_EINVAL,
				  "cannot build %s: residual shapes differ", m->name);
	nd->in1 = b;
	return id;
}

/*
 * ctx->channels_last, resolved for this model: with it on, every
 * convolution, batch norm and pooling descriptor says nhwc. A model whose
 * classifier flattens a map wider than 1x1 (vgg16's 512x7x7) reads it in
 * NCHW order through its linear weights, so it stays NCHW. NN_CL_AUTO
 * turns it on only on a device (the CPU gains nothing from it) in 16
 * bits, or in fp32 with TF32 (resnet50 on an H100: 1.35x NCHW's images/s;
 * fp32 without TF32 has no tensor cores to feed and is not measured);
 * NN_CL_ON, in any precision, fails where it cannot be.
 */
int nn_b_layout(nn_model *m, ims_error *err)
{
	const int want = m->ctx->channels_last;
	RETURN_IF(want != NN_CL_OFF && want != NN_CL_ON && want != NN_CL_AUTO,
		  err, IMS_EINVAL, "cannot build %s: channels-last setting %d",
		  m->name, want);
	if (want == NN_CL_OFF)
		return 0;
	char why[160] = "";
	for (int i = 0; i < m->graph.n_nodes && !why[0]; i++) {
		const nn_node *nd = &m->graph.nodes[i];
		if (nd->op != NN_OP_FLATTEN)
			continue;
		const nn_node *src = &m->graph.nodes[nd->in0];
		if (src->h * src->w > 1)
			snprintf(why, sizeof(why),
				 "its classifier reads a %dx%dx%d map in NCHW "
				 "order",
				 src->c, src->h, src->w);
	}
	if (want == NN_CL_AUTO)
		if (why[0] || strcmp(m->ctx->be->name, "cuda") ||
		    (m->form.precision == NN_PREC_FP32 && !m->ctx->tf32))
			return 0;
	RETURN_IF(why[0], err, IMS_EUNSUPPORTED,
		  "cannot build %s channels-last: %s", m->name, why);
	m->form.channels_last = 1;
	for (int i = 0; i < m->graph.n_nodes; i++) {
		nn_node *nd = &m->graph.nodes[i];
		nd->conv.nhwc = nd->op == NN_OP_CONV;
		nd->bn.nhwc = nd->op == NN_OP_BN;
		nd->pool.nhwc = nd->op == NN_OP_MAXPOOL || nd->op == NN_OP_AVGPOOL;
	}
	return 0;
}
