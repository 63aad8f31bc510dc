/*
 * model_internal.h - the model's parts, shared by model.c (storage),
 * model_build.c and models.c (the graph and the architectures),
 * model_pass.c (forward and backward) and model_plan.c (the memory plan).
 * struct nn_model is a short list of parts, one job each (nn_graph,
 * nn_store, nn_form, nn_model_mem, nn_last_pass, nn_hooks); each part
 * says what it is for and who owns its buffers.
 *
 * A model is a list of nodes in topological order; each reads one or two
 * earlier nodes (or the model input, node -1) and writes its output, whose
 * gradient backward writes, max_batch samples each. Where those live is
 * the memory plan's (model_plan.c): one arena, bytes shared by buffers
 * that are never live together. Builders append nodes
 * and named tensors in torchvision's registration order, so the tensor
 * list is the state_dict order. A builder that fails records the error in
 * the model and returns -1; later builders then do nothing, so an
 * architecture reads as a straight list of layers and is checked once at
 * the end.
 */
#ifndef IMSHARD_MODEL_INTERNAL_H
#define IMSHARD_MODEL_INTERNAL_H

#include "train/memplan.h"
#include "train/nn_internal.h"
#include "train/nn.h"

typedef enum nn_op {
	NN_OP_CONV,
	NN_OP_BN,
	NN_OP_RELU,
	NN_OP_MAXPOOL,
	NN_OP_AVGPOOL,
	NN_OP_LINEAR,
	NN_OP_DROPOUT,
	NN_OP_FLATTEN,
	NN_OP_ADD
} nn_op;

/* How a trained tensor starts (torchvision's per-model init). */
typedef enum nn_init {
	NN_INIT_ZERO,
	NN_INIT_ONE,
	NN_INIT_KAIMING_FAN_OUT, /* normal, std sqrt(2 / fan_out) */
	NN_INIT_UNIFORM_FAN_IN,  /* uniform +-1/sqrt(fan_in): nn.Linear's default */
	NN_INIT_NORMAL_001       /* normal, std 0.01 (VGG's linear layers) */
} nn_init;

typedef struct nn_node {
	nn_op op;
	int in0, in1;  /* input nodes, -1 = the model input; in1 for add only */
	int c, h, w;   /* output shape of one sample */
	/* Bound from the plan of the pass being run (model_plan.c):
	 * max_batch samples of the activation type (float, or 16-bit values
	 * in mixed precision); flatten aliases its input's. */
	void *y, *dy;
	nn_conv_desc conv;
	nn_bn_desc bn;
	nn_pool_desc pool;
	nn_linear_desc lin;
	float drop_p;
	int wt, bt;    /* tensor indices of weight/bias (bn: gamma/beta), -1 */
	int rm, rv, nbt; /* bn running mean/var and counter tensors */
	float *save_mean, *save_invstd; /* bound like y */
	int32_t *argmax;
	uint8_t *mask;
	int head;
	int dy_set;    /* backward: dy written in this pass (flatten: see its input) */
} nn_node;

/* The buffers of a node the plan places: its output, the output's
 * gradient, max pooling's argmax, dropout's mask, batch norm's saved
 * mean and 1/std (c floats each), and, in mixed precision, node 0's
 * NN_V_INPUT: the model input rounded to 16 bits, which every node that
 * reads the model input reads. Value v = node * NN_V_KINDS + kind. */
enum {
	NN_V_ACT,
	NN_V_GRAD,
	NN_V_ARGMAX,
	NN_V_MASK,
	NN_V_STATS,
	NN_V_INPUT,
	NN_V_KINDS
};

/* The passes a plan is made for: a training forward with the whole
 * backward, one whose backward trains the head alone, evaluation. */
typedef enum nn_plan_mode {
	NN_MODE_TRAIN,
	NN_MODE_HEAD,
	NN_MODE_EVAL,
	NN_MODES
} nn_plan_mode;

/*
 * Where each value lives during one kind of pass. Steps number the
 * kernels of the pass: forward of node j is step j, the loss gradient
 * written into the last node's dy step N (N nodes), backward of node j
 * step 2N - j, and the logits stay live to the last step (N in
 * evaluation, 2N + 1 in training) so the caller can read them after
 * backward. Values that share a buffer (an in-place kernel's input and
 * output) are one group.
 */
typedef struct nn_plan {
	int *group;      /* per value: its buffer in bufs, -1 if the pass has none */
	nn_mp_buf *bufs; /* per group: bytes, lifetime in steps, offset */
	int n_bufs;
	int steps;       /* last step + 1 */
	size_t bytes;    /* the arena this pass needs */
} nn_plan;

/* A model's activation memory (model_plan.c). */
typedef struct nn_model_mem {
	nn_plan plans[NN_MODES];
	int kind;             /* ctx->memory_plan at creation: NN_MEMPLAN_* */
	int use;              /* nn_model_use */
	int mode;             /* the plan the last forward ran with */
	void *arena;          /* device memory of arena_bytes */
	size_t arena_bytes;
	size_t unplanned_bytes; /* every value its own bytes */
	void *poison;         /* NN_MEMPLAN_POISON: host bytes of 0xff */
	size_t poison_bytes;
} nn_model_mem;

/*
 * What the builders make (model_build.c, models.c): the nodes in
 * topological order and the named tensors in state_dict order, with how
 * each tensor starts. Arrays and tensor names are the model's (grown by
 * the builders, freed by nn_model_free); a node's buffers point into the
 * arena. build_err is the caller's, borrowed while the model is built.
 */
typedef struct nn_graph {
	nn_node *nodes;
	int n_nodes, cap_nodes;
	nn_tensor_info *tensors;
	nn_init *inits;    /* per tensor */
	int *fan_in, *fan_out;
	int n_tensors, cap_tensors;
	double macs;       /* multiply-adds of one sample's forward */
	int build_rc;      /* first builder error, 0 if none */
	ims_error *build_err;
} nn_graph;

/*
 * The tensors' values in four blocks, each tensor at its offset in its
 * kind's block: parameters, their gradients and the float buffers
 * (batch norm's running statistics) in device memory, the int64 counters
 * on the host. One block each, so that data parallelism averages the
 * gradients in one allreduce and a checkpoint is a walk over the tensor
 * list. The builders count the sizes (model_build.c); model.c allocates
 * and frees the blocks.
 */
typedef struct nn_store {
	size_t n_params;   /* floats, each tensor padded to 16 */
	size_t n_buffers, n_counters;
	float *params, *grads, *buffers;
	int64_t *counters;
	int unset;         /* 1: made by nn_model_create_unset, its weights
			      0 until a load wrote every tensor
			      (nn_model_set_loaded) */
} nn_store;

/*
 * The form the kernels take activations and weights in: the precision
 * (ctx->precision at creation; activations of act_bytes each) and the
 * layout (ctx->channels_last as nn_b_layout settles it), and the copies
 * that form needs (nn_model_copies). In 16 bits the weights' copy is
 * made from the fp32 parameters by each forward, laid out like them, the
 * input's copy holds the batch rounded, and the logits are widened for
 * the loss. Channels-last keeps the two copies in fp32 too: the input as
 * N x H x W x 3, convolution weights c_out x kh x kw x c_in. params16
 * and logits32 are the model's device memory (model.c allocates and
 * frees them); x16 is a place in the arena, bound with the plan.
 */
typedef struct nn_form {
	int precision;     /* NN_PREC_* */
	int channels_last; /* 1: every descriptor's nhwc set (nn_b_layout) */
	size_t act_bytes;
	void *params16;    /* n_params values; NULL without copies */
	void *x16;         /* max_batch inputs; NULL without copies */
	float *logits32;   /* max_batch x classes floats; NULL in fp32 */
} nn_form;

/* What the last forward leaves for backward (model_pass.c). Zeroed
 * when a pass starts and whenever the arena is bound anew, so that
 * backward runs only after a forward that finished on the current
 * binding. */
typedef struct nn_last_pass {
	int n;          /* its batch; 0: nothing to differentiate */
	int train;      /* 1: a training forward */
	const float *x; /* its input, the caller's: backward reads it again */
} nn_last_pass;

/* What the caller hangs on the passes (nn_model_set_profile,
 * nn_model_set_grad_hook), NULL for none: borrowed, never freed here. */
typedef struct nn_hooks {
	nn_profile *prof;            /* the passes add their kernels' times */
	nn_grad_ready_fn grad_ready; /* backward: gradients final from an offset */
	void *grad_ud;               /* grad_ready's first argument */
} nn_hooks;

/* A model: what it was made for, then one part per job. */
struct nn_model {
	char name[32];
	int classes, in_h, in_w, max_batch;
	nn_ctx *ctx;           /* borrowed: outlives the model */
	nn_graph graph;        /* what the builders made */
	nn_store store;        /* the tensors' values */
	nn_form form;          /* precision, layout and their copies */
	nn_model_mem mem;      /* where the activations live */
	nn_last_pass last;     /* what backward reads of the last forward */
	nn_hooks hooks;        /* the caller's callbacks */
	int frozen_bn;         /* batch norm on running statistics in training */
	int rank, world;       /* nn_model_set_rank: dropout's placement */
};

/* 1 when the kernels read the input's and the weights' copies (x16,
 * params16) rather than the caller's batch and params: in 16 bits, and
 * channels-last in any precision. */
static inline int nn_model_copies(const nn_model *m)
{
	return m->form.precision != NN_PREC_FP32 || m->form.channels_last;
}

/* Builders: return the new node's index, or -1 after an error (recorded). */
int nn_b_conv(nn_model *m, const char *name, int in, int c_out, int k,
	      int stride, int pad, int bias, nn_init winit);
int nn_b_bn(nn_model *m, const char *name, int in);
int nn_b_relu(nn_model *m, int in);
int nn_b_maxpool(nn_model *m, int in, int k, int stride, int pad);
int nn_b_adaptive_avgpool(nn_model *m, int in, int h, int w);
int nn_b_flatten(nn_model *m, int in);
int nn_b_linear(nn_model *m, const char *name, int in, int out,
		nn_init winit, nn_init binit);
int nn_b_dropout(nn_model *m, int in, float p);
int nn_b_add(nn_model *m, int a, int b);
/* After the builders: ctx->channels_last resolved for the whole graph
 * (m->channels_last and every descriptor's nhwc); IMS_EUNSUPPORTED where
 * NN_CL_ON cannot be had. */
int nn_b_layout(nn_model *m, ims_error *err);

/* model_plan.c: the memory plan. */

/* The node whose output node i's is (flatten is a view of its input's);
 * -1 for the model input. */
int nn_node_owner(const nn_model *m, int i);
/* Bytes of value v for max_batch samples (0 for a flatten's values). */
size_t nn_value_bytes(const nn_model *m, int v);
/* Makes every mode's plan (ctx->memory_plan decides how) and allocates
 * the arena for m->mem.use. On error nothing is left allocated. */
int nn_mem_create(nn_model *m, ims_error *err);
/* Frees plans, arena and poison bytes. */
void nn_mem_release(nn_model *m);
/* Points every node's buffers into the arena as plan `mode` places them. */
void nn_mem_bind(nn_model *m, nn_plan_mode mode);
/* NN_MEMPLAN_POISON: fills every buffer of the bound plan whose lifetime
 * ends at `step` with 0xff bytes (NaN as floats), so a later read of a
 * dead buffer shows. A no-op in the other kinds. */
int nn_mem_poison_after(nn_model *m, int step, ims_error *err);

/* models.c: appends the named architecture's nodes; 0 or IMS_EINVAL. */
int nn_models_build(nn_model *m, const char *name, ims_error *err);
extern const char *const nn_models_known[];

#endif
