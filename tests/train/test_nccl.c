/*
 * test_nccl.c - dp_nccl on CUDA devices, one GPU per rank: the bucketed
 * gradient allreduce (small buckets, released by a falling `ready` as
 * backward would) equals a plain allreduce of the whole buffer, both
 * equal the mean of every rank's data computed on the host (within 1e-6
 * relative: NCCL's ncclAvg may scale before or after summing), and a
 * broadcast gives rank 0's bits everywhere. Run as one process (world
 * size 1 through the NCCL path: the mean is the data itself, bit for
 * bit) and under mpirun -np 2 (test_nccl_np2: two GPUs; the two
 * allreduces must then agree bit for bit too, as a sum of two is
 * commutative). The bucketed allreduce recorded as a CUDA graph and
 * replayed gives the same bits. Aborted while that recording is kept
 * (as when a peer fails mid-run), the communicator first has it
 * released (dp_nccl_on_abort), so the abort returns (NCCL's waits for
 * every graph that holds its collectives) and later calls fail fast.
 *
 * Exits 77 (skipped) without NCCL in the build, on a machine without a
 * GPU, or with fewer GPUs than ranks on a machine; fails on a GPU host
 * that cannot run it, and with IMSHARD_REQUIRE_GPU=1 (gpu_test.h).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_test.h"
#include "test.h"
#include "train/dp.h"
#include "train/nn_internal.h"

static void fill(float *v, size_t n, int rank)
{
	ims_rng r;
	ims_rng_seed(&r, 99, (uint64_t)rank);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(2 * ims_rng_uniform(&r) - 1);
}

/* the recording dp_nccl_abort must have released before it aborts */
static nn_graph *kept;
static int releases;

static void release_kept(void *ctx)
{
	nn_graph_free(ctx, kept);
	kept = NULL;
	releases++;
}

static void abort_hung(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: dp_nccl_abort did not return within 60 s "
				"(a recording still holds the communicator)\n";
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(2);
	_exit(1);
}

int main(int argc, char **argv)
{
	ims_error err;
	dp_comm *c = NULL;
	CHECK_OK(dp_init(&argc, &argv, 0, NULL, &c, &err), &err);
	const int rank = dp_rank(c), world = dp_world(c);
	nn_ctx gpu;
	if (!dp_nccl_available()) {
		dp_finalize(c);
		return gpu_test_give_up(1, "this build has no NCCL");
	}
	/* the trainer's mapping: node-local rank modulo the devices seen;
	 * NCCL needs a GPU per rank, so a rank whose share wraps around has
	 * none of its own */
	int visible = 0, rc = nn_cuda_device_count(&visible, &err);
	const int local = dp_local_rank(c);
	if (!rc && local >= visible)
		rc = ims_fail(&err, IMS_EUNSUPPORTED,
			      "rank %d is node-local rank %d but %d GPU%s visible: "
			      "NCCL needs a GPU per rank",
			      rank, local, visible, visible == 1 ? " is" : "s are");
	if (!rc)
		rc = nn_ctx_init_cuda(&gpu, nn_cuda_device_for_rank(local, visible),
				      &err);
	/* Every rank decides alike: with fewer GPUs than ranks (one GPU, two
	 * ranks) one rank has no device, and if it left alone the others
	 * would wait for it in NCCL's set-up. Only "no GPU here" skips
	 * (gpu_test.h). */
	double why[2] = {rc == IMS_EUNSUPPORTED, rc && rc != IMS_EUNSUPPORTED};
	CHECK_OK(dp_allreduce_sum_f64(c, why, 2, &err), &err);
	if (why[0] > 0 || why[1] > 0) {
		char line[IMS_ERRMSG_MAX + 64];
		snprintf(line, sizeof(line), "rank %d: %s", rank,
			 rc ? err.msg : "another rank cannot run");
		if (!rc)
			nn_ctx_release(&gpu);
		dp_finalize(c);
		return gpu_test_give_up(why[1] == 0, line);
	}
	dp_nccl *n = NULL;
	CHECK_OK(dp_nccl_create(c, &gpu, 60, &n, &err), &err);
	const size_t count = 1000003;
	float *host = malloc(count * sizeof(float));
	float *want = calloc(count, sizeof(float));
	float *a = malloc(count * sizeof(float)), *b = malloc(count * sizeof(float));
	CHECK(host && want && a && b);
	for (int r = 0; r < world; r++) {
		fill(host, count, r);
		for (size_t i = 0; i < count; i++)
			want[i] += host[i];
	}
	for (size_t i = 0; i < count; i++)
		want[i] /= (float)world;
	fill(host, count, rank);
	float *d1 = gpu.be->alloc(&gpu, count * sizeof(float));
	float *d2 = gpu.be->alloc(&gpu, count * sizeof(float));
	CHECK(d1 && d2);
	CHECK_OK(gpu.be->to_device(&gpu, d1, host, count * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, d2, host, count * sizeof(float), &err), &err);

	/* plain */
	CHECK_OK(dp_nccl_allreduce_avg(n, d1, count, &err), &err);
	/* queued (the trainer's statistics each step), then the one wait
	 * of a step: the plain allreduce's bits */
	float *d3 = gpu.be->alloc(&gpu, count * sizeof(float));
	float *c3 = malloc(count * sizeof(float));
	CHECK(d3 && c3);
	CHECK_OK(gpu.be->to_device(&gpu, d3, host, count * sizeof(float), &err), &err);
	CHECK_OK(dp_nccl_allreduce_avg_queue(n, d3, count, &err), &err);
	CHECK_OK(dp_nccl_wait(n, &err), &err);
	CHECK_OK(gpu.be->to_host(&gpu, c3, d3, count * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->to_host(&gpu, a, d1, count * sizeof(float), &err), &err);
	CHECK(memcmp(a, c3, count * sizeof(float)) == 0);
	gpu.be->free(&gpu, d3);
	free(c3);
	/* bucketed: 4099-float buckets, backward releasing 10007 at a time,
	 * two steps in a row (the buckets start over) */
	CHECK_OK(dp_nccl_buckets(n, d2, count, 4099, &err), &err);
	for (int step = 0; step < 2; step++) {
		if (step == 1)
			CHECK_OK(gpu.be->to_device(&gpu, d2, host,
						   count * sizeof(float), &err),
				 &err);
		for (size_t ready = count; ready > 10007; ready -= 10007)
			CHECK_OK(dp_nccl_ready(n, ready, &err), &err);
		CHECK_OK(dp_nccl_finish(n, &err), &err);
	}
	CHECK_OK(gpu.be->to_host(&gpu, a, d1, count * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->to_host(&gpu, b, d2, count * sizeof(float), &err), &err);
	size_t bad = 0;
	for (size_t i = 0; i < count; i++) {
		if (world <= 2 && memcmp(&a[i], &b[i], sizeof(float)) && bad++ == 0)
			printf("rank %d: [%zu] plain %.9g bucketed %.9g\n", rank, i,
			       a[i], b[i]);
		if (fabsf(a[i] - want[i]) > 1e-6f * fmaxf(1.0f, fabsf(want[i])) &&
		    bad++ == 0)
			printf("rank %d: [%zu] allreduce %.9g host mean %.9g\n", rank,
			       i, a[i], want[i]);
		if (world == 1 && memcmp(&a[i], &host[i], sizeof(float)) &&
		    bad++ == 0)
			printf("world 1: [%zu] changed: %.9g to %.9g\n", i, host[i],
			       a[i]);
	}
	CHECK_EQ_U64(bad, 0);

	/* recorded: a step's buckets and their join recorded once (as
	 * train/loop/graphs.c records them with backward), replayed twice
	 * on fresh data, the host waiting after each: the plain
	 * allreduce's bits every time; then a queued step again (the
	 * recording left the buckets ready to start over) */
	nn_graph *g = NULL;
	CHECK_OK(nn_ctx_record_begin(&gpu, &err), &err);
	for (size_t ready = count; ready > 10007; ready -= 10007)
		CHECK_OK(dp_nccl_ready(n, ready, &err), &err);
	int rec = dp_nccl_flush(n, &err);
	ims_error end_err;
	CHECK_OK(nn_ctx_record_end(&gpu, !rec, &g, rec ? &end_err : &err), &err);
	CHECK_OK(rec, &err);
	CHECK(g != NULL);
	for (int pass = 0; pass < 3; pass++) {
		CHECK_OK(gpu.be->to_device(&gpu, d2, host, count * sizeof(float),
					   &err),
			 &err);
		if (pass < 2) {
			CHECK_OK(nn_ctx_replay(&gpu, g, &err), &err);
			CHECK_OK(dp_nccl_wait(n, &err), &err);
		} else {
			for (size_t ready = count; ready > 10007; ready -= 10007)
				CHECK_OK(dp_nccl_ready(n, ready, &err), &err);
			CHECK_OK(dp_nccl_finish(n, &err), &err);
		}
		CHECK_OK(gpu.be->to_host(&gpu, b, d2, count * sizeof(float), &err),
			 &err);
		CHECK(memcmp(a, b, count * sizeof(float)) == 0 || world > 2);
	}

	/* broadcast: rank 0's data everywhere */
	CHECK_OK(gpu.be->to_device(&gpu, d1, host, count * sizeof(float), &err), &err);
	CHECK_OK(dp_nccl_broadcast(n, d1, count, 0, &err), &err);
	CHECK_OK(gpu.be->to_host(&gpu, a, d1, count * sizeof(float), &err), &err);
	fill(want, count, 0);
	CHECK(memcmp(a, want, count * sizeof(float)) == 0);

	/* aborted with the recording kept: released first, then aborted */
	kept = g;
	dp_nccl_on_abort(n, release_kept, &gpu);
	signal(SIGALRM, abort_hung);
	alarm(60);
	dp_nccl_abort(n);
	alarm(0);
	CHECK_EQ_INT(releases, 1);
	CHECK(kept == NULL);
	dp_nccl_abort(n); /* once only */
	CHECK_EQ_INT(releases, 1);
	CHECK(dp_nccl_allreduce_avg(n, d1, count, &err) == IMS_EIO);
	CHECK(strstr(err.msg, "the nccl communicator was aborted") != NULL);
	CHECK(dp_nccl_ready(n, 0, &err) == IMS_EIO);
	CHECK_OK(nn_ctx_sync(&gpu, &err), &err);
	printf("rank %d of %d: bucketed == recorded == plain allreduce, broadcast ok, "
	       "aborted with a recording kept\n",
	       rank, world);

	gpu.be->free(&gpu, d1);
	gpu.be->free(&gpu, d2);
	dp_nccl_free(n);
	nn_ctx_release(&gpu);
	free(host);
	free(want);
	free(a);
	free(b);
	int fails = TEST_EXIT();
	dp_finalize(c);
	return fails;
}
