/*
 * render.c - one encoded image rendered as a sample: its plan drawn, only
 * what the plan reads decoded (at the coarsest DCT scale it allows), the
 * plan re-expressed for that region, one warp. The loader's path for
 * encoded records, and a program's for image files (`imshard predict`),
 * so both feed a network the same pixels.
 */
#include "augment/augment.h"

int aug_render(aug_codec *c, const uint8_t *buf, size_t len, int upright_w,
	       int upright_h, const aug_transform_opts *o, uint64_t seed,
	       uint64_t epoch, uint64_t index, aug_image *scratch, void *dst,
	       double times[2], ims_error *err)
{
	double t0 = times ? ims_now() : 0;
	aug_plan plan;
	FORWARD_IF_ERR(aug_sample_plan(o, upright_w, upright_h, seed, epoch, index,
				       &plan, err));
	aug_rect need = {plan.need_x0, plan.need_y0, plan.need_x1, plan.need_y1};
	aug_region got;
	aug_image_info info;
	FORWARD_IF_ERR(aug_decode_region(c, buf, len, AUG_CHANNELS_RGB, &need,
					 plan.scale, scratch, &got, &info, err));
	/* The plan was drawn for the size given (a record's header): on an
	 * image of another size it would crop the wrong part of it, or a
	 * corner, without a word. */
	RETURN_IF(info.upright_width != upright_w || info.upright_height != upright_h,
		  err, IMS_ECORRUPT,
		  "the image is %dx%d (upright), not the %dx%d its header gives",
		  info.upright_width, info.upright_height, upright_w, upright_h);
	FORWARD_IF_ERR(aug_plan_rebase(&plan, got.x0, got.y0, got.scale, got.scale,
				       err));
	double t1 = times ? ims_now() : 0;
	int rc = aug_warp(scratch, &plan, o, dst, err);
	if (times) {
		times[0] += t1 - t0;
		times[1] += ims_now() - t1;
	}
	return rc;
}
