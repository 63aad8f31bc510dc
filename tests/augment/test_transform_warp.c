/* test_transform_warp.c - the bilinear warp of augment/transform.c:
 * geometry, output formats and their rounding, the golden batch and the
 * SIMD rows against the scalar ones, on synthetic images
 * (transform_test.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment/augment.h"
#include "augment/augment_internal.h"
#include "test.h"
#include "transform_test.h"

/* ---- helpers ---------------------------------------------------------- */

static uint8_t px(const aug_image *img, int x, int y, int c)
{
	return img->pixels[(size_t)y * img->stride + (size_t)x * img->channels +
			   c];
}

/* A plan with the base box = whole source and the given extras. */
static aug_plan plain_plan(const aug_transform_opts *o, int sw, int sh,
			   double zoom, double shx, double shy, double angle,
			   int flip)
{
	aug_plan p;
	memset(&p, 0, sizeof(p));
	p.crop_w = sw;
	p.crop_h = sh;
	p.zoom = zoom;
	p.shift_x = shx;
	p.shift_y = shy;
	p.angle = angle;
	p.flip = flip;
	ims_error err;
	CHECK_OK(aug_plan_build(o, sw, sh, &p, &err), &err);
	return p;
}

static aug_transform_opts u8_opts(int w, int h, aug_layout layout)
{
	aug_transform_opts o;
	aug_transform_opts_init(&o, 0);
	o.out_w = w;
	o.out_h = h;
	o.dtype = AUG_DTYPE_U8;
	o.layout = layout;
	return o;
}

/* NHWC u8 output pixel. */
static uint8_t opx(const uint8_t *out, int w, int x, int y, int c)
{
	return out[((size_t)y * w + x) * 3 + c];
}

static uint64_t fnv1a(const void *buf, size_t n)
{
	const uint8_t *b = buf;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* ---- warp geometry ----------------------------------------------------- */

static void test_val_center_crop(void)
{
	ims_error err;
	aug_image src = {0}, crop = {0}, resized = {0};
	aug_transform_opts o;
	aug_transform_opts_init(&o, 0);
	o.dtype = AUG_DTYPE_U8;
	o.layout = AUG_LAYOUT_NHWC;
	uint8_t *out = malloc(aug_sample_bytes(&o));

	/* Shorter side already 256: an exact copy of the centre crop. */
	make_image(&src, 300, 256, 3, pattern);
	aug_plan p;
	CHECK_OK(aug_sample_plan(&o, 300, 256, 0, 0, 0, &p, &err), &err);
	CHECK_NEAR(p.m[0], 1, 0);
	CHECK_NEAR(p.m[2], 38, 0);
	CHECK_NEAR(p.m[5], 16, 0);
	CHECK_OK(aug_warp(&src, &p, &o, out, &err), &err);
	CHECK_OK(aug_crop_center(&src, 224, 224, &crop, &err), &err);
	CHECK_MEM(out, crop.pixels, 224 * 224 * 3);

	/* Enlarging (bilinear in both): matches aug_resize + aug_crop_center
	 * within 1 (aug_resize has 14-bit weights, aug_warp 11-bit). */
	make_image(&src, 150, 200, 3, pattern);
	CHECK_OK(aug_sample_plan(&o, 150, 200, 0, 0, 0, &p, &err), &err);
	CHECK_OK(aug_warp(&src, &p, &o, out, &err), &err);
	int rh = (int)lround(200.0 * 256 / 150); /* 341 */
	CHECK_OK(aug_resize(NULL, &src, 256, rh, &resized, &err), &err);
	CHECK_OK(aug_crop_center(&resized, 224, 224, &crop, &err), &err);
	int maxd = 0;
	for (size_t i = 0; i < 224 * 224 * 3; i++) {
		int d = abs((int)out[i] - (int)crop.pixels[i]);
		maxd = d > maxd ? d : maxd;
	}
	CHECK(maxd <= 1);

	/* Shrinking: the matrix is exactly the centre crop of the 341x256
	 * resize (no antialiasing in the warp, so compare geometry only). */
	CHECK_OK(aug_sample_plan(&o, 500, 375, 0, 0, 0, &p, &err), &err);
	double sx = 500.0 / 341, sy = 375.0 / 256;
	CHECK_NEAR(p.m[0], sx, 1e-12);
	CHECK_NEAR(p.m[4], sy, 1e-12);
	CHECK_NEAR(p.m[1], 0, 0);
	CHECK_NEAR(p.m[3], 0, 0);
	CHECK_NEAR(p.m[2], 58 * sx, 1e-9);
	CHECK_NEAR(p.m[5], 16 * sy, 1e-9);
	CHECK_NEAR(p.scale, fmin(sx, sy), 1e-12);

	free(out);
	aug_image_release(&src);
	aug_image_release(&crop);
	aug_image_release(&resized);
}

static void test_identity_flip_rotate(void)
{
	ims_error err;
	aug_image src = {0};
	const int W = 37, H = 23;
	make_image(&src, W, H, 3, pattern);
	aug_transform_opts o = u8_opts(W, H, AUG_LAYOUT_NHWC);
	uint8_t *out = malloc(aug_sample_bytes(&o));

	aug_plan p = plain_plan(&o, W, H, 1, 0, 0, 0, 0);
	CHECK_OK(aug_warp(&src, &p, &o, out, &err), &err);
	CHECK_MEM(out, src.pixels, (size_t)W * H * 3);
	CHECK_EQ_INT(p.need_x0, 0);
	CHECK_EQ_INT(p.need_x1, W);

	p = plain_plan(&o, W, H, 1, 0, 0, 0, 1);
	CHECK_OK(aug_warp(&src, &p, &o, out, &err), &err);
	int bad = 0;
	for (int y = 0; y < H; y++)
		for (int x = 0; x < W; x++)
			for (int c = 0; c < 3; c++)
				bad += opx(out, W, x, y, c) !=
				       px(&src, W - 1 - x, y, c);
	CHECK_EQ_INT(bad, 0);

	/* Rotation by +90 degrees (counter-clockwise as displayed) of a
	 * square: out(x, y) = src(N-1-y, x), i.e. transpose then flip
	 * vertically. */
	const int N = 32;
	aug_image sq = {0};
	make_image(&sq, N, N, 3, pattern);
	aug_transform_opts os = u8_opts(N, N, AUG_LAYOUT_NHWC);
	free(out);
	out = malloc(aug_sample_bytes(&os));
	p = plain_plan(&os, N, N, 1, 0, 0, 90, 0);
	CHECK_OK(aug_warp(&sq, &p, &os, out, &err), &err);
	int maxd = 0;
	for (int y = 0; y < N; y++)
		for (int x = 0; x < N; x++)
			for (int c = 0; c < 3; c++) {
				int d = abs(opx(out, N, x, y, c) -
					    px(&sq, N - 1 - y, x, c));
				maxd = d > maxd ? d : maxd;
			}
	CHECK(maxd <= 1);

	aug_image_release(&sq);
	aug_image_release(&src);
	free(out);
}

/* Grey image with one white square [x0, x0+n) x [y0, y0+n). */
static void square_image(aug_image *img, int w, int h, int x0, int y0, int n)
{
	ims_error err;
	CHECK_OK(aug_image_alloc(img, w, h, 1, &err), &err);
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			img->pixels[(size_t)y * img->stride + x] =
				(x >= x0 && x < x0 + n && y >= y0 && y < y0 + n)
					? 255
					: 0;
}

/* Bounding box of output pixels >= 128 (channel 0 of NHWC u8). */
static void bright_box(const uint8_t *out, int w, int h, int *bx0, int *by0,
		       int *bx1, int *by1)
{
	*bx0 = *by0 = 1 << 30;
	*bx1 = *by1 = -1;
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			if (opx(out, w, x, y, 0) >= 128) {
				*bx0 = x < *bx0 ? x : *bx0;
				*by0 = y < *by0 ? y : *by0;
				*bx1 = x > *bx1 ? x : *bx1;
				*by1 = y > *by1 ? y : *by1;
			}
}

static void test_shift_zoom(void)
{
	ims_error err;
	aug_image src = {0};
	const int S = 64;
	square_image(&src, S, S, 24, 24, 16);
	aug_transform_opts o = u8_opts(S, S, AUG_LAYOUT_NHWC);
	uint8_t *out = malloc(aug_sample_bytes(&o));
	int x0, y0, x1, y1;

	aug_plan p = plain_plan(&o, S, S, 1, 5, -3, 0, 0);
	CHECK_OK(aug_warp(&src, &p, &o, out, &err), &err);
	bright_box(out, S, S, &x0, &y0, &x1, &y1);
	CHECK_EQ_INT(x0, 29);
	CHECK_EQ_INT(x1, 44);
	CHECK_EQ_INT(y0, 21);
	CHECK_EQ_INT(y1, 36);
	/* grey replicated to all channels */
	CHECK_EQ_INT(opx(out, S, 30, 25, 1), 255);
	CHECK_EQ_INT(opx(out, S, 30, 25, 2), 255);

	p = plain_plan(&o, S, S, 2, 0, 0, 0, 0);
	CHECK_OK(aug_warp(&src, &p, &o, out, &err), &err);
	bright_box(out, S, S, &x0, &y0, &x1, &y1);
	CHECK_NEAR(x1 - x0 + 1, 32, 1);
	CHECK_NEAR(y1 - y0 + 1, 32, 1);
	CHECK_NEAR((x0 + x1) / 2.0, 31.5, 1);

	free(out);
	aug_image_release(&src);
}

/* ---- output formats --------------------------------------------------- */

static void test_formats(void)
{
	ims_error err;
	aug_image src = {0};
	make_image(&src, 120, 90, 3, pattern);
	aug_transform_opts o;
	aug_transform_opts_init(&o, 1);
	o.out_w = 48;
	o.out_h = 40;
	CHECK_OK(aug_transform_parse("flip,zoom=0.2,rotate=20", &o, &err), &err);
	const float mean[3] = {123.675f, 116.28f, 103.53f};
	const float stdv[3] = {58.395f, 57.12f, 57.375f};
	aug_plan p;
	CHECK_OK(aug_sample_plan(&o, 120, 90, 11, 0, 3, &p, &err), &err);
	const int n = 48 * 40;

	o.dtype = AUG_DTYPE_U8;
	o.layout = AUG_LAYOUT_NHWC;
	CHECK_EQ_INT(aug_sample_bytes(&o), n * 3);
	uint8_t *u8 = malloc((size_t)n * 3);
	CHECK_OK(aug_warp(&src, &p, &o, u8, &err), &err);

	o.dtype = AUG_DTYPE_F32;
	o.layout = AUG_LAYOUT_NCHW;
	CHECK_EQ_INT(aug_sample_bytes(&o), n * 3 * 4);
	float *raw = malloc((size_t)n * 3 * 4), *nchw = malloc((size_t)n * 3 * 4),
	      *nhwc = malloc((size_t)n * 3 * 4);
	CHECK_OK(aug_warp(&src, &p, &o, raw, &err), &err);
	memcpy(o.mean, mean, sizeof(mean));
	memcpy(o.std, stdv, sizeof(stdv));
	CHECK_OK(aug_warp(&src, &p, &o, nchw, &err), &err);
	o.layout = AUG_LAYOUT_NHWC;
	CHECK_OK(aug_warp(&src, &p, &o, nhwc, &err), &err);
	o.dtype = AUG_DTYPE_F16;
	uint16_t *f16 = malloc((size_t)n * 3 * 2), *b16 = malloc((size_t)n * 3 * 2);
	CHECK_OK(aug_warp(&src, &p, &o, f16, &err), &err);
	o.dtype = AUG_DTYPE_BF16;
	CHECK_OK(aug_warp(&src, &p, &o, b16, &err), &err);

	int layout_bad = 0, u8_bad = 0, norm_bad = 0, f16_bad = 0, bf16_bad = 0;
	for (int i = 0; i < n; i++)
		for (int c = 0; c < 3; c++) {
			float a = nchw[c * n + i], b = nhwc[i * 3 + c];
			float r = raw[c * n + i];
			layout_bad += a != b;
			u8_bad += fabsf(r - u8[i * 3 + c]) > 0.5f + 1e-4f;
			norm_bad += fabsf(a - (r - mean[c]) / stdv[c]) > 1e-5f;
			float h = ims_f16_to_f32(f16[i * 3 + c]);
			f16_bad += fabsf(h - b) > fabsf(b) * (1.0f / 2048) + 1e-7f;
			float bf = ims_bf16_to_f32(b16[i * 3 + c]);
			bf16_bad += fabsf(bf - b) > fabsf(b) * (1.0f / 256) + 1e-30f;
		}
	CHECK_EQ_INT(layout_bad, 0);
	CHECK_EQ_INT(u8_bad, 0);
	CHECK_EQ_INT(norm_bad, 0);
	CHECK_EQ_INT(f16_bad, 0);
	CHECK_EQ_INT(bf16_bad, 0);

	/* Raw floats are interpolated pixels in 0..255, not a constant. */
	float lo = 1e9f, hi = -1e9f;
	for (int i = 0; i < n * 3; i++) {
		lo = fminf(lo, raw[i]);
		hi = fmaxf(hi, raw[i]);
	}
	CHECK(lo >= 0 && hi <= 255 && hi - lo > 100);

	/* Bad arguments. */
	aug_image grey2 = {0};
	CHECK_OK(aug_image_alloc(&grey2, 4, 4, 2, &err), &err);
	CHECK_EQ_INT(aug_warp(&grey2, &p, &o, f16, &err), IMS_EINVAL);
	o.std[1] = 0;
	CHECK_EQ_INT(aug_warp(&src, &p, &o, f16, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_sample_bytes(&o), 0);
	aug_image_release(&grey2);

	free(u8);
	free(raw);
	free(nchw);
	free(nhwc);
	free(f16);
	free(b16);
	aug_image_release(&src);
}

static void test_half_conversions(void)
{
	/* Through aug_warp on a 1x1 grey image: (v - mean) * (1 / std) is
	 * exact in float for these, then rounded to f16 / bf16. */
	ims_error err;
	aug_image src = {0};
	CHECK_OK(aug_image_alloc(&src, 1, 1, 1, &err), &err);
	aug_transform_opts o = u8_opts(1, 1, AUG_LAYOUT_NCHW);
	aug_plan p = plain_plan(&o, 1, 1, 1, 0, 0, 0, 0);
	static const struct {
		uint8_t v;
		float mean, std;
		uint16_t f16, bf16;
	} cases[] = {
		/* expected bits from Python's struct 'e' (round half even) */
		{0, 0, 1, 0x0000, 0x0000},
		{255, 0, 1, 0x5bf8, 0x437f},
		{0, 1, 1, 0xbc00, 0xbf80},
		{255, 0, 0.001f, 0x7c00, 0x4879},   /* f16 overflow */
		{1, 0, 65536.0f, 0x0100, 0x3780},   /* f16 subnormal */
		{1, -0.00048828125f, 1, 0x3c00, 0x3f80}, /* tie to even: down */
		{1, -0.00146484375f, 1, 0x3c02, 0x3f80}, /* tie to even: up */
		{1, -0.00390625f, 1, 0x3c04, 0x3f80},    /* bf16 tie: down */
		{1, -0.01171875f, 1, 0x3c0c, 0x3f82},    /* bf16 tie: up */
		{0, -65519.0f, 1, 0x7bff, 0x4780},  /* largest below inf */
		{0, -65520.0f, 1, 0x7c00, 0x4780},  /* tie rounds to inf */
		{1, 0, 33554432.0f, 0x0000, 0x3300}, /* 2^-25: tie to 0 */
		{1, 0, 16777216.0f, 0x0001, 0x3380}, /* 2^-24 */
	};
	uint16_t out[3];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		src.pixels[0] = cases[i].v;
		for (int c = 0; c < 3; c++) {
			o.mean[c] = cases[i].mean;
			o.std[c] = cases[i].std;
		}
		o.dtype = AUG_DTYPE_F16;
		CHECK_OK(aug_warp(&src, &p, &o, out, &err), &err);
		CHECK_EQ_INT(out[0], cases[i].f16);
		CHECK_EQ_INT(out[2], cases[i].f16);
		o.dtype = AUG_DTYPE_BF16;
		CHECK_OK(aug_warp(&src, &p, &o, out, &err), &err);
		CHECK_EQ_INT(out[0], cases[i].bf16);
	}
	aug_image_release(&src);
}

/* ---- golden batch ------------------------------------------------------- */

static void test_golden(void)
{
	/* A fixed-seed batch of 4 augmented samples. The hash changes only
	 * when the transform's maths changes (sampling, composition,
	 * interpolation, rounding), which must be on purpose: update it then
	 * and say so in the commit. */
	ims_error err;
	aug_image src = {0};
	make_image(&src, 160, 120, 3, pattern);
	aug_transform_opts o;
	aug_transform_opts_init(&o, 1);
	o.out_w = 64;
	o.out_h = 48;
	CHECK_OK(aug_transform_parse("flip,zoom=0.2,shift=0.1,rotate=15", &o,
				     &err),
		 &err);
	const float mean[3] = {123.675f, 116.28f, 103.53f};
	const float stdv[3] = {58.395f, 57.12f, 57.375f};
	memcpy(o.mean, mean, sizeof(mean));
	memcpy(o.std, stdv, sizeof(stdv));
	size_t one = aug_sample_bytes(&o);
	uint8_t *batch = malloc(4 * one);
	for (int i = 0; i < 4; i++) {
		aug_plan p;
		CHECK_OK(aug_sample_plan(&o, 160, 120, 1234, 2, (uint64_t)(100 + i),
					 &p, &err),
			 &err);
		CHECK_OK(aug_warp(&src, &p, &o, batch + i * one, &err), &err);
	}
	uint64_t h = fnv1a(batch, 4 * one);
	o.dtype = AUG_DTYPE_U8;
	/* u8 with a normalisation is refused, not ignored */
	aug_plan refused;
	CHECK_EQ_INT(aug_sample_plan(&o, 160, 120, 1234, 2, 100, &refused, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "u8 samples are the pixels as they are") != NULL);
	for (int c = 0; c < 3; c++) {
		o.mean[c] = 0;
		o.std[c] = 1;
	}
	one = aug_sample_bytes(&o);
	for (int i = 0; i < 4; i++) {
		aug_plan p;
		CHECK_OK(aug_sample_plan(&o, 160, 120, 1234, 2, (uint64_t)(100 + i),
					 &p, &err),
			 &err);
		CHECK_OK(aug_warp(&src, &p, &o, batch + i * one, &err), &err);
	}
	uint64_t h8 = fnv1a(batch, 4 * one);
	CHECK_EQ_U64(h, 0x6d21ff843c26bb8eull);
	CHECK_EQ_U64(h8, 0x697c44e3efaf5043ull);
	free(batch);
	aug_image_release(&src);
}

/* ---- SIMD row kernel ---------------------------------------------------- */

static void test_simd_equals_scalar(void)
{
	/* The AVX2 rows must give the scalar rows' bytes: random plans over
	 * sources of every channel count, odd widths (row tails), crops that
	 * reach the edges (clamped rows stay scalar) and big zooms. */
	ims_error err;
	static const int sizes[][2] = {{160, 120}, {37, 301}, {513, 9}, {9, 9}};
	int rows_differ = 0, cases = 0;
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
		for (int ch = 1; ch <= 4; ch++) {
			if (ch == 2)
				continue;
			aug_image src = {0};
			make_image(&src, sizes[si][0], sizes[si][1], ch, pattern);
			for (int k = 0; k < 24; k++) {
				aug_transform_opts o;
				aug_transform_opts_init(&o, 1);
				o.out_w = 8 + 13 * k % 70;
				o.out_h = 5 + k % 7;
				o.dtype = AUG_DTYPE_U8;
				o.layout = k & 1 ? AUG_LAYOUT_NHWC : AUG_LAYOUT_NCHW;
				CHECK_OK(aug_transform_parse(
						 k % 3 ? "flip,zoom=0.5,shift=0.3,rotate=30"
						       : "flip",
						 &o, &err),
					 &err);
				aug_plan p;
				CHECK_OK(aug_sample_plan(&o, src.width, src.height, 7,
							 si, (uint64_t)k, &p, &err),
					 &err);
				size_t n = aug_sample_bytes(&o);
				uint8_t *a = malloc(n), *b = malloc(n);
				CHECK_OK(aug_warp_impl(&src, &p, &o, a, 0, &err), &err);
				CHECK_OK(aug_warp_impl(&src, &p, &o, b, 1, &err), &err);
				rows_differ += memcmp(a, b, n) != 0;
				cases++;
				free(a);
				free(b);
			}
			aug_image_release(&src);
		}
	CHECK_EQ_INT(rows_differ, 0);
	CHECK_EQ_INT(cases, 4 * 3 * 24);
}

int main(void)
{
	test_val_center_crop();
	test_identity_flip_rotate();
	test_shift_zoom();
	test_formats();
	test_half_conversions();
	test_golden();
	test_simd_equals_scalar();
	return TEST_EXIT();
}
