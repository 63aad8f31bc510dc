/* fuzz_imagenet_devkit.c - ImageNet's label files through the adapter,
 * devkit layout: the input is map_clsloc.txt (first byte even) or the
 * devkit's validation ground truth (odd); see fuzz_imagenet_util.h. */
#include "fuzz_imagenet_util.h"

static const char *const dirs[] = {"train", "train/n01440764", "train/n01443537",
				   "val", "ILSVRC2012_devkit_t12",
				   "ILSVRC2012_devkit_t12/data", NULL};
static const char *const files[] = {
	"train/n01440764/n01440764_1.JPEG", "train/n01443537/n01443537_1.JPEG",
	"val/ILSVRC2012_val_00000001.JPEG", "val/ILSVRC2012_val_00000002.JPEG", NULL};
static const fuzz_imagenet_layout devkit = {
	dirs, files,
	{"map_clsloc.txt",
	 "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt"},
	{"n01440764 1 tench\nn01443537 2 goldfish\n", "1\n2\n"}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_imagenet_run(&devkit, data, size);
}
