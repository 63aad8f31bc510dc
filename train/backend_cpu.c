/*
 * backend_cpu.c - the CPU backend: the table of the reference kernels that
 * live beside their layers in train/layers/.
 */
#include <stdlib.h>
#include <string.h>

#include "train/nn_internal.h"

/* 64-byte aligned so that vector loads of any parameter block are aligned
 * at its start; zeroed so a fresh model's gradients read as zero. */
static void *cpu_alloc(nn_ctx *ctx, size_t bytes)
{
	(void)ctx;
	void *p = NULL;
	size_t n = (bytes + 63) & ~(size_t)63;
	if (posix_memalign(&p, 64, n ? n : 64))
		return NULL;
	memset(p, 0, n ? n : 64);
	return p;
}

static void cpu_free(nn_ctx *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static int cpu_zero(nn_ctx *ctx, void *p, size_t bytes, ims_error *err)
{
	(void)ctx;
	(void)err;
	memset(p, 0, bytes);
	return 0;
}

static int cpu_copy(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		    ims_error *err)
{
	(void)ctx;
	(void)err;
	if (dst != src)
		memcpy(dst, src, bytes);
	return 0;
}

/* The layer entries are layers/mixed.c's: each layer's fp32 kernel, or
 * the mixed-precision graph when ctx->precision is bf16 or fp16. */
const nn_backend nn_backend_cpu = {
	.name = "cpu",
	.conv_forward = nn_cpu_mp_conv_forward,
	.conv_backward = nn_cpu_mp_conv_backward,
	.linear_forward = nn_cpu_mp_linear_forward,
	.linear_backward = nn_cpu_mp_linear_backward,
	.bn_forward_train = nn_cpu_mp_bn_forward_train,
	.bn_forward_eval = nn_cpu_mp_bn_forward_eval,
	.bn_backward = nn_cpu_mp_bn_backward,
	.bn_backward_frozen = nn_cpu_mp_bn_backward_frozen,
	.relu_forward = nn_cpu_mp_relu_forward,
	.relu_backward = nn_cpu_mp_relu_backward,
	.maxpool_forward = nn_cpu_mp_maxpool_forward,
	.maxpool_backward = nn_cpu_mp_maxpool_backward,
	.avgpool_forward = nn_cpu_mp_avgpool_forward,
	.avgpool_backward = nn_cpu_mp_avgpool_backward,
	.dropout_forward = nn_cpu_mp_dropout_forward,
	.dropout_backward = nn_cpu_mp_dropout_backward,
	.add_forward = nn_cpu_mp_add_forward,
	.accumulate = nn_cpu_mp_accumulate,
	.softmax_xent = nn_cpu_softmax_xent,
	.act_from_f32 = nn_cpu_mp_from_f32,
	.act_to_f32 = nn_cpu_mp_to_f32,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.zero = cpu_zero,
	.to_device = cpu_copy,
	.to_host = cpu_copy,
	.release = nn_cpu_release,
};

/* ---- host staging, for tests of the device training loop --------------- */

/*
 * The device loop's host side (batches staged into two slots, the next
 * one taken from the loader while a step runs, logits read back, a
 * separate context for validation's loss) normally runs only with a GPU.
 * With this table the CPU backend runs it too, its "device" being host
 * memory and its copies memcpy, so tests can hold the loop to the plain
 * CPU loop's results bit for bit on a machine without a GPU
 * (nn_ctx_init_cpu_staged; imshard-train's IMSHARD_TEST_HOST_STAGE).
 */
typedef struct host_stage {
	void *x[2];
	int32_t *labels[2];
	size_t x_bytes, label_bytes;
	int put[2]; /* a copy landed in the slot since its last stage_get */
} host_stage;

static void host_stage_free(nn_stage *st)
{
	host_stage *s = (host_stage *)st;
	if (!s)
		return;
	for (int i = 0; i < 2; i++) {
		free(s->x[i]);
		free(s->labels[i]);
	}
	free(s);
}

static int host_stage_create(nn_ctx *ctx, size_t x_bytes, size_t label_bytes,
			     nn_stage **out, ims_error *err)
{
	host_stage *s = calloc(1, sizeof(*s));
	int ok = s != NULL;
	for (int i = 0; ok && i < 2; i++) {
		/* aligned as the loader's batches are */
		s->x[i] = cpu_alloc(ctx, x_bytes);
		s->labels[i] = cpu_alloc(ctx, label_bytes);
		ok = s->x[i] && s->labels[i];
	}
	if (!ok) {
		host_stage_free((nn_stage *)s);
		return ims_fail(err, IMS_ENOMEM, "cannot stage batches: out of memory");
	}
	s->x_bytes = x_bytes;
	s->label_bytes = label_bytes;
	*out = (nn_stage *)s;
	return 0;
}

static int host_stage_put(nn_stage *st, int slot, const void *x, size_t x_bytes,
			  const int32_t *labels, size_t label_bytes,
			  ims_error *err)
{
	host_stage *s = (host_stage *)st;
	RETURN_IF(slot < 0 || slot > 1 || x_bytes > s->x_bytes ||
			  label_bytes > s->label_bytes,
		  err, IMS_EINVAL, "cannot stage a batch: slot %d, %zu + %zu bytes",
		  slot, x_bytes, label_bytes);
	memcpy(s->x[slot], x, x_bytes);
	memcpy(s->labels[slot], labels, label_bytes);
	s->put[slot] = 1;
	return 0;
}

static int host_stage_get(nn_stage *st, int slot, float **x, int32_t **labels,
			  ims_error *err)
{
	host_stage *s = (host_stage *)st;
	/* a get without its put would train on a stale batch: the loop's
	 * bookkeeping is what this table exists to test */
	RETURN_IF(slot < 0 || slot > 1 || !s->put[slot], err, IMS_EINVAL,
		  "cannot take staged batch %d: no copy was queued into it", slot);
	s->put[slot] = 0;
	*x = s->x[slot];
	*labels = s->labels[slot];
	return 0;
}

static int host_stage_done(nn_stage *st, int slot, ims_error *err)
{
	(void)st;
	RETURN_IF(slot < 0 || slot > 1, err, IMS_EINVAL,
		  "cannot release batch slot %d", slot);
	return 0;
}

/* The batches' host memory, taken through the same entries a device's
 * pinned memory is: page-aligned as the loader's own default. */
static void *host_batch_alloc(nn_ctx *ctx, size_t bytes)
{
	(void)ctx;
	void *p = NULL;
	if (posix_memalign(&p, 4096, bytes ? bytes : 1))
		return NULL;
	return p;
}

const nn_backend *nn_backend_cpu_host_staged(void)
{
	static nn_backend b;
	if (!b.name) {
		b = nn_backend_cpu;
		b.stage_create = host_stage_create;
		b.stage_put = host_stage_put;
		b.stage_get = host_stage_get;
		b.stage_done = host_stage_done;
		b.stage_free = host_stage_free;
		b.host_alloc = host_batch_alloc;
		b.host_free = cpu_free;
		b.host_memory = "page-aligned host memory (staged as for a device)";
		b.name = "cpu";
	}
	return &b;
}
