/*
 * test_record_host.c - the staged twin's recorded passes
 * (train/record_host.c): nothing runs while recording; a replay runs the
 * kept calls with the pointers and ctx->dx_overwrite they were given, so
 * it reads what the memory holds when it runs and gives the queued
 * calls' bits; replays repeat; a call that waits for the device (a copy
 * to the host, an allocation) fails the recording; a plain CPU context
 * cannot record; a recording left in progress is freed with the context.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_test_util.h"
#include "test.h"
#include "train/nn_internal.h"

enum { N = 1000 };

static ims_error err;

/* y = relu(a + b); dx = y (overwritten); dx2 += relu'(y) dy: three calls
 * with dx_overwrite as a pass sets it */
static void calls(nn_ctx *ctx, const float *a, const float *b, float *y,
		  float *dx, float *dx2)
{
	CHECK_OK(ctx->be->add_relu_forward(ctx, N, a, b, y, &err), &err);
	ctx->dx_overwrite = 1;
	CHECK_OK(ctx->be->accumulate(ctx, N, y, dx, &err), &err);
	ctx->dx_overwrite = 0;
	CHECK_OK(ctx->be->relu_backward(ctx, N, y, b, dx2, &err), &err);
}

static void test_replay(void)
{
	nn_ctx plain, ctx;
	CHECK_OK(nn_ctx_init_cpu(&plain, 1, &err), &err);
	CHECK_OK(nn_ctx_init_cpu_staged(&ctx, 1, &err), &err);
	CHECK_EQ_INT(nn_ctx_can_record(&plain), 0);
	CHECK_EQ_INT(nn_ctx_can_record(&ctx), 1);
	float *a = nn_test_alloc(N), *b = nn_test_alloc(N);
	float *y = nn_test_alloc(N), *dx = nn_test_alloc(N);
	float *dx2 = nn_test_alloc(N);
	float *wy = nn_test_alloc(N), *wdx = nn_test_alloc(N);
	float *wdx2 = nn_test_alloc(N);
	nn_test_fill(a, N, 1, -1, 1);
	nn_test_fill(b, N, 2, -1, 1);
	nn_test_fill(dx, N, 3, -1, 1);
	nn_test_fill(dx2, N, 4, -1, 1);
	memcpy(wdx, dx, N * sizeof(float));
	memcpy(wdx2, dx2, N * sizeof(float));
	/* the queued calls on a plain context: what a replay must give */
	calls(&plain, a, b, wy, wdx, wdx2);

	nn_graph *g = NULL;
	CHECK_OK(nn_ctx_record_begin(&ctx, &err), &err);
	calls(&ctx, a, b, y, dx, dx2);
	CHECK_OK(nn_ctx_record_end(&ctx, 1, &g, &err), &err);
	CHECK(g != NULL);
	/* recording ran nothing */
	for (int i = 0; i < N; i++)
		CHECK(y[i] == 0.0f);
	CHECK(memcmp(wdx, dx, N * sizeof(float)) != 0);
	CHECK_OK(nn_ctx_replay(&ctx, g, &err), &err);
	CHECK(memcmp(wy, y, N * sizeof(float)) == 0);
	CHECK(memcmp(wdx, dx, N * sizeof(float)) == 0);
	CHECK(memcmp(wdx2, dx2, N * sizeof(float)) == 0);
	CHECK_EQ_INT(ctx.dx_overwrite, 0);

	/* a replay reads the memory as it is then: new inputs at the same
	 * addresses give the queued calls' results on them */
	nn_test_fill(a, N, 5, -1, 1);
	calls(&plain, a, b, wy, wdx, wdx2);
	ctx.dx_overwrite = 1; /* the caller's is kept */
	CHECK_OK(nn_ctx_replay(&ctx, g, &err), &err);
	CHECK_EQ_INT(ctx.dx_overwrite, 1);
	ctx.dx_overwrite = 0;
	CHECK(memcmp(wy, y, N * sizeof(float)) == 0);
	CHECK(memcmp(wdx, dx, N * sizeof(float)) == 0);
	CHECK(memcmp(wdx2, dx2, N * sizeof(float)) == 0);
	nn_graph_free(&ctx, g);

	/* keep 0: nothing to replay, nothing run */
	memcpy(wy, y, N * sizeof(float));
	CHECK_OK(nn_ctx_record_begin(&ctx, &err), &err);
	CHECK_OK(ctx.be->add_forward(&ctx, N, a, a, y, &err), &err);
	CHECK_OK(nn_ctx_record_end(&ctx, 0, &g, &err), &err);
	CHECK(g == NULL);
	CHECK(memcmp(wy, y, N * sizeof(float)) == 0);

	free(a), free(b), free(y), free(dx), free(dx2);
	free(wy), free(wdx), free(wdx2);
	nn_ctx_release(&ctx);
	nn_ctx_release(&plain);
}

static void test_refusals(void)
{
	nn_ctx ctx;
	CHECK_OK(nn_ctx_init_cpu_staged(&ctx, 1, &err), &err);
	float *a = nn_test_alloc(N), *b = nn_test_alloc(N);
	nn_graph *g = NULL;

	/* a copy to the host waits for the device: the recording fails */
	CHECK_OK(nn_ctx_record_begin(&ctx, &err), &err);
	CHECK_OK(ctx.be->relu_forward(&ctx, N, a, b, &err), &err);
	CHECK_EQ_INT(ctx.be->to_host(&ctx, b, a, N * sizeof(float), &err), IMS_EIO);
	CHECK_EQ_INT(nn_ctx_record_end(&ctx, 1, &g, &err), IMS_EIO);
	CHECK(strstr(err.msg, "copy to the host while recording") != NULL);
	CHECK(g == NULL);

	/* so does an allocation, which says so by NULL */
	CHECK_OK(nn_ctx_record_begin(&ctx, &err), &err);
	CHECK(ctx.be->alloc(&ctx, 64) == NULL);
	CHECK_EQ_INT(nn_ctx_record_end(&ctx, 1, &g, &err), IMS_EIO);
	CHECK(strstr(err.msg, "allocate memory while recording") != NULL);

	/* and reading the loss */
	CHECK_OK(nn_ctx_record_begin(&ctx, &err), &err);
	int32_t labels[2] = {0, 1};
	double loss = 0;
	CHECK_EQ_INT(ctx.be->softmax_xent(&ctx, 2, 2, a, labels, 0, 1, &loss, b,
				       &err),
		  IMS_EIO);
	CHECK_EQ_INT(nn_ctx_record_end(&ctx, 1, &g, &err), IMS_EIO);

	/* one recording at a time; none to end */
	CHECK_OK(nn_ctx_record_begin(&ctx, &err), &err);
	CHECK_EQ_INT(nn_ctx_record_begin(&ctx, &err), IMS_EINVAL);
	CHECK_OK(nn_ctx_record_end(&ctx, 0, &g, &err), &err);
	CHECK_EQ_INT(nn_ctx_record_end(&ctx, 1, &g, &err), IMS_EINVAL);

	/* outside a recording every entry runs at once */
	memset(b, 0, N * sizeof(float));
	a[0] = 3;
	CHECK_OK(ctx.be->to_host(&ctx, b, a, N * sizeof(float), &err), &err);
	CHECK(b[0] == 3.0f);
	void *p = ctx.be->alloc(&ctx, 64);
	CHECK(p != NULL);
	ctx.be->free(&ctx, p);

	/* a recording left in progress goes with the context (ASan: no
	 * leak) */
	CHECK_OK(nn_ctx_record_begin(&ctx, &err), &err);
	CHECK_OK(ctx.be->relu_forward(&ctx, N, a, b, &err), &err);
	free(a), free(b);
	nn_ctx_release(&ctx);
}

int main(void)
{
	test_replay();
	test_refusals();
	return TEST_EXIT();
}
