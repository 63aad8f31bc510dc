/*
 * ctx_cuda.c - the CUDA backend: context setup and teardown, device
 * memory, the workspace, error reports, and the backend table.
 *
 * Setting up fails with one line that says what to do when no device can
 * be used (cuda_setup.h tells a machine without a GPU from a broken GPU
 * host). That line is what `imshard-train --device cuda` prints, so it
 * names the way out (--device cpu, or the driver to install).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"
#include "train/cuda/cuda_setup.h"

/* ---- error reports --------------------------------------------------- */

/* The file name from the last '/' on: messages name train/cuda/x.c as x.c */
static const char *base_name(const char *file)
{
	const char *s = strrchr(file, '/');
	return s ? s + 1 : file;
}

int nn_cuda_fail_rt(ims_error *err, cudaError_t e, const char *what,
		    const char *file, int line)
{
	return ims_fail(err,
			e == cudaErrorMemoryAllocation ? IMS_ENOMEM : IMS_EIO,
			"cannot %s: CUDA error %s (%s) at %s:%d", what,
			cudaGetErrorName(e), cudaGetErrorString(e),
			base_name(file), line);
}

int nn_cuda_fail_dnn(ims_error *err, cudnnStatus_t s, const char *what,
		     const char *file, int line)
{
	return ims_fail(err,
			s == CUDNN_STATUS_ALLOC_FAILED ? IMS_ENOMEM : IMS_EIO,
			"cannot %s: cuDNN error %s at %s:%d", what,
			cudnnGetErrorString(s), base_name(file), line);
}

int nn_cuda_fail_blas(ims_error *err, cublasStatus_t s, const char *what,
		      const char *file, int line)
{
	return ims_fail(err,
			s == CUBLAS_STATUS_ALLOC_FAILED ? IMS_ENOMEM : IMS_EIO,
			"cannot %s: cuBLAS error %s (%s) at %s:%d", what,
			nn_cublas() ? nn_cublas()->status_name(s) : "?",
			nn_cublas() ? nn_cublas()->status_string(s) : "?",
			base_name(file), line);
}

/* ---- workspace --------------------------------------------------------- */

/* whole MiB, so a run of slightly larger requests does not grow it
 * every time */
static size_t whole_mib(size_t bytes)
{
	return (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
}

/* Replaces the workspace with one of `want` bytes; cudaFree waits for
 * queued work that may still use the old buffer. */
static void *ws_realloc(nn_cuda_dev *dev, size_t want, ims_error *err)
{
	if (dev->ws) {
		cudaError_t e = cudaFree(dev->ws);
		dev->ws = NULL;
		dev->ws_bytes = 0;
		if (e != cudaSuccess) {
			nn_cuda_fail_rt(err, e, "free the device workspace",
					__FILE__, __LINE__);
			return NULL;
		}
	}
	void *p = NULL;
	cudaError_t e = cudaMalloc(&p, want);
	if (e != cudaSuccess) {
		(void)cudaGetLastError(); /* clear the sticky-free error */
		ims_fail(err, e == cudaErrorMemoryAllocation ? IMS_ENOMEM : IMS_EIO,
			 "cannot allocate a %zu-byte device workspace: %s", want,
			 cudaGetErrorString(e));
		return NULL;
	}
	dev->ws = p;
	dev->ws_bytes = want;
	return p;
}

/* reserve: the request is a need that the frozen size must hold */
static void *workspace(nn_ctx *ctx, size_t bytes, int reserve, ims_error *err)
{
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	if (reserve && bytes > dev->ws_reserved)
		dev->ws_reserved = bytes;
	if (bytes <= dev->ws_bytes && dev->ws)
		return dev->ws;
	if (nn_ctx_workspace_grow(ctx, dev->ws_bytes, bytes,
				  "cuda workspace", err))
		return NULL;
	return ws_realloc(dev, whole_mib(bytes), err);
}

void *nn_cuda_workspace(nn_ctx *ctx, size_t bytes, ims_error *err)
{
	return workspace(ctx, bytes, 1, err);
}

void *nn_cuda_workspace_temp(nn_ctx *ctx, size_t bytes, ims_error *err)
{
	return workspace(ctx, bytes, 0, err);
}

void nn_cuda_reserve(nn_ctx *ctx, size_t bytes)
{
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	if (bytes > dev->ws_reserved)
		dev->ws_reserved = bytes;
}

size_t nn_cuda_ws_limit(nn_ctx *ctx, size_t cap)
{
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	if (ctx->workspace_frozen)
		return dev->ws_bytes;
	return cap;
}

/* Plan time is over: the workspace becomes what was reserved (the
 * benchmark's larger one is given back), once. */
static int cuda_workspace_freeze(nn_ctx *ctx, ims_error *err)
{
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	size_t want = whole_mib(dev->ws_reserved ? dev->ws_reserved : 1);
	if (dev->ws && dev->ws_bytes == want)
		return 0;
	if (!ws_realloc(dev, want, err))
		return ims_fail_context(err, "cannot size the cuda workspace");
	return 0;
}

/* ---- device memory ------------------------------------------------------- */

static void *cuda_alloc(nn_ctx *ctx, size_t bytes)
{
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	void *p = NULL;
	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	/* zeroed, as the table promises; ordered before any later use on the
	 * stream */
	if (cudaMemsetAsync(p, 0, bytes ? bytes : 1, dev->stream) != cudaSuccess) {
		(void)cudaGetLastError();
		cudaFree(p);
		return NULL;
	}
	return p;
}

static void cuda_free(nn_ctx *ctx, void *p)
{
	(void)ctx;
	if (p)
		cudaFree(p); /* waits for the device; nothing to report */
}

static int cuda_zero(nn_ctx *ctx, void *p, size_t bytes, ims_error *err)
{
	if (!bytes)
		return 0;
	CUDA_CHECK(err, "zero device memory",
		   cudaMemsetAsync(p, 0, bytes, nn_cuda_dev_of(ctx)->stream));
	return 0;
}

/* Both copies wait for the stream: the host buffer may be reused, or read,
 * as soon as they return. */
static int cuda_to_device(nn_ctx *ctx, void *dst, const void *src,
			  size_t bytes, ims_error *err)
{
	cudaStream_t s = nn_cuda_dev_of(ctx)->stream;
	if (!bytes)
		return 0;
	CUDA_CHECK(err, "copy to the device",
		   cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
	CUDA_CHECK(err, "copy to the device", cudaStreamSynchronize(s));
	return 0;
}

static int cuda_to_host(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
			ims_error *err)
{
	cudaStream_t s = nn_cuda_dev_of(ctx)->stream;
	if (!bytes)
		return 0;
	CUDA_CHECK(err, "copy from the device",
		   cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
	CUDA_CHECK(err, "copy from the device", cudaStreamSynchronize(s));
	return 0;
}

/* Queued on the compute stream: ordered with the kernels around it. */
static int cuda_copy(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		     ims_error *err)
{
	if (!bytes)
		return 0;
	CUDA_CHECK(err, "copy within the device",
		   cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
				   nn_cuda_dev_of(ctx)->stream));
	return 0;
}

/* ---- setup and teardown -------------------------------------------------- */

static void cuda_release(nn_ctx *ctx)
{
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	if (!dev)
		return;
	if (dev->stream)
		cudaStreamSynchronize(dev->stream);
	if (dev->ws)
		cudaFree(dev->ws);
	if (dev->blas_ws)
		cudaFree(dev->blas_ws);
	nn_cuda_conv_release(dev);
	if (dev->x_desc)
		cudnnDestroyTensorDescriptor(dev->x_desc);
	if (dev->y_desc)
		cudnnDestroyTensorDescriptor(dev->y_desc);
	if (dev->bias_desc)
		cudnnDestroyTensorDescriptor(dev->bias_desc);
	if (dev->bn_desc)
		cudnnDestroyTensorDescriptor(dev->bn_desc);
	if (dev->w_desc)
		cudnnDestroyFilterDescriptor(dev->w_desc);
	if (dev->conv_desc)
		cudnnDestroyConvolutionDescriptor(dev->conv_desc);
	if (dev->cublas)
		nn_cublas()->destroy(dev->cublas);
	if (dev->cudnn)
		cudnnDestroy(dev->cudnn);
	if (dev->stream)
		cudaStreamDestroy(dev->stream);
	free(dev);
	ctx->dev = NULL;
}

/* The device, the versions the runtime and libraries give, and the files
 * they were loaded from (cuda_setup.h). */
static int describe(const nn_ctx *ctx, char *buf, size_t cap)
{
	const nn_cuda_dev *dev = ctx->dev;
	nn_cuda_stack s;
	memset(&s, 0, sizeof(s));
	struct cudaDeviceProp prop;
	if (cudaGetDeviceProperties(&prop, dev->device) == cudaSuccess) {
		snprintf(s.gpu, sizeof(s.gpu), "%s", prop.name);
		s.sm_major = prop.major;
		s.sm_minor = prop.minor;
	}
	cudaDriverGetVersion(&s.driver_version);
	cudaRuntimeGetVersion(&s.runtime_version);
	(void)cudaGetLastError();
	s.cudnn_version = (int)cudnnGetVersion();
	if (nn_cublas()->get_version(dev->cublas, &s.cublas_version) !=
	    CUBLAS_STATUS_SUCCESS)
		s.cublas_version = 0;
	nn_cuda_loaded_lib("libcuda.so", s.libcuda, sizeof(s.libcuda));
	nn_cuda_loaded_lib("libcudart.so", s.cudart, sizeof(s.cudart));
	nn_cuda_loaded_lib("libcudnn.so", s.cudnn, sizeof(s.cudnn));
	nn_cuda_loaded_lib("libcublas.so", s.cublas, sizeof(s.cublas));
	nn_cuda_loaded_lib("libnccl.so", s.nccl, sizeof(s.nccl));
	return nn_cuda_describe(&s, buf, cap);
}

const nn_backend nn_backend_cuda = {
	.name = "cuda",
	.conv_forward = nn_cuda_conv_forward,
	.conv_backward = nn_cuda_conv_backward,
	.linear_forward = nn_cuda_linear_forward,
	.linear_backward = nn_cuda_linear_backward,
	.bn_forward_train = nn_cuda_bn_forward_train,
	.bn_forward_eval = nn_cuda_bn_forward_eval,
	.bn_backward = nn_cuda_bn_backward,
	.bn_backward_frozen = nn_cuda_bn_backward_frozen,
	.bn_prepare = nn_cuda_bn_prepare,
	.relu_forward = nn_cuda_relu_forward,
	.relu_backward = nn_cuda_relu_backward,
	.maxpool_forward = nn_cuda_maxpool_forward,
	.maxpool_backward = nn_cuda_maxpool_backward,
	.avgpool_forward = nn_cuda_avgpool_forward,
	.avgpool_backward = nn_cuda_avgpool_backward,
	.dropout_forward = nn_cuda_dropout_forward,
	.dropout_backward = nn_cuda_dropout_backward,
	.add_forward = nn_cuda_add_forward,
	.add_relu_forward = nn_cuda_add_relu_forward,
	.accumulate = nn_cuda_accumulate,
	.softmax_xent = nn_cuda_softmax_xent,
	.xent_tally = nn_cuda_xent_tally,
	.act_from_f32 = nn_cuda_act_from_f32,
	.act_to_f32 = nn_cuda_act_to_f32,
	.act_from_f32_nhwc = nn_cuda_act_from_f32_nhwc,
	.alloc = cuda_alloc,
	.free = cuda_free,
	.zero = cuda_zero,
	.to_device = cuda_to_device,
	.to_host = cuda_to_host,
	.copy = cuda_copy,
	.release = cuda_release,
	.conv_prepare = nn_cuda_conv_prepare,
	.loss_prepare = nn_cuda_loss_prepare,
	.workspace_freeze = cuda_workspace_freeze,
	.sgd_update = nn_cuda_sgd_update,
	.adam_update = nn_cuda_adam_update,
	.stage_create = nn_cuda_stage_create,
	.stage_put = nn_cuda_stage_put,
	.stage_get = nn_cuda_stage_get,
	.stage_done = nn_cuda_stage_done,
	.stage_reuse = nn_cuda_stage_reuse,
	.stage_free = nn_cuda_stage_free,
	.host_alloc = nn_cuda_host_alloc,
	.host_free = nn_cuda_host_free,
	.host_memory = "pinned memory (cudaHostAlloc)",
	.unscale_check = nn_cuda_unscale_check,
	.sync = nn_cuda_sync,
	.graph_begin = nn_cuda_graph_begin,
	.graph_end = nn_cuda_graph_end,
	.graph_launch = nn_cuda_graph_launch,
	.graph_free = nn_cuda_graph_free,
	.pci_bus_id = nn_cuda_pci_bus_id,
	.describe = describe,
};

/* Binds the libraries to the stream and makes the reusable descriptors. */
static int setup_handles(nn_cuda_dev *dev, ims_error *err)
{
	static const char what[] = "set up the cuda backend";
	CUDNN_CHECK(err, what, cudnnSetStream(dev->cudnn, dev->stream));
	CUBLAS_CHECK(err, what, nn_cublas()->set_stream(dev->cublas, dev->stream));
	/* the math mode follows ctx->tf32 at each GEMM (linear_cuda.c) */
	CUBLAS_CHECK(err, what,
		     nn_cublas()->set_math_mode(dev->cublas,
						CUBLAS_DEFAULT_MATH));
	/* cuBLAS's workspace, ours, allocated here: left to itself it
	 * allocates on first use, inside a training step */
	CUDA_CHECK(err, what, cudaMalloc(&dev->blas_ws, NN_CUDA_BLAS_WS));
	CUBLAS_CHECK(err, what,
		     nn_cublas()->set_workspace(dev->cublas, dev->blas_ws,
						NN_CUDA_BLAS_WS));
	CUBLAS_CHECK(err, what,
		     nn_cublas()->set_pointer_mode(
			     dev->cublas, CUBLAS_POINTER_MODE_HOST));
	CUDNN_CHECK(err, what, cudnnCreateTensorDescriptor(&dev->x_desc));
	CUDNN_CHECK(err, what, cudnnCreateTensorDescriptor(&dev->y_desc));
	CUDNN_CHECK(err, what, cudnnCreateTensorDescriptor(&dev->bias_desc));
	CUDNN_CHECK(err, what, cudnnCreateTensorDescriptor(&dev->bn_desc));
	CUDNN_CHECK(err, what, cudnnCreateFilterDescriptor(&dev->w_desc));
	CUDNN_CHECK(err, what,
		    cudnnCreateConvolutionDescriptor(&dev->conv_desc));
	return 0;
}

/*
 * The runtime's answers before anything is made on the device: the
 * device count (no context is created by it), the driver when that
 * fails, then the device selected. nn_cuda_judge says what a failure
 * means (cuda_setup.h): no GPU here, a bad index, or a broken GPU host.
 */
static int count_devices(nn_cuda_probe *p, ims_error *err)
{
	p->count_err = cudaGetDeviceCount(&p->count);
	cudaRuntimeGetVersion(&p->runtime_version);
	if (p->count_err != cudaSuccess) {
		cudaDriverGetVersion(&p->driver_version);
		p->kernel_gpus = nn_cuda_kernel_gpus();
	}
	(void)cudaGetLastError();
	return nn_cuda_judge(p, err);
}

int nn_cuda_device_count(int *count, ims_error *err)
{
	nn_cuda_probe p;
	nn_cuda_probe_init(&p, 0);
	*count = 0;
	FORWARD_IF_ERR(count_devices(&p, err));
	*count = p.count;
	return 0;
}

static int select_device(nn_cuda_probe *p, ims_error *err)
{
	FORWARD_IF_ERR(count_devices(p, err));
	p->set_err = cudaSetDevice(p->device);
	(void)cudaGetLastError();
	return nn_cuda_judge(p, err);
}

int nn_ctx_init_cuda(nn_ctx *ctx, int device, ims_error *err)
{
	static const char what[] = "set up the cuda backend";
	RETURN_IF(!ctx, err, IMS_EINVAL, "cannot %s: no context", what);
	memset(ctx, 0, sizeof(*ctx));
	ctx->be = NULL; /* no kernels until the device is ready */
	ctx->threads = 1;
	nn_cuda_probe probe;
	nn_cuda_probe_init(&probe, device);
	FORWARD_IF_ERR(select_device(&probe, err));

	nn_cuda_dev *dev = calloc(1, sizeof(*dev));
	RETURN_IF(!dev, err, IMS_ENOMEM, "cannot %s: out of memory", what);
	dev->device = device;
	ctx->dev = dev;
	ctx->be = &nn_backend_cuda;
	ctx->conv_algo = NN_ALGO_BENCHMARK;
	int major = 0;
	if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
				   device) != cudaSuccess) {
		(void)cudaGetLastError();
		major = 0;
	}
	dev->sm_major = major;
	/* PyTorch's cuDNN default: TF32 where tensor cores take it */
	ctx->tf32 = major >= 8;
	int rc = 0;
	cudaError_t ce = cudaStreamCreateWithFlags(&dev->stream,
						   cudaStreamNonBlocking);
	if (ce != cudaSuccess) {
		dev->stream = NULL;
		rc = nn_cuda_fail_rt(err, ce, what, __FILE__, __LINE__);
		goto fail;
	}
	cudnnStatus_t ds = cudnnCreate(&dev->cudnn);
	if (ds != CUDNN_STATUS_SUCCESS) {
		dev->cudnn = NULL;
		rc = nn_cuda_fail_dnn(err, ds, what, __FILE__, __LINE__);
		goto fail;
	}
	/* a device is present: cuBLAS missing is a broken install, not a
	 * machine without a GPU */
	const nn_cublas_api *blas;
	ims_error blas_err;
	ims_error_clear(&blas_err);
	probe.blas_loaded = nn_cublas_load(&blas, &blas_err) == 0;
	probe.blas_why = blas_err.msg;
	GOTO_IF_ERR(fail, rc, nn_cuda_judge(&probe, err));
	cublasStatus_t bs = blas->create(&dev->cublas);
	if (bs != CUBLAS_STATUS_SUCCESS) {
		dev->cublas = NULL;
		rc = nn_cuda_fail_blas(err, bs, what, __FILE__, __LINE__);
		goto fail;
	}
	GOTO_IF_ERR(fail, rc, setup_handles(dev, err));
	return 0;
fail:
	nn_ctx_release(ctx);
	ctx->be = NULL;
	return rc;
}
