/*
 * report.h - run reports: reads imshard-train log folders (metrics.jsonl,
 * summary.json), derives the figures that matter for data-parallel
 * training, and renders them as one self-contained HTML page (inline SVG,
 * no scripts, no network) and as CSV files.
 *
 * The figures (docs/TRAINING.md, "Reports", says the same for users):
 *  - steady speed of a rank: its images/s over its logged intervals after
 *    the first one of each part of the run (the warm-up intervals: the
 *    run's first and each resumed part's; the run's first is kept when it
 *    is the only one, and only the run's first is left out when every
 *    interval is a warm-up), images over seconds, i.e. the steps-weighted
 *    harmonic mean of the lines' images_per_s. A run's speed is the mean
 *    over its ranks.
 *  - speedup_speed = W * speed(W) / speed(1); speedup_time = train_s(1) /
 *    train_s(W), per image when the two runs trained different numbers of
 *    images; efficiency = speedup / W.
 *  - the decomposition of train_s (mean over ranks): steady compute, data
 *    wait, communication and other step time, the warm-up interval,
 *    validation, checkpoints, and the rest.
 *  - balance: max/min of the ranks' compute (busy) seconds.
 *
 * Caveats:
 *  - Logs are untrusted input. A malformed, truncated, mistyped or
 *    out-of-range line is skipped and recorded as a diagnostic
 *    "FILE:LINE: why"; it never fails a load. Only a missing or unreadable
 *    metrics.jsonl (or running out of memory) fails rep_run_load.
 *  - A missing summary.json (a run that died) is not an error: what
 *    metrics.jsonl holds is still analysed and drawn.
 *  - Objects are plain data owned by the caller; none is shared between
 *    threads by the library. Release functions accept zeroed structs.
 */
#ifndef IMSHARD_REPORT_H
#define IMSHARD_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define REP_MAX_RANKS 4096     /* ranks and world sizes beyond are refused */
#define REP_MAX_DIAGS 100      /* diagnostics kept per run (all are counted) */
#define REP_MAX_LINE 65536     /* longer metrics lines are skipped */
/*
 * summary.json larger than this is not parsed (a diagnostic names its size
 * and this limit). What imshard-train writes is a few KiB of totals and
 * options (three paths of up to 4 KiB among them), three per-rank arrays
 * (about 330 KiB at REP_MAX_RANKS ranks) and about 300 bytes per part of a
 * resumed run: 1 MiB holds over 2,000 parts. The limit bounds the memory
 * of a junk file: parsed JSON takes up to 40 times the bytes of its text
 * (each number of "0,0,..." is a node of about 80 bytes).
 */
#define REP_MAX_SUMMARY (1u << 20)

/* ---- what a run folder holds --------------------------------------------- */

/* One "train" line: a rank's means over an interval of `steps` steps. */
typedef struct rep_train_line {
	int rank, epoch;
	int64_t step;        /* global step at the end of the interval */
	int steps;           /* steps in the interval; 0 when the line lacks it */
	double loss, accuracy, lr; /* lr is NAN when absent; loss and
				      accuracy NAN for an interval whose every
				      step fp16 skipped (both null) */
	double images_per_s; /* this rank's */
	double data_wait_ms, compute_ms, comm_ms; /* per step */
	double wall_s;       /* seconds since training started; NAN when absent */
	size_t line;         /* 1-based line number in its folder's metrics.jsonl */
	int folder;          /* 0: the run's folder; k:
				rep_run.rank_local.merged[k - 1] */
	int warmup;          /* its rank's first interval in its part (the
				run's first, or a resumed part's): start-up
				effects, left out of the steady speed */
} rep_train_line;

/* One "val" line (rank 0, after each epoch). */
typedef struct rep_val_line {
	int epoch;
	int64_t step;
	double loss, top1, top5, records; /* NAN when absent (top1 never is) */
	double wall_s, val_s;             /* NAN when absent */
	size_t line;
} rep_val_line;

/* One "gpu" line, written by the CUDA backend: a device's utilisation and
 * memory at a moment. */
typedef struct rep_gpu_line {
	int rank, device;
	double wall_s, util;             /* util in percent, 0..100 */
	double mem_used_mib, mem_total_mib; /* total NAN when absent */
	size_t line;
	int folder;                      /* as rep_train_line's */
} rep_gpu_line;

/* An option of the run, rendered as text (strings unquoted, numbers as
 * %.15g, booleans true/false). */
typedef struct rep_option {
	char *key, *value;
} rep_option;

/* summary.json. Numbers absent (or rejected) are NAN, strings NULL. */
typedef struct rep_summary {
	int world;                       /* 0 when absent */
	char *model, *device;
	char *init_path;                 /* init.path: the file --init started
					    the run from (as the trainer wrote
					    it, escaped); NULL: from scratch */
	char *init_crc32c;               /* init.crc32c: that file's bytes' CRC
					    (8 hex digits); NULL when absent */
	double threads, batch_per_rank, global_batch, lr_per_rank, lr_peak;
	double epochs, steps, images, wall_s, train_s, startup_s, images_per_s;
	double busy_max_min_ratio, data_wait_s, stall_fraction;
	double val_top1, val_top5, best_val_top1, best_epoch, best_wall_s;
	double val_s, checkpoint_s;
	/* per rank, `world` entries each; NULL when absent or malformed */
	double *busy_s, *data_wait_s_per_rank, *comm_s_per_rank;
	rep_option *options;
	size_t n_options;
} rep_summary;

/* What some lines lacked (rep_run.lines.missing). */
enum {
	REP_MISSING_STEPS = 1 << 0,    /* train lines without "steps" */
	REP_MISSING_WALL = 1 << 1,     /* train lines without "wall_s" */
	REP_MISSING_VAL_WALL = 1 << 2, /* val lines without "wall_s" */
	REP_MISSING_VAL_S = 1 << 3     /* val lines without "val_s" */
};

/* ---- an evaluation in the run folder ------------------------------------- */

#define REP_MAX_CLASSES 100000    /* eval.json with more is not drawn */
/*
 * eval.json grows with its classes (confusion.csv holds the classes x
 * classes counts): imshard-train and `imshard eval -o` write about 130
 * bytes of fields a class beside its name, and a few hundred bytes more.
 * A file past REP_MAX_EVAL bytes (REP_MAX_CLASSES classes at 512 bytes,
 * a name of some 380 bytes written), or holding more JSON values than
 * REP_MAX_EVAL_VALUES (5 a class: its object and four members; 64 for the
 * rest), is not parsed and is a diagnostic naming its size (or count) and
 * the limit: a parse takes up to 40 times the text's bytes for a file of
 * small values, the count up to about 80 bytes a value.
 */
#define REP_MAX_EVAL ((size_t)REP_MAX_CLASSES * 512u + (64u << 10))
#define REP_MAX_EVAL_VALUES ((size_t)REP_MAX_CLASSES * 5u + 64u)
/*
 * confusion.csv (classes x classes counts) is read as a stream, never
 * whole: it grows with the square of the classes, at least 2 bytes a cell
 * (20 GB at REP_MAX_CLASSES), so no fixed limit fits a large evaluation
 * and a junk file alike. Its limit is the file's own: the most bytes the
 * writers put down for eval.json's classes (names quoted, counts of at
 * most their row's records' digits); a larger file is one diagnostic
 * naming its size and that limit, and is not read.
 */
#define REP_MAX_MATRIX 40         /* the matrix is drawn up to this many classes */
#define REP_MAX_CONFUSED 20       /* the most frequent confusions listed */
#define REP_MAX_BARS 60           /* classes drawn as bars; beyond, the worst */

/* One off-diagonal cell of the confusion matrix. */
typedef struct rep_confused {
	int truth, pred;
	double count;
} rep_confused;

/*
 * The evaluation a run folder holds: eval.json (per-class accuracy) and
 * confusion.csv, as imshard-train's last validation or `imshard eval -o`
 * writes them (docs/TRAINING.md, "Evaluating"). Numbers absent are NAN.
 */
typedef struct rep_classes {
	char *program;            /* "imshard-train", "imshard eval"; NULL absent */
	char *split;              /* the split's manifest; NULL absent */
	int epoch;                /* the trainer's, from 0; -1 absent */
	double n_records, top1_all, top5_all, loss;
	int n;                    /* classes */
	char **names;             /* n names */
	double *records, *top1, *top5; /* per class; top1/top5 fractions */
	int has_confusion;        /* confusion.csv read and agreeing with eval.json */
	double *matrix;           /* n x n counts (row: true class) when
				     has_confusion and n <= REP_MAX_MATRIX */
	rep_confused *confused;   /* the largest off-diagonal cells, largest first */
	size_t n_confused;
} rep_classes;


#define REP_RUN_ID_MAX 64 /* bytes of a start line's run_id kept, NUL included */

/*
 * One part of a run: what one imshard-train process (one mpirun) trained,
 * from its "start" line (and "resume" line, when it continues a checkpoint)
 * to the next part's. A part killed after its last checkpoint logged steps
 * that the next part trains again: those lines are superseded (dropped, and
 * counted here) by the next part's, so each step is drawn once.
 */
typedef struct rep_part {
	size_t line;              /* its start line (or resume line, in logs
				     without start lines) in metrics.jsonl */
	int64_t step;             /* global step it starts from; -1 unknown */
	int epoch;                /* epoch it starts in; -1 unknown */
	int world;                /* its ranks; 0 unknown */
	int world_was;            /* the checkpoint's ranks; 0 unknown */
	int resumed;              /* a resume line says it continues a checkpoint */
	char run_id[REP_RUN_ID_MAX]; /* "" when the line has none */
	size_t superseded;        /* its train lines a later part trained again */
	int64_t superseded_lo, superseded_hi; /* their steps (interval ends) */
} rep_part;

/* A rank-local --log-dir whose lines joined its run (rep_report_analyze):
 * the folder is then no run of the report of its own. */
typedef struct rep_merged {
	char *dir;                /* the folder as given */
	size_t n_train, n_gpu;    /* its lines that joined */
} rep_merged;

/*
 * The lines of a run's metrics.jsonl, each kind in its own array in file
 * order: rep_run_load fills them (parts.c drops the superseded ones), and
 * a rank-local folder that joins the run appends its own (rank_local.c).
 * The arrays are malloc'd and the run's.
 */
typedef struct rep_lines {
	rep_train_line *train;    /* in file order; a merged folder's after */
	size_t n_train;
	rep_val_line *val;
	size_t n_val;
	rep_gpu_line *gpu;
	size_t n_gpu;
	size_t n_read;            /* lines read from metrics.jsonl */
	unsigned missing;         /* REP_MISSING_* */
} rep_lines;

/*
 * The parts of a resumed run (rep_part), and the lines dropped because a
 * later part trained their steps again. parts.c fills them: list as the
 * start lines are read, the rest once every line is. list is malloc'd and
 * the run's.
 */
typedef struct rep_parts {
	rep_part *list;           /* in file order; none in logs without start lines */
	size_t n;
	size_t n_superseded;      /* train lines superseded (rep_part), dropped */
	size_t n_superseded_val, n_superseded_gpu; /* val and gpu lines so */
	int n_run_ids;            /* distinct run_ids of the parts: > 1, the
				     file holds several runs */
	int wall_goes_back;       /* rank 0's wall_s still decreases once the
				     superseded lines are gone: not one run */
} rep_parts;

/*
 * How a rank-local --log-dir and its run find each other, and the folders
 * that joined this run: job_mark is read with the folder (parts.c), the
 * rest set by rep_report_analyze (rank_local.c). merged and each
 * merged[i].dir are malloc'd and the run's.
 */
typedef struct rep_rank_local {
	char job_mark[17];        /* the last job's mark in the folder's
				     imshard-train.lock (16 hex digits), by
				     which the ranks of one job tell their
				     folders; "" when none */
	long of_run;              /* a rank-local --log-dir that could not be
				     merged (rank_local.c says when): the
				     index in rep_report.runs of the run (same
				     run_id) it belongs to; -1
				     (rep_report_analyze sets it) */
	rep_merged *merged;       /* rank-local folders whose lines joined */
	size_t n_merged;
} rep_rank_local;

/*
 * What the run's files said was wrong: the first REP_MAX_DIAGS messages,
 * and counts of all. list (REP_MAX_DIAGS slots) and its strings are
 * malloc'd and the run's.
 */
typedef struct rep_diags {
	char **list;              /* "FILE:LINE: why", at most REP_MAX_DIAGS */
	size_t n;
	size_t n_total;           /* all of them, kept or not */
	size_t n_skipped_lines;   /* of those, the lines of metrics.jsonl
				     skipped (left out of every figure); the
				     rest say a value was ignored, a file not
				     drawn or text shown with \xHH */
} rep_diags;

/* One run folder as read (rep_run_load); every buffer is the run's. */
typedef struct rep_run {
	char *dir;                /* the folder as given */
	char *label;              /* short unique name (rep_report_analyze) */
	rep_lines lines;          /* metrics.jsonl's train, val and gpu lines */
	int has_summary;          /* summary.json present and an object */
	rep_summary sum;
	int world;                /* summary's world, else 1 + highest rank */
	rep_parts parts;          /* a resumed run's parts, lines redone */
	rep_rank_local rank_local; /* how rank-local --log-dirs join their run */
	rep_diags diags;          /* what its files got wrong */
	rep_classes *classes;     /* the folder's evaluation; NULL: none */
} rep_run;

/*
 * Reads DIR/eval.json and DIR/confusion.csv into run->classes (left NULL
 * when DIR has no eval.json or its per-class part is unusable). What does
 * not parse, and a confusion.csv that disagrees with eval.json, become
 * diagnostics. Returns 0 or IMS_ENOMEM (err filled). rep_run_load calls it.
 */
int rep_classes_load(rep_run *run, const char *dir, ims_error *err);
void rep_classes_release(rep_classes *c);

/* A diagnostic "FILE: why" of run (0 or IMS_ENOMEM): for the readers of
 * the folder's other files. */
int rep_run_diag(rep_run *run, const char *file, const char *why);

/*
 * Reads DIR/metrics.jsonl and DIR/summary.json into run (zeroed first),
 * and the folder's evaluation (rep_classes_load).
 * Returns 0, or with err filled: IMS_ENOTFOUND (no such folder, or
 * "DIR: no metrics.jsonl"), IMS_EINVAL (DIR is not a folder), IMS_EIO
 * (unreadable) or IMS_ENOMEM; run is released on failure.
 */
int rep_run_load(rep_run *run, const char *dir, ims_error *err);
void rep_run_release(rep_run *run);

/* ---- derived figures ------------------------------------------------------ */

/* The parts train_s is split into (rep_stats.terms). */
enum {
	REP_T_COMPUTE, /* steady intervals: compute (forward, backward, optimiser) */
	REP_T_WAIT,    /* steady intervals: waiting for the loader */
	REP_T_COMM,    /* steady intervals: allreduce */
	REP_T_OTHER,   /* steady intervals: the rest of the step time */
	REP_T_WARMUP,  /* the warm-up intervals: the first logged one, and
			  each resumed part's first */
	REP_T_VAL,     /* validation */
	REP_T_CKPT,    /* checkpoints */
	REP_T_REST,    /* train_s minus all of the above */
	REP_N_TERMS
};
/* Short names ("compute", "data wait", ...), REP_N_TERMS entries. */
extern const char *const rep_term_names[REP_N_TERMS];

typedef struct rep_rank_stats {
	int lines;            /* train lines of this rank */
	int warmup_excluded;  /* 1 when warm-up intervals were left out */
	int warmup_lines;     /* how many: its first, and each resumed part's */
	double speed;         /* steady images/s; NAN without usable lines */
	double wait_ms, compute_ms, comm_ms; /* steady means per step */
	double step_ms;       /* steady step time (batch / speed); NAN without batch */
	double steady_s, warmup_s; /* seconds; NAN without batch or steps */
	double steady_compute_s, steady_wait_s, steady_comm_s;
	double busy_s, wait_s, comm_s; /* whole run: summary, else summed lines */
} rep_rank_stats;

typedef struct rep_stats {
	int world;
	rep_rank_stats *ranks;    /* world entries */
	double batch_per_rank;    /* NAN when unknown */
	double global_batch;
	double speed;             /* mean over ranks of steady speed */
	double total_speed;       /* world * speed */
	int warmup_excluded;      /* every rank had its warm-up left out */
	double busy_ratio;        /* max/min busy seconds; NAN when unknown */
	int busy_max_rank, busy_min_rank;
	double stall_fraction;    /* rank 0 data wait / train_s */
	double train_s, images;   /* summary; NAN when absent */
	int has_terms;            /* terms[] computed (summary and steps present) */
	double terms[REP_N_TERMS];
	double final_top1, final_top5, best_top1, best_epoch, best_wall_s;
	int target_set;           /* a target accuracy was asked for */
	int target_reached;
	double target_epochs;     /* epochs trained when first reached (epoch + 1) */
	double target_wall_s;     /* val line's wall_s then; NAN when absent */
	char *key[2];             /* scaling group keys (rep_scaling); NULL
				     without a summary */
	/* where each epoch ends on the step axis, sorted by epoch: from the
	 * val lines, else the last train line (complete 0: the epoch has no
	 * val line, the run stopped inside it) */
	size_t n_epochs;
	int *epoch_id;
	double *epoch_end;
	unsigned char *epoch_complete;
} rep_stats;

/*
 * Derives a run's figures. target_acc < 0: no target. Returns 0 or
 * IMS_ENOMEM. st is released by rep_stats_release.
 */
int rep_stats_compute(const rep_run *run, double target_acc, rep_stats *st,
		      ims_error *err);
void rep_stats_release(rep_stats *st);

/*
 * Position of global step `step` of epoch `epoch` on an epoch axis: epoch +
 * the fraction of the epoch's steps done (1.0 = the end of epoch 0). An
 * epoch the run stopped inside is measured against the length of the one
 * before it.
 */
double rep_epoch_position(const rep_stats *st, int epoch, int64_t step);

/* How runs are grouped for scaling. Both group runs that share every
 * option that changes the work of a step, except world; they differ in the
 * batch kept equal. */
typedef enum rep_scaling {
	REP_SCALE_RANK_BATCH = 0,  /* same batch per rank (weak scaling) */
	REP_SCALE_GLOBAL_BATCH = 1 /* same global batch (strong scaling) */
} rep_scaling;

/* One run against its group's baseline (world 1). NAN where unknown. */
typedef struct rep_compare {
	double speedup_speed, eff_speed;
	double speedup_time, eff_time;
	double images_ratio;       /* images(run) / images(baseline) */
	int time_per_image;        /* images differ: time compared per image */
	double steady_speedup_time; /* steady terms only, per image */
	double ideal_s;            /* train_s had every term shrunk by speedup_speed */
	int has_terms;
	double base_terms[REP_N_TERMS]; /* baseline's, scaled by images_ratio */
	double terms[REP_N_TERMS];
	double excess[REP_N_TERMS]; /* terms - base_terms / speedup_speed */
	int has_per_image;
	/* steady ms per image on one rank: wait, compute, comm, other */
	double base_per_image_ms[4], per_image_ms[4];
} rep_compare;

typedef struct rep_group {
	rep_scaling mode;
	char *key;                 /* "model=convnet7 size=32 ..." */
	size_t *members;           /* run indices, by world then given order */
	size_t n_members;
	long baseline;             /* run index of the world-1 run; -1: none */
	rep_compare *cmp;          /* n_members entries */
} rep_group;

/*
 * Compares run (figures st) with the baseline (world 1, figures base).
 * Never fails: what cannot be computed is NAN.
 */
void rep_compare_runs(const rep_stats *base, const rep_stats *st,
		      rep_compare *out);

/*
 * Groups runs[0..n) (figures stats) for scaling, both ways: a group is kept
 * when it holds at least two world sizes. *groups is malloc'd (NULL when
 * none); release with rep_groups_release. Returns 0 or IMS_ENOMEM.
 */
int rep_groups_compute(const rep_stats *stats, size_t n, rep_group **groups,
		       size_t *n_groups, ims_error *err);
void rep_groups_release(rep_group *groups, size_t n);

/* ---- the report ------------------------------------------------------------ */

typedef struct rep_opts {
	const char *title;         /* NULL: "imshard run report" */
	double target_acc;         /* < 0: none; else 0..1 */
} rep_opts;

typedef struct rep_report {
	rep_opts opts;
	char *title;
	rep_run *runs;
	size_t n_runs;
	rep_stats *stats;          /* n_runs, after rep_report_analyze */
	rep_group *groups;
	size_t n_groups;
	int analyzed;
} rep_report;

void rep_report_init(rep_report *r, const rep_opts *o);
/* Loads one run folder (rep_run_load) and appends it. */
int rep_report_add_run(rep_report *r, const char *dir, ims_error *err);
/* Joins each rank-local --log-dir to its run, when that run's folder is
 * given too (rep_run.rank_local.merged: the folder is no longer a run of
 * its own, and n_runs drops), labels the runs, computes every run's figures and the
 * scaling groups. Call once, after the last rep_report_add_run. */
int rep_report_analyze(rep_report *r, ims_error *err);
/* The HTML page in a malloc'd NUL-terminated buffer (*len without the
 * NUL). Needs rep_report_analyze. */
int rep_report_html(const rep_report *r, char **out, size_t *len,
		    ims_error *err);
/* rep_report_html written to path atomically. */
int rep_report_write_html(const rep_report *r, const char *path,
			  ims_error *err);
/*
 * Writes the series as CSV files into dir (created when missing), all or
 * none (rep_report_write), with a header row: runs.csv, train.csv, val.csv, gpu.csv,
 * ranks.csv, terms.csv, scaling.csv, skipped.csv (docs/TRAINING.md lists
 * the columns). Unknown values are empty fields.
 */
int rep_report_write_csv(const rep_report *r, const char *dir,
			 ims_error *err);
/*
 * The page (page; NULL: none) and the CSV files (into csv_dir, created when
 * missing; NULL: none) together: every file is written to its temporary
 * first, and only when all are written are they renamed into place, the
 * page last. A failure (a full disk, a file-size limit) leaves every
 * old file as it was and no new one. Returns 0, or with err filled
 * IMS_EINVAL (not analysed), IMS_EIO or IMS_ENOMEM.
 */
int rep_report_write(const rep_report *r, const char *page, const char *csv_dir,
		     ims_error *err);
/* The names of the files rep_report_write_csv writes, NULL-terminated:
 * what a caller checks its other outputs against. */
extern const char *const rep_csv_names[];
void rep_report_release(rep_report *r);

#ifdef __cplusplus
}
#endif

#endif
