/* fuzz_manifest.c - a split's manifest (NAME.json), format 1 or 2: loaded
 * and validated as readers and `imshard info` load it; what loads must
 * survive a save and load unchanged (64-bit digests as hex strings,
 * format 1's as numbers). */
#include "fuzz_util.h"
#include "recordio/recordio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[600], again[600];
	fuzz_file("train.json", data, size, path, sizeof(path));
	rio_manifest m, m2;
	memset(&m, 0, sizeof(m));
	memset(&m2, 0, sizeof(m2));
	ims_error err;
	if (rio_manifest_load(path, &m, &err) == 0) {
		snprintf(again, sizeof(again), "%s/again.json", fuzz_dir());
		if (rio_manifest_save(again, &m, &err) != 0 ||
		    rio_manifest_load(again, &m2, &err) != 0)
			__builtin_trap();
		char *a = rio_manifest_to_json(&m), *b = rio_manifest_to_json(&m2);
		if (!a || !b || strcmp(a, b) != 0)
			__builtin_trap();
		free(a);
		free(b);
	}
	rio_manifest_release(&m2);
	rio_manifest_release(&m);
	return 0;
}
