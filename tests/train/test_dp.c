/*
 * test_dp.c - the node-local rank (dp_local_rank, dp_local_world) comes
 * from MPI's shared-memory communicator, not from launcher variables:
 * run alone it is 0 of 1, and under mpirun -np N on one machine (ctest's
 * test_dp_np2) ranks 0 .. N-1 are local ranks 0 .. N-1 of N, although
 * the test sets OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID and
 * SLURM_LOCALID to a wrong value (7) in every rank's environment.
 */
#include <stdio.h>

#include "test.h"
#include "train/dp.h"

int main(int argc, char **argv)
{
	ims_error err;
	dp_comm *c = NULL;
	CHECK_OK(dp_init(&argc, &argv, 0, NULL, &c, &err), &err);
	const int rank = dp_rank(c), world = dp_world(c);
	double mine[2] = {dp_local_rank(c), dp_local_world(c)};
	double all[2 * 64];
	CHECK(world <= 64);
	CHECK_OK(dp_allgather_f64(c, mine, 2, all, &err), &err);
	/* one machine: every rank is local, in world-rank order */
	for (int r = 0; r < world && r < 64; r++) {
		CHECK_EQ_INT((int)all[2 * r], r);
		CHECK_EQ_INT((int)all[2 * r + 1], world);
	}
	printf("rank %d of %d: local rank %d of %d\n", rank, world,
	       dp_local_rank(c), dp_local_world(c));
	int fails = TEST_EXIT();
	dp_finalize(c);
	return fails;
}
