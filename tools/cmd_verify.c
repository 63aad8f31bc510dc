/*
 * cmd_verify.c - `imshard verify`: every record against its checksums, the
 * shards against the manifest (digests, encoding, class counts), optionally
 * every image decoded; --rehash upgrades a format 1 manifest's digests.
 */
#include <libgen.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment/augment.h"
#include "imshard.h"
#include "recordio/recordio.h"

static const cli_command command = {
	"verify",
	"imshard verify MANIFEST.json [--decode] [--rehash] [--threads T] [--quiet]",
	"Checks a packed split end to end: the shards against the manifest (files,\n"
	"sizes, record ranges), every record's header and payload checksums\n"
	"(CRC-32C), each shard's digest, the manifest's encoding and number of\n"
	"extra labels, the class counts and the class names (names pack would\n"
	"refuse: repeated, empty, holding a line break or TAB); with --decode\n"
	"also decodes every image.",
	"Each bad record is named (shard and index) with the reason; the checks\n"
	"go on through the whole split, and the bad records are then counted by\n"
	"class (each read from its record's header, the classes with most first,\n"
	"a class whose every record is bad marked \"all of them\"), so a class\n"
	"lost whole is seen as one.\n\n"
	"A shard's digest (manifest format 2) covers every record's key, header,\n"
	"labels and payload checksum in order, and the split's name: a shard\n"
	"replaced by another (re-packed in another order, other labels, a record\n"
	"dropped, a shard of another split) fails it. Manifests of format 1\n"
	"carry digests that depend only on record counts: they are read, the\n"
	"records are checked, and verify says the digests were not checked.\n"
	"--rehash then rewrites such a manifest (atomically, holding the split's\n"
	"lock) with format 2 digests of the shards as they are, but only after\n"
	"every other check passed: it trusts that the records are the ones you\n"
	"packed, so run it on a split you know to be right, or pack it again.\n\n"
	"Files beside the manifest named as the split's but not listed by it\n"
	"(NAME-SSSSS-of-NNNNN.mdb copied in or left by another pack, an\n"
	"interrupted pack's NAME-SSSSS.mdb.partial or .compact) are not part of\n"
	"the split: a warning names each, even with --quiet.\n\n"
	"Exit status: 0 all good, 1 something is wrong (or cannot be read), 2 bad\n"
	"usage."};

/* What --decode checks per record; one decoder per worker thread. */
typedef struct verify_ctx {
	cli_progress *prog;
	aug_codec **codecs; /* NULL without --decode */
	aug_image *imgs;
} verify_ctx;

static void on_problem(void *ctx, const char *line)
{
	verify_ctx *v = ctx;
	if (v->prog->tty && v->prog->drawn)
		fputs("\r\033[K", stderr);
	cli_error("verify: %s", line);
}

static int on_progress(void *ctx, uint64_t done)
{
	verify_ctx *v = ctx;
	cli_progress_update(v->prog, done);
	return 0;
}

/* --decode: the image decodes, to the size its header states. */
static int decode_record(void *ctx, int worker, uint64_t i, const rio_record *rec,
			 ims_error *e)
{
	verify_ctx *v = ctx;
	if (rec->encoding == RIO_ENC_RAW)
		return 0;
	aug_image *img = &v->imgs[worker];
	aug_decode_opts d = {AUG_CHANNELS_NATIVE, 0, 0, 0};
	aug_image_info info;
	if (aug_decode(v->codecs[worker], rec->payload, rec->payload_len, &d, img,
		       &info, e) < 0)
		return ims_fail_context(e, "record %llu: cannot decode",
					(unsigned long long)i);
	if ((uint32_t)img->width != rec->width || (uint32_t)img->height != rec->height)
		return ims_fail(e, IMS_ECORRUPT,
				"record %llu: decodes to %dx%d, the header says %ux%u",
				(unsigned long long)i, img->width, img->height,
				rec->width, rec->height);
	return 0;
}

static void free_decoders(verify_ctx *v, int threads)
{
	/* either may be NULL: make_decoders ran out between the two */
	for (int t = 0; v->codecs && t < threads; t++)
		aug_codec_destroy(v->codecs[t]);
	for (int t = 0; v->imgs && t < threads; t++)
		aug_image_release(&v->imgs[t]);
	free(v->codecs);
	free(v->imgs);
}

static int make_decoders(verify_ctx *v, int threads, ims_error *e)
{
	v->codecs = calloc((size_t)threads, sizeof(*v->codecs));
	v->imgs = calloc((size_t)threads, sizeof(*v->imgs));
	RETURN_IF(!v->codecs || !v->imgs, e, IMS_ENOMEM,
		  "cannot make %d decoders: out of memory", threads);
	for (int t = 0; t < threads; t++)
		FORWARD_IF_ERR(aug_codec_create(&v->codecs[t], e));
	return 0;
}

/* A file named as one of the split's that its manifest does not list. */
typedef struct stray_ctx {
	const char *dir, *manifest, *name;
} stray_ctx;

static void on_stray(void *ctx, const char *file, rio_stray_kind kind)
{
	const stray_ctx *s = ctx;
	if (kind == RIO_STRAY_SHARD)
		cli_warn(0, "verify: '%s/%s' is named as a shard of '%s' but '%s' does not list it: it is not part of the split (copied in, or left by another pack?)",
			 s->dir, file, s->name, s->manifest);
	else
		cli_warn(0, "verify: '%s/%s' is a working file of an interrupted pack of '%s' (or of one running now): it is not part of the split, and the next pack of '%s' removes it",
			 s->dir, file, s->name, s->name);
}

/* --rehash after a clean check: format 2 digests into the manifest. */
static int rehash(const char *path, const rio_manifest *m, const uint64_t *digests,
		  int quiet)
{
	if (m->format_version >= 2) {
		cli_info(quiet, "verify: '%s' already has format %d digests, and they match: nothing to rewrite",
			 path, m->format_version);
		return CLI_EXIT_OK;
	}
	ims_error err;
	int rc = rio_manifest_rehash(path, m, digests, &err);
	if (rc < 0) {
		cli_error("verify: %s", err.msg);
		return CLI_EXIT_FAIL;
	}
	cli_info(quiet, "verify: '%s' rewritten with format %d digests of its %zu shard%s",
		 path, RIO_MANIFEST_VERSION, m->n_shards, ims_plural(m->n_shards, "", "s"));
	return CLI_EXIT_OK;
}

int cmd_verify(int argc, char **argv)
{
	int decode = 0, threads = 0, quiet = 0, rehash_flag = 0;
	const cli_opt opts[] = {
		{"decode", 0, CLI_FLAG, &decode, NULL, "also decode every image (slower)", 0, 0},
		{"rehash", 0, CLI_FLAG, &rehash_flag, NULL, "after a clean check, rewrite a format 1 manifest with format 2 digests", 0, 0},
		{"threads", 'j', CLI_INT, &threads, "T", "shards checked in parallel (default: all cores)", 1, 1024},
		{"quiet", 'q', CLI_FLAG, &quiet, NULL, "print only problems", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[1];
	int np;
	int rc = cli_parse(&command, opts, argc, argv, pos, 1, 1, &np);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	/* A shard truncated under us is named, not a silent SIGBUS. */
	ims_mapguard_install("imshard: verify");
	ims_error err;
	rio_reader *r;
	if (rio_reader_open(pos[0], &r, &err) < 0) {
		cli_error("verify: %s", err.msg);
		return CLI_EXIT_FAIL;
	}
	const rio_manifest *m = rio_reader_manifest(r);
	size_t ns = m->n_shards;
	uint64_t *digests = calloc(ns ? ns : 1, sizeof(*digests));
	if (!digests) {
		cli_error("verify: out of memory");
		rio_reader_close(r);
		return CLI_EXIT_FAIL;
	}
	if (m->format_version < 2)
		cli_warn(0, "verify: '%s' is a format %d manifest: its shard digests depend only on record counts and will not be checked; after this check, 'imshard verify --rehash' rewrites them (or pack the split again)",
			 pos[0], m->format_version);
	if (threads <= 0)
		threads = omp_get_num_procs();
	if (ns && (size_t)threads > ns)
		threads = (int)ns; /* one shard per thread at a time */
	cli_progress prog;
	verify_ctx v = {&prog, NULL, NULL};
	if (decode && make_decoders(&v, threads, &err) < 0) {
		cli_error("verify: %s", err.msg);
		free_decoders(&v, threads);
		free(digests);
		rio_reader_close(r);
		return CLI_EXIT_FAIL;
	}
	rio_verify_opts o;
	rio_verify_opts_init(&o);
	o.threads = threads;
	o.check = decode ? decode_record : NULL;
	o.problem = on_problem;
	o.progress = on_progress;
	o.ctx = &v;
	cli_progress_start(&prog, "verify", m->records, quiet);
	double t0 = ims_now();
	rio_verify_result res;
	rc = rio_verify(r, &o, &res, digests, &err);
	cli_progress_finish(&prog);
	double secs = ims_now() - t0;
	int status = CLI_EXIT_OK;
	if (rc < 0) {
		cli_error("verify: %s", err.msg);
		status = CLI_EXIT_FAIL;
	} else if (!res.ok) {
		cli_error("verify: '%s' FAILED: %llu of %llu %s bad", pos[0],
			  (unsigned long long)res.bad, (unsigned long long)m->records,
			  ims_plural(m->records, "record", "records"));
		if (rehash_flag)
			cli_error("verify: '%s' not rewritten (--rehash needs a clean check)",
				  pos[0]);
		status = CLI_EXIT_FAIL;
	} else {
		cli_info(quiet, "verify: '%s' OK: %llu %s in %zu shard%s checked%s in %.1f s; %s",
			 pos[0], (unsigned long long)res.checked,
			 ims_plural(res.checked, "record", "records"), ns, ims_plural(ns, "", "s"),
			 decode ? " and decoded" : "", secs,
			 res.digests_checked ? "shard digests match" :
					       "shard digests NOT checked (format 1 manifest)");
		if (rehash_flag)
			status = rehash(pos[0], m, digests, quiet);
	}
	/* Even with --quiet, and whatever the check found: files that look
	 * like the split's but are not read as part of it. */
	char dirbuf[4096];
	snprintf(dirbuf, sizeof(dirbuf), "%s", pos[0]);
	stray_ctx sc = {dirname(dirbuf), pos[0], m->name};
	if (rio_split_strays(sc.dir, m, on_stray, &sc, &err) < 0)
		cli_warn(0, "verify: %s", err.msg);
	free_decoders(&v, threads);
	free(digests);
	rio_reader_close(r);
	return status;
}
