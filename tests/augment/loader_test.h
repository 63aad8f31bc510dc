/*
 * loader_test.h - shared by the loader's three test programs:
 * test_loader.c (the epoch: order, rank shares, restarts),
 * test_loader_batches.c (what a batch holds and where it lives) and
 * test_loader_bad.c (damaged records replaced, named, counted); defined
 * in loader_test.c. Names start lt_ (loader test).
 *
 * Splits are built here: the sample dataset (ds_sample_write) packed with
 * pack_run, plus hand-made lists pointing at make_images fixtures. Each
 * program builds the splits it reads, in a scratch folder of its own.
 */
#ifndef IMSHARD_LOADER_TEST_H
#define IMSHARD_LOADER_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "augment/augment.h"

#define LT_MAIN_N 97 /* not divisible by 2, 3 or 4 */
#define LT_BAD_AT 7  /* record index of truncated_eoi.jpg in lt_bad */
#define LT_ODD_N 6

/* The splits lt_setup can build: LT_SPLIT_X leaves its manifest's path in
 * lt_x. */
enum {
	LT_SPLIT_MAIN = 1 << 0,
	LT_SPLIT_RAW = 1 << 1,
	LT_SPLIT_PNG = 1 << 2,
	LT_SPLIT_ODD = 1 << 3,
	LT_SPLIT_BAD = 1 << 4,
	LT_SPLIT_BAD2 = 1 << 5,
	LT_SPLIT_BIG = 1 << 6,
};

extern char lt_tmp[4096];  /* scratch: lt_tmp/fx, lt_tmp/sample, splits */
extern char lt_main[4200]; /* 97 sample records, keep, 4 shards */
extern char lt_raw[4200];  /* same list, raw, resized to 48 */
extern char lt_png[4200];  /* same list, png, resized to 48 */
extern char lt_odd[4200];  /* cmyk, cmyk_adobe, ycck, gray, exif_6, rgb */
extern char lt_bad[4200];  /* 20 sample records + truncated_eoi.jpg */
extern char lt_bad2[4200]; /* 19 sample records + truncated_eoi.jpg twice */
extern char lt_big[4200];  /* big.jpg x 4 */

/* lt_odd's files under lt_tmp/fx, record i being lt_odd_files[i] */
extern const char *const lt_odd_files[LT_ODD_N];

/* Makes the scratch folder $IMS_TMP/<tag>-XXXXXX, the sample dataset in
 * it (and the make_images fixtures, under fx/, when a split of the mask
 * reads them), and packs the splits of the LT_SPLIT_* mask. Set-up, not a
 * test: it runs no checks, so a program's count is its tests' alone, and
 * exits 1 with a line naming the call that failed. */
void lt_setup(const char *tag, unsigned splits);

/* Everything one rank got in one epoch. */
typedef struct lt_epoch_out {
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
} lt_epoch_out;

void lt_epoch_free(lt_epoch_out *e);

/* Opens a loader with o, runs each epoch of epochs[0..n_epochs) and keeps
 * the last one in *out. Checks that every epoch ends as it should. */
void lt_run_epochs(const aug_loader_opts *o, const uint64_t *epochs,
		   int n_epochs, lt_epoch_out *out);
void lt_run_epoch(const aug_loader_opts *o, uint64_t epoch, lt_epoch_out *out);

/* The options every test starts from: seed 11, 2 threads, quiet, a
 * side x side output. */
void lt_base_opts(aug_loader_opts *o, const char *manifest, int train,
		  int batch, int side);

/* 1 when two runs gave the same samples, labels, indices and padding. */
int lt_same_epoch(const lt_epoch_out *a, const lt_epoch_out *b);

#endif
