/*
 * cmd_report.c - `imshard report`: one HTML page (and optionally CSV files)
 * from imshard-train log folders. The work is report/'s.
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imshard.h"
#include "report/report.h"

/* Diagnostics printed as warnings; the page lists REP_MAX_DIAGS per run. */
#define SHOWN_DIAGS 20
#define MAX_RUNS 1000

static const cli_command command = {
	"report",
	"imshard report RUNDIR... -o report.html [options]",
	"Draws imshard-train runs (their --log-dir folders) as one self-contained\n"
	"HTML page: loss and accuracy against epoch and wall time, images/s per\n"
	"rank, the per-rank step-time split with the busy max/min ratio, loader\n"
	"stalls, GPU use when logged, the options; and across runs, speedup and\n"
	"efficiency against world size both ways, explained, time to a target\n"
	"accuracy and final accuracy against batch size and world size.",
	"Each RUNDIR holds metrics.jsonl (required) and summary.json (absent when\n"
	"the run died: what metrics.jsonl holds is still drawn, and the page says\n"
	"the run has no summary). Malformed or truncated lines are skipped and\n"
	"named as FILE:LINE on stderr and on the page; so is what else of a\n"
	"folder cannot be used as written, each saying what was done (a value\n"
	"ignored, text shown with \\xHH, a file too large not drawn).\n"
	"\n"
	"Runs that are the same job at different world sizes (same options but\n"
	"world, lr, seed, epochs and other options that do not change the work of\n"
	"a step; same batch per rank, or same global batch; started from the same\n"
	"--init file's bytes, or all from scratch) are compared with the\n"
	"1-rank run: speedup_speed = W x steady images/s per rank at W / that at\n"
	"1 rank, speedup_time = train_s(1) / train_s(W) (per image when the runs\n"
	"trained different image counts), efficiency = speedup / W; the page\n"
	"takes train_s apart to say why the two differ. docs/TRAINING.md\n"
	"(\"Reports\") has every definition and the CSV columns.\n"
	"\n"
	"The page uses no script, font or URL outside itself: it opens offline\n"
	"and prints. Output files are written all or none (to temporaries, then\n"
	"renamed: a failure leaves the old files as they were); the folder of\n"
	"-o is created when missing (a failed run removes the folders it made\n"
	"for -o and --csv while empty). -o is a new name or a regular file to\n"
	"replace, never a run's own file in a RUNDIR, there or not yet\n"
	"(metrics.jsonl, summary.json, eval.json, confusion.csv, per_class.csv,\n"
	"predictions.csv, checkpoint.safetensors, imshard-train.lock), nor one\n"
	"of the --csv files, which are new names or regular files to replace\n"
	"too. A summary line per scaling comparison goes to stdout, and a\n"
	"line naming what was written to stderr, unless --quiet.\n"
	"\n"
	"Exit status: 0 written (even with skipped lines), 1 a RUNDIR without\n"
	"metrics.jsonl or a write failure, 2 bad usage.\n"
	"\n"
	"Example:\n"
	"  imshard report runs/np1 runs/np2 -o report.html --target-acc 0.9 --csv csv/"};

/* mkdir -p of the folder that will hold path: *dir is set to it and
 * *created to the outermost folder made (NULL when it was there), both
 * malloc'd, for ims_rmdir_created after a failure. */
static int make_parent(const char *path, char **dir, char **created,
		       ims_error *err)
{
	char *copy = strdup(path);
	*dir = copy ? strdup(dirname(copy)) : NULL;
	free(copy);
	if (!*dir)
		return ims_fail(err, IMS_ENOMEM, "out of memory");
	return ims_mkdir_p_created(*dir, created, err);
}

/* 1 when a and b name one file, or would once written: the same file
 * (ims_same_file), the same name in the same existing folder, or the same
 * path once resolved as written (a "sub/.." whose sub is made for -o).
 * The copies dirname and basename cut are on the stack: an answer that
 * needed memory could be a wrong "not the same" when none is left. A path
 * longer than PATH_MAX names nothing that can be written. */
static int same_path(const char *a, const char *b)
{
	if (ims_same_file(a, b) ||
	    (ims_path_within_loosely(a, b) && ims_path_within_loosely(b, a)))
		return 1;
	char da[PATH_MAX], db[PATH_MAX], ba[PATH_MAX], bb[PATH_MAX];
	if (strlen(a) >= PATH_MAX || strlen(b) >= PATH_MAX)
		return 0;
	strcpy(da, a);
	strcpy(ba, a);
	strcpy(db, b);
	strcpy(bb, b);
	return strcmp(basename(ba), basename(bb)) == 0 && ims_same_file(dirname(da), dirname(db));
}

static void print_summary(const rep_report *r)
{
	for (size_t g = 0; g < r->n_groups; g++) {
		const rep_group *gr = &r->groups[g];
		if (gr->baseline < 0) {
			cli_print("no 1-rank run to compare with for %s", gr->key);
			continue;
		}
		for (size_t a = 0; a < gr->n_members; a++) {
			if ((long)gr->members[a] == gr->baseline)
				continue;
			const rep_compare *c = &gr->cmp[a];
			cli_print("%s (%d %s) vs %s, same %s: speedup_speed %.3g "
				  "(efficiency %.3g), speedup_time %.3g (efficiency %.3g)%s",
			       r->runs[gr->members[a]].label, r->stats[gr->members[a]].world,
			       ims_plural((uint64_t)r->stats[gr->members[a]].world, "rank", "ranks"),
			       r->runs[gr->baseline].label,
			       gr->mode == REP_SCALE_RANK_BATCH ? "batch per rank" : "global batch",
			       c->speedup_speed, c->eff_speed, c->speedup_time, c->eff_time,
			       c->time_per_image ? " per image" : "");
		}
	}
	if (r->opts.target_acc >= 0)
		for (size_t i = 0; i < r->n_runs; i++) {
			const rep_stats *s = &r->stats[i];
			if (s->target_reached)
				cli_print("%s: top-1 %.4g reached after %g epochs, %.3f s",
				       r->runs[i].label, r->opts.target_acc, s->target_epochs,
				       s->target_wall_s);
			else
				cli_print("%s: top-1 %.4g not reached (best %.4g)", r->runs[i].label,
				       r->opts.target_acc, s->best_top1);
		}
}

int cmd_report(int argc, char **argv)
{
	const char *out = NULL, *csv = NULL, *title = NULL;
	double target = -1;
	int quiet = 0;
	const cli_opt opts[] = {
		{"output", 'o', CLI_STRING, &out, "report.html", "the page to write (required)", 0, 0},
		{"target-acc", 0, CLI_DOUBLE, &target, "A",
		 "report time and epochs to validation top-1 >= A (a fraction, 0..1)", 0, 1},
		{"csv", 0, CLI_STRING, &csv, "DIR",
		 "also write the series as CSV files into DIR (created when missing)", 0, 0},
		{"title", 0, CLI_STRING, &title, "T", "the page's title (default \"imshard run report\")", 0, 0},
		{"quiet", 'q', CLI_FLAG, &quiet, NULL, "no summary lines and no warnings on stderr", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char **pos = calloc(MAX_RUNS, sizeof(*pos));
	if (!pos) {
		cli_error("report: out of memory");
		return CLI_EXIT_FAIL;
	}
	int np;
	int rc = cli_parse(&command, opts, argc, argv, pos, 1, MAX_RUNS, &np);
	if (rc) {
		free(pos);
		return rc < 0 ? CLI_EXIT_OK : rc;
	}
	if (!out) {
		free(pos);
		return cli_usage_error(&command, "-o report.html is required");
	}
	struct stat so;
	if (stat(out, &so) == 0 && S_ISDIR(so.st_mode)) {
		free(pos);
		return cli_usage_error(&command, "-o '%s' is a folder: name the page to "
				       "write, e.g. '%s/report.html'",
				       out, out);
	}
	/* the page is renamed into place: a FIFO or a device there (say
	 * /dev/null) would be replaced by it, not written to */
	if (stat(out, &so) == 0 && !S_ISREG(so.st_mode)) {
		free(pos);
		return cli_usage_error(&command, "-o '%s' is %s, not a regular file: name "
				       "a file to write",
				       out, ims_file_kind(so.st_mode));
	}
	if (csv && stat(csv, &so) == 0 && !S_ISDIR(so.st_mode)) {
		free(pos);
		return cli_usage_error(&command, "--csv '%s' is %s: name a folder for "
				       "the CSV files",
				       csv, ims_file_kind(so.st_mode));
	}
	/* -o, not there yet, named as --csv or a folder above it: the CSV
	 * files would go in, then the page could not be renamed onto the
	 * folder they made */
	if (csv && ims_path_within_loosely(csv, out)) {
		free(pos);
		return cli_usage_error(&command, "--csv '%s' is -o '%s' or lies inside "
				       "it: name another folder for the CSV files",
				       csv, out);
	}
	/* the page would be replaced by a CSV file written after it; a CSV
	 * file is renamed into place as the page is, so what is at its name
	 * must be a regular file (found after the page and the CSV files
	 * before it were written, otherwise) */
	for (int k = 0; csv && rep_csv_names[k]; k++) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s", csv, rep_csv_names[k]);
		if (stat(p, &so) == 0 && !S_ISREG(so.st_mode)) {
			free(pos);
			return cli_usage_error(&command, "--csv '%s' holds %s at '%s', "
					       "where a CSV file is written: move it, or "
					       "name another folder",
					       csv, ims_file_kind(so.st_mode), p);
		}
		if (same_path(out, p)) {
			free(pos);
			return cli_usage_error(&command, "-o '%s' is one of the CSV files "
					       "written into --csv '%s': write the page "
					       "elsewhere",
					       out, csv);
		}
	}
	/* one run named twice would be drawn and compared with itself */
	for (int i = 0; i < np; i++)
		for (int k = 0; k < i; k++)
			if (ims_same_file(pos[i], pos[k])) {
				int u = cli_usage_error(&command, "'%s' and '%s' are the same "
							"run: name each run once",
							pos[k], pos[i]);
				free(pos);
				return u;
			}
	/* the page must not replace what it is made from, nor take the name
	 * of a file the trainer writes into a run folder: one absent now
	 * (summary.json of a run still going, eval.json before an
	 * evaluation) would be read as the page by the next report, or the
	 * trainer would replace the page; checkpoint.safetensors would be
	 * lost */
	for (int i = 0; i < np; i++) {
		static const char *const own[] = {
			"metrics.jsonl", "summary.json", "eval.json", "confusion.csv",
			"per_class.csv", "predictions.csv", "checkpoint.safetensors",
			"imshard-train.lock"};
		for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++) {
			char p[4200];
			snprintf(p, sizeof(p), "%s/%s", pos[i], own[k]);
			if (same_path(out, p)) {
				int u = cli_usage_error(&command,
							"-o '%s' is run '%s''s %s, which %s: "
							"write it elsewhere",
							out, pos[i], own[k],
							k < 4 ? "the report reads"
							      : "imshard-train writes");
				free(pos);
				return u;
			}
		}
	}
	rep_opts o = {title, target};
	rep_report r;
	rep_report_init(&r, &o);
	ims_error err;
	int status = CLI_EXIT_FAIL;
	/* -o's folder and --csv, and the outermost folder of each this run
	 * made: a failed run takes them back while empty */
	char *page_dir = NULL, *page_made = NULL, *csv_made = NULL;
	for (int i = 0; i < np; i++)
		if (rep_report_add_run(&r, pos[i], &err) < 0) {
			cli_error("report: %s", err.msg);
			goto done;
		}
	if (rep_report_analyze(&r, &err) < 0) {
		cli_error("report: %s", err.msg);
		goto done;
	}
	size_t shown = 0, total = 0, kept = 0;
	for (size_t i = 0; i < r.n_runs; i++) {
		const rep_run *run = &r.runs[i];
		total += run->diags.n_total;
		kept += run->diags.n;
		for (size_t k = 0; k < run->diags.n && shown < SHOWN_DIAGS; k++, shown++)
			/* each says what was done: a line skipped, a value
			 * ignored, text shown with \xHH, a file not drawn */
			cli_warn(quiet, "report: %s", run->diags.list[k]);
	}
	/* the page keeps REP_MAX_DIAGS per run: past them it only counts */
	if (total > shown && kept == total)
		cli_warn(quiet, "report: %zu more diagnostics (listed in the report)",
			 total - shown);
	else if (total > shown)
		cli_warn(quiet, "report: %zu more diagnostics (the report lists %zu of "
			 "the %zu, the first %d of each run)",
			 total - shown, kept, total, REP_MAX_DIAGS);
	/* both folders first: a --csv that cannot be made leaves no page */
	/* the page and the CSV files all or none: a failure part way (a
	 * full disk) leaves no new page beside half-new CSV files */
	if (make_parent(out, &page_dir, &page_made, &err) < 0 ||
	    (csv && ims_mkdir_p_created(csv, &csv_made, &err) < 0) ||
	    rep_report_write(&r, out, csv, &err) < 0) {
		cli_error("report: %s", err.msg);
		goto done;
	}
	/* the page is the command's product: say where it went, or a run
	 * without --target-acc or a scaling group finishes without a word */
	if (csv)
		cli_info(quiet, "report: wrote '%s' (%zu %s) and its CSV files into '%s'", out,
			 r.n_runs, ims_plural(r.n_runs, "run", "runs"), csv);
	else
		cli_info(quiet, "report: wrote '%s' (%zu %s)", out, r.n_runs,
			 ims_plural(r.n_runs, "run", "runs"));
	if (!quiet)
		print_summary(&r);
	status = CLI_EXIT_OK;
done:
	/* --csv first: it may lie inside a folder made for -o */
	if (status != CLI_EXIT_OK) {
		ims_rmdir_created(csv, csv_made);
		ims_rmdir_created(page_dir, page_made);
	}
	free(csv_made);
	free(page_made);
	free(page_dir);
	rep_report_release(&r);
	free(pos);
	return status;
}
