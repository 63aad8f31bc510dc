/*
 * cmd_info.c - `imshard info`: what a packed split holds.
 */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "imshard.h"
#include "recordio/recordio.h"

static const cli_command command = {
	"info",
	"imshard info MANIFEST.json [--json]",
	"Describes a packed split from its manifest: records, encoding, classes\n"
	"with their counts, and shards with their sizes.",
	"With --json the manifest is printed as JSON with at least the keys\n"
	"records, classes, class_counts, shards (path, first, records, bytes,\n"
	"digest), encoding and format_version; scripts should use that form.\n"
	"Shard files are checked for presence and size; 'imshard verify' checks\n"
	"every record.\n\n"
	"Exit status: 0 described, 1 the manifest is missing or damaged, or a\n"
	"shard is missing or has the wrong size, 2 bad usage."};

int cmd_info(int argc, char **argv)
{
	int json = 0;
	const cli_opt opts[] = {
		{"json", 0, CLI_FLAG, &json, NULL, "print the manifest as JSON", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[1];
	int np;
	int rc = cli_parse(&command, opts, argc, argv, pos, 1, 1, &np);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	rio_manifest m;
	ims_error err;
	if (rio_manifest_load(pos[0], &m, &err) < 0) {
		cli_error("info: %s", err.msg);
		return CLI_EXIT_FAIL;
	}
	char dirbuf[4096];
	snprintf(dirbuf, sizeof(dirbuf), "%s", pos[0]);
	const char *dir = dirname(dirbuf);
	int problems = 0;
	uint64_t total = 0;
	for (size_t i = 0; i < m.n_shards; i++) {
		char p[8192];
		snprintf(p, sizeof(p), "%s/%s", dir, m.shards[i].file);
		struct stat st;
		total += m.shards[i].bytes;
		if (stat(p, &st) != 0) {
			cli_error("info: shard '%s' is missing", p);
			problems++;
		} else if (!S_ISREG(st.st_mode)) {
			cli_error("info: shard '%s' is not a regular file (%s)", p,
				  ims_file_kind(st.st_mode));
			problems++;
		} else if ((uint64_t)st.st_size != m.shards[i].bytes) {
			cli_error("info: shard '%s' is %lld bytes, the manifest says %llu",
				  p, (long long)st.st_size,
				  (unsigned long long)m.shards[i].bytes);
			problems++;
		}
	}
	/* Every string here comes from the manifest, which anyone may have
	 * edited: each is printed through ims_escape (ims_escape_json for
	 * --json), like every other message of the program. */
	if (json) {
		char *text = rio_manifest_to_json(&m);
		char *safe = text ? ims_escape_json(text) : NULL;
		free(text);
		if (!safe) {
			cli_error("info: out of memory");
			rio_manifest_release(&m);
			return CLI_EXIT_FAIL;
		}
		printf("%s\n", safe);
		free(safe);
	} else {
		char b[32], e1[1024], e2[4096];
		printf("split:      %s (%s)\n", ims_escape(m.name, e1, sizeof(e1)),
		       ims_escape(pos[0], e2, sizeof(e2)));
		printf("records:    %llu\n", (unsigned long long)m.records);
		printf("encoding:   %s\n", ims_escape(m.encoding, e1, sizeof(e1)));
		printf("format:     version %d%s\n", m.format_version,
		       m.format_version < 2 ? " (shard digests prove nothing: "
					      "'imshard verify --rehash' upgrades it)" : "");
		printf("size:       %s in %zu shard%s\n", cli_format_bytes((double)total, b, sizeof(b)),
		       m.n_shards, ims_plural(m.n_shards, "", "s"));
		if (m.n_extra_labels)
			printf("labels:     1 class label + %u float labels per record\n",
			       m.n_extra_labels);
		if (m.skipped)
			printf("skipped:    %llu source files (see %s)\n",
			       (unsigned long long)m.skipped,
			       m.errors_file ? ims_escape(m.errors_file, e2, sizeof(e2)) :
					       "the errors file");
		if (m.created_at)
			printf("created:    %s by %s\n", ims_escape(m.created_at, e1, sizeof(e1)),
			       m.created_by ? ims_escape(m.created_by, e2, sizeof(e2)) : "?");
		uint64_t lo = UINT64_MAX, hi = 0;
		for (size_t i = 0; i < m.n_classes; i++) {
			lo = m.class_counts[i] < lo ? m.class_counts[i] : lo;
			hi = m.class_counts[i] > hi ? m.class_counts[i] : hi;
		}
		printf("classes:    %zu", m.n_classes);
		if (m.n_classes)
			printf(" (%llu to %llu records each)", (unsigned long long)lo,
			       (unsigned long long)hi);
		printf("\n");
		size_t show = m.n_classes <= 30 ? m.n_classes : 20;
		for (size_t i = 0; i < show; i++)
			printf("  %5zu  %-40s %llu\n", i, ims_escape(m.classes[i], e2, sizeof(e2)),
			       (unsigned long long)m.class_counts[i]);
		if (show < m.n_classes)
			printf("  ... %zu more (see --json)\n", m.n_classes - show);
		printf("shards:\n");
		size_t sshow = m.n_shards <= 30 ? m.n_shards : 20;
		for (size_t i = 0; i < sshow; i++)
			printf("  %s  records %llu..%llu  %s\n", ims_escape(m.shards[i].file, e2, sizeof(e2)),
			       (unsigned long long)m.shards[i].first,
			       (unsigned long long)(m.shards[i].first + m.shards[i].records -
						    (m.shards[i].records ? 1 : 0)),
			       cli_format_bytes((double)m.shards[i].bytes, b, sizeof(b)));
		if (sshow < m.n_shards)
			printf("  ... %zu more (see --json)\n", m.n_shards - sshow);
	}
	rio_manifest_release(&m);
	return problems ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
