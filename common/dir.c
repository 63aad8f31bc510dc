/*
 * dir.c - what a path is, and folder listings in a stable order.
 *
 * readdir's order is the file system's (hash order on ext4, creation order
 * on tmpfs): lists, class numbers and "the first bad file" built from it
 * would differ between two copies of one dataset. Every folder the project
 * reads is listed here and sorted byte-wise.
 */
#define _GNU_SOURCE
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int kind_of_mode(unsigned mode)
{
	return S_ISREG(mode) ? IMS_KIND_FILE :
	       S_ISDIR(mode) ? IMS_KIND_FOLDER : IMS_KIND_OTHER;
}

int ims_path_kind(const char *path)
{
	struct stat st;
	if (!path || stat(path, &st) != 0)
		return IMS_KIND_NONE;
	return kind_of_mode(st.st_mode);
}

void ims_dir_listing_release(ims_dir_listing *d)
{
	if (!d)
		return;
	free(d->e);
	free(d->names);
	free(d->offs);
	memset(d, 0, sizeof(*d));
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const ims_dir_entry *)a)->name,
		      ((const ims_dir_entry *)b)->name);
}

/* Appends one name; names may move while growing, so entries keep offsets
 * until the listing is complete. */
static int add_entry(ims_dir_listing *d, const char *name, int kind)
{
	size_t nlen = strlen(name) + 1;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		ims_dir_entry *e = realloc(d->e, cap * sizeof(*e));
		if (!e)
			return IMS_ENOMEM;
		d->e = e;
		size_t *o = realloc(d->offs, cap * sizeof(*o));
		if (!o)
			return IMS_ENOMEM;
		d->offs = o;
		d->cap = cap;
	}
	if (d->names_len + nlen > d->names_cap) {
		size_t cap = d->names_cap ? d->names_cap : 4096;
		while (cap < d->names_len + nlen)
			cap *= 2;
		char *nn = realloc(d->names, cap);
		if (!nn)
			return IMS_ENOMEM;
		d->names = nn;
		d->names_cap = cap;
	}
	memcpy(d->names + d->names_len, name, nlen);
	d->offs[d->n] = d->names_len;
	d->e[d->n++].kind = kind;
	d->names_len += nlen;
	return 0;
}

/* A folder that could not be listed: ENOMEM (fdopendir's buffer) is
 * memory running out, not a folder at fault, and is told so as
 * IMS_ENOMEM (Python raises MemoryError for it; it was an
 * imshard.Error saying "Cannot allocate memory" of the folder). */
static int list_error(int e, const char *shown, ims_error *err)
{
	if (e == ENOMEM)
		return ims_fail(err, IMS_ENOMEM, "cannot read folder '%s': out of memory",
				shown);
	return ims_fail(err, e == ENOENT ? IMS_ENOTFOUND : IMS_EIO,
			"cannot read folder '%s': %s", shown, strerror(e));
}

/* Lists the folder open as fd, which it takes over (closes). */
static int list_fd_owned(int fd, const char *shown, unsigned flags,
			 ims_dir_listing *d, ims_error *err)
{
	d->n = d->names_len = 0;
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return list_error(e, shown, err);
	}
	int rc = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(dir);
		if (!de) {
			if (errno)
				rc = list_error(errno, shown, err);
			break;
		}
		const char *name = de->d_name;
		if (name[0] == '.' &&
		    (!(flags & IMS_DIR_HIDDEN) || !name[1] ||
		     (name[1] == '.' && !name[2])))
			continue;
		int kind = IMS_KIND_OTHER;
		if (de->d_type == DT_REG) {
			kind = IMS_KIND_FILE;
		} else if (de->d_type == DT_DIR) {
			kind = IMS_KIND_FOLDER;
		} else if (de->d_type == DT_LNK || de->d_type == DT_UNKNOWN) {
			struct stat st; /* follow links; a dangling one is BROKEN */
			if (fstatat(dirfd(dir), name, &st, 0) == 0)
				kind = kind_of_mode(st.st_mode);
			else if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISLNK(st.st_mode))
				kind = IMS_KIND_BROKEN;
		}
		if (add_entry(d, name, kind) < 0) {
			rc = ims_fail(err, IMS_ENOMEM,
				      "cannot list folder '%s': out of memory", shown);
			break;
		}
	}
	closedir(dir);
	if (rc < 0) {
		d->n = d->names_len = 0;
		return rc;
	}
	for (size_t i = 0; i < d->n; i++)
		d->e[i].name = d->names + d->offs[i];
	if (d->n > 1)
		qsort(d->e, d->n, sizeof(*d->e), cmp_entry);
	return 0;
}

int ims_dir_list_fd(int dfd, const char *shown, unsigned flags,
		    ims_dir_listing *d, ims_error *err)
{
	/* fdopendir would take dfd and read from its offset: a fresh
	 * descriptor of the same folder leaves the caller's untouched */
	return list_fd_owned(openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC),
			     shown, flags, d, err);
}

int ims_dir_list(const char *path, unsigned flags, ims_dir_listing *d,
		 ims_error *err)
{
	const char *p = path && path[0] ? path : ".";
	/* O_DIRECTORY: a FIFO at path fails at once instead of blocking */
	return list_fd_owned(open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC), p,
			     flags, d, err);
}
