/*
 * png.c - PNG structure check, decode and encode.
 *
 * aug_png_parse walks the chunks itself (length, type, CRC, IHDR first,
 * IEND last): that is all "keep" packing needs, and it is much cheaper than
 * inflating. aug_png_decode runs the same walk first, so libpng is told to
 * skip its own CRC checks. Every layout becomes 8-bit: palettes and low bit
 * depths are expanded, 16-bit is rounded (png_set_scale_16, not a
 * truncating strip), tRNS becomes alpha, and alpha is composited on white
 * here when the caller wants no alpha channel. gAMA/iCCP are ignored, as
 * PIL and the frameworks do: values are taken as stored.
 * libpng reports through the callbacks below; it never prints.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <zlib.h>

#include "augment/augment_internal.h"

/* zlib level for aug_encode_png: 1, zlib's fastest. On a 341x256 photo-like
 * image (libpng's default adaptive filters) level 1 took 6 ms for 141 KB,
 * level 3 14 ms for 137 KB, level 6 (zlib's default) 44 ms for 119 KB:
 * the packer re-encodes every image of a split, and decoding speed does not
 * depend on the level, so the fastest level wins. */
#define AUG_PNG_LEVEL 1

static uint32_t be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	       ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static int is_letter(uint8_t b)
{
	return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z');
}

/* IHDR payload (13 bytes): width, height, depth, colour type, compression,
 * filter, interlace. */
static int parse_ihdr(const uint8_t *p, size_t n, aug_image_info *info,
		      int *color_type, ims_error *err)
{
	RETURN_IF(n != 13, err, IMS_ECORRUPT,
		  "cannot read PNG: IHDR chunk of %zu bytes (must be 13)", n);
	uint32_t w = be32(p), h = be32(p + 4);
	int depth = p[8], ct = p[9];
	RETURN_IF(w > 0x7FFFFFFFu || h > 0x7FFFFFFFu, err, IMS_ECORRUPT,
		  "cannot read PNG: image size %ux%u", w, h);
	FORWARD_IF_ERR(aug_check_dims(w, h, "PNG", err));
	int ok;
	switch (ct) {
	case 0: ok = depth == 1 || depth == 2 || depth == 4 || depth == 8 ||
		     depth == 16; break;
	case 3: ok = depth == 1 || depth == 2 || depth == 4 || depth == 8; break;
	case 2: case 4: case 6: ok = depth == 8 || depth == 16; break;
	default: ok = 0; break;
	}
	RETURN_IF(!ok, err, IMS_ECORRUPT,
		  "cannot read PNG: colour type %d with bit depth %d", ct, depth);
	RETURN_IF(p[10] != 0 || p[11] != 0 || p[12] > 1, err, IMS_ECORRUPT,
		  "cannot read PNG: unknown compression, filter or interlace "
		  "method (%d, %d, %d)", p[10], p[11], p[12]);
	info->width = (int)w;
	info->height = (int)h;
	info->bit_depth = depth;
	*color_type = ct;
	return 0;
}

int aug_png_parse(const uint8_t *buf, size_t len, aug_image_info *info,
		  ims_error *err)
{
	size_t pos = 8; /* after the signature aug_sniff saw */
	int ct = -1, have_plte = 0, have_idat = 0, trns = 0, orientation = 0;
	for (;;) {
		RETURN_IF(len - pos < 12, err, IMS_ECORRUPT,
			  "cannot read PNG: file ends before the IEND chunk "
			  "(truncated at %zu bytes)", len);
		uint32_t n = be32(buf + pos);
		const uint8_t *type = buf + pos + 4, *data = buf + pos + 8;
		char name[5];
		for (int i = 0; i < 4; i++)
			name[i] = is_letter(type[i]) ? (char)type[i] : '?';
		name[4] = '\0';
		RETURN_IF(!is_letter(type[0]) || !is_letter(type[1]) ||
				  !is_letter(type[2]) || !is_letter(type[3]),
			  err, IMS_ECORRUPT,
			  "cannot read PNG: bad chunk type at offset %zu", pos + 4);
		RETURN_IF(n > 0x7FFFFFFFu, err, IMS_ECORRUPT,
			  "cannot read PNG: chunk '%s' claims %u bytes", name, n);
		RETURN_IF(n > len - pos - 12, err, IMS_ECORRUPT,
			  "cannot read PNG: file ends inside chunk '%s' "
			  "(truncated at %zu bytes)", name, len);
		uint32_t crc = (uint32_t)crc32(0, type, (uInt)n + 4);
		RETURN_IF(crc != be32(data + n), err, IMS_ECORRUPT,
			  "cannot read PNG: CRC mismatch in chunk '%s' at offset "
			  "%zu", name, pos);
		pos += 12 + (size_t)n;

		if (ct < 0) {
			RETURN_IF(memcmp(type, "IHDR", 4) != 0, err, IMS_ECORRUPT,
				  "cannot read PNG: first chunk is '%s', not IHDR",
				  name);
			FORWARD_IF_ERR(parse_ihdr(data, n, info, &ct, err));
		} else if (!memcmp(type, "IHDR", 4)) {
			return ims_fail(err, IMS_ECORRUPT,
					"cannot read PNG: second IHDR chunk");
		} else if (!memcmp(type, "PLTE", 4)) {
			RETURN_IF(ct == 3 && (n == 0 || n % 3 || n / 3 > 256 ||
					      n / 3 > (1u << info->bit_depth)),
				  err, IMS_ECORRUPT,
				  "cannot read PNG: palette of %u bytes", n);
			have_plte = 1;
		} else if (!memcmp(type, "tRNS", 4)) {
			/* libpng ignores tRNS on types that carry alpha. */
			trns = ct == 0 || ct == 2 || ct == 3;
		} else if (!memcmp(type, "IDAT", 4)) {
			RETURN_IF(ct == 3 && !have_plte, err, IMS_ECORRUPT,
				  "cannot read PNG: palette image without a PLTE "
				  "chunk");
			have_idat = 1;
		} else if (!memcmp(type, "eXIf", 4)) {
			/* The TIFF block itself; some writers prepend the
			 * JPEG-style "Exif\0\0". */
			if (!orientation) {
				orientation = aug_exif_orientation_app1(data, n);
				if (!orientation)
					orientation = aug_exif_orientation_tiff(data, n);
			}
		} else if (!memcmp(type, "IEND", 4)) {
			RETURN_IF(!have_idat, err, IMS_ECORRUPT,
				  "cannot read PNG: no image data (IDAT) before IEND");
			break;
		} else if (type[0] >= 'A' && type[0] <= 'Z') {
			/* An upper-case first letter means "critical": a
			 * decoder that does not know it must refuse. */
			return ims_fail(err, IMS_EUNSUPPORTED,
					"cannot decode PNG: unknown critical chunk '%s'",
					name);
		}
	}
	info->format = AUG_FORMAT_PNG;
	info->has_alpha = trns || ct == 4 || ct == 6;
	info->channels = (ct == 0 || ct == 4) ? 1 : info->has_alpha ? 4 : 3;
	info->orientation = orientation ? orientation : 1;
	info->is_cmyk = 0;
	info->adobe_inverted = 0;
	aug_info_set_upright(info);
	return 0;
}

/* ---- libpng glue ----------------------------------------------------- */

typedef struct png_io {
	const uint8_t *buf;
	size_t len, pos;
	ims_buf *out;
	int oom;
	char msg[256];
} png_io;

static void png_error_fn(png_structp png, png_const_charp msg)
{
	png_io *io = png_get_error_ptr(png);
	snprintf(io->msg, sizeof(io->msg), "%s", msg ? msg : "unknown error");
	png_longjmp(png, 1);
}

static void png_warning_fn(png_structp png, png_const_charp msg)
{
	/* Warnings are about ancillary data (colour profiles, text) the
	 * pixels do not depend on. */
	(void)png;
	(void)msg;
}

static void png_read_fn(png_structp png, png_bytep out, size_t n)
{
	png_io *io = png_get_io_ptr(png);
	if (n > io->len - io->pos)
		png_error(png, "file ends early (truncated)");
	memcpy(out, io->buf + io->pos, n);
	io->pos += n;
}

static void png_write_fn(png_structp png, png_bytep data, size_t n)
{
	png_io *io = png_get_io_ptr(png);
	ims_buf *b = io->out;
	if (ims_buf_grow(b, n, NULL) < 0) {
		io->oom = 1;
		png_error(png, "out of memory");
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
}

static void png_flush_fn(png_structp png)
{
	(void)png;
}

/* Alpha over white: c * a + 255 * (255 - a), divided by 255 and rounded. */
static inline uint8_t over_white(unsigned c, unsigned a)
{
	unsigned t = c * a + 255u * (255u - a) + 128u;
	return (uint8_t)((t + (t >> 8)) >> 8);
}

/* One row of n pixels with lc = channels + 1 (the last being alpha) to
 * channels (1 or 3). */
void aug_composite_row(const uint8_t *s, uint8_t *d, int n, int channels)
{
	if (channels == 1) {
		for (int x = 0; x < n; x++, s += 2)
			d[x] = over_white(s[0], s[1]);
	} else {
		for (int x = 0; x < n; x++, s += 4, d += 3) {
			d[0] = over_white(s[0], s[3]);
			d[1] = over_white(s[1], s[3]);
			d[2] = over_white(s[2], s[3]);
		}
	}
}

int aug_raw_to_rgb(const uint8_t *px, int w, int h, int channels, aug_image *out,
		   ims_error *err)
{
	RETURN_IF(!px || !out || w < 1 || h < 1 || (channels != 1 && channels != 3 && channels != 4),
		  err, IMS_EINVAL, "cannot convert raw pixels: %dx%d with %d channels", w, h, channels);
	FORWARD_IF_ERR(aug_image_alloc(out, w, h, 3, err));
	for (int y = 0; y < h; y++) {
		const uint8_t *s = px + (size_t)y * (size_t)w * (size_t)channels;
		uint8_t *d = out->pixels + (size_t)y * out->stride;
		if (channels == 4)
			aug_composite_row(s, d, w, 3);
		else if (channels == 3)
			memcpy(d, s, (size_t)w * 3);
		else
			for (int x = 0; x < w; x++)
				d[3 * x] = d[3 * x + 1] = d[3 * x + 2] = s[x];
	}
	return 0;
}

int aug_png_decode(aug_codec *c, const uint8_t *buf, size_t len,
		   const aug_image_info *info, int channels, aug_image *dst,
		   ims_error *err)
{
	int w = info->width, h = info->height;
	int grey = info->channels == 1; /* colour types 0 and 4 */
	/* The layout libpng is asked for (lc channels): grey stays grey
	 * only when the caller wants 1 channel, tRNS/alpha gives a 4th. */
	int lc = (grey && channels == 1 ? 1 : 3) + (info->has_alpha ? 1 : 0);
	int composite = lc != channels;

	/* Everything is allocated before setjmp, so a longjmp from libpng
	 * leaks nothing. Interlaced images with alpha to composite need the
	 * whole image in libpng's layout (c->raw); the others go row by
	 * row. */
	FORWARD_IF_ERR(aug_image_alloc(dst, w, h, channels, err));
	/* IHDR is the first chunk (aug_png_parse checked): its interlace
	 * byte is at offset 28. */
	int interlaced = buf[28] == 1;
	if (composite && interlaced) {
		FORWARD_IF_ERR(aug_image_alloc(&c->raw, w, h, lc, err));
	} else if (composite) {
		size_t rowbytes = (size_t)w * (size_t)lc;
		if (rowbytes > c->row_cap) {
			free(c->row);
			c->row = malloc(rowbytes);
			c->row_cap = c->row ? rowbytes : 0;
			RETURN_IF(!c->row, err, IMS_ENOMEM,
				  "cannot decode PNG: out of memory");
		}
	}

	png_io io = {buf, len, 0, NULL, 0, ""};
	png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io,
						 png_error_fn, png_warning_fn);
	RETURN_IF(!png, err, IMS_ENOMEM, "cannot decode PNG: out of memory");
	png_infop pi = png_create_info_struct(png);
	if (!pi) {
		png_destroy_read_struct(&png, NULL, NULL);
		return ims_fail(err, IMS_ENOMEM, "cannot decode PNG: out of memory");
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_read_struct(&png, &pi, NULL);
		return ims_fail(err, aug_lib_error_code(io.msg, IMS_ECORRUPT),
				"cannot decode PNG: %s", io.msg);
	}
	png_set_read_fn(png, &io, png_read_fn);
	/* aug_png_parse has checked every CRC already. */
	png_set_crc_action(png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
	png_set_user_limits(png, AUG_MAX_SIDE, AUG_MAX_SIDE);
	png_read_info(png, pi);
	png_set_expand(png);
	if (png_get_bit_depth(png, pi) == 16)
		png_set_scale_16(png);
	if (grey && lc >= 3)
		png_set_gray_to_rgb(png);
	int passes = png_set_interlace_handling(png);
	png_read_update_info(png, pi);
	if ((int)png_get_image_width(png, pi) != w ||
	    (int)png_get_image_height(png, pi) != h ||
	    png_get_channels(png, pi) != lc || png_get_bit_depth(png, pi) != 8 ||
	    png_get_rowbytes(png, pi) != (size_t)w * (size_t)lc)
		png_error(png, "libpng's layout differs from the header's");

	if (!composite || interlaced) {
		/* Each pass fills in more pixels of the rows it is given. */
		aug_image *to = composite ? &c->raw : dst;
		for (int pass = 0; pass < passes; pass++)
			for (int y = 0; y < h; y++)
				png_read_row(png, to->pixels + (size_t)y * to->stride,
					     NULL);
	} else {
		for (int y = 0; y < h; y++) {
			png_read_row(png, c->row, NULL);
			aug_composite_row(c->row, dst->pixels + (size_t)y * dst->stride,
				      w, channels);
		}
	}
	png_read_end(png, NULL);
	png_destroy_read_struct(&png, &pi, NULL);
	if (composite && interlaced)
		for (int y = 0; y < h; y++)
			aug_composite_row(c->raw.pixels + (size_t)y * c->raw.stride,
				      dst->pixels + (size_t)y * dst->stride, w,
				      channels);
	return 0;
}

/* ---- encode ---------------------------------------------------------- */

int aug_encode_png(aug_codec *c, const aug_image *img, ims_buf *out,
		   ims_error *err)
{
	(void)c; /* libpng write state is not reusable between images */
	RETURN_IF(!img || !out || !img->pixels, err, IMS_EINVAL,
		  "cannot encode PNG: missing image or buffer");
	RETURN_IF(img->channels < 1 || img->channels > 4, err, IMS_EINVAL,
		  "cannot encode PNG: %d channels", img->channels);
	RETURN_IF(img->width < 1 || img->height < 1, err, IMS_EINVAL,
		  "cannot encode PNG: size %dx%d", img->width, img->height);
	static const int types[5] = {0, PNG_COLOR_TYPE_GRAY,
				     PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
				     PNG_COLOR_TYPE_RGB_ALPHA};
	out->len = 0;
	/* A first guess at the size saves most reallocations. */
	FORWARD_IF_ERR(ims_buf_reserve(
		out, (size_t)img->width * img->height * img->channels / 2 + 1024,
		err));

	png_io io = {NULL, 0, 0, out, 0, ""};
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io,
						  png_error_fn, png_warning_fn);
	RETURN_IF(!png, err, IMS_ENOMEM, "cannot encode PNG: out of memory");
	png_infop pi = png_create_info_struct(png);
	if (!pi) {
		png_destroy_write_struct(&png, NULL);
		return ims_fail(err, IMS_ENOMEM, "cannot encode PNG: out of memory");
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &pi);
		out->len = 0;
		/* libpng's own allocations (rows, zlib) say "Insufficient
		 * memory"; that is memory too, not a bad image */
		return ims_fail(err, io.oom ? IMS_ENOMEM : aug_lib_error_code(io.msg, IMS_EINVAL),
				"cannot encode PNG: %s", io.msg);
	}
	png_set_write_fn(png, &io, png_write_fn, png_flush_fn);
	png_set_IHDR(png, pi, (png_uint_32)img->width, (png_uint_32)img->height,
		     8, types[img->channels], PNG_INTERLACE_NONE,
		     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
	png_set_compression_level(png, AUG_PNG_LEVEL);
	png_write_info(png, pi);
	for (int y = 0; y < img->height; y++)
		png_write_row(png, img->pixels + (size_t)y * img->stride);
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &pi);
	return 0;
}
