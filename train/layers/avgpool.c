/*
 * avgpool.c - 2-D average pooling, CPU reference kernels: fixed windows
 * (PyTorch's AvgPool2d with ceil_mode=False, count_include_pad=True) and
 * adaptive ones (AdaptiveAvgPool2d, the global pool before a classifier).
 *
 * Fixed windows always divide by kh * kw: with floor division no window
 * reaches past the padded input, so PyTorch's clipped count is kh * kw
 * too, padding included. Adaptive window i along an axis spans
 * [floor(i in / out), ceil((i + 1) in / out)) and divides by its own
 * size; windows may overlap, and out > in repeats inputs.
 *
 * Sums run in double in a fixed order. The backward pass scatters into
 * dx plane by plane (one thread per plane), so overlapping windows add up
 * in the same order on any thread count.
 */
#include <string.h>

#include "train/nn_internal.h"

/* Below this many elements a loop stays on one thread: forking costs more. */
#define POOL_PAR_MIN 32768

static int check_planes(const nn_pool_desc *d, const char *what,
			ims_error *err)
{
	RETURN_IF(d->n < 1 || d->c < 1 || d->h_in < 1 || d->w_in < 1, err,
		  IMS_EINVAL,
		  "cannot %s: invalid input shape %dx%dx%dx%d (N, C, H, W must be >= 1)",
		  what, d->n, d->c, d->h_in, d->w_in);
	size_t hw = (size_t)d->h_in * (size_t)d->w_in;
	RETURN_IF((size_t)d->n * (size_t)d->c > SIZE_MAX / sizeof(float) / hw,
		  err, IMS_ELIMIT, "cannot %s: %dx%d planes of %dx%d are too many",
		  what, d->n, d->c, d->h_in, d->w_in);
	return 0;
}

static int check_adaptive(const nn_pool_desc *d, const char *what,
			  ims_error *err)
{
	RETURN_IF(d->h_out < 1 || d->w_out < 1, err, IMS_EINVAL,
		  "cannot %s: output %dx%d is empty", what, d->h_out, d->w_out);
	return 0;
}

int nn_avgpool_check_desc(const nn_pool_desc *d, const char *what, ims_error *err)
{
	RETURN_IF(!d, err, IMS_EINVAL, "cannot %s: no descriptor", what);
	FORWARD_IF_ERR(check_planes(d, what, err));
	return d->adaptive ? check_adaptive(d, what, err)
			   : nn_pool_check_fixed(d, what, err);
}

int nn_pool_desc_init_adaptive(nn_pool_desc *d, int n, int c, int h_in,
			       int w_in, int h_out, int w_out,
			       ims_error *err)
{
	static const char what[] = "set up adaptive pooling";
	RETURN_IF(!d, err, IMS_EINVAL, "cannot %s: no descriptor", what);
	*d = (nn_pool_desc){
		.n = n, .c = c, .h_in = h_in, .w_in = w_in,
		.h_out = h_out, .w_out = w_out, .adaptive = 1,
	};
	return nn_avgpool_check_desc(d, what, err);
}

/*
 * Input span [*s, *e) of output index o along one axis, and the length
 * the average divides by.
 */
static inline int span(const nn_pool_desc *d, int o, int in, int out, int k,
		       int stride, int pad, int *s, int *e)
{
	if (d->adaptive) {
		*s = (int)((long long)o * in / out);
		*e = (int)(((long long)(o + 1) * in + out - 1) / out);
		return *e - *s;
	}
	int a = o * stride - pad;
	*s = a < 0 ? 0 : a;
	*e = a + k < in ? a + k : in;
	return k;
}

int nn_cpu_avgpool_forward(nn_ctx *ctx, const nn_pool_desc *d, const float *x,
			   float *y, ims_error *err)
{
	FORWARD_IF_ERR(nn_avgpool_check_desc(d, "average-pool", err));
	const int hi = d->h_in, wi = d->w_in, ho = d->h_out, wo = d->w_out;
	const size_t in_plane = (size_t)hi * wi, out_plane = (size_t)ho * wo;
	const size_t planes = (size_t)d->n * d->c;
	const int nt = planes * (in_plane + out_plane) < POOL_PAR_MIN
			       ? 1 : ctx->threads;

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const float *xp = x + p * in_plane;
		float *yp = y + p * out_plane;
		for (int oh = 0; oh < ho; oh++) {
			int hs, he, ws, we;
			int lh = span(d, oh, hi, ho, d->kh, d->stride_h,
				      d->pad_h, &hs, &he);
			for (int ow = 0; ow < wo; ow++) {
				int lw = span(d, ow, wi, wo, d->kw,
					      d->stride_w, d->pad_w, &ws, &we);
				double s = 0;
				for (int ih = hs; ih < he; ih++)
					for (int iw = ws; iw < we; iw++)
						s += xp[(size_t)ih * wi + iw];
				yp[(size_t)oh * wo + ow] =
					(float)(s / ((double)lh * lw));
			}
		}
	}
	return 0;
}

int nn_cpu_avgpool_backward(nn_ctx *ctx, const nn_pool_desc *d,
			    const float *dy, float *dx, ims_error *err)
{
	FORWARD_IF_ERR(nn_avgpool_check_desc(d, "backpropagate average-pool", err));
	if (!dx)
		return 0;
	const int hi = d->h_in, wi = d->w_in, ho = d->h_out, wo = d->w_out;
	const size_t in_plane = (size_t)hi * wi, out_plane = (size_t)ho * wo;
	const size_t planes = (size_t)d->n * d->c;
	const int nt = planes * (in_plane + out_plane) < POOL_PAR_MIN
			       ? 1 : ctx->threads;

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const float *dyp = dy + p * out_plane;
		float *dxp = dx + p * in_plane;
		if (ctx->dx_overwrite)
			memset(dxp, 0, in_plane * sizeof(float));
		for (int oh = 0; oh < ho; oh++) {
			int hs, he, ws, we;
			int lh = span(d, oh, hi, ho, d->kh, d->stride_h,
				      d->pad_h, &hs, &he);
			for (int ow = 0; ow < wo; ow++) {
				int lw = span(d, ow, wi, wo, d->kw,
					      d->stride_w, d->pad_w, &ws, &we);
				float g = (float)(dyp[(size_t)oh * wo + ow] /
						  ((double)lh * lw));
				for (int ih = hs; ih < he; ih++)
					for (int iw = ws; iw < we; iw++)
						dxp[(size_t)ih * wi + iw] += g;
			}
		}
	}
	return 0;
}
