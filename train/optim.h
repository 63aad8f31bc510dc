/*
 * optim.h - the network library's optimisers (imshard_nn; optim.c, with
 * the device's per-element kernels in train/cuda/optim.cu): SGD, Adam and
 * AdamW updating a model's contiguous parameters (nn_model_params) from
 * its gradients, and the state a checkpoint saves and restores
 * (train/checkpoint.h). The state lives in the memory of the context the
 * options name (train/nn.h); the rate of each step is the caller's
 * (train/schedule.h gives the trainer's).
 */
#ifndef IMSHARD_OPTIM_H
#define IMSHARD_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "train/nn.h"

/*
 * SGD (with momentum, optionally Nesterov), Adam and AdamW over one
 * contiguous float buffer of parameters, with PyTorch's torch.optim
 * semantics (dampening 0, no amsgrad, no maximize). For element i, with
 * g = grads[i], p = params[i], lr the step's rate and wd the weight decay
 * (0 in segments with decay == 0):
 *
 *   SGD:   d = g + wd p
 *          momentum > 0: buf = d on the first step, else
 *                        buf = momentum buf + d;
 *                        d = nesterov ? d + momentum buf : buf
 *          p = p - lr d
 *   Adam:  g = g + wd p                                (L2 penalty)
 *   AdamW: p = p (1 - lr wd)                           (decoupled decay)
 *   both:  m = m + (1 - beta1) (g - m)                 (lerp, as PyTorch)
 *          v = beta2 v + (1 - beta2) g g
 *          p = p - (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 *
 * t is the step number counting from 1. The arithmetic is float per
 * element in PyTorch's order of operations, with the per-step scalars
 * (bias corrections, step size, 1 - lr wd) computed in double as PyTorch's
 * Python code does; PyTorch's vectorised CPU kernels fuse some of these
 * into FMAs, so results agree with it to rounding, not bit for bit. The
 * same inputs give the same bits whatever the thread count.
 *
 * One step count serves all parameters. PyTorch counts per parameter, so a
 * segment frozen for some steps and trained later gets Adam's bias
 * corrections for the global step here (SGD is unaffected: a momentum
 * buffer never updated is zero, and momentum * 0 + d == d).
 *
 * Caveats: an nn_optim is used by one thread at a time; nn_optim_step
 * parallelises inside with OpenMP (element-wise, no reductions).
 */

typedef enum nn_optim_kind {
	NN_OPTIM_SGD = 1,
	NN_OPTIM_ADAM,
	NN_OPTIM_ADAMW
} nn_optim_kind;

/* Caller-owned options. Fields that do not apply to kind are ignored. */
typedef struct nn_optim_opts {
	int kind;            /* nn_optim_kind */
	double momentum;     /* SGD: >= 0; 0 = plain SGD, no state */
	int nesterov;        /* SGD: 1 = Nesterov momentum (needs momentum) */
	double weight_decay; /* >= 0; L2 for SGD and Adam, decoupled for AdamW */
	double beta1;        /* Adam(W): in [0, 1) */
	double beta2;        /* Adam(W): in [0, 1) */
	double eps;          /* Adam(W): >= 0 */
	int threads;         /* OpenMP threads for a step; 0 = OpenMP's default */
	nn_ctx *ctx;         /* NULL or a CPU context: state in host memory,
				updated by OpenMP loops; a device context
				(the CUDA backend): state in its device
				memory, params and grads device pointers,
				updates queued on its stream (same math) */
} nn_optim_opts;

/*
 * Fills o with PyTorch's defaults for kind: momentum 0, nesterov 0,
 * weight_decay 0 (0.01 for AdamW), beta1 0.9, beta2 0.999, eps 1e-8,
 * threads 0. An unknown kind is stored as given and refused by
 * nn_optim_create.
 */
void nn_optim_opts_init(nn_optim_opts *o, int kind);

/* A run of parameters params[offset .. offset+count) and how to treat it. */
typedef struct nn_optim_segment {
	size_t offset;
	size_t count;
	int decay;     /* 1: weight decay applies; 0: not (batch-norm scales
			  and shifts, biases) */
	int trainable; /* 1: updated; 0: frozen: parameters and optimiser
			  state left untouched, gradients not read */
} nn_optim_segment;

typedef struct nn_optim nn_optim;

/*
 * Makes an optimiser for count parameters into *out, with its state
 * buffers zeroed and the step count 0. Errors (IMS_EINVAL, message names
 * the option): unknown kind, momentum or weight_decay negative or not
 * finite, nesterov without momentum, beta1 or beta2 outside [0, 1), eps
 * negative, threads negative; IMS_ENOMEM.
 */
int nn_optim_create(const nn_optim_opts *o, size_t count, nn_optim **out,
		    ims_error *err);

/* Frees opt and its state. opt may be NULL. */
void nn_optim_free(nn_optim *opt);

/*
 * One update of params (count floats, in place) from grads (count floats,
 * read only) at learning rate lr (>= 0, finite), then the step count goes
 * up by one. segs lists the runs to update, in increasing offset order and
 * not overlapping; parameters outside every segment are left alone like
 * frozen ones. segs == NULL (nsegs must then be 0) means one segment over
 * the whole buffer, trainable, with decay. Everything is checked before
 * anything changes: on error params, state and step count are untouched.
 * Errors: IMS_EINVAL (bad lr, NULL buffers, a segment past the end or
 * overlapping or out of order, with its index).
 */
int nn_optim_step(nn_optim *opt, float *params, const float *grads,
		  const nn_optim_segment *segs, size_t nsegs, double lr,
		  ims_error *err);

/* The options opt was made with (a copy it owns) and its parameter count. */
const nn_optim_opts *nn_optim_options(const nn_optim *opt);
size_t nn_optim_param_count(const nn_optim *opt);

/*
 * State for checkpoints. A checkpoint saves every state buffer under its
 * name with the step count, and restores them by writing into the same
 * buffers and calling nn_optim_set_step_count; the next step then gives
 * the same bits as an uninterrupted run.
 *
 * nn_optim_state_count: number of state buffers: 0 for SGD without
 * momentum, 1 for SGD with momentum ("momentum_buffer"), 2 for Adam and
 * AdamW ("exp_avg", "exp_avg_sq"), the names of PyTorch's state_dict.
 * nn_optim_state_name: the name of buffer i, NULL when i is out of range.
 * nn_optim_state: buffer i, nn_optim_param_count floats laid out like the
 * parameters, owned by opt, writable (device memory when opts.ctx is a
 * device context: copy through its to_host/to_device); NULL when i is out
 * of range.
 * nn_optim_state_find: the buffer called name, or NULL.
 */
size_t nn_optim_state_count(const nn_optim *opt);
const char *nn_optim_state_name(const nn_optim *opt, size_t i);
float *nn_optim_state(nn_optim *opt, size_t i);
float *nn_optim_state_find(nn_optim *opt, const char *name);

/* Steps taken (PyTorch's state "step"). The setter refuses negative
 * counts (IMS_EINVAL). */
int64_t nn_optim_step_count(const nn_optim *opt);
int nn_optim_set_step_count(nn_optim *opt, int64_t steps, ims_error *err);

#endif
