/* test_softmax_xent.c - softmax cross-entropy: known losses with and
 * without label smoothing against -log softmax in double, large logits,
 * gradients (by hand and by finite differences), dlogits overwritten and
 * scaled, NULL outputs, the same bits on 1 and 2 threads, label errors,
 * and top-k counting with ties and a skip mask. */
#include <math.h>
#include <string.h>

#include "nn_test_util.h"
#include "train/nn_internal.h"

static ims_error err;
static nn_ctx ctx1, ctx2;

/* -log softmax(z)_j for every j, in double with the max subtracted. */
static void ref_nll(const float *z, int k, double *nll)
{
	double mx = z[0], s = 0;
	for (int j = 1; j < k; j++)
		mx = z[j] > mx ? z[j] : mx;
	for (int j = 0; j < k; j++)
		s += exp(z[j] - mx);
	for (int j = 0; j < k; j++)
		nll[j] = mx + log(s) - z[j];
}

/* PyTorch's smoothed loss, spelled out: (1 - s) nll_label + s mean nll. */
static double ref_loss(const float *z, int k, int label, double s)
{
	double *nll = calloc(k, sizeof(double)), mean = 0;
	ref_nll(z, k, nll);
	for (int j = 0; j < k; j++)
		mean += nll[j] / k;
	double loss = (1 - s) * nll[label] + s * mean;
	free(nll);
	return loss;
}

static void test_known(void)
{
	const float z[12] = {
		1, 2, 3, 4,
		0.5f, -1, 2, 0,
		1000, 0, -1000, 999,
	};
	const int32_t labels[3] = {3, 0, 3};
	double loss = 0;
	float g[12];
	for (int i = 0; i < 12; i++)
		g[i] = 1e9f; /* overwritten, not added to */
	CHECK_OK(nn_cpu_softmax_xent(&ctx1, 1, 4, z, labels, 0, 1, &loss, g,
				     &err), &err);
	/* log(1 + e^-1 + e^-2 + e^-3) */
	CHECK_NEAR(loss, 0.44018969856119533, 1e-12);

	CHECK_OK(nn_cpu_softmax_xent(&ctx1, 3, 4, z, labels, 0, 1, &loss, g,
				     &err), &err);
	double want = 0;
	for (int i = 0; i < 3; i++)
		want += ref_loss(z + 4 * i, 4, labels[i], 0);
	CHECK_NEAR(loss, want, 1e-9);
	/* large logits stay finite: 1 + log(1 + e^-1) for the last row */
	CHECK_NEAR(ref_loss(z + 8, 4, 3, 0), 1.3132616875182228, 1e-12);
	CHECK(isfinite(loss));
	for (int i = 0; i < 3; i++) {
		double nll[4];
		ref_nll(z + 4 * i, 4, nll);
		for (int j = 0; j < 4; j++) {
			double p = exp(-nll[j]);
			CHECK_NEAR(g[4 * i + j], p - (j == labels[i]), 1e-7);
		}
	}

	/* smoothing 0.1: target 0.9 onehot + 0.1 / 4 */
	CHECK_OK(nn_cpu_softmax_xent(&ctx1, 3, 4, z, labels, 0.1f, 1, &loss, g,
				     &err), &err);
	want = 0;
	for (int i = 0; i < 3; i++)
		want += ref_loss(z + 4 * i, 4, labels[i], (double)0.1f);
	CHECK_NEAR(loss, want, 1e-9);
	for (int i = 0; i < 3; i++) {
		double nll[4];
		ref_nll(z + 4 * i, 4, nll);
		for (int j = 0; j < 4; j++) {
			double t = (1 - (double)0.1f) * (j == labels[i]) +
				   (double)0.1f / 4;
			CHECK_NEAR(g[4 * i + j], exp(-nll[j]) - t, 1e-7);
		}
	}
	/* smoothing 1: the target is uniform */
	CHECK_OK(nn_cpu_softmax_xent(&ctx1, 1, 4, z, labels, 1, 1, &loss, NULL,
				     &err), &err);
	CHECK_NEAR(loss, ref_loss(z, 4, 0, 1), 1e-12);

	/* scale multiplies the gradient (1/N for a mean); loss_sum may be
	 * NULL when only the gradient is wanted */
	float g4[12];
	CHECK_OK(nn_cpu_softmax_xent(&ctx1, 3, 4, z, labels, 0.1f, 0.25f, NULL,
				     g4, &err), &err);
	for (int i = 0; i < 12; i++)
		CHECK(g4[i] == 0.25f * g[i]);
	/* one class: the loss is 0 and so is the gradient */
	CHECK_OK(nn_cpu_softmax_xent(&ctx1, 1, 1, z, labels + 1, 0.1f, 1, &loss,
				     g, &err), &err);
	CHECK(loss == 0 && g[0] == 0);
}

typedef struct {
	int n, k;
	float *z;
	int32_t *labels;
	float s;
} xent_case;

static void xent_fwd(void *ud, float *y)
{
	xent_case *t = ud;
	double loss = 0;
	nn_cpu_softmax_xent(&ctx1, t->n, t->k, t->z, t->labels, t->s, 1, &loss,
			    NULL, NULL);
	y[0] = (float)loss;
}

static void test_gradients(void)
{
	const float smooth[3] = {0, 0.1f, 0.3f};
	for (int v = 0; v < 3; v++) {
		xent_case t = {5, 7, nn_test_alloc(35), NULL, smooth[v]};
		int32_t labels[5] = {0, 6, 3, 3, 1};
		t.labels = labels;
		float *g = nn_test_alloc(35), r[1] = {1};
		nn_test_fill(t.z, 35, 40 + v, -3, 3);
		double loss;
		CHECK_OK(nn_cpu_softmax_xent(&ctx1, 5, 7, t.z, labels, t.s, 1,
					     &loss, g, &err), &err);
		CHECK_EQ_INT(nn_test_gradcheck("xent dlogits", xent_fwd, &t, t.z,
					       35, g, r, 1, 35, 1e-2f, 2e-4, 1e-3),
			     0);
		free(t.z), free(g);
	}
}

static void test_threads(void)
{
	const int n = 64, k = 1000;
	float *z = nn_test_alloc((size_t)n * k), *g[2];
	int32_t labels[64];
	double loss[2];
	nn_test_fill(z, (size_t)n * k, 5, -8, 8);
	for (int i = 0; i < n; i++)
		labels[i] = (i * 37) % k;
	nn_ctx *ctxs[2] = {&ctx1, &ctx2};
	for (int t = 0; t < 2; t++) {
		g[t] = nn_test_alloc((size_t)n * k);
		CHECK_OK(nn_cpu_softmax_xent(ctxs[t], n, k, z, labels, 0.1f,
					     1.0f / n, &loss[t], g[t], &err), &err);
	}
	CHECK_MEM(&loss[0], &loss[1], sizeof(double));
	CHECK_MEM(g[0], g[1], (size_t)n * k * sizeof(float));
	double want = 0;
	for (int i = 0; i < n; i++)
		want += ref_loss(z + (size_t)i * k, k, labels[i], (double)0.1f);
	CHECK_NEAR(loss[0], want, 1e-9 * want);
	free(z), free(g[0]), free(g[1]);
}

static void test_errors(void)
{
	float z[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g[8];
	int32_t labels[2] = {0, 4};
	double loss = 42;
	for (int i = 0; i < 8; i++)
		g[i] = 7;
	CHECK_EQ_INT(nn_cpu_softmax_xent(&ctx1, 2, 4, z, labels, 0, 1, &loss, g,
					 &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "sample 1 has label 4, outside [0, 4)") != NULL);
	/* nothing written */
	CHECK(loss == 42 && g[0] == 7 && g[7] == 7);
	labels[1] = -1;
	CHECK_EQ_INT(nn_cpu_softmax_xent(&ctx1, 2, 4, z, labels, 0, 1, &loss, g,
					 &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "label -1") != NULL);
	labels[1] = 1;
	CHECK_EQ_INT(nn_cpu_softmax_xent(&ctx1, 2, 4, z, labels, 1.5f, 1, &loss,
					 g, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "smoothing") != NULL);
	CHECK_EQ_INT(nn_cpu_softmax_xent(&ctx1, 2, 4, z, labels, NAN, 1, &loss,
					 g, &err), IMS_EINVAL);
	CHECK_EQ_INT(nn_cpu_softmax_xent(&ctx1, 0, 4, z, labels, 0, 1, &loss, g,
					 &err), IMS_EINVAL);
	CHECK_EQ_INT(nn_cpu_softmax_xent(&ctx1, 2, 0, z, labels, 0, 1, &loss, g,
					 &err), IMS_EINVAL);
}

static void test_topk(void)
{
	/* the same row four times, labels at every rank: 2 and 1 tie, and
	 * the smaller index comes first */
	const float z[16] = {1, 2, 2, 0, 1, 2, 2, 0, 1, 2, 2, 0, 1, 2, 2, 0};
	const int32_t labels[4] = {1, 2, 0, 3};
	for (int k = 1; k <= 4; k++)
		CHECK_EQ_INT(nn_topk_correct(4, 4, z, labels, k, NULL), k);
	CHECK_EQ_INT(nn_topk_correct(4, 4, z, labels, 5, NULL), 4);
	CHECK_EQ_INT(nn_topk_correct(4, 4, z, labels, 0, NULL), 0);
	const uint8_t skip[4] = {1, 0, 0, 1};
	CHECK_EQ_INT(nn_topk_correct(4, 4, z, labels, 1, skip), 0);
	CHECK_EQ_INT(nn_topk_correct(4, 4, z, labels, 2, skip), 1);
	CHECK_EQ_INT(nn_topk_correct(4, 4, z, labels, 4, skip), 2);

	/* all equal: only the first class is top-1 */
	const float flat[3] = {5, 5, 5};
	const int32_t l0 = 0, l2 = 2;
	CHECK_EQ_INT(nn_topk_correct(1, 3, flat, &l0, 1, NULL), 1);
	CHECK_EQ_INT(nn_topk_correct(1, 3, flat, &l2, 1, NULL), 0);
	CHECK_EQ_INT(nn_topk_correct(1, 3, flat, &l2, 3, NULL), 1);

	/* no such class, or a NaN logit, is never correct */
	const int32_t bad[2] = {3, -1};
	CHECK_EQ_INT(nn_topk_correct(2, 3, (const float[6]){1, 2, 3, 1, 2, 3},
				     bad, 3, NULL), 0);
	const float nan_row[3] = {NAN, 0, 0};
	CHECK_EQ_INT(nn_topk_correct(1, 3, nan_row, &l0, 3, NULL), 0);
}

/*
 * nn_xent_tally over steps: the loss sums and top-1 hits of
 * nn_softmax_xent and nn_topk_correct added in step order (the same
 * bits), dlogits as nn_softmax_xent's, the first step with a NaN loss
 * noted; a bad label notes its step and changes nothing else.
 */
static void test_tally(void)
{
	enum { N = 6, K = 5 };
	float z[N * K], g[N * K], want_g[N * K];
	int32_t labels[N];
	nn_tally t = {0};
	double want_loss = 0, want_correct = 0;
	for (int step = 1; step <= 4; step++) {
		nn_test_fill(z, N * K, 90 + (uint64_t)step, -2, 2);
		for (int i = 0; i < N; i++)
			labels[i] = (i + step) % K;
		if (step == 3)
			z[2] = NAN;
		double loss;
		CHECK_OK(nn_softmax_xent(&ctx2, N, K, z, labels, 0.1f, 0.5f, &loss,
					 want_g, &err),
			 &err);
		want_loss += loss;
		want_correct += nn_topk_correct(N, K, z, labels, 1, NULL);
		CHECK_OK(nn_xent_tally(&ctx2, N, K, z, labels, 0.1f, 0.5f, g, step,
				       &t, &err),
			 &err);
		if (step < 3) {
			CHECK(memcmp(&t.loss_sum, &want_loss, sizeof(double)) == 0);
			CHECK(memcmp(g, want_g, sizeof(g)) == 0);
		}
		CHECK(t.correct == want_correct);
	}
	CHECK(isnan(t.loss_sum));
	CHECK_EQ_U64((uint64_t)t.nonfinite_step, 3);
	CHECK_EQ_U64((uint64_t)t.bad_label_step, 0);
	/* a label outside [0, K) at step 5 */
	nn_tally before = t;
	labels[N - 1] = K;
	memcpy(want_g, g, sizeof(g));
	CHECK_OK(nn_xent_tally(&ctx2, N, K, z, labels, 0.1f, 0.5f, g, 5, &t, &err),
		 &err);
	CHECK_EQ_U64((uint64_t)t.bad_label_step, 5);
	CHECK(t.correct == before.correct);
	CHECK_EQ_U64((uint64_t)t.nonfinite_step, 3);
	CHECK(memcmp(g, want_g, sizeof(g)) == 0);
	/* the shape checks fail as nn_softmax_xent's */
	CHECK_EQ_INT(nn_xent_tally(&ctx2, 0, K, z, labels, 0, 1, g, 6, &t, &err),
		     IMS_EINVAL);
}

int main(void)
{
	CHECK_OK(nn_ctx_init_cpu(&ctx1, 1, &err), &err);
	CHECK_OK(nn_ctx_init_cpu(&ctx2, 2, &err), &err);
	test_known();
	test_gradients();
	test_threads();
	test_errors();
	test_topk();
	test_tally();
	nn_ctx_release(&ctx1);
	nn_ctx_release(&ctx2);
	return TEST_EXIT();
}
