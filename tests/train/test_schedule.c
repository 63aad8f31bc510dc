/*
 * test_schedule.c - learning-rate schedules: linear scaling on and off,
 * warmup boundaries, milestone boundaries, cosine midpoint and end,
 * fractional positions, and option errors.
 */
#include <math.h>

#include "test.h"
#include "train/schedule.h"

/* Equal to 1e-12 relative: the rates are a handful of double operations. */
#define CHECK_LR(a, b) CHECK_NEAR((a), (b), 1e-12 * fabs((double)(b)) + 1e-300)

static nn_lr_schedule make(const nn_lr_opts *o)
{
	ims_error e;
	ims_error_clear(&e);
	nn_lr_schedule s;
	memset(&s, 0, sizeof(s));
	CHECK_OK(nn_lr_schedule_init(&s, o, &e), &e);
	return s;
}

static void test_defaults_and_scaling(void)
{
	nn_lr_opts o;
	nn_lr_opts_init(&o);
	CHECK(o.base_lr == 0.1 && o.world == 1 && !o.no_scaling);
	CHECK(o.warmup_steps == 0 && o.decay == NN_LR_CONSTANT);
	CHECK(o.gamma == 0.1 && o.n_milestones == 0 && o.min_lr == 0);

	nn_lr_schedule s = make(&o);
	CHECK(nn_lr_peak(&s) == 0.1);
	CHECK(nn_lr_at(&s, 0) == 0.1 && nn_lr_at(&s, 123456) == 0.1);
	o.no_scaling = 1;
	s = make(&o);
	CHECK(nn_lr_peak(&s) == 0.1);

	o.world = 4;
	o.no_scaling = 0;
	s = make(&o);
	CHECK(s.scale == 4.0);
	CHECK(nn_lr_peak(&s) == 0.4);
	CHECK(nn_lr_at(&s, 7) == 0.4);
	CHECK(s.opts.base_lr == 0.1); /* the unscaled rate, for the log */
	o.no_scaling = 1;
	s = make(&o);
	CHECK(s.scale == 1.0);
	CHECK(nn_lr_peak(&s) == 0.1);
	CHECK(nn_lr_at(&s, 7) == 0.1);
}

static void test_warmup(void)
{
	nn_lr_opts o;
	nn_lr_opts_init(&o);
	o.base_lr = 0.1;
	o.world = 4;
	o.warmup_steps = 5;
	nn_lr_schedule s = make(&o);
	CHECK_LR(nn_lr_at(&s, 0), 0.4 / 5);
	CHECK_LR(nn_lr_at(&s, 1), 0.4 * 2 / 5);
	CHECK_LR(nn_lr_at(&s, 3), 0.4 * 4 / 5);
	CHECK(nn_lr_at(&s, 4) == 0.4); /* last warmup step: the peak exactly */
	CHECK(nn_lr_at(&s, 5) == 0.4);
	CHECK(nn_lr_at(&s, 100000) == 0.4);
	CHECK(nn_lr_at(&s, -3) == nn_lr_at(&s, 0));

	/* Strictly increasing through a long warmup, never above the peak. */
	o.warmup_steps = 1000;
	o.world = 1;
	s = make(&o);
	int up = 1;
	for (int64_t t = 1; t < 1000; t++)
		up &= nn_lr_at(&s, t) > nn_lr_at(&s, t - 1) && nn_lr_at(&s, t) <= 0.1;
	CHECK(up);
	CHECK(nn_lr_at(&s, 999) == 0.1);
	CHECK_LR(nn_lr_at(&s, 0), 0.1 / 1000);

	/* A one-step warmup is no warmup. */
	o.warmup_steps = 1;
	s = make(&o);
	CHECK(nn_lr_at(&s, 0) == 0.1);
}

static void test_step_decay(void)
{
	/* The ImageNet recipe at 100 steps an epoch: 5 warmup epochs, x0.1
	 * at epochs 30, 60 and 80, 4 ranks. */
	nn_lr_opts o;
	nn_lr_opts_init(&o);
	o.base_lr = 0.1;
	o.world = 4;
	o.warmup_steps = 500;
	o.decay = NN_LR_STEP;
	o.gamma = 0.1;
	o.n_milestones = 3;
	o.milestones[0] = 3000;
	o.milestones[1] = 6000;
	o.milestones[2] = 8000;
	nn_lr_schedule s = make(&o);
	CHECK_LR(nn_lr_at(&s, 0), 0.4 / 500);
	CHECK(nn_lr_at(&s, 499) == 0.4);
	CHECK(nn_lr_at(&s, 500) == 0.4);
	CHECK(nn_lr_at(&s, 2999) == 0.4);
	CHECK_LR(nn_lr_at(&s, 3000), 0.04);
	CHECK_LR(nn_lr_at(&s, 5999), 0.04);
	CHECK_LR(nn_lr_at(&s, 6000), 0.004);
	CHECK_LR(nn_lr_at(&s, 7999), 0.004);
	CHECK_LR(nn_lr_at(&s, 8000), 0.0004);
	CHECK_LR(nn_lr_at(&s, 1000000), 0.0004);

	/* Without scaling the same shape at a quarter of the height. */
	o.no_scaling = 1;
	s = make(&o);
	CHECK(nn_lr_at(&s, 2999) == 0.1);
	CHECK_LR(nn_lr_at(&s, 3000), 0.01);
	CHECK_LR(nn_lr_at(&s, 8000), 0.0001);

	/* A milestone inside the warmup multiplies the ramp. */
	o.no_scaling = 0;
	o.world = 1;
	o.warmup_steps = 4;
	o.gamma = 0.5;
	o.n_milestones = 1;
	o.milestones[0] = 2;
	s = make(&o);
	CHECK_LR(nn_lr_at(&s, 1), 0.1 * 2 / 4);
	CHECK_LR(nn_lr_at(&s, 2), 0.1 * 0.5 * 3 / 4);
	CHECK_LR(nn_lr_at(&s, 3), 0.05);
	CHECK_LR(nn_lr_at(&s, 4), 0.05);

	/* gamma 1 is allowed: a constant rate. */
	o.gamma = 1;
	s = make(&o);
	CHECK(nn_lr_at(&s, 10) == 0.1);
}

static void test_cosine(void)
{
	nn_lr_opts o;
	nn_lr_opts_init(&o);
	o.base_lr = 0.1;
	o.world = 4;
	o.warmup_steps = 10;
	o.decay = NN_LR_COSINE;
	o.total_steps = 110;
	o.min_lr = 0.01;
	nn_lr_schedule s = make(&o);
	CHECK_LR(nn_lr_at(&s, 0), 0.04);
	CHECK(nn_lr_at(&s, 9) == 0.4);
	CHECK(nn_lr_at(&s, 10) == 0.4);
	CHECK_LR(nn_lr_at(&s, 60), 0.22); /* midpoint: (0.4 + 0.04) / 2 */
	CHECK_LR(nn_lr_at(&s, 35), 0.04 + 0.36 * 0.5 * (1 + cos(M_PI / 4)));
	CHECK_LR(nn_lr_at(&s, 109), 0.04 + 0.36 * 0.5 * (1 + cos(M_PI * 0.99)));
	CHECK(nn_lr_at(&s, 110) == 0.04); /* the end: min, scaled */
	CHECK(nn_lr_at(&s, 5000) == 0.04);
	int down = 1;
	for (int64_t t = 11; t <= 110; t++)
		down &= nn_lr_at(&s, t) < nn_lr_at(&s, t - 1);
	CHECK(down);
	/* Symmetric about the midpoint. */
	CHECK_LR(nn_lr_at(&s, 30) + nn_lr_at(&s, 90), 0.44);

	/* No warmup, min 0, no scaling. */
	o.warmup_steps = 0;
	o.min_lr = 0;
	o.world = 8;
	o.no_scaling = 1;
	o.total_steps = 1000;
	s = make(&o);
	CHECK(nn_lr_at(&s, 0) == 0.1);
	CHECK_LR(nn_lr_at(&s, 500), 0.05);
	CHECK(nn_lr_at(&s, 1000) == 0.0);
	CHECK(nn_lr_at(&s, 999) > 0.0);
	/* min_lr equal to base_lr: flat. */
	o.min_lr = 0.1;
	s = make(&o);
	CHECK(nn_lr_at(&s, 500) == 0.1);
}

static void expect_fail(const nn_lr_opts *o, const char *needle, int line)
{
	ims_error e;
	ims_error_clear(&e);
	nn_lr_schedule s;
	int rc = nn_lr_schedule_init(&s, o, &e);
	test_checks_++;
	if (rc != IMS_EINVAL || !strstr(e.msg, needle)) {
		fprintf(stderr, "%s:%d: expected IMS_EINVAL with '%s', got %d: %s\n",
			__FILE__, line, needle, rc, e.msg);
		test_failures_++;
	}
}
#define FAILS(needle) expect_fail(&o, needle, __LINE__)

static void test_errors(void)
{
	nn_lr_opts o;
	nn_lr_opts_init(&o);
	o.base_lr = -0.1;
	FAILS("learning rate -0.1");
	o.base_lr = NAN;
	FAILS("learning rate");
	o.base_lr = INFINITY;
	FAILS("learning rate");
	nn_lr_opts_init(&o);
	o.world = 0;
	FAILS("world size 0");
	nn_lr_opts_init(&o);
	o.warmup_steps = -1;
	FAILS("warmup of -1");
	nn_lr_opts_init(&o);
	o.decay = 0;
	FAILS("decay 0");
	o.decay = 42;
	FAILS("decay 42");

	nn_lr_opts_init(&o);
	o.decay = NN_LR_STEP;
	FAILS("0 milestones");
	o.n_milestones = NN_LR_MAX_MILESTONES + 1;
	FAILS("17 milestones");
	o.n_milestones = 2;
	o.milestones[0] = 30;
	o.milestones[1] = 30;
	FAILS("30 does not come after 30");
	o.milestones[1] = 20;
	FAILS("20 does not come after 30");
	o.milestones[0] = 0;
	FAILS("milestone 0");
	o.milestones[0] = 10;
	o.gamma = 0;
	FAILS("gamma 0");
	o.gamma = 1.5;
	FAILS("gamma 1.5");
	o.gamma = NAN;
	FAILS("gamma");

	nn_lr_opts_init(&o);
	o.decay = NN_LR_COSINE;
	FAILS("0 total steps");
	o.total_steps = 100;
	o.warmup_steps = 100;
	FAILS("100 total steps leave nothing after 100 warmup steps");
	o.warmup_steps = 10;
	o.min_lr = 0.2;
	FAILS("minimum learning rate 0.2");
	o.min_lr = -0.01;
	FAILS("minimum learning rate -0.01");
	o.min_lr = 0.0;
	nn_lr_schedule s;
	ims_error e;
	CHECK_OK(nn_lr_schedule_init(&s, &o, &e), &e);
	CHECK_EQ_INT(nn_lr_schedule_init(&s, NULL, &e), IMS_EINVAL);

	/* Options another decay would refuse are ignored. */
	nn_lr_opts_init(&o);
	o.gamma = -1;
	o.total_steps = -5;
	o.min_lr = 99;
	CHECK_OK(nn_lr_schedule_init(&s, &o, &e), &e);
}

/* nn_lr_at_position between whole steps (a resumed run with another
 * global batch); at whole steps it is nn_lr_at, which the tests above
 * check against the formulas. */
static void test_position(void)
{
	nn_lr_opts o;
	nn_lr_opts_init(&o);
	o.base_lr = 0.1;
	o.world = 2;
	o.warmup_steps = 4;
	o.decay = NN_LR_COSINE;
	o.total_steps = 20;
	nn_lr_schedule s = make(&o);
	CHECK_LR(nn_lr_at_position(&s, -0.5), 0.2 * 1 / 4);
	CHECK_LR(nn_lr_at_position(&s, 1.5), 0.2 * 2.5 / 4);
	CHECK_LR(nn_lr_at_position(&s, 12), 0.1); /* the cosine's middle */
	CHECK_LR(nn_lr_at_position(&s, 8.5), 0.1 * (1 + cos(M_PI * 4.5 / 16)));
	o.decay = NN_LR_STEP;
	o.milestones[0] = 10;
	o.n_milestones = 1;
	s = make(&o);
	CHECK(nn_lr_at_position(&s, 9.75) == 0.2);
	CHECK_LR(nn_lr_at_position(&s, 10), 0.02);
}

int main(void)
{
	test_defaults_and_scaling();
	test_position();
	test_warmup();
	test_step_decay();
	test_cosine();
	test_errors();
	return TEST_EXIT();
}
