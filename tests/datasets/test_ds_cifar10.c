/*
 * test_ds_cifar10.c - the CIFAR-10 adapter on fixtures written by
 * tests/fixtures/make_cifar10.py in the real binary layout: split counts
 * and order, labels read from the records, class names (trailing blank
 * lines ignored), ROOT given as the batches folder itself, read_row's
 * exact interleaved bytes, and every fault named with its file (and
 * record and offset for labels).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/datasets.h"
#include "test.h"
#include "ds_test_util.h"

#define RECORD 3073

static char tmpdir[1024];

static void make_tmpdir(void)
{
	test_tmpdir(tmpdir, sizeof(tmpdir), "test_ds_cifar10");
}

/* Runs the generator into tmpdir/sub with extra arguments; returns the
 * root path in root. */
static int gen(const char *sub, const char *args, char *root, size_t len)
{
	const char *src = getenv("IMS_SRC");
	snprintf(root, len, "%s/%s", tmpdir, sub);
	char cmd[4096];
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 '%s/tests/fixtures/make_cifar10.py' '%s' %s",
		 src ? src : ".", root, args);
	int rc = system(cmd);
	if (rc != 0)
		fprintf(stderr, "generator failed (%d): %s\n", rc, cmd);
	return rc;
}

/* The generator's formula (see make_cifar10.py). g is the global record id
 * across data_batch_1..5, test_batch. */
static int label_of(int g)
{
	return (3 * g + 1) % 10;
}

static uint8_t pixel(int g, int c, int y, int x)
{
	return (uint8_t)((37 * g + 71 * c + 13 * y + 5 * x + label_of(g)) % 256);
}

/* read_row of entry e gives record g's interleaved bytes. */
static void check_row(const char *root, const ds_entry *e, int g,
		      uint8_t **data, size_t *cap)
{
	ims_error err;
	ds_pixels px = {0, 0, 0};
	CHECK_EQ_INT(e->label, label_of(g));
	CHECK_OK(ds_adapter_cifar10.read_row(root, e, data, cap, &px, &err), &err);
	CHECK_EQ_INT(px.width, 32);
	CHECK_EQ_INT(px.height, 32);
	CHECK_EQ_INT(px.channels, 3);
	CHECK(*cap >= 3072);
	uint8_t want[3072];
	for (int y = 0; y < 32; y++)
		for (int x = 0; x < 32; x++)
			for (int c = 0; c < 3; c++)
				want[(y * 32 + x) * 3 + c] = pixel(g, c, y, x);
	if (*data)
		CHECK_MEM(*data, want, sizeof(want));
}

static const char *const names[] = {"airplane", "automobile", "bird", "cat",
				    "deer", "dog", "frog", "horse", "ship",
				    "truck"};

/* Loads root and checks both splits for n records per batch; prefix is
 * what row paths start with. */
static void check_dataset(const char *root, const char *prefix, int n)
{
	ds_dataset d;
	memset(&d, 0, sizeof(d));
	ims_error err;
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	CHECK_OK(ds_adapter_cifar10.load(root, &o, &d, &err), &err);
	CHECK_EQ_INT(d.n_splits, 2);
	CHECK_EQ_INT(d.rows_are_records, 1);
	if (d.n_splits != 2) {
		ds_dataset_release(&d);
		return;
	}
	CHECK_EQ_STR(d.splits[0].name, "train");
	CHECK_EQ_STR(d.splits[1].name, "test");
	const ds_list *train = &d.splits[0].list, *test = &d.splits[1].list;
	CHECK_EQ_U64(train->count, 5 * (uint64_t)n);
	CHECK_EQ_U64(test->count, (uint64_t)n);
	for (int s = 0; s < 2; s++) {
		const ds_list *l = &d.splits[s].list;
		CHECK_EQ_U64(l->n_classes, 10);
		for (size_t k = 0; k < l->n_classes && k < 10; k++)
			CHECK_EQ_STR(l->classes[k], names[k]);
	}
	/* Train: batches 1..5 in order, index = position, label = byte. */
	int bad = 0;
	char want[256];
	for (size_t i = 0; i < train->count; i++) {
		const ds_entry *e = &train->items[i];
		snprintf(want, sizeof(want), "%sdata_batch_%d.bin#%d", prefix,
			 (int)(i / (size_t)n) + 1, (int)(i % (size_t)n));
		if (e->index != i || e->label != label_of((int)i) ||
		    strcmp(e->path, want) != 0 || e->n_extra != 0) {
			if (!bad++)
				fprintf(stderr, "train row %zu: %llu %d '%s', want '%s' label %d\n",
					i, (unsigned long long)e->index, e->label,
					e->path, want, label_of((int)i));
		}
	}
	for (size_t i = 0; i < test->count; i++) {
		const ds_entry *e = &test->items[i];
		int g = 5 * n + (int)i;
		snprintf(want, sizeof(want), "%stest_batch.bin#%d", prefix, (int)i);
		if (e->index != i || e->label != label_of(g) ||
		    strcmp(e->path, want) != 0) {
			if (!bad++)
				fprintf(stderr, "test row %zu: %llu %d '%s', want '%s'\n",
					i, (unsigned long long)e->index, e->label,
					e->path, want);
		}
	}
	CHECK_EQ_INT(bad, 0);

	/* Exact pixels, with the buffer grown once then reused. */
	uint8_t *data = NULL;
	size_t cap = 0;
	int rows[] = {0, 1, n - 1, n, 3 * n + 7, 5 * n - 1};
	for (size_t k = 0; k < sizeof(rows) / sizeof(*rows); k++)
		check_row(root, &train->items[rows[k]], rows[k], &data, &cap);
	check_row(root, &test->items[0], 5 * n, &data, &cap);
	check_row(root, &test->items[n - 1], 6 * n - 1, &data, &cap);
	free(data);
	ds_dataset_release(&d);
	CHECK_EQ_INT(d.n_splits, 0);
}

/* load fails with code, leaves out empty, and the message holds each of
 * the NULL-terminated strings. */
static void check_load_fails(const char *root, int code, ...)
{
	ds_dataset d;
	memset(&d, 0, sizeof(d));
	ims_error err;
	ims_error_clear(&err);
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	int rc = ds_adapter_cifar10.load(root, &o, &d, &err);
	CHECK_EQ_INT(rc, code);
	CHECK_EQ_INT(d.n_splits, 0);
	CHECK(strchr(err.msg, '\n') == NULL);
	va_list ap;
	va_start(ap, code);
	for (const char *s; (s = va_arg(ap, const char *));) {
		if (!strstr(err.msg, s)) {
			fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, s);
			CHECK(strstr(err.msg, s) != NULL);
		}
	}
	va_end(ap);
	ds_dataset_release(&d);
}

static void write_byte(const char *path, long off, uint8_t v)
{
	int fd = open(path, O_WRONLY);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_EQ_INT(pwrite(fd, &v, 1, off), 1);
	close(fd);
}

int main(void)
{
	if (access("/usr/bin/python3", X_OK) != 0) {
		fprintf(stderr, "no /usr/bin/python3: skipped\n");
		return TEST_SKIP;
	}
	if (!getenv("IMS_SRC"))
		fprintf(stderr, "IMS_SRC unset: looking for the generator under .\n");
	make_tmpdir();
	char root[2048], p[4096];
	ims_error err;

	CHECK_EQ_STR(ds_adapter_cifar10.name, "cifar10");
	CHECK(ds_adapter_cifar10.summary && ds_adapter_cifar10.summary[0]);
	CHECK(ds_adapter_cifar10.read_row != NULL);

	/* The real layout, and ROOT as the batches folder itself. */
	CHECK_EQ_INT(gen("ok", "", root, sizeof(root)), 0);
	check_dataset(root, "cifar-10-batches-bin/", 20);
	snprintf(p, sizeof(p), "%s/cifar-10-batches-bin", root);
	check_dataset(p, "", 20);
	snprintf(p, sizeof(p), "%s/cifar-10-batches-bin/", root);
	check_dataset(p, "", 20);

	/* More records than one read of the lister (1024): labels and paths
	 * stay right across the boundary. */
	CHECK_EQ_INT(gen("big", "--records 1030", root, sizeof(root)), 0);
	check_dataset(root, "cifar-10-batches-bin/", 1030);

	/* read_row refuses rows that no longer match the files. */
	CHECK_EQ_INT(gen("rr", "", root, sizeof(root)), 0);
	{
		ds_dataset d;
		memset(&d, 0, sizeof(d));
		ds_convert_opts o;
		ds_convert_opts_init(&o);
		CHECK_OK(ds_adapter_cifar10.load(root, &o, &d, &err), &err);
		uint8_t *data = NULL;
		size_t cap = 0;
		ds_pixels px;
		if (d.n_splits == 2 && d.splits[0].list.count == 100) {
			ds_entry e = d.splits[0].list.items[3];
			/* a label that differs from the record's byte */
			e.label = (e.label + 1) % 10;
			CHECK_EQ_INT(ds_adapter_cifar10.read_row(root, &e, &data, &cap,
								 &px, &err),
				     IMS_ECORRUPT);
			CHECK(strstr(err.msg, "data_batch_1.bin") != NULL);
			CHECK(strstr(err.msg, "record 3") != NULL);
			CHECK(strstr(err.msg, "changed since listing") != NULL);
			/* the file's byte changed under the listed row */
			e = d.splits[0].list.items[23];
			snprintf(p, sizeof(p), "%s/cifar-10-batches-bin/data_batch_2.bin",
				 root);
			write_byte(p, 3L * RECORD, (uint8_t)((e.label + 5) % 10));
			CHECK_EQ_INT(ds_adapter_cifar10.read_row(root, &e, &data, &cap,
								 &px, &err),
				     IMS_ECORRUPT);
			CHECK(strstr(err.msg, "data_batch_2.bin") != NULL);
			CHECK(strstr(err.msg, "byte offset 9219") != NULL);
			/* a record past the end of the file */
			e = d.splits[1].list.items[0];
			e.path = "cifar-10-batches-bin/test_batch.bin#20";
			CHECK_EQ_INT(ds_adapter_cifar10.read_row(root, &e, &data, &cap,
								 &px, &err),
				     IMS_ECORRUPT);
			CHECK(strstr(err.msg, "test_batch.bin") != NULL);
			/* paths that are not FILE#RECORD */
			const char *bad[] = {"cifar-10-batches-bin/test_batch.bin",
					     "cifar-10-batches-bin/test_batch.bin#",
					     "cifar-10-batches-bin/test_batch.bin#1x",
					     "#3"};
			for (size_t k = 0; k < sizeof(bad) / sizeof(*bad); k++) {
				e.path = (char *)bad[k];
				CHECK_EQ_INT(ds_adapter_cifar10.read_row(root, &e, &data,
									 &cap, &px, &err),
					     IMS_EINVAL);
			}
			/* a batch removed since listing */
			e = d.splits[0].list.items[99];
			snprintf(p, sizeof(p), "%s/cifar-10-batches-bin/data_batch_5.bin",
				 root);
			CHECK_EQ_INT(remove(p), 0);
			CHECK_EQ_INT(ds_adapter_cifar10.read_row(root, &e, &data, &cap,
								 &px, &err),
				     IMS_ENOTFOUND);
			CHECK(strstr(err.msg, "data_batch_5.bin") != NULL);
		}
		free(data);
		ds_dataset_release(&d);
	}

	/* Faults, each named. */
	CHECK_EQ_INT(gen("trunc", "--broken truncated", root, sizeof(root)), 0);
	check_load_fails(root, IMS_ECORRUPT, "data_batch_3.bin'", "61459 bytes",
			 "not a multiple of 3073", "truncated?", (char *)NULL);
	CHECK_EQ_INT(gen("label", "--broken badlabel", root, sizeof(root)), 0);
	check_load_fails(root, IMS_EFORMAT, "data_batch_2.bin'", "record 5",
			 "byte offset 15365", "label 10", (char *)NULL);
	CHECK_EQ_INT(gen("missing", "--broken missing-batch", root, sizeof(root)), 0);
	check_load_fails(root, IMS_ENOTFOUND, "data_batch_4.bin'", (char *)NULL);
	CHECK_EQ_INT(gen("meta", "--broken meta", root, sizeof(root)), 0);
	check_load_fails(root, IMS_EFORMAT, "batches.meta.txt'", "9 class names",
			 (char *)NULL);

	/* Missing test batch, missing or empty meta, a blank line inside the
	 * meta, an empty batch. */
	CHECK_EQ_INT(gen("faults", "", root, sizeof(root)), 0);
	snprintf(p, sizeof(p), "%s/cifar-10-batches-bin/test_batch.bin", root);
	char moved[4096];
	snprintf(moved, sizeof(moved), "%s/test_batch.bin.away", tmpdir);
	CHECK_EQ_INT(rename(p, moved), 0);
	check_load_fails(root, IMS_ENOTFOUND, "test_batch.bin'", (char *)NULL);
	CHECK_EQ_INT(rename(moved, p), 0);
	FILE *f = fopen(p, "wb");
	CHECK(f != NULL);
	if (f)
		fclose(f);
	check_load_fails(root, IMS_ECORRUPT, "test_batch.bin'", "empty",
			 (char *)NULL);
	snprintf(p, sizeof(p), "%s/cifar-10-batches-bin/batches.meta.txt", root);
	f = fopen(p, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("airplane\nautomobile\nbird\n\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n", f);
		fclose(f);
	}
	check_load_fails(root, IMS_EFORMAT, "batches.meta.txt", (char *)NULL);
	CHECK_EQ_INT(remove(p), 0);
	check_load_fails(root, IMS_ENOTFOUND, "batches.meta.txt", (char *)NULL);

	/* No batches at all; the Python version instead; no such folder. */
	snprintf(root, sizeof(root), "%s/empty", tmpdir);
	CHECK_EQ_INT(mkdir(root, 0755), 0);
	check_load_fails(root, IMS_ENOTFOUND, "cifar-10-batches-bin/data_batch_1.bin",
			 "binary version", (char *)NULL);
	snprintf(p, sizeof(p), "%s/cifar-10-batches-py", root);
	CHECK_EQ_INT(mkdir(p, 0755), 0);
	check_load_fails(root, IMS_ENOTFOUND, "cifar-10-batches-py",
			 "binary version", (char *)NULL);
	snprintf(root, sizeof(root), "%s/nowhere", tmpdir);
	check_load_fails(root, IMS_ENOTFOUND, "nowhere", (char *)NULL);

	if (test_failures_ == 0)
		test_rm_tree(tmpdir);
	else
		fprintf(stderr, "scratch kept in %s\n", tmpdir);
	return TEST_EXIT();
}
