/*
 * cmd_subset.c - `imshard subset IN.lst -o OUT.lst`: a class-balanced
 * subset of a list (ds_subset), with the class names carried along. This
 * file checks options, finds the classes file and reports.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "imshard.h"
#include "datasets/datasets.h"

static const cli_command subset_cmd = {
	"subset",
	"imshard subset IN.lst -o OUT.lst (--per-class N | --total N) [options]",
	"Take a class-balanced subset of an im2rec .lst file.",
	"Give exactly one of --per-class and --total. With --total N, each of\n"
	"the K classes gets N / K rows and the remainder goes one row each to the\n"
	"lowest labels. K is the number of names in the classes file, or the\n"
	"highest label + 1 when it is larger (or when there is no classes file).\n"
	"Rows are drawn at random within each class with --seed; the same seed\n"
	"gives the same subset on every machine, and a smaller count picks a\n"
	"subset of what a larger one picks. OUT.lst keeps IN.lst's row order and\n"
	"its rows unchanged (index, labels, path). It and the classes file\n"
	"written beside it are written to temporaries and renamed once both are\n"
	"written, so a failed run changes neither; the folder is created when\n"
	"missing (and removed again, with the parents made for it, by a run\n"
	"that fails). OUT.lst and the classes file written beside it must not\n"
	"be IN.lst or the classes file read (bad usage).\n"
	"\n"
	"A class with fewer rows than wanted is an error naming each such class\n"
	"and its count, unless --allow-short, which takes all of its rows and\n"
	"warns.\n"
	"\n"
	"Class names: by default they come from the classes file beside IN.lst,\n"
	"found by removing '.lst' and then a trailing '_train', '_val' or '_test'\n"
	"and adding '.classes' (lists/caltech_train.lst -> lists/caltech.classes,\n"
	"as written by 'imshard list'), or else 'classes.txt' in IN.lst's folder\n"
	"(as written by 'imshard convert'); --classes FILE names it instead.\n"
	"When one is found it is copied beside OUT.lst under the same rule\n"
	"(out/small_train.lst -> out/small.classes) and used in messages. When\n"
	"none is found, a classes file already at that name (an earlier run's)\n"
	"is warned of: pack would take its names for the new list's labels.\n"
	"\n"
	"Labels are class ids: with a classes file every label must have a name;\n"
	"without one, labels stay below 1024 or 16 times the number of distinct\n"
	"labels in the list, whichever is larger. --max-label N accepts labels up\n"
	"to N instead (a sparse label space; at most 1048575). A label that is\n"
	"not an integer ('1e2', '3.5', '-1') is refused with the list's line.\n"
	"\n"
	"Rows naming an image an earlier row names ('a/x.jpg' twice, or as\n"
	"'./a//x.jpg') are kept and may be taken more than once: a warning, even\n"
	"with --quiet, counts them in IN.lst and in the subset.\n"
	"\n"
	"examples:\n"
	"  imshard subset lists/inat_train.lst -o lists/inat10_train.lst --per-class 500\n"
	"  imshard subset lists/inat_val.lst -o lists/inat10_val.lst --total 800 --seed 1\n"
	"\n"
	"Exit status: 0 success, 1 failure (unreadable list, short classes,\n"
	"cannot write), 2 bad usage."};

#define NOT_GIVEN UINT64_MAX
/* Far past any list, and exact as a double (cli_opt's bounds). */
#define MAX_COUNT 1e15

static int file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* "'cat' (label 3)" or "label 3". */
static const char *class_label(const ds_list *l, size_t c, char *buf,
			       size_t len)
{
	if (c < l->n_classes)
		snprintf(buf, len, "'%s' (label %zu)", l->classes[c], c);
	else
		snprintf(buf, len, "label %zu", c);
	return buf;
}

/* The short classes, one line each for the first CLI_NAMED, then a
 * count of the rest. */
static void say_short(const ds_list *in, const ds_subset_report *rep)
{
	size_t said = 0;
	for (size_t c = 0; c < rep->n_classes && said < CLI_NAMED; c++) {
		char name[300];
		if (rep->available[c] >= rep->wanted[c])
			continue;
		cli_say("  %s: %zu %s, %zu wanted",
			class_label(in, c, name, sizeof(name)), rep->available[c],
			ims_plural(rep->available[c], "row", "rows"), rep->wanted[c]);
		said++;
	}
	cli_say_rest(rep->short_classes, "class", "classes");
}

/* Finds IN's classes file: --classes, IN's prefix + .classes, or
 * classes.txt in IN's folder. *out is NULL when there is none; -1 when
 * memory ran out (kept apart from "none": a subset written without the
 * classes file would end 0 as complete). */
static int find_classes(const char *in, const char *given, char **out,
			ims_error *err)
{
	*out = NULL;
	if (given) {
		*out = strdup(given);
		return *out ? 0 : -1;
	}
	size_t len = strlen(in) + 16;
	char *p = malloc(len);
	if (!p)
		return -1;
	if (ds_classes_path_for_list(in, p, len, err) == 0 && file_exists(p)) {
		*out = p;
		return 0;
	}
	const char *slash = strrchr(in, '/');
	if (slash)
		snprintf(p, len, "%.*s/classes.txt", (int)(slash - in), in);
	else
		snprintf(p, len, "classes.txt");
	if (file_exists(p)) {
		*out = p;
		return 0;
	}
	free(p);
	return 0;
}

int cmd_subset(int argc, char **argv)
{
	const char *output = NULL, *classes_file = NULL;
	uint64_t per_class = NOT_GIVEN, total = NOT_GIVEN, seed = 0;
	int allow_short = 0, quiet = 0, max_label = DS_LABEL_AUTO;
	const cli_opt opts[] = {
		{"output", 'o', CLI_STRING, &output, "OUT.lst",
		 "write the subset to OUT.lst (required)", 0, 0},
		/* bounded, so that no count given is taken for NOT_GIVEN */
		{"per-class", 0, CLI_U64, &per_class, "N",
		 "take N rows from every class", 1, MAX_COUNT},
		{"total", 0, CLI_U64, &total, "N",
		 "take N rows in all, divided evenly between the\n"
		 "classes (the remainder one each to the lowest\n"
		 "labels)", 1, MAX_COUNT},
		{"seed", 0, CLI_U64, &seed, "S",
		 "seed of the choice within each class (default 0)", 0, 0},
		{"allow-short", 0, CLI_FLAG, &allow_short, NULL,
		 "take all rows of a class that has fewer than\n"
		 "wanted (with a warning) instead of failing", 0, 0},
		{"classes", 0, CLI_STRING, &classes_file, "FILE",
		 "class names, one per line (default: the classes\n"
		 "file beside IN.lst, see below)", 0, 0},
		{"max-label", 0, CLI_INT, &max_label, "N",
		 "accept labels up to N (a sparse label space;\n"
		 "default: see below)", 0, DS_LABEL_CEILING},
		{"quiet", 'q', CLI_FLAG, &quiet, NULL,
		 "print nothing but errors", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[1];
	int n_pos = 0;
	int rc = cli_parse(&subset_cmd, opts, argc, argv, pos, 1, 1, &n_pos);
	if (rc == -1)
		return CLI_EXIT_OK;
	if (rc)
		return rc;
	const char *in_path = pos[0];
	if (!output)
		return cli_usage_error(&subset_cmd, "missing -o OUT.lst");
	if (cli_names_folder(output))
		return cli_usage_error(&subset_cmd,
				       "-o takes a file name such as out/small_train.lst, "
				       "not a folder ('%s')", output);
	if ((per_class == NOT_GIVEN) == (total == NOT_GIVEN))
		return cli_usage_error(&subset_cmd,
				       "give exactly one of --per-class N and --total N");
	if (per_class == NOT_GIVEN)
		per_class = 0;
	else
		total = 0;

	ims_error err;
	ims_error_clear(&err);
	ds_list in, out;
	ds_list_init(&in);
	ds_list_init(&out);
	ds_subset_report rep = {0};
	char *src_classes = NULL, *dst_classes = NULL;
	char *stage[2] = {NULL, NULL}; /* the temporaries; "" once renamed */
	int fds[2] = {-1, -1};         /* theirs, open until renamed */
	char *out_dir = NULL, *made = NULL; /* -o's folder; what of it this run made */
	int status = CLI_EXIT_FAIL;

	/* With a classes file, its names bound the labels (checked below,
	 * naming the file); without, the list's own distinct labels do. */
	if (find_classes(in_path, classes_file, &src_classes, &err) < 0) {
		cli_error("subset: out of memory");
		goto done;
	}
	if (src_classes) {
		size_t len = strlen(output) + 16;
		dst_classes = malloc(len);
		if (!dst_classes) {
			cli_error("subset: out of memory");
			goto done;
		}
		if (ds_classes_path_for_list(output, dst_classes, len, &err) < 0) {
			cli_error("cannot name the classes file of '%s'", output);
			goto done;
		}
	}
	/* The output is written over whatever is at its name: refuse the
	 * names of the files this run reads before reading them. */
	if (ims_same_file(output, in_path)) {
		status = cli_usage_error(&subset_cmd, "-o '%s' is the input list "
					 "'%s': write the subset elsewhere",
					 output, in_path);
		goto done;
	}
	if (src_classes && ims_same_file(output, src_classes)) {
		status = cli_usage_error(&subset_cmd, "-o '%s' is the classes file "
					 "'%s' read with the list: write the subset "
					 "elsewhere",
					 output, src_classes);
		goto done;
	}
	if (dst_classes && ims_same_file(dst_classes, in_path)) {
		status = cli_usage_error(&subset_cmd, "-o '%s' would write its "
					 "classes file over the input list '%s': "
					 "write the subset elsewhere",
					 output, in_path);
		goto done;
	}
	ds_list_read_opts ro;
	ds_list_read_opts_init(&ro);
	ro.max_label = max_label >= 0 ? max_label : src_classes ? DS_LABEL_CEILING : DS_LABEL_AUTO;
	if (ds_list_read_with(in_path, &ro, &in, &err) < 0) {
		cli_error("%s", err.msg);
		goto done;
	}
	if (src_classes) {
		if (ds_classes_read(src_classes, &in, &err) < 0) {
			cli_error("%s", err.msg);
			goto done;
		}
		size_t k = ds_list_num_classes(&in);
		if (k > in.n_classes && max_label < 0) {
			cli_error("cannot use classes '%s': it names %zu classes but "
				  "'%s' has label %zu (pass the right file with "
				  "--classes)",
				  src_classes, in.n_classes, in_path, k - 1);
			goto done;
		}
	}
	if (in.count == 0) {
		cli_error("cannot take a subset of '%s': the list is empty", in_path);
		goto done;
	}

	if (ds_subset(&in, (size_t)per_class, (size_t)total, seed, allow_short,
		      &out, &rep, &err) < 0) {
		if (err.code != IMS_ENOTFOUND || !rep.short_classes) {
			cli_error("%s", err.msg);
			goto done;
		}
		/* Short classes: one line each, however many there are. */
		cli_error("cannot take the subset of '%s': %zu of %zu classes %s "
			  "fewer rows than wanted (--allow-short takes all their "
			  "rows)",
			  in_path, rep.short_classes, rep.n_classes,
			  rep.short_classes == 1 ? "has" : "have");
		say_short(&in, &rep);
		goto done;
	}
	/* Even with --quiet: pack would pack each of them as listed. */
	ds_repeats in_rep, out_rep;
	if (ds_list_find_repeats(&in, &in_rep, &err) < 0 ||
	    ds_list_find_repeats(&out, &out_rep, &err) < 0) {
		cli_error("%s", err.msg);
		goto done;
	}
	if (in_rep.rows) {
		char also[64] = "";
		if (in_rep.relabelled)
			snprintf(also, sizeof(also), " (%zu with another label)",
				 in_rep.relabelled);
		cli_warn(0, "%zu of %zu rows of '%s' %s an earlier row's image%s, "
			 "the first: row %zu '%s' repeats row %zu; the subset holds "
			 "%zu such %s, which pack packs as often as listed (remove "
			 "the rows unless oversampling is meant)",
			 in_rep.rows, in.count, in_path,
			 ims_plural(in_rep.rows, "repeats", "repeat"), also, in_rep.first,
			 in.items[in_rep.first].path, in_rep.first_of, out_rep.rows,
			 ims_plural(out_rep.rows, "row", "rows"));
	}
	if (rep.short_classes) {
		cli_warn(quiet, "%zu of %zu classes %s fewer rows than wanted; "
			 "took all their rows:",
			 rep.short_classes, rep.n_classes,
			 rep.short_classes == 1 ? "has" : "have");
		if (!quiet)
			say_short(&in, &rep);
	}

	/* Both files are written to temporaries and renamed only once both
	 * are written: a run failing at the classes file must not leave its
	 * new list beside missing or earlier class names. */
	int write_classes = src_classes && !ims_same_file(dst_classes, src_classes);
	for (int i = 0; i < 2; i++) {
		const char *f = i ? dst_classes : output;
		struct stat st;
		if ((i == 0 || write_classes) && stat(f, &st) == 0 && S_ISDIR(st.st_mode)) {
			cli_error("subset: '%s' is a folder: nothing was written", f);
			goto done;
		}
	}
	if (ims_mkdir_parent_created(output, &out_dir, &made, &err) < 0) {
		cli_error("%s", err.msg);
		goto done;
	}
	size_t slen = strlen(output) + (dst_classes ? strlen(dst_classes) : 0) + 32;
	stage[0] = malloc(slen);
	stage[1] = malloc(slen);
	if (!stage[0] || !stage[1]) {
		cli_error("subset: out of memory");
		goto done;
	}
	stage[0][0] = stage[1][0] = '\0';
	for (int i = 0; i < 1 + write_classes; i++) {
		const char *f = i ? dst_classes : output;
		ims_buf b = {0};
		int wrc = i ? ds_classes_format(&in, f, &b, &err)
			    : ds_list_format(&out, f, &b, &err);
		if (!wrc)
			wrc = ims_temp_write(f, b.text ? b.text : "", b.len, 0, stage[i],
					     slen, &fds[i], &err);
		ims_buf_release(&b);
		if (wrc < 0) {
			stage[i][0] = '\0';
			cli_error("subset: %s", err.msg);
			goto done;
		}
	}
	for (int i = 1; i >= 0; i--) {
		const char *f = i ? dst_classes : output;
		if (!stage[i][0])
			continue;
		int prc = ims_temp_publish(fds[i], stage[i], f, &err);
		fds[i] = -1;
		stage[i][0] = '\0';
		if (prc < 0) {
			cli_error("subset: %s", err.msg);
			goto done;
		}
	}
	size_t lo = SIZE_MAX, hi = 0;
	for (size_t c = 0; c < rep.n_classes; c++) {
		if (rep.taken[c] < lo)
			lo = rep.taken[c];
		if (rep.taken[c] > hi)
			hi = rep.taken[c];
	}
	cli_info(quiet, "wrote '%s': %zu of %zu %s, %zu %s, %zu to %zu "
		 "per class",
		 output, out.count, in.count, ims_plural(in.count, "row", "rows"),
		 rep.n_classes, ims_plural(rep.n_classes, "class", "classes"), lo,
		 hi);

	if (src_classes) {
		if (write_classes)
			cli_info(quiet, "wrote '%s': %zu %s (from '%s')",
				 dst_classes, in.n_classes,
				 ims_plural(in.n_classes, "class", "classes"), src_classes);
	} else {
		cli_info(quiet, "no classes file beside '%s' (labels only; see "
			 "--classes)", in_path);
		/* pack takes the classes file beside a list by its name: one
		 * left by an earlier run would name this list's labels */
		char stale[4096];
		ims_error ignored;
		if (ds_classes_path_for_list(output, stale, sizeof(stale), &ignored) == 0 &&
		    file_exists(stale))
			cli_warn(quiet, "'%s' is not this list's: it was there before, "
				 "and pack would take its names for the new list's "
				 "labels (remove it, or give --classes)",
				 stale);
	}
	status = CLI_EXIT_OK;
done:
	for (int i = 0; i < 2; i++) {
		if (stage[i] && stage[i][0])
			ims_temp_discard(fds[i], stage[i]);
		free(stage[i]);
	}
	/* a failed run leaves no folder it made, not even an empty one */
	if (status != CLI_EXIT_OK && made)
		ims_rmdir_created(out_dir, made);
	free(out_dir);
	free(made);
	free(src_classes);
	free(dst_classes);
	ds_subset_report_release(&rep);
	ds_list_release(&in);
	ds_list_release(&out);
	return status;
}
