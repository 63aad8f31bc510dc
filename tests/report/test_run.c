/*
 * test_run.c - reading run folders (report/run.c): every kind of bad line
 * is skipped and named with its file and line; a missing or damaged
 * summary.json still loads what metrics.jsonl holds; GPU lines; old logs
 * without steps/wall_s; the folder errors that do fail; an unknown line
 * type's name cut between characters.
 */
#define _GNU_SOURCE
#include <math.h>
#include <unistd.h>

#include "rep_test_util.h"

static char tmp[4096];

/* Whether some diagnostic holds text. */
static int has_diag(const rep_run *r, const char *text)
{
	for (size_t i = 0; i < r->diags.n; i++)
		if (strstr(r->diags.list[i], text))
			return 1;
	return 0;
}

/* Whether some diagnostic names file:line and holds text. */
static int diag_at(const rep_run *r, const char *file, size_t line,
		   const char *text)
{
	char where[4200];
	snprintf(where, sizeof(where), "%s:%zu: ", file, line);
	for (size_t i = 0; i < r->diags.n; i++)
		if (strncmp(r->diags.list[i], where, strlen(where)) == 0 &&
		    strstr(r->diags.list[i], text))
			return 1;
	return 0;
}

#define GOOD_TRAIN(rank, step)                                                  \
	"{\"type\":\"train\",\"rank\":" #rank ",\"epoch\":0,\"step\":" #step     \
	",\"loss\":2,\"accuracy\":0.5,\"lr\":0.1,\"images_per_s\":100,"          \
	"\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":5,\"wall_s\":1}\n"

static void test_bad_lines(void)
{
	char dir[4200], mpath[4300];
	rep_test_sub(dir, sizeof(dir), tmp, "bad");
	/* line numbers are the point: keep one line per entry */
	static char big[REP_MAX_LINE + 100];
	memset(big, ' ', sizeof(big) - 1);
	memcpy(big, "{\"type\":\"val\"", 13);
	big[sizeof(big) - 3] = '}';
	big[sizeof(big) - 2] = '\n';
	big[sizeof(big) - 1] = '\0';
	char *text = NULL;
	if (asprintf(&text,
		     GOOD_TRAIN(0, 5)                                        /* 1 */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"ste\n"    /* 2 truncated */
		     "[1,2,3]\n"                                             /* 3 */
		     "{\"rank\":0}\n"                                        /* 4 no type */
		     "{\"type\":\"eval\",\"epoch\":0}\n"                     /* 5 unknown */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n" /* 6 no loss */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":\"2\",\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n" /* 7 string */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":null,\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n" /* 8 null */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":NaN,\"accuracy\":0.5}\n" /* 9 NaN literal */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":1e400,\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n" /* 10 inf */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":-3,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n" /* 11 negative */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":2,\"accuracy\":1.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n" /* 12 accuracy > 1 */
		     "{\"type\":\"train\",\"rank\":0.5,\"epoch\":0,\"step\":10,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n" /* 13 fractional rank */
		     "{\"type\":\"train\",\"rank\":99999999,\"epoch\":0,\"step\":10,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n" /* 14 huge rank */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":5,\"wall_s\":1}{\"type\":\"val\"}\n" /* 15 run together */
		     "\n"                                                    /* 16 blank: fine */
		     "   \t \n"                                              /* 17 blank */
		     "{\"type\":\"val\",\"epoch\":0,\"step\":10,\"top1\":0.9,\"top5\":0.5}\n" /* 18 top5 < top1 */
		     "%s"                                                    /* 19 too long */
		     "{\"type\":\"gpu\",\"rank\":0,\"device\":0,\"wall_s\":1,\"util\":140,\"mem_used_mib\":1}\n" /* 20 util > 100 */
		     "{\"type\":\"gpu\",\"rank\":0,\"device\":0,\"wall_s\":1,\"util\":40,\"mem_used_mib\":90,\"mem_total_mib\":80}\n" /* 21 used > total */
		     "{\"type\":7}\n"                                        /* 22 type not a string */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":0}\n" /* 23 steps 0 */
		     GOOD_TRAIN(1, 5)                                        /* 24 */
		     "{\"type\":\"val\",\"epoch\":0,\"step\":10,\"top1\":0.5,\"top5\":0.9,\"loss\":1,\"records\":8,\"wall_s\":2,\"val_s\":0.1}\n" /* 25 */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":20,\"loss\":null,\"accuracy\":null,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":5,\"wall_s\":2}\n" /* 26 fp16: every step skipped, no loss */
		     "{\"type\":\"train\",\"rank\":0,\"epoch\":1,\"step\":15,\"loss\":2",  /* 27 cut, no newline */
		     big) < 0)
		exit(1);
	rep_test_write(dir, "metrics.jsonl", text, mpath, sizeof(mpath));
	free(text);
	/* a NUL byte inside a line, appended by hand (asprintf stops at it) */
	rep_run r;
	ims_error err;
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_INT(r.lines.n_read, 27);
	CHECK_EQ_U64(r.lines.n_train, 3);
	CHECK_EQ_U64(r.lines.n_val, 1);
	CHECK_EQ_U64(r.lines.n_gpu, 0);
	CHECK_EQ_U64(r.diags.n_total, 21);
	CHECK_EQ_U64(r.diags.n, 21);
	CHECK_EQ_U64(r.diags.n_skipped_lines, 21); /* each of them skips its line */
	CHECK(!r.has_summary);
	CHECK_EQ_INT(r.world, 2); /* no summary: 1 + the highest rank */
	CHECK(diag_at(&r, mpath, 2, "not valid JSON"));
	CHECK(diag_at(&r, mpath, 3, "not a JSON object"));
	CHECK(diag_at(&r, mpath, 4, "no \"type\" string"));
	CHECK(diag_at(&r, mpath, 5, "unknown line type 'eval'"));
	CHECK(diag_at(&r, mpath, 6, "train line lacks 'loss'"));
	CHECK(diag_at(&r, mpath, 7, "'loss' is not a number"));
	CHECK(diag_at(&r, mpath, 8, "'loss' is null"));
	CHECK(diag_at(&r, mpath, 9, "not valid JSON"));
	CHECK(diag_at(&r, mpath, 10, "'loss'"));
	CHECK(diag_at(&r, mpath, 11, "'images_per_s' is -3"));
	CHECK(diag_at(&r, mpath, 12, "'accuracy' is 1.5"));
	CHECK(diag_at(&r, mpath, 13, "'rank' is 0.5, not a whole number"));
	CHECK(diag_at(&r, mpath, 14, "'rank' is 1e+08"));
	CHECK(diag_at(&r, mpath, 15, "two lines run together"));
	CHECK(diag_at(&r, mpath, 18, "'top5' 0.5 is below 'top1' 0.9"));
	CHECK(diag_at(&r, mpath, 19, "longer than"));
	CHECK(diag_at(&r, mpath, 20, "'util' is 140"));
	CHECK(diag_at(&r, mpath, 21, "exceeds 'mem_total_mib'"));
	CHECK(diag_at(&r, mpath, 22, "no \"type\" string"));
	CHECK(diag_at(&r, mpath, 23, "'steps' is 0"));
	CHECK(diag_at(&r, mpath, 27, "truncated line"));
	CHECK(!has_diag(&r, ":26:"));
	CHECK(!has_diag(&r, ":16:"));
	CHECK(!has_diag(&r, ":17:"));
	CHECK(!has_diag(&r, ":24:"));
	/* what was kept is what the good lines say */
	CHECK_EQ_INT(r.lines.train[0].rank, 0);
	CHECK_EQ_INT(r.lines.train[1].rank, 1);
	CHECK_EQ_INT(r.lines.train[0].steps, 5);
	CHECK_NEAR(r.lines.train[0].images_per_s, 100, 0);
	CHECK_EQ_U64(r.lines.train[1].line, 24);
	/* both null: an interval with no loss, kept with none (a lone null,
	 * line 8, was NaN or infinite) */
	CHECK_EQ_U64(r.lines.train[2].line, 26);
	CHECK(isnan(r.lines.train[2].loss) && isnan(r.lines.train[2].accuracy));
	CHECK_NEAR(r.lines.train[2].images_per_s, 100, 0);
	CHECK_NEAR(r.lines.val[0].val_s, 0.1, 1e-12);
	CHECK_NEAR(r.lines.val[0].records, 8, 0);
	CHECK_EQ_INT(r.lines.missing, 0);
	rep_run_release(&r);

	/* a NUL byte in a line */
	FILE *f = fopen(mpath, "ab");
	fputs("\n{\"type\":\"val\",\"epoch\":0,", f);
	fputc('\0', f);
	fputs("\"step\":1,\"top1\":0.5}\n", f);
	fclose(f);
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	/* line 27 now ends with the added newline: damaged, not cut */
	CHECK(diag_at(&r, mpath, 27, "not valid JSON"));
	CHECK(diag_at(&r, mpath, 28, "NUL byte"));
	rep_run_release(&r);
}

/* An unknown type's name is cut between characters: the diagnostic stays
 * UTF-8 (before, the cut at 39 bytes fell inside the 'é' at bytes 38-39,
 * leaving a lone lead byte in the page and skipped.csv). */
static void test_long_type_name(void)
{
	char dir[4200], mpath[4300], want[128];
	rep_test_sub(dir, sizeof(dir), tmp, "type");
	rep_test_write(dir, "metrics.jsonl",
		       GOOD_TRAIN(0, 5)
		       "{\"type\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9zz\"}\n"
		       "{\"type\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9\"}\n",
		       mpath, sizeof(mpath));
	rep_run r;
	ims_error err;
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_U64(r.diags.n, 2);
	CHECK_EQ_U64(r.diags.n_skipped_lines, 2);
	for (size_t i = 0; i < r.diags.n; i++)
		CHECK(ims_utf8_valid(r.diags.list[i], NULL));
	/* 38 bytes and "...": the 'é' does not fit in 39 */
	snprintf(want, sizeof(want), "unknown line type '%.38s'...: line skipped",
		 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	CHECK(diag_at(&r, mpath, 2, want));
	/* 39 bytes ending in a whole 'é': kept whole, not marked cut */
	CHECK(diag_at(&r, mpath, 3, "aaa\xc3\xa9': line skipped"));
	rep_run_release(&r);
}

static void test_many_bad_lines(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "many");
	size_t n = 150;
	char *text = calloc(n, 8);
	for (size_t i = 0; i < n; i++)
		strcat(text, "{oops\n");
	rep_test_write(dir, "metrics.jsonl", text, NULL, 0);
	free(text);
	rep_run r;
	ims_error err;
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_U64(r.diags.n, REP_MAX_DIAGS);
	CHECK_EQ_U64(r.diags.n_total, 150);
	CHECK_EQ_U64(r.lines.n_train, 0);
	CHECK_EQ_INT(r.world, 1);
	rep_run_release(&r);
}

static void test_summary(void)
{
	char dir[4200], spath[4300];
	rep_test_sub(dir, sizeof(dir), tmp, "sum");
	rep_test_run_b(dir);
	rep_run r;
	ims_error err;
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK(r.has_summary);
	CHECK_EQ_INT(r.sum.world, 2);
	CHECK_EQ_INT(r.world, 2);
	CHECK_EQ_STR(r.sum.model, "convnet7");
	CHECK_NEAR(r.sum.train_s, 4.0, 0);
	CHECK_NEAR(r.sum.images, 300, 0);
	CHECK(r.sum.busy_s && r.sum.comm_s_per_rank && r.sum.data_wait_s_per_rank);
	if (r.sum.busy_s)
		CHECK_NEAR(r.sum.busy_s[1], 2.4, 0);
	CHECK_EQ_U64(r.diags.n_total, 0);
	/* options as text: numbers, strings, booleans */
	int found = 0;
	for (size_t i = 0; i < r.sum.n_options; i++) {
		if (strcmp(r.sum.options[i].key, "lr") == 0)
			found += strcmp(r.sum.options[i].value, "0.2") == 0;
		if (strcmp(r.sum.options[i].key, "nesterov") == 0)
			found += strcmp(r.sum.options[i].value, "false") == 0;
		if (strcmp(r.sum.options[i].key, "train") == 0)
			found += strcmp(r.sum.options[i].value, "p/train.json") == 0;
	}
	CHECK_EQ_INT(found, 3);
	CHECK_EQ_U64(r.lines.n_train, 6);
	CHECK_EQ_U64(r.lines.n_val, 2);
	rep_run_release(&r);

	/* wrong types, a short per-rank array, a rank beyond world */
	rep_test_write(dir, "summary.json",
		       "{\"world\":2,\"train_s\":\"4\",\"images\":-5,\"busy_s\":[1],"
		       "\"comm_s_per_rank\":[1,\"x\"],\"data_wait_s_per_rank\":[0.1,0.2],"
		       "\"best_epoch\":-1,\"options\":[1],\"model\":7}\n",
		       spath, sizeof(spath));
	char mpath[4300];
	rep_test_write(dir, "metrics.jsonl", GOOD_TRAIN(0, 5) GOOD_TRAIN(3, 5) GOOD_TRAIN(1, 5),
		       mpath, sizeof(mpath));
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK(r.has_summary);
	CHECK(isnan(r.sum.train_s));
	CHECK(isnan(r.sum.images));
	CHECK(isnan(r.sum.best_epoch));
	CHECK(!r.sum.busy_s);
	CHECK(!r.sum.comm_s_per_rank);
	CHECK(r.sum.data_wait_s_per_rank != NULL);
	CHECK(!r.sum.model);
	/* each says what was done with it */
	CHECK(has_diag(&r, "summary.json: 'model' is not a string: ignored"));
	CHECK_EQ_U64(r.sum.n_options, 0);
	CHECK(has_diag(&r, "summary.json: 'train_s' is not a number: ignored"));
	CHECK(has_diag(&r, "summary.json: 'images' is -5"));
	CHECK(has_diag(&r, "summary.json: 'busy_s' is not an array of 2 numbers (one per "
		       "rank): ignored"));
	CHECK(has_diag(&r, "summary.json: 'comm_s_per_rank'[1] is not a number of "
		       "seconds: 'comm_s_per_rank' ignored"));
	CHECK(has_diag(&r, "summary.json: 'options' is not an object: ignored"));
	CHECK(diag_at(&r, mpath, 2, "rank 3, but summary.json says world 2: line skipped"));
	CHECK_EQ_U64(r.lines.n_train, 2);
	rep_run_release(&r);

	/* a summary.json up to REP_MAX_SUMMARY bytes is read; one byte more
	 * is not parsed, named with its size and the limit */
	char *big = malloc(REP_MAX_SUMMARY + 2);
	CHECK(big != NULL);
	if (big) {
		memset(big, ' ', REP_MAX_SUMMARY + 1);
		memcpy(big, "{\"world\":2}", 11);
		big[REP_MAX_SUMMARY] = '\0';
		rep_test_write(dir, "summary.json", big, spath, sizeof(spath));
		CHECK_OK(rep_run_load(&r, dir, &err), &err);
		CHECK(r.has_summary);
		CHECK_EQ_INT(r.sum.world, 2);
		rep_run_release(&r);
		big[REP_MAX_SUMMARY] = ' ';
		big[REP_MAX_SUMMARY + 1] = '\0';
		rep_test_write(dir, "summary.json", big, spath, sizeof(spath));
		CHECK_OK(rep_run_load(&r, dir, &err), &err);
		CHECK(!r.has_summary);
		char want[200];
		snprintf(want, sizeof(want), "summary.json: %u bytes, more than imshard-train "
			 "writes (limit %u bytes): ignored", REP_MAX_SUMMARY + 1, REP_MAX_SUMMARY);
		CHECK(has_diag(&r, want));
		rep_run_release(&r);
		free(big);
	}

	/* not JSON at all: as if absent, and said */
	rep_test_write(dir, "summary.json", "{\"world\":2,\"train_s\":4.0", NULL, 0);
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK(!r.has_summary);
	CHECK(has_diag(&r, "summary.json: not valid JSON"));
	CHECK_EQ_INT(r.world, 4); /* from the lines: ranks 0, 3, 1 */
	rep_run_release(&r);

	/* absent: not a diagnostic, the page says it */
	remove(spath);
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK(!r.has_summary);
	CHECK_EQ_U64(r.diags.n_total, 0);
	CHECK(isnan(r.sum.train_s));
	rep_run_release(&r);
}

static void test_old_and_gpu(void)
{
	char dir[4200];
	rep_test_sub(dir, sizeof(dir), tmp, "old");
	rep_test_write(dir, "metrics.jsonl",
		"{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":5,\"loss\":2,\"accuracy\":0.5,\"lr\":0.1,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5}\n"
		"{\"type\":\"val\",\"epoch\":0,\"step\":5,\"loss\":1.5,\"top1\":0.4,\"top5\":0.9,\"records\":8}\n"
		"{\"type\":\"gpu\",\"rank\":0,\"device\":0,\"wall_s\":0.5,\"util\":87.5,\"mem_used_mib\":5000,\"mem_total_mib\":81920}\n"
		"{\"type\":\"gpu\",\"rank\":1,\"device\":1,\"wall_s\":0.5,\"util\":12,\"mem_used_mib\":3000}\n",
		NULL, 0);
	rep_run r;
	ims_error err;
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_INT(r.lines.missing, REP_MISSING_STEPS | REP_MISSING_WALL |
					REP_MISSING_VAL_WALL | REP_MISSING_VAL_S);
	CHECK_EQ_INT(r.lines.train[0].steps, 0);
	CHECK(isnan(r.lines.train[0].wall_s));
	CHECK_EQ_U64(r.lines.n_gpu, 2);
	CHECK_NEAR(r.lines.gpu[0].util, 87.5, 0);
	CHECK_NEAR(r.lines.gpu[0].mem_total_mib, 81920, 0);
	CHECK(isnan(r.lines.gpu[1].mem_total_mib));
	CHECK_EQ_INT(r.lines.gpu[1].device, 1);
	CHECK_EQ_INT(r.world, 2); /* a GPU line of rank 1 counts too */
	CHECK(!r.parts.wall_goes_back);
	rep_run_release(&r);

	/* a resumed run appended to the same file */
	rep_test_write(dir, "metrics.jsonl", GOOD_TRAIN(0, 5)
		       "{\"type\":\"train\",\"rank\":0,\"epoch\":0,\"step\":10,\"loss\":2,\"accuracy\":0.5,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":5,\"wall_s\":0.4}\n",
		       NULL, 0);
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK(r.parts.wall_goes_back);
	rep_run_release(&r);

	/* empty file: a run with nothing yet */
	rep_test_write(dir, "metrics.jsonl", "", NULL, 0);
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_U64(r.lines.n_read, 0);
	CHECK_EQ_U64(r.lines.n_train + r.lines.n_val + r.lines.n_gpu + r.diags.n_total, 0);
	rep_run_release(&r);
}

static void test_folder_errors(void)
{
	char dir[4200], file[4300];
	rep_run r;
	ims_error err;
	rep_test_sub(dir, sizeof(dir), tmp, "nothing-here");
	CHECK_EQ_INT(rep_run_load(&r, dir, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "nothing-here") != NULL);
	rep_test_sub(dir, sizeof(dir), tmp, "no-metrics");
	rep_test_write(dir, "summary.json", "{}", NULL, 0);
	CHECK_EQ_INT(rep_run_load(&r, dir, &err), IMS_ENOTFOUND);
	char want[4300];
	snprintf(want, sizeof(want), "%s: no metrics.jsonl", dir);
	CHECK(strstr(err.msg, want) == err.msg);
	rep_test_write(dir, "plain", "x", file, sizeof(file));
	CHECK_EQ_INT(rep_run_load(&r, file, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "is not a folder") != NULL);
	/* metrics.jsonl that is a folder (or a FIFO): refused as not a
	 * regular file, not read (a FIFO would block) */
	char sub[4400];
	snprintf(sub, sizeof(sub), "%s/metrics.jsonl", dir);
	mkdir(sub, 0755);
	CHECK_EQ_INT(rep_run_load(&r, dir, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "not a regular file (a folder)") != NULL);
	rmdir(sub);
	CHECK_EQ_INT(mkfifo(sub, 0644), 0);
	CHECK_EQ_INT(rep_run_load(&r, dir, &err), IMS_EFORMAT);
	CHECK(strstr(err.msg, "not a regular file (a FIFO)") != NULL);
	/* release of a zeroed run is fine */
	memset(&r, 0, sizeof(r));
	rep_run_release(&r);
	rep_run_release(NULL);
}

/* imshard-train's epoch and resume lines are known: read past without a
 * diagnostic, the train and val lines around them kept. */
static void test_trainer_lines(void)
{
	char dir[4200], mpath[4300];
	rep_test_sub(dir, sizeof(dir), tmp, "trainer");
	rep_test_write(dir, "metrics.jsonl",
		       GOOD_TRAIN(0, 5)
		       "{\"type\":\"epoch\",\"epoch\":0,\"step\":5,\"bad_records\":2,\"bad_record_indices\":[3,9]}\n"
		       "{\"type\":\"val\",\"epoch\":0,\"step\":5,\"top1\":0.5,\"top5\":0.9,\"loss\":1,\"records\":8,\"bad_records\":1,\"wall_s\":2,\"val_s\":0.1}\n"
		       "{\"type\":\"resume\",\"epoch\":0,\"step\":5,\"epoch_position\":40,\"world_was\":1,\"world\":2}\n"
		       GOOD_TRAIN(0, 10),
		       mpath, sizeof(mpath));
	rep_run r;
	ims_error err;
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_INT(r.lines.n_read, 5);
	CHECK_EQ_U64(r.lines.n_train, 2);
	CHECK_EQ_U64(r.lines.n_val, 1);
	CHECK_EQ_U64(r.diags.n_total, 0);
	rep_run_release(&r);
}

#define TRAIN_AT(rank, step, ips, wall)                                           \
	"{\"type\":\"train\",\"rank\":" #rank ",\"epoch\":0,\"step\":" #step     \
	",\"loss\":2,\"accuracy\":0.5,\"lr\":0.1,\"images_per_s\":" #ips        \
	",\"data_wait_ms\":1,\"compute_ms\":90,\"comm_ms\":5,\"steps\":5,"       \
	"\"wall_s\":" #wall "}\n"
#define GPU_AT(rank, wall)                                                        \
	"{\"type\":\"gpu\",\"rank\":" #rank ",\"device\":0,\"wall_s\":" #wall    \
	",\"util\":50,\"mem_used_mib\":100}\n"

/* A run killed after its checkpoint at step 10 (its lines to step 15 are
 * lost work) and resumed from it with 1 rank instead of 2: the resumed
 * part's lines supersede the killed part's for steps 11..15, and rank 1's
 * lines of the first part belong to the run although summary.json (the
 * last part's) says world 1. */
static void test_resumed_parts(void)
{
	char dir[4200], mpath[4300];
	rep_test_sub(dir, sizeof(dir), tmp, "resumed");
	rep_test_write(dir, "metrics.jsonl",
		       "{\"type\":\"start\",\"run_id\":\"r-1\",\"epoch\":0,\"step\":0,\"world\":2,\"batch\":10}\n"
		       TRAIN_AT(0, 5, 50, 1) TRAIN_AT(1, 5, 50, 1) GPU_AT(0, 1.1)
		       TRAIN_AT(0, 10, 100, 2) TRAIN_AT(1, 10, 100, 2) GPU_AT(0, 2.1)
		       "{\"type\":\"val\",\"epoch\":0,\"step\":10,\"top1\":0.5,\"wall_s\":2.2}\n"
		       /* lost: trained again below (a slow interval) */
		       TRAIN_AT(0, 15, 10, 3) GPU_AT(0, 3.1) TRAIN_AT(1, 15, 10, 3)
		       "{\"type\":\"start\",\"run_id\":\"r-1\",\"epoch\":1,\"step\":10,\"world\":1,\"batch\":10}\n"
		       "{\"type\":\"resume\",\"epoch\":1,\"step\":10,\"epoch_position\":0,\"world_was\":2,\"world\":1}\n"
		       TRAIN_AT(0, 15, 40, 2.6) GPU_AT(0, 2.7) TRAIN_AT(0, 20, 100, 3.1),
		       mpath, sizeof(mpath));
	rep_test_write(dir, "summary.json", "{\"world\":1,\"batch_per_rank\":10}", NULL, 0);
	rep_run r;
	ims_error err;
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_U64(r.diags.n_total, 0);
	CHECK_EQ_U64(r.parts.n, 2);
	CHECK_EQ_INT(r.parts.list[0].world, 2);
	CHECK_EQ_INT(r.parts.list[1].world, 1);
	CHECK_EQ_INT(r.parts.list[1].world_was, 2);
	CHECK(r.parts.list[1].resumed);
	CHECK_EQ_INT((int)r.parts.list[1].step, 10);
	CHECK_EQ_U64(r.parts.list[0].superseded, 2);
	CHECK_EQ_INT((int)r.parts.list[0].superseded_lo, 15);
	CHECK_EQ_INT((int)r.parts.list[0].superseded_hi, 15);
	CHECK_EQ_U64(r.parts.n_superseded, 2);
	CHECK_EQ_U64(r.parts.n_superseded_gpu, 1);
	CHECK_EQ_U64(r.parts.n_superseded_val, 0);
	CHECK_EQ_U64(r.lines.n_train, 6); /* rank 1's first part kept */
	CHECK_EQ_U64(r.lines.n_gpu, 3);
	CHECK_EQ_U64(r.lines.n_val, 1);
	CHECK_EQ_INT(r.parts.n_run_ids, 1);
	CHECK(!r.parts.wall_goes_back);
	CHECK_EQ_INT(r.world, 1);
	/* rank 0's steady speed sees steps 6..20 once, without the warm-up
	 * intervals: the run's first (step 5) and the resumed part's first
	 * (step 15 at 40 images/s, its start-up) */
	CHECK(r.lines.train[0].warmup);
	CHECK(r.lines.train[1].warmup); /* rank 1's first */
	CHECK(!r.lines.train[2].warmup);
	CHECK(!r.lines.train[3].warmup);
	CHECK(r.lines.train[4].warmup); /* the resumed part's first */
	CHECK(!r.lines.train[5].warmup);
	rep_stats st;
	CHECK_OK(rep_stats_compute(&r, -1, &st, &err), &err);
	CHECK_NEAR(st.ranks[0].speed, 100, 1e-9);
	CHECK_EQ_INT(st.ranks[0].warmup_lines, 2);
	CHECK_NEAR(st.ranks[0].warmup_s, 5 * 10 / 50.0 + 5 * 10 / 40.0, 1e-9);
	rep_stats_release(&st);
	rep_run_release(&r);

	/* two runs' start lines in one file: not parts of one run */
	rep_test_write(dir, "metrics.jsonl",
		       "{\"type\":\"start\",\"run_id\":\"r-1\",\"epoch\":0,\"step\":0,\"world\":1}\n"
		       TRAIN_AT(0, 5, 50, 1)
		       "{\"type\":\"start\",\"run_id\":\"r-2\",\"epoch\":0,\"step\":0,\"world\":1}\n"
		       TRAIN_AT(0, 5, 50, 1),
		       NULL, 0);
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_INT(r.parts.n_run_ids, 2);
	rep_run_release(&r);

	/* a part without run_id (an older trainer's) resumed by one that
	 * writes it: one run, as two parts without one are none */
	rep_test_write(dir, "metrics.jsonl",
		       "{\"type\":\"start\",\"epoch\":0,\"step\":0,\"world\":1}\n"
		       TRAIN_AT(0, 5, 50, 1)
		       "{\"type\":\"start\",\"run_id\":\"r-1\",\"epoch\":0,\"step\":5,\"world\":1}\n"
		       "{\"type\":\"resume\",\"epoch\":0,\"step\":5,\"epoch_position\":0,"
		       "\"world_was\":1,\"world\":1}\n"
		       TRAIN_AT(0, 10, 50, 2),
		       NULL, 0);
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_U64(r.parts.n, 2);
	CHECK_EQ_INT(r.parts.n_run_ids, 1);
	rep_run_release(&r);
	rep_test_write(dir, "metrics.jsonl",
		       "{\"type\":\"start\",\"epoch\":0,\"step\":0,\"world\":1}\n"
		       TRAIN_AT(0, 5, 50, 1)
		       "{\"type\":\"start\",\"epoch\":0,\"step\":5,\"world\":1}\n"
		       TRAIN_AT(0, 10, 50, 2),
		       NULL, 0);
	CHECK_OK(rep_run_load(&r, dir, &err), &err);
	CHECK_EQ_U64(r.parts.n, 2);
	CHECK_EQ_INT(r.parts.n_run_ids, 0);
	rep_run_release(&r);
}

int main(void)
{
	test_tmpdir(tmp, sizeof(tmp), "test_run");
	test_bad_lines();
	test_long_type_name();
	test_many_bad_lines();
	test_summary();
	test_old_and_gpu();
	test_folder_errors();
	test_trainer_lines();
	test_resumed_parts();
	if (!test_failures_)
		test_rm_tree(tmp);
	return TEST_EXIT();
}
