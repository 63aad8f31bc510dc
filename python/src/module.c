/*
 * module.c - imshard._imshard: exceptions, the module table, and the small
 * stateless calls (rank partition, one-image decode).
 */
#include "ext.h"

#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "augment/augment.h"
#include "recordio/recordio.h"

PyObject *ims_py_error;
PyObject *ims_py_argument_error;

/* The libraries' messages name the command's flags where they give a
 * remedy ("use --force to replace it", "give --max-label N"); from
 * Python the remedy is the keyword, so the message says that instead.
 * Only these exact spellings: other text (a quoted command, another
 * tool's flag) is left as it is. */
static const struct {
	const char *flag, *keyword;
} remedies[] = {{"--force", "force=True"},
		{"--max-label N", "max_label=N"},
		{"--max-label ", "max_label="},
		{"--classes FILE", "classes=[names]"},
		{"--max-errors ", "max_errors="},
		{"--shard-size", "shard_size"}};

static const char *python_remedy(const char *msg, char *buf, size_t size)
{
	const char *in = msg;
	size_t len = 0;
	buf[0] = 0;
	while (*in && len + 1 < size) {
		size_t k, n = sizeof(remedies) / sizeof(remedies[0]);
		for (k = 0; k < n; k++)
			if (strncmp(in, remedies[k].flag, strlen(remedies[k].flag)) == 0)
				break;
		const char *put = k < n ? remedies[k].keyword : in;
		size_t take = k < n ? strlen(put) : 1;
		if (take > size - 1 - len)
			take = size - 1 - len;
		memcpy(buf + len, put, take);
		len += take;
		in += k < n ? strlen(remedies[k].flag) : 1;
	}
	buf[len] = 0;
	return buf;
}

PyObject *ims_py_raise(int code, const ims_error *e)
{
	PyObject *type = code == IMS_EINVAL ? ims_py_argument_error : ims_py_error;
	char remedy[sizeof(e->msg) + 64];
	const char *msg = python_remedy(e && e->msg[0] ? e->msg : ims_strerror(code),
					remedy, sizeof(remedy));
	/* messages quote paths and names as they are: bytes that are not
	 * UTF-8 (or a multibyte character cut at the message's end) are
	 * shown as \xHH rather than failing with a UnicodeDecodeError */
	PyObject *text = ims_py_text(msg);
	if (!text)
		return NULL;
	PyObject *exc = PyObject_CallFunctionObjArgs(type, text, NULL);
	Py_DECREF(text);
	if (!exc)
		return NULL;
	PyObject *c = PyLong_FromLong(code);
	PyObject *k = PyUnicode_FromString(ims_strerror(code));
	if (c && k) {
		PyObject_SetAttrString(exc, "code", c);
		PyObject_SetAttrString(exc, "kind", k);
	}
	Py_XDECREF(c);
	Py_XDECREF(k);
	PyErr_SetObject(type, exc);
	Py_DECREF(exc);
	return NULL;
}

PyObject *ims_py_text(const char *s)
{
	return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "backslashreplace");
}

PyObject *ims_py_arg_error(const char *fmt, ...)
{
	ims_error e;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
	va_end(ap);
	e.code = IMS_EINVAL;
	return ims_py_raise(IMS_EINVAL, &e);
}

PyObject *ims_py_fspath(PyObject *o)
{
	PyObject *b = NULL;
	if (!PyUnicode_FSConverter(o, &b))
		return NULL;
	return b;
}

/* Bytes as "12.0 GiB" for a message. */
static const char *human_bytes(double b, char *buf, size_t len)
{
	static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"};
	int u = 0;
	while (b >= 1024 && u < 7) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
	return buf;
}

/*
 * partition(n, rank, world, epoch, seed, shuffle, pad, offset) -> list of
 * indices: rio_partition, the rank share every loader takes. The share and
 * the epoch's order (n indices when shuffled) are 8 bytes an index, and
 * the list 8 more per index of the share: a size past the machine's
 * memory is refused up front, naming it (before: a bare MemoryError, or a
 * byte count that wrapped past 2^64 and a write past the allocation; and
 * malloc's NULL is no answer to count on: overcommit, or a sanitizer's
 * allocator, may give none). The shuffle runs with the GIL released.
 */
static PyObject *py_partition(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *names[] = {"n", "rank", "world", "epoch", "seed", "shuffle", "pad",
				"offset", NULL};
	unsigned long long n, epoch = 0, seed = 0, offset = 0;
	int rank, world, shuffle = 1, pad = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "Kii|KKppK", names, &n, &rank, &world,
					 &epoch, &seed, &shuffle, &pad, &offset))
		return NULL;
	if (world < 1 || rank < 0 || rank >= world)
		return ims_py_arg_error("rank %d is not in a world of %d", rank, world);
	rio_partition_opts po;
	rio_partition_opts_init(&po);
	po.n = n;
	po.rank = rank;
	po.world = world;
	po.epoch = epoch;
	po.seed = seed;
	po.shuffle = shuffle;
	po.remainder = pad ? RIO_REMAINDER_PAD : RIO_REMAINDER_DROP;
	po.offset = offset;
	uint64_t per = rio_partition_count(&po);
	/* what the call needs at the least: the share, the order, the list */
	double need = 8.0 * (double)per + (shuffle ? 8.0 * (double)n : 0) +
		      (double)sizeof(PyObject *) * (double)per;
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	double ram = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
	uint64_t *out = NULL;
	if (per <= (uint64_t)PY_SSIZE_T_MAX / 8 && (!shuffle || n <= (uint64_t)SIZE_MAX / 8) &&
	    !(ram > 0 && need > ram))
		out = PyMem_RawMalloc((per ? per : 1) * sizeof(uint64_t));
	if (!out) {
		char h[32], m[32];
		return PyErr_Format(PyExc_MemoryError,
				    "cannot partition %llu records: rank %d's share of %llu "
				    "indices needs %s or more (out of memory%s%s)",
				    n, rank, (unsigned long long)per,
				    human_bytes(need, h, sizeof(h)),
				    ram > 0 && need > ram ? ": the machine has " : "",
				    ram > 0 && need > ram ? human_bytes(ram, m, sizeof(m)) : "");
	}
	ims_error err;
	ims_error_clear(&err);
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = rio_partition(&po, out, NULL, &err);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		PyMem_RawFree(out);
		if (rc == IMS_ENOMEM) {
			char h[32];
			return PyErr_Format(PyExc_MemoryError,
					    "cannot partition %llu records: the epoch's order "
					    "needs %s (out of memory)",
					    n, human_bytes(8.0 * (double)n, h, sizeof(h)));
		}
		return ims_py_raise(rc, &err);
	}
	PyObject *list = PyList_New((Py_ssize_t)per);
	for (uint64_t i = 0; list && i < per; i++) {
		PyObject *v = PyLong_FromUnsignedLongLong(out[i]);
		if (!v) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, v);
	}
	PyMem_RawFree(out);
	return list;
}

/* decode(data, apply_orientation=True) -> (pixels bytes, height, width):
 * aug_decode to RGB, the decoder the packer and the loader use. */
static PyObject *py_decode(PyObject *self, PyObject *args, PyObject *kw)
{
	(void)self;
	static char *names[] = {"data", "apply_orientation", NULL};
	Py_buffer buf;
	int upright = 1;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|p", names, &buf, &upright))
		return NULL;
	aug_codec *c = NULL;
	aug_image img = {0};
	ims_error err;
	ims_error_clear(&err);
	aug_decode_opts o = {AUG_CHANNELS_RGB, 0, 0, upright};
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = aug_codec_create(&c, &err);
	if (rc == 0)
		rc = aug_decode(c, buf.buf, (size_t)buf.len, &o, &img, NULL, &err);
	Py_END_ALLOW_THREADS
	PyBuffer_Release(&buf);
	PyObject *res = NULL;
	if (rc < 0) {
		ims_py_raise(rc, &err);
	} else {
		PyObject *px = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)img.width * img.height * 3);
		if (px) {
			char *d = PyBytes_AS_STRING(px);
			for (int y = 0; y < img.height; y++)
				memcpy(d + (size_t)y * (size_t)img.width * 3,
				       img.pixels + (size_t)y * img.stride, (size_t)img.width * 3);
			res = Py_BuildValue("(Nii)", px, img.height, img.width);
		}
	}
	aug_image_release(&img);
	aug_codec_destroy(c);
	return res;
}

static PyMethodDef methods[] = {
	{"partition", (PyCFunction)(void (*)(void))py_partition, METH_VARARGS | METH_KEYWORDS,
	 "partition(n, rank, world, epoch=0, seed=0, shuffle=True, pad=False, offset=0) -> list\n"
	 "Rank `rank`'s share of an epoch of n records from position `offset` of its\n"
	 "order on (rio_partition)."},
	{"decode", (PyCFunction)(void (*)(void))py_decode, METH_VARARGS | METH_KEYWORDS,
	 "decode(data, apply_orientation=True) -> (bytes, height, width)\n"
	 "Decodes JPEG or PNG bytes to 8-bit RGB with the C decoder."},
	{"bench_load", (PyCFunction)(void (*)(void))ims_py_bench_load, METH_VARARGS | METH_KEYWORDS,
	 "bench_load(manifest, **options) -> dict (aug_bench_run)."},
	{"pack", (PyCFunction)(void (*)(void))ims_py_pack, METH_VARARGS | METH_KEYWORDS,
	 "pack(rows, classes, root, out_dir, name, **options) -> dict (pack_run)."},
	{"convert", (PyCFunction)(void (*)(void))ims_py_convert, METH_VARARGS | METH_KEYWORDS,
	 "convert(dataset, root, out, **options) -> dict."},
	{NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_imshard",
				    "imshard's C libraries (use the imshard package).", -1,
				    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__imshard(void)
{
	PyObject *m = PyModule_Create(&module);
	if (!m)
		return NULL;
	ims_py_error = PyErr_NewExceptionWithDoc(
		"imshard.Error",
		"A failure reported by imshard's C libraries; str() is their one-line\n"
		"message, `code` the negative status code, `kind` its description.",
		PyExc_OSError, NULL);
	PyObject *bases = ims_py_error ? PyTuple_Pack(2, ims_py_error, PyExc_ValueError) : NULL;
	ims_py_argument_error = bases ? PyErr_NewExceptionWithDoc(
						"imshard.ArgumentError",
						"A bad argument or option (also a ValueError).",
						bases, NULL) :
					NULL;
	Py_XDECREF(bases);
	if (!ims_py_argument_error || PyType_Ready(&ims_py_split_type) < 0 ||
	    PyType_Ready(&ims_py_loader_type) < 0 || PyType_Ready(&ims_py_batch_type) < 0)
		goto fail;
	Py_INCREF(ims_py_error);
	Py_INCREF(ims_py_argument_error);
	Py_INCREF(&ims_py_split_type);
	Py_INCREF(&ims_py_loader_type);
	Py_INCREF(&ims_py_batch_type);
	if (PyModule_AddObject(m, "Error", ims_py_error) < 0 ||
	    PyModule_AddObject(m, "ArgumentError", ims_py_argument_error) < 0 ||
	    PyModule_AddObject(m, "Split", (PyObject *)&ims_py_split_type) < 0 ||
	    PyModule_AddObject(m, "Loader", (PyObject *)&ims_py_loader_type) < 0 ||
	    PyModule_AddObject(m, "BatchMemory", (PyObject *)&ims_py_batch_type) < 0 ||
	    PyModule_AddStringConstant(m, "version", IMS_VERSION_STRING) < 0)
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
