/*
 * gpu_test.h - how a gpu test (ctest label gpu) decides whether to run.
 *
 * It skips (TEST_SKIP, 77) only where the machine has no GPU:
 * nn_ctx_init_cuda's IMS_EUNSUPPORTED (no NVIDIA driver, no device
 * visible, a build without the backend). Every other failure (a driver
 * too old for the build, a device that cannot be selected, cuBLAS
 * missing with a device present) fails the test, so a broken GPU host
 * never looks green. With IMSHARD_REQUIRE_GPU=1 (scripts/gpu-check.sh
 * sets it) a skip is a failure too: on a machine that should have a GPU,
 * "skipped" means something is wrong.
 */
#ifndef IMSHARD_GPU_TEST_H
#define IMSHARD_GPU_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "train/nn.h"

/* 1 when IMSHARD_REQUIRE_GPU=1. */
static inline int gpu_test_required(void)
{
	const char *s = getenv("IMSHARD_REQUIRE_GPU");
	return s && !strcmp(s, "1");
}

/*
 * The exit status of a gpu test that could not get its device: TEST_SKIP
 * when `no_gpu` (this machine has none) and IMSHARD_REQUIRE_GPU is not
 * 1, else 1. Prints one line saying which and why (`why` may be NULL).
 */
static inline int gpu_test_give_up(int no_gpu, const char *why)
{
	if (no_gpu && !gpu_test_required()) {
		printf("skipped: %s\n", why ? why : "no GPU");
		return TEST_SKIP;
	}
	printf("failed: %s%s\n",
	       no_gpu ? "IMSHARD_REQUIRE_GPU=1 and no GPU to run on: " : "",
	       why ? why : "no GPU");
	return 1;
}

/*
 * Sets up *gpu on `device`: 0 when it is ready; otherwise the exit status
 * gpu_test_give_up gives for nn_ctx_init_cuda's failure (*gpu is then
 * safe to release, and needs no release).
 */
static inline int gpu_test_open(nn_ctx *gpu, int device, ims_error *err)
{
	int rc = nn_ctx_init_cuda(gpu, device, err);
	if (!rc)
		return 0;
	return gpu_test_give_up(rc == IMS_EUNSUPPORTED, err->msg);
}

#endif
