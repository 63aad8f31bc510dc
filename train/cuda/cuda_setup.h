/*
 * cuda_setup.h - what a failed CUDA set-up means. nn_ctx_init_cuda asks
 * the runtime its questions (how many devices, which driver, can the
 * device be selected, does cuBLAS load) and hands the answers to
 * nn_cuda_judge, which decides alone, so the decision is tested on
 * machines without a GPU (tests/train/test_cuda_setup.c).
 *
 * Two failures must not be confused. A machine without a GPU (no NVIDIA
 * driver at all, or no device visible) cannot run --device cuda, and the
 * gpu tests skip there. A GPU machine that cannot run this build (its
 * driver older than the build's CUDA runtime, a device that cannot be
 * selected, cuBLAS missing) is broken: the trainer fails and so do the
 * gpu tests, so that a broken GPU host never looks green.
 */
#ifndef IMSHARD_CUDA_SETUP_H
#define IMSHARD_CUDA_SETUP_H

#include <cuda_runtime_api.h>

#include "common/common.h"

/* The runtime's answers, in the order they are asked; a step not reached
 * keeps nn_cuda_probe_init's value (success). */
typedef struct nn_cuda_probe {
	int device;              /* the device asked for */
	cudaError_t count_err;   /* cudaGetDeviceCount's status */
	int count;               /* its count (when count_err is cudaSuccess) */
	int driver_version;      /* cudaDriverGetVersion: 0 when no driver's
				    CUDA library can be loaded */
	int runtime_version;     /* cudaRuntimeGetVersion: this build's */
	int kernel_gpus;         /* GPUs the NVIDIA kernel module lists
				    (nn_cuda_kernel_gpus); 0 without it */
	cudaError_t set_err;     /* cudaSetDevice(device) */
	int blas_loaded;         /* 1 once cuBLAS loaded (or not reached) */
	const char *blas_why;    /* why it did not load */
} nn_cuda_probe;

/* Every step "not reached": success, device `device`. */
void nn_cuda_probe_init(nn_cuda_probe *p, int device);

/*
 * The verdict on p, with one line in err that names what to do:
 *   0                 the device is usable;
 *   IMS_EUNSUPPORTED  this machine has no GPU: cudaErrorNoDevice, zero
 *                     devices, or cudaErrorInsufficientDriver with no
 *                     driver at all (driver_version 0 and no GPU listed
 *                     by the kernel module);
 *   IMS_EINVAL        device is not one of the count visible;
 *   IMS_EIO           a GPU machine that cannot run this build: a driver
 *                     older than the runtime, a kernel module without
 *                     its CUDA library, any other runtime error, a device
 *                     that cannot be selected, cuBLAS not loaded.
 */
int nn_cuda_judge(const nn_cuda_probe *p, ims_error *err);

/* The GPUs the NVIDIA kernel module lists (/proc/driver/nvidia/gpus), 0
 * when it is not loaded. */
int nn_cuda_kernel_gpus(void);

/* The NVIDIA driver release a CUDA runtime of this major version needs
 * ("580.65.06" for 13), NULL when not known here. */
const char *nn_cuda_min_driver(int runtime_major);

/*
 * What a CUDA context runs on, for the line that names it
 * (nn_ctx_describe): two runs of one binary on one machine that differ in
 * speed differ here first, when a library search path picked another
 * cuDNN or driver library.
 */
typedef struct nn_cuda_stack {
	char gpu[256];           /* cudaDeviceProp.name */
	int sm_major, sm_minor;  /* compute capability */
	int driver_version;      /* the CUDA version the driver supports
				    (cudaDriverGetVersion: 13000 = 13.0) */
	int runtime_version;     /* this build's runtime (13000 = 13.0) */
	int cudnn_version;       /* cudnnGetVersion (91900 = 9.19.0) */
	int cublas_version;      /* cublasGetVersion (130100 = 13.1.0); 0
				    when not known */
	/* the files loaded ("" when none is): nn_cuda_loaded_lib's */
	char libcuda[512], cudart[512], cudnn[512], cublas[512], nccl[512];
} nn_cuda_stack;

/*
 * The file a shared library of this process was loaded from: the first
 * loaded object whose file name starts with stem ("libcudnn.so"), links
 * resolved ("/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06"), into path
 * (cap bytes, cut to fit). 0, or -1 when no such object is loaded (path
 * is then "").
 */
int nn_cuda_loaded_lib(const char *stem, char *path, size_t cap);

/*
 * s as one line into buf (cap bytes, cut to fit), e.g.
 *   NVIDIA H100 80GB HBM3 (sm_90); CUDA driver 13.0 (/lib/libcuda.so.580.65.06),
 *   runtime 13.0 (linked in); cuDNN 9.19.0 (/w/libcudnn.so.9.19.0); cuBLAS
 *   13.1.0 (/w/libcublas.so.13.1.0.3); NCCL (/w/libnccl.so.2.28.9)
 * A library not loaded is left out (NCCL) or said so; returns the length
 * written.
 */
int nn_cuda_describe(const nn_cuda_stack *s, char *buf, size_t cap);

#endif
