/*
 * test_models.c - the architectures against torchvision: tensor names,
 * order, shapes and parameter counts of state_dict(), head marking, init
 * statistics, and what each model accepts as input.
 *
 * Run with the argument "vgg16" for VGG-16 alone (138 M parameters: a
 * separate, slow test).
 */
#include <math.h>
#include <string.h>

#include "test.h"
#include "train/nn.h"

typedef struct expect {
	const char *name;
	int ndim;
	int64_t shape[4];
} expect;

static size_t trained_count(const nn_model *m, int *n_keys)
{
	size_t total = 0;
	*n_keys = nn_model_tensor_count(m);
	for (int i = 0; i < *n_keys; i++) {
		const nn_tensor_info *t = nn_model_tensor(m, i);
		if (t->kind != NN_TENSOR_RUNNING && t->kind != NN_TENSOR_COUNTER)
			total += t->count;
	}
	return total;
}

static void check_tensor(const nn_model *m, const expect *e)
{
	int i = nn_model_find(m, e->name);
	CHECK(i >= 0);
	if (i < 0) {
		fprintf(stderr, "  missing tensor '%s'\n", e->name);
		return;
	}
	const nn_tensor_info *t = nn_model_tensor(m, i);
	CHECK_EQ_INT(t->ndim, e->ndim);
	for (int d = 0; d < e->ndim && d < 4; d++)
		CHECK_EQ_INT(t->shape[d], e->shape[d]);
}

static nn_model *build(nn_ctx *ctx, const char *name, int classes, int h,
		       int w)
{
	ims_error err;
	nn_model *m = NULL;
	CHECK_OK(nn_model_create(ctx, name, classes, h, w, 2, 7, &m, &err), &err);
	return m;
}

static void test_resnet18(nn_ctx *ctx)
{
	nn_model *m = build(ctx, "resnet18", 1000, 64, 64);
	if (!m)
		return;
	int keys;
	/* torchvision.models.resnet18(): 11,689,512 parameters, 122 keys */
	CHECK_EQ_U64(trained_count(m, &keys), 11689512);
	CHECK_EQ_INT(keys, 122);
	static const expect ex[] = {
		{"conv1.weight", 4, {64, 3, 7, 7}},
		{"bn1.running_var", 1, {64}},
		{"bn1.num_batches_tracked", 0, {0}},
		{"layer1.0.conv1.weight", 4, {64, 64, 3, 3}},
		{"layer1.1.bn2.bias", 1, {64}},
		{"layer2.0.conv1.weight", 4, {128, 64, 3, 3}},
		{"layer2.0.downsample.0.weight", 4, {128, 64, 1, 1}},
		{"layer2.0.downsample.1.running_mean", 1, {128}},
		{"layer4.1.conv2.weight", 4, {512, 512, 3, 3}},
		{"fc.weight", 2, {1000, 512}},
		{"fc.bias", 1, {1000}},
	};
	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++)
		check_tensor(m, &ex[i]);
	/* state_dict order: first and last keys, and a block's module order */
	CHECK_EQ_STR(nn_model_tensor(m, 0)->name, "conv1.weight");
	CHECK_EQ_STR(nn_model_tensor(m, 1)->name, "bn1.weight");
	CHECK_EQ_STR(nn_model_tensor(m, 5)->name, "bn1.num_batches_tracked");
	CHECK_EQ_STR(nn_model_tensor(m, 121)->name, "fc.bias");
	int a = nn_model_find(m, "layer2.0.bn2.num_batches_tracked");
	CHECK_EQ_STR(nn_model_tensor(m, a + 1)->name,
		     "layer2.0.downsample.0.weight");
	CHECK_EQ_INT(nn_model_find(m, "layer1.0.downsample.0.weight"), -1);
	/* the head is fc alone */
	for (int i = 0; i < keys; i++) {
		const nn_tensor_info *t = nn_model_tensor(m, i);
		CHECK_EQ_INT(t->head, !strncmp(t->name, "fc.", 3));
	}
	/* kinds decide decay and what is trained */
	CHECK_EQ_INT(nn_model_tensor(m, 0)->kind, NN_TENSOR_WEIGHT);
	CHECK_EQ_INT(nn_model_tensor(m, 1)->kind, NN_TENSOR_NORM);
	CHECK_EQ_INT(nn_model_tensor(m, 3)->kind, NN_TENSOR_RUNNING);
	CHECK_EQ_INT(nn_model_tensor(m, 5)->kind, NN_TENSOR_COUNTER);
	CHECK_EQ_INT(nn_model_tensor(m, 121)->kind, NN_TENSOR_BIAS);
	/* 1.82 GMACs at 224x224: at 64x64 the convolutions scale by
	 * (64/224)^2 up to rounding of the feature maps */
	CHECK(nn_model_macs(m) > 1.3e8 && nn_model_macs(m) < 1.7e8);
	nn_model_free(m);
}

static void test_resnet50(nn_ctx *ctx)
{
	nn_model *m = build(ctx, "resnet50", 1000, 32, 32);
	if (!m)
		return;
	int keys;
	/* torchvision.models.resnet50(): 25,557,032 parameters, 320 keys */
	CHECK_EQ_U64(trained_count(m, &keys), 25557032);
	CHECK_EQ_INT(keys, 320);
	static const expect ex[] = {
		{"layer1.0.conv1.weight", 4, {64, 64, 1, 1}},
		{"layer1.0.conv3.weight", 4, {256, 64, 1, 1}},
		{"layer1.0.downsample.0.weight", 4, {256, 64, 1, 1}},
		{"layer2.0.conv2.weight", 4, {128, 128, 3, 3}},
		{"layer3.5.bn3.weight", 1, {1024}},
		{"layer4.2.conv3.weight", 4, {2048, 512, 1, 1}},
		{"fc.weight", 2, {1000, 2048}},
	};
	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++)
		check_tensor(m, &ex[i]);
	nn_model_free(m);
}

static void test_vgg16(nn_ctx *ctx)
{
	nn_model *m = build(ctx, "vgg16", 1000, 32, 32);
	if (!m)
		return;
	int keys;
	/* torchvision.models.vgg16(): 138,357,544 parameters, 32 keys */
	CHECK_EQ_U64(trained_count(m, &keys), 138357544);
	CHECK_EQ_INT(keys, 32);
	static const expect ex[] = {
		{"features.0.weight", 4, {64, 3, 3, 3}},
		{"features.2.bias", 1, {64}},
		{"features.5.weight", 4, {128, 64, 3, 3}},
		{"features.28.weight", 4, {512, 512, 3, 3}},
		{"classifier.0.weight", 2, {4096, 25088}},
		{"classifier.3.weight", 2, {4096, 4096}},
		{"classifier.6.bias", 1, {1000}},
	};
	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++)
		check_tensor(m, &ex[i]);
	nn_model_free(m);
}

static void test_convnet7(nn_ctx *ctx)
{
	nn_model *m = build(ctx, "convnet7", 17, 32, 32);
	if (!m)
		return;
	int keys, convs = 0, linears = 0;
	trained_count(m, &keys);
	for (int i = 0; i < keys; i++) {
		const nn_tensor_info *t = nn_model_tensor(m, i);
		if (t->kind == NN_TENSOR_WEIGHT)
			t->ndim == 4 ? convs++ : linears++;
	}
	CHECK_EQ_INT(convs, 5);
	CHECK_EQ_INT(linears, 2);
	static const expect ex[] = {
		{"features.0.weight", 4, {32, 3, 3, 3}},
		{"features.1.running_mean", 1, {32}},
		{"features.4.weight", 4, {64, 32, 3, 3}},
		{"classifier.0.weight", 2, {256, 256}},
		{"classifier.3.weight", 2, {17, 256}},
	};
	for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++)
		check_tensor(m, &ex[i]);
	nn_model_free(m);
	/* any input size, down to one pixel */
	m = build(ctx, "convnet7", 3, 1, 1);
	nn_model_free(m);
	m = build(ctx, "convnet7", 3, 97, 61);
	nn_model_free(m);
}

static void test_init(nn_ctx *ctx)
{
	/* kaiming-normal fan-out: std sqrt(2 / (64 * 9)) for layer1 convs;
	 * fc uniform within 1/sqrt(512); bn weight 1, bias 0; same seed,
	 * same weights; a different class count leaves the backbone as is. */
	ims_error err;
	nn_model *a = NULL, *b = NULL, *c = NULL;
	CHECK_OK(nn_model_create(ctx, "resnet18", 10, 32, 32, 1, 42, &a, &err), &err);
	CHECK_OK(nn_model_create(ctx, "resnet18", 10, 32, 32, 1, 42, &b, &err), &err);
	CHECK_OK(nn_model_create(ctx, "resnet18", 5, 32, 32, 1, 42, &c, &err), &err);
	if (!a || !b || !c)
		goto out;
	size_t np;
	float *pa = nn_model_params(a, &np);
	CHECK(memcmp(pa, nn_model_params(b, NULL), np * sizeof(float)) == 0);
	const nn_tensor_info *t = nn_model_tensor(a, nn_model_find(a, "layer1.0.conv1.weight"));
	double s = 0, s2 = 0;
	for (size_t i = 0; i < t->count; i++) {
		s += pa[t->offset + i];
		s2 += (double)pa[t->offset + i] * pa[t->offset + i];
	}
	double sd = sqrt(s2 / t->count), want = sqrt(2.0 / (64 * 9));
	CHECK(fabs(s / t->count) < 0.01 * want * 10);
	CHECK(fabs(sd - want) < 0.02 * want);
	t = nn_model_tensor(a, nn_model_find(a, "fc.weight"));
	float mx = 0;
	for (size_t i = 0; i < t->count; i++)
		mx = fmaxf(mx, fabsf(pa[t->offset + i]));
	CHECK(mx <= 1 / sqrtf(512) && mx > 0.9f / sqrtf(512));
	t = nn_model_tensor(a, nn_model_find(a, "bn1.weight"));
	CHECK(pa[t->offset] == 1.0f && pa[t->offset + 63] == 1.0f);
	float *buf = nn_model_buffers(a, NULL);
	t = nn_model_tensor(a, nn_model_find(a, "bn1.running_var"));
	CHECK(buf[t->offset] == 1.0f);
	const nn_tensor_info *ta = nn_model_tensor(a, nn_model_find(a, "layer4.1.conv2.weight"));
	const nn_tensor_info *tc = nn_model_tensor(c, nn_model_find(c, "layer4.1.conv2.weight"));
	CHECK(memcmp(pa + ta->offset, nn_model_params(c, NULL) + tc->offset,
		     ta->count * sizeof(float)) == 0);
out:
	nn_model_free(a);
	nn_model_free(b);
	nn_model_free(c);
}

static void test_errors(nn_ctx *ctx)
{
	ims_error err;
	nn_model *m = NULL;
	CHECK_EQ_INT(nn_model_create(ctx, "resnet19", 10, 32, 32, 1, 1, &m, &err),
		     IMS_EINVAL);
	CHECK(strstr(err.msg, "unknown model 'resnet19'") != NULL);
	CHECK(m == NULL);
	CHECK_EQ_INT(nn_model_create(ctx, "convnet7", 0, 32, 32, 1, 1, &m, &err),
		     IMS_EINVAL);
	CHECK_EQ_INT(nn_model_create(ctx, "convnet7", 10, 32, 32, 0, 1, &m, &err),
		     IMS_EINVAL);
	/* padding keeps every model's maps at >= 1 pixel: only empty inputs fail */
	CHECK_EQ_INT(nn_model_create(ctx, "resnet18", 10, 0, 32, 1, 1, &m, &err),
		     IMS_EINVAL);
	/* VGG-16's five 2x2 poolings need 32 pixels: the error says so (its
	 * graph is refused before any weight is allocated) */
	CHECK_EQ_INT(nn_model_create(ctx, "vgg16", 10, 31, 31, 1, 1, &m, &err),
		     IMS_EINVAL);
	CHECK_EQ_STR(err.msg, "cannot build vgg16 for 31x31 inputs: it needs inputs of at least 32x32");
	CHECK(m == NULL);
	CHECK_EQ_INT(nn_model_create(ctx, "vgg16", 10, 64, 20, 1, 1, &m, &err),
		     IMS_EINVAL);
	CHECK_EQ_STR(err.msg, "cannot build vgg16 for 20x64 inputs: it needs inputs of at least 32x32");
	/* the others take a pixel */
	CHECK_OK(nn_model_create(ctx, "convnet7", 10, 1, 1, 1, 1, &m, &err), &err);
	nn_model_free(m);
	m = NULL;
	const char *const *names = nn_model_names();
	int n = 0;
	while (names[n])
		n++;
	CHECK_EQ_INT(n, 4);
}

int main(int argc, char **argv)
{
	nn_ctx ctx;
	ims_error err;
	CHECK_OK(nn_ctx_init_cpu(&ctx, 2, &err), &err);
	if (argc > 1 && !strcmp(argv[1], "vgg16")) {
		test_vgg16(&ctx);
	} else {
		test_convnet7(&ctx);
		test_resnet18(&ctx);
		test_resnet50(&ctx);
		test_init(&ctx);
		test_errors(&ctx);
	}
	nn_ctx_release(&ctx);
	return TEST_EXIT();
}
