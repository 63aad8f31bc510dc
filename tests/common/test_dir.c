/*
 * test_dir.c - folder listings (common/dir.c): byte-wise order whatever
 * order the files were made in, hidden names only on request, each
 * entry's kind with links followed, reuse of one listing, and the errors
 * for a missing folder, a file and a FIFO (which must not block).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "test.h"

static void put(const char *dir, const char *name)
{
	char p[4200];
	const int len = snprintf(p, sizeof(p), "%s/%s", dir, name);
	CHECK(len > 0 && (size_t)len < sizeof(p));
	FILE *f = fopen(p, "wb");
	CHECK(f != NULL);
	if (f)
		fclose(f);
}

static void test_order_and_kinds(const char *dir)
{
	char p[4200], q[4200];
	/* made in an order that is neither sorted nor reversed */
	put(dir, "b.jpg");
	put(dir, "B.jpg");
	put(dir, "a10.jpg");
	put(dir, ".hidden");
	put(dir, "a2.jpg");
	snprintf(p, sizeof(p), "%s/sub", dir);
	CHECK_EQ_INT(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/pipe", dir);
	CHECK_EQ_INT(mkfifo(p, 0644), 0);
	snprintf(p, sizeof(p), "%s/link-to-sub", dir);
	CHECK_EQ_INT(symlink("sub", p), 0);
	snprintf(p, sizeof(p), "%s/link-to-file", dir);
	CHECK_EQ_INT(symlink("b.jpg", p), 0);
	snprintf(p, sizeof(p), "%s/dangling", dir);
	CHECK_EQ_INT(symlink("nowhere", p), 0);

	ims_dir_listing ls = {0};
	ims_error e;
	CHECK_EQ_INT(ims_dir_list(dir, 0, &ls, &e), 0);
	static const char *const names[] = {"B.jpg", "a10.jpg", "a2.jpg",
		"b.jpg", "dangling", "link-to-file", "link-to-sub", "pipe", "sub"};
	static const int kinds[] = {IMS_KIND_FILE, IMS_KIND_FILE, IMS_KIND_FILE,
		IMS_KIND_FILE, IMS_KIND_BROKEN, IMS_KIND_FILE, IMS_KIND_FOLDER,
		IMS_KIND_OTHER, IMS_KIND_FOLDER};
	CHECK_EQ_U64(ls.n, 9);
	for (size_t i = 0; i < ls.n && i < 9; i++) {
		CHECK_EQ_STR(ls.e[i].name, names[i]);
		CHECK_EQ_INT(ls.e[i].kind, kinds[i]);
	}
	/* the same listing again, with hidden names: ".", ".." never */
	CHECK_EQ_INT(ims_dir_list(dir, IMS_DIR_HIDDEN, &ls, &e), 0);
	CHECK_EQ_U64(ls.n, 10);
	CHECK_EQ_STR(ls.e[0].name, ".hidden");
	CHECK_EQ_STR(ls.e[1].name, "B.jpg");

	/* by descriptor: same entries, and the caller's descriptor stays
	 * usable */
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	CHECK_EQ_INT(ims_dir_list_fd(fd, dir, 0, &ls, &e), 0);
	CHECK_EQ_U64(ls.n, 9);
	CHECK_EQ_STR(ls.e[8].name, "sub");
	CHECK_EQ_INT(ims_dir_list_fd(fd, dir, 0, &ls, &e), 0);
	CHECK_EQ_U64(ls.n, 9);
	struct stat st;
	CHECK_EQ_INT(fstatat(fd, "sub", &st, 0), 0);
	close(fd);

	CHECK_EQ_INT(ims_path_kind(dir), IMS_KIND_FOLDER);
	snprintf(q, sizeof(q), "%s/b.jpg", dir);
	CHECK_EQ_INT(ims_path_kind(q), IMS_KIND_FILE);
	CHECK_EQ_INT(ims_path_kind(p), IMS_KIND_NONE); /* dangling */
	snprintf(q, sizeof(q), "%s/pipe", dir);
	CHECK_EQ_INT(ims_path_kind(q), IMS_KIND_OTHER);
	CHECK_EQ_INT(ims_path_kind(NULL), IMS_KIND_NONE);

	/* not a folder: a FIFO fails at once instead of waiting for a writer */
	CHECK_EQ_INT(ims_dir_list(q, 0, &ls, &e), IMS_EIO);
	CHECK_EQ_U64(ls.n, 0);
	CHECK(strstr(e.msg, "cannot read folder '") != NULL);
	CHECK(strstr(e.msg, "/pipe': Not a directory") != NULL);
	snprintf(q, sizeof(q), "%s/b.jpg", dir);
	CHECK_EQ_INT(ims_dir_list(q, 0, &ls, &e), IMS_EIO);
	snprintf(q, sizeof(q), "%s/missing", dir);
	CHECK_EQ_INT(ims_dir_list(q, 0, &ls, &e), IMS_ENOTFOUND);
	CHECK(strstr(e.msg, "/missing': No such file or directory") != NULL);
	ims_dir_listing_release(&ls);
	CHECK(ls.e == NULL && ls.n == 0 && ls.names == NULL);
	ims_dir_listing_release(&ls);
	ims_dir_listing_release(NULL);
}

/* Many names: growth past the first blocks keeps every name intact. */
static void test_many(const char *dir)
{
	char sub[4200], name[160];
	snprintf(sub, sizeof(sub), "%s/many", dir);
	CHECK_EQ_INT(mkdir(sub, 0755), 0);
	for (int i = 999; i >= 0; i--) {
		snprintf(name, sizeof(name), "n%04d-%0100d", i, 0);
		put(sub, name);
	}
	ims_dir_listing ls = {0};
	ims_error e;
	CHECK_EQ_INT(ims_dir_list(sub, 0, &ls, &e), 0);
	CHECK_EQ_U64(ls.n, 1000);
	int ok = 1;
	for (size_t i = 0; i < ls.n; i++) {
		snprintf(name, sizeof(name), "n%04d-%0100d", (int)i, 0);
		ok &= strcmp(ls.e[i].name, name) == 0 && ls.e[i].kind == IMS_KIND_FILE;
	}
	CHECK(ok);
	ims_dir_listing_release(&ls);
}

int main(void)
{
	char dir[4096];
	test_tmpdir(dir, sizeof(dir), "dir");
	alarm(60); /* a listing that blocks on the FIFO fails instead of hanging */
	test_order_and_kinds(dir);
	test_many(dir);
	return test_tmp_done(dir, TEST_EXIT());
}
