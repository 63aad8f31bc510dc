/* test_ctx_cuda.c - nn_ctx_init_cuda: on a machine without a usable GPU
 * (or in a build without the CUDA backend) it fails with IMS_EUNSUPPORTED
 * and one line that names --device cuda and the way out, and the context
 * is safe to release; with a GPU it sets up a "cuda" context. A device
 * index that does not exist fails the same way everywhere. */
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

int main(void)
{
	ims_error err = {0};
	nn_ctx ctx;
	int rc = nn_ctx_init_cuda(&ctx, 0, &err);
	if (rc == 0) {
		CHECK(ctx.be != NULL);
		CHECK_EQ_STR(ctx.be->name, "cuda");
		CHECK(ctx.dev != NULL);
		nn_ctx_release(&ctx);
		CHECK(ctx.dev == NULL);
	} else {
		CHECK_EQ_INT(rc, IMS_EUNSUPPORTED);
		CHECK_EQ_INT(err.code, IMS_EUNSUPPORTED);
		check_one_line(&err);
		CHECK(ctx.dev == NULL);
		nn_ctx_release(&ctx); /* accepted after a failure */
	}

	/* no such device */
	ims_error_clear(&err);
	CHECK_EQ_INT(nn_ctx_init_cuda(&ctx, 4096, &err), IMS_EUNSUPPORTED);
	check_one_line(&err);
	nn_ctx_release(&ctx);
	ims_error_clear(&err);
	CHECK_EQ_INT(nn_ctx_init_cuda(&ctx, -1, &err), IMS_EUNSUPPORTED);
	check_one_line(&err);
	nn_ctx_release(&ctx);

	CHECK_EQ_INT(nn_ctx_init_cuda(NULL, 0, &err) < 0, 1);
	nn_ctx_release(NULL);
	return TEST_EXIT();
}
