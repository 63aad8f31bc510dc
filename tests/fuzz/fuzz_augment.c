/* fuzz_augment.c - arbitrary bytes through the loader's path for one
 * training sample: probe, draw a plan (random-resized crop, flip, zoom,
 * shift, rotation, from a seed taken from the input), decode only the
 * region the plan needs at its DCT scale, rebase the plan on that region
 * and warp it into a 48x40 float sample; once NCHW float, once NHWC
 * uint8. */
#include <string.h>

#include "augment/augment.h"

static aug_codec *codec;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ims_error err;
	if (!codec && aug_codec_create(&codec, &err))
		__builtin_trap();
	aug_image_info info;
	if (aug_probe(codec, data, size, &info, &err))
		return 0;
	uint64_t seed = 0;
	memcpy(&seed, data, size < 8 ? size : 8);
	for (int k = 0; k < 2; k++) {
		aug_transform_opts o;
		aug_transform_opts_init(&o, 1);
		o.out_w = 48;
		o.out_h = 40;
		if (aug_transform_parse("flip,zoom=0.2,shift=0.2,rotate=30", &o, &err))
			__builtin_trap();
		o.layout = k ? AUG_LAYOUT_NHWC : AUG_LAYOUT_NCHW;
		o.dtype = k ? AUG_DTYPE_U8 : AUG_DTYPE_F32;
		aug_plan plan;
		if (aug_sample_plan(&o, info.upright_width, info.upright_height, seed,
				    (uint64_t)k, 7, &plan, &err))
			continue;
		aug_rect need = {plan.need_x0, plan.need_y0, plan.need_x1, plan.need_y1};
		aug_region got;
		aug_image img;
		memset(&img, 0, sizeof(img));
		if (aug_decode_region(codec, data, size, AUG_CHANNELS_RGB, &need,
				      plan.scale, &img, &got, NULL, &err) == 0 &&
		    aug_plan_rebase(&plan, got.x0, got.y0, got.scale, got.scale,
				    &err) == 0) {
			static float out[48 * 40 * 3];
			aug_warp(&img, &plan, &o, out, &err);
		}
		aug_image_release(&img);
	}
	return 0;
}
