/*
 * fuzz_imagenet_util.h - the body both ImageNet harnesses share: a root
 * with two train classes and two val images (empty files: the adapter
 * never reads pixels) and two label files, of which the input's first byte
 * picks the one that gets the rest of the input; the other gets a valid
 * one. The harnesses differ only in the layout they describe.
 */
#ifndef IMSHARD_FUZZ_IMAGENET_UTIL_H
#define IMSHARD_FUZZ_IMAGENET_UTIL_H

#include <sys/stat.h>

#include "datasets/datasets.h"
#include "fuzz_util.h"

typedef struct fuzz_imagenet_layout {
	const char *const *dirs;  /* made in order, NULL-terminated */
	const char *const *files; /* empty image files, NULL-terminated */
	const char *label_files[2]; /* relative paths */
	const char *valid[2];     /* a valid content for each */
} fuzz_imagenet_layout;

static inline int fuzz_imagenet_run(const fuzz_imagenet_layout *l,
				    const uint8_t *data, size_t size)
{
	static int made;
	char path[700];
	if (!made) {
		for (const char *const *d = l->dirs; *d; d++) {
			snprintf(path, sizeof(path), "%s/%s", fuzz_dir(), *d);
			mkdir(path, 0755);
		}
		for (const char *const *f = l->files; *f; f++)
			fuzz_file(*f, (const uint8_t *)"", 0, path, sizeof(path));
		made = 1;
	}
	if (size < 1)
		return 0;
	const int which = data[0] & 1;
	for (int k = 0; k < 2; k++) {
		const int fuzzed = k == which;
		fuzz_file(l->label_files[k],
			  fuzzed ? data + 1 : (const uint8_t *)l->valid[k],
			  fuzzed ? size - 1 : strlen(l->valid[k]), path, sizeof(path));
	}
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	memset(&d, 0, sizeof(d));
	ims_error err;
	ds_adapter_imagenet.load(fuzz_dir(), &o, &d, &err);
	ds_dataset_release(&d);
	return 0;
}

#endif
