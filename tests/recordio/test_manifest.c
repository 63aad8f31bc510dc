/* test_manifest.c - manifest round trip and validation of hand-edited or
 * damaged manifests. */
#include "rio_test_util.h"
#include "test.h"

static const char *good =
	"{\"format\":\"imshard\",\"format_version\":1,\"name\":\"train\",\"records\":5,"
	"\"encoding\":\"keep\",\"extra_labels\":0,\"classes\":[\"a\",\"b\"],"
	"\"class_counts\":[2,3],\"shards\":[{\"path\":\"train-00000-of-00002.mdb\","
	"\"first\":0,\"records\":2,\"bytes\":100,\"digest\":7},{\"path\":"
	"\"train-00001-of-00002.mdb\",\"first\":2,\"records\":3,\"bytes\":100,"
	"\"digest\":8}],\"skipped\":1,\"errors_file\":\"train.errors.tsv\"}";

static int load_text(const char *dir, const char *text, rio_manifest *m,
		     ims_error *e)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/m.json", dir);
	ims_write_file_atomic(p, text, strlen(text), NULL);
	return rio_manifest_load(p, m, e);
}

static void expect_bad(const char *dir, const char *from, const char *to,
		       const char *needle)
{
	char text[4096];
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

int main(void)
{
	char dir[4096];
	tmp_dir(dir, sizeof(dir), "manifest");
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
	return TEST_EXIT();
}
