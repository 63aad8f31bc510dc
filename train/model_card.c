/*
 * model_card.c - the model card in a checkpoint's metadata (model, classes
 * and their names, input size, normalisation, validation crop, layout),
 * and strict loading of weights for inference.
 *
 * Numbers are written so that they read back to the same bits: floats
 * with %.9g, the crop fraction (a double) with %.17g.
 */
#include "train/model_card.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "train/checkpoint.h"

#define OPTIM_PREFIX "optim."

void nn_model_card_init(nn_model_card *c)
{
	memset(c, 0, sizeof(*c));
}

static void free_names(char **names, int n)
{
	for (int i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

void nn_model_card_release(nn_model_card *c)
{
	if (!c)
		return;
	free_names(c->class_names, (c->have & NN_CARD_NAMES) ? c->classes : 0);
	memset(c, 0, sizeof(*c));
}

/* name as a card stores it: itself when valid UTF-8, else escaped;
 * malloc'd, NULL when out of memory. */
static char *stored_name(const char *name)
{
	if (ims_utf8_valid(name, NULL))
		return strdup(name);
	size_t cap = 4 * strlen(name) + 1;
	char *s = malloc(cap);
	if (s)
		ims_escape(name, s, cap);
	return s;
}

int nn_model_card_name_eq(const char *stored, const char *name)
{
	if (ims_utf8_valid(name, NULL))
		return strcmp(stored, name) == 0;
	char *s = stored_name(name);
	int eq = s && strcmp(stored, s) == 0;
	free(s);
	return eq;
}

int nn_model_card_set_names(nn_model_card *c, const char *const *names,
			    size_t n, ims_error *err)
{
	RETURN_IF(n < 1 || n > (size_t)INT32_MAX, err, IMS_EINVAL,
		  "cannot name %zu classes", n);
	char **copy = calloc(n, sizeof(char *));
	RETURN_IF(!copy, err, IMS_ENOMEM, "cannot keep class names: out of memory");
	for (size_t i = 0; i < n; i++) {
		if (!names[i] || !names[i][0]) {
			free_names(copy, (int)n);
			return ims_fail(err, IMS_EINVAL, "class %zu has no name", i);
		}
		copy[i] = stored_name(names[i]);
		if (!copy[i]) {
			free_names(copy, (int)n);
			return ims_fail(err, IMS_ENOMEM,
					"cannot keep class names: out of memory");
		}
	}
	free_names(c->class_names, (c->have & NN_CARD_NAMES) ? c->classes : 0);
	c->class_names = copy;
	c->classes = (int)n;
	c->have |= NN_CARD_NAMES | NN_CARD_CLASSES;
	return 0;
}

/* ---- reading ------------------------------------------------------------ */

static int bad_key(const st_file *f, const char *key, const char *value,
		   const char *want, ims_error *err)
{
	char safe[128];
	return ims_fail(err, IMS_ECORRUPT,
			"cannot read '%s': metadata '%s' is '%s', not %s",
			st_path(f), key, ims_escape(value, safe, sizeof(safe)), want);
}

/* A decimal integer in [1, max]. */
static int read_int(const st_file *f, const char *key, int max, int *out,
		    ims_error *err)
{
	const char *s = st_metadata_get(f, key);
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max) {
		char want[64];
		snprintf(want, sizeof(want), "a whole number from 1 to %d", max);
		return bad_key(f, key, s, want, err);
	}
	*out = (int)v;
	return 0;
}

/* "R,G,B": three finite floats (above 0 when positive is set). */
static int read_triple(const st_file *f, const char *key, int positive,
		       float out[3], ims_error *err)
{
	const char *s = st_metadata_get(f, key);
	const char *p = s;
	for (int i = 0; i < 3; i++) {
		char *end;
		errno = 0;
		float v = strtof(p, &end);
		if (errno || end == p || !isfinite(v) || (positive && !(v > 0)) ||
		    *end != (i < 2 ? ',' : '\0'))
			return bad_key(f, key, s,
				       positive ? "three numbers above 0 (R,G,B)"
						: "three numbers (R,G,B)",
				       err);
		out[i] = v;
		p = end + 1;
	}
	return 0;
}

static int read_names(const st_file *f, nn_model_card *c, ims_error *err)
{
	const char *s = st_metadata_get(f, "class_names");
	int oom = 0;
	cJSON *j = ims_json_parse(s, s ? strlen(s) + 1 : 0, 1, NULL, &oom);
	int n = cJSON_IsArray(j) ? cJSON_GetArraySize(j) : -1;
	int rc = 0;
	if (oom) {
		rc = ims_fail(err, IMS_ENOMEM, "cannot read '%s': out of memory for its "
			      "metadata 'class_names'", st_path(f));
		goto out;
	}
	if (n < 1) {
		rc = bad_key(f, "class_names", s, "a JSON array of names", err);
		goto out;
	}
	if ((c->have & NN_CARD_CLASSES) && n != c->classes) {
		rc = ims_fail(err, IMS_ECORRUPT,
			      "cannot read '%s': metadata 'class_names' lists %d "
			      "names for %d classes",
			      st_path(f), n, c->classes);
		goto out;
	}
	const char **names = calloc((size_t)n, sizeof(char *));
	if (!names) {
		rc = ims_fail(err, IMS_ENOMEM, "cannot read '%s': out of memory",
			      st_path(f));
		goto out;
	}
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, j) {
		names[i] = cJSON_IsString(e) ? e->valuestring : NULL;
		if (!names[i] || !names[i][0]) {
			rc = ims_fail(err, IMS_ECORRUPT,
				      "cannot read '%s': class %d in metadata "
				      "'class_names' is not a non-empty string",
				      st_path(f), i);
			break;
		}
		i++;
	}
	if (!rc)
		rc = nn_model_card_set_names(c, names, (size_t)n, err);
	free(names);
out:
	cJSON_Delete(j);
	return rc;
}

static int read_fields(const st_file *f, nn_model_card *c, ims_error *err)
{
	const char *s;
	if ((s = st_metadata_get(f, "model"))) {
		int known = 0;
		for (const char *const *n = nn_model_names(); *n; n++)
			known |= !strcmp(*n, s);
		char safe[64];
		RETURN_IF(!known, err, IMS_EUNSUPPORTED,
			  "cannot read '%s': it holds model '%s', which this "
			  "imshard does not know",
			  st_path(f), ims_escape(s, safe, sizeof(safe)));
		snprintf(c->model, sizeof(c->model), "%s", s);
		c->have |= NN_CARD_MODEL;
	}
	if (st_metadata_get(f, "classes")) {
		FORWARD_IF_ERR(read_int(f, "classes", INT32_MAX, &c->classes, err));
		c->have |= NN_CARD_CLASSES;
	}
	if (st_metadata_get(f, "size")) {
		FORWARD_IF_ERR(read_int(f, "size", 4096, &c->size, err));
		c->have |= NN_CARD_SIZE;
	}
	if (st_metadata_get(f, "mean")) {
		FORWARD_IF_ERR(read_triple(f, "mean", 0, c->mean, err));
		c->have |= NN_CARD_MEAN;
	}
	if (st_metadata_get(f, "std")) {
		FORWARD_IF_ERR(read_triple(f, "std", 1, c->std, err));
		c->have |= NN_CARD_STD;
	}
	if ((s = st_metadata_get(f, "val_crop_frac"))) {
		char *end;
		errno = 0;
		double v = strtod(s, &end);
		/* the floor is --val-crop-frac's (AUG_MIN_CROP_FRAC): 1e-300
		 * passed and sized the resize at 1.6e301 pixels */
		if (errno || end == s || *end || !(v >= 1e-3 && v <= 1))
			return bad_key(f, "val_crop_frac", s, "a fraction in [0.001, 1]",
				       err);
		c->val_crop_frac = v;
		c->have |= NN_CARD_CROP;
	}
	if ((s = st_metadata_get(f, "input_layout")) && strcmp(s, "NCHW")) {
		char safe[64];
		return ims_fail(err, IMS_EUNSUPPORTED,
				"cannot read '%s': its input layout is '%s', this "
				"imshard feeds NCHW",
				st_path(f), ims_escape(s, safe, sizeof(safe)));
	}
	if (st_metadata_get(f, "class_names"))
		FORWARD_IF_ERR(read_names(f, c, err));
	return 0;
}

int nn_model_card_read(const st_file *f, nn_model_card *c, ims_error *err)
{
	nn_model_card_release(c);
	int rc = read_fields(f, c, err);
	if (rc < 0)
		nn_model_card_release(c);
	return rc;
}

/* ---- writing ------------------------------------------------------------ */

void nn_model_card_text_release(nn_model_card_text *t)
{
	if (!t)
		return;
	cJSON_free(t->names_json);
	memset(t, 0, sizeof(*t));
}

int nn_model_card_format(const nn_model_card *c, nn_model_card_text *t,
			 ims_error *err)
{
	memset(t, 0, sizeof(*t));
	size_t n = 0;
#define KV(k, v)                                                               \
	do {                                                                   \
		t->kv[n++] = (k);                                              \
		t->kv[n++] = (v);                                              \
	} while (0)
	if (c->have & NN_CARD_MODEL)
		KV("model", c->model);
	if (c->have & NN_CARD_CLASSES) {
		snprintf(t->classes, sizeof(t->classes), "%d", c->classes);
		KV("classes", t->classes);
	}
	if (c->have & NN_CARD_SIZE) {
		snprintf(t->size, sizeof(t->size), "%d", c->size);
		KV("size", t->size);
	}
	if (c->have & NN_CARD_MEAN) {
		snprintf(t->mean, sizeof(t->mean), "%.9g,%.9g,%.9g",
			 (double)c->mean[0], (double)c->mean[1], (double)c->mean[2]);
		KV("mean", t->mean);
	}
	if (c->have & NN_CARD_STD) {
		snprintf(t->std, sizeof(t->std), "%.9g,%.9g,%.9g",
			 (double)c->std[0], (double)c->std[1], (double)c->std[2]);
		KV("std", t->std);
	}
	if (c->have & NN_CARD_CROP) {
		snprintf(t->crop, sizeof(t->crop), "%.17g", c->val_crop_frac);
		KV("val_crop_frac", t->crop);
	}
	if (c->have & NN_CARD_NAMES) {
		cJSON *a = cJSON_CreateArray();
		for (int i = 0; a && i < c->classes; i++) {
			cJSON *s = cJSON_CreateString(c->class_names[i]);
			if (!s || !cJSON_AddItemToArray(a, s)) {
				cJSON_Delete(s);
				cJSON_Delete(a);
				a = NULL;
			}
		}
		t->names_json = a ? cJSON_PrintUnformatted(a) : NULL;
		cJSON_Delete(a);
		RETURN_IF(!t->names_json, err, IMS_ENOMEM,
			  "cannot record the class names: out of memory");
		KV("class_names", t->names_json);
	}
	if (n)
		KV("input_layout", "NCHW");
#undef KV
	t->kv[n] = NULL;
	return 0;
}

/* ---- strict loading ----------------------------------------------------- */

static int same_shape(const st_tensor *t, const nn_tensor_info *ti)
{
	if (t->ndim != ti->ndim)
		return 0;
	for (int i = 0; i < ti->ndim; i++)
		if (t->shape[i] != ti->shape[i])
			return 0;
	return 1;
}

/* The first disagreement between f and m (which tensors are missing,
 * misshapen, unexpected), or 0 when every model tensor is there with its
 * shape and nothing else is. */
static int check_names(const st_file *f, nn_model *m, ims_error *err)
{
	const char *path = st_path(f);
	int missing = 0, shaped = 0, extra = 0;
	const char *first_missing = NULL, *first_shaped = NULL, *first_extra = NULL;
	for (int i = 0; i < nn_model_tensor_count(m); i++) {
		const nn_tensor_info *ti = nn_model_tensor(m, i);
		const st_tensor *t = st_find(f, ti->name);
		if (!t) {
			if (!missing++)
				first_missing = ti->name;
		} else if (!same_shape(t, ti)) {
			if (!shaped++)
				first_shaped = ti->name;
		}
	}
	for (size_t k = 0; k < st_count(f); k++) {
		const char *name = st_tensor_at(f, k)->name;
		if (strncmp(name, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) &&
		    nn_model_find(m, name) < 0 && !extra++)
			first_extra = name;
	}
	char safe[128];
	const char *model = nn_model_name(m);
	const int classes = nn_model_classes(m);
	/* a model's layer shapes may follow its input size (convnet7's
	 * below 16): a file whose card records another size says so */
	char why[160] = "written for another model or class count?";
	const char *rs = st_metadata_get(f, "size");
	char *end;
	const long fsize = rs ? strtol(rs, &end, 10) : 0;
	if (rs && *rs && !*end && fsize > 0 && fsize != nn_model_input_size(m))
		snprintf(why, sizeof(why),
			 "its card records size %ld, and this model is built for "
			 "size %d (--size), which changes %s's layers",
			 fsize, nn_model_input_size(m), model);
	RETURN_IF(shaped, err, IMS_EINVAL,
		  "cannot load '%s' into %s for %d classes: tensor '%s' has "
		  "another shape (%d tensors differ; %s)",
		  path, model, classes, first_shaped, shaped, why);
	RETURN_IF(missing, err, IMS_EINVAL,
		  "cannot load '%s' into %s: tensor '%s' is missing (%d of %d "
		  "missing; written for another model?)",
		  path, model, first_missing, missing, nn_model_tensor_count(m));
	RETURN_IF(extra, err, IMS_EINVAL,
		  "cannot load '%s' into %s: tensor '%s' is not one of its "
		  "tensors (%d such; written for another model?)",
		  path, model, ims_escape(first_extra, safe, sizeof(safe)), extra);
	return 0;
}

int nn_model_load_weights(const char *path, nn_model *m, ims_error *err)
{
	RETURN_IF(!path || !m, err, IMS_EINVAL,
		  "cannot load weights: no path or no model");
	st_file *f = NULL;
	FORWARD_IF_ERR(st_open(path, &f, err));
	int rc = nn_model_load_weights_file(f, m, 0, err);
	st_close(f);
	return rc;
}

int nn_model_load_weights_file(const st_file *f, nn_model *m, int verified,
			       ims_error *err)
{
	RETURN_IF(!f || !m, err, IMS_EINVAL,
		  "cannot load weights: no file or no model");
	const char *path = st_path(f);
	int rc = check_names(f, m, err);
	if (rc < 0)
		return rc;
	/* every tensor is there: --init's loader takes them all, converting
	 * dtypes (and verifies the checksum, unless the caller did on this
	 * open file), from the file just checked */
	nn_load_report rep;
	memset(&rep, 0, sizeof(rep));
	rc = nn_checkpoint_load_init_file(f, m, verified ? NN_INIT_VERIFIED : 0, &rep,
					  err);
	if (rc == 0 && rep.loaded != nn_model_tensor_count(m))
		rc = ims_fail(err, IMS_EINVAL,
			      "cannot load '%s': %d of %d tensors loaded", path,
			      rep.loaded, nn_model_tensor_count(m));
	nn_load_report_release(&rep);
	return rc;
}
