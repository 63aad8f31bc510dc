/*
 * dp.c - the ranks of a data-parallel job: joining, one-rank shortcuts,
 * the collective watchdog, and gradient buckets' bookkeeping. Bytes move
 * in the transport (dp_mpi.c, or dp_none.c without MPI).
 *
 * MPI is initialised only when a launcher started this process: a plain
 * `imshard-train` is one rank and needs no MPI at run time. A build
 * without MPI refuses to run as one rank of several, since each process
 * would silently train alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/dp/dp_internal.h"

void dp_wait_begin(dp_comm *c)
{
	__atomic_store_n(&c->waiting_since_ns, ims_now_ns(), __ATOMIC_RELEASE);
}

void dp_wait_end(dp_comm *c)
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
		ims_deadline(0.25, &until);
		pthread_cond_timedwait(&c->cv, &c->mu, &until);
		int64_t since = __atomic_load_n(&c->waiting_since_ns, __ATOMIC_ACQUIRE);
		if (!c->stop && since && c->timeout_s > 0 &&
		    (ims_now_ns() - since) / 1e9 > c->timeout_s) {
			const char *phase = __atomic_load_n(&c->phase, __ATOMIC_ACQUIRE);
			fprintf(stderr,
				"%s: rank %d: waited more than %g s for "
				"the other ranks in a collective%s%s "
				"(--collective-timeout): a rank died or hangs, "
				"or works alone for longer than that (then raise "
				"--collective-timeout); ending this rank so the "
				"job ends\n",
				c->who, c->rank, c->timeout_s,
				phase ? " during " : "", phase ? phase : "");
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

int dp_launched(int *rank)
{
	const char *v = getenv("OMPI_COMM_WORLD_RANK");
	if (!v)
		v = getenv("PMI_RANK");
	if (!v)
		v = getenv("PMIX_RANK");
	if (rank)
		*rank = v ? atoi(v) : 0;
	return launched_world();
}

static int start_watchdog(dp_comm *c, ims_error *err)
{
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

static void stop_watchdog(dp_comm *c)
{
	if (!c->watching)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->watchdog, NULL);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	c->watching = 0;
}

int dp_init(int *argc, char ***argv, double join_timeout_s, const char *who,
	    dp_comm **out, ims_error *err)
{
	RETURN_IF(!out, err, IMS_EINVAL, "cannot start ranks: no output");
	*out = NULL;
	RETURN_IF(!(join_timeout_s >= 0), err, IMS_EINVAL,
		  "collective timeout %g s: use 0 (none) or more", join_timeout_s);
	dp_comm *c = calloc(1, sizeof(*c));
	RETURN_IF(!c, err, IMS_ENOMEM, "cannot start ranks: out of memory");
	c->world = 1;
	c->local_world = 1; /* one rank: alone on its machine */
	c->who = who ? who : "imshard";
	const int launched = launched_world();
	int rc = 0;
	if (launched > 1 && join_timeout_s > 0) {
		/* MPI_Init waits for every rank: watched as a collective,
		 * named by the launcher's rank (MPI's is not known yet) */
		dp_launched(&c->rank);
		c->timeout_s = join_timeout_s;
		rc = start_watchdog(c, err);
	}
	if (!rc) {
		dp_set_phase(c, "the start (MPI_Init)");
		dp_wait_begin(c);
		rc = dp_mpi_init(c, launched, argc, argv, err);
		dp_wait_end(c);
		dp_set_phase(c, NULL);
	}
	if (rc) {
		stop_watchdog(c);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int dp_rank(const dp_comm *c) { return c ? c->rank : 0; }
int dp_world(const dp_comm *c) { return c ? c->world : 1; }
int dp_local_rank(const dp_comm *c) { return c ? c->local : 0; }
int dp_local_world(const dp_comm *c) { return c ? c->local_world : 1; }

int dp_broadcast(dp_comm *c, void *buf, size_t bytes, int root,
		 ims_error *err)
{
	if (!c || c->world == 1)
		return 0;
	return dp_mpi_broadcast(c, buf, bytes, root, err);
}

int dp_allreduce_sum_f32(dp_comm *c, float *buf, size_t count, ims_error *err)
{
	if (!c || c->world == 1)
		return 0;
	return dp_mpi_allreduce_f32(c, buf, count, err);
}

int dp_allreduce_sum_f64(dp_comm *c, double *buf, size_t count,
			 ims_error *err)
{
	if (!c || c->world == 1)
		return 0;
	return dp_mpi_allreduce_f64(c, buf, count, err);
}

int dp_allgather_f64(dp_comm *c, const double *mine, size_t count,
		     double *all, ims_error *err)
{
	if (!c || c->world == 1) {
		memmove(all, mine, count * sizeof(double));
		return 0;
	}
	return dp_mpi_allgather_f64(c, mine, count, all, err);
}

int dp_barrier(dp_comm *c, ims_error *err)
{
	if (!c || c->world == 1)
		return 0;
	return dp_mpi_barrier(c, err);
}

void dp_set_phase(dp_comm *c, const char *what)
{
	if (c)
		__atomic_store_n(&c->phase, what, __ATOMIC_RELEASE);
}

void dp_abort(dp_comm *c, int code)
{
	if (c && c->mpi && c->world > 1)
		dp_mpi_abort(c, code);
}

int dp_set_timeout(dp_comm *c, double seconds, const char *who,
		   ims_error *err)
{
	RETURN_IF(!(seconds >= 0), err, IMS_EINVAL,
		  "collective timeout %g s: use 0 (none) or more", seconds);
	if (!c)
		return 0;
	if (c->watching) {
		/* dp_init's: the watchdog reads these under its lock */
		pthread_mutex_lock(&c->mu);
		c->who = who ? who : "imshard";
		c->timeout_s = seconds;
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	c->who = who ? who : "imshard";
	c->timeout_s = seconds;
	if (c->world == 1 || seconds == 0)
		return 0;
	return start_watchdog(c, err);
}

void dp_finalize(dp_comm *c)
{
	if (!c)
		return;
	if (c->mpi) {
		/* MPI_Finalize waits for every rank too: still watched */
		dp_set_phase(c, "the end (MPI_Finalize)");
		dp_wait_begin(c);
		dp_mpi_finalize(c);
		dp_wait_end(c);
	}
	stop_watchdog(c);
	free(c);
}

/* ---- gradient buckets ---------------------------------------------------- */

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
	int rc = dp_mpi_buckets_init(b, err);
	if (rc) {
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

static int active(const dp_buckets *b)
{
	return b->c && b->c->world > 1 && b->n > 0;
}

/* Bucket k's range: [lo, hi), from the top of the buffer down. */
static void bucket_range(const dp_buckets *b, int k, size_t *lo, size_t *hi)
{
	*hi = b->count - (size_t)k * b->size;
	*lo = *hi > b->size ? *hi - b->size : 0;
}

static int start_bucket(dp_buckets *b, int k, ims_error *err)
{
	size_t lo, hi;
	bucket_range(b, k, &lo, &hi);
	return dp_mpi_bucket_start(b, k, lo, hi, err);
}

int dp_buckets_ready(dp_buckets *b, size_t ready, ims_error *err)
{
	if (!active(b) || b->n == 1) /* one bucket: all of it in finish */
		return 0;
	double t0 = ims_now();
	int rc = 0;
	/* bucket k is complete once ready reaches its lower end */
	while (!rc && b->started < b->n) {
		size_t lo, hi;
		bucket_range(b, b->started, &lo, &hi);
		if (ready > lo)
			break;
		rc = start_bucket(b, b->started, err);
		b->started++;
	}
	if (!rc && b->started > 0)
		rc = dp_mpi_buckets_test(b, err);
	b->seconds += ims_now() - t0;
	return rc;
}

int dp_buckets_finish(dp_buckets *b, ims_error *err)
{
	if (!active(b))
		return 0;
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
		dp_wait_begin(b->c);
		rc = dp_mpi_buckets_wait(b, err);
		dp_wait_end(b->c);
	}
	b->started = 0;
	b->seconds += ims_now() - t0;
	return rc;
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
	dp_mpi_buckets_release(b);
	free(b);
}
