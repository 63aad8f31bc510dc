/* test_codec.c - sniffing, probing every fixture, the error contract for
 * bad files (code and message from both probe and decode), image/buffer
 * helpers, orientation transforms, fit/crop geometry, and a robustness
 * loop over truncated and bit-flipped files (run it under ASan). */
#include "augment/augment_internal.h"
#include "aug_test_util.h"
#include "test.h"

static const char *dir;
static aug_codec *codec;
static ims_error err;

static void test_sniff(void)
{
	CHECK_EQ_INT(aug_sniff((const uint8_t *)"\xFF\xD8\xFF\xE0", 4), AUG_FORMAT_JPEG);
	CHECK_EQ_INT(aug_sniff((const uint8_t *)"\xFF\xD8", 2), AUG_FORMAT_UNKNOWN);
	CHECK_EQ_INT(aug_sniff((const uint8_t *)"\x89PNG\r\n\x1a\n", 8), AUG_FORMAT_PNG);
	CHECK_EQ_INT(aug_sniff((const uint8_t *)"\x89PNG\r\n\x1a", 7), AUG_FORMAT_UNKNOWN);
	CHECK_EQ_INT(aug_sniff((const uint8_t *)"GIF89a", 6), AUG_FORMAT_UNKNOWN);
	CHECK_EQ_INT(aug_sniff(NULL, 10), AUG_FORMAT_UNKNOWN);
	CHECK_EQ_STR(aug_format_name(AUG_FORMAT_JPEG), "jpeg");
	CHECK_EQ_STR(aug_format_name(AUG_FORMAT_PNG), "png");
	CHECK_EQ_STR(aug_format_name(AUG_FORMAT_UNKNOWN), "unknown");
	CHECK_EQ_STR(aug_format_name((aug_format)42), "unknown");
}

static void test_probe_valid(void)
{
	static const struct {
		const char *name;
		int format, w, h, ch, orientation, cmyk, inverted, depth, alpha;
	} t[] = {
		{"rgb.jpg", AUG_FORMAT_JPEG, 96, 64, 3, 1, 0, 0, 8, 0},
		{"progressive.jpg", AUG_FORMAT_JPEG, 96, 64, 3, 1, 0, 0, 8, 0},
		{"odd_sampling.jpg", AUG_FORMAT_JPEG, 96, 64, 3, 1, 0, 0, 8, 0},
		{"gray.jpg", AUG_FORMAT_JPEG, 96, 64, 1, 1, 0, 0, 8, 0},
		{"cmyk.jpg", AUG_FORMAT_JPEG, 96, 64, 3, 1, 1, 0, 8, 0},
		{"cmyk_adobe.jpg", AUG_FORMAT_JPEG, 96, 64, 3, 1, 1, 1, 8, 0},
		{"ycck.jpg", AUG_FORMAT_JPEG, 96, 64, 3, 1, 1, 1, 8, 0},
		{"exif_1.jpg", AUG_FORMAT_JPEG, 96, 64, 3, 1, 0, 0, 8, 0},
		{"exif_4.jpg", AUG_FORMAT_JPEG, 96, 64, 3, 4, 0, 0, 8, 0},
		{"exif_5.jpg", AUG_FORMAT_JPEG, 64, 96, 3, 5, 0, 0, 8, 0},
		{"exif_8.jpg", AUG_FORMAT_JPEG, 64, 96, 3, 8, 0, 0, 8, 0},
		{"exif_after_xmp.jpg", AUG_FORMAT_JPEG, 64, 96, 3, 6, 0, 0, 8, 0},
		{"big.jpg", AUG_FORMAT_JPEG, 1200, 900, 3, 1, 0, 0, 8, 0},
		{"truncated_eoi.jpg", AUG_FORMAT_JPEG, 96, 64, 3, 1, 0, 0, 8, 0},
		{"rgb.png", AUG_FORMAT_PNG, 96, 64, 3, 1, 0, 0, 8, 0},
		{"rgba.png", AUG_FORMAT_PNG, 96, 64, 4, 1, 0, 0, 8, 1},
		{"gray.png", AUG_FORMAT_PNG, 96, 64, 1, 1, 0, 0, 8, 0},
		{"gray_alpha.png", AUG_FORMAT_PNG, 96, 64, 1, 1, 0, 0, 8, 1},
		{"palette.png", AUG_FORMAT_PNG, 96, 64, 3, 1, 0, 0, 8, 0},
		{"palette_trns.png", AUG_FORMAT_PNG, 96, 64, 4, 1, 0, 0, 8, 1},
		{"rgb16.png", AUG_FORMAT_PNG, 96, 64, 3, 1, 0, 0, 16, 0},
		{"gray16.png", AUG_FORMAT_PNG, 96, 64, 1, 1, 0, 0, 16, 0},
		{"gray1.png", AUG_FORMAT_PNG, 96, 64, 1, 1, 0, 0, 1, 0},
		{"exif_6.png", AUG_FORMAT_PNG, 64, 96, 3, 6, 0, 0, 8, 0},
		{"png_as.JPEG", AUG_FORMAT_PNG, 96, 64, 4, 1, 0, 0, 8, 1},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(*t); i++) {
		size_t len;
		uint8_t *buf = load(dir, t[i].name, &len);
		aug_image_info info;
		int rc = aug_probe(codec, buf, len, &info, &err);
		if (rc)
			fprintf(stderr, "%s: %s\n", t[i].name, err.msg);
		CHECK_OK(rc, &err);
		CHECK_EQ_INT(info.format, t[i].format);
		CHECK_EQ_INT(info.width, t[i].w);
		CHECK_EQ_INT(info.height, t[i].h);
		CHECK_EQ_INT(info.channels, t[i].ch);
		CHECK_EQ_INT(info.orientation, t[i].orientation);
		CHECK_EQ_INT(info.upright_width, t[i].orientation >= 5 ? t[i].h : t[i].w);
		CHECK_EQ_INT(info.upright_height, t[i].orientation >= 5 ? t[i].w : t[i].h);
		CHECK_EQ_INT(info.is_cmyk, t[i].cmyk);
		CHECK_EQ_INT(info.adobe_inverted, t[i].inverted);
		CHECK_EQ_INT(info.bit_depth, t[i].depth);
		CHECK_EQ_INT(info.has_alpha, t[i].alpha);
		/* Native decode gives the channels the probe announced. */
		aug_image img = {0};
		aug_decode_opts o = {AUG_CHANNELS_NATIVE, 0, 0, 1};
		if (strcmp(t[i].name, "truncated_eoi.jpg") != 0) {
			CHECK_OK(aug_decode(codec, buf, len, &o, &img, NULL, &err), &err);
			CHECK_EQ_INT(img.channels, t[i].ch);
			CHECK_EQ_INT(img.width, info.upright_width);
		}
		/* info may be NULL. */
		CHECK_OK(aug_probe(codec, buf, len, NULL, &err), &err);
		aug_image_release(&img);
		free(buf);
	}
}

static void check_bad(const char *name, int code, const char *in_msg)
{
	size_t len;
	uint8_t *buf = load(dir, name, &len);
	aug_image img = {0};
	aug_image_info info;
	for (int decode = 0; decode <= 1; decode++) {
		ims_error e;
		ims_error_clear(&e);
		int rc = decode ? aug_decode(codec, buf, len, NULL, &img, &info, &e)
				: aug_probe(codec, buf, len, &info, &e);
		if (rc != code || !e.msg[0] || (in_msg && !strstr(e.msg, in_msg)))
			fprintf(stderr, "%s: %s gave %d '%s', want %d '%s'\n", name,
				decode ? "decode" : "probe", rc, e.msg, code,
				in_msg ? in_msg : "");
		CHECK_EQ_INT(rc, code);
		CHECK_EQ_INT(e.code, code);
		CHECK(e.msg[0] != '\0');
		if (in_msg)
			CHECK(strstr(e.msg, in_msg) != NULL);
	}
	aug_image_release(&img);
	free(buf);
}

static void test_bad_files(void)
{
	check_bad("empty.jpg", IMS_EFORMAT, "empty file");
	check_bad("garbage.jpg", IMS_EFORMAT, "not a JPEG or PNG image (starts with 5a");
	check_bad("text.jpg", IMS_EFORMAT,
		  "not a JPEG or PNG image (starts with 3c 68 74 6d)");
	check_bad("truncated.jpg", IMS_ECORRUPT, "JPEG");
	check_bad("truncated.png", IMS_ECORRUPT, "truncated");
	check_bad("jpeg_header_only.jpg", IMS_ECORRUPT, NULL);
	check_bad("huge.jpg", IMS_ELIMIT, "60000x60000");
	check_bad("huge.png", IMS_ELIMIT, "100000x100000");
	check_bad("badcrc.png", IMS_ECORRUPT, "CRC");

	/* Fewer than 4 bytes to show. */
	CHECK_EQ_INT(aug_probe(codec, (const uint8_t *)"\x01\x02", 2, NULL, &err),
		     IMS_EFORMAT);
	CHECK(strstr(err.msg, "(starts with 01 02)") != NULL);
	/* Arguments. */
	CHECK_EQ_INT(aug_probe(NULL, (const uint8_t *)"x", 1, NULL, &err), IMS_EINVAL);
	aug_image img = {0};
	aug_decode_opts bad = {(aug_channels)7, 0, 0, 1};
	CHECK_EQ_INT(aug_decode(codec, (const uint8_t *)"x", 1, &bad, &img, NULL, &err),
		     IMS_EINVAL);
	CHECK_EQ_INT(aug_decode(codec, (const uint8_t *)"x", 1, NULL, NULL, NULL, &err),
		     IMS_EINVAL);
	/* A NULL ims_error is allowed. */
	CHECK_EQ_INT(aug_probe(codec, (const uint8_t *)"", 0, NULL, NULL), IMS_EFORMAT);
}

static void test_defaults(void)
{
	/* NULL opts: RGB, full size, upright. */
	aug_image img = {0};
	aug_image_info info;
	CHECK_OK(decode_file(codec, dir, "exif_8.jpg", NULL, &img, &info, &err), &err);
	CHECK_EQ_INT(img.width, FX_W);
	CHECK_EQ_INT(img.height, FX_H);
	CHECK_EQ_INT(img.channels, 3);
	CHECK(pattern_mae(&img) < 4);
	CHECK_OK(decode_file(codec, dir, "gray.png", NULL, &img, &info, &err), &err);
	CHECK_EQ_INT(img.channels, 3);
	aug_image_release(&img);
}

static void test_image_helpers(void)
{
	aug_image img = {0};
	CHECK_EQ_INT(aug_image_alloc(&img, 0, 5, 3, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_image_alloc(&img, 5, 5, 5, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_image_alloc(NULL, 5, 5, 3, &err), IMS_EINVAL);
	CHECK_OK(aug_image_alloc(&img, 10, 10, 3, &err), &err);
	CHECK_EQ_INT(img.stride, 30);
	CHECK_EQ_INT(img.capacity, 300);
	uint8_t *p = img.pixels;
	CHECK_OK(aug_image_alloc(&img, 5, 20, 1, &err), &err);
	CHECK(img.pixels == p);
	CHECK_EQ_INT(img.capacity, 300);
	CHECK_EQ_INT(img.stride, 5);
	CHECK_OK(aug_image_alloc(&img, 100, 100, 4, &err), &err);
	CHECK_EQ_INT(img.capacity, 40000);
	aug_image_release(&img);
	aug_image_release(NULL);
}

static void test_orient(void)
{
	aug_image src = {0}, dst = {0};
	uint64_t x = 99;
	for (int ch = 1; ch <= 4; ch++) {
		/* Sizes across the 32-pixel tiles. */
		CHECK_OK(aug_image_alloc(&src, 45, 70, ch, &err), &err);
		for (size_t i = 0; i < src.capacity; i++) {
			x = x * 6364136223846793005ull + 1;
			src.pixels[i] = (uint8_t)(x >> 56);
		}
		for (int o = 1; o <= 8; o++) {
			CHECK_OK(aug_orient(&src, o, &dst, &err), &err);
			CHECK_EQ_INT(dst.width, o >= 5 ? 70 : 45);
			CHECK_EQ_INT(dst.height, o >= 5 ? 45 : 70);
			int bad = 0;
			for (int sy = 0; sy < 70; sy++)
				for (int sx = 0; sx < 45; sx++) {
					int ux, uy;
					fx_upright_of(o, sx, sy, 45, 70, &ux, &uy);
					bad += memcmp(px(&dst, ux, uy), px(&src, sx, sy),
						      (size_t)ch) != 0;
				}
			CHECK_EQ_INT(bad, 0);
		}
	}
	CHECK_EQ_INT(aug_orient(&src, 0, &dst, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_orient(&src, 9, &dst, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_orient(&src, 2, &src, &err), IMS_EINVAL);
	aug_image_release(&src);
	aug_image_release(&dst);
}

static void check_fit(int shorter, int max_longer, int crop, int up, int w,
		      int h, int sw, int sh, int ow, int oh)
{
	aug_fit f = {shorter, max_longer, crop, up};
	int a, b, c, d;
	aug_fit_size(&f, w, h, &a, &b, &c, &d);
	if (a != sw || b != sh || c != ow || d != oh)
		fprintf(stderr, "fit %d/%d/%d/%d of %dx%d: %dx%d %dx%d, want %dx%d %dx%d\n",
			shorter, max_longer, crop, up, w, h, a, b, c, d, sw, sh, ow, oh);
	CHECK(a == sw && b == sh && c == ow && d == oh);
}

static void test_fit(void)
{
	check_fit(256, 0, 0, 0, 500, 375, 341, 256, 341, 256);
	check_fit(256, 0, 0, 0, 375, 500, 256, 341, 256, 341);
	check_fit(256, 0, 1, 0, 500, 375, 341, 256, 256, 256);
	check_fit(256, 0, 0, 0, 256, 300, 256, 300, 256, 300);   /* already */
	check_fit(256, 0, 0, 0, 200, 150, 200, 150, 200, 150);   /* no upscale */
	check_fit(256, 0, 1, 0, 200, 150, 200, 150, 150, 150);
	check_fit(256, 0, 0, 1, 200, 150, 341, 256, 341, 256);   /* upscale */
	check_fit(0, 300, 0, 0, 500, 375, 300, 225, 300, 225);
	check_fit(0, 600, 0, 0, 500, 375, 500, 375, 500, 375);   /* under cap */
	check_fit(256, 300, 0, 0, 1000, 200, 300, 60, 300, 60);  /* cap wins */
	check_fit(256, 300, 1, 0, 1000, 200, 300, 60, 60, 60);
	check_fit(256, 300, 0, 0, 200, 1000, 60, 300, 60, 300);
	check_fit(5, 0, 0, 1, 3, 2, 8, 5, 8, 5);                 /* 7.5 -> 8 */
	check_fit(0, 10, 0, 0, 1000, 1, 10, 1, 10, 1);           /* at least 1 */
	check_fit(0, 0, 1, 0, 500, 375, 500, 375, 375, 375);     /* crop only */
	check_fit(0, 0, 0, 0, 500, 375, 500, 375, 500, 375);
	int a, b, c, d;
	aug_fit_size(NULL, 40, 30, &a, &b, &c, &d);
	CHECK(a == 40 && b == 30 && c == 40 && d == 30);
}

static void test_crop(void)
{
	aug_image src = {0}, dst = {0};
	CHECK_OK(aug_image_alloc(&src, 10, 7, 3, &err), &err);
	for (int y = 0; y < 7; y++)
		for (int x = 0; x < 10; x++) {
			uint8_t *p = px(&src, x, y);
			p[0] = (uint8_t)x;
			p[1] = (uint8_t)y;
			p[2] = 7;
		}
	CHECK_OK(aug_crop_center(&src, 4, 3, &dst, &err), &err);
	CHECK_EQ_INT(dst.width, 4);
	CHECK_EQ_INT(dst.height, 3);
	CHECK_EQ_INT(px(&dst, 0, 0)[0], 3);
	CHECK_EQ_INT(px(&dst, 0, 0)[1], 2);
	CHECK_EQ_INT(px(&dst, 3, 2)[0], 6);
	CHECK_EQ_INT(px(&dst, 3, 2)[1], 4);
	CHECK_OK(aug_crop_center(&src, 10, 7, &dst, &err), &err);
	CHECK(image_equal(&src, &dst));
	CHECK_EQ_INT(aug_crop_center(&src, 11, 3, &dst, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_crop_center(&src, 0, 3, &dst, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_crop_center(&src, 4, 3, &src, &err), IMS_EINVAL);
	aug_image_release(&src);
	aug_image_release(&dst);
}

/* A status from damaged input: success with a sane image, or one of the
 * documented failures with a message. */
static int sane(int rc, const ims_error *e, int w, int h)
{
	int ok;
	if (rc == 0)
		ok = w >= 1 && h >= 1 && w <= AUG_MAX_SIDE && h <= AUG_MAX_SIDE;
	else
		ok = (rc == IMS_ECORRUPT || rc == IMS_EFORMAT || rc == IMS_ELIMIT ||
		      rc == IMS_EUNSUPPORTED) && e->msg[0] != '\0';
	if (!ok)
		fprintf(stderr, "outside the contract: rc %d, '%s'\n", rc, e->msg);
	return ok;
}

static uint32_t crc32_ref(const uint8_t *p, size_t n)
{
	uint32_t c = 0xFFFFFFFFu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
	}
	return c ^ 0xFFFFFFFFu;
}

/* Rewrites every PNG chunk CRC that lies within the file, so damage gets
 * past the chunk walk and into libpng/zlib. */
static void fix_png_crcs(uint8_t *p, size_t len)
{
	size_t pos = 8;
	while (pos + 12 <= len) {
		uint32_t n = ((uint32_t)p[pos] << 24) | ((uint32_t)p[pos + 1] << 16) |
			     ((uint32_t)p[pos + 2] << 8) | p[pos + 3];
		if (n > len - pos - 12)
			break;
		uint32_t c = crc32_ref(p + pos + 4, (size_t)n + 4);
		p[pos + 8 + n] = (uint8_t)(c >> 24);
		p[pos + 9 + n] = (uint8_t)(c >> 16);
		p[pos + 10 + n] = (uint8_t)(c >> 8);
		p[pos + 11 + n] = (uint8_t)c;
		pos += 12 + (size_t)n;
	}
}

static void fuzz_file(const char *name, int flips)
{
	size_t len;
	uint8_t *orig = load(dir, name, &len);
	aug_image img = {0};
	ims_error e;
	int insane = 0, prefix_ok = 0;
	aug_decode_opts o = {AUG_CHANNELS_RGB, 0, 0, 1};

	/* Every strict prefix: both calls must fail (the end marker is
	 * gone), cleanly. Each runs from an exact-size copy for ASan. */
	for (size_t n = 0; n < len; n++) {
		uint8_t *p = malloc(n ? n : 1);
		memcpy(p, orig, n);
		ims_error_clear(&e);
		aug_image_info info;
		int rc = aug_probe(codec, p, n, &info, &e);
		insane += !sane(rc, &e, info.width, info.height);
		prefix_ok += rc == 0;
		ims_error_clear(&e);
		rc = aug_decode(codec, p, n, &o, &img, NULL, &e);
		insane += !sane(rc, &e, img.width, img.height);
		prefix_ok += rc == 0;
		free(p);
	}
	CHECK_EQ_INT(prefix_ok, 0);

	/* Random byte changes, 1..4 at a time, some in the first bytes
	 * where the headers are. */
	uint64_t x = 0xC0FFEE ^ len;
	uint8_t *p = malloc(len);
	int decoded = 0, is_png = aug_sniff(orig, len) == AUG_FORMAT_PNG;
	for (int it = 0; it < flips; it++) {
		memcpy(p, orig, len);
		int k = 1 + it % 4;
		for (int i = 0; i < k; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t at = (it & 1) ? (size_t)(x % len) : (size_t)(x % (len < 200 ? len : 200));
			p[at] = (it & 2) ? (uint8_t)(x >> 40) : (uint8_t)(p[at] ^ (1u << (x >> 61)));
		}
		if (is_png && (it & 16))
			fix_png_crcs(p, len);
		ims_error_clear(&e);
		aug_image_info info;
		int rc = aug_probe(codec, p, len, &info, &e);
		insane += !sane(rc, &e, info.width, info.height);
		ims_error_clear(&e);
		o.channels = (it & 4) ? AUG_CHANNELS_NATIVE : AUG_CHANNELS_RGB;
		o.min_width = (it & 8) ? 20 : 0;
		o.min_height = (it & 8) ? 20 : 0;
		rc = aug_decode(codec, p, len, &o, &img, NULL, &e);
		insane += !sane(rc, &e, img.width, img.height);
		decoded += rc == 0;
	}
	if (insane)
		fprintf(stderr, "%s: %d results outside the contract\n", name, insane);
	CHECK_EQ_INT(insane, 0);
	/* The codec is still good afterwards. */
	CHECK_OK(aug_decode(codec, orig, len, NULL, &img, NULL, &err), &err);
	(void)decoded;
	free(p);
	free(orig);
	aug_image_release(&img);
}

static void test_fuzz(void)
{
	fuzz_file("rgb.jpg", 3000);
	fuzz_file("progressive.jpg", 2000);
	fuzz_file("exif_6.jpg", 1000);
	fuzz_file("cmyk_adobe.jpg", 1000);
	fuzz_file("rgb.png", 3000);
	fuzz_file("palette_trns.png", 1000);
	fuzz_file("rgba_interlaced.png", 1000);
	fuzz_file("exif_6.png", 1000);
}

int main(void)
{
	dir = fixtures_dir("aug-codec");
	CHECK_OK(aug_codec_create(&codec, &err), &err);
	if (!codec)
		return TEST_EXIT();
	test_sniff();
	test_probe_valid();
	test_bad_files();
	test_defaults();
	test_image_helpers();
	test_orient();
	test_fit();
	test_crop();
	test_fuzz();
	aug_codec_destroy(codec);
	CHECK_EQ_INT(aug_codec_create(NULL, &err), IMS_EINVAL);
	if (!test_failures_)
		test_rm_tree(dir);
	return TEST_EXIT();
}
