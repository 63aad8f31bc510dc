/*
 * device.c - nn.h's device entry points: memory, copies, staging, the
 * loss and fp16's gradient check, each dispatched to the context's
 * backend table (train/nn_internal.h), so callers outside the network
 * library never see the table. Entries a backend leaves NULL (the CPU's
 * device-only ones) get the CPU's meaning here: nothing to wait for, no
 * staging, no special host memory.
 */
#include <math.h>
#include <string.h>

#include "train/nn_internal.h"

const char *nn_ctx_device(const nn_ctx *ctx)
{
	return ctx->be->name;
}

int nn_ctx_on_host(const nn_ctx *ctx)
{
	return !strcmp(ctx->be->name, "cpu");
}

void *nn_ctx_alloc(nn_ctx *ctx, size_t bytes)
{
	return ctx->be->alloc(ctx, bytes);
}

void nn_ctx_free(nn_ctx *ctx, void *p)
{
	ctx->be->free(ctx, p);
}

int nn_ctx_to_device(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		     ims_error *err)
{
	return ctx->be->to_device(ctx, dst, src, bytes, err);
}

int nn_ctx_to_host(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		   ims_error *err)
{
	return ctx->be->to_host(ctx, dst, src, bytes, err);
}

int nn_ctx_copy(nn_ctx *ctx, void *dst, const void *src, size_t bytes,
		ims_error *err)
{
	return ctx->be->copy(ctx, dst, src, bytes, err);
}

int nn_ctx_sync(nn_ctx *ctx, ims_error *err)
{
	return ctx->be->sync ? ctx->be->sync(ctx, err) : 0;
}

int nn_ctx_can_record(const nn_ctx *ctx)
{
	return ctx->be && ctx->be->graph_begin && ctx->be->graph_end &&
	       ctx->be->graph_launch && ctx->be->graph_free;
}

/* The one line for a backend that runs work as it is queued. */
static int cannot_record(const nn_ctx *ctx, ims_error *err)
{
	return ims_fail(err, IMS_EUNSUPPORTED,
			"cannot record a pass on the %s backend: it runs work "
			"as it is queued",
			ctx->be ? ctx->be->name : "(no)");
}

int nn_ctx_record_begin(nn_ctx *ctx, ims_error *err)
{
	if (!nn_ctx_can_record(ctx))
		return cannot_record(ctx, err);
	return ctx->be->graph_begin(ctx, err);
}

int nn_ctx_record_end(nn_ctx *ctx, int keep, nn_graph **out, ims_error *err)
{
	*out = NULL;
	if (!nn_ctx_can_record(ctx))
		return cannot_record(ctx, err);
	void *g = NULL;
	FORWARD_IF_ERR(ctx->be->graph_end(ctx, keep, &g, err));
	*out = g;
	return 0;
}

int nn_ctx_replay(nn_ctx *ctx, nn_graph *g, ims_error *err)
{
	RETURN_IF(!nn_ctx_can_record(ctx) || !g, err, IMS_EINVAL,
		  "cannot replay a recording: %s",
		  g ? "the backend cannot record" : "there is none");
	return ctx->be->graph_launch(ctx, g, err);
}

void nn_graph_free(nn_ctx *ctx, nn_graph *g)
{
	if (g && nn_ctx_can_record(ctx))
		ctx->be->graph_free(ctx, g);
}

int nn_ctx_sync_now(nn_ctx *ctx, double *t, ims_error *err)
{
	*t = 0;
	FORWARD_IF_ERR(nn_ctx_sync(ctx, err));
	*t = ims_now();
	return 0;
}

int nn_ctx_pci_bus_id(nn_ctx *ctx, char *buf, int len, ims_error *err)
{
	if (ctx->be->pci_bus_id)
		return ctx->be->pci_bus_id(ctx, buf, len, err);
	if (len > 0)
		buf[0] = '\0';
	return 0;
}

int nn_ctx_describe(const nn_ctx *ctx, char *buf, size_t cap)
{
	if (ctx && ctx->be && ctx->be->describe)
		return ctx->be->describe(ctx, buf, cap);
	if (cap)
		buf[0] = '\0';
	return 0;
}

int nn_cuda_device_for_rank(int local_rank, int visible)
{
	if (visible < 1 || local_rank < 0)
		return 0;
	return local_rank % visible;
}

int nn_softmax_xent(nn_ctx *ctx, int n, int k, const float *logits,
		    const int32_t *labels, float smoothing, float scale,
		    double *loss_sum, float *dlogits, ims_error *err)
{
	return ctx->be->softmax_xent(ctx, n, k, logits, labels, smoothing, scale,
				     loss_sum, dlogits, err);
}

int nn_xent_tally(nn_ctx *ctx, int n, int k, const float *logits,
		  const int32_t *labels, float smoothing, float scale,
		  float *dlogits, int64_t step, nn_tally *tally, ims_error *err)
{
	if (ctx->be->xent_tally)
		return ctx->be->xent_tally(ctx, n, k, logits, labels, smoothing,
					   scale, dlogits, step, tally, err);
	return nn_cpu_xent_tally(ctx, n, k, logits, labels, smoothing, scale,
				 dlogits, step, tally, err);
}

/* The CPU's: the device kernel's loop (train/cuda/half.cu), each
 * product rounded once. */
static void host_unscale_check(float *g, size_t n, float inv, int *found_inf)
{
	int found = 0;
	for (size_t i = 0; i < n; i++) {
		found |= !isfinite(g[i]);
		g[i] *= inv;
	}
	*found_inf = found;
}

int nn_unscale_check(nn_ctx *ctx, float *g, size_t n, float inv,
		     int *found_inf, ims_error *err)
{
	if (!ctx->be->unscale_check) {
		RETURN_IF(!nn_ctx_on_host(ctx), err, IMS_EUNSUPPORTED,
			  "cannot check fp16 gradients on the %s", ctx->be->name);
		host_unscale_check(g, n, inv, found_inf);
		return 0;
	}
	return ctx->be->unscale_check(ctx, g, n, inv, found_inf, err);
}

/* ---- staging ------------------------------------------------------------- */

int nn_ctx_has_staging(const nn_ctx *ctx)
{
	return ctx->be->stage_create != NULL;
}

int nn_stage_create(nn_ctx *ctx, size_t x_bytes, size_t label_bytes,
		    nn_stage **out, ims_error *err)
{
	*out = NULL;
	RETURN_IF(!ctx->be->stage_create, err, IMS_EUNSUPPORTED,
		  "cannot stage batches on the %s: its kernels read host memory",
		  ctx->be->name);
	return ctx->be->stage_create(ctx, x_bytes, label_bytes, out, err);
}

int nn_stage_put(nn_ctx *ctx, nn_stage *s, int slot, const void *x,
		 size_t x_bytes, const int32_t *labels, size_t label_bytes,
		 ims_error *err)
{
	return ctx->be->stage_put(s, slot, x, x_bytes, labels, label_bytes, err);
}

int nn_stage_get(nn_ctx *ctx, nn_stage *s, int slot, float **x,
		 int32_t **labels, ims_error *err)
{
	return ctx->be->stage_get(s, slot, x, labels, err);
}

int nn_stage_done(nn_ctx *ctx, nn_stage *s, int slot, ims_error *err)
{
	return ctx->be->stage_done(s, slot, err);
}

int nn_stage_reuse(nn_ctx *ctx, nn_stage *s, const void *host, ims_error *err)
{
	return s ? ctx->be->stage_reuse(s, host, err) : 0;
}

void nn_stage_free(nn_ctx *ctx, nn_stage *s)
{
	if (s && ctx->be->stage_free)
		ctx->be->stage_free(s);
}

void *nn_ctx_host_alloc(nn_ctx *ctx, size_t bytes)
{
	return ctx->be->host_alloc ? ctx->be->host_alloc(ctx, bytes) : NULL;
}

void nn_ctx_host_free(nn_ctx *ctx, void *p)
{
	if (p && ctx->be->host_free)
		ctx->be->host_free(ctx, p);
}

const char *nn_ctx_host_memory(const nn_ctx *ctx)
{
	return ctx->be->host_alloc ? ctx->be->host_memory : NULL;
}
