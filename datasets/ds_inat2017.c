/*
 * ds_inat2017.c - the iNaturalist 2017 adapter.
 *
 * ROOT/train2017.json and ROOT/val2017.json (COCO-like) name images in one
 * shared tree, ROOT/train_val_images/<Supercategory>/<species>/<hex>.jpg;
 * only the JSON says which split an image belongs to. Each JSON is parsed
 * whole with cJSON (memory proportional to the JSON, about 10x its size at
 * worst), the few fields needed are copied out and the tree is freed
 * before the next file is read. Annotations are matched to images by
 * image_id through a hash map, never by position. Images on disk that no
 * JSON names are counted by walking the tree (cheap next to packing).
 *
 * Labels: species = category id (classes = category names in id order);
 * supercategory = index in byte-wise sorted supercategory names. keep_classes
 * keeps some classes and renumbers them densely, keeping that order.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets.h"

#define IMAGES_DIR "train_val_images"
#define WALK_MAX_DEPTH 8 /* the real tree is 2 deep; bounds link loops */

enum { TRAIN, VAL, N_SPLITS };
static const char *const split_names[N_SPLITS] = {"train", "val"};
static const char *const json_names[N_SPLITS] = {"train2017.json",
						 "val2017.json"};

typedef struct cat {
	char *name;    /* species = its folder name */
	char *super;   /* supercategory = the top folder */
	size_t super_idx; /* in the sorted supercategory names */
	int32_t label; /* output label; -1 when left out by keep_classes */
} cat;

typedef struct image {
	uint64_t id;
	char *file;     /* file_name, relative to root */
	int64_t cat;    /* category id; -1 until its annotation is seen */
	uint64_t ann;   /* id of the annotation that labelled it */
} image;

typedef struct inat {
	const char *root;
	cat *cats;
	size_t n_cats;
	const char **supers; /* sorted, unique; borrowed from cats */
	size_t n_supers;
	image *img[N_SPLITS];
	size_t n_img[N_SPLITS];
} inat;

/* ---- hashing: image id -> index, file name -> (split, index) ---------- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return mix64(h);
}

/* Open addressing; slot value 0 = empty, else 1 + payload. */
typedef struct table {
	uint64_t *keys;     /* id maps */
	const char **strs;  /* string sets */
	size_t *vals;
	size_t mask;
} table;

static int table_init(table *t, size_t n, int strings, ims_error *err)
{
	size_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	memset(t, 0, sizeof(*t));
	t->mask = cap - 1;
	t->vals = calloc(cap, sizeof(*t->vals));
	if (strings)
		t->strs = calloc(cap, sizeof(*t->strs));
	else
		t->keys = calloc(cap, sizeof(*t->keys));
	if (!t->vals || (!t->strs && !t->keys)) {
		free(t->vals);
		free(t->strs);
		free(t->keys);
		memset(t, 0, sizeof(*t));
		return ims_fail(err, IMS_ENOMEM, "cannot index %zu images: out of memory", n);
	}
	return 0;
}

static void table_free(table *t)
{
	free(t->keys);
	free(t->strs);
	free(t->vals);
	memset(t, 0, sizeof(*t));
}

/* Inserts key -> val unless present; returns the slot's value (0 when
 * the key was new, else 1 + the earlier payload). */
static size_t id_put(table *t, uint64_t key, size_t val)
{
	for (size_t i = mix64(key) & t->mask;; i = (i + 1) & t->mask) {
		if (!t->vals[i]) {
			t->keys[i] = key;
			t->vals[i] = val + 1;
			return 0;
		}
		if (t->keys[i] == key)
			return t->vals[i];
	}
}

static size_t id_get(const table *t, uint64_t key)
{
	for (size_t i = mix64(key) & t->mask;; i = (i + 1) & t->mask) {
		if (!t->vals[i] || t->keys[i] == key)
			return t->vals[i];
	}
}

static size_t str_put(table *t, const char *key, size_t val)
{
	for (size_t i = hash_str(key) & t->mask;; i = (i + 1) & t->mask) {
		if (!t->vals[i]) {
			t->strs[i] = key;
			t->vals[i] = val + 1;
			return 0;
		}
		if (strcmp(t->strs[i], key) == 0)
			return t->vals[i];
	}
}

static size_t str_get(const table *t, const char *key)
{
	for (size_t i = hash_str(key) & t->mask;; i = (i + 1) & t->mask) {
		if (!t->vals[i] || strcmp(t->strs[i], key) == 0)
			return t->vals[i];
	}
}

/* ---- JSON ------------------------------------------------------------- */

/* A non-negative integer member: 0, 1 when absent, 2 when not such a
 * number. */
static int get_uint(const cJSON *obj, const char *key, uint64_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v)
		return 1;
	double d = v->valuedouble;
	if (!cJSON_IsNumber(v) || d < 0 || d > 9007199254740992.0 ||
	    d != (double)(uint64_t)d)
		return 2;
	*out = (uint64_t)d;
	return 0;
}

static const char *get_str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* The file_name must stay under root and fit in a list row. */
static int bad_path(const char *p)
{
	if (p[0] == '/' || strpbrk(p, "\t\n\r"))
		return 1;
	for (const char *s = p; *s;) {
		size_t n = strcspn(s, "/");
		if (n == 0 || (n == 1 && s[0] == '.') ||
		    (n == 2 && s[0] == '.' && s[1] == '.'))
			return 1;
		s += n;
		if (*s == '/')
			s++;
	}
	return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Categories from the first JSON: ids dense from 0, names unique. */
static int read_categories(inat *st, const cJSON *arr, const char *path,
			   ims_error *err)
{
	size_t n = (size_t)cJSON_GetArraySize(arr);
	RETURN_IF(n == 0, err, IMS_ECORRUPT, "cannot load '%s': no categories",
		  path);
	st->cats = calloc(n, sizeof(*st->cats));
	st->supers = calloc(n, sizeof(*st->supers));
	RETURN_IF(!st->cats || !st->supers, err, IMS_ENOMEM,
		  "cannot load '%s': out of memory", path);
	st->n_cats = n;
	const cJSON *c;
	size_t pos = 0;
	cJSON_ArrayForEach(c, arr) {
		uint64_t id = 0;
		int r = get_uint(c, "id", &id);
		const char *name = get_str(c, "name");
		const char *super = get_str(c, "supercategory");
		RETURN_IF(r || !name || !super, err, IMS_ECORRUPT,
			  "cannot load '%s': categories[%zu] lacks a valid '%s'", path,
			  pos, r ? "id" : !name ? "name" : "supercategory");
		RETURN_IF(id >= n, err, IMS_ECORRUPT,
			  "cannot load '%s': category id %llu is outside 0..%zu "
			  "(ids must be dense from 0)",
			  path, (unsigned long long)id, n - 1);
		RETURN_IF(st->cats[id].name, err, IMS_ECORRUPT,
			  "cannot load '%s': category id %llu appears twice", path,
			  (unsigned long long)id);
		const int bad_name = strpbrk(name, "\n\r/") != NULL;
		RETURN_IF(bad_name || strpbrk(super, "\n\r/"), err, IMS_ECORRUPT,
			  "cannot load '%s': category %llu has a %s with a line "
			  "break or '/' ('%s')",
			  path, (unsigned long long)id, bad_name ? "name" : "supercategory",
			  bad_name ? name : super);
		st->cats[id].name = strdup(name);
		st->cats[id].super = strdup(super);
		RETURN_IF(!st->cats[id].name || !st->cats[id].super, err,
			  IMS_ENOMEM, "cannot load '%s': out of memory", path);
		pos++;
	}
	/* Species names become class names: they must be unique. */
	const char **names = malloc(n * sizeof(*names));
	RETURN_IF(!names, err, IMS_ENOMEM, "cannot load '%s': out of memory", path);
	for (size_t i = 0; i < n; i++)
		names[i] = st->cats[i].name;
	qsort(names, n, sizeof(*names), cmp_str_ptr);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(names[i - 1], names[i]) == 0) {
			int rc = ims_fail(err, IMS_ECORRUPT,
					  "cannot load '%s': two categories are named '%s'",
					  path, names[i]);
			free(names);
			return rc;
		}
	}
	free(names);
	for (size_t i = 0; i < n; i++)
		st->supers[i] = st->cats[i].super;
	qsort(st->supers, n, sizeof(*st->supers), cmp_str_ptr);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (k == 0 || strcmp(st->supers[k - 1], st->supers[i]) != 0)
			st->supers[k++] = st->supers[i];
	st->n_supers = k;
	for (size_t i = 0; i < n; i++) {
		const char **hit = bsearch(&st->cats[i].super, st->supers, k,
					   sizeof(*st->supers), cmp_str_ptr);
		st->cats[i].super_idx = (size_t)(hit - st->supers);
	}
	return 0;
}

/* The second JSON's categories must be the first one's. */
static int check_categories(const inat *st, const cJSON *arr,
			    const char *path, const char *first,
			    ims_error *err)
{
	size_t n = (size_t)cJSON_GetArraySize(arr);
	RETURN_IF(n != st->n_cats, err, IMS_ECORRUPT,
		  "cannot load '%s': %zu categories, %s has %zu", path, n, first,
		  st->n_cats);
	const cJSON *c;
	size_t pos = 0;
	cJSON_ArrayForEach(c, arr) {
		uint64_t id = 0;
		const char *name = get_str(c, "name");
		const char *super = get_str(c, "supercategory");
		RETURN_IF(get_uint(c, "id", &id) || !name || !super, err,
			  IMS_ECORRUPT,
			  "cannot load '%s': categories[%zu] lacks an id, name or "
			  "supercategory",
			  path, pos);
		RETURN_IF(id >= n || strcmp(name, st->cats[id].name) ||
				  strcmp(super, st->cats[id].super),
			  err, IMS_ECORRUPT,
			  "cannot load '%s': category %llu ('%s', %s) differs from %s",
			  path, (unsigned long long)id, name, super, first);
		pos++;
	}
	return 0;
}

static int read_images(inat *st, int s, const cJSON *arr, table *ids,
		       const char *path, ims_error *err)
{
	size_t n = (size_t)cJSON_GetArraySize(arr);
	st->img[s] = calloc(n ? n : 1, sizeof(image));
	RETURN_IF(!st->img[s], err, IMS_ENOMEM, "cannot load '%s': out of memory",
		  path);
	FORWARD_IF_ERR(table_init(ids, n, 0, err));
	const cJSON *o;
	size_t pos = 0;
	cJSON_ArrayForEach(o, arr) {
		image *im = &st->img[s][pos];
		int r = get_uint(o, "id", &im->id);
		const char *file = get_str(o, "file_name");
		RETURN_IF(r || !file, err, IMS_ECORRUPT,
			  "cannot load '%s': images[%zu] lacks a valid '%s'", path, pos,
			  r ? "id" : "file_name");
		RETURN_IF(bad_path(file), err, IMS_ECORRUPT,
			  "cannot load '%s': image id %llu has file_name '%s', "
			  "which is not a plain relative path",
			  path, (unsigned long long)im->id, file);
		size_t prev = id_put(ids, im->id, pos);
		RETURN_IF(prev, err, IMS_ECORRUPT,
			  "cannot load '%s': image id %llu appears twice (images[%zu] "
			  "and images[%zu])",
			  path, (unsigned long long)im->id, prev - 1, pos);
		im->file = strdup(file);
		RETURN_IF(!im->file, err, IMS_ENOMEM, "cannot load '%s': out of memory",
			  path);
		im->cat = -1;
		st->n_img[s] = ++pos;
	}
	return 0;
}

static int read_annotations(inat *st, int s, const cJSON *arr,
			    const table *ids, const char *path,
			    ims_error *err)
{
	const char *json = json_names[s];
	const cJSON *a;
	size_t pos = 0;
	cJSON_ArrayForEach(a, arr) {
		uint64_t aid = pos, img_id = 0, cat_id = 0;
		int r = get_uint(a, "id", &aid);
		RETURN_IF(r == 2, err, IMS_ECORRUPT,
			  "cannot load '%s': annotations[%zu] has a bad 'id'", path, pos);
		r = get_uint(a, "image_id", &img_id);
		RETURN_IF(r, err, IMS_ECORRUPT,
			  "cannot load '%s': annotation %llu lacks a valid 'image_id'",
			  path, (unsigned long long)aid);
		r = get_uint(a, "category_id", &cat_id);
		RETURN_IF(r, err, IMS_ECORRUPT,
			  "cannot load '%s': annotation %llu lacks a valid 'category_id'",
			  path, (unsigned long long)aid);
		size_t slot = id_get(ids, img_id);
		RETURN_IF(!slot, err, IMS_ECORRUPT,
			  "cannot load '%s': annotation %llu names image id %llu, which "
			  "%s does not list",
			  path, (unsigned long long)aid, (unsigned long long)img_id, json);
		RETURN_IF(cat_id >= st->n_cats, err, IMS_ECORRUPT,
			  "cannot load '%s': annotation %llu names category id %llu, "
			  "which %s does not list (ids 0..%zu)",
			  path, (unsigned long long)aid, (unsigned long long)cat_id,
			  json_names[TRAIN], st->n_cats - 1);
		image *im = &st->img[s][slot - 1];
		RETURN_IF(im->cat >= 0, err, IMS_ECORRUPT,
			  "cannot load '%s': image id %llu has two annotations (%llu "
			  "and %llu); iNat2017 has one label per image",
			  path, (unsigned long long)img_id, (unsigned long long)im->ann,
			  (unsigned long long)aid);
		im->cat = (int64_t)cat_id;
		im->ann = aid;
		pos++;
	}
	for (size_t i = 0; i < st->n_img[s]; i++) {
		const image *im = &st->img[s][i];
		RETURN_IF(im->cat < 0, err, IMS_ECORRUPT,
			  "cannot load '%s': image id %llu ('%s') has no annotation",
			  path, (unsigned long long)im->id, im->file);
	}
	return 0;
}

static const cJSON *get_array(const cJSON *doc, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
	return cJSON_IsArray(v) ? v : NULL;
}

/* Reads split s's JSON: categories (or checks them), images, labels. */
static int load_json(inat *st, int s, ims_error *err)
{
	char path[4096];
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), st->root, json_names[s],
				     err));
	uint8_t *text;
	size_t len;
	FORWARD_IF_ERR(ims_read_file(path, &text, &len, 0, err));
	text[len] = '\0'; /* ims_read_file leaves a spare byte */
	const char *end = NULL;
	int oom = 0;
	cJSON *doc = ims_json_parse((const char *)text, len + 1, 1, &end, &oom);
	size_t at = end ? (size_t)(end - (const char *)text) : 0;
	free(text);
	/* its tree takes several times the file's size */
	RETURN_IF(!doc && oom, err, IMS_ENOMEM,
		  "cannot parse '%s' (%zu bytes): out of memory", path, len);
	RETURN_IF(!doc, err, IMS_ECORRUPT,
		  "cannot parse '%s': invalid or truncated JSON at byte %zu of %zu",
		  path, at, len);
	int rc = 0;
	table ids = {0};
	const cJSON *cats = get_array(doc, "categories");
	const cJSON *imgs = get_array(doc, "images");
	const cJSON *anns = get_array(doc, "annotations");
	if (!cJSON_IsObject(doc) || !cats || !imgs || !anns)
		GOTO_FAIL(out, rc, err, IMS_ECORRUPT,
			  "cannot load '%s': no '%s' array at the top level", path,
			  !cJSON_IsObject(doc) || !imgs ? "images"
			  : !cats		      ? "categories"
						      : "annotations");
	if (s == TRAIN)
		GOTO_IF_ERR(out, rc, read_categories(st, cats, path, err));
	else
		GOTO_IF_ERR(out, rc, check_categories(st, cats, path,
						      json_names[TRAIN], err));
	GOTO_IF_ERR(out, rc, read_images(st, s, imgs, &ids, path, err));
	GOTO_IF_ERR(out, rc, read_annotations(st, s, anns, &ids, path, err));
out:
	table_free(&ids);
	cJSON_Delete(doc);
	return rc;
}

/* ---- files on disk ---------------------------------------------------- */

/* Splits are disjoint, no file is named twice, every named file exists.
 * Fills files: file name -> index * 2 + split. */
static int check_files(const inat *st, table *files, ims_error *err)
{
	FORWARD_IF_ERR(table_init(files, st->n_img[TRAIN] + st->n_img[VAL], 1, err));
	for (int s = 0; s < N_SPLITS; s++) {
		for (size_t i = 0; i < st->n_img[s]; i++) {
			const image *im = &st->img[s][i];
			size_t prev = str_put(files, im->file, i * 2 + (size_t)s);
			if (!prev)
				continue;
			int ps = (int)((prev - 1) % 2);
			const image *o = &st->img[ps][(prev - 1) / 2];
			RETURN_IF(ps != s, err, IMS_ECORRUPT,
				  "cannot load '%s': image '%s' is listed in both %s (id "
				  "%llu) and %s (id %llu): splits must be disjoint",
				  st->root, im->file, json_names[ps],
				  (unsigned long long)o->id, json_names[s],
				  (unsigned long long)im->id);
			return ims_fail(err, IMS_ECORRUPT,
					"cannot load '%s/%s': image ids %llu and %llu name "
					"the same file '%s'",
					st->root, json_names[s], (unsigned long long)o->id,
					(unsigned long long)im->id, im->file);
		}
	}
	for (int s = 0; s < N_SPLITS; s++) {
		for (size_t i = 0; i < st->n_img[s]; i++) {
			const image *im = &st->img[s][i];
			char p[4096];
			struct stat sb;
			FORWARD_IF_ERR(ims_path_join(p, sizeof(p), st->root, im->file, err));
			int e = stat(p, &sb) != 0 ? errno : 0;
			RETURN_IF(e, err, e == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
				  "cannot find image '%s' under '%s' (id %llu in %s): %s",
				  im->file, st->root, (unsigned long long)im->id,
				  json_names[s], strerror(e));
			RETURN_IF(!S_ISREG(sb.st_mode), err, IMS_EIO,
				  "cannot find image '%s' under '%s' (id %llu in %s): "
				  "not a regular file (%s)",
				  im->file, st->root, (unsigned long long)im->id,
				  json_names[s], ims_file_kind(sb.st_mode));
		}
	}
	return 0;
}

typedef struct walk {
	const table *files;
	size_t rel_off;    /* path + rel_off is relative to root */
	size_t ignored;
	char first[4096];  /* the byte-wise smallest ignored path */
} walk;

/* Counts regular files under path that no JSON names. */
static int walk_dir(walk *w, char *path, size_t cap, int depth,
		    ims_error *err)
{
	ims_dir_listing ls = {0};
	FORWARD_IF_ERR(ims_dir_list(path, 0, &ls, err));
	size_t len = strlen(path);
	int rc = 0;
	for (size_t i = 0; i < ls.n && rc == 0; i++) {
		const char *name = ls.e[i].name;
		size_t n = strlen(name);
		if (len + 1 + n + 1 > cap)
			GOTO_FAIL(out, rc, err, IMS_ELIMIT, "cannot walk '%s/%s': path too long",
				  path, name);
		path[len] = '/';
		memcpy(path + len + 1, name, n + 1);
		if (ls.e[i].kind == IMS_KIND_FOLDER && depth < WALK_MAX_DEPTH) {
			rc = walk_dir(w, path, cap, depth + 1, err);
		} else if (ls.e[i].kind == IMS_KIND_FILE) {
			const char *rel = path + w->rel_off;
			if (!str_get(w->files, rel)) {
				if (w->ignored++ == 0 || strcmp(rel, w->first) < 0)
					snprintf(w->first, sizeof(w->first), "%s", rel);
			}
		}
		path[len] = '\0';
	}
out:
	ims_dir_listing_release(&ls);
	return rc;
}

/* ---- labels ----------------------------------------------------------- */

/* Sets every category's label and fills names (the class names, label
 * order; borrowed). keep: NULL or "A,B,..." (spaces around names trimmed). */
static int assign_labels(inat *st, int by_super, const char *keep,
			 const char ***names, size_t *n_names, ims_error *err)
{
	size_t n_all = by_super ? st->n_supers : st->n_cats;
	int rc = 0;
	char *dup = NULL;
	unsigned char *kept = calloc(n_all, 1);
	const char **sorted = malloc(n_all * sizeof(*sorted));
	*names = malloc(n_all * sizeof(**names));
	if (!kept || !sorted || !*names)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot assign labels: out of memory");
	for (size_t i = 0; i < n_all; i++)
		sorted[i] = by_super ? st->supers[i] : st->cats[i].name;
	if (!by_super)
		qsort(sorted, n_all, sizeof(*sorted), cmp_str_ptr);
	if (!keep) {
		memset(kept, 1, n_all);
	} else {
		dup = strdup(keep);
		if (!dup)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot assign labels: out of memory");
		for (char *tok = dup, *next; tok; tok = next) {
			next = strchr(tok, ',');
			if (next)
				*next++ = '\0';
			while (*tok == ' ')
				tok++;
			for (size_t l = strlen(tok); l && tok[l - 1] == ' ';)
				tok[--l] = '\0';
			if (!*tok)
				GOTO_FAIL(out, rc, err, IMS_EINVAL,
					  "cannot use classes '%s': empty class name", keep);
			const char **hit = bsearch(&tok, sorted, n_all, sizeof(*sorted),
						   cmp_str_ptr);
			if (!hit)
				GOTO_FAIL(out, rc, err, IMS_ENOTFOUND,
					  "cannot keep class '%s': %s names no %s of that name",
					  tok, json_names[TRAIN],
					  by_super ? "supercategory" : "species");
			if (by_super) {
				kept[hit - sorted] = 1;
			} else {
				for (size_t i = 0; i < st->n_cats; i++)
					if (strcmp(st->cats[i].name, tok) == 0)
						kept[i] = 1;
			}
		}
	}
	/* Dense labels in the original order: id order for species, sorted
	 * order for supercategories (which is how supers is kept). */
	int32_t *lab = malloc(n_all * sizeof(*lab));
	if (!lab)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot assign labels: out of memory");
	*n_names = 0;
	for (size_t i = 0; i < n_all; i++) {
		lab[i] = -1;
		if (kept[i]) {
			lab[i] = (int32_t)*n_names;
			(*names)[(*n_names)++] = by_super ? st->supers[i] : st->cats[i].name;
		}
	}
	for (size_t i = 0; i < st->n_cats; i++)
		st->cats[i].label = lab[by_super ? st->cats[i].super_idx : i];
	free(lab);
out:
	if (rc < 0) {
		free(*names);
		*names = NULL;
	}
	free(dup);
	free(kept);
	free(sorted);
	return rc;
}

/* ---- the adapter ------------------------------------------------------ */

static void inat_free(inat *st)
{
	for (size_t i = 0; i < st->n_cats; i++) {
		free(st->cats[i].name);
		free(st->cats[i].super);
	}
	free(st->cats);
	free(st->supers);
	for (int s = 0; s < N_SPLITS; s++) {
		for (size_t i = 0; i < st->n_img[s]; i++)
			free(st->img[s][i].file);
		free(st->img[s]);
	}
}

/* "train_val_images/<super>/<name>/" is where image im should lie. */
static int in_own_folder(const inat *st, const image *im)
{
	const cat *c = &st->cats[im->cat];
	const char *p = im->file;
	size_t n = strlen(IMAGES_DIR), ns = strlen(c->super), nn = strlen(c->name);
	return strncmp(p, IMAGES_DIR "/", n + 1) == 0 &&
	       strncmp(p + n + 1, c->super, ns) == 0 && p[n + 1 + ns] == '/' &&
	       strncmp(p + n + 2 + ns, c->name, nn) == 0 &&
	       p[n + 2 + ns + nn] == '/';
}

static int fill_dataset(const inat *st, const char **names, size_t n_names,
			int by_super, ds_dataset *out, ims_error *err)
{
	size_t dropped[N_SPLITS] = {0}, misplaced = 0;
	const image *first_misplaced = NULL;
	for (int s = 0; s < N_SPLITS; s++) {
		ds_split_list *sp = ds_dataset_add_split(out, split_names[s]);
		RETURN_IF(!sp, err, IMS_ENOMEM, "cannot add split '%s': out of memory",
			  split_names[s]);
		for (size_t k = 0; k < n_names; k++)
			FORWARD_IF_ERR(ds_list_add_class(&sp->list, names[k], NULL, err));
		FORWARD_IF_ERR(ds_list_reserve(&sp->list, st->n_img[s], err));
		for (size_t i = 0; i < st->n_img[s]; i++) {
			const image *im = &st->img[s][i];
			if (!in_own_folder(st, im) && misplaced++ == 0)
				first_misplaced = im;
			int32_t label = st->cats[im->cat].label;
			if (label < 0) {
				dropped[s]++;
				continue;
			}
			FORWARD_IF_ERR(ds_list_append(&sp->list, im->id, label, NULL, 0,
						      im->file, err));
		}
	}
	size_t n_all = by_super ? st->n_supers : st->n_cats;
	const char *what = by_super ? "supercategories" : "species";
	if (n_names < n_all &&
	    ds_dataset_note(out, "kept %zu of %zu %s: left out %zu train and %zu "
			    "val images of the other classes",
			    n_names, n_all, what, dropped[TRAIN], dropped[VAL]) < 0)
		return ims_fail(err, IMS_ENOMEM, "cannot add a note: out of memory");
	if (misplaced &&
	    ds_dataset_note(out, "%zu images lie outside their category's folder "
			    "(first: '%s', category %lld '%s'); labels follow the JSON",
			    misplaced, first_misplaced->file,
			    (long long)first_misplaced->cat,
			    st->cats[first_misplaced->cat].name) < 0)
		return ims_fail(err, IMS_ENOMEM, "cannot add a note: out of memory");
	return 0;
}

/* The layout's three pieces, every missing one named in one message. */
static int check_layout(const char *root, ims_error *err)
{
	RETURN_IF(ims_path_kind(root) != IMS_KIND_FOLDER, err, IMS_ENOTFOUND,
		  "cannot find iNaturalist 2017 under '%s': not a folder "
		  "(looked for train2017.json, val2017.json and " IMAGES_DIR
		  "/ in it)",
		  root);
	static const char *const need[] = {"train2017.json", "val2017.json",
					   IMAGES_DIR "/"};
	char missing[3 * 4200] = "";
	size_t at = 0;
	for (int i = 0; i < 3; i++) {
		char p[4096];
		FORWARD_IF_ERR(ims_path_join(p, sizeof(p), root, need[i], err));
		if (ims_path_kind(p) != IMS_KIND_NONE)
			continue;
		int n = snprintf(missing + at, sizeof(missing) - at, "%s'%s/%s'",
				 at ? ", " : "", root, need[i]);
		if (n > 0 && (size_t)n < sizeof(missing) - at)
			at += (size_t)n;
	}
	RETURN_IF(at, err, IMS_ENOTFOUND,
		  "cannot find iNaturalist 2017 under '%s': looked for "
		  "train2017.json, val2017.json and " IMAGES_DIR "/ in it; "
		  "missing %s",
		  root, missing);
	return 0;
}

static int inat_load(const char *root, const ds_convert_opts *o,
		     ds_dataset *out, ims_error *err)
{
	const char *label = o ? o->label : NULL;
	const char *keep = o ? o->keep_classes : NULL;
	int by_super = 0;
	if (label && strcmp(label, "supercategory") == 0)
		by_super = 1;
	else if (label && strcmp(label, "species") != 0)
		return ims_fail(err, IMS_EINVAL,
				"cannot use label '%s' for inat2017: use 'species' or "
				"'supercategory'",
				label);
	inat st;
	memset(&st, 0, sizeof(st));
	st.root = root;
	table files = {0};
	const char **names = NULL;
	size_t n_names = 0;
	int rc = 0;
	GOTO_IF_ERR(fail, rc, check_layout(root, err));
	for (int s = 0; s < N_SPLITS; s++)
		GOTO_IF_ERR(fail, rc, load_json(&st, s, err));
	GOTO_IF_ERR(fail, rc, check_files(&st, &files, err));
	GOTO_IF_ERR(fail, rc, assign_labels(&st, by_super, keep, &names, &n_names,
					    err));
	GOTO_IF_ERR(fail, rc, fill_dataset(&st, names, n_names, by_super, out, err));

	walk w = {.files = &files};
	char path[4096];
	GOTO_IF_ERR(fail, rc, ims_path_join(path, sizeof(path), root, IMAGES_DIR, err));
	w.rel_off = strlen(path) - strlen(IMAGES_DIR);
	GOTO_IF_ERR(fail, rc, walk_dir(&w, path, sizeof(path), 0, err));
	if (w.ignored &&
	    ds_dataset_note(out, "ignored %zu images under '%s/' that neither %s "
			    "nor %s lists (first: '%s')",
			    w.ignored, IMAGES_DIR, json_names[TRAIN],
			    json_names[VAL], w.first) < 0)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM, "cannot add a note: out of memory");
	goto done;
fail:
	ds_dataset_release(out);
done:
	free(names);
	table_free(&files);
	inat_free(&st);
	return rc;
}

const ds_adapter ds_adapter_inat2017 = {
	"inat2017",
	"iNaturalist 2017: train2017.json, val2017.json and train_val_images/ "
	"(--label species|supercategory, --classes)",
	inat_load, NULL};
