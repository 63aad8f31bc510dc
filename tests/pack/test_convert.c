/* test_convert.c - pack_convert replaces a folder's splits all or nothing:
 * a process killed at every step of the switch leaves a folder that never
 * holds splits of two converts, and the next convert finishes the switch;
 * a failure before it leaves the earlier splits as they were. Every
 * convert runs in a child process (killed ones _exit at a step; OpenMP is
 * never started in this one, which forks). */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "datasets/datasets.h"
#include "pack/pack.h"
#include "recordio/recordio.h"
#include "test.h"

static char root[4200];

typedef struct run_spec {
	const char *out;
	int generation; /* 1: old (not shuffled, with a test split), 2: new */
	int force;
	int stop_at;    /* _exit(3) before this switch step; -1 never */
} run_spec;

static void on_step(void *ctx, int step)
{
	const run_spec *r = ctx;
	if (step == r->stop_at)
		_exit(3);
}

/* Runs one convert in a child; its exit status (0 done, 1 failed, 3
 * stopped at r->stop_at). */
static int convert_in_child(const run_spec *r)
{
	pid_t pid = fork();
	if (pid == 0) {
		pack_convert_opts o;
		pack_convert_opts_init(&o);
		o.adapter = &ds_adapter_folder;
		o.root = root;
		o.out_dir = r->out;
		o.dataset.val_ratio = 0.25;
		o.dataset.test_ratio = r->generation == 1 ? 0.25 : 0;
		o.dataset.seed = (uint64_t)r->generation;
		o.no_shuffle = r->generation == 1;
		o.subset[PACK_SPLIT_TRAIN].per_class = r->generation == 1 ? 3 : 4;
		o.pack.threads = 1;
		o.pack.force = r->force;
		o.pack.shards = 2;
		o.switch_step = on_step;
		o.ctx = (void *)r;
		pack_convert_report rep;
		ims_error e;
		int rc = pack_convert(&o, &rep, &e);
		if (rc < 0)
			fprintf(stderr, "  convert (generation %d): %s\n", r->generation, e.msg);
		pack_convert_report_release(&rep);
		_exit(rc < 0 ? 1 : 0);
	}
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

/* The generation of out/name.json: 0 absent, 1 old, 2 new, -1 neither. */
static int generation_of(const char *out, const char *name)
{
	char p[4400];
	snprintf(p, sizeof(p), "%s/%s.json", out, name);
	if (access(p, F_OK) != 0)
		return 0;
	rio_manifest m;
	ims_error e;
	if (rio_manifest_load(p, &m, &e) < 0)
		return -1;
	int g = m.order == RIO_ORDER_LIST ? 1 : m.order == RIO_ORDER_SHUFFLED ? 2 : -1;
	rio_manifest_release(&m);
	return g;
}

/* Every split present opens (shards as the manifest says) and all are of
 * one generation; returns it (0 when none is present). */
static int one_generation(const char *out)
{
	static const char *names[] = {"train", "val", "test"};
	int seen = 0;
	for (int i = 0; i < 3; i++) {
		int g = generation_of(out, names[i]);
		CHECK(g >= 0);
		if (g <= 0)
			continue;
		char p[4400];
		snprintf(p, sizeof(p), "%s/%s.json", out, names[i]);
		rio_reader *r = NULL;
		ims_error e;
		CHECK_OK(rio_reader_open(p, &r, &e), &e);
		rio_reader_close(r);
		if (seen && g != seen)
			fprintf(stderr, "  '%s' mixes splits of two converts\n", out);
		CHECK(!seen || g == seen);
		seen = g;
	}
	return seen;
}

static int entries(const char *dir, const char *suffix)
{
	ims_dir_listing ls = {0};
	int n = 0;
	size_t sl = strlen(suffix);
	if (ims_dir_list(dir, IMS_DIR_HIDDEN, &ls, NULL) == 0)
		for (size_t i = 0; i < ls.n; i++) {
			size_t l = strlen(ls.e[i].name);
			n += l >= sl && strcmp(ls.e[i].name + l - sl, suffix) == 0;
		}
	ims_dir_listing_release(&ls);
	return n;
}

static int is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The new set, complete: train and val of generation 2, no test, no
 * staging folder or lock left. */
static void check_new_set(const char *out)
{
	CHECK_EQ_INT(generation_of(out, "train"), 2);
	CHECK_EQ_INT(generation_of(out, "val"), 2);
	CHECK_EQ_INT(generation_of(out, "test"), 0);
	char p[4400];
	snprintf(p, sizeof(p), "%s/test.lst", out);
	CHECK(access(p, F_OK) != 0);
	snprintf(p, sizeof(p), "%s/.imshard-convert", out);
	CHECK(!is_dir(p));
	CHECK_EQ_INT(entries(out, ".lock"), 0);
	CHECK_EQ_INT(entries(out, ".mdb"), 4);
	uint8_t *text;
	size_t len;
	ims_error e;
	snprintf(p, sizeof(p), "%s/train.lst", out);
	CHECK_OK(ims_read_file(p, &text, &len, 0, &e), &e);
	free(text);
	CHECK_EQ_INT(one_generation(out), 2);
}

int main(void)
{
	ims_error e;
	char tmp[4096];
	test_tmpdir(tmp, sizeof(tmp), "convert");
	snprintf(root, sizeof(root), "%s/images", tmp);
	ds_sample_opts so;
	ds_sample_opts_init(&so);
	so.classes = 3;
	so.per_class = 8;
	so.threads = 1;
	CHECK_OK(ds_sample_write(root, &so, NULL, &e), &e);

	/* A kill before every step of the switch, then a convert again. */
	int steps = 0;
	for (int k = 0; k < 200; k++) {
		char out[4200];
		snprintf(out, sizeof(out), "%s/k%03d", tmp, k);
		run_spec old = {out, 1, 0, -1};
		CHECK_EQ_INT(convert_in_child(&old), 0);
		CHECK_EQ_INT(one_generation(out), 1);
		CHECK_EQ_INT(generation_of(out, "test"), 1);
		run_spec killed = {out, 2, 1, k};
		int st = convert_in_child(&killed);
		if (st == 0) { /* past the last step: done */
			check_new_set(out);
			steps = k;
			break;
		}
		CHECK_EQ_INT(st, 3);
		int g = one_generation(out);
		/* Before the commit (step 0) the old set is whole. */
		if (k == 0) {
			CHECK_EQ_INT(g, 1);
			CHECK_EQ_INT(generation_of(out, "test"), 1);
		}
		/* The next convert finishes the switch first: without --force
		 * it then finds the new splits and refuses. */
		run_spec again = {out, 2, k == 0 || k % 2, -1};
		st = convert_in_child(&again);
		CHECK_EQ_INT(st, again.force ? 0 : 1);
		check_new_set(out);
	}
	/* The switch has a handful of steps, each reached. */
	CHECK(steps > 8);
	fprintf(stderr, "switch steps: %d\n", steps);

	/* A failure before the switch (the last split cannot be packed: its
	 * lock is held) keeps the earlier splits, all of them, untouched. */
	{
		char out[4200], p[4400];
		snprintf(out, sizeof(out), "%s/held", tmp);
		run_spec old = {out, 1, 0, -1};
		CHECK_EQ_INT(convert_in_child(&old), 0);
		snprintf(p, sizeof(p), "%s/train.json", out);
		uint8_t *before;
		size_t before_len;
		CHECK_OK(ims_read_file(p, &before, &before_len, 0, &e), &e);
		rio_lock *l;
		CHECK_OK(rio_lock_take(out, "val", &l, &e), &e);
		run_spec new_set = {out, 2, 1, -1};
		CHECK_EQ_INT(convert_in_child(&new_set), 1);
		rio_lock_release(l);
		CHECK_EQ_INT(one_generation(out), 1);
		CHECK_EQ_INT(generation_of(out, "test"), 1);
		uint8_t *after;
		size_t after_len;
		CHECK_OK(ims_read_file(p, &after, &after_len, 0, &e), &e);
		CHECK(before_len == after_len && memcmp(before, after, after_len) == 0);
		free(before);
		free(after);
		snprintf(p, sizeof(p), "%s/.imshard-convert", out);
		CHECK(!is_dir(p));
		CHECK_EQ_INT(convert_in_child(&new_set), 0);
		check_new_set(out);
	}
	return test_tmp_done(tmp, TEST_EXIT());
}
