/*
 * nccl_cuda.c - dp.h's NCCL part: the communicator, its stream, and
 * the polled waits that turn a dead or hung peer into an error.
 *
 * Ordering: before a collective, an event is recorded on the compute
 * stream and the communication stream waits for it, so the collective
 * reads what the compute stream wrote; after the last one, an event on
 * the communication stream is what the compute stream (and the host's
 * poll) waits for. Gradient buckets: bucket k is buf[count - (k+1) size,
 * count - k size) (the last one starts at 0), queued in k order as
 * backward finishes them.
 */
#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/cuda/cuda_internal.h"
#include "train/dp.h"

struct dp_nccl {
	ncclComm_t comm;
	int failed;          /* the communicator was aborted */
	int rank, world;
	double timeout_s;
	cudaStream_t compute, stream;
	/* computed, done: the streams' joins (inside a recorded pass too);
	 * landed: what the host polls, recorded on the compute stream */
	cudaEvent_t computed, done, landed;
	/* buckets */
	float *buf;
	size_t count, size;
	int n, started;
	double seconds;
	/* destroys the recordings that hold collectives (dp_nccl_on_abort) */
	void (*release)(void *ctx);
	void *release_ctx;
};

/*
 * Ends the communicator after a failure: the recordings that hold its
 * collectives go first, or ncclCommAbort would wait for them forever
 * (dp.h). A capture still open (a bucket that timed out while backward
 * was recorded) is joined back to the compute stream and ended here:
 * while it is open this thread may not make the calls the abort makes.
 */
static void abort_comm(dp_nccl *n)
{
	if (!n->comm || n->failed)
		return;
	enum cudaStreamCaptureStatus s = cudaStreamCaptureStatusNone;
	if (cudaStreamIsCapturing(n->compute, &s) == cudaSuccess &&
	    s != cudaStreamCaptureStatusNone) {
		enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
		if (cudaStreamIsCapturing(n->stream, &cs) == cudaSuccess &&
		    cs != cudaStreamCaptureStatusNone &&
		    cudaEventRecord(n->done, n->stream) == cudaSuccess)
			(void)cudaStreamWaitEvent(n->compute, n->done, 0);
		cudaGraph_t g = NULL;
		(void)cudaStreamEndCapture(n->compute, &g);
		if (g)
			cudaGraphDestroy(g);
		(void)cudaGetLastError();
	}
	if (n->release)
		n->release(n->release_ctx);
	ncclCommAbort(n->comm);
	n->failed = 1;
}

/* "cannot WHAT: NCCL error NAME (last message) at FILE:LINE"; the
 * communicator is aborted (every later call on it fails fast). */
static int nccl_fail(dp_nccl *n, ims_error *err, ncclResult_t r,
		     const char *what, const char *file, int line)
{
	const char *last = ncclGetLastError(n ? n->comm : NULL);
	int rc = ims_fail(err, IMS_EIO, "cannot %s: NCCL error %s (%s) at %s:%d",
			  what, ncclGetErrorString(r), last ? last : "",
			  file, line);
	if (n)
		abort_comm(n);
	return rc;
}

/*
 * The communicator is non-blocking (so a peer that never answers cannot
 * hang a call): a call may return ncclInProgress, and is then polled
 * until NCCL settles, within the timeout.
 */
static int settle(dp_nccl *n, ncclResult_t r, const char *what,
		  const char *file, int line, ims_error *err)
{
	const double t0 = ims_now();
	while (r == ncclInProgress) {
		if (n->timeout_s > 0 && ims_now() - t0 > n->timeout_s) {
			ims_fail(err, IMS_EIO,
				 "cannot %s: rank %d waited %g s for its peers (one "
				 "died or hangs; --collective-timeout): NCCL aborted",
				 what, n->rank, n->timeout_s);
			abort_comm(n);
			return IMS_EIO;
		}
		struct timespec ts = {0, 100000}; /* 0.1 ms */
		nanosleep(&ts, NULL);
		ncclResult_t q = ncclCommGetAsyncError(n->comm, &r);
		if (q != ncclSuccess)
			r = q;
	}
	if (r != ncclSuccess)
		return nccl_fail(n, err, r, what, file, line);
	return 0;
}

#define NCCL_CHECK(n, err, what, call)                                         \
	do {                                                                   \
		RETURN_IF((n)->failed, err, IMS_EIO,                           \
			  "cannot %s: the nccl communicator was aborted",      \
			  (what));                                             \
		int nccl_rc_ = settle((n), (call), (what), __FILE__, __LINE__, \
				      (err));                                  \
		if (nccl_rc_)                                                  \
			return nccl_rc_;                                       \
	} while (0)

int dp_nccl_available(void)
{
	return 1;
}

void dp_nccl_on_abort(dp_nccl *n, void (*release)(void *ctx), void *ctx)
{
	n->release = release;
	n->release_ctx = ctx;
}

void dp_nccl_abort(dp_nccl *n)
{
	if (n)
		abort_comm(n);
}

void dp_nccl_free(dp_nccl *n)
{
	if (!n)
		return;
	if (n->comm && !n->failed) { /* an aborted one is freed already */
		/* non-blocking: finalize (flushes outstanding work) settles
		 * first; a failure there aborts, which frees the communicator */
		ims_error e;
		if (settle(n, ncclCommFinalize(n->comm), "finalize nccl",
			   __FILE__, __LINE__, &e) == 0)
			ncclCommDestroy(n->comm);
	}
	if (n->computed)
		cudaEventDestroy(n->computed);
	if (n->done)
		cudaEventDestroy(n->done);
	if (n->landed)
		cudaEventDestroy(n->landed);
	if (n->stream)
		cudaStreamDestroy(n->stream);
	free(n);
}

/*
 * Blocks until what the compute stream has queued so far has run on the
 * device, the collectives it waits for included, polling: NCCL's
 * asynchronous error (a peer gone) or no completion within the timeout
 * aborts the communicator and fails. The event is recorded here, on the
 * compute stream, so the wait also covers collectives a replayed pass
 * queued (an event recorded while recording is not recorded again when
 * the pass is replayed).
 */
static int wait_done(dp_nccl *n, const char *what, ims_error *err)
{
	RETURN_IF(n->failed, err, IMS_EIO,
		  "cannot %s: the nccl communicator was aborted", what);
	CUDA_CHECK(err, what, cudaEventRecord(n->landed, n->compute));
	const double t0 = ims_now();
	for (;;) {
		cudaError_t e = cudaEventQuery(n->landed);
		if (e == cudaSuccess)
			break;
		if (e != cudaErrorNotReady)
			return nn_cuda_fail_rt(err, e, what, __FILE__, __LINE__);
		ncclResult_t a = ncclSuccess;
		ncclResult_t q = ncclCommGetAsyncError(n->comm, &a);
		if (q != ncclSuccess)
			return nccl_fail(n, err, q, what, __FILE__, __LINE__);
		if (a != ncclSuccess && a != ncclInProgress)
			return nccl_fail(n, err, a, what, __FILE__, __LINE__);
		if (n->timeout_s > 0 && ims_now() - t0 > n->timeout_s) {
			int rc = ims_fail(err, IMS_EIO,
					  "cannot %s: rank %d waited %g s for its "
					  "peers (one died or hangs; "
					  "--collective-timeout): NCCL aborted",
					  what, n->rank, n->timeout_s);
			abort_comm(n);
			return rc;
		}
		struct timespec ts = {0, 100000}; /* 0.1 ms */
		nanosleep(&ts, NULL);
	}
	n->seconds += ims_now() - t0;
	return 0;
}

/* The communication stream waits for what the compute stream queued. */
static int after_compute(dp_nccl *n, const char *what, ims_error *err)
{
	CUDA_CHECK(err, what, cudaEventRecord(n->computed, n->compute));
	CUDA_CHECK(err, what, cudaStreamWaitEvent(n->stream, n->computed, 0));
	return 0;
}

/* The compute stream (and the host's poll) waits for the communication. */
static int before_compute(dp_nccl *n, const char *what, ims_error *err)
{
	CUDA_CHECK(err, what, cudaEventRecord(n->done, n->stream));
	CUDA_CHECK(err, what, cudaStreamWaitEvent(n->compute, n->done, 0));
	return 0;
}

static int setup(dp_nccl *n, dp_comm *c, ims_error *err)
{
	static const char what[] = "set up nccl";
	CUDA_CHECK(err, what,
		   cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
	CUDA_CHECK(err, what,
		   cudaEventCreateWithFlags(&n->computed, cudaEventDisableTiming));
	CUDA_CHECK(err, what,
		   cudaEventCreateWithFlags(&n->done, cudaEventDisableTiming));
	CUDA_CHECK(err, what,
		   cudaEventCreateWithFlags(&n->landed, cudaEventDisableTiming));
	ncclUniqueId id;
	memset(&id, 0, sizeof(id));
	if (n->rank == 0) {
		ncclResult_t r = ncclGetUniqueId(&id);
		if (r != ncclSuccess)
			return nccl_fail(n, err, r, what, __FILE__, __LINE__);
	}
	FORWARD_IF_ERR(dp_broadcast(c, &id, sizeof(id), 0, err));
	/* non-blocking, so a peer that never joins times out too (settle) */
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclResult_t r = ncclCommInitRankConfig(&n->comm, n->world, id, n->rank,
						&cfg);
	if (r != ncclSuccess && r != ncclInProgress) {
		if (n->comm)
			ncclCommAbort(n->comm);
		n->comm = NULL;
		return nccl_fail(n, err, r, what, __FILE__, __LINE__);
	}
	return settle(n, r, what, __FILE__, __LINE__, err);
}

/*
 * NCCL runs one rank per GPU: two ranks of a communicator on one device
 * are refused at best and may hang (its documentation). More ranks on a
 * machine than GPUs make the device choice wrap around
 * (nn_cuda_device_for_rank), so every rank gathers each rank's (machine,
 * PCI bus) and all refuse alike before NCCL starts.
 */
static int one_gpu_per_rank(dp_comm *c, int device, ims_error *err)
{
	static const char what[] = "set up nccl";
	char bus[32] = "", host[256] = "";
	CUDA_CHECK(err, what, cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), device));
	if (gethostname(host, sizeof(host) - 1) != 0)
		host[0] = '\0';
	const int world = dp_world(c);
	double mine[2] = {ims_crc32c(0, host, strlen(host)),
			  ims_crc32c(0, bus, strlen(bus))};
	double *all = malloc(2 * (size_t)world * sizeof(double));
	RETURN_IF(!all, err, IMS_ENOMEM, "cannot %s: out of memory", what);
	int rc = dp_allgather_f64(c, mine, 2, all, err);
	for (int i = 0; !rc && i < world; i++)
		for (int j = i + 1; !rc && j < world; j++)
			if (all[2 * i] == all[2 * j] &&
			    all[2 * i + 1] == all[2 * j + 1])
				rc = ims_fail(err, IMS_EUNSUPPORTED,
					      "cannot %s: ranks %d and %d would "
					      "share one GPU, which NCCL does not "
					      "support: start at most as many "
					      "ranks on a machine as it has GPUs",
					      what, i, j);
	free(all);
	return rc;
}

int dp_nccl_create(dp_comm *c, nn_ctx *ctx, double timeout_s, dp_nccl **out,
		   ims_error *err)
{
	*out = NULL;
	RETURN_IF(!ctx || !ctx->be || ctx->be != &nn_backend_cuda, err,
		  IMS_EUNSUPPORTED, "cannot set up nccl: not a cuda context");
	FORWARD_IF_ERR(one_gpu_per_rank(c, nn_cuda_dev_of(ctx)->device, err));
	dp_nccl *n = calloc(1, sizeof(*n));
	RETURN_IF(!n, err, IMS_ENOMEM, "cannot set up nccl: out of memory");
	n->rank = dp_rank(c);
	n->world = dp_world(c);
	n->timeout_s = timeout_s;
	n->compute = nn_cuda_dev_of(ctx)->stream;
	int rc = setup(n, c, err);
	if (rc) {
		dp_nccl_free(n);
		return rc;
	}
	*out = n;
	return 0;
}

int dp_nccl_broadcast(dp_nccl *n, float *buf, size_t count, int root,
		      ims_error *err)
{
	static const char what[] = "broadcast with nccl";
	FORWARD_IF_ERR(after_compute(n, what, err));
	NCCL_CHECK(n, err, what,
		   ncclBroadcast(buf, buf, count, ncclFloat32, root, n->comm,
				 n->stream));
	FORWARD_IF_ERR(before_compute(n, what, err));
	return wait_done(n, what, err);
}

int dp_nccl_allreduce_avg_queue(dp_nccl *n, float *buf, size_t count,
				ims_error *err)
{
	static const char what[] = "allreduce with nccl";
	FORWARD_IF_ERR(after_compute(n, what, err));
	NCCL_CHECK(n, err, what,
		   ncclAllReduce(buf, buf, count, ncclFloat32, ncclAvg, n->comm,
				 n->stream));
	return before_compute(n, what, err);
}

int dp_nccl_allreduce_avg(dp_nccl *n, float *buf, size_t count,
			  ims_error *err)
{
	FORWARD_IF_ERR(dp_nccl_allreduce_avg_queue(n, buf, count, err));
	return wait_done(n, "allreduce with nccl", err);
}

int dp_nccl_buckets(dp_nccl *n, float *buf, size_t count,
		    size_t bucket_floats, ims_error *err)
{
	RETURN_IF(!bucket_floats, err, IMS_EINVAL,
		  "cannot make gradient buckets of 0 floats");
	n->buf = buf;
	n->count = count;
	n->size = bucket_floats;
	n->n = count ? (int)((count + bucket_floats - 1) / bucket_floats) : 0;
	n->started = 0;
	return 0;
}

/* Queues bucket k on the communication stream, behind the compute
 * stream's work so far. */
static int start_bucket(dp_nccl *n, int k, ims_error *err)
{
	static const char what[] = "allreduce a gradient bucket with nccl";
	size_t hi = n->count - (size_t)k * n->size;
	size_t lo = hi > n->size ? hi - n->size : 0;
	if (k == n->n - 1)
		lo = 0;
	FORWARD_IF_ERR(after_compute(n, what, err));
	NCCL_CHECK(n, err, what,
		   ncclAllReduce(n->buf + lo, n->buf + lo, hi - lo, ncclFloat32,
				 ncclAvg, n->comm, n->stream));
	return 0;
}

int dp_nccl_ready(dp_nccl *n, size_t ready, ims_error *err)
{
	while (n->started < n->n) {
		size_t hi = n->count - (size_t)n->started * n->size;
		size_t lo = hi > n->size ? hi - n->size : 0;
		if (n->started == n->n - 1)
			lo = 0;
		if (ready > lo)
			break;
		FORWARD_IF_ERR(start_bucket(n, n->started, err));
		n->started++;
	}
	return 0;
}

/* Nothing here waits for the host, so it may be recorded with the
 * backward pass (train/loop/graphs.c) and replayed with it. */
int dp_nccl_flush(dp_nccl *n, ims_error *err)
{
	static const char what[] = "allreduce the gradients with nccl";
	FORWARD_IF_ERR(dp_nccl_ready(n, 0, err));
	n->started = 0; /* the next step starts over */
	if (!n->n)
		return 0; /* no collective: the communication stream is not in
			   * a recording to join back from */
	return before_compute(n, what, err);
}

int dp_nccl_wait(dp_nccl *n, ims_error *err)
{
	return wait_done(n, "allreduce the gradients with nccl", err);
}

int dp_nccl_finish(dp_nccl *n, ims_error *err)
{
	FORWARD_IF_ERR(dp_nccl_flush(n, err));
	return dp_nccl_wait(n, err);
}

double dp_nccl_take_seconds(dp_nccl *n)
{
	double s = n ? n->seconds : 0;
	if (n)
		n->seconds = 0;
	return s;
}
