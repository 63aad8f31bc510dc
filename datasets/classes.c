/*
 * classes.c - class-name files: one name per line, line i naming label
 * i-1, read into and written from a ds_list's classes, and the file that
 * holds a list's class names.
 */
#define _GNU_SOURCE
#include "datasets.h"
#include "datasets/list_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int ds_classes_read(const char *path, ds_list *l, ims_error *err)
{
	uint8_t *data = NULL;
	size_t len = 0;
	int rc = ims_read_file(path, &data, &len, 0, err);
	if (rc < 0)
		return rc;
	ds_list tmp;
	ds_list_init(&tmp);
	char *buf = (char *)data, *end = buf + len;
	if (memchr(buf, '\0', len))
		GOTO_FAIL(out, rc, err, IMS_EFORMAT,
			  "cannot read classes '%s': contains a NUL byte (not a "
			  "text file?)",
			  path);
	char *p = buf;
	if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
		p += 3;
	/* Blank lines are an error unless only blank lines follow them. */
	size_t line = 0, pending_blank = 0;
	while (p < end) {
		line++;
		char *eol = memchr(p, '\n', (size_t)(end - p));
		char *le = eol ? eol : end;
		char *next = eol ? eol + 1 : end;
		if (le > p && le[-1] == '\r')
			le--;
		char *q = p;
		while (q < le && (*q == ' ' || *q == '\t'))
			q++;
		if (q == le) {
			if (!pending_blank)
				pending_blank = line;
			p = next;
			continue;
		}
		if (pending_blank)
			GOTO_FAIL(out, rc, err, IMS_EFORMAT,
				  "cannot read classes '%s': line %zu: empty class "
				  "name (line i names label i-1)",
				  path, pending_blank);
		*le = '\0';
		/* a TAB is where a list's columns part, never in a name */
		if (strchr(p, '\t'))
			GOTO_FAIL(out, rc, err, IMS_EFORMAT,
				  "cannot read classes '%s': line %zu holds a TAB "
				  "('%.60s'): a class-names file has one name per line "
				  "(is it an im2rec .lst list: index, label, path?)",
				  path, line, p);
		/* what is left (a CR inside the line) would not be written
		 * back: ds_classes_write refuses it */
		const char *why = ims_name_line_problem(p);
		if (why)
			GOTO_FAIL(out, rc, err, IMS_EFORMAT,
				  "cannot read classes '%s': line %zu: class name "
				  "'%.60s' %s",
				  path, line, p, why);
		GOTO_IF_ERR(out, rc, ds_list_add_class(&tmp, p, NULL, err));
		p = next;
	}
	size_t first = 0, dup = 0;
	int d = ims_find_duplicate((const char *const *)tmp.classes, tmp.n_classes,
				   &first, &dup);
	if (d < 0)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM,
			  "cannot read classes '%s': out of memory", path);
	if (d)
		GOTO_FAIL(out, rc, err, IMS_EFORMAT,
			  "cannot read classes '%s': line %zu: class '%s' repeats "
			  "line %zu",
			  path, dup + 1, tmp.classes[dup], first + 1);
	/* Replace l's classes with the ones read. */
	ds_list_free_classes(l);
	l->classes = tmp.classes;
	l->n_classes = tmp.n_classes;
	tmp.classes = NULL;
	tmp.n_classes = 0;
	rc = 0;
out:
	ds_list_release(&tmp);
	free(data);
	return rc;
}

int ds_classes_write(const char *path, const ds_list *l, ims_error *err)
{
	ims_buf b = {0};
	int rc = ds_classes_format(l, path, &b, err);
	/* its message names path once, as ds_list_write's does */
	if (!rc)
		rc = ims_write_file_atomic(path, b.text ? b.text : "", b.len, err);
	ims_buf_release(&b);
	return rc;
}

int ds_classes_format(const ds_list *l, const char *path, ims_buf *out,
		      ims_error *err)
{
	ims_buf b = {0};
	int rc = 0;
	size_t first = 0, dup = 0;
	int d = ims_find_duplicate((const char *const *)l->classes, l->n_classes,
				   &first, &dup);
	if (d < 0)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM,
			  "cannot write classes '%s': out of memory", path);
	if (d)
		GOTO_FAIL(out, rc, err, IMS_EINVAL,
			  "cannot write classes '%s': class %zu ('%s') repeats class "
			  "%zu (it could not be read back)",
			  path, dup, l->classes[dup], first);
	for (size_t i = 0; i < l->n_classes; i++) {
		const char *name = l->classes[i] ? l->classes[i] : "";
		const char *why = ims_name_line_problem(name);
		if (why)
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "cannot write classes '%s': class %zu ('%s') %s (it "
				  "could not be read back)",
				  path, i, name, why);
		size_t n = strlen(name);
		if (ims_buf_append(&b, name, n) < 0 || ims_buf_append(&b, "\n", 1) < 0)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM,
				  "cannot write classes '%s': out of memory", path);
	}
	*out = b;
	return 0;
out:
	ims_buf_release(&b);
	return rc;
}

static int ends_with(const char *s, size_t n, const char *suf)
{
	size_t k = strlen(suf);
	return n >= k && memcmp(s + n - k, suf, k) == 0;
}

int ds_classes_path_for_list(const char *lst_path, char *out, size_t outlen,
			     ims_error *err)
{
	size_t n = strlen(lst_path);
	if (ends_with(lst_path, n, ".lst"))
		n -= 4;
	static const char *const splits[] = {"_train", "_val", "_test"};
	for (int i = 0; i < 3; i++) {
		if (ends_with(lst_path, n, splits[i])) {
			n -= strlen(splits[i]);
			break;
		}
	}
	int w = snprintf(out, outlen, "%.*s.classes", (int)n, lst_path);
	RETURN_IF(w < 0 || (size_t)w >= outlen, err, IMS_EINVAL,
		  "cannot name the classes file of '%s': path too long",
		  lst_path);
	return 0;
}

int ds_classes_beside_list(const char *lst_path, char *out, size_t outlen,
			   ims_error *err)
{
	if (ds_classes_path_for_list(lst_path, out, outlen, NULL) < 0)
		return 0;
	/* stat, not access(R_OK): a file there without read permission
	 * is the list's class names all the same */
	struct stat st;
	if (stat(out, &st) == 0)
		return 1;
	RETURN_IF(errno != ENOENT && errno != ENOTDIR, err, IMS_EIO,
		  "cannot look for the classes file '%s' of '%s': %s", out,
		  lst_path, strerror(errno));
	return 0;
}
