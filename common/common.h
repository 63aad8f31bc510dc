/*
 * common.h - status codes, error reports and check macros shared by every
 * imshard library.
 *
 * Caveats:
 *  - Library functions never exit or abort on bad data. They return 0 on
 *    success or a negative IMS_E* code, and fill an ims_error (when the
 *    caller passed one) with a one-line message: lowercase, action first,
 *    subject quoted, then the cause.
 *  - ims_error is caller-owned and plain data; it may live on the stack.
 *    It is not shared between threads.
 */
#ifndef IMSHARD_COMMON_H
#define IMSHARD_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IMS_VERSION_STRING "0.1.0"

/* Status codes. 0 is success; every failure is negative. */
enum {
	IMS_OK = 0,
	IMS_EIO = -1,          /* a system call failed (errno in the message) */
	IMS_ENOMEM = -2,       /* allocation failed */
	IMS_ECORRUPT = -3,     /* data present but damaged: bad CRC, truncated */
	IMS_EFORMAT = -4,      /* not the expected format: not an image, bad magic */
	IMS_EINVAL = -5,       /* invalid argument or option value */
	IMS_ELIMIT = -6,       /* beyond a sanity limit: absurd dimensions, sizes */
	IMS_ENOTFOUND = -7,    /* missing file, key or class */
	IMS_ELMDB = -8,        /* LMDB reported an error */
	IMS_EEXIST = -9,       /* output exists and would be overwritten */
	IMS_EINTR = -10,       /* interrupted by a signal or a callback */
	IMS_EUNSUPPORTED = -11, /* valid but not supported by this build */
	IMS_ECHANGED = -12     /* a file changed (shrank, was rewritten) while
				  it was being read: stop, do not retry */
};

/* Short description of a status code ("corrupt data"). Never NULL. */
const char *ims_strerror(int code);

#define IMS_ERRMSG_MAX 512

typedef struct ims_error {
	int code;                  /* last status code, 0 if none */
	char msg[IMS_ERRMSG_MAX];  /* one line, no trailing newline */
} ims_error;

/* Clears e (code 0, empty message). e may be NULL. */
void ims_error_clear(ims_error *e);

/*
 * Records a failure in e (when e is not NULL) and returns code, so callers
 * can write `return ims_fail(err, IMS_EIO, "cannot open '%s': %s", ...)`.
 */
int ims_fail(ims_error *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prepends "context: " to an existing message, keeping the code. */
int ims_fail_context(ims_error *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Return the failure when cond holds. */
#define RETURN_IF(cond, err, code, ...)                                        \
	do {                                                                   \
		if (cond)                                                      \
			return ims_fail((err), (code), __VA_ARGS__);           \
	} while (0)

/* Return the status of expr when it is negative. */
#define FORWARD_IF_ERR(expr)                                                   \
	do {                                                                   \
		int forward_rc_ = (expr);                                      \
		if (forward_rc_ < 0)                                           \
			return forward_rc_;                                    \
	} while (0)

/* Set rc from a failure and jump to a cleanup label. */
#define GOTO_FAIL(label, rc, err, code, ...)                                   \
	do {                                                                   \
		(rc) = ims_fail((err), (code), __VA_ARGS__);                   \
		goto label;                                                    \
	} while (0)

/* Jump to a cleanup label when expr (assigned to rc) is negative. */
#define GOTO_IF_ERR(label, rc, expr)                                           \
	do {                                                                   \
		(rc) = (expr);                                                 \
		if ((rc) < 0)                                                  \
			goto label;                                            \
	} while (0)

/*
 * A growable byte buffer (buf.c), owned by whoever holds it. A zeroed
 * ims_buf is empty and ready; ims_buf_release frees it. data (text, the
 * same pointer) is NULL until something is reserved or appended; len bytes
 * are in use, cap allocated.
 *
 * Two ways to use it: reserve room and write into data directly (encoders,
 * file reads), or append. Appends keep a NUL after the last byte (text can
 * be used as a C string) and make allocation failure sticky: oom is set,
 * later appends do nothing, so a long text is built without checking each
 * append and checked once (ims_buf_take, or oom) at the end.
 */
typedef struct ims_buf {
	union {
		uint8_t *data; /* the bytes */
		char *text;    /* the same bytes as characters */
	};
	size_t len, cap;
	int oom; /* an append failed for lack of memory */
} ims_buf;

/* Frees b's memory and empties it. b may be NULL. */
void ims_buf_release(ims_buf *b);

/* At least cap bytes allocated in all (len and contents kept); grows to
 * exactly cap, for callers that know the size they need. Errors:
 * IMS_ENOMEM ("cannot allocate N bytes: out of memory"). */
int ims_buf_reserve(ims_buf *b, size_t cap, ims_error *err);

/* Room for more bytes after len and a NUL after them, growing
 * geometrically (appends in a loop stay linear). Errors: IMS_ENOMEM. */
int ims_buf_grow(ims_buf *b, size_t more, ims_error *err);

/* Appends n bytes of p (p may be NULL when n is 0). Returns 0, or
 * IMS_ENOMEM with oom set (and then on every later call). */
int ims_buf_append(ims_buf *b, const void *p, size_t n);
/* Appends the string s (without its NUL). */
int ims_buf_puts(ims_buf *b, const char *s);
/* Appends printf-formatted text. */
int ims_buf_printf(ims_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int ims_buf_vprintf(ims_buf *b, const char *fmt, va_list ap);
/* Appends s (NULL: nothing) as one CSV cell (RFC 4180): quoted, quotes
 * doubled, when it holds a comma, a quote or a line break; and a text a
 * spreadsheet would run as a formula (starting with = + - @, a tab or a
 * carriage return, and not a plain number like "-0.5") quoted with a '
 * first, which makes it text there. */
int ims_buf_csv(ims_buf *b, const char *s);
/* How ims_buf_csv writes s, for a writer of its own: 0 as it is, 1
 * quoted, 2 quoted with a ' first. */
int ims_csv_quoting(const char *s);

/* Moves the contents out as a NUL-terminated malloc'd string (the caller
 * frees it; an empty buffer gives ""), *len (may be NULL) its length; b is
 * left empty. NULL after an allocation failure (b is then released). */
char *ims_buf_take(ims_buf *b, size_t *len);

/*
 * The clock. ims_now: monotonic time in seconds, for durations and rates.
 * ims_now_ns: the same clock in integer nanoseconds, for a time that must
 * fit an atomic word. ims_deadline: the wall-clock (CLOCK_REALTIME) time
 * seconds from now (clamped to 0 .. 1e9), as pthread_cond_timedwait takes
 * it.
 */
double ims_now(void);
int64_t ims_now_ns(void);
struct timespec;
void ims_deadline(double seconds, struct timespec *until);

/* CRC-32C (Castagnoli), as in iSCSI/ext4: crc = ims_crc32c(0, buf, len)
 * for a whole buffer; pass a previous result to continue it. Uses the SSE4.2
 * instruction when the CPU has it. */
uint32_t ims_crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * Deterministic random numbers (xoshiro256**, seeded through splitmix64).
 * The same (seed, stream) gives the same sequence on every machine and
 * thread count; derive independent streams from (seed, epoch, index)
 * instead of sharing one generator between threads.
 */
typedef struct ims_rng {
	uint64_t s[4];
} ims_rng;

void ims_rng_seed(ims_rng *r, uint64_t seed, uint64_t stream);
uint64_t ims_rng_next(ims_rng *r);
/* Uniform integer in [0, n); n > 0. Unbiased (rejection). */
uint64_t ims_rng_below(ims_rng *r, uint64_t n);
/* Uniform double in [0, 1). */
double ims_rng_uniform(ims_rng *r);
/* Mixes any number of 64-bit words into one seed (splitmix64 chain). */
uint64_t ims_hash64(uint64_t a, uint64_t b);

/* Little-endian loads and stores, independent of host byte order. */
static inline uint16_t ims_load_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t ims_load_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}
static inline void ims_store_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}
static inline void ims_store_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/*
 * Half precision: IEEE binary16 (fp16) and bfloat16 (bf16), as uint16_t
 * bits. float -> half rounds to nearest even, as torch's .half() and
 * .bfloat16() do: fp16 overflows to infinity (65520 and up), keeps
 * subnormals, NaN stays NaN (quiet). half -> float is exact, and the
 * rounding is that of the CUDA intrinsics __float2half_rn and
 * __float2bfloat16_rn, so the CPU's 16-bit training (train/layers/mixed.c)
 * can be the reference the device's is held to. Inline: the loader
 * converts every output sample with them.
 */
static inline uint32_t ims_f32_bits_(float f)
{
	uint32_t u;
	__builtin_memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float ims_bits_f32_(uint32_t u)
{
	float f;
	__builtin_memcpy(&f, &u, sizeof(f));
	return f;
}

/* Branch-free for normal results (a data-dependent rounding branch
 * mispredicts half the time): the rounding bias 0xfff plus the odd bit of
 * the kept mantissa gives ties to even, and a carry out of the mantissa
 * bumps the exponent, up to infinity. Subnormal results align the mantissa
 * by a float add of 0.5, which rounds to nearest even in the default
 * rounding mode. */
static inline uint16_t ims_f32_to_f16(float f)
{
	uint32_t x = ims_f32_bits_(f);
	uint32_t sign = (x >> 16) & 0x8000u;
	uint32_t ax = x & 0x7fffffffu;
	uint32_t h;
	if (ax >= 0x47800000u) { /* >= 65536, inf or NaN */
		h = ax > 0x7f800000u ? 0x7e00u : 0x7c00u;
	} else if (ax < 0x38800000u) { /* below 2^-14: subnormal or zero */
		float magic = 0.5f; /* 2^-1: ulp 2^-24, the f16 subnormal step */
		h = ims_f32_bits_(ims_bits_f32_(ax) + magic) - ims_f32_bits_(magic);
	} else {
		h = (ax + 0xc8000fffu + ((ax >> 13) & 1)) >> 13;
	}
	return (uint16_t)(sign | h);
}

static inline uint16_t ims_f32_to_bf16(float f)
{
	uint32_t x = ims_f32_bits_(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);
	x += 0x7fffu + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static inline float ims_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	if (exp == 0) /* zero or subnormal: man * 2^-24, exact in float */
		return ims_bits_f32_(ims_f32_bits_((float)man * 0x1p-24f) | sign);
	if (exp == 31) /* inf, NaN keeps its payload */
		return ims_bits_f32_(sign | 0x7f800000u | (man << 13));
	return ims_bits_f32_(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

static inline float ims_bf16_to_f32(uint16_t b)
{
	return ims_bits_f32_((uint32_t)b << 16);
}

/*
 * Files. All return 0 or a negative code with the message filled.
 *
 * Reading opens nothing that is not a regular file: a FIFO would block the
 * open (or the first read) forever, a device or a folder is never what a
 * dataset, manifest or checkpoint means.
 */

/*
 * Opens path read-only, refusing anything but a regular file (symbolic
 * links are followed) without ever blocking: path is checked with stat
 * before the open (so a device is never opened), opened with O_NONBLOCK
 * (a FIFO swapped in meanwhile cannot block the open), checked again with
 * fstat, and only then switched to blocking reads. *fd receives the
 * descriptor (the caller closes it); st (may be NULL) its fstat, also
 * filled when the file is refused for its type. Errors: IMS_ENOTFOUND
 * (missing), IMS_EFORMAT ("cannot open 'PATH': not a regular file (a
 * FIFO)"), IMS_EIO.
 */
struct stat;
int ims_open_read(const char *path, int *fd, struct stat *st, ims_error *err);

/* ims_open_read as a stdio stream ("rb"); NULL with the message (and
 * err->code) filled on failure. */
FILE *ims_fopen_read(const char *path, ims_error *err);

/* "a FIFO", "a socket", "a folder", "a character device", "a block
 * device", "a symbolic link", "a regular file" or "an unknown kind of
 * file", for a st_mode. */
const char *ims_file_kind(unsigned mode);

/* 1 when a and b name one file: the same path, or two paths to one
 * existing file (same device and inode: a hard or symbolic link, another
 * spelling such as ./x), else 0. What a command checks before it writes
 * an output that could be one of its inputs. */
int ims_same_file(const char *a, const char *b);

/*
 * Reads a whole regular file (ims_open_read) into a malloc'd buffer that
 * the caller frees; *len receives its size. Files larger than max_bytes
 * are refused with IMS_ELIMIT (0 = no limit).
 */
int ims_read_file(const char *path, uint8_t **data, size_t *len,
		  size_t max_bytes, ims_error *err);

/*
 * Temporary files for write-then-rename. The temporary of PATH is
 * PATH.tmp.<pid>, in PATH's folder so that the rename cannot cross file
 * systems. It is created with O_CREAT|O_EXCL|O_NOFOLLOW, so it is always
 * a new file of this process and never reached through a symbolic link
 * planted at that name (such a link, or any other file already at this
 * process's temporary name, is removed first: the name is this process's).
 * Stale temporaries, PATH.tmp.<pid> of processes that no longer exist, are
 * what a crash or a kill leaves; ims_temp_sweep removes them and every
 * writer of PATH below calls it. A pid is judged on this machine: two
 * machines must not write the same PATH in one shared folder.
 *
 * Not for two threads writing the same PATH at once (they would share the
 * temporary name); different paths are fine.
 */

/* Removes dir/NAME.tmp.<pid> for dead pids (NAME = name). Returns the
 * number removed, or a negative code when dir cannot be read. */
int ims_temp_sweep(const char *dir, const char *name, ims_error *err);

/* ims_temp_sweep for every NAME that match(NAME, arg) accepts (nonzero):
 * for writers of many files in one folder, one pass instead of one per
 * file. Only names the caller writes should match: the folder may hold
 * other programs' files. */
int ims_temp_sweep_matching(const char *dir,
			    int (*match)(const char *name, void *arg),
			    void *arg, ims_error *err);

/* ims_temp_sweep for PATH's folder and name. */
int ims_temp_sweep_for(const char *path, ims_error *err);

/* Creates PATH.tmp.<pid> (its name in tmp, tmplen bytes) for writing;
 * *fd receives the descriptor. A failure's message names path, the file
 * the caller writes, and errno stays open's. */
int ims_temp_create(const char *path, char *tmp, size_t tmplen, int *fd,
		    ims_error *err);

/* Makes a written temporary the file: fsync, close, rename over path, fsync
 * of the folder. Always closes fd; removes tmp on failure, whose message
 * names path. */
int ims_temp_publish(int fd, const char *tmp, const char *path, ims_error *err);

/* Abandons a temporary: closes fd (when >= 0) and removes tmp. */
void ims_temp_discard(int fd, const char *tmp);

/* Whether PATH can be written as a temporary and renamed, as far as
 * creating one tells (a folder without write permission, a read-only
 * mount, no inode left): PATH's temporary made and removed at once.
 * ims_temp_create's failure, errno open's. What a command checks before
 * long work whose result it writes so. */
int ims_temp_try(const char *path, ims_error *err);

/* Writes all of data to fd (retrying short writes and EINTR). Returns 0,
 * or -1 with errno set. */
int ims_write_all(int fd, const void *data, size_t len);

/*
 * Writes data to path atomically: stale temporaries of path are swept,
 * path.tmp.<pid> is created (as above), written, fsynced and renamed over
 * path, then the folder is fsynced. Readers see either the old file or the
 * complete new one.
 */
int ims_write_file_atomic(const char *path, const void *data, size_t len,
			  ims_error *err);

/* Flags of ims_write_file_atomic_flags. */
#define IMS_WRITE_NO_SWEEP 0x01 /* the caller swept the folder already
				   (ims_temp_sweep_matching) */

/* ims_write_file_atomic with flags. */
int ims_write_file_atomic_flags(const char *path, const void *data,
				size_t len, unsigned flags, ims_error *err);

/* The first half of ims_write_file_atomic_flags, for writers of several
 * files that must all be written before any replaces its file: path's
 * temporary created (its name in tmp, tmplen bytes; *fd open) and data
 * written to it; ims_temp_publish or ims_temp_discard finishes it. On
 * failure nothing is left, *fd is -1 and the message names path. */
int ims_temp_write(const char *path, const void *data, size_t len,
		   unsigned flags, char *tmp, size_t tmplen, int *fd,
		   ims_error *err);

/* fsyncs the folder that holds path (so a rename in it is durable). */
int ims_fsync_parent(const char *path, ims_error *err);

/*
 * Mapped files that shrink. Reading a page of a memory map past the end of
 * its file raises SIGBUS, which by default ends the process without a word;
 * a shard truncated or rewritten in place while a reader has it mapped does
 * exactly that. Readers register each file they map (ims_mapguard_add); a
 * program that wants the fault reported installs the handler
 * (ims_mapguard_install), which names the file the faulting address lies
 * in, writes one line and exits with status 1. Libraries only register;
 * installing is the program's decision (the Python module, loaded into a
 * program that may handle SIGBUS itself, installs in front of it:
 * ims_mapguard_install_over).
 *
 * The registry is process-wide (a signal handler can reach nothing else):
 * adding and removing are thread-safe and lock-free, and the handler only
 * reads it.
 */

/* Registers [base, base + len) as a map of path (which must stay valid
 * until ims_mapguard_remove). Returns a handle for ims_mapguard_remove, or
 * -1 when out of memory (the map is then simply not named). */
int ims_mapguard_add(const void *base, size_t len, const char *path);

/* Forgets a registration (handle < 0 is ignored). */
void ims_mapguard_remove(int handle);

/*
 * Installs the SIGBUS handler. A fault inside a registered map writes
 * "<prefix>: cannot read 'PATH': the file shrank while it was being read
 * (truncated or rewritten in place?); stopping" to stderr and calls
 * _exit(1); any other bus error gets the default action. prefix must stay
 * valid (a string literal). Returns 0, or IMS_EIO when sigaction fails.
 */
int ims_mapguard_install(const char *prefix);

/*
 * ims_mapguard_install for a library loaded into a program that has not
 * asked for it (the Python module): where SIGBUS has its default action,
 * as ims_mapguard_install. Where the program has a handler of its own
 * (Python's faulthandler, an embedding program's crash reporter) or
 * ignores SIGBUS, the handler goes in front of it: a fault inside a
 * registered map writes the same line, then puts the program's
 * disposition back and returns, so the read faults again and the
 * program's handler gets the fault as it was (its exit status is the
 * program's); any other bus error goes to it straight away. Installs
 * once per process: later calls, and calls after ims_mapguard_install,
 * change nothing. Returns 0, or IMS_EIO when sigaction fails.
 */
int ims_mapguard_install_over(const char *prefix);

/* The registered path whose map holds addr, or NULL. For tests. */
const char *ims_mapguard_find(const void *addr);

/*
 * Folders (dir.c).
 *
 * What a path is, links followed as stat follows them: IMS_KIND_FILE (a
 * regular file), IMS_KIND_FOLDER, IMS_KIND_OTHER (a FIFO, socket, device,
 * dangling link...) or IMS_KIND_NONE (missing or not stat'able). A file is
 * only ever opened through ims_open_read, which checks again: this is for
 * deciding what a path is meant to be, not for trusting it.
 */
enum {
	IMS_KIND_NONE = 0,
	IMS_KIND_FILE = 1,
	IMS_KIND_FOLDER = 2,
	IMS_KIND_OTHER = 3,
	/* listings only: a symbolic link whose target cannot be reached
	 * (missing, or a loop of links), told apart so that a scan can say
	 * so rather than call it a file of another kind */
	IMS_KIND_BROKEN = 4
};
int ims_path_kind(const char *path);

/*
 * A folder's entries sorted byte-wise by name (strcmp), so whatever is
 * built from a listing is the same on every machine and file system. "."
 * and ".." are never listed; other names that start with '.' only with
 * IMS_DIR_HIDDEN. Each entry's kind is an IMS_KIND_* as ims_path_kind
 * gives it; d_type saves the stat for most entries (ImageNet's train
 * folders hold 1.28M files), only links and unknown types are stat'ed.
 *
 * A listing is caller-owned: zero it once, list into it as often as
 * needed (each listing reuses the memory of the one before: no allocation
 * per file or per folder once it has grown), release it at the end. Names
 * point into the listing and live until the next listing or the release.
 */
#define IMS_DIR_HIDDEN 0x01

typedef struct ims_dir_entry {
	const char *name;
	int kind; /* IMS_KIND_FILE, IMS_KIND_FOLDER, IMS_KIND_OTHER or
		     IMS_KIND_BROKEN */
} ims_dir_entry;

typedef struct ims_dir_listing {
	ims_dir_entry *e; /* n entries, sorted by name */
	size_t n;
	/* storage, reused from listing to listing */
	size_t cap, names_len, names_cap;
	char *names;
	size_t *offs;
} ims_dir_listing;

/* Lists folder path into d (flags: 0 or IMS_DIR_HIDDEN). Errors:
 * IMS_ENOTFOUND (missing), IMS_EIO ("cannot read folder 'PATH': why"),
 * IMS_ENOMEM; d then holds no entries. */
int ims_dir_list(const char *path, unsigned flags, ims_dir_listing *d,
		 ims_error *err);

/* The same for the open folder dfd (not closed; its offset is not
 * moved), shown as shown in messages: for walks that open each folder
 * relative to its parent (openat), so path length never limits depth. */
int ims_dir_list_fd(int dfd, const char *shown, unsigned flags,
		    ims_dir_listing *d, ims_error *err);

/* Frees d's memory and empties it. d may be NULL. */
void ims_dir_listing_release(ims_dir_listing *d);

/* mkdir -p. Existing folders are fine. */
int ims_mkdir_p(const char *path, ims_error *err);

/* mkdir -p that says what it made: *created is set to a malloc'd copy of
 * the outermost folder it created (the caller frees it), or NULL when
 * path existed already. A failed writer hands it to ims_rmdir_created so
 * that nothing of a failed run is left behind, not even empty folders.
 * When it fails part way it removes what it made itself (*created NULL). */
int ims_mkdir_p_created(const char *path, char **created, ims_error *err);

/* ims_mkdir_p_created of the folder that holds the file path: *dir is set
 * to that folder (malloc'd; NULL when path names no folder, or "/") and
 * *created as ims_mkdir_p_created sets it; the caller frees both. For
 * writers whose output is a file: a failed run passes both to
 * ims_rmdir_created. */
int ims_mkdir_parent_created(const char *path, char **dir, char **created,
			     ims_error *err);

/* Removes path and its parents up to and including top, each only while
 * empty (rmdir); passes over one that does not exist, stops at the first
 * that is not empty. top NULL does nothing. */
void ims_rmdir_created(const char *path, const char *top);

/* Joins a folder and a relative path into out (size outlen); refuses
 * results that do not fit. */
int ims_path_join(char *out, size_t outlen, const char *dir, const char *rel,
		  ims_error *err);

/* 1 when name can be a file's name inside a folder: not empty, no '/',
 * and not "." or ".." (which name folders); else 0. */
int ims_plain_name(const char *name);

/*
 * 1 when path, resolved (links followed; a part that does not exist yet
 * taken as written, "." and ".." folded), is dir or lies under it
 * (resolved too); 0 otherwise, also when dir does not resolve. For a
 * writer that must not write into the tree it reads.
 */
int ims_path_within(const char *path, const char *dir);
/* ims_path_within with dir resolved as path is (a part that does not
 * exist yet taken as written): for two outputs neither of which is
 * there yet, such as a file and a folder that must not hold it. */
int ims_path_within_loosely(const char *path, const char *dir);

/*
 * Text from the outside (file and folder names, class names) on its way to
 * a terminal or a UTF-8 file (text.c).
 *
 * ims_utf8_valid: 1 when s is well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing past U+10FFFF), else 0 with the offset of the first
 * bad byte in *bad (may be NULL).
 *
 * ims_utf8_prefix: the length of s's longest prefix of at most max bytes
 * that does not end inside a well-formed UTF-8 character: where to cut
 * text shown in part, so the cut adds no bad byte (bytes that are not
 * UTF-8 count one each, as they were).
 *
 * ims_escape: s made safe to print: every byte of a control character
 * (C0, DEL, and C1 U+0080..U+009F, which terminals read as escape
 * sequences: ESC is how a file name could rewrite the screen) and every
 * byte that is not part of well-formed UTF-8 is written as \xHH; the rest
 * (printable ASCII, valid UTF-8 text such as 'Anas x platyrhynchos') is
 * kept. Writes at most len bytes into buf, NUL-terminated, cutting the
 * text with "..." when it does not fit; returns buf.
 */
int ims_utf8_valid(const char *s, size_t *bad);
size_t ims_utf8_prefix(const char *s, size_t max);
const char *ims_escape(const char *s, char *buf, size_t len);

/*
 * ims_escape_json: JSON text as cJSON prints it (C0 controls inside
 * strings already written as \u00XX) made as safe to print as
 * ims_escape's output, and still JSON: DEL and C1 controls become
 * \u007f and \u0080..\u009f, bytes that are not UTF-8 the text \xHH
 * (written \\xHH); everything else is kept, cJSON's own line breaks and
 * TABs included. Returns a malloc'd string the caller frees, NULL when
 * out of memory.
 */
char *ims_escape_json(const char *json);

/*
 * ims_json_parse: cJSON_ParseWithLengthOpts(text, len, end,
 * require_end) that tells why it gave no tree: *oom (when not NULL) is 1
 * when memory ran out (the text may be good JSON: say "out of memory",
 * not "truncated"), 0 when the text is not JSON (*end, when not NULL,
 * points near where the parse stopped). The caller frees the tree with
 * cJSON_Delete. Its first call sets cJSON's allocation hooks for the
 * process (malloc and free, watched); thread-safe.
 */
struct cJSON;
struct cJSON *ims_json_parse(const char *text, size_t len, int require_end,
			     const char **end, int *oom);

/*
 * ims_json_watch, ims_json_print: a tree built for a file, watched from
 * its first node to its text. cJSON_Add* and cJSON_AddItemTo* drop what
 * they could not allocate without a word; ims_json_print gives j's text
 * (cJSON_Print when formatted, else on one line), or NULL when any cJSON
 * allocation of this thread failed since ims_json_watch, or printing ran
 * out: "out of memory", never a file written without the member. The
 * caller frees the text with free().
 */
void ims_json_watch(void);
char *ims_json_print(const struct cJSON *j, int formatted);

/*
 * Names kept one per line (class names: classes files, manifests).
 *
 * ims_name_line_problem: why s cannot be one line of such a file and read
 * back as itself: "is empty", "holds a line break" (LF or CR), "holds a
 * TAB" (where an im2rec list's columns part) or "is only spaces" (read
 * as a blank line); NULL when it can. s may be NULL ("is empty").
 *
 * ims_find_duplicate: whether two of names[0..n) are equal: 1 with the
 * pair whose second name comes first in *first < *dup, 0 when all
 * differ, -1 when out of memory. O(n log n).
 *
 * ims_number_names: numbers names[0..n) (NULL read as ""): no[i] is the
 * same for equal names and differs otherwise, from 0 in the names' sorted
 * order; returns how many distinct names, -1 when out of memory (no then
 * unset). O(n log n).
 */
const char *ims_name_line_problem(const char *s);
long ims_number_names(const char *const *names, size_t n, long *no);
int ims_find_duplicate(const char *const *names, size_t n, size_t *first,
		       size_t *dup);

/*
 * ims_plural: the noun for a count of n, one when n is 1 and many
 * otherwise ("1 shard", "0 shards", "2 shards"): every printed count
 * goes through it. Returns one of its arguments (not copied).
 */
const char *ims_plural(uint64_t n, const char *one, const char *many);

#ifdef __cplusplus
}
#endif

#endif
