/* fuzz_manifest.c - a split's manifest (NAME.json): loaded and validated
 * as readers and `imshard info` load it. */
#include "fuzz_util.h"
#include "recordio/recordio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[600];
	fuzz_file("train.json", data, size, path, sizeof(path));
	rio_manifest m;
	memset(&m, 0, sizeof(m));
	ims_error err;
	rio_manifest_load(path, &m, &err);
	rio_manifest_release(&m);
	return 0;
}
