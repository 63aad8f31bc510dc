/*
 * graphs.c - a training step's passes recorded once and replayed
 * (--cuda-graphs; CUDA graphs through nn_ctx_record_begin, nn.h).
 *
 * A resnet50 step queues about 670 kernels and 160 cuDNN calls. At batch
 * 64 on an H100 the host took longer to queue them than the device to
 * run them: 16.3 ms of kernels in a 20.8 ms step. A recorded pass is
 * queued by one call.
 *
 * Recorded: the backward pass, and the forward pass of a model without
 * dropout (dropout's seed changes every step). The loss (its kernel is
 * given the step's number) and the update (the step's learning rate) are
 * queued as before, between and after the replays. A recording is kept
 * for the addresses and sizes its kernels were given: the batch's device
 * address (one per staging slot: backward reads it too, where the first
 * convolution's weight gradient reads the batch itself), the loss
 * gradient's, the batch size, the activations' arena and the frozen
 * backbone; a pass whose key has no
 * recording yet is recorded (at most LOOP_GRAPHS), and later replayed
 * with nn_model_forward_host doing the forward pass's host share. The
 * first two steps of each part run as queued: their convolutions choose
 * algorithms (cudnnFind waits for the device, which a recording cannot).
 *
 * Used where nothing in a pass waits for the host: --device cuda, fp32
 * or bf16 (fp16 reads its loss and gradients every step) and no
 * --profile. With several ranks (NCCL), the backward pass is recorded
 * with the gradient buckets' collectives it queues and the join that
 * ends them (dp_nccl_flush), and the host waits after the replay
 * (dp_nccl_wait); every rank takes the same steps, so every rank
 * records and replays in the same order. That is only with
 * --cuda-graphs on until it is measured on several GPUs: auto leaves it
 * off there. A recording that fails (something in the pass waited) is
 * told once, and the run goes on with every pass queued as before; with
 * --cuda-graphs on it is an error instead. The CPU twin of a device
 * (IMSHARD_TEST_HOST_STAGE, train/record_host.c) records too, so all of
 * this runs in CI against the plain CPU loop's bits.
 */
#include <stdlib.h>
#include <string.h>

#include "train/loop/loop_internal.h"

/*
 * The recordings destroyed, and no more made: at the end, and (through
 * dp_nccl_on_abort) before NCCL aborts the communicator, which would
 * wait forever for recordings that hold its collectives. The counters'
 * copy stays: the pass being recorded may still put them back.
 */
static void drop(void *ctx)
{
	run *r = ctx;
	loop_graphs *G = &r->graphs;
	for (int i = 0; i < G->count; i++)
		nn_graph_free(&r->ctx, G->e[i].g);
	G->count = 0;
	if (G->on) {
		G->on = 0;
		G->why = "NCCL was aborted";
	}
}

static const char *pass_name(int pass)
{
	return pass == LOOP_PASS_FORWARD ? "forward" : "backward";
}

/* The reason recording is not used, or NULL when it is (on: --cuda-graphs
 * on, else auto). */
static const char *graphs_refused(const run *r, int on)
{
	const nn_train_opts *o = r->o;
	if (!nn_ctx_can_record(&r->ctx))
		return "the device runs work as it is queued (--device cpu)";
	if (r->dp.world > 1 && !r->dp.nccl)
		return "several ranks without NCCL (MPI's allreduce waits for the host)";
	if (r->dp.world > 1 && !on)
		return "several ranks (recording NCCL's allreduce with backward "
		       "is not yet measured on several GPUs: --cuda-graphs on "
		       "records it)";
	if (r->fp16.scaler.enabled || !r->st.defer_loss)
		return "fp16 reads its loss and gradients every step";
	if (o->out.profile > 0)
		return "--profile times each layer";
	return NULL;
}

int loop_setup_graphs(run *r, ims_error *err)
{
	loop_graphs *G = &r->graphs;
	const char *mode = r->o->net.cuda_graphs;
	const int want = !mode || !strcmp(mode, "auto") ? -1 : !strcmp(mode, "on");
	memset(G, 0, sizeof(*G));
	G->why = want == 0 ? "--cuda-graphs off" : graphs_refused(r, want == 1);
	RETURN_IF(want == 1 && G->why, err, IMS_EINVAL,
		  "cannot use --cuda-graphs on: %s", G->why);
	if (G->why)
		return 0;
	G->on = 1;
	G->forward = !nn_model_has_dropout(r->m);
	size_t nc;
	(void)nn_model_counters(r->m, &nc);
	G->counters = malloc((nc ? nc : 1) * sizeof(int64_t));
	RETURN_IF(!G->counters, err, IMS_ENOMEM,
		  "cannot train: out of memory");
	if (r->dp.nccl)
		dp_nccl_on_abort(r->dp.nccl, drop, r);
	return 0;
}

void loop_graphs_release(run *r)
{
	drop(r);
	free(r->graphs.counters);
	memset(&r->graphs, 0, sizeof(r->graphs));
}

static loop_graph *find(loop_graphs *G, const loop_graph *key)
{
	for (int i = 0; i < G->count; i++) {
		const loop_graph *e = &G->e[i];
		if (e->pass == key->pass && e->addr == key->addr &&
		    e->batch == key->batch && e->n == key->n &&
		    e->arena == key->arena && e->flag == key->flag)
			return &G->e[i];
	}
	return NULL;
}

/* The pass itself, queued (or recorded while recording). */
static int run_pass(run *r, const loop_graph *k, uint64_t seed,
		    const float **logits, ims_error *err)
{
	if (k->pass == LOOP_PASS_FORWARD)
		return nn_model_forward(r->m, k->addr, k->n, 1, seed, logits, err);
	return nn_model_backward(r->m, k->addr, k->flag, err);
}

/*
 * The pass as recorded. With NCCL a backward pass ends with the
 * gradients' last buckets queued and the compute stream waiting for them
 * (dp_nccl_flush), so its recording holds the step's whole allreduce and
 * step_allreduce only waits for it. A queued pass leaves that to
 * step_allreduce, after --profile's clock.
 */
static int record_pass(run *r, const loop_graph *k, uint64_t seed,
		       const float **logits, ims_error *err)
{
	FORWARD_IF_ERR(run_pass(r, k, seed, logits, err));
	if (k->pass == LOOP_PASS_BACKWARD && r->dp.nccl)
		return dp_nccl_flush(r->dp.nccl, err);
	return 0;
}

/* this step's collectives are in the backward pass's recording */
static void mark_flushed(run *r, const loop_graph *k)
{
	if (k->pass == LOOP_PASS_BACKWARD && r->dp.nccl)
		r->graphs.flushed = 1;
}

/*
 * Records the pass of key k and queues the recording; when recording
 * fails, the host state the attempt changed (the batch-norm counters) is
 * put back, the run is told, recording stops and the pass is queued as
 * usual.
 */
static int record(run *r, const loop_graph *k, uint64_t seed,
		  const float **logits, ims_error *err)
{
	loop_graphs *G = &r->graphs;
	size_t nc;
	int64_t *c = nn_model_counters(r->m, &nc);
	memcpy(G->counters, c, nc * sizeof(int64_t));
	ims_error why;
	memset(&why, 0, sizeof(why));
	nn_graph *g = NULL;
	int rc = nn_ctx_record_begin(&r->ctx, &why);
	if (!rc) {
		rc = record_pass(r, k, seed, logits, &why);
		ims_error end_err;
		int rc_end = nn_ctx_record_end(&r->ctx, !rc, &g,
					       rc ? &end_err : &why);
		if (!rc)
			rc = rc_end;
	}
	if (!rc) {
		loop_graph *e = &G->e[G->count++];
		*e = *k;
		e->g = g;
		G->recorded++;
		mark_flushed(r, k);
		/* recording ran nothing: the pass runs now */
		return nn_ctx_replay(&r->ctx, g, err);
	}
	memcpy(c, G->counters, nc * sizeof(int64_t));
	G->on = 0;
	G->why = "a recording failed";
	/* with several ranks the failed recording may hold some of the
	 * step's collectives, which no rank runs: the ranks' NCCL order is
	 * no longer known to agree, so the run ends (it is --cuda-graphs on
	 * there) */
	RETURN_IF(r->o->net.cuda_graphs && !strcmp(r->o->net.cuda_graphs, "on"),
		  err, IMS_EIO, "cannot record the %s pass (--cuda-graphs on): %s",
		  pass_name(k->pass), why.msg);
	if (r->log.ev.warning) {
		char msg[sizeof(why.msg) + 160];
		snprintf(msg, sizeof(msg),
			 "could not record the %s pass as a CUDA graph (%s): "
			 "every pass is queued as usual from here",
			 pass_name(k->pass), why.msg);
		r->log.ev.warning(r->log.ev.ctx, msg);
	}
	return run_pass(r, k, seed, logits, err);
}

/* A pass, replayed, recorded or queued (use: this step may replay). */
static int pass(run *r, const loop_graph *k, int use, uint64_t seed,
		const float **logits, ims_error *err)
{
	loop_graphs *G = &r->graphs;
	if (!use || !G->on || (k->pass == LOOP_PASS_FORWARD && !G->forward))
		return run_pass(r, k, seed, logits, err);
	loop_graph *e = find(G, k);
	if (e) {
		if (k->pass == LOOP_PASS_FORWARD)
			FORWARD_IF_ERR(nn_model_forward_host(r->m, k->addr, k->n,
							     1, logits, err));
		FORWARD_IF_ERR(nn_ctx_replay(&r->ctx, e->g, err));
		G->replayed++;
		mark_flushed(r, k);
		return 0;
	}
	if (G->count == LOOP_GRAPHS) /* more slots than foreseen */
		return run_pass(r, k, seed, logits, err);
	return record(r, k, seed, logits, err);
}

int loop_graph_forward(run *r, int use, const float *x, int n, uint64_t seed,
		       const float **logits, ims_error *err)
{
	const loop_graph k = {.pass = LOOP_PASS_FORWARD, .addr = x, .n = n,
			      .arena = nn_model_arena(r->m)};
	return pass(r, &k, use, seed, logits, err);
}

int loop_graph_backward(run *r, int use, const float *x, const float *dlogits,
			int n, int head_only, ims_error *err)
{
	const loop_graph k = {.pass = LOOP_PASS_BACKWARD, .addr = dlogits,
			      .batch = x, .n = n, .arena = nn_model_arena(r->m),
			      .flag = head_only};
	return pass(r, &k, use, 0, NULL, err);
}
