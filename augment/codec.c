/*
 * codec.c - the format-independent half of augment.h: sniffing, the codec
 * handle, probe/decode dispatch, EXIF orientation transforms and the
 * packer's fit/crop geometry.
 *
 * The format is decided here, by magic bytes only; jpeg.c and png.c are
 * called with a buffer they know to be theirs. Calls go one way: codec.c
 * calls the formats and the resampler, and what they share with it (image
 * memory, size limits) lives below all of them in image.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment/augment_internal.h"

static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

aug_format aug_sniff(const uint8_t *buf, size_t len)
{
	if (!buf)
		return AUG_FORMAT_UNKNOWN;
	if (len >= 3 && buf[0] == 0xFF && buf[1] == 0xD8 && buf[2] == 0xFF)
		return AUG_FORMAT_JPEG;
	if (len >= 8 && memcmp(buf, png_sig, 8) == 0)
		return AUG_FORMAT_PNG;
	return AUG_FORMAT_UNKNOWN;
}

const char *aug_format_name(aug_format f)
{
	switch (f) {
	case AUG_FORMAT_JPEG: return "jpeg";
	case AUG_FORMAT_PNG: return "png";
	default: return "unknown";
	}
}

/* The format, or IMS_EFORMAT naming the first bytes: an HTML error page
 * saved as .jpg ("3c 68 74 6d") is the usual culprit. */
static int sniff_or_fail(const uint8_t *buf, size_t len, aug_format *fmt,
			 ims_error *err)
{
	RETURN_IF(!buf || len == 0, err, IMS_EFORMAT,
		  "not a JPEG or PNG image: empty file");
	*fmt = aug_sniff(buf, len);
	if (*fmt != AUG_FORMAT_UNKNOWN)
		return 0;
	char hex[16] = "";
	size_t n = len < 4 ? len : 4, o = 0;
	for (size_t i = 0; i < n; i++)
		o += (size_t)snprintf(hex + o, sizeof(hex) - o, "%s%02x",
				      i ? " " : "", buf[i]);
	return ims_fail(err, IMS_EFORMAT,
			"not a JPEG or PNG image (starts with %s)", hex);
}

/* ---- codec ----------------------------------------------------------- */

int aug_codec_create(aug_codec **out, ims_error *err)
{
	RETURN_IF(!out, err, IMS_EINVAL, "cannot create codec: no output pointer");
	*out = NULL;
	aug_codec *c = calloc(1, sizeof(*c));
	RETURN_IF(!c, err, IMS_ENOMEM, "cannot create codec: out of memory");
	int rc = aug_jpeg_init(c, err);
	if (rc < 0) {
		aug_codec_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

void aug_codec_destroy(aug_codec *c)
{
	if (!c)
		return;
	aug_jpeg_free(c);
	aug_image_release(&c->stage);
	aug_image_release(&c->raw);
	free(c->row);
	aug_rs_free(&c->rs);
	free(c);
}

/* ---- probe and decode ------------------------------------------------ */

static void info_reset(aug_image_info *info)
{
	memset(info, 0, sizeof(*info));
	info->orientation = 1;
}

int aug_probe(aug_codec *c, const uint8_t *buf, size_t len,
	      aug_image_info *info, ims_error *err)
{
	aug_image_info tmp;
	if (!info)
		info = &tmp;
	info_reset(info);
	RETURN_IF(!c, err, IMS_EINVAL, "cannot probe image: no codec");
	aug_format fmt;
	FORWARD_IF_ERR(sniff_or_fail(buf, len, &fmt, err));
	info->format = fmt;
	if (fmt == AUG_FORMAT_JPEG)
		return aug_jpeg_parse(c, buf, len, 1, info, err);
	return aug_png_parse(buf, len, info, err);
}

int aug_decode(aug_codec *c, const uint8_t *buf, size_t len,
	       const aug_decode_opts *opts, aug_image *out,
	       aug_image_info *info, ims_error *err)
{
	static const aug_decode_opts defaults = {AUG_CHANNELS_RGB, 0, 0, 1};
	aug_image_info tmp;
	if (!info)
		info = &tmp;
	info_reset(info);
	if (!opts)
		opts = &defaults;
	RETURN_IF(!c || !out, err, IMS_EINVAL,
		  "cannot decode image: missing codec or output image");
	RETURN_IF(opts->channels != AUG_CHANNELS_RGB &&
			  opts->channels != AUG_CHANNELS_NATIVE,
		  err, IMS_EINVAL, "cannot decode image: bad channel layout %d",
		  (int)opts->channels);
	aug_format fmt;
	FORWARD_IF_ERR(sniff_or_fail(buf, len, &fmt, err));
	info->format = fmt;
	/* JPEG: headers only; truncation beyond them is the decoder's
	 * warning. PNG: the whole chunk walk, whose CRC checks let libpng
	 * skip its own. */
	if (fmt == AUG_FORMAT_JPEG)
		FORWARD_IF_ERR(aug_jpeg_parse(c, buf, len, 0, info, err));
	else
		FORWARD_IF_ERR(aug_png_parse(buf, len, info, err));

	int channels = opts->channels == AUG_CHANNELS_NATIVE ? info->channels : 3;
	int orientation = opts->apply_orientation ? info->orientation : 1;
	aug_image *target = orientation != 1 ? &c->stage : out;
	if (fmt == AUG_FORMAT_JPEG)
		FORWARD_IF_ERR(aug_jpeg_decode(c, buf, len, info, opts, channels,
					       target, err));
	else
		FORWARD_IF_ERR(aug_png_decode(c, buf, len, info, channels, target,
					      err));
	if (orientation != 1)
		FORWARD_IF_ERR(aug_orient(&c->stage, orientation, out, err));
	return 0;
}

/* ---- orientation ----------------------------------------------------- */

/*
 * Upright pixel (x, y) is stored pixel start + x * xstep + y * ystep, for
 * the EXIF meanings: 2 mirror, 3 rotate 180, 4 flip, 5 transpose, 6 stored
 * turned 90 degrees counter-clockwise (so rotate clockwise to show), 7
 * transverse, 8 stored turned clockwise. Tiles keep the transposing cases
 * from walking a whole column of the source per output row.
 */
#define ORIENT_TILE 32

int aug_orient(const aug_image *src, int orientation, aug_image *dst,
	       ims_error *err)
{
	RETURN_IF(!src || !dst || src == dst || !src->pixels, err, IMS_EINVAL,
		  "cannot orient image: bad arguments");
	RETURN_IF(orientation < 1 || orientation > 8, err, IMS_EINVAL,
		  "cannot orient image: orientation %d is not 1..8", orientation);
	int sw = src->width, sh = src->height, ch = src->channels;
	int swap = orientation >= 5;
	FORWARD_IF_ERR(aug_image_alloc(dst, swap ? sh : sw, swap ? sw : sh, ch,
				       err));
	ptrdiff_t px = ch, row = (ptrdiff_t)src->stride;
	ptrdiff_t right = (ptrdiff_t)(sw - 1) * px, bottom = (ptrdiff_t)(sh - 1) * row;
	ptrdiff_t start, xstep, ystep;
	switch (orientation) {
	case 1: start = 0; xstep = px; ystep = row; break;
	case 2: start = right; xstep = -px; ystep = row; break;
	case 3: start = right + bottom; xstep = -px; ystep = -row; break;
	case 4: start = bottom; xstep = px; ystep = -row; break;
	case 5: start = 0; xstep = row; ystep = px; break;
	case 6: start = bottom; xstep = -row; ystep = px; break;
	case 7: start = right + bottom; xstep = -row; ystep = -px; break;
	default: start = right; xstep = row; ystep = -px; break; /* 8 */
	}
	const uint8_t *base = src->pixels + start;
	int dw = dst->width, dh = dst->height;
	for (int ty = 0; ty < dh; ty += ORIENT_TILE) {
		int ey = ty + ORIENT_TILE < dh ? ty + ORIENT_TILE : dh;
		for (int tx = 0; tx < dw; tx += ORIENT_TILE) {
			int ex = tx + ORIENT_TILE < dw ? tx + ORIENT_TILE : dw;
			for (int y = ty; y < ey; y++) {
				const uint8_t *s = base + (ptrdiff_t)y * ystep +
						   (ptrdiff_t)tx * xstep;
				uint8_t *d = dst->pixels + (size_t)y * dst->stride +
					     (size_t)tx * (size_t)ch;
				int n = ex - tx;
				switch (ch) {
				case 1:
					for (int x = 0; x < n; x++, s += xstep)
						d[x] = *s;
					break;
				case 3:
					for (int x = 0; x < n; x++, s += xstep, d += 3)
						memcpy(d, s, 3);
					break;
				case 4:
					for (int x = 0; x < n; x++, s += xstep, d += 4)
						memcpy(d, s, 4);
					break;
				default:
					for (int x = 0; x < n; x++, s += xstep, d += ch)
						memcpy(d, s, (size_t)ch);
					break;
				}
			}
		}
	}
	return 0;
}

/* ---- fit and crop ---------------------------------------------------- */

/* round(v * num / den), half away from zero, at least 1. */
static int scale_side(int v, uint64_t num, uint64_t den)
{
	uint64_t r = ((uint64_t)v * num * 2 + den) / (2 * den);
	return r < 1 ? 1 : r > INT32_MAX ? INT32_MAX : (int)r;
}

void aug_fit_size(const aug_fit *fit, int w, int h, int *sw, int *sh, int *ow,
		  int *oh)
{
	int fw = w, fh = h;
	if (fit && w > 0 && h > 0) {
		/* One scale factor num/den applied to the original size, so
		 * the side that sets it comes out exact and the other is
		 * rounded once. */
		uint64_t num = 1, den = 1;
		int shorter = w < h ? w : h, longer = w < h ? h : w;
		if (fit->shorter > 0 &&
		    (fit->shorter < shorter || fit->allow_upscale)) {
			num = (uint64_t)fit->shorter;
			den = (uint64_t)shorter;
		}
		if (fit->max_longer > 0 &&
		    (uint64_t)longer * num > (uint64_t)fit->max_longer * den) {
			num = (uint64_t)fit->max_longer;
			den = (uint64_t)longer;
		}
		if (num != den) {
			fw = scale_side(w, num, den);
			fh = scale_side(h, num, den);
		}
	}
	if (sw)
		*sw = fw;
	if (sh)
		*sh = fh;
	int side = fw < fh ? fw : fh;
	int crop = fit && fit->center_crop;
	if (ow)
		*ow = crop ? side : fw;
	if (oh)
		*oh = crop ? side : fh;
}

int aug_crop_center(const aug_image *src, int ow, int oh, aug_image *dst,
		    ims_error *err)
{
	RETURN_IF(!src || !dst || src == dst || !src->pixels, err, IMS_EINVAL,
		  "cannot crop image: bad arguments");
	RETURN_IF(ow < 1 || oh < 1 || ow > src->width || oh > src->height, err,
		  IMS_EINVAL, "cannot crop %dx%d from a %dx%d image", ow, oh,
		  src->width, src->height);
	FORWARD_IF_ERR(aug_image_alloc(dst, ow, oh, src->channels, err));
	size_t x0 = (size_t)(src->width - ow) / 2, y0 = (size_t)(src->height - oh) / 2;
	size_t ch = (size_t)src->channels;
	for (int y = 0; y < oh; y++)
		memcpy(dst->pixels + (size_t)y * dst->stride,
		       src->pixels + (y0 + (size_t)y) * src->stride + x0 * ch,
		       (size_t)ow * ch);
	return 0;
}
