/*
 * fuzz_util.h - helpers of the libFuzzer harnesses: parsers that read
 * files get the input written to a file of a fixed name in a private
 * folder (one per process, made on first use, under TMPDIR or /tmp;
 * scripts/fuzz.sh points TMPDIR at a folder in RAM, /dev/shm, unless
 * TMPDIR is set, and removes it afterwards).
 */
#ifndef IMSHARD_FUZZ_UTIL_H
#define IMSHARD_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The process's scratch folder; aborts (a harness bug, not a finding)
 * when it cannot be made. */
static inline const char *fuzz_dir(void)
{
	static char dir[512];
	if (!dir[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(dir, sizeof(dir), "%s/imshard-fuzz-XXXXXX", t ? t : "/tmp");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			abort();
		}
	}
	return dir;
}

/* Writes data to DIR/name (DIR from fuzz_dir) and returns the path in
 * path (len bytes). Aborts on an I/O failure. */
static inline void fuzz_file(const char *name, const uint8_t *data, size_t size,
			     char *path, size_t len)
{
	snprintf(path, len, "%s/%s", fuzz_dir(), name);
	FILE *f = fopen(path, "wb");
	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) {
		perror(path);
		abort();
	}
}

#endif
