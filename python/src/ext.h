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

/* imshard.Error (OSError) and imshard.ArgumentError (Error, ValueError). */
extern PyObject *ims_py_error;
extern PyObject *ims_py_argument_error;

/* Raises the exception for a library failure: ArgumentError for
 * IMS_EINVAL, KeyboardInterrupt-free Error otherwise; the message is the
 * library's one line, e->code is set as the exception's `code` attribute
 * and ims_strerror(code) as `kind`. Returns NULL. */
PyObject *ims_py_raise(int code, const ims_error *e);

/* A library's text (a message, a problem line) as str: bytes that are
 * not UTF-8 (a path's, quoted) are shown as \xHH, as in ims_py_raise's
 * messages. NULL (MemoryError) only when out of memory. */
PyObject *ims_py_text(const char *s);

/* Raises ArgumentError with a formatted message. Returns NULL. */
PyObject *ims_py_arg_error(const char *fmt, ...);

/* Converts a path-like (str, bytes, os.PathLike) into a new bytes object;
 * NULL with an exception set otherwise. */
PyObject *ims_py_fspath(PyObject *o);

/* Types and functions defined by the other files, registered by module.c. */
extern PyTypeObject ims_py_split_type;   /* split.c */
extern PyTypeObject ims_py_loader_type;  /* loader.c */
extern PyTypeObject ims_py_batch_type;   /* loader.c */
PyObject *ims_py_bench_load(PyObject *self, PyObject *args, PyObject *kw);  /* loader.c */
PyObject *ims_py_pack(PyObject *self, PyObject *args, PyObject *kw);        /* pack.c */
PyObject *ims_py_convert(PyObject *self, PyObject *args, PyObject *kw);     /* pack.c */

#endif
