/* SPDX-License-Identifier: MIT
 * sim-main.h: the command-line helpers of pacer-sim (main.c) that commands living in their own
 * files share: option parsing, error reporting with the exit status, JSON printing.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The end of an option table (G_OPTION_ENTRY_NULL needs GLib 2.70; meson asks for 2.68). */
#define SIM_MAIN_OPTION_END                                                                        \
    { NULL, 0, 0, 0, NULL, NULL, NULL }

/* The --set option every subcommand has, filling the GStrv @sets (SECTION.KEY=VALUE each). */
#define SIM_MAIN_OPTION_SET(sets)                                                                  \
    {                                                                                              \
        "set", 's', 0, G_OPTION_ARG_STRING_ARRAY, (sets), "Override a scenario key (repeatable)",  \
            "SECTION.KEY=VALUE"                                                                    \
    }

/* The --hf-config option of every command that reads a scenario, filling the string @path:
 * appended as the override model.hf_config=PATH (PATH relative to the working folder) before
 * the --set overrides, so that those and the scenario's own [model] keys override the file. */
#define SIM_MAIN_OPTION_HF_CONFIG(path)                                                            \
    {                                                                                              \
        "hf-config", 0, 0, G_OPTION_ARG_FILENAME, (path),                                          \
            "Read the model's shape from a Hugging Face config.json", "PATH"                       \
    }

/* The --json option, filling the gboolean @json; @what says what is printed. */
#define SIM_MAIN_OPTION_JSON(json, what)                                                           \
    { "json", 'j', 0, G_OPTION_ARG_NONE, (json), (what), NULL }

/* The --out option, filling the file name @out; @what says what is written, @arg names it. */
#define SIM_MAIN_OPTION_OUT(out, what, arg)                                                        \
    { "out", 'o', 0, G_OPTION_ARG_FILENAME, (out), (what), (arg) }

/* Reports @error about @file (nullable) on stderr and returns the exit status: 2 for usage
 * errors (G_OPTION_ERROR), 1 for everything else. */
int sim_main_fail(const char *file, const GError *error);
/* Parses @argv (argv[0] is the command name) with @entries; leaves the positional arguments
 * in @argv. Returns FALSE with a usage @error. */
gboolean sim_main_parse(int *argc, char ***argv, const char *params, const char *summary,
                        const char *description, const GOptionEntry *entries, GError **error);
/* Prints @root (transfer full) as indented JSON on stdout. */
void sim_main_print_json(JsonNode *root);

G_END_DECLS
