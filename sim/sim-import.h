/* SPDX-License-Identifier: MIT
 * sim-import.h: `pacer-sim import megatron|deepspeed`: a launch configuration (a Megatron-LM or
 * NeMo command line, a DeepSpeed JSON config) turned into a scenario file that reproduces the
 * run, with every setting that has no pacer key listed in the file's header and on stderr.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The import subcommand; @argv[0] is "pacer-sim import". Exit status as pacer-sim's. */
int sim_import_main(int argc, char **argv);

G_END_DECLS
