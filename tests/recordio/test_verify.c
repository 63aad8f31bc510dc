/* test_verify.c - rio_verify, the check behind `imshard verify` and
 * Split.verify: a good split passes with the manifest's digests, a
 * caller's check marks records bad and each is named once, the same
 * lines in the same order whatever the thread count, the naming limit,
 * progress stopping the check, the bad records counted by class, and a
 * manifest whose class names or extra_labels are not what pack writes. */
#include <pthread.h>
#include <time.h>

#include "rio_test_util.h"
#include "test.h"

#define MAX_LINES 64

typedef struct seen {
	char lines[MAX_LINES][3 * IMS_ERRMSG_MAX];
	int n;
	uint64_t last_done, calls;
	int stop_at;       /* progress call that returns nonzero; 0: never */
	int workers_seen;  /* bit per worker number the check saw */
	int slow_first;    /* the check of record 7 (shard 0) takes 300 ms */
	pthread_mutex_t mu;
	const rio_manifest *m;
} seen;

static void on_problem(void *ctx, const char *line)
{
	seen *s = ctx;
	if (s->n < MAX_LINES)
		snprintf(s->lines[s->n++], sizeof(s->lines[0]), "%s", line);
}

static int on_progress(void *ctx, uint64_t done)
{
	seen *s = ctx;
	CHECK(done > s->last_done); /* calls never overlap: done only grows */
	s->last_done = done;
	return ++s->calls == (uint64_t)s->stop_at;
}

/* Marks records 7 and 250 bad, and checks each record arrives whole. */
static int check_two(void *ctx, int worker, uint64_t i, const rio_record *rec,
		     ims_error *e)
{
	seen *s = ctx;
	pthread_mutex_lock(&s->mu);
	s->workers_seen |= 1 << worker;
	pthread_mutex_unlock(&s->mu);
	if (rec->payload_len != payload_len_for(i) ||
	    rec->label != (int32_t)(i % 3))
		return ims_fail(e, IMS_ECORRUPT, "record %llu: not the record written",
				(unsigned long long)i);
	if (i == 7 && s->slow_first) {
		/* the later shards finish first */
		struct timespec ts = {0, 300 * 1000000L};
		nanosleep(&ts, NULL);
	}
	if (i == 7 || i == 250)
		return ims_fail(e, IMS_ECORRUPT, "record %llu: rejected by the check",
				(unsigned long long)i);
	return 0;
}

static int run(rio_reader *r, int threads, seen *s, rio_verify_result *res,
	       uint64_t *digests, unsigned max_named, int with_check)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	int stop_at = s->stop_at, slow_first = s->slow_first;
	memset(s, 0, sizeof(*s));
	s->mu = mu;
	s->stop_at = stop_at;
	s->slow_first = slow_first;
	rio_verify_opts o;
	rio_verify_opts_init(&o);
	CHECK_EQ_INT(o.threads, 1);
	CHECK_EQ_INT(o.max_named, 100);
	o.threads = threads;
	o.max_named = max_named;
	o.check = with_check ? check_two : NULL;
	o.problem = on_problem;
	o.progress = on_progress;
	o.ctx = s;
	ims_error e;
	int rc = rio_verify(r, &o, res, digests, &e);
	if (rc == IMS_EINTR)
		CHECK(strstr(e.msg, "interrupted") != NULL);
	return rc;
}

int main(void)
{
	char dir[4096], manifest[4200];
	test_tmpdir(dir, sizeof(dir), "verify");
	rio_test_write_split(dir, 300, 400 << 10);
	snprintf(manifest, sizeof(manifest), "%s/s.json", dir);
	ims_error e;
	rio_reader *r;
	CHECK_OK(rio_reader_open(manifest, &r, &e), &e);
	const rio_manifest *m = rio_reader_manifest(r);
	CHECK(m->n_shards >= 3);
	static seen s;
	rio_verify_result res;
	uint64_t digests[64];

	/* a good split: every record, the manifest's own digests */
	for (int threads = 1; threads <= 4; threads += 3) {
		memset(digests, 0, sizeof(digests));
		CHECK_EQ_INT(run(r, threads, &s, &res, digests, 0, 0), 0);
		CHECK(res.ok);
		CHECK(res.digests_checked);
		CHECK_EQ_U64(res.checked, 300);
		CHECK_EQ_U64(res.bad, 0);
		CHECK_EQ_INT(s.n, 0);
		CHECK_EQ_U64(s.last_done, 300);
		for (size_t k = 0; k < m->n_shards && k < 64; k++)
			CHECK_EQ_U64(digests[k], m->shards[k].digest);
	}

	/* the caller's check: two bad records, each named once, then by
	 * class (both are class 1: i % 3); the class counts are not judged
	 * while records are bad */
	CHECK_EQ_INT(run(r, 1, &s, &res, NULL, 0, 1), 0);
	CHECK(!res.ok);
	CHECK_EQ_U64(res.checked, 300);
	CHECK_EQ_U64(res.bad, 2);
	CHECK_EQ_INT(s.n, 3);
	CHECK_EQ_STR(s.lines[0], "record 7: rejected by the check");
	CHECK_EQ_STR(s.lines[1], "record 250: rejected by the check");
	CHECK_EQ_STR(s.lines[2], "bad records by class: 'b' 2 of 100");
	CHECK_EQ_INT(s.workers_seen, 1);
	/* several threads, shard 0 slowest: the same lines in the same
	 * order, and the first of them named under a limit of one (before,
	 * in the order the shards finished: record 250 first, and named) */
	s.slow_first = 1;
	CHECK_EQ_INT(run(r, 3, &s, &res, NULL, 0, 1), 0);
	CHECK_EQ_U64(res.bad, 2);
	CHECK_EQ_INT(s.n, 3);
	CHECK_EQ_STR(s.lines[0], "record 7: rejected by the check");
	CHECK_EQ_STR(s.lines[1], "record 250: rejected by the check");
	CHECK_EQ_STR(s.lines[2], "bad records by class: 'b' 2 of 100");
	CHECK(s.workers_seen != 0 && (s.workers_seen & ~7) == 0);
	CHECK_EQ_INT(run(r, 3, &s, &res, NULL, 1, 1), 0);
	CHECK_EQ_INT(s.n, 3);
	CHECK_EQ_STR(s.lines[0], "record 7: rejected by the check");
	CHECK_EQ_STR(s.lines[1], "... and 1 more bad records");
	s.slow_first = 0;
	/* one named, the other counted */
	CHECK_EQ_INT(run(r, 1, &s, &res, NULL, 1, 1), 0);
	CHECK_EQ_U64(res.bad, 2);
	CHECK_EQ_INT(s.n, 3);
	CHECK_EQ_STR(s.lines[0], "record 7: rejected by the check");
	CHECK_EQ_STR(s.lines[1], "... and 1 more bad records");
	CHECK_EQ_STR(s.lines[2], "bad records by class: 'b' 2 of 100");

	/* progress stops it after the first shard (record 7 named, 250 never
	 * reached): IMS_EINTR, nothing judged */
	CHECK(m->shards[0].records > 7 && m->shards[0].records < 250);
	s.stop_at = 1;
	CHECK_EQ_INT(run(r, 1, &s, &res, NULL, 0, 1), IMS_EINTR);
	CHECK_EQ_U64(s.calls, 1);
	CHECK(!res.ok);
	CHECK_EQ_INT(s.n, 1);
	CHECK_EQ_STR(s.lines[0], "record 7: rejected by the check");
	s.stop_at = 0;

	/* The manifest's class names and extra_labels are held to what pack
	 * writes: a repeated name is one problem (no record is bad), a
	 * record count of extra labels that differs makes each record bad. */
	rio_reader_close(r);
	edit_manifest(manifest, "[\"a\", \"b\", \"c\"]", "[\"a\", \"b\", \"a\"]");
	CHECK_OK(rio_reader_open(manifest, &r, &e), &e);
	CHECK_EQ_INT(run(r, 2, &s, &res, NULL, 0, 0), 0);
	CHECK(!res.ok);
	CHECK_EQ_U64(res.bad, 0);
	CHECK_EQ_INT(s.n, 1);
	CHECK_EQ_STR(s.lines[0], "class 2 ('a') has the name of class 0: pack refuses repeated class names");
	rio_reader_close(r);
	edit_manifest(manifest, "[\"a\", \"b\", \"a\"]", "[\"a\", \"b\", \"c\"]");
	edit_manifest(manifest, "\"extra_labels\":\t0", "\"extra_labels\":\t3");
	CHECK_OK(rio_reader_open(manifest, &r, &e), &e);
	CHECK_EQ_INT(run(r, 1, &s, &res, NULL, 2, 0), 0);
	CHECK(!res.ok);
	CHECK_EQ_U64(res.bad, 300);
	CHECK_EQ_INT(s.n, 3); /* no header gives a class: no class line */
	char want[sizeof(dir) + 256];
	snprintf(want, sizeof(want), "record 0 in shard '%s/%s': 0 extra labels, the manifest's \"extra_labels\" is 3",
		 dir, rio_reader_manifest(r)->shards[0].file);
	CHECK_EQ_STR(s.lines[0], want);
	CHECK_EQ_STR(s.lines[2], "... and 298 more bad records");
	edit_manifest(manifest, "\"extra_labels\":\t3", "\"extra_labels\":\t0");

	rio_verify_result none;
	CHECK_EQ_INT(rio_verify(NULL, NULL, &none, NULL, &e), IMS_EINVAL);
	rio_reader_close(r);
	return test_tmp_done(dir, TEST_EXIT());
}
