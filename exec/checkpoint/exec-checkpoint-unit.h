/* SPDX-License-Identifier: MIT
 * exec-checkpoint-unit.h: a training checkpoint as one atomic unit: the folder
 * CHECKPOINTS/step-NNNNNNNN holding model.safetensors, state.safetensors, log.csv and
 * manifest.json, written under a temporary name and renamed into place. Host tensor lists in,
 * host tensor lists out: where the tensors come from (one process's backend, or a gather from
 * several) is the caller's business.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "exec-checkpoint.h"
#include "gpt2-slice.h"

G_BEGIN_DECLS

/* The files of a unit. The manifest is written last: a unit is complete only when its
 * manifest is valid and every file it names has the size and SHA-256 it records. */
#define EXEC_CHECKPOINT_UNIT_MODEL    "model.safetensors" /* weights, Hugging Face layout, f32 */
#define EXEC_CHECKPOINT_UNIT_STATE    "state.safetensors" /* optimizer state + counters, raw f32 */
#define EXEC_CHECKPOINT_UNIT_LOG      "log.csv"           /* every log row up to the step */
#define EXEC_CHECKPOINT_UNIT_MANIFEST "manifest.json"

/* A run's checkpoints live in OUT/checkpoints. */
#define EXEC_CHECKPOINT_UNITS_DIR "checkpoints"

/* Test hook: the environment variable PACER_TEST_KILL_AT = POINT or POINT@STEP makes the unit
 * writer raise SIGKILL at POINT (of the unit of STEP, or of any unit), to test what a kill
 * leaves behind. POINT is after-model, after-state, before-manifest, before-rename (all inside
 * the temporary folder) or after-rename (the unit in place; the caller's log.csv and pruning
 * not done yet). Unset in normal use; the writer reads it at each point. */
#define EXEC_CHECKPOINT_KILL_ENV "PACER_TEST_KILL_AT"

/* Test hook: PACER_TEST_SLOW_WRITE_S = SECONDS makes every unit write take that much longer
 * (a sleep before the rename), to test a write slower than run.comm_timeout_s. Unset in normal
 * use. */
#define EXEC_CHECKPOINT_SLOW_ENV "PACER_TEST_SLOW_WRITE_S"

/* --- writing --- */

/* Everything a unit holds, in host memory (borrowed for the call). */
typedef struct {
    int32_t            step;          /* steps done; names the folder */
    const char        *run;           /* one-line run summary, recorded in the manifest */
    const char *const *identity;      /* (nullable) key, value, key, value, ..., NULL: the
                                         run's identity, recorded in the manifest */
    const Gpt2Config *model_cfg;      /* shape of @model (model.safetensors' layout) */
    ExecTensorList   *model;          /* weights, pacer layout */
    ExecTensorList   *state;          /* optimizer state, raw */
    const GHashTable *state_metadata; /* (nullable) counters, char * -> char * */
    const char       *log;            /* log.csv text: header and the rows of steps < step */
} ExecCheckpointUnitData;

/* Name of the unit folder of @step: "step-%08d". Returns: (transfer full). */
char *exec_checkpoint_unit_name(int32_t step);

/* Writes @data as the unit @units_dir/step-NNNNNNNN: creates @units_dir if needed, writes
 * every file into @units_dir/.step-NNNNNNNN.tmp-PID (each fsync'ed, manifest.json last),
 * fsyncs that folder, renames it into place (atomically exchanging it with an existing unit
 * of that step, which is then removed) and fsyncs @units_dir. Returns: (transfer full) the
 * unit's path, or NULL with @error set and the temporary folder removed: PP_IO_ERROR_WRITE
 * naming the file, PP_IO_ERROR_NONFINITE naming the tensor (exec_checkpoint_write()). */
char *exec_checkpoint_unit_write(const char *units_dir, const ExecCheckpointUnitData *data,
                                 GError **error);

/* --- reading --- */

/* A unit on disk whose manifest has been read and checked. */
typedef struct _ExecCheckpointUnit ExecCheckpointUnit;

/* Reads @dir/manifest.json (format "pacer-checkpoint", version 1, step, run, optionally
 * identity (an object of strings; units written before it existed have none), and for each of
 * the three files its size in bytes and SHA-256) and checks that each file exists with that
 * size, and that a folder named step-NNNNNNNN holds that step. The SHA-256s are checked when a
 * file is read. Returns: (transfer full), or NULL with @error set: PP_IO_ERROR_OPEN (no
 * readable manifest: an incomplete unit), PP_IO_ERROR_CORRUPT (a malformed manifest, a file
 * missing or of another size), each naming the path. */
ExecCheckpointUnit *exec_checkpoint_unit_open(const char *dir, GError **error);
void                exec_checkpoint_unit_free(ExecCheckpointUnit *unit);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ExecCheckpointUnit, exec_checkpoint_unit_free)

/* The unit's folder, step, run summary and identity (key -> value, NULL when the manifest has
 * none). Returns: (transfer none): valid until the free. */
const char *exec_checkpoint_unit_dir(const ExecCheckpointUnit *unit);
int32_t     exec_checkpoint_unit_step(const ExecCheckpointUnit *unit);
const char *exec_checkpoint_unit_run(const ExecCheckpointUnit *unit);
GHashTable *exec_checkpoint_unit_identity(const ExecCheckpointUnit *unit);

/* Checks file @name (one of the EXEC_CHECKPOINT_UNIT_* files) against the manifest's SHA-256
 * (once per unit and file) and returns its path. When a safetensors file differs, every tensor
 * of it is checked so that the message names the damaged tensor when there is one.
 * Returns: (transfer full), or NULL with PP_IO_ERROR_CORRUPT (or the tensor's error) naming
 * the file. */
char *exec_checkpoint_unit_verified_path(ExecCheckpointUnit *unit, const char *name,
                                         GError **error);

/* Fills @model (pacer layout, shapes of @cfg) from the verified model.safetensors. Errors as
 * exec_checkpoint_unit_verified_path() and exec_checkpoint_load(). */
gboolean exec_checkpoint_unit_read_model(ExecCheckpointUnit *unit, const Gpt2Config *cfg,
                                         ExecTensorList *model, GError **error);
/* Fills @state (may be empty to read only the metadata) from the verified state.safetensors;
 * @metadata: (out) (optional) (transfer full). Errors as exec_checkpoint_load_state(). */
gboolean exec_checkpoint_unit_read_state(ExecCheckpointUnit *unit, ExecTensorList *state,
                                         GHashTable **metadata, GError **error);
/* The verified log.csv. Returns: (transfer full), or NULL with @error set. */
char *exec_checkpoint_unit_read_log(ExecCheckpointUnit *unit, GError **error);

/* --- choosing a unit --- */

/* Reads what the caller needs from @unit (tensors into host lists, checks against the run);
 * returns FALSE with @error set when it cannot. */
typedef gboolean (*ExecCheckpointUnitReadFn)(ExecCheckpointUnit *unit, gpointer user_data,
                                             GError **error);

/* The unit @path names, read by @read: @path is a unit folder (named step-NNNNNNNN, or holding
 * a manifest.json), or a run folder (holding checkpoints/), whose units are tried newest step
 * first. There a unit that is incomplete or damaged (its open or @read fails with
 * PP_IO_ERROR_OPEN or PP_IO_ERROR_CORRUPT) is skipped, with a line in @notes (element-type
 * utf8, nullable) saying which and why, and the next newest is tried; any other error (a unit
 * of another run, non-finite values) stops the search. Returns: (transfer full) the unit @read
 * accepted, or NULL with @error set: @read's error, PP_IO_ERROR_OPEN when @path is neither
 * kind of folder or the run has no unit, PP_IO_ERROR_CORRUPT when every unit was skipped (the
 * message lists why). */
ExecCheckpointUnit *exec_checkpoint_unit_find(const char *path, ExecCheckpointUnitReadFn read,
                                              gpointer user_data, GPtrArray *notes, GError **error);

/* --- housekeeping --- */

/* The removals below take only what pacer wrote: an entry of @units_dir of a unit's name that
 * is a folder itself (never a symbolic link, which stays with what it points to) holding only
 * regular files of the names a unit writer leaves there (the unit's files, a safetensors
 * file's temporary NAME.tmp-XXXXXX). The files are removed by name relative to the folder's
 * descriptor, so nothing outside @units_dir is ever reached. What stays is said in @kept
 * (element-type utf8, nullable: "PATH: why"); @removed (element-type filename, nullable)
 * receives the paths removed. A missing @units_dir is no error. Each returns FALSE with
 * PP_IO_ERROR_WRITE when an entry of pacer's cannot be removed. */

/* Removes what interrupted writes left in @units_dir: folders named .step-DIGITS.tmp-DIGITS
 * other than this process's own. */
gboolean exec_checkpoint_units_remove_stale(const char *units_dir, GPtrArray *removed,
                                            GPtrArray *kept, GError **error);

/* Removes every unit of @units_dir and every temporary one (folders named step-DIGITS or
 * .step-DIGITS.tmp-DIGITS), then @units_dir itself when that leaves it empty: a run that
 * starts over. A @units_dir that is a symbolic link stays, said in @kept. */
gboolean exec_checkpoint_units_remove_all(const char *units_dir, GPtrArray *removed,
                                          GPtrArray *kept, GError **error);

/* Called once the unit of @step is in place: removes the units of @units_dir newer than @step
 * (left by an earlier run that went further before this one restarted from an earlier step)
 * and, when @keep > 0, every unit older than the @keep newest complete ones (complete: a
 * folder itself for which exec_checkpoint_unit_open() succeeds; damaged units among the
 * newest stay until they are older). Only entries named step-DIGITS are touched. */
gboolean exec_checkpoint_units_prune(const char *units_dir, int32_t step, int32_t keep,
                                     GPtrArray *removed, GPtrArray *kept, GError **error);

G_END_DECLS
