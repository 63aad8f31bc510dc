/*
 * loader_opts.h - what Loader and bench_load (loader.c) share, from
 * loader_opts.c: the keyword arguments they both take, the warnings the
 * C loader gives while it opens, and its statistics as a dict.
 */
#ifndef IMSHARD_PY_LOADER_OPTS_H
#define IMSHARD_PY_LOADER_OPTS_H

#include "ext.h"

#include "augment/augment.h"

/* The dtype keyword's values, in aug_dtype order. */
extern const char *const ims_py_dtype_names[4];

/*
 * Fills o from keyword arguments shared by Loader and bench_load; returns
 * 0 or -1 with an exception. `manifest` receives the bytes object the
 * options point into (the caller keeps it alive); epochs and seconds (may
 * be NULL) bench_load's limits.
 */
int ims_py_loader_opts_from(PyObject *args, PyObject *kw, aug_loader_opts *o,
			    PyObject **manifest, int *epochs, double *seconds);

/* The loader's warnings (aug_loader_opts.event: shard-owning mode on a
 * split not shuffled), kept while it opens without the GIL and told
 * through warnings after, as the command prints them. */
typedef struct {
	char msg[IMS_ERRMSG_MAX];
} ims_py_loader_events;

/* Points o's event callback at ev, before aug_loader_open. */
void ims_py_events_begin(aug_loader_opts *o, ims_py_loader_events *ev);

/* Unhooks ev and warns with what it kept, with the GIL: 0, or -1 when the
 * warning was made an exception (-W error). */
int ims_py_events_end(aug_loader_opts *o, const ims_py_loader_events *ev);

/* aug_loader_stats as a dict; NULL with an exception. */
PyObject *ims_py_stats_dict(const aug_loader_stats *st);

#endif
