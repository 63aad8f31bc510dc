/*
 * cmd_list.c - `imshard list ROOT -o PREFIX`: scans a folder of class
 * subfolders and writes im2rec lists (optionally split, stratified per
 * class) plus the class names. The work is ds_scan_folder, ds_split and
 * ds_list_write; this file checks options and reports.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imshard.h"
#include "datasets/datasets.h"

static const cli_command list_cmd = {
	"list",
	"imshard list ROOT -o PREFIX [--train-ratio R] [--test-ratio R] [options]",
	"List a folder of class subfolders as im2rec .lst files and a class "
	"names file.",
	"ROOT holds one folder per class (ROOT/<class>/<image>). Classes are\n"
	"the subfolder names sorted byte-wise; label i is the i-th name, 0-based\n"
	"(as torchvision ImageFolder, Keras and im2rec do). Names starting with\n"
	"'.' are skipped; symbolic links are followed (two class folders that\n"
	"are one folder through links are refused: each image would be listed\n"
	"under two labels; a link back to a folder being listed is counted and\n"
	"not walked twice). Without --recursive only\n"
	"files directly inside each class folder are listed: files in deeper\n"
	"folders, files with other extensions and images lying directly in ROOT\n"
	"are skipped and counted in the summary (entries named like images that\n"
	"are no regular file, such as FIFOs, are named). A class folder without images\n"
	"keeps its label (a warning names it).\n"
	"\n"
	"outputs:\n"
	"  PREFIX_train.lst   always\n"
	"  PREFIX_val.lst     when --train-ratio + --test-ratio < 1\n"
	"  PREFIX_test.lst    when --test-ratio > 0\n"
	"  PREFIX.classes     class names, one per line, line i = label i\n"
	"Lists use im2rec's format, `index<TAB>label<TAB>path`, with paths\n"
	"relative to ROOT and index the image's position in sorted order (a\n"
	"stable id). Every file is written to a temporary and the temporaries\n"
	"are renamed only once all are written, so a failed run leaves the\n"
	"earlier lists and classes as they were; PREFIX's folder is created\n"
	"when missing (and removed again, with the parents made for it, by a\n"
	"run that fails).\n"
	"\n"
	"The split is stratified: within each class, round(n * test ratio)\n"
	"images go to test, round(n * val ratio) to val (val ratio = 1 - train -\n"
	"test) and the rest to train; a class keeps at least one train image.\n"
	"It is chosen with --seed and is the same on every machine.\n"
	"\n"
	"examples:\n"
	"  imshard list 256_ObjectCategories -o lists/caltech --train-ratio 0.8\n"
	"  imshard list fruits/dataset/train -o lists/fruits_train --no-shuffle\n"
	"\n"
	"Exit status: 0 success, 1 failure (ROOT missing, no images, cannot\n"
	"write), 2 bad usage."};

/* Splits written, in order. */
enum { SPLIT_TRAIN, SPLIT_VAL, SPLIT_TEST, N_SPLITS };
static const char *const split_name[N_SPLITS] = {"train", "val", "test"};

/* Names up to 5 classes that got no image, for the warning. */
static void warn_empty_classes(const ds_list *l, int quiet)
{
	size_t k = ds_list_num_classes(l);
	size_t *counts = calloc(k ? k : 1, sizeof(size_t));
	if (!counts)
		return;
	ds_list_class_counts(l, counts);
	char names[400] = "";
	size_t len = 0, n = 0, shown = 0;
	for (size_t c = 0; c < k; c++) {
		if (counts[c])
			continue;
		n++;
		if (shown < 5 && c < l->n_classes) {
			int w = snprintf(names + len, sizeof(names) - len, "%s'%s'",
					 shown ? ", " : "", l->classes[c]);
			if (w > 0 && len + (size_t)w < sizeof(names)) {
				len += (size_t)w;
				shown++;
			} else {
				names[len] = '\0';
			}
		}
	}
	if (n)
		cli_warn(quiet, "%zu class folder%s without images (their labels stay "
			 "unused): %s%s",
			 n, ims_plural(n, "", "s"), names, n > shown ? ", ..." : "");
	free(counts);
}

/* File s of a run into buf: PREFIX_<split>.lst for s < N_SPLITS, else
 * PREFIX.classes; 0 for a split this run does not write. */
static int out_file(char *buf, size_t len, const char *output, const int *have, int s)
{
	if (s < N_SPLITS && !have[s])
		return 0;
	if (s < N_SPLITS)
		snprintf(buf, len, "%s_%s.lst", output, split_name[s]);
	else
		snprintf(buf, len, "%s.classes", output);
	return 1;
}

int cmd_list(int argc, char **argv)
{
	const char *output = NULL, *exts = NULL;
	int recursive = 0, no_shuffle = 0, quiet = 0;
	double train_ratio = 1.0, test_ratio = 0.0;
	uint64_t seed = 0;
	const cli_opt opts[] = {
		{"output", 'o', CLI_STRING, &output, "PREFIX",
		 "write PREFIX_train.lst (and PREFIX_val.lst,\n"
		 "PREFIX_test.lst) and PREFIX.classes (required;\n"
		 "not in a folder under ROOT)", 0, 0},
		{"recursive", 0, CLI_FLAG, &recursive, NULL,
		 "walk the whole tree (im2rec's rule): each folder\n"
		 "holding an image is a class named by its path\n"
		 "under ROOT, labelled in walk order (a folder's\n"
		 "files, then its subfolders, sorted)", 0, 0},
		{"exts", 0, CLI_STRING, &exts, "LIST",
		 "comma-separated extensions to list, matched\n"
		 "case-insensitively (default .jpg,.jpeg,.png)", 0, 0},
		{"train-ratio", 0, CLI_DOUBLE, &train_ratio, "R",
		 "share of each class for PREFIX_train.lst, in\n"
		 "(0, 1] (default 1: no split)", 0, 1},
		{"test-ratio", 0, CLI_DOUBLE, &test_ratio, "R",
		 "share of each class for PREFIX_test.lst, in\n"
		 "[0, 1) (default 0); what train and test leave\n"
		 "goes to PREFIX_val.lst", 0, 0},
		{"seed", 0, CLI_U64, &seed, "S",
		 "seed of the split and the shuffle (default 0)", 0, 0},
		{"no-shuffle", 0, CLI_FLAG, &no_shuffle, NULL,
		 "keep rows in sorted order (class, then file\n"
		 "name) instead of shuffling them with --seed", 0, 0},
		{"quiet", 'q', CLI_FLAG, &quiet, NULL,
		 "print nothing but errors", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[1];
	int n_pos = 0;
	int rc = cli_parse(&list_cmd, opts, argc, argv, pos, 1, 1, &n_pos);
	if (rc == -1)
		return CLI_EXIT_OK;
	if (rc)
		return rc;
	const char *root = pos[0];
	if (!output)
		return cli_usage_error(&list_cmd, "missing -o PREFIX");
	size_t olen = strlen(output);
	if (cli_names_folder(output))
		return cli_usage_error(&list_cmd,
				       "-o takes a file prefix such as out/caltech, "
				       "not a folder ('%s')", output);
	if (olen >= 4 && strcmp(output + olen - 4, ".lst") == 0)
		return cli_usage_error(&list_cmd,
				       "-o takes a prefix ('%.*s' writes '%.*s_train.lst'), "
				       "not a .lst file name",
				       (int)(olen - 4), output, (int)(olen - 4), output);
	/* lists in a folder under ROOT would be read by the next listing:
	 * that folder as a class (every label after it shifted); files
	 * directly in ROOT belong to no class, so ROOT itself is fine */
	char out_dir[4096];
	const char *slash = strrchr(output, '/');
	if (!slash)
		snprintf(out_dir, sizeof(out_dir), ".");
	else if (slash == output)
		snprintf(out_dir, sizeof(out_dir), "/");
	else
		snprintf(out_dir, sizeof(out_dir), "%.*s", (int)(slash - output), output);
	if (ims_path_within(out_dir, root) && !ims_path_within(root, out_dir))
		return cli_usage_error(&list_cmd,
				       "-o '%s' writes into a folder under ROOT '%s', where a later listing "
				       "would read it (a folder of lists becomes a class and "
				       "shifts every label after it): write the lists in ROOT itself or outside it",
				       output, root);
	if (!(train_ratio > 0))
		return cli_usage_error(&list_cmd, "--train-ratio must be greater than 0");
	ims_error err;
	ims_error_clear(&err);
	/* the rule and the words of `imshard convert --test-ratio` */
	if (ds_check_split_ratios(0, test_ratio, &err) < 0)
		return cli_usage_error(&list_cmd, "%s", err.msg);
	if (train_ratio + test_ratio > 1 + 1e-9)
		return cli_usage_error(&list_cmd,
				       "--train-ratio %g plus --test-ratio %g exceeds 1",
				       train_ratio, test_ratio);
	if (exts && ds_scan_check_exts(exts, &err) < 0)
		return cli_usage_error(&list_cmd, "--exts: %s", err.msg);
	double val_ratio = 1.0 - train_ratio - test_ratio;
	if (val_ratio < 1e-9)
		val_ratio = 0;

	ds_list all, parts[N_SPLITS];
	ds_list_init(&all);
	for (int s = 0; s < N_SPLITS; s++)
		ds_list_init(&parts[s]);
	char *path = NULL;
	char *parent = NULL, *made = NULL; /* PREFIX's folder; what of it this run made */
	char *stage = NULL; /* the temporaries, slen bytes each; "" once renamed */
	size_t slen = 0;
	int fds[N_SPLITS + 1] = {-1, -1, -1, -1}; /* theirs, open until renamed */
	int status = CLI_EXIT_FAIL;

	ds_scan_opts so = {exts, recursive};
	ds_scan_report rep;
	if (ds_scan_folder(root, &so, &all, &rep, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	cli_info(quiet, "listed '%s': %zu %s, %zu %s", root, all.n_classes,
		 ims_plural(all.n_classes, "class", "classes"), all.count,
		 ims_plural(all.count, "image", "images"));
	if (rep.ignored_files)
		cli_info(quiet, "skipped %zu file%s not matching %s", rep.ignored_files,
			 ims_plural(rep.ignored_files, "", "s"),
			 exts ? exts : ".jpg,.jpeg,.png");
	if (rep.broken_links)
		cli_warn(quiet, "skipped %zu broken link%s (%s target is missing, or the "
			 "links loop)",
			 rep.broken_links, ims_plural(rep.broken_links, "", "s"),
			 rep.broken_links == 1 ? "its" : "their");
	if (rep.link_loops) {
		char shown[600];
		cli_warn(quiet, "skipped %zu link%s that lead%s back to a folder "
			 "already being listed ('%s'%s; not walked twice)",
			 rep.link_loops, ims_plural(rep.link_loops, "", "s"),
			 rep.link_loops == 1 ? "s" : "",
			 ims_escape(rep.loop_first, shown, sizeof(shown)),
			 rep.link_loops == 1 ? "" : " first");
	}
	if (rep.special_files) {
		char shown[600];
		cli_warn(quiet, "skipped %zu %s named like an image that %s no regular "
			 "file ('%s'%s: a FIFO, socket or device)",
			 rep.special_files, ims_plural(rep.special_files, "entry", "entries"),
			 rep.special_files == 1 ? "is" : "are",
			 ims_escape(rep.special_first, shown, sizeof(shown)),
			 rep.special_files == 1 ? "" : " first");
	}
	if (rep.ignored_nested)
		cli_info(quiet, "skipped %zu image%s in folders nested inside class "
			 "folders (--recursive lists them as classes of their own)",
			 rep.ignored_nested, ims_plural(rep.ignored_nested, "", "s"));
	if (rep.loose_files)
		cli_warn(quiet, "skipped %zu image%s lying directly in '%s' (not in a "
			 "class folder)",
			 rep.loose_files, ims_plural(rep.loose_files, "", "s"), root);
	if (rep.unlistable)
		cli_warn(quiet, "skipped %zu image%s whose name%s a TAB or a line "
			 "break, which a list row cannot hold ('%s'%s; rename %s)",
			 rep.unlistable, ims_plural(rep.unlistable, "", "s"),
			 rep.unlistable == 1 ? " holds" : "s hold",
			 rep.unlistable_first, rep.unlistable == 1 ? "" : " first",
			 rep.unlistable == 1 ? "it" : "them");
	if (rep.empty_classes)
		warn_empty_classes(&all, quiet);

	/* Split (stratified) or take everything as train. */
	int have[N_SPLITS] = {1, val_ratio > 0, test_ratio > 0};
	if (have[SPLIT_VAL] || have[SPLIT_TEST]) {
		if (ds_split(&all, val_ratio, test_ratio, seed, &parts[SPLIT_TRAIN],
			     &parts[SPLIT_VAL], &parts[SPLIT_TEST], &err) < 0) {
			cli_error("%s", err.msg);
			goto out;
		}
	} else {
		parts[SPLIT_TRAIN] = all; /* moved: all is not used below */
		ds_list_init(&all);
	}
	const ds_list *names = &parts[SPLIT_TRAIN];
	for (int s = 0; s < N_SPLITS; s++)
		if (have[s] && !no_shuffle)
			ds_list_shuffle(&parts[s], seed);

	if (ims_mkdir_parent_created(output, &parent, &made, &err) < 0) {
		cli_error("%s", err.msg);
		goto out;
	}
	size_t plen = olen + 16;
	path = malloc(plen);
	if (!path) {
		cli_error("list: out of memory");
		goto out;
	}
	/* Every file is written to its temporary first and renamed only
	 * when all were written: a run failing partway leaves the earlier
	 * lists and classes together, never a new train list beside an old
	 * val list (the same image in both) or old class names. */
	for (int s = 0; s <= N_SPLITS; s++) {
		struct stat dst;
		if (!out_file(path, plen, output, have, s))
			continue;
		if (stat(path, &dst) == 0 && S_ISDIR(dst.st_mode)) {
			cli_error("list: '%s' is a folder: nothing was written", path);
			goto out;
		}
	}
	slen = plen + 32;
	stage = calloc(N_SPLITS + 1, slen);
	if (!stage) {
		cli_error("list: out of memory");
		goto out;
	}
	for (int s = 0; s <= N_SPLITS; s++) {
		if (!out_file(path, plen, output, have, s))
			continue;
		ims_buf b = {0};
		int wrc = s < N_SPLITS ? ds_list_format(&parts[s], path, &b, &err)
				       : ds_classes_format(names, path, &b, &err);
		if (!wrc)
			wrc = ims_temp_write(path, b.text ? b.text : "", b.len, 0,
					     stage + (size_t)s * slen, slen, &fds[s], &err);
		ims_buf_release(&b);
		if (wrc < 0) {
			stage[(size_t)s * slen] = '\0';
			cli_error("list: %s", err.msg);
			goto out;
		}
	}
	for (int s = 0; s <= N_SPLITS; s++) {
		if (!out_file(path, plen, output, have, s))
			continue;
		int prc = ims_temp_publish(fds[s], stage + (size_t)s * slen, path, &err);
		fds[s] = -1;
		stage[(size_t)s * slen] = '\0';
		if (prc < 0) {
			cli_error("list: %s", err.msg);
			goto out;
		}
	}
	for (int s = 0; s < N_SPLITS; s++) {
		if (!have[s]) {
			/* Left from an earlier run with other ratios: say so
			 * rather than delete a user's file. */
			snprintf(path, plen, "%s_%s.lst", output, split_name[s]);
			if (access(path, F_OK) == 0)
				cli_warn(quiet, "'%s' is left from an earlier run; this "
					 "run writes no %s list", path, split_name[s]);
			continue;
		}
		snprintf(path, plen, "%s_%s.lst", output, split_name[s]);
		cli_info(quiet, "wrote '%s': %zu %s", path, parts[s].count,
			 ims_plural(parts[s].count, "image", "images"));
		/* a ratio that rounds to nothing in every class: how big a
		 * class must be for one, and which option sets it (the val
		 * ratio is what --train-ratio and --test-ratio leave) */
		if (parts[s].count == 0) {
			const double r = s == SPLIT_TEST ? test_ratio : val_ratio;
			cli_warn(quiet, "'%s' is empty: the %s ratio %g rounds to no image in "
				 "any class (a class needs %zu images for one; every class here "
				 "has fewer): %s", path, split_name[s], r,
				 ds_split_class_needs(r),
				 s == SPLIT_TEST ? "raise --test-ratio"
						 : "lower --train-ratio or --test-ratio");
		}
	}
	snprintf(path, plen, "%s.classes", output);
	cli_info(quiet, "wrote '%s': %zu %s", path, names->n_classes,
		 ims_plural(names->n_classes, "class", "classes"));
	status = CLI_EXIT_OK;
out:
	for (int s = 0; stage && s <= N_SPLITS; s++)
		if (stage[(size_t)s * slen])
			ims_temp_discard(fds[s], stage + (size_t)s * slen);
	free(stage);
	/* a failed run leaves no folder it made, not even an empty one */
	if (status != CLI_EXIT_OK && made)
		ims_rmdir_created(parent, made);
	free(parent);
	free(made);
	free(path);
	ds_list_release(&all);
	for (int s = 0; s < N_SPLITS; s++)
		ds_list_release(&parts[s]);
	return status;
}
