/* fuzz_record.c - a stored record value (header + payload): the parser
 * that every read of a shard goes through, with the payload CRC check on
 * and off. */
#include "recordio/recordio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rio_record rec;
	ims_error err;
	for (unsigned check = 0; check < 2; check++)
		if (rio_record_decode(data, size, &rec,
				      check ? RIO_CHECK_PAYLOAD_CRC : 0, &err) == 0 &&
		    rec.payload_len && rec.payload) {
			/* the payload must lie inside the value */
			const uint8_t *p = rec.payload;
			if (p < data || p + rec.payload_len > data + size)
				__builtin_trap();
		}
	return 0;
}
