/*
 * conv_winograd.c - 3x3, stride-1, padding-1 convolutions by Winograd's
 * minimal filtering F(2x2, 3x3): the forward pass and the input gradient
 * of conv.c's commonest layer (every 3x3 layer of resnet18/34, vgg16 and
 * convnet7 but the strided ones).
 *
 * Each 2x2 block of outputs (a tile) comes from the 4x4 input patch under
 * it. With the transforms of Lavin and Gray (2016),
 *   y_tile = A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A,
 * the sum over input channels is, for each of the 16 positions xi of the
 * 4x4 transformed tile, one matrix product
 *   M_xi [K, tiles] = U_xi [K, C] V_xi [C, tiles],
 * 16 GEMMs of depth C where im2col needs one of depth 9C with 2.25 times
 * the multiply-adds. The transforms are adds and subtracts (G has halves),
 * and cost O(C + K) per tile against the GEMMs' O(C K).
 *
 * The input gradient of such a convolution is the same convolution of dy
 * with each kernel turned 180 degrees and the channel roles swapped
 * (dx_c = sum_k dy_k * rot180(w_kc), padding 1), so both passes share
 * wino_run. The weight gradient stays with im2col (conv.c).
 *
 * Blocking and threads: tiles are numbered image by image, row by row; a
 * thread takes a fixed contiguous share and works through it in blocks of
 * WINO_TILES: input transform into V, 16 GEMMs into M, output transform
 * into y. V and M of one block are a few MiB, reused at once from cache.
 * Every output is produced by one thread in an order fixed by the shape
 * and the thread count (determinism as in nn_internal.h).
 *
 * Accuracy: the transforms only add, subtract and halve, so the result is
 * the direct sum up to a few float roundings per term; the layer tests
 * hold it to the same bound as the im2col path (1e-5 of the sum of
 * |terms|).
 */
#include <cblas.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "train/conv_winograd.h"

/* Tiles per block; the GEMMs are K x WINO_TILES x C. */
#define WINO_TILES 512
/* Below this many input (or output) channels im2col's deeper GEMM wins:
 * the transforms cost as much as what they save. */
#define WINO_MIN_CHANNELS 16
/*
 * y and dx: each thread multiplies all of U (16 K C floats, packed again
 * by every GEMM) by its share of the tiles, so with few tiles the
 * packing and the kernel transform outweigh the multiply-adds saved.
 * Measured on resnet18's 4x4 stage (512 channels): 128 tiles a thread
 * 10% slower than im2col, 512 tiles 20% faster (1 thread, AVX-512).
 */
#define WINO_MIN_TILES_PER_THREAD 256
/* dw: with 32 input channels the 16 GEMMs (K x 32 each) lost to im2col
 * (convnet7's 16x16 stage, 3.97 against 3.48 ms); from 64 they win. */
#define WINO_DW_MIN_CHANNELS 64
/* The zero-bordered plane each thread copies an input plane into. */
#define WINO_PLANE_MAX 16384
/*
 * The 16 matrices of U, V and M lie WINO_SKEW floats more than their size
 * apart. The transforms read or write all 16 at once, and at sizes that
 * are multiples of 4 KiB those 16 streams fall in one L1 set, which holds
 * 8 lines (a 2-3x slowdown of the transforms without the skew).
 */
#define WINO_SKEW 16

/* Floats between matrices xi and xi + 1 of a [16, rows, cols] stack. */
static size_t xi_stride(size_t rows, size_t cols)
{
	return rows * cols + WINO_SKEW;
}

static long long tiles_total(const nn_conv_desc *d)
{
	return (long long)d->n * ((d->h_out + 1) / 2) * ((d->w_out + 1) / 2);
}

int nn_wino_use_data(const nn_conv_desc *d, int nt)
{
	return nn_wino_eligible(d) &&
	       tiles_total(d) >=
		       (long long)WINO_MIN_TILES_PER_THREAD * (nt < 1 ? 1 : nt);
}

int nn_wino_use_weights(const nn_conv_desc *d)
{
	return nn_wino_eligible(d) && d->c_in >= WINO_DW_MIN_CHANNELS &&
	       d->c_out >= WINO_DW_MIN_CHANNELS;
}

int nn_wino_eligible(const nn_conv_desc *d)
{
	const long long ph = 2LL * ((d->h_out + 1) / 2) + 2;
	const long long pw = 2LL * ((d->w_out + 1) / 2) + 2;
	return d->kh == 3 && d->kw == 3 && d->stride_h == 1 &&
	       d->stride_w == 1 && d->pad_h == 1 && d->pad_w == 1 &&
	       d->dil_h == 1 && d->dil_w == 1 && d->groups == 1 &&
	       d->c_in >= WINO_MIN_CHANNELS && d->c_out >= WINO_MIN_CHANNELS &&
	       ph * pw <= WINO_PLANE_MAX;
}

/* Kernels per side of the blocks transform_kernels works in. */
#define WINO_KBLOCK 16

/*
 * U [16, K, C] from kernels g(k, c) read at g + k * ks + c * cs, turned
 * 180 degrees when `flip`: U_xi = (G g G^T)_xi with
 *   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
 * In blocks of 16 x 16 kernels, so that U is written a whole 64-byte row
 * at a time whether g is read along k or (for dx: transposed) along c.
 */
static void transform_kernels(int k_n, int c_n, const float *g, size_t ks,
			      size_t cs, int flip, int nt, float *u)
{
	const size_t kc = xi_stride((size_t)k_n, (size_t)c_n);
	const int kb_n = (k_n + WINO_KBLOCK - 1) / WINO_KBLOCK;
	const int cb_n = (c_n + WINO_KBLOCK - 1) / WINO_KBLOCK;
#pragma omp parallel for num_threads(nt) schedule(static)
	for (int kb = 0; kb < kb_n; kb++) {
		float blk[16][WINO_KBLOCK][WINO_KBLOCK];
		const int k0 = kb * WINO_KBLOCK;
		const int kn = k_n - k0 < WINO_KBLOCK ? k_n - k0 : WINO_KBLOCK;
		for (int cb = 0; cb < cb_n; cb++) {
			const int c0 = cb * WINO_KBLOCK;
			const int cn = c_n - c0 < WINO_KBLOCK ? c_n - c0
							      : WINO_KBLOCK;
			for (int kk = 0; kk < kn; kk++) {
				/* gather 16 kernels, then transform them
				 * side by side (the cc loops vectorise) */
				float f[9][WINO_KBLOCK], t[4][3][WINO_KBLOCK];
				for (int cc = 0; cc < WINO_KBLOCK; cc++) {
					const float *src = g + (size_t)(k0 + kk) * ks +
							   (size_t)(c0 + (cc < cn ? cc : 0)) * cs;
					for (int i = 0; i < 9; i++)
						f[i][cc] = src[flip ? 8 - i : i];
				}
				for (int j = 0; j < 3; j++) /* G f */
					for (int cc = 0; cc < WINO_KBLOCK; cc++) {
						t[0][j][cc] = f[j][cc];
						t[1][j][cc] = 0.5f * (f[j][cc] + f[3 + j][cc] +
								      f[6 + j][cc]);
						t[2][j][cc] = 0.5f * (f[j][cc] - f[3 + j][cc] +
								      f[6 + j][cc]);
						t[3][j][cc] = f[6 + j][cc];
					}
				for (int i = 0; i < 4; i++) /* (G f) G^T */
					for (int cc = 0; cc < WINO_KBLOCK; cc++) {
						blk[4 * i + 0][kk][cc] = t[i][0][cc];
						blk[4 * i + 1][kk][cc] =
							0.5f * (t[i][0][cc] + t[i][1][cc] +
								t[i][2][cc]);
						blk[4 * i + 2][kk][cc] =
							0.5f * (t[i][0][cc] - t[i][1][cc] +
								t[i][2][cc]);
						blk[4 * i + 3][kk][cc] = t[i][2][cc];
					}
			}
			for (int xi = 0; xi < 16; xi++)
				for (int kk = 0; kk < kn; kk++) {
					float *dst = u + (size_t)xi * kc +
						     (size_t)(k0 + kk) * c_n + c0;
					/* a fixed size compiles to vector
					 * moves, not a call */
					if (cn == WINO_KBLOCK)
						memcpy(dst, blk[xi][kk],
						       sizeof(blk[xi][kk]));
					else
						memcpy(dst, blk[xi][kk],
						       (size_t)cn * sizeof(float));
				}
		}
	}
}

typedef struct wino_shape {
	int n, c_in, c_out, h, w;
	int th, tw;      /* tiles per column and row */
	size_t tiles;    /* per image: th * tw */
	int ph, pw;      /* the zero-bordered plane: 2 th + 2 by 2 tw + 2 */
} wino_shape;

/*
 * Tiles are numbered image by image, row by row. A run is the longest
 * stretch from tile t (before `end`) that stays in one tile row of one
 * image: the transforms work a run at a time.
 */
typedef struct tile_run {
	size_t img;   /* image */
	int ty, tx0;  /* tile row, first tile column */
	int n;        /* tiles */
} tile_run;

static tile_run tile_run_at(const wino_shape *s, size_t t, size_t end)
{
	tile_run r;
	r.img = t / s->tiles;
	const size_t local = t - r.img * s->tiles;
	r.ty = (int)(local / (size_t)s->tw);
	r.tx0 = (int)(local % (size_t)s->tw);
	r.n = s->tw - r.tx0;
	if ((size_t)r.n > end - t)
		r.n = (int)(end - t);
	return r;
}

/*
 * One row of nx tiles of input_transform: e_r / o_r are the even / odd
 * columns of the four plane rows under the tiles, q[xi] where matrix xi
 * of V takes them.
 */
static void tile_row_transform(const float *restrict e0,
			       const float *restrict e1,
			       const float *restrict e2,
			       const float *restrict e3,
			       const float *restrict o0,
			       const float *restrict o1,
			       const float *restrict o2,
			       const float *restrict o3, int nx, float *const *q)
{
	float *restrict q0 = q[0], *restrict q1 = q[1], *restrict q2 = q[2];
	float *restrict q3 = q[3], *restrict q4 = q[4], *restrict q5 = q[5];
	float *restrict q6 = q[6], *restrict q7 = q[7], *restrict q8 = q[8];
	float *restrict q9 = q[9], *restrict q10 = q[10], *restrict q11 = q[11];
	float *restrict q12 = q[12], *restrict q13 = q[13];
	float *restrict q14 = q[14], *restrict q15 = q[15];
#pragma omp simd
	for (int j = 0; j < nx; j++) {
		/* B^T d: rows, for the tile's columns 0 (a), 1 (b), 2 (c),
		 * 3 (d) */
		const float a0 = e0[j] - e2[j], a1 = e1[j] + e2[j];
		const float a2 = e2[j] - e1[j], a3 = e1[j] - e3[j];
		const float b0 = o0[j] - o2[j], b1 = o1[j] + o2[j];
		const float b2 = o2[j] - o1[j], b3 = o1[j] - o3[j];
		const float c0 = e0[j + 1] - e2[j + 1], c1 = e1[j + 1] + e2[j + 1];
		const float c2 = e2[j + 1] - e1[j + 1], c3 = e1[j + 1] - e3[j + 1];
		const float d0 = o0[j + 1] - o2[j + 1], d1 = o1[j + 1] + o2[j + 1];
		const float d2 = o2[j + 1] - o1[j + 1], d3 = o1[j + 1] - o3[j + 1];
		/* (B^T d) B: columns */
		q0[j] = a0 - c0, q1[j] = b0 + c0, q2[j] = c0 - b0, q3[j] = b0 - d0;
		q4[j] = a1 - c1, q5[j] = b1 + c1, q6[j] = c1 - b1, q7[j] = b1 - d1;
		q8[j] = a2 - c2, q9[j] = b2 + c2, q10[j] = c2 - b2, q11[j] = b2 - d2;
		q12[j] = a3 - c3, q13[j] = b3 + c3, q14[j] = c3 - b3;
		q15[j] = b3 - d3;
	}
}

/*
 * V [16, C, ldv] columns [0, t1 - t0) from tiles [t0, t1) of x: B^T d B of
 * each 4x4 patch d, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
 * Each plane the block touches is first copied into a zero-bordered
 * plane split by column parity (even and odd columns of the bordered
 * plane side by side), so that tile j's four columns are even[j], odd[j],
 * even[j + 1], odd[j + 1]: every load and store of the tile loop then
 * runs along j, and the loop vectorises.
 */
static void input_transform(const wino_shape *s, const float *x, size_t t0,
			    size_t t1, float *v, size_t ldv, float *plane)
{
	const size_t hw = (size_t)s->h * s->w;
	const size_t cs = xi_stride((size_t)s->c_in, ldv);
	const int ew = s->tw + 1; /* columns of each parity: pw / 2 */
	const int w = s->w;
	float *pe = plane, *po = plane + (size_t)s->ph * ew;
	memset(plane, 0, (size_t)s->ph * s->pw * sizeof(float));
	for (int c = 0; c < s->c_in; c++) {
		size_t img = SIZE_MAX; /* whose plane is in pe/po */
		float *col = v + (size_t)c * ldv;
		for (size_t t = t0; t < t1;) {
			const tile_run run = tile_run_at(s, t, t1);
			if (run.img != img) {
				/* bordered column q + 1 holds input column q */
				img = run.img;
				const float *src = x + (img * s->c_in + c) * hw;
				for (int r = 0; r < s->h; r++) {
					const float *sr = src + (size_t)r * w;
					float *er = pe + (size_t)(r + 1) * ew;
					float *orow = po + (size_t)(r + 1) * ew;
					for (int k = 0; 2 * k < w; k++)
						orow[k] = sr[2 * k];
					for (int k = 1; 2 * k - 1 < w; k++)
						er[k] = sr[2 * k - 1];
				}
			}
			const size_t r0 = (size_t)(2 * run.ty) * ew + run.tx0;
			const float *e0 = pe + r0, *e1 = e0 + ew, *e2 = e1 + ew,
				    *e3 = e2 + ew;
			const float *o0 = po + r0, *o1 = o0 + ew, *o2 = o1 + ew,
				    *o3 = o2 + ew;
			float *q[16];
			for (int i = 0; i < 16; i++)
				q[i] = col + (t - t0) + (size_t)i * cs;
			tile_row_transform(e0, e1, e2, e3, o0, o1, o2, o3, run.n, q);
			t += (size_t)run.n;
		}
	}
}

/*
 * y tiles [t0, t1) from M [16, K, ldm] by A^T m A,
 * A^T = [1 1 1 0; 0 1 -1 -1], plus the bias; the last row and column of
 * a tile are dropped where the output has an odd size. accumulate: y +=.
 */
static void output_transform(const wino_shape *s, const float *m, size_t ldm,
			     size_t t0, size_t t1, const float *bias,
			     int accumulate, float *y)
{
	const size_t hw = (size_t)s->h * s->w;
	const size_t kstride = xi_stride((size_t)s->c_out, ldm);
	for (int k = 0; k < s->c_out; k++) {
		const float bk = bias ? bias[k] : 0.0f;
		const float *row = m + (size_t)k * ldm;
		for (size_t t = t0; t < t1;) {
			const tile_run run = tile_run_at(s, t, t1);
			const int ty = run.ty, tx0 = run.tx0, nx = run.n;
			float *y0 = y + (run.img * s->c_out + k) * hw +
				    (size_t)(2 * ty) * s->w;
			/* an odd height: the last tile row has one output row */
			float *y1 = 2 * ty + 1 < s->h ? y0 + s->w : NULL;
			const float *mm = row + (t - t0);
			for (int j = 0; j < nx; j++) {
				float a[4][2];
				for (int q = 0; q < 4; q++) {
					/* m A: columns */
					const float *c = mm + (size_t)(4 * q) * kstride + j;
					a[q][0] = c[0] + c[kstride] + c[2 * kstride];
					a[q][1] = c[kstride] - c[2 * kstride] -
						  c[3 * kstride];
				}
				const float r00 = a[0][0] + a[1][0] + a[2][0] + bk;
				const float r01 = a[0][1] + a[1][1] + a[2][1] + bk;
				const float r10 = a[1][0] - a[2][0] - a[3][0] + bk;
				const float r11 = a[1][1] - a[2][1] - a[3][1] + bk;
				const int ox = 2 * (tx0 + j);
				const int two = ox + 1 < s->w;
				if (accumulate) {
					y0[ox] += r00;
					if (two)
						y0[ox + 1] += r01;
					if (y1) {
						y1[ox] += r10;
						if (two)
							y1[ox + 1] += r11;
					}
				} else {
					y0[ox] = r00;
					if (two)
						y0[ox + 1] = r01;
					if (y1) {
						y1[ox] = r10;
						if (two)
							y1[ox + 1] = r11;
					}
				}
			}
			t += (size_t)nx;
		}
	}
}

/* Rounds a float count up to 64 bytes, so carved buffers stay aligned. */
static size_t round16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

/* One thread's V, M and bordered plane. */
static size_t wino_thread_floats(const wino_shape *s)
{
	return round16(16 * xi_stride((size_t)s->c_in, WINO_TILES)) +
	       round16(16 * xi_stride((size_t)s->c_out, WINO_TILES)) +
	       round16((size_t)s->ph * s->pw);
}

/* Thread t's share [*lo, *hi) of n tiles. */
static void split_tiles(size_t n, int t, int nt, size_t *lo, size_t *hi)
{
	*lo = n * (size_t)t / (size_t)nt;
	*hi = n * (size_t)(t + 1) / (size_t)nt;
}

/*
 * out [N, K, H, W] (= or +=) the padding-1 3x3 convolution of in
 * [N, C, H, W] with the transformed kernels u [16, K, C], plus bias.
 */
static int wino_run(nn_ctx *ctx, const wino_shape *s, int nt, const float *u,
		    const float *in, const float *bias, int accumulate,
		    float *out, float *ws)
{
	const size_t total = (size_t)s->n * s->tiles;
	const size_t sv = xi_stride((size_t)s->c_in, WINO_TILES);
	const size_t sm = xi_stride((size_t)s->c_out, WINO_TILES);
	const size_t su = xi_stride((size_t)s->c_out, (size_t)s->c_in);
	const size_t per_thread = wino_thread_floats(s);
	(void)ctx;
	openblas_set_num_threads(1);
#pragma omp parallel num_threads(nt)
	{
		const int t = omp_get_thread_num(), team = omp_get_num_threads();
		float *v = ws + (size_t)t * per_thread;
		float *m = v + round16(16 * sv);
		float *plane = m + round16(16 * sm);
		size_t lo, hi;
		split_tiles(total, t, team, &lo, &hi);
		for (size_t b0 = lo; b0 < hi; b0 += WINO_TILES) {
			const size_t b1 = hi - b0 < WINO_TILES ? hi : b0 + WINO_TILES;
			const int nb = (int)(b1 - b0);
			input_transform(s, in, b0, b1, v, WINO_TILES, plane);
			for (int xi = 0; xi < 16; xi++)
				cblas_sgemm(CblasRowMajor, CblasNoTrans,
					    CblasNoTrans, s->c_out, nb, s->c_in,
					    1.0f, u + (size_t)xi * su, s->c_in,
					    v + (size_t)xi * sv, WINO_TILES, 0.0f,
					    m + (size_t)xi * sm, WINO_TILES);
			output_transform(s, m, WINO_TILES, b0, b1, bias,
					 accumulate, out);
		}
	}
	return 0;
}

static size_t u_floats(const wino_shape *s)
{
	return round16(16 * xi_stride((size_t)s->c_out, (size_t)s->c_in));
}

/* The workspace: u, then each thread's V, M and bordered plane. */
static int carve(nn_ctx *ctx, const wino_shape *s, int nt, float **ws,
		 ims_error *err)
{
	*ws = nn_ctx_scratch(ctx, u_floats(s) + (size_t)nt * wino_thread_floats(s),
			     err);
	if (!*ws)
		return ims_fail_context(err, "cannot run a convolution");
	return 0;
}

static void make_shape(const nn_conv_desc *d, int transposed, wino_shape *s)
{
	s->n = d->n;
	s->c_in = transposed ? d->c_out : d->c_in;
	s->c_out = transposed ? d->c_in : d->c_out;
	s->h = d->h_out;
	s->w = d->w_out;
	s->th = (s->h + 1) / 2;
	s->tw = (s->w + 1) / 2;
	s->tiles = (size_t)s->th * s->tw;
	s->ph = 2 * s->th + 2;
	s->pw = 2 * s->tw + 2;
}

/*
 * The dy side of the weight gradient: DY [16, K, ldd] columns
 * [0, t1 - t0) from tiles [t0, t1) of dy, G dy G^T of each 2x2 tile with
 *   G = [1 0; 1/2 1/2; 1/2 -1/2; 0 -1]
 * (F(3x3, 2x2)'s G with its last row negated, which pairs it with the
 * forward pass's B^T; see nn_wino_backward_weights). Tiles hanging over an
 * odd plane read zeros from a bordered copy.
 */
static void dy_transform(const wino_shape *s, const float *dy, size_t t0,
			 size_t t1, float *dt, size_t ldd, float *plane)
{
	const size_t hw = (size_t)s->h * s->w;
	const size_t kstride = xi_stride((size_t)s->c_out, ldd);
	const int pw = 2 * s->tw;
	memset(plane, 0, (size_t)2 * s->th * pw * sizeof(float));
	for (int k = 0; k < s->c_out; k++) {
		size_t img = SIZE_MAX; /* whose plane is in plane */
		float *col = dt + (size_t)k * ldd;
		for (size_t t = t0; t < t1;) {
			const tile_run run = tile_run_at(s, t, t1);
			if (run.img != img) {
				img = run.img;
				const float *src = dy + (img * s->c_out + k) * hw;
				for (int r = 0; r < s->h; r++)
					memcpy(plane + (size_t)r * pw,
					       src + (size_t)r * s->w,
					       (size_t)s->w * sizeof(float));
			}
			const float *p0 = plane + (size_t)(2 * run.ty) * pw;
			const float *p1 = p0 + pw;
			float *base = col + (t - t0);
			for (int j = 0; j < run.n; j++) {
				const int o = 2 * (run.tx0 + j);
				float g[4][2];
				for (int q = 0; q < 2; q++) {
					/* G dy: rows */
					g[0][q] = p0[o + q];
					g[1][q] = 0.5f * (p0[o + q] + p1[o + q]);
					g[2][q] = 0.5f * (p0[o + q] - p1[o + q]);
					g[3][q] = -p1[o + q];
				}
				for (int i = 0; i < 4; i++) {
					/* (G dy) G^T: columns */
					float *out = base + (size_t)(4 * i) * kstride + j;
					out[0] = g[i][0];
					out[kstride] = 0.5f * (g[i][0] + g[i][1]);
					out[2 * kstride] = 0.5f * (g[i][0] - g[i][1]);
					out[3 * kstride] = -g[i][1];
				}
			}
			t += (size_t)run.n;
		}
	}
}

/* Floats of the V and DY blocks of the weight gradient, both together. */
#define WINO_DW_BLOCK_FLOATS (4u << 20)

/*
 * dw [K, C, 3, 3] = the weight gradient. Per 4x4 input patch d and 2x2
 * output-gradient tile g, the patch's contribution to the 3x3 kernel
 * gradient is a correlation of d with g, F(3x3, 2x2):
 *   A^T [(G g G^T) .* (B^T d B)] A,  A^T = [1 1 1 0; 0 1 -1 0; 0 1 1 1],
 * so summed over tiles it is 16 GEMMs DW_xi [K, C] = DY_xi [K, tiles]
 * V_xi [C, tiles]^T (depth: the tiles) and one transform of the sums.
 * F(3x3, 2x2)'s B^T differs from the forward pass's in the sign of its
 * last row; negating G's last row instead leaves every product the same
 * and lets V come from input_transform.
 * Tiles go in blocks: every thread transforms a share of a block, then
 * each thread multiplies its own xi over the whole block (so each DW_xi
 * is summed by one thread in block order, whatever the thread count).
 */
static int wino_weights(const wino_shape *s, int nt, const float *x,
			const float *dy, float *dw, float *ws)
{
	const size_t total = (size_t)s->n * s->tiles;
	size_t tb = WINO_DW_BLOCK_FLOATS / (16 * (size_t)(s->c_in + s->c_out));
	if (tb < WINO_TILES)
		tb = WINO_TILES;
	if (tb > total)
		tb = total;
	const size_t sv = xi_stride((size_t)s->c_in, tb);
	const size_t sd = xi_stride((size_t)s->c_out, tb);
	const size_t sw = xi_stride((size_t)s->c_out, (size_t)s->c_in);
	float *v = ws, *dt = v + round16(16 * sv), *acc = dt + round16(16 * sd);
	float *planes = acc + round16(16 * sw);
	const size_t plane_floats = round16((size_t)s->ph * s->pw);
	openblas_set_num_threads(1);
#pragma omp parallel num_threads(nt)
	{
		const int t = omp_get_thread_num(), team = omp_get_num_threads();
		float *plane = planes + (size_t)t * plane_floats;
		const int xi0 = 16 * t / team, xi1 = 16 * (t + 1) / team;
		for (size_t b0 = 0; b0 < total; b0 += tb) {
			const size_t nb = total - b0 < tb ? total - b0 : tb;
			size_t lo, hi;
			split_tiles(nb, t, team, &lo, &hi);
			if (lo < hi) {
				input_transform(s, x, b0 + lo, b0 + hi, v + lo, tb,
						plane);
				dy_transform(s, dy, b0 + lo, b0 + hi, dt + lo, tb,
					     plane);
			}
#pragma omp barrier
			for (int xi = xi0; xi < xi1; xi++)
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
					    s->c_out, s->c_in, (int)nb, 1.0f,
					    dt + (size_t)xi * sd, (int)tb,
					    v + (size_t)xi * sv, (int)tb,
					    b0 ? 1.0f : 0.0f, acc + (size_t)xi * sw,
					    s->c_in);
			/* v and dt are refilled by the next block */
#pragma omp barrier
		}
		/* dw = A^T DW A, kernel by kernel */
#pragma omp for schedule(static)
		for (int k = 0; k < s->c_out; k++) {
			for (int c = 0; c < s->c_in; c++) {
				const float *m = acc + (size_t)k * s->c_in + c;
				float a[3][4];
				for (int j = 0; j < 4; j++) {
					/* A^T m: rows */
					const float m0 = m[(size_t)j * sw];
					const float m1 = m[(size_t)(4 + j) * sw];
					const float m2 = m[(size_t)(8 + j) * sw];
					const float m3 = m[(size_t)(12 + j) * sw];
					a[0][j] = m0 + m1 + m2;
					a[1][j] = m1 - m2;
					a[2][j] = m1 + m2 + m3;
				}
				float *o = dw + ((size_t)k * s->c_in + c) * 9;
				for (int r = 0; r < 3; r++) { /* (A^T m) A */
					o[3 * r + 0] = a[r][0] + a[r][1] + a[r][2];
					o[3 * r + 1] = a[r][1] - a[r][2];
					o[3 * r + 2] = a[r][1] + a[r][2] + a[r][3];
				}
			}
		}
	}
	return 0;
}

int nn_wino_backward_weights(nn_ctx *ctx, const nn_conv_desc *d, int nt,
			     const float *x, const float *dy, float *dw,
			     ims_error *err)
{
	wino_shape s;
	make_shape(d, 0, &s);
	const size_t total = (size_t)s.n * s.tiles;
	size_t tb = WINO_DW_BLOCK_FLOATS / (16 * (size_t)(s.c_in + s.c_out));
	if (tb < WINO_TILES)
		tb = WINO_TILES;
	if (tb > total)
		tb = total;
	const size_t n = round16(16 * xi_stride((size_t)s.c_in, tb)) +
			 round16(16 * xi_stride((size_t)s.c_out, tb)) +
			 u_floats(&s) +
			 (size_t)nt * round16((size_t)s.ph * s.pw);
	float *ws = nn_ctx_scratch(ctx, n, err);
	if (!ws)
		return ims_fail_context(err, "cannot run a convolution backward");
	return wino_weights(&s, nt, x, dy, dw, ws);
}

int nn_wino_forward(nn_ctx *ctx, const nn_conv_desc *d, int nt,
		    const float *x, const float *w, const float *b, float *y,
		    ims_error *err)
{
	wino_shape s;
	make_shape(d, 0, &s);
	float *ws;
	FORWARD_IF_ERR(carve(ctx, &s, nt, &ws, err));
	const size_t nu = u_floats(&s);
	/* w [K, C, 3, 3]: kernel (k, c) at k 9C + 9c */
	transform_kernels(s.c_out, s.c_in, w, (size_t)9 * s.c_in, 9, 0, nt, ws);
	return wino_run(ctx, &s, nt, ws, x, b, 0, y, ws + nu);
}

int nn_wino_backward_data(nn_ctx *ctx, const nn_conv_desc *d, int nt,
			  const float *w, const float *dy, int overwrite,
			  float *dx, ims_error *err)
{
	wino_shape s;
	make_shape(d, 1, &s);
	float *ws;
	FORWARD_IF_ERR(carve(ctx, &s, nt, &ws, err));
	const size_t nu = u_floats(&s);
	/* output channel c of dx, input channel k of dy: rot180(w[k][c]) */
	transform_kernels(s.c_out, s.c_in, w, 9, (size_t)9 * d->c_in, 1, nt,
			  ws);
	return wino_run(ctx, &s, nt, ws, dy, NULL, !overwrite, dx, ws + nu);
}
