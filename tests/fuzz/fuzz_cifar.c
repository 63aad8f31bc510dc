/* fuzz_cifar.c - CIFAR-10's binary batches and class names: the input is
 * test_batch.bin and batches.meta.txt (the training batches are absent, so
 * the adapter's error paths for missing files run too). */
#include "datasets/datasets.h"
#include "fuzz_util.h"

#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[600], dir[600];
	snprintf(dir, sizeof(dir), "%s/cifar-10-batches-bin", fuzz_dir());
	mkdir(dir, 0755);
	fuzz_file("cifar-10-batches-bin/test_batch.bin", data, size, path,
		  sizeof(path));
	fuzz_file("cifar-10-batches-bin/batches.meta.txt", data, size, path,
		  sizeof(path));
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	memset(&d, 0, sizeof(d));
	ims_error err;
	ds_adapter_cifar10.load(fuzz_dir(), &o, &d, &err);
	ds_dataset_release(&d);
	return 0;
}
