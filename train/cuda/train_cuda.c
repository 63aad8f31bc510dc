/*
 * train_cuda.c - what the training loop needs of the CUDA backend beyond
 * the layers: the optimiser updates (optim.cu's kernels), fp16's gradient
 * check (half.cu), input staging
 * (batches copied to the device on a copy stream, double-buffered), a
 * full synchronisation and recording (CUDA graphs of the compute stream).
 *
 * Staging, per slot (0, 1): a device buffer for the batch and one for its
 * labels, an event `copied` recorded on the copy stream after the copies,
 * and an event `free` recorded on the compute stream once the step that
 * read the slot is queued. A copy into a slot waits (on the device) for
 * that slot's `free`, so the step before last is done with it while the
 * previous step may still be computing: the copy overlaps that step. The
 * host then waits for `copied` before it lets the loader reuse the host
 * batch, and the compute stream waits for it before the step's kernels.
 * The slot protocol (train/stage_slots.h) is checked on the host, as the
 * CPU twin checks it (train/stage_host.c).
 */
#include <stdlib.h>

#include "train/cuda/cuda_internal.h"
#include "train/cuda/cuda_kernels.h"
#include "train/stage_slots.h"

int nn_cuda_sgd_update(nn_ctx *ctx, float *p, const float *g, float *buf,
		       const nn_optim_runs *r, float wd, float mom, int first,
		       int nesterov, float neg_lr, ims_error *err)
{
	CUDA_CHECK(err, "run the sgd update on cuda",
		   nn_cuda_k_sgd(nn_cuda_dev_of(ctx)->stream, p, g, buf, r, wd,
				 mom, first, nesterov, neg_lr));
	return 0;
}

int nn_cuda_adam_update(nn_ctx *ctx, float *p, const float *g, float *m,
			float *v, const nn_optim_runs *r,
			const nn_adam_scalars *s, float l2, int decoupled,
			ims_error *err)
{
	CUDA_CHECK(err, "run the adam update on cuda",
		   nn_cuda_k_adam(nn_cuda_dev_of(ctx)->stream, p, g, m, v, r, s,
				  l2, decoupled));
	return 0;
}

/* The flag lives in the workspace: every use of it is queued on the
 * one stream before this, and it is read back before returning. */
int nn_cuda_unscale_check(nn_ctx *ctx, float *g, size_t n, float inv,
			  int *found_inf, ims_error *err)
{
	static const char what[] = "check the gradients on cuda";
	nn_cuda_dev *dev = nn_cuda_dev_of(ctx);
	int *flag = nn_cuda_workspace(ctx, sizeof(int), err);
	if (!flag)
		return ims_fail_context(err, "cannot %s", what);
	int found = 0;
	CUDA_CHECK(err, what,
		   nn_cuda_k_unscale_check(dev->stream, n, g, inv, flag));
	CUDA_CHECK(err, what,
		   cudaMemcpyAsync(&found, flag, sizeof(int),
				   cudaMemcpyDeviceToHost, dev->stream));
	CUDA_CHECK(err, what, cudaStreamSynchronize(dev->stream));
	*found_inf = found != 0;
	return 0;
}

int nn_cuda_loss_prepare(nn_ctx *ctx, int n, int k, ims_error *err)
{
	(void)k;
	RETURN_IF(n < 1, err, IMS_EINVAL, "cannot prepare the loss of %d samples",
		  n);
	nn_cuda_reserve(ctx, nn_cuda_k_xent_workspace(n));
	nn_cuda_reserve(ctx, 256); /* the gradient check's flag */
	return 0;
}

int nn_cuda_sync(nn_ctx *ctx, ims_error *err)
{
	CUDA_CHECK(err, "wait for the cuda device",
		   cudaStreamSynchronize(nn_cuda_dev_of(ctx)->stream));
	return 0;
}

/* ---- recording (CUDA graphs) ---------------------------------------------
 *
 * The compute stream is captured in thread-local mode: the loader's
 * threads may allocate pinned memory and queue copies on the copy stream
 * meanwhile, while this thread's waiting calls fail the capture (the
 * caller then runs the pass as usual). A failed capture leaves an error
 * that the next call would return: cudaGetLastError takes it.
 */

int nn_cuda_graph_begin(nn_ctx *ctx, ims_error *err)
{
	CUDA_CHECK(err, "start recording the compute stream",
		   cudaStreamBeginCapture(nn_cuda_dev_of(ctx)->stream,
					  cudaStreamCaptureModeThreadLocal));
	return 0;
}

int nn_cuda_graph_end(nn_ctx *ctx, int keep, void **out, ims_error *err)
{
	*out = NULL;
	cudaGraph_t g = NULL;
	cudaError_t e = cudaStreamEndCapture(nn_cuda_dev_of(ctx)->stream, &g);
	if (e != cudaSuccess || !keep) {
		if (g)
			cudaGraphDestroy(g);
		(void)cudaGetLastError();
		if (e != cudaSuccess)
			return nn_cuda_fail_rt(err, e, "record the compute stream",
					       __FILE__, __LINE__);
		return 0;
	}
	cudaGraphExec_t x = NULL;
	e = cudaGraphInstantiate(&x, g, 0);
	cudaGraphDestroy(g);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return nn_cuda_fail_rt(err, e, "make a recording replayable",
				       __FILE__, __LINE__);
	}
	*out = x;
	return 0;
}

int nn_cuda_graph_launch(nn_ctx *ctx, void *graph, ims_error *err)
{
	CUDA_CHECK(err, "replay a recording",
		   cudaGraphLaunch((cudaGraphExec_t)graph,
				   nn_cuda_dev_of(ctx)->stream));
	return 0;
}

void nn_cuda_graph_free(nn_ctx *ctx, void *graph)
{
	(void)ctx;
	if (graph)
		cudaGraphExecDestroy((cudaGraphExec_t)graph);
}

int nn_cuda_pci_bus_id(nn_ctx *ctx, char *buf, int len, ims_error *err)
{
	CUDA_CHECK(err, "read the cuda device's pci bus id",
		   cudaDeviceGetPCIBusId(buf, len, nn_cuda_dev_of(ctx)->device));
	return 0;
}

/* ---- input staging ------------------------------------------------------- */

struct nn_stage {
	nn_ctx *ctx;
	cudaStream_t copy;
	size_t x_bytes, label_bytes;
	float *x[2];
	int32_t *labels[2];
	cudaEvent_t copied[2], free[2];
	int used[2]; /* free[slot] has been recorded at least once */
	nn_stage_slots slots; /* the protocol, checked on the host */
};

void nn_cuda_stage_free(nn_stage *s)
{
	if (!s)
		return;
	if (s->copy)
		cudaStreamSynchronize(s->copy);
	for (int i = 0; i < 2; i++) {
		if (s->copied[i])
			cudaEventDestroy(s->copied[i]);
		if (s->free[i])
			cudaEventDestroy(s->free[i]);
		if (s->x[i])
			cudaFree(s->x[i]);
		if (s->labels[i])
			cudaFree(s->labels[i]);
	}
	if (s->copy)
		cudaStreamDestroy(s->copy);
	free(s);
}

static int stage_setup(nn_stage *s, ims_error *err)
{
	static const char what[] = "set up batch staging on cuda";
	CUDA_CHECK(err, what,
		   cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking));
	for (int i = 0; i < 2; i++) {
		CUDA_CHECK(err, what,
			   cudaMalloc((void **)&s->x[i],
				      s->x_bytes ? s->x_bytes : 1));
		CUDA_CHECK(err, what,
			   cudaMalloc((void **)&s->labels[i],
				      s->label_bytes ? s->label_bytes : 1));
		CUDA_CHECK(err, what,
			   cudaEventCreateWithFlags(&s->copied[i],
						    cudaEventDisableTiming));
		CUDA_CHECK(err, what,
			   cudaEventCreateWithFlags(&s->free[i],
						    cudaEventDisableTiming));
	}
	return 0;
}

int nn_cuda_stage_create(nn_ctx *ctx, size_t x_bytes, size_t label_bytes,
			 nn_stage **out, ims_error *err)
{
	*out = NULL;
	nn_stage *s = calloc(1, sizeof(*s));
	RETURN_IF(!s, err, IMS_ENOMEM,
		  "cannot set up batch staging on cuda: out of memory");
	s->ctx = ctx;
	s->x_bytes = x_bytes;
	s->label_bytes = label_bytes;
	int rc = stage_setup(s, err);
	if (rc) {
		nn_cuda_stage_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int nn_cuda_stage_put(nn_stage *s, int slot, const void *x, size_t x_bytes,
		      const int32_t *labels, size_t label_bytes, ims_error *err)
{
	static const char what[] = "copy a batch to the cuda device";
	RETURN_IF(slot < 0 || slot > 1 || x_bytes > s->x_bytes ||
			  label_bytes > s->label_bytes,
		  err, IMS_EINVAL,
		  "cannot %s: slot %d, %zu + %zu bytes for slots of %zu + %zu",
		  what, slot, x_bytes, label_bytes, s->x_bytes, s->label_bytes);
	/* a slot still read by a step would be overwritten once the step
	 * before last is done with it, not this one */
	FORWARD_IF_ERR(nn_slots_put(&s->slots, slot, x, x_bytes, err));
	if (s->used[slot])
		CUDA_CHECK(err, what, cudaStreamWaitEvent(s->copy, s->free[slot], 0));
	if (x_bytes)
		CUDA_CHECK(err, what,
			   cudaMemcpyAsync(s->x[slot], x, x_bytes,
					   cudaMemcpyHostToDevice, s->copy));
	if (label_bytes)
		CUDA_CHECK(err, what,
			   cudaMemcpyAsync(s->labels[slot], labels, label_bytes,
					   cudaMemcpyHostToDevice, s->copy));
	CUDA_CHECK(err, what, cudaEventRecord(s->copied[slot], s->copy));
	return 0;
}

int nn_cuda_stage_get(nn_stage *s, int slot, float **x, int32_t **labels,
		      ims_error *err)
{
	static const char what[] = "wait for a batch copy to the cuda device";
	FORWARD_IF_ERR(nn_slots_get(&s->slots, slot, err));
	CUDA_CHECK(err, what, cudaEventSynchronize(s->copied[slot]));
	CUDA_CHECK(err, what,
		   cudaStreamWaitEvent(nn_cuda_dev_of(s->ctx)->stream,
				       s->copied[slot], 0));
	*x = s->x[slot];
	*labels = s->labels[slot];
	return 0;
}

int nn_cuda_stage_done(nn_stage *s, int slot, ims_error *err)
{
	FORWARD_IF_ERR(nn_slots_done(&s->slots, slot, err));
	CUDA_CHECK(err, "release a batch slot on cuda",
		   cudaEventRecord(s->free[slot], nn_cuda_dev_of(s->ctx)->stream));
	s->used[slot] = 1;
	return 0;
}

int nn_cuda_stage_reuse(nn_stage *s, const void *host, ims_error *err)
{
	return nn_slots_reuse(&s->slots, host, err);
}

/* Pinned host memory for the loader's batches: cudaHostAllocPortable, so
 * it is page-locked for every CUDA context, not only this one's device. */
void *nn_cuda_host_alloc(nn_ctx *ctx, size_t bytes)
{
	(void)ctx;
	void *p = NULL;
	if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable) != cudaSuccess)
		return NULL;
	return p;
}

void nn_cuda_host_free(nn_ctx *ctx, void *p)
{
	(void)ctx;
	if (p)
		cudaFreeHost(p);
}
