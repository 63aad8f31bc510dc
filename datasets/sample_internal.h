/*
 * sample_internal.h - what sample.c (drawing) and sample_write.c (class
 * folders) share: the class kinds and their table.
 */
#ifndef IMSHARD_SAMPLE_INTERNAL_H
#define IMSHARD_SAMPLE_INTERNAL_H

#include "datasets.h"

/* Class kinds. The table below is in byte-wise sorted name order, which is
 * the label order of ds_scan_folder; never reorder or insert in the middle
 * (append only, keeping the names sorted) or earlier datasets change. */
enum kind {
	K_CHECKERBOARD,
	K_CIRCLE,
	K_CRESCENT,
	K_CROSS,
	K_DIAGONAL,
	K_DIAMOND,
	K_DOTS,
	K_FRAME,
	K_GRID,
	K_HORIZONTAL,
	K_RING,
	K_SQUARE,
	K_STAR,
	K_TARGET,
	K_TRIANGLE,
	K_VERTICAL,
	K_ZIGZAG,
	K_COUNT
};

struct ds_sample_kind {
	const char *name;
	const char *description;
};
extern const struct ds_sample_kind ds_sample_kinds[K_COUNT];

/* PNG files (with or without alpha) among the file kinds. */
int ds_sample_is_png(ds_sample_file_kind kind);

#endif
