/*
 * cli.c - option parsing, --help and messages, for both programs.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Messages carry names from the outside (files, folders, classes): a file
 * named with an ESC byte must not drive the terminal, so the whole line
 * goes out through ims_escape. */
static int muted;

void cli_mute(int m)
{
	muted = m;
}

static void vsay(const char *prefix, const char *fmt, va_list ap)
{
	if (muted)
		return;
	char text[4 * IMS_ERRMSG_MAX];
	vsnprintf(text, sizeof(text), fmt, ap);
	char safe[4 * sizeof(text)];
	/* one write per line: stderr is unbuffered, and the ranks of an
	 * mpirun job share it, so a line written in pieces interleaves with
	 * another rank's ("imshard: imshard: rank 0: ...") */
	char line[sizeof(safe) + 64];
	snprintf(line, sizeof(line), "%s%s\n", prefix,
		 ims_escape(text, safe, sizeof(safe)));
	fputs(line, stderr);
}

void cli_say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("imshard: ", fmt, ap);
	va_end(ap);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("imshard: ", fmt, ap);
	va_end(ap);
}

void cli_warn(int quiet, const char *fmt, ...)
{
	if (quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsay("imshard: warning: ", fmt, ap);
	va_end(ap);
}

void cli_info(int quiet, const char *fmt, ...)
{
	if (quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsay("imshard: ", fmt, ap);
	va_end(ap);
}

void cli_print(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char text[4 * IMS_ERRMSG_MAX];
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	char safe[4 * sizeof(text)];
	fputs(ims_escape(text, safe, sizeof(safe)), stdout);
	fputc('\n', stdout);
}

int cli_usage_error(const cli_command *cmd, const char *fmt, ...)
{
	if (muted)
		return CLI_EXIT_USAGE;
	va_list ap;
	va_start(ap, fmt);
	/* a binary of its own (imshard-train) is named whole; a subcommand
	 * after the program */
	int binary = strncmp(cmd->name, "imshard", 7) == 0;
	char text[4 * IMS_ERRMSG_MAX], safe[16 * IMS_ERRMSG_MAX];
	vsnprintf(text, sizeof(text), fmt, ap);
	if (binary)
		fprintf(stderr, "imshard: ");
	else
		fprintf(stderr, "imshard: %s: ", cmd->name);
	fputs(ims_escape(text, safe, sizeof(safe)), stderr);
	fprintf(stderr, " (see '%s%s --help')\n", binary ? "" : "imshard ",
		cmd->name);
	va_end(ap);
	return CLI_EXIT_USAGE;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int cli_names_folder(const char *path)
{
	const char *slash = strrchr(path, '/');
	return !ims_plain_name(slash ? slash + 1 : path);
}

double cli_peek_double(int argc, char **argv, const char *name, double dflt,
		       double min, double max)
{
	const size_t len = strlen(name);
	double v = dflt;
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2) || strncmp(a + 2, name, len))
			continue;
		const char *val = a[2 + len] == '=' ? a + 3 + len
				  : !a[2 + len] && i + 1 < argc ? argv[++i]
								: NULL;
		char *end;
		errno = 0;
		double x = val ? strtod(val, &end) : NAN;
		v = val && !errno && end != val && !*end && x >= min && x <= max
			    ? x
			    : dflt;
	}
	return v;
}

int cli_parse_size(const char *s, uint64_t *out)
{
	if (!s || !*s || *s == '-')
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -1;
	double mult = 1;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mult = 1024.0; end++; break;
	case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
	case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
	case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: return -1;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return -1;
	v *= mult;
	if (v > 1.8e19)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

const char *cli_format_bytes(double b, char *buf, size_t len)
{
	const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (b >= 1024 && u < 4) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
	return buf;
}

static const cli_opt *find_long(const cli_opt *opts, const char *name,
				size_t len)
{
	for (const cli_opt *o = opts; o->name; o++)
		if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
			return o;
	return NULL;
}

static const cli_opt *find_short(const cli_opt *opts, char c)
{
	for (const cli_opt *o = opts; o->name; o++)
		if (o->short_name && o->short_name == c)
			return o;
	return NULL;
}

static int in_range(const cli_opt *o, double v)
{
	if (o->min == 0 && o->max == 0)
		return 1;
	return v >= o->min && v <= o->max;
}

static int set_value(const cli_command *cmd, const cli_opt *o,
		     const char *val)
{
	switch (o->type) {
	case CLI_FLAG:
		*(int *)o->dst = 1;
		return 0;
	case CLI_STRING:
		if (!*val)
			return cli_usage_error(cmd, "--%s needs a non-empty value", o->name);
		*(const char **)o->dst = val;
		return 0;
	case CLI_MULTI: {
		cli_strings *m = o->dst;
		const char **n = realloc(m->items, sizeof(*n) * (size_t)(m->count + 1));
		/* memory running out is no bad usage: exit 1, not 2 */
		if (!n) {
			cli_error("%s: out of memory", cmd->name);
			return CLI_EXIT_FAIL;
		}
		n[m->count++] = val;
		m->items = n;
		return 0;
	}
	case CLI_INT: {
		char *end;
		errno = 0;
		long v = strtol(val, &end, 10);
		if (errno || end == val || *end || v < -2147483647L || v > 2147483647L)
			return cli_usage_error(cmd, "--%s expects an integer, got '%s'",
					       o->name, val);
		/* whole-number bounds in whole numbers: %g gave "1.04858e+06" */
		if (!in_range(o, (double)v))
			return cli_usage_error(cmd, "--%s must be between %.0f and %.0f, got %ld",
					       o->name, o->min, o->max, v);
		*(int *)o->dst = (int)v;
		return 0;
	}
	case CLI_U64: {
		uint64_t v;
		if (cli_parse_u64(val, &v) != 0)
			return cli_usage_error(cmd, "--%s expects a non-negative integer, got '%s'",
					       o->name, val);
		if (!in_range(o, (double)v))
			return cli_usage_error(cmd, "--%s must be between %.0f and %.0f, got %s",
					       o->name, o->min, o->max, val);
		*(uint64_t *)o->dst = v;
		return 0;
	}
	case CLI_DOUBLE: {
		char *end;
		errno = 0;
		double v = strtod(val, &end);
		if (errno || end == val || *end || !isfinite(v))
			return cli_usage_error(cmd, "--%s expects a number, got '%s'",
					       o->name, val);
		if (!in_range(o, v))
			return cli_usage_error(cmd, "--%s must be between %g and %g, got %s",
					       o->name, o->min, o->max, val);
		*(double *)o->dst = v;
		return 0;
	}
	case CLI_SIZE: {
		uint64_t v;
		if (cli_parse_size(val, &v) != 0)
			return cli_usage_error(cmd, "--%s expects a size such as 512M or 2G, got '%s'",
					       o->name, val);
		if (!in_range(o, (double)v))
			return cli_usage_error(cmd, "--%s must be between %.0f and %.0f bytes, got %s",
					       o->name, o->min, o->max, val);
		*(uint64_t *)o->dst = v;
		return 0;
	}
	}
	return CLI_EXIT_USAGE;
}

void cli_print_help(const cli_command *cmd, const cli_opt *opts)
{
	if (muted)
		return;
	printf("usage: %s\n\n%s\n", cmd->usage, cmd->summary);
	int any = 0;
	for (const cli_opt *o = opts; o->name; o++)
		any = 1;
	if (any)
		printf("\noptions:\n");
	for (const cli_opt *o = opts; o->name; o++) {
		char left[96];
		int n;
		if (o->short_name)
			n = snprintf(left, sizeof(left), "  -%c, --%s", o->short_name, o->name);
		else
			n = snprintf(left, sizeof(left), "      --%s", o->name);
		if (o->metavar && n > 0 && (size_t)n < sizeof(left))
			snprintf(left + n, sizeof(left) - (size_t)n, " %s", o->metavar);
		if (strlen(left) > 28)
			printf("%s\n%30s", left, "");
		else
			printf("%-30s", left);
		/* Indent continuation lines of multi-line help. */
		for (const char *h = o->help; *h; h++) {
			putchar(*h);
			if (*h == '\n')
				printf("%30s", "");
		}
		putchar('\n');
	}
	printf("  -h, --help                  show this help and exit\n");
	if (cmd->details && *cmd->details)
		printf("\n%s\n", cmd->details);
}

int cli_parse(const cli_command *cmd, const cli_opt *opts, int argc,
	      char **argv, const char **pos, int min_pos, int max_pos,
	      int *n_pos)
{
	int np = 0, only_pos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (only_pos || a[0] != '-' || a[1] == '\0') {
			if (np >= max_pos)
				return cli_usage_error(cmd, "unexpected argument '%s'", a);
			pos[np++] = a;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			only_pos = 1;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			cli_print_help(cmd, opts);
			return -1;
		}
		const cli_opt *o;
		const char *val = NULL;
		if (a[1] == '-') {
			const char *name = a + 2;
			const char *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			o = find_long(opts, name, len);
			if (!o)
				return cli_usage_error(cmd, "unknown option '--%.*s'", (int)len, name);
			if (eq) {
				if (o->type == CLI_FLAG)
					return cli_usage_error(cmd, "--%s takes no value", o->name);
				val = eq + 1;
			}
		} else {
			o = find_short(opts, a[1]);
			if (!o || (a[2] != '\0' && o->type == CLI_FLAG))
				return cli_usage_error(cmd, "unknown option '%s'", a);
			if (a[2] != '\0')
				val = a + 2; /* -j4, as getopt takes it */
		}
		if (o->type != CLI_FLAG && !val) {
			if (i + 1 >= argc)
				return cli_usage_error(cmd, "--%s needs a value (%s)", o->name,
						       o->metavar ? o->metavar : "VALUE");
			val = argv[++i];
		}
		int rc = set_value(cmd, o, val);
		if (rc)
			return rc;
	}
	if (np < min_pos)
		return cli_usage_error(cmd, "missing arguments; usage: %s", cmd->usage);
	*n_pos = np;
	return 0;
}

/* Three comma-separated finite numbers ("123.7,116.3,103.5"). */
int cli_parse_triple(const char *s, float out[3])
{
	const char *p = s;
	for (int c = 0; c < 3; c++) {
		char *end;
		errno = 0;
		double v = strtod(p, &end);
		if (errno || end == p || !isfinite(v) || fabs(v) > 1e30)
			return -1;
		out[c] = (float)v;
		if (c < 2) {
			if (*end != ',')
				return -1;
			p = end + 1;
		} else if (*end) {
			return -1;
		}
	}
	return 0;
}

int cli_std_ok(const float std[3])
{
	for (int c = 0; c < 3; c++)
		if (!(std[c] > 0 && isfinite(1.0f / std[c])))
			return 0;
	return 1;
}

static void subcommand_usage(FILE *f, const cli_subcommand *cmds,
			     const char *usage_line, const char *intro)
{
	fprintf(f, "%s\n\n%s\n\ncommands:\n", usage_line, intro);
	for (const cli_subcommand *c = cmds; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
	fprintf(f, "\n'imshard <command> --help' describes a command's options.\n"
		   "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

int cli_exit(int rc)
{
	/* stdout is a file or a pipe, buffered: a full disk or a closed
	 * reader shows only when it is flushed, here, after the command
	 * thought it had succeeded */
	errno = 0;
	if ((fflush(stdout) != 0 || ferror(stdout)) && rc == CLI_EXIT_OK) {
		cli_error("cannot write to standard output: %s",
			  errno ? strerror(errno) : "write error");
		return CLI_EXIT_FAIL;
	}
	return rc;
}

void cli_no_file_size_kill(void)
{
	signal(SIGXFSZ, SIG_IGN);
}

static int run_subcommand(int argc, char **argv, const cli_subcommand *cmds,
			  const char *usage_line, const char *intro,
			  void (*before)(char **argv))
{
	cli_no_file_size_kill();
	if (argc < 2) {
		subcommand_usage(stderr, cmds, usage_line, intro);
		return CLI_EXIT_USAGE;
	}
	const char *name = argv[1];
	if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
		subcommand_usage(stdout, cmds, usage_line, intro);
		return CLI_EXIT_OK;
	}
	if (!strcmp(name, "--version")) {
		printf("imshard %s\n", IMS_VERSION_STRING);
		return CLI_EXIT_OK;
	}
	for (const cli_subcommand *c = cmds; c->name; c++) {
		if (strcmp(c->name, name))
			continue;
		if (before)
			before(argv);
		return c->fn(argc - 1, argv + 1);
	}
	cli_error("unknown command '%s' (see 'imshard --help')", name);
	return CLI_EXIT_USAGE;
}

int cli_run_subcommand(int argc, char **argv, const cli_subcommand *cmds,
		       const char *usage_line, const char *intro,
		       void (*before)(char **argv))
{
	return cli_exit(run_subcommand(argc, argv, cmds, usage_line, intro,
				       before));
}
