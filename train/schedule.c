/*
 * schedule.c - learning rate per optimiser step: linear scaling by world
 * size, linear warmup, then constant, step (milestone) or cosine decay.
 * The formulas are in schedule.h; this file only evaluates them.
 */
#include "train/schedule.h"

#include <math.h>
#include <string.h>

#define PI 3.14159265358979323846

void nn_lr_opts_init(nn_lr_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->base_lr = 0.1;
	o->world = 1;
	o->no_scaling = 0;
	o->warmup_steps = 0;
	o->decay = NN_LR_CONSTANT;
	o->gamma = 0.1;
	o->n_milestones = 0;
	o->total_steps = 0;
	o->min_lr = 0;
}

static int check(const nn_lr_opts *o, ims_error *err)
{
	RETURN_IF(!(o->base_lr >= 0) || !isfinite(o->base_lr), err, IMS_EINVAL,
		  "invalid learning rate %g: must be a finite number >= 0",
		  o->base_lr);
	RETURN_IF(o->world < 1, err, IMS_EINVAL,
		  "invalid world size %d for the learning rate: must be >= 1",
		  o->world);
	RETURN_IF(o->warmup_steps < 0, err, IMS_EINVAL,
		  "invalid warmup of %lld steps: must be >= 0",
		  (long long)o->warmup_steps);
	switch (o->decay) {
	case NN_LR_CONSTANT:
		return 0;
	case NN_LR_STEP:
		RETURN_IF(!(o->gamma > 0 && o->gamma <= 1), err, IMS_EINVAL,
			  "invalid learning-rate gamma %g: must be in (0, 1]",
			  o->gamma);
		RETURN_IF(o->n_milestones < 1 ||
				  o->n_milestones > NN_LR_MAX_MILESTONES,
			  err, IMS_EINVAL,
			  "invalid learning-rate step decay: %d milestones (1 to %d)",
			  o->n_milestones, NN_LR_MAX_MILESTONES);
		for (int i = 0; i < o->n_milestones; i++) {
			RETURN_IF(o->milestones[i] < 1, err, IMS_EINVAL,
				  "invalid learning-rate milestone %lld: must be >= 1",
				  (long long)o->milestones[i]);
			RETURN_IF(i > 0 && o->milestones[i] <= o->milestones[i - 1],
				  err, IMS_EINVAL,
				  "invalid learning-rate milestones: %lld does not come after %lld",
				  (long long)o->milestones[i],
				  (long long)o->milestones[i - 1]);
		}
		return 0;
	case NN_LR_COSINE:
		RETURN_IF(o->total_steps <= o->warmup_steps, err, IMS_EINVAL,
			  "invalid cosine schedule: %lld total steps leave nothing after %lld warmup steps",
			  (long long)o->total_steps, (long long)o->warmup_steps);
		RETURN_IF(!(o->min_lr >= 0 && o->min_lr <= o->base_lr), err,
			  IMS_EINVAL,
			  "invalid minimum learning rate %g: must be in [0, %g] (the base rate)",
			  o->min_lr, o->base_lr);
		return 0;
	default:
		return ims_fail(err, IMS_EINVAL,
				"invalid learning-rate decay %d", o->decay);
	}
}

int nn_lr_schedule_init(nn_lr_schedule *s, const nn_lr_opts *o,
			ims_error *err)
{
	RETURN_IF(!s || !o, err, IMS_EINVAL,
		  "cannot set up a learning-rate schedule: no options");
	FORWARD_IF_ERR(check(o, err));
	s->opts = *o;
	s->scale = o->no_scaling ? 1.0 : (double)o->world;
	return 0;
}

double nn_lr_peak(const nn_lr_schedule *s)
{
	return s->opts.base_lr * s->scale;
}

double nn_lr_at(const nn_lr_schedule *s, int64_t step)
{
	return nn_lr_at_position(s, (double)step);
}

/* Steps are whole numbers below 2^53 in practice, so every operation
 * below gives nn_lr_at's old integer formulas' bits. */
double nn_lr_at_position(const nn_lr_schedule *s, double step)
{
	const nn_lr_opts *o = &s->opts;
	const double peak = nn_lr_peak(s);
	if (!(step > 0))
		step = 0;
	double lr = peak;
	switch (o->decay) {
	case NN_LR_STEP:
		for (int i = 0; i < o->n_milestones && (double)o->milestones[i] <= step; i++)
			lr *= o->gamma;
		break;
	case NN_LR_COSINE: {
		const double lo = o->min_lr * s->scale;
		double q = (step - (double)o->warmup_steps) /
			   (double)(o->total_steps - o->warmup_steps);
		/* The ends are set, not computed: lo + (peak - lo) need not
		 * round back to peak. */
		if (q <= 0)
			lr = peak;
		else if (q >= 1)
			lr = lo;
		else
			lr = lo + (peak - lo) * 0.5 * (1.0 + cos(PI * q));
		break;
	}
	default:
		break;
	}
	/* (step + 1) / W first, so the last warmup step multiplies by 1.0
	 * exactly. */
	if (step < (double)o->warmup_steps)
		lr *= (step + 1) / (double)o->warmup_steps;
	return lr;
}
