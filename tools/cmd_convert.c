/*
 * cmd_convert.c - `imshard convert`: a downloaded dataset, in its own
 * layout, into packed splits in one command.
 *
 * The adapter (datasets/ds_<name>.c) reads the layout into lists; this
 * command subsets them, writes the lists and class names, and packs each
 * split through pack_run, the one packing path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imshard.h"
#include "datasets/datasets.h"
#include "pack/pack.h"
#include "recordio/recordio.h"

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
	"Pack options apply to every split (see 'imshard pack --help'). Each split\n"
	"is published atomically by its own manifest; existing splits are not\n"
	"replaced without --force.\n\n"
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

int cmd_convert(int argc, char **argv)
{
	const char *out = NULL, *label = NULL, *keep = NULL, *exts = NULL;
	double val_ratio = -1, test_ratio = 0;
	int no_clutter = 0, recursive = 0, allow_short = 0, quiet = 0;
	uint64_t seed = 0;
	cli_pack_flags pf;
	cli_pack_flags_init(&pf);
	split_size sizes[3] = {{"train", 0, 0}, {"val", 0, 0}, {"test", 0, 0}};
	const cli_opt opts[] = {
		{"output", 'o', CLI_STRING, &out, "OUTDIR", "where to write the splits (required)", 0, 0},
		{"seed", 0, CLI_U64, &seed, "S", "seed of the splits and subsets (default 0)", 0, 0},
		{"val-ratio", 0, CLI_DOUBLE, &val_ratio, "R",
		 "folder, caltech256, fruits: stratified validation share\n(caltech256 default 0.2; fruits takes it from train)", 0, 0.99},
		{"test-ratio", 0, CLI_DOUBLE, &test_ratio, "R", "folder: stratified test share", 0, 0.99},
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
		{"quiet", 'q', CLI_FLAG, &quiet, NULL, "only errors", 0, 0},
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
		{"--val-ratio", "folder,caltech256,fruits", val_ratio >= 0},
		{"--test-ratio", "folder", test_ratio > 0},
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
	if (val_ratio >= 0 && test_ratio > 0 && val_ratio + test_ratio >= 1)
		return cli_usage_error(&command, "--val-ratio plus --test-ratio must be below 1");
	for (int i = 0; i < 3; i++)
		if (sizes[i].per_class && sizes[i].total)
			return cli_usage_error(&command, "give --per-class-%s or --%s-total, not both",
					       sizes[i].split, sizes[i].split);
	pack_opts po;
	rc = cli_pack_flags_apply(&command, &pf, &po);
	if (rc)
		return rc;

	struct stat st;
	if (stat(pos[1], &st) != 0 || !S_ISDIR(st.st_mode)) {
		cli_error("convert: cannot open dataset root '%s': %s", pos[1],
			  stat(pos[1], &st) != 0 ? "no such folder" : "not a folder");
		return CLI_EXIT_FAIL;
	}

	ds_convert_opts co;
	ds_convert_opts_init(&co);
	co.val_ratio = val_ratio;
	co.test_ratio = test_ratio;
	co.no_clutter = no_clutter;
	co.label = label;
	co.keep_classes = keep;
	co.recursive = recursive;
	co.exts = exts;
	co.seed = seed;
	ds_dataset d;
	memset(&d, 0, sizeof(d));
	ims_error err;
	int status = CLI_EXIT_FAIL;
	ds_list sub;
	ds_list_init(&sub);
	if (ad->load(pos[1], &co, &d, &err) < 0) {
		cli_error("convert: %s", err.msg);
		goto done;
	}
	d.adapter = ad;
	for (size_t i = 0; i < d.n_notes; i++)
		cli_info(quiet, "note: %s", d.notes[i]);
	if (d.n_splits == 0) {
		cli_error("convert: the %s adapter found no split under '%s'", ad->name, pos[1]);
		goto done;
	}
	for (int i = 0; i < 3; i++) {
		int found = 0;
		for (int s = 0; s < d.n_splits; s++)
			found |= strcmp(d.splits[s].name, sizes[i].split) == 0;
		if ((sizes[i].per_class || sizes[i].total) && !found) {
			cli_error("convert: --per-class-%s/--%s-total: %s has no %s split", sizes[i].split,
				  sizes[i].split, ad->name, sizes[i].split);
			status = CLI_EXIT_USAGE;
			goto done;
		}
	}
	/* Refuse before writing anything, rather than after the first split. */
	if (ims_mkdir_p(out, &err) < 0) {
		cli_error("convert: %s", err.msg);
		goto done;
	}
	for (int s = 0; s < d.n_splits && !pf.force; s++) {
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s.json", out, d.splits[s].name);
		if (access(p, F_OK) == 0) {
			cli_error("convert: split '%s' already exists; use --force to replace it", p);
			goto done;
		}
	}

	/* Subsets, then lists and class names on disk. */
	for (int s = 0; s < d.n_splits; s++) {
		ds_split_list *sp = &d.splits[s];
		for (int i = 0; i < 3; i++) {
			if (strcmp(sp->name, sizes[i].split) || (!sizes[i].per_class && !sizes[i].total))
				continue;
			ds_subset_report r;
			memset(&r, 0, sizeof(r));
			ds_list_release(&sub);
			ds_list_init(&sub);
			int src = ds_subset(&sp->list, (size_t)sizes[i].per_class,
					    (size_t)sizes[i].total, seed, allow_short, &sub, &r, &err);
			if (src < 0) {
				cli_error("convert: %s: %s", sp->name, err.msg);
				for (size_t c = 0; c < r.n_classes; c++)
					if (r.available && r.available[c] < r.wanted[c])
						fprintf(stderr, "imshard:   '%s' (label %zu): %zu images, %zu wanted\n",
							c < sp->list.n_classes ? sp->list.classes[c] : "?", c,
							r.available[c], r.wanted[c]);
				ds_subset_report_release(&r);
				goto done;
			}
			if (r.short_classes && !quiet) {
				cli_warn(quiet, "convert: %s: %zu classes had fewer images than wanted and gave all they had:",
					 sp->name, r.short_classes);
				for (size_t c = 0; c < r.n_classes; c++)
					if (r.taken[c] < r.wanted[c])
						fprintf(stderr, "imshard:   '%s' (label %zu): %zu of %zu wanted\n",
							c < sp->list.n_classes ? sp->list.classes[c] : "?", c,
							r.taken[c], r.wanted[c]);
			}
			ds_subset_report_release(&r);
			ds_list_release(&sp->list);
			sp->list = sub;
			ds_list_init(&sub);
		}
		char p[4200];
		snprintf(p, sizeof(p), "%s/%s.lst", out, sp->name);
		if (ds_list_write(p, &sp->list, &err) < 0) {
			cli_error("convert: %s", err.msg);
			goto done;
		}
	}
	{
		char p[4200];
		snprintf(p, sizeof(p), "%s/classes.txt", out);
		if (ds_classes_write(p, &d.splits[0].list, &err) < 0) {
			cli_error("convert: %s", err.msg);
			goto done;
		}
	}

	cli_catch_signals();
	for (int s = 0; s < d.n_splits; s++) {
		ds_split_list *sp = &d.splits[s];
		if (sp->list.count == 0) {
			cli_error("convert: split '%s' is empty", sp->name);
			goto done;
		}
		cli_pack_ui u;
		pack_opts o = po;
		o.root = pos[1];
		o.out_dir = out;
		o.name = sp->name;
		char lst[4200];
		snprintf(lst, sizeof(lst), "%s/%s.lst", out, sp->name);
		o.source = lst;
		o.cancel = cli_interrupt_flag();
		o.progress = cli_pack_ui_progress;
		o.skipped = cli_pack_ui_skipped;
		o.ctx = &u;
		if (d.rows_are_records)
			o.read_row = ad->read_row;
		char label_buf[64];
		snprintf(label_buf, sizeof(label_buf), "convert %s", sp->name);
		cli_pack_ui_start(&u, label_buf, sp->list.count, quiet);
		pack_report rep;
		rc = pack_run(&sp->list, &o, &rep, &err);
		cli_pack_ui_finish(&u);
		if (rc < 0) {
			if (rc == IMS_EINTR)
				cli_error("convert: interrupted while packing '%s'; no manifest was written for it (rerun with --force)",
					  sp->name);
			else
				cli_error("convert: %s: %s", sp->name, err.msg);
			goto done;
		}
		rio_manifest m;
		if (rio_manifest_load(rep.manifest, &m, &err) < 0) {
			cli_error("convert: %s", err.msg);
			goto done;
		}
		uint64_t lo = UINT64_MAX, hi = 0;
		for (size_t c = 0; c < m.n_classes; c++) {
			lo = m.class_counts[c] < lo ? m.class_counts[c] : lo;
			hi = m.class_counts[c] > hi ? m.class_counts[c] : hi;
		}
		if (!quiet) {
			fprintf(stderr,
				"imshard: convert: %s: %llu records, %zu classes, %llu to %llu per class, %llu skipped%s%s%s, %.1f s\n",
				sp->name, (unsigned long long)m.records, m.n_classes,
				(unsigned long long)(m.n_classes ? lo : 0), (unsigned long long)hi,
				(unsigned long long)rep.skipped, rep.skipped ? " (see '" : "",
				rep.skipped ? rep.errors : "", rep.skipped ? "')" : "", rep.seconds);
		}
		rio_manifest_release(&m);
	}
	if (!quiet)
		fprintf(stderr, "imshard: convert: wrote %d split%s, classes.txt and lists to '%s'\n",
			d.n_splits, d.n_splits == 1 ? "" : "s", out);
	status = CLI_EXIT_OK;
done:
	ds_list_release(&sub);
	ds_dataset_release(&d);
	return status;
}
