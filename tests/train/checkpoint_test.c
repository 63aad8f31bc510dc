/*
 * checkpoint_test.c - what the checkpoint's test programs share
 * (checkpoint_test.h): the scratch folder and CPU context, models with
 * values of their own, bit-for-bit comparisons, and files written with
 * tensors left out, added, reshaped or in other dtypes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_test.h"
#include "nn_test_util.h"
#include "test.h"

nn_ctx ckpt_ctx;
char ckpt_dir[4096];

void ckpt_setup(const char *tag)
{
	ims_error e;
	test_tmpdir(ckpt_dir, sizeof(ckpt_dir), tag);
	if (nn_ctx_init_cpu(&ckpt_ctx, 2, &e))
		ckpt_die("nn_ctx_init_cpu", &e);
}

void ckpt_path_in(char *out, size_t n, const char *name)
{
	if ((size_t)snprintf(out, n, "%s/%s", ckpt_dir, name) >= n) {
		fprintf(stderr, "scratch path too long\n");
		exit(1);
	}
}

void ckpt_die(const char *what, const ims_error *e)
{
	fprintf(stderr, "%s: %s\n", what, e->msg);
	exit(1);
}

nn_model *ckpt_make(const char *name, int classes, int hw, uint64_t seed)
{
	ims_error e;
	nn_model *m = NULL;
	if (nn_model_create(&ckpt_ctx, name, classes, hw, hw, 2, seed, &m, &e))
		ckpt_die("nn_model_create", &e);
	return m;
}

void ckpt_scramble(nn_model *m, uint64_t seed)
{
	size_t np, nb, nc;
	float *p = nn_model_params(m, &np), *b = nn_model_buffers(m, &nb);
	nn_test_fill(p, np, seed, -1, 1);
	nn_test_fill(b, nb, seed + 1, 0.5f, 2);
	int64_t *c = nn_model_counters(m, &nc);
	for (size_t i = 0; i < nc; i++)
		c[i] = (int64_t)(1000 * seed + i + 1);
}

nn_optim *ckpt_make_optim(int kind, nn_model *m)
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
		ckpt_die("nn_optim_create", &e);
	return opt;
}

void ckpt_step(nn_model *m, nn_optim *opt, uint64_t seed)
{
	ims_error e;
	size_t np;
	float *g = nn_model_grads(m, &np);
	nn_test_fill(g, np, seed, -1, 1);
	CHECK_OK(nn_optim_step(opt, nn_model_params(m, NULL), g, NULL, 0, 0.01,
			       &e), &e);
}

const void *ckpt_data_of(nn_model *m, const nn_tensor_info *ti, size_t *bytes)
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

int ckpt_same_named(nn_model *a, nn_model *b, const char *name)
{
	int ia = nn_model_find(a, name), ib = nn_model_find(b, name);
	if (ia < 0 || ib < 0)
		return 0;
	size_t na, nb;
	const void *pa = ckpt_data_of(a, nn_model_tensor(a, ia), &na);
	const void *pb = ckpt_data_of(b, nn_model_tensor(b, ib), &nb);
	return na == nb && memcmp(pa, pb, na) == 0;
}

int ckpt_same_tensors(nn_model *a, nn_model *b)
{
	int ok = nn_model_tensor_count(a) == nn_model_tensor_count(b);
	for (int i = 0; ok && i < nn_model_tensor_count(a); i++)
		if (!ckpt_same_named(a, b, nn_model_tensor(a, i)->name)) {
			fprintf(stderr, "tensor %s differs\n",
				nn_model_tensor(a, i)->name);
			ok = 0;
		}
	return ok;
}

ckpt_snap ckpt_snap_take(nn_model *m)
{
	ckpt_snap s;
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

int ckpt_snap_same(nn_model *m, const ckpt_snap *s)
{
	return memcmp(nn_model_params(m, NULL), s->p, s->np * sizeof(float)) == 0 &&
	       memcmp(nn_model_buffers(m, NULL), s->b, s->nb * sizeof(float)) == 0 &&
	       memcmp(nn_model_counters(m, NULL), s->c, s->nc * sizeof(int64_t)) == 0;
}

void ckpt_snap_free(ckpt_snap *s)
{
	free(s->p);
	free(s->b);
	free(s->c);
}

int ckpt_report_empty(const nn_load_report *r)
{
	return r->loaded == 0 && !r->missing && !r->n_missing &&
	       !r->unexpected && !r->n_unexpected && !r->reinit && !r->n_reinit;
}

int ckpt_listed(const char *const *list, const char *name)
{
	for (; list && *list; list++)
		if (!strcmp(*list, name))
			return 1;
	return 0;
}

void ckpt_write_variant(const char *path, nn_model *m, const ckpt_variant *v)
{
	ims_error e;
	st_writer *w = NULL;
	if (st_writer_create(&w, &e))
		ckpt_die("st_writer_create", &e);
	int nt = nn_model_tensor_count(m);
	void **bufs = calloc((size_t)nt + 1, sizeof(void *));
	static const float two[2] = {1.5f, -2.5f};
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *ti = nn_model_tensor(m, i);
		if (ckpt_listed(v->skip, ti->name))
			continue;
		size_t bytes;
		const void *src = ckpt_data_of(m, ti, &bytes);
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
			ckpt_die("st_writer_add", &e);
	}
	const int64_t s2[1] = {2};
	for (const char *const *x = v->extra; x && *x; x++)
		if (st_writer_add(w, *x, ST_F32, 1, s2, two, &e))
			ckpt_die("st_writer_add", &e);
	if (st_writer_write(w, path, &e))
		ckpt_die("st_writer_write", &e);
	st_writer_free(w);
	for (int i = 0; i < nt; i++)
		free(bufs[i]);
	free(bufs);
}
