/* SPDX-License-Identifier: MIT
 * exec-crc32c.c: CRC-32C eight bytes at a time ("slicing by 8"): eight 256-entry tables, where
 * table k maps a byte to its contribution k bytes before the end of an 8-byte block, so each
 * block costs eight lookups instead of eight dependent byte steps.
 */
#include "exec-crc32c.h"

#include <string.h>

#define EXEC_CRC32C_POLY 0x82F63B78u /* Castagnoli, bit-reversed */

static uint32_t exec_crc32c_table[8][256];

static gpointer exec_crc32c_init(gpointer unused) {
    (void)unused;
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++)
            c = (c & 1u) ? (c >> 1) ^ EXEC_CRC32C_POLY : c >> 1;
        exec_crc32c_table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++) {
            uint32_t prev = exec_crc32c_table[k - 1][b];
            exec_crc32c_table[k][b] = (prev >> 8) ^ exec_crc32c_table[0][prev & 0xffu];
        }
    return NULL;
}

uint32_t exec_crc32c(uint32_t crc, const void *data, size_t n) {
    static GOnce once = G_ONCE_INIT;
    g_once(&once, exec_crc32c_init, NULL);
    const uint32_t(*t)[256] = (const uint32_t(*)[256])exec_crc32c_table;
    const uint8_t *p = data;
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo, hi; /* the block's bytes 0-3 and 4-7 as little-endian words */
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo = GUINT32_FROM_LE(lo) ^ crc;
        hi = GUINT32_FROM_LE(hi);
        crc = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^ t[5][(lo >> 16) & 0xffu] ^
              t[4][lo >> 24] ^ t[3][hi & 0xffu] ^ t[2][(hi >> 8) & 0xffu] ^
              t[1][(hi >> 16) & 0xffu] ^ t[0][hi >> 24];
    }
    for (; n > 0; n--, p++)
        crc = t[0][(crc ^ *p) & 0xffu] ^ (crc >> 8);
    return ~crc;
}
