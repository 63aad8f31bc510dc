/*
 * dp_nccl.h - data parallelism on CUDA devices: one NCCL communicator
 * over the ranks of a dp_comm, one GPU per rank, for device tensors.
 *
 * Bootstrap: rank 0 makes NCCL's unique id, MPI broadcasts it (dp.c),
 * every rank joins with ncclCommInitRank on its context's device.
 * Collectives run on a communication stream of their own; each waits
 * on the device for an event recorded on the context's compute stream,
 * and the compute stream waits on an event recorded after it, so the
 * host queues them without blocking. The host only blocks where it has
 * to know the result (dp_nccl_broadcast, dp_nccl_allreduce_avg,
 * dp_nccl_finish), and there it polls: a collective that makes no
 * progress for the timeout, or an error NCCL reports asynchronously
 * (a peer that died), aborts the communicator and fails with one line,
 * so no rank waits forever.
 *
 * Caveats: one thread per process calls these, in the same order on
 * every rank (they are collectives). Builds without NCCL (or without the
 * CUDA backend or MPI) have every function: dp_nccl_available says 0 and
 * dp_nccl_create fails with IMS_EUNSUPPORTED and a line saying so.
 */
#ifndef IMSHARD_DP_NCCL_H
#define IMSHARD_DP_NCCL_H

#include <stddef.h>

#include "common/common.h"
#include "train/train.h"

typedef struct dp_nccl dp_nccl;

/* 1 when this build has NCCL (and MPI to bootstrap it), else 0. */
int dp_nccl_available(void);

/*
 * Joins every rank of c to one communicator on ctx's device (a CUDA
 * context; its stream is the compute stream). timeout_s: how long a
 * collective may make no progress before every waiting rank gives up (0:
 * forever). Collective over c. Errors: IMS_EUNSUPPORTED (no NCCL in this
 * build, ctx not a CUDA context), IMS_EIO (NCCL or CUDA failed: its
 * message), IMS_ENOMEM.
 */
int dp_nccl_create(dp_comm *c, nn_ctx *ctx, double timeout_s, dp_nccl **out,
		   ims_error *err);
/* Destroys the communicator (aborts it after a failure) and the streams
 * and events. n may be NULL. */
void dp_nccl_free(dp_nccl *n);

/* Copies root's count device floats to every rank; waits for it. */
int dp_nccl_broadcast(dp_nccl *n, float *buf, size_t count, int root,
		      ims_error *err);
/* In-place mean over ranks of count device floats (ncclAvg); waits. */
int dp_nccl_allreduce_avg(dp_nccl *n, float *buf, size_t count,
			  ims_error *err);

/*
 * Gradient buckets: buf[0 .. count) (device) is averaged over ranks in
 * buckets of about bucket_floats from the top down, each queued on the
 * communication stream as soon as backward has finished it, behind an
 * event on the compute stream, so the allreduce overlaps the rest of
 * backward. Per step: dp_nccl_ready(ready) from the model's gradient hook
 * (buf[ready .. count) is final), then dp_nccl_finish, which queues what
 * is left, makes the compute stream wait for the last bucket and waits
 * (polling, with the timeout) until every bucket is done.
 * dp_nccl_buckets sets the buffer and bucket size (once).
 */
int dp_nccl_buckets(dp_nccl *n, float *buf, size_t count,
		    size_t bucket_floats, ims_error *err);
int dp_nccl_ready(dp_nccl *n, size_t ready, ims_error *err);
int dp_nccl_finish(dp_nccl *n, ims_error *err);
/* Seconds the host spent blocked in the calls above since the last take. */
double dp_nccl_take_seconds(dp_nccl *n);

#endif
