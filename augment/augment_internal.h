/*
 * augment_internal.h - what the augment sources share and the public header
 * does not promise: the codec's layout and the per-format entry points.
 *
 * Tests include it to reach the EXIF parser and the orientation transform
 * directly; nothing outside augment/ and tests/augment/ should.
 */
#ifndef IMSHARD_AUGMENT_INTERNAL_H
#define IMSHARD_AUGMENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "augment/augment.h"

/* Filter tables of one resize axis: output i reads taps [first[i],
 * first[i] + count[i]) of the input with weights[i * stride ...], 14-bit
 * fixed point summing to exactly AUG_RS_ONE. Kept in the codec and rebuilt
 * only when (in, out) changes, which for a dataset of similar sizes is
 * rarely. */
#define AUG_RS_BITS 14
#define AUG_RS_ONE (1 << AUG_RS_BITS)

typedef struct aug_rs_axis {
	int in, out;          /* sizes the tables were built for; 0 = none */
	int stride;           /* weights per output (max taps) */
	int max_count;        /* largest count[i] */
	int32_t *first, *count;
	int16_t *weights;
	/* The same weights as int16 pairs (k, k + 1) packed in an int32,
	 * (stride + 1) / 2 per output, zero past count: what pmaddwd takes. */
	int32_t *pairs;
	size_t cap_out, cap_w; /* allocated entries */
} aug_rs_axis;

typedef struct aug_rs_scratch {
	aug_rs_axis h, v;
	uint8_t *tmp; /* one vertically filtered row, in_w x C + padding */
	size_t tmp_cap;
	int32_t *acc; /* vertical sums of one row (portable path) */
	size_t acc_cap;
} aug_rs_scratch;

/* libjpeg state is opaque here so that only jpeg.c includes jpeglib.h. */
typedef struct aug_jpeg_state aug_jpeg_state;

struct aug_codec {
	void *tj_dec, *tj_enc;    /* tjhandle */
	aug_jpeg_state *lj;       /* libjpeg decompressor for header checks */
	aug_image stage;          /* decode before orientation */
	aug_image raw;            /* decoder output before conversion: CMYK, or
				     interlaced PNG with alpha */
	uint8_t *row;             /* one PNG row before alpha compositing */
	size_t row_cap;
	aug_rs_scratch rs;
};

/* jpeg.c */
/* The code of a codec library's error message: memory it could not have
 * (libjpeg's "Insufficient memory", libpng's "Out of memory") is
 * IMS_ENOMEM, not the image's fault; anything else is `otherwise`.
 * Inline: jpeg.c and png.c, which codec.c calls, call it. */
static inline int aug_lib_error_code(const char *msg, int otherwise)
{
	static const char *const says[] = {
		"Insufficient memory", "insufficient memory",	/* libjpeg, libpng */
		"Memory allocation failure",			/* TurboJPEG */
		"Out of memory", "out of memory",		/* libpng, ours */
	};
	for (size_t i = 0; msg && i < sizeof(says) / sizeof(says[0]); i++)
		if (strstr(msg, says[i]))
			return IMS_ENOMEM;
	return otherwise;
}

int aug_jpeg_init(aug_codec *c, ims_error *err);
void aug_jpeg_free(aug_codec *c);
/* Walks the marker segments and fills info. full = 1 follows every scan
 * through the entropy-coded data to EOI and asks libjpeg to read the
 * headers too (aug_probe); full = 0 stops at the first SOS (aug_decode,
 * where the decoder itself reports truncation as a warning). */
int aug_jpeg_parse(aug_codec *c, const uint8_t *buf, size_t len, int full,
		   aug_image_info *info, ims_error *err);
/* Scaled size (stored orientation) aug_decode will produce for opts. */
void aug_jpeg_scaled_size(const aug_image_info *info,
			  const aug_decode_opts *opts, int *w, int *h);
/* Decodes at the scaled size into dst in stored orientation, channels
 * already chosen (1 or 3). */
int aug_jpeg_decode(aug_codec *c, const uint8_t *buf, size_t len,
		    const aug_image_info *info, const aug_decode_opts *opts,
		    int channels, aug_image *dst, ims_error *err);

/* png.c */
int aug_png_parse(const uint8_t *buf, size_t len, aug_image_info *info,
		  ims_error *err);
int aug_png_decode(aug_codec *c, const uint8_t *buf, size_t len,
		   const aug_image_info *info, int channels, aug_image *dst,
		   ims_error *err);

/* exif.c: orientation 1..8 from a TIFF structure (the body of an EXIF
 * block or of a PNG eXIf chunk); 1 when absent, malformed or out of range.
 * Never reads outside [p, p + len). */
int aug_exif_orientation_tiff(const uint8_t *p, size_t len);
/* The same from a JPEG APP1 payload (after the length field): 0 when the
 * segment is not EXIF (XMP also lives in APP1), else 1..8. */
int aug_exif_orientation_app1(const uint8_t *p, size_t len);

/* image.c (below codec.c, jpeg.c, png.c and resize.c; calls none of them) */
/* IMS_ELIMIT unless 0 < w, h <= AUG_MAX_SIDE and w*h <= AUG_MAX_PIXELS;
 * zero or negative sizes are IMS_ECORRUPT. */
int aug_check_dims(long long w, long long h, const char *fmt_name,
		   ims_error *err);
/* Sets upright_width/height from width/height and orientation. */
void aug_info_set_upright(aug_image_info *info);

/* codec.c */
/* dst = src turned upright for EXIF orientation 1..8 (dst != src). */
int aug_orient(const aug_image *src, int orientation, aug_image *dst,
	       ims_error *err);

/* jpeg.c: n CMYK pixels (Adobe-inverted or not) to RGB; the one
 * conversion every JPEG decode path uses. */
void aug_cmyk_row_to_rgb(const uint8_t *cmyk, int n, int inverted, uint8_t *rgb);

/* png.c: n pixels with channels + 1 samples (the last alpha) composited
 * on white into channels (1 or 3) samples; every alpha-to-RGB path uses it. */
void aug_composite_row(const uint8_t *src, uint8_t *dst, int n, int channels);

/* resize.c */
void aug_rs_free(aug_rs_scratch *s);

/* transform.c */
/*
 * aug_warp with the SIMD row kernel on (simd = 1, where the CPU has AVX2)
 * or off: both give the same bytes, which the tests check.
 */
int aug_warp_impl(const aug_image *src, const aug_plan *p,
		  const aug_transform_opts *o, void *dst, int simd,
		  ims_error *err);

#endif
