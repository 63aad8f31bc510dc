/*
 * test_loader.c - the loader (aug_loader_*) against its contract in
 * augment.h: batches identical whatever the thread count, deterministic
 * from (seed, epoch), equal and disjoint rank shares, shard-owning mode,
 * bad records replaced and named, decode parity with the packer, DCT
 * scaling within tolerance, a golden hash, dtypes/layouts, the caller's
 * batch memory (and no CUDA runtime of the loader's own), and errors.
 *
 * Splits are built here: the sample dataset (ds_sample_write) packed with
 * pack_run, plus hand-made lists pointing at make_images fixtures.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment/augment.h"
#include "datasets/datasets.h"
#include "pack/pack.h"
#include "recordio/recordio.h"
#include "test.h"

static char g_tmp[4096];  /* scratch folder: g_tmp/fx, g_tmp/sample, splits */
static char g_main[4200]; /* 97 sample records, keep, 4 shards */
static char g_raw[4200];  /* same list, raw, resized to 48 */
static char g_png[4200];  /* same list, png, resized to 48 */
static char g_odd[4200];  /* cmyk, cmyk_adobe, ycck, gray, exif_6, rgb */
static char g_bad[4200];  /* 20 sample records + truncated_eoi.jpg */
static char g_bad2[4200]; /* 19 sample records + truncated_eoi.jpg twice */
static char g_big[4200];  /* big.jpg x 4 */

#define MAIN_N 97 /* not divisible by 2, 3 or 4 */
#define BAD_AT 7  /* record index of truncated_eoi.jpg in g_bad */

static const char *odd_files[] = {"cmyk.jpg", "cmyk_adobe.jpg", "ycck.jpg",
				  "gray.jpg", "exif_6.jpg", "rgb.jpg"};
#define ODD_N 6

/* ---- helpers ----------------------------------------------------------- */

static int pack_list(const ds_list *l, const char *name, pack_encoding enc,
		     int shards, int resize, char *manifest)
{
	ims_error err = {0};
	pack_opts po;
	pack_opts_init(&po);
	po.root = g_tmp;
	po.out_dir = g_tmp;
	po.name = name;
	po.encoding = enc;
	po.shards = shards;
	po.resize = resize;
	po.threads = 2;
	pack_report rep;
	memset(&rep, 0, sizeof(rep));
	int rc = pack_run(l, &po, &rep, &err);
	CHECK_OK(rc, &err);
	if (rc)
		return rc;
	CHECK_EQ_U64(rep.packed, l->count);
	snprintf(manifest, 4200, "%s", rep.manifest);
	return 0;
}

static void setup(void)
{
	ims_error err = {0};
	const char *gen = getenv("IMS_FIXTURES");
	if (!gen) {
		fprintf(stderr, "IMS_FIXTURES is not set (run through ctest)\n");
		exit(1);
	}
	test_tmpdir(g_tmp, sizeof(g_tmp), "loader");
	char cmd[9000];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/fx' && '%s' '%s/fx'", g_tmp, gen,
		 g_tmp);
	if (system(cmd) != 0) {
		fprintf(stderr, "fixture generator failed: %s\n", cmd);
		exit(1);
	}

	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/sample", g_tmp);
	ds_sample_opts so;
	ds_sample_opts_init(&so);
	so.classes = 4;
	so.per_class = 25;
	so.seed = 0;
	so.threads = 2;
	if (ds_sample_write(dir, &so, NULL, &err) != 0) {
		fprintf(stderr, "ds_sample_write: %s\n", err.msg);
		exit(1);
	}
	ds_list scan;
	ds_list_init(&scan);
	if (ds_scan_folder(dir, NULL, &scan, NULL, &err) != 0) {
		fprintf(stderr, "ds_scan_folder: %s\n", err.msg);
		exit(1);
	}

	/* Main list: the first 97 rows, paths under g_tmp. */
	ds_list l;
	ds_list_init(&l);
	CHECK_OK(ds_list_copy_classes(&l, &scan, &err), &err);
	for (size_t i = 0; i < MAIN_N; i++) {
		char p[4200];
		snprintf(p, sizeof(p), "sample/%s", scan.items[i].path);
		CHECK_OK(ds_list_append(&l, i, scan.items[i].label, NULL, 0, p, &err),
			 &err);
	}
	if (pack_list(&l, "main", PACK_KEEP, 4, 0, g_main) ||
	    pack_list(&l, "raw", PACK_RAW, 2, 48, g_raw) ||
	    pack_list(&l, "png", PACK_PNG, 2, 48, g_png))
		exit(1);
	ds_list_release(&l);

	/* Odd colour spaces. */
	ds_list_init(&l);
	for (int i = 0; i < ODD_N; i++) {
		char p[256];
		snprintf(p, sizeof(p), "fx/%s", odd_files[i]);
		CHECK_OK(ds_list_append(&l, (uint64_t)i, i % 2, NULL, 0, p, &err),
			 &err);
	}
	if (pack_list(&l, "odd", PACK_KEEP, 1, 0, g_odd))
		exit(1);
	ds_list_release(&l);

	/* 20 sample records with truncated_eoi.jpg at BAD_AT. */
	ds_list_init(&l);
	for (size_t i = 0, k = 0; i < 21; i++) {
		char p[4200];
		if (i == BAD_AT)
			snprintf(p, sizeof(p), "fx/truncated_eoi.jpg");
		else
			snprintf(p, sizeof(p), "sample/%s", scan.items[k++ * 4].path);
		CHECK_OK(ds_list_append(&l, i, (int32_t)(i % 4), NULL, 0, p, &err),
			 &err);
	}
	if (pack_list(&l, "bad", PACK_KEEP, 1, 0, g_bad))
		exit(1);
	ds_list_release(&l);

	/* ... and with truncated_eoi.jpg at BAD_AT and BAD_AT + 1 */
	ds_list_init(&l);
	for (size_t i = 0, k = 0; i < 21; i++) {
		char p[4200];
		if (i == BAD_AT || i == BAD_AT + 1)
			snprintf(p, sizeof(p), "fx/truncated_eoi.jpg");
		else
			snprintf(p, sizeof(p), "sample/%s", scan.items[k++ * 4].path);
		CHECK_OK(ds_list_append(&l, i, (int32_t)(i % 4), NULL, 0, p, &err),
			 &err);
	}
	if (pack_list(&l, "bad2", PACK_KEEP, 1, 0, g_bad2))
		exit(1);
	ds_list_release(&l);

	ds_list_init(&l);
	for (int i = 0; i < 4; i++)
		CHECK_OK(ds_list_append(&l, (uint64_t)i, i, NULL, 0, "fx/big.jpg",
					&err),
			 &err);
	if (pack_list(&l, "big", PACK_KEEP, 1, 0, g_big))
		exit(1);
	ds_list_release(&l);
	ds_list_release(&scan);
}

/* Everything one rank got in one epoch. */
typedef struct epoch_out {
	int rc;             /* 0, or the failing call's code */
	uint64_t batches;   /* batches delivered */
	uint64_t per_epoch; /* aug_loader_batches_per_epoch */
	uint64_t per_rank, padded, dropped;
	size_t n, sb;       /* samples, bytes per sample */
	uint8_t *data;
	int32_t *labels;
	uint64_t *idx;
	uint8_t *pad;
	int counts_ok;      /* every batch full except maybe the last */
	int steps_ok;       /* b.step == 0, 1, ... and b.epoch == epoch */
	aug_loader_stats stats;
} epoch_out;

static void epoch_free(epoch_out *e)
{
	free(e->data);
	free(e->labels);
	free(e->idx);
	free(e->pad);
	memset(e, 0, sizeof(*e));
}

/* Opens a loader with o, runs each epoch of epochs[0..n_epochs) and keeps
 * the last one in *out. */
static void run_epochs(const aug_loader_opts *o, const uint64_t *epochs,
		       int n_epochs, epoch_out *out)
{
	ims_error err = {0};
	memset(out, 0, sizeof(*out));
	out->counts_ok = out->steps_ok = 1;
	aug_loader *l = NULL;
	out->rc = aug_loader_open(o, &l, &err);
	CHECK_OK(out->rc, &err);
	if (out->rc)
		return;
	out->per_epoch = aug_loader_batches_per_epoch(l);
	aug_loader_share(l, &out->per_rank, &out->padded, &out->dropped);
	out->sb = aug_sample_bytes(&o->transform);
	size_t cap = (size_t)(out->per_epoch + 1) * (size_t)o->batch_size;
	out->data = malloc(cap * out->sb);
	out->labels = malloc(cap * sizeof(int32_t));
	out->idx = malloc(cap * sizeof(uint64_t));
	out->pad = malloc(cap);
	for (int e = 0; e < n_epochs; e++) {
		out->n = 0;
		out->batches = 0;
		int rc = aug_loader_start_epoch(l, epochs[e], &err);
		CHECK_OK(rc, &err);
		if (rc) {
			out->rc = rc;
			break;
		}
		for (;;) {
			aug_batch b;
			memset(&b, 0, sizeof(b));
			rc = aug_loader_next(l, &b, &err);
			if (rc == 1)
				break;
			CHECK_OK(rc, &err);
			if (rc) {
				out->rc = rc;
				break;
			}
			if (b.step != out->batches || b.epoch != epochs[e])
				out->steps_ok = 0;
			if (b.count < 1 || b.count > o->batch_size ||
			    out->n + (size_t)b.count > cap) {
				out->counts_ok = 0;
				break;
			}
			if (out->batches > 0 && out->n % (size_t)o->batch_size)
				out->counts_ok = 0; /* a short batch was not last */
			memcpy(out->data + out->n * out->sb, b.data,
			       (size_t)b.count * out->sb);
			memcpy(out->labels + out->n, b.labels,
			       (size_t)b.count * sizeof(int32_t));
			memcpy(out->idx + out->n, b.indices,
			       (size_t)b.count * sizeof(uint64_t));
			memcpy(out->pad + out->n, b.padded, (size_t)b.count);
			out->n += (size_t)b.count;
			out->batches++;
		}
		if (out->rc)
			break;
		/* After the end, next() keeps returning 1. */
		aug_batch b;
		CHECK_EQ_INT(aug_loader_next(l, &b, &err), 1);
		CHECK_EQ_U64(out->batches, out->per_epoch);
	}
	aug_loader_get_stats(l, &out->stats);
	aug_loader_close(l);
	CHECK(out->counts_ok);
	CHECK(out->steps_ok);
}

static void run_epoch(const aug_loader_opts *o, uint64_t epoch, epoch_out *out)
{
	run_epochs(o, &epoch, 1, out);
}

static void base_opts(aug_loader_opts *o, const char *manifest, int train,
		      int batch, int side)
{
	aug_loader_opts_init(o, train);
	o->manifest = manifest;
	o->batch_size = batch;
	o->seed = 11;
	o->threads = 2;
	o->quiet = 1;
	o->transform.out_w = side;
	o->transform.out_h = side;
}

static int same_epoch(const epoch_out *a, const epoch_out *b)
{
	return a->rc == 0 && b->rc == 0 && a->n == b->n && a->sb == b->sb &&
	       a->n > 0 && memcmp(a->data, b->data, a->n * a->sb) == 0 &&
	       memcmp(a->labels, b->labels, a->n * sizeof(int32_t)) == 0 &&
	       memcmp(a->idx, b->idx, a->n * sizeof(uint64_t)) == 0 &&
	       memcmp(a->pad, b->pad, a->n) == 0;
}


/* Says which samples of two runs differ and by how much (u8 or f32). */
static void report_diff(const char *what, const epoch_out *a,
			const epoch_out *b)
{
	if (a->n != b->n || a->sb != b->sb) {
		fprintf(stderr, "%s: %zu vs %zu samples\n", what, a->n, b->n);
		return;
	}
	int shown = 0;
	for (size_t i = 0; i < a->n; i++) {
		if (a->idx[i] != b->idx[i] || a->labels[i] != b->labels[i]) {
			if (shown++ < 8)
				fprintf(stderr, "%s: sample %zu: index %" PRIu64
					" vs %" PRIu64 "\n", what, i, a->idx[i],
					b->idx[i]);
			continue;
		}
		if (memcmp(a->data + i * a->sb, b->data + i * b->sb, a->sb) == 0)
			continue;
		size_t nd = 0;
		for (size_t k = 0; k < a->sb; k++)
			nd += a->data[i * a->sb + k] != b->data[i * b->sb + k];
		if (shown++ < 8)
			fprintf(stderr, "%s: sample %zu (record %" PRIu64
				"): %zu of %zu bytes differ\n", what, i,
				a->idx[i], nd, a->sb);
	}
}

/* Position of record idx in e, or -1. */
static long find_idx(const epoch_out *e, uint64_t idx)
{
	for (size_t i = 0; i < e->n; i++)
		if (e->idx[i] == idx && !e->pad[i])
			return (long)i;
	return -1;
}

static int load_labels(const char *manifest, int32_t *labels, uint64_t n)
{
	ims_error err = {0};
	rio_reader *r = NULL;
	int rc = rio_reader_open(manifest, &r, &err);
	CHECK_OK(rc, &err);
	if (rc)
		return rc;
	rio_cursor *c = NULL;
	rc = rio_cursor_open(r, 0, &c, &err);
	CHECK_OK(rc, &err);
	for (uint64_t i = 0; !rc && i < n; i++) {
		rio_record rec;
		rc = rio_cursor_get(c, i, &rec, &err);
		CHECK_OK(rc, &err);
		labels[i] = rec.label;
	}
	rio_cursor_close(c);
	rio_reader_close(r);
	return rc;
}

/* ---- tests ------------------------------------------------------------- */

static void test_threads(void)
{
	for (int train = 1; train >= 0; train--) {
		epoch_out ref, e;
		aug_loader_opts o;
		base_opts(&o, g_main, train, 8, 48);
		o.threads = 1;
		run_epoch(&o, 2, &ref);
		CHECK(ref.n > 0);
		int threads[2] = {2, 4};
		for (int t = 0; t < 2; t++) {
			o.threads = threads[t];
			run_epoch(&o, 2, &e);
			if (!same_epoch(&ref, &e))
				fprintf(stderr, "threads %d differ from 1 (train %d)\n",
					threads[t], train);
			CHECK(same_epoch(&ref, &e));
			epoch_free(&e);
		}
		epoch_free(&ref);
	}
}

static void test_determinism(void)
{
	aug_loader_opts o;
	base_opts(&o, g_main, 1, 8, 48);
	epoch_out a, b, c, d;
	run_epoch(&o, 0, &a);
	run_epoch(&o, 0, &b);
	CHECK(same_epoch(&a, &b));
	/* An epoch given after another on the same loader is the same too. */
	uint64_t seq[2] = {5, 0};
	run_epochs(&o, seq, 2, &c);
	CHECK(same_epoch(&a, &c));
	epoch_free(&c);

	run_epoch(&o, 1, &c);
	CHECK_EQ_U64(c.n, a.n);
	CHECK(a.n > 0 && memcmp(a.idx, c.idx, a.n * sizeof(uint64_t)) != 0);
	/* The same record gets another augmentation in another epoch. */
	size_t common = 0, differ = 0;
	for (size_t i = 0; i < a.n; i++) {
		long j = find_idx(&c, a.idx[i]);
		if (j < 0)
			continue;
		common++;
		differ += memcmp(a.data + i * a.sb, c.data + (size_t)j * c.sb,
				 a.sb) != 0;
	}
	CHECK(common > 40);
	CHECK(differ >= common * 9 / 10);

	o.seed = 12;
	run_epoch(&o, 0, &d);
	CHECK(a.n > 0 && memcmp(a.idx, d.idx, a.n * sizeof(uint64_t)) != 0);
	CHECK(!same_epoch(&a, &d));
	epoch_free(&a);
	epoch_free(&b);
	epoch_free(&c);
	epoch_free(&d);
}

static void test_partitions(void)
{
	for (int drop = 1; drop >= 0; drop--) {
		for (int world = 1; world <= 4; world++) {
			epoch_out e[4];
			uint64_t want = drop ? MAIN_N / (uint64_t)world
					     : (MAIN_N + (uint64_t)world - 1) / (uint64_t)world;
			for (int r = 0; r < world; r++) {
				aug_loader_opts o;
				base_opts(&o, g_main, 1, 8, 32);
				o.world = world;
				o.rank = r;
				o.drop_remainder = drop;
				o.drop_last = drop;
				run_epoch(&o, 3, &e[r]);
				CHECK_EQ_U64(e[r].per_rank, want);
				CHECK_EQ_U64(e[r].per_epoch, e[0].per_epoch);
				CHECK_EQ_U64(e[r].n, e[0].n);
				CHECK_EQ_U64(e[r].per_epoch,
					     drop ? want / 8 : (want + 7) / 8);
				CHECK_EQ_U64(e[r].n, drop ? want / 8 * 8 : want);
				if (drop) {
					CHECK_EQ_U64(e[r].padded, 0);
					CHECK_EQ_U64(e[r].dropped, MAIN_N % world);
				} else {
					CHECK_EQ_U64(e[r].padded,
						     want * (uint64_t)world - MAIN_N);
				}
			}
			/* Each rank's order is its rio_partition share. */
			for (int r = 0; r < world; r++) {
				uint64_t share[MAIN_N];
				ims_error err = {0};
				rio_partition_opts po;
				rio_partition_opts_init(&po);
				po.n = MAIN_N;
				po.rank = r;
				po.world = world;
				po.epoch = 3;
				po.seed = 11;
				po.remainder = drop ? RIO_REMAINDER_DROP : RIO_REMAINDER_PAD;
				CHECK_OK(rio_partition(&po, share, NULL, &err), &err);
				CHECK(e[r].n <= want && e[r].idx &&
				      memcmp(e[r].idx, share,
					     e[r].n * sizeof(uint64_t)) == 0);
			}
			/* Non-padded samples: each record at most once (drop), or
			 * exactly once (pad); padded ones are repeats. */
			int seen[MAIN_N] = {0};
			uint64_t n_pad = 0;
			int bad_idx = 0;
			for (int r = 0; r < world; r++)
				for (size_t i = 0; i < e[r].n; i++) {
					if (e[r].idx[i] >= MAIN_N) {
						bad_idx = 1;
						continue;
					}
					if (e[r].pad[i])
						n_pad++;
					else
						seen[e[r].idx[i]]++;
				}
			CHECK(!bad_idx);
			int dup = 0, missing = 0;
			for (int i = 0; i < MAIN_N; i++) {
				dup += seen[i] > 1;
				missing += seen[i] == 0;
			}
			CHECK_EQ_INT(dup, 0);
			if (!drop) {
				CHECK_EQ_INT(missing, 0);
				CHECK_EQ_U64(n_pad, e[0].padded);
				/* every padded sample repeats a record */
				for (int r = 0; r < world; r++)
					for (size_t i = 0; i < e[r].n; i++)
						if (e[r].pad[i] && e[r].idx[i] < MAIN_N)
							CHECK(seen[e[r].idx[i]] == 1);
			} else {
				CHECK_EQ_U64(n_pad, 0);
			}
			for (int r = 0; r < world; r++)
				epoch_free(&e[r]);
		}
	}

	/* A record is augmented the same whatever the world size. */
	aug_loader_opts o;
	base_opts(&o, g_main, 1, 8, 32);
	o.drop_last = 0;
	epoch_out w1, w2[2];
	run_epoch(&o, 4, &w1);
	size_t compared = 0, equal = 0;
	for (int r = 0; r < 2; r++) {
		o.world = 2;
		o.rank = r;
		run_epoch(&o, 4, &w2[r]);
		for (size_t i = 0; i < w2[r].n; i++) {
			long j = find_idx(&w1, w2[r].idx[i]);
			if (j < 0)
				continue;
			compared++;
			equal += memcmp(w2[r].data + i * w2[r].sb,
					w1.data + (size_t)j * w1.sb, w1.sb) == 0;
		}
		epoch_free(&w2[r]);
	}
	CHECK(compared >= 90);
	CHECK_EQ_U64(equal, compared);
	epoch_free(&w1);
}

static void test_shard_owning(void)
{
	ims_error err = {0};
	rio_manifest m;
	memset(&m, 0, sizeof(m));
	int rc = rio_manifest_load(g_main, &m, &err);
	CHECK_OK(rc, &err);
	if (rc)
		return;
	CHECK_EQ_U64(m.n_shards, 4);
	for (int world = 2; world <= 3; world++) {
		epoch_out e[3];
		for (int r = 0; r < world; r++) {
			aug_loader_opts o;
			base_opts(&o, g_main, 1, 4, 32);
			o.world = world;
			o.rank = r;
			o.shard_owning = 1;
			run_epoch(&o, 1, &e[r]);
			CHECK_EQ_U64(e[r].per_epoch, e[0].per_epoch);
			CHECK_EQ_U64(e[r].n, e[0].n);
			CHECK(e[r].n > 0);
			int outside = 0;
			for (size_t i = 0; i < e[r].n; i++) {
				int owned = 0;
				for (size_t s = 0; s < m.n_shards; s++)
					if ((int)(s % (size_t)world) == r &&
					    e[r].idx[i] >= m.shards[s].first &&
					    e[r].idx[i] < m.shards[s].first +
								   m.shards[s].records)
						owned = 1;
				outside += !owned;
			}
			if (outside)
				fprintf(stderr, "shard_owning world %d rank %d: %d "
					"samples from shards it does not own\n",
					world, r, outside);
			CHECK_EQ_INT(outside, 0);
		}
		for (int r = 0; r < world; r++)
			epoch_free(&e[r]);
	}
	rio_manifest_release(&m);
}

static void count_event(void *ctx, const char *msg)
{
	CHECK(strstr(msg, "whose records are not shuffled") != NULL);
	(*(int *)ctx)++;
}

/* Events of opening rank 0 of 2 on a manifest; the loader is closed. */
static int owning_events(const char *manifest, int shard_owning)
{
	ims_error err = {0};
	int n = 0;
	aug_loader_opts o;
	base_opts(&o, manifest, 1, 4, 32);
	o.world = 2;
	o.shard_owning = shard_owning;
	o.event = count_event;
	o.event_ctx = &n;
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	aug_loader_close(l);
	return n;
}

/* A copy of g_main's manifest beside it with "shuffled" replaced. */
static void manifest_with(const char *name, const char *shuffled, char *out)
{
	uint8_t *text;
	size_t len;
	ims_error err;
	CHECK_OK(ims_read_file(g_main, &text, &len, 0, &err), &err);
	char *p = strstr((char *)text, "\"shuffled\":\tfalse,");
	CHECK(p != NULL);
	snprintf(out, 4200, "%s/%s", g_tmp, name);
	FILE *f = fopen(out, "w");
	CHECK(f != NULL);
	if (p && f) {
		fwrite(text, 1, (size_t)(p - (char *)text), f);
		fputs(shuffled, f);
		fputs(p + strlen("\"shuffled\":\tfalse,"), f);
	}
	if (f)
		fclose(f);
	free(text);
}

/* Shard-owning mode on records in list order (g_main: a sorted folder
 * scan, recorded as not shuffled) warns once through the event callback;
 * on shuffled records, records of unknown order or without shard-owning
 * it does not. */
static void test_owning_warning(void)
{
	CHECK_EQ_INT(owning_events(g_main, 1), 1);
	CHECK_EQ_INT(owning_events(g_main, 0), 0);
	char other[4200];
	manifest_with("main_shuffled.json", "\"shuffled\":\ttrue,", other);
	CHECK_EQ_INT(owning_events(other, 1), 0);
	manifest_with("main_unknown.json", "", other);
	CHECK_EQ_INT(owning_events(other, 1), 0);
	manifest_with("main_bad.json", "\"shuffled\":\t1,", other);
	ims_error err = {0};
	aug_loader_opts o;
	base_opts(&o, other, 1, 4, 32);
	aug_loader *l = NULL;
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_ECORRUPT);
	CHECK(strstr(err.msg, "\"shuffled\" is not true or false") != NULL);
}

static void test_validation(void)
{
	aug_loader_opts o;
	base_opts(&o, g_main, 0, 10, 40);
	epoch_out a, b;
	run_epoch(&o, 0, &a);
	run_epoch(&o, 7, &b);
	CHECK(same_epoch(&a, &b));
	/* file order, every record once, short last batch */
	CHECK_EQ_U64(a.n, MAIN_N);
	int in_order = 1;
	for (size_t i = 0; i < a.n; i++)
		in_order &= a.idx[i] == i;
	CHECK(in_order);
	CHECK_EQ_U64(a.per_epoch, (MAIN_N + 9) / 10);
	epoch_free(&a);
	epoch_free(&b);
}

static void test_bad_records(void)
{
	aug_loader_opts o;
	base_opts(&o, g_bad, 0, 4, 64);
	o.transform.crop_frac = 1.0; /* reads whole rows: the damage is met */
	o.drop_last = 0;
	uint64_t ep[2] = {0, 1};
	epoch_out e;
	run_epochs(&o, ep, 2, &e);
	CHECK_EQ_INT(e.rc, 0);
	CHECK_EQ_U64(e.n, 21);
	CHECK_EQ_U64(e.stats.bad_records, 2); /* met once per epoch */
	CHECK(strstr(e.stats.last_bad, "7") != NULL);
	if (e.stats.last_bad[0])
		fprintf(stderr, "(last_bad: %s)\n", e.stats.last_bad);
	int bad_seen = 0;
	for (size_t i = 0; i < e.n; i++)
		bad_seen += e.idx[i] == BAD_AT;
	CHECK_EQ_INT(bad_seen, 0);
	/* position BAD_AT holds the next record of the share, its label and
	 * (validation being deterministic) its pixels */
	if (e.n > BAD_AT + 1) {
		CHECK_EQ_U64(e.idx[BAD_AT], BAD_AT + 1);
		CHECK_EQ_INT(e.labels[BAD_AT], (BAD_AT + 1) % 4);
		CHECK_MEM(e.data + BAD_AT * e.sb, e.data + (BAD_AT + 1) * e.sb,
			  e.sb);
		CHECK(!e.pad[BAD_AT]);
	}
	epoch_free(&e);

	/* training too: each epoch meets it at most once, and is complete */
	base_opts(&o, g_bad, 1, 4, 32);
	o.transform.rrc = 0;
	o.transform.crop_frac = 1.0;
	run_epochs(&o, ep, 2, &e);
	CHECK_EQ_INT(e.rc, 0);
	CHECK_EQ_U64(e.n, 20);
	/* met in an epoch when its share keeps it (drop_last drops one) */
	uint64_t met = 0;
	for (int k = 0; k < 2; k++) {
		uint64_t share[21];
		ims_error err = {0};
		rio_partition_opts po;
		rio_partition_opts_init(&po);
		po.n = 21;
		po.epoch = ep[k];
		po.seed = o.seed;
		CHECK_OK(rio_partition(&po, share, NULL, &err), &err);
		for (int i = 0; i < 20; i++)
			met += share[i] == BAD_AT;
	}
	CHECK_EQ_U64(e.stats.bad_records, met);
	fprintf(stderr, "(train: truncated_eoi.jpg met %" PRIu64 " times in 2 epochs)\n", met);
	for (size_t i = 0; i < e.n; i++)
		CHECK(e.idx[i] != BAD_AT);
	epoch_free(&e);
}

/* Two bad records in a row: the first's stand-in is the second, which
 * fails too, so that sample tries three records; the second fails again
 * at its own place. The loader's count is of records (2), not attempts
 * (3); the batch tells its attempts and lists each replaced record. */
static void test_bad_records_in_a_row(void)
{
	aug_loader_opts o;
	base_opts(&o, g_bad2, 0, 4, 64);
	o.transform.crop_frac = 1.0;
	o.drop_last = 0;
	ims_error err = {0};
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_OK(aug_loader_start_epoch(l, 0, &err), &err);
	aug_batch b;
	int attempts = 0, listed = 0;
	while (aug_loader_next(l, &b, &err) == 0) {
		attempts += b.bad_records;
		for (int i = 0; i < b.bad_listed; i++, listed++)
			CHECK_EQ_U64(b.bad_indices[i], (uint64_t)(BAD_AT + listed));
	}
	aug_loader_stats st;
	aug_loader_get_stats(l, &st);
	CHECK_EQ_INT(attempts, 3);
	CHECK_EQ_INT(listed, 2);
	CHECK_EQ_U64(st.bad_records, 2);
	aug_loader_close(l);
}

/* The batch that met the bad record says so: the sample that stands in
 * for it is flagged, the record named, the count given; the other
 * batches say nothing. */
static void test_bad_in_batch(void)
{
	ims_error err = {0};
	aug_loader_opts o;
	base_opts(&o, g_bad, 0, 4, 64);
	o.transform.crop_frac = 1.0;
	o.drop_last = 0;
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_OK(aug_loader_start_epoch(l, 0, &err), &err);
	int flagged = 0, batches_with = 0;
	aug_batch b;
	while (aug_loader_next(l, &b, &err) == 0) {
		for (int j = 0; j < b.count; j++) {
			uint64_t pos = b.step * 4 + (uint64_t)j;
			CHECK_EQ_INT(b.replaced[j], pos == BAD_AT);
			flagged += b.replaced[j];
		}
		if (b.bad_records) {
			batches_with++;
			CHECK_EQ_INT(b.bad_records, 1);
			CHECK_EQ_INT(b.bad_listed, 1);
			CHECK_EQ_U64(b.bad_indices[0], BAD_AT);
			CHECK(strstr(b.bad_reason, "record 7") != NULL);
		} else {
			CHECK_EQ_INT(b.bad_listed, 0);
			CHECK_EQ_INT(b.bad_reason[0], 0);
		}
	}
	CHECK_EQ_INT(flagged, 1);
	CHECK_EQ_INT(batches_with, 1);
	aug_loader_close(l);
}

/*
 * An epoch trained in part at one rank (24 positions: 3 batches of 8)
 * and continued from position 24 at 2 ranks of batch 4: the second part
 * takes the global order from position 24 on, so the two parts see every
 * record of the epoch at most once, and all of it but the records the
 * second part's shares drop.
 */
static void test_start_at(void)
{
	ims_error err = {0};
	aug_loader_opts o;
	base_opts(&o, g_main, 1, 8, 16);
	rio_partition_opts po;
	rio_partition_opts_init(&po);
	po.n = MAIN_N;
	po.epoch = 3;
	po.seed = o.seed;
	uint64_t order[MAIN_N];
	CHECK_OK(rio_partition(&po, order, NULL, &err), &err);
	int seen[MAIN_N] = {0};
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_OK(aug_loader_start_epoch(l, 3, &err), &err);
	aug_batch b;
	for (int k = 0; k < 3; k++) {
		CHECK_OK(aug_loader_next(l, &b, &err), &err);
		for (int j = 0; j < b.count; j++)
			seen[b.indices[j]]++;
	}
	aug_loader_close(l);
	uint64_t second = 0;
	for (int rank = 0; rank < 2; rank++) {
		aug_loader_opts o2 = o;
		o2.rank = rank;
		o2.world = 2;
		o2.batch_size = 4;
		l = NULL;
		CHECK_OK(aug_loader_open(&o2, &l, &err), &err);
		if (!l)
			return;
		/* (97 - 24) / 2 = 36 records per rank: 9 batches of 4 */
		CHECK_EQ_U64(aug_loader_batches_at(l, 24), 9);
		CHECK_EQ_U64(aug_loader_batches_at(l, 0), aug_loader_batches_per_epoch(l));
		CHECK_EQ_U64(aug_loader_batches_at(l, 95), 0);
		CHECK_OK(aug_loader_start_epoch_at(l, 3, 24, &err), &err);
		uint64_t k = 0;
		while (aug_loader_next(l, &b, &err) == 0) {
			CHECK_EQ_U64(b.epoch, 3);
			for (int j = 0; j < b.count; j++, k++) {
				CHECK_EQ_U64(b.indices[j], order[24 + (uint64_t)rank + 2 * k]);
				seen[b.indices[j]]++;
				second++;
			}
		}
		/* nothing left from position 96: the epoch is over at once */
		CHECK_OK(aug_loader_start_epoch_at(l, 3, 96, &err), &err);
		CHECK_EQ_INT(aug_loader_next(l, &b, &err), 1);
		aug_loader_close(l);
	}
	CHECK_EQ_U64(second, 72);
	int twice = 0, missed = 0;
	for (int i = 0; i < MAIN_N; i++) {
		twice += seen[i] > 1;
		missed += seen[i] == 0;
	}
	CHECK_EQ_INT(twice, 0);
	CHECK_EQ_INT(missed, MAIN_N - 24 - 72); /* the last record of the order */
	CHECK_EQ_INT(seen[order[MAIN_N - 1]], 0);

	/* shard-owning: each rank continues in its own records */
	base_opts(&o, g_main, 1, 4, 16);
	o.world = 2;
	o.shard_owning = 1;
	l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_EQ_INT(aug_loader_start_epoch_at(l, 0, 3, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "not a multiple of the 2 ranks") != NULL);
	uint64_t all = aug_loader_batches_per_epoch(l);
	CHECK_EQ_U64(aug_loader_batches_at(l, 16), all - 2);
	aug_loader_close(l);
}

/* CMYK, Adobe CMYK, YCCK, grey and EXIF-rotated records give the decoder's
 * upright RGB: val with out 64x64 at crop_frac 1 on a 96x64 image keeps
 * the size and takes the centre columns 16..79, an integer-aligned plan
 * that copies pixels. */
static void test_colour_spaces(void)
{
	ims_error err = {0};
	aug_loader_opts o;
	base_opts(&o, g_odd, 0, ODD_N, 64);
	o.transform.crop_frac = 1.0;
	o.transform.layout = AUG_LAYOUT_NHWC;
	o.transform.dtype = AUG_DTYPE_U8;
	o.drop_last = 0;
	epoch_out e;
	run_epoch(&o, 0, &e);
	CHECK_EQ_U64(e.n, ODD_N);
	CHECK_EQ_U64(e.sb, 64 * 64 * 3);
	aug_codec *c = NULL;
	CHECK_OK(aug_codec_create(&c, &err), &err);
	aug_image img = {0};
	aug_decode_opts d = {AUG_CHANNELS_RGB, 0, 0, 1};
	for (size_t i = 0; i < e.n && i < ODD_N; i++) {
		char path[4400];
		snprintf(path, sizeof(path), "%s/fx/%s", g_tmp, odd_files[e.idx[i]]);
		size_t len = 0;
		uint8_t *buf = NULL;
		CHECK_OK(ims_read_file(path, &buf, &len, 0, &err), &err);
		int rc = aug_decode(c, buf, len, &d, &img, NULL, &err);
		CHECK_OK(rc, &err);
		free(buf);
		if (rc)
			continue;
		CHECK_EQ_INT(img.width, 96);
		CHECK_EQ_INT(img.height, 64);
		int worst = 0;
		const uint8_t *s = e.data + i * e.sb;
		for (int y = 0; y < 64; y++)
			for (int x = 0; x < 64; x++)
				for (int ch = 0; ch < 3; ch++) {
					int a = s[((size_t)y * 64 + x) * 3 + ch];
					int b = img.pixels[(size_t)y * img.stride +
							   (size_t)(x + 16) * 3 + ch];
					if (abs(a - b) > worst)
						worst = abs(a - b);
				}
		if (worst > 1)
			fprintf(stderr, "%s: loader differs from aug_decode by %d\n",
				odd_files[e.idx[i]], worst);
		CHECK(worst <= 1);
	}
	aug_image_release(&img);
	aug_codec_destroy(c);
	epoch_free(&e);
}

/* The loader may decode big.jpg at 1/2..1/8 scale; the same plan applied
 * to a full-size decode must look the same: mean absolute difference under
 * 3 levels (u8). Full-size bilinear aliases a little; the pattern is
 * smooth but for two shape edges. */
static void test_dct_scaled(void)
{
	ims_error err = {0};
	aug_loader_opts o;
	base_opts(&o, g_big, 1, 4, 64);
	o.transform.layout = AUG_LAYOUT_NHWC;
	o.transform.dtype = AUG_DTYPE_U8;
	epoch_out e;
	run_epoch(&o, 2, &e);
	CHECK_EQ_U64(e.n, 4);
	char path[4400];
	snprintf(path, sizeof(path), "%s/fx/big.jpg", g_tmp);
	size_t len = 0;
	uint8_t *buf = NULL;
	CHECK_OK(ims_read_file(path, &buf, &len, 0, &err), &err);
	aug_codec *c = NULL;
	CHECK_OK(aug_codec_create(&c, &err), &err);
	aug_image img = {0};
	CHECK_OK(aug_decode(c, buf, len, NULL, &img, NULL, &err), &err);
	uint8_t *ref = malloc(e.sb);
	double worst = 0;
	for (size_t i = 0; i < e.n; i++) {
		aug_plan p;
		CHECK_OK(aug_sample_plan(&o.transform, img.width, img.height, o.seed,
					 2, e.idx[i], &p, &err),
			 &err);
		CHECK_OK(aug_warp(&img, &p, &o.transform, ref, &err), &err);
		double sum = 0;
		const uint8_t *s = e.data + i * e.sb;
		for (size_t k = 0; k < e.sb; k++)
			sum += abs((int)s[k] - (int)ref[k]);
		double mae = sum / (double)e.sb;
		fprintf(stderr, "(big.jpg record %" PRIu64 ": scale %.2f, mae %.3f)\n",
			e.idx[i], p.scale, mae);
		if (mae > worst)
			worst = mae;
	}
	CHECK(worst < 3.0);
	free(ref);
	free(buf);
	aug_image_release(&img);
	aug_codec_destroy(c);
	epoch_free(&e);
}

static uint64_t fnv1a(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* Golden hash of the first training batch (batch 8, 64x64, f32 NCHW,
 * seed 7, epoch 0) of the main split. It changes only when the maths
 * (plan, decode, warp, partition) changes on purpose, or when the sample
 * images change (ds_sample_* uses libm: another libm may shift a level):
 * then print the new value with IMS_PRINT_GOLDEN=1 and update it here. */
#define GOLDEN_FIRST_BATCH 0x1b472d7d35904446ull

static void test_golden(void)
{
	aug_loader_opts o;
	base_opts(&o, g_main, 1, 8, 64);
	o.seed = 7;
	o.transform.layout = AUG_LAYOUT_NCHW;
	o.transform.dtype = AUG_DTYPE_F32;
	epoch_out e;
	run_epoch(&o, 0, &e);
	CHECK(e.n >= 8);
	if (e.n < 8) {
		epoch_free(&e);
		return;
	}
	uint64_t h = fnv1a(e.data, 8 * e.sb);
	h ^= fnv1a(e.labels, 8 * sizeof(int32_t));
	h ^= fnv1a(e.idx, 8 * sizeof(uint64_t)) * 31;
	if (getenv("IMS_PRINT_GOLDEN") || h != GOLDEN_FIRST_BATCH)
		fprintf(stderr, "golden first batch: 0x%016" PRIx64 "\n", h);
	CHECK_EQ_U64(h, GOLDEN_FIRST_BATCH);
	epoch_free(&e);
}

static void test_dtypes(void)
{
	aug_loader_opts o;
	base_opts(&o, g_main, 1, 8, 40);
	o.transform.layout = AUG_LAYOUT_NCHW;
	o.transform.dtype = AUG_DTYPE_F32;
	for (int c = 0; c < 3; c++) {
		o.transform.mean[c] = 0;
		o.transform.std[c] = 1;
	}
	epoch_out f, u;
	run_epoch(&o, 1, &f);
	o.transform.layout = AUG_LAYOUT_NHWC;
	o.transform.dtype = AUG_DTYPE_U8;
	run_epoch(&o, 1, &u);
	CHECK_EQ_U64(f.n, u.n);
	CHECK_EQ_U64(f.sb, 40 * 40 * 3 * 4);
	CHECK_EQ_U64(u.sb, 40 * 40 * 3);
	CHECK(f.n > 0 && memcmp(f.idx, u.idx, f.n * sizeof(uint64_t)) == 0);
	double worst = 0;
	for (size_t i = 0; i < f.n && i < u.n; i++) {
		const float *fs = (const float *)(void *)(f.data + i * f.sb);
		const uint8_t *us = u.data + i * u.sb;
		for (int c = 0; c < 3; c++)
			for (int k = 0; k < 40 * 40; k++) {
				double d = fabs((double)fs[c * 1600 + k] - us[k * 3 + c]);
				if (d > worst)
					worst = d;
			}
	}
	CHECK(worst <= 0.5);

	/* labels are the records' labels */
	int32_t labels[MAIN_N];
	if (load_labels(g_main, labels, MAIN_N) == 0) {
		int wrong = 0;
		for (size_t i = 0; i < f.n; i++)
			wrong += f.idx[i] >= MAIN_N || f.labels[i] != labels[f.idx[i]];
		CHECK_EQ_INT(wrong, 0);
	}
	epoch_free(&f);
	epoch_free(&u);
}

/* Raw records: a raw split and a PNG split of the same resized pixels give
 * identical batches; no record is bad. */
static void test_raw(void)
{
	for (int train = 1; train >= 0; train--) {
		aug_loader_opts o;
		base_opts(&o, g_raw, train, 8, 32);
		epoch_out r, p;
		run_epoch(&o, 1, &r);
		o.manifest = g_png;
		run_epoch(&o, 1, &p);
		CHECK_EQ_U64(r.stats.bad_records, 0);
		CHECK_EQ_U64(p.stats.bad_records, 0);
		CHECK(same_epoch(&r, &p));
		report_diff("raw vs png", &r, &p);
		epoch_free(&r);
		epoch_free(&p);
	}
}

/* ---- the batch ring's memory ---------------------------------------------- */

/*
 * The loader knows nothing of devices: it must not load a CUDA runtime
 * itself (a trainer on a GPU hands it pinned memory; one on the CPU must
 * not get pinned memory behind its back). Every dlopen of this process
 * passes here (the loader is linked in statically) and is counted when it
 * names libcudart.
 */
static int g_cudart_opens;

void *dlopen(const char *file, int mode)
{
	static void *(*real)(const char *, int);
	if (!real)
		real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	if (file && strstr(file, "cudart"))
		g_cudart_opens++;
	return real ? real(file, mode) : NULL;
}

/* An allocator that records what it gave out; fails from call fail_at
 * (from 1) on when fail_at > 0. */
typedef struct counting_alloc {
	int allocs, frees, fail_at;
	size_t bytes;
	void *given[16];
	int n_given;
} counting_alloc;

static void *count_alloc(void *ud, size_t bytes)
{
	counting_alloc *c = ud;
	c->allocs++;
	c->bytes = bytes;
	if (c->fail_at > 0 && c->allocs >= c->fail_at)
		return NULL;
	void *p = NULL;
	if (posix_memalign(&p, 64, bytes))
		return NULL;
	if (c->n_given < 16)
		c->given[c->n_given++] = p;
	return p;
}

static void count_free(void *ud, void *p)
{
	counting_alloc *c = ud;
	c->frees++;
	free(p);
}

static int was_given(const counting_alloc *c, const void *p)
{
	for (int i = 0; i < c->n_given; i++)
		if (c->given[i] == p)
			return 1;
	return 0;
}

static void test_host_memory(void)
{
	ims_error err = {0};
	aug_loader_opts o;
	epoch_out def, mine;

	/* the default ring: page-aligned host memory, and no CUDA runtime */
	g_cudart_opens = 0;
	base_opts(&o, g_main, 1, 8, 32);
	o.prefetch = 2;
	run_epoch(&o, 0, &def);
	CHECK_EQ_INT(def.stats.pinned, 0);
	CHECK_EQ_INT(g_cudart_opens, 0);

	/* the caller's memory: one allocation per ring slot of a whole
	 * batch, the batches handed out from it, all given back on close,
	 * and the same samples as the default ring's */
	counting_alloc c;
	memset(&c, 0, sizeof(c));
	o.host = (aug_host_alloc){count_alloc, count_free, &c, "test memory"};
	run_epoch(&o, 0, &mine);
	CHECK_EQ_INT(mine.stats.pinned, 1);
	CHECK_EQ_INT(c.allocs, 2);
	CHECK_EQ_INT(c.frees, 2);
	CHECK_EQ_U64(c.bytes, 8 * mine.sb);
	CHECK(same_epoch(&def, &mine));
	epoch_free(&def);
	epoch_free(&mine);

	memset(&c, 0, sizeof(c));
	aug_loader *l = NULL;
	int rc = aug_loader_open(&o, &l, &err);
	CHECK_OK(rc, &err);
	if (!rc) {
		CHECK_OK(aug_loader_start_epoch(l, 3, &err), &err);
		for (int i = 0; i < 5; i++) {
			aug_batch b;
			CHECK_OK(aug_loader_next(l, &b, &err), &err);
			CHECK(was_given(&c, b.data));
		}
		aug_loader_close(l);
		CHECK_EQ_INT(c.frees, c.allocs);
	}

	/* out of the caller's memory: IMS_ENOMEM, nothing kept */
	memset(&c, 0, sizeof(c));
	c.fail_at = 2;
	l = NULL;
	err.msg[0] = 0;
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_ENOMEM);
	CHECK(l == NULL && err.msg[0] != 0);
	CHECK_EQ_INT(c.frees, 1);

	/* an allocator without its free is refused */
	o.host.free = NULL;
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_EINVAL);
	CHECK(l == NULL);
	CHECK_EQ_INT(g_cudart_opens, 0);
}

static void test_errors(void)
{
	ims_error err = {0};
	aug_loader *l = NULL;
	aug_loader_opts o;

	base_opts(&o, g_main, 1, 0, 32);
	err.msg[0] = 0;
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_EINVAL);
	CHECK(l == NULL && err.msg[0] != 0);

	base_opts(&o, g_main, 1, 8, 32);
	o.world = 2;
	o.rank = 2;
	err.msg[0] = 0;
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_EINVAL);
	CHECK(l == NULL && err.msg[0] != 0);

	o.rank = -1;
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_EINVAL);
	o.rank = 0;
	o.world = 0;
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_EINVAL);

	/* too small for one batch per rank */
	base_opts(&o, g_odd, 1, 8, 32);
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_EINVAL);
	CHECK(l == NULL);

	base_opts(&o, g_main, 1, 8, 0);
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_EINVAL);
	CHECK(l == NULL);

	char missing[4400];
	snprintf(missing, sizeof(missing), "%s/nothere.json", g_tmp);
	base_opts(&o, missing, 1, 8, 32);
	err.msg[0] = 0;
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_ENOTFOUND);
	CHECK(l == NULL && strstr(err.msg, "nothere.json") != NULL);

	o.manifest = NULL;
	CHECK(aug_loader_open(&o, &l, &err) < 0);

	/* next() before start_epoch */
	base_opts(&o, g_main, 1, 8, 32);
	int rc = aug_loader_open(&o, &l, &err);
	CHECK_OK(rc, &err);
	if (!rc) {
		aug_batch b;
		err.msg[0] = 0;
		CHECK(aug_loader_next(l, &b, &err) < 0);
		CHECK(err.msg[0] != 0);
		/* stats of a fresh loader */
		aug_loader_stats s;
		aug_loader_get_stats(l, &s);
		CHECK_EQ_U64(s.images, 0);
		CHECK_EQ_U64(s.bad_records, 0);
		/* start, read two batches, restart: a running epoch stops */
		CHECK_OK(aug_loader_start_epoch(l, 0, &err), &err);
		CHECK_OK(aug_loader_next(l, &b, &err), &err);
		CHECK_OK(aug_loader_start_epoch(l, 1, &err), &err);
		CHECK_OK(aug_loader_next(l, &b, &err), &err);
		CHECK_EQ_U64(b.step, 0);
		CHECK_EQ_U64(b.epoch, 1);
		/* close with an epoch running */
		aug_loader_close(l);
	}
	aug_loader_close(NULL);
}


/* hold_batches: batches stay valid until given back, in any order; with
 * every slot held next() fails at once instead of waiting forever; the
 * batches are the ones the default mode gives; a held batch survives a new
 * epoch and aug_loader_stop. next_timed returns 2 or a batch. */
static void test_hold(void)
{
	ims_error err = {0};
	aug_loader_opts o;
	base_opts(&o, g_main, 1, 8, 32);
	epoch_out ref;
	run_epoch(&o, 3, &ref);
	o.hold_batches = 1;
	o.prefetch = 3;
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_OK(aug_loader_start_epoch(l, 3, &err), &err);
	aug_batch b[3];
	size_t sb = aug_sample_bytes(&o.transform);
	size_t bytes = sb * (size_t)o.batch_size;
	for (int i = 0; i < 3; i++) {
		int rc = 2;
		while (rc == 2)
			rc = aug_loader_next_timed(l, &b[i], 0.01, &err);
		CHECK_OK(rc, &err);
		CHECK_EQ_U64(b[i].step, (uint64_t)i);
	}
	/* all three slots held: an error naming the cause, not a hang */
	aug_batch x;
	int rc = aug_loader_next(l, &x, &err);
	CHECK_EQ_INT(rc, IMS_ELIMIT);
	CHECK(strstr(err.msg, "still held") != NULL);
	/* held memory was not overwritten meanwhile */
	for (int i = 0; i < 3; i++)
		CHECK(memcmp(b[i].data, ref.data + (size_t)i * bytes, bytes) == 0);
	/* give back the middle one: the next batch (step 3) is made in its
	 * slot while the others stay untouched */
	CHECK_OK(aug_loader_release(l, &b[1], &err), &err);
	CHECK_EQ_INT(aug_loader_release(l, &b[1], &err), IMS_EINVAL);
	CHECK_OK(aug_loader_next(l, &b[1], &err), &err);
	CHECK_EQ_U64(b[1].step, 3);
	CHECK(memcmp(b[1].data, ref.data + 3 * bytes, bytes) == 0);
	CHECK(memcmp(b[0].data, ref.data, bytes) == 0);
	CHECK(memcmp(b[2].data, ref.data + 2 * bytes, bytes) == 0);
	CHECK_EQ_INT(aug_loader_next(l, &x, &err), IMS_ELIMIT);
	/* a new epoch keeps held batches intact: b[2] stays held through it,
	 * the epoch turns in the two other slots */
	CHECK_OK(aug_loader_release(l, &b[0], &err), &err);
	CHECK_OK(aug_loader_release(l, &b[1], &err), &err);
	uint8_t *copy = malloc(bytes);
	memcpy(copy, b[2].data, bytes);
	CHECK_OK(aug_loader_start_epoch(l, 4, &err), &err);
	aug_batch y;
	uint64_t steps = 0;
	while ((rc = aug_loader_next(l, &y, &err)) == 0) {
		CHECK_EQ_U64(y.step, steps);
		steps++;
		CHECK_OK(aug_loader_release(l, &y, &err), &err);
	}
	CHECK_EQ_INT(rc, 1);
	CHECK_EQ_U64(steps, (uint64_t)(MAIN_N / 8));
	CHECK(memcmp(b[2].data, copy, bytes) == 0);
	CHECK_OK(aug_loader_start_epoch(l, 4, &err), &err);
	CHECK_OK(aug_loader_next(l, &y, &err), &err);
	/* stop: threads gone, held memory readable, next fails */
	aug_loader_stop(l);
	aug_loader_stop(l);
	CHECK(memcmp(b[2].data, copy, bytes) == 0);
	CHECK_EQ_INT(aug_loader_next(l, &x, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "stopped") != NULL);
	CHECK_EQ_INT(aug_loader_start_epoch(l, 5, &err), IMS_EINVAL);
	CHECK_OK(aug_loader_release(l, &b[2], &err), &err);
	free(copy);
	aug_loader_close(l);
	epoch_free(&ref);

	/* release without hold mode is refused */
	o.hold_batches = 0;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (l) {
		CHECK_OK(aug_loader_start_epoch(l, 0, &err), &err);
		CHECK_OK(aug_loader_next(l, &x, &err), &err);
		CHECK_EQ_INT(aug_loader_release(l, &x, &err), IMS_EINVAL);
		aug_loader_close(l);
	}
}

static int count_batch(void *ctx, const aug_batch *b, ims_error *err)
{
	(void)err;
	uint64_t *seen = ctx;
	*seen += (uint64_t)b->count;
	return 0;
}

/* aug_bench_run: one whole epoch is every batch of the epoch; the limits
 * are checked; a failing callback stops the run with its code. */
static void test_bench_run(void)
{
	ims_error err = {0};
	aug_bench_opts bo;
	aug_bench_opts_init(&bo);
	base_opts(&bo.loader, g_main, 1, 8, 32);
	bo.epochs = 2;
	bo.seconds = 0;
	uint64_t seen = 0;
	bo.on_batch = count_batch;
	bo.ctx = &seen;
	aug_bench_result r;
	CHECK_OK(aug_bench_run(&bo, &r, &err), &err);
	CHECK_EQ_U64(r.batches_per_epoch, MAIN_N / 8);
	CHECK_EQ_U64(r.batches, 2 * (MAIN_N / 8));
	CHECK_EQ_U64(r.images, 2 * (MAIN_N / 8) * 8);
	CHECK_EQ_U64(seen, r.images);
	CHECK_EQ_U64(r.epochs_done, 2);
	CHECK_EQ_INT(r.threads, 2);
	CHECK(r.images_per_s > 0 && r.interrupted == 0);
	bo.epochs = 0;
	CHECK_EQ_INT(aug_bench_run(&bo, &r, &err), IMS_EINVAL);
	volatile int cancel = 1;
	bo.epochs = 1;
	bo.cancel = &cancel;
	CHECK_OK(aug_bench_run(&bo, &r, &err), &err);
	CHECK(r.interrupted && r.batches == 1);
}

int main(void)
{
	setup();
	test_errors();
	test_threads();
	test_determinism();
	test_partitions();
	test_shard_owning();
	test_owning_warning();
	test_validation();
	test_bad_records();
	test_bad_records_in_a_row();
	test_bad_in_batch();
	test_start_at();
	test_colour_spaces();
	test_dct_scaled();
	test_golden();
	test_dtypes();
	test_raw();
	test_host_memory();
	test_hold();
	test_bench_run();
	int rc = TEST_EXIT();
	if (rc == 0) {
		char cmd[4200];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", g_tmp);
	}
	return rc;
}
