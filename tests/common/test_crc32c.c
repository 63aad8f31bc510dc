/* test_crc32c.c - CRC-32C against the standard check values, both paths. */
#include "common/common.h"
#include "common/common_internal.h"
#include "test.h"

int main(void)
{
	const char *check = "123456789";
	CHECK_EQ_U64(ims_crc32c(0, check, 9), 0xE3069283u);
	CHECK_EQ_U64(ims_crc32c_portable(0, check, 9), 0xE3069283u);

	uint8_t zeros[32] = {0}, ones[32];
	memset(ones, 0xff, sizeof(ones));
	/* RFC 3720 B.4 vectors. */
	CHECK_EQ_U64(ims_crc32c(0, zeros, 32), 0x8A9136AAu);
	CHECK_EQ_U64(ims_crc32c(0, ones, 32), 0x62A8AB43u);
	CHECK_EQ_U64(ims_crc32c_portable(0, zeros, 32), 0x8A9136AAu);
	CHECK_EQ_U64(ims_crc32c_portable(0, ones, 32), 0x62A8AB43u);
	CHECK_EQ_U64(ims_crc32c(0, "", 0), 0u);

	/* Both paths agree on every length and alignment, and incremental
	 * updates equal one pass. */
	uint8_t buf[1031];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len + off <= sizeof(buf); len += 37) {
			uint32_t a = ims_crc32c(0, buf + off, len);
			uint32_t b = ims_crc32c_portable(0, buf + off, len);
			CHECK_EQ_U64(a, b);
			size_t half = len / 3;
			uint32_t c = ims_crc32c(ims_crc32c(0, buf + off, half),
						buf + off + half, len - half);
			CHECK_EQ_U64(a, c);
		}
	/* A single flipped bit changes the value. */
	uint32_t before = ims_crc32c(0, buf, sizeof(buf));
	buf[500] ^= 0x10;
	CHECK(ims_crc32c(0, buf, sizeof(buf)) != before);
	return TEST_EXIT();
}
