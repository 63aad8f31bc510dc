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

#endif
