/* rio_test_util.h - helpers shared by the recordio tests: deterministic
 * record payloads (scratch folders: test_tmp.h). */
#ifndef RIO_TEST_UTIL_H
#define RIO_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recordio/recordio.h"
#include "test.h"

/* Payload of record i: length and bytes depend only on i. */
static inline size_t payload_len_for(uint64_t i)
{
	return 1 + (size_t)((i * 2654435761u) % 9000);
}

static inline void fill_payload(uint8_t *p, size_t len, uint64_t i)
{
	uint64_t x = i * 0x9E3779B97F4A7C15ull + 1;
	for (size_t k = 0; k < len; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[k] = (uint8_t)x;
	}
}

static inline void make_record(rio_record *r, uint64_t i, uint8_t *buf,
			       int n_classes)
{
	memset(r, 0, sizeof(*r));
	size_t len = payload_len_for(i);
	fill_payload(buf, len, i);
	r->encoding = RIO_ENC_JPEG;
	r->flags = RIO_FLAG_ORIGINAL;
	r->channels = 3;
	r->orientation = 1;
	r->label = (int32_t)(i % (uint64_t)n_classes);
	r->width = 10 + (uint32_t)(i % 50);
	r->height = 20 + (uint32_t)(i % 30);
	r->orig_width = r->width * 2;
	r->orig_height = r->height * 2;
	r->payload = buf;
	r->payload_len = (uint32_t)len;
	r->payload_crc = ims_crc32c(0, buf, len);
}

/* Split "s" in dir: n records (make_record, 3 classes a, b, c, encoding
 * keep) in shards of about shard_bytes. */
static inline void rio_test_write_split(const char *dir, uint64_t n, uint64_t shard_bytes)
{
	static const char *names[] = {"a", "b", "c"};
	ims_error e;
	rio_writer_opts o = {0};
	o.dir = dir;
	o.name = "s";
	o.shard_bytes = shard_bytes;
	o.force = 1;
	rio_writer *w;
	CHECK_OK(rio_writer_open(&o, &w, &e), &e);
	static uint8_t buf[10000];
	for (uint64_t i = 0; i < n; i++) {
		rio_record r;
		make_record(&r, i, buf, 3);
		CHECK_OK(rio_writer_add(w, &r, &e), &e);
	}
	rio_writer_meta m = {.encoding = "keep", .classes = names, .n_classes = 3};
	CHECK_OK(rio_writer_finish(w, &m, NULL, &e), &e);
}

/* Replaces the first `from` in the file at path with `to`. */
static inline void edit_manifest(const char *path, const char *from, const char *to)
{
	uint8_t *data;
	size_t len;
	ims_error e;
	CHECK_OK(ims_read_file(path, &data, &len, 0, &e), &e);
	char *s = (char *)data;
	char *at = strstr(s, from);
	CHECK(at != NULL);
	if (!at) {
		free(data);
		return;
	}
	char out[65536];
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
	CHECK_OK(ims_write_file_atomic(path, out, strlen(out), &e), &e);
	free(data);
}

static inline int file_exists(const char *dir, const char *name)
{
	char p[4400];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

#endif
