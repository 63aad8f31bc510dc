/* aug_test_util.h - helpers shared by the augment tests: generating and
 * loading the image fixtures, and comparing decodes with pattern.h. */
#ifndef AUG_TEST_UTIL_H
#define AUG_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "augment/augment.h"
#include "fixtures/pattern.h"
#include "test_tmp.h"

/* Runs $IMS_FIXTURES (the make_images binary) into a fresh folder under
 * $IMS_TMP; returns that folder. Exits 1 when it cannot. */
static inline const char *fixtures_dir(const char *tag)
{
	static char dir[4096];
	const char *gen = getenv("IMS_FIXTURES");
	if (!gen) {
		fprintf(stderr, "IMS_FIXTURES is not set (run through ctest)\n");
		exit(1);
	}
	test_tmpdir(dir, sizeof(dir), tag);
	char cmd[8400];
	snprintf(cmd, sizeof(cmd), "'%s' '%s'", gen, dir);
	if (system(cmd) != 0) {
		fprintf(stderr, "fixture generator failed: %s\n", cmd);
		exit(1);
	}
	return dir;
}

/* Whole file, malloc'd (at least 1 byte so empty files give non-NULL). */
static inline uint8_t *load(const char *dir, const char *name, size_t *len)
{
	char path[4400];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open fixture %s\n", path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc((size_t)n + 1);
	if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "cannot read fixture %s\n", path);
		exit(1);
	}
	fclose(f);
	*len = (size_t)n;
	return p;
}

/* Expected value of channel c of pixel (x, y) for a decode of the pattern
 * with `channels` channels: grey decodes hold the luma. */
static inline int pattern_at(int x, int y, int w, int h, int channels, int c)
{
	uint8_t rgb[3];
	fx_pattern(x, y, w, h, rgb);
	return channels == 1 ? fx_luma(rgb) : rgb[c];
}

/* Mean absolute difference between img and the pattern of img's size. */
static inline double pattern_mae(const aug_image *img)
{
	double sum = 0;
	for (int y = 0; y < img->height; y++)
		for (int x = 0; x < img->width; x++)
			for (int c = 0; c < img->channels; c++) {
				int v = img->pixels[(size_t)y * img->stride +
						    (size_t)x * img->channels + c];
				sum += abs(v - pattern_at(x, y, img->width, img->height,
							  img->channels < 3 ? 1 : 3, c));
			}
	return sum / ((double)img->width * img->height * img->channels);
}

static inline double image_mae(const aug_image *a, const aug_image *b)
{
	if (a->width != b->width || a->height != b->height ||
	    a->channels != b->channels)
		return 1e9;
	double sum = 0;
	for (int y = 0; y < a->height; y++)
		for (size_t i = 0; i < (size_t)a->width * a->channels; i++)
			sum += abs(a->pixels[(size_t)y * a->stride + i] -
				   b->pixels[(size_t)y * b->stride + i]);
	return sum / ((double)a->width * a->height * a->channels);
}

static inline int image_equal(const aug_image *a, const aug_image *b)
{
	if (a->width != b->width || a->height != b->height ||
	    a->channels != b->channels)
		return 0;
	for (int y = 0; y < a->height; y++)
		if (memcmp(a->pixels + (size_t)y * a->stride,
			   b->pixels + (size_t)y * b->stride,
			   (size_t)a->width * a->channels) != 0)
			return 0;
	return 1;
}

static inline uint8_t *px(const aug_image *img, int x, int y)
{
	return img->pixels + (size_t)y * img->stride + (size_t)x * img->channels;
}

/* Decodes a fixture with the given options; returns the status. */
static inline int decode_file(aug_codec *c, const char *dir, const char *name,
			      const aug_decode_opts *o, aug_image *out,
			      aug_image_info *info, ims_error *err)
{
	size_t len;
	uint8_t *buf = load(dir, name, &len);
	int rc = aug_decode(c, buf, len, o, out, info, err);
	free(buf);
	return rc;
}

#endif
