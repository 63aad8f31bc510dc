/*
 * schedule.h - the network library's learning-rate schedules (imshard_nn;
 * schedule.c): the rate of each optimiser step (nn_optim_step's lr,
 * train/optim.h) from one rank's options and the world size. Plain data
 * and arithmetic: nothing here touches a context or a device.
 */
#ifndef IMSHARD_SCHEDULE_H
#define IMSHARD_SCHEDULE_H

#include <stdint.h>

#include "common/common.h"

/*
 * The learning rate of each optimiser step. Every rate in nn_lr_opts is
 * for ONE rank; unless no_scaling is set, the schedule multiplies all of
 * them by the world size (the linear scaling rule, Goyal et al. 2017), so
 * the peak rate is base_lr * world. Steps count optimiser updates from 0.
 *
 *   lr(step) = warm(step) * decay(step), where
 *   warm(step)  = (step + 1) / warmup_steps   for step < warmup_steps
 *                 1                           afterwards (and when
 *                                             warmup_steps is 0)
 * so the first step already moves, and the last warmup step
 * (warmup_steps - 1) and the first one after it both run at the peak.
 *   NN_LR_CONSTANT: decay(step) = peak
 *   NN_LR_STEP:     decay(step) = peak * gamma^k, k the number of
 *                   milestones <= step. Milestones are absolute step
 *                   numbers, counted from step 0 like the warmup (not
 *                   after it), as in torch's MultiStepLR and the ImageNet
 *                   recipe "5 warmup epochs, x0.1 at epochs 30, 60, 80"
 *                   (the caller converts epochs to steps).
 *   NN_LR_COSINE:   decay(step) = min + (peak - min) (1 + cos(pi q)) / 2,
 *                   q = (step - warmup_steps) / (total_steps -
 *                   warmup_steps) clamped to [0, 1]: peak through the
 *                   warmup, min (scaled like the peak) from total_steps on.
 * Computed in double.
 *
 * Caveats: plain data, no handle; any thread may call these.
 */

typedef enum nn_lr_decay {
	NN_LR_CONSTANT = 1,
	NN_LR_STEP,
	NN_LR_COSINE
} nn_lr_decay;

#define NN_LR_MAX_MILESTONES 16

typedef struct nn_lr_opts {
	double base_lr;        /* for one rank; >= 0 */
	int world;             /* ranks, >= 1 */
	int no_scaling;        /* 1: do not multiply by world */
	int64_t warmup_steps;  /* >= 0; 0 = no warmup */
	int decay;             /* nn_lr_decay */
	/* NN_LR_STEP */
	double gamma;                                /* in (0, 1] */
	int64_t milestones[NN_LR_MAX_MILESTONES];    /* strictly increasing, >= 1 */
	int n_milestones;                            /* 1 .. NN_LR_MAX_MILESTONES */
	/* NN_LR_COSINE */
	int64_t total_steps;   /* > warmup_steps */
	double min_lr;         /* for one rank; in [0, base_lr] */
} nn_lr_opts;

/* Fills o with: base_lr 0.1, world 1, scaling on, no warmup,
 * NN_LR_CONSTANT, gamma 0.1, no milestones, total_steps 0, min_lr 0. */
void nn_lr_opts_init(nn_lr_opts *o);

/* A validated schedule; caller-owned plain data. */
typedef struct nn_lr_schedule {
	nn_lr_opts opts; /* copy of the options */
	double scale;    /* world, or 1 with no_scaling */
} nn_lr_schedule;

/*
 * Checks o and fills s from it. Errors (IMS_EINVAL, the message names the
 * option and its value): base_lr negative or not finite, world < 1,
 * warmup_steps < 0, unknown decay; NN_LR_STEP: gamma outside (0, 1],
 * n_milestones outside 1..NN_LR_MAX_MILESTONES, milestones not strictly
 * increasing from >= 1; NN_LR_COSINE: total_steps <= warmup_steps, min_lr
 * outside [0, base_lr].
 */
int nn_lr_schedule_init(nn_lr_schedule *s, const nn_lr_opts *o,
			ims_error *err);

/* The scaled peak rate: base_lr * scale. The trainer logs it beside
 * opts.base_lr. */
double nn_lr_peak(const nn_lr_schedule *s);

/* The rate of step (steps below 0 count as 0). */
double nn_lr_at(const nn_lr_schedule *s, int64_t step);

/* The rate at a fractional step: the same formulas with step a real
 * number, for a run resumed with another global batch whose steps fall
 * between this schedule's (nn_lr_at(s, k) == nn_lr_at_position(s, k) for
 * every whole k). */
double nn_lr_at_position(const nn_lr_schedule *s, double step);

#endif
