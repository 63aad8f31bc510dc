/* test_file.c - reading only regular files, temporaries that are never
 * reached through a link and are swept when their process is gone, and the
 * SIGBUS guard of mapped files. A watchdog alarm turns a hang (a FIFO
 * opened without O_NONBLOCK) into a failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"
#include "test.h"

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static int file_is(const char *path, const char *text)
{
	uint8_t *d;
	size_t n;
	if (ims_read_file(path, &d, &n, 0, NULL) != 0)
		return 0;
	int same = n == strlen(text) && memcmp(d, text, n) == 0;
	free(d);
	return same;
}

/* A pid that is certainly not running: a child that has exited and been
 * reaped (the kernel hands pids out in order, so it is not reused within
 * this test). */
static long dead_pid(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	return (long)p;
}

static void test_open_read(const char *dir)
{
	char fifo[4200], sock[4200], file[4200], sub[4200];
	snprintf(fifo, sizeof(fifo), "%s/pipe.jpg", dir);
	snprintf(sock, sizeof(sock), "%s/sock", dir);
	snprintf(file, sizeof(file), "%s/plain", dir);
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	CHECK_EQ_INT(mkfifo(fifo, 0644), 0);
	CHECK_EQ_INT(mkdir(sub, 0755), 0);
	put_file(file, "abc");
	ims_error e;
	int fd = -1;
	struct stat st;
	/* a FIFO without a writer: a plain open() would wait forever */
	CHECK_EQ_INT(ims_open_read(fifo, &fd, &st, &e), IMS_EFORMAT);
	CHECK_EQ_INT(fd, -1);
	CHECK(strstr(e.msg, "not a regular file (a FIFO)") != NULL);
	CHECK(strstr(e.msg, "pipe.jpg") != NULL);
	CHECK(S_ISFIFO(st.st_mode));
	uint8_t *d = NULL;
	size_t n = 0;
	CHECK_EQ_INT(ims_read_file(fifo, &d, &n, 0, &e), IMS_EFORMAT);
	CHECK(ims_fopen_read(fifo, &e) == NULL);
	CHECK_EQ_INT(e.code, IMS_EFORMAT);
	CHECK_EQ_INT(ims_read_file(sub, &d, &n, 0, &e), IMS_EFORMAT);
	CHECK(strstr(e.msg, "(a folder)") != NULL);
	CHECK_EQ_INT(ims_read_file("/dev/zero", &d, &n, 0, &e), IMS_EFORMAT);
	CHECK(strstr(e.msg, "(a character device)") != NULL);
	/* a socket */
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (s >= 0 && strlen(sock) < sizeof(a.sun_path)) {
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) == 0) {
			CHECK_EQ_INT(ims_read_file(sock, &d, &n, 0, &e), IMS_EFORMAT);
			CHECK(strstr(e.msg, "(a socket)") != NULL);
		}
	}
	if (s >= 0)
		close(s);
	/* a link to a regular file is followed; a link to a FIFO is not */
	char l1[4300], l2[4300];
	snprintf(l1, sizeof(l1), "%s/to-plain", dir);
	snprintf(l2, sizeof(l2), "%s/to-pipe", dir);
	CHECK_EQ_INT(symlink(file, l1), 0);
	CHECK_EQ_INT(symlink(fifo, l2), 0);
	CHECK(file_is(l1, "abc"));
	CHECK_EQ_INT(ims_read_file(l2, &d, &n, 0, &e), IMS_EFORMAT);
	/* a regular file reads blocking, as before */
	CHECK_OK(ims_open_read(file, &fd, &st, &e), &e);
	CHECK(fd >= 0 && !(fcntl(fd, F_GETFL) & O_NONBLOCK));
	CHECK_EQ_U64(st.st_size, 3);
	if (fd >= 0)
		close(fd);
	char missing[4300];
	snprintf(missing, sizeof(missing), "%s/missing", dir);
	CHECK_EQ_INT(ims_open_read(missing, &fd, NULL, &e), IMS_ENOTFOUND);
}

static void test_temporaries(const char *dir)
{
	ims_error e;
	char out[4200], victim[4200], tmp[4300];
	snprintf(out, sizeof(out), "%s/out.json", dir);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	put_file(victim, "precious");
	/* A link planted at this process's temporary name is not followed:
	 * the file it points to keeps its bytes, the output gets the new
	 * ones. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", out, (long)getpid());
	CHECK_EQ_INT(symlink(victim, tmp), 0);
	CHECK_OK(ims_write_file_atomic(out, "new", 3, &e), &e);
	CHECK(file_is(victim, "precious"));
	CHECK(file_is(out, "new"));
	struct stat st;
	CHECK(lstat(tmp, &st) != 0); /* the link is gone, not replaced */
	/* a dangling link too (O_CREAT alone would create its target) */
	char ghost[4300];
	snprintf(ghost, sizeof(ghost), "%s/ghost", dir);
	CHECK_EQ_INT(symlink(ghost, tmp), 0);
	CHECK_OK(ims_write_file_atomic(out, "again", 5, &e), &e);
	CHECK(lstat(ghost, &st) != 0);
	CHECK(file_is(out, "again"));

	/* Stale temporaries: a dead process's is removed by the next writer
	 * of that name; a live process's, another name's and files that
	 * merely look alike are left alone. */
	char stale[4300], live[4300], other[4300], odd[4300];
	long dead = dead_pid();
	snprintf(stale, sizeof(stale), "%s.tmp.%ld", out, dead);
	snprintf(live, sizeof(live), "%s.tmp.%ld", out, (long)getppid());
	snprintf(other, sizeof(other), "%s/other.json.tmp.%ld", dir, dead);
	snprintf(odd, sizeof(odd), "%s.tmp.12x", out);
	put_file(stale, "s");
	put_file(live, "l");
	put_file(other, "o");
	put_file(odd, "x");
	CHECK_OK(ims_write_file_atomic(out, "third", 5, &e), &e);
	CHECK(lstat(stale, &st) != 0);
	CHECK(lstat(live, &st) == 0);
	CHECK(lstat(other, &st) == 0);
	CHECK(lstat(odd, &st) == 0);
	CHECK(file_is(out, "third"));
	/* a stale temporary that is a link: the link goes, its target stays */
	CHECK_EQ_INT(symlink(victim, stale), 0);
	CHECK_EQ_INT(ims_temp_sweep(dir, "out.json", &e), 1);
	CHECK(file_is(victim, "precious"));
	/* without the sweep (callers that swept the folder themselves) */
	put_file(stale, "s");
	CHECK_OK(ims_write_file_atomic_flags(out, "4", 1, IMS_WRITE_NO_SWEEP, &e), &e);
	CHECK(lstat(stale, &st) == 0);
	CHECK_EQ_INT(ims_temp_sweep(dir, "out.json", &e), 1);
	/* the temporary API itself */
	int fd;
	char t[4300];
	CHECK_OK(ims_temp_create(out, t, sizeof(t), &fd, &e), &e);
	CHECK(write(fd, "fifth", 5) == 5);
	CHECK_OK(ims_temp_publish(fd, t, out, &e), &e);
	CHECK(file_is(out, "fifth"));
	CHECK(lstat(t, &st) != 0);
	CHECK_OK(ims_temp_create(out, t, sizeof(t), &fd, &e), &e);
	ims_temp_discard(fd, t);
	CHECK(lstat(t, &st) != 0);
	CHECK(file_is(out, "fifth"));
	/* a temporary that cannot be created (a full disk, no inodes, a
	 * folder gone) is named as the file the caller writes: its name,
	 * with a pid in it, means nothing to the user (before: "cannot
	 * create 'PATH.tmp.PID'") */
	char gone[4300], want[4400];
	snprintf(gone, sizeof(gone), "%s/gone/out.json", dir);
	snprintf(want, sizeof(want), "cannot write '%s': No such file or directory", gone);
	CHECK(ims_temp_create(gone, t, sizeof(t), &fd, &e) == IMS_EIO);
	CHECK_EQ_INT(errno, ENOENT);
	CHECK_EQ_INT(fd, -1);
	CHECK_EQ_STR(e.msg, want);
	CHECK(ims_write_file_atomic(gone, "x", 1, &e) == IMS_EIO);
	CHECK_EQ_STR(e.msg, want);
}

/* Reads the byte at p in a child that installed the guard; returns the
 * child's wait status and its stderr in msg. */
/* A program's own SIGBUS handler: says so, and whether it got a fault
 * (7) or a signal someone sent (8). */
static void their_sigbus(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	ssize_t w = write(2, "theirs\n", 7);
	(void)w;
	_exit(si && si->si_code > 0 ? 7 : 8);
}

enum { GUARD, GUARD_OVER, GUARD_OVER_THEIRS };

/* Reads *p in a child with the guard installed as `how` says; its stderr
 * into msg, its wait status returned. */
static int read_in_child_as(const volatile uint8_t *p, char *msg, size_t len, int how)
{
	int pfd[2];
	if (pipe(pfd) != 0)
		return -1;
	pid_t c = fork();
	if (c == 0) {
		dup2(pfd[1], 2);
		close(pfd[0]);
		/* the default action, or the program's handler: a
		 * sanitizer's runtime may have installed its own */
		signal(SIGBUS, SIG_DFL);
		if (how == GUARD_OVER_THEIRS) {
			struct sigaction sa;
			memset(&sa, 0, sizeof(sa));
			sa.sa_sigaction = their_sigbus;
			sa.sa_flags = SA_SIGINFO;
			sigaction(SIGBUS, &sa, NULL);
		}
		if (how == GUARD)
			ims_mapguard_install("test_file");
		else if (ims_mapguard_install_over("test_file") != 0 ||
			 ims_mapguard_install_over("twice") != 0)
			_exit(9);
		volatile uint8_t v = *p;
		(void)v;
		_exit(0);
	}
	close(pfd[1]);
	size_t got = 0;
	ssize_t n;
	while (got + 1 < len && (n = read(pfd[0], msg + got, len - 1 - got)) > 0)
		got += (size_t)n; /* the guard writes its line in pieces */
	msg[got] = '\0';
	close(pfd[0]);
	int status = 0;
	waitpid(c, &status, 0);
	return status;
}

static int read_in_child(const volatile uint8_t *p, char *msg, size_t len)
{
	return read_in_child_as(p, msg, len, GUARD);
}

/* ims_temp_try: a temporary made and gone again where one can be made;
 * where none can (a folder not there), the file named and open's errno
 * kept for the caller's message */
static void test_temp_try(const char *dir)
{
	ims_error e;
	char path[4200], tmp[4300], none[4200];
	snprintf(path, sizeof(path), "%s/try.json", dir);
	CHECK_OK(ims_temp_try(path, &e), &e);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	struct stat st;
	CHECK(lstat(tmp, &st) != 0);
	CHECK(lstat(path, &st) != 0);
	snprintf(none, sizeof(none), "%s/not-there/try.json", dir);
	errno = 0;
	CHECK_EQ_INT(ims_temp_try(none, &e), IMS_EIO);
	CHECK_EQ_INT(errno, ENOENT);
	CHECK(strstr(e.msg, "not-there/try.json'") != NULL);
}

static void test_mapguard(const char *dir)
{
	char path[4200], msg[1024];
	snprintf(path, sizeof(path), "%s/mapped.bin", dir);
	long page = sysconf(_SC_PAGESIZE);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0 && ftruncate(fd, 3 * page) == 0);
	uint8_t *map = mmap(NULL, (size_t)(3 * page), PROT_READ, MAP_SHARED, fd, 0);
	CHECK(map != MAP_FAILED);
	if (fd < 0 || map == MAP_FAILED)
		return;
	int h = ims_mapguard_add(map, (size_t)(3 * page), path);
	CHECK(h >= 0);
	CHECK(ims_mapguard_find(map + page) == path);
	CHECK(ims_mapguard_find(map + 3 * page) == NULL);
	/* many registrations: the registry grows past one chunk */
	int more[600];
	for (int i = 0; i < 600; i++)
		more[i] = ims_mapguard_add((void *)(uintptr_t)(0x10000 + 16 * i), 16, "x");
	CHECK(ims_mapguard_find((void *)(uintptr_t)(0x10000 + 16 * 599 + 3)) != NULL);
	for (int i = 0; i < 600; i++)
		ims_mapguard_remove(more[i]);
	CHECK(ims_mapguard_find((void *)(uintptr_t)0x10003) == NULL);
	CHECK(ims_mapguard_find(map) == path);

	/* intact: the child reads and exits 0 */
	int st = read_in_child(map + 2 * page, msg, sizeof(msg));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* the file shrinks under the map: one line naming it, status 1 */
	CHECK_EQ_INT(ftruncate(fd, page), 0);
	st = read_in_child(map + 2 * page, msg, sizeof(msg));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	char want[4400];
	snprintf(want, sizeof(want), "test_file: cannot read '%s': the file shrank while it was being read", path);
	CHECK(strstr(msg, want) == msg);
	CHECK(strchr(msg, '\n') == msg + strlen(msg) - 1);
	/* installed over the default action: the same */
	st = read_in_child_as(map + 2 * page, msg, sizeof(msg), GUARD_OVER);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	CHECK(strstr(msg, want) == msg);
	/* installed over a handler of the program's: the line, then the
	 * program's handler gets the fault itself (not a signal sent) */
	st = read_in_child_as(map + 2 * page, msg, sizeof(msg), GUARD_OVER_THEIRS);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	CHECK(strstr(msg, want) == msg);
	CHECK(strstr(msg, "stopping\ntheirs\n") != NULL);
	/* a map nobody registered: the default action (killed by SIGBUS) */
	ims_mapguard_remove(h);
	st = read_in_child(map + 2 * page, msg, sizeof(msg));
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS);
	st = read_in_child_as(map + 2 * page, msg, sizeof(msg), GUARD_OVER);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS && msg[0] == '\0');
	/* over the program's handler: straight to it, the fault as it was */
	st = read_in_child_as(map + 2 * page, msg, sizeof(msg), GUARD_OVER_THEIRS);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
	CHECK(strcmp(msg, "theirs\n") == 0);
	munmap(map, (size_t)(3 * page));
	close(fd);
}

int main(void)
{
	alarm(60); /* a hang is a failure */
	char dir[4096];
	test_tmpdir(dir, sizeof(dir), "file");
	test_open_read(dir);
	test_temporaries(dir);
	test_temp_try(dir);
	test_mapguard(dir);
	return test_tmp_done(dir, TEST_EXIT());
}
