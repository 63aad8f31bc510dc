/*
 * test_safetensors.c - the checkpoint format: round trips through the
 * writer and reader, a file built byte by byte here, the writer's exact
 * bytes (and the whole file's CRC-32C), half-precision conversions, and
 * every corruption the reader must refuse with a message naming the file
 * and the tensor.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "train/safetensors.h"

static char dir[4096];

static void path_in(char *out, size_t n, const char *name)
{
	if ((size_t)snprintf(out, n, "%s/%s", dir, name) >= n) {
		fprintf(stderr, "scratch path too long\n");
		exit(1);
	}
}

/* Writes an 8-byte length `hlen`, the header text, then data. */
static void write_raw(const char *path, uint64_t hlen, const char *hdr,
		      size_t hdr_bytes, const void *data, size_t dlen)
{
	FILE *f = fopen(path, "wb");
	if (!f) {
		perror(path);
		exit(1);
	}
	uint8_t len8[8];
	for (int i = 0; i < 8; i++)
		len8[i] = (uint8_t)(hlen >> (8 * i));
	fwrite(len8, 1, 8, f);
	fwrite(hdr, 1, hdr_bytes, f);
	if (dlen)
		fwrite(data, 1, dlen, f);
	fclose(f);
}

/* A well-formed file: the header's length is its own. */
static void write_file(const char *path, const char *hdr, const void *data,
		       size_t dlen)
{
	write_raw(path, strlen(hdr), hdr, strlen(hdr), data, dlen);
}

static int bits_eq(float a, float b)
{
	return memcmp(&a, &b, sizeof(float)) == 0;
}

static void test_dtypes(void)
{
	CHECK_EQ_STR(st_dtype_name(ST_F32), "F32");
	CHECK_EQ_STR(st_dtype_name(ST_BF16), "BF16");
	CHECK_EQ_STR(st_dtype_name(0), "unknown");
	CHECK_EQ_STR(st_dtype_name(999), "unknown");
	for (int d = ST_BOOL; d <= ST_U64; d++)
		CHECK_EQ_INT(st_dtype_from_name(st_dtype_name(d)), d);
	CHECK_EQ_INT(st_dtype_from_name("f32"), 0);
	CHECK_EQ_INT(st_dtype_from_name("F33"), 0);
	CHECK_EQ_INT(st_dtype_size(ST_F64), 8);
	CHECK_EQ_INT(st_dtype_size(ST_I64), 8);
	CHECK_EQ_INT(st_dtype_size(ST_F32), 4);
	CHECK_EQ_INT(st_dtype_size(ST_F16), 2);
	CHECK_EQ_INT(st_dtype_size(ST_BF16), 2);
	CHECK_EQ_INT(st_dtype_size(ST_I16), 2);
	CHECK_EQ_INT(st_dtype_size(ST_I8), 1);
	CHECK_EQ_INT(st_dtype_size(ST_U8), 1);
	CHECK_EQ_INT(st_dtype_size(ST_BOOL), 1);
	CHECK_EQ_INT(st_dtype_size(0), 0);
}

/* Names and contents of the round-trip tensors. */
static const float f32v[6] = {1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-30f};
static const double f64v[4] = {1.0, 0.1, -1e300, 3.0000001};
static const uint16_t f16v[4] = {0x3c00, 0xc100, 0x7bff, 0x0001};
static const uint16_t bf16v[3] = {0x3f80, 0xc020, 0x7f80};
static const int64_t i64v[2] = {INT64_MIN, 1234567890123LL};
static const int32_t i32v[2] = {-7, 2147483647};
static const int16_t i16v[2] = {-32768, 5};
static const int8_t i8v[3] = {-128, 0, 127};
static const uint8_t u8v[5] = {0, 1, 2, 254, 255};
static const uint16_t u16v[1] = {65535};
static const uint32_t u32v[2] = {4294967295u, 3};
static const uint64_t u64v[2] = {UINT64_MAX, 42};
static const uint8_t boolv[3] = {1, 0, 1};
static const float scalarv = 42.5f;

static void test_round_trip(void)
{
	ims_error e;
	ims_error_clear(&e);
	char path[4200];
	path_in(path, sizeof(path), "rt.safetensors");

	st_writer *w = NULL;
	CHECK_OK(st_writer_create(&w, &e), &e);
	const int64_t s23[] = {2, 3}, s4[] = {4}, s22[] = {2, 2}, s3[] = {3},
		      s2[] = {2}, s112[] = {1, 1, 2}, s5[] = {5}, s1[] = {1},
		      s04[] = {0, 4}, s0[] = {0};
	CHECK_OK(st_writer_add(w, "conv.weight", ST_F32, 2, s23, f32v, &e), &e);
	CHECK_OK(st_writer_add(w, "f64", ST_F64, 1, s4, f64v, &e), &e);
	CHECK_OK(st_writer_add(w, "half", ST_F16, 2, s22, f16v, &e), &e);
	CHECK_OK(st_writer_add(w, "bf", ST_BF16, 1, s3, bf16v, &e), &e);
	CHECK_OK(st_writer_add(w, "i64", ST_I64, 1, s2, i64v, &e), &e);
	CHECK_OK(st_writer_add(w, "i32", ST_I32, 3, s112, i32v, &e), &e);
	CHECK_OK(st_writer_add(w, "empty", ST_F32, 2, s04, NULL, &e), &e);
	CHECK_OK(st_writer_add(w, "i16", ST_I16, 1, s2, i16v, &e), &e);
	CHECK_OK(st_writer_add(w, "i8", ST_I8, 1, s3, i8v, &e), &e);
	CHECK_OK(st_writer_add(w, "u8", ST_U8, 1, s5, u8v, &e), &e);
	CHECK_OK(st_writer_add(w, "u16", ST_U16, 1, s1, u16v, &e), &e);
	CHECK_OK(st_writer_add(w, "u32", ST_U32, 1, s2, u32v, &e), &e);
	CHECK_OK(st_writer_add(w, "u64", ST_U64, 1, s2, u64v, &e), &e);
	CHECK_OK(st_writer_add(w, "mask", ST_BOOL, 1, s3, boolv, &e), &e);
	CHECK_OK(st_writer_add(w, "scalar", ST_F32, 0, NULL, &scalarv, &e), &e);
	CHECK_OK(st_writer_add(w, "empty1d", ST_I64, 1, s0, NULL, &e), &e);
	CHECK_OK(st_writer_add(w, "unicode \xc3\xbc \"q\" \\", ST_U8, 1, s1, u8v + 4, &e), &e);
	CHECK_OK(st_writer_set_metadata(w, "format", "pt", &e), &e);
	CHECK_OK(st_writer_set_metadata(w, "epoch", "2", &e), &e);
	CHECK_OK(st_writer_set_metadata(w, "note", "tab\there \"quoted\" back\\slash \xe2\x82\xac\nline", &e), &e);
	CHECK_OK(st_writer_set_metadata(w, "epoch", "3", &e), &e); /* replaces */
	CHECK_OK(st_writer_write(w, path, &e), &e);

	static const char *names[] = {"conv.weight", "f64", "half", "bf", "i64",
				      "i32", "empty", "i16", "i8", "u8", "u16",
				      "u32", "u64", "mask", "scalar", "empty1d",
				      "unicode \xc3\xbc \"q\" \\"};
	static const void *datas[] = {f32v, f64v, f16v, bf16v, i64v, i32v, NULL,
				      i16v, i8v, u8v, u16v, u32v, u64v, boolv,
				      &scalarv, NULL, u8v + 4};
	static const uint64_t sizes[] = {24, 32, 8, 6, 16, 8, 0, 4, 3, 5, 2, 8,
					 16, 3, 4, 0, 1};
	const size_t nt = sizeof(names) / sizeof(names[0]);

	st_file *f = NULL;
	CHECK_OK(st_open(path, &f, &e), &e);
	if (!f) {
		st_writer_free(w);
		return;
	}
	CHECK_EQ_STR(st_path(f), path);
	CHECK_EQ_INT(st_count(f), nt);
	for (size_t i = 0; i < nt && i < st_count(f); i++) {
		const st_tensor *t = st_tensor_at(f, i);
		CHECK_EQ_STR(t->name, names[i]); /* file order = insertion order */
		CHECK_EQ_U64(t->nbytes, sizes[i]);
		CHECK(t->data != NULL);
		if (sizes[i])
			CHECK_MEM(t->data, datas[i], sizes[i]);
		CHECK(st_find(f, names[i]) == t);
	}
	CHECK(st_tensor_at(f, nt) == NULL);
	CHECK(st_find(f, "missing") == NULL);
	const st_tensor *t = NULL;
	CHECK_EQ_INT(st_get(f, "missing", &t, &e), IMS_ENOTFOUND);
	CHECK(strstr(e.msg, "'missing'") && strstr(e.msg, "rt.safetensors"));

	CHECK_OK(st_get(f, "conv.weight", &t, &e), &e);
	CHECK_EQ_INT(t->dtype, ST_F32);
	CHECK_EQ_INT(t->ndim, 2);
	CHECK_EQ_INT(t->shape[0], 2);
	CHECK_EQ_INT(t->shape[1], 3);
	CHECK_EQ_U64(t->numel, 6);
	CHECK_EQ_U64(t->offset, 0);
	float fo[6];
	CHECK_OK(st_tensor_to_f32(t, fo, 6, &e), &e);
	CHECK_MEM(fo, f32v, sizeof(f32v));
	CHECK_EQ_INT(st_tensor_to_f32(t, fo, 5, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'conv.weight'") != NULL);

	t = st_find(f, "f64");
	CHECK_EQ_U64(t->offset, 24);
	CHECK_OK(st_tensor_to_f32(t, fo, 4, &e), &e);
	for (int i = 0; i < 4; i++)
		CHECK(bits_eq(fo[i], (float)f64v[i]));
	CHECK(isinf(fo[2]) && fo[2] < 0);

	t = st_find(f, "half");
	CHECK_EQ_INT(t->ndim, 2);
	CHECK_OK(st_tensor_to_f32(t, fo, 4, &e), &e);
	CHECK(bits_eq(fo[0], 1.0f) && bits_eq(fo[1], -2.5f) &&
	      bits_eq(fo[2], 65504.0f) && bits_eq(fo[3], 0x1p-24f));
	t = st_find(f, "bf");
	CHECK_OK(st_tensor_to_f32(t, fo, 3, &e), &e);
	CHECK(bits_eq(fo[0], 1.0f) && bits_eq(fo[1], -2.5f) && isinf(fo[2]));

	t = st_find(f, "scalar");
	CHECK_EQ_INT(t->ndim, 0);
	CHECK_EQ_U64(t->numel, 1);
	CHECK_OK(st_tensor_to_f32(t, fo, 1, &e), &e);
	CHECK(bits_eq(fo[0], 42.5f));

	t = st_find(f, "empty");
	CHECK_EQ_INT(t->ndim, 2);
	CHECK_EQ_INT(t->shape[0], 0);
	CHECK_EQ_INT(t->shape[1], 4);
	CHECK_EQ_U64(t->numel, 0);
	CHECK_OK(st_tensor_to_f32(t, fo, 0, &e), &e);
	t = st_find(f, "empty1d");
	CHECK_EQ_U64(t->numel, 0);
	CHECK_EQ_INT(t->ndim, 1);

	int64_t io[5];
	t = st_find(f, "i64");
	CHECK_OK(st_tensor_to_i64(t, io, 2, &e), &e);
	CHECK(io[0] == INT64_MIN && io[1] == 1234567890123LL);
	t = st_find(f, "i32");
	CHECK_EQ_INT(t->ndim, 3);
	CHECK_OK(st_tensor_to_i64(t, io, 2, &e), &e);
	CHECK(io[0] == -7 && io[1] == 2147483647);
	CHECK_OK(st_tensor_to_i64(st_find(f, "i16"), io, 2, &e), &e);
	CHECK(io[0] == -32768 && io[1] == 5);
	CHECK_OK(st_tensor_to_i64(st_find(f, "i8"), io, 3, &e), &e);
	CHECK(io[0] == -128 && io[1] == 0 && io[2] == 127);
	CHECK_OK(st_tensor_to_i64(st_find(f, "u8"), io, 5, &e), &e);
	CHECK(io[3] == 254 && io[4] == 255);
	CHECK_OK(st_tensor_to_i64(st_find(f, "u16"), io, 1, &e), &e);
	CHECK(io[0] == 65535);
	CHECK_OK(st_tensor_to_i64(st_find(f, "u32"), io, 2, &e), &e);
	CHECK(io[0] == 4294967295LL && io[1] == 3);
	CHECK_OK(st_tensor_to_i64(st_find(f, "mask"), io, 3, &e), &e);
	CHECK(io[0] == 1 && io[1] == 0 && io[2] == 1);
	CHECK_EQ_INT(st_tensor_to_i64(st_find(f, "u64"), io, 2, &e), IMS_ELIMIT);
	CHECK(strstr(e.msg, "'u64'") != NULL);
	CHECK_EQ_INT(st_tensor_to_i64(st_find(f, "i64"), io, 3, &e), IMS_EINVAL);
	CHECK_EQ_INT(st_tensor_to_i64(st_find(f, "half"), io, 4, &e),
		     IMS_EUNSUPPORTED);
	CHECK(strstr(e.msg, "'half'") && strstr(e.msg, "F16"));
	/* empty, a float tensor is still not an integer one (before: 0) */
	CHECK_EQ_INT(st_tensor_to_i64(st_find(f, "empty"), io, 0, &e),
		     IMS_EUNSUPPORTED);
	CHECK(strstr(e.msg, "'empty'") && strstr(e.msg, "F32"));
	CHECK_EQ_INT(st_tensor_to_f32(st_find(f, "i32"), fo, 2, &e),
		     IMS_EUNSUPPORTED);
	CHECK(strstr(e.msg, "'i32'") && strstr(e.msg, "I32"));

	CHECK_EQ_INT(st_metadata_count(f), 3);
	const char *v = NULL;
	CHECK_EQ_STR(st_metadata_at(f, 0, &v), "format");
	CHECK_EQ_STR(v, "pt");
	CHECK_EQ_STR(st_metadata_at(f, 1, &v), "epoch");
	CHECK_EQ_STR(v, "3");
	CHECK_EQ_STR(st_metadata_at(f, 2, NULL), "note");
	CHECK(st_metadata_at(f, 3, &v) == NULL);
	CHECK_EQ_STR(st_metadata_get(f, "note"),
		     "tab\there \"quoted\" back\\slash \xe2\x82\xac\nline");
	CHECK(st_metadata_get(f, "nope") == NULL);
	st_close(f);

	/* The header is padded to 8 bytes with spaces. */
	uint8_t *raw = NULL;
	size_t len = 0;
	CHECK_OK(ims_read_file(path, &raw, &len, 0, &e), &e);
	uint64_t hlen = 0;
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)raw[i] << (8 * i);
	CHECK_EQ_U64(hlen % 8, 0);
	size_t total = 0;
	for (size_t i = 0; i < nt; i++)
		total += sizes[i];
	CHECK_EQ_U64(len, 8 + hlen + total);
	size_t last = 8 + hlen - 1;
	while (last > 8 && raw[last] == ' ')
		last--;
	CHECK_EQ_INT(raw[last], '}');
	CHECK(8 + hlen - 1 - last < 8);
	free(raw);

	/* Writing again replaces the file and leaves no temporary behind. */
	CHECK_OK(st_writer_write(w, path, &e), &e);
	st_writer_free(w);
	ims_dir_listing ls = {0};
	int others = 0;
	CHECK_OK(ims_dir_list(dir, IMS_DIR_HIDDEN, &ls, &e), &e);
	for (size_t i = 0; i < ls.n; i++)
		others += strstr(ls.e[i].name, ".tmp.") != NULL;
	ims_dir_listing_release(&ls);
	CHECK_EQ_INT(others, 0);
	st_writer_free(NULL);
	st_close(NULL);
}

/* The writer's bytes for a small case, spelled out. */
static void test_writer_bytes(void)
{
	ims_error e;
	ims_error_clear(&e);
	char path[4200];
	path_in(path, sizeof(path), "exact.safetensors");
	const float wv[2] = {1.0f, 2.0f};
	const int64_t s2[] = {2};
	st_writer *w = NULL;
	CHECK_OK(st_writer_create(&w, &e), &e);
	CHECK_OK(st_writer_add(w, "w", ST_F32, 1, s2, wv, &e), &e);
	CHECK_OK(st_writer_add(w, "s", ST_U8, 0, NULL, "\x07", &e), &e);
	CHECK_OK(st_writer_set_metadata(w, "format", "pt", &e), &e);
	CHECK_OK(st_writer_write(w, path, &e), &e);
	st_writer_free(w);

	const char *json =
		"{\"__metadata__\":{\"format\":\"pt\"},"
		"\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		"\"s\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[8,9]}}";
	size_t jl = strlen(json), hl = (jl + 7) / 8 * 8;
	uint8_t want[512];
	memset(want, ' ', sizeof(want));
	for (int i = 0; i < 8; i++)
		want[i] = (uint8_t)((uint64_t)hl >> (8 * i));
	memcpy(want + 8, json, jl);
	memcpy(want + 8 + hl, wv, 8);
	want[8 + hl + 8] = 7;
	uint8_t *raw = NULL;
	size_t len = 0;
	CHECK_OK(ims_read_file(path, &raw, &len, 0, &e), &e);
	CHECK_EQ_U64(len, 8 + hl + 9);
	if (len == 8 + hl + 9)
		CHECK_MEM(raw, want, len);
	free(raw);
	/* st_file_crc32c: every byte of the file, header and padding too */
	st_file *g = NULL;
	CHECK_OK(st_open(path, &g, &e), &e);
	uint64_t bytes = 0;
	CHECK_EQ_U64(g ? st_file_crc32c(g, &bytes) : 0, ims_crc32c(0, want, 8 + hl + 9));
	CHECK_EQ_U64(bytes, 8 + hl + 9);
	st_close(g);

	/* An empty writer gives "{}" padded: a valid file with nothing in it. */
	CHECK_OK(st_writer_create(&w, &e), &e);
	CHECK_OK(st_writer_write(w, path, &e), &e);
	st_writer_free(w);
	CHECK_OK(ims_read_file(path, &raw, &len, 0, &e), &e);
	CHECK_EQ_U64(len, 16);
	CHECK_MEM(raw, "\x08\0\0\0\0\0\0\0{}      ", 16);
	free(raw);
	st_file *f = NULL;
	CHECK_OK(st_open(path, &f, &e), &e);
	CHECK(f && st_count(f) == 0 && st_metadata_count(f) == 0);
	st_close(f);
}

/* A file written by hand: header order differs from data order, keys come
 * in any order, whitespace and padding vary. */
static void test_hand_built(void)
{
	ims_error e;
	ims_error_clear(&e);
	char path[4200];
	path_in(path, sizeof(path), "hand.safetensors");
	const char *hdr =
		"{ \"b\": {\"data_offsets\": [8, 16], \"shape\": [2], \"dtype\": \"I32\"},\n"
		"  \"__metadata__\": {\"k\": \"v\"},\n"
		"  \"a\": {\"dtype\": \"F32\", \"shape\": [1, 2], \"data_offsets\": [0, 8],"
		" \"extra\": 1},\n"
		"  \"z\": {\"dtype\": \"BF16\", \"shape\": [], \"data_offsets\": [16, 18]}}   \n ";
	/* a = {0.5, -1}, b = {3, -4}, z = 1.0 */
	const uint8_t data[18] = {0, 0, 0, 0x3f, 0, 0, 0x80, 0xbf, 3, 0, 0, 0,
				  0xfc, 0xff, 0xff, 0xff, 0x80, 0x3f};
	write_file(path, hdr, data, sizeof(data));
	st_file *f = NULL;
	CHECK_OK(st_open(path, &f, &e), &e);
	if (!f)
		return;
	CHECK_EQ_INT(st_count(f), 3);
	CHECK_EQ_STR(st_tensor_at(f, 0)->name, "a");
	CHECK_EQ_STR(st_tensor_at(f, 1)->name, "b");
	CHECK_EQ_STR(st_tensor_at(f, 2)->name, "z");
	float fo[2];
	CHECK_OK(st_tensor_to_f32(st_find(f, "a"), fo, 2, &e), &e);
	CHECK(fo[0] == 0.5f && fo[1] == -1.0f);
	int64_t io[2];
	CHECK_OK(st_tensor_to_i64(st_find(f, "b"), io, 2, &e), &e);
	CHECK(io[0] == 3 && io[1] == -4);
	CHECK_OK(st_tensor_to_f32(st_find(f, "z"), fo, 1, &e), &e);
	CHECK(fo[0] == 1.0f);
	CHECK_EQ_INT(st_find(f, "z")->ndim, 0);
	CHECK_EQ_STR(st_metadata_get(f, "k"), "v");
	st_close(f);

	/* Empty tensors may share an offset with each other and the next
	 * tensor; header order breaks the tie. */
	const char *hdr2 =
		"{\"e2\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
		"\"x\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
		"\"e1\":{\"dtype\":\"F64\",\"shape\":[3,0],\"data_offsets\":[0,0]},"
		"\"e3\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[2,2]}}";
	write_file(path, hdr2, "ab", 2);
	CHECK_OK(st_open(path, &f, &e), &e);
	if (!f)
		return;
	CHECK_EQ_INT(st_count(f), 4);
	CHECK_EQ_STR(st_tensor_at(f, 0)->name, "e2");
	CHECK_EQ_STR(st_tensor_at(f, 1)->name, "e1");
	CHECK_EQ_STR(st_tensor_at(f, 2)->name, "x");
	CHECK_EQ_STR(st_tensor_at(f, 3)->name, "e3");
	st_close(f);
}

/* st_open must fail with code and a message containing every needle. */
static void expect_bad_at(int line, const char *path, int code,
			  const char *n1, const char *n2)
{
	ims_error e;
	ims_error_clear(&e);
	st_file *f = (st_file *)1;
	int rc = st_open(path, &f, &e);
	test_checks_++;
	if (rc != code || f != NULL || !strstr(e.msg, "bad.safetensors") ||
	    (n1 && !strstr(e.msg, n1)) || (n2 && !strstr(e.msg, n2))) {
		fprintf(stderr, "%s:%d: expected %d with '%s' '%s', got %d: %s\n",
			__FILE__, line, code, n1 ? n1 : "", n2 ? n2 : "", rc,
			e.msg);
		test_failures_++;
	}
	if (rc == 0)
		st_close(f);
}
#define EXPECT_BAD(code, n1, n2) expect_bad_at(__LINE__, path, code, n1, n2)

static void test_corrupt(void)
{
	char path[4200];
	path_in(path, sizeof(path), "bad.safetensors");
	const uint8_t d16[16] = {0};
	const char *good =
		"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";

	/* Truncated: nothing, fewer than 8 bytes, data cut short. */
	FILE *fp = fopen(path, "wb");
	fclose(fp);
	EXPECT_BAD(IMS_ECORRUPT, "shorter", "truncated");
	fp = fopen(path, "wb");
	fwrite("\x10\0\0", 1, 3, fp);
	fclose(fp);
	EXPECT_BAD(IMS_ECORRUPT, "3 bytes", NULL);
	write_file(path, good, d16, 5);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "past the end");
	/* Header length beyond the file, or absurd. */
	write_raw(path, strlen(good) + 100, good, strlen(good), d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "header length", "past the end");
	write_raw(path, UINT64_MAX, good, strlen(good), d16, 8);
	EXPECT_BAD(IMS_ELIMIT, "header length", "limit");
	write_raw(path, 0, good, 0, NULL, 0);
	EXPECT_BAD(IMS_EFORMAT, "'{'", NULL);
	/* Not JSON, not an object, trailing bytes, bad UTF-8. */
	write_file(path, "[1, 2]", NULL, 0);
	EXPECT_BAD(IMS_EFORMAT, "'{'", NULL);
	write_file(path, "{\"a\": {\"dtype\": \"F32\", ", d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "not valid JSON", NULL);
	write_file(path, "{\"a\" 1}", NULL, 0);
	EXPECT_BAD(IMS_ECORRUPT, "not valid JSON", NULL);
	write_file(path, "{} {}", NULL, 0);
	EXPECT_BAD(IMS_ECORRUPT, "after the JSON", NULL);
	write_raw(path, 6, "{}\0   ", 6, NULL, 0); /* a NUL in the padding */
	EXPECT_BAD(IMS_ECORRUPT, "UTF-8", NULL);
	write_file(path, "{\"\xc3\x28\":{}}", NULL, 0);
	EXPECT_BAD(IMS_ECORRUPT, "UTF-8", "byte 2");
	write_file(path, "{\"\xed\xa0\x80\":{}}", NULL, 0); /* a surrogate */
	EXPECT_BAD(IMS_ECORRUPT, "UTF-8", NULL);
	write_file(path, "{\"\xc0\xaf\":{}}", NULL, 0); /* overlong '/' */
	EXPECT_BAD(IMS_ECORRUPT, "UTF-8", NULL);

	/* Entries. */
	write_file(path, "{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "'F33'");
	write_file(path, "{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "unknown dtype");
	write_file(path, "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "dtype");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "shape");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "shape entry 0");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1, 1.5],\"data_offsets\":[0,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "shape entry 1");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "data_offsets");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[\"0\",8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "data_offsets");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "end before");
	write_file(path, "{\"a\":[1]}", NULL, 0);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "not an object");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],"
			 "\"data_offsets\":[0,8]}}", d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "too large");
	/* Shape and offsets disagree. */
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "shape [3] of F32 is 12 bytes");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "shape [] of F32 is 4 bytes");
	/* A long shape is cut short in the message. */
	write_file(path, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1000,1000,1000,1000,1000,"
			 "1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,"
			 "1000,1000,1000,1000,1000,1000,1000],\"data_offsets\":[0,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "shape is too large");
	write_file(path, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,"
			 "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
			 "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a': shape [1, 1, 1", "...");
	/* Overlap, out of range, gaps. */
	write_file(path,
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
		   d16, 12);
	EXPECT_BAD(IMS_ECORRUPT, "'b'", "overlaps tensor 'a'");
	write_file(path,
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "overlaps", NULL);
	write_file(path,
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
		   "\"b\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[4,4]}}",
		   d16, 16);
	EXPECT_BAD(IMS_ECORRUPT, "'b'", "overlaps tensor 'a'");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "past the end");
	write_file(path,
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
		   d16, 12);
	EXPECT_BAD(IMS_ECORRUPT, "[4, 8)", "before tensor 'b'");
	write_file(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "[0, 4)", "before tensor 'a'");
	write_file(path, good, d16, 12);
	EXPECT_BAD(IMS_ECORRUPT, "[8, 12)", "after the last tensor");
	write_file(path, "{}", d16, 1);
	EXPECT_BAD(IMS_ECORRUPT, "[0, 1)", "after the last tensor");
	/* Duplicates. */
	write_file(path,
		   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
		   d16, 8);
	EXPECT_BAD(IMS_ECORRUPT, "'a'", "twice");
	write_file(path, "{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0);
	EXPECT_BAD(IMS_ECORRUPT, "__metadata__", "twice");
	write_file(path, "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", NULL, 0);
	EXPECT_BAD(IMS_ECORRUPT, "'k'", "twice");
	/* Metadata. */
	write_file(path, "{\"__metadata__\":{\"epoch\":3}}", NULL, 0);
	EXPECT_BAD(IMS_ECORRUPT, "'epoch'", "not a string");
	write_file(path, "{\"__metadata__\":[\"x\"]}", NULL, 0);
	EXPECT_BAD(IMS_ECORRUPT, "__metadata__", "not an object");

	/* Not there, not a file. */
	ims_error e;
	st_file *f = NULL;
	char missing[4300];
	path_in(missing, sizeof(missing), "missing.safetensors");
	CHECK_EQ_INT(st_open(missing, &f, &e), IMS_ENOTFOUND);
	CHECK(strstr(e.msg, "missing.safetensors") != NULL);
	CHECK_EQ_INT(st_open(dir, &f, &e), IMS_EFORMAT);
	CHECK(f == NULL);
}

static void test_writer_errors(void)
{
	ims_error e;
	ims_error_clear(&e);
	st_writer *w = NULL;
	CHECK_OK(st_writer_create(&w, &e), &e);
	const int64_t s2[] = {2}, sneg[] = {-1};
	const float v[2] = {1, 2};
	CHECK_OK(st_writer_add(w, "x", ST_F32, 1, s2, v, &e), &e);
	CHECK_EQ_INT(st_writer_add(w, "x", ST_F32, 1, s2, v, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'x'") && strstr(e.msg, "added before"));
	CHECK_EQ_INT(st_writer_add(w, "__metadata__", ST_F32, 1, s2, v, &e),
		     IMS_EINVAL);
	CHECK_EQ_INT(st_writer_add(w, "y", 0, 1, s2, v, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'y'") && strstr(e.msg, "dtype"));
	CHECK_EQ_INT(st_writer_add(w, "y", 99, 1, s2, v, &e), IMS_EINVAL);
	CHECK_EQ_INT(st_writer_add(w, "y", ST_F32, 1, sneg, v, &e), IMS_EINVAL);
	CHECK_EQ_INT(st_writer_add(w, "y", ST_F32, -1, s2, v, &e), IMS_EINVAL);
	CHECK_EQ_INT(st_writer_add(w, "y", ST_F32, 1, NULL, v, &e), IMS_EINVAL);
	CHECK_EQ_INT(st_writer_add(w, "y", ST_F32, 1, s2, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "no data") != NULL);
	CHECK_EQ_INT(st_writer_add(w, NULL, ST_F32, 1, s2, v, &e), IMS_EINVAL);
	CHECK_EQ_INT(st_writer_add(w, "bad\xff", ST_F32, 1, s2, v, &e), IMS_EINVAL);
	const int64_t huge[] = {INT64_MAX, 4};
	CHECK_EQ_INT(st_writer_add(w, "y", ST_F32, 2, huge, v, &e), IMS_ELIMIT);
	CHECK_EQ_INT(st_writer_set_metadata(w, "k", "\xc3", &e), IMS_EINVAL);
	CHECK_EQ_INT(st_writer_set_metadata(w, NULL, "v", &e), IMS_EINVAL);

	char path[4300];
	path_in(path, sizeof(path), "no/such/folder/x.safetensors");
	CHECK_EQ_INT(st_writer_write(w, path, &e), IMS_EIO);
	CHECK(strstr(e.msg, "x.safetensors") != NULL);
	st_writer_free(w);
}

int main(void)
{
	test_tmpdir(dir, sizeof(dir), "safetensors");
	test_dtypes();
	test_round_trip();
	test_writer_bytes();
	test_hand_built();
	test_corrupt();
	test_writer_errors();
	return test_tmp_done(dir, TEST_EXIT());
}
