/* SPDX-License-Identifier: MIT
 * pp-presets.h: named model shapes and device descriptions that a scenario's [model] preset
 * and [hardware] preset keys refer to. Static, read-only tables; each number in
 * pp-presets.c carries a comment with its source or the reasoning behind it.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* A GPT-2-style decoder shape (the fields of [model]). */
typedef struct {
    const char *name;
    int32_t     layers;  /* transformer blocks L */
    int32_t     hidden;  /* C */
    int32_t     heads;   /* NH */
    int32_t     seq_len; /* T */
    int32_t     vocab;   /* V */
} PpModelPreset;

/* One accelerator and the link between neighbouring pipeline stages (the fields of
 * [hardware] except devices and the kernel-efficiency curve). */
typedef struct {
    const char *name;
    double      peak_flops;          /* dense bf16 tensor FLOP/s, fp32 accumulate */
    int64_t     memory_bytes;        /* device memory */
    double      mem_bw_bytes_per_s;  /* device memory bandwidth */
    double      link_bw_bytes_per_s; /* stage-to-stage link, one direction */
    int64_t     link_latency_ns;     /* one small stage-to-stage message */
    gboolean    nvlink;              /* TRUE: NVLink; FALSE: PCIe */
} PpHardwarePreset;

/* --- lookup --- */

/* Returns: (transfer none) (nullable): the model preset called @name, or NULL. */
const PpModelPreset *pp_preset_model_lookup(const char *name);
/* Returns: (transfer none) (nullable): the hardware preset called @name, or NULL. */
const PpHardwarePreset *pp_preset_hardware_lookup(const char *name);
/* Returns: (transfer full): "gpt2, gpt2-medium, ..." for error messages and --help. */
char *pp_preset_model_names(void);
/* Returns: (transfer full): "a100-sxm, h100-sxm, ..." for error messages and --help. */
char *pp_preset_hardware_names(void);

G_END_DECLS
