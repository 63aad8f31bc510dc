/*
 * test_checkpoint.c - checkpoints and weight loading: the saved layout,
 * bit-exact resume of model and optimiser (and the step after it), --init
 * loading with head re-initialisation, missing and unexpected tensors,
 * half-precision files, a hand-written torchvision file, and refusals that
 * leave the model untouched.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "nn_test_util.h"
#include "test.h"
#include "train/nn_internal.h"
#include "train/checkpoint.h"

static nn_ctx ctx;
static char dir[4096];

static void path_in(char *out, size_t n, const char *name)
{
	if ((size_t)snprintf(out, n, "%s/%s", dir, name) >= n) {
		fprintf(stderr, "scratch path too long\n");
		exit(1);
	}
}

static void die(const char *what, const ims_error *e)
{
	fprintf(stderr, "%s: %s\n", what, e->msg);
	exit(1);
}

static nn_model *make(const char *name, int classes, int hw, uint64_t seed)
{
	ims_error e;
	nn_model *m = NULL;
	if (nn_model_create(&ctx, name, classes, hw, hw, 2, seed, &m, &e))
		die("nn_model_create", &e);
	return m;
}

/* Gives every parameter, buffer and counter a value of its own. */
static void scramble(nn_model *m, uint64_t seed)
{
	size_t np, nb, nc;
	float *p = nn_model_params(m, &np), *b = nn_model_buffers(m, &nb);
	nn_test_fill(p, np, seed, -1, 1);
	nn_test_fill(b, nb, seed + 1, 0.5f, 2);
	int64_t *c = nn_model_counters(m, &nc);
	for (size_t i = 0; i < nc; i++)
		c[i] = (int64_t)(1000 * seed + i + 1);
}

static nn_optim *make_optim(int kind, nn_model *m)
{
	ims_error e;
	nn_optim_opts o;
	nn_optim_opts_init(&o, kind);
	if (kind == NN_OPTIM_SGD) {
		o.momentum = 0.9;
		o.weight_decay = 1e-4;
	}
	size_t np;
	nn_model_params(m, &np);
	nn_optim *opt = NULL;
	if (nn_optim_create(&o, np, &opt, &e))
		die("nn_optim_create", &e);
	return opt;
}

/* One optimiser step from fake gradients drawn from seed. */
static void step(nn_model *m, nn_optim *opt, uint64_t seed)
{
	ims_error e;
	size_t np;
	float *g = nn_model_grads(m, &np);
	nn_test_fill(g, np, seed, -1, 1);
	CHECK_OK(nn_optim_step(opt, nn_model_params(m, NULL), g, NULL, 0, 0.01,
			       &e), &e);
}

/* Tensor ti's bytes in m. */
static const void *data_of(nn_model *m, const nn_tensor_info *ti, size_t *bytes)
{
	if (ti->kind == NN_TENSOR_COUNTER) {
		*bytes = ti->count * sizeof(int64_t);
		return nn_model_counters(m, NULL) + ti->offset;
	}
	*bytes = ti->count * sizeof(float);
	if (ti->kind == NN_TENSOR_RUNNING)
		return nn_model_buffers(m, NULL) + ti->offset;
	return nn_model_params(m, NULL) + ti->offset;
}

/* 1 when tensor `name` holds the same bits in a and b. */
static int same_named(nn_model *a, nn_model *b, const char *name)
{
	int ia = nn_model_find(a, name), ib = nn_model_find(b, name);
	if (ia < 0 || ib < 0)
		return 0;
	size_t na, nb;
	const void *pa = data_of(a, nn_model_tensor(a, ia), &na);
	const void *pb = data_of(b, nn_model_tensor(b, ib), &nb);
	return na == nb && memcmp(pa, pb, na) == 0;
}

/* Every tensor of a, bit for bit in b (padding between tensors aside). */
static int same_tensors(nn_model *a, nn_model *b)
{
	int ok = nn_model_tensor_count(a) == nn_model_tensor_count(b);
	for (int i = 0; ok && i < nn_model_tensor_count(a); i++)
		if (!same_named(a, b, nn_model_tensor(a, i)->name)) {
			fprintf(stderr, "tensor %s differs\n",
				nn_model_tensor(a, i)->name);
			ok = 0;
		}
	return ok;
}

/* Every state buffer of x and y over m's trained tensors, and the steps. */
static int same_state(nn_model *m, nn_optim *x, nn_optim *y)
{
	if (nn_optim_state_count(x) != nn_optim_state_count(y) ||
	    nn_optim_step_count(x) != nn_optim_step_count(y))
		return 0;
	for (size_t s = 0; s < nn_optim_state_count(x); s++)
		for (int i = 0; i < nn_model_tensor_count(m); i++) {
			const nn_tensor_info *ti = nn_model_tensor(m, i);
			if (ti->kind == NN_TENSOR_RUNNING ||
			    ti->kind == NN_TENSOR_COUNTER)
				continue;
			if (memcmp(nn_optim_state(x, s) + ti->offset,
				   nn_optim_state(y, s) + ti->offset,
				   ti->count * sizeof(float)) != 0)
				return 0;
		}
	return 1;
}

/* A copy of all of a model's storage, padding included. */
typedef struct snap {
	float *p, *b;
	int64_t *c;
	size_t np, nb, nc;
} snap;

static snap snap_take(nn_model *m)
{
	snap s;
	const float *p = nn_model_params(m, &s.np), *b = nn_model_buffers(m, &s.nb);
	const int64_t *c = nn_model_counters(m, &s.nc);
	s.p = nn_test_alloc(s.np);
	s.b = nn_test_alloc(s.nb);
	s.c = calloc(s.nc + 1, sizeof(int64_t));
	memcpy(s.p, p, s.np * sizeof(float));
	memcpy(s.b, b, s.nb * sizeof(float));
	memcpy(s.c, c, s.nc * sizeof(int64_t));
	return s;
}

static int snap_same(nn_model *m, const snap *s)
{
	return memcmp(nn_model_params(m, NULL), s->p, s->np * sizeof(float)) == 0 &&
	       memcmp(nn_model_buffers(m, NULL), s->b, s->nb * sizeof(float)) == 0 &&
	       memcmp(nn_model_counters(m, NULL), s->c, s->nc * sizeof(int64_t)) == 0;
}

static void snap_free(snap *s)
{
	free(s->p);
	free(s->b);
	free(s->c);
}

static int all_zero(const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] != 0)
			return 0;
	return 1;
}

static int report_empty(const nn_load_report *r)
{
	return r->loaded == 0 && !r->missing && !r->n_missing &&
	       !r->unexpected && !r->n_unexpected && !r->reinit && !r->n_reinit;
}

/* How write_variant changes a model's tensors on their way to a file. */
typedef struct variant {
	const char *const *skip;  /* left out; NULL-terminated, or NULL */
	const char *const *extra; /* added as F32 [2]; NULL-terminated, or NULL */
	int halves;               /* floats as F16, BF16, F64 by tensor index
				     mod 3; counters as I32 or F32 in turn */
	const char *reshape;      /* written with shape `to` (zeros) instead */
	int to_ndim;
	int64_t to[4];
} variant;

static int listed(const char *const *list, const char *name)
{
	for (; list && *list; list++)
		if (!strcmp(*list, name))
			return 1;
	return 0;
}

/* Writes m's tensors as v says to path (F32 and I64 unless told). */
static void write_variant(const char *path, nn_model *m, const variant *v)
{
	ims_error e;
	st_writer *w = NULL;
	if (st_writer_create(&w, &e))
		die("st_writer_create", &e);
	int nt = nn_model_tensor_count(m);
	void **bufs = calloc((size_t)nt + 1, sizeof(void *));
	static const float two[2] = {1.5f, -2.5f};
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *ti = nn_model_tensor(m, i);
		if (listed(v->skip, ti->name))
			continue;
		size_t bytes;
		const void *src = data_of(m, ti, &bytes);
		int dtype = ti->kind == NN_TENSOR_COUNTER ? ST_I64 : ST_F32;
		int ndim = ti->ndim;
		const int64_t *shape = ti->shape;
		const void *data = src;
		if (v->reshape && !strcmp(v->reshape, ti->name)) {
			size_t n = 1;
			for (int d = 0; d < v->to_ndim; d++)
				n *= (size_t)v->to[d];
			data = bufs[i] = nn_test_alloc(n);
			ndim = v->to_ndim;
			shape = v->to;
		} else if (v->halves && ti->kind == NN_TENSOR_COUNTER) {
			const int64_t *c = src;
			if (i % 2) {
				float *o = nn_test_alloc(ti->count);
				for (size_t k = 0; k < ti->count; k++)
					o[k] = (float)c[k];
				dtype = ST_F32;
				data = bufs[i] = o;
			} else {
				int32_t *o = calloc(ti->count, sizeof(int32_t));
				for (size_t k = 0; k < ti->count; k++)
					o[k] = (int32_t)c[k];
				dtype = ST_I32;
				data = bufs[i] = o;
			}
		} else if (v->halves) {
			const float *f = src;
			if (i % 3 == 2) {
				double *o = calloc(ti->count, sizeof(double));
				for (size_t k = 0; k < ti->count; k++)
					o[k] = f[k];
				dtype = ST_F64;
				data = bufs[i] = o;
			} else {
				uint16_t *o = calloc(ti->count, sizeof(uint16_t));
				for (size_t k = 0; k < ti->count; k++)
					o[k] = i % 3 ? ims_f32_to_bf16(f[k]) : ims_f32_to_f16(f[k]);
				dtype = i % 3 ? ST_BF16 : ST_F16;
				data = bufs[i] = o;
			}
		}
		if (st_writer_add(w, ti->name, dtype, ndim, shape, data, &e))
			die("st_writer_add", &e);
	}
	const int64_t s2[1] = {2};
	for (const char *const *x = v->extra; x && *x; x++)
		if (st_writer_add(w, *x, ST_F32, 1, s2, two, &e))
			die("st_writer_add", &e);
	if (st_writer_write(w, path, &e))
		die("st_writer_write", &e);
	st_writer_free(w);
	for (int i = 0; i < nt; i++)
		free(bufs[i]);
	free(bufs);
}

/* Copies the safetensors file src to dst without tensor `skip` (may be
 * NULL) and with `extra` (F32 [2], may be NULL) at the end: a file another
 * program wrote, without the checksum (the copy's content differs). */
static void copy_file(const char *src, const char *dst, const char *skip,
		      const char *extra)
{
	ims_error e;
	st_file *f = NULL;
	st_writer *w = NULL;
	if (st_open(src, &f, &e) || st_writer_create(&w, &e))
		die("copy_file", &e);
	for (size_t i = 0; i < st_count(f); i++) {
		const st_tensor *t = st_tensor_at(f, i);
		if (skip && !strcmp(t->name, skip))
			continue;
		if (st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, &e))
			die("st_writer_add", &e);
	}
	for (size_t i = 0; i < st_metadata_count(f); i++) {
		const char *value, *key = st_metadata_at(f, i, &value);
		if (strcmp(key, "checksum") && st_writer_set_metadata(w, key, value, &e))
			die("st_writer_set_metadata", &e);
	}
	static const float two[2] = {1, 2};
	const int64_t s2[1] = {2};
	if (extra && st_writer_add(w, extra, ST_F32, 1, s2, two, &e))
		die("st_writer_add", &e);
	if (st_writer_write(w, dst, &e))
		die("st_writer_write", &e);
	st_writer_free(w);
	st_close(f);
}

/* ---- tests -------------------------------------------------------------- */

/* The file's layout: model tensors first in state_dict order, then state. */
static void test_layout(void)
{
	ims_error e;
	char path[4300];
	path_in(path, sizeof(path), "layout.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 11);
	nn_optim *adam = make_optim(NN_OPTIM_ADAMW, a);
	step(a, adam, 21);
	step(a, adam, 22);
	const char *meta[] = {"epoch", "3", "arch", "convnet7", NULL};
	CHECK_OK(nn_checkpoint_save(path, a, adam, meta, &e), &e);

	st_file *f = NULL;
	CHECK_OK(st_open(path, &f, &e), &e);
	if (f) {
		int nt = nn_model_tensor_count(a), ntrained = 0;
		for (int i = 0; i < nt; i++) {
			const nn_tensor_info *ti = nn_model_tensor(a, i);
			CHECK_EQ_STR(st_tensor_at(f, (size_t)i)->name, ti->name);
			ntrained += ti->kind != NN_TENSOR_RUNNING &&
				    ti->kind != NN_TENSOR_COUNTER;
		}
		CHECK_EQ_U64(st_count(f), (uint64_t)(nt + 2 * ntrained + 1));
		CHECK_EQ_STR(st_tensor_at(f, (size_t)nt)->name,
			     "optim.exp_avg.features.0.weight");
		const st_tensor *t = st_find(f, "features.1.num_batches_tracked");
		CHECK(t && t->dtype == ST_I64 && t->ndim == 0);
		t = st_find(f, "features.1.running_var");
		CHECK(t && t->dtype == ST_F32 && t->ndim == 1 && t->shape[0] == 32);
		t = st_find(f, "optim.exp_avg_sq.classifier.3.weight");
		CHECK(t && t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == 5 &&
		      t->shape[1] == 256);
		CHECK(st_find(f, "optim.exp_avg.features.1.running_mean") == NULL);
		int64_t s = -1;
		t = st_find(f, "optim.step");
		CHECK(t && t->dtype == ST_I64 && t->ndim == 0);
		if (t)
			CHECK_OK(st_tensor_to_i64(t, &s, 1, &e), &e);
		CHECK_EQ_INT(s, 2);
		CHECK_EQ_STR(st_metadata_at(f, 0, &(const char *){NULL}), "format");
		CHECK_EQ_STR(st_metadata_get(f, "format"), "imshard-checkpoint-1");
		CHECK_EQ_STR(st_metadata_get(f, "epoch"), "3");
		CHECK_EQ_STR(st_metadata_get(f, "arch"), "convnet7");
		st_close(f);
	}

	/* without an optimiser: model tensors only (loads strictly in torch) */
	CHECK_OK(nn_checkpoint_save(path, a, NULL, NULL, &e), &e);
	f = NULL;
	CHECK_OK(st_open(path, &f, &e), &e);
	if (f) {
		CHECK_EQ_U64(st_count(f), (uint64_t)nn_model_tensor_count(a));
		CHECK(st_find(f, "optim.step") == NULL);
		CHECK_EQ_U64(st_metadata_count(f), 2); /* format, checksum */
		CHECK(st_metadata_get(f, "checksum") != NULL);
		st_close(f);
	}

	/* refusals */
	const char *reserved[] = {"format", "x", NULL};
	CHECK_EQ_INT(nn_checkpoint_save(path, a, NULL, reserved, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'format'") != NULL);
	const char *odd[] = {"epoch", NULL};
	CHECK_EQ_INT(nn_checkpoint_save(path, a, NULL, odd, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'epoch' has no value") != NULL);
	nn_optim_opts o;
	nn_optim_opts_init(&o, NN_OPTIM_SGD);
	nn_optim *small = NULL;
	CHECK_OK(nn_optim_create(&o, 10, &small, &e), &e);
	CHECK_EQ_INT(nn_checkpoint_save(path, a, small, NULL, &e), IMS_EINVAL);
	nn_optim_free(small);
	char bad[4300];
	path_in(bad, sizeof(bad), "no/such/dir/x.safetensors");
	CHECK_EQ_INT(nn_checkpoint_save(bad, a, adam, NULL, &e), IMS_EIO);
	CHECK(strstr(e.msg, "x.safetensors") != NULL);

	nn_optim_free(adam);
	nn_model_free(a);
}

/* Save, resume into a differently seeded model, continue one step: the
 * same bits as the original, for SGD with momentum and for AdamW. */
static void resume_kind(int kind, const char *file)
{
	ims_error e;
	char path[4300];
	path_in(path, sizeof(path), file);
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 11);
	nn_optim *oa = make_optim(kind, a);
	step(a, oa, 21);
	step(a, oa, 22);
	const char *meta[] = {"epoch", "3", "note", "r\xc3\xa9sum\xc3\xa9", NULL};
	CHECK_OK(nn_checkpoint_save(path, a, oa, meta, &e), &e);

	nn_model *b = make("convnet7", 5, 16, 2);
	nn_optim *ob = make_optim(kind, b);
	CHECK(!same_named(a, b, "features.0.weight"));
	st_file *f = NULL;
	CHECK_OK(nn_checkpoint_load_resume(path, b, ob, &f, &e), &e);
	CHECK(same_tensors(a, b));
	CHECK(same_state(a, oa, ob));
	CHECK_EQ_INT(nn_optim_step_count(ob), 2);
	CHECK(f != NULL);
	if (f) {
		CHECK_EQ_STR(st_metadata_get(f, "epoch"), "3");
		CHECK_EQ_STR(st_metadata_get(f, "note"), "r\xc3\xa9sum\xc3\xa9");
		CHECK_EQ_STR(st_metadata_get(f, "format"), "imshard-checkpoint-1");
		st_close(f);
	}
	/* model only: the optimiser's tensors are ignored */
	nn_model *c = make("convnet7", 5, 16, 3);
	CHECK_OK(nn_checkpoint_load_resume(path, c, NULL, NULL, &e), &e);
	CHECK(same_tensors(a, c));
	nn_model_free(c);

	step(a, oa, 31);
	step(b, ob, 31);
	CHECK(same_tensors(a, b));
	CHECK(same_state(a, oa, ob));

	nn_optim_free(oa);
	nn_optim_free(ob);
	nn_model_free(a);
	nn_model_free(b);
}

static void test_resume(void)
{
	resume_kind(NN_OPTIM_SGD, "resume-sgd.safetensors");
	resume_kind(NN_OPTIM_ADAMW, "resume-adamw.safetensors");
}

/* Resume failures name the tensor and change nothing. */
static void test_resume_refusals(void)
{
	ims_error e;
	char path[4300], alt[4300];
	path_in(path, sizeof(path), "refuse.safetensors");
	path_in(alt, sizeof(alt), "refuse-alt.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 12);
	nn_optim *oa = make_optim(NN_OPTIM_SGD, a);
	step(a, oa, 41);
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);

	nn_model *b = make("convnet7", 5, 16, 2);
	nn_optim *ob = make_optim(NN_OPTIM_SGD, b);
	snap sb = snap_take(b);
	size_t np;
	nn_model_params(b, &np);
	st_file *f = (st_file *)&e; /* must come back NULL */

	/* the last optimiser tensor: everything before it checked fine */
	copy_file(path, alt, "optim.momentum_buffer.classifier.3.bias", NULL);
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, ob, &f, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'optim.momentum_buffer.classifier.3.bias' is missing") != NULL);
	CHECK(strstr(e.msg, alt) != NULL);
	CHECK(f == NULL);
	CHECK(snap_same(b, &sb));
	CHECK(all_zero(nn_optim_state(ob, 0), np));
	CHECK_EQ_INT(nn_optim_step_count(ob), 0);
	/* ... which a model-only resume does not need */
	nn_model *c = make("convnet7", 5, 16, 3);
	CHECK_OK(nn_checkpoint_load_resume(alt, c, NULL, NULL, &e), &e);
	CHECK(same_tensors(a, c));
	nn_model_free(c);

	copy_file(path, alt, "optim.step", NULL);
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, ob, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'optim.step' is missing") != NULL);
	CHECK(snap_same(b, &sb));

	copy_file(path, alt, "classifier.3.bias", NULL);
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, NULL, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'classifier.3.bias' is missing") != NULL);
	CHECK(snap_same(b, &sb));

	copy_file(path, alt, NULL, "bogus.weight");
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, ob, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'bogus.weight' is not in model convnet7") != NULL);
	CHECK(snap_same(b, &sb));

	/* another optimiser kind */
	nn_optim *adam = make_optim(NN_OPTIM_ADAM, b);
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, b, adam, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'optim.exp_avg.features.0.weight' is missing") != NULL);
	nn_optim_free(adam);
	nn_optim_opts o;
	nn_optim_opts_init(&o, NN_OPTIM_SGD);
	nn_optim *plain = NULL;
	CHECK_OK(nn_optim_create(&o, np, &plain, &e), &e);
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, b, plain, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'optim.momentum_buffer.features.0.weight' is not state") != NULL);
	CHECK_EQ_INT(nn_optim_step_count(plain), 0);
	nn_optim_free(plain);
	CHECK(snap_same(b, &sb));

	/* another class count */
	nn_model *d = make("convnet7", 7, 16, 2);
	snap sd = snap_take(d);
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, d, NULL, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "tensor 'classifier.3.weight' has shape [5, 256] in the file, the model needs [7, 256]") != NULL);
	CHECK(snap_same(d, &sd));
	snap_free(&sd);
	nn_model_free(d);

	/* a half-precision file is for --init, not --resume */
	variant hv = {.halves = 1};
	write_variant(alt, a, &hv);
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, NULL, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'features.0.weight' has dtype F16") != NULL);
	CHECK(snap_same(b, &sb));

	CHECK_OK(nn_checkpoint_load_resume(path, b, ob, NULL, &e), &e);
	CHECK(same_tensors(a, b));
	CHECK(same_state(a, oa, ob));

	snap_free(&sb);
	nn_optim_free(oa);
	nn_optim_free(ob);
	nn_model_free(a);
	nn_model_free(b);
}

/* --init from a file with every tensor, and with a checkpoint's state. */
static void test_init_same(void)
{
	ims_error e;
	char path[4300];
	path_in(path, sizeof(path), "init.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 13);
	nn_optim *oa = make_optim(NN_OPTIM_SGD, a);
	step(a, oa, 51);
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);

	nn_model *b = make("convnet7", 5, 16, 2);
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b));
	CHECK_EQ_INT(r.n_missing, 0);
	CHECK_EQ_INT(r.n_unexpected, 0); /* optim.* is not reported */
	CHECK_EQ_INT(r.n_reinit, 0);
	CHECK(same_tensors(a, b));
	nn_load_report_release(&r);
	CHECK(report_empty(&r));
	nn_load_report_release(NULL);

	nn_model *c = make("convnet7", 5, 16, 3);
	CHECK_OK(nn_checkpoint_load_init(path, c, 0, NULL, &e), &e);
	CHECK(same_tensors(a, c));

	nn_optim_free(oa);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
}

/* Another class count: the head keeps its initialisation. */
static void test_init_head(void)
{
	ims_error e;
	char path[4300];
	path_in(path, sizeof(path), "head.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 14);
	CHECK_OK(nn_checkpoint_save(path, a, NULL, NULL, &e), &e);

	nn_model *b = make("convnet7", 7, 16, 2);
	nn_model *fresh = make("convnet7", 7, 16, 2);
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b) - 2);
	CHECK_EQ_INT(r.n_missing, 0);
	CHECK_EQ_INT(r.n_unexpected, 0);
	CHECK_EQ_INT(r.n_reinit, 2);
	if (r.n_reinit == 2) {
		CHECK_EQ_STR(r.reinit[0], "classifier.3.weight");
		CHECK_EQ_STR(r.reinit[1], "classifier.3.bias");
	}
	for (int i = 0; i < nn_model_tensor_count(b); i++) {
		const nn_tensor_info *ti = nn_model_tensor(b, i);
		CHECK(same_named(ti->head ? fresh : a, b, ti->name));
	}
	nn_load_report_release(&r);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(fresh);
}

/* Missing tensors keep their initialisation; extra ones are listed. */
static void test_init_missing_unexpected(void)
{
	ims_error e;
	char path[4300];
	path_in(path, sizeof(path), "partial.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 15);
	const char *skip[] = {"features.1.num_batches_tracked", "features.0.weight",
			      "features.1.running_var", NULL};
	const char *extra[] = {"extra.weight", "optim.exp_avg.extra", "fc.weight",
			       NULL};
	variant v = {.skip = skip, .extra = extra};
	write_variant(path, a, &v);

	nn_model *b = make("convnet7", 5, 16, 2);
	nn_model *fresh = make("convnet7", 5, 16, 2);
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b) - 3);
	CHECK_EQ_INT(r.n_reinit, 0);
	CHECK_EQ_INT(r.n_missing, 3);
	if (r.n_missing == 3) { /* model order */
		CHECK_EQ_STR(r.missing[0], "features.0.weight");
		CHECK_EQ_STR(r.missing[1], "features.1.running_var");
		CHECK_EQ_STR(r.missing[2], "features.1.num_batches_tracked");
	}
	CHECK_EQ_INT(r.n_unexpected, 2);
	if (r.n_unexpected == 2) { /* file order */
		CHECK_EQ_STR(r.unexpected[0], "extra.weight");
		CHECK_EQ_STR(r.unexpected[1], "fc.weight");
	}
	for (int i = 0; i < nn_model_tensor_count(b); i++) {
		const char *name = nn_model_tensor(b, i)->name;
		CHECK(same_named(listed(skip, name) ? fresh : a, b, name));
	}
	nn_load_report_release(&r);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(fresh);
}

/* A backbone tensor of another shape: refused before anything is written. */
static void test_init_mismatch(void)
{
	ims_error e;
	char path[4300], want[8800];
	path_in(path, sizeof(path), "mismatch.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 16);
	variant v = {.reshape = "features.4.weight", .to_ndim = 4,
		     .to = {64, 3, 3, 3}};
	write_variant(path, a, &v);

	nn_model *b = make("convnet7", 5, 16, 2);
	snap sb = snap_take(b);
	nn_load_report r = {.loaded = 99};
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	snprintf(want, sizeof(want),
		 "cannot load '%s': tensor 'features.4.weight' has shape [64, 3, 3, 3] in the file, the model needs [64, 32, 3, 3]",
		 path);
	CHECK_EQ_STR(e.msg, want);
	CHECK(snap_same(b, &sb));
	CHECK(report_empty(&r));

	/* integers where floats belong */
	st_writer *w = NULL;
	CHECK_OK(st_writer_create(&w, &e), &e);
	const int64_t s32[1] = {32};
	int32_t ints[32] = {0};
	CHECK_OK(st_writer_add(w, "features.1.weight", ST_I32, 1, s32, ints, &e), &e);
	CHECK_OK(st_writer_write(w, path, &e), &e);
	st_writer_free(w);
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EUNSUPPORTED);
	CHECK(strstr(e.msg, "'features.1.weight' has dtype I32") != NULL);
	CHECK(snap_same(b, &sb));

	/* a counter stored as a fraction */
	CHECK_OK(st_writer_create(&w, &e), &e);
	const float half = 2.5f, one[32] = {1};
	CHECK_OK(st_writer_add(w, "features.1.weight", ST_F32, 1, s32, one, &e), &e);
	CHECK_OK(st_writer_add(w, "features.1.num_batches_tracked", ST_F32, 0, NULL,
			       &half, &e), &e);
	CHECK_OK(st_writer_write(w, path, &e), &e);
	st_writer_free(w);
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'features.1.num_batches_tracked' holds 2.5") != NULL);
	CHECK(snap_same(b, &sb));

	snap_free(&sb);
	nn_model_free(a);
	nn_model_free(b);
}

/* F16, BF16 and F64 weights and I32 or F32 counters load, converted. */
static void test_init_halves(void)
{
	ims_error e;
	char path[4300];
	path_in(path, sizeof(path), "halves.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 17);
	variant v = {.halves = 1};
	write_variant(path, a, &v);

	nn_model *b = make("convnet7", 5, 16, 2);
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b));
	int bad = 0, rounded = 0;
	for (int i = 0; i < nn_model_tensor_count(a); i++) {
		const nn_tensor_info *ti = nn_model_tensor(a, i);
		size_t bytes;
		const void *pa = data_of(a, ti, &bytes);
		const void *pb = data_of(b, nn_model_tensor(b, i), &bytes);
		if (ti->kind == NN_TENSOR_COUNTER) {
			bad += memcmp(pa, pb, bytes) != 0;
			continue;
		}
		const float *fa = pa, *fb = pb;
		for (size_t k = 0; k < ti->count; k++) {
			float want = i % 3 == 2 ? fa[k]
				     : i % 3   ? ims_bf16_to_f32(ims_f32_to_bf16(fa[k]))
					       : ims_f16_to_f32(ims_f32_to_f16(fa[k]));
			bad += memcmp(&want, &fb[k], sizeof(float)) != 0;
			rounded += want != fa[k];
		}
	}
	CHECK_EQ_INT(bad, 0);
	CHECK(rounded > 0);
	nn_load_report_release(&r);
	nn_model_free(a);
	nn_model_free(b);
}

/* Damaged files fail with the file named and the model untouched. */
static void test_corrupt(void)
{
	ims_error e;
	char path[4300], bad[4300];
	path_in(path, sizeof(path), "good.safetensors");
	path_in(bad, sizeof(bad), "bad.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 18);
	nn_optim *oa = make_optim(NN_OPTIM_SGD, a);
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);
	uint8_t *bytes = NULL;
	size_t len = 0;
	CHECK_OK(ims_read_file(path, &bytes, &len, 0, &e), &e);

	nn_model *b = make("convnet7", 5, 16, 2);
	nn_optim *ob = make_optim(NN_OPTIM_SGD, b);
	snap sb = snap_take(b);
	nn_load_report r;

	CHECK_OK(ims_write_file_atomic(bad, bytes, len - 100, &e), &e);
	CHECK_EQ_INT(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), IMS_ECORRUPT);
	CHECK(strstr(e.msg, bad) != NULL);
	CHECK_EQ_INT(nn_checkpoint_load_init(bad, b, 0, &r, &e), IMS_ECORRUPT);
	CHECK(report_empty(&r));

	CHECK_OK(ims_write_file_atomic(bad, bytes, 20, &e), &e);
	CHECK(nn_checkpoint_load_resume(bad, b, ob, NULL, &e) < 0);
	CHECK(nn_checkpoint_load_init(bad, b, 0, &r, &e) < 0);

	CHECK_OK(ims_write_file_atomic(bad, bytes, 0, &e), &e);
	CHECK(nn_checkpoint_load_resume(bad, b, ob, NULL, &e) < 0);

	bytes[8] = 'x'; /* the header's opening brace */
	CHECK_OK(ims_write_file_atomic(bad, bytes, len, &e), &e);
	CHECK_EQ_INT(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), IMS_EFORMAT);
	CHECK_EQ_INT(nn_checkpoint_load_init(bad, b, 0, &r, &e), IMS_EFORMAT);
	bytes[8] = '{';

	/* a checkpoint from a later format */
	st_file *f = NULL;
	CHECK_OK(st_open(path, &f, &e), &e);
	st_writer *w = NULL;
	CHECK_OK(st_writer_create(&w, &e), &e);
	for (size_t i = 0; f && i < st_count(f); i++) {
		const st_tensor *t = st_tensor_at(f, i);
		CHECK_OK(st_writer_add(w, t->name, t->dtype, t->ndim, t->shape,
				       t->data, &e), &e);
	}
	CHECK_OK(st_writer_set_metadata(w, "format", "imshard-checkpoint-2", &e), &e);
	CHECK_OK(st_writer_write(w, bad, &e), &e);
	st_writer_free(w);
	st_close(f);
	CHECK_EQ_INT(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), IMS_EUNSUPPORTED);
	CHECK(strstr(e.msg, "imshard-checkpoint-2") != NULL);

	path_in(bad, sizeof(bad), "absent.safetensors");
	CHECK_EQ_INT(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), IMS_ENOTFOUND);
	CHECK_EQ_INT(nn_checkpoint_load_init(bad, b, 0, &r, &e), IMS_ENOTFOUND);

	CHECK(snap_same(b, &sb));
	size_t np;
	nn_model_params(b, &np);
	CHECK(all_zero(nn_optim_state(ob, 0), np));
	CHECK_EQ_INT(nn_optim_step_count(ob), 0);

	free(bytes);
	snap_free(&sb);
	nn_optim_free(oa);
	nn_optim_free(ob);
	nn_model_free(a);
	nn_model_free(b);
}

/* Every checkpoint carries a checksum of its content; a byte changed in a
 * weight, a running variance or the metadata is refused by --resume and
 * --init, the model left as it was; a file without one (another
 * program's) loads, reported as unverified. */
static void test_checksum(void)
{
	ims_error e;
	char path[4300], bad[4300];
	path_in(path, sizeof(path), "sum.safetensors");
	path_in(bad, sizeof(bad), "sum-bad.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 19);
	nn_optim *oa = make_optim(NN_OPTIM_SGD, a);
	step(a, oa, 52);
	const char *meta[] = {"epoch", "3", NULL};
	CHECK_OK(nn_checkpoint_save(path, a, oa, meta, &e), &e);
	const char *reserved[] = {"checksum", "x", NULL};
	CHECK_EQ_INT(nn_checkpoint_save(bad, a, oa, reserved, &e), IMS_EINVAL);

	st_file *f = NULL;
	CHECK_OK(st_open(path, &f, &e), &e);
	const char *sum = f ? st_metadata_get(f, "checksum") : NULL;
	CHECK(sum && !strncmp(sum, "crc32c:", 7) && strlen(sum) == 15);
	uint32_t crc = 0;
	CHECK_OK(st_checksum(f, "checksum", &crc, &e), &e);
	char want[32];
	snprintf(want, sizeof(want), "crc32c:%08x", crc);
	CHECK_EQ_STR(sum ? sum : "", want);
	/* where a weight and a running variance lie in the file */
	const st_tensor *w = f ? st_find(f, "features.0.weight") : NULL;
	const st_tensor *rv = f ? st_find(f, "features.1.running_var") : NULL;
	CHECK(w && rv);
	size_t w_at = w ? (size_t)w->offset : 0, rv_at = rv ? (size_t)rv->offset : 0;
	st_close(f);
	uint8_t *bytes = NULL;
	size_t len = 0;
	CHECK_OK(ims_read_file(path, &bytes, &len, 0, &e), &e);
	/* the data buffer's start in the file */
	uint64_t hlen = 0;
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)bytes[i] << (8 * i);
	size_t base = 8 + (size_t)hlen;

	nn_model *b = make("convnet7", 5, 16, 2);
	nn_optim *ob = make_optim(NN_OPTIM_SGD, b);
	snap sb = snap_take(b);
	nn_load_report r;
	const size_t at[2] = {base + w_at + 5, base + rv_at + 3};
	for (int k = 0; k < 2; k++) {
		bytes[at[k]] ^= 0x80; /* a sign bit: the variance goes negative */
		CHECK_OK(ims_write_file_atomic(bad, bytes, len, &e), &e);
		CHECK_EQ_INT(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), IMS_ECORRUPT);
		CHECK(strstr(e.msg, "does not match its checksum") != NULL);
		CHECK(strstr(e.msg, bad) != NULL);
		CHECK_EQ_INT(nn_checkpoint_load_init(bad, b, 0, &r, &e), IMS_ECORRUPT);
		CHECK(report_empty(&r));
		bytes[at[k]] ^= 0x80;
	}
	/* the metadata is covered too: "epoch": "3" made "8" in place */
	char *m = NULL;
	for (size_t i = 8; i + 11 <= base && !m; i++)
		if (!memcmp(bytes + i, "\"epoch\":\"3\"", 11))
			m = (char *)bytes + i;
	CHECK(m != NULL);
	if (m) {
		m[9] = '8';
		CHECK_OK(ims_write_file_atomic(bad, bytes, len, &e), &e);
		CHECK_EQ_INT(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), IMS_ECORRUPT);
		m[9] = '3';
	}
	CHECK(snap_same(b, &sb));

	/* intact: verified */
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.verified, 1);
	nn_load_report_release(&r);
	/* without a checksum (as PyTorch writes): loaded, not verified */
	copy_file(path, bad, NULL, NULL);
	CHECK_OK(nn_checkpoint_load_init(bad, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.verified, 0);
	CHECK(same_tensors(a, b));
	nn_load_report_release(&r);
	CHECK_OK(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), &e);

	free(bytes);
	snap_free(&sb);
	nn_optim_free(oa);
	nn_optim_free(ob);
	nn_model_free(a);
	nn_model_free(b);
}

/* NN_INIT_RESET_HEAD: a head of the same shape is not loaded. */
static void test_init_reset_head(void)
{
	ims_error e;
	char path[4300];
	path_in(path, sizeof(path), "reset.safetensors");
	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 20);
	CHECK_OK(nn_checkpoint_save(path, a, NULL, NULL, &e), &e);
	nn_model *b = make("convnet7", 5, 16, 2);
	nn_model *fresh = make("convnet7", 5, 16, 2);
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(path, b, NN_INIT_RESET_HEAD, &r, &e), &e);
	CHECK_EQ_INT(r.head_reset, 1);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b) - 2);
	CHECK_EQ_INT(r.n_reinit, 2);
	for (int i = 0; i < nn_model_tensor_count(b); i++) {
		const nn_tensor_info *ti = nn_model_tensor(b, i);
		CHECK(same_named(ti->head ? fresh : a, b, ti->name));
	}
	nn_load_report_release(&r);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(fresh);
}

/* torchvision's names, written by hand: ImageNet weights for 1000 classes
 * into a 10-class resnet18. */
static void test_torchvision(void)
{
	ims_error e;
	char path[4300];
	path_in(path, sizeof(path), "resnet18-imagenet.safetensors");
	float *conv1 = nn_test_alloc(64 * 3 * 7 * 7), *bn[4], *fcw, *fcb;
	nn_test_fill(conv1, 64 * 3 * 7 * 7, 61, -0.5f, 0.5f);
	for (int i = 0; i < 4; i++) {
		bn[i] = nn_test_alloc(64);
		nn_test_fill(bn[i], 64, 62 + (uint64_t)i, 0.1f, 1);
	}
	fcw = nn_test_alloc(1000 * 512);
	fcb = nn_test_alloc(1000);
	int64_t nbt = 12345;
	const int64_t s_conv1[4] = {64, 3, 7, 7}, s64[1] = {64},
		      s_fcw[2] = {1000, 512}, s_fcb[1] = {1000};
	st_writer *w = NULL;
	CHECK_OK(st_writer_create(&w, &e), &e);
	CHECK_OK(st_writer_add(w, "conv1.weight", ST_F32, 4, s_conv1, conv1, &e), &e);
	CHECK_OK(st_writer_add(w, "bn1.weight", ST_F32, 1, s64, bn[0], &e), &e);
	CHECK_OK(st_writer_add(w, "bn1.bias", ST_F32, 1, s64, bn[1], &e), &e);
	CHECK_OK(st_writer_add(w, "bn1.running_mean", ST_F32, 1, s64, bn[2], &e), &e);
	CHECK_OK(st_writer_add(w, "bn1.running_var", ST_F32, 1, s64, bn[3], &e), &e);
	CHECK_OK(st_writer_add(w, "bn1.num_batches_tracked", ST_I64, 0, NULL, &nbt,
			       &e), &e);
	CHECK_OK(st_writer_add(w, "fc.weight", ST_F32, 2, s_fcw, fcw, &e), &e);
	CHECK_OK(st_writer_add(w, "fc.bias", ST_F32, 1, s_fcb, fcb, &e), &e);
	CHECK_OK(st_writer_write(w, path, &e), &e);
	st_writer_free(w);

	nn_model *m = make("resnet18", 10, 32, 1);
	snap before = snap_take(m);
	CHECK_EQ_INT(nn_model_tensor_count(m), 122); /* torchvision's state_dict */
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(path, m, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, 6);
	CHECK_EQ_INT(r.n_reinit, 2);
	if (r.n_reinit == 2) {
		CHECK_EQ_STR(r.reinit[0], "fc.weight");
		CHECK_EQ_STR(r.reinit[1], "fc.bias");
	}
	CHECK_EQ_INT(r.n_missing, 122 - 8);
	if (r.n_missing > 0)
		CHECK_EQ_STR(r.missing[0], "layer1.0.conv1.weight");
	CHECK_EQ_INT(r.n_unexpected, 0);
	const nn_tensor_info *ti = nn_model_tensor(m, nn_model_find(m, "conv1.weight"));
	CHECK_MEM(nn_model_params(m, NULL) + ti->offset, conv1,
		  64 * 3 * 7 * 7 * sizeof(float));
	ti = nn_model_tensor(m, nn_model_find(m, "bn1.running_var"));
	CHECK_MEM(nn_model_buffers(m, NULL) + ti->offset, bn[3], 64 * sizeof(float));
	ti = nn_model_tensor(m, nn_model_find(m, "bn1.num_batches_tracked"));
	CHECK_EQ_INT(nn_model_counters(m, NULL)[ti->offset], 12345);
	/* the head and the missing tensors keep their initialisation */
	static const char *const kept[] = {"fc.weight", "fc.bias",
					   "layer4.1.bn2.weight"};
	for (int i = 0; i < 3; i++) {
		ti = nn_model_tensor(m, nn_model_find(m, kept[i]));
		CHECK_MEM(nn_model_params(m, NULL) + ti->offset,
			  before.p + ti->offset, ti->count * sizeof(float));
	}
	nn_load_report_release(&r);

	snap_free(&before);
	nn_model_free(m);
	free(conv1);
	for (int i = 0; i < 4; i++)
		free(bn[i]);
	free(fcw);
	free(fcb);
}

/* ---- a backend whose memory is not the CPU's: staged through host copies */

static nn_backend staged_be;
static nn_ctx staged;
static int staged_copies;

static int staged_copy(nn_ctx *c, void *dst, const void *src, size_t bytes,
		       ims_error *e)
{
	(void)c;
	(void)e;
	staged_copies++;
	memcpy(dst, src, bytes);
	return 0;
}

/* Reads a whole file into a malloc'd buffer. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc(n > 0 ? (size_t)n : 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

/*
 * A model on a backend that is not the CPU's goes through checkpoint.c's
 * host copies (to_host before a save, to_device after a load), as on the
 * CUDA backend: the same tensors and the same file bytes as the CPU's.
 * The stand-in backend is the CPU's kernels with counting copies.
 */
static void test_staged(void)
{
	ims_error e;
	char p1[4300], p2[4300];
	path_in(p1, sizeof(p1), "staged-cpu.safetensors");
	path_in(p2, sizeof(p2), "staged-dev.safetensors");
	staged_be = nn_backend_cpu;
	staged_be.name = "staged";
	staged_be.to_host = staged_copy;
	staged_be.to_device = staged_copy;
	staged = ctx;
	staged.be = &staged_be;
	const char *meta[] = {"k", "v", NULL};

	nn_model *a = make("convnet7", 5, 16, 1);
	scramble(a, 17);
	nn_optim *oa = make_optim(NN_OPTIM_SGD, a);
	step(a, oa, 61);
	CHECK_OK(nn_checkpoint_save(p1, a, oa, meta, &e), &e);

	nn_model *b = NULL;
	CHECK_OK(nn_model_create(&staged, "convnet7", 5, 16, 16, 2, 9, &b, &e), &e);
	nn_optim *ob = make_optim(NN_OPTIM_SGD, b);
	staged_copies = 0;
	CHECK_OK(nn_checkpoint_load_resume(p1, b, ob, NULL, &e), &e);
	CHECK(staged_copies > 0);
	CHECK(same_tensors(a, b));
	/* the optimiser state of every trained tensor (step() also moved
	 * the padding between tensors, which no file holds) */
	for (int i = 0; i < nn_model_tensor_count(a); i++) {
		const nn_tensor_info *ti = nn_model_tensor(a, i);
		if (ti->kind == NN_TENSOR_RUNNING || ti->kind == NN_TENSOR_COUNTER)
			continue;
		CHECK(memcmp(nn_optim_state(oa, 0) + ti->offset,
			     nn_optim_state(ob, 0) + ti->offset,
			     ti->count * sizeof(float)) == 0);
	}
	staged_copies = 0;
	CHECK_OK(nn_checkpoint_save(p2, b, ob, meta, &e), &e);
	CHECK(staged_copies > 0);
	size_t n1 = 0, n2 = 0;
	char *f1 = slurp(p1, &n1), *f2 = slurp(p2, &n2);
	CHECK(f1 && f2 && n1 == n2 && memcmp(f1, f2, n1) == 0);
	free(f1);
	free(f2);

	nn_model *c = NULL;
	CHECK_OK(nn_model_create(&staged, "convnet7", 5, 16, 16, 2, 11, &c, &e), &e);
	CHECK_OK(nn_checkpoint_load_init(p1, c, 0, NULL, &e), &e);
	CHECK(same_tensors(a, c));
	nn_optim_free(oa);
	nn_optim_free(ob);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
	remove(p1);
	remove(p2);
}

int main(void)
{
	ims_error e;
	test_tmpdir(dir, sizeof(dir), "checkpoint");
	if (nn_ctx_init_cpu(&ctx, 2, &e))
		die("nn_ctx_init_cpu", &e);
	test_layout();
	test_resume();
	test_resume_refusals();
	test_init_same();
	test_init_head();
	test_init_missing_unexpected();
	test_init_mismatch();
	test_init_halves();
	test_corrupt();
	test_checksum();
	test_init_reset_head();
	test_torchvision();
	test_staged();
	nn_ctx_release(&ctx);
	return test_tmp_done(dir, TEST_EXIT());
}
