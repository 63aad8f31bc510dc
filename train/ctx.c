/*
 * ctx.c - the compute context: thread count, workspace, backend.
 */
#include <omp.h>
#include <stdlib.h>

#include "train/nn_internal.h"

int nn_ctx_init_cpu(nn_ctx *ctx, int threads, ims_error *err)
{
	RETURN_IF(!ctx, err, IMS_EINVAL, "cannot set up a context: no context");
	RETURN_IF(threads < 0, err, IMS_EINVAL,
		  "cannot set up a context: %d threads", threads);
	ctx->be = &nn_backend_cpu;
	ctx->threads = threads > 0 ? threads : omp_get_max_threads();
	ctx->scratch = NULL;
	ctx->scratch_floats = 0;
	ctx->dev = NULL;
	return 0;
}

void nn_ctx_release(nn_ctx *ctx)
{
	if (!ctx)
		return;
	free(ctx->scratch);
	ctx->scratch = NULL;
	ctx->scratch_floats = 0;
}

float *nn_ctx_scratch(nn_ctx *ctx, size_t n, ims_error *err)
{
	if (n <= ctx->scratch_floats)
		return ctx->scratch;
	/* Grow by half again so a sequence of slightly larger requests does
	 * not reallocate every time. */
	size_t want = n + n / 2;
	size_t bytes = (want * sizeof(float) + 63) & ~(size_t)63;
	void *p = NULL;
	if (want > SIZE_MAX / sizeof(float) / 2 || posix_memalign(&p, 64, bytes)) {
		ims_fail(err, IMS_ENOMEM,
			 "cannot allocate a %zu-float workspace: out of memory", n);
		return NULL;
	}
	free(ctx->scratch);
	ctx->scratch = p;
	ctx->scratch_floats = want;
	return ctx->scratch;
}
