/*
 * imshard_train.c - `imshard-train`: data-parallel training from packed
 * splits. One process per device; run under `mpirun -np N` for N ranks or
 * alone for one. Parses flags into nn_train_opts, reads the tests' fault
 * injection from the environment into nn_train_hooks, runs nn_train_run
 * (the loop is train/loop/, behind train/train.h) and prints what its
 * events report (train_print.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "augment/augment.h"
#include "cli.h"
#include "train/train.h"
#include "train_print.h"

static const cli_command command = {
	"imshard-train",
	"imshard-train --train TRAIN.json [--val VAL.json] [options]",
	"Trains a convolutional network on packed splits, data-parallel: one\n"
	"process per device, ranks started by mpirun (or one rank alone).",
	"Every rank starts from rank 0's weights, averages gradients with an\n"
	"allreduce each step and so keeps identical weights; every rank gets the\n"
	"same number of whole batches: in training, records that do not divide\n"
	"evenly among ranks and those of each rank's short last batch are\n"
	"dropped, anew each epoch, and counted at the start and in summary.json;\n"
	"in validation they are padded and not counted twice. The\n"
	"--lr given is for one rank: the peak rate is lr x ranks (the linear\n"
	"scaling rule) unless --no-lr-scaling; both are logged. The schedule\n"
	"warms up linearly over --warmup-epochs, then is cosine to 0 over the\n"
	"run, step (x0.1 at half and three quarters of the run) or constant.\n\n"
	"Models: convnet7 (5 conv + 2 linear layers with batch norm, for small\n"
	"images), resnet18, resnet50, vgg16 (tensor names as torchvision's, so\n"
	"--init loads weights exported from PyTorch with safetensors; a head of\n"
	"another class count is re-initialised and reported; --freeze-backbone\n"
	"then trains the head alone, its batch norm's running statistics still\n"
	"updated unless --freeze-bn; a file with fewer than the backbone's\n"
	"tensors is refused unless --init-partial, one with a weight that is\n"
	"not finite always).\n\n"
	"Batch norm normalises over each rank's own batch (no cross-rank\n"
	"statistics); at each validation and checkpoint the ranks' running\n"
	"statistics are averaged. --freeze-bn uses the running statistics in\n"
	"training too and never updates them (fine-tuning with small batches):\n"
	"samples then do not\n"
	"interact, and N ranks of batch B train like 1 rank of batch NxB (in\n"
	"fp32 with SGD up to the order of the ranks' sums; Adam and 16-bit\n"
	"precisions magnify that order or round each rank's gradients).\n\n"
	"Inputs are normalised with --mean/--std (pixel units; ImageNet's by\n"
	"default). Training augmentation is random-resized-crop (a box of 8% to\n"
	"100% of the image's area, aspect ratio 3/4 to 4/3, stretched to --size)\n"
	"and a random horizontal flip unless --augment says otherwise; it takes\n"
	"the loader's option string: flip, noflip, zoom=F, shift=F, rotate=DEG,\n"
	"rrc / norrc, rrc=A:B, ratio=A:B, none (no crop, no flip). Validation\n"
	"resizes the shorter side to --size / --val-crop-frac and crops the\n"
	"centre (0.875: 256 -> 224 pixels, 37 -> 32); for small images a\n"
	"fraction of 1 keeps the whole picture. --augment norrc uses the same\n"
	"geometry in training.\n\n"
	"Threads: --threads sets each rank's compute threads and --loader-threads\n"
	"its decoding threads. Left out, --threads is OpenMP's default\n"
	"(OMP_NUM_THREADS, else every core this process may run on) and\n"
	"--loader-threads follows --threads, or is every core this process may\n"
	"run on. Under mpirun the cores a rank may run on are those mpirun binds\n"
	"it to (Open MPI: one core per rank for -np 2 or fewer, a socket\n"
	"otherwise), not the machine's: with N ranks on one machine give each\n"
	"--threads cores/N. The chosen counts are printed at the start.\n\n"
	"Without --val nothing is validated: no accuracy is measured or claimed\n"
	"(summary.json says \"validation\": false), and this is said once. A\n"
	"--val of the training records, or holding images of --train byte for\n"
	"byte (packed apart: the same list twice, overlapping lists), and\n"
	"classes of --train without a record (never trained), are warned of at\n"
	"the start.\n\n"
	"Progress lines (every --log-every steps, at each epoch's end and at the\n"
	"run's last step) give images/s per rank and in total (all ranks'\n"
	"samples, summed with the loss each step), the time since the first step\n"
	"and the estimated time to the end of the run at the pace so far.\n\n"
	"Outputs: with --log-dir, metrics.jsonl (per rank, a line at the same\n"
	"steps as the progress lines: loss, accuracy, lr, images/s, data wait /\n"
	"compute / communication ms per step; a validation line per epoch:\n"
	"top-1, top-5, loss, records)\n"
	"and summary.json (world size, per-rank busy time and max/min ratio,\n"
	"wall time excluding start-up, images/s, best validation top-1 with its\n"
	"epoch and time), and after the last validation per_class.csv,\n"
	"confusion.csv, predictions.csv and eval.json, as 'imshard eval -o'\n"
	"writes them. With --checkpoint-dir, checkpoint.safetensors (weights\n"
	"under torchvision names, optimiser state, position, and the model card\n"
	"that 'imshard eval', 'predict' and 'export' read) is replaced\n"
	"atomically every --checkpoint-every steps and at each epoch's end,\n"
	"with a checksum that --resume and --init verify. --resume continues\n"
	"from it at the same position of the epoch's order (on the CPU bit for\n"
	"bit with the same ranks and batch, but for several ranks stopped\n"
	"between checkpoints: the stop's checkpoint holds the ranks' averaged\n"
	"batch-norm statistics); another rank count or --batch-size\n"
	"continues from that position too, the schedule re-derived over the data\n"
	"and the peak rate scaled with the global batch (--lr is for one rank at\n"
	"the first part's batch size), both logged. Another --seed, --model,\n"
	"--size, training split, or --epochs under a decaying schedule is\n"
	"refused. Resuming a finished run changes nothing. A second trainer on\n"
	"the same --log-dir or --checkpoint-dir is refused (imshard-train.lock).\n"
	"So is a new run (no --resume) where an earlier run left its checkpoint\n"
	"or logs (metrics.jsonl, summary.json, eval files): --force removes them\n"
	"first and says so. A --log-dir where a split's manifest has one of\n"
	"those names (a split named summary or eval) is refused, --force or not.\n"
	"Ctrl-C (SIGINT) or SIGTERM stops every rank after the same step: that\n"
	"step's checkpoint is written, summary.json is not, and --resume goes on\n"
	"from it (exit status 1); a second signal ends the process at once.\n"
	"A NaN or infinite training or validation loss stops training with an\n"
	"error naming the step (with fp16, once the scale S below is down to 1);\n"
	"the checkpoint written before it is kept. Records that cannot be\n"
	"loaded are replaced in training, left out of validation, and counted\n"
	"per epoch on stderr, in metrics.jsonl and summary.json.\n\n"
	"--precision bf16 or fp16 is mixed precision, on either device:\n"
	"activations and their gradients are stored in 16 bits (half the\n"
	"activation memory), convolutions and linear layers read a 16-bit copy\n"
	"of the weights made once per step, and every sum is fp32; weights,\n"
	"gradients, batch-norm statistics and optimiser state stay fp32. On the\n"
	"cpu it is the reference the device is tested against (no faster than\n"
	"fp32 there). fp16 multiplies the loss\n"
	"gradient by a scale S (65536 at first); a step whose gradients or\n"
	"forward pass (a loss that is not finite) overflow is skipped and S\n"
	"halved (at S = 1 the run stops instead), S doubles after 2000 good\n"
	"steps (at most 2^24). metrics.jsonl and summary.json give loss_scale and\n"
	"skipped_steps; checkpoints keep them.\n\n"
	"OpenBLAS falls back to generic SSE kernels on CPU models newer than its\n"
	"release; imshard-train then restarts itself once with OPENBLAS_CORETYPE\n"
	"naming the kernels the CPU supports (SkylakeX, Haswell), several times\n"
	"faster. Set OPENBLAS_CORETYPE yourself to choose. Under a memory limit\n"
	"(ulimit -v or -d) it restarts with OPENBLAS_NUM_THREADS=1: OpenBLAS's own\n"
	"threads, which it never uses, would each take 128 MiB as OpenBLAS loads.\n\n"
	"Examples:\n"
	"  imshard-train --train out/train.json --val out/val.json --model convnet7 \\\n"
	"      --size 32 --epochs 10 --batch-size 64 --lr 0.05 --log-dir runs/a\n"
	"  mpirun -np 2 imshard-train --train out/train.json --val out/val.json \\\n"
	"      --model resnet18 --size 112 --threads 1 --log-dir runs/b\n"
	"  imshard-train --train t.json --val v.json --model resnet50 \\\n"
	"      --init resnet50.safetensors --freeze-backbone --lr 0.01\n\n"
	"Exit status: 0 success, 1 training failed, 2 bad usage."};

/* ---- stopping at a signal ---------------------------------------------------- */

/* SIGINT or SIGTERM (mpirun passes its own on as SIGTERM), for the loop's
 * o.out.stop; rank 0 says at once that it was heard. */
static volatile int stop_signal;
static int say_stopping;
static int stop_caught[2];           /* SIGINT, SIGTERM: handled here */
static struct sigaction stop_default; /* SIG_DFL, for the handler */

static atomic_int stop_heard;         /* a handler has started */

static void on_stop_signal(int sig)
{
	static const char msg[] = "imshard-train: stopping after this step "
				  "(again to quit at once, losing it)\n";
	if (atomic_exchange(&stop_heard, 1)) {
		/* a second signal, taken by another thread while the first's
		 * handler runs: it ends the process (once this returns) */
		sigaction(sig, &stop_default, NULL);
		raise(sig);
		return;
	}
	stop_signal = sig;
	if (say_stopping) {
		ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
		(void)n;
	}
	/* SA_RESETHAND gave this signal back its default action; the other
	 * one gives way too, so that any second signal ends the process
	 * (sigaction, raise and lock-free atomics are async-signal-safe) */
	if (stop_caught[0])
		sigaction(SIGINT, &stop_default, NULL);
	if (stop_caught[1])
		sigaction(SIGTERM, &stop_default, NULL);
}

/* The first SIGINT or SIGTERM stops the run after its step, with a
 * checkpoint; the handler then gives way for both, so a second one of
 * either ends the process at once. SA_RESTART: the loader's and MPI's
 * system calls go on as if nothing had happened. A signal this process was started ignoring
 * stays ignored (a shell script's background job ignores SIGINT: a
 * Ctrl-C meant for the script's foreground). */
static void catch_stop_signals(int rank0)
{
	say_stopping = rank0;
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sa.sa_flags = SA_RESTART | SA_RESETHAND;
	/* the other blocked while the handler runs: one arriving with the
	 * first finds the default action the handler put back */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	memset(&stop_default, 0, sizeof(stop_default));
	stop_default.sa_handler = SIG_DFL;
	sigemptyset(&stop_default.sa_mask);
	const int sigs[] = {SIGINT, SIGTERM};
	for (int i = 0; i < 2; i++)
		stop_caught[i] = sigaction(sigs[i], NULL, &old) == 0 &&
				 old.sa_handler != SIG_IGN &&
				 sigaction(sigs[i], &sa, NULL) == 0;
}

/* ---- fault injection for tests (docs/TRAINING.md) ------------------------ */

/* *step = the step number (from 1, or from 0 with zero_ok) in environment
 * variable name; 0 when it is unset (*set 0). */
static int env_step_of(const char *name, int zero_ok, uint64_t *step, int *set,
		       ims_error *err)
{
	*step = 0;
	*set = 0;
	const char *s = getenv(name);
	if (!s)
		return 0;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(s, &end, 10);
	RETURN_IF(errno || end == s || *end || (n == 0 && !zero_ok) || s[0] == '-',
		  err, IMS_EINVAL, "%s must be a step number from %d, got '%s'", name,
		  zero_ok ? 0 : 1, s);
	*step = n;
	*set = 1;
	return 0;
}

static int env_step(const char *name, uint64_t *step, ims_error *err)
{
	int set;
	return env_step_of(name, 0, step, &set, err);
}

/* What the loop's `trained` hook does for the tests: IMSHARD_TEST_TRAINED's
 * log and IMSHARD_INJECT_STOP_STEP's stop. */
typedef struct test_hooks {
	FILE *log;           /* NULL: none */
	uint64_t stop_step;  /* the stop flag is raised, as SIGINT raises
				it, when this rank starts this step (from 1);
				0: never */
	int signal;          /* raised on this rank the at_nth time it
				reaches phase at (on_reached); 0: none */
	const char *at;
	uint64_t at_nth, at_seen;
} test_hooks;

/* The stop as a signal would raise it; IMSHARD_TEST_TRAINED's log:
 * "epoch step index index ...", a line per batch this rank trains. */
static void on_trained(void *ctx, int rank, int epoch, uint64_t step,
		       const uint64_t *indices, int count)
{
	(void)rank;
	test_hooks *t = ctx;
	if (t->stop_step == step + 1)
		stop_signal = SIGINT;
	FILE *f = t->log;
	if (!f)
		return;
	fprintf(f, "%d %llu", epoch, (unsigned long long)step + 1);
	for (int i = 0; i < count; i++)
		fprintf(f, " %llu", (unsigned long long)indices[i]);
	fputc('\n', f);
}

static void on_reached(void *ctx, int rank, const char *phase)
{
	(void)rank;
	test_hooks *t = ctx;
	if (!strcmp(phase, t->at) && ++t->at_seen == t->at_nth)
		raise(t->signal);
}

/* IMSHARD_INJECT_SIGNAL=STOP or KILL, IMSHARD_INJECT_SIGNAL_AT=PHASE[:N]
 * (validation, checkpoint or end; N: the Nth time, from 1), on every rank
 * or only on IMSHARD_INJECT_SIGNAL_RANK. */
static int read_signal_hook(nn_train_hooks *h, test_hooks *t, int rank,
			    ims_error *err)
{
	const char *sig = getenv("IMSHARD_INJECT_SIGNAL");
	const char *at = getenv("IMSHARD_INJECT_SIGNAL_AT");
	const char *only = getenv("IMSHARD_INJECT_SIGNAL_RANK");
	if (!sig && !at)
		return 0;
	RETURN_IF(!sig || (strcmp(sig, "STOP") && strcmp(sig, "KILL")), err,
		  IMS_EINVAL, "IMSHARD_INJECT_SIGNAL must be STOP or KILL, got '%s'",
		  sig ? sig : "");
	static const char *const phases[][2] = {{"validation", "validation"},
						{"checkpoint", "the checkpoint"},
						{"end", "the run's end"}};
	size_t len = at ? strcspn(at, ":") : 0;
	for (size_t i = 0; at && !t->at && i < sizeof(phases) / sizeof(phases[0]); i++)
		if (strlen(phases[i][0]) == len && !strncmp(at, phases[i][0], len))
			t->at = phases[i][1];
	t->at_nth = 1;
	if (t->at && at[len]) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(at + len + 1, &end, 10);
		if (errno || end == at + len + 1 || *end || n == 0 || at[len + 1] == '-')
			t->at = NULL;
		t->at_nth = n;
	}
	RETURN_IF(!t->at, err, IMS_EINVAL,
		  "IMSHARD_INJECT_SIGNAL_AT must be validation, checkpoint or end, "
		  "with :N for the Nth time (from 1), got '%s'", at ? at : "");
	if (only && atoi(only) != rank)
		return 0;
	t->signal = strcmp(sig, "STOP") ? SIGKILL : SIGSTOP;
	h->reached = on_reached;
	h->reached_ctx = t;
	return 0;
}

/*
 * The hooks the tests set through the environment, read here and nowhere
 * in the loop: IMSHARD_INJECT_NAN_STEP=N makes the first pixel of step
 * N's batch NaN (on every rank, or only on rank IMSHARD_INJECT_NAN_RANK);
 * IMSHARD_INJECT_INF_GRAD_STEP=N (fp16) an Inf gradient after step N's
 * allreduce; IMSHARD_INJECT_METRICS_ENOSPC=N fails this rank's Nth write
 * to metrics.jsonl as a full disk would; IMSHARD_TEST_HOST_STAGE runs the
 * device loop on the CPU (one rank); IMSHARD_TEST_TRAINED=PATH writes the
 * record indices of every batch a rank trains to PATH.RANK (t->log, which
 * the caller closes); IMSHARD_INJECT_STOP_STEP=N raises the stop flag as
 * SIGINT would when step N starts (0: before the run, as a signal during
 * its set-up), on every rank or only on IMSHARD_INJECT_STOP_RANK;
 * IMSHARD_INJECT_SIGNAL's signal is raised where the loop reaches a phase
 * (read_signal_hook).
 */
static int read_hooks(nn_train_hooks *h, test_hooks *t, const nn_train_opts *o,
		      int rank, int world, ims_error *err)
{
	memset(h, 0, sizeof(*h));
	memset(t, 0, sizeof(*t));
	uint64_t n;
	FORWARD_IF_ERR(env_step("IMSHARD_INJECT_METRICS_ENOSPC", &n, err));
	h->metrics_fail_write = n;
	const char *log = getenv("IMSHARD_TEST_TRAINED");
	if (log) {
		char path[4096];
		snprintf(path, sizeof(path), "%s.%d", log, rank);
		t->log = fopen(path, "a");
		RETURN_IF(!t->log, err, IMS_EIO, "cannot open '%s': %s", path,
			  strerror(errno));
	}
	int set;
	FORWARD_IF_ERR(env_step_of("IMSHARD_INJECT_STOP_STEP", 1, &n, &set, err));
	const char *stop_rank = getenv("IMSHARD_INJECT_STOP_RANK");
	if (set && (!stop_rank || atoi(stop_rank) == rank)) {
		if (n == 0)
			stop_signal = SIGINT;
		t->stop_step = n;
	}
	if (t->log || t->stop_step) {
		h->trained = on_trained;
		h->trained_ctx = t;
	}
	FORWARD_IF_ERR(env_step("IMSHARD_INJECT_NAN_STEP", &n, err));
	const char *only = getenv("IMSHARD_INJECT_NAN_RANK");
	if (!only || atoi(only) == rank)
		h->nan_step = n;
	FORWARD_IF_ERR(env_step("IMSHARD_INJECT_INF_GRAD_STEP", &n, err));
	RETURN_IF(n && strcmp(o->net.precision, "fp16"), err, IMS_EINVAL,
		  "IMSHARD_INJECT_INF_GRAD_STEP needs --precision fp16 (only "
		  "fp16 checks gradients for overflow)");
	h->inf_grad_step = n;
	FORWARD_IF_ERR(env_step("IMSHARD_TEST_MEM_ROOM", &n, err));
	h->mem_room = n;
	FORWARD_IF_ERR(read_signal_hook(h, t, rank, err));
	if (getenv("IMSHARD_TEST_HOST_STAGE")) {
		RETURN_IF(world > 1, err, IMS_EINVAL,
			  "IMSHARD_TEST_HOST_STAGE is for one rank");
		h->host_stage = 1;
	}
	return 0;
}

/* A run-time failure: one line (naming the rank when there are several),
 * the other ranks ended (they would wait in their next collective). */
static int fail_run(dp_comm *comm, const ims_error *err)
{
	if (dp_world(comm) > 1)
		cli_error("rank %d: %s", dp_rank(comm), err->msg);
	else
		cli_error("%s", err->msg);
	dp_abort(comm, CLI_EXIT_FAIL);
	dp_finalize(comm);
	return CLI_EXIT_FAIL;
}

/* Whether --bucket-mb was given, for the note that one rank has no use
 * for it. */
static int bucket_mb_given;

/*
 * Fills o from the command line: 0, CLI_EXIT_USAGE after a one-line error,
 * or -1 after --help.
 */
static int parse_flags(int argc, char **argv, nn_train_opts *o)
{
	nn_train_opts_init(o);
	o->comm.bucket_mb = 0; /* not given: set by device below */
	const char *optimizer = NULL, *schedule = NULL, *mean = NULL, *std = NULL;
	const char *tf32 = NULL;
	double smoothing = 0;
	int epochs = o->optim.epochs, batch = o->optim.batch_size, size = o->data.size;
	uint64_t seed = o->seed, max_steps = 0, ckpt_every = 0;
	int log_every = o->out.log_every, threads = 0, loader_threads = 0;
	double val_crop = o->data.val_crop_frac;
	double momentum = -1; /* not given: the optimiser's default */
	double weight_decay = -1; /* not given: the optimiser's default */
	uint64_t max_bad = UINT64_MAX; /* not given: no limit */
	const cli_opt opts[] = {
		{"train", 0, CLI_STRING, &o->data.train_manifest, "TRAIN.json", "training split manifest (required)", 0, 0},
		{"val", 0, CLI_STRING, &o->data.val_manifest, "VAL.json", "validation split manifest (none: no validation, said once)", 0, 0},
		{"model", 0, CLI_STRING, &o->net.model, "NAME", "convnet7, resnet18, resnet50 or vgg16 (convnet7)", 0, 0},
		{"device", 0, CLI_STRING, &o->net.device, "DEV", "cpu or cuda (cpu)", 0, 0},
		{"epochs", 0, CLI_INT, &epochs, "E", "epochs to train (1)", 1, 1e6},
		{"batch-size", 0, CLI_INT, &batch, "B", "samples per batch per rank (32)", 1, 65536},
		{"lr", 0, CLI_DOUBLE, &o->optim.lr, "LR", "learning rate for one rank (0.1)", 1e-12, 1e6},
		{"no-lr-scaling", 0, CLI_FLAG, &o->optim.no_lr_scaling, NULL, "the peak rate is --lr itself: not multiplied by the rank count, nor on --resume by the batch size over the first part's", 0, 0},
		{"optimizer", 0, CLI_STRING, &optimizer, "OPT", "sgd, adam or adamw (sgd)", 0, 0},
		{"momentum", 0, CLI_DOUBLE, &momentum, "M", "SGD momentum (0.9; 0 = plain SGD)", 0, 0.999999},
		{"nesterov", 0, CLI_FLAG, &o->optim.nesterov, NULL, "Nesterov momentum (SGD, --momentum above 0)", 0, 0},
		{"weight-decay", 0, CLI_DOUBLE, &weight_decay, "W", "weight decay (sgd 1e-4, adam 0, adamw 0.01; decoupled for adamw)", 0, 1},
		{"no-bn-bias-decay", 0, CLI_FLAG, &o->optim.no_bn_bias_decay, NULL, "no weight decay on batch-norm and bias parameters", 0, 0},
		{"warmup-epochs", 0, CLI_DOUBLE, &o->optim.warmup_epochs, "K", "linear warmup epochs (0; may be fractional)", 0, 1e6},
		{"schedule", 0, CLI_STRING, &schedule, "S", "cosine, step or constant (cosine)", 0, 0},
		{"size", 0, CLI_INT, &size, "PX", "input side in pixels, 1..4096 (224)", 1, AUG_MAX_OUT_SIDE},
		{"augment", 0, CLI_STRING, &o->data.augment, "SPEC", "training augmentation (flip: random-resized-crop 8%-100% of the area, ratio 3/4-4/3, and a horizontal flip; below)", 0, 0},
		{"val-crop-frac", 0, CLI_DOUBLE, &val_crop, "F", "validation resizes the shorter side to --size / F and crops the centre, 0.001 <= F <= 1 (0.875)", 1e-3, 1},
		{"mean", 0, CLI_STRING, &mean, "R,G,B", "normalisation mean, pixel units (ImageNet's)", 0, 0},
		{"std", 0, CLI_STRING, &std, "R,G,B", "normalisation std, pixel units (ImageNet's)", 0, 0},
		{"label-smoothing", 0, CLI_DOUBLE, &smoothing, "S", "label smoothing, 0 to 0.999 (0)", 0, 0.999},
		{"threads", 0, CLI_INT, &threads, "T", "compute threads per rank (OMP_NUM_THREADS, else the cores this process may run on: under mpirun only those it binds the rank to; below), at most the MAX_THREADS OpenBLAS was built for", 0, 1024},
		{"loader-threads", 0, CLI_INT, &loader_threads, "T", "decoding threads per rank (--threads when given, else the cores this process may run on)", 0, 1024},
		{"precision", 0, CLI_STRING, &o->net.precision, "P", "fp32, bf16 or fp16 (fp32); bf16 and fp16: mixed precision (below)", 0, 0},
		{"channels-last", 0, CLI_STRING, &o->net.channels_last, "auto|on|off", "store activations NHWC (N x H x W x C), as cuDNN's tensor cores read them and PyTorch's channels_last does; auto: on for --device cuda in bf16/fp16, or fp32 with --tf32 on, with a model whose classifier reads a 1x1 map (all but vgg16), off otherwise; on: in fp32 without TF32 too, and on the CPU (the same bits as off, slower: a reference) (auto)", 0, 0},
		{"cudnn-algo", 0, CLI_STRING, &o->net.cudnn_algo, "MODE", "cuda: how convolution algorithms are chosen, once per shape: benchmark (time each, keep the fastest), heuristic (cuDNN's ranking) or deterministic (the same bits every run) (benchmark; --device cpu takes deterministic only, what it does)", 0, 0},
		{"cuda-graphs", 0, CLI_STRING, &o->net.cuda_graphs, "auto|on|off", "cuda: record each step's forward and backward passes once as CUDA graphs and replay them, so the host queues two calls instead of hundreds of kernels; auto: on with one rank in fp32/bf16 without --profile, off otherwise (fp16 reads its loss every step); on: refuse to start where it cannot be used, and with several ranks record NCCL's allreduce with backward (not yet measured on several GPUs, so auto leaves it off there)", 0, 0},
		{"tf32", 0, CLI_STRING, &tf32, "on|off", "cuda, fp32: TF32 tensor cores for convolutions and GEMMs (on from compute capability 8.0, as PyTorch's cuDNN default; --device cpu takes off only, what it does)", 0, 0},
		{"init", 0, CLI_STRING, &o->net.init, "FILE", "start from weights in a safetensors file (by name)", 0, 0},
		{"init-partial", 0, CLI_FLAG, &o->net.init_partial, NULL, "let --init hold fewer than the backbone's tensors (the rest stay as initialised; without it such a file is refused)", 0, 0},
		{"reset-head", 0, CLI_FLAG, &o->net.reset_head, NULL, "re-initialise the head instead of loading --init's, even where its shape matches (other classes of the same count)", 0, 0},
		{"freeze-backbone", 0, CLI_FLAG, &o->net.freeze_backbone, NULL, "train only the head (needs --init, or --resume: a frozen run resumes frozen only with it)", 0, 0},
		{"checkpoint-dir", 0, CLI_STRING, &o->out.checkpoint_dir, "DIR", "write checkpoint.safetensors here", 0, 0},
		{"resume", 0, CLI_FLAG, &o->out.resume, NULL, "continue from DIR's checkpoint", 0, 0},
		{"force", 0, CLI_FLAG, &o->out.force, NULL, "start a new run over an earlier run's checkpoint and logs (removed first)", 0, 0},
		{"checkpoint-every", 0, CLI_U64, &ckpt_every, "N", "also checkpoint every N steps (0: epoch ends only)", 0, 0},
		{"log-dir", 0, CLI_STRING, &o->out.log_dir, "DIR", "write metrics.jsonl and summary.json here", 0, 0},
		{"seed", 0, CLI_U64, &seed, "S", "seed of weights, shuffling, augmentation, dropout (1)", 0, 0},
		{"max-steps", 0, CLI_U64, &max_steps, "N", "stop after N steps in all; the schedule still spans --epochs (0: no limit)", 0, 0},
		{"log-every", 0, CLI_INT, &log_every, "N", "steps per metrics line and progress line; an epoch's end and the run's last step write one too (10)", 1, 1e9},
		{"collective-timeout", 0, CLI_DOUBLE, &o->comm.collective_timeout, "S", CLI_HELP_COLLECTIVE_TIMEOUT, 0, 1e9},
		{"bucket-mb", 0, CLI_DOUBLE, &o->comm.bucket_mb, "MB", "with several ranks, gradients are summed in buckets of this many MiB, each sent as soon as backward finishes it; one bucket is summed once after backward (1024 on cpu: one bucket for models under 1 GiB of parameters; 25 on cuda); one rank has no use for it", 0.001, 1024},
		{"shard-owning", 0, CLI_FLAG, &o->data.shard_owning, NULL, "each rank reads only its own shards", 0, 0},
		{"max-bad-records", 0, CLI_U64, &max_bad, "N", "fail once more than N training records of one epoch could not be loaded (each is replaced, counted and named; default: no limit)", 0, 0},
		{"freeze-bn", 0, CLI_FLAG, &o->net.freeze_bn, NULL, "batch norm on running statistics, not updated", 0, 0},
		{"synthetic", 0, CLI_FLAG, &o->data.synthetic, NULL, "train on one fixed random batch per rank, no decoding (speed measurements; --train still sets classes and steps per epoch, --val when given is still read)", 0, 0},
		{"quiet", 'q', CLI_FLAG, &o->out.quiet, NULL, "no progress lines (warnings and damaged records are still told)", 0, 0},
		{"verbose", 'v', CLI_FLAG, &o->out.verbose, NULL, "also say where the loader's batches live (page-aligned or pinned host memory)", 0, 0},
		{"profile", 0, CLI_INT, &o->out.profile, "K", "time steps 3 to K+2 piece by piece, each layer waited for (slower; the same results): a table at the end and summary.json's \"profile\" (0: off)", 0, 1e6},
		{NULL, 0, 0, NULL, NULL, NULL, 0, 0}};
	const char *pos[1];
	int np = 0;
	int rc = cli_parse(&command, opts, argc, argv, pos, 0, 0, &np);
	if (rc)
		return rc;
#define USAGE(...) return cli_usage_error(&command, __VA_ARGS__)
	if (!o->data.train_manifest)
		USAGE("--train is required");
	o->data.val_crop_frac = val_crop;
	{
		/* the loader parses it again; a bad one is bad usage */
		aug_transform_opts t;
		aug_transform_opts_init(&t, 1);
		ims_error aerr;
		memset(&aerr, 0, sizeof(aerr));
		if (o->data.augment && aug_transform_parse(o->data.augment, &t, &aerr) < 0)
			USAGE("--augment: %s", aerr.msg);
	}
	if (o->out.quiet && o->out.verbose)
		USAGE("--quiet and --verbose exclude each other");
	if (o->optim.warmup_epochs > epochs)
		USAGE("--warmup-epochs %g is more than --epochs %d (the warmup "
		      "is part of the run)",
		      o->optim.warmup_epochs, epochs);
	o->optim.epochs = epochs;
	o->optim.batch_size = batch;
	o->data.size = size;
	o->seed = seed;
	/* kept as int64_t: 2^63 and above would wrap to a negative count,
	 * which reads as "no limit" */
	if (max_steps > (uint64_t)INT64_MAX || ckpt_every > (uint64_t)INT64_MAX)
		USAGE("--%s must be at most %lld",
		      max_steps > (uint64_t)INT64_MAX ? "max-steps" : "checkpoint-every",
		      (long long)INT64_MAX);
	o->optim.max_steps = (int64_t)max_steps;
	o->out.checkpoint_every = (int64_t)ckpt_every;
	o->out.log_every = log_every;
	o->net.threads = threads;
	o->data.loader_threads = loader_threads;
	o->optim.label_smoothing = (float)smoothing;
	if (max_bad != UINT64_MAX && max_bad > (uint64_t)INT64_MAX)
		USAGE("--max-bad-records must be at most %lld", (long long)INT64_MAX);
	o->data.max_bad_records = max_bad == UINT64_MAX ? -1 : (int64_t)max_bad;
	if (optimizer) {
		if (!strcmp(optimizer, "sgd"))
			o->optim.optimizer = NN_OPTIM_SGD;
		else if (!strcmp(optimizer, "adam"))
			o->optim.optimizer = NN_OPTIM_ADAM;
		else if (!strcmp(optimizer, "adamw"))
			o->optim.optimizer = NN_OPTIM_ADAMW;
		else
			USAGE("--optimizer must be sgd, adam or adamw, got '%s'", optimizer);
	}
	/* A value given is kept as given, whatever it is: only a decay left
	 * out follows the optimiser (before, an explicit 1e-4 with adam or
	 * adamw was taken for the default and replaced). */
	if (weight_decay >= 0)
		o->optim.weight_decay = weight_decay;
	else if (o->optim.optimizer != NN_OPTIM_SGD)
		o->optim.weight_decay = o->optim.optimizer == NN_OPTIM_ADAMW ? 0.01 : 0;
	if (momentum >= 0 && o->optim.optimizer != NN_OPTIM_SGD)
		USAGE("--momentum is for --optimizer sgd (adam and adamw keep "
		      "moving averages of their own)");
	if (momentum >= 0)
		o->optim.momentum = momentum;
	if (o->optim.nesterov && o->optim.optimizer != NN_OPTIM_SGD)
		USAGE("--nesterov is for --optimizer sgd");
	if (o->optim.nesterov && o->optim.momentum <= 0)
		USAGE("--nesterov needs --momentum above 0");
	if (schedule) {
		if (!strcmp(schedule, "cosine"))
			o->optim.schedule = NN_LR_COSINE;
		else if (!strcmp(schedule, "step"))
			o->optim.schedule = NN_LR_STEP;
		else if (!strcmp(schedule, "constant"))
			o->optim.schedule = NN_LR_CONSTANT;
		else
			USAGE("--schedule must be cosine, step or constant, got '%s'", schedule);
	}
	if (mean && cli_parse_triple(mean, o->data.mean))
		USAGE("--mean needs three numbers like 123.7,116.3,103.5, got '%s'", mean);
	if (std && cli_parse_triple(std, o->data.std))
		USAGE("--std needs three numbers like 58.4,57.1,57.4, got '%s'", std);
	if (!cli_std_ok(o->data.std))
		USAGE("--std values must be above 0 with 1/std a finite float (at least about 3e-39)");
	int known = 0;
	for (const char *const *n = nn_model_names(); *n; n++)
		known |= !strcmp(*n, o->net.model);
	if (!known)
		USAGE("unknown model '%s' (convnet7, resnet18, resnet50, vgg16)", o->net.model);
	if (strcmp(o->net.device, "cpu") && strcmp(o->net.device, "cuda"))
		USAGE("--device must be cpu or cuda, got '%s'", o->net.device);
	if (nn_precision_of(o->net.precision) < 0)
		USAGE("--precision must be fp32, bf16 or fp16, got '%s'", o->net.precision);
	if (o->net.cudnn_algo && strcmp(o->net.cudnn_algo, "benchmark") &&
	    strcmp(o->net.cudnn_algo, "heuristic") &&
	    strcmp(o->net.cudnn_algo, "deterministic"))
		USAGE("--cudnn-algo must be benchmark, heuristic or deterministic, "
		      "got '%s'", o->net.cudnn_algo);
	if (o->net.channels_last && strcmp(o->net.channels_last, "auto") &&
	    strcmp(o->net.channels_last, "on") &&
	    strcmp(o->net.channels_last, "off"))
		USAGE("--channels-last must be auto, on or off, got '%s'",
		      o->net.channels_last);
	if (o->net.cuda_graphs && strcmp(o->net.cuda_graphs, "auto") &&
	    strcmp(o->net.cuda_graphs, "on") &&
	    strcmp(o->net.cuda_graphs, "off"))
		USAGE("--cuda-graphs must be auto, on or off, got '%s'",
		      o->net.cuda_graphs);
	if (tf32 && strcmp(tf32, "on") && strcmp(tf32, "off"))
		USAGE("--tf32 must be on or off, got '%s'", tf32);
	if (tf32)
		o->net.tf32 = !strcmp(tf32, "on");
	/* NCCL on GPUs overlaps 25 MB buckets with backward (PyTorch DDP's
	 * size). On CPUs the rank's own thread moves MPI's data, so overlap
	 * gains little, and one blocking allreduce after backward measured
	 * cheaper than 1 MiB non-blocking buckets (docs/TRAINING.md). */
	bucket_mb_given = o->comm.bucket_mb != 0;
	if (o->comm.bucket_mb == 0)
		o->comm.bucket_mb = strcmp(o->net.device, "cuda") ? 1024 : 25;
	if (o->net.freeze_backbone && !o->net.init && !o->out.resume)
		USAGE("--freeze-backbone needs --init or --resume (weights to freeze)");
	if (o->out.resume && !o->out.checkpoint_dir)
		USAGE("--resume needs --checkpoint-dir");
	if (ckpt_every && !o->out.checkpoint_dir)
		USAGE("--checkpoint-every needs --checkpoint-dir (where the "
		      "checkpoints go)");
	if (o->out.resume && o->out.force)
		USAGE("--resume and --force exclude each other (--force starts a new run)");
	if (o->out.resume && o->net.init)
		USAGE("--resume and --init exclude each other");
	if (o->net.init_partial && !o->net.init)
		USAGE("--init-partial needs --init");
	if (o->net.reset_head && !o->net.init)
		USAGE("--reset-head needs --init");
#undef USAGE
	return 0;
}

static int train_main(int argc, char **argv)
{
	dp_comm *comm = NULL;
	ims_error err;
	ims_error_clear(&err);
	/* OpenBLAS's kernels and threads, chosen when it loads: a restart
	 * with better ones, once (nn.h) */
	if (nn_blas_restart_env())
		execv("/proc/self/exe", argv); /* failed: go on as we are */
	/* MPI first: it may rewrite argv, and every rank parses the same */
	/* --collective-timeout watches MPI's start too (dp_init), so it is
	 * read before the flags are parsed */
	if (dp_init(&argc, &argv,
		    cli_peek_double(argc, argv, "collective-timeout", 600, 0, 1e9),
		    "imshard-train", &comm, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	/* A shard truncated under the loader is named, not a silent SIGBUS
	 * (after MPI, which may install a SIGBUS handler of its own). */
	ims_mapguard_install("imshard");
	nn_train_opts o;
	/* every rank parses the same flags: rank 0 alone says what is
	 * wrong with them (or prints --help), not one line per rank */
	cli_mute(dp_rank(comm) != 0);
	int rc = parse_flags(argc, argv, &o);
	cli_mute(0);
	if (rc) {
		dp_finalize(comm);
		return rc < 0 ? CLI_EXIT_OK : rc;
	}

	if (bucket_mb_given && dp_world(comm) == 1 && !o.out.quiet)
		train_say("--bucket-mb %g has no effect with one rank: there are "
			  "no gradients to sum across ranks", o.comm.bucket_mb);
	const char *picked = getenv("IMSHARD_BLAS_PICKED");
	if (picked && !o.out.quiet && dp_rank(comm) == 0)
		train_say("OpenBLAS kernels '%s' (it chose its generic '%s' "
			"for this CPU; set OPENBLAS_CORETYPE to choose)",
			nn_blas_core(), picked);

	nn_train_hooks hooks;
	test_hooks tests;
	if (read_hooks(&hooks, &tests, &o, dp_rank(comm), dp_world(comm), &err) < 0)
		return fail_run(comm, &err);
	train_printer pr = {&o, dp_rank(comm)};
	nn_train_events events;
	train_print_events(&pr, &events);
	o.events = &events;
	o.hooks = &hooks;
	o.out.stop = &stop_signal;
	catch_stop_signals(dp_rank(comm) == 0 && !o.out.quiet);
	nn_train_result res;
	rc = nn_train_run(&o, comm, &res, &err);
	if (tests.log)
		fclose(tests.log);
	if (rc == IMS_EINTR && res.failed_alike) {
		/* every rank stopped after the same step, told once */
		/* rank 0 names the signal it received; it may have received
		 * none (one rank alone signalled) */
		if (dp_rank(comm) == 0)
			cli_error("%s: %s",
				  stop_signal == SIGTERM  ? "SIGTERM"
				  : stop_signal == SIGINT ? "SIGINT"
							  : "another rank's SIGINT or SIGTERM",
				  err.msg);
		dp_finalize(comm);
		return CLI_EXIT_FAIL;
	}
	if (rc < 0 && res.failed_ranks > 0 && dp_world(comm) > 1) {
		/* every rank is here, none in a collective: end without an
		 * abort. Failed alike everywhere (a refusal, a NaN loss):
		 * rank 0's line alone; else each rank that failed names
		 * itself. */
		if (res.failed_alike && dp_rank(comm) == 0)
			cli_error("%s", err.msg);
		else if (!res.failed_alike && res.failed_here)
			cli_error("rank %d: %s", dp_rank(comm), err.msg);
		dp_finalize(comm);
		return CLI_EXIT_FAIL;
	}
	if (rc < 0)
		return fail_run(comm, &err);
	if (res.nothing_to_do && dp_rank(comm) == 0) {
		char safe[4 * 4096];
		/* epochs_done counts the epoch a --max-steps stop was
		 * inside of: not "done" then */
		char where[64];
		if (res.nothing_to_do == 1)
			snprintf(where, sizeof(where), "%d %s done", res.epochs_done,
				 ims_plural((uint64_t)res.epochs_done, "epoch", "epochs"));
		else
			snprintf(where, sizeof(where), "in epoch %d of %d",
				 res.epochs_done, o.optim.epochs);
		char safe_log[4 * 4096];
		printf("nothing to train: the run in '%s' %s at step %llu (%s); ",
		       ims_escape(o.out.checkpoint_dir, safe, sizeof(safe)),
		       res.nothing_to_do == 1 ? "is complete" : "reached --max-steps",
		       (unsigned long long)res.steps, where);
		/* lost at its end, after its last checkpoint */
		if (res.summary_written)
			printf("wrote the summary.json '%s' lacked\n",
			       ims_escape(o.out.log_dir, safe_log, sizeof(safe_log)));
		else
			printf("no file changed\n");
		dp_finalize(comm);
		return CLI_EXIT_OK;
	}
	if (dp_rank(comm) == 0 && res.profile.steps)
		train_print_profile(&res.profile);
	else if (dp_rank(comm) == 0 && o.out.profile)
		train_say("--profile %d: the run ended before step 3, nothing was timed",
			  o.out.profile);
	if (dp_rank(comm) == 0 && o.data.val_manifest)
		printf("validation top-1 %.2f%% top-5 %.2f%% (%llu %s); best "
		       "top-1 %.2f%% at epoch %d; ",
		       100 * res.val_top1, 100 * res.val_top5,
		       (unsigned long long)res.val_records,
		       ims_plural(res.val_records, "record", "records"),
		       100 * res.best_top1, res.best_epoch + 1);
	else if (dp_rank(comm) == 0)
		printf("no validation (no --val); ");
	if (dp_rank(comm) == 0) {
		printf("%.1f images/s over %d %s (%.1f s of training, %.1f s "
		       "start-up)",
		       res.images_per_s, dp_world(comm),
		       ims_plural(dp_world(comm), "rank", "ranks"), res.train_s,
		       res.startup_s);
		/* the per-step lines are progress, which --quiet hides: steps
		 * that trained nothing are still counted where the run ends */
		if (res.skipped_steps)
			printf("; %llu fp16 %s skipped (gradients or loss "
			       "overflowed), loss scale now %g",
			       (unsigned long long)res.skipped_steps,
			       ims_plural(res.skipped_steps, "step", "steps"),
			       res.loss_scale);
		putchar('\n');
	}
	dp_finalize(comm);
	return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
	cli_no_file_size_kill();
	return cli_exit(train_main(argc, argv));
}
