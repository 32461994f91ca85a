/* SPDX-License-Identifier: MIT
 * gpt2-table.c: Gpt2Table (gpt2-table.h), a GPT-2 slice's tensor table and per-tensor init
 * without arenas; the CPU slice (gpt2-slice.c) and the CUDA slice both lay out and initialise
 * their parameters by it.
 */
#include "gpt2-table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern-check.h"
#include "kern-util.h"

#define GPT2_TABLE_NAME_MAX 48

struct _Gpt2Table {
    Gpt2SliceParams p;
    int             n_layers;
    int             n_tensors;
    Gpt2Tensor     *tensors;
    char           *names; /* (n_tensors, GPT2_TABLE_NAME_MAX) */
    int             first_layer_tensor;
    int             wte, wpe, lnf_w, lnf_b, head; /* -1 when absent; head = wte if tied */
    size_t          n_params;
};

static int table_add(Gpt2Table *t, Gpt2TensorKind kind, int d0, int d1, const char *name) {
    int         i = t->n_tensors++;
    Gpt2Tensor *x = &t->tensors[i];
    char       *dst = t->names + (size_t)i * GPT2_TABLE_NAME_MAX;
    int         len = snprintf(dst, GPT2_TABLE_NAME_MAX, "%s", name);
    KERN_ASSERT(len > 0 && len < GPT2_TABLE_NAME_MAX);
    x->name = dst;
    x->offset = t->n_params;
    x->ndim = d1 > 0 ? 2 : 1;
    x->shape[0] = d0;
    x->shape[1] = d1 > 0 ? d1 : 1;
    x->numel = (size_t)d0 * (size_t)x->shape[1];
    x->is_matrix = x->ndim == 2;
    x->kind = kind;
    t->n_params += x->numel;
    return i;
}

Gpt2Table *gpt2_table_new(const Gpt2SliceParams *params) {
    const Gpt2Config *m = &params->model;
    KERN_ASSERT(m->L >= 1 && m->C >= 1 && m->NH >= 1 && m->T >= 1 && m->V >= 1);
    KERN_ASSERT(m->C % m->NH == 0);
    KERN_ASSERT(m->V <= m->Vp);
    KERN_ASSERT(0 <= params->layer_begin && params->layer_begin <= params->layer_end &&
                params->layer_end <= m->L);
    KERN_ASSERT(!params->has_embedding || params->layer_begin == 0);
    KERN_ASSERT(!params->has_head || params->layer_end == m->L);
    KERN_ASSERT(!params->tie_head || (params->has_embedding && params->has_head));

    Gpt2Table *t = kern_xcalloc(1, sizeof *t);
    t->p = *params;
    t->n_layers = params->layer_end - params->layer_begin;
    int max_tensors = 2 + GPT2_LT_N * t->n_layers + 3;
    t->tensors = kern_xcalloc((size_t)max_tensors, sizeof *t->tensors);
    t->names = kern_xcalloc((size_t)max_tensors, GPT2_TABLE_NAME_MAX);
    t->wte = t->wpe = t->lnf_w = t->lnf_b = t->head = -1;

    int  C = m->C;
    char name[GPT2_TABLE_NAME_MAX];
    if (params->has_embedding) {
        t->wte = table_add(t, GPT2_TENSOR_EMBEDDING, m->Vp, C, "wte.weight");
        t->wpe = table_add(t, GPT2_TENSOR_EMBEDDING, m->T, C, "wpe.weight");
    }
    t->first_layer_tensor = t->n_tensors;
    static const struct {
        const char    *suffix;
        Gpt2TensorKind kind;
        int            out_mult, in_mult; /* shape (out_mult * C, in_mult * C), in_mult 0: 1-D */
    } block[GPT2_LT_N] = {
        {"ln_1.weight", GPT2_TENSOR_GAIN, 1, 0},
        {"ln_1.bias", GPT2_TENSOR_BIAS, 1, 0},
        {"attn.c_attn.weight", GPT2_TENSOR_HIDDEN, 3, 1},
        {"attn.c_attn.bias", GPT2_TENSOR_BIAS, 3, 0},
        {"attn.c_proj.weight", GPT2_TENSOR_HIDDEN, 1, 1},
        {"attn.c_proj.bias", GPT2_TENSOR_BIAS, 1, 0},
        {"ln_2.weight", GPT2_TENSOR_GAIN, 1, 0},
        {"ln_2.bias", GPT2_TENSOR_BIAS, 1, 0},
        {"mlp.c_fc.weight", GPT2_TENSOR_HIDDEN, 4, 1},
        {"mlp.c_fc.bias", GPT2_TENSOR_BIAS, 4, 0},
        {"mlp.c_proj.weight", GPT2_TENSOR_HIDDEN, 1, 4},
        {"mlp.c_proj.bias", GPT2_TENSOR_BIAS, 1, 0},
    };
    for (int l = params->layer_begin; l < params->layer_end; l++) {
        for (int k = 0; k < GPT2_LT_N; k++) {
            snprintf(name, sizeof name, "h.%d.%s", l, block[k].suffix);
            table_add(t, block[k].kind, block[k].out_mult * C, block[k].in_mult * C, name);
        }
    }
    if (params->has_head) {
        t->lnf_w = table_add(t, GPT2_TENSOR_GAIN, C, 0, "ln_f.weight");
        t->lnf_b = table_add(t, GPT2_TENSOR_BIAS, C, 0, "ln_f.bias");
        t->head =
            params->tie_head ? t->wte : table_add(t, GPT2_TENSOR_HEAD, m->Vp, C, "lm_head.weight");
    }
    return t;
}

void gpt2_table_free(Gpt2Table *table) {
    if (!table)
        return;
    free(table->names);
    free(table->tensors);
    free(table);
}

size_t gpt2_table_n_params(const Gpt2Table *table) {
    return table->n_params;
}

int gpt2_table_n_tensors(const Gpt2Table *table) {
    return table->n_tensors;
}

const Gpt2Tensor *gpt2_table_tensor(const Gpt2Table *table, int i) {
    KERN_ASSERT(i >= 0 && i < table->n_tensors);
    return &table->tensors[i];
}

const Gpt2Tensor *gpt2_table_tensor_by_name(const Gpt2Table *table, const char *name) {
    for (int i = 0; i < table->n_tensors; i++) {
        if (strcmp(table->tensors[i].name, name) == 0)
            return &table->tensors[i];
    }
    return NULL;
}

int gpt2_table_layer_tensor(const Gpt2Table *table, int layer, Gpt2LayerTensor which) {
    KERN_ASSERT(layer >= 0 && layer < table->n_layers);
    KERN_ASSERT(which >= 0 && which < GPT2_LT_N);
    return table->first_layer_tensor + layer * GPT2_LT_N + (int)which;
}

int gpt2_table_wte(const Gpt2Table *table) {
    return table->wte;
}

int gpt2_table_wpe(const Gpt2Table *table) {
    return table->wpe;
}

int gpt2_table_lnf_w(const Gpt2Table *table) {
    return table->lnf_w;
}

int gpt2_table_lnf_b(const Gpt2Table *table) {
    return table->lnf_b;
}

int gpt2_table_head(const Gpt2Table *table) {
    return table->head;
}

int gpt2_table_n_buckets(const Gpt2Table *table) {
    return table->n_layers + 2;
}

/* One past the last float of tensor @i. */
static size_t table_tensor_end(const Gpt2Table *t, int i) {
    return t->tensors[i].offset + t->tensors[i].numel;
}

void gpt2_table_bucket(const Gpt2Table *table, int k, size_t *begin, size_t *end) {
    const Gpt2Table *t = table;
    KERN_ASSERT(k >= 0 && k < gpt2_table_n_buckets(t));
    /* The blocks lie between the embeddings (first) and ln_f (then lm_head) at the end. */
    size_t blocks_begin = t->wpe >= 0 ? table_tensor_end(t, t->wpe) : 0;
    size_t blocks_end = t->lnf_w >= 0 ? t->tensors[t->lnf_w].offset : t->n_params;
    if (k == 0) {
        *begin = blocks_end;
        *end = t->n_params;
    } else if (k == t->n_layers + 1) {
        *begin = 0;
        *end = blocks_begin;
    } else {
        int l = t->n_layers - k;
        *begin = t->tensors[gpt2_table_layer_tensor(t, l, 0)].offset;
        *end = table_tensor_end(t, gpt2_table_layer_tensor(t, l, GPT2_LT_N - 1));
    }
}

void gpt2_table_init_tensor(const Gpt2Table *table, int i, uint64_t seed, float *out) {
    const Gpt2Tensor *t = gpt2_table_tensor(table, i);
    const Gpt2Config *m = &table->p.model;
    if (t->kind == GPT2_TENSOR_GAIN || t->kind == GPT2_TENSOR_BIAS) {
        float v = t->kind == GPT2_TENSOR_GAIN ? 1.0f : 0.0f;
        for (size_t j = 0; j < t->numel; j++)
            out[j] = v;
        return;
    }
    /* the two residual projections: attn.c_proj.weight and mlp.c_proj.weight */
    size_t len = strlen(t->name);
    int    is_resid = t->kind == GPT2_TENSOR_HIDDEN && len > 14 &&
                   strcmp(t->name + len - 14, ".c_proj.weight") == 0;
    float resid_std = 0.02f / sqrtf(2.0f * (float)m->L);
    float std = is_resid ? resid_std : 0.02f;
    /* vocabulary tensors: only the V real rows are drawn, the padding stays 0 */
    size_t n_drawn = t->numel;
    if (t->shape[0] == m->Vp && (i == table->wte || i == table->head))
        n_drawn = (size_t)m->V * t->shape[1];
    uint64_t rng = kern_rng_seed(seed ^ kern_hash_str(t->name));
    for (size_t j = 0; j < n_drawn; j++)
        out[j] = std * kern_rng_normal(&rng);
    for (size_t j = n_drawn; j < t->numel; j++)
        out[j] = 0.0f;
}
