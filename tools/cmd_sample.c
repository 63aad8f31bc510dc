/*
 * cmd_sample.c - `imshard sample`: writes the built-in sample image dataset
 * (datasets.h, ds_sample_write) as class folders.
 */
#include <stdio.h>
#include <string.h>

#include "imshard.h"
#include "datasets/datasets.h"

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)total;
	cli_progress_update(ctx, done);
}

/* --help text after the options; the class list comes from the library so
 * it cannot drift from the code. */
static const char *details(char *buf, size_t len)
{
	size_t n = 0;
	n += (size_t)snprintf(buf + n, len - n,
		"Writes a small, learnable image dataset: one procedurally drawn\n"
		"shape or texture per class, in class folders that 'imshard list'\n"
		"and 'imshard convert folder' read:\n"
		"\n"
		"  OUTDIR/<class>/<class>_<index>.jpg|.png    (index from 0000)\n"
		"\n"
		"Within a class, image size (%d to %d px a side, aspect ratio at\n"
		"most 2), background colour and gradient, foreground colour, position,\n"
		"scale, rotation, line widths, phase and noise vary; the foreground\n"
		"always contrasts with the background in brightness. Shapes lie whole\n"
		"inside the central square of the image, so centre crops keep them;\n"
		"textures fill the image. Classes survive flips, crops, zoom, shift,\n"
		"small rotations and JPEG compression.\n"
		"\n"
		"Files: colour JPEG at quality %d, except every 5th image (index %% 5\n"
		"== 4) which is a PNG, one in 4 of those with an alpha channel\n"
		"(index %% 20 == 9), and greyscale JPEG for index %% 20 == 7.\n"
		"\n"
		"Classes (--classes N takes the first N; labels follow this order,\n"
		"which is also the sorted order of the folder names):\n",
		DS_SAMPLE_MIN_SIDE, DS_SAMPLE_MAX_SIDE, DS_SAMPLE_JPEG_QUALITY);
	for (int k = 0; k < ds_sample_class_count_max() && n < len; k++)
		n += (size_t)snprintf(buf + n, len - n, "  %2d %-13s %s\n", k,
				      ds_sample_class_name(k),
				      ds_sample_class_description(k));
	if (n < len)
		snprintf(buf + n, len - n,
			 "\n"
			 "The same (seed, class, index) always gives the same bytes, whatever\n"
			 "the other options and the thread count. Without --force, OUTDIR must\n"
			 "be missing (it is created) or empty. Images are written to the hidden\n"
			 "folder OUTDIR/.imshard-sample.tmp and moved into place at the end, so\n"
			 "a failed or interrupted run leaves no partial class folders (and\n"
			 "removes OUTDIR, and the parents it made for it, again if it made it).\n"
			 "\n"
			 "Example:\n"
			 "  imshard sample data/sample --classes 10 --per-class 40\n"
			 "  imshard list data/sample -o data/sample --train-ratio 0.8");
	return buf;
}

int cmd_sample(int argc, char **argv)
{
	static char help_details[4096];
	int max_classes = ds_sample_class_count_max();
	char classes_help[160];
	snprintf(classes_help, sizeof(classes_help),
		 "number of classes, %d..%d: the first N kinds listed below "
		 "(default %d)", DS_SAMPLE_MIN_CLASSES, max_classes,
		 DS_SAMPLE_DEFAULT_CLASSES);
	const cli_command cmd = {
		"sample", "imshard sample OUTDIR [options]",
		"Write the built-in sample image dataset (procedural shapes and "
		"textures) as class folders.",
		details(help_details, sizeof(help_details))};

	ds_sample_opts o;
	ds_sample_opts_init(&o);
	int quiet = 0;
	const cli_opt opts[] = {
		{"classes", 0, CLI_INT, &o.classes, "N", classes_help,
		 DS_SAMPLE_MIN_CLASSES, max_classes},
		{"per-class", 0, CLI_INT, &o.per_class, "N",
		 "images per class, 1..100000 (default 40)", 1,
		 DS_SAMPLE_MAX_PER_CLASS},
		{"seed", 0, CLI_U64, &o.seed, "S",
		 "random seed, any non-negative integer (default 0)", 0, 0},
		{"force", 'f', CLI_FLAG, &o.force, NULL,
		 "replace the class folders of an earlier sample in OUTDIR\n"
		 "(other files are kept; other folders, and a file or\n"
		 "link at a class's name, are refused)", 0, 0},
		{"threads", 't', CLI_INT, &o.threads, "T",
		 "worker threads, 0 = one per CPU (default 0)", 0, 256},
		{"quiet", 'q', CLI_FLAG, &quiet, NULL,
		 "no progress and no summary line", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};

	const char *pos[1];
	int n_pos = 0;
	int rc = cli_parse(&cmd, opts, argc, argv, pos, 1, 1, &n_pos);
	if (rc == -1)
		return CLI_EXIT_OK;
	if (rc)
		return rc;
	const char *outdir = pos[0];

	cli_catch_signals();
	cli_progress prog;
	uint64_t total = (uint64_t)o.classes * (uint64_t)o.per_class;
	cli_progress_start(&prog, "sample", total, quiet);
	o.cancel = cli_interrupt_flag();
	o.progress = on_progress;
	o.progress_ctx = &prog;

	ds_sample_report rep;
	ims_error err;
	ims_error_clear(&err);
	rc = ds_sample_write(outdir, &o, &rep, &err);
	cli_progress_finish(&prog);
	if (rc) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	char size[32];
	cli_info(quiet, "wrote %llu %s in %d %s to '%s' (%s, %.1f s)",
		 (unsigned long long)rep.images, ims_plural(rep.images, "image", "images"),
		 rep.classes, ims_plural((uint64_t)rep.classes, "class", "classes"), outdir,
		 cli_format_bytes((double)rep.bytes, size, sizeof(size)),
		 rep.seconds);
	return CLI_EXIT_OK;
}
