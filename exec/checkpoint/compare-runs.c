/* SPDX-License-Identifier: MIT
 * compare-runs.c: pacer-compare-runs, whether two pacer-train runs of one command on two
 * backends (or two launches) trained the same model within fp32 rounding: every step's
 * train_loss in log.csv, and every tensor of the newest checkpoint's model.safetensors
 * (relative L2 distance per tensor). scripts/gpu-check runs it on a CUDA run against the same
 * command on the CPU backend; tests/test-compare-runs.sh checks it on CPU runs.
 *   pacer-compare-runs [--loss-rtol X] [--weight-rtol Y] RUN_A RUN_B
 * Exit status: 0 within both bounds, 1 outside one (each difference named) or unreadable
 * runs, 2 usage error.
 */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec-checkpoint-unit.h"

/* train_loss of each log.csv row, in file order; steps: their step column. */
typedef struct {
    GArray *steps;  /* int64 */
    GArray *losses; /* double */
} RunLog;

static gboolean read_log(const char *run, RunLog *log, GError **error) {
    g_autofree char *path = g_build_filename(run, "log.csv", NULL), *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, error))
        return FALSE;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_auto(GStrv) head = g_strsplit(lines[0], ",", -1);
    int step_col = -1, loss_col = -1;
    for (int c = 0; head[c]; c++) {
        if (strcmp(head[c], "step") == 0)
            step_col = c;
        if (strcmp(head[c], "train_loss") == 0)
            loss_col = c;
    }
    if (step_col < 0 || loss_col < 0) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: no step and train_loss columns in its header", path);
        return FALSE;
    }
    log->steps = g_array_new(FALSE, FALSE, sizeof(gint64));
    log->losses = g_array_new(FALSE, FALSE, sizeof(double));
    for (int i = 1; lines[i] && lines[i][0]; i++) {
        g_auto(GStrv) cols = g_strsplit(lines[i], ",", -1);
        if ((int)g_strv_length(cols) <= MAX(step_col, loss_col)) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: line %d is short", path,
                        i + 1);
            return FALSE;
        }
        gint64 step = g_ascii_strtoll(cols[step_col], NULL, 10);
        double loss = g_ascii_strtod(cols[loss_col], NULL);
        g_array_append_val(log->steps, step);
        g_array_append_val(log->losses, loss);
    }
    return TRUE;
}

/* The newest checkpoint unit's model file of @run (transfer full) and the unit's name in
 * *@unit (transfer full), or NULL with @error. */
static char *newest_model(const char *run, char **unit, GError **error) {
    g_autofree char *units = g_build_filename(run, EXEC_CHECKPOINT_UNITS_DIR, NULL);
    g_autoptr(GDir) dir = g_dir_open(units, 0, error);
    if (!dir)
        return NULL;
    g_autofree char *best = NULL;
    for (const char *name; (name = g_dir_read_name(dir)) != NULL;) {
        /* step-NNNNNNNN: fixed width, so the largest name is the newest step */
        if (g_str_has_prefix(name, "step-") && (best == NULL || strcmp(name, best) > 0)) {
            g_free(best);
            best = g_strdup(name);
        }
    }
    if (best == NULL) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT, "%s holds no checkpoint", units);
        return NULL;
    }
    char *path = g_build_filename(units, best, "model.safetensors", NULL);
    *unit = g_steal_pointer(&best);
    return path;
}

/* A safetensors file: its bytes and parsed header. */
typedef struct {
    char       *bytes;
    gsize       len;
    JsonParser *parser;
    JsonObject *header;
    const char *data; /* the data section */
} Safetensors;

static gboolean read_safetensors(const char *path, Safetensors *st, GError **error) {
    if (!g_file_get_contents(path, &st->bytes, &st->len, error))
        return FALSE;
    guint64 n = 0;
    if (st->len >= 8) {
        for (int i = 7; i >= 0; i--)
            n = n << 8 | (guint8)st->bytes[i];
    }
    if (st->len < 8 || n > st->len - 8) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: not a safetensors file", path);
        return FALSE;
    }
    st->parser = json_parser_new();
    if (!json_parser_load_from_data(st->parser, st->bytes + 8, (gssize)n, error))
        return FALSE;
    JsonNode *root = json_parser_get_root(st->parser);
    if (!JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: header is not an object", path);
        return FALSE;
    }
    st->header = json_node_get_object(root);
    st->data = st->bytes + 8 + n;
    return TRUE;
}

static void clear_safetensors(Safetensors *st) {
    g_free(st->bytes);
    g_clear_object(&st->parser);
}

/* Tensor @name of @st as F32 floats (transfer none) and their count, or NULL. */
static const float *tensor_f32(const Safetensors *st, const char *name, gsize *n) {
    if (!json_object_has_member(st->header, name))
        return NULL;
    JsonObject *t = json_object_get_object_member(st->header, name);
    JsonArray  *off = t ? json_object_get_array_member(t, "data_offsets") : NULL;
    const char *dtype = t ? json_object_get_string_member(t, "dtype") : NULL;
    if (!off || json_array_get_length(off) != 2 || g_strcmp0(dtype, "F32") != 0)
        return NULL;
    gint64 a = json_array_get_int_element(off, 0), b = json_array_get_int_element(off, 1);
    gsize  avail = st->len - (gsize)(st->data - st->bytes);
    if (a < 0 || b < a || (guint64)b > avail || (b - a) % 4 != 0 || a % 4 != 0)
        return NULL;
    *n = (gsize)(b - a) / 4;
    return (const float *)(const void *)(st->data + a);
}

/* Compares the losses: returns the worst relative difference (INFINITY when a loss is not
 * finite or the rows differ), printing each row outside @rtol. */
static double compare_logs(const RunLog *a, const RunLog *b, double rtol) {
    if (a->losses->len != b->losses->len || a->losses->len == 0) {
        printf("log.csv: %u rows against %u\n", a->losses->len, b->losses->len);
        return INFINITY;
    }
    double worst = 0.0;
    for (guint i = 0; i < a->losses->len; i++) {
        gint64 sa = g_array_index(a->steps, gint64, i), sb = g_array_index(b->steps, gint64, i);
        double la = g_array_index(a->losses, double, i), lb = g_array_index(b->losses, double, i);
        double d = fabs(la - lb) / fabs(lb);
        if (sa != sb || !isfinite(la) || !isfinite(lb) || !(d <= rtol))
            printf("log.csv row %u: step %" G_GINT64_FORMAT
                   " loss %.9g against step %" G_GINT64_FORMAT " loss %.9g\n",
                   i + 1, sa, la, sb, lb);
        if (sa != sb || !isfinite(la) || !isfinite(lb) || isnan(d))
            d = INFINITY;
        worst = MAX(worst, d);
    }
    return worst;
}

/* Compares every tensor of @b with @a's of the same name: returns the worst relative L2
 * distance ||a - b|| / ||b|| (INFINITY for a missing or different tensor), its name in *@which,
 * printing each tensor outside @rtol. */
static double compare_models(const Safetensors *a, const Safetensors *b, double rtol,
                             int *n_tensors, const char **which) {
    double worst = 0.0;
    *n_tensors = 0;
    g_autoptr(GList) names = json_object_get_members(b->header);
    names = g_list_sort(names, (GCompareFunc)strcmp);
    if (json_object_get_size(a->header) != json_object_get_size(b->header)) {
        printf("model.safetensors: %u entries against %u\n", json_object_get_size(a->header),
               json_object_get_size(b->header));
        worst = INFINITY;
    }
    for (GList *l = names; l; l = l->next) {
        const char *name = l->data;
        if (strcmp(name, "__metadata__") == 0)
            continue;
        gsize        na = 0, nb = 0;
        const float *ta = tensor_f32(a, name, &na), *tb = tensor_f32(b, name, &nb);
        double       diff = 0.0, norm = 0.0, d;
        if (!ta || !tb || na != nb) {
            printf("%s: missing, not F32 or of another size in one run\n", name);
            d = INFINITY;
        } else {
            for (gsize i = 0; i < na; i++) {
                double e = (double)ta[i] - (double)tb[i];
                diff += e * e;
                norm += (double)tb[i] * tb[i];
            }
            d = diff == 0.0 ? 0.0 : sqrt(diff) / sqrt(norm);
            if (isnan(d))
                d = INFINITY;
            if (!(d <= rtol))
                printf("%s: relative L2 distance %.3g\n", name, d);
        }
        (*n_tensors)++;
        if (d > worst || *which == NULL) {
            worst = MAX(worst, d);
            *which = name;
        }
    }
    return worst;
}

int main(int argc, char **argv) {
    double       loss_rtol = 1e-4, weight_rtol = 1e-3;
    GOptionEntry entries[] = {
        {"loss-rtol", 0, 0, G_OPTION_ARG_DOUBLE, &loss_rtol,
         "largest relative difference of a step's train_loss (1e-4)", "X"},
        {"weight-rtol", 0, 0, G_OPTION_ARG_DOUBLE, &weight_rtol,
         "largest relative L2 distance of a tensor of the newest checkpoint (1e-3)", "Y"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "RUN_A RUN_B - whether two pacer-train runs (--out folders) trained the same model "
        "within fp32 rounding: log.csv's losses and the newest checkpoint's tensors");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error) || argc != 3 || !(loss_rtol >= 0) ||
        !(weight_rtol >= 0)) {
        fprintf(stderr, "pacer-compare-runs: %s\n",
                error ? error->message : "give two run folders and bounds >= 0 (--help)");
        return 2;
    }
    RunLog           la = {0}, lb = {0};
    Safetensors      ma = {0}, mb = {0};
    g_autofree char *pa = NULL, *pb = NULL, *ua = NULL, *ub = NULL;
    int              rc = 1;
    if (read_log(argv[1], &la, &error) && read_log(argv[2], &lb, &error) &&
        (pa = newest_model(argv[1], &ua, &error)) && (pb = newest_model(argv[2], &ub, &error)) &&
        read_safetensors(pa, &ma, &error) && read_safetensors(pb, &mb, &error)) {
        const char *which = NULL;
        int         n_tensors = 0;
        double      dl = compare_logs(&la, &lb, loss_rtol);
        double      dw = compare_models(&ma, &mb, weight_rtol, &n_tensors, &which);
        gboolean    same_unit = strcmp(ua, ub) == 0;
        if (!same_unit)
            printf("the newest checkpoints are of other steps: %s against %s\n", pa, pb);
        rc = dl <= loss_rtol && dw <= weight_rtol && same_unit ? 0 : 1;
        printf("pacer-compare-runs: %s: %u losses within %.3g (bound %.3g), %d tensors within "
               "relative L2 %.3g (bound %.3g, worst %s)\n",
               rc == 0 ? "the same" : "DIFFERENT", la.losses->len, dl, loss_rtol, n_tensors, dw,
               weight_rtol, which ? which : "none");
    } else {
        fprintf(stderr, "pacer-compare-runs: %s\n", error->message);
    }
    if (la.steps) {
        g_array_unref(la.steps);
        g_array_unref(la.losses);
    }
    if (lb.steps) {
        g_array_unref(lb.steps);
        g_array_unref(lb.losses);
    }
    clear_safetensors(&ma);
    clear_safetensors(&mb);
    return rc;
}
