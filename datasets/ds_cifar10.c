/*
 * ds_cifar10.c - the CIFAR-10 binary version: six batch files of fixed-size
 * records, stored raw.
 *
 *     ROOT/cifar-10-batches-bin/data_batch_1.bin ... data_batch_5.bin
 *     ROOT/cifar-10-batches-bin/test_batch.bin
 *     ROOT/cifar-10-batches-bin/batches.meta.txt
 *
 * (ROOT may also be the cifar-10-batches-bin folder itself.) A record is
 * one label byte (0-9) then the 32x32 R, G and B planes, each row-major,
 * top row first: 3073 bytes, no header, no delimiter. Rows are records,
 * not files: their paths are "FILE#RECORD" (FILE relative to ROOT, RECORD
 * 0-based within FILE) and read_row turns one into interleaved RGB.
 *
 * The label lives inside the record, so load reads every batch once, in
 * large sequential reads (180 MB for the full set), checking sizes and
 * labels as it goes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets.h"

#define CIFAR_SIDE 32
#define CIFAR_PLANE (CIFAR_SIDE * CIFAR_SIDE)    /* 1024 */
#define CIFAR_PIXELS (3 * CIFAR_PLANE)           /* 3072 */
#define CIFAR_RECORD (1 + CIFAR_PIXELS)          /* 3073 */
#define CIFAR_CLASSES 10
#define CIFAR_DIR "cifar-10-batches-bin"
#define CIFAR_META "batches.meta.txt"
#define CIFAR_READ_RECORDS 1024 /* records per read() while listing: 3 MB */

static const char *const train_batches[] = {
	"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
	"data_batch_4.bin", "data_batch_5.bin"};
static const char *const test_batches[] = {"test_batch.bin"};

static int is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/*
 * Finds the batches: "cifar-10-batches-bin/" under root, or root itself
 * when it holds the batches directly. *prefix gets what goes before a batch
 * name in row paths ("cifar-10-batches-bin/" or "").
 */
static int find_batches(const char *root, const char **prefix, ims_error *err)
{
	char p[PATH_MAX];
	FORWARD_IF_ERR(ims_path_join(p, sizeof(p), root, CIFAR_DIR, err));
	if (is_dir(p)) {
		*prefix = CIFAR_DIR "/";
		return 0;
	}
	FORWARD_IF_ERR(ims_path_join(p, sizeof(p), root, train_batches[0], err));
	int here = is_file(p);
	FORWARD_IF_ERR(ims_path_join(p, sizeof(p), root, CIFAR_META, err));
	if (here || is_file(p)) {
		*prefix = "";
		return 0;
	}
	RETURN_IF(!is_dir(root), err, IMS_ENOTFOUND,
		  "cannot read CIFAR-10 root '%s': no such folder", root);
	static const char *const other[] = {"cifar-10-batches-py",
					    "cifar-10-batches-mat"};
	for (int i = 0; i < 2; i++) {
		FORWARD_IF_ERR(ims_path_join(p, sizeof(p), root, other[i], err));
		RETURN_IF(is_dir(p), err, IMS_ENOTFOUND,
			  "cannot find CIFAR-10 batches in '%s': it holds '%s', "
			  "the %s version; download the binary version, "
			  "cifar-10-binary.tar.gz",
			  root, other[i], i == 0 ? "Python" : "Matlab");
	}
	return ims_fail(err, IMS_ENOTFOUND,
			"cannot find CIFAR-10 batches in '%s': looked for '%s/%s/%s' "
			"and, for batches in ROOT itself, '%s/%s' and '%s/%s' (the "
			"binary version, cifar-10-binary.tar.gz)",
			root, root, CIFAR_DIR, train_batches[0], root,
			train_batches[0], root, CIFAR_META);
}

/* One batch file of a split: its paths and record count. */
typedef struct batch {
	char path[PATH_MAX]; /* as opened: root joined */
	char rel[PATH_MAX];  /* relative to root, as row paths give it */
	uint64_t records;
} batch;

/* Opens and sizes a batch: missing, not a regular file, empty or not a
 * whole number of records is an error naming it. */
static int size_batch(const char *root, const char *prefix, const char *name,
		      batch *b, ims_error *err)
{
	int n = snprintf(b->rel, sizeof(b->rel), "%s%s", prefix, name);
	RETURN_IF(n < 0 || (size_t)n >= sizeof(b->rel), err, IMS_EINVAL,
		  "cannot name batch '%s': path too long", name);
	FORWARD_IF_ERR(ims_path_join(b->path, sizeof(b->path), root, b->rel, err));
	struct stat st;
	if (stat(b->path, &st) != 0)
		return ims_fail(err, errno == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
				"cannot read CIFAR-10 batch '%s': %s", b->path,
				strerror(errno));
	RETURN_IF(!S_ISREG(st.st_mode), err, IMS_EFORMAT,
		  "cannot read CIFAR-10 batch '%s': not a regular file", b->path);
	RETURN_IF(st.st_size == 0, err, IMS_ECORRUPT,
		  "'%s' is empty (0 records): truncated?", b->path);
	RETURN_IF(st.st_size % CIFAR_RECORD != 0, err, IMS_ECORRUPT,
		  "'%s' is %lld bytes, not a multiple of %d (label + %d pixels): "
		  "truncated?",
		  b->path, (long long)st.st_size, CIFAR_RECORD, CIFAR_PIXELS);
	b->records = (uint64_t)st.st_size / CIFAR_RECORD;
	return 0;
}

/* Reads up to len bytes, retrying short reads; returns the count read (less
 * than len only at end of file) or -1 with errno set. */
static ssize_t read_full(int fd, uint8_t *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/*
 * Appends every record of b to l (index continuing from l->count, label
 * from the record's byte), reading through buf (CIFAR_READ_RECORDS whole
 * records).
 */
static int list_batch(const batch *b, uint8_t *buf, ds_list *l, ims_error *err)
{
	int rc = 0;
	int fd;
	FORWARD_IF_ERR(ims_open_read(b->path, &fd, NULL, err));
	char row[PATH_MAX + 32];
	uint64_t rec = 0;
	while (rec < b->records) {
		uint64_t want = b->records - rec;
		if (want > CIFAR_READ_RECORDS)
			want = CIFAR_READ_RECORDS;
		ssize_t got = read_full(fd, buf, (size_t)want * CIFAR_RECORD);
		if (got < 0)
			GOTO_FAIL(out, rc, err, IMS_EIO, "cannot read '%s': %s",
				  b->path, strerror(errno));
		if ((size_t)got != (size_t)want * CIFAR_RECORD)
			GOTO_FAIL(out, rc, err, IMS_ECORRUPT,
				  "cannot read '%s': it ended at byte %llu, before "
				  "record %llu (file changed while reading?)",
				  b->path,
				  (unsigned long long)(rec * CIFAR_RECORD + (uint64_t)got),
				  (unsigned long long)(rec + want - 1));
		for (uint64_t k = 0; k < want; k++, rec++) {
			unsigned label = buf[k * CIFAR_RECORD];
			if (label >= CIFAR_CLASSES)
				GOTO_FAIL(out, rc, err, IMS_EFORMAT,
					  "'%s' record %llu (byte offset %llu) has "
					  "label %u, not 0-9: not a CIFAR-10 binary "
					  "batch?",
					  b->path, (unsigned long long)rec,
					  (unsigned long long)(rec * CIFAR_RECORD),
					  label);
			snprintf(row, sizeof(row), "%s#%llu", b->rel,
				 (unsigned long long)rec);
			GOTO_IF_ERR(out, rc,
				    ds_list_append(l, l->count, (int32_t)label,
						   NULL, 0, row, err));
		}
	}
out:
	close(fd);
	return rc;
}

/* Lists one split from its batches, in order. Every batch is sized before
 * any is read, so a missing or truncated one fails fast. */
static int load_split(const char *root, const char *prefix,
		      const char *const *names, int n_names,
		      const ds_list *classes, ds_split_list *s, uint8_t *buf,
		      ims_error *err)
{
	batch *b = calloc((size_t)n_names, sizeof(*b));
	RETURN_IF(!b, err, IMS_ENOMEM, "cannot list CIFAR-10: out of memory");
	int rc = 0;
	uint64_t total = 0;
	for (int i = 0; i < n_names; i++) {
		GOTO_IF_ERR(out, rc, size_batch(root, prefix, names[i], &b[i], err));
		total += b[i].records;
	}
	GOTO_IF_ERR(out, rc, ds_list_reserve(&s->list, (size_t)total, err));
	for (int i = 0; i < n_names; i++)
		GOTO_IF_ERR(out, rc, list_batch(&b[i], buf, &s->list, err));
	GOTO_IF_ERR(out, rc, ds_list_copy_classes(&s->list, classes, err));
out:
	free(b);
	return rc;
}

static int cifar10_load(const char *root, const ds_convert_opts *o,
			ds_dataset *out, ims_error *err)
{
	(void)o; /* no options apply: the splits are fixed */
	const char *prefix = "";
	FORWARD_IF_ERR(find_batches(root, &prefix, err));

	int rc = 0;
	uint8_t *buf = NULL;
	ds_list classes;
	ds_list_init(&classes);

	char rel[PATH_MAX], meta[PATH_MAX];
	snprintf(rel, sizeof(rel), "%s%s", prefix, CIFAR_META);
	GOTO_IF_ERR(out, rc, ims_path_join(meta, sizeof(meta), root, rel, err));
	/* Skips trailing blank lines; refuses inner blank lines and duplicates. */
	GOTO_IF_ERR(out, rc, ds_classes_read(meta, &classes, err));
	if (classes.n_classes != CIFAR_CLASSES)
		GOTO_FAIL(out, rc, err, IMS_EFORMAT,
			  "'%s' holds %zu class names, expected %d (one per line, "
			  "airplane ... truck)",
			  meta, classes.n_classes, CIFAR_CLASSES);

	buf = malloc((size_t)CIFAR_READ_RECORDS * CIFAR_RECORD);
	if (!buf)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot list CIFAR-10: out of memory");

	ds_split_list *train = ds_dataset_add_split(out, "train");
	ds_split_list *test = ds_dataset_add_split(out, "test");
	if (!train || !test)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot list CIFAR-10: out of memory");
	GOTO_IF_ERR(out, rc,
		    load_split(root, prefix, train_batches,
			       (int)(sizeof(train_batches) / sizeof(*train_batches)),
			       &classes, train, buf, err));
	GOTO_IF_ERR(out, rc,
		    load_split(root, prefix, test_batches,
			       (int)(sizeof(test_batches) / sizeof(*test_batches)),
			       &classes, test, buf, err));
	out->rows_are_records = 1;
out:
	free(buf);
	ds_list_release(&classes);
	if (rc < 0)
		ds_dataset_release(out); /* no half-listed splits */
	return rc;
}

/* Splits "FILE#RECORD" into FILE (into file) and RECORD. */
static int parse_row_path(const char *path, char *file, size_t filelen,
			  uint64_t *record, ims_error *err)
{
	const char *hash = strrchr(path, '#');
	RETURN_IF(!hash || hash == path || !hash[1], err, IMS_EINVAL,
		  "cannot read CIFAR-10 row '%s': expected FILE#RECORD", path);
	uint64_t r = 0;
	for (const char *p = hash + 1; *p; p++) {
		RETURN_IF(*p < '0' || *p > '9' || r > (UINT64_MAX - 9) / 10, err,
			  IMS_EINVAL,
			  "cannot read CIFAR-10 row '%s': bad record number", path);
		r = r * 10 + (uint64_t)(*p - '0');
	}
	size_t n = (size_t)(hash - path);
	RETURN_IF(n >= filelen, err, IMS_EINVAL,
		  "cannot read CIFAR-10 row '%s': path too long", path);
	memcpy(file, path, n);
	file[n] = '\0';
	*record = r;
	return 0;
}

static int cifar10_read_row(const char *root, const ds_entry *e,
			    uint8_t **data, size_t *cap, ds_pixels *px,
			    ims_error *err)
{
	char rel[PATH_MAX], path[PATH_MAX];
	uint64_t rec = 0;
	FORWARD_IF_ERR(parse_row_path(e->path, rel, sizeof(rel), &rec, err));
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), root, rel, err));
	RETURN_IF(rec > (uint64_t)INT64_MAX / CIFAR_RECORD, err, IMS_EINVAL,
		  "cannot read CIFAR-10 row '%s': bad record number", e->path);

	uint8_t r[CIFAR_RECORD];
	int fd;
	FORWARD_IF_ERR(ims_open_read(path, &fd, NULL, err));
	off_t at = (off_t)(rec * CIFAR_RECORD);
	size_t got = 0;
	int saved = 0;
	while (got < sizeof(r)) {
		ssize_t n = pread(fd, r + got, sizeof(r) - got, at + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			saved = n < 0 ? errno : 0;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	RETURN_IF(saved, err, IMS_EIO, "cannot read '%s' record %llu: %s", path,
		  (unsigned long long)rec, strerror(saved));
	RETURN_IF(got < sizeof(r), err, IMS_ECORRUPT,
		  "cannot read '%s' record %llu (byte offset %llu): past the end "
		  "of the file (file changed since listing?)",
		  path, (unsigned long long)rec, (unsigned long long)at);
	RETURN_IF(r[0] != e->label, err, IMS_ECORRUPT,
		  "'%s' record %llu (byte offset %llu) has label %u but was "
		  "listed with %d: file changed since listing",
		  path, (unsigned long long)rec, (unsigned long long)at, r[0],
		  (int)e->label);

	if (*cap < CIFAR_PIXELS || !*data) {
		uint8_t *d = realloc(*data, CIFAR_PIXELS);
		RETURN_IF(!d, err, IMS_ENOMEM,
			  "cannot read '%s' record %llu: out of memory", path,
			  (unsigned long long)rec);
		*data = d;
		*cap = CIFAR_PIXELS;
	}
	/* Planar R, G, B -> interleaved RGB, rows top-first (both layouts). */
	const uint8_t *R = r + 1, *G = R + CIFAR_PLANE, *B = G + CIFAR_PLANE;
	uint8_t *d = *data;
	for (int i = 0; i < CIFAR_PLANE; i++) {
		d[3 * i] = R[i];
		d[3 * i + 1] = G[i];
		d[3 * i + 2] = B[i];
	}
	px->width = CIFAR_SIDE;
	px->height = CIFAR_SIDE;
	px->channels = 3;
	return 0;
}

const ds_adapter ds_adapter_cifar10 = {
	"cifar10",
	"CIFAR-10 binary version (cifar-10-batches-bin/*.bin): train, test; "
	"32x32 RGB stored raw",
	cifar10_load, cifar10_read_row};
