/*
 * cmd_pack.c - `imshard pack`: a .lst file and its image root into a split.
 */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "imshard.h"
#include "datasets/datasets.h"
#include "pack/pack.h"
#include "recordio/recordio.h"

static const cli_command command = {
	"pack",
	"imshard pack LIST.lst ROOT -o OUTDIR/NAME [options]",
	"Packs the images listed in LIST.lst (paths relative to ROOT) into sharded\n"
	"LMDB record files OUTDIR/NAME-SSSSS-of-NNNNN.mdb and the manifest\n"
	"OUTDIR/NAME.json, which is written last: until it exists the split does\n"
	"not.",
	"Encodings:\n"
	"  keep  stores each file's bytes unchanged (JPEG or PNG, decided by\n"
	"        content, not by name); every file is checked first: its headers\n"
	"        are parsed and its structure walked to the end (JPEG markers to\n"
	"        EOI, PNG chunk CRCs to IEND). --check-decode decodes it fully.\n"
	"  jpeg  decodes, applies EXIF orientation, converts CMYK/grey/alpha, resizes\n"
	"        if asked, and re-encodes at --quality (4:2:0).\n"
	"  png   the same, re-encoded losslessly as PNG (alpha kept).\n"
	"  raw   the same, stored as raw interleaved pixels (fast to load, large).\n"
	"The default is keep, or jpeg when --resize, --max-size or --center-crop\n"
	"is given.\n\n"
	"Files that are missing, empty, truncated, not images, absurdly large or\n"
	"undecodable are skipped; each is named on stderr and in\n"
	"OUTDIR/NAME.errors.tsv (row, index, path, reason). The run fails if none\n"
	"could be packed, or past --max-errors skips; memory running out while a\n"
	"file is read, decoded or encoded is no fault of the file: the run fails\n"
	"(nothing published). With --shards N, a shard\n"
	"whose rows were all skipped is left out, and a warning (even with\n"
	"--quiet) says how many of the N were written.\n\n"
	"Class names come from --classes, or from the list's PREFIX.classes file\n"
	"as written by 'imshard list' (LIST 'data_train.lst' -> 'data.classes'),\n"
	"or are the label numbers. A PREFIX.classes that is there but cannot be\n"
	"read (no read permission) fails the run, named: it is not passed over.\n\n"
	"Labels are class ids, bounded before anything is sized by them: with\n"
	"class names, every label must have one; without, labels stay below 1024\n"
	"or 16 times the number of distinct labels in the list, whichever is\n"
	"larger. A sparse label space needs --max-label N (or --classes FILE\n"
	"naming every class); labels above 1048575 are refused. A label must be\n"
	"an integer ('3' or im2rec's '3.000000'; '1e2', '3.5' and '-1' are\n"
	"refused, naming the list's line).\n\n"
	"Rows naming an image an earlier row names ('a/x.jpg' twice, or as\n"
	"'./a//x.jpg') are packed as often as they are listed (oversampling);\n"
	"a warning, even with --quiet, counts them and names the first.\n\n"
	"Order: the manifest records whether the records are shuffled, which\n"
	"readers that take whole shards (--shard-owning) need. --shuffle shuffles\n"
	"the rows with --seed; --order says what the list is. Otherwise it comes\n"
	"from the rows: shuffled when the index column is out of order and the\n"
	"labels are not grouped by class (shuffled lists of 'imshard list' and\n"
	"im2rec are numbered first, then shuffled), not shuffled otherwise. The\n"
	"summary says which and why.\n\n"
	"Interrupting (Ctrl-C, kill) leaves no manifest; rerunning the same command\n"
	"removes the leftovers and packs afresh. An existing split is never\n"
	"replaced without --force, and a failed --force run leaves it as it was,\n"
	"its errors file included.\n\n"
	"Exit status: 0 packed, 1 failed (nothing published), 2 bad usage."};

/* What the report's repeated rows say, as one line into buf. */
static void say_repeats(const ds_repeats *r, const ds_list *l, int shuffled,
			char *buf, size_t len)
{
	buf[0] = '\0';
	if (!r->rows)
		return;
	char also[64] = "", which[700];
	if (r->relabelled)
		snprintf(also, sizeof(also), " (%zu with another label)", r->relabelled);
	/* after --shuffle, row numbers are not the list file's: the path says */
	if (shuffled)
		snprintf(which, sizeof(which), "'%.600s'", l->items[r->first].path);
	else
		snprintf(which, sizeof(which), "row %zu '%.600s' repeats row %zu", r->first,
			 l->items[r->first].path, r->first_of);
	snprintf(buf, len,
		 "%zu of %zu rows %s an earlier row's image%s, the first: %s; each is packed as often as it is listed, so the split holds %s more than once (remove the rows unless oversampling is meant)",
		 r->rows, l->count, ims_plural(r->rows, "repeats", "repeat"), also, which,
		 ims_plural(r->rows, "that image", "those images"));
}

int cmd_pack(int argc, char **argv)
{
	const char *out = NULL, *classes = NULL, *order = NULL;
	int quiet = 0, max_label = DS_LABEL_AUTO, shuffle = 0;
	uint64_t seed = 0;
	const char *seed_arg = NULL;
	cli_pack_flags pf;
	cli_pack_flags_init(&pf);
	const cli_opt opts[] = {
		{"output", 'o', CLI_STRING, &out, "OUTDIR/NAME",
		 "where to write: OUTDIR/NAME.json and OUTDIR/NAME-*.mdb (required;\nNAME a file name, not . or ..)", 0, 0},
		CLI_PACK_OPTIONS(&pf),
		{"classes", 0, CLI_STRING, &classes, "FILE",
		 "class names, one per line, line i = label i", 0, 0},
		{"shuffle", 0, CLI_FLAG, &shuffle, NULL,
		 "shuffle the rows with --seed before packing", 0, 0},
		{"seed", 0, CLI_STRING, &seed_arg, "S", "seed of --shuffle (default 0)", 0, 0},
		{"order", 0, CLI_STRING, &order, "ORDER",
		 "what the manifest records: shuffled, list (not\n"
		 "shuffled) or auto (default: from the rows, see below)", 0, 0},
		{"max-label", 0, CLI_INT, &max_label, "N",
		 "accept labels up to N (a sparse label space;\n"
		 "default: see below)", 0, DS_LABEL_CEILING},
		{"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress, no summary, no per-file warnings", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[2];
	int np;
	int rc = cli_parse(&command, opts, argc, argv, pos, 2, 2, &np);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	if (!out)
		return cli_usage_error(&command, "-o OUTDIR/NAME is required");
	pack_order ord = PACK_ORDER_AUTO;
	if (order && strcmp(order, "auto") != 0) {
		if (strcmp(order, "list") == 0)
			ord = PACK_ORDER_LIST;
		else if (strcmp(order, "shuffled") == 0)
			ord = PACK_ORDER_SHUFFLED;
		else
			return cli_usage_error(&command, "--order must be auto, list or shuffled, got '%s'",
					       order);
	}
	/* A seed without --shuffle would be silently ignored. */
	if (seed_arg && !shuffle)
		return cli_usage_error(&command, "--seed seeds --shuffle, which is not given: add --shuffle or drop --seed");
	if (seed_arg && cli_parse_u64(seed_arg, &seed) != 0)
		return cli_usage_error(&command, "--seed expects a non-negative integer, got '%s'",
				       seed_arg);
	if (shuffle && ord == PACK_ORDER_LIST)
		return cli_usage_error(&command, "--shuffle shuffles the rows: --order list contradicts it");
	pack_opts o;
	rc = cli_pack_flags_apply(&command, &pf, &o);
	if (rc)
		return rc;

	char outbuf[4096], dirbuf[4096], namebuf[1024];
	snprintf(outbuf, sizeof(outbuf), "%s", out);
	size_t ol = strlen(outbuf);
	if (ol > 5 && strcmp(outbuf + ol - 5, ".json") == 0)
		outbuf[ol - 5] = '\0';
	if (!outbuf[0] || outbuf[strlen(outbuf) - 1] == '/')
		return cli_usage_error(&command, "-o needs OUTDIR/NAME, e.g. out/train (got '%s')", out);
	snprintf(dirbuf, sizeof(dirbuf), "%s", outbuf);
	snprintf(namebuf, sizeof(namebuf), "%s", basename(outbuf));
	const char *dir = dirname(dirbuf);
	/* The rule readers apply to a manifest's name: "p/." would write a
	 * split named '.' that every reader refuses. */
	if (!rio_split_name_ok(namebuf))
		return cli_usage_error(&command, "-o needs OUTDIR/NAME with NAME a file name, not '%s' (got '%s')",
				       namebuf, out);

	ims_error err;
	ds_list list;
	ds_list_init(&list);
	/* Class names first: they bound the labels the list may hold. */
	char cpath[4200];
	int have_default = classes ? 0 : ds_classes_beside_list(pos[0], cpath, sizeof(cpath), &err);
	if (have_default < 0) {
		cli_error("%s", err.msg);
		ds_list_release(&list);
		return CLI_EXIT_FAIL;
	}
	if (classes || have_default) {
		const char *cp = classes ? classes : cpath;
		if (ds_classes_read(cp, &list, &err) < 0) {
			cli_error("%s", err.msg);
			ds_list_release(&list);
			return CLI_EXIT_FAIL;
		}
	}
	ds_list_read_opts ro;
	ds_list_read_opts_init(&ro);
	ro.max_label = max_label;
	ro.root = pos[1];
	if (ds_list_read_with(pos[0], &ro, &list, &err) < 0) {
		cli_error("%s", err.msg);
		ds_list_release(&list);
		return CLI_EXIT_FAIL;
	}

	if (shuffle) {
		ds_list_shuffle(&list, seed);
		ord = PACK_ORDER_SHUFFLED;
	}

	cli_pack_ui u;
	o.root = pos[1];
	o.order = ord;
	o.out_dir = dir;
	o.name = namebuf;
	o.source = pos[0];
	o.max_label = max_label;
	cli_catch_signals();
	o.cancel = cli_interrupt_flag();
	o.progress = cli_pack_ui_progress;
	o.skipped = cli_pack_ui_skipped;
	o.ctx = &u;
	cli_pack_ui_start(&u, "pack", list.count, quiet);
	pack_report rep;
	rc = pack_run(&list, &o, &rep, &err);
	cli_pack_ui_finish(&u);
	char repeats[1400];
	say_repeats(&rep.repeats, &list, shuffle, repeats, sizeof(repeats));
	ds_list_release(&list);
	if (rc < 0) {
		if (rc == IMS_EINTR)
			cli_error("pack: interrupted; no manifest was written (rerun the same command to pack again)");
		else
			cli_error("pack: %s", err.msg);
		return CLI_EXIT_FAIL;
	}
	if (!quiet) {
		char in[32], outb[32];
		cli_format_bytes((double)rep.bytes_in, in, sizeof(in));
		cli_format_bytes((double)rep.bytes_out, outb, sizeof(outb));
		double s = rep.seconds > 0 ? rep.seconds : 1e-9;
		cli_say("packed %llu of %llu %s into %d shard%s (%s read, %s written) in %.1f s: %.0f images/s, %.1f MB/s",
			(unsigned long long)rep.packed, (unsigned long long)rep.listed,
			ims_plural(rep.listed, "image", "images"),
			rep.shards, ims_plural(rep.shards, "", "s"), in, outb, rep.seconds,
			(double)rep.packed / s, (double)rep.bytes_in / s / 1e6);
		if (rep.skipped)
			cli_say("%llu skipped, listed in '%s'",
				(unsigned long long)rep.skipped, rep.errors);
		if (shuffle)
			cli_say("records shuffled with --seed %llu",
				(unsigned long long)seed);
		else if (rep.order_why && rep.order == PACK_ORDER_SHUFFLED)
			cli_say("recorded as shuffled: %s (--order list if it is not shuffled)",
				rep.order_why);
		else if (rep.order_why)
			cli_say("recorded as not shuffled: %s (--shuffle shuffles them)",
				rep.order_why);
		cli_say("wrote '%s'", rep.manifest);
	}
	/* Even with --quiet: the split holds some images more than once,
	 * which the list may not have meant. */
	if (rep.repeats.rows)
		cli_warn(0, "pack: %s", repeats);
	/* Even with --quiet: the split is not laid out as asked. */
	if (rep.shards_left_out)
		cli_warn(0, "pack: wrote %d of the %d shards asked for (--shards %d): the rows of the other %d %s were all skipped (%llu skipped %s in all, listed in '%s')",
			 rep.shards, o.shards, o.shards, rep.shards_left_out,
			 ims_plural(rep.shards_left_out, "shard", "shards"),
			 (unsigned long long)rep.skipped, ims_plural(rep.skipped, "file", "files"),
			 rep.errors);
	return CLI_EXIT_OK;
}
