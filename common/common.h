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
	IMS_EUNSUPPORTED = -11 /* valid but not supported by this build */
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

/* Monotonic time in seconds. */
double ims_now(void);

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
 * Files. All return 0 or a negative code with the message filled.
 *
 * ims_read_file reads a whole file into a malloc'd buffer that the caller
 * frees; *len receives its size. Files larger than max_bytes are refused
 * with IMS_ELIMIT (0 = no limit).
 */
int ims_read_file(const char *path, uint8_t **data, size_t *len,
		  size_t max_bytes, ims_error *err);

/*
 * Writes data to path atomically: path.tmp.<pid> is written, fsynced and
 * renamed over path, then the folder is fsynced. Readers see either the old
 * file or the complete new one.
 */
int ims_write_file_atomic(const char *path, const void *data, size_t len,
			  ims_error *err);

/* fsyncs the folder that holds path (so a rename in it is durable). */
int ims_fsync_parent(const char *path, ims_error *err);

/* mkdir -p. Existing folders are fine. */
int ims_mkdir_p(const char *path, ims_error *err);

/* Joins a folder and a relative path into out (size outlen); refuses
 * results that do not fit. */
int ims_path_join(char *out, size_t outlen, const char *dir, const char *rel,
		  ims_error *err);

/*
 * Text from the outside (file and folder names, class names) on its way to
 * a terminal or a UTF-8 file (text.c).
 *
 * ims_utf8_valid: 1 when s is well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing past U+10FFFF), else 0 with the offset of the first
 * bad byte in *bad (may be NULL).
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
const char *ims_escape(const char *s, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
