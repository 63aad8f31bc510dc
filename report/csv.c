/*
 * csv.c - the report's series as CSV files, for spreadsheets and plotting
 * tools: one file per series, a header row, numbers as %.10g, unknown
 * values empty. The files (and the page, rep_report_write) are written to
 * temporaries first, a file's rows as they are made, and put in place
 * together.
 */
#include "report_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A CSV file being written: rows gather in b and go to the file's
 * temporary each time b passes CSV_FLUSH bytes, so that a file of
 * millions of rows (train.csv of a long run) never lies whole in memory.
 * rc keeps the first failure; the fills stop at it. */
typedef struct csv_out {
	ims_buf b;
	int fd;
	const char *path; /* the file as the user named it, for messages */
	int rc;
	ims_error *err;
} csv_out;

#define CSV_FLUSH ((size_t)1 << 16)

/* Writes what b holds to the temporary and empties b. */
static int csv_flush(csv_out *o)
{
	if (o->rc)
		return o->rc;
	if (o->b.oom)
		return o->rc = ims_fail(o->err, IMS_ENOMEM, "cannot write '%s': out of memory",
					o->path);
	if (o->b.len && ims_write_all(o->fd, o->b.data, o->b.len) != 0)
		return o->rc = ims_fail(o->err, IMS_EIO, "cannot write '%s': %s", o->path,
					strerror(errno));
	o->b.len = 0;
	return 0;
}

/* After each row: the rows so far go to the file once there are enough. */
static void csv_row_end(csv_out *o)
{
	if (o->b.len >= CSV_FLUSH || o->b.oom)
		csv_flush(o);
}

/* Numbers separated by commas: one call per row tail. */
static void nums(ims_buf *b, const double *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ims_buf_puts(b, ",");
		rb_csv_num(b, v[i]);
	}
}

static void run_cell(ims_buf *b, const rep_run *run)
{
	rb_csv(b, run->label ? run->label : run->dir);
}

static void runs_csv(const rep_report *r, csv_out *o)
{
	ims_buf *b = &o->b;
	ims_buf_puts(b, "run,dir,world,model,device,threads,batch_per_rank,global_batch,epochs,"
		    "steps,images,wall_s,train_s,startup_s,images_per_s,speed_per_rank,"
		    "total_speed,final_top1,final_top5,best_top1,best_epoch,best_wall_s,"
		    "stall_fraction,busy_max_min,target_reached,target_epochs,target_wall_s,"
		    "has_summary,skipped_lines,parts,superseded_lines,init,init_crc32c,"
		    "other_diagnostics\n");
	for (size_t i = 0; i < r->n_runs; i++) {
		const rep_run *run = &r->runs[i];
		const rep_stats *st = &r->stats[i];
		const rep_summary *s = &run->sum;
		run_cell(b, run);
		ims_buf_puts(b, ",");
		rb_csv(b, run->dir);
		ims_buf_printf(b, ",%d,", st->world);
		rb_csv(b, s->model ? s->model : "");
		ims_buf_puts(b, ",");
		rb_csv(b, s->device ? s->device : "");
		double v[] = {s->threads, st->batch_per_rank, st->global_batch, s->epochs,
			      s->steps, st->images, s->wall_s, st->train_s, s->startup_s,
			      s->images_per_s, st->speed, st->total_speed, st->final_top1,
			      st->final_top5, st->best_top1, st->best_epoch, st->best_wall_s,
			      st->stall_fraction, st->busy_ratio};
		nums(b, v, sizeof(v) / sizeof(v[0]));
		if (st->target_set)
			ims_buf_printf(b, ",%d", st->target_reached);
		else
			ims_buf_puts(b, ",");
		double t[] = {st->target_epochs, st->target_wall_s};
		nums(b, t, 2);
		ims_buf_printf(b, ",%d,%zu,%zu,%zu,", run->has_summary,
			       run->diags.n_skipped_lines,
			       run->parts.n ? run->parts.n : 1, run->parts.n_superseded);
		rb_csv(b, s->init_path ? s->init_path : "");
		ims_buf_puts(b, ",");
		rb_csv(b, s->init_crc32c ? s->init_crc32c : "");
		/* appended: readers of the columns before keep their places */
		ims_buf_printf(b, ",%zu\n", run->diags.n_total - run->diags.n_skipped_lines);
		csv_row_end(o);
	}
}

static void train_csv(const rep_report *r, csv_out *o)
{
	ims_buf *b = &o->b;
	ims_buf_puts(b, "run,rank,epoch,step,epoch_position,steps,wall_s,loss,accuracy,lr,"
		    "images_per_s,data_wait_ms,compute_ms,comm_ms\n");
	for (size_t i = 0; i < r->n_runs; i++) {
		const rep_run *run = &r->runs[i];
		for (size_t k = 0; k < run->lines.n_train && !o->rc; k++) {
			const rep_train_line *l = &run->lines.train[k];
			run_cell(b, run);
			ims_buf_printf(b, ",%d,%d,%lld", l->rank, l->epoch, (long long)l->step);
			double v[] = {rep_epoch_position(&r->stats[i], l->epoch, l->step),
				      l->steps > 0 ? l->steps : NAN, l->wall_s, l->loss,
				      l->accuracy, l->lr, l->images_per_s, l->data_wait_ms,
				      l->compute_ms, l->comm_ms};
			nums(b, v, sizeof(v) / sizeof(v[0]));
			ims_buf_puts(b, "\n");
			csv_row_end(o);
		}
	}
}

static void val_csv(const rep_report *r, csv_out *o)
{
	ims_buf *b = &o->b;
	ims_buf_puts(b, "run,epoch,step,wall_s,val_s,loss,top1,top5,records\n");
	for (size_t i = 0; i < r->n_runs; i++) {
		const rep_run *run = &r->runs[i];
		for (size_t k = 0; k < run->lines.n_val && !o->rc; k++) {
			const rep_val_line *l = &run->lines.val[k];
			run_cell(b, run);
			ims_buf_printf(b, ",%d,%lld", l->epoch, (long long)l->step);
			double v[] = {l->wall_s, l->val_s, l->loss, l->top1, l->top5, l->records};
			nums(b, v, sizeof(v) / sizeof(v[0]));
			ims_buf_puts(b, "\n");
			csv_row_end(o);
		}
	}
}

static void gpu_csv(const rep_report *r, csv_out *o)
{
	ims_buf *b = &o->b;
	ims_buf_puts(b, "run,rank,device,wall_s,util,mem_used_mib,mem_total_mib\n");
	for (size_t i = 0; i < r->n_runs; i++) {
		const rep_run *run = &r->runs[i];
		for (size_t k = 0; k < run->lines.n_gpu && !o->rc; k++) {
			const rep_gpu_line *l = &run->lines.gpu[k];
			run_cell(b, run);
			ims_buf_printf(b, ",%d,%d", l->rank, l->device);
			double v[] = {l->wall_s, l->util, l->mem_used_mib, l->mem_total_mib};
			nums(b, v, sizeof(v) / sizeof(v[0]));
			ims_buf_puts(b, "\n");
			csv_row_end(o);
		}
	}
}

static void ranks_csv(const rep_report *r, csv_out *o)
{
	ims_buf *b = &o->b;
	ims_buf_puts(b, "run,rank,lines,warmup_excluded,speed,step_ms,data_wait_ms,compute_ms,"
		    "comm_ms,busy_s,data_wait_s,comm_s\n");
	for (size_t i = 0; i < r->n_runs; i++) {
		const rep_stats *st = &r->stats[i];
		for (int k = 0; k < st->world; k++) {
			const rep_rank_stats *rs = &st->ranks[k];
			run_cell(b, &r->runs[i]);
			ims_buf_printf(b, ",%d,%d,%d", k, rs->lines, rs->warmup_excluded);
			double v[] = {rs->speed, rs->step_ms, rs->wait_ms, rs->compute_ms,
				      rs->comm_ms, rs->busy_s, rs->wait_s, rs->comm_s};
			nums(b, v, sizeof(v) / sizeof(v[0]));
			ims_buf_puts(b, "\n");
			csv_row_end(o);
		}
	}
}

static void terms_csv(const rep_report *r, csv_out *o)
{
	ims_buf *b = &o->b;
	ims_buf_puts(b, "run,term,seconds\n");
	for (size_t i = 0; i < r->n_runs; i++) {
		const rep_stats *st = &r->stats[i];
		if (!st->has_terms)
			continue;
		for (int k = 0; k < REP_N_TERMS; k++) {
			run_cell(b, &r->runs[i]);
			ims_buf_puts(b, ",");
			rb_csv(b, rep_term_names[k]);
			nums(b, &st->terms[k], 1);
			ims_buf_puts(b, "\n");
			csv_row_end(o);
		}
	}
}

static void scaling_csv(const rep_report *r, csv_out *o)
{
	ims_buf *b = &o->b;
	ims_buf_puts(b, "group,mode,key,run,world,batch_per_rank,global_batch,images,train_s,"
		    "speed_per_rank,total_speed,baseline,speedup_speed,efficiency_speed,"
		    "speedup_time,efficiency_time,time_per_image,steady_speedup_time\n");
	for (size_t g = 0; g < r->n_groups; g++) {
		const rep_group *gr = &r->groups[g];
		for (size_t a = 0; a < gr->n_members; a++) {
			const rep_stats *st = &r->stats[gr->members[a]];
			const rep_compare *c = &gr->cmp[a];
			ims_buf_printf(b, "%zu,%s,", g,
				  gr->mode == REP_SCALE_RANK_BATCH ? "batch_per_rank"
								   : "global_batch");
			rb_csv(b, gr->key);
			ims_buf_puts(b, ",");
			run_cell(b, &r->runs[gr->members[a]]);
			ims_buf_printf(b, ",%d", st->world);
			double v[] = {st->batch_per_rank, st->global_batch, st->images,
				      st->train_s, st->speed, st->total_speed};
			nums(b, v, sizeof(v) / sizeof(v[0]));
			ims_buf_puts(b, ",");
			if (gr->baseline >= 0)
				run_cell(b, &r->runs[gr->baseline]);
			double w[] = {c->speedup_speed, c->eff_speed, c->speedup_time, c->eff_time};
			nums(b, w, 4);
			ims_buf_printf(b, ",%d", c->time_per_image);
			nums(b, &c->steady_speedup_time, 1);
			ims_buf_puts(b, "\n");
			csv_row_end(o);
		}
	}
}

static void skipped_csv(const rep_report *r, csv_out *o)
{
	ims_buf *b = &o->b;
	ims_buf_puts(b, "run,diagnostic\n");
	for (size_t i = 0; i < r->n_runs; i++) {
		const rep_run *run = &r->runs[i];
		for (size_t k = 0; k < run->diags.n && !o->rc; k++) {
			run_cell(b, run);
			ims_buf_puts(b, ",");
			rb_csv(b, run->diags.list[k]);
			ims_buf_puts(b, "\n");
			csv_row_end(o);
		}
	}
}

/* The CSV files, in rep_csv_names' order. */
static void (*const csv_fill[])(const rep_report *, csv_out *) = {
	runs_csv, train_csv, val_csv, gpu_csv, ranks_csv, terms_csv, scaling_csv,
	skipped_csv};

const char *const rep_csv_names[] = {"runs.csv", "train.csv", "val.csv",
				     "gpu.csv", "ranks.csv", "terms.csv",
				     "scaling.csv", "skipped.csv", NULL};

#define N_CSV (sizeof(csv_fill) / sizeof(csv_fill[0]))

/* A file written to its temporary, not yet in place. */
typedef struct staged {
	char path[4096], tmp[4200];
	int fd;
} staged;

/* Writes len bytes of text to path's temporary as st. */
static int stage(staged *st, const char *path, const char *text, size_t len,
		 ims_error *err)
{
	if (snprintf(st->path, sizeof(st->path), "%s", path) >= (int)sizeof(st->path))
		return ims_fail(err, IMS_EINVAL, "cannot write '%s': the path is too long", path);
	return ims_temp_write(path, text ? text : "", len, 0, st->tmp, sizeof(st->tmp),
			      &st->fd, err);
}

/* Writes CSV file k to path's temporary as st, row by row. */
static int stage_csv(const rep_report *r, size_t k, staged *st, const char *path,
		     ims_error *err)
{
	FORWARD_IF_ERR(stage(st, path, NULL, 0, err));
	csv_out o = {.fd = st->fd, .path = path, .err = err};
	csv_fill[k](r, &o);
	int rc = csv_flush(&o);
	ims_buf_release(&o.b);
	if (rc)
		ims_temp_discard(st->fd, st->tmp);
	return rc;
}

int rep_report_write(const rep_report *r, const char *page, const char *csv_dir,
		     ims_error *err)
{
	RETURN_IF(!r->analyzed, err, IMS_EINVAL,
		  "cannot write the report before it is analysed");
	staged *st = calloc(N_CSV + 1, sizeof(*st));
	RETURN_IF(!st, err, IMS_ENOMEM, "cannot write the report: out of memory");
	size_t n = 0; /* files staged */
	int rc = 0;
	if (csv_dir)
		rc = ims_mkdir_p(csv_dir, err);
	for (size_t k = 0; csv_dir && !rc && k < N_CSV; k++) {
		char path[4096];
		rc = ims_path_join(path, sizeof(path), csv_dir, rep_csv_names[k], err);
		if (rc)
			break;
		rc = stage_csv(r, k, &st[n], path, err);
		n += !rc;
	}
	if (page && !rc) {
		char *html = NULL;
		size_t len = 0;
		rc = rep_report_html(r, &html, &len, err);
		if (!rc)
			rc = stage(&st[n], page, html, len, err);
		free(html);
		n += !rc;
	}
	/* every file is written before any replaces its name: a failure
	 * (a full disk) leaves the old files, not a new page beside some
	 * new CSV files and some old ones. The page goes in last. */
	size_t k = 0;
	for (; !rc && k < n; k++)
		rc = ims_temp_publish(st[k].fd, st[k].tmp, st[k].path, err);
	for (; k < n; k++) /* on failure: those not published */
		ims_temp_discard(st[k].fd, st[k].tmp);
	free(st);
	return rc;
}

int rep_report_write_csv(const rep_report *r, const char *dir, ims_error *err)
{
	return rep_report_write(r, NULL, dir, err);
}
