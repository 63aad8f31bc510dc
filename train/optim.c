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
 * With opts.ctx on a device backend the state lives in device memory and
 * each segment's update is the backend's sgd_update / adam_update kernel
 * (train/cuda/optim.cu, the same per-element operations); the checks, the
 * step count and the per-step scalars stay here, shared by both.
 */
#include "train/nn_internal.h"
#include "train/nn.h"

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

/* sgd.py: grad.add(param, alpha=wd); buf.mul_(momentum).add_(grad) (or
 * clone on the first step); grad.add(buf, alpha=momentum) for Nesterov;
 * param.add_(grad, alpha=-lr). */
static void sgd_run(const nn_optim *opt, float *restrict p,
		    const float *restrict g, float *restrict buf, size_t n,
		    float wd, float mom, int first, float neg_lr, int nt)
{
	const int nesterov = opt->o.nesterov;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i++) {
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
 * param.addcdiv_(exp_avg, denom, value=-step_size). */
static void adam_run(float *restrict p, const float *restrict g,
		     float *restrict m, float *restrict v, size_t n,
		     const adam_scalars *s, float l2, int decoupled, int nt)
{
	const adam_scalars c = *s;
#pragma omp parallel for schedule(static) num_threads(nt) if (n >= PAR_MIN)
	for (size_t i = 0; i < n; i++) {
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
	}
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
	if (o->kind == NN_OPTIM_SGD) {
		const float mom = (float)o->momentum;
		for (size_t i = 0; i < nsegs; i++) {
			const nn_optim_segment *s = &segs[i];
			if (!s->trainable || !s->count)
				continue;
			if (opt->ctx) {
				FORWARD_IF_ERR(opt->ctx->be->sgd_update(
					opt->ctx, params + s->offset,
					grads + s->offset,
					opt->nstate ? opt->state[0] + s->offset : NULL,
					s->count,
					s->decay ? (float)o->weight_decay : 0.0f, mom,
					t == 1, o->nesterov, (float)-lr, err));
				continue;
			}
			sgd_run(opt, params + s->offset, grads + s->offset,
				opt->nstate ? opt->state[0] + s->offset : NULL,
				s->count, s->decay ? (float)o->weight_decay : 0.0f,
				mom, t == 1, (float)-lr, nt);
		}
	} else {
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
		const int adamw = o->kind == NN_OPTIM_ADAMW;
		for (size_t i = 0; i < nsegs; i++) {
			const nn_optim_segment *s = &segs[i];
			if (!s->trainable || !s->count)
				continue;
			const int decay = s->decay && o->weight_decay != 0;
			if (opt->ctx) {
				FORWARD_IF_ERR(opt->ctx->be->adam_update(
					opt->ctx, params + s->offset,
					grads + s->offset,
					opt->state[0] + s->offset,
					opt->state[1] + s->offset, s->count, &sc,
					decay && !adamw ? (float)o->weight_decay : 0.0f,
					decay && adamw, err));
				continue;
			}
			adam_run(params + s->offset, grads + s->offset,
				 opt->state[0] + s->offset, opt->state[1] + s->offset,
				 s->count, &sc,
				 decay && !adamw ? (float)o->weight_decay : 0.0f,
				 decay && adamw, nt);
		}
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
