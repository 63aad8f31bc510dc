/*
 * dp.h - data parallelism: the ranks of a job and the collectives that
 * keep their weights identical. MPI moves host memory (the CPU backend's
 * tensors, the loop's statistics) and bootstraps NCCL, which moves device
 * memory on CUDA (one GPU per rank).
 *
 * Under a launcher (mpirun sets OMPI_COMM_WORLD_SIZE, PMI launchers
 * PMI_SIZE or PMIX_RANK) MPI is initialised and every process is one
 * rank; otherwise the process is the only rank and no MPI library is
 * touched, so a plain run needs no MPI at run time. Builds without MPI
 * (train/dp/dp_none.c) or without NCCL (train/cuda/nccl_none.c) have
 * every function: they run one rank, and refuse with one line what would
 * need the missing library.
 *
 * Caveats:
 *   - Collectives must be called by every rank in the same order; one
 *     thread per process calls them (MPI is initialised FUNNELED).
 *   - Every function that can fail returns 0 or a negative IMS_E* code
 *     (common/common.h) and fills the ims_error it is given. A rank that
 *     fails should dp_abort: the others would wait in their next
 *     collective.
 *   - With one rank every collective returns at once (a copy for
 *     dp_allgather_f64).
 */
#ifndef IMSHARD_DP_H
#define IMSHARD_DP_H

#include <stddef.h>

#include "common/common.h"
#include "train/nn.h"

/* ---- the ranks and MPI (train/dp/) --------------------------------------- */

typedef struct dp_comm dp_comm;

/*
 * Joins the job (MPI_Init when launched by mpirun; it may rewrite argc and
 * argv, so call it before parsing them) into *out, for dp_finalize.
 * join_timeout_s > 0 with several ranks: the collective watchdog
 * (dp_set_timeout) already watches the joining, as MPI_Init waits for
 * every rank: a rank stopped before it joined would leave the others
 * there forever; its line names who (NULL: "imshard"), which must outlive
 * c. 0: no limit. Errors: IMS_EINVAL (a negative or NaN timeout), IMS_EIO
 * (MPI failed, or the watchdog could not start), IMS_EUNSUPPORTED
 * (launched as several ranks by a build without MPI: each would silently
 * train alone), IMS_ENOMEM.
 */
int dp_init(int *argc, char ***argv, double join_timeout_s, const char *who,
	    dp_comm **out, ims_error *err);
/*
 * How many ranks a launcher (mpirun, a PMI launcher) started this
 * process among, read from the launcher's environment as dp_init reads
 * it, without touching MPI; *rank (may be NULL) gets this process's rank
 * there. 0 (and rank 0) when no launcher did; 1 when one did without
 * saying how many. For programs that run as one process and must say so
 * when started as several.
 */
int dp_launched(int *rank);
int dp_rank(const dp_comm *c);
int dp_world(const dp_comm *c);
/* This process's rank among the ranks on its machine (0 ..
 * dp_local_world - 1, in world-rank order), from MPI
 * (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED), whatever launched it;
 * 0 for a rank alone. Which GPU a rank uses follows from it
 * (nn_cuda_device_for_rank). */
int dp_local_rank(const dp_comm *c);
/* The ranks on this process's machine (1 for a rank alone). */
int dp_local_world(const dp_comm *c);
/* Copies root's bytes to every rank. */
int dp_broadcast(dp_comm *c, void *buf, size_t bytes, int root,
		 ims_error *err);
/* In-place sums over ranks (floats: any count, in pieces of 2^30). */
int dp_allreduce_sum_f32(dp_comm *c, float *buf, size_t count, ims_error *err);
int dp_allreduce_sum_f64(dp_comm *c, double *buf, size_t count,
			 ims_error *err);
/* all[r * count + i] = rank r's mine[i]. */
int dp_allgather_f64(dp_comm *c, const double *mine, size_t count,
		     double *all, ims_error *err);
int dp_barrier(dp_comm *c, ims_error *err);
/*
 * seconds > 0 with several ranks: a watchdog thread ends this process
 * (exit status 1, a line on stderr naming the rank: the process has no
 * caller left to return to) when one blocking collective has waited
 * longer than that, so a job whose rank hangs alive ends instead of
 * waiting forever (mpirun ends a job whose rank died by itself). 0: no
 * limit. who starts that line ("imshard-train"); it must outlive c.
 * It replaces dp_init's timeout, and goes on watching dp_finalize's
 * leaving (MPI_Finalize waits for every rank too). IMS_EINVAL for a
 * negative value, IMS_EIO when the thread cannot start.
 */
int dp_set_timeout(dp_comm *c, double seconds, const char *who,
		   ims_error *err);
/*
 * What this rank is doing now ("validation", "the checkpoint"), for the
 * watchdog's line: a rank that waited too long says in which part of the
 * run it waited. what must outlive c (a string literal); NULL: unsaid.
 */
void dp_set_phase(dp_comm *c, const char *what);
/* Ends every rank of the job at once (after a fatal error on one rank,
 * the others would wait forever in the next collective). */
void dp_abort(dp_comm *c, int code);
/* Leaves the job (MPI_Finalize) and frees c. NULL is fine. */
void dp_finalize(dp_comm *c);

/*
 * Gradient buckets: an in-place sum over ranks of buf[0 .. count), sent in
 * buckets of about bucket_floats from the top down as backward finishes
 * them (non-blocking allreduces, progressed between layers), so the
 * communication overlaps the rest of backward; a single bucket is one
 * blocking allreduce in dp_buckets_finish. Per step: dp_buckets_ready
 * as gradients become final (from nn_model_backward's hook), then
 * dp_buckets_finish, after which buf holds the sums. With one rank both
 * do nothing. b is owned by the caller: dp_buckets_free.
 */
typedef struct dp_buckets dp_buckets;
int dp_buckets_create(dp_comm *c, float *buf, size_t count,
		      size_t bucket_floats, dp_buckets **out, ims_error *err);
/* buf[ready .. count) is final: starts the buckets it completes and lets
 * those in flight progress. */
int dp_buckets_ready(dp_buckets *b, size_t ready, ims_error *err);
/* Starts the rest and waits for every bucket. */
int dp_buckets_finish(dp_buckets *b, ims_error *err);
/* Seconds spent inside MPI calls since the last call of this (the
 * communication time of a step whose collectives overlap its compute).
 * 0 for NULL. */
double dp_buckets_take_seconds(dp_buckets *b);
/* b may be NULL. */
void dp_buckets_free(dp_buckets *b);

/* ---- NCCL: device tensors (train/cuda/nccl_cuda.c) ----------------------- */

/*
 * One NCCL communicator over the ranks of a dp_comm, one GPU per rank.
 * Bootstrap: rank 0 makes NCCL's unique id, MPI broadcasts it, every rank
 * joins with ncclCommInitRank on its context's device. Collectives run on
 * a communication stream of their own; each waits on the device for an
 * event recorded on the context's compute stream, and the compute stream
 * waits on an event recorded after it, so the host queues them without
 * blocking. The host only blocks where it has to know the result
 * (dp_nccl_broadcast, dp_nccl_allreduce_avg, dp_nccl_wait), and there
 * it polls: a collective that makes no progress for the timeout, or an
 * error NCCL reports asynchronously (a peer that died), aborts the
 * communicator and fails with one line, so no rank waits forever.
 *
 * Caveats: as for dp_comm. Builds without NCCL (or without the CUDA
 * backend) have every function: dp_nccl_available says 0 and
 * dp_nccl_create fails with IMS_EUNSUPPORTED and a line saying so. A
 * build with NCCL but without MPI has one rank only (dp_init), which the
 * trainer never gives NCCL; test_nccl still runs it.
 */
typedef struct dp_nccl dp_nccl;

/* 1 when this build has NCCL, else 0. */
int dp_nccl_available(void);

/*
 * Joins every rank of c to one communicator on ctx's device (a CUDA
 * context; its stream is the compute stream). timeout_s: how long a
 * collective may make no progress before every waiting rank gives up (0:
 * forever). Collective over c. Errors: IMS_EUNSUPPORTED (no NCCL in this
 * build, ctx not a CUDA context, or two ranks on one GPU: NCCL supports
 * one rank per GPU, so every rank refuses before it starts), IMS_EIO
 * (NCCL or CUDA failed: its message), IMS_ENOMEM.
 */
int dp_nccl_create(dp_comm *c, nn_ctx *ctx, double timeout_s, dp_nccl **out,
		   ims_error *err);
/* Destroys the communicator (aborts it after a failure) and the streams
 * and events. n may be NULL. */
void dp_nccl_free(dp_nccl *n);

/*
 * Aborting. NCCL's abort waits until no CUDA graph holds the
 * communicator's collectives (NCCL 2.26 and later: a recording keeps a
 * reference until it is destroyed), so a rank whose peer failed while a
 * recorded pass held collectives would hang in the abort instead of
 * failing. Before every abort (a failure, the timeout, dp_nccl_abort)
 * this layer ends and drops a recording of the compute stream still in
 * progress, then calls release(ctx), which must destroy every kept
 * recording (nn_graph_free) that holds collectives of n; a replay still
 * running is freed when it ends, which the abort makes happen.
 * dp_nccl_abort aborts now: every later call on n fails fast.
 */
void dp_nccl_on_abort(dp_nccl *n, void (*release)(void *ctx), void *ctx);
void dp_nccl_abort(dp_nccl *n);

/* Copies root's count device floats to every rank; waits for it. */
int dp_nccl_broadcast(dp_nccl *n, float *buf, size_t count, int root,
		      ims_error *err);
/* In-place mean over ranks of count device floats (ncclAvg); waits. */
int dp_nccl_allreduce_avg(dp_nccl *n, float *buf, size_t count,
			  ims_error *err);
/* The same, queued: behind the compute stream's work so far, and the
 * compute stream waits for it; the host does not (dp_nccl_wait's poll,
 * or the next waiting call, covers it and its errors). */
int dp_nccl_allreduce_avg_queue(dp_nccl *n, float *buf, size_t count,
				ims_error *err);

/*
 * Gradient buckets: buf[0 .. count) (device) is averaged over ranks in
 * buckets of about bucket_floats from the top down, each queued on the
 * communication stream as soon as backward has finished it, behind an
 * event on the compute stream, so the allreduce overlaps the rest of
 * backward. Per step: dp_nccl_ready(ready) from the model's gradient hook
 * (buf[ready .. count) is final), then dp_nccl_flush, which queues what
 * is left and makes the compute stream wait for the last bucket, then
 * dp_nccl_wait, which waits (polling, with the timeout) until the compute
 * stream's work so far, and with it every bucket, is done. dp_nccl_finish
 * is flush and wait. dp_nccl_buckets sets the buffer and bucket size
 * (once).
 *
 * Recording (nn_ctx_record_begin, CUDA graphs): ready and flush queue
 * without waiting for the host, so a backward pass recorded with them
 * holds the step's collectives; a replay queues them all again, and the
 * host then calls dp_nccl_wait alone. Every rank must replay, record and
 * queue its passes in the same order (NCCL matches collectives by
 * order).
 */
int dp_nccl_buckets(dp_nccl *n, float *buf, size_t count,
		    size_t bucket_floats, ims_error *err);
int dp_nccl_ready(dp_nccl *n, size_t ready, ims_error *err);
int dp_nccl_flush(dp_nccl *n, ims_error *err);
int dp_nccl_wait(dp_nccl *n, ims_error *err);
int dp_nccl_finish(dp_nccl *n, ims_error *err);
/* Seconds the host spent blocked in the calls above since the last take. */
double dp_nccl_take_seconds(dp_nccl *n);

#endif
