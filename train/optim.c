/*
 * optim.c - SGD, Adam and AdamW over one contiguous parameter buffer.
 *
 * The per-element code follows torch/optim/sgd.py and adam.py's
 * single-tensor paths (the ones PyTorch takes for CPU tensors) operation by
 * operation, so float rounding happens in the same places: scalars that
 * PyTorch computes in Python are computed here in double and rounded to
 * float where a tensor operation would take them as a float scalar.
 * Everything is element-wise, so splitting a segment across OpenMP threads
 * cannot change a bit.
 *
 * A step's trained segments are cut into batches of runs
 * (nn_optim_runs, nn_internal.h: up to 240 tensors each, so one batch
 * for a resnet50), each walked block by block in one parallel loop here
 * or one kernel launch on a device. With opts.ctx on a device backend
 * the state lives in device memory and each batch is the backend's
 * sgd_update / adam_update (train/cuda/optim.cu, the same per-element
 * operations); the checks, the step count, the per-step scalars and the
 * batches stay here, shared by both.
 */
#include "train/nn_internal.h"
#include "train/optim.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Segments smaller than this are updated by the calling thread alone: a
 * parallel region costs more than a few thousand multiply-adds. */
#define PAR_MIN 32768

struct nn_optim {
	nn_optim_opts o;
	size_t count;
	int64_t steps;
	size_t nstate;
	const char *names[2];
	float *state[2];
	nn_ctx *ctx; /* NULL: host memory and the loops below */
};

/* The context whose kernels update the parameters, or NULL for the host
 * loops (the CPU backend has no update entries). */
static nn_ctx *device_ctx(const nn_optim_opts *o)
{
	return o->ctx && o->ctx->be && o->ctx->be->sgd_update ? o->ctx : NULL;
}

void nn_optim_opts_init(nn_optim_opts *o, int kind)
{
	memset(o, 0, sizeof(*o));
	o->kind = kind;
	o->momentum = 0;
	o->nesterov = 0;
	o->weight_decay = kind == NN_OPTIM_ADAMW ? 0.01 : 0;
	o->beta1 = 0.9;
	o->beta2 = 0.999;
	o->eps = 1e-8;
	o->threads = 0;
}

static int check_opts(const nn_optim_opts *o, ims_error *err)
{
	RETURN_IF(!o, err, IMS_EINVAL, "cannot create an optimiser: no options");
	RETURN_IF(o->kind != NN_OPTIM_SGD && o->kind != NN_OPTIM_ADAM &&
			  o->kind != NN_OPTIM_ADAMW,
		  err, IMS_EINVAL, "cannot create an optimiser: unknown kind %d",
		  o->kind);
	RETURN_IF(!(o->weight_decay >= 0) || !isfinite(o->weight_decay), err,
		  IMS_EINVAL,
		  "cannot create an optimiser: weight decay %g must be a finite number >= 0",
		  o->weight_decay);
	RETURN_IF(o->threads < 0, err, IMS_EINVAL,
		  "cannot create an optimiser: %d threads", o->threads);
	if (o->kind == NN_OPTIM_SGD) {
		RETURN_IF(!(o->momentum >= 0) || !isfinite(o->momentum), err,
			  IMS_EINVAL,
			  "cannot create an optimiser: momentum %g must be a finite number >= 0",
			  o->momentum);
		RETURN_IF(o->nesterov && o->momentum == 0, err, IMS_EINVAL,
			  "cannot create an optimiser: nesterov needs a momentum > 0");
		return 0;
	}
	RETURN_IF(!(o->beta1 >= 0 && o->beta1 < 1), err, IMS_EINVAL,
		  "cannot create an optimiser: beta1 %g is outside [0, 1)", o->beta1);
	RETURN_IF(!(o->beta2 >= 0 && o->beta2 < 1), err, IMS_EINVAL,
		  "cannot create an optimiser: beta2 %g is outside [0, 1)", o->beta2);
	RETURN_IF(!(o->eps >= 0) || !isfinite(o->eps), err, IMS_EINVAL,
		  "cannot create an optimiser: eps %g must be a finite number >= 0",
		  o->eps);
	return 0;
}

int nn_optim_create(const nn_optim_opts *o, size_t count, nn_optim **out,
		    ims_error *err)
{
	*out = NULL;
	FORWARD_IF_ERR(check_opts(o, err));
	RETURN_IF(count > SIZE_MAX / sizeof(float) / 2, err, IMS_ELIMIT,
		  "cannot create an optimiser for %zu parameters: too many", count);
	nn_optim *opt = calloc(1, sizeof(*opt));
	RETURN_IF(!opt, err, IMS_ENOMEM, "cannot create an optimiser: out of memory");
	opt->o = *o;
	opt->count = count;
	opt->ctx = device_ctx(o);
	if (o->kind == NN_OPTIM_SGD && o->momentum > 0) {
		opt->nstate = 1;
		opt->names[0] = "momentum_buffer";
	} else if (o->kind != NN_OPTIM_SGD) {
		opt->nstate = 2;
		opt->names[0] = "exp_avg";
		opt->names[1] = "exp_avg_sq";
	}
	for (size_t i = 0; i < opt->nstate; i++) {
		opt->state[i] = opt->ctx ? opt->ctx->be->alloc(opt->ctx,
							      (count ? count : 1) * sizeof(float))
					 : calloc(count ? count : 1, sizeof(float));
		if (!opt->state[i]) {
			nn_optim_free(opt);
			return ims_fail(err, IMS_ENOMEM,
					"cannot create an optimiser for %zu parameters: out of memory",
					count);
		}
	}
	*out = opt;
	return 0;
}

void nn_optim_free(nn_optim *opt)
{
	if (!opt)
		return;
	for (size_t i = 0; i < opt->nstate; i++) {
		if (opt->ctx)
			opt->ctx->be->free(opt->ctx, opt->state[i]);
		else
			free(opt->state[i]);
	}
	free(opt);
}

/* The elements a batch of runs covers. */
static size_t runs_elements(const nn_optim_runs *r)
{
	size_t n = 0;
	for (uint32_t k = 0; k < r->n; k++)
		n += r->count[k];
	return n;
}

/* sgd.py: grad.add(param, alpha=wd); buf.mul_(momentum).add_(grad) (or
 * clone on the first step); grad.add(buf, alpha=momentum) for Nesterov;
 * param.add_(grad, alpha=-lr). Over a batch of runs, block by block as
 * the device's kernel walks it (wd only in decayed runs). */
static void sgd_run(const nn_optim *opt, float *restrict p,
		    const float *restrict g, float *restrict buf,
		    const nn_optim_runs *r, float wd_decay, float mom, int first,
		    float neg_lr, int nt)
{
	const int nesterov = opt->o.nesterov;
#pragma omp parallel for schedule(static) num_threads(nt) if (runs_elements(r) >= PAR_MIN)
	for (uint32_t blk = 0; blk < r->blocks; blk++) {
		size_t lo, hi;
		const float wd = nn_optim_block(r, blk, &lo, &hi) ? wd_decay : 0;
		for (size_t i = lo; i < hi; i++) {
			float d = g[i];
			if (wd != 0)
				d = d + wd * p[i];
			if (mom != 0) {
				float b = first ? d : buf[i] * mom + d;
				buf[i] = b;
				d = nesterov ? d + mom * b : b;
			}
			p[i] = p[i] + neg_lr * d;
		}
	}
}

/* Adam's per-step scalars (nn_internal.h): computed once per step in
 * double as adam.py does in Python, then rounded where a tensor op takes
 * them. */
typedef nn_adam_scalars adam_scalars;

/* ATen's lerp for float: exact at weight 0 and 1 from either side. */
static inline float lerp(float self, float end, float w)
{
	return fabsf(w) < 0.5f ? self + w * (end - self)
			       : end - (end - self) * (1.0f - w);
}

/* adam.py (single tensor): [AdamW] param.mul_(1 - lr wd); [Adam]
 * grad = grad.add(param, alpha=wd); exp_avg.lerp_(grad, 1 - beta1);
 * exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2);
 * denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps);
 * param.addcdiv_(exp_avg, denom, value=-step_size). l2 and decoupled
 * apply in decayed runs only. */
static void adam_run(float *restrict p, const float *restrict g,
		     float *restrict m, float *restrict v,
		     const nn_optim_runs *r, const adam_scalars *s,
		     float l2_decay, int decoupled_decay, int nt)
{
	const adam_scalars c = *s;
#pragma omp parallel for schedule(static) num_threads(nt) if (runs_elements(r) >= PAR_MIN)
	for (uint32_t blk = 0; blk < r->blocks; blk++) {
		size_t lo, hi;
		const int decay = nn_optim_block(r, blk, &lo, &hi);
		const float l2 = decay ? l2_decay : 0;
		const int decoupled = decay && decoupled_decay;
		for (size_t i = lo; i < hi; i++) {
			float gi = g[i];
			if (decoupled)
				p[i] = p[i] * c.decay_mul;
			if (l2 != 0)
				gi = gi + l2 * p[i];
			float mi = lerp(m[i], gi, c.w1);
			float vi = v[i] * c.beta2 + c.w2 * gi * gi;
			m[i] = mi;
			v[i] = vi;
			float denom = sqrtf(vi) / c.bc2_sqrt + c.eps;
			p[i] = p[i] + c.neg_step * mi / denom;
		}
	}
}

static int check_segments(const nn_optim *opt, const nn_optim_segment *segs,
			  size_t nsegs, ims_error *err)
{
	size_t end = 0;
	for (size_t i = 0; i < nsegs; i++) {
		const nn_optim_segment *s = &segs[i];
		RETURN_IF(s->offset > opt->count || s->count > opt->count - s->offset,
			  err, IMS_EINVAL,
			  "cannot step the optimiser: segment %zu [%zu, +%zu) is past the %zu parameters",
			  i, s->offset, s->count, opt->count);
		RETURN_IF(i > 0 && s->offset < end, err, IMS_EINVAL,
			  "cannot step the optimiser: segment %zu at offset %zu overlaps or precedes segment %zu, which ends at %zu",
			  i, s->offset, i - 1, end);
		end = s->offset + s->count;
		/* nn_optim_runs' offsets are 32-bit */
		RETURN_IF(s->trainable && end > UINT32_MAX, err, IMS_ELIMIT,
			  "cannot step the optimiser: segment %zu ends at parameter %zu, past the 2^32 its updates reach",
			  i, end);
	}
	return 0;
}

/* One batch of runs updated at step t: the backend's one launch on a
 * device, the loops above on the host. */
static int update_runs(nn_optim *opt, float *params, const float *grads,
		       const nn_optim_runs *r, const adam_scalars *sc,
		       int64_t t, double lr, int nt, ims_error *err)
{
	const nn_optim_opts *o = &opt->o;
	if (o->kind == NN_OPTIM_SGD) {
		const float wd = (float)o->weight_decay, mom = (float)o->momentum;
		float *buf = opt->nstate ? opt->state[0] : NULL;
		if (opt->ctx)
			return opt->ctx->be->sgd_update(opt->ctx, params, grads,
							buf, r, wd, mom, t == 1,
							o->nesterov, (float)-lr,
							err);
		sgd_run(opt, params, grads, buf, r, wd, mom, t == 1, (float)-lr,
			nt);
		return 0;
	}
	const int adamw = o->kind == NN_OPTIM_ADAMW;
	const float l2 = !adamw ? (float)o->weight_decay : 0.0f;
	const int decoupled = adamw && o->weight_decay != 0;
	if (opt->ctx)
		return opt->ctx->be->adam_update(opt->ctx, params, grads,
						 opt->state[0], opt->state[1], r,
						 sc, l2, decoupled, err);
	adam_run(params, grads, opt->state[0], opt->state[1], r, sc, l2,
		 decoupled, nt);
	return 0;
}

int nn_optim_step(nn_optim *opt, float *params, const float *grads,
		  const nn_optim_segment *segs, size_t nsegs, double lr,
		  ims_error *err)
{
	RETURN_IF(!opt, err, IMS_EINVAL, "cannot step the optimiser: no optimiser");
	RETURN_IF(!(lr >= 0) || !isfinite(lr), err, IMS_EINVAL,
		  "cannot step the optimiser: learning rate %g must be a finite number >= 0",
		  lr);
	RETURN_IF(opt->count && (!params || !grads), err, IMS_EINVAL,
		  "cannot step the optimiser: no parameter or gradient buffer");
	RETURN_IF(!segs && nsegs, err, IMS_EINVAL,
		  "cannot step the optimiser: %zu segments but no segment list",
		  nsegs);
	nn_optim_segment all = {0, opt->count, 1, 1};
	if (!segs) {
		segs = &all;
		nsegs = 1;
	}
	FORWARD_IF_ERR(check_segments(opt, segs, nsegs, err));

	const nn_optim_opts *o = &opt->o;
	const int nt = o->threads > 0 ? o->threads : omp_get_max_threads();
	const int64_t t = opt->steps + 1;
	const double bc1 = 1.0 - pow(o->beta1, (double)t);
	const double bc2 = 1.0 - pow(o->beta2, (double)t);
	const adam_scalars sc = {
		.w1 = (float)(1.0 - o->beta1),
		.beta2 = (float)o->beta2,
		.w2 = (float)(1.0 - o->beta2),
		.neg_step = (float)-(lr / bc1),
		.bc2_sqrt = (float)sqrt(bc2),
		.eps = (float)o->eps,
		.decay_mul = (float)(1.0 - lr * o->weight_decay),
	};
	/* The trained segments in batches of runs, one update each. */
	nn_optim_runs r;
	r.n = r.blocks = 0;
	for (size_t i = 0; i <= nsegs; i++) {
		const nn_optim_segment *s = i < nsegs ? &segs[i] : NULL;
		if (s && (!s->trainable || !s->count))
			continue;
		if (s) {
			r.offset[r.n] = (uint32_t)s->offset;
			r.count[r.n] = (uint32_t)s->count;
			r.first[r.n] = r.blocks;
			r.decay[r.n] = (uint8_t)(s->decay != 0);
			r.blocks += (uint32_t)((s->count + NN_OPTIM_BLOCK - 1) /
					       NN_OPTIM_BLOCK);
			r.n++;
		}
		if (!r.n || (s && r.n < NN_OPTIM_RUNS))
			continue;
		FORWARD_IF_ERR(update_runs(opt, params, grads, &r, &sc, t, lr,
					   nt, err));
		r.n = r.blocks = 0;
	}
	opt->steps = t;
	return 0;
}

const nn_optim_opts *nn_optim_options(const nn_optim *opt)
{
	return &opt->o;
}

size_t nn_optim_param_count(const nn_optim *opt)
{
	return opt->count;
}

size_t nn_optim_state_count(const nn_optim *opt)
{
	return opt->nstate;
}

const char *nn_optim_state_name(const nn_optim *opt, size_t i)
{
	return i < opt->nstate ? opt->names[i] : NULL;
}

float *nn_optim_state(nn_optim *opt, size_t i)
{
	return i < opt->nstate ? opt->state[i] : NULL;
}

float *nn_optim_state_find(nn_optim *opt, const char *name)
{
	for (size_t i = 0; name && i < opt->nstate; i++)
		if (strcmp(opt->names[i], name) == 0)
			return opt->state[i];
	return NULL;
}

int64_t nn_optim_step_count(const nn_optim *opt)
{
	return opt->steps;
}

int nn_optim_set_step_count(nn_optim *opt, int64_t steps, ims_error *err)
{
	RETURN_IF(steps < 0, err, IMS_EINVAL,
		  "cannot set the optimiser's step count to %lld", (long long)steps);
	opt->steps = steps;
	return 0;
}
