/*
 * cmd_eval.c - `imshard eval`: a trained model's top-1, top-5 and loss on
 * a packed split, per class and as a confusion matrix; alone or under
 * mpirun, each rank its share (train/eval.h does the work).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "imshard_model.h"
#include "train/eval.h"
#include "train/safetensors.h"

/* The matrix is printed up to this many classes; beyond, the pairs most
 * often confused. */
#define PRINTED_MATRIX 20
#define PRINTED_PAIRS 10

static const cli_command command = {
	"eval",
	"imshard eval CHECKPOINT SPLIT.json [--batch-size B] [--json] [-o DIR] [options]",
	"Evaluates a trained model on a packed split: top-1, top-5 and the mean\n"
	"loss, accuracy per class and the confusion matrix.",
	"CHECKPOINT is a checkpoint of imshard-train, a file of 'imshard export',\n"
	"or other safetensors weights under torchvision's names (every tensor of\n"
	"the model must be there with its shape). The split is read with the\n"
	"validation transform the model was trained with: the shorter side\n"
	"resized to size / val-crop-frac, the centre size x size crop, then\n"
	"--mean/--std; every record is counted once. The split's class names\n"
	"must be the model's, in order.\n\n"
	MODEL_CARD_HELP "\n"
	"--precision is the activations' storage, with fp32 sums either way,\n"
	"as imshard-train's: by default the precision the checkpoint's run\n"
	"trained and validated in (said on stderr when it is bf16 or fp16),\n"
	"so the numbers equal the run's last validation at its batch size and\n"
	"threads; fp32 for weights that record none.\n\n"
	"Under mpirun each rank evaluates its share of the records (shares\n"
	"padded to equal length, repeats not counted) and rank 0 prints: the\n"
	"numbers equal one rank's. --threads is per rank (default all cores:\n"
	"with N ranks on one machine give each cores/N). A rank that hangs\n"
	"(stopped, its node unreachable) ends the job after\n"
	"--collective-timeout seconds, as in imshard-train.\n\n"
	"Output: a table on stdout (the matrix when there are at most 20\n"
	"classes, else the pairs most often confused); --json prints one JSON\n"
	"object instead (weights, split, model, size, precision, records,\n"
	"top1, top5, topk, loss, bad_records, classes, per_class, confusion:\n"
	"rows by true class). -o DIR writes\n"
	"DIR/per_class.csv, confusion.csv, predictions.csv (one row per record:\n"
	"label, predicted class, its probability) and eval.json; 'imshard\n"
	"report' draws them when DIR is a run's --log-dir (a DIR holding a\n"
	"split named eval, whose manifest is eval.json, is refused, and so is\n"
	"one where no file can be created or that cannot be made, before the\n"
	"pass).\n"
	"docs/TRAINING.md (\"Evaluating\") has the columns. A record that\n"
	"cannot be read or decoded is replaced by another and counted in\n"
	"bad_records, with a warning. A split holding the records the\n"
	"checkpoint was trained on, or images of its training split byte for\n"
	"byte, is warned of (even with -q).\n\n"
	"Examples:\n"
	"  imshard eval runs/a/checkpoint.safetensors out/test.json\n"
	"  mpirun -np 4 imshard eval model.safetensors out/val.json --threads 4 -o runs/a\n\n"
	"Exit status: 0 evaluated, 1 a missing or damaged checkpoint or split,\n"
	"a split with other classes, 2 bad usage or a flag the weights need."};

/* ---- progress ------------------------------------------------------------ */

typedef struct progress {
	int on;
	double last;
} progress;

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	progress *p = ctx;
	double now = ims_now();
	if (!p->on || (now - p->last < 0.1 && done < total))
		return;
	p->last = now;
	fprintf(stderr, "\rimshard: eval: batch %llu/%llu", (unsigned long long)done,
		(unsigned long long)total);
}

/* ---- the table ----------------------------------------------------------- */

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0;
}

/* Counts of (true, predicted) for the pairs confused most. */
typedef struct pair {
	int t, p;
	uint64_t n;
} pair;

static int cmp_pair(const void *a, const void *b)
{
	const pair *x = a, *y = b;
	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return x->t != y->t ? x->t - y->t : x->p - y->p;
}

/* The off-diagonal pairs of the confusion matrix, largest first; *n gets
 * their number. NULL when out of memory. */
static pair *confused_pairs(const nn_eval_result *r, size_t *n)
{
	pair *ps = malloc((r->n ? r->n : 1) * sizeof(pair));
	*n = 0;
	if (!ps)
		return NULL;
	for (uint64_t i = 0; i < r->n; i++)
		if (r->pred[i] != r->label[i])
			ps[(*n)++] = (pair){r->label[i], r->pred[i], 1};
	/* merge equal pairs: sort by (t, p), count runs */
	qsort(ps, *n, sizeof(pair), cmp_pair); /* all n == 1: by t, p */
	size_t m = 0;
	for (size_t i = 0; i < *n; i++) {
		if (m && ps[m - 1].t == ps[i].t && ps[m - 1].p == ps[i].p)
			ps[m - 1].n++;
		else
			ps[m++] = ps[i];
	}
	qsort(ps, m, sizeof(pair), cmp_pair);
	*n = m;
	return ps;
}

static void print_table(const nn_eval_result *r, const nn_model_card *c,
			const char *weights, const char *split, const char *precision)
{
	char d[128], name[96];
	cli_print("'%s' (%s, %s) on '%s'", weights, model_card_describe(c, d, sizeof(d)),
		  precision, split);
	printf("records %llu  top-1 %.2f%%  top-5 %.2f%%  loss %.4f\n\n",
	       (unsigned long long)r->records, 100 * r->top1, 100 * r->top5, r->loss);
	int w = 5;
	for (int k = 0; k < r->classes; k++) {
		int len = (int)strlen(ims_escape(c->class_names[k], name, 25));
		w = len > w ? len : w;
	}
	printf("%5s  %-*s  %8s  %7s  %7s\n", "class", w, "name", "records", "top-1",
	       "top-5");
	for (int k = 0; k < r->classes; k++)
		if (r->class_records[k])
			printf("%5d  %-*s  %8llu  %6.2f%%  %6.2f%%\n", k, w,
			       ims_escape(c->class_names[k], name, 25),
			       (unsigned long long)r->class_records[k],
			       pct(r->class_top1[k], r->class_records[k]),
			       pct(r->class_topk[k], r->class_records[k]));
		else /* no record, no accuracy (not 0%) */
			printf("%5d  %-*s  %8d  %7s  %7s\n", k, w,
			       ims_escape(c->class_names[k], name, 25), 0, "-", "-");
	if (r->classes <= PRINTED_MATRIX) {
		printf("\nconfusion matrix (rows: true class, columns: predicted class)\n");
		printf("%5s  %-*s", "", w, "");
		for (int k = 0; k < r->classes; k++)
			printf(" %6d", k);
		printf("\n");
		uint64_t row[PRINTED_MATRIX];
		for (int t = 0; t < r->classes; t++) {
			memset(row, 0, sizeof(row));
			for (uint64_t i = 0; i < r->n; i++)
				if (r->label[i] == t)
					row[r->pred[i]]++;
			printf("%5d  %-*s", t, w, ims_escape(c->class_names[t], name, 25));
			for (int k = 0; k < r->classes; k++)
				printf(" %6llu", (unsigned long long)row[k]);
			printf("\n");
		}
		return;
	}
	size_t n;
	pair *ps = confused_pairs(r, &n);
	printf("\nmost often confused (true class -> predicted: records)\n");
	for (size_t i = 0; ps && i < n && i < PRINTED_PAIRS; i++) {
		char other[96];
		printf("  %s -> %s: %llu\n", ims_escape(c->class_names[ps[i].t], name, 48),
		       ims_escape(c->class_names[ps[i].p], other, 48),
		       (unsigned long long)ps[i].n);
	}
	if (ps && n == 0)
		printf("  none\n");
	free(ps);
}

/* ---- JSON ---------------------------------------------------------------- */

/* One JSON object on one line: the summary through cJSON, the matrix
 * streamed row by row (a million-cell matrix as cJSON nodes would take
 * gigabytes). */
static int print_json(const nn_eval_result *r, const nn_model_card *c,
		      const char *weights, const char *split, const char *precision)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "weights", weights);
	cJSON_AddStringToObject(j, "split", split);
	cJSON_AddStringToObject(j, "model", c->model);
	cJSON_AddNumberToObject(j, "size", c->size);
	cJSON_AddStringToObject(j, "precision", precision);
	cJSON_AddNumberToObject(j, "records", (double)r->records);
	cJSON_AddNumberToObject(j, "top1", r->top1);
	cJSON_AddNumberToObject(j, "top5", r->top5);
	cJSON_AddNumberToObject(j, "topk", r->topk);
	cJSON_AddNumberToObject(j, "loss", r->loss);
	cJSON_AddNumberToObject(j, "bad_records", (double)r->bad_records);
	cJSON *names = cJSON_AddArrayToObject(j, "classes");
	cJSON *pc = cJSON_AddArrayToObject(j, "per_class");
	for (int k = 0; names && pc && k < r->classes; k++) {
		cJSON_AddItemToArray(names, cJSON_CreateString(c->class_names[k]));
		cJSON *e = cJSON_CreateObject();
		cJSON_AddItemToArray(pc, e);
		cJSON_AddNumberToObject(e, "records", (double)r->class_records[k]);
		cJSON_AddNumberToObject(e, "top1_correct", (double)r->class_top1[k]);
		cJSON_AddNumberToObject(e, "top5_correct", (double)r->class_topk[k]);
	}
	char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	uint64_t *row = calloc((size_t)r->classes, sizeof(uint64_t));
	if (!text || !row) {
		free(text);
		free(row);
		cli_error("eval: out of memory");
		return CLI_EXIT_FAIL;
	}
	text[strlen(text) - 1] = '\0'; /* the closing brace: the matrix follows */
	fputs(text, stdout);
	free(text);
	fputs(",\"confusion\":[", stdout);
	for (int t = 0; t < r->classes; t++) {
		memset(row, 0, (size_t)r->classes * sizeof(uint64_t));
		for (uint64_t i = 0; i < r->n; i++)
			if (r->label[i] == t)
				row[r->pred[i]]++;
		fputs(t ? ",[" : "[", stdout);
		for (int k = 0; k < r->classes; k++)
			printf(k ? ",%llu" : "%llu", (unsigned long long)row[k]);
		fputs("]", stdout);
	}
	fputs("]}\n", stdout);
	free(row);
	return 0;
}

/* ---- the command --------------------------------------------------------- */

/* One line (naming the rank when there are several), every rank ended. */
static int fail(dp_comm *comm, const ims_error *err)
{
	if (dp_world(comm) > 1)
		cli_error("eval: rank %d: %s", dp_rank(comm), err->msg);
	else
		cli_error("eval: %s", err->msg);
	dp_abort(comm, CLI_EXIT_FAIL);
	dp_finalize(comm);
	return CLI_EXIT_FAIL;
}

int cmd_eval(int argc, char **argv)
{
	dp_comm *comm = NULL;
	ims_error err;
	ims_error_clear(&err);
	/* MPI first: it may rewrite argv, and every rank parses the same */
	if (dp_init(&argc, &argv,
		    cli_peek_double(argc, argv, "collective-timeout", 600, 0, 1e9),
		    "imshard: eval", &comm, &err) < 0) {
		cli_error("eval: %s", err.msg);
		return CLI_EXIT_FAIL;
	}
	/* again after MPI, which may install a SIGBUS handler of its own */
	ims_mapguard_install("imshard");
	model_flags mf = {0};
	int batch = 32, threads = 0, json = 0;
	double timeout = 600;
	const char *device = "cpu", *out = NULL, *precision = NULL;
	const cli_opt opts[] = {
		{"batch-size", 0, CLI_INT, &batch, "B", "samples per batch per rank (32)", 1, 65536},
		{"threads", 0, CLI_INT, &threads, "T", "compute and decoding threads per rank (all cores; at most the MAX_THREADS OpenBLAS was built for)", 0, 1024},
		{"device", 0, CLI_STRING, &device, "DEV", "cpu or cuda (cpu)", 0, 0},
		{"precision", 0, CLI_STRING, &precision, "P", "fp32, bf16 or fp16: activations stored in 16 bits, sums in fp32 (the precision the checkpoint's run trained in; fp32 for other weights)", 0, 0},
		{"json", 0, CLI_FLAG, &json, NULL, "print one JSON object instead of the table", 0, 0},
		{"output", 'o', CLI_STRING, &out, "DIR", "write per_class.csv, confusion.csv, predictions.csv and eval.json here", 0, 0},
		{"collective-timeout", 0, CLI_DOUBLE, &timeout, "S", CLI_HELP_COLLECTIVE_TIMEOUT, 0, 1e9},
		MODEL_CARD_OPTIONS(&mf),
		{"quiet", 'q', CLI_FLAG, &mf.quiet, NULL, "no progress or notes on stderr", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[2];
	int np = 0;
	int rc = cli_parse(&command, opts, argc, argv, pos, 2, 2, &np);
	if (!rc && strcmp(device, "cpu") && strcmp(device, "cuda"))
		rc = cli_usage_error(&command, "--device must be cpu or cuda, got '%s'",
				     device);
	if (!rc && precision && nn_precision_of(precision) < 0)
		rc = cli_usage_error(&command, "--precision must be fp32, bf16 or fp16, got '%s'",
				     precision);
	const int rank0 = dp_rank(comm) == 0;
	/* notes from rank 0 only: every rank resolves the same card */
	model_flags quiet_mf = mf;
	quiet_mf.quiet = mf.quiet || !rank0;
	nn_model_card card;
	nn_model_card_init(&card);
	/* read once: the card, the run's precision and the weights are this
	 * one file's, whatever replaces it meanwhile */
	st_file *wf = NULL;
	if (!rc)
		rc = model_weights_open("eval", pos[0], &wf);
	if (!rc)
		rc = model_card_resolve("eval", wf, &quiet_mf, NN_CARD_ALL, &card);
	/* each rank reads its own copy of the weights (node-local storage):
	 * one that could not goes on to none of the pass's collectives, so
	 * the ranks agree here first and end together (before: its peers
	 * waited in the set-up's agreement until --collective-timeout) */
	double failed = rc != 0;
	if (dp_world(comm) > 1 && dp_allreduce_sum_f64(comm, &failed, 1, &err) < 0) {
		st_close(wf);
		nn_model_card_release(&card);
		return fail(comm, &err);
	}
	if (!rc && failed > 0) {
		if (rank0)
			cli_error("eval: %.0f of %d ranks could not read the weights "
				  "or their model card (said on stderr): nothing was evaluated",
				  failed, dp_world(comm));
		rc = CLI_EXIT_FAIL;
	}
	if (rc) {
		st_close(wf);
		dp_finalize(comm);
		return rc < 0 ? CLI_EXIT_OK : rc;
	}
	/* the pass's collectives wait for every rank: one stopped alive
	 * would leave the others waiting forever (mpirun only ends a job
	 * whose rank died) */
	if (dp_set_timeout(comm, timeout, "imshard: eval", &err) < 0) {
		st_close(wf);
		nn_model_card_release(&card);
		return fail(comm, &err);
	}
	/* left out: the run's own, so the numbers are its validation's */
	char ran[8];
	if (!precision)
		precision = model_run_precision("eval", wf, mf.quiet || !rank0, ran,
						sizeof(ran), &err);
	if (!precision) {
		st_close(wf);
		nn_model_card_release(&card);
		return fail(comm, &err);
	}
	progress pr = {rank0 && !mf.quiet && isatty(STDERR_FILENO), 0};
	nn_eval_opts eo;
	nn_eval_opts_init(&eo);
	eo.split = pos[1];
	eo.weights = pos[0];
	eo.weights_file = wf;
	eo.weights_verified = 1; /* model_weights_open */
	eo.card = &card;
	eo.device = device;
	eo.precision = precision;
	eo.batch_size = batch;
	eo.threads = threads;
	eo.output = out;
	/* where batches live matters on a device only */
	eo.quiet = mf.quiet || strcmp(device, "cuda");
	eo.progress = on_progress;
	eo.ctx = &pr;
	nn_eval_result res;
	rc = nn_eval_run(&eo, comm, &res, &err);
	/* numbers on the records the weights were trained on are said to be
	 * (the trainer says so of such a --val), even under --quiet */
	if (!rc && rank0) {
		int found = 0;
		nn_overlap ov;
		char train[4096], msg[2 * 4096 + 600];
		rc = nn_eval_train_overlap(wf, pos[1], &found, &ov, train, sizeof(train),
					   &err);
		if (!rc && found == NN_TRAIN_MISSING)
			/* a search not made is said, not passed over */
			cli_info(mf.quiet,
				 "eval: the training split '%s' recorded in '%s' is "
				 "not there (or is another split now): '%s' was not "
				 "searched for its images, only compared with its "
				 "digest",
				 train, pos[0], pos[1]);
		if (!rc && found == NN_TRAIN_SAME)
			cli_warn(0, "eval: '%s' holds the records '%s' was trained on: "
				    "its accuracy is on training records",
				 pos[1], pos[0]);
		if (!rc && ov.shared) {
			nn_overlap_say(&ov, train, pos[1], "eval: ", msg, sizeof(msg) - 80);
			size_t n = strlen(msg);
			snprintf(msg + n, sizeof(msg) - n,
				 "; its accuracy is partly on images the weights were "
				 "trained on");
			cli_warn(0, "%s", msg);
		}
		if (rc)
			nn_eval_result_release(&res);
	}
	/* the pass is over: the weights are in the model or refused */
	st_close(wf);
	if (pr.on)
		fputs("\r\033[K", stderr);
	if (rc < 0 && res.setup_failed_ranks > 0) {
		/* every rank is here, none in a collective: end without an
		 * abort. Failed alike everywhere (bad input): rank 0's line
		 * alone; else each rank that failed names itself. */
		if (dp_world(comm) == 1 || (res.setup_failed_alike && rank0))
			cli_error("eval: %s", err.msg);
		else if (!res.setup_failed_alike && res.setup_failed_here)
			cli_error("eval: rank %d: %s", dp_rank(comm), err.msg);
		nn_model_card_release(&card);
		dp_finalize(comm);
		return CLI_EXIT_FAIL;
	}
	if (rc < 0) {
		nn_model_card_release(&card);
		return fail(comm, &err);
	}
	int status = CLI_EXIT_OK;
	if (!isfinite(res.loss)) {
		/* numbers of such a model mean nothing: no table, no files */
		if (rank0)
			cli_error("eval: the loss of '%s' on '%s' is %s: the network's "
				  "output is not finite (weights of a run that diverged?)",
				  pos[0], pos[1], isnan(res.loss) ? "NaN" : "infinite");
		nn_eval_result_release(&res);
		nn_model_card_release(&card);
		dp_finalize(comm);
		return CLI_EXIT_FAIL;
	}
	if (rank0) {
		if (res.bad_records)
			cli_warn(mf.quiet,
				 "eval: %llu %s of '%s' could not be read or "
				 "decoded and %s left out of the scores (%llu "
				 "counted); 'imshard verify --decode' names them",
				 (unsigned long long)res.bad_records,
				 ims_plural(res.bad_records, "record", "records"), pos[1],
				 res.bad_records == 1 ? "was" : "were",
				 (unsigned long long)res.records);
		int empty = 0, first = -1;
		for (int k = 0; k < res.classes; k++)
			if (!res.class_records[k] && !empty++)
				first = k;
		if (empty) {
			char name[4 * 64];
			cli_warn(mf.quiet,
				 "eval: '%s' holds no record of %d of the model's %d "
				 "classes (the first: %d '%s'): %s no accuracy, "
				 "shown as - (empty in per_class.csv, null in "
				 "eval.json)",
				 pos[1], empty, res.classes, first,
				 ims_escape(card.class_names[first], name, sizeof(name)),
				 empty == 1 ? "it has" : "they have");
		}
		if (out) {
			nn_eval_origin origin = {"imshard eval", pos[0], pos[1], -1, 0,
						 precision};
			/* a run folder's files are replaced whole: say so, as
			 * every replacement is told (eval.json is written last,
			 * so it marks an earlier evaluation there) */
			char prev[4096];
			ims_error perr;
			int replacing = ims_path_join(prev, sizeof(prev), out, "eval.json",
						      &perr) == 0 &&
					access(prev, F_OK) == 0;
			if (nn_eval_write(out, &res, &card, &origin, &err) < 0) {
				cli_error("eval: %s", err.msg);
				status = CLI_EXIT_FAIL;
			} else {
				cli_info(mf.quiet,
					 "eval: wrote per_class.csv, confusion.csv, "
					 "predictions.csv and eval.json into '%s'%s",
					 out, replacing ? " (replacing the evaluation it held)" : "");
			}
		}
		if (json)
			status = print_json(&res, &card, pos[0], pos[1], precision)
					 ? CLI_EXIT_FAIL
					 : status;
		else
			print_table(&res, &card, pos[0], pos[1], precision);
		fflush(stdout);
	}
	nn_eval_result_release(&res);
	nn_model_card_release(&card);
	dp_finalize(comm);
	return status;
}
