/*
 * test_json.c - ims_json_parse (common/json.c): good text parses, text
 * that is not JSON says so with where it stopped, and memory running out
 * part-way through a good text is told as such, not as bad text (cJSON's
 * own NULL says neither); ims_json_print of a watched build that lost a
 * member; the hooks it sets leave cJSON's other calls working.
 */
#include <string.h>

#include <cjson/cJSON.h>

#include "common/common.h"
#include "common/common_internal.h"
#include "test.h"

static int allocs_left;

static void *failing_malloc(size_t n)
{
	if (allocs_left-- <= 0)
		return NULL;
	return malloc(n);
}

int main(void)
{
	char *text;
	const char good[] = "{\"a\": [1, 2, {\"b\": \"c\"}], \"d\": true}";
	const char bad[] = "{\"a\": [1, 2,";
	int oom = -1;
	const char *end = NULL;

	cJSON *j = ims_json_parse(good, sizeof(good), 1, &end, &oom);
	CHECK(cJSON_IsObject(j));
	CHECK_EQ_INT(oom, 0);
	CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "d")));
	cJSON_Delete(j);

	oom = -1;
	CHECK(ims_json_parse(bad, strlen(bad), 0, &end, &oom) == NULL);
	CHECK_EQ_INT(oom, 0);
	CHECK(end != NULL && end >= bad && end <= bad + strlen(bad));
	CHECK(ims_json_parse(NULL, 0, 0, NULL, &oom) == NULL);
	CHECK_EQ_INT(oom, 0);

	/* memory running out at each allocation of the good text in turn:
	 * out of memory, never "not JSON" (before: a NULL like bad text's) */
	int failures = 0;
	for (int k = 0; k < 64; k++) {
		ims_json_malloc = failing_malloc;
		allocs_left = k;
		oom = -1;
		j = ims_json_parse(good, sizeof(good), 1, NULL, &oom);
		ims_json_malloc = malloc;
		if (j) {
			CHECK_EQ_INT(oom, 0);
			cJSON_Delete(j);
			break;
		}
		CHECK_EQ_INT(oom, 1);
		failures++;
	}
	CHECK(failures >= 5); /* the text takes that many nodes at least */

	/* a watched build that lost a member prints as nothing (before, cJSON
	 * printed the object without it); unwatched again, it prints */
	ims_json_watch();
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "a", 1);
	ims_json_malloc = failing_malloc;
	allocs_left = 0;
	CHECK(cJSON_AddNumberToObject(o, "b", 2) == NULL);
	ims_json_malloc = malloc;
	CHECK(ims_json_print(o, 0) == NULL);
	ims_json_watch();
	text = ims_json_print(o, 0);
	CHECK(text && strcmp(text, "{\"a\":1}") == 0);
	free(text);
	cJSON_Delete(o);

	/* a failure is forgotten by the next parse, and cJSON's printer runs
	 * through the same hooks */
	j = ims_json_parse(good, sizeof(good), 1, NULL, &oom);
	CHECK(j != NULL && oom == 0);
	text = cJSON_PrintUnformatted(j);
	CHECK(text && strcmp(text, "{\"a\":[1,2,{\"b\":\"c\"}],\"d\":true}") == 0);
	free(text);
	cJSON_Delete(j);
	return TEST_EXIT();
}
