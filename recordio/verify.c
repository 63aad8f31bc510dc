/*
 * verify.c - a split checked end to end (rio_verify): every record's
 * checksums, labels and encoding, each shard's digest, the class names
 * and counts; and the files beside it named as its own that it does not
 * list (rio_split_strays).
 *
 * `imshard verify` and the Python binding's Split.verify both call it, so
 * both find the same problems and say them in the same words. Shards are
 * checked in parallel, one worker per shard at a time; the calling thread
 * is worker 0, so with one thread every callback runs on the caller's
 * thread (the Python binding relies on it). Problems and progress are
 * reported under one mutex: callbacks never overlap.
 *
 * Bad records are named in shard order whatever the thread count: the
 * lowest shard not yet finished names its own at once, a later one keeps
 * its lines (at most max_named) until every shard before it is done, so
 * the same split gives the same lines, and the same max_named of them,
 * with one thread or sixteen.
 *
 * Memory running out is not the split's fault: a record, shard or check
 * that could not be had for it stops the check, which gives no verdict
 * (IMS_ENOMEM) rather than call the split damaged.
 */
#define _GNU_SOURCE
#include "recordio.h"
#include "writer_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_NAMED 100
#define PROGRESS_EVERY 256

typedef struct shard_state {
	uint64_t bad, checked;
	uint64_t digest;   /* format 2 digest of the records as read */
	uint64_t mode_bad; /* records that are not what the encoding says */
	char mode_why[IMS_ERRMSG_MAX];
	uint64_t *counts;  /* per class */
	uint64_t *bad_counts;  /* bad records per class, by their header */
	uint64_t bad_unknown;  /* bad records whose header gives no class */
	int fatal;         /* the shard could not be read to its end */
	int finished;      /* its worker is done with it */
	char **held;       /* lines kept until the shards before it finish */
	uint32_t n_held, cap_held;
	uint64_t n_unkept; /* lines past max_named, or a copy out of memory */
} shard_state;

typedef struct vctx {
	rio_reader *r;
	const rio_manifest *m;
	const rio_verify_opts *o;
	size_t nc;
	unsigned max_named;
	shard_state *st;
	atomic_size_t next;   /* next shard to take */
	atomic_int stop;      /* progress asked to stop */
	pthread_mutex_t mu;   /* callbacks, named, done, next_named, held, oom */
	uint64_t named, done;
	char oom[IMS_ERRMSG_MAX]; /* the first out-of-memory error: no verdict */
	size_t next_named;    /* the lowest shard not finished: names at once */
} vctx;

typedef struct worker {
	vctx *v;
	int id;
} worker;

/* Memory ran out (msg says where): the check stops, with no verdict. */
static void out_of_memory(vctx *v, const char *msg)
{
	pthread_mutex_lock(&v->mu);
	if (!v->oom[0])
		snprintf(v->oom, sizeof(v->oom), "%s", msg[0] ? msg : "out of memory");
	atomic_store(&v->stop, 1);
	pthread_mutex_unlock(&v->mu);
}

/* Named while fewer than max_named were, counted after; under mu. */
static void emit_bad(vctx *v, const char *msg)
{
	if (v->named++ < v->max_named && v->o->problem)
		v->o->problem(v->o->ctx, msg);
}

/* The lines shard s kept, named in their order; under mu. */
static void flush_held(vctx *v, shard_state *sr)
{
	for (uint32_t k = 0; k < sr->n_held; k++) {
		emit_bad(v, sr->held[k]);
		free(sr->held[k]);
	}
	v->named += sr->n_unkept;
	free(sr->held);
	sr->held = NULL;
	sr->n_held = sr->cap_held = 0;
	sr->n_unkept = 0;
}

/* A bad record or an unreadable shard s: named now when every shard
 * before s is done, else kept for then (the first max_named of a shard
 * are enough, and none once max_named were named: no more than that many
 * ever are). */
static void name_bad(vctx *v, size_t s, const char *msg)
{
	pthread_mutex_lock(&v->mu);
	shard_state *sr = &v->st[s];
	if (s == v->next_named) {
		emit_bad(v, msg);
	} else if (sr->n_held < v->max_named && v->named < v->max_named) {
		if (sr->n_held == sr->cap_held && sr->cap_held < (1u << 30)) {
			uint32_t cap = sr->cap_held ? 2 * sr->cap_held : 16;
			char **grown = realloc(sr->held, cap * sizeof(*grown));
			if (grown) {
				sr->held = grown;
				sr->cap_held = cap;
			}
		}
		char *copy = sr->n_held < sr->cap_held ? strdup(msg) : NULL;
		if (copy)
			sr->held[sr->n_held++] = copy;
		else
			sr->n_unkept++; /* counted, not named: out of memory */
	} else {
		sr->n_unkept++;
	}
	pthread_mutex_unlock(&v->mu);
}

/* Shard s is done: the shards from next_named on that are done say their
 * kept lines in order, and the first one still being read says its own
 * so far (it names the rest at once). */
static void shard_done(vctx *v, size_t s)
{
	pthread_mutex_lock(&v->mu);
	v->st[s].finished = 1;
	while (v->next_named < v->m->n_shards && v->st[v->next_named].finished)
		flush_held(v, &v->st[v->next_named++]);
	if (v->next_named < v->m->n_shards)
		flush_held(v, &v->st[v->next_named]);
	pthread_mutex_unlock(&v->mu);
}

static void add_progress(vctx *v, uint64_t n)
{
	pthread_mutex_lock(&v->mu);
	v->done += n;
	if (v->o->progress && v->o->progress(v->o->ctx, v->done) != 0)
		atomic_store(&v->stop, 1);
	pthread_mutex_unlock(&v->mu);
}

/* One record past its CRCs: class, encoding and the caller's check. */
static int check_record(vctx *v, int id, shard_state *sr, uint64_t i,
			const rio_record *rec, ims_error *e)
{
	if ((size_t)rec->label >= v->nc)
		return ims_fail(e, IMS_ECORRUPT,
				"record %llu: label %d has no class (%zu classes)",
				(unsigned long long)i, (int)rec->label, v->nc);
	sr->counts[rec->label]++;
	ims_error me;
	if (rio_record_check_mode(v->m->encoding, rec, &me) < 0 &&
	    sr->mode_bad++ == 0) {
		ims_fail_context(&me, "record %llu", (unsigned long long)i);
		memcpy(sr->mode_why, me.msg, sizeof(sr->mode_why));
	}
	if (!v->o->check)
		return 0;
	return v->o->check(v->o->ctx, id, i, rec, e);
}

/* A bad record's class, so that a class lost whole is seen as one (a
 * re-download of one folder, not of the split): its label when the read
 * got that far, else its header read again without the payload's CRC; a
 * header that fails its own CRC gives none. */
static void count_bad(vctx *v, shard_state *sr, rio_cursor *hc, uint64_t i,
		      const rio_record *rec)
{
	sr->bad++;
	int32_t label = rec ? rec->label : -1;
	rio_record hr;
	ims_error e;
	if (!rec && hc && rio_cursor_get(hc, i, &hr, &e) == 0)
		label = hr.label;
	if (label >= 0 && (size_t)label < v->nc)
		sr->bad_counts[label]++;
	else
		sr->bad_unknown++;
}

static void check_shard(vctx *v, int id, rio_cursor *c, rio_cursor *hc, size_t s)
{
	const rio_shard_info *si = &v->m->shards[s];
	shard_state *sr = &v->st[s];
	ims_error e;
	rio_digest dg;
	rio_digest_begin(&dg, v->m->name, s);
	uint64_t since = 0;
	for (uint64_t i = si->first; i < si->first + si->records; i++) {
		if (atomic_load(&v->stop))
			break;
		rio_record rec;
		ims_error_clear(&e);
		int rc = rio_cursor_get(c, i, &rec, &e);
		if (rc == IMS_ECHANGED) {
			/* every record after this one is suspect: stop here */
			name_bad(v, s, e.msg);
			sr->fatal = 1;
			break;
		}
		const int got = rc == 0;
		if (rc == 0 && rio_digest_add_record(&dg, i, &rec, &e) == 0)
			rc = check_record(v, id, sr, i, &rec, &e);
		else if (rc == 0)
			rc = -1;
		if (rc < 0 && (rc == IMS_ENOMEM || e.code == IMS_ENOMEM)) {
			out_of_memory(v, e.msg);
			break;
		}
		sr->checked++;
		if (rc < 0) {
			count_bad(v, sr, hc, i, got ? &rec : NULL);
			name_bad(v, s, e.msg);
		}
		if (++since == PROGRESS_EVERY) {
			add_progress(v, since);
			since = 0;
		}
	}
	if (since)
		add_progress(v, since);
	sr->digest = rio_digest_value(&dg);
}

static void *work(void *arg)
{
	worker *w = arg;
	vctx *v = w->v;
	rio_cursor *c = NULL, *hc = NULL;
	ims_error e;
	int rc = rio_cursor_open(v->r, RIO_CHECK_PAYLOAD_CRC, &c, &e);
	/* headers only, for the class of a record c found damaged; without
	 * it such records are counted with no class */
	if (!rc && rio_cursor_open(v->r, 0, &hc, &e) < 0)
		hc = NULL;
	for (;;) {
		size_t s = atomic_fetch_add(&v->next, 1);
		if (s >= v->m->n_shards || atomic_load(&v->stop))
			break;
		if (rc < 0 && e.code == IMS_ENOMEM) {
			out_of_memory(v, e.msg);
		} else if (rc < 0) {
			/* each shard this worker takes is unread: say why */
			name_bad(v, s, e.msg);
			v->st[s].fatal = 1;
		} else {
			check_shard(v, w->id, c, hc, s);
		}
		shard_done(v, s);
	}
	rio_cursor_close(hc);
	rio_cursor_close(c);
	return NULL;
}

static void say(vctx *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void say(vctx *v, const char *fmt, ...)
{
	if (!v->o->problem)
		return;
	char line[3 * IMS_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	v->o->problem(v->o->ctx, line);
}

/* The checks across shards, once every record was read; returns whether
 * anything is wrong. */
static int check_split(vctx *v)
{
	const rio_manifest *m = v->m;
	int problems = 0;
	for (size_t s = 0; s < m->n_shards; s++) {
		const shard_state *sr = &v->st[s];
		problems |= sr->fatal;
		if (sr->mode_bad) {
			say(v, "shard '%s': %llu of %llu records do not match the manifest's encoding '%s' (%s)",
			    m->shards[s].file, (unsigned long long)sr->mode_bad,
			    (unsigned long long)sr->checked, m->encoding, sr->mode_why);
			problems = 1;
		}
		if (m->format_version >= 2 && !sr->bad && !sr->fatal &&
		    sr->digest != m->shards[s].digest) {
			say(v, "shard '%s': digest %016llx differs from the manifest's %016llx (records replaced, reordered, relabelled or dropped, or a shard of another split)",
			    m->shards[s].file, (unsigned long long)sr->digest,
			    (unsigned long long)m->shards[s].digest);
			problems = 1;
		}
	}
	return problems;
}

/* The names are checked here rather than at load: a split whose
 * manifest holds a name pack refuses still reads and trains, but its
 * classes cannot go through a classes file again. */
static int check_names(vctx *v)
{
	ims_error e;
	if (rio_manifest_check_classes(v->m, &e) == 0)
		return 0;
	if (e.code == IMS_ENOMEM) {
		out_of_memory(v, e.msg);
		return 0;
	}
	say(v, "%s", e.msg);
	return 1;
}

static int cmp_bad(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b; /* {bad, class} */
	if (x[0] != y[0])
		return x[0] < y[0] ? 1 : -1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* The bad records by class, the classes with most first: "'cats' 15 of 15
 * (all of them), 'dogs' 1 of 40; 2 with no readable class". */
static void say_bad_classes(vctx *v)
{
	const rio_manifest *m = v->m;
	uint64_t unknown = 0;
	size_t n = 0;
	uint64_t (*by)[2] = calloc(v->nc ? v->nc : 1, sizeof(*by));
	if (!by)
		return; /* the records were named: only the summary is lost */
	for (size_t c = 0; c < v->nc; c++) {
		uint64_t t = 0;
		for (size_t s = 0; s < m->n_shards; s++)
			t += v->st[s].bad_counts[c];
		if (t) {
			by[n][0] = t;
			by[n++][1] = c;
		}
	}
	for (size_t s = 0; s < m->n_shards; s++)
		unknown += v->st[s].bad_unknown;
	qsort(by, n, sizeof(*by), cmp_bad);
	char list[2 * IMS_ERRMSG_MAX];
	size_t len = 0, shown = 0;
	for (; shown < n && shown < 8; shown++) {
		const size_t c = (size_t)by[shown][1];
		char item[IMS_ERRMSG_MAX];
		int k = snprintf(item, sizeof(item), "%s'%s' %llu of %llu%s",
				 shown ? ", " : "", m->classes[c],
				 (unsigned long long)by[shown][0],
				 (unsigned long long)m->class_counts[c],
				 by[shown][0] >= m->class_counts[c] ? " (all of them)" : "");
		if (k < 0 || (size_t)k >= sizeof(item) || len + (size_t)k >= sizeof(list))
			break;
		memcpy(list + len, item, (size_t)k + 1);
		len += (size_t)k;
	}
	if (shown < n)
		snprintf(list + len, sizeof(list) - len, "%s%zu more %s", shown ? ", and " : "",
			 n - shown, ims_plural(n - shown, "class", "classes"));
	if (n && unknown)
		say(v, "bad records by class: %s; %llu with no readable class", list,
		    (unsigned long long)unknown);
	else if (n)
		say(v, "bad records by class: %s", list);
	free(by);
}

static int check_counts(vctx *v)
{
	const rio_manifest *m = v->m;
	int problems = 0;
	for (size_t c = 0; c < v->nc; c++) {
		uint64_t t = 0;
		for (size_t s = 0; s < m->n_shards; s++)
			t += v->st[s].counts[c];
		if (t != m->class_counts[c]) {
			say(v, "class %zu ('%s') has %llu records, the manifest says %llu",
			    c, m->classes[c], (unsigned long long)t,
			    (unsigned long long)m->class_counts[c]);
			problems = 1;
		}
	}
	return problems;
}

void rio_verify_opts_init(rio_verify_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->threads = 1;
	o->max_named = DEFAULT_NAMED;
}

int rio_verify(rio_reader *r, const rio_verify_opts *opts,
	       rio_verify_result *res, uint64_t *digests, ims_error *err)
{
	RETURN_IF(!r || !opts || !res, err, IMS_EINVAL,
		  "cannot verify: no reader, options or result");
	memset(res, 0, sizeof(*res));
	const rio_manifest *m = rio_reader_manifest(r);
	size_t ns = m->n_shards, nc = m->n_classes;
	int threads = opts->threads > 0 ? opts->threads : 1;
	if ((size_t)threads > ns)
		threads = ns ? (int)ns : 1;
	vctx v = {.r = r, .m = m, .o = opts, .nc = nc,
		  .max_named = opts->max_named ? opts->max_named : DEFAULT_NAMED};
	atomic_init(&v.next, 0);
	atomic_init(&v.stop, 0);
	v.st = calloc(ns ? ns : 1, sizeof(*v.st));
	uint64_t *counts = calloc(2 * (ns ? ns : 1) * (nc ? nc : 1), sizeof(uint64_t));
	pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
	worker *ws = calloc((size_t)threads, sizeof(*ws));
	if (!v.st || !counts || !tid || !ws) {
		free(v.st);
		free(counts);
		free(tid);
		free(ws);
		return ims_fail(err, IMS_ENOMEM, "cannot verify '%s': out of memory",
				m->name ? m->name : "split");
	}
	for (size_t s = 0; s < ns; s++) {
		v.st[s].counts = counts + 2 * s * (nc ? nc : 1);
		v.st[s].bad_counts = v.st[s].counts + (nc ? nc : 1);
	}
	pthread_mutex_init(&v.mu, NULL);
	int started = 1;
	for (int t = 0; t < threads; t++)
		ws[t] = (worker){&v, t};
	for (int t = 1; t < threads; t++) {
		if (pthread_create(&tid[t], NULL, work, &ws[t]) != 0)
			break; /* fewer workers: the ones there take every shard */
		started++;
	}
	work(&ws[0]);
	for (int t = 1; t < started; t++)
		pthread_join(tid[t], NULL);
	/* shards never taken (a stop) hold nothing; those after them may */
	for (size_t s = v.next_named; s < ns; s++)
		flush_held(&v, &v.st[s]);

	int rc = 0;
	if (v.oom[0]) {
		rc = ims_fail(err, IMS_ENOMEM, "cannot verify '%s': %s", m->name ? m->name : "split",
			      v.oom);
	} else if (atomic_load(&v.stop)) {
		rc = ims_fail(err, IMS_EINTR, "verify of '%s' interrupted",
			      m->name ? m->name : "split");
	} else {
		for (size_t s = 0; s < ns; s++) {
			res->bad += v.st[s].bad;
			res->checked += v.st[s].checked;
			if (digests)
				digests[s] = v.st[s].digest;
		}
		if (v.named > v.max_named)
			say(&v, "... and %llu more bad records",
			    (unsigned long long)(v.named - v.max_named));
		if (res->bad)
			say_bad_classes(&v);
		int problems = check_split(&v);
		problems |= check_names(&v);
		if (!res->bad && !problems)
			problems = check_counts(&v);
		res->ok = !res->bad && !problems;
		res->digests_checked = m->format_version >= 2;
		if (v.oom[0]) /* the names' check ran out */
			rc = ims_fail(err, IMS_ENOMEM, "cannot verify '%s': %s",
				      m->name ? m->name : "split", v.oom);
	}
	pthread_mutex_destroy(&v.mu);
	free(ws);
	free(tid);
	free(counts);
	free(v.st);
	return rc;
}

int rio_split_strays(const char *dir, const rio_manifest *m,
		     void (*fn)(void *ctx, const char *file, rio_stray_kind kind),
		     void *ctx, ims_error *err)
{
	ims_dir_listing ls = {0};
	FORWARD_IF_ERR(ims_dir_list(dir, IMS_DIR_HIDDEN, &ls, err));
	int found = 0;
	for (size_t i = 0; i < ls.n; i++) {
		const char *f = ls.e[i].name;
		int k = rio_split_file_kind(f, m->name);
		if (k < 0)
			continue;
		int listed = 0;
		for (size_t j = 0; k == 1 && j < m->n_shards && !listed; j++)
			listed = strcmp(f, m->shards[j].file) == 0;
		if (listed)
			continue;
		found++;
		if (fn)
			fn(ctx, f, k == 1 ? RIO_STRAY_SHARD : RIO_STRAY_WORKING);
	}
	ims_dir_listing_release(&ls);
	return found;
}
