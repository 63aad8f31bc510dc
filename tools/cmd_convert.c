/*
 * cmd_convert.c - `imshard convert`: a downloaded dataset, in its own
 * layout, into packed splits in one command.
 *
 * The workflow (adapter -> subsets -> lists -> pack each split) is
 * pack_convert's (pack/pack.h); this command parses options and prints
 * what its callbacks and report say.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imshard.h"
#include "datasets/datasets.h"
#include "pack/pack.h"

static const cli_command command = {
	"convert",
	"imshard convert DATASET ROOT -o OUTDIR [options]",
	"Converts a dataset as downloaded into packed splits: OUTDIR/<split>.json\n"
	"with its shards, OUTDIR/<split>.lst and OUTDIR/classes.txt (line i =\n"
	"label i). DATASET is one of: folder, caltech256, fruits, inat2017,\n"
	"cifar10, imagenet.",
	"Datasets (docs/datasets.md has the layouts and label conventions):\n"
	"  folder      one class per subfolder; --val-ratio/--test-ratio split\n"
	"  caltech256  256_ObjectCategories; 257 classes (--no-clutter: 256);\n"
	"              stratified --val-ratio (default 0.2)\n"
	"  fruits      fresh/rotten fruits: dataset/train and dataset/test, found\n"
	"              however deeply nested, any capitalisation\n"
	"  inat2017    train2017.json/val2017.json; --label species|supercategory,\n"
	"              --classes A,B,... keeps some classes\n"
	"  cifar10     binary batches, stored as raw 32x32x3 pixels\n"
	"  imagenet    ILSVRC2012, Kaggle or devkit layout; labels are the\n"
	"              sorted-wnid index\n\n"
	"Class-balanced subsets: --per-class-train N, --per-class-val M,\n"
	"--per-class-test K take that many images of every class from that split\n"
	"(--train-total/--val-total divide a total evenly across the classes);\n"
	"chosen with --seed, so the same seed gives the same subset. A class with\n"
	"fewer images is an error unless --allow-short. Splits never share an\n"
	"image.\n\n"
	"Records are shuffled by default, with --seed, after any subset: every\n"
	"shard then mixes the classes (readers that take whole shards, such as\n"
	"--shard-owning, need that). The manifests record it (\"shuffled\": true);\n"
	"OUTDIR/<split>.lst lists the rows in the order packed. --no-shuffle\n"
	"keeps the dataset's order (sorted by class for most layouts), recorded\n"
	"as not shuffled.\n\n"
	"Pack options apply to every split (see 'imshard pack --help').\n\n"
	"All or nothing: every split (manifests, shards, lists) and classes.txt\n"
	"is written into OUTDIR/.imshard-convert first, then switched in\n"
	"together. On a failure or interruption OUTDIR keeps its earlier splits,\n"
	"all of them (the error says which). Existing splits are not replaced\n"
	"without --force, which also removes a split of an earlier convert that\n"
	"this one does not write (train, val and test are a set). The run holds\n"
	"the splits' locks (OUTDIR/<split>.lock): a split being packed by\n"
	"another process stops it before anything is written. Nothing is\n"
	"written outside OUTDIR; until the switch it needs room for both sets.\n\n"
	"Exit status: 0 converted, 1 failed (the message names the file at fault),\n"
	"2 bad usage."};

/* Options only some datasets take. */
typedef struct only_for {
	const char *option;
	const char *datasets; /* comma-separated */
	int given;
} only_for;

static int dataset_in(const char *name, const char *list)
{
	size_t n = strlen(name);
	for (const char *p = list; *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		if (!c)
			break;
		p = c + 1;
	}
	return 0;
}

/* Subset sizes for a split, from --per-class-<split> / --<split>-total. */
typedef struct split_size {
	const char *split;
	int per_class;
	int total;
} split_size;

/* What the command shows while converting: pack's progress line and
 * skipped files, per split, and a summary line per split. */
typedef struct convert_ui {
	cli_pack_ui pack;
	int quiet;
	int shards; /* --shards, per split (0: by size) */
	int packing; /* between split_begin and split_end */
	char label[64];
} convert_ui;

static void on_note(void *ctx, const char *msg)
{
	cli_info(((convert_ui *)ctx)->quiet, "note: %s", msg);
}

static void on_short_classes(void *ctx, const char *split,
			     const pack_short_class *c, size_t n)
{
	convert_ui *u = ctx;
	if (u->quiet)
		return;
	cli_warn(0, "convert: %s: %zu %s fewer images than wanted and gave all they had:",
		 split, n, ims_plural(n, "class had", "classes had"));
	for (size_t i = 0; i < n && i < CLI_NAMED; i++)
		cli_say("  '%s' (label %zu): %zu of %zu wanted",
			c[i].name, c[i].label, c[i].available, c[i].wanted);
	cli_say_rest(n, "class", "classes");
}

static void on_split_begin(void *ctx, const char *split, uint64_t rows)
{
	convert_ui *u = ctx;
	snprintf(u->label, sizeof(u->label), "convert %s", split);
	cli_pack_ui_start(&u->pack, u->label, rows, u->quiet);
	u->packing = 1;
}

static void on_split_end(void *ctx, const pack_convert_split *s)
{
	convert_ui *u = ctx;
	cli_pack_ui_finish(&u->pack);
	u->packing = 0;
	/* Even with --quiet: the split is not laid out as asked. */
	if (s->shards_left_out)
		cli_warn(0, "convert: %s: wrote %d of the %d shards asked for (--shards %d): the rows of the other %d %s were all skipped (%llu skipped %s in all, listed in '%s')",
			 s->name, s->shards, u->shards, u->shards, s->shards_left_out,
			 ims_plural(s->shards_left_out, "shard", "shards"),
			 (unsigned long long)s->skipped, ims_plural(s->skipped, "file", "files"),
			 s->errors);
	if (u->quiet)
		return;
	cli_say("convert: %s: %llu %s, %zu %s, %llu to %llu per class, %llu skipped%s%s%s, %.1f s",
		s->name, (unsigned long long)s->records,
		ims_plural(s->records, "record", "records"), s->classes,
		ims_plural(s->classes, "class", "classes"),
		(unsigned long long)s->fewest, (unsigned long long)s->most,
		(unsigned long long)s->skipped, s->skipped ? " (see '" : "",
		s->skipped ? s->errors : "", s->skipped ? "')" : "", s->seconds);
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	cli_pack_ui_progress(&((convert_ui *)ctx)->pack, done, total);
}

static void on_skipped(void *ctx, uint64_t row, const char *path, const char *why)
{
	cli_pack_ui_skipped(&((convert_ui *)ctx)->pack, row, path, why);
}

int cmd_convert(int argc, char **argv)
{
	const char *out = NULL, *label = NULL, *keep = NULL, *exts = NULL;
	/* NaN: --val-ratio not given (the option refuses non-finite values);
	 * both shares are checked below with the library's rule */
	double val_ratio = NAN, test_ratio = 0;
	int no_clutter = 0, recursive = 0, allow_short = 0, quiet = 0, no_shuffle = 0;
	uint64_t seed = 0;
	cli_pack_flags pf;
	cli_pack_flags_init(&pf);
	split_size sizes[PACK_N_SUBSET_SPLITS] = {{"train", 0, 0}, {"val", 0, 0}, {"test", 0, 0}};
	const cli_opt opts[] = {
		{"output", 'o', CLI_STRING, &out, "OUTDIR", "where to write the splits (required; not in a folder\nunder ROOT)", 0, 0},
		{"seed", 0, CLI_U64, &seed, "S", "seed of the splits, subsets and shuffle (default 0)", 0, 0},
		{"no-shuffle", 0, CLI_FLAG, &no_shuffle, NULL,
		 "keep each split in the dataset's list order (sorted\nby class for most) instead of shuffling it", 0, 0},
		{"val-ratio", 0, CLI_DOUBLE, &val_ratio, "R",
		 "folder, caltech256, fruits: stratified validation share\n(caltech256 default 0.2; fruits takes it from train),\nin [0, 1)", 0, 0},
		{"test-ratio", 0, CLI_DOUBLE, &test_ratio, "R", "folder: stratified test share, in [0, 1)", 0, 0},
		{"no-clutter", 0, CLI_FLAG, &no_clutter, NULL, "caltech256: drop 257.clutter (256 classes)", 0, 0},
		{"label", 0, CLI_STRING, &label, "KIND", "inat2017: species (default) or supercategory", 0, 0},
		{"classes", 0, CLI_STRING, &keep, "A,B,...", "inat2017: keep only these classes", 0, 0},
		{"recursive", 0, CLI_FLAG, &recursive, NULL, "folder: every folder holding images is a class", 0, 0},
		{"exts", 0, CLI_STRING, &exts, "LIST", "folder: extensions to list (default .jpg,.jpeg,.png)", 0, 0},
		{"per-class-train", 0, CLI_INT, &sizes[0].per_class, "N", "take N images of every class from train", 1, 2147483647},
		{"per-class-val", 0, CLI_INT, &sizes[1].per_class, "N", "take N images of every class from val", 1, 2147483647},
		{"per-class-test", 0, CLI_INT, &sizes[2].per_class, "N", "take N images of every class from test", 1, 2147483647},
		{"train-total", 0, CLI_INT, &sizes[0].total, "N", "take N train images, divided evenly across classes", 1, 2147483647},
		{"val-total", 0, CLI_INT, &sizes[1].total, "N", "take N val images, divided evenly across classes", 1, 2147483647},
		{"allow-short", 0, CLI_FLAG, &allow_short, NULL, "a class with too few images gives all it has (reported)", 0, 0},
		CLI_PACK_OPTIONS(&pf),
		{"quiet", 'q', CLI_FLAG, &quiet, NULL,
		 "only errors, and the warning when a split gets fewer\nshards than --shards asked", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[2];
	int np;
	int rc = cli_parse(&command, opts, argc, argv, pos, 2, 2, &np);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	if (!out)
		return cli_usage_error(&command, "-o OUTDIR is required");
	const ds_adapter *ad = ds_adapter_find(pos[0]);
	if (!ad)
		return cli_usage_error(&command,
				       "unknown dataset '%s' (folder, caltech256, fruits, inat2017, cifar10, imagenet)",
				       pos[0]);
	only_for limits[] = {
		{"--val-ratio", "folder,caltech256,fruits", !isnan(val_ratio)},
		{"--test-ratio", "folder", test_ratio != 0},
		{"--no-clutter", "caltech256", no_clutter},
		{"--label", "inat2017", label != NULL},
		{"--classes", "inat2017", keep != NULL},
		{"--recursive", "folder", recursive},
		{"--exts", "folder", exts != NULL}};
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		if (limits[i].given && !dataset_in(ad->name, limits[i].datasets))
			return cli_usage_error(&command, "%s applies to %s, not to %s",
					       limits[i].option, limits[i].datasets, ad->name);
	if (label && strcmp(label, "species") && strcmp(label, "supercategory"))
		return cli_usage_error(&command, "--label must be species or supercategory, got '%s'", label);
	ims_error xerr;
	ims_error_clear(&xerr);
	if (ds_check_split_ratios(isnan(val_ratio) ? 0 : val_ratio, test_ratio, &xerr) < 0)
		return cli_usage_error(&command, "%s", xerr.msg);
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++)
		if (sizes[i].per_class && sizes[i].total)
			return cli_usage_error(&command, "give --per-class-%s or --%s-total, not both",
					       sizes[i].split, sizes[i].split);
	/* the same usage error as `imshard list --exts`, before anything */
	if (exts && ds_scan_check_exts(exts, &xerr) < 0)
		return cli_usage_error(&command, "--exts: %s", xerr.msg);
	pack_convert_opts co;
	pack_convert_opts_init(&co);
	rc = cli_pack_flags_apply(&command, &pf, &co.pack);
	if (rc)
		return rc;

	struct stat st;
	if (stat(pos[1], &st) != 0 || !S_ISDIR(st.st_mode)) {
		cli_error("convert: cannot open dataset root '%s': %s", pos[1],
			  stat(pos[1], &st) != 0 ? "no such folder" : "not a folder");
		return CLI_EXIT_FAIL;
	}

	co.adapter = ad;
	co.root = pos[1];
	co.out_dir = out;
	co.dataset.val_ratio = isnan(val_ratio) ? -1 : val_ratio;
	co.dataset.test_ratio = test_ratio;
	co.dataset.no_clutter = no_clutter;
	co.dataset.label = label;
	co.dataset.keep_classes = keep;
	co.dataset.recursive = recursive;
	co.dataset.exts = exts;
	co.dataset.seed = seed;
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++) {
		co.subset[i].per_class = (size_t)sizes[i].per_class;
		co.subset[i].total = (size_t)sizes[i].total;
	}
	co.allow_short = allow_short;
	co.no_shuffle = no_shuffle;
	convert_ui u;
	memset(&u, 0, sizeof(u));
	u.quiet = quiet;
	u.shards = pf.shards;
	cli_catch_signals();
	co.pack.cancel = cli_interrupt_flag();
	co.pack.progress = on_progress;
	co.pack.skipped = on_skipped;
	co.pack.ctx = &u;
	co.note = on_note;
	co.short_classes = on_short_classes;
	co.split_begin = on_split_begin;
	co.split_end = on_split_end;
	co.ctx = &u;

	pack_convert_report rep;
	ims_error err;
	rc = pack_convert(&co, &rep, &err);
	if (u.packing)
		cli_pack_ui_finish(&u.pack);
	int status = CLI_EXIT_OK;
	if (rc == IMS_EINTR) {
		if (rep.failed_split[0])
			cli_error("convert: interrupted while packing '%s'; %s", rep.failed_split,
				  rep.outcome);
		else
			cli_error("convert: interrupted; %s", rep.outcome);
		status = CLI_EXIT_FAIL;
	} else if (rc < 0 && rep.n_refused) {
		/* the library's message names every class; one line here,
		 * the first few classes under it */
		cli_error("convert: %s: cannot take the subset: %zu %s fewer images "
			  "than wanted (--allow-short takes all a short class has)%s%s",
			  rep.failed_split, rep.n_refused,
			  ims_plural(rep.n_refused, "class has", "classes have"),
			  rep.outcome[0] ? "; " : "", rep.outcome);
		for (size_t i = 0; i < rep.n_refused && i < CLI_NAMED; i++)
			cli_say("  '%s' (label %zu): %zu %s, %zu wanted",
				rep.refused[i].name, rep.refused[i].label,
				rep.refused[i].available,
				ims_plural(rep.refused[i].available, "image", "images"),
				rep.refused[i].wanted);
		cli_say_rest(rep.n_refused, "class", "classes");
		status = rep.stage == PACK_CONVERT_OPTIONS ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
	} else if (rc < 0) {
		cli_error("convert: %s", err.msg);
		status = rep.stage == PACK_CONVERT_OPTIONS ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
	} else if (!quiet) {
		cli_say("convert: wrote %d split%s, classes.txt and lists to '%s' (%s)",
			rep.n_splits, ims_plural(rep.n_splits, "", "s"), out,
			no_shuffle ? "records in the dataset's order, not shuffled" :
				     "records shuffled with --seed");
	}
	pack_convert_report_release(&rep);
	return status;
}
