/* test_common.c - error reports, the clock and file helpers. */
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "test.h"

/* One clock in two units, and deadlines for pthread_cond_timedwait. */
static void test_clock(void)
{
	double s0 = ims_now();
	int64_t n0 = ims_now_ns();
	usleep(20000);
	double s1 = ims_now();
	int64_t n1 = ims_now_ns();
	CHECK(s1 - s0 >= 0.019 && s1 - s0 < 5);
	CHECK(n1 - n0 >= 19000000 && n1 - n0 < 5000000000LL);
	/* the same clock: seconds and nanoseconds agree */
	CHECK_NEAR((double)n1 * 1e-9, s1, 0.01);

	struct timespec now, until;
	clock_gettime(CLOCK_REALTIME, &now);
	ims_deadline(2.75, &until);
	double ahead = (double)(until.tv_sec - now.tv_sec) +
		       1e-9 * (double)(until.tv_nsec - now.tv_nsec);
	CHECK(ahead >= 2.75 && ahead < 2.85);
	CHECK(until.tv_nsec >= 0 && until.tv_nsec < 1000000000);
	ims_deadline(-1, &until); /* the past is now */
	CHECK(until.tv_sec >= now.tv_sec && until.tv_sec <= now.tv_sec + 1);
	ims_deadline(1e300, &until); /* clamped, not overflowed */
	CHECK(until.tv_sec > now.tv_sec + 900000000L);
}

int main(void)
{
	test_clock();
	ims_error e;
	ims_error_clear(&e);
	CHECK_EQ_INT(ims_fail(&e, IMS_EIO, "cannot open '%s': %s", "x", "gone"), IMS_EIO);
	CHECK_EQ_STR(e.msg, "cannot open 'x': gone");
	CHECK_EQ_INT(ims_fail_context(&e, "shard %d", 3), IMS_EIO);
	CHECK_EQ_STR(e.msg, "shard 3: cannot open 'x': gone");
	CHECK_EQ_INT(ims_fail(NULL, IMS_ECORRUPT, "ignored"), IMS_ECORRUPT);
	CHECK(strcmp(ims_strerror(IMS_ECORRUPT), "corrupt data") == 0);

	char dir[4096];
	test_tmpdir(dir, sizeof(dir), "common");
	char nested[4200], file[4300];
	snprintf(nested, sizeof(nested), "%s/a/b/c", dir);
	CHECK_OK(ims_mkdir_p(nested, &e), &e);
	CHECK_OK(ims_mkdir_p(nested, &e), &e); /* existing is fine */
	snprintf(file, sizeof(file), "%s/f.txt", nested);
	CHECK_OK(ims_write_file_atomic(file, "hello", 5, &e), &e);
	uint8_t *data;
	size_t len;
	CHECK_OK(ims_read_file(file, &data, &len, 0, &e), &e);
	CHECK_EQ_INT(len, 5);
	CHECK_MEM(data, "hello", 5);
	free(data);
	CHECK_EQ_INT(ims_read_file(file, &data, &len, 3, &e), IMS_ELIMIT);
	char missing[4400];
	snprintf(missing, sizeof(missing), "%s/nope", dir);
	CHECK_EQ_INT(ims_read_file(missing, &data, &len, 0, &e), IMS_ENOTFOUND);
	CHECK(strstr(e.msg, "nope") != NULL);
	/* A file in the way of a folder is an error, not a crash, named for
	 * what it is, in the path or at its end (before: "a file" whatever
	 * it was, and "No such file or directory" below a link to nothing) */
	CHECK(ims_mkdir_p(file, &e) < 0);
	CHECK(strstr(e.msg, "': a regular file of that name exists") != NULL);
	char fifo[4300], below[4400], dangling[4300];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(dangling, sizeof(dangling), "%s/dangling", dir);
	CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
	CHECK_EQ_INT(symlink("nowhere", dangling), 0);
	CHECK_EQ_INT(ims_mkdir_p(fifo, &e), IMS_EIO);
	snprintf(below, sizeof(below), "cannot create folder '%s': a FIFO of that name exists", fifo);
	CHECK_EQ_STR(e.msg, below);
	snprintf(below, sizeof(below), "%s/x/y", fifo);
	CHECK_EQ_INT(ims_mkdir_p(below, &e), IMS_EIO);
	CHECK(strstr(e.msg, "/fifo': a FIFO of that name exists") != NULL);
	snprintf(below, sizeof(below), "%s/x", dangling);
	CHECK_EQ_INT(ims_mkdir_p(below, &e), IMS_EIO);
	snprintf(below, sizeof(below),
		 "cannot create folder '%s': a symbolic link to nothing of that name exists",
		 dangling);
	CHECK_EQ_STR(e.msg, below);
	/* mkdir -p says the outermost folder it made; removal of made
	 * folders stops at the first that is not empty. */
	char *made = NULL;
	char deep[4300], expect[4300];
	snprintf(deep, sizeof(deep), "%s/a/x/y/", dir);
	CHECK_OK(ims_mkdir_p_created(deep, &made, &e), &e);
	snprintf(expect, sizeof(expect), "%s/a/x", dir);
	CHECK(made && strcmp(made, expect) == 0);
	ims_rmdir_created(deep, made);
	struct stat st;
	CHECK(stat(expect, &st) != 0);
	snprintf(expect, sizeof(expect), "%s/a/b/c", dir);
	CHECK(stat(expect, &st) == 0);
	free(made);
	/* a mkdir -p that fails part way (a name too long for the file
	 * system, after two folders were made) takes back what it made
	 * (before: the two stayed, empty, and nothing said which) */
	char partial[4700], top[4300], longname[300];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	snprintf(partial, sizeof(partial), "%s/p/q/%s/r", dir, longname);
	snprintf(top, sizeof(top), "%s/p", dir);
	CHECK(ims_mkdir_p_created(partial, &made, &e) < 0);
	CHECK(made == NULL);
	CHECK(stat(top, &st) != 0);
	CHECK_OK(ims_mkdir_p_created(nested, &made, &e), &e);
	CHECK(made == NULL); /* it existed */
	ims_rmdir_created(nested, made);
	CHECK(stat(nested, &st) == 0);
	char joined[16];
	CHECK_OK(ims_path_join(joined, sizeof(joined), "a", "b", &e), &e);
	CHECK_EQ_STR(joined, "a/b");
	CHECK_OK(ims_path_join(joined, sizeof(joined), "a/", "b", &e), &e);
	CHECK_EQ_STR(joined, "a/b");
	CHECK(ims_path_join(joined, sizeof(joined), "aaaaaaaaaa", "bbbbbbbbbb", &e) < 0);

	/* ims_path_within: a writer's output against the tree it reads,
	 * existing or not, through ".." and links */
	char root[4200], p[4400], link[4300];
	snprintf(root, sizeof(root), "%s/a", dir);
	CHECK(ims_path_within(root, root) == 1);
	snprintf(p, sizeof(p), "%s/a/b", dir);
	CHECK(ims_path_within(p, root) == 1);
	snprintf(p, sizeof(p), "%s/a/new/deeper", dir); /* not made yet */
	CHECK(ims_path_within(p, root) == 1);
	snprintf(p, sizeof(p), "%s/a/b/../../a/x", dir);
	CHECK(ims_path_within(p, root) == 1);
	snprintf(p, sizeof(p), "%s/a/new/../../elsewhere", dir);
	CHECK(ims_path_within(p, root) == 0);
	snprintf(p, sizeof(p), "%s/ab", dir); /* a sibling sharing the prefix */
	CHECK(ims_path_within(p, root) == 0);
	snprintf(p, sizeof(p), "%s", dir);
	CHECK(ims_path_within(p, root) == 0);
	snprintf(link, sizeof(link), "%s/to_b", dir); /* a link into the tree */
	snprintf(p, sizeof(p), "%s/a/b", dir);
	CHECK(symlink(p, link) == 0);
	snprintf(p, sizeof(p), "%s/to_b/out", dir);
	CHECK(ims_path_within(p, root) == 1);
	snprintf(p, sizeof(p), "%s/none/x", dir); /* dir not resolvable */
	CHECK(ims_path_within(root, p) == 0);
	/* ... unless taken as written too */
	snprintf(link, sizeof(link), "%s/none/x/../x/y", dir);
	CHECK(ims_path_within_loosely(link, p) == 1);
	CHECK(ims_path_within_loosely(p, p) == 1);
	snprintf(link, sizeof(link), "%s/none/xy", dir);
	CHECK(ims_path_within_loosely(link, p) == 0);
	CHECK(ims_path_within_loosely(root, p) == 0);
	char cwd[4096];
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(chdir(root) == 0); /* relative paths: from the working folder */
	CHECK(ims_path_within("b/new", root) == 1);
	CHECK(ims_path_within("../elsewhere", root) == 0);
	CHECK(ims_path_within(".", root) == 1);
	CHECK(chdir(cwd) == 0);
	return test_tmp_done(dir, TEST_EXIT());
}
