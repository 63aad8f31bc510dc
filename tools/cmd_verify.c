/*
 * cmd_verify.c - `imshard verify`: every record against its checksums, the
 * shards against the manifest (digests, encoding, class counts), optionally
 * every image decoded; --rehash upgrades a format 1 manifest's digests.
 */
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
	"(CRC-32C), each shard's digest, the manifest's encoding and the class\n"
	"counts; with --decode also decodes every image.",
	"Each bad record is named (shard and index) with the reason; the checks\n"
	"go on through the whole split.\n\n"
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
	"Exit status: 0 all good, 1 something is wrong (or cannot be read), 2 bad\n"
	"usage."};

#define MAX_NAMED 100

typedef struct shard_result {
	uint64_t bad, checked;
	uint64_t digest;     /* format 2 digest of the records as read */
	uint64_t mode_bad;   /* records that are not what the encoding says */
	char mode_why[IMS_ERRMSG_MAX];
	uint64_t *counts;    /* per class */
	int fatal;           /* the shard could not be read to its end */
} shard_result;

typedef struct verify_ctx {
	const rio_manifest *m;
	int decode;
	size_t nc;
	cli_progress *prog;
	uint64_t done, named;
} verify_ctx;

static void name_bad(verify_ctx *v, const char *msg)
{
#pragma omp critical
	{
		if (v->named++ < MAX_NAMED) {
			if (v->prog->tty && v->prog->drawn)
				fputs("\r\033[K", stderr);
			cli_error("verify: %s", msg);
		}
	}
}

/* One record past its CRCs: class, encoding and (--decode) the image. */
static int check_record(verify_ctx *v, shard_result *sr, uint64_t i,
			const rio_record *rec, aug_codec *codec, aug_image *img,
			ims_error *e)
{
	if ((size_t)rec->label >= v->nc)
		return ims_fail(e, IMS_ECORRUPT,
				"record %llu: label %d has no class (%zu classes)",
				(unsigned long long)i, (int)rec->label, v->nc);
	sr->counts[rec->label]++;
	ims_error me;
	if (rio_record_check_mode(v->m->encoding, rec, &me) < 0 &&
	    sr->mode_bad++ == 0) {
		ims_fail_context(&me, "record %llu", (unsigned long long)i);
		memcpy(sr->mode_why, me.msg, sizeof(sr->mode_why));
	}
	if (!v->decode || rec->encoding == RIO_ENC_RAW)
		return 0;
	aug_decode_opts d = {AUG_CHANNELS_NATIVE, 0, 0, 0};
	aug_image_info info;
	if (aug_decode(codec, rec->payload, rec->payload_len, &d, img, &info, e) < 0)
		return ims_fail_context(e, "record %llu: cannot decode",
					(unsigned long long)i);
	if ((uint32_t)img->width != rec->width || (uint32_t)img->height != rec->height)
		return ims_fail(e, IMS_ECORRUPT,
				"record %llu: decodes to %dx%d, the header says %ux%u",
				(unsigned long long)i, img->width, img->height,
				rec->width, rec->height);
	return 0;
}

static void check_shard(verify_ctx *v, rio_reader *r, size_t s, shard_result *sr)
{
	const rio_shard_info *si = &v->m->shards[s];
	ims_error e;
	rio_cursor *c = NULL;
	aug_codec *codec = NULL;
	aug_image img = {0};
	if (rio_cursor_open(r, RIO_CHECK_PAYLOAD_CRC, &c, &e) < 0 ||
	    (v->decode && aug_codec_create(&codec, &e) < 0)) {
		name_bad(v, e.msg);
		sr->fatal = 1;
	}
	rio_digest dg;
	rio_digest_begin(&dg, v->m->name, s);
	for (uint64_t i = si->first; c && i < si->first + si->records; i++) {
		rio_record rec;
		int rc = rio_cursor_get(c, i, &rec, &e);
		if (rc == IMS_ECHANGED) {
			/* every record after this one is suspect: stop here */
			name_bad(v, e.msg);
			sr->fatal = 1;
			break;
		}
		if (rc == 0 && rio_digest_add_record(&dg, i, &rec, &e) == 0)
			rc = check_record(v, sr, i, &rec, codec, &img, &e);
		else if (rc == 0)
			rc = -1;
		sr->checked++;
		if (rc < 0) {
			sr->bad++;
			name_bad(v, e.msg);
		}
		if ((i & 255) == 255) {
#pragma omp critical
			{
				v->done += 256;
				cli_progress_update(v->prog, v->done);
			}
		}
	}
	sr->digest = rio_digest_value(&dg);
	aug_image_release(&img);
	aug_codec_destroy(codec);
	rio_cursor_close(c);
}

/* The checks across shards; returns whether anything is wrong. */
static int check_split(verify_ctx *v, const shard_result *res)
{
	const rio_manifest *m = v->m;
	int problems = 0;
	for (size_t s = 0; s < m->n_shards; s++) {
		problems |= res[s].fatal;
		if (res[s].mode_bad) {
			cli_error("verify: shard '%s': %llu of %llu records do not match the manifest's encoding '%s' (%s)",
				  m->shards[s].file, (unsigned long long)res[s].mode_bad,
				  (unsigned long long)res[s].checked, m->encoding,
				  res[s].mode_why);
			problems = 1;
		}
		if (m->format_version >= 2 && !res[s].bad && !res[s].fatal &&
		    res[s].digest != m->shards[s].digest) {
			cli_error("verify: shard '%s': digest %016llx differs from the manifest's %016llx (records replaced, reordered, relabelled or dropped, or a shard of another split)",
				  m->shards[s].file, (unsigned long long)res[s].digest,
				  (unsigned long long)m->shards[s].digest);
			problems = 1;
		}
	}
	return problems;
}

static int check_counts(verify_ctx *v, const uint64_t *counts)
{
	const rio_manifest *m = v->m;
	int problems = 0;
	for (size_t c = 0; c < v->nc; c++) {
		uint64_t t = 0;
		for (size_t s = 0; s < m->n_shards; s++)
			t += counts[s * v->nc + c];
		if (t != m->class_counts[c]) {
			cli_error("verify: class %zu ('%s') has %llu records, the manifest says %llu",
				  c, m->classes[c], (unsigned long long)t,
				  (unsigned long long)m->class_counts[c]);
			problems = 1;
		}
	}
	return problems;
}

/* --rehash after a clean check: format 2 digests into the manifest. */
static int rehash(const char *path, const rio_manifest *m, const shard_result *res,
		  int quiet)
{
	if (m->format_version >= 2) {
		cli_info(quiet, "verify: '%s' already has format %d digests, and they match: nothing to rewrite",
			 path, m->format_version);
		return CLI_EXIT_OK;
	}
	uint64_t *d = calloc(m->n_shards, sizeof(*d));
	if (!d) {
		cli_error("verify: out of memory");
		return CLI_EXIT_FAIL;
	}
	for (size_t s = 0; s < m->n_shards; s++)
		d[s] = res[s].digest;
	ims_error err;
	int rc = rio_manifest_rehash(path, m, d, &err);
	free(d);
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
	size_t ns = m->n_shards, nc = m->n_classes;
	shard_result *res = calloc(ns, sizeof(*res));
	uint64_t *counts = calloc(ns * (nc ? nc : 1), sizeof(uint64_t));
	if (!res || !counts) {
		cli_error("verify: out of memory");
		free(res);
		free(counts);
		rio_reader_close(r);
		return CLI_EXIT_FAIL;
	}
	if (m->format_version < 2)
		cli_warn(0, "verify: '%s' is a format %d manifest: its shard digests depend only on record counts and will not be checked; after this check, 'imshard verify --rehash' rewrites them (or pack the split again)",
			 pos[0], m->format_version);
	if (threads <= 0)
		threads = omp_get_num_procs();
	cli_progress prog;
	cli_progress_start(&prog, "verify", m->records, quiet);
	verify_ctx v = {m, decode, nc, &prog, 0, 0};
	double t0 = ims_now();

#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
	for (size_t s = 0; s < ns; s++) {
		res[s].counts = counts + s * (nc ? nc : 1);
		check_shard(&v, r, s, &res[s]);
	}
	cli_progress_finish(&prog);

	uint64_t bad = 0, checked = 0;
	for (size_t s = 0; s < ns; s++) {
		bad += res[s].bad;
		checked += res[s].checked;
	}
	if (v.named > MAX_NAMED)
		cli_error("verify: ... and %llu more bad records",
			  (unsigned long long)(v.named - MAX_NAMED));
	int problems = check_split(&v, res);
	if (!bad && !problems)
		problems = check_counts(&v, counts);
	double secs = ims_now() - t0;
	int status = CLI_EXIT_OK;
	if (bad || problems) {
		cli_error("verify: '%s' FAILED: %llu of %llu %s bad", pos[0],
			  (unsigned long long)bad, (unsigned long long)m->records,
			  ims_plural(m->records, "record", "records"));
		if (rehash_flag)
			cli_error("verify: '%s' not rewritten (--rehash needs a clean check)",
				  pos[0]);
		status = CLI_EXIT_FAIL;
	} else {
		if (!quiet)
			fprintf(stderr, "imshard: verify: '%s' OK: %llu %s in %zu shard%s checked%s in %.1f s; %s\n",
				pos[0], (unsigned long long)checked,
				ims_plural(checked, "record", "records"), ns, ims_plural(ns, "", "s"),
				decode ? " and decoded" : "", secs,
				m->format_version >= 2 ? "shard digests match" :
							 "shard digests NOT checked (format 1 manifest)");
		if (rehash_flag)
			status = rehash(pos[0], m, res, quiet);
	}
	free(res);
	free(counts);
	rio_reader_close(r);
	return status;
}
