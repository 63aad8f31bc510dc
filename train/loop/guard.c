/*
 * guard.c - what keeps a run from going wrong without a word before its
 * first step: its folders locked, so a second trainer started on the same
 * --log-dir or --checkpoint-dir is refused instead of interleaving its
 * metrics.jsonl with this run's and replacing its checkpoints; and
 * OpenBLAS's buffers reserved, so a memory limit too small for them is
 * one line now instead of a process spinning in OpenBLAS later.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/loop/loop_internal.h"

#define LOCK_NAME "imshard-train.lock"

/*
 * flock on DIR/imshard-train.lock, held until the process ends (the lock
 * file stays: removing it would let a third process lock a new file while
 * the second still holds the old). The holder's pid is written in it for
 * the message a refused trainer gives.
 */
static int lock_dir(const char *dir, const char *flag, int *fd_out,
		    ims_error *err)
{
	char path[4096];
	FORWARD_IF_ERR(ims_mkdir_p(dir, err));
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), dir, LOCK_NAME, err));
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	RETURN_IF(fd < 0, err, IMS_EIO, "cannot create lock file '%s': %s", path,
		  errno == ELOOP ? "it is a symbolic link (refused)" : strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		char pid[32] = "";
		ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		close(fd);
		if (e == EWOULDBLOCK)
			return ims_fail(err, IMS_EEXIST,
					"cannot train into '%s': another imshard-train%s%s%s "
					"is using it (it holds '%s'); wait for it to end, or "
					"give this run its own %s",
					dir, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "", path,
					flag);
		return ims_fail(err, IMS_EIO, "cannot lock '%s': %s", path, strerror(e));
	}
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
		int e = errno;
		close(fd);
		return ims_fail(err, IMS_EIO, "cannot write lock file '%s': %s", path,
				strerror(e));
	}
	*fd_out = fd;
	return 0;
}

int loop_take_locks(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	int rc = 0;
	if (r->dp.rank == 0 && o->out.log_dir)
		rc = lock_dir(o->out.log_dir, "--log-dir", &r->lock_fd[0], err);
	if (!rc && r->dp.rank == 0 && o->out.checkpoint_dir) {
		/* one folder for both: locked once (a second flock of this
		 * process on another descriptor of the file would refuse) */
		struct stat a, b;
		int same = o->out.log_dir && stat(o->out.log_dir, &a) == 0 &&
			   ims_mkdir_p(o->out.checkpoint_dir, NULL) == 0 &&
			   stat(o->out.checkpoint_dir, &b) == 0 && a.st_dev == b.st_dev &&
			   a.st_ino == b.st_ino;
		if (!same)
			rc = lock_dir(o->out.checkpoint_dir, "--checkpoint-dir", &r->lock_fd[1],
				      err);
	}
	/* every rank hears rank 0's verdict in the next collective: a
	 * refused rank 0 returns, and its program ends the job */
	return rc;
}

void loop_release_locks(run *r)
{
	for (int i = 0; i < 2; i++) {
		if (r->lock_fd[i] >= 0)
			close(r->lock_fd[i]);
		r->lock_fd[i] = -1;
	}
}

int loop_reserve_memory(run *r, ims_error *err)
{
	return nn_ctx_reserve_blas(&r->ctx, err);
}
