/*
 * imshard.h - what the `imshard` subcommands share beyond cli.h: the
 * progress line, interruption by signals, the packing options and what
 * pack and convert show while packing, and the subcommands themselves
 * (one cmd_<name>.c each, dispatched by imshard.c).
 */
#ifndef IMSHARD_TOOLS_IMSHARD_H
#define IMSHARD_TOOLS_IMSHARD_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "pack/pack.h"

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
	 "JPEG quality, for --encoding jpeg only (default 95)", 1, 100},       \
	{"threads", 'j', CLI_INT, &(f)->threads, "T",                          \
	 "worker threads (default: all cores)", 1, 1024},                      \
	{"max-errors", 0, CLI_INT, &(f)->max_errors, "N",                      \
	 "fail once more than N files are skipped (default: never)", 0, 2147483647}, \
	{"check-decode", 0, CLI_FLAG, &(f)->check_decode, NULL,                \
	 "keep mode: decode every image fully as the check (slower)", 0, 0},   \
	{"force", 'f', CLI_FLAG, &(f)->force, NULL,                            \
	 "replace existing splits of those names", 0, 0}

/*
 * Lists printed under a message (skipped files, short classes) name their
 * first CLI_NAMED items and count the rest, so that an error stays near
 * one line however many items it concerns: cli_say_rest prints
 * "  ... and N more NOUN" when total > CLI_NAMED.
 */
#define CLI_NAMED 5
void cli_say_rest(uint64_t total, const char *one, const char *many);

/*
 * What pack and convert show while packing: the progress line, and each
 * skipped file named (the first CLI_NAMED; the rest are counted and
 * listed in the errors file). Use cli_pack_ui_start, pass
 * cli_pack_ui_progress / cli_pack_ui_skipped with the cli_pack_ui as the
 * callbacks' context, and end with cli_pack_ui_finish.
 */

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
 * cli_interrupted(); long loops check it and stop cleanly. A signal the
 * program was started ignoring (nohup, a script's background job) is
 * left ignored. */
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
