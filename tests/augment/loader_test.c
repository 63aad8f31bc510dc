/*
 * loader_test.c - what the loader's test programs share (loader_test.h):
 * the splits they read, built once per program, and running whole epochs
 * into one buffer so that runs can be compared sample by sample.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/datasets.h"
#include "loader_test.h"
#include "pack/pack.h"
#include "test.h"

char lt_tmp[4096];
char lt_main[4200];
char lt_raw[4200];
char lt_png[4200];
char lt_odd[4200];
char lt_bad[4200];
char lt_bad2[4200];
char lt_big[4200];

const char *const lt_odd_files[LT_ODD_N] = {
	"cmyk.jpg", "cmyk_adobe.jpg", "ycck.jpg",
	"gray.jpg", "exif_6.jpg",     "rgb.jpg"};

/* ---- splits ------------------------------------------------------------ */

/*
 * Building the splits is set-up, not a test: it counts no checks, so that
 * each program's count is its own tests' (both programs read the main
 * split and build it), and a split that cannot be built stops the
 * program with a line naming the call, as the fixtures and the sample
 * dataset do.
 */
static void add_row(ds_list *l, uint64_t index, int32_t label,
		    const char *path)
{
	ims_error err = {0};
	if (ds_list_append(l, index, label, NULL, 0, path, &err) != 0) {
		fprintf(stderr, "ds_list_append: %s\n", err.msg);
		exit(1);
	}
}

static void pack_list(const ds_list *l, const char *name, pack_encoding enc,
		      int shards, int resize, char *manifest)
{
	ims_error err = {0};
	pack_opts po;
	pack_opts_init(&po);
	po.root = lt_tmp;
	po.out_dir = lt_tmp;
	po.name = name;
	po.encoding = enc;
	po.shards = shards;
	po.resize = resize;
	po.threads = 2;
	pack_report rep;
	memset(&rep, 0, sizeof(rep));
	if (pack_run(l, &po, &rep, &err) != 0) {
		fprintf(stderr, "pack_run '%s': %s\n", name, err.msg);
		exit(1);
	}
	if (rep.packed != l->count) {
		fprintf(stderr, "pack_run '%s': packed %" PRIu64 " of %zu rows\n",
			name, rep.packed, l->count);
		exit(1);
	}
	snprintf(manifest, 4200, "%s", rep.manifest);
}

void lt_setup(const char *tag, unsigned splits)
{
	ims_error err = {0};
	/* only the splits of hand-made lists read make_images' files */
	int fixtures = (splits & (LT_SPLIT_ODD | LT_SPLIT_BAD | LT_SPLIT_BAD2 |
				  LT_SPLIT_BIG)) != 0;
	const char *gen = getenv("IMS_FIXTURES");
	if (fixtures && !gen) {
		fprintf(stderr, "IMS_FIXTURES is not set (run through ctest)\n");
		exit(1);
	}
	test_tmpdir(lt_tmp, sizeof(lt_tmp), tag);
	if (fixtures) {
		char cmd[9000];
		snprintf(cmd, sizeof(cmd), "mkdir -p '%s/fx' && '%s' '%s/fx'", lt_tmp,
			 gen, lt_tmp);
		if (system(cmd) != 0) {
			fprintf(stderr, "fixture generator failed: %s\n", cmd);
			exit(1);
		}
	}

	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/sample", lt_tmp);
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

	/* Main list: the first 97 rows, paths under lt_tmp. */
	ds_list l;
	if (splits & (LT_SPLIT_MAIN | LT_SPLIT_RAW | LT_SPLIT_PNG)) {
		ds_list_init(&l);
		if (ds_list_copy_classes(&l, &scan, &err) != 0) {
			fprintf(stderr, "ds_list_copy_classes: %s\n", err.msg);
			exit(1);
		}
		for (size_t i = 0; i < LT_MAIN_N; i++) {
			char p[4200];
			snprintf(p, sizeof(p), "sample/%s", scan.items[i].path);
			add_row(&l, i, scan.items[i].label, p);
		}
		if (splits & LT_SPLIT_MAIN)
			pack_list(&l, "main", PACK_KEEP, 4, 0, lt_main);
		if (splits & LT_SPLIT_RAW)
			pack_list(&l, "raw", PACK_RAW, 2, 48, lt_raw);
		if (splits & LT_SPLIT_PNG)
			pack_list(&l, "png", PACK_PNG, 2, 48, lt_png);
		ds_list_release(&l);
	}

	/* Odd colour spaces. */
	if (splits & LT_SPLIT_ODD) {
		ds_list_init(&l);
		for (int i = 0; i < LT_ODD_N; i++) {
			char p[256];
			snprintf(p, sizeof(p), "fx/%s", lt_odd_files[i]);
			add_row(&l, (uint64_t)i, i % 2, p);
		}
		pack_list(&l, "odd", PACK_KEEP, 1, 0, lt_odd);
		ds_list_release(&l);
	}

	/* 20 sample records with truncated_eoi.jpg at LT_BAD_AT. */
	if (splits & LT_SPLIT_BAD) {
		ds_list_init(&l);
		for (size_t i = 0, k = 0; i < 21; i++) {
			char p[4200];
			if (i == LT_BAD_AT)
				snprintf(p, sizeof(p), "fx/truncated_eoi.jpg");
			else
				snprintf(p, sizeof(p), "sample/%s",
					 scan.items[k++ * 4].path);
			add_row(&l, i, (int32_t)(i % 4), p);
		}
		pack_list(&l, "bad", PACK_KEEP, 1, 0, lt_bad);
		ds_list_release(&l);
	}

	/* ... and with truncated_eoi.jpg at LT_BAD_AT and LT_BAD_AT + 1 */
	if (splits & LT_SPLIT_BAD2) {
		ds_list_init(&l);
		for (size_t i = 0, k = 0; i < 21; i++) {
			char p[4200];
			if (i == LT_BAD_AT || i == LT_BAD_AT + 1)
				snprintf(p, sizeof(p), "fx/truncated_eoi.jpg");
			else
				snprintf(p, sizeof(p), "sample/%s",
					 scan.items[k++ * 4].path);
			add_row(&l, i, (int32_t)(i % 4), p);
		}
		pack_list(&l, "bad2", PACK_KEEP, 1, 0, lt_bad2);
		ds_list_release(&l);
	}

	if (splits & LT_SPLIT_BIG) {
		ds_list_init(&l);
		for (int i = 0; i < 4; i++)
			add_row(&l, (uint64_t)i, i, "fx/big.jpg");
		pack_list(&l, "big", PACK_KEEP, 1, 0, lt_big);
		ds_list_release(&l);
	}
	ds_list_release(&scan);
}

/* ---- epochs ------------------------------------------------------------ */

void lt_epoch_free(lt_epoch_out *e)
{
	free(e->data);
	free(e->labels);
	free(e->idx);
	free(e->pad);
	memset(e, 0, sizeof(*e));
}

void lt_run_epochs(const aug_loader_opts *o, const uint64_t *epochs,
		   int n_epochs, lt_epoch_out *out)
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

void lt_run_epoch(const aug_loader_opts *o, uint64_t epoch, lt_epoch_out *out)
{
	lt_run_epochs(o, &epoch, 1, out);
}

void lt_base_opts(aug_loader_opts *o, const char *manifest, int train,
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

int lt_same_epoch(const lt_epoch_out *a, const lt_epoch_out *b)
{
	return a->rc == 0 && b->rc == 0 && a->n == b->n && a->sb == b->sb &&
	       a->n > 0 && memcmp(a->data, b->data, a->n * a->sb) == 0 &&
	       memcmp(a->labels, b->labels, a->n * sizeof(int32_t)) == 0 &&
	       memcmp(a->idx, b->idx, a->n * sizeof(uint64_t)) == 0 &&
	       memcmp(a->pad, b->pad, a->n) == 0;
}
