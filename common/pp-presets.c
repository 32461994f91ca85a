/* SPDX-License-Identifier: MIT
 * pp-presets.c: the model and hardware preset tables behind pp-presets.h.
 * Model shapes follow the Hugging Face GPT-2 configs, the zero-bubble paper's
 * configurations (Qi et al., ICLR 2024; docs/design.md §6.2) and the Llama 3 paper's Table 3.
 * Device figures are vendor datasheet peaks, dense (without 2:4 sparsity); link figures for
 * PCIe are effective (not signalling) rates; node figures follow the vendors' reference
 * servers (one NIC per GPU on DGX/HGX).
 */
#include "pp-presets.h"

#include <string.h>

#define PP_GIB ((int64_t)1 << 30)

/* A dense multi-head or grouped-query shape: name, layers, hidden, heads, seq_len, vocab,
 * kv_heads, ffn_hidden, ffn_gated (0, 0, FALSE: GPT-2's layer); the fields it leaves out are
 * 0. The mixtures of experts below name every field they set. */
#define PP_DENSE(n, L, h, a, s, V, k, f, gated)                                                    \
    {                                                                                              \
        .name = n, .layers = L, .hidden = h, .heads = a, .seq_len = s, .vocab = V, .kv_heads = k,  \
        .ffn_hidden = f, .ffn_gated = gated                                                        \
    }

static const PpModelPreset pp_model_presets[] = {
    /* HF "gpt2" config.json: n_layer, n_embd, n_head, n_positions, vocab_size */
    PP_DENSE("gpt2", 12, 768, 12, 1024, 50257, 0, 0, FALSE),
    /* HF "gpt2-medium" config: same fields; the PACI paper's model (docs/design.md §6.1) */
    PP_DENSE("gpt2-medium", 24, 1024, 16, 1024, 50257, 0, 0, FALSE),
    /* HF "gpt2-large" config: same fields as above */
    PP_DENSE("gpt2-large", 36, 1280, 20, 1024, 50257, 0, 0, FALSE),
    /* HF "gpt2-xl" config: same fields as above */
    PP_DENSE("gpt2-xl", 48, 1600, 25, 1024, 50257, 0, 0, FALSE),
    /* zero-bubble paper 1.5B (docs/design.md §6.2): layers, hidden, heads, seq 1024; GPT-2 vocab */
    PP_DENSE("zb-1.5b", 24, 2304, 24, 1024, 50257, 0, 0, FALSE),
    /* zero-bubble paper 6.2B: as above */
    PP_DENSE("zb-6.2b", 32, 4096, 32, 1024, 50257, 0, 0, FALSE),
    /* zero-bubble paper 14.6B: as above */
    PP_DENSE("zb-14.6b", 48, 5120, 40, 1024, 50257, 0, 0, FALSE),
    /* zero-bubble paper 28.3B: as above */
    PP_DENSE("zb-28.3b", 64, 6144, 48, 1024, 50257, 0, 0, FALSE),
    /* Llama 3 (Meta, "The Llama 3 Herd of Models", 2024, Table 3: layers, model dimension,
     * FFN dimension, attention heads, key/value heads; SwiGLU) with the released model
     * configs' vocab_size 128256 (the paper's 128K tokens plus special tokens) and the
     * pre-training sequence length of 8192 tokens (§3.4.1, after a first stretch at 4096);
     * head width 128 = hidden / heads. */
    PP_DENSE("llama3-8b", 32, 4096, 32, 8192, 128256, 8, 14336, TRUE),
    /* Llama 3 70B: as above */
    PP_DENSE("llama3-70b", 80, 8192, 64, 8192, 128256, 8, 28672, TRUE),
    /* Llama 3 405B: as above (the released config's intermediate_size is the same 53248) */
    PP_DENSE("llama3-405b", 126, 16384, 128, 8192, 128256, 8, 53248, TRUE),
    /* Mixtral 8x7B (Jiang et al., "Mixtral of Experts", 2024, Table 1; HF
     * mistralai/Mixtral-8x7B-v0.1 config.json: num_hidden_layers 32, hidden_size 4096,
     * num_attention_heads 32, num_key_value_heads 8, head_dim 128, intermediate_size 14336,
     * num_local_experts 8, num_experts_per_tok 2, vocab_size 32000, the paper's context
     * 32768); 46.7B parameters, 12.9B active (the paper's figures) */
    {.name = "mixtral-8x7b",
     .layers = 32,
     .hidden = 4096,
     .heads = 32,
     .seq_len = 32768,
     .vocab = 32000,
     .kv_heads = 8,
     .ffn_hidden = 14336,
     .ffn_gated = TRUE,
     .head_dim = 128,
     .experts = 8,
     .experts_per_token = 2},
    /* Mixtral 8x22B (Mistral AI's release; HF mistral-community/Mixtral-8x22B-v0.1 config:
     * 56 layers, hidden_size 6144, 48 heads, 8 key/value heads, intermediate_size 16384, 8
     * experts of which 2 per token, vocab_size 32000, context 65536); 141B total, 39B active */
    {.name = "mixtral-8x22b",
     .layers = 56,
     .hidden = 6144,
     .heads = 48,
     .seq_len = 65536,
     .vocab = 32000,
     .kv_heads = 8,
     .ffn_hidden = 16384,
     .ffn_gated = TRUE,
     .head_dim = 128,
     .experts = 8,
     .experts_per_token = 2},
    /* Qwen3-30B-A3B (Qwen3 Technical Report, 2025, Table 2; HF Qwen/Qwen3-30B-A3B config:
     * num_hidden_layers 48, hidden_size 2048, num_attention_heads 32, num_key_value_heads 4,
     * head_dim 128, 128 experts (num_experts) of moe_intermediate_size 768, 8 per token, no
     * shared expert, vocab_size 151936, untied head; pre-training sequence 4096, report
     * §3.1); 30.5B total, 3.3B active */
    {.name = "qwen3-30b-a3b",
     .layers = 48,
     .hidden = 2048,
     .heads = 32,
     .seq_len = 4096,
     .vocab = 151936,
     .kv_heads = 4,
     .ffn_hidden = 6144,
     .ffn_gated = TRUE,
     .head_dim = 128,
     .experts = 128,
     .experts_per_token = 8,
     .expert_ffn_hidden = 768},
    /* Qwen3-235B-A22B (as above; HF Qwen/Qwen3-235B-A22B config: 94 layers, hidden 4096, 64
     * heads, 4 key/value heads, head_dim 128, 128 experts of 1536, 8 per token); 235B total,
     * 22B active */
    {.name = "qwen3-235b-a22b",
     .layers = 94,
     .hidden = 4096,
     .heads = 64,
     .seq_len = 4096,
     .vocab = 151936,
     .kv_heads = 4,
     .ffn_hidden = 12288,
     .ffn_gated = TRUE,
     .head_dim = 128,
     .experts = 128,
     .experts_per_token = 8,
     .expert_ffn_hidden = 1536},
    /* DeepSeek-V3 (DeepSeek-V3 Technical Report, 2024, §4.2; HF deepseek-ai/DeepSeek-V3
     * config.json: num_hidden_layers 61, hidden_size 7168, num_attention_heads 128,
     * q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64,
     * v_head_dim 128, first_k_dense_replace 3 with intermediate_size 18432, n_routed_experts
     * 256 of moe_intermediate_size 2048, num_experts_per_tok 8, n_shared_experts 1,
     * vocab_size 129280; pre-training sequence 4096, §4.2); 671B total, 37B active, without
     * the multi-token-prediction module */
    {.name = "deepseek-v3",
     .layers = 61,
     .hidden = 7168,
     .heads = 128,
     .seq_len = 4096,
     .vocab = 129280,
     .ffn_hidden = 18432,
     .ffn_gated = TRUE,
     .q_lora_rank = 1536,
     .kv_lora_rank = 512,
     .qk_nope_head_dim = 128,
     .qk_rope_head_dim = 64,
     .v_head_dim = 128,
     .experts = 256,
     .experts_per_token = 8,
     .shared_experts = 1,
     .expert_ffn_hidden = 2048,
     .dense_layers = 3},
    /* gpt-oss-120b (OpenAI, "gpt-oss-120b & gpt-oss-20b Model Card", 2025; HF
     * openai/gpt-oss-120b config.json: num_hidden_layers 36, hidden_size 2880,
     * num_attention_heads 64, num_key_value_heads 8, head_dim 64, num_local_experts 128 of
     * intermediate_size 2880, experts_per_token 4, vocab_size 201088, initial_context_length
     * 4096); 116.8B total, 5.1B active (without the embedding table). Its alternating banded
     * attention (window 128) is counted as full attention. */
    {.name = "gpt-oss-120b",
     .layers = 36,
     .hidden = 2880,
     .heads = 64,
     .seq_len = 4096,
     .vocab = 201088,
     .kv_heads = 8,
     .ffn_hidden = 2880,
     .ffn_gated = TRUE,
     .head_dim = 64,
     .experts = 128,
     .experts_per_token = 4},
};

/* One calibration for both Blackwell presets (b200, gb200: the same GPU), the operator cost
 * model (docs/published-runs.md). From operator-level facts: 148 SMs (two dies of 74 enabled;
 * Chips and Cheese, "Nvidia's B200: Keeping the CUDA Juggernaut Rolling", 2025); a short reduction
 * halves a product at K = 99, A100's 54 scaled by the ratio of the two GPUs' FLOP/s per byte of HBM
 * (2,250/8 over 312/2.039); A100's 75 us of host time per operator (the same eager Megatron stack).
 * Fitted on six published Megatron-Bridge rows: DeepSeek-V3 and Qwen3-235B-A22B in bf16 on
 * GB200 (HybridEP inside the NVL72 domain), Llama 3 8B on GB200 and B200 and Llama 3.1 405B on
 * GB200 in fp8, and Qwen3-235B-A22B in fp8 on B200 (the all-to-all dispatcher, which waits on
 * the host once per MoE layer forward: sim/cost/sim-cost-block.c): kernel_eff_max 0.60,
 * kernel_eff_fp8 0.80 and alltoall_eff 0.30. */
#define PP_BLACKWELL_FIT                                                                           \
    .calibrated = TRUE, .kernel_eff_max = 0.60, .kernel_eff_half_tokens = 0.0,                     \
    .kernel_eff_half_hidden = 99.0, .kernel_eff_fp8 = 0.80, .alltoall_eff = 0.30,                  \
    .operator_costs = TRUE, .launch_ns = 75000, .sms = 148

/* The fixed cost of one NCCL collective before its steps' link latencies: NCCL's own model of
 * a ring collective on the Simple protocol its bulk transfers use, 8.4 us of base latency
 * (NVIDIA/nccl src/graph/tuning.cc, baseLat, the same at commits 01afd20a and b6475625), then
 * per step 3.4 us on NVLink, 5.7 on PCIe and 14 across nodes (hwLat), which the presets'
 * link_latency_ns and internode_latency_ns stand for. The same on every NVIDIA fabric. */
#define PP_NCCL_COLLECTIVE_NS 8400

static const PpHardwarePreset pp_hardware_presets[] = {
    {
        .name = "a100-sxm",
        .peak_flops = 312e12,         /* A100 datasheet: 312 TFLOP/s dense BF16 tensor */
        .memory_bytes = 80 * PP_GIB,  /* A100 80GB SXM: 81920 MiB of HBM2e */
        .mem_bw_bytes_per_s = 2039e9, /* A100 80GB SXM datasheet: 2,039 GB/s */
        /* Link bandwidths fitted (scripts/fit-published a100-sxm, docs/published-runs.md): what
         * NCCL reaches on NVLink 3 (datasheet 300 GB/s each way) and on one 200 Gb/s HDR
         * InfiniBand NIC per GPU (DGX A100; 25 GB/s each way). */
        .link_bw_bytes_per_s = 210e9,
        .link_latency_ns = 5000, /* ~5 us for a small NCCL p2p message in one node */
        .nvlink = TRUE,
        .gpus_per_node = 8, /* DGX A100: 8 GPUs on NVSwitch */
        .internode_bw_bytes_per_s = 25.8e9,
        .internode_latency_ns = 10000, /* ~10 us for a small NCCL message across nodes */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .nics_per_node = 8, /* DGX A100: 8 HDR compute NICs, one per GPU */
        /* The operator cost model, fitted on the 26 published A100 rows (Megatron-LM 2021 and
         * 2022, BLOOM) and every 4th of vTrain's 1,440 single-node runs (docs/published-runs.md,
         * Checked against published runs): matrix products reach 69% of peak, half of that
         * at a reduction of 54; the host launches an operator in 75 us (Megatron's eager
         * PyTorch, which the small runs expose); 108 SMs (A100 datasheet). */
        .calibrated = TRUE,
        .kernel_eff_max = 0.69,
        .kernel_eff_half_tokens = 0.0,
        .kernel_eff_half_hidden = 54.0,
        .kernel_eff_fp8 = 1.0,
        .alltoall_eff = 1.0,
        .operator_costs = TRUE,
        .launch_ns = 75000,
        .sms = 108,
    },
    {
        .name = "h100-sxm",
        .peak_flops = 989e12,         /* H100 SXM datasheet: 989 TFLOP/s dense BF16 */
        .peak_fp8_flops = 1979e12,    /* H100 SXM datasheet: 1,979 TFLOP/s dense FP8 (3,958
                                         with sparsity) */
        .memory_bytes = 80 * PP_GIB,  /* H100 SXM: 80 GB HBM3, counted as 80 GiB */
        .mem_bw_bytes_per_s = 3350e9, /* H100 SXM datasheet: 3.35 TB/s */
        .link_bw_bytes_per_s = 450e9, /* NVLink 4: 900 GB/s both directions, 450 each */
        .link_latency_ns = 5000,      /* same NVSwitch p2p latency order as A100 */
        .nvlink = TRUE,
        .gpus_per_node = 8,               /* DGX H100: 8 GPUs on NVSwitch */
        .internode_bw_bytes_per_s = 50e9, /* DGX H100: one 400 Gb/s NDR NIC per GPU */
        .internode_latency_ns = 10000,    /* ~10 us for a small NCCL message across nodes */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .nics_per_node = 8, /* DGX H100: 8 NDR NICs, one per GPU */
        /* The operator cost model, fitted on four published H100 rows (docs/published-runs.md):
         * Llama 3 405B on 8,192 and 16,384 GPUs (Table 4, bf16), and Megatron-Bridge's Llama 3
         * 70B (fp8) and Qwen3-235B-A22B (fp8, expert all-to-alls mostly over InfiniBand):
         * kernel_eff_max, kernel_eff_fp8 and alltoall_eff. From operator-level facts: 132 SMs
         * (H100 SXM5 whitepaper); a short reduction halves a product at K = 104, A100's 54
         * scaled by the ratio of the two GPUs' FLOP/s per byte of HBM (989/3.35 over 312/2.039);
         * A100's 75 us of host time per operator (the same eager Megatron stack; no H100 row
         * moves with it below 100 us). */
        .calibrated = TRUE,
        .kernel_eff_max = 0.60,
        .kernel_eff_half_tokens = 0.0,
        .kernel_eff_half_hidden = 104.0,
        .kernel_eff_fp8 = 1.0,
        .alltoall_eff = 0.8,
        .operator_costs = TRUE,
        .launch_ns = 75000,
        .sms = 132,
    },
    {
        .name = "h200-sxm",
        .peak_flops = 989e12,                  /* H200 datasheet: same compute as H100 SXM */
        .peak_fp8_flops = 1979e12,             /* H200 datasheet: 1,979 TFLOP/s dense FP8 */
        .memory_bytes = INT64_C(141000000000), /* H200 datasheet: 141 GB (decimal) HBM3e */
        .mem_bw_bytes_per_s = 4800e9,          /* H200 datasheet: 4.8 TB/s */
        .link_bw_bytes_per_s = 450e9,          /* NVLink 4: 900 GB/s both directions, 450 each */
        .link_latency_ns = 5000,               /* same NVSwitch p2p latency order as A100 */
        .nvlink = TRUE,
        .gpus_per_node = 8,               /* HGX H200: 8 GPUs on NVSwitch */
        .internode_bw_bytes_per_s = 50e9, /* one 400 Gb/s NIC per GPU, as on DGX H100 */
        .internode_latency_ns = 10000,    /* ~10 us for a small NCCL message across nodes */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .nics_per_node = 8, /* HGX H200: 8 NDR NICs, one per GPU */
        /* Same SMs and tensor cores as H100 SXM and no published H200 row: H100's fit, the
         * short-reduction term scaled to its FLOP/s per byte of HBM (54 x 989/4.8 over
         * 312/2.039: 73). */
        .calibrated = TRUE,
        .kernel_eff_max = 0.60,
        .kernel_eff_half_tokens = 0.0,
        .kernel_eff_half_hidden = 73.0,
        .kernel_eff_fp8 = 1.0,
        .alltoall_eff = 0.8,
        .operator_costs = TRUE,
        .launch_ns = 75000,
        .sms = 132,
    },
    {
        .name = "h800",
        /* H800 SXM: the H100 SXM chip with NVLink cut to 400 GB/s (NVIDIA's H800 product
         * brief); same SMs, clocks and HBM3 as H100 SXM. */
        .peak_flops = 989e12,         /* as H100 SXM: 989 TFLOP/s dense BF16 */
        .peak_fp8_flops = 1979e12,    /* as H100 SXM: 1,979 TFLOP/s dense FP8 */
        .memory_bytes = 80 * PP_GIB,  /* 80 GB HBM3, counted as 80 GiB as for H100 */
        .mem_bw_bytes_per_s = 3350e9, /* as H100 SXM: 3.35 TB/s */
        .link_bw_bytes_per_s = 200e9, /* NVLink 400 GB/s both directions, 200 each */
        .link_latency_ns = 5000,      /* same NVSwitch p2p latency order as H100 */
        .nvlink = TRUE,
        .gpus_per_node = 8, /* 8 GPUs on NVLink/NVSwitch per node (DeepSeek-V3 report §3.1) */
        /* InfiniBand between nodes, 50 GB/s per GPU (DeepSeek-V3 report §3.2.2) */
        .internode_bw_bytes_per_s = 50e9,
        .internode_latency_ns = 10000, /* ~10 us for a small NCCL message across nodes */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .nics_per_node = 8, /* 8 InfiniBand NICs per node (DeepSeek-V3 report §3.1) */
        /* Same SMs and HBM as H100 SXM and no published H800 row: H100's fit, as for
         * h200-sxm. */
        .calibrated = TRUE,
        .kernel_eff_max = 0.60,
        .kernel_eff_half_tokens = 0.0,
        .kernel_eff_half_hidden = 104.0,
        .kernel_eff_fp8 = 1.0,
        .alltoall_eff = 0.8,
        .operator_costs = TRUE,
        .launch_ns = 75000,
        .sms = 132,
    },
    {
        .name = "b200",
        .peak_flops = 2250e12,     /* HGX B200 datasheet: 2.25 PFLOP/s dense BF16 per GPU
                                      (4.5 with sparsity) */
        .peak_fp8_flops = 4500e12, /* HGX B200 datasheet: 4.5 PFLOP/s dense FP8 per GPU */
        .memory_bytes = INT64_C(180000000000), /* DGX B200 datasheet: 1,440 GB over 8 GPUs */
        .mem_bw_bytes_per_s = 8000e9,          /* DGX B200 datasheet: 64 TB/s over 8 GPUs */
        .link_bw_bytes_per_s = 900e9, /* NVLink 5: 1.8 TB/s per GPU both directions, 900 each */
        .link_latency_ns = 5000,      /* NVSwitch p2p latency order as H100 (assumed) */
        .nvlink = TRUE,
        .gpus_per_node = 8,               /* DGX/HGX B200: 8 GPUs on NVSwitch */
        .internode_bw_bytes_per_s = 50e9, /* DGX B200: one 400 Gb/s ConnectX-7 NIC per GPU */
        .internode_latency_ns = 10000,    /* ~10 us for a small NCCL message across nodes */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .nics_per_node = 8, /* DGX B200: 8 ConnectX-7 NICs, one per GPU */
        /* Blackwell's fit, shared with gb200 (the same B200 GPU): docs/published-runs.md. */
        PP_BLACKWELL_FIT,
    },
    {
        .name = "gb200",
        /* GB200 NVL72: 72 Blackwell GPUs (36 Grace CPUs) in one NVLink domain; per-GPU figures
         * are the rack's datasheet totals over 72. */
        .peak_flops = 2500e12,                 /* 180 PFLOP/s dense BF16 / 72 */
        .peak_fp8_flops = 5000e12,             /* 360 PFLOP/s dense FP8 / 72 */
        .memory_bytes = INT64_C(186000000000), /* 13.4 TB HBM3e / 72 = 186 GB (decimal) */
        .mem_bw_bytes_per_s = 8000e9,          /* 576 TB/s / 72 */
        .link_bw_bytes_per_s = 900e9, /* NVLink 5: 130 TB/s / 72 = 1.8 TB/s, 900 GB/s each way */
        .link_latency_ns = 5000,      /* NVSwitch p2p latency order as H100 (assumed) */
        .nvlink = TRUE,
        .gpus_per_node = 72,              /* the NVLink domain is the "node": one rack */
        .internode_bw_bytes_per_s = 50e9, /* one 400 Gb/s NIC per GPU, as on DGX (assumed) */
        .internode_latency_ns = 10000,    /* ~10 us for a small NCCL message across nodes */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .nics_per_node = 72, /* one ConnectX-7 per GPU of the rack */
        /* Blackwell's fit, shared with b200 (docs/published-runs.md). */
        PP_BLACKWELL_FIT,
    },
    {
        .name = "rtx-pro-6000",
        /* Uncalibrated: no published run fixes its matmul ceiling or host time, so it keeps
         * the whole-layer curve at its defaults (docs/cost-model.md, The analytic cost model). */
        .peak_flops = 503.8e12,       /* 188 SMs x 2.617 GHz boost x 1024 dense BF16
                                         FLOP/clk/SM with fp32 accumulate (the Ada RTX 6000
                                         rate per SM; the pro card is not halved) */
        .memory_bytes = 96 * PP_GIB,  /* 32 x 3 GiB GDDR7 chips (clamshell), 96 GiB */
        .mem_bw_bytes_per_s = 1792e9, /* 512-bit bus x 28 Gbit/s = 1,792 GB/s */
        .link_bw_bytes_per_s = 50e9,  /* PCIe 5.0 x16: 63 GB/s raw, ~50 GB/s effective */
        .link_latency_ns = 10000,     /* PCIe p2p through the host bridge: ~10 us */
        .nvlink = FALSE,
        .gpus_per_node = 8,                 /* 8-GPU PCIe server */
        .internode_bw_bytes_per_s = 6.25e9, /* one 400 Gb/s NIC shared by 8 GPUs (assumed) */
        .internode_latency_ns = 15000,      /* NIC behind the host bridge: ~15 us */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
    },
    {
        .name = "l40s",
        /* Uncalibrated: no published run fixes its matmul ceiling or host time, so it keeps
         * the whole-layer curve at its defaults (docs/cost-model.md, The analytic cost model). */
        .peak_flops = 362e12,        /* L40S datasheet: 362.05 TFLOP/s dense BF16 */
        .memory_bytes = 48 * PP_GIB, /* L40S: 48 GB GDDR6 (24 x 2 GiB chips) */
        .mem_bw_bytes_per_s = 864e9, /* L40S datasheet: 864 GB/s */
        .link_bw_bytes_per_s = 25e9, /* PCIe 4.0 x16: 31.5 GB/s raw, ~25 GB/s effective */
        .link_latency_ns = 10000,    /* PCIe p2p through the host bridge: ~10 us */
        .nvlink = FALSE,
        .gpus_per_node = 8,                 /* 8-GPU PCIe server */
        .internode_bw_bytes_per_s = 6.25e9, /* one 400 Gb/s NIC shared by 8 GPUs (assumed) */
        .internode_latency_ns = 15000,      /* NIC behind the host bridge: ~15 us */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
    },
    /* The A100 and H100 variants below share the fit of their family's SXM part
     * (calibration_of): the same SMs and tensor cores, and the efficiencies are fractions of
     * each part's own peak. PCIe servers: 8 cards whose NVLink bridges join pairs only, so a
     * collective of the node runs over PCIe (its effective rate, as for l40s), and the
     * nodes' networking is assumed as for the other PCIe presets. */
    {
        .name = "a100-40gb",
        .peak_flops = 312e12,         /* A100 datasheet (40GB SXM): 312 TFLOP/s dense BF16 */
        .memory_bytes = 40 * PP_GIB,  /* A100 40GB SXM: 40 GB HBM2, counted as 40 GiB */
        .mem_bw_bytes_per_s = 1555e9, /* A100 datasheet (40GB SXM): 1,555 GB/s */
        /* DGX A100 (320 GB): the same NVLink 3 NVSwitch and HDR NICs as a100-sxm, whose
         * fitted link rates these are (scripts/fit-published a100-sxm) */
        .link_bw_bytes_per_s = 210e9,
        .link_latency_ns = 5000,
        .nvlink = TRUE,
        .gpus_per_node = 8,
        .internode_bw_bytes_per_s = 25.8e9,
        .internode_latency_ns = 10000,
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .nics_per_node = 8,
        .calibration_of = "a100-sxm",
        .sms = 108, /* A100 datasheet */
    },
    {
        .name = "a100-80gb-pcie",
        .peak_flops = 312e12,               /* A100 datasheet (80GB PCIe): 312 TFLOP/s dense BF16 at
                                               300 W */
        .memory_bytes = 80 * PP_GIB,        /* 80 GB HBM2e, counted as 80 GiB as for a100-sxm */
        .mem_bw_bytes_per_s = 1935e9,       /* A100 datasheet (80GB PCIe): 1,935 GB/s */
        .link_bw_bytes_per_s = 25e9,        /* PCIe 4.0 x16 (datasheet: 64 GB/s both directions, 32
                                               each), ~25 GB/s effective */
        .link_latency_ns = 10000,           /* PCIe p2p through the host bridge: ~10 us */
        .nvlink = FALSE,                    /* NVLink bridge (600 GB/s) joins 2 cards only */
        .gpus_per_node = 8,                 /* 8-GPU PCIe server */
        .internode_bw_bytes_per_s = 6.25e9, /* one 400 Gb/s NIC shared by 8 GPUs (assumed) */
        .internode_latency_ns = 15000,      /* NIC behind the host bridge: ~15 us */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .calibration_of = "a100-sxm",
        .sms = 108, /* A100 datasheet */
    },
    {
        .name = "h100-pcie",
        .peak_flops = 756e12,               /* H100 PCIe product brief: 1,513 TFLOP/s BF16 with
                                               sparsity, 756 dense, at 350 W */
        .peak_fp8_flops = 1513e12,          /* 3,026 TFLOP/s FP8 with sparsity, 1,513 dense */
        .memory_bytes = 80 * PP_GIB,        /* 80 GB HBM2e, counted as 80 GiB as for h100-sxm */
        .mem_bw_bytes_per_s = 2000e9,       /* H100 PCIe product brief: 2,000 GB/s */
        .link_bw_bytes_per_s = 50e9,        /* PCIe 5.0 x16 (128 GB/s both directions, 64 each),
                                               ~50 GB/s effective */
        .link_latency_ns = 10000,           /* PCIe p2p through the host bridge: ~10 us */
        .nvlink = FALSE,                    /* NVLink bridge (600 GB/s) joins 2 cards only */
        .gpus_per_node = 8,                 /* 8-GPU PCIe server */
        .internode_bw_bytes_per_s = 6.25e9, /* one 400 Gb/s NIC shared by 8 GPUs (assumed) */
        .internode_latency_ns = 15000,      /* NIC behind the host bridge: ~15 us */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .calibration_of = "h100-sxm",
        .sms = 114, /* H100 PCIe: 114 SMs */
    },
    {
        .name = "h100-nvl",
        .peak_flops = 835e12,      /* H100 datasheet (NVL): 1,671 TFLOP/s BF16 with sparsity,
                                      835 dense, at 350-400 W */
        .peak_fp8_flops = 1670e12, /* 3,341 TFLOP/s FP8 with sparsity, 1,670 dense */
        .memory_bytes = INT64_C(94000000000), /* H100 datasheet (NVL): 94 GB (decimal) HBM3 */
        .mem_bw_bytes_per_s = 3900e9,         /* H100 datasheet (NVL): 3.9 TB/s */
        .link_bw_bytes_per_s = 50e9,          /* PCIe 5.0 x16 (128 GB/s both directions, 64 each),
                                                 ~50 GB/s effective */
        .link_latency_ns = 10000,             /* PCIe p2p through the host bridge: ~10 us */
        .nvlink = FALSE,                      /* NVLink bridges (600 GB/s) join 2 cards only */
        .gpus_per_node = 8,                   /* 8-GPU PCIe server */
        .internode_bw_bytes_per_s = 6.25e9,   /* one 400 Gb/s NIC shared by 8 GPUs (assumed) */
        .internode_latency_ns = 15000,        /* NIC behind the host bridge: ~15 us */
        .collective_ns = PP_NCCL_COLLECTIVE_NS,
        .calibration_of = "h100-sxm",
        .sms = 132, /* the H100 SXM die's 132 SMs */
    },
};

const PpModelPreset *pp_preset_model_lookup(const char *name) {
    for (size_t i = 0; i < G_N_ELEMENTS(pp_model_presets); i++) {
        if (strcmp(pp_model_presets[i].name, name) == 0)
            return &pp_model_presets[i];
    }
    return NULL;
}

const PpHardwarePreset *pp_preset_hardware_lookup(const char *name) {
    for (size_t i = 0; i < G_N_ELEMENTS(pp_hardware_presets); i++) {
        if (strcmp(pp_hardware_presets[i].name, name) == 0)
            return &pp_hardware_presets[i];
    }
    return NULL;
}

char *pp_preset_model_names(void) {
    GString *names = g_string_new(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(pp_model_presets); i++)
        g_string_append_printf(names, "%s%s", i ? ", " : "", pp_model_presets[i].name);
    return g_string_free(names, FALSE);
}

char *pp_preset_hardware_names(void) {
    GString *names = g_string_new(NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(pp_hardware_presets); i++)
        g_string_append_printf(names, "%s%s", i ? ", " : "", pp_hardware_presets[i].name);
    return g_string_free(names, FALSE);
}
