/* test_text.c - UTF-8 checks and cuts, terminal-safe escaping (of JSON too), the
 * rules for names kept one per line, and plural nouns (common/text.c). */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "test.h"

static void escaped(const char *in, size_t len, const char *want)
{
	char buf[256];
	CHECK(len <= sizeof(buf));
	CHECK_EQ_STR(ims_escape(in, buf, len), want);
}

int main(void)
{
	size_t bad = 99;
	CHECK_EQ_INT(ims_utf8_valid("", NULL), 1);
	CHECK_EQ_INT(ims_utf8_valid("Anas superciliosa \xc3\x97 platyrhynchos", NULL), 1);
	CHECK_EQ_INT(ims_utf8_valid("\xf0\x9f\x90\xa6 bird", NULL), 1);
	CHECK_EQ_INT(ims_utf8_valid("caf\xe9", &bad), 0); /* Latin-1 */
	CHECK_EQ_U64(bad, 3);
	CHECK_EQ_INT(ims_utf8_valid("\xc0\xaf", &bad), 0); /* overlong '/' */
	CHECK_EQ_U64(bad, 0);
	CHECK_EQ_INT(ims_utf8_valid("a\xed\xa0\x80", &bad), 0); /* surrogate */
	CHECK_EQ_U64(bad, 1);
	CHECK_EQ_INT(ims_utf8_valid("\xf4\x90\x80\x80", NULL), 0); /* > U+10FFFF */
	CHECK_EQ_INT(ims_utf8_valid("\xe2\x82", NULL), 0); /* cut short */

	/* Where to cut: never inside a character; a bad byte is one. */
	CHECK_EQ_U64(ims_utf8_prefix("abc", 5), 3);
	CHECK_EQ_U64(ims_utf8_prefix("abc", 2), 2);
	CHECK_EQ_U64(ims_utf8_prefix("ab\xc3\x97", 3), 2);
	CHECK_EQ_U64(ims_utf8_prefix("ab\xc3\x97", 4), 4);
	CHECK_EQ_U64(ims_utf8_prefix("\xf0\x9f\x90\xa6", 3), 0);
	CHECK_EQ_U64(ims_utf8_prefix("a\xe9\xe9", 2), 2); /* Latin-1 bytes */
	CHECK_EQ_U64(ims_utf8_prefix("a\xe2\x82", 2), 2); /* cut short already */
	CHECK_EQ_U64(ims_utf8_prefix("", 4), 0);

	/* Control bytes (C0, DEL, C1) and bad bytes become \xHH; text stays. */
	escaped("plain/name.jpg", 256, "plain/name.jpg");
	escaped("a\x1b[2Jb\tc\x7f", 256, "a\\x1b[2Jb\\x09c\\x7f");
	escaped("csi\xc2\x9b" "1m", 256, "csi\\xc2\\x9b1m");
	escaped("caf\xe9 \xc3\x97 ok", 256, "caf\\xe9 \xc3\x97 ok");
	escaped("nbsp\xc2\xa0.", 256, "nbsp\xc2\xa0.");
	/* Too long: cut between characters, marked with "...". */
	escaped("abcdefghij", 8, "abcd...");
	escaped("abcdefg", 8, "abcdefg");
	escaped("\x1b\x1b\x1b", 9, "\\x1b...");
	escaped("\xc3\x97\xc3\x97\xc3\x97", 7, "\xc3\x97\xc3\x97\xc3\x97");
	escaped("\xc3\x97\xc3\x97\xc3\x97", 6, "\xc3\x97...");
	escaped("anything", 3, "");

	/* JSON as cJSON prints it: DEL and C1 as \u escapes, a bad byte as
	 * the text \xHH; layout, cJSON's escapes and text kept. */
	char *j = ims_escape_json("{\n\t\"a\":\t\"x\\u001b\x7f\xc2\x9b\xe9 \xc3\x97\"\n}");
	CHECK_EQ_STR(j, "{\n\t\"a\":\t\"x\\u001b\\u007f\\u009b\\\\xe9 \xc3\x97\"\n}");
	free(j);

	/* Names kept one per line: what a line cannot hold, and repeats. */
	CHECK(ims_name_line_problem("Anas \xc3\x97 platyrhynchos") == NULL);
	CHECK(ims_name_line_problem(" lead and trail ") == NULL);
	CHECK_EQ_STR(ims_name_line_problem(""), "is empty");
	CHECK_EQ_STR(ims_name_line_problem(NULL), "is empty");
	CHECK_EQ_STR(ims_name_line_problem("a\nb"), "holds a line break");
	CHECK_EQ_STR(ims_name_line_problem("a\r"), "holds a line break");
	CHECK_EQ_STR(ims_name_line_problem("a\tb"), "holds a TAB");
	CHECK_EQ_STR(ims_name_line_problem("   "), "is only spaces");
	const char *names[] = {"b", "a", "c", "a", "b"};
	size_t first = 9, dup = 9;
	CHECK_EQ_INT(ims_find_duplicate(names, 5, &first, &dup), 1);
	CHECK_EQ_U64(first, 1); /* a (1, 3) before b (0, 4): 3 < 4 */
	CHECK_EQ_U64(dup, 3);
	CHECK_EQ_INT(ims_find_duplicate(names, 3, &first, &dup), 0);
	CHECK_EQ_INT(ims_find_duplicate(names, 0, &first, &dup), 0);
	/* a triple: the first repeat is its second, paired with its first */
	const char *three[] = {"x", "y", "x", "x"};
	CHECK_EQ_INT(ims_find_duplicate(three, 4, &first, &dup), 1);
	CHECK_EQ_U64(first, 0);
	CHECK_EQ_U64(dup, 2);

	/* Numbering: equal names one number, from 0 in sorted order, NULL
	 * read as "" */
	long no[6] = {9, 9, 9, 9, 9, 9};
	CHECK_EQ_INT((int)ims_number_names(names, 5, no), 3);
	CHECK(no[1] == 0 && no[3] == 0 && no[0] == 1 && no[4] == 1 && no[2] == 2);
	const char *with_null[] = {"", NULL, "z"};
	CHECK_EQ_INT((int)ims_number_names(with_null, 3, no), 2);
	CHECK(no[0] == 0 && no[1] == 0 && no[2] == 1);
	CHECK_EQ_INT((int)ims_number_names(names, 0, no), 0);

	/* Counts: the singular for exactly one, the plural otherwise. */
	CHECK_EQ_STR(ims_plural(1, "shard", "shards"), "shard");
	CHECK_EQ_STR(ims_plural(0, "shard", "shards"), "shards");
	CHECK_EQ_STR(ims_plural(2, "class", "classes"), "classes");
	CHECK_EQ_STR(ims_plural(UINT64_MAX, "row", "rows"), "rows");
	return TEST_EXIT();
}
