/*
 * half.h - IEEE binary16 (fp16) and bfloat16 (bf16) conversions, exact
 * in the widening direction and rounded to nearest even in the narrowing
 * one, as the CUDA intrinsics __float2half_rn and __float2bfloat16_rn
 * round: the CPU's 16-bit training (train/layers/mixed.c) is the
 * reference the device's is held to, so both must round alike.
 *
 * Header only, pure functions; any thread.
 */
#ifndef IMSHARD_HALF_H
#define IMSHARD_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ims_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float ims_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* binary32 -> bfloat16, round to nearest even; overflow rounds to
 * infinity; NaN stays NaN (quiet). */
static inline uint16_t ims_f32_to_bf16(float f)
{
	uint32_t x = ims_f32_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);
	x += 0x7fffu + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* bfloat16 -> binary32, exact: the high half of a float. */
static inline float ims_bf16_to_f32(uint16_t b)
{
	return ims_bits_f32((uint32_t)b << 16);
}

/*
 * binary32 -> binary16, round to nearest even; beyond 65504 (after
 * rounding) infinity, subnormals kept, NaN stays NaN (quiet). Normal
 * results take a branch-free rounding: the bias 0xfff plus the odd bit of
 * the kept mantissa gives ties to even, and a carry out of the mantissa
 * bumps the exponent, up to infinity. Subnormal results align the
 * mantissa by a float add of 0.5, which rounds to nearest even in the
 * default rounding mode.
 */
static inline uint16_t ims_f32_to_f16(float f)
{
	uint32_t x = ims_f32_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u;
	uint32_t ax = x & 0x7fffffffu;
	uint32_t h;
	if (ax >= 0x47800000u) { /* >= 65536, inf or NaN */
		h = ax > 0x7f800000u ? 0x7e00u : 0x7c00u;
	} else if (ax < 0x38800000u) { /* below 2^-14: subnormal or zero */
		const float magic = 0.5f; /* ulp 2^-24: the f16 subnormal step */
		float a = ims_bits_f32(ax) + magic;
		h = ims_f32_bits(a) - ims_f32_bits(magic);
	} else {
		h = (ax + 0xc8000fffu + ((ax >> 13) & 1)) >> 13;
	}
	return (uint16_t)(sign | h);
}

/* binary16 -> binary32, exact (subnormals included; NaN keeps its
 * payload). */
static inline float ims_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	if (exp == 0) /* zero or subnormal: man * 2^-24, exact */
		return ims_bits_f32(ims_f32_bits((float)man * 0x1p-24f) | sign);
	if (exp == 31)
		return ims_bits_f32(sign | 0x7f800000u | (man << 13));
	return ims_bits_f32(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

#endif
