/*
 * test_backend_cuda_mixed.c - test_backend_cuda's other precisions and
 * layouts: every entry in bf16 and fp16, NCHW and channels-last, against
 * the CPU's mixed precision on the same 16-bit inputs; fp32 channels-last
 * against the CPU's twin (the rules are in test_backend_cuda.c's
 * header).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_test.h"
#include "common/common.h"
#include "nn_test_util.h"
#include "test.h"

/*
 * Convolution or linear layer in 16 bits: the same 16-bit inputs on both
 * backends, y, dx (accumulated and overwritten), dw and db compared by
 * norm.
 */
typedef struct half_layer {
	int conv;
	nn_conv_desc cd;
	nn_linear_desc ld;
	size_t nx, nw, ny, nb;
	int bias;
} half_layer;

static int hl_fwd(nn_ctx *c, const half_layer *L, const void *x,
		  const void *w, const float *b, void *y)
{
	return L->conv ? c->be->conv_forward(c, &L->cd, x, w, b, y, &err)
		       : c->be->linear_forward(c, &L->ld, x, w, b, y, &err);
}

static int hl_bwd(nn_ctx *c, const half_layer *L, const void *x,
		  const void *w, const void *dy, void *dx, float *dw, float *db)
{
	return L->conv
		       ? c->be->conv_backward(c, &L->cd, x, w, dy, dx, dw, db, &err)
		       : c->be->linear_backward(c, &L->ld, x, w, dy, dx, dw, db,
						&err);
}

static void half_layer_case(int prec, const half_layer *L, const char *what)
{
	const double tol = prec == NN_PREC_BF16 ? TOL_BF16 : TOL_FP16;
	char name[240];
	float *x = nn_test_alloc(L->nx), *w = nn_test_alloc(L->nw);
	float *b = nn_test_alloc(L->nb), *dy = nn_test_alloc(L->ny);
	float *dx0 = nn_test_alloc(L->nx);
	nn_test_fill(x, L->nx, 41, -1, 1);
	nn_test_fill(w, L->nw, 42, -0.5f, 0.5f);
	nn_test_fill(b, L->nb, 43, -1, 1);
	nn_test_fill(dy, L->ny, 44, -1, 1);
	nn_test_fill(dx0, L->nx, 45, -1, 1);
	uint16_t *xh = h16(prec, x, L->nx), *wh = h16(prec, w, L->nw);
	uint16_t *dyh = h16(prec, dy, L->ny), *dxa = h16(prec, dx0, L->nx);
	uint16_t *y = h16_nan(prec, L->ny), *dxo = h16_nan(prec, L->nx);
	float *dw = nn_test_alloc(L->nw), *db = nn_test_alloc(L->nb);
	const float *bb = L->bias ? b : NULL;
	cpu.precision = gpu.precision = prec;
	/* the CPU's mixed-precision graph, the reference */
	CHECK_OK(hl_fwd(&cpu, L, xh, wh, bb, y), &err);
	CHECK_OK(hl_bwd(&cpu, L, xh, wh, dyh, dxa, dw, L->bias ? db : NULL),
		 &err);
	cpu.dx_overwrite = 1;
	CHECK_OK(hl_bwd(&cpu, L, xh, wh, dyh, dxo, NULL, NULL), &err);
	cpu.dx_overwrite = 0;

	const size_t h2 = sizeof(uint16_t);
	uint16_t *dx0h = h16(prec, dx0, L->nx);
	void *gx = up_bytes(xh, L->nx * h2), *gw = up_bytes(wh, L->nw * h2);
	void *gdy = up_bytes(dyh, L->ny * h2), *gy = up_bytes(NULL, L->ny * h2);
	void *gdx = up_bytes(dx0h, L->nx * h2);
	float *gb = up(b, L->nb), *gdw = up(NULL, L->nw), *gdb = up(NULL, L->nb);
	CHECK_OK(hl_fwd(&gpu, L, gx, gw, L->bias ? gb : NULL, gy), &err);
	snprintf(name, sizeof(name), "%s y", what);
	near16_dev(prec, name, y, gy, L->ny, tol);
	CHECK_OK(hl_bwd(&gpu, L, gx, gw, gdy, gdx, gdw, L->bias ? gdb : NULL),
		 &err);
	snprintf(name, sizeof(name), "%s dx (accumulated)", what);
	near16_dev(prec, name, dxa, gdx, L->nx, tol);
	snprintf(name, sizeof(name), "%s dw", what);
	near_f_dev(name, dw, gdw, L->nw, tol);
	if (L->bias) {
		snprintf(name, sizeof(name), "%s db", what);
		near_f_dev(name, db, gdb, L->nb, tol);
	}
	uint16_t *nan_x = h16_nan(prec, L->nx);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, L->nx * h2, &err), &err);
	gpu.dx_overwrite = 1;
	CHECK_OK(hl_bwd(&gpu, L, gx, gw, gdy, gdx, NULL, NULL), &err);
	gpu.dx_overwrite = 0;
	snprintf(name, sizeof(name), "%s dx (overwritten)", what);
	near16_dev(prec, name, dxo, gdx, L->nx, tol);
	cpu.precision = gpu.precision = NN_PREC_FP32;

	dfree(gx), dfree(gw), dfree(gb), dfree(gdy), dfree(gy), dfree(gdx);
	dfree(gdw), dfree(gdb);
	free(x), free(w), free(b), free(dy), free(dx0), free(xh), free(wh);
	free(dyh), free(dxa), free(y), free(dxo), free(dw), free(db);
	free(dx0h), free(nan_x);
}

static void conv_half_case(int prec, int n, int c_in, int hw, int c_out, int k,
			   int stride, int pad, int groups, int bias)
{
	char what[160];
	snprintf(what, sizeof(what), "%s%s conv n%d c%d->%d %dx%d k%d s%d p%d g%d b%d",
		 prec_name(prec), cl ? " nhwc" : "", n, c_in, c_out, hw, hw, k,
		 stride, pad, groups, bias);
	half_layer L;
	memset(&L, 0, sizeof(L));
	L.conv = 1;
	CHECK_OK(nn_conv_desc_init(&L.cd, n, c_in, hw, hw, c_out, k, stride, pad,
				   1, groups, bias, &err),
		 &err);
	L.cd.nhwc = cl;
	L.nx = (size_t)n * c_in * hw * hw;
	L.ny = (size_t)n * c_out * L.cd.h_out * L.cd.w_out;
	L.nw = (size_t)c_out * (c_in / groups) * k * k;
	L.nb = (size_t)c_out;
	L.bias = bias;
	half_layer_case(prec, &L, what);
}

static void linear_half_case(int prec, int n, int in, int out, int bias)
{
	char what[96];
	snprintf(what, sizeof(what), "%s linear n%d %d->%d b%d", prec_name(prec),
		 n, in, out, bias);
	half_layer L;
	memset(&L, 0, sizeof(L));
	L.ld = (nn_linear_desc){n, in, out, bias};
	L.nx = (size_t)n * in;
	L.ny = (size_t)n * out;
	L.nw = (size_t)out * in;
	L.nb = (size_t)out;
	L.bias = bias;
	half_layer_case(prec, &L, what);
}

/* Batch norm, ReLU, add, accumulate and max pooling in 16 bits against
 * the CPU's: the elementwise ones bit for bit (one fp32 operation each,
 * rounded once), batch norm by norm, its fp32 statistics to RTOL. */
/* the precision's name, and the layout when channels-last */
static const char *pcl(int prec)
{
	if (!cl)
		return prec_name(prec);
	return prec == NN_PREC_BF16 ? "bf16 nhwc" : "fp16 nhwc";
}

static void half_other_case(int prec)
{
	const double tol = prec == NN_PREC_BF16 ? TOL_BF16 : TOL_FP16;
	const size_t h2 = sizeof(uint16_t);
	nn_bn_desc bd = {4, 8, 5, 5, 1e-5f, 0.1f, cl, 0};
	const size_t n = (size_t)4 * 8 * 5 * 5;
	float *x = nn_test_alloc(n), *dy = nn_test_alloc(n);
	float *g = nn_test_alloc(8), *be = nn_test_alloc(8);
	nn_test_fill(x, n, 71, -2, 3);
	nn_test_fill(dy, n, 72, -1, 1);
	nn_test_fill(g, 8, 73, 0.5f, 1.5f);
	nn_test_fill(be, 8, 74, -0.5f, 0.5f);
	uint16_t *xh = h16(prec, x, n), *dyh = h16(prec, dy, n);
	uint16_t *y = h16_nan(prec, n), *dx = h16(prec, dy, n);
	float rm[8] = {0}, rv[8] = {1, 1, 1, 1, 1, 1, 1, 1}, sm[8], si[8];
	float dg[8], db[8];
	cpu.precision = gpu.precision = prec;
	CHECK_OK(cpu.be->bn_forward_train(&cpu, &bd, xh, g, be, rm, rv, sm, si, y,
					  &err),
		 &err);
	CHECK_OK(cpu.be->bn_backward(&cpu, &bd, xh, g, sm, si, dyh, dx, dg, db,
				     &err),
		 &err);
	void *gx = up_bytes(xh, n * h2), *gy = up_bytes(NULL, n * h2);
	void *gdy = up_bytes(dyh, n * h2), *gdx = up_bytes(dyh, n * h2);
	float rv1[8] = {1, 1, 1, 1, 1, 1, 1, 1};
	float *gg = up(g, 8), *gbe = up(be, 8), *grm = up(NULL, 8);
	float *grv = up(rv1, 8), *gsm = up(NULL, 8), *gsi = up(NULL, 8);
	float *gdg = up(NULL, 8), *gdb = up(NULL, 8);
	CHECK_OK(gpu.be->bn_forward_train(&gpu, &bd, gx, gg, gbe, grm, grv, gsm,
					  gsi, gy, &err),
		 &err);
	CHECK_OK(gpu.be->bn_backward(&gpu, &bd, gx, gg, gsm, gsi, gdy, gdx, gdg,
				     gdb, &err),
		 &err);
	char name[96];
	snprintf(name, sizeof(name), "%s bn y", pcl(prec));
	near16_dev(prec, name, y, gy, n, tol);
	snprintf(name, sizeof(name), "%s bn dx (accumulated)", pcl(prec));
	near16_dev(prec, name, dx, gdx, n, tol);
	snprintf(name, sizeof(name), "%s bn running mean", pcl(prec));
	near_dev(name, rm, grm, 8);
	snprintf(name, sizeof(name), "%s bn dgamma", pcl(prec));
	near_f_dev(name, dg, gdg, 8, tol);
	/* frozen: the running statistics just made */
	memcpy(dx, dyh, n * h2);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, dyh, n * h2, &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, grm, rm, sizeof(rm), &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, grv, rv, sizeof(rv), &err), &err);
	CHECK_OK(cpu.be->bn_backward_frozen(&cpu, &bd, xh, g, rm, rv, dyh, dx, dg,
					    db, &err),
		 &err);
	CHECK_OK(gpu.be->bn_backward_frozen(&gpu, &bd, gx, gg, grm, grv, gdy, gdx,
					    gdg, gdb, &err),
		 &err);
	snprintf(name, sizeof(name), "%s bn frozen dx", pcl(prec));
	near16_dev(prec, name, dx, gdx, n, tol);
	snprintf(name, sizeof(name), "%s bn frozen dgamma", pcl(prec));
	near_f_dev(name, dg, gdg, 8, tol);
	snprintf(name, sizeof(name), "%s bn frozen dbeta", pcl(prec));
	near_f_dev(name, db, gdb, 8, tol);

	/* a fused ReLU (bd.relu), training and evaluation: the device's
	 * against the CPU's, each running statistic from the same values */
	nn_bn_desc br = bd;
	br.relu = 1;
	float rm2[8], rv2[8];
	memcpy(rm2, rm, sizeof(rm2));
	memcpy(rv2, rv, sizeof(rv2));
	CHECK_OK(gpu.be->to_device(&gpu, grm, rm, sizeof(rm), &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, grv, rv, sizeof(rv), &err), &err);
	CHECK_OK(cpu.be->bn_forward_train(&cpu, &br, xh, g, be, rm2, rv2, sm, si,
					  y, &err),
		 &err);
	CHECK_OK(gpu.be->bn_forward_train(&gpu, &br, gx, gg, gbe, grm, grv, gsm,
					  gsi, gy, &err),
		 &err);
	snprintf(name, sizeof(name), "%s bn y, fused relu", pcl(prec));
	near16_dev(prec, name, y, gy, n, tol);
	CHECK_OK(cpu.be->bn_forward_eval(&cpu, &br, xh, g, be, rm2, rv2, y, &err),
		 &err);
	CHECK_OK(gpu.be->bn_forward_eval(&gpu, &br, gx, gg, gbe, grm, grv, gy,
					 &err),
		 &err);
	snprintf(name, sizeof(name), "%s bn eval y, fused relu", pcl(prec));
	near16_dev(prec, name, y, gy, n, tol);

	/* add, accumulate, relu: the same bits */
	CHECK_OK(cpu.be->add_forward(&cpu, n, xh, dyh, y, &err), &err);
	CHECK_OK(gpu.be->add_forward(&gpu, n, gx, gdy, gy, &err), &err);
	snprintf(name, sizeof(name), "%s add", pcl(prec));
	same_dev(name, y, gy, n * h2);
	memcpy(dx, xh, n * h2);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, xh, n * h2, &err), &err);
	CHECK_OK(cpu.be->accumulate(&cpu, n, dyh, dx, &err), &err);
	CHECK_OK(gpu.be->accumulate(&gpu, n, gdy, gdx, &err), &err);
	snprintf(name, sizeof(name), "%s accumulate", pcl(prec));
	same_dev(name, dx, gdx, n * h2);
	CHECK_OK(cpu.be->relu_forward(&cpu, n, xh, y, &err), &err);
	CHECK_OK(gpu.be->relu_forward(&gpu, n, gx, gy, &err), &err);
	snprintf(name, sizeof(name), "%s relu", pcl(prec));
	same_dev(name, y, gy, n * h2);
	CHECK_OK(cpu.be->relu_backward(&cpu, n, y, dyh, dx, &err), &err);
	CHECK_OK(gpu.be->relu_backward(&gpu, n, gy, gdy, gdx, &err), &err);
	snprintf(name, sizeof(name), "%s relu dx", pcl(prec));
	same_dev(name, dx, gdx, n * h2);
	/* max pooling: the same bits and argmax */
	nn_pool_desc pd;
	CHECK_OK(nn_pool_desc_init(&pd, 4, 8, 5, 5, 3, 2, 1, &err), &err);
	pd.nhwc = cl;
	const size_t np = (size_t)4 * 8 * pd.h_out * pd.w_out;
	int32_t *am = malloc(np * sizeof(int32_t));
	int32_t *gam = up_bytes(NULL, np * sizeof(int32_t));
	CHECK_OK(cpu.be->maxpool_forward(&cpu, &pd, xh, y, am, &err), &err);
	CHECK_OK(gpu.be->maxpool_forward(&gpu, &pd, gx, gy, gam, &err), &err);
	snprintf(name, sizeof(name), "%s maxpool", pcl(prec));
	same_dev(name, y, gy, np * h2);
	snprintf(name, sizeof(name), "%s maxpool argmax", pcl(prec));
	same_dev(name, am, gam, np * sizeof(int32_t));
	/* backward into dx added to, then average pooling (fixed and
	 * adaptive) both ways: one rounding of the same fp32 sums */
	memcpy(dx, xh, n * h2);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, xh, n * h2, &err), &err);
	CHECK_OK(cpu.be->maxpool_backward(&cpu, &pd, am, dyh, dx, &err), &err);
	CHECK_OK(gpu.be->maxpool_backward(&gpu, &pd, gam, gdy, gdx, &err), &err);
	snprintf(name, sizeof(name), "%s maxpool dx", pcl(prec));
	same_dev(name, dx, gdx, n * h2);
	for (int ad = 0; ad < 2; ad++) {
		if (ad)
			CHECK_OK(nn_pool_desc_init_adaptive(&pd, 4, 8, 5, 5, 1, 1,
							    &err),
				 &err);
		else
			CHECK_OK(nn_pool_desc_init(&pd, 4, 8, 5, 5, 2, 2, 0, &err),
				 &err);
		pd.nhwc = cl;
		const size_t na = (size_t)4 * 8 * pd.h_out * pd.w_out;
		CHECK_OK(cpu.be->avgpool_forward(&cpu, &pd, xh, y, &err), &err);
		CHECK_OK(gpu.be->avgpool_forward(&gpu, &pd, gx, gy, &err), &err);
		snprintf(name, sizeof(name), "%s avgpool%s", pcl(prec),
			 ad ? " adaptive" : "");
		same_dev(name, y, gy, na * h2);
		memcpy(dx, xh, n * h2);
		CHECK_OK(gpu.be->to_device(&gpu, gdx, xh, n * h2, &err), &err);
		CHECK_OK(cpu.be->avgpool_backward(&cpu, &pd, dyh, dx, &err), &err);
		CHECK_OK(gpu.be->avgpool_backward(&gpu, &pd, gdy, gdx, &err), &err);
		snprintf(name, sizeof(name), "%s avgpool%s dx", pcl(prec),
			 ad ? " adaptive" : "");
		same_dev(name, dx, gdx, n * h2);
	}
	/* the model's channels-last input copy */
	if (cl) {
		CHECK_OK(cpu.be->act_from_f32_nhwc(&cpu, 4, 8, 25, x, y, &err),
			 &err);
		float *gxf = up(x, n);
		CHECK_OK(gpu.be->act_from_f32_nhwc(&gpu, 4, 8, 25, gxf, gy, &err),
			 &err);
		snprintf(name, sizeof(name), "%s from_f32_nhwc", pcl(prec));
		same_dev(name, y, gy, n * h2);
		dfree(gxf);
	}
	cpu.precision = gpu.precision = NN_PREC_FP32;

	dfree(gx), dfree(gy), dfree(gdy), dfree(gdx), dfree(gg), dfree(gbe);
	dfree(grm), dfree(grv), dfree(gsm), dfree(gsi), dfree(gdg), dfree(gdb);
	dfree(gam);
	free(x), free(dy), free(g), free(be), free(xh), free(dyh), free(y);
	free(dx), free(am);
}

/* fp16's gradient check: unscaled values and the flag, against the host */
/*
 * 16-bit batch norm at the shapes that pick the device kernels' other
 * paths (channels-last: bn_nhwc.cu): many rows (the statistics' slice
 * cap), channels not a multiple of the 16-byte vector (single-value
 * passes) or of the 32-channel block, an offset mean, and x and y moved
 * off 16-byte alignment by `off` values. Training forward (y, running
 * and saved statistics), backward (dx accumulated then overwritten,
 * dgamma, dbeta) and evaluation, against the CPU. cuDNN (NCHW) is not
 * handed unaligned tensors: off applies channels-last only.
 */
static void half_bn_case(int prec, int n, int c, int hw, float shift,
			 int relu, int off)
{
	off = cl ? off : 0;
	const double tol = prec == NN_PREC_BF16 ? TOL_BF16 : TOL_FP16;
	const size_t h2 = sizeof(uint16_t), cnt = (size_t)n * c * hw * hw;
	nn_bn_desc bd = {n, c, hw, hw, 1e-5f, 0.1f, cl, relu};
	float *x = nn_test_alloc(cnt), *dy = nn_test_alloc(cnt);
	float *g = nn_test_alloc(c), *be = nn_test_alloc(c);
	nn_test_fill(x, cnt, 81, -2 + shift, 3 + shift);
	nn_test_fill(dy, cnt, 82, -1, 1);
	nn_test_fill(g, c, 83, 0.5f, 1.5f);
	nn_test_fill(be, c, 84, -0.5f, 0.5f);
	uint16_t *xh = h16(prec, x, cnt), *dyh = h16(prec, dy, cnt);
	uint16_t *y = h16_nan(prec, cnt), *dx = h16(prec, x, cnt);
	float *rm = filled(c, 0), *rv = filled(c, 1), *sm = nn_test_alloc(c);
	float *si = nn_test_alloc(c), *dg = nn_test_alloc(c), *db = nn_test_alloc(c);
	uint16_t *gxb = up_bytes(NULL, (cnt + off) * h2);
	uint16_t *gyb = up_bytes(NULL, (cnt + off) * h2);
	void *gx = gxb + off, *gy = gyb + off;
	void *gdy = up_bytes(dyh, cnt * h2), *gdx = up_bytes(xh, cnt * h2);
	float *gg = up(g, c), *gbe = up(be, c), *grm = up(rm, c), *grv = up(rv, c);
	float *gsm = up(NULL, c), *gsi = up(NULL, c), *gdg = up(NULL, c);
	float *gdb = up(NULL, c);
	CHECK_OK(gpu.be->to_device(&gpu, gx, xh, cnt * h2, &err), &err);
	cpu.precision = gpu.precision = prec;
	char name[128], what[96];
	snprintf(what, sizeof(what), "%s bn %dx%dx%dx%d%s%s, off %d", pcl(prec),
		 n, c, hw, hw, shift != 0 ? " shifted" : "",
		 relu ? " relu" : "", off);
	CHECK_OK(cpu.be->bn_forward_train(&cpu, &bd, xh, g, be, rm, rv, sm, si, y,
					  &err),
		 &err);
	CHECK_OK(gpu.be->bn_forward_train(&gpu, &bd, gx, gg, gbe, grm, grv, gsm,
					  gsi, gy, &err),
		 &err);
	snprintf(name, sizeof(name), "%s: y", what);
	near16_dev(prec, name, y, gy, cnt, tol);
	snprintf(name, sizeof(name), "%s: running mean", what);
	near_dev(name, rm, grm, c);
	snprintf(name, sizeof(name), "%s: running var", what);
	near_dev(name, rv, grv, c);
	snprintf(name, sizeof(name), "%s: saved mean", what);
	near_dev(name, sm, gsm, c);
	snprintf(name, sizeof(name), "%s: saved 1/std", what);
	near_dev(name, si, gsi, c);
	for (int over = 0; over < 2; over++) {
		cpu.dx_overwrite = gpu.dx_overwrite = over;
		CHECK_OK(cpu.be->bn_backward(&cpu, &bd, xh, g, sm, si, dyh, dx, dg,
					     db, &err),
			 &err);
		CHECK_OK(gpu.be->bn_backward(&gpu, &bd, gx, gg, gsm, gsi, gdy, gdx,
					     gdg, gdb, &err),
			 &err);
		snprintf(name, sizeof(name), "%s: dx (%s)", what,
			 over ? "overwritten" : "accumulated");
		near16_dev(prec, name, dx, gdx, cnt, tol);
		snprintf(name, sizeof(name), "%s: dgamma", what);
		near_f_dev(name, dg, gdg, c, tol);
		snprintf(name, sizeof(name), "%s: dbeta", what);
		near_f_dev(name, db, gdb, c, tol);
	}
	cpu.dx_overwrite = gpu.dx_overwrite = 0;
	CHECK_OK(cpu.be->bn_forward_eval(&cpu, &bd, xh, g, be, rm, rv, y, &err),
		 &err);
	/* both with the CPU's running statistics */
	CHECK_OK(gpu.be->to_device(&gpu, grm, rm, c * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, grv, rv, c * sizeof(float), &err), &err);
	CHECK_OK(gpu.be->bn_forward_eval(&gpu, &bd, gx, gg, gbe, grm, grv, gy,
					 &err),
		 &err);
	snprintf(name, sizeof(name), "%s: evaluation y", what);
	near16_dev(prec, name, y, gy, cnt, tol);
	cpu.precision = gpu.precision = NN_PREC_FP32;
	dfree(gxb), dfree(gyb), dfree(gdy), dfree(gdx), dfree(gg), dfree(gbe);
	dfree(grm), dfree(grv), dfree(gsm), dfree(gsi), dfree(gdg), dfree(gdb);
	free(x), free(dy), free(g), free(be), free(xh), free(dyh), free(y);
	free(dx), free(rm), free(rv), free(sm), free(si), free(dg), free(db);
}

/*
 * Add, accumulate and ReLU in 16 bits over a count that leaves a tail
 * after the 16-byte vectors, with every pointer `off` values past
 * alignment (the single-value kernels) or aligned (the vector kernels
 * and the tail): the CPU's bits.
 */
static void half_ew_case(int prec, size_t cnt, int off)
{
	const size_t h2 = sizeof(uint16_t);
	float *a = nn_test_alloc(cnt), *b = nn_test_alloc(cnt);
	nn_test_fill(a, cnt, 91, -1, 1);
	nn_test_fill(b, cnt, 92, -1, 1);
	uint16_t *ah = h16(prec, a, cnt), *bh = h16(prec, b, cnt);
	uint16_t *y = h16(prec, a, cnt), *dx = h16(prec, b, cnt);
	uint16_t *ga0 = up_bytes(NULL, (cnt + off) * h2);
	uint16_t *gb0 = up_bytes(NULL, (cnt + off) * h2);
	uint16_t *gy0 = up_bytes(NULL, (cnt + off) * h2);
	uint16_t *ga = ga0 + off, *gb = gb0 + off, *gy = gy0 + off;
	CHECK_OK(gpu.be->to_device(&gpu, ga, ah, cnt * h2, &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, gb, bh, cnt * h2, &err), &err);
	cpu.precision = gpu.precision = prec;
	char what[64], name[128];
	snprintf(what, sizeof(what), "%s %zu values, off %d", prec_name(prec), cnt,
		 off);
	CHECK_OK(cpu.be->add_forward(&cpu, cnt, ah, bh, y, &err), &err);
	CHECK_OK(gpu.be->add_forward(&gpu, cnt, ga, gb, gy, &err), &err);
	snprintf(name, sizeof(name), "%s: add", what);
	same_dev(name, y, gy, cnt * h2);
	CHECK_OK(cpu.be->add_relu_forward(&cpu, cnt, ah, bh, y, &err), &err);
	CHECK_OK(gpu.be->add_relu_forward(&gpu, cnt, ga, gb, gy, &err), &err);
	snprintf(name, sizeof(name), "%s: add + relu", what);
	same_dev(name, y, gy, cnt * h2);
	CHECK_OK(cpu.be->add_forward(&cpu, cnt, ah, bh, y, &err), &err);
	CHECK_OK(gpu.be->add_forward(&gpu, cnt, ga, gb, gy, &err), &err);
	CHECK_OK(cpu.be->accumulate(&cpu, cnt, ah, y, &err), &err);
	CHECK_OK(gpu.be->accumulate(&gpu, cnt, ga, gy, &err), &err);
	snprintf(name, sizeof(name), "%s: accumulate", what);
	same_dev(name, y, gy, cnt * h2);
	CHECK_OK(cpu.be->relu_forward(&cpu, cnt, y, y, &err), &err);
	CHECK_OK(gpu.be->relu_forward(&gpu, cnt, gy, gy, &err), &err);
	snprintf(name, sizeof(name), "%s: relu in place", what);
	same_dev(name, y, gy, cnt * h2);
	for (int over = 0; over < 2; over++) {
		memcpy(dx, bh, cnt * h2);
		CHECK_OK(gpu.be->to_device(&gpu, gb, bh, cnt * h2, &err), &err);
		cpu.dx_overwrite = gpu.dx_overwrite = over;
		CHECK_OK(cpu.be->relu_backward(&cpu, cnt, y, ah, dx, &err), &err);
		CHECK_OK(gpu.be->relu_backward(&gpu, cnt, gy, ga, gb, &err), &err);
		snprintf(name, sizeof(name), "%s: relu dx (%s)", what,
			 over ? "overwritten" : "accumulated");
		same_dev(name, dx, gb, cnt * h2);
	}
	cpu.dx_overwrite = gpu.dx_overwrite = 0;
	cpu.precision = gpu.precision = NN_PREC_FP32;
	dfree(ga0), dfree(gb0), dfree(gy0);
	free(a), free(b), free(ah), free(bh), free(y), free(dx);
}

static void unscale_case(size_t n, size_t bad_at, float bad)
{
	float *g = nn_test_alloc(n);
	nn_test_fill(g, n, 61, -65536, 65536);
	if (bad_at < n)
		g[bad_at] = bad;
	float *dg = up(g, n);
	int found = -1;
	CHECK_OK(gpu.be->unscale_check(&gpu, dg, n, 1.0f / 65536, &found, &err),
		 &err);
	CHECK_EQ_INT(found, bad_at < n);
	for (size_t i = 0; i < n; i++)
		g[i] *= 1.0f / 65536; /* a power of two: exact on both sides */
	float *back = down(dg, n);
	same_floats("unscaled gradients", g, back, n);
	free(back);
	dfree(dg);
	free(g);
}

void test_mixed(void)
{
	for (int i = 0; i < 4; i++) {
		const int prec = i % 2 ? NN_PREC_FP16 : NN_PREC_BF16;
		cl = i / 2;
		/* prec, n, c_in, hw, c_out, k, stride, pad, groups, bias */
		conv_half_case(prec, 2, 3, 9, 4, 3, 1, 1, 1, 1);   /* 3 channels in */
		conv_half_case(prec, 3, 8, 8, 16, 3, 2, 1, 1, 0);  /* stride 2 */
		conv_half_case(prec, 2, 16, 7, 32, 1, 1, 0, 1, 1); /* 1x1 */
		conv_half_case(prec, 2, 3, 23, 8, 7, 2, 3, 1, 0);  /* 7x7 stem */
		conv_half_case(prec, 2, 8, 9, 8, 3, 2, 1, 8, 0);   /* depthwise */
		conv_half_case(prec, 4, 64, 14, 64, 3, 1, 1, 1, 0); /* tensor-core sized */
		/* prec, n, in, out, bias */
		linear_half_case(prec, 4, 7, 5, 1);
		linear_half_case(prec, 32, 512, 10, 1);
		linear_half_case(prec, 64, 256, 128, 0);
		half_other_case(prec);
		/* prec, n, c, hw, shift, relu, off */
		half_bn_case(prec, 8, 64, 96, 0, 1, 0);  /* 73728 rows */
		half_bn_case(prec, 3, 6, 5, 0, 1, 0);    /* 6 channels */
		half_bn_case(prec, 9, 40, 7, 50, 0, 0);  /* 40: 32 + 8 */
		half_bn_case(prec, 4, 64, 14, 0, 1, 1);  /* unaligned */
		half_bn_case(prec, 4, 2048, 7, 0, 0, 0); /* resnet50's last */
		half_ew_case(prec, 100003, 0);
		half_ew_case(prec, 100003, 1);
		half_ew_case(prec, 5, 0);
	}
	cl = 0;
	/* an unknown precision fails with one line, nothing run */
	nn_linear_desc d = {1, 1, 1, 0};
	float *g = up(NULL, 4);
	gpu.precision = 7;
	CHECK_EQ_INT(gpu.be->linear_forward(&gpu, &d, g, g, NULL, g, &err),
		     IMS_EINVAL);
	gpu.precision = NN_PREC_FP32;
	dfree(g);
	unscale_case(100003, 100003, 0);      /* all finite */
	unscale_case(100003, 77777, INFINITY);
	unscale_case(100003, 5, -INFINITY);
	unscale_case(100003, 100002, NAN);
	unscale_case(0, 0, 0);
}

/* ---- fp32 channels-last -------------------------------------------------- */

/*
 * fp32 channels-last (nhwc descriptors, the KRSC weight copy) against
 * the CPU's channels-last twin (train/layers/cl32.c): convolution y, dx
 * (accumulated), dw (c_out x c_in x kh x kw on both) and db; batch norm
 * y, running statistics, dx, dgamma, dbeta; max pooling y.
 */
static void cl32_case(int n, int c_in, int hw, int c_out, int k, int stride,
		      int bias)
{
	char what[96], name[160];
	snprintf(what, sizeof(what), "fp32 nhwc conv %dx%d s%d %dx%d %d->%d%s", k,
		 k, stride, hw, hw, c_in, c_out, bias ? " bias" : "");
	nn_conv_desc d;
	CHECK_OK(nn_conv_desc_init(&d, n, c_in, hw, hw, c_out, k, stride, k / 2,
				   1, 1, bias, &err),
		 &err);
	d.nhwc = 1;
	const size_t nx = (size_t)n * c_in * hw * hw;
	const size_t ny = (size_t)n * c_out * d.h_out * d.w_out;
	const size_t nw = (size_t)c_out * c_in * k * k;
	float *x = nn_test_alloc(nx), *w = nn_test_alloc(nw), *b = nn_test_alloc(c_out);
	float *dy = nn_test_alloc(ny), *dx = nn_test_alloc(nx), *y = nn_test_alloc(ny);
	float *dw = nn_test_alloc(nw), *db = nn_test_alloc(c_out);
	nn_test_fill(x, nx, 31, -1, 1);
	nn_test_fill(w, nw, 32, -0.5f, 0.5f);
	nn_test_fill(b, c_out, 33, -1, 1);
	nn_test_fill(dy, ny, 34, -1, 1);
	nn_test_fill(dx, nx, 35, -1, 1);
	float *gx = up(x, nx), *gw = up(w, nw), *gb = up(b, c_out);
	float *gdy = up(dy, ny), *gdx = up(dx, nx), *gy = up(NULL, ny);
	float *gdw = up(NULL, nw), *gdb = up(NULL, c_out);
	CHECK_OK(cpu.be->conv_forward(&cpu, &d, x, w, bias ? b : NULL, y, &err),
		 &err);
	CHECK_OK(cpu.be->conv_backward(&cpu, &d, x, w, dy, dx, dw,
				       bias ? db : NULL, &err),
		 &err);
	CHECK_OK(gpu.be->conv_forward(&gpu, &d, gx, gw, bias ? gb : NULL, gy,
				      &err),
		 &err);
	CHECK_OK(gpu.be->conv_backward(&gpu, &d, gx, gw, gdy, gdx, gdw,
				       bias ? gdb : NULL, &err),
		 &err);
	snprintf(name, sizeof(name), "%s y", what);
	near_dev(name, y, gy, ny);
	snprintf(name, sizeof(name), "%s dx (accumulated)", what);
	near_dev(name, dx, gdx, nx);
	snprintf(name, sizeof(name), "%s dw", what);
	near_dev(name, dw, gdw, nw);
	if (bias) {
		snprintf(name, sizeof(name), "%s db", what);
		near_dev(name, db, gdb, c_out);
	}
	/* the output's batch norm (then its pooling), channels-last */
	const int c = c_out, ho = d.h_out;
	nn_bn_desc bd = {n, c, ho, ho, 1e-5f, 0.1f, 1, 0};
	float *g = filled(c, 1.25f), *be = filled(c, 0.5f), *st = filled(4 * (size_t)c, 1);
	float *dg = nn_test_alloc(c), *dbe = nn_test_alloc(c), *by = nn_test_alloc(ny);
	float *gg = up(g, c), *gbe = up(be, c), *gst = up(st, 4 * (size_t)c);
	float *gdg = up(NULL, c), *gdbe = up(NULL, c), *gby = up(NULL, ny);
	CHECK_OK(cpu.be->bn_forward_train(&cpu, &bd, y, g, be, st, st + c,
					  st + 2 * c, st + 3 * c, by, &err),
		 &err);
	CHECK_OK(gpu.be->bn_forward_train(&gpu, &bd, gy, gg, gbe, gst, gst + c,
					  gst + 2 * c, gst + 3 * c, gby, &err),
		 &err);
	snprintf(name, sizeof(name), "%s, bn y", what);
	near_dev(name, by, gby, ny);
	snprintf(name, sizeof(name), "%s, bn statistics", what);
	near_dev(name, st, gst, 4 * (size_t)c);
	CHECK_OK(cpu.be->bn_backward(&cpu, &bd, y, g, st + 2 * c, st + 3 * c, dy,
				     by, dg, dbe, &err),
		 &err);
	CHECK_OK(gpu.be->bn_backward(&gpu, &bd, gy, gg, gst + 2 * c, gst + 3 * c,
				     gdy, gby, gdg, gdbe, &err),
		 &err);
	snprintf(name, sizeof(name), "%s, bn dx", what);
	near_dev(name, by, gby, ny);
	snprintf(name, sizeof(name), "%s, bn dgamma", what);
	near_dev(name, dg, gdg, c);
	snprintf(name, sizeof(name), "%s, bn dbeta", what);
	near_dev(name, dbe, gdbe, c);
	dfree(gx), dfree(gw), dfree(gb), dfree(gdy), dfree(gdx), dfree(gy);
	dfree(gdw), dfree(gdb), dfree(gg), dfree(gbe), dfree(gst), dfree(gdg);
	dfree(gdbe), dfree(gby);
	free(x), free(w), free(b), free(dy), free(dx), free(y), free(dw), free(db);
	free(g), free(be), free(st), free(dg), free(dbe), free(by);
}

void test_cl32(void)
{
	/* n, c_in, hw, c_out, k, stride, bias */
	cl32_case(2, 8, 9, 16, 3, 1, 1);
	cl32_case(2, 16, 8, 32, 1, 2, 0);
	cl32_case(2, 3, 23, 8, 7, 2, 0);
}
