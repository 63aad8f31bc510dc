/* test_ctx_cuda.c - nn_ctx_init_cuda: on a machine without a usable GPU
 * (or in a build without the CUDA backend) it fails with IMS_EUNSUPPORTED
 * and one line that names --device cuda and the way out, and the context
 * is safe to release; with a GPU it sets up a "cuda" context, and a
 * device index that does not exist is IMS_EINVAL. nn_cuda_device_count
 * agrees with it. nn_cuda_device_for_rank maps node-local ranks onto the
 * visible devices (local rank modulo their count). */
#include <string.h>

#include "test.h"
#include "train/nn_internal.h"

static void check_one_line(const ims_error *err)
{
	CHECK(strchr(err->msg, '\n') == NULL);
	CHECK(strncmp(err->msg, "cannot use --device cuda: ", 26) == 0);
	CHECK(strstr(err->msg, "use --device cpu") != NULL);
	fprintf(stderr, "message: %s\n", err->msg);
}

static void test_device_for_rank(void)
{
	/* every GPU of the machine visible to every rank: one each */
	for (int r = 0; r < 8; r++)
		CHECK_EQ_INT(nn_cuda_device_for_rank(r, 8), r);
	/* one GPU visible per rank (CUDA_VISIBLE_DEVICES set per task): its
	 * own, device 0, whatever its local rank */
	for (int r = 0; r < 8; r++)
		CHECK_EQ_INT(nn_cuda_device_for_rank(r, 1), 0);
	/* more ranks than GPUs: round robin */
	CHECK_EQ_INT(nn_cuda_device_for_rank(5, 4), 1);
	CHECK_EQ_INT(nn_cuda_device_for_rank(2, 2), 0);
	/* nothing visible, or no rank: device 0 (set-up then fails there) */
	CHECK_EQ_INT(nn_cuda_device_for_rank(3, 0), 0);
	CHECK_EQ_INT(nn_cuda_device_for_rank(-1, 4), 0);
}

int main(void)
{
	test_device_for_rank();

	ims_error err = {0};
	nn_ctx ctx;
	int visible = -1;
	int crc = nn_cuda_device_count(&visible, &err);
	int rc = nn_ctx_init_cuda(&ctx, 0, &err);
	CHECK_EQ_INT(crc, rc);
	if (rc == 0) {
		CHECK(visible >= 1);
		CHECK(ctx.be != NULL);
		CHECK_EQ_STR(ctx.be->name, "cuda");
		CHECK(ctx.dev != NULL);
		nn_ctx_release(&ctx);
		CHECK(ctx.dev == NULL);
	} else {
		CHECK_EQ_INT(visible, 0);
		CHECK_EQ_INT(rc, IMS_EUNSUPPORTED);
		CHECK_EQ_INT(err.code, IMS_EUNSUPPORTED);
		check_one_line(&err);
		CHECK(ctx.dev == NULL);
		nn_ctx_release(&ctx); /* accepted after a failure */
	}

	/* no such device: the caller's mistake where there are GPUs */
	const int bad = rc == 0 ? IMS_EINVAL : IMS_EUNSUPPORTED;
	ims_error_clear(&err);
	CHECK_EQ_INT(nn_ctx_init_cuda(&ctx, 4096, &err), bad);
	check_one_line(&err);
	nn_ctx_release(&ctx);
	ims_error_clear(&err);
	CHECK_EQ_INT(nn_ctx_init_cuda(&ctx, -1, &err), bad);
	check_one_line(&err);
	nn_ctx_release(&ctx);

	CHECK_EQ_INT(nn_ctx_init_cuda(NULL, 0, &err) < 0, 1);
	nn_ctx_release(NULL);
	return TEST_EXIT();
}
