/*
 * guard.c - what keeps a run from going wrong without a word before its
 * first step: its folders locked, so a second trainer started on the same
 * --log-dir or --checkpoint-dir is refused instead of interleaving its
 * metrics.jsonl with this run's and replacing its checkpoints; a new run
 * refused in folders an earlier run left its files in, unless --force;
 * OpenBLAS's buffers reserved, so a memory limit too small for them is
 * one line now instead of a process spinning in OpenBLAS later; and, on
 * the CPU, the memory the first steps will touch weighed against what
 * the machine and the process's cgroup have free, so a run the OOM
 * killer would end mid-way is said to be at risk before it starts.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "recordio/recordio.h"
#include "train/loop/loop_internal.h"

#define LOCK_NAME "imshard-train.lock"

/*
 * flock on DIR/imshard-train.lock, held until the process ends (the lock
 * file stays: removing it would let a third process lock a new file while
 * the second still holds the old). The holder's pid is written in it for
 * the message a refused trainer gives, and on the next line the job's
 * mark, by which the other ranks tell rank 0's folder from their own.
 */
static int lock_dir(const char *dir, const char *flag, uint64_t mark,
		    int *fd_out, ims_error *err)
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
	char pid[64];
	int n = snprintf(pid, sizeof(pid), "%ld\n%016llx\n", (long)getpid(),
			 (unsigned long long)mark);
	/* synced: a rank on another node reads the mark through a network
	 * file system */
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n ||
	    fsync(fd) != 0) {
		int e = errno;
		close(fd);
		return ims_fail(err, IMS_EIO, "cannot write lock file '%s': %s", path,
				strerror(e));
	}
	*fd_out = fd;
	return 0;
}

/* A number no other job's lock files hold: read from the kernel's
 * random source, else made of the clock and the pid. Never 0 (0 says
 * "no mark"), and under 2^53 so a double carries it exactly. */
static uint64_t new_mark(void)
{
	uint64_t m = 0;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
			m = 0;
		close(fd);
	}
	if (!m)
		m = loop_fingerprint_str("") ^ (uint64_t)(ims_now() * 1e9) ^
		    ((uint64_t)getpid() << 32);
	m >>= 11;
	return m ? m : 1;
}

/* The mark in DIR's lock file: 0 when it has none (absent, or written
 * by another version). */
static uint64_t lock_mark(const char *dir)
{
	char path[4096], text[64] = "";
	if (ims_path_join(path, sizeof(path), dir, LOCK_NAME, NULL) < 0)
		return 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	text[n > 0 ? n : 0] = 0;
	const char *nl = strchr(text, '\n');
	return nl ? strtoull(nl + 1, NULL, 16) : 0;
}

/* Which folder `dir` is on this machine, as a number under 2^53 (0 when
 * it cannot be made or seen: the lock that follows says why). */
static double folder_key(const char *dir)
{
	struct stat st;
	char host[256] = "", id[512];
	if (ims_mkdir_p(dir, NULL) < 0 || stat(dir, &st) != 0)
		return 0;
	(void)gethostname(host, sizeof(host) - 1);
	snprintf(id, sizeof(id), "%s:%llu:%llu", host, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	uint64_t k = loop_fingerprint_str(id) >> 11;
	return (double)(k ? k : 1);
}

/*
 * With several ranks (a collective: every rank calls it), which ranks'
 * folder `dir` is not rank 0's: its lock file lacks the job's mark, which
 * rank 0 broadcasts (0 when rank 0 failed: then every rank reads as rank
 * 0's), left in *mark on every rank. keys[k] is 0 for rank k's folder that is rank 0's, else the
 * folder's folder_key when `keyed` (which makes the folder), else 1.
 * *keys is the caller's to free; *others and *first count and name the
 * ranks whose folder is another.
 */
static int other_folders(run *r, uint64_t *mark, const char *dir, int keyed,
			 double **keys, int *others, int *first, ims_error *err)
{
	double m = (double)*mark;
	*keys = NULL;
	FORWARD_IF_ERR(dp_broadcast(r->dp.comm, &m, sizeof(m), 0, err));
	*mark = (uint64_t)m;
	double key = 0;
	if (r->dp.rank != 0 && m != 0 && lock_mark(dir) != (uint64_t)m)
		key = keyed ? folder_key(dir) : 1.0;
	double *all = malloc((size_t)r->dp.world * sizeof(double));
	if (!all) {
		/* the peers gather: this rank cannot */
		r->failed.out_of_step = 1;
		return ims_fail(err, IMS_ENOMEM, "cannot lock '%s': out of memory", dir);
	}
	if (dp_allgather_f64(r->dp.comm, &key, 1, all, err) < 0) {
		free(all);
		return -1;
	}
	*others = 0;
	*first = -1;
	for (int k = 1; k < r->dp.world; k++)
		if (all[k] != 0) {
			(*others)++;
			*first = *first < 0 ? k : *first;
		}
	*keys = all;
	return 0;
}

/*
 * With several ranks, which folder each rank's --log-dir is: rank 0's
 * (its lock file holds the job's mark, seen through shared storage) or
 * one of its own, a folder on the rank's node. The lowest rank of each
 * such folder locks and owns it (its metrics.jsonl is started anew, an
 * earlier run's refused) and rank 0 says once that the logs are split.
 */
static int find_log_owners(run *r, uint64_t mark, int locked, ims_error *err)
{
	const nn_train_opts *o = r->o;
	double *keys;
	int ranks, first;
	FORWARD_IF_ERR(other_folders(r, &mark, o->out.log_dir, 1, &keys, &ranks, &first, err));
	const double key = keys[r->dp.rank];
	int own = key != 0;
	for (int k = 1; k < r->dp.rank; k++)
		own = own && keys[k] != key;
	free(keys);
	if (own) {
		r->log.owns_dir = 1;
		FORWARD_IF_ERR(lock_dir(o->out.log_dir, "--log-dir", mark,
					&r->lock_fd[0], err));
	}
	if (r->dp.rank == 0 && locked && ranks && r->log.ev.warning) {
		char msg[4600];
		snprintf(msg, sizeof(msg),
			 "--log-dir is another folder than rank 0's ('%s') on %d %s "
			 "(storage local to a node; rank %d first): %s metrics.jsonl "
			 "lines go there; summary.json and the evaluation files are "
			 "in rank 0's alone",
			 o->out.log_dir, ranks, ims_plural((uint64_t)ranks, "rank", "ranks"),
			 first, ranks == 1 ? "its" : "their");
		r->log.ev.warning(r->log.ev.ctx, msg);
	}
	return 0;
}

/*
 * With several ranks, whether each rank's --checkpoint-dir is rank 0's or
 * a folder of the rank's own node. Only rank 0 writes the checkpoint, and
 * every rank reads it on --resume: rank 0 says once that a resume there
 * needs rank 0's file copied in (else it is refused then, each rank
 * having read another checkpoint).
 */
static int find_checkpoint_folders(run *r, uint64_t mark, int locked, ims_error *err)
{
	const nn_train_opts *o = r->o;
	double *keys;
	int ranks, first;
	FORWARD_IF_ERR(other_folders(r, &mark, o->out.checkpoint_dir, 0, &keys, &ranks, &first,
				     err));
	free(keys);
	if (r->dp.rank == 0 && locked && ranks && r->log.ev.warning) {
		char msg[4600];
		snprintf(msg, sizeof(msg),
			 "--checkpoint-dir is another folder than rank 0's ('%s') on %d %s "
			 "(storage local to a node; rank %d first): only rank 0 writes the "
			 "checkpoint, so a --resume needs rank 0's checkpoint.safetensors "
			 "copied there first",
			 o->out.checkpoint_dir, ranks, ims_plural((uint64_t)ranks, "rank", "ranks"),
			 first);
		r->log.ev.warning(r->log.ev.ctx, msg);
	}
	return 0;
}

int loop_take_locks(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	int rc = 0;
	const uint64_t mark = r->dp.rank == 0 ? new_mark() : 0;
	r->log.owns_dir = r->dp.rank == 0 && o->out.log_dir;
	if (r->dp.rank == 0 && o->out.log_dir)
		rc = lock_dir(o->out.log_dir, "--log-dir", mark, &r->lock_fd[0], err);
	if (!rc && r->dp.rank == 0 && o->out.checkpoint_dir) {
		/* one folder for both: locked once (a second flock of this
		 * process on another descriptor of the file would refuse) */
		struct stat a, b;
		int same = o->out.log_dir && stat(o->out.log_dir, &a) == 0 &&
			   ims_mkdir_p(o->out.checkpoint_dir, NULL) == 0 &&
			   stat(o->out.checkpoint_dir, &b) == 0 && a.st_dev == b.st_dev &&
			   a.st_ino == b.st_ino;
		if (!same)
			rc = lock_dir(o->out.checkpoint_dir, "--checkpoint-dir", mark,
				      &r->lock_fd[1], err);
	}
	/* every rank takes part whatever rank 0's verdict (mark 0 when it
	 * failed); a rank refused here, or rank 0 before, is agreed on by
	 * the caller. The checkpoint folders are told apart first: a rank
	 * that owns its own --log-dir writes the job's mark there, and the
	 * same folder as its --checkpoint-dir would then read as rank 0's. */
	if (r->dp.world > 1 && o->out.checkpoint_dir) {
		ims_error e;
		int orc = find_checkpoint_folders(r, rc ? 0 : mark, !rc, rc ? &e : err);
		if (!rc)
			rc = orc;
	}
	if (r->dp.world > 1 && o->out.log_dir && !r->failed.out_of_step) {
		ims_error e;
		int orc = find_log_owners(r, rc ? 0 : mark, !rc, rc ? &e : err);
		if (!rc)
			rc = orc;
	}
	return rc;
}

/* What a run leaves in its folders (eval_files.c, metrics.c, resume.c). */
static const char *const checkpoint_files[] = {"checkpoint.safetensors", NULL};
static const char *const log_files[] = {"metrics.jsonl", "summary.json",
					"eval.json", "per_class.csv",
					"confusion.csv", "predictions.csv",
					NULL};

typedef struct earlier {
	char paths[8][4096];
	int n;
	char names[256]; /* "checkpoint.safetensors, summary.json" */
	char dirs[2][4096];
	int n_dirs;
} earlier;

/* The files of names that an earlier run left in dir: regular files (what
 * is planted at a name, a link or a FIFO, is refused where the name is
 * opened), and an empty metrics.jsonl tells nothing (a run that stopped
 * before its first line). */
static int find_earlier(earlier *e, const char *dir, const char *const *names,
			ims_error *err)
{
	if (!dir)
		return 0;
	int in_dir = 0;
	for (int i = 0; names[i]; i++) {
		char *path = e->paths[e->n];
		FORWARD_IF_ERR(ims_path_join(path, sizeof(e->paths[0]), dir, names[i],
					     err));
		struct stat st;
		if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
		    (st.st_size == 0 && !strcmp(names[i], "metrics.jsonl")))
			continue;
		size_t len = strlen(e->names);
		snprintf(e->names + len, sizeof(e->names) - len, "%s%s",
			 len ? ", " : "", names[i]);
		e->n++;
		in_dir = 1;
	}
	if (in_dir && (e->n_dirs == 0 || strcmp(e->dirs[0], dir)))
		snprintf(e->dirs[e->n_dirs++], sizeof(e->dirs[0]), "%s", dir);
	return 0;
}

/* The files a run writes by renaming a temporary over them: a folder at
 * one of those names fails the rename, at the first checkpoint or at the
 * run's end, after the training it was to record. */
static int check_folder_at(const char *dir, const char *name,
			   const char *when, ims_error *err)
{
	char path[4096];
	struct stat st;
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), dir, name, err));
	RETURN_IF(lstat(path, &st) == 0 && S_ISDIR(st.st_mode), err, IMS_EEXIST,
		  "cannot train into '%s': '%s' is a folder, and this run "
		  "writes a file of that name %s; remove or rename it",
		  dir, path, when);
	return 0;
}

/* A split packed into the log folder under the name of one of the run's
 * files (split summary or eval: summary.json, eval.json) has its manifest
 * there: --force would remove it as an earlier run's, and the run's own
 * file would replace it, the split lost either way. */
static int check_manifest_at(const char *dir, const char *name, ims_error *err)
{
	char path[4096], split[256], safe[300];
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), dir, name, err));
	ims_error e;
	const int at = rio_manifest_at(path, split, sizeof(split), &e);
	/* unread, it may be a split's manifest or another run's file */
	RETURN_IF(at < 0, err, at,
		  "cannot train into '%s': %s; make it readable, or give this "
		  "run a --log-dir of its own", dir, e.msg);
	RETURN_IF(at, err, IMS_EEXIST,
		  "cannot train into '%s': '%s' is the manifest of split '%s', "
		  "and a run's --log-dir holds its own %s; give this run a "
		  "--log-dir of its own",
		  dir, path, ims_escape(split, safe, sizeof(safe)), name);
	return 0;
}

/* A folder where no file can be created (its lock file there already, so
 * the lock was taken: a folder made read-only, or whose permissions
 * changed since): the run's files are written by creating a temporary
 * and renaming it, which would fail only after the training they record.
 * Tried with a temporary of the lock file's (imshard-train.lock.tmp.PID),
 * removed at once; one a killed run left is swept here like any stale
 * temporary. */
static int check_writable(const char *dir, const char *flag, const char *what,
			  ims_error *err)
{
	char path[4096];
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), dir, "imshard-train.lock", err));
	ims_temp_sweep(dir, "imshard-train.lock", NULL);
	ims_error e;
	RETURN_IF(ims_temp_try(path, &e) < 0, err, IMS_EIO,
		  "cannot train into '%s': no file can be created there (%s), "
		  "and this run writes its %s; give this run a %s it can write",
		  dir, strerror(errno), what, flag);
	return 0;
}

int loop_check_outputs(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	if (r->dp.rank != 0 && !r->log.owns_dir)
		return 0;
	/* every owner of a log folder, resumed or not, with or without
	 * --val: what it writes, and what --force removes */
	for (int i = 0; o->out.log_dir && log_files[i]; i++)
		FORWARD_IF_ERR(check_manifest_at(o->out.log_dir, log_files[i], err));
	if (r->dp.rank != 0)
		return 0;
	if (o->out.checkpoint_dir) {
		FORWARD_IF_ERR(check_folder_at(o->out.checkpoint_dir,
					       "checkpoint.safetensors",
					       "at its first checkpoint", err));
		FORWARD_IF_ERR(check_writable(o->out.checkpoint_dir, "--checkpoint-dir",
					      "checkpoint.safetensors at its first "
					      "checkpoint", err));
	}
	if (!o->out.log_dir)
		return 0;
	FORWARD_IF_ERR(check_writable(o->out.log_dir, "--log-dir",
				      "summary.json at its end", err));
	FORWARD_IF_ERR(check_folder_at(o->out.log_dir, "summary.json",
				       "at its end", err));
	/* the per-class files follow the last validation */
	for (int i = 2; o->data.val_manifest && log_files[i]; i++)
		FORWARD_IF_ERR(check_folder_at(o->out.log_dir, log_files[i],
					       "after its last validation", err));
	return 0;
}

int loop_check_earlier_run(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	if ((r->dp.rank != 0 && !r->log.owns_dir) || o->out.resume)
		return 0;
	earlier e;
	memset(&e, 0, sizeof(e));
	if (r->dp.rank == 0)
		FORWARD_IF_ERR(find_earlier(&e, o->out.checkpoint_dir,
					    checkpoint_files, err));
	FORWARD_IF_ERR(find_earlier(&e, o->out.log_dir, log_files, err));
	/* what metrics.jsonl's open would refuse, refused before --force
	 * removes anything (a run refused after its removal would have
	 * lost the earlier run for nothing) */
	if (o->out.log_dir) {
		char path[4096];
		struct stat st;
		FORWARD_IF_ERR(ims_path_join(path, sizeof(path), o->out.log_dir,
					     "metrics.jsonl", err));
		if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
			return ims_fail(err, IMS_EIO,
					"cannot open '%s': it is a symbolic link "
					"(refused: it would be written through)",
					path);
		if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
			return ims_fail(err, IMS_EFORMAT,
					"cannot open '%s': not a regular file (%s)",
					path, ims_file_kind(st.st_mode));
	}
	if (!e.n)
		return 0;
	char where[8300];
	snprintf(where, sizeof(where), "'%s'%s%s%s", e.dirs[0],
		 e.n_dirs > 1 ? " and '" : "", e.n_dirs > 1 ? e.dirs[1] : "",
		 e.n_dirs > 1 ? "'" : "");
	RETURN_IF(!o->out.force, err, IMS_EEXIST,
		  "cannot start a new run in %s: %s an earlier run's %s "
		  "(--resume continues that run; --force starts a new one, "
		  "removing %s)",
		  where, e.n_dirs > 1 ? "they hold" : "it holds", e.names,
		  e.n > 1 ? "them" : "it");
	/* all or nothing: each moved aside first, every move undone when one
	 * fails, and only then removed */
	char aside[8][4200];
	for (int i = 0; i < e.n; i++) {
		snprintf(aside[i], sizeof(aside[i]), "%s.removed.%ld", e.paths[i],
			 (long)getpid());
		if (rename(e.paths[i], aside[i]) != 0) {
			int er = errno;
			for (int k = i - 1; k >= 0; k--)
				(void)rename(aside[k], e.paths[k]);
			return ims_fail(err, IMS_EIO,
					"cannot remove '%s' (--force): %s; the "
					"earlier run's files are left as they were",
					e.paths[i], strerror(er));
		}
	}
	for (int i = 0; i < e.n; i++)
		RETURN_IF(unlink(aside[i]) != 0, err, IMS_EIO,
			  "cannot remove '%s' (--force): %s", aside[i],
			  strerror(errno));
	/* rank 0's is the run's; another owner's folder is its own */
	void (*tell)(void *, const char *) = r->dp.rank == 0 ? r->log.ev.warning
							     : r->log.ev.rank_warning;
	if (tell) {
		char who[32] = "", msg[8800];
		if (r->dp.rank)
			snprintf(who, sizeof(who), "rank %d: ", r->dp.rank);
		snprintf(msg, sizeof(msg),
			 "%sremoved an earlier run's %s from %s (--force)", who,
			 e.names, where);
		tell(r->log.ev.ctx, msg);
	}
	return 0;
}

/* The run_id of the JSON object in the first len bytes of text (up to its
 * first line break when line is set), into id ("" when none). IMS_ENOMEM
 * when memory ran out parsing it: a file that names another run must not
 * pass for one that names none. */
static int run_id_of(const char *text, size_t len, int line, char *id, size_t cap,
		     ims_error *err)
{
	id[0] = '\0';
	if (line) {
		const char *nl = memchr(text, '\n', len);
		if (!nl)
			return 0; /* a first line cut by the read: no id read */
		len = (size_t)(nl - text);
	}
	int oom = 0;
	cJSON *j = ims_json_parse(text, len, 0, NULL, &oom);
	RETURN_IF(oom, err, IMS_ENOMEM, "out of memory");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "run_id");
	if (cJSON_IsString(v))
		snprintf(id, cap, "%s", v->valuestring);
	cJSON_Delete(j);
	return 0;
}

/* The run that wrote LOGDIR/name, as its run_id says: summary.json's, or
 * metrics.jsonl's first line (each part's "start" line carries it). ""
 * when the file is absent, not a plain file, or names none (older, or
 * another program's): that says nothing. One that is there but cannot be
 * read (no read permission) is IMS_EIO: it may name another run, whose
 * summary this run would replace and whose metrics it would extend. */
#define UNREAD_HINT "make it readable, or give this run a --log-dir of its own"
static int logged_run_id(const char *log_dir, const char *name, char *id, size_t cap,
			 ims_error *err)
{
	id[0] = '\0';
	char path[4096];
	FORWARD_IF_ERR(ims_path_join(path, sizeof(path), log_dir, name, err));
	struct stat st;
	if (lstat(path, &st) != 0) {
		RETURN_IF(errno != ENOENT, err, IMS_EIO,
			  "cannot resume into --log-dir '%s': cannot read '%s': %s; " UNREAD_HINT,
			  log_dir, path, strerror(errno));
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	const int metrics = !strcmp(name, "metrics.jsonl");
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	RETURN_IF(fd < 0 && errno != ENOENT, err, IMS_EIO,
		  "cannot resume into --log-dir '%s': cannot read '%s': %s; " UNREAD_HINT,
		  log_dir, path, strerror(errno));
	if (fd < 0)
		return 0; /* removed since the lstat */
	/* metrics.jsonl can be long: its first line is all that is read */
	size_t cap_read = metrics ? 65536 : 1 << 20, len = 0;
	char *text = malloc(cap_read);
	ssize_t n = 1;
	while (text && len < cap_read &&
	       (n = read(fd, text + len, cap_read - len)) > 0)
		len += (size_t)n;
	const int why = errno; /* read's, when n < 0 */
	close(fd);
	int rc = 0;
	if (!text) {
		rc = ims_fail(err, IMS_ENOMEM, "out of memory");
	} else if (n < 0) {
		free(text);
		return ims_fail(err, IMS_EIO,
				"cannot resume into --log-dir '%s': cannot read '%s': %s; " UNREAD_HINT,
				log_dir, path, strerror(why));
	} else {
		rc = run_id_of(text, len, metrics, id, cap, err);
	}
	free(text);
	if (rc)
		ims_fail_context(err, "cannot resume into --log-dir '%s' (reading its %s)", log_dir, name);
	return rc;
}

int loop_check_resumed_logs(run *r, ims_error *err)
{
	const nn_train_opts *o = r->o;
	if (!r->log.owns_dir || !r->part.resumed || !r->part.run_id[0])
		return 0;
	static const char *const names[] = {"summary.json", "metrics.jsonl"};
	for (int i = 0; i < 2; i++) {
		char theirs[32];
		FORWARD_IF_ERR(logged_run_id(o->out.log_dir, names[i], theirs,
					     sizeof(theirs), err));
		RETURN_IF(theirs[0] && strcmp(theirs, r->part.run_id), err, IMS_EEXIST,
			  "cannot resume into --log-dir '%s': it holds the logs of another run "
			  "(its %s is run %s's, the checkpoint is run %s's); give "
			  "this run the --log-dir its earlier parts wrote to, or a new one",
			  o->out.log_dir, names[i], theirs, r->part.run_id);
	}
	return 0;
}

void loop_release_locks(run *r)
{
	for (int i = 0; i < 2; i++) {
		if (r->lock_fd[i] >= 0)
			close(r->lock_fd[i]);
		r->lock_fd[i] = -1;
	}
}

/* The number after `key` in file `path` (a "Key: N kB" line when kb, a
 * lone number otherwise), in bytes; -1 when absent or "max". */
static double file_number(const char *path, const char *key, int kb)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[512];
	double v = -1;
	size_t n = key ? strlen(key) : 0;
	while (fgets(line, sizeof(line), f)) {
		if (key && (strncmp(line, key, n) || line[n] != ':'))
			continue;
		char *end;
		double x = strtod(line + n + (key ? 1 : 0), &end);
		if (end != line + n + (key ? 1 : 0))
			v = kb ? x * 1024.0 : x;
		break;
	}
	fclose(f);
	return v;
}

/* Room left under the process's cgroup memory limit (v2 memory.max, or
 * v1 memory.limit_in_bytes), in bytes; -1 without a limit. */
static double cgroup_room(void)
{
	char path[4096] = "", line[4096];
	FILE *f = fopen("/proc/self/cgroup", "r");
	int v2 = 0;
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "0::", 3) && !path[0]) {
			snprintf(path, sizeof(path), "/sys/fs/cgroup%.3000s", line + 3);
			v2 = 1;
		} else if (strstr(line, ":memory:")) {
			snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%.3000s",
				 strstr(line, ":memory:") + 8);
			v2 = 0;
		}
	}
	if (f)
		fclose(f);
	const char *lim = v2 ? "memory.max" : "memory.limit_in_bytes";
	const char *use = v2 ? "memory.current" : "memory.usage_in_bytes";
	/* in a container the path may not be visible: its root is ours */
	const char *roots[2] = {path, v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory"};
	for (int i = 0; i < 2; i++) {
		char a[4200], b[4200];
		snprintf(a, sizeof(a), "%.4000s/%s", roots[i], lim);
		snprintf(b, sizeof(b), "%.4000s/%s", roots[i], use);
		double l = file_number(a, NULL, 0), u = file_number(b, NULL, 0);
		/* v1 says "no limit" with a number near 2^63 */
		if (l > 0 && u >= 0 && l < 1e18)
			return l > u ? l - u : 0;
		if (l > 0 || u >= 0)
			return -1;
	}
	return -1;
}

/*
 * The CPU's memory check. What the first steps will touch that is not
 * yet resident: the activations' arena, the gradients and the
 * optimiser's state (calloc'd, untouched), and the loaders' rings. More
 * than the machine has available, or than the cgroup leaves, is said as
 * a warning: the kernel may still find room (swap, page cache), but
 * otherwise the OOM killer ends the run mid-way without a word.
 */
static void check_memory_room(run *r)
{
	const nn_train_opts *o = r->o;
	if (!nn_ctx_on_host(&r->ctx) || r->dp.rank != 0)
		return;
	nn_model_memory mem;
	nn_model_memory_info(r->m, &mem);
	size_t np;
	nn_model_params(r->m, &np);
	const double act = (double)mem.activation_bytes;
	const double state = (double)np * 4.0 * (1.0 + (double)nn_optim_state_count(r->opt));
	/* three batches ahead (the loader's default ring), per loader; a
	 * validation batch larger than the rank's share holds the share */
	const double sample = 3.0 * o->data.size * o->data.size * 4.0;
	double val_batch = 0;
	if (r->data.val) {
		uint64_t per = 0;
		aug_loader_share(r->data.val, &per, NULL, NULL);
		val_batch = (double)((uint64_t)o->optim.batch_size < per
					     ? (uint64_t)o->optim.batch_size
					     : per);
	}
	const double rings = ((double)o->optim.batch_size + val_batch) * sample * 3.0;
	const double need = act + state + rings;
	double room = file_number("/proc/meminfo", "MemAvailable", 1);
	const char *what = "the machine";
	const double cg = cgroup_room();
	if (cg >= 0 && (room < 0 || cg < room)) {
		room = cg;
		what = "this process's cgroup limit";
	}
	if (r->hooks.mem_room) {
		room = (double)r->hooks.mem_room;
		what = "the test's room";
	}
	if (room < 0 || need <= room)
		return;
	const double mib = 1048576.0;
	char msg[512];
	snprintf(msg, sizeof(msg),
		 "the first steps will touch about %.0f MiB more memory "
		 "(activations %.0f, gradients and optimiser state %.0f, batches "
		 "%.0f) than %s has free (%.0f MiB): the OOM killer may end this "
		 "run; a smaller --batch-size or --size, or --precision bf16, "
		 "needs less",
		 need / mib, act / mib, state / mib, rings / mib, what, room / mib);
	if (r->log.ev.warning)
		r->log.ev.warning(r->log.ev.ctx, msg);
}

int loop_reserve_memory(run *r, ims_error *err)
{
	FORWARD_IF_ERR(nn_ctx_reserve_blas(&r->ctx, err));
	check_memory_room(r);
	return 0;
}
