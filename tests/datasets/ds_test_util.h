/*
 * ds_test_util.h - helpers the dataset adapter tests share: running a
 * fixture generator, and comparisons of lists and notes. Each test file
 * is its own program, so these are static inline. Scratch folders are
 * each test's own, from test_tmp.h (test_tmpdir, test_tmp_done).
 */
#ifndef IMSHARD_DS_TEST_UTIL_H
#define IMSHARD_DS_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/datasets.h"
#include "test.h"

/* Runs a shell command built from fmt and two strings; returns its status. */
static inline int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), fmt, a, b);
	return system(cmd);
}

/* Whether some note holds a (and b, unless NULL). */
static inline int has_note(const ds_dataset *d, const char *a, const char *b)
{
	for (size_t i = 0; i < d->n_notes; i++)
		if (strstr(d->notes[i], a) && (!b || strstr(d->notes[i], b)))
			return 1;
	return 0;
}

/* Same rows (label, index, path) in the same order. */
static inline int same_rows(const ds_list *a, const ds_list *b)
{
	if (!a || !b || a->count != b->count)
		return 0;
	for (size_t i = 0; i < a->count; i++)
		if (a->items[i].label != b->items[i].label ||
		    a->items[i].index != b->items[i].index ||
		    strcmp(a->items[i].path, b->items[i].path) != 0)
			return 0;
	return 1;
}

static inline size_t count_label(const ds_list *l, int32_t label)
{
	size_t n = 0;
	for (size_t i = 0; l && i < l->count; i++)
		n += l->items[i].label == label;
	return n;
}

/* Every row's file exists under root, as written. */
static inline void check_paths_exist(const char *root, const ds_dataset *d)
{
	size_t missing = 0;
	for (int s = 0; s < d->n_splits; s++)
		for (size_t i = 0; i < d->splits[s].list.count; i++) {
			char p[4096];
			struct stat st;
			snprintf(p, sizeof(p), "%s/%s", root, d->splits[s].list.items[i].path);
			missing += stat(p, &st) != 0;
		}
	CHECK_EQ_INT(missing, 0);
}

#endif
