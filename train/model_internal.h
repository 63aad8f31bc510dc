/*
 * model_internal.h - the graph a model is built from, shared by model.c
 * (storage, forward, backward) and models.c (the architectures).
 *
 * A model is a list of nodes in topological order; each reads one or two
 * earlier nodes (or the model input, node -1) and owns its output and the
 * gradient of that output, max_batch samples each. Builders append nodes
 * and named tensors in torchvision's registration order, so the tensor
 * list is the state_dict order. A builder that fails records the error in
 * the model and returns -1; later builders then do nothing, so an
 * architecture reads as a straight list of layers and is checked once at
 * the end.
 */
#ifndef IMSHARD_MODEL_INTERNAL_H
#define IMSHARD_MODEL_INTERNAL_H

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
	float *y, *dy; /* max_batch samples; flatten aliases its input's */
	nn_conv_desc conv;
	nn_bn_desc bn;
	nn_pool_desc pool;
	nn_linear_desc lin;
	float drop_p;
	int wt, bt;    /* tensor indices of weight/bias (bn: gamma/beta), -1 */
	int rm, rv, nbt; /* bn running mean/var and counter tensors */
	float *save_mean, *save_invstd;
	int32_t *argmax;
	uint8_t *mask;
	int head;
	int dy_set;    /* backward: dy written in this pass (flatten: see its input) */
} nn_node;

struct nn_model {
	char name[32];
	int classes, in_h, in_w, max_batch;
	nn_ctx *ctx;
	nn_node *nodes;
	int n_nodes, cap_nodes;
	nn_tensor_info *tensors;
	nn_init *inits;    /* per tensor */
	int *fan_in, *fan_out;
	int n_tensors, cap_tensors;
	size_t n_params, n_buffers, n_counters;
	float *params, *grads, *buffers;
	int64_t *counters;
	int last_n, last_train; /* of the last forward */
	const float *last_x;    /* its input, read again by backward */
	int frozen_bn;          /* batch norm on running statistics in training */
	double macs;
	nn_grad_ready_fn grad_hook; /* nn_model_set_grad_hook */
	void *grad_hook_ud;
	int build_rc;      /* first builder error, 0 if none */
	ims_error *build_err;
};

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

/* models.c: appends the named architecture's nodes; 0 or IMS_EINVAL. */
int nn_models_build(nn_model *m, const char *name, ims_error *err);
extern const char *const nn_models_known[];

#endif
