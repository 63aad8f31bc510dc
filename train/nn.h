/*
 * nn.h - imshard's network library: the compute context and its device
 * memory, models with torchvision's tensor names, losses and scores, and
 * batches staged onto a device. Its optimisers (train/optim.h),
 * learning-rate schedules (train/schedule.h) and fp16 loss scaling
 * (train/loss_scale.h) have headers of their own. It knows nothing of
 * record files or image decoding (recordio/, augment/): callers hand it
 * float batches.
 *
 * Inside, models call layer kernels through a backend table, one per
 * device (the CPU's reference kernels in train/layers/, CUDA's in
 * train/cuda/); the table and the kernels are private to this library
 * and its tests (train/nn_internal.h). Everything a caller does with a
 * device (memory, copies, staging, the loss) goes through the functions
 * below, which dispatch to the context's table.
 *
 * Caveats:
 *   - No global state: device, threads and workspace live in the nn_ctx
 *     passed to each call; a model keeps the context it was made with.
 *   - A context, and every model and optimiser made with it, is used by
 *     one thread at a time; kernels parallelise inside (OpenMP and the
 *     BLAS on the CPU, the context's stream on a device).
 *   - "Device memory" is the context's: host memory on the CPU backend,
 *     GPU memory on the CUDA backend. Pointers into it are only read or
 *     written through this library (nn_ctx_to_host, nn_ctx_to_device...).
 *   - Every function that can fail returns 0 or a negative IMS_E* code
 *     (common/common.h) and fills the ims_error it is given.
 */
#ifndef IMSHARD_NN_H
#define IMSHARD_NN_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* ---- the compute context (ctx.c, device.c) ----------------------------- */

typedef struct nn_backend nn_backend;

/*
 * A device and how to compute on it, caller-owned (nn_ctx_init_* /
 * nn_ctx_release). Callers read threads and may set winograd and
 * precision before making a model; be, scratch, dev and dx_overwrite are
 * the library's own.
 */
typedef struct nn_ctx {
	const nn_backend *be; /* kernels of this context's device */
	int threads;          /* OpenMP (and BLAS) threads, >= 1 */
	float *scratch;       /* workspace owned by the context */
	size_t scratch_floats;
	void *dev;            /* backend private state (streams, handles) */
	/* 1: backward kernels OVERWRITE dx (dx = ...) instead of adding to
	 * it. The model sets it for the first gradient written into each
	 * activation in a pass, so activation gradients need no zeroing
	 * (a pass over every activation's size); 0 (the default) is the
	 * accumulating convention (train/nn_internal.h). */
	int dx_overwrite;
	/* Which convolutions take Winograd's algorithm: NN_WINO_AUTO (0,
	 * the default: those where it was measured faster), NN_WINO_OFF
	 * (none: im2col + GEMM) or NN_WINO_ALL (every one it can compute,
	 * so that tests reach it with small shapes). */
	int winograd;
	/* How models made on this context store their activations, read by
	 * nn_model_create (a model keeps it; the context must not change it
	 * while the model lives): NN_PREC_FP32 (0, the default), or
	 * NN_PREC_BF16 / NN_PREC_FP16, mixed precision on either backend:
	 * every layer output and output gradient stored in 16 bits (half
	 * the activation memory), convolutions and linear layers computed
	 * from a 16-bit copy of the weights made once per forward pass,
	 * every sum and GEMM accumulated in fp32, batch-norm statistics,
	 * parameters (the master weights), their gradients and the
	 * optimiser in fp32. The rounding points are listed in
	 * docs/TRAINING.md ("Mixed precision"); the CPU's graph is the
	 * reference the device's is tested against. */
	int precision;
	/* How models made on this context place their activations, read by
	 * nn_model_create: NN_MEMPLAN_ON (0, the default: the memory plan,
	 * buffers that are never live together share bytes, ReLU and add in
	 * place), NN_MEMPLAN_OFF (every node's output and gradient its own
	 * bytes for the whole run, no kernel in place: what the plan is
	 * tested against) or NN_MEMPLAN_POISON (the plan, and each buffer
	 * filled with NaN bytes once its last reader has run: tests). */
	int memory_plan;
	/* How a device picks convolution algorithms, per shape, once
	 * (train/conv_algo.h): NN_ALGO_BENCHMARK (0, the default: each
	 * candidate cuDNN offers timed on the layer's own buffers, the
	 * fastest kept, as torch.backends.cudnn.benchmark), NN_ALGO_HEURISTIC
	 * (cuDNN's ranking, nothing timed) or NN_ALGO_DETERMINISTIC (the
	 * ranking's deterministic algorithms only: the same bits every run,
	 * what parity tests use). A candidate that fails or needs more
	 * workspace than there is falls back to the next. The CPU ignores
	 * it. */
	int conv_algo;
	/* fp32 on a device: 1 lets convolutions and GEMMs round their inputs
	 * to TF32 on tensor cores (Ampere and later; PyTorch's cuDNN
	 * default), 0 keeps fp32 products (parity tests). nn_ctx_init_cuda
	 * sets 1 on compute capability 8.0 and later, 0 before; callers may
	 * change it before making a model. The CPU ignores it. */
	int tf32;
	/* How models made on this context lay out their activations, read
	 * by nn_model_create (a model keeps it): NN_CL_OFF (0, the default:
	 * NCHW), NN_CL_ON (channels-last, N x H x W x C, as cuDNN's tensor
	 * cores read them and PyTorch's channels_last stores them; needs a
	 * model whose linear layers read 1x1 maps, every one but vgg16, else
	 * nn_model_create fails) or NN_CL_AUTO (on where it pays: on a
	 * device in 16 bits, or in fp32 with tf32 set, with a model that
	 * can; off otherwise). The weights, their gradients, checkpoints and results
	 * do not change: on the CPU a channels-last model computes the same
	 * bits as an NCHW one (it transposes around its NCHW kernels, a
	 * reference, not a speed-up). nn_model_channels_last says what a
	 * model got. */
	int channels_last;
	/* 1 once nn_ctx_freeze_workspace ran: the workspace never grows
	 * again (the library's own) */
	int workspace_frozen;
} nn_ctx;

enum { NN_WINO_AUTO = 0, NN_WINO_OFF = 1, NN_WINO_ALL = 2 };
enum { NN_MEMPLAN_ON = 0, NN_MEMPLAN_OFF = 1, NN_MEMPLAN_POISON = 2 };
enum { NN_PREC_FP32 = 0, NN_PREC_BF16 = 1, NN_PREC_FP16 = 2 };
/* The NN_PREC_* a precision's name ("fp32", "bf16", "fp16") stands for;
 * -1 for any other name or NULL. */
int nn_precision_of(const char *name);
enum { NN_CL_OFF = 0, NN_CL_ON = 1, NN_CL_AUTO = 2 };
enum { NN_ALGO_BENCHMARK = 0, NN_ALGO_HEURISTIC = 1, NN_ALGO_DETERMINISTIC = 2 };

/* Sets up a CPU context with `threads` threads (0 = OpenMP's default,
 * at most nn_blas_max_threads()). Errors: IMS_EINVAL (no ctx, threads
 * negative or above nn_blas_max_threads()). */
int nn_ctx_init_cpu(nn_ctx *ctx, int threads, ims_error *err);
/*
 * Sets up a CUDA context on device `device` (0-based, of those visible):
 * a stream, cuDNN and cuBLAS handles bound to it, and a device workspace
 * (train/cuda/). ctx->be then addresses device memory: model storage,
 * activations and the inputs of every kernel are device pointers, except
 * where a function says otherwise (nn_softmax_xent's loss_sum);
 * ctx->threads is 1. Fails with one line that says what to do, ctx then
 * left as nn_ctx_release accepts it:
 *   IMS_EUNSUPPORTED  this machine has no GPU (no NVIDIA driver at all,
 *                     no device visible) or the build has no CUDA
 *                     backend: the only failure a GPU test may skip on;
 *   IMS_EINVAL        device is not one of those visible;
 *   IMS_EIO           a GPU machine that cannot run this build: a driver
 *                     older than the build's CUDA runtime (the line names
 *                     the release to install), a device that cannot be
 *                     selected, cuBLAS missing; or a failure setting up
 *                     the stream, cuDNN or cuBLAS.
 * The device is selected before anything else touches the GPU, so no
 * context is ever made on another one. Every call on the context must
 * come from one thread.
 */
int nn_ctx_init_cuda(nn_ctx *ctx, int device, ims_error *err);
/*
 * The CUDA devices this process sees (after CUDA_VISIBLE_DEVICES) into
 * *count, without making a context on any of them. Fails as
 * nn_ctx_init_cuda does when there is none or the host is broken (*count
 * is then 0).
 */
int nn_cuda_device_count(int *count, ims_error *err);
/*
 * The device a rank uses: its node-local rank (dp_local_rank) modulo the
 * devices it sees. Ranks that each see one GPU (a launcher that sets
 * CUDA_VISIBLE_DEVICES per task) all use device 0, their own; ranks that
 * see every GPU of the machine get one each. 0 when visible < 1.
 */
int nn_cuda_device_for_rank(int local_rank, int visible);
/* Frees the workspace and backend state. ctx may be NULL. */
void nn_ctx_release(nn_ctx *ctx);
/*
 * Returns a workspace of at least n floats (64-byte aligned), owned by ctx
 * and valid until the next call or nn_ctx_release; NULL with err set when
 * memory runs out, or when it would have to grow after
 * nn_ctx_freeze_workspace (IMS_ELIMIT). Contents are undefined.
 */
float *nn_ctx_scratch(nn_ctx *ctx, size_t n, ims_error *err);
/*
 * From now on the context's workspaces (the CPU's scratch and its 16-bit
 * copies, a device's workspace) keep their size: a kernel that would
 * need more fails with IMS_ELIMIT and a message naming the request,
 * instead of reallocating. On a device a reallocation frees memory, and
 * cudaFree waits for every queued kernel, NCCL's included: a rank whose
 * peer died would wait there where no collective timeout can fire, so a
 * training run sizes everything first (nn_model_prepare) and then
 * freezes. A device context allocates here what nn_model_prepare
 * reserved (one cudaMalloc). Errors: the device's (IMS_ENOMEM).
 */
int nn_ctx_freeze_workspace(nn_ctx *ctx, ims_error *err);

/* The backend's name: "cpu" or "cuda". */
const char *nn_ctx_device(const nn_ctx *ctx);
/* 1 when the context's device memory is host memory read in place (the
 * cpu backend): callers may then skip copies. */
int nn_ctx_on_host(const nn_ctx *ctx);

/*
 * Device memory of ctx. nn_ctx_alloc: zeroed, 64-byte aligned on the CPU;
 * NULL when out of memory. nn_ctx_free accepts NULL. The copies move
 * bytes between host memory and device memory; on a device they wait for
 * the work queued before them. Errors: the device's (IMS_EIO).
 */
void *nn_ctx_alloc(nn_ctx *ctx, size_t bytes);
void nn_ctx_free(nn_ctx *ctx, void *p);
int nn_ctx_to_device(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		     ims_error *err);
int nn_ctx_to_host(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		   ims_error *err);
/* Copies bytes from device memory src to device memory dst (not
 * overlapping), after the work queued before it; on a device it is queued
 * and the host does not wait. Errors: the device's (IMS_EIO). */
int nn_ctx_copy(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		ims_error *err);
/* Blocks until every piece of work queued on ctx has run; reports an
 * asynchronous device error. Nothing to wait for on the CPU: 0. */
int nn_ctx_sync(nn_ctx *ctx, ims_error *err);
/*
 * Recording (CUDA graphs; a device whose backend can record, else
 * nn_ctx_can_record says 0 and the others fail). Between
 * nn_ctx_record_begin and nn_ctx_record_end the work the calling thread
 * queues on ctx is recorded, not run: nothing may wait for the device
 * (a copy to the host, nn_ctx_sync, an allocation), or the recording
 * fails. nn_ctx_record_end stops recording and, with keep and no
 * failure, gives the recording as *out (else NULL; nothing of it ran).
 * nn_ctx_replay queues the recorded work once more, with the same
 * arguments and addresses; the host code that queued it does not run
 * (nn_model_forward_host does a forward pass's share). nn_graph_free
 * accepts NULL. train/loop/graphs.c records a training step's passes.
 */
typedef struct nn_graph nn_graph;
int nn_ctx_can_record(const nn_ctx *ctx);
int nn_ctx_record_begin(nn_ctx *ctx, ims_error *err);
int nn_ctx_record_end(nn_ctx *ctx, int keep, nn_graph **out, ims_error *err);
int nn_ctx_replay(nn_ctx *ctx, nn_graph *g, ims_error *err);
void nn_graph_free(nn_ctx *ctx, nn_graph *g);

/* For profiling: nn_ctx_sync, then *t = ims_now(), so the time counts
 * the work queued before it; *t is 0 after an error. */
int nn_ctx_sync_now(nn_ctx *ctx, double *t, ims_error *err);
/* The device's PCI bus id ("0000:3b:00.0") into buf (len bytes), by which
 * NVML finds it (train/gpumon.h); "" on the CPU. */
int nn_ctx_pci_bus_id(nn_ctx *ctx, char *buf, int len, ims_error *err);
/*
 * One line naming what a device context runs on, into buf (cap bytes,
 * cut to fit): the GPU and its compute capability, the CUDA versions of
 * the driver and the runtime, cuDNN's and cuBLAS's, and the file each of
 * those libraries (and NCCL, where loaded) was loaded from. Two runs of
 * one binary that differ in speed on one machine differ here first when
 * a library search path chose another cuDNN or driver library. "" on the
 * CPU. Returns the length written.
 */
int nn_ctx_describe(const nn_ctx *ctx, char *buf, size_t cap);

/*
 * A CPU context whose backend also stages batches as a device does (two
 * slots, a copy queued per batch, host memory for batches through
 * nn_ctx_host_alloc), its "device" memory being host memory: the CPU twin
 * of a device run, so the training loop's device path is tested on a
 * machine without a GPU (train/stage_host.c). Like a device, it copies a
 * batch when the slot is first read (nn_stage_get), not when the copy is
 * queued, and it fails on every break of the slot protocol (nn_stage_*
 * below) with IMS_EINVAL, including host memory reused while a copy from
 * it was queued. Host batch memory freed while a copy from it is queued
 * ends the process with one line on stderr (abort), as a free cannot
 * report it: free the stage first. Its kernels, 16-bit entries and
 * nn_unscale_check are the CPU's, so every precision computes the plain
 * CPU's bits. For tests. Same arguments as nn_ctx_init_cpu; IMS_ENOMEM
 * too.
 */
int nn_ctx_init_cpu_staged(nn_ctx *ctx, int threads, ims_error *err);

/* ---- the BLAS (ctx.c) ---------------------------------------------------- */

/* The OpenBLAS kernel set in use ("SkylakeX", "Haswell", "Prescott"...). */
const char *nn_blas_core(void);

/* The threads OpenBLAS was built to serve at once (its MAX_THREADS; INT_MAX
 * when its configuration does not say): the most a CPU context takes. */
int nn_blas_max_threads(void);
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
/*
 * OpenBLAS starts threads of its own when it loads (one fewer than the
 * CPUs), and each takes one of its buffers (below) for its life as it
 * starts, racing the program's own start-up; imshard never gives them
 * work (its kernels call OpenBLAS one thread at a time, from their
 * OpenMP teams). Under a limit on address space or data (ulimit -v, -d)
 * a thread whose buffer does not fit retries for ever, and the process
 * spins, then hangs at exit, where OpenBLAS waits for its threads.
 * 1 when such a limit is set and OpenBLAS runs such threads, unless
 * OPENBLAS_NUM_THREADS is 1 already. OpenBLAS reads OPENBLAS_NUM_THREADS
 * when it loads, so a program acts on this by setting it to 1 and
 * re-executing itself (imshard-train does).
 */
int nn_blas_threads_at_risk(void);
/*
 * What every program running networks does first, before anything else
 * of its start-up: sets OPENBLAS_CORETYPE (when nn_blas_better_core
 * names a kernel set; IMSHARD_BLAS_PICKED then holds OpenBLAS's own
 * choice, for a line saying so) and OPENBLAS_NUM_THREADS=1 (when
 * nn_blas_threads_at_risk), and returns 1 when it set either: the
 * program then re-executes itself (execv("/proc/self/exe", argv)), as
 * OpenBLAS reads both when it loads. The variables it sets make it
 * return 0 in the restarted process. 0: nothing to do.
 */
int nn_blas_restart_env(void);

/*
 * OpenBLAS takes a buffer of its own (BUFFER_SIZE plus a page: 128 MiB on
 * its default x86-64 and arm64 builds) for each GEMM running at once: its
 * buffers are a pool shared by all threads, which grows when every buffer
 * is taken (one per compute thread in a step) and is kept for the
 * process's life. When making a buffer fails it retries forever: a
 * process under a memory limit (ulimit -v, or RLIMIT_DATA) spins at full
 * CPU with no word. nn_ctx_reserve_blas checks, on a CPU context, that the
 * limits leave room for a buffer per compute thread beside what the
 * process maps once those threads are started, and that the system maps
 * them, then takes them all at once and hands them back, so no later call of a step makes one,
 * however its threads are scheduled. Call it once the model and
 * everything else of a run is allocated. A device context: 0, nothing
 * done.
 * Errors: IMS_ENOMEM, naming the limit, what is mapped and what the
 * buffers need.
 */
int nn_ctx_reserve_blas(nn_ctx *ctx, ims_error *err);
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

/*
 * As nn_model_create, without drawing weights, for a caller that loads
 * every tensor next (nn_model_load_weights, nn_checkpoint_load_resume):
 * every parameter, running statistic and counter is 0 (drawing them is
 * most of the work of making a model that evaluates a few images, and
 * the load overwrites them all). Until something says every tensor was
 * written (nn_model_set_loaded, which the checkpoint library's loads
 * call), nn_model_forward refuses the model (IMS_EINVAL, "cannot run
 * NAME: its weights were never loaded ...") and nn_checkpoint_save
 * refuses to save it: a tensor left out is never computed with, nor
 * written, as a silent 0. Errors: nn_model_create's.
 */
int nn_model_create_unset(nn_ctx *ctx, const char *name, int classes, int in_h,
			  int in_w, int max_batch, nn_model **out, ims_error *err);
/* Says every tensor of m was written (a model of nn_model_create_unset
 * may run from now on; for one of nn_model_create, nothing changes). m
 * may be NULL. */
void nn_model_set_loaded(nn_model *m);
/* 1 while m, made by nn_model_create_unset, has not been loaded
 * (nn_model_set_loaded); 0 otherwise (NULL included). */
int nn_model_weights_unset(const nn_model *m);
/* Frees the model and its device memory. m may be NULL. */
void nn_model_free(nn_model *m);

const char *nn_model_name(const nn_model *m);
/* 1 when m stores its activations channels-last (ctx->channels_last at
 * nn_model_create), 0 for NCHW. */
int nn_model_channels_last(const nn_model *m);
int nn_model_classes(const nn_model *m);
/* The input height the model was built for (its width is the same). */
int nn_model_input_size(const nn_model *m);
/* Named tensors in state_dict order. */
int nn_model_tensor_count(const nn_model *m);
const nn_tensor_info *nn_model_tensor(const nn_model *m, int i);
/* Index of the tensor called name, or -1. */
int nn_model_find(const nn_model *m, const char *name);
/* The last gradient element backward writes: the last trained tensor's
 * last (each tensor is padded to 16 floats, and padding is never
 * written, so a value put there outlives the step). */
size_t nn_model_last_grad(const nn_model *m);

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
 * The host's share of a forward pass whose device work was recorded
 * (nn_ctx_record_begin) and is being replayed: what nn_model_forward
 * leaves on the host (the batch-norm counters, the pass backward reads,
 * *logits) without queuing anything. The replay must be of a pass
 * recorded with the same x, n and train, since the last
 * nn_model_set_use (nn_model_arena).
 */
int nn_model_forward_host(nn_model *m, const float *x, int n, int train,
			  const float **logits, ims_error *err);
/* 1 when a training forward pass of m draws dropout (its masks follow
 * the pass's dropout_seed and nn_model_set_rank), else 0. */
int nn_model_has_dropout(const nn_model *m);
/* The activations' arena, whose address every pass reads: it changes
 * when nn_model_set_use reallocates it, and a recording that read the
 * old one must not be replayed. */
const void *nn_model_arena(const nn_model *m);
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
/*
 * Whether m can train on batches of n samples: batch norm in training
 * (not frozen) normalises each channel over the batch's N x H x W values
 * and needs more than one (PyTorch refuses one too). Errors: IMS_EINVAL
 * naming the first layer that would see one value per channel and the
 * smallest batch that gives it two.
 */
int nn_model_check_train_batch(const nn_model *m, int n, ims_error *err);
/*
 * Says that m trains as rank `rank` of `world` data-parallel ranks whose
 * batches the loader deals out in turn (global sample rank + k * world is
 * the rank's local sample k, augment/augment.h): each training forward
 * then draws the dropout mask of a sample's element from its place in
 * the global batch, so the ranks drop what one rank given the whole
 * batch would, not all the same units (0 of 1 when built). Nothing else
 * depends on it; evaluation draws no dropout.
 * Errors: IMS_EINVAL (world < 1, rank outside [0, world)).
 */
int nn_model_set_rank(nn_model *m, int rank, int world, ims_error *err);
/* Multiply-accumulate count of one forward pass of one sample (x2 = FLOPs). */
double nn_model_macs(const nn_model *m);
/*
 * Plan time, before the first training step: on a device, chooses every
 * convolution's algorithms for batches of max_batch in every direction
 * the model's use runs (timing them on the model's own buffers with
 * NN_ALGO_BENCHMARK, which overwrites the activations and gradients:
 * nothing a pass left survives), reserves the workspace they and the
 * loss need, and freezes the context's workspace
 * (nn_ctx_freeze_workspace). Later shapes (a short last batch) choose
 * among the algorithms that fit what is there. Does nothing on the CPU.
 * Errors: the device's; IMS_EUNSUPPORTED when a convolution has no
 * algorithm.
 */
int nn_model_prepare(nn_model *m, ims_error *err);

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
	int precision;            /* NN_PREC_*: activations of 4 or 2 bytes */
	size_t weight_copy_bytes; /* mixed precision: the weights' 16-bit
				     copy and the widened logits, besides
				     the arena; fp32 channels-last: the
				     weights' copy; else 0 */
} nn_model_memory;

/* Fills *out for m. */
void nn_model_memory_info(const nn_model *m, nn_model_memory *out);

/* ---- where a pass's time goes (model.c) --------------------------------- */

/* Layer kinds a profile sums by; NN_PROF_CONVERT is mixed precision's
 * rounding of the input and the weights and widening of the logits. */
enum {
	NN_PROF_CONV,
	NN_PROF_BN,
	NN_PROF_RELU,
	NN_PROF_POOL,
	NN_PROF_LINEAR,
	NN_PROF_ADD,
	NN_PROF_DROPOUT,
	NN_PROF_CONVERT,
	NN_PROF_KINDS
};
/* "conv", "batchnorm", "relu", "pool", "linear", "add", "dropout",
 * "convert" */
extern const char *const nn_profile_kinds[NN_PROF_KINDS];

typedef struct nn_profile {
	double forward_s[NN_PROF_KINDS];  /* summed over the passes timed */
	double backward_s[NN_PROF_KINDS];
	uint64_t forwards, backwards;     /* passes timed */
} nn_profile;

/*
 * With p, each later forward and backward of m waits for every layer's
 * kernels (nn_ctx_sync, so a device's queue does not hide them) and adds
 * each layer's time to *p by kind: slower, and the same results. NULL
 * turns it off. p is the caller's and must outlive its use.
 */
void nn_model_set_profile(nn_model *m, nn_profile *p);

/* ---- loss and scores (layers/softmax_xent.c, device.c) ------------------ */

/*
 * Softmax cross-entropy of logits[N, K] against integer labels, with label
 * smoothing s (PyTorch's CrossEntropyLoss(label_smoothing=s): target
 * (1 - s) one-hot + s / K), on ctx's device: logits, labels and dlogits
 * are device memory, loss_sum host memory (the call waits for the
 * device). *loss_sum gets the SUM of per-sample losses (double, so ranks
 * can sum and divide). When dlogits is not NULL it is OVERWRITTEN with
 * scale * d(loss_sum)/d(logits), so scale = 1/N gives the gradient of the
 * mean. Errors: IMS_EINVAL (n or k < 1, s outside [0, 1], a label outside
 * [0, K)).
 */
int nn_softmax_xent(nn_ctx *ctx, int n, int k, const float *logits,
		    const int32_t *labels, float smoothing, float scale,
		    double *loss_sum, float *dlogits, ims_error *err);

/*
 * Training steps' losses and top-1 hits summed where the loss is computed
 * (device memory on a device), so that a step need not wait for the
 * device to read its loss: nn_xent_tally adds to it, and the trainer
 * reads it (nn_ctx_to_host) only when it reports, every --log-every
 * steps.
 */
typedef struct nn_tally {
	double loss_sum;        /* per-sample losses, summed */
	double correct;         /* top-1 hits */
	int64_t nonfinite_step; /* the first step whose loss was NaN or
				   infinite; 0: none */
	int64_t bad_label_step; /* the first step with a label outside
				   [0, K); 0: none */
} nn_tally;

/*
 * nn_softmax_xent for step `step` (from 1) without waiting for the
 * device: dlogits as there; the loss sum and the top-1 hits
 * (nn_topk_correct's) of the n samples are added to *tally (ctx's
 * memory), in that order, and the step is noted in it when its loss is
 * not finite. A label outside [0, K) notes the step instead and leaves
 * dlogits and the sums as they were. Queued on a device; the same host
 * code on the CPU. Errors: n or k < 1, s outside [0, 1].
 */
int nn_xent_tally(nn_ctx *ctx, int n, int k, const float *logits,
		  const int32_t *labels, float smoothing, float scale,
		  float *dlogits, int64_t step, nn_tally *tally,
		  ims_error *err);

/*
 * Counts samples whose label is among the top `topk` logits (ties counted
 * against the sample: a label tied with the k-th logit is a miss only when
 * other classes at that value come first in index order). Samples with
 * skip[i] != 0 are not counted (skip may be NULL). Host memory; any
 * thread.
 */
int nn_topk_correct(int n, int k, const float *logits, const int32_t *labels,
		    int topk, const uint8_t *skip);

/*
 * fp16 loss scaling's gradient check (train/loss_scale.h): sets
 * *found_inf to 1 when any of g[0..n) (device memory) is Inf or NaN, else
 * 0, and multiplies every g[i] by inv (the 1/S that unscales them), in
 * one pass (on a device: one kernel, and the call waits to read the
 * flag; on the CPU a loop over host memory).
 */
int nn_unscale_check(nn_ctx *ctx, float *g, size_t n, float inv,
		     int *found_inf, ims_error *err);

/* ---- batches onto a device (device.c) ------------------------------------ */

/*
 * A device run copies each batch from host memory into one of two device
 * slots on a copy stream, so the copy of the next batch overlaps the step
 * that computes on the current one. On the CPU backend there is no
 * staging (kernels read the host batch in place): nn_ctx_has_staging says
 * 0 and nn_stage_create fails with IMS_EUNSUPPORTED.
 *
 * Caveats: a stage is used with the context it was made for, by that
 * context's thread. A slot's host batch may be reused once nn_stage_get
 * returned for it; the slot itself once nn_stage_done was called after
 * the last work that reads it was queued. Every backend checks this
 * protocol (a slot refilled while its copy is queued or a step reads it,
 * a slot taken without a copy, released while unread: IMS_EINVAL).
 */
typedef struct nn_stage nn_stage;

/* 1 when ctx's backend stages batches (a device, or the staged CPU twin). */
int nn_ctx_has_staging(const nn_ctx *ctx);

/*
 * Makes two device slots of x_bytes (batch) and label_bytes (labels) each,
 * a copy stream and its events. Errors: IMS_EUNSUPPORTED (no staging on
 * this backend), IMS_ENOMEM, the device's.
 */
int nn_stage_create(nn_ctx *ctx, size_t x_bytes, size_t label_bytes,
		    nn_stage **out, ims_error *err);
/* Queues the copy of host x and labels into slot (0 or 1) after the work
 * that last used the slot (nn_stage_done) has finished on the device; does
 * not wait. Pinned host memory (nn_ctx_host_alloc) copies asynchronously,
 * pageable memory through the driver: x must stay as it is until the
 * slot's nn_stage_get returns. IMS_EINVAL when the slot is not free (the
 * copy queued into it before was not waited for, or a step still reads
 * it). */
int nn_stage_put(nn_ctx *ctx, nn_stage *s, int slot, const void *x,
		 size_t x_bytes, const int32_t *labels, size_t label_bytes,
		 ims_error *err);
/* Blocks until the slot's copy is done (the host batch may then be
 * reused), makes the compute stream wait for it, and gives the slot's
 * device pointers. IMS_EINVAL when no copy was queued into the slot. */
int nn_stage_get(nn_ctx *ctx, nn_stage *s, int slot, float **x,
		 int32_t **labels, ims_error *err);
/* The slot is free once the compute work queued so far has run: call it
 * after the step that reads the slot is queued. IMS_EINVAL when no step
 * reads the slot (no nn_stage_get since it was last released). */
int nn_stage_done(nn_ctx *ctx, nn_stage *s, int slot, ims_error *err);
/* The caller is about to let host memory `host` (a batch's start) be
 * refilled, as the loader does with a batch once the next is taken: 0
 * when no queued copy reads from it, IMS_EINVAL when one does (its slot's
 * nn_stage_get has not returned: the copy may not have run yet). s may
 * be NULL (nothing staged: 0). */
int nn_stage_reuse(nn_ctx *ctx, nn_stage *s, const void *host, ims_error *err);
/* Waits for the queued copies, then frees the slots and streams: call it
 * before freeing the host memory they copy from. s may be NULL. */
void nn_stage_free(nn_ctx *ctx, nn_stage *s);

/*
 * Host memory for the batches a staging backend copies from: on the CUDA
 * backend page-locked memory (cudaHostAlloc, portable: pinned for every
 * CUDA context, so the copy engine of whichever GPU a rank uses reads it
 * directly), on the staged CPU twin page-aligned host memory;
 * nn_ctx_host_alloc returns NULL on the plain CPU backend (batches need no
 * special memory there) and when out of memory. nn_ctx_host_free takes
 * what nn_ctx_host_alloc gave (NULL accepted) and must be called before
 * nn_ctx_release. nn_ctx_host_memory describes that memory for a log
 * line ("pinned memory (cudaHostAlloc)"), or is NULL when the backend has
 * none.
 */
void *nn_ctx_host_alloc(nn_ctx *ctx, size_t bytes);
void nn_ctx_host_free(nn_ctx *ctx, void *p);
const char *nn_ctx_host_memory(const nn_ctx *ctx);

#endif
