/* SPDX-License-Identifier: MIT
 * exec-train-params.c: pacer-train's scenario -> pipeline parameters: the executor's own checks
 * of the scenario, the model shape, the optimizer and learning-rate schedule, BLAS threads.
 */
#include "exec-train-private.h"

#include <string.h>

#include "pp-error.h"

gboolean exec_train_check_scenario(const ExecTrainParams *params, GError **error) {
    const PpScenario *sc = params->scenario;
    const char       *name = sc->optimizer.name;
    if (g_strcmp0(name, "adamw") != 0 && g_strcmp0(name, "muon") != 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE,
                    "%s: optimizer.name=%s; valid: adamw, muon", sc->path, name);
        return FALSE;
    }
    int32_t ranks = exec_comm_size(params->comm), data = sc->parallel.data;
    int32_t need = data * sc->pipeline.stages;
    if (data == 1 && ranks != 1 && ranks != need) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: pipeline.stages = %d, but the job has %d processes: pacer-train runs "
                    "one process per stage (mpirun -np %d), or every stage in one process",
                    sc->path, sc->pipeline.stages, ranks, need);
        return FALSE;
    }
    if (data > 1 && ranks != need) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: parallel.data = %d replicas of pipeline.stages = %d, but the job has %d "
                    "process%s: pacer-train runs one process per stage of every replica "
                    "(mpirun -np %d)",
                    sc->path, data, sc->pipeline.stages, ranks, ranks == 1 ? "" : "es", need);
        return FALSE;
    }
    g_autoptr(GError) backend_error = NULL;
    const ExecBackendInfo *backend = exec_backend_find(sc->run.backend, &backend_error);
    if (!backend) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INVALID_VALUE, "%s: [run] %s",
                    sc->path, backend_error->message);
        return FALSE;
    }
    /* By capability, never by name: the same rule as exec_pipeline_new(), before any data is
     * read or any device touched. */
    g_autofree char *replicas = g_strdup_printf("parallel.data = %d", data);
    if (data > 1 && !exec_backend_require(backend, EXEC_BACKEND_CAN_REDUCE_GRADS, replicas,
                                          "set parallel.data = 1", &backend_error)) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT, "%s: %s", sc->path,
                    backend_error->message);
        return FALSE;
    }
    if (params->dynamic && !sc->pipeline.kind->has_policy) {
        g_autofree char *policy_kinds = pp_sched_kind_policy_names();
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: dynamic mode (--dynamic or pipeline.mode=dynamic) runs PACI's policy; "
                    "pipeline.schedule=%s must be one with a run-time policy: %s",
                    sc->path, sc->pipeline.schedule, policy_kinds);
        return FALSE;
    }
    if (sc->training.steps <= sc->optimizer.warmup_steps) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: training.steps=%d must exceed optimizer.warmup_steps=%d", sc->path,
                    sc->training.steps, sc->optimizer.warmup_steps);
        return FALSE;
    }
    const PpParallelParams *par = &sc->parallel;
    if (par->tensor != 1 || par->context != 1 || par->fsdp) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: parallel.tensor=%d, parallel.context=%d, parallel.fsdp=%s: pacer-train "
                    "runs one pipeline per parallel.data replica, one device per stage; tensor "
                    "and context parallelism and fsdp are the simulator's (set the two to 1 and "
                    "fsdp to false)",
                    sc->path, par->tensor, par->context, par->fsdp ? "true" : "false");
        return FALSE;
    }
    if (par->distributed_optimizer && data > 1 && g_strcmp0(sc->optimizer.name, "muon") == 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: parallel.distributed_optimizer = true with parallel.data = %d and "
                    "optimizer.name = muon: pacer-train shards the optimizer state at element "
                    "granularity and Muon orthogonalises whole matrices (use optimizer.name = "
                    "adamw, or set parallel.distributed_optimizer = false)",
                    sc->path, data);
        return FALSE;
    }
    /* The kernels are GPT-2's: multi-head attention of hidden / heads per head and a GELU MLP
     * of 4 * hidden. The other layer keys are the simulator's
     * (docs/cost-model.md, Model shapes). */
    const PpModelParams *m = &sc->model;
    if (m->kv_heads != m->heads || m->head_dim * m->heads != m->hidden ||
        pp_scenario_ffn_gated(sc) || m->ffn_hidden != 4 * m->hidden) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: model.kv_heads=%d, head_dim=%d, ffn=%s, ffn_hidden=%d: pacer-train "
                    "trains GPT-2's layer (kv_heads = heads = %d, head_dim = hidden / heads, "
                    "ffn = gelu, ffn_hidden = 4 * hidden = %d); the other shapes are the "
                    "simulator's (omit those keys)",
                    sc->path, m->kv_heads, m->head_dim, m->ffn, m->ffn_hidden, m->heads,
                    4 * m->hidden);
        return FALSE;
    }
    if (pp_scenario_attention_mla(sc) || m->experts > 0) {
        g_set_error(error, PP_SCENARIO_ERROR, PP_SCENARIO_ERROR_INCONSISTENT,
                    "%s: model.attention=%s, experts=%d: pacer-train trains GPT-2's dense "
                    "multi-head layer; latent attention and mixtures of experts are the "
                    "simulator's (use attention = mha, experts = 0)",
                    sc->path, m->attention, m->experts);
        return FALSE;
    }
    return TRUE;
}

Gpt2Config exec_train_model(const PpScenario *sc) {
    return (Gpt2Config){.L = sc->model.layers,
                        .C = sc->model.hidden,
                        .NH = sc->model.heads,
                        .T = sc->model.seq_len,
                        .V = sc->model.vocab,
                        .Vp = (sc->model.vocab + 127) / 128 * 128};
}

int32_t exec_train_threads(const PpScenario *sc) {
    if (sc->run.threads > 0)
        return sc->run.threads;
    return MAX(1, (int32_t)g_get_num_processors() / (sc->pipeline.stages * sc->parallel.data));
}

ExecPrecision exec_train_precision(const PpScenario *sc) {
    if (sc->run.precision == NULL)
        return EXEC_PRECISION_DEFAULT;
    return strcmp(sc->run.precision, "bf16") == 0 ? EXEC_PRECISION_BF16 : EXEC_PRECISION_FP32;
}

void exec_train_pipeline_params(const PpScenario *sc, const PpSchedule *shape,
                                ExecPipelineParams *pp) {
    const PpOptimizerParams *o = &sc->optimizer;
    KernOptimParams          optim = {
                 .kind = g_strcmp0(o->name, "muon") == 0 ? KERN_OPTIM_MUON : KERN_OPTIM_ADAMW,
                 .beta1 = (float)o->beta1,
                 .beta2 = (float)o->beta2,
                 .eps = (float)o->eps,
                 .weight_decay = (float)o->weight_decay,
                 .muon_momentum = (float)o->momentum,
                 /* Muon's matrices follow lr's warmup + cosine shape, scaled to optimizer.muon_lr */
                 .muon_lr_ratio = o->lr > 0.0 ? (float)(o->muon_lr / o->lr) : 0.0f,
                 .muon_ns_steps = o->ns_steps,
                 .error_feedback = o->error_feedback,
    };
    *pp = (ExecPipelineParams){
        .backend = sc->run.backend,
        .model = exec_train_model(sc),
        .microbatch_size = sc->pipeline.microbatch_size,
        .shape = shape,
        .layers_per_vstage = sc->run.layers_per_stage,
        .partition = pp_scenario_partition_mode(sc),
        .seed = sc->run.seed,
        .optim = optim,
        .lr = (float)o->lr,
        .min_lr = (float)o->min_lr,
        .warmup_steps = o->warmup_steps,
        .total_steps = sc->training.steps,
        .grad_clip = (float)o->grad_clip,
        .max_nonfinite = EXEC_TRAIN_MAX_NONFINITE,
        .poison_update = -1,
        .devices = sc->run.devices,
        .precision = exec_train_precision(sc),
        .flash_attention = sc->model.flash_attention,
        .speed_reference = sc->run.speed_reference,
        .overlap_grad_reduce = sc->parallel.overlap_grad_reduce,
    };
}
