/*
 * test_labels.c - how large a label a list may hold (datasets/labels.c):
 * the bound and why it is what it is, its message, the rows checked
 * against it, and the distinct labels counted without memory per
 * possible label. Reading a .lst through the bound (the line named) is
 * test_lst.c's.
 */
#include <stdint.h>
#include <string.h>

#include "datasets/datasets.h"
#include "test.h"

/* Appends a row of label; the first failure is a failed check. */
static int appended_ok = 1;
static void append(ds_list *l, int32_t label)
{
	ims_error err;
	if (ds_list_append(l, l->count, label, NULL, 0, "x.jpg", &err) && appended_ok) {
		appended_ok = 0;
		CHECK_EQ_STR(err.msg, "");
	}
}

/* A row's label set past what ds_list_append accepts (a caller that
 * filled the rows itself). */
static void set_label(ds_list *l, size_t row, int32_t label)
{
	l->items[row].label = label;
}

/* Each rule, in the order the header gives them. */
static void test_limit(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	ds_label_bound b;
	append(&l, 0);
	append(&l, 5);
	append(&l, 5);
	/* no declaration: below max(1024, 16 x 2 distinct) */
	CHECK_OK(ds_label_limit(&l, DS_LABEL_AUTO, &b, &err), &err);
	CHECK_EQ_INT(b.why, DS_BOUND_SPREAD);
	CHECK_EQ_INT(b.limit, DS_LABEL_FREE - 1);
	CHECK_EQ_U64(b.distinct, 2);
	/* --max-label N: N, also above the spread's bound and at the ceiling */
	CHECK_OK(ds_label_limit(&l, 4, &b, &err), &err);
	CHECK_EQ_INT(b.why, DS_BOUND_MAX_LABEL);
	CHECK_EQ_INT(b.limit, 4);
	CHECK_OK(ds_label_limit(&l, DS_LABEL_CEILING, &b, &err), &err);
	CHECK_EQ_INT(b.why, DS_BOUND_MAX_LABEL);
	CHECK_EQ_INT(b.limit, DS_LABEL_CEILING);
	/* out of range max_label */
	CHECK_EQ_INT(ds_label_limit(&l, DS_LABEL_CEILING + 1LL, &b, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "a largest label of 1048576 is not in 0..1048575") != NULL);
	CHECK_EQ_INT(ds_label_limit(&l, -3, &b, &err), IMS_EINVAL);
	/* DS_LABEL_ANY: any int32 */
	CHECK_OK(ds_label_limit(&l, DS_LABEL_ANY, &b, &err), &err);
	CHECK_EQ_INT(b.why, DS_BOUND_ANY);
	CHECK_EQ_INT(b.limit, INT32_MAX);
	/* class names: one per label */
	CHECK_OK(ds_list_add_class(&l, "cat", NULL, &err), &err);
	CHECK_OK(ds_list_add_class(&l, "dog", NULL, &err), &err);
	CHECK_OK(ds_label_limit(&l, DS_LABEL_AUTO, &b, &err), &err);
	CHECK_EQ_INT(b.why, DS_BOUND_CLASSES);
	CHECK_EQ_INT(b.limit, 1);
	CHECK_EQ_U64(b.n_classes, 2);
	ds_list_release(&l);
	/* 100 distinct labels: the spread (1600) passes the free 1024 */
	for (int i = 0; i < 100; i++)
		append(&l, i * 3);
	CHECK_OK(ds_label_limit(&l, DS_LABEL_AUTO, &b, &err), &err);
	CHECK_EQ_INT(b.why, DS_BOUND_SPREAD);
	CHECK_EQ_INT(b.limit, 1599);
	ds_list_release(&l);
	/* 70,000 distinct labels: the spread is cut at the ceiling, and says so */
	for (int i = 0; i < 70000; i++)
		append(&l, i);
	CHECK_OK(ds_label_limit(&l, DS_LABEL_AUTO, &b, &err), &err);
	CHECK_EQ_INT(b.why, DS_BOUND_CEILING);
	CHECK_EQ_INT(b.limit, DS_LABEL_CEILING);
	ds_list_release(&l);
}

/* The message names the rule that refused, without a row. */
static void test_refuse(void)
{
	ims_error err;
	ds_label_bound b = {.limit = 6, .why = DS_BOUND_MAX_LABEL};
	CHECK_EQ_INT(ds_label_refuse(&b, 7, &err), IMS_EINVAL);
	CHECK_EQ_STR(err.msg, "label 7 is above --max-label 6");
	b = (ds_label_bound){.limit = 1, .why = DS_BOUND_CLASSES, .n_classes = 2};
	CHECK_EQ_INT(ds_label_refuse(&b, 2, &err), IMS_EINVAL);
	CHECK(strncmp(err.msg, "label 2 has no class name: the class names give 2 "
			       "(labels 0 to 1); give the classes file", 88) == 0);
	b = (ds_label_bound){.limit = 1023, .why = DS_BOUND_SPREAD, .distinct = 1};
	CHECK_EQ_INT(ds_label_refuse(&b, 99999999, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "label 99999999 is far beyond the 1 distinct label of "
			      "the list (without class names, labels stay below 1024)") != NULL);
	b.distinct = 3;
	CHECK_EQ_INT(ds_label_refuse(&b, 5000, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "the 3 distinct labels of the list") != NULL);
	b = (ds_label_bound){.limit = DS_LABEL_CEILING, .why = DS_BOUND_CEILING};
	CHECK_EQ_INT(ds_label_refuse(&b, DS_LABEL_CEILING + 1, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "label 1048576 is above 1048575, the largest class id") != NULL);
}

/* Rows first..count-1 checked against the whole list's bound. */
static void test_check_rows(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	append(&l, 3);
	CHECK_OK(ds_list_check_labels(&l, 0, DS_LABEL_AUTO, NULL, &err), &err);
	append(&l, 4096);
	size_t bad = 99;
	CHECK_EQ_INT(ds_list_check_labels(&l, 0, DS_LABEL_AUTO, &bad, &err), IMS_EINVAL);
	CHECK_EQ_U64(bad, 1);
	CHECK(strstr(err.msg, "label 4096 is far beyond the 2 distinct labels") != NULL);
	/* rows before first are not checked, but count toward the bound */
	append(&l, 7);
	CHECK_OK(ds_list_check_labels(&l, 2, DS_LABEL_AUTO, NULL, &err), &err);
	/* a negative label, however it got there */
	append(&l, 0);
	set_label(&l, 3, -1);
	bad = 99;
	CHECK_EQ_INT(ds_list_check_labels(&l, 2, DS_LABEL_AUTO, &bad, &err), IMS_EINVAL);
	CHECK_EQ_U64(bad, 3);
	CHECK_EQ_STR(err.msg, "label -1 is negative");
	ds_list_release(&l);
	/* DS_LABEL_ANY reads any int32; the automatic rule then refuses it */
	append(&l, INT32_MAX);
	CHECK_OK(ds_list_check_labels(&l, 0, DS_LABEL_ANY, NULL, &err), &err);
	bad = 99;
	CHECK_EQ_INT(ds_list_check_labels(&l, 0, DS_LABEL_AUTO, &bad, &err), IMS_EINVAL);
	CHECK_EQ_U64(bad, 0);
	ds_list_release(&l);
}

/* Distinct labels: negative ones left out; the set grows past its first
 * size and keeps every label once. */
static void test_distinct(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	size_t distinct = 99;
	CHECK_OK(ds_list_distinct_labels(&l, &distinct, &err), &err);
	CHECK_EQ_U64(distinct, 0);
	append(&l, 0);
	append(&l, 0);
	append(&l, 0);
	set_label(&l, 0, -1);
	CHECK_OK(ds_list_distinct_labels(&l, &distinct, &err), &err);
	CHECK_EQ_U64(distinct, 1);
	ds_list_release(&l);
	for (int i = 0; i < 5000; i++)
		append(&l, (i * 7919) % 5000);
	for (int i = 0; i < 5000; i++)
		append(&l, i);
	CHECK_OK(ds_list_distinct_labels(&l, &distinct, &err), &err);
	CHECK_EQ_U64(distinct, 5000);
	append(&l, INT32_MAX);
	CHECK_OK(ds_list_distinct_labels(&l, &distinct, &err), &err);
	CHECK_EQ_U64(distinct, 5001);
	ds_list_release(&l);
}

int main(void)
{
	test_limit();
	test_refuse();
	test_check_rows();
	test_distinct();
	CHECK(appended_ok);
	return TEST_EXIT();
}
