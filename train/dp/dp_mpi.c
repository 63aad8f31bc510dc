/*
 * dp_mpi.c - the ranks' transport over MPI (dp_internal.h): host memory
 * between the processes mpirun started. Errors come back as codes
 * (MPI_ERRORS_RETURN), so a failure is reported as imshard's one line
 * instead of MPI aborting the job.
 */
#include <stdlib.h>

#include <mpi.h>

#include "train/dp/dp_internal.h"

/* A failed MPI call, as one line naming it: MPI's own words, and "out of
 * memory" (IMS_ENOMEM) for its MPI_ERR_NO_MEM. */
#define MPI_CHECK(err, what, call)                                             \
	do {                                                                   \
		int mrc_ = (call);                                             \
		if (mrc_ != MPI_SUCCESS) {                                     \
			char mmsg_[MPI_MAX_ERROR_STRING];                      \
			int mlen_ = 0, mcls_ = 0;                              \
			MPI_Error_string(mrc_, mmsg_, &mlen_);                 \
			MPI_Error_class(mrc_, &mcls_);                         \
			return ims_fail((err),                                 \
					mcls_ == MPI_ERR_NO_MEM ? IMS_ENOMEM   \
								: IMS_EIO,     \
					"%s failed: %s%s", (what),             \
					mcls_ == MPI_ERR_NO_MEM                \
						? "out of memory: "            \
						: "",                          \
					mmsg_);                                \
		}                                                              \
	} while (0)

/* MPI counts are int: large buffers go in pieces of 2^30 elements. */
#define DP_CHUNK ((size_t)1 << 30)

int dp_mpi_init(dp_comm *c, int launched, int *argc, char ***argv,
		ims_error *err)
{
	if (launched <= 0)
		return 0;
	int provided = 0;
	int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
	if (rc != MPI_SUCCESS)
		return ims_fail(err, IMS_EIO, "cannot initialise MPI (error %d)", rc);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c->world);
	c->mpi = 1;
	/* The rank among the processes of this machine, from MPI itself:
	 * launchers' variables (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID...)
	 * differ by launcher, and one not listed left every rank on GPU 0.
	 * Keyed by world rank, so local ranks follow world ranks. */
	MPI_Comm node;
	int src = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank,
				      MPI_INFO_NULL, &node);
	MPI_CHECK(err, "MPI_Comm_split_type", src);
	int lrc = MPI_Comm_rank(node, &c->local);
	if (lrc == MPI_SUCCESS)
		lrc = MPI_Comm_size(node, &c->local_world);
	MPI_Comm_free(&node);
	MPI_CHECK(err, "MPI_Comm_rank", lrc);
	return 0;
}

void dp_mpi_finalize(dp_comm *c)
{
	(void)c;
	MPI_Finalize();
}

void dp_mpi_abort(dp_comm *c, int code)
{
	(void)c;
	MPI_Abort(MPI_COMM_WORLD, code);
}

int dp_mpi_broadcast(dp_comm *c, void *buf, size_t bytes, int root,
		     ims_error *err)
{
	for (size_t off = 0; off < bytes; off += DP_CHUNK) {
		size_t n = bytes - off < DP_CHUNK ? bytes - off : DP_CHUNK;
		dp_wait_begin(c);
		int mrc = MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root,
				    MPI_COMM_WORLD);
		dp_wait_end(c);
		MPI_CHECK(err, "MPI_Bcast", mrc);
	}
	return 0;
}

int dp_mpi_allreduce_f32(dp_comm *c, float *buf, size_t count, ims_error *err)
{
	for (size_t off = 0; off < count; off += DP_CHUNK) {
		size_t n = count - off < DP_CHUNK ? count - off : DP_CHUNK;
		dp_wait_begin(c);
		int mrc = MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)n, MPI_FLOAT,
					MPI_SUM, MPI_COMM_WORLD);
		dp_wait_end(c);
		MPI_CHECK(err, "MPI_Allreduce", mrc);
	}
	return 0;
}

int dp_mpi_allreduce_f64(dp_comm *c, double *buf, size_t count,
			 ims_error *err)
{
	dp_wait_begin(c);
	int mrc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_DOUBLE,
				MPI_SUM, MPI_COMM_WORLD);
	dp_wait_end(c);
	MPI_CHECK(err, "MPI_Allreduce", mrc);
	return 0;
}

int dp_mpi_allgather_f64(dp_comm *c, const double *mine, size_t count,
			 double *all, ims_error *err)
{
	dp_wait_begin(c);
	int mrc = MPI_Allgather(mine, (int)count, MPI_DOUBLE, all, (int)count,
				MPI_DOUBLE, MPI_COMM_WORLD);
	dp_wait_end(c);
	MPI_CHECK(err, "MPI_Allgather", mrc);
	return 0;
}

int dp_mpi_barrier(dp_comm *c, ims_error *err)
{
	dp_wait_begin(c);
	int mrc = MPI_Barrier(MPI_COMM_WORLD);
	dp_wait_end(c);
	MPI_CHECK(err, "MPI_Barrier", mrc);
	return 0;
}

int dp_mpi_buckets_init(dp_buckets *b, ims_error *err)
{
	b->req = calloc((size_t)(b->n ? b->n : 1), sizeof(MPI_Request));
	RETURN_IF(!b->req, err, IMS_ENOMEM,
		  "cannot set up gradient buckets: out of memory");
	return 0;
}

void dp_mpi_buckets_release(dp_buckets *b)
{
	free(b->req);
	b->req = NULL;
}

int dp_mpi_bucket_start(dp_buckets *b, int k, size_t lo, size_t hi,
			ims_error *err)
{
	MPI_Request *req = b->req;
	int mrc = MPI_Iallreduce(MPI_IN_PLACE, b->buf + lo, (int)(hi - lo), MPI_FLOAT,
				 MPI_SUM, MPI_COMM_WORLD, &req[k]);
	MPI_CHECK(err, "MPI_Iallreduce", mrc);
	return 0;
}

int dp_mpi_buckets_test(dp_buckets *b, ims_error *err)
{
	int flag;
	int mrc = MPI_Testall(b->started, b->req, &flag, MPI_STATUSES_IGNORE);
	MPI_CHECK(err, "the gradient allreduce (MPI_Testall)", mrc);
	return 0;
}

int dp_mpi_buckets_wait(dp_buckets *b, ims_error *err)
{
	int mrc = MPI_Waitall(b->started, b->req, MPI_STATUSES_IGNORE);
	MPI_CHECK(err, "the gradient allreduce (MPI_Waitall)", mrc);
	return 0;
}
