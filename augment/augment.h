/*
 * augment.h - image decoding, encoding and resampling for imshard.
 *
 * This is the one place that understands image bytes. The packer uses it to
 * check, decode, resize and re-encode source files; the loader
 * (augment/loader.h, included at the end) uses the same decoder, so a
 * record decodes identically at pack and load time.
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

/* Raw pixels (w x h, 1, 3 or 4 channels interleaved, rows packed, as
 * RIO_ENC_RAW records hold them) as 3-channel RGB in out: grey replicated,
 * alpha composited over white as aug_decode's RGB mode does. Errors:
 * IMS_EINVAL, IMS_ENOMEM. */
int aug_raw_to_rgb(const uint8_t *px, int w, int h, int channels, aug_image *out,
		   ims_error *err);

/* Encodes img (1 or 3 channels) as baseline JPEG at quality 1..100 into out
 * (out->len set; previous contents replaced). Colour uses 4:2:0 chroma
 * subsampling, the default of libjpeg and PIL; grey is 4:0:0. IMS_EINVAL
 * for other channel counts or qualities, IMS_ELIMIT beyond 65500 pixels a
 * side. */
int aug_encode_jpeg(aug_codec *c, const aug_image *img, int quality,
		    ims_buf *out, ims_error *err);

/* Encodes img (1, 3 or 4 channels; 2 = grey + alpha also works) as 8-bit
 * PNG into out (previous contents replaced). c may be NULL: libpng keeps no
 * state between images. */
int aug_encode_png(aug_codec *c, const aug_image *img, ims_buf *out,
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

/* ---- region decoding (for the loader) --------------------------------
 * (section owned by augment/region.c; declarations go here) */

/* A rectangle of whole pixels, half-open: columns [x0, x1), rows [y0, y1),
 * in upright (EXIF orientation applied) full-size image coordinates. */
typedef struct aug_rect {
	int x0, y0, x1, y1;
} aug_rect;

/* Where a region decode's pixels lie in the upright full-size image:
 * decoded pixel (u, v) covers the square [x0 + scale*u, x0 + scale*(u+1))
 * x [y0 + scale*v, y0 + scale*(v+1)), so a loader that sampled the full
 * image at point (x, y) samples the decoded image at
 * ((x - x0) / scale, (y - y0) / scale) in pixel-corner coordinates. x0 and
 * y0 are whole numbers; they can be negative when a mirrored EXIF
 * orientation meets a DCT-scaled size that overhangs the image (see
 * aug_decode_region). The last decoded column/row may likewise reach past
 * the image's right/bottom edge by less than one decoded pixel. */
typedef struct aug_region {
	double x0, y0; /* upright full-size coordinates of the top-left corner */
	double scale;  /* full-size pixels per decoded pixel: 1, 2, 4 or 8 */
} aug_region;

/*
 * Decodes the part of buf that covers `need`, at the coarsest fast JPEG
 * DCT scale allowed, into out; for the loader, which picks its crop before
 * decoding.
 *
 *  c          codec, used by one thread at a time (as for aug_decode).
 *  buf, len   the encoded image (JPEG or PNG), borrowed for the call.
 *  ch         channel layout, as aug_decode_opts.channels.
 *  need       the rectangle the crop reads, upright full-size coordinates;
 *             clipped to the image (what remains must be non-empty, else
 *             IMS_EINVAL). NULL = the whole image.
 *  max_scale  the largest full-size-pixels-per-decoded-pixel factor the
 *             caller accepts, typically crop side in the source / output
 *             side. The scale used is the largest of 8, 4, 2, 1 that is
 *             <= max_scale (1 below 2, and for NaN); PNG is always 1. For
 *             a JPEG smaller than the scale on both sides a finer factor
 *             that gives the same size may be used; *got says which.
 *  out        receives the decoded pixels (8-bit HWC, channels as
 *             aug_decode gives them for ch), reusing its buffer when large
 *             enough; owned by the caller (aug_image_release). It covers
 *             `need` (after clipping) and little more: for a scale s the
 *             need is widened to whole decoded pixels.
 *  got        receives out's position and scale (see aug_region). Required.
 *  info       may be NULL; receives the header information as aug_probe
 *             reports it.
 *
 * Pixels equal, byte for byte, the corresponding pixels of aug_decode
 * (upright) with min_width/min_height that make it pick the same DCT
 * factor: the loader sees what the packer checked.
 *
 * How: an upright JPEG (orientation 1) is decoded with libjpeg at 1/scale,
 * only the iMCU columns around need (jpeg_crop_scanline), skipping the rows
 * above it (jpeg_skip_scanlines; rows above are still entropy-decoded,
 * progressive files are read whole as libjpeg must) and stopping after its
 * last row. EXIF-rotated JPEGs and PNGs are decoded whole (JPEG at
 * 1/scale) with aug_decode and then cropped in place: correct, not faster.
 *
 * Damage: the JPEG marker structure is walked to EOI first, so a file cut
 * short fails (IMS_ECORRUPT) wherever need lies. Corrupt or missing
 * entropy-coded data is an error (IMS_ECORRUPT, as aug_decode's warnings)
 * when it lies in the rows decoded or skipped, or anywhere when need
 * reaches the last row; in rows below the region it goes unnoticed. The
 * packer already refused damaged images.
 *
 * Returns 0, or those of aug_decode, plus IMS_EINVAL (no codec, out or
 * got; bad ch; empty need or one outside the image). On error out's
 * contents and *got are unspecified (out stays releasable).
 *
 * Threads: like aug_decode, any thread with its own codec; nothing global.
 */
int aug_decode_region(aug_codec *c, const uint8_t *buf, size_t len,
		      aug_channels ch, const aug_rect *need, double max_scale,
		      aug_image *out, aug_region *got, aug_image_info *info,
		      ims_error *err);

/* ---- end of region decoding ---- */

/* ---- transforms (for the loader) --------------------------------------
 * (section owned by augment/transform.c; declarations go here)
 *
 * Geometry of one training or validation sample, in three steps:
 *  1. aug_sample_plan chooses it from (seed, epoch, index) alone, before
 *     any pixel is decoded: an aug_plan holds one 2x3 affine matrix from
 *     output to source coordinates, the source box the warp will read
 *     (decode only that) and the source-per-output scale (pick the JPEG
 *     DCT scale from it).
 *  2. aug_plan_rebase re-expresses the matrix for a source decoded as a
 *     region of the full image and/or at a reduced scale.
 *  3. aug_warp applies it in one bilinear pass, with mean/std normalisation
 *     fused, straight into the sample's slot of a batch.
 *
 * Coordinates are continuous with pixel i covering [i, i+1): its centre is
 * at i + 0.5, on both the source and the output side. The source is the
 * full upright image (EXIF orientation applied), src_w x src_h.
 *
 * Threads: every function here is pure (no globals, no hidden state): any
 * thread may call them concurrently on different outputs. Results depend
 * only on the arguments, so a batch is bit-identical whatever the thread
 * count; the per-pixel arithmetic of aug_warp is integer fixed point, plus
 * one float subtract and one multiply, so it does not depend on the
 * compiler's FMA contraction either.
 */

/* Output memory layout of one sample: NCHW writes 3 planes of out_h*out_w
 * values (R, G, B); NHWC writes out_h*out_w pixels of 3 values. */
typedef enum aug_layout {
	AUG_LAYOUT_NCHW = 0,
	AUG_LAYOUT_NHWC = 1
} aug_layout;

/* Output element type. U8: the interpolated pixel rounded to nearest
 * (mean/std must stay 0 and 1: anything else is refused, IMS_EINVAL).
 * F32: (pixel - mean[c]) * (1 / std[c]) in float,
 * pixel in 0..255. F16 (IEEE binary16) and BF16: that float rounded to
 * nearest-even (values beyond the F16 range become infinity). Host byte
 * order. */
typedef enum aug_dtype {
	AUG_DTYPE_U8 = 0,
	AUG_DTYPE_F32 = 1,
	AUG_DTYPE_F16 = 2,
	AUG_DTYPE_BF16 = 3
} aug_dtype;

/* Largest out_w / out_h accepted (the warp's row buffer holds that many
 * pixels). 1..AUG_MAX_OUT_SIDE is every loader's sample side: the bound
 * of imshard-train's and bench-load's --size and of Python's size. */
#define AUG_MAX_OUT_SIDE 4096
/* The smallest crop fraction: the resized side, max(out) / crop_frac,
 * must stay a number a long holds (1e-300 made it 1.6e301, whose
 * conversion is undefined); 0.001 is --val-crop-frac's floor. */
#define AUG_MIN_CROP_FRAC 1e-3

/*
 * What to produce and how to augment it. Caller-owned plain data; fill it
 * with aug_transform_opts_init, then change fields or apply an option
 * string with aug_transform_parse.
 *
 * Base geometry (before zoom/shift/rotate/flip):
 *  - train with rrc: random-resized-crop: a box of area fraction uniform
 *    in [scale_min, scale_max] of the source and aspect ratio (w/h)
 *    log-uniform in [ratio_min, ratio_max], at a uniform position; after 10
 *    failed tries (box not inside the image) the centre crop of the whole
 *    image clamped to the ratio range. The box is stretched to out_w x
 *    out_h.
 *  - validation (train == 0), or train without rrc: resize so the shorter
 *    side is round(max(out_w, out_h) / crop_frac) (256 for 224 at 0.875),
 *    the longer side in proportion, rounded to nearest; then the centre
 *    out_w x out_h crop (an odd margin leaves the extra pixel right/bottom,
 *    as aug_crop_center).
 * Then, for train only, about the output centre and in this order: zoom
 * (factor uniform in [1-zoom, 1+zoom], > 1 magnifies), shift (uniform in
 * [-shift, shift] times out_w and out_h, independently per axis), rotate
 * (uniform in [-rotate, rotate] degrees, positive = counter-clockwise as
 * displayed), then a horizontal flip with probability 1/2 when flip is set.
 * Validation is deterministic: seed, epoch and index are ignored.
 *
 * Sources with 1 channel are replicated to R, G, B; 4-channel sources have
 * their 4th channel (alpha) ignored: composite alpha when decoding
 * (AUG_CHANNELS_RGB does). Output is always 3 channels.
 */
typedef struct aug_transform_opts {
	int train;             /* 1: random augmentation; 0: validation */
	int out_w, out_h;      /* output size, 1..AUG_MAX_OUT_SIDE (224 x 224) */
	double crop_frac;      /* validation/no-rrc crop fraction,
				  [AUG_MIN_CROP_FRAC, 1] (0.875) */
	int rrc;               /* random-resized-crop (train: 1) */
	double scale_min, scale_max; /* rrc area fraction, 0 < min <= max <= 1
					(0.08, 1) */
	double ratio_min, ratio_max; /* rrc aspect w/h, 0 < min <= max
					(3/4, 4/3) */
	int flip;              /* horizontal flip with p = 0.5 (0) */
	double zoom;           /* 0 <= zoom < 1 (0 = off) */
	double shift;          /* 0 <= shift <= 1, fraction of the output (0) */
	double rotate;         /* 0 <= rotate <= 180 degrees (0) */
	float mean[3], std[3]; /* per channel, in pixel units 0..255 (0 and 1:
				  raw 0..255 floats); std > 0. ImageNet's are
				  mean {123.675, 116.28, 103.53},
				  std {58.395, 57.12, 57.375}. */
	aug_layout layout;     /* AUG_LAYOUT_NCHW */
	aug_dtype dtype;       /* AUG_DTYPE_F32 */
} aug_transform_opts;

/* Defaults as documented above for training (train != 0) or validation. */
void aug_transform_opts_init(aug_transform_opts *o, int train);

/*
 * Applies an option string to o, left to right (start from
 * aug_transform_opts_init). Comma-separated tokens, no spaces:
 *   none          no augmentation: rrc, flip, zoom, shift, rotate all off
 *   flip, noflip  horizontal flip with p = 0.5, or not
 *   rrc, norrc    random-resized-crop on (keeping its ranges) or off
 *   rrc=A:B       on, with area fraction in [A, B], 0 < A <= B <= 1
 *   ratio=A:B     rrc aspect ratio range, 0 < A <= B
 *   zoom=Z        0 <= Z < 1        shift=S   0 <= S <= 1
 *   rotate=D      0 <= D <= 180 degrees
 * An empty string (or NULL) changes nothing. Unknown keys, bad or
 * out-of-range values and empty tokens give IMS_EINVAL with a message
 * naming the token; o may then be partly updated (tokens before the bad
 * one were applied).
 */
int aug_transform_parse(const char *spec, aug_transform_opts *o,
			ims_error *err);

/*
 * One sample's geometry. The matrix maps an output point (x, y) (pixel
 * centres at x + 0.5, y + 0.5) to the source point
 *   u = m[0] x + m[1] y + m[2],   v = m[3] x + m[4] y + m[5]
 * in source pixel units, centres at +0.5. Plain data: copy it freely.
 */
typedef struct aug_plan {
	double m[6];
	/* Source pixels the warp reads, half-open [x0, x1) x [y0, y1), in
	 * full-image coordinates, clamped to the image and never empty. It is
	 * conservative: it may hold up to one extra pixel per side. */
	int need_x0, need_y0, need_x1, need_y1;
	/* Source pixels per output pixel along the output axis where that is
	 * smallest: decoding at 1/f of full size with f <= scale makes the
	 * warp shrink or keep, never enlarge. */
	double scale;
	/* The parameters that were drawn (inputs of aug_plan_build): base box
	 * in source pixels, zoom factor, shift in output pixels, angle in
	 * degrees, flip 0/1. */
	double crop_x, crop_y, crop_w, crop_h;
	double zoom, shift_x, shift_y, angle;
	int flip;
} aug_plan;

/*
 * Draws the plan of sample `index` in `epoch` for an upright src_w x src_h
 * source, deterministically from (seed, epoch, index): the same triple
 * gives the same plan in any order and on any thread; each parameter
 * (crop, zoom, shift, rotation, flip) has its own random stream, so turning
 * one on does not change the others. Then calls aug_plan_build.
 * Errors: IMS_EINVAL (bad options, src sizes outside 1..AUG_MAX_SIDE, p
 * NULL).
 */
int aug_sample_plan(const aug_transform_opts *o, int src_w, int src_h,
		    uint64_t seed, uint64_t epoch, uint64_t index, aug_plan *p,
		    ims_error *err);

/*
 * Computes m, the need box and scale from the parameter fields of p
 * (crop_*, zoom, shift_*, angle, flip), for o's output size and a src_w x
 * src_h source. aug_sample_plan uses it; call it directly to render a
 * chosen transform (tools, tests). Errors: IMS_EINVAL (bad options or
 * sizes, crop_w/crop_h/zoom not > 0, non-finite values).
 */
int aug_plan_build(const aug_transform_opts *o, int src_w, int src_h,
		   aug_plan *p, ims_error *err);

/*
 * Re-expresses p->m for a source decoded as the region of the full image
 * that starts at (x0, y0) (full-image pixels), at sx x sy full-image pixels
 * per decoded pixel (2 for a 1/2 DCT decode; for libjpeg's rounded-up
 * scaled sizes, full size / decoded size per axis): u' = (u - x0) / sx,
 * v' = (v - y0) / sy. p->scale is divided by min(sx, sy); the need box
 * stays in full-image coordinates. Errors: IMS_EINVAL (sx or sy not > 0,
 * non-finite values).
 */
int aug_plan_rebase(aug_plan *p, double x0, double y0, double sx, double sy,
		    ims_error *err);

/* 0 when o is a transform every call below takes; else IMS_EINVAL with
 * what is wrong in err (output size, ranges, mean/std, layout, dtype). */
int aug_transform_check(const aug_transform_opts *o, ims_error *err);

/* Bytes of one output sample: out_w * out_h * 3 * element size. 0 when o
 * is NULL or invalid. */
size_t aug_sample_bytes(const aug_transform_opts *o);

/*
 * Warps src (1, 3 or 4 channels, 8-bit HWC, any stride; the image p->m
 * refers to) into dst, one sample of aug_sample_bytes(o) bytes laid out as
 * o->layout / o->dtype (dst need not be aligned beyond its element type).
 * One bilinear pass over the out_w x out_h output; source points outside
 * the image take the nearest edge pixel (border replicate). Bilinear
 * without antialiasing: shrinking by more than ~2 aliases, so decode at a
 * DCT scale close to the output (plan->scale). Weights have 11 fractional
 * bits; an integer-aligned plan copies pixels exactly. No allocation: the
 * scratch (~50 KB for the largest outputs) is on the stack. Errors:
 * IMS_EINVAL (bad options, channels, an empty source, or a plan mapping
 * outside +-2^24 pixels).
 */
int aug_warp(const aug_image *src, const aug_plan *p,
	     const aug_transform_opts *o, void *dst, ims_error *err);

/*
 * One encoded image (JPEG or PNG in buf, len bytes, borrowed for the
 * call) rendered as sample `index` of `epoch` under o, into dst
 * (aug_sample_bytes(o) bytes): aug_sample_plan for its upright
 * upright_w x upright_h size (aug_probe's upright_width/height, or the
 * record header's), aug_decode_region of what the plan reads at the
 * coarsest DCT scale it allows (EXIF orientation applied, alpha
 * composited over white), aug_plan_rebase, aug_warp. The loader renders
 * every encoded record this way, so a program that renders an image file
 * with the validation transform (o->train == 0) feeds a network exactly
 * what validation fed it. scratch holds the decoded pixels (reused
 * between calls; aug_image_release). times (may be NULL) gets the
 * seconds spent decoding ([0]) and warping ([1]) added.
 * Errors: those of aug_sample_plan, aug_decode_region and aug_warp, and
 * IMS_ECORRUPT when the image decodes to another upright size than
 * upright_w x upright_h (a record header that is not its image's).
 * Threads: any thread with its own codec and scratch.
 */
int aug_render(aug_codec *c, const uint8_t *buf, size_t len, int upright_w,
	       int upright_h, const aug_transform_opts *o, uint64_t seed,
	       uint64_t epoch, uint64_t index, aug_image *scratch, void *dst,
	       double times[2], ims_error *err);

/* ---- end of transforms ---- */

#ifdef __cplusplus
}
#endif

/* the loader, which reads splits through these (its own part of the
 * manual) */
#include "augment/loader.h"

#endif
