/*
 * test_buf.c - the text buffer and number formats (report/buf.c): long
 * appends, HTML escaping, CSV quoting, the people-facing number formats,
 * table cells.
 */
#include <math.h>

#include "report/report_internal.h"
#include "test.h"

static void test_append(void)
{
	rep_buf b;
	rb_init(&b);
	size_t len = 99;
	char *empty = rb_take(&b, &len);
	CHECK(empty != NULL);
	CHECK_EQ_U64(len, 0);
	CHECK_EQ_STR(empty, "");
	free(empty);

	rb_init(&b);
	rb_puts(&b, "ab");
	rb_putn(&b, "cdef", 2);
	/* longer than the 256-byte fast path, and past the first 4 KiB */
	char big[5000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	rb_printf(&b, "[%s]%d", big, 42);
	CHECK_EQ_U64(b.len, 4 + 1 + 4999 + 1 + 2);
	CHECK(b.p[0] == 'a' && b.p[3] == 'd' && b.p[4] == '[');
	CHECK(strcmp(b.p + b.len - 3, "]42") == 0);
	CHECK(!b.oom);
	char *s = rb_take(&b, &len);
	CHECK_EQ_U64(len, 5007);
	CHECK_EQ_U64(strlen(s), 5007);
	CHECK(b.p == NULL && b.len == 0);
	free(s);

	/* sticky failure: after oom nothing is taken */
	rb_init(&b);
	rb_puts(&b, "x");
	b.oom = 1;
	rb_puts(&b, "y");
	CHECK_EQ_U64(b.len, 1);
	CHECK(rb_take(&b, &len) == NULL);
	rb_free(&b);
}

static void test_escape(void)
{
	rep_buf b;
	rb_init(&b);
	rb_html(&b, "a<b>&\"c'\x01" "d");
	CHECK_EQ_STR(b.p, "a&lt;b&gt;&amp;&quot;c&#39;?d");
	rb_free(&b);
	rb_html(&b, NULL);
	CHECK(b.len == 0);

	rb_init(&b);
	rb_csv(&b, "plain");
	rb_puts(&b, "|");
	rb_csv(&b, "a,b");
	rb_puts(&b, "|");
	rb_csv(&b, "say \"hi\"");
	rb_puts(&b, "|");
	rb_csv(&b, "two\nlines");
	rb_puts(&b, "|");
	rb_csv_num(&b, 0.1);
	rb_puts(&b, "|");
	rb_csv_num(&b, NAN);
	rb_puts(&b, "|");
	rb_csv_num(&b, 1e20);
	CHECK_EQ_STR(b.p, "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"two\nlines\"|0.1||1e+20");
	rb_free(&b);
}

static void test_formats(void)
{
	char n[48];
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), NAN), "n/a");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), INFINITY), "n/a");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), 0), "0");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), 32), "32");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), 2516.4), "2516");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), 394.29), "394.3");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), 1.914), "1.91");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), -1.914), "-1.91");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), 0.9567), "0.957");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), 0.03021), "0.0302");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), 0.0000289), "0.0000289");
	CHECK_EQ_STR(rep_fmt(n, sizeof(n), 2e-9), "2.0e-09");
	CHECK_EQ_STR(rep_fmt_s(n, sizeof(n), 1.913), "1.91 s");
	CHECK_EQ_STR(rep_fmt_s(n, sizeof(n), 0.0578), "57.80 ms");
	CHECK_EQ_STR(rep_fmt_s(n, sizeof(n), 0), "0 s");
	CHECK_EQ_STR(rep_fmt_s(n, sizeof(n), NAN), "n/a");
	CHECK_EQ_STR(rep_fmt_pct(n, sizeof(n), 0.0302), "3.0%");
	CHECK_EQ_STR(rep_fmt_pct(n, sizeof(n), 0.00041), "0.04%");
	CHECK_EQ_STR(rep_fmt_pct(n, sizeof(n), NAN), "n/a");
}

static void test_cells(void)
{
	rep_buf b;
	rb_init(&b);
	static const char *const cols[] = {"a<b", "c", NULL};
	rb_th_row(&b, cols);
	rb_td(&b, 1, "x&y");
	rb_td_num(&b, 1.914);
	rb_td_s(&b, 0.0578);
	rb_td_pct(&b, NAN);
	CHECK_EQ_STR(b.p, "<tr><th>a&lt;b</th><th>c</th></tr>\n<td class=\"l\">x&amp;y</td>"
			  "<td>1.91</td><td>57.80 ms</td><td>n/a</td>");
	rb_free(&b);
	char n[REP_NUM];
	CHECK_EQ_STR(rep_fmt_n(n, 0.5), "0.500");
	CHECK_EQ_STR(rep_ranks_word(1), "rank");
	CHECK_EQ_STR(rep_ranks_word(2), "ranks");
}

int main(void)
{
	test_append();
	test_cells();
	test_escape();
	test_formats();
	return TEST_EXIT();
}
