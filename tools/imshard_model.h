/*
 * imshard_model.h - what `imshard eval`, `predict` and `export` share.
 * These three use a trained network, so they live in their own program,
 * imshard-model, which links the training libraries (network, checkpoints,
 * data parallelism, the evaluation pass); `imshard` runs it for them
 * (imshard.c), so the data-side commands load no BLAS, MPI or CUDA.
 *
 * The model card (train/model_card.h) comes from the weights' metadata;
 * flags fill what older checkpoints and other programs' weights lack, and
 * may change the input (size, mean, std, crop) for an experiment.
 */
#ifndef IMSHARD_TOOLS_MODEL_H
#define IMSHARD_TOOLS_MODEL_H

#include "cli.h"
#include "train/model_card.h"
#include "train/safetensors.h"

/* The card flags of eval, predict and export. */
typedef struct model_flags {
	const char *model;   /* --model */
	const char *classes; /* --classes FILE */
	int size;            /* --size (0: not given) */
	const char *mean, *std;
	double crop;         /* --val-crop-frac (0: not given) */
	int quiet;
} model_flags;

#define MODEL_CARD_OPTIONS(f)                                                  \
	{"model", 0, CLI_STRING, &(f)->model, "NAME",                          \
	 "the model (convnet7, resnet18, resnet50, vgg16), for weights that do not record it", 0, 0}, \
	{"classes", 0, CLI_STRING, &(f)->classes, "FILE",                      \
	 "class names, for weights that do not record them: a classes.txt (one per line) or a split's NAME.json", 0, 0}, \
	{"size", 0, CLI_INT, &(f)->size, "PX",                                 \
	 "input side in pixels (default: the recorded one)", 1, 4096},         \
	{"mean", 0, CLI_STRING, &(f)->mean, "R,G,B",                           \
	 "normalisation mean, pixel units (default: the recorded one)", 0, 0}, \
	{"std", 0, CLI_STRING, &(f)->std, "R,G,B",                             \
	 "normalisation std, pixel units (default: the recorded one)", 0, 0},  \
	{"val-crop-frac", 0, CLI_DOUBLE, &(f)->crop, "F",                      \
	 "resize the shorter side to size / F, then crop the centre (default: the recorded one; 0.875 when none is)", 1e-3, 1}

/* The help paragraph on the card, for each command's details. */
#define MODEL_CARD_HELP                                                        \
	"Checkpoints of imshard-train record the model, the class names, the\n" \
	"input size, --mean/--std and the validation crop, so nothing else is\n" \
	"needed. For weights that lack some of them (checkpoints of older\n"   \
	"versions, torchvision weights) the command names the flags to pass:\n" \
	"--model, --classes FILE, --size, --mean, --std. --size, --mean, --std\n" \
	"and --val-crop-frac given for weights that record them replace the\n" \
	"recorded values (said on stderr).\n"

/*
 * Opens the weights file at path (st_open) and verifies it against its
 * checksum (nn_checkpoint_verify: a damaged card is then the damage it
 * is, not a wrong class name), once for the whole command: its card, its
 * run's options and its weights are all read from this open file, so a
 * file replaced meanwhile cannot pair one file's card with another's
 * weights. Returns 0 with *out to st_close, or CLI_EXIT_FAIL after a line
 * (*out NULL). cmd names the command in messages.
 */
int model_weights_open(const char *cmd, const char *path, st_file **out);
/*
 * Fills card from the weights file's metadata (sf, of model_weights_open;
 * messages name st_path(sf)) and the flags: f's values
 * for fields the file lacks, and for size, mean, std and crop also in
 * place of recorded ones (a line on stderr says so, unless f->quiet).
 * need: NN_CARD_* bits that must be known at the end (a missing crop
 * fraction is 0.875, said on stderr). Returns 0, CLI_EXIT_FAIL after a
 * line (the card does not read, a class list cannot be read) or
 * CLI_EXIT_USAGE after a line (a flag contradicts the file, or one is
 * needed: the line names every flag to pass). cmd names the command in
 * messages.
 */
int model_card_resolve(const char *cmd, const st_file *sf,
		       const model_flags *f, unsigned need, nn_model_card *card);

/*
 * The precision the weights' run trained and validated in, as its
 * checkpoint's options record it, into out: "fp32" for an export or
 * other programs' weights. A line on stderr (unless quiet) says so when
 * it is bf16 or fp16. Returns out, or NULL with err filled when memory
 * ran out reading the options.
 */
const char *model_run_precision(const char *cmd, const st_file *f, int quiet,
				char *out, size_t cap, ims_error *err);

/* "resnet18, 4 classes, 32 px" into buf. */
const char *model_card_describe(const nn_model_card *c, char *buf, size_t len);

/*
 * predict and export are one process. Started as several ranks (mpirun
 * -np N), each would do all the work and print or write all of it again,
 * so they refuse: 0 when this process runs alone, else CLI_EXIT_USAGE
 * after one line on rank 0 (what: what each rank would repeat) and -1 on
 * the other ranks, which should end with status 0 (mpirun ends the job
 * at the first non-zero exit, before rank 0 might have said why).
 */
int model_one_process(const cli_command *cmd, const char *what);

/* The subcommands of imshard-model. */
int cmd_eval(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
