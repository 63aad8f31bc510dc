/*
 * loader_opts.c - what Loader and bench_load (loader.c) share: their
 * keyword arguments made into aug_loader_opts, the loader's warnings told
 * through `warnings`, and the loader's statistics as a dict.
 */
#include "loader_opts.h"

#include <string.h>

/* "mean must be three numbers (R, G, B), got <repr>" (0) */
static int triple_error(PyObject *o, const char *what)
{
	/* the failed conversion's error first: repr() with an exception
	 * pending fails (a list's or tuple's does), and the message would
	 * say "got ?" where an item was not a number */
	PyErr_Clear();
	PyObject *r = PyObject_Repr(o);
	const char *txt = r ? PyUnicode_AsUTF8(r) : NULL;
	PyErr_Clear();
	ims_py_arg_error("%s must be three numbers (R, G, B), got %s", what, txt ? txt : "?");
	Py_XDECREF(r);
	return 0;
}

/*
 * Python's bool or NumPy's (an item of a bool array, which takes part in
 * arithmetic as 0 or 1): known by its type's name, as the extension does
 * not link NumPy. NumPy 1 names it numpy.bool_, NumPy 2 numpy.bool.
 */
static int is_bool(PyObject *o)
{
	const char *name = Py_TYPE(o)->tp_name;
	return PyBool_Check(o) || !strcmp(name, "numpy.bool") || !strcmp(name, "numpy.bool_");
}

/*
 * mean or std: a sequence of three real numbers in R, G, B order (a
 * tuple, a list, a NumPy array). What has no order of its own (a dict,
 * whose keys PySequence_Fast would take, a set), bytes (their byte
 * values) and text are refused, as is a bool for a number: each would
 * give numbers the caller never wrote.
 */
static int parse_triple(PyObject *o, float out[3], const char *what)
{
	if (o == Py_None)
		return 1;
	if (!PySequence_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o) ||
	    PyByteArray_Check(o))
		return triple_error(o, what);
	PyObject *seq = PySequence_Fast(o, "");
	if (!seq || PySequence_Fast_GET_SIZE(seq) != 3) {
		Py_XDECREF(seq);
		return triple_error(o, what);
	}
	for (int c = 0; c < 3; c++) {
		PyObject *item = PySequence_Fast_GET_ITEM(seq, c);
		double v = is_bool(item) ? -1.0 : PyFloat_AsDouble(item);
		if (is_bool(item) || (v == -1.0 && PyErr_Occurred())) {
			Py_DECREF(seq);
			return triple_error(o, what);
		}
		out[c] = (float)v;
	}
	Py_DECREF(seq);
	return 1;
}

const char *const ims_py_dtype_names[4] = {"uint8", "float32", "float16", "bfloat16"};

int ims_py_loader_opts_from(PyObject *args, PyObject *kw, aug_loader_opts *o,
			    PyObject **manifest, int *epochs, double *seconds)
{
	static char *names[] = {"manifest", "batch_size", "size", "augment", "train", "rank",
				"world", "threads", "seed", "layout", "dtype", "mean", "std",
				"prefetch", "shard_owning", "drop_last", "drop_remainder",
				"pinned", "epochs", "seconds", NULL};
	int batch = 32, size = 224, train = 1, rank = 0, world = 1, threads = 0;
	int prefetch = 3, shard_owning = 0, drop_last = -1, drop_rem = -1, pinned = 1;
	int ep = 0;
	double secs = 0;
	unsigned long long seed = 0;
	const char *augment = NULL, *layout = "nchw", *dtype = "float32";
	PyObject *mean = Py_None, *std = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|iizpiiiKssOOipiipid", names,
					 PyUnicode_FSConverter, manifest, &batch, &size, &augment,
					 &train, &rank, &world, &threads, &seed, &layout, &dtype,
					 &mean, &std, &prefetch, &shard_owning, &drop_last, &drop_rem,
					 &pinned, &ep, &secs))
		return -1;
	aug_loader_opts_init(o, train);
	o->manifest = PyBytes_AS_STRING(*manifest);
	ims_error err;
	ims_error_clear(&err);
	if (aug_transform_parse(augment, &o->transform, &err) < 0) {
		ims_fail_context(&err, "augment");
		ims_py_raise(IMS_EINVAL, &err);
		return -1;
	}
	if (size < 1 || size > AUG_MAX_OUT_SIDE) {
		ims_py_arg_error("size must be 1..%d, got %d", AUG_MAX_OUT_SIDE, size);
		return -1;
	}
	o->transform.out_w = o->transform.out_h = size;
	if (strcmp(layout, "nchw") == 0)
		o->transform.layout = AUG_LAYOUT_NCHW;
	else if (strcmp(layout, "nhwc") == 0)
		o->transform.layout = AUG_LAYOUT_NHWC;
	else {
		ims_py_arg_error("layout must be 'nchw' or 'nhwc', got '%s'", layout);
		return -1;
	}
	int d = -1;
	for (int i = 0; i < 4; i++)
		if (strcmp(dtype, ims_py_dtype_names[i]) == 0)
			d = i;
	if (d < 0) {
		ims_py_arg_error("dtype must be uint8, float32, float16 or bfloat16, got '%s'", dtype);
		return -1;
	}
	o->transform.dtype = (aug_dtype)d;
	if (!parse_triple(mean, o->transform.mean, "mean") ||
	    !parse_triple(std, o->transform.std, "std"))
		return -1;
	if (!(o->transform.std[0] > 0 && o->transform.std[1] > 0 && o->transform.std[2] > 0)) {
		ims_py_arg_error("std values must be greater than 0");
		return -1;
	}
	for (int c = 0; c < 3; c++)
		if (o->transform.dtype == AUG_DTYPE_U8 &&
		    (o->transform.mean[c] != 0 || o->transform.std[c] != 1)) {
			ims_py_arg_error("mean and std need a float dtype (float32, float16 "
					 "or bfloat16): uint8 samples are the pixels as they are");
			return -1;
		}
	if (threads < 0) {
		ims_py_arg_error("threads must be >= 0 (0 = all cores), got %d", threads);
		return -1;
	}
	/* as imshard bench-load --prefetch: each batch ahead is a batch of
	 * memory, and a number past this is a typo, not a ring */
	if (prefetch < 1 || prefetch > 1024) {
		ims_py_arg_error("prefetch must be 1..1024, got %d", prefetch);
		return -1;
	}
	o->batch_size = batch;
	o->rank = rank;
	o->world = world;
	o->threads = threads;
	o->seed = seed;
	o->prefetch = prefetch;
	o->shard_owning = shard_owning;
	if (drop_last >= 0)
		o->drop_last = drop_last;
	if (drop_rem >= 0)
		o->drop_remainder = drop_rem;
	/* page-locking is the caller's: the C loader knows no device, and
	 * imshard.torch registers the ring with CUDA itself */
	(void)pinned;
	o->quiet = 1;
	if (epochs)
		*epochs = ep;
	if (seconds)
		*seconds = secs;
	return 0;
}

static void on_event(void *ctx, const char *msg)
{
	ims_py_loader_events *ev = ctx;
	if (!ev->msg[0])
		snprintf(ev->msg, sizeof(ev->msg), "%s", msg);
}

void ims_py_events_begin(aug_loader_opts *o, ims_py_loader_events *ev)
{
	ev->msg[0] = 0;
	o->event = on_event;
	o->event_ctx = ev;
}

int ims_py_events_end(aug_loader_opts *o, const ims_py_loader_events *ev)
{
	o->event = NULL;
	o->event_ctx = NULL;
	if (!ev->msg[0])
		return 0;
	PyObject *text = ims_py_text(ev->msg);
	if (!text)
		return -1;
	PyObject *msg = PyUnicode_FromFormat("imshard: loader: %U", text);
	Py_DECREF(text);
	int rc = msg ? PyErr_WarnEx(PyExc_UserWarning, PyUnicode_AsUTF8(msg), 1) : -1;
	Py_XDECREF(msg);
	return rc;
}

PyObject *ims_py_stats_dict(const aug_loader_stats *st)
{
	/* last_bad names a shard, whose path may not be UTF-8 */
	return Py_BuildValue("{s:K,s:K,s:K,s:N,s:d,s:d,s:d,s:d,s:d,s:O}", "images",
			     (unsigned long long)st->images, "batches",
			     (unsigned long long)st->batches, "bad_records",
			     (unsigned long long)st->bad_records, "last_bad", ims_py_text(st->last_bad),
			     "wait_seconds", st->wait_seconds, "read_seconds", st->read_seconds,
			     "decode_seconds", st->decode_seconds, "augment_seconds",
			     st->augment_seconds, "produce_seconds", st->produce_seconds, "pinned",
			     st->pinned ? Py_True : Py_False);
}
