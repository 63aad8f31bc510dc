/*
 * loader.c - imshard._imshard.Loader (aug_loader in hold_batches mode),
 * BatchMemory (one batch's images, exported zero-copy through the buffer
 * protocol), and bench_load (aug_bench_run).
 *
 * The rule that keeps a zero-copy view from reading reused memory: a
 * batch's ring slot goes back to the C loader only when its BatchMemory
 * is deallocated, that is when no NumPy array or torch tensor views it
 * any more (they hold the exporter alive). When every slot is still
 * viewed, next() raises instead of waiting for a slot that never comes
 * back. Closing the loader stops its threads at once (aug_loader_stop)
 * and frees the ring when the last view is gone.
 *
 * The C loader has one consumer: next() and start_epoch() from several
 * Python threads take turns on a mutex (each wait for a batch is cut into
 * slices, so a turn is short), and a pass started by one thread ends the
 * pass another thread is waiting in, rather than handing it the new
 * pass's batches. A forked child has none of the loader's threads: there
 * it is refused, and closing it only forgets it.
 */
#include "loader_opts.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "augment/augment.h"

typedef struct {
	PyObject_HEAD
	aug_loader *l;
	aug_loader_opts o;
	PyObject *manifest;   /* bytes the opts' manifest points into */
	Py_ssize_t exported;  /* BatchMemory objects alive */
	int stopped;          /* close() was called */
	int epoch_running;
	int busy;             /* threads inside the C loader with the GIL
				 released, or waiting for `use`: close()
				 from another thread waits for them (at
				 most a SIGNAL_SLICE each) */
	pthread_mutex_t use;  /* held around each C loader call that may
				 wait (aug_loader_next_timed,
				 aug_loader_start_epoch): one consumer at a
				 time; only ever waited for without the GIL */
	int use_ready;
	unsigned long long passes; /* start_epoch calls; read and written
				      under `use` */
	pid_t pid;            /* the process that opened the C loader: its
				 threads exist only there */
} loader_obj;

typedef struct {
	PyObject_HEAD
	loader_obj *owner;    /* strong reference: the ring outlives us */
	aug_batch b;
	Py_ssize_t shape[4], strides[4];
	int released;
} batch_obj;

/* ---- Loader ----------------------------------------------------------- */

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

/* Whether this is a child forked from the process that opened the C
 * loader: its producer thread and OpenMP team were not copied, and its
 * mutexes may be held by threads that are not there, so stopping,
 * freeing or waiting on it can hang for ever. */
static int loader_forked(const loader_obj *s)
{
	return s->l && s->pid != getpid();
}

/* In a forked child the C loader is the parent's: forgotten, not freed
 * (its memory is this process's copy, gone when the process ends). */
static void loader_forget_if_forked(loader_obj *s)
{
	if (loader_forked(s)) {
		s->l = NULL;
		s->stopped = 1;
	}
}

/* Frees the C loader once it is closed and nothing views its ring. */
static void loader_maybe_free(loader_obj *s)
{
	loader_forget_if_forked(s);
	if (s->l && s->stopped && s->exported == 0 && s->busy == 0) {
		aug_loader *l = s->l;
		s->l = NULL;
		Py_BEGIN_ALLOW_THREADS
		aug_loader_close(l);
		Py_END_ALLOW_THREADS
	}
}

static int loader_init(PyObject *self, PyObject *args, PyObject *kw)
{
	loader_obj *s = (loader_obj *)self;
	/* A batch handed out gives its slot back to this object's C loader
	 * and reads its shape from these options: opened again while one is
	 * viewed, the old ring would never be freed and the batch would be
	 * described by the new options. */
	if (s->l && !s->stopped) {
		ims_py_fail(IMS_EINVAL, "cannot open the loader of '%s' again: it is open (close() "
			    "it first, or make a new Loader)", PyBytes_AS_STRING(s->manifest));
		return -1;
	}
	if (s->l) {
		ims_py_fail(IMS_EINVAL, "cannot open the loader of '%s' again: it is closed, but "
			    "%zd batch%s it handed out %s still viewed (arrays or tensors of them are "
			    "alive) and hold%s its memory; drop them first, or make a new Loader",
			    PyBytes_AS_STRING(s->manifest), s->exported, s->exported == 1 ? "" : "es",
			    s->exported == 1 ? "is" : "are", s->exported == 1 ? "s" : "");
		return -1;
	}
	Py_CLEAR(s->manifest);
	if (ims_py_loader_opts_from(args, kw, &s->o, &s->manifest, NULL, NULL) < 0)
		return -1;
	if (!s->use_ready) {
		pthread_mutex_init(&s->use, NULL);
		s->use_ready = 1;
	}
	s->o.hold_batches = 1;
	/* One slot more than the batches prepared ahead: the batch a loop
	 * variable still holds while the next is asked for. */
	s->o.prefetch += 1;
	ims_error err;
	ims_error_clear(&err);
	int rc;
	ims_py_loader_events ev;
	ims_py_events_begin(&s->o, &ev);
	ims_py_guard_maps();
	Py_BEGIN_ALLOW_THREADS
	rc = aug_loader_open(&s->o, &s->l, &err);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		s->o.event = NULL;
		ims_py_raise(rc, &err);
		return -1;
	}
	s->stopped = 0;
	s->pid = getpid();
	return ims_py_events_end(&s->o, &ev);
}

static int loader_usable(loader_obj *s)
{
	if (loader_forked(s)) {
		ims_py_fail(IMS_EINVAL,
			    "cannot use a loader opened by process %ld in its forked child %ld: "
			    "the loader's threads are not copied by fork (open the Loader in "
			    "the child, or start children with 'spawn' or 'forkserver')",
			    (long)s->pid, (long)getpid());
		return 0;
	}
	if (s->l && !s->stopped)
		return 1;
	ims_py_fail(IMS_EINVAL, "the loader is closed");
	return 0;
}

/* start_epoch(e) -> the pass number, which next() takes to know its pass
 * was not ended by a newer one (from another thread). */
static PyObject *loader_start_epoch(PyObject *self, PyObject *arg)
{
	loader_obj *s = (loader_obj *)self;
	unsigned long long e = PyLong_AsUnsignedLongLong(arg);
	if (PyErr_Occurred() || !loader_usable(s))
		return NULL;
	ims_error err;
	ims_error_clear(&err);
	int rc;
	unsigned long long pass;
	s->busy++;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&s->use);
	pass = ++s->passes;
	rc = aug_loader_start_epoch(s->l, e, &err);
	pthread_mutex_unlock(&s->use);
	Py_END_ALLOW_THREADS
	s->busy--;
	if (!loader_usable(s)) /* closed meanwhile, from another thread */
		return NULL;
	if (rc < 0)
		return ims_py_raise(rc, &err);
	s->epoch_running = 1;
	return PyLong_FromUnsignedLongLong(pass);
}

/* The seconds next() waits between two checks for Ctrl-C. */
#define SIGNAL_SLICE 0.05

/* next(pass=0) -> (BatchMemory, labels bytes (int32), indices bytes
 * (uint64), padded bytes (uint8), count, epoch, step, wait seconds), None
 * when the epoch is over, or False when `pass` (start_epoch's number; 0:
 * any) was ended by a newer pass: its batches are not made any more, and
 * the new pass's are not this caller's to take. */
static PyObject *loader_next(PyObject *self, PyObject *args)
{
	loader_obj *s = (loader_obj *)self;
	unsigned long long pass = 0;
	if (!PyArg_ParseTuple(args, "|K", &pass) || !loader_usable(s))
		return NULL;
	aug_batch b;
	ims_error err;
	ims_error_clear(&err);
	int rc;
	int stale = 0;
	double waited = 0;
	for (;;) {
		double t0 = ims_now();
		s->busy++;
		Py_BEGIN_ALLOW_THREADS
		pthread_mutex_lock(&s->use);
		stale = pass && s->passes != pass;
		rc = stale ? 0 : aug_loader_next_timed(s->l, &b, SIGNAL_SLICE, &err);
		pthread_mutex_unlock(&s->use);
		Py_END_ALLOW_THREADS
		s->busy--;
		waited += ims_now() - t0;
		if (stale)
			Py_RETURN_FALSE;
		if (s->stopped) {
			/* close() from another thread, waiting for us to leave:
			 * a batch just taken goes back first */
			if (rc == 0)
				aug_loader_release(s->l, &b, NULL);
			ims_py_fail(IMS_EINTR, "the loader was closed while waiting for a batch");
			return NULL;
		}
		if (rc != 2)
			break;
		/* a signal handler may close the loader: not busy here */
		if (PyErr_CheckSignals() < 0)
			return NULL;
		if (!loader_usable(s))
			return NULL;
	}
	if (rc == 1)
		Py_RETURN_NONE;
	if (rc < 0) {
		if (rc == IMS_ELIMIT) {
			/* every slot is viewed from Python: say what to do */
			ims_error e2;
			ims_fail(&e2, IMS_ELIMIT,
				 "cannot take the next batch: all %d batches of the loader's ring are still in use (arrays or tensors viewing earlier batches are alive); drop them, copy what you keep, or pass copy=True",
				 s->o.prefetch);
			return ims_py_raise(rc, &e2);
		}
		return ims_py_raise(rc, &err);
	}
	batch_obj *m = PyObject_New(batch_obj, &ims_py_batch_type);
	if (!m) {
		aug_loader_release(s->l, &b, NULL);
		return NULL;
	}
	Py_INCREF(s);
	m->owner = s;
	m->b = b;
	m->released = 0;
	s->exported++;
	const aug_transform_opts *tr = &s->o.transform;
	Py_ssize_t es = (Py_ssize_t)(aug_sample_bytes(tr) / ((size_t)tr->out_w * tr->out_h * 3));
	Py_ssize_t h = tr->out_h, w = tr->out_w;
	m->shape[0] = b.count;
	if (tr->layout == AUG_LAYOUT_NCHW) {
		m->shape[1] = 3, m->shape[2] = h, m->shape[3] = w;
	} else {
		m->shape[1] = h, m->shape[2] = w, m->shape[3] = 3;
	}
	m->strides[3] = es;
	for (int k = 2; k >= 0; k--)
		m->strides[k] = m->strides[k + 1] * m->shape[k + 1];
	return Py_BuildValue("(Ny#y#y#iKKd)", (PyObject *)m, (const char *)b.labels,
			     (Py_ssize_t)b.count * 4, (const char *)b.indices,
			     (Py_ssize_t)b.count * 8, (const char *)b.padded, (Py_ssize_t)b.count,
			     b.count, (unsigned long long)b.epoch, (unsigned long long)b.step, waited);
}

static PyObject *loader_close(PyObject *self, PyObject *unused)
{
	(void)unused;
	loader_obj *s = (loader_obj *)self;
	loader_forget_if_forked(s);
	if (s->l && !s->stopped) {
		/* first: no call enters from now on */
		s->stopped = 1;
		/* a thread inside next() or start_epoch() leaves within a
		 * slice; it needs the GIL to, and then sees stopped. Not
		 * while the interpreter finalizes: a daemon thread asking for
		 * the GIL then never gets it (close() from a __del__ at exit
		 * waited for ever). Holding `use` is what stopping needs, as
		 * its holder lets it go before asking for the GIL; a loader
		 * still busy is left unfreed to the process's end. */
		while (s->busy > 0 && !IMS_PY_FINALIZING()) {
			Py_BEGIN_ALLOW_THREADS
			sleep_ms(1);
			Py_END_ALLOW_THREADS
		}
		aug_loader *l = s->l;
		Py_BEGIN_ALLOW_THREADS
		pthread_mutex_lock(&s->use);
		aug_loader_stop(l);
		pthread_mutex_unlock(&s->use);
		Py_END_ALLOW_THREADS
	}
	loader_maybe_free(s);
	Py_RETURN_NONE;
}

static PyObject *loader_info(PyObject *self, PyObject *unused)
{
	(void)unused;
	loader_obj *s = (loader_obj *)self;
	if (!loader_usable(s))
		return NULL;
	uint64_t per = 0, pad = 0, drop = 0;
	aug_loader_share(s->l, &per, &pad, &drop);
	const aug_transform_opts *tr = &s->o.transform;
	/* the samples a batch's memory holds: the loader gives a batch
	 * larger than the share room for the share only (a caller that
	 * page-locks the batches registers this much) */
	uint64_t cap = (uint64_t)s->o.batch_size < per ? (uint64_t)s->o.batch_size : per;
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:i,s:i,s:s,s:s,s:i,s:i,s:K,s:n}", "batches_per_epoch",
			     (unsigned long long)aug_loader_batches_per_epoch(s->l),
			     "records_per_rank", (unsigned long long)per, "padded",
			     (unsigned long long)pad, "dropped", (unsigned long long)drop, "rank",
			     s->o.rank, "world", s->o.world, "layout",
			     tr->layout == AUG_LAYOUT_NHWC ? "nhwc" : "nchw", "dtype",
			     ims_py_dtype_names[tr->dtype], "size", tr->out_w, "batch_size",
			     s->o.batch_size, "batch_capacity", (unsigned long long)cap,
			     "sample_bytes", (Py_ssize_t)aug_sample_bytes(tr));
}

static PyObject *loader_stats(PyObject *self, PyObject *unused)
{
	(void)unused;
	loader_obj *s = (loader_obj *)self;
	/* in a forked child the stats' mutex may be held by a thread not there */
	if (loader_forked(s) && !loader_usable(s))
		return NULL;
	if (!s->l) {
		ims_py_fail(IMS_EINVAL, "the loader is closed");
		return NULL;
	}
	aug_loader_stats st;
	aug_loader_get_stats(s->l, &st);
	return ims_py_stats_dict(&st);
}

static PyObject *loader_exported(PyObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromSsize_t(((loader_obj *)self)->exported);
}

static PyObject *loader_closed(PyObject *self, void *closure)
{
	(void)closure;
	loader_obj *s = (loader_obj *)self;
	return PyBool_FromLong(!s->l || s->stopped);
}

static void loader_dealloc(PyObject *self)
{
	loader_obj *s = (loader_obj *)self;
	/* no BatchMemory can be alive: each holds a reference to us */
	loader_forget_if_forked(s);
	if (s->l) {
		aug_loader *l = s->l;
		s->l = NULL;
		Py_BEGIN_ALLOW_THREADS
		aug_loader_close(l);
		Py_END_ALLOW_THREADS
	}
	Py_CLEAR(s->manifest);
	if (s->use_ready)
		pthread_mutex_destroy(&s->use);
	Py_TYPE(self)->tp_free(self);
}

static PyMethodDef loader_methods[] = {
	{"start_epoch", loader_start_epoch, METH_O,
	 "start_epoch(e) -> pass number: produce epoch e's batches"},
	{"next", loader_next, METH_VARARGS,
	 "next(pass=0) -> batch tuple, None at the end of the epoch, False when a newer pass\n"
	 "than `pass` (start_epoch's number) ended it"},
	{"close", loader_close, METH_NOARGS,
	 "close(): stop the threads now; the ring is freed once no batch is viewed"},
	{"info", loader_info, METH_NOARGS, "info() -> dict: shares, shapes"},
	{"stats", loader_stats, METH_NOARGS, "stats() -> dict (aug_loader_stats)"},
	{NULL, NULL, 0, NULL}};

static PyGetSetDef loader_getset[] = {
	{"exported", loader_exported, NULL, "batches whose memory is still viewed", NULL},
	{"closed", loader_closed, NULL, "whether close() was called", NULL},
	{NULL, NULL, NULL, NULL, NULL}};

PyTypeObject ims_py_loader_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "imshard._imshard.Loader",
	.tp_basicsize = sizeof(loader_obj),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
	.tp_doc = "Loader(manifest, ...): aug_loader, batches held until their memory is dropped.",
	.tp_new = PyType_GenericNew,
	.tp_init = loader_init,
	.tp_dealloc = loader_dealloc,
	.tp_methods = loader_methods,
	.tp_getset = loader_getset,
};

/* ---- BatchMemory: one batch's images ------------------------------------ */

static const char *buffer_format(aug_dtype d)
{
	switch (d) {
	case AUG_DTYPE_U8:
		return "B";
	case AUG_DTYPE_F32:
		return "f";
	case AUG_DTYPE_F16:
		return "e";
	default:
		return "H"; /* bfloat16 bits; the Python side views them */
	}
}

/*
 * The images are one C-contiguous block: any request but a Fortran-ordered
 * one is served. A request without PyBUF_ND (PyBUF_SIMPLE: hashlib, file
 * writes, bytes()) gets what the protocol promises it, one dimension of
 * unsigned bytes; with PyBUF_ND, the 4-d shape, and the strides only when
 * asked for.
 */
static int batch_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
	batch_obj *m = (batch_obj *)self;
	view->obj = NULL;
	if (m->released) {
		PyErr_SetString(PyExc_BufferError, "the batch was given back to the loader");
		return -1;
	}
	int wide = 0; /* dimensions longer than 1: Fortran order too if at most one */
	for (int k = 0; k < 4; k++)
		wide += m->shape[k] > 1;
	if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && wide > 1) {
		PyErr_SetString(PyExc_BufferError,
				"a batch's images are C-contiguous, not Fortran-contiguous");
		return -1;
	}
	const aug_transform_opts *tr = &m->owner->o.transform;
	view->obj = self;
	Py_INCREF(self);
	view->buf = m->b.data;
	view->len = m->shape[0] * m->strides[0];
	view->readonly = 0;
	if (flags & PyBUF_ND) {
		view->itemsize = m->strides[3];
		view->format = (flags & PyBUF_FORMAT) ? (char *)buffer_format(tr->dtype) : NULL;
		view->ndim = 4;
		view->shape = m->shape;
		view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? m->strides : NULL;
	} else {
		view->itemsize = 1;
		view->format = (flags & PyBUF_FORMAT) ? (char *)"B" : NULL;
		view->ndim = 1;
		view->shape = NULL;
		view->strides = NULL;
	}
	view->suboffsets = NULL;
	view->internal = NULL;
	return 0;
}

static PyBufferProcs batch_buffer = {batch_getbuffer, NULL};

static void batch_dealloc(PyObject *self)
{
	batch_obj *m = (batch_obj *)self;
	loader_obj *s = m->owner;
	if (s) {
		loader_forget_if_forked(s);
		if (s->l && !m->released)
			aug_loader_release(s->l, &m->b, NULL);
		s->exported--;
		loader_maybe_free(s);
		Py_DECREF(s);
	}
	PyObject_Free(self);
}

static PyObject *batch_nbytes(PyObject *self, void *closure)
{
	(void)closure;
	batch_obj *m = (batch_obj *)self;
	return PyLong_FromSsize_t(m->shape[0] * m->strides[0]);
}

static PyObject *batch_address(PyObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromVoidPtr(((batch_obj *)self)->b.data);
}

static PyGetSetDef batch_getset[] = {
	{"nbytes", batch_nbytes, NULL, "bytes of the batch's images", NULL},
	{"address", batch_address, NULL, "address of the batch's images in the ring", NULL},
	{NULL, NULL, NULL, NULL, NULL}};

PyTypeObject ims_py_batch_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "imshard._imshard.BatchMemory",
	.tp_basicsize = sizeof(batch_obj),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "One batch's images in the loader's ring (buffer protocol). The ring slot\n"
		  "goes back to the loader when this object is deallocated.",
	.tp_dealloc = batch_dealloc,
	.tp_as_buffer = &batch_buffer,
	.tp_getset = batch_getset,
};

/* ---- bench_load --------------------------------------------------------- */

typedef struct {
	PyThreadState *ts;
	volatile int cancel;
	int signalled;
} bench_ctx;

/* While a batch is awaited, every AUG_BENCH_WAIT_SLICE: a look for Ctrl-C
 * (with the GIL, briefly), which then stops the run there rather than
 * once a slow batch is made. */
static void bench_waiting(void *ctx)
{
	bench_ctx *c = ctx;
	if (c->signalled)
		return; /* a second look would replace the first exception */
	PyEval_RestoreThread(c->ts);
	if (PyErr_CheckSignals() < 0) {
		c->cancel = 1;
		c->signalled = 1;
	}
	c->ts = PyEval_SaveThread();
}

/* Between batches: the same look. */
static void bench_progress(void *ctx, uint64_t batches, uint64_t total)
{
	(void)batches;
	(void)total;
	bench_waiting(ctx);
}

PyObject *ims_py_bench_load(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	aug_bench_opts bo;
	aug_bench_opts_init(&bo);
	PyObject *manifest = NULL;
	if (ims_py_loader_opts_from(args, kw, &bo.loader, &manifest, &bo.epochs, &bo.seconds) < 0) {
		Py_XDECREF(manifest);
		return NULL;
	}
	/* as the command: no limit at all would run for ever */
	if (bo.seconds == 0 && bo.epochs == 0) {
		Py_XDECREF(manifest);
		return ims_py_arg_error("seconds=0 (no time limit) needs epochs");
	}
	bench_ctx c = {NULL, 0, 0};
	bo.cancel = &c.cancel;
	bo.progress = bench_progress;
	bo.waiting = bench_waiting;
	bo.ctx = &c;
	aug_bench_result r;
	ims_error err;
	ims_error_clear(&err);
	ims_py_loader_events ev;
	ims_py_events_begin(&bo.loader, &ev);
	ims_py_guard_maps();
	c.ts = PyEval_SaveThread();
	int rc = aug_bench_run(&bo, &r, &err);
	PyEval_RestoreThread(c.ts);
	Py_DECREF(manifest);
	if (c.signalled)
		return NULL; /* the KeyboardInterrupt (or the handler's exception) */
	if (rc < 0)
		return ims_py_raise(rc, &err);
	if (ims_py_events_end(&bo.loader, &ev) < 0)
		return NULL;
	return Py_BuildValue("{s:K,s:K,s:d,s:d,s:d,s:d,s:K,s:K,s:K,s:K,s:i,s:N}", "images",
			     (unsigned long long)r.images, "batches", (unsigned long long)r.batches,
			     "seconds", r.seconds, "images_per_s", r.images_per_s, "epochs", r.epochs,
			     "stall_fraction", r.stall_fraction, "batches_per_epoch",
			     (unsigned long long)r.batches_per_epoch, "records_per_rank",
			     (unsigned long long)r.records_per_rank, "padded",
			     (unsigned long long)r.padded, "dropped", (unsigned long long)r.dropped,
			     "threads", r.threads, "stats", ims_py_stats_dict(&r.stats));
}
