/*
 * test_split.c - ds_split (stratified), ds_list_shuffle and ds_subset
 * (class-balanced): exact per-class counts, disjoint and covering outputs,
 * input order kept, determinism for a seed, short classes.
 *
 * The lists are built in memory with Caltech-256-like unbalanced class
 * sizes; every row's index is unique so rows can be followed through.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/datasets.h"
#include "test.h"

/* Builds a list with sizes[c] rows of class c, rows of the classes
 * interleaved (as a shuffled list is), index = row number * 10 + 5. */
static void build(ds_list *l, const size_t *sizes, size_t k, int with_names)
{
	ims_error err;
	ds_list_init(l);
	if (with_names) {
		for (size_t c = 0; c < k; c++) {
			char name[64];
			snprintf(name, sizeof(name), "%03zu.class-%zu", c + 1, c);
			CHECK_OK(ds_list_add_class(l, name, NULL, &err), &err);
		}
	}
	size_t left[64], total = 0;
	for (size_t c = 0; c < k; c++) {
		left[c] = sizes[c];
		total += sizes[c];
	}
	size_t row = 0;
	while (row < total) {
		for (size_t c = 0; c < k; c++) {
			if (!left[c])
				continue;
			left[c]--;
			char path[64];
			float extra = (float)row / 4;
			snprintf(path, sizeof(path), "%03zu/img_%05zu.jpg", c + 1, row);
			CHECK_OK(ds_list_append(l, row * 10 + 5, (int32_t)c, &extra, 1, path, &err),
				 &err);
			row++;
		}
	}
}

/* Position of the row with this index in l, or -1. */
static long find(const ds_list *l, uint64_t index)
{
	/* index = row * 10 + 5 in lists from build() */
	for (size_t i = 0; i < l->count; i++)
		if (l->items[i].index == index)
			return (long)i;
	return -1;
}

/* Every row of part is a row of in (same fields), in in's order. */
static void check_sub_ordered(const ds_list *part, const ds_list *in)
{
	long last = -1;
	for (size_t i = 0; i < part->count; i++) {
		long at = find(in, part->items[i].index);
		CHECK(at >= 0);
		if (at < 0)
			continue;
		const ds_entry *a = &part->items[i], *b = &in->items[at];
		CHECK_EQ_INT(a->label, b->label);
		CHECK_EQ_STR(a->path, b->path);
		CHECK(a->path != b->path); /* copied, not shared */
		CHECK_EQ_INT(a->n_extra, b->n_extra);
		if (a->n_extra == 1 && b->n_extra == 1)
			CHECK(a->extra[0] == b->extra[0]);
		CHECK(at > last);
		last = at;
	}
}

static int same_rows(const ds_list *a, const ds_list *b)
{
	if (a->count != b->count)
		return 0;
	for (size_t i = 0; i < a->count; i++)
		if (a->items[i].index != b->items[i].index)
			return 0;
	return 1;
}

static void counts_of(const ds_list *l, size_t *counts, size_t k)
{
	memset(counts, 0, k * sizeof(size_t));
	for (size_t i = 0; i < l->count; i++)
		if ((size_t)l->items[i].label < k)
			counts[l->items[i].label]++;
}

static void release3(ds_list *a, ds_list *b, ds_list *c)
{
	ds_list_release(a);
	ds_list_release(b);
	ds_list_release(c);
}

static void test_split_counts(void)
{
	ims_error err;
	/* Class sizes chosen for the rounding cases:
	 * n=10: test round(1.0)=1, val round(2.0)=2, train 7
	 * n=7:  test round(0.7)=1, val round(1.4)=1, train 5
	 * n=1:  test 0, val 0, train 1
	 * n=25: test round(2.5)=3, val round(5.0)=5, train 17
	 * n=3:  test round(0.3)=0, val round(0.6)=1, train 2
	 * n=0:  nothing (a class with a name but no rows)
	 * n=80: test 8, val 16, train 56 */
	size_t sizes[] = {10, 7, 1, 25, 3, 0, 80};
	size_t want_test[] = {1, 1, 0, 3, 0, 0, 8};
	size_t want_val[] = {2, 1, 0, 5, 1, 0, 16};
	size_t want_train[] = {7, 5, 1, 17, 2, 0, 56};
	const size_t k = 7;
	ds_list in, tr, va, te;
	build(&in, sizes, k, 1);
	ds_list_init(&tr);
	ds_list_init(&va);
	ds_list_init(&te);
	CHECK_OK(ds_split(&in, 0.2, 0.1, 42, &tr, &va, &te, &err), &err);
	size_t c_tr[7], c_va[7], c_te[7];
	counts_of(&tr, c_tr, k);
	counts_of(&va, c_va, k);
	counts_of(&te, c_te, k);
	for (size_t c = 0; c < k; c++) {
		CHECK_EQ_INT(c_tr[c], want_train[c]);
		CHECK_EQ_INT(c_va[c], want_val[c]);
		CHECK_EQ_INT(c_te[c], want_test[c]);
	}
	/* Disjoint and covering: every input row lands in exactly one. */
	CHECK_EQ_INT(tr.count + va.count + te.count, in.count);
	for (size_t i = 0; i < in.count; i++) {
		uint64_t idx = in.items[i].index;
		int n = (find(&tr, idx) >= 0) + (find(&va, idx) >= 0) + (find(&te, idx) >= 0);
		CHECK_EQ_INT(n, 1);
	}
	check_sub_ordered(&tr, &in);
	check_sub_ordered(&va, &in);
	check_sub_ordered(&te, &in);
	/* Class names go to every output. */
	CHECK_EQ_INT(tr.n_classes, k);
	CHECK_EQ_INT(va.n_classes, k);
	CHECK_EQ_INT(te.n_classes, k);
	CHECK_EQ_STR(te.classes[6], "007.class-6");

	/* Same seed, same split; another seed, another split. */
	ds_list tr2, va2, te2;
	ds_list_init(&tr2);
	ds_list_init(&va2);
	ds_list_init(&te2);
	CHECK_OK(ds_split(&in, 0.2, 0.1, 42, &tr2, &va2, &te2, &err), &err);
	CHECK(same_rows(&tr, &tr2) && same_rows(&va, &va2) && same_rows(&te, &te2));
	release3(&tr2, &va2, &te2);
	CHECK_OK(ds_split(&in, 0.2, 0.1, 43, &tr2, &va2, &te2, &err), &err);
	CHECK(!same_rows(&va, &va2));
	CHECK_EQ_INT(va2.count, va.count); /* counts do not depend on the seed */
	CHECK_EQ_INT(te2.count, te.count);
	release3(&tr2, &va2, &te2);

	/* A class's split does not depend on the other classes: drop class
	 * 0 (relabelled rows stay labelled 1..6) and classes 1..6 split the
	 * same way. */
	ds_list fewer;
	ds_list_init(&fewer);
	for (size_t i = 0; i < in.count; i++) {
		const ds_entry *e = &in.items[i];
		if (e->label != 0)
			CHECK_OK(ds_list_append(&fewer, e->index, e->label, e->extra,
						e->n_extra, e->path, &err),
				 &err);
	}
	CHECK_OK(ds_split(&fewer, 0.2, 0.1, 42, &tr2, &va2, &te2, &err), &err);
	size_t va_wo0 = 0;
	for (size_t i = 0; i < va.count; i++)
		if (va.items[i].label != 0) {
			va_wo0++;
			CHECK(find(&va2, va.items[i].index) >= 0);
		}
	CHECK_EQ_INT(va2.count, va_wo0);
	release3(&tr2, &va2, &te2);
	ds_list_release(&fewer);
	release3(&tr, &va, &te);
	ds_list_release(&in);
}

/* The class size a share needs for one row agrees with the split's own
 * rounding: that many rows give one, one fewer none. */
static void test_class_needs(void)
{
	const double ratios[] = {0.5, 0.3, 0.25, 0.2, 0.1, 0.05, 0.025, 0.01, 0.001, 0.7};
	for (size_t k = 0; k < sizeof(ratios) / sizeof(ratios[0]); k++) {
		const double r = ratios[k];
		const size_t need = ds_split_class_needs(r);
		CHECK(need >= 1);
		size_t sizes[2] = {need, need - 1};
		for (int j = 0; j < 2; j++) {
			if (sizes[j] < 2)
				continue; /* a class keeps one train row */
			ds_list in, tr, va;
			build(&in, &sizes[j], 1, 0);
			ds_list_init(&tr);
			ds_list_init(&va);
			ims_error e;
			CHECK_OK(ds_split(&in, r, 0, 1, &tr, &va, NULL, &e), &e);
			CHECK_EQ_U64(va.count, j == 0 ? 1 : 0);
			ds_list_release(&in);
			ds_list_release(&tr);
			ds_list_release(&va);
		}
	}
	CHECK_EQ_U64(ds_split_class_needs(0.01), 50);
	CHECK_EQ_U64(ds_split_class_needs(0.025), 20);
	CHECK_EQ_U64(ds_split_class_needs(0), 0);
}

static void test_split_edges(void)
{
	ims_error err;
	ds_list in, tr, va, te;
	ds_list_init(&tr);
	ds_list_init(&va);
	ds_list_init(&te);

	/* A class keeps one train row: n=1 with val 0.6 (round 1 -> 0);
	 * n=2 with val 0.5 and test 0.4 (1 + 1 -> val gives up its row). */
	size_t s1[] = {1, 2};
	build(&in, s1, 2, 0);
	CHECK_OK(ds_split(&in, 0.6, 0.0, 1, &tr, &va, NULL, &err), &err);
	CHECK_EQ_INT(tr.count, 2); /* class 0: 1 train; class 1: round(1.2)=1 val */
	CHECK_EQ_INT(va.count, 1);
	release3(&tr, &va, &te);
	CHECK_OK(ds_split(&in, 0.5, 0.4, 1, &tr, &va, &te, &err), &err);
	size_t c[2];
	counts_of(&tr, c, 2);
	CHECK_EQ_INT(c[0], 1);
	CHECK_EQ_INT(c[1], 1);
	counts_of(&te, c, 2);
	CHECK_EQ_INT(c[1], 1);
	CHECK_EQ_INT(va.count, 0);
	release3(&tr, &va, &te);

	/* Only val (test NULL) and ratio 0 for both (copy). */
	CHECK_OK(ds_split(&in, 0.0, 0.0, 1, &tr, NULL, NULL, &err), &err);
	CHECK(same_rows(&tr, &in));
	ds_list_release(&tr);

	/* Bad arguments. */
	CHECK_EQ_INT(ds_split(&in, 0.5, 0.5, 1, &tr, &va, &te, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "ratios") != NULL);
	CHECK_EQ_INT(ds_split(&in, 1.0, 0.0, 1, &tr, &va, &te, &err), IMS_EINVAL);
	CHECK_EQ_INT(ds_split(&in, -0.1, 0.0, 1, &tr, &va, &te, &err), IMS_EINVAL);
	CHECK_EQ_INT(ds_split(&in, NAN, 0.0, 1, &tr, &va, &te, &err), IMS_EINVAL);
	CHECK_EQ_INT(ds_split(&in, 0.2, 0.0, 1, &tr, NULL, NULL, &err), IMS_EINVAL);
	CHECK_EQ_INT(ds_split(&in, 0.0, 0.2, 1, &tr, &va, NULL, &err), IMS_EINVAL);
	CHECK_EQ_INT(ds_split(&in, 0.2, 0.0, 1, &in, &va, NULL, &err), IMS_EINVAL);
	CHECK_OK(ds_list_append(&tr, 1, 0, NULL, 0, "x.jpg", &err), &err);
	CHECK_EQ_INT(ds_split(&in, 0.2, 0.0, 1, &tr, &va, NULL, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "not empty") != NULL);
	release3(&tr, &va, &te);
	ds_list_release(&in);
}

static void test_shuffle(void)
{
	ims_error err;
	size_t sizes[] = {50, 30, 20};
	ds_list a, b, orig;
	build(&a, sizes, 3, 0);
	build(&b, sizes, 3, 0);
	build(&orig, sizes, 3, 0);
	ds_list_shuffle(&a, 7);
	ds_list_shuffle(&b, 7);
	CHECK(same_rows(&a, &b));
	CHECK(!same_rows(&a, &orig));
	/* A permutation, and each row moves whole (index, label, extra, path). */
	unsigned char seen[100] = {0};
	for (size_t i = 0; i < a.count; i++) {
		const ds_entry *e = &a.items[i];
		long at = find(&orig, e->index);
		CHECK(at >= 0);
		if (at < 0)
			continue;
		seen[at]++;
		CHECK_EQ_INT(e->label, orig.items[at].label);
		CHECK_EQ_STR(e->path, orig.items[at].path);
		CHECK(e->extra[0] == orig.items[at].extra[0]);
	}
	int once = 1;
	for (size_t i = 0; i < 100; i++)
		once &= seen[i] == 1;
	CHECK(once);
	ds_list_release(&b);
	build(&b, sizes, 3, 0);
	ds_list_shuffle(&b, 8);
	CHECK(!same_rows(&a, &b));
	/* Empty and one-row lists are fine. */
	ds_list e;
	ds_list_init(&e);
	ds_list_shuffle(&e, 1);
	CHECK_OK(ds_list_append(&e, 1, 0, NULL, 0, "x.jpg", &err), &err);
	ds_list_shuffle(&e, 1);
	CHECK_EQ_INT(e.count, 1);
	ds_list_release(&e);
	ds_list_release(&a);
	ds_list_release(&b);
	ds_list_release(&orig);
}

static void test_subset_per_class(void)
{
	ims_error err;
	size_t sizes[] = {40, 12, 30, 25};
	ds_list in, out, out2;
	build(&in, sizes, 4, 1);
	ds_list_shuffle(&in, 3); /* subset must keep whatever order in has */
	ds_list_init(&out);
	ds_list_init(&out2);
	ds_subset_report rep;
	CHECK_OK(ds_subset(&in, 10, 0, 5, 0, &out, &rep, &err), &err);
	size_t c[4];
	counts_of(&out, c, 4);
	for (int i = 0; i < 4; i++)
		CHECK_EQ_INT(c[i], 10);
	CHECK_EQ_INT(out.count, 40);
	check_sub_ordered(&out, &in);
	CHECK_EQ_INT(out.n_classes, 4);
	CHECK_EQ_STR(out.classes[1], "002.class-1");
	CHECK_EQ_INT(rep.n_classes, 4);
	CHECK_EQ_INT(rep.short_classes, 0);
	CHECK_EQ_INT(rep.wanted[2], 10);
	CHECK_EQ_INT(rep.available[1], 12);
	CHECK_EQ_INT(rep.taken[3], 10);
	ds_subset_report_release(&rep);
	ds_subset_report_release(&rep); /* twice is fine */

	/* Deterministic; another seed differs; a smaller count is a subset
	 * of a larger one for the same seed. */
	CHECK_OK(ds_subset(&in, 10, 0, 5, 0, &out2, NULL, &err), &err);
	CHECK(same_rows(&out, &out2));
	ds_list_release(&out2);
	CHECK_OK(ds_subset(&in, 10, 0, 6, 0, &out2, NULL, &err), &err);
	CHECK(!same_rows(&out, &out2));
	ds_list_release(&out2);
	CHECK_OK(ds_subset(&in, 4, 0, 5, 0, &out2, NULL, &err), &err);
	CHECK_EQ_INT(out2.count, 16);
	for (size_t i = 0; i < out2.count; i++)
		CHECK(find(&out, out2.items[i].index) >= 0);
	ds_list_release(&out2);

	/* All rows of every class: the whole list, in order. */
	CHECK_OK(ds_subset(&in, 12, 0, 5, 0, &out2, NULL, &err), &err);
	CHECK_EQ_INT(out2.count, 48);
	check_sub_ordered(&out2, &in);
	ds_list_release(&out2);

	/* Short class: an error naming it, the report filled, out empty. */
	CHECK_EQ_INT(ds_subset(&in, 20, 0, 5, 0, &out2, &rep, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "'002.class-1' (label 1) has 12 of 20") != NULL);
	CHECK_EQ_INT(out2.count, 0);
	CHECK_EQ_INT(out2.n_classes, 0);
	CHECK_EQ_INT(rep.short_classes, 1);
	CHECK_EQ_INT(rep.available[1], 12);
	CHECK_EQ_INT(rep.wanted[1], 20);
	ds_subset_report_release(&rep);
	/* ...or all of its rows with allow_short. */
	CHECK_OK(ds_subset(&in, 20, 0, 5, 1, &out2, &rep, &err), &err);
	counts_of(&out2, c, 4);
	CHECK_EQ_INT(c[0], 20);
	CHECK_EQ_INT(c[1], 12);
	CHECK_EQ_INT(c[2], 20);
	CHECK_EQ_INT(rep.short_classes, 1);
	CHECK_EQ_INT(rep.taken[1], 12);
	ds_subset_report_release(&rep);
	ds_list_release(&out2);

	/* A named class with no rows is short too (K = n_classes). */
	CHECK_OK(ds_list_add_class(&in, "005.empty", NULL, &err), &err);
	CHECK_EQ_INT(ds_subset(&in, 5, 0, 5, 0, &out2, &rep, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "'005.empty' (label 4) has 0 of 5") != NULL);
	CHECK_EQ_INT(rep.n_classes, 5);
	ds_subset_report_release(&rep);

	CHECK_EQ_INT(ds_subset(&in, 0, 0, 5, 0, &out2, NULL, &err), IMS_EINVAL);
	CHECK_EQ_INT(ds_subset(&in, 5, 0, 5, 0, &in, NULL, &err), IMS_EINVAL);
	ds_list_release(&out);
	ds_list_release(&in);
}

static void test_subset_total(void)
{
	ims_error err;
	size_t sizes[] = {40, 12, 30, 25, 9};
	ds_list in, out;
	build(&in, sizes, 5, 0); /* no names: labels in messages */
	ds_list_init(&out);
	ds_subset_report rep;
	/* 23 over 5 classes: 4 each, the remainder 3 to labels 0, 1, 2. */
	CHECK_OK(ds_subset(&in, 0, 23, 9, 0, &out, &rep, &err), &err);
	size_t c[5];
	counts_of(&out, c, 5);
	CHECK_EQ_INT(c[0], 5);
	CHECK_EQ_INT(c[1], 5);
	CHECK_EQ_INT(c[2], 5);
	CHECK_EQ_INT(c[3], 4);
	CHECK_EQ_INT(c[4], 4);
	CHECK_EQ_INT(out.count, 23);
	CHECK_EQ_INT(rep.wanted[2], 5);
	CHECK_EQ_INT(rep.wanted[3], 4);
	check_sub_ordered(&out, &in);
	ds_subset_report_release(&rep);
	ds_list_release(&out);

	/* Exact multiple; fewer than the classes (3 over 5: labels 0..2). */
	CHECK_OK(ds_subset(&in, 0, 45, 9, 0, &out, NULL, &err), &err);
	counts_of(&out, c, 5);
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(c[i], 9);
	ds_list_release(&out);
	CHECK_OK(ds_subset(&in, 0, 3, 9, 0, &out, NULL, &err), &err);
	counts_of(&out, c, 5);
	CHECK(c[0] == 1 && c[1] == 1 && c[2] == 1 && c[3] == 0 && c[4] == 0);
	ds_list_release(&out);

	/* 60 over 5 = 12 each: label 4 has 9, short, named by label. */
	CHECK_EQ_INT(ds_subset(&in, 0, 60, 9, 0, &out, &rep, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "label 4 has 9 of 12") != NULL);
	CHECK_EQ_INT(rep.short_classes, 1);
	ds_subset_report_release(&rep);
	CHECK_OK(ds_subset(&in, 0, 60, 9, 1, &out, NULL, &err), &err);
	CHECK_EQ_INT(out.count, 57);
	ds_list_release(&out);
	ds_list_release(&in);

	/* Many short classes: the message stays one bounded line. */
	size_t many[60];
	for (int i = 0; i < 60; i++)
		many[i] = 1;
	build(&in, many, 60, 1);
	CHECK_EQ_INT(ds_subset(&in, 2, 0, 1, 0, &out, &rep, &err), IMS_ENOTFOUND);
	CHECK(strstr(err.msg, "60 classes have fewer rows than wanted") != NULL);
	CHECK(strstr(err.msg, "more") != NULL);
	CHECK(strlen(err.msg) < IMS_ERRMSG_MAX);
	CHECK_EQ_INT(rep.short_classes, 60);
	ds_subset_report_release(&rep);
	ds_list_release(&in);

	/* Empty input. */
	ds_list_init(&in);
	CHECK_EQ_INT(ds_subset(&in, 1, 0, 1, 0, &out, NULL, &err), IMS_EINVAL);
}

/* ImageNet-sized class structure: 1000 classes, linear-time work. */
static void test_large(void)
{
	ims_error err;
	ds_list in, tr, va, sub;
	ds_list_init(&in);
	ds_list_init(&tr);
	ds_list_init(&va);
	ds_list_init(&sub);
	char path[64];
	for (size_t i = 0; i < 300000; i++) {
		snprintf(path, sizeof(path), "n%08zu/%zu.JPEG", i % 1000, i);
		if (ds_list_append(&in, i, (int32_t)(i % 1000), NULL, 0, path, &err) < 0)
			break;
	}
	double t0 = ims_now();
	CHECK_OK(ds_split(&in, 0.2, 0.0, 1, &tr, &va, NULL, &err), &err);
	CHECK_EQ_INT(va.count, 60000);
	CHECK_OK(ds_subset(&tr, 100, 0, 1, 0, &sub, NULL, &err), &err);
	CHECK_EQ_INT(sub.count, 100000);
	ds_list_shuffle(&sub, 1);
	CHECK(ims_now() - t0 < 10.0);
	ds_list_release(&in);
	ds_list_release(&tr);
	ds_list_release(&va);
	ds_list_release(&sub);
}

int main(void)
{
	test_split_counts();
	test_split_edges();
	test_class_needs();
	test_shuffle();
	test_subset_per_class();
	test_subset_total();
	test_large();
	return TEST_EXIT();
}
