/*
 * ctx.c - the compute context: thread count, workspace, backend.
 */
#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "train/nn_internal.h"

int nn_ctx_init_cpu(nn_ctx *ctx, int threads, ims_error *err)
{
	RETURN_IF(!ctx, err, IMS_EINVAL, "cannot set up a context: no context");
	RETURN_IF(threads < 0, err, IMS_EINVAL,
		  "cannot set up a context: %d threads", threads);
	/* Every thread calls the BLAS and takes a buffer of its own: past
	 * the build's MAX_THREADS OpenBLAS warns, past its spare table it
	 * prints "Program is Terminated" to standard output (into predict's
	 * lines) and reported crashes follow. */
	const int blas_max = nn_blas_max_threads();
	RETURN_IF(threads > blas_max, err, IMS_EINVAL,
		  "cannot use %d threads: this OpenBLAS was built for at most %d "
		  "(MAX_THREADS)",
		  threads, blas_max);
	ctx->be = &nn_backend_cpu;
	ctx->threads = threads > 0 ? threads : omp_get_max_threads();
	if (ctx->threads > blas_max)
		ctx->threads = blas_max; /* more cores than it serves */
	ctx->scratch = NULL;
	ctx->scratch_floats = 0;
	ctx->dev = NULL;
	ctx->dx_overwrite = 0;
	ctx->winograd = NN_WINO_AUTO;
	ctx->precision = NN_PREC_FP32;
	ctx->memory_plan = NN_MEMPLAN_ON;
	ctx->conv_algo = NN_ALGO_BENCHMARK;
	ctx->tf32 = 0;
	ctx->channels_last = NN_CL_OFF;
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

int nn_precision_of(const char *name)
{
	if (!name)
		return -1;
	return !strcmp(name, "fp32")   ? NN_PREC_FP32
	       : !strcmp(name, "bf16") ? NN_PREC_BF16
	       : !strcmp(name, "fp16") ? NN_PREC_FP16
				       : -1;
}

const char *nn_blas_core(void)
{
	const char *c = openblas_get_corename();
	return c ? c : "unknown";
}

int nn_blas_max_threads(void)
{
	/* the build's configuration string: "OpenBLAS 0.3.21 ... MAX_THREADS=64" */
	const char *cfg = openblas_get_config();
	const char *at = cfg ? strstr(cfg, "MAX_THREADS=") : NULL;
	long n = at ? strtol(at + strlen("MAX_THREADS="), NULL, 10) : 0;
	return n > 0 && n < INT_MAX ? (int)n : INT_MAX;
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

int nn_blas_threads_at_risk(void)
{
	const char *env = getenv("OPENBLAS_NUM_THREADS");
	if ((env && !strcmp(env, "1")) || openblas_get_num_threads() < 2)
		return 0;
	const int limits[] = {RLIMIT_AS, RLIMIT_DATA};
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		struct rlimit rl;
		if (getrlimit(limits[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			return 1;
	}
	return 0;
}

int nn_blas_restart_env(void)
{
	const char *better =
		getenv("IMSHARD_BLAS_PICKED") ? NULL : nn_blas_better_core();
	const int one_thread = nn_blas_threads_at_risk();
	if (better) {
		/* what OpenBLAS chose, for the program's line after the
		 * restart; also what stops a second one */
		setenv("IMSHARD_BLAS_PICKED", nn_blas_core(), 1);
		setenv("OPENBLAS_CORETYPE", better, 1);
	}
	if (one_thread)
		setenv("OPENBLAS_NUM_THREADS", "1", 1);
	return better || one_thread;
}

/* OpenBLAS's BUFFER_SIZE on its default x86-64 and arm64 builds (32 << 22)
 * plus the page it adds, and what the allocator rounds an allocation of
 * that size up to. Seen in a debugger: malloc(134221824) per thread. */
#define BLAS_BUFFER_BYTES ((size_t)(32u << 22) + (64u << 10))

/* Field `key` of /proc/self/status in bytes (kB there); 0 when absent. */
static double status_bytes(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return 0;
	char line[256];
	double v = 0;
	size_t n = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtod(line + n + 1, NULL) * 1024.0;
			break;
		}
	fclose(f);
	return v;
}

/* The room limit `res` leaves beside `used` bytes: an error when the
 * buffers do not fit. */
static int check_limit(int res, const char *what, const char *used_key,
		       double need, int threads, ims_error *err)
{
	struct rlimit rl;
	if (getrlimit(res, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	const double limit = (double)rl.rlim_cur, used = status_bytes(used_key);
	const double mib = 1048576.0;
	char each[64] = "the one compute thread";
	if (threads > 1)
		snprintf(each, sizeof(each), "each of %d compute threads", threads);
	RETURN_IF(used + need > limit, err, IMS_ENOMEM,
		  "the %s limit of %.0f MiB is too small: %.0f MiB are mapped "
		  "after set-up and OpenBLAS needs %.0f MiB more (%.0f MiB for "
		  "%s); raise the limit%s",
		  what, limit / mib, used / mib, need / mib,
		  (double)BLAS_BUFFER_BYTES / mib, each,
		  threads > 1 ? " or use fewer --threads" : "");
	return 0;
}

/*
 * OpenBLAS's allocator (driver/others/memory.c), exported by the library
 * but declared in none of its installed headers. Its buffers are a pool
 * shared by every thread: a call takes the first free one and hands it
 * back when it returns, and a new buffer is made only when all are taken,
 * so the pool grows to the most calls ever running at once.
 */
void *blas_memory_alloc(int procpos);
void blas_memory_free(void *buffer);

/* Whether `threads` more buffers can be mapped now, asked of the kernel
 * itself: the counters check_limit reads miss what a strict overcommit
 * policy refuses, and a buffer OpenBLAS cannot map it retries for ever.
 * One mapping a buffer, as OpenBLAS makes them. */
static int probe_room(int threads, ims_error *err)
{
	void **maps = calloc((size_t)threads, sizeof(*maps));
	RETURN_IF(!maps, err, IMS_ENOMEM,
		  "cannot reserve OpenBLAS's buffers: out of memory");
	int got = 0;
	while (got < threads) {
		void *p = mmap(NULL, BLAS_BUFFER_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			break;
		maps[got++] = p;
	}
	for (int i = 0; i < got; i++)
		munmap(maps[i], BLAS_BUFFER_BYTES);
	free(maps);
	RETURN_IF(got < threads, err, IMS_ENOMEM,
		  "cannot reserve OpenBLAS's buffers: the system maps %d of "
		  "the %d (%.0f MiB each) that %d compute threads need (out "
		  "of memory); use fewer --threads",
		  got, threads, (double)BLAS_BUFFER_BYTES / 1048576.0, threads);
	return 0;
}

/* Whether the limits and the system leave room for `threads` buffers
 * beside what is mapped now. */
static int check_room(int threads, ims_error *err)
{
	const double need = (double)threads * (double)BLAS_BUFFER_BYTES;
	FORWARD_IF_ERR(check_limit(RLIMIT_AS, "address-space (ulimit -v)", "VmSize",
				   need, threads, err));
	FORWARD_IF_ERR(check_limit(RLIMIT_DATA, "data-segment (ulimit -d)", "VmData",
				   need, threads, err));
	return probe_room(threads, err);
}

int nn_ctx_reserve_blas(nn_ctx *ctx, ims_error *err)
{
	if (!nn_ctx_on_host(ctx))
		return 0;
	const int threads = ctx->threads;
	void **held = calloc((size_t)threads, sizeof(*held));
	RETURN_IF(!held, err, IMS_ENOMEM,
		  "cannot reserve OpenBLAS's buffers: out of memory");
	int rc = 0;
#pragma omp parallel num_threads(threads)
	{
		/* The room is measured from inside the team that takes the
		 * buffers: starting its threads maps their stacks, and each
		 * thread's first allocation a malloc heap of its own (64 MiB
		 * of address space with glibc), which would otherwise be
		 * mapped between the check and the buffers. */
		void *volatile first = malloc(1);
		free(first);
#pragma omp barrier
#pragma omp single
		rc = check_room(threads, err);
		/* Every buffer is taken before any is handed back: a GEMM per
		 * thread would make a single buffer when the threads happen
		 * to run one after another, and the first step whose GEMMs
		 * overlap would then ask for another under the limit. A team
		 * smaller than asked takes the missing threads' buffers too.
		 * Each thread frees what it took, as a build of OpenBLAS with
		 * a pool per thread requires. */
		if (!rc) {
			const int t = omp_get_thread_num();
			const int team = omp_get_num_threads();
			for (int i = t; i < threads; i += team)
				held[i] = blas_memory_alloc(0);
#pragma omp barrier
			for (int i = t; i < threads; i += team)
				blas_memory_free(held[i]);
		}
	}
	free(held);
	return rc;
}
