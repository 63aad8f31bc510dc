/*
 * common.c - error reporting, time and file helpers used by every library.
 */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
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

int ims_read_file(const char *path, uint8_t **data, size_t *len,
		  size_t max_bytes, ims_error *err)
{
	*data = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	RETURN_IF(fd < 0, err, errno == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
		  "cannot open '%s': %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return ims_fail(err, IMS_EIO, "cannot stat '%s': %s", path,
				strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return ims_fail(err, IMS_EFORMAT, "cannot read '%s': not a regular file",
				path);
	}
	size_t size = (size_t)st.st_size;
	if (max_bytes && size > max_bytes) {
		close(fd);
		return ims_fail(err, IMS_ELIMIT,
				"cannot read '%s': %zu bytes exceeds the limit of %zu",
				path, size, max_bytes);
	}
	/* One spare byte so text parsers can NUL-terminate in place. */
	uint8_t *buf = malloc(size + 1);
	if (!buf) {
		close(fd);
		return ims_fail(err, IMS_ENOMEM, "cannot read '%s': out of memory",
				path);
	}
	size_t got = 0;
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return ims_fail(err, IMS_EIO, "cannot read '%s': %s", path,
					strerror(e));
		}
		if (n == 0)
			break; /* shrank while reading: keep what is there */
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	*data = buf;
	*len = got;
	return 0;
}

int ims_fsync_parent(const char *path, ims_error *err)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	const char *dir = dirname(tmp);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	RETURN_IF(fd < 0, err, IMS_EIO, "cannot open folder '%s': %s", dir,
		  strerror(errno));
	int rc = 0;
	if (fsync(fd) != 0 && errno != EINVAL)
		rc = ims_fail(err, IMS_EIO, "cannot sync folder '%s': %s", dir,
			      strerror(errno));
	close(fd);
	return rc;
}

int ims_write_file_atomic(const char *path, const void *data, size_t len,
			  ims_error *err)
{
	char tmp[4096];
	int n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	RETURN_IF(n < 0 || (size_t)n >= sizeof(tmp), err, IMS_EINVAL,
		  "cannot write '%s': path too long", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	RETURN_IF(fd < 0, err, IMS_EIO, "cannot create '%s': %s", tmp,
		  strerror(errno));
	const uint8_t *p = data;
	size_t left = len;
	while (left > 0) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;
			close(fd);
			unlink(tmp);
			return ims_fail(err, IMS_EIO, "cannot write '%s': %s", tmp,
					strerror(e));
		}
		p += w;
		left -= (size_t)w;
	}
	if (fsync(fd) != 0) {
		int e = errno;
		close(fd);
		unlink(tmp);
		return ims_fail(err, IMS_EIO, "cannot sync '%s': %s", tmp,
				strerror(e));
	}
	if (close(fd) != 0) {
		int e = errno;
		unlink(tmp);
		return ims_fail(err, IMS_EIO, "cannot close '%s': %s", tmp,
				strerror(e));
	}
	if (rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return ims_fail(err, IMS_EIO, "cannot rename '%s' to '%s': %s", tmp,
				path, strerror(e));
	}
	return ims_fsync_parent(path, err);
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
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return ims_fail(err, IMS_EIO, "cannot create folder '%s': %s",
					buf, strerror(errno));
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return ims_fail(err, IMS_EIO, "cannot create folder '%s': %s", buf,
				strerror(errno));
	struct stat st;
	RETURN_IF(stat(buf, &st) != 0 || !S_ISDIR(st.st_mode), err, IMS_EIO,
		  "cannot create folder '%s': a file of that name exists", buf);
	return 0;
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
