/* SPDX-License-Identifier: MIT
 * exec-crc32c.h: CRC-32C (Castagnoli), the checksum pacer records for every tensor of a
 * safetensors file it writes (exec-checkpoint.h), so that a damaged tensor is named on load.
 */
#pragma once

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

/* CRC-32C of @n bytes at @data continuing from @crc (0 to start; the result of the previous
 * call to extend it): reflected polynomial 0x82F63B78, initial and final value inverted, so
 * exec_crc32c(0, "123456789", 9) == 0xE3069283. Thread-safe. */
uint32_t exec_crc32c(uint32_t crc, const void *data, size_t n);

G_END_DECLS
