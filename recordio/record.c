/*
 * record.c - the record header: encoding, decoding and validation.
 *
 * Layout (little-endian, see docs/FORMAT.md):
 *   0 magic "IMSR"   4 version u16   6 header_len u16
 *   8 encoding u8    9 flags u8     10 channels u8   11 orientation u8
 *  12 label i32     16 n_extra u16  18 reserved u16 (0)
 *  20 width u32     24 height u32   28 orig_width u32 32 orig_height u32
 *  36 payload_len u32               40 payload_crc32c u32
 *  44 header_crc32c u32 (over bytes 0..43 then the extra labels)
 *  48 n_extra float32 extra labels, then payload_len payload bytes.
 * The header carries its own CRC because a flipped bit in a label is as
 * damaging as one in the pixels, and costs 48 bytes to check.
 */
#include "recordio.h"

#include <string.h>

size_t rio_header_size(unsigned n_extra)
{
	return RIO_HEADER_FIXED + 4u * n_extra;
}

const char *rio_encoding_name(int encoding)
{
	switch (encoding) {
	case RIO_ENC_JPEG: return "jpeg";
	case RIO_ENC_PNG: return "png";
	case RIO_ENC_RAW: return "raw";
	default: return "unknown";
	}
}

int rio_record_check_mode(const char *mode, const rio_record *rec,
			  ims_error *err)
{
	int kept = (rec->flags & RIO_FLAG_ORIGINAL) != 0;
	const char *is = rio_encoding_name(rec->encoding);
	if (strcmp(mode, "keep") == 0)
		RETURN_IF(!kept, err, IMS_ECORRUPT,
			  "a re-encoded %s record in a split packed with encoding 'keep'",
			  is);
	else
		RETURN_IF(kept || strcmp(mode, is) != 0, err, IMS_ECORRUPT,
			  "a %s%s record in a split packed with encoding '%s'",
			  kept ? "kept " : "", is, mode);
	return 0;
}

static uint32_t header_crc(const uint8_t *h, unsigned n_extra)
{
	uint32_t crc = ims_crc32c(0, h, 44);
	if (n_extra)
		crc = ims_crc32c(crc, h + RIO_HEADER_FIXED, 4u * n_extra);
	return crc;
}

/* Field ranges shared by encode and decode. */
static int check_fields(const rio_record *r, ims_error *err)
{
	RETURN_IF(r->encoding < RIO_ENC_JPEG || r->encoding > RIO_ENC_RAW, err,
		  IMS_ECORRUPT, "encoding %u is not jpeg (1), png (2) or raw (3)",
		  r->encoding);
	RETURN_IF(r->flags & ~RIO_FLAG_ORIGINAL, err, IMS_ECORRUPT,
		  "unknown flags 0x%02x", r->flags);
	RETURN_IF(r->channels != 1 && r->channels != 3 && r->channels != 4, err,
		  IMS_ECORRUPT, "channel count %u is not 1, 3 or 4", r->channels);
	RETURN_IF(r->orientation < 1 || r->orientation > 8, err, IMS_ECORRUPT,
		  "orientation %u is not 1..8", r->orientation);
	RETURN_IF(r->label < 0, err, IMS_ECORRUPT, "label %d is negative",
		  (int)r->label);
	RETURN_IF(r->n_extra > RIO_MAX_EXTRA_LABELS, err, IMS_ECORRUPT,
		  "%u extra labels exceed the maximum of %d", r->n_extra,
		  RIO_MAX_EXTRA_LABELS);
	RETURN_IF(r->width == 0 || r->height == 0, err, IMS_ECORRUPT,
		  "image size %ux%u is empty", r->width, r->height);
	if (r->encoding == RIO_ENC_RAW) {
		uint64_t want = (uint64_t)r->width * r->height * r->channels;
		RETURN_IF(want != r->payload_len, err, IMS_ECORRUPT,
			  "raw payload holds %u bytes, %ux%ux%u needs %llu",
			  r->payload_len, r->width, r->height, r->channels,
			  (unsigned long long)want);
	}
	return 0;
}

int rio_header_encode(const rio_record *rec, uint8_t *out, ims_error *err)
{
	FORWARD_IF_ERR(check_fields(rec, err));
	memcpy(out, RIO_MAGIC, 4);
	ims_store_le16(out + 4, RIO_RECORD_VERSION);
	ims_store_le16(out + 6, (uint16_t)rio_header_size(rec->n_extra));
	out[8] = rec->encoding;
	out[9] = rec->flags;
	out[10] = rec->channels;
	out[11] = rec->orientation;
	ims_store_le32(out + 12, (uint32_t)rec->label);
	ims_store_le16(out + 16, rec->n_extra);
	ims_store_le16(out + 18, 0);
	ims_store_le32(out + 20, rec->width);
	ims_store_le32(out + 24, rec->height);
	ims_store_le32(out + 28, rec->orig_width);
	ims_store_le32(out + 32, rec->orig_height);
	ims_store_le32(out + 36, rec->payload_len);
	ims_store_le32(out + 40, rec->payload_crc);
	for (unsigned i = 0; i < rec->n_extra; i++) {
		uint32_t bits;
		memcpy(&bits, &rec->extra[i], 4);
		ims_store_le32(out + RIO_HEADER_FIXED + 4 * i, bits);
	}
	ims_store_le32(out + 44, header_crc(out, rec->n_extra));
	return (int)rio_header_size(rec->n_extra);
}

int rio_record_decode(const void *value, size_t len, rio_record *rec,
		      unsigned check, ims_error *err)
{
	const uint8_t *v = value;
	RETURN_IF(len < RIO_HEADER_FIXED, err, IMS_ECORRUPT,
		  "record of %zu bytes is shorter than the %d-byte header", len,
		  RIO_HEADER_FIXED);
	RETURN_IF(memcmp(v, RIO_MAGIC, 4) != 0, err, IMS_EFORMAT,
		  "record does not start with the magic 'IMSR' (found %02x %02x %02x %02x)",
		  v[0], v[1], v[2], v[3]);
	unsigned version = ims_load_le16(v + 4);
	RETURN_IF(version != RIO_RECORD_VERSION, err, IMS_EFORMAT,
		  "record format version %u is not supported (this build reads %d); upgrade imshard",
		  version, RIO_RECORD_VERSION);
	unsigned n_extra = ims_load_le16(v + 16);
	size_t hlen = ims_load_le16(v + 6);
	RETURN_IF(n_extra > RIO_MAX_EXTRA_LABELS || hlen != rio_header_size(n_extra),
		  err, IMS_ECORRUPT,
		  "header length %zu does not match %u extra labels", hlen, n_extra);
	RETURN_IF(len < hlen, err, IMS_ECORRUPT,
		  "record of %zu bytes is shorter than its %zu-byte header", len, hlen);
	uint32_t stored = ims_load_le32(v + 44);
	uint32_t actual = header_crc(v, n_extra);
	RETURN_IF(stored != actual, err, IMS_ECORRUPT,
		  "header checksum mismatch (stored %08x, computed %08x)", stored,
		  actual);
	/* Reserved bytes carry nothing, so a record that differs only there
	 * would pass every check and still change the shard's digest: they
	 * must be what the writer wrote. */
	RETURN_IF(ims_load_le16(v + 18) != 0, err, IMS_ECORRUPT,
		  "reserved header bytes are %04x, not 0", ims_load_le16(v + 18));
	rec->encoding = v[8];
	rec->flags = v[9];
	rec->channels = v[10];
	rec->orientation = v[11];
	rec->label = (int32_t)ims_load_le32(v + 12);
	rec->n_extra = (uint16_t)n_extra;
	rec->width = ims_load_le32(v + 20);
	rec->height = ims_load_le32(v + 24);
	rec->orig_width = ims_load_le32(v + 28);
	rec->orig_height = ims_load_le32(v + 32);
	rec->payload_len = ims_load_le32(v + 36);
	rec->payload_crc = ims_load_le32(v + 40);
	for (unsigned i = 0; i < n_extra; i++) {
		uint32_t bits = ims_load_le32(v + RIO_HEADER_FIXED + 4 * i);
		memcpy(&rec->extra[i], &bits, 4);
	}
	RETURN_IF((uint64_t)hlen + rec->payload_len != len, err, IMS_ECORRUPT,
		  "record holds %zu bytes but its header says %zu + %u", len, hlen,
		  rec->payload_len);
	rec->payload = v + hlen;
	FORWARD_IF_ERR(check_fields(rec, err));
	if (check & RIO_CHECK_PAYLOAD_CRC) {
		uint32_t crc = ims_crc32c(0, rec->payload, rec->payload_len);
		RETURN_IF(crc != rec->payload_crc, err, IMS_ECORRUPT,
			  "payload checksum mismatch (stored %08x, computed %08x)",
			  rec->payload_crc, crc);
	}
	return 0;
}
