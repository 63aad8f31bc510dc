/*
 * rep_test_util.h - what the report tests share: a scratch folder, writing
 * files into it, and the fixture runs whose figures the tests know by hand.
 * Each test file is its own program, so these are static inline. Scratch
 * folders come from test_tmp.h (test_tmpdir, test_rm_tree).
 *
 * The fixtures (batch 10 per rank, 5 steps per logged interval):
 *
 *   run_a: 1 rank. Intervals at 50 (warm-up), 100, 100 images/s; steady
 *     speed 100, step 100 ms (wait 1, compute 95, comm 0); train_s 2.5,
 *     images 150, val_s 0.2, checkpoint_s 0.1. Split: compute 0.95, wait
 *     0.01, comm 0, other 0.04, warm-up 1.0, validation 0.2, checkpoints
 *     0.1, rest 0.2. Validation top-1 0.5 after epoch 0 (wall 2.2).
 *   run_b: 2 ranks, same job (different seed and lr). Rank 0 at 40, 80, 80
 *     images/s (steady: wait 1, compute 95, comm 29 ms), rank 1 at 40, 60,
 *     60 (wait 1, compute 100, comm 60 ms); speed 70, total 140; busy_s
 *     1.8 and 2.4 (max/min 4/3); train_s 4.0, images 300 (twice run_a's),
 *     val_s 0.3, checkpoint_s 0.1. Top-1 0.3 after epoch 0, 0.6 after 1.
 *     Against run_a: speedup_speed 1.4, speedup_time 2 x 2.5 / 4.0 = 1.25
 *     (per image), excesses sum to 4.0 - 5.0 / 1.4.
 *   run_e: 1 rank, batch 20: run_b's global batch (strong scaling).
 */
#ifndef IMSHARD_REP_TEST_UTIL_H
#define IMSHARD_REP_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report/report.h"
#include "test.h"

/* Writes text to dir/name (dir created); exits on failure: a broken
 * fixture is not a test result. path receives the file's path. */
static inline void rep_test_write(const char *dir, const char *name,
				  const char *text, char *path, size_t len)
{
	char p[4096];
	mkdir(dir, 0755);
	int n = snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = n > 0 && (size_t)n < sizeof(p) ? fopen(p, "wb") : NULL;
	if (!f || fwrite(text, 1, strlen(text), f) != strlen(text) || fclose(f)) {
		perror(p);
		exit(1);
	}
	if (path)
		snprintf(path, len, "%s", p);
}

/* dir/sub as a new string in out. */
static inline void rep_test_sub(char *out, size_t len, const char *dir,
				const char *sub)
{
	snprintf(out, len, "%s/%s", dir, sub);
}

#define REP_TEST_OPTIONS(world, batch, lr, seed)                                \
	"\"options\":{\"train\":\"p/train.json\",\"val\":\"p/val.json\",\"epochs\":2," \
	"\"batch_size\":" #batch ",\"lr\":" #lr ",\"lr_peak\":" #lr ",\"model\":\"convnet7\"," \
	"\"size\":32,\"threads\":1,\"world\":" #world ",\"seed\":" #seed ","    \
	"\"optimizer\":\"sgd\",\"nesterov\":false,\"device\":\"cpu\",\"precision\":\"fp32\"," \
	"\"max_steps\":0,\"augment\":\"flip\",\"freeze_bn\":false}"

/* Puts members (a JSON fragment ending in a comma, such as
 * "\"init\":{...},") first into dir's summary.json: a fine-tuned run. */
static inline void rep_test_summary_add(const char *dir, const char *members)
{
	char path[4300], *text = NULL;
	size_t len = 0;
	ims_error err;
	snprintf(path, sizeof(path), "%s/summary.json", dir);
	if (ims_read_file(path, (uint8_t **)&text, &len, 0, &err) < 0 || !text ||
	    text[0] != '{')
		exit(1);
	char *with = malloc(len + strlen(members) + 1);
	if (!with)
		exit(1);
	snprintf(with, len + strlen(members) + 1, "{%s%.*s", members, (int)len - 1, text + 1);
	if (ims_write_file_atomic(path, with, strlen(with), &err) < 0)
		exit(1);
	free(text);
	free(with);
}

static inline void rep_test_run_a(const char *dir)
{
	rep_test_write(dir, "metrics.jsonl",
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":5,\"loss\":2.3,\"accuracy\":0.1,\"lr\":0.1,\"images_per_s\":50,\"data_wait_ms\":2,\"compute_ms\":150,\"comm_ms\":0,\"steps\":5,\"wall_s\":1.0}\n"
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":2.0,\"accuracy\":0.2,\"lr\":0.1,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":95,\"comm_ms\":0,\"steps\":5,\"wall_s\":1.5}\n"
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":15,\"loss\":1.8,\"accuracy\":0.3,\"lr\":0.1,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":95,\"comm_ms\":0,\"steps\":5,\"wall_s\":2.0}\n"
		"{\"type\":\"val\",\"epoch\":0,\"step\":15,\"loss\":1.7,\"top1\":0.5,\"top5\":0.9,\"records\":40,\"wall_s\":2.2,\"val_s\":0.15}\n",
		NULL, 0);
	rep_test_write(dir, "summary.json",
		"{\"world\":1,\"model\":\"convnet7\",\"device\":\"cpu\",\"threads\":1,"
		"\"batch_per_rank\":10,\"global_batch\":10,\"lr_per_rank\":0.1,\"lr_peak\":0.1,"
		"\"epochs\":1,\"steps\":15,\"images\":150,\"wall_s\":2.6,\"train_s\":2.5,"
		"\"startup_s\":0.1,\"images_per_s\":60,\"busy_s\":[1.7],"
		"\"data_wait_s_per_rank\":[0.02],\"comm_s_per_rank\":[0],"
		"\"busy_max_min_ratio\":1,\"data_wait_s\":0.02,\"stall_fraction\":0.008,"
		"\"val_top1\":0.5,\"val_top5\":0.9,\"best_val_top1\":0.5,\"best_epoch\":0,"
		"\"best_wall_s\":2.2,\"val_s\":0.2,\"checkpoint_s\":0.1,"
		REP_TEST_OPTIONS(1, 10, 0.1, 1) "}\n",
		NULL, 0);
}

static inline void rep_test_run_b(const char *dir)
{
	rep_test_write(dir, "metrics.jsonl",
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":5,\"loss\":2.3,\"accuracy\":0.1,\"lr\":0.2,\"images_per_s\":40,\"data_wait_ms\":2,\"compute_ms\":150,\"comm_ms\":50,\"steps\":5,\"wall_s\":1.25}\n"
		"{\"type\":\"train\",\"rank\":1,\"epoch\":0,\"step\":5,\"loss\":2.3,\"accuracy\":0.1,\"lr\":0.2,\"images_per_s\":40,\"data_wait_ms\":2,\"compute_ms\":160,\"comm_ms\":40,\"steps\":5,\"wall_s\":1.25}\n"
		"{\"type\":\"train\",\"rank\":1,\"epoch\":0,\"step\":10,\"loss\":2.0,\"accuracy\":0.2,\"lr\":0.2,\"images_per_s\":60,\"data_wait_ms\":1,\"compute_ms\":100,\"comm_ms\":60,\"steps\":5,\"wall_s\":2.1}\n"
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":2.0,\"accuracy\":0.2,\"lr\":0.2,\"images_per_s\":80,\"data_wait_ms\":1,\"compute_ms\":95,\"comm_ms\":29,\"steps\":5,\"wall_s\":2.1}\n"
		"{\"type\":\"val\",\"epoch\":0,\"step\":10,\"loss\":1.9,\"top1\":0.3,\"top5\":0.8,\"records\":40,\"wall_s\":2.3,\"val_s\":0.14}\n"
		"{\"type\":\"train\",\"rank\":0,\"epoch\":1,\"step\":15,\"loss\":1.8,\"accuracy\":0.3,\"lr\":0.2,\"images_per_s\":80,\"data_wait_ms\":1,\"compute_ms\":95,\"comm_ms\":29,\"steps\":5,\"wall_s\":3.2}\n"
		"{\"type\":\"train\",\"rank\":1,\"epoch\":1,\"step\":15,\"loss\":1.8,\"accuracy\":0.3,\"lr\":0.2,\"images_per_s\":60,\"data_wait_ms\":1,\"compute_ms\":100,\"comm_ms\":60,\"steps\":5,\"wall_s\":3.2}\n"
		"{\"type\":\"val\",\"epoch\":1,\"step\":15,\"loss\":1.5,\"top1\":0.6,\"top5\":0.95,\"records\":40,\"wall_s\":3.9,\"val_s\":0.14}\n",
		NULL, 0);
	rep_test_write(dir, "summary.json",
		"{\"world\":2,\"model\":\"convnet7\",\"device\":\"cpu\",\"threads\":1,"
		"\"batch_per_rank\":10,\"global_batch\":20,\"lr_per_rank\":0.1,\"lr_peak\":0.2,"
		"\"epochs\":2,\"steps\":15,\"images\":300,\"wall_s\":4.3,\"train_s\":4.0,"
		"\"startup_s\":0.3,\"images_per_s\":75,\"busy_s\":[1.8,2.4],"
		"\"data_wait_s_per_rank\":[0.02,0.021],\"comm_s_per_rank\":[0.54,0.8],"
		"\"busy_max_min_ratio\":1.3333333,\"data_wait_s\":0.02,\"stall_fraction\":0.005,"
		"\"val_top1\":0.6,\"val_top5\":0.95,\"best_val_top1\":0.6,\"best_epoch\":1,"
		"\"best_wall_s\":3.9,\"val_s\":0.3,\"checkpoint_s\":0.1,"
		REP_TEST_OPTIONS(2, 10, 0.2, 7) "}\n",
		NULL, 0);
}

static inline void rep_test_run_e(const char *dir)
{
	rep_test_write(dir, "metrics.jsonl",
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":5,\"loss\":2.3,\"accuracy\":0.1,\"lr\":0.1,\"images_per_s\":80,\"data_wait_ms\":2,\"compute_ms\":240,\"comm_ms\":0,\"steps\":5,\"wall_s\":1.25}\n"
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":2.0,\"accuracy\":0.2,\"lr\":0.1,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":190,\"comm_ms\":0,\"steps\":5,\"wall_s\":2.25}\n"
		"{\"type\":\"val\",\"epoch\":0,\"step\":10,\"loss\":1.7,\"top1\":0.45,\"top5\":0.9,\"records\":40,\"wall_s\":2.5,\"val_s\":0.2}\n",
		NULL, 0);
	rep_test_write(dir, "summary.json",
		"{\"world\":1,\"model\":\"convnet7\",\"device\":\"cpu\",\"threads\":1,"
		"\"batch_per_rank\":20,\"global_batch\":20,\"lr_per_rank\":0.1,\"lr_peak\":0.1,"
		"\"epochs\":1,\"steps\":10,\"images\":200,\"wall_s\":2.6,\"train_s\":2.5,"
		"\"startup_s\":0.1,\"images_per_s\":80,\"busy_s\":[2.15],"
		"\"data_wait_s_per_rank\":[0.015],\"comm_s_per_rank\":[0],"
		"\"busy_max_min_ratio\":1,\"data_wait_s\":0.015,\"stall_fraction\":0.006,"
		"\"val_top1\":0.45,\"val_top5\":0.9,\"best_val_top1\":0.45,\"best_epoch\":0,"
		"\"best_wall_s\":2.5,\"val_s\":0.25,\"checkpoint_s\":0,"
		REP_TEST_OPTIONS(1, 20, 0.1, 1) "}\n",
		NULL, 0);
}

#endif
