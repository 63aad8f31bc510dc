/*
 * train.h - the data-parallel training loop behind imshard-train: reads
 * packed splits through the loader (augment/), trains a model of the
 * network library (train/nn.h) on the ranks of a job (train/dp.h), and
 * writes metrics, a summary and checkpoints (train/checkpoint.h).
 *
 * Every rank runs the same loop on its share of each epoch: next batch,
 * forward, loss, backward, allreduce of the gradients, optimiser update.
 * Ranks start from rank 0's weights and apply identical updates, so they
 * stay identical; the loader gives every rank the same number of batches.
 *
 * The loop prints nothing: what a person would read (the run's shape,
 * progress, validation, skipped fp16 steps, what --init loaded) comes
 * through nn_train_events, and the program decides what to print (only
 * the loader, on rank 0 with o->verbose, says once on stderr where its
 * batches live). Tests inject faults through nn_train_hooks, which the
 * program fills; the loop reads no environment variable.
 *
 * Caveats:
 *   - One thread per process calls nn_train_run; it runs OpenMP teams
 *     (compute) and the loader's producer thread inside.
 *   - Event callbacks are called on every rank, from the calling thread,
 *     during nn_train_run; what they are given lives for the call only.
 *   - Errors: nn_train_run returns 0 or a negative IMS_E* code
 *     (common/common.h) and fills the ims_error it is given.
 */
#ifndef IMSHARD_TRAIN_H
#define IMSHARD_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "train/checkpoint.h"
#include "train/dp.h"
#include "train/nn.h"
#include "train/optim.h"
#include "train/schedule.h"

/* ---- what the loop reports ------------------------------------------------ */

/* The run's shape, once, before the first step. The same on every rank. */
typedef struct nn_train_plan {
	int classes;               /* from the splits' class list */
	int world;                 /* ranks */
	int threads;               /* compute threads per rank */
	int loader_threads;        /* the loader's decode threads per rank */
	uint64_t steps_per_epoch;  /* per rank, the same on every rank */
	uint64_t total_steps;      /* of the whole run: steps_per_epoch x
				      --epochs, or for a resumed run the steps
				      done plus those left at its settings */
	uint64_t records_per_rank; /* training records in a rank's share of
				      an epoch */
	uint64_t dropped;          /* training records unused per epoch, over
				      all ranks: dropped_ranks + dropped_batch */
	uint64_t dropped_ranks;    /* left out of the shares so ranks are equal */
	uint64_t dropped_batch;    /* in the ranks' short last batches (every
				      rank trains whole batches only) */
	int validation;            /* 1: a --val split is validated each epoch */
	double lr_peak;            /* --lr, scaled by the rank count unless
				      --no-lr-scaling (and for a run resumed
				      with another batch size, by batch /
				      lr_batch) */
	int lr_batch;              /* the batch per rank --lr is for: the
				      run's first part's */
	nn_model_memory activations; /* the model's planned activation memory */
	int channels_last;         /* 1: the model stores its activations
				      NHWC (--channels-last) */
	int cuda_graphs;           /* 1: passes recorded and replayed */
	const char *cuda_graphs_off; /* why not, when 0 */
	const char *device_stack;  /* on a device: the GPU, driver, runtime,
				      cuDNN and cuBLAS, each version and the
				      file it was loaded from
				      (nn_ctx_describe); NULL on the CPU */
} nn_train_plan;

/*
 * Every --log-every steps and at each epoch's end (when steps > 0): the
 * steps since the last report. Loss and accuracy are over every rank's
 * samples; times and images are this rank's, but for images_per_s_total.
 */
typedef struct nn_train_progress {
	int rank, world;
	int epoch;               /* from 0 */
	uint64_t step;           /* steps done, a resumed run's included */
	uint64_t total_steps;    /* of the whole run (--epochs) */
	int steps;               /* in this report */
	uint64_t images;         /* this rank's samples in this report */
	double seconds;          /* wall time of this report's steps */
	double loss_sum;         /* summed loss over all ranks' samples */
	double correct;          /* of those, top-1 hits */
	double samples;          /* all ranks' samples */
	double scored;           /* of those, the samples in loss_sum and
				    correct: all but fp16's steps whose
				    forward pass overflowed (0: no loss to
				    report) */
	double lr;               /* the rate of the last step */
	double wait_s, compute_s, comm_s; /* this rank's data wait, compute
					     and communication time */
	double loss_scale;       /* fp16's scale now (1 otherwise) */
	uint64_t skipped_steps;  /* fp16 steps skipped so far */
	double images_per_s;     /* this rank's: images / seconds */
	double images_per_s_total; /* all ranks': the samples summed over ranks
				      (allreduced with the loss) / seconds */
	double elapsed_s;        /* since this process's first step (a resumed
				    run's earlier part not included) */
	double eta_s;            /* to the run's last step (--epochs, or
				    --max-steps when sooner) at this process's
				    mean pace so far, validations and
				    checkpoints included; -1 when unknown */
} nn_train_progress;

/* After each epoch's validation: every record once over all ranks. */
typedef struct nn_train_validation {
	int epoch;               /* from 0 */
	uint64_t step;
	double top1, top5;
	double loss;             /* mean over the records */
	uint64_t records;        /* records evaluated: the split's, less any
				    that could not be loaded */
	uint64_t bad_records;    /* records that could not be loaded (left
				    out, and reported through
				    records_replaced) */
	double seconds;          /* the validation's wall time */
} nn_train_validation;

/*
 * --resume: where the run goes on, and what changed. A resumed run takes
 * the rest of its epoch from the same global position of the epoch's
 * order, whatever its rank count and batch size; the learning-rate
 * schedule is re-derived over the data (a fraction of the epochs) and
 * the peak rate scaled with the global batch (unless --no-lr-scaling).
 * Strings live for the call.
 */
typedef struct nn_train_resume {
	const char *path;        /* the checkpoint */
	int epoch;               /* from 0 */
	uint64_t step;           /* steps done */
	uint64_t position;       /* positions of the epoch's order trained
				    (all ranks' samples) */
	int complete;            /* 1: the run is complete (every epoch
				    trained), 2: --max-steps is reached;
				    nothing is trained or written */
	int verified;            /* 1: the checkpoint's checksum matched; 0:
				    it has none (written before checkpoints
				    had one) */
	int world_was, batch_was, world, batch;  /* ranks, batch per rank */
	double lr_peak_was, lr_peak;
	uint64_t rest_steps;     /* steps left in this epoch at this run's
				    settings */
	uint64_t rest_unused;    /* records of this epoch's rest that no
				    step takes (they do not fill a batch on
				    every rank) */
	const char *changed;     /* the other options that differ from the
				    checkpoint's run, "name was -> now, ..."
				    ("" when none) */
} nn_train_resume;

/* Records that could not be read or decoded: in training each was
 * replaced by another record of the epoch (batches stay full, ranks
 * equal), in validation left out. Over all ranks. */
typedef struct nn_train_bad {
	int epoch;               /* from 0 */
	int validation;          /* 1: in the validation after the epoch */
	uint64_t count;          /* in this epoch (or validation) */
	uint64_t total;          /* training: in the whole run so far */
	const uint64_t *indices; /* the first few, ascending */
	int listed;
	const char *reason;      /* why one of them could not be loaded, one
				    line naming it (raw bytes from outside:
				    escape before printing), or "" */
} nn_train_bad;

/*
 * Callbacks for what happens during a run (NULL members are skipped), in
 * this order: initialised (--init) and resumed (--resume), then started,
 * then progress and validated through the epochs, with step_skipped
 * (fp16), warning and rank_note where they happen. Every rank calls them:
 * all but progress and rank_note carry the same values on every rank (a
 * program prints rank 0's); progress carries the rank's own times; a
 * rank_note concerns its rank alone.
 */
typedef struct nn_train_events {
	void (*started)(void *ctx, const nn_train_plan *p);
	/* --init's weights loaded from path: what was taken, kept, ignored
	 * (r lives for the call) */
	void (*initialised)(void *ctx, const char *path, const nn_load_report *r);
	/* --resume: where and how the run goes on (also when there is
	 * nothing left to train: r->complete) */
	void (*resumed)(void *ctx, const nn_train_resume *r);
	void (*progress)(void *ctx, const nn_train_progress *p);
	void (*validated)(void *ctx, const nn_train_validation *v);
	/* fp16: step (from 1) overflowed at loss scale `scale`, in its
	 * gradients (forward 0) or in its forward pass (forward 1: the loss
	 * was not finite; the batch-norm statistics it left were put back);
	 * the step was skipped and the scale is now new_scale */
	void (*step_skipped)(void *ctx, uint64_t step, double scale,
			     double new_scale, int forward);
	/* after an epoch's training, or its validation, in which records
	 * could not be loaded (not called when there were none) */
	void (*records_replaced)(void *ctx, const nn_train_bad *b);
	/* a doubt about the run's input or settings that does not stop it
	 * (the loader's: shard-owning mode on records in list order); one
	 * line without a newline, the same on every rank; names in it are
	 * raw bytes from outside (escape before printing) */
	void (*warning)(void *ctx, const char *msg);
	/* something this rank goes on without (NVML missing: no gpu lines);
	 * one line naming the rank, without a newline */
	void (*rank_note)(void *ctx, const char *msg);
	/* a warning of this rank's own (an earlier run's metrics.jsonl
	 * removed by --force from a --log-dir that is not rank 0's folder);
	 * one line naming the rank, without a newline */
	void (*rank_warning)(void *ctx, const char *msg);
	void *ctx;
} nn_train_events;

/*
 * Fault injection for tests of what the loop does with a bad batch or an
 * overflow: the program fills it (imshard-train from IMSHARD_INJECT_* and
 * IMSHARD_TEST_HOST_STAGE, docs/TRAINING.md) and the loop reads nothing
 * from the environment. Zero: no fault.
 */
typedef struct nn_train_hooks {
	/* the first pixel of this step's batch (from 1) is made NaN, before
	 * its copy to a device is queued */
	uint64_t nan_step;
	/* after this step's (from 1) gradient allreduce the last element
	 * of the last trained tensor (the head's, trained in every mode;
	 * not the block's padding, which backward never rewrites) is +Inf,
	 * as an
	 * overflow in backward would leave it; --precision fp16 only (only
	 * fp16 checks gradients) */
	uint64_t inf_grad_step;
	/* 1: the device loop (batches staged into two slots, the next one
	 * taken while a step runs, logits read back) on the CPU, host memory
	 * as its device (nn_ctx_init_cpu_staged); one rank. Every
	 * --precision runs as on the plain cpu (fp16 with its loss scaling,
	 * gradient check and skipped steps), so the twin matches the plain
	 * loop bit for bit in each */
	int host_stage;
	/* called with the record indices of every batch this rank trains
	 * (after replacements), before its step runs: tests check which
	 * records a run saw; NULL: none */
	void (*trained)(void *ctx, int rank, int epoch, uint64_t step,
			const uint64_t *indices, int count);
	void *trained_ctx;
	/* write number N (from 1) of this rank to metrics.jsonl fails with
	 * ENOSPC, as on a full disk; 0: none */
	uint64_t metrics_fail_write;
	/* bytes the memory check takes as free, instead of the machine's
	 * MemAvailable and cgroup limit; 0: the machine's */
	uint64_t mem_room;
	/* called as this rank reaches a part of the run a fault in which
	 * tests check: "validation" (after an epoch's training), "the
	 * checkpoint" (once the ranks have averaged their statistics for
	 * it, while rank 0 writes it; only with a checkpoint folder) and
	 * "the run's end" (before the summary); NULL: none */
	void (*reached)(void *ctx, int rank, const char *phase);
	void *reached_ctx;
} nn_train_hooks;

/* ---- the run -------------------------------------------------------------- */

/* What imshard-train runs, in five groups; every field is documented by
 * its --flag. */

/* What the steps read: the splits and how a sample is made. */
typedef struct nn_train_data {
	const char *train_manifest;  /* --train */
	const char *val_manifest;    /* --val; NULL: no validation */
	int size;                 /* --size, square input side (224) */
	const char *augment;      /* --augment (flip: random-resized-crop and
				     a horizontal flip) */
	double val_crop_frac;     /* --val-crop-frac: validation resizes the
				     shorter side to size / F and crops the
				     centre (0.875); also training's geometry
				     under --augment norrc */
	float mean[3], std[3];    /* --mean, --std (ImageNet's) */
	int loader_threads;       /* --loader-threads: decoding (0 = --threads
				     when given, else the cores this process
				     may run on) */
	int shard_owning;         /* --shard-owning */
	int64_t max_bad_records;  /* --max-bad-records: fail once more
				     training records of one epoch than this
				     could not be loaded (-1 = no limit) */
	int synthetic;            /* --synthetic: a fixed random batch per rank
				     instead of --train's records */
} nn_train_data;

/* The network, its starting weights and what of it trains, and where
 * and how it computes. */
typedef struct nn_train_net {
	const char *model;        /* --model (convnet7) */
	const char *device;       /* --device cpu|cuda (cpu) */
	int threads;              /* --threads: compute (0 = OpenMP's default:
				     OMP_NUM_THREADS, else the cores this
				     process may run on) */
	const char *precision;    /* --precision fp32|bf16|fp16 (fp32): 16-bit
				     activations, fp32 sums and weights, on
				     either device */
	const char *cudnn_algo;   /* --cudnn-algo benchmark|heuristic|
				     deterministic (NULL: benchmark) */
	int tf32;                 /* --tf32: 1 on, 0 off, -1 the device's
				     default (on from compute capability 8) */
	const char *channels_last; /* --channels-last auto|on|off (NULL:
				     auto): NHWC activations (nn_ctx) */
	const char *cuda_graphs;  /* --cuda-graphs auto|on|off (NULL: auto):
				     a step's passes recorded once and
				     replayed (train/loop/graphs.c) */
	const char *init;         /* --init weights.safetensors (recorded as
				     "init" in summary.json and checkpoints:
				     nn_train_run) */
	int init_partial;         /* --init-partial: --init may hold fewer
				     than the backbone's tensors */
	int reset_head;           /* --reset-head: --init's head is not
				     loaded, even with the same shape */
	int freeze_backbone;      /* --freeze-backbone: needs init or
				     out.resume (a resumed run is frozen
				     only when this is set again) */
	int freeze_bn;            /* --freeze-bn */
} nn_train_net;

/* How long and how fast it learns: batch, optimiser, schedule. */
typedef struct nn_train_optim {
	int epochs;               /* --epochs (1) */
	int64_t max_steps;        /* --max-steps (0 = no limit) */
	int batch_size;           /* --batch-size, per rank (32) */
	double lr;                /* --lr, for one rank (0.1) */
	int no_lr_scaling;        /* --no-lr-scaling */
	int optimizer;            /* --optimizer: nn_optim_kind (sgd) */
	double momentum;          /* --momentum (0.9, SGD) */
	int nesterov;             /* --nesterov */
	double weight_decay;      /* --weight-decay (1e-4) */
	int no_bn_bias_decay;     /* --no-bn-bias-decay */
	double warmup_epochs;     /* --warmup-epochs (0) */
	int schedule;             /* --schedule: nn_lr_decay (cosine) */
	float label_smoothing;    /* --label-smoothing (0) */
} nn_train_optim;

/* What the run leaves and says: checkpoints, metrics, progress. */
typedef struct nn_train_out {
	const char *checkpoint_dir; /* --checkpoint-dir */
	int resume;               /* --resume */
	int force;                /* --force: a new run in folders that hold
				     an earlier run's checkpoint or logs
				     removes them first (else refused) */
	int64_t checkpoint_every; /* --checkpoint-every steps (0 = epoch ends) */
	const char *log_dir;      /* --log-dir */
	int log_every;            /* --log-every steps (10) */
	int quiet;                /* --quiet: nothing printed (events still
				     come) */
	int verbose;              /* --verbose: the loader says on stderr
				     where its batches live (rank 0) */
	int profile;              /* --profile K: steps 3 to K + 2 of this
				     run timed piece by piece, each piece
				     waited for (slower; the same results):
				     nn_train_result.profile and
				     summary.json (0 = off) */
	/* set non-zero (by a signal handler) to stop the run early and
	 * cleanly: read by every step, and the ranks stop after the same
	 * step, the first at which any rank saw it; NULL: never */
	const volatile int *stop;
} nn_train_out;

/* How the ranks talk. */
typedef struct nn_train_comm {
	double bucket_mb;         /* --bucket-mb: gradient allreduce buckets, MiB (1024) */
	double collective_timeout; /* --collective-timeout seconds (600; 0 = none) */
} nn_train_comm;

typedef struct nn_train_opts {
	nn_train_data data;
	nn_train_net net;
	nn_train_optim optim;
	nn_train_out out;
	nn_train_comm comm;
	uint64_t seed;            /* --seed (1): weights, data order, augment */
	const nn_train_events *events; /* what to tell the program (NULL:
					  nothing) */
	const nn_train_hooks *hooks;   /* fault injection for tests (NULL:
					  none) */
} nn_train_opts;

/* Fills o with the defaults in parentheses above (ImageNet's mean and
 * std; events and hooks NULL). */
void nn_train_opts_init(nn_train_opts *o);

/* A resumed run's totals are the whole run's: the earlier parts' come
 * from the checkpoint. */
/* Where the profiled steps' time went (--profile), this rank's, summed
 * over them: each layer kind's forward and backward, the loss, the
 * gradient allreduce and the update, and the steps' whole compute (data
 * wait left out). */
typedef struct nn_train_profile {
	uint64_t steps;            /* steps timed; 0: no profile */
	nn_profile layers;
	double loss_s, allreduce_s, update_s;
	double step_s;
} nn_train_profile;

typedef struct nn_train_result {
	int nothing_to_do;         /* resumed with nothing left: 1 the run is
				      complete, 2 --max-steps is reached;
				      nothing was trained or written but
				      summary_written's */
	int summary_written;       /* nothing_to_do, and LOGDIR/summary.json,
				      which the run lacked (lost at its end,
				      after its last checkpoint), written */
	int epochs_done;
	uint64_t steps, images;    /* images over all ranks */
	double wall_s;             /* from the start of nn_train_run */
	double startup_s;          /* set-up before the first batch */
	double train_s;            /* wall time excluding start-up */
	double images_per_s;       /* images / train_s, all ranks */
	double busy_s;             /* this rank's compute time */
	double busy_ratio;         /* max / min busy time over ranks */
	double wait_s;             /* this rank's time waiting for data */
	double val_top1, val_top5; /* last validation (0 without --val) */
	uint64_t val_records;
	double best_top1;
	int best_epoch;            /* from 0; -1 before any validation */
	double best_wall_s;        /* train_s clock when best_top1 was reached */
	double loss_scale;         /* fp16's loss scale at the end (1 otherwise) */
	uint64_t skipped_steps;    /* fp16 steps skipped for overflowed
				      gradients, a resumed run's included */
	uint64_t bad_records;      /* training records that could not be
				      loaded (each replaced) */
	uint64_t val_bad_records;  /* in the last validation (left out) */
	nn_train_profile profile;  /* --profile's, rank 0's on rank 0 */
	/* set also when nn_train_run fails at a point the ranks reach
	 * together (the set-up's agreement: options, splits, checkpoints,
	 * and what each rank set up alone; a NaN or infinite training
	 * loss; a stop, o->out.stop; a rank that could not load its batch
	 * or its share of validation, whose loader gave up; an epoch past
	 * --max-bad-records, each rank naming its own records): how many ranks
	 * failed there, whether this one did, and
	 * whether all did with the same message. No rank then waits in a
	 * collective, so the caller may end without dp_abort, printing
	 * rank 0's line alone when failed_alike. All 0 when this rank
	 * failed alone: the caller must dp_abort. */
	int failed_ranks, failed_here, failed_alike;
} nn_train_result;

/*
 * Trains as o says, as rank dp_rank(comm) of dp_world(comm) (comm from
 * dp_init; every rank calls this with the same options), telling
 * o->events what happens. Writes LOGDIR/metrics.jsonl (every rank) and
 * LOGDIR/summary.json (rank 0) when o->log_dir is set, and
 * CHECKPOINT_DIR/checkpoint.safetensors (rank 0) every o->checkpoint_every
 * steps and at each epoch's end. A run started from o->net.init records
 * that file (its path escaped as imshard prints names, its size and the
 * CRC-32C of all its bytes, what was loaded, missing, ignored and
 * re-initialised, and the flags that decided it) as "init" in
 * summary.json and in every checkpoint's "run" metadata, where a resumed
 * part takes it from (docs/TRAINING.md, "Fine-tuning"); a checkpoint
 * without it resumes all the same. --precision fp16 scales the loss gradient
 * and skips steps whose gradients overflow (train/loss_scale.h); a NaN or
 * Inf loss ends the run in every precision. res (caller-owned) is filled
 * on success. A rank that fails returns the error; the caller should
 * dp_abort so the others do not wait forever, unless res->failed_ranks
 * says every rank failed there together (above).
 * A resumed run continues at the checkpoint's position in its epoch with
 * this run's ranks and batch size (nn_train_resume); settings that change
 * what the position means (seed, model, size, classes, the training
 * split, --epochs when the schedule spans them, the ranks under
 * --shard-owning) are refused with a message naming the setting and both
 * values. Resuming a run with nothing left to train changes no file:
 * res->nothing_to_do says why; but a --log-dir with the run's
 * metrics.jsonl and no summary.json (the run was lost at its end, after
 * its last checkpoint) gets it then
 * (res->summary_written). The log and checkpoint folders are locked
 * (flock on imshard-train.lock in each) for the run: a second trainer in
 * either is refused. A metrics line that cannot be written ends the run.
 * o->out.stop set (a signal): the ranks agree on it with the step's
 * statistics and stop after that step; its checkpoint is written (a
 * step that ends an epoch is validated first), summary.json is not (the
 * run is not done: --resume goes on from the checkpoint), and every rank
 * returns IMS_EINTR with failed_alike set; at the run's last step, or
 * max_steps', the run ends as it would have (summary.json, 0). Set
 * before the first step, nothing is trained and no log is started.
 * Errors: IMS_EINTR (o->out.stop), IMS_EINVAL (options, class lists of
 * the splits disagree, NaN/Inf
 * training or validation loss, a setting a resumed run may not change,
 * --init loading too little, more bad records than --max-bad-records, a
 * hook this run cannot honour), IMS_EEXIST (a folder locked by another
 * trainer), IMS_ENOMEM (a memory limit too small for OpenBLAS's buffers,
 * nn_ctx_reserve_blas), IMS_EIO (metrics.jsonl), IMS_EUNSUPPORTED (device
 * or precision this build lacks; bf16 and fp16 on the cpu), the
 * loader's, checkpoints', MPI's and the device's.
 */
int nn_train_run(const nn_train_opts *o, dp_comm *comm, nn_train_result *res,
		 ims_error *err);

#endif
