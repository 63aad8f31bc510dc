/*
 * model_flops.c - the two reference figures of bench/train: how many
 * floating-point operations one training image of a model costs, and how
 * fast the BLAS's own sgemm runs on T threads in this process, so that the
 * trainer's rate can be stated as a fraction of what the BLAS can do.
 *
 *     model_flops [--sgemm-threads T] [--n N] [--seconds S] [MODEL:SIZE ...]
 *
 * For each MODEL:SIZE (e.g. resnet18:112) prints one line
 *     model=resnet18 size=112 classes=10 macs=... train_flops=...
 * where macs is nn_model_macs (multiply-adds of one forward pass of one
 * image: convolutions and linear layers) and train_flops = 3 x 2 x macs,
 * the usual convention: forward, input gradient and weight gradient are
 * each one GEMM of the forward's size, 2 FLOPs per multiply-add. Batch
 * norm, ReLU, pooling, the loss and the optimiser are not counted, and
 * neither is the input gradient the first convolution skips: that
 * overstates the GEMM work by 2% for resnet18 at 112 (conv1: 29.5M of
 * 484.9M forward MACs) and 1.7% for convnet7 at 32 (0.88M of 17.5M).
 *
 * With --sgemm-threads T (T >= 1), then times C = A B, all N x N
 * (default 2048) row-major floats, with openblas_set_num_threads(T): one
 * call untimed, then calls until S seconds (default 2) have passed, and
 * prints
 *     sgemm_threads=T n=N calls=K seconds=S gflops=G gflops_best=B
 *     corename=Prescott blas_threads=T
 * gflops over all timed calls, gflops_best the fastest call. The project's
 * convolutions run the BLAS single-threaded inside their own OpenMP team;
 * here OpenBLAS threads itself, which is what its sgemm rate on T threads
 * means. OPENBLAS_CORETYPE in the environment chooses OpenBLAS's kernels
 * (corename says which ran).
 *
 * Exit status: 0, 1 on failure (model unknown, out of memory), 2 on bad
 * usage.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "train/nn.h"

/* OpenBLAS extensions (declared in its cblas.h; repeated here so that a
 * cblas.h without them still compiles and fails at link time instead). */
char *openblas_get_corename(void);
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);

static void usage(FILE *f)
{
	fprintf(f, "usage: model_flops [--sgemm-threads T] [--n N] [--seconds S] "
		   "[--classes C] [MODEL:SIZE ...]\n");
}

static int print_model(const char *spec, int classes)
{
	char name[64];
	const char *colon = strchr(spec, ':');
	if (!colon || (size_t)(colon - spec) >= sizeof(name)) {
		fprintf(stderr, "model_flops: expected MODEL:SIZE, got '%s'\n", spec);
		return 2;
	}
	memcpy(name, spec, (size_t)(colon - spec));
	name[colon - spec] = 0;
	int size = atoi(colon + 1);
	ims_error err;
	ims_error_clear(&err);
	nn_ctx ctx;
	nn_model *m = NULL;
	if (nn_ctx_init_cpu(&ctx, 1, &err) < 0 ||
	    nn_model_create(&ctx, name, classes, size, size, 1, 1, &m, &err) < 0) {
		fprintf(stderr, "model_flops: cannot build '%s': %s\n", spec, err.msg);
		nn_ctx_release(&ctx);
		return 1;
	}
	double macs = nn_model_macs(m);
	size_t params;
	nn_model_params(m, &params);
	printf("model=%s size=%d classes=%d params=%zu macs=%.0f train_flops=%.0f\n",
	       name, size, classes, params, macs, 6 * macs);
	nn_model_free(m);
	nn_ctx_release(&ctx);
	return 0;
}

static int time_sgemm(int threads, int n, double seconds)
{
	size_t nn = (size_t)n * (size_t)n;
	float *a = malloc(nn * sizeof(float));
	float *b = malloc(nn * sizeof(float));
	float *c = malloc(nn * sizeof(float));
	if (!a || !b || !c) {
		fprintf(stderr, "model_flops: cannot allocate 3 x %d x %d floats\n", n, n);
		free(a);
		free(b);
		free(c);
		return 1;
	}
	/* values in [-0.5, 0.5): no denormals, no overflow */
	uint32_t s = 12345;
	for (size_t i = 0; i < nn; i++) {
		s = s * 1664525u + 1013904223u;
		a[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
		s = s * 1664525u + 1013904223u;
		b[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
	}
	memset(c, 0, nn * sizeof(float));
	openblas_set_num_threads(threads);
	const double flop = 2.0 * n * (double)n * n;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n,
		    b, n, 0.0f, c, n); /* warm-up: thread start, page faults */
	int calls = 0;
	double best = 0, t_start = now_s(), t = t_start;
	do {
		double t0 = now_s();
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
			    a, n, b, n, 0.0f, c, n);
		t = now_s();
		calls++;
		if (flop / (t - t0) > best)
			best = flop / (t - t0);
	} while (t - t_start < seconds || calls < 3);
	double total = t - t_start;
	printf("sgemm_threads=%d n=%d calls=%d seconds=%.3f gflops=%.2f gflops_best=%.2f "
	       "corename=%s blas_threads=%d checksum=%.3f\n",
	       threads, n, calls, total, 1e-9 * flop * calls / total, 1e-9 * best,
	       openblas_get_corename(), openblas_get_num_threads(),
	       (double)c[0] + c[nn - 1]);
	free(a);
	free(b);
	free(c);
	return 0;
}

int main(int argc, char **argv)
{
	/* The same kernels as imshard-train, so the sgemm reference runs
	 * what the trainer runs */
	if (nn_blas_restart_env())
		execv("/proc/self/exe", argv);
	int threads = 0, n = 2048, classes = 10;
	double seconds = 2;
	int rc = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--sgemm-threads") && i + 1 < argc) {
			threads = atoi(argv[++i]);
		} else if (!strcmp(a, "--n") && i + 1 < argc) {
			n = atoi(argv[++i]);
		} else if (!strcmp(a, "--seconds") && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else if (!strcmp(a, "--classes") && i + 1 < argc) {
			classes = atoi(argv[++i]);
		} else if (a[0] == '-') {
			usage(stderr);
			return 2;
		}
	}
	if (threads < 0 || n < 16 || n > 16384 || !(seconds >= 0) || classes < 1) {
		usage(stderr);
		return 2;
	}
	for (int i = 1; i < argc && !rc; i++) {
		if (argv[i][0] == '-') {
			i++; /* every option takes a value */
			continue;
		}
		rc = print_model(argv[i], classes);
	}
	if (!rc && threads > 0)
		rc = time_sgemm(threads, n, seconds);
	return rc;
}
