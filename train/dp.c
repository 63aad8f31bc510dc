/*
 * dp.c - communication between ranks: MPI for CPU tensors and bootstrap,
 * one rank without it.
 *
 * MPI is initialised only when a launcher started this process (mpirun
 * sets OMPI_COMM_WORLD_SIZE, PMI launchers PMI_SIZE or PMIX_RANK): a plain
 * `imshard-train` is one rank and needs no MPI at run time. A build without
 * MPI refuses to run as one rank of several, since each process would
 * silently train alone.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/train.h"

#ifdef IMSHARD_HAVE_MPI
#include <mpi.h>
#endif

struct dp_comm {
	int rank, world;
	int mpi; /* 1: MPI initialised by dp_init */
	/* collective timeout: the watchdog thread ends the process when a
	 * blocking collective has waited longer than timeout_s */
	double timeout_s;
	int64_t waiting_since_ns; /* atomic; 0 when in no blocking collective */
	int watching, stop;
	pthread_t watchdog;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Around every blocking collective: what the watchdog looks at. */
static void wait_begin(dp_comm *c)
{
	__atomic_store_n(&c->waiting_since_ns, mono_ns(), __ATOMIC_RELEASE);
}

static void wait_end(dp_comm *c)
{
	__atomic_store_n(&c->waiting_since_ns, 0, __ATOMIC_RELEASE);
}

/*
 * A peer that died is noticed by mpirun, which ends the job; a peer that
 * hangs alive (stopped, deadlocked, its node unreachable) is not, and the
 * other ranks would wait in their next collective forever. Nothing here may
 * call MPI (the library is initialised for one thread), so a rank past the
 * timeout says why and exits; mpirun then ends the others.
 */
static void *watch(void *arg)
{
	dp_comm *c = arg;
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 250000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&c->cv, &c->mu, &until);
		int64_t since = __atomic_load_n(&c->waiting_since_ns, __ATOMIC_ACQUIRE);
		if (!c->stop && since && (mono_ns() - since) / 1e9 > c->timeout_s) {
			fprintf(stderr,
				"imshard-train: rank %d: waited more than %g s for "
				"the other ranks in a collective "
				"(--collective-timeout): a rank died or hangs; "
				"ending this rank so the job ends\n",
				c->rank, c->timeout_s);
			fflush(stderr);
			_exit(1);
		}
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* World size a launcher announced, 0 when none did. */
static int launched_world(void)
{
	const char *v = getenv("OMPI_COMM_WORLD_SIZE");
	if (!v)
		v = getenv("PMI_SIZE");
	if (!v && getenv("PMIX_RANK"))
		v = "1";
	return v ? atoi(v) : 0;
}

#ifdef IMSHARD_HAVE_MPI
#define MPI_CHECK(err, call)                                                   \
	do {                                                                   \
		int mrc_ = (call);                                             \
		if (mrc_ != MPI_SUCCESS) {                                     \
			char mmsg_[MPI_MAX_ERROR_STRING];                      \
			int mlen_ = 0;                                         \
			MPI_Error_string(mrc_, mmsg_, &mlen_);                 \
			return ims_fail((err), IMS_EIO, "%s:%d: %s: %s",       \
					__FILE__, __LINE__, #call, mmsg_);     \
		}                                                              \
	} while (0)

/* MPI counts are int: large buffers go in pieces of 2^30 elements. */
#define DP_CHUNK ((size_t)1 << 30)
#endif

int dp_init(int *argc, char ***argv, dp_comm **out, ims_error *err)
{
	RETURN_IF(!out, err, IMS_EINVAL, "cannot start ranks: no output");
	*out = NULL;
	dp_comm *c = calloc(1, sizeof(*c));
	RETURN_IF(!c, err, IMS_ENOMEM, "cannot start ranks: out of memory");
	c->world = 1;
	int lw = launched_world();
#ifdef IMSHARD_HAVE_MPI
	if (lw > 0) {
		int provided = 0;
		int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
		if (rc != MPI_SUCCESS) {
			free(c);
			return ims_fail(err, IMS_EIO,
					"cannot initialise MPI (error %d)", rc);
		}
		/* errors come back as codes, so a failure is reported as
		 * imshard's message instead of aborting the job */
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
		MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
		MPI_Comm_size(MPI_COMM_WORLD, &c->world);
		c->mpi = 1;
	}
#else
	(void)argc;
	(void)argv;
	if (lw > 1) {
		free(c);
		return ims_fail(err, IMS_EUNSUPPORTED,
				"cannot run as one of %d ranks: this build has no MPI "
				"(install libopenmpi-dev and rebuild with "
				"-DIMSHARD_WITH_MPI=ON)",
				lw);
	}
#endif
	*out = c;
	return 0;
}

int dp_rank(const dp_comm *c) { return c ? c->rank : 0; }
int dp_world(const dp_comm *c) { return c ? c->world : 1; }

int dp_broadcast(dp_comm *c, void *buf, size_t bytes, int root,
		 ims_error *err)
{
	if (!c || c->world == 1)
		return 0;
#ifdef IMSHARD_HAVE_MPI
	for (size_t off = 0; off < bytes; off += DP_CHUNK) {
		size_t n = bytes - off < DP_CHUNK ? bytes - off : DP_CHUNK;
		wait_begin(c);
		int mrc = MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root,
				    MPI_COMM_WORLD);
		wait_end(c);
		MPI_CHECK(err, mrc);
	}
#else
	(void)buf;
	(void)bytes;
	(void)root;
	(void)err;
#endif
	return 0;
}

int dp_allreduce_sum_f32(dp_comm *c, float *buf, size_t count, ims_error *err)
{
	if (!c || c->world == 1)
		return 0;
#ifdef IMSHARD_HAVE_MPI
	for (size_t off = 0; off < count; off += DP_CHUNK) {
		size_t n = count - off < DP_CHUNK ? count - off : DP_CHUNK;
		wait_begin(c);
		int mrc = MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)n, MPI_FLOAT,
					MPI_SUM, MPI_COMM_WORLD);
		wait_end(c);
		MPI_CHECK(err, mrc);
	}
#else
	(void)buf;
	(void)count;
	(void)err;
#endif
	return 0;
}

int dp_allreduce_sum_f64(dp_comm *c, double *buf, size_t count,
			 ims_error *err)
{
	if (!c || c->world == 1)
		return 0;
#ifdef IMSHARD_HAVE_MPI
	wait_begin(c);
	int mrc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_DOUBLE,
				MPI_SUM, MPI_COMM_WORLD);
	wait_end(c);
	MPI_CHECK(err, mrc);
#else
	(void)buf;
	(void)count;
	(void)err;
#endif
	return 0;
}

int dp_allgather_f64(dp_comm *c, const double *mine, size_t count,
		     double *all, ims_error *err)
{
	if (!c || c->world == 1) {
		memmove(all, mine, count * sizeof(double));
		return 0;
	}
#ifdef IMSHARD_HAVE_MPI
	wait_begin(c);
	int mrc = MPI_Allgather(mine, (int)count, MPI_DOUBLE, all, (int)count,
				MPI_DOUBLE, MPI_COMM_WORLD);
	wait_end(c);
	MPI_CHECK(err, mrc);
#else
	(void)err;
#endif
	return 0;
}

int dp_barrier(dp_comm *c, ims_error *err)
{
	if (!c || c->world == 1)
		return 0;
#ifdef IMSHARD_HAVE_MPI
	wait_begin(c);
	int mrc = MPI_Barrier(MPI_COMM_WORLD);
	wait_end(c);
	MPI_CHECK(err, mrc);
#else
	(void)err;
#endif
	return 0;
}

void dp_abort(dp_comm *c, int code)
{
#ifdef IMSHARD_HAVE_MPI
	if (c && c->mpi && c->world > 1)
		MPI_Abort(MPI_COMM_WORLD, code);
#else
	(void)c;
	(void)code;
#endif
}

int dp_set_timeout(dp_comm *c, double seconds, ims_error *err)
{
	RETURN_IF(!(seconds >= 0), err, IMS_EINVAL,
		  "collective timeout %g s: use 0 (none) or more", seconds);
	if (!c || c->world == 1 || seconds == 0 || c->watching) {
		if (c)
			c->timeout_s = seconds;
		return 0;
	}
	c->timeout_s = seconds;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	int rc = pthread_create(&c->watchdog, NULL, watch, c);
	if (rc) {
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		return ims_fail(err, IMS_EIO,
				"cannot start the collective watchdog: %s",
				strerror(rc));
	}
	c->watching = 1;
	return 0;
}

void dp_finalize(dp_comm *c)
{
	if (!c)
		return;
	if (c->watching) {
		pthread_mutex_lock(&c->mu);
		c->stop = 1;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->watchdog, NULL);
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
	}
#ifdef IMSHARD_HAVE_MPI
	if (c->mpi)
		MPI_Finalize();
#endif
	free(c);
}

/* ---- gradient buckets ---------------------------------------------------- */

struct dp_buckets {
	dp_comm *c;
	float *buf;
	size_t count, size; /* elements; bucket k is [count - (k+1) size, count - k size) */
	int n, started;     /* buckets, how many are in flight or done */
	double seconds;     /* inside MPI since the last take */
#ifdef IMSHARD_HAVE_MPI
	MPI_Request *req;
#endif
};

int dp_buckets_create(dp_comm *c, float *buf, size_t count,
		      size_t bucket_floats, dp_buckets **out, ims_error *err)
{
	RETURN_IF(!out || (!buf && count), err, IMS_EINVAL,
		  "cannot set up gradient buckets: no buffer");
	dp_buckets *b = calloc(1, sizeof(*b));
	RETURN_IF(!b, err, IMS_ENOMEM, "cannot set up gradient buckets: out of memory");
	b->c = c;
	b->buf = buf;
	b->count = count;
	/* a bucket fits one MPI count */
	b->size = bucket_floats < 1 ? 1 : bucket_floats;
	if (b->size > (size_t)1 << 30)
		b->size = (size_t)1 << 30;
	b->n = count ? (int)((count + b->size - 1) / b->size) : 0;
#ifdef IMSHARD_HAVE_MPI
	b->req = calloc((size_t)(b->n ? b->n : 1), sizeof(MPI_Request));
	if (!b->req) {
		free(b);
		return ims_fail(err, IMS_ENOMEM,
				"cannot set up gradient buckets: out of memory");
	}
#endif
	*out = b;
	return 0;
}

static int active(const dp_buckets *b)
{
	return b->c && b->c->world > 1 && b->n > 0;
}

#ifdef IMSHARD_HAVE_MPI
static int start_bucket(dp_buckets *b, int k, ims_error *err)
{
	size_t hi = b->count - (size_t)k * b->size;
	size_t lo = hi > b->size ? hi - b->size : 0;
	MPI_CHECK(err, MPI_Iallreduce(MPI_IN_PLACE, b->buf + lo, (int)(hi - lo),
				      MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
				      &b->req[k]));
	return 0;
}
#endif

int dp_buckets_ready(dp_buckets *b, size_t ready, ims_error *err)
{
	if (!active(b) || b->n == 1) /* one bucket: all of it in finish */
		return 0;
#ifdef IMSHARD_HAVE_MPI
	double t0 = ims_now();
	int rc = 0;
	/* bucket k is complete once ready reaches its lower end */
	while (!rc && b->started < b->n) {
		size_t hi = b->count - (size_t)b->started * b->size;
		size_t lo = hi > b->size ? hi - b->size : 0;
		if (ready > lo)
			break;
		rc = start_bucket(b, b->started, err);
		b->started++;
	}
	if (!rc && b->started > 0) {
		/* shared-memory and TCP transports move data only inside MPI
		 * calls: a test between layers lets the started ones advance */
		int flag;
		int mrc = MPI_Testall(b->started, b->req, &flag, MPI_STATUSES_IGNORE);
		if (mrc != MPI_SUCCESS)
			rc = ims_fail(err, IMS_EIO, "gradient allreduce failed (MPI error %d)",
				      mrc);
	}
	b->seconds += ims_now() - t0;
	return rc;
#else
	(void)ready;
	(void)err;
	return 0;
#endif
}

int dp_buckets_finish(dp_buckets *b, ims_error *err)
{
	if (!active(b))
		return 0;
#ifdef IMSHARD_HAVE_MPI
	double t0 = ims_now();
	int rc = 0;
	if (b->n == 1) {
		/* One bucket is complete only when backward is, so there is
		 * nothing to overlap, and OpenMPI's blocking allreduce is 2.6x
		 * faster than its non-blocking one (4 MiB over 2 ranks of one
		 * machine: 0.54 against 1.4 ms, bench/train/mpi_allreduce.c). */
		rc = dp_allreduce_sum_f32(b->c, b->buf, b->count, err);
		b->seconds += ims_now() - t0;
		return rc;
	}
	while (!rc && b->started < b->n)
		rc = start_bucket(b, b->started++, err);
	if (!rc) {
		wait_begin(b->c);
		int mrc = MPI_Waitall(b->started, b->req, MPI_STATUSES_IGNORE);
		wait_end(b->c);
		if (mrc != MPI_SUCCESS)
			rc = ims_fail(err, IMS_EIO, "gradient allreduce failed (MPI error %d)",
				      mrc);
	}
	b->started = 0;
	b->seconds += ims_now() - t0;
	return rc;
#else
	(void)err;
	return 0;
#endif
}

double dp_buckets_take_seconds(dp_buckets *b)
{
	if (!b)
		return 0;
	double s = b->seconds;
	b->seconds = 0;
	return s;
}

void dp_buckets_free(dp_buckets *b)
{
	if (!b)
		return;
#ifdef IMSHARD_HAVE_MPI
	free(b->req);
#endif
	free(b);
}
