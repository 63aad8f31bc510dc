/*
 * cmd_bench_load.c - `imshard bench-load`: runs the training loader on a
 * packed split as fast as the consumer can take batches and reports the
 * throughput, where the workers' time goes (read / decode / augment) and
 * how long the consumer waited. --dump writes the first samples back as
 * PNG files so a person can check what the network would see.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "augment/augment.h"
#include "imshard.h"

static const cli_command command = {
	"bench-load",
	"imshard bench-load MANIFEST.json [options]",
	"Measures how fast a packed split loads into augmented batches: opens the\n"
	"same loader the trainer uses (one rank's share, read, decoded, warped and\n"
	"normalised by OpenMP workers into a ring of batches) and consumes its\n"
	"batches as fast as possible, from epoch 0 on, until --seconds have passed\n"
	"or --epochs are done, whichever comes first (at least one batch).",
	"Reported (stdout): images/s; batches; the workers' time per stage (read,\n"
	"decode, augment; summed over threads, so it can exceed the wall time) and\n"
	"each stage's share; how long the consumer waited for batches and the\n"
	"stall fraction (wait / wall: near 0 means the loader keeps up with a\n"
	"consumer that does nothing, so a real training step will not starve;\n"
	"near 1 means the loader is the bottleneck); bad records replaced (and\n"
	"the last one, with why); the batch ring's memory (page-aligned host\n"
	"memory: pinned memory is imshard-train's, on a GPU, so \"pinned\" is\n"
	"false); the records this rank uses per epoch and how many are padded or\n"
	"dropped across ranks so every rank gets the same number of batches.\n\n"
	"With --json one JSON object is printed instead, with the keys images,\n"
	"seconds, images_per_s, batches, wait_seconds, read_seconds,\n"
	"decode_seconds, augment_seconds, bad_records, pinned, threads, batch,\n"
	"size (plus epochs, stall_fraction, produce_seconds, records_per_rank,\n"
	"padded, dropped, batches_per_epoch, last_bad, rank, world, layout,\n"
	"dtype, train, prefetch).\n\n"
	"--dump N DIR writes the first N samples the loader produced as\n"
	"DIR/sample_<k>_label<L>.png (k from 0): normalisation undone\n"
	"(value * std + mean), converted to 8-bit RGB and clamped to 0..255. The\n"
	"time spent writing them is not counted in the measurement. With\n"
	"--dump-format raw they are DIR/sample_<k>_label<L>.bin instead: the\n"
	"sample's bytes (size x size x 3 elements) exactly as the loader wrote them into the\n"
	"batch (--layout, --dtype, host byte order), to compare bit for bit.\n"
	"Files of an earlier --dump in DIR (sample_<k>_label<L>.png or .bin) that\n"
	"this run did not write are removed at the end, and counted, so DIR\n"
	"holds this run's samples alone; other files in DIR are left as they are.\n\n"
	"Ctrl-C stops early, also while a batch is being made; what was measured\n"
	"so far is reported and the exit status is 1.\n\n"
	"Examples:\n"
	"  imshard bench-load out/train.json --batch 64 --size 224 --threads 8\n"
	"  imshard bench-load out/val.json --val --epochs 1 --json\n"
	"  imshard bench-load out/train.json --augment flip,rotate=10 --dump 16 look/\n\n"
	"Exit status: 0 success, 1 the split cannot be loaded (or interrupted),\n"
	"2 bad usage."};

typedef struct dump_ctx {
	const aug_transform_opts *tr;
	size_t sample_bytes;
	const char *dir;
	int raw;          /* --dump-format raw */
	int want, done;
	int *labels;      /* the label of each sample written, want of them */
	aug_image img;
	ims_buf png;
	cli_progress *prog;
} dump_ctx;

/* One sample as DIR/sample_<k>_label<L>.png (8-bit RGB) or .bin (the
 * loader's bytes as they are). */
static int dump_sample(dump_ctx *d, const uint8_t *s, int label, ims_error *err)
{
	const void *bytes;
	size_t len;
	if (d->raw) {
		bytes = s;
		len = d->sample_bytes;
	} else {
		if (aug_sample_to_rgb8(s, d->tr, &d->img, err) < 0 ||
		    aug_encode_png(NULL, &d->img, &d->png, err) < 0)
			return -1;
		bytes = d->png.data;
		len = d->png.len;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/sample_%d_label%d.%s", d->dir, d->done, label,
		 d->raw ? "bin" : "png");
	d->labels[d->done] = label;
	/* through a temporary of its own, never through a link at the name */
	return ims_write_file_atomic(path, bytes, len, err);
}

/* Whether name is a --dump file (sample_<k>_label<L>.png or .bin) that
 * this run did not write: an earlier run's, which would otherwise sit
 * among this run's samples looking like one of them. */
static int stale_dump_file(const dump_ctx *d, const char *name)
{
	/* sample_, digits, _label, digits, .png or .bin: nothing else */
	const char *p = name;
	unsigned long long k = 0;
	if (strncmp(p, "sample_", 7) != 0 || !isdigit((unsigned char)p[7]))
		return 0;
	for (p += 7; isdigit((unsigned char)*p); p++)
		k = k < 100000000ULL ? k * 10 + (unsigned)(*p - '0') : k;
	if (strncmp(p, "_label", 6) != 0 || !isdigit((unsigned char)p[6]))
		return 0;
	for (p += 6; isdigit((unsigned char)*p); p++)
		;
	if (strcmp(p, ".png") != 0 && strcmp(p, ".bin") != 0)
		return 0;
	char ours[64];
	if (k < (unsigned long long)d->done) {
		snprintf(ours, sizeof(ours), "sample_%llu_label%d.%s", k, d->labels[k],
			 d->raw ? "bin" : "png");
		if (strcmp(name, ours) == 0)
			return 0;
	}
	return 1;
}

/* Removes the earlier runs' --dump files from the folder, so it holds
 * this run's samples alone; returns how many went, or -1. */
static long remove_stale_dump(const dump_ctx *d, ims_error *err)
{
	ims_dir_listing l = {0};
	if (ims_dir_list(d->dir, 0, &l, err) < 0)
		return -1;
	long removed = 0;
	char path[4096];
	for (size_t i = 0; i < l.n && removed >= 0; i++) {
		if (l.e[i].kind == IMS_KIND_FOLDER || !stale_dump_file(d, l.e[i].name))
			continue;
		if (ims_path_join(path, sizeof(path), d->dir, l.e[i].name, err) < 0)
			removed = -1;
		else if (unlink(path) != 0 && errno != ENOENT) {
			ims_fail(err, IMS_EIO, "cannot remove '%s' of an earlier --dump: %s",
				 path, strerror(errno));
			removed = -1;
		} else
			removed++;
	}
	ims_dir_listing_release(&l);
	return removed;
}

static int on_batch(void *ctx, const aug_batch *b, ims_error *err)
{
	dump_ctx *d = ctx;
	for (int i = 0; i < b->count && d->done < d->want; i++, d->done++)
		if (dump_sample(d, (const uint8_t *)b->data + (size_t)i * d->sample_bytes,
				b->labels[i], err) < 0)
			return IMS_EIO;
	return 0;
}

static void on_progress(void *ctx, uint64_t batches, uint64_t total)
{
	dump_ctx *d = ctx;
	d->prog->total = total;
	cli_progress_update(d->prog, batches);
}

/*
 * --dump takes two values (N DIR), which cli_parse does not do: take it out
 * of argv first (before any `--`), leaving the rest in out.
 */
static int take_dump(int argc, char **argv, char **out, int *out_argc,
		     int *n, const char **dir)
{
	int j = 0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			while (i < argc)
				out[j++] = argv[i++];
			break;
		}
		if (i > 0 && strcmp(argv[i], "--dump") == 0) {
			if (i + 2 >= argc)
				return cli_usage_error(&command, "--dump needs two values (N DIR)");
			char *end;
			errno = 0;
			long v = strtol(argv[i + 1], &end, 10);
			if (errno || end == argv[i + 1] || *end || v < 1 || v > 100000)
				return cli_usage_error(&command,
						       "--dump N must be an integer between 1 and 100000, got '%s'",
						       argv[i + 1]);
			if (!*argv[i + 2] || argv[i + 2][0] == '-')
				return cli_usage_error(&command,
						       "--dump needs a directory after N, got '%s' (write ./%s for a name that starts with '-')",
						       argv[i + 2], argv[i + 2]);
			*n = (int)v;
			*dir = argv[i + 2];
			i += 2;
			continue;
		}
		out[j++] = argv[i];
	}
	*out_argc = j;
	return 0;
}

static const char *layout_name(aug_layout l)
{
	return l == AUG_LAYOUT_NHWC ? "nhwc" : "nchw";
}

static const char *dtype_name(aug_dtype d)
{
	static const char *names[] = {"u8", "f32", "f16", "bf16"};
	return (unsigned)d < 4 ? names[d] : "?";
}

static double share(double part, double total)
{
	return total > 0 ? 100.0 * part / total : 0.0;
}

/* The loader's warnings (ctx: the quiet flag). */
static void on_loader_event(void *ctx, const char *msg)
{
	cli_warn(*(const int *)ctx, "bench-load: %s", msg);
}

int cmd_bench_load(int argc, char **argv)
{
	int batch = 32, size = 0, val = 0, threads = 0, rank = 0, world = 1;
	int epochs = 0, prefetch = 0, shard_owning = 0, no_pinned = 0;
	int json = 0, quiet = 0;
	uint64_t seed = 0;
	double seconds = 10.0;
	const char *augment = NULL, *layout = NULL, *dtype = NULL;
	const char *mean_s = NULL, *std_s = NULL, *dump_help = NULL;
	const char *dump_format = NULL;
	const cli_opt opts[] = {
		{"batch", 'b', CLI_INT, &batch, "B", "samples per batch, per rank (default 32)", 1, 65536},
		{"size", 0, CLI_INT, &size, "PX", "PX x PX samples, 1..4096 (default 224)", 1, AUG_MAX_OUT_SIDE},
		{"augment", 0, CLI_STRING, &augment, "SPEC",
		 "augmentation on top of the training defaults\n"
		 "(random-resized-crop), as imshard-train's:\n"
		 "comma-separated none, flip, noflip, rrc, norrc,\n"
		 "rrc=A:B, ratio=A:B, zoom=Z, shift=S, rotate=D", 0, 0},
		{"val", 0, CLI_FLAG, &val, NULL,
		 "the validation loader: file order, resize and\n"
		 "centre crop, short last batch kept, shares padded", 0, 0},
		{"threads", 'j', CLI_INT, &threads, "T", "loader workers, 1..1024 (default: all cores)", 1, 1024},
		{"rank", 0, CLI_INT, &rank, "R", "load rank R's share (default 0; R < W)", 0, 1048576},
		{"world", 0, CLI_INT, &world, "W", "ranks the split is shared among (default 1)", 1, 1048576},
		{"seed", 0, CLI_U64, &seed, "S", "shuffle and augmentation seed (default 0)", 0, 0},
		{"epochs", 0, CLI_INT, &epochs, "E", "stop after E epochs (default: no limit)", 1, 1000000},
		{"seconds", 0, CLI_DOUBLE, &seconds, "S",
		 "stop after S seconds of wall time (default 10;\n"
		 "0 = no limit, needs --epochs)", 0, 1e9},
		{"layout", 0, CLI_STRING, &layout, "L", "sample layout: nchw (default) or nhwc", 0, 0},
		{"dtype", 0, CLI_STRING, &dtype, "D", "element type: u8, f32 (default), f16 or bf16", 0, 0},
		{"mean", 0, CLI_STRING, &mean_s, "R,G,B",
		 "per-channel mean subtracted, in pixel units\n"
		 "0..255 (default 0,0,0; f32, f16 and bf16 only)", 0, 0},
		{"std", 0, CLI_STRING, &std_s, "R,G,B",
		 "per-channel std divided by, > 0 (default 1,1,1);\n"
		 "ImageNet's: --mean 123.675,116.28,103.53\n"
		 "--std 58.395,57.12,57.375", 0, 0},
		{"prefetch", 0, CLI_INT, &prefetch, "K", "batches prepared ahead, 1..1024 (default 3)", 1, 1024},
		{"shard-owning", 0, CLI_FLAG, &shard_owning, NULL,
		 "each rank reads only the shards s with\n"
		 "s % W == R (node-local data)", 0, 0},
		{"no-pinned", 0, CLI_FLAG, &no_pinned, NULL,
		 "accepted for old scripts: the batch ring is always\n"
		 "page-aligned host memory here (pinned memory is\n"
		 "imshard-train's, on a GPU)", 0, 0},
		{"dump", 0, CLI_STRING, &dump_help, "N DIR",
		 "write the first N samples as PNG files\n"
		 "DIR/sample_<k>_label<L>.png (DIR is created, and\n"
		 "removed again by a run that fails before writing)", 0, 0},
		{"dump-format", 0, CLI_STRING, &dump_format, "F",
		 "png (default): 8-bit pictures, normalisation\n"
		 "undone; raw: DIR/sample_<k>_label<L>.bin, each\n"
		 "sample's bytes exactly as the loader made them", 0, 0},
		{"json", 0, CLI_FLAG, &json, NULL, "print the results as one JSON object", 0, 0},
		{"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress line or loader notes", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};

	int dump_n = 0;
	const char *dump_dir = NULL;
	char **args = malloc(sizeof(*args) * (size_t)(argc + 1));
	if (!args) {
		cli_error("bench-load: out of memory");
		return CLI_EXIT_FAIL;
	}
	int nargs = 0;
	int rc = take_dump(argc, argv, args, &nargs, &dump_n, &dump_dir);
	const char *pos[1];
	int np;
	if (!rc)
		rc = cli_parse(&command, opts, nargs, args, pos, 1, 1, &np);
	free(args);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	if (dump_help) /* only reachable as --dump=...: one value */
		return cli_usage_error(&command, "--dump needs two values (N DIR)");
	int dump_raw = 0;
	if (dump_format) {
		if (strcmp(dump_format, "raw") == 0)
			dump_raw = 1;
		else if (strcmp(dump_format, "png") != 0)
			return cli_usage_error(&command, "--dump-format must be png or raw, got '%s'", dump_format);
		if (!dump_n)
			return cli_usage_error(&command, "--dump-format needs --dump N DIR");
	}

	aug_bench_opts bo;
	aug_bench_opts_init(&bo);
	aug_loader_opts *lo = &bo.loader;
	aug_loader_opts_init(lo, !val);
	aug_transform_opts *tr = &lo->transform;
	aug_transform_opts_init(tr, !val);
	ims_error err;
	ims_error_clear(&err);
	if (aug_transform_parse(augment, tr, &err) < 0)
		return cli_usage_error(&command, "--augment: %s", err.msg);
	if (size)
		tr->out_w = tr->out_h = size;
	if (layout) {
		if (strcmp(layout, "nchw") == 0)
			tr->layout = AUG_LAYOUT_NCHW;
		else if (strcmp(layout, "nhwc") == 0)
			tr->layout = AUG_LAYOUT_NHWC;
		else
			return cli_usage_error(&command, "--layout must be nchw or nhwc, got '%s'", layout);
	}
	if (dtype) {
		static const char *names[] = {"u8", "f32", "f16", "bf16"};
		int d = -1;
		for (int i = 0; i < 4; i++)
			if (strcmp(dtype, names[i]) == 0)
				d = i;
		if (d < 0)
			return cli_usage_error(&command, "--dtype must be u8, f32, f16 or bf16, got '%s'", dtype);
		tr->dtype = (aug_dtype)d;
	}
	if (mean_s && cli_parse_triple(mean_s, tr->mean) < 0)
		return cli_usage_error(&command, "--mean expects three numbers R,G,B, got '%s'", mean_s);
	if (std_s) {
		if (cli_parse_triple(std_s, tr->std) < 0)
			return cli_usage_error(&command, "--std expects three numbers R,G,B, got '%s'", std_s);
		if (!cli_std_ok(tr->std))
			return cli_usage_error(&command, "--std values must be greater than 0 with 1/std a finite float (at least about 3e-39), got '%s'", std_s);
	}
	for (int c = 0; c < 3; c++)
		if (tr->dtype == AUG_DTYPE_U8 && (tr->mean[c] != 0 || tr->std[c] != 1))
			return cli_usage_error(&command, "--mean and --std need --dtype f32, f16 "
					       "or bf16: u8 samples are the pixels as they are");
	if (rank >= world)
		return cli_usage_error(&command, "--rank %d must be less than --world %d", rank, world);
	if (seconds <= 0 && !epochs)
		return cli_usage_error(&command, "--seconds 0 (no time limit) needs --epochs");
	struct stat dst;
	if (dump_n && stat(dump_dir, &dst) == 0 && !S_ISDIR(dst.st_mode))
		return cli_usage_error(&command, "--dump DIR '%s' is not a folder (%s)",
				       dump_dir, ims_file_kind(dst.st_mode));
	/* Made before the loader opens, so a folder that cannot be made
	 * fails before the measurement; a failed run takes back what it
	 * made while it is empty. */
	char *created = NULL;
	if (dump_n && ims_mkdir_p_created(dump_dir, &created, &err) < 0) {
		cli_error("bench-load: %s", err.msg);
		return CLI_EXIT_FAIL;
	}

	lo->manifest = pos[0];
	lo->rank = rank;
	lo->world = world;
	lo->seed = seed;
	lo->batch_size = batch;
	lo->train = !val;
	lo->threads = threads;
	lo->prefetch = prefetch;
	lo->shard_owning = shard_owning;
	(void)no_pinned; /* the loader's default memory is never pinned */
	lo->quiet = quiet || json;
	lo->event = on_loader_event;
	lo->event_ctx = &quiet;

	cli_catch_signals();
	/* A shard truncated under the loader is named, not a silent SIGBUS. */
	ims_mapguard_install("imshard: bench-load");
	cli_progress prog;
	dump_ctx d = {.tr = tr, .sample_bytes = aug_sample_bytes(tr), .dir = dump_dir,
		      .raw = dump_raw, .want = dump_n, .prog = &prog};
	if (dump_n && !(d.labels = calloc((size_t)dump_n, sizeof(*d.labels)))) {
		free(created);
		cli_error("bench-load: out of memory");
		return CLI_EXIT_FAIL;
	}
	bo.epochs = epochs;
	bo.seconds = seconds;
	bo.cancel = cli_interrupt_flag();
	bo.on_batch = dump_n ? on_batch : NULL;
	bo.progress = on_progress;
	bo.ctx = &d;
	/* the total is known once the loader is open: on_progress sets it */
	cli_progress_start(&prog, "bench-load", 0, quiet || json);
	aug_bench_result res;
	rc = aug_bench_run(&bo, &res, &err);
	cli_progress_finish(&prog);
	aug_image_release(&d.img);
	ims_buf_release(&d.png);
	if (rc < 0) {
		if (created)
			ims_rmdir_created(dump_dir, created);
		free(created);
		free(d.labels);
		cli_error("bench-load: %s", err.msg);
		return CLI_EXIT_FAIL;
	}
	if (res.interrupted && created && d.done == 0)
		ims_rmdir_created(dump_dir, created);
	free(created);
	/* The folder shows this run's samples alone, never mixed with an
	 * earlier run's (a larger N, another label at the same k). */
	long stale = d.done > 0 ? remove_stale_dump(&d, &err) : 0;
	free(d.labels);
	if (stale < 0) {
		cli_error("bench-load: %s", err.msg);
		return CLI_EXIT_FAIL;
	}
	const aug_loader_stats st = res.stats;
	uint64_t images = res.images, batches = res.batches, per_epoch = res.batches_per_epoch;
	uint64_t per_rank = res.records_per_rank, padded = res.padded, dropped = res.dropped;
	double wall = res.seconds;
	threads = res.threads;
	int dumped = d.done;

	double ips = res.images_per_s;
	double work = st.read_seconds + st.decode_seconds + st.augment_seconds;
	double stall = res.stall_fraction;
	double epochs_f = res.epochs;
	if (json) {
		cJSON *j = cJSON_CreateObject();
		cJSON_AddNumberToObject(j, "images", (double)images);
		cJSON_AddNumberToObject(j, "seconds", wall);
		cJSON_AddNumberToObject(j, "images_per_s", ips);
		cJSON_AddNumberToObject(j, "batches", (double)batches);
		cJSON_AddNumberToObject(j, "epochs", epochs_f);
		cJSON_AddNumberToObject(j, "wait_seconds", st.wait_seconds);
		cJSON_AddNumberToObject(j, "stall_fraction", stall);
		cJSON_AddNumberToObject(j, "read_seconds", st.read_seconds);
		cJSON_AddNumberToObject(j, "decode_seconds", st.decode_seconds);
		cJSON_AddNumberToObject(j, "augment_seconds", st.augment_seconds);
		cJSON_AddNumberToObject(j, "produce_seconds", st.produce_seconds);
		cJSON_AddNumberToObject(j, "bad_records", (double)st.bad_records);
		if (st.bad_records)
			cJSON_AddStringToObject(j, "last_bad", st.last_bad);
		else
			cJSON_AddNullToObject(j, "last_bad");
		cJSON_AddBoolToObject(j, "pinned", st.pinned != 0);
		cJSON_AddNumberToObject(j, "threads", threads);
		cJSON_AddNumberToObject(j, "batch", batch);
		cJSON_AddNumberToObject(j, "size", tr->out_w);
		cJSON_AddStringToObject(j, "layout", layout_name(tr->layout));
		cJSON_AddStringToObject(j, "dtype", dtype_name(tr->dtype));
		cJSON_AddBoolToObject(j, "train", !val);
		cJSON_AddNumberToObject(j, "rank", rank);
		cJSON_AddNumberToObject(j, "world", world);
		cJSON_AddNumberToObject(j, "records_per_rank", (double)per_rank);
		cJSON_AddNumberToObject(j, "padded", (double)padded);
		cJSON_AddNumberToObject(j, "dropped", (double)dropped);
		cJSON_AddNumberToObject(j, "batches_per_epoch", (double)per_epoch);
		cJSON_AddNumberToObject(j, "prefetch", st.prefetch);
		char *text = cJSON_PrintUnformatted(j);
		cJSON_Delete(j);
		if (!text) {
			cli_error("bench-load: out of memory");
			return CLI_EXIT_FAIL;
		}
		printf("%s\n", text);
		cJSON_free(text);
	} else {
		printf("loaded %llu %s in %llu %s (%.2f epochs) in %.2f s: %.1f images/s\n",
		       (unsigned long long)images, ims_plural(images, "image", "images"),
		       (unsigned long long)batches, ims_plural(batches, "batch", "batches"), epochs_f,
		       wall, ips);
		printf("  rank %d of %d, %s, batch %d, %dx%d %s %s, %d worker%s, prefetch %d\n",
		       rank, world, val ? "validation" : "training", batch, tr->out_w,
		       tr->out_h, layout_name(tr->layout), dtype_name(tr->dtype),
		       threads, ims_plural(threads, "", "s"), st.prefetch);
		printf("  worker time (summed over threads): read %.2f s (%.0f%%), decode %.2f s (%.0f%%), augment %.2f s (%.0f%%)\n",
		       st.read_seconds, share(st.read_seconds, work), st.decode_seconds,
		       share(st.decode_seconds, work), st.augment_seconds,
		       share(st.augment_seconds, work));
		printf("  consumer waited %.3f s: stall fraction %.3f\n", st.wait_seconds, stall);
		printf("  bad records replaced: %llu\n", (unsigned long long)st.bad_records);
		char safe[4 * sizeof(st.last_bad)];
		if (st.bad_records)
			printf("  last bad record: %s\n",
			       ims_escape(st.last_bad, safe, sizeof(safe)));
		printf("  batch memory: %s\n", st.pinned ? "pinned (cudaHostAlloc)" : "not pinned (host memory)");
		/* training batches are whole: a short last one is dropped */
		uint64_t whole = per_epoch * (uint64_t)batch;
		uint64_t short_batch = !val && per_rank > whole ? per_rank - whole : 0;
		printf("  records per rank per epoch: %llu (%llu padded, %llu dropped across ranks, "
		       "%llu dropped in a short last batch; %llu %s per epoch)\n",
		       (unsigned long long)per_rank, (unsigned long long)padded,
		       (unsigned long long)dropped, (unsigned long long)short_batch,
		       (unsigned long long)per_epoch, ims_plural(per_epoch, "batch", "batches"));
		if (dump_n)
			printf("  wrote %d sample%s to '%s'\n", dumped, ims_plural(dumped, "", "s"),
			       ims_escape(dump_dir, safe, sizeof(safe)));
		if (stale > 0)
			printf("  removed %ld file%s of an earlier --dump from it\n", stale,
			       ims_plural((uint64_t)stale, "", "s"));
	}
	if (res.interrupted) {
		cli_error("bench-load: interrupted after %llu %s",
			  (unsigned long long)batches, ims_plural(batches, "batch", "batches"));
		return CLI_EXIT_FAIL;
	}
	return CLI_EXIT_OK;
}
