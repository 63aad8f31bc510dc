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
	.add_relu_forward = nn_cpu_mp_add_relu_forward,
	.accumulate = nn_cpu_mp_accumulate,
	.softmax_xent = nn_cpu_softmax_xent,
	.act_from_f32 = nn_cpu_mp_from_f32,
	.act_to_f32 = nn_cpu_mp_to_f32,
	.act_from_f32_nhwc = nn_cpu_mp_from_f32_nhwc,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.zero = cpu_zero,
	.to_device = cpu_copy,
	.to_host = cpu_copy,
	.copy = cpu_copy,
	.release = nn_cpu_release,
};
