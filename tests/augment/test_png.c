/* test_png.c - PNG chunk walk, decode of every colour type and bit depth
 * (exact, against pattern.h), alpha compositing, eXIf, damage, and
 * lossless encode round trips. */
#include "augment/augment_internal.h"
#include "aug_test_util.h"
#include "test.h"

static const char *dir;
static aug_codec *codec;
static ims_error err;

static const aug_decode_opts rgb_opts = {AUG_CHANNELS_RGB, 0, 0, 1};
static const aug_decode_opts native_opts = {AUG_CHANNELS_NATIVE, 0, 0, 1};

/* round((c * a + 255 * (255 - a)) / 255): alpha over white. */
static int over_white(int c, int a)
{
	return (int)floor((c * a + 255.0 * (255 - a)) / 255.0 + 0.5);
}

/* What a decode of `kind` must hold at (x, y), channel c of `ch`. */
enum kind { RGB, RGBA, GREY, GREY_ALPHA, PAL, PAL_TRNS, GREY_BITS };

static int expected(enum kind k, int bits, int x, int y, int ch, int c)
{
	uint8_t rgb[3];
	fx_pattern(x, y, FX_W, FX_H, rgb);
	int a = 255, v[3];
	uint8_t luma = fx_luma(rgb);
	switch (k) {
	case RGB: case RGBA:
		v[0] = rgb[0]; v[1] = rgb[1]; v[2] = rgb[2];
		if (k == RGBA)
			a = fx_alpha(x, y, FX_W, FX_H);
		break;
	case GREY: case GREY_ALPHA:
		v[0] = v[1] = v[2] = luma;
		if (k == GREY_ALPHA)
			a = fx_alpha(x, y, FX_W, FX_H);
		break;
	case GREY_BITS:
		v[0] = v[1] = v[2] = (luma >> (8 - bits)) * 255 / ((1 << bits) - 1);
		break;
	default: {
		uint8_t pal[3];
		int i = fx_palette_index(rgb);
		fx_palette_color(i, pal);
		v[0] = pal[0]; v[1] = pal[1]; v[2] = pal[2];
		if (k == PAL_TRNS)
			a = fx_palette_alpha(i);
		break;
	}
	}
	if (ch == 4)
		return c == 3 ? a : v[c];
	return over_white(v[ch == 1 ? 0 : c], a);
}

static void check_png(const char *name, enum kind k, int bits, int native_ch,
		      int bit_depth, int has_alpha)
{
	aug_image img = {0};
	aug_image_info info;
	for (int pass = 0; pass < 2; pass++) {
		const aug_decode_opts *o = pass ? &rgb_opts : &native_opts;
		int rc = decode_file(codec, dir, name, o, &img, &info, &err);
		CHECK_OK(rc, &err);
		if (rc)
			continue;
		int ch = pass ? 3 : native_ch;
		CHECK_EQ_INT(info.format, AUG_FORMAT_PNG);
		CHECK_EQ_INT(info.channels, native_ch);
		CHECK_EQ_INT(info.bit_depth, bit_depth);
		CHECK_EQ_INT(info.has_alpha, has_alpha);
		CHECK_EQ_INT(info.orientation, 1);
		CHECK_EQ_INT(img.width, FX_W);
		CHECK_EQ_INT(img.height, FX_H);
		CHECK_EQ_INT(img.channels, ch);
		if (img.width != FX_W || img.height != FX_H || img.channels != ch)
			continue;
		int bad = 0;
		for (int y = 0; y < FX_H; y++)
			for (int x = 0; x < FX_W; x++)
				for (int c = 0; c < ch; c++) {
					int want = expected(k, bits, x, y, ch, c);
					if (px(&img, x, y)[c] != want && !bad++)
						fprintf(stderr,
							"%s (%d ch): (%d,%d,%d) = %d, want %d\n",
							name, ch, x, y, c, px(&img, x, y)[c],
							want);
				}
		CHECK_EQ_INT(bad, 0);
	}
	aug_image_release(&img);
}

static void test_layouts(void)
{
	check_png("rgb.png", RGB, 8, 3, 8, 0);
	check_png("rgb_interlaced.png", RGB, 8, 3, 8, 0);
	check_png("rgb16.png", RGB, 8, 3, 16, 0);
	check_png("rgba.png", RGBA, 8, 4, 8, 1);
	check_png("rgba_interlaced.png", RGBA, 8, 4, 8, 1);
	check_png("png_as.JPEG", RGBA, 8, 4, 8, 1);
	check_png("gray.png", GREY, 8, 1, 8, 0);
	check_png("gray16.png", GREY, 8, 1, 16, 0);
	check_png("gray_alpha.png", GREY_ALPHA, 8, 1, 8, 1);
	check_png("gray1.png", GREY_BITS, 1, 1, 1, 0);
	check_png("gray2.png", GREY_BITS, 2, 1, 2, 0);
	check_png("gray4.png", GREY_BITS, 4, 1, 4, 0);
	check_png("palette.png", PAL, 8, 3, 8, 0);
	check_png("palette_trns.png", PAL_TRNS, 8, 4, 8, 1);

	/* The .JPEG name changes nothing: content decides. */
	size_t len;
	uint8_t *buf = load(dir, "png_as.JPEG", &len);
	CHECK_EQ_INT(aug_sniff(buf, len), AUG_FORMAT_PNG);
	CHECK_EQ_STR(aug_format_name(aug_sniff(buf, len)), "png");
	free(buf);

	/* PNG ignores the DCT-scaling bound: always full size. */
	aug_decode_opts o = {AUG_CHANNELS_RGB, 10, 10, 1};
	aug_image img = {0};
	CHECK_OK(decode_file(codec, dir, "rgb.png", &o, &img, NULL, &err), &err);
	CHECK_EQ_INT(img.width, FX_W);
	aug_image_release(&img);
}

static void test_exif(void)
{
	aug_image img = {0};
	aug_image_info info;
	CHECK_OK(decode_file(codec, dir, "exif_6.png", &rgb_opts, &img, &info, &err),
		 &err);
	CHECK_EQ_INT(info.orientation, 6);
	CHECK_EQ_INT(info.width, FX_H);
	CHECK_EQ_INT(info.upright_width, FX_W);
	CHECK_EQ_INT(img.width, FX_W);
	CHECK_EQ_INT(img.height, FX_H);
	CHECK(pattern_mae(&img) == 0.0);
	aug_decode_opts keep = rgb_opts;
	keep.apply_orientation = 0;
	CHECK_OK(decode_file(codec, dir, "exif_6.png", &keep, &img, &info, &err),
		 &err);
	CHECK_EQ_INT(img.width, FX_H);
	CHECK_EQ_INT(img.height, FX_W);
	aug_image_release(&img);
}

/* ---- hand-made files ---------------------------------------------------- */

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

typedef struct pngw {
	uint8_t p[8192];
	size_t n;
} pngw;

static void be32w(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void chunk(pngw *w, const char *type, const void *data, uint32_t n)
{
	be32w(w->p + w->n, n);
	memcpy(w->p + w->n + 4, type, 4);
	if (n)
		memcpy(w->p + w->n + 8, data, n);
	be32w(w->p + w->n + 8 + n, crc32_ref(w->p + w->n + 4, n + 4));
	w->n += 12 + n;
}

static void start(pngw *w)
{
	memcpy(w->p, "\x89PNG\r\n\x1a\n", 8);
	w->n = 8;
}

static void ihdr(pngw *w, uint32_t width, uint32_t height, int depth, int ct)
{
	uint8_t d[13] = {0};
	be32w(d, width);
	be32w(d + 4, height);
	d[8] = (uint8_t)depth;
	d[9] = (uint8_t)ct;
	chunk(w, "IHDR", d, 13);
}

/* The IDAT payload of rgb.png (its zlib stream), for hand-made files. */
static uint8_t idat[4096];
static uint32_t idat_n;

static void load_idat(void)
{
	size_t len;
	uint8_t *buf = load(dir, "rgb.png", &len);
	size_t pos = 8;
	while (pos + 12 <= len) {
		uint32_t n = ((uint32_t)buf[pos] << 24) | ((uint32_t)buf[pos + 1] << 16) |
			     ((uint32_t)buf[pos + 2] << 8) | buf[pos + 3];
		if (!memcmp(buf + pos + 4, "IDAT", 4) && n <= sizeof(idat)) {
			memcpy(idat, buf + pos + 8, n);
			idat_n = n;
			break;
		}
		pos += 12 + n;
	}
	free(buf);
	CHECK(idat_n > 0);
}

static void expect(const pngw *w, int probe_rc, int decode_rc, const char *what)
{
	ims_error e;
	ims_error_clear(&e);
	aug_image img = {0};
	int rc = aug_probe(codec, w->p, w->n, NULL, &e);
	if (rc != probe_rc)
		fprintf(stderr, "%s: probe %d (%s), want %d\n", what, rc, e.msg,
			probe_rc);
	CHECK_EQ_INT(rc, probe_rc);
	CHECK(rc == 0 || e.msg[0] != '\0');
	ims_error_clear(&e);
	rc = aug_decode(codec, w->p, w->n, &rgb_opts, &img, NULL, &e);
	if (rc != decode_rc)
		fprintf(stderr, "%s: decode %d (%s), want %d\n", what, rc, e.msg,
			decode_rc);
	CHECK_EQ_INT(rc, decode_rc);
	CHECK(rc == 0 || e.msg[0] != '\0');
	if (rc == 0)
		CHECK(pattern_mae(&img) == 0.0);
	aug_image_release(&img);
}

static void test_structure(void)
{
	load_idat();
	pngw w;

	/* Rebuilt rgb.png with an ancillary chunk and trailing bytes: fine. */
	start(&w);
	ihdr(&w, FX_W, FX_H, 8, 2);
	chunk(&w, "tEXt", "Comment\0hi", 10);
	chunk(&w, "IDAT", idat, idat_n);
	chunk(&w, "IEND", NULL, 0);
	memcpy(w.p + w.n, "junk", 4);
	w.n += 4;
	expect(&w, 0, 0, "valid with tEXt and trailing bytes");

	/* The same zlib stream split over two IDAT chunks. */
	start(&w);
	ihdr(&w, FX_W, FX_H, 8, 2);
	chunk(&w, "IDAT", idat, idat_n / 2);
	chunk(&w, "IDAT", idat + idat_n / 2, idat_n - idat_n / 2);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, 0, 0, "split IDAT");

	start(&w);
	chunk(&w, "tEXt", "Comment\0hi", 10);
	ihdr(&w, FX_W, FX_H, 8, 2);
	chunk(&w, "IDAT", idat, idat_n);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, IMS_ECORRUPT, IMS_ECORRUPT, "IHDR not first");

	start(&w);
	ihdr(&w, FX_W, FX_H, 8, 2);
	chunk(&w, "IDAT", idat, idat_n);
	expect(&w, IMS_ECORRUPT, IMS_ECORRUPT, "no IEND");

	start(&w);
	ihdr(&w, FX_W, FX_H, 4, 2);
	chunk(&w, "IDAT", idat, idat_n);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, IMS_ECORRUPT, IMS_ECORRUPT, "RGB at 4 bits");

	start(&w);
	ihdr(&w, 0, FX_H, 8, 2);
	chunk(&w, "IDAT", idat, idat_n);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, IMS_ECORRUPT, IMS_ECORRUPT, "zero width");

	start(&w);
	ihdr(&w, 40000, 10, 8, 2);
	chunk(&w, "IDAT", idat, idat_n);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, IMS_ELIMIT, IMS_ELIMIT, "40000 wide");

	start(&w);
	ihdr(&w, 20000, 20000, 8, 2); /* sides fine, 400M pixels not */
	chunk(&w, "IDAT", idat, idat_n);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, IMS_ELIMIT, IMS_ELIMIT, "400M pixels");

	start(&w);
	ihdr(&w, FX_W, FX_H, 8, 2);
	chunk(&w, "ABCD", "x", 1);
	chunk(&w, "IDAT", idat, idat_n);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, IMS_EUNSUPPORTED, IMS_EUNSUPPORTED, "unknown critical chunk");

	start(&w);
	ihdr(&w, FX_W, FX_H, 8, 3);
	chunk(&w, "IDAT", idat, idat_n);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, IMS_ECORRUPT, IMS_ECORRUPT, "palette without PLTE");

	start(&w);
	ihdr(&w, FX_W, FX_H, 8, 2);
	be32w(w.p + w.n, 0xFFFFFFF0u);
	memcpy(w.p + w.n + 4, "IDAT", 4);
	w.n += 8;
	expect(&w, IMS_ECORRUPT, IMS_ECORRUPT, "chunk length 0xFFFFFFF0");

	start(&w);
	ihdr(&w, FX_W, FX_H, 8, 2);
	chunk(&w, "ID\x01T", idat, idat_n);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, IMS_ECORRUPT, IMS_ECORRUPT, "chunk type not letters");

	/* Damaged zlib data under a correct CRC: only inflating finds it. */
	uint8_t bad[4096];
	memcpy(bad, idat, idat_n);
	for (uint32_t i = 2; i < idat_n - 4; i += 7)
		bad[i] ^= 0x5A;
	start(&w);
	ihdr(&w, FX_W, FX_H, 8, 2);
	chunk(&w, "IDAT", bad, idat_n);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, 0, IMS_ECORRUPT, "damaged deflate stream");

	/* A zlib stream cut short, CRC correct. */
	start(&w);
	ihdr(&w, FX_W, FX_H, 8, 2);
	chunk(&w, "IDAT", idat, idat_n / 2);
	chunk(&w, "IEND", NULL, 0);
	expect(&w, 0, IMS_ECORRUPT, "short deflate stream");
}

static void check_bad(const char *name, int code)
{
	size_t len;
	uint8_t *buf = load(dir, name, &len);
	pngw w;
	CHECK(len <= sizeof(w.p));
	memcpy(w.p, buf, len);
	w.n = len;
	expect(&w, code, code, name);
	free(buf);
}

static void test_damage(void)
{
	check_bad("truncated.png", IMS_ECORRUPT);
	check_bad("badcrc.png", IMS_ECORRUPT);
	check_bad("huge.png", IMS_ELIMIT);
	ims_error_clear(&err);
	size_t len;
	uint8_t *buf = load(dir, "badcrc.png", &len);
	CHECK(aug_probe(codec, buf, len, NULL, &err) == IMS_ECORRUPT);
	CHECK(strstr(err.msg, "CRC") != NULL);
	free(buf);
	buf = load(dir, "huge.png", &len);
	CHECK(aug_probe(codec, buf, len, NULL, &err) == IMS_ELIMIT);
	CHECK(strstr(err.msg, "100000x100000") != NULL);
	free(buf);
}

/* ---- encode ------------------------------------------------------------ */

static void test_encode(void)
{
	aug_image src = {0}, back = {0};
	ims_buf out = {0};
	aug_image_info info;
	for (int ch = 1; ch <= 4; ch++) {
		CHECK_OK(aug_image_alloc(&src, 37, 23, ch, &err), &err);
		for (int y = 0; y < 23; y++)
			for (int i = 0; i < 37 * ch; i++)
				src.pixels[y * src.stride + i] = (uint8_t)(i * 7 + y * 13 + ch);
		CHECK_OK(aug_encode_png(codec, &src, &out, &err), &err);
		CHECK(out.len > 8 && out.len <= out.cap);
		CHECK_OK(aug_probe(codec, out.data, out.len, &info, &err), &err);
		CHECK_EQ_INT(info.width, 37);
		CHECK_EQ_INT(info.height, 23);
		CHECK_EQ_INT(info.has_alpha, ch == 2 || ch == 4);
		if (ch == 2)
			continue; /* grey+alpha decodes composited */
		CHECK_OK(aug_decode(codec, out.data, out.len, &native_opts, &back,
				    NULL, &err), &err);
		CHECK(image_equal(&src, &back));
	}
	/* Encoding replaces the previous contents, and a NULL codec works
	 * (libpng keeps no state between images). */
	size_t prev = out.len;
	CHECK_OK(aug_encode_png(NULL, &src, &out, &err), &err);
	CHECK_EQ_INT(out.len, prev);
	/* Bigger image: buffer grows past the first guess. */
	CHECK_OK(aug_image_alloc(&src, 300, 200, 3, &err), &err);
	uint64_t x = 1;
	for (size_t i = 0; i < src.capacity; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		src.pixels[i] = (uint8_t)(x >> 56);
	}
	CHECK_OK(aug_encode_png(codec, &src, &out, &err), &err);
	CHECK(out.len > src.capacity / 2); /* noise does not compress */
	CHECK_OK(aug_decode(codec, out.data, out.len, &native_opts, &back, NULL,
			    &err), &err);
	CHECK(image_equal(&src, &back));

	CHECK_EQ_INT(aug_encode_png(codec, NULL, &out, &err), IMS_EINVAL);
	aug_image_release(&src);
	aug_image_release(&back);
	ims_buf_release(&out);
	ims_buf_release(&out);
}

int main(void)
{
	dir = fixtures_dir("aug-png");
	CHECK_OK(aug_codec_create(&codec, &err), &err);
	if (!codec)
		return TEST_EXIT();
	test_layouts();
	test_exif();
	test_structure();
	test_damage();
	test_encode();
	aug_codec_destroy(codec);
	if (!test_failures_)
		test_rm_tree(dir);
	return TEST_EXIT();
}
