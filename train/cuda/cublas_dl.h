/*
 * cublas_dl.h - cuBLAS, loaded when the CUDA backend starts rather than
 * linked. Linking it pulls in cuBLASLt, whose load alone cost every CPU
 * run of imshard-train ~150 MiB of resident memory and ~0.1-0.2 s of
 * start-up; the backend calls eleven functions of it.
 */
#ifndef IMSHARD_CUBLAS_DL_H
#define IMSHARD_CUBLAS_DL_H

#include <cublas_v2.h>

#include "common/common.h"

typedef struct nn_cublas_api {
	cublasStatus_t (*create)(cublasHandle_t *);
	cublasStatus_t (*destroy)(cublasHandle_t);
	cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
	cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
	cublasStatus_t (*set_pointer_mode)(cublasHandle_t, cublasPointerMode_t);
	cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t,
				cublasOperation_t, int, int, int, const float *,
				const float *, int, const float *, int,
				const float *, float *, int);
	/* mixed precision's linear layers: 16-bit A and B, fp32 C */
	cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t,
				  cublasOperation_t, int, int, int,
				  const void *, const void *, cudaDataType, int,
				  const void *, cudaDataType, int, const void *,
				  void *, cudaDataType, int, cublasComputeType_t,
				  cublasGemmAlgo_t);
	/* the handle's workspace, given rather than allocated by cuBLAS
	 * when it first needs it (in a step, beside NCCL's kernels) */
	cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
	/* CUBLAS_VERSION's form: 130100 = 13.1.0 */
	cublasStatus_t (*get_version)(cublasHandle_t, int *);
	const char *(*status_name)(cublasStatus_t);
	const char *(*status_string)(cublasStatus_t);
} nn_cublas_api;

/*
 * Loads the library once (thread-safe) and sets *api to its functions;
 * fails (IMS_EIO) with "cannot load cuBLAS (dlerror's reason)", which
 * nn_ctx_init_cuda turns into its line for a broken GPU host.
 */
int nn_cublas_load(const nn_cublas_api **api, ims_error *err);
/* The functions once nn_cublas_load has succeeded; NULL before. */
const nn_cublas_api *nn_cublas(void);

#endif
