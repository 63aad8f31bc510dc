/* test_writer.c - writer/reader round trip, map growth, shard rolling,
 * atomic publication, interrupted runs and replacement. */
#include <lmdb.h>
#include <signal.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "rio_test_util.h"
#include "test.h"

static const char *names[] = {"cat", "dog", "eel", "fox", "gnu"};

/* rio_writer_shards as write_split's writer said just before finishing */
static size_t shards_said;

static int write_split(const char *dir, const char *name, uint64_t n,
		       uint64_t shard_bytes, int force, uint64_t map,
		       ims_error *e)
{
	rio_writer_opts o = {0};
	o.dir = dir;
	o.name = name;
	o.shard_bytes = shard_bytes;
	o.force = force;
	o.initial_map_size = map;
	o.txn_bytes = 64 << 10;
	rio_writer *w;
	int rc = rio_writer_open(&o, &w, e);
	if (rc)
		return rc;
	static uint8_t buf[10000];
	for (uint64_t i = 0; i < n; i++) {
		rio_record r;
		make_record(&r, i, buf, 5);
		rc = rio_writer_add(w, &r, e);
		if (rc) {
			rio_writer_abort(w);
			return rc;
		}
	}
	rio_writer_meta m = {0};
	m.encoding = "keep";
	m.classes = names;
	m.n_classes = 5;
	shards_said = rio_writer_shards(w);
	return rio_writer_finish(w, &m, NULL, e);
}

/* Creates an empty file dir/name. */
static void touch_file(const char *dir, const char *name)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	if (f)
		fclose(f);
}

/* Reads every record back and compares bytes and fields. */
static void check_split(const char *dir, const char *name, uint64_t n)
{
	ims_error e;
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.json", dir, name);
	rio_reader *r;
	CHECK_OK(rio_reader_open(path, &r, &e), &e);
	if (!r)
		return;
	CHECK_EQ_U64(rio_reader_count(r), n);
	const rio_manifest *m = rio_reader_manifest(r);
	CHECK_EQ_INT(m->n_classes, 5);
	uint64_t counts[5] = {0};
	for (uint64_t i = 0; i < n; i++)
		counts[i % 5]++;
	for (int c = 0; c < 5; c++)
		CHECK_EQ_U64(m->class_counts[c], counts[c]);
	rio_cursor *c;
	CHECK_OK(rio_cursor_open(r, RIO_CHECK_PAYLOAD_CRC, &c, &e), &e);
	static uint8_t want[10000];
	int bad = 0;
	for (uint64_t i = 0; i < n; i++) {
		rio_record rec, ref;
		if (rio_cursor_get(c, i, &rec, &e) != 0) {
			fprintf(stderr, "get %llu: %s\n", (unsigned long long)i, e.msg);
			bad++;
			continue;
		}
		make_record(&ref, i, want, 5);
		bad += rec.payload_len != ref.payload_len ||
		       memcmp(rec.payload, want, ref.payload_len) != 0 ||
		       rec.label != ref.label || rec.width != ref.width ||
		       rec.orig_height != ref.orig_height;
	}
	CHECK_EQ_INT(bad, 0);
	/* Random access, backwards. */
	for (uint64_t i = n; i-- > 0;) {
		rio_record rec;
		if (i % 7)
			continue;
		CHECK_OK(rio_cursor_get(c, i, &rec, &e), &e);
		CHECK_EQ_INT(rec.payload_len, payload_len_for(i));
	}
	rio_record rec;
	CHECK_EQ_INT(rio_cursor_get(c, n, &rec, &e), IMS_EINVAL);
	rio_cursor_close(c);
	rio_reader_close(r);
}

/* Every finished shard is compact: at most 1% of its pages are free.
 * Returns the shards the manifest lists. */
static size_t check_compact(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.json", dir, name);
	rio_manifest m;
	ims_error e;
	CHECK_OK(rio_manifest_load(path, &m, &e), &e);
	for (size_t i = 0; i < m.n_shards; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, m.shards[i].file);
		MDB_env *env;
		MDB_txn *txn;
		MDB_cursor *cur;
		MDB_val k, v;
		MDB_envinfo info;
		CHECK_EQ_INT(mdb_env_create(&env), 0);
		CHECK_EQ_INT(mdb_env_open(env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NOSUBDIR, 0), 0);
		CHECK_EQ_INT(mdb_env_info(env, &info), 0);
		CHECK_EQ_INT(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
		CHECK_EQ_INT(mdb_cursor_open(txn, 0, &cur), 0);
		size_t nfree = 0;
		while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0)
			nfree += *(const size_t *)v.mv_data;
		CHECK(nfree * 100 <= info.me_last_pgno + 1);
		struct stat st;
		MDB_stat ms;
		CHECK_EQ_INT(mdb_env_stat(env, &ms), 0);
		CHECK(stat(path, &st) == 0 &&
		      (size_t)st.st_size == (info.me_last_pgno + 1) * ms.ms_psize);
		mdb_cursor_close(cur);
		mdb_txn_abort(txn);
		mdb_env_close(env);
	}
	size_t n = m.n_shards;
	rio_manifest_release(&m);
	return n;
}

static int count_files(const char *dir, const char *suffix)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "ls -1 '%s' | grep -c -- '%s$' > '%s/.count'", dir,
		 suffix, dir);
	if (system(cmd) < 0)
		return -1;
	char p[4200];
	snprintf(p, sizeof(p), "%s/.count", dir);
	FILE *f = fopen(p, "r");
	int n = -1;
	if (f) {
		if (fscanf(f, "%d", &n) != 1)
			n = -1;
		fclose(f);
	}
	unlink(p);
	return n;
}

int main(void)
{
	ims_error e;
	char dir[4096];
	test_tmpdir(dir, sizeof(dir), "writer");

	/* One shard, default settings. */
	CHECK_OK(write_split(dir, "one", 500, 0, 0, 0, &e), &e);
	CHECK(file_exists(dir, "one.json"));
	CHECK(file_exists(dir, "one-00000-of-00001.mdb"));
	CHECK(!file_exists(dir, "one.lock"));
	CHECK(!file_exists(dir, "one-00000-of-00001.mdb-lock"));
	check_split(dir, "one", 500);
	CHECK_EQ_U64(check_compact(dir, "one"), 1);
	CHECK_EQ_U64(shards_said, 1);

	/* Many shards by size, and a tiny initial map that must grow many
	 * times (64 KiB map, ~2 MiB of records). */
	CHECK_OK(write_split(dir, "many", 600, 512 << 10, 0, 64 << 10, &e), &e);
	int shards = count_files(dir, "-of-0000[0-9].mdb");
	CHECK(shards >= 4 && shards <= 9);
	check_split(dir, "many", 600);
	/* what the writer said it would publish, before the manifest */
	CHECK(shards_said >= 4);
	CHECK_EQ_U64(check_compact(dir, "many"), shards_said);
	/* 64 KiB transactions free pages often enough that these shards
	 * take the compacting copy. */
	check_compact(dir, "many");
	{
		char path[4200];
		snprintf(path, sizeof(path), "%s/many.json", dir);
		rio_manifest m;
		CHECK_OK(rio_manifest_load(path, &m, &e), &e);
		uint64_t total = 0;
		for (size_t i = 0; i < m.n_shards; i++) {
			/* Size limit respected (one record may exceed it alone). */
			CHECK(m.shards[i].records > 0);
			total += m.shards[i].records;
		}
		CHECK_EQ_U64(total, 600);
		rio_manifest_release(&m);
	}

	/* No records: one empty shard, as said before finishing. */
	CHECK_OK(write_split(dir, "none", 0, 0, 0, 0, &e), &e);
	CHECK_EQ_U64(shards_said, 1);
	CHECK_EQ_U64(check_compact(dir, "none"), 1);

	/* An existing split is refused without force. */
	CHECK_EQ_INT(write_split(dir, "one", 10, 0, 0, 0, &e), IMS_EEXIST);
	CHECK(strstr(e.msg, "--force") != NULL);
	check_split(dir, "one", 500);

	/* Replacing a 5-shard split with a 1-shard one removes the surplus. */
	CHECK_OK(write_split(dir, "rep", 300, 256 << 10, 0, 0, &e), &e);
	CHECK(file_exists(dir, "rep-00002-of-00005.mdb") ||
	      file_exists(dir, "rep-00002-of-00004.mdb") ||
	      file_exists(dir, "rep-00002-of-00006.mdb"));
	CHECK_OK(write_split(dir, "rep", 40, 0, 1, 0, &e), &e);
	CHECK(file_exists(dir, "rep-00000-of-00001.mdb"));
	CHECK(!file_exists(dir, "rep-00002-of-00005.mdb"));
	CHECK(!file_exists(dir, "rep-00002-of-00004.mdb"));
	check_split(dir, "rep", 40);

	/* A second writer on the same split is refused while one holds it. */
	{
		rio_writer_opts o = {0};
		o.dir = dir;
		o.name = "busy";
		rio_writer *w1, *w2;
		CHECK_OK(rio_writer_open(&o, &w1, &e), &e);
		CHECK_EQ_INT(rio_writer_open(&o, &w2, &e), IMS_EEXIST);
		CHECK(strstr(e.msg, "another process") != NULL);
		rio_writer_abort(w1);
		CHECK(!file_exists(dir, "busy.json"));
		CHECK(!file_exists(dir, "busy-00000.mdb.partial"));
	}

	/* A writer killed mid-run leaves no manifest; the next run cleans up
	 * and publishes a complete split. */
	{
		pid_t pid = fork();
		if (pid == 0) {
			rio_writer_opts o = {0};
			o.dir = dir;
			o.name = "killed";
			o.shard_bytes = 128 << 10;
			o.txn_bytes = 16 << 10;
			rio_writer *w;
			if (rio_writer_open(&o, &w, NULL))
				_exit(3);
			static uint8_t buf[10000];
			for (uint64_t i = 0; i < 200; i++) {
				rio_record r;
				make_record(&r, i, buf, 5);
				if (rio_writer_add(w, &r, NULL))
					_exit(4);
			}
			raise(SIGKILL);
			_exit(5);
		}
		int st;
		waitpid(pid, &st, 0);
		CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		CHECK(!file_exists(dir, "killed.json"));
		CHECK(count_files(dir, ".mdb.partial") + count_files(dir, ".mdb.compact") > 0);
		/* Pretend a crash happened after the final renames too. */
		char p[4200];
		snprintf(p, sizeof(p), "%s/killed-00007-of-00009.mdb", dir);
		FILE *f = fopen(p, "w");
		if (f)
			fclose(f);
		CHECK_OK(write_split(dir, "killed", 200, 128 << 10, 0, 0, &e), &e);
		CHECK(!file_exists(dir, "killed-00007-of-00009.mdb"));
		CHECK_EQ_INT(count_files(dir, ".mdb.partial"), 0);
		CHECK_EQ_INT(count_files(dir, ".mdb.compact"), 0);
		check_split(dir, "killed", 200);
	}

	/* Working shards of an earlier run are removed by the next writer of
	 * the name, whatever their index (a rerun that writes fewer shards
	 * does not overwrite them), with or without a manifest; files that
	 * only look like them stay. */
	{
		static const char *const stale[] = {"left-00004.mdb.partial",
						    "left-00002.mdb.compact"};
		static const char *const decoys[] = {
			"left-0004.mdb.partial", "left-000004.mdb.partial",
			"left-00004.mdb.partial.bak", "left-0000x.mdb.compact",
			"left-x-00004.mdb.partial", "other-00004.mdb.partial",
			"left-00004.mdb"};
		for (int pass = 0; pass < 2; pass++) {
			for (size_t i = 0; i < 2; i++)
				touch_file(dir, stale[i]);
			for (size_t i = 0; i < sizeof(decoys) / sizeof(decoys[0]); i++)
				touch_file(dir, decoys[i]);
			/* pass 0: no manifest, no force; 1: replacing one */
			CHECK_OK(write_split(dir, "left", 10, 0, pass, 0, &e), &e);
			for (size_t i = 0; i < 2; i++)
				CHECK(!file_exists(dir, stale[i]));
			for (size_t i = 0; i < sizeof(decoys) / sizeof(decoys[0]); i++)
				CHECK(file_exists(dir, decoys[i]));
			check_split(dir, "left", 10);
		}
		/* Refused (the split exists, no force): nothing is touched. */
		touch_file(dir, stale[0]);
		CHECK_EQ_INT(write_split(dir, "left", 10, 0, 0, 0, &e), IMS_EEXIST);
		CHECK(file_exists(dir, stale[0]));
	}

	/* Split names readers refuse are refused before anything is made. */
	{
		static const char *const bad[] = {".", "..", "", "a/b"};
		char sub[4200];
		snprintf(sub, sizeof(sub), "%s/dots", dir);
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			CHECK(!rio_split_name_ok(bad[i]));
			CHECK_EQ_INT(write_split(sub, bad[i], 3, 0, 0, 0, &e), IMS_EINVAL);
			rio_lock *l = NULL;
			CHECK_EQ_INT(rio_lock_take(sub, bad[i], &l, &e), IMS_EINVAL);
			rio_lock_release(l);
		}
		CHECK(!file_exists(dir, "dots"));
		CHECK(rio_split_name_ok(".x") && rio_split_name_ok("train"));
	}

	/* A label without a class name is refused at finish, leaving nothing. */
	{
		rio_writer_opts o = {0};
		o.dir = dir;
		o.name = "labels";
		rio_writer *w;
		CHECK_OK(rio_writer_open(&o, &w, &e), &e);
		static uint8_t buf[10000];
		rio_record r;
		make_record(&r, 4, buf, 5);
		CHECK_OK(rio_writer_add(w, &r, &e), &e);
		rio_writer_meta m = {0};
		m.classes = names;
		m.n_classes = 3;
		CHECK_EQ_INT(rio_writer_finish(w, &m, NULL, &e), IMS_EINVAL);
		CHECK(!file_exists(dir, "labels.json"));
		CHECK_EQ_INT(count_files(dir, "labels-0000.*"), 0);
	}

	/* Mixed extra-label counts are refused. */
	{
		rio_writer_opts o = {0};
		o.dir = dir;
		o.name = "extra";
		rio_writer *w;
		CHECK_OK(rio_writer_open(&o, &w, &e), &e);
		static uint8_t buf[10000];
		rio_record r;
		make_record(&r, 1, buf, 5);
		r.n_extra = 2;
		r.extra[0] = 1.5f;
		r.extra[1] = 2.5f;
		CHECK_OK(rio_writer_add(w, &r, &e), &e);
		r.n_extra = 1;
		CHECK_EQ_INT(rio_writer_add(w, &r, &e), IMS_EINVAL);
		rio_writer_abort(w);
	}

	/* A writer that fails or is abandoned leaves nothing behind: not
	 * its shards, not its lock, not the folders it made. A folder that
	 * was there before stays. */
	{
		char nested[4200], top[4200];
		snprintf(top, sizeof(top), "%s/made", dir);
		snprintf(nested, sizeof(nested), "%s/made/deeper/still", dir);
		rio_writer_opts o = {0};
		o.dir = nested;
		o.name = "gone";
		o.shard_bytes = 4096;
		rio_writer *w;
		CHECK_OK(rio_writer_open(&o, &w, &e), &e);
		static uint8_t buf[10000];
		for (uint64_t i = 0; i < 20; i++) {
			rio_record r;
			make_record(&r, i, buf, 5);
			CHECK_OK(rio_writer_add(w, &r, &e), &e);
		}
		rio_writer_abort(w);
		struct stat st;
		CHECK(stat(top, &st) != 0 && errno == ENOENT);
		CHECK(stat(dir, &st) == 0);

		/* Something else put in a made folder meanwhile is kept, and
		 * so is the folder holding it. */
		CHECK_OK(rio_writer_open(&o, &w, &e), &e);
		char other[4300];
		snprintf(other, sizeof(other), "%s/made/deeper/note.txt", dir);
		FILE *f = fopen(other, "w");
		CHECK(f != NULL);
		if (f)
			fclose(f);
		rio_writer_abort(w);
		snprintf(other, sizeof(other), "%s/made/deeper/still", dir);
		CHECK(stat(other, &st) != 0 && errno == ENOENT);
		snprintf(other, sizeof(other), "%s/made/deeper/note.txt", dir);
		CHECK(stat(other, &st) == 0);
	}

	/* An empty split is valid: one empty shard. */
	CHECK_OK(write_split(dir, "empty", 0, 0, 0, 0, &e), &e);
	check_split(dir, "empty", 0);

	/* A missing folder is created; an unwritable one is an error. */
	{
		char sub[4200];
		snprintf(sub, sizeof(sub), "%s/new/deeper", dir);
		CHECK_OK(write_split(sub, "s", 3, 0, 0, 0, &e), &e);
		if (geteuid() != 0) {
			char ro[4200];
			snprintf(ro, sizeof(ro), "%s/ro", dir);
			mkdir(ro, 0555);
			CHECK(write_split(ro, "s", 3, 0, 0, 0, &e) < 0);
		}
	}
	return test_tmp_done(dir, TEST_EXIT());
}
