/* fuzz_safetensors.c - a safetensors file (train/safetensors.h), as --init,
 * --resume, eval, predict and export open one: st_open validates it; what
 * opens must keep its promises (every tensor found by name, its bytes
 * inside the file, the conversions in bounds) and survive being written
 * again by st_writer with the same content checksum. */
#include "fuzz_util.h"
#include "train/safetensors.h"

/* Converts at most this many elements per tensor (the conversions are
 * linear; the bounds are what is checked). */
#define MAX_CONVERT 4096

static void convert(const st_tensor *t)
{
	static float f32[MAX_CONVERT];
	static int64_t i64[MAX_CONVERT];
	ims_error err;
	if (t->numel > MAX_CONVERT)
		return;
	size_t n = (size_t)t->numel;
	int rf = st_tensor_to_f32(t, f32, n, &err);
	int ri = st_tensor_to_i64(t, i64, n, &err);
	/* every known dtype converts one way or is refused by both */
	if (n && rf == 0 && ri == 0)
		__builtin_trap();
	/* a wrong count is refused */
	if (st_tensor_to_f32(t, f32, n + 1, &err) == 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[600], again[600];
	fuzz_file("w.safetensors", data, size, path, sizeof(path));
	st_file *f = NULL, *g = NULL;
	st_writer *w = NULL;
	ims_error err;
	if (st_open(path, &f, &err) != 0) {
		if (!err.msg[0])
			__builtin_trap();
		return 0;
	}
	uint64_t bytes = 0;
	(void)st_file_crc32c(f, &bytes);
	if (bytes != size)
		__builtin_trap();
	if (st_writer_create(&w, &err) != 0)
		__builtin_trap();
	uint64_t end = 0;
	for (size_t i = 0; i < st_count(f); i++) {
		const st_tensor *t = st_tensor_at(f, i);
		if (!t || st_find(f, t->name) != t || !t->data)
			__builtin_trap();
		/* file order tiles the buffer */
		if (t->offset != end)
			__builtin_trap();
		end = t->offset + t->nbytes;
		if (t->nbytes > size)
			__builtin_trap();
		/* ASan knows the map's end: touch both ends */
		if (t->nbytes) {
			(void)((const volatile uint8_t *)t->data)[0];
			(void)((const volatile uint8_t *)t->data)[t->nbytes - 1];
		}
		convert(t);
		if (st_writer_add(w, t->name, t->dtype, t->ndim, t->shape,
				  t->nbytes ? t->data : NULL, &err) != 0)
			__builtin_trap();
	}
	if (st_tensor_at(f, st_count(f)) != NULL)
		__builtin_trap();
	for (size_t i = 0; i < st_metadata_count(f); i++) {
		const char *v = NULL;
		const char *k = st_metadata_at(f, i, &v);
		if (!k || !v || st_metadata_get(f, k) != v)
			__builtin_trap();
		if (st_writer_set_metadata(w, k, v, &err) != 0)
			__builtin_trap();
	}
	uint32_t c1, c2, c3;
	if (st_checksum(f, NULL, &c1, &err) != 0 ||
	    st_writer_checksum(w, NULL, &c2, &err) != 0 || c1 != c2)
		__builtin_trap();
	snprintf(again, sizeof(again), "%s/again.safetensors", fuzz_dir());
	if (st_writer_write(w, again, &err) != 0 || st_open(again, &g, &err) != 0 ||
	    st_count(g) != st_count(f) || st_metadata_count(g) != st_metadata_count(f) ||
	    st_checksum(g, NULL, &c3, &err) != 0 || c3 != c1)
		__builtin_trap();
	st_close(g);
	st_writer_free(w);
	st_close(f);
	return 0;
}
