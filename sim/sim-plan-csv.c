/* SPDX-License-Identifier: MIT
 * sim-plan-csv.c: `pacer-sim plan --out DIR`'s plan.csv, every simulated layout of the search
 * with its numbers, the file plots/plan.gp draws. Texts are quoted by libcsv, numbers are
 * written bare: integers as they are, doubles with the digits that read back as the same
 * double.
 */
#include <csv.h>
#include <stdio.h>
#include <string.h>

#include "pp-error.h"
#include "sim-plan.h"

static const char sim_plan_csv_header[] =
    "rank,fits,schedule,data,tensor,context,stages,chunks,expert,expert_tensor,zero,"
    "microbatch_size,microbatches,accumulation,recompute,step_time_ns,tokens_per_s,mfu,"
    "peak_memory_bytes,memory_limit_bytes,delta_max\n";

/* Appends @v as "%.17g" (locale-independent) and @sep. */
static void sim_plan_csv_double(GString *out, double v, char sep) {
    char buf[G_ASCII_DTOSTR_BUF_SIZE];
    g_string_append_printf(out, "%s%c", g_ascii_formatd(buf, sizeof buf, "%.17g", v), sep);
}

/* Appends @text quoted by libcsv and @sep. */
static void sim_plan_csv_text(GString *out, const char *text, char sep) {
    size_t len = strlen(text);
    char  *buf = g_malloc(2 * len + 3); /* csv_write's worst case: every byte doubled, quotes */
    size_t n = csv_write(buf, 2 * len + 3, text, len);
    g_string_append_len(out, buf, (gssize)n);
    g_string_append_c(out, sep);
    g_free(buf);
}

/* Appends row @r; @rank 0 for a row that does not fit (written empty). */
static void sim_plan_csv_row(GString *out, const SimPlan *plan, const SimPlanRow *r, guint rank) {
    if (rank > 0)
        g_string_append_printf(out, "%u,1,", rank);
    else
        g_string_append(out, ",0,");
    sim_plan_csv_text(out, r->schedule, ',');
    g_string_append_printf(out, "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,", r->data, r->tensor, r->context,
                           r->stages, r->chunks, r->expert, r->expert_tensor, r->zero,
                           r->microbatch_size, r->microbatches, r->accumulation);
    sim_plan_csv_text(out, r->recompute, ',');
    g_string_append_printf(out, "%" G_GINT64_FORMAT ",", r->step_time_ns);
    sim_plan_csv_double(out, r->tokens_per_s, ',');
    sim_plan_csv_double(out, r->mfu, ',');
    g_string_append_printf(out, "%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",%d\n",
                           r->peak_memory_bytes, plan->memory_bytes, r->delta_max);
}

gboolean sim_plan_write_csv(const SimPlan *plan, const char *path, GError **error) {
    g_autoptr(GString) out = g_string_new(sim_plan_csv_header);
    for (guint i = 0; i < plan->rows->len; i++)
        sim_plan_csv_row(out, plan, &g_array_index(plan->rows, SimPlanRow, i), i + 1);
    for (guint i = 0; i < plan->over_memory->len; i++)
        sim_plan_csv_row(out, plan, &g_array_index(plan->over_memory, SimPlanRow, i), 0);
    return pp_file_write(path, out->str, out->len, error);
}
