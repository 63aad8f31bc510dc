/*
 * cuda_setup.c - the verdict on a CUDA set-up (cuda_setup.h): no GPU
 * here, a bad argument, or a broken GPU host, each with its one line.
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <dirent.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/cuda/cuda_setup.h"

void nn_cuda_probe_init(nn_cuda_probe *p, int device)
{
	memset(p, 0, sizeof(*p));
	p->device = device;
	p->count_err = cudaSuccess;
	p->count = 1;
	p->set_err = cudaSuccess;
	p->blas_loaded = 1;
}

/* NVIDIA's minimum Linux driver for the first release of each major
 * version (CUDA toolkit release notes, "CUDA Toolkit and Corresponding
 * Driver Versions"); minor-version compatibility lets every later
 * release of that major version run on it. */
const char *nn_cuda_min_driver(int runtime_major)
{
	switch (runtime_major) {
	case 12:
		return "525.60.13";
	case 13:
		return "580.65.06";
	default:
		return NULL;
	}
}

int nn_cuda_kernel_gpus(void)
{
	DIR *d = opendir("/proc/driver/nvidia/gpus");
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* "13.0" from 13000. */
static void version(int v, char *buf, size_t len)
{
	snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

/* The driver advice: which release this build's runtime needs. */
static void driver_advice(int runtime_version, char *buf, size_t len)
{
	const char *min = nn_cuda_min_driver(runtime_version / 1000);
	if (min)
		snprintf(buf, len, "install NVIDIA driver %s or later", min);
	else
		snprintf(buf, len,
			 "install the NVIDIA driver this CUDA release needs");
}

static int broken_driver(const nn_cuda_probe *p, ims_error *err)
{
	char rt[16], drv[16], advice[96];
	version(p->runtime_version, rt, sizeof(rt));
	driver_advice(p->runtime_version, advice, sizeof(advice));
	if (p->driver_version > 0) {
		version(p->driver_version, drv, sizeof(drv));
		return ims_fail(err, IMS_EIO,
				"cannot use --device cuda: the NVIDIA driver "
				"supports CUDA %s but this build's runtime is "
				"CUDA %s: %s, or use --device cpu",
				drv, rt, advice);
	}
	return ims_fail(err, IMS_EIO,
			"cannot use --device cuda: the NVIDIA kernel module "
			"lists %d GPU%s but the driver's CUDA library "
			"(libcuda.so.1) cannot be loaded (%s): reinstall the "
			"driver (this build's CUDA %s runtime needs: %s), or "
			"use --device cpu",
			p->kernel_gpus, p->kernel_gpus == 1 ? "" : "s",
			cudaGetErrorName(p->count_err), rt, advice);
}

int nn_cuda_judge(const nn_cuda_probe *p, ims_error *err)
{
	cudaError_t e = p->count_err;
	if (e == cudaErrorNoDevice)
		return ims_fail(err, IMS_EUNSUPPORTED,
				"cannot use --device cuda: no CUDA device is "
				"visible (%s); use --device cpu",
				cudaGetErrorName(e));
	if (e == cudaSuccess && p->count < 1)
		return ims_fail(err, IMS_EUNSUPPORTED,
				"cannot use --device cuda: no CUDA device is "
				"visible; use --device cpu");
	if (e == cudaErrorInsufficientDriver) {
		if (p->driver_version == 0 && p->kernel_gpus == 0)
			return ims_fail(err, IMS_EUNSUPPORTED,
					"cannot use --device cuda: no NVIDIA "
					"driver is installed (%s); use --device "
					"cpu",
					cudaGetErrorName(e));
		return broken_driver(p, err);
	}
	if (e != cudaSuccess)
		return ims_fail(err, IMS_EIO,
				"cannot use --device cuda: the CUDA runtime "
				"cannot start (%s: %s); use --device cpu",
				cudaGetErrorName(e), cudaGetErrorString(e));
	RETURN_IF(p->device < 0 || p->device >= p->count, err, IMS_EINVAL,
		  "cannot use --device cuda: device %d does not exist (%d "
		  "visible); use --device cpu",
		  p->device, p->count);
	RETURN_IF(p->set_err != cudaSuccess, err, IMS_EIO,
		  "cannot use --device cuda: device %d of %d cannot be "
		  "selected (%s: %s); use --device cpu",
		  p->device, p->count, cudaGetErrorName(p->set_err),
		  cudaGetErrorString(p->set_err));
	RETURN_IF(!p->blas_loaded, err, IMS_EIO,
		  "cannot use --device cuda: %d GPU%s present but %s: install "
		  "CUDA's cuBLAS of this build's major version, or use "
		  "--device cpu",
		  p->count, p->count == 1 ? " is" : "s are",
		  p->blas_why ? p->blas_why : "cuBLAS cannot be loaded");
	return 0;
}

typedef struct lib_search {
	const char *stem;
	const char *found; /* the loaded object's name as the loader has it */
} lib_search;

static int match_lib(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	lib_search *q = data;
	const char *name = info->dlpi_name;
	if (!name || !name[0])
		return 0; /* the executable itself */
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (strncmp(base, q->stem, strlen(q->stem)))
		return 0;
	q->found = name;
	return 1;
}

int nn_cuda_loaded_lib(const char *stem, char *path, size_t cap)
{
	if (cap)
		path[0] = '\0';
	lib_search q = {stem, NULL};
	if (!stem || !stem[0] || !dl_iterate_phdr(match_lib, &q) || !q.found)
		return -1;
	/* the link names a version (libcuda.so.1), the file the release
	 * (libcuda.so.580.65.06) */
	char real[PATH_MAX];
	const char *name = realpath(q.found, real) ? real : q.found;
	if (cap)
		snprintf(path, cap, "%s", name);
	return 0;
}

/* " (path)", or `none` when the library was not found loaded. */
static void add_file(ims_buf *b, const char *path, const char *none)
{
	if (path[0] || none)
		ims_buf_printf(b, " (%s)", path[0] ? path : none);
}

int nn_cuda_describe(const nn_cuda_stack *s, char *buf, size_t cap)
{
	if (!cap)
		return 0;
	ims_buf b = {0};
	char drv[32], rt[32];
	version(s->driver_version, drv, sizeof(drv));
	version(s->runtime_version, rt, sizeof(rt));
	ims_buf_printf(&b, "%s (sm_%d%d); CUDA driver %s", s->gpu[0] ? s->gpu : "a GPU",
		       s->sm_major, s->sm_minor, drv);
	add_file(&b, s->libcuda, NULL);
	ims_buf_printf(&b, ", runtime %s", rt);
	add_file(&b, s->cudart, "linked in");
	/* cuDNN 9 and cuBLAS: major * 10000 + minor * 100 + patch */
	ims_buf_printf(&b, "; cuDNN %d.%d.%d", s->cudnn_version / 10000,
		       s->cudnn_version / 100 % 100, s->cudnn_version % 100);
	add_file(&b, s->cudnn, "linked in");
	if (s->cublas_version > 0)
		ims_buf_printf(&b, "; cuBLAS %d.%d.%d", s->cublas_version / 10000,
			       s->cublas_version / 100 % 100, s->cublas_version % 100);
	else
		ims_buf_puts(&b, "; cuBLAS");
	add_file(&b, s->cublas, NULL);
	if (s->nccl[0])
		ims_buf_printf(&b, "; NCCL (%s)", s->nccl);
	size_t len = 0;
	char *text = ims_buf_take(&b, &len);
	snprintf(buf, cap, "%s", text ? text : "");
	free(text);
	if (!text)
		len = 0;
	return (int)(len < cap ? len : cap - 1);
}
