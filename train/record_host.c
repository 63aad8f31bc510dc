/*
 * record_host.c - the CPU twin of a device's recorded passes (CUDA
 * graphs: train/cuda/train_cuda.c's graph entries), for the staged twin
 * (stage_host.c; imshard-train's IMSHARD_TEST_HOST_STAGE), so that
 * train/loop/graphs.c runs on a machine without a GPU and a replayed run
 * is held to the plain CPU loop's bits.
 *
 * It behaves as a capture does:
 *   - between graph_begin and graph_end the entries a pass calls
 *     (convolution, batch norm, ReLU, ..., the conversions and zero) run
 *     nothing: each call is kept with its arguments (descriptors by
 *     value, pointers as given) and ctx->dx_overwrite, which the entries
 *     read when they run;
 *   - any other entry of the table called meanwhile (a copy to or from
 *     the host, an allocation, a free, the loss) fails the recording, as
 *     a wait for the device fails a capture: it returns an error (an
 *     allocation NULL) and graph_end then refuses the recording;
 *   - graph_launch runs the kept calls in order with the CPU backend's
 *     entries, as a replay queues the recorded kernels.
 * What it cannot show: host code of a pass that reads or writes tensors
 * itself, without an entry (the device would read stale memory, here
 * the host reads it at recording time), and the device's own capture
 * rules (which calls it can record). The CPU backend's xent_tally,
 * optimiser and unscale entries are NULL (their callers run host code),
 * so those run as usual outside the recorded passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/host_twin.h"

typedef enum rec_kind {
	R_CONV_F,
	R_CONV_B,
	R_LIN_F,
	R_LIN_B,
	R_BN_F_TRAIN,
	R_BN_F_EVAL,
	R_BN_B,
	R_BN_B_FROZEN,
	R_RELU_F,
	R_RELU_B,
	R_MAXPOOL_F,
	R_MAXPOOL_B,
	R_AVGPOOL_F,
	R_AVGPOOL_B,
	R_DROPOUT_F,
	R_DROPOUT_B,
	R_ADD,
	R_ADD_RELU,
	R_ACCUMULATE,
	R_FROM_F32,
	R_TO_F32,
	R_FROM_F32_NHWC,
	R_ZERO
} rec_kind;

/* One kept call: its descriptor, its pointers in the entry's order, its
 * numbers. */
typedef struct rec_op {
	rec_kind kind;
	int dx_overwrite;
	union {
		nn_conv_desc conv;
		nn_linear_desc lin;
		nn_bn_desc bn;
		nn_pool_desc pool;
	} d;
	void *p[10];
	size_t count;
	int n, c;
	float f;
	uint64_t seed;
	nn_dropout_place at; /* dropout's, by value: the caller's is gone */
	int has_at;
} rec_op;

typedef struct host_rec {
	rec_op *ops;
	size_t n, cap;
	char failed[IMS_ERRMSG_MAX]; /* why the recording fails, "" if not */
} host_rec;

/* A finished recording, the table's graph. */
typedef struct host_graph {
	rec_op *ops;
	size_t n;
} host_graph;

static host_rec *recording(nn_ctx *ctx)
{
	host_twin *t = ctx->dev;
	return t ? t->rec : NULL;
}

/* Keeps a call of kind k; NULL (and the recording failed) when out of
 * memory. */
static rec_op *keep(nn_ctx *ctx, rec_kind k)
{
	host_rec *r = recording(ctx);
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 256;
		rec_op *ops = realloc(r->ops, cap * sizeof(*ops));
		if (!ops) {
			if (!r->failed[0])
				snprintf(r->failed, sizeof(r->failed),
					 "out of memory keeping the recorded calls");
			return NULL;
		}
		r->ops = ops;
		r->cap = cap;
	}
	rec_op *o = &r->ops[r->n++];
	memset(o, 0, sizeof(*o));
	o->kind = k;
	o->dx_overwrite = ctx->dx_overwrite;
	return o;
}

static int kept(const rec_op *o, ims_error *err)
{
	return o ? 0
		 : ims_fail(err, IMS_ENOMEM,
			    "cannot record a pass: out of memory");
}

/* An entry that waits for the device, called while recording. */
static int refuse(nn_ctx *ctx, const char *what, ims_error *err)
{
	host_rec *r = recording(ctx);
	if (!r->failed[0])
		snprintf(r->failed, sizeof(r->failed),
			 "%s while recording (it waits for the device)", what);
	return ims_fail(err, IMS_EIO, "cannot %s while recording a pass", what);
}

#define CPU nn_backend_cpu

/* ---- the entries a pass calls: kept while recording ------------------------ */

static int r_conv_forward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			  const void *w, const float *b, void *y, ims_error *err)
{
	if (!recording(ctx))
		return CPU.conv_forward(ctx, d, x, w, b, y, err);
	rec_op *o = keep(ctx, R_CONV_F);
	if (o) {
		o->d.conv = *d;
		o->p[0] = (void *)x, o->p[1] = (void *)w, o->p[2] = (void *)b;
		o->p[3] = y;
	}
	return kept(o, err);
}

static int r_conv_backward(nn_ctx *ctx, const nn_conv_desc *d, const void *x,
			   const void *w, const void *dy, void *dx, float *dw,
			   float *db, ims_error *err)
{
	if (!recording(ctx))
		return CPU.conv_backward(ctx, d, x, w, dy, dx, dw, db, err);
	rec_op *o = keep(ctx, R_CONV_B);
	if (o) {
		o->d.conv = *d;
		o->p[0] = (void *)x, o->p[1] = (void *)w, o->p[2] = (void *)dy;
		o->p[3] = dx, o->p[4] = dw, o->p[5] = db;
	}
	return kept(o, err);
}

static int r_linear_forward(nn_ctx *ctx, const nn_linear_desc *d,
			    const void *x, const void *w, const float *b,
			    void *y, ims_error *err)
{
	if (!recording(ctx))
		return CPU.linear_forward(ctx, d, x, w, b, y, err);
	rec_op *o = keep(ctx, R_LIN_F);
	if (o) {
		o->d.lin = *d;
		o->p[0] = (void *)x, o->p[1] = (void *)w, o->p[2] = (void *)b;
		o->p[3] = y;
	}
	return kept(o, err);
}

static int r_linear_backward(nn_ctx *ctx, const nn_linear_desc *d,
			     const void *x, const void *w, const void *dy,
			     void *dx, float *dw, float *db, ims_error *err)
{
	if (!recording(ctx))
		return CPU.linear_backward(ctx, d, x, w, dy, dx, dw, db, err);
	rec_op *o = keep(ctx, R_LIN_B);
	if (o) {
		o->d.lin = *d;
		o->p[0] = (void *)x, o->p[1] = (void *)w, o->p[2] = (void *)dy;
		o->p[3] = dx, o->p[4] = dw, o->p[5] = db;
	}
	return kept(o, err);
}

static int r_bn_forward_train(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			      const float *gamma, const float *beta,
			      float *running_mean, float *running_var,
			      float *save_mean, float *save_invstd, void *y,
			      ims_error *err)
{
	if (!recording(ctx))
		return CPU.bn_forward_train(ctx, d, x, gamma, beta, running_mean,
					    running_var, save_mean, save_invstd,
					    y, err);
	rec_op *o = keep(ctx, R_BN_F_TRAIN);
	if (o) {
		o->d.bn = *d;
		o->p[0] = (void *)x, o->p[1] = (void *)gamma;
		o->p[2] = (void *)beta, o->p[3] = running_mean;
		o->p[4] = running_var, o->p[5] = save_mean;
		o->p[6] = save_invstd, o->p[7] = y;
	}
	return kept(o, err);
}

static int r_bn_forward_eval(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			     const float *gamma, const float *beta,
			     const float *running_mean, const float *running_var,
			     void *y, ims_error *err)
{
	if (!recording(ctx))
		return CPU.bn_forward_eval(ctx, d, x, gamma, beta, running_mean,
					   running_var, y, err);
	rec_op *o = keep(ctx, R_BN_F_EVAL);
	if (o) {
		o->d.bn = *d;
		o->p[0] = (void *)x, o->p[1] = (void *)gamma;
		o->p[2] = (void *)beta, o->p[3] = (void *)running_mean;
		o->p[4] = (void *)running_var, o->p[5] = y;
	}
	return kept(o, err);
}

static int r_bn_backward(nn_ctx *ctx, const nn_bn_desc *d, const void *x,
			 const float *gamma, const float *save_mean,
			 const float *save_invstd, const void *dy, void *dx,
			 float *dgamma, float *dbeta, ims_error *err)
{
	if (!recording(ctx))
		return CPU.bn_backward(ctx, d, x, gamma, save_mean, save_invstd,
				       dy, dx, dgamma, dbeta, err);
	rec_op *o = keep(ctx, R_BN_B);
	if (o) {
		o->d.bn = *d;
		o->p[0] = (void *)x, o->p[1] = (void *)gamma;
		o->p[2] = (void *)save_mean, o->p[3] = (void *)save_invstd;
		o->p[4] = (void *)dy, o->p[5] = dx, o->p[6] = dgamma;
		o->p[7] = dbeta;
	}
	return kept(o, err);
}

static int r_bn_backward_frozen(nn_ctx *ctx, const nn_bn_desc *d,
				const void *x, const float *gamma,
				const float *running_mean,
				const float *running_var, const void *dy,
				void *dx, float *dgamma, float *dbeta,
				ims_error *err)
{
	if (!recording(ctx))
		return CPU.bn_backward_frozen(ctx, d, x, gamma, running_mean,
					      running_var, dy, dx, dgamma, dbeta,
					      err);
	rec_op *o = keep(ctx, R_BN_B_FROZEN);
	if (o) {
		o->d.bn = *d;
		o->p[0] = (void *)x, o->p[1] = (void *)gamma;
		o->p[2] = (void *)running_mean, o->p[3] = (void *)running_var;
		o->p[4] = (void *)dy, o->p[5] = dx, o->p[6] = dgamma;
		o->p[7] = dbeta;
	}
	return kept(o, err);
}

/* relu_forward, add_forward and the like: count values, up to three
 * pointers */
static int keep_count(nn_ctx *ctx, rec_kind k, size_t count, const void *a,
		      const void *b, const void *c, ims_error *err)
{
	rec_op *o = keep(ctx, k);
	if (o) {
		o->count = count;
		o->p[0] = (void *)a, o->p[1] = (void *)b, o->p[2] = (void *)c;
	}
	return kept(o, err);
}

static int r_relu_forward(nn_ctx *ctx, size_t count, const void *x, void *y,
			  ims_error *err)
{
	if (!recording(ctx))
		return CPU.relu_forward(ctx, count, x, y, err);
	return keep_count(ctx, R_RELU_F, count, x, y, NULL, err);
}

static int r_relu_backward(nn_ctx *ctx, size_t count, const void *y,
			   const void *dy, void *dx, ims_error *err)
{
	if (!recording(ctx))
		return CPU.relu_backward(ctx, count, y, dy, dx, err);
	return keep_count(ctx, R_RELU_B, count, y, dy, dx, err);
}

static int r_add_forward(nn_ctx *ctx, size_t count, const void *a,
			 const void *b, void *y, ims_error *err)
{
	if (!recording(ctx))
		return CPU.add_forward(ctx, count, a, b, y, err);
	return keep_count(ctx, R_ADD, count, a, b, y, err);
}

static int r_add_relu_forward(nn_ctx *ctx, size_t count, const void *a,
			      const void *b, void *y, ims_error *err)
{
	if (!recording(ctx))
		return CPU.add_relu_forward(ctx, count, a, b, y, err);
	return keep_count(ctx, R_ADD_RELU, count, a, b, y, err);
}

static int r_accumulate(nn_ctx *ctx, size_t count, const void *dy, void *dx,
			ims_error *err)
{
	if (!recording(ctx))
		return CPU.accumulate(ctx, count, dy, dx, err);
	return keep_count(ctx, R_ACCUMULATE, count, dy, dx, NULL, err);
}

static int r_act_from_f32(nn_ctx *ctx, size_t count, const float *src,
			  void *dst, ims_error *err)
{
	if (!recording(ctx))
		return CPU.act_from_f32(ctx, count, src, dst, err);
	return keep_count(ctx, R_FROM_F32, count, src, dst, NULL, err);
}

static int r_act_to_f32(nn_ctx *ctx, size_t count, const void *src,
			float *dst, ims_error *err)
{
	if (!recording(ctx))
		return CPU.act_to_f32(ctx, count, src, dst, err);
	return keep_count(ctx, R_TO_F32, count, src, dst, NULL, err);
}

static int r_zero(nn_ctx *ctx, void *p, size_t bytes, ims_error *err)
{
	if (!recording(ctx))
		return CPU.zero(ctx, p, bytes, err);
	return keep_count(ctx, R_ZERO, bytes, p, NULL, NULL, err);
}

static int r_act_from_f32_nhwc(nn_ctx *ctx, int n, int c, size_t hw,
			       const float *src, void *dst, ims_error *err)
{
	if (!recording(ctx))
		return CPU.act_from_f32_nhwc(ctx, n, c, hw, src, dst, err);
	rec_op *o = keep(ctx, R_FROM_F32_NHWC);
	if (o) {
		o->n = n, o->c = c, o->count = hw;
		o->p[0] = (void *)src, o->p[1] = dst;
	}
	return kept(o, err);
}

static int keep_pool(nn_ctx *ctx, rec_kind k, const nn_pool_desc *d,
		     const void *a, const void *b, const void *c,
		     ims_error *err)
{
	rec_op *o = keep(ctx, k);
	if (o) {
		o->d.pool = *d;
		o->p[0] = (void *)a, o->p[1] = (void *)b, o->p[2] = (void *)c;
	}
	return kept(o, err);
}

static int r_maxpool_forward(nn_ctx *ctx, const nn_pool_desc *d, const void *x,
			     void *y, int32_t *argmax, ims_error *err)
{
	if (!recording(ctx))
		return CPU.maxpool_forward(ctx, d, x, y, argmax, err);
	return keep_pool(ctx, R_MAXPOOL_F, d, x, y, argmax, err);
}

static int r_maxpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			      const int32_t *argmax, const void *dy, void *dx,
			      ims_error *err)
{
	if (!recording(ctx))
		return CPU.maxpool_backward(ctx, d, argmax, dy, dx, err);
	return keep_pool(ctx, R_MAXPOOL_B, d, argmax, dy, dx, err);
}

static int r_avgpool_forward(nn_ctx *ctx, const nn_pool_desc *d, const void *x,
			     void *y, ims_error *err)
{
	if (!recording(ctx))
		return CPU.avgpool_forward(ctx, d, x, y, err);
	return keep_pool(ctx, R_AVGPOOL_F, d, x, y, NULL, err);
}

static int r_avgpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			      const void *dy, void *dx, ims_error *err)
{
	if (!recording(ctx))
		return CPU.avgpool_backward(ctx, d, dy, dx, err);
	return keep_pool(ctx, R_AVGPOOL_B, d, dy, dx, NULL, err);
}

static int r_dropout_forward(nn_ctx *ctx, size_t count, float p, uint64_t seed,
			     const nn_dropout_place *at, const void *x, void *y,
			     uint8_t *mask, ims_error *err)
{
	if (!recording(ctx))
		return CPU.dropout_forward(ctx, count, p, seed, at, x, y, mask,
					   err);
	rec_op *o = keep(ctx, R_DROPOUT_F);
	if (o) {
		o->count = count, o->f = p, o->seed = seed;
		o->has_at = at != NULL;
		if (at)
			o->at = *at;
		o->p[0] = (void *)x, o->p[1] = y, o->p[2] = mask;
	}
	return kept(o, err);
}

static int r_dropout_backward(nn_ctx *ctx, size_t count, float p,
			      const uint8_t *mask, const void *dy, void *dx,
			      ims_error *err)
{
	if (!recording(ctx))
		return CPU.dropout_backward(ctx, count, p, mask, dy, dx, err);
	rec_op *o = keep(ctx, R_DROPOUT_B);
	if (o) {
		o->count = count, o->f = p;
		o->p[0] = (void *)mask, o->p[1] = (void *)dy, o->p[2] = dx;
	}
	return kept(o, err);
}

/* ---- the rest: they wait for the device, and fail a recording ---------------- */

static void *r_alloc(nn_ctx *ctx, size_t bytes)
{
	if (!recording(ctx))
		return CPU.alloc(ctx, bytes);
	ims_error e;
	(void)refuse(ctx, "allocate memory", &e);
	return NULL;
}

static void r_free(nn_ctx *ctx, void *p)
{
	if (recording(ctx) && p) {
		/* freed all the same: a free cannot report */
		ims_error e;
		(void)refuse(ctx, "free memory", &e);
	}
	CPU.free(ctx, p);
}

static int r_to_device(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		       ims_error *err)
{
	if (recording(ctx))
		return refuse(ctx, "copy to the device", err);
	return CPU.to_device(ctx, dst, src, bytes, err);
}

static int r_to_host(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		     ims_error *err)
{
	if (recording(ctx))
		return refuse(ctx, "copy to the host", err);
	return CPU.to_host(ctx, dst, src, bytes, err);
}

static int r_copy(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		  ims_error *err)
{
	if (recording(ctx))
		return refuse(ctx, "copy device memory", err);
	return CPU.copy(ctx, dst, src, bytes, err);
}

static int r_softmax_xent(nn_ctx *ctx, int n, int k, const float *z,
			  const int32_t *labels, float smoothing, float scale,
			  double *loss, float *dz, ims_error *err)
{
	if (recording(ctx))
		return refuse(ctx, "read the loss", err);
	return CPU.softmax_xent(ctx, n, k, z, labels, smoothing, scale, loss, dz,
				err);
}

/* ---- recording, replaying ----------------------------------------------------- */

static int graph_begin(nn_ctx *ctx, ims_error *err)
{
	host_twin *t = ctx->dev;
	RETURN_IF(t->rec, err, IMS_EINVAL,
		  "cannot start recording: a recording is in progress");
	t->rec = calloc(1, sizeof(*t->rec));
	RETURN_IF(!t->rec, err, IMS_ENOMEM, "cannot start recording: out of memory");
	return 0;
}

static void rec_free(host_rec *r)
{
	if (r)
		free(r->ops);
	free(r);
}

static int graph_end(nn_ctx *ctx, int keep_it, void **out, ims_error *err)
{
	host_twin *t = ctx->dev;
	*out = NULL;
	host_rec *r = t->rec;
	RETURN_IF(!r, err, IMS_EINVAL, "cannot end recording: none is in progress");
	t->rec = NULL;
	if (r->failed[0]) {
		int rc = ims_fail(err, IMS_EIO, "cannot record a pass: %s",
				  r->failed);
		rec_free(r);
		return rc;
	}
	host_graph *g = keep_it ? malloc(sizeof(*g)) : NULL;
	if (keep_it && !g) {
		rec_free(r);
		return ims_fail(err, IMS_ENOMEM, "cannot record a pass: out of memory");
	}
	if (g) {
		g->ops = r->ops;
		g->n = r->n;
		r->ops = NULL;
	}
	rec_free(r);
	*out = g;
	return 0;
}

/* One kept call, run with the CPU backend's entry. */
static int run_op(nn_ctx *ctx, const rec_op *o, ims_error *err)
{
	void *const *p = o->p;
	switch (o->kind) {
	case R_CONV_F:
		return CPU.conv_forward(ctx, &o->d.conv, p[0], p[1], p[2], p[3], err);
	case R_CONV_B:
		return CPU.conv_backward(ctx, &o->d.conv, p[0], p[1], p[2], p[3],
					 p[4], p[5], err);
	case R_LIN_F:
		return CPU.linear_forward(ctx, &o->d.lin, p[0], p[1], p[2], p[3], err);
	case R_LIN_B:
		return CPU.linear_backward(ctx, &o->d.lin, p[0], p[1], p[2], p[3],
					   p[4], p[5], err);
	case R_BN_F_TRAIN:
		return CPU.bn_forward_train(ctx, &o->d.bn, p[0], p[1], p[2], p[3],
					    p[4], p[5], p[6], p[7], err);
	case R_BN_F_EVAL:
		return CPU.bn_forward_eval(ctx, &o->d.bn, p[0], p[1], p[2], p[3],
					   p[4], p[5], err);
	case R_BN_B:
		return CPU.bn_backward(ctx, &o->d.bn, p[0], p[1], p[2], p[3], p[4],
				       p[5], p[6], p[7], err);
	case R_BN_B_FROZEN:
		return CPU.bn_backward_frozen(ctx, &o->d.bn, p[0], p[1], p[2], p[3],
					      p[4], p[5], p[6], p[7], err);
	case R_RELU_F:
		return CPU.relu_forward(ctx, o->count, p[0], p[1], err);
	case R_RELU_B:
		return CPU.relu_backward(ctx, o->count, p[0], p[1], p[2], err);
	case R_MAXPOOL_F:
		return CPU.maxpool_forward(ctx, &o->d.pool, p[0], p[1], p[2], err);
	case R_MAXPOOL_B:
		return CPU.maxpool_backward(ctx, &o->d.pool, p[0], p[1], p[2], err);
	case R_AVGPOOL_F:
		return CPU.avgpool_forward(ctx, &o->d.pool, p[0], p[1], err);
	case R_AVGPOOL_B:
		return CPU.avgpool_backward(ctx, &o->d.pool, p[0], p[1], err);
	case R_DROPOUT_F:
		return CPU.dropout_forward(ctx, o->count, o->f, o->seed,
					   o->has_at ? &o->at : NULL, p[0],
					   p[1], p[2], err);
	case R_DROPOUT_B:
		return CPU.dropout_backward(ctx, o->count, o->f, p[0], p[1], p[2],
					    err);
	case R_ADD:
		return CPU.add_forward(ctx, o->count, p[0], p[1], p[2], err);
	case R_ADD_RELU:
		return CPU.add_relu_forward(ctx, o->count, p[0], p[1], p[2], err);
	case R_ACCUMULATE:
		return CPU.accumulate(ctx, o->count, p[0], p[1], err);
	case R_FROM_F32:
		return CPU.act_from_f32(ctx, o->count, p[0], p[1], err);
	case R_TO_F32:
		return CPU.act_to_f32(ctx, o->count, p[0], p[1], err);
	case R_FROM_F32_NHWC:
		return CPU.act_from_f32_nhwc(ctx, o->n, o->c, o->count, p[0], p[1],
					     err);
	case R_ZERO:
		return CPU.zero(ctx, p[0], o->count, err);
	}
	return ims_fail(err, IMS_EINVAL, "cannot replay a recording: call kind %d",
			(int)o->kind);
}

static int graph_launch(nn_ctx *ctx, void *graph, ims_error *err)
{
	const host_graph *g = graph;
	RETURN_IF(recording(ctx), err, IMS_EINVAL,
		  "cannot replay a recording while recording");
	const int keep_overwrite = ctx->dx_overwrite;
	int rc = 0;
	for (size_t i = 0; !rc && i < g->n; i++) {
		ctx->dx_overwrite = g->ops[i].dx_overwrite;
		rc = run_op(ctx, &g->ops[i], err);
	}
	ctx->dx_overwrite = keep_overwrite;
	return rc;
}

static void graph_free(nn_ctx *ctx, void *graph)
{
	(void)ctx;
	host_graph *g = graph;
	if (g)
		free(g->ops);
	free(g);
}

void nn_host_record_release(host_twin *t)
{
	if (t) {
		rec_free(t->rec);
		t->rec = NULL;
	}
}

void nn_host_record_install(nn_backend *b)
{
	b->conv_forward = r_conv_forward;
	b->conv_backward = r_conv_backward;
	b->linear_forward = r_linear_forward;
	b->linear_backward = r_linear_backward;
	b->bn_forward_train = r_bn_forward_train;
	b->bn_forward_eval = r_bn_forward_eval;
	b->bn_backward = r_bn_backward;
	b->bn_backward_frozen = r_bn_backward_frozen;
	b->relu_forward = r_relu_forward;
	b->relu_backward = r_relu_backward;
	b->maxpool_forward = r_maxpool_forward;
	b->maxpool_backward = r_maxpool_backward;
	b->avgpool_forward = r_avgpool_forward;
	b->avgpool_backward = r_avgpool_backward;
	b->dropout_forward = r_dropout_forward;
	b->dropout_backward = r_dropout_backward;
	b->add_forward = r_add_forward;
	b->add_relu_forward = r_add_relu_forward;
	b->accumulate = r_accumulate;
	b->act_from_f32 = r_act_from_f32;
	b->act_to_f32 = r_act_to_f32;
	b->act_from_f32_nhwc = r_act_from_f32_nhwc;
	b->zero = r_zero;
	b->alloc = r_alloc;
	b->free = r_free;
	b->to_device = r_to_device;
	b->to_host = r_to_host;
	b->copy = r_copy;
	b->softmax_xent = r_softmax_xent;
	b->graph_begin = graph_begin;
	b->graph_end = graph_end;
	b->graph_launch = graph_launch;
	b->graph_free = graph_free;
}
