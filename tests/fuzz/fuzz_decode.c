/* fuzz_decode.c - arbitrary bytes as an image: probed, decoded at full
 * size and at a reduced DCT scale (as the loader asks for), greyscale and
 * RGB. Decoding is bounded by the codec's own pixel limit. */
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
	for (int k = 0; k < 2; k++) {
		aug_decode_opts o;
		memset(&o, 0, sizeof(o));
		o.channels = k ? AUG_CHANNELS_NATIVE : AUG_CHANNELS_RGB;
		o.min_width = k ? 8 : 0;
		o.min_height = k ? 8 : 0;
		o.apply_orientation = 1;
		aug_image img;
		memset(&img, 0, sizeof(img));
		/* the image is the caller's whether or not decoding failed */
		aug_decode(codec, data, size, &o, &img, &info, &err);
		aug_image_release(&img);
	}
	return 0;
}
