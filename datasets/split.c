/*
 * split.c - stratified splits, shuffles and class-balanced subsets.
 *
 * Both ds_split and ds_subset group row numbers by label with a counting
 * sort (O(rows + classes)), shuffle each class's rows with a generator
 * seeded from (seed, purpose, label), mark the chosen rows and then copy
 * them out in input order. Seeding per class keeps a class's choice
 * independent of every other class, so adding a class to a dataset does not
 * reshuffle the others.
 */
#define _GNU_SOURCE
#include "datasets.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stream tags so a split and a subset with one seed do not pick alike. */
#define STREAM_SPLIT 0x73706c6974ull   /* "split" */
#define STREAM_SUBSET 0x737562736574ull /* "subset" */
#define STREAM_SHUFFLE 0x73687566ull    /* "shuf" */

/* Row numbers grouped by label: rows[start[c] .. start[c + 1]). */
typedef struct by_class {
	size_t k;      /* classes */
	size_t *start; /* k + 1 offsets */
	size_t *rows;
} by_class;

static void by_class_release(by_class *b)
{
	free(b->start);
	free(b->rows);
	memset(b, 0, sizeof(*b));
}

static int group_by_class(const ds_list *in, by_class *b, ims_error *err)
{
	memset(b, 0, sizeof(*b));
	/* The groups are indexed by label: bound it first, so one stray
	 * label cannot size them (labels.c). */
	for (size_t i = 0; i < in->count; i++)
		RETURN_IF(in->items[i].label < 0 ||
				  in->items[i].label > DS_LABEL_CEILING,
			  err, IMS_EINVAL,
			  "cannot group rows: row %zu ('%s') has label %d, not in "
			  "0..%d",
			  i, in->items[i].path ? in->items[i].path : "",
			  (int)in->items[i].label, DS_LABEL_CEILING);
	b->k = ds_list_num_classes(in);
	b->start = calloc(b->k + 1, sizeof(size_t));
	b->rows = malloc((in->count ? in->count : 1) * sizeof(size_t));
	if (!b->start || !b->rows) {
		by_class_release(b);
		return ims_fail(err, IMS_ENOMEM, "cannot group rows: out of memory");
	}
	for (size_t i = 0; i < in->count; i++)
		b->start[in->items[i].label + 1]++;
	for (size_t c = 0; c < b->k; c++)
		b->start[c + 1] += b->start[c];
	/* Fill using start[c] as a cursor, then shift the offsets back. */
	for (size_t i = 0; i < in->count; i++)
		b->rows[b->start[in->items[i].label]++] = i;
	for (size_t c = b->k; c > 0; c--)
		b->start[c] = b->start[c - 1];
	b->start[0] = 0;
	return 0;
}

/* Moves k uniformly chosen elements of a[0..n) to the front, in a random
 * order (the first k steps of a forward Fisher-Yates shuffle). */
static void shuffle_prefix(size_t *a, size_t n, size_t k, ims_rng *r)
{
	if (k > n)
		k = n;
	for (size_t i = 0; i < k && i + 1 < n; i++) {
		size_t j = i + (size_t)ims_rng_below(r, n - i);
		size_t t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
}

static int check_empty(const ds_list *l, const char *what, ims_error *err)
{
	RETURN_IF(l->count || l->n_classes, err, IMS_EINVAL,
		  "cannot fill the %s list: it is not empty", what);
	return 0;
}

/* Copies the rows of in whose mark equals want, in input order. */
static int copy_marked(const ds_list *in, const unsigned char *mark,
		       unsigned char want, size_t n, ds_list *out, ims_error *err)
{
	FORWARD_IF_ERR(ds_list_copy_classes(out, in, err));
	FORWARD_IF_ERR(ds_list_reserve(out, n, err));
	for (size_t i = 0; i < in->count; i++) {
		if (mark[i] != want)
			continue;
		const ds_entry *e = &in->items[i];
		FORWARD_IF_ERR(ds_list_append(out, e->index, e->label, e->extra,
					      e->n_extra, e->path, err));
	}
	return 0;
}

/* round(n * ratio), robust to products like 0.3 * 10 = 2.9999999999999996. */
static size_t round_share(size_t n, double ratio)
{
	double v = floor((double)n * ratio + 0.5 + 1e-9);
	if (v < 0)
		return 0;
	if (v > (double)n)
		return n;
	return (size_t)v;
}

size_t ds_split_class_needs(double ratio)
{
	if (!(ratio > 0 && ratio < 1))
		return 0;
	/* from the rounding's own threshold, then held to round_share */
	size_t n = (size_t)ceil((0.5 - 1e-9) / ratio);
	while (n > 1 && round_share(n - 1, ratio) >= 1)
		n--;
	while (round_share(n, ratio) < 1)
		n++;
	return n < 2 ? 2 : n; /* a class keeps one train row */
}

int ds_check_split_ratios(double val_ratio, double test_ratio, ims_error *err)
{
	/* written as NaN-proof tests: !(x >= 0) also refuses NaN */
	RETURN_IF(!(val_ratio >= 0 && val_ratio < 1), err, IMS_EINVAL,
		  "--val-ratio must be in [0, 1), got %g", val_ratio);
	RETURN_IF(!(test_ratio >= 0 && test_ratio < 1), err, IMS_EINVAL,
		  "--test-ratio must be in [0, 1), got %g", test_ratio);
	RETURN_IF(!(val_ratio + test_ratio < 1), err, IMS_EINVAL,
		  "--val-ratio plus --test-ratio must be below 1, got %g + %g",
		  val_ratio, test_ratio);
	return 0;
}

int ds_split(const ds_list *in, double val_ratio, double test_ratio,
	     uint64_t seed, ds_list *train, ds_list *val, ds_list *test,
	     ims_error *err)
{
	RETURN_IF(!(val_ratio >= 0 && val_ratio < 1) ||
			  !(test_ratio >= 0 && test_ratio < 1) ||
			  !(val_ratio + test_ratio < 1),
		  err, IMS_EINVAL,
		  "cannot split: ratios must be in [0, 1) and sum to less than 1 "
		  "(val %g, test %g)",
		  val_ratio, test_ratio);
	RETURN_IF(!train, err, IMS_EINVAL, "cannot split: no train list");
	RETURN_IF(val_ratio > 0 && !val, err, IMS_EINVAL,
		  "cannot split: val ratio %g but no val list", val_ratio);
	RETURN_IF(test_ratio > 0 && !test, err, IMS_EINVAL,
		  "cannot split: test ratio %g but no test list", test_ratio);
	RETURN_IF(train == in || (val && val == in) || (test && test == in) ||
			  (val && (val == train || val == test)) ||
			  (test && test == train),
		  err, IMS_EINVAL, "cannot split: the lists must be distinct");
	FORWARD_IF_ERR(check_empty(train, "train", err));
	if (val)
		FORWARD_IF_ERR(check_empty(val, "val", err));
	if (test)
		FORWARD_IF_ERR(check_empty(test, "test", err));

	enum { TO_TRAIN = 0, TO_VAL = 1, TO_TEST = 2 };
	by_class b;
	FORWARD_IF_ERR(group_by_class(in, &b, err));
	int rc = 0;
	size_t n_out[3] = {0, 0, 0};
	unsigned char *mark = calloc(in->count ? in->count : 1, 1);
	if (!mark)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot split: out of memory");
	for (size_t c = 0; c < b.k; c++) {
		size_t *rows = b.rows + b.start[c];
		size_t n = b.start[c + 1] - b.start[c];
		if (n == 0)
			continue;
		size_t n_test = round_share(n, test_ratio);
		size_t n_val = round_share(n, val_ratio);
		/* Keep one train row: val gives up rows first, then test. */
		while (n_test + n_val >= n && n_val > 0)
			n_val--;
		while (n_test >= n && n_test > 0)
			n_test--;
		ims_rng r;
		ims_rng_seed(&r, seed, ims_hash64(STREAM_SPLIT, c));
		shuffle_prefix(rows, n, n_test + n_val, &r);
		for (size_t i = 0; i < n_test; i++)
			mark[rows[i]] = TO_TEST;
		for (size_t i = n_test; i < n_test + n_val; i++)
			mark[rows[i]] = TO_VAL;
		for (size_t i = n_test + n_val; i < n; i++)
			mark[rows[i]] = TO_TRAIN;
		n_out[TO_TEST] += n_test;
		n_out[TO_VAL] += n_val;
		n_out[TO_TRAIN] += n - n_test - n_val;
	}
	GOTO_IF_ERR(out, rc, copy_marked(in, mark, TO_TRAIN, n_out[TO_TRAIN],
					 train, err));
	if (val)
		GOTO_IF_ERR(out, rc, copy_marked(in, mark, TO_VAL, n_out[TO_VAL],
						 val, err));
	if (test)
		GOTO_IF_ERR(out, rc, copy_marked(in, mark, TO_TEST,
						 n_out[TO_TEST], test, err));
out:
	if (rc < 0) {
		ds_list_release(train);
		if (val)
			ds_list_release(val);
		if (test)
			ds_list_release(test);
	}
	free(mark);
	by_class_release(&b);
	return rc;
}

void ds_list_shuffle(ds_list *l, uint64_t seed)
{
	ims_rng r;
	ims_rng_seed(&r, seed, STREAM_SHUFFLE);
	for (size_t i = l->count; i > 1; i--) {
		size_t j = (size_t)ims_rng_below(&r, i);
		ds_entry t = l->items[i - 1];
		l->items[i - 1] = l->items[j];
		l->items[j] = t;
	}
}

void ds_subset_report_release(ds_subset_report *r)
{
	if (!r)
		return;
	free(r->wanted);
	free(r->available);
	free(r->taken);
	memset(r, 0, sizeof(*r));
}

/* "'cat' (label 3)" or "label 3" when the list has no name for it. */
static void class_label(const ds_list *l, size_t c, char *out, size_t len)
{
	if (c < l->n_classes && l->classes[c])
		snprintf(out, len, "'%s' (label %zu)", l->classes[c], c);
	else
		snprintf(out, len, "label %zu", c);
}

int ds_subset(const ds_list *in, size_t per_class, size_t total,
	      uint64_t seed, int allow_short, ds_list *out,
	      ds_subset_report *report, ims_error *err)
{
	if (report)
		memset(report, 0, sizeof(*report));
	RETURN_IF(per_class == 0 && total == 0, err, IMS_EINVAL,
		  "cannot take a subset: give a count per class or a total");
	RETURN_IF(out == in, err, IMS_EINVAL,
		  "cannot take a subset: the output list is the input list");
	FORWARD_IF_ERR(check_empty(out, "subset", err));

	by_class b;
	FORWARD_IF_ERR(group_by_class(in, &b, err));
	int rc = 0;
	size_t k = b.k;
	unsigned char *mark = NULL;
	ds_subset_report rep = {0};
	rep.n_classes = k;
	rep.wanted = calloc(k ? k : 1, sizeof(size_t));
	rep.available = calloc(k ? k : 1, sizeof(size_t));
	rep.taken = calloc(k ? k : 1, sizeof(size_t));
	mark = calloc(in->count ? in->count : 1, 1);
	if (!rep.wanted || !rep.available || !rep.taken || !mark)
		GOTO_FAIL(done, rc, err, IMS_ENOMEM,
			  "cannot take a subset: out of memory");
	if (k == 0)
		GOTO_FAIL(done, rc, err, IMS_EINVAL,
			  "cannot take a subset of an empty list");

	size_t n_taken = 0;
	for (size_t c = 0; c < k; c++) {
		size_t n = b.start[c + 1] - b.start[c];
		size_t want = per_class ? per_class
					: total / k + (c < total % k ? 1 : 0);
		rep.wanted[c] = want;
		rep.available[c] = n;
		rep.taken[c] = want < n ? want : n;
		if (n < want)
			rep.short_classes++;
		n_taken += rep.taken[c];
	}
	if (rep.short_classes && !allow_short) {
		/* Name as many short classes as the message holds. */
		char msg[IMS_ERRMSG_MAX];
		int len = snprintf(msg, sizeof(msg),
				   "cannot take the subset: %zu class%s fewer rows "
				   "than wanted:",
				   rep.short_classes,
				   rep.short_classes == 1 ? " has" : "es have");
		size_t listed = 0;
		for (size_t c = 0; c < k; c++) {
			if (rep.available[c] >= rep.wanted[c])
				continue;
			char name[160], item[256];
			class_label(in, c, name, sizeof(name));
			int n = snprintf(item, sizeof(item), "%s %s has %zu of %zu",
					 listed ? "," : "", name, rep.available[c],
					 rep.wanted[c]);
			/* keep room for " and N more" */
			if (len + n + 24 >= (int)sizeof(msg))
				break;
			memcpy(msg + len, item, (size_t)n + 1);
			len += n;
			listed++;
		}
		if (listed < rep.short_classes)
			snprintf(msg + len, sizeof(msg) - (size_t)len, " and %zu more",
				 rep.short_classes - listed);
		GOTO_FAIL(done, rc, err, IMS_ENOTFOUND, "%s", msg);
	}
	for (size_t c = 0; c < k; c++) {
		size_t *rows = b.rows + b.start[c];
		size_t n = b.start[c + 1] - b.start[c];
		ims_rng r;
		ims_rng_seed(&r, seed, ims_hash64(STREAM_SUBSET, c));
		shuffle_prefix(rows, n, rep.taken[c], &r);
		for (size_t i = 0; i < rep.taken[c]; i++)
			mark[rows[i]] = 1;
	}
	GOTO_IF_ERR(done, rc, copy_marked(in, mark, 1, n_taken, out, err));
done:
	if (rc < 0)
		ds_list_release(out);
	if (report && rep.wanted && rep.available && rep.taken)
		*report = rep;
	else
		ds_subset_report_release(&rep);
	free(mark);
	by_class_release(&b);
	return rc;
}
