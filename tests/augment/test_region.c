/* test_region.c - aug_decode_region: the same pixels as aug_decode for the
 * part it decodes, at each DCT scale, and the position it reports. */
#include "aug_test_util.h"
#include "test.h"

/* aug_decode's upright decode at the factor the region decode picks for
 * max_scale: min_width/min_height of ceil(size / s). *d receives the
 * factor used (1 for PNG). */
static int ref_decode(aug_codec *c, const uint8_t *buf, size_t len,
		      aug_channels ch, int s, aug_image *ref, int *d,
		      ims_error *err)
{
	aug_image_info info;
	int rc = aug_probe(c, buf, len, &info, err);
	if (rc)
		return rc;
	aug_decode_opts o = {ch, 0, 0, 1};
	if (s > 1 && info.format == AUG_FORMAT_JPEG) {
		o.min_width = (info.upright_width + s - 1) / s;
		o.min_height = (info.upright_height + s - 1) / s;
	}
	rc = aug_decode(c, buf, len, &o, ref, &info, err);
	if (rc)
		return rc;
	/* Every fixture's sides are multiples of 8 or orientation 1, so the
	 * decoded grid starts at 0 and the factor is the size ratio. */
	*d = 1;
	while (*d < 8 && ((info.upright_width + *d - 1) / *d != ref->width ||
			  (info.upright_height + *d - 1) / *d != ref->height))
		*d *= 2;
	return 0;
}

static int floor_div(int a, int b)
{
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* Region decode of r (NULL = whole) at max_scale equals the matching part
 * of ref (decoded at factor d); got is exact. Returns 1 when equal. */
static int check_rect(aug_codec *c, const uint8_t *buf, size_t len,
		      aug_channels ch, const aug_rect *r, double max_scale,
		      const aug_image *ref, int d, int uw, int uh,
		      const char *what)
{
	ims_error err = {0};
	aug_image out = {0};
	aug_region got = {-1, -1, -1};
	aug_image_info info;
	int rc = aug_decode_region(c, buf, len, ch, r, max_scale, &out, &got,
				   &info, &err);
	int ok = rc == 0;
	aug_rect k = r ? *r : (aug_rect){0, 0, uw, uh};
	if (k.x0 < 0) k.x0 = 0;
	if (k.y0 < 0) k.y0 = 0;
	if (k.x1 > uw) k.x1 = uw;
	if (k.y1 > uh) k.y1 = uh;
	int u0 = floor_div(k.x0, d), v0 = floor_div(k.y0, d);
	int u1 = (k.x1 + d - 1) / d, v1 = (k.y1 + d - 1) / d;
	if (u1 > ref->width) u1 = ref->width;
	if (v1 > ref->height) v1 = ref->height;
	if (ok) {
		ok = got.scale == d && got.x0 == (double)u0 * d &&
		     got.y0 == (double)v0 * d && out.width == u1 - u0 &&
		     out.height == v1 - v0 && out.channels == ref->channels &&
		     info.upright_width == uw && info.upright_height == uh;
	}
	for (int y = 0; ok && y < out.height; y++)
		ok = memcmp(out.pixels + (size_t)y * out.stride,
			    px(ref, u0, v0 + y),
			    (size_t)out.width * out.channels) == 0;
	if (!ok)
		fprintf(stderr,
			"  %s ch=%d rect [%d,%d)x[%d,%d) max_scale %g: rc %d (%s) "
			"got %gx(%g,%g) %dx%d, want %dx(%d,%d) %dx%d\n",
			what, (int)ch, k.x0, k.x1, k.y0, k.y1, max_scale, rc,
			err.msg, got.scale, got.x0, got.y0, out.width, out.height,
			d, u0 * d, v0 * d, u1 - u0, v1 - v0);
	aug_image_release(&out);
	return ok;
}

static uint32_t rng_state = 12345u;
static uint32_t rnd(void)
{
	rng_state = rng_state * 1664525u + 1013904223u;
	return rng_state >> 8;
}

/* Fixed rectangles (unaligned, edges, partly outside, single pixels)
 * plus `nrand` random ones, at each scale, both channel layouts. */
static void check_file(aug_codec *c, const char *dir, const char *name,
		       int nrand)
{
	static const double scales[] = {1.0, 1.9, 2.0, 3.3, 4.0, 7.9, 8.0, 50.0};
	size_t len;
	uint8_t *buf = load(dir, name, &len);
	ims_error err = {0};
	aug_image_info info;
	CHECK_OK(aug_probe(c, buf, len, &info, &err), &err);
	int W = info.upright_width, H = info.upright_height;
	const aug_rect fixed[] = {
		{0, 0, W, H}, {1, 1, W - 1, H - 1}, {13, 7, 50, 41},
		{17, 3, 18, 4}, {W / 2 - 3, 0, W, H}, {0, H - 14, 30, H},
		{31, 33, 65, 47}, {W - 1, H - 1, W, H}, {-5, -5, 20, 20},
		{W - 20, H - 9, W + 100, H + 100}, {8, 8, 16, 16},
		{15, 9, 17, 63}, {0, 0, 1, H}, {W - 9, 0, W - 7, 5},
	};
	const int nfixed = (int)(sizeof(fixed) / sizeof(fixed[0]));
	for (int ci = 0; ci < 2; ci++) {
		aug_channels ch = ci ? AUG_CHANNELS_NATIVE : AUG_CHANNELS_RGB;
		for (size_t si = 0; si < sizeof(scales) / sizeof(scales[0]); si++) {
			int s = scales[si] >= 8 ? 8 : scales[si] >= 4 ? 4
				: scales[si] >= 2 ? 2 : 1;
			aug_image ref = {0};
			int d = 1;
			CHECK_OK(ref_decode(c, buf, len, ch, s, &ref, &d, &err), &err);
			int bad = 0;
			bad += !check_rect(c, buf, len, ch, NULL, scales[si], &ref, d,
					   W, H, name);
			for (int i = 0; i < nfixed; i++)
				bad += !check_rect(c, buf, len, ch, &fixed[i],
						   scales[si], &ref, d, W, H, name);
			for (int i = 0; i < nrand; i++) {
				aug_rect r;
				r.x0 = (int)(rnd() % (unsigned)W);
				r.y0 = (int)(rnd() % (unsigned)H);
				r.x1 = r.x0 + 1 + (int)(rnd() % (unsigned)(W - r.x0));
				r.y1 = r.y0 + 1 + (int)(rnd() % (unsigned)(H - r.y0));
				bad += !check_rect(c, buf, len, ch, &r, scales[si], &ref,
						   d, W, H, name);
			}
			CHECK_EQ_INT(bad, 0);
			aug_image_release(&ref);
		}
	}
	free(buf);
}

/* The region decode fails with the code aug_decode gives, for the whole
 * image and for a small rectangle. */
static void check_bad(aug_codec *c, const char *dir, const char *name)
{
	size_t len;
	uint8_t *buf = load(dir, name, &len);
	ims_error e1 = {0}, e2 = {0};
	aug_image a = {0}, b = {0};
	aug_region got;
	int want = aug_decode(c, buf, len, NULL, &a, NULL, &e1);
	CHECK(want < 0);
	int rc = aug_decode_region(c, buf, len, AUG_CHANNELS_RGB, NULL, 1, &b,
				   &got, NULL, &e2);
	if (rc != want)
		fprintf(stderr, "  %s: aug_decode %d (%s), region %d (%s)\n",
			name, want, e1.msg, rc, e2.msg);
	CHECK_EQ_INT(rc, want);
	CHECK(e2.msg[0] != '\0');
	aug_image_release(&a);
	aug_image_release(&b);
	free(buf);
}

static void check_errors(aug_codec *c, const char *dir)
{
	static const char *bad[] = {
		"truncated.jpg", "truncated_eoi.jpg", "jpeg_header_only.jpg",
		"huge.jpg", "empty.jpg", "text.jpg", "garbage.jpg",
		"truncated.png", "badcrc.png", "huge.png",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_bad(c, dir, bad[i]);

	ims_error err = {0};
	aug_image out = {0};
	aug_region got;
	size_t len;
	uint8_t *buf = load(dir, "truncated.jpg", &len);
	/* Cut without EOI: the marker walk sees it whatever the region. */
	aug_rect top = {0, 0, 16, 8};
	CHECK_EQ_INT(aug_decode_region(c, buf, len, AUG_CHANNELS_RGB, &top, 1,
				       &out, &got, NULL, &err), IMS_ECORRUPT);
	free(buf);
	/* Data missing before a well-formed EOI: an error when the rows
	 * decoded or skipped reach the damage (the bottom rows), not for the
	 * top rows, which are intact (documented). */
	buf = load(dir, "truncated_eoi.jpg", &len);
	aug_rect bottom = {10, 56, 40, 64};
	CHECK_EQ_INT(aug_decode_region(c, buf, len, AUG_CHANNELS_RGB, &bottom, 1,
				       &out, &got, NULL, &err), IMS_ECORRUPT);
	CHECK(strstr(err.msg, "JPEG") != NULL);
	CHECK_OK(aug_decode_region(c, buf, len, AUG_CHANNELS_RGB, &top, 1, &out,
				   &got, NULL, &err), &err);
	free(buf);

	buf = load(dir, "rgb.jpg", &len);
	aug_rect empty = {10, 10, 10, 20}, outside = {200, 0, 300, 10};
	CHECK_EQ_INT(aug_decode_region(c, buf, len, AUG_CHANNELS_RGB, &empty, 1,
				       &out, &got, NULL, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_decode_region(c, buf, len, AUG_CHANNELS_RGB, &outside,
				       1, &out, &got, NULL, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_decode_region(c, buf, len, AUG_CHANNELS_RGB, NULL, 1,
				       &out, NULL, NULL, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_decode_region(c, buf, len, (aug_channels)7, NULL, 1,
				       &out, &got, NULL, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_decode_region(NULL, buf, len, AUG_CHANNELS_RGB, NULL, 1,
				       &out, &got, NULL, &err), IMS_EINVAL);
	free(buf);
	buf = load(dir, "rgb.png", &len);
	CHECK_EQ_INT(aug_decode_region(c, buf, len, AUG_CHANNELS_RGB, &outside,
				       1, &out, &got, NULL, &err), IMS_EINVAL);
	free(buf);
	aug_image_release(&out);
}

/* aug_render draws its plan for the size it is given (the loader: the
 * record header's) and refuses an image of another upright size: a
 * header of a smaller size, or one of the image's sides swapped, made it
 * render a corner or a stretched part of the image, without a word. */
static void check_render_size(aug_codec *c, const char *dir)
{
	size_t len;
	uint8_t *buf = load(dir, "exif_6.jpg", &len);
	aug_image_info info;
	ims_error err = {0};
	CHECK_OK(aug_probe(c, buf, len, &info, &err), &err);
	const int w = info.upright_width, h = info.upright_height;
	CHECK(w != h);
	aug_transform_opts t;
	aug_transform_opts_init(&t, 0);
	t.out_w = t.out_h = 16;
	void *dst = malloc(aug_sample_bytes(&t));
	aug_image scratch = {0};
	CHECK_OK(aug_render(c, buf, len, w, h, &t, 1, 0, 0, &scratch, dst, NULL,
			    &err), &err);
	const int sizes[][2] = {{w / 2, h / 2}, {h, w}, {w, h + 1}};
	for (size_t k = 0; k < 3; k++) {
		err.msg[0] = 0;
		CHECK_EQ_INT(aug_render(c, buf, len, sizes[k][0], sizes[k][1], &t, 1,
					0, 0, &scratch, dst, NULL, &err),
			     IMS_ECORRUPT);
		char want[128];
		snprintf(want, sizeof(want),
			 "the image is %dx%d (upright), not the %dx%d its header gives",
			 w, h, sizes[k][0], sizes[k][1]);
		CHECK_EQ_STR(err.msg, want);
	}
	aug_image_release(&scratch);
	free(dst);
	free(buf);
}

/* Random rectangles on damaged copies of big.jpg (cut short, bytes
 * flipped): any status, never a crash (run under ASan in CI). */
static void fuzz_big(aug_codec *c, const char *dir)
{
	size_t len;
	uint8_t *buf = load(dir, "big.jpg", &len);
	uint8_t *copy = malloc(len);
	aug_image out = {0};
	int ok = 0, failed = 0;
	for (int i = 0; i < 120; i++) {
		memcpy(copy, buf, len);
		size_t n = len;
		if (i % 3 != 1)
			n = 2 + rnd() % (len - 2);
		if (i % 3 != 0)
			for (int k = 0; k < 4; k++)
				copy[600 + rnd() % (n > 600 ? n - 600 : 1) % n] ^=
					(uint8_t)(1 + rnd() % 255);
		aug_rect r;
		r.x0 = (int)(rnd() % 1300) - 50;
		r.y0 = (int)(rnd() % 1000) - 50;
		r.x1 = r.x0 + 1 + (int)(rnd() % 700);
		r.y1 = r.y0 + 1 + (int)(rnd() % 700);
		ims_error err = {0};
		aug_region got;
		int rc = aug_decode_region(c, copy, n, AUG_CHANNELS_RGB, &r,
					   (double)(rnd() % 12), &out, &got, NULL,
					   &err);
		CHECK(rc <= 0);
		if (rc == 0) {
			ok++;
			CHECK(out.width > 0 && out.height > 0);
		} else {
			failed++;
			CHECK(err.msg[0] != '\0');
		}
	}
	CHECK(failed > 0);
	printf("fuzz: %d decoded, %d refused\n", ok, failed);
	aug_image_release(&out);
	free(copy);
	free(buf);
}

int main(void)
{
	const char *dir = fixtures_dir("region");
	aug_codec *c = NULL;
	ims_error err = {0};
	CHECK_OK(aug_codec_create(&c, &err), &err);
	if (!c)
		return TEST_EXIT();

	static const char *jpegs[] = {
		"rgb.jpg", "gray.jpg", "cmyk.jpg", "cmyk_adobe.jpg", "ycck.jpg",
		"progressive.jpg", "odd_sampling.jpg", "exif_after_xmp.jpg",
	};
	for (size_t i = 0; i < sizeof(jpegs) / sizeof(jpegs[0]); i++)
		check_file(c, dir, jpegs[i], 40);
	for (int o = 1; o <= 8; o++) {
		char name[32];
		snprintf(name, sizeof(name), "exif_%d.jpg", o);
		check_file(c, dir, name, 10);
	}
	static const char *pngs[] = {
		"rgb.png", "rgba.png", "gray.png", "gray_alpha.png", "palette.png",
		"rgb16.png", "rgb_interlaced.png", "exif_6.png",
	};
	for (size_t i = 0; i < sizeof(pngs) / sizeof(pngs[0]); i++)
		check_file(c, dir, pngs[i], 10);
	check_file(c, dir, "big.jpg", 25);

	check_errors(c, dir);
	check_render_size(c, dir);
	fuzz_big(c, dir);

	aug_codec_destroy(c);
	if (test_failures_ == 0)
		test_rm_tree(dir);
	return TEST_EXIT();
}
