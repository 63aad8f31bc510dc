/*
 * pack.c - imshard._imshard.pack and .convert: lists into packed splits
 * through pack_run, the one packing path, and a dataset as downloaded
 * through pack_convert, the workflow `imshard convert` runs.
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
#include "ext.h"

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

typedef struct {
	struct sigaction old;
	int installed, main;
	volatile int cancel; /* this call's: pack_opts.cancel points here */
} sig_guard;

/* main: the caller runs on Python's main thread, where SIGINT raises
 * KeyboardInterrupt (the Python layer says so: catch_sigint) */
static void guard_begin(sig_guard *g, int main)
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

static int guard_end(sig_guard *g)
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
typedef struct skip_row {
	uint64_t row;
	char *path, *why;
} skip_row;

typedef struct {
	skip_row *rows;
	size_t n, cap;
	int oom;
} skip_log;

static void on_skipped(void *ctx, uint64_t row, const char *path, const char *why)
{
	skip_log *s = ctx;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		skip_row *r = realloc(s->rows, cap * sizeof(*r));
		if (!r) {
			s->oom = 1;
			return;
		}
		s->rows = r;
		s->cap = cap;
	}
	skip_row *r = &s->rows[s->n];
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

static void skip_log_release(skip_log *s)
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
static void raise_log_oom(const char *what, const char *lost, const char *errors)
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

static PyObject *skip_list(const skip_log *s)
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

/* The pack options, checked as `imshard pack` checks its flags. */
typedef struct {
	const char *encoding;
	int shards, resize, max_size, center_crop, quality, threads, check_decode, force;
	long long shard_size;
	long long max_errors;
	int main; /* catch SIGINT: called on the main thread, where SIGINT
		     raises KeyboardInterrupt (not ignored, no handler of
		     the program's own) */
} pack_args;

static int pack_args_apply(const pack_args *a, pack_opts *o)
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
		const char *name = PyUnicode_AsUTF8(item);
		if (!name || ds_list_add_class(l, name, NULL, &err) < 0) {
			Py_DECREF(seq);
			if (!PyErr_Occurred())
				ims_py_raise_as(err.code, &err, ims_py_pack_flags);
			return -1;
		}
	}
	Py_DECREF(seq);
	return 0;
}

static PyObject *report_dict(const pack_report *r, const skip_log *s)
{
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:i,s:i,s:d,s:N,s:N,s:N,s:s,s:z}", "listed",
			     (unsigned long long)r->listed, "packed", (unsigned long long)r->packed,
			     "skipped", (unsigned long long)r->skipped, "bytes_in",
			     (unsigned long long)r->bytes_in, "bytes_out",
			     (unsigned long long)r->bytes_out, "shards", r->shards, "shards_left_out",
			     r->shards_left_out, "seconds",
			     r->seconds, "manifest", PyUnicode_DecodeFSDefault(r->manifest),
			     "errors_file",
			     r->errors[0] ? PyUnicode_DecodeFSDefault(r->errors) : Py_NewRef(Py_None),
			     "skipped_files", skip_list(s), "order",
			     r->order == PACK_ORDER_SHUFFLED ? "shuffled" : "list", "order_why",
			     r->order_why);
}

/* One pack_run with the GIL released and Ctrl-C turned into cancel. */
static int run_pack(const ds_list *l, pack_opts *o, pack_report *rep, skip_log *s,
		    int main, ims_error *err)
{
	sig_guard g;
	guard_begin(&g, main);
	o->cancel = &g.cancel;
	o->skipped = on_skipped;
	o->ctx = s;
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = pack_run(l, o, rep, err);
	Py_END_ALLOW_THREADS
	if (guard_end(&g) < 0)
		return IMS_EINTR;
	if (rc < 0)
		ims_py_raise_as(rc, err, ims_py_pack_flags);
	return rc;
}

#define PACK_KWS "encoding", "shards", "shard_size", "resize", "max_size", "center_crop", \
	"quality", "threads", "max_errors", "check_decode", "force", "catch_sigint"

/*
 * pack(list_path, rows, classes, root, out_dir, name, **pack options,
 * max_label, shuffle, seed, order) -> report dict. Exactly one of
 * list_path / rows is given; classes (names) may be None, in which case a
 * list file's PREFIX.classes is read when it exists, as `imshard pack`
 * does. shuffle, seed and order (a pack_order) are --shuffle, --seed and
 * --order, checked by the Python layer.
 */
PyObject *ims_py_pack(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *names[] = {"list_path", "rows", "classes", "root", "out_dir", "name", PACK_KWS,
				"max_label", "shuffle", "seed", "order", NULL};
	PyObject *list_path, *rows, *classes, *root, *out_dir, *name;
	pack_args a = {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0};
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
	skip_log s = {0};
	pack_opts o;
	ims_error err;
	ims_error_clear(&err);
	if (pack_args_apply(&a, &o) < 0)
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
		if (classes == Py_None &&
		    ds_classes_path_for_list(PyBytes_AS_STRING(lp), cpath, sizeof(cpath), NULL) == 0 &&
		    access(cpath, R_OK) == 0 && ds_classes_read(cpath, &l, &err) < 0) {
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
		raise_log_oom(what, "skipped files", rep.errors);
		goto out;
	}
	res = report_dict(&rep, &s);
out:
	Py_XDECREF(lp);
	Py_DECREF(root);
	Py_DECREF(out_dir);
	Py_DECREF(name);
	ds_list_release(&l);
	skip_log_release(&s);
	return res;
}

/* Subset sizes for split `name` from a dict {split: n}; 0 when absent. */
static int size_for(PyObject *d, const char *name, long *out)
{
	*out = 0;
	if (d == Py_None)
		return 0;
	PyObject *v = PyDict_GetItemString(d, name);
	if (!v)
		return 0;
	*out = PyLong_AsLong(v);
	if (*out == -1 && PyErr_Occurred())
		return -1;
	if (*out < 1) {
		ims_py_arg_error("subset size for '%s' must be >= 1", name);
		return -1;
	}
	return 0;
}

/* What pack_convert's callbacks report, collected without the GIL and
 * turned into Python objects after. */
typedef struct convert_log {
	skip_log skips[DS_MAX_SPLITS]; /* per split, in packing order */
	int cur;                       /* split being packed, -1 before */
	char **notes;
	size_t n_notes;
	char short_split[DS_MAX_SPLITS][16];
	pack_short_class *shorts[DS_MAX_SPLITS]; /* names copied */
	size_t n_short[DS_MAX_SPLITS];
	int n_short_splits;
	int oom;
} convert_log;

static void log_note(void *ctx, const char *msg)
{
	convert_log *c = ctx;
	char **n = realloc(c->notes, (c->n_notes + 1) * sizeof(char *));
	if (!n || !(n[c->n_notes] = strdup(msg))) {
		if (n)
			c->notes = n;
		c->oom = 1;
		return;
	}
	c->notes = n;
	c->n_notes++;
}

static pack_short_class *copy_shorts(const pack_short_class *c, size_t n)
{
	pack_short_class *d = calloc(n ? n : 1, sizeof(*d));
	for (size_t i = 0; d && i < n; i++) {
		d[i] = c[i];
		if (!(d[i].name = strdup(c[i].name))) {
			for (size_t k = 0; k < i; k++)
				free((char *)d[k].name);
			free(d);
			return NULL;
		}
	}
	return d;
}

static void log_shorts(void *ctx, const char *split, const pack_short_class *c, size_t n)
{
	convert_log *l = ctx;
	if (l->n_short_splits == DS_MAX_SPLITS)
		return;
	int k = l->n_short_splits;
	if (!(l->shorts[k] = copy_shorts(c, n))) {
		l->oom = 1;
		return;
	}
	snprintf(l->short_split[k], sizeof(l->short_split[k]), "%s", split);
	l->n_short[k] = n;
	l->n_short_splits++;
}

static void log_split_begin(void *ctx, const char *split, uint64_t rows)
{
	(void)split;
	(void)rows;
	convert_log *l = ctx;
	if (l->cur + 1 < DS_MAX_SPLITS)
		l->cur++;
}

static void log_skipped(void *ctx, uint64_t row, const char *path, const char *why)
{
	convert_log *l = ctx;
	if (l->cur >= 0)
		on_skipped(&l->skips[l->cur], row, path, why);
}

static void convert_log_release(convert_log *l)
{
	for (int i = 0; i < DS_MAX_SPLITS; i++) {
		skip_log_release(&l->skips[i]);
		for (size_t k = 0; k < l->n_short[i]; k++)
			free((char *)l->shorts[i][k].name);
		free(l->shorts[i]);
	}
	for (size_t i = 0; i < l->n_notes; i++)
		free(l->notes[i]);
	free(l->notes);
	memset(l, 0, sizeof(*l));
}

/* {split: [(class, taken or available, wanted)]} */
static int add_shorts(PyObject *shorts, const char *split, const pack_short_class *c, size_t n)
{
	PyObject *sl = PyList_New(0);
	for (size_t i = 0; sl && i < n; i++) {
		PyObject *t = Py_BuildValue("(snn)", c[i].name, (Py_ssize_t)c[i].available,
					    (Py_ssize_t)c[i].wanted);
		if (!t || PyList_Append(sl, t) < 0)
			Py_CLEAR(sl);
		Py_XDECREF(t);
	}
	int rc = sl ? PyDict_SetItemString(shorts, split, sl) : -1;
	Py_XDECREF(sl);
	return rc;
}

static PyObject *split_dict(const pack_convert_split *r, const skip_log *s)
{
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:i,s:i,s:d,s:N,s:N,s:N}", "listed",
			     (unsigned long long)r->listed, "packed", (unsigned long long)r->records,
			     "skipped", (unsigned long long)r->skipped, "bytes_in",
			     (unsigned long long)r->bytes_in, "bytes_out",
			     (unsigned long long)r->bytes_out, "shards", r->shards, "shards_left_out",
			     r->shards_left_out, "seconds",
			     r->seconds, "manifest", PyUnicode_DecodeFSDefault(r->manifest),
			     "errors_file",
			     r->errors[0] ? PyUnicode_DecodeFSDefault(r->errors) : Py_NewRef(Py_None),
			     "skipped_files", skip_list(s));
}

/*
 * convert(dataset, root, out, val_ratio, test_ratio, no_clutter, label,
 * keep_classes, recursive, exts, seed, per_class, totals, allow_short,
 * shuffle, **pack options) -> {"splits": {name: report}, "notes": [...],
 * "short": {split: [(class, taken, wanted)]}}: pack_convert, the workflow
 * of `imshard convert` (all or nothing, records shuffled unless shuffle is
 * false). The Python layer checks which options apply to which dataset
 * before calling.
 */
PyObject *ims_py_convert(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *names[] = {"dataset", "root", "out", "val_ratio", "test_ratio", "no_clutter",
				"label", "keep_classes", "recursive", "exts", "seed", "per_class",
				"totals", "allow_short", "shuffle", PACK_KWS, NULL};
	const char *dataset, *label = NULL, *keep = NULL, *exts = NULL;
	PyObject *root, *out, *per_class = Py_None, *totals = Py_None;
	double val_ratio = -1, test_ratio = 0;
	int no_clutter = 0, recursive = 0, allow_short = 0, shuffle = 1;
	unsigned long long seed = 0;
	pack_args a = {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0};
	if (!PyArg_ParseTupleAndKeywords(args, kw, "sO&O&|ddpzzpzKOOppziLiipiiLppp", names, &dataset,
					 PyUnicode_FSConverter, &root, PyUnicode_FSConverter, &out,
					 &val_ratio, &test_ratio, &no_clutter, &label, &keep,
					 &recursive, &exts, &seed, &per_class, &totals, &allow_short,
					 &shuffle, &a.encoding, &a.shards, &a.shard_size, &a.resize,
					 &a.max_size, &a.center_crop, &a.quality, &a.threads,
					 &a.max_errors, &a.check_decode, &a.force, &a.main))
		return NULL;
	PyObject *res = NULL, *splits = PyDict_New(), *notes = PyList_New(0), *shorts = PyDict_New();
	const char *rootp = PyBytes_AS_STRING(root), *outp = PyBytes_AS_STRING(out);
	ims_error err;
	ims_error_clear(&err);
	convert_log log;
	memset(&log, 0, sizeof(log));
	log.cur = -1;
	pack_convert_report rep;
	memset(&rep, 0, sizeof(rep));
	pack_convert_opts co;
	pack_convert_opts_init(&co);
	if (!splits || !notes || !shorts || pack_args_apply(&a, &co.pack) < 0)
		goto out;
	co.adapter = ds_adapter_find(dataset);
	if (!co.adapter) {
		ims_py_arg_error("unknown dataset '%s' (folder, caltech256, fruits, inat2017, cifar10, imagenet)",
				 dataset);
		goto out;
	}
	struct stat st;
	if (stat(rootp, &st) != 0 || !S_ISDIR(st.st_mode)) {
		ims_fail(&err, IMS_ENOTFOUND, "cannot open dataset root '%s': %s", rootp,
			 stat(rootp, &st) != 0 ? "no such folder" : "not a folder");
		ims_py_raise_as(IMS_ENOTFOUND, &err, ims_py_convert_flags);
		goto out;
	}
	static const char *known[PACK_N_SUBSET_SPLITS] = {"train", "val", "test"};
	for (int i = 0; i < PACK_N_SUBSET_SPLITS; i++) {
		long pc, tot;
		if (size_for(per_class, known[i], &pc) < 0 || size_for(totals, known[i], &tot) < 0)
			goto out;
		if (pc && tot) {
			ims_py_arg_error("give per_class or totals for '%s', not both", known[i]);
			goto out;
		}
		co.subset[i].per_class = (size_t)pc;
		co.subset[i].total = (size_t)tot;
	}
	co.root = rootp;
	co.out_dir = outp;
	co.dataset.val_ratio = val_ratio;
	co.dataset.test_ratio = test_ratio;
	co.dataset.no_clutter = no_clutter;
	co.dataset.label = label;
	co.dataset.keep_classes = keep;
	co.dataset.recursive = recursive;
	co.dataset.exts = exts;
	co.dataset.seed = seed;
	co.allow_short = allow_short;
	co.no_shuffle = !shuffle;
	co.note = log_note;
	co.short_classes = log_shorts;
	co.split_begin = log_split_begin;
	co.ctx = &log;
	co.pack.skipped = log_skipped;
	co.pack.ctx = &log;
	sig_guard g;
	guard_begin(&g, a.main);
	co.pack.cancel = &g.cancel;
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = pack_convert(&co, &rep, &err);
	Py_END_ALLOW_THREADS
	if (guard_end(&g) < 0)
		goto out;
	int log_oom = log.oom;
	for (int i = 0; i < DS_MAX_SPLITS; i++)
		log_oom |= log.skips[i].oom;
	if (rc == 0 && log_oom) {
		char what[4200];
		snprintf(what, sizeof(what), "converted '%s' into '%s'", dataset, outp);
		raise_log_oom(what, "skipped files and notes", NULL);
		goto out;
	}
	for (size_t i = 0; i < log.n_notes; i++) {
		PyObject *n = ims_py_text_as(log.notes[i], ims_py_convert_flags);
		if (!n || PyList_Append(notes, n) < 0) {
			Py_XDECREF(n);
			goto out;
		}
		Py_DECREF(n);
	}
	for (int i = 0; i < log.n_short_splits; i++)
		if (add_shorts(shorts, log.short_split[i], log.shorts[i], log.n_short[i]) < 0)
			goto out;
	if (rc < 0 && rep.n_refused) {
		/* The command's one line, with the keyword for the flag, and
		 * the first few short classes after it. */
		ims_error e2;
		ims_error_clear(&e2);
		int len = snprintf(e2.msg, sizeof(e2.msg),
				   "%s: cannot take the subset: %zu %s fewer images than "
				   "wanted (allow_short=True takes all a short class has)%s%s:",
				   rep.failed_split, rep.n_refused,
				   ims_plural(rep.n_refused, "class has", "classes have"),
				   rep.outcome[0] ? "; " : "", rep.outcome);
		for (size_t i = 0; i < rep.n_refused && i < 5 && len > 0 &&
				   (size_t)len < sizeof(e2.msg);
		     i++)
			len += snprintf(e2.msg + len, sizeof(e2.msg) - (size_t)len,
					"%s '%s' (label %zu) has %zu of %zu", i ? "," : "",
					rep.refused[i].name, rep.refused[i].label,
					rep.refused[i].available, rep.refused[i].wanted);
		if (rep.n_refused > 5 && len > 0 && (size_t)len < sizeof(e2.msg))
			snprintf(e2.msg + len, sizeof(e2.msg) - (size_t)len, " and %zu more",
				 rep.n_refused - 5);
		e2.code = rc;
		ims_py_raise(rc, &e2);
		goto out;
	}
	if (rc < 0) {
		if (rep.stage == PACK_CONVERT_OPTIONS)
			ims_py_raise_as(IMS_EINVAL, &err, ims_py_convert_flags);
		else
			ims_py_raise_as(rc, &err, ims_py_convert_flags);
		goto out;
	}
	for (int s = 0; s < rep.n_splits; s++) {
		PyObject *r = split_dict(&rep.splits[s], &log.skips[s]);
		if (!r || PyDict_SetItemString(splits, rep.splits[s].name, r) < 0) {
			Py_XDECREF(r);
			goto out;
		}
		Py_DECREF(r);
	}
	res = Py_BuildValue("{s:O,s:O,s:O}", "splits", splits, "notes", notes, "short", shorts);
out:
	Py_XDECREF(splits);
	Py_XDECREF(notes);
	Py_XDECREF(shorts);
	Py_DECREF(root);
	Py_DECREF(out);
	convert_log_release(&log);
	pack_convert_report_release(&rep);
	return res;
}
