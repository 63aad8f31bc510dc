/*
 * test_cuda_setup.c - the verdict on a CUDA set-up (train/cuda/
 * cuda_setup.h), from the runtime's answers, on any machine: only a
 * machine without a GPU (cudaErrorNoDevice, zero devices, no NVIDIA
 * driver at all) is IMS_EUNSUPPORTED, the code a gpu test may skip on;
 * a driver older than the build's runtime, a kernel module without its
 * CUDA library, any other runtime error, a device that cannot be
 * selected and cuBLAS missing with a device present are IMS_EIO; a
 * device index out of range is IMS_EINVAL. Each is one line that names
 * the way out.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "train/cuda/cuda_setup.h"

static void one_line(const ims_error *e, const char *want)
{
	CHECK(strchr(e->msg, '\n') == NULL);
	CHECK(strncmp(e->msg, "cannot use --device cuda: ", 26) == 0);
	if (!strstr(e->msg, want)) {
		fprintf(stderr, "message '%s' lacks '%s'\n", e->msg, want);
		CHECK(0);
	}
}

/* The verdict on p, its message holding `want` and "use --device cpu". */
static void judge(const nn_cuda_probe *p, int code, const char *want)
{
	ims_error e;
	ims_error_clear(&e);
	CHECK_EQ_INT(nn_cuda_judge(p, &e), code);
	if (code) {
		CHECK_EQ_INT(e.code, code);
		one_line(&e, want);
		one_line(&e, "use --device cpu");
	}
}

int main(void)
{
	nn_cuda_probe p;

	/* a usable device: every step succeeded */
	nn_cuda_probe_init(&p, 1);
	p.count = 2;
	p.runtime_version = 13000;
	judge(&p, 0, "");

	/* no GPU on this machine: skipped by the gpu tests */
	nn_cuda_probe_init(&p, 0);
	p.count_err = cudaErrorNoDevice;
	p.count = 0;
	judge(&p, IMS_EUNSUPPORTED, "no CUDA device is visible");
	nn_cuda_probe_init(&p, 0);
	p.count = 0;
	judge(&p, IMS_EUNSUPPORTED, "no CUDA device is visible");
	nn_cuda_probe_init(&p, 0);
	p.count_err = cudaErrorInsufficientDriver;
	p.runtime_version = 13000;
	judge(&p, IMS_EUNSUPPORTED, "no NVIDIA driver is installed");

	/* a GPU host whose driver is older than the runtime: an error that
	 * names the release to install */
	nn_cuda_probe_init(&p, 0);
	p.count_err = cudaErrorInsufficientDriver;
	p.driver_version = 12040;
	p.runtime_version = 13000;
	judge(&p, IMS_EIO,
	      "the NVIDIA driver supports CUDA 12.4 but this build's runtime is "
	      "CUDA 13.0: install NVIDIA driver 580.65.06 or later");
	/* ... the same with GPUs listed by the kernel module */
	p.kernel_gpus = 8;
	judge(&p, IMS_EIO, "supports CUDA 12.4");
	/* the kernel module is loaded but libcuda.so.1 is not there */
	nn_cuda_probe_init(&p, 0);
	p.count_err = cudaErrorInsufficientDriver;
	p.kernel_gpus = 2;
	p.runtime_version = 13000;
	judge(&p, IMS_EIO, "the NVIDIA kernel module lists 2 GPUs but the "
			   "driver's CUDA library (libcuda.so.1) cannot be "
			   "loaded");
	/* any other runtime error */
	nn_cuda_probe_init(&p, 0);
	p.count_err = cudaErrorSystemDriverMismatch;
	judge(&p, IMS_EIO, "the CUDA runtime cannot start (cudaErrorSystemDriverMismatch");
	nn_cuda_probe_init(&p, 0);
	p.count_err = cudaErrorInitializationError;
	judge(&p, IMS_EIO, "cudaErrorInitializationError");

	/* a device index that does not exist: the caller's mistake */
	nn_cuda_probe_init(&p, 2);
	p.count = 2;
	judge(&p, IMS_EINVAL, "device 2 does not exist (2 visible)");
	nn_cuda_probe_init(&p, -1);
	p.count = 2;
	judge(&p, IMS_EINVAL, "device -1 does not exist");

	/* the device cannot be selected (busy in exclusive mode, lost) */
	nn_cuda_probe_init(&p, 1);
	p.count = 2;
	p.set_err = cudaErrorDevicesUnavailable;
	judge(&p, IMS_EIO, "device 1 of 2 cannot be selected (cudaErrorDevicesUnavailable");

	/* cuBLAS missing with a device present */
	nn_cuda_probe_init(&p, 0);
	p.count = 1;
	p.blas_loaded = 0;
	p.blas_why = "cannot load cuBLAS (libcublas.so.13: cannot open shared "
		     "object file)";
	judge(&p, IMS_EIO, "1 GPU is present but cannot load cuBLAS "
			   "(libcublas.so.13: cannot open shared object file)");

	/* the line naming what a context runs on: every field, in order */
	nn_cuda_stack st;
	memset(&st, 0, sizeof(st));
	snprintf(st.gpu, sizeof(st.gpu), "NVIDIA H100 80GB HBM3");
	st.sm_major = 9;
	st.driver_version = 13000;
	st.runtime_version = 13000;
	st.cudnn_version = 91900;
	st.cublas_version = 130100;
	snprintf(st.libcuda, sizeof(st.libcuda), "/lib/libcuda.so.580.65.06");
	snprintf(st.cudnn, sizeof(st.cudnn), "/w/libcudnn.so.9.19.0");
	snprintf(st.cublas, sizeof(st.cublas), "/w/libcublas.so.13.1.0.3");
	snprintf(st.nccl, sizeof(st.nccl), "/w/libnccl.so.2.28.9");
	char line[1024];
	const char *want =
		"NVIDIA H100 80GB HBM3 (sm_90); CUDA driver 13.0 "
		"(/lib/libcuda.so.580.65.06), runtime 13.0 (linked in); cuDNN "
		"9.19.0 (/w/libcudnn.so.9.19.0); cuBLAS 13.1.0 "
		"(/w/libcublas.so.13.1.0.3); NCCL (/w/libnccl.so.2.28.9)";
	CHECK_EQ_INT(nn_cuda_describe(&st, line, sizeof(line)), (int)strlen(want));
	CHECK_EQ_STR(line, want);
	/* a shared runtime is named; no NCCL, no cuBLAS version: left out */
	snprintf(st.cudart, sizeof(st.cudart), "/w/libcudart.so.13.0.96");
	st.nccl[0] = '\0';
	st.cublas_version = 0;
	st.cudnn_version = 90100;
	nn_cuda_describe(&st, line, sizeof(line));
	CHECK_EQ_STR(line, "NVIDIA H100 80GB HBM3 (sm_90); CUDA driver 13.0 "
			   "(/lib/libcuda.so.580.65.06), runtime 13.0 "
			   "(/w/libcudart.so.13.0.96); cuDNN 9.1.0 "
			   "(/w/libcudnn.so.9.19.0); cuBLAS (/w/libcublas.so.13.1.0.3)");
	/* cut to fit, terminated, never past cap */
	char small[24];
	memset(small, 'x', sizeof(small));
	int n = nn_cuda_describe(&st, small, 16);
	CHECK_EQ_INT(n, 15);
	CHECK_EQ_STR(small, "NVIDIA H100 80G");
	CHECK(small[16] == 'x');

	/* the file a loaded library came from: this test links the C
	 * library, so it is found, links resolved; a stem nothing loaded
	 * starts with is not */
	char path[4096];
	CHECK_EQ_INT(nn_cuda_loaded_lib("libc.so", path, sizeof(path)), 0);
	CHECK(path[0] == '/');
	CHECK(strstr(path, "/libc") != NULL);
	CHECK(access(path, R_OK) == 0);
	char real[4096];
	CHECK(realpath(path, real) && !strcmp(real, path));
	CHECK_EQ_INT(nn_cuda_loaded_lib("libnot-loaded-here.so", path, sizeof(path)), -1);
	CHECK_EQ_STR(path, "");
	CHECK_EQ_INT(nn_cuda_loaded_lib("", path, sizeof(path)), -1);

	CHECK_EQ_STR(nn_cuda_min_driver(13), "580.65.06");
	CHECK_EQ_STR(nn_cuda_min_driver(12), "525.60.13");
	CHECK(nn_cuda_min_driver(11) == NULL);
	CHECK(nn_cuda_kernel_gpus() >= 0);
	return TEST_EXIT();
}
