/*
 * eval.h - evaluating a trained model on a packed split: top-1, top-5,
 * the mean loss, and per record what was predicted, from which per-class
 * accuracy and the confusion matrix follow. Part of the training loop's
 * library (imshard_train): the trainer's validation after each epoch and
 * `imshard eval` run the same pass (train/loop/evaluate.c), so a
 * checkpoint evaluated later gives the numbers its run logged.
 *
 * The pass: the split read through the loader with the validation
 * transform (resize the shorter side to round(size / val_crop_frac),
 * centre crop, normalise), each rank its share of the records in file
 * order, shares padded to equal length with the repeats flagged and not
 * counted, so over all ranks every record is counted once; the model in
 * evaluation mode (batch norm on its running statistics, no dropout);
 * each sample scored on the host (softmax cross-entropy, top-1, top-5);
 * sums and per-record rows combined over the ranks.
 *
 * Caveats:
 *   - Collective: every rank of comm calls nn_eval_run with the same
 *     options. One thread per process; it runs the loader's threads and
 *     the compute OpenMP team.
 *   - A record the loader cannot read or decode is replaced by another
 *     of the rank's share (augment/augment.h); each such record is
 *     counted once in bad_records and left out of the scores (the sample
 *     standing in for it is not counted: it has its own place).
 *   - Functions return 0 or a negative IMS_E* code and fill the
 *     ims_error.
 */
#ifndef IMSHARD_EVAL_H
#define IMSHARD_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "train/dp.h"
#include "train/model_card.h"
#include "train/safetensors.h"

typedef struct nn_eval_opts {
	const char *split;          /* NAME.json of the split (required) */
	const char *weights;        /* safetensors file: a checkpoint, an
				       export, torchvision weights (required;
				       loaded strictly: nn_model_load_weights) */
	const st_file *weights_file; /* weights, opened by the caller, or
				       NULL: opened here. A caller that read
				       the card from the file gives it, so
				       the weights are the card's even if
				       the path is replaced meanwhile; it
				       stays the caller's */
	int weights_verified;       /* 1: the caller verified weights_file
				       (nn_checkpoint_verify), so its
				       checksum is not computed again; 0
				       (default): verified on load */
	const nn_model_card *card;  /* the model and its input; every field
				       known (NN_CARD_ALL) */
	const char *device;         /* "cpu" (default) or "cuda" */
	const char *precision;      /* the activations' storage: "fp32"
				       (default), "bf16" or "fp16", with fp32
				       math either way, as imshard-train's
				       --precision: a run's own validation
				       ran in its precision */
	int batch_size;             /* per rank (32) */
	int threads;                /* compute and decoding threads per rank
				       (0: all cores) */
	int quiet;                  /* 1: no loader line about batch memory */
	const char *output;         /* the folder the caller will give
				       nn_eval_write, or NULL: checked on rank
				       0 before the pass (nn_eval_check_output),
				       so a folder it cannot write fails the
				       set-up, not the end of a long pass */
	/* after each of this rank's batches: batches done, of total (may be
	 * NULL; called on every rank) */
	void (*progress)(void *ctx, uint64_t batches, uint64_t total);
	void *ctx;
} nn_eval_opts;

/* Fills o with the defaults above (everything else NULL / 0). */
void nn_eval_opts_init(nn_eval_opts *o);

/*
 * What a pass found, over all ranks (every rank gets all of it). Arrays
 * are malloc'd and owned by the result (nn_eval_result_release).
 */
typedef struct nn_eval_result {
	int classes;
	int topk;               /* the "top-5": 5, or classes when fewer */
	uint64_t records;       /* samples counted (each record once) */
	double top1, top5;      /* fractions of records */
	double loss;            /* mean softmax cross-entropy */
	uint64_t bad_records;   /* records that could not be loaded, left
				   out (above) */
	double seconds;         /* the pass's wall time */
	/* per sample counted, in ascending record index: the record's index
	 * in the split, its label, the top-1 class (ties: the lowest index),
	 * 1 when the label is among the top `topk`, and the softmax
	 * probability of the top-1 class */
	uint64_t n;             /* = records */
	uint64_t *index;
	int32_t *label, *pred;
	uint8_t *in_topk;
	float *confidence;
	/* per class (classes entries): samples, top-1 and top-k hits */
	uint64_t *class_records, *class_top1, *class_topk;
	/* set also when nn_eval_run fails: whether this rank's set-up
	 * (split, classes, weights, loader, device) failed, on how many
	 * ranks it did, and whether every rank failed with the same message
	 * (the ranks agree on it before the pass); set too when a rank's pass
	 * failed (its loader gave up: every record it reads damaged), the
	 * ranks then ending the pass together, each failed one with its own
	 * message */
	int setup_failed_here, setup_failed_ranks, setup_failed_alike;
} nn_eval_result;

/* Frees what r holds and zeroes it; r may be NULL. */
void nn_eval_result_release(nn_eval_result *r);

/*
 * Evaluates o->weights (model o->card) on o->split as rank dp_rank(comm)
 * of dp_world(comm) and fills res (caller-owned; overwritten; released
 * on error but for the setup_failed fields). Before anything heavy, the
 * split's class names must equal the card's, in order. A set-up that
 * fails on some rank fails every rank before the pass starts: a rank
 * whose own set-up went well gets IMS_EINVAL "N of W ranks could not
 * set up", so a caller can print one line when all failed alike
 * (setup_failed_alike) and end without aborting the job.
 * Errors: IMS_EINVAL (options; a card with fields unknown; the split's
 * classes differ from the card's: the message names the first
 * difference), IMS_EEXIST (o->output cannot be written: above), IMS_EUNSUPPORTED (device this build or host lacks), the
 * manifest's and loader's (a missing or damaged split), the weights'
 * (nn_model_load_weights), the device's, MPI's, IMS_ENOMEM.
 */
int nn_eval_run(const nn_eval_opts *o, dp_comm *comm, nn_eval_result *res,
		ims_error *err);

/* Where an evaluation came from, for eval.json. */
typedef struct nn_eval_origin {
	const char *program;    /* "imshard eval" or "imshard-train" */
	const char *weights;    /* the weights file (NULL: none, the trainer) */
	const char *split;      /* the split's manifest */
	int epoch;              /* the trainer's epoch from 0; -1: none */
	uint64_t step;          /* the trainer's step (with epoch >= 0) */
	const char *precision;  /* the pass's (NULL: not written) */
} nn_eval_origin;

/*
 * Writes res into folder dir (made when missing, and removed again when
 * the write fails), each file atomically, eval.json last, every file's
 * text made before the first is written (memory running out changes
 * nothing):
 *   per_class.csv     class,name,records,top1_correct,top1,top5_correct,top5
 *   confusion.csv     the matrix: a header row "true/predicted,NAME...",
 *                     then one row per true class: its name and the count
 *                     predicted as each class
 *   predictions.csv   index,label,label_name,predicted,predicted_name,
 *                     confidence,top5 (one row per record)
 *   eval.json         origin, model, size, records, top1, top5, topk,
 *                     loss, bad_records, class names and per_class
 * (docs/TRAINING.md, "Evaluating"). Names are the card's; CSV fields are
 * quoted where they hold commas, quotes or line breaks.
 * Errors: IMS_EIO (message names the file), IMS_ENOMEM.
 */
int nn_eval_write(const char *dir, const nn_eval_result *res,
		  const nn_model_card *card, const nn_eval_origin *origin,
		  ims_error *err);

/*
 * Whether nn_eval_write could write into dir, as far as can be told
 * before: dir is a folder or is missing and can be made (made and
 * removed again here; nn_eval_write makes it), none of the four files'
 * names is a folder (their rename would fail), eval.json is not a
 * split's manifest (split 'eval' packed into dir, which the evaluation
 * would replace), and a file can be created in dir (tried with
 * eval.json's temporary, removed at once). Makes and changes nothing
 * else. Errors: IMS_EEXIST (the message names the file or folder in the
 * way), IMS_EIO (a file at one of the names that cannot be read, dir
 * cannot be made, or no file can be created in it: the message names it
 * and the cause), IMS_ENOMEM.
 */
int nn_eval_check_output(const char *dir, ims_error *err);

/*
 * Images of a training split found in another split (train/loop/
 * overlap.c): every record of the other split known by its header (its
 * payload's CRC-32C and length; no payload page is read), the headers of
 * at most NN_OVERLAP_SAMPLE training records spread over their split, and
 * a pair that agrees compared byte for byte. The trainer warns with it
 * when --val holds images of --train, imshard eval when its split holds
 * images of the split the weights were trained on.
 */
#define NN_OVERLAP_SAMPLE 1024
typedef struct nn_overlap {
	uint64_t sampled;       /* training records looked at */
	uint64_t shared;        /* of them, those found in the other split */
	uint64_t train_records, records; /* the two splits' */
	uint64_t found;         /* the other split's records found: all of
				   them when every training record was
				   looked at */
	uint64_t train_index, index; /* the first pair found */
} nn_overlap;

/* What nn_eval_train_overlap could tell (*found). */
enum {
	NN_TRAIN_UNRECORDED, /* the weights record no training split */
	NN_TRAIN_SAME,       /* split holds its very records (equal digests) */
	NN_TRAIN_SEARCHED,   /* split searched for its images: see out */
	NN_TRAIN_MISSING     /* not searched: no split of the recorded digest
				at the recorded path (train; "" when none is
				recorded) */
};

/*
 * What split holds of the split weights were trained on, as far as the
 * weights' metadata tells (imshard-train's checkpoints record the training
 * split's record count, digest and path), into *found (NN_TRAIN_*): the
 * same records wherever split lies; else, when the recorded path still
 * leads to a split of the recorded digest (the split trained on, not
 * whatever lies there now), out->shared > 0 when split holds images of it
 * (out zeroed when nothing was compared). train (train_cap bytes)
 * receives the recorded path. Records that cannot be read are passed over
 * (a pass over the split names them). Errors: IMS_ENOMEM, IMS_ECHANGED
 * (a shard changed while read).
 */
int nn_eval_train_overlap(const st_file *weights, const char *split, int *found,
			  nn_overlap *out, char *train, size_t train_cap,
			  ims_error *err);

/* One line into msg (cap bytes) saying what ov found: "<flag>'<split>'
 * holds images of the training split '<train>': N of its M records are
 * byte for byte training records (record I is training record J)", N
 * "about N (from ... looked at ...)" when it is an estimate. */
void nn_overlap_say(const nn_overlap *ov, const char *train, const char *split,
		    const char *flag, char *msg, size_t cap);

#endif
