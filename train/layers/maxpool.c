/*
 * maxpool.c - 2-D max pooling (PyTorch's MaxPool2d, ceil_mode=False), CPU
 * reference kernels, and the fixed-window descriptor both pools share.
 *
 * Padding counts as -infinity, so it never wins. With pad <= k / 2 and
 * floor division every window holds at least one real input, so no
 * output is -infinity unless the input is. The scan is row-major with a
 * strict >, so ties go to the first element; a NaN wins (and the last
 * NaN of a window is recorded), as in PyTorch, so it propagates.
 *
 * argmax is an offset within the (n, c) input plane. The backward pass
 * scatters each output gradient to it; planes are split between threads,
 * and within a plane the order is fixed, so overlapping windows sum in
 * the same order on any thread count.
 */
#include <math.h>
#include <string.h>

#include "train/nn_internal.h"

/* Below this many elements a loop stays on one thread: forking costs more. */
#define POOL_PAR_MIN 32768

/* Everything about a fixed-window descriptor except its output size. */
static int check_window(const nn_pool_desc *d, const char *what,
			ims_error *err)
{
	RETURN_IF(d->n < 1 || d->c < 1 || d->h_in < 1 || d->w_in < 1, err,
		  IMS_EINVAL,
		  "cannot %s: invalid input shape %dx%dx%dx%d (N, C, H, W must be >= 1)",
		  what, d->n, d->c, d->h_in, d->w_in);
	RETURN_IF(d->kh < 1 || d->kw < 1, err, IMS_EINVAL,
		  "cannot %s: window %dx%d is empty", what, d->kh, d->kw);
	RETURN_IF(d->stride_h < 1 || d->stride_w < 1, err, IMS_EINVAL,
		  "cannot %s: stride %dx%d must be >= 1", what, d->stride_h,
		  d->stride_w);
	RETURN_IF(d->pad_h < 0 || d->pad_w < 0, err, IMS_EINVAL,
		  "cannot %s: padding %dx%d is negative", what, d->pad_h,
		  d->pad_w);
	/* PyTorch's rule; it keeps every window on some real input. */
	RETURN_IF(d->pad_h > d->kh / 2 || d->pad_w > d->kw / 2, err,
		  IMS_EINVAL,
		  "cannot %s: padding %dx%d exceeds half the %dx%d window", what,
		  d->pad_h, d->pad_w, d->kh, d->kw);
	RETURN_IF((long long)d->h_in + 2LL * d->pad_h < d->kh ||
			  (long long)d->w_in + 2LL * d->pad_w < d->kw,
		  err, IMS_EINVAL,
		  "cannot %s: the %dx%d window does not fit the %dx%d input "
		  "padded by %dx%d (empty output)",
		  what, d->kh, d->kw, d->h_in, d->w_in, d->pad_h, d->pad_w);
	/* argmax offsets are int32 */
	RETURN_IF((size_t)d->h_in * (size_t)d->w_in > INT32_MAX, err,
		  IMS_ELIMIT, "cannot %s: a %dx%d plane is too large", what,
		  d->h_in, d->w_in);
	size_t hw = (size_t)d->h_in * (size_t)d->w_in;
	RETURN_IF((size_t)d->n * (size_t)d->c > SIZE_MAX / sizeof(float) / hw,
		  err, IMS_ELIMIT, "cannot %s: %dx%d planes of %dx%d are too many",
		  what, d->n, d->c, d->h_in, d->w_in);
	return 0;
}

static int out_size(int in, int k, int stride, int pad)
{
	return (int)(((long long)in + 2LL * pad - k) / stride + 1);
}

int nn_pool_check_fixed(const nn_pool_desc *d, const char *what,
			ims_error *err)
{
	FORWARD_IF_ERR(check_window(d, what, err));
	int ho = out_size(d->h_in, d->kh, d->stride_h, d->pad_h);
	int wo = out_size(d->w_in, d->kw, d->stride_w, d->pad_w);
	RETURN_IF(d->h_out != ho || d->w_out != wo, err, IMS_EINVAL,
		  "cannot %s: output %dx%d does not match the window arithmetic (%dx%d)",
		  what, d->h_out, d->w_out, ho, wo);
	return 0;
}

int nn_maxpool_check_desc(const nn_pool_desc *d, const char *what, ims_error *err)
{
	RETURN_IF(!d, err, IMS_EINVAL, "cannot %s: no descriptor", what);
	RETURN_IF(d->adaptive, err, IMS_EINVAL,
		  "cannot %s: adaptive windows are only supported for average pooling",
		  what);
	return nn_pool_check_fixed(d, what, err);
}

int nn_pool_desc_init(nn_pool_desc *d, int n, int c, int h_in, int w_in,
		      int k, int stride, int pad, ims_error *err)
{
	RETURN_IF(!d, err, IMS_EINVAL, "cannot set up pooling: no descriptor");
	*d = (nn_pool_desc){
		.n = n, .c = c, .h_in = h_in, .w_in = w_in,
		.kh = k, .kw = k, .stride_h = stride, .stride_w = stride,
		.pad_h = pad, .pad_w = pad, .adaptive = 0,
	};
	FORWARD_IF_ERR(check_window(d, "set up pooling", err));
	d->h_out = out_size(h_in, k, stride, pad);
	d->w_out = out_size(w_in, k, stride, pad);
	return 0;
}

/*
 * One output row of one plane. The window offsets are the outer loops and
 * the outputs the inner one, so each inner pass is a vector of
 * independent selects (v wins over the row's running best when greater or
 * NaN) with loads at a constant stride; scanning window by window instead
 * made every output a chain of dependent compares. Offsets still come in
 * row-major order for each output, so the result is the scan's: ties to
 * the first element, the last NaN, and for a window of -infinity its first
 * real element. STRIDE is a constant in the calls below (1, 2) so the
 * loads vectorise; 0 means "use sw".
 */
static inline void pool_row(const nn_pool_desc *d, const float *restrict xp,
			    int oh, float *restrict yr, int32_t *restrict ar,
			    const int stride)
{
	const int wi = d->w_in, hi = d->h_in, wo = d->w_out;
	const int sw = stride ? stride : d->stride_w;
	const int pw = d->pad_w, kw = d->kw;
	int hs = oh * d->stride_h - d->pad_h;
	const int he = hs + d->kh < hi ? hs + d->kh : hi;
	hs = hs < 0 ? 0 : hs;
	for (int ow = 0; ow < wo; ow++) {
		const int ws = ow * sw - pw;
		yr[ow] = -INFINITY;
		ar[ow] = hs * wi + (ws < 0 ? 0 : ws);
	}
	for (int ih = hs; ih < he; ih++) {
		const float *restrict row = xp + (size_t)ih * wi;
		for (int kj = 0; kj < kw; kj++) {
			/* outputs whose column ow * sw - pw + kj is inside */
			const int off = kj - pw;
			int lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
			int hi_ow = wi - 1 - off < 0 ? 0 : (wi - 1 - off) / sw + 1;
			if (hi_ow > wo)
				hi_ow = wo;
			const int32_t base = ih * wi + off;
			for (int ow = lo; ow < hi_ow; ow++) {
				const float v = row[ow * sw + off];
				const int win = v > yr[ow] || v != v;
				yr[ow] = win ? v : yr[ow];
				ar[ow] = win ? base + ow * sw : ar[ow];
			}
		}
	}
}

/* The scan's step, one output at a time: v wins when greater or NaN. */
static inline void take(float v, int32_t at, float *best, int32_t *arg)
{
	const int win = v > *best || v != v;
	*best = win ? v : *best;
	*arg = win ? at : *arg;
}

/* The 2x2 stride-2 unpadded window (VGG's, convnet7's) unrolled, in the
 * scan's order (0,0), (0,1), (1,0), (1,1): faster than four passes of
 * pool_row over rows this short. */
static void pool2x2(const float *restrict xp, int wi, int ho, int wo,
		    float *restrict yp, int32_t *restrict ap)
{
	for (int oh = 0; oh < ho; oh++) {
		const float *r0 = xp + (size_t)(2 * oh) * wi;
		const float *r1 = r0 + wi;
		const int32_t base = 2 * oh * wi;
		for (int ow = 0; ow < wo; ow++) {
			float best = r0[2 * ow];
			int32_t arg = base + 2 * ow;
			take(r0[2 * ow + 1], base + 2 * ow + 1, &best, &arg);
			take(r1[2 * ow], base + wi + 2 * ow, &best, &arg);
			take(r1[2 * ow + 1], base + wi + 2 * ow + 1, &best, &arg);
			yp[(size_t)oh * wo + ow] = best;
			ap[(size_t)oh * wo + ow] = arg;
		}
	}
}

int nn_cpu_maxpool_forward(nn_ctx *ctx, const nn_pool_desc *d, const float *x,
			   float *y, int32_t *argmax, ims_error *err)
{
	FORWARD_IF_ERR(nn_maxpool_check_desc(d, "max-pool", err));
	const int hi = d->h_in, wi = d->w_in, ho = d->h_out, wo = d->w_out;
	const size_t in_plane = (size_t)hi * wi, out_plane = (size_t)ho * wo;
	const size_t planes = (size_t)d->n * d->c;
	const int nt = planes * in_plane < POOL_PAR_MIN ? 1 : ctx->threads;

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const float *xp = x + p * in_plane;
		if (d->kh == 2 && d->kw == 2 && d->stride_h == 2 &&
		    d->stride_w == 2 && d->pad_h == 0 && d->pad_w == 0) {
			pool2x2(xp, wi, ho, wo, y + p * out_plane,
				argmax + p * out_plane);
			continue;
		}
		for (int oh = 0; oh < ho; oh++) {
			float *yr = y + p * out_plane + (size_t)oh * wo;
			int32_t *ar = argmax + p * out_plane + (size_t)oh * wo;
			if (d->stride_w == 2)
				pool_row(d, xp, oh, yr, ar, 2);
			else if (d->stride_w == 1)
				pool_row(d, xp, oh, yr, ar, 1);
			else
				pool_row(d, xp, oh, yr, ar, 0);
		}
	}
	return 0;
}

int nn_cpu_maxpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			    const int32_t *argmax, const float *dy, float *dx,
			    ims_error *err)
{
	FORWARD_IF_ERR(nn_maxpool_check_desc(d, "backpropagate max-pool", err));
	if (!dx)
		return 0;
	const size_t in_plane = (size_t)d->h_in * d->w_in;
	const size_t out_plane = (size_t)d->h_out * d->w_out;
	const size_t planes = (size_t)d->n * d->c;
	const size_t count = planes * out_plane;
	const int nt = planes * in_plane < POOL_PAR_MIN ? 1 : ctx->threads;

	/* A corrupt argmax would write outside dx; check all before touching
	 * dx, so a failure leaves it as it was. */
	int bad = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(|| : bad)
	for (size_t i = 0; i < count; i++)
		bad = bad || argmax[i] < 0 || (size_t)argmax[i] >= in_plane;
	if (bad) {
		size_t i = 0;
		while (argmax[i] >= 0 && (size_t)argmax[i] < in_plane)
			i++;
		return ims_fail(err, IMS_EINVAL,
				"cannot backpropagate max-pool: argmax %d of output %zu "
				"is outside the %dx%d input plane",
				(int)argmax[i], i, d->h_in, d->w_in);
	}

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const int32_t *ap = argmax + p * out_plane;
		const float *dyp = dy + p * out_plane;
		float *dxp = dx + p * in_plane;
		if (ctx->dx_overwrite)
			memset(dxp, 0, in_plane * sizeof(float));
		for (size_t i = 0; i < out_plane; i++)
			dxp[ap[i]] += dyp[i];
	}
	return 0;
}
