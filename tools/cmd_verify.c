/*
 * cmd_verify.c - `imshard verify`: every record against its checksums, the
 * shards against the manifest, and optionally every image decoded.
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
	"imshard verify MANIFEST.json [--decode] [--threads T] [--quiet]",
	"Checks a packed split end to end: the shards against the manifest (files,\n"
	"sizes, record ranges), every record's header and payload checksums\n"
	"(CRC-32C), each shard's digest and the class counts; with --decode also\n"
	"decodes every image.",
	"Each bad record is named (shard and index) with the reason; the checks\n"
	"go on through the whole split.\n\n"
	"Exit status: 0 all good, 1 something is wrong (or cannot be read), 2 bad\n"
	"usage."};

#define MAX_NAMED 100

typedef struct shard_result {
	uint64_t bad, checked;
	uint32_t digest;
	uint64_t *counts; /* per class */
	int fatal;
} shard_result;

int cmd_verify(int argc, char **argv)
{
	int decode = 0, threads = 0, quiet = 0;
	const cli_opt opts[] = {
		{"decode", 0, CLI_FLAG, &decode, NULL, "also decode every image (slower)", 0, 0},
		{"threads", 'j', CLI_INT, &threads, "T", "shards checked in parallel (default: all cores)", 1, 1024},
		{"quiet", 'q', CLI_FLAG, &quiet, NULL, "print only problems", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[1];
	int np;
	int rc = cli_parse(&command, opts, argc, argv, pos, 1, 1, &np);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
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
		rio_reader_close(r);
		return CLI_EXIT_FAIL;
	}
	if (threads <= 0)
		threads = omp_get_num_procs();
	cli_progress prog;
	cli_progress_start(&prog, "verify", m->records, quiet);
	uint64_t done = 0, named = 0;
	double t0 = ims_now();

#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
	for (size_t s = 0; s < ns; s++) {
		shard_result *sr = &res[s];
		sr->counts = counts + s * (nc ? nc : 1);
		ims_error e;
		rio_cursor *c = NULL;
		aug_codec *codec = NULL;
		aug_image img = {0};
		if (rio_cursor_open(r, RIO_CHECK_PAYLOAD_CRC, &c, &e) < 0 ||
		    (decode && aug_codec_create(&codec, &e) < 0)) {
#pragma omp critical
			cli_error("verify: %s", e.msg);
			sr->fatal = 1;
		}
		const rio_shard_info *si = &m->shards[s];
		for (uint64_t i = si->first; c && i < si->first + si->records; i++) {
			rio_record rec;
			int bad = rio_cursor_get(c, i, &rec, &e) < 0;
			if (!bad) {
				uint8_t hdr[RIO_HEADER_FIXED + 4 * RIO_MAX_EXTRA_LABELS];
				int h = rio_header_encode(&rec, hdr, NULL);
				if (h > 0)
					sr->digest = ims_crc32c(sr->digest, hdr, (size_t)h);
				if ((size_t)rec.label < nc)
					sr->counts[rec.label]++;
				else {
					bad = 1;
					snprintf(e.msg, sizeof(e.msg),
						 "record %llu: label %d has no class (%zu classes)",
						 (unsigned long long)i, (int)rec.label, nc);
				}
			}
			if (!bad && decode && rec.encoding != RIO_ENC_RAW) {
				aug_decode_opts d = {AUG_CHANNELS_NATIVE, 0, 0, 0};
				aug_image_info info;
				if (aug_decode(codec, rec.payload, rec.payload_len, &d, &img,
					       &info, &e) < 0) {
					bad = 1;
					ims_fail_context(&e, "record %llu: cannot decode",
							 (unsigned long long)i);
				} else if ((uint32_t)img.width != rec.width ||
					   (uint32_t)img.height != rec.height) {
					bad = 1;
					snprintf(e.msg, sizeof(e.msg),
						 "record %llu: decodes to %dx%d, the header says %ux%u",
						 (unsigned long long)i, img.width, img.height,
						 rec.width, rec.height);
				}
			}
			sr->checked++;
			if (bad) {
				sr->bad++;
#pragma omp critical
				{
					if (named++ < MAX_NAMED) {
						if (prog.tty && prog.drawn)
							fputs("\r\033[K", stderr);
						cli_error("verify: %s", e.msg);
					}
				}
			}
			if ((i & 255) == 255) {
#pragma omp critical
				{
					done += 256;
					cli_progress_update(&prog, done);
				}
			}
		}
		aug_image_release(&img);
		aug_codec_destroy(codec);
		rio_cursor_close(c);
	}
	cli_progress_finish(&prog);

	uint64_t bad = 0, checked = 0;
	int problems = 0;
	for (size_t s = 0; s < ns; s++) {
		bad += res[s].bad;
		checked += res[s].checked;
		problems |= res[s].fatal;
		if (!res[s].bad && !res[s].fatal && res[s].digest != m->shards[s].digest) {
			cli_error("verify: shard '%s': digest %08x differs from the manifest's %08x (records replaced or reordered)",
				  m->shards[s].file, res[s].digest, m->shards[s].digest);
			problems = 1;
		}
	}
	if (named > MAX_NAMED)
		cli_error("verify: ... and %llu more bad records", (unsigned long long)(named - MAX_NAMED));
	if (!bad && !problems)
		for (size_t c = 0; c < nc; c++) {
			uint64_t t = 0;
			for (size_t s = 0; s < ns; s++)
				t += counts[s * nc + c];
			if (t != m->class_counts[c]) {
				cli_error("verify: class %zu ('%s') has %llu records, the manifest says %llu",
					  c, m->classes[c], (unsigned long long)t,
					  (unsigned long long)m->class_counts[c]);
				problems = 1;
			}
		}
	double secs = ims_now() - t0;
	if (bad || problems) {
		cli_error("verify: '%s' FAILED: %llu of %llu records bad", pos[0],
			  (unsigned long long)bad, (unsigned long long)m->records);
	} else if (!quiet) {
		fprintf(stderr, "imshard: verify: '%s' OK: %llu records in %zu shard%s checked%s in %.1f s\n",
			pos[0], (unsigned long long)checked, ns, ns == 1 ? "" : "s",
			decode ? " and decoded" : "", secs);
	}
	free(res);
	free(counts);
	rio_reader_close(r);
	return bad || problems ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
