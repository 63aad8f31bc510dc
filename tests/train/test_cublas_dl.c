/* test_cublas_dl.c - cuBLAS loaded at run time (train/cuda/cublas_dl.c):
 * the library of this build's CUDA major version loads without a GPU,
 * every function the backend calls resolves, loading twice gives the same
 * table, and nothing linked with imshard_train maps it before that. */
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "train/cuda/cublas_dl.h"

/* Whether a mapping of this process names `lib`. */
static int mapped(const char *lib)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int found = 0;
	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, lib) != NULL;
	if (f)
		fclose(f);
	return found;
}

int main(void)
{
	ims_error err = {0};
	CHECK(!mapped("libcublas"));
	const nn_cublas_api *api = NULL;
	CHECK(nn_cublas() == NULL);
	CHECK_OK(nn_cublas_load(&api, &err), &err);
	CHECK(api != NULL && api == nn_cublas());
	CHECK(mapped("libcublas"));
	if (api) {
		CHECK(api->create && api->destroy && api->set_stream &&
		      api->set_math_mode && api->set_pointer_mode && api->sgemm &&
		      api->gemm_ex);
		CHECK_EQ_STR(api->status_name(CUBLAS_STATUS_SUCCESS),
			     "CUBLAS_STATUS_SUCCESS");
		CHECK(api->status_string(CUBLAS_STATUS_ALLOC_FAILED) != NULL);
	}
	const nn_cublas_api *again = NULL;
	CHECK_OK(nn_cublas_load(&again, &err), &err);
	CHECK(again == api);
	return TEST_EXIT();
}
