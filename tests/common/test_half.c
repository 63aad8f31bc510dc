/*
 * test_half.c - half-precision conversions (common.h): every binary16 and
 * bfloat16 value to float exactly; float to both, rounded to nearest even
 * as torch's .half() and .bfloat16() round.
 */
#include <math.h>
#include <string.h>

#include "common/common.h"
#include "test.h"

static int bits_eq(float a, float b)
{
	return memcmp(&a, &b, sizeof(float)) == 0;
}

static void test_to_f32(void)
{
	/* binary16 */
	CHECK(bits_eq(ims_f16_to_f32(0x3c00), 1.0f));
	CHECK(bits_eq(ims_f16_to_f32(0xc100), -2.5f));
	CHECK(bits_eq(ims_f16_to_f32(0x7bff), 65504.0f));
	CHECK(bits_eq(ims_f16_to_f32(0x3555), 0x1.554p-2f)); /* 0.333251953125 */
	CHECK(bits_eq(ims_f16_to_f32(0x0400), 0x1p-14f));    /* smallest normal */
	CHECK(bits_eq(ims_f16_to_f32(0x0001), 0x1p-24f));    /* smallest subnormal */
	CHECK(bits_eq(ims_f16_to_f32(0x03ff), 1023 * 0x1p-24f));
	CHECK(bits_eq(ims_f16_to_f32(0x8001), -0x1p-24f));
	CHECK(bits_eq(ims_f16_to_f32(0x0000), 0.0f));
	CHECK(bits_eq(ims_f16_to_f32(0x8000), -0.0f));
	CHECK(bits_eq(ims_f16_to_f32(0x7c00), INFINITY));
	CHECK(bits_eq(ims_f16_to_f32(0xfc00), -INFINITY));
	CHECK(isnan(ims_f16_to_f32(0x7e00)));
	CHECK(isnan(ims_f16_to_f32(0xfc01)));
	/* Every finite binary16 value converts exactly: compare with ldexp. */
	int bad = 0;
	for (uint32_t h = 0; h < 0x10000; h++) {
		uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
		if (e == 31)
			continue;
		double v = e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);
		if (h & 0x8000)
			v = -v;
		if (!bits_eq(ims_f16_to_f32((uint16_t)h), (float)v))
			bad++;
	}
	CHECK_EQ_INT(bad, 0);

	/* bfloat16 */
	CHECK(bits_eq(ims_bf16_to_f32(0x3f80), 1.0f));
	CHECK(bits_eq(ims_bf16_to_f32(0xc020), -2.5f));
	CHECK(bits_eq(ims_bf16_to_f32(0x477f), 65280.0f));
	CHECK(bits_eq(ims_bf16_to_f32(0x7f7f), 0x1.fep127f)); /* largest */
	CHECK(bits_eq(ims_bf16_to_f32(0x0001), 0x1p-133f));   /* smallest subnormal */
	CHECK(bits_eq(ims_bf16_to_f32(0x8000), -0.0f));
	CHECK(bits_eq(ims_bf16_to_f32(0x7f80), INFINITY));
	CHECK(bits_eq(ims_bf16_to_f32(0xff80), -INFINITY));
	CHECK(isnan(ims_bf16_to_f32(0x7fc0)));
}

static float f32_of(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static void test_from_f32(void)
{
	static const struct {
		float v;
		uint16_t f16, bf16;
	} cases[] = {
		/* expected bits from Python's struct 'e' (round half even) */
		{1.0f, 0x3c00, 0x3f80},
		{-2.5f, 0xc100, 0xc020},
		{0.0f, 0x0000, 0x0000},
		{-0.0f, 0x8000, 0x8000},
		{255.0f, 0x5bf8, 0x437f},
		{255000.0f, 0x7c00, 0x4879},         /* f16 overflow */
		{1e6f, 0x7c00, 0x4974},
		{0x1p-16f, 0x0100, 0x3780},           /* f16 subnormal */
		{1.00048828125f, 0x3c00, 0x3f80},     /* tie to even: down */
		{1.00146484375f, 0x3c02, 0x3f80},     /* tie to even: up */
		{1.00390625f, 0x3c04, 0x3f80},        /* bf16 tie: down */
		{1.01171875f, 0x3c0c, 0x3f82},        /* bf16 tie: up */
		{65519.0f, 0x7bff, 0x4780},           /* largest below inf */
		{65520.0f, 0x7c00, 0x4780},           /* tie rounds to inf */
		{0x1p-25f, 0x0000, 0x3300},           /* tie to 0 */
		{0x1p-24f, 0x0001, 0x3380},           /* smallest subnormal */
		{INFINITY, 0x7c00, 0x7f80},
		{-INFINITY, 0xfc00, 0xff80},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_EQ_INT(ims_f32_to_f16(cases[i].v), cases[i].f16);
		CHECK_EQ_INT(ims_f32_to_bf16(cases[i].v), cases[i].bf16);
	}
	/* NaN stays NaN (quiet), whatever its payload */
	uint16_t h = ims_f32_to_f16(f32_of(0x7f800001u));
	CHECK((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0);
	uint16_t b = ims_f32_to_bf16(f32_of(0xff800001u));
	CHECK((b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0 && (b & 0x8000));
	/* every half value survives a round trip through float */
	int bad = 0;
	for (uint32_t v = 0; v < 0x10000; v++) {
		if ((v & 0x7c00) == 0x7c00 && (v & 0x3ff))
			continue; /* NaN: quieted, payload may change */
		bad += ims_f32_to_f16(ims_f16_to_f32((uint16_t)v)) != v;
		if (!((v & 0x7f80) == 0x7f80 && (v & 0x7f)))
			bad += ims_f32_to_bf16(ims_bf16_to_f32((uint16_t)v)) != v;
	}
	CHECK_EQ_INT(bad, 0);
}

int main(void)
{
	test_to_f32();
	test_from_f32();
	return TEST_EXIT();
}
