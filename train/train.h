/*
 * train.h - imshard's network library and data-parallel trainer.
 *
 * Caveats:
 *   - No global state: device, communicator, RNG and options live in the
 *     structs passed to each call.
 *   - Handles are used by one thread at a time; kernels parallelise inside.
 *   - Every function returns 0 or a negative IMS_E* code (common/common.h)
 *     and fills the ims_error it is given.
 */
#ifndef IMSHARD_TRAIN_H
#define IMSHARD_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* ---- safetensors (safetensors.c) ---------------------------------------- */

/*
 * Reading and writing safetensors files (https://github.com/huggingface/
 * safetensors), the checkpoint format: an 8-byte little-endian header
 * length N, N bytes of JSON
 *   {"__metadata__": {"key": "value", ...},
 *    "name": {"dtype": "F32", "shape": [64, 3], "data_offsets": [b, e]}, ...}
 * padded with spaces, then the byte buffer that tensor data tiles exactly:
 * offsets are relative to the buffer's start, tensors neither overlap nor
 * leave gaps, and the last one ends at the end of the file. Tensor data is
 * little-endian and row-major (C order), with no alignment promised: a
 * foreign file may put an F32 tensor at an odd offset.
 *
 * Caveats:
 *   - An st_file is immutable after st_open and may be read by several
 *     threads at once. Its tensors' data points into a read-only memory
 *     map of the file: valid until st_close. Replace checkpoints by rename
 *     (as st_writer_write does), never by rewriting a mapped file in
 *     place: a file truncated under a map raises SIGBUS on access.
 *   - An st_writer is used by one thread at a time. It borrows tensor data
 *     (no copy) until st_writer_write returns or the writer is freed.
 */

/* Element types, with the format's names ("F32", ...). */
typedef enum st_dtype {
	ST_BOOL = 1, /* one byte, 0 or 1 */
	ST_U8,
	ST_I8,
	ST_F8_E5M2,  /* stored and copied only: no conversion */
	ST_F8_E4M3,
	ST_I16,
	ST_U16,
	ST_F16,      /* IEEE 754 binary16 */
	ST_BF16,     /* bfloat16: the high half of a float32 */
	ST_I32,
	ST_U32,
	ST_F32,
	ST_F64,
	ST_I64,
	ST_U64
} st_dtype;

/* The format's name of dtype ("F32"), or "unknown". Never NULL. */
const char *st_dtype_name(int dtype);
/* The st_dtype named name (case-sensitive, as in the format), or 0 when
 * the name is unknown. */
int st_dtype_from_name(const char *name);
/* Bytes per element of dtype; 0 when dtype is unknown. */
size_t st_dtype_size(int dtype);

/* Exact conversions of one half-precision value to float32: every binary16
 * and bfloat16 value (subnormals, infinities, NaN payloads) is a float32. */
float st_f16_to_f32(uint16_t h);
float st_bf16_to_f32(uint16_t b);

/* Header lengths above this are refused (the reference implementation's
 * limit). */
#define ST_MAX_HEADER_BYTES 100000000u

/* One tensor of an open file. Everything is owned by the st_file and lives
 * until st_close. */
typedef struct st_tensor {
	const char *name;     /* NUL-terminated UTF-8 */
	int dtype;            /* st_dtype */
	int ndim;             /* 0 for a scalar */
	const int64_t *shape; /* ndim sizes, each >= 0 */
	uint64_t numel;       /* product of shape: 1 for a scalar, 0 when a
				 size is 0 */
	uint64_t offset;      /* data_offsets[0]: from the buffer's start */
	uint64_t nbytes;      /* numel * st_dtype_size(dtype) */
	const void *data;     /* nbytes little-endian bytes in the map; any
				 alignment; not NULL even when nbytes is 0 */
} st_tensor;

typedef struct st_file st_file;

/*
 * Opens the safetensors file at path and validates all of it before
 * returning: header length within the limit and the file, the header
 * valid UTF-8 JSON with nothing but whitespace after the object, every
 * entry an object with a known "dtype", a "shape" of non-negative integers
 * and "data_offsets" [begin, end] with begin <= end, shape times element
 * size equal to end - begin, no name twice, "__metadata__" (optional) an
 * object of strings, and the tensors tiling the buffer exactly. Keys of a
 * tensor entry other than those three are ignored, as the reference
 * implementation does.
 *
 * On success *out is a new handle for st_close. Errors (message names the
 * file, and the tensor where one is at fault): IMS_ENOTFOUND (no such
 * file), IMS_EIO, IMS_EFORMAT (the header does not start with '{': not a
 * safetensors file), IMS_ELIMIT (header longer than ST_MAX_HEADER_BYTES),
 * IMS_ECORRUPT (anything else above), IMS_ENOMEM.
 */
int st_open(const char *path, st_file **out, ims_error *err);

/* Unmaps and frees f; every st_tensor and string it handed out dies with
 * it. f may be NULL. */
void st_close(st_file *f);

/* The path f was opened with. */
const char *st_path(const st_file *f);

/* Number of tensors. */
size_t st_count(const st_file *f);

/*
 * Tensor i (0 <= i < st_count) in file order: by data_offsets, which for
 * files written by st_writer is the order tensors were added; empty
 * tensors sharing an offset keep their header order. NULL when i is out of
 * range.
 */
const st_tensor *st_tensor_at(const st_file *f, size_t i);

/* The tensor called name, or NULL. O(log n). */
const st_tensor *st_find(const st_file *f, const char *name);

/* As st_find, but a missing tensor is IMS_ENOTFOUND with a message naming
 * the tensor and the file. */
int st_get(const st_file *f, const char *name, const st_tensor **out,
	   ims_error *err);

/* Metadata ("__metadata__") entries, in header order. st_metadata_at
 * returns the key of entry i and sets *value (both owned by f), or NULL
 * when i is out of range. st_metadata_get returns the value of key, or NULL
 * when it is absent. */
size_t st_metadata_count(const st_file *f);
const char *st_metadata_at(const st_file *f, size_t i, const char **value);
const char *st_metadata_get(const st_file *f, const char *key);

/*
 * Converts tensor t into out, which holds n values; n must equal t->numel
 * (a shape check for the caller: loading a checkpoint into the wrong
 * model fails here). st_tensor_to_f32 reads F32, F16, BF16 (exact) and
 * F64 (rounded to nearest); st_tensor_to_i64 reads every integer type and
 * BOOL (any non-zero byte is 1). Errors, with the tensor's name: other
 * dtypes IMS_EUNSUPPORTED, a wrong n IMS_EINVAL, a U64 value above
 * INT64_MAX IMS_ELIMIT (out is then partly written).
 */
int st_tensor_to_f32(const st_tensor *t, float *out, size_t n,
		     ims_error *err);
int st_tensor_to_i64(const st_tensor *t, int64_t *out, size_t n,
		     ims_error *err);

typedef struct st_writer st_writer;

/* Makes an empty writer into *out. Error: IMS_ENOMEM. */
int st_writer_create(st_writer **out, ims_error *err);

/* Frees w (not the tensor data it borrowed). w may be NULL. */
void st_writer_free(st_writer *w);

/*
 * Adds a tensor: name (copied; valid UTF-8, not "__metadata__", not added
 * before), dtype (an st_dtype), shape (ndim sizes >= 0, copied; ndim 0 is
 * a scalar and shape may then be NULL) and data, the
 * numel * st_dtype_size(dtype) bytes in little-endian order (the host's on
 * x86-64 and arm64), BORROWED until st_writer_write returns or the writer
 * is freed; data may be NULL only when that size is 0. Tensors are written
 * in the order they are added. Errors: IMS_EINVAL (with the tensor's name),
 * IMS_ELIMIT (size overflows), IMS_ENOMEM.
 */
int st_writer_add(st_writer *w, const char *name, int dtype, int ndim,
		  const int64_t *shape, const void *data, ims_error *err);

/* Sets metadata key to value (both copied, valid UTF-8); setting a key
 * again replaces its value in place. Errors: IMS_EINVAL, IMS_ENOMEM. */
int st_writer_set_metadata(st_writer *w, const char *key, const char *value,
			   ims_error *err);

/*
 * Writes everything added so far to path atomically: the file is written
 * to path.tmp.<pid> in the same folder, fsynced, renamed over path, and
 * the folder fsynced, so readers see the old file or the whole new one.
 * The header is the reference layout: "__metadata__" first (omitted when
 * empty), then the tensors with data_offsets in order, padded with spaces
 * to a multiple of 8 bytes so the buffer starts 8-byte aligned. The writer
 * stays usable. Errors: IMS_EIO (message names the file and errno's
 * text; the temporary file is removed), IMS_EINVAL (path too long),
 * IMS_ENOMEM.
 */
int st_writer_write(const st_writer *w, const char *path, ims_error *err);

/* ---- optimisers (optim.c) ----------------------------------------------- */

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

typedef struct nn_ctx nn_ctx; /* compute context (train/nn_internal.h) */

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

/* ---- learning-rate schedules (schedule.c) ------------------------------- */

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

/* ---- the BLAS (ctx.c) ---------------------------------------------------- */

/* The OpenBLAS kernel set in use ("SkylakeX", "Haswell", "Prescott"...). */
const char *nn_blas_core(void);
/*
 * When OpenBLAS did not recognise this CPU and fell back to a generic SSE
 * kernel set (it does for CPU models newer than its release; its SSE3
 * "Prescott" sgemm runs about a fifth of the AVX-512 one), the kernel set
 * the CPU's features allow ("SkylakeX", "Haswell"); NULL when OpenBLAS
 * chose well or OPENBLAS_CORETYPE is set. OpenBLAS reads
 * OPENBLAS_CORETYPE when it loads, so a program acts on this by setting it
 * and re-executing itself (imshard-train does).
 */
const char *nn_blas_better_core(void);

/* ---- models (model.c, models.c) ---------------------------------------- */

typedef struct nn_model nn_model;

/* What a named tensor of a model is, which decides how it is trained. */
typedef enum nn_tensor_kind {
	NN_TENSOR_WEIGHT,     /* conv/linear weight: trained, weight decay */
	NN_TENSOR_BIAS,       /* conv/linear bias: trained, decay optional */
	NN_TENSOR_NORM,       /* batch-norm weight/bias: trained, decay optional */
	NN_TENSOR_RUNNING,    /* batch-norm running_mean/var: a float buffer */
	NN_TENSOR_COUNTER     /* batch-norm num_batches_tracked: an int64 */
} nn_tensor_kind;

typedef struct nn_tensor_info {
	const char *name;     /* torchvision state_dict name, e.g. "layer1.0.conv1.weight" */
	nn_tensor_kind kind;
	int ndim;             /* 0 (counters) to 4 */
	int64_t shape[4];
	size_t offset;        /* in nn_model_params (trained kinds), nn_model_buffers
				 (NN_TENSOR_RUNNING) or nn_model_counters (NN_TENSOR_COUNTER) */
	size_t count;         /* elements */
	int head;             /* 1: part of the classifier head (the last linear layer) */
} nn_tensor_info;

/* Names of the models nn_model_create knows, NULL-terminated. */
const char *const *nn_model_names(void);

/*
 * Builds model `name` (convnet7, resnet18, resnet50, vgg16) for `classes`
 * classes and 3 x in_h x in_w inputs, with activations for batches of up to
 * max_batch, in ctx's device memory, and initialises its weights from seed
 * as torchvision does (kaiming-normal convolutions, batch norm 1/0, linear
 * layers per model). Tensor names and shapes equal torchvision's
 * state_dict() for the same model and class count (convnet7 is imshard's
 * own: features.* and classifier.*, see docs). The model keeps ctx's
 * backend; use it with that ctx only.
 * Errors: IMS_EINVAL (unknown name, classes < 1, input too small for the
 * model's downsampling), IMS_ENOMEM.
 */
int nn_model_create(nn_ctx *ctx, const char *name, int classes, int in_h,
		    int in_w, int max_batch, uint64_t seed, nn_model **out,
		    ims_error *err);
/* Frees the model and its device memory. m may be NULL. */
void nn_model_free(nn_model *m);

const char *nn_model_name(const nn_model *m);
int nn_model_classes(const nn_model *m);
/* Named tensors in state_dict order. */
int nn_model_tensor_count(const nn_model *m);
const nn_tensor_info *nn_model_tensor(const nn_model *m, int i);
/* Index of the tensor called name, or -1. */
int nn_model_find(const nn_model *m, const char *name);

/*
 * The model's storage, all in ctx's device memory and owned by the model:
 * trained parameters (one contiguous block, so an allreduce of the
 * gradients is one call), their gradients (same layout), float buffers
 * (running statistics) and int64 counters (host memory: the host counts
 * the steps). Counts are in elements.
 */
float *nn_model_params(nn_model *m, size_t *count);
float *nn_model_grads(nn_model *m, size_t *count);
float *nn_model_buffers(nn_model *m, size_t *count);
int64_t *nn_model_counters(nn_model *m, size_t *count);
/* The context the model was made with (its backend addresses the
 * storage above). */
nn_ctx *nn_model_ctx(nn_model *m);

/*
 * Forward pass of n <= max_batch samples x (device memory, N x 3 x H x W
 * float). train = 1 uses batch statistics (and updates the running ones)
 * and dropout drawn from dropout_seed; train = 0 is evaluation mode.
 * *logits (n x classes, device memory owned by the model) stays valid until
 * the next forward (or nn_model_set_use), backward included.
 */
int nn_model_forward(nn_model *m, const float *x, int n, int train,
		     uint64_t dropout_seed, const float **logits,
		     ims_error *err);
/*
 * Backward pass of the last training forward, from dlogits (n x classes,
 * device memory), which reads that forward's x again (keep it unchanged
 * until then): overwrites nn_model_grads. head_only = 1 stops after the
 * head (a frozen backbone gets no gradient; its entries are left zero).
 */
int nn_model_backward(nn_model *m, const float *dlogits, int head_only,
		      ims_error *err);
/*
 * Called by nn_model_backward as gradients become final: grads[ready ..
 * n_params) will not change again in this pass (ready falls as backward
 * goes from the last layer to the first), so they can be sent while the
 * rest of backward runs. A non-zero return stops the pass with that code.
 */
typedef int (*nn_grad_ready_fn)(void *ud, size_t ready, ims_error *err);
/* Sets (or with fn NULL clears) the model's gradient-ready hook. */
void nn_model_set_grad_hook(nn_model *m, nn_grad_ready_fn fn, void *ud);
/*
 * on = 1: batch norm uses its running statistics in training too and
 * leaves them unchanged (PyTorch's FrozenBatchNorm2d; fine-tuning with
 * small batches). Samples then do not interact within a batch, which makes
 * N-rank training equal to 1-rank training on the same global batch.
 */
void nn_model_freeze_bn(nn_model *m, int on);
/* Multiply-accumulate count of one forward pass of one sample (x2 = FLOPs). */
double nn_model_macs(const nn_model *m);

/* ---- activation memory (model_plan.c) ---------------------------------- */
/*
 * A model's activations (node outputs, their gradients, what backward
 * reads again: max pooling's argmax, dropout's mask, batch norm's
 * statistics) live in one arena of ctx's device memory, placed by a plan
 * made once when the model is built for max_batch: a buffer lives from
 * its first writer to its last reader, and buffers never live together
 * share bytes; ReLU and residual adds work in place where their input is
 * read by nothing later. The plan depends on what the model is used for:
 * evaluation keeps no gradients and frees each output once the next
 * layer has read it; a backward that trains the head alone keeps only
 * what the head reads. docs/TRAINING.md, "Activation memory".
 */
typedef enum nn_model_use {
	NN_USE_TRAIN = 0,  /* training forwards with the whole backward, and
			      evaluation (the default) */
	NN_USE_TRAIN_HEAD, /* training forwards whose backward is head_only
			      (a frozen backbone), and evaluation */
	NN_USE_EVAL        /* evaluation forwards only */
} nn_model_use;

/*
 * Says what the model will run, so that its arena holds what those passes
 * need and no more (NN_USE_TRAIN when built). Reallocates the arena when
 * the size changes: call it before the first pass, as nothing a pass left
 * there survives (the last forward's logits, its state for backward).
 * Then nn_model_forward with train = 1 fails under NN_USE_EVAL, and
 * nn_model_backward with head_only = 0 under NN_USE_TRAIN_HEAD, with
 * IMS_EINVAL and a message naming the use.
 * Errors: IMS_EINVAL (unknown use), IMS_ENOMEM (the model keeps no arena
 * then: set a smaller use or free it).
 */
int nn_model_set_use(nn_model *m, nn_model_use use, ims_error *err);

/* What a model's activations take, in bytes, for batches of max_batch. */
typedef struct nn_model_memory {
	int max_batch;
	int use;                  /* nn_model_use */
	size_t activation_bytes;  /* the arena allocated now: the largest plan
				     of the use */
	double activation_bytes_per_image; /* activation_bytes / max_batch */
	size_t train_bytes;       /* the plan of a training pass ... */
	size_t head_bytes;        /* ... of one training the head alone ... */
	size_t eval_bytes;        /* ... and of evaluation */
	size_t unplanned_bytes;   /* every output and gradient its own bytes
				     (no plan), for comparison */
} nn_model_memory;

/* Fills *out for m. */
void nn_model_memory_info(const nn_model *m, nn_model_memory *out);

/* ---- data parallelism (dp.c) ------------------------------------------- */

/*
 * The ranks of a data-parallel job. Under a launcher (mpirun), MPI is
 * initialised and every process is one rank; otherwise the process is the
 * only rank and no MPI library is touched. Collectives must be called by
 * every rank in the same order; one thread per process calls them.
 */
typedef struct dp_comm dp_comm;

/*
 * Joins the job (MPI_Init when launched by mpirun). Errors: IMS_EIO (MPI
 * failed), IMS_EUNSUPPORTED (launched as several ranks by a build without
 * MPI).
 */
int dp_init(int *argc, char ***argv, dp_comm **out, ims_error *err);
int dp_rank(const dp_comm *c);
int dp_world(const dp_comm *c);
/* Copies root's bytes to every rank. */
int dp_broadcast(dp_comm *c, void *buf, size_t bytes, int root,
		 ims_error *err);
/* In-place sums over ranks (floats: any count, in pieces of 2^30). */
int dp_allreduce_sum_f32(dp_comm *c, float *buf, size_t count, ims_error *err);
int dp_allreduce_sum_f64(dp_comm *c, double *buf, size_t count,
			 ims_error *err);
/*
 * Gradient buckets: an in-place sum over ranks of buf[0 .. count), sent in
 * buckets of about bucket_floats from the top down as backward finishes
 * them (non-blocking allreduces, progressed between layers), so the
 * communication overlaps the rest of backward; a single bucket is one
 * blocking allreduce in dp_buckets_finish. Per step: dp_buckets_ready
 * as gradients become final (from nn_model_backward's hook), then
 * dp_buckets_finish, after which buf holds the sums. With one rank both
 * do nothing. b is owned by the caller: dp_buckets_free.
 */
typedef struct dp_buckets dp_buckets;
int dp_buckets_create(dp_comm *c, float *buf, size_t count,
		      size_t bucket_floats, dp_buckets **out, ims_error *err);
/* buf[ready .. count) is final: starts the buckets it completes and lets
 * those in flight progress. */
int dp_buckets_ready(dp_buckets *b, size_t ready, ims_error *err);
/* Starts the rest and waits for every bucket. */
int dp_buckets_finish(dp_buckets *b, ims_error *err);
/* Seconds spent inside MPI calls since the last call of this (the
 * communication time of a step whose collectives overlap its compute). */
double dp_buckets_take_seconds(dp_buckets *b);
void dp_buckets_free(dp_buckets *b);

/* all[r * count + i] = rank r's mine[i]. */
int dp_allgather_f64(dp_comm *c, const double *mine, size_t count,
		     double *all, ims_error *err);
int dp_barrier(dp_comm *c, ims_error *err);
/*
 * seconds > 0 with several ranks: a watchdog thread ends this process
 * (exit status 1, a line on stderr naming the rank) when one blocking
 * collective has waited longer than that, so a job whose rank hangs alive
 * ends instead of waiting forever (mpirun ends a job whose rank died by
 * itself). 0: no limit. IMS_EINVAL for a negative value.
 */
int dp_set_timeout(dp_comm *c, double seconds, ims_error *err);
/* Ends every rank of the job at once (after a fatal error on one rank,
 * the others would wait forever in the next collective). */
void dp_abort(dp_comm *c, int code);
/* Leaves the job (MPI_Finalize) and frees c. NULL is fine. */
void dp_finalize(dp_comm *c);

/* ---- the training loop (trainer.c) ------------------------------------- */

/* What imshard-train runs; every field is documented by its --flag. */
typedef struct nn_train_opts {
	const char *train_manifest, *val_manifest; /* --train, --val */
	const char *model;        /* --model (convnet7) */
	const char *device;       /* --device cpu|cuda (cpu) */
	int epochs;               /* --epochs (1) */
	int batch_size;           /* --batch-size, per rank (32) */
	double lr;                /* --lr, for one rank (0.1) */
	int no_lr_scaling;        /* --no-lr-scaling */
	int optimizer;            /* --optimizer: nn_optim_kind (sgd) */
	double momentum;          /* --momentum (0.9, SGD) */
	int nesterov;             /* --nesterov */
	double weight_decay;      /* --weight-decay (1e-4) */
	int no_bn_bias_decay;     /* --no-bn-bias-decay */
	double warmup_epochs;     /* --warmup-epochs (0) */
	int schedule;             /* --schedule: nn_lr_decay (cosine) */
	int size;                 /* --size, square input side (224) */
	const char *augment;      /* --augment (flip) */
	float mean[3], std[3];    /* --mean, --std (ImageNet's) */
	float label_smoothing;    /* --label-smoothing (0) */
	int threads;              /* --threads (0 = all cores) */
	const char *precision;    /* --precision fp32|bf16|fp16 (fp32; 16-bit
				     ones on --device cuda only) */
	const char *init;         /* --init weights.safetensors */
	int freeze_backbone;      /* --freeze-backbone */
	const char *checkpoint_dir; /* --checkpoint-dir */
	int resume;               /* --resume */
	int64_t checkpoint_every; /* --checkpoint-every steps (0 = epoch ends) */
	const char *log_dir;      /* --log-dir */
	uint64_t seed;            /* --seed (1) */
	int64_t max_steps;        /* --max-steps (0 = no limit) */
	int log_every;            /* --log-every steps (10) */
	double bucket_mb;         /* --bucket-mb: gradient allreduce buckets, MiB (1024) */
	double collective_timeout; /* --collective-timeout seconds (600; 0 = none) */
	int shard_owning;         /* --shard-owning */
	int freeze_bn;            /* --freeze-bn */
	int synthetic;            /* --synthetic: a fixed random batch per rank
				     instead of --train's records */
	int quiet;                /* --quiet */
} nn_train_opts;

void nn_train_opts_init(nn_train_opts *o);

typedef struct nn_train_result {
	int epochs_done;
	uint64_t steps, images;    /* images over all ranks */
	double wall_s;             /* from the start of nn_train_run */
	double startup_s;          /* set-up before the first batch */
	double train_s;            /* wall time excluding start-up */
	double images_per_s;       /* images / train_s, all ranks */
	double busy_s;             /* this rank's compute time */
	double busy_ratio;         /* max / min busy time over ranks */
	double wait_s;             /* this rank's time waiting for data */
	double val_top1, val_top5; /* last validation */
	uint64_t val_records;
	double best_top1;
	int best_epoch;            /* from 0; -1 before any validation */
	double best_wall_s;        /* train_s clock when best_top1 was reached */
	double loss_scale;         /* fp16's loss scale at the end (1 otherwise) */
	uint64_t skipped_steps;    /* fp16 steps skipped for overflowed
				      gradients, a resumed run's included */
} nn_train_result;

/*
 * Trains as o says, as rank dp_rank(comm) of dp_world(comm) (comm from
 * dp_init; every rank calls this with the same options). Writes
 * LOGDIR/metrics.jsonl (every rank) and LOGDIR/summary.json (rank 0) when
 * o->log_dir is set, and CHECKPOINT_DIR/checkpoint.safetensors (rank 0)
 * every o->checkpoint_every steps and at each epoch's end. A rank that
 * fails returns the error; the caller should dp_abort so the others do not
 * wait forever. Errors: IMS_EINVAL (options, class lists of the splits
 * disagree, NaN/Inf loss), IMS_EUNSUPPORTED (device or precision this
 * build lacks; bf16 and fp16 on the cpu), the loader's, checkpoints',
 * MPI's. --precision fp16 scales the loss gradient and skips steps whose
 * gradients overflow (train/loss_scale.h); a NaN or Inf loss still ends
 * the run in every precision.
 */
int nn_train_run(const nn_train_opts *o, dp_comm *comm, nn_train_result *res,
		 ims_error *err);

/* ---- checkpoints (checkpoint.c) ---------------------------------------- */

/*
 * Checkpoints and weight loading, over safetensors files. A checkpoint
 * holds, in this order:
 *   - every tensor of the model under its torchvision state_dict name, in
 *     nn_model_tensor order: trained tensors and running statistics as F32
 *     with the tensor's shape, counters (num_batches_tracked) as I64
 *     scalars. PyTorch loads such a file with
 *     model.load_state_dict(safetensors.torch.load_file(path), strict=False)
 *     (strict=False, or drop the "optim." keys first);
 *   - when an optimiser is saved, each of its state buffers sliced per
 *     trained tensor as "optim.<state>.<tensor>" (F32, the tensor's shape;
 *     e.g. "optim.exp_avg.fc.weight") and "optim.step" (I64 scalar);
 *   - metadata "format": "imshard-checkpoint-1" and the caller's entries.
 *
 * Caveats:
 *   - The model and optimiser are used by one thread at a time; these
 *     functions read or write them, so no step may run meanwhile.
 *   - Loading checks every tensor it will use before writing any: on error
 *     the model (and optimiser) are exactly as they were.
 *   - Model storage is read and written in place, which is right for the
 *     CPU backend (its device memory is host memory); a CUDA backend will
 *     stage through host memory.
 */

/*
 * Writes the model m and, when opt is not NULL, its optimiser (made for
 * nn_model_params' count) to path, atomically (st_writer_write: readers see
 * the old file or the whole new one). meta is NULL or a NULL-terminated
 * list of key, value, key, value, ... strings (UTF-8) stored as metadata;
 * the key "format" is reserved. Nothing is kept after the call.
 * Errors: IMS_EINVAL (optimiser size differs from the model's, a key
 * without a value, "format" in meta, invalid UTF-8), IMS_EIO (message
 * names the file), IMS_ENOMEM.
 */
int nn_checkpoint_save(const char *path, nn_model *m, nn_optim *opt,
		       const char *const *meta, ims_error *err);

/*
 * What nn_checkpoint_load_init did, tensor names listed in model order
 * (unexpected: file order). Caller-owned; the strings and arrays are owned
 * by the report and freed by nn_load_report_release.
 */
typedef struct nn_load_report {
	int loaded;        /* model tensors taken from the file */
	char **missing;    /* model tensors absent from the file: kept as
			      they were (the model's initialisation) */
	int n_missing;
	char **unexpected; /* file tensors the model lacks ("optim.*" are
			      not listed) */
	int n_unexpected;
	char **reinit;     /* head tensors whose shape differs in the file
			      (another class count): kept as they were */
	int n_reinit;
} nn_load_report;

/* Frees what r holds and zeroes it. r may be NULL; a zeroed report is
 * fine. */
void nn_load_report_release(nn_load_report *r);

/*
 * Initialises m from the weights in the safetensors file at path, for
 * fine-tuning (--init): a checkpoint of nn_checkpoint_save or torchvision
 * weights exported with safetensors.torch.save_file(model.state_dict()).
 * Each model tensor is looked up by name:
 *   - same shape: loaded. Floats from F32, F16, BF16 (exact) or F64
 *     (rounded); counters from any integer type, or from a float type
 *     when every value is a whole number;
 *   - other shape, tensor in the head (nn_tensor_info.head): left as it
 *     is, listed in report->reinit;
 *   - other shape elsewhere: IMS_EINVAL, "cannot load 'PATH': tensor
 *     'layer1.0.conv1.weight' has shape [64, 3, 3, 3] in the file, the
 *     model needs [64, 64, 3, 3]";
 *   - absent: left as it is, listed in report->missing.
 * File tensors the model lacks are listed in report->unexpected, except
 * "optim.*" ones. The optimiser's state is never read. report may be NULL;
 * otherwise it is overwritten (release an earlier one first) and, on
 * error, left empty.
 * Errors: st_open's (IMS_ENOTFOUND, IMS_EIO, IMS_EFORMAT, IMS_ECORRUPT,
 * IMS_ELIMIT), IMS_EINVAL (shape mismatch outside the head, a fractional
 * float counter), IMS_EUNSUPPORTED (a float tensor stored as an integer or
 * F8 type, a counter stored as F8), IMS_ELIMIT (a U64 counter above
 * INT64_MAX), IMS_ENOMEM; m is then unchanged.
 */
int nn_checkpoint_load_init(const char *path, nn_model *m,
			    nn_load_report *report, ims_error *err);

/*
 * Restores m and, when opt is not NULL, opt exactly (bit for bit) from the
 * checkpoint at path, for --resume: parameters, running statistics,
 * counters, optimiser state and step count, so the next step gives the
 * same bits as an uninterrupted run. The file must hold every model tensor
 * with the model's shape and the checkpoint's dtype (F32, counters I64),
 * and with opt every "optim.<state>.<tensor>" of opt's states and the
 * model's trained tensors plus "optim.step"; it must hold nothing else
 * (other model tensors, or with opt other "optim." state: the file was
 * written for another model or optimiser kind; Adam and AdamW state have
 * the same names and are not told apart). With opt NULL the file's
 * optimiser tensors are ignored. Metadata "format", when present, must be
 * "imshard-checkpoint-1".
 * file_out may be NULL; otherwise on success *file_out receives the open
 * file, for st_metadata_get and the like; the caller st_closes it. On
 * error *file_out is NULL.
 * Errors: st_open's (IMS_ENOTFOUND, IMS_EIO, IMS_EFORMAT, IMS_ECORRUPT,
 * IMS_ELIMIT), IMS_EINVAL (message names the missing, misshapen, mistyped
 * or extra tensor; optimiser size differs from the model's),
 * IMS_ECORRUPT (negative step count), IMS_EUNSUPPORTED (another format
 * version), IMS_ENOMEM; m and opt are then unchanged.
 */
int nn_checkpoint_load_resume(const char *path, nn_model *m, nn_optim *opt,
			      st_file **file_out, ims_error *err);

#endif
