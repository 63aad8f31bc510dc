/*
 * test_backend_cuda_kernels.c - test_backend_cuda's fp32 entries that
 * run the backend's own kernels (the .cu files of train/cuda/) rather
 * than cuDNN or cuBLAS: element-wise operations, pooling and softmax
 * cross-entropy, against the CPU backend (the rules are in
 * test_backend_cuda.c's header).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_test.h"
#include "common/common.h"
#include "nn_test_util.h"
#include "test.h"

/* ---- element-wise ------------------------------------------------------- */

void test_elementwise(void)
{
	const size_t sizes[] = {1, 1000, 300001};
	for (int s = 0; s < 3; s++) {
		const size_t n = sizes[s];
		float *x = nn_test_alloc(n), *b = nn_test_alloc(n);
		float *dy = nn_test_alloc(n), *dx0 = nn_test_alloc(n);
		nn_test_fill(x, n, 41, -1, 1);
		nn_test_fill(b, n, 42, -1, 1);
		nn_test_fill(dy, n, 43, -1, 1);
		nn_test_fill(dx0, n, 44, -1, 1);
		if (n > 4) {
			x[0] = 0.0f, x[1] = -0.0f, x[2] = NAN, x[3] = -INFINITY;
		}
		float *y = nn_test_alloc(n), *dxa = host_copy(dx0, n);
		float *dxo = filled(n, NAN);
		float *gx = up(x, n), *gb = up(b, n), *gdy = up(dy, n);
		float *gy = up(NULL, n), *gdx = up(dx0, n);
		float *nan_x = filled(n, NAN);

		/* relu */
		CHECK_OK(nn_cpu_relu_forward(&cpu, n, x, y, &err), &err);
		CHECK_OK(gpu.be->relu_forward(&gpu, n, gx, gy, &err), &err);
		same_dev_f("relu y", y, gy, n);
		CHECK_OK(nn_cpu_relu_backward(&cpu, n, y, dy, dxa, &err), &err);
		CHECK_OK(gpu.be->relu_backward(&gpu, n, gy, gdy, gdx, &err), &err);
		same_dev_f("relu dx (accumulated)", dxa, gdx, n);
		cpu.dx_overwrite = gpu.dx_overwrite = 1;
		CHECK_OK(nn_cpu_relu_backward(&cpu, n, y, dy, dxo, &err), &err);
		CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, n * sizeof(float), &err),
			 &err);
		CHECK_OK(gpu.be->relu_backward(&gpu, n, gy, gdy, gdx, &err), &err);
		cpu.dx_overwrite = gpu.dx_overwrite = 0;
		same_dev_f("relu dx (overwritten)", dxo, gdx, n);
		CHECK_OK(gpu.be->relu_backward(&gpu, n, gy, gdy, NULL, &err), &err);

		/* add and accumulate */
		CHECK_OK(nn_cpu_add_forward(&cpu, n, x, b, y, &err), &err);
		CHECK_OK(gpu.be->add_forward(&gpu, n, gx, gb, gy, &err), &err);
		same_dev_f("add y", y, gy, n);
		memcpy(dxa, dx0, n * sizeof(float));
		CHECK_OK(gpu.be->to_device(&gpu, gdx, dx0, n * sizeof(float), &err),
			 &err);
		CHECK_OK(nn_cpu_accumulate(&cpu, n, dy, dxa, &err), &err);
		CHECK_OK(gpu.be->accumulate(&gpu, n, gdy, gdx, &err), &err);
		same_dev_f("accumulate", dxa, gdx, n);
		gpu.dx_overwrite = 1;
		CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, n * sizeof(float), &err),
			 &err);
		CHECK_OK(gpu.be->accumulate(&gpu, n, gdy, gdx, &err), &err);
		gpu.dx_overwrite = 0;
		same_dev_f("accumulate (overwritten)", dy, gdx, n);
		CHECK_OK(gpu.be->accumulate(&gpu, n, gdy, NULL, &err), &err);

		/* dropout: the same mask, the same values */
		const float ps[] = {0.0f, 0.1f, 0.5f};
		for (int k = 0; k < 3; k++) {
			uint8_t *mask = calloc(n, 1);
			uint8_t *gmask = up_bytes(NULL, n);
			CHECK_OK(nn_cpu_dropout_forward(&cpu, n, ps[k], 77 + k,
							NULL, x, y, mask, &err),
				 &err);
			CHECK_OK(gpu.be->dropout_forward(&gpu, n, ps[k], 77 + k,
							 NULL, gx, gy, gmask,
							 &err),
				 &err);
			same_dev_f("dropout y", y, gy, n);
			same_dev("dropout mask", mask, gmask, n);
			memcpy(dxa, dx0, n * sizeof(float));
			CHECK_OK(gpu.be->to_device(&gpu, gdx, dx0,
						   n * sizeof(float), &err),
				 &err);
			CHECK_OK(nn_cpu_dropout_backward(&cpu, n, ps[k], mask, dy,
							 dxa, &err),
				 &err);
			CHECK_OK(gpu.be->dropout_backward(&gpu, n, ps[k], gmask,
							  gdy, gdx, &err),
				 &err);
			same_dev_f("dropout dx (accumulated)", dxa, gdx, n);
			cpu.dx_overwrite = gpu.dx_overwrite = 1;
			CHECK_OK(nn_cpu_dropout_backward(&cpu, n, ps[k], mask, dy,
							 dxo, &err),
				 &err);
			CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x,
						   n * sizeof(float), &err),
				 &err);
			CHECK_OK(gpu.be->dropout_backward(&gpu, n, ps[k], gmask,
							  gdy, gdx, &err),
				 &err);
			cpu.dx_overwrite = gpu.dx_overwrite = 0;
			same_dev_f("dropout dx (overwritten)", dxo, gdx, n);
			/* no mask kept */
			CHECK_OK(gpu.be->dropout_forward(&gpu, n, ps[k], 77 + k,
							 NULL, gx, gy, NULL,
							 &err),
				 &err);
			same_dev_f("dropout y (no mask)", y, gy, n);
			free(mask);
			dfree(gmask);
		}
		CHECK_EQ_INT(gpu.be->dropout_forward(&gpu, n, 1.0f, 1, NULL, gx,
						     gy, NULL, &err),
			     IMS_EINVAL);

		dfree(gx), dfree(gb), dfree(gdy), dfree(gy), dfree(gdx);
		free(x), free(b), free(dy), free(dx0), free(y), free(dxa);
		free(dxo), free(nan_x);
	}
	/* count 0 launches nothing and succeeds */
	CHECK_OK(gpu.be->relu_forward(&gpu, 0, NULL, NULL, &err), &err);
	CHECK_OK(gpu.be->add_forward(&gpu, 0, NULL, NULL, NULL, &err), &err);
}

/* ---- pooling ------------------------------------------------------------ */

/* Both pools on one descriptor (max only for fixed windows): forward,
 * argmax and backward in both modes, bit for bit. */
static void pool_case(const nn_pool_desc *d, const char *what, int ties)
{
	char name[160];
	const size_t nx = (size_t)d->n * d->c * d->h_in * d->w_in;
	const size_t ny = (size_t)d->n * d->c * d->h_out * d->w_out;
	float *x = nn_test_alloc(nx), *dy = nn_test_alloc(ny);
	float *dx0 = nn_test_alloc(nx);
	nn_test_fill(x, nx, 51, -1, 1);
	if (ties) /* a few distinct values: many ties for the argmax rule */
		for (size_t i = 0; i < nx; i++)
			x[i] = floorf(x[i] * 2.0f);
	nn_test_fill(dy, ny, 52, -1, 1);
	nn_test_fill(dx0, nx, 53, -1, 1);
	float *y = nn_test_alloc(ny), *dxa = host_copy(dx0, nx);
	float *dxo = filled(nx, NAN), *nan_x = filled(nx, NAN);
	float *gx = up(x, nx), *gdy = up(dy, ny), *gy = up(NULL, ny);
	float *gdx = up(dx0, nx);

	if (!d->adaptive) {
		int32_t *am = calloc(ny, sizeof(int32_t));
		int32_t *gam = up_bytes(NULL, ny * sizeof(int32_t));
		CHECK_OK(nn_cpu_maxpool_forward(&cpu, d, x, y, am, &err), &err);
		CHECK_OK(gpu.be->maxpool_forward(&gpu, d, gx, gy, gam, &err),
			 &err);
		snprintf(name, sizeof(name), "%s max y", what);
		same_dev_f(name, y, gy, ny);
		snprintf(name, sizeof(name), "%s max argmax", what);
		same_dev(name, am, gam, ny * sizeof(int32_t));
		CHECK_OK(nn_cpu_maxpool_backward(&cpu, d, am, dy, dxa, &err),
			 &err);
		CHECK_OK(gpu.be->maxpool_backward(&gpu, d, gam, gdy, gdx, &err),
			 &err);
		snprintf(name, sizeof(name), "%s max dx (accumulated)", what);
		same_dev_f(name, dxa, gdx, nx);
		cpu.dx_overwrite = gpu.dx_overwrite = 1;
		CHECK_OK(nn_cpu_maxpool_backward(&cpu, d, am, dy, dxo, &err),
			 &err);
		CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, nx * sizeof(float),
					   &err),
			 &err);
		CHECK_OK(gpu.be->maxpool_backward(&gpu, d, gam, gdy, gdx, &err),
			 &err);
		cpu.dx_overwrite = gpu.dx_overwrite = 0;
		snprintf(name, sizeof(name), "%s max dx (overwritten)", what);
		same_dev_f(name, dxo, gdx, nx);
		free(am);
		dfree(gam);
	}

	memcpy(dxa, dx0, nx * sizeof(float));
	CHECK_OK(gpu.be->to_device(&gpu, gdx, dx0, nx * sizeof(float), &err),
		 &err);
	CHECK_OK(nn_cpu_avgpool_forward(&cpu, d, x, y, &err), &err);
	CHECK_OK(gpu.be->avgpool_forward(&gpu, d, gx, gy, &err), &err);
	snprintf(name, sizeof(name), "%s avg y", what);
	same_dev_f(name, y, gy, ny);
	CHECK_OK(nn_cpu_avgpool_backward(&cpu, d, dy, dxa, &err), &err);
	CHECK_OK(gpu.be->avgpool_backward(&gpu, d, gdy, gdx, &err), &err);
	snprintf(name, sizeof(name), "%s avg dx (accumulated)", what);
	same_dev_f(name, dxa, gdx, nx);
	cpu.dx_overwrite = gpu.dx_overwrite = 1;
	for (size_t i = 0; i < nx; i++)
		dxo[i] = NAN;
	CHECK_OK(nn_cpu_avgpool_backward(&cpu, d, dy, dxo, &err), &err);
	CHECK_OK(gpu.be->to_device(&gpu, gdx, nan_x, nx * sizeof(float), &err),
		 &err);
	CHECK_OK(gpu.be->avgpool_backward(&gpu, d, gdy, gdx, &err), &err);
	cpu.dx_overwrite = gpu.dx_overwrite = 0;
	snprintf(name, sizeof(name), "%s avg dx (overwritten)", what);
	same_dev_f(name, dxo, gdx, nx);

	dfree(gx), dfree(gdy), dfree(gy), dfree(gdx);
	free(x), free(dy), free(dx0), free(y), free(dxa), free(dxo), free(nan_x);
}

static void fixed(int n, int c, int hw, int k, int stride, int pad, int ties)
{
	nn_pool_desc d;
	char what[96];
	snprintf(what, sizeof(what), "pool n%d c%d %dx%d k%d s%d p%d%s", n, c,
		 hw, hw, k, stride, pad, ties ? " ties" : "");
	CHECK_OK(nn_pool_desc_init(&d, n, c, hw, hw, k, stride, pad, &err),
		 &err);
	pool_case(&d, what, ties);
}

static void adaptive(int n, int c, int h, int w, int ho, int wo)
{
	nn_pool_desc d;
	char what[96];
	snprintf(what, sizeof(what), "adaptive pool n%d c%d %dx%d -> %dx%d", n,
		 c, h, w, ho, wo);
	CHECK_OK(nn_pool_desc_init_adaptive(&d, n, c, h, w, ho, wo, &err), &err);
	pool_case(&d, what, 0);
}

void test_pool(void)
{
	fixed(2, 3, 12, 3, 2, 1, 0); /* ResNet's stem pool */
	fixed(2, 3, 12, 3, 2, 1, 1);
	fixed(2, 4, 8, 2, 2, 0, 0);  /* VGG's */
	fixed(2, 4, 8, 2, 2, 0, 1);
	fixed(1, 2, 9, 3, 1, 1, 1);  /* overlapping, stride 1 */
	fixed(1, 2, 11, 5, 3, 2, 1); /* stride 3 */
	adaptive(2, 3, 7, 7, 1, 1);  /* the global pool */
	adaptive(2, 3, 5, 7, 3, 2);  /* overlapping windows */
	adaptive(1, 2, 3, 3, 5, 4);  /* more outputs than inputs */

	/* a window of -infinity records its first real element */
	nn_pool_desc d;
	CHECK_OK(nn_pool_desc_init(&d, 1, 1, 4, 4, 3, 2, 1, &err), &err);
	float x[16];
	for (int i = 0; i < 16; i++)
		x[i] = -INFINITY;
	x[5] = NAN;
	float y[4];
	int32_t am[4];
	CHECK_OK(nn_cpu_maxpool_forward(&cpu, &d, x, y, am, &err), &err);
	float *gx = up(x, 16), *gy = up(NULL, 4);
	int32_t *gam = up_bytes(NULL, sizeof(am));
	CHECK_OK(gpu.be->maxpool_forward(&gpu, &d, gx, gy, gam, &err), &err);
	same_dev_f("maxpool -inf/NaN y", y, gy, 4);
	same_dev("maxpool -inf/NaN argmax", am, gam, sizeof(am));
	dfree(gx), dfree(gy), dfree(gam);
}

/* ---- softmax cross-entropy --------------------------------------------- */

static void xent_case(int n, int k, float smoothing)
{
	char what[96], name[160];
	snprintf(what, sizeof(what), "xent n%d k%d s%g", n, k, (double)smoothing);
	const size_t nz = (size_t)n * k;
	float *z = nn_test_alloc(nz), *g = nn_test_alloc(nz);
	int32_t *labels = calloc((size_t)n, sizeof(int32_t));
	nn_test_fill(z, nz, 61, -5, 5);
	for (int i = 0; i < n; i++)
		labels[i] = (int32_t)((i * 7919u) % (unsigned)k);
	double loss = 0, gloss = -1;
	CHECK_OK(nn_cpu_softmax_xent(&cpu, n, k, z, labels, smoothing,
				     1.0f / n, &loss, g, &err),
		 &err);
	float *gz = up(z, nz), *gg = up(NULL, nz);
	int32_t *gl = up_bytes(labels, (size_t)n * sizeof(int32_t));
	CHECK_OK(gpu.be->softmax_xent(&gpu, n, k, gz, gl, smoothing, 1.0f / n,
				      &gloss, gg, &err),
		 &err);
	test_checks_++;
	if (!(fabs(loss - gloss) <= 1e-9 * fabs(loss))) {
		fprintf(stderr, "%s loss: cpu %.17g, cuda %.17g\n", what, loss,
			gloss);
		test_failures_++;
	}
	snprintf(name, sizeof(name), "%s dlogits", what);
	near_dev(name, g, gg, nz);
	/* no gradient wanted; then no loss wanted */
	gloss = -1;
	CHECK_OK(gpu.be->softmax_xent(&gpu, n, k, gz, gl, smoothing, 1.0f,
				      &gloss, NULL, &err),
		 &err);
	CHECK_NEAR(gloss, loss, 1e-9 * fabs(loss));
	CHECK_OK(gpu.be->softmax_xent(&gpu, n, k, gz, gl, smoothing, 1.0f / n,
				      NULL, gg, &err),
		 &err);
	near_dev(name, g, gg, nz);

	/* a bad label fails as on the CPU and leaves dlogits alone */
	labels[n - 1] = k;
	float *nan_z = filled(nz, NAN);
	CHECK_OK(gpu.be->to_device(&gpu, gl, labels, (size_t)n * sizeof(int32_t),
				   &err),
		 &err);
	CHECK_OK(gpu.be->to_device(&gpu, gg, nan_z, nz * sizeof(float), &err),
		 &err);
	ims_error cerr = {0};
	CHECK_EQ_INT(nn_cpu_softmax_xent(&cpu, n, k, z, labels, smoothing, 1.0f,
					 &loss, g, &cerr),
		     IMS_EINVAL);
	CHECK_EQ_INT(gpu.be->softmax_xent(&gpu, n, k, gz, gl, smoothing, 1.0f,
					  &gloss, gg, &err),
		     IMS_EINVAL);
	CHECK_EQ_STR(err.msg, cerr.msg);
	same_dev_f("xent dlogits untouched", nan_z, gg, nz);

	dfree(gz), dfree(gg), dfree(gl);
	free(z), free(g), free(labels), free(nan_z);
}

/* The training step's variant: the tally in device memory against the
 * CPU's over three steps (ties and a NaN logit in the top-1), then a bad
 * label noted with its step and nothing else changed. */
static void tally_case(int n, int k, float smoothing)
{
	char what[96];
	snprintf(what, sizeof(what), "xent tally n%d k%d s%g", n, k,
		 (double)smoothing);
	const size_t nz = (size_t)n * k;
	float *z = nn_test_alloc(nz), *g = nn_test_alloc(nz);
	int32_t *labels = calloc((size_t)n, sizeof(int32_t));
	float *gz = up(NULL, nz), *gg = up(NULL, nz);
	int32_t *gl = up_bytes(NULL, (size_t)n * sizeof(int32_t));
	nn_tally ct = {0}, ht;
	nn_tally *dt = up_bytes(&ct, sizeof(ct));
	for (int step = 1; step <= 3; step++) {
		nn_test_tally_inputs(z, labels, n, k, step);
		CHECK_OK(gpu.be->to_device(&gpu, gz, z, nz * sizeof(float), &err),
			 &err);
		CHECK_OK(gpu.be->to_device(&gpu, gl, labels,
					   (size_t)n * sizeof(int32_t), &err),
			 &err);
		CHECK_OK(nn_cpu_xent_tally(&cpu, n, k, z, labels, smoothing,
					   1.0f / n, g, step, &ct, &err),
			 &err);
		CHECK_OK(gpu.be->xent_tally(&gpu, n, k, gz, gl, smoothing,
					    1.0f / n, gg, step, dt, &err),
			 &err);
		if (step != 2)
			near_dev(what, g, gg, nz);
	}
	CHECK_OK(gpu.be->to_host(&gpu, &ht, dt, sizeof(ht), &err), &err);
	/* step 2's loss is NaN: so are the sums, and step 2 is noted */
	CHECK(isnan(ct.loss_sum) && isnan(ht.loss_sum));
	CHECK(ht.correct == ct.correct);
	CHECK_EQ_U64((uint64_t)ht.nonfinite_step, 2);
	CHECK_EQ_U64((uint64_t)ct.nonfinite_step, 2);
	CHECK_EQ_U64((uint64_t)ht.bad_label_step, 0);
	/* a fresh tally: finite sums within double rounding of the CPU's */
	nn_tally c2 = {0}, h2;
	CHECK_OK(gpu.be->to_device(&gpu, dt, &c2, sizeof(c2), &err), &err);
	nn_test_fill(z, nz, 80, -3, 3);
	CHECK_OK(gpu.be->to_device(&gpu, gz, z, nz * sizeof(float), &err), &err);
	CHECK_OK(nn_cpu_xent_tally(&cpu, n, k, z, labels, smoothing, 1.0f / n,
				   g, 4, &c2, &err),
		 &err);
	CHECK_OK(gpu.be->xent_tally(&gpu, n, k, gz, gl, smoothing, 1.0f / n, gg,
				    4, dt, &err),
		 &err);
	/* a bad label: noted with its step, nothing else changed */
	labels[n - 1] = k;
	CHECK_OK(gpu.be->to_device(&gpu, gl, labels, (size_t)n * sizeof(int32_t),
				   &err),
		 &err);
	float *before = down(gg, nz);
	CHECK_OK(gpu.be->xent_tally(&gpu, n, k, gz, gl, smoothing, 1.0f / n, gg,
				    5, dt, &err),
		 &err);
	CHECK_OK(nn_cpu_xent_tally(&cpu, n, k, z, labels, smoothing, 1.0f / n,
				   g, 5, &c2, &err),
		 &err);
	CHECK_OK(gpu.be->to_host(&gpu, &h2, dt, sizeof(h2), &err), &err);
	CHECK_NEAR(h2.loss_sum, c2.loss_sum, 1e-9 * fabs(c2.loss_sum));
	CHECK(h2.correct == c2.correct);
	CHECK_EQ_U64((uint64_t)h2.bad_label_step, 5);
	CHECK_EQ_U64((uint64_t)c2.bad_label_step, 5);
	CHECK_EQ_U64((uint64_t)h2.nonfinite_step, 0);
	same_dev_f("xent tally dlogits untouched by a bad label", before, gg, nz);
	free(before);
	dfree(gz), dfree(gg), dfree(gl), dfree(dt);
	free(z), free(g), free(labels);
}

void test_xent(void)
{
	tally_case(7, 10, 0.0f);
	tally_case(64, 1000, 0.1f);
	xent_case(7, 10, 0.0f);
	xent_case(7, 10, 0.1f);
	xent_case(64, 1000, 0.1f);
	xent_case(1, 1, 0.0f);
	xent_case(300, 3, 1.0f);
}
