/*
 * train_print.c - imshard-train's lines: the loop's events as text
 * (train_print.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "train_print.h"

#include "common/common.h"

void train_say(const char *fmt, ...)
{
	char text[4 * IMS_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	char safe[4 * sizeof(text)];
	fprintf(stderr, "imshard-train: %s\n", ims_escape(text, safe, sizeof(safe)));
}

static int printing(const train_printer *p)
{
	return p->rank == 0 && !p->o->out.quiet;
}

static void on_started(void *ctx, const nn_train_plan *p)
{
	const train_printer *pr = ctx;
	const nn_train_opts *o = pr->o;
	if (!printing(pr))
		return;
	/* a run resumed with another batch: --lr is for the first part's */
	char per[48] = "";
	if (p->lr_batch != o->optim.batch_size && !o->optim.no_lr_scaling)
		snprintf(per, sizeof(per), " of batch %d", p->lr_batch);
	train_say("%s, %d classes, %d %s x batch %d, %llu %s per "
		"epoch (%llu %s per rank); lr %g per rank%s, %g with %d %s x "
		"batch %d (%s)",
		o->net.model, p->classes, p->world, ims_plural(p->world, "rank", "ranks"),
		o->optim.batch_size, (unsigned long long)p->steps_per_epoch,
		ims_plural(p->steps_per_epoch, "step", "steps"),
		(unsigned long long)p->records_per_rank,
		ims_plural(p->records_per_rank, "record", "records"), o->optim.lr, per,
		p->lr_peak, p->world, ims_plural(p->world, "rank", "ranks"),
		o->optim.batch_size,
		o->optim.no_lr_scaling ? "scaling off" : "linear scaling rule");
	train_say("%llu training %s dropped per epoch (%llu so "
		"ranks are equal, %llu in short last batches: every step "
		"trains whole batches)",
		(unsigned long long)p->dropped,
		ims_plural(p->dropped, "record", "records"),
		(unsigned long long)p->dropped_ranks,
		(unsigned long long)p->dropped_batch);
	train_say("threads per rank: %d compute (%s), %d loading "
		"(%s)",
		p->threads, o->net.threads ? "--threads" : "OpenMP's default",
		p->loader_threads,
		o->data.loader_threads ? "--loader-threads"
		: o->net.threads      ? "as --threads"
				  : "the cores this process may run on");
	if (!p->validation)
		train_say("no --val: training without validation "
			"(no accuracy is measured)");
	train_say("activations: %.1f MiB planned for batches of %d "
		"(%.2f MiB per image), %s",
		(double)p->activations.activation_bytes / 1048576.0,
		p->activations.max_batch,
		p->activations.activation_bytes_per_image / 1048576.0,
		p->channels_last ? "channels-last (NHWC)" : "NCHW");
	if (p->device_stack)
		train_say("cuda: %s", p->device_stack);
	if (!strcmp(o->net.device, "cuda"))
		train_say("cuda graphs: %s%s", p->cuda_graphs ? "on (" : "off: ",
			  p->cuda_graphs ? "each step's passes recorded once, from the third step, then replayed)"
					 : p->cuda_graphs_off);
	if (o->data.synthetic)
		train_say("--synthetic: every step trains on one "
			"fixed random batch per rank (nothing decoded); "
			"validation reads %s",
			o->data.val_manifest ? o->data.val_manifest : "nothing (no --val)");
}

void train_print_profile(const nn_train_profile *p)
{
	const double n = (double)p->steps, ms = 1000.0 / n;
	const double all = p->step_s > 0 ? p->step_s : 1;
	printf("profile of %llu %s (ms per step; each piece waited for, so the "
	       "sum is slower than an unprofiled step):\n",
	       (unsigned long long)p->steps, ims_plural(p->steps, "step", "steps"));
	printf("  %-10s %9s %9s %6s\n", "piece", "forward", "backward", "share");
	double layers = 0;
	for (int k = 0; k < NN_PROF_KINDS; k++) {
		const double f = p->layers.forward_s[k], b = p->layers.backward_s[k];
		layers += f + b;
		if (f + b > 0)
			printf("  %-10s %9.3f %9.3f %5.1f%%\n", nn_profile_kinds[k],
			       f * ms, b * ms, 100 * (f + b) / all);
	}
	const struct {
		const char *name;
		double s;
	} rest[] = {{"loss", p->loss_s}, {"allreduce", p->allreduce_s},
		    {"update", p->update_s}};
	for (size_t k = 0; k < sizeof(rest) / sizeof(rest[0]); k++)
		printf("  %-10s %9.3f %9s %5.1f%%\n", rest[k].name, rest[k].s * ms,
		       "", 100 * rest[k].s / all);
	const double other = p->step_s - layers - p->loss_s - p->allreduce_s -
			     p->update_s;
	printf("  %-10s %9.3f %9s %5.1f%%\n", "other", other * ms, "",
	       100 * other / all);
	printf("  %-10s %9.3f\n", "step", p->step_s * ms);
}

static void on_initialised(void *ctx, const char *path, const nn_load_report *r)
{
	const train_printer *pr = ctx;
	if (!printing(pr))
		return;
	train_say("loaded %d %s from '%s' (%s)",
		r->loaded, ims_plural((uint64_t)r->loaded, "tensor", "tensors"), path,
		r->verified ? "checksum verified"
			    : "it has no checksum: nothing to verify");
	for (int i = 0; i < r->n_reinit; i++)
		train_say("head '%s' %s: re-initialised",
			r->reinit[i],
			r->head_reset == 2 ? "(trained on other classes)"
			: r->head_reset  ? "(--reset-head)"
					 : "has another shape in the file");
	for (int i = 0; i < r->n_missing; i++)
		train_say("'%s' is not in '%s': kept as initialised",
			r->missing[i], path);
	for (int i = 0; i < r->n_unexpected; i++)
		train_say("'%s' in '%s' is not a tensor of %s: "
			"ignored",
			r->unexpected[i], path, pr->o->net.model);
}

static void on_resumed(void *ctx, const nn_train_resume *r)
{
	const train_printer *pr = ctx;
	/* a complete run is told on stdout by main, quiet or not */
	if (!printing(pr) || r->complete)
		return;
	train_say("resuming from '%s' at epoch %d, step %llu "
		"(position %llu of the epoch's order)%s",
		r->path, r->epoch + 1, (unsigned long long)r->step,
		(unsigned long long)r->position,
		r->verified ? "" : "; it has no checksum (written before "
				   "checkpoints had one): not verified");
	const int global_was = r->world_was * r->batch_was,
		  global = r->world * r->batch;
	if (r->world_was != r->world || r->batch_was != r->batch)
		train_say("resumed with %d rank%s x batch %d (was %d x "
			"%d): global batch %d (was %d), peak lr %g (was %g); the "
			"schedule is re-derived over the data",
			r->world, r->world > 1 ? "s" : "", r->batch, r->world_was,
			r->batch_was, global, global_was, r->lr_peak, r->lr_peak_was);
	if (r->position)
		train_say("the rest of epoch %d: %llu steps%s",
			r->epoch + 1, (unsigned long long)r->rest_steps,
			r->rest_unused ? " (its last records fill no batch on every "
					 "rank: not trained, as at an epoch's end)"
				       : "");
	if (r->changed && r->changed[0])
		train_say("resumed with other settings: %s",
			r->changed);
}

/* s seconds as H:MM:SS, "?" when negative (unknown). */
static const char *clock_text(double s, char *buf, size_t len)
{
	if (!(s >= 0)) {
		snprintf(buf, len, "?");
		return buf;
	}
	unsigned long long t = (unsigned long long)(s + 0.5);
	snprintf(buf, len, "%llu:%02llu:%02llu", t / 3600, t / 60 % 60, t % 60);
	return buf;
}

static void on_progress(void *ctx, const nn_train_progress *p)
{
	if (!printing(ctx))
		return;
	char el[32], eta[32], fit[64];
	/* every step of the interval skipped for an fp16 forward overflow
	 * leaves no loss to give: a 0 would read as a perfect fit */
	if (p->scored > 0)
		snprintf(fit, sizeof(fit), "loss %.4f acc %.1f%%",
			 p->loss_sum / p->scored, 100 * p->correct / p->scored);
	else
		snprintf(fit, sizeof(fit), "no loss (every step skipped)");
	train_say("epoch %d step %llu/%llu %s "
		"lr %.4g, %.0f img/s per rank, %.0f img/s total, elapsed %s, "
		"eta %s (wait %.0f ms, compute %.0f ms, comm %.0f ms per step)",
		p->epoch + 1, (unsigned long long)p->step,
		(unsigned long long)p->total_steps, fit, p->lr,
		p->images_per_s, p->images_per_s_total,
		clock_text(p->elapsed_s, el, sizeof(el)),
		clock_text(p->eta_s, eta, sizeof(eta)),
		1e3 * p->wait_s / p->steps, 1e3 * p->compute_s / p->steps,
		1e3 * p->comm_s / p->steps);
}

static void on_validated(void *ctx, const nn_train_validation *v)
{
	if (printing(ctx))
		train_say("epoch %d validation: top-1 %.2f%%, "
			"top-5 %.2f%%, loss %.4f (%llu %s)",
			v->epoch + 1, 100 * v->top1, 100 * v->top5, v->loss,
			(unsigned long long)v->records,
			ims_plural(v->records, "record", "records"));
}

/* One line per epoch (or validation) that met records it could not load:
 * shown under --quiet too, since the run's data is not what it was told. */
static void on_records_replaced(void *ctx, const nn_train_bad *b)
{
	const train_printer *pr = ctx;
	if (pr->rank != 0)
		return;
	char list[160] = "";
	size_t n = 0;
	for (int i = 0; i < b->listed && n < sizeof(list); i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%llu",
				      i ? ", " : "", (unsigned long long)b->indices[i]);
	const char *why = b->reason ? b->reason : "";
	if (b->validation)
		train_say("warning: epoch %d validation: %llu record%s "
			"could not be loaded and %s left out (records %s%s%s%s)",
			b->epoch + 1, (unsigned long long)b->count,
			b->count == 1 ? "" : "s", b->count == 1 ? "was" : "were", list,
			(uint64_t)b->listed < b->count ? ", ..." : "",
			why[0] ? "; " : "", why);
	else
		train_say("warning: epoch %d: %llu training record%s "
			"could not be loaded, each replaced by another record of "
			"the epoch (records %s%s%s%s); %llu in the run so far",
			b->epoch + 1, (unsigned long long)b->count,
			b->count == 1 ? "" : "s", list,
			(uint64_t)b->listed < b->count ? ", ..." : "",
			why[0] ? "; " : "", why, (unsigned long long)b->total);
}

static void on_step_skipped(void *ctx, uint64_t step, double scale,
			    double new_scale, int forward)
{
	if (printing(ctx))
		train_say("step %llu: fp16 %s overflowed at "
			"loss scale %g: step skipped, scale now %g",
			(unsigned long long)step,
			forward ? "forward pass (loss not finite)" : "gradients",
			scale, new_scale);
}

/* Even with --quiet, as damaged records are: a warning says something
 * was removed, replaced or doubted, which no run may do without a word. */
static void on_warning(void *ctx, const char *msg)
{
	const train_printer *pr = ctx;
	if (pr->rank == 0)
		train_say("warning: %s", msg);
}

static void on_rank_warning(void *ctx, const char *msg)
{
	(void)ctx;
	train_say("warning: %s", msg);
}

static void on_rank_note(void *ctx, const char *msg)
{
	const train_printer *pr = ctx;
	if (!pr->o->out.quiet)
		train_say("%s", msg);
}

void train_print_events(train_printer *p, nn_train_events *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->started = on_started;
	ev->initialised = on_initialised;
	ev->resumed = on_resumed;
	ev->progress = on_progress;
	ev->validated = on_validated;
	ev->step_skipped = on_step_skipped;
	ev->records_replaced = on_records_replaced;
	ev->warning = on_warning;
	ev->rank_note = on_rank_note;
	ev->rank_warning = on_rank_warning;
	ev->ctx = p;
}
