/*
 * region.c - decode only the part of an image that a training crop reads.
 *
 * The loader picks its crop before decoding; this file then decodes at the
 * smallest fast DCT scale that keeps the crop's resolution, and for upright
 * JPEGs only the iMCU columns (jpeg_crop_scanline) and rows
 * (jpeg_skip_scanlines, stopping after the last needed row) that hold the
 * crop. Pixels equal those of aug_decode at the same scale, byte for byte:
 * the libjpeg parameters are TurboJPEG's (tjDecompress2 with
 * TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS: islow IDCT, fancy upsampling,
 * block smoothing, the same output colour spaces) and the CMYK conversion
 * is jpeg.c's, repeated here.
 *
 * Why a margin: a cropped decode treats the crop's first and last columns
 * as image edges in the fancy (triangle) chroma upsampler, so those two
 * columns differ from a full decode. We ask libjpeg for RG_MARGIN more
 * decoded columns on each side than the crop needs (iMCU alignment usually
 * adds more on the left) and never hand those edge columns out.
 *
 * EXIF-rotated JPEGs and PNGs take the plain path: aug_decode of the whole
 * (possibly DCT-scaled) upright image, then the needed rectangle is moved
 * to the top of the same buffer. Correct, not optimal.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "augment/augment_internal.h"

/* TurboJPEG's TJFLAG_LIMITSCANS limit: progressive files with more scans
 * are a known CPU-exhaustion trick. */
#define RG_MAX_SCANS 500
/* Extra decoded columns on each side of a cropped decode (see above). */
#define RG_MARGIN 1
/* Narrowest cropped decode: libjpeg switches to plain (box) upsampling for
 * a component fewer than 3 samples wide, which would change the pixels. */
#define RG_MIN_COLS 32

/* Everything the setjmp frame touches lives here, on the heap, so nothing
 * it changes is a local of the function that calls setjmp. */
typedef struct rg_jpeg {
	struct jpeg_decompress_struct d;
	struct jpeg_error_mgr jerr;
	struct jpeg_progress_mgr prog;
	jmp_buf jb;
	int created;
	char msg[JMSG_LENGTH_MAX];
} rg_jpeg;

static void rg_error_exit(j_common_ptr ci)
{
	rg_jpeg *j = (rg_jpeg *)ci->client_data;
	(*ci->err->format_message)(ci, j->msg);
	longjmp(j->jb, 1);
}

/* A warning (level < 0: corrupt data that libjpeg would work around) ends
 * the decode, as TJFLAG_STOPONWARNING does for aug_decode. Trace messages
 * are dropped. */
static void rg_emit_message(j_common_ptr ci, int level)
{
	if (level < 0)
		rg_error_exit(ci);
}

static void rg_output_message(j_common_ptr ci)
{
	(void)ci; /* silent: never write to stderr */
}

static void rg_progress(j_common_ptr ci)
{
	rg_jpeg *j = (rg_jpeg *)ci->client_data;
	if (((j_decompress_ptr)ci)->input_scan_number > RG_MAX_SCANS) {
		snprintf(j->msg, sizeof(j->msg),
			 "progressive JPEG image has more than %d scans",
			 RG_MAX_SCANS);
		longjmp(j->jb, 1);
	}
}

/* Largest of 8, 4, 2, 1 that is <= max_scale (NaN and < 2 give 1). */
static int pick_scale(double max_scale)
{
	if (max_scale >= 8)
		return 8;
	if (max_scale >= 4)
		return 4;
	if (max_scale >= 2)
		return 2;
	return 1;
}

static int ceil_div(int a, int b)
{
	return (a + b - 1) / b;
}

/* need clamped to the w x h upright image; IMS_EINVAL when nothing is
 * left. */
static int clamp_need(const aug_rect *need, int w, int h, aug_rect *r,
		      ims_error *err)
{
	if (!need) {
		*r = (aug_rect){0, 0, w, h};
		return 0;
	}
	r->x0 = need->x0 > 0 ? need->x0 : 0;
	r->y0 = need->y0 > 0 ? need->y0 : 0;
	r->x1 = need->x1 < w ? need->x1 : w;
	r->y1 = need->y1 < h ? need->y1 : h;
	RETURN_IF(r->x0 >= r->x1 || r->y0 >= r->y1, err, IMS_EINVAL,
		  "cannot decode region: rectangle [%d,%d)x[%d,%d) does not "
		  "overlap the %dx%d image", need->x0, need->x1, need->y0,
		  need->y1, w, h);
	return 0;
}

/* ---- upright JPEG: cropped, skipped, scaled libjpeg decode ----------- */

typedef struct rg_job {
	const uint8_t *buf;
	size_t len;
	const aug_image_info *info;
	int channels; /* of out: 1 or 3 */
	int scale;
	aug_rect r;   /* clamped need, full-size coordinates */
	int c0, r0;   /* first decoded (scaled) column and row handed out */
} rg_job;

/* Runs inside the setjmp frame of rg_jpeg_region; returns 0 or a project
 * code for errors found outside libjpeg (allocation). */
static int rg_decode(aug_codec *c, rg_jpeg *j, rg_job *job, aug_image *out,
		     ims_error *err)
{
	struct jpeg_decompress_struct *d = &j->d;
	const aug_image_info *info = job->info;
	int s = job->scale;

	jpeg_mem_src(d, job->buf, (unsigned long)job->len);
	jpeg_read_header(d, TRUE);
	d->out_color_space = info->is_cmyk ? JCS_CMYK
			     : job->channels == 1 ? JCS_GRAYSCALE
						  : JCS_EXT_RGB;
	d->scale_num = 1;
	d->scale_denom = (unsigned)s;
	jpeg_start_decompress(d);

	int ow = (int)d->output_width, oh = (int)d->output_height;
	RETURN_IF(ow != ceil_div(info->width, s) ||
			  oh != ceil_div(info->height, s),
		  err, IMS_ECORRUPT,
		  "cannot decode JPEG: libjpeg scales %dx%d to %dx%d at 1/%d",
		  info->width, info->height, ow, oh, s);
	/* Scaled columns [c0, c1) and rows [r0, r1) cover the request; a
	 * scaled pixel i covers full-size pixels [s*i, s*i + s). */
	int c0 = job->r.x0 / s, c1 = ceil_div(job->r.x1, s);
	int r0 = job->r.y0 / s, r1 = ceil_div(job->r.y1, s);
	c1 = c1 < ow ? c1 : ow;
	r1 = r1 < oh ? r1 : oh;
	JDIMENSION xoff = (JDIMENSION)(c0 > RG_MARGIN ? c0 - RG_MARGIN : 0);
	int xend = c1 + RG_MARGIN < ow ? c1 + RG_MARGIN : ow;
	if (xend - (int)xoff < RG_MIN_COLS) {
		xend = (int)xoff + RG_MIN_COLS < ow ? (int)xoff + RG_MIN_COLS : ow;
		xoff = (JDIMENSION)(xend > RG_MIN_COLS ? xend - RG_MIN_COLS : 0);
	}
	JDIMENSION cw = (JDIMENSION)xend - xoff;
	if ((int)cw < ow)
		jpeg_crop_scanline(d, &xoff, &cw); /* moves xoff left to an
						      iMCU boundary */
	RETURN_IF((int)xoff > c0 || (int)(xoff + cw) < c1, err, IMS_ECORRUPT,
		  "cannot decode JPEG: libjpeg cropped columns [%u,%u), "
		  "[%d,%d) needed", (unsigned)xoff, (unsigned)(xoff + cw), c0,
		  c1);
	if (r0 > 0) {
		JDIMENSION n = jpeg_skip_scanlines(d, (JDIMENSION)r0);
		RETURN_IF((int)n != r0, err, IMS_ECORRUPT,
			  "cannot decode JPEG: skipped %u rows of %d",
			  (unsigned)n, r0);
	}

	int ncomp = info->is_cmyk ? 4 : job->channels;
	FORWARD_IF_ERR(aug_image_alloc(&c->raw, (int)cw, 1, ncomp, err));
	FORWARD_IF_ERR(aug_image_alloc(out, c1 - c0, r1 - r0, job->channels,
				       err));
	const uint8_t *src = c->raw.pixels + (size_t)(c0 - (int)xoff) * ncomp;
	for (int y = r0; y < r1; y++) {
		JSAMPROW row = c->raw.pixels;
		RETURN_IF(jpeg_read_scanlines(d, &row, 1) != 1, err,
			  IMS_ECORRUPT, "cannot decode JPEG: row %d is missing",
			  y);
		uint8_t *dst = out->pixels + (size_t)(y - r0) * out->stride;
		if (info->is_cmyk)
			aug_cmyk_row_to_rgb(src, c1 - c0, info->adobe_inverted, dst);
		else
			memcpy(dst, src, (size_t)(c1 - c0) * job->channels);
	}
	/* All rows read: let libjpeg read to EOI, which reports damage after
	 * the last row as aug_decode would. Otherwise stop here. */
	if (d->output_scanline == d->output_height)
		jpeg_finish_decompress(d);
	else
		jpeg_abort_decompress(d);
	job->c0 = c0;
	job->r0 = r0;
	return 0;
}

static int rg_jpeg_region(aug_codec *c, rg_jpeg *j, rg_job *job,
			  aug_image *out, ims_error *err)
{
	j->d.err = jpeg_std_error(&j->jerr);
	j->jerr.error_exit = rg_error_exit;
	j->jerr.emit_message = rg_emit_message;
	j->jerr.output_message = rg_output_message;
	j->prog.progress_monitor = rg_progress;
	j->d.client_data = j; /* kept by jpeg_create_decompress */
	if (setjmp(j->jb)) {
		if (!j->created)
			return ims_fail(err, IMS_ENOMEM,
					"cannot create the JPEG decoder: %s",
					j->msg);
		jpeg_abort_decompress(&j->d);
		return ims_fail(err, aug_lib_error_code(j->msg, IMS_ECORRUPT),
				"cannot decode JPEG: %s", j->msg);
	}
	jpeg_create_decompress(&j->d);
	j->created = 1;
	j->d.progress = &j->prog;
	int rc = rg_decode(c, j, job, out, err);
	if (rc)
		jpeg_abort_decompress(&j->d);
	return rc;
}

/* ---- everything else: whole decode, then crop in place ------------- */

/* Upright full-size coordinates of the top-left corner of aug_decode's
 * upright output when it decoded the stored w x h image at 1/s into
 * sw x sh (stored) pixels. Stored pixel (i, j) covers [s*i, s*i + s) x
 * [s*j, s*j + s); when an axis is mirrored, the scaled image's overhang
 * past the far edge (s*sw - w) lands before upright 0. */
static void oriented_origin(int orientation, int w, int h, int sw, int sh,
			    int s, int *ox, int *oy)
{
	int fx = w - s * sw, fy = h - s * sh; /* <= 0 */
	*ox = *oy = 0;
	switch (orientation) {
	case 2: *ox = fx; break;
	case 3: *ox = fx; *oy = fy; break;
	case 4: *oy = fy; break;
	case 6: *ox = fy; break;
	case 7: *ox = fy; *oy = fx; break;
	case 8: *oy = fx; break;
	default: break; /* 1, 5 */
	}
}

static int rg_fallback(aug_codec *c, const uint8_t *buf, size_t len,
		       aug_channels ch, const aug_rect *need, int s,
		       aug_image *out, aug_region *got, aug_image_info *info,
		       ims_error *err)
{
	aug_decode_opts o = {ch, 0, 0, 1};
	if (info->format == AUG_FORMAT_JPEG && s > 1) {
		/* aug_decode picks the smallest of 1/2, 1/4, 1/8 whose upright
		 * size is at least this: 1/s, or a smaller one only where both
		 * give the same size. */
		o.min_width = ceil_div(info->upright_width, s);
		o.min_height = ceil_div(info->upright_height, s);
	}
	FORWARD_IF_ERR(aug_decode(c, buf, len, &o, out, info, err));
	int d = 1, sw = info->width, sh = info->height;
	if (info->format == AUG_FORMAT_JPEG) {
		aug_jpeg_scaled_size(info, &o, &sw, &sh);
		/* The factor used: the first (smallest) that gives this size,
		 * as aug_jpeg_scaled_size only moves on for a smaller area. */
		while (d < 8 && (ceil_div(info->width, d) != sw ||
				 ceil_div(info->height, d) != sh))
			d *= 2;
	}
	aug_rect r;
	FORWARD_IF_ERR(clamp_need(need, info->upright_width,
				  info->upright_height, &r, err));
	int ox, oy;
	oriented_origin(info->orientation, info->width, info->height, sw, sh, d,
			&ox, &oy);
	/* Decoded upright columns [u0, u1) and rows [v0, v1); ox, oy <= 0 so
	 * the numerators are >= 0. */
	int u0 = (r.x0 - ox) / d, u1 = ceil_div(r.x1 - ox, d);
	int v0 = (r.y0 - oy) / d, v1 = ceil_div(r.y1 - oy, d);
	u1 = u1 < out->width ? u1 : out->width;
	v1 = v1 < out->height ? v1 : out->height;
	/* Move the rectangle to the top of the buffer: each destination row
	 * starts at or before its source row, so a forward pass is safe. */
	size_t rowlen = (size_t)(u1 - u0) * out->channels;
	for (int y = v0; y < v1; y++)
		memmove(out->pixels + (size_t)(y - v0) * rowlen,
			out->pixels + (size_t)y * out->stride +
				(size_t)u0 * out->channels,
			rowlen);
	out->width = u1 - u0;
	out->height = v1 - v0;
	out->stride = rowlen;
	got->x0 = ox + (double)d * u0;
	got->y0 = oy + (double)d * v0;
	got->scale = d;
	return 0;
}

/* ---- entry point --------------------------------------------------- */

int aug_decode_region(aug_codec *c, const uint8_t *buf, size_t len,
		      aug_channels ch, const aug_rect *need, double max_scale,
		      aug_image *out, aug_region *got, aug_image_info *info,
		      ims_error *err)
{
	aug_image_info tmp;
	if (!info)
		info = &tmp;
	memset(info, 0, sizeof(*info));
	info->orientation = 1;
	RETURN_IF(!c || !out || !got, err, IMS_EINVAL,
		  "cannot decode region: missing codec, output image or region");
	RETURN_IF(ch != AUG_CHANNELS_RGB && ch != AUG_CHANNELS_NATIVE, err,
		  IMS_EINVAL, "cannot decode region: bad channel layout %d",
		  (int)ch);
	RETURN_IF(need && (need->x0 >= need->x1 || need->y0 >= need->y1), err,
		  IMS_EINVAL,
		  "cannot decode region: empty rectangle [%d,%d)x[%d,%d)",
		  need->x0, need->x1, need->y0, need->y1);
	int s = pick_scale(max_scale);

	if (!buf || aug_sniff(buf, len) != AUG_FORMAT_JPEG)
		return rg_fallback(c, buf, len, ch, need, s, out, got, info, err);
	/* The marker walk to EOI: a file cut short fails here even when the
	 * rows we decode lie before the cut. */
	FORWARD_IF_ERR(aug_jpeg_parse(c, buf, len, 1, info, err));
	if (info->orientation != 1)
		return rg_fallback(c, buf, len, ch, need, s, out, got, info, err);

	rg_job job = {buf, len, info, 0, s, {0, 0, 0, 0}, 0, 0};
	job.channels = info->is_cmyk || ch == AUG_CHANNELS_RGB ? 3
							       : info->channels;
	FORWARD_IF_ERR(clamp_need(need, info->width, info->height, &job.r, err));
	rg_jpeg *j = calloc(1, sizeof(*j));
	RETURN_IF(!j, err, IMS_ENOMEM, "cannot allocate the JPEG decoder");
	int rc = rg_jpeg_region(c, j, &job, out, err);
	if (j->created)
		jpeg_destroy_decompress(&j->d);
	free(j);
	if (rc == 0) {
		got->x0 = (double)s * job.c0;
		got->y0 = (double)s * job.r0;
		got->scale = s;
	}
	return rc;
}
