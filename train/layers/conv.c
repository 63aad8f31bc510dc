/*
 * conv.c - 2-D convolution (PyTorch's Conv2d), CPU reference kernels:
 * im2col + sgemm, col2im for the input gradient. 3x3 stride-1 layers
 * take Winograd's minimal filtering instead (conv_winograd.c).
 *
 * Shapes: x [N, C_in, H, W], w [C_out, C_in/G, KH, KW], y [N, C_out, Ho, Wo].
 * The column matrix col [C_in*KH*KW, cols] has one row per (c, ki, kj) and
 * one column per output position (image, oh, ow), so the rows of group g
 * are the contiguous block [g*Kg, (g+1)*Kg), Kg = C_in/G*KH*KW, and
 *   forward   y_g [Co/G, cols] = w_g [Co/G, Kg]  col_g [Kg, cols]
 *   weights  dw_g [Co/G, Kg]   = dy_g [Co/G, cols] col_g^T
 *   input  dcol_g [Kg, cols]   = w_g^T dy_g, then col2im adds it into dx.
 *
 * GEMM shapes: deep layers have tiny planes (4x4 at 112x112 input), and a
 * GEMM 16 columns wide runs far below the BLAS's rate. So the batch goes
 * in blocks of whole images with about CONV_COLS output positions per
 * thread: one im2col, one GEMM per group, then a scatter of
 * [C_out, imgs*Ho*Wo] back to NCHW (a copy costing ~1/(2 Kg) of the GEMM).
 * A block of one image needs no scatter: the GEMM writes y (and reads dy)
 * in place, and a 1x1 stride-1 unpadded convolution then needs no im2col
 * either, its column matrix being the image itself.
 *
 * Threads: one OpenMP team does everything, and the BLAS runs
 * single-threaded inside it. Each thread takes a fixed slice of a block's
 * columns: it builds them, multiplies them (a GEMM with the weights'
 * rows, so the only duplicated packing is the small weight matrix) and
 * scatters them. dw splits its Kg columns instead (each thread reduces
 * over all of the block's columns); col2im gives each thread whole input
 * channels. We do not let OpenBLAS thread: its pthreads and the OpenMP
 * workers (which spin for milliseconds after each region) fight over the
 * cores, which made some layers 3-4x slower on 2 threads.
 *
 * Determinism: every output element is computed by one thread in an order
 * that depends only on the shape and ctx->threads; dw sums its blocks with
 * beta = 1 in block order, and the bias gradient (one thread per channel,
 * planes in n order) does not depend on the threads at all.
 */
#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <string.h>

#include "train/conv_winograd.h"

/* Output positions (GEMM columns) per thread in a block of images... */
#define CONV_COLS 1024
/* ...while the column matrix and the staging of y stay under this many
 * floats each (they are written and read back once per block). */
#define CONV_BLOCK_FLOATS (4u << 20)
/* Convolutions under this many multiply-adds stay on one thread. */
#define CONV_PAR_MIN_MACS (1u << 18)
/* Thread slices of a block's columns start at multiples of this many
 * floats (64 bytes), so threads seldom write the same cache line. */
#define CONV_ALIGN 16

typedef struct conv_plan {
	size_t hw_in, hw_out;
	int kk;     /* KH*KW */
	int k_rows; /* rows of col: C_in*KH*KW */
	int kg;     /* GEMM depth of one group: C_in/G*KH*KW */
	int cg_in;  /* C_in/G */
	int cg_out; /* C_out/G */
	int imgs;   /* images per block */
	int direct; /* 1x1, stride 1, unpadded: one image's col is x */
	int nt;     /* threads */
} conv_plan;

/* a * b into *out, failing when it does not fit in INT_MAX elements. */
static int mul_ok(size_t a, size_t b, size_t *out)
{
	return !__builtin_mul_overflow(a, b, out) && *out <= INT_MAX;
}

/* The output size along one axis, PyTorch's arithmetic; < 1 when empty. */
static long long out_size(int in, int k, int stride, int pad, int dil)
{
	long long span = (long long)in + 2LL * pad - (long long)dil * (k - 1) - 1;
	return span < 0 ? 0 : span / stride + 1;
}

int nn_conv_check_desc(const nn_conv_desc *d, const char *what, ims_error *err)
{
	RETURN_IF(!d, err, IMS_EINVAL, "cannot %s: no descriptor", what);
	RETURN_IF(d->n < 1 || d->c_in < 1 || d->h_in < 1 || d->w_in < 1 ||
			  d->c_out < 1,
		  err, IMS_EINVAL,
		  "cannot %s: invalid shape %dx%dx%dx%d -> %d channels "
		  "(all must be >= 1)",
		  what, d->n, d->c_in, d->h_in, d->w_in, d->c_out);
	RETURN_IF(d->kh < 1 || d->kw < 1 || d->stride_h < 1 ||
			  d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1,
		  err, IMS_EINVAL,
		  "cannot %s: invalid kernel %dx%d, stride %dx%d, dilation %dx%d "
		  "(all must be >= 1)",
		  what, d->kh, d->kw, d->stride_h, d->stride_w, d->dil_h,
		  d->dil_w);
	RETURN_IF(d->pad_h < 0 || d->pad_w < 0, err, IMS_EINVAL,
		  "cannot %s: negative padding %dx%d", what, d->pad_h,
		  d->pad_w);
	RETURN_IF(d->groups < 1, err, IMS_EINVAL, "cannot %s: %d groups", what,
		  d->groups);
	RETURN_IF(d->c_in % d->groups || d->c_out % d->groups, err,
		  IMS_EINVAL,
		  "cannot %s: %d input and %d output channels are not both "
		  "multiples of %d groups",
		  what, d->c_in, d->c_out, d->groups);
	RETURN_IF(d->bias != 0 && d->bias != 1, err, IMS_EINVAL,
		  "cannot %s: bias flag %d is not 0 or 1", what, d->bias);
	long long ho = out_size(d->h_in, d->kh, d->stride_h, d->pad_h, d->dil_h);
	long long wo = out_size(d->w_in, d->kw, d->stride_w, d->pad_w, d->dil_w);
	RETURN_IF(ho < 1 || wo < 1, err, IMS_EINVAL,
		  "cannot %s: a %dx%d kernel with dilation %dx%d does not fit "
		  "a %dx%d input padded by %dx%d",
		  what, d->kh, d->kw, d->dil_h, d->dil_w, d->h_in, d->w_in,
		  d->pad_h, d->pad_w);
	/* The BLAS's dimensions and the loops' positions within a padded
	 * plane, an image or a row of col are int; whole tensors are size_t.
	 * A padded size within int bounds the kernel's reach and the output
	 * size too. */
	size_t plane_in, img_in, plane_out, img_out, kk, k_rows, w_size, col1;
	const int ok =
		(long long)d->h_in + 2LL * d->pad_h <= INT_MAX &&
		(long long)d->w_in + 2LL * d->pad_w <= INT_MAX &&
		mul_ok((size_t)d->h_in, (size_t)d->w_in, &plane_in) &&
		mul_ok(plane_in, (size_t)d->c_in, &img_in) &&
		mul_ok((size_t)ho, (size_t)wo, &plane_out) &&
		mul_ok(plane_out, (size_t)d->c_out, &img_out) &&
		mul_ok((size_t)d->kh, (size_t)d->kw, &kk) &&
		mul_ok(kk, (size_t)d->c_in, &k_rows) &&
		mul_ok(kk * (size_t)(d->c_in / d->groups), (size_t)d->c_out,
		       &w_size) &&
		!__builtin_mul_overflow(k_rows, plane_out, &col1) &&
		col1 <= SIZE_MAX / sizeof(float) / 4 &&
		img_in <= SIZE_MAX / sizeof(float) / (size_t)d->n &&
		img_out <= SIZE_MAX / sizeof(float) / (size_t)d->n;
	RETURN_IF(!ok, err, IMS_ELIMIT,
		  "cannot %s: %dx%dx%dx%d -> %d channels with a %dx%d kernel "
		  "padded by %dx%d is too large",
		  what, d->n, d->c_in, d->h_in, d->w_in, d->c_out, d->kh, d->kw,
		  d->pad_h, d->pad_w);
	RETURN_IF(d->h_out != ho || d->w_out != wo, err, IMS_EINVAL,
		  "cannot %s: output %dx%d does not match the %lldx%lld that "
		  "the input, kernel, stride, padding and dilation give",
		  what, d->h_out, d->w_out, ho, wo);
	return 0;
}

int nn_conv_desc_init(nn_conv_desc *d, int n, int c_in, int h_in, int w_in,
		      int c_out, int k, int stride, int pad, int dil,
		      int groups, int bias, ims_error *err)
{
	RETURN_IF(!d, err, IMS_EINVAL,
		  "cannot set up a convolution: no descriptor");
	long long ho = out_size(h_in, k, stride < 1 ? 1 : stride, pad, dil);
	long long wo = out_size(w_in, k, stride < 1 ? 1 : stride, pad, dil);
	*d = (nn_conv_desc){
		.n = n, .c_in = c_in, .h_in = h_in, .w_in = w_in,
		.c_out = c_out,
		.h_out = ho > INT_MAX ? INT_MAX : (int)ho,
		.w_out = wo > INT_MAX ? INT_MAX : (int)wo,
		.kh = k, .kw = k, .stride_h = stride, .stride_w = stride,
		.pad_h = pad, .pad_w = pad, .dil_h = dil, .dil_w = dil,
		.groups = groups, .bias = bias,
	};
	return nn_conv_check_desc(d, "set up a convolution", err);
}

/* ---- plan and workspace ------------------------------------------------ */

static void make_plan(const nn_conv_desc *d, int threads, conv_plan *p)
{
	p->hw_in = (size_t)d->h_in * (size_t)d->w_in;
	p->hw_out = (size_t)d->h_out * (size_t)d->w_out;
	p->kk = d->kh * d->kw;
	p->k_rows = d->c_in * p->kk;
	p->kg = d->c_in / d->groups * p->kk;
	p->cg_in = d->c_in / d->groups;
	p->cg_out = d->c_out / d->groups;
	p->direct = d->kh == 1 && d->kw == 1 && d->stride_h == 1 &&
		    d->stride_w == 1 && d->pad_h == 0 && d->pad_w == 0;
	double macs = (double)d->n * p->hw_out * d->c_out * p->kg;
	p->nt = threads < 1 || macs < CONV_PAR_MIN_MACS ? 1 : threads;
	size_t imgs = ((size_t)CONV_COLS * p->nt + p->hw_out - 1) / p->hw_out;
	size_t rows = (size_t)(p->k_rows > d->c_out ? p->k_rows : d->c_out);
	size_t by_mem = CONV_BLOCK_FLOATS / (rows * p->hw_out);
	if (imgs > by_mem)
		imgs = by_mem;
	if (imgs > INT_MAX / p->hw_out)
		imgs = INT_MAX / p->hw_out;
	if (imgs > (size_t)d->n)
		imgs = (size_t)d->n;
	p->imgs = imgs < 1 ? 1 : (int)imgs;
}

/* Rounds a float count up to 64 bytes, so carved buffers stay aligned. */
static size_t round16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

/*
 * One workspace call for the whole pass (the context hands out one
 * buffer): the column matrix when need_col is set, the [C_out, cols]
 * staging of y or dy when blocks hold more than one image.
 */
static int carve(nn_ctx *ctx, const nn_conv_desc *d, const conv_plan *p,
		 int need_col, float **col, float **stage, ims_error *err)
{
	size_t cols = (size_t)p->imgs * p->hw_out;
	size_t n_col = need_col ? round16((size_t)p->k_rows * cols) : 0;
	size_t n_stage = p->imgs > 1 ? round16((size_t)d->c_out * cols) : 0;
	*col = *stage = NULL;
	if (!n_col && !n_stage)
		return 0;
	float *ws = nn_ctx_scratch(ctx, n_col + n_stage, err);
	if (!ws)
		return ims_fail_context(err, "cannot run a convolution");
	*col = need_col ? ws : NULL;
	*stage = n_stage ? ws + n_col : NULL;
	return 0;
}

static void set_blas_threads(int n)
{
	if (openblas_get_num_threads() != n)
		openblas_set_num_threads(n);
}

/* Thread t's share [*lo, *hi) of n, cut at multiples of align. */
static void split(int n, int align, int t, int nt, int *lo, int *hi)
{
	long long units = ((long long)n + align - 1) / align;
	long long l = units * t / nt * align, h = units * (t + 1) / nt * align;
	*lo = (int)(l < n ? l : n);
	*hi = (int)(h < n ? h : n);
}

/* ---- im2col / col2im --------------------------------------------------- */

/*
 * The output positions o in [0, n_out) whose input position o*stride + off
 * lies in [0, n_in): [*lo, *hi), empty when *lo == *hi.
 */
static void valid_range(int off, int stride, int n_in, int n_out, int *lo,
			int *hi)
{
	long long l = off >= 0 ? 0 : (-(long long)off + stride - 1) / stride;
	long long last = (long long)n_in - 1 - off;
	long long h = last < 0 ? 0 : last / stride + 1;
	if (h > n_out)
		h = n_out;
	if (l > h)
		l = h;
	*lo = (int)l;
	*hi = (int)h;
}

/*
 * Copies and zero fills of short runs (a 4x4 plane has rows of four
 * floats). Plain loops here would become calls to memcpy and memset,
 * which cost more than the copy at these lengths; fixed-size memcpy
 * compiles to single vector moves.
 */
static inline void copy_run(float *restrict t, const float *restrict s, int n)
{
	int j = 0;
	for (; j + 8 <= n; j += 8)
		memcpy(t + j, s + j, 8 * sizeof(float));
	if (j + 4 <= n) {
		memcpy(t + j, s + j, 4 * sizeof(float));
		j += 4;
	}
	switch (n - j) {
	case 3:
		t[j + 2] = s[j + 2];
		/* fall through */
	case 2:
		t[j + 1] = s[j + 1];
		/* fall through */
	case 1:
		t[j] = s[j];
		/* fall through */
	default:
		break;
	}
}

static inline void zero_run(float *t, int n)
{
	static const float zeros[8];
	if (n < 8)
		copy_run(t, zeros, n);
	else
		memset(t, 0, (size_t)n * sizeof(float));
}

/*
 * One output row of one col row: t[ow] = srow[ow*sw + off_w] for ow in
 * [a, b), zero where that falls outside [lo, hi), the valid range.
 */
static inline void im2col_row(float *restrict t, const float *restrict srow,
			      int a, int b, int lo, int hi, int sw, int off_w)
{
	/* zeros [a, z), copies [z, e), zeros [e, b) */
	const int z = lo < a ? a : lo > b ? b : lo;
	const int e = hi > b ? b : hi < z ? z : hi;
	zero_run(t + a, z - a);
	if (e > z && sw == 1) {
		copy_run(t + z, srow + z + off_w, e - z);
	} else if (e > z && sw == 2) {
		/* a constant stride lets the compiler vectorise (stride-2
		 * stems and downsamples) */
		const float *restrict s = srow + 2 * z + off_w;
		for (int j = 0; j < e - z; j++)
			t[z + j] = s[2 * j];
	} else {
		for (int ow = z; ow < e; ow++)
			t[ow] = srow[ow * sw + off_w];
	}
	zero_run(t + e, b - e);
}

/*
 * Columns [c0, c1) of col [k_rows, cols] from the block of images at x.
 * A column range crosses output rows and images; it is walked in
 * segments of one output row, with counters rather than divisions (a
 * 4x4 plane has segments of four floats).
 */
static int im2col_padded(const nn_conv_desc *d, const conv_plan *p,
			 const float *x, size_t cols, int c0, int c1, float *col);

static void im2col(const nn_conv_desc *d, const conv_plan *p, const float *x,
		   size_t cols, int c0, int c1, float *col)
{
	if (im2col_padded(d, p, x, cols, c0, c1, col))
		return;
	/* Everything the loops read, in locals: the row copies are memcpy,
	 * which may write anything as far as the compiler knows, so fields
	 * read through d and p were reloaded after every copy. */
	const int wo = d->w_out, ho = d->h_out, sw = d->stride_w;
	const int sh = d->stride_h, h_in = d->h_in, w_in = d->w_in;
	const int kw = d->kw, kk = p->kk, k_rows = p->k_rows;
	const int dil_h = d->dil_h, dil_w = d->dil_w;
	const int pad_h = d->pad_h, pad_w = d->pad_w;
	const size_t hw_in = p->hw_in, hw_out = p->hw_out;
	const int i0 = (int)((size_t)c0 / hw_out);
	const int rem0 = c0 - (int)((size_t)i0 * hw_out);
	const int oh0 = rem0 / wo, a0 = rem0 % wo;
	const size_t img_in = (size_t)d->c_in * hw_in;
	for (int r = 0; r < k_rows; r++) {
		const int c = r / kk, ki = r % kk / kw, kj = r % kw;
		const int off_h = ki * dil_h - pad_h;
		const int off_w = kj * dil_w - pad_w;
		int oh_lo, oh_hi, ow_lo, ow_hi;
		valid_range(off_h, sh, h_in, ho, &oh_lo, &oh_hi);
		valid_range(off_w, sw, w_in, wo, &ow_lo, &ow_hi);
		/* t[ow] is column (i, oh, ow) of this row of col */
		float *t = col + (size_t)r * cols + (c0 - a0);
		const float *plane = x + ((size_t)i0 * d->c_in + c) * hw_in;
		int oh = oh0, a = a0;
		for (int pos = c0; pos < c1;) {
			const int b = wo - a < c1 - pos ? wo : a + (c1 - pos);
			if (oh < oh_lo || oh >= oh_hi) {
				zero_run(t + a, b - a);
			} else {
				const int ih = oh * sh + off_h;
				im2col_row(t, plane + (size_t)ih * w_in, a, b,
					   ow_lo, ow_hi, sw, off_w);
			}
			pos += b - a;
			t += wo;
			a = 0;
			if (++oh == ho) {
				oh = 0;
				plane += img_in;
			}
		}
	}
}

/* Floats of the zero-bordered plane im2col_padded keeps on the stack
 * (64 KiB: planes up to 126x126 with a border of 1). */
#define PADDED_PLANE_MAX 16384

/* t[j] = s[2 j], j < n: the stride-2 row copy (stems, downsamples). */
static inline void copy_run_s2(float *restrict t, const float *restrict s, int n)
{
	for (int j = 0; j < n; j++)
		t[j] = s[2 * j];
}

/*
 * im2col for strides 1 and 2 (any kernel, padding, dilation): every layer
 * of the models here. Each input plane is first copied into a plane with
 * a zero border of the padding's width; every output row of every col row
 * is then one plain (or stride-2) copy from it at a fixed offset, with no
 * bounds or zero runs to work out. The generic walk spent more on that
 * bookkeeping than on the copies for rows of 4 to 28 floats. Loops go
 * channel, image, kernel offset, so a padded plane is built once for its
 * KH*KW rows. Returns 0 (nothing done) for other strides and planes too
 * large for the stack copy.
 */
static int im2col_padded(const nn_conv_desc *d, const conv_plan *p,
			 const float *x, size_t cols, int c0, int c1, float *col)
{
	const int wo = d->w_out, h_in = d->h_in, w_in = d->w_in;
	const int pad_h = d->pad_h, pad_w = d->pad_w;
	const int wp = w_in + 2 * pad_w, hp = h_in + 2 * pad_h;
	const int sh = d->stride_h, sw = d->stride_w;
	if (sh > 2 || sw > 2 || (long long)hp * wp > PADDED_PLANE_MAX)
		return 0;
	float padded[PADDED_PLANE_MAX] __attribute__((aligned(64)));
	memset(padded, 0, (size_t)hp * wp * sizeof(float));
	const int kw = d->kw, kk = p->kk, c_in = d->c_in;
	const int dil_h = d->dil_h, dil_w = d->dil_w;
	const size_t hw_in = p->hw_in, hw_out = p->hw_out;
	const int i0 = (int)((size_t)c0 / hw_out);
	const int i1 = (int)((size_t)(c1 - 1) / hw_out);
	for (int c = 0; c < c_in; c++) {
		for (int i = i0; i <= i1; i++) {
			/* this image's columns within [c0, c1) */
			const size_t first = (size_t)i * hw_out;
			const int lo = (size_t)c0 > first ? (int)((size_t)c0 - first) : 0;
			const int hi = (size_t)c1 < first + hw_out
					       ? (int)((size_t)c1 - first)
					       : (int)hw_out;
			const float *src = x + ((size_t)i * c_in + c) * hw_in;
			for (int h = 0; h < h_in; h++)
				copy_run(padded + (size_t)(h + pad_h) * wp + pad_w,
					 src + (size_t)h * w_in, w_in);
			for (int kr = 0; kr < kk; kr++) {
				const float *base = padded +
						    (size_t)(kr / kw) * dil_h * wp +
						    (size_t)(kr % kw) * dil_w;
				float *t = col + (size_t)(c * kk + kr) * cols + first;
				int oh = lo / wo, ow = lo % wo;
				for (int o = lo; o < hi; oh++, ow = 0) {
					const int n = wo - ow < hi - o ? wo - ow : hi - o;
					const float *from = base + (size_t)oh * sh * wp +
							    (size_t)ow * sw;
					if (sw == 1)
						copy_run(t + o, from, n);
					else
						copy_run_s2(t + o, from, n);
					o += n;
				}
			}
		}
	}
	return 1;
}

/* drow[ow*sw + off_w] += s[ow] for ow in the valid range [lo, hi). */
static inline void col2im_row(float *restrict drow, const float *restrict s,
			      int lo, int hi, int sw, int off_w)
{
	if (lo < hi && sw == 1) {
		float *restrict dd = drow + lo + off_w;
		for (int j = 0; j < hi - lo; j++)
			dd[j] += s[lo + j];
	} else {
		for (int ow = lo; ow < hi; ow++)
			drow[ow * sw + off_w] += s[ow];
	}
}

/*
 * dx += col2im(col) (dx = with overwrite) for the block of `imgs` images
 * at dx; called by the whole team. A thread owns whole channels (all of the block's images),
 * so every dx element gets its KH*KW terms in the same order whatever the
 * threads. Images are the inner loop so that each col row is read in
 * order: reading it a plane at a time strides across the rows and misses
 * the cache on every 64 bytes.
 */
static void col2im_add(const nn_conv_desc *d, const conv_plan *p,
		       const float *col, int imgs, int overwrite, float *dx)
{
	const size_t cols = (size_t)imgs * p->hw_out;
	const size_t img_in = (size_t)d->c_in * p->hw_in;
	const int wo = d->w_out, sw = d->stride_w;
#pragma omp for schedule(static)
	for (int c = 0; c < d->c_in; c++) {
		/* the first writer zeroes the planes it is about to fill: they
		 * are in cache for the adds that follow */
		for (int i = 0; overwrite && i < imgs; i++)
			memset(dx + (size_t)i * img_in + (size_t)c * p->hw_in, 0,
			       p->hw_in * sizeof(float));
		for (int kr = 0; kr < p->kk; kr++) {
			const int ki = kr / d->kw, kj = kr % d->kw;
			const int off_h = ki * d->dil_h - d->pad_h;
			const int off_w = kj * d->dil_w - d->pad_w;
			int oh_lo, oh_hi, ow_lo, ow_hi;
			valid_range(off_h, d->stride_h, d->h_in, d->h_out,
				    &oh_lo, &oh_hi);
			valid_range(off_w, sw, d->w_in, wo, &ow_lo, &ow_hi);
			const float *src = col + (size_t)(c * p->kk + kr) * cols;
			for (int i = 0; i < imgs; i++, src += p->hw_out) {
				float *plane = dx + (size_t)i * img_in +
					       (size_t)c * p->hw_in;
				for (int oh = oh_lo; oh < oh_hi; oh++) {
					const int ih = oh * d->stride_h + off_h;
					col2im_row(plane + (size_t)ih * d->w_in,
						   src + (size_t)oh * wo, ow_lo,
						   ow_hi, sw, off_w);
				}
			}
		}
	}
}

/*
 * Columns [c0, c1) of y (NCHW, the block's images) from stage
 * [C_out, cols] plus the bias; stage == y (a one-image block computed in
 * place) only adds the bias. Within one image the columns are contiguous
 * in both layouts.
 */
static void scatter_out(const nn_conv_desc *d, const conv_plan *p,
			const float *stage, size_t cols, int c0, int c1,
			const float *b, float *y)
{
	const size_t hw = p->hw_out;
	if (stage == y && !b)
		return;
	for (int c = 0; c < d->c_out; c++) {
		const float bc = b ? b[c] : 0.0f;
		for (int pos = c0; pos < c1;) {
			const size_t i = (size_t)pos / hw;
			const size_t rem = pos - i * hw;
			const size_t len = hw - rem < (size_t)(c1 - pos)
						   ? hw - rem
						   : (size_t)(c1 - pos);
			float *dst = y + (i * d->c_out + c) * hw + rem;
			const float *src = stage + c * cols + pos;
			if (!b)
				memcpy(dst, src, len * sizeof(float));
			else
				for (size_t j = 0; j < len; j++)
					dst[j] = src[j] + bc;
			pos += (int)len;
		}
	}
}

/* Columns [c0, c1) of stage [C_out, cols] from dy (NCHW, the block). */
static void gather_dy(const nn_conv_desc *d, const conv_plan *p,
		      const float *dy, size_t cols, int c0, int c1,
		      float *stage)
{
	const size_t hw = p->hw_out;
	for (int c = 0; c < d->c_out; c++) {
		for (int pos = c0; pos < c1;) {
			const size_t i = (size_t)pos / hw;
			const size_t rem = pos - i * hw;
			const size_t len = hw - rem < (size_t)(c1 - pos)
						   ? hw - rem
						   : (size_t)(c1 - pos);
			memcpy(stage + c * cols + pos,
			       dy + (i * d->c_out + c) * hw + rem,
			       len * sizeof(float));
			pos += (int)len;
		}
	}
}

/* ---- kernels ----------------------------------------------------------- */

/*
 * y of one block on thread t's columns [c0, c1) of `cols`: a is the
 * block's col (or x itself for a 1x1 convolution), out its staging (or y
 * itself for a one-image block).
 */
static void block_y(const nn_conv_desc *d, const conv_plan *p, const float *w,
		    const float *a, int cols, int c0, int c1, float *out)
{
	for (int g = 0; g < d->groups; g++)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
			    p->cg_out, c1 - c0, p->kg, 1.0f,
			    w + (size_t)g * p->cg_out * p->kg, p->kg,
			    a + (size_t)g * p->kg * cols + c0, cols, 0.0f,
			    out + (size_t)g * p->cg_out * cols + c0, cols);
}

/* dw from every column of the block (g_out is its dy): thread t's share
 * of each group's Kg columns of dw; the first block overwrites, later
 * ones add. */
static void block_dw(const nn_conv_desc *d, const conv_plan *p,
		     const float *g_out, const float *a, int cols, int first,
		     int t, int nt, float *dw)
{
	int k0, k1;
	split(p->kg, p->kg >= 4 * CONV_ALIGN * nt ? CONV_ALIGN : 1, t, nt, &k0,
	      &k1);
	if (k0 >= k1)
		return;
	for (int g = 0; g < d->groups; g++)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->cg_out,
			    k1 - k0, cols, 1.0f,
			    g_out + (size_t)g * p->cg_out * cols, cols,
			    a + ((size_t)g * p->kg + k0) * cols, cols,
			    first ? 0.0f : 1.0f,
			    dw + (size_t)g * p->cg_out * p->kg + k0, p->kg);
}

/*
 * dcol = w^T dy into col, or for a 1x1 convolution in place dx += w^T dy
 * straight into the block's dx (C_in rows of cols = H*W).
 */
static void block_dcol(const nn_conv_desc *d, const conv_plan *p,
		       const float *w, const float *g_out, int cols, int c0,
		       int c1, int inplace, int overwrite, float *dst)
{
	const int rows = inplace ? p->cg_in : p->kg;
	for (int g = 0; g < d->groups; g++)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows,
			    c1 - c0, p->cg_out, 1.0f,
			    w + (size_t)g * p->cg_out * p->kg, p->kg,
			    g_out + (size_t)g * p->cg_out * cols + c0, cols,
			    inplace && !overwrite ? 1.0f : 0.0f,
			    dst + (size_t)g * rows * cols + c0, cols);
}

/* Whether y and dx, and dw, take the Winograd path (ctx->winograd). */
static int wino_data(const nn_ctx *ctx, const nn_conv_desc *d, int nt)
{
	return ctx->winograd == NN_WINO_ALL    ? nn_wino_eligible(d)
	       : ctx->winograd == NN_WINO_AUTO ? nn_wino_use_data(d, nt)
					       : 0;
}

static int wino_weights(const nn_ctx *ctx, const nn_conv_desc *d)
{
	return ctx->winograd == NN_WINO_ALL    ? nn_wino_eligible(d)
	       : ctx->winograd == NN_WINO_AUTO ? nn_wino_use_weights(d)
					       : 0;
}

int nn_cpu_conv_forward(nn_ctx *ctx, const nn_conv_desc *d, const float *x,
			const float *w, const float *b, float *y,
			ims_error *err)
{
	FORWARD_IF_ERR(nn_conv_check_desc(d, "run a convolution", err));
	RETURN_IF(!x || !w || !y || (d->bias && !b), err, IMS_EINVAL,
		  "cannot run a convolution: missing %s",
		  !x ? "input" : !w ? "weights" : !y ? "output" : "bias");
	conv_plan p;
	make_plan(d, ctx->threads, &p);
	const float *bias = d->bias ? b : NULL;
	if (wino_data(ctx, d, p.nt))
		return nn_wino_forward(ctx, d, p.nt, x, w, bias, y, err);
	float *col, *stage;
	FORWARD_IF_ERR(carve(ctx, d, &p, !(p.direct && p.imgs == 1), &col,
			     &stage, err));
	const size_t img_in = (size_t)d->c_in * p.hw_in;
	const size_t img_out = (size_t)d->c_out * p.hw_out;
	set_blas_threads(1);
#pragma omp parallel num_threads(p.nt)
	{
		/* the team may be smaller than asked (nested parallelism) */
		const int t = omp_get_thread_num(), nt = omp_get_num_threads();
		for (int n0 = 0; n0 < d->n; n0 += p.imgs) {
			const int imgs = d->n - n0 < p.imgs ? d->n - n0 : p.imgs;
			const int cols = imgs * (int)p.hw_out;
			const float *xb = x + (size_t)n0 * img_in;
			float *yb = y + (size_t)n0 * img_out;
			float *out = imgs == 1 ? yb : stage;
			int c0, c1;
			split(cols, CONV_ALIGN, t, nt, &c0, &c1);
			if (c0 < c1) {
				if (col)
					im2col(d, &p, xb, cols, c0, c1, col);
				block_y(d, &p, w, col ? col : xb, cols, c0, c1,
					out);
				scatter_out(d, &p, out, cols, c0, c1, bias, yb);
			}
			/* the last block may split its columns differently */
#pragma omp barrier
		}
	}
	return 0;
}

/*
 * db[c] = sum over (n, h, w) of dy: each plane summed in double, planes
 * added in n order, one thread per channel.
 */
static void bias_grad(const nn_conv_desc *d, const conv_plan *p,
		      const float *dy, float *db)
{
	const size_t hw = p->hw_out;
#pragma omp parallel for num_threads(p->nt) schedule(static)
	for (int c = 0; c < d->c_out; c++) {
		double s = 0.0;
		for (int n = 0; n < d->n; n++) {
			const float *v = dy + ((size_t)n * d->c_out + c) * hw;
			double sp = 0.0;
			for (size_t j = 0; j < hw; j++)
				sp += v[j];
			s += sp;
		}
		db[c] = (float)s;
	}
}

int nn_cpu_conv_backward(nn_ctx *ctx, const nn_conv_desc *d, const float *x,
			 const float *w, const float *dy, float *dx,
			 float *dw, float *db, ims_error *err)
{
	FORWARD_IF_ERR(nn_conv_check_desc(d, "run a convolution backward", err));
	if (!d->bias)
		db = NULL;
	RETURN_IF(!dy || (dw && !x) || (dx && !w), err, IMS_EINVAL,
		  "cannot run a convolution backward: missing %s",
		  !dy ? "output gradient" : dw && !x ? "input" : "weights");
	conv_plan p;
	make_plan(d, ctx->threads, &p);
	if (db)
		bias_grad(d, &p, dy, db);
	/* each of dw and dx by Winograd where it is faster; what is left
	 * by im2col below */
	if (dw && wino_weights(ctx, d)) {
		FORWARD_IF_ERR(nn_wino_backward_weights(ctx, d, p.nt, x, dy, dw,
							err));
		dw = NULL;
	}
	if (dx && wino_data(ctx, d, p.nt)) {
		FORWARD_IF_ERR(nn_wino_backward_data(ctx, d, p.nt, w, dy,
						     ctx->dx_overwrite, dx, err));
		dx = NULL;
	}
	if (!dx && !dw)
		return 0;
	/* With one image per block a 1x1 convolution reads x and writes dx
	 * in place; otherwise col holds the im2col of x for dw, then is
	 * overwritten by dcol for dx. */
	const int inplace = p.direct && p.imgs == 1;
	const int ow = ctx->dx_overwrite;
	float *col, *stage;
	FORWARD_IF_ERR(carve(ctx, d, &p, !inplace, &col, &stage, err));
	const size_t img_in = (size_t)d->c_in * p.hw_in;
	const size_t img_out = (size_t)d->c_out * p.hw_out;
	set_blas_threads(1);
#pragma omp parallel num_threads(p.nt)
	{
		/* the team may be smaller than asked (nested parallelism) */
		const int t = omp_get_thread_num(), nt = omp_get_num_threads();
		for (int n0 = 0; n0 < d->n; n0 += p.imgs) {
			const int imgs = d->n - n0 < p.imgs ? d->n - n0 : p.imgs;
			const int cols = imgs * (int)p.hw_out;
			const float *xb = dw ? x + (size_t)n0 * img_in : NULL;
			float *dxb = dx ? dx + (size_t)n0 * img_in : NULL;
			const float *g_out = dy + (size_t)n0 * img_out;
			int c0, c1;
			split(cols, CONV_ALIGN, t, nt, &c0, &c1);
			if (imgs > 1) {
				gather_dy(d, &p, g_out, cols, c0, c1, stage);
				g_out = stage;
			}
			if (dw) {
				if (!inplace)
					im2col(d, &p, xb, cols, c0, c1, col);
				/* dw reduces over every column of the block */
#pragma omp barrier
				block_dw(d, &p, g_out, inplace ? xb : col, cols,
					 n0 == 0, t, nt, dw);
				/* ...and col is about to become dcol */
#pragma omp barrier
			}
			if (dx && c0 < c1)
				block_dcol(d, &p, w, g_out, cols, c0, c1,
					   inplace, ow, inplace ? dxb : col);
			if (dx && !inplace) {
				/* col2im reads every column */
#pragma omp barrier
				col2im_add(d, &p, col, imgs, ow, dxb);
			}
			/* col and stage are reused by the next block */
#pragma omp barrier
		}
	}
	return 0;
}
