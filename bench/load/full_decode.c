/*
 * full_decode.c - the naive floor for `imshard bench-load`: what one thread
 * costs to decode every JPEG of a list at full size, with nothing else.
 *
 * Per file: read it into a reused buffer, tjDecompressHeader3, tjDecompress2
 * at full size (no DCT scaling, no region of interest) to packed RGB into a
 * reused buffer. No crop, no resize, no flip, no float conversion, no
 * shuffling, no LMDB: a loader that does all of those and still matches
 * this rate per thread has paid for its augmentation with the work that
 * partial and scaled decoding skip.
 *
 *     full_decode LIST.lst ROOT [--limit N] [--repeat K]
 *
 * LIST is an im2rec list (index TAB label [TAB label...] TAB relpath, paths
 * relative to ROOT). --limit N decodes the first N entries only; --repeat K
 * goes over the list K times (the timed figure covers all passes).
 * Prints one line: images=N input_bytes=B megapixels=M seconds=S
 * images_per_s=R. Exit status: 0, 1 when a file could not be read or
 * decoded (it is named; the others still run), 2 on bad usage.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

#include "bench_util.h"

static void usage(void)
{
	fprintf(stderr, "usage: full_decode LIST.lst ROOT [--limit N] [--repeat K]\n");
}

int main(int argc, char **argv)
{
	const char *list = NULL, *root = NULL;
	long limit = 0, repeat = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--limit") && i + 1 < argc)
			limit = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
			repeat = strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage();
			return 0;
		} else if (argv[i][0] == '-') {
			usage();
			return 2;
		} else if (!list)
			list = argv[i];
		else if (!root)
			root = argv[i];
		else {
			usage();
			return 2;
		}
	}
	if (!list || !root || limit < 0 || repeat < 1) {
		usage();
		return 2;
	}
	long n = 0;
	char **paths = read_list("full_decode", list, limit, &n);
	if (!paths && n == 0)
		return 1;

	tjhandle dec = tjInitDecompress();
	if (!dec) {
		fprintf(stderr, "full_decode: tjInitDecompress: %s\n", tjGetErrorStr2(NULL));
		return 1;
	}
	unsigned char *in = NULL, *pix = NULL;
	size_t in_cap = 0, pix_cap = 0;
	uint64_t in_bytes = 0, pixels = 0;
	long images = 0, errors = 0;
	char path[4096];

	double t0 = now_s();
	for (long r = 0; r < repeat; r++) {
		for (long i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/%s", root, paths[i]);
			size_t size;
			if (read_file(path, &in, &in_cap, &size) != 0) {
				fprintf(stderr, "full_decode: cannot read '%s': %s\n", path,
					strerror(errno));
				errors++;
				continue;
			}
			int w, h, subsamp, cs;
			if (tjDecompressHeader3(dec, in, size, &w, &h, &subsamp, &cs) != 0 ||
			    grow(&pix, &pix_cap, (size_t)w * h * 3) != 0 ||
			    tjDecompress2(dec, in, size, pix, w, 0, h, TJPF_RGB, 0) != 0) {
				fprintf(stderr, "full_decode: cannot decode '%s': %s\n", path,
					tjGetErrorStr2(dec));
				errors++;
				continue;
			}
			in_bytes += size;
			pixels += (uint64_t)w * h;
			images++;
		}
	}
	double secs = now_s() - t0;

	printf("images=%ld input_bytes=%llu megapixels=%.3f seconds=%.4f images_per_s=%.2f\n",
	       images, (unsigned long long)in_bytes, (double)pixels / 1e6, secs,
	       secs > 0 ? (double)images / secs : 0.0);
	tjDestroy(dec);
	free(in);
	free(pix);
	for (long i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return errors ? 1 : 0;
}
