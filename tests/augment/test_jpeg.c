/* test_jpeg.c - JPEG probe, decode (colour spaces, EXIF orientation, DCT
 * scaling, damage) and encode, against the pattern the fixtures hold. */
#include "augment/augment_internal.h"
#include "aug_test_util.h"
#include "test.h"

static const char *dir;
static aug_codec *codec;
static ims_error err;

static const aug_decode_opts rgb_opts = {AUG_CHANNELS_RGB, 0, 0, 1};
static const aug_decode_opts native_opts = {AUG_CHANNELS_NATIVE, 0, 0, 1};

/* JPEG at q95 with 4:2:0 chroma on a picture with hard-edged shapes: the
 * mean error stays near 1-2 levels; 4 leaves room without letting a wrong
 * orientation (errors of 50+) or colour conversion (20+) through. */
#define JPEG_MAE 4.0

static void test_colour_spaces(void)
{
	static const char *files[] = {"rgb.jpg", "progressive.jpg",
				      "odd_sampling.jpg", "cmyk.jpg",
				      "cmyk_adobe.jpg", "ycck.jpg"};
	aug_image ref = {0}, img = {0};
	aug_image_info info;
	CHECK_OK(decode_file(codec, dir, "rgb.jpg", &rgb_opts, &ref, &info, &err),
		 &err);
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++) {
		CHECK_OK(decode_file(codec, dir, files[i], &rgb_opts, &img, &info,
				     &err), &err);
		CHECK_EQ_INT(img.width, FX_W);
		CHECK_EQ_INT(img.height, FX_H);
		CHECK_EQ_INT(img.channels, 3);
		CHECK_EQ_INT(info.format, AUG_FORMAT_JPEG);
		double mae = pattern_mae(&img);
		if (mae > JPEG_MAE)
			fprintf(stderr, "%s: mean error %.2f\n", files[i], mae);
		CHECK(mae < JPEG_MAE);
		/* CMYK, Adobe CMYK and YCCK all come out as rgb.jpg does. */
		CHECK(image_mae(&img, &ref) < JPEG_MAE);
		/* NATIVE gives 3 channels for colour, CMYK included. */
		CHECK_OK(decode_file(codec, dir, files[i], &native_opts, &img, NULL,
				     &err), &err);
		CHECK_EQ_INT(img.channels, 3);
	}
	/* The flags say what the file is. */
	CHECK_OK(decode_file(codec, dir, "cmyk.jpg", &rgb_opts, &img, &info, &err),
		 &err);
	CHECK(info.is_cmyk && !info.adobe_inverted);
	CHECK_OK(decode_file(codec, dir, "cmyk_adobe.jpg", &rgb_opts, &img, &info,
			     &err), &err);
	CHECK(info.is_cmyk && info.adobe_inverted);
	CHECK_OK(decode_file(codec, dir, "ycck.jpg", &rgb_opts, &img, &info, &err),
		 &err);
	CHECK(info.is_cmyk && info.adobe_inverted);
	CHECK_EQ_INT(info.channels, 3);
	CHECK_OK(decode_file(codec, dir, "rgb.jpg", &rgb_opts, &img, &info, &err),
		 &err);
	CHECK(!info.is_cmyk && !info.adobe_inverted && !info.has_alpha);
	CHECK_EQ_INT(info.bit_depth, 8);

	/* Inverting the Adobe rule would turn the picture into its negative:
	 * make sure the two CMYK files are not merely equal to each other by
	 * both being wrong. */
	CHECK(pattern_mae(&ref) < JPEG_MAE);

	/* Greyscale: 1 channel native (the luma), 3 equal channels as RGB. */
	CHECK_OK(decode_file(codec, dir, "gray.jpg", &native_opts, &img, &info,
			     &err), &err);
	CHECK_EQ_INT(img.channels, 1);
	CHECK_EQ_INT(info.channels, 1);
	CHECK(pattern_mae(&img) < JPEG_MAE);
	aug_image grey3 = {0};
	CHECK_OK(decode_file(codec, dir, "gray.jpg", &rgb_opts, &grey3, NULL, &err),
		 &err);
	CHECK_EQ_INT(grey3.channels, 3);
	int same = 1;
	for (int y = 0; y < FX_H; y++)
		for (int x = 0; x < FX_W; x++) {
			uint8_t *p = px(&grey3, x, y);
			same &= p[0] == p[1] && p[1] == p[2] && p[0] == *px(&img, x, y);
		}
	CHECK(same);
	aug_image_release(&grey3);
	aug_image_release(&img);
	aug_image_release(&ref);
}

/* Reference orientation, written from the EXIF definitions in pattern.h
 * rather than from aug_orient. */
static void orient_ref(const aug_image *src, int o, aug_image *dst)
{
	int dw = o >= 5 ? src->height : src->width;
	int dh = o >= 5 ? src->width : src->height;
	aug_image_alloc(dst, dw, dh, src->channels, NULL);
	for (int sy = 0; sy < src->height; sy++)
		for (int sx = 0; sx < src->width; sx++) {
			int ux, uy;
			fx_upright_of(o, sx, sy, src->width, src->height, &ux, &uy);
			memcpy(px(dst, ux, uy), px(src, sx, sy), (size_t)src->channels);
		}
}

static void test_orientation(void)
{
	aug_image up = {0}, raw = {0}, ref = {0};
	aug_image_info info;
	aug_decode_opts keep = rgb_opts;
	keep.apply_orientation = 0;
	for (int o = 1; o <= 8; o++) {
		char name[32];
		snprintf(name, sizeof(name), "exif_%d.jpg", o);
		CHECK_OK(decode_file(codec, dir, name, &rgb_opts, &up, &info, &err),
			 &err);
		CHECK_EQ_INT(info.orientation, o);
		CHECK_EQ_INT(info.width, o >= 5 ? FX_H : FX_W);
		CHECK_EQ_INT(info.upright_width, FX_W);
		CHECK_EQ_INT(info.upright_height, FX_H);
		CHECK_EQ_INT(up.width, FX_W);
		CHECK_EQ_INT(up.height, FX_H);
		double mae = pattern_mae(&up);
		if (mae > JPEG_MAE)
			fprintf(stderr, "%s: upright mean error %.2f\n", name, mae);
		CHECK(mae < JPEG_MAE);
		/* Without orientation: the stored pixels, and turning them
		 * by the definition gives exactly the upright decode. */
		CHECK_OK(decode_file(codec, dir, name, &keep, &raw, &info, &err), &err);
		CHECK_EQ_INT(raw.width, info.width);
		orient_ref(&raw, o, &ref);
		CHECK(image_equal(&ref, &up));
	}
	/* An XMP APP1 before the EXIF one does not hide it. */
	CHECK_OK(decode_file(codec, dir, "exif_after_xmp.jpg", &rgb_opts, &up,
			     &info, &err), &err);
	CHECK_EQ_INT(info.orientation, 6);
	CHECK(pattern_mae(&up) < JPEG_MAE);
	aug_image_release(&up);
	aug_image_release(&raw);
	aug_image_release(&ref);
}

static void check_scaled(const char *name, int minw, int minh, int apply,
			 int want_w, int want_h)
{
	aug_decode_opts o = {AUG_CHANNELS_RGB, minw, minh, apply};
	aug_image img = {0};
	CHECK_OK(decode_file(codec, dir, name, &o, &img, NULL, &err), &err);
	if (img.width != want_w || img.height != want_h)
		fprintf(stderr, "%s min %dx%d: got %dx%d, want %dx%d\n", name, minw,
			minh, img.width, img.height, want_w, want_h);
	CHECK_EQ_INT(img.width, want_w);
	CHECK_EQ_INT(img.height, want_h);
	/* A scaled upright decode is still the picture. */
	if (apply)
		CHECK(pattern_mae(&img) < JPEG_MAE + 2);
	aug_image_release(&img);
}

static void test_dct_scaling(void)
{
	/* big.jpg is 1200x900; only the fast factors 1/2, 1/4 and 1/8 are
	 * used: 600x450, 300x225, 150x113. */
	check_scaled("big.jpg", 0, 0, 1, 1200, 900);
	check_scaled("big.jpg", 256, 256, 1, 600, 450);  /* 1/4 is 225 high */
	check_scaled("big.jpg", 300, 225, 1, 300, 225);  /* 1/4 covers exactly */
	check_scaled("big.jpg", 301, 225, 1, 600, 450);  /* one more: 1/2 */
	check_scaled("big.jpg", 100, 100, 1, 150, 113);  /* 1/8 */
	check_scaled("big.jpg", 600, 0, 1, 600, 450);    /* width bound only */
	check_scaled("big.jpg", 0, 451, 1, 1200, 900);   /* 1/2 is 450 high; no 7/8 */
	check_scaled("big.jpg", 1200, 900, 1, 1200, 900);
	check_scaled("big.jpg", 5000, 5000, 1, 1200, 900); /* never enlarged */
	/* The bound is on the upright size: exif_6 is stored 64x96 and
	 * upright 96x64. min 48x32 upright is 1/2 (48x32); on the stored
	 * size 1/2 would be 32x48, too narrow for 48, so full size. */
	check_scaled("exif_6.jpg", 48, 32, 1, 48, 32);
	check_scaled("exif_6.jpg", 48, 33, 1, 96, 64);   /* 1/2 is 32 high */
	check_scaled("exif_6.jpg", 48, 32, 0, 64, 96);   /* stored: full */

	/* Grey and CMYK scale too. */
	aug_decode_opts o = {AUG_CHANNELS_NATIVE, 24, 16, 1};
	aug_image img = {0};
	CHECK_OK(decode_file(codec, dir, "gray.jpg", &o, &img, NULL, &err), &err);
	CHECK_EQ_INT(img.width, 24);
	CHECK_EQ_INT(img.channels, 1);
	aug_image ref = {0};
	CHECK_OK(decode_file(codec, dir, "rgb.jpg", &o, &ref, NULL, &err), &err);
	CHECK_OK(decode_file(codec, dir, "cmyk_adobe.jpg", &o, &img, NULL, &err),
		 &err);
	CHECK_EQ_INT(img.width, 24);
	CHECK_EQ_INT(img.height, 16);
	CHECK(image_mae(&img, &ref) < JPEG_MAE);
	aug_image_release(&img);
	aug_image_release(&ref);
}

static void check_bad(const char *name, int code)
{
	size_t len;
	uint8_t *buf = load(dir, name, &len);
	aug_image img = {0};
	aug_image_info info;
	ims_error e;
	ims_error_clear(&e);
	int rc = aug_probe(codec, buf, len, &info, &e);
	if (rc != code)
		fprintf(stderr, "%s: probe %d (%s), want %d\n", name, rc, e.msg, code);
	CHECK_EQ_INT(rc, code);
	CHECK(e.msg[0] != '\0');
	ims_error_clear(&e);
	rc = aug_decode(codec, buf, len, &rgb_opts, &img, &info, &e);
	if (rc != code)
		fprintf(stderr, "%s: decode %d (%s), want %d\n", name, rc, e.msg, code);
	CHECK_EQ_INT(rc, code);
	CHECK(e.msg[0] != '\0');
	aug_image_release(&img);
	free(buf);
}

static void test_damage(void)
{
	check_bad("truncated.jpg", IMS_ECORRUPT);
	check_bad("jpeg_header_only.jpg", IMS_ECORRUPT);
	check_bad("huge.jpg", IMS_ELIMIT);

	/* Markers intact, data cut: only the decoder can tell, and its
	 * warning is an error. */
	size_t len;
	uint8_t *buf = load(dir, "truncated_eoi.jpg", &len);
	aug_image img = {0};
	aug_image_info info;
	CHECK_OK(aug_probe(codec, buf, len, &info, &err), &err);
	ims_error_clear(&err);
	CHECK_EQ_INT(aug_decode(codec, buf, len, &rgb_opts, &img, NULL, &err),
		     IMS_ECORRUPT);
	CHECK(strstr(err.msg, "JPEG") != NULL);
	free(buf);

	/* The codec still works after failures. */
	CHECK_OK(decode_file(codec, dir, "rgb.jpg", &rgb_opts, &img, NULL, &err),
		 &err);
	CHECK(pattern_mae(&img) < JPEG_MAE);

	/* Garbage bytes between two segments (after APP0): libjpeg would
	 * warn. */
	buf = load(dir, "rgb.jpg", &len);
	uint8_t *bad = malloc(len + 3);
	size_t app0_end = 4 + (((size_t)buf[4] << 8) | buf[5]);
	memcpy(bad, buf, app0_end);
	memcpy(bad + app0_end, "abc", 3);
	memcpy(bad + app0_end + 3, buf + app0_end, len - app0_end);
	ims_error_clear(&err);
	CHECK_EQ_INT(aug_probe(codec, bad, len + 3, NULL, &err), IMS_ECORRUPT);
	CHECK(err.msg[0] != '\0');
	/* Trailing bytes after EOI are allowed (cameras append data). */
	memcpy(bad, buf, len);
	memcpy(bad + len, "xyz", 3);
	CHECK_OK(aug_probe(codec, bad, len + 3, NULL, &err), &err);
	/* A 12-bit SOF is refused as unsupported, not as corrupt. */
	memcpy(bad, buf, len);
	for (size_t i = 2; i + 4 < len; i++)
		if (bad[i] == 0xFF && bad[i + 1] == 0xC0) {
			bad[i + 4] = 12;
			break;
		}
	CHECK_EQ_INT(aug_probe(codec, bad, len, NULL, &err), IMS_EUNSUPPORTED);
	free(bad);
	free(buf);
	aug_image_release(&img);
}

static void test_encode(void)
{
	aug_image src = {0}, back = {0};
	ims_buf out = {0};
	CHECK_OK(aug_image_alloc(&src, FX_W, FX_H, 3, &err), &err);
	for (int y = 0; y < FX_H; y++)
		for (int x = 0; x < FX_W; x++)
			fx_pattern(x, y, FX_W, FX_H, px(&src, x, y));
	CHECK_OK(aug_encode_jpeg(codec, &src, 95, &out, &err), &err);
	CHECK(out.len > 100 && out.len <= out.cap);
	CHECK_EQ_INT(aug_sniff(out.data, out.len), AUG_FORMAT_JPEG);
	aug_image_info info;
	CHECK_OK(aug_probe(codec, out.data, out.len, &info, &err), &err);
	CHECK_EQ_INT(info.width, FX_W);
	CHECK_OK(aug_decode(codec, out.data, out.len, &rgb_opts, &back, NULL, &err),
		 &err);
	CHECK(pattern_mae(&back) < JPEG_MAE);
	/* 4:2:0: the SOF gives luma 2x2 sampling. */
	int found = 0;
	for (size_t i = 2; i + 12 < out.len && !found; i++)
		if (out.data[i] == 0xFF && out.data[i + 1] == 0xC0) {
			found = 1;
			CHECK_EQ_INT(out.data[i + 11], 0x22);
			CHECK_EQ_INT(out.data[i + 14], 0x11);
		}
	CHECK(found);
	/* Lower quality, smaller file, still the picture. */
	size_t q95 = out.len;
	CHECK_OK(aug_encode_jpeg(codec, &src, 50, &out, &err), &err);
	CHECK(out.len < q95);
	CHECK_OK(aug_decode(codec, out.data, out.len, &rgb_opts, &back, NULL, &err),
		 &err);
	CHECK(pattern_mae(&back) < 3 * JPEG_MAE);

	/* Grey: 4:0:0, one component. */
	aug_image grey = {0};
	CHECK_OK(aug_image_alloc(&grey, FX_W, FX_H, 1, &err), &err);
	for (int y = 0; y < FX_H; y++)
		for (int x = 0; x < FX_W; x++)
			*px(&grey, x, y) = (uint8_t)pattern_at(x, y, FX_W, FX_H, 1, 0);
	CHECK_OK(aug_encode_jpeg(codec, &grey, 90, &out, &err), &err);
	CHECK_OK(aug_probe(codec, out.data, out.len, &info, &err), &err);
	CHECK_EQ_INT(info.channels, 1);
	CHECK_OK(aug_decode(codec, out.data, out.len, &native_opts, &back, NULL,
			    &err), &err);
	CHECK_EQ_INT(back.channels, 1);
	CHECK(pattern_mae(&back) < JPEG_MAE);

	/* A stride wider than the row is honoured. */
	aug_image wide = src;
	uint8_t *padded = calloc((size_t)FX_H, (size_t)FX_W * 3 + 7);
	for (int y = 0; y < FX_H; y++)
		memcpy(padded + (size_t)y * (FX_W * 3 + 7), px(&src, 0, y), FX_W * 3);
	wide.pixels = padded;
	wide.stride = FX_W * 3 + 7;
	CHECK_OK(aug_encode_jpeg(codec, &wide, 95, &out, &err), &err);
	CHECK_OK(aug_decode(codec, out.data, out.len, &rgb_opts, &back, NULL, &err),
		 &err);
	CHECK(pattern_mae(&back) < JPEG_MAE);
	free(padded);

	/* Refusals. */
	aug_image rgba = {0};
	CHECK_OK(aug_image_alloc(&rgba, 8, 8, 4, &err), &err);
	CHECK_EQ_INT(aug_encode_jpeg(codec, &rgba, 90, &out, &err), IMS_EINVAL);
	CHECK(err.msg[0] != '\0');
	CHECK_EQ_INT(aug_encode_jpeg(codec, &src, 0, &out, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_encode_jpeg(codec, &src, 101, &out, &err), IMS_EINVAL);
	aug_image_release(&rgba);
	aug_image_release(&grey);
	aug_image_release(&src);
	aug_image_release(&back);
	ims_buf_release(&out);
}

/* Decoding into the same aug_image reuses its buffer. */
static void test_reuse(void)
{
	aug_image img = {0};
	CHECK_OK(decode_file(codec, dir, "big.jpg", &rgb_opts, &img, NULL, &err),
		 &err);
	uint8_t *first = img.pixels;
	size_t cap = img.capacity;
	CHECK(cap >= (size_t)1200 * 900 * 3);
	CHECK_OK(decode_file(codec, dir, "rgb.jpg", &rgb_opts, &img, NULL, &err),
		 &err);
	CHECK(img.pixels == first);
	CHECK_EQ_INT(img.capacity, cap);
	CHECK_EQ_INT(img.stride, FX_W * 3);
	aug_image_release(&img);
	CHECK(img.pixels == NULL && img.capacity == 0);
	aug_image_release(&img); /* twice is fine */
}

int main(void)
{
	dir = fixtures_dir("aug-jpeg");
	CHECK_OK(aug_codec_create(&codec, &err), &err);
	if (!codec)
		return TEST_EXIT();
	test_colour_spaces();
	test_orientation();
	test_dct_scaling();
	test_damage();
	test_encode();
	test_reuse();
	aug_codec_destroy(codec);
	aug_codec_destroy(NULL);
	if (!test_failures_)
		test_rm_tree(dir);
	return TEST_EXIT();
}
