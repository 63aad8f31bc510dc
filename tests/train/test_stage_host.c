/*
 * test_stage_host.c - the CPU twin of a device's batch staging
 * (nn_ctx_init_cpu_staged, train/stage_host.c) keeps the device's
 * protocol, and fails each way a loop can break it:
 *   - the copy is made when the slot is first read, from what the host
 *     memory holds then: memory changed after stage_put fails stage_get
 *     (a batch reused before its asynchronous copy ran); memory changed
 *     after stage_get does not reach the slot;
 *   - a slot is not refilled while its copy is queued or a step reads
 *     it, not taken without a copy, not released unread;
 *   - host memory is not given back (nn_stage_reuse) while a copy from
 *     it is queued, anywhere inside the batch;
 *   - host batch memory freed while a copy from it is queued ends the
 *     process (SIGABRT, one line); freed after nn_stage_free, it does not.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "train/nn.h"

enum { N = 1000 };

static nn_ctx ctx;
static ims_error err;

static void fill(float *x, int32_t *l, float v)
{
	for (int i = 0; i < N; i++)
		x[i] = v + (float)i;
	for (int i = 0; i < 4; i++)
		l[i] = (int32_t)v + i;
}

static int expect_fail(int rc, const char *want)
{
	CHECK_EQ_INT(rc, IMS_EINVAL);
	if (rc && !strstr(err.msg, want)) {
		fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, want);
		CHECK(0);
	}
	ims_error_clear(&err);
	return rc;
}

static void test_protocol(void)
{
	nn_stage *s = NULL;
	CHECK(nn_ctx_has_staging(&ctx));
	CHECK_OK(nn_stage_create(&ctx, N * sizeof(float), 4 * sizeof(int32_t), &s,
				 &err),
		 &err);
	float *a = nn_ctx_host_alloc(&ctx, N * sizeof(float));
	float *b = nn_ctx_host_alloc(&ctx, N * sizeof(float));
	int32_t la[4], lb[4];
	CHECK(a && b);
	fill(a, la, 1);
	fill(b, lb, 5000);
	float *x;
	int32_t *l;

	/* the copy happens at get, from the bytes intact since the put */
	CHECK_OK(nn_stage_put(&ctx, s, 0, a, N * sizeof(float), la, sizeof(la),
			      &err),
		 &err);
	/* refilling a queued slot, and giving its memory back, fail */
	expect_fail(nn_stage_put(&ctx, s, 0, b, N * sizeof(float), lb, sizeof(lb),
				 &err),
		    "the copy queued into it before was never waited for");
	expect_fail(nn_stage_reuse(&ctx, s, a, &err),
		    "its copy into slot 0 is still queued");
	CHECK_OK(nn_stage_reuse(&ctx, s, b, &err), &err);
	CHECK_OK(nn_stage_get(&ctx, s, 0, &x, &l, &err), &err);
	CHECK_MEM(x, a, N * sizeof(float));
	CHECK_MEM(l, la, sizeof(la));
	/* after the get the memory is the caller's again */
	CHECK_OK(nn_stage_reuse(&ctx, s, a, &err), &err);
	a[0] = -1;
	CHECK(x[0] == 1.0f);
	/* a slot a step reads is not refilled, a second get finds no copy */
	expect_fail(nn_stage_put(&ctx, s, 0, b, N * sizeof(float), lb, sizeof(lb),
				 &err),
		    "a step still reads it");
	expect_fail(nn_stage_get(&ctx, s, 0, &x, &l, &err), "no copy was queued");
	CHECK_OK(nn_stage_done(&ctx, s, 0, &err), &err);
	expect_fail(nn_stage_done(&ctx, s, 0, &err), "no step reads it");
	expect_fail(nn_stage_get(&ctx, s, 1, &x, &l, &err), "no copy was queued");

	/* memory reused before the copy ran: caught when the slot is read,
	 * in the batch or in its labels */
	CHECK_OK(nn_stage_put(&ctx, s, 1, b, N * sizeof(float), lb, sizeof(lb),
			      &err),
		 &err);
	/* inside the batch too */
	expect_fail(nn_stage_reuse(&ctx, s, b + N / 2, &err),
		    "its copy into slot 1 is still queued");
	b[N - 1] += 1;
	expect_fail(nn_stage_get(&ctx, s, 1, &x, &l, &err),
		    "its host memory changed while its copy was queued");
	CHECK_OK(nn_stage_put(&ctx, s, 0, a, N * sizeof(float), la, sizeof(la),
			      &err),
		 &err);
	la[3] = 77;
	expect_fail(nn_stage_get(&ctx, s, 0, &x, &l, &err),
		    "its host memory changed while its copy was queued");
	/* the failed copies still ran (into slots a step now reads) */
	CHECK_OK(nn_stage_done(&ctx, s, 0, &err), &err);
	CHECK_OK(nn_stage_done(&ctx, s, 1, &err), &err);

	/* bad slots and sizes */
	expect_fail(nn_stage_put(&ctx, s, 2, a, 4, la, 4, &err), "slot 2");
	expect_fail(nn_stage_done(&ctx, s, -1, &err), "slot -1");
	expect_fail(nn_stage_put(&ctx, s, 1, a, (N + 1) * sizeof(float), la, 4,
				 &err),
		    "for slots of");

	/* freeing the stage first, then the memory: fine */
	CHECK_OK(nn_stage_put(&ctx, s, 1, b, N * sizeof(float), lb, sizeof(lb),
			      &err),
		 &err);
	nn_stage_free(&ctx, s);
	nn_ctx_host_free(&ctx, a);
	nn_ctx_host_free(&ctx, b);
	nn_ctx_host_free(&ctx, NULL);
}

/* Host memory freed with a copy from it queued: the child aborts. */
static void test_free_while_queued(void)
{
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		nn_stage *s = NULL;
		float *a = nn_ctx_host_alloc(&ctx, N * sizeof(float));
		int32_t la[4] = {0};
		if (!a || nn_stage_create(&ctx, N * sizeof(float), sizeof(la), &s,
					  &err) ||
		    nn_stage_put(&ctx, s, 0, a, N * sizeof(float), la, sizeof(la),
				 &err))
			_exit(3);
		nn_ctx_host_free(&ctx, a); /* the loader's ring freed first */
		_exit(0);
	}
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu_staged(&ctx, 1, &err), &err);
	test_protocol();
	test_free_while_queued();
	nn_ctx_release(&ctx);
	/* the plain CPU backend stages nothing and needs no checks */
	CHECK_OK(nn_ctx_init_cpu(&ctx, 1, &err), &err);
	CHECK(!nn_ctx_has_staging(&ctx));
	CHECK_OK(nn_stage_reuse(&ctx, NULL, &ctx, &err), &err);
	nn_ctx_release(&ctx);
	return TEST_EXIT();
}
