/*
 * sample.c - the built-in sample dataset: procedurally drawn shapes and
 * textures, one visual concept per class, written as class folders.
 *
 * Every image is a pure function of (seed, class, index): its scene
 * parameters come from one ims_rng stream and its pixel noise from
 * another, both seeded from that triple, so images can be drawn in any
 * order on any number of threads. Shapes and textures are signed distance
 * functions in pixel units (negative inside), which gives one-pixel
 * anti-aliased edges for free: coverage = clamp(0.5 - d, 0, 1).
 *
 * Writing the class folders is sample_write.c's.
 */
#define _GNU_SOURCE
#include "datasets.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "augment/augment.h"
#include "datasets/sample_internal.h"

#define PI 3.14159265358979323846
#define DEG (PI / 180.0)
#define MIN_CONTRAST 80.0 /* luma difference between foreground and background */

const struct ds_sample_kind ds_sample_kinds[K_COUNT] = {
	[K_CHECKERBOARD] = {"checkerboard", "checkerboard filling the image, 3-8 cells across, tilted up to 12 degrees"},
	[K_CIRCLE] = {"circle", "filled disc"},
	[K_CRESCENT] = {"crescent", "disc with an offset disc cut away, any orientation"},
	[K_CROSS] = {"cross", "plus sign with equal arms, tilted up to 10 degrees"},
	[K_DIAGONAL] = {"diagonal", "stripes at 45 degrees (either way, +-8), 3.5-8 periods across"},
	[K_DIAMOND] = {"diamond", "filled square standing on a corner (45 +-10 degrees)"},
	[K_DOTS] = {"dots", "polka dots on a square lattice at any angle"},
	[K_FRAME] = {"frame", "hollow square outline, tilted up to 10 degrees"},
	[K_GRID] = {"grid", "thin lines in both directions, tilted up to 12 degrees"},
	[K_HORIZONTAL] = {"horizontal", "horizontal stripes (+-8 degrees), 3.5-8 periods across"},
	[K_RING] = {"ring", "annulus: a circle outline"},
	[K_SQUARE] = {"square", "filled square, tilted up to 10 degrees"},
	[K_STAR] = {"star", "five-pointed star, any orientation"},
	[K_TARGET] = {"target", "bullseye: a dot inside 2-3 concentric rings"},
	[K_TRIANGLE] = {"triangle", "filled equilateral triangle, any orientation"},
	[K_VERTICAL] = {"vertical", "vertical stripes (+-8 degrees), 3.5-8 periods across"},
	[K_ZIGZAG] = {"zigzag", "horizontal zigzag lines (+-8 degrees)"},
};

int ds_sample_class_count_max(void)
{
	return K_COUNT;
}

const char *ds_sample_class_name(int k)
{
	return k >= 0 && k < K_COUNT ? ds_sample_kinds[k].name : NULL;
}

const char *ds_sample_class_description(int k)
{
	return k >= 0 && k < K_COUNT ? ds_sample_kinds[k].description : NULL;
}

ds_sample_file_kind ds_sample_file_kind_of(int index)
{
	if (index % 20 == 9)
		return DS_SAMPLE_PNG_ALPHA;
	if (index % 5 == 4)
		return DS_SAMPLE_PNG;
	if (index % 20 == 7)
		return DS_SAMPLE_JPEG_GREY;
	return DS_SAMPLE_JPEG;
}

int ds_sample_file_channels(ds_sample_file_kind kind)
{
	switch (kind) {
	case DS_SAMPLE_JPEG_GREY: return 1;
	case DS_SAMPLE_PNG_ALPHA: return 4;
	default: return 3;
	}
}

int ds_sample_is_png(ds_sample_file_kind kind)
{
	return kind == DS_SAMPLE_PNG || kind == DS_SAMPLE_PNG_ALPHA;
}

int ds_sample_file_name(int k, int index, char *buf, size_t len,
			ims_error *err)
{
	RETURN_IF(k < 0 || k >= K_COUNT, err, IMS_EINVAL,
		  "cannot name sample image: class %d out of range [0, %d)", k,
		  K_COUNT);
	RETURN_IF(index < 0 || index >= DS_SAMPLE_MAX_PER_CLASS, err,
		  IMS_EINVAL, "cannot name sample image: index %d out of range",
		  index);
	int n = snprintf(buf, len, "%s_%04d.%s", ds_sample_kinds[k].name, index,
			 ds_sample_is_png(ds_sample_file_kind_of(index)) ? "png" : "jpg");
	RETURN_IF(n < 0 || (size_t)n >= len, err, IMS_ELIMIT,
		  "cannot name sample image: buffer of %zu bytes too small", len);
	return 0;
}

/* ---- scene: everything random about one image, drawn up front ---- */

typedef struct scene {
	int kind, width, height, channels;
	double cx, cy;   /* shape centre, or texture origin (random phase) */
	double cs, sn;   /* rotation: u = cs*dx + sn*dy, v = -sn*dx + cs*dy */
	double a, b, c;  /* kind-specific lengths in pixels, see shape_sd */
	double bg0[3], bg1[3]; /* background gradient end colours */
	double gx, gy, gextent; /* gradient direction and half-extent */
	double fg[3];
	double alpha_min; /* RGBA: background alpha at the corners */
	double noise;     /* noise standard deviation, grey levels */
} scene;

static double uni(ims_rng *r, double lo, double hi)
{
	return lo + (hi - lo) * ims_rng_uniform(r);
}

static double luma(const double c[3])
{
	return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2];
}

static double clampd(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

/* Colour c seen over white through alpha a (what a decoder that composites
 * on white shows for the RGBA images). */
static void over_white(const double c[3], double a, double out[3])
{
	for (int i = 0; i < 3; i++)
		out[i] = c[i] * a / 255.0 + 255.0 * (1.0 - a / 255.0);
}

/* Smallest luma difference between fg and the background anywhere: both
 * gradient ends and, for RGBA, both ends over white at the lowest alpha. */
static double min_contrast(const scene *s, const double fg[3])
{
	const double *ends[2] = {s->bg0, s->bg1};
	double m = 255;
	for (int e = 0; e < 2; e++) {
		m = fmin(m, fabs(luma(fg) - luma(ends[e])));
		if (s->channels == 4) {
			double w[3];
			over_white(ends[e], s->alpha_min, w);
			m = fmin(m, fabs(luma(fg) - luma(w)));
		}
	}
	return m;
}

static void pick_colours(scene *s, ims_rng *r)
{
	for (int i = 0; i < 3; i++) {
		s->bg0[i] = (double)ims_rng_below(r, 256);
		s->bg1[i] = clampd(s->bg0[i] + uni(r, -40, 40), 0, 255);
	}
	double ang = uni(r, 0, 2 * PI);
	s->gx = cos(ang);
	s->gy = sin(ang);
	s->gextent = 0.5 * (fabs(s->gx) * s->width + fabs(s->gy) * s->height);
	s->alpha_min = s->channels == 4 ? uni(r, 140, 230) : 255;
	/* Rejection keeps the foreground uniform among the colours that
	 * contrast. A mid-grey background accepts a few percent of colours;
	 * the rare backgrounds that accept almost none get black or white. */
	for (int tries = 0; tries < 200; tries++) {
		double fg[3];
		for (int i = 0; i < 3; i++)
			fg[i] = (double)ims_rng_below(r, 256);
		if (min_contrast(s, fg) >= MIN_CONTRAST) {
			memcpy(s->fg, fg, sizeof(fg));
			return;
		}
	}
	const double black[3] = {0, 0, 0}, white[3] = {255, 255, 255};
	memcpy(s->fg, min_contrast(s, black) >= min_contrast(s, white) ? black : white,
	       sizeof(s->fg));
}

/* Picks the rotation angle (radians). */
static void set_angle(scene *s, double ang)
{
	s->cs = cos(ang);
	s->sn = sin(ang);
}

/* A shape whose bounding circle has radius rb lies whole inside the
 * central square of the image (side = shorter side), so a centre crop
 * keeps it; its centre is uniform over the positions that allow that. */
static void place_shape(scene *s, ims_rng *r, double rb)
{
	double side = s->width < s->height ? s->width : s->height;
	double x0 = 0.5 * (s->width - side), y0 = 0.5 * (s->height - side);
	double margin = rb + 1.0;
	s->cx = x0 + uni(r, margin, side - margin);
	s->cy = y0 + uni(r, margin, side - margin);
}

static void setup_scene(scene *s, uint64_t seed, int k, int index)
{
	ims_rng r;
	ims_rng_seed(&r, ims_hash64(ims_hash64(seed, (uint64_t)k), (uint64_t)index), 1);
	memset(s, 0, sizeof(*s));
	s->kind = k;
	s->channels = ds_sample_file_channels(ds_sample_file_kind_of(index));

	/* Size: mostly up to 256 a side, about one in ten up to 400; aspect
	 * ratio at most 2 so the central square is most of the image. */
	int max_side = ims_rng_uniform(&r) < 0.1 ? DS_SAMPLE_MAX_SIDE : 256;
	uint64_t span = (uint64_t)(max_side - DS_SAMPLE_MIN_SIDE + 1);
	do {
		s->width = DS_SAMPLE_MIN_SIDE + (int)ims_rng_below(&r, span);
		s->height = DS_SAMPLE_MIN_SIDE + (int)ims_rng_below(&r, span);
	} while (s->width > 2 * s->height || s->height > 2 * s->width);

	pick_colours(s, &r);
	s->noise = uni(&r, 0.5, 4.0);

	double side = s->width < s->height ? s->width : s->height;
	/* Shapes: bounding radius 28-46% of the shorter side. */
	double rb = side * uni(&r, 0.28, 0.46);
	double tilt = uni(&r, -1, 1);
	switch (k) {
	case K_CIRCLE:
		s->a = rb;
		set_angle(s, 0);
		place_shape(s, &r, rb);
		break;
	case K_RING:
		s->a = rb;                       /* outer radius */
		s->b = rb * uni(&r, 0.2, 0.4);   /* thickness */
		set_angle(s, 0);
		place_shape(s, &r, rb);
		break;
	case K_TARGET: {
		int rings = 2 + (int)ims_rng_below(&r, 2);
		s->a = rb;                       /* outer radius */
		s->b = rb / (rings + 0.25);      /* band period */
		set_angle(s, 0);
		place_shape(s, &r, rb);
		break;
	}
	case K_CRESCENT:
		s->a = rb;                          /* disc radius */
		s->b = rb * uni(&r, 0.35, 0.55);    /* offset of the cut */
		s->c = rb * uni(&r, 0.75, 0.9);     /* radius of the cut */
		set_angle(s, uni(&r, 0, 2 * PI));
		place_shape(s, &r, rb);
		break;
	case K_SQUARE:
	case K_DIAMOND:
		s->a = rb / sqrt(2.0);              /* half side */
		set_angle(s, (k == K_DIAMOND ? 45 : 0) * DEG + tilt * 10 * DEG);
		place_shape(s, &r, rb);
		break;
	case K_FRAME:
		s->a = rb / sqrt(2.0);              /* outer half side */
		s->b = s->a * uni(&r, 0.22, 0.4);   /* thickness */
		set_angle(s, tilt * 10 * DEG);
		place_shape(s, &r, rb);
		break;
	case K_CROSS:
		s->a = rb * 0.95;                   /* arm half length */
		s->b = s->a * uni(&r, 0.18, 0.3);   /* arm half width */
		set_angle(s, tilt * 10 * DEG);
		place_shape(s, &r, hypot(s->a, s->b));
		break;
	case K_TRIANGLE:
		s->a = rb * sqrt(3.0) / 2;          /* half side; circumradius rb */
		set_angle(s, uni(&r, 0, 2 * PI));
		place_shape(s, &r, rb);
		break;
	case K_STAR:
		s->a = rb;                          /* tip radius */
		s->b = uni(&r, 0.38, 0.5);          /* inner/outer radius ratio */
		set_angle(s, uni(&r, 0, 2 * PI));
		place_shape(s, &r, rb);
		break;
	/* Textures fill the image. */
	case K_HORIZONTAL:
	case K_VERTICAL:
	case K_DIAGONAL: {
		s->a = side / uni(&r, 3.5, 8.0);    /* period */
		s->b = s->a * uni(&r, 0.35, 0.6);   /* stripe width */
		double base = k == K_HORIZONTAL ? 0 : k == K_VERTICAL ? 90 :
			      ims_rng_below(&r, 2) ? 45 : -45;
		set_angle(s, (base + tilt * 8) * DEG);
		break;
	}
	case K_CHECKERBOARD:
		s->a = side / uni(&r, 3.0, 8.0);    /* cell side */
		set_angle(s, tilt * 12 * DEG);
		break;
	case K_GRID:
		s->a = side / uni(&r, 3.0, 7.0);    /* line spacing */
		s->b = s->a * uni(&r, 0.1, 0.22);   /* line width */
		set_angle(s, tilt * 12 * DEG);
		break;
	case K_DOTS:
		s->a = side / uni(&r, 3.0, 7.0);    /* lattice spacing */
		s->b = s->a * uni(&r, 0.2, 0.34);   /* dot radius */
		set_angle(s, uni(&r, 0, PI / 2));
		break;
	case K_ZIGZAG:
		s->a = side / uni(&r, 3.0, 6.0);    /* line spacing */
		s->b = s->a * uni(&r, 0.3, 0.45);   /* line width */
		s->c = s->a * uni(&r, 1.0, 2.0);    /* zigzag wavelength */
		set_angle(s, tilt * 8 * DEG);
		break;
	}
	/* Textures: a random origin gives a random phase. */
	switch (k) {
	case K_HORIZONTAL: case K_VERTICAL: case K_DIAGONAL:
	case K_CHECKERBOARD: case K_GRID: case K_DOTS: case K_ZIGZAG:
		s->cx = uni(&r, 0, s->width);
		s->cy = uni(&r, 0, s->height);
		break;
	default:
		break;
	}
}

/* ---- signed distance functions (pixels; negative inside) ---- */

/* Distance to bands of width w centred on multiples of period p. */
static double stripe_sd(double t, double p, double w)
{
	double m = t - p * floor(t / p + 0.5);
	return fabs(m) - 0.5 * w;
}

static double box_sd(double u, double v, double hu, double hv)
{
	double qx = fabs(u) - hu, qy = fabs(v) - hv;
	double ox = qx > 0 ? qx : 0, oy = qy > 0 ? qy : 0;
	double in = qx > qy ? qx : qy;
	return sqrt(ox * ox + oy * oy) + (in < 0 ? in : 0);
}

/* Equilateral triangle of half side h centred on its centroid (after
 * Inigo Quilez's 2D distance functions). */
static double triangle_sd(double x, double y, double h)
{
	const double k = sqrt(3.0);
	x = fabs(x) - h;
	y = y + h / k;
	if (x + k * y > 0) {
		double nx = (x - k * y) / 2, ny = (-k * x - y) / 2;
		x = nx;
		y = ny;
	}
	x -= clampd(x, -2 * h, 0);
	double len = sqrt(x * x + y * y);
	return y > 0 ? -len : len;
}

/* Five-pointed star of tip radius r and inner ratio rf (after Quilez). */
static double star_sd(double x, double y, double r, double rf)
{
	const double k1x = 0.809016994375, k1y = -0.587785252292;
	const double k2x = -k1x, k2y = k1y;
	x = fabs(x);
	double d1 = k1x * x + k1y * y;
	if (d1 > 0) {
		x -= 2 * d1 * k1x;
		y -= 2 * d1 * k1y;
	}
	double d2 = k2x * x + k2y * y;
	if (d2 > 0) {
		x -= 2 * d2 * k2x;
		y -= 2 * d2 * k2y;
	}
	x = fabs(x);
	y -= r;
	double bax = rf * -k1y, bay = rf * k1x - 1;
	double h = clampd((x * bax + y * bay) / (bax * bax + bay * bay), 0, r);
	double dx = x - bax * h, dy = y - bay * h;
	double len = sqrt(dx * dx + dy * dy);
	return y * bax - x * bay > 0 ? len : -len;
}

static double shape_sd(const scene *s, double x, double y)
{
	double dx = x - s->cx, dy = y - s->cy;
	double u = s->cs * dx + s->sn * dy, v = -s->sn * dx + s->cs * dy;
	switch (s->kind) {
	case K_CIRCLE:
		return sqrt(u * u + v * v) - s->a;
	case K_RING:
		return fabs(sqrt(u * u + v * v) - (s->a - 0.5 * s->b)) - 0.5 * s->b;
	case K_TARGET: {
		double rho = sqrt(u * u + v * v);
		double d = stripe_sd(rho, s->b, 0.5 * s->b);
		return d > rho - s->a ? d : rho - s->a;
	}
	case K_CRESCENT: {
		double d1 = sqrt(u * u + v * v) - s->a;
		double d2 = hypot(u - s->b, v) - s->c;
		return d1 > -d2 ? d1 : -d2;
	}
	case K_SQUARE:
	case K_DIAMOND:
		return box_sd(u, v, s->a, s->a);
	case K_FRAME:
		return fabs(box_sd(u, v, s->a - 0.5 * s->b, s->a - 0.5 * s->b)) -
		       0.5 * s->b;
	case K_CROSS: {
		double d1 = box_sd(u, v, s->a, s->b), d2 = box_sd(u, v, s->b, s->a);
		return d1 < d2 ? d1 : d2;
	}
	case K_TRIANGLE:
		return triangle_sd(u, v, s->a);
	case K_STAR:
		return star_sd(u, v, s->a, s->b);
	case K_HORIZONTAL:
	case K_VERTICAL:
	case K_DIAGONAL:
		return stripe_sd(v, s->a, s->b);
	case K_CHECKERBOARD: {
		/* Inside where exactly one of the two band sets is; the nearer
		 * band edge approximates the distance. */
		double su = stripe_sd(u, 2 * s->a, s->a);
		double sv = stripe_sd(v, 2 * s->a, s->a);
		double edge = fmin(fabs(su), fabs(sv));
		return (su < 0) != (sv < 0) ? -edge : edge;
	}
	case K_GRID: {
		double d1 = stripe_sd(u, s->a, s->b), d2 = stripe_sd(v, s->a, s->b);
		return d1 < d2 ? d1 : d2;
	}
	case K_DOTS: {
		double mu = u - s->a * floor(u / s->a + 0.5);
		double mv = v - s->a * floor(v / s->a + 0.5);
		return sqrt(mu * mu + mv * mv) - s->b;
	}
	case K_ZIGZAG: {
		/* Triangle wave of amplitude A = 0.4 * spacing, wavelength c;
		 * the vertical distance is scaled by the slope to approximate
		 * the true one. */
		double amp = 0.4 * s->a;
		double ph = u / s->c - floor(u / s->c);
		double tri = 4 * fabs(ph - 0.5) - 1; /* -1..1 */
		double slope = 4 * amp / s->c;
		return stripe_sd(v - amp * tri, s->a, s->b * sqrt(1 + slope * slope)) /
		       sqrt(1 + slope * slope);
	}
	}
	return 1e9;
}

/* Approximately normal noise: Irwin-Hall sum of four 16-bit uniforms from
 * one draw (variance 4/12, hence the sqrt(3) to make it unit). */
static double noise_unit(ims_rng *r)
{
	uint64_t x = ims_rng_next(r);
	double sum = (double)(x & 0xffff) + (double)((x >> 16) & 0xffff) +
		     (double)((x >> 32) & 0xffff) + (double)(x >> 48);
	return (sum / 65536.0 - 2.0) * sqrt(3.0);
}

static uint8_t to_u8(double v)
{
	v = floor(v + 0.5);
	return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

int ds_sample_render(uint64_t seed, int k, int index, struct aug_image *out,
		     ims_error *err)
{
	RETURN_IF(k < 0 || k >= K_COUNT, err, IMS_EINVAL,
		  "cannot draw sample image: class %d out of range [0, %d)", k,
		  K_COUNT);
	RETURN_IF(index < 0 || index >= DS_SAMPLE_MAX_PER_CLASS, err,
		  IMS_EINVAL, "cannot draw sample image: index %d out of range [0, %d)",
		  index, DS_SAMPLE_MAX_PER_CLASS);
	scene s;
	setup_scene(&s, seed, k, index);
	FORWARD_IF_ERR(aug_image_alloc(out, s.width, s.height, s.channels, err));

	ims_rng nr;
	ims_rng_seed(&nr, ims_hash64(ims_hash64(seed, (uint64_t)k), (uint64_t)index), 2);
	double cxm = 0.5 * s.width, cym = 0.5 * s.height;
	double half_diag2 = cxm * cxm + cym * cym;
	for (int y = 0; y < s.height; y++) {
		uint8_t *row = out->pixels + (size_t)y * out->stride;
		for (int x = 0; x < s.width; x++) {
			double px = x + 0.5, py = y + 0.5;
			double t = 0.5 + ((px - cxm) * s.gx + (py - cym) * s.gy) /
						 (2 * s.gextent);
			double cov = clampd(0.5 - shape_sd(&s, px, py), 0, 1);
			double c[3];
			for (int i = 0; i < 3; i++) {
				double bg = s.bg0[i] + (s.bg1[i] - s.bg0[i]) * t;
				c[i] = bg + (s.fg[i] - bg) * cov + s.noise * noise_unit(&nr);
			}
			if (s.channels == 1) {
				row[x] = to_u8(luma(c));
			} else {
				uint8_t *p = row + (size_t)x * (size_t)s.channels;
				for (int i = 0; i < 3; i++)
					p[i] = to_u8(c[i]);
				if (s.channels == 4) {
					/* Background fades towards the corners;
					 * the shape stays opaque. */
					double rr = ((px - cxm) * (px - cxm) +
						     (py - cym) * (py - cym)) / half_diag2;
					double a = 255 - (255 - s.alpha_min) * rr;
					p[3] = to_u8(a + (255 - a) * cov);
				}
			}
		}
	}
	return 0;
}

int ds_sample_encode(struct aug_codec *codec, uint64_t seed, int k,
		     int index, struct aug_image *scratch, ims_buf *out,
		     ims_error *err)
{
	FORWARD_IF_ERR(ds_sample_render(seed, k, index, scratch, err));
	if (ds_sample_is_png(ds_sample_file_kind_of(index)))
		return aug_encode_png(codec, scratch, out, err);
	return aug_encode_jpeg(codec, scratch, DS_SAMPLE_JPEG_QUALITY, out, err);
}
