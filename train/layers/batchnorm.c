/*
 * batchnorm.c - 2-D batch normalisation (PyTorch's BatchNorm2d), CPU
 * reference kernels.
 *
 * Statistics are per channel over (N, H, W). Each (n, c) plane is summed
 * in double by one thread and a channel's planes are then added in n
 * order, so the sums depend on the data alone, not on how the planes were
 * shared between threads. The variance is two-pass (mean first, then
 * squared deviations): one-pass E[x^2] - E[x]^2 loses everything when
 * |mean| >> std.
 *
 * The saved mean is a float, which is off by up to half an ulp of the
 * mean: 3e-5 at a mean of 1000, a large error against a std of 1e-3. So
 * both passes centre on the float mean mu (x - mu is exact when x is near
 * mu) and then subtract the small remainder delta = mean - mu, which the
 * forward pass has in double and the backward pass recovers from
 * sum(x - mu) in the pass it makes anyway.
 */
#include <math.h>

#include "train/nn_internal.h"

/* Below this many elements a loop stays on one thread: forking costs more. */
#define BN_PAR_MIN 32768

static int check_shape(const nn_bn_desc *d, const char *what, ims_error *err)
{
	RETURN_IF(!d, err, IMS_EINVAL, "cannot %s: no descriptor", what);
	RETURN_IF(d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1, err, IMS_EINVAL,
		  "cannot %s: invalid shape %dx%dx%dx%d (N, C, H, W must be >= 1)",
		  what, d->n, d->c, d->h, d->w);
	size_t hw = (size_t)d->h * (size_t)d->w;
	RETURN_IF((size_t)d->n * (size_t)d->c > SIZE_MAX / sizeof(float) / hw,
		  err, IMS_ELIMIT, "cannot %s: shape %dx%dx%dx%d is too large",
		  what, d->n, d->c, d->h, d->w);
	RETURN_IF(d->relu != 0 && d->relu != 1, err, IMS_EINVAL,
		  "cannot %s: relu flag %d is not 0 or 1", what, d->relu);
	return 0;
}

static int check_eps(const nn_bn_desc *d, const char *what, ims_error *err)
{
	RETURN_IF(!(d->eps >= 0.0f) || isinf(d->eps), err, IMS_EINVAL,
		  "cannot %s: eps %g is not a finite number >= 0", what,
		  (double)d->eps);
	return 0;
}

int nn_bn_check_desc(const nn_bn_desc *d, const char *what, ims_error *err)
{
	FORWARD_IF_ERR(check_shape(d, what, err));
	return check_eps(d, what, err);
}

/* y = relu(y) in place when d->relu: the ReLU layer's own operation */
static int fused_relu(nn_ctx *ctx, const nn_bn_desc *d, float *y,
		      ims_error *err)
{
	if (!d->relu)
		return 0;
	return nn_cpu_relu_forward(ctx, (size_t)d->n * d->c * d->h * d->w, y,
				   y, err);
}

static int threads_for(const nn_ctx *ctx, size_t elems)
{
	return elems < BN_PAR_MIN ? 1 : ctx->threads;
}

/*
 * doubles carved out of the context's float workspace (64-byte aligned,
 * so fine for double).
 */
static double *scratch_doubles(nn_ctx *ctx, size_t n, ims_error *err)
{
	return (double *)nn_ctx_scratch(ctx, 2 * n, err);
}

/*
 * Plane sums go in BN_LANES interleaved double accumulators combined in a
 * fixed tree at the end. One accumulator makes every add wait for the
 * previous one (4 cycles each); independent lanes let the compiler
 * vectorise, and the result still depends on the data alone.
 */
#define BN_LANES 8

static double lanes_total(const double *a, double tail)
{
	return (((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))) +
	       tail;
}

/* sum x */
static double plane_sum(const float *restrict x, size_t n)
{
	double a[BN_LANES] = {0}, tail = 0;
	size_t i = 0;
	for (; i + BN_LANES <= n; i += BN_LANES)
		for (int k = 0; k < BN_LANES; k++)
			a[k] += x[i + k];
	for (; i < n; i++)
		tail += x[i];
	return lanes_total(a, tail);
}

/* sum (x - mu)^2 */
static double plane_sq_dev(const float *restrict x, size_t n, double mu)
{
	double a[BN_LANES] = {0}, tail = 0;
	size_t i = 0;
	for (; i + BN_LANES <= n; i += BN_LANES)
		for (int k = 0; k < BN_LANES; k++) {
			double t = x[i + k] - mu;
			a[k] += t * t;
		}
	for (; i < n; i++) {
		double t = x[i] - mu;
		tail += t * t;
	}
	return lanes_total(a, tail);
}

/* out = {sum dy, sum dy (x - mu), sum (x - mu)}, x - mu in float as the
 * backward formula has it */
static void plane_grad_sums(const float *restrict x, const float *restrict dy,
			    size_t n, float mu, double out[3])
{
	double s[BN_LANES] = {0}, sdx[BN_LANES] = {0}, sx[BN_LANES] = {0};
	double ts = 0, tsdx = 0, tsx = 0;
	size_t i = 0;
	for (; i + BN_LANES <= n; i += BN_LANES)
		for (int k = 0; k < BN_LANES; k++) {
			double t = x[i + k] - mu;
			s[k] += dy[i + k];
			sdx[k] += dy[i + k] * t;
			sx[k] += t;
		}
	for (; i < n; i++) {
		double t = x[i] - mu;
		ts += dy[i];
		tsdx += dy[i] * t;
		tsx += t;
	}
	out[0] = lanes_total(s, ts);
	out[1] = lanes_total(sdx, tsdx);
	out[2] = lanes_total(sx, tsx);
}

/* out = {sum dy, sum dy (x - mu)} in double throughout */
static void plane_frozen_sums(const float *restrict x, const float *restrict dy,
			      size_t n, float mu, double out[2])
{
	double s[BN_LANES] = {0}, sx[BN_LANES] = {0}, ts = 0, tsx = 0;
	size_t i = 0;
	for (; i + BN_LANES <= n; i += BN_LANES)
		for (int k = 0; k < BN_LANES; k++) {
			s[k] += dy[i + k];
			sx[k] += (double)dy[i + k] * (double)(x[i + k] - mu);
		}
	for (; i < n; i++) {
		ts += dy[i];
		tsx += (double)dy[i] * (double)(x[i] - mu);
	}
	out[0] = lanes_total(s, ts);
	out[1] = lanes_total(sx, tsx);
}

int nn_cpu_bn_forward_train(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
			    const float *gamma, const float *beta,
			    float *running_mean, float *running_var,
			    float *save_mean, float *save_invstd, float *y,
			    ims_error *err)
{
	static const char what[] = "batch-normalise (training)";
	FORWARD_IF_ERR(check_shape(d, what, err));
	FORWARD_IF_ERR(check_eps(d, what, err));
	RETURN_IF(!(d->momentum >= 0.0f && d->momentum <= 1.0f), err,
		  IMS_EINVAL, "cannot %s: momentum %g is outside [0, 1]", what,
		  (double)d->momentum);
	const int C = d->c;
	const size_t hw = (size_t)d->h * d->w;
	const size_t planes = (size_t)d->n * C;
	const size_t m = (size_t)d->n * hw; /* values per channel */
	/* PyTorch refuses this too: the unbiased variance would divide by 0. */
	RETURN_IF(m < 2, err, IMS_EINVAL,
		  "cannot %s: expected more than 1 value per channel, got "
		  "N=%d, H=%d, W=%d",
		  what, d->n, d->h, d->w);
	double *part = scratch_doubles(ctx, planes + (size_t)C, err);
	if (!part)
		return IMS_ENOMEM;
	double *mean = part + planes;
	const int nt = threads_for(ctx, planes * hw);

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		part[p] = plane_sum(x + p * hw, hw);
	}
	for (int c = 0; c < C; c++) {
		double s = 0;
		for (int n = 0; n < d->n; n++)
			s += part[(size_t)n * C + c];
		mean[c] = s / (double)m;
	}

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		part[p] = plane_sq_dev(x + p * hw, hw, mean[p % C]);
	}
	const double mom = d->momentum;
	for (int c = 0; c < C; c++) {
		double s = 0;
		for (int n = 0; n < d->n; n++)
			s += part[(size_t)n * C + c];
		double var = s / (double)m;
		save_mean[c] = (float)mean[c];
		save_invstd[c] = (float)(1.0 / sqrt(var + (double)d->eps));
		running_mean[c] =
			(float)((1.0 - mom) * running_mean[c] + mom * mean[c]);
		running_var[c] = (float)((1.0 - mom) * running_var[c] +
					 mom * var * (double)m / (double)(m - 1));
	}

	/* Centred first: x * scale + shift would cancel badly when
	 * |mean| >> std. */
#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const int c = (int)(p % C);
		const float mu = save_mean[c];
		const float delta = (float)(mean[c] - (double)mu);
		const float scale = save_invstd[c] * gamma[c];
		const float shift = beta[c];
		const float *xp = x + p * hw;
		float *yp = y + p * hw;
		for (size_t i = 0; i < hw; i++)
			yp[i] = ((xp[i] - mu) - delta) * scale + shift;
	}
	return fused_relu(ctx, d, y, err);
}

int nn_cpu_bn_forward_eval(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
			   const float *gamma, const float *beta,
			   const float *running_mean,
			   const float *running_var, float *y, ims_error *err)
{
	static const char what[] = "batch-normalise (evaluation)";
	FORWARD_IF_ERR(check_shape(d, what, err));
	FORWARD_IF_ERR(check_eps(d, what, err));
	const int C = d->c;
	const size_t hw = (size_t)d->h * d->w;
	const size_t planes = (size_t)d->n * C;
	const int nt = threads_for(ctx, planes * hw);

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const int c = (int)(p % C);
		const float mu = running_mean[c];
		const float scale = (float)((double)gamma[c] /
			sqrt((double)running_var[c] + (double)d->eps));
		const float shift = beta[c];
		const float *xp = x + p * hw;
		float *yp = y + p * hw;
		for (size_t i = 0; i < hw; i++)
			yp[i] = (xp[i] - mu) * scale + shift;
	}
	return fused_relu(ctx, d, y, err);
}

/*
 * With xhat = (x - mean) invstd and m values per channel:
 *   dbeta  = sum dy
 *   dgamma = sum dy xhat
 *   dx     = gamma invstd (dy - dbeta / m - xhat dgamma / m)
 * (the batch mean and variance depend on x, hence the two correction
 * terms; this is the training-mode gradient).
 */
int nn_cpu_bn_backward(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
		       const float *gamma, const float *save_mean,
		       const float *save_invstd, const float *dy, float *dx,
		       float *dgamma, float *dbeta, ims_error *err)
{
	FORWARD_IF_ERR(check_shape(d, "backpropagate batch-norm", err));
	if (!dx && !dgamma && !dbeta)
		return 0;
	const int C = d->c;
	const size_t hw = (size_t)d->h * d->w;
	const size_t planes = (size_t)d->n * C;
	const size_t m = (size_t)d->n * hw;
	/* part: per plane sum dy, sum dy (x - mu) and sum (x - mu), mu the
	 * saved float mean; then per channel sum dy, sum dy (x - mean) and
	 * delta = mean - mu. */
	double *part = scratch_doubles(ctx, 3 * planes + 3 * (size_t)C, err);
	if (!part)
		return IMS_ENOMEM;
	double *sum_dy = part + 3 * planes;
	double *sum_dyx = sum_dy + C;
	double *delta = sum_dyx + C;
	const int nt = threads_for(ctx, planes * hw);

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		plane_grad_sums(x + p * hw, dy + p * hw, hw, save_mean[p % C],
				part + 3 * p);
	}
	for (int c = 0; c < C; c++) {
		double s = 0, sdx = 0, sx = 0;
		for (int n = 0; n < d->n; n++) {
			size_t p = (size_t)n * C + c;
			s += part[3 * p];
			sdx += part[3 * p + 1];
			sx += part[3 * p + 2];
		}
		delta[c] = sx / (double)m;
		sum_dy[c] = s;
		sum_dyx[c] = sdx - delta[c] * s;
		if (dbeta)
			dbeta[c] = (float)s;
		if (dgamma)
			dgamma[c] = (float)(sum_dyx[c] * save_invstd[c]);
	}
	if (!dx)
		return 0;
	const int ow = ctx->dx_overwrite;

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const int c = (int)(p % C);
		const double inv = save_invstd[c];
		const float k = (float)(gamma[c] * inv);
		const float mean_dy = (float)(sum_dy[c] / (double)m);
		const float coef_x = (float)(inv * inv * sum_dyx[c] / (double)m);
		const float mu = save_mean[c];
		const float dmu = (float)delta[c];
		const float *xp = x + p * hw;
		const float *dyp = dy + p * hw;
		float *dxp = dx + p * hw;
		if (ow)
			for (size_t i = 0; i < hw; i++)
				dxp[i] = k * (dyp[i] - mean_dy -
					      ((xp[i] - mu) - dmu) * coef_x);
		else
			for (size_t i = 0; i < hw; i++)
				dxp[i] += k * (dyp[i] - mean_dy -
					       ((xp[i] - mu) - dmu) * coef_x);
	}
	return 0;
}

/*
 * Frozen statistics (evaluation-mode forward used while training): the
 * mean and variance are constants, so with invstd = 1/sqrt(var + eps)
 *   dbeta = sum dy, dgamma = sum dy xhat, dx = dy gamma invstd.
 * Per-channel sums go plane by plane in n order, as in nn_cpu_bn_backward.
 */
int nn_cpu_bn_backward_frozen(nn_ctx *ctx, const nn_bn_desc *d, const float *x,
			      const float *gamma, const float *running_mean,
			      const float *running_var, const float *dy,
			      float *dx, float *dgamma, float *dbeta,
			      ims_error *err)
{
	static const char what[] = "backpropagate frozen batch-norm";
	FORWARD_IF_ERR(check_shape(d, what, err));
	FORWARD_IF_ERR(check_eps(d, what, err));
	if (!dx && !dgamma && !dbeta)
		return 0;
	const int C = d->c;
	const size_t hw = (size_t)d->h * d->w;
	const size_t planes = (size_t)d->n * C;
	double *part = scratch_doubles(ctx, 2 * planes, err);
	if (!part)
		return IMS_ENOMEM;
	const int nt = threads_for(ctx, planes * hw);
	const int ow = ctx->dx_overwrite;

#pragma omp parallel for num_threads(nt) schedule(static)
	for (size_t p = 0; p < planes; p++) {
		const int c = (int)(p % C);
		const double invstd = 1.0 / sqrt((double)running_var[c] + (double)d->eps);
		const float mu = running_mean[c];
		const float g = (float)((double)gamma[c] * invstd);
		const float *xp = x + p * hw, *dyp = dy + p * hw;
		plane_frozen_sums(xp, dyp, hw, mu, part + 2 * p);
		part[2 * p + 1] *= invstd;
		if (dx && ow) {
			float *dxp = dx + p * hw;
			for (size_t i = 0; i < hw; i++)
				dxp[i] = dyp[i] * g;
		} else if (dx) {
			float *dxp = dx + p * hw;
			for (size_t i = 0; i < hw; i++)
				dxp[i] += dyp[i] * g;
		}
	}
	for (int c = 0; c < C; c++) {
		double s = 0, sx = 0;
		for (int n = 0; n < d->n; n++) {
			s += part[2 * ((size_t)n * C + c)];
			sx += part[2 * ((size_t)n * C + c) + 1];
		}
		if (dbeta)
			dbeta[c] = (float)s;
		if (dgamma)
			dgamma[c] = (float)sx;
	}
	return 0;
}
