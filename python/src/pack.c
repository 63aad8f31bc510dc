/*
 * pack.c - imshard._imshard.pack: lists into packed splits through
 * pack_run, the one packing path; and what convert.c shares with it
 * (pack_common.h).
 *
 * Ctrl-C: pack_run may call back from its worker threads, where Python
 * cannot look for signals, so while it runs on the main thread SIGINT sets
 * that call's cancel flag directly (the previous handler is put back after)
 * and KeyboardInterrupt is raised once it has stopped cleanly. Each call has
 * its own flag: packs running at once on other threads are not stopped by
 * a Ctrl-C (Python gives it to the main thread alone) and do not clear it.
 * Where the program ignores SIGINT or handles it itself, nothing is
 * caught: the pack runs to its end and the program's handler runs after.
 */
#include "pack_common.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets/datasets.h"
#include "pack/pack.h"
#include "recordio/recordio.h"

/* The cancel flag of the pack running on the main thread, or NULL: the
 * one thing the signal handler reaches, so a global. One at most: the
 * main thread is inside that pack until it ends. */
static volatile int *volatile g_main_cancel;

static void on_sigint(int sig)
{
	(void)sig;
	volatile int *c = g_main_cancel;
	if (c)
		*c = 1;
}


/* main: the caller runs on Python's main thread, where SIGINT raises
 * KeyboardInterrupt (the Python layer says so: catch_sigint) */
void ims_py_guard_begin(ims_py_sig_guard *g, int main)
{
	g->cancel = 0;
	g->installed = 0;
	g->main = main;
	if (main) {
		g_main_cancel = &g->cancel;
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sigint;
		sigemptyset(&sa.sa_mask);
		g->installed = sigaction(SIGINT, &sa, &g->old) == 0;
	}
}

int ims_py_guard_end(ims_py_sig_guard *g)
{
	if (g->installed)
		sigaction(SIGINT, &g->old, NULL);
	if (g->main)
		g_main_cancel = NULL;
	if (g->cancel) {
		PyErr_SetNone(PyExc_KeyboardInterrupt);
		return -1;
	}
	return 0;
}

/* Skipped files, collected without the GIL (pack_run's callbacks). */


void ims_py_on_skipped(void *ctx, uint64_t row, const char *path, const char *why)
{
	ims_py_skip_log *s = ctx;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		ims_py_skip_row *r = realloc(s->rows, cap * sizeof(*r));
		if (!r) {
			s->oom = 1;
			return;
		}
		s->rows = r;
		s->cap = cap;
	}
	ims_py_skip_row *r = &s->rows[s->n];
	r->row = row;
	r->path = strdup(path);
	r->why = strdup(why);
	if (!r->path || !r->why) {
		free(r->path);
		free(r->why);
		s->oom = 1;
		return;
	}
	s->n++;
}

void ims_py_skip_log_release(ims_py_skip_log *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->rows[i].path);
		free(s->rows[i].why);
	}
	free(s->rows);
	memset(s, 0, sizeof(*s));
}

/*
 * A split was written but what its callbacks reported could not all be
 * kept: a MemoryError that says so (returning the report would pass off
 * a short skipped_files list as the whole of it). `what` names the work,
 * `lost` what is missing, `errors` the errors file (NULL: several).
 */
void ims_py_raise_log_oom(const char *what, const char *lost, const char *errors)
{
	char msg[9000];
	snprintf(msg, sizeof(msg),
		 "%s, but cannot report all of its %s: out of memory (%s%s%s)", what, lost,
		 errors ? "the skipped files are listed in '" :
			  "each split's errors file lists its skipped files",
		 errors ? errors : "", errors ? "'" : "");
	PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "backslashreplace");
	if (text) {
		PyErr_SetObject(PyExc_MemoryError, text);
		Py_DECREF(text);
	}
}

PyObject *ims_py_skip_list(const ims_py_skip_log *s)
{
	PyObject *l = PyList_New((Py_ssize_t)s->n);
	for (size_t i = 0; l && i < s->n; i++) {
		PyObject *t = Py_BuildValue("(KNs)", (unsigned long long)s->rows[i].row,
					    PyUnicode_DecodeFSDefault(s->rows[i].path), s->rows[i].why);
		if (!t) {
			Py_CLEAR(l);
			break;
		}
		PyList_SET_ITEM(l, (Py_ssize_t)i, t);
	}
	return l;
}


int ims_py_pack_args_apply(const ims_py_pack_args *a, pack_opts *o)
{
	if (a->shards && a->shard_size) {
		ims_py_arg_error("give shards or shard_size, not both");
		return -1;
	}
	/* as --shard-size: a size past the bounds is a mistake (a negative
	 * one used to wrap to 2^64 - 1 bytes, one shard whatever its size) */
	if (a->shard_size && (a->shard_size < 4096 || a->shard_size > 1000000000000000LL)) {
		ims_py_arg_error("shard_size must be from 4096 to 10**15 bytes (0: 1 GiB), got %lld",
				 a->shard_size);
		return -1;
	}
	/* each named, as the command names its flag (threads: --threads' bound) */
	static const struct {
		const char *name, *bounds;
		long long lo, hi;
	} range[] = {{"shards", ">= 0 (0: shards of shard_size)", 0, INT_MAX},
		     {"resize", ">= 0 (0: no resize)", 0, INT_MAX},
		     {"max_size", ">= 0 (0: no limit)", 0, INT_MAX},
		     {"quality", "0..100 (0: 95)", 0, 100},
		     {"threads", "0..1024 (0: all cores)", 0, 1024},
		     {"max_errors", ">= -1 (-1: never stop)", -1, LLONG_MAX}};
	const long long given[] = {a->shards, a->resize, a->max_size, a->quality, a->threads,
				   a->max_errors};
	for (size_t k = 0; k < sizeof(range) / sizeof(range[0]); k++)
		if (given[k] < range[k].lo || given[k] > range[k].hi) {
			ims_py_arg_error("%s must be %s, got %lld", range[k].name, range[k].bounds,
					 given[k]);
			return -1;
		}
	int geometry = a->resize || a->max_size || a->center_crop;
	int enc = a->encoding ? pack_encoding_parse(a->encoding) : (geometry ? PACK_JPEG : PACK_KEEP);
	if (enc < 0) {
		ims_py_arg_error("encoding must be keep, jpeg, png or raw, got '%s'", a->encoding);
		return -1;
	}
	if (enc == PACK_KEEP && geometry) {
		ims_py_arg_error("resize, max_size and center_crop change pixels: use encoding jpeg, png or raw");
		return -1;
	}
	if (a->check_decode && enc != PACK_KEEP) {
		ims_py_arg_error("check_decode applies to encoding keep only (re-encoding always decodes)");
		return -1;
	}
	if (a->quality && enc != PACK_JPEG) {
		ims_py_arg_error("quality applies to encoding jpeg only, and the encoding is %s%s",
				 pack_encoding_name((pack_encoding)enc),
				 a->encoding ? "" : " (the default without a resize option)");
		return -1;
	}
	pack_opts_init(o);
	o->encoding = (pack_encoding)enc;
	o->shards = a->shards;
	o->shard_bytes = (uint64_t)a->shard_size;
	o->resize = a->resize;
	o->max_size = a->max_size;
	o->center_crop = a->center_crop;
	o->quality = a->quality;
	o->threads = a->threads;
	o->max_errors = a->max_errors;
	o->force = a->force;
	o->check_decode = a->check_decode;
	return 0;
}

/*
 * The exception set while row i was read becomes an ArgumentError naming
 * the row, as the list reader names a list file's line (a TypeError for
 * a non-number said nothing of where). Out of memory stays what it is.
 */
static void row_error(Py_ssize_t i)
{
	if (PyErr_ExceptionMatches(PyExc_MemoryError))
		return;
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	PyErr_NormalizeException(&type, &value, &tb);
	PyObject *text = value ? PyObject_Str(value) : NULL;
	const char *why = text ? PyUnicode_AsUTF8(text) : NULL;
	PyErr_Clear();
	ims_py_arg_error("row %zd: %s", i, why ? why : "cannot be read");
	Py_XDECREF(text);
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
}

/* Extra label k of row i: a finite number a float holds, as the list
 * reader takes a list file's label columns (NaN, inf and 1e300 passed
 * into the records before). 0 or -1 with the row named. */
static int extra_label(PyObject *extra, Py_ssize_t i, Py_ssize_t k, float *out)
{
	PyObject *v = PySequence_GetItem(extra, k);
	if (!v) {
		row_error(i);
		return -1;
	}
	if (PyBool_Check(v) || !PyNumber_Check(v)) {
		ims_py_arg_error("row %zd: extra label %zd must be a number, got %s", i, k,
				 Py_TYPE(v)->tp_name);
		Py_DECREF(v);
		return -1;
	}
	double d = PyFloat_AsDouble(v);
	Py_DECREF(v);
	if (d == -1.0 && PyErr_Occurred()) {
		row_error(i);
		return -1;
	}
	if (!isfinite(d) || fabs(d) > FLT_MAX) {
		ims_py_arg_error("row %zd: extra label %zd is %g: not a finite number a float holds",
				 i, k, d);
		return -1;
	}
	*out = (float)d;
	return 0;
}

/* Rows from Python: a sequence of (index, label, extra, path). */
static int rows_into(PyObject *rows, ds_list *l)
{
	PyObject *seq = PySequence_Fast(rows, "rows must be a sequence");
	if (!seq)
		return -1;
	Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
	ims_error err;
	if (ds_list_reserve(l, (size_t)n, &err) < 0) {
		Py_DECREF(seq);
		ims_py_raise_as(err.code, &err, ims_py_pack_flags);
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		unsigned long long index;
		int label;
		PyObject *extra, *path;
		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "KiOO&", &index, &label, &extra,
				      PyUnicode_FSConverter, &path)) {
			row_error(i);
			Py_DECREF(seq);
			return -1;
		}
		float ex[DS_MAX_EXTRA_LABELS];
		Py_ssize_t ne = PySequence_Check(extra) ? PySequence_Size(extra) : -1;
		int rc = 0;
		if (ne < 0) {
			PyErr_Clear();
			ims_py_arg_error("row %zd: extra labels must be a sequence of numbers, got %s",
					 i, Py_TYPE(extra)->tp_name);
			rc = -1;
		} else if (ne > DS_MAX_EXTRA_LABELS) {
			ims_py_arg_error("row %zd: %zd extra labels (at most %d)", i, ne,
					 DS_MAX_EXTRA_LABELS);
			rc = -1;
		}
		for (Py_ssize_t k = 0; rc == 0 && k < ne; k++)
			rc = extra_label(extra, i, k, &ex[k]);
		if (rc == 0)
			rc = ds_list_append(l, index, label, ex, (int)ne, PyBytes_AS_STRING(path), &err);
		Py_DECREF(path);
		if (rc < 0) {
			Py_DECREF(seq);
			if (!PyErr_Occurred()) {
				ims_fail_context(&err, "row %zd", i);
				ims_py_raise_as(rc, &err, ims_py_pack_flags);
			}
			return -1;
		}
	}
	Py_DECREF(seq);
	return 0;
}

static int classes_into(PyObject *classes, ds_list *l)
{
	PyObject *seq = PySequence_Fast(classes, "classes must be a sequence of names");
	if (!seq)
		return -1;
	ims_error err;
	for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
		PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
		if (!PyUnicode_Check(item)) {
			Py_DECREF(seq);
			ims_py_arg_error("classes[%zd] must be a str (a class name), got %s", i,
					 Py_TYPE(item)->tp_name);
			return -1;
		}
		/* the library reads a C string: a NUL would end the name
		 * there ("a\0b" packed as 'a'), and a lone surrogate (an
		 * os.fsdecode'd name) has no UTF-8 at all */
		Py_ssize_t len;
		const char *name = PyUnicode_AsUTF8AndSize(item, &len);
		if (!name && !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
			Py_DECREF(seq); /* out of memory */
			return -1;
		}
		if (!name || strlen(name) != (size_t)len) {
			PyErr_Clear();
			PyObject *r = PyObject_ASCII(item);
			const char *shown = r ? PyUnicode_AsUTF8(r) : NULL;
			PyErr_Clear();
			ims_py_arg_error(name ? "class %zd's name %s holds a NUL character: a class "
						"name must be one line of a classes file (docs/FORMAT.md)" :
						"class %zd's name %s is not UTF-8, which a manifest must "
						"be (docs/FORMAT.md)",
					 i, shown ? shown : "?");
			Py_XDECREF(r);
			Py_DECREF(seq); /* item is borrowed from it */
			return -1;
		}
		if (ds_list_add_class(l, name, NULL, &err) < 0) {
			Py_DECREF(seq);
			if (!PyErr_Occurred())
				ims_py_raise_as(err.code, &err, ims_py_pack_flags);
			return -1;
		}
	}
	Py_DECREF(seq);
	return 0;
}

/* repeats: {rows, relabelled, first: (row, row it repeats), first_path}
 * (rows after a shuffle are not the list's: first is then None), or None
 * when no row repeats another's image. */
static PyObject *repeats_dict(const ds_repeats *r, const ds_list *l, int shuffled)
{
	if (!r->rows)
		Py_RETURN_NONE;
	PyObject *first = shuffled ? Py_NewRef(Py_None)
				   : Py_BuildValue("(nn)", (Py_ssize_t)r->first,
						   (Py_ssize_t)r->first_of);
	if (!first)
		return NULL;
	return Py_BuildValue("{s:n,s:n,s:N,s:N}", "rows", (Py_ssize_t)r->rows, "relabelled",
			     (Py_ssize_t)r->relabelled, "first", first, "first_path",
			     PyUnicode_DecodeFSDefault(l->items[r->first].path));
}

static PyObject *report_dict(const pack_report *r, const ims_py_skip_log *s,
			     const ds_list *l, int shuffled)
{
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:i,s:i,s:d,s:N,s:N,s:N,s:s,s:z,s:N}", "listed",
			     (unsigned long long)r->listed, "packed", (unsigned long long)r->packed,
			     "skipped", (unsigned long long)r->skipped, "bytes_in",
			     (unsigned long long)r->bytes_in, "bytes_out",
			     (unsigned long long)r->bytes_out, "shards", r->shards, "shards_left_out",
			     r->shards_left_out, "seconds",
			     r->seconds, "manifest", PyUnicode_DecodeFSDefault(r->manifest),
			     "errors_file",
			     r->errors[0] ? PyUnicode_DecodeFSDefault(r->errors) : Py_NewRef(Py_None),
			     "skipped_files", ims_py_skip_list(s), "order",
			     r->order == PACK_ORDER_SHUFFLED ? "shuffled" : "list", "order_why",
			     r->order_why, "repeats", repeats_dict(&r->repeats, l, shuffled));
}

/* One pack_run with the GIL released and Ctrl-C turned into cancel. */
static int run_pack(const ds_list *l, pack_opts *o, pack_report *rep, ims_py_skip_log *s,
		    int main, ims_error *err)
{
	ims_py_sig_guard g;
	ims_py_guard_begin(&g, main);
	o->cancel = &g.cancel;
	o->skipped = ims_py_on_skipped;
	o->ctx = s;
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = pack_run(l, o, rep, err);
	Py_END_ALLOW_THREADS
	if (ims_py_guard_end(&g) < 0)
		return IMS_EINTR;
	if (rc < 0)
		ims_py_raise_as(rc, err, ims_py_pack_flags);
	return rc;
}

/*
 * pack(list_path, rows, classes, root, out_dir, name, **pack options,
 * max_label, shuffle, seed, order) -> report dict. Exactly one of
 * list_path / rows is given; classes (names) may be None, in which case a
 * list file's PREFIX.classes is read when it exists (one that cannot be
 * read fails), as `imshard pack` does. shuffle, seed and order (a
 * pack_order) are --shuffle, --seed and --order, checked by the Python
 * layer.
 */
PyObject *ims_py_pack(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *names[] = {"list_path", "rows", "classes", "root", "out_dir", "name", IMS_PY_PACK_KWS,
				"max_label", "shuffle", "seed", "order", NULL};
	PyObject *list_path, *rows, *classes, *root, *out_dir, *name;
	ims_py_pack_args a = {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0};
	long long max_label = DS_LABEL_AUTO;
	int shuffle = 0, order = PACK_ORDER_AUTO;
	unsigned long long seed = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO&O&O&|ziLiipiiLpppLpKi", names, &list_path, &rows,
					 &classes, PyUnicode_FSConverter, &root,
					 PyUnicode_FSConverter, &out_dir, PyUnicode_FSConverter, &name, &a.encoding,
					 &a.shards, &a.shard_size, &a.resize, &a.max_size,
					 &a.center_crop, &a.quality, &a.threads, &a.max_errors,
					 &a.check_decode, &a.force, &a.main, &max_label, &shuffle, &seed,
					 &order))
		return NULL;
	PyObject *res = NULL, *lp = NULL;
	ds_list l;
	ds_list_init(&l);
	ims_py_skip_log s = {0};
	pack_opts o;
	ims_error err;
	ims_error_clear(&err);
	if (ims_py_pack_args_apply(&a, &o) < 0)
		goto out;
	/* as --max-label N: a sparse label space (-1: the default bound) */
	if (max_label != DS_LABEL_AUTO && (max_label < 0 || max_label > DS_LABEL_CEILING)) {
		ims_py_arg_error("max_label must be from 0 to %d, got %lld", DS_LABEL_CEILING,
				 max_label);
		goto out;
	}
	o.max_label = max_label;
	if (list_path != Py_None) {
		lp = ims_py_fspath(list_path);
		if (!lp)
			goto out;
		int rc;
		Py_BEGIN_ALLOW_THREADS
		rc = ds_list_read(PyBytes_AS_STRING(lp), &l, &err);
		Py_END_ALLOW_THREADS
		if (rc < 0) {
			ims_py_raise_as(rc, &err, ims_py_pack_flags);
			goto out;
		}
		char cpath[4200];
		int beside = 0;
		if (classes == Py_None)
			beside = ds_classes_beside_list(PyBytes_AS_STRING(lp), cpath,
							sizeof(cpath), &err);
		if (beside < 0 || (beside > 0 && ds_classes_read(cpath, &l, &err) < 0)) {
			ims_py_raise_as(err.code, &err, ims_py_pack_flags);
			goto out;
		}
	} else if (rows_into(rows, &l) < 0) {
		goto out;
	}
	if (classes != Py_None && classes_into(classes, &l) < 0)
		goto out;
	o.root = PyBytes_AS_STRING(root);
	o.out_dir = PyBytes_AS_STRING(out_dir);
	o.name = PyBytes_AS_STRING(name); /* bytes: a name not UTF-8 meets the library's check */
	o.source = lp ? PyBytes_AS_STRING(lp) : NULL;
	if (shuffle)
		ds_list_shuffle(&l, seed); /* as --shuffle --seed S */
	o.order = shuffle ? PACK_ORDER_SHUFFLED : (pack_order)order;
	pack_report rep;
	if (run_pack(&l, &o, &rep, &s, a.main, &err) < 0)
		goto out;
	if (s.oom) {
		char what[4200];
		snprintf(what, sizeof(what), "packed '%s'", rep.manifest);
		ims_py_raise_log_oom(what, "skipped files", rep.errors);
		goto out;
	}
	res = report_dict(&rep, &s, &l, shuffle);
out:
	Py_XDECREF(lp);
	Py_DECREF(root);
	Py_DECREF(out_dir);
	Py_DECREF(name);
	ds_list_release(&l);
	ims_py_skip_log_release(&s);
	return res;
}

