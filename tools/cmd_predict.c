/*
 * cmd_predict.c - `imshard predict`: class names and probabilities for
 * image files, each rendered with the validation transform the model was
 * trained with (augment's aug_render, the loader's own path), in batches.
 */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "augment/augment.h"
#include "imshard_model.h"

/* Image files larger than this are refused (an absurd input, not a
 * photograph). */
#define MAX_IMAGE_BYTES ((size_t)1 << 30)

static const cli_command command = {
	"predict",
	"imshard predict CHECKPOINT IMAGE... [--top K] [--json] [options]",
	"Predicts the classes of image files with a trained model: the top K\n"
	"class names and their probabilities, one line per image.",
	"Images are JPEG or PNG of any size up to 32768 pixels a side and\n"
	"268435456 pixels (256 Mi) in all, told apart by their content; EXIF orientation is applied, alpha is\n"
	"composited over white, grey and CMYK become RGB. Each is fed to the\n"
	"network exactly as validation fed the records it was trained on: the\n"
	"shorter side resized to size / val-crop-frac, the centre size x size\n"
	"crop, --mean/--std (one code path with the loader), and computed in\n"
	"the precision the checkpoint's run trained in, as 'imshard eval'\n"
	"computes (said on stderr when bf16 or fp16; --precision to change).\n\n"
	MODEL_CARD_HELP "\n"
	"Output, in the order the images were given: 'IMAGE: NAME 92.31%,\n"
	"NAME 5.10%, ...'; with --json one JSON object per line: image, top\n"
	"(class index, name, probability, most probable first) and with\n"
	"--logits every class's logit (the network's raw output). Logits and\n"
	"probabilities are the same bits for the same --batch-size and\n"
	"--threads; another batch size or thread count sums in another order,\n"
	"which can move the last digits. An image that\n"
	"cannot be read or decoded is named on stderr and the others are still\n"
	"predicted; the exit status is then 1, as it is when the lines cannot\n"
	"be written (a full disk).\n\n"
	"Examples:\n"
	"  imshard predict runs/a/checkpoint.safetensors photo.jpg scan.png\n"
	"  imshard predict model.safetensors *.jpg --top 1 --json\n\n"
	"Exit status: 0 every image predicted, 1 some image failed, the\n"
	"checkpoint is missing or damaged or the output could not be written,\n"
	"2 bad usage or a flag the weights need."};

/* Per thread: a codec and the decoded pixels it reuses. */
typedef struct worker {
	aug_codec *codec;
	aug_image img;
} worker;

/* One image file into dst (a sample of t). */
static int render_file(worker *w, const char *path, const aug_transform_opts *t,
		       void *dst, ims_error *err)
{
	uint8_t *data = NULL;
	size_t len = 0;
	FORWARD_IF_ERR(ims_read_file(path, &data, &len, MAX_IMAGE_BYTES, err));
	aug_image_info info;
	int rc = aug_probe(w->codec, data, len, &info, err);
	if (!rc)
		rc = aug_render(w->codec, data, len, info.upright_width,
				info.upright_height, t, 0, 0, 0, &w->img, dst, NULL, err);
	free(data);
	return rc;
}

typedef struct out_opts {
	int top, json, logits;
} out_opts;

/* A class and its probability, sorted most probable first (ties: the
 * lower index first). */
typedef struct ranked {
	double p;
	int k;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
	const ranked *x = a, *y = b;
	if (x->p != y->p)
		return x->p < y->p ? 1 : -1;
	return x->k - y->k;
}

/* s as messages print it (ims_escape), whole: a path or class name of
 * any length (a fixed buffer cut a deep path with "...", and the line
 * then named no file). -1 when out of memory. */
static int print_escaped(const char *s)
{
	/* \xHH is the longest form of one byte */
	size_t len = 4 * strlen(s) + 4;
	char *buf = malloc(len);
	if (!buf)
		return -1;
	fputs(ims_escape(s, buf, len), stdout);
	free(buf);
	return 0;
}

/* The line of one image from its logits (k classes). */
static int print_one(const char *path, const float *z, int k,
		     const nn_model_card *c, const out_opts *o, ranked *r)
{
	double mx = z[0], s = 0;
	for (int i = 1; i < k; i++)
		mx = z[i] > mx ? z[i] : mx;
	for (int i = 0; i < k; i++)
		s += (r[i].p = exp((double)z[i] - mx));
	for (int i = 0; i < k; i++) {
		r[i].p /= s;
		r[i].k = i;
	}
	qsort(r, (size_t)k, sizeof(ranked), cmp_ranked);
	if (!o->json) {
		int rc = print_escaped(path);
		fputc(':', stdout);
		for (int i = 0; !rc && i < o->top; i++) {
			fputs(i ? ", " : " ", stdout);
			rc = print_escaped(c->class_names[r[i].k]);
			printf(" %.2f%%", 100 * r[i].p);
		}
		printf("\n");
		return rc;
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "image", path);
	cJSON *top = cJSON_AddArrayToObject(j, "top");
	for (int i = 0; top && i < o->top; i++) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddItemToArray(top, e);
		cJSON_AddNumberToObject(e, "class", r[i].k);
		cJSON_AddStringToObject(e, "name", c->class_names[r[i].k]);
		cJSON_AddNumberToObject(e, "probability", r[i].p);
	}
	if (o->logits) {
		cJSON *l = cJSON_AddArrayToObject(j, "logits");
		for (int i = 0; l && i < k; i++)
			cJSON_AddItemToArray(l, cJSON_CreateNumber(z[i]));
	}
	char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	/* cJSON copies a path's bytes as they are: one that is not UTF-8
	 * would make the line invalid JSON (and a C1 control could reach a
	 * terminal), so it is escaped as every other output is */
	char *safe = text ? ims_escape_json(text) : NULL;
	free(text);
	if (!safe)
		return -1;
	printf("%s\n", safe);
	free(safe);
	return 0;
}

typedef struct predictor {
	nn_ctx ctx;
	int ctx_ok;
	nn_model *m;
	aug_transform_opts t;
	size_t sample;       /* bytes of one rendered image */
	float *x;            /* batch of rendered images */
	worker *workers;
	int n_workers;
	ranked *ranks;       /* one image's classes, sorted */
} predictor;

static void predictor_free(predictor *p)
{
	for (int i = 0; p->workers && i < p->n_workers; i++) {
		aug_codec_destroy(p->workers[i].codec);
		aug_image_release(&p->workers[i].img);
	}
	free(p->workers);
	free(p->x);
	free(p->ranks);
	nn_model_free(p->m);
	if (p->ctx_ok)
		nn_ctx_release(&p->ctx);
}

static int predictor_open(predictor *p, const st_file *weights,
			  const nn_model_card *c, int batch, int threads,
			  const char *precision, ims_error *err)
{
	FORWARD_IF_ERR(nn_ctx_init_cpu(&p->ctx, threads, err));
	p->ctx_ok = 1;
	/* as eval's: 16-bit activations, fp32 sums */
	p->ctx.precision = nn_precision_of(precision);
	/* no weights drawn: every tensor is loaded below, or the load fails */
	FORWARD_IF_ERR(nn_model_create_unset(&p->ctx, c->model, c->classes, c->size,
					     c->size, batch, &p->m, err));
	FORWARD_IF_ERR(nn_model_set_use(p->m, NN_USE_EVAL, err));
	/* verified when opened (model_weights_open) */
	FORWARD_IF_ERR(nn_model_load_weights_file(weights, p->m, 1, err));
	aug_transform_opts_init(&p->t, 0);
	p->t.out_w = p->t.out_h = c->size;
	p->t.crop_frac = c->val_crop_frac;
	memcpy(p->t.mean, c->mean, sizeof(c->mean));
	memcpy(p->t.std, c->std, sizeof(c->std));
	p->sample = aug_sample_bytes(&p->t);
	p->x = malloc(p->sample * (size_t)batch);
	p->n_workers = p->ctx.threads;
	p->workers = calloc((size_t)p->n_workers, sizeof(worker));
	p->ranks = malloc((size_t)c->classes * sizeof(ranked));
	RETURN_IF(!p->x || !p->workers || !p->ranks, err, IMS_ENOMEM,
		  "cannot predict: out of memory");
	for (int i = 0; i < p->n_workers; i++)
		FORWARD_IF_ERR(aug_codec_create(&p->workers[i].codec, err));
	/* under a memory limit, a line now rather than OpenBLAS spinning
	 * for a buffer in the first batch */
	return nn_ctx_reserve_blas(&p->ctx, err);
}

/*
 * Images [0, n) of one batch: rendered in parallel, the ones that
 * rendered moved together and run through the network, lines printed in
 * the given order, failures named. Returns the failures, or -1 with err
 * set when the network fails.
 */
static int predict_batch(predictor *p, const char *const *paths, int n,
			 const nn_model_card *c, const out_opts *o, ims_error *err)
{
	ims_error *errs = calloc((size_t)n, sizeof(ims_error));
	int *rc = calloc((size_t)n, sizeof(int));
	if (!errs || !rc) {
		free(errs);
		free(rc);
		return ims_fail(err, IMS_ENOMEM, "cannot predict: out of memory");
	}
#pragma omp parallel for num_threads(p->n_workers) schedule(dynamic, 1)
	for (int i = 0; i < n; i++)
		rc[i] = render_file(&p->workers[omp_get_thread_num()], paths[i], &p->t,
				    (uint8_t *)p->x + (size_t)i * p->sample, &errs[i]);
	int good = 0, failed = 0;
	for (int i = 0; i < n; i++)
		if (rc[i] == 0) {
			if (good != i)
				memmove((uint8_t *)p->x + (size_t)good * p->sample,
					(uint8_t *)p->x + (size_t)i * p->sample, p->sample);
			good++;
		}
	const float *logits = NULL;
	int status = 0;
	if (good)
		status = nn_model_forward(p->m, p->x, good, 0, 0, &logits, err);
	for (int i = 0, g = 0; status == 0 && i < n; i++) {
		if (rc[i]) {
			cli_error("predict: cannot predict '%s': %s", paths[i], errs[i].msg);
			failed++;
			continue;
		}
		const float *z = logits + (size_t)g++ * c->classes;
		int finite = 1;
		for (int k = 0; k < c->classes; k++)
			finite &= isfinite(z[k]) != 0;
		if (!finite) {
			cli_error("predict: cannot predict '%s': the network's output "
				  "is not finite (NaN or Inf: weights of a run that "
				  "diverged?)",
				  paths[i]);
			failed++;
			continue;
		}
		if (print_one(paths[i], z, c->classes, c, o, p->ranks))
			status = ims_fail(err, IMS_ENOMEM, "cannot predict: out of memory");
	}
	free(errs);
	free(rc);
	return status < 0 ? status : failed;
}

int cmd_predict(int argc, char **argv)
{
	model_flags mf = {0};
	out_opts o = {5, 0, 0};
	int batch = 16, threads = 0, top = 0; /* 0: not given */
	const char *precision = NULL;
	const cli_opt opts[] = {
		{"top", 'k', CLI_INT, &top, "K", "classes per image, most probable first (5)", 1, 1e9},
		{"json", 0, CLI_FLAG, &o.json, NULL, "one JSON object per image", 0, 0},
		{"logits", 0, CLI_FLAG, &o.logits, NULL, "with --json: every class's logit too", 0, 0},
		{"batch-size", 0, CLI_INT, &batch, "B", "images per forward pass, at most (16)", 1, 4096},
		{"threads", 0, CLI_INT, &threads, "T", "decoding and compute threads (all cores; at most the MAX_THREADS OpenBLAS was built for)", 0, 1024},
		{"precision", 0, CLI_STRING, &precision, "P", "fp32, bf16 or fp16: activations stored in 16 bits, sums in fp32 (the precision the checkpoint's run trained in; fp32 for other weights)", 0, 0},
		MODEL_CARD_OPTIONS(&mf),
		{"quiet", 'q', CLI_FLAG, &mf.quiet, NULL, "no notes on stderr (failures are still named)", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	int rc = model_one_process(&command, "predict every image and print "
					     "its line again ('imshard eval' "
					     "shares a split among ranks)");
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	const char **pos = calloc((size_t)argc + 1, sizeof(char *));
	if (!pos) {
		cli_error("predict: out of memory");
		return CLI_EXIT_FAIL;
	}
	int np = 0;
	rc = cli_parse(&command, opts, argc, argv, pos, 2, argc, &np);
	if (!rc && o.logits && !o.json)
		rc = cli_usage_error(&command, "--logits needs --json");
	if (!rc && precision && nn_precision_of(precision) < 0)
		rc = cli_usage_error(&command, "--precision must be fp32, bf16 or fp16, got '%s'",
				     precision);
	/* each thread runs GEMMs: more than OpenBLAS serves is usage, said
	 * before the weights are read */
	if (!rc && threads > nn_blas_max_threads())
		rc = cli_usage_error(&command, "--threads %d: this OpenBLAS was built "
				     "for at most %d threads (MAX_THREADS)",
				     threads, nn_blas_max_threads());
	nn_model_card card;
	nn_model_card_init(&card);
	/* read once: the card and the weights are this one file's */
	st_file *wf = NULL;
	if (!rc)
		rc = model_weights_open("predict", pos[0], &wf);
	if (!rc)
		rc = model_card_resolve("predict", wf, &mf, NN_CARD_ALL, &card);
	if (rc) {
		st_close(wf);
		free(pos);
		return rc < 0 ? CLI_EXIT_OK : rc;
	}
	if (top > card.classes)
		cli_info(mf.quiet, "predict: --top %d, but '%s' has %d classes: each "
			 "image gets all %d",
			 top, pos[0], card.classes, card.classes);
	/* left out: the run's own, so the probabilities are eval's */
	char ran[8];
	ims_error err;
	if (!precision)
		precision = model_run_precision("predict", wf, mf.quiet, ran, sizeof(ran), &err);
	if (!precision) {
		cli_error("predict: %s", err.msg);
		st_close(wf);
		nn_model_card_release(&card);
		free(pos);
		return CLI_EXIT_FAIL;
	}
	if (top)
		o.top = top;
	if (o.top > card.classes)
		o.top = card.classes;
	/* a most: the network's activations are sized for a batch, and one
	 * image need not pay for 4096 */
	if (batch > np - 1)
		batch = np - 1;
	predictor p;
	memset(&p, 0, sizeof(p));
	int failed = 0;
	rc = predictor_open(&p, wf, &card, batch, threads, precision, &err);
	st_close(wf);
	/* stops at the first batch whose lines could not be written: the
	 * rest would be lost as well */
	for (int i = 1; rc == 0 && !ferror(stdout) && i < np; i += batch) {
		int n = np - i < batch ? np - i : batch;
		int f = predict_batch(&p, pos + i, n, &card, &o, &err);
		if (f < 0)
			rc = f;
		else
			failed += f;
	}
	/* Predictions that never reached the output (a full disk, a quota)
	 * are a failure, not status 0 with lines missing. errno is cleared
	 * so that a write that failed earlier is not given a stale cause. */
	errno = 0;
	if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0)
		rc = ims_fail(&err, IMS_EIO,
			      "cannot write the predictions to standard output: %s",
			      strerror(errno ? errno : EIO));
	if (rc < 0)
		cli_error("predict: %s", err.msg);
	else if (failed)
		cli_info(mf.quiet, "predict: %d of %d %s could not be predicted",
			 failed, np - 1, ims_plural((uint64_t)(np - 1), "image", "images"));
	predictor_free(&p);
	nn_model_card_release(&card);
	free(pos);
	return rc < 0 || failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
