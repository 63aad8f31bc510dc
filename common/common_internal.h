/* common_internal.h - exposed for tests only. */
#ifndef IMSHARD_COMMON_INTERNAL_H
#define IMSHARD_COMMON_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C computed without the SSE4.2 instruction (the table fallback). */
uint32_t ims_crc32c_portable(uint32_t crc, const void *buf, size_t len);

/* What ims_json_parse's allocations call (malloc): a test makes it fail. */
extern void *(*ims_json_malloc)(size_t);

#endif
