/*
 * module.c - imshard._imshard: exceptions, the module table, and the small
 * stateless calls (rank partition, one-image decode).
 */
#include "ext.h"

#include <ctype.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "augment/augment.h"
#include "recordio/recordio.h"

PyObject *ims_py_error;
PyObject *ims_py_argument_error;
PyObject *ims_py_memory_error;

/*
 * The libraries' messages name the command's flags where they give a
 * remedy ("use --force to replace it", "give --max-label N", "(use
 * --recursive to ...)"); from Python the remedy is the keyword of the
 * call that met it, so each call's messages are spelt with its own
 * table: a flag with a value becomes the keyword, "=" joining a value
 * or metavariable that follows ("--max-errors 5" -> "max_errors=5"), a
 * flag without one what passing it is ("--force" -> "force=True",
 * "--no-shuffle" -> "shuffle=False"). Only a whole flag of the table is
 * changed, outside quotes: another tool's flag, and a quoted path, name
 * or command ('imshard verify --rehash') are left as they are.
 */
/* The pack options, which both take under one name */
#define PACK_OPTION_FLAGS                                                      \
	{"--force", "force=True", 0}, {"--max-errors", "max_errors", 1},       \
	{"--shard-size", "shard_size", 1}, {"--shards", "shards", 1},          \
	{"--encoding", "encoding", 1}, {"--resize", "resize", 1},              \
	{"--max-size", "max_size", 1}, {"--center-crop", "center_crop=True", 0}, \
	{"--quality", "quality", 1}, {"--threads", "threads", 1},              \
	{"--check-decode", "check_decode=True", 0}, {"--seed", "seed", 1}

const ims_py_flag ims_py_pack_flags[] = {
	PACK_OPTION_FLAGS,
	{"--classes FILE", "classes=[names]", 0}, /* before "--classes" */
	{"--classes", "classes", 0},
	{"--max-label", "max_label", 1},
	{"--shuffle", "shuffle=True", 0},
	{"--order", "order", 1},
	{NULL, NULL, 0}};

const ims_py_flag ims_py_convert_flags[] = {
	PACK_OPTION_FLAGS,
	{"--no-shuffle", "shuffle=False", 0},
	{"--val-ratio", "val_ratio", 1},
	{"--test-ratio", "test_ratio", 1},
	{"--no-clutter", "no_clutter=True", 0},
	{"--label", "label", 1},
	{"--classes", "classes", 1},
	{"--recursive", "recursive=True", 0},
	{"--exts", "exts", 1},
	{"--per-class-train", "per_class_train", 1},
	{"--per-class-val", "per_class_val", 1},
	{"--per-class-test", "per_class_test", 1},
	{"--train-total", "train_total", 1},
	{"--val-total", "val_total", 1},
	{"--allow-short", "allow_short=True", 0},
	{NULL, NULL, 0}};

static int flag_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* What follows a flag's space is its value: a number (nan and inf
 * too) or a metavariable ("N", "FILE"), not a word of the sentence. */
static int value_follows(const char *p)
{
	if (p[0] != ' ')
		return 0;
	p++;
	if (*p == '-')
		p++;
	return (*p >= '0' && *p <= '9') || *p == '.' || (*p >= 'A' && *p <= 'Z') ||
	       ((strncmp(p, "nan", 3) == 0 || strncmp(p, "inf", 3) == 0) && !flag_char(p[3]));
}

/* The flag of the table that starts at in, or NULL. */
static const ims_py_flag *flag_at(const char *in, const char *msg, const ims_py_flag *flags)
{
	if (in[0] != '-' || in[1] != '-' || (in > msg && flag_char(in[-1])))
		return NULL;
	for (const ims_py_flag *f = flags; f && f->flag; f++) {
		size_t n = strlen(f->flag);
		if (strncmp(in, f->flag, n) == 0 && !flag_char(in[n]))
			return f;
	}
	return NULL;
}

static const char *spell(const char *msg, const ims_py_flag *flags, char *buf, size_t size)
{
	const char *in = msg;
	size_t len = 0;
	int quoted = 0; /* inside '...': a path, a name, a command */
	buf[0] = 0;
	while (*in && len + 1 < size) {
		/* a quote, not the apostrophe of "rank's" */
		if (*in == '\'' && !(in > msg && isalnum((unsigned char)in[-1]) &&
				     isalpha((unsigned char)in[1])))
			quoted = !quoted;
		const ims_py_flag *f = quoted ? NULL : flag_at(in, msg, flags);
		const char *put = f ? f->keyword : in;
		size_t take = f ? strlen(put) : 1;
		if (take > size - 1 - len)
			take = size - 1 - len;
		memcpy(buf + len, put, take);
		len += take;
		in += f ? strlen(f->flag) : 1;
		if (f && f->value && value_follows(in) && len + 1 < size) {
			buf[len++] = '=';
			in++;
		}
	}
	buf[len] = 0;
	return buf;
}

PyObject *ims_py_text_as(const char *s, const ims_py_flag *flags)
{
	size_t size = 2 * strlen(s) + 64; /* a keyword is at most twice its flag */
	char *buf = PyMem_Malloc(size);
	if (!buf)
		return PyErr_NoMemory();
	PyObject *text = ims_py_text(spell(s, flags, buf, size));
	PyMem_Free(buf);
	return text;
}

PyObject *ims_py_raise(int code, const ims_error *e)
{
	return ims_py_raise_as(code, e, NULL);
}

/* An instance of type with message text, `code` and `kind` set; NULL
 * with an exception set when it cannot be made. */
static PyObject *make_error(PyObject *type, PyObject *text, int code)
{
	PyObject *exc = PyObject_CallFunctionObjArgs(type, text, NULL);
	if (!exc)
		return NULL;
	PyObject *c = PyLong_FromLong(code);
	PyObject *k = PyUnicode_FromString(ims_strerror(code));
	if (!c || !k || PyObject_SetAttrString(exc, "code", c) < 0 ||
	    PyObject_SetAttrString(exc, "kind", k) < 0)
		Py_CLEAR(exc);
	Py_XDECREF(c);
	Py_XDECREF(k);
	return exc;
}

PyObject *ims_py_raise_as(int code, const ims_error *e, const ims_py_flag *flags)
{
	PyObject *type = code == IMS_EINVAL ? ims_py_argument_error :
			 code == IMS_ENOMEM ? ims_py_memory_error : ims_py_error;
	/* messages quote paths and names as they are: bytes that are not
	 * UTF-8 (or a multibyte character cut at the message's end) are
	 * shown as \xHH rather than failing with a UnicodeDecodeError */
	PyObject *text = ims_py_text_as(e && e->msg[0] ? e->msg : ims_strerror(code), flags);
	if (!text)
		return NULL;
	PyObject *exc = make_error(type, text, code);
	Py_DECREF(text);
	if (!exc)
		return NULL;
	PyErr_SetObject(type, exc);
	Py_DECREF(exc);
	return NULL;
}

PyObject *ims_py_fail(int code, const char *fmt, ...)
{
	char msg[IMS_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	PyObject *text = ims_py_text(msg);
	PyObject *exc = text ? make_error(ims_py_error, text, code) : NULL;
	Py_XDECREF(text);
	if (exc) {
		PyErr_SetObject(ims_py_error, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* error(code, message) -> imshard.Error with code and kind set: the
 * Python layer's own failures carry them as the libraries' do. */
static PyObject *py_error(PyObject *self, PyObject *args)
{
	(void)self;
	int code;
	PyObject *text;
	if (!PyArg_ParseTuple(args, "iU", &code, &text))
		return NULL;
	return make_error(ims_py_error, text, code);
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

void ims_py_guard_maps(void)
{
	/* best effort: sigaction fails only for a bad signal number */
	(void)ims_mapguard_install_over("imshard");
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
 * the list 40 more per index of the share (an entry and its int
 * object): a size past the machine's
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
	/* what the call needs at the least: the share, the order, and the
	 * list, each of whose entries points to an int object of its own
	 * (32 bytes for an index past 256) */
	double need = 8.0 * (double)per + (shuffle ? 8.0 * (double)n : 0) +
		      ((double)sizeof(PyObject *) + 32.0) * (double)per;
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	double ram = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
	uint64_t *out = NULL;
	if (per <= (uint64_t)PY_SSIZE_T_MAX / 8 && (!shuffle || n <= (uint64_t)SIZE_MAX / 8) &&
	    !(ram > 0 && need > ram))
		out = PyMem_RawMalloc((per ? per : 1) * sizeof(uint64_t));
	/* imshard.OutOfMemoryError, as the loader's and pack's: an
	 * imshard.Error and a MemoryError both */
	ims_error err;
	ims_error_clear(&err);
	if (!out) {
		char h[32], m[32];
		ims_fail(&err, IMS_ENOMEM,
			 "cannot partition %llu records: rank %d's share of %llu "
			 "indices needs %s or more (out of memory%s%s)",
			 n, rank, (unsigned long long)per, human_bytes(need, h, sizeof(h)),
			 ram > 0 && need > ram ? ": the machine has " : "",
			 ram > 0 && need > ram ? human_bytes(ram, m, sizeof(m)) : "");
		return ims_py_raise(IMS_ENOMEM, &err);
	}
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = rio_partition(&po, out, NULL, &err);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		PyMem_RawFree(out);
		if (rc == IMS_ENOMEM) {
			char h[32];
			ims_fail(&err, IMS_ENOMEM,
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
	{"error", py_error, METH_VARARGS,
	 "error(code, message) -> imshard.Error with `code` and `kind` set"},
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
	/* code and kind as class attributes too: an ArgumentError raised
	 * by the Python layer carries them as the libraries' IMS_EINVAL does */
	PyObject *attrs = Py_BuildValue("{s:i,s:s}", "code", IMS_EINVAL, "kind",
					ims_strerror(IMS_EINVAL));
	ims_py_argument_error = bases && attrs ? PyErr_NewExceptionWithDoc(
							 "imshard.ArgumentError",
							 "A bad argument or option (also a ValueError).",
							 bases, attrs) :
						 NULL;
	Py_XDECREF(bases);
	Py_XDECREF(attrs);
	/* an allocation the libraries could not make: a MemoryError, which
	 * is what a Python program catches for running out of memory, and
	 * still an imshard.Error with code and kind, as before */
	bases = ims_py_error ? PyTuple_Pack(2, ims_py_error, PyExc_MemoryError) : NULL;
	attrs = Py_BuildValue("{s:i,s:s}", "code", IMS_ENOMEM, "kind", ims_strerror(IMS_ENOMEM));
	ims_py_memory_error = bases && attrs ? PyErr_NewExceptionWithDoc(
						       "imshard.OutOfMemoryError",
						       "Memory the C libraries could not allocate (also a "
						       "MemoryError).",
						       bases, attrs) :
					       NULL;
	Py_XDECREF(bases);
	Py_XDECREF(attrs);
	if (!ims_py_argument_error || !ims_py_memory_error ||
	    PyType_Ready(&ims_py_split_type) < 0 || PyType_Ready(&ims_py_loader_type) < 0 ||
	    PyType_Ready(&ims_py_batch_type) < 0)
		goto fail;
	Py_INCREF(ims_py_error);
	Py_INCREF(ims_py_argument_error);
	Py_INCREF(ims_py_memory_error);
	Py_INCREF(&ims_py_split_type);
	Py_INCREF(&ims_py_loader_type);
	Py_INCREF(&ims_py_batch_type);
	if (PyModule_AddObject(m, "Error", ims_py_error) < 0 ||
	    PyModule_AddObject(m, "ArgumentError", ims_py_argument_error) < 0 ||
	    PyModule_AddObject(m, "OutOfMemoryError", ims_py_memory_error) < 0 ||
	    PyModule_AddObject(m, "Split", (PyObject *)&ims_py_split_type) < 0 ||
	    PyModule_AddObject(m, "Loader", (PyObject *)&ims_py_loader_type) < 0 ||
	    PyModule_AddObject(m, "BatchMemory", (PyObject *)&ims_py_batch_type) < 0 ||
	    PyModule_AddStringConstant(m, "version", IMS_VERSION_STRING) < 0)
		goto fail;
	/* the status codes, for the Python layer's own failures (error()) */
	static const struct {
		const char *name;
		int code;
	} codes[] = {{"EIO", IMS_EIO},		 {"ENOMEM", IMS_ENOMEM},
		     {"ECORRUPT", IMS_ECORRUPT}, {"EFORMAT", IMS_EFORMAT},
		     {"EINVAL", IMS_EINVAL},	 {"ELIMIT", IMS_ELIMIT},
		     {"ENOTFOUND", IMS_ENOTFOUND}, {"ELMDB", IMS_ELMDB},
		     {"EEXIST", IMS_EEXIST},	 {"EINTR", IMS_EINTR},
		     {"EUNSUPPORTED", IMS_EUNSUPPORTED}, {"ECHANGED", IMS_ECHANGED}};
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (PyModule_AddIntConstant(m, codes[i].name, codes[i].code) < 0)
			goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
