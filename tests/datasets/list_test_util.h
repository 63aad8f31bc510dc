/*
 * list_test_util.h - what test_lst.c and test_classes.c share: a scratch
 * folder, paths inside it, and files written and read back as text. Each
 * test file is its own program, so these are static.
 */
#ifndef IMSHARD_LIST_TEST_UTIL_H
#define IMSHARD_LIST_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "test.h"

/* The program's scratch folder, made by make_tmpdir; main ends with
 * test_tmp_done(tmpdir, ...). */
static char tmpdir[1024];

static inline void make_tmpdir(const char *tag)
{
	test_tmpdir(tmpdir, sizeof(tmpdir), tag);
}

/* tmpdir/name, in one of eight buffers used in turn. */
static inline const char *tmp_path(const char *name)
{
	static char buf[8][4200];
	static int slot;
	char *p = buf[slot++ % 8];
	snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
	return p;
}

static inline void write_text(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		exit(1);
	}
	fwrite(text, 1, len, f);
	fclose(f);
}

/* The file's text (up to 64 KiB) in a static buffer, or NULL. */
static inline char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static inline int file_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

#endif
