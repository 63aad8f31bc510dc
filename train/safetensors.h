/*
 * safetensors.h - reading and writing safetensors files
 * (https://github.com/huggingface/safetensors), the checkpoint format
 * (train/checkpoint.h): an 8-byte little-endian header length N, N bytes
 * of JSON
 *   {"__metadata__": {"key": "value", ...},
 *    "name": {"dtype": "F32", "shape": [64, 3], "data_offsets": [b, e]}, ...}
 * padded with spaces, then the byte buffer that tensor data tiles exactly:
 * offsets are relative to the buffer's start, tensors neither overlap nor
 * leave gaps, and the last one ends at the end of the file. Tensor data is
 * little-endian and row-major (C order), with no alignment promised: a
 * foreign file may put an F32 tensor at an odd offset.
 *
 * Caveats:
 *   - An st_file is immutable after st_open and may be read by several
 *     threads at once. Its tensors' data points into a read-only memory
 *     map of the file: valid until st_close. Replace checkpoints by rename
 *     (as st_writer_write does), never by rewriting a mapped file in
 *     place: a file truncated under a map raises SIGBUS on access.
 *   - An st_writer is used by one thread at a time. It borrows tensor data
 *     (no copy) until st_writer_write returns or the writer is freed.
 */
#ifndef IMSHARD_SAFETENSORS_H
#define IMSHARD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* Element types, with the format's names ("F32", ...). */
typedef enum st_dtype {
	ST_BOOL = 1, /* one byte, 0 or 1 */
	ST_U8,
	ST_I8,
	ST_F8_E5M2,  /* stored and copied only: no conversion */
	ST_F8_E4M3,
	ST_I16,
	ST_U16,
	ST_F16,      /* IEEE 754 binary16 */
	ST_BF16,     /* bfloat16: the high half of a float32 */
	ST_I32,
	ST_U32,
	ST_F32,
	ST_F64,
	ST_I64,
	ST_U64
} st_dtype;

/* The format's name of dtype ("F32"), or "unknown". Never NULL. */
const char *st_dtype_name(int dtype);
/* The st_dtype named name (case-sensitive, as in the format), or 0 when
 * the name is unknown. */
int st_dtype_from_name(const char *name);
/* Bytes per element of dtype; 0 when dtype is unknown. */
size_t st_dtype_size(int dtype);

/* Header lengths above this are refused (the reference implementation's
 * limit). */
#define ST_MAX_HEADER_BYTES 100000000u

/* One tensor of an open file. Everything is owned by the st_file and lives
 * until st_close. */
typedef struct st_tensor {
	const char *name;     /* NUL-terminated UTF-8 */
	int dtype;            /* st_dtype */
	int ndim;             /* 0 for a scalar */
	const int64_t *shape; /* ndim sizes, each >= 0 */
	uint64_t numel;       /* product of shape: 1 for a scalar, 0 when a
				 size is 0 */
	uint64_t offset;      /* data_offsets[0]: from the buffer's start */
	uint64_t nbytes;      /* numel * st_dtype_size(dtype) */
	const void *data;     /* nbytes little-endian bytes in the map; any
				 alignment; not NULL even when nbytes is 0 */
} st_tensor;

typedef struct st_file st_file;

/*
 * Opens the safetensors file at path and validates all of it before
 * returning: header length within the limit and the file, the header
 * valid UTF-8 JSON with nothing but whitespace after the object, every
 * entry an object with a known "dtype", a "shape" of non-negative integers
 * and "data_offsets" [begin, end] with begin <= end, shape times element
 * size equal to end - begin, no name twice, "__metadata__" (optional) an
 * object of strings, and the tensors tiling the buffer exactly. Keys of a
 * tensor entry other than those three are ignored, as the reference
 * implementation does.
 *
 * On success *out is a new handle for st_close. Errors (message names the
 * file, and the tensor where one is at fault): IMS_ENOTFOUND (no such
 * file), IMS_EIO, IMS_EFORMAT (the header does not start with '{': not a
 * safetensors file), IMS_ELIMIT (header longer than ST_MAX_HEADER_BYTES),
 * IMS_ECORRUPT (anything else above), IMS_ENOMEM.
 */
int st_open(const char *path, st_file **out, ims_error *err);

/* Unmaps and frees f; every st_tensor and string it handed out dies with
 * it. f may be NULL. */
void st_close(st_file *f);

/* The path f was opened with. */
const char *st_path(const st_file *f);

/* Number of tensors. */
size_t st_count(const st_file *f);

/*
 * The whole file as it was mapped by st_open, every byte (header, padding
 * and data): its CRC-32C (iSCSI's, as ims_crc32c computes it) returned
 * and its size in bytes in *bytes (bytes may be NULL). Unlike st_checksum
 * it covers the bytes as they lie, so it names this very file, for
 * saying which file a program read. Reads the whole file.
 */
uint32_t st_file_crc32c(const st_file *f, uint64_t *bytes);

/*
 * Tensor i (0 <= i < st_count) in file order: by data_offsets, which for
 * files written by st_writer is the order tensors were added; empty
 * tensors sharing an offset keep their header order. NULL when i is out of
 * range.
 */
const st_tensor *st_tensor_at(const st_file *f, size_t i);

/* The tensor called name, or NULL. O(log n). */
const st_tensor *st_find(const st_file *f, const char *name);

/* As st_find, but a missing tensor is IMS_ENOTFOUND with a message naming
 * the tensor and the file. */
int st_get(const st_file *f, const char *name, const st_tensor **out,
	   ims_error *err);

/* Metadata ("__metadata__") entries, in header order. st_metadata_at
 * returns the key of entry i and sets *value (both owned by f), or NULL
 * when i is out of range. st_metadata_get returns the value of key, or NULL
 * when it is absent. */
size_t st_metadata_count(const st_file *f);
const char *st_metadata_at(const st_file *f, size_t i, const char **value);
const char *st_metadata_get(const st_file *f, const char *key);

/*
 * Converts tensor t into out, which holds n values; n must equal t->numel
 * (a shape check for the caller: loading a checkpoint into the wrong
 * model fails here). st_tensor_to_f32 reads F32, F16, BF16 (exact) and
 * F64 (rounded to nearest); st_tensor_to_i64 reads every integer type and
 * BOOL (any non-zero byte is 1). Errors, with the tensor's name: other
 * dtypes IMS_EUNSUPPORTED, a wrong n IMS_EINVAL, a U64 value above
 * INT64_MAX IMS_ELIMIT (out is then partly written).
 */
int st_tensor_to_f32(const st_tensor *t, float *out, size_t n,
		     ims_error *err);
int st_tensor_to_i64(const st_tensor *t, int64_t *out, size_t n,
		     ims_error *err);

typedef struct st_writer st_writer;

/* Makes an empty writer into *out. Error: IMS_ENOMEM. */
int st_writer_create(st_writer **out, ims_error *err);

/* Frees w (not the tensor data it borrowed). w may be NULL. */
void st_writer_free(st_writer *w);

/*
 * Adds a tensor: name (copied; valid UTF-8, not "__metadata__", not added
 * before), dtype (an st_dtype), shape (ndim sizes >= 0, copied; ndim 0 is
 * a scalar and shape may then be NULL) and data, the
 * numel * st_dtype_size(dtype) bytes in little-endian order (the host's on
 * x86-64 and arm64), BORROWED until st_writer_write returns or the writer
 * is freed; data may be NULL only when that size is 0. Tensors are written
 * in the order they are added. Errors: IMS_EINVAL (with the tensor's name),
 * IMS_ELIMIT (size overflows), IMS_ENOMEM.
 */
int st_writer_add(st_writer *w, const char *name, int dtype, int ndim,
		  const int64_t *shape, const void *data, ims_error *err);

/* Sets metadata key to value (both copied, valid UTF-8); setting a key
 * again replaces its value in place. Errors: IMS_EINVAL, IMS_ENOMEM. */
int st_writer_set_metadata(st_writer *w, const char *key, const char *value,
			   ims_error *err);

/*
 * Writes everything added so far to path atomically: the file is written
 * to path.tmp.<pid> in the same folder, fsynced, renamed over path, and
 * the folder fsynced, so readers see the old file or the whole new one.
 * The header is the reference layout: "__metadata__" first (omitted when
 * empty), then the tensors with data_offsets in order, padded with spaces
 * to a multiple of 8 bytes so the buffer starts 8-byte aligned. The writer
 * stays usable. Errors: IMS_EIO (message names the file and errno's
 * text; the temporary file is removed), IMS_EINVAL (path too long),
 * IMS_ENOMEM.
 */
int st_writer_write(const st_writer *w, const char *path, ims_error *err);

/*
 * A checksum of a file's content, independent of how its header is laid
 * out: CRC-32C over each tensor in name order (its name, dtype name,
 * shape, byte count and bytes, each string with its terminator, numbers
 * as 8 bytes little-endian, after a tag byte 'T') and then each metadata
 * entry in key order (tag 'M', key, value), leaving out the entry named
 * `skip` (NULL: none) where the checksum itself is kept.
 * st_writer_checksum computes the same value over what a writer holds, so
 * a file written with it in its metadata can be checked on open. The
 * tensors' bytes are read (the whole file). Errors: IMS_ENOMEM.
 */
int st_checksum(const st_file *f, const char *skip, uint32_t *out,
		ims_error *err);
int st_writer_checksum(const st_writer *w, const char *skip, uint32_t *out,
		       ims_error *err);

#endif
