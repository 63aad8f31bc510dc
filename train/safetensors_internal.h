/*
 * safetensors_internal.h - what safetensors.c (reader) and
 * safetensors_write.c (writer) share: dtype and shape checks, and the
 * parts of the content checksum both compute.
 */
#ifndef IMSHARD_SAFETENSORS_INTERNAL_H
#define IMSHARD_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* A dtype of the ST_ enum with a name and a size. */
int st_dtype_known(int dtype);
void st_store_le64(uint8_t *p, uint64_t v);
/* s is RFC 3629 UTF-8 (no overlong forms, surrogates, values past
 * U+10FFFF). */
int st_valid_utf8(const char *s);
/* Product of a shape and an element size; -1 on overflow of 2^63. */
int st_shape_bytes(const int64_t *shape, int ndim, size_t esize,
		   uint64_t *numel, uint64_t *nbytes);
/* The checksum's parts: a tensor's (tag, name, dtype, shape, bytes), and
 * the metadata's (entries but `skip`, in key order). */
uint32_t st_crc_tensor(uint32_t crc, const char *name, int dtype, int ndim,
		       const int64_t *shape, const void *data, uint64_t nbytes);
int st_crc_meta(uint32_t *crc, char *const *keys, char *const *values,
		size_t n, const char *skip, ims_error *err);

#endif
