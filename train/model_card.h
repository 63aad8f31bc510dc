/*
 * model_card.h - what a trained model needs beside its weights to be used:
 * the model's name, its classes (count and names), the input it was
 * trained on (side in pixels, per-channel mean and std in pixel units,
 * the validation crop fraction) and the input layout. imshard-train
 * stores it in every checkpoint's metadata; `imshard eval`, `predict` and
 * `export` read it back, so a checkpoint is all they need. Part of the
 * checkpoint library (imshard_checkpoint), beside train/checkpoint.h.
 *
 * Metadata keys (safetensors "__metadata__", strings; docs/TRAINING.md,
 * "Checkpoints and resuming"):
 *   model          "convnet7", "resnet18", "resnet50" or "vgg16"
 *   classes        class count, decimal
 *   size           input side in pixels (square inputs), decimal
 *   mean, std      "R,G,B" in pixel units (0..255), as --mean / --std
 *   val_crop_frac  the validation transform's crop fraction: the shorter
 *                  side is resized to round(size / frac), then the centre
 *                  size x size is taken
 *   input_layout   "NCHW" (planes R, G, B of float32 (pixel - mean) / std)
 *   class_names    a JSON array of the class names, label i = entry i
 * Checkpoints written before these keys existed hold only model, classes
 * and size; a reader says which of the rest are missing (have bits) and
 * the program asks for them (--classes, --mean, ...).
 *
 * Caveats:
 *   - Plain data owned by the caller (nn_model_card_init /
 *     nn_model_card_release); no thread shares one.
 *   - Functions return 0 or a negative IMS_E* code and fill the ims_error.
 */
#ifndef IMSHARD_MODEL_CARD_H
#define IMSHARD_MODEL_CARD_H

#include <stddef.h>

#include "common/common.h"
#include "train/nn.h"
#include "train/safetensors.h"

/* Which fields of a card are known (nn_model_card.have). */
enum {
	NN_CARD_MODEL = 1 << 0,
	NN_CARD_CLASSES = 1 << 1, /* the count */
	NN_CARD_SIZE = 1 << 2,
	NN_CARD_MEAN = 1 << 3,
	NN_CARD_STD = 1 << 4,
	NN_CARD_CROP = 1 << 5,
	NN_CARD_NAMES = 1 << 6,   /* class_names, `classes` of them */
	NN_CARD_ALL = (1 << 7) - 1
};

typedef struct nn_model_card {
	char model[32];
	int classes;
	int size;
	float mean[3], std[3];
	double val_crop_frac;   /* (0, 1] */
	char **class_names;     /* `classes` strings, owned by the card */
	unsigned have;          /* NN_CARD_* bits of the fields set */
} nn_model_card;

/* Zeroes c (nothing known). */
void nn_model_card_init(nn_model_card *c);
/* Frees the class names and zeroes c. c may be NULL. */
void nn_model_card_release(nn_model_card *c);

/*
 * Sets c's class names to copies of names[0 .. n) and its class count to
 * n. A name that is not valid UTF-8 (metadata must be) is stored with
 * each offending byte written as \xHH, as ims_escape prints it; the
 * stored names are what nn_model_card_name_eq compares against.
 * Errors: IMS_EINVAL (n < 1, an empty or NULL name), IMS_ENOMEM; c keeps
 * its old names then.
 */
int nn_model_card_set_names(nn_model_card *c, const char *const *names,
			    size_t n, ims_error *err);

/* 1 when a card's stored class name equals name as
 * nn_model_card_set_names would store it. */
int nn_model_card_name_eq(const char *stored, const char *name);

/*
 * Reads the keys above from f's metadata into c (released first): each
 * key present sets its field and have bit; absent keys leave them unset.
 * Errors (the message names the file and the key): IMS_ECORRUPT (a value
 * that does not parse: not a number, mean/std without three finite
 * values, std not above 0, a crop fraction outside (0, 1], class_names
 * not a JSON array of non-empty strings or of another length than
 * classes), IMS_EUNSUPPORTED (an input_layout other than NCHW, a model
 * this build does not know), IMS_ENOMEM; c is then empty.
 */
int nn_model_card_read(const st_file *f, nn_model_card *c, ims_error *err);

/*
 * The metadata entries of c's known fields, for nn_checkpoint_save:
 * t->kv is a NULL-terminated key, value, key, value, ... list valid until
 * nn_model_card_text_release (input_layout is written with any field).
 * Errors: IMS_ENOMEM.
 */
typedef struct nn_model_card_text {
	char classes[24], size[24], mean[80], std[80], crop[40];
	char *names_json;
	const char *kv[2 * 8 + 1];
} nn_model_card_text;

int nn_model_card_format(const nn_model_card *c, nn_model_card_text *t,
			 ims_error *err);
void nn_model_card_text_release(nn_model_card_text *t);

/*
 * Loads every tensor of model m from the safetensors file at path, for
 * inference: a checkpoint of imshard-train, an `imshard export` file, or
 * torchvision weights saved with safetensors.torch.save_file. Strict, as
 * PyTorch's load_state_dict(strict=True): every model tensor must be in
 * the file with the model's shape (floats from F32, F16, BF16 or F64;
 * counters from integers, as nn_checkpoint_load_init takes them), and
 * the file may hold nothing else but optimiser state ("optim.*").
 * Errors: st_open's, IMS_EINVAL (the first missing, misshapen or
 * unexpected tensor named, and how many there are: "the file was written
 * for another model or class count"), nn_checkpoint_load_init's (a
 * running variance below 0 or not finite among them); m is then partly
 * loaded at most (discard it).
 */
int nn_model_load_weights(const char *path, nn_model *m, ims_error *err);

/*
 * As nn_model_load_weights, from f, a file the caller opened (st_open)
 * and read its card from (nn_model_card_read): the weights loaded are
 * those of the card read, even when the file at its path is replaced
 * meanwhile. verified: 1 when the caller verified this open file already
 * (nn_checkpoint_verify, as it would before reading the card), so its
 * checksum is not computed again; 0: verified here. Messages name
 * st_path(f). f stays open, the caller's.
 */
int nn_model_load_weights_file(const st_file *f, nn_model *m, int verified,
			       ims_error *err);

#endif
