/*
 * ext.h - what the files of the imshard._imshard extension share: the
 * exception types, turning an ims_error into a Python exception, and each
 * file's type or function table.
 *
 * The extension is a thin layer over the public headers (recordio.h,
 * augment.h, datasets.h, pack.h): argument conversion, the GIL released
 * around every call that reads, decodes or waits, and Ctrl-C checked while
 * waiting. The ergonomic API (imshard/__init__.py) is Python on top.
 */
#ifndef IMSHARD_PY_EXT_H
#define IMSHARD_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common/common.h"

/* imshard.Error (OSError), imshard.ArgumentError (Error, ValueError) and
 * imshard.OutOfMemoryError (Error, MemoryError). */
extern PyObject *ims_py_error;
extern PyObject *ims_py_argument_error;
extern PyObject *ims_py_memory_error;

/* Raises the exception for a library failure: ArgumentError for
 * IMS_EINVAL, OutOfMemoryError for IMS_ENOMEM (so that `except
 * MemoryError` catches an allocation the libraries could not make, as
 * it catches Python's own), KeyboardInterrupt-free Error otherwise; the
 * message is the library's one line (flags as they are: see ims_py_raise_as), e->code
 * is set as the exception's `code` attribute
 * and ims_strerror(code) as `kind`. Returns NULL. */
PyObject *ims_py_raise(int code, const ims_error *e);

/* A library's text (a message, a problem line) as str: bytes that are
 * not UTF-8 (a path's, quoted) are shown as \xHH, as in ims_py_raise's
 * messages. NULL (MemoryError) only when out of memory. */
PyObject *ims_py_text(const char *s);

/*
 * The remedies of the messages a Python call meets, spelt as that call
 * takes them: the command's flag ("--max-label", "--classes FILE") and
 * the keyword for it ("max_label", "classes=[names]"; "force=True" for a
 * flag without a value); value: the flag takes one, and "--max-label 5"
 * reads "max_label=5". The tables end with a NULL flag.
 */
typedef struct ims_py_flag {
	const char *flag, *keyword;
	int value;
} ims_py_flag;
extern const ims_py_flag ims_py_pack_flags[];    /* imshard.pack's keywords */
extern const ims_py_flag ims_py_convert_flags[]; /* imshard.convert's */

/* ims_py_raise with the flags named in the message spelt as flags says
 * (NULL: as they are). Returns NULL. */
PyObject *ims_py_raise_as(int code, const ims_error *e, const ims_py_flag *flags);

/* ims_py_text of s with the flags spelt as flags says (a note). */
PyObject *ims_py_text_as(const char *s, const ims_py_flag *flags);

/* Raises imshard.Error itself (not ArgumentError, whatever the code: a
 * call on a closed Split or Loader is no bad argument) with a formatted
 * message, code and kind set as ims_py_raise sets them. Returns NULL. */
PyObject *ims_py_fail(int code, const char *fmt, ...);

/* Raises ArgumentError with a formatted message. Returns NULL. */
PyObject *ims_py_arg_error(const char *fmt, ...);

/* Converts a path-like (str, bytes, os.PathLike) into a new bytes object;
 * NULL with an exception set otherwise. */
PyObject *ims_py_fspath(PyObject *o);

/*
 * Names the shard behind a bus error. A shard truncated while a Split or
 * Loader has it mapped (a re-pack, a copy over it, a full disk during
 * rsync) faults the next read of its map with SIGBUS, which ends the
 * interpreter with the shell's bare "Bus error". Called before each
 * Split, Loader and bench_load opens its shards: the first call installs
 * ims_mapguard's handler (ims_mapguard_install_over), so the fault writes
 * "imshard: cannot read 'SHARD': the file shrank ..." first. Where SIGBUS
 * has its default action the process then exits with status 1, as the
 * commands do. Where the program already handles SIGBUS (python -X
 * faulthandler, an embedding program), the handler is put in front of it
 * and hands it the fault after the line: the program's handler keeps its
 * say (faulthandler's traceback, then death by SIGBUS) and only gains the
 * shard's name. Not at import: a program that enables faulthandler after
 * importing imshard and before opening a split still gets both.
 */
void ims_py_guard_maps(void);

/*
 * Whether the interpreter is finalizing: other threads (daemon threads,
 * the only ones left) that ask for the GIL from then on never get it, so
 * nothing may wait for them to leave a call they would leave with it.
 */
#if PY_VERSION_HEX >= 0x030D0000
#define IMS_PY_FINALIZING() Py_IsFinalizing()
#else
#define IMS_PY_FINALIZING() _Py_IsFinalizing()
#endif

/* Types and functions defined by the other files, registered by module.c. */
extern PyTypeObject ims_py_split_type;   /* split.c */
extern PyTypeObject ims_py_loader_type;  /* loader.c */
extern PyTypeObject ims_py_batch_type;   /* loader.c */
PyObject *ims_py_bench_load(PyObject *self, PyObject *args, PyObject *kw);  /* loader.c */
PyObject *ims_py_pack(PyObject *self, PyObject *args, PyObject *kw);        /* pack.c */
PyObject *ims_py_convert(PyObject *self, PyObject *args, PyObject *kw);     /* convert.c */

#endif
