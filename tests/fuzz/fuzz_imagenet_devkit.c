/* fuzz_imagenet_devkit.c - ImageNet's label files through the adapter,
 * devkit layout: the input is map_clsloc.txt or the devkit's validation
 * ground truth of a root that has two train classes and two val images
 * (empty files: the adapter never reads pixels). The input's first byte
 * picks which of the two files gets it; the other gets a valid one. */
#include <sys/stat.h>

#include "datasets/datasets.h"
#include "fuzz_util.h"

static void touch(const char *rel)
{
	char path[700];
	fuzz_file(rel, (const uint8_t *)"", 0, path, sizeof(path));
}

static void make_root(void)
{
	static const char *dirs[] = {"train", "train/n01440764", "train/n01443537",
				     "val", "ILSVRC2012_devkit_t12",
				     "ILSVRC2012_devkit_t12/data"};
	char path[700];
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", fuzz_dir(), dirs[i]);
		mkdir(path, 0755);
	}
	touch("train/n01440764/n01440764_1.JPEG");
	touch("train/n01443537/n01443537_1.JPEG");
	touch("val/ILSVRC2012_val_00000001.JPEG");
	touch("val/ILSVRC2012_val_00000002.JPEG");
}

static const char mapping[] = "n01440764 1 tench\nn01443537 2 goldfish\n";
static const char solution[] = "1\n2\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int made;
	if (!made) {
		make_root();
		made = 1;
	}
	if (size < 1)
		return 0;
	char path[700];
	const int which = data[0] & 1;
	fuzz_file("map_clsloc.txt",
		  which ? (const uint8_t *)mapping : data + 1,
		  which ? sizeof(mapping) - 1 : size - 1, path, sizeof(path));
	fuzz_file("ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt",
		  which ? data + 1 : (const uint8_t *)solution,
		  which ? size - 1 : sizeof(solution) - 1, path, sizeof(path));
	ds_convert_opts o;
	ds_convert_opts_init(&o);
	ds_dataset d;
	memset(&d, 0, sizeof(d));
	ims_error err;
	ds_adapter_imagenet.load(fuzz_dir(), &o, &d, &err);
	ds_dataset_release(&d);
	return 0;
}
