/* transform_test.h - the synthetic images test_transform.c and
 * test_transform_warp.c both draw their sources from. */
#ifndef IMSHARD_TRANSFORM_TEST_H
#define IMSHARD_TRANSFORM_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "augment/augment.h"
#include "test.h"

/* Asymmetric test pattern, distinct per channel. */
static inline uint8_t pattern(int x, int y, int c)
{
	return (uint8_t)((x * 7 + y * 13 + c * 50 + ((x * y) >> 3)) & 255);
}

static inline void make_image(aug_image *img, int w, int h, int ch,
			      uint8_t (*fn)(int, int, int))
{
	ims_error err;
	CHECK_OK(aug_image_alloc(img, w, h, ch, &err), &err);
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int c = 0; c < ch; c++)
				img->pixels[(size_t)y * img->stride +
					    (size_t)x * ch + c] = fn(x, y, c);
}

#endif
