/*
 * test_loader.c - the loader (aug_loader_*) against its contract in
 * augment.h, the epoch's side: batches identical whatever the thread
 * count, deterministic from (seed, epoch), equal and disjoint rank shares,
 * shard-owning mode and its warning on unshuffled records, validation in
 * file order, an epoch continued from a global position at another world
 * size, aug_bench_run's whole epochs, and memory that runs out named with
 * the split and what needs less. What the batches hold is
 * test_loader_batches.c's, damaged records test_loader_bad.c's.
 *
 * The split, the sample dataset packed with pack_run, is built by
 * loader_test.c.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "augment/augment.h"
#include "loader_test.h"
#include "recordio/recordio.h"
#include "test.h"

/* Position of record idx in e, or -1. */
static long find_idx(const lt_epoch_out *e, uint64_t idx)
{
	for (size_t i = 0; i < e->n; i++)
		if (e->idx[i] == idx && !e->pad[i])
			return (long)i;
	return -1;
}

/* ---- tests ------------------------------------------------------------- */

static void test_threads(void)
{
	for (int train = 1; train >= 0; train--) {
		lt_epoch_out ref, e;
		aug_loader_opts o;
		lt_base_opts(&o, lt_main, train, 8, 48);
		o.threads = 1;
		lt_run_epoch(&o, 2, &ref);
		CHECK(ref.n > 0);
		int threads[2] = {2, 4};
		for (int t = 0; t < 2; t++) {
			o.threads = threads[t];
			lt_run_epoch(&o, 2, &e);
			if (!lt_same_epoch(&ref, &e))
				fprintf(stderr, "threads %d differ from 1 (train %d)\n",
					threads[t], train);
			CHECK(lt_same_epoch(&ref, &e));
			lt_epoch_free(&e);
		}
		lt_epoch_free(&ref);
	}
}

static void test_determinism(void)
{
	aug_loader_opts o;
	lt_base_opts(&o, lt_main, 1, 8, 48);
	lt_epoch_out a, b, c, d;
	lt_run_epoch(&o, 0, &a);
	lt_run_epoch(&o, 0, &b);
	CHECK(lt_same_epoch(&a, &b));
	/* An epoch given after another on the same loader is the same too. */
	uint64_t seq[2] = {5, 0};
	lt_run_epochs(&o, seq, 2, &c);
	CHECK(lt_same_epoch(&a, &c));
	lt_epoch_free(&c);

	lt_run_epoch(&o, 1, &c);
	CHECK_EQ_U64(c.n, a.n);
	CHECK(a.n > 0 && memcmp(a.idx, c.idx, a.n * sizeof(uint64_t)) != 0);
	/* The same record gets another augmentation in another epoch. */
	size_t common = 0, differ = 0;
	for (size_t i = 0; i < a.n; i++) {
		long j = find_idx(&c, a.idx[i]);
		if (j < 0)
			continue;
		common++;
		differ += memcmp(a.data + i * a.sb, c.data + (size_t)j * c.sb,
				 a.sb) != 0;
	}
	CHECK(common > 40);
	CHECK(differ >= common * 9 / 10);

	o.seed = 12;
	lt_run_epoch(&o, 0, &d);
	CHECK(a.n > 0 && memcmp(a.idx, d.idx, a.n * sizeof(uint64_t)) != 0);
	CHECK(!lt_same_epoch(&a, &d));
	lt_epoch_free(&a);
	lt_epoch_free(&b);
	lt_epoch_free(&c);
	lt_epoch_free(&d);
}

static void test_partitions(void)
{
	for (int drop = 1; drop >= 0; drop--) {
		for (int world = 1; world <= 4; world++) {
			lt_epoch_out e[4];
			uint64_t want = drop ? LT_MAIN_N / (uint64_t)world
					     : (LT_MAIN_N + (uint64_t)world - 1) / (uint64_t)world;
			for (int r = 0; r < world; r++) {
				aug_loader_opts o;
				lt_base_opts(&o, lt_main, 1, 8, 32);
				o.world = world;
				o.rank = r;
				o.drop_remainder = drop;
				o.drop_last = drop;
				lt_run_epoch(&o, 3, &e[r]);
				CHECK_EQ_U64(e[r].per_rank, want);
				CHECK_EQ_U64(e[r].per_epoch, e[0].per_epoch);
				CHECK_EQ_U64(e[r].n, e[0].n);
				CHECK_EQ_U64(e[r].per_epoch,
					     drop ? want / 8 : (want + 7) / 8);
				CHECK_EQ_U64(e[r].n, drop ? want / 8 * 8 : want);
				if (drop) {
					CHECK_EQ_U64(e[r].padded, 0);
					CHECK_EQ_U64(e[r].dropped, LT_MAIN_N % world);
				} else {
					CHECK_EQ_U64(e[r].padded,
						     want * (uint64_t)world - LT_MAIN_N);
				}
			}
			/* Each rank's order is its rio_partition share. */
			for (int r = 0; r < world; r++) {
				uint64_t share[LT_MAIN_N];
				ims_error err = {0};
				rio_partition_opts po;
				rio_partition_opts_init(&po);
				po.n = LT_MAIN_N;
				po.rank = r;
				po.world = world;
				po.epoch = 3;
				po.seed = 11;
				po.remainder = drop ? RIO_REMAINDER_DROP : RIO_REMAINDER_PAD;
				CHECK_OK(rio_partition(&po, share, NULL, &err), &err);
				CHECK(e[r].n <= want && e[r].idx &&
				      memcmp(e[r].idx, share,
					     e[r].n * sizeof(uint64_t)) == 0);
			}
			/* Non-padded samples: each record at most once (drop), or
			 * exactly once (pad); padded ones are repeats. */
			int seen[LT_MAIN_N] = {0};
			uint64_t n_pad = 0;
			int bad_idx = 0;
			for (int r = 0; r < world; r++)
				for (size_t i = 0; i < e[r].n; i++) {
					if (e[r].idx[i] >= LT_MAIN_N) {
						bad_idx = 1;
						continue;
					}
					if (e[r].pad[i])
						n_pad++;
					else
						seen[e[r].idx[i]]++;
				}
			CHECK(!bad_idx);
			int dup = 0, missing = 0;
			for (int i = 0; i < LT_MAIN_N; i++) {
				dup += seen[i] > 1;
				missing += seen[i] == 0;
			}
			CHECK_EQ_INT(dup, 0);
			if (!drop) {
				CHECK_EQ_INT(missing, 0);
				CHECK_EQ_U64(n_pad, e[0].padded);
				/* every padded sample repeats a record */
				for (int r = 0; r < world; r++)
					for (size_t i = 0; i < e[r].n; i++)
						if (e[r].pad[i] && e[r].idx[i] < LT_MAIN_N)
							CHECK(seen[e[r].idx[i]] == 1);
			} else {
				CHECK_EQ_U64(n_pad, 0);
			}
			for (int r = 0; r < world; r++)
				lt_epoch_free(&e[r]);
		}
	}

	/* A record is augmented the same whatever the world size. */
	aug_loader_opts o;
	lt_base_opts(&o, lt_main, 1, 8, 32);
	o.drop_last = 0;
	lt_epoch_out w1, w2[2];
	lt_run_epoch(&o, 4, &w1);
	size_t compared = 0, equal = 0;
	for (int r = 0; r < 2; r++) {
		o.world = 2;
		o.rank = r;
		lt_run_epoch(&o, 4, &w2[r]);
		for (size_t i = 0; i < w2[r].n; i++) {
			long j = find_idx(&w1, w2[r].idx[i]);
			if (j < 0)
				continue;
			compared++;
			equal += memcmp(w2[r].data + i * w2[r].sb,
					w1.data + (size_t)j * w1.sb, w1.sb) == 0;
		}
		lt_epoch_free(&w2[r]);
	}
	CHECK(compared >= 90);
	CHECK_EQ_U64(equal, compared);
	lt_epoch_free(&w1);
}

static void test_shard_owning(void)
{
	ims_error err = {0};
	rio_manifest m;
	memset(&m, 0, sizeof(m));
	int rc = rio_manifest_load(lt_main, &m, &err);
	CHECK_OK(rc, &err);
	if (rc)
		return;
	CHECK_EQ_U64(m.n_shards, 4);
	for (int world = 2; world <= 3; world++) {
		lt_epoch_out e[3];
		for (int r = 0; r < world; r++) {
			aug_loader_opts o;
			lt_base_opts(&o, lt_main, 1, 4, 32);
			o.world = world;
			o.rank = r;
			o.shard_owning = 1;
			lt_run_epoch(&o, 1, &e[r]);
			CHECK_EQ_U64(e[r].per_epoch, e[0].per_epoch);
			CHECK_EQ_U64(e[r].n, e[0].n);
			CHECK(e[r].n > 0);
			int outside = 0;
			for (size_t i = 0; i < e[r].n; i++) {
				int owned = 0;
				for (size_t s = 0; s < m.n_shards; s++)
					if ((int)(s % (size_t)world) == r &&
					    e[r].idx[i] >= m.shards[s].first &&
					    e[r].idx[i] < m.shards[s].first +
								   m.shards[s].records)
						owned = 1;
				outside += !owned;
			}
			if (outside)
				fprintf(stderr, "shard_owning world %d rank %d: %d "
					"samples from shards it does not own\n",
					world, r, outside);
			CHECK_EQ_INT(outside, 0);
		}
		for (int r = 0; r < world; r++)
			lt_epoch_free(&e[r]);
	}
	rio_manifest_release(&m);
}

static void count_event(void *ctx, const char *msg)
{
	CHECK(strstr(msg, "whose records are not shuffled") != NULL);
	(*(int *)ctx)++;
}

/* Events of opening rank 0 of 2 on a manifest; the loader is closed. */
static int owning_events(const char *manifest, int shard_owning)
{
	ims_error err = {0};
	int n = 0;
	aug_loader_opts o;
	lt_base_opts(&o, manifest, 1, 4, 32);
	o.world = 2;
	o.shard_owning = shard_owning;
	o.event = count_event;
	o.event_ctx = &n;
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	aug_loader_close(l);
	return n;
}

/* A copy of lt_main's manifest beside it with "shuffled" replaced. */
static void manifest_with(const char *name, const char *shuffled, char *out)
{
	uint8_t *text;
	size_t len;
	ims_error err;
	CHECK_OK(ims_read_file(lt_main, &text, &len, 0, &err), &err);
	char *p = strstr((char *)text, "\"shuffled\":\tfalse,");
	CHECK(p != NULL);
	snprintf(out, 4200, "%s/%s", lt_tmp, name);
	FILE *f = fopen(out, "w");
	CHECK(f != NULL);
	if (p && f) {
		fwrite(text, 1, (size_t)(p - (char *)text), f);
		fputs(shuffled, f);
		fputs(p + strlen("\"shuffled\":\tfalse,"), f);
	}
	if (f)
		fclose(f);
	free(text);
}

/* Shard-owning mode on records in list order (lt_main: a sorted folder
 * scan, recorded as not shuffled) warns once through the event callback;
 * on shuffled records, records of unknown order or without shard-owning
 * it does not. */
static void test_owning_warning(void)
{
	CHECK_EQ_INT(owning_events(lt_main, 1), 1);
	CHECK_EQ_INT(owning_events(lt_main, 0), 0);
	char other[4200];
	manifest_with("main_shuffled.json", "\"shuffled\":\ttrue,", other);
	CHECK_EQ_INT(owning_events(other, 1), 0);
	manifest_with("main_unknown.json", "", other);
	CHECK_EQ_INT(owning_events(other, 1), 0);
	manifest_with("main_bad.json", "\"shuffled\":\t1,", other);
	ims_error err = {0};
	aug_loader_opts o;
	lt_base_opts(&o, other, 1, 4, 32);
	aug_loader *l = NULL;
	CHECK_EQ_INT(aug_loader_open(&o, &l, &err), IMS_ECORRUPT);
	CHECK(strstr(err.msg, "\"shuffled\" is not true or false") != NULL);
}

static void test_validation(void)
{
	aug_loader_opts o;
	lt_base_opts(&o, lt_main, 0, 10, 40);
	lt_epoch_out a, b;
	lt_run_epoch(&o, 0, &a);
	lt_run_epoch(&o, 7, &b);
	CHECK(lt_same_epoch(&a, &b));
	/* file order, every record once, short last batch */
	CHECK_EQ_U64(a.n, LT_MAIN_N);
	int in_order = 1;
	for (size_t i = 0; i < a.n; i++)
		in_order &= a.idx[i] == i;
	CHECK(in_order);
	CHECK_EQ_U64(a.per_epoch, (LT_MAIN_N + 9) / 10);
	lt_epoch_free(&a);
	lt_epoch_free(&b);
}

/*
 * An epoch trained in part at one rank (24 positions: 3 batches of 8)
 * and continued from position 24 at 2 ranks of batch 4: the second part
 * takes the global order from position 24 on, so the two parts see every
 * record of the epoch at most once, and all of it but the records the
 * second part's shares drop.
 */
static void test_start_at(void)
{
	ims_error err = {0};
	aug_loader_opts o;
	lt_base_opts(&o, lt_main, 1, 8, 16);
	rio_partition_opts po;
	rio_partition_opts_init(&po);
	po.n = LT_MAIN_N;
	po.epoch = 3;
	po.seed = o.seed;
	uint64_t order[LT_MAIN_N];
	CHECK_OK(rio_partition(&po, order, NULL, &err), &err);
	int seen[LT_MAIN_N] = {0};
	aug_loader *l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_OK(aug_loader_start_epoch(l, 3, &err), &err);
	aug_batch b;
	for (int k = 0; k < 3; k++) {
		CHECK_OK(aug_loader_next(l, &b, &err), &err);
		for (int j = 0; j < b.count; j++)
			seen[b.indices[j]]++;
	}
	aug_loader_close(l);
	uint64_t second = 0;
	for (int rank = 0; rank < 2; rank++) {
		aug_loader_opts o2 = o;
		o2.rank = rank;
		o2.world = 2;
		o2.batch_size = 4;
		l = NULL;
		CHECK_OK(aug_loader_open(&o2, &l, &err), &err);
		if (!l)
			return;
		/* (97 - 24) / 2 = 36 records per rank: 9 batches of 4 */
		CHECK_EQ_U64(aug_loader_batches_at(l, 24), 9);
		CHECK_EQ_U64(aug_loader_batches_at(l, 0), aug_loader_batches_per_epoch(l));
		CHECK_EQ_U64(aug_loader_batches_at(l, 95), 0);
		CHECK_OK(aug_loader_start_epoch_at(l, 3, 24, &err), &err);
		uint64_t k = 0;
		while (aug_loader_next(l, &b, &err) == 0) {
			CHECK_EQ_U64(b.epoch, 3);
			for (int j = 0; j < b.count; j++, k++) {
				CHECK_EQ_U64(b.indices[j], order[24 + (uint64_t)rank + 2 * k]);
				seen[b.indices[j]]++;
				second++;
			}
		}
		/* nothing left from position 96: the epoch is over at once */
		CHECK_OK(aug_loader_start_epoch_at(l, 3, 96, &err), &err);
		CHECK_EQ_INT(aug_loader_next(l, &b, &err), 1);
		aug_loader_close(l);
	}
	CHECK_EQ_U64(second, 72);
	int twice = 0, missed = 0;
	for (int i = 0; i < LT_MAIN_N; i++) {
		twice += seen[i] > 1;
		missed += seen[i] == 0;
	}
	CHECK_EQ_INT(twice, 0);
	CHECK_EQ_INT(missed, LT_MAIN_N - 24 - 72); /* the last record of the order */
	CHECK_EQ_INT(seen[order[LT_MAIN_N - 1]], 0);

	/* shard-owning: each rank continues in its own records */
	lt_base_opts(&o, lt_main, 1, 4, 16);
	o.world = 2;
	o.shard_owning = 1;
	l = NULL;
	CHECK_OK(aug_loader_open(&o, &l, &err), &err);
	if (!l)
		return;
	CHECK_EQ_INT(aug_loader_start_epoch_at(l, 0, 3, &err), IMS_EINVAL);
	CHECK(strstr(err.msg, "not a multiple of the 2 ranks") != NULL);
	uint64_t all = aug_loader_batches_per_epoch(l);
	CHECK_EQ_U64(aug_loader_batches_at(l, 16), all - 2);
	aug_loader_close(l);
}

static int count_batch(void *ctx, const aug_batch *b, ims_error *err)
{
	(void)err;
	uint64_t *seen = ctx;
	*seen += (uint64_t)b->count;
	return 0;
}

/* on_batch that asks the run to stop (ctx: the cancel flag) */
static int cancel_now(void *ctx, const aug_batch *b, ims_error *err)
{
	(void)b;
	(void)err;
	*(volatile int *)ctx = 1;
	return 0;
}

/* aug_bench_run: one whole epoch is every batch of the epoch; the limits
 * are checked; a failing callback stops the run with its code; a stop
 * asked for stops it where it is. */
static void test_bench_run(void)
{
	ims_error err = {0};
	aug_bench_opts bo;
	aug_bench_opts_init(&bo);
	lt_base_opts(&bo.loader, lt_main, 1, 8, 32);
	bo.epochs = 2;
	bo.seconds = 0;
	uint64_t seen = 0;
	bo.on_batch = count_batch;
	bo.ctx = &seen;
	aug_bench_result r;
	CHECK_OK(aug_bench_run(&bo, &r, &err), &err);
	CHECK_EQ_U64(r.batches_per_epoch, LT_MAIN_N / 8);
	CHECK_EQ_U64(r.batches, 2 * (LT_MAIN_N / 8));
	CHECK_EQ_U64(r.images, 2 * (LT_MAIN_N / 8) * 8);
	CHECK_EQ_U64(seen, r.images);
	CHECK_EQ_U64(r.epochs_done, 2);
	CHECK_EQ_INT(r.threads, 2);
	CHECK(r.images_per_s > 0 && r.interrupted == 0);
	bo.epochs = 0;
	CHECK_EQ_INT(aug_bench_run(&bo, &r, &err), IMS_EINVAL);
	/* asked for before the first batch: none is taken (before, the wait
	 * for a batch did not look at it, and one was) */
	volatile int cancel = 1;
	bo.epochs = 1;
	bo.cancel = &cancel;
	bo.on_batch = NULL;
	CHECK_OK(aug_bench_run(&bo, &r, &err), &err);
	CHECK(r.interrupted && r.batches == 0);
	/* asked for while the first batch is handled: that batch alone */
	cancel = 0;
	bo.on_batch = cancel_now;
	bo.ctx = (void *)&cancel;
	CHECK_OK(aug_bench_run(&bo, &r, &err), &err);
	CHECK(r.interrupted && r.batches == 1);
}

/* ---- out of memory ------------------------------------------------------ */

#define OOM_N 100000 /* records: the per-record arrays are 800 KB each */

/* A split of OOM_N raw 1x1 records in two shards at dir/many.json. */
static void write_many(const char *dir, char *manifest, size_t len)
{
	rio_writer_opts wo = {0};
	wo.dir = dir;
	wo.name = "many";
	rio_writer *w;
	ims_error err;
	int rc = rio_writer_open(&wo, &w, &err);
	const uint8_t px[3] = {10, 20, 30};
	for (int i = 0; rc == 0 && i < OOM_N; i++) {
		if (i == OOM_N / 2)
			rc = rio_writer_new_shard(w, &err);
		rio_record rec = {0};
		rec.encoding = RIO_ENC_RAW;
		rec.channels = 3;
		rec.orientation = 1;
		rec.width = rec.height = rec.orig_width = rec.orig_height = 1;
		rec.payload = px;
		rec.payload_len = sizeof(px);
		rec.payload_crc = ims_crc32c(0, px, sizeof(px));
		if (rc == 0)
			rc = rio_writer_add(w, &rec, &err);
	}
	static const char *const classes[] = {"c"};
	rio_writer_meta m = {0};
	m.encoding = "raw";
	m.classes = classes;
	m.n_classes = 1;
	char *path = NULL;
	if (rc == 0)
		rc = rio_writer_finish(w, &m, &path, &err);
	if (rc < 0) {
		fprintf(stderr, "cannot write the split of %d records: %s\n", OOM_N, err.msg);
		exit(1);
	}
	snprintf(manifest, len, "%s", path);
	free(path);
}

/* This program run again as "--oom-child MANIFEST HEADROOM": opens the
 * split and starts an epoch in shard-owning mode under an address-space
 * limit HEADROOM bytes above what it has mapped, and writes "RC MESSAGE"
 * to stdout. A fresh process, not a fork: a fork's heap and cached thread
 * stacks, left by the tests before, would serve what the limit is there
 * to refuse. */
static int oom_child(const char *manifest, uint64_t headroom)
{
	/* every large allocation mapped anew, none served from the heap */
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	unsigned long long kb = 0;
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	struct rlimit lim;
	getrlimit(RLIMIT_AS, &lim);
	lim.rlim_cur = kb * 1024 + headroom;
	setrlimit(RLIMIT_AS, &lim);
	aug_loader_opts o;
	lt_base_opts(&o, manifest, 1, 1, 8);
	o.threads = 1;
	o.prefetch = 1;
	o.shard_owning = 1;
	aug_loader *l = NULL;
	ims_error err = {0};
	int rc = aug_loader_open(&o, &l, &err);
	if (rc == 0)
		rc = aug_loader_start_epoch(l, 0, &err);
	aug_loader_close(l);
	printf("%d %s", rc, rc ? err.msg : "");
	return 0;
}

/*
 * Memory that runs out while the loader is opened or an epoch started is
 * named: each message that says "out of memory" names the split and what
 * could not be allocated (before: a bare "out of memory" for the rank's
 * share, shard-owning mode's records and the epoch's order). Each
 * allocation is met by raising the limit 128 KB at a time, each in a
 * process of its own, until the epoch starts; the per-record arrays (800 KB) cannot
 * be stepped over.
 */
static void test_out_of_memory(const char *self)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return; /* a sanitizer's allocator aborts where malloc returns NULL */
#endif
	char manifest[4200];
	write_many(lt_tmp, manifest, sizeof(manifest));
	int started = 0, named = 0, unnamed = 0, records = 0;
	char first_unnamed[IMS_ERRMSG_MAX + 16] = "";
	for (uint64_t headroom = 0; !started && headroom < (256u << 20);
	     headroom += 128 * 1024) {
		int p[2];
		CHECK(pipe(p) == 0);
		pid_t pid = fork();
		if (pid == 0) {
			char room[32];
			snprintf(room, sizeof(room), "%llu", (unsigned long long)headroom);
			dup2(p[1], 1);
			close(p[0]);
			close(p[1]);
			execl("/proc/self/exe", self, "--oom-child", manifest, room, (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		char got[IMS_ERRMSG_MAX + 16] = "";
		size_t n = 0;
		for (ssize_t r; (r = read(p[0], got + n, sizeof(got) - 1 - n)) > 0;)
			n += (size_t)r;
		got[n] = 0;
		close(p[0]);
		int status = 0;
		waitpid(pid, &status, 0);
		if (!WIFEXITED(status) || n == 0)
			continue; /* killed outside the loader: nothing to read */
		started = atoi(got) == 0;
		if (!strstr(got, "out of memory"))
			continue;
		if (strstr(got, manifest)) {
			named++;
			records += strstr(got, " records") != NULL;
		} else if (!unnamed++) {
			snprintf(first_unnamed, sizeof(first_unnamed), "%s", got);
		}
	}
	CHECK(started);
	CHECK(named > 0);
	CHECK(records > 0); /* the per-record arrays were met */
	CHECK_EQ_INT(unnamed, 0);
	if (unnamed)
		fprintf(stderr, "  first message without the split: %s\n", first_unnamed);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--oom-child") == 0)
		return oom_child(argv[2], strtoull(argv[3], NULL, 10));
	lt_setup("loader", LT_SPLIT_MAIN);
	test_threads();
	test_determinism();
	test_partitions();
	test_shard_owning();
	test_owning_warning();
	test_validation();
	test_start_at();
	test_bench_run();
	test_out_of_memory(argv[0]);
	return test_tmp_done(lt_tmp, TEST_EXIT());
}
