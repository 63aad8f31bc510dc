/*
 * checkpoint.c - a model (and optionally its optimiser) to and from a
 * safetensors file.
 *
 * A checkpoint is the model's state_dict under torchvision's names, so the
 * file loads in PyTorch as it is, followed by the optimiser's state sliced
 * per trained tensor ("optim.<state>.<tensor>") and its step count
 * ("optim.step"). Loading validates every tensor it will use before it
 * writes any of them, so a failed load leaves the model and the optimiser
 * as they were.
 *
 * Model storage (and the optimiser's state) is device memory through the
 * model's ctx. On the CPU backend that is host memory, read and written
 * in place; on a device backend this file works on host copies (a
 * host_view: to_host before, to_device after a load), so the files are
 * the same whichever device wrote them. The values a load takes are
 * checked in checkpoint_values.c.
 */
#include "train/checkpoint.h"
#include "train/checkpoint_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_FORMAT "imshard-checkpoint-1"
#define OPTIM_PREFIX "optim."
#define CHECKSUM_KEY "checksum"
#define CHECKSUM_TAG "crc32c:"

/*
 * Verifies f's content against the checksum in its metadata: *verified 1
 * when one is there and matches, 0 when the file has none (a file written
 * by another program); IMS_ECORRUPT when it does not match or cannot be
 * read. action: "cannot load" or "cannot resume from".
 */
static int verify_checksum(const st_file *f, const char *action,
			   int *verified, ims_error *err)
{
	*verified = 0;
	const char *want = st_metadata_get(f, CHECKSUM_KEY);
	if (!want)
		return 0;
	/* exactly as written: the tag and 8 hex digits (strtoul alone
	 * would take " +0x1f" or 9 digits) */
	int ok = !strncmp(want, CHECKSUM_TAG, strlen(CHECKSUM_TAG));
	const char *hex = ok ? want + strlen(CHECKSUM_TAG) : "";
	unsigned long v = 0;
	ok = ok && strlen(hex) == 8 && strspn(hex, "0123456789abcdefABCDEF") == 8;
	if (ok)
		v = strtoul(hex, NULL, 16);
	RETURN_IF(!ok, err, IMS_ECORRUPT,
		  "%s '%s': its checksum '%.40s' is not a crc32c value: the file is damaged",
		  action, st_path(f), want);
	uint32_t got;
	FORWARD_IF_ERR(st_checksum(f, CHECKSUM_KEY, &got, err));
	RETURN_IF(got != (uint32_t)v, err, IMS_ECORRUPT,
		  "%s '%s': its content does not match its checksum (crc32c %08lx "
		  "recorded, %08x computed): the file was damaged after it was "
		  "written; use another copy",
		  action, st_path(f), v, got);
	*verified = 1;
	return 0;
}

int nn_checkpoint_verify(const st_file *f, int *verified, ims_error *err)
{
	return verify_checksum(f, "cannot load", verified, err);
}

static int trained(nn_tensor_kind kind)
{
	return kind == NN_TENSOR_WEIGHT || kind == NN_TENSOR_BIAS ||
	       kind == NN_TENSOR_NORM;
}

static int float_dtype(int dtype)
{
	return dtype == ST_F16 || dtype == ST_BF16 || dtype == ST_F32 ||
	       dtype == ST_F64;
}

static int int_dtype(int dtype)
{
	switch (dtype) {
	case ST_BOOL: case ST_U8: case ST_I8: case ST_I16: case ST_U16:
	case ST_I32: case ST_U32: case ST_I64: case ST_U64:
		return 1;
	default:
		return 0;
	}
}

/*
 * Host-memory views of a model's parameters and buffers and an optimiser's
 * state: the storage itself on the CPU backend, copies (read from the
 * device when the view opens) on a device backend.
 */
typedef struct host_view {
	nn_ctx *ctx;
	int copied;         /* 1: the pointers below are malloc'd copies */
	size_t np, nb, ns;
	float *params, *buffers;
	float *state[2];
	float *dev_params, *dev_buffers, *dev_state[2];
} host_view;

static void view_close(host_view *v)
{
	if (v->copied) {
		free(v->params);
		free(v->buffers);
		for (size_t s = 0; s < v->ns; s++)
			free(v->state[s]);
	}
	memset(v, 0, sizeof(*v));
}

static int view_open(host_view *v, nn_model *m, nn_optim *opt,
		     const char *path, ims_error *err)
{
	memset(v, 0, sizeof(*v));
	v->ctx = nn_model_ctx(m);
	v->dev_params = nn_model_params(m, &v->np);
	v->dev_buffers = nn_model_buffers(m, &v->nb);
	v->ns = opt ? nn_optim_state_count(opt) : 0;
	if (v->ns > 2)
		v->ns = 2;
	for (size_t s = 0; s < v->ns; s++)
		v->dev_state[s] = nn_optim_state(opt, s);
	if (nn_ctx_on_host(v->ctx)) {
		v->params = v->dev_params;
		v->buffers = v->dev_buffers;
		for (size_t s = 0; s < v->ns; s++)
			v->state[s] = v->dev_state[s];
		return 0;
	}
	v->copied = 1;
	v->params = malloc((v->np ? v->np : 1) * sizeof(float));
	v->buffers = malloc((v->nb ? v->nb : 1) * sizeof(float));
	int oom = !v->params || !v->buffers;
	for (size_t s = 0; s < v->ns; s++) {
		v->state[s] = malloc((v->np ? v->np : 1) * sizeof(float));
		oom |= !v->state[s];
	}
	int rc = 0;
	if (oom) {
		rc = ims_fail(err, IMS_ENOMEM,
			      "cannot stage '%s' through host memory: out of memory",
			      path);
		goto fail;
	}
	GOTO_IF_ERR(fail, rc, nn_ctx_to_host(v->ctx, v->params, v->dev_params,
					     v->np * sizeof(float), err));
	GOTO_IF_ERR(fail, rc, nn_ctx_to_host(v->ctx, v->buffers, v->dev_buffers,
					     v->nb * sizeof(float), err));
	for (size_t s = 0; s < v->ns; s++)
		GOTO_IF_ERR(fail, rc, nn_ctx_to_host(v->ctx, v->state[s], v->dev_state[s],
						     v->np * sizeof(float), err));
	return 0;
fail:
	view_close(v);
	return rc;
}

/* Writes a view's copies back to the device (nothing on the CPU). */
static int view_commit(host_view *v, ims_error *err)
{
	if (!v->copied)
		return 0;
	FORWARD_IF_ERR(nn_ctx_to_device(v->ctx, v->dev_params, v->params,
				        v->np * sizeof(float), err));
	FORWARD_IF_ERR(nn_ctx_to_device(v->ctx, v->dev_buffers, v->buffers,
				        v->nb * sizeof(float), err));
	for (size_t s = 0; s < v->ns; s++)
		FORWARD_IF_ERR(nn_ctx_to_device(v->ctx, v->dev_state[s], v->state[s],
					        v->np * sizeof(float), err));
	return 0;
}

/* Where tensor ti lives in the view of the model's storage. */
static float *float_ptr(const host_view *v, const nn_tensor_info *ti)
{
	return (ti->kind == NN_TENSOR_RUNNING ? v->buffers : v->params) +
	       ti->offset;
}

/* "[64, 3, 7, 7]" ("[]" for a scalar) into out; cut short when it does not
 * fit (shapes have at most a handful of dimensions in practice). */
static const char *shape_str(char *out, size_t cap, const int64_t *shape,
			     int ndim)
{
	size_t len = (size_t)snprintf(out, cap, "[");
	for (int i = 0; i < ndim && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%lld",
					i ? ", " : "", (long long)shape[i]);
	if (len < cap)
		snprintf(out + len, cap - len, "]");
	return out;
}

static int same_shape(const st_tensor *t, const nn_tensor_info *ti)
{
	if (t->ndim != ti->ndim)
		return 0;
	for (int i = 0; i < ti->ndim; i++)
		if (t->shape[i] != ti->shape[i])
			return 0;
	return 1;
}

/* The fail message of a shape mismatch, with action "cannot load" or
 * "cannot resume from". */
static int shape_fail(ims_error *err, const char *action, const char *path,
		      const char *name, const st_tensor *t,
		      const nn_tensor_info *ti)
{
	char fs[128], ms[128];
	return ims_fail(err, IMS_EINVAL,
			"%s '%s': tensor '%s' has shape %s in the file, the model needs %s",
			action, path, name, shape_str(fs, sizeof(fs), t->shape, t->ndim),
			shape_str(ms, sizeof(ms), ti->shape, ti->ndim));
}

/* "optim.<state>.<tensor>", malloc'd; NULL when memory runs out. */
static char *optim_name(const char *state, const char *tensor)
{
	size_t len = strlen(OPTIM_PREFIX) + strlen(state) + 1 + strlen(tensor) + 1;
	char *s = malloc(len);
	if (s)
		snprintf(s, len, OPTIM_PREFIX "%s.%s", state, tensor);
	return s;
}

/* ---- saving ------------------------------------------------------------- */

int nn_checkpoint_save(const char *path, nn_model *m, nn_optim *opt,
		       const char *const *meta, ims_error *err)
{
	RETURN_IF(!path || !m, err, IMS_EINVAL,
		  "cannot save a checkpoint: no path or no model");
	size_t np;
	nn_model_params(m, &np);
	const int64_t *counters = nn_model_counters(m, NULL);
	RETURN_IF(opt && nn_optim_param_count(opt) != np, err, IMS_EINVAL,
		  "cannot save checkpoint '%s': the optimiser has %zu parameters, model %s has %zu",
		  path, nn_optim_param_count(opt), nn_model_name(m), np);
	/* zeros are no weights: the load meant to fill the model did not */
	RETURN_IF(nn_model_weights_unset(m), err, IMS_EINVAL,
		  "cannot save checkpoint '%s': model %s holds no weights (its "
		  "load did not happen)",
		  path, nn_model_name(m));
	for (size_t i = 0; meta && meta[i]; i += 2) {
		RETURN_IF(!meta[i + 1], err, IMS_EINVAL,
			  "cannot save checkpoint '%s': metadata key '%s' has no value",
			  path, meta[i]);
		RETURN_IF(!strcmp(meta[i], "format") || !strcmp(meta[i], CHECKSUM_KEY),
			  err, IMS_EINVAL,
			  "cannot save checkpoint '%s': metadata key '%s' is reserved",
			  path, meta[i]);
	}

	st_writer *w = NULL;
	char *name = NULL;
	/* borrowed by the writer until st_writer_write returns, as is the
	 * view (host memory on the CPU backend, copies on a device) */
	int64_t step = opt ? nn_optim_step_count(opt) : 0;
	host_view v;
	int rc = view_open(&v, m, opt, path, err);
	if (rc < 0)
		return rc;
	const float *params = v.params, *buffers = v.buffers;
	rc = st_writer_create(&w, err);
	if (rc < 0) {
		view_close(&v);
		return rc;
	}
	GOTO_IF_ERR(add_fail, rc,
		    st_writer_set_metadata(w, "format", CKPT_FORMAT, err));
	for (size_t i = 0; meta && meta[i]; i += 2)
		GOTO_IF_ERR(add_fail, rc,
			    st_writer_set_metadata(w, meta[i], meta[i + 1], err));

	const int nt = nn_model_tensor_count(m);
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *ti = nn_model_tensor(m, i);
		const void *data;
		int dtype = ST_F32;
		switch (ti->kind) {
		case NN_TENSOR_RUNNING:
			data = buffers + ti->offset;
			break;
		case NN_TENSOR_COUNTER:
			data = counters + ti->offset;
			dtype = ST_I64;
			break;
		default:
			data = params + ti->offset;
			break;
		}
		GOTO_IF_ERR(add_fail, rc, st_writer_add(w, ti->name, dtype, ti->ndim,
							ti->shape, data, err));
	}
	for (size_t s = 0; opt && s < nn_optim_state_count(opt); s++) {
		const float *state = v.state[s];
		for (int i = 0; i < nt; i++) {
			const nn_tensor_info *ti = nn_model_tensor(m, i);
			if (!trained(ti->kind))
				continue;
			name = optim_name(nn_optim_state_name(opt, s), ti->name);
			if (!name)
				GOTO_FAIL(out, rc, err, IMS_ENOMEM,
					  "cannot save checkpoint '%s': out of memory",
					  path);
			GOTO_IF_ERR(add_fail, rc,
				    st_writer_add(w, name, ST_F32, ti->ndim, ti->shape,
						  state + ti->offset, err));
			free(name);
			name = NULL;
		}
	}
	if (opt)
		GOTO_IF_ERR(add_fail, rc, st_writer_add(w, OPTIM_PREFIX "step",
							ST_I64, 0, NULL, &step, err));
	/* last: over every tensor and entry above */
	uint32_t crc;
	char crc_text[32];
	GOTO_IF_ERR(add_fail, rc, st_writer_checksum(w, CHECKSUM_KEY, &crc, err));
	snprintf(crc_text, sizeof(crc_text), CHECKSUM_TAG "%08x", crc);
	GOTO_IF_ERR(add_fail, rc, st_writer_set_metadata(w, CHECKSUM_KEY, crc_text, err));
	/* its messages name the file already */
	GOTO_IF_ERR(out, rc, st_writer_write(w, path, err));
	goto out;
add_fail:
	ims_fail_context(err, "cannot save checkpoint '%s'", path);
out:
	free(name);
	st_writer_free(w);
	view_close(&v);
	return rc;
}

/* ---- fine-tuning initialisation ----------------------------------------- */

void nn_load_report_release(nn_load_report *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->n_missing; i++)
		free(r->missing[i]);
	for (int i = 0; i < r->n_unexpected; i++)
		free(r->unexpected[i]);
	for (int i = 0; i < r->n_reinit; i++)
		free(r->reinit[i]);
	free(r->missing);
	free(r->unexpected);
	free(r->reinit);
	memset(r, 0, sizeof(*r));
}

/* Appends a copy of name to list (sized for every entry beforehand). */
static int report_add(char **list, int *n, const char *name)
{
	char *s = strdup(name);
	if (!s)
		return -1;
	list[(*n)++] = s;
	return 0;
}

/*
 * Reads counter tensor t (numel == n) into out. Integer types convert as
 * st_tensor_to_i64 does; a float type (a state_dict cast to float wholesale
 * on export) is taken when every value is a whole number.
 */
static int read_counter(const st_tensor *t, int64_t *out, size_t n,
			const char *path, ims_error *err)
{
	if (int_dtype(t->dtype)) {
		int rc = st_tensor_to_i64(t, out, n, err);
		if (rc < 0)
			ims_fail_context(err, "cannot load '%s'", path);
		return rc;
	}
	float *v = malloc((n ? n : 1) * sizeof(float));
	RETURN_IF(!v, err, IMS_ENOMEM, "cannot load '%s': out of memory", path);
	int rc = st_tensor_to_f32(t, v, n, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (!isfinite(v[i]) || v[i] != floorf(v[i]) || fabsf(v[i]) >= 0x1p62f)
			rc = ims_fail(err, IMS_EINVAL,
				      "cannot load '%s': counter '%s' holds %g, not a whole number",
				      path, t->name, (double)v[i]);
		else
			out[i] = (int64_t)v[i];
	}
	free(v);
	return rc;
}

enum { LOAD_NONE, LOAD_COPY, LOAD_REINIT };

int nn_checkpoint_load_init(const char *path, nn_model *m, unsigned flags,
			    nn_load_report *report, ims_error *err)
{
	if (report)
		memset(report, 0, sizeof(*report));
	RETURN_IF(!path || !m, err, IMS_EINVAL,
		  "cannot load weights: no path or no model");
	st_file *f = NULL;
	FORWARD_IF_ERR(st_open(path, &f, err));
	/* a file opened here is verified here */
	int rc = nn_checkpoint_load_init_file(f, m, flags & ~NN_INIT_VERIFIED,
					      report, err);
	st_close(f);
	return rc;
}

int nn_checkpoint_load_init_file(const st_file *f, nn_model *m, unsigned flags,
				 nn_load_report *report, ims_error *err)
{
	if (report)
		memset(report, 0, sizeof(*report));
	RETURN_IF(!f || !m, err, IMS_EINVAL,
		  "cannot load weights: no file or no model");
	const char *path = st_path(f);
	int rc = 0;
	const int nt = nn_model_tensor_count(m);
	const size_t nf = st_count(f);
	size_t ncounters;
	int64_t *counters = nn_model_counters(m, &ncounters);
	nn_load_report r = {0};
	host_view v = {0};
	r.head_reset = (flags & NN_INIT_RESET_HEAD) != 0;
	const st_tensor **src = calloc((size_t)nt + 1, sizeof(*src));
	int *action = calloc((size_t)nt + 1, sizeof(*action));
	int64_t *cval = calloc(ncounters + 1, sizeof(*cval));
	r.missing = calloc((size_t)nt + 1, sizeof(char *));
	r.reinit = calloc((size_t)nt + 1, sizeof(char *));
	r.unexpected = calloc(nf + 1, sizeof(char *));
	if (!src || !action || !cval || !r.missing || !r.reinit || !r.unexpected)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot load '%s': out of memory",
			  path);
	/* verified by the caller on this open file: its content is what was
	 * verified (a file replaced at its path is another file) */
	if (flags & NN_INIT_VERIFIED)
		r.verified = st_metadata_get(f, CHECKSUM_KEY) != NULL;
	else
		GOTO_IF_ERR(out, rc, verify_checksum(f, "cannot load", &r.verified, err));

	/* Pass 1: decide and check everything; the model is not touched. */
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *ti = nn_model_tensor(m, i);
		const st_tensor *t = st_find(f, ti->name);
		if (!t) {
			if (report_add(r.missing, &r.n_missing, ti->name))
				goto oom;
			continue;
		}
		if (ti->head && r.head_reset) {
			/* a head of the same shape is a head for other classes */
			action[i] = LOAD_REINIT;
			if (report_add(r.reinit, &r.n_reinit, ti->name))
				goto oom;
			continue;
		}
		if (!same_shape(t, ti)) {
			if (!ti->head) {
				rc = shape_fail(err, "cannot load", path, ti->name, t, ti);
				goto out;
			}
			action[i] = LOAD_REINIT;
			if (report_add(r.reinit, &r.n_reinit, ti->name))
				goto oom;
			continue;
		}
		if (ti->kind == NN_TENSOR_COUNTER) {
			if (!int_dtype(t->dtype) && !float_dtype(t->dtype))
				GOTO_FAIL(out, rc, err, IMS_EUNSUPPORTED,
					  "cannot load '%s': tensor '%s' has dtype %s, the model needs an integer",
					  path, ti->name, st_dtype_name(t->dtype));
			GOTO_IF_ERR(out, rc, read_counter(t, cval + ti->offset,
							  ti->count, path, err));
		} else if (!float_dtype(t->dtype)) {
			GOTO_FAIL(out, rc, err, IMS_EUNSUPPORTED,
				  "cannot load '%s': tensor '%s' has dtype %s, the model needs a float type",
				  path, ti->name, st_dtype_name(t->dtype));
		} else {
			GOTO_IF_ERR(out, rc, ckpt_check_values(t, ti->count,
							       ckpt_running_var(ti)
								       ? CKPT_VALUES_VARIANCE
								       : CKPT_VALUES_WEIGHTS,
							       "cannot load", path, err));
		}
		src[i] = t;
		action[i] = LOAD_COPY;
	}
	for (size_t k = 0; k < nf; k++) {
		const char *name = st_tensor_at(f, k)->name;
		if (strncmp(name, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) != 0 &&
		    nn_model_find(m, name) < 0 &&
		    report_add(r.unexpected, &r.n_unexpected, name))
			goto oom;
	}

	/* Pass 2: write. Conversions cannot fail now (dtype and element count
	 * were checked). */
	GOTO_IF_ERR(out, rc, view_open(&v, m, NULL, path, err));
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *ti = nn_model_tensor(m, i);
		if (action[i] != LOAD_COPY)
			continue;
		r.loaded++;
		if (ti->kind == NN_TENSOR_COUNTER)
			memcpy(counters + ti->offset, cval + ti->offset,
			       ti->count * sizeof(int64_t));
		else
			GOTO_IF_ERR(out, rc, st_tensor_to_f32(src[i], float_ptr(&v, ti),
							      ti->count, err));
	}
	GOTO_IF_ERR(out, rc, view_commit(&v, err));
	/* every tensor written: a model made unset for this load may run */
	if (r.loaded == nt)
		nn_model_set_loaded(m);
	if (report) {
		/* a read of the whole file: only for a caller that records it */
		if (flags & NN_INIT_FILE_CRC)
			r.file_crc32c = st_file_crc32c(f, &r.file_bytes);
		*report = r;
		memset(&r, 0, sizeof(r));
	}
	rc = 0;
	goto out;
oom:
	rc = ims_fail(err, IMS_ENOMEM, "cannot load '%s': out of memory", path);
out:
	view_close(&v);
	nn_load_report_release(&r);
	free(src);
	free(action);
	free(cval);
	return rc;
}

/* ---- resuming ----------------------------------------------------------- */

/* The tensor called name, F32 (or I64 for counters) with ti's shape. */
static int resume_find(const st_file *f, const char *name,
		       const nn_tensor_info *ti, const st_tensor **out,
		       ims_error *err)
{
	const char *path = st_path(f);
	const int want = ti->kind == NN_TENSOR_COUNTER ? ST_I64 : ST_F32;
	const st_tensor *t = st_find(f, name);
	RETURN_IF(!t, err, IMS_EINVAL,
		  "cannot resume from '%s': tensor '%s' is missing", path, name);
	if (!same_shape(t, ti))
		return shape_fail(err, "cannot resume from", path, name, t, ti);
	RETURN_IF(t->dtype != want, err, IMS_EINVAL,
		  "cannot resume from '%s': tensor '%s' has dtype %s, a checkpoint stores %s",
		  path, name, st_dtype_name(t->dtype), st_dtype_name(want));
	*out = t;
	return 0;
}

/* 1 when name is "optim.<a state of opt>.<a trained tensor of m>". */
static int optim_tensor_known(nn_model *m, const nn_optim *opt,
			      const char *name)
{
	const char *rest = name + strlen(OPTIM_PREFIX);
	for (size_t s = 0; s < nn_optim_state_count(opt); s++) {
		const char *sn = nn_optim_state_name(opt, s);
		size_t len = strlen(sn);
		if (strncmp(rest, sn, len) != 0 || rest[len] != '.')
			continue;
		int i = nn_model_find(m, rest + len + 1);
		return i >= 0 && trained(nn_model_tensor(m, i)->kind);
	}
	return 0;
}

int nn_checkpoint_load_resume(const char *path, nn_model *m, nn_optim *opt,
			      st_file **file_out, ims_error *err)
{
	if (file_out)
		*file_out = NULL;
	RETURN_IF(!path || !m, err, IMS_EINVAL,
		  "cannot resume: no checkpoint path or no model");
	st_file *f = NULL;
	FORWARD_IF_ERR(st_open(path, &f, err));
	int rc = nn_checkpoint_load_resume_file(f, m, opt, err);
	if (!rc && file_out) {
		*file_out = f;
		f = NULL;
	}
	st_close(f);
	return rc;
}

int nn_checkpoint_load_resume_file(const st_file *f, nn_model *m, nn_optim *opt,
				   ims_error *err)
{
	RETURN_IF(!f || !m, err, IMS_EINVAL,
		  "cannot resume: no checkpoint file or no model");
	const char *path = st_path(f);
	size_t np;
	nn_model_params(m, &np);
	RETURN_IF(opt && nn_optim_param_count(opt) != np, err, IMS_EINVAL,
		  "cannot resume from '%s': the optimiser has %zu parameters, model %s has %zu",
		  path, nn_optim_param_count(opt), nn_model_name(m), np);
	int rc = 0;
	const int nt = nn_model_tensor_count(m);
	const size_t ns = opt ? nn_optim_state_count(opt) : 0;
	int64_t *counters = nn_model_counters(m, NULL);
	int64_t step = 0;
	char *name = NULL;
	host_view v = {0};
	/* src[i] model tensor i; src[(1 + s) nt + i] its state buffer s */
	const st_tensor **src = calloc((1 + ns) * (size_t)nt + 1, sizeof(*src));
	if (!src)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM,
			  "cannot resume from '%s': out of memory", path);

	const char *format = st_metadata_get(f, "format");
	if (format && strcmp(format, CKPT_FORMAT) != 0)
		GOTO_FAIL(out, rc, err, IMS_EUNSUPPORTED,
			  "cannot resume from '%s': its format is '%s', this build reads '%s' (use the imshard that wrote it)",
			  path, format, CKPT_FORMAT);
	int verified;
	GOTO_IF_ERR(out, rc, verify_checksum(f, "cannot resume from", &verified, err));
	/* weights alone (imshard export, a file of the model's tensors):
	 * what it is, not the first optimiser tensor it lacks */
	size_t optim_tensors = 0;
	for (size_t k = 0; k < st_count(f); k++)
		optim_tensors += strncmp(st_tensor_at(f, k)->name, OPTIM_PREFIX,
					 strlen(OPTIM_PREFIX)) == 0;
	if (opt && !optim_tensors)
		GOTO_FAIL(out, rc, err, IMS_EINVAL,
			  "cannot resume from '%s': it holds no optimiser state, "
			  "only weights (an exported model?): train from them "
			  "with --init instead",
			  path);

	/* Pass 1: find and check everything; nothing is written. */
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *ti = nn_model_tensor(m, i);
		GOTO_IF_ERR(out, rc, resume_find(f, ti->name, ti, &src[i], err));
		if (ti->kind != NN_TENSOR_COUNTER)
			GOTO_IF_ERR(out, rc, ckpt_check_values(src[i], ti->count,
							       ckpt_running_var(ti)
								       ? CKPT_VALUES_VARIANCE
								       : CKPT_VALUES_WEIGHTS,
							       "cannot resume from", path, err));
		for (size_t s = 0; s < ns && trained(ti->kind); s++) {
			name = optim_name(nn_optim_state_name(opt, s), ti->name);
			if (!name)
				GOTO_FAIL(out, rc, err, IMS_ENOMEM,
					  "cannot resume from '%s': out of memory", path);
			GOTO_IF_ERR(out, rc, resume_find(f, name, ti,
							 &src[(1 + s) * nt + i], err));
			GOTO_IF_ERR(out, rc, ckpt_check_values(src[(1 + s) * nt + i],
							       ti->count, CKPT_VALUES_STATE,
							       "cannot resume from", path, err));
			free(name);
			name = NULL;
		}
	}
	if (opt) {
		const st_tensor *t = st_find(f, OPTIM_PREFIX "step");
		if (!t)
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "cannot resume from '%s': tensor '" OPTIM_PREFIX
				  "step' is missing", path);
		if (t->dtype != ST_I64 || t->ndim != 0)
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "cannot resume from '%s': tensor '" OPTIM_PREFIX
				  "step' is not an I64 scalar", path);
		GOTO_IF_ERR(out, rc, st_tensor_to_i64(t, &step, 1, err));
		if (step < 0)
			GOTO_FAIL(out, rc, err, IMS_ECORRUPT,
				  "cannot resume from '%s': the step count is %lld",
				  path, (long long)step);
	}
	/* Anything else means the file was written for another model or
	 * optimiser. */
	for (size_t k = 0; k < st_count(f); k++) {
		const char *fname = st_tensor_at(f, k)->name;
		if (strncmp(fname, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) == 0) {
			if (opt && strcmp(fname, OPTIM_PREFIX "step") != 0 &&
			    !optim_tensor_known(m, opt, fname))
				GOTO_FAIL(out, rc, err, IMS_EINVAL,
					  "cannot resume from '%s': tensor '%s' is not state of this optimiser",
					  path, fname);
		} else if (nn_model_find(m, fname) < 0) {
			GOTO_FAIL(out, rc, err, IMS_EINVAL,
				  "cannot resume from '%s': tensor '%s' is not in model %s",
				  path, fname, nn_model_name(m));
		}
	}

	/* Pass 2: restore. Dtypes and counts are checked, so the copies cannot
	 * fail. */
	GOTO_IF_ERR(out, rc, view_open(&v, m, opt, path, err));
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *ti = nn_model_tensor(m, i);
		if (ti->kind == NN_TENSOR_COUNTER) {
			GOTO_IF_ERR(out, rc, st_tensor_to_i64(src[i], counters + ti->offset,
							      ti->count, err));
			continue;
		}
		GOTO_IF_ERR(out, rc, st_tensor_to_f32(src[i], float_ptr(&v, ti),
						      ti->count, err));
		for (size_t s = 0; s < ns && trained(ti->kind); s++)
			GOTO_IF_ERR(out, rc,
				    st_tensor_to_f32(src[(1 + s) * nt + i],
						     v.state[s] + ti->offset,
						     ti->count, err));
	}
	GOTO_IF_ERR(out, rc, view_commit(&v, err));
	if (opt)
		GOTO_IF_ERR(out, rc, nn_optim_set_step_count(opt, step, err));
	nn_model_set_loaded(m); /* every tensor, or an error above */
	rc = 0;
out:
	view_close(&v);
	free(name);
	free(src);
	return rc;
}
