/* test_pack.c - the packing pipeline: list order whatever the thread count,
 * exact shard counts, map growth, skipped rows reported in order,
 * --max-errors, cancellation. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "augment/augment.h"
#include "datasets/datasets.h"
#include "pack/pack.h"
#include "recordio/recordio.h"
#include "test.h"

static char root[4200];

static int read_all(const char *path, uint8_t **d, size_t *n)
{
	return ims_read_file(path, d, n, 0, NULL);
}

static int same_file(const char *a, const char *b)
{
	uint8_t *x, *y;
	size_t nx, ny;
	if (read_all(a, &x, &nx) || read_all(b, &y, &ny))
		return 0;
	int same = nx == ny && memcmp(x, y, nx) == 0;
	free(x);
	free(y);
	return same;
}

/* Entries of a folder (0 when it does not exist). */
static int count_entries(const char *dir)
{
	ims_dir_listing ls = {0};
	int n = ims_dir_list(dir, IMS_DIR_HIDDEN, &ls, NULL) == 0 ? (int)ls.n : 0;
	ims_dir_listing_release(&ls);
	return n;
}

typedef struct seen {
	uint64_t rows[64];
	int n;
	uint64_t last_done;
} seen;

static void on_skip(void *ctx, uint64_t row, const char *path, const char *why)
{
	seen *s = ctx;
	(void)path;
	CHECK(why && why[0]);
	if (s->n < 64)
		s->rows[s->n++] = row;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	seen *s = ctx;
	CHECK(done >= s->last_done && done <= total);
	s->last_done = done;
}

static int pack(const ds_list *l, const char *out, const char *name, int threads,
		int shards, pack_encoding enc, int resize, seen *s, pack_report *rep,
		ims_error *e)
{
	pack_opts o;
	pack_opts_init(&o);
	o.root = root;
	o.out_dir = out;
	o.name = name;
	o.threads = threads;
	o.shards = shards;
	o.encoding = enc;
	o.resize = resize;
	o.initial_map_size = 64 << 10; /* forces map growth many times */
	o.skipped = on_skip;
	o.progress = on_progress;
	o.ctx = s;
	return pack_run(l, &o, rep, e);
}

int main(void)
{
	ims_error e;
	char tmp[4096];
	test_tmpdir(tmp, sizeof(tmp), "pack");
	snprintf(root, sizeof(root), "%s/images", tmp);
	ds_sample_opts so;
	ds_sample_opts_init(&so);
	so.classes = 3;
	so.per_class = 30;
	so.seed = 5;
	CHECK_OK(ds_sample_write(root, &so, NULL, &e), &e);
	ds_list l;
	ds_list_init(&l);
	CHECK_OK(ds_scan_folder(root, NULL, &l, NULL, &e), &e);
	CHECK_EQ_INT(l.count, 90);

	/* Insert rows that must be skipped at known positions. */
	ds_list mixed;
	ds_list_init(&mixed);
	for (size_t i = 0; i < l.count; i++) {
		if (i == 10 || i == 47)
			CHECK_OK(ds_list_append(&mixed, 1000 + i, 0, NULL, 0, "missing.jpg", &e), &e);
		CHECK_OK(ds_list_append(&mixed, l.items[i].index, l.items[i].label, NULL, 0,
					l.items[i].path, &e), &e);
	}
	for (size_t c = 0; c < l.n_classes; c++)
		CHECK_OK(ds_list_add_class(&mixed, l.classes[c], NULL, &e), &e);

	char out1[4200], out3[4200], a[4400], b[4400];
	snprintf(out1, sizeof(out1), "%s/t1", tmp);
	snprintf(out3, sizeof(out3), "%s/t3", tmp);
	for (int enc = PACK_KEEP; enc <= PACK_JPEG; enc++) {
		seen s1 = {0}, s3 = {0};
		pack_report r1, r3;
		const char *name = enc == PACK_KEEP ? "keep" : "jpeg";
		int resize = enc == PACK_KEEP ? 0 : 48;
		CHECK_OK(pack(&mixed, out1, name, 1, 4, enc, resize, &s1, &r1, &e), &e);
		CHECK_OK(pack(&mixed, out3, name, 3, 4, enc, resize, &s3, &r3, &e), &e);
		CHECK_EQ_U64(r1.packed, 90);
		CHECK_EQ_U64(r1.skipped, 2);
		CHECK_EQ_U64(r1.listed, 92);
		CHECK_EQ_INT(r1.shards, 4);
		CHECK_EQ_INT(r3.shards, 4);
		CHECK_EQ_INT(s1.n, 2);
		CHECK_EQ_U64(s1.rows[0], 10);
		CHECK_EQ_U64(s1.rows[1], 48);
		CHECK_EQ_INT(s3.n, 2);
		CHECK_EQ_U64(s3.rows[1], 48);
		CHECK_EQ_U64(s1.last_done, 92);
		CHECK(r1.errors[0] != '\0');
		for (int i = 0; i < 4; i++) {
			snprintf(a, sizeof(a), "%s/%s-%05d-of-00004.mdb", out1, name, i);
			snprintf(b, sizeof(b), "%s/%s-%05d-of-00004.mdb", out3, name, i);
			CHECK(same_file(a, b));
		}
		/* Records are the list's rows in order, labels included. */
		rio_reader *r;
		CHECK_OK(rio_reader_open(r1.manifest, &r, &e), &e);
		rio_cursor *c;
		CHECK_OK(rio_cursor_open(r, RIO_CHECK_PAYLOAD_CRC, &c, &e), &e);
		for (uint64_t i = 0; i < 90; i++) {
			rio_record rec;
			CHECK_OK(rio_cursor_get(c, i, &rec, &e), &e);
			CHECK_EQ_INT(rec.label, l.items[i].label);
			if (enc == PACK_KEEP) {
				char p[8192];
				uint8_t *src;
				size_t n;
				snprintf(p, sizeof(p), "%s/%s", root, l.items[i].path);
				CHECK_OK(ims_read_file(p, &src, &n, 0, &e), &e);
				CHECK_EQ_U64(n, rec.payload_len);
				CHECK(n == rec.payload_len && memcmp(src, rec.payload, n) == 0);
				CHECK(rec.flags & RIO_FLAG_ORIGINAL);
				free(src);
			} else {
				CHECK_EQ_INT(rec.encoding, RIO_ENC_JPEG);
				CHECK_EQ_INT(rec.width < rec.height ? rec.width : rec.height, 48);
				CHECK_EQ_INT(rec.orientation, 1);
			}
		}
		rio_cursor_close(c);
		const rio_manifest *m = rio_reader_manifest(r);
		CHECK_EQ_INT(m->n_classes, 3);
		CHECK_EQ_STR(m->classes[2], l.classes[2]);
		CHECK_EQ_U64(m->skipped, 2);
		rio_reader_close(r);
	}

	/* --max-errors 1 with two bad rows: fails, publishes nothing. */
	{
		seen s = {0};
		pack_report rep;
		pack_opts o;
		pack_opts_init(&o);
		o.root = root;
		o.out_dir = tmp;
		o.name = "maxerr";
		o.max_errors = 1;
		o.skipped = on_skip;
		o.ctx = &s;
		CHECK_EQ_INT(pack_run(&mixed, &o, &rep, &e), IMS_ELIMIT);
		snprintf(a, sizeof(a), "%s/maxerr.json", tmp);
		CHECK(access(a, F_OK) != 0);
		snprintf(a, sizeof(a), "%s/maxerr.errors.tsv", tmp);
		CHECK(access(a, F_OK) == 0);
	}
	/* Cancelled before it starts: IMS_EINTR, nothing published. */
	{
		volatile int cancel = 1;
		pack_report rep;
		pack_opts o;
		pack_opts_init(&o);
		o.root = root;
		o.out_dir = tmp;
		o.name = "cancel";
		o.cancel = &cancel;
		CHECK_EQ_INT(pack_run(&l, &o, &rep, &e), IMS_EINTR);
		snprintf(a, sizeof(a), "%s/cancel.json", tmp);
		CHECK(access(a, F_OK) != 0);
		snprintf(a, sizeof(a), "%s/cancel-00000.mdb.partial", tmp);
		CHECK(access(a, F_OK) != 0);
	}
	/* Bad options. */
	{
		pack_report rep;
		pack_opts o;
		pack_opts_init(&o);
		o.root = root;
		o.out_dir = tmp;
		o.name = "bad";
		o.resize = 32; /* with keep */
		CHECK_EQ_INT(pack_run(&l, &o, &rep, &e), IMS_EINVAL);
		o.resize = 0;
		/* A JPEG quality would be ignored by any other encoding. */
		for (int enc = PACK_KEEP; enc <= PACK_RAW; enc++) {
			o.encoding = (pack_encoding)enc;
			o.quality = 50;
			if (enc != PACK_JPEG)
				CHECK_EQ_INT(pack_run(&l, &o, &rep, &e), IMS_EINVAL);
		}
		o.encoding = PACK_KEEP;
		o.quality = 0;
		o.root = "/no/such/root";
		CHECK_EQ_INT(pack_run(&l, &o, &rep, &e), IMS_ENOTFOUND);
		CHECK(strstr(e.msg, "/no/such/root") != NULL);
		o.root = root;
		/* Class names a classes file could not hold, or repeated:
		 * the library (Python's pack, convert) refuses what the CLI's
		 * classes file reader refuses, and verify would report. */
		static const struct {
			const char *a, *b, *msg;
		} names[] = {
			{"cat", "cat", "class 1's name 'cat' repeats class 0's"},
			{"cat", "", "class 1's name '' is empty"},
			{"c\tat", "dog", "class 0's name 'c\\x09at' holds a TAB"},
			{"cat", "d\nog", "class 1's name 'd\\x0aog' holds a line break"},
		};
		snprintf(a, sizeof(a), "%s/names", tmp);
		o.out_dir = a;
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			ds_list n;
			ds_list_init(&n);
			CHECK_OK(ds_list_append(&n, 0, 0, NULL, 0, l.items[0].path, &e), &e);
			CHECK_OK(ds_list_add_class(&n, names[k].a, NULL, &e), &e);
			CHECK_OK(ds_list_add_class(&n, names[k].b, NULL, &e), &e);
			CHECK_EQ_INT(pack_run(&n, &o, &rep, &e), IMS_EINVAL);
			if (!strstr(e.msg, names[k].msg))
				fprintf(stderr, "'%s' lacks '%s'\n", e.msg, names[k].msg);
			CHECK(strstr(e.msg, names[k].msg) != NULL);
			CHECK(access(a, F_OK) != 0);
			ds_list_release(&n);
		}
	}
	/* A stray huge label: refused, naming the row, before anything is
	 * sized by it or written (it once grew a pack to 24 GB). */
	{
		ds_list h;
		ds_list_init(&h);
		CHECK_OK(ds_list_append(&h, 0, 0, NULL, 0, l.items[0].path, &e), &e);
		CHECK_OK(ds_list_append(&h, 1, 99999999, NULL, 0, l.items[1].path, &e), &e);
		pack_report rep;
		pack_opts o;
		pack_opts_init(&o);
		o.root = root;
		snprintf(a, sizeof(a), "%s/huge", tmp);
		o.out_dir = a;
		o.name = "y";
		CHECK_EQ_INT(pack_run(&h, &o, &rep, &e), IMS_EINVAL);
		snprintf(b, sizeof(b), "cannot pack row 1 ('%s'): label 99999999 is far beyond the 2 distinct labels",
			 l.items[1].path);
		CHECK(strstr(e.msg, b) != NULL);
		CHECK_EQ_INT(count_entries(a), 0);
		/* Declared: a sparse label space is packed, its classes named by
		 * number up to the largest label. */
		h.items[1].label = 5000;
		CHECK_EQ_INT(pack_run(&h, &o, &rep, &e), IMS_EINVAL);
		CHECK(strstr(e.msg, "label 5000 is far beyond") != NULL);
		o.max_label = 5000;
		CHECK_OK(pack_run(&h, &o, &rep, &e), &e);
		rio_manifest m;
		CHECK_OK(rio_manifest_load(rep.manifest, &m, &e), &e);
		CHECK_EQ_U64(m.n_classes, 5001);
		CHECK_EQ_STR(m.classes[5000], "5000");
		CHECK_EQ_U64(m.class_counts[5000], 1);
		rio_manifest_release(&m);
		o.max_label = 4999;
		o.force = 1;
		CHECK_EQ_INT(pack_run(&h, &o, &rep, &e), IMS_EINVAL);
		CHECK(strstr(e.msg, "label 5000 is above --max-label 4999") != NULL);
		/* With class names, every label needs one. */
		CHECK_OK(ds_list_add_class(&h, "a", NULL, &e), &e);
		CHECK_OK(ds_list_add_class(&h, "b", NULL, &e), &e);
		o.max_label = DS_LABEL_AUTO;
		CHECK_EQ_INT(pack_run(&h, &o, &rep, &e), IMS_EINVAL);
		CHECK(strstr(e.msg, "label 5000 has no class name: the class names give 2") != NULL);
		ds_list_release(&h);
	}
	/* A failure after the shards got their final names (the manifest
	 * cannot be written: a folder sits where its temporary file goes)
	 * leaves no shard, lock or working file behind. */
	{
		pack_report rep;
		pack_opts o;
		pack_opts_init(&o);
		o.root = root;
		snprintf(a, sizeof(a), "%s/late", tmp);
		o.out_dir = a;
		o.name = "y";
		o.shards = 2;
		CHECK_OK(ims_mkdir_p(a, &e), &e);
		char t[4500];
		snprintf(t, sizeof(t), "%s/y.json.tmp.%d", a, (int)getpid());
		CHECK(mkdir(t, 0755) == 0);
		CHECK(pack_run(&l, &o, &rep, &e) < 0);
		CHECK(rmdir(t) == 0);
		CHECK_EQ_INT(count_entries(a), 0);
	}
	ds_list_release(&mixed);
	ds_list_release(&l);
	return test_tmp_done(tmp, TEST_EXIT());
}
