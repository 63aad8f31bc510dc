/*
 * text.c - UTF-8 checks and terminal-safe escaping of outside text.
 *
 * Names come from file systems and lists, which hold bytes, not text: a
 * file named with an ESC byte can move the cursor or retitle the terminal
 * when printed, and a Latin-1 folder name is not valid in a UTF-8 JSON
 * manifest. One decoder serves both questions. Class names also travel
 * as lines of a names file (`imshard list`, `extract`, convert's
 * classes.txt), so the rules for such a line live here too, for the
 * readers and writers of those files and of manifests alike.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0. */
static size_t utf8_seq(const unsigned char *p)
{
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	size_t n;
	unsigned cp;
	if (c >= 0xC2 && c <= 0xDF) {
		n = 2;
		cp = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		n = 3;
		cp = c & 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3F);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return 0;
	return n;
}

int ims_utf8_valid(const char *s, size_t *bad)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; p[i];) {
		size_t n = utf8_seq(p + i);
		if (!n) {
			if (bad)
				*bad = i;
			return 0;
		}
		i += n;
	}
	return 1;
}

size_t ims_utf8_prefix(const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (p[i]) {
		size_t n = utf8_seq(p + i);
		n = n ? n : 1;
		if (i + n > max)
			break;
		i += n;
	}
	return i;
}

const char *ims_escape(const char *s, char *buf, size_t len)
{
	if (!len)
		return buf;
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, safe = 0; /* safe: a boundary with room for "...\0" */
	for (size_t i = 0; p[i];) {
		size_t n = utf8_seq(p + i);
		int c1 = n == 2 && p[i] == 0xC2 && p[i + 1] < 0xA0;
		int plain = n > 1 ? !c1 : (n == 1 && p[i] >= 0x20 && p[i] != 0x7F);
		size_t need = plain ? n : 4;
		if (o + 4 <= len)
			safe = o;
		if (o + need + 1 > len) {
			o = safe; /* cut between characters, never inside one */
			if (len >= 4) {
				memcpy(buf + o, "...", 3);
				o += 3;
			}
			break;
		}
		if (plain)
			memcpy(buf + o, p + i, n);
		else
			snprintf(buf + o, 5, "\\x%02x", p[i]);
		o += need;
		i += plain ? n : 1;
	}
	buf[o] = '\0';
	return buf;
}

char *ims_escape_json(const char *json)
{
	const unsigned char *p = (const unsigned char *)json;
	/* at most 6 bytes out ("\\xHH" or "\u00HH") per byte in */
	size_t len = strlen(json);
	char *out = malloc(6 * len + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; p[i];) {
		size_t n = utf8_seq(p + i);
		if (n == 0) {
			/* JSON has no escape for a byte: the text \xHH, as pack
			 * writes such bytes into a manifest */
			o += (size_t)sprintf(out + o, "\\\\x%02x", p[i]);
			i++;
		} else if (p[i] == 0x7F) {
			o += (size_t)sprintf(out + o, "\\u007f");
			i++;
		} else if (n == 2 && p[i] == 0xC2 && p[i + 1] < 0xA0) {
			o += (size_t)sprintf(out + o, "\\u00%02x", p[i + 1]);
			i += 2;
		} else {
			/* cJSON's layout (LF, TAB) and escapes, and text */
			memcpy(out + o, p + i, n);
			o += n;
			i += n;
		}
	}
	out[o] = '\0';
	return out;
}

const char *ims_name_line_problem(const char *s)
{
	if (!s || !*s)
		return "is empty";
	if (strpbrk(s, "\n\r"))
		return "holds a line break";
	if (strchr(s, '\t'))
		return "holds a TAB";
	/* a line of spaces reads back as a blank line, not as a name */
	if (s[strspn(s, " ")] == '\0')
		return "is only spaces";
	return NULL;
}

typedef struct name_at {
	const char *s;
	size_t i;
} name_at;

static int cmp_name_at(const void *a, const void *b)
{
	const name_at *x = a, *y = b;
	int c = strcmp(x->s, y->s);
	if (c)
		return c;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* Sorting rather than comparing every pair: ImageNet-21k has 21,841
 * classes, a run's parts are as many as its resumes, and files of names
 * are outside input of any length. */
long ims_number_names(const char *const *names, size_t n, long *no)
{
	name_at *a = malloc((n ? n : 1) * sizeof(*a));
	if (!a)
		return -1;
	for (size_t i = 0; i < n; i++)
		a[i] = (name_at){names[i] ? names[i] : "", i};
	qsort(a, n, sizeof(*a), cmp_name_at);
	long k = 0;
	for (size_t i = 0; i < n; i++)
		no[a[i].i] = i > 0 && strcmp(a[i - 1].s, a[i].s) == 0 ? no[a[i - 1].i] : k++;
	free(a);
	return k;
}

int ims_find_duplicate(const char *const *names, size_t n, size_t *first,
		       size_t *dup)
{
	if (n < 2)
		return 0;
	long *no = malloc(n * sizeof(*no));
	if (!no)
		return -1;
	const long k = ims_number_names(names, n, no);
	/* each name's first index, then the first index that repeats one */
	size_t *seen = k < 0 ? NULL : malloc((size_t)(k ? k : 1) * sizeof(*seen));
	int found = k < 0 || !seen ? -1 : 0;
	for (long c = 0; seen && c < k; c++)
		seen[c] = SIZE_MAX;
	for (size_t i = 0; !found && i < n; i++) {
		if (seen[no[i]] == SIZE_MAX) {
			seen[no[i]] = i;
			continue;
		}
		*first = seen[no[i]];
		*dup = i;
		found = 1;
	}
	free(seen);
	free(no);
	return found;
}

const char *ims_plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}
