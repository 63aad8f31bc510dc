/*
 * test_model.c - the graph: whole-model gradients (directional finite
 * differences through convnet7 and resnet18, per tensor), that training
 * on a fixed batch lowers the loss, frozen-backbone backward, evaluation
 * mode and determinism, batch-size limits (batch norm's one value per
 * channel included); the ReLU fused into the batch
 * norm or add before it (nn_bn_desc.relu, add_relu_forward) where the
 * plan runs it in place; a replayed pass's host share
 * (nn_model_forward_host).
 */
#include <math.h>
#include <string.h>

#include "nn_test_util.h"
#include "test.h"
#include "train/nn_internal.h"

typedef struct fixture {
	nn_model *m;
	const float *x;
	int n;
	const float *r; /* L = sum(logits * r) */
} fixture;

/* L = sum(logits * r); *mag gets sum |logits * r|, the scale of the
 * float rounding in L. */
static double loss_of(fixture *f, double *mag)
{
	ims_error err;
	const float *logits;
	CHECK_OK(nn_model_forward(f->m, f->x, f->n, 1, 99, &logits, &err), &err);
	double s = 0, a = 0;
	for (int i = 0; i < f->n * nn_model_classes(f->m); i++) {
		s += (double)logits[i] * f->r[i];
		a += fabs((double)logits[i] * f->r[i]);
	}
	if (mag)
		*mag = a;
	return s;
}

/*
 * Compares g . d with the central difference of L along d, d random over
 * the entries of tensor t (all trained tensors when t < 0). Per-entry
 * checks would trip on ReLU and max-pool kinks; a direction sums over
 * thousands of entries, which a kink moves negligibly.
 */
static int direction_ok(fixture *f, int t, uint64_t seed, double h)
{
	ims_error err;
	size_t np;
	float *p = nn_model_params(f->m, &np);
	float *keep = nn_test_alloc(np), *d = nn_test_alloc(np);
	memcpy(keep, p, np * sizeof(float));
	for (int i = 0; i < nn_model_tensor_count(f->m); i++) {
		const nn_tensor_info *ti = nn_model_tensor(f->m, i);
		if (ti->kind == NN_TENSOR_RUNNING || ti->kind == NN_TENSOR_COUNTER)
			continue;
		if (t >= 0 && i != t)
			continue;
		nn_test_fill(d + ti->offset, ti->count, seed + (uint64_t)i, -1, 1);
	}
	double mag;
	loss_of(f, &mag);
	CHECK_OK(nn_model_backward(f->m, f->r, 0, &err), &err);
	const float *g = nn_model_grads(f->m, NULL);
	double gd = 0, dd = 0;
	for (size_t i = 0; i < np; i++) {
		gd += (double)g[i] * d[i];
		dd += (double)d[i] * d[i];
	}
	double eps = h / sqrt(dd > 0 ? dd : 1);
	for (size_t i = 0; i < np; i++)
		p[i] = keep[i] + (float)(eps * d[i]);
	double lp = loss_of(f, NULL);
	for (size_t i = 0; i < np; i++)
		p[i] = keep[i] - (float)(eps * d[i]);
	double lm = loss_of(f, NULL);
	memcpy(p, keep, np * sizeof(float));
	double num = (lp - lm) / (2 * eps);
	/* Float forward passes through a dozen layers carry a relative error
	 * of a few 1e-7 in each logit: the difference quotient has that much
	 * noise over 2 eps (a gradient far below it is checked loosely). */
	double noise = 1e-6 * mag / (2 * eps);
	int ok = fabs(num - gd) <= noise + 0.03 * fmax(fabs(num), fabs(gd));
	if (!ok && getenv("NN_TEST_VERBOSE"))
		fprintf(stderr, "%s tensor %s: g.d %.7g, finite difference %.7g\n",
			nn_model_name(f->m),
			t >= 0 ? nn_model_tensor(f->m, t)->name : "(all)", gd, num);
	free(keep);
	free(d);
	return ok;
}

static void gradients(nn_ctx *ctx, const char *name, int hw, int n, int frozen)
{
	ims_error err;
	fixture f = {0};
	CHECK_OK(nn_model_create(ctx, name, 5, hw, hw, n, 3, &f.m, &err), &err);
	if (!f.m)
		return;
	nn_model_freeze_bn(f.m, frozen);
	float *x = nn_test_alloc((size_t)n * 3 * hw * hw);
	float *r = nn_test_alloc((size_t)n * 5);
	nn_test_fill(x, (size_t)n * 3 * hw * hw, 1, -1, 1);
	nn_test_fill(r, (size_t)n * 5, 2, -1, 1);
	f.x = x;
	f.n = n;
	f.r = r;
	for (uint64_t seed = 10; seed < 12; seed++) {
		int ok = 0;
		for (int k = 0; k < 6 && !ok; k++)
			ok = direction_ok(&f, -1, seed, 1e-2 / pow(4, k));
		CHECK(ok);
	}
	int bad = 0, checked = 0;
	for (int i = 0; i < nn_model_tensor_count(f.m); i++) {
		nn_tensor_kind k = nn_model_tensor(f.m, i)->kind;
		if (k == NN_TENSOR_RUNNING || k == NN_TENSOR_COUNTER)
			continue;
		/* every tensor of convnet7; a sample of resnet18's */
		if (strcmp(name, "convnet7") && i % 6)
			continue;
		/* ReLU and max-pool kinks crossed by the step bend the
		 * difference quotient (it converges to g.d only as the step
		 * shrinks), float noise swamps tiny steps: the gradient
		 * passes if one of six steps from 1e-2 to 1e-5 agrees; a
		 * wiring error is off at every step */
		int ok = 0;
		for (int k = 0; k < 6 && !ok; k++)
			ok = direction_ok(&f, i, 20 + (uint64_t)i, 1e-2 / pow(4, k));
		if (!ok)
			fprintf(stderr, "%s: gradient of '%s' disagrees at every step\n",
				name, nn_model_tensor(f.m, i)->name);
		bad += !ok;
		checked++;
	}
	CHECK_EQ_INT(bad, 0);
	CHECK(checked >= 8);
	nn_model_free(f.m);
	free(x);
	free(r);
}

static void training_lowers_loss(nn_ctx *ctx)
{
	/* 30 plain SGD steps on one batch of 8 random images with fixed
	 * labels: the model must memorise it. */
	ims_error err;
	nn_model *m = NULL;
	const int n = 8, k = 4, hw = 16;
	CHECK_OK(nn_model_create(ctx, "convnet7", k, hw, hw, n, 5, &m, &err), &err);
	if (!m)
		return;
	float *x = nn_test_alloc((size_t)n * 3 * hw * hw);
	nn_test_fill(x, (size_t)n * 3 * hw * hw, 7, -1, 1);
	int32_t labels[8] = {0, 1, 2, 3, 3, 2, 1, 0};
	float *dl = nn_test_alloc((size_t)n * k);
	size_t np;
	float *p = nn_model_params(m, &np);
	const float *g = nn_model_grads(m, NULL);
	double first = 0, last = 0;
	for (int step = 0; step < 30; step++) {
		const float *logits;
		double loss;
		CHECK_OK(nn_model_forward(m, x, n, 1, (uint64_t)step, &logits, &err), &err);
		CHECK_OK(nn_softmax_xent(ctx, n, k, logits, labels, 0, 1.0f / n,
					 &loss, dl, &err),
			 &err);
		CHECK_OK(nn_model_backward(m, dl, 0, &err), &err);
		for (size_t i = 0; i < np; i++)
			p[i] -= 0.05f * g[i];
		if (step == 0)
			first = loss / n;
		last = loss / n;
	}
	CHECK(last < 0.3 * first);
	if (!(last < 0.3 * first))
		fprintf(stderr, "loss %.4f -> %.4f\n", first, last);
	/* counters count training forwards */
	size_t nc;
	int64_t *cnt = nn_model_counters(m, &nc);
	CHECK_EQ_INT(nc, 5);
	CHECK_EQ_INT(cnt[0], 30);
	nn_model_free(m);
	free(x);
	free(dl);
}

static void head_only_and_eval(nn_ctx *ctx)
{
	ims_error err;
	nn_model *m = NULL;
	const int n = 4, k = 3, hw = 16;
	CHECK_OK(nn_model_create(ctx, "resnet18", k, hw, hw, n, 5, &m, &err), &err);
	if (!m)
		return;
	float *x = nn_test_alloc((size_t)n * 3 * hw * hw);
	float *r = nn_test_alloc((size_t)n * k);
	nn_test_fill(x, (size_t)n * 3 * hw * hw, 8, -1, 1);
	nn_test_fill(r, (size_t)n * k, 9, -1, 1);
	size_t np;
	const float *g = nn_model_grads(m, &np);
	float *full = nn_test_alloc(np);
	const float *logits;
	CHECK_OK(nn_model_forward(m, x, n, 1, 0, &logits, &err), &err);
	CHECK_OK(nn_model_backward(m, r, 0, &err), &err);
	memcpy(full, g, np * sizeof(float));
	CHECK_OK(nn_model_forward(m, x, n, 1, 0, &logits, &err), &err);
	CHECK_OK(nn_model_backward(m, r, 1, &err), &err);
	int head_same = 1, body_zero = 1, body_nonzero_before = 0;
	for (int i = 0; i < nn_model_tensor_count(m); i++) {
		const nn_tensor_info *t = nn_model_tensor(m, i);
		if (t->kind == NN_TENSOR_RUNNING || t->kind == NN_TENSOR_COUNTER)
			continue;
		for (size_t j = 0; j < t->count; j++) {
			if (t->head)
				head_same &= g[t->offset + j] == full[t->offset + j];
			else {
				body_zero &= g[t->offset + j] == 0;
				body_nonzero_before |= full[t->offset + j] != 0;
			}
		}
	}
	CHECK(head_same);
	CHECK(body_zero);
	CHECK(body_nonzero_before);

	/* evaluation: deterministic, uses running statistics (so it differs
	 * from training mode), does not count batches, accepts a smaller batch */
	float *a = nn_test_alloc((size_t)n * k);
	CHECK_OK(nn_model_forward(m, x, n, 0, 0, &logits, &err), &err);
	memcpy(a, logits, (size_t)n * k * sizeof(float));
	CHECK_OK(nn_model_forward(m, x, n, 0, 1, &logits, &err), &err);
	CHECK(memcmp(a, logits, (size_t)n * k * sizeof(float)) == 0);
	CHECK_OK(nn_model_forward(m, x, 1, 0, 1, &logits, &err), &err);
	/* a GEMM of another width may sum in another order: not bit-exact */
	for (int i = 0; i < k; i++)
		CHECK(fabsf(a[i] - logits[i]) <= 1e-5f * (1 + fabsf(a[i])));
	int64_t *cnt = nn_model_counters(m, NULL);
	CHECK_EQ_INT(cnt[0], 2);
	/* no backward after an evaluation forward */
	CHECK_EQ_INT(nn_model_backward(m, r, 0, &err), IMS_EINVAL);
	CHECK_EQ_INT(nn_model_forward(m, x, n + 1, 0, 1, &logits, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "batch of 5") != NULL);
	CHECK_OK(nn_model_forward(m, x, n, 1, 0, &logits, &err), &err);
	CHECK(memcmp(a, logits, (size_t)n * k * sizeof(float)) != 0);
	nn_model_free(m);
	free(x);
	free(r);
	free(full);
	free(a);
}

static void thread_count_repeatable(void)
{
	/* same bits on a repeat at one thread count */
	ims_error err;
	nn_ctx ctx;
	CHECK_OK(nn_ctx_init_cpu(&ctx, 2, &err), &err);
	nn_model *m = NULL;
	CHECK_OK(nn_model_create(&ctx, "convnet7", 3, 16, 16, 4, 5, &m, &err), &err);
	if (m) {
		float *x = nn_test_alloc(4 * 3 * 16 * 16), *r = nn_test_alloc(12);
		nn_test_fill(x, 4 * 3 * 16 * 16, 3, -1, 1);
		nn_test_fill(r, 12, 4, -1, 1);
		size_t np;
		const float *g = nn_model_grads(m, &np);
		float *first = nn_test_alloc(np);
		const float *logits;
		CHECK_OK(nn_model_forward(m, x, 4, 1, 0, &logits, &err), &err);
		CHECK_OK(nn_model_backward(m, r, 0, &err), &err);
		memcpy(first, g, np * sizeof(float));
		CHECK_OK(nn_model_forward(m, x, 4, 1, 0, &logits, &err), &err);
		CHECK_OK(nn_model_backward(m, r, 0, &err), &err);
		CHECK(memcmp(first, g, np * sizeof(float)) == 0);
		free(x);
		free(r);
		free(first);
	}
	nn_model_free(m);
	nn_ctx_release(&ctx);
}

/* The ReLU layers a forward runs on their own: counted through a copy
 * of the CPU's table. */
static int relu_calls;
static int (*cpu_relu)(nn_ctx *, size_t, const void *, void *, ims_error *);
static int counting_relu(nn_ctx *ctx, size_t count, const void *x, void *y,
			 ims_error *err)
{
	relu_calls++;
	return cpu_relu(ctx, count, x, y, err);
}

/* resnet18 has 17 ReLUs: 9 (the stem's and each block's first) right
 * after a batch norm, 8 right after a block's add, each overwriting that
 * output in place. With the plan all run inside the batch norm or the
 * add, and the logits are the unplanned (unfused) model's bits */
static void relu_fusion(void)
{
	nn_ctx ctx;
	ims_error err;
	CHECK_OK(nn_ctx_init_cpu(&ctx, 1, &err), &err);
	static nn_backend counting;
	counting = *ctx.be;
	cpu_relu = counting.relu_forward;
	counting.relu_forward = counting_relu;
	ctx.be = &counting;
	const size_t nx = (size_t)2 * 3 * 32 * 32;
	float *x = nn_test_alloc(nx), *lg[2];
	nn_test_fill(x, nx, 5, -1, 1);
	const int want[2] = {17 - 9 - 8, 17};
	for (int plan = 0; plan < 2; plan++) {
		ctx.memory_plan = plan ? NN_MEMPLAN_OFF : NN_MEMPLAN_ON;
		nn_model *m = NULL;
		CHECK_OK(nn_model_create(&ctx, "resnet18", 10, 32, 32, 2, 3, &m, &err),
			 &err);
		if (!m)
			return;
		const float *logits;
		relu_calls = 0;
		CHECK_OK(nn_model_forward(m, x, 2, 1, 0, &logits, &err), &err);
		CHECK_EQ_INT(relu_calls, want[plan]);
		lg[plan] = nn_test_alloc(20);
		memcpy(lg[plan], logits, 20 * sizeof(float));
		nn_model_free(m);
	}
	CHECK_MEM(lg[0], lg[1], 20 * sizeof(float));
	free(x), free(lg[0]), free(lg[1]);
	nn_ctx_release(&ctx);
}

/*
 * A replayed pass's host share (nn_model_forward_host, for recorded
 * passes): the counters, the pass backward may follow and the logits'
 * place are what running the pass leaves, and nothing is computed. The
 * CPU cannot record, and says so.
 */
static void forward_host(nn_ctx *ctx)
{
	ims_error err;
	nn_model *a = NULL, *b = NULL;
	const int n = 2, k = 3, hw = 16;
	CHECK_OK(nn_model_create(ctx, "resnet18", k, hw, hw, n, 5, &a, &err), &err);
	CHECK_OK(nn_model_create(ctx, "resnet18", k, hw, hw, n, 5, &b, &err), &err);
	if (!a || !b)
		return;
	float *x = nn_test_alloc((size_t)n * 3 * hw * hw);
	float *r = nn_test_alloc((size_t)n * k);
	nn_test_fill(x, (size_t)n * 3 * hw * hw, 4, -1, 1);
	nn_test_fill(r, (size_t)n * k, 5, -1, 1);
	size_t nc;
	int64_t *ca = nn_model_counters(a, &nc);
	const int64_t *cb = nn_model_counters(b, NULL);
	const float *la, *lb, *lb2;
	/* two training passes and an evaluation one, run and accounted for */
	for (int i = 0; i < 3; i++) {
		CHECK_OK(nn_model_forward(a, x, n, i < 2, 0, &la, &err), &err);
		CHECK_OK(nn_model_forward_host(b, x, n, i < 2, &lb, &err), &err);
	}
	CHECK(nc > 0 && ca[0] == 2);
	CHECK(memcmp(ca, cb, nc * sizeof(int64_t)) == 0);
	/* nothing ran: b's logits are as the arena was made (zero) */
	CHECK(lb[0] == 0 && lb[k - 1] == 0 && la[0] != 0);
	CHECK_EQ_INT(nn_model_backward(b, r, 0, &err), IMS_EINVAL);
	CHECK_OK(nn_model_forward_host(b, x, n, 1, &lb, &err), &err);
	CHECK_OK(nn_model_forward(b, x, n, 1, 0, &lb2, &err), &err);
	CHECK(lb == lb2);
	CHECK_EQ_INT((int)cb[0], 4);
	/* a backward after a replayed training pass is accepted */
	CHECK_OK(nn_model_forward_host(b, x, n, 1, &lb, &err), &err);
	CHECK_OK(nn_model_backward(b, r, 0, &err), &err);
	CHECK_EQ_INT(nn_model_forward_host(b, x, n + 1, 1, &lb, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "batch of 3") != NULL);
	CHECK(nn_model_arena(a) != NULL && nn_model_arena(a) != nn_model_arena(b));
	CHECK_EQ_INT(nn_model_has_dropout(a), 0);
	nn_model *c = NULL;
	CHECK_OK(nn_model_create(ctx, "convnet7", k, hw, hw, n, 5, &c, &err), &err);
	CHECK_EQ_INT(nn_model_has_dropout(c), 1);
	nn_model_free(c);
	/* the CPU runs work as it is queued: nothing to record */
	nn_graph *rec = (nn_graph *)&err;
	CHECK_EQ_INT(nn_ctx_can_record(ctx), 0);
	CHECK_EQ_INT(nn_ctx_record_begin(ctx, &err), IMS_EUNSUPPORTED);
	CHECK(strstr(err.msg, "cannot record a pass on the cpu backend") != NULL);
	CHECK_EQ_INT(nn_ctx_record_end(ctx, 1, &rec, &err), IMS_EUNSUPPORTED);
	CHECK(rec == NULL);
	CHECK_EQ_INT(nn_ctx_replay(ctx, NULL, &err), IMS_EINVAL);
	nn_graph_free(ctx, NULL);
	nn_model_free(a);
	nn_model_free(b);
	free(x);
	free(r);
}

/* One value per channel in a training batch norm is refused before a
 * step, naming the layer (before: the first step failed inside batch
 * norm, and with several ranks the job aborted); frozen, it trains. */
static void train_batch_limit(nn_ctx *ctx)
{
	ims_error err;
	nn_model *m = NULL;
	CHECK_OK(nn_model_create(ctx, "convnet7", 4, 16, 16, 2, 1, &m, &err), &err);
	if (!m)
		return;
	CHECK_EQ_INT(nn_model_check_train_batch(m, 1, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "batch norm 'features.17' would see 1 value per channel (1x1 per sample)") != NULL);
	CHECK(strstr(err.msg, "use batches of 2 or more") != NULL);
	CHECK_OK(nn_model_check_train_batch(m, 2, &err), &err);
	nn_model_freeze_bn(m, 1);
	CHECK_OK(nn_model_check_train_batch(m, 1, &err), &err);
	nn_model_free(m);
	/* at 32x32 the last is 2x2: one sample gives four values */
	CHECK_OK(nn_model_create(ctx, "convnet7", 4, 32, 32, 1, 1, &m, &err), &err);
	if (m)
		CHECK_OK(nn_model_check_train_batch(m, 1, &err), &err);
	nn_model_free(m);
}

int main(void)
{
	nn_ctx ctx;
	ims_error err;
	CHECK_OK(nn_ctx_init_cpu(&ctx, 1, &err), &err);
	/* sizes keep every batch-norm over >= 8 values: over 3, its
	 * normalised outputs are nearly constant and finite differences see
	 * mostly curvature */
	gradients(&ctx, "convnet7", 16, 4, 0);
	gradients(&ctx, "resnet18", 64, 2, 0);
	gradients(&ctx, "convnet7", 16, 4, 1);
	gradients(&ctx, "resnet18", 32, 2, 1);
	training_lowers_loss(&ctx);
	head_only_and_eval(&ctx);
	forward_host(&ctx);
	train_batch_limit(&ctx);
	nn_ctx_release(&ctx);
	thread_count_repeatable();
	relu_fusion();
	return TEST_EXIT();
}
