/*
 * loop_internal.h - the training loop's state and the functions its files
 * share (train/train.h is the public side). Each file has one job:
 *   trainer.c   nn_train_run: set-up, the epochs, the end of the run
 *   setup.c     options, classes, loaders, the --synthetic batch, model,
 *               optimiser and schedule, gradient buckets
 *   step.c      one step (next batch, forward, loss, backward,
 *               allreduce, update) and one epoch of them
 *   graphs.c    the step's passes recorded once and replayed (CUDA graphs)
 *   stage.c     batches on a device: staging slots, the next batch taken
 *               ahead, logits read back, the loader's pinned memory
 *   validate.c  validation
 *   evaluate.c  the evaluation pass (validation's and nn_eval_run's)
 *   eval_files.c nn_eval_write: per-class, confusion, predictions files
 *   resume.c    checkpoint glue: saving, resuming (what a resumed run
 *               may change, and what it is refused)
 *   history.c   what earlier parts of a resumed run did, carried in the
 *               checkpoint for the summary
 *   records.c   damaged records met in training and validation
 *   overlap.c   --val's images that --train holds too, byte for byte
 *   agree.c     every rank started with the same options and splits
 *   guard.c     the run's folders locked against a second trainer, and
 *               OpenBLAS's memory reserved before the first step
 *   metrics.c   metrics.jsonl, summary.json and the progress events
 */
#ifndef IMSHARD_LOOP_INTERNAL_H
#define IMSHARD_LOOP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "augment/augment.h"
#include "train/gpumon.h"
#include "train/eval.h"
#include "train/loss_scale.h"
#include "train/model_card.h"
#include "train/optim.h"
#include "train/schedule.h"
#include "train/train.h"

/* The ranks: MPI for host tensors and statistics, NCCL for a device's. */
typedef struct loop_ranks {
	dp_comm *comm;
	int rank, world;
	dp_buckets *buckets; /* gradients over MPI, overlapping backward */
	dp_nccl *nccl;       /* several ranks on devices */
	int averaged;        /* the model's running statistics are the
				ranks' average (validate.c; every step's
				allreduce makes them so), until the next
				step's forward pass */
} loop_ranks;

/* Where batches come from. */
typedef struct loop_data {
	aug_loader *train, *val;
	int classes;
	uint64_t steps_per_epoch; /* of a whole epoch, at this run's ranks and
				     batch */
	/* the training split, as a resumed run checks it: its name, record
	 * count and a digest of its shards' digests */
	char train_name[256];
	uint64_t train_records, train_digest;
	/* the validation split's, for the ranks' agreement and for a
	 * resumed run, whose best validation compares epochs scored on it
	 * (0 and "" without one) */
	char val_name[256];
	uint64_t val_records, val_digest;
	/* the training split's classes without a record (its manifest's
	 * counts), and the first few as "4 'name', ..." for the warning */
	size_t unseen_classes;
	char unseen[512];
	nn_overlap overlap; /* rank 0's: --val's images in --train */
	/* --synthetic: the one batch every step trains on (host), and its
	 * device copy on a staging backend */
	float *synth_x;
	int32_t *synth_labels;
	uint8_t *synth_padded;
	uint64_t *synth_indices;
	float *synth_dev_x;
	int32_t *synth_dev_labels;
} loop_data;

/* A device run's batches (stage.c); all NULL / -1 on the CPU backend. */
typedef struct loop_stage {
	nn_stage *stage;     /* batches copied to the device */
	int slot;            /* the slot the next batch goes to */
	/* the next batch, taken from the loader while this step computes,
	 * its copy queued in slot ahead_slot (-1: none taken); the loader
	 * then reuses the current batch's memory, so its labels are kept */
	aug_batch ahead;
	int ahead_taken, ahead_rc, ahead_slot;
	ims_error ahead_err; /* why it could not be taken (ahead_rc < 0) */
	/* the batch each loader (train, val) lent last: given back, and so
	 * refilled, at its next aug_loader_next or epoch start */
	const void *lent[2];
	int32_t *held_labels;
	float *host_logits;  /* logits read back, batch x classes */
	nn_ctx hctx;         /* host context: validation's loss */
	int hctx_ok;
	/* fp32 and bf16 on a device: the steps' loss and top-1 summed in
	 * device memory, read only when an interval is reported (or looked
	 * at before a checkpoint), so a step never waits for the device */
	nn_tally *tally;
	int defer_loss;
} loop_stage;

/* What the run writes and tells (metrics.c). */
typedef struct loop_log {
	nn_train_events ev;  /* the caller's, or all NULL */
	int metrics_fd;      /* LOGDIR/metrics.jsonl, -1 without --log-dir */
	int owns_dir;        /* this rank locks --log-dir and starts its
				metrics.jsonl: rank 0, and a rank whose folder
				is not rank 0's (node-local storage; guard.c) */
	char metrics_path[4096];
	uint64_t metrics_writes; /* this rank's, for hooks.metrics_fail_write */
	nn_gpumon *gpumon;   /* NVML, NULL when absent: no gpu lines */
	int device;          /* this rank's GPU (CUDA ordinal) */
	char stack[1536];    /* nn_ctx_describe's line; "" on the CPU */
	double t_run;        /* when nn_train_run started */
	double t_start;      /* training clock's zero: after start-up, moved
				back by earlier parts' training time */
	double t_part;       /* when this part's training started */
	uint64_t step0;      /* the step this part started at */
	uint64_t step_end;   /* the run's last step: the ETA's goal */
	int loader_threads;  /* the training loader's decode threads */
	double busy_s, comm_s; /* this rank's compute and communication */
	double val_s, ckpt_s;  /* validation and checkpoint time */
	uint64_t ckpts;        /* checkpoints written, all parts */
	nn_train_profile prof; /* --profile's sums */
} loop_log;

/* Where a run, or its resumed part, starts. */
typedef struct loop_start {
	int epoch;           /* from 0 */
	uint64_t position;   /* positions of that epoch's order consumed, all
				ranks' samples (rio_partition's offset) */
	uint64_t step;       /* steps in all */
} loop_start;

/* What earlier parts of a resumed run did (history.c): zero for a fresh
 * run. The result's totals (images, best accuracy, ...) start from the
 * checkpoint's too. */
typedef struct loop_history {
	int parts;             /* earlier parts */
	char *parts_json;      /* their "parts" array as JSON text, or NULL */
	char *init_json;       /* the file the run started from (--init): its
				  "init" object as JSON text, made when it was
				  loaded (loop_history_init) and carried by
				  every later part; NULL for a run started
				  from scratch or from a checkpoint older
				  than the record */
	double wall_s, startup_s, wait_s;
	uint64_t images;
} loop_history;

/* This part of a run: where it starts, and for a resumed one what came
 * before and what changed (resume.c, history.c). */
typedef struct loop_part {
	loop_start at;
	int resumed;           /* 1: this part resumes a checkpoint */
	int complete;          /* resumed with nothing to train: 1 the run
				  is complete, 2 --max-steps is reached */
	loop_history hist;
	nn_train_resume resume;  /* what loop_report_resumed tells */
	char changed[1024];      /* resume.changed's text */
	char run_id[24];         /* the run's (all its parts' and ranks'):
				    made by rank 0 when it starts, kept in
				    its checkpoints and summary.json; "" for
				    a run resumed from a checkpoint that has
				    none */
	uint64_t checkpoint_id;  /* resumed: the checkpoint's checksum and
				    position, which every rank must share
				    (loop_agree_resume) */
	int interrupted;         /* the ranks agreed to stop after this
				    step (o->out.stop, step.c) */
} loop_part;

/* Records the loader could not load (records.c). */
#define LOOP_BAD_LISTED 8
typedef struct loop_bad {
	int epoch;             /* the epoch epoch_count counts (from 0) */
	uint64_t epoch_count;  /* this epoch's, all ranks' */
	uint64_t total;        /* the run's, all ranks', earlier parts' too */
	uint64_t mine[LOOP_BAD_LISTED]; /* this rank's smallest this epoch */
	int n_mine;
	char reason[IMS_ERRMSG_MAX];    /* why the first this rank met could not
					   be loaded; after the epoch, the
					   reason told (share_reason) */
	uint64_t first[LOOP_BAD_LISTED]; /* the run's smallest (summary.json) */
	int n_first;
	uint64_t val_count;    /* in the last validation, all ranks' */
	char *ck_json;         /* rank 0, for the checkpoint being written:
				  the epoch's so far (loop_bad_checkpoint) */
	int carried;           /* resumed inside an epoch: epoch_count,
				  mine and reason are its earlier part's */
} loop_bad;

/* A recorded pass (graphs.c), kept for the addresses and sizes its
 * kernels were given. */
enum { LOOP_PASS_FORWARD, LOOP_PASS_BACKWARD };
typedef struct loop_graph {
	int pass;            /* LOOP_PASS_* */
	const void *addr;    /* forward: the batch; backward: the loss
				gradient (device memory) */
	const void *batch;   /* backward: the forward pass's batch, which
				it reads again (fp32 NCHW's first layer) */
	int n;               /* samples */
	const void *arena;   /* the activations' (nn_model_arena) */
	int flag;            /* backward: head_only */
	nn_graph *g;
} loop_graph;

/* Two staging slots and the --synthetic batch, forward and backward. */
#define LOOP_GRAPHS 8

/* --cuda-graphs: the step's passes recorded once, then replayed. */
typedef struct loop_graphs {
	int on;              /* passes are recorded and replayed */
	int forward;         /* the forward pass too (no dropout) */
	const char *why;     /* why not, when off */
	loop_graph e[LOOP_GRAPHS];
	int count;
	uint64_t recorded, replayed;
	int64_t *counters;   /* the model's, kept while a pass records */
	int flushed;         /* this step's backward pass was recorded or
				replayed with NCCL's rest of the allreduce
				(dp_nccl_flush) in it */
} loop_graphs;

/* The learning rate's schedule and where the run is on it (setup.c). */
typedef struct loop_sched {
	nn_lr_schedule lr;
	int lr_batch;          /* the batch per rank --lr is given for: the
				  run's first part's */
	double pos;            /* the schedule's position of the step being
				  trained (nn_lr_at_position) */
	uint64_t total_steps;  /* steps in all the run will have trained */
} loop_sched;

/* fp16's overflow handling (step.c); disabled in other precisions. */
typedef struct loop_fp16 {
	nn_loss_scale scaler;
	/* the model's buffers (device) and counters (host) as they were
	 * before this step's forward pass, put back when its loss is not
	 * finite (the overflowed batch's statistics would stay) */
	float *saved_buffers;
	int64_t *saved_counters;
} loop_fp16;

/* A failure the ranks decided together (loop_agree_setup, a refusal of
 * loop_agree_on or loop_agree_resume, a NaN loss summed over ranks): how
 * many failed there, whether this one did, whether all did with one
 * message (nn_train_result's failed_*); all 0 after a failure of this
 * rank alone. */
typedef struct loop_verdict {
	int ranks, here, alike;
	/* this rank left out a collective its peers make (memory for its
	 * result ran out): the next one would pair with theirs out of
	 * step, so it joins none, and its failure, its own, aborts the job
	 * (loop_agree_setup) */
	int out_of_step;
} loop_verdict;

typedef struct run {
	const nn_train_opts *o;
	nn_train_hooks hooks;  /* the caller's, or all zero */
	loop_ranks dp;
	nn_ctx ctx;
	int ctx_ok;
	nn_model *m;
	nn_optim *opt;
	nn_optim_segment *segs;
	size_t nsegs;
	loop_sched sched;
	loop_part part;        /* where this part of the run starts */
	loop_bad bad;
	int lock_fd[2];        /* the folders' locks (guard.c), -1 none */
	loop_fp16 fp16;
	float *dlogits;        /* the loss gradient, device memory */
	char ckpt_path[4096];
	nn_model_card card;    /* what checkpoints record for inference */
	loop_data data;
	loop_stage st;
	loop_graphs graphs;
	loop_log log;
	loop_verdict failed;
} run;

/* Steps between two progress reports: time split and loss sums. */
typedef struct loop_interval {
	double wait_s, compute_s, comm_s;
	double loss_sum, correct, samples; /* all ranks' */
	double scored; /* of samples, those in loss_sum and correct */
	int steps;
	uint64_t images;                   /* this rank's */
	double t0;
} loop_interval;

/* setup.c */
int loop_check_opts(const nn_train_opts *o, int world, ims_error *err);
/* NN_ALGO_* of a --cudnn-algo name, -1 for an unknown one. */
int loop_algo_mode(const char *name);
/* NN_CL_* of a --channels-last value (NULL: auto), -1 for an unknown one. */
int loop_channels_last(const char *name);
int loop_open_context(run *r, ims_error *err);
int loop_load_classes(run *r, ims_error *err);
/* Warnings about the splits accepted, told once the set-up has accepted
 * the run (a failing one says its error alone): --val holds the training
 * split's records; classes of --train without a record */
void loop_warn_val_is_train(run *r);
int loop_open_loaders(run *r, ims_error *err);

/* overlap.c: on rank 0, whether --val holds images of --train byte for
 * byte (r->data.overlap); ends the set-up only where memory ran out or a
 * shard changed. loop_warn_overlap tells what it found, with the other
 * warnings about the splits. */
int loop_check_overlap(run *r, ims_error *err);
void loop_warn_overlap(run *r);
int loop_make_synthetic(run *r, ims_error *err);
int loop_make_model(run *r, ims_error *err);
int loop_share_model(run *r, ims_error *err);
int loop_setup_optim(run *r, ims_error *err);
int loop_setup_schedule(run *r, ims_error *err);
int loop_setup_buckets(run *r, ims_error *err);
void loop_free_data(run *r);

/* stage.c */
int loop_setup_device(run *r, ims_error *err);
void loop_free_stage(run *r);
void loop_free_device(run *r);
int loop_loader_next(run *r, aug_loader *l, aug_batch *b, ims_error *err);
int loop_loader_start(run *r, aug_loader *l, uint64_t epoch,
		      uint64_t position, ims_error *err);
void loop_host_memory(run *r, aug_loader_opts *lo);
/* Opens r->data.val from vo (manifest, batch, threads, seed and quiet
 * set by the caller) for validation or evaluation: this rank's share,
 * every record once (ranks pad to equal shares, padded samples are
 * flagged and left out of the metric; a short last batch is kept), the
 * centre crop at size with its crop fraction and normalisation
 * (setup.c). */
int loop_open_eval_loader(run *r, aug_loader_opts *vo, int size,
			  float crop_frac, const float mean[3],
			  const float std[3], ims_error *err);
int loop_stage_inputs(run *r, const aug_batch *b, const float **x,
		      const int32_t **labels, int *slot, double *wait_s,
		      ims_error *err);
int loop_take_ahead(run *r, const aug_batch *b, uint64_t next_step,
		    double *wait_s, ims_error *err);
int loop_read_logits(run *r, const float **logits, int n, ims_error *err);
int loop_read_tally(run *r, loop_interval *iv, int reset, ims_error *err);
int loop_poison(run *r, const aug_batch *b, uint64_t step, ims_error *err);

/* graphs.c: nn_model_forward and nn_model_backward, replayed from a
 * recording where the run records (loop_setup_graphs) and use says this
 * step may; a recorded backward pass with NCCL ends with dp_nccl_flush
 * (graphs.flushed says so, for step_allreduce) */
int loop_setup_graphs(run *r, ims_error *err);
void loop_graphs_release(run *r);
int loop_graph_forward(run *r, int use, const float *x, int n, uint64_t seed,
		       const float **logits, ims_error *err);
int loop_graph_backward(run *r, int use, const float *x, const float *dlogits,
			int n, int head_only, ims_error *err);

/* step.c */
int loop_setup_overflow(run *r, ims_error *err);
int loop_train_epoch(run *r, nn_train_result *res, int epoch,
		     uint64_t position, uint64_t *step, uint64_t max_steps,
		     int *stop, uint64_t *done, ims_error *err);

/* evaluate.c: the pass validation and nn_eval_run share */
typedef struct loop_eval {
	/* after the pass, over all ranks: loss sum, top-1 hits, top-k hits,
	 * samples counted, records that could not be loaded (each once; the
	 * samples standing in for them are not counted), ranks whose pass
	 * failed (loop_eval_pass) */
	double sums[6];
	int want_rows;         /* 1: keep a row per sample for the result */
	double *rows;          /* this rank's rows (evaluate.c's layout) */
	size_t n_rows, cap_rows;
	/* this rank's smallest indices of records that could not be loaded,
	 * and why the first met could not */
	uint64_t bad_mine[LOOP_BAD_LISTED];
	int n_bad_mine;
	char bad_reason[IMS_ERRMSG_MAX];
	/* after each batch (may be NULL) */
	void (*progress)(void *ctx, uint64_t batches, uint64_t total);
	void *ctx;
} loop_eval;
int loop_eval_pass(run *r, aug_loader *l, loop_eval *e, ims_error *err);
int loop_eval_result(run *r, const loop_eval *e, nn_eval_result *res,
		     ims_error *err);
void loop_eval_free(loop_eval *e);

/* validate.c */
/* The ranks' running statistics averaged (a collective), unless they are
 * since the last step, or frozen (--freeze-bn: every rank holds the same
 * ones): one model is trained on, evaluated and checkpointed. */
int loop_average_statistics(run *r, ims_error *err);
/* The same every step (step.c), the ranks' batches having moved them, on
 * a device queued before the step's wait for its gradients, which covers
 * it; nothing without batch norm or with it frozen (every rank alike). */
int loop_average_step_statistics(run *r, ims_error *err);
/* hooks.reached, when set: this rank is at phase (trainer.c). */
void loop_reached(run *r, const char *phase);
int loop_validate(run *r, nn_train_result *res, int epoch, uint64_t step,
		  double wall0, int last, ims_error *err);

/* resume.c */
/* Before anything is made (every rank, its own folder): --resume
 * refused where no checkpoint is, so a mistyped folder is not created. */
int loop_check_resumable(const nn_train_opts *o, ims_error *err);
int loop_open_checkpoints(run *r, nn_train_result *res, ims_error *err);
int loop_share_run_id(run *r, ims_error *err);
int loop_report_resumed(run *r, ims_error *err);
int loop_save_checkpoint(run *r, const nn_train_result *res, int epoch,
			 uint64_t position, uint64_t step, ims_error *err);

/* history.c */
int loop_history_init(run *r, const nn_load_report *rep, ims_error *err);
char *loop_history_save(run *r, const nn_train_result *res);
int loop_history_load(run *r, const char *text, nn_train_result *res,
		      const char *path, ims_error *err);
void loop_history_release(run *r);
struct cJSON *loop_history_parts(const run *r, const nn_train_result *res);

/* records.c */
void loop_bad_keep(uint64_t *list, int *n, uint64_t v);
void loop_bad_batch(run *r, const aug_batch *b);
void loop_bad_epoch_start(run *r, int epoch, uint64_t position);
int loop_bad_step(run *r, uint64_t count, uint64_t step, ims_error *err);
int loop_bad_epoch(run *r, int epoch, uint64_t step, int complete, ims_error *err);
int loop_bad_checkpoint(run *r, ims_error *err);
int loop_bad_restore(run *r, const void *json, const char *path, ims_error *err);
int loop_bad_validation(run *r, int epoch, const uint64_t *mine, int n_mine,
			const char *reason, uint64_t count, ims_error *err);

/* agree.c: every rank's options and splits the same, or every
 * rank refuses alike (collective; nothing with one rank) */
int loop_agree(run *r, ims_error *err);
/* What a rank was started with, one fingerprint per option (flag names
 * it in the refusal); loop_agree_on gathers every rank's and refuses
 * ("cannot VERB: ranks 0 and K were started with different FLAG ...")
 * where any differs. Collective; nothing with one rank. */
typedef struct fingerprint {
	const char *flag;
	uint64_t h;
} fingerprint;
int loop_agree_on(run *r, const fingerprint *f, int n, const char *verb,
		  ims_error *err);
uint64_t loop_fingerprint_str(const char *s);
uint64_t loop_fingerprint_names(const nn_model_card *c);
/* a split's records, wherever it lies: its count and shard digests */
struct rio_manifest;
uint64_t loop_split_digest(const struct rio_manifest *m);
/* resumed: every rank read the same checkpoint (each reads its own
 * --checkpoint-dir, which may be node-local), or every rank refuses */
int loop_agree_resume(run *r, ims_error *err);
/* After a step each rank takes alone (rc: its result), every rank hears
 * whether any failed, so none is left waiting in the next collective:
 * sets r->failed_*, and a rank whose own step went well fails too
 * (IMS_EINVAL, "cannot VERB: N of W ranks could not set up"). Returns
 * rc when it failed. Collective; with one rank it returns rc. A rank
 * r->failed.out_of_step joins no collective: it returns rc as its own
 * failure (the caller aborts the job, which ends the waiting peers). */
int loop_agree_setup(run *r, int rc, const char *verb, ims_error *err);
/* Marks this rank's failure as one every rank meets at this point with
 * the same message (decided on numbers every rank holds alike). */
void loop_failed_alike(run *r);

/* guard.c */
/* Rank 0 locks its folders; a rank whose --log-dir is not rank 0's
 * folder (storage local to its node) locks its own, the lowest such rank
 * of each folder, and owns it (r->log.owns_dir). Collective with a
 * --log-dir and several ranks; failures are agreed on by the caller. */
int loop_take_locks(run *r, ims_error *err);
/* A folder where the run will rename a file (checkpoint.safetensors,
 * summary.json, the per-class files after the last validation): refused
 * before the first step, new run or resumed (rank 0). */
int loop_check_outputs(run *r, ims_error *err);
/* A new run (no --resume) in folders that hold an earlier run's
 * checkpoint or logs: refused, or with --force those files removed and
 * the run told (rank 0, and the owner of a --log-dir of its own; the
 * next collective tells the others). */
int loop_check_earlier_run(run *r, ims_error *err);
/* A resumed run whose --log-dir holds another run's summary.json or
 * metrics.jsonl (its run_id differs; a killed run left no summary):
 * refused (each folder's owner, after the checkpoint is read). */
int loop_check_resumed_logs(run *r, ims_error *err);
void loop_release_locks(run *r);
int loop_reserve_memory(run *r, ims_error *err);

/* metrics.c */
int loop_open_metrics(run *r, ims_error *err);
void loop_close_metrics(run *r);
void loop_plan(const run *r, nn_train_plan *p);
/* A metrics line's object with its "type", its allocations watched
 * (ims_json_watch) until loop_metrics_line takes it. */
struct cJSON *loop_metrics_object(const char *type);
int loop_metrics_line(run *r, struct cJSON *obj, ims_error *err);
void loop_report_start(run *r);
/* metrics.jsonl's "start" line of this part (rank 0): the run's id, where
 * the part starts, its ranks and batch; a resumed run's check of its
 * --log-dir reads it back (loop_check_resumed_logs). */
int loop_start_line(run *r, ims_error *err);
int loop_report_interval(run *r, int epoch, uint64_t step,
			 const loop_interval *iv, ims_error *err);
int loop_report_validation(run *r, const nn_train_validation *v,
			   double wall_s, ims_error *err);
void loop_rank_note(run *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
struct cJSON *loop_options_json(const run *r);
int loop_write_summary(run *r, nn_train_result *res, ims_error *err);
/* *missing = 1 when --log-dir is given and has the run's metrics.jsonl
 * but no summary.json. */
int loop_summary_missing(run *r, int *missing, ims_error *err);

#endif
