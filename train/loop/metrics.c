/*
 * metrics.c - what a run writes and tells: LOGDIR/metrics.jsonl (a train
 * line per rank per --log-every steps, a gpu line beside it where NVML
 * is, a val line per epoch from rank 0), LOGDIR/summary.json at the end
 * (rank 0), and the events of train/train.h that a program prints.
 * A line that cannot be written (a full disk) ends the run at once: a run
 * whose log has holes would be reported as if it had none.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "train/loop/loop_internal.h"

/* n bytes appended to metrics.jsonl, or the run's error. */
static int metrics_write(run *r, const char *line, size_t n, ims_error *err)
{
	int failed = ++r->log.metrics_writes == r->hooks.metrics_fail_write;
	if (failed)
		errno = ENOSPC;
	else
		failed = ims_write_all(r->log.metrics_fd, line, n) != 0;
	RETURN_IF(failed, err, IMS_EIO,
		  "cannot write '%s': %s: stopping (the run's log would have a "
		  "hole; the last checkpoint is kept)",
		  r->log.metrics_path, strerror(errno));
	return 0;
}

cJSON *loop_metrics_object(const char *type)
{
	ims_json_watch();
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "type", type);
	return j;
}

/* One JSON line appended with a single write(): ranks share the file and
 * O_APPEND keeps each line whole. Takes obj, built since
 * loop_metrics_object: a line that lost a member, or the whole object,
 * to memory running out is an error, not a line written without it. */
int loop_metrics_line(run *r, cJSON *obj, ims_error *err)
{
	if (r->log.metrics_fd < 0) {
		cJSON_Delete(obj);
		return 0;
	}
	char *s = ims_json_print(obj, 0);
	cJSON_Delete(obj);
	RETURN_IF(!s, err, IMS_ENOMEM, "cannot log metrics: out of memory");
	size_t n = strlen(s);
	char *line = malloc(n + 2);
	int rc = 0;
	if (!line) {
		rc = ims_fail(err, IMS_ENOMEM, "cannot log metrics: out of memory");
	} else {
		memcpy(line, s, n);
		line[n] = '\n';
		rc = metrics_write(r, line, n + 1, err);
		free(line);
	}
	free(s);
	return rc;
}

static int log_path(const nn_train_opts *o, const char *file, char *out,
		    size_t len, ims_error *err)
{
	return ims_path_join(out, len, o->out.log_dir, file, err);
}

/* --log-dir: rank 0 starts metrics.jsonl afresh unless resuming; the
 * others wait for that before appending. */
/*
 * metrics.jsonl opened for writing with flags (O_TRUNC, O_APPEND), a
 * regular file or nothing: O_NOFOLLOW refuses a link planted at the name
 * (it would be written through), O_NONBLOCK keeps a FIFO from blocking
 * the open (with no reader it fails at once, ENXIO), fstat judges what
 * was opened.
 */
static int open_metrics(const char *path, int flags, int *out, ims_error *err)
{
	*out = -1;
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
				    O_NOCTTY | O_CLOEXEC | flags,
		      0644);
	struct stat st;
	if (fd < 0) {
		int e = errno;
		if (e == ENXIO && lstat(path, &st) == 0)
			return ims_fail(err, IMS_EFORMAT,
					"cannot open '%s': not a regular file (%s)",
					path, ims_file_kind(st.st_mode));
		return ims_fail(err, IMS_EIO, "cannot open '%s': %s", path,
				e == ELOOP ? "it is a symbolic link (refused: it "
					     "would be written through)"
					   : strerror(e));
	}
	int fl = -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (fl = fcntl(fd, F_GETFL)) < 0 ||
	    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		int e = errno;
		int reg = fl >= 0 || S_ISREG(st.st_mode);
		close(fd);
		if (!reg)
			return ims_fail(err, IMS_EFORMAT,
					"cannot open '%s': not a regular file (%s)",
					path, ims_file_kind(st.st_mode));
		return ims_fail(err, IMS_EIO, "cannot open '%s': %s", path,
				strerror(e));
	}
	*out = fd;
	return 0;
}

int loop_open_metrics(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	if (!o->out.log_dir)
		return 0;
	FORWARD_IF_ERR(ims_mkdir_p(o->out.log_dir, err));
	char *path = r->log.metrics_path;
	FORWARD_IF_ERR(log_path(o, "metrics.jsonl", path, sizeof(r->log.metrics_path),
				err));
	int fd = -1, rc = 0;
	/* a new run starts the file: rank 0, and the owner of a folder of
	 * its own (guard.c); every rank meets here, one's failure or not */
	if (r->log.owns_dir && !o->out.resume)
		rc = open_metrics(path, O_TRUNC, &fd, err);
	if (fd >= 0)
		close(fd);
	FORWARD_IF_ERR(loop_agree_setup(r, rc, "train", err));
	return open_metrics(path, O_APPEND, &r->log.metrics_fd, err);
}

int loop_start_line(run *r, ims_error *err)
{
	/* each folder's first line names the run (loop_check_resumed_logs) */
	if (!r->log.owns_dir || r->log.metrics_fd < 0)
		return 0;
	cJSON *j = loop_metrics_object("start");
	cJSON_AddStringToObject(j, "run_id", r->part.run_id);
	cJSON_AddNumberToObject(j, "epoch", r->part.at.epoch);
	cJSON_AddNumberToObject(j, "step", (double)r->part.at.step);
	cJSON_AddNumberToObject(j, "world", r->dp.world);
	cJSON_AddNumberToObject(j, "batch", r->o->optim.batch_size);
	return loop_metrics_line(r, j, err);
}

void loop_close_metrics(run *r)
{
	if (r->log.metrics_fd >= 0)
		close(r->log.metrics_fd);
	r->log.metrics_fd = -1;
}

void loop_rank_note(run *r, const char *fmt, ...)
{
	if (!r->log.ev.rank_note)
		return;
	char msg[IMS_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->log.ev.rank_note(r->log.ev.ctx, msg);
}

void loop_report_start(run *r)
{
	if (!r->log.ev.started)
		return;
	nn_train_plan p;
	loop_plan(r, &p);
	r->log.ev.started(r->log.ev.ctx, &p);
}

/* The run's shape. Every rank trains whole batches only, so a share that
 * does not divide by the batch leaves its last records out too: both
 * kinds are counted as dropped. */
void loop_plan(const run *r, nn_train_plan *p)
{
	memset(p, 0, sizeof(*p));
	p->classes = r->data.classes;
	p->world = r->dp.world;
	p->threads = r->ctx.threads;
	p->loader_threads = r->log.loader_threads;
	p->steps_per_epoch = r->data.steps_per_epoch;
	p->total_steps = r->sched.total_steps;
	p->lr_peak = nn_lr_peak(&r->sched.lr);
	p->lr_batch = r->sched.lr_batch;
	p->validation = r->data.val != NULL;
	nn_model_memory_info(r->m, &p->activations);
	p->channels_last = nn_model_channels_last(r->m);
	p->cuda_graphs = r->graphs.on;
	p->cuda_graphs_off = r->graphs.why;
	p->device_stack = r->log.stack[0] ? r->log.stack : NULL;
	aug_loader_share(r->data.train, &p->records_per_rank, NULL,
			 &p->dropped_ranks);
	uint64_t used = p->steps_per_epoch * (uint64_t)r->o->optim.batch_size;
	p->dropped_batch = p->records_per_rank > used
				   ? (p->records_per_rank - used) * (uint64_t)p->world
				   : 0;
	p->dropped = p->dropped_ranks + p->dropped_batch;
}

/* The rank's GPU now (NVML), after each train line; nothing without it. */
static int gpu_line(run *r, ims_error *err)
{
	nn_gpu_sample s;
	char line[512];
	if (!r->log.gpumon || r->log.metrics_fd < 0 ||
	    nn_gpumon_sample(r->log.gpumon, &s))
		return 0;
	int n = nn_gpu_line(line, sizeof(line) - 1, r->dp.rank, r->log.device,
			    ims_now() - r->log.t_start, &s);
	if (n < 0)
		return 0;
	line[n] = '\n';
	return metrics_write(r, line, (size_t)n + 1, err);
}

/* The train line of the steps since the last one, and the progress
 * event; nothing for an interval without steps. */
int loop_report_interval(run *r, int epoch, uint64_t step,
			 const loop_interval *iv, ims_error *err)
{
	if (iv->steps == 0)
		return 0;
	const double now = ims_now();
	const double span = now - iv->t0;
	const int steps = iv->steps;
	const double elapsed = now - r->log.t_start; /* the whole run's */
	const uint64_t done = step - r->log.step0;     /* this part's */
	const double pace = r->log.t_part > 0 ? now - r->log.t_part : elapsed;
	nn_train_progress p = {
		.rank = r->dp.rank,
		.world = r->dp.world,
		.epoch = epoch,
		.step = step,
		.total_steps = r->sched.total_steps,
		.steps = steps,
		.images = iv->images,
		.seconds = span,
		.loss_sum = iv->loss_sum,
		.correct = iv->correct,
		.samples = iv->samples,
		.scored = iv->scored,
		.lr = nn_lr_at_position(&r->sched.lr, r->sched.pos), /* the last step's */
		.wait_s = iv->wait_s,
		.compute_s = iv->compute_s,
		.comm_s = iv->comm_s,
		.loss_scale = nn_loss_scale_value(&r->fp16.scaler),
		.skipped_steps = r->fp16.scaler.skipped,
		.images_per_s = span > 0 ? iv->images / span : 0,
		.images_per_s_total = span > 0 ? iv->samples / span : 0,
		.elapsed_s = elapsed,
		.eta_s = done == 0 ? -1
			 : step >= r->log.step_end
				 ? 0
				 : pace / (double)done *
					   (double)(r->log.step_end - step),
	};
	cJSON *j = loop_metrics_object("train");
	cJSON_AddNumberToObject(j, "rank", p.rank);
	cJSON_AddNumberToObject(j, "epoch", epoch);
	cJSON_AddNumberToObject(j, "step", (double)step);
	/* an interval whose every step overflowed in fp16 has no loss: null,
	 * not a 0 that reads as a perfect fit */
	if (p.scored > 0) {
		cJSON_AddNumberToObject(j, "loss", p.loss_sum / p.scored);
		cJSON_AddNumberToObject(j, "accuracy", p.correct / p.scored);
	} else {
		cJSON_AddNullToObject(j, "loss");
		cJSON_AddNullToObject(j, "accuracy");
	}
	cJSON_AddNumberToObject(j, "lr", p.lr);
	cJSON_AddNumberToObject(j, "images_per_s", p.images_per_s);
	cJSON_AddNumberToObject(j, "data_wait_ms", 1e3 * p.wait_s / steps);
	cJSON_AddNumberToObject(j, "compute_ms", 1e3 * p.compute_s / steps);
	cJSON_AddNumberToObject(j, "comm_ms", 1e3 * p.comm_s / steps);
	cJSON_AddNumberToObject(j, "steps", steps); /* in this interval */
	cJSON_AddNumberToObject(j, "wall_s", elapsed);
	/* fp16's loss scale now and steps skipped so far (1 and 0 otherwise) */
	cJSON_AddNumberToObject(j, "loss_scale", p.loss_scale);
	cJSON_AddNumberToObject(j, "skipped_steps", (double)p.skipped_steps);
	FORWARD_IF_ERR(loop_metrics_line(r, j, err));
	FORWARD_IF_ERR(gpu_line(r, err));
	if (r->log.ev.progress)
		r->log.ev.progress(r->log.ev.ctx, &p);
	return 0;
}

/* The val line (rank 0; wall: the training clock) and the event. */
int loop_report_validation(run *r, const nn_train_validation *v,
			   double wall_s, ims_error *err)
{
	if (r->dp.rank == 0) {
		cJSON *j = loop_metrics_object("val");
		cJSON_AddNumberToObject(j, "epoch", v->epoch);
		cJSON_AddNumberToObject(j, "step", (double)v->step);
		cJSON_AddNumberToObject(j, "loss", v->loss);
		cJSON_AddNumberToObject(j, "top1", v->top1);
		cJSON_AddNumberToObject(j, "top5", v->top5);
		cJSON_AddNumberToObject(j, "records", (double)v->records);
		cJSON_AddNumberToObject(j, "bad_records", (double)v->bad_records);
		cJSON_AddNumberToObject(j, "wall_s", wall_s);
		cJSON_AddNumberToObject(j, "val_s", v->seconds);
		FORWARD_IF_ERR(loop_metrics_line(r, j, err));
	}
	if (r->log.ev.validated)
		r->log.ev.validated(r->log.ev.ctx, v);
	return 0;
}

/* The options that shaped a run, as the checkpoint metadata and
 * summary.json record them. NULL when out of memory. */
/* A float option as the decimal the user gave (0.1, not the widened
 * 0.1000000015): the shortest %g that reads back as the same float. */
static double f32_decimal(float v)
{
	char s[32];
	for (int p = 6; p < 9; p++) {
		snprintf(s, sizeof(s), "%.*g", p, (double)v);
		if (strtof(s, NULL) == v)
			return strtod(s, NULL);
	}
	return v;
}

cJSON *loop_options_json(const run *r)
{
	const nn_train_opts *o = r->o;
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "train", o->data.train_manifest);
	if (o->data.val_manifest)
		cJSON_AddStringToObject(j, "val", o->data.val_manifest);
	else
		cJSON_AddNullToObject(j, "val");
	cJSON_AddNumberToObject(j, "val_crop_frac", o->data.val_crop_frac);
	cJSON_AddNumberToObject(j, "epochs", o->optim.epochs);
	cJSON_AddNumberToObject(j, "batch_size", o->optim.batch_size);
	cJSON_AddNumberToObject(j, "lr", o->optim.lr);
	cJSON_AddNumberToObject(j, "lr_peak", nn_lr_peak(&r->sched.lr));
	cJSON_AddStringToObject(j, "model", o->net.model);
	cJSON_AddNumberToObject(j, "size", o->data.size);
	cJSON_AddNumberToObject(j, "threads", r->ctx.threads);
	cJSON_AddNumberToObject(j, "loader_threads", r->log.loader_threads);
	cJSON_AddNumberToObject(j, "world", r->dp.world);
	cJSON_AddNumberToObject(j, "seed", (double)o->seed);
	cJSON_AddStringToObject(j, "optimizer",
				o->optim.optimizer == NN_OPTIM_ADAM    ? "adam"
				: o->optim.optimizer == NN_OPTIM_ADAMW ? "adamw"
								 : "sgd");
	cJSON_AddBoolToObject(j, "nesterov", o->optim.nesterov);
	cJSON_AddStringToObject(j, "device", o->net.device ? o->net.device : "cpu");
	cJSON_AddStringToObject(j, "precision", o->net.precision ? o->net.precision : "fp32");
	/* what the context runs with (a device's defaults included) */
	static const char *const algo[] = {"benchmark", "heuristic",
					   "deterministic"};
	cJSON_AddStringToObject(j, "cudnn_algo",
				r->ctx.conv_algo >= 0 && r->ctx.conv_algo < 3
					? algo[r->ctx.conv_algo]
					: "?");
	cJSON_AddBoolToObject(j, "tf32", r->ctx.tf32);
	cJSON_AddBoolToObject(j, "channels_last", nn_model_channels_last(r->m));
	cJSON_AddStringToObject(j, "cuda_graphs", o->net.cuda_graphs ? o->net.cuda_graphs : "auto");
	cJSON_AddNumberToObject(j, "max_steps", (double)o->optim.max_steps);
	cJSON_AddNumberToObject(j, "momentum", o->optim.momentum);
	cJSON_AddNumberToObject(j, "weight_decay", o->optim.weight_decay);
	cJSON_AddBoolToObject(j, "no_bn_bias_decay", o->optim.no_bn_bias_decay);
	cJSON_AddNumberToObject(j, "warmup_epochs", o->optim.warmup_epochs);
	cJSON_AddStringToObject(j, "schedule",
				o->optim.schedule == NN_LR_STEP       ? "step"
				: o->optim.schedule == NN_LR_CONSTANT ? "constant"
								: "cosine");
	cJSON_AddBoolToObject(j, "no_lr_scaling", o->optim.no_lr_scaling);
	cJSON_AddStringToObject(j, "augment", o->data.augment ? o->data.augment : "none");
	cJSON_AddNumberToObject(j, "label_smoothing", f32_decimal(o->optim.label_smoothing));
	cJSON_AddBoolToObject(j, "freeze_bn", o->net.freeze_bn);
	cJSON_AddBoolToObject(j, "freeze_backbone", o->net.freeze_backbone);
	cJSON_AddBoolToObject(j, "synthetic", o->data.synthetic);
	cJSON_AddNumberToObject(j, "bucket_mb", o->comm.bucket_mb);
	cJSON_AddBoolToObject(j, "shard_owning", o->data.shard_owning);
	cJSON_AddNumberToObject(j, "max_bad_records", (double)o->data.max_bad_records);
	return j;
}

/* summary.json's object: the run's totals, every rank's time split
 * (all[3 * rank + {busy, wait, comm}]) and the options. */
static cJSON *summary_json(const run *r, const nn_train_result *res,
			   const double *all)
{
	const nn_train_opts *o = r->o;
	cJSON *j = cJSON_CreateObject();
	if (r->part.run_id[0])
		cJSON_AddStringToObject(j, "run_id", r->part.run_id);
	cJSON_AddNumberToObject(j, "world", r->dp.world);
	cJSON_AddStringToObject(j, "model", o->net.model);
	/* what --init started the run from, whichever part it was given to
	 * (history.c); absent for a run from scratch */
	if (r->part.hist.init_json)
		cJSON_AddItemToObject(j, "init", cJSON_Parse(r->part.hist.init_json));
	cJSON_AddStringToObject(j, "device", o->net.device);
	cJSON_AddNumberToObject(j, "threads", r->ctx.threads);
	cJSON_AddNumberToObject(j, "batch_per_rank", o->optim.batch_size);
	cJSON_AddNumberToObject(j, "global_batch", (double)o->optim.batch_size * r->dp.world);
	cJSON_AddNumberToObject(j, "lr_per_rank", o->optim.lr);
	cJSON_AddNumberToObject(j, "lr_batch", r->sched.lr_batch);
	cJSON_AddNumberToObject(j, "lr_peak", nn_lr_peak(&r->sched.lr));
	cJSON_AddNumberToObject(j, "epochs", res->epochs_done);
	cJSON_AddNumberToObject(j, "steps", (double)res->steps);
	cJSON_AddNumberToObject(j, "images", (double)res->images);
	cJSON_AddNumberToObject(j, "wall_s", res->wall_s);
	cJSON_AddNumberToObject(j, "train_s", res->train_s);
	cJSON_AddNumberToObject(j, "startup_s", res->startup_s);
	cJSON_AddNumberToObject(j, "images_per_s", res->images_per_s);
	static const char *const split[3] = {"busy_s", "data_wait_s_per_rank",
					     "comm_s_per_rank"};
	for (int k = 0; k < 3; k++) {
		cJSON *b = cJSON_AddArrayToObject(j, split[k]);
		for (int i = 0; i < r->dp.world; i++)
			cJSON_AddItemToArray(b, cJSON_CreateNumber(all[3 * i + k]));
	}
	cJSON_AddNumberToObject(j, "busy_max_min_ratio", res->busy_ratio);
	const double wait = r->part.hist.wait_s + res->wait_s;
	cJSON_AddNumberToObject(j, "data_wait_s", wait);
	cJSON_AddNumberToObject(j, "stall_fraction",
				res->train_s > 0 ? wait / res->train_s : 0);
	nn_train_plan plan;
	loop_plan(r, &plan);
	/* records no step trained on, every epoch (nn_train_plan) */
	cJSON_AddNumberToObject(j, "records_dropped_per_epoch", (double)plan.dropped);
	cJSON_AddNumberToObject(j, "records_dropped_so_ranks_are_equal",
				(double)plan.dropped_ranks);
	cJSON_AddNumberToObject(j, "records_dropped_in_short_batches",
				(double)plan.dropped_batch);
	/* without --val no accuracy is claimed: the figures are absent */
	cJSON_AddBoolToObject(j, "validation", plan.validation);
	if (plan.validation) {
		cJSON_AddNumberToObject(j, "val_top1", res->val_top1);
		cJSON_AddNumberToObject(j, "val_top5", res->val_top5);
		cJSON_AddNumberToObject(j, "best_val_top1", res->best_top1);
		cJSON_AddNumberToObject(j, "best_epoch", res->best_epoch); /* from 0, as in metrics.jsonl */
		cJSON_AddNumberToObject(j, "best_wall_s", res->best_wall_s);
	}
	cJSON_AddNumberToObject(j, "val_s", r->log.val_s);
	cJSON_AddNumberToObject(j, "checkpoint_s", r->log.ckpt_s);
	cJSON_AddNumberToObject(j, "checkpoints", (double)r->log.ckpts);
	cJSON_AddNumberToObject(j, "loss_scale", res->loss_scale);
	cJSON_AddNumberToObject(j, "skipped_steps", (double)res->skipped_steps);
	if (plan.device_stack)
		cJSON_AddStringToObject(j, "device_stack", plan.device_stack);
	/* --cuda-graphs: passes recorded and replays of them in this part;
	 * why none, when so */
	cJSON *g = cJSON_AddObjectToObject(j, "cuda_graphs");
	cJSON_AddNumberToObject(g, "recorded", (double)r->graphs.recorded);
	cJSON_AddNumberToObject(g, "replayed", (double)r->graphs.replayed);
	if (r->graphs.why)
		cJSON_AddStringToObject(g, "off", r->graphs.why);
	else
		cJSON_AddNullToObject(g, "off");
	cJSON_AddNumberToObject(j, "bad_records", (double)res->bad_records);
	cJSON *first = cJSON_AddArrayToObject(j, "bad_record_indices");
	for (int i = 0; i < r->bad.n_first; i++)
		cJSON_AddItemToArray(first, cJSON_CreateNumber((double)r->bad.first[i]));
	cJSON_AddNumberToObject(j, "val_records", (double)res->val_records);
	cJSON_AddNumberToObject(j, "val_bad_records", (double)res->val_bad_records);
	/* each part of a resumed run: its ranks, batch, steps, images, time */
	cJSON *parts = loop_history_parts(r, res);
	if (parts)
		cJSON_AddItemToObject(j, "parts", parts);
	nn_model_memory mem;
	nn_model_memory_info(r->m, &mem);
	if (res->profile.steps) {
		/* milliseconds per profiled step */
		const nn_train_profile *p = &res->profile;
		const double ms = 1000.0 / (double)p->steps;
		cJSON *pj = cJSON_AddObjectToObject(j, "profile");
		cJSON *fw = cJSON_CreateObject(), *bw = cJSON_CreateObject();
		cJSON_AddNumberToObject(pj, "steps", (double)p->steps);
		for (int k = 0; k < NN_PROF_KINDS; k++) {
			cJSON_AddNumberToObject(fw, nn_profile_kinds[k],
						p->layers.forward_s[k] * ms);
			cJSON_AddNumberToObject(bw, nn_profile_kinds[k],
						p->layers.backward_s[k] * ms);
		}
		cJSON_AddItemToObject(pj, "forward_ms", fw);
		cJSON_AddItemToObject(pj, "backward_ms", bw);
		cJSON_AddNumberToObject(pj, "loss_ms", p->loss_s * ms);
		cJSON_AddNumberToObject(pj, "allreduce_ms", p->allreduce_s * ms);
		cJSON_AddNumberToObject(pj, "update_ms", p->update_s * ms);
		cJSON_AddNumberToObject(pj, "step_ms", p->step_s * ms);
	}
	cJSON_AddNumberToObject(j, "activation_bytes", (double)mem.activation_bytes);
	cJSON_AddNumberToObject(j, "activation_bytes_per_image",
				mem.activation_bytes_per_image);
	cJSON *opts = loop_options_json(r);
	if (opts)
		cJSON_AddItemToObject(j, "options", opts);
	return j;
}

int loop_summary_missing(run *r, int *missing, ims_error *err)
{
	char path[4096];
	*missing = 0;
	if (!r->o->out.log_dir)
		return 0;
	/* the run logged there (its metrics.jsonl: loop_check_resumed_logs
	 * checked whose it is), and did not end there */
	FORWARD_IF_ERR(log_path(r->o, "metrics.jsonl", path, sizeof(path), err));
	struct stat st;
	if (lstat(path, &st) != 0)
		return 0;
	FORWARD_IF_ERR(log_path(r->o, "summary.json", path, sizeof(path), err));
	*missing = lstat(path, &st) != 0 && errno == ENOENT;
	return 0;
}

/* Every rank's busy time gathered (for res->busy_ratio), then rank 0
 * writes LOGDIR/summary.json atomically. */
int loop_write_summary(run *r, nn_train_result *res, ims_error *err)
{
	/* per rank: compute (busy), data wait, communication */
	double mine[3] = {r->log.busy_s, res->wait_s, r->log.comm_s};
	double *all = calloc((size_t)r->dp.world * 3, sizeof(double));
	RETURN_IF(!all, err, IMS_ENOMEM, "cannot summarise: out of memory");
	int rc = dp_allgather_f64(r->dp.comm, mine, 3, all, err);
	double mx = 0, mn = INFINITY;
	for (int i = 0; !rc && i < r->dp.world; i++) {
		mx = all[3 * i] > mx ? all[3 * i] : mx;
		mn = all[3 * i] < mn ? all[3 * i] : mn;
	}
	res->busy_ratio = mn > 0 ? mx / mn : 1;
	if (rc || r->dp.rank != 0 || !r->o->out.log_dir) {
		free(all);
		return rc;
	}
	ims_json_watch(); /* a summary without a member is not written */
	cJSON *j = summary_json(r, res, all);
	free(all);
	char *text = ims_json_print(j, 1);
	cJSON_Delete(j);
	RETURN_IF(!text, err, IMS_ENOMEM, "cannot summarise: out of memory");
	char path[4096];
	rc = log_path(r->o, "summary.json", path, sizeof(path), err);
	if (!rc) {
		size_t n = strlen(text);
		text[n] = '\n'; /* replaces the terminator: written by length */
		rc = ims_write_file_atomic(path, text, n + 1, err);
	}
	free(text);
	return rc;
}
