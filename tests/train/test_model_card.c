/*
 * test_model_card.c - the model card in a checkpoint's metadata: written
 * and read back to the same bits, partial cards (older checkpoints) say
 * what they lack, malformed values are refused with the key named, names
 * that are not UTF-8 are stored escaped; and strict weight loading
 * refuses missing, misshapen and unexpected tensors and a running
 * variance below 0, but takes optimiser state and half-precision files,
 * and from an open file, the weights of that file whatever replaced it.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "train/checkpoint.h"
#include "train/model_card.h"

static nn_ctx ctx;
static char dir[4096];

static void path_in(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

/* A safetensors file with one tensor and the given metadata. */
static void write_meta(const char *path, const char *const *kv)
{
	ims_error e;
	st_writer *w = NULL;
	const float x = 1;
	const int64_t shape[1] = {1};
	if (st_writer_create(&w, &e) || st_writer_add(w, "x", ST_F32, 1, shape, &x, &e))
		goto fail;
	for (size_t i = 0; kv && kv[i]; i += 2)
		if (st_writer_set_metadata(w, kv[i], kv[i + 1], &e))
			goto fail;
	if (st_writer_write(w, path, &e))
		goto fail;
	st_writer_free(w);
	return;
fail:
	fprintf(stderr, "cannot write %s: %s\n", path, e.msg);
	exit(1);
}

static int read_card(const char *path, nn_model_card *c, ims_error *e)
{
	st_file *f = NULL;
	int rc = st_open(path, &f, e);
	if (!rc)
		rc = nn_model_card_read(f, c, e);
	st_close(f);
	return rc;
}

static void test_round_trip(void)
{
	nn_model_card c, back;
	nn_model_card_init(&c);
	nn_model_card_init(&back);
	ims_error e;
	const char *names[3] = {"a, b", "with \"quotes\"", "Anas platyrhynchos"};
	CHECK_EQ_INT(nn_model_card_set_names(&c, names, 3, &e), 0);
	snprintf(c.model, sizeof(c.model), "resnet18");
	c.size = 112;
	/* values whose decimal forms are long: they must come back bit for bit */
	c.mean[0] = 123.675f, c.mean[1] = 1.0f / 3, c.mean[2] = -0.1f;
	c.std[0] = 58.395f, c.std[1] = 1e-7f, c.std[2] = 3.0e7f;
	c.val_crop_frac = 0.875 / 3;
	c.have |= NN_CARD_MODEL | NN_CARD_SIZE | NN_CARD_MEAN | NN_CARD_STD |
		  NN_CARD_CROP;
	CHECK_EQ_INT(c.have, NN_CARD_ALL);
	nn_model_card_text t;
	CHECK_EQ_INT(nn_model_card_format(&c, &t, &e), 0);
	char p[4200];
	path_in(p, sizeof(p), "card.safetensors");
	write_meta(p, t.kv);
	nn_model_card_text_release(&t);
	CHECK_EQ_INT(read_card(p, &back, &e), 0);
	CHECK_EQ_INT(back.have, NN_CARD_ALL);
	CHECK_EQ_STR(back.model, "resnet18");
	CHECK_EQ_INT(back.classes, 3);
	CHECK_EQ_INT(back.size, 112);
	CHECK(memcmp(back.mean, c.mean, sizeof(c.mean)) == 0);
	CHECK(memcmp(back.std, c.std, sizeof(c.std)) == 0);
	CHECK(back.val_crop_frac == c.val_crop_frac);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_STR(back.class_names[i], names[i]);
	nn_model_card_release(&c);
	nn_model_card_release(&back);
	nn_model_card_release(NULL);
}

/* An older checkpoint: model, classes and size, nothing else. */
static void test_partial(void)
{
	char p[4200];
	path_in(p, sizeof(p), "old.safetensors");
	const char *kv[] = {"model", "convnet7", "classes", "4", "size", "32",
			    "epoch", "1", NULL};
	write_meta(p, kv);
	nn_model_card c;
	nn_model_card_init(&c);
	ims_error e;
	CHECK_EQ_INT(read_card(p, &c, &e), 0);
	CHECK_EQ_INT(c.have, NN_CARD_MODEL | NN_CARD_CLASSES | NN_CARD_SIZE);
	CHECK_EQ_INT(c.classes, 4);
	CHECK(c.class_names == NULL);
	nn_model_card_release(&c);
	/* no metadata at all (torchvision's export): nothing known */
	path_in(p, sizeof(p), "bare.safetensors");
	write_meta(p, NULL);
	CHECK_EQ_INT(read_card(p, &c, &e), 0);
	CHECK_EQ_INT(c.have, 0);
}

static void refused(const char *key, const char *value, int code,
		    const char *needle)
{
	char p[4200];
	path_in(p, sizeof(p), "bad.safetensors");
	const char *kv[] = {"classes", "2", key, value, NULL};
	write_meta(p, kv);
	nn_model_card c;
	nn_model_card_init(&c);
	ims_error e;
	ims_error_clear(&e);
	CHECK_EQ_INT(read_card(p, &c, &e), code);
	if (!strstr(e.msg, needle))
		fprintf(stderr, "message '%s' lacks '%s'\n", e.msg, needle);
	CHECK(strstr(e.msg, needle) != NULL);
	CHECK_EQ_INT(c.have, 0); /* emptied on error */
}

static void test_malformed(void)
{
	refused("size", "32px", IMS_ECORRUPT, "'size'");
	refused("size", "0", IMS_ECORRUPT, "'size'");
	/* a whole number, above the largest input size (before: "not a
	 * positive whole number", which 5000 is) */
	refused("size", "5000", IMS_ECORRUPT, "'5000', not a whole number from 1 to 4096");
	refused("mean", "1,2", IMS_ECORRUPT, "'mean'");
	refused("mean", "1,2,nan", IMS_ECORRUPT, "'mean'");
	refused("std", "1,0,1", IMS_ECORRUPT, "'std'");
	refused("val_crop_frac", "1.5", IMS_ECORRUPT, "'val_crop_frac'");
	/* passed before, its resize 1.6e301 pixels (undefined conversion) */
	refused("val_crop_frac", "1e-300", IMS_ECORRUPT, "a fraction in [0.001, 1]");
	refused("class_names", "[\"a\"]", IMS_ECORRUPT, "1 names for 2 classes");
	refused("class_names", "[\"a\", 3]", IMS_ECORRUPT, "class 1");
	refused("class_names", "{\"a\": 1}", IMS_ECORRUPT, "'class_names'");
	refused("input_layout", "NHWC", IMS_EUNSUPPORTED, "NHWC");
	refused("model", "resnet19", IMS_EUNSUPPORTED, "resnet19");
}

/* A class name that is not UTF-8 (metadata must be) is kept escaped, and
 * the split's raw name still compares equal to it. */
static void test_not_utf8(void)
{
	nn_model_card c;
	nn_model_card_init(&c);
	ims_error e;
	const char *names[2] = {"caf\xe9", "ok"};
	CHECK_EQ_INT(nn_model_card_set_names(&c, names, 2, &e), 0);
	CHECK_EQ_STR(c.class_names[0], "caf\\xe9");
	CHECK(nn_model_card_name_eq(c.class_names[0], "caf\xe9"));
	CHECK(!nn_model_card_name_eq(c.class_names[0], "cafe"));
	CHECK(nn_model_card_name_eq(c.class_names[1], "ok"));
	nn_model_card_text t;
	CHECK_EQ_INT(nn_model_card_format(&c, &t, &e), 0);
	char p[4200];
	path_in(p, sizeof(p), "latin1.safetensors");
	write_meta(p, t.kv); /* would fail on invalid UTF-8 */
	nn_model_card_text_release(&t);
	const char *empty[1] = {""};
	CHECK_EQ_INT(nn_model_card_set_names(&c, empty, 1, &e), IMS_EINVAL);
	CHECK_EQ_INT(c.classes, 2); /* kept */
	nn_model_card_release(&c);
}

static nn_model *make(const char *name, int classes, uint64_t seed)
{
	ims_error e;
	nn_model *m = NULL;
	if (nn_model_create(&ctx, name, classes, 16, 16, 2, seed, &m, &e)) {
		fprintf(stderr, "nn_model_create: %s\n", e.msg);
		exit(1);
	}
	return m;
}

static void test_load_weights(void)
{
	ims_error e;
	char ck[4200], other[4200], p[4200];
	path_in(ck, sizeof(ck), "w.safetensors");
	path_in(other, sizeof(other), "other.safetensors");
	nn_model *a = make("convnet7", 3, 1);
	size_t np;
	float *pa = nn_model_params(a, &np);
	/* with optimiser state: taken, the state ignored */
	nn_optim_opts oo;
	nn_optim_opts_init(&oo, NN_OPTIM_SGD);
	oo.momentum = 0.9;
	nn_optim *opt = NULL;
	CHECK_EQ_INT(nn_optim_create(&oo, np, &opt, &e), 0);
	CHECK_EQ_INT(nn_checkpoint_save(ck, a, opt, NULL, &e), 0);
	nn_model *b = make("convnet7", 3, 2);
	float *pb = nn_model_params(b, NULL);
	CHECK(memcmp(pa, pb, np * sizeof(float)) != 0);
	CHECK_EQ_INT(nn_model_load_weights(ck, b, &e), 0);
	CHECK(memcmp(pa, pb, np * sizeof(float)) == 0);
	/* another class count: the head's shape differs */
	nn_model *c = make("convnet7", 4, 3);
	CHECK_EQ_INT(nn_model_load_weights(ck, c, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "classifier.3.weight") && strstr(e.msg, "another shape"));
	/* another model: tensors missing and unexpected */
	nn_model *r = make("resnet18", 3, 4);
	CHECK_EQ_INT(nn_model_load_weights(ck, r, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "resnet18") != NULL);
	/* one tensor missing */
	st_file *f = NULL;
	CHECK_EQ_INT(st_open(ck, &f, &e), 0);
	st_writer *w = NULL;
	st_writer_create(&w, &e);
	for (size_t k = 0; k < st_count(f); k++) {
		const st_tensor *t = st_tensor_at(f, k);
		if (strcmp(t->name, "features.1.running_var"))
			st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, &e);
	}
	CHECK_EQ_INT(st_writer_write(w, other, &e), 0);
	st_writer_free(w);
	CHECK_EQ_INT(nn_model_load_weights(other, b, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'features.1.running_var' is missing") != NULL);
	/* one tensor more */
	w = NULL;
	st_writer_create(&w, &e);
	for (size_t k = 0; k < st_count(f); k++) {
		const st_tensor *t = st_tensor_at(f, k);
		st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, &e);
	}
	const float one = 1;
	const int64_t s1[1] = {1};
	st_writer_add(w, "head.extra", ST_F32, 1, s1, &one, &e);
	CHECK_EQ_INT(st_writer_write(w, other, &e), 0);
	st_writer_free(w);
	CHECK_EQ_INT(nn_model_load_weights(other, b, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "'head.extra' is not one of its tensors") != NULL);
	st_close(f);
	/* a running variance just below 0, in a checkpoint written so: eval
	 * and predict would divide by sqrt(var + eps), not NaN but a channel
	 * silently scaled up (before: loaded) */
	const nn_tensor_info *rv = nn_model_tensor(a, nn_model_find(a, "features.5.running_var"));
	float *var = nn_model_buffers(a, NULL) + rv->offset;
	const float kept = var[1];
	var[1] = -1e-6f;
	CHECK_EQ_INT(nn_checkpoint_save(other, a, NULL, NULL, &e), 0);
	var[1] = kept;
	CHECK_EQ_INT(nn_model_load_weights(other, b, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, "tensor 'features.5.running_var' holds -1e-06 at element 1") != NULL);
	/* not a safetensors file */
	path_in(p, sizeof(p), "text.safetensors");
	FILE *t = fopen(p, "w");
	fputs("hello", t);
	fclose(t);
	CHECK(nn_model_load_weights(p, b, &e) < 0);
	path_in(p, sizeof(p), "none.safetensors");
	CHECK_EQ_INT(nn_model_load_weights(p, b, &e), IMS_ENOTFOUND);
	nn_optim_free(opt);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
	nn_model_free(r);
}

/*
 * From a file opened before its path was replaced: the weights of the file
 * opened (whose card the caller read), not the new file's; messages name
 * the path.
 */
static void test_load_weights_file(void)
{
	ims_error e;
	char ck[4200];
	path_in(ck, sizeof(ck), "replaced.safetensors");
	nn_model *a = make("convnet7", 3, 1);
	nn_model *d = make("convnet7", 3, 5);
	size_t np;
	float *pa = nn_model_params(a, &np);
	CHECK_EQ_INT(nn_checkpoint_save(ck, a, NULL, NULL, &e), 0);
	st_file *f = NULL;
	CHECK_EQ_INT(st_open(ck, &f, &e), 0);
	/* replaced by rename, as checkpoints are */
	CHECK_EQ_INT(nn_checkpoint_save(ck, d, NULL, NULL, &e), 0);
	nn_model *b = make("convnet7", 3, 2);
	CHECK_EQ_INT(nn_model_load_weights_file(f, b, 0, &e), 0);
	CHECK(memcmp(pa, nn_model_params(b, NULL), np * sizeof(float)) == 0);
	/* refusals name the path */
	nn_model *c = make("convnet7", 4, 3);
	CHECK_EQ_INT(nn_model_load_weights_file(f, c, 0, &e), IMS_EINVAL);
	CHECK(strstr(e.msg, ck) != NULL);
	CHECK_EQ_INT(nn_model_load_weights_file(NULL, c, 0, &e), IMS_EINVAL);
	st_close(f);
	/* the path now: the other weights */
	CHECK_EQ_INT(nn_model_load_weights(ck, b, &e), 0);
	CHECK(memcmp(nn_model_params(d, NULL), nn_model_params(b, NULL),
		     np * sizeof(float)) == 0);
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
	nn_model_free(d);
}

int main(void)
{
	ims_error e;
	if (nn_ctx_init_cpu(&ctx, 1, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 1;
	}
	test_tmpdir(dir, sizeof(dir), "model_card");
	test_round_trip();
	test_partial();
	test_malformed();
	test_not_utf8();
	test_load_weights();
	test_load_weights_file();
	nn_ctx_release(&ctx);
	return test_tmp_done(dir, TEST_EXIT());
}
