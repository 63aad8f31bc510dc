/* fuzz_imagenet.c - ImageNet's label files through the adapter, Kaggle
 * layout: the input is LOC_synset_mapping.txt (first byte even) or
 * LOC_val_solution.csv (odd); see fuzz_imagenet_util.h. */
#include "fuzz_imagenet_util.h"

static const char *const dirs[] = {
	"ILSVRC", "ILSVRC/Data", "ILSVRC/Data/CLS-LOC", "ILSVRC/Data/CLS-LOC/train",
	"ILSVRC/Data/CLS-LOC/train/n01440764", "ILSVRC/Data/CLS-LOC/train/n01443537",
	"ILSVRC/Data/CLS-LOC/val", NULL};
static const char *const files[] = {
	"ILSVRC/Data/CLS-LOC/train/n01440764/n01440764_1.JPEG",
	"ILSVRC/Data/CLS-LOC/train/n01443537/n01443537_1.JPEG",
	"ILSVRC/Data/CLS-LOC/val/ILSVRC2012_val_00000001.JPEG",
	"ILSVRC/Data/CLS-LOC/val/ILSVRC2012_val_00000002.JPEG", NULL};
static const fuzz_imagenet_layout kaggle = {
	dirs, files, {"LOC_synset_mapping.txt", "LOC_val_solution.csv"},
	{"n01440764 tench, Tinca tinca\nn01443537 goldfish, Carassius auratus\n",
	 "ImageId,PredictionString\n"
	 "ILSVRC2012_val_00000001,n01440764 1 2 3 4\n"
	 "ILSVRC2012_val_00000002,n01443537 5 6 7 8\n"}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_imagenet_run(&kaggle, data, size);
}
