/*
 * common.c - error reporting, time and file helpers used by every library.
 */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *ims_strerror(int code)
{
	switch (code) {
	case IMS_OK: return "success";
	case IMS_EIO: return "input/output error";
	case IMS_ENOMEM: return "out of memory";
	case IMS_ECORRUPT: return "corrupt data";
	case IMS_EFORMAT: return "unrecognised format";
	case IMS_EINVAL: return "invalid argument";
	case IMS_ELIMIT: return "beyond a size limit";
	case IMS_ENOTFOUND: return "not found";
	case IMS_ELMDB: return "LMDB error";
	case IMS_EEXIST: return "already exists";
	case IMS_EINTR: return "interrupted";
	case IMS_EUNSUPPORTED: return "not supported";
	case IMS_ECHANGED: return "file changed while being read";
	default: return "unknown error";
	}
}

void ims_error_clear(ims_error *e)
{
	if (!e)
		return;
	e->code = 0;
	e->msg[0] = '\0';
}

int ims_fail(ims_error *e, int code, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
		e->code = code;
	}
	return code;
}

int ims_fail_context(ims_error *e, const char *fmt, ...)
{
	if (!e)
		return IMS_EINVAL;
	char prefix[IMS_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	/* Joined by hand: the result is cut at the buffer size on purpose. */
	char old[IMS_ERRMSG_MAX];
	memcpy(old, e->msg, sizeof(old));
	size_t n = 0;
	for (const char *parts[] = {prefix, ": ", old}, **p = parts;
	     p < parts + 3; p++)
		for (const char *c = *p; *c && n + 1 < sizeof(e->msg); c++)
			e->msg[n++] = *c;
	e->msg[n] = '\0';
	return e->code;
}

double ims_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t ims_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ims_deadline(double seconds, struct timespec *until)
{
	/* pthread_cond_timedwait's clock is CLOCK_REALTIME unless the
	 * condition variable was made otherwise; none here is. */
	clock_gettime(CLOCK_REALTIME, until);
	if (!(seconds > 0))
		seconds = 0;
	if (seconds > 1e9)
		seconds = 1e9;
	int64_t ns = (int64_t)until->tv_nsec + (int64_t)(seconds * 1e9);
	until->tv_sec += (time_t)(ns / 1000000000);
	until->tv_nsec = (long)(ns % 1000000000);
}

/* mkdir of one folder of a path (dir), existing already being fine;
 * what stands at its name instead is named for what it is: "a FIFO",
 * "a regular file", "a symbolic link to nothing" (mkdir's EEXIST for all
 * of them). */
static int mkdir_one(const char *dir, ims_error *err)
{
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return ims_fail(err, IMS_EIO, "cannot create folder '%s': %s", dir,
				strerror(errno));
	struct stat st;
	if (stat(dir, &st) == 0)
		return S_ISDIR(st.st_mode)
			       ? 0
			       : ims_fail(err, IMS_EIO,
					  "cannot create folder '%s': %s of that name exists",
					  dir, ims_file_kind(st.st_mode));
	const int e = errno;
	RETURN_IF(lstat(dir, &st) == 0 && S_ISLNK(st.st_mode), err, IMS_EIO,
		  "cannot create folder '%s': a symbolic link to nothing of that "
		  "name exists",
		  dir);
	return ims_fail(err, IMS_EIO, "cannot create folder '%s': %s", dir, strerror(e));
}

int ims_mkdir_p(const char *path, ims_error *err)
{
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%s", path);
	RETURN_IF(n < 0 || (size_t)n >= sizeof(buf), err, IMS_EINVAL,
		  "cannot create folder '%s': path too long", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		FORWARD_IF_ERR(mkdir_one(buf, err));
		*p = '/';
	}
	return mkdir_one(buf, err);
}

int ims_mkdir_p_created(const char *path, char **created, ims_error *err)
{
	*created = NULL;
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%s", path);
	RETURN_IF(n < 0 || (size_t)n >= sizeof(buf), err, IMS_EINVAL,
		  "cannot create folder '%s': path too long", path);
	/* The outermost missing prefix is the first one mkdir -p will make. */
	struct stat st;
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (stat(buf, &st) != 0 && errno == ENOENT) {
			*created = strdup(buf);
			*p = c;
			RETURN_IF(!*created, err, IMS_ENOMEM, "out of memory");
			break;
		}
		*p = c;
		if (!c)
			break;
	}
	int rc = ims_mkdir_p(path, err);
	if (rc < 0) {
		/* part of the path may have been made before the failure */
		ims_rmdir_created(path, *created);
		free(*created);
		*created = NULL;
	}
	return rc;
}

int ims_mkdir_parent_created(const char *path, char **dir, char **created,
			     ims_error *err)
{
	*dir = *created = NULL;
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return 0;
	size_t n = (size_t)(slash - path);
	*dir = malloc(n + 1);
	RETURN_IF(!*dir, err, IMS_ENOMEM, "cannot create the folder of '%s': out of memory",
		  path);
	memcpy(*dir, path, n);
	(*dir)[n] = '\0';
	return ims_mkdir_p_created(*dir, created, err);
}

void ims_rmdir_created(const char *path, const char *top)
{
	if (!top)
		return;
	size_t tl = strlen(top);
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%s", path);
	if (n < 0 || (size_t)n >= sizeof(buf) || strncmp(buf, top, tl) != 0)
		return;
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = '\0';
	while (strlen(buf) >= tl) {
		/* a folder never made (a mkdir -p that failed below it) is
		 * passed over; one that is not empty ends the walk */
		if (rmdir(buf) != 0 && errno != ENOENT && errno != ENAMETOOLONG)
			return;
		char *slash = strrchr(buf, '/');
		if (!slash || (size_t)(slash - buf) < tl)
			return;
		*slash = '\0';
	}
}

int ims_path_join(char *out, size_t outlen, const char *dir, const char *rel,
		  ims_error *err)
{
	int n;
	if (!dir || !dir[0] || rel[0] == '/')
		n = snprintf(out, outlen, "%s", rel);
	else if (dir[strlen(dir) - 1] == '/')
		n = snprintf(out, outlen, "%s%s", dir, rel);
	else
		n = snprintf(out, outlen, "%s/%s", dir, rel);
	RETURN_IF(n < 0 || (size_t)n >= outlen, err, IMS_EINVAL,
		  "cannot join '%s' and '%s': path too long", dir ? dir : "", rel);
	return 0;
}

/* Folds "." and ".." of rest onto the absolute path in buf (cap bytes):
 * 0, or -1 when it does not fit. */
static int fold_onto(char *buf, size_t cap, const char *rest)
{
	size_t len = strlen(buf);
	while (*rest) {
		while (*rest == '/')
			rest++;
		const char *end = strchr(rest, '/');
		size_t n = end ? (size_t)(end - rest) : strlen(rest);
		if (n == 0)
			break;
		if (n == 1 && rest[0] == '.') {
			/* nothing */
		} else if (n == 2 && rest[0] == '.' && rest[1] == '.') {
			char *slash = strrchr(buf, '/');
			len = slash && slash != buf ? (size_t)(slash - buf) : 1;
			buf[len] = '\0';
		} else {
			int need = len > 1 ? 1 : 0;
			if (len + (size_t)need + n + 1 > cap)
				return -1;
			if (need)
				buf[len++] = '/';
			memcpy(buf + len, rest, n);
			len += n;
			buf[len] = '\0';
		}
		rest += n;
	}
	return 0;
}

/* path resolved into out (PATH_MAX bytes): its longest existing leading
 * part through realpath, the rest folded on; 0, or -1. */
static int resolve_loosely(const char *path, char *out)
{
	char head[PATH_MAX];
	int n = snprintf(head, sizeof(head), "%s", path[0] ? path : ".");
	if (n < 0 || (size_t)n >= sizeof(head))
		return -1;
	size_t cut = strlen(head);
	for (;;) {
		char saved = head[cut];
		head[cut] = '\0';
		if (realpath(cut ? head : "/", out)) {
			head[cut] = saved;
			return fold_onto(out, PATH_MAX, head + cut);
		}
		head[cut] = saved;
		/* the part before the last slash, or the working folder */
		while (cut > 0 && head[cut - 1] == '/')
			cut--;
		while (cut > 0 && head[cut - 1] != '/')
			cut--;
		if (cut == 0) {
			if (path[0] == '/' || !realpath(".", out))
				return -1;
			return fold_onto(out, PATH_MAX, head);
		}
	}
}

int ims_path_within(const char *path, const char *dir)
{
	char p[PATH_MAX], d[PATH_MAX];
	if (!path || !dir || !realpath(dir, d) || resolve_loosely(path, p) < 0)
		return 0;
	size_t n = strlen(d);
	if (n == 1) /* "/" holds everything */
		return 1;
	return strncmp(p, d, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int ims_path_within_loosely(const char *path, const char *dir)
{
	char p[PATH_MAX], d[PATH_MAX];
	if (!path || !dir || resolve_loosely(dir, d) < 0 || resolve_loosely(path, p) < 0)
		return 0;
	size_t n = strlen(d);
	if (n == 1)
		return 1;
	return strncmp(p, d, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int ims_plain_name(const char *name)
{
	return name && name[0] && !strchr(name, '/') && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0;
}
