/*
 * test_tmp.c - scratch folders of the C tests (test_tmp.h).
 */
#define _GNU_SOURCE
#include "test_tmp.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *test_tmpdir(char *out, size_t len, const char *tag)
{
	const char *base = getenv("IMS_TMP");
	if (!base || !*base)
		base = "/tmp";
	mkdir(base, 0755); /* exists already, mostly */
	int n = snprintf(out, len, "%s/%s-XXXXXX", base, tag);
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "scratch folder name too long: %s/%s-XXXXXX\n", base, tag);
		exit(1);
	}
	if (!mkdtemp(out)) {
		fprintf(stderr, "cannot make a scratch folder '%s': %s\n", out,
			strerror(errno));
		exit(1);
	}
	return out;
}

static int rm_entry(const char *p, const struct stat *st, int flag,
		    struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

void test_rm_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int test_tmp_done(const char *path, int failures)
{
	if (failures == 0)
		test_rm_tree(path);
	else
		fprintf(stderr, "scratch kept in %s\n", path);
	return failures;
}
