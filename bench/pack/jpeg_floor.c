/*
 * jpeg_floor.c - the libjpeg-turbo floor for `imshard pack --resize 256
 * --quality 95`: the least work that turns each JPEG of a list into a
 * 256-pixel-shorter-side JPEG, with nothing else around it.
 *
 * Per file: read it into a reused buffer, tjDecompressHeader3, decode with
 * the smallest fast DCT scaling factor (1/2, 1/4, 1/8) whose output still
 * has a shorter side of at least the target, else at full size,
 * bilinear-resize the rest of the way to exactly the target (2x2 taps;
 * after DCT scaling the remaining factor is below 2, where bilinear is the
 * cheapest honest filter; smaller images are enlarged, as pack does), and tjCompress2 at the given quality, 4:2:0,
 * into a reused buffer. No LMDB, no output file, no checksums: pack does
 * all of that on top, so pack's images/s per thread can only approach this.
 *
 * Threads: --threads T splits the list over T OpenMP threads, each with its
 * own TurboJPEG handles and buffers (TurboJPEG handles are not thread-safe).
 *
 *     jpeg_floor LIST.lst ROOT [--threads T] [--resize SHORTER]
 *         [--quality Q] [--limit N]
 *
 * Prints one line of `key=value` figures to stdout (images, input_bytes,
 * output_bytes, seconds, images_per_s, mb_per_s); MB are 10^6 bytes of
 * input. Exit status: 0, 1 when a file could not be read or decoded (it is
 * counted and named, the others still run), 2 on bad usage.
 */
#include <errno.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

#include "bench_util.h"

struct floor_opts {
	const char *list;
	const char *root;
	int threads;
	int shorter;
	int quality;
	long limit;
};

/* One thread's handles and buffers, reused for every file it handles. */
struct floor_worker {
	tjhandle dec, enc;
	unsigned char *in, *pix, *small, *out;
	unsigned char *row, *xtab; /* resize scratch: uint16 row, int tables */
	size_t in_cap, pix_cap, small_cap, out_cap, row_cap, xtab_cap;
	uint64_t in_bytes, out_bytes;
	long images, errors;
};

/*
 * Bilinear resize of packed RGB, src (sw x sh) to dst (dw x dh), sampling at
 * pixel centres with 8-bit weights. Downscale factors here are < 2 (DCT
 * scaling did the rest), so 2x2 taps see every source pixel. Separable:
 * blend the two source rows into row (uint16, vectorizes), then blend
 * columns through the precomputed xoff/xw tables (dw entries each).
 */
static void resize_bilinear(const unsigned char *src, int sw, int sh,
			    unsigned char *dst, int dw, int dh, uint16_t *row,
			    int *xoff, int *xw)
{
	const int64_t fx = ((int64_t)sw << 16) / dw;
	const int64_t fy = ((int64_t)sh << 16) / dh;
	for (int x = 0; x < dw; x++) {
		int64_t sx = (int64_t)x * fx + fx / 2 - 32768;
		if (sx < 0)
			sx = 0;
		int x0 = (int)(sx >> 16);
		if (x0 > sw - 2)
			x0 = sw - 2 > 0 ? sw - 2 : 0;
		xoff[x] = x0 * 3;
		xw[x] = sw > 1 ? (int)((sx - ((int64_t)x0 << 16)) >> 8) : 0;
		if (xw[x] > 256)
			xw[x] = 256;
	}
	const size_t n = (size_t)sw * 3;
	for (int y = 0; y < dh; y++) {
		int64_t sy = (int64_t)y * fy + fy / 2 - 32768;
		if (sy < 0)
			sy = 0;
		int y0 = (int)(sy >> 16);
		int wy = (int)((sy >> 8) & 255);
		int y1 = y0 + 1 < sh ? y0 + 1 : sh - 1;
		const unsigned char *r0 = src + (size_t)y0 * n;
		const unsigned char *r1 = src + (size_t)y1 * n;
		for (size_t i = 0; i < n; i++)
			row[i] = (uint16_t)(r0[i] * (256 - wy) + r1[i] * wy);
		unsigned char *d = dst + (size_t)y * dw * 3;
		for (int x = 0; x < dw; x++) {
			const uint16_t *p = row + xoff[x];
			int w1 = xw[x], w0 = 256 - w1;
			const int step = sw > 1 ? 3 : 0;
			d[3 * x + 0] = (unsigned char)(((uint32_t)p[0] * w0 + (uint32_t)p[step + 0] * w1 + 32768) >> 16);
			d[3 * x + 1] = (unsigned char)(((uint32_t)p[1] * w0 + (uint32_t)p[step + 1] * w1 + 32768) >> 16);
			d[3 * x + 2] = (unsigned char)(((uint32_t)p[2] * w0 + (uint32_t)p[step + 2] * w1 + 32768) >> 16);
		}
	}
}

static int floor_one(const struct floor_opts *o, const char *rel,
		     struct floor_worker *w)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", o->root, rel);
	size_t size;
	if (read_file(path, &w->in, &w->in_cap, &size) != 0) {
		fprintf(stderr, "jpeg_floor: cannot read '%s': %s\n", path, strerror(errno));
		return -1;
	}
	int width, height, subsamp, colorspace;
	if (tjDecompressHeader3(w->dec, w->in, size, &width, &height, &subsamp,
				&colorspace) != 0) {
		fprintf(stderr, "jpeg_floor: cannot decode '%s': %s\n", path,
			tjGetErrorStr2(w->dec));
		return -1;
	}
	int target = o->shorter; /* enlarges smaller images, as pack --resize does */

	/* Smallest scaling factor keeping the shorter side >= target, among
	 * the fast ones: libjpeg-turbo 2.1's 3/8..7/8 factors decode slower
	 * than full size (cachegrind: 3/4 costs 1.47x, 7/8 1.73x a full
	 * decode), so a floor that used them would not be a floor. */
	static const tjscalingfactor sf[] = {{1, 2}, {1, 4}, {1, 8}};
	const int n_sf = (int)(sizeof(sf) / sizeof(sf[0]));
	int sw = width, sh = height;
	for (int i = 0; i < n_sf; i++) {
		int cw = TJSCALED(width, sf[i]), ch = TJSCALED(height, sf[i]);
		int cs = cw < ch ? cw : ch;
		if (cs >= target && (size_t)cw * ch < (size_t)sw * sh) {
			sw = cw;
			sh = ch;
		}
	}
	if (grow(&w->pix, &w->pix_cap, (size_t)sw * sh * 3) != 0)
		return -1;
	/* A warning (damaged but usable data) still yields an image. */
	if (tjDecompress2(w->dec, w->in, size, w->pix, sw, 0, sh, TJPF_RGB, 0) != 0 &&
	    tjGetErrorCode(w->dec) != TJERR_WARNING) {
		fprintf(stderr, "jpeg_floor: cannot decode '%s': %s\n", path,
			tjGetErrorStr2(w->dec));
		return -1;
	}

	const unsigned char *img = w->pix;
	int dw = sw, dh = sh;
	int ss = sw < sh ? sw : sh;
	if (ss != target) {
		if (sw < sh) {
			dw = target;
			dh = (int)(((int64_t)sh * target + ss / 2) / ss);
		} else {
			dh = target;
			dw = (int)(((int64_t)sw * target + ss / 2) / ss);
		}
		if (grow(&w->small, &w->small_cap, (size_t)dw * dh * 3) != 0 ||
		    grow(&w->row, &w->row_cap, (size_t)sw * 3 * sizeof(uint16_t)) != 0 ||
		    grow(&w->xtab, &w->xtab_cap, (size_t)dw * 2 * sizeof(int)) != 0)
			return -1;
		int *xoff = (int *)(void *)w->xtab;
		resize_bilinear(w->pix, sw, sh, w->small, dw, dh,
				(uint16_t *)(void *)w->row, xoff, xoff + dw);
		img = w->small;
	}

	size_t need = tjBufSize(dw, dh, TJSAMP_420);
	if (need > w->out_cap) {
		tjFree(w->out);
		w->out = tjAlloc((int)need);
		w->out_cap = w->out ? need : 0;
		if (!w->out)
			return -1;
	}
	unsigned long out_size = w->out_cap;
	if (tjCompress2(w->enc, img, dw, 0, dh, TJPF_RGB, &w->out, &out_size,
			TJSAMP_420, o->quality, TJFLAG_NOREALLOC) != 0) {
		fprintf(stderr, "jpeg_floor: cannot encode '%s': %s\n", path,
			tjGetErrorStr2(w->enc));
		return -1;
	}
	w->in_bytes += size;
	w->out_bytes += out_size;
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: jpeg_floor LIST.lst ROOT [--threads T] [--resize SHORTER]"
			" [--quality Q] [--limit N]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct floor_opts o = {NULL, NULL, 1, 256, 95, 0};
	int n_pos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--threads") && v)
			o.threads = atoi(argv[++i]);
		else if (!strcmp(a, "--resize") && v)
			o.shorter = atoi(argv[++i]);
		else if (!strcmp(a, "--quality") && v)
			o.quality = atoi(argv[++i]);
		else if (!strcmp(a, "--limit") && v)
			o.limit = atol(argv[++i]);
		else if (a[0] == '-')
			return usage();
		else if (n_pos == 0 && ++n_pos)
			o.list = a;
		else if (n_pos == 1 && ++n_pos)
			o.root = a;
		else
			return usage();
	}
	if (n_pos != 2 || o.threads < 1 || o.shorter < 1 || o.quality < 1 ||
	    o.quality > 100)
		return usage();

	long n = -1;
	char **paths = read_list("jpeg_floor", o.list, o.limit, &n);
	if (n < 0)
		return 1;
	if (n == 0) {
		fprintf(stderr, "jpeg_floor: no entries in '%s'\n", o.list);
		return 1;
	}

	struct floor_worker *workers = calloc((size_t)o.threads, sizeof(*workers));
	if (!workers)
		return 1;
	for (int t = 0; t < o.threads; t++) {
		workers[t].dec = tjInitDecompress();
		workers[t].enc = tjInitCompress();
		if (!workers[t].dec || !workers[t].enc) {
			fprintf(stderr, "jpeg_floor: cannot create TurboJPEG handles\n");
			return 1;
		}
	}

	double t0 = now_s();
#pragma omp parallel for num_threads(o.threads) schedule(dynamic, 4)
	for (long i = 0; i < n; i++) {
		struct floor_worker *w = &workers[omp_get_thread_num()];
		if (floor_one(&o, paths[i], w) == 0)
			w->images++;
		else
			w->errors++;
	}
	double dt = now_s() - t0;

	uint64_t in_bytes = 0, out_bytes = 0;
	long images = 0, errors = 0;
	for (int t = 0; t < o.threads; t++) {
		struct floor_worker *w = &workers[t];
		in_bytes += w->in_bytes;
		out_bytes += w->out_bytes;
		images += w->images;
		errors += w->errors;
		tjDestroy(w->dec);
		tjDestroy(w->enc);
		free(w->in);
		free(w->pix);
		free(w->small);
		free(w->row);
		free(w->xtab);
		tjFree(w->out);
	}
	for (long i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	free(workers);

	printf("images=%ld errors=%ld threads=%d input_bytes=%llu output_bytes=%llu "
	       "seconds=%.3f images_per_s=%.1f mb_per_s=%.2f\n",
	       images, errors, o.threads, (unsigned long long)in_bytes,
	       (unsigned long long)out_bytes, dt, images / dt, in_bytes / 1e6 / dt);
	return errors ? 1 : 0;
}
