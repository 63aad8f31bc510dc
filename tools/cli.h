/*
 * cli.h - what both programs (imshard, imshard-train) share: option
 * parsing and --help, error and warning lines, exit codes, number
 * parsing. The data side's own helpers (progress line, signals, packing
 * flags) are in imshard.h, so imshard-train links none of them.
 *
 * Exit codes: 0 success, 1 runtime failure, 2 bad usage. Errors go to
 * stderr as `imshard: <what>: <why>`, one line.
 */
#ifndef IMSHARD_CLI_H
#define IMSHARD_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* --collective-timeout's help, the same in every command that runs
 * ranks (imshard-train, imshard eval). */
#define CLI_HELP_COLLECTIVE_TIMEOUT                                          \
	"with several ranks, end this rank (and so the job) when a "          \
	"collective (MPI's start and end included) has waited S seconds "     \
	"for the others: a rank that hangs (600; 0 = wait forever)"

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

/* Mutes (1) or unmutes (0) every message below and --help: a rank other
 * than 0 parsing the flags rank 0 parses too, which speaks for all. */
void cli_mute(int muted);

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
/* Prints one line of a command's report to stdout, escaped the same way
 * (the line ends here: a newline in fmt would print as \x0a). Not muted:
 * callers print reports on rank 0 only. */
void cli_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One command of a program with subcommands (imshard, imshard-model). */
typedef struct cli_subcommand {
	const char *name;
	int (*fn)(int argc, char **argv); /* argv[0] is the command's name */
	const char *help;                 /* one line for the program's usage */
} cli_subcommand;

/*
 * A program's main: runs argv[1]'s command from `cmds` (ended by a NULL
 * name) with argv[1..], after calling `before` (may be NULL) with it.
 * No command, -h, --help or help print the usage (`usage_line`, `intro`,
 * then each command's help line) and --version the version. An unknown
 * command is one line and CLI_EXIT_USAGE.
 */
int cli_run_subcommand(int argc, char **argv, const cli_subcommand *cmds,
		       const char *usage_line, const char *intro,
		       void (*before)(char **argv));

/*
 * A program's exit status from rc, its command's: stdout flushed first,
 * and a command that succeeded but whose output could not all be written
 * (a full disk, a closed pipe) fails with one line, never a silent 0.
 * cli_run_subcommand ends with it; a program without subcommands calls it
 * on its way out.
 */
int cli_exit(int rc);

/* Past a file-size limit (ulimit -f), a write fails with EFBIG, reported
 * as an error naming the file, instead of the process being killed by
 * SIGXFSZ with its temporaries left behind. Every program calls it first
 * (the subcommand dispatch does; SIG_IGN survives the exec into
 * imshard-model). */
void cli_no_file_size_kill(void);

/* Parses a decimal integer or a seed; returns 0 or -1. */
int cli_parse_u64(const char *s, uint64_t *out);
/* Parses three comma-separated finite numbers ("123.7,116.3,103.5", a
 * per-channel mean or std) into out; returns 0 or -1. */
int cli_parse_triple(const char *s, float out[3]);
/* 1 when each of a per-channel std is above 0 with 1/std a finite float
 * (at least about 3e-39: below, every normalised sample is infinite). */
int cli_std_ok(const float std[3]);
/* The value of --name V (or --name=V) in argv, read before the flags
 * are parsed (the last one given, up to "--"); dflt when it is absent or
 * not a number within [min, max] (the parse then says what is wrong).
 * For what must be known before MPI starts (--collective-timeout). */
double cli_peek_double(int argc, char **argv, const char *name, double dflt,
		       double min, double max);
/* Parses "256M", "1.5G", "4096" into bytes; returns 0 or -1. */
int cli_parse_size(const char *s, uint64_t *out);
/* Formats bytes as "1.5 GiB" into buf. */
const char *cli_format_bytes(double bytes, char *buf, size_t len);
/* 1 when an output path can only name a folder, not a file: it ends in
 * '/', or its last component is not a plain name (ims_plain_name: "." or
 * ".."); else 0. */
int cli_names_folder(const char *path);

#endif
