/*
 * nccl_none.c - dp.h's NCCL part in a build without NCCL (or without the CUDA
 * backend): it exists so callers need no #ifdef, and says so.
 */
#include "train/dp.h"

int dp_nccl_available(void)
{
	return 0;
}

int dp_nccl_create(dp_comm *c, nn_ctx *ctx, double timeout_s, dp_nccl **out,
		   ims_error *err)
{
	(void)c;
	(void)ctx;
	(void)timeout_s;
	*out = NULL;
	return ims_fail(err, IMS_EUNSUPPORTED,
			"cannot train on cuda with several ranks: this build has "
			"no NCCL (configured without it or the CUDA backend); "
			"run one rank or use --device cpu");
}

void dp_nccl_free(dp_nccl *n)
{
	(void)n;
}

void dp_nccl_on_abort(dp_nccl *n, void (*release)(void *ctx), void *ctx)
{
	(void)n;
	(void)release;
	(void)ctx;
}

void dp_nccl_abort(dp_nccl *n)
{
	(void)n;
}

int dp_nccl_broadcast(dp_nccl *n, float *buf, size_t count, int root,
		      ims_error *err)
{
	(void)n;
	(void)buf;
	(void)count;
	(void)root;
	return ims_fail(err, IMS_EUNSUPPORTED, "cannot broadcast: no NCCL");
}

int dp_nccl_allreduce_avg(dp_nccl *n, float *buf, size_t count,
			  ims_error *err)
{
	(void)n;
	(void)buf;
	(void)count;
	return ims_fail(err, IMS_EUNSUPPORTED, "cannot allreduce: no NCCL");
}

int dp_nccl_allreduce_avg_queue(dp_nccl *n, float *buf, size_t count,
				ims_error *err)
{
	return dp_nccl_allreduce_avg(n, buf, count, err);
}

int dp_nccl_buckets(dp_nccl *n, float *buf, size_t count,
		    size_t bucket_floats, ims_error *err)
{
	(void)n;
	(void)buf;
	(void)count;
	(void)bucket_floats;
	return ims_fail(err, IMS_EUNSUPPORTED, "cannot allreduce: no NCCL");
}

int dp_nccl_ready(dp_nccl *n, size_t ready, ims_error *err)
{
	(void)n;
	(void)ready;
	return ims_fail(err, IMS_EUNSUPPORTED, "cannot allreduce: no NCCL");
}

int dp_nccl_flush(dp_nccl *n, ims_error *err)
{
	(void)n;
	return ims_fail(err, IMS_EUNSUPPORTED, "cannot allreduce: no NCCL");
}

int dp_nccl_wait(dp_nccl *n, ims_error *err)
{
	(void)n;
	return ims_fail(err, IMS_EUNSUPPORTED, "cannot allreduce: no NCCL");
}

int dp_nccl_finish(dp_nccl *n, ims_error *err)
{
	(void)n;
	return ims_fail(err, IMS_EUNSUPPORTED, "cannot allreduce: no NCCL");
}

double dp_nccl_take_seconds(dp_nccl *n)
{
	(void)n;
	return 0;
}
