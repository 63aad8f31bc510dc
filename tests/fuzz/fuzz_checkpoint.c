/* fuzz_checkpoint.c - a checkpoint or weights file through the layers
 * above safetensors (train/checkpoint.h, train/model_card.h), as
 * imshard-train --init and --resume and imshard eval, predict and export
 * read one: its checksum verified, its model card read, and its tensors
 * loaded into a convnet7 for 3 classes of 16 x 16 images (the seed is a
 * real checkpoint of such a run) three ways. A load that fails must leave
 * the model as it was (--init, --resume).
 *
 * Such a checkpoint is 8 MB, beyond what libFuzzer mutates: the input is
 * a safetensors file whose data may be cut short, and the harness fills
 * the data up to the end the header's data_offsets name (at most 64 MB)
 * by repeating the data the input has (zeros when none). The mutations
 * then fall on the header and the metadata, the checks above them. */
#include <cjson/cJSON.h>

#include "fuzz_util.h"
#include "train/checkpoint.h"
#include "train/model_card.h"

static nn_ctx ctx;
static nn_model *model;
static nn_optim *sgd, *adam;

/* The model's storage, to tell whether a refused load changed it. */
typedef struct snap {
	void *p, *b, *c;
	size_t np, nb, nc;
} snap;

static void *dup_bytes(const void *src, size_t n)
{
	void *d = malloc(n ? n : 1);
	if (!d)
		abort();
	if (n)
		memcpy(d, src, n);
	return d;
}

static snap take(void)
{
	snap s;
	const void *p = nn_model_params(model, &s.np);
	const void *b = nn_model_buffers(model, &s.nb);
	const void *c = nn_model_counters(model, &s.nc);
	s.np *= sizeof(float), s.nb *= sizeof(float), s.nc *= sizeof(int64_t);
	s.p = dup_bytes(p, s.np), s.b = dup_bytes(b, s.nb), s.c = dup_bytes(c, s.nc);
	return s;
}

static int same(const snap *s)
{
	size_t np, nb, nc;
	const void *p = nn_model_params(model, &np);
	const void *b = nn_model_buffers(model, &nb);
	const void *c = nn_model_counters(model, &nc);
	return memcmp(p, s->p, s->np) == 0 && memcmp(b, s->b, s->nb) == 0 &&
	       memcmp(c, s->c, s->nc) == 0;
}

static void drop(snap *s)
{
	free(s->p), free(s->b), free(s->c);
}

static void setup(void)
{
	ims_error err;
	nn_optim_opts o;
	size_t np;
	if (nn_ctx_init_cpu(&ctx, 1, &err) ||
	    nn_model_create(&ctx, "convnet7", 3, 16, 16, 1, 1, &model, &err))
		abort();
	nn_model_params(model, &np);
	nn_optim_opts_init(&o, NN_OPTIM_SGD);
	o.momentum = 0.9;
	if (nn_optim_create(&o, np, &sgd, &err))
		abort();
	nn_optim_opts_init(&o, NN_OPTIM_ADAMW);
	if (nn_optim_create(&o, np, &adam, &err))
		abort();
}

#define MAX_FILL (64u << 20)

/* The input with its data filled up to the header's last data_offsets
 * end, malloc'd into *out (NULL: the input as it is). */
static size_t fill(const uint8_t *data, size_t size, uint8_t **out)
{
	*out = NULL;
	if (size < 8)
		return size;
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | data[i];
	if (hlen > size - 8)
		return size;
	cJSON *root = cJSON_ParseWithLength((const char *)data + 8, (size_t)hlen);
	double end = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, root) {
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
		const cJSON *e = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, 1) : NULL;
		if (cJSON_IsNumber(e) && e->valuedouble > end)
			end = e->valuedouble;
	}
	cJSON_Delete(root);
	size_t have = size - 8 - (size_t)hlen;
	if (!(end > (double)have && end <= MAX_FILL))
		return size;
	size_t want = 8 + (size_t)hlen + (size_t)end;
	uint8_t *b = calloc(want, 1);
	if (!b)
		abort();
	memcpy(b, data, size);
	for (size_t i = size; have && i < want; i++)
		b[i] = b[i - have];
	*out = b;
	return want;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!model)
		setup();
	char path[600];
	uint8_t *filled;
	size_t n = fill(data, size, &filled);
	fuzz_file("checkpoint.safetensors", filled ? filled : data, n, path, sizeof(path));
	free(filled);
	st_file *f = NULL;
	ims_error err;
	if (st_open(path, &f, &err) != 0)
		return 0;
	int verified = 0;
	int vrc = nn_checkpoint_verify(f, &verified, &err);

	nn_model_card card;
	nn_model_card_init(&card);
	if (nn_model_card_read(f, &card, &err) == 0) {
		if ((card.have & NN_CARD_NAMES) && !card.class_names)
			__builtin_trap();
		for (int i = 0; (card.have & NN_CARD_NAMES) && i < card.classes; i++)
			if (!card.class_names[i] || !card.class_names[i][0])
				__builtin_trap();
		nn_model_card_text t;
		if (nn_model_card_format(&card, &t, &err) == 0)
			nn_model_card_text_release(&t);
	} else if (card.have || card.class_names) {
		__builtin_trap(); /* "c is then empty" */
	}
	nn_model_card_release(&card);

	/* --init */
	snap s = take();
	nn_load_report rep;
	memset(&rep, 0, sizeof(rep));
	int rc = nn_checkpoint_load_init_file(f, model, vrc == 0 ? NN_INIT_VERIFIED : 0,
					      &rep, &err);
	if (rc != 0 && !same(&s))
		__builtin_trap();
	if (rc == 0 && vrc != 0)
		__builtin_trap(); /* loaded what failed its checksum */
	nn_load_report_release(&rep);
	drop(&s);

	/* --resume, with the optimiser the file's state names */
	char adam_name[128];
	snprintf(adam_name, sizeof(adam_name), "optim.exp_avg.%s",
		 nn_model_tensor(model, 0)->name);
	nn_optim *opt = st_find(f, adam_name) ? adam : sgd;
	s = take();
	rc = nn_checkpoint_load_resume_file(f, model, opt, &err);
	if (rc != 0 && !same(&s))
		__builtin_trap();
	if (rc == 0 && vrc != 0)
		__builtin_trap();
	drop(&s);

	/* eval, predict, export */
	rc = nn_model_load_weights_file(f, model, vrc == 0, &err);
	if (rc == 0 && vrc != 0)
		__builtin_trap();
	st_close(f);
	return 0;
}
