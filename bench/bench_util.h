/*
 * bench_util.h - what the bench's baseline programs share: a clock, a
 * growable buffer, reading an im2rec list and reading a whole file. Kept
 * apart from the project's libraries on purpose: the baselines must not
 * use imshard's code, or they would not be baselines.
 */
#ifndef IMSHARD_BENCH_UTIL_H
#define IMSHARD_BENCH_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

static inline double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int grow(unsigned char **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	unsigned char *p = realloc(*buf, need);
	if (!p)
		return -1;
	*buf = p;
	*cap = need;
	return 0;
}

/* The relative paths of an im2rec .lst (index TAB label [TAB label...] TAB
 * relpath: the last field of each line), at most limit of them when
 * limit > 0. NULL when the list cannot be opened (prog names the caller in
 * the message). */
static inline char **read_list(const char *prog, const char *path, long limit, long *n_out)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "%s: cannot open list '%s': %s\n", prog, path,
			strerror(errno));
		return NULL;
	}
	char **paths = NULL;
	long n = 0, cap = 0;
	char *line = NULL;
	size_t line_cap = 0;
	ssize_t len;
	while ((len = getline(&line, &line_cap, f)) > 0 && (limit <= 0 || n < limit)) {
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		char *tab = strrchr(line, '\t');
		if (!tab || !tab[1])
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			char **p = realloc(paths, (size_t)cap * sizeof(*p));
			if (!p)
				break;
			paths = p;
		}
		paths[n++] = strdup(tab + 1);
	}
	free(line);
	fclose(f);
	*n_out = n;
	return paths;
}

static inline int read_file(const char *path, unsigned char **buf, size_t *cap, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	int rc = -1;
	if (fseek(f, 0, SEEK_END) != 0)
		goto out;
	long len = ftell(f);
	if (len <= 0 || fseek(f, 0, SEEK_SET) != 0)
		goto out;
	if (grow(buf, cap, (size_t)len) != 0)
		goto out;
	if (fread(*buf, 1, (size_t)len, f) != (size_t)len)
		goto out;
	*size = (size_t)len;
	rc = 0;
out:
	fclose(f);
	return rc;
}

#endif
