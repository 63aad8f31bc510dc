/*
 * test_checkpoint_init.c - loading weights with --init
 * (nn_checkpoint_load_init): a file with every tensor, head
 * re-initialisation for another class count or when asked, missing and
 * unexpected tensors, a backbone tensor of another shape or dtype, one
 * that is not finite or a running variance below 0,
 * refused with the model untouched, half-precision files, the file's
 * size and CRC-32C in the report when asked for (NN_INIT_FILE_CRC), an
 * open file the caller verified not verified again (NN_INIT_VERIFIED), a
 * model made without weights (nn_model_create_unset) refusing to run until
 * every tensor is loaded, and a hand-written torchvision file.
 * Saving and resuming is test_checkpoint.c's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint_test.h"
#include "train/model_card.h"
#include "nn_test_util.h"
#include "test.h"

/* ---- tests -------------------------------------------------------------- */

/* --init from a file with every tensor, and with a checkpoint's state. */
static void test_init_same(void)
{
	ims_error e;
	char path[4300];
	ckpt_path_in(path, sizeof(path), "init.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 13);
	nn_optim *oa = ckpt_make_optim(NN_OPTIM_SGD, a);
	ckpt_step(a, oa, 51);
	CHECK_OK(nn_checkpoint_save(path, a, oa, NULL, &e), &e);

	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(path, b, NN_INIT_FILE_CRC, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b));
	CHECK_EQ_INT(r.n_missing, 0);
	CHECK_EQ_INT(r.n_unexpected, 0); /* optim.* is not reported */
	CHECK_EQ_INT(r.n_reinit, 0);
	CHECK(ckpt_same_tensors(a, b));
	/* the file read, named by its size and every byte's CRC-32C */
	uint8_t *raw = NULL;
	size_t len = 0;
	CHECK_OK(ims_read_file(path, &raw, &len, 0, &e), &e);
	CHECK_EQ_U64(r.file_bytes, len);
	CHECK_EQ_U64(r.file_crc32c, ims_crc32c(0, raw, len));
	free(raw);
	nn_load_report_release(&r);
	/* not asked for: not computed (a read of the whole file saved; eval,
	 * predict and export have no use for it) */
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b));
	CHECK_EQ_U64(r.file_bytes, 0);
	CHECK_EQ_U64(r.file_crc32c, 0);
	nn_load_report_release(&r);
	CHECK(ckpt_report_empty(&r));
	nn_load_report_release(NULL);

	nn_model *c = ckpt_make("convnet7", 5, 16, 3);
	CHECK_OK(nn_checkpoint_load_init(path, c, 0, NULL, &e), &e);
	CHECK(ckpt_same_tensors(a, c));

	nn_optim_free(oa);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
}

/*
 * NN_INIT_VERIFIED: the caller verified this open file (nn_checkpoint_verify,
 * as eval, predict and export do before reading the card), so the load
 * does not compute its checksum again: a byte changed in place after the
 * verification shows which. Without the flag, and whenever the load opens
 * the file itself, it is verified.
 */
static void test_init_verified(void)
{
	ims_error e;
	char path[4300];
	ckpt_path_in(path, sizeof(path), "verified.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 17);
	CHECK_OK(nn_checkpoint_save(path, a, NULL, NULL, &e), &e);
	st_file *f = NULL;
	CHECK_OK(st_open(path, &f, &e), &e);
	int verified = 0;
	CHECK_OK(nn_checkpoint_verify(f, &verified, &e), &e);
	CHECK_EQ_INT(verified, 1);
	/* a mantissa byte of features.0.weight[0], changed in place (the map
	 * sees it) */
	const st_tensor *w = st_find(f, "features.0.weight");
	CHECK(w != NULL);
	FILE *fp = fopen(path, "r+b");
	CHECK(fp != NULL);
	uint8_t h[8] = {0};
	uint64_t hlen = 0;
	CHECK(fp && fread(h, 1, 8, fp) == 8);
	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)h[i] << (8 * i);
	const long at = (long)(8 + hlen + (w ? w->offset : 0) + 1);
	CHECK(fp && fseek(fp, at, SEEK_SET) == 0);
	const int was = fp ? fgetc(fp) : 0;
	CHECK(fp && fseek(fp, at, SEEK_SET) == 0 && fputc(was ^ 0x01, fp) != EOF);
	if (fp)
		CHECK_EQ_INT(fclose(fp), 0);

	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init_file(f, b, NN_INIT_VERIFIED, &r, &e), &e);
	CHECK_EQ_INT(r.verified, 1);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b));
	CHECK(!ckpt_same_named(a, b, "features.0.weight"));
	CHECK(ckpt_same_named(a, b, "features.1.weight"));
	nn_load_report_release(&r);
	/* not vouched for: verified, and refused */
	nn_model *c = ckpt_make("convnet7", 5, 16, 3);
	CHECK_EQ_INT(nn_checkpoint_load_init_file(f, c, 0, &r, &e), IMS_ECORRUPT);
	CHECK(strstr(e.msg, "does not match its checksum") != NULL);
	/* a file the load opens itself is verified whatever the flags */
	CHECK_EQ_INT(nn_checkpoint_load_init(path, c, NN_INIT_VERIFIED, &r, &e),
		     IMS_ECORRUPT);
	CHECK(ckpt_report_empty(&r));
	st_close(f);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
}

/* A forward pass of m in evaluation on x (2 x 3 x 16 x 16): its return
 * code, the logits (2 x classes) copied into out when it ran. */
static int forward_of(nn_model *m, const float *x, float *out, size_t n,
		      ims_error *e)
{
	const float *logits = NULL;
	int rc = nn_model_forward(m, x, 2, 0, 0, &logits, e);
	if (!rc)
		memcpy(out, logits, n * sizeof(float));
	return rc;
}

/*
 * A model made unset (nn_model_create_unset: no weights drawn, for a load
 * of every tensor) holds zeros and refuses to run or be saved until a
 * load wrote every tensor; one that left a tensor out (a file without it)
 * keeps refusing: never a silent zero. Loaded whole it computes what a
 * drawn model loaded from the same file computes, bit for bit.
 */
static void test_init_unset(void)
{
	ims_error e;
	char path[4300], part[4300], out[4300];
	ckpt_path_in(path, sizeof(path), "unset.safetensors");
	ckpt_path_in(part, sizeof(part), "unset-part.safetensors");
	ckpt_path_in(out, sizeof(out), "unset-out.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 23);
	CHECK_OK(nn_checkpoint_save(path, a, NULL, NULL, &e), &e);
	const char *skip[] = {"classifier.3.bias", NULL};
	ckpt_variant v = {.skip = skip};
	ckpt_write_variant(part, a, &v);

	nn_model *u = NULL;
	CHECK_OK(nn_model_create_unset(&ckpt_ctx, "convnet7", 5, 16, 16, 2, &u, &e), &e);
	if (!u)
		return;
	CHECK_EQ_INT(nn_model_weights_unset(u), 1);
	size_t np, nb;
	const float *p = nn_model_params(u, &np), *b = nn_model_buffers(u, &nb);
	int zeros = 1;
	for (size_t i = 0; i < np; i++)
		zeros &= p[i] == 0;
	for (size_t i = 0; i < nb; i++)
		zeros &= b[i] == 0;
	CHECK(zeros);
	float x[2 * 3 * 16 * 16], la[10], lu[10];
	nn_test_fill(x, sizeof(x) / sizeof(x[0]), 5, -1, 1);
	CHECK_EQ_INT(forward_of(u, x, lu, 10, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "cannot run convnet7: its weights were never loaded") != NULL);
	CHECK_EQ_INT(nn_checkpoint_save(out, u, NULL, NULL, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "holds no weights") != NULL);
	CHECK(access(out, F_OK) != 0);

	/* a tensor left out: loaded as far as it goes, still unset */
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(part, u, 0, &r, &e), &e);
	CHECK_EQ_INT(r.n_missing, 1);
	nn_load_report_release(&r);
	CHECK_EQ_INT(nn_model_weights_unset(u), 1);
	CHECK_EQ_INT(forward_of(u, x, lu, 10, &e), IMS_EINVAL);
	/* strictly, as eval, predict and export load */
	CHECK_EQ_INT(nn_model_load_weights(part, u, &e), IMS_EINVAL);
	CHECK_EQ_INT(nn_model_weights_unset(u), 1);

	/* every tensor: it runs, as the drawn model loaded alike */
	CHECK_OK(nn_model_load_weights(path, u, &e), &e);
	CHECK_EQ_INT(nn_model_weights_unset(u), 0);
	nn_model *d = ckpt_make("convnet7", 5, 16, 7);
	CHECK_EQ_INT(nn_model_weights_unset(d), 0);
	CHECK_OK(nn_model_load_weights(path, d, &e), &e);
	CHECK_OK(forward_of(u, x, lu, 10, &e), &e);
	CHECK_OK(forward_of(d, x, la, 10, &e), &e);
	CHECK(memcmp(la, lu, sizeof(la)) == 0);
	CHECK_OK(nn_checkpoint_save(out, u, NULL, NULL, &e), &e);
	CHECK_EQ_INT(nn_model_weights_unset(NULL), 0);
	nn_model_set_loaded(NULL);
	nn_model_free(a);
	nn_model_free(u);
	nn_model_free(d);
}

/* Another class count: the head keeps its initialisation. */
static void test_init_head(void)
{
	ims_error e;
	char path[4300];
	ckpt_path_in(path, sizeof(path), "head.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 14);
	CHECK_OK(nn_checkpoint_save(path, a, NULL, NULL, &e), &e);

	nn_model *b = ckpt_make("convnet7", 7, 16, 2);
	nn_model *fresh = ckpt_make("convnet7", 7, 16, 2);
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
		CHECK(ckpt_same_named(ti->head ? fresh : a, b, ti->name));
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
	ckpt_path_in(path, sizeof(path), "partial.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 15);
	const char *skip[] = {"features.1.num_batches_tracked", "features.0.weight",
			      "features.1.running_var", NULL};
	const char *extra[] = {"extra.weight", "optim.exp_avg.extra", "fc.weight",
			       NULL};
	ckpt_variant v = {.skip = skip, .extra = extra};
	ckpt_write_variant(path, a, &v);

	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_model *fresh = ckpt_make("convnet7", 5, 16, 2);
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
		CHECK(ckpt_same_named(ckpt_listed(skip, name) ? fresh : a, b, name));
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
	ckpt_path_in(path, sizeof(path), "mismatch.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 16);
	ckpt_variant v = {.reshape = "features.4.weight", .to_ndim = 4,
		     .to = {64, 3, 3, 3}};
	ckpt_write_variant(path, a, &v);

	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	ckpt_snap sb = ckpt_snap_take(b);
	nn_load_report r = {.loaded = 99};
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	snprintf(want, sizeof(want),
		 "cannot load '%s': tensor 'features.4.weight' has shape [64, 3, 3, 3] in the file, the model needs [64, 32, 3, 3]",
		 path);
	CHECK_EQ_STR(e.msg, want);
	CHECK(ckpt_snap_same(b, &sb));
	CHECK(ckpt_report_empty(&r));

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
	CHECK(ckpt_snap_same(b, &sb));

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
	CHECK(ckpt_snap_same(b, &sb));

	ckpt_snap_free(&sb);
	nn_model_free(a);
	nn_model_free(b);
}

/* F16, BF16 and F64 weights and I32 or F32 counters load, converted. */
static void test_init_halves(void)
{
	ims_error e;
	char path[4300];
	ckpt_path_in(path, sizeof(path), "halves.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 17);
	ckpt_variant v = {.halves = 1};
	ckpt_write_variant(path, a, &v);

	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b));
	int bad = 0, rounded = 0;
	for (int i = 0; i < nn_model_tensor_count(a); i++) {
		const nn_tensor_info *ti = nn_model_tensor(a, i);
		size_t bytes;
		const void *pa = ckpt_data_of(a, ti, &bytes);
		const void *pb = ckpt_data_of(b, nn_model_tensor(b, i), &bytes);
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

/*
 * A NaN or infinity in any dtype, or an F64 beyond float's range, is
 * refused with the tensor and element named and the model untouched,
 * whatever the flags: eval, predict and export load with none (before:
 * only --init asked for the check, and eval ran the pass on such weights).
 */
static void write_one(const char *path, const nn_tensor_info *ti, int dtype,
		      const void *data)
{
	ims_error e;
	st_writer *w = NULL;
	int64_t shape[4];
	for (int k = 0; k < ti->ndim; k++)
		shape[k] = ti->shape[k];
	CHECK_OK(st_writer_create(&w, &e), &e);
	CHECK_OK(st_writer_add(w, ti->name, dtype, ti->ndim, shape, data, &e), &e);
	CHECK_OK(st_writer_write(w, path, &e), &e);
	st_writer_free(w);
}

static void test_init_finite(void)
{
	ims_error e;
	char path[4300], want[8800];
	ckpt_path_in(path, sizeof(path), "finite.safetensors");
	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	ckpt_snap sb = ckpt_snap_take(b);
	const nn_tensor_info *ti = nn_model_tensor(b, nn_model_find(b, "features.0.weight"));
	float *f = calloc(ti->count, sizeof(float));
	uint16_t *h = calloc(ti->count, sizeof(uint16_t));
	double *d = calloc(ti->count, sizeof(double));
	CHECK(f && h && d);
	nn_load_report r;

	f[7] = NAN;
	write_one(path, ti, ST_F32, f);
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	snprintf(want, sizeof(want),
		 "cannot load '%s': tensor 'features.0.weight' holds NaN at element 7 "
		 "(as float32): weights that are not finite make every loss NaN; "
		 "use a copy saved before it diverged",
		 path);
	CHECK_EQ_STR(e.msg, want);
	CHECK(ckpt_snap_same(b, &sb));
	CHECK(ckpt_report_empty(&r));

	h[3] = 0xfc00; /* F16 -inf */
	write_one(path, ti, ST_F16, h);
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "holds -inf at element 3 (as float32)") != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	h[3] = 0;
	h[ti->count - 1] = 0x7f81; /* BF16 NaN */
	write_one(path, ti, ST_BF16, h);
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	snprintf(want, sizeof(want), "holds NaN at element %zu", ti->count - 1);
	CHECK(strstr(e.msg, want) != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	/* finite in F64, infinite as the float the model would hold */
	d[5] = 1e300;
	write_one(path, ti, ST_F64, d);
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "holds inf at element 5 (as float32)") != NULL);
	CHECK(ckpt_snap_same(b, &sb));
	/* with the head reset too: the tensor is not in the head */
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, NN_INIT_RESET_HEAD, &r, &e), IMS_EINVAL);
	CHECK(ckpt_snap_same(b, &sb));
	/* finite values load */
	d[5] = 0.25;
	write_one(path, ti, ST_F64, d);
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, 1);
	nn_load_report_release(&r);

	free(f);
	free(h);
	free(d);
	ckpt_snap_free(&sb);
	nn_model_free(b);
}

/* NN_INIT_RESET_HEAD: a head of the same shape is not loaded. */
/*
 * A running variance below 0 or not finite is refused whatever the
 * flags (eval and predict load with none), naming the tensor, element
 * and value, the model untouched; 0 and -0 are variances (before: loaded,
 * and eval divided by the square root of a negative number).
 */
static void test_init_variance(void)
{
	ims_error e;
	char path[4300], want[8800];
	ckpt_path_in(path, sizeof(path), "variance.safetensors");
	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	ckpt_snap sb = ckpt_snap_take(b);
	const nn_tensor_info *ti = nn_model_tensor(b, nn_model_find(b, "features.1.running_var"));
	float *f = calloc(ti->count, sizeof(float));
	uint16_t *h = calloc(ti->count, sizeof(uint16_t));
	CHECK(f && h);
	for (size_t i = 0; i < ti->count; i++)
		f[i] = 1;
	nn_load_report r;

	f[3] = -0.5f;
	write_one(path, ti, ST_F32, f);
	snprintf(want, sizeof(want),
		 "cannot load '%s': tensor 'features.1.running_var' holds -0.5 at "
		 "element 3 (as float32): a running variance is a finite number not "
		 "below 0 (batch norm divides by its square root); the file is "
		 "damaged or was edited, use another copy",
		 path);
	for (unsigned flags = 0; flags <= NN_INIT_RESET_HEAD; flags += NN_INIT_RESET_HEAD) {
		CHECK_EQ_INT(nn_checkpoint_load_init(path, b, flags, &r, &e), IMS_EINVAL);
		CHECK_EQ_STR(e.msg, want);
		CHECK(ckpt_snap_same(b, &sb));
		CHECK(ckpt_report_empty(&r));
	}
	/* above -eps too: no NaN, a channel silently scaled up */
	f[3] = -1e-7f;
	write_one(path, ti, ST_F32, f);
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "holds -1e-07 at element 3") != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	/* not finite, in another dtype */
	h[ti->count - 1] = 0x7c00; /* F16 inf */
	write_one(path, ti, ST_F16, h);
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	snprintf(want, sizeof(want), "tensor 'features.1.running_var' holds inf at element %zu",
		 ti->count - 1);
	CHECK(strstr(e.msg, want) != NULL);
	h[ti->count - 1] = 0x7e00; /* F16 NaN */
	write_one(path, ti, ST_F16, h);
	CHECK_EQ_INT(nn_checkpoint_load_init(path, b, 0, &r, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "running_var' holds NaN at element") != NULL);
	CHECK(strstr(e.msg, "a running variance is a finite number") != NULL);
	CHECK(ckpt_snap_same(b, &sb));

	/* 0 and -0 load (F16 zeros, and -0 in F32) */
	h[ti->count - 1] = 0x8000;
	write_one(path, ti, ST_F16, h);
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, 1);
	nn_load_report_release(&r);
	f[3] = -0.0f;
	write_one(path, ti, ST_F32, f);
	CHECK_OK(nn_checkpoint_load_init(path, b, 0, &r, &e), &e);
	CHECK_EQ_INT(r.loaded, 1);
	nn_load_report_release(&r);

	free(f);
	free(h);
	ckpt_snap_free(&sb);
	nn_model_free(b);
}

static void test_init_reset_head(void)
{
	ims_error e;
	char path[4300];
	ckpt_path_in(path, sizeof(path), "reset.safetensors");
	nn_model *a = ckpt_make("convnet7", 5, 16, 1);
	ckpt_scramble(a, 20);
	CHECK_OK(nn_checkpoint_save(path, a, NULL, NULL, &e), &e);
	nn_model *b = ckpt_make("convnet7", 5, 16, 2);
	nn_model *fresh = ckpt_make("convnet7", 5, 16, 2);
	nn_load_report r;
	CHECK_OK(nn_checkpoint_load_init(path, b, NN_INIT_RESET_HEAD, &r, &e), &e);
	CHECK_EQ_INT(r.head_reset, 1);
	CHECK_EQ_INT(r.loaded, nn_model_tensor_count(b) - 2);
	CHECK_EQ_INT(r.n_reinit, 2);
	for (int i = 0; i < nn_model_tensor_count(b); i++) {
		const nn_tensor_info *ti = nn_model_tensor(b, i);
		CHECK(ckpt_same_named(ti->head ? fresh : a, b, ti->name));
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
	ckpt_path_in(path, sizeof(path), "resnet18-imagenet.safetensors");
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

	nn_model *m = ckpt_make("resnet18", 10, 32, 1);
	ckpt_snap before = ckpt_snap_take(m);
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

	ckpt_snap_free(&before);
	nn_model_free(m);
	free(conv1);
	for (int i = 0; i < 4; i++)
		free(bn[i]);
	free(fcw);
	free(fcb);
}

int main(void)
{
	ckpt_setup("checkpoint-init");
	test_init_same();
	test_init_verified();
	test_init_unset();
	test_init_head();
	test_init_missing_unexpected();
	test_init_mismatch();
	test_init_halves();
	test_init_finite();
	test_init_variance();
	test_init_reset_head();
	test_torchvision();
	nn_ctx_release(&ckpt_ctx);
	return test_tmp_done(ckpt_dir, TEST_EXIT());
}
