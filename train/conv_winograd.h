/*
 * conv_winograd.h - the Winograd F(2x2, 3x3) path of the CPU convolution
 * (layers/conv_winograd.c), private to layers/conv.c and its tests.
 */
#ifndef IMSHARD_CONV_WINOGRAD_H
#define IMSHARD_CONV_WINOGRAD_H

#include "train/nn_internal.h"

/*
 * 1 when d (already checked) is a convolution the Winograd path computes:
 * 3x3, stride 1, padding 1, no dilation, one group, at least 16 channels
 * in and out, and planes small enough for its per-thread bordered copy.
 */
int nn_wino_eligible(const nn_conv_desc *d);
/*
 * Whether conv.c takes this path: for y and dx, an eligible layer with
 * enough tiles for each of nt threads; for dw, one with at least 64
 * channels in and out. Below those im2col was faster (conv_winograd.c).
 */
int nn_wino_use_data(const nn_conv_desc *d, int nt);
int nn_wino_use_weights(const nn_conv_desc *d);
/* y = conv(x, w) + b (b may be NULL) on nt threads. */
int nn_wino_forward(nn_ctx *ctx, const nn_conv_desc *d, int nt,
		    const float *x, const float *w, const float *b, float *y,
		    ims_error *err);
/* dx += (or = when overwrite) the input gradient of conv(x, w) for dy. */
int nn_wino_backward_data(nn_ctx *ctx, const nn_conv_desc *d, int nt,
			  const float *w, const float *dy, int overwrite,
			  float *dx, ims_error *err);
/* dw = the weight gradient of conv(x, w) for dy (overwritten). */
int nn_wino_backward_weights(nn_ctx *ctx, const nn_conv_desc *d, int nt,
			     const float *x, const float *dy, float *dw,
			     ims_error *err);

#endif
