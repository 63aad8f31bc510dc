/*
 * convert.c - imshard._imshard.convert: a dataset as downloaded into
 * packed splits through pack_convert, the workflow `imshard convert`
 * runs, with its notes, short classes and skipped files returned.
 */
#include "pack_common.h"

#include <string.h>
#include <sys/stat.h>

#include "datasets/datasets.h"
#include "recordio/recordio.h"

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
	ims_py_skip_log skips[DS_MAX_SPLITS]; /* per split, in packing order */
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
		ims_py_on_skipped(&l->skips[l->cur], row, path, why);
}

static void convert_log_release(convert_log *l)
{
	for (int i = 0; i < DS_MAX_SPLITS; i++) {
		ims_py_skip_log_release(&l->skips[i]);
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

static PyObject *split_dict(const pack_convert_split *r, const ims_py_skip_log *s)
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
			     "skipped_files", ims_py_skip_list(s));
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
				"totals", "allow_short", "shuffle", IMS_PY_PACK_KWS, NULL};
	const char *dataset, *label = NULL, *keep = NULL, *exts = NULL;
	PyObject *root, *out, *per_class = Py_None, *totals = Py_None;
	double val_ratio = -1, test_ratio = 0;
	int no_clutter = 0, recursive = 0, allow_short = 0, shuffle = 1;
	unsigned long long seed = 0;
	ims_py_pack_args a = {NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0};
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
	if (!splits || !notes || !shorts || ims_py_pack_args_apply(&a, &co.pack) < 0)
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
	ims_py_sig_guard g;
	ims_py_guard_begin(&g, a.main);
	co.pack.cancel = &g.cancel;
	int rc;
	Py_BEGIN_ALLOW_THREADS
	rc = pack_convert(&co, &rep, &err);
	Py_END_ALLOW_THREADS
	if (ims_py_guard_end(&g) < 0)
		goto out;
	int log_oom = log.oom;
	for (int i = 0; i < DS_MAX_SPLITS; i++)
		log_oom |= log.skips[i].oom;
	if (rc == 0 && log_oom) {
		char what[4200];
		snprintf(what, sizeof(what), "converted '%s' into '%s'", dataset, outp);
		ims_py_raise_log_oom(what, "skipped files and notes", NULL);
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
