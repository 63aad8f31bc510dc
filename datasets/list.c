/*
 * list.c - the ds_list container in memory: rows, class names,
 * per-class counts and rows that name one image twice. The files a list
 * is kept in are lst.c's (.lst rows) and classes.c's (class names).
 */
#define _GNU_SOURCE
#include "datasets.h"
#include "datasets/list_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void ds_list_init(ds_list *l)
{
	memset(l, 0, sizeof(*l));
}

void ds_list_free_classes(ds_list *l)
{
	for (size_t i = 0; i < l->n_classes; i++)
		free(l->classes[i]);
	free(l->classes);
	l->classes = NULL;
	l->n_classes = 0;
}

void ds_list_release(ds_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->count; i++) {
		free(l->items[i].path);
		free(l->items[i].extra);
	}
	free(l->items);
	ds_list_free_classes(l);
	ds_list_init(l);
}

int ds_list_reserve(ds_list *l, size_t n, ims_error *err)
{
	if (n <= l->cap)
		return 0;
	RETURN_IF(n > SIZE_MAX / sizeof(ds_entry), err, IMS_ENOMEM,
		  "cannot grow list to %zu rows: out of memory", n);
	ds_entry *items = realloc(l->items, n * sizeof(ds_entry));
	RETURN_IF(!items, err, IMS_ENOMEM,
		  "cannot grow list to %zu rows: out of memory", n);
	l->items = items;
	l->cap = n;
	return 0;
}

int ds_list_append(ds_list *l, uint64_t index, int32_t label,
		   const float *extra, int n_extra, const char *path,
		   ims_error *err)
{
	RETURN_IF(!path, err, IMS_EINVAL, "cannot add a row: no path");
	RETURN_IF(label < 0, err, IMS_EINVAL,
		  "cannot add row '%s': label %d is negative", path, (int)label);
	RETURN_IF(n_extra < 0 || n_extra > DS_MAX_EXTRA_LABELS ||
			  (n_extra > 0 && !extra),
		  err, IMS_EINVAL,
		  "cannot add row '%s': %d extra labels (at most %d)", path,
		  n_extra, DS_MAX_EXTRA_LABELS);
	if (l->count == l->cap) {
		size_t want = l->cap ? l->cap * 2 : 64;
		FORWARD_IF_ERR(ds_list_reserve(l, want, err));
	}
	ds_entry *e = &l->items[l->count];
	e->index = index;
	e->label = label;
	e->n_extra = n_extra;
	e->extra = NULL;
	e->path = strdup(path);
	RETURN_IF(!e->path, err, IMS_ENOMEM, "cannot add row '%s': out of memory",
		  path);
	if (n_extra > 0) {
		e->extra = malloc((size_t)n_extra * sizeof(float));
		if (!e->extra) {
			free(e->path);
			return ims_fail(err, IMS_ENOMEM,
					"cannot add row '%s': out of memory", path);
		}
		memcpy(e->extra, extra, (size_t)n_extra * sizeof(float));
	}
	l->count++;
	return 0;
}

/*
 * l->classes has no capacity field, so its capacity is implied by
 * n_classes: the next power of two, at least 8. ds_list_add_class,
 * ds_classes_read and ds_list_copy_classes are the only writers, which is
 * why the header asks callers not to assign l->classes themselves.
 */
static size_t classes_cap(size_t n)
{
	if (n == 0)
		return 0;
	size_t c = 8;
	while (c < n)
		c <<= 1;
	return c;
}

int ds_list_add_class(ds_list *l, const char *name, int32_t *label,
		      ims_error *err)
{
	RETURN_IF(!name, err, IMS_EINVAL, "cannot add a class: no name");
	RETURN_IF(l->n_classes >= INT32_MAX, err, IMS_ELIMIT,
		  "cannot add class '%s': too many classes", name);
	if (l->n_classes == classes_cap(l->n_classes)) {
		size_t want = l->n_classes ? l->n_classes * 2 : 8;
		char **c = realloc(l->classes, want * sizeof(char *));
		RETURN_IF(!c, err, IMS_ENOMEM,
			  "cannot add class '%s': out of memory", name);
		l->classes = c;
	}
	char *copy = strdup(name);
	RETURN_IF(!copy, err, IMS_ENOMEM, "cannot add class '%s': out of memory",
		  name);
	l->classes[l->n_classes] = copy;
	if (label)
		*label = (int32_t)l->n_classes;
	l->n_classes++;
	return 0;
}

int ds_list_copy_classes(ds_list *dst, const ds_list *src, ims_error *err)
{
	if (dst == src)
		return 0;
	ds_list_free_classes(dst);
	for (size_t i = 0; i < src->n_classes; i++) {
		int rc = ds_list_add_class(dst, src->classes[i], NULL, err);
		if (rc < 0) {
			ds_list_free_classes(dst);
			return rc;
		}
	}
	return 0;
}

size_t ds_list_num_classes(const ds_list *l)
{
	size_t n = l->n_classes;
	for (size_t i = 0; i < l->count; i++)
		if (l->items[i].label >= 0 && (size_t)l->items[i].label + 1 > n)
			n = (size_t)l->items[i].label + 1;
	return n;
}

void ds_list_class_counts(const ds_list *l, size_t *counts)
{
	size_t n = ds_list_num_classes(l);
	if (n)
		memset(counts, 0, n * sizeof(*counts));
	for (size_t i = 0; i < l->count; i++)
		if (l->items[i].label >= 0)
			counts[l->items[i].label]++;
}

/* ---- rows naming one image twice ----------------------------------------- */

/* Whether p has a "." component or an empty one ("a//b", "a/"), which
 * name the same file as the path without them. */
static int needs_tidy(const char *p)
{
	const char *c = p;
	for (;;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if ((n == 0 && c != p) || (n == 1 && c[0] == '.'))
			return 1;
		if (!e)
			return 0;
		c = e + 1;
	}
}

/* p without "." and empty components (a leading '/' kept), malloc'd. */
static char *tidy(const char *p)
{
	char *out = malloc(strlen(p) + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	if (p[0] == '/')
		out[o++] = '/';
	size_t root = o;
	for (const char *c = p;;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n && !(n == 1 && c[0] == '.')) {
			if (o > root)
				out[o++] = '/';
			memcpy(out + o, c, n);
			o += n;
		}
		if (!e)
			break;
		c = e + 1;
	}
	out[o] = '\0';
	return out;
}

static int by_key_then_row(const void *a, const void *b, void *ctx)
{
	const char *const *keys = ctx;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = strcmp(keys[i], keys[j]);
	if (c)
		return c;
	return i < j ? -1 : i > j;
}

int ds_list_find_repeats(const ds_list *l, ds_repeats *r, ims_error *err)
{
	memset(r, 0, sizeof(*r));
	r->first = r->first_of = SIZE_MAX;
	if (l->count < 2)
		return 0;
	int rc = 0;
	size_t n = l->count;
	/* keys[i] is row i's path, or its tidied copy (owned here) */
	const char **keys = calloc(n, sizeof(*keys));
	size_t *order = malloc(n * sizeof(*order));
	if (!keys || !order)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM,
			  "cannot compare the paths of a list of %zu rows: out of memory", n);
	for (size_t i = 0; i < n; i++) {
		const char *p = l->items[i].path;
		order[i] = i;
		keys[i] = needs_tidy(p) ? tidy(p) : p;
		if (!keys[i])
			GOTO_FAIL(out, rc, err, IMS_ENOMEM,
				  "cannot compare the paths of a list of %zu rows: out of memory", n);
	}
	qsort_r(order, n, sizeof(*order), by_key_then_row, keys);
	/* Equal keys sit together, the earliest row first. */
	for (size_t g = 0; g < n;) {
		size_t head = order[g], e = g + 1;
		for (; e < n && strcmp(keys[order[e]], keys[head]) == 0; e++) {
			size_t row = order[e];
			r->rows++;
			r->relabelled += l->items[row].label != l->items[head].label;
			if (row < r->first) {
				r->first = row;
				r->first_of = head;
			}
		}
		g = e;
	}
out:
	if (keys)
		for (size_t i = 0; i < n; i++)
			if (keys[i] != l->items[i].path)
				free((char *)keys[i]);
	free(keys);
	free(order);
	return rc;
}
