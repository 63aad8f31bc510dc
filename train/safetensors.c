/*
 * safetensors.c - the checkpoint format: dtypes, and a strict reader over
 * a read-only memory map.
 *
 * The reader validates everything st_open promises before handing out a
 * handle, so later accesses need no checks: every tensor's bytes lie inside
 * the map and the tensors tile the data buffer. Validation follows the
 * reference implementation (safetensors/src/tensor.rs): tensors sorted by
 * data_offsets must start where the previous one ended and the last must
 * end at the end of the file; we additionally refuse duplicate names,
 * which the reference's JSON map would silently collapse.
 *
 * The writer is safetensors_write.c; the content checksum of an open file
 * is here, its writer's twin there.
 */
#define _GNU_SOURCE
#include "train/safetensors.h"
#include "train/safetensors_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- dtypes ------------------------------------------------------------- */

static const struct {
	const char *name;
	size_t size;
} dtypes[] = {
	[ST_BOOL] = {"BOOL", 1},       [ST_U8] = {"U8", 1},
	[ST_I8] = {"I8", 1},           [ST_F8_E5M2] = {"F8_E5M2", 1},
	[ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_I16] = {"I16", 2},
	[ST_U16] = {"U16", 2},         [ST_F16] = {"F16", 2},
	[ST_BF16] = {"BF16", 2},       [ST_I32] = {"I32", 4},
	[ST_U32] = {"U32", 4},         [ST_F32] = {"F32", 4},
	[ST_F64] = {"F64", 8},         [ST_I64] = {"I64", 8},
	[ST_U64] = {"U64", 8},
};
#define N_DTYPES ((int)(sizeof(dtypes) / sizeof(dtypes[0])))

int st_dtype_known(int dtype)
{
	return dtype > 0 && dtype < N_DTYPES && dtypes[dtype].name;
}

const char *st_dtype_name(int dtype)
{
	return st_dtype_known(dtype) ? dtypes[dtype].name : "unknown";
}

int st_dtype_from_name(const char *name)
{
	for (int i = 1; name && i < N_DTYPES; i++)
		if (dtypes[i].name && strcmp(dtypes[i].name, name) == 0)
			return i;
	return 0;
}

size_t st_dtype_size(int dtype)
{
	return st_dtype_known(dtype) ? dtypes[dtype].size : 0;
}

static uint64_t load_le64(const uint8_t *p)
{
	return (uint64_t)ims_load_le32(p) | ((uint64_t)ims_load_le32(p + 4) << 32);
}

void st_store_le64(uint8_t *p, uint64_t v)
{
	ims_store_le32(p, (uint32_t)v);
	ims_store_le32(p + 4, (uint32_t)(v >> 32));
}

/* Offset of the first byte of s[0..n) that is not RFC 3629 UTF-8 (no
 * overlong forms, surrogates or values past U+10FFFF), or n. NUL counts as
 * invalid too: names and values become C strings. */
static size_t utf8_end(const uint8_t *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = s[i];
		size_t len;
		uint32_t cp, min;
		if (c == 0)
			return i;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			len = 2, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4, cp = c & 0x07, min = 0x10000;
		} else {
			return i;
		}
		if (n - i < len)
			return i;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += len;
	}
	return n;
}

int st_valid_utf8(const char *s)
{
	size_t n = strlen(s);
	return utf8_end((const uint8_t *)s, n) == n;
}

/* "[64, 3, 7, 7]" into out, cut short with "..." when it does not fit. */
static const char *shape_str(char *out, size_t cap, const int64_t *shape,
			     int ndim)
{
	size_t len = 0;
	int n = snprintf(out, cap, "[");
	len = (size_t)n;
	for (int i = 0; i < ndim && len < cap; i++) {
		n = snprintf(out + len, cap - len, "%s%lld", i ? ", " : "",
			     (long long)shape[i]);
		len += (size_t)n;
	}
	if (len + 2 <= cap)
		snprintf(out + len, cap - len, "]");
	else
		snprintf(out + cap - 4, 4, "...");
	return out;
}

/* Product of a shape and an element size; 0 on overflow of 2^63 (a real
 * zero-sized tensor is recognised by its zero dimension). */
int st_shape_bytes(const int64_t *shape, int ndim, size_t esize,
		   uint64_t *numel, uint64_t *nbytes)
{
	uint64_t n = 1;
	for (int i = 0; i < ndim; i++)
		if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n) ||
		    n > (uint64_t)INT64_MAX)
			return -1;
	uint64_t b;
	if (__builtin_mul_overflow(n, (uint64_t)esize, &b) ||
	    b > (uint64_t)INT64_MAX)
		return -1;
	*numel = n;
	*nbytes = b;
	return 0;
}

/* ---- reader ------------------------------------------------------------- */

typedef struct st_entry {
	st_tensor t;
	char *name;
	int64_t *shape;
	size_t header_index; /* position in the JSON, to keep sorts stable */
} st_entry;

struct st_file {
	char *path;
	uint8_t *map;
	size_t map_len;
	const uint8_t *buf; /* the data buffer: map + 8 + header length */
	uint64_t buf_len;
	st_entry *entries;  /* file order */
	size_t n;
	size_t *by_name;    /* indexes into entries, sorted by name */
	char **meta_keys;
	char **meta_values;
	size_t n_meta;
};

/* "cannot read safetensors 'path': <why>" */
static int bad(ims_error *err, int code, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int bad(ims_error *err, int code, const char *path, const char *fmt, ...)
{
	char why[IMS_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return ims_fail(err, code, "cannot read safetensors '%s': %s", path, why);
}

/* A JSON number that is an integer in [0, 2^53]. */
static int json_uint(const cJSON *it, uint64_t *out)
{
	if (!cJSON_IsNumber(it))
		return -1;
	double d = it->valuedouble;
	if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(uint64_t)d)
		return -1;
	*out = (uint64_t)d;
	return 0;
}

static int parse_metadata(st_file *f, const cJSON *meta, ims_error *err)
{
	if (!cJSON_IsObject(meta))
		return bad(err, IMS_ECORRUPT, f->path,
			   "\"__metadata__\" is not an object");
	size_t n = (size_t)cJSON_GetArraySize(meta);
	f->meta_keys = calloc(n ? n : 1, sizeof(char *));
	f->meta_values = calloc(n ? n : 1, sizeof(char *));
	if (!f->meta_keys || !f->meta_values)
		return bad(err, IMS_ENOMEM, f->path, "out of memory");
	const cJSON *it;
	cJSON_ArrayForEach(it, meta) {
		if (!cJSON_IsString(it))
			return bad(err, IMS_ECORRUPT, f->path,
				   "metadata '%s' is not a string", it->string);
		for (size_t i = 0; i < f->n_meta; i++)
			if (strcmp(f->meta_keys[i], it->string) == 0)
				return bad(err, IMS_ECORRUPT, f->path,
					   "metadata '%s' appears twice",
					   it->string);
		f->meta_keys[f->n_meta] = strdup(it->string);
		f->meta_values[f->n_meta] = strdup(it->valuestring);
		f->n_meta++;
		if (!f->meta_keys[f->n_meta - 1] || !f->meta_values[f->n_meta - 1])
			return bad(err, IMS_ENOMEM, f->path, "out of memory");
	}
	return 0;
}

/* Parses one tensor entry into e; offsets are returned for the tiling
 * check. */
static int parse_tensor(st_file *f, const cJSON *it, st_entry *e,
			uint64_t *begin, uint64_t *end, ims_error *err)
{
	const char *name = it->string;
	e->name = strdup(name);
	if (!e->name)
		return bad(err, IMS_ENOMEM, f->path, "out of memory");
	e->t.name = e->name;
	if (!cJSON_IsObject(it))
		return bad(err, IMS_ECORRUPT, f->path,
			   "tensor '%s' is not an object", name);

	const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
	if (!cJSON_IsString(dt))
		return bad(err, IMS_ECORRUPT, f->path,
			   "tensor '%s' has no \"dtype\" string", name);
	e->t.dtype = st_dtype_from_name(dt->valuestring);
	if (!e->t.dtype)
		return bad(err, IMS_ECORRUPT, f->path,
			   "tensor '%s' has unknown dtype '%s'", name,
			   dt->valuestring);

	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(it, "shape");
	if (!cJSON_IsArray(shape))
		return bad(err, IMS_ECORRUPT, f->path,
			   "tensor '%s' has no \"shape\" array", name);
	int ndim = cJSON_GetArraySize(shape);
	e->shape = malloc((size_t)(ndim ? ndim : 1) * sizeof(int64_t));
	if (!e->shape)
		return bad(err, IMS_ENOMEM, f->path, "out of memory");
	int d = 0;
	const cJSON *s;
	cJSON_ArrayForEach(s, shape) {
		uint64_t v;
		if (json_uint(s, &v) < 0)
			return bad(err, IMS_ECORRUPT, f->path,
				   "tensor '%s': shape entry %d is not a non-negative integer",
				   name, d);
		e->shape[d++] = (int64_t)v;
	}
	e->t.ndim = ndim;
	e->t.shape = e->shape;

	const cJSON *offs = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
	if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
	    json_uint(cJSON_GetArrayItem(offs, 0), begin) < 0 ||
	    json_uint(cJSON_GetArrayItem(offs, 1), end) < 0)
		return bad(err, IMS_ECORRUPT, f->path,
			   "tensor '%s' has no \"data_offsets\" [begin, end] of non-negative integers",
			   name);
	if (*begin > *end)
		return bad(err, IMS_ECORRUPT, f->path,
			   "tensor '%s' has data_offsets [%llu, %llu] that end before they begin",
			   name, (unsigned long long)*begin,
			   (unsigned long long)*end);

	if (st_shape_bytes(e->shape, ndim, st_dtype_size(e->t.dtype), &e->t.numel,
			&e->t.nbytes) < 0)
		return bad(err, IMS_ECORRUPT, f->path,
			   "tensor '%s': shape is too large", name);
	char sh[96];
	if (e->t.nbytes != *end - *begin)
		return bad(err, IMS_ECORRUPT, f->path,
			   "tensor '%s': shape %s of %s is %llu bytes but data_offsets [%llu, %llu] span %llu",
			   name, shape_str(sh, sizeof(sh), e->shape, ndim),
			   st_dtype_name(e->t.dtype),
			   (unsigned long long)e->t.nbytes,
			   (unsigned long long)*begin, (unsigned long long)*end,
			   (unsigned long long)(*end - *begin));
	if (*end > f->buf_len)
		return bad(err, IMS_ECORRUPT, f->path,
			   "tensor '%s' has data_offsets [%llu, %llu] past the end of the %llu-byte data (truncated?)",
			   name, (unsigned long long)*begin,
			   (unsigned long long)*end,
			   (unsigned long long)f->buf_len);
	e->t.offset = *begin;
	e->t.data = f->buf + *begin;
	return 0;
}

static int cmp_offset(const void *a, const void *b)
{
	const st_entry *x = a, *y = b;
	if (x->t.offset != y->t.offset)
		return x->t.offset < y->t.offset ? -1 : 1;
	if (x->t.nbytes != y->t.nbytes)
		return x->t.nbytes < y->t.nbytes ? -1 : 1;
	return x->header_index < y->header_index ? -1 : x->header_index > y->header_index;
}

/* An entry's index and name, for the sort by name. */
typedef struct {
	size_t idx;
	const char *name;
} name_ref;

static int cmp_name_ref(const void *a, const void *b)
{
	return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

static int parse_header(st_file *f, const cJSON *root, ims_error *err)
{
	if (!cJSON_IsObject(root))
		return bad(err, IMS_ECORRUPT, f->path, "header is not a JSON object");
	size_t total = (size_t)cJSON_GetArraySize(root);
	f->entries = calloc(total ? total : 1, sizeof(st_entry));
	if (!f->entries)
		return bad(err, IMS_ENOMEM, f->path, "out of memory");
	int have_meta = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, root) {
		if (strcmp(it->string, "__metadata__") == 0) {
			if (have_meta)
				return bad(err, IMS_ECORRUPT, f->path,
					   "\"__metadata__\" appears twice");
			have_meta = 1;
			FORWARD_IF_ERR(parse_metadata(f, it, err));
			continue;
		}
		st_entry *e = &f->entries[f->n];
		e->header_index = f->n;
		f->n++;
		uint64_t begin, end;
		FORWARD_IF_ERR(parse_tensor(f, it, e, &begin, &end, err));
	}

	/* Names: sorted once, which finds duplicates and serves st_find. */
	name_ref *refs = malloc((f->n ? f->n : 1) * sizeof(*refs));
	f->by_name = malloc((f->n ? f->n : 1) * sizeof(size_t));
	if (!refs || !f->by_name) {
		free(refs);
		return bad(err, IMS_ENOMEM, f->path, "out of memory");
	}

	/* File order: by offset, so the tiling check is one walk. */
	qsort(f->entries, f->n, sizeof(st_entry), cmp_offset);
	for (size_t i = 0; i < f->n; i++)
		refs[i] = (name_ref){i, f->entries[i].name};
	qsort(refs, f->n, sizeof(*refs), cmp_name_ref);
	for (size_t i = 0; i < f->n; i++) {
		f->by_name[i] = refs[i].idx;
		if (i > 0 && strcmp(refs[i - 1].name, refs[i].name) == 0) {
			int rc = bad(err, IMS_ECORRUPT, f->path,
				     "tensor '%s' appears twice", refs[i].name);
			free(refs);
			return rc;
		}
	}
	free(refs);

	uint64_t expect = 0;
	for (size_t i = 0; i < f->n; i++) {
		const st_entry *e = &f->entries[i];
		const uint64_t b = e->t.offset, end = b + e->t.nbytes;
		if (b < expect)
			return bad(err, IMS_ECORRUPT, f->path,
				   "tensor '%s' at data_offsets [%llu, %llu] overlaps tensor '%s', which ends at %llu",
				   e->name, (unsigned long long)b,
				   (unsigned long long)end, f->entries[i - 1].name,
				   (unsigned long long)expect);
		if (b > expect)
			return bad(err, IMS_ECORRUPT, f->path,
				   "data bytes [%llu, %llu) before tensor '%s' belong to no tensor",
				   (unsigned long long)expect,
				   (unsigned long long)b, e->name);
		expect = end;
	}
	if (expect != f->buf_len)
		return bad(err, IMS_ECORRUPT, f->path,
			   "data bytes [%llu, %llu) after the last tensor belong to no tensor",
			   (unsigned long long)expect,
			   (unsigned long long)f->buf_len);
	return 0;
}

int st_open(const char *path, st_file **out, ims_error *err)
{
	*out = NULL;
	st_file *f = calloc(1, sizeof(*f));
	RETURN_IF(!f, err, IMS_ENOMEM, "cannot read safetensors '%s': out of memory",
		  path);
	int rc = 0;
	cJSON *root = NULL;
	f->path = strdup(path);
	if (!f->path)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM,
			  "cannot read safetensors '%s': out of memory", path);

	int fd;
	struct stat st;
	rc = ims_open_read(path, &fd, &st, err);
	if (rc == IMS_EFORMAT)
		GOTO_FAIL(fail, rc, err, rc,
			  "cannot read safetensors '%s': not a regular file (%s)", path,
			  ims_file_kind(st.st_mode));
	if (rc < 0)
		GOTO_FAIL(fail, rc, err, rc, "cannot open safetensors '%s': %s", path,
			  strerror(errno));
	if ((uint64_t)st.st_size < 8) {
		close(fd);
		GOTO_FAIL(fail, rc, err, IMS_ECORRUPT,
			  "cannot read safetensors '%s': %lld bytes is shorter than the 8-byte header length (truncated?)",
			  path, (long long)st.st_size);
	}
	if ((uint64_t)st.st_size > SIZE_MAX) {
		close(fd);
		GOTO_FAIL(fail, rc, err, IMS_ELIMIT,
			  "cannot read safetensors '%s': too large to map", path);
	}
	f->map_len = (size_t)st.st_size;
	void *map = mmap(NULL, f->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
	int map_errno = errno;
	close(fd);
	if (map == MAP_FAILED)
		GOTO_FAIL(fail, rc, err, IMS_EIO,
			  "cannot map safetensors '%s': %s", path,
			  strerror(map_errno));
	f->map = map;

	uint64_t hlen = load_le64(f->map);
	if (hlen > ST_MAX_HEADER_BYTES)
		GOTO_FAIL(fail, rc, err, IMS_ELIMIT,
			  "cannot read safetensors '%s': header length %llu exceeds the limit of %u bytes (not a safetensors file?)",
			  path, (unsigned long long)hlen, ST_MAX_HEADER_BYTES);
	if (hlen > f->map_len - 8)
		GOTO_FAIL(fail, rc, err, IMS_ECORRUPT,
			  "cannot read safetensors '%s': header length %llu runs past the end of the %zu-byte file (truncated?)",
			  path, (unsigned long long)hlen, f->map_len);
	const uint8_t *hdr = f->map + 8;
	if (hlen == 0 || hdr[0] != '{')
		GOTO_FAIL(fail, rc, err, IMS_EFORMAT,
			  "cannot read safetensors '%s': header does not start with '{' (not a safetensors file?)",
			  path);
	size_t bad_at = utf8_end(hdr, hlen);
	if (bad_at != hlen)
		GOTO_FAIL(fail, rc, err, IMS_ECORRUPT,
			  "cannot read safetensors '%s': header is not valid UTF-8 (at header byte %zu)",
			  path, bad_at);
	f->buf = hdr + hlen;
	f->buf_len = f->map_len - 8 - hlen;

	const char *end = NULL;
	int oom = 0;
	root = ims_json_parse((const char *)hdr, hlen, 0, &end, &oom);
	if (!root && oom)
		GOTO_FAIL(fail, rc, err, IMS_ENOMEM,
			  "cannot read safetensors '%s': out of memory for its %zu-byte header",
			  path, (size_t)hlen);
	if (!root)
		GOTO_FAIL(fail, rc, err, IMS_ECORRUPT,
			  "cannot read safetensors '%s': header is not valid JSON (error near header byte %td)",
			  path, end ? end - (const char *)hdr : (ptrdiff_t)0);
	for (const char *p = end; p < (const char *)hdr + hlen; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			GOTO_FAIL(fail, rc, err, IMS_ECORRUPT,
				  "cannot read safetensors '%s': header has bytes other than padding after the JSON object (at header byte %td)",
				  path, p - (const char *)hdr);
	GOTO_IF_ERR(fail, rc, parse_header(f, root, err));
	cJSON_Delete(root);
	*out = f;
	return 0;

fail:
	cJSON_Delete(root);
	st_close(f);
	return rc;
}

void st_close(st_file *f)
{
	if (!f)
		return;
	if (f->map)
		munmap(f->map, f->map_len);
	for (size_t i = 0; i < f->n; i++) {
		free(f->entries[i].name);
		free(f->entries[i].shape);
	}
	free(f->entries);
	free(f->by_name);
	for (size_t i = 0; i < f->n_meta; i++) {
		free(f->meta_keys[i]);
		free(f->meta_values[i]);
	}
	free(f->meta_keys);
	free(f->meta_values);
	free(f->path);
	free(f);
}

const char *st_path(const st_file *f)
{
	return f->path;
}

size_t st_count(const st_file *f)
{
	return f->n;
}

const st_tensor *st_tensor_at(const st_file *f, size_t i)
{
	return i < f->n ? &f->entries[i].t : NULL;
}

const st_tensor *st_find(const st_file *f, const char *name)
{
	size_t lo = 0, hi = f->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const st_entry *e = &f->entries[f->by_name[mid]];
		int c = strcmp(e->name, name);
		if (c == 0)
			return &e->t;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int st_get(const st_file *f, const char *name, const st_tensor **out,
	   ims_error *err)
{
	*out = st_find(f, name);
	RETURN_IF(!*out, err, IMS_ENOTFOUND,
		  "cannot find tensor '%s' in safetensors '%s'", name, f->path);
	return 0;
}

size_t st_metadata_count(const st_file *f)
{
	return f->n_meta;
}

const char *st_metadata_at(const st_file *f, size_t i, const char **value)
{
	if (i >= f->n_meta)
		return NULL;
	if (value)
		*value = f->meta_values[i];
	return f->meta_keys[i];
}

const char *st_metadata_get(const st_file *f, const char *key)
{
	for (size_t i = 0; i < f->n_meta; i++)
		if (strcmp(f->meta_keys[i], key) == 0)
			return f->meta_values[i];
	return NULL;
}

/* ---- conversions -------------------------------------------------------- */

static int check_count(const st_tensor *t, size_t n, const char *to,
		       ims_error *err)
{
	RETURN_IF(t->numel != n, err, IMS_EINVAL,
		  "cannot convert tensor '%s' to %s: it has %llu elements, the destination %zu",
		  t->name, to, (unsigned long long)t->numel, n);
	return 0;
}

int st_tensor_to_f32(const st_tensor *t, float *out, size_t n, ims_error *err)
{
	FORWARD_IF_ERR(check_count(t, n, "float32", err));
	const uint8_t *p = t->data;
	switch (t->dtype) {
	case ST_F32:
		for (size_t i = 0; i < n; i++) {
			uint32_t b = ims_load_le32(p + 4 * i);
			memcpy(&out[i], &b, sizeof(float));
		}
		return 0;
	case ST_F16:
		for (size_t i = 0; i < n; i++)
			out[i] = ims_f16_to_f32(ims_load_le16(p + 2 * i));
		return 0;
	case ST_BF16:
		for (size_t i = 0; i < n; i++)
			out[i] = ims_bf16_to_f32(ims_load_le16(p + 2 * i));
		return 0;
	case ST_F64:
		for (size_t i = 0; i < n; i++) {
			uint64_t b = load_le64(p + 8 * i);
			double d;
			memcpy(&d, &b, sizeof(d));
			out[i] = (float)d;
		}
		return 0;
	default:
		return ims_fail(err, IMS_EUNSUPPORTED,
				"cannot convert tensor '%s' to float32: dtype %s is not a float type",
				t->name, st_dtype_name(t->dtype));
	}
}

static int is_integer(int dtype)
{
	switch (dtype) {
	case ST_BOOL:
	case ST_U8:
	case ST_I8:
	case ST_I16:
	case ST_U16:
	case ST_I32:
	case ST_U32:
	case ST_I64:
	case ST_U64:
		return 1;
	default:
		return 0;
	}
}

int st_tensor_to_i64(const st_tensor *t, int64_t *out, size_t n, ims_error *err)
{
	FORWARD_IF_ERR(check_count(t, n, "int64", err));
	/* before the loop: an empty float tensor is no integer either */
	if (!is_integer(t->dtype))
		return ims_fail(err, IMS_EUNSUPPORTED,
				"cannot convert tensor '%s' to int64: dtype %s is not an integer type",
				t->name, st_dtype_name(t->dtype));
	const uint8_t *p = t->data;
	for (size_t i = 0; i < n; i++) {
		switch (t->dtype) {
		case ST_BOOL:
			out[i] = p[i] != 0;
			break;
		case ST_U8:
			out[i] = p[i];
			break;
		case ST_I8:
			out[i] = (int8_t)p[i];
			break;
		case ST_I16:
			out[i] = (int16_t)ims_load_le16(p + 2 * i);
			break;
		case ST_U16:
			out[i] = ims_load_le16(p + 2 * i);
			break;
		case ST_I32:
			out[i] = (int32_t)ims_load_le32(p + 4 * i);
			break;
		case ST_U32:
			out[i] = ims_load_le32(p + 4 * i);
			break;
		case ST_I64:
			out[i] = (int64_t)load_le64(p + 8 * i);
			break;
		case ST_U64: {
			uint64_t v = load_le64(p + 8 * i);
			RETURN_IF(v > (uint64_t)INT64_MAX, err, IMS_ELIMIT,
				  "cannot convert tensor '%s' to int64: element %zu is %llu",
				  t->name, i, (unsigned long long)v);
			out[i] = (int64_t)v;
			break;
		}
		default: /* is_integer's list */
			break;
		}
	}
	return 0;
}

/* ---- content checksums --------------------------------------------------- */

/* One string (with its terminator, so "ab"+"c" differs from "a"+"bc"). */
static uint32_t crc_str(uint32_t crc, const char *s)
{
	return ims_crc32c(crc, s, strlen(s) + 1);
}

static uint32_t crc_u64(uint32_t crc, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	return ims_crc32c(crc, b, 8);
}

/* A tensor's part of the checksum: tag, name, dtype, shape, bytes. */
uint32_t st_crc_tensor(uint32_t crc, const char *name, int dtype, int ndim,
		       const int64_t *shape, const void *data, uint64_t nbytes)
{
	crc = ims_crc32c(crc, "T", 1);
	crc = crc_str(crc, name);
	crc = crc_str(crc, st_dtype_name(dtype));
	crc = crc_u64(crc, (uint64_t)ndim);
	for (int d = 0; d < ndim; d++)
		crc = crc_u64(crc, (uint64_t)shape[d]);
	crc = crc_u64(crc, nbytes);
	return ims_crc32c(crc, data, (size_t)nbytes);
}

typedef struct meta_ref {
	const char *key, *value;
} meta_ref;

static int cmp_meta_ref(const void *a, const void *b)
{
	return strcmp(((const meta_ref *)a)->key, ((const meta_ref *)b)->key);
}

/* The metadata's part: entries but `skip`, in key order. */
int st_crc_meta(uint32_t *crc, char *const *keys, char *const *values,
		size_t n, const char *skip, ims_error *err)
{
	meta_ref *refs = malloc((n ? n : 1) * sizeof(*refs));
	RETURN_IF(!refs, err, IMS_ENOMEM, "cannot compute a checksum: out of memory");
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!skip || strcmp(keys[i], skip))
			refs[k++] = (meta_ref){keys[i], values[i]};
	qsort(refs, k, sizeof(*refs), cmp_meta_ref);
	for (size_t i = 0; i < k; i++) {
		*crc = ims_crc32c(*crc, "M", 1);
		*crc = crc_str(*crc, refs[i].key);
		*crc = crc_str(*crc, refs[i].value);
	}
	free(refs);
	return 0;
}

uint32_t st_file_crc32c(const st_file *f, uint64_t *bytes)
{
	if (bytes)
		*bytes = f->map_len;
	return ims_crc32c(0, f->map, f->map_len);
}

int st_checksum(const st_file *f, const char *skip, uint32_t *out,
		ims_error *err)
{
	uint32_t crc = 0;
	for (size_t i = 0; i < f->n; i++) {
		const st_tensor *t = &f->entries[f->by_name[i]].t;
		crc = st_crc_tensor(crc, t->name, t->dtype, t->ndim, t->shape, t->data,
				 t->nbytes);
	}
	FORWARD_IF_ERR(st_crc_meta(&crc, f->meta_keys, f->meta_values, f->n_meta, skip,
				err));
	*out = crc;
	return 0;
}
