/*
 * safetensors_write.c - the checkpoint format's atomic writer, and the
 * content checksum of what it is about to write (st_writer_checksum,
 * equal to st_checksum of the file it writes).
 *
 * The writer streams the header and the borrowed tensor bytes into a
 * temporary file beside the target rather than building the whole file in
 * memory (ims_write_file_atomic would need one buffer: a second copy of a
 * checkpoint that may hold hundreds of megabytes of optimiser state).
 */
#define _GNU_SOURCE
#include "train/safetensors.h"
#include "train/safetensors_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- writer ------------------------------------------------------------- */

typedef struct st_wtensor {
	char *name;
	int dtype;
	int ndim;
	int64_t *shape;
	const void *data;
	uint64_t nbytes;
} st_wtensor;

struct st_writer {
	st_wtensor *t;
	size_t n, cap;
	char **keys, **values;
	size_t n_meta, cap_meta;
};

int st_writer_create(st_writer **out, ims_error *err)
{
	*out = calloc(1, sizeof(st_writer));
	RETURN_IF(!*out, err, IMS_ENOMEM, "cannot create a safetensors writer: out of memory");
	return 0;
}

void st_writer_free(st_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++) {
		free(w->t[i].name);
		free(w->t[i].shape);
	}
	free(w->t);
	for (size_t i = 0; i < w->n_meta; i++) {
		free(w->keys[i]);
		free(w->values[i]);
	}
	free(w->keys);
	free(w->values);
	free(w);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 16;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

int st_writer_add(st_writer *w, const char *name, int dtype, int ndim,
		  const int64_t *shape, const void *data, ims_error *err)
{
	RETURN_IF(!name, err, IMS_EINVAL, "cannot add a tensor: no name");
	RETURN_IF(!st_valid_utf8(name), err,
		  IMS_EINVAL, "cannot add tensor '%s': name is not valid UTF-8",
		  name);
	RETURN_IF(strcmp(name, "__metadata__") == 0, err, IMS_EINVAL,
		  "cannot add tensor '__metadata__': the name is reserved");
	RETURN_IF(!st_dtype_known(dtype), err, IMS_EINVAL,
		  "cannot add tensor '%s': unknown dtype %d", name, dtype);
	RETURN_IF(ndim < 0 || (ndim > 0 && !shape), err, IMS_EINVAL,
		  "cannot add tensor '%s': bad shape (%d dimensions)", name, ndim);
	for (int i = 0; i < ndim; i++)
		RETURN_IF(shape[i] < 0, err, IMS_EINVAL,
			  "cannot add tensor '%s': dimension %d is %lld", name, i,
			  (long long)shape[i]);
	uint64_t numel, nbytes;
	RETURN_IF(st_shape_bytes(shape, ndim, st_dtype_size(dtype), &numel,
				 &nbytes) < 0,
		  err, IMS_ELIMIT, "cannot add tensor '%s': shape is too large",
		  name);
	RETURN_IF(!data && nbytes > 0, err, IMS_EINVAL,
		  "cannot add tensor '%s': no data for %llu bytes", name,
		  (unsigned long long)nbytes);
	/* Linear: checkpoints hold a few thousand tensors at most, written
	 * once an epoch. */
	for (size_t i = 0; i < w->n; i++)
		RETURN_IF(strcmp(w->t[i].name, name) == 0, err, IMS_EINVAL,
			  "cannot add tensor '%s': a tensor of that name was added before",
			  name);
	RETURN_IF(grow((void **)&w->t, &w->cap, w->n + 1, sizeof(st_wtensor)) < 0,
		  err, IMS_ENOMEM, "cannot add tensor '%s': out of memory", name);
	st_wtensor *t = &w->t[w->n];
	t->name = strdup(name);
	t->shape = malloc((size_t)(ndim ? ndim : 1) * sizeof(int64_t));
	if (!t->name || !t->shape) {
		free(t->name);
		free(t->shape);
		return ims_fail(err, IMS_ENOMEM,
				"cannot add tensor '%s': out of memory", name);
	}
	if (ndim)
		memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
	t->dtype = dtype;
	t->ndim = ndim;
	t->data = data;
	t->nbytes = nbytes;
	w->n++;
	return 0;
}

int st_writer_set_metadata(st_writer *w, const char *key, const char *value,
			   ims_error *err)
{
	RETURN_IF(!key || !value, err, IMS_EINVAL,
		  "cannot set metadata: no key or value");
	RETURN_IF(!st_valid_utf8(key) || !st_valid_utf8(value),
		  err, IMS_EINVAL, "cannot set metadata '%s': not valid UTF-8", key);
	char *v = strdup(value);
	RETURN_IF(!v, err, IMS_ENOMEM, "cannot set metadata '%s': out of memory", key);
	for (size_t i = 0; i < w->n_meta; i++) {
		if (strcmp(w->keys[i], key) == 0) {
			free(w->values[i]);
			w->values[i] = v;
			return 0;
		}
	}
	size_t cap = w->cap_meta;
	char *k = strdup(key);
	if (!k || grow((void **)&w->keys, &cap, w->n_meta + 1, sizeof(char *)) < 0 ||
	    grow((void **)&w->values, &w->cap_meta, w->n_meta + 1, sizeof(char *)) < 0) {
		free(k);
		free(v);
		return ims_fail(err, IMS_ENOMEM,
				"cannot set metadata '%s': out of memory", key);
	}
	w->keys[w->n_meta] = k;
	w->values[w->n_meta] = v;
	w->n_meta++;
	return 0;
}

/* A JSON string literal; s is valid UTF-8 (checked when added). */
static void put_json_str(ims_buf *b, const char *s)
{
	ims_buf_append(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		if (c == '"' || c == '\\') {
			esc[0] = '\\', esc[1] = (char)c;
			ims_buf_append(b, esc, 2);
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			ims_buf_append(b, esc, 6);
		} else {
			ims_buf_append(b, &c, 1);
		}
	}
	ims_buf_append(b, "\"", 1);
}

static int build_header(const st_writer *w, ims_buf *b)
{
	ims_buf_puts(b, "{");
	int first = 1;
	if (w->n_meta) {
		ims_buf_puts(b, "\"__metadata__\":{");
		for (size_t i = 0; i < w->n_meta; i++) {
			if (i)
				ims_buf_puts(b, ",");
			put_json_str(b, w->keys[i]);
			ims_buf_puts(b, ":");
			put_json_str(b, w->values[i]);
		}
		ims_buf_puts(b, "}");
		first = 0;
	}
	uint64_t off = 0;
	for (size_t i = 0; i < w->n; i++) {
		const st_wtensor *t = &w->t[i];
		if (!first)
			ims_buf_puts(b, ",");
		first = 0;
		put_json_str(b, t->name);
		ims_buf_puts(b, ":{\"dtype\":");
		put_json_str(b, st_dtype_name(t->dtype));
		ims_buf_puts(b, ",\"shape\":[");
		for (int d = 0; d < t->ndim; d++) {
			if (d)
				ims_buf_puts(b, ",");
			ims_buf_printf(b, "%llu", (unsigned long long)t->shape[d]);
		}
		ims_buf_puts(b, "],\"data_offsets\":[");
		ims_buf_printf(b, "%llu", (unsigned long long)off);
		ims_buf_puts(b, ",");
		off += t->nbytes;
		ims_buf_printf(b, "%llu", (unsigned long long)off);
		ims_buf_puts(b, "]}");
	}
	ims_buf_puts(b, "}");
	/* Spaces up to a multiple of 8, as the reference writer pads. */
	while (!b->oom && b->len % 8)
		ims_buf_puts(b, " ");
	return b->oom ? -1 : 0;
}

int st_writer_write(const st_writer *w, const char *path, ims_error *err)
{
	ims_buf hdr = {0};
	RETURN_IF(build_header(w, &hdr) < 0, err, IMS_ENOMEM,
		  "cannot write safetensors '%s': out of memory", path);
	/* A checkpoint write killed midway (SIGTERM, SIGKILL) leaves its
	 * temporary behind: the next writer of this path removes it. */
	ims_temp_sweep_for(path, NULL);
	char tmp[4096];
	int fd;
	/* its message names path already */
	int rc = ims_temp_create(path, tmp, sizeof(tmp), &fd, err);
	if (rc < 0) {
		ims_buf_release(&hdr);
		return rc;
	}
	uint8_t len8[8];
	st_store_le64(len8, hdr.len);
	int ok = ims_write_all(fd, len8, 8) == 0 &&
		 ims_write_all(fd, hdr.data, hdr.len) == 0;
	for (size_t i = 0; ok && i < w->n; i++)
		ok = ims_write_all(fd, w->t[i].data, (size_t)w->t[i].nbytes) == 0;
	ims_buf_release(&hdr);
	if (!ok) {
		int e = errno;
		ims_temp_discard(fd, tmp);
		/* the file the caller named: the temporary is gone */
		return ims_fail(err, IMS_EIO, "cannot write '%s': %s", path,
				strerror(e));
	}
	return ims_temp_publish(fd, tmp, path, err);
}

static int cmp_windex(const void *a, const void *b)
{
	const st_wtensor *x = *(const st_wtensor *const *)a;
	const st_wtensor *y = *(const st_wtensor *const *)b;
	return strcmp(x->name, y->name);
}

int st_writer_checksum(const st_writer *w, const char *skip, uint32_t *out,
		       ims_error *err)
{
	const st_wtensor **order = malloc((w->n ? w->n : 1) * sizeof(*order));
	RETURN_IF(!order, err, IMS_ENOMEM, "cannot compute a checksum: out of memory");
	for (size_t i = 0; i < w->n; i++)
		order[i] = &w->t[i];
	qsort(order, w->n, sizeof(*order), cmp_windex);
	uint32_t crc = 0;
	for (size_t i = 0; i < w->n; i++) {
		const st_wtensor *t = order[i];
		crc = st_crc_tensor(crc, t->name, t->dtype, t->ndim, t->shape, t->data,
				 t->nbytes);
	}
	free(order);
	FORWARD_IF_ERR(st_crc_meta(&crc, w->keys, w->values, w->n_meta, skip, err));
	*out = crc;
	return 0;
}
