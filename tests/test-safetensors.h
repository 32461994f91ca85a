/* SPDX-License-Identifier: MIT
 * test-safetensors.h: test-side safetensors editing, independent of the loader: split a file
 * into its parsed JSON header and its data section, change either (shift offsets, drop or
 * recompute a checksum, poke values) and write it back, as damage or a crafted file would.
 * Each helper aborts the calling test (ck_abort) with a message naming what failed.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

/* A safetensors file as two parts. */
typedef struct {
    JsonObject *header; /* the JSON header, tensors and __metadata__ (owned) */
    GByteArray *data;   /* the data section (owned) */
} TestSafetensors;

/* Reads @path into @st (the header length must be a multiple of 8, as every writer pads). */
void test_safetensors_read(TestSafetensors *st, const char *path);
/* Writes @st to @path: the header serialised again and padded with spaces to 8 bytes. */
void test_safetensors_write(const TestSafetensors *st, const char *path);
void test_safetensors_clear(TestSafetensors *st);

/* The bytes of tensor @name in @st's data (transfer none), @len bytes long (its data_offsets
 * span, checked to lie inside the data). */
guint8 *test_safetensors_tensor(const TestSafetensors *st, const char *name, gsize *len);

/* Moves tensor @name's data_offsets @by bytes later (its span unchanged). */
void test_safetensors_shift(TestSafetensors *st, const char *name, gint64 by);

/* Sets the metadata entry pacer_crc32c.@name to the CRC-32C of the tensor's bytes now. */
void test_safetensors_fix_crc(TestSafetensors *st, const char *name);
