/* fuzz_shard.c - a whole shard file (LMDB pages and record values), read
 * as `imshard verify` and the loader read it: the input becomes the one
 * shard of a split whose manifest agrees with it, the split is opened with
 * rio_reader_open, and every record it claims is read with the payload CRC
 * checked, once in key order (cursor steps) and once in reverse order
 * (a lookup per record). Any failure must be a returned error. On the
 * way, each shard's digest is computed as verify computes it (from the
 * records as decoded, headers encoded again) and as the writer does (from
 * the stored header bytes): the two must agree for every record that
 * reads, or verify would fail splits the writer made. */
#include "fuzz_util.h"
#include "recordio/recordio.h"

/* The main database's entry count as LMDB will see it, so that the
 * manifest agrees with the shard and inputs get past the count check to
 * the pages. LMDB 0.9 on a 64-bit host: meta pages 0 and 1 (page 1 at the
 * page size stored in meta 0), the one with the larger transaction id
 * wins; entries at byte 120 of the meta page. Any answer is fine for
 * inputs that are not shards: the reader must refuse them anyway. */
static uint64_t meta_entries(const uint8_t *data, size_t size)
{
	uint64_t entries = 0, txnid = 0;
	size_t off = 0;
	for (int i = 0; i < 2; i++) {
		if (off > size || size - off < 152)
			break;
		uint64_t e, t;
		memcpy(&e, data + off + 120, 8);
		memcpy(&t, data + off + 144, 8);
		if (i == 0 || t > txnid) {
			entries = e;
			txnid = t;
		}
		uint32_t psize;
		memcpy(&psize, data + 40, 4);
		off = psize;
	}
	return entries;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char shard[600], manifest[600];
	fuzz_file("s-00000-of-00001.mdb", data, size, shard, sizeof(shard));
	/* One class holding everything: the class count must equal the
	 * records, and labels are verify's business, not the reader's. */
	uint64_t n = meta_entries(data, size);
	char json[1024];
	int len = snprintf(json, sizeof(json),
			   "{\"format\": \"imshard\", \"format_version\": 2, \"name\": \"s\",\n"
			   " \"records\": %llu, \"encoding\": \"keep\", \"extra_labels\": 0,\n"
			   " \"classes\": [\"a\"], \"class_counts\": [%llu],\n"
			   " \"shards\": [{\"path\": \"s-00000-of-00001.mdb\", \"first\": 0,\n"
			   "   \"records\": %llu, \"bytes\": %zu, \"digest\": \"0000000000000000\"}],\n"
			   " \"skipped\": 0, \"errors_file\": null, \"created_by\": \"fuzz\",\n"
			   " \"created_at\": \"2026-01-01T00:00:00Z\", \"options\": null}\n",
			   (unsigned long long)n, (unsigned long long)n,
			   (unsigned long long)n, size);
	fuzz_file("s.json", (const uint8_t *)json, (size_t)len, manifest,
		  sizeof(manifest));

	ims_error err;
	rio_reader *r;
	if (rio_reader_open(manifest, &r, &err) < 0)
		return 0;
	uint64_t count = rio_reader_count(r);
	rio_cursor *seq = NULL, *idx = NULL;
	if (rio_cursor_open(r, RIO_CHECK_PAYLOAD_CRC, &seq, &err) == 0 &&
	    rio_cursor_open(r, RIO_CHECK_PAYLOAD_CRC, &idx, &err) == 0) {
		rio_record rec;
		rio_digest verify, writer;
		rio_digest_begin(&verify, "s", 0);
		rio_digest_begin(&writer, "s", 0);
		for (uint64_t i = 0; i < count; i++) {
			if (rio_cursor_get(seq, i, &rec, &err) != 0)
				continue;
			size_t hlen = rio_header_size(rec.n_extra);
			if (rio_digest_add_record(&verify, i, &rec, &err) != 0)
				__builtin_trap();
			rio_digest_add(&writer, i, rec.payload - hlen, hlen);
			if (rio_digest_value(&verify) != rio_digest_value(&writer))
				__builtin_trap();
			rio_record_check_mode("keep", &rec, &err);
		}
		for (uint64_t i = count; i-- > 0;)
			rio_cursor_get(idx, i, &rec, &err);
		/* one past the end is refused, not read */
		if (rio_cursor_get(idx, count, &rec, &err) != IMS_EINVAL)
			__builtin_trap();
	}
	rio_cursor_close(idx);
	rio_cursor_close(seq);
	rio_reader_close(r);
	return 0;
}
