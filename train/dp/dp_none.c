/*
 * dp_none.c - the ranks' transport in a build without MPI (dp_internal.h):
 * the process is the only rank, so dp.c never calls past dp_mpi_init; it
 * exists so callers need no #ifdef. A process started by a launcher as
 * one of several is refused: it would silently train alone.
 */
#include "train/dp/dp_internal.h"

static int no_mpi(ims_error *err)
{
	return ims_fail(err, IMS_EUNSUPPORTED,
			"cannot talk to other ranks: this build has no MPI");
}

int dp_mpi_init(dp_comm *c, int launched, int *argc, char ***argv,
		ims_error *err)
{
	(void)c;
	(void)argc;
	(void)argv;
	RETURN_IF(launched > 1, err, IMS_EUNSUPPORTED,
		  "cannot run as one of %d ranks: this build has no MPI "
		  "(install libopenmpi-dev and rebuild with "
		  "-DIMSHARD_WITH_MPI=ON)",
		  launched);
	return 0;
}

void dp_mpi_finalize(dp_comm *c)
{
	(void)c;
}

void dp_mpi_abort(dp_comm *c, int code)
{
	(void)c;
	(void)code;
}

int dp_mpi_broadcast(dp_comm *c, void *buf, size_t bytes, int root,
		     ims_error *err)
{
	(void)c;
	(void)buf;
	(void)bytes;
	(void)root;
	return no_mpi(err);
}

int dp_mpi_allreduce_f32(dp_comm *c, float *buf, size_t count, ims_error *err)
{
	(void)c;
	(void)buf;
	(void)count;
	return no_mpi(err);
}

int dp_mpi_allreduce_f64(dp_comm *c, double *buf, size_t count,
			 ims_error *err)
{
	(void)c;
	(void)buf;
	(void)count;
	return no_mpi(err);
}

int dp_mpi_allgather_f64(dp_comm *c, const double *mine, size_t count,
			 double *all, ims_error *err)
{
	(void)c;
	(void)mine;
	(void)count;
	(void)all;
	return no_mpi(err);
}

int dp_mpi_barrier(dp_comm *c, ims_error *err)
{
	(void)c;
	return no_mpi(err);
}

/* Buckets exist with one rank too (and then do nothing): no requests. */
int dp_mpi_buckets_init(dp_buckets *b, ims_error *err)
{
	(void)b;
	(void)err;
	return 0;
}

void dp_mpi_buckets_release(dp_buckets *b)
{
	(void)b;
}

int dp_mpi_bucket_start(dp_buckets *b, int k, size_t lo, size_t hi,
			ims_error *err)
{
	(void)b;
	(void)k;
	(void)lo;
	(void)hi;
	return no_mpi(err);
}

int dp_mpi_buckets_test(dp_buckets *b, ims_error *err)
{
	(void)b;
	return no_mpi(err);
}

int dp_mpi_buckets_wait(dp_buckets *b, ims_error *err)
{
	(void)b;
	return no_mpi(err);
}
