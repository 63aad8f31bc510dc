/*
 * host_twin.h - the CPU twin of a device (nn_ctx_init_cpu_staged;
 * imshard-train's IMSHARD_TEST_HOST_STAGE): what its context keeps in
 * ctx->dev, shared by stage_host.c (batch staging) and record_host.c
 * (recorded passes). Private to train/.
 */
#ifndef IMSHARD_HOST_TWIN_H
#define IMSHARD_HOST_TWIN_H

#include "train/nn_internal.h"

typedef struct host_twin {
	nn_cpu_state cpu;         /* first: the CPU backend's 16-bit entries
				     find their workspace there */
	struct host_stage *stage; /* stage_host.c, which host_free consults */
	struct host_rec *rec;     /* record_host.c: the recording in
				     progress, NULL when none */
} host_twin;

/* record_host.c: makes table b (the staged twin's, the CPU backend's
 * entries) record: its graph entries, and every entry a pass calls
 * kept while a recording is in progress, every other one failing it. */
void nn_host_record_install(nn_backend *b);
/* Drops a recording left in progress (the context is released). */
void nn_host_record_release(host_twin *t);

#endif
