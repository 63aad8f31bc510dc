/*
 * transform.c - the loader's per-sample geometry: option parsing, plans
 * drawn from (seed, epoch, index), and the one-pass bilinear warp with
 * fused normalisation into NCHW/NHWC u8/f32/f16/bf16.
 *
 * A plan is one 2x3 matrix from output to source coordinates, composed as
 * the inverse of the forward chain crop -> resize to out -> zoom/shift/
 * rotate about the output centre -> flip. The warp walks output rows; along
 * a row the source point moves by (m0, m3), so each pixel is one add in
 * 32.32 fixed point (int64), never a division. Interpolation is integer
 * with 11-bit weights: the result is 255 * 2^22 at most, exact in int32,
 * and the same on every machine; float outputs then take one subtract and
 * one multiply per value (no a*b+c, so no FMA contraction can change it).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment/augment.h"
#include "augment/augment_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

#define FIX_BITS 32 /* fractional bits of the source coordinates */
#define W_BITS 11   /* fractional bits of the bilinear weights */
#define W_ONE (1 << W_BITS)
#define COORD_LIMIT 16777216.0 /* 2^24: a plan mapping beyond is refused */

/* Domain tag so these streams differ from others drawn from the same
 * (seed, epoch), e.g. the shuffle's. */
#define STREAM_TAG 0x7472616e73666f72ull /* "transfor" */

enum { RNG_CROP = 1, RNG_ZOOM, RNG_SHIFT, RNG_ROTATE, RNG_FLIP };

void aug_transform_opts_init(aug_transform_opts *o, int train)
{
	memset(o, 0, sizeof(*o));
	o->train = train ? 1 : 0;
	o->out_w = o->out_h = 224;
	o->crop_frac = 0.875;
	o->rrc = o->train;
	o->scale_min = 0.08;
	o->scale_max = 1.0;
	o->ratio_min = 3.0 / 4.0;
	o->ratio_max = 4.0 / 3.0;
	for (int c = 0; c < 3; c++) {
		o->mean[c] = 0.0f;
		o->std[c] = 1.0f;
	}
	o->layout = AUG_LAYOUT_NCHW;
	o->dtype = AUG_DTYPE_F32;
}

static int check_opts(const aug_transform_opts *o, ims_error *err)
{
	RETURN_IF(!o, err, IMS_EINVAL, "cannot transform: no options");
	RETURN_IF(o->out_w < 1 || o->out_h < 1 || o->out_w > AUG_MAX_OUT_SIDE ||
			  o->out_h > AUG_MAX_OUT_SIDE,
		  err, IMS_EINVAL,
		  "cannot transform to %dx%d: sides must be 1..%d", o->out_w,
		  o->out_h, AUG_MAX_OUT_SIDE);
	RETURN_IF(!(o->crop_frac >= AUG_MIN_CROP_FRAC && o->crop_frac <= 1), err,
		  IMS_EINVAL, "cannot transform: crop fraction %g is not in [%g, 1]",
		  o->crop_frac, AUG_MIN_CROP_FRAC);
	RETURN_IF(!(o->scale_min > 0 && o->scale_min <= o->scale_max &&
		    o->scale_max <= 1),
		  err, IMS_EINVAL,
		  "cannot transform: rrc scale range %g:%g is not within (0, 1]",
		  o->scale_min, o->scale_max);
	RETURN_IF(!(o->ratio_min > 0 && o->ratio_min <= o->ratio_max &&
		    isfinite(o->ratio_max)),
		  err, IMS_EINVAL, "cannot transform: bad ratio range %g:%g",
		  o->ratio_min, o->ratio_max);
	RETURN_IF(!(o->zoom >= 0 && o->zoom < 1), err, IMS_EINVAL,
		  "cannot transform: zoom %g is not in [0, 1)", o->zoom);
	RETURN_IF(!(o->shift >= 0 && o->shift <= 1), err, IMS_EINVAL,
		  "cannot transform: shift %g is not in [0, 1]", o->shift);
	RETURN_IF(!(o->rotate >= 0 && o->rotate <= 180), err, IMS_EINVAL,
		  "cannot transform: rotate %g is not in [0, 180]", o->rotate);
	/* 1 / std must be a float: a std of 1e-45 passed "> 0" and made
	 * every sample infinite */
	for (int c = 0; c < 3; c++)
		RETURN_IF(!(o->std[c] > 0 && isfinite(o->std[c]) &&
			    isfinite(1.0f / o->std[c]) && isfinite(o->mean[c])),
			  err, IMS_EINVAL,
			  "cannot transform: channel %d has mean %g, std %g (both "
			  "must be finite, std > 0 with 1/std a finite float)",
			  c, (double)o->mean[c], (double)o->std[c]);
	RETURN_IF(o->layout != AUG_LAYOUT_NCHW && o->layout != AUG_LAYOUT_NHWC,
		  err, IMS_EINVAL, "cannot transform: unknown layout %d",
		  (int)o->layout);
	RETURN_IF(o->dtype < AUG_DTYPE_U8 || o->dtype > AUG_DTYPE_BF16, err,
		  IMS_EINVAL, "cannot transform: unknown dtype %d",
		  (int)o->dtype);
	/* u8 samples are the pixels themselves: a normalisation asked for
	 * with them would be dropped without a word */
	for (int c = 0; c < 3; c++)
		RETURN_IF(o->dtype == AUG_DTYPE_U8 && (o->mean[c] != 0 || o->std[c] != 1),
			  err, IMS_EINVAL,
			  "cannot transform: mean %g,%g,%g and std %g,%g,%g need a "
			  "float dtype (f32, f16 or bf16): u8 samples are the pixels as "
			  "they are",
			  (double)o->mean[0], (double)o->mean[1], (double)o->mean[2],
			  (double)o->std[0], (double)o->std[1], (double)o->std[2]);
	return 0;
}

int aug_transform_check(const aug_transform_opts *o, ims_error *err)
{
	return check_opts(o, err);
}

/* ---- option string ---------------------------------------------------- */

/* Whole-string double; 0 on success. */
static int parse_num(const char *s, double *v)
{
	if (!*s)
		return -1;
	char *end;
	errno = 0;
	*v = strtod(s, &end);
	return (*end || errno || !isfinite(*v)) ? -1 : 0;
}

/* "A:B" into two doubles. */
static int parse_range(char *s, double *a, double *b)
{
	char *colon = strchr(s, ':');
	if (!colon)
		return -1;
	*colon = '\0';
	return (parse_num(s, a) || parse_num(colon + 1, b)) ? -1 : 0;
}

static int parse_token(char *tok, aug_transform_opts *o, ims_error *err)
{
	char *val = strchr(tok, '=');
	char shown[128];
	snprintf(shown, sizeof(shown), "%s", tok);
	if (val)
		*val++ = '\0';
	double a, b;

	if (!strcmp(tok, "none") && !val) {
		o->rrc = o->flip = 0;
		o->zoom = o->shift = o->rotate = 0;
	} else if (!strcmp(tok, "flip") && !val) {
		o->flip = 1;
	} else if (!strcmp(tok, "noflip") && !val) {
		o->flip = 0;
	} else if (!strcmp(tok, "norrc") && !val) {
		o->rrc = 0;
	} else if (!strcmp(tok, "rrc")) {
		if (val) {
			RETURN_IF(parse_range(val, &a, &b) || !(a > 0) ||
					  a > b || b > 1,
				  err, IMS_EINVAL,
				  "cannot parse transform option '%s': expected "
				  "rrc=A:B with 0 < A <= B <= 1",
				  shown);
			o->scale_min = a;
			o->scale_max = b;
		}
		o->rrc = 1;
	} else if (!strcmp(tok, "ratio") && val) {
		RETURN_IF(parse_range(val, &a, &b) || !(a > 0) || a > b, err,
			  IMS_EINVAL,
			  "cannot parse transform option '%s': expected "
			  "ratio=A:B with 0 < A <= B",
			  shown);
		o->ratio_min = a;
		o->ratio_max = b;
	} else if (!strcmp(tok, "zoom") && val) {
		RETURN_IF(parse_num(val, &a) || !(a >= 0 && a < 1), err,
			  IMS_EINVAL,
			  "cannot parse transform option '%s': zoom must be "
			  "in [0, 1)",
			  shown);
		o->zoom = a;
	} else if (!strcmp(tok, "shift") && val) {
		RETURN_IF(parse_num(val, &a) || !(a >= 0 && a <= 1), err,
			  IMS_EINVAL,
			  "cannot parse transform option '%s': shift must be "
			  "in [0, 1]",
			  shown);
		o->shift = a;
	} else if (!strcmp(tok, "rotate") && val) {
		RETURN_IF(parse_num(val, &a) || !(a >= 0 && a <= 180), err,
			  IMS_EINVAL,
			  "cannot parse transform option '%s': rotate must be "
			  "in [0, 180] degrees",
			  shown);
		o->rotate = a;
	} else {
		return ims_fail(err, IMS_EINVAL,
				"cannot parse transform option '%s': unknown "
				"option (known: none, flip, noflip, rrc, "
				"rrc=A:B, norrc, ratio=A:B, zoom=Z, shift=S, "
				"rotate=D)",
				shown);
	}
	return 0;
}

int aug_transform_parse(const char *spec, aug_transform_opts *o,
			ims_error *err)
{
	RETURN_IF(!o, err, IMS_EINVAL, "cannot parse transform options: no "
		  "options");
	if (!spec || !*spec)
		return 0;
	const char *p = spec;
	for (;;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		char tok[128];
		RETURN_IF(n == 0, err, IMS_EINVAL,
			  "cannot parse transform options '%s': empty option",
			  spec);
		RETURN_IF(n >= sizeof(tok), err, IMS_EINVAL,
			  "cannot parse transform option '%.40s...': too long",
			  p);
		memcpy(tok, p, n);
		tok[n] = '\0';
		FORWARD_IF_ERR(parse_token(tok, o, err));
		if (!end)
			return 0;
		p = end + 1;
	}
}

/* ---- plans ------------------------------------------------------------ */

/* 2x3 affine maps: r = a after b, i.e. r(x) = a(b(x)). */
static void mat_mul(const double a[6], const double b[6], double r[6])
{
	double t[6];
	t[0] = a[0] * b[0] + a[1] * b[3];
	t[1] = a[0] * b[1] + a[1] * b[4];
	t[2] = a[0] * b[2] + a[1] * b[5] + a[2];
	t[3] = a[3] * b[0] + a[4] * b[3];
	t[4] = a[3] * b[1] + a[4] * b[4];
	t[5] = a[3] * b[2] + a[4] * b[5] + a[5];
	memcpy(r, t, sizeof(t));
}

static int check_src(int w, int h, ims_error *err)
{
	RETURN_IF(w < 1 || h < 1 || w > AUG_MAX_SIDE || h > AUG_MAX_SIDE, err,
		  IMS_EINVAL, "cannot plan transform of a %dx%d image: sides "
		  "must be 1..%d", w, h, AUG_MAX_SIDE);
	return 0;
}

/* Validation geometry: shorter side to round(max(out) / crop_frac), the
 * longer in proportion (nearest, halves up), centre crop. Sets the base box
 * in source pixels. */
static void center_box(const aug_transform_opts *o, int w, int h, aug_plan *p)
{
	int side = o->out_w > o->out_h ? o->out_w : o->out_h;
	long short_to = (long)floor(side / o->crop_frac + 0.5);
	long rw, rh;
	if (w <= h) {
		rw = short_to;
		rh = (long)floor((double)h * short_to / w + 0.5);
	} else {
		rh = short_to;
		rw = (long)floor((double)w * short_to / h + 0.5);
	}
	if (rw < o->out_w)
		rw = o->out_w;
	if (rh < o->out_h)
		rh = o->out_h;
	double sx = (double)w / rw, sy = (double)h / rh;
	long cx = (rw - o->out_w) / 2, cy = (rh - o->out_h) / 2;
	p->crop_x = cx * sx;
	p->crop_y = cy * sy;
	p->crop_w = o->out_w * sx;
	p->crop_h = o->out_h * sy;
}

/* Random-resized-crop: 10 tries of (area, log-ratio) sampling with the box
 * rounded to whole pixels and placed uniformly, else the centre crop of the
 * image clamped to the ratio range. */
static void rrc_box(const aug_transform_opts *o, int w, int h, ims_rng *r,
		    aug_plan *p)
{
	double area = (double)w * h;
	double lr0 = log(o->ratio_min), lr1 = log(o->ratio_max);
	for (int t = 0; t < 10; t++) {
		double target = area * (o->scale_min + (o->scale_max - o->scale_min) *
							  ims_rng_uniform(r));
		double ratio = exp(lr0 + (lr1 - lr0) * ims_rng_uniform(r));
		long cw = lround(sqrt(target * ratio));
		long ch = lround(sqrt(target / ratio));
		if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
			uint64_t y = ims_rng_below(r, (uint64_t)(h - ch + 1));
			uint64_t x = ims_rng_below(r, (uint64_t)(w - cw + 1));
			p->crop_x = (double)x;
			p->crop_y = (double)y;
			p->crop_w = (double)cw;
			p->crop_h = (double)ch;
			return;
		}
	}
	double in_ratio = (double)w / h;
	long cw = w, ch = h;
	if (in_ratio < o->ratio_min) {
		ch = lround(w / o->ratio_min);
	} else if (in_ratio > o->ratio_max) {
		cw = lround(h * o->ratio_max);
	}
	if (cw < 1)
		cw = 1;
	if (ch < 1)
		ch = 1;
	p->crop_x = (double)((w - cw) / 2);
	p->crop_y = (double)((h - ch) / 2);
	p->crop_w = (double)cw;
	p->crop_h = (double)ch;
}

int aug_plan_build(const aug_transform_opts *o, int src_w, int src_h,
		   aug_plan *p, ims_error *err)
{
	FORWARD_IF_ERR(check_opts(o, err));
	FORWARD_IF_ERR(check_src(src_w, src_h, err));
	RETURN_IF(!p, err, IMS_EINVAL, "cannot build plan: no plan");
	RETURN_IF(!(p->crop_w > 0 && p->crop_h > 0 && p->zoom > 0 &&
		    isfinite(p->crop_x) && isfinite(p->crop_y) &&
		    isfinite(p->crop_w) && isfinite(p->crop_h) &&
		    isfinite(p->zoom) && isfinite(p->shift_x) &&
		    isfinite(p->shift_y) && isfinite(p->angle)),
		  err, IMS_EINVAL,
		  "cannot build plan: crop %gx%g, zoom %g must be > 0 and finite",
		  p->crop_w, p->crop_h, p->zoom);
	double ow = o->out_w, oh = o->out_h;
	double cx = ow / 2, cy = oh / 2;

	/* Output -> flipped-back output. */
	double m[6] = {1, 0, 0, 0, 1, 0};
	if (p->flip) {
		m[0] = -1;
		m[2] = ow;
	}
	/* Undo shift, rotation and zoom about the centre. The forward map is
	 * d -> z R d with R = [cos sin; -sin cos] (counter-clockwise on a
	 * y-down screen); its inverse is d -> R^T d / z. */
	double th = p->angle * (3.14159265358979323846 / 180.0);
	double c = cos(th) / p->zoom, s = sin(th) / p->zoom;
	double tx = cx + p->shift_x, ty = cy + p->shift_y;
	double a[6] = {c, -s, cx - (c * tx - s * ty), s, c,
		       cy - (s * tx + c * ty)};
	mat_mul(a, m, m);
	/* Output -> base box in the source. */
	double kx = p->crop_w / ow, ky = p->crop_h / oh;
	double b[6] = {kx, 0, p->crop_x, 0, ky, p->crop_y};
	mat_mul(b, m, m);
	memcpy(p->m, m, sizeof(m));

	/* Bounding box of the sample points (pixel centres of the output's
	 * corner pixels), widened to the bilinear footprint [floor(u-.5),
	 * floor(u-.5)+1]; the epsilon covers the warp's fixed-point rounding. */
	double umin = INFINITY, umax = -INFINITY, vmin = INFINITY, vmax = -INFINITY;
	for (int k = 0; k < 4; k++) {
		double x = (k & 1) ? ow - 0.5 : 0.5;
		double y = (k & 2) ? oh - 0.5 : 0.5;
		double u = m[0] * x + m[1] * y + m[2];
		double v = m[3] * x + m[4] * y + m[5];
		umin = fmin(umin, u);
		umax = fmax(umax, u);
		vmin = fmin(vmin, v);
		vmax = fmax(vmax, v);
	}
	const double eps = 1e-6;
	double fx0 = floor(umin - 0.5 - eps), fx1 = floor(umax - 0.5 + eps) + 2;
	double fy0 = floor(vmin - 0.5 - eps), fy1 = floor(vmax - 0.5 + eps) + 2;
	fx0 = fmin(fmax(fx0, 0), src_w - 1);
	fy0 = fmin(fmax(fy0, 0), src_h - 1);
	fx1 = fmin(fmax(fx1, fx0 + 1), src_w);
	fy1 = fmin(fmax(fy1, fy0 + 1), src_h);
	p->need_x0 = (int)fx0;
	p->need_y0 = (int)fy0;
	p->need_x1 = (int)fx1;
	p->need_y1 = (int)fy1;
	p->scale = fmin(hypot(m[0], m[3]), hypot(m[1], m[4]));
	return 0;
}

int aug_sample_plan(const aug_transform_opts *o, int src_w, int src_h,
		    uint64_t seed, uint64_t epoch, uint64_t index, aug_plan *p,
		    ims_error *err)
{
	FORWARD_IF_ERR(check_opts(o, err));
	FORWARD_IF_ERR(check_src(src_w, src_h, err));
	RETURN_IF(!p, err, IMS_EINVAL, "cannot plan transform: no plan");
	memset(p, 0, sizeof(*p));
	p->zoom = 1;
	if (!o->train) {
		center_box(o, src_w, src_h, p);
		return aug_plan_build(o, src_w, src_h, p, err);
	}
	uint64_t base = ims_hash64(ims_hash64(seed, STREAM_TAG), epoch);
	ims_rng r;
	if (o->rrc) {
		ims_rng_seed(&r, base, ims_hash64(index, RNG_CROP));
		rrc_box(o, src_w, src_h, &r, p);
	} else {
		center_box(o, src_w, src_h, p);
	}
	if (o->zoom > 0) {
		ims_rng_seed(&r, base, ims_hash64(index, RNG_ZOOM));
		p->zoom = 1 - o->zoom + 2 * o->zoom * ims_rng_uniform(&r);
	}
	if (o->shift > 0) {
		ims_rng_seed(&r, base, ims_hash64(index, RNG_SHIFT));
		p->shift_x = (2 * ims_rng_uniform(&r) - 1) * o->shift * o->out_w;
		p->shift_y = (2 * ims_rng_uniform(&r) - 1) * o->shift * o->out_h;
	}
	if (o->rotate > 0) {
		ims_rng_seed(&r, base, ims_hash64(index, RNG_ROTATE));
		p->angle = (2 * ims_rng_uniform(&r) - 1) * o->rotate;
	}
	if (o->flip) {
		ims_rng_seed(&r, base, ims_hash64(index, RNG_FLIP));
		p->flip = (int)(ims_rng_next(&r) >> 63);
	}
	return aug_plan_build(o, src_w, src_h, p, err);
}

int aug_plan_rebase(aug_plan *p, double x0, double y0, double sx, double sy,
		    ims_error *err)
{
	RETURN_IF(!p, err, IMS_EINVAL, "cannot rebase plan: no plan");
	RETURN_IF(!(sx > 0 && sy > 0 && isfinite(sx) && isfinite(sy) &&
		    isfinite(x0) && isfinite(y0)),
		  err, IMS_EINVAL,
		  "cannot rebase plan to origin (%g, %g) at scale %g x %g",
		  x0, y0, sx, sy);
	p->m[0] /= sx;
	p->m[1] /= sx;
	p->m[2] = (p->m[2] - x0) / sx;
	p->m[3] /= sy;
	p->m[4] /= sy;
	p->m[5] = (p->m[5] - y0) / sy;
	p->scale /= fmin(sx, sy);
	return 0;
}

/* ---- warp ------------------------------------------------------------- */

static size_t dtype_size(aug_dtype t)
{
	switch (t) {
	case AUG_DTYPE_U8:
		return 1;
	case AUG_DTYPE_F32:
		return 4;
	case AUG_DTYPE_F16:
	case AUG_DTYPE_BF16:
		return 2;
	}
	return 0;
}

size_t aug_sample_bytes(const aug_transform_opts *o)
{
	if (check_opts(o, NULL) < 0)
		return 0;
	return (size_t)o->out_w * (size_t)o->out_h * 3 * dtype_size(o->dtype);
}

/*
 * Writes one output row of channel plane `c` (values in units of 2^-22
 * pixel, from rowv[x]) at element offset `off` with element step `step`.
 */
static inline __attribute__((always_inline)) void
store_row(const int32_t *rowv, int n, aug_dtype t, float mean,
		      float inv_std, void *dst, size_t off, size_t step)
{
	const float unit = 1.0f / (float)(1 << (2 * W_BITS));
	switch (t) {
	case AUG_DTYPE_U8: {
		uint8_t *d = (uint8_t *)dst + off;
		for (int x = 0; x < n; x++)
			d[x * step] = (uint8_t)((rowv[x] + (1 << (2 * W_BITS - 1))) >>
						(2 * W_BITS));
		break;
	}
	case AUG_DTYPE_F32: {
		float *d = (float *)dst + off;
		for (int x = 0; x < n; x++) {
			float v = (float)rowv[x] * unit - mean;
			d[x * step] = v * inv_std;
		}
		break;
	}
	case AUG_DTYPE_F16: {
		uint16_t *d = (uint16_t *)dst + off;
		for (int x = 0; x < n; x++) {
			float v = (float)rowv[x] * unit - mean;
			d[x * step] = ims_f32_to_f16(v * inv_std);
		}
		break;
	}
	case AUG_DTYPE_BF16: {
		uint16_t *d = (uint16_t *)dst + off;
		for (int x = 0; x < n; x++) {
			float v = (float)rowv[x] * unit - mean;
			d[x * step] = ims_f32_to_bf16(v * inv_std);
		}
		break;
	}
	}
}

/*
 * Interpolates n output pixels into rowv (cs planes `pitch` values apart,
 * in units of 2^-22 pixel). (su, sv) is the first sample point minus 0.5 in
 * 32.32 fixed point, (du, dv) the step per pixel. Inlined with constant nc
 * (source channels) and cs (channels interpolated) so the channel loops
 * unroll.
 */
static inline __attribute__((always_inline)) void
warp_row(const aug_image *src, const int nc, const int cs, int64_t su,
	 int64_t sv, int64_t du, int64_t dv, int n, int pitch, int32_t *rowv)
{
	const int64_t xmax = src->width - 1, ymax = src->height - 1;
	const uint8_t *pix = src->pixels;
	const size_t stride = src->stride;
	/* Samples move linearly along the row, so when both ends have all
	 * four taps inside the image, every pixel does: no clamping needed
	 * (same results, fewer instructions on the common interior rows). */
	int64_t eu = su + (int64_t)(n - 1) * du, ev = sv + (int64_t)(n - 1) * dv;
	int64_t u0 = su >> FIX_BITS, u1 = eu >> FIX_BITS;
	int64_t v0 = sv >> FIX_BITS, v1 = ev >> FIX_BITS;
	if (u0 >= 0 && u1 >= 0 && u0 < xmax && u1 < xmax && v0 >= 0 && v1 >= 0 &&
	    v0 < ymax && v1 < ymax) {
		for (int x = 0; x < n; x++, su += du, sv += dv) {
			int64_t iu = su >> FIX_BITS, iv = sv >> FIX_BITS;
			int32_t wx = (int32_t)((su >> (FIX_BITS - W_BITS)) & (W_ONE - 1));
			int32_t wy = (int32_t)((sv >> (FIX_BITS - W_BITS)) & (W_ONE - 1));
			const uint8_t *p00 = pix + (size_t)iv * stride + (size_t)iu * nc;
			const uint8_t *p10 = p00 + stride;
			for (int c = 0; c < cs; c++) {
				int32_t top = p00[c] * (W_ONE - wx) + p00[nc + c] * wx;
				int32_t bot = p10[c] * (W_ONE - wx) + p10[nc + c] * wx;
				rowv[c * pitch + x] = top * (W_ONE - wy) + bot * wy;
			}
		}
		return;
	}
	for (int x = 0; x < n; x++, su += du, sv += dv) {
		/* >> of a negative int64 is an arithmetic shift (floor) in gcc
		 * and clang. Taps outside the image clamp to the edge. */
		int64_t iu = su >> FIX_BITS, iv = sv >> FIX_BITS;
		int32_t wx = (int32_t)((su >> (FIX_BITS - W_BITS)) & (W_ONE - 1));
		int32_t wy = (int32_t)((sv >> (FIX_BITS - W_BITS)) & (W_ONE - 1));
		int64_t x0 = iu < 0 ? 0 : iu > xmax ? xmax : iu;
		int64_t x1 = iu + 1 < 0 ? 0 : iu + 1 > xmax ? xmax : iu + 1;
		int64_t y0 = iv < 0 ? 0 : iv > ymax ? ymax : iv;
		int64_t y1 = iv + 1 < 0 ? 0 : iv + 1 > ymax ? ymax : iv + 1;
		const uint8_t *r0 = pix + (size_t)y0 * stride;
		const uint8_t *r1 = pix + (size_t)y1 * stride;
		const uint8_t *p00 = r0 + (size_t)x0 * nc;
		const uint8_t *p01 = r0 + (size_t)x1 * nc;
		const uint8_t *p10 = r1 + (size_t)x0 * nc;
		const uint8_t *p11 = r1 + (size_t)x1 * nc;
		for (int c = 0; c < cs; c++) {
			int32_t top = p00[c] * (W_ONE - wx) + p01[c] * wx;
			int32_t bot = p10[c] * (W_ONE - wx) + p11[c] * wx;
			rowv[c * pitch + x] = top * (W_ONE - wy) + bot * wy;
		}
	}
}

#ifdef HAVE_X86
/*
 * The interior rows of 3- and 4-channel sources, 8 output pixels at a time
 * with AVX2 gathers: the same integer arithmetic as warp_row, so the same
 * bits. The caller guarantees that every tap of the row is inside the image
 * (as for warp_row's clamp-free rows), width < 2^20 and height * stride <
 * 2^31 (gather offsets are int32). Each gather loads 4 bytes; the right
 * taps of a 3-channel source are loaded from one byte before the pixel, so
 * no load passes the right tap's last byte, even on the last row. su and sv are >= 0 there,
 * so logical shifts equal warp_row's arithmetic ones. Returns the number
 * of pixels done (a multiple of 8); warp_row finishes the tail.
 */
__attribute__((target("avx2"))) static int
warp_row_avx2(const aug_image *src, const int nc, int64_t su, int64_t sv,
	      int64_t du, int64_t dv, int n, int32_t *rowv)
{
	const int32_t stride = (int32_t)src->stride;
	const int *base = (const int *)(const void *)src->pixels;
	const __m256i lo8 = _mm256_set1_epi32(0xff);
	const __m256i wmask = _mm256_set1_epi32(W_ONE - 1);
	const __m256i wone = _mm256_set1_epi32(W_ONE);
	const __m256i vnc = _mm256_set1_epi32(nc);
	const __m256i vstride = _mm256_set1_epi32(stride);
	/* where the right taps' 4-byte loads start, and their channel shift */
	const int rshift = nc == 3 ? 8 : 0;
	const __m256i vright = _mm256_set1_epi32(nc == 3 ? 2 : 4);
	/* Lanes k = 0..3 and 4..7 of the 64-bit coordinates. */
	__m256i u_lo = _mm256_add_epi64(_mm256_set1_epi64x(su),
					_mm256_set_epi64x(3 * du, 2 * du, du, 0));
	__m256i u_hi = _mm256_add_epi64(u_lo, _mm256_set1_epi64x(4 * du));
	__m256i v_lo = _mm256_add_epi64(_mm256_set1_epi64x(sv),
					_mm256_set_epi64x(3 * dv, 2 * dv, dv, 0));
	__m256i v_hi = _mm256_add_epi64(v_lo, _mm256_set1_epi64x(4 * dv));
	const __m256i step_u = _mm256_set1_epi64x(8 * du);
	const __m256i step_v = _mm256_set1_epi64x(8 * dv);
	/* Picks the low 32 bits of each 64-bit lane of (lo, hi) in order. */
	const __m256i pick = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
	int x = 0;
	for (; x + 8 <= n; x += 8) {
		/* (coordinate >> 21) = integer part << 11 | 11-bit weight;
		 * it fits in 31 bits: the caller keeps taps below 2^20. */
		__m256i tu = _mm256_permute2x128_si256(
			_mm256_permutevar8x32_epi32(
				_mm256_srli_epi64(u_lo, FIX_BITS - W_BITS), pick),
			_mm256_permutevar8x32_epi32(
				_mm256_srli_epi64(u_hi, FIX_BITS - W_BITS), pick),
			0x20);
		__m256i tv = _mm256_permute2x128_si256(
			_mm256_permutevar8x32_epi32(
				_mm256_srli_epi64(v_lo, FIX_BITS - W_BITS), pick),
			_mm256_permutevar8x32_epi32(
				_mm256_srli_epi64(v_hi, FIX_BITS - W_BITS), pick),
			0x20);
		u_lo = _mm256_add_epi64(u_lo, step_u);
		u_hi = _mm256_add_epi64(u_hi, step_u);
		v_lo = _mm256_add_epi64(v_lo, step_v);
		v_hi = _mm256_add_epi64(v_hi, step_v);
		__m256i wx = _mm256_and_si256(tu, wmask);
		__m256i wy = _mm256_and_si256(tv, wmask);
		__m256i iu = _mm256_srli_epi32(tu, W_BITS);
		__m256i iv = _mm256_srli_epi32(tv, W_BITS);
		__m256i off = _mm256_add_epi32(_mm256_mullo_epi32(iv, vstride),
					       _mm256_mullo_epi32(iu, vnc));
		__m256i a = _mm256_i32gather_epi32(base, off, 1);
		__m256i b = _mm256_i32gather_epi32(
			base, _mm256_add_epi32(off, vright), 1);
		off = _mm256_add_epi32(off, vstride);
		__m256i c = _mm256_i32gather_epi32(base, off, 1);
		__m256i d = _mm256_i32gather_epi32(
			base, _mm256_add_epi32(off, vright), 1);
		/* Weight pairs (W_ONE - wx, wx) as int16 in each 32-bit lane,
		 * for pmaddwd against (left, right) pixel pairs. */
		__m256i wxp = _mm256_or_si256(_mm256_sub_epi32(wone, wx),
					      _mm256_slli_epi32(wx, 16));
		__m256i wy0 = _mm256_sub_epi32(wone, wy);
		for (int ch = 0; ch < 3; ch++) {
			const int sh = 8 * ch, rsh = sh + rshift;
			__m256i pa = _mm256_and_si256(_mm256_srli_epi32(a, sh), lo8);
			__m256i pb = _mm256_and_si256(_mm256_srli_epi32(b, rsh), lo8);
			__m256i pc = _mm256_and_si256(_mm256_srli_epi32(c, sh), lo8);
			__m256i pd = _mm256_and_si256(_mm256_srli_epi32(d, rsh), lo8);
			__m256i top = _mm256_madd_epi16(
				_mm256_or_si256(pa, _mm256_slli_epi32(pb, 16)), wxp);
			__m256i bot = _mm256_madd_epi16(
				_mm256_or_si256(pc, _mm256_slli_epi32(pd, 16)), wxp);
			__m256i r = _mm256_add_epi32(_mm256_mullo_epi32(top, wy0),
						     _mm256_mullo_epi32(bot, wy));
			_mm256_storeu_si256((__m256i *)(void *)(rowv + ch * n + x), r);
		}
	}
	return x;
}

static int have_avx2(void)
{
	static int cached = -1; /* a pure function of the CPU: safe to race */
	if (cached < 0)
		cached = __builtin_cpu_supports("avx2") ? 1 : 0;
	return cached;
}
#endif

int aug_warp(const aug_image *src, const aug_plan *p,
	     const aug_transform_opts *o, void *dst, ims_error *err)
{
#ifdef HAVE_X86
	return aug_warp_impl(src, p, o, dst, have_avx2(), err);
#else
	return aug_warp_impl(src, p, o, dst, 0, err);
#endif
}

int aug_warp_impl(const aug_image *src, const aug_plan *p,
		  const aug_transform_opts *o, void *dst, int simd,
		  ims_error *err)
{
	FORWARD_IF_ERR(check_opts(o, err));
	RETURN_IF(!src || !src->pixels || src->width < 1 || src->height < 1,
		  err, IMS_EINVAL, "cannot warp: empty source image");
	RETURN_IF(src->channels != 1 && src->channels != 3 && src->channels != 4,
		  err, IMS_EINVAL,
		  "cannot warp a %d-channel image: need 1, 3 or 4 channels",
		  src->channels);
	RETURN_IF(!p || !dst, err, IMS_EINVAL, "cannot warp: no plan or output");
	const int ow = o->out_w, oh = o->out_h;
	const double *m = p->m;
	for (int k = 0; k < 6; k++)
		RETURN_IF(!isfinite(m[k]), err, IMS_EINVAL,
			  "cannot warp: plan matrix is not finite");
	for (int k = 0; k < 4; k++) {
		double x = (k & 1) ? ow : 0, y = (k & 2) ? oh : 0;
		double u = m[0] * x + m[1] * y + m[2];
		double v = m[3] * x + m[4] * y + m[5];
		RETURN_IF(fabs(u) > COORD_LIMIT || fabs(v) > COORD_LIMIT, err,
			  IMS_EINVAL,
			  "cannot warp: plan maps the output to (%g, %g), "
			  "beyond +-2^24 pixels",
			  u, v);
	}

	const int nc = src->channels;
	const int cs = nc == 1 ? 1 : 3; /* channels interpolated */
	const double one = (double)((int64_t)1 << FIX_BITS);
	/* Step per output pixel along a row, in 32.32 fixed point. */
	const int64_t du = llround(m[0] * one), dv = llround(m[3] * one);
	int32_t rowv[3 * AUG_MAX_OUT_SIDE];
	const size_t plane = (size_t)ow * oh;
	float inv_std[3];
	for (int c = 0; c < 3; c++)
		inv_std[c] = 1.0f / o->std[c];

	for (int y = 0; y < oh; y++) {
		/* Sample point of pixel (0, y), shifted by -0.5 so that its
		 * integer part is the top-left tap. */
		double yc = y + 0.5;
		int64_t su = llround((m[0] * 0.5 + m[1] * yc + m[2] - 0.5) * one);
		int64_t sv = llround((m[3] * 0.5 + m[4] * yc + m[5] - 0.5) * one);
		int done = 0;
#ifdef HAVE_X86
		if (simd && nc != 1 && ow >= 8) {
			int64_t eu = su + (int64_t)(ow - 1) * du;
			int64_t ev = sv + (int64_t)(ow - 1) * dv;
			int64_t u0 = su >> FIX_BITS, u1 = eu >> FIX_BITS;
			int64_t v0 = sv >> FIX_BITS, v1 = ev >> FIX_BITS;
			int64_t ulim = src->width - 1, vlim = src->height - 1;
			/* gathers take int32 byte offsets */
			if (u0 >= 0 && u1 >= 0 && u0 < ulim && u1 < ulim &&
			    v0 >= 0 && v1 >= 0 && v0 < vlim && v1 < vlim &&
			    src->width < (1 << 20) &&
			    (int64_t)src->height * (int64_t)src->stride < INT32_MAX)
				done = warp_row_avx2(src, nc, su, sv, du, dv,
						     ow, rowv);
		}
#else
		(void)simd;
#endif
		if (done < ow) {
			/* the tail (or the whole row) in scalar code, its
			 * values stored at rowv + done within each plane */
			int64_t tu = su + (int64_t)done * du;
			int64_t tv = sv + (int64_t)done * dv;
			int32_t *rv = rowv + done;
			switch (nc) {
			case 1:
				warp_row(src, 1, 1, tu, tv, du, dv, ow - done,
					 ow, rv);
				break;
			case 3:
				warp_row(src, 3, 3, tu, tv, du, dv, ow - done,
					 ow, rv);
				break;
			default:
				warp_row(src, 4, 3, tu, tv, du, dv, ow - done,
					 ow, rv);
				break;
			}
		}
		for (int c = 0; c < 3; c++) {
			const int32_t *rv = rowv + (cs == 1 ? 0 : c * ow);
			/* constant steps, so each store loop is specialised */
			if (o->layout == AUG_LAYOUT_NCHW)
				store_row(rv, ow, o->dtype, o->mean[c], inv_std[c],
					  dst, c * plane + (size_t)y * ow, 1);
			else
				store_row(rv, ow, o->dtype, o->mean[c], inv_std[c],
					  dst, (size_t)y * ow * 3 + c, 3);
		}
	}
	return 0;
}
