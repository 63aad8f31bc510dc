/*
 * image.c - what every part of augment/ shares about images: their memory
 * (aug_image_alloc/release), the size limits every decoder checks, and the
 * upright size for an EXIF orientation.
 *
 * It calls nothing else in augment/, so codec.c, jpeg.c, png.c and
 * resize.c all sit above it and the call graph within augment/ stays
 * acyclic: codec.c -> jpeg.c, png.c, resize.c -> image.c.
 */
#include <stdlib.h>
#include <string.h>

#include "augment/augment_internal.h"

void aug_image_release(aug_image *img)
{
	if (!img)
		return;
	free(img->pixels);
	memset(img, 0, sizeof(*img));
}

int aug_image_alloc(aug_image *img, int width, int height, int channels,
		    ims_error *err)
{
	RETURN_IF(!img, err, IMS_EINVAL, "cannot allocate image: no image");
	RETURN_IF(width < 1 || height < 1 || channels < 1 || channels > 4, err,
		  IMS_EINVAL, "cannot allocate image: bad shape %dx%dx%d", width,
		  height, channels);
	size_t stride = (size_t)width * (size_t)channels;
	RETURN_IF((size_t)height > SIZE_MAX / stride, err, IMS_ELIMIT,
		  "cannot allocate image: %dx%dx%d overflows", width, height,
		  channels);
	size_t need = stride * (size_t)height;
	if (need > img->capacity || !img->pixels) {
		/* free + malloc, not realloc: the old contents are not kept,
		 * so copying them would be wasted work. */
		free(img->pixels);
		img->pixels = malloc(need);
		if (!img->pixels) {
			img->capacity = 0;
			img->width = img->height = img->channels = 0;
			img->stride = 0;
			return ims_fail(err, IMS_ENOMEM,
					"cannot allocate image: %zu bytes", need);
		}
		img->capacity = need;
	}
	img->width = width;
	img->height = height;
	img->channels = channels;
	img->stride = stride;
	return 0;
}

int aug_check_dims(long long w, long long h, const char *fmt_name,
		   ims_error *err)
{
	RETURN_IF(w <= 0 || h <= 0, err, IMS_ECORRUPT,
		  "cannot read %s: image size %lldx%lld", fmt_name, w, h);
	RETURN_IF(w > AUG_MAX_SIDE || h > AUG_MAX_SIDE ||
			  (unsigned long long)w * (unsigned long long)h >
				  AUG_MAX_PIXELS,
		  err, IMS_ELIMIT,
		  "%s image too large: %lldx%lld (limits: %d pixels a side, %u "
		  "pixels in all)", fmt_name, w, h, AUG_MAX_SIDE, AUG_MAX_PIXELS);
	return 0;
}

void aug_info_set_upright(aug_image_info *info)
{
	int swap = info->orientation >= 5 && info->orientation <= 8;
	info->upright_width = swap ? info->height : info->width;
	info->upright_height = swap ? info->width : info->height;
}
