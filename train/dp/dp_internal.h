/*
 * dp_internal.h - what dp.c shares with the transport under it: the
 * communicator's state, the bucket bookkeeping, and the transport's
 * entry points. dp.c holds the logic (one-rank shortcuts, which bucket is
 * complete, timing, the collective watchdog); the transport moves bytes:
 * dp_mpi.c, or dp_none.c in a build without MPI. CMake compiles one of
 * the two, so neither file needs an #ifdef.
 */
#ifndef IMSHARD_DP_INTERNAL_H
#define IMSHARD_DP_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "train/dp.h"

struct dp_comm {
	int rank, world;
	int local, local_world; /* rank and ranks on this machine (from
				   MPI_COMM_TYPE_SHARED; 0 and 1 alone) */
	int mpi;   /* 1: MPI initialised by dp_init */
	/* collective timeout: the watchdog thread ends the process when a
	 * blocking collective has waited longer than timeout_s */
	double timeout_s;
	const char *who; /* the watchdog's line starts with it */
	int64_t waiting_since_ns; /* atomic; 0 when in no blocking collective */
	const char *phase; /* atomic; what the rank is doing (dp_set_phase) */
	int watching, stop;
	pthread_t watchdog;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

struct dp_buckets {
	dp_comm *c;
	float *buf;
	size_t count, size; /* elements; bucket k is [count - (k+1) size, count - k size) */
	int n, started;     /* buckets, how many are in flight or done */
	double seconds;     /* inside MPI since the last take */
	void *req;          /* the transport's requests, one per bucket */
};

/* Around every blocking collective: what the watchdog looks at. */
void dp_wait_begin(dp_comm *c);
void dp_wait_end(dp_comm *c);

/*
 * The transport. dp_mpi_init joins the job when a launcher announced
 * `launched` ranks (0: none did), setting c->rank, c->world, c->local,
 * c->local_world and c->mpi;
 * dp_none.c's refuses launched > 1 (IMS_EUNSUPPORTED) and leaves one
 * rank. The rest are called by dp.c only with c->world > 1 (so never in a
 * build without MPI), except the bucket set-up and release, which are
 * called for every dp_buckets. Blocking calls bracket their waits with
 * dp_wait_begin / dp_wait_end; MPI's counts are int, so the large ones go
 * in pieces.
 */
int dp_mpi_init(dp_comm *c, int launched, int *argc, char ***argv,
		ims_error *err);
void dp_mpi_finalize(dp_comm *c);
void dp_mpi_abort(dp_comm *c, int code);
int dp_mpi_broadcast(dp_comm *c, void *buf, size_t bytes, int root,
		     ims_error *err);
int dp_mpi_allreduce_f32(dp_comm *c, float *buf, size_t count, ims_error *err);
int dp_mpi_allreduce_f64(dp_comm *c, double *buf, size_t count,
			 ims_error *err);
int dp_mpi_allgather_f64(dp_comm *c, const double *mine, size_t count,
			 double *all, ims_error *err);
int dp_mpi_barrier(dp_comm *c, ims_error *err);
/* b->req for b->n buckets (IMS_ENOMEM), and its release. */
int dp_mpi_buckets_init(dp_buckets *b, ims_error *err);
void dp_mpi_buckets_release(dp_buckets *b);
/* Starts the non-blocking sum of bucket k, b->buf[lo .. hi). */
int dp_mpi_bucket_start(dp_buckets *b, int k, size_t lo, size_t hi,
			ims_error *err);
/* Lets the first b->started buckets progress (shared-memory and TCP
 * transports move data only inside MPI calls), or waits for them. */
int dp_mpi_buckets_test(dp_buckets *b, ims_error *err);
int dp_mpi_buckets_wait(dp_buckets *b, ims_error *err);

#endif
