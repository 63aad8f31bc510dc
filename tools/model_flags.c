/*
 * model_flags.c - what imshard-model's commands share: the model card from
 * the weights and the flags, and the OpenBLAS kernel choice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "datasets/datasets.h"
#include "imshard_model.h"
#include "recordio/recordio.h"
#include "train/checkpoint.h"
#include "train/dp.h"
#include "train/nn.h"

const char *model_card_describe(const nn_model_card *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s, %d classes, %d px", c->model, c->classes, c->size);
	return buf;
}

/* Class names from FILE: a split's manifest (a JSON object) or a class
 * list, one name per line. */
static int read_class_file(const char *cmd, const char *path,
			   nn_model_card *names)
{
	ims_error err;
	FILE *f = ims_fopen_read(path, &err);
	if (!f) {
		cli_error("%s: %s", cmd, err.msg);
		return CLI_EXIT_FAIL;
	}
	int c;
	while ((c = fgetc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r')
		;
	fclose(f);
	int rc;
	if (c == '{') {
		rio_manifest m = {0};
		rc = rio_manifest_load(path, &m, &err);
		if (!rc)
			rc = nn_model_card_set_names(names, (const char *const *)m.classes,
						     m.n_classes, &err);
		rio_manifest_release(&m);
	} else {
		ds_list l;
		ds_list_init(&l);
		rc = ds_classes_read(path, &l, &err);
		if (!rc)
			rc = nn_model_card_set_names(names, (const char *const *)l.classes,
						     l.n_classes, &err);
		ds_list_release(&l);
	}
	if (rc < 0) {
		cli_error("%s: --classes '%s': %s", cmd, path, err.msg);
		return CLI_EXIT_FAIL;
	}
	return 0;
}

static int same_triple(const float a[3], const float b[3])
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

/* The flags applied to card; a contradiction is a usage error. */
static int apply_flags(const char *cmd, const char *weights,
		       const model_flags *f, nn_model_card *card)
{
	char safe[128];
	if (f->model) {
		int known = 0;
		for (const char *const *n = nn_model_names(); *n; n++)
			known |= !strcmp(*n, f->model);
		if (!known) {
			cli_error("%s: unknown model '%s' (convnet7, resnet18, resnet50, vgg16)",
				  cmd, f->model);
			return CLI_EXIT_USAGE;
		}
		if ((card->have & NN_CARD_MODEL) && strcmp(card->model, f->model)) {
			cli_error("%s: --model %s, but '%s' holds %s", cmd, f->model,
				  weights, card->model);
			return CLI_EXIT_USAGE;
		}
		snprintf(card->model, sizeof(card->model), "%s", f->model);
		card->have |= NN_CARD_MODEL;
	}
	if (f->classes) {
		nn_model_card names;
		nn_model_card_init(&names);
		int rc = read_class_file(cmd, f->classes, &names);
		if (rc)
			return rc;
		if ((card->have & NN_CARD_CLASSES) && names.classes != card->classes) {
			cli_error("%s: --classes '%s' names %d classes, '%s' holds %d",
				  cmd, f->classes, names.classes, weights, card->classes);
			rc = CLI_EXIT_USAGE;
		}
		for (int i = 0; !rc && (card->have & NN_CARD_NAMES) && i < card->classes; i++)
			if (strcmp(names.class_names[i], card->class_names[i])) {
				cli_error("%s: --classes '%s' names class %d '%s', '%s' "
					  "records '%s'",
					  cmd, f->classes, i, names.class_names[i], weights,
					  ims_escape(card->class_names[i], safe, sizeof(safe)));
				rc = CLI_EXIT_USAGE;
			}
		if (!rc)
			rc = nn_model_card_set_names(card, (const char *const *)names.class_names,
						     (size_t)names.classes, NULL) < 0
				     ? CLI_EXIT_FAIL
				     : 0;
		nn_model_card_release(&names);
		if (rc)
			return rc;
	}
	if (f->size) {
		if ((card->have & NN_CARD_SIZE) && card->size != f->size)
			cli_info(f->quiet, "%s: --size %d in place of the %d px '%s' records",
				 cmd, f->size, card->size, weights);
		card->size = f->size;
		card->have |= NN_CARD_SIZE;
	}
	float v[3];
	if (f->mean) {
		if (cli_parse_triple(f->mean, v)) {
			cli_error("%s: --mean needs three numbers like 123.7,116.3,103.5, got '%s'",
				  cmd, f->mean);
			return CLI_EXIT_USAGE;
		}
		if ((card->have & NN_CARD_MEAN) && !same_triple(v, card->mean))
			cli_info(f->quiet, "%s: --mean %s in place of the %g,%g,%g '%s' records",
				 cmd, f->mean, (double)card->mean[0], (double)card->mean[1],
				 (double)card->mean[2], weights);
		memcpy(card->mean, v, sizeof(v));
		card->have |= NN_CARD_MEAN;
	}
	if (f->std) {
		if (cli_parse_triple(f->std, v) || !cli_std_ok(v)) {
			cli_error("%s: --std needs three numbers above 0 like 58.4,57.1,57.4, got '%s'",
				  cmd, f->std);
			return CLI_EXIT_USAGE;
		}
		if ((card->have & NN_CARD_STD) && !same_triple(v, card->std))
			cli_info(f->quiet, "%s: --std %s in place of the %g,%g,%g '%s' records",
				 cmd, f->std, (double)card->std[0], (double)card->std[1],
				 (double)card->std[2], weights);
		memcpy(card->std, v, sizeof(v));
		card->have |= NN_CARD_STD;
	}
	if (f->crop > 0) {
		if ((card->have & NN_CARD_CROP) && card->val_crop_frac != f->crop)
			cli_info(f->quiet, "%s: --val-crop-frac %g in place of the %g '%s' records",
				 cmd, f->crop, card->val_crop_frac, weights);
		card->val_crop_frac = f->crop;
		card->have |= NN_CARD_CROP;
	}
	return 0;
}

int model_weights_open(const char *cmd, const char *path, st_file **out)
{
	ims_error err;
	st_file *sf = NULL;
	int verified;
	*out = NULL;
	if (st_open(path, &sf, &err) < 0 || nn_checkpoint_verify(sf, &verified, &err) < 0) {
		st_close(sf);
		/* a run's folder (--checkpoint-dir) given for its checkpoint:
		 * named, not guessed */
		struct stat st;
		char ck[4096], safe[4 * 4096 + 4];
		const int dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
		if (dir && (size_t)snprintf(ck, sizeof(ck), "%s/checkpoint.safetensors",
					    path) < sizeof(ck) &&
		    stat(ck, &st) == 0 && S_ISREG(st.st_mode))
			cli_error("%s: %s; the run's checkpoint in it is '%s'", cmd,
				  err.msg, ims_escape(ck, safe, sizeof(safe)));
		else
			cli_error("%s: %s", cmd, err.msg);
		return CLI_EXIT_FAIL;
	}
	*out = sf;
	return 0;
}

int model_card_resolve(const char *cmd, const st_file *sf,
		       const model_flags *f, unsigned need, nn_model_card *card)
{
	nn_model_card_init(card);
	ims_error err;
	const char *weights = st_path(sf);
	if (nn_model_card_read(sf, card, &err) < 0) {
		cli_error("%s: %s", cmd, err.msg);
		return CLI_EXIT_FAIL;
	}
	int rc = apply_flags(cmd, weights, f, card);
	if (rc) {
		nn_model_card_release(card);
		return rc;
	}
	unsigned missing = need & ~card->have & ~(unsigned)NN_CARD_CROP;
	if (!missing) {
		if ((need & NN_CARD_CROP) && !(card->have & NN_CARD_CROP)) {
			/* imshard-train's only value before checkpoints
			 * recorded it, and torchvision's (resize 256, crop
			 * 224) */
			card->val_crop_frac = 0.875;
			card->have |= NN_CARD_CROP;
			cli_info(f->quiet,
				 "%s: '%s' records no validation crop fraction: "
				 "0.875 (--val-crop-frac to change)",
				 cmd, weights);
		}
		return 0;
	}
	char flags[512] = "", what[256] = "";
	static const struct {
		unsigned bit;
		const char *what, *flag;
	} need_flags[] = {
		{NN_CARD_MODEL, "model", "--model NAME"},
		{NN_CARD_NAMES, "class names", "--classes FILE"},
		{NN_CARD_SIZE, "input size", "--size PX"},
		{NN_CARD_MEAN, "mean", "--mean R,G,B"},
		{NN_CARD_STD, "std", "--std R,G,B"},
	};
	for (size_t i = 0; i < sizeof(need_flags) / sizeof(need_flags[0]); i++) {
		unsigned bit = need_flags[i].bit;
		/* a class count alone comes with the names */
		if (!(missing & bit) && !(bit == NN_CARD_NAMES && (missing & NN_CARD_CLASSES)))
			continue;
		size_t n = strlen(what);
		snprintf(what + n, sizeof(what) - n, "%s%s", n ? ", " : "",
			 need_flags[i].what);
		n = strlen(flags);
		snprintf(flags + n, sizeof(flags) - n, "%s%s", n ? " " : "",
			 need_flags[i].flag);
	}
	const int norm = (missing & (NN_CARD_MEAN | NN_CARD_STD)) != 0;
	cli_error("%s: '%s' does not record its %s (weights from an older "
		  "imshard-train or another program): pass %s%s",
		  cmd, weights, what, flags,
		  norm ? " (imshard-train's defaults were --mean "
			 "123.675,116.28,103.53 --std 58.395,57.12,57.375)"
		       : "");
	nn_model_card_release(card);
	return CLI_EXIT_USAGE;
}

const char *model_run_precision(const char *cmd, const st_file *f, int quiet,
				char *out, size_t cap, ims_error *err)
{
	snprintf(out, cap, "fp32");
	const char *s = st_metadata_get(f, "options");
	int oom = 0;
	cJSON *j = s ? ims_json_parse(s, strlen(s) + 1, 1, NULL, &oom) : NULL;
	if (oom) {
		/* not fp32 without a word */
		ims_fail(err, IMS_ENOMEM, "cannot read '%s': out of memory for its run's "
			 "options (the precision it trained in)", st_path(f));
		return NULL;
	}
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "precision");
	if (cJSON_IsString(p) && nn_precision_of(p->valuestring) >= 0)
		snprintf(out, cap, "%s", p->valuestring);
	cJSON_Delete(j);
	if (strcmp(out, "fp32"))
		cli_info(quiet,
			 "%s: in %s, the precision its run trained and validated "
			 "in (--precision fp32 for full precision)",
			 cmd, out);
	return out;
}

int model_one_process(const cli_command *cmd, const char *what)
{
	int rank;
	const int world = dp_launched(&rank);
	if (world < 2)
		return 0;
	/* every rank gets here: rank 0 says it. The others end with 0:
	 * mpirun ends the job at the first non-zero exit, which could
	 * otherwise kill rank 0 before its line is out (no MPI here to
	 * wait on); the job still exits with rank 0's status. */
	if (rank != 0)
		return -1;
	return cli_usage_error(cmd,
			       "started as %d ranks (mpirun): %s runs as one "
			       "process, and each rank would %s; run it without "
			       "mpirun",
			       world, cmd->name, what);
}
