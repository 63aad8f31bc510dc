/*
 * test_optim.c - SGD, Adam and AdamW against the formulas of optim.h
 * evaluated in double, segments (no decay, frozen, uncovered), state save
 * and restore continuing bit for bit, thread-count independence, many
 * tensors in one step (several batches of runs) as each alone, and the
 * error paths.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn_test_util.h"
#include "test.h"
#include "train/optim.h"

#define N 8
#define STEPS 5

/*
 * |a - b| <= 1e-6 max(|b|, floor). Float rounding is relative to the
 * operands, so where a value comes from cancellation (a parameter near 1
 * stepping through 0, a momentum of sines) the floor is the operands'
 * scale; quantities without cancellation (exp_avg_sq) use a tiny floor.
 */
#define CHECK_CLOSE(a, b, floor)                                               \
	do {                                                                   \
		double ra_ = (double)(a), rb_ = (double)(b);                   \
		test_checks_++;                                                \
		if (!(fabs(ra_ - rb_) <= 1e-6 * fmax(fabs(rb_), (floor)))) {   \
			fprintf(stderr, "%s:%d: CHECK_CLOSE failed: %s ~ %s (%.10g vs %.10g)\n", \
				__FILE__, __LINE__, #a, #b, ra_, rb_);         \
			test_failures_++;                                      \
		}                                                              \
	} while (0)
#define CHECK_REL(a, b) CHECK_CLOSE(a, b, 1e-12)

/* Runs: [0,3) decay, [3,5) no decay, [5,6) frozen, 6 in no segment,
 * [7,8) decay. */
static const nn_optim_segment segs[] = {
	{0, 3, 1, 1}, {3, 2, 0, 1}, {5, 1, 1, 0}, {7, 1, 1, 1}};
#define NSEGS (sizeof(segs) / sizeof(segs[0]))

static int trainable(int i)
{
	return i != 5 && i != 6;
}

static int decays(int i)
{
	return i < 3 || i == 7;
}

static float init_param(int i)
{
	return 0.5f + 0.25f * (float)i - 0.75f * (float)(i % 3);
}

static float grad_at(int step, int i)
{
	return (float)(sin(1.3 * i + 0.7 * step) * (1.0 + 0.2 * i));
}

static double lr_at(int step)
{
	return 0.05 * (1.0 + 0.5 * step);
}

/* Runs the optimiser STEPS steps and compares every step's parameters and
 * the final state with the double-precision formulas. */
static void check_against_formulas(const nn_optim_opts *o, const char *what)
{
	ims_error e;
	ims_error_clear(&e);
	nn_optim *opt = NULL;
	CHECK_OK(nn_optim_create(o, N, &opt, &e), &e);
	if (!opt)
		return;
	float p[N], g[N];
	double rp[N], buf[N] = {0}, m[N] = {0}, v[N] = {0};
	for (int i = 0; i < N; i++)
		p[i] = init_param(i), rp[i] = p[i];
	const double wd = o->weight_decay, mom = o->momentum;
	for (int k = 0; k < STEPS; k++) {
		const double lr = lr_at(k);
		const int t = k + 1;
		for (int i = 0; i < N; i++)
			g[i] = grad_at(k, i);
		CHECK_OK(nn_optim_step(opt, p, g, segs, NSEGS, lr, &e), &e);
		CHECK_EQ_INT(nn_optim_step_count(opt), t);
		for (int i = 0; i < N; i++) {
			if (!trainable(i))
				continue;
			const double w = decays(i) ? wd : 0;
			double d = g[i];
			if (o->kind == NN_OPTIM_SGD) {
				d += w * rp[i];
				if (mom != 0) {
					buf[i] = t == 1 ? d : mom * buf[i] + d;
					d = o->nesterov ? d + mom * buf[i] : buf[i];
				}
				rp[i] -= lr * d;
				continue;
			}
			if (o->kind == NN_OPTIM_ADAMW)
				rp[i] *= 1 - lr * w;
			else
				d += w * rp[i];
			m[i] = o->beta1 * m[i] + (1 - o->beta1) * d;
			v[i] = o->beta2 * v[i] + (1 - o->beta2) * d * d;
			const double mh = m[i] / (1 - pow(o->beta1, t));
			const double vh = v[i] / (1 - pow(o->beta2, t));
			rp[i] -= lr * mh / (sqrt(vh) + o->eps);
		}
		for (int i = 0; i < N; i++) {
			test_checks_++;
			if (!(fabs(p[i] - rp[i]) <= 1e-6 * fmax(fabs(rp[i]), 0.1))) {
				fprintf(stderr, "%s: step %d param %d: %.10g vs %.10g\n",
					what, t, i, p[i], rp[i]);
				test_failures_++;
			}
		}
	}
	/* Frozen and uncovered parameters keep their bits. */
	CHECK(p[5] == init_param(5) && p[6] == init_param(6));
	if (o->kind == NN_OPTIM_SGD && mom != 0) {
		const float *b = nn_optim_state_find(opt, "momentum_buffer");
		CHECK(b != NULL);
		for (int i = 0; b && i < N; i++)
			CHECK_CLOSE(b[i], buf[i], 0.1);
	} else if (o->kind != NN_OPTIM_SGD) {
		const float *ms = nn_optim_state_find(opt, "exp_avg");
		const float *vs = nn_optim_state_find(opt, "exp_avg_sq");
		CHECK(ms && vs);
		for (int i = 0; ms && vs && i < N; i++) {
			CHECK_CLOSE(ms[i], m[i], 0.01);
			CHECK_REL(vs[i], v[i]);
		}
		CHECK(ms && ms[5] == 0.0f && ms[6] == 0.0f);
	}
	nn_optim_free(opt);
}

static void test_formulas(void)
{
	nn_optim_opts o;
	nn_optim_opts_init(&o, NN_OPTIM_SGD);
	check_against_formulas(&o, "sgd");
	o.weight_decay = 0.01;
	check_against_formulas(&o, "sgd wd");
	o.momentum = 0.9;
	check_against_formulas(&o, "sgd momentum wd");
	o.nesterov = 1;
	o.weight_decay = 5e-4;
	check_against_formulas(&o, "sgd nesterov wd");
	o.weight_decay = 0;
	o.momentum = 0.5;
	check_against_formulas(&o, "sgd nesterov");

	nn_optim_opts_init(&o, NN_OPTIM_ADAM);
	check_against_formulas(&o, "adam");
	o.weight_decay = 0.01;
	o.beta1 = 0.8;
	o.beta2 = 0.99;
	o.eps = 1e-6;
	check_against_formulas(&o, "adam l2");
	o.beta1 = 0;
	check_against_formulas(&o, "adam beta1 0");

	nn_optim_opts_init(&o, NN_OPTIM_ADAMW);
	check_against_formulas(&o, "adamw");
	o.weight_decay = 0.1;
	o.eps = 1e-3;
	check_against_formulas(&o, "adamw wd 0.1");
}

/* A few values worked out by hand. */
static void test_by_hand(void)
{
	ims_error e;
	nn_optim *opt = NULL;
	nn_optim_opts o;
	float p[1], g[1];

	/* SGD, momentum 0.9, wd 0.1: d = 0.5 + 0.1*1 = 0.6, buf = 0.6,
	 * p = 1 - 0.1*0.6 = 0.94; then d = 0.5 + 0.094 = 0.594,
	 * buf = 0.54 + 0.594 = 1.134, p = 0.94 - 0.1134 = 0.8266. */
	nn_optim_opts_init(&o, NN_OPTIM_SGD);
	o.momentum = 0.9;
	o.weight_decay = 0.1;
	CHECK_OK(nn_optim_create(&o, 1, &opt, &e), &e);
	p[0] = 1.0f;
	g[0] = 0.5f;
	CHECK_OK(nn_optim_step(opt, p, g, NULL, 0, 0.1, &e), &e);
	CHECK_REL(p[0], 0.94);
	CHECK_OK(nn_optim_step(opt, p, g, NULL, 0, 0.1, &e), &e);
	CHECK_REL(p[0], 0.8266);
	CHECK_REL(nn_optim_state(opt, 0)[0], 1.134);
	nn_optim_free(opt);

	/* Nesterov, same: step 1 d = 0.6 + 0.9*0.6 = 1.14, p = 0.886. */
	o.nesterov = 1;
	CHECK_OK(nn_optim_create(&o, 1, &opt, &e), &e);
	p[0] = 1.0f;
	CHECK_OK(nn_optim_step(opt, p, g, NULL, 0, 0.1, &e), &e);
	CHECK_REL(p[0], 0.886);
	nn_optim_free(opt);

	/* Adam's first step moves by lr * g / (|g| + eps): 1 - 0.001. */
	nn_optim_opts_init(&o, NN_OPTIM_ADAM);
	CHECK_OK(nn_optim_create(&o, 1, &opt, &e), &e);
	p[0] = 1.0f;
	g[0] = 0.3f;
	CHECK_OK(nn_optim_step(opt, p, g, NULL, 0, 0.001, &e), &e);
	CHECK_REL(p[0], 0.999);
	CHECK_REL(nn_optim_state(opt, 0)[0], 0.03);
	CHECK_REL(nn_optim_state(opt, 1)[0], 0.001 * 0.09);
	nn_optim_free(opt);

	/* AdamW with wd 0.01: first p = 1 * (1 - 0.1*0.01) = 0.999, then
	 * the Adam step of lr 0.1: 0.899. */
	nn_optim_opts_init(&o, NN_OPTIM_ADAMW);
	CHECK_OK(nn_optim_create(&o, 1, &opt, &e), &e);
	p[0] = 1.0f;
	g[0] = -2.0f;
	CHECK_OK(nn_optim_step(opt, p, g, NULL, 0, 0.1, &e), &e);
	CHECK_REL(p[0], 1.099);
	nn_optim_free(opt);
}

/* decay = 0 everywhere with wd > 0 gives the bits of wd = 0. */
static void test_no_decay_bits(void)
{
	for (int kind = NN_OPTIM_SGD; kind <= NN_OPTIM_ADAMW; kind++) {
		ims_error e;
		nn_optim_opts o;
		nn_optim_opts_init(&o, kind);
		o.momentum = 0.9;
		nn_optim *a = NULL, *b = NULL;
		o.weight_decay = 0.05;
		CHECK_OK(nn_optim_create(&o, N, &a, &e), &e);
		o.weight_decay = 0;
		CHECK_OK(nn_optim_create(&o, N, &b, &e), &e);
		if (!a || !b)
			return;
		float pa[N], pb[N], g[N];
		for (int i = 0; i < N; i++)
			pa[i] = pb[i] = init_param(i);
		nn_optim_segment nodecay = {0, N, 0, 1};
		for (int k = 0; k < 3; k++) {
			for (int i = 0; i < N; i++)
				g[i] = grad_at(k, i);
			CHECK_OK(nn_optim_step(a, pa, g, &nodecay, 1, 0.1, &e), &e);
			CHECK_OK(nn_optim_step(b, pb, g, NULL, 0, 0.1, &e), &e);
		}
		CHECK_MEM(pa, pb, sizeof(pa));
		CHECK(pa[0] != init_param(0));
		nn_optim_free(a);
		nn_optim_free(b);
	}
}

/* Saving the state after some steps and restoring it into a new
 * optimiser (with another thread count) continues bit for bit. The buffer
 * is large enough for the parallel path. */
static void test_resume(int kind, int nesterov)
{
	const size_t n = 100003;
	ims_error e;
	nn_optim_opts o;
	nn_optim_opts_init(&o, kind);
	o.momentum = 0.9;
	o.nesterov = nesterov;
	o.weight_decay = 1e-4;
	o.threads = 4;
	nn_optim *a = NULL, *b = NULL;
	CHECK_OK(nn_optim_create(&o, n, &a, &e), &e);
	float *p = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
	float *saved_p = malloc(n * sizeof(float));
	float *saved_s[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
	if (!a || !p || !g || !saved_p || !saved_s[0] || !saved_s[1]) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	const nn_optim_segment sg[] = {{0, 70000, 1, 1}, {70000, 30000, 0, 1},
				       {100000, 3, 1, 0}};
	for (size_t i = 0; i < n; i++)
		p[i] = (float)sin(0.001 * (double)i);
	for (int k = 0; k < 7; k++) {
		if (k == 4) {
			memcpy(saved_p, p, n * sizeof(float));
			for (size_t s = 0; s < nn_optim_state_count(a); s++)
				memcpy(saved_s[s], nn_optim_state(a, s), n * sizeof(float));
		}
		for (size_t i = 0; i < n; i++)
			g[i] = (float)cos(0.37 * (double)i + k);
		CHECK_OK(nn_optim_step(a, p, g, sg, 3, 0.01 * (k + 1), &e), &e);
	}

	o.threads = 1;
	CHECK_OK(nn_optim_create(&o, n, &b, &e), &e);
	for (size_t s = 0; b && s < nn_optim_state_count(a); s++) {
		float *dst = nn_optim_state_find(b, nn_optim_state_name(a, s));
		CHECK(dst != NULL);
		if (dst)
			memcpy(dst, saved_s[s], n * sizeof(float));
	}
	CHECK_OK(nn_optim_set_step_count(b, 4, &e), &e);
	for (int k = 4; b && k < 7; k++) {
		for (size_t i = 0; i < n; i++)
			g[i] = (float)cos(0.37 * (double)i + k);
		CHECK_OK(nn_optim_step(b, saved_p, g, sg, 3, 0.01 * (k + 1), &e), &e);
	}
	CHECK_MEM(p, saved_p, n * sizeof(float));
	for (size_t s = 0; b && s < nn_optim_state_count(a); s++)
		CHECK_MEM(nn_optim_state(a, s), nn_optim_state(b, s), n * sizeof(float));
	CHECK_EQ_INT(nn_optim_step_count(b), 7);
	nn_optim_free(a);
	nn_optim_free(b);
	free(p);
	free(g);
	free(saved_p);
	free(saved_s[0]);
	free(saved_s[1]);
}

static void test_state_names(void)
{
	ims_error e;
	nn_optim_opts o;
	nn_optim *opt = NULL;

	nn_optim_opts_init(&o, NN_OPTIM_SGD);
	CHECK(o.momentum == 0 && o.weight_decay == 0 && !o.nesterov);
	CHECK(o.beta1 == 0.9 && o.beta2 == 0.999 && o.eps == 1e-8);
	CHECK_OK(nn_optim_create(&o, 3, &opt, &e), &e);
	CHECK_EQ_INT(nn_optim_state_count(opt), 0);
	CHECK(nn_optim_state(opt, 0) == NULL && nn_optim_state_name(opt, 0) == NULL);
	CHECK(nn_optim_state_find(opt, "momentum_buffer") == NULL);
	CHECK_EQ_INT(nn_optim_param_count(opt), 3);
	CHECK_EQ_INT(nn_optim_options(opt)->kind, NN_OPTIM_SGD);
	nn_optim_free(opt);

	o.momentum = 0.9;
	CHECK_OK(nn_optim_create(&o, 3, &opt, &e), &e);
	CHECK_EQ_INT(nn_optim_state_count(opt), 1);
	CHECK_EQ_STR(nn_optim_state_name(opt, 0), "momentum_buffer");
	CHECK(nn_optim_state_find(opt, "momentum_buffer") == nn_optim_state(opt, 0));
	CHECK(nn_optim_state(opt, 0)[2] == 0.0f);
	CHECK(nn_optim_state(opt, 1) == NULL);
	CHECK_EQ_INT(nn_optim_set_step_count(opt, -1, &e), IMS_EINVAL);
	CHECK_OK(nn_optim_set_step_count(opt, 12, &e), &e);
	CHECK_EQ_INT(nn_optim_step_count(opt), 12);
	nn_optim_free(opt);

	nn_optim_opts_init(&o, NN_OPTIM_ADAMW);
	CHECK(o.weight_decay == 0.01);
	CHECK_OK(nn_optim_create(&o, 3, &opt, &e), &e);
	CHECK_EQ_INT(nn_optim_state_count(opt), 2);
	CHECK_EQ_STR(nn_optim_state_name(opt, 0), "exp_avg");
	CHECK_EQ_STR(nn_optim_state_name(opt, 1), "exp_avg_sq");
	CHECK(nn_optim_state_find(opt, "exp_avg_sq") == nn_optim_state(opt, 1));
	CHECK(nn_optim_state_find(opt, "nope") == NULL);
	CHECK(nn_optim_state_find(opt, NULL) == NULL);
	nn_optim_free(opt);
	nn_optim_opts_init(&o, NN_OPTIM_ADAM);
	CHECK(o.weight_decay == 0);
	nn_optim_free(NULL);

	/* An empty optimiser steps without buffers. */
	CHECK_OK(nn_optim_create(&o, 0, &opt, &e), &e);
	CHECK_OK(nn_optim_step(opt, NULL, NULL, NULL, 0, 0.1, &e), &e);
	CHECK_EQ_INT(nn_optim_step_count(opt), 1);
	nn_optim_free(opt);
}

static void expect_create_fails(const nn_optim_opts *o, const char *needle,
				int line)
{
	ims_error e;
	ims_error_clear(&e);
	nn_optim *opt = (nn_optim *)1;
	int rc = nn_optim_create(o, 4, &opt, &e);
	test_checks_++;
	if (rc != IMS_EINVAL || opt != NULL || !strstr(e.msg, needle)) {
		fprintf(stderr, "%s:%d: expected IMS_EINVAL with '%s', got %d: %s\n",
			__FILE__, line, needle, rc, e.msg);
		test_failures_++;
	}
}
#define CREATE_FAILS(needle) expect_create_fails(&o, needle, __LINE__)

static void test_errors(void)
{
	ims_error e;
	nn_optim_opts o;
	nn_optim_opts_init(&o, 0);
	CREATE_FAILS("unknown kind 0");
	nn_optim_opts_init(&o, 99);
	CREATE_FAILS("unknown kind 99");
	nn_optim_opts_init(&o, NN_OPTIM_SGD);
	o.momentum = -0.1;
	CREATE_FAILS("momentum -0.1");
	o.momentum = NAN;
	CREATE_FAILS("momentum");
	o.momentum = 0;
	o.nesterov = 1;
	CREATE_FAILS("nesterov");
	o.nesterov = 0;
	o.weight_decay = -1;
	CREATE_FAILS("weight decay -1");
	o.weight_decay = INFINITY;
	CREATE_FAILS("weight decay");
	o.weight_decay = 0;
	o.threads = -2;
	CREATE_FAILS("-2 threads");
	nn_optim_opts_init(&o, NN_OPTIM_ADAM);
	o.beta1 = 1.0;
	CREATE_FAILS("beta1 1");
	o.beta1 = -0.1;
	CREATE_FAILS("beta1 -0.1");
	o.beta1 = 0.9;
	o.beta2 = 1.0;
	CREATE_FAILS("beta2 1");
	o.beta2 = NAN;
	CREATE_FAILS("beta2");
	o.beta2 = 0.999;
	o.eps = -1e-8;
	CREATE_FAILS("eps");
	/* SGD-only fields do not concern Adam. */
	nn_optim_opts_init(&o, NN_OPTIM_ADAMW);
	o.nesterov = 1;
	o.momentum = -1;
	nn_optim *opt = NULL;
	CHECK_OK(nn_optim_create(&o, 4, &opt, &e), &e);
	nn_optim_free(opt);

	nn_optim_opts_init(&o, NN_OPTIM_SGD);
	o.momentum = 0.9;
	CHECK_OK(nn_optim_create(&o, 10, &opt, &e), &e);
	float p[10], g[10], p0[10];
	for (int i = 0; i < 10; i++)
		p[i] = p0[i] = (float)i, g[i] = 1;
	CHECK_EQ_INT(nn_optim_step(opt, p, g, NULL, 0, -0.1, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "learning rate -0.1") != NULL);
	CHECK_EQ_INT(nn_optim_step(opt, p, g, NULL, 0, NAN, &e), IMS_EINVAL);
	CHECK_EQ_INT(nn_optim_step(opt, p, g, NULL, 0, INFINITY, &e), IMS_EINVAL);
	CHECK_EQ_INT(nn_optim_step(opt, NULL, g, NULL, 0, 0.1, &e), IMS_EINVAL);
	CHECK_EQ_INT(nn_optim_step(opt, p, NULL, NULL, 0, 0.1, &e), IMS_EINVAL);
	CHECK_EQ_INT(nn_optim_step(opt, p, g, NULL, 2, 0.1, &e), IMS_EINVAL);
	CHECK_EQ_INT(nn_optim_step(NULL, p, g, NULL, 0, 0.1, &e), IMS_EINVAL);

	nn_optim_segment past[] = {{0, 5, 1, 1}, {5, 6, 1, 1}};
	CHECK_EQ_INT(nn_optim_step(opt, p, g, past, 2, 0.1, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "segment 1") && strstr(e.msg, "past"));
	nn_optim_segment beyond[] = {{11, 0, 1, 1}};
	CHECK_EQ_INT(nn_optim_step(opt, p, g, beyond, 1, 0.1, &e), IMS_EINVAL);
	nn_optim_segment wrap[] = {{2, SIZE_MAX, 1, 1}};
	CHECK_EQ_INT(nn_optim_step(opt, p, g, wrap, 1, 0.1, &e), IMS_EINVAL);
	nn_optim_segment overlap[] = {{0, 5, 1, 1}, {4, 2, 1, 1}};
	CHECK_EQ_INT(nn_optim_step(opt, p, g, overlap, 2, 0.1, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "segment 1") && strstr(e.msg, "overlaps"));
	nn_optim_segment order[] = {{5, 5, 1, 1}, {0, 5, 1, 1}};
	CHECK_EQ_INT(nn_optim_step(opt, p, g, order, 2, 0.1, &e), IMS_EINVAL);
	/* Frozen segments are checked too. */
	nn_optim_segment frozen[] = {{0, 5, 1, 1}, {3, 7, 1, 0}};
	CHECK_EQ_INT(nn_optim_step(opt, p, g, frozen, 2, 0.1, &e), IMS_EINVAL);
	/* Nothing moved. */
	CHECK_MEM(p, p0, sizeof(p));
	CHECK_EQ_INT(nn_optim_step_count(opt), 0);
	CHECK(nn_optim_state(opt, 0)[0] == 0.0f);
	/* Touching segments and an lr of 0 are fine. */
	nn_optim_segment ok[] = {{0, 5, 1, 1}, {5, 0, 1, 1}, {5, 5, 0, 1}};
	CHECK_OK(nn_optim_step(opt, p, g, ok, 3, 0.0, &e), &e);
	CHECK_MEM(p, p0, sizeof(p));
	CHECK_EQ_INT(nn_optim_step_count(opt), 1);
	nn_optim_free(opt);
}

/*
 * Many tensors in one step: 700 segments of 0 to 8999 elements (some
 * past NN_OPTIM_BLOCK), gaps between some, every fifth frozen, every
 * other without decay, so a step cuts them into three batches of runs.
 * Each element must end as the same optimiser run on its segment alone
 * leaves it, bit for bit, and within 1e-5 of the formulas in double
 * (elements outside every trained segment keep their values).
 */
static void test_many_segments(int kind, int nesterov)
{
	enum { NS = 700 };
	size_t n;
	nn_optim_segment *sg = nn_test_segments(NS, 9000, &n);
	float *p = calloc(n, sizeof(float)), *g = calloc(n, sizeof(float));
	float *ref = calloc(n, sizeof(float));
	for (size_t i = 0; i < n; i++)
		p[i] = ref[i] = (float)sin(0.37 * (double)i);
	nn_optim_opts o;
	nn_optim_opts_init(&o, kind);
	o.weight_decay = 0.01;
	if (kind == NN_OPTIM_SGD) {
		o.momentum = 0.9;
		o.nesterov = nesterov;
	}
	nn_optim *all;
	ims_error e;
	CHECK_OK(nn_optim_create(&o, n, &all, &e), &e);
	nn_optim **one = calloc(NS, sizeof(*one));
	for (int i = 0; i < NS; i++)
		CHECK_OK(nn_optim_create(&o, sg[i].count, &one[i], &e), &e);
	/* and, independently, the formulas in double */
	double *dp = calloc(n, sizeof(double)), *m = calloc(n, sizeof(double));
	double *v = calloc(n, sizeof(double));
	for (size_t i = 0; i < n; i++)
		dp[i] = p[i];
	for (int step = 0; step < 3; step++) {
		for (size_t i = 0; i < n; i++)
			g[i] = (float)cos(0.11 * (double)i + step);
		CHECK_OK(nn_optim_step(all, p, g, sg, NS, lr_at(step), &e), &e);
		const double lr = lr_at(step), t = step + 1;
		for (int k = 0; k < NS; k++) {
			if (!sg[k].trainable)
				continue;
			const double wd = sg[k].decay ? o.weight_decay : 0;
			for (size_t i = sg[k].offset; i < sg[k].offset + sg[k].count;
			     i++) {
				double gi = g[i];
				if (kind == NN_OPTIM_SGD) {
					gi += wd * dp[i];
					m[i] = step ? 0.9 * m[i] + gi : gi;
					dp[i] -= lr * (nesterov ? gi + 0.9 * m[i] : m[i]);
					continue;
				}
				if (kind == NN_OPTIM_ADAMW)
					dp[i] *= 1 - lr * wd;
				else
					gi += wd * dp[i];
				m[i] = 0.9 * m[i] + 0.1 * gi;
				v[i] = 0.999 * v[i] + 0.001 * gi * gi;
				dp[i] -= lr / (1 - pow(0.9, t)) * m[i] /
					 (sqrt(v[i]) / sqrt(1 - pow(0.999, t)) + 1e-8);
			}
		}
		for (int i = 0; i < NS; i++) {
			nn_optim_segment alone = {0, sg[i].count, sg[i].decay,
						  sg[i].trainable};
			CHECK_OK(nn_optim_step(one[i], ref + sg[i].offset,
					       g + sg[i].offset, &alone, 1,
					       lr_at(step), &e),
				 &e);
		}
	}
	size_t differ = 0;
	for (size_t i = 0; i < n; i++)
		differ += memcmp(&p[i], &ref[i], sizeof(float)) != 0;
	CHECK_EQ_U64(differ, 0);
	size_t far = 0;
	for (size_t i = 0; i < n; i++)
		far += !(fabs(p[i] - dp[i]) <= 1e-5 * fmax(fabs(dp[i]), 1));
	CHECK_EQ_U64(far, 0);
	free(dp);
	free(m);
	free(v);
	for (int i = 0; i < NS; i++)
		nn_optim_free(one[i]);
	nn_optim_free(all);
	free(one);
	free(sg);
	free(p);
	free(g);
	free(ref);
}

int main(void)
{
	test_formulas();
	test_by_hand();
	test_no_decay_bits();
	test_resume(NN_OPTIM_SGD, 0);
	test_resume(NN_OPTIM_SGD, 1);
	test_resume(NN_OPTIM_ADAM, 0);
	test_resume(NN_OPTIM_ADAMW, 0);
	test_many_segments(NN_OPTIM_SGD, 1);
	test_many_segments(NN_OPTIM_ADAM, 0);
	test_many_segments(NN_OPTIM_ADAMW, 0);
	test_state_names();
	test_errors();
	return TEST_EXIT();
}
