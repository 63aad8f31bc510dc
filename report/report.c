/*
 * report.c - the report as a whole: the runs given, in order, their
 * figures and the scaling groups, and writing the page.
 */
#define _GNU_SOURCE
#include "report_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rep_report_init(rep_report *r, const rep_opts *o)
{
	memset(r, 0, sizeof(*r));
	r->opts.title = NULL;
	r->opts.target_acc = -1;
	if (o)
		r->opts = *o;
}

int rep_report_add_run(rep_report *r, const char *dir, ims_error *err)
{
	RETURN_IF(r->analyzed, err, IMS_EINVAL, "cannot add '%s': the report is already analysed",
		  dir);
	rep_run *runs = realloc(r->runs, (r->n_runs + 1) * sizeof(*runs));
	RETURN_IF(!runs, err, IMS_ENOMEM, "cannot add '%s': out of memory", dir);
	r->runs = runs;
	FORWARD_IF_ERR(rep_run_load(&r->runs[r->n_runs], dir, err));
	r->n_runs++;
	return 0;
}

/* The folder's last component ("runs/w2/" -> "w2"). */
static char *base_name(const char *dir)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	size_t s = n;
	while (s > 0 && dir[s - 1] != '/')
		s--;
	return strndup(dir + s, n - s);
}

/* Labels are the folders' names, or their paths as given where two names
 * clash, with " #2" ... where even those do. */
static int label_runs(rep_report *r)
{
	for (size_t i = 0; i < r->n_runs; i++) {
		free(r->runs[i].label);
		r->runs[i].label = base_name(r->runs[i].dir);
		if (!r->runs[i].label)
			return IMS_ENOMEM;
	}
	/* decided on the names alone, before any is replaced by its path */
	unsigned char *clash = calloc(r->n_runs ? r->n_runs : 1, 1);
	if (!clash)
		return IMS_ENOMEM;
	for (size_t i = 0; i < r->n_runs; i++)
		for (size_t j = i + 1; j < r->n_runs; j++)
			if (strcmp(r->runs[i].label, r->runs[j].label) == 0)
				clash[i] = clash[j] = 1;
	int rc = 0;
	for (size_t i = 0; i < r->n_runs && !rc; i++) {
		if (!clash[i])
			continue;
		char *full = strdup(r->runs[i].dir);
		if (!full)
			rc = IMS_ENOMEM;
		else {
			free(r->runs[i].label);
			r->runs[i].label = full;
		}
	}
	free(clash);
	/* count the earlier equal labels first, then rename: renaming as we
	 * go would make a third copy "#2" again */
	int *same = calloc(r->n_runs ? r->n_runs : 1, sizeof(int));
	if (!same)
		return IMS_ENOMEM;
	for (size_t i = 1; i < r->n_runs; i++)
		for (size_t j = 0; j < i; j++)
			same[i] += strcmp(r->runs[i].label, r->runs[j].label) == 0;
	for (size_t i = 1; i < r->n_runs && !rc; i++) {
		if (!same[i])
			continue;
		char *l;
		if (asprintf(&l, "%s #%d", r->runs[i].label, same[i] + 1) < 0) {
			rc = IMS_ENOMEM;
			break;
		}
		free(r->runs[i].label);
		r->runs[i].label = l;
	}
	free(same);
	return rc;
}

int rep_report_analyze(rep_report *r, ims_error *err)
{
	RETURN_IF(r->analyzed, err, IMS_EINVAL, "the report is already analysed");
	free(r->title);
	r->title = strdup(r->opts.title ? r->opts.title : "imshard run report");
	RETURN_IF(!r->title, err, IMS_ENOMEM, "cannot analyse the runs: out of memory");
	/* before labels: a joined folder's name is no run's */
	RETURN_IF(rep_rank_local_join(r) < 0, err, IMS_ENOMEM,
		  "cannot analyse the runs: out of memory");
	RETURN_IF(label_runs(r) < 0, err, IMS_ENOMEM, "cannot analyse the runs: out of memory");
	r->stats = calloc(r->n_runs ? r->n_runs : 1, sizeof(*r->stats));
	RETURN_IF(!r->stats, err, IMS_ENOMEM, "cannot analyse the runs: out of memory");
	for (size_t i = 0; i < r->n_runs; i++)
		FORWARD_IF_ERR(rep_stats_compute(&r->runs[i], r->opts.target_acc,
						 &r->stats[i], err));
	FORWARD_IF_ERR(rep_groups_compute(r->stats, r->n_runs, &r->groups,
					  &r->n_groups, err));
	r->analyzed = 1;
	return 0;
}

int rep_report_write_html(const rep_report *r, const char *path, ims_error *err)
{
	char *html;
	size_t len;
	FORWARD_IF_ERR(rep_report_html(r, &html, &len, err));
	int rc = ims_write_file_atomic(path, html, len, err);
	free(html);
	return rc;
}

void rep_report_release(rep_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_runs; i++) {
		rep_run_release(&r->runs[i]);
		if (r->stats)
			rep_stats_release(&r->stats[i]);
	}
	free(r->runs);
	free(r->stats);
	rep_groups_release(r->groups, r->n_groups);
	free(r->title);
	memset(r, 0, sizeof(*r));
}
