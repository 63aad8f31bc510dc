/*
 * test_csv.c - the CSV files (report/csv.c): every file with its header,
 * one row per line or run, the computed figures in scaling.csv, unknown
 * values as empty fields, fields with commas quoted; runs.csv counts the
 * skipped lines apart from the other diagnostics; train.csv of a long run
 * written row by row, byte for byte the rows, without the file in memory.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <sys/resource.h>

#include "rep_test_util.h"

static char tmp[4096];

static char *slurp(const char *dir, const char *name)
{
	char p[4300];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "rb");
	if (!f)
		return NULL;
	char *s = calloc(1, 1 << 20);
	size_t n = fread(s, 1, (1 << 20) - 1, f);
	s[n] = '\0';
	fclose(f);
	return s;
}

static size_t lines(const char *s)
{
	size_t n = 0;
	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/*
 * runs.csv's skipped_lines counts the lines left out, and other_diagnostics
 * the rest: a value ignored is no line skipped (before, skipped_lines
 * counted every diagnostic: 3 here).
 */
static void skips_apart(void)
{
	char c[4200], out[4200], path[4300];
	rep_test_sub(c, sizeof(c), tmp, "c");
	rep_test_sub(out, sizeof(out), tmp, "c.csv");
	rep_test_run_a(c);
	rep_test_summary_add(c, "\"model\":5,"); /* the first is read: ignored */
	snprintf(path, sizeof(path), "%s/metrics.jsonl", c);
	FILE *f = fopen(path, "ab");
	CHECK(f != NULL);
	if (!f)
		return;
	/* not JSON, and a rank the one-rank run does not have */
	fputs("{\"type\":\"train\",\n"
	      "{\"type\":\"train\",\"rank\":3,\"epoch\":0,\"step\":15,\"loss\":1.8,"
	      "\"accuracy\":0.3,\"images_per_s\":100,\"data_wait_ms\":1,\"compute_ms\":95,"
	      "\"comm_ms\":0,\"steps\":5,\"wall_s\":2.0}\n", f);
	fclose(f);
	rep_report r;
	rep_opts o = {NULL, -1};
	rep_report_init(&r, &o);
	ims_error err;
	CHECK_OK(rep_report_add_run(&r, c, &err), &err);
	CHECK_OK(rep_report_analyze(&r, &err), &err);
	CHECK_EQ_U64(r.runs[0].diags.n_total, 3);
	CHECK_EQ_U64(r.runs[0].diags.n_skipped_lines, 2);
	CHECK_OK(rep_report_write_csv(&r, out, &err), &err);
	char *s = slurp(out, "runs.csv");
	/* has_summary 1, skipped_lines 2, parts 1, superseded 0, no init,
	 * other_diagnostics 1 */
	CHECK(s && strstr(s, ",1,2,1,0,,,1\n") != NULL);
	free(s);
	rep_report_release(&r);
}

/* The whole of dir/name (NUL-terminated), or NULL. */
static char *slurp_all(const char *dir, const char *name, size_t *len)
{
	char p[4300];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "rb");
	if (!f)
		return NULL;
	ims_buf b = {0};
	char chunk[1 << 16];
	for (size_t n; (n = fread(chunk, 1, sizeof(chunk), f)) > 0;)
		ims_buf_append(&b, chunk, n);
	fclose(f);
	return ims_buf_take(&b, len);
}

/* This process's mapped address space (VmSize), in bytes; 0 if unknown. */
static uint64_t vm_size(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kb = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb * 1024;
}

/*
 * train.csv of a run of LONG_LINES train lines (about 12 MB of CSV) is
 * written row by row: under an address-space limit 8 MB above what the
 * process has mapped it is still written (before, the whole file was
 * built in memory first and failed: "cannot write '.../train.csv': out of
 * memory"), and its bytes are the header and each line's row in order,
 * none lost or doubled where the rows were flushed.
 */
#define LONG_LINES 200000
static void train_streamed(void)
{
	char run[4200], out[4200], path[4300];
	rep_test_sub(run, sizeof(run), tmp, "long");
	rep_test_sub(out, sizeof(out), tmp, "long.csv");
	rep_test_write(run, "metrics.jsonl", "", path, sizeof(path));
	FILE *f = fopen(path, "wb");
	CHECK(f != NULL);
	if (!f)
		return;
	for (int i = 0; i < LONG_LINES; i++)
		fprintf(f, "{\"type\":\"train\",\"rank\":0,\"epoch\":%d,\"step\":%d,"
			"\"loss\":%.10g,\"accuracy\":0.3,\"lr\":0.1,\"images_per_s\":%d,"
			"\"data_wait_ms\":1,\"compute_ms\":95,\"comm_ms\":0,\"steps\":5,"
			"\"wall_s\":%.10g}\n",
			i / 1000, 5 * (i + 1), 2 + i * 1e-6, i % 977, 0.5 * (i + 1));
	fclose(f);
	rep_report r;
	rep_opts o = {NULL, -1};
	rep_report_init(&r, &o);
	ims_error err;
	CHECK_OK(rep_report_add_run(&r, run, &err), &err);
	CHECK_OK(rep_report_analyze(&r, &err), &err);
	CHECK_EQ_U64(r.runs[0].lines.n_train, LONG_LINES);
	struct rlimit was;
	getrlimit(RLIMIT_AS, &was);
	uint64_t vm = vm_size();
	/* A sanitizer's allocator aborts where malloc would return NULL:
	 * there the limit is left out and only the bytes are checked. */
#if !defined(__SANITIZE_ADDRESS__)
	if (vm && (was.rlim_cur == RLIM_INFINITY || was.rlim_cur > vm + (8u << 20))) {
		struct rlimit cap = {vm + (8u << 20), was.rlim_max};
		CHECK(setrlimit(RLIMIT_AS, &cap) == 0);
	}
#else
	(void)vm;
#endif
	int rc = rep_report_write_csv(&r, out, &err);
	setrlimit(RLIMIT_AS, &was);
	CHECK_OK(rc, &err);

	ims_buf want = {0};
	ims_buf_puts(&want, "run,rank,epoch,step,epoch_position,steps,wall_s,loss,accuracy,"
		     "lr,images_per_s,data_wait_ms,compute_ms,comm_ms\n");
	for (int i = 0; i < LONG_LINES; i++) {
		int epoch = i / 1000, step = 5 * (i + 1);
		ims_buf_printf(&want, "long,0,%d,%d,%.10g,5,%.10g,%.10g,0.3,0.1,%d,1,95,0\n",
			       epoch, step, rep_epoch_position(&r.stats[0], epoch, step),
			       0.5 * (i + 1), 2 + i * 1e-6, i % 977);
	}
	size_t len = 0;
	char *got = slurp_all(out, "train.csv", &len);
	CHECK(got != NULL && !want.oom);
	CHECK_EQ_U64(len, want.len);
	CHECK(got && want.text && len == want.len && memcmp(got, want.text, len) == 0);
	free(got);
	ims_buf_release(&want);
	rep_report_release(&r);
}

int main(void)
{
	test_tmpdir(tmp, sizeof(tmp), "test_csv");
	char a[4200], b[4200], out[4200];
	/* a comma in a folder name must be quoted in every file */
	rep_test_sub(a, sizeof(a), tmp, "a,1");
	rep_test_sub(b, sizeof(b), tmp, "b");
	rep_test_sub(out, sizeof(out), tmp, "csv/deeper");
	rep_test_run_a(a);
	rep_test_run_b(b);
	/* both fine-tuned from one file: still one job to compare */
	static const char *const init =
		"\"init\":{\"path\":\"w/r,18.safetensors\",\"bytes\":8,\"crc32c\":\"0a1b2c3d\"},";
	rep_test_summary_add(a, init);
	rep_test_summary_add(b, init);
	rep_report r;
	rep_opts o = {NULL, 0.55};
	rep_report_init(&r, &o);
	ims_error err;
	CHECK_OK(rep_report_add_run(&r, a, &err), &err);
	CHECK_OK(rep_report_add_run(&r, b, &err), &err);
	CHECK_EQ_INT(rep_report_write_csv(&r, out, &err), IMS_EINVAL); /* not analysed */
	CHECK_OK(rep_report_analyze(&r, &err), &err);
	CHECK_OK(rep_report_write_csv(&r, out, &err), &err);

	char *s = slurp(out, "runs.csv");
	CHECK(s && strncmp(s, "run,dir,world,model,", 20) == 0);
	CHECK_EQ_U64(lines(s), 3);
	CHECK(s && strstr(s, "\n\"a,1\",\"") != NULL);
	/* run b: target 0.55 reached after 2 epochs at 3.9 s */
	CHECK(s && strstr(s, ",1,2,3.9,1,0,1,0,\"w/r,18.safetensors\",0a1b2c3d,0\n") != NULL);
	/* run a: not reached, the epoch and time fields empty */
	CHECK(s && strstr(s, ",0,,,1,0,1,0,\"w/r,18.safetensors\",0a1b2c3d,0\n") != NULL);
	CHECK(s && strstr(s, ",superseded_lines,init,init_crc32c,other_diagnostics\n") != NULL);
	free(s);

	s = slurp(out, "train.csv");
	CHECK(s && strncmp(s, "run,rank,epoch,step,epoch_position,steps,wall_s,", 48) == 0);
	CHECK_EQ_U64(lines(s), 1 + 3 + 6);
	/* b's rank 1 at step 5: position 0.5 of epoch 0 (ends at step 10) */
	CHECK(s && strstr(s, "\nb,1,0,5,0.5,5,1.25,2.3,0.1,0.2,40,2,160,40\n") != NULL);
	free(s);

	s = slurp(out, "val.csv");
	CHECK_EQ_U64(lines(s), 1 + 1 + 2);
	CHECK(s && strstr(s, "\nb,1,15,3.9,0.14,1.5,0.6,0.95,40\n") != NULL);
	free(s);

	s = slurp(out, "gpu.csv");
	CHECK(s && strcmp(s, "run,rank,device,wall_s,util,mem_used_mib,mem_total_mib\n") == 0);
	free(s);

	s = slurp(out, "ranks.csv");
	CHECK_EQ_U64(lines(s), 1 + 1 + 2);
	CHECK(s && strstr(s, "\nb,1,3,1,60,") != NULL);
	free(s);

	s = slurp(out, "terms.csv");
	CHECK_EQ_U64(lines(s), 1 + 2 * REP_N_TERMS);
	CHECK(s && strstr(s, "\nb,communication,0.445\n") != NULL);
	CHECK(s && strstr(s, "\nb,warm-up interval,1.25\n") != NULL);
	free(s);

	s = slurp(out, "scaling.csv");
	CHECK(s && strncmp(s, "group,mode,key,run,world,", 25) == 0);
	CHECK_EQ_U64(lines(s), 1 + 2); /* one group: a and b at the same batch per rank */
	CHECK(s && strstr(s, ",b,2,10,20,300,4,70,140,\"a,1\",1.4,0.7,1.25,0.625,1,") != NULL);
	CHECK(s && strstr(s, "0,batch_per_rank,") != NULL);
	free(s);

	s = slurp(out, "skipped.csv");
	CHECK(s && strcmp(s, "run,diagnostic\n") == 0);
	free(s);

	/* a folder that cannot be made */
	char blocked[4300];
	rep_test_write(tmp, "file", "x", blocked, sizeof(blocked));
	strcat(blocked, "/csv");
	CHECK(rep_report_write_csv(&r, blocked, &err) < 0);
	CHECK(strstr(err.msg, "file") != NULL);

	/* the page and the CSV files all or none: a page that cannot be
	 * written leaves no new CSV file (nor a temporary) */
	char all[4300], page[4400];
	rep_test_sub(all, sizeof(all), tmp, "all");
	snprintf(page, sizeof(page), "%s/r.html", blocked); /* under a file */
	CHECK(rep_report_write(&r, page, all, &err) < 0);
	s = slurp(all, "runs.csv");
	CHECK(s == NULL);
	free(s);
	DIR *d = opendir(all);
	size_t entries = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		entries += e->d_name[0] != '.';
	if (d)
		closedir(d);
	CHECK_EQ_U64(entries, 0);
	snprintf(page, sizeof(page), "%s/r.html", all);
	CHECK_OK(rep_report_write(&r, page, all, &err), &err);
	s = slurp(all, "r.html");
	CHECK(s && strstr(s, "</html>") != NULL);
	free(s);
	s = slurp(all, "skipped.csv");
	CHECK(s && strcmp(s, "run,diagnostic\n") == 0);
	free(s);
	rep_report_release(&r);
	skips_apart();
	train_streamed();
	if (!test_failures_)
		test_rm_tree(tmp);
	return TEST_EXIT();
}
