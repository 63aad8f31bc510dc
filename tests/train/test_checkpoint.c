/*
 * test_checkpoint.c - saving and resuming checkpoints: the saved layout,
 * bit-exact resume of model and optimiser (and the step after it),
 * resume refusals that name the tensor (a running variance below 0, a
 * value that is not finite among them) and leave the model untouched, damaged files, the checksum over
 * content and metadata, and a backend whose memory is not the CPU's. Loading weights with --init is
 * test_checkpoint_init.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_test.h"
#include "test.h"

/* ---- helpers ----------------------------------------------------------- */

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

static int all_zero(const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] != 0)
			return 0;
	return 1;
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
		ckpt_die("copy_file", &e);
	for (size_t i = 0; i < st_count(f); i++) {
		const st_tensor *t = st_tensor_at(f, i);
		if (skip && !strcmp(t->name, skip))
			continue;
		if (st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, &e))
			ckpt_die("st_writer_add", &e);
	}
	for (size_t i = 0; i < st_metadata_count(f); i++) {
		const char *value, *key = st_metadata_at(f, i, &value);
		if (strcmp(key, "checksum") && st_writer_set_metadata(w, key, value, &e))
			ckpt_die("st_writer_set_metadata", &e);
	}
	static const float two[2] = {1, 2};
	const int64_t s2[1] = {2};
	if (extra && st_writer_add(w, extra, ST_F32, 1, s2, two, &e))
		ckpt_die("st_writer_add", &e);
	if (st_writer_write(w, dst, &e))
		ckpt_die("st_writer_write", &e);
	st_writer_free(w);
	st_close(f);
}

/* ---- tests -------------------------------------------------------------- */

/* The file's layout: model tensors first in state_dict order, then state. */
static void test_layout(void)
{
	ims_error e;
	char path[4300];
	ckpt_path_in(path, sizeof(path), "layout.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 11);
	nn_optim *adam = ckpt_make_optim(NN_OPTIM_ADAMW, a);
	ckpt_step(a, adam, 21);
	ckpt_step(a, adam, 22);
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
	/* ... which resumes no optimiser: said as such (an exported model),
	 * not as the first optimiser tensor missing */
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, a, adam, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "holds no optimiser state") != NULL);
	CHECK(strstr(e.msg, "--init") != NULL);

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
	ckpt_path_in(bad, sizeof(bad), "no/such/dir/x.safetensors");
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
	ckpt_path_in(path, sizeof(path), file);
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 11);
	nn_optim *oa = ckpt_make_optim(kind, a);
	ckpt_step(a, oa, 21);
	ckpt_step(a, oa, 22);
	const char *meta[] = {"epoch", "3", "note", "r\xc3\xa9sum\xc3\xa9", NULL};
	CHECK_OK(nn_checkpoint_save(path, a, oa, meta, &e), &e);

	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_optim *ob = ckpt_make_optim(kind, b);
	CHECK(!ckpt_same_named(a, b, "features.0.weight"));
	st_file *f = NULL;
	CHECK_OK(nn_checkpoint_load_resume(path, b, ob, &f, &e), &e);
	CHECK(ckpt_same_tensors(a, b));
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
	nn_model *c = ckpt_make("convnet7", 5, 16, 3);
	CHECK_OK(nn_checkpoint_load_resume(path, c, NULL, NULL, &e), &e);
	CHECK(ckpt_same_tensors(a, c));
	nn_model_free(c);

	ckpt_step(a, oa, 31);
	ckpt_step(b, ob, 31);
	CHECK(ckpt_same_tensors(a, b));
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

/*
 * From a file opened before its path was replaced by the next checkpoint
 * (a run writing it): the opened file's tensors, optimiser state and step
 * count, not the new file's; refusals name the path.
 */
static void test_resume_file(void)
{
	ims_error e;
	char path[4300];
	ckpt_path_in(path, sizeof(path), "resume-file.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	nn_optim *oa = ckpt_make_optim(NN_OPTIM_SGD, a);
	ckpt_step(a, oa, 21);
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);
	st_file *f = NULL;
	CHECK_OK(st_open(path, &f, &e), &e);
	/* the next checkpoint, renamed over it */
	ckpt_step(a, oa, 22);
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);
	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_optim *ob = ckpt_make_optim(NN_OPTIM_SGD, b);
	CHECK_OK(nn_checkpoint_load_resume_file(f, b, ob, &e), &e);
	CHECK_EQ_INT(nn_optim_step_count(ob), 1);
	CHECK(!ckpt_same_named(a, b, "features.0.weight"));
	nn_model *c = ckpt_make("convnet7", 4, 16, 3);
	CHECK_EQ_INT(nn_checkpoint_load_resume_file(f, c, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, path) != NULL);
	CHECK_EQ_INT(nn_checkpoint_load_resume_file(NULL, c, NULL, &e), IMS_EINVAL);
	st_close(f);
	/* the path now: the second one */
	CHECK_OK(nn_checkpoint_load_resume(path, b, ob, NULL, &e), &e);
	CHECK_EQ_INT(nn_optim_step_count(ob), 2);
	CHECK(ckpt_same_tensors(a, b));
	nn_optim_free(oa);
	nn_optim_free(ob);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
}

/* Resume failures name the tensor and change nothing. */
static void test_resume_refusals(void)
{
	ims_error e;
	char path[4300], alt[4300];
	ckpt_path_in(path, sizeof(path), "refuse.safetensors");
	ckpt_path_in(alt, sizeof(alt), "refuse-alt.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 12);
	nn_optim *oa = ckpt_make_optim(NN_OPTIM_SGD, a);
	ckpt_step(a, oa, 41);
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);

	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_optim *ob = ckpt_make_optim(NN_OPTIM_SGD, b);
	ckpt_snap sb = ckpt_snap_take(b);
	size_t np;
	nn_model_params(b, &np);
	st_file *f = (st_file *)&e; /* must come back NULL */

	/* the last optimiser tensor: everything before it checked fine */
	copy_file(path, alt, "optim.momentum_buffer.classifier.3.bias", NULL);
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, ob, &f, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'optim.momentum_buffer.classifier.3.bias' is missing") != NULL);
	CHECK(strstr(e.msg, alt) != NULL);
	CHECK(f == NULL);
	CHECK(ckpt_snap_same(b, &sb));
	CHECK(all_zero(nn_optim_state(ob, 0), np));
	CHECK_EQ_INT(nn_optim_step_count(ob), 0);
	/* ... which a model-only resume does not need */
	nn_model *c = ckpt_make("convnet7", 5, 16, 3);
	CHECK_OK(nn_checkpoint_load_resume(alt, c, NULL, NULL, &e), &e);
	CHECK(ckpt_same_tensors(a, c));
	nn_model_free(c);

	copy_file(path, alt, "optim.step", NULL);
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, ob, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'optim.step' is missing") != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	copy_file(path, alt, "classifier.3.bias", NULL);
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, NULL, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'classifier.3.bias' is missing") != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	copy_file(path, alt, NULL, "bogus.weight");
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, ob, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'bogus.weight' is not in model convnet7") != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	/* another optimiser kind */
	nn_optim *adam = ckpt_make_optim(NN_OPTIM_ADAM, b);
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
	CHECK(ckpt_snap_same(b, &sb));

	/* another class count */
	nn_model *d = ckpt_make("convnet7", 7, 16, 2);
	ckpt_snap sd = ckpt_snap_take(d);
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, d, NULL, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "tensor 'classifier.3.weight' has shape [5, 256] in the file, the model needs [7, 256]") != NULL);
	CHECK(ckpt_snap_same(d, &sd));
	ckpt_snap_free(&sd);
	nn_model_free(d);

	/* a half-precision file is for --init, not --resume */
	ckpt_variant hv = {.halves = 1};
	ckpt_write_variant(alt, a, &hv);
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, NULL, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'features.0.weight' has dtype F16") != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	/* a running variance below 0, in a file whose checksum matches (one
	 * written so): refused as --init refuses it (before: resumed, and
	 * the next validation's loss was NaN) */
	const nn_tensor_info *rv = nn_model_tensor(a, nn_model_find(a, "features.5.running_var"));
	float *var = nn_model_buffers(a, NULL) + rv->offset;
	const float kept = var[2];
	var[2] = -3;
	CHECK_OK(nn_checkpoint_save(alt, a, oa, NULL, &e), &e);
	var[2] = kept;
	CHECK_EQ_INT(nn_checkpoint_load_resume(alt, b, ob, &f, &e), IMS_EINVAL);
	char want[8800];
	snprintf(want, sizeof(want),
		 "cannot resume from '%s': tensor 'features.5.running_var' holds -3 "
		 "at element 2 (as float32): a running variance is a finite number "
		 "not below 0 (batch norm divides by its square root); the file is "
		 "damaged or was edited, use another copy",
		 alt);
	CHECK_EQ_STR(e.msg, want);
	CHECK(f == NULL);
	CHECK(ckpt_snap_same(b, &sb));
	CHECK(all_zero(nn_optim_state(ob, 0), np));

	CHECK_OK(nn_checkpoint_load_resume(path, b, ob, NULL, &e), &e);
	CHECK(ckpt_same_tensors(a, b));
	CHECK(same_state(a, oa, ob));

	ckpt_snap_free(&sb);
	nn_optim_free(oa);
	nn_optim_free(ob);
	nn_model_free(a);
	nn_model_free(b);
}

/*
 * A weight, running statistic or optimiser state that is not finite, in a
 * file whose checksum matches (one written so), is refused naming the
 * tensor, element and value, nothing changed (before: only --init looked;
 * a resumed running mean of -inf trained on and stopped at the next
 * validation as a NaN). A model-only resume does not read the state.
 */
static void test_resume_not_finite(void)
{
	ims_error e;
	char path[4300], want[8800];
	ckpt_path_in(path, sizeof(path), "not-finite.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 14);
	nn_optim *oa = ckpt_make_optim(NN_OPTIM_SGD, a);
	ckpt_step(a, oa, 43);
	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_optim *ob = ckpt_make_optim(NN_OPTIM_SGD, b);
	ckpt_snap sb = ckpt_snap_take(b);
	size_t np;
	nn_model_params(b, &np);
	st_file *f = (st_file *)&e; /* must come back NULL */

	const nn_tensor_info *rm = nn_model_tensor(a, nn_model_find(a, "features.1.running_mean"));
	float *mean = nn_model_buffers(a, NULL) + rm->offset;
	const float kept = mean[4];
	mean[4] = -INFINITY;
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);
	mean[4] = kept;
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, b, ob, &f, &e), IMS_EINVAL);
	snprintf(want, sizeof(want),
		 "cannot resume from '%s': tensor 'features.1.running_mean' holds "
		 "-inf at element 4 (as float32): weights that are not finite make "
		 "every loss NaN; use a copy saved before it diverged",
		 path);
	CHECK_EQ_STR(e.msg, want);
	CHECK(f == NULL);
	CHECK(ckpt_snap_same(b, &sb));
	CHECK(all_zero(nn_optim_state(ob, 0), np));
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, b, NULL, NULL, &e), IMS_EINVAL);
	CHECK(ckpt_snap_same(b, &sb));

	const nn_tensor_info *w = nn_model_tensor(a, nn_model_find(a, "classifier.3.weight"));
	float *wp = nn_model_params(a, NULL) + w->offset;
	wp[w->count - 1] = NAN;
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);
	wp[w->count - 1] = 0.5f;
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, b, ob, NULL, &e), IMS_EINVAL);
	snprintf(want, sizeof(want), "tensor 'classifier.3.weight' holds NaN at element %zu",
		 w->count - 1);
	CHECK(strstr(e.msg, want) != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	/* a tensor shorter than a block of the scan (5 values) */
	const nn_tensor_info *bi = nn_model_tensor(a, nn_model_find(a, "classifier.3.bias"));
	float *bp = nn_model_params(a, NULL) + bi->offset;
	bp[4] = -INFINITY;
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);
	bp[4] = 0.25f;
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, b, ob, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "tensor 'classifier.3.bias' holds -inf at element 4") != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	/* the optimiser's momentum */
	float *mom = nn_optim_state(oa, 0) + w->offset;
	mom[3] = INFINITY;
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);
	CHECK_EQ_INT(nn_checkpoint_load_resume(path, b, ob, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "tensor 'optim.momentum_buffer.classifier.3.weight' "
			    "holds inf at element 3 (as float32)") != NULL);
	CHECK(strstr(e.msg, path) != NULL);
	CHECK(ckpt_snap_same(b, &sb));
	CHECK(all_zero(nn_optim_state(ob, 0), np));
	CHECK_EQ_INT(nn_optim_step_count(ob), 0);
	/* ... which a model-only resume does not read */
	CHECK_OK(nn_checkpoint_load_resume(path, b, NULL, NULL, &e), &e);
	CHECK(ckpt_same_tensors(a, b));

	ckpt_snap_free(&sb);
	nn_optim_free(oa);
	nn_optim_free(ob);
	nn_model_free(a);
	nn_model_free(b);
}

/* --init from a file with every tensor, and with a checkpoint's state. */
/* Damaged files fail with the file named and the model untouched. */
static void test_corrupt(void)
{
	ims_error e;
	char path[4300], bad[4300];
	ckpt_path_in(path, sizeof(path), "good.safetensors");
	ckpt_path_in(bad, sizeof(bad), "bad.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 18);
	nn_optim *oa = ckpt_make_optim(NN_OPTIM_SGD, a);
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);
	uint8_t *bytes = NULL;
	size_t len = 0;
	CHECK_OK(ims_read_file(path, &bytes, &len, 0, &e), &e);

	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_optim *ob = ckpt_make_optim(NN_OPTIM_SGD, b);
	ckpt_snap sb = ckpt_snap_take(b);
	nn_load_report r;

	CHECK_OK(ims_write_file_atomic(bad, bytes, len - 100, &e), &e);
	CHECK_EQ_INT(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), IMS_ECORRUPT);
	CHECK(strstr(e.msg, bad) != NULL);
	CHECK_EQ_INT(nn_checkpoint_load_init(bad, b, 0, &r, &e), IMS_ECORRUPT);
	CHECK(ckpt_report_empty(&r));

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

	ckpt_path_in(bad, sizeof(bad), "absent.safetensors");
	CHECK_EQ_INT(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), IMS_ENOTFOUND);
	CHECK_EQ_INT(nn_checkpoint_load_init(bad, b, 0, &r, &e), IMS_ENOTFOUND);

	CHECK(ckpt_snap_same(b, &sb));
	size_t np;
	nn_model_params(b, &np);
	CHECK(all_zero(nn_optim_state(ob, 0), np));
	CHECK_EQ_INT(nn_optim_step_count(ob), 0);

	free(bytes);
	ckpt_snap_free(&sb);
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
	ckpt_path_in(path, sizeof(path), "sum.safetensors");
	ckpt_path_in(bad, sizeof(bad), "sum-bad.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 19);
	nn_optim *oa = ckpt_make_optim(NN_OPTIM_SGD, a);
	ckpt_step(a, oa, 52);
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

	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_optim *ob = ckpt_make_optim(NN_OPTIM_SGD, b);
	ckpt_snap sb = ckpt_snap_take(b);
	nn_load_report r;
	const size_t at[2] = {base + w_at + 5, base + rv_at + 3};
	for (int k = 0; k < 2; k++) {
		bytes[at[k]] ^= 0x80; /* a sign bit: the variance goes negative */
		CHECK_OK(ims_write_file_atomic(bad, bytes, len, &e), &e);
		CHECK_EQ_INT(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), IMS_ECORRUPT);
		CHECK(strstr(e.msg, "does not match its checksum") != NULL);
		CHECK(strstr(e.msg, bad) != NULL);
		CHECK_EQ_INT(nn_checkpoint_load_init(bad, b, 0, &r, &e), IMS_ECORRUPT);
		CHECK(ckpt_report_empty(&r));
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
	CHECK(ckpt_snap_same(b, &sb));

	/* intact: verified */
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.verified, 1);
	nn_load_report_release(&r);
	/* without a checksum (as PyTorch writes): loaded, not verified */
	copy_file(path, bad, NULL, NULL);
	CHECK_OK(nn_checkpoint_load_init(bad, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.verified, 0);
	CHECK(ckpt_same_tensors(a, b));
	nn_load_report_release(&r);
	CHECK_OK(nn_checkpoint_load_resume(bad, b, ob, NULL, &e), &e);

	free(bytes);
	ckpt_snap_free(&sb);
	nn_optim_free(oa);
	nn_optim_free(ob);
	nn_model_free(a);
	nn_model_free(b);
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
	ckpt_path_in(p1, sizeof(p1), "staged-cpu.safetensors");
	ckpt_path_in(p2, sizeof(p2), "staged-dev.safetensors");
	staged_be = nn_backend_cpu;
	staged_be.name = "staged";
	staged_be.to_host = staged_copy;
	staged_be.to_device = staged_copy;
	staged = ckpt_ctx;
	staged.be = &staged_be;
	const char *meta[] = {"k", "v", NULL};

	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 17);
	nn_optim *oa = ckpt_make_optim(NN_OPTIM_SGD, a);
	ckpt_step(a, oa, 61);
	CHECK_OK(nn_checkpoint_save(p1, a, oa, meta, &e), &e);

	nn_model *b = NULL;
	CHECK_OK(nn_model_create(&staged, "convnet7", 5, 16, 16, 2, 9, &b, &e), &e);
	nn_optim *ob = ckpt_make_optim(NN_OPTIM_SGD, b);
	staged_copies = 0;
	CHECK_OK(nn_checkpoint_load_resume(p1, b, ob, NULL, &e), &e);
	CHECK(staged_copies > 0);
	CHECK(ckpt_same_tensors(a, b));
	/* the optimiser state of every trained tensor (ckpt_step() also moved
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
	CHECK(ckpt_same_tensors(a, c));
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
	ckpt_setup("checkpoint");
	test_layout();
	test_resume();
	test_resume_file();
	test_resume_refusals();
	test_resume_not_finite();
	test_corrupt();
	test_checksum();
	test_staged();
	nn_ctx_release(&ckpt_ctx);
	return test_tmp_done(ckpt_dir, TEST_EXIT());
}
