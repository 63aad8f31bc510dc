/*
 * pack_common.h - what imshard._imshard's pack (pack.c) and convert
 * (convert.c) share: the Ctrl-C guard around a pack, the log of skipped
 * files its callbacks fill without the GIL, and the pack options checked
 * as `imshard pack` checks its flags. Private to the extension.
 */
#ifndef IMSHARD_PY_PACK_COMMON_H
#define IMSHARD_PY_PACK_COMMON_H

#include "ext.h"

#include <signal.h>

#include "pack/pack.h"

/* Ctrl-C while a pack runs: on the main thread, where SIGINT raises
 * KeyboardInterrupt, SIGINT sets the call's own cancel flag until
 * ims_py_guard_end, which raises KeyboardInterrupt (-1) when it was set. */
typedef struct {
	struct sigaction old;
	int installed, main;
	volatile int cancel; /* this call's: pack_opts.cancel points here */
} ims_py_sig_guard;
void ims_py_guard_begin(ims_py_sig_guard *g, int main);
int ims_py_guard_end(ims_py_sig_guard *g);

/* Skipped files, collected without the GIL (pack_run's callbacks). */
typedef struct ims_py_skip_row {
	uint64_t row;
	char *path, *why;
} ims_py_skip_row;

typedef struct {
	ims_py_skip_row *rows;
	size_t n, cap;
	int oom;
} ims_py_skip_log;
void ims_py_on_skipped(void *ctx, uint64_t row, const char *path, const char *why);
void ims_py_skip_log_release(ims_py_skip_log *s);
/* [(row, path, why), ...]; NULL with an exception set. */
PyObject *ims_py_skip_list(const ims_py_skip_log *s);
/* MemoryError: a split was written (`what`) but not all of its `lost`
 * could be kept; `errors` names the errors file (NULL: several). */
void ims_py_raise_log_oom(const char *what, const char *lost, const char *errors);

/* The pack options, checked as `imshard pack` checks its flags. */
typedef struct {
	const char *encoding;
	int shards, resize, max_size, center_crop, quality, threads, check_decode, force;
	long long shard_size;
	long long max_errors;
	int main; /* catch SIGINT: called on the main thread, where SIGINT
		     raises KeyboardInterrupt (not ignored, no handler of
		     the program's own) */
} ims_py_pack_args;
/* Into o (initialised here); -1 with ArgumentError set. */
int ims_py_pack_args_apply(const ims_py_pack_args *a, pack_opts *o);

/* The pack options' keywords, in ims_py_pack_args' parse order. */
#define IMS_PY_PACK_KWS "encoding", "shards", "shard_size", "resize", "max_size", "center_crop", \
	"quality", "threads", "max_errors", "check_decode", "force", "catch_sigint"

#endif
