/*
 * rng.c - xoshiro256** seeded through splitmix64: small, fast, and the
 * same on every platform, which matters because partitions, splits and
 * augmentation must be reproducible from (seed, epoch, index) alone.
 */
#include "common.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint64_t ims_hash64(uint64_t a, uint64_t b)
{
	uint64_t x = a;
	uint64_t h = splitmix64(&x);
	x = h ^ b;
	return splitmix64(&x);
}

void ims_rng_seed(ims_rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = ims_hash64(seed, stream);
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t ims_rng_next(ims_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

uint64_t ims_rng_below(ims_rng *r, uint64_t n)
{
	/* Reject the top partial bucket so every value is equally likely. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t v;
	do
		v = ims_rng_next(r);
	while (v >= limit);
	return v % n;
}

double ims_rng_uniform(ims_rng *r)
{
	return (double)(ims_rng_next(r) >> 11) * 0x1.0p-53;
}
