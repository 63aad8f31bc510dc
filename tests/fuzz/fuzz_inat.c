/* fuzz_inat.c - iNaturalist 2017's COCO-style annotation files: the input
 * is both train2017.json and val2017.json of a dataset root. */
#include "datasets/datasets.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[600];
	fuzz_file("train2017.json", data, size, path, sizeof(path));
	fuzz_file("val2017.json", data, size, path, sizeof(path));
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	memset(&d, 0, sizeof(d));
	ims_error err;
	ds_adapter_inat2017.load(fuzz_dir(), &o, &d, &err);
	ds_dataset_release(&d);
	return 0;
}
