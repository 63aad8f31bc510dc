/*
 * split.c - imshard._imshard.Split: a packed split opened for reading
 * (rio_reader), its records, their decoded pixels, and a full check.
 *
 * One cursor and one codec per Split, used under the GIL's protection
 * (the GIL is released around reads and decodes, so a Split carries a
 * mutex of its own: two Python threads using one Split take turns).
 *
 * A forked child may go on using its parent's Split, but fork copies only
 * the thread that called it: a thread of the parent that was reading or
 * decoding left the mutex locked for good in the child, and the cursor
 * and codec halfway through a call. The child's first call takes a new
 * mutex, cursor and codec of its own (the parent's copies are forgotten,
 * not freed: a half-made call may have left them inconsistent).
 */
#include "ext.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "augment/augment.h"
#include "recordio/recordio.h"

typedef struct {
	PyObject_HEAD
	rio_reader *reader;
	rio_cursor *cur;
	aug_codec *codec;
	aug_image img;
	pthread_mutex_t mu;
	int mu_ready;
	pid_t pid; /* the process whose threads may hold mu */
} split_obj;

static void split_free_members(split_obj *s)
{
	rio_cursor_close(s->cur);
	s->cur = NULL;
	aug_codec_destroy(s->codec);
	s->codec = NULL;
	aug_image_release(&s->img);
	rio_reader_close(s->reader);
	s->reader = NULL;
}

/*
 * In a child forked from the process that made s->mu (see the top of the
 * file): a new mutex, with the GIL held so no other thread of the child
 * sees the parent's, and the parent's cursor and codec, and the image
 * buffer a decode may have been resizing, dropped unfreed. Returns
 * whether this is such a child.
 */
static int split_forget_parents(split_obj *s)
{
	if (!s->mu_ready || s->pid == getpid())
		return 0;
	pthread_mutex_init(&s->mu, NULL);
	s->pid = getpid();
	s->cur = NULL;
	s->codec = NULL;
	memset(&s->img, 0, sizeof(s->img));
	return 1;
}

/* split_forget_parents, then a cursor and codec of the child's own; 0
 * with the error set when they cannot be made (the split is then
 * closed). */
static int split_adopt_after_fork(split_obj *s)
{
	if (!split_forget_parents(s) || !s->reader)
		return 1;
	ims_error err;
	ims_error_clear(&err);
	int rc = rio_cursor_open(s->reader, RIO_CHECK_PAYLOAD_CRC, &s->cur, &err);
	if (rc == 0)
		rc = aug_codec_create(&s->codec, &err);
	if (rc < 0) {
		split_free_members(s);
		ims_py_raise(rc, &err);
		return 0;
	}
	return 1;
}

/*
 * Split(manifest), also called again on an open Split (the type's
 * __init__): the new split is opened first, then swapped in under s->mu,
 * so a thread reading the old one finishes with it before it is freed
 * (before: freed under that thread's read, a segmentation fault). A
 * failed open leaves the Split closed, as a failed first open does.
 */
static int split_init(PyObject *self, PyObject *args, PyObject *kw)
{
	split_obj *s = (split_obj *)self;
	static char *names[] = {"manifest", NULL};
	PyObject *path;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&", names, PyUnicode_FSConverter, &path))
		return -1;
	split_forget_parents(s);
	if (!s->mu_ready) {
		pthread_mutex_init(&s->mu, NULL);
		s->mu_ready = 1;
		s->pid = getpid();
	}
	ims_error err;
	ims_error_clear(&err);
	int rc;
	const char *p = PyBytes_AS_STRING(path);
	split_obj fresh; /* the new members; then the old ones, to free */
	memset(&fresh, 0, sizeof(fresh));
	ims_py_guard_maps();
	Py_BEGIN_ALLOW_THREADS
	rc = rio_reader_open(p, &fresh.reader, &err);
	if (rc == 0)
		rc = rio_cursor_open(fresh.reader, RIO_CHECK_PAYLOAD_CRC, &fresh.cur, &err);
	if (rc == 0)
		rc = aug_codec_create(&fresh.codec, &err);
	if (rc < 0)
		split_free_members(&fresh);
	pthread_mutex_lock(&s->mu);
	Py_END_ALLOW_THREADS
	split_obj old = *s;
	s->reader = fresh.reader;
	s->cur = fresh.cur;
	s->codec = fresh.codec;
	memset(&s->img, 0, sizeof(s->img));
	pthread_mutex_unlock(&s->mu);
	split_free_members(&old);
	Py_DECREF(path);
	if (rc < 0) {
		ims_py_raise(rc, &err);
		return -1;
	}
	return 0;
}

static void split_dealloc(PyObject *self)
{
	split_obj *s = (split_obj *)self;
	split_forget_parents(s);
	split_free_members(s);
	if (s->mu_ready)
		pthread_mutex_destroy(&s->mu);
	Py_TYPE(self)->tp_free(self);
}

static int split_open(split_obj *s)
{
	if (s->reader)
		return 1;
	ims_py_fail(IMS_EINVAL, "the split is not open");
	return 0;
}

/*
 * s->mu is only ever waited for with the GIL released: a thread that holds
 * mu takes the GIL back before it lets mu go, so a thread waiting for mu
 * while holding the GIL would wait for ever (two threads reading one
 * Split did). Returns with mu held and the GIL held; 0 (mu released, the
 * error set) when the split was closed meanwhile, or when the interpreter
 * is finalizing and a daemon thread holds mu (it never gets the GIL back
 * to let it go: a read from a __del__ at exit waited for ever).
 */
static int split_lock(split_obj *s)
{
	if (!split_adopt_after_fork(s))
		return 0;
	if (IMS_PY_FINALIZING()) {
		if (pthread_mutex_trylock(&s->mu) != 0) {
			ims_py_fail(IMS_EINVAL, "cannot read the split: another thread was reading "
						"it when the interpreter began to exit, and never will "
						"finish");
			return 0;
		}
	} else {
		Py_BEGIN_ALLOW_THREADS
		pthread_mutex_lock(&s->mu);
		Py_END_ALLOW_THREADS
	}
	if (split_open(s))
		return 1;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static Py_ssize_t split_len(PyObject *self)
{
	split_obj *s = (split_obj *)self;
	if (!split_open(s))
		return -1;
	return (Py_ssize_t)rio_reader_count(s->reader);
}

/* Index from a Python int, negative counting from the end. One past 64
 * bits is out of range like any other (an IndexError, not the
 * OverflowError of the conversion). */
static int split_index(split_obj *s, PyObject *arg, uint64_t *out)
{
	int over = 0;
	long long i = PyLong_AsLongLongAndOverflow(arg, &over);
	if (i == -1 && PyErr_Occurred())
		return 0;
	long long n = (long long)rio_reader_count(s->reader);
	if (!over && i < 0)
		i += n;
	if (over || i < 0 || i >= n) {
		PyErr_Format(PyExc_IndexError, "record index %R out of range (%lld records)", arg,
			     n);
		return 0;
	}
	*out = (uint64_t)i;
	return 1;
}

/* record(i) -> (payload, label, extra, encoding, width, height, channels,
 * orientation, orig_width, orig_height, original) */
static PyObject *split_record(PyObject *self, PyObject *arg)
{
	split_obj *s = (split_obj *)self;
	uint64_t i;
	if (!split_open(s) || !split_index(s, arg, &i))
		return NULL;
	rio_record rec;
	ims_error err;
	int rc;
	if (!split_lock(s))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rio_cursor_get(s->cur, i, &rec, &err);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		pthread_mutex_unlock(&s->mu);
		return ims_py_raise(rc, &err);
	}
	/* the payload points into the map, valid while the cursor is open:
	 * copied here so the bytes outlive the Split */
	PyObject *payload = PyBytes_FromStringAndSize((const char *)rec.payload,
						      (Py_ssize_t)rec.payload_len);
	pthread_mutex_unlock(&s->mu);
	PyObject *extra = PyTuple_New(rec.n_extra);
	for (int k = 0; extra && k < rec.n_extra; k++)
		PyTuple_SET_ITEM(extra, k, PyFloat_FromDouble(rec.extra[k]));
	if (!payload || !extra) {
		Py_XDECREF(payload);
		Py_XDECREF(extra);
		return NULL;
	}
	return Py_BuildValue("(NiNsIIiiIIO)", payload, (int)rec.label, extra,
			     rio_encoding_name(rec.encoding), rec.width, rec.height,
			     (int)rec.channels, (int)rec.orientation, rec.orig_width,
			     rec.orig_height, (rec.flags & RIO_FLAG_ORIGINAL) ? Py_True : Py_False);
}

/* Record i decoded to upright RGB into s->img (s->mu held by the caller). */
static int decode_locked(split_obj *s, uint64_t i, ims_error *err)
{
	rio_record rec;
	FORWARD_IF_ERR(rio_cursor_get(s->cur, i, &rec, err));
	if (rec.encoding == RIO_ENC_RAW)
		return aug_raw_to_rgb(rec.payload, (int)rec.width, (int)rec.height, rec.channels,
				      &s->img, err);
	aug_decode_opts o = {AUG_CHANNELS_RGB, 0, 0, 1};
	return aug_decode(s->codec, rec.payload, rec.payload_len, &o, &s->img, NULL, err);
}

/* decode(i) -> (pixels bytes, height, width) */
static PyObject *split_decode(PyObject *self, PyObject *arg)
{
	split_obj *s = (split_obj *)self;
	uint64_t i;
	if (!split_open(s) || !split_index(s, arg, &i))
		return NULL;
	ims_error err;
	ims_error_clear(&err);
	int rc;
	if (!split_lock(s))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = decode_locked(s, i, &err);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		pthread_mutex_unlock(&s->mu);
		ims_fail_context(&err, "record %llu", (unsigned long long)i);
		return ims_py_raise(rc, &err);
	}
	int w = s->img.width, h = s->img.height;
	PyObject *px = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)w * h * 3);
	if (px)
		for (int y = 0; y < h; y++)
			memcpy(PyBytes_AS_STRING(px) + (size_t)y * (size_t)w * 3,
			       s->img.pixels + (size_t)y * s->img.stride, (size_t)w * 3);
	pthread_mutex_unlock(&s->mu);
	if (!px)
		return NULL;
	return Py_BuildValue("(Nii)", px, h, w);
}

static PyObject *str_or_none(const char *s)
{
	if (s)
		return PyUnicode_DecodeFSDefault(s);
	Py_RETURN_NONE;
}

/* manifest() -> dict of the manifest's fields */
static PyObject *split_manifest(PyObject *self, PyObject *unused)
{
	(void)unused;
	split_obj *s = (split_obj *)self;
	if (!split_open(s))
		return NULL;
	const rio_manifest *m = rio_reader_manifest(s->reader);
	PyObject *classes = PyList_New((Py_ssize_t)m->n_classes);
	PyObject *counts = PyList_New((Py_ssize_t)m->n_classes);
	PyObject *shards = PyList_New((Py_ssize_t)m->n_shards);
	if (!classes || !counts || !shards)
		goto fail;
	for (size_t c = 0; c < m->n_classes; c++) {
		/* a name that is not UTF-8 (pack refuses one; an edited
		 * manifest may hold one) keeps its bytes, as os.fsdecode
		 * would: verify() names it */
		PyObject *name = PyUnicode_DecodeUTF8(m->classes[c], (Py_ssize_t)strlen(m->classes[c]),
						      "surrogateescape");
		PyObject *count = PyLong_FromUnsignedLongLong(m->class_counts[c]);
		PyList_SET_ITEM(classes, (Py_ssize_t)c, name);
		PyList_SET_ITEM(counts, (Py_ssize_t)c, count);
		if (!name || !count)
			goto fail;
	}
	for (size_t k = 0; k < m->n_shards; k++) {
		const rio_shard_info *si = &m->shards[k];
		/* as the manifest writes it: what tells a shard packed again
		 * with the same sizes (other records, another order) apart */
		char digest[17];
		snprintf(digest, sizeof(digest), "%016llx", (unsigned long long)si->digest);
		PyObject *d = Py_BuildValue("{s:N,s:K,s:K,s:K,s:s}", "path",
					    PyUnicode_DecodeFSDefault(rio_reader_shard_path(s->reader, k)),
					    "first", (unsigned long long)si->first, "records",
					    (unsigned long long)si->records, "bytes",
					    (unsigned long long)si->bytes, "digest", digest);
		if (!d)
			goto fail;
		PyList_SET_ITEM(shards, (Py_ssize_t)k, d);
	}
	return Py_BuildValue("{s:i,s:N,s:K,s:N,s:N,s:N,s:I,s:N,s:K,s:N}", "format_version",
			     m->format_version, "name", str_or_none(m->name), "records",
			     (unsigned long long)m->records, "encoding", str_or_none(m->encoding),
			     "classes", classes, "class_counts", counts, "n_extra_labels",
			     m->n_extra_labels, "shards", shards, "skipped",
			     (unsigned long long)m->skipped, "created_by", str_or_none(m->created_by));
fail:
	Py_XDECREF(classes);
	Py_XDECREF(counts);
	Py_XDECREF(shards);
	return NULL;
}

/* Split.verify's callbacks: they run on the calling thread (one worker)
 * with the GIL released, and take it only to touch Python objects. */
typedef struct verify_py {
	split_obj *s;
	PyObject *problems;
	int failed; /* appending a problem failed: a Python error is set */
} verify_py;

static void verify_problem(void *ctx, const char *line)
{
	verify_py *v = ctx;
	PyGILState_STATE g = PyGILState_Ensure();
	if (!v->failed) {
		PyObject *o = ims_py_text(line); /* a path in it may not be UTF-8 */
		if (!o || PyList_Append(v->problems, o) < 0)
			v->failed = 1;
		Py_XDECREF(o);
	}
	PyGILState_Release(g);
}

/* Ctrl-C stops the check: the KeyboardInterrupt is raised on return. */
static int verify_progress(void *ctx, uint64_t done)
{
	(void)done;
	verify_py *v = ctx;
	PyGILState_STATE g = PyGILState_Ensure();
	int stop = v->failed || PyErr_CheckSignals() < 0;
	PyGILState_Release(g);
	return stop;
}

/* decode=True: every image decodes to upright RGB, as decode(i) gives it
 * (s->mu is held by verify). */
static int verify_decode(void *ctx, int worker, uint64_t i, const rio_record *rec,
			 ims_error *err)
{
	(void)worker;
	split_obj *s = ((verify_py *)ctx)->s;
	int rc;
	if (rec->encoding == RIO_ENC_RAW) {
		rc = aug_raw_to_rgb(rec->payload, (int)rec->width, (int)rec->height,
				    rec->channels, &s->img, err);
	} else {
		aug_decode_opts o = {AUG_CHANNELS_RGB, 0, 0, 1};
		rc = aug_decode(s->codec, rec->payload, rec->payload_len, &o, &s->img,
				NULL, err);
	}
	if (rc < 0)
		ims_fail_context(err, "record %llu", (unsigned long long)i);
	return rc;
}

/*
 * verify(decode=False) -> (records checked, list of problems): what
 * `imshard verify` checks (rio_verify), shard by shard on this thread,
 * with the GIL released; problems are its lines, the first 100 bad
 * records named; with decode, every image decoded. Ctrl-C interrupts it.
 */
static PyObject *split_verify(PyObject *self, PyObject *args, PyObject *kw)
{
	split_obj *s = (split_obj *)self;
	static char *names[] = {"decode", NULL};
	int decode = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "|p", names, &decode) || !split_open(s))
		return NULL;
	verify_py v = {s, PyList_New(0), 0};
	if (!v.problems)
		return NULL;
	rio_verify_opts o;
	rio_verify_opts_init(&o);
	o.threads = 1; /* the callbacks take the GIL on this thread's state */
	o.check = decode ? verify_decode : NULL;
	o.problem = verify_problem;
	o.progress = verify_progress;
	o.ctx = &v;
	rio_verify_result res;
	ims_error err;
	ims_error_clear(&err);
	int rc;
	if (!split_lock(s)) {
		Py_DECREF(v.problems);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = rio_verify(s->reader, &o, &res, NULL, &err);
	Py_END_ALLOW_THREADS
	pthread_mutex_unlock(&s->mu);
	if (rc < 0 || v.failed) {
		Py_DECREF(v.problems);
		if (PyErr_Occurred()) /* Ctrl-C, or a failed append */
			return NULL;
		return ims_py_raise(rc, &err);
	}
	return Py_BuildValue("(KN)", (unsigned long long)res.checked, v.problems);
}

static PyObject *split_close(PyObject *self, PyObject *unused)
{
	(void)unused;
	split_obj *s = (split_obj *)self;
	/* a child's close() must not wait for a parent's thread either */
	split_forget_parents(s);
	if (s->mu_ready && IMS_PY_FINALIZING()) {
		/* at exit (a __del__): a daemon thread holding mu lets it go
		 * only after taking the GIL back, which it never gets now;
		 * what it reads through is left to it, unfreed */
		if (pthread_mutex_trylock(&s->mu) != 0) {
			s->reader = NULL;
			s->cur = NULL;
			s->codec = NULL;
			memset(&s->img, 0, sizeof(s->img));
			Py_RETURN_NONE;
		}
	} else if (s->mu_ready) {
		Py_BEGIN_ALLOW_THREADS
		pthread_mutex_lock(&s->mu);
		Py_END_ALLOW_THREADS
	}
	split_free_members(s);
	if (s->mu_ready)
		pthread_mutex_unlock(&s->mu);
	Py_RETURN_NONE;
}

static PyMethodDef split_methods[] = {
	{"record", split_record, METH_O, "record(i) -> tuple of the record's fields"},
	{"decode", split_decode, METH_O, "decode(i) -> (RGB bytes, height, width)"},
	{"manifest", split_manifest, METH_NOARGS, "manifest() -> dict"},
	{"verify", (PyCFunction)(void (*)(void))split_verify, METH_VARARGS | METH_KEYWORDS,
	 "verify(decode=False) -> (checked, problems)"},
	{"close", split_close, METH_NOARGS, "close(): unmaps the shards (twice is harmless)"},
	{NULL, NULL, 0, NULL}};

static PySequenceMethods split_seq = {.sq_length = split_len};

PyTypeObject ims_py_split_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "imshard._imshard.Split",
	.tp_basicsize = sizeof(split_obj),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Split(manifest): a packed split opened read-only (rio_reader).",
	.tp_new = PyType_GenericNew,
	.tp_init = split_init,
	.tp_dealloc = split_dealloc,
	.tp_methods = split_methods,
	.tp_as_sequence = &split_seq,
};
