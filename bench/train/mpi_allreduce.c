/*
 * mpi_allreduce.c - what one gradient sum costs through MPI, the way the
 * trainer can issue it: one blocking MPI_Allreduce, or non-blocking
 * MPI_Iallreduce requests of --bucket-mb each, all started then waited
 * for (the progress the trainer adds between layers is left out, so this
 * is the requests' own cost). The trainer's CPU default (one blocking
 * allreduce after backward) rests on these figures (docs/TRAINING.md).
 *
 *     mpirun -np 2 build/bench/mpi_allreduce --floats 1047600 --bucket-mb 1
 *
 * Each timed call follows an MPI_Barrier, so waiting for a late rank is
 * not counted; --cold writes a buffer larger than the caches before each
 * call, as backward leaves most gradients out of cache. Rank 0 prints one
 * line of key=value pairs: the median and minimum milliseconds of each
 * mode over --reps calls.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [--floats N] [--bucket-mb MB] [--reps R] [--cold]\n"
		"  --floats N     gradient floats summed per call [1047600: convnet7]\n"
		"  --bucket-mb MB non-blocking request size [1]\n"
		"  --reps R       timed calls per mode, after 3 untimed [50]\n"
		"  --cold         evict the caches before each call\n",
		argv0);
}

/* Milliseconds of one sum of buf, after a barrier. */
static double one_sum(float *buf, size_t n, size_t bucket, MPI_Request *req,
		      int blocking)
{
	MPI_Barrier(MPI_COMM_WORLD);
	double t = MPI_Wtime();
	if (blocking) {
		MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
			      MPI_COMM_WORLD);
	} else {
		int k = 0;
		for (size_t lo = 0; lo < n; lo += bucket, k++) {
			size_t len = n - lo < bucket ? n - lo : bucket;
			MPI_Iallreduce(MPI_IN_PLACE, buf + lo, (int)len, MPI_FLOAT,
				       MPI_SUM, MPI_COMM_WORLD, &req[k]);
		}
		MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
	}
	return (MPI_Wtime() - t) * 1e3;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, world;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	size_t n = 1047600;
	double bucket_mb = 1;
	int reps = 50, cold = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--cold")) {
			cold = 1;
			continue;
		}
		if (v && !strcmp(a, "--floats"))
			n = strtoull(v, NULL, 10);
		else if (v && !strcmp(a, "--bucket-mb"))
			bucket_mb = strtod(v, NULL);
		else if (v && !strcmp(a, "--reps"))
			reps = atoi(v);
		else {
			if (!rank)
				usage(argv[0]);
			MPI_Finalize();
			return 2;
		}
		i++;
	}
	size_t bucket = (size_t)(bucket_mb * 1048576.0 / sizeof(float));
	if (n < 1 || n > ((size_t)1 << 30) || reps < 1 || bucket < 1) {
		if (!rank)
			fprintf(stderr, "mpi_allreduce: --floats must be 1..2^30, "
					"--reps and --bucket-mb above 0\n");
		MPI_Finalize();
		return 2;
	}
	size_t nreq = (n + bucket - 1) / bucket;
	size_t evict_n = (size_t)64 << 20; /* 256 MiB of floats: past any L3 */
	float *buf = malloc(n * sizeof(float));
	float *evict = cold ? malloc(evict_n * sizeof(float)) : NULL;
	MPI_Request *req = malloc(nreq * sizeof(*req));
	double *ms = malloc((size_t)reps * sizeof(double));
	if (!buf || !req || !ms || (cold && !evict)) {
		fprintf(stderr, "mpi_allreduce: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	/* small values: repeated sums stay finite */
	for (size_t i = 0; i < n; i++)
		buf[i] = (float)(i % 1000) * 1e-6f;
	if (!rank)
		printf("ranks=%d floats=%zu bucket_mb=%g requests=%zu cold=%d", world,
		       n, bucket_mb, nreq, cold);
	static const char *const mode[] = {"allreduce", "iallreduce_one",
					   "iallreduce_buckets"};
	for (int m = 0; m < 3; m++) {
		size_t b = m == 2 ? bucket : n;
		for (int r = -3; r < reps; r++) {
			if (cold)
				memset(evict, r & 0xff, evict_n * sizeof(float));
			double t = one_sum(buf, n, b, req, m == 0);
			if (r >= 0)
				ms[r] = t;
		}
		qsort(ms, (size_t)reps, sizeof(double), cmp_double);
		if (!rank)
			printf(" %s_ms=%.3f %s_min_ms=%.3f", mode[m], ms[reps / 2],
			       mode[m], ms[0]);
	}
	if (!rank)
		printf("\n");
	free(ms);
	free(req);
	free(evict);
	free(buf);
	MPI_Finalize();
	return 0;
}
