/*
 * setup.c - what a run needs before its first step: checked options, the
 * compute context, the splits' classes, the loaders (or the --synthetic
 * batch), the model with rank 0's weights on every rank, the optimiser
 * and its schedule, and the gradient buckets.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recordio/recordio.h"
#include "train/loop/loop_internal.h"

int loop_algo_mode(const char *name)
{
	static const char *const modes[] = {"benchmark", "heuristic",
					    "deterministic"};
	static const int values[] = {NN_ALGO_BENCHMARK, NN_ALGO_HEURISTIC,
				     NN_ALGO_DETERMINISTIC};
	for (int i = 0; name && i < 3; i++)
		if (!strcmp(name, modes[i]))
			return values[i];
	return -1;
}

int loop_channels_last(const char *name)
{
	return !name || !strcmp(name, "auto") ? NN_CL_AUTO
	       : !strcmp(name, "on")          ? NN_CL_ON
	       : !strcmp(name, "off")         ? NN_CL_OFF
					      : -1;
}

int loop_check_opts(const nn_train_opts *o, int world, ims_error *err)
{
	RETURN_IF(!o->data.train_manifest, err, IMS_EINVAL,
		  "cannot train: no training split (--train)");
	RETURN_IF(!(o->data.val_crop_frac > 0 && o->data.val_crop_frac <= 1), err,
		  IMS_EINVAL,
		  "cannot validate with a crop fraction of %g: use more than 0 "
		  "and at most 1",
		  o->data.val_crop_frac);
	RETURN_IF(o->data.loader_threads < 0, err, IMS_EINVAL,
		  "cannot load with %d threads", o->data.loader_threads);
	RETURN_IF(strcmp(o->net.device, "cpu") && strcmp(o->net.device, "cuda"), err,
		  IMS_EINVAL, "cannot train on device '%s': use cpu or cuda",
		  o->net.device);
	RETURN_IF(nn_precision_of(o->net.precision) < 0, err, IMS_EINVAL, "unknown precision '%s': use fp32, bf16 or fp16",
		  o->net.precision);
	RETURN_IF(o->net.cudnn_algo && loop_algo_mode(o->net.cudnn_algo) < 0, err,
		  IMS_EINVAL,
		  "unknown --cudnn-algo '%s': use benchmark, heuristic or "
		  "deterministic",
		  o->net.cudnn_algo);
	RETURN_IF(loop_channels_last(o->net.channels_last) < 0, err, IMS_EINVAL,
		  "unknown --channels-last '%s': use auto, on or off",
		  o->net.channels_last);
	RETURN_IF(o->net.cuda_graphs && strcmp(o->net.cuda_graphs, "auto") &&
			  strcmp(o->net.cuda_graphs, "on") &&
			  strcmp(o->net.cuda_graphs, "off"),
		  err, IMS_EINVAL, "unknown --cuda-graphs '%s': use auto, on or off",
		  o->net.cuda_graphs);
	RETURN_IF(o->net.tf32 < -1 || o->net.tf32 > 1, err, IMS_EINVAL,
		  "--tf32 is %d: use 1 (on), 0 (off) or -1 (the device's "
		  "default)",
		  o->net.tf32);
	/* a device's settings: on the CPU they would be recorded in the
	 * options and do nothing (off and deterministic are what it does) */
	RETURN_IF(!strcmp(o->net.device, "cpu") && o->net.tf32 == 1, err, IMS_EINVAL,
		  "cannot use --tf32 on with --device cpu: TF32 is a GPU's "
		  "tensor-core format and the CPU multiplies in fp32 (leave "
		  "--tf32 out, or use --device cuda)");
	RETURN_IF(!strcmp(o->net.device, "cpu") && o->net.cudnn_algo &&
			  loop_algo_mode(o->net.cudnn_algo) != NN_ALGO_DETERMINISTIC,
		  err, IMS_EINVAL,
		  "cannot use --cudnn-algo %s with --device cpu: it chooses "
		  "cuDNN's algorithms on a GPU, and the CPU's convolutions give "
		  "the same bits every run (leave --cudnn-algo out, or use "
		  "--device cuda)",
		  o->net.cudnn_algo);
	RETURN_IF(o->optim.epochs < 1, err, IMS_EINVAL, "cannot train %d epochs",
		  o->optim.epochs);
	RETURN_IF(o->optim.batch_size < 1, err, IMS_EINVAL,
		  "cannot train with batches of %d", o->optim.batch_size);
	RETURN_IF(!(o->optim.lr > 0) || !isfinite(o->optim.lr), err, IMS_EINVAL,
		  "cannot train with learning rate %g", o->optim.lr);
	RETURN_IF(o->optim.warmup_epochs < 0 || o->optim.warmup_epochs > o->optim.epochs, err,
		  IMS_EINVAL, "cannot warm up for %g of %d epochs",
		  o->optim.warmup_epochs, o->optim.epochs);
	RETURN_IF(o->optim.label_smoothing < 0 || o->optim.label_smoothing >= 1, err,
		  IMS_EINVAL, "label smoothing %g is outside [0, 1)",
		  o->optim.label_smoothing);
	RETURN_IF(o->out.resume && !o->out.checkpoint_dir, err, IMS_EINVAL,
		  "cannot resume without --checkpoint-dir");
	RETURN_IF(o->out.resume && o->net.init, err, IMS_EINVAL,
		  "--resume and --init exclude each other: a resumed run "
		  "continues from its checkpoint");
	/* a resumed run's weights are its checkpoint's: a frozen run
	 * resumes frozen only when asked again, as every option is */
	RETURN_IF(o->net.freeze_backbone && !o->net.init && !o->out.resume, err,
		  IMS_EINVAL, "--freeze-backbone needs weights to freeze: --init, or "
		  "--resume of a checkpoint");
	RETURN_IF((o->net.init_partial || o->net.reset_head) && !o->net.init, err, IMS_EINVAL,
		  "--%s is about --init's weights: give --init",
		  o->net.init_partial ? "init-partial" : "reset-head");
	RETURN_IF(!(o->comm.bucket_mb > 0) || o->comm.bucket_mb > 1024, err, IMS_EINVAL,
		  "gradient buckets of %g MiB: use more than 0 and at most 1024",
		  o->comm.bucket_mb);
	/* several ranks on cuda need NCCL in the build: refused before
	 * anything starts */
	RETURN_IF(!strcmp(o->net.device, "cuda") && world > 1 && !dp_nccl_available(),
		  err, IMS_EUNSUPPORTED,
		  "cannot train on cuda with %d ranks: this build has no NCCL "
		  "(configured without it or the CUDA backend); run one "
		  "rank or use --device cpu",
		  world);
	return 0;
}

/* The class lists of both splits must agree: labels are indices. Without
 * --val the training split's list is the run's. */
/* A split's records, wherever it lies: its count and its shards' digests
 * (which cover every record's key and header). */
uint64_t loop_split_digest(const rio_manifest *m)
{
	uint64_t d = ims_hash64(m->records, m->n_shards);
	for (size_t i = 0; i < m->n_shards; i++)
		d = ims_hash64(ims_hash64(d, m->shards[i].records), m->shards[i].digest);
	return d;
}

/* The classes m's counts give no record: the network's outputs for them
 * are never trained (an empty class folder convert kept, a --classes
 * list longer than the data, a sparse label space). */
static void note_unseen(loop_data *d, const rio_manifest *m)
{
	size_t len = 0, listed = 0;
	d->unseen_classes = 0;
	d->unseen[0] = '\0';
	for (size_t k = 0; k < m->n_classes; k++) {
		if (m->class_counts[k])
			continue;
		const size_t nth = d->unseen_classes++;
		/* snprintf says what it would have written: past the end,
		 * nothing more is added */
		if (nth > 3 || len >= sizeof(d->unseen))
			continue;
		char safe[128];
		int n = nth == 3 ? snprintf(d->unseen + len, sizeof(d->unseen) - len, ", ...")
				 : snprintf(d->unseen + len, sizeof(d->unseen) - len,
					    "%s%zu '%s'", listed++ ? ", " : "", k,
					    ims_escape(m->classes[k], safe, sizeof(safe)));
		len += n > 0 ? (size_t)n : 0;
	}
}

int loop_load_classes(run *r, ims_error *err)
{
	rio_manifest a = {0}, b = {0};
	int rc = rio_manifest_load(r->o->data.train_manifest, &a, err);
	if (rc)
		return rc;
	rc = r->o->data.val_manifest ? rio_manifest_load(r->o->data.val_manifest, &b, err)
				: 0;
	if (rc) {
		rio_manifest_release(&a);
		return rc;
	}
	if (!r->o->data.val_manifest) {
		/* nothing to compare */
	} else if (a.n_classes != b.n_classes) {
		rc = ims_fail(err, IMS_EINVAL,
			      "cannot train: '%s' has %zu classes but '%s' has %zu "
			      "(pack both splits from one class list)",
			      r->o->data.train_manifest, a.n_classes,
			      r->o->data.val_manifest, b.n_classes);
	} else {
		for (size_t i = 0; i < a.n_classes && !rc; i++)
			if (strcmp(a.classes[i], b.classes[i]))
				rc = ims_fail(err, IMS_EINVAL,
					      "cannot train: class %zu is '%s' in '%s' "
					      "but '%s' in '%s'",
					      i, a.classes[i], r->o->data.train_manifest,
					      b.classes[i], r->o->data.val_manifest);
	}
	if (!rc && a.n_classes < 2)
		rc = ims_fail(err, IMS_EINVAL,
			      "cannot train on '%s': it has %zu class",
			      r->o->data.train_manifest, a.n_classes);
	if (!rc)
		rc = nn_model_card_set_names(&r->card, (const char *const *)a.classes,
					     a.n_classes, err);
	r->data.classes = (int)a.n_classes;
	/* what a resumed run checks it still trains on: the same records in
	 * the same shards (their digests cover every record's key and
	 * header), wherever the split now lies */
	snprintf(r->data.train_name, sizeof(r->data.train_name), "%s",
		 a.name ? a.name : "");
	r->data.train_records = a.records;
	r->data.train_digest = loop_split_digest(&a);
	note_unseen(&r->data, &a);
	if (r->o->data.val_manifest) {
		snprintf(r->data.val_name, sizeof(r->data.val_name), "%s",
			 b.name ? b.name : "");
		r->data.val_records = b.records;
		r->data.val_digest = loop_split_digest(&b);
	}
	rio_manifest_release(&a);
	rio_manifest_release(&b);
	return rc;
}

void loop_warn_val_is_train(run *r)
{
	/* the same records (the digests cover every record's key and
	 * header): a validation of them measures memorising, not accuracy */
	if (r->o->data.val_manifest && r->log.ev.warning &&
	    r->data.val_digest == r->data.train_digest &&
	    r->data.val_records == r->data.train_records) {
		char msg[2 * 4096 + 160];
		snprintf(msg, sizeof(msg),
			 "--val '%s' holds the records of --train '%s': its "
			 "accuracy is on records the run trains on",
			 r->o->data.val_manifest, r->o->data.train_manifest);
		r->log.ev.warning(r->log.ev.ctx, msg);
	}
	/* --synthetic draws its labels: the records' classes do not count */
	const size_t n = r->data.unseen_classes;
	if (n && r->log.ev.warning && !r->o->data.synthetic) {
		char msg[4096 + 768];
		if (n == 1)
			snprintf(msg, sizeof(msg),
				 "--train '%s' holds no record of class %s (of its %d "
				 "classes): the run never trains the network to "
				 "predict it",
				 r->o->data.train_manifest, r->data.unseen,
				 r->data.classes);
		else
			snprintf(msg, sizeof(msg),
				 "--train '%s' holds no record of %zu of its %d "
				 "classes (%s): the run never trains the network to "
				 "predict them",
				 r->o->data.train_manifest, n, r->data.classes,
				 r->data.unseen);
		r->log.ev.warning(r->log.ev.ctx, msg);
	}
}

/* What the options ask of the context: the activations' precision, and
 * on a device the convolution algorithm mode and TF32 (the CPU ignores
 * both). */
static void set_compute(run *r)
{
	const nn_train_opts *o = r->o;
	r->ctx.precision = nn_precision_of(o->net.precision);
	if (o->net.cudnn_algo)
		r->ctx.conv_algo = loop_algo_mode(o->net.cudnn_algo);
	/* the options record the context's mode as what ran: the CPU's
	 * convolutions give the same bits every run, whatever a device's
	 * default would be */
	if (!strcmp(o->net.device, "cpu"))
		r->ctx.conv_algo = NN_ALGO_DETERMINISTIC;
	if (o->net.tf32 >= 0)
		r->ctx.tf32 = o->net.tf32;
	r->ctx.channels_last = loop_channels_last(o->net.channels_last);
}

/*
 * The compute context, the loss scaler and the collective timeout, then
 * the classes: --device cuda first, so that a host without a usable GPU
 * hears nn_ctx_init_cuda's one line (no driver, no device, a build
 * without the backend) before anything else is read.
 */
int loop_open_context(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	if (!strcmp(o->net.device, "cuda")) {
		/* the rank's device is chosen, and selected, before anything
		 * else of the run can touch a GPU (a context made on device 0
		 * by the loader's pinned ring, NVML, NCCL or cuBLAS would
		 * cost every rank memory there) */
		int visible;
		FORWARD_IF_ERR(nn_cuda_device_count(&visible, err));
		r->log.device = nn_cuda_device_for_rank(dp_local_rank(r->dp.comm),
							visible);
		FORWARD_IF_ERR(nn_ctx_init_cuda(&r->ctx, r->log.device, err));
		r->ctx_ok = 1;
		set_compute(r);
	}
	nn_loss_scale_init(&r->fp16.scaler,
			   nn_precision_of(o->net.precision) == NN_PREC_FP16);
	FORWARD_IF_ERR(dp_set_timeout(r->dp.comm, o->comm.collective_timeout,
				      "imshard-train", err));
	RETURN_IF(r->hooks.inf_grad_step && !r->fp16.scaler.enabled, err, IMS_EINVAL,
		  "cannot inject an infinite gradient without --precision fp16 "
		  "(only fp16 checks gradients for overflow)");
	FORWARD_IF_ERR(loop_load_classes(r, err));
	if (r->ctx_ok)
		return 0;
	if (r->hooks.host_stage) {
		/* the device loop's host side on the CPU, one rank (several
		 * would take the GPU's NCCL path) */
		RETURN_IF(r->dp.world > 1, err, IMS_EINVAL,
			  "cannot stage batches on the host with %d ranks: the "
			  "host-staging hook is for one rank",
			  r->dp.world);
		FORWARD_IF_ERR(nn_ctx_init_cpu_staged(&r->ctx, o->net.threads, err));
	} else {
		FORWARD_IF_ERR(nn_ctx_init_cpu(&r->ctx, o->net.threads, err));
	}
	r->ctx_ok = 1;
	set_compute(r);
	return 0;
}

/* The loader's warnings about the split (aug_loader_opts.event), passed
 * on as the run's. */
static void loader_event(void *ctx, const char *msg)
{
	run *r = ctx;
	if (r->log.ev.warning)
		r->log.ev.warning(r->log.ev.ctx, msg);
}

int loop_open_loaders(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	aug_loader_opts lo;
	aug_loader_opts_init(&lo, 1);
	lo.manifest = o->data.train_manifest;
	lo.rank = r->dp.rank;
	lo.world = r->dp.world;
	lo.seed = o->seed;
	lo.batch_size = o->optim.batch_size;
	/* decoding has its own count; --threads alone still sets both, as
	 * it did before --loader-threads */
	lo.threads = o->data.loader_threads > 0 ? o->data.loader_threads
		     : o->net.threads > 0     ? o->net.threads
					  : omp_get_num_procs();
	r->log.loader_threads = lo.threads;
	lo.quiet = r->dp.rank != 0 || o->out.quiet || !o->out.verbose;
	lo.shard_owning = o->data.shard_owning;
	lo.event = loader_event;
	lo.event_ctx = r;
	loop_host_memory(r, &lo);
	lo.transform.out_w = lo.transform.out_h = o->data.size;
	lo.transform.crop_frac = o->data.val_crop_frac; /* the norrc geometry */
	FORWARD_IF_ERR(aug_transform_parse(o->data.augment ? o->data.augment : "none",
					   &lo.transform, err));
	memcpy(lo.transform.mean, o->data.mean, sizeof(o->data.mean));
	memcpy(lo.transform.std, o->data.std, sizeof(o->data.std));
	FORWARD_IF_ERR(aug_loader_open(&lo, &r->data.train, err));
	r->data.steps_per_epoch = aug_loader_batches_per_epoch(r->data.train);
	/* what eval and predict must feed the model: validation's input,
	 * recorded with or without --val */
	nn_model_card *c = &r->card;
	snprintf(c->model, sizeof(c->model), "%s", o->net.model);
	c->size = o->data.size;
	memcpy(c->mean, o->data.mean, sizeof(c->mean));
	memcpy(c->std, o->data.std, sizeof(c->std));
	c->val_crop_frac = o->data.val_crop_frac;
	c->have |= NN_CARD_MODEL | NN_CARD_SIZE | NN_CARD_MEAN | NN_CARD_STD |
		   NN_CARD_CROP;
	if (!o->data.val_manifest)
		return 0;

	aug_loader_opts vo;
	aug_loader_opts_init(&vo, 0);
	vo.manifest = o->data.val_manifest;
	vo.seed = o->seed;
	vo.batch_size = o->optim.batch_size;
	vo.threads = lo.threads;
	vo.quiet = 1;
	return loop_open_eval_loader(r, &vo, o->data.size, o->data.val_crop_frac, o->data.mean,
				     o->data.std, err);
}

int loop_open_eval_loader(run *r, aug_loader_opts *vo, int size,
			  float crop_frac, const float mean[3],
			  const float std[3], ims_error *err)
{
	vo->rank = r->dp.rank;
	vo->world = r->dp.world;
	loop_host_memory(r, vo);
	vo->drop_remainder = 0;
	vo->drop_last = 0;
	vo->transform.out_w = vo->transform.out_h = size;
	vo->transform.crop_frac = crop_frac;
	memcpy(vo->transform.mean, mean, 3 * sizeof(float));
	memcpy(vo->transform.std, std, 3 * sizeof(float));
	return aug_loader_open(vo, &r->data.val, err);
}

/*
 * --synthetic: one batch of standard-normal pixels (Box-Muller over the
 * counter-based generator, so the same for a rank whatever the threads)
 * and uniform labels, from (seed, rank). The train loader is opened for
 * its class list and epoch length but never started, so no decoding
 * competes with the compute threads.
 */
int loop_make_synthetic(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	loop_data *d = &r->data;
	const size_t n = (size_t)o->optim.batch_size;
	const size_t per = (size_t)3 * o->data.size * o->data.size;
	d->synth_x = malloc(n * per * sizeof(float));
	d->synth_labels = malloc(n * sizeof(int32_t));
	d->synth_padded = calloc(n, 1);
	d->synth_indices = malloc(n * sizeof(uint64_t));
	RETURN_IF(!d->synth_x || !d->synth_labels || !d->synth_padded ||
			  !d->synth_indices,
		  err, IMS_ENOMEM, "cannot make a synthetic batch of %zu: out of memory",
		  n);
	ims_rng g;
	ims_rng_seed(&g, o->seed, 0x53594e54ull + (uint64_t)r->dp.rank);
	for (size_t i = 0; i < n * per; i += 2) {
		double u1 = ims_rng_uniform(&g), u2 = ims_rng_uniform(&g);
		double rad = sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300));
		d->synth_x[i] = (float)(rad * cos(2 * M_PI * u2));
		if (i + 1 < n * per)
			d->synth_x[i + 1] = (float)(rad * sin(2 * M_PI * u2));
	}
	for (size_t i = 0; i < n; i++) {
		d->synth_labels[i] = (int32_t)ims_rng_below(&g, (uint64_t)d->classes);
		d->synth_indices[i] = i;
	}
	return 0;
}

void loop_free_data(run *r)
{
	loop_data *d = &r->data;
	aug_loader_close(d->train);
	aug_loader_close(d->val);
	free(d->synth_x);
	free(d->synth_labels);
	free(d->synth_padded);
	free(d->synth_indices);
	nn_model_card_release(&r->card);
}

/*
 * What --init loaded against the model's backbone (every tensor outside
 * the head, running statistics included): a file that holds none of the
 * model's tensors is refused (a file for another model), one that holds
 * fewer than the backbone's unless --init-partial, and a frozen backbone
 * must have been loaded whole. Batch norm's num_batches_tracked counters
 * are not required: they change no computation here (the running
 * statistics' momentum is fixed), and files written before PyTorch 0.4.1
 * or by converters lack them; a missing one is still listed.
 */
static int check_init(run *r, const nn_load_report *rep, ims_error *err)
{
	const nn_train_opts *o = r->o;
	int backbone = 0, missing = 0;
	const char *first = NULL;
	for (int i = 0; i < nn_model_tensor_count(r->m); i++) {
		const nn_tensor_info *t = nn_model_tensor(r->m, i);
		backbone += !t->head && t->kind != NN_TENSOR_COUNTER;
	}
	for (int i = 0; i < rep->n_missing; i++) {
		int k = nn_model_find(r->m, rep->missing[i]);
		const nn_tensor_info *t = k >= 0 ? nn_model_tensor(r->m, k) : NULL;
		if (t && !t->head && t->kind != NN_TENSOR_COUNTER) {
			missing++;
			first = first ? first : rep->missing[i];
		}
	}
	RETURN_IF(rep->loaded == 0, err, IMS_EINVAL,
		  "cannot initialise %s from '%s': none of its %d tensors is in the "
		  "file under its name and shape (weights of another model?)",
		  o->net.model, o->net.init, nn_model_tensor_count(r->m));
	char more[48] = "";
	if (missing > 1)
		snprintf(more, sizeof(more), " and %d more", missing - 1);
	RETURN_IF(missing && !o->net.init_partial, err, IMS_EINVAL,
		  "cannot initialise %s from '%s': it holds %d of the %d backbone "
		  "tensors ('%s'%s %s missing); --init-partial keeps the missing "
		  "ones as initialised",
		  o->net.model, o->net.init, backbone - missing, backbone, first,
		  more, missing > 1 ? "are" : "is");
	RETURN_IF(missing && o->net.freeze_backbone, err, IMS_EINVAL,
		  "cannot freeze the backbone of %s: '%s' left %d of its tensors as "
		  "initialised ('%s' first), and frozen they would never train",
		  o->net.model, o->net.init, missing, first);
	return 0;
}

/* What --init's model card says against this run, told once the file
 * is accepted. */
typedef struct init_card_notes {
	char classes[IMS_ERRMSG_MAX]; /* "" or the other-classes warning */
	char norm[IMS_ERRMSG_MAX];    /* "" or the other-normalisation one */
} init_card_notes;

/*
 * 1 when --init's file records class names (its model card) as many as
 * this run's but not the same: its head scores other classes and is not
 * loaded, as with --reset-head, and n->classes says why (not under
 * --reset-head itself, whose head is not loaded anyway). A file without
 * names (torchvision's) says nothing; one whose card does not read is
 * left to the load, which names what is wrong with it. A recorded
 * normalisation other than the run's goes to n->norm, with --reset-head
 * as well: the backbone is loaded all the same. The card is read from f,
 * the file the load takes next, before the load has verified its
 * checksum, so the caller says these only once the load has accepted the
 * file: a damaged card is then the damage it is, told in one line, not a
 * wrong class name.
 */
static int init_classes_differ(run *r, const st_file *f, init_card_notes *n)
{
	int other = 0;
	ims_error ignored;
	n->classes[0] = n->norm[0] = 0;
	nn_model_card c;
	nn_model_card_init(&c);
	int rc = nn_model_card_read(f, &c, &ignored);
	int i = 0;
	if (!rc && (c.have & NN_CARD_NAMES) && c.classes == r->card.classes)
		while (i < c.classes && !strcmp(c.class_names[i], r->card.class_names[i]))
			i++;
	if (!rc && !r->o->net.reset_head && (c.have & NN_CARD_NAMES) &&
	    c.classes == r->card.classes && i < c.classes) {
		other = 1;
		snprintf(n->classes, sizeof(n->classes),
			 "'%s' was trained on other classes (its class %d is "
			 "'%s', this run's is '%s'): its head is not loaded, "
			 "as with --reset-head",
			 r->o->net.init, i, c.class_names[i], r->card.class_names[i]);
	}
	/* weights learnt from inputs normalised otherwise see other numbers
	 * now: said, not refused (a run may mean it) */
	int same_norm = 1;
	for (int k = 0; k < 3; k++)
		same_norm &= c.mean[k] == r->o->data.mean[k] && c.std[k] == r->o->data.std[k];
	if (!rc && (c.have & NN_CARD_MEAN) && (c.have & NN_CARD_STD) && !same_norm)
		snprintf(n->norm, sizeof(n->norm),
			 "'%s' was trained on inputs normalised with --mean %g,%g,%g "
			 "--std %g,%g,%g; this run normalises with --mean %g,%g,%g "
			 "--std %g,%g,%g (give its values to match)",
			 r->o->net.init, (double)c.mean[0], (double)c.mean[1],
			 (double)c.mean[2], (double)c.std[0], (double)c.std[1],
			 (double)c.std[2], (double)r->o->data.mean[0],
			 (double)r->o->data.mean[1], (double)r->o->data.mean[2],
			 (double)r->o->data.std[0], (double)r->o->data.std[1],
			 (double)r->o->data.std[2]);
	nn_model_card_release(&c);
	return other;
}

/*
 * The model, from --init's weights when given; this rank's alone (no
 * collective), so a failure every rank meets (too large a batch, a
 * missing --init) is agreed on and told once. A resumed run's weights
 * are all its checkpoint's, which every rank reads
 * (loop_open_checkpoints): none are drawn, nor broadcast, and the model
 * refuses to run until that load wrote every tensor
 * (nn_model_create_unset).
 */
int loop_make_model(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	if (o->out.resume)
		FORWARD_IF_ERR(nn_model_create_unset(&r->ctx, o->net.model, r->data.classes,
						     o->data.size, o->data.size,
						     o->optim.batch_size, &r->m, err));
	else
		FORWARD_IF_ERR(nn_model_create(&r->ctx, o->net.model, r->data.classes,
					       o->data.size, o->data.size,
					       o->optim.batch_size, o->seed, &r->m, err));
	nn_model_freeze_bn(r->m, o->net.freeze_bn);
	FORWARD_IF_ERR(nn_model_check_train_batch(r->m, o->optim.batch_size, err));
	FORWARD_IF_ERR(nn_model_set_rank(r->m, r->dp.rank, r->dp.world, err));
	/* a frozen backbone's activations are not kept for a backward that
	 * never reaches them */
	if (o->net.freeze_backbone)
		FORWARD_IF_ERR(nn_model_set_use(r->m, NN_USE_TRAIN_HEAD, err));
	/* algorithms chosen and workspaces sized now, before any
	 * collective: nothing is reallocated once steps run */
	FORWARD_IF_ERR(nn_model_prepare(r->m, err));
	if (o->net.init) {
		/* opened once: its card, its tensors and the size and CRC-32C
		 * the run records are one file's, whatever replaces it
		 * meanwhile (a run writing its next checkpoint) */
		st_file *f = NULL;
		FORWARD_IF_ERR(st_open(o->net.init, &f, err));
		init_card_notes notes;
		const int other = init_classes_differ(r, f, &notes);
		nn_load_report rep;
		memset(&rep, 0, sizeof(rep));
		/* the file's size and CRC-32C name it in the run's record
		 * (loop_history_init) */
		const unsigned flags = NN_INIT_FILE_CRC |
				       (o->net.reset_head || other ? NN_INIT_RESET_HEAD : 0);
		int lrc = nn_checkpoint_load_init_file(f, r->m, flags, &rep, err);
		st_close(f);
		FORWARD_IF_ERR(lrc);
		if (other && rep.head_reset)
			rep.head_reset = 2;
		/* told only once accepted: a refused file's error is the
		 * one line said about it */
		int rc = check_init(r, &rep, err);
		if (!rc)
			rc = loop_history_init(r, &rep, err);
		for (int k = 0; k < 2 && !rc && r->log.ev.warning; k++) {
			const char *note = k ? notes.norm : notes.classes;
			if (note[0])
				r->log.ev.warning(r->log.ev.ctx, note);
		}
		if (!rc && r->log.ev.initialised)
			r->log.ev.initialised(r->log.ev.ctx, o->net.init, &rep);
		nn_load_report_release(&rep);
		FORWARD_IF_ERR(rc);
	}
	return 0;
}

/* The same model on every rank (a collective): rank 0's parameters and
 * running statistics broadcast (over NCCL between devices, its id sent
 * over MPI); a resumed run's are its checkpoint's. */
int loop_share_model(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	size_t np, nb;
	float *params = nn_model_params(r->m, &np);
	float *bufs = nn_model_buffers(r->m, &nb);
	if (r->dp.world > 1 && nn_ctx_has_staging(&r->ctx)) {
		FORWARD_IF_ERR(dp_nccl_create(r->dp.comm, &r->ctx, o->comm.collective_timeout,
					      &r->dp.nccl, err));
		if (o->out.resume)
			return 0;
		FORWARD_IF_ERR(dp_nccl_broadcast(r->dp.nccl, params, np, 0, err));
		return dp_nccl_broadcast(r->dp.nccl, bufs, nb, 0, err);
	}
	/* every rank agreed on --resume (loop_agree) */
	if (o->out.resume)
		return 0;
	FORWARD_IF_ERR(dp_broadcast(r->dp.comm, params, np * sizeof(float), 0, err));
	return dp_broadcast(r->dp.comm, bufs, nb * sizeof(float), 0, err);
}

/*
 * The learning-rate schedule over --epochs, in this run's steps; and the
 * steps the whole run will have trained. Run after the checkpoint is read:
 * a resumed run with another global batch re-derives the schedule over
 * its own steps (warmup and decay stay fractions of the epochs, so the
 * rate at a point of the data is the uninterrupted run's, and the loop
 * places a resumed epoch's first step where its position falls), and the
 * linear scaling rule follows the global batch: --lr is for one rank at
 * the batch size the run started with (r->sched.lr_batch).
 */
int loop_setup_schedule(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	/* the schedule spans --epochs; --max-steps only stops early, so a
	 * run stopped and resumed follows the uninterrupted run's rates */
	uint64_t total = (uint64_t)o->optim.epochs * r->data.steps_per_epoch;
	nn_lr_opts lo;
	nn_lr_opts_init(&lo);
	/* 1.0 exactly unless the batch changed: the same bits as ever */
	lo.base_lr = o->optim.no_lr_scaling ? o->optim.lr
				      : o->optim.lr * ((double)o->optim.batch_size / (double)r->sched.lr_batch);
	lo.world = r->dp.world;
	lo.no_scaling = o->optim.no_lr_scaling;
	lo.warmup_steps = (int64_t)llround(o->optim.warmup_epochs *
					   (double)r->data.steps_per_epoch);
	lo.decay = o->optim.schedule;
	if (o->optim.schedule == NN_LR_STEP) {
		/* x0.1 at half and three quarters of the run */
		lo.gamma = 0.1;
		lo.milestones[0] = (int64_t)(total / 2 > 0 ? total / 2 : 1);
		lo.milestones[1] = (int64_t)(total * 3 / 4 > (uint64_t)lo.milestones[0]
						     ? total * 3 / 4
						     : (uint64_t)lo.milestones[0] + 1);
		lo.n_milestones = 2;
	} else if (o->optim.schedule == NN_LR_COSINE) {
		lo.total_steps = (int64_t)total > lo.warmup_steps
					 ? (int64_t)total
					 : lo.warmup_steps + 1;
	}
	FORWARD_IF_ERR(nn_lr_schedule_init(&r->sched.lr, &lo, err));
	r->sched.total_steps = r->part.at.step;
	if (r->part.at.epoch < o->optim.epochs)
		r->sched.total_steps += (r->part.at.position ? aug_loader_batches_at(r->data.train,
									  r->part.at.position)
						  : r->data.steps_per_epoch) +
				  (uint64_t)(o->optim.epochs - r->part.at.epoch - 1) *
					  r->data.steps_per_epoch;
	return 0;
}

/* The optimiser over the trained tensors (frozen ones kept as they are). */
int loop_setup_optim(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	int nt = nn_model_tensor_count(r->m);
	r->segs = calloc((size_t)nt, sizeof(*r->segs));
	RETURN_IF(!r->segs, err, IMS_ENOMEM, "cannot train: out of memory");
	for (int i = 0; i < nt; i++) {
		const nn_tensor_info *t = nn_model_tensor(r->m, i);
		if (t->kind == NN_TENSOR_RUNNING || t->kind == NN_TENSOR_COUNTER)
			continue;
		nn_optim_segment *s = &r->segs[r->nsegs++];
		s->offset = t->offset;
		s->count = t->count;
		s->decay = t->kind == NN_TENSOR_WEIGHT || !o->optim.no_bn_bias_decay;
		s->trainable = !o->net.freeze_backbone || t->head;
	}
	nn_optim_opts oo;
	nn_optim_opts_init(&oo, o->optim.optimizer);
	if (o->optim.optimizer == NN_OPTIM_SGD) {
		oo.momentum = o->optim.momentum;
		oo.nesterov = o->optim.nesterov;
	}
	oo.weight_decay = o->optim.weight_decay;
	oo.threads = r->ctx.threads;
	oo.ctx = &r->ctx; /* state on its device; the CPU's stays on the host */
	size_t np;
	nn_model_params(r->m, &np);
	return nn_optim_create(&oo, np, &r->opt, err);
}

/* nn_model_backward's hook: send what backward has finished. */
static int grads_ready(void *ud, size_t ready, ims_error *err)
{
	run *r = ud;
	return dp_buckets_ready(r->dp.buckets, ready, err);
}

static int grads_ready_nccl(void *ud, size_t ready, ims_error *err)
{
	run *r = ud;
	return dp_nccl_ready(r->dp.nccl, ready, err);
}

/*
 * With several ranks, gradients are summed in buckets of --bucket-mb from
 * the last layer's down, each started as soon as backward has finished it
 * and progressed between layers, so most of the allreduce overlaps the
 * rest of backward.
 */
int loop_setup_buckets(run *r, ims_error *err)
{
	if (r->dp.world < 2)
		return 0;
	size_t np;
	float *g = nn_model_grads(r->m, &np);
	double floats = r->o->comm.bucket_mb * 1048576.0 / sizeof(float);
	if (r->dp.nccl) {
		/* on the device: NCCL on its own stream (train/dp.h) */
		FORWARD_IF_ERR(dp_nccl_buckets(r->dp.nccl, g, np,
					       floats < 1 ? 1 : (size_t)floats, err));
		nn_model_set_grad_hook(r->m, grads_ready_nccl, r);
		return 0;
	}
	FORWARD_IF_ERR(dp_buckets_create(r->dp.comm, g, np,
					 floats < 1 ? 1 : (size_t)floats,
					 &r->dp.buckets, err));
	nn_model_set_grad_hook(r->m, grads_ready, r);
	return 0;
}
