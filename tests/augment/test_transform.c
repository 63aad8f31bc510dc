/* test_transform.c - the option string and the plans of
 * augment/transform.c: plans drawn from (seed, epoch, index), crop
 * statistics, and what a plan promises the warp (a rebase onto a decoded
 * region, the need box). The warp itself: test_transform_warp.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment/augment.h"
#include "augment/augment_internal.h"
#include "test.h"
#include "transform_test.h"

/* ---- helpers ---------------------------------------------------------- */

/* Smooth pattern (slow gradients), for comparisons across resampling. */
static uint8_t smooth(int x, int y, int c)
{
	double v = 128 + 100 * sin(x * 0.031 + c) * cos(y * 0.023 - c);
	return (uint8_t)lround(v);
}

/* ---- option string ---------------------------------------------------- */

static void test_parse(void)
{
	ims_error err;
	aug_transform_opts o;
	aug_transform_opts_init(&o, 1);
	CHECK_EQ_INT(o.out_w, 224);
	CHECK_EQ_INT(o.rrc, 1);
	CHECK_EQ_INT(o.flip, 0);
	CHECK_OK(aug_transform_parse("flip,zoom=0.2,shift=0.2,rotate=5", &o,
				     &err),
		 &err);
	CHECK_EQ_INT(o.flip, 1);
	CHECK_NEAR(o.zoom, 0.2, 0);
	CHECK_NEAR(o.shift, 0.2, 0);
	CHECK_NEAR(o.rotate, 5, 0);
	CHECK_OK(aug_transform_parse("rrc=0.25:0.9,ratio=0.5:2,noflip", &o,
				     &err),
		 &err);
	CHECK_EQ_INT(o.rrc, 1);
	CHECK_NEAR(o.scale_min, 0.25, 0);
	CHECK_NEAR(o.scale_max, 0.9, 0);
	CHECK_NEAR(o.ratio_min, 0.5, 0);
	CHECK_NEAR(o.ratio_max, 2, 0);
	CHECK_EQ_INT(o.flip, 0);
	CHECK_OK(aug_transform_parse("none", &o, &err), &err);
	CHECK(!o.rrc && !o.flip && o.zoom == 0 && o.shift == 0 &&
	      o.rotate == 0);
	CHECK_OK(aug_transform_parse("rrc", &o, &err), &err);
	CHECK_EQ_INT(o.rrc, 1);
	CHECK_NEAR(o.scale_min, 0.25, 0); /* ranges kept */
	CHECK_OK(aug_transform_parse("norrc", &o, &err), &err);
	CHECK_EQ_INT(o.rrc, 0);
	CHECK_OK(aug_transform_parse("", &o, &err), &err);
	CHECK_OK(aug_transform_parse(NULL, &o, &err), &err);

	/* Each bad token is named in the message. */
	static const struct {
		const char *spec, *named;
	} bad[] = {
		{"flip,bogus", "'bogus'"},
		{"zoom=1.5", "'zoom=1.5'"},
		{"zoom=", "'zoom='"},
		{"zoom", "'zoom'"},
		{"shift=-0.1", "'shift=-0.1'"},
		{"shift=0.2x", "'shift=0.2x'"},
		{"rotate=200", "'rotate=200'"},
		{"rotate=nan", "'rotate=nan'"},
		{"rrc=0.5", "'rrc=0.5'"},
		{"rrc=0.9:0.5", "'rrc=0.9:0.5'"},
		{"rrc=0:1", "'rrc=0:1'"},
		{"rrc=0.1:1.5", "'rrc=0.1:1.5'"},
		{"ratio=2:1", "'ratio=2:1'"},
		{"ratio=a:b", "'ratio=a:b'"},
		{"flip=1", "'flip=1'"},
		{"flip,,zoom=0.1", "empty option"},
		{"flip,", "empty option"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		aug_transform_opts_init(&o, 1);
		ims_error_clear(&err);
		int rc = aug_transform_parse(bad[i].spec, &o, &err);
		CHECK_EQ_INT(rc, IMS_EINVAL);
		if (!strstr(err.msg, bad[i].named)) {
			fprintf(stderr, "spec '%s': message '%s' lacks %s\n",
				bad[i].spec, err.msg, bad[i].named);
			CHECK(0);
		}
	}
}

/* ---- plans ------------------------------------------------------------ */

static int plan_eq(const aug_plan *a, const aug_plan *b)
{
	return memcmp(a->m, b->m, sizeof(a->m)) == 0 &&
	       a->need_x0 == b->need_x0 && a->need_y0 == b->need_y0 &&
	       a->need_x1 == b->need_x1 && a->need_y1 == b->need_y1 &&
	       a->flip == b->flip;
}

static void test_plan_determinism(void)
{
	ims_error err;
	aug_transform_opts o;
	aug_transform_opts_init(&o, 1);
	CHECK_OK(aug_transform_parse("flip,zoom=0.2,shift=0.1,rotate=10", &o,
				     &err),
		 &err);
	enum { N = 64 };
	static aug_plan fwd[N], rev[N];
	for (int i = 0; i < N; i++)
		CHECK_OK(aug_sample_plan(&o, 500, 375, 42, 3, (uint64_t)i,
					 &fwd[i], &err),
			 &err);
	for (int i = N - 1; i >= 0; i--)
		CHECK_OK(aug_sample_plan(&o, 500, 375, 42, 3, (uint64_t)i,
					 &rev[i], &err),
			 &err);
	int same_order = 1, differ_idx = 0, flips = 0;
	for (int i = 0; i < N; i++) {
		same_order &= plan_eq(&fwd[i], &rev[i]);
		if (i && !plan_eq(&fwd[i], &fwd[i - 1]))
			differ_idx++;
		flips += fwd[i].flip;
	}
	CHECK(same_order);
	CHECK_EQ_INT(differ_idx, N - 1);
	CHECK(flips > 10 && flips < N - 10);
	aug_plan a, b, c;
	CHECK_OK(aug_sample_plan(&o, 500, 375, 42, 4, 0, &a, &err), &err);
	CHECK(!plan_eq(&a, &fwd[0]));
	CHECK_OK(aug_sample_plan(&o, 500, 375, 43, 3, 0, &b, &err), &err);
	CHECK(!plan_eq(&b, &fwd[0]));
	/* Turning rotation off keeps the crop drawn for that sample. */
	aug_transform_opts o2 = o;
	o2.rotate = 0;
	CHECK_OK(aug_sample_plan(&o2, 500, 375, 42, 3, 5, &c, &err), &err);
	CHECK(c.crop_x == fwd[5].crop_x && c.crop_w == fwd[5].crop_w &&
	      c.zoom == fwd[5].zoom && c.flip == fwd[5].flip && c.angle == 0);
	/* Ranges of the drawn parameters. */
	for (int i = 0; i < N; i++) {
		CHECK(fwd[i].zoom >= 0.8 && fwd[i].zoom <= 1.2);
		CHECK(fabs(fwd[i].shift_x) <= 0.1 * 224 &&
		      fabs(fwd[i].shift_y) <= 0.1 * 224);
		CHECK(fabs(fwd[i].angle) <= 10);
	}
	/* Validation ignores seed/epoch/index. */
	aug_transform_opts v;
	aug_transform_opts_init(&v, 0);
	CHECK_OK(aug_sample_plan(&v, 500, 375, 1, 2, 3, &a, &err), &err);
	CHECK_OK(aug_sample_plan(&v, 500, 375, 9, 8, 7, &b, &err), &err);
	CHECK(plan_eq(&a, &b));
	/* Bad sizes. */
	CHECK_EQ_INT(aug_sample_plan(&v, 0, 375, 1, 2, 3, &a, &err), IMS_EINVAL);
	v.out_w = 0;
	CHECK_EQ_INT(aug_sample_plan(&v, 10, 10, 1, 2, 3, &a, &err), IMS_EINVAL);
	/* A crop fraction whose resize no long holds (1e-300: 2.2e302
	 * pixels, converted with undefined behaviour before) is refused;
	 * the floor itself is taken. */
	aug_transform_opts_init(&v, 0);
	v.crop_frac = 1e-300;
	CHECK_EQ_INT(aug_transform_check(&v, &err), IMS_EINVAL);
	CHECK_EQ_INT(aug_sample_plan(&v, 500, 375, 1, 2, 3, &a, &err), IMS_EINVAL);
	v.crop_frac = AUG_MIN_CROP_FRAC;
	CHECK_OK(aug_sample_plan(&v, 500, 375, 1, 2, 3, &a, &err), &err);
}

static void test_rrc_stats(void)
{
	ims_error err;
	aug_transform_opts o;
	aug_transform_opts_init(&o, 1);
	const int W = 640, H = 480, N = 4000;
	double sum_area = 0, min_a = 1, max_a = 0, min_r = 100, max_r = 0;
	int fallback = 0;
	for (int i = 0; i < N; i++) {
		aug_plan p;
		CHECK_OK(aug_sample_plan(&o, W, H, 7, 1, (uint64_t)i, &p, &err),
			 &err);
		double a = p.crop_w * p.crop_h / ((double)W * H);
		double r = p.crop_w / p.crop_h;
		sum_area += a;
		min_a = fmin(min_a, a);
		max_a = fmax(max_a, a);
		min_r = fmin(min_r, r);
		max_r = fmax(max_r, r);
		CHECK(p.crop_x >= 0 && p.crop_y >= 0 &&
		      p.crop_x + p.crop_w <= W && p.crop_y + p.crop_h <= H);
		if (p.crop_w == W && p.crop_h == H)
			fallback++;
		/* The matrix maps the output to the box. */
		CHECK_NEAR(p.m[0] * 224, p.crop_w, 1e-9);
		CHECK_NEAR(p.m[4] * 224, p.crop_h, 1e-9);
		CHECK_NEAR(p.m[2], p.crop_x, 1e-9);
		CHECK_NEAR(p.m[5], p.crop_y, 1e-9);
	}
	/* Rounding to whole pixels moves area and ratio slightly. */
	CHECK(min_a >= 0.08 - 0.01 && max_a <= 1.0);
	CHECK(min_r >= 0.75 - 0.02 && max_r <= 4.0 / 3 + 0.02);
	CHECK(min_a < 0.1 && max_a > 0.9);
	/* Accepted draws are uniform in area but big boxes fail more often
	 * to fit, so the mean lies below 0.54. */
	double mean = sum_area / N;
	CHECK(mean > 0.35 && mean < 0.54);
	CHECK(fallback < N / 20);

	/* A very wide image forces the fallback: centre crop at ratio 4/3. */
	aug_plan p;
	o.scale_min = 0.99;
	CHECK_OK(aug_sample_plan(&o, 1000, 100, 7, 1, 0, &p, &err), &err);
	CHECK_NEAR(p.crop_w, 133, 0);
	CHECK_NEAR(p.crop_h, 100, 0);
	CHECK_NEAR(p.crop_x, (1000 - 133) / 2, 0);
	CHECK_NEAR(p.crop_y, 0, 0);
}

/* ---- rebase and the need box ------------------------------------------- */

static void copy_region(const aug_image *src, int x0, int y0, int w, int h,
			aug_image *dst)
{
	ims_error err;
	CHECK_OK(aug_image_alloc(dst, w, h, src->channels, &err), &err);
	for (int y = 0; y < h; y++)
		memcpy(dst->pixels + (size_t)y * dst->stride,
		       src->pixels + (size_t)(y0 + y) * src->stride +
			       (size_t)x0 * src->channels,
		       (size_t)w * src->channels);
}

static void test_rebase(void)
{
	ims_error err;
	aug_image full = {0}, region = {0}, half = {0};
	const int W = 400, H = 300;
	make_image(&full, W, H, 3, smooth);
	aug_transform_opts o;
	aug_transform_opts_init(&o, 1);
	o.out_w = o.out_h = 64;
	o.dtype = AUG_DTYPE_U8;
	o.rrc = 1;
	o.scale_min = 0.3;
	CHECK_OK(aug_transform_parse("flip,rotate=10,zoom=0.1", &o, &err), &err);
	size_t n = aug_sample_bytes(&o);
	uint8_t *a = malloc(n), *b = malloc(n);
	double worst_mean = 0;
	int worst_max = 0, exact_bad = 0;
	for (int i = 0; i < 20; i++) {
		aug_plan p, q;
		CHECK_OK(aug_sample_plan(&o, W, H, 5, 0, (uint64_t)i, &p, &err),
			 &err);
		CHECK_OK(aug_warp(&full, &p, &o, a, &err), &err);
		int rx = p.need_x0, ry = p.need_y0;
		int rw = p.need_x1 - rx, rh = p.need_y1 - ry;
		copy_region(&full, rx, ry, rw, rh, &region);

		/* Region at full scale: identical output. */
		q = p;
		CHECK_OK(aug_plan_rebase(&q, rx, ry, 1, 1, &err), &err);
		CHECK_OK(aug_warp(&region, &q, &o, b, &err), &err);
		exact_bad += memcmp(a, b, n) != 0;

		/* Region at half scale (as a 1/2 DCT decode would give, sizes
		 * rounded up). */
		int hw = (rw + 1) / 2, hh = (rh + 1) / 2;
		CHECK_OK(aug_resize(NULL, &region, hw, hh, &half, &err), &err);
		q = p;
		CHECK_OK(aug_plan_rebase(&q, rx, ry, (double)rw / hw,
					 (double)rh / hh, &err),
			 &err);
		CHECK_NEAR(q.scale, p.scale / fmin((double)rw / hw, (double)rh / hh),
			   1e-12);
		CHECK_OK(aug_warp(&half, &q, &o, b, &err), &err);
		double sum = 0;
		int mx = 0;
		for (size_t k = 0; k < n; k++) {
			int d = abs((int)a[k] - (int)b[k]);
			sum += d;
			mx = d > mx ? d : mx;
		}
		worst_mean = fmax(worst_mean, sum / n);
		worst_max = mx > worst_max ? mx : worst_max;
	}
	CHECK_EQ_INT(exact_bad, 0);
	/* Stated tolerance for a smooth image (gradients <= ~3.1 per pixel):
	 * mean abs difference <= 1, max <= 6, in 0..255 units (measured
	 * 0.37 and 3). */
	fprintf(stderr, "rebase half scale: worst mean %.3f, worst max %d\n",
		worst_mean, worst_max);
	CHECK(worst_mean <= 1.0);
	CHECK(worst_max <= 6);
	aug_plan bad;
	memset(&bad, 0, sizeof(bad));
	CHECK_EQ_INT(aug_plan_rebase(&bad, 0, 0, 0, 1, &err), IMS_EINVAL);
	free(a);
	free(b);
	aug_image_release(&full);
	aug_image_release(&region);
	aug_image_release(&half);
}

static void test_need_box(void)
{
	/* Every pixel outside the need box is a 255 marker, inside 100: any
	 * read outside the box shows in the output. */
	ims_error err;
	aug_image img = {0};
	const int W = 300, H = 200;
	aug_transform_opts o;
	aug_transform_opts_init(&o, 1);
	o.out_w = 56;
	o.out_h = 40;
	o.dtype = AUG_DTYPE_U8;
	CHECK_OK(aug_transform_parse("flip,zoom=0.3,shift=0.2,rotate=30", &o,
				     &err),
		 &err);
	uint8_t *out = malloc(aug_sample_bytes(&o));
	int leaks = 0, smaller = 0;
	for (int i = 0; i < 200; i++) {
		aug_plan p;
		CHECK_OK(aug_sample_plan(&o, W, H, 77, 1, (uint64_t)i, &p, &err),
			 &err);
		CHECK(p.need_x0 >= 0 && p.need_x0 < p.need_x1 && p.need_x1 <= W);
		CHECK(p.need_y0 >= 0 && p.need_y0 < p.need_y1 && p.need_y1 <= H);
		if ((p.need_x1 - p.need_x0) * (p.need_y1 - p.need_y0) < W * H / 2)
			smaller++;
		make_image(&img, W, H, 3, pattern);
		for (int y = 0; y < H; y++)
			for (int x = 0; x < W; x++) {
				int in = x >= p.need_x0 && x < p.need_x1 &&
					 y >= p.need_y0 && y < p.need_y1;
				memset(img.pixels + (size_t)y * img.stride + x * 3,
				       in ? 100 : 255, 3);
			}
		CHECK_OK(aug_warp(&img, &p, &o, out, &err), &err);
		for (size_t k = 0; k < aug_sample_bytes(&o); k++)
			leaks += out[k] != 100;
	}
	CHECK_EQ_INT(leaks, 0);
	CHECK(smaller > 50);
	free(out);
	aug_image_release(&img);
}

int main(void)
{
	test_parse();
	test_plan_determinism();
	test_rrc_stats();
	test_rebase();
	test_need_box();
	return TEST_EXIT();
}
