/* test_manifest.c - manifest round trip and validation of hand-edited or
 * damaged manifests, format 1 and 2, and the rewrite of --rehash. */
#include <fcntl.h>
#include <sys/file.h>

#include "rio_test_util.h"
#include "test.h"

static const char *good =
	"{\"format\":\"imshard\",\"format_version\":1,\"name\":\"train\",\"records\":5,"
	"\"encoding\":\"keep\",\"extra_labels\":0,\"classes\":[\"a\",\"b\"],"
	"\"class_counts\":[2,3],\"shards\":[{\"path\":\"train-00000-of-00002.mdb\","
	"\"first\":0,\"records\":2,\"bytes\":100,\"digest\":7},{\"path\":"
	"\"train-00001-of-00002.mdb\",\"first\":2,\"records\":3,\"bytes\":100,"
	"\"digest\":8}],\"skipped\":1,\"errors_file\":\"train.errors.tsv\"}";

/* format 2: digests are 16 hex digits */
static const char *good2 =
	"{\"format\":\"imshard\",\"format_version\":2,\"name\":\"train\",\"records\":5,"
	"\"encoding\":\"raw\",\"extra_labels\":0,\"classes\":[\"a\",\"b\"],"
	"\"class_counts\":[2,3],\"shards\":[{\"path\":\"train-00000-of-00002.mdb\","
	"\"first\":0,\"records\":2,\"bytes\":100,\"digest\":\"fedcba9876543210\"},{\"path\":"
	"\"train-00001-of-00002.mdb\",\"first\":2,\"records\":3,\"bytes\":100,"
	"\"digest\":\"0000000000000008\"}],\"skipped\":0,\"errors_file\":null}";

static int load_text(const char *dir, const char *text, rio_manifest *m,
		     ims_error *e)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/m.json", dir);
	ims_write_file_atomic(p, text, strlen(text), NULL);
	return rio_manifest_load(p, m, e);
}

static void expect_bad_in(const char *base, const char *dir, const char *from,
			  const char *to, const char *needle)
{
	char text[4096];
	const char *good = base;
	const char *at = strstr(good, from);
	CHECK(at != NULL);
	if (!at)
		return;
	snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - good), good, to,
		 at + strlen(from));
	rio_manifest m;
	ims_error e;
	int rc = load_text(dir, text, &m, &e);
	CHECK(rc < 0);
	if (rc == 0)
		rio_manifest_release(&m);
	else if (!strstr(e.msg, needle))
		fprintf(stderr, "message '%s' lacks '%s'\n", e.msg, needle);
	CHECK(rc < 0 && strstr(e.msg, needle) != NULL);
}

static void expect_bad(const char *dir, const char *from, const char *to,
		       const char *needle)
{
	expect_bad_in(good, dir, from, to, needle);
}

static void expect_bad2(const char *dir, const char *from, const char *to,
			const char *needle)
{
	expect_bad_in(good2, dir, from, to, needle);
}

/* rio_manifest_rehash: under the split's lock, only over the manifest the
 * digests were computed against. */
static void rehash(const char *dir)
{
	ims_error e;
	rio_manifest m;
	char p[4200], lock[4200];
	snprintf(p, sizeof(p), "%s/m.json", dir);
	snprintf(lock, sizeof(lock), "%s/train.lock", dir);
	CHECK_OK(load_text(dir, good, &m, &e), &e);
	uint64_t d[2] = {0x0123456789abcdefull, 42};
	/* a pack holds the lock: refused, nothing written */
	int fd = open(lock, O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
	CHECK_EQ_INT(rio_manifest_rehash(p, &m, d, &e), IMS_EEXIST);
	close(fd);
	unlink(lock);
	rio_manifest now;
	CHECK_OK(rio_manifest_load(p, &now, &e), &e);
	CHECK_EQ_INT(now.format_version, 1);
	rio_manifest_release(&now);
	/* the file changed since it was checked: refused */
	rio_manifest other;
	CHECK_OK(load_text(dir, good, &other, &e), &e);
	free(other.created_by);
	other.created_by = strdup("someone else");
	CHECK_OK(rio_manifest_save(p, &other, &e), &e);
	CHECK_EQ_INT(rio_manifest_rehash(p, &m, d, &e), IMS_ECHANGED);
	CHECK(strstr(e.msg, "nothing rewritten") != NULL);
	rio_manifest_release(&other);
	/* the same: rewritten as format 2 with the digests, the rest kept,
	 * and the lock released */
	CHECK_OK(load_text(dir, good, &other, &e), &e);
	rio_manifest_release(&other);
	CHECK_OK(rio_manifest_rehash(p, &m, d, &e), &e);
	CHECK_OK(rio_manifest_load(p, &now, &e), &e);
	CHECK_EQ_INT(now.format_version, 2);
	CHECK_EQ_U64(now.shards[0].digest, 0x0123456789abcdefull);
	CHECK_EQ_U64(now.shards[1].digest, 42);
	CHECK_EQ_U64(now.class_counts[1], 3);
	CHECK_EQ_STR(now.errors_file, "train.errors.tsv");
	rio_manifest_release(&now);
	CHECK(access(lock, F_OK) != 0);
	uint8_t *text;
	size_t len;
	CHECK_OK(ims_read_file(p, &text, &len, 0, &e), &e);
	CHECK(strstr((char *)text, "\"0123456789abcdef\"") != NULL);
	free(text);
	rio_manifest_release(&m);
}

/* rio_manifest_at: a split's manifest is known by its "format", whether
 * or not it loads; nothing else is one. */
static void manifest_at(const char *dir)
{
	char p[4200], q[4200], name[64];
	ims_error e;
	snprintf(p, sizeof(p), "%s/eval.json", dir);
	CHECK_EQ_INT(rio_manifest_at(p, name, sizeof(name), &e), 0); /* absent */
	CHECK_OK(ims_write_file_atomic(p, good2, strlen(good2), &e), &e);
	CHECK_EQ_INT(rio_manifest_at(p, name, sizeof(name), &e), 1);
	CHECK_EQ_STR(name, "train");
	/* one that does not load (its counts do not add up) is still one */
	const char *bad = "{\"format\":\"imshard\",\"name\":\"eval\",\"records\":-1}";
	CHECK_OK(ims_write_file_atomic(p, bad, strlen(bad), &e), &e);
	CHECK_EQ_INT(rio_manifest_at(p, name, sizeof(name), &e), 1);
	CHECK_EQ_STR(name, "eval");
	const char *noname = "{\"format\":\"imshard\"}";
	CHECK_OK(ims_write_file_atomic(p, noname, strlen(noname), &e), &e);
	CHECK_EQ_INT(rio_manifest_at(p, name, sizeof(name), &e), 1);
	CHECK_EQ_STR(name, "");
	/* a link to one is not (renaming over it replaces the link) */
	snprintf(q, sizeof(q), "%s/link.json", dir);
	CHECK(symlink("eval.json", q) == 0);
	CHECK_EQ_INT(rio_manifest_at(q, name, sizeof(name), &e), 0);
	/* an evaluation's eval.json, other JSON, text, a folder: not */
	static const char *const others[] = {
		"{\"program\":\"imshard eval\",\"records\":20}",
		"{\"format\":\"other\",\"name\":\"x\"}",
		"[\"format\",\"imshard\"]",
		"{\"format\":\"imshard\"",
		"",
	};
	for (size_t k = 0; k < sizeof(others) / sizeof(others[0]); k++) {
		CHECK_OK(ims_write_file_atomic(p, others[k], strlen(others[k]), &e),
			 &e);
		CHECK_EQ_INT(rio_manifest_at(p, name, sizeof(name), &e), 0);
	}
	snprintf(q, sizeof(q), "%s/folder.json", dir);
	CHECK(mkdir(q, 0755) == 0);
	CHECK_EQ_INT(rio_manifest_at(q, name, sizeof(name), &e), 0);
}

int main(void)
{
	char dir[4096];
	test_tmpdir(dir, sizeof(dir), "manifest");
	rio_manifest m;
	ims_error e;
	CHECK_OK(load_text(dir, good, &m, &e), &e);
	CHECK_EQ_U64(m.records, 5);
	CHECK_EQ_INT(m.n_classes, 2);
	CHECK_EQ_STR(m.classes[1], "b");
	CHECK_EQ_U64(m.class_counts[1], 3);
	CHECK_EQ_INT(m.n_shards, 2);
	CHECK_EQ_U64(m.shards[1].first, 2);
	CHECK_EQ_U64(m.shards[1].digest, 8);
	CHECK_EQ_STR(m.errors_file, "train.errors.tsv");
	CHECK_EQ_U64(m.skipped, 1);

	/* Save and load again: identical. */
	char p[4200];
	snprintf(p, sizeof(p), "%s/again.json", dir);
	CHECK_OK(rio_manifest_save(p, &m, &e), &e);
	rio_manifest m2;
	CHECK_OK(rio_manifest_load(p, &m2, &e), &e);
	CHECK_EQ_U64(m2.records, m.records);
	CHECK_EQ_STR(m2.shards[0].file, m.shards[0].file);
	CHECK_EQ_U64(m2.shards[0].bytes, 100);
	char *a = rio_manifest_to_json(&m), *b = rio_manifest_to_json(&m2);
	CHECK_EQ_STR(a, b);
	free(a);
	free(b);
	rio_manifest_release(&m2);
	rio_manifest_release(&m);
	rio_manifest_release(&m); /* twice is fine */

	expect_bad(dir, "\"imshard\"", "\"other\"", "not an imshard manifest");
	expect_bad(dir, "\"format_version\":1", "\"format_version\":9", "version 9");
	expect_bad(dir, "\"class_counts\":[2,3]", "\"class_counts\":[2,2]", "add up");
	expect_bad(dir, "\"class_counts\":[2,3]", "\"class_counts\":[5]", "class counts");
	/* found by fuzz_manifest: a count past uint64 was converted (UB) */
	expect_bad(dir, "\"class_counts\":[2,3]", "\"class_counts\":[2,3e103]",
		   "class count 1 is invalid");
	expect_bad(dir, "\"class_counts\":[2,3]", "\"class_counts\":[2.5,2.5]",
		   "class count 0 is invalid");
	expect_bad(dir, "\"first\":2", "\"first\":3", "starts at record 3");
	expect_bad(dir, "\"records\":5", "\"records\":6", "");
	expect_bad(dir, "train-00001-of-00002.mdb", "../etc/passwd", "file name");
	expect_bad(dir, "\"records\":3", "\"records\":-3", "records");
	expect_bad(dir, "\"shards\":[", "\"shardz\":[", "shards");
	expect_bad(dir, "\"name\":\"train\",", "", "name");
	/* format 1 digests are 32-bit numbers */
	expect_bad(dir, "\"digest\":7", "\"digest\":4294967296", "a 32-bit number");
	expect_bad(dir, "\"digest\":7", "\"digest\":\"0000000000000007\"", "a 32-bit number");
	/* a key twice in one object: which value counts is a guess (cJSON
	 * takes the first, Python's json the last) */
	expect_bad(dir, "\"records\":5,", "\"records\":5,\"records\":4,",
		   "gives the key 'records' twice in one object");
	expect_bad(dir, "\"digest\":8}", "\"digest\":8,\"first\":0}",
		   "gives the key 'first' twice");
	expect_bad(dir, "\"skipped\":1", "\"x\":{\"a\":1,\"a\":2},\"skipped\":1",
		   "gives the key 'a' twice");

	/* Format 2. */
	CHECK_OK(load_text(dir, good2, &m, &e), &e);
	CHECK_EQ_INT(m.format_version, 2);
	CHECK_EQ_U64(m.shards[0].digest, 0xfedcba9876543210ull);
	CHECK_EQ_U64(m.shards[1].digest, 8);
	CHECK_OK(rio_manifest_save(p, &m, &e), &e);
	CHECK_OK(rio_manifest_load(p, &m2, &e), &e);
	CHECK_EQ_U64(m2.shards[0].digest, 0xfedcba9876543210ull); /* past 2^53 */
	a = rio_manifest_to_json(&m);
	b = rio_manifest_to_json(&m2);
	CHECK_EQ_STR(a, b);
	CHECK(strstr(a, "\"fedcba9876543210\"") != NULL);
	free(a);
	free(b);
	rio_manifest_release(&m2);
	rio_manifest_release(&m);
	expect_bad2(dir, "\"digest\":\"0000000000000008\"", "\"digest\":8", "16 hex digits");
	expect_bad2(dir, "\"0000000000000008\"", "\"000000000000008\"", "16 hex digits");
	expect_bad2(dir, "\"0000000000000008\"", "\"000000000000000G\"", "16 hex digits");
	expect_bad2(dir, "\"0000000000000008\"", "\"000000000000000A\"", "16 hex digits");
	expect_bad2(dir, "\"format_version\":2", "\"format_version\":3",
		    "format version 3; this build reads versions 1 to 2");
	/* encodings no packer writes */
	expect_bad2(dir, "\"raw\"", "\"zzz\"", "encoding 'zzz' is not keep, jpeg, png or raw");
	expect_bad2(dir, "\"raw\"", "\"\"", "encoding '' is not");
	/* shards named after another split, out of order, or of another count */
	expect_bad2(dir, "\"train-00001-of-00002.mdb\"", "\"val-00001-of-00002.mdb\"",
		    "shard 1 of split 'train' is 'val-00001-of-00002.mdb', not 'train-00001-of-00002.mdb'");
	expect_bad2(dir, "\"train-00001-of-00002.mdb\"", "\"train-00000-of-00002.mdb\"",
		    "not 'train-00001-of-00002.mdb'");
	expect_bad2(dir, "\"train-00001-of-00002.mdb\"", "\"train-00001-of-00003.mdb\"",
		    "not 'train-00001-of-00002.mdb'");
	expect_bad2(dir, "\"train-00001-of-00002.mdb\"", "\"trainx-00001-of-00002.mdb\"",
		    "not 'train-00001-of-00002.mdb'");
	expect_bad2(dir, "\"name\":\"train\"", "\"name\":\"a/b\"", "not a plain name");

	/* Class names pack refuses load (the split still reads) and are
	 * named by rio_manifest_check_classes, which verify and extract use. */
	static const struct {
		const char *classes, *msg;
	} names[] = {
		{"[\"a\",\"b\"]", NULL},
		{"[\" a \",\"b c\"]", NULL},
		{"[\"a\",\"a\"]", "class 1 ('a') has the name of class 0: pack refuses repeated class names"},
		{"[\"a\",\"\"]", "class 1 ('') is empty: pack refuses"},
		{"[\"  \",\"b\"]", "class 0 ('  ') is only spaces: pack refuses"},
		{"[\"a\\nb\",\"b\"]", "class 0 ('a\nb') holds a line break: pack refuses"},
		{"[\"a\",\"b\\r\"]", "class 1 ('b\r') holds a line break: pack refuses"},
		{"[\"a\\tb\",\"b\"]", "class 0 ('a\tb') holds a TAB: pack refuses"},
		{"[\"a\",\"\xe9\"]", "class 1 ('\xe9') is not UTF-8: pack refuses"},
	};
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		char text[4096];
		const char *from = "[\"a\",\"b\"]", *at = strstr(good2, from);
		snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - good2), good2,
			 names[k].classes, at + strlen(from));
		CHECK_OK(load_text(dir, text, &m, &e), &e);
		ims_error_clear(&e);
		int rc = rio_manifest_check_classes(&m, &e);
		CHECK_EQ_INT(rc, names[k].msg ? IMS_ECORRUPT : 0);
		if (names[k].msg && !strstr(e.msg, names[k].msg))
			fprintf(stderr, "message '%s' lacks '%s'\n", e.msg, names[k].msg);
		CHECK(!names[k].msg || strstr(e.msg, names[k].msg) != NULL);
		rio_manifest_release(&m);
	}

	rehash(dir);
	manifest_at(dir);
	return test_tmp_done(dir, TEST_EXIT());
}
