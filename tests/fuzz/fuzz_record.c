/* fuzz_record.c - a stored record value (header + payload): the parser
 * that every read of a shard goes through, with the payload CRC check on
 * and off; and the header re-encoding that a shard's digest is computed
 * from when verify reads records back. */
#include <string.h>

#include "recordio/recordio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rio_record rec;
	ims_error err;
	for (unsigned check = 0; check < 2; check++) {
		if (rio_record_decode(data, size, &rec,
				      check ? RIO_CHECK_PAYLOAD_CRC : 0, &err) != 0)
			continue;
		/* the payload must lie inside the value */
		const uint8_t *p = rec.payload;
		if (rec.payload_len && (p < data || p + rec.payload_len > data + size))
			__builtin_trap();
		/* A record that decodes encodes back to its stored header, byte
		 * for byte: verify digests what it re-encodes, the writer what
		 * it stored, and the two must agree. */
		uint8_t hdr[RIO_HEADER_FIXED + 4 * RIO_MAX_EXTRA_LABELS];
		int h = rio_header_encode(&rec, hdr, &err);
		if (h != (int)rio_header_size(rec.n_extra) || memcmp(hdr, data, (size_t)h) != 0)
			__builtin_trap();
		rio_digest a, b;
		rio_digest_begin(&a, "s", 0);
		rio_digest_begin(&b, "s", 0);
		rio_digest_add(&a, 7, data, (size_t)h);
		if (rio_digest_add_record(&b, 7, &rec, &err) != 0 ||
		    rio_digest_value(&a) != rio_digest_value(&b))
			__builtin_trap();
	}
	return 0;
}
