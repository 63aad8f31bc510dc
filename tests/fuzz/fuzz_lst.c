/* fuzz_lst.c - an im2rec .lst file and a classes file, as `imshard pack`,
 * `subset` and `convert` read them. */
#include "datasets/datasets.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[600];
	ims_error err;
	ds_list l;
	fuzz_file("x.lst", data, size, path, sizeof(path));
	ds_list_init(&l);
	ds_list_read(path, &l, &err);
	ds_list_release(&l);
	fuzz_file("x.classes", data, size, path, sizeof(path));
	ds_list_init(&l);
	ds_classes_read(path, &l, &err);
	ds_list_release(&l);
	return 0;
}
