/*
 * file.c - reading regular files without blocking on anything else, and
 * writing files atomically through temporaries that cannot be hijacked.
 *
 * Why the care: a dataset list, a manifest or a shard path is outside
 * input. A FIFO at such a path blocks open(2) until a writer appears
 * (forever, usually); a symbolic link planted at a predictable temporary
 * name turns "write my output" into "overwrite whatever the link points
 * to". Every open for reading and every temporary in the project goes
 * through here.
 */
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ims_file_kind(unsigned mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "a regular file";
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFDIR: return "a folder";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFLNK: return "a symbolic link";
	default: return "an unknown kind of file";
	}
}

int ims_same_file(const char *a, const char *b)
{
	if (strcmp(a, b) == 0)
		return 1;
	struct stat x, y;
	return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev &&
	       x.st_ino == y.st_ino;
}

int ims_open_read(const char *path, int *fd, struct stat *st_out,
		  ims_error *err)
{
	*fd = -1;
	struct stat st;
	/* stat first: a device is refused without being opened (opening some
	 * has effects of its own). */
	if (stat(path, &st) != 0)
		return ims_fail(err, errno == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
				"cannot open '%s': %s", path, strerror(errno));
	if (st_out)
		*st_out = st;
	RETURN_IF(!S_ISREG(st.st_mode), err, IMS_EFORMAT,
		  "cannot open '%s': not a regular file (%s)", path,
		  ims_file_kind(st.st_mode));
	/* The path may be replaced between stat and open: O_NONBLOCK keeps a
	 * FIFO from blocking the open, fstat judges what was opened. */
	int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (f < 0)
		return ims_fail(err, errno == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
				"cannot open '%s': %s", path, strerror(errno));
	if (fstat(f, &st) != 0) {
		int e = errno;
		close(f);
		return ims_fail(err, IMS_EIO, "cannot stat '%s': %s", path,
				strerror(e));
	}
	if (st_out)
		*st_out = st;
	if (!S_ISREG(st.st_mode)) {
		close(f);
		return ims_fail(err, IMS_EFORMAT,
				"cannot open '%s': not a regular file (%s)", path,
				ims_file_kind(st.st_mode));
	}
	int flags = fcntl(f, F_GETFL);
	if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
		int e = errno;
		close(f);
		return ims_fail(err, IMS_EIO, "cannot open '%s': %s", path,
				strerror(e));
	}
	*fd = f;
	return 0;
}

FILE *ims_fopen_read(const char *path, ims_error *err)
{
	int fd;
	if (ims_open_read(path, &fd, NULL, err) < 0)
		return NULL;
	FILE *f = fdopen(fd, "rb");
	if (!f) {
		int e = errno;
		close(fd);
		ims_fail(err, IMS_ENOMEM, "cannot read '%s': %s", path, strerror(e));
	}
	return f;
}

int ims_read_file(const char *path, uint8_t **data, size_t *len,
		  size_t max_bytes, ims_error *err)
{
	*data = NULL;
	*len = 0;
	int fd;
	struct stat st;
	FORWARD_IF_ERR(ims_open_read(path, &fd, &st, err));
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

/* ---- temporaries -------------------------------------------------------- */

/* The pid of a temporary's name NAME.tmp.<pid>, with NAME's length in
 * *name_len, or 0 when fname is not one. */
static long temp_pid(const char *fname, size_t *name_len)
{
	const char *tag = NULL;
	/* the last ".tmp.": names may hold the tag themselves */
	for (const char *p = strstr(fname, ".tmp."); p; p = strstr(p + 1, ".tmp."))
		tag = p + 5;
	if (!tag || tag == fname + 5 || !*tag || strlen(tag) > 10)
		return 0;
	long pid = 0;
	for (const char *p = tag; *p; p++) {
		if (*p < '0' || *p > '9')
			return 0;
		pid = pid * 10 + (*p - '0');
	}
	*name_len = (size_t)(tag - 5 - fname);
	return pid;
}

typedef struct exact_name {
	const char *name;
} exact_name;

static int match_exact(const char *name, void *arg)
{
	return strcmp(name, ((exact_name *)arg)->name) == 0;
}

int ims_temp_sweep_matching(const char *dir,
			    int (*match)(const char *name, void *arg),
			    void *arg, ims_error *err)
{
	const char *shown = dir && dir[0] ? dir : ".";
	int dfd = open(shown, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	RETURN_IF(dfd < 0, err, IMS_EIO, "cannot read folder '%s': %s", shown,
		  strerror(errno));
	ims_dir_listing ls = {0};
	int rc = ims_dir_list_fd(dfd, shown, IMS_DIR_HIDDEN, &ls, err);
	if (rc < 0) {
		close(dfd);
		return rc;
	}
	long self = (long)getpid();
	int removed = 0;
	char name[256];
	for (size_t i = 0; i < ls.n; i++) {
		const char *entry = ls.e[i].name;
		size_t nl = 0;
		long pid = temp_pid(entry, &nl);
		if (pid <= 0 || pid == self || pid > INT32_MAX || nl >= sizeof(name))
			continue;
		memcpy(name, entry, nl);
		name[nl] = '\0';
		/* kill(pid, 0) fails with ESRCH only when no such process
		 * exists (EPERM: it exists, as someone else's). */
		if (!match(name, arg) || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		/* unlinkat never follows a link: a link is removed, not its
		 * target */
		if (unlinkat(dfd, entry, 0) == 0)
			removed++;
	}
	ims_dir_listing_release(&ls);
	close(dfd);
	return removed;
}

int ims_temp_sweep(const char *dir, const char *name, ims_error *err)
{
	exact_name n = {name};
	return ims_temp_sweep_matching(dir, match_exact, &n, err);
}

int ims_temp_sweep_for(const char *path, ims_error *err)
{
	char a[4096], b[4096];
	int n = snprintf(a, sizeof(a), "%s", path);
	RETURN_IF(n < 0 || (size_t)n >= sizeof(a), err, IMS_EINVAL,
		  "cannot write '%s': path too long", path);
	memcpy(b, a, sizeof(a));
	return ims_temp_sweep(dirname(a), basename(b), err);
}

int ims_temp_create(const char *path, char *tmp, size_t tmplen, int *fd,
		    ims_error *err)
{
	*fd = -1;
	int n = snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
	RETURN_IF(n < 0 || (size_t)n >= tmplen, err, IMS_EINVAL,
		  "cannot write '%s': path too long", path);
	for (int tries = 0; tries < 4; tries++) {
		int f = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     0644);
		if (f >= 0) {
			*fd = f;
			return 0;
		}
		if (errno != EEXIST)
			break;
		/* Our own name is taken: a file left by an earlier process
		 * with this pid, or a link planted there. Remove it (the link,
		 * not what it points to) and create afresh. */
		if (unlink(tmp) != 0 && errno != ENOENT)
			break;
	}
	/* the file the caller named, as a failed write says: the temporary
	 * is this function's choice, never there after the failure, and its
	 * name (a pid in it) means nothing to the user. errno is kept for
	 * callers that tell the causes apart. */
	int e = errno;
	if (e == EEXIST)
		ims_fail(err, IMS_EIO, "cannot write '%s': something keeps appearing at "
			 "the name of its temporary '%s'", path, tmp);
	else
		ims_fail(err, IMS_EIO, "cannot write '%s': %s", path, strerror(e));
	errno = e;
	return IMS_EIO;
}

void ims_temp_discard(int fd, const char *tmp)
{
	if (fd >= 0)
		close(fd);
	unlink(tmp);
}

int ims_temp_try(const char *path, ims_error *err)
{
	char tmp[4200]; /* a path of PATH_MAX and the suffix */
	int fd;
	FORWARD_IF_ERR(ims_temp_create(path, tmp, sizeof(tmp), &fd, err));
	ims_temp_discard(fd, tmp);
	return 0;
}

int ims_temp_publish(int fd, const char *tmp, const char *path, ims_error *err)
{
	if (fsync(fd) != 0) {
		int e = errno;
		ims_temp_discard(fd, tmp);
		/* named as the file the caller asked for: the temporary is
		 * gone (a full disk can fail here, on file systems that
		 * allocate blocks at writeback) */
		return ims_fail(err, IMS_EIO, "cannot write '%s': %s", path,
				strerror(e));
	}
	if (close(fd) != 0) {
		int e = errno;
		unlink(tmp);
		return ims_fail(err, IMS_EIO, "cannot write '%s': %s", path,
				strerror(e));
	}
	if (rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return ims_fail(err, IMS_EIO, "cannot write '%s': cannot rename its "
				"temporary over it: %s", path, strerror(e));
	}
	return ims_fsync_parent(path, err);
}

int ims_write_all(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int ims_write_file_atomic_flags(const char *path, const void *data,
				size_t len, unsigned flags, ims_error *err)
{
	/* Best effort: a folder that cannot be listed can still be written
	 * to, and a stale temporary left there is only litter. */
	char tmp[4096];
	int fd;
	FORWARD_IF_ERR(ims_temp_write(path, data, len, flags, tmp, sizeof(tmp),
				      &fd, err));
	return ims_temp_publish(fd, tmp, path, err);
}

int ims_temp_write(const char *path, const void *data, size_t len,
		   unsigned flags, char *tmp, size_t tmplen, int *fd,
		   ims_error *err)
{
	if (!(flags & IMS_WRITE_NO_SWEEP))
		ims_temp_sweep_for(path, NULL);
	FORWARD_IF_ERR(ims_temp_create(path, tmp, tmplen, fd, err));
	if (ims_write_all(*fd, data, len) != 0) {
		int e = errno;
		ims_temp_discard(*fd, tmp);
		*fd = -1;
		/* the file the user named: the temporary is gone */
		return ims_fail(err, IMS_EIO, "cannot write '%s': %s", path,
				strerror(e));
	}
	return 0;
}

int ims_write_file_atomic(const char *path, const void *data, size_t len,
			  ims_error *err)
{
	return ims_write_file_atomic_flags(path, data, len, 0, err);
}
