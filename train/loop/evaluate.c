/*
 * evaluate.c - the evaluation pass the trainer's validation and
 * `imshard eval` share (train/eval.h): a split read once through a
 * validation loader, every sample scored on the host, the sums (and, when
 * asked, one row per sample) combined over the ranks; and nn_eval_run,
 * which sets up a model from weights and a card to run that pass alone.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recordio/recordio.h"
#include "train/eval.h"
#include "train/loop/loop_internal.h"

/* Per-sample row of loop_eval.rows: index, label, top-1 class, in top-k,
 * top-1 probability. */
enum { ROW_INDEX, ROW_LABEL, ROW_PRED, ROW_TOPK, ROW_CONF, ROW_N };

/* The top-1 class (the first of equal maxima, as nn_topk_correct breaks
 * ties) and its softmax probability. */
static int top1_of(const float *z, int k, float *prob)
{
	int best = 0;
	for (int c = 1; c < k; c++)
		if (z[c] > z[best])
			best = c;
	double s = 0;
	for (int c = 0; c < k; c++)
		s += exp((double)z[c] - (double)z[best]);
	*prob = (float)(1.0 / s);
	return best;
}

/* Adds one batch's loss sum, top-1 and top-k hits and record count to
 * e->sums, and its rows when asked (padded samples left out, and those
 * standing in for a record that could not be loaded: each has its own
 * place in the split, so it would count twice). */
static int score_batch(run *r, const aug_batch *b, loop_eval *e,
		       ims_error *err)
{
	const float *logits;
	const float *x = b->data;
	const int32_t *labels = b->labels;
	const int classes = r->data.classes;
	const int topk = classes < 5 ? classes : 5;
	int slot = -1;
	e->sums[4] += b->bad_listed;
	if (b->bad_listed && !e->bad_reason[0] && b->bad_reason)
		snprintf(e->bad_reason, sizeof(e->bad_reason), "%s", b->bad_reason);
	for (int i = 0; i < b->bad_listed; i++)
		loop_bad_keep(e->bad_mine, &e->n_bad_mine, b->bad_indices[i]);
	FORWARD_IF_ERR(loop_stage_inputs(r, b, &x, &labels, &slot, NULL, err));
	FORWARD_IF_ERR(nn_model_forward(r->m, x, b->count, 0, 0, &logits, err));
	/* scored on the host: on a device, from logits read back */
	nn_ctx *lctx = &r->ctx;
	if (r->st.stage) {
		FORWARD_IF_ERR(loop_read_logits(r, &logits, b->count, err));
		FORWARD_IF_ERR(nn_stage_done(&r->ctx, r->st.stage, slot, err));
		lctx = &r->st.hctx;
	}
	for (int i = 0; i < b->count; i++) {
		if (b->padded[i] || b->replaced[i])
			continue;
		const float *z = logits + (size_t)i * classes;
		double l;
		FORWARD_IF_ERR(nn_softmax_xent(lctx, 1, classes, z, b->labels + i,
					       0, 1, &l, NULL, err));
		const int hit1 = nn_topk_correct(1, classes, z, b->labels + i, 1, NULL);
		const int hitk = nn_topk_correct(1, classes, z, b->labels + i, topk,
						 NULL);
		e->sums[0] += l;
		e->sums[1] += hit1;
		e->sums[2] += hitk;
		e->sums[3] += 1;
		if (!e->rows)
			continue;
		RETURN_IF(e->n_rows >= e->cap_rows, err, IMS_EINVAL,
			  "cannot evaluate: the loader gave more samples than "
			  "its share of %zu",
			  e->cap_rows);
		double *row = e->rows + e->n_rows++ * ROW_N;
		float prob;
		row[ROW_INDEX] = (double)b->indices[i];
		row[ROW_LABEL] = b->labels[i];
		row[ROW_PRED] = top1_of(z, classes, &prob);
		row[ROW_TOPK] = hitk;
		row[ROW_CONF] = prob;
	}
	return 0;
}

int loop_eval_pass(run *r, aug_loader *l, loop_eval *e, ims_error *err)
{
	memset(e->sums, 0, sizeof(e->sums));
	e->n_rows = 0;
	e->n_bad_mine = 0;
	e->bad_reason[0] = 0;
	if (e->want_rows && !e->rows) {
		uint64_t per_rank = 0;
		aug_loader_share(l, &per_rank, NULL, NULL);
		e->cap_rows = (size_t)per_rank;
		e->rows = malloc((e->cap_rows ? e->cap_rows : 1) * ROW_N * sizeof(double));
		RETURN_IF(!e->rows, err, IMS_ENOMEM,
			  "cannot evaluate: out of memory for %zu rows", e->cap_rows);
	}
	const uint64_t total = aug_loader_batches_per_epoch(l);
	uint64_t done = 0;
	FORWARD_IF_ERR(loop_loader_start(r, l, 0, 0, err));
	int rc = 0;
	for (;;) {
		aug_batch b;
		rc = loop_loader_next(r, l, &b, err);
		if (rc == 1) {
			rc = 0;
			break;
		}
		if (!rc)
			rc = score_batch(r, &b, e, err);
		if (rc < 0)
			break;
		if (e->progress)
			e->progress(e->ctx, ++done, total);
	}
	if (r->dp.world < 2)
		return rc;
	/* a rank whose pass failed (its loader gave up: every record it
	 * reads damaged) still joins the sums, flagging it: every rank ends
	 * the pass together, none left waiting in the allreduce, and each
	 * that failed names itself with its reason */
	e->sums[5] = rc < 0;
	ims_error summed;
	const int src = dp_allreduce_sum_f64(r->dp.comm, e->sums, 6,
					     rc < 0 ? &summed : err);
	if (src < 0)
		return rc < 0 ? rc : src;
	if (e->sums[5] > 0) {
		r->failed.ranks = (int)e->sums[5];
		r->failed.here = rc < 0;
		r->failed.alike = 0;
	}
	if (rc < 0)
		return rc;
	RETURN_IF(e->sums[5] > 0, err, IMS_EIO,
		  "%d of %d ranks could not evaluate their share of the split "
		  "(named on stderr)",
		  (int)e->sums[5], r->dp.world);
	return 0;
}

void loop_eval_free(loop_eval *e)
{
	free(e->rows);
	e->rows = NULL;
	e->n_rows = e->cap_rows = 0;
}

void nn_eval_result_release(nn_eval_result *r)
{
	if (!r)
		return;
	free(r->index);
	free(r->label);
	free(r->pred);
	free(r->in_topk);
	free(r->confidence);
	free(r->class_records);
	free(r->class_top1);
	free(r->class_topk);
	memset(r, 0, sizeof(*r));
}

static int cmp_row(const void *a, const void *b)
{
	const double x = ((const double *)a)[ROW_INDEX];
	const double y = ((const double *)b)[ROW_INDEX];
	return (x > y) - (x < y);
}

/* res from the pass's sums and every rank's rows (gathered here: a
 * collective), in record order. */
int loop_eval_result(run *r, const loop_eval *e, nn_eval_result *res,
		     ims_error *err)
{
	memset(res, 0, sizeof(*res));
	const int classes = r->data.classes;
	const double *s = e->sums;
	res->classes = classes;
	res->topk = classes < 5 ? classes : 5;
	res->records = (uint64_t)s[3];
	res->top1 = s[3] > 0 ? s[1] / s[3] : 0;
	res->top5 = s[3] > 0 ? s[2] / s[3] : 0;
	res->loss = s[3] > 0 ? s[0] / s[3] : 0;
	res->bad_records = (uint64_t)s[4];
	if (!e->rows)
		return 0;
	/* every rank's share has the same length: rows past a rank's
	 * samples are marked with label -1 */
	const size_t per = e->cap_rows * ROW_N;
	const size_t world = (size_t)r->dp.world;
	double *mine = malloc((per ? per : 1) * sizeof(double));
	double *all = malloc((per > 0 ? per * world : 1) * sizeof(double));
	res->class_records = calloc((size_t)classes, sizeof(uint64_t));
	res->class_top1 = calloc((size_t)classes, sizeof(uint64_t));
	res->class_topk = calloc((size_t)classes, sizeof(uint64_t));
	int rc = 0;
	/* a rank that leaves the gather out, or whose gather failed, is
	 * out of step with its peers: it joins no agreement after */
	if (!mine || !all || !res->class_records || !res->class_top1 ||
	    !res->class_topk) {
		r->failed.out_of_step = r->dp.world > 1;
		GOTO_FAIL(out, rc, err, IMS_ENOMEM,
			  "cannot gather the predictions: out of memory");
	}
	memcpy(mine, e->rows, e->n_rows * ROW_N * sizeof(double));
	for (size_t i = e->n_rows; i < e->cap_rows; i++)
		mine[i * ROW_N + ROW_LABEL] = -1;
	rc = dp_allgather_f64(r->dp.comm, mine, per, all, err);
	if (rc < 0) {
		r->failed.out_of_step = r->dp.world > 1;
		goto out;
	}
	size_t n = 0;
	for (size_t i = 0; i < e->cap_rows * world; i++)
		if (all[i * ROW_N + ROW_LABEL] >= 0)
			memmove(all + n++ * ROW_N, all + i * ROW_N, ROW_N * sizeof(double));
	qsort(all, n, ROW_N * sizeof(double), cmp_row);
	res->n = n;
	res->index = malloc((n ? n : 1) * sizeof(uint64_t));
	res->label = malloc((n ? n : 1) * sizeof(int32_t));
	res->pred = malloc((n ? n : 1) * sizeof(int32_t));
	res->in_topk = malloc(n ? n : 1);
	res->confidence = malloc((n ? n : 1) * sizeof(float));
	if (!res->index || !res->label || !res->pred || !res->in_topk ||
	    !res->confidence)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM,
			  "cannot gather the predictions: out of memory");
	for (size_t i = 0; i < n; i++) {
		const double *row = all + i * ROW_N;
		const int32_t lab = (int32_t)row[ROW_LABEL];
		res->index[i] = (uint64_t)row[ROW_INDEX];
		res->label[i] = lab;
		res->pred[i] = (int32_t)row[ROW_PRED];
		res->in_topk[i] = row[ROW_TOPK] > 0;
		res->confidence[i] = (float)row[ROW_CONF];
		if (lab < classes) {
			res->class_records[lab]++;
			res->class_top1[lab] += res->pred[i] == lab;
			res->class_topk[lab] += res->in_topk[i];
		}
	}
out:
	free(mine);
	free(all);
	if (rc < 0)
		nn_eval_result_release(res);
	return rc;
}

/* ---- nn_eval_run: a model from weights, the pass alone ------------------ */

void nn_eval_opts_init(nn_eval_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->device = "cpu";
	o->precision = "fp32";
	o->batch_size = 32;
}

static int check_eval_opts(const nn_eval_opts *o, ims_error *err)
{
	RETURN_IF(!o->split || !o->weights || !o->card, err, IMS_EINVAL,
		  "cannot evaluate: no split, weights or model card");
	RETURN_IF((o->card->have & NN_CARD_ALL) != NN_CARD_ALL, err, IMS_EINVAL,
		  "cannot evaluate '%s': its model card is incomplete",
		  o->weights);
	RETURN_IF(!o->device || (strcmp(o->device, "cpu") && strcmp(o->device, "cuda")),
		  err, IMS_EINVAL, "cannot evaluate on device '%s': use cpu or cuda",
		  o->device ? o->device : "");
	RETURN_IF(nn_precision_of(o->precision) < 0, err, IMS_EINVAL, "cannot evaluate in precision '%s': use fp32, "
		  "bf16 or fp16", o->precision ? o->precision : "");
	RETURN_IF(o->batch_size < 1, err, IMS_EINVAL,
		  "cannot evaluate in batches of %d", o->batch_size);
	RETURN_IF(o->threads < 0, err, IMS_EINVAL,
		  "cannot evaluate with %d threads", o->threads);
	return 0;
}

/* The split's class names must be the card's, in order: labels are
 * indices into them. */
static int check_classes(const char *split, const nn_model_card *card,
			 uint64_t *digest, ims_error *err)
{
	rio_manifest m = {0};
	FORWARD_IF_ERR(rio_manifest_load(split, &m, err));
	*digest = loop_split_digest(&m);
	int rc = 0;
	char a[128], b[128];
	if (m.n_classes != (size_t)card->classes) {
		rc = ims_fail(err, IMS_EINVAL,
			      "cannot evaluate on '%s': it has %zu %s, the "
			      "model %d (evaluate on a split packed with the "
			      "training split's class list)",
			      split, m.n_classes,
			      ims_plural(m.n_classes, "class", "classes"),
			      card->classes);
	} else {
		for (size_t i = 0; i < m.n_classes && !rc; i++)
			if (!nn_model_card_name_eq(card->class_names[i], m.classes[i]))
				rc = ims_fail(err, IMS_EINVAL,
					      "cannot evaluate on '%s': its class "
					      "%zu is '%s', the model's is '%s'",
					      split, i,
					      ims_escape(m.classes[i], a, sizeof(a)),
					      ims_escape(card->class_names[i], b,
							 sizeof(b)));
	}
	rio_manifest_release(&m);
	return rc;
}

static int eval_context(run *r, const nn_eval_opts *o, ims_error *err)
{
	if (!strcmp(o->device, "cuda")) {
		r->log.device = dp_local_rank(r->dp.comm);
		FORWARD_IF_ERR(nn_ctx_init_cuda(&r->ctx, r->log.device, err));
	} else {
		FORWARD_IF_ERR(nn_ctx_init_cpu(&r->ctx, o->threads, err));
	}
	r->ctx_ok = 1;
	/* as the trainer's set_compute: 16-bit activations, fp32 sums */
	r->ctx.precision = nn_precision_of(o->precision);
	return 0;
}

/* The validation loader over the split, with the card's input. */
static int eval_loader(run *r, const nn_eval_opts *o, ims_error *err)
{
	const nn_model_card *c = o->card;
	aug_loader_opts vo;
	aug_loader_opts_init(&vo, 0);
	vo.manifest = o->split;
	vo.batch_size = o->batch_size;
	vo.threads = o->threads;
	vo.quiet = r->dp.rank != 0 || o->quiet;
	/* every record once, as the trainer's validation */
	return loop_open_eval_loader(r, &vo, c->size, c->val_crop_frac, c->mean,
				     c->std, err);
}

static int eval_model(run *r, const nn_eval_opts *o, ims_error *err)
{
	const nn_model_card *c = o->card;
	/* no weights drawn: every tensor is loaded below, or the load fails */
	FORWARD_IF_ERR(nn_model_create_unset(&r->ctx, c->model, c->classes, c->size,
					     c->size, o->batch_size, &r->m, err));
	/* no backward: an arena of what evaluation needs alone */
	FORWARD_IF_ERR(nn_model_set_use(r->m, NN_USE_EVAL, err));
	if (o->weights_file)
		return nn_model_load_weights_file(o->weights_file, r->m,
						  o->weights_verified, err);
	return nn_model_load_weights(o->weights, r->m, err);
}

/*
 * Ranks started with another split or weights would sum counts of other
 * sizes (MPI_ERR_TRUNCATE) or of other records: every rank compares what
 * it was given (agree.c), after the set-up all ranks reached.
 */
static int agree_inputs(run *r, const nn_eval_opts *o, uint64_t split,
			ims_error *err)
{
	const nn_model_card *c = o->card;
	st_file *f = NULL;
	ims_error ignored;
	uint64_t weights = 0;
	if (o->weights_file) {
		weights = loop_fingerprint_str(st_metadata_get(o->weights_file, "checksum"));
	} else if (st_open(o->weights, &f, &ignored) == 0) {
		weights = loop_fingerprint_str(st_metadata_get(f, "checksum"));
		st_close(f);
	}
	uint64_t card = ims_hash64(loop_fingerprint_str(c->model),
				   ims_hash64((uint64_t)c->size, (uint64_t)c->classes));
	card = ims_hash64(card, ims_crc32c(0, c->mean, sizeof(c->mean)));
	card = ims_hash64(card, ims_crc32c(0, c->std, sizeof(c->std)));
	card = ims_hash64(card, ims_crc32c(0, &c->val_crop_frac,
					   sizeof(c->val_crop_frac)));
	const fingerprint fp[] = {
		{"SPLIT (its records)", split},
		{"weights (their checksum)", weights},
		{"model settings (--model, --size, --mean, --std, --val-crop-frac)", card},
		{"class names", loop_fingerprint_names(c)},
		{"--batch-size", (uint64_t)o->batch_size * 0x9e3779b97f4a7c15u},
		{"--device", loop_fingerprint_str(o->device)},
		{"--precision", loop_fingerprint_str(o->precision)},
	};
	return loop_agree_on(r, fp, (int)(sizeof(fp) / sizeof(fp[0])), "evaluate",
			     err);
}

/*
 * Set-up fails alike on every rank for bad input (a missing split, other
 * classes, damaged weights): the ranks agree on it before the first
 * collective of the pass, so they return together rather than wait on a
 * rank that left. rc is this rank's set-up status; a rank that set up
 * while another did not fails with a line saying so.
 */
static int agree_setup(run *r, int rc, nn_eval_result *res, ims_error *err)
{
	rc = loop_agree_setup(r, rc, "evaluate", err);
	res->setup_failed_here = r->failed.here;
	res->setup_failed_ranks = r->failed.ranks;
	res->setup_failed_alike = r->failed.alike;
	return rc;
}

int nn_eval_run(const nn_eval_opts *o, dp_comm *comm, nn_eval_result *res,
		ims_error *err)
{
	memset(res, 0, sizeof(*res));
	FORWARD_IF_ERR(check_eval_opts(o, err));
	double t0 = ims_now();
	/* the loop's state, as much of it as a pass reads */
	nn_train_opts to;
	nn_train_opts_init(&to);
	to.net.model = o->card->model;
	to.net.device = o->device;
	to.net.precision = o->precision;
	to.optim.batch_size = o->batch_size;
	to.data.size = o->card->size;
	to.net.threads = o->threads;
	to.data.val_manifest = o->split;
	to.out.quiet = o->quiet;
	run r;
	memset(&r, 0, sizeof(r));
	r.o = &to;
	r.dp.comm = comm;
	r.dp.rank = dp_rank(comm);
	r.dp.world = dp_world(comm);
	r.log.metrics_fd = -1;
	r.st.ahead_slot = -1;
	r.data.classes = o->card->classes;
	loop_eval e;
	memset(&e, 0, sizeof(e));
	e.want_rows = 1;
	e.progress = o->progress;
	e.ctx = o->ctx;
	uint64_t split = 0;
	dp_set_phase(comm, "the set-up");
	int rc = check_classes(o->split, o->card, &split, err);
	if (!rc)
		rc = eval_context(&r, o, err);
	if (!rc)
		rc = eval_model(&r, o, err);
	if (!rc)
		rc = eval_loader(&r, o, err);
	if (!rc)
		rc = loop_setup_device(&r, err);
	/* under a memory limit, a line now rather than OpenBLAS spinning
	 * for a buffer in the pass */
	if (!rc)
		rc = nn_ctx_reserve_blas(&r.ctx, err);
	/* rank 0 writes the files: a folder it cannot write them into
	 * fails the set-up, which every rank then hears */
	if (!rc && o->output && r.dp.rank == 0)
		rc = nn_eval_check_output(o->output, err);
	rc = agree_setup(&r, rc, res, err);
	if (!rc) {
		rc = agree_inputs(&r, o, split, err);
		/* refused alike by every rank, none in a collective: the
		 * program ends without aborting the job */
		res->setup_failed_here = r.failed.here;
		res->setup_failed_ranks = r.failed.ranks;
		res->setup_failed_alike = r.failed.alike;
	}
	dp_set_phase(comm, "the evaluation");
	if (!rc) {
		rc = loop_eval_pass(&r, r.data.val, &e, err);
		/* ... and so does a pass that failed on some rank */
		res->setup_failed_here = r.failed.here;
		res->setup_failed_ranks = r.failed.ranks;
		res->setup_failed_alike = r.failed.alike;
	}
	if (!rc) {
		rc = loop_eval_result(&r, &e, res, err);
		/* rank 0 writes the files next: a rank that failed after the
		 * gather (memory for the rows) is heard by all first, and the
		 * ranks end together. Before, its abort could end rank 0
		 * between two of the files. */
		rc = agree_setup(&r, rc, res, err);
		if (rc < 0) {
			const nn_eval_result v = *res;
			nn_eval_result_release(res);
			res->setup_failed_here = v.setup_failed_here;
			res->setup_failed_ranks = v.setup_failed_ranks;
			res->setup_failed_alike = v.setup_failed_alike;
		}
	}
	dp_set_phase(comm, NULL);
	res->seconds = ims_now() - t0;
	loop_eval_free(&e);
	aug_loader_close(r.data.val);
	nn_model_free(r.m);
	loop_free_device(&r);
	if (r.ctx_ok)
		nn_ctx_release(&r.ctx);
	return rc;
}
