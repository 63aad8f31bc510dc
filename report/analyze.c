/*
 * analyze.c - the figures derived from a run's logs (steady speed per
 * rank, balance, stalls, where train_s went, time to a target accuracy)
 * and between runs (speedup and efficiency both ways, and the terms that
 * make the two disagree).
 *
 * Steady speed leaves out each rank's first logged interval: it holds the
 * first touch of every buffer and the loader's first batches, and at a few
 * intervals per run it would dominate a mean. A resumed part starts a new
 * process, so its first interval is left out too (rep_train_line.warmup). Speeds are combined as
 * images over seconds (harmonic, weighted by steps), never as a mean of
 * rates.
 */
#define _GNU_SOURCE
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const rep_term_names[REP_N_TERMS] = {
	"compute", "data wait", "communication", "other step time",
	"warm-up interval", "validation", "checkpoints", "rest"};

/* ---- per rank ------------------------------------------------------------- */

typedef struct ord {
	int rank;
	int64_t step;
	size_t line, idx;
} ord;

static int cmp_ord(const void *a, const void *b)
{
	const ord *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* A rank's figures from its train lines l[0..k), sorted by step. */
static void rank_stats(const rep_run *run, const rep_train_line *const *l,
		       size_t k, double batch, rep_rank_stats *rs)
{
	int have_steps = !(run->lines.missing & REP_MISSING_STEPS);
	rs->lines = (int)k;
	/* the warm-ups: the first by step, and each part's first; when
	 * every line is one (a line per part), only the run's first goes,
	 * so that a steady speed is left */
	size_t n_wu = 0;
	for (size_t i = 0; i < k; i++)
		n_wu += i == 0 || l[i]->warmup;
	int all_wu = n_wu == k;
	rs->warmup_lines = all_wu ? k > 1 : (int)n_wu;
	rs->warmup_excluded = rs->warmup_lines > 0;
#define WARMUP(i) ((i) == 0 ? rs->warmup_excluded : !all_wu && l[i]->warmup)
	double n_sum = 0, t_sum = 0, w = 0, c = 0, m = 0;
	for (size_t i = 0; i < k; i++) {
		/* a zero rate means the trainer measured no time: no weight */
		if (WARMUP(i) || !(l[i]->images_per_s > 0))
			continue;
		double n = l[i]->steps > 0 ? l[i]->steps : 1;
		n_sum += n;
		t_sum += n / l[i]->images_per_s;
		w += n * l[i]->data_wait_ms;
		c += n * l[i]->compute_ms;
		m += n * l[i]->comm_ms;
	}
	if (n_sum > 0 && t_sum > 0) {
		rs->speed = n_sum / t_sum;
		rs->wait_ms = w / n_sum;
		rs->compute_ms = c / n_sum;
		rs->comm_ms = m / n_sum;
		if (isfinite(batch)) {
			rs->step_ms = 1e3 * batch / rs->speed;
			if (have_steps) {
				rs->steady_s = batch * t_sum;
				rs->steady_wait_s = w / 1e3;
				rs->steady_compute_s = c / 1e3;
				rs->steady_comm_s = m / 1e3;
			}
		}
	}
	if (isfinite(batch) && have_steps) {
		rs->warmup_s = 0;
		for (size_t i = 0; i < k; i++)
			if (WARMUP(i) && l[i]->images_per_s > 0)
				rs->warmup_s += l[i]->steps * batch / l[i]->images_per_s;
	}
#undef WARMUP
	if (have_steps && k > 0) {
		rs->busy_s = rs->wait_s = rs->comm_s = 0;
		for (size_t i = 0; i < k; i++) {
			rs->busy_s += l[i]->steps * l[i]->compute_ms / 1e3;
			rs->wait_s += l[i]->steps * l[i]->data_wait_ms / 1e3;
			rs->comm_s += l[i]->steps * l[i]->comm_ms / 1e3;
		}
	}
}

static void rank_init(rep_rank_stats *rs)
{
	memset(rs, 0, sizeof(*rs));
	rs->speed = rs->wait_ms = rs->compute_ms = rs->comm_ms = rs->step_ms = NAN;
	rs->steady_s = rs->warmup_s = NAN;
	rs->steady_compute_s = rs->steady_wait_s = rs->steady_comm_s = NAN;
	rs->busy_s = rs->wait_s = rs->comm_s = NAN;
}

/* ---- epochs ------------------------------------------------------------------ */

typedef struct ep {
	int epoch;
	double end;
	int from_val;
} ep;

static int cmp_ep(const void *a, const void *b)
{
	const ep *x = a, *y = b;
	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	/* val lines first, so they win the merge */
	return y->from_val - x->from_val;
}

static int epoch_ends(const rep_run *run, rep_stats *st)
{
	size_t n = run->lines.n_val + run->lines.n_train;
	if (!n)
		return 0;
	ep *e = malloc(n * sizeof(*e));
	if (!e)
		return IMS_ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < run->lines.n_val; i++)
		e[k++] = (ep){run->lines.val[i].epoch, (double)run->lines.val[i].step, 1};
	for (size_t i = 0; i < run->lines.n_train; i++)
		e[k++] = (ep){run->lines.train[i].epoch, (double)run->lines.train[i].step, 0};
	qsort(e, k, sizeof(*e), cmp_ep);
	st->epoch_id = malloc(k * sizeof(int));
	st->epoch_end = malloc(k * sizeof(double));
	st->epoch_complete = malloc(k);
	if (!st->epoch_id || !st->epoch_end || !st->epoch_complete) {
		free(e);
		return IMS_ENOMEM;
	}
	size_t m = 0;
	for (size_t i = 0; i < k;) {
		size_t j = i;
		/* the last val line of the epoch, else its highest train step */
		double end = -1;
		int from_val = e[i].from_val;
		for (; j < k && e[j].epoch == e[i].epoch; j++)
			if (e[j].from_val == from_val && e[j].end > end)
				end = e[j].end;
		st->epoch_id[m] = e[i].epoch;
		st->epoch_end[m] = end;
		st->epoch_complete[m] = (unsigned char)from_val;
		m++;
		i = j;
	}
	st->n_epochs = m;
	free(e);
	return 0;
}

/* Index of epoch e in the sorted table, or -1. */
static long find_epoch(const rep_stats *st, int e)
{
	size_t lo = 0, hi = st->n_epochs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (st->epoch_id[mid] < e)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < st->n_epochs && st->epoch_id[lo] == e ? (long)lo : -1;
}

double rep_epoch_position(const rep_stats *st, int epoch, int64_t step)
{
	long i = find_epoch(st, epoch);
	double lo = 0, hi = NAN;
	long p = find_epoch(st, epoch - 1);
	if (epoch > 0)
		lo = p >= 0 ? st->epoch_end[p] : NAN;
	if (i >= 0)
		hi = st->epoch_end[i];
	if (i >= 0 && !st->epoch_complete[i] && p >= 0) {
		/* stopped inside: as long as the epoch before */
		long pp = find_epoch(st, epoch - 2);
		double plo = epoch - 1 == 0 ? 0 : pp >= 0 ? st->epoch_end[pp] : NAN;
		if (isfinite(plo) && st->epoch_end[p] > plo)
			hi = lo + (st->epoch_end[p] - plo);
	}
	if (!isfinite(lo) || !isfinite(hi) || hi <= lo)
		return epoch + 1.0;
	double f = ((double)step - lo) / (hi - lo);
	f = f < 0 ? 0 : f > 1 ? 1 : f;
	return epoch + f;
}

/* ---- group keys ----------------------------------------------------------- */

/* Options that do not change the work of a step: runs differing only in
 * these are the same job for a speed comparison. batch_size is replaced by
 * the batch the grouping keeps equal. Threads per rank are how the job is
 * run, not what it is: scaling on one machine gives N ranks cores / N
 * threads each, so the group's table shows them beside the speeds.
 * Validation (its split, its crop) happens outside the training steps. */
static const char *const work_neutral[] = {
	"world", "lr", "lr_peak", "seed", "epochs", "max_steps", "momentum",
	"weight_decay", "nesterov", "warmup_epochs", "schedule", "no_lr_scaling",
	"label_smoothing", "batch_size", "threads", "loader_threads", "val",
	"val_crop_frac", NULL};

static int neutral(const char *k)
{
	for (const char *const *n = work_neutral; *n; n++)
		if (strcmp(*n, k) == 0)
			return 1;
	return 0;
}

static char *group_key(const rep_run *run, rep_scaling mode, double batch,
		       double global)
{
	ims_buf b = {0};
	const rep_summary *s = &run->sum;
	if (s->n_options) {
		for (size_t i = 0; i < s->n_options; i++) {
			if (neutral(s->options[i].key))
				continue;
			ims_buf_printf(&b, "%s=%s ", s->options[i].key, s->options[i].value);
		}
	} else {
		/* a summary from before options were logged */
		ims_buf_printf(&b, "model=%s device=%s ", s->model ? s->model : "?",
			  s->device ? s->device : "?");
	}
	/* a fine-tuned run starts elsewhere than one from scratch: its time
	 * to an accuracy is no measure of another's scaling (the file's bytes
	 * tell starts apart; its path where a summary lacks them) */
	if (s->init_path)
		ims_buf_printf(&b, "init=%s ", s->init_crc32c ? s->init_crc32c : s->init_path);
	if (mode == REP_SCALE_RANK_BATCH)
		ims_buf_printf(&b, "batch_per_rank=%g", batch);
	else
		ims_buf_printf(&b, "global_batch=%g", global);
	return ims_buf_take(&b, NULL);
}

/* ---- a run --------------------------------------------------------------------- */

static void stats_init(rep_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->batch_per_rank = st->global_batch = st->speed = st->total_speed = NAN;
	st->busy_ratio = st->stall_fraction = st->train_s = st->images = NAN;
	st->final_top1 = st->final_top5 = st->best_top1 = st->best_epoch = NAN;
	st->best_wall_s = st->target_epochs = st->target_wall_s = NAN;
	st->busy_max_rank = st->busy_min_rank = -1;
	for (int k = 0; k < REP_N_TERMS; k++)
		st->terms[k] = NAN;
}

static double mean_of(const rep_stats *st, size_t off)
{
	double s = 0;
	for (int r = 0; r < st->world; r++)
		s += *(const double *)((const char *)&st->ranks[r] + off);
	return s / st->world;
}

#define RANK_MEAN(st, field) mean_of(st, offsetof(rep_rank_stats, field))

static void decompose(const rep_run *run, rep_stats *st)
{
	const rep_summary *s = &run->sum;
	if (!run->has_summary || !isfinite(st->train_s) ||
	    !isfinite(st->batch_per_rank) || (run->lines.missing & REP_MISSING_STEPS))
		return;
	for (int r = 0; r < st->world; r++)
		if (!isfinite(st->ranks[r].steady_s) || !isfinite(st->ranks[r].warmup_s))
			return;
	double *t = st->terms;
	t[REP_T_COMPUTE] = RANK_MEAN(st, steady_compute_s);
	t[REP_T_WAIT] = RANK_MEAN(st, steady_wait_s);
	t[REP_T_COMM] = RANK_MEAN(st, steady_comm_s);
	t[REP_T_OTHER] = RANK_MEAN(st, steady_s) - t[REP_T_COMPUTE] -
			 t[REP_T_WAIT] - t[REP_T_COMM];
	t[REP_T_WARMUP] = RANK_MEAN(st, warmup_s);
	double val = s->val_s;
	if (!isfinite(val)) {
		/* older summaries: the val lines' own times, when all have one */
		val = 0;
		for (size_t i = 0; i < run->lines.n_val; i++) {
			double vs = run->lines.val[i].val_s;
			val += isfinite(vs) ? vs : NAN;
		}
		if (!isfinite(val))
			val = 0;
	}
	t[REP_T_VAL] = val;
	t[REP_T_CKPT] = isfinite(s->checkpoint_s) ? s->checkpoint_s : 0;
	double sum = 0;
	for (int k = 0; k < REP_T_REST; k++)
		sum += t[k];
	t[REP_T_REST] = st->train_s - sum;
	st->has_terms = 1;
}

int rep_stats_compute(const rep_run *run, double target_acc, rep_stats *st,
		      ims_error *err)
{
	stats_init(st);
	const rep_summary *s = &run->sum;
	int W = run->world > 0 ? run->world : 1;
	st->world = W;
	st->ranks = calloc((size_t)W, sizeof(*st->ranks));
	ord *o = run->lines.n_train ? malloc(run->lines.n_train * sizeof(*o)) : NULL;
	const rep_train_line **l =
		run->lines.n_train ? malloc(run->lines.n_train * sizeof(*l)) : NULL;
	if (!st->ranks || (run->lines.n_train && (!o || !l))) {
		free(o);
		free(l);
		rep_stats_release(st);
		return ims_fail(err, IMS_ENOMEM, "cannot analyse '%s': out of memory",
				run->dir);
	}
	if (run->has_summary) {
		st->batch_per_rank = s->batch_per_rank;
		st->global_batch = isfinite(s->global_batch) ? s->global_batch
							     : s->batch_per_rank * W;
		st->train_s = s->train_s;
		st->images = s->images;
	}

	for (size_t i = 0; i < run->lines.n_train; i++)
		o[i] = (ord){run->lines.train[i].rank, run->lines.train[i].step,
			     run->lines.train[i].line, i};
	if (run->lines.n_train)
		qsort(o, run->lines.n_train, sizeof(*o), cmp_ord);
	size_t at = 0;
	int ranks_with_speed = 0;
	double speed_sum = 0;
	st->warmup_excluded = 1;
	for (int r = 0; r < W; r++) {
		rep_rank_stats *rs = &st->ranks[r];
		rank_init(rs);
		size_t k = 0;
		while (at < run->lines.n_train && o[at].rank == r)
			l[k++] = &run->lines.train[o[at++].idx];
		rank_stats(run, l, k, st->batch_per_rank, rs);
		if (k && !rs->warmup_excluded)
			st->warmup_excluded = 0;
		if (isfinite(rs->speed)) {
			speed_sum += rs->speed;
			ranks_with_speed++;
		}
		if (s->busy_s)
			rs->busy_s = s->busy_s[r];
		if (s->data_wait_s_per_rank)
			rs->wait_s = s->data_wait_s_per_rank[r];
		if (s->comm_s_per_rank)
			rs->comm_s = s->comm_s_per_rank[r];
	}
	free(o);
	free(l);
	if (ranks_with_speed) {
		/* a rank without lines (died early) is assumed as fast as the
		 * mean: the total then still counts W ranks' work */
		st->speed = speed_sum / ranks_with_speed;
		st->total_speed = st->speed * W;
	} else
		st->warmup_excluded = 0;

	double mx = -1, mn = INFINITY;
	int all = 1;
	for (int r = 0; r < W; r++) {
		double b = st->ranks[r].busy_s;
		if (!isfinite(b)) {
			all = 0;
			break;
		}
		if (b > mx) {
			mx = b;
			st->busy_max_rank = r;
		}
		if (b < mn) {
			mn = b;
			st->busy_min_rank = r;
		}
	}
	if (all && mn > 0)
		st->busy_ratio = mx / mn;
	else
		st->busy_max_rank = st->busy_min_rank = -1;

	if (isfinite(s->stall_fraction))
		st->stall_fraction = s->stall_fraction;
	else if (isfinite(s->data_wait_s) && st->train_s > 0)
		st->stall_fraction = s->data_wait_s / st->train_s;
	else if (st->ranks[0].step_ms > 0)
		st->stall_fraction = st->ranks[0].wait_ms / st->ranks[0].step_ms;
	else if (st->ranks[0].compute_ms > 0)
		/* no batch size: the step's logged parts stand for the step */
		st->stall_fraction = st->ranks[0].wait_ms /
				     (st->ranks[0].wait_ms + st->ranks[0].compute_ms +
				      st->ranks[0].comm_ms);

	decompose(run, st);

	/* accuracy: the summary's word, else the val lines' */
	const rep_val_line *last = NULL, *best = NULL;
	for (size_t i = 0; i < run->lines.n_val; i++) {
		const rep_val_line *v = &run->lines.val[i];
		if (!last || v->epoch > last->epoch ||
		    (v->epoch == last->epoch && v->step >= last->step))
			last = v;
		if (!best || v->top1 > best->top1)
			best = v;
	}
	st->final_top1 = isfinite(s->val_top1) ? s->val_top1 : last ? last->top1 : NAN;
	st->final_top5 = isfinite(s->val_top5) ? s->val_top5 : last ? last->top5 : NAN;
	if (isfinite(s->best_val_top1)) {
		st->best_top1 = s->best_val_top1;
		st->best_epoch = s->best_epoch;
		st->best_wall_s = s->best_wall_s;
	} else if (best) {
		st->best_top1 = best->top1;
		st->best_epoch = best->epoch;
		st->best_wall_s = best->wall_s;
	}
	if (target_acc >= 0) {
		st->target_set = 1;
		for (size_t i = 0; i < run->lines.n_val; i++) {
			const rep_val_line *v = &run->lines.val[i];
			if (v->top1 >= target_acc) {
				st->target_reached = 1;
				st->target_epochs = v->epoch + 1.0;
				st->target_wall_s = v->wall_s;
				break;
			}
		}
	}

	int rc = epoch_ends(run, st);
	if (!rc && run->has_summary && isfinite(st->batch_per_rank)) {
		for (int m = 0; m < 2; m++) {
			st->key[m] = group_key(run, (rep_scaling)m, st->batch_per_rank,
					       st->global_batch);
			if (!st->key[m])
				rc = IMS_ENOMEM;
		}
	}
	if (rc) {
		rep_stats_release(st);
		return ims_fail(err, rc, "cannot analyse '%s': out of memory", run->dir);
	}
	return 0;
}

void rep_stats_release(rep_stats *st)
{
	if (!st)
		return;
	free(st->ranks);
	free(st->key[0]);
	free(st->key[1]);
	free(st->epoch_id);
	free(st->epoch_end);
	free(st->epoch_complete);
	memset(st, 0, sizeof(*st));
}

/* ---- between runs --------------------------------------------------------------- */

/* Steady ms per image on one rank: wait, compute, comm, other. */
static int per_image(const rep_stats *st, double out[4])
{
	if (!isfinite(st->batch_per_rank) || st->batch_per_rank <= 0)
		return 0;
	double step = RANK_MEAN(st, step_ms);
	double w = RANK_MEAN(st, wait_ms), c = RANK_MEAN(st, compute_ms);
	double m = RANK_MEAN(st, comm_ms);
	if (!isfinite(step) || !isfinite(w) || !isfinite(c) || !isfinite(m))
		return 0;
	out[0] = w / st->batch_per_rank;
	out[1] = c / st->batch_per_rank;
	out[2] = m / st->batch_per_rank;
	out[3] = (step - w - c - m) / st->batch_per_rank;
	return 1;
}

/* Nothing known yet. */
static void compare_init(rep_compare *c)
{
	memset(c, 0, sizeof(*c));
	c->speedup_speed = c->eff_speed = c->speedup_time = c->eff_time = NAN;
	c->images_ratio = c->steady_speedup_time = c->ideal_s = NAN;
	for (int k = 0; k < REP_N_TERMS; k++)
		c->base_terms[k] = c->terms[k] = c->excess[k] = NAN;
	for (int k = 0; k < 4; k++)
		c->base_per_image_ms[k] = c->per_image_ms[k] = NAN;
}

void rep_compare_runs(const rep_stats *base, const rep_stats *st,
		      rep_compare *c)
{
	compare_init(c);
	double ranks = (double)st->world / base->world;
	if (base->total_speed > 0 && isfinite(st->total_speed))
		c->speedup_speed = st->total_speed / base->total_speed;
	c->eff_speed = c->speedup_speed / ranks;
	double f = 1;
	if (base->images > 0 && st->images > 0) {
		c->images_ratio = st->images / base->images;
		/* the same job: same work, exactly the same image count */
		c->time_per_image = st->images != base->images;
		f = c->images_ratio;
	}
	if (base->train_s > 0 && st->train_s > 0) {
		c->speedup_time = f * base->train_s / st->train_s;
		c->eff_time = c->speedup_time / ranks;
	}
	if (base->has_terms && st->has_terms) {
		c->has_terms = 1;
		double bs = 0, ss = 0;
		for (int k = 0; k < REP_N_TERMS; k++) {
			c->base_terms[k] = f * base->terms[k];
			c->terms[k] = st->terms[k];
			if (k <= REP_T_OTHER) {
				bs += c->base_terms[k];
				ss += c->terms[k];
			}
		}
		if (ss > 0)
			c->steady_speedup_time = bs / ss;
		if (c->speedup_speed > 0) {
			c->ideal_s = f * base->train_s / c->speedup_speed;
			for (int k = 0; k < REP_N_TERMS; k++)
				c->excess[k] = c->terms[k] -
					       c->base_terms[k] / c->speedup_speed;
		}
	}
	c->has_per_image = per_image(base, c->base_per_image_ms) &&
			   per_image(st, c->per_image_ms);
}

int rep_groups_compute(const rep_stats *stats, size_t n, rep_group **groups,
		       size_t *n_groups, ims_error *err)
{
	*groups = NULL;
	*n_groups = 0;
	if (!n)
		return 0;
	size_t *idx = malloc(n * sizeof(*idx));
	unsigned char *taken = calloc(n, 1);
	rep_group *g = calloc(2 * n, sizeof(*g));
	size_t ng = 0;
	int rc = 0;
	if (!idx || !taken || !g)
		GOTO_FAIL(out, rc, err, IMS_ENOMEM, "cannot group runs: out of memory");
	for (int mode = 0; mode < 2; mode++) {
		memset(taken, 0, n);
		for (size_t i = 0; i < n; i++) {
			if (taken[i] || !stats[i].key[mode])
				continue;
			size_t k = 0;
			int worlds = 0;
			for (size_t j = i; j < n; j++) {
				if (taken[j] || !stats[j].key[mode] ||
				    strcmp(stats[j].key[mode], stats[i].key[mode]) != 0)
					continue;
				taken[j] = 1;
				/* insertion by world, stable for equal worlds */
				size_t at = k;
				while (at > 0 && stats[idx[at - 1]].world > stats[j].world) {
					idx[at] = idx[at - 1];
					at--;
				}
				idx[at] = j;
				k++;
			}
			for (size_t a = 0; a < k; a++)
				worlds += a == 0 || stats[idx[a]].world != stats[idx[a - 1]].world;
			if (worlds < 2)
				continue;
			rep_group *gr = &g[ng++];
			gr->mode = (rep_scaling)mode;
			gr->key = strdup(stats[i].key[mode]);
			gr->members = malloc(k * sizeof(size_t));
			gr->cmp = calloc(k, sizeof(rep_compare));
			if (!gr->key || !gr->members || !gr->cmp)
				GOTO_FAIL(out, rc, err, IMS_ENOMEM,
					  "cannot group runs: out of memory");
			memcpy(gr->members, idx, k * sizeof(size_t));
			gr->n_members = k;
			gr->baseline = -1;
			for (size_t a = 0; a < k && gr->baseline < 0; a++)
				if (stats[idx[a]].world == 1)
					gr->baseline = (long)idx[a];
			/* no world-1 run: nothing to compare with */
			for (size_t a = 0; a < k; a++) {
				if (gr->baseline >= 0)
					rep_compare_runs(&stats[gr->baseline],
							 &stats[idx[a]], &gr->cmp[a]);
				else
					compare_init(&gr->cmp[a]);
			}
		}
	}
out:
	free(idx);
	free(taken);
	if (rc) {
		rep_groups_release(g, ng);
		return rc;
	}
	if (!ng) {
		free(g);
		g = NULL;
	}
	*groups = g;
	*n_groups = ng;
	return 0;
}

void rep_groups_release(rep_group *groups, size_t n)
{
	if (!groups)
		return;
	for (size_t i = 0; i < n; i++) {
		free(groups[i].key);
		free(groups[i].members);
		free(groups[i].cmp);
	}
	free(groups);
}
