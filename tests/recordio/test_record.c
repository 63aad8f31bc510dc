/* test_record.c - the record header: round trip, ranges, damage detection. */
#include "rio_test_util.h"
#include "test.h"

int main(void)
{
	ims_error e;
	uint8_t payload[64];
	for (int i = 0; i < 64; i++)
		payload[i] = (uint8_t)(i * 7);
	rio_record r;
	memset(&r, 0, sizeof(r));
	r.encoding = RIO_ENC_PNG;
	r.flags = 0;
	r.channels = 4;
	r.orientation = 6;
	r.label = 1234567;
	r.width = 640;
	r.height = 480;
	r.orig_width = 4000;
	r.orig_height = 3000;
	r.n_extra = 3;
	r.extra[0] = 0.5f;
	r.extra[1] = -2.25f;
	r.extra[2] = 1e20f;
	r.payload = payload;
	r.payload_len = sizeof(payload);
	r.payload_crc = ims_crc32c(0, payload, sizeof(payload));

	CHECK_EQ_INT(rio_header_size(0), 48);
	CHECK_EQ_INT(rio_header_size(3), 60);
	uint8_t val[60 + 64];
	CHECK_EQ_INT(rio_header_encode(&r, val, &e), 60);
	memcpy(val + 60, payload, 64);
	/* The layout is the documented one (docs/FORMAT.md). */
	CHECK_MEM(val, "IMSR", 4);
	CHECK_EQ_INT(ims_load_le16(val + 4), 1);
	CHECK_EQ_INT(ims_load_le16(val + 6), 60);
	CHECK_EQ_INT(val[8], 2);
	CHECK_EQ_INT(val[10], 4);
	CHECK_EQ_INT(val[11], 6);
	CHECK_EQ_INT(ims_load_le32(val + 12), 1234567);
	CHECK_EQ_INT(ims_load_le16(val + 16), 3);
	CHECK_EQ_INT(ims_load_le32(val + 20), 640);
	CHECK_EQ_INT(ims_load_le32(val + 36), 64);
	CHECK_EQ_U64(ims_load_le32(val + 40), r.payload_crc);
	CHECK_EQ_U64(ims_load_le32(val + 44),
		     ims_crc32c(ims_crc32c(0, val, 44), val + 48, 12));

	rio_record d;
	CHECK_OK(rio_record_decode(val, sizeof(val), &d, RIO_CHECK_PAYLOAD_CRC, &e), &e);
	CHECK_EQ_INT(d.encoding, RIO_ENC_PNG);
	CHECK_EQ_INT(d.channels, 4);
	CHECK_EQ_INT(d.orientation, 6);
	CHECK_EQ_INT(d.label, 1234567);
	CHECK_EQ_INT(d.width, 640);
	CHECK_EQ_INT(d.height, 480);
	CHECK_EQ_INT(d.orig_width, 4000);
	CHECK_EQ_INT(d.orig_height, 3000);
	CHECK_EQ_INT(d.n_extra, 3);
	CHECK(d.extra[0] == 0.5f && d.extra[1] == -2.25f && d.extra[2] == 1e20f);
	CHECK(d.payload == val + 60); /* zero-copy */
	CHECK_EQ_INT(d.payload_len, 64);

	/* Every single-byte flip anywhere is caught (the payload only with
	 * the payload check). */
	for (size_t i = 0; i < sizeof(val); i++) {
		val[i] ^= 0x01;
		int rc = rio_record_decode(val, sizeof(val), &d, RIO_CHECK_PAYLOAD_CRC, &e);
		CHECK(rc == IMS_ECORRUPT || rc == IMS_EFORMAT);
		if (i >= 60)
			CHECK_OK(rio_record_decode(val, sizeof(val), &d, 0, &e), &e);
		val[i] ^= 0x01;
	}
	/* Truncated values are refused. */
	CHECK_EQ_INT(rio_record_decode(val, 20, &d, 0, &e), IMS_ECORRUPT);
	CHECK_EQ_INT(rio_record_decode(val, sizeof(val) - 1, &d, 0, &e), IMS_ECORRUPT);
	CHECK(strstr(e.msg, "bytes") != NULL);
	/* Wrong magic and future versions say so. */
	val[0] = 'X';
	CHECK_EQ_INT(rio_record_decode(val, sizeof(val), &d, 0, &e), IMS_EFORMAT);
	CHECK(strstr(e.msg, "magic") != NULL);
	val[0] = 'I';
	ims_store_le16(val + 4, 2);
	CHECK_EQ_INT(rio_record_decode(val, sizeof(val), &d, 0, &e), IMS_EFORMAT);
	CHECK(strstr(e.msg, "version 2") != NULL);
	ims_store_le16(val + 4, 1);
	/* Reserved bytes other than 0 are refused even with a header CRC that
	 * covers them: they would change a shard's digest and mean nothing. */
	CHECK_OK(rio_record_decode(val, sizeof(val), &d, 0, &e), &e);
	ims_store_le16(val + 18, 1);
	uint32_t hc = ims_crc32c(ims_crc32c(0, val, 44), val + 48, 12);
	ims_store_le32(val + 44, hc);
	CHECK_EQ_INT(rio_record_decode(val, sizeof(val), &d, 0, &e), IMS_ECORRUPT);
	CHECK(strstr(e.msg, "reserved") != NULL);
	ims_store_le16(val + 18, 0);
	ims_store_le32(val + 44, ims_crc32c(ims_crc32c(0, val, 44), val + 48, 12));
	CHECK_OK(rio_record_decode(val, sizeof(val), &d, 0, &e), &e);

	/* What each pack mode's records are. */
	rio_record k = r; /* a kept JPEG */
	k.encoding = RIO_ENC_JPEG;
	k.flags = RIO_FLAG_ORIGINAL;
	CHECK_OK(rio_record_check_mode("keep", &k, &e), &e);
	CHECK_EQ_INT(rio_record_check_mode("jpeg", &k, &e), IMS_ECORRUPT);
	CHECK(strstr(e.msg, "a kept jpeg record in a split packed with encoding 'jpeg'") != NULL);
	k.flags = 0;
	CHECK_OK(rio_record_check_mode("jpeg", &k, &e), &e);
	CHECK_EQ_INT(rio_record_check_mode("keep", &k, &e), IMS_ECORRUPT);
	CHECK_EQ_INT(rio_record_check_mode("png", &k, &e), IMS_ECORRUPT);
	k.encoding = RIO_ENC_RAW;
	CHECK_OK(rio_record_check_mode("raw", &k, &e), &e);
	k.flags = RIO_FLAG_ORIGINAL; /* CIFAR-10's own pixels, kept */
	CHECK_OK(rio_record_check_mode("keep", &k, &e), &e);
	CHECK_EQ_INT(rio_record_check_mode("raw", &k, &e), IMS_ECORRUPT);

	/* Out-of-range fields are refused at encode time. */
	rio_record bad = r;
	bad.channels = 2;
	CHECK_EQ_INT(rio_header_encode(&bad, val, &e), IMS_ECORRUPT);
	bad = r;
	bad.orientation = 9;
	CHECK(rio_header_encode(&bad, val, &e) < 0);
	bad = r;
	bad.label = -1;
	CHECK(rio_header_encode(&bad, val, &e) < 0);
	bad = r;
	bad.encoding = 7;
	CHECK(rio_header_encode(&bad, val, &e) < 0);
	bad = r;
	bad.width = 0;
	CHECK(rio_header_encode(&bad, val, &e) < 0);
	/* raw payloads must hold exactly w*h*c bytes. */
	bad = r;
	bad.encoding = RIO_ENC_RAW;
	bad.width = 4;
	bad.height = 4;
	bad.channels = 4;
	CHECK_EQ_INT(rio_header_encode(&bad, val, &e), 60);
	bad.channels = 3;
	CHECK(rio_header_encode(&bad, val, &e) < 0);
	CHECK_EQ_STR(rio_encoding_name(RIO_ENC_RAW), "raw");
	return TEST_EXIT();
}
