/*
 * scan.c - lists a folder of class subfolders (ImageFolder / im2rec style).
 *
 * Folders are opened with openat relative to their parent, so path length
 * never limits depth, and listed sorted by ims_dir_list_fd (symbolic links
 * followed the way stat follows them). A stack of the (device, inode)
 * pairs of the folders being walked stops link loops.
 */
#define _GNU_SOURCE
#include "datasets.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_EXTS ".jpg,.jpeg,.png"

typedef struct ext_set {
	char **ext; /* lower-case, with the leading dot */
	size_t n;
	char *storage;
} ext_set;

typedef struct dev_ino {
	dev_t dev;
	ino_t ino;
} dev_ino;

/* A class's folder as the walk met it (links followed). */
typedef struct class_dir {
	dev_t dev;
	ino_t ino;
	int32_t label;
} class_dir;

typedef struct scan_ctx {
	const char *root;
	const char *exts_text;
	ext_set exts;
	ds_list *l;
	ds_scan_report rep;
	ims_error *err;
	dev_ino *stack; /* folders being walked, root first */
	size_t depth, stack_cap;
	char *rel; /* current path relative to root, no trailing slash */
	size_t rel_len, rel_cap;
	class_dir *cls; /* every class's folder, for one_folder_twice */
	size_t n_cls, cls_cap;
} scan_ctx;

/* ---- extensions ---------------------------------------------------------- */

static char ascii_lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c + 'a' - 'A') : c;
}

static int parse_exts(const char *text, ext_set *s, ims_error *err)
{
	memset(s, 0, sizeof(*s));
	size_t len = strlen(text);
	/* Room for a dot added to every item and its NUL. */
	s->storage = malloc(2 * len + 2);
	s->ext = malloc((len + 1) * sizeof(char *));
	RETURN_IF(!s->storage || !s->ext, err, IMS_ENOMEM,
		  "cannot parse extensions: out of memory");
	char *w = s->storage;
	const char *p = text;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		while (n > 0 && *p == ' ')
			p++, n--;
		while (n > 0 && p[n - 1] == ' ')
			n--;
		RETURN_IF(n == 0 || (n == 1 && *p == '.'), err, IMS_EINVAL,
			  "invalid extension list '%s': empty extension "
			  "(expected e.g. .jpg,.jpeg,.png)",
			  text);
		RETURN_IF(memchr(p, '/', n) != NULL, err, IMS_EINVAL,
			  "invalid extension list '%s': '%.*s' holds a '/'", text,
			  (int)n, p);
		s->ext[s->n++] = w;
		if (*p != '.')
			*w++ = '.';
		for (size_t i = 0; i < n; i++)
			*w++ = ascii_lower(p[i]);
		*w++ = '\0';
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

static void free_exts(ext_set *s)
{
	free(s->ext);
	free(s->storage);
	memset(s, 0, sizeof(*s));
}

int ds_scan_check_exts(const char *exts, ims_error *err)
{
	ext_set s;
	int rc = parse_exts(exts, &s, err);
	free_exts(&s);
	return rc;
}

/* Case-insensitive suffix match (ASCII folding; names are raw bytes). */
static int matches(const ext_set *s, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < s->n; i++) {
		size_t k = strlen(s->ext[i]);
		if (n <= k)
			continue;
		const char *t = name + n - k;
		size_t j = 0;
		while (j < k && ascii_lower(t[j]) == s->ext[i][j])
			j++;
		if (j == k)
			return 1;
	}
	return 0;
}

/* ---- reading folders ----------------------------------------------------- */

/* The folder's display path for messages: root, or root/rel. */
static void display_path(const scan_ctx *c, char *out, size_t len)
{
	if (c->rel_len)
		snprintf(out, len, "%s/%s", c->root, c->rel);
	else
		snprintf(out, len, "%s", c->root);
}

static int io_fail(const scan_ctx *c, const char *what, int e)
{
	char shown[1024];
	display_path(c, shown, sizeof(shown));
	return ims_fail(c->err, e == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
			"cannot %s '%s': %s", what, shown, strerror(e));
}

/*
 * Reads the visible entries of the open folder dfd into d, sorted. On
 * success *dup_fd is dfd, kept open for openat/fstatat on its children
 * (the caller closes it); on failure dfd is closed.
 */
/* An entry left out of the listing, counted by why: one named like an
 * image that is no regular file (a FIFO, a socket) apart, and named,
 * never as a file whose extension did not match. */
static void skip(scan_ctx *c, const ims_dir_entry *e)
{
	if (e->kind == IMS_KIND_BROKEN) {
		c->rep.broken_links++;
	} else if (e->kind == IMS_KIND_OTHER && matches(&c->exts, e->name)) {
		if (!c->rep.special_files++)
			snprintf(c->rep.special_first, sizeof(c->rep.special_first),
				 "%s%s%s", c->rel ? c->rel : "", c->rel_len ? "/" : "",
				 e->name);
	} else {
		c->rep.ignored_files++;
	}
}

static int read_listing(scan_ctx *c, int dfd, ims_dir_listing *d, int *dup_fd)
{
	memset(d, 0, sizeof(*d));
	*dup_fd = -1;
	char shown[1024];
	display_path(c, shown, sizeof(shown));
	int rc = ims_dir_list_fd(dfd, shown, 0, d, c->err);
	if (rc < 0) {
		close(dfd);
		ims_dir_listing_release(d);
		return rc;
	}
	*dup_fd = dfd;
	return 0;
}

/* ---- the walk ------------------------------------------------------------ */

/* Appends "/name" (or "name" at root) to c->rel; returns the old length. */
static int rel_push(scan_ctx *c, const char *name, size_t *old)
{
	size_t n = strlen(name);
	size_t need = c->rel_len + 1 + n + 1;
	if (need > c->rel_cap) {
		size_t cap = c->rel_cap ? c->rel_cap : 256;
		while (cap < need)
			cap *= 2;
		char *r = realloc(c->rel, cap);
		RETURN_IF(!r, c->err, IMS_ENOMEM, "cannot list folder: out of memory");
		c->rel = r;
		c->rel_cap = cap;
	}
	*old = c->rel_len;
	if (c->rel_len)
		c->rel[c->rel_len++] = '/';
	memcpy(c->rel + c->rel_len, name, n + 1);
	c->rel_len += n;
	return 0;
}

static void rel_pop(scan_ctx *c, size_t old)
{
	c->rel_len = old;
	if (c->rel)
		c->rel[old] = '\0';
}

/*
 * Opens child folder name of parent and pushes it on the walk stack;
 * *fd is -1 (and 0 returned) when it is a link back to a folder being
 * walked.
 */
static int enter(scan_ctx *c, int parent, const char *name, int *fd)
{
	*fd = -1;
	int f = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f < 0)
		return io_fail(c, "open folder", errno);
	struct stat st;
	if (fstat(f, &st) != 0) {
		int e = errno;
		close(f);
		return io_fail(c, "stat folder", e);
	}
	for (size_t i = 0; i < c->depth; i++) {
		if (c->stack[i].dev == st.st_dev && c->stack[i].ino == st.st_ino) {
			/* a link loop: walked already, and told (c->rel
			 * names it: the caller pushed name) */
			if (!c->rep.link_loops++)
				snprintf(c->rep.loop_first, sizeof(c->rep.loop_first),
					 "%s", c->rel ? c->rel : name);
			close(f);
			return 0;
		}
	}
	if (c->depth == c->stack_cap) {
		size_t cap = c->stack_cap ? c->stack_cap * 2 : 16;
		dev_ino *s = realloc(c->stack, cap * sizeof(*s));
		if (!s) {
			close(f);
			return ims_fail(c->err, IMS_ENOMEM,
					"cannot list folder: out of memory");
		}
		c->stack = s;
		c->stack_cap = cap;
	}
	c->stack[c->depth].dev = st.st_dev;
	c->stack[c->depth].ino = st.st_ino;
	c->depth++;
	*fd = f;
	return 0;
}

/* Adds one row for c->rel + "/" + file name under label; a name a list
 * row cannot hold is skipped and counted, not the end of the scan. */
static int add_row(scan_ctx *c, int32_t label, const char *name)
{
	if (strpbrk(name, "\t\r\n")) {
		if (!c->rep.unlistable++)
			snprintf(c->rep.unlistable_first,
				 sizeof(c->rep.unlistable_first), "%s%s%s", c->rel,
				 c->rel_len ? "/" : "", name);
		return 0;
	}
	size_t old = 0; /* gcc -O3 cannot see the error paths leave it unread */
	FORWARD_IF_ERR(rel_push(c, name, &old));
	int rc = ds_list_append(c->l, c->l->count, label, NULL, 0, c->rel, c->err);
	rel_pop(c, old);
	return rc;
}

/* A class named name (its folder, relative to root). Unlike a file's, a
 * class folder's name that a list cannot hold is refused: skipping the
 * class would shift every label after it. */
static int add_class(scan_ctx *c, const char *name, int32_t *label)
{
	RETURN_IF(strpbrk(name, "\t\r\n"), c->err, IMS_EINVAL,
		  "cannot list '%s': the class folder '%s' has a TAB or a line "
		  "break in its name, which a list and its classes file cannot "
		  "hold (rename it)",
		  c->root, name);
	FORWARD_IF_ERR(ds_list_add_class(c->l, name, label, c->err));
	/* the folder being walked (top of the stack) is the class's */
	if (c->n_cls == c->cls_cap) {
		size_t cap = c->cls_cap ? 2 * c->cls_cap : 64;
		class_dir *n = realloc(c->cls, cap * sizeof(*n));
		RETURN_IF(!n, c->err, IMS_ENOMEM, "cannot list '%s': out of memory", c->root);
		c->cls = n;
		c->cls_cap = cap;
	}
	c->cls[c->n_cls++] = (class_dir){c->stack[c->depth - 1].dev,
					 c->stack[c->depth - 1].ino, *label};
	return 0;
}

static int by_folder(const void *a, const void *b)
{
	const class_dir *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return (x->label > y->label) - (x->label < y->label);
}

/*
 * Two classes whose folders are one folder (a link to the other, or both
 * links to it) would list each of its images under two labels, which no
 * model can tell apart: refused, naming both, rather than listed.
 */
static int one_folder_twice(scan_ctx *c)
{
	if (c->n_cls < 2) /* c->cls may be NULL, which qsort may not take */
		return 0;
	qsort(c->cls, c->n_cls, sizeof(*c->cls), by_folder);
	for (size_t i = 1; i < c->n_cls; i++) {
		const class_dir *a = &c->cls[i - 1], *b = &c->cls[i];
		if (a->dev != b->dev || a->ino != b->ino)
			continue;
		char x[512], y[512];
		return ims_fail(c->err, IMS_EINVAL,
				"cannot list '%s': the class folders '%s' and '%s' are one "
				"folder (a link to the other, or both links to it), so its "
				"images would be listed under two labels; remove one of them",
				c->root, ims_escape(c->l->classes[a->label], x, sizeof(x)),
				ims_escape(c->l->classes[b->label], y, sizeof(y)));
	}
	return 0;
}

/* Counts what lies below a class folder (non-recursive mode). */
static int count_nested(scan_ctx *c, int dfd)
{
	ims_dir_listing d;
	int keep;
	FORWARD_IF_ERR(read_listing(c, dfd, &d, &keep));
	int rc = 0;
	for (size_t i = 0; i < d.n && rc == 0; i++) {
		if (d.e[i].kind == IMS_KIND_FOLDER) {
			size_t old;
			int f;
			GOTO_IF_ERR(out, rc, rel_push(c, d.e[i].name, &old));
			rc = enter(c, keep, d.e[i].name, &f);
			if (rc == 0 && f >= 0) {
				rc = count_nested(c, f);
				c->depth--;
			}
			rel_pop(c, old);
		} else if (d.e[i].kind == IMS_KIND_FILE && matches(&c->exts, d.e[i].name)) {
			c->rep.ignored_nested++;
		} else {
			skip(c, &d.e[i]);
		}
	}
out:
	close(keep);
	ims_dir_listing_release(&d);
	return rc;
}

/* im2rec's walk: this folder's files (labelled on the first match), then
 * its subfolders, all in sorted order. */
static int walk_recursive(scan_ctx *c, int dfd)
{
	ims_dir_listing d;
	int keep;
	FORWARD_IF_ERR(read_listing(c, dfd, &d, &keep));
	int rc = 0;
	int32_t label = -1;
	for (size_t i = 0; i < d.n && rc == 0; i++) {
		if (d.e[i].kind != IMS_KIND_FILE || !matches(&c->exts, d.e[i].name)) {
			if (d.e[i].kind != IMS_KIND_FOLDER)
				skip(c, &d.e[i]);
			continue;
		}
		if (c->rel_len == 0) {
			c->rep.loose_files++;
			continue;
		}
		if (label < 0)
			GOTO_IF_ERR(out, rc, add_class(c, c->rel, &label));
		rc = add_row(c, label, d.e[i].name);
	}
	for (size_t i = 0; i < d.n && rc == 0; i++) {
		if (d.e[i].kind != IMS_KIND_FOLDER)
			continue;
		size_t old;
		int f;
		GOTO_IF_ERR(out, rc, rel_push(c, d.e[i].name, &old));
		rc = enter(c, keep, d.e[i].name, &f);
		if (rc == 0 && f >= 0) {
			rc = walk_recursive(c, f);
			c->depth--;
		}
		rel_pop(c, old);
	}
out:
	close(keep);
	ims_dir_listing_release(&d);
	return rc;
}

/* One class per subfolder of root; files directly inside it only. */
static int walk_classes(scan_ctx *c, int rootfd)
{
	ims_dir_listing d;
	int keep;
	FORWARD_IF_ERR(read_listing(c, rootfd, &d, &keep));
	int rc = 0;
	for (size_t i = 0; i < d.n && rc == 0; i++) {
		if (d.e[i].kind == IMS_KIND_FOLDER)
			continue;
		if (d.e[i].kind == IMS_KIND_FILE && matches(&c->exts, d.e[i].name))
			c->rep.loose_files++;
		else
			skip(c, &d.e[i]);
	}
	for (size_t i = 0; i < d.n && rc == 0; i++) {
		if (d.e[i].kind != IMS_KIND_FOLDER)
			continue;
		size_t old;
		int f;
		GOTO_IF_ERR(out, rc, rel_push(c, d.e[i].name, &old));
		rc = enter(c, keep, d.e[i].name, &f);
		if (rc == 0 && f >= 0) {
			int32_t label;
			ims_dir_listing cd;
			int ckeep;
			rc = add_class(c, d.e[i].name, &label);
			if (rc == 0)
				rc = read_listing(c, f, &cd, &ckeep);
			else
				close(f);
			if (rc == 0) {
				size_t before = c->l->count;
				for (size_t j = 0; j < cd.n && rc == 0; j++) {
					ims_dir_entry *e = &cd.e[j];
					if (e->kind == IMS_KIND_FILE && matches(&c->exts, e->name)) {
						rc = add_row(c, label, e->name);
					} else if (e->kind == IMS_KIND_FOLDER) {
						size_t old2;
						int g;
						rc = rel_push(c, e->name, &old2);
						if (rc < 0)
							break;
						rc = enter(c, ckeep, e->name, &g);
						if (rc == 0 && g >= 0) {
							rc = count_nested(c, g);
							c->depth--;
						}
						rel_pop(c, old2);
					} else {
						skip(c, e);
					}
				}
				if (rc == 0 && c->l->count == before)
					c->rep.empty_classes++;
				close(ckeep);
				ims_dir_listing_release(&cd);
			}
			c->depth--;
		}
		rel_pop(c, old);
	}
out:
	close(keep);
	ims_dir_listing_release(&d);
	return rc;
}

int ds_scan_folder(const char *root, const ds_scan_opts *opts, ds_list *l,
		   ds_scan_report *report, ims_error *err)
{
	if (report)
		memset(report, 0, sizeof(*report));
	RETURN_IF(l->count || l->n_classes, err, IMS_EINVAL,
		  "cannot list '%s': the output list is not empty", root);
	scan_ctx c;
	memset(&c, 0, sizeof(c));
	c.root = root;
	c.exts_text = opts && opts->exts ? opts->exts : DEFAULT_EXTS;
	c.l = l;
	c.err = err;
	int recursive = opts ? opts->recursive : 0;
	int rc = parse_exts(c.exts_text, &c.exts, err);
	if (rc < 0) {
		free_exts(&c.exts);
		return rc;
	}

	int fd;
	struct stat st;
	if (stat(root, &st) != 0)
		GOTO_FAIL(out, rc, err, errno == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
			  "cannot list '%s': %s", root, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		GOTO_FAIL(out, rc, err, IMS_EINVAL,
			  "cannot list '%s': not a folder", root);
	GOTO_IF_ERR(out, rc, enter(&c, AT_FDCWD, root, &fd));
	rc = recursive ? walk_recursive(&c, fd) : walk_classes(&c, fd);
	if (rc < 0)
		goto out;
	GOTO_IF_ERR(out, rc, one_folder_twice(&c));

	char loose[160] = "";
	if (c.rep.loose_files)
		snprintf(loose, sizeof(loose),
			 " (%zu matching file%s lie directly in it; images must be "
			 "inside class subfolders)",
			 c.rep.loose_files, c.rep.loose_files == 1 ? "" : "s");
	if (!recursive && l->n_classes == 0)
		GOTO_FAIL(out, rc, err, IMS_ENOTFOUND,
			  "cannot list '%s': no class subfolders, expected "
			  "ROOT/<class>/<image>%s",
			  root, loose);
	if (l->count == 0) {
		if (recursive)
			GOTO_FAIL(out, rc, err, IMS_ENOTFOUND,
				  "cannot list '%s': no folder below it holds a file "
				  "matching %s%s",
				  root, c.exts_text, loose);
		GOTO_FAIL(out, rc, err, IMS_ENOTFOUND,
			  "cannot list '%s': none of its %zu class folder%s holds "
			  "a file matching %s%s",
			  root, l->n_classes, l->n_classes == 1 ? "" : "s",
			  c.exts_text, loose);
	}
	rc = 0;
out:
	if (rc < 0)
		ds_list_release(l);
	if (report)
		*report = c.rep;
	free_exts(&c.exts);
	free(c.stack);
	free(c.rel);
	free(c.cls);
	return rc;
}
