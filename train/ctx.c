/*
 * ctx.c - the compute context: thread count, workspace, backend.
 */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <strings.h>

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
	ctx->dx_overwrite = 0;
	ctx->winograd = NN_WINO_AUTO;
	ctx->precision = NN_PREC_FP32;
	ctx->memory_plan = NN_MEMPLAN_ON;
	ctx->conv_algo = NN_ALGO_BENCHMARK;
	ctx->tf32 = 0;
	ctx->workspace_frozen = 0;
	return 0;
}

void nn_ctx_release(nn_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->be && ctx->be->release)
		ctx->be->release(ctx);
	ctx->dev = NULL;
	free(ctx->scratch);
	ctx->scratch = NULL;
	ctx->scratch_floats = 0;
}

int nn_ctx_workspace_grow(nn_ctx *ctx, size_t have, size_t want,
			  const char *which, ims_error *err)
{
	RETURN_IF(ctx->workspace_frozen && want > have, err, IMS_ELIMIT,
		  "cannot grow the %s from %zu to %zu bytes: it was sized "
		  "before training started, and growing it now could wait on "
		  "a collective that never ends (a kernel asked for more than "
		  "planned)",
		  which, have, want);
	return 0;
}

int nn_ctx_freeze_workspace(nn_ctx *ctx, ims_error *err)
{
	if (ctx->be && ctx->be->workspace_freeze)
		FORWARD_IF_ERR(ctx->be->workspace_freeze(ctx, err));
	ctx->workspace_frozen = 1;
	return 0;
}

float *nn_ctx_scratch(nn_ctx *ctx, size_t n, ims_error *err)
{
	if (n <= ctx->scratch_floats)
		return ctx->scratch;
	if (nn_ctx_workspace_grow(ctx, ctx->scratch_floats * sizeof(float),
				  n * sizeof(float), "cpu workspace", err))
		return NULL;
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

const char *nn_blas_core(void)
{
	const char *c = openblas_get_corename();
	return c ? c : "unknown";
}

const char *nn_blas_better_core(void)
{
	if (getenv("OPENBLAS_CORETYPE"))
		return NULL; /* the user chose */
	/* OpenBLAS's fallbacks for a CPU model it does not know */
	const char *c = nn_blas_core();
	if (strcasecmp(c, "prescott") && strcasecmp(c, "core2") &&
	    strcasecmp(c, "katmai") && strcasecmp(c, "unknown"))
		return NULL;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
		return "SkylakeX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "Haswell";
#endif
	return NULL;
}
