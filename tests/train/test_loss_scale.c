/*
 * test_loss_scale.c - fp16's dynamic loss scale (train/loss_scale.c), on
 * the host: the start value, halving on overflow down to the floor, the
 * good-step count restarting on overflow, doubling after the interval up
 * to the cap, a disabled scaler (bf16, fp32), a loss that is not finite
 * (fp16: an overflow until S is 1; otherwise the end), and the checkpoint round
 * trip of the state with the refusals of bad values.
 */
#include <math.h>
#include <string.h>

#include "test.h"
#include "train/loss_scale.h"

static ims_error err;

/* field by field: padding bytes are not part of the state */
static int same_state(const nn_loss_scale *a, const nn_loss_scale *b)
{
	return a->enabled == b->enabled && a->scale == b->scale &&
	       a->good == b->good && a->skipped == b->skipped;
}

static void good_steps(nn_loss_scale *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ_INT(nn_loss_scale_update(s, 0), 1);
}

static void test_overflow(void)
{
	nn_loss_scale s;
	nn_loss_scale_init(&s, 1);
	CHECK(nn_loss_scale_value(&s) == 65536.0f);
	/* an overflow skips the step and halves */
	CHECK_EQ_INT(nn_loss_scale_update(&s, 1), 0);
	CHECK(nn_loss_scale_value(&s) == 32768.0f);
	CHECK_EQ_U64(s.skipped, 1);
	/* down to the floor of 1, never below */
	for (int i = 0; i < 20; i++)
		CHECK_EQ_INT(nn_loss_scale_update(&s, 1), 0);
	CHECK(nn_loss_scale_value(&s) == 1.0f);
	CHECK_EQ_U64(s.skipped, 21);
	CHECK_EQ_INT(nn_loss_scale_update(&s, 1), 0);
	CHECK(nn_loss_scale_value(&s) == 1.0f);
}

/* A loss that is not finite: fp16's forward pass overflowed, a skipped
 * step (until S is at its floor); bf16 and fp32 stop. */
static void test_loss(void)
{
	nn_loss_scale s, before;
	nn_loss_scale_init(&s, 1);
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, 2.5), NN_LOSS_FINITE);
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, 0.0), NN_LOSS_FINITE);
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, 1e308), NN_LOSS_FINITE);
	before = s;
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, INFINITY), NN_LOSS_OVERFLOW);
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, -INFINITY), NN_LOSS_OVERFLOW);
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, NAN), NN_LOSS_OVERFLOW);
	CHECK(same_state(&s, &before));
	/* the step then goes through the overflow path */
	CHECK_EQ_INT(nn_loss_scale_update(&s, 1), 0);
	CHECK(nn_loss_scale_value(&s) == 32768.0f);
	CHECK(!nn_loss_scale_at_floor(&s));
	/* 2^-1 is never reached: at S = 1 the run stops */
	for (int i = 0; i < 15; i++) {
		CHECK_EQ_INT(nn_loss_scale_check_loss(&s, NAN), NN_LOSS_OVERFLOW);
		CHECK_EQ_INT(nn_loss_scale_update(&s, 1), 0);
	}
	CHECK(nn_loss_scale_value(&s) == 1.0f);
	CHECK_EQ_U64(s.skipped, 16);
	/* at the floor: overflowed gradients end the run too */
	CHECK(nn_loss_scale_at_floor(&s));
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, NAN), NN_LOSS_STOP);
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, INFINITY), NN_LOSS_STOP);
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, 1.0), NN_LOSS_FINITE);
	/* bf16 and fp32: a disabled scaler stops at once (and has no floor
	 * for gradients: it checks none) */
	nn_loss_scale_init(&s, 0);
	CHECK(!nn_loss_scale_at_floor(&s));
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, INFINITY), NN_LOSS_STOP);
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, NAN), NN_LOSS_STOP);
	CHECK_EQ_INT(nn_loss_scale_check_loss(&s, 3.0), NN_LOSS_FINITE);
}

static void test_growth(void)
{
	nn_loss_scale s;
	nn_loss_scale_init(&s, 1);
	/* 1999 good steps: no change; the 2000th doubles */
	good_steps(&s, NN_LOSS_SCALE_INTERVAL - 1);
	CHECK(nn_loss_scale_value(&s) == 65536.0f);
	CHECK_EQ_U64(s.good, NN_LOSS_SCALE_INTERVAL - 1);
	good_steps(&s, 1);
	CHECK(nn_loss_scale_value(&s) == 131072.0f);
	CHECK_EQ_U64(s.good, 0);
	/* an overflow restarts the count: 1999 more good steps after it do
	 * not double */
	good_steps(&s, 1000);
	CHECK_EQ_INT(nn_loss_scale_update(&s, 1), 0);
	CHECK(nn_loss_scale_value(&s) == 65536.0f);
	CHECK_EQ_U64(s.good, 0);
	good_steps(&s, NN_LOSS_SCALE_INTERVAL - 1);
	CHECK(nn_loss_scale_value(&s) == 65536.0f);
	good_steps(&s, 1);
	CHECK(nn_loss_scale_value(&s) == 131072.0f);
	CHECK_EQ_U64(s.skipped, 1);
}

static void test_cap(void)
{
	nn_loss_scale s;
	nn_loss_scale_init(&s, 1);
	/* 2^16 to 2^24: 8 doublings */
	good_steps(&s, 8 * NN_LOSS_SCALE_INTERVAL);
	CHECK(nn_loss_scale_value(&s) == 16777216.0f);
	good_steps(&s, 3 * NN_LOSS_SCALE_INTERVAL);
	CHECK(nn_loss_scale_value(&s) == NN_LOSS_SCALE_MAX);
	CHECK_EQ_U64(s.good, 0);
	CHECK_EQ_U64(s.skipped, 0);
}

static void test_disabled(void)
{
	nn_loss_scale s;
	nn_loss_scale_init(&s, 0);
	CHECK(nn_loss_scale_value(&s) == 1.0f);
	/* bf16 and fp32 check nothing: every step applies */
	CHECK_EQ_INT(nn_loss_scale_update(&s, 1), 1);
	good_steps(&s, 3 * NN_LOSS_SCALE_INTERVAL);
	CHECK(nn_loss_scale_value(&s) == 1.0f);
	CHECK_EQ_U64(s.skipped, 0);
}

static void test_round_trip(void)
{
	char sc[NN_LOSS_SCALE_META_LEN], g[NN_LOSS_SCALE_META_LEN];
	char sk[NN_LOSS_SCALE_META_LEN];
	nn_loss_scale a, b;
	nn_loss_scale_init(&a, 1);
	CHECK_EQ_INT(nn_loss_scale_update(&a, 1), 0);
	CHECK_EQ_INT(nn_loss_scale_update(&a, 1), 0);
	good_steps(&a, 17);
	nn_loss_scale_format(&a, sc, g, sk);
	CHECK_EQ_STR(sc, "16384");
	CHECK_EQ_STR(g, "17");
	CHECK_EQ_STR(sk, "2");
	nn_loss_scale_init(&b, 1);
	CHECK_OK(nn_loss_scale_restore(&b, sc, g, sk, "ck", &err), &err);
	CHECK(same_state(&a, &b));
	/* the restored scaler goes on as the saved one would */
	good_steps(&a, NN_LOSS_SCALE_INTERVAL - 17);
	good_steps(&b, NN_LOSS_SCALE_INTERVAL - 17);
	CHECK(nn_loss_scale_value(&b) == 32768.0f);
	CHECK(same_state(&a, &b));

	/* a checkpoint without the keys (older, or another precision):
	 * the initial state stays; skipped alone restores */
	nn_loss_scale_init(&b, 1);
	CHECK_OK(nn_loss_scale_restore(&b, NULL, NULL, "5", "ck", &err), &err);
	CHECK(nn_loss_scale_value(&b) == 65536.0f);
	CHECK_EQ_U64(b.skipped, 5);
	/* a disabled scaler takes the skipped count, never a scale */
	nn_loss_scale_init(&b, 0);
	CHECK_OK(nn_loss_scale_restore(&b, "1024", "3", "2", "ck", &err), &err);
	CHECK(nn_loss_scale_value(&b) == 1.0f);
	CHECK_EQ_U64(b.skipped, 2);
	nn_loss_scale_format(&b, sc, g, sk);
	CHECK_EQ_STR(sc, "1");
	CHECK_EQ_STR(g, "0");

	/* bad values: refused with one line, the scaler unchanged */
	static const char *const bad[][3] = {
		{"3", "0", "0"},        /* not a power of two */
		{"0", "0", "0"},        /* below the floor */
		{"33554432", "0", "0"}, /* above the cap */
		{"-4", "0", "0"},
		{"1024", "2000", "0"}, /* good count at the interval */
		{"1024", "x", "0"},
		{"1024", "1", "1.5"},
		{"1024 ", "1", "1"},
		{"", "1", "1"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		nn_loss_scale_init(&b, 1);
		nn_loss_scale c = b;
		CHECK_EQ_INT(nn_loss_scale_restore(&b, bad[i][0], bad[i][1],
						   bad[i][2], "ck.safetensors",
						   &err),
			     IMS_ECORRUPT);
		CHECK(strstr(err.msg, "ck.safetensors") != NULL);
		CHECK(strchr(err.msg, '\n') == NULL);
		CHECK(same_state(&b, &c));
	}
}

int main(void)
{
	test_overflow();
	test_loss();
	test_growth();
	test_cap();
	test_disabled();
	test_round_trip();
	return TEST_EXIT();
}
