/*
 * cublas_dl.c - cuBLAS through dlopen (see cublas_dl.h).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "train/cuda/cublas_dl.h"

#ifndef IMSHARD_CUBLAS_SONAME
#define IMSHARD_CUBLAS_SONAME "libcublas.so"
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static nn_cublas_api api;
static const nn_cublas_api *loaded;
static char why[256];

/* Resolves NAME into *slot; 0 when the library lacks it. */
static int bind(void *lib, void **slot, const char *name)
{
	*slot = dlsym(lib, name);
	if (!*slot)
		snprintf(why, sizeof(why), "%s has no %s", IMSHARD_CUBLAS_SONAME,
			 name);
	return *slot != NULL;
}

static void load(void)
{
	void *lib = dlopen(IMSHARD_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(why, sizeof(why), "%s", e ? e : IMSHARD_CUBLAS_SONAME);
		return;
	}
	/* the _v2 names are what cublas_v2.h's macros call */
	if (bind(lib, (void **)&api.create, "cublasCreate_v2") &&
	    bind(lib, (void **)&api.destroy, "cublasDestroy_v2") &&
	    bind(lib, (void **)&api.set_stream, "cublasSetStream_v2") &&
	    bind(lib, (void **)&api.set_math_mode, "cublasSetMathMode") &&
	    bind(lib, (void **)&api.set_pointer_mode,
		 "cublasSetPointerMode_v2") &&
	    bind(lib, (void **)&api.sgemm, "cublasSgemm_v2") &&
	    bind(lib, (void **)&api.gemm_ex, "cublasGemmEx") &&
	    bind(lib, (void **)&api.set_workspace, "cublasSetWorkspace_v2") &&
	    bind(lib, (void **)&api.get_version, "cublasGetVersion_v2") &&
	    bind(lib, (void **)&api.status_name, "cublasGetStatusName") &&
	    bind(lib, (void **)&api.status_string, "cublasGetStatusString"))
		loaded = &api;
	else
		dlclose(lib);
}

int nn_cublas_load(const nn_cublas_api **out, ims_error *err)
{
	pthread_once(&once, load);
	*out = loaded;
	RETURN_IF(!loaded, err, IMS_EIO, "cannot load cuBLAS (%s)", why);
	return 0;
}

const nn_cublas_api *nn_cublas(void)
{
	return loaded;
}
