/*
 * ds_imagenet.c - ImageNet ILSVRC2012 in its two common layouts.
 *
 *   Kaggle: LOC_synset_mapping.txt, LOC_val_solution.csv,
 *           ILSVRC/Data/CLS-LOC/train/<wnid>/FILE, .../val/FILE
 *   devkit: map_clsloc.txt, train/<wnid>/FILE, val/FILE (flat) or
 *           val/<wnid>/FILE (sorted), ILSVRC2012_devkit_t12/data/
 *           ILSVRC2012_validation_ground_truth.txt
 *
 * Labels are the index of the wnid in the byte-wise sorted list of the
 * mapping file's wnids (n01440764 = 0 in the full set), as every framework
 * numbers them; class names are the wnids (display names repeat). The
 * devkit ground truth holds ILSVRC2012_IDs, mapped ID -> wnid -> label.
 *
 * Scale: train is 1.28M files in 1,000 folders. Each folder is listed
 * (ims_dir_list) into one listing reused from folder to folder; the only
 * per-file allocation is the row path ds_list_append copies. Mapping and
 * label files are read whole and parsed in place.
 */
#define _GNU_SOURCE
#include "datasets.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define KAGGLE_MAP "LOC_synset_mapping.txt"
#define KAGGLE_CSV "LOC_val_solution.csv"
#define KAGGLE_DATA "ILSVRC/Data/CLS-LOC"
#define DEVKIT_MAP "map_clsloc.txt"
#define DEVKIT_GT "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt"
#define VAL_PREFIX "ILSVRC2012_val_"
#define FULL_CLASSES 1000
#define TEXT_LIMIT ((size_t)1 << 30) /* mapping and label files */
#define MAX_SHOWN 5                   /* names listed in a note */

typedef struct wnid_entry {
	const char *wnid; /* points into the mapping file's buffer */
	long id;          /* devkit ILSVRC2012_ID, 0 for Kaggle */
	size_t line;
} wnid_entry;

typedef struct id_label {
	long id;
	int32_t label;
} id_label;

/* A val image waiting for its label. */
typedef struct val_item {
	size_t path_off;   /* into the val arena: path relative to root */
	const char *path;  /* set once the arena stops growing */
	size_t name_pos;   /* file name = path + name_pos */
	size_t stem_len;   /* file name without its extension */
	int32_t label;     /* -1 until known */
} val_item;

typedef struct ctx {
	const char *root;
	int kaggle;
	const char *data;     /* "ILSVRC/Data/CLS-LOC" or "" */
	char map_path[4096];  /* the mapping file, for messages */
	char *map_buf;
	wnid_entry *w;        /* sorted by wnid: label i = w[i] */
	size_t n_classes;
	id_label *ids;        /* devkit: sorted by id */
	ims_dir_listing top, sub;
	ds_dataset *out;
	ims_error *err;
} ctx;

/* ---- small helpers ------------------------------------------------------- */

/* .jpeg, .jpg or .png, any case: the packer decides the format by content. */
static int is_image(const char *name)
{
	const char *dot = strrchr(name, '.');
	return dot && dot != name &&
	       (!strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".jpg") ||
		!strcasecmp(dot, ".png"));
}

/* root/rel (rel may be empty) into out; IMS_ELIMIT when it does not fit. */
static int join(const ctx *c, char *out, size_t len, const char *rel)
{
	int n = snprintf(out, len, "%s%s%s", c->root, *rel ? "/" : "", rel);
	RETURN_IF(n < 0 || (size_t)n >= len, c->err, IMS_ELIMIT,
		  "cannot load imagenet: path '%s/%s' is too long", c->root, rel);
	return 0;
}

static int exists_kind(const ctx *c, const char *rel, int kind)
{
	char p[4096];
	if (join(c, p, sizeof(p), rel) < 0)
		return 0;
	return ims_path_kind(p) == kind;
}

/* Reads the visible entries of folder root/rel into d (sorted). */
static int list_dir(ctx *c, const char *rel, ims_dir_listing *d)
{
	char path[4096];
	FORWARD_IF_ERR(join(c, path, sizeof(path), rel));
	return ims_dir_list(path, 0, d, c->err);
}

static int cmp_wnid(const void *a, const void *b)
{
	return strcmp(((const wnid_entry *)a)->wnid, ((const wnid_entry *)b)->wnid);
}

static int cmp_id(const void *a, const void *b)
{
	long x = ((const id_label *)a)->id, y = ((const id_label *)b)->id;
	return (x > y) - (x < y);
}

/* Label of wnid (sorted index), or -1. */
static int32_t label_of(const ctx *c, const char *wnid)
{
	wnid_entry key = {wnid, 0, 0};
	const wnid_entry *e = bsearch(&key, c->w, c->n_classes, sizeof(*e), cmp_wnid);
	return e ? (int32_t)(e - c->w) : -1;
}

/* Label of a devkit ILSVRC2012_ID, or -1. */
static int32_t label_of_id(const ctx *c, long id)
{
	id_label key = {id, 0};
	const id_label *e = bsearch(&key, c->ids, c->n_classes, sizeof(*e), cmp_id);
	return e ? e->label : -1;
}

/* Splits buf (NUL-terminated) into lines in place: returns the next line
 * start after terminating the current one (and dropping a CR), or NULL at
 * the end. */
static char *next_line(char **p)
{
	char *s = *p;
	if (!*s)
		return NULL;
	char *nl = strchr(s, '\n');
	if (nl) {
		*nl = '\0';
		*p = nl + 1;
	} else {
		*p = s + strlen(s);
	}
	size_t n = strlen(s);
	if (n && s[n - 1] == '\r')
		s[n - 1] = '\0';
	return s;
}

static int read_text(ctx *c, const char *path, char **buf)
{
	uint8_t *data;
	size_t len;
	FORWARD_IF_ERR(ims_read_file(path, &data, &len, TEXT_LIMIT, c->err));
	data[len] = 0; /* ims_read_file leaves a spare byte */
	if (memchr(data, 0, len) != NULL) {
		/* found by fuzz_imagenet: this buffer leaked */
		free(data);
		return ims_fail(c->err, IMS_EFORMAT,
				"cannot read '%s': not a text file (holds a NUL byte)",
				path);
	}
	/* a UTF-8 byte order mark (an editor's, on Windows) is no part of
	 * the first wnid or header; the buffer stays the one to free */
	if (len >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3))
		memmove(data, data + 3, len - 3 + 1);
	*buf = (char *)data;
	return 0;
}

/* ---- the mapping file ---------------------------------------------------- */

/*
 * Kaggle: "n01440764 tench, Tinca tinca" (wnid, first space, name).
 * devkit: "n02119789 1 kit_fox" (wnid, ILSVRC2012_ID, name).
 * Blank lines are skipped. Duplicate wnids or IDs are errors.
 */
static int load_mapping(ctx *c)
{
	const char *p = c->map_path;
	FORWARD_IF_ERR(read_text(c, p, &c->map_buf));
	size_t cap = 1024, n = 0, line = 0;
	c->w = malloc(cap * sizeof(*c->w));
	RETURN_IF(!c->w, c->err, IMS_ENOMEM, "cannot read '%s': out of memory", p);
	char *s, *cur = c->map_buf;
	while ((s = next_line(&cur))) {
		line++;
		if (!s[strspn(s, " \t")])
			continue;
		char *sp = strpbrk(s, " \t");
		if (sp)
			*sp = '\0';
		RETURN_IF(!*s, c->err, IMS_EFORMAT,
			  "cannot read '%s' line %zu: no wnid at the start", p, line);
		long id = 0;
		if (!c->kaggle) {
			char *end = NULL;
			const char *num = sp ? sp + 1 + strspn(sp + 1, " \t") : "";
			errno = 0;
			id = strtol(num, &end, 10);
			RETURN_IF(end == num || errno || id < 1 ||
					  (*end && *end != ' ' && *end != '\t'),
				  c->err, IMS_EFORMAT,
				  "cannot read '%s' line %zu: expected 'WNID ID NAME' "
				  "(e.g. 'n02119789 1 kit_fox'), ID a positive integer",
				  p, line);
		}
		if (n == cap) {
			wnid_entry *w = realloc(c->w, 2 * cap * sizeof(*w));
			RETURN_IF(!w, c->err, IMS_ENOMEM,
				  "cannot read '%s': out of memory", p);
			c->w = w;
			cap *= 2;
		}
		c->w[n++] = (wnid_entry){s, id, line};
	}
	RETURN_IF(n == 0, c->err, IMS_EFORMAT, "cannot read '%s': no class in it", p);
	RETURN_IF(n > INT32_MAX, c->err, IMS_ELIMIT,
		  "cannot read '%s': too many classes", p);
	qsort(c->w, n, sizeof(*c->w), cmp_wnid);
	for (size_t i = 1; i < n; i++)
		RETURN_IF(strcmp(c->w[i - 1].wnid, c->w[i].wnid) == 0, c->err,
			  IMS_EFORMAT, "cannot read '%s': wnid '%s' is listed twice "
			  "(lines %zu and %zu)", p, c->w[i].wnid, c->w[i - 1].line,
			  c->w[i].line);
	c->n_classes = n;
	if (!c->kaggle) {
		c->ids = malloc(n * sizeof(*c->ids));
		RETURN_IF(!c->ids, c->err, IMS_ENOMEM, "cannot read '%s': out of memory", p);
		for (size_t i = 0; i < n; i++)
			c->ids[i] = (id_label){c->w[i].id, (int32_t)i};
		qsort(c->ids, n, sizeof(*c->ids), cmp_id);
		for (size_t i = 1; i < n; i++)
			RETURN_IF(c->ids[i - 1].id == c->ids[i].id, c->err, IMS_EFORMAT,
				  "cannot read '%s': ID %ld given to '%s' and '%s'", p,
				  c->ids[i].id, c->w[c->ids[i - 1].label].wnid,
				  c->w[c->ids[i].label].wnid);
	}
	if (n != FULL_CLASSES)
		FORWARD_IF_ERR(ds_dataset_note(c->out,
			"'%s' lists %zu classes, not %d: a partial set (labels are "
			"the sorted index among these)", p, n, FULL_CLASSES));
	return 0;
}

static int add_classes(ctx *c, ds_split_list *s)
{
	for (size_t i = 0; i < c->n_classes; i++)
		FORWARD_IF_ERR(ds_list_add_class(&s->list, c->w[i].wnid, NULL, c->err));
	return 0;
}

/* ---- train --------------------------------------------------------------- */

/* Appends "names" to a note list of at most MAX_SHOWN names. */
static void shown_add(char *buf, size_t len, size_t *count, const char *name)
{
	if (*count < MAX_SHOWN) {
		size_t u = strlen(buf);
		/* a name too long for the note is cut: the count still says it */
		if (snprintf(buf + u, len - u, "%s'%s'", u ? ", " : "", name) >=
		    (int)(len - u))
			buf[len - 1] = '\0';
	} else if (*count == MAX_SHOWN) {
		size_t u = strlen(buf);
		snprintf(buf + u, len - u, ", ...");
	}
	(*count)++;
}

static int load_train(ctx *c, ds_list *l)
{
	char dir[4096], rel[8192], path[8192];
	snprintf(dir, sizeof(dir), "%s%strain", c->data, *c->data ? "/" : "");
	FORWARD_IF_ERR(list_dir(c, dir, &c->top));
	char *seen = calloc(c->n_classes, 1);
	RETURN_IF(!seen, c->err, IMS_ENOMEM, "cannot list train: out of memory");
	char ignored[512] = "", empty[512] = "", missing[512] = "";
	size_t n_ignored = 0, n_empty = 0, n_missing = 0;
	int rc = 0;
	for (size_t i = 0; i < c->top.n; i++) {
		const ims_dir_entry *e = &c->top.e[i];
		snprintf(rel, sizeof(rel), "%s/%s", dir, e->name);
		if (e->kind != IMS_KIND_FOLDER) {
			shown_add(ignored, sizeof(ignored), &n_ignored, rel);
			continue;
		}
		int32_t label = label_of(c, e->name);
		if (label < 0)
			GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
				  "cannot list train folder '%s/%s': '%s' is not a wnid "
				  "of '%s'", c->root, rel, e->name, c->map_path);
		seen[label] = 1;
		GOTO_IF_ERR(out, rc, list_dir(c, rel, &c->sub));
		/* Geometric growth: ds_list_reserve grows to exactly n. */
		size_t want = l->count + c->sub.n;
		if (want > l->cap && want < 2 * l->cap)
			want = 2 * l->cap;
		GOTO_IF_ERR(out, rc, ds_list_reserve(l, want, c->err));
		size_t before = l->count;
		for (size_t j = 0; j < c->sub.n; j++) {
			const ims_dir_entry *f = &c->sub.e[j];
			int n = snprintf(path, sizeof(path), "%s/%s", rel, f->name);
			if (n < 0 || (size_t)n >= sizeof(path))
				GOTO_FAIL(out, rc, c->err, IMS_ELIMIT,
					  "cannot list '%s/%s': path too long", c->root, rel);
			if (f->kind != IMS_KIND_FILE || !is_image(f->name)) {
				shown_add(ignored, sizeof(ignored), &n_ignored, path);
				continue;
			}
			GOTO_IF_ERR(out, rc, ds_list_append(l, l->count, label, NULL, 0,
							    path, c->err));
		}
		if (l->count == before)
			shown_add(empty, sizeof(empty), &n_empty, rel);
	}
	for (size_t k = 0; k < c->n_classes; k++)
		if (!seen[k])
			shown_add(missing, sizeof(missing), &n_missing, c->w[k].wnid);
	if (l->count == 0)
		GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
			  "cannot list train: no image in '%s/%s'", c->root, dir);
	if (n_missing)
		GOTO_IF_ERR(out, rc, ds_dataset_note(c->out,
			"%zu class(es) of '%s' have no train folder in '%s' (no train "
			"image): %s", n_missing, c->map_path, dir, missing));
	if (n_empty)
		GOTO_IF_ERR(out, rc, ds_dataset_note(c->out,
			"%zu train folder(s) hold no image: %s", n_empty, empty));
	if (n_ignored)
		GOTO_IF_ERR(out, rc, ds_dataset_note(c->out,
			"ignored %zu train entries that are no image file: %s",
			n_ignored, ignored));
out:
	free(seen);
	return rc;
}

/* ---- val ----------------------------------------------------------------- */

typedef struct val_set {
	val_item *it;
	size_t n, cap;
	char *arena;
	size_t len, acap;
} val_set;

static void val_free(val_set *v)
{
	free(v->it);
	free(v->arena);
	memset(v, 0, sizeof(*v));
}

static int val_add(ctx *c, val_set *v, const char *rel, const char *name,
		   int32_t label)
{
	size_t rl = strlen(rel), nl = strlen(name), need = rl + 1 + nl + 1;
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 1024;
		val_item *it = realloc(v->it, cap * sizeof(*it));
		RETURN_IF(!it, c->err, IMS_ENOMEM, "cannot list val: out of memory");
		v->it = it;
		v->cap = cap;
	}
	if (v->len + need > v->acap) {
		size_t cap = v->acap ? v->acap : 65536;
		while (cap < v->len + need)
			cap *= 2;
		char *a = realloc(v->arena, cap);
		RETURN_IF(!a, c->err, IMS_ENOMEM, "cannot list val: out of memory");
		v->arena = a;
		v->acap = cap;
	}
	val_item *it = &v->it[v->n++];
	it->path_off = v->len;
	it->name_pos = rl + 1;
	const char *dot = strrchr(name, '.');
	it->stem_len = dot ? (size_t)(dot - name) : nl;
	it->label = label;
	memcpy(v->arena + v->len, rel, rl);
	v->arena[v->len + rl] = '/';
	memcpy(v->arena + v->len + rl + 1, name, nl + 1);
	v->len += need;
	return 0;
}

/* Compares a stem (not NUL-terminated) with an item's stem. */
static int stem_cmp(const char *s, size_t n, const val_item *b)
{
	const char *t = b->path + b->name_pos;
	int r = memcmp(s, t, n < b->stem_len ? n : b->stem_len);
	if (r)
		return r;
	return (n > b->stem_len) - (n < b->stem_len);
}

/* Val images in image-number order: by stem (ILSVRC2012_val_<8 digits>),
 * then by full path. */
static int cmp_val(const void *a, const void *b)
{
	const val_item *x = a, *y = b;
	int r = stem_cmp(x->path + x->name_pos, x->stem_len, y);
	return r ? r : strcmp(x->path, y->path);
}

static val_item *val_find(val_set *v, const char *stem, size_t n)
{
	size_t lo = 0, hi = v->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = stem_cmp(stem, n, &v->it[mid]);
		if (r == 0)
			return &v->it[mid];
		if (r < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Kaggle: "ImageId,PredictionString", label = first token. */
static int label_from_csv(ctx *c, val_set *v, const char *valdir)
{
	char path[4096];
	FORWARD_IF_ERR(join(c, path, sizeof(path), KAGGLE_CSV));
	char *buf = NULL;
	FORWARD_IF_ERR(read_text(c, path, &buf));
	int rc = 0;
	size_t line = 0;
	char *s, *cur = buf;
	while ((s = next_line(&cur))) {
		line++;
		if (line == 1) {
			if (strncmp(s, "ImageId,", 8) != 0)
				GOTO_FAIL(out, rc, c->err, IMS_EFORMAT,
					  "cannot read '%s' line 1: expected the header "
					  "'ImageId,PredictionString'", path);
			continue;
		}
		if (!*s)
			continue;
		char *comma = strchr(s, ',');
		if (!comma || comma == s)
			GOTO_FAIL(out, rc, c->err, IMS_EFORMAT,
				  "cannot read '%s' line %zu: expected 'ImageId,"
				  "WNID X1 Y1 X2 Y2 ...'", path, line);
		char *tok = comma + 1 + strspn(comma + 1, " ");
		tok[strcspn(tok, " \t")] = '\0';
		if (!*tok)
			GOTO_FAIL(out, rc, c->err, IMS_EFORMAT,
				  "cannot read '%s' line %zu: no label for '%.*s'", path,
				  line, (int)(comma - s), s);
		int32_t label = label_of(c, tok);
		if (label < 0)
			GOTO_FAIL(out, rc, c->err, IMS_EFORMAT,
				  "cannot read '%s' line %zu: wnid '%s' is not in '%s'",
				  path, line, tok, c->map_path);
		val_item *it = val_find(v, s, (size_t)(comma - s));
		if (!it)
			GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
				  "cannot read '%s' line %zu: image '%.*s' is missing from "
				  "'%s/%s'", path, line, (int)(comma - s), s, c->root, valdir);
		if (it->label >= 0)
			GOTO_FAIL(out, rc, c->err, IMS_EFORMAT,
				  "cannot read '%s' line %zu: a second row for '%.*s'", path,
				  line, (int)(comma - s), s);
		it->label = label;
	}
out:
	free(buf);
	return rc;
}

/* devkit: line i of the ground truth = ILSVRC2012_ID of val image i. */
static int label_from_gt(ctx *c, val_set *v, const char *valdir)
{
	char path[4096];
	FORWARD_IF_ERR(join(c, path, sizeof(path), DEVKIT_GT));
	char *buf = NULL;
	int rc = 0;
	int32_t *gt = NULL;
	size_t n = 0, cap = 0, blank = 0;
	/* Every val image must be ILSVRC2012_val_<8 digits>.<ext>. */
	for (size_t i = 0; i < v->n; i++) {
		const char *name = v->it[i].path + v->it[i].name_pos;
		size_t k = strlen(VAL_PREFIX);
		if (v->it[i].stem_len != k + 8 || strncmp(name, VAL_PREFIX, k) ||
		    strspn(name + k, "0123456789") != 8)
			return ims_fail(c->err, IMS_ENOTFOUND,
					"cannot label val image '%s/%s': its name is not "
					"ILSVRC2012_val_<8 digits>, so '%s' gives it no label",
					c->root, v->it[i].path, DEVKIT_GT);
	}
	rc = read_text(c, path, &buf);
	if (rc == IMS_ENOTFOUND)
		GOTO_FAIL(out, rc, c->err, rc, "cannot label the val images of "
			  "'%s/%s': missing '%s' (or sort %s into wnid folders)",
			  c->root, valdir, path, valdir);
	if (rc < 0)
		goto out;
	size_t line = 0;
	char *s, *cur = buf;
	while ((s = next_line(&cur))) {
		line++;
		s += strspn(s, " \t");
		if (!*s) {
			blank++;
			continue;
		}
		if (blank)
			GOTO_FAIL(out, rc, c->err, IMS_EFORMAT,
				  "cannot read '%s' line %zu: blank line (line i holds the "
				  "label of val image i)", path, line - 1);
		char *end;
		errno = 0;
		long id = strtol(s, &end, 10);
		end += strspn(end, " \t");
		int32_t label = (end == s || *end || errno) ? -2 : label_of_id(c, id);
		if (label == -2)
			GOTO_FAIL(out, rc, c->err, IMS_EFORMAT,
				  "cannot read '%s' line %zu: '%s' is not an "
				  "ILSVRC2012_ID", path, line, s);
		if (label < 0)
			GOTO_FAIL(out, rc, c->err, IMS_EFORMAT,
				  "cannot read '%s' line %zu: ILSVRC2012_ID %ld is not in "
				  "'%s'", path, line, id, c->map_path);
		if (n == cap) {
			cap = cap ? 2 * cap : 65536;
			int32_t *g = realloc(gt, cap * sizeof(*g));
			if (!g)
				GOTO_FAIL(out, rc, c->err, IMS_ENOMEM,
					  "cannot read '%s': out of memory", path);
			gt = g;
		}
		gt[n++] = label;
	}
	/* Items are sorted by number; both sides must match one to one. */
	size_t next = 1; /* the next ground-truth line not yet matched */
	for (size_t i = 0; i < v->n; i++) {
		val_item *it = &v->it[i];
		unsigned long num = strtoul(it->path + it->name_pos + strlen(VAL_PREFIX),
					    NULL, 10);
		if (num == 0 || num > n)
			GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
				  "cannot label val image '%s/%s': '%s' has %zu lines, "
				  "none for image %lu", c->root, it->path, path, n, num);
		if (num != next)
			GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
				  "cannot read '%s' line %zu: image '" VAL_PREFIX "%08zu' "
				  "is missing from '%s/%s'", path, next, next, c->root,
				  valdir);
		it->label = gt[num - 1];
		next++;
	}
	if (next <= n)
		GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
			  "cannot read '%s' line %zu: image '" VAL_PREFIX "%08zu' is "
			  "missing from '%s/%s'", path, next, next, c->root, valdir);
out:
	free(gt);
	free(buf);
	return rc;
}

static int load_val(ctx *c, ds_list *l)
{
	char dir[4096], rel[8192];
	snprintf(dir, sizeof(dir), "%s%sval", c->data, *c->data ? "/" : "");
	FORWARD_IF_ERR(list_dir(c, dir, &c->top));
	val_set v = {0};
	char ignored[512] = "";
	size_t n_ignored = 0;
	int rc = 0, sorted = 0;
	for (size_t i = 0; i < c->top.n; i++)
		sorted |= c->top.e[i].kind == IMS_KIND_FOLDER;
	for (size_t i = 0; i < c->top.n; i++) {
		const ims_dir_entry *e = &c->top.e[i];
		snprintf(rel, sizeof(rel), "%s/%s", dir, e->name);
		if (e->kind == IMS_KIND_FILE && is_image(e->name)) {
			if (sorted)
				GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
					  "cannot label val image '%s/%s': it lies beside "
					  "the wnid folders of '%s/%s', not in one",
					  c->root, rel, c->root, dir);
			GOTO_IF_ERR(out, rc, val_add(c, &v, dir, e->name, -1));
			continue;
		}
		if (e->kind != IMS_KIND_FOLDER) {
			shown_add(ignored, sizeof(ignored), &n_ignored, rel);
			continue;
		}
		/* Already sorted into wnid folders: the folder is the label. */
		int32_t label = label_of(c, e->name);
		if (label < 0)
			GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
				  "cannot list val folder '%s/%s': '%s' is not a wnid of "
				  "'%s'", c->root, rel, e->name, c->map_path);
		GOTO_IF_ERR(out, rc, list_dir(c, rel, &c->sub));
		for (size_t j = 0; j < c->sub.n; j++) {
			const ims_dir_entry *f = &c->sub.e[j];
			if (f->kind == IMS_KIND_FILE && is_image(f->name))
				GOTO_IF_ERR(out, rc, val_add(c, &v, rel, f->name, label));
			else
				shown_add(ignored, sizeof(ignored), &n_ignored, rel);
		}
	}
	if (v.n == 0)
		GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
			  "cannot list val: no image in '%s/%s'", c->root, dir);
	for (size_t i = 0; i < v.n; i++)
		v.it[i].path = v.arena + v.it[i].path_off;
	qsort(v.it, v.n, sizeof(*v.it), cmp_val);
	for (size_t i = 1; i < v.n; i++)
		if (stem_cmp(v.it[i].path + v.it[i].name_pos, v.it[i].stem_len,
			     &v.it[i - 1]) == 0)
			GOTO_FAIL(out, rc, c->err, IMS_EFORMAT,
				  "cannot label val images '%s/%s' and '%s/%s': the same "
				  "image id twice", c->root, v.it[i - 1].path, c->root,
				  v.it[i].path);
	if (sorted) {
		GOTO_IF_ERR(out, rc, ds_dataset_note(c->out,
			"val labels come from the wnid folders of '%s'", dir));
	} else if (c->kaggle) {
		GOTO_IF_ERR(out, rc, label_from_csv(c, &v, dir));
		for (size_t i = 0; i < v.n; i++)
			if (v.it[i].label < 0)
				GOTO_FAIL(out, rc, c->err, IMS_ENOTFOUND,
					  "cannot label val image '%s/%s': no row for "
					  "'%.*s' in '%s/%s'", c->root, v.it[i].path,
					  (int)v.it[i].stem_len, v.it[i].path + v.it[i].name_pos,
					  c->root, KAGGLE_CSV);
	} else {
		GOTO_IF_ERR(out, rc, label_from_gt(c, &v, dir));
	}
	GOTO_IF_ERR(out, rc, ds_list_reserve(l, v.n, c->err));
	for (size_t i = 0; i < v.n; i++)
		GOTO_IF_ERR(out, rc, ds_list_append(l, i, v.it[i].label, NULL, 0,
						    v.it[i].path, c->err));
	if (n_ignored)
		GOTO_IF_ERR(out, rc, ds_dataset_note(c->out,
			"ignored %zu val entries that are no image file: %s",
			n_ignored, ignored));
out:
	val_free(&v);
	return rc;
}

/* ---- layout detection and load ------------------------------------------- */

static int detect(ctx *c)
{
	RETURN_IF(ims_path_kind(c->root) != IMS_KIND_FOLDER, c->err, IMS_ENOTFOUND,
		  "cannot load ImageNet from '%s': not a folder", c->root);
	int k_map = exists_kind(c, KAGGLE_MAP, IMS_KIND_FILE);
	int k_dir = exists_kind(c, KAGGLE_DATA, IMS_KIND_FOLDER);
	int d_map = exists_kind(c, DEVKIT_MAP, IMS_KIND_FILE);
	int d_dir = exists_kind(c, "train", IMS_KIND_FOLDER);
	RETURN_IF(!k_map && !k_dir && !d_map && !d_dir, c->err, IMS_ENOTFOUND,
		  "cannot find ImageNet in '%s': looked for the Kaggle layout ("
		  KAGGLE_MAP ", " KAGGLE_CSV ", " KAGGLE_DATA "/train, " KAGGLE_DATA
		  "/val) and the devkit layout (" DEVKIT_MAP ", train/, val/, "
		  DEVKIT_GT ")", c->root);
	c->kaggle = k_map + k_dir >= d_map + d_dir;
	c->data = c->kaggle ? KAGGLE_DATA : "";
	const char *map = c->kaggle ? KAGGLE_MAP : DEVKIT_MAP;
	const char *need[] = {map, c->kaggle ? KAGGLE_DATA "/train" : "train",
			      c->kaggle ? KAGGLE_DATA "/val" : "val"};
	/* every missing piece named at once, not one per attempt */
	char missing[3 * 4200] = "";
	size_t at = 0;
	for (size_t i = 0; i < 3; i++) {
		if (exists_kind(c, need[i], i ? IMS_KIND_FOLDER : IMS_KIND_FILE))
			continue;
		int n = snprintf(missing + at, sizeof(missing) - at, "%s'%s/%s'",
				 at ? ", " : "", c->root, need[i]);
		if (n > 0 && (size_t)n < sizeof(missing) - at)
			at += (size_t)n;
	}
	RETURN_IF(at, c->err, IMS_ENOTFOUND,
		  "cannot load ImageNet (%s layout) from '%s': missing %s",
		  c->kaggle ? "Kaggle" : "devkit", c->root, missing);
	FORWARD_IF_ERR(join(c, c->map_path, sizeof(c->map_path), map));
	const char *test = c->kaggle ? KAGGLE_DATA "/test" : "test";
	if (exists_kind(c, test, IMS_KIND_FOLDER))
		FORWARD_IF_ERR(ds_dataset_note(c->out,
			"ignored '%s' (test images have no public labels)", test));
	return 0;
}

static int imagenet_load(const char *root, const ds_convert_opts *o,
			 ds_dataset *out, ims_error *err)
{
	(void)o;
	ctx c;
	memset(&c, 0, sizeof(c));
	c.root = root;
	c.out = out;
	c.err = err;
	int rc;
	GOTO_IF_ERR(fail, rc, detect(&c));
	GOTO_IF_ERR(fail, rc, load_mapping(&c));
	ds_split_list *train = ds_dataset_add_split(out, "train");
	ds_split_list *val = ds_dataset_add_split(out, "val");
	if (!train || !val)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "cannot load ImageNet: out of memory");
	GOTO_IF_ERR(fail, rc, add_classes(&c, train));
	GOTO_IF_ERR(fail, rc, add_classes(&c, val));
	/* val first: its label files fail fast, before 1.28M train files. */
	GOTO_IF_ERR(fail, rc, load_val(&c, &val->list));
	GOTO_IF_ERR(fail, rc, load_train(&c, &train->list));
	rc = 0;
	goto done;
fail:
	if (rc == IMS_ENOMEM && err && !err->msg[0])
		ims_fail(err, rc, "cannot load ImageNet: out of memory");
	ds_dataset_release(out);
done:
	ims_dir_listing_release(&c.top);
	ims_dir_listing_release(&c.sub);
	free(c.ids);
	free(c.w);
	free(c.map_buf);
	return rc;
}

const ds_adapter ds_adapter_imagenet = {
	"imagenet",
	"ImageNet ILSVRC2012, Kaggle or devkit layout (train, val; labels = "
	"sorted-wnid index, classes.txt = wnids)",
	imagenet_load, NULL};
