/*
 * jpeg.c - JPEG structure check, decode and encode.
 *
 * Three tools, each for what it does best:
 *  - our own marker walk (aug_jpeg_parse): cheap, sees APP1 EXIF and APP14
 *    Adobe, and follows the entropy-coded data to EOI so that truncation
 *    is caught without decoding (packing in "keep" mode never decodes);
 *  - libjpeg's jpeg_read_header, as a second opinion on the tables in
 *    aug_probe. Not tjDecompressHeader3: in TurboJPEG 2.x it refuses any
 *    chroma sampling it has no TJSAMP_* name for, although tjDecompress2
 *    decodes those files fine;
 *  - TurboJPEG for pixels, with DCT scaling, and for encoding. It decodes
 *    CMYK/YCCK to raw CMYK (TJPF_CMYK); the conversion to RGB, including
 *    the Adobe inversion, is ours.
 * Warnings (libjpeg's "Premature end of JPEG file", "Corrupt JPEG data")
 * are errors here: a damaged image decodes to grey blocks, not to data.
 * Neither library prints anything: messages go to the ims_error.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <turbojpeg.h>

#include "augment/augment_internal.h"

/* Stop at the first warning, and refuse progressive files with absurd
 * scan counts (a known CPU-exhaustion trick). */
#define TJ_DECODE_FLAGS (TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS)

/* ---- libjpeg header check --------------------------------------------- */

struct aug_jpeg_state {
	struct jpeg_decompress_struct d;
	struct jpeg_error_mgr jerr;
	jmp_buf jb;
	int warned;
	char msg[JMSG_LENGTH_MAX];
};

/* Fatal errors unwind to the setjmp in aug_jpeg_read_header instead of
 * exit(); libjpeg's default would end the whole packer. */
static void lj_error_exit(j_common_ptr ci)
{
	aug_jpeg_state *st = (aug_jpeg_state *)ci->client_data;
	(*ci->err->format_message)(ci, st->msg);
	longjmp(st->jb, 1);
}

/* Level < 0 is a warning (corrupt data that libjpeg works around); keep
 * the first. Trace messages (level >= 0) are dropped. */
static void lj_emit_message(j_common_ptr ci, int level)
{
	aug_jpeg_state *st = (aug_jpeg_state *)ci->client_data;
	if (level < 0 && !st->warned) {
		st->warned = 1;
		(*ci->err->format_message)(ci, st->msg);
	}
}

static void lj_output_message(j_common_ptr ci)
{
	(void)ci; /* silent: never write to stderr */
}

int aug_jpeg_init(aug_codec *c, ims_error *err)
{
	aug_jpeg_state *st = calloc(1, sizeof(*st));
	RETURN_IF(!st, err, IMS_ENOMEM, "cannot allocate the JPEG decoder");
	st->d.err = jpeg_std_error(&st->jerr);
	st->jerr.error_exit = lj_error_exit;
	st->jerr.emit_message = lj_emit_message;
	st->jerr.output_message = lj_output_message;
	st->d.client_data = st;
	if (setjmp(st->jb)) {
		int rc = ims_fail(err, IMS_ENOMEM,
				  "cannot create the JPEG decoder: %s", st->msg);
		free(st);
		return rc;
	}
	jpeg_create_decompress(&st->d);
	c->lj = st;

	c->tj_dec = tjInitDecompress();
	c->tj_enc = tjInitCompress();
	RETURN_IF(!c->tj_dec || !c->tj_enc, err, IMS_ENOMEM,
		  "cannot create TurboJPEG handles: %s", tjGetErrorStr2(NULL));
	return 0;
}

void aug_jpeg_free(aug_codec *c)
{
	if (c->lj) {
		jpeg_destroy_decompress(&c->lj->d);
		free(c->lj);
		c->lj = NULL;
	}
	if (c->tj_dec)
		tjDestroy(c->tj_dec);
	if (c->tj_enc)
		tjDestroy(c->tj_enc);
	c->tj_dec = c->tj_enc = NULL;
}

/* libjpeg's reading of the headers up to the first scan: catches bad
 * tables and component ids that the marker walk does not look into. */
static int lj_read_header(aug_codec *c, const uint8_t *buf, size_t len,
			  const aug_image_info *info, ims_error *err)
{
	aug_jpeg_state *st = c->lj;
	st->warned = 0;
	st->msg[0] = '\0';
	if (setjmp(st->jb)) {
		jpeg_abort_decompress(&st->d);
		return ims_fail(err, aug_lib_error_code(st->msg, IMS_ECORRUPT),
				"cannot read JPEG headers: %s", st->msg);
	}
	jpeg_mem_src(&st->d, buf, (unsigned long)len);
	jpeg_read_header(&st->d, TRUE);
	int same = (int)st->d.image_width == info->width &&
		   (int)st->d.image_height == info->height;
	jpeg_abort_decompress(&st->d);
	RETURN_IF(st->warned, err, IMS_ECORRUPT, "cannot read JPEG headers: %s",
		  st->msg);
	RETURN_IF(!same, err, IMS_ECORRUPT,
		  "cannot read JPEG headers: libjpeg sees another image size");
	return 0;
}

/* ---- marker walk ----------------------------------------------------- */

enum {
	M_SOF0 = 0xC0, M_SOF1 = 0xC1, M_SOF2 = 0xC2, M_DHT = 0xC4,
	M_SOF9 = 0xC9, M_SOF10 = 0xCA, M_DAC = 0xCC,
	M_RST0 = 0xD0, M_RST7 = 0xD7, M_SOI = 0xD8, M_EOI = 0xD9,
	M_SOS = 0xDA, M_DQT = 0xDB, M_DNL = 0xDC, M_DRI = 0xDD,
	M_APP0 = 0xE0, M_APP1 = 0xE1, M_APP14 = 0xEE, M_APP15 = 0xEF,
	M_COM = 0xFE, M_TEM = 0x01
};

static const char *marker_name(int m, char *tmp, size_t n)
{
	switch (m) {
	case M_DHT: return "DHT";
	case M_DAC: return "DAC";
	case M_SOS: return "SOS";
	case M_DQT: return "DQT";
	case M_DNL: return "DNL";
	case M_DRI: return "DRI";
	case M_COM: return "COM";
	}
	if (m >= M_SOF0 && m <= 0xCF)
		snprintf(tmp, n, "SOF%d", m - M_SOF0);
	else if (m >= M_APP0 && m <= M_APP15)
		snprintf(tmp, n, "APP%d", m - M_APP0);
	else
		snprintf(tmp, n, "0xFF%02X", m);
	return tmp;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

/* SOF payload: precision, height, width, components (id, HxV, table). */
static int parse_sof(int m, const uint8_t *p, size_t n, aug_image_info *info,
		     ims_error *err)
{
	RETURN_IF(n < 6 || n != 6 + 3 * (size_t)p[5], err, IMS_ECORRUPT,
		  "cannot read JPEG: bad SOF%d segment length %zu", m - M_SOF0,
		  n + 2);
	int precision = p[0], h = be16(p + 1), w = be16(p + 3), nc = p[5];
	RETURN_IF(w == 0 || h == 0, err, IMS_ECORRUPT,
		  "cannot read JPEG: image size %dx%d in the SOF segment "
		  "(zero height needs a DNL marker, not supported)", w, h);
	FORWARD_IF_ERR(aug_check_dims(w, h, "JPEG", err));
	RETURN_IF(precision != 8, err, IMS_EUNSUPPORTED,
		  "cannot decode JPEG: %d-bit samples are not supported (only 8)",
		  precision);
	RETURN_IF(nc != 1 && nc != 3 && nc != 4, err, IMS_EUNSUPPORTED,
		  "cannot decode JPEG: %d colour components are not supported "
		  "(only 1, 3 or 4)", nc);
	for (int i = 0; i < nc; i++) {
		int hs = p[6 + 3 * i + 1] >> 4, vs = p[6 + 3 * i + 1] & 15;
		RETURN_IF(hs < 1 || hs > 4 || vs < 1 || vs > 4, err, IMS_ECORRUPT,
			  "cannot read JPEG: bad sampling factors %dx%d for "
			  "component %d", hs, vs, i);
	}
	info->width = w;
	info->height = h;
	info->channels = nc == 1 ? 1 : 3;
	info->is_cmyk = nc == 4;
	return 0;
}

/* Skips entropy-coded data from pos to the next real marker: 0xFF00 is a
 * stuffed 0xFF, RST0..7 are restart markers inside the scan, 0xFF 0xFF is
 * fill. Returns the offset of the 0xFF that starts the marker, or len when
 * the data runs out first. */
static size_t skip_entropy(const uint8_t *buf, size_t len, size_t pos)
{
	while (pos < len) {
		const uint8_t *f = memchr(buf + pos, 0xFF, len - pos);
		if (!f)
			return len;
		size_t q = (size_t)(f - buf);
		if (q + 1 >= len)
			return len;
		uint8_t b = buf[q + 1];
		if (b == 0x00 || (b >= M_RST0 && b <= M_RST7))
			pos = q + 2;
		else if (b == 0xFF)
			pos = q + 1;
		else
			return q;
	}
	return len;
}

int aug_jpeg_parse(aug_codec *c, const uint8_t *buf, size_t len, int full,
		   aug_image_info *info, ims_error *err)
{
	char tmp[16];
	int have_sof = 0, scans = 0, orientation = 0, adobe = 0;
	size_t pos = 2; /* after SOI, which aug_sniff saw */

	for (;;) {
		RETURN_IF(pos >= len, err, IMS_ECORRUPT,
			  "cannot read JPEG: file ends before the end-of-image "
			  "marker (truncated at %zu bytes)", len);
		RETURN_IF(buf[pos] != 0xFF, err, IMS_ECORRUPT,
			  "cannot read JPEG: expected a marker at offset %zu, "
			  "found byte 0x%02x", pos, buf[pos]);
		while (pos < len && buf[pos] == 0xFF)
			pos++;
		RETURN_IF(pos >= len, err, IMS_ECORRUPT,
			  "cannot read JPEG: file ends before the end-of-image "
			  "marker (truncated at %zu bytes)", len);
		int m = buf[pos++];
		if (m == M_EOI) {
			RETURN_IF(!have_sof || !scans, err, IMS_ECORRUPT,
				  "cannot read JPEG: end-of-image marker before "
				  "any image data");
			break;
		}
		if ((m >= M_RST0 && m <= M_RST7) || m == M_TEM)
			continue; /* stand-alone, no length; libjpeg skips them */
		RETURN_IF(m == M_SOI, err, IMS_ECORRUPT,
			  "cannot read JPEG: second start-of-image marker at "
			  "offset %zu", pos - 2);
		RETURN_IF(m == 0x00 || m < M_SOF0 || (m >= 0xF0 && m <= 0xFD),
			  err, IMS_ECORRUPT,
			  "cannot read JPEG: unknown marker 0xFF%02X at offset %zu",
			  m, pos - 2);
		RETURN_IF(len - pos < 2, err, IMS_ECORRUPT,
			  "cannot read JPEG: file ends inside the %s marker "
			  "(truncated at %zu bytes)", marker_name(m, tmp, sizeof(tmp)),
			  len);
		size_t seglen = be16(buf + pos);
		RETURN_IF(seglen < 2, err, IMS_ECORRUPT,
			  "cannot read JPEG: bad %s segment length %zu",
			  marker_name(m, tmp, sizeof(tmp)), seglen);
		RETURN_IF(seglen > len - pos, err, IMS_ECORRUPT,
			  "cannot read JPEG: file ends inside the %s segment "
			  "(truncated at %zu bytes)", marker_name(m, tmp, sizeof(tmp)),
			  len);
		const uint8_t *p = buf + pos + 2;
		size_t n = seglen - 2;
		pos += seglen;

		switch (m) {
		case M_SOF0: case M_SOF1: case M_SOF2: case M_SOF9: case M_SOF10:
			RETURN_IF(have_sof, err, IMS_ECORRUPT,
				  "cannot read JPEG: second frame header (%s)",
				  marker_name(m, tmp, sizeof(tmp)));
			FORWARD_IF_ERR(parse_sof(m, p, n, info, err));
			have_sof = 1;
			break;
		case 0xC3: case 0xC5: case 0xC6: case 0xC7: case 0xC8:
		case 0xCB: case 0xCD: case 0xCE: case 0xCF:
			return ims_fail(err, IMS_EUNSUPPORTED,
					"cannot decode JPEG: lossless or hierarchical "
					"JPEG (%s) is not supported",
					marker_name(m, tmp, sizeof(tmp)));
		case M_APP1:
			if (!orientation)
				orientation = aug_exif_orientation_app1(p, n);
			break;
		case M_APP14:
			/* libjpeg's rule: "Adobe" and at least 12 bytes. */
			if (n >= 12 && memcmp(p, "Adobe", 5) == 0)
				adobe = 1;
			break;
		case M_SOS:
			RETURN_IF(!have_sof, err, IMS_ECORRUPT,
				  "cannot read JPEG: scan before the frame header");
			RETURN_IF(n < 1 || p[0] < 1 || p[0] > 4 ||
					  n != 4 + 2 * (size_t)p[0],
				  err, IMS_ECORRUPT,
				  "cannot read JPEG: bad SOS segment");
			scans++;
			if (!full)
				goto done;
			pos = skip_entropy(buf, len, pos);
			break;
		default:
			break; /* tables, DRI, DNL, other APPn, COM */
		}
	}
done:
	/* Anything after EOI (some cameras append data) is ignored, as
	 * libjpeg does. */
	info->format = AUG_FORMAT_JPEG;
	info->orientation = orientation ? orientation : 1;
	info->adobe_inverted = info->is_cmyk && adobe;
	info->bit_depth = 8;
	info->has_alpha = 0;
	aug_info_set_upright(info);
	if (full)
		FORWARD_IF_ERR(lj_read_header(c, buf, len, info, err));
	return 0;
}

/* ---- decode ---------------------------------------------------------- */

void aug_jpeg_scaled_size(const aug_image_info *info,
			  const aug_decode_opts *opts, int *w, int *h)
{
	*w = info->width;
	*h = info->height;
	if (!opts || (opts->min_width <= 0 && opts->min_height <= 0))
		return;
	int swap = opts->apply_orientation && info->orientation >= 5;
	/* Only 1/2, 1/4 and 1/8: libjpeg-turbo 2.1 has fast IDCTs for those,
	 * while 7/8, 3/4 and 5/8 cost 1.3-1.7 times a full-size decode
	 * (cachegrind, 500x375 q90) and 3/8 about as much as full size. A
	 * full decode plus our resampler beats them. */
	static const tjscalingfactor sf[] = {{1, 2}, {1, 4}, {1, 8}};
	const int n = (int)(sizeof(sf) / sizeof(sf[0]));
	for (int i = 0; i < n; i++) {
		int cw = TJSCALED(info->width, sf[i]);
		int ch = TJSCALED(info->height, sf[i]);
		int uw = swap ? ch : cw, uh = swap ? cw : ch;
		if (uw >= opts->min_width && uh >= opts->min_height &&
		    (long long)cw * ch < (long long)*w * *h) {
			*w = cw;
			*h = ch;
		}
	}
}

static inline uint8_t mul255(unsigned a, unsigned b)
{
	unsigned t = a * b + 128;
	return (uint8_t)((t + (t >> 8)) >> 8); /* round(a * b / 255) */
}

/* Photoshop (Adobe APP14) stores 255 - ink, so R = (255 - C)(255 - K)/255
 * becomes R = C'K'/255 on the stored values; without the marker the values
 * are ink amounts. */
void aug_cmyk_row_to_rgb(const uint8_t *s, int n, int inverted, uint8_t *d)
{
	if (inverted) {
		for (int x = 0; x < n; x++, s += 4, d += 3) {
			d[0] = mul255(s[0], s[3]);
			d[1] = mul255(s[1], s[3]);
			d[2] = mul255(s[2], s[3]);
		}
	} else {
		for (int x = 0; x < n; x++, s += 4, d += 3) {
			unsigned k = 255u - s[3];
			d[0] = mul255(255u - s[0], k);
			d[1] = mul255(255u - s[1], k);
			d[2] = mul255(255u - s[2], k);
		}
	}
}

static void cmyk_to_rgb(const aug_image *src, int inverted, aug_image *dst)
{
	for (int y = 0; y < src->height; y++)
		aug_cmyk_row_to_rgb(src->pixels + (size_t)y * src->stride, src->width,
				    inverted, dst->pixels + (size_t)y * dst->stride);
}

static int tj_fail(tjhandle h, const char *what, ims_error *err)
{
	const char *msg = tjGetErrorStr2(h);
	return ims_fail(err, aug_lib_error_code(msg, IMS_ECORRUPT), "cannot %s JPEG: %s", what,
			msg && *msg ? msg : "unknown TurboJPEG error");
}

int aug_jpeg_decode(aug_codec *c, const uint8_t *buf, size_t len,
		    const aug_image_info *info, const aug_decode_opts *opts,
		    int channels, aug_image *dst, ims_error *err)
{
	int w, h;
	aug_jpeg_scaled_size(info, opts, &w, &h);
	if (info->is_cmyk) {
		FORWARD_IF_ERR(aug_image_alloc(&c->raw, w, h, 4, err));
		if (tjDecompress2(c->tj_dec, buf, (unsigned long)len,
				  c->raw.pixels, w, (int)c->raw.stride, h,
				  TJPF_CMYK, TJ_DECODE_FLAGS) != 0)
			return tj_fail(c->tj_dec, "decode", err);
		FORWARD_IF_ERR(aug_image_alloc(dst, w, h, 3, err));
		cmyk_to_rgb(&c->raw, info->adobe_inverted, dst);
		return 0;
	}
	FORWARD_IF_ERR(aug_image_alloc(dst, w, h, channels, err));
	if (tjDecompress2(c->tj_dec, buf, (unsigned long)len, dst->pixels, w,
			  (int)dst->stride, h, channels == 1 ? TJPF_GRAY : TJPF_RGB,
			  TJ_DECODE_FLAGS) != 0)
		return tj_fail(c->tj_dec, "decode", err);
	return 0;
}

/* ---- encode ---------------------------------------------------------- */

int aug_encode_jpeg(aug_codec *c, const aug_image *img, int quality,
		    ims_buf *out, ims_error *err)
{
	RETURN_IF(!c || !img || !out || !img->pixels, err, IMS_EINVAL,
		  "cannot encode JPEG: missing codec, image or buffer");
	RETURN_IF(img->channels != 1 && img->channels != 3, err, IMS_EINVAL,
		  "cannot encode JPEG: %d channels (JPEG takes 1 or 3)",
		  img->channels);
	RETURN_IF(quality < 1 || quality > 100, err, IMS_EINVAL,
		  "cannot encode JPEG: quality %d is outside 1..100", quality);
	RETURN_IF(img->width < 1 || img->height < 1 || img->width > 65500 ||
			  img->height > 65500,
		  err, IMS_ELIMIT, "cannot encode JPEG: size %dx%d",
		  img->width, img->height);
	int samp = img->channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
	unsigned long bound = tjBufSize(img->width, img->height, samp);
	RETURN_IF(bound == (unsigned long)-1, err, IMS_ELIMIT,
		  "cannot encode JPEG: size %dx%d", img->width, img->height);
	/* Worst-case size up front so TurboJPEG writes straight into out
	 * and never reallocates it with its own allocator. */
	FORWARD_IF_ERR(ims_buf_reserve(out, bound, err));
	unsigned char *p = out->data;
	unsigned long size = (unsigned long)out->cap;
	if (tjCompress2(c->tj_enc, img->pixels, img->width, (int)img->stride,
			img->height, img->channels == 1 ? TJPF_GRAY : TJPF_RGB, &p,
			&size, samp, quality, TJFLAG_NOREALLOC) != 0)
		return tj_fail(c->tj_enc, "encode", err);
	out->len = size;
	return 0;
}
