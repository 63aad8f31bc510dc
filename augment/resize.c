/*
 * resize.c - separable antialiased resampling of 8-bit interleaved images.
 *
 * The filter is a triangle (tent) whose support is one output pixel: when
 * shrinking by s it spans s input pixels each side, so every input pixel
 * contributes (no aliasing); when enlarging it is plain bilinear. This is
 * PIL's Image.resize(..., BILINEAR) with its default antialiasing, pixel
 * centres at (i + 0.5) * in / out.
 *
 * Two passes per output row: vertical (a weighted sum of input rows, into
 * a one-row uint8 scratch), then horizontal into dst. Weights are
 * precomputed per axis in 14-bit fixed point summing to exactly 1 << 14,
 * so a constant image stays constant and the result depends on nothing but
 * the inputs (no floating point per pixel, no thread count; the SSE2 and
 * portable paths compute the same integers). An axis whose size does not
 * change is skipped, so same-size resizing is an exact copy.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "augment/augment_internal.h"

#define HALF (1 << (AUG_RS_BITS - 1))

void aug_rs_free(aug_rs_scratch *s)
{
	free(s->h.first);
	free(s->h.count);
	free(s->h.weights);
	free(s->h.pairs);
	free(s->v.first);
	free(s->v.count);
	free(s->v.weights);
	free(s->v.pairs);
	free(s->tmp);
	free(s->acc);
	memset(s, 0, sizeof(*s));
}

static double tent(double x)
{
	x = fabs(x);
	return x < 1.0 ? 1.0 - x : 0.0;
}

/* Tables for in -> out along one axis; kept while (in, out) is unchanged. */
static int build_axis(aug_rs_axis *a, int in, int out, ims_error *err)
{
	if (a->in == in && a->out == out)
		return 0;
	double scale = (double)in / out;
	double fscale = scale > 1.0 ? scale : 1.0; /* filter stretch */
	double support = fscale;                   /* tent radius 1 */
	int stride = (int)ceil(support) * 2 + 1;
	size_t n_w = (size_t)out * (size_t)stride;
	if ((size_t)out > a->cap_out) {
		int32_t *f = realloc(a->first, (size_t)out * sizeof(*f));
		if (f)
			a->first = f;
		int32_t *c = realloc(a->count, (size_t)out * sizeof(*c));
		if (c)
			a->count = c;
		RETURN_IF(!f || !c, err, IMS_ENOMEM,
			  "cannot resize: out of memory for filter tables");
		a->cap_out = (size_t)out;
	}
	if (n_w > a->cap_w) {
		int16_t *w = realloc(a->weights, n_w * sizeof(*w));
		if (w)
			a->weights = w;
		/* pairs: out * (stride + 1) / 2 <= n_w entries */
		int32_t *p = realloc(a->pairs, n_w * sizeof(*p));
		if (p)
			a->pairs = p;
		RETURN_IF(!w || !p, err, IMS_ENOMEM,
			  "cannot resize: out of memory for filter tables");
		a->cap_w = n_w;
	}
	double *tw = malloc((size_t)stride * sizeof(*tw));
	RETURN_IF(!tw, err, IMS_ENOMEM, "cannot resize: out of memory");
	a->in = a->out = 0; /* invalid until complete */
	for (int i = 0; i < out; i++) {
		double center = (i + 0.5) * scale;
		int lo = (int)floor(center - support + 0.5);
		int hi = (int)floor(center + support + 0.5);
		if (lo < 0)
			lo = 0;
		if (hi > in)
			hi = in;
		if (hi - lo > stride)
			hi = lo + stride;
		int n = hi - lo;
		double total = 0.0;
		for (int k = 0; k < n; k++) {
			tw[k] = tent((lo + k + 0.5 - center) / fscale);
			total += tw[k];
		}
		int16_t *w = a->weights + (size_t)i * stride;
		int sum = 0, big = 0;
		for (int k = 0; k < n; k++) {
			w[k] = (int16_t)lrint(total > 0 ? tw[k] / total * AUG_RS_ONE : 0);
			sum += w[k];
			if (w[k] > w[big])
				big = k;
		}
		if (n == 0 || total <= 0) {
			/* Cannot happen for in, out >= 1, but never divide
			 * by nothing: take the nearest pixel. */
			lo = (int)center < in ? (int)center : in - 1;
			n = 1;
			w[0] = AUG_RS_ONE;
		} else {
			w[big] = (int16_t)(w[big] + AUG_RS_ONE - sum);
		}
		/* Zero taps at the ends cost time and change nothing. */
		while (n > 1 && w[0] == 0) {
			memmove(w, w + 1, (size_t)(n - 1) * sizeof(*w));
			lo++;
			n--;
		}
		while (n > 1 && w[n - 1] == 0)
			n--;
		a->first[i] = lo;
		a->count[i] = n;
		int32_t *pr = a->pairs + (size_t)i * ((stride + 1) / 2);
		for (int k = 0; k < stride; k += 2)
			pr[k / 2] = (int32_t)((uint32_t)(uint16_t)(k < n ? w[k] : 0) |
					      ((uint32_t)(uint16_t)(k + 1 < n ? w[k + 1] : 0)
					       << 16));
	}
	free(tw);
	a->max_count = 0;
	for (int i = 0; i < out; i++)
		if (a->count[i] > a->max_count)
			a->max_count = a->count[i];
	a->in = in;
	a->out = out;
	a->stride = stride;
	return 0;
}

static inline uint8_t clip8(int32_t v)
{
	v >>= AUG_RS_BITS;
	return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

#if defined(__SSE2__)
#include <emmintrin.h>

/* 4 bytes from p into the low lane. Callers guarantee 4 readable bytes
 * (rows are read from a padded copy), also for 3-channel pixels. */
static inline __m128i load4(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return _mm_cvtsi32_si128(v);
}

/* Output pixel x of a horizontal pass, 3 or 4 channels, packed into the
 * low bytes of an int32: two taps per pmaddwd, all channels at once. */
static inline __attribute__((always_inline)) int32_t
hpix(const uint8_t *in, const aug_rs_axis *a, int x, const int ch,
     const int four)
{
	const __m128i zero = _mm_setzero_si128();
	const int32_t *wp = a->pairs + (size_t)x * ((a->stride + 1) / 2);
	const uint8_t *p = in + (size_t)a->first[x] * ch;
	__m128i acc = _mm_set1_epi32(HALF);
	if (four) {
		/* At most 4 taps (every shrink by 2 or less, and all
		 * enlarging): two pairs, no loop. Missing taps have weight
		 * 0 and read inside the row or its padding. */
		__m128i ab = _mm_unpacklo_epi8(load4(p), load4(p + ch));
		__m128i cd = _mm_unpacklo_epi8(load4(p + 2 * ch), load4(p + 3 * ch));
		acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_unpacklo_epi8(ab, zero),
							_mm_set1_epi32(wp[0])));
		acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_unpacklo_epi8(cd, zero),
							_mm_set1_epi32(wp[1])));
	} else {
		/* An odd tap count reads one pixel past the last tap with
		 * weight 0: inside the row or its padding. */
		const uint8_t *end = p + (size_t)a->count[x] * ch;
		for (; p < end; p += 2 * ch, wp++) {
			__m128i ab = _mm_unpacklo_epi8(load4(p), load4(p + ch));
			ab = _mm_unpacklo_epi8(ab, zero);
			acc = _mm_add_epi32(acc, _mm_madd_epi16(ab, _mm_set1_epi32(*wp)));
		}
	}
	acc = _mm_srai_epi32(acc, AUG_RS_BITS);
	acc = _mm_packs_epi32(acc, acc);
	return _mm_cvtsi128_si32(_mm_packus_epi16(acc, acc));
}

/* Stores are 4 bytes wide; with 3 channels the spare byte is overwritten
 * by the next pixel, and the row's last pixel stores only 3. */
static inline __attribute__((always_inline)) void
hrow_simd(const uint8_t *in, uint8_t *out, const aug_rs_axis *a, const int ch,
	  const int four)
{
	int last = a->out - 1;
	for (int x = 0; x < last; x++) {
		int32_t v = hpix(in, a, x, ch, four);
		memcpy(out + (size_t)x * ch, &v, 4);
	}
	int32_t v = hpix(in, a, last, ch, four);
	memcpy(out + (size_t)last * ch, &v, ch == 4 ? 4 : 3);
}
#endif

/*
 * One row, horizontally: in (a->in pixels of ch channels) to out. in must
 * have 16 readable bytes past its last pixel (the SSE2 path loads 4-byte
 * words for 3-channel pixels and reads taps in pairs or fours).
 */
static void hrow(const uint8_t *in, uint8_t *out, int ch, const aug_rs_axis *a)
{
#if defined(__SSE2__)
	int four = a->max_count <= 4; /* stride >= 3: two pairs exist */
	if (ch == 3 && four)
		hrow_simd(in, out, a, 3, 1);
	else if (ch == 3)
		hrow_simd(in, out, a, 3, 0);
	else if (ch == 4 && four)
		hrow_simd(in, out, a, 4, 1);
	else if (ch == 4)
		hrow_simd(in, out, a, 4, 0);
	if (ch == 3 || ch == 4)
		return;
#endif
	for (int x = 0; x < a->out; x++) {
		const int16_t *w = a->weights + (size_t)x * a->stride;
		const uint8_t *p = in + (size_t)a->first[x] * ch;
		int n = a->count[x];
		for (int c = 0; c < ch; c++) {
			int32_t v = HALF;
			for (int k = 0; k < n; k++)
				v += w[k] * p[k * ch + c];
			out[(size_t)x * ch + c] = clip8(v);
		}
	}
}

/*
 * One row, vertically: out[i] = sum_k w[k] * rows[k][i] for i < width,
 * rows[k] = base + k * bstride. Runs along the row, 16 bytes and two taps
 * per step with SSE2 (sums stay in registers); acc is scratch of width
 * int32 for the portable path.
 */
static void vrow(const uint8_t *base, size_t bstride, const int16_t *w,
		 const int32_t *pairs, int n, int width, int32_t *acc, uint8_t *out)
{
	int i = 0;
#if defined(__SSE2__)
	const __m128i zero = _mm_setzero_si128();
	const __m128i half = _mm_set1_epi32(HALF);
	for (; i + 16 <= width; i += 16) {
		__m128i s0 = half, s1 = half, s2 = half, s3 = half;
		int k = 0;
		for (; k < n; k += 2) {
			const uint8_t *r = base + (size_t)k * bstride + i;
			__m128i ra = _mm_loadu_si128((const __m128i *)r);
			/* An odd count's last pair has weight 0 for a row
			 * that may not exist: use zeros instead. */
			__m128i rb = zero;
			if (k + 1 < n)
				rb = _mm_loadu_si128((const __m128i *)(r + bstride));
			__m128i wp = _mm_set1_epi32(pairs[k / 2]);
			__m128i lo = _mm_unpacklo_epi8(ra, rb);
			__m128i hi = _mm_unpackhi_epi8(ra, rb);
			s0 = _mm_add_epi32(s0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), wp));
			s1 = _mm_add_epi32(s1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), wp));
			s2 = _mm_add_epi32(s2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), wp));
			s3 = _mm_add_epi32(s3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), wp));
		}
		s0 = _mm_srai_epi32(s0, AUG_RS_BITS);
		s1 = _mm_srai_epi32(s1, AUG_RS_BITS);
		s2 = _mm_srai_epi32(s2, AUG_RS_BITS);
		s3 = _mm_srai_epi32(s3, AUG_RS_BITS);
		__m128i r = _mm_packus_epi16(_mm_packs_epi32(s0, s1),
					     _mm_packs_epi32(s2, s3));
		_mm_storeu_si128((__m128i *)(out + i), r);
	}
#endif
	if (i == width)
		return;
	for (int j = i; j < width; j++)
		acc[j] = HALF;
	for (int k = 0; k < n; k++) {
		const uint8_t *s = base + (size_t)k * bstride;
		int32_t wk = w[k];
		for (int j = i; j < width; j++)
			acc[j] += wk * s[j];
	}
	for (int j = i; j < width; j++)
		out[j] = clip8(acc[j]);
}

int aug_resize(aug_codec *c, const aug_image *src, int dst_w, int dst_h,
	       aug_image *dst, ims_error *err)
{
	RETURN_IF(!src || !dst || src == dst || !src->pixels || src->width < 1 ||
			  src->height < 1,
		  err, IMS_EINVAL, "cannot resize: bad source or destination");
	RETURN_IF(dst_w < 1 || dst_h < 1, err, IMS_EINVAL,
		  "cannot resize to %dx%d", dst_w, dst_h);
	FORWARD_IF_ERR(aug_check_dims(dst_w, dst_h, "resized", err));
	int ch = src->channels, sw = src->width, sh = src->height;
	FORWARD_IF_ERR(aug_image_alloc(dst, dst_w, dst_h, ch, err));
	size_t in_row = (size_t)sw * ch, out_row = (size_t)dst_w * ch;

	if (sw == dst_w && sh == dst_h) {
		for (int y = 0; y < sh; y++)
			memcpy(dst->pixels + (size_t)y * dst->stride,
			       src->pixels + (size_t)y * src->stride, out_row);
		return 0;
	}

	/* Without a codec the scratch lives for this call only. */
	aug_rs_scratch local;
	memset(&local, 0, sizeof(local));
	aug_rs_scratch *s = c ? &c->rs : &local;
	int rc = 0;
	if (sw != dst_w)
		GOTO_IF_ERR(out, rc, build_axis(&s->h, sw, dst_w, err));
	if (sh != dst_h)
		GOTO_IF_ERR(out, rc, build_axis(&s->v, sh, dst_h, err));

	/* One input-width row (+16 bytes: the SIMD paths read a little past
	 * the last pixel) and the portable vertical sums. */
	size_t tmp_need = in_row + 16;
	if (tmp_need > s->tmp_cap) {
		free(s->tmp);
		s->tmp = malloc(tmp_need);
		s->tmp_cap = s->tmp ? tmp_need : 0;
		if (!s->tmp)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot resize: out of memory");
	}
	if (in_row > s->acc_cap) {
		free(s->acc);
		s->acc = malloc(in_row * sizeof(*s->acc));
		s->acc_cap = s->acc ? in_row : 0;
		if (!s->acc)
			GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot resize: out of memory");
	}
	memset(s->tmp + in_row, 0, 16);

	/* Vertical first, one output row at a time, then that row
	 * horizontally: the intermediate is a single row that stays in L1,
	 * and the horizontal pass (the costlier, per-pixel one) runs on
	 * dst_h rows rather than on all src_h. */
	for (int y = 0; y < dst_h; y++) {
		uint8_t *d = dst->pixels + (size_t)y * dst->stride;
		uint8_t *row = sw == dst_w ? d : s->tmp;
		if (sh != dst_h)
			vrow(src->pixels + (size_t)s->v.first[y] * src->stride,
			     src->stride, s->v.weights + (size_t)y * s->v.stride,
			     s->v.pairs + (size_t)y * ((s->v.stride + 1) / 2),
			     s->v.count[y], (int)in_row, s->acc, row);
		else
			memcpy(row, src->pixels + (size_t)y * src->stride, in_row);
		if (sw != dst_w)
			hrow(row, d, ch, &s->h);
	}
out:
	if (!c)
		aug_rs_free(&local);
	return rc;
}
