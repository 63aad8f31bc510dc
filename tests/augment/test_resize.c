/* test_resize.c - the antialiased resampler: constants stay constant,
 * same size is a copy, checkerboards shrink to grey, results match a
 * double-precision reference of the same filter, and nothing depends on
 * the codec's cached tables or on call order. */
#include "augment/augment_internal.h"
#include "aug_test_util.h"
#include "test.h"

static ims_error err;

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint8_t rnd8(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint8_t)(rng >> 32);
}

static void fill_random(aug_image *img, int w, int h, int ch)
{
	aug_image_alloc(img, w, h, ch, NULL);
	for (size_t i = 0; i < (size_t)w * h * ch; i++)
		img->pixels[i] = rnd8();
}

/* Weight of input j for output i along an axis in -> out, straight from
 * the definition: tent of radius max(in/out, 1) around (i + 0.5) in/out. */
static double ref_weight(int in, int out, int i, int j)
{
	double scale = (double)in / out, fs = scale > 1 ? scale : 1;
	double t = fabs((j + 0.5 - (i + 0.5) * scale) / fs);
	return t < 1 ? 1 - t : 0;
}

/* Max and mean absolute difference from the reference. */
static void compare_ref(const aug_image *src, const aug_image *dst,
			double *max_diff, double *mean_diff)
{
	int sw = src->width, sh = src->height, dw = dst->width, dh = dst->height;
	int ch = src->channels;
	double *wx = calloc((size_t)dw * sw, sizeof(double));
	double *wy = calloc((size_t)dh * sh, sizeof(double));
	for (int i = 0; i < dw; i++) {
		double t = 0;
		for (int j = 0; j < sw; j++)
			t += wx[(size_t)i * sw + j] = ref_weight(sw, dw, i, j);
		for (int j = 0; j < sw; j++)
			wx[(size_t)i * sw + j] /= t;
	}
	for (int i = 0; i < dh; i++) {
		double t = 0;
		for (int j = 0; j < sh; j++)
			t += wy[(size_t)i * sh + j] = ref_weight(sh, dh, i, j);
		for (int j = 0; j < sh; j++)
			wy[(size_t)i * sh + j] /= t;
	}
	/* Same-size axes are copies in the implementation; the weights
	 * above are then the identity as well. */
	double *h = calloc((size_t)dw * sh * ch, sizeof(double));
	for (int y = 0; y < sh; y++)
		for (int x = 0; x < dw; x++)
			for (int c = 0; c < ch; c++) {
				double v = 0;
				for (int j = 0; j < sw; j++)
					v += wx[(size_t)x * sw + j] * px(src, j, y)[c];
				h[((size_t)y * dw + x) * ch + c] = v;
			}
	double mx = 0, sum = 0;
	for (int y = 0; y < dh; y++)
		for (int x = 0; x < dw; x++)
			for (int c = 0; c < ch; c++) {
				double v = 0;
				for (int j = 0; j < sh; j++)
					v += wy[(size_t)y * sh + j] *
					     h[((size_t)j * dw + x) * ch + c];
				double d = fabs(v - px(dst, x, y)[c]);
				mx = d > mx ? d : mx;
				sum += d;
			}
	*max_diff = mx;
	*mean_diff = sum / ((double)dw * dh * ch);
	free(wx);
	free(wy);
	free(h);
}

static void test_reference(aug_codec *c)
{
	static const int cases[][5] = {
		{500, 375, 341, 256, 3}, /* the ImageNet resize */
		{96, 64, 24, 16, 3},     /* exact 1/4 */
		{97, 61, 30, 19, 1},     /* odd factors */
		{40, 30, 100, 77, 3},    /* enlarge: bilinear */
		{40, 30, 17, 90, 4},     /* shrink x, enlarge y */
		{33, 20, 33, 7, 2},      /* vertical only */
		{33, 20, 9, 20, 3},      /* horizontal only */
		{300, 5, 1, 1, 3},       /* everything into one pixel */
		{1, 1, 9, 4, 1},         /* one pixel everywhere */
	};
	aug_image src = {0}, dst = {0};
	for (size_t k = 0; k < sizeof(cases) / sizeof(*cases); k++) {
		const int *t = cases[k];
		/* Smooth content (the pattern) and noise. */
		for (int noise = 0; noise <= 1; noise++) {
			if (noise) {
				fill_random(&src, t[0], t[1], t[4]);
			} else {
				aug_image_alloc(&src, t[0], t[1], t[4], NULL);
				for (int y = 0; y < t[1]; y++)
					for (int x = 0; x < t[0]; x++) {
						uint8_t rgb[3];
						fx_pattern(x, y, t[0], t[1], rgb);
						for (int ch = 0; ch < t[4]; ch++)
							px(&src, x, y)[ch] = rgb[ch % 3];
					}
			}
			CHECK_OK(aug_resize(c, &src, t[2], t[3], &dst, &err), &err);
			CHECK_EQ_INT(dst.width, t[2]);
			CHECK_EQ_INT(dst.height, t[3]);
			CHECK_EQ_INT(dst.channels, t[4]);
			double mx, mean;
			compare_ref(&src, &dst, &mx, &mean);
			/* 14-bit weights and a uint8 intermediate: within 1.5
			 * levels of the exact filter, and below 0.5 on average. */
			if (mx > 1.5 || mean > 0.5)
				fprintf(stderr, "%dx%d->%dx%d x%d noise=%d: max %.3f mean %.3f\n",
					t[0], t[1], t[2], t[3], t[4], noise, mx, mean);
			CHECK(mx <= 1.5);
			CHECK(mean <= 0.5);
		}
	}
	aug_image_release(&src);
	aug_image_release(&dst);
}

static void test_constant(aug_codec *c)
{
	static const int sizes[][4] = {{37, 23, 10, 7}, {37, 23, 80, 50},
				       {37, 23, 37, 5}, {1, 1, 5, 3},
				       {50, 1, 7, 1},   {8, 8, 3, 3}};
	static const int values[] = {0, 1, 128, 254, 255};
	aug_image src = {0}, dst = {0};
	for (int ch = 1; ch <= 4; ch++)
		for (size_t s = 0; s < 6; s++)
			for (size_t v = 0; v < 5; v++) {
				aug_image_alloc(&src, sizes[s][0], sizes[s][1], ch, NULL);
				memset(src.pixels, values[v], src.stride * src.height);
				CHECK_OK(aug_resize(c, &src, sizes[s][2], sizes[s][3],
						    &dst, &err), &err);
				int bad = 0;
				for (size_t i = 0; i < dst.stride * dst.height; i++)
					bad += dst.pixels[i] != values[v];
				CHECK_EQ_INT(bad, 0);
			}
	aug_image_release(&src);
	aug_image_release(&dst);
}

static void test_identity(aug_codec *c)
{
	aug_image src = {0}, dst = {0};
	for (int ch = 1; ch <= 4; ch++) {
		fill_random(&src, 61, 17, ch);
		CHECK_OK(aug_resize(c, &src, 61, 17, &dst, &err), &err);
		CHECK(image_equal(&src, &dst));
	}
	/* A source whose stride is wider than its rows. */
	aug_image wide = {0};
	fill_random(&wide, 80, 17, 3);
	wide.width = 61;
	CHECK_OK(aug_resize(c, &wide, 61, 17, &dst, &err), &err);
	CHECK_EQ_INT(dst.stride, 61 * 3);
	CHECK(image_equal(&wide, &dst));
	CHECK_OK(aug_resize(c, &wide, 30, 17, &dst, &err), &err);
	aug_image narrow = {0};
	aug_image_alloc(&narrow, 61, 17, 3, NULL);
	for (int y = 0; y < 17; y++)
		memcpy(px(&narrow, 0, y), px(&wide, 0, y), 61 * 3);
	aug_image ref = {0};
	CHECK_OK(aug_resize(c, &narrow, 30, 17, &ref, &err), &err);
	CHECK(image_equal(&ref, &dst));
	aug_image_release(&wide);
	aug_image_release(&narrow);
	aug_image_release(&ref);
	aug_image_release(&src);
	aug_image_release(&dst);
}

static void test_checkerboard(aug_codec *c)
{
	/* 1-pixel cells: point sampling would give black or white; a filter
	 * that averages what it covers gives mid-grey. */
	aug_image src = {0}, dst = {0};
	aug_image_alloc(&src, 64, 64, 1, NULL);
	for (int y = 0; y < 64; y++)
		for (int x = 0; x < 64; x++)
			*px(&src, x, y) = ((x + y) & 1) ? 255 : 0;
	static const int sizes[][2] = {{16, 16}, {21, 13}, {32, 32}, {8, 5}};
	for (size_t s = 0; s < 4; s++) {
		CHECK_OK(aug_resize(c, &src, sizes[s][0], sizes[s][1], &dst, &err),
			 &err);
		double sum = 0;
		int lo = 255, hi = 0;
		for (int y = 0; y < dst.height; y++)
			for (int x = 0; x < dst.width; x++) {
				int v = *px(&dst, x, y);
				sum += v;
				lo = v < lo ? v : lo;
				hi = v > hi ? v : hi;
			}
		double mean = sum / (dst.width * dst.height);
		if (lo < 100 || hi > 155)
			fprintf(stderr, "checkerboard -> %dx%d: %d..%d, mean %.2f\n",
				dst.width, dst.height, lo, hi, mean);
		CHECK_NEAR(mean, 127.5, 3);
		CHECK(lo >= 100 && hi <= 155);
	}
	aug_image_release(&src);
	aug_image_release(&dst);
}

static void test_determinism(aug_codec *c)
{
	aug_image src = {0}, a = {0}, b = {0}, other = {0};
	fill_random(&src, 123, 77, 3);
	CHECK_OK(aug_resize(c, &src, 50, 31, &a, &err), &err);
	/* Other sizes in between rebuild the cached tables. */
	CHECK_OK(aug_resize(c, &src, 200, 10, &other, &err), &err);
	CHECK_OK(aug_resize(c, &src, 50, 31, &b, &err), &err);
	CHECK(image_equal(&a, &b));
	/* No codec: scratch for the call only, same result. */
	CHECK_OK(aug_resize(NULL, &src, 50, 31, &b, &err), &err);
	CHECK(image_equal(&a, &b));
	aug_codec *c2;
	CHECK_OK(aug_codec_create(&c2, &err), &err);
	CHECK_OK(aug_resize(c2, &src, 50, 31, &b, &err), &err);
	CHECK(image_equal(&a, &b));
	aug_codec_destroy(c2);
	/* dst's buffer is reused when large enough. */
	uint8_t *p = b.pixels;
	CHECK_OK(aug_resize(c, &src, 20, 20, &b, &err), &err);
	CHECK(b.pixels == p);
	aug_image_release(&src);
	aug_image_release(&a);
	aug_image_release(&b);
	aug_image_release(&other);
}

static void test_errors(aug_codec *c)
{
	aug_image src = {0}, dst = {0};
	fill_random(&src, 10, 10, 3);
	CHECK_EQ_INT(aug_resize(c, &src, 0, 5, &dst, &err), IMS_EINVAL);
	CHECK(err.msg[0] != '\0');
	CHECK_EQ_INT(aug_resize(c, &src, 5, -1, &dst, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_resize(c, &src, 5, 5, &src, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_resize(c, NULL, 5, 5, &dst, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_resize(c, &src, 40000, 5, &dst, &err), IMS_ELIMIT);
	aug_image empty = {0};
	CHECK_EQ_INT(aug_resize(c, &empty, 5, 5, &dst, &err), IMS_EINVAL);
	aug_image_release(&src);
	aug_image_release(&dst);
}

int main(void)
{
	aug_codec *c;
	CHECK_OK(aug_codec_create(&c, &err), &err);
	if (!c)
		return TEST_EXIT();
	test_reference(c);
	test_constant(c);
	test_identity(c);
	test_checkerboard(c);
	test_determinism(c);
	test_errors(c);
	aug_codec_destroy(c);
	return TEST_EXIT();
}
