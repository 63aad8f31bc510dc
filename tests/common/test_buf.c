/*
 * test_buf.c - the growable buffer (common/buf.c): reserving, appending
 * text past the fast path, taking the text out, sticky allocation failure,
 * CSV cells (quoting, and formulas made text).
 */
#include <string.h>

#include "common/common.h"
#include "test.h"

static void test_append(void)
{
	ims_buf b = {0};
	size_t len = 99;
	char *empty = ims_buf_take(&b, &len);
	CHECK(empty != NULL);
	CHECK_EQ_U64(len, 0);
	CHECK_EQ_STR(empty, "");
	free(empty);

	ims_buf_puts(&b, "ab");
	ims_buf_append(&b, "cdef", 2);
	/* longer than the 256-byte fast path, and past several doublings */
	char big[5000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ims_buf_printf(&b, "[%s]%d", big, 42);
	CHECK_EQ_U64(b.len, 4 + 1 + 4999 + 1 + 2);
	CHECK(b.text[0] == 'a' && b.text[3] == 'd' && b.text[4] == '[');
	CHECK(strcmp(b.text + b.len - 3, "]42") == 0);
	CHECK(!b.oom);
	char *s = ims_buf_take(&b, &len);
	CHECK_EQ_U64(len, 5007);
	CHECK_EQ_U64(strlen(s), 5007);
	CHECK(b.text == NULL && b.len == 0);
	free(s);

	/* sticky failure: after oom nothing is taken */
	ims_buf_puts(&b, "x");
	b.oom = 1;
	ims_buf_puts(&b, "y");
	CHECK_EQ_U64(b.len, 1);
	CHECK(ims_buf_take(&b, &len) == NULL);
	ims_buf_release(&b);
}

static void test_reserve(void)
{
	ims_error err;
	ims_buf b = {0};
	CHECK_OK(ims_buf_reserve(&b, 100, &err), &err);
	CHECK(b.cap >= 100 && b.len == 0);
	ims_buf_release(&b);
	CHECK(b.data == NULL && b.cap == 0);
	ims_buf_release(NULL);

	/* grow keeps the contents and room for a NUL after them */
	CHECK_EQ_INT(ims_buf_append(&b, "abc", 3), 0);
	CHECK_OK(ims_buf_grow(&b, 1000, &err), &err);
	CHECK(b.cap >= 3 + 1000 + 1);
	CHECK_EQ_STR(b.text, "abc");
	/* reserve never shrinks */
	size_t cap = b.cap;
	CHECK_OK(ims_buf_reserve(&b, 10, &err), &err);
	CHECK_EQ_U64(b.cap, cap);
	ims_buf_release(&b);
}

static void test_csv(void)
{
	ims_buf b = {0};
	ims_buf_csv(&b, "plain");
	ims_buf_puts(&b, "|");
	ims_buf_csv(&b, "a,b");
	ims_buf_puts(&b, "|");
	ims_buf_csv(&b, "say \"hi\"");
	ims_buf_puts(&b, "|");
	ims_buf_csv(&b, "two\nlines");
	ims_buf_puts(&b, "|");
	ims_buf_csv(&b, NULL);
	CHECK_EQ_STR(b.text, "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"two\nlines\"|");
	ims_buf_release(&b);
}

/* Text cells a spreadsheet would run as formulas (a class name, a path or
 * an option value is the user's) are made text with a leading '; plain
 * numbers written as text stay numbers. */
static void test_csv_formulas(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"=1+2", "\"'=1+2\""},
		{"+cmd|' /C calc'!A0", "\"'+cmd|' /C calc'!A0\""},
		{"-2+3", "\"'-2+3\""},
		{"@SUM(A1)", "\"'@SUM(A1)\""},
		{"\tx", "\"'\tx\""},
		{"=a,\"b\"", "\"'=a,\"\"b\"\"\""},
		{"-", "\"'-\""},
		{"-inf", "\"'-inf\""},
		{"-0.5", "-0.5"},
		{"+3", "+3"},
		{"-1e-3", "-1e-3"},
		{"a=b", "a=b"},
		{"", ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ims_buf b = {0};
		ims_buf_csv(&b, cases[i].in);
		ims_buf_puts(&b, "");
		CHECK_EQ_STR(b.text, cases[i].out);
		ims_buf_release(&b);
	}
}

int main(void)
{
	test_append();
	test_reserve();
	test_csv();
	test_csv_formulas();
	return TEST_EXIT();
}
