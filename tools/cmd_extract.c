/*
 * cmd_extract.c - `imshard extract`: records back to image files.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "augment/augment.h"
#include "datasets/datasets.h"
#include "imshard.h"
#include "recordio/recordio.h"

static const cli_command command = {
	"extract",
	"imshard extract MANIFEST.json -o DIR [--index I ...] [--quiet]",
	"Writes records of a packed split back to image files in DIR, named by\n"
	"global record index: DIR/00000042.jpg (or .png). Records packed with\n"
	"--encoding keep come back byte for byte identical to the source files;\n"
	"raw records are written as PNG.",
	"DIR/extract.lst lists what was written in im2rec's format (index, label,\n"
	"extra labels, file), with DIR/extract.classes, so the files can be\n"
	"packed again. A split whose class names pack would refuse (repeated,\n"
	"empty, holding a line break or TAB) is refused before anything is\n"
	"written.\n\n"
	"A refused or failed run removes the folders it created while they are\n"
	"still empty (a folder that existed is kept); files written before a\n"
	"failure stay, without extract.lst: an earlier run's extract.lst and\n"
	"extract.classes are removed before the first file is written. Image\n"
	"files of an earlier extraction that this run did not write stay, and\n"
	"are counted in a warning (extract.lst does not list them).\n\n"
	"Exit status: 0 written, 1 a record is missing or damaged, or a file\n"
	"cannot be written, 2 bad usage (also: --index out of range)."};

/* The files extract writes: NNNNNNNN.jpg / .png, extract.lst and
 * extract.classes. */
static int extract_name(const char *name, void *arg)
{
	(void)arg;
	if (strcmp(name, "extract.lst") == 0 || strcmp(name, "extract.classes") == 0)
		return 1;
	/* %08llu: 8 digits, more from record 100000000 on (up to 18: no
	 * split holds 10^18 records, and the keys below stay in range) */
	size_t n = strlen(name);
	if (n < 12 || n > 22 || (strcmp(name + n - 4, ".jpg") && strcmp(name + n - 4, ".png")))
		return 0;
	for (size_t i = 0; i < n - 4; i++)
		if (name[i] < '0' || name[i] > '9')
			return 0;
	return 1;
}

/* Each file through its own temporary (never through a link planted at
 * its name); the folder's stale temporaries were swept once at the start. */
static int write_bytes(const char *path, const void *data, size_t len, ims_error *err)
{
	return ims_write_file_atomic_flags(path, data, len, IMS_WRITE_NO_SWEEP, err);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* NNNNNNNN.jpg -> NNNNNNNN * 2, .png -> * 2 + 1; -1 for any other name. */
static int64_t image_key(const char *name)
{
	if (!extract_name(name, NULL) || name[0] == 'e')
		return -1;
	return (int64_t)strtoull(name, NULL, 10) * 2 + (name[strlen(name) - 3] == 'p');
}

/*
 * Image files in out that this run did not write (keys[0..n) sorted, one
 * per file written): an earlier extraction's, which extract.lst does not
 * list but a listing of the folder would take. Told, not removed: they
 * may be the user's. -1 when the folder cannot be listed.
 */
static int64_t count_stale(const char *out, const uint64_t *keys, uint64_t n,
			   char *first, size_t first_len, ims_error *err)
{
	ims_dir_listing d = {0};
	if (ims_dir_list(out, 0, &d, err) < 0)
		return -1;
	int64_t stale = 0;
	for (size_t i = 0; i < d.n; i++) {
		int64_t k = image_key(d.e[i].name);
		uint64_t key = (uint64_t)k;
		if (k < 0 || d.e[i].kind != IMS_KIND_FILE ||
		    bsearch(&key, keys, n, sizeof(*keys), cmp_u64))
			continue;
		if (!stale++)
			snprintf(first, first_len, "%s", d.e[i].name);
	}
	ims_dir_listing_release(&d);
	return stale;
}

/* 1 with *dup set when v[0..n) holds a value twice. -1 out of memory. */
static int find_repeat(const uint64_t *v, size_t n, uint64_t *dup)
{
	uint64_t *s = malloc((n ? n : 1) * sizeof(*s));
	if (!s)
		return -1;
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_u64);
	int found = 0;
	for (size_t i = 1; i < n && !found; i++)
		if (s[i] == s[i - 1]) {
			*dup = s[i];
			found = 1;
		}
	free(s);
	return found;
}

static const char *ext_of(const rio_record *r)
{
	return r->encoding == RIO_ENC_JPEG ? "jpg" : "png";
}

int cmd_extract(int argc, char **argv)
{
	const char *out = NULL;
	int quiet = 0;
	cli_strings idx = {NULL, 0};
	const cli_opt opts[] = {
		{"output", 'o', CLI_STRING, &out, "DIR", "folder to write into (created when missing; required)", 0, 0},
		{"index", 'i', CLI_MULTI, &idx, "I", "extract record I only; repeat for more, each\n"
		 "record once (default: all)", 0, 0},
		{"quiet", 'q', CLI_FLAG, &quiet, NULL, "no progress or summary", 0, 0},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[1];
	int np;
	int rc = cli_parse(&command, opts, argc, argv, pos, 1, 1, &np);
	if (rc) {
		free(idx.items);
		return rc < 0 ? CLI_EXIT_OK : rc;
	}
	if (!out) {
		free(idx.items);
		return cli_usage_error(&command, "-o DIR is required");
	}
	uint64_t *which = calloc(idx.count ? (size_t)idx.count : 1, sizeof(uint64_t));
	if (!which) {
		cli_error("extract: out of memory");
		free(idx.items);
		return CLI_EXIT_FAIL;
	}
	for (int i = 0; i < idx.count; i++)
		if (cli_parse_u64(idx.items[i], &which[i]) != 0) {
			rc = cli_usage_error(&command, "--index expects a record number, got '%s'",
					     idx.items[i]);
			free(which);
			free(idx.items);
			return rc;
		}
	/* a record given twice would be listed twice in extract.lst, and
	 * packed twice from it */
	uint64_t dup = 0;
	int rep = find_repeat(which, (size_t)idx.count, &dup);
	if (rep != 0) {
		if (rep < 0) {
			cli_error("extract: out of memory");
			rc = CLI_EXIT_FAIL;
		} else {
			rc = cli_usage_error(&command, "--index %llu is given more than "
					     "once: name each record once",
					     (unsigned long long)dup);
		}
		free(which);
		free(idx.items);
		return rc;
	}
	ims_error err;
	rio_reader *r = NULL;
	rio_cursor *c = NULL;
	aug_codec *codec = NULL;
	ims_buf png = {0};
	FILE *lst = NULL;
	char *lst_text = NULL;
	size_t lst_len = 0;
	int status = CLI_EXIT_FAIL;
	uint64_t written = 0;
	char *created = NULL; /* the outermost folder this run made, if any */
	int lists_cleared = 0; /* an earlier extract.lst and .classes removed */
	uint64_t *keys = NULL; /* each file written: index * 2 + (png) */
	/* A shard truncated under us is named, not a silent SIGBUS. */
	ims_mapguard_install("imshard: extract");
	if (rio_reader_open(pos[0], &r, &err) < 0 ||
	    rio_cursor_open(r, RIO_CHECK_PAYLOAD_CRC, &c, &err) < 0 ||
	    aug_codec_create(&codec, &err) < 0) {
		cli_error("extract: %s", err.msg);
		goto done;
	}
	/* extract.classes is written for pack to read back: names it would
	 * refuse are refused before anything is written */
	if (rio_manifest_check_classes(rio_reader_manifest(r), &err) < 0) {
		cli_error("extract: manifest '%s': %s; extract.classes could not be packed again (see 'imshard verify')",
			  pos[0], err.msg);
		goto done;
	}
	uint64_t n = rio_reader_count(r);
	for (int i = 0; i < idx.count; i++)
		if (which[i] >= n) {
			cli_error("extract: record %llu is out of range (the split holds %llu)",
				  (unsigned long long)which[i], (unsigned long long)n);
			status = CLI_EXIT_USAGE;
			goto done;
		}
	if (ims_mkdir_p_created(out, &created, &err) < 0 ||
	    ims_temp_sweep_matching(out, extract_name, NULL, &err) < 0) {
		cli_error("extract: %s", err.msg);
		goto done;
	}
	/* An earlier run's list goes before the first file is replaced: a
	 * run that fails partway must not leave a list naming its files
	 * with another split's labels. */
	for (int i = 0; i < 2; i++) {
		char old_file[8192];
		snprintf(old_file, sizeof(old_file), "%s/%s", out,
			 i ? "extract.classes" : "extract.lst");
		if (unlink(old_file) < 0 && errno != ENOENT) {
			cli_error("extract: cannot remove the earlier '%s': %s", old_file,
				  strerror(errno));
			goto done;
		}
	}
	lists_cleared = 1;
	lst = open_memstream(&lst_text, &lst_len);
	if (!lst) {
		cli_error("extract: out of memory");
		goto done;
	}
	uint64_t total = idx.count ? (uint64_t)idx.count : n;
	keys = malloc((size_t)(total ? total : 1) * sizeof(*keys));
	if (!keys) {
		cli_error("extract: out of memory");
		goto done;
	}
	cli_progress prog;
	cli_progress_start(&prog, "extract", total, quiet);
	for (uint64_t k = 0; k < total; k++) {
		uint64_t i = idx.count ? which[k] : k;
		rio_record rec;
		if (rio_cursor_get(c, i, &rec, &err) < 0) {
			cli_error("extract: %s", err.msg);
			goto done;
		}
		char name[64], path[8192];
		snprintf(name, sizeof(name), "%08llu.%s", (unsigned long long)i, ext_of(&rec));
		snprintf(path, sizeof(path), "%s/%s", out, name);
		if (rec.encoding == RIO_ENC_RAW) {
			aug_image img = {(uint8_t *)rec.payload, (int)rec.width, (int)rec.height,
					 rec.channels, (size_t)rec.width * rec.channels, 0};
			if (aug_encode_png(codec, &img, &png, &err) < 0 ||
			    write_bytes(path, png.data, png.len, &err) < 0) {
				cli_error("extract: record %llu: %s", (unsigned long long)i, err.msg);
				goto done;
			}
		} else if (write_bytes(path, rec.payload, rec.payload_len, &err) < 0) {
			cli_error("extract: %s", err.msg);
			goto done;
		}
		fprintf(lst, "%llu\t%d", (unsigned long long)i, (int)rec.label);
		for (unsigned x = 0; x < rec.n_extra; x++) {
			char num[64];
			/* a NaN or infinity (a hand-made shard) stays as it is:
			 * pack refuses it, naming the line */
			if (ds_format_extra_label(rec.extra[x], num, sizeof(num)) < 0)
				snprintf(num, sizeof(num), "%f", rec.extra[x]);
			fprintf(lst, "\t%s", num);
		}
		fprintf(lst, "\t%s\n", name);
		keys[written] = i * 2 + (ext_of(&rec)[0] == 'p');
		written++;
		cli_progress_update(&prog, written);
	}
	cli_progress_finish(&prog);
	/* the list grows in memory: a row that did not fit is a stream
	 * error, and glibc's fclose, when its final realloc fails, frees
	 * the text and leaves lst_text NULL (length 0) yet returns 0; a list
	 * missing rows must not be written as complete */
	int lst_bad = ferror(lst);
	lst_bad |= fclose(lst) != 0;
	lst = NULL;
	lst_bad |= !lst_text;
	if (lst_bad) {
		cli_error("extract: cannot hold extract.lst for '%s': out of memory", out);
		goto done;
	}
	char p[8192];
	snprintf(p, sizeof(p), "%s/extract.lst", out);
	if (write_bytes(p, lst_text, lst_len, &err) < 0) {
		cli_error("extract: %s", err.msg);
		goto done;
	}
	{
		const rio_manifest *m = rio_reader_manifest(r);
		size_t cl = 0;
		for (size_t i = 0; i < m->n_classes; i++)
			cl += strlen(m->classes[i]) + 1;
		char *ct = malloc(cl + 1), *q = ct;
		if (!ct) {
			cli_error("extract: out of memory");
			goto done;
		}
		for (size_t i = 0; i < m->n_classes; i++)
			q += sprintf(q, "%s\n", m->classes[i]);
		snprintf(p, sizeof(p), "%s/extract.classes", out);
		int wrc = write_bytes(p, ct, (size_t)(q - ct), &err);
		free(ct);
		if (wrc < 0) {
			cli_error("extract: %s", err.msg);
			goto done;
		}
	}
	cli_info(quiet, "extracted %llu %s to '%s'", (unsigned long long)written,
		 ims_plural(written, "record", "records"), out);
	qsort(keys, (size_t)written, sizeof(*keys), cmp_u64);
	char first[64] = "";
	int64_t stale = count_stale(out, keys, written, first, sizeof(first), &err);
	if (stale < 0) {
		cli_error("extract: %s", err.msg);
		goto done;
	}
	if (stale)
		cli_warn(0, "extract: '%s' also holds %lld image %s this run did not write "
			 "(an earlier extraction's?), not in extract.lst: '%s'%s", out,
			 (long long)stale, ims_plural((uint64_t)stale, "file", "files"), first,
			 stale > 1 ? " and others" : "");
	status = CLI_EXIT_OK;
done:
	/* A run that failed before writing a file leaves no folder behind;
	 * files it did write stay, and without extract.lst the folder does
	 * not pass for a finished extraction. */
	if (status != CLI_EXIT_OK && lists_cleared) {
		/* a failure after extract.lst was written (extract.classes,
		 * the stale count) takes the lists back with it */
		char lp[8192];
		for (int i = 0; i < 2; i++) {
			snprintf(lp, sizeof(lp), "%s/%s", out,
				 i ? "extract.classes" : "extract.lst");
			unlink(lp);
		}
	}
	if (status != CLI_EXIT_OK && created)
		ims_rmdir_created(out, created);
	free(created);
	free(keys);
	if (lst)
		fclose(lst);
	free(lst_text);
	ims_buf_release(&png);
	aug_codec_destroy(codec);
	rio_cursor_close(c);
	rio_reader_close(r);
	free(which);
	free(idx.items);
	return status;
}
