/*
 * test_mixed.c - the CPU's mixed precision (ctx->precision bf16 / fp16,
 * train/layers/mixed.c): the reference the device's 16-bit path is held
 * to.
 *
 *  - common.h's conversions: every 16-bit value widens and narrows back
 *    to its own bits; narrowing rounds to nearest even (ties, overflow to infinity,
 *    fp16 subnormals, NaN kept), checked on chosen values and on 2^20
 *    random floats against a reference (the compiler's _Float16 where it
 *    has one; for bf16 the nearer of the two neighbours, computed in
 *    double).
 *  - Every layer entry of the backend table in 16 bits against the fp32
 *    kernel run on the same (16-bit, widened) inputs with the documented
 *    rounding points applied by hand: the same bits. That pins where the
 *    graph rounds: outputs once; a gradient added into dx once after the
 *    addition (accumulated and overwritten); a convolution or linear
 *    bias after a rounded product; weight gradients rounded to 16 bits;
 *    bias gradients, batch-norm statistics, running averages, dgamma and
 *    dbeta in fp32, untouched.
 *  - The same entries against the fp32 kernels on the unrounded inputs:
 *    |mixed - fp32|_2 <= TOL |fp32|_2 for y, dx and dw, TOL = 1e-2 (bf16)
 *    and 2e-3 (fp16): inputs and result each rounded once to 8 (11)
 *    significant bits, at most 2^-9 (2^-12) relative per rounding, about
 *    2e-3 (3e-4) for a norm; the tolerances leave 5x of that.
 *  - A frozen workspace (nn_ctx_freeze_workspace) refuses to grow with
 *    IMS_ELIMIT and serves shapes that fit.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/common.h"
#include "nn_test_util.h"
#include "test.h"
#include "train/nn_internal.h"

static nn_ctx ctx;
static ims_error err;

static const char *pname(int p)
{
	return p == NN_PREC_BF16 ? "bf16" : "fp16";
}

static uint16_t narrow(int p, float f)
{
	return p == NN_PREC_BF16 ? ims_f32_to_bf16(f) : ims_f32_to_f16(f);
}

static float widen(int p, uint16_t h)
{
	return p == NN_PREC_BF16 ? ims_bf16_to_f32(h) : ims_f16_to_f32(h);
}

/* ---- common.h's conversions -------------------------------------------- */

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* bf16 of f: the nearer of the neighbours below and above, ties to the
 * even one, computed in double (finite f whose result is finite) */
static uint16_t bf16_ref(float f)
{
	uint32_t u = f32_bits(f);
	uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
	double dl = fabs((double)f - (double)bits_f32(lo));
	double dh = fabs((double)bits_f32(hi) - (double)f);
	if (dl < dh || (dl == dh && !((lo >> 16) & 1)))
		return (uint16_t)(lo >> 16);
	return (uint16_t)(hi >> 16);
}

static void test_half(void)
{
	/* round trips: every 16-bit value but NaN */
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		uint16_t v = (uint16_t)h;
		float b = ims_bf16_to_f32(v), f = ims_f16_to_f32(v);
		if (!isnan(b) && ims_f32_to_bf16(b) != v)
			bad++;
		if (!isnan(f) && ims_f32_to_f16(f) != v)
			bad++;
		if (isnan(b) != isnan(ims_bf16_to_f32(ims_f32_to_bf16(b))))
			bad++;
	}
	CHECK_EQ_INT(bad, 0);
	/* bf16: ties to even, overflow, NaN */
	CHECK_EQ_INT(ims_f32_to_bf16(1.0f), 0x3f80);
	CHECK_EQ_INT(ims_f32_to_bf16(bits_f32(0x3f808000u)), 0x3f80);
	CHECK_EQ_INT(ims_f32_to_bf16(bits_f32(0x3f818000u)), 0x3f82);
	CHECK_EQ_INT(ims_f32_to_bf16(bits_f32(0x3f808001u)), 0x3f81);
	CHECK_EQ_INT(ims_f32_to_bf16(bits_f32(0x7f7fffffu)), 0x7f80);
	CHECK_EQ_INT(ims_f32_to_bf16(-INFINITY), 0xff80);
	CHECK(isnan(ims_bf16_to_f32(ims_f32_to_bf16(NAN))));
	/* fp16: the largest finite, the tie to infinity, subnormals */
	CHECK_EQ_INT(ims_f32_to_f16(1.0f), 0x3c00);
	CHECK_EQ_INT(ims_f32_to_f16(65504.0f), 0x7bff);
	CHECK_EQ_INT(ims_f32_to_f16(65519.0f), 0x7bff);
	CHECK_EQ_INT(ims_f32_to_f16(65520.0f), 0x7c00);
	CHECK_EQ_INT(ims_f32_to_f16(-1e9f), 0xfc00);
	CHECK_EQ_INT(ims_f32_to_f16(0x1p-24f), 0x0001);
	CHECK_EQ_INT(ims_f32_to_f16(0x1p-25f), 0x0000);
	CHECK_EQ_INT(ims_f32_to_f16(0x3p-26f), 0x0001);
	CHECK_EQ_INT(ims_f32_to_f16(0x3p-25f), 0x0002);
	CHECK_EQ_INT(ims_f32_to_f16(-0x1p-14f), 0x8400);
	CHECK(isnan(ims_f16_to_f32(ims_f32_to_f16(NAN))));
	/* random floats over a wide range, against the references */
	ims_rng r;
	ims_rng_seed(&r, 5, 0x6861);
	int bad_b = 0, bad_h = 0;
	for (int i = 0; i < (1 << 20); i++) {
		/* exponents from 2^-30 to 2^17: fp16's subnormals, normals
		 * and overflow */
		uint32_t u = (uint32_t)ims_rng_next(&r);
		uint32_t e = 97 + (u >> 24) % 48;
		float f = bits_f32((u & 0x807fffffu) | (e << 23));
		if (ims_f32_to_bf16(f) != bf16_ref(f) && bad_b++ < 3)
			fprintf(stderr, "bf16 of %a: %04x, want %04x\n", (double)f,
				ims_f32_to_bf16(f), bf16_ref(f));
#ifdef __FLT16_MAX__
		_Float16 h = (_Float16)f;
		uint16_t hb;
		memcpy(&hb, &h, sizeof(hb));
		if (ims_f32_to_f16(f) != hb && bad_h++ < 3)
			fprintf(stderr, "fp16 of %a: %04x, want %04x\n", (double)f,
				ims_f32_to_f16(f), hb);
#endif
	}
	CHECK_EQ_INT(bad_b, 0);
	CHECK_EQ_INT(bad_h, 0);
}

/* ---- helpers ------------------------------------------------------------- */

static uint16_t *to16(int p, const float *f, size_t n)
{
	uint16_t *h = malloc((n ? n : 1) * sizeof(uint16_t));
	CHECK(h != NULL);
	for (size_t i = 0; i < n; i++)
		h[i] = narrow(p, f[i]);
	return h;
}

static float *wide(int p, const uint16_t *h, size_t n)
{
	float *f = nn_test_alloc(n);
	for (size_t i = 0; i < n; i++)
		f[i] = widen(p, h[i]);
	return f;
}

static uint16_t *copy16(const uint16_t *h, size_t n)
{
	uint16_t *c = malloc((n ? n : 1) * sizeof(uint16_t));
	CHECK(c != NULL);
	memcpy(c, h, n * sizeof(uint16_t));
	return c;
}

static uint16_t *nan16(int p, size_t n)
{
	uint16_t *c = malloc((n ? n : 1) * sizeof(uint16_t));
	CHECK(c != NULL);
	for (size_t i = 0; i < n; i++)
		c[i] = p == NN_PREC_BF16 ? 0x7fc0 : 0x7e00;
	return c;
}

static float *copyf(const float *f, size_t n)
{
	float *c = nn_test_alloc(n);
	memcpy(c, f, n * sizeof(float));
	return c;
}

static float *nanf_(size_t n)
{
	float *c = nn_test_alloc(n);
	for (size_t i = 0; i < n; i++)
		c[i] = NAN;
	return c;
}

/* The 16-bit result against the reference's values rounded: the same
 * bits (a NaN on both sides counts as equal). */
static void same16(const char *what, int p, const float *want,
		   const uint16_t *got, size_t n)
{
	test_checks_++;
	for (size_t i = 0; i < n; i++) {
		uint16_t w = narrow(p, want[i]);
		if (w == got[i] || (isnan(want[i]) && isnan(widen(p, got[i]))))
			continue;
		fprintf(stderr, "%s %s[%zu]: %04x (%g), want %04x (%g) of %zu\n",
			pname(p), what, i, got[i], (double)widen(p, got[i]), w,
			(double)want[i], n);
		test_failures_++;
		return;
	}
}

static void samef(const char *what, int p, const float *want,
		  const float *got, size_t n)
{
	test_checks_++;
	for (size_t i = 0; i < n; i++)
		if (memcmp(&want[i], &got[i], sizeof(float))) {
			fprintf(stderr, "%s %s[%zu]: %.9g, want %.9g of %zu\n",
				pname(p), what, i, (double)got[i],
				(double)want[i], n);
			test_failures_++;
			return;
		}
}

/* |got - want|_2 <= tol |want|_2 */
static void near_norm(const char *what, int p, const float *want,
		      const float *got, size_t n)
{
	const double tol = p == NN_PREC_BF16 ? 1e-2 : 2e-3;
	double diff = 0, norm = 0;
	for (size_t i = 0; i < n; i++) {
		double e = (double)got[i] - (double)want[i];
		diff += e * e;
		norm += (double)want[i] * (double)want[i];
	}
	diff = sqrt(diff);
	norm = sqrt(norm);
	test_checks_++;
	if (!(diff <= tol * norm)) {
		fprintf(stderr, "%s %s: |mixed - fp32| %.3g of %.3g: %.3g relative, "
			"tolerance %.3g\n", pname(p), what, diff, norm,
			norm > 0 ? diff / norm : diff, tol);
		test_failures_++;
	}
}

static void near16(const char *what, int p, const float *want,
		   const uint16_t *got, size_t n)
{
	float *g = wide(p, got, n);
	near_norm(what, p, want, g, n);
	free(g);
}

/* dx0 + d, each rounded: the reference of an accumulated 16-bit dx */
static float *plus(const float *dx0, const float *d, size_t n)
{
	float *s = nn_test_alloc(n);
	for (size_t i = 0; i < n; i++)
		s[i] = dx0[i] + d[i];
	return s;
}

/* ---- convolution and linear -------------------------------------------------- */

/*
 * One layer with weights: fwd(x, w, b, y) and bwd(x, w, dy, dx, dw, db)
 * through the table (16-bit or fp32 by ctx.precision) or the fp32
 * kernels.
 */
typedef struct wlayer {
	const char *name;
	size_t nx, nw, ny, nb;
	int bias;
	size_t hw;   /* output values per channel plane */
	int planes;  /* n * channels of the output */
	int (*fwd)(void *d, const void *x, const void *w, const float *b,
		   void *y, int table);
	int (*bwd)(void *d, const void *x, const void *w, const void *dy,
		   void *dx, float *dw, float *db, int table);
	void *desc;
	void *desc_nobias;
} wlayer;

static int conv_fwd(void *d, const void *x, const void *w, const float *b,
		    void *y, int table)
{
	return table ? ctx.be->conv_forward(&ctx, d, x, w, b, y, &err)
		     : nn_cpu_conv_forward(&ctx, d, x, w, b, y, &err);
}

static int conv_bwd(void *d, const void *x, const void *w, const void *dy,
		    void *dx, float *dw, float *db, int table)
{
	return table ? ctx.be->conv_backward(&ctx, d, x, w, dy, dx, dw, db, &err)
		     : nn_cpu_conv_backward(&ctx, d, x, w, dy, dx, dw, db, &err);
}

static int lin_fwd(void *d, const void *x, const void *w, const float *b,
		   void *y, int table)
{
	return table ? ctx.be->linear_forward(&ctx, d, x, w, b, y, &err)
		     : nn_cpu_linear_forward(&ctx, d, x, w, b, y, &err);
}

static int lin_bwd(void *d, const void *x, const void *w, const void *dy,
		   void *dx, float *dw, float *db, int table)
{
	return table ? ctx.be->linear_backward(&ctx, d, x, w, dy, dx, dw, db,
					       &err)
		     : nn_cpu_linear_backward(&ctx, d, x, w, dy, dx, dw, db,
					      &err);
}

static void wlayer_case(int p, const wlayer *L, uint64_t seed)
{
	float *x = nn_test_alloc(L->nx), *w = nn_test_alloc(L->nw);
	float *b = nn_test_alloc(L->nb ? L->nb : 1), *dy = nn_test_alloc(L->ny);
	float *dx0 = nn_test_alloc(L->nx);
	nn_test_fill(x, L->nx, seed, -1, 1);
	nn_test_fill(w, L->nw, seed + 1, -0.5f, 0.5f);
	nn_test_fill(b, L->nb, seed + 2, -1, 1);
	nn_test_fill(dy, L->ny, seed + 3, -1, 1);
	nn_test_fill(dx0, L->nx, seed + 4, -1, 1);
	uint16_t *xh = to16(p, x, L->nx), *wh = to16(p, w, L->nw);
	uint16_t *dyh = to16(p, dy, L->ny), *dx0h = to16(p, dx0, L->nx);
	float *xr = wide(p, xh, L->nx), *wr = wide(p, wh, L->nw);
	float *dyr = wide(p, dyh, L->ny), *dx0r = wide(p, dx0h, L->nx);
	const float *bb = L->bias ? b : NULL;
	char what[160];

	/* the 16-bit graph through the table */
	ctx.precision = p;
	uint16_t *yh = nan16(p, L->ny), *dxa = copy16(dx0h, L->nx);
	uint16_t *dxo = nan16(p, L->nx);
	float *dw = nanf_(L->nw), *db = nanf_(L->nb ? L->nb : 1);
	CHECK_OK(L->fwd(L->desc, xh, wh, bb, yh, 1), &err);
	CHECK_OK(L->bwd(L->desc, xh, wh, dyh, dxa, dw, L->bias ? db : NULL, 1),
		 &err);
	ctx.dx_overwrite = 1;
	CHECK_OK(L->bwd(L->desc, xh, wh, dyh, dxo, NULL, NULL, 1), &err);
	ctx.dx_overwrite = 0;
	ctx.precision = NN_PREC_FP32;

	/* the fp32 kernels on the same values, rounded by hand */
	float *pr = nn_test_alloc(L->ny), *dxr = nanf_(L->nx);
	float *dwr = nn_test_alloc(L->nw), *dbr = nn_test_alloc(L->nb ? L->nb : 1);
	CHECK_OK(L->fwd(L->desc_nobias, xr, wr, NULL, pr, 0), &err);
	for (size_t i = 0; i < L->ny; i++) {
		pr[i] = widen(p, narrow(p, pr[i]));
		if (L->bias)
			pr[i] += b[(i / L->hw) % L->nb];
	}
	ctx.dx_overwrite = 1;
	CHECK_OK(L->bwd(L->desc, xr, wr, dyr, dxr, dwr, L->bias ? dbr : NULL, 0),
		 &err);
	ctx.dx_overwrite = 0;
	snprintf(what, sizeof(what), "%s y", L->name);
	same16(what, p, pr, yh, L->ny);
	float *acc = plus(dx0r, dxr, L->nx);
	snprintf(what, sizeof(what), "%s dx (accumulated)", L->name);
	same16(what, p, acc, dxa, L->nx);
	snprintf(what, sizeof(what), "%s dx (overwritten)", L->name);
	same16(what, p, dxr, dxo, L->nx);
	for (size_t i = 0; i < L->nw; i++)
		dwr[i] = widen(p, narrow(p, dwr[i]));
	snprintf(what, sizeof(what), "%s dw (16-bit values)", L->name);
	samef(what, p, dwr, dw, L->nw);
	if (L->bias) {
		snprintf(what, sizeof(what), "%s db (fp32)", L->name);
		samef(what, p, dbr, db, L->nb);
	}

	/* against fp32 on the unrounded inputs */
	float *y32 = nn_test_alloc(L->ny), *dx32 = nanf_(L->nx);
	float *dw32 = nn_test_alloc(L->nw), *db32 = nn_test_alloc(L->nb ? L->nb : 1);
	CHECK_OK(L->fwd(L->desc, x, w, bb, y32, 0), &err);
	ctx.dx_overwrite = 1;
	CHECK_OK(L->bwd(L->desc, x, w, dy, dx32, dw32, L->bias ? db32 : NULL, 0),
		 &err);
	ctx.dx_overwrite = 0;
	snprintf(what, sizeof(what), "%s y against fp32", L->name);
	near16(what, p, y32, yh, L->ny);
	snprintf(what, sizeof(what), "%s dx against fp32", L->name);
	near16(what, p, dx32, dxo, L->nx);
	snprintf(what, sizeof(what), "%s dw against fp32", L->name);
	near_norm(what, p, dw32, dw, L->nw);

	free(x), free(w), free(b), free(dy), free(dx0), free(xh), free(wh);
	free(dyh), free(dx0h), free(xr), free(wr), free(dyr), free(dx0r);
	free(yh), free(dxa), free(dxo), free(dw), free(db), free(pr), free(dxr);
	free(dwr), free(dbr), free(acc), free(y32), free(dx32), free(dw32);
	free(db32);
}

static void conv_case(int p, int n, int c_in, int hw, int c_out, int k,
		      int stride, int pad, int groups, int bias)
{
	nn_conv_desc d, nb;
	CHECK_OK(nn_conv_desc_init(&d, n, c_in, hw, hw, c_out, k, stride, pad, 1,
				   groups, bias, &err),
		 &err);
	nb = d;
	nb.bias = 0;
	char name[96];
	snprintf(name, sizeof(name), "conv n%d c%d->%d %dpx k%d s%d g%d b%d", n,
		 c_in, c_out, hw, k, stride, groups, bias);
	wlayer L = {name,
		    (size_t)n * c_in * hw * hw,
		    (size_t)c_out * (c_in / groups) * k * k,
		    (size_t)n * c_out * d.h_out * d.w_out,
		    (size_t)c_out,
		    bias,
		    (size_t)d.h_out * d.w_out,
		    n * c_out,
		    conv_fwd,
		    conv_bwd,
		    &d,
		    &nb};
	wlayer_case(p, &L, 10);
}

static void linear_case(int p, int n, int in, int out, int bias)
{
	nn_linear_desc d = {n, in, out, bias}, nb = {n, in, out, 0};
	char name[96];
	snprintf(name, sizeof(name), "linear n%d %d->%d b%d", n, in, out, bias);
	wlayer L = {name,
		    (size_t)n * in,
		    (size_t)out * in,
		    (size_t)n * out,
		    (size_t)out,
		    bias,
		    1,
		    n * out,
		    lin_fwd,
		    lin_bwd,
		    &d,
		    &nb};
	wlayer_case(p, &L, 20);
}

/* ---- batch norm ----------------------------------------------------------------- */

static void bn_case(int p, int n, int c, int hw, int vs_fp32)
{
	nn_bn_desc d = {n, c, hw, hw, 1e-5f, 0.1f, 0, 0};
	const size_t nx = (size_t)n * c * hw * hw;
	float *x = nn_test_alloc(nx), *dy = nn_test_alloc(nx);
	float *dx0 = nn_test_alloc(nx), *g = nn_test_alloc(c);
	float *be = nn_test_alloc(c), *rm0 = nn_test_alloc(c);
	float *rv0 = nn_test_alloc(c);
	nn_test_fill(x, nx, 31, -2, 3);
	nn_test_fill(dy, nx, 32, -1, 1);
	nn_test_fill(dx0, nx, 33, -1, 1);
	nn_test_fill(g, c, 34, 0.5f, 1.5f);
	nn_test_fill(be, c, 35, -0.5f, 0.5f);
	nn_test_fill(rm0, c, 36, -0.2f, 0.2f);
	nn_test_fill(rv0, c, 37, 0.5f, 2.0f);
	uint16_t *xh = to16(p, x, nx), *dyh = to16(p, dy, nx);
	uint16_t *dx0h = to16(p, dx0, nx);
	float *xr = wide(p, xh, nx), *dyr = wide(p, dyh, nx);
	float *dx0r = wide(p, dx0h, nx);

	/* training: 16 bits through the table */
	float *rm = copyf(rm0, c), *rv = copyf(rv0, c);
	float *sm = nn_test_alloc(c), *si = nn_test_alloc(c);
	float *dg = nanf_(c), *db = nanf_(c);
	uint16_t *yh = nan16(p, nx), *dxa = copy16(dx0h, nx);
	ctx.precision = p;
	CHECK_OK(ctx.be->bn_forward_train(&ctx, &d, xh, g, be, rm, rv, sm, si, yh,
					  &err),
		 &err);
	CHECK_OK(ctx.be->bn_backward(&ctx, &d, xh, g, sm, si, dyh, dxa, dg, db,
				     &err),
		 &err);
	ctx.precision = NN_PREC_FP32;
	/* the fp32 kernel on the same values */
	float *rmr = copyf(rm0, c), *rvr = copyf(rv0, c);
	float *smr = nn_test_alloc(c), *sir = nn_test_alloc(c);
	float *dgr = nn_test_alloc(c), *dbr = nn_test_alloc(c);
	float *yr = nn_test_alloc(nx), *dxr = nanf_(nx);
	CHECK_OK(nn_cpu_bn_forward_train(&ctx, &d, xr, g, be, rmr, rvr, smr, sir,
					 yr, &err),
		 &err);
	ctx.dx_overwrite = 1;
	CHECK_OK(nn_cpu_bn_backward(&ctx, &d, xr, g, smr, sir, dyr, dxr, dgr, dbr,
				    &err),
		 &err);
	ctx.dx_overwrite = 0;
	same16("bn y", p, yr, yh, nx);
	samef("bn running mean (fp32)", p, rmr, rm, c);
	samef("bn running var (fp32)", p, rvr, rv, c);
	samef("bn saved mean (fp32)", p, smr, sm, c);
	samef("bn saved 1/std (fp32)", p, sir, si, c);
	float *acc = plus(dx0r, dxr, nx);
	same16("bn dx (accumulated)", p, acc, dxa, nx);
	samef("bn dgamma (fp32)", p, dgr, dg, c);
	samef("bn dbeta (fp32)", p, dbr, db, c);
	/* against fp32 on the unrounded inputs */
	float *y32 = nn_test_alloc(nx), *dx32 = nanf_(nx);
	float *rm32 = copyf(rm0, c), *rv32 = copyf(rv0, c);
	CHECK_OK(nn_cpu_bn_forward_train(&ctx, &d, x, g, be, rm32, rv32, smr, sir,
					 y32, &err),
		 &err);
	ctx.dx_overwrite = 1;
	CHECK_OK(nn_cpu_bn_backward(&ctx, &d, x, g, smr, sir, dy, dx32, dgr, dbr,
				    &err),
		 &err);
	ctx.dx_overwrite = 0;
	if (vs_fp32) {
		near16("bn y against fp32", p, y32, yh, nx);
		near_norm("bn dgamma against fp32", p, dgr, dg, c);
	}

	/* evaluation and the frozen backward */
	uint16_t *ye = nan16(p, nx), *dxf = copy16(dx0h, nx);
	float *dgf = nanf_(c), *dbf = nanf_(c);
	ctx.precision = p;
	CHECK_OK(ctx.be->bn_forward_eval(&ctx, &d, xh, g, be, rm0, rv0, ye, &err),
		 &err);
	CHECK_OK(ctx.be->bn_backward_frozen(&ctx, &d, xh, g, rm0, rv0, dyh, dxf,
					    dgf, dbf, &err),
		 &err);
	ctx.precision = NN_PREC_FP32;
	CHECK_OK(nn_cpu_bn_forward_eval(&ctx, &d, xr, g, be, rm0, rv0, yr, &err),
		 &err);
	ctx.dx_overwrite = 1;
	CHECK_OK(nn_cpu_bn_backward_frozen(&ctx, &d, xr, g, rm0, rv0, dyr, dxr,
					   dgr, dbr, &err),
		 &err);
	ctx.dx_overwrite = 0;
	same16("bn eval y", p, yr, ye, nx);
	free(acc);
	acc = plus(dx0r, dxr, nx);
	same16("bn frozen dx (accumulated)", p, acc, dxf, nx);
	samef("bn frozen dgamma (fp32)", p, dgr, dgf, c);
	samef("bn frozen dbeta (fp32)", p, dbr, dbf, c);

	free(x), free(dy), free(dx0), free(g), free(be), free(rm0), free(rv0);
	free(xh), free(dyh), free(dx0h), free(xr), free(dyr), free(dx0r);
	free(rm), free(rv), free(sm), free(si), free(dg), free(db), free(yh);
	free(dxa), free(rmr), free(rvr), free(smr), free(sir), free(dgr);
	free(dbr), free(yr), free(dxr), free(acc), free(y32), free(dx32);
	free(rm32), free(rv32), free(ye), free(dxf), free(dgf), free(dbf);
}

/* ---- ReLU, add, accumulate, pooling, dropout ----------------------------------------- */

static void elementwise_case(int p, size_t n)
{
	float *a = nn_test_alloc(n), *b = nn_test_alloc(n);
	float *dx0 = nn_test_alloc(n);
	nn_test_fill(a, n, 41, -2, 2);
	nn_test_fill(b, n, 42, -2, 2);
	nn_test_fill(dx0, n, 43, -1, 1);
	uint16_t *ah = to16(p, a, n), *bh = to16(p, b, n);
	uint16_t *dx0h = to16(p, dx0, n);
	float *ar = wide(p, ah, n), *br = wide(p, bh, n);
	float *dx0r = wide(p, dx0h, n);
	float *ref = nn_test_alloc(n), *ref2 = nn_test_alloc(n);
	uint16_t *y = nan16(p, n), *dxa = copy16(dx0h, n), *dxo = nan16(p, n);

	ctx.precision = p;
	CHECK_OK(ctx.be->add_forward(&ctx, n, ah, bh, y, &err), &err);
	for (size_t i = 0; i < n; i++)
		ref[i] = ar[i] + br[i];
	same16("add", p, ref, y, n);
	/* add + ReLU: the rounded sum, then relu on it */
	uint16_t *yr = nan16(p, n);
	CHECK_OK(ctx.be->add_relu_forward(&ctx, n, ah, bh, yr, &err), &err);
	CHECK_OK(ctx.be->relu_forward(&ctx, n, y, y, &err), &err);
	CHECK_MEM(yr, y, n * sizeof(uint16_t));
	free(yr);
	CHECK_OK(ctx.be->add_forward(&ctx, n, ah, bh, y, &err), &err);
	CHECK_OK(ctx.be->accumulate(&ctx, n, ah, dxa, &err), &err);
	for (size_t i = 0; i < n; i++)
		ref[i] = dx0r[i] + ar[i];
	same16("accumulate", p, ref, dxa, n);
	ctx.dx_overwrite = 1;
	CHECK_OK(ctx.be->accumulate(&ctx, n, ah, dxo, &err), &err);
	ctx.dx_overwrite = 0;
	same16("accumulate (overwritten)", p, ar, dxo, n);

	/* relu: y = x or 0, exact; dx (+)= y > 0 ? dy : 0 */
	CHECK_OK(ctx.be->relu_forward(&ctx, n, ah, y, &err), &err);
	ctx.precision = NN_PREC_FP32;
	CHECK_OK(nn_cpu_relu_forward(&ctx, n, ar, ref, &err), &err);
	same16("relu y", p, ref, y, n);
	memcpy(dxa, dx0h, n * sizeof(uint16_t));
	ctx.precision = p;
	CHECK_OK(ctx.be->relu_backward(&ctx, n, y, bh, dxa, &err), &err);
	ctx.dx_overwrite = 1;
	CHECK_OK(ctx.be->relu_backward(&ctx, n, y, bh, dxo, &err), &err);
	ctx.dx_overwrite = 0;
	ctx.precision = NN_PREC_FP32;
	ctx.dx_overwrite = 1;
	CHECK_OK(nn_cpu_relu_backward(&ctx, n, ref, br, ref2, &err), &err);
	ctx.dx_overwrite = 0;
	same16("relu dx (overwritten)", p, ref2, dxo, n);
	for (size_t i = 0; i < n; i++)
		ref2[i] += dx0r[i];
	same16("relu dx (accumulated)", p, ref2, dxa, n);

	/* dropout: the fp32 mask, values rounded once */
	uint8_t *mask = malloc(n), *mref = malloc(n);
	ctx.precision = p;
	CHECK_OK(ctx.be->dropout_forward(&ctx, n, 0.3f, 99, NULL, ah, y, mask,
					 &err),
		 &err);
	memcpy(dxa, dx0h, n * sizeof(uint16_t));
	CHECK_OK(ctx.be->dropout_backward(&ctx, n, 0.3f, mask, bh, dxa, &err),
		 &err);
	ctx.precision = NN_PREC_FP32;
	CHECK_OK(nn_cpu_dropout_forward(&ctx, n, 0.3f, 99, NULL, ar, ref, mref,
					&err),
		 &err);
	CHECK(!memcmp(mask, mref, n));
	same16("dropout y", p, ref, y, n);
	ctx.dx_overwrite = 1;
	CHECK_OK(nn_cpu_dropout_backward(&ctx, n, 0.3f, mref, br, ref2, &err),
		 &err);
	ctx.dx_overwrite = 0;
	for (size_t i = 0; i < n; i++)
		ref2[i] += dx0r[i];
	same16("dropout dx (accumulated)", p, ref2, dxa, n);

	/* conversions */
	ctx.precision = p;
	CHECK_OK(ctx.be->act_from_f32(&ctx, n, a, y, &err), &err);
	CHECK(!memcmp(y, ah, n * sizeof(uint16_t)));
	CHECK_OK(ctx.be->act_to_f32(&ctx, n, ah, ref, &err), &err);
	samef("widened", p, ar, ref, n);
	ctx.precision = NN_PREC_FP32;

	free(a), free(b), free(dx0), free(ah), free(bh), free(dx0h), free(ar);
	free(br), free(dx0r), free(ref), free(ref2), free(y), free(dxa);
	free(dxo), free(mask), free(mref);
}

static void pool_case(int p, int maxpool, const nn_pool_desc *d)
{
	const size_t nx = (size_t)d->n * d->c * d->h_in * d->w_in;
	const size_t ny = (size_t)d->n * d->c * d->h_out * d->w_out;
	float *x = nn_test_alloc(nx), *dy = nn_test_alloc(ny);
	float *dx0 = nn_test_alloc(nx);
	nn_test_fill(x, nx, 51, -2, 2);
	nn_test_fill(dy, ny, 52, -1, 1);
	nn_test_fill(dx0, nx, 53, -1, 1);
	uint16_t *xh = to16(p, x, nx), *dyh = to16(p, dy, ny);
	uint16_t *dx0h = to16(p, dx0, nx);
	float *xr = wide(p, xh, nx), *dyr = wide(p, dyh, ny);
	float *dx0r = wide(p, dx0h, nx);
	uint16_t *y = nan16(p, ny), *dxa = copy16(dx0h, nx);
	float *yr = nn_test_alloc(ny), *dxr = nanf_(nx);
	int32_t *am = malloc(ny * sizeof(int32_t)), *amr = malloc(ny * sizeof(int32_t));
	const char *name = maxpool ? "maxpool" : "avgpool";
	char what[64];
	ctx.precision = p;
	if (maxpool) {
		CHECK_OK(ctx.be->maxpool_forward(&ctx, d, xh, y, am, &err), &err);
		CHECK_OK(ctx.be->maxpool_backward(&ctx, d, am, dyh, dxa, &err), &err);
	} else {
		CHECK_OK(ctx.be->avgpool_forward(&ctx, d, xh, y, &err), &err);
		CHECK_OK(ctx.be->avgpool_backward(&ctx, d, dyh, dxa, &err), &err);
	}
	ctx.precision = NN_PREC_FP32;
	ctx.dx_overwrite = 1;
	if (maxpool) {
		CHECK_OK(nn_cpu_maxpool_forward(&ctx, d, xr, yr, amr, &err), &err);
		CHECK_OK(nn_cpu_maxpool_backward(&ctx, d, amr, dyr, dxr, &err), &err);
		CHECK(!memcmp(am, amr, ny * sizeof(int32_t)));
	} else {
		CHECK_OK(nn_cpu_avgpool_forward(&ctx, d, xr, yr, &err), &err);
		CHECK_OK(nn_cpu_avgpool_backward(&ctx, d, dyr, dxr, &err), &err);
	}
	ctx.dx_overwrite = 0;
	snprintf(what, sizeof(what), "%s y", name);
	same16(what, p, yr, y, ny);
	float *acc = plus(dx0r, dxr, nx);
	snprintf(what, sizeof(what), "%s dx (accumulated)", name);
	same16(what, p, acc, dxa, nx);
	free(x), free(dy), free(dx0), free(xh), free(dyh), free(dx0h), free(xr);
	free(dyr), free(dx0r), free(y), free(dxa), free(yr), free(dxr), free(am);
	free(amr), free(acc);
}

/* ---- errors and the frozen workspace ------------------------------------------- */

static void test_errors_and_freeze(void)
{
	nn_linear_desc d = {2, 8, 4, 0};
	uint16_t buf[64] = {0};
	ctx.precision = 7;
	CHECK_EQ_INT(ctx.be->linear_forward(&ctx, &d, buf, buf, NULL, buf, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "unknown precision 7") != NULL);
	CHECK_EQ_INT(ctx.be->relu_forward(&ctx, 4, buf, buf, &err), IMS_EINVAL);

	/* a fresh context: sized by a first call, frozen, then a call that
	 * fits runs and one that does not is refused */
	nn_ctx c;
	CHECK_OK(nn_ctx_init_cpu(&c, 1, &err), &err);
	c.precision = NN_PREC_BF16;
	nn_linear_desc big = {4, 64, 32, 0};
	uint16_t *x = calloc(4 * 64, 2), *w = calloc(64 * 32, 2);
	uint16_t *y = calloc(4 * 32, 2);
	CHECK_OK(c.be->linear_forward(&c, &d, x, w, NULL, y, &err), &err);
	CHECK(nn_ctx_scratch(&c, 1000, &err) != NULL);
	CHECK_OK(nn_ctx_freeze_workspace(&c, &err), &err);
	CHECK_EQ_INT(c.workspace_frozen, 1);
	CHECK_OK(c.be->linear_forward(&c, &d, x, w, NULL, y, &err), &err);
	CHECK_EQ_INT(c.be->linear_forward(&c, &big, x, w, NULL, y, &err),
		     IMS_ELIMIT);
	CHECK(strstr(err.msg, "cpu 16-bit workspace") != NULL);
	/* the fp32 scratch obeys the same rule */
	CHECK(nn_ctx_scratch(&c, 1000, &err) != NULL);
	CHECK(nn_ctx_scratch(&c, (size_t)1 << 24, &err) == NULL);
	CHECK_EQ_INT(err.code, IMS_ELIMIT);
	free(x), free(w), free(y);
	nn_ctx_release(&c);
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&ctx, 2, &err), &err);
	test_half();
	for (int p = NN_PREC_BF16; p <= NN_PREC_FP16; p++) {
		/* p, n, c_in, hw, c_out, k, stride, pad, groups, bias */
		conv_case(p, 2, 3, 9, 4, 3, 1, 1, 1, 1);
		conv_case(p, 3, 8, 8, 16, 3, 2, 1, 1, 0);
		conv_case(p, 2, 16, 7, 32, 1, 1, 0, 1, 1);
		conv_case(p, 2, 3, 23, 8, 7, 2, 3, 1, 0);
		conv_case(p, 2, 8, 9, 8, 3, 2, 1, 8, 0);
		linear_case(p, 4, 7, 5, 1);
		linear_case(p, 32, 512, 10, 1);
		linear_case(p, 16, 256, 128, 0);
		bn_case(p, 4, 8, 5, 1);
		/* two values per channel: normalising them divides by their
		 * difference, which rounding the inputs changes by far more
		 * than the tolerance; the rounding points still hold */
		bn_case(p, 2, 3, 1, 0);
		elementwise_case(p, 100003);
		nn_pool_desc pd;
		CHECK_OK(nn_pool_desc_init(&pd, 2, 4, 11, 11, 3, 2, 1, &err), &err);
		pool_case(p, 1, &pd);
		pool_case(p, 0, &pd);
		CHECK_OK(nn_pool_desc_init_adaptive(&pd, 2, 4, 7, 7, 1, 1, &err),
			 &err);
		pool_case(p, 0, &pd);
	}
	test_errors_and_freeze();
	nn_ctx_release(&ctx);
	return TEST_EXIT();
}
