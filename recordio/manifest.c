/*
 * manifest.c - NAME.json: what a split holds and which shards hold it.
 *
 * Loading validates everything a reader relies on (contiguous shard ranges
 * covering 0..records-1, class counts adding up, file names that stay in
 * the manifest's folder), so a hand-edited or damaged manifest is refused
 * with a message instead of producing out-of-range reads later. Shard i of
 * n must be named NAME-iiiii-of-nnnnn.mdb after the split: the writer has
 * always named them so, and a manifest pointing at another split's file
 * (or at its own shards in another order) is refused at once, by every
 * reader, before any record is read.
 */
#define _GNU_SOURCE
#include "recordio.h"

#include <libgen.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void rio_manifest_release(rio_manifest *m)
{
	if (!m)
		return;
	free(m->name);
	free(m->encoding);
	for (size_t i = 0; i < m->n_classes; i++)
		free(m->classes ? m->classes[i] : NULL);
	free(m->classes);
	free(m->class_counts);
	for (size_t i = 0; i < m->n_shards; i++)
		free(m->shards ? m->shards[i].file : NULL);
	free(m->shards);
	free(m->errors_file);
	free(m->created_by);
	free(m->created_at);
	free(m->options_json);
	memset(m, 0, sizeof(*m));
}

int rio_manifest_check_classes(const rio_manifest *m, ims_error *err)
{
	for (size_t c = 0; c < m->n_classes; c++) {
		RETURN_IF(!ims_utf8_valid(m->classes[c], NULL), err, IMS_ECORRUPT,
			  "class %zu ('%s') is not UTF-8: pack refuses such class names",
			  c, m->classes[c]);
		const char *why = ims_name_line_problem(m->classes[c]);
		RETURN_IF(why, err, IMS_ECORRUPT,
			  "class %zu ('%s') %s: pack refuses such class names (a class name is one line of a classes file)",
			  c, m->classes[c], why);
	}
	size_t first = 0, dup = 0;
	int d = ims_find_duplicate((const char *const *)m->classes, m->n_classes,
				   &first, &dup);
	RETURN_IF(d < 0, err, IMS_ENOMEM, "cannot check the class names of split '%s': out of memory", m->name);
	RETURN_IF(d, err, IMS_ECORRUPT,
		  "class %zu ('%s') has the name of class %zu: pack refuses repeated class names",
		  dup, m->classes[dup], first);
	return 0;
}

static int get_u64(const cJSON *obj, const char *key, uint64_t *out,
		   const char *path, ims_error *err)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
	RETURN_IF(!cJSON_IsNumber(it) || it->valuedouble < 0 ||
			  it->valuedouble > 9007199254740992.0 ||
			  it->valuedouble != (double)(uint64_t)it->valuedouble,
		  err, IMS_ECORRUPT,
		  "manifest '%s': \"%s\" is missing or not a non-negative integer", path,
		  key);
	*out = (uint64_t)it->valuedouble;
	return 0;
}

static int get_str(const cJSON *obj, const char *key, char **out, int required,
		   const char *path, ims_error *err)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!it || cJSON_IsNull(it)) {
		RETURN_IF(required, err, IMS_ECORRUPT,
			  "manifest '%s': \"%s\" is missing", path, key);
		*out = NULL;
		return 0;
	}
	RETURN_IF(!cJSON_IsString(it), err, IMS_ECORRUPT,
		  "manifest '%s': \"%s\" is not a string", path, key);
	*out = strdup(it->valuestring);
	RETURN_IF(!*out, err, IMS_ENOMEM, "cannot read manifest '%s': out of memory", path);
	return 0;
}

int rio_split_name_ok(const char *name)
{
	return ims_plain_name(name);
}

/* The pack modes a manifest may name (pack/pack.h's encodings). */
static int known_encoding(const char *e)
{
	static const char *const known[] = {"keep", "jpeg", "png", "raw"};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(e, known[i]) == 0)
			return 1;
	return 0;
}

/* Format 2 writes a digest as 16 lowercase hex digits: JSON numbers are
 * doubles to most readers, exact only to 2^53. */
static int parse_digest(const cJSON *it, int version, uint64_t *out)
{
	if (version == 1) {
		if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
		    it->valuedouble > 4294967295.0 ||
		    it->valuedouble != (double)(uint32_t)it->valuedouble)
			return -1;
		*out = (uint32_t)it->valuedouble;
		return 0;
	}
	if (!cJSON_IsString(it) || strlen(it->valuestring) != 16)
		return -1;
	uint64_t v = 0;
	for (const char *p = it->valuestring; *p; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' :
			*p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (d < 0)
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return 0;
}

static int parse(const cJSON *root, rio_manifest *m, const char *path,
		 ims_error *err)
{
	RETURN_IF(!cJSON_IsObject(root), err, IMS_ECORRUPT,
		  "manifest '%s' is not a JSON object", path);
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
	RETURN_IF(!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "imshard") != 0,
		  err, IMS_EFORMAT,
		  "'%s' is not an imshard manifest (no \"format\": \"imshard\")", path);
	uint64_t v = 0; /* gcc -O3 cannot see get_u64 sets it */
	FORWARD_IF_ERR(get_u64(root, "format_version", &v, path, err));
	RETURN_IF(v < RIO_MANIFEST_VERSION_MIN || v > RIO_MANIFEST_VERSION, err,
		  IMS_EFORMAT,
		  "manifest '%s' has format version %llu; this build reads versions %d to %d (upgrade imshard)",
		  path, (unsigned long long)v, RIO_MANIFEST_VERSION_MIN,
		  RIO_MANIFEST_VERSION);
	m->format_version = (int)v;
	FORWARD_IF_ERR(get_str(root, "name", &m->name, 1, path, err));
	RETURN_IF(!rio_split_name_ok(m->name), err, IMS_ECORRUPT,
		  "manifest '%s': split name '%s' is not a plain name", path, m->name);
	FORWARD_IF_ERR(get_u64(root, "records", &m->records, path, err));
	FORWARD_IF_ERR(get_str(root, "encoding", &m->encoding, 1, path, err));
	RETURN_IF(!known_encoding(m->encoding), err, IMS_ECORRUPT,
		  "manifest '%s': encoding '%s' is not keep, jpeg, png or raw",
		  path, m->encoding);
	FORWARD_IF_ERR(get_u64(root, "extra_labels", &v, path, err));
	RETURN_IF(v > RIO_MAX_EXTRA_LABELS, err, IMS_ECORRUPT,
		  "manifest '%s': %llu extra labels exceed %d", path,
		  (unsigned long long)v, RIO_MAX_EXTRA_LABELS);
	m->n_extra_labels = (unsigned)v;
	FORWARD_IF_ERR(get_u64(root, "skipped", &m->skipped, path, err));
	FORWARD_IF_ERR(get_str(root, "errors_file", &m->errors_file, 0, path, err));
	FORWARD_IF_ERR(get_str(root, "created_by", &m->created_by, 0, path, err));
	FORWARD_IF_ERR(get_str(root, "created_at", &m->created_at, 0, path, err));

	const cJSON *shuffled = cJSON_GetObjectItemCaseSensitive(root, "shuffled");
	RETURN_IF(shuffled && !cJSON_IsBool(shuffled), err, IMS_ECORRUPT,
		  "manifest '%s': \"shuffled\" is not true or false", path);
	m->order = !shuffled ? RIO_ORDER_UNKNOWN :
		   cJSON_IsTrue(shuffled) ? RIO_ORDER_SHUFFLED : RIO_ORDER_LIST;

	const cJSON *opts = cJSON_GetObjectItemCaseSensitive(root, "options");
	if (cJSON_IsObject(opts)) {
		m->options_json = cJSON_PrintUnformatted(opts);
		RETURN_IF(!m->options_json, err, IMS_ENOMEM, "cannot read manifest '%s': out of memory", path);
	}

	const cJSON *classes = cJSON_GetObjectItemCaseSensitive(root, "classes");
	const cJSON *counts = cJSON_GetObjectItemCaseSensitive(root, "class_counts");
	RETURN_IF(!cJSON_IsArray(classes) || !cJSON_IsArray(counts), err,
		  IMS_ECORRUPT, "manifest '%s': \"classes\" or \"class_counts\" is missing",
		  path);
	size_t nc = (size_t)cJSON_GetArraySize(classes);
	RETURN_IF(nc != (size_t)cJSON_GetArraySize(counts), err, IMS_ECORRUPT,
		  "manifest '%s': %zu classes but %d class counts", path, nc,
		  cJSON_GetArraySize(counts));
	m->classes = calloc(nc ? nc : 1, sizeof(char *));
	m->class_counts = calloc(nc ? nc : 1, sizeof(uint64_t));
	RETURN_IF(!m->classes || !m->class_counts, err, IMS_ENOMEM, "cannot read manifest '%s': out of memory", path);
	m->n_classes = nc;
	uint64_t total = 0;
	size_t i = 0;
	const cJSON *it;
	cJSON_ArrayForEach(it, classes) {
		RETURN_IF(!cJSON_IsString(it), err, IMS_ECORRUPT,
			  "manifest '%s': class %zu is not a string", path, i);
		m->classes[i] = strdup(it->valuestring);
		RETURN_IF(!m->classes[i], err, IMS_ENOMEM, "cannot read manifest '%s': out of memory", path);
		i++;
	}
	i = 0;
	cJSON_ArrayForEach(it, counts) {
		/* range first: converting a double beyond uint64 is undefined */
		RETURN_IF(!cJSON_IsNumber(it) || it->valuedouble < 0 ||
				  it->valuedouble > 9007199254740992.0 ||
				  it->valuedouble != (double)(uint64_t)it->valuedouble,
			  err, IMS_ECORRUPT,
			  "manifest '%s': class count %zu is invalid", path, i);
		m->class_counts[i] = (uint64_t)it->valuedouble;
		RETURN_IF(__builtin_add_overflow(total, m->class_counts[i], &total),
			  err, IMS_ECORRUPT,
			  "manifest '%s': class counts add up to more than 2^64", path);
		i++;
	}
	RETURN_IF(total != m->records, err, IMS_ECORRUPT,
		  "manifest '%s': class counts add up to %llu, not the %llu records",
		  path, (unsigned long long)total, (unsigned long long)m->records);

	const cJSON *shards = cJSON_GetObjectItemCaseSensitive(root, "shards");
	RETURN_IF(!cJSON_IsArray(shards) || cJSON_GetArraySize(shards) == 0, err,
		  IMS_ECORRUPT, "manifest '%s': \"shards\" is missing or empty", path);
	size_t ns = (size_t)cJSON_GetArraySize(shards);
	m->shards = calloc(ns, sizeof(*m->shards));
	RETURN_IF(!m->shards, err, IMS_ENOMEM, "cannot read manifest '%s': out of memory", path);
	m->n_shards = ns;
	uint64_t next = 0;
	i = 0;
	cJSON_ArrayForEach(it, shards) {
		rio_shard_info *s = &m->shards[i];
		RETURN_IF(!cJSON_IsObject(it), err, IMS_ECORRUPT,
			  "manifest '%s': shard %zu is not an object", path, i);
		FORWARD_IF_ERR(get_str(it, "path", &s->file, 1, path, err));
		RETURN_IF(!ims_plain_name(s->file), err, IMS_ECORRUPT,
			  "manifest '%s': shard path '%s' must be a file name in the manifest's folder",
			  path, s->file);
		FORWARD_IF_ERR(get_u64(it, "first", &s->first, path, err));
		FORWARD_IF_ERR(get_u64(it, "records", &s->records, path, err));
		FORWARD_IF_ERR(get_u64(it, "bytes", &s->bytes, path, err));
		RETURN_IF(parse_digest(cJSON_GetObjectItemCaseSensitive(it, "digest"),
				       m->format_version, &s->digest) < 0,
			  err, IMS_ECORRUPT,
			  "manifest '%s': shard %zu digest is missing or not %s", path, i,
			  m->format_version == 1 ? "a 32-bit number" : "16 hex digits");
		char want[64];
		snprintf(want, sizeof(want), "-%05zu-of-%05zu.mdb", i, ns);
		size_t nl = strlen(m->name);
		RETURN_IF(strncmp(s->file, m->name, nl) != 0 || strcmp(s->file + nl, want) != 0,
			  err, IMS_ECORRUPT,
			  "manifest '%s': shard %zu of split '%s' is '%s', not '%s%s' (a shard of another split, or shards renamed?)",
			  path, i, m->name, s->file, m->name, want);
		RETURN_IF(s->first != next, err, IMS_ECORRUPT,
			  "manifest '%s': shard %zu starts at record %llu, expected %llu",
			  path, i, (unsigned long long)s->first,
			  (unsigned long long)next);
		next += s->records;
		i++;
	}
	RETURN_IF(next != m->records, err, IMS_ECORRUPT,
		  "manifest '%s': shards hold %llu records, the manifest says %llu",
		  path, (unsigned long long)next, (unsigned long long)m->records);
	return 0;
}

/*
 * A key given twice in one object (at any depth) into *key: which value
 * counts would be the reader's guess (cJSON takes the first, Python's json
 * the last), so such a manifest, edited by hand, is refused. Returns 1
 * when found, 0 when none, -1 when out of memory.
 */
static int duplicate_key(const cJSON *node, const char **key)
{
	if (!cJSON_IsObject(node) && !cJSON_IsArray(node))
		return 0;
	size_t n = 0;
	for (const cJSON *c = node->child; c; c = c->next)
		n++;
	if (cJSON_IsObject(node) && n > 1) {
		const char **names = malloc(n * sizeof(*names));
		if (!names)
			return -1;
		size_t i = 0, first, dup;
		for (const cJSON *c = node->child; c; c = c->next)
			names[i++] = c->string ? c->string : "";
		int found = ims_find_duplicate(names, n, &first, &dup);
		if (found == 1)
			*key = names[dup];
		free(names);
		if (found)
			return found;
	}
	for (const cJSON *c = node->child; c; c = c->next) {
		int found = duplicate_key(c, key);
		if (found)
			return found;
	}
	return 0;
}

int rio_manifest_load(const char *path, rio_manifest *m, ims_error *err)
{
	memset(m, 0, sizeof(*m));
	uint8_t *text = NULL;
	size_t len = 0;
	int rc = ims_read_file(path, &text, &len, 256u << 20, err);
	if (rc < 0) {
		if (rc == IMS_ENOTFOUND)
			ims_fail(err, rc,
				 "cannot open manifest '%s': no such file (a split without a manifest is incomplete; pack it again)",
				 path);
		else if (rc == IMS_EFORMAT) { /* a FIFO, a device, a folder */
			struct stat st;
			ims_fail(err, rc, "cannot open manifest '%s': not a regular file (%s)",
				 path, stat(path, &st) == 0 ? ims_file_kind(st.st_mode) :
							      "gone");
		}
		return rc;
	}
	/* one object and nothing after it but white space: a file that
	 * goes on (two manifests pasted together) is not read as its first
	 * part. ims_read_file leaves a spare byte for the NUL. */
	text[len] = '\0';
	int oom = 0;
	cJSON *root = ims_json_parse((const char *)text, len + 1, 1, NULL, &oom);
	if (!root) {
		free(text);
		if (oom)
			return ims_fail(err, IMS_ENOMEM, "cannot read manifest '%s': out of memory",
					path);
		return ims_fail(err, IMS_ECORRUPT,
				"manifest '%s' is not valid JSON (truncated or edited?)",
				path);
	}
	const char *key = NULL;
	rc = duplicate_key(root, &key);
	if (rc == 1) {
		char safe[256];
		rc = ims_fail(err, IMS_ECORRUPT,
			      "manifest '%s' gives the key '%s' twice in one object "
			      "(edited by hand?): which one counts cannot be told",
			      path, ims_escape(key, safe, sizeof(safe)));
	} else if (rc < 0) {
		rc = ims_fail(err, IMS_ENOMEM, "cannot read manifest '%s': out of memory",
			      path);
	} else {
		rc = parse(root, m, path, err);
	}
	cJSON_Delete(root);
	free(text);
	if (rc < 0)
		rio_manifest_release(m);
	return rc;
}

int rio_manifest_at(const char *path, char *name, size_t cap, ims_error *err)
{
	if (cap)
		name[0] = '\0';
	struct stat st;
	if (lstat(path, &st) != 0) {
		/* a folder that cannot be searched hides what is there */
		RETURN_IF(errno != ENOENT && errno != ENOTDIR, err, IMS_EIO,
			  "cannot read '%s': %s", path, strerror(errno));
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	uint8_t *text = NULL;
	size_t len = 0;
	const int rc = ims_read_file(path, &text, &len, 256u << 20, err);
	/* past the limit it is no manifest (pack writes none that large);
	 * gone or no longer a plain file since the lstat, there is nothing
	 * to replace */
	if (rc == IMS_ELIMIT || rc == IMS_ENOTFOUND || rc == IMS_EFORMAT)
		return 0;
	if (rc < 0)
		return rc; /* IMS_EIO (no read permission, a failed read), IMS_ENOMEM */
	int oom = 0;
	cJSON *root = ims_json_parse((const char *)text, len, 0, NULL, &oom);
	free(text);
	RETURN_IF(oom, err, IMS_ENOMEM, "cannot read '%s': out of memory", path);
	const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(root, "name");
	int is = cJSON_IsObject(root) && cJSON_IsString(fmt) &&
		 strcmp(fmt->valuestring, "imshard") == 0;
	if (is && cap && cJSON_IsString(nm))
		snprintf(name, cap, "%s", nm->valuestring);
	cJSON_Delete(root);
	return is;
}

char *rio_manifest_to_json(const rio_manifest *m)
{
	/* the commit point of a split: never written without a member */
	ims_json_watch();
	cJSON *root = cJSON_CreateObject();
	if (!root)
		return NULL;
	cJSON_AddStringToObject(root, "format", "imshard");
	cJSON_AddNumberToObject(root, "format_version", m->format_version);
	cJSON_AddStringToObject(root, "name", m->name ? m->name : "");
	cJSON_AddNumberToObject(root, "records", (double)m->records);
	cJSON_AddStringToObject(root, "encoding", m->encoding ? m->encoding : "");
	cJSON_AddNumberToObject(root, "extra_labels", m->n_extra_labels);
	cJSON *classes = cJSON_AddArrayToObject(root, "classes");
	cJSON *counts = cJSON_AddArrayToObject(root, "class_counts");
	for (size_t i = 0; i < m->n_classes; i++) {
		cJSON_AddItemToArray(classes, cJSON_CreateString(m->classes[i]));
		cJSON_AddItemToArray(counts,
				     cJSON_CreateNumber((double)m->class_counts[i]));
	}
	cJSON *shards = cJSON_AddArrayToObject(root, "shards");
	for (size_t i = 0; i < m->n_shards; i++) {
		const rio_shard_info *s = &m->shards[i];
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "path", s->file);
		cJSON_AddNumberToObject(o, "first", (double)s->first);
		cJSON_AddNumberToObject(o, "records", (double)s->records);
		cJSON_AddNumberToObject(o, "bytes", (double)s->bytes);
		if (m->format_version == 1) {
			cJSON_AddNumberToObject(o, "digest", (double)s->digest);
		} else {
			char hex[17];
			snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)s->digest);
			cJSON_AddStringToObject(o, "digest", hex);
		}
		cJSON_AddItemToArray(shards, o);
	}
	if (m->order == RIO_ORDER_SHUFFLED || m->order == RIO_ORDER_LIST)
		cJSON_AddBoolToObject(root, "shuffled", m->order == RIO_ORDER_SHUFFLED);
	cJSON_AddNumberToObject(root, "skipped", (double)m->skipped);
	if (m->errors_file)
		cJSON_AddStringToObject(root, "errors_file", m->errors_file);
	else
		cJSON_AddNullToObject(root, "errors_file");
	if (m->created_by)
		cJSON_AddStringToObject(root, "created_by", m->created_by);
	if (m->created_at)
		cJSON_AddStringToObject(root, "created_at", m->created_at);
	if (m->options_json) {
		cJSON *o = ims_json_parse(m->options_json, strlen(m->options_json) + 1, 1, NULL,
					  NULL);
		if (o)
			cJSON_AddItemToObject(root, "options", o);
	}
	char *text = ims_json_print(root, 1);
	cJSON_Delete(root);
	return text;
}

int rio_manifest_save(const char *path, const rio_manifest *m, ims_error *err)
{
	char *text = rio_manifest_to_json(m);
	RETURN_IF(!text, err, IMS_ENOMEM, "cannot write manifest '%s': out of memory",
		  path);
	size_t len = strlen(text);
	char *withnl = realloc(text, len + 2);
	if (!withnl) {
		free(text);
		return ims_fail(err, IMS_ENOMEM, "cannot write manifest '%s': out of memory", path);
	}
	withnl[len] = '\n';
	withnl[len + 1] = '\0';
	int rc = ims_write_file_atomic(path, withnl, len + 1, err);
	free(withnl);
	return rc;
}

int rio_manifest_rehash(const char *path, const rio_manifest *expect,
			const uint64_t *digests, ims_error *err)
{
	char dirbuf[4096];
	int n = snprintf(dirbuf, sizeof(dirbuf), "%s", path);
	RETURN_IF(n < 0 || (size_t)n >= sizeof(dirbuf), err, IMS_EINVAL,
		  "cannot rewrite manifest '%s': path too long", path);
	rio_lock *lock;
	FORWARD_IF_ERR(rio_lock_take(dirname(dirbuf), expect->name, &lock, err));
	rio_manifest now;
	char *a = NULL, *b = NULL;
	int rc = rio_manifest_load(path, &now, err);
	if (rc == 0) {
		a = rio_manifest_to_json(expect);
		b = rio_manifest_to_json(&now);
		if (!a || !b)
			rc = ims_fail(err, IMS_ENOMEM, "cannot rewrite manifest '%s': out of memory", path);
		else if (strcmp(a, b) != 0)
			rc = ims_fail(err, IMS_ECHANGED,
				      "manifest '%s' changed while its split was being checked (packed again?); nothing rewritten",
				      path);
	}
	if (rc == 0) {
		now.format_version = RIO_MANIFEST_VERSION;
		for (size_t i = 0; i < now.n_shards; i++)
			now.shards[i].digest = digests[i];
		rc = rio_manifest_save(path, &now, err);
	}
	free(a);
	free(b);
	rio_manifest_release(&now);
	rio_lock_release(lock);
	return rc;
}
