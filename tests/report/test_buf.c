/*
 * test_buf.c - what report/buf.c appends to a text buffer: HTML escaping,
 * CSV numbers, the people-facing number formats, table cells.
 */
#include <math.h>

#include "report/report_internal.h"
#include "test.h"

static void test_escape(void)
{
	ims_buf b = {0};
	rb_html(&b, "a<b>&\"c'\x01" "d");
	CHECK_EQ_STR(b.text, "a&lt;b&gt;&amp;&quot;c&#39;?d");
	ims_buf_release(&b);
	rb_html(&b, NULL);
	CHECK(b.len == 0);

	rb_csv_num(&b, 0.1);
	ims_buf_puts(&b, "|");
	rb_csv_num(&b, NAN);
	ims_buf_puts(&b, "|");
	rb_csv_num(&b, 1e20);
	CHECK_EQ_STR(b.text, "0.1||1e+20");
	ims_buf_release(&b);
}

/* Bytes that are not UTF-8 (a Latin-1 name, one cut inside a character)
 * are written as the text \xHH, control characters as '?': the page and
 * the CSV files stay valid UTF-8. Before, the bytes were copied raw. */
static void test_not_utf8(void)
{
	ims_buf b = {0};
	rb_html(&b, "caf\xe9 <x> \xe2\x82 caf\xc3\xa9\x7f\xc2\x85\xff");
	CHECK_EQ_STR(b.text, "caf\\xe9 &lt;x&gt; \\xe2\\x82 caf\xc3\xa9??\\xff");
	CHECK(ims_utf8_valid(b.text, NULL));
	ims_buf_release(&b);
	rb_csv(&b, "a,\xe9\"");
	ims_buf_puts(&b, "|");
	rb_csv(&b, "caf\xc3\xa9");
	ims_buf_puts(&b, "|");
	rb_csv(&b, NULL);
	CHECK_EQ_STR(b.text, "\"a,\\xe9\"\"\"|caf\xc3\xa9|");
	CHECK(ims_utf8_valid(b.text, NULL));
	ims_buf_release(&b);
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
	ims_buf b = {0};
	static const char *const cols[] = {"a<b", "c", NULL};
	rb_th_row(&b, cols);
	rb_td(&b, 1, "x&y");
	rb_td_num(&b, 1.914);
	rb_td_s(&b, 0.0578);
	rb_td_pct(&b, NAN);
	CHECK_EQ_STR(b.text, "<tr><th>a&lt;b</th><th>c</th></tr>\n<td class=\"l\">x&amp;y</td>"
			  "<td>1.91</td><td>57.80 ms</td><td>n/a</td>");
	ims_buf_release(&b);
	char n[REP_NUM];
	CHECK_EQ_STR(rep_fmt_n(n, 0.5), "0.500");
	CHECK_EQ_STR(rep_ranks_word(1), "rank");
	CHECK_EQ_STR(rep_ranks_word(2), "ranks");
}

int main(void)
{
	test_cells();
	test_escape();
	test_formats();
	test_not_utf8();
	return TEST_EXIT();
}
