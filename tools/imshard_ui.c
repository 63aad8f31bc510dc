/*
 * imshard_ui.c - the data side's progress line, signal handling, and the
 * packing flags and display that pack and convert share (imshard.h).
 */
#define _GNU_SOURCE
#include "imshard.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void draw(cli_progress *p, double now, int final)
{
	double el = now - p->start;
	double rate = el > 0 ? (double)p->done / el : 0;
	char eta[32] = "";
	if (p->total && rate > 0 && p->done < p->total) {
		double s = (double)(p->total - p->done) / rate;
		snprintf(eta, sizeof(eta), " ETA %d:%02d", (int)(s / 60), (int)s % 60);
	}
	if (p->total)
		fprintf(stderr, "%simshard: %s: %llu/%llu (%.1f%%) %.0f/s%s%s",
			p->tty ? "\r" : "", p->label, (unsigned long long)p->done,
			(unsigned long long)p->total,
			100.0 * (double)p->done / (double)p->total, rate, eta,
			p->tty ? "\033[K" : "\n");
	else
		fprintf(stderr, "%simshard: %s: %llu %.0f/s%s", p->tty ? "\r" : "",
			p->label, (unsigned long long)p->done, rate,
			p->tty ? "\033[K" : "\n");
	(void)final;
	p->drawn = 1;
	p->last_draw = now;
}

void cli_progress_start(cli_progress *p, const char *label, uint64_t total,
			int quiet)
{
	memset(p, 0, sizeof(*p));
	p->label = label;
	p->total = total;
	p->quiet = quiet;
	p->tty = isatty(STDERR_FILENO);
	p->start = p->last_draw = ims_now();
}

void cli_progress_update(cli_progress *p, uint64_t done)
{
	p->done = done;
	if (p->quiet)
		return;
	double now = ims_now();
	double every = p->tty ? 0.1 : 10.0;
	if (now - p->last_draw >= every)
		draw(p, now, 0);
}

void cli_progress_finish(cli_progress *p)
{
	if (p->quiet)
		return;
	if (p->tty && p->drawn)
		fprintf(stderr, "\r\033[K");
}

static volatile int interrupted_flag;

static void on_signal(int sig)
{
	interrupted_flag = sig;
}

void cli_catch_signals(void)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* a signal ignored from the start stays ignored: a script's
	 * background job or nohup's, whose Ctrl-C is the foreground's */
	const int sigs[] = {SIGINT, SIGTERM};
	for (int i = 0; i < 2; i++)
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
}

int cli_interrupted(void)
{
	return interrupted_flag != 0;
}

volatile int *cli_interrupt_flag(void)
{
	return &interrupted_flag;
}

void cli_pack_ui_start(cli_pack_ui *u, const char *label, uint64_t total, int quiet)
{
	memset(u, 0, sizeof(*u));
	u->quiet = quiet;
	cli_progress_start(&u->progress, label, total, quiet);
}

void cli_pack_ui_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)total;
	cli_progress_update(&((cli_pack_ui *)ctx)->progress, done);
}

void cli_say_rest(uint64_t total, const char *one, const char *many)
{
	if (total > CLI_NAMED)
		cli_say("  ... and %llu more %s",
			(unsigned long long)(total - CLI_NAMED),
			ims_plural(total - CLI_NAMED, one, many));
}

void cli_pack_ui_skipped(void *ctx, uint64_t row, const char *path, const char *why)
{
	cli_pack_ui *u = ctx;
	if (!u->quiet && u->skipped < CLI_NAMED) {
		if (u->progress.tty && u->progress.drawn)
			fputs("\r\033[K", stderr);
		cli_say("skipped '%s' (row %llu): %s", path, (unsigned long long)row, why);
	}
	u->skipped++;
}

void cli_pack_ui_finish(cli_pack_ui *u)
{
	cli_progress_finish(&u->progress);
	if (!u->quiet && u->skipped > CLI_NAMED)
		fprintf(stderr, "imshard: ... and %llu more skipped %s\n",
			(unsigned long long)(u->skipped - CLI_NAMED),
			ims_plural(u->skipped - CLI_NAMED, "file", "files"));
}

void cli_pack_flags_init(cli_pack_flags *f)
{
	memset(f, 0, sizeof(*f));
	f->max_errors = -1; /* quality 0: not given (pack_run's default, 95) */
}

int cli_pack_flags_apply(const cli_command *cmd, const cli_pack_flags *f,
			 pack_opts *o)
{
	if (f->shards && f->shard_size)
		return cli_usage_error(cmd, "give --shards or --shard-size, not both");
	int geometry = f->resize || f->max_size || f->center_crop;
	int enc = f->encoding ? pack_encoding_parse(f->encoding)
			      : (geometry ? PACK_JPEG : PACK_KEEP);
	if (enc < 0)
		return cli_usage_error(cmd, "--encoding must be keep, jpeg, png or raw, got '%s'",
				       f->encoding);
	if (enc == PACK_KEEP && geometry)
		return cli_usage_error(cmd,
				       "--resize, --max-size and --center-crop change pixels: use --encoding jpeg, png or raw");
	if (f->check_decode && enc != PACK_KEEP)
		return cli_usage_error(cmd, "--check-decode applies to --encoding keep only (re-encoding always decodes)");
	/* Only JPEG has a quality: with another encoding it would be
	 * silently ignored. */
	if (f->quality && enc != PACK_JPEG)
		return cli_usage_error(cmd, "--quality applies to --encoding jpeg only, and the encoding is %s%s",
				       pack_encoding_name((pack_encoding)enc),
				       f->encoding ? "" : " (the default without a resize option)");
	pack_opts_init(o);
	o->encoding = (pack_encoding)enc;
	o->shards = f->shards;
	o->shard_bytes = f->shard_size;
	o->resize = f->resize;
	o->max_size = f->max_size;
	o->center_crop = f->center_crop;
	o->quality = f->quality;
	o->threads = f->threads;
	o->max_errors = f->max_errors;
	o->force = f->force;
	o->check_decode = f->check_decode;
	return 0;
}

