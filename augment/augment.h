/*
 * augment.h - image decoding, encoding and resampling for imshard.
 *
 * This is the one place that understands image bytes. The packer uses it to
 * check, decode, resize and re-encode source files; the loader (later) uses
 * the same decoder, so a record decodes identically at pack and load time.
 *
 * Caveats:
 *  - An aug_codec holds TurboJPEG handles and scratch memory. It is not
 *    thread-safe: create one per thread and reuse it for many images (handle
 *    creation is far more expensive than a small decode).
 *  - Functions never abort on bad bytes: a corrupt, truncated, disguised or
 *    absurd image returns a negative IMS_E* code and a one-line reason in
 *    the ims_error.
 *  - The format is decided by content (magic bytes), never by file name.
 *  - Pixels are 8-bit, interleaved (HWC), rows top-first; `stride` is the
 *    distance in bytes between the starts of two rows.
 */
#ifndef IMSHARD_AUGMENT_H
#define IMSHARD_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum aug_format {
	AUG_FORMAT_UNKNOWN = 0,
	AUG_FORMAT_JPEG = 1,
	AUG_FORMAT_PNG = 2
} aug_format;

/* Images larger than this in either dimension, or with more than
 * AUG_MAX_PIXELS pixels, are refused with IMS_ELIMIT. */
#define AUG_MAX_SIDE 32768
#define AUG_MAX_PIXELS (256u * 1024u * 1024u)

/* Format from the first bytes: JPEG (FF D8 FF) or PNG (8-byte signature). */
aug_format aug_sniff(const uint8_t *buf, size_t len);

/* "jpeg", "png" or "unknown". */
const char *aug_format_name(aug_format f);

/* What a file's headers say, without decoding the pixels. */
typedef struct aug_image_info {
	aug_format format;
	int width, height;  /* as coded in the file, before orientation */
	int channels;       /* channels aug_decode gives with AUG_CHANNELS_NATIVE:
			       1 (grey), 3 (colour) or 4 (colour + alpha) */
	int orientation;    /* EXIF orientation 1..8 (JPEG APP1 or PNG eXIf);
			       1 when absent or invalid */
	int upright_width;  /* width/height after orientation (swapped for 5..8) */
	int upright_height;
	int is_cmyk;        /* JPEG stored as CMYK or YCCK */
	int adobe_inverted; /* CMYK values stored inverted (Adobe APP14) */
	int bit_depth;      /* 8, or PNG's 1/2/4/16 */
	int has_alpha;      /* PNG alpha channel or tRNS */
} aug_image_info;

typedef struct aug_codec aug_codec;

/* Creates a codec; *out is NULL on failure. */
int aug_codec_create(aug_codec **out, ims_error *err);
/* Frees a codec. NULL is accepted. */
void aug_codec_destroy(aug_codec *c);

/*
 * Reads the headers and checks the file's structure without decoding
 * pixels: for JPEG, the marker stream is walked through every scan to the
 * EOI marker (catches truncation and garbage between segments); for PNG,
 * every chunk's length and CRC is checked through IEND. Fills *info.
 * Errors: IMS_EFORMAT (not JPEG/PNG, or empty), IMS_ECORRUPT (truncated,
 * bad structure or CRC), IMS_ELIMIT (absurd dimensions), IMS_EUNSUPPORTED
 * (valid but not decodable here: 12-bit, lossless or hierarchical JPEG, 2
 * colour components, an unknown critical PNG chunk), IMS_EINVAL (no
 * codec). info may be NULL.
 */
int aug_probe(aug_codec *c, const uint8_t *buf, size_t len,
	      aug_image_info *info, ims_error *err);

/* Channel layout produced by aug_decode. */
typedef enum aug_channels {
	/* 3 channels RGB: grey replicated, alpha composited on white, CMYK
	 * converted. */
	AUG_CHANNELS_RGB = 0,
	/* 1 for grey (and grey+alpha composited on white), 3 for colour,
	 * 4 for RGBA; CMYK converted to RGB. */
	AUG_CHANNELS_NATIVE = 1
} aug_channels;

typedef struct aug_decode_opts {
	aug_channels channels;
	/* Decoding may use JPEG DCT scaling to produce a smaller image, as long
	 * as the upright result is at least min_width x min_height: the
	 * smallest of the factors 1/2, 1/4 and 1/8 that covers both is used,
	 * else full size (libjpeg-turbo's other factors, 3/8 to 7/8, decode
	 * slower than full size). 0 x 0 = full size; a 0 on one side leaves that side unbound.
	 * The result is never smaller than that unless the image itself is.
	 * PNG is always decoded at full size. */
	int min_width, min_height;
	/* Apply EXIF orientation so the result is upright (normally 1). */
	int apply_orientation;
} aug_decode_opts;

/* Decoded pixels owned by the aug_image; release with aug_image_release.
 * A zeroed aug_image is empty and may be released. The buffer is reused by
 * later decodes into the same aug_image when it is large enough. */
typedef struct aug_image {
	uint8_t *pixels;
	int width, height, channels;
	size_t stride;
	size_t capacity; /* bytes allocated at pixels */
} aug_image;

void aug_image_release(aug_image *img);

/* Makes img width x height x channels (stride = width*channels), reusing its
 * buffer when large enough. Contents are undefined. */
int aug_image_alloc(aug_image *img, int width, int height, int channels,
		    ims_error *err);

/*
 * Decodes buf into out (reusing out's buffer when it is large enough).
 * Handles greyscale, RGB, CMYK/YCCK (Adobe-inverted or not), palette,
 * alpha, tRNS, 1/2/4/16-bit PNG, and EXIF orientation. *info (may be NULL)
 * receives the header information, as aug_probe reports it (for JPEG the
 * scan data is checked by the decoder itself, not walked twice). A JPEG that
 * decodes with warnings (e.g. a premature end of data) is an error
 * (IMS_ECORRUPT): damaged images are not packed. opts NULL means RGB, full
 * size, upright. Errors: those of aug_probe, IMS_ECORRUPT for damage found
 * while decoding, IMS_ENOMEM.
 */
int aug_decode(aug_codec *c, const uint8_t *buf, size_t len,
	       const aug_decode_opts *opts, aug_image *out,
	       aug_image_info *info, ims_error *err);

/* A growable byte buffer owned by the caller; release with aug_buf_release.
 * A zeroed aug_buf is empty. */
typedef struct aug_buf {
	uint8_t *data;
	size_t len, cap;
} aug_buf;

void aug_buf_release(aug_buf *b);

/* Encodes img (1 or 3 channels) as baseline JPEG at quality 1..100 into out
 * (out->len set; previous contents replaced). Colour uses 4:2:0 chroma
 * subsampling, the default of libjpeg and PIL; grey is 4:0:0. IMS_EINVAL
 * for other channel counts or qualities, IMS_ELIMIT beyond 65500 pixels a
 * side. */
int aug_encode_jpeg(aug_codec *c, const aug_image *img, int quality,
		    aug_buf *out, ims_error *err);

/* Encodes img (1, 3 or 4 channels; 2 = grey + alpha also works) as 8-bit
 * PNG into out (previous contents replaced). c may be NULL: libpng keeps no
 * state between images. */
int aug_encode_png(aug_codec *c, const aug_image *img, aug_buf *out,
		   ims_error *err);

/*
 * Resamples src into dst (dst is (re)allocated to dst_w x dst_h with src's
 * channel count). Antialiased: when shrinking, each output pixel averages
 * the source pixels it covers (separable triangle filter whose support
 * grows with the scale factor), so no aliasing; bilinear when enlarging.
 * Deterministic and identical for every thread count. Same-size axes are
 * copied exactly. c may be NULL (scratch is then allocated per call).
 * Errors: IMS_EINVAL (sizes < 1, src == dst), IMS_ELIMIT, IMS_ENOMEM.
 */
int aug_resize(aug_codec *c, const aug_image *src, int dst_w, int dst_h,
	       aug_image *dst, ims_error *err);

/* Geometry for the packer's --resize/--max-size/--center-crop options. */
typedef struct aug_fit {
	int shorter;     /* scale so the shorter side is this (0 = keep) */
	int max_longer;  /* then cap the longer side at this (0 = no cap) */
	int center_crop; /* crop the centre square of side min(w, h) after
			    scaling */
	int allow_upscale; /* when 0, never enlarge: images already smaller
			      keep their size */
} aug_fit;

/* Output size for an upright w x h image under fit: scaled size (*sw,*sh)
 * and final size after an optional crop (*ow,*oh). One scale factor is
 * applied to both sides: the side that sets it comes out exact, the other
 * is rounded to nearest (halves up), at least 1. fit NULL = unchanged. */
void aug_fit_size(const aug_fit *fit, int w, int h, int *sw, int *sh, int *ow,
		  int *oh);

/* Crops the centre ow x oh region of src into dst (copy; dst != src). When
 * the margin is odd the extra pixel is left at the right/bottom.
 * IMS_EINVAL unless 1 <= ow <= width and 1 <= oh <= height. */
int aug_crop_center(const aug_image *src, int ow, int oh, aug_image *dst,
		    ims_error *err);

#ifdef __cplusplus
}
#endif

#endif
