/*
 * bench.c - the loader's measuring loop (aug_bench_run), shared by
 * `imshard bench-load` and the language bindings, and the conversion of a
 * loader sample back to 8-bit RGB for looking at it.
 *
 * The clock excludes what on_batch does (dumping samples, a binding's
 * bookkeeping) so the figure is the loader's alone.
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "augment.h"

void aug_bench_opts_init(aug_bench_opts *o)
{
	memset(o, 0, sizeof(*o));
	aug_loader_opts_init(&o->loader, 1);
	o->seconds = 10.0;
}

int aug_bench_run(const aug_bench_opts *o, aug_bench_result *r, ims_error *err)
{
	memset(r, 0, sizeof(*r));
	RETURN_IF(!o, err, IMS_EINVAL, "cannot measure the loader: no options");
	RETURN_IF(!(o->seconds >= 0) || o->epochs < 0, err, IMS_EINVAL,
		  "cannot measure the loader: negative time or epoch limit");
	RETURN_IF(o->seconds == 0 && o->epochs == 0, err, IMS_EINVAL,
		  "cannot measure the loader: no time limit needs an epoch limit");
	aug_loader *l = NULL;
	FORWARD_IF_ERR(aug_loader_open(&o->loader, &l, err));
	r->batches_per_epoch = aug_loader_batches_per_epoch(l);
	aug_loader_share(l, &r->records_per_rank, &r->padded, &r->dropped);
	r->threads = o->loader.threads > 0 ? o->loader.threads : omp_get_num_procs();
	uint64_t total = o->epochs ? r->batches_per_epoch * (uint64_t)o->epochs : 0;

	int rc = 0, stop = 0;
	double outside = 0; /* time spent in on_batch */
	double t0 = ims_now();
	for (uint64_t e = 0; !stop; e++) {
		GOTO_IF_ERR(out, rc, aug_loader_start_epoch(l, e, err));
		uint64_t in_epoch = 0;
		for (;;) {
			aug_batch b;
			/* in slices when something may stop the run: a stop met
			 * while a slow batch is made ends the run now */
			double slice = o->cancel || o->waiting ? AUG_BENCH_WAIT_SLICE : -1.0;
			int got = 2;
			while (!(o->cancel && *o->cancel) &&
			       (got = aug_loader_next_timed(l, &b, slice, err)) == 2)
				if (o->waiting)
					o->waiting(o->ctx);
			if (got == 2) {
				r->interrupted = 1;
				stop = 1;
				break;
			}
			if (got < 0) {
				rc = got;
				goto out;
			}
			if (got == 1)
				break;
			r->images += (uint64_t)b.count;
			r->batches++;
			in_epoch++;
			if (o->on_batch) {
				double c0 = ims_now();
				int cb = o->on_batch(o->ctx, &b, err);
				outside += ims_now() - c0;
				if (cb < 0) {
					rc = cb;
					goto out;
				}
			}
			if (o->progress)
				o->progress(o->ctx, r->batches, total);
			if (o->cancel && *o->cancel) {
				r->interrupted = 1;
				stop = 1;
				break;
			}
			if (o->seconds > 0 && ims_now() - t0 - outside >= o->seconds) {
				stop = 1;
				break;
			}
		}
		if (stop)
			break;
		r->epochs_done++;
		if ((o->epochs && r->epochs_done >= (uint64_t)o->epochs) || in_epoch == 0)
			break;
	}
out:
	r->seconds = ims_now() - t0 - outside;
	aug_loader_get_stats(l, &r->stats);
	aug_loader_close(l);
	r->images_per_s = r->seconds > 0 ? (double)r->images / r->seconds : 0;
	r->stall_fraction = r->seconds > 0 ? r->stats.wait_seconds / r->seconds : 0;
	r->epochs = r->batches_per_epoch ? (double)r->batches / (double)r->batches_per_epoch : 0;
	return rc;
}

/* Element i of a sample in o's dtype, as a float in pixel units (the
 * normalisation undone; u8 was never normalised). */
static float sample_value(const uint8_t *s, size_t i, const aug_transform_opts *o,
			  int c)
{
	float v;
	switch (o->dtype) {
	case AUG_DTYPE_U8:
		return s[i];
	case AUG_DTYPE_F32:
		memcpy(&v, s + 4 * i, 4);
		break;
	case AUG_DTYPE_F16: {
		uint16_t h;
		memcpy(&h, s + 2 * i, 2);
		v = ims_f16_to_f32(h);
		break;
	}
	default: { /* BF16 */
		uint16_t h;
		memcpy(&h, s + 2 * i, 2);
		v = ims_bf16_to_f32(h);
		break;
	}
	}
	return v * o->std[c] + o->mean[c];
}

int aug_sample_to_rgb8(const void *sample, const aug_transform_opts *o,
		       aug_image *out, ims_error *err)
{
	RETURN_IF(!sample || !o || !out || aug_sample_bytes(o) == 0, err, IMS_EINVAL,
		  "cannot convert a sample: bad arguments or options");
	int w = o->out_w, h = o->out_h;
	FORWARD_IF_ERR(aug_image_alloc(out, w, h, 3, err));
	const uint8_t *s = sample;
	size_t plane = (size_t)w * (size_t)h;
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int c = 0; c < 3; c++) {
				size_t px = (size_t)y * (size_t)w + (size_t)x;
				size_t i = o->layout == AUG_LAYOUT_NCHW ? (size_t)c * plane + px :
									 px * 3 + (size_t)c;
				float v = sample_value(s, i, o, c);
				long q = isnan(v) ? 0 : lrintf(fminf(fmaxf(v, 0.0f), 255.0f));
				out->pixels[(size_t)y * out->stride + (size_t)x * 3 + (size_t)c] =
					(uint8_t)q;
			}
	return 0;
}
