/*
 * test_list.c - the list in memory (datasets/list.c): rows and their
 * checks, class names, per-class counts, copying the classes, release,
 * rows that repeat an earlier row's path.
 */
#include <stdio.h>

#include "datasets/datasets.h"
#include "test.h"

static void test_basics(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	CHECK_EQ_INT(ds_list_num_classes(&l), 0);
	int32_t lab = -1;
	CHECK_OK(ds_list_add_class(&l, "001.ak47", &lab, &err), &err);
	CHECK_EQ_INT(lab, 0);
	CHECK_OK(ds_list_add_class(&l, "015.bonsai-101", &lab, &err), &err);
	CHECK_EQ_INT(lab, 1);
	/* Enough classes to cross several capacity steps. */
	for (int i = 0; i < 100; i++) {
		char name[32];
		snprintf(name, sizeof(name), "class%03d", i);
		CHECK_OK(ds_list_add_class(&l, name, &lab, &err), &err);
		CHECK_EQ_INT(lab, i + 2);
	}
	CHECK_EQ_INT(l.n_classes, 102);
	CHECK_EQ_STR(l.classes[101], "class099");

	float ex[2] = {0.5f, -2.0f};
	CHECK_OK(ds_list_append(&l, 7, 1, NULL, 0, "015.bonsai-101/015_0001.jpg", &err), &err);
	CHECK_OK(ds_list_append(&l, 8, 150, ex, 2, "x/y.jpg", &err), &err);
	CHECK_OK(ds_list_append(&l, 9, 1, NULL, 0, "015.bonsai-101/015_0002.jpg", &err), &err);
	CHECK_EQ_INT(l.count, 3);
	CHECK_EQ_U64(l.items[1].index, 8);
	CHECK_EQ_INT(l.items[1].n_extra, 2);
	CHECK(l.items[1].extra[1] == -2.0f);
	CHECK_EQ_STR(l.items[0].path, "015.bonsai-101/015_0001.jpg");
	/* max(n_classes, max label + 1) */
	CHECK_EQ_INT(ds_list_num_classes(&l), 151);
	size_t counts[151];
	ds_list_class_counts(&l, counts);
	CHECK_EQ_INT(counts[0], 0);
	CHECK_EQ_INT(counts[1], 2);
	CHECK_EQ_INT(counts[150], 1);

	/* Bad rows are refused and leave the list unchanged. */
	CHECK_EQ_INT(ds_list_append(&l, 1, -1, NULL, 0, "a.jpg", &err), IMS_EINVAL);
	CHECK_EQ_INT(ds_list_append(&l, 1, 0, ex, DS_MAX_EXTRA_LABELS + 1, "a.jpg", &err),
		     IMS_EINVAL);
	CHECK_EQ_INT(ds_list_append(&l, 1, 0, NULL, 0, NULL, &err), IMS_EINVAL);
	CHECK_EQ_INT(l.count, 3);

	ds_list copy;
	ds_list_init(&copy);
	CHECK_OK(ds_list_copy_classes(&copy, &l, &err), &err);
	CHECK_EQ_INT(copy.n_classes, 102);
	CHECK_EQ_INT(copy.count, 0);
	CHECK(copy.classes[0] != l.classes[0]);
	CHECK_EQ_STR(copy.classes[1], "015.bonsai-101");
	ds_list_release(&copy);

	ds_list_release(&l);
	CHECK(l.items == NULL && l.count == 0 && l.classes == NULL);
	ds_list_release(&l); /* twice is fine */
	ds_list_release(NULL);
}

/* Rows naming a path an earlier row names are counted, up to "." and
 * empty components; the first is named with the row it repeats. */
static void test_repeats(void)
{
	ims_error err;
	ds_list l;
	ds_list_init(&l);
	ds_repeats r;
	CHECK_OK(ds_list_find_repeats(&l, &r, &err), &err);
	CHECK_EQ_INT(r.rows, 0);
	CHECK(r.first == SIZE_MAX && r.first_of == SIZE_MAX);
	static const struct {
		int32_t label;
		const char *path;
	} rows[] = {
		{0, "a/x.jpg"},     /* 0 */
		{0, "a/y.jpg"},     /* 1 */
		{1, "b/x.jpg"},     /* 2 */
		{0, "a/x.jpg.png"}, /* 3: not a/x.jpg */
		{0, "a/y.jpg"},     /* 4: repeats 1 */
		{2, "./a//x.jpg"},  /* 5: repeats 0, another label */
		{1, "b/./x.jpg"},   /* 6: repeats 2 */
		{0, "a/y.jpg"},     /* 7: repeats 1 again */
		{0, "/a/x.jpg"},    /* 8: absolute: another path */
		{0, "//a/./x.jpg"}, /* 9: repeats 8 */
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		CHECK_OK(ds_list_append(&l, i, rows[i].label, NULL, 0, rows[i].path, &err),
			 &err);
	CHECK_OK(ds_list_find_repeats(&l, &r, &err), &err);
	CHECK_EQ_INT(r.rows, 5);
	CHECK_EQ_INT(r.relabelled, 1);
	CHECK_EQ_INT(r.first, 4);
	CHECK_EQ_INT(r.first_of, 1);
	/* the list is untouched */
	CHECK_EQ_STR(l.items[5].path, "./a//x.jpg");
	ds_list_release(&l);

	/* none: every path once */
	for (int i = 0; i < 300; i++) {
		char p[32];
		snprintf(p, sizeof(p), "c/%03d.jpg", 299 - i);
		CHECK_OK(ds_list_append(&l, (uint64_t)i, i % 3, NULL, 0, p, &err), &err);
	}
	CHECK_OK(ds_list_find_repeats(&l, &r, &err), &err);
	CHECK_EQ_INT(r.rows, 0);
	CHECK_EQ_INT(r.relabelled, 0);
	CHECK(r.first == SIZE_MAX);
	ds_list_release(&l);
}

int main(void)
{
	test_basics();
	test_repeats();
	return TEST_EXIT();
}
