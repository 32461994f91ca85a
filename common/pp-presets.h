/* SPDX-License-Identifier: MIT
 * pp-presets.h: named model shapes and device descriptions that a scenario's [model] preset
 * and [hardware] preset keys refer to. Static, read-only tables; each number in
 * pp-presets.c carries a comment with its source or the reasoning behind it.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* A decoder shape (the fields of [model]). The fields after vocab are 0 (FALSE) for GPT-2's
 * layer: the scenario then derives kv_heads = heads, head_dim = hidden / heads and ffn_hidden =
 * 4 * hidden, with ffn = gelu, attention = mha and no experts. kv_lora_rank > 0 selects
 * attention = mla; experts > 0 a mixture of experts (expert_ffn_hidden 0: ffn_hidden). */
typedef struct {
    const char *name;
    int32_t     layers;     /* transformer blocks L */
    int32_t     hidden;     /* C */
    int32_t     heads;      /* NH */
    int32_t     seq_len;    /* T */
    int32_t     vocab;      /* V */
    int32_t     kv_heads;   /* key/value heads (grouped-query attention); 0: heads */
    int32_t     ffn_hidden; /* FFN inner width; 0: 4 * hidden */
    gboolean    ffn_gated;  /* TRUE: SwiGLU (ffn = swiglu) */
    int32_t     head_dim;   /* width of one head; 0: hidden / heads */
    int32_t     q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
    int32_t     experts, experts_per_token, shared_experts, expert_ffn_hidden, dense_layers;
} PpModelPreset;

/* One accelerator, its node and its two link classes (the fields of [hardware] except
 * devices). The kernel-efficiency fields are the simulator's calibration for this GPU type,
 * fitted once against published runs (docs/published-runs.md); uncalibrated presets keep the key
 * table's defaults. */
typedef struct {
    const char *name;
    double      peak_flops;               /* dense bf16 tensor FLOP/s, fp32 accumulate */
    double      peak_fp8_flops;           /* dense fp8 tensor FLOP/s; 0: not given here */
    int64_t     memory_bytes;             /* device memory */
    double      mem_bw_bytes_per_s;       /* device memory bandwidth */
    double      link_bw_bytes_per_s;      /* GPU-to-GPU link inside a node, one direction */
    int64_t     link_latency_ns;          /* one small message inside a node */
    gboolean    nvlink;                   /* TRUE: NVLink; FALSE: PCIe */
    int32_t     gpus_per_node;            /* GPUs that share the intra-node link */
    double      internode_bw_bytes_per_s; /* one GPU's link to other nodes, one direction */
    int64_t     internode_latency_ns;     /* one small message between nodes */
    int32_t     nics_per_node;            /* NICs of one node; 0: not given here (1) */
    int64_t     collective_ns;            /* fixed cost of one collective (pp-scenario.h) */
    const char *calibration_of;           /* a GPU of the same family whose fit this one
                                             shares: the fields below are read from that
                                             preset (which is calibrated); NULL: its own */
    gboolean calibrated;                  /* TRUE: the fields below are the fit  */
    double   kernel_eff_max;              /* in (0, 1] */
    double   kernel_eff_half_tokens;      /* >= 0 */
    double   kernel_eff_half_hidden;      /* >= 0 */
    double   kernel_eff_fp8;              /* in (0, 1]; 1 on devices without fp8 */
    double   alltoall_eff;                /* in (0, 1] */
    gboolean operator_costs;              /* TRUE: cost_model = operators (calibrated) */
    int64_t  launch_ns;                   /* >= 0 (pp-scenario.h) */
    int32_t  sms;                         /* streaming multiprocessors (datasheet); 0: none */
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
