/*
 * cli.h - what every imshard subcommand shares: option parsing, error
 * output, exit codes and the progress line.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 bad usage. Errors go to
 * stderr as `imshard: <what>: <why>`, one line.
 */
#ifndef IMSHARD_CLI_H
#define IMSHARD_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "pack/pack.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

typedef enum cli_opt_type {
	CLI_FLAG,   /* int, set to 1 */
	CLI_INT,    /* int within [min, max] */
	CLI_U64,    /* uint64_t within [min, max] */
	CLI_DOUBLE, /* double within [min, max] */
	CLI_STRING, /* const char *, pointing into argv */
	CLI_SIZE,   /* uint64_t bytes, with optional K/M/G/T suffix (powers of 1024) */
	CLI_MULTI   /* cli_strings: repeatable; each use appends */
} cli_opt_type;

typedef struct cli_strings {
	const char **items;
	int count;
} cli_strings;

typedef struct cli_opt {
	const char *name;   /* long name without dashes: "threads" */
	char short_name;    /* 'o', or 0 */
	cli_opt_type type;
	void *dst;
	const char *metavar; /* "N" in --threads N; NULL for flags */
	const char *help;
	double min, max;    /* for numbers; both 0 means unbounded */
} cli_opt;

typedef struct cli_command {
	const char *name;
	const char *usage;   /* "imshard pack LIST.lst ROOT -o OUTDIR/NAME [options]" */
	const char *summary; /* one line for the command list */
	const char *details; /* paragraphs printed after the options in --help */
} cli_command;

/*
 * Parses argv[1..argc) (argv[0] is the subcommand name) against opts
 * (terminated by an entry with name NULL). Positional arguments are stored
 * in pos (up to max_pos); their count must be in [min_pos, max_pos].
 * `--` ends options. Returns 0 to go on, CLI_EXIT_USAGE after printing a
 * one-line error, or -1 after printing --help (the caller exits 0).
 */
int cli_parse(const cli_command *cmd, const cli_opt *opts, int argc,
	      char **argv, const char **pos, int min_pos, int max_pos,
	      int *n_pos);

/* Prints the command's --help to stdout. */
void cli_print_help(const cli_command *cmd, const cli_opt *opts);

/* Prints `imshard: <msg>` to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints `imshard: <msg>` plus a hint to run --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prints `imshard: warning: <msg>` unless quiet. */
void cli_warn(int quiet, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints `imshard: <msg>` to stderr unless quiet (informational). */
void cli_info(int quiet, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints `imshard: <msg>` to stderr. Every cli_ message is escaped as a
 * whole (ims_escape): control characters and bytes that are not UTF-8 in
 * a name print as \xHH, never raw to the terminal. */
void cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses a decimal integer or a seed; returns 0 or -1. */
int cli_parse_u64(const char *s, uint64_t *out);
/* Parses three comma-separated finite numbers ("123.7,116.3,103.5", a
 * per-channel mean or std) into out; returns 0 or -1. */
int cli_parse_triple(const char *s, float out[3]);
/* Parses "256M", "1.5G", "4096" into bytes; returns 0 or -1. */
int cli_parse_size(const char *s, uint64_t *out);
/* Formats bytes as "1.5 GiB" into buf. */
const char *cli_format_bytes(double bytes, char *buf, size_t len);

/*
 * Progress for long work. On a TTY (stderr) a line redrawn at most 10 times
 * a second: "label: 1234/5000 (24.7%) 812/s ETA 0:04"; otherwise a plain
 * log line every 10 seconds. quiet silences both.
 */
typedef struct cli_progress {
	const char *label;
	uint64_t total; /* 0 if unknown */
	uint64_t done;
	double start, last_draw;
	int tty, quiet, drawn;
} cli_progress;

void cli_progress_start(cli_progress *p, const char *label, uint64_t total,
			int quiet);
void cli_progress_update(cli_progress *p, uint64_t done);
/* Clears the TTY line (the caller prints its own summary). */
void cli_progress_finish(cli_progress *p);

/*
 * The packing options pack and convert share: one struct, one set of
 * option-table entries (CLI_PACK_OPTIONS, spliced into a command's table),
 * one check. cli_pack_flags_apply prints a usage error and returns
 * CLI_EXIT_USAGE when the flags contradict each other, else copies them
 * into o (after pack_opts_init) and returns 0.
 */
typedef struct cli_pack_flags {
	const char *encoding;
	int shards, resize, max_size, center_crop, quality, threads;
	int max_errors, check_decode, force;
	uint64_t shard_size;
} cli_pack_flags;

void cli_pack_flags_init(cli_pack_flags *f);
int cli_pack_flags_apply(const cli_command *cmd, const cli_pack_flags *f,
			 pack_opts *o);

#define CLI_PACK_OPTIONS(f)                                                    \
	{"shards", 0, CLI_INT, &(f)->shards, "N",                              \
	 "N shards (per split), splitting the list evenly by position", 1, 99999}, \
	{"shard-size", 0, CLI_SIZE, &(f)->shard_size, "BYTES",                 \
	 "start a new shard past this size, e.g. 512M (default 1G)", 4096, 1e15}, \
	{"encoding", 0, CLI_STRING, &(f)->encoding, "ENC",                     \
	 "keep, jpeg, png or raw (default keep; jpeg with any resize option)", 0, 0}, \
	{"resize", 0, CLI_INT, &(f)->resize, "SHORTER",                        \
	 "scale so the shorter side is SHORTER pixels (enlarging small images)", 1, 32768}, \
	{"max-size", 0, CLI_INT, &(f)->max_size, "LONGER",                     \
	 "then scale down so the longer side is at most LONGER pixels", 1, 32768}, \
	{"center-crop", 0, CLI_FLAG, &(f)->center_crop, NULL,                  \
	 "then keep the centred square (side = the shorter side)", 0, 0},      \
	{"quality", 0, CLI_INT, &(f)->quality, "Q",                            \
	 "JPEG quality for --encoding jpeg (default 95)", 1, 100},             \
	{"threads", 'j', CLI_INT, &(f)->threads, "T",                          \
	 "worker threads (default: all cores)", 1, 1024},                      \
	{"max-errors", 0, CLI_INT, &(f)->max_errors, "N",                      \
	 "fail once more than N files are skipped (default: never)", 0, 2147483647}, \
	{"check-decode", 0, CLI_FLAG, &(f)->check_decode, NULL,                \
	 "keep mode: decode every image fully as the check (slower)", 0, 0},   \
	{"force", 'f', CLI_FLAG, &(f)->force, NULL,                            \
	 "replace existing splits of those names", 0, 0}

/*
 * What pack and convert show while packing: the progress line, and each
 * skipped file named (the first CLI_NAMED_SKIPS; the rest are counted and
 * listed in the errors file). Use cli_pack_ui_start, pass
 * cli_pack_ui_progress / cli_pack_ui_skipped with the cli_pack_ui as the
 * callbacks' context, and end with cli_pack_ui_finish.
 */
#define CLI_NAMED_SKIPS 50

typedef struct cli_pack_ui {
	cli_progress progress;
	int quiet;
	uint64_t skipped;
} cli_pack_ui;

void cli_pack_ui_start(cli_pack_ui *u, const char *label, uint64_t total, int quiet);
void cli_pack_ui_progress(void *ctx, uint64_t done, uint64_t total);
void cli_pack_ui_skipped(void *ctx, uint64_t row, const char *path, const char *why);
void cli_pack_ui_finish(cli_pack_ui *u);

/* Installs SIGINT/SIGTERM handlers that set a flag read by
 * cli_interrupted(); long loops check it and stop cleanly. Also ignores
 * SIGXFSZ, so exceeding a file-size limit is an error, not a kill. */
void cli_catch_signals(void);
int cli_interrupted(void);
/* Pointer to the flag, for libraries that take a cancel pointer. */
volatile int *cli_interrupt_flag(void);

/* Every subcommand: int cmd_<name>(int argc, char **argv). */
int cmd_list(int argc, char **argv);
int cmd_subset(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_extract(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_bench_load(int argc, char **argv);
int cmd_report(int argc, char **argv);

#endif
