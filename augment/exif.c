/*
 * exif.c - the EXIF orientation tag (0x0112), and nothing else of EXIF.
 *
 * EXIF is a TIFF structure written by every camera and phone, often badly:
 * offsets past the end, counts in the billions, IFDs cut short by a
 * truncated APP1. Every read here is bounds-checked against the block, and
 * anything unexpected means "no orientation" (1), never an error: a bad
 * EXIF block must not make a decodable image unusable.
 */
#include <string.h>

#include "augment/augment_internal.h"

#define EXIF_TAG_ORIENTATION 0x0112
#define TIFF_SHORT 3
#define TIFF_LONG 4

static uint16_t rd16(const uint8_t *p, int le)
{
	return le ? (uint16_t)(p[0] | (p[1] << 8))
		  : (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t rd32(const uint8_t *p, int le)
{
	return le ? ims_load_le32(p)
		  : ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
			    ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

int aug_exif_orientation_tiff(const uint8_t *p, size_t len)
{
	/* Header: byte order "II" or "MM", 42, offset of IFD0. */
	if (!p || len < 8)
		return 1;
	int le;
	if (p[0] == 'I' && p[1] == 'I')
		le = 1;
	else if (p[0] == 'M' && p[1] == 'M')
		le = 0;
	else
		return 1;
	if (rd16(p + 2, le) != 42)
		return 1;
	uint32_t ifd = rd32(p + 4, le);
	/* The IFD must start after the header and leave room for its entry
	 * count; compare in size_t so a huge offset cannot wrap. */
	if (ifd < 8 || (size_t)ifd > len - 2)
		return 1;
	size_t n = rd16(p + ifd, le);
	/* A truncated IFD keeps the entries that are wholly present. */
	size_t room = (len - (size_t)ifd - 2) / 12;
	if (n > room)
		n = room;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = p + ifd + 2 + 12 * i;
		if (rd16(e, le) != EXIF_TAG_ORIENTATION)
			continue;
		uint16_t type = rd16(e + 2, le);
		uint32_t count = rd32(e + 4, le);
		uint32_t v;
		/* The value is a single SHORT stored inline (left-justified in
		 * the 4-byte field). Anything that would need the offset
		 * form is malformed for this tag. */
		if (type == TIFF_SHORT && count >= 1 && count <= 2)
			v = rd16(e + 8, le);
		else if (type == TIFF_LONG && count == 1)
			v = rd32(e + 8, le);
		else
			return 1;
		return v >= 1 && v <= 8 ? (int)v : 1;
	}
	return 1;
}

int aug_exif_orientation_app1(const uint8_t *p, size_t len)
{
	/* "Exif\0" then a pad byte (normally 0, some writers put 0xFF). */
	if (!p || len < 6 || memcmp(p, "Exif\0", 5) != 0)
		return 0;
	return aug_exif_orientation_tiff(p + 6, len - 6);
}
