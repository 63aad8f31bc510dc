/*
 * json.c - cJSON parsing that tells memory running out apart from text
 * that is not JSON. cJSON_Parse* returns NULL for both, and a caller that
 * took every NULL for bad text told a user with a good manifest, weights
 * file or iNat annotation file (whose parse takes several times the
 * file's size) that it was truncated or edited, when memory ran out.
 *
 * Building a tree fails as silently: cJSON_Add* drops a member it could
 * not allocate, and the tree prints without it (a manifest without its
 * class counts, written as if whole). ims_json_watch and ims_json_print
 * bracket such a build.
 *
 * cJSON allocates through process-wide hooks: they are set once, on the
 * first call, to malloc and free with each failure marked in a
 * thread-local flag.
 */
#include "common.h"
#include "common_internal.h"

#include <pthread.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

void *(*ims_json_malloc)(size_t) = malloc;

/*
 * initial-exec: the flag lives in each thread's static TLS block, made
 * when the thread is. The default model, in a shared object loaded with
 * dlopen (the Python extension links this file), allocates a thread's
 * block on its first touch, and glibc ends the process when that
 * allocation fails ("cannot allocate memory for thread-local data:
 * ABORT"): the first manifest a Split opened with memory short killed
 * the interpreter. Four bytes fit in the static TLS glibc keeps for
 * such libraries.
 */
static _Thread_local int alloc_failed __attribute__((tls_model("initial-exec")));

static void *watched_malloc(size_t n)
{
	void *p = ims_json_malloc(n);
	if (!p)
		alloc_failed = 1;
	return p;
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static void set_hooks(void)
{
	cJSON_Hooks h = {.malloc_fn = watched_malloc, .free_fn = free};
	cJSON_InitHooks(&h);
}

void ims_json_watch(void)
{
	pthread_once(&hooks_once, set_hooks);
	alloc_failed = 0;
}

char *ims_json_print(const struct cJSON *j, int formatted)
{
	if (!j)
		return NULL;
	char *text = formatted ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
	if (text && alloc_failed) {
		free(text);
		text = NULL;
	}
	return text;
}

struct cJSON *ims_json_parse(const char *text, size_t len, int require_end,
			     const char **end, int *oom)
{
	/* a parse inside a watched build (a tree that takes a parsed
	 * member) keeps the build's mark */
	const int before = alloc_failed;
	ims_json_watch();
	const char *stop = NULL;
	cJSON *root = text ? cJSON_ParseWithLengthOpts(text, len, &stop, require_end) : NULL;
	if (end)
		*end = stop;
	if (oom)
		*oom = !root && alloc_failed;
	alloc_failed |= before;
	return root;
}
