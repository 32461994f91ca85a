/* SPDX-License-Identifier: MIT
 * exec-layout-impl.h: the model layout's side for backend authors (its public side, the tensor
 * tables and sizes, is in exec-backend.h): the constructor, from the model config, the
 * partition and the optimizer, and what the layout keeps for the model's kernels, read through
 * accessors: per virtual stage the argument the model kernels build its slice from, and the
 * optimizer kernels' hyperparameters. Included by exec-backend-impl.h, for the backends and
 * the pipeline; internal to libppexec.
 */
#pragma once

#include "exec-backend.h"
#include "gpt2-slice.h"
#include "optim-cpu.h"
#include "pp-partition.h"

G_BEGIN_DECLS

/* The layout of @model split by @partition (its n_vstages virtual stages, the last holding
 * the head, untied on every split so that any partition is the same model), micro-batches of
 * @B sequences, @act_slots (n_vstages, each >= 1) activation slots per virtual stage, driven by
 * @optim: each tensor's roles follow kern_optim_uses_muon() and optim->error_feedback. The
 * caller has checked the model's shape. Returns: (transfer full): release with
 * exec_model_layout_unref(). */
ExecModelLayout *exec_model_layout_new(const Gpt2Config *model, int32_t B,
                                       const PpPartition *partition, const int32_t *act_slots,
                                       const KernOptimParams *optim);

/* The argument the model kernels build virtual stage @vs's slice from (gpt2_slice_new(),
 * gpt2_cuda_slice_new()): the whole model's shape, layer range, ends, untied head, B and
 * n_act_slots, the activation slots (micro-batches in flight). Returns: (transfer none): valid
 * for the layout's life. */
const Gpt2SliceParams *exec_layout_slice_params(const ExecModelLayout *layout, int32_t vs);
/* The optimizer kernels' hyperparameters (kind, betas, eps, weight decay, Muon's momentum, lr
 * ratio and steps, error feedback, shards): plain numbers a backend passes on. Returns:
 * (transfer none): valid for the layout's life. */
const KernOptimParams *exec_layout_optim(const ExecModelLayout *layout);

G_END_DECLS
