/*
 * ctx_nocuda.c - nn_ctx_init_cuda and nn_cuda_device_count in a build without the CUDA backend
 * (configured with IMSHARD_WITH_CUDA=OFF, or without the CUDA toolkit,
 * cuDNN or cuBLAS): it exists so callers need no #ifdef, and says so.
 */
#include <string.h>

#include "train/nn_internal.h"

static int no_backend(ims_error *err)
{
	return ims_fail(err, IMS_EUNSUPPORTED,
			"cannot use --device cuda: this build has no CUDA backend "
			"(configured without CUDA, cuDNN or cuBLAS); use --device cpu");
}

int nn_ctx_init_cuda(nn_ctx *ctx, int device, ims_error *err)
{
	(void)device;
	if (ctx)
		memset(ctx, 0, sizeof(*ctx));
	return no_backend(err);
}

int nn_cuda_device_count(int *count, ims_error *err)
{
	*count = 0;
	return no_backend(err);
}
