/* SPDX-License-Identifier: MIT
 * exec-interrupt.c: the signal watcher of pacer-train (exec-interrupt.h): a GMainContext of
 * its own, iterated on one thread, with a GLib unix-signal source for SIGINT and SIGTERM.
 */
#include "exec-interrupt.h"

#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>

struct _ExecInterrupt {
    GMainContext *context;
    GThread      *thread;
    gint          quit;   /* atomic: the thread ends after its current iteration */
    gint          signum; /* atomic: the signal that interrupted the pipeline, 0 none */
    GMutex        lock;
    ExecPipeline *pipeline; /* under lock: (nullable) the attached pipeline */
};

struct _ExecInterruptAttachment {
    ExecInterrupt *interrupt;
};

static void exec_interrupt_on(ExecInterrupt *interrupt, int signum) {
    const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
    g_mutex_lock(&interrupt->lock);
    gboolean graceful = interrupt->pipeline && g_atomic_int_get(&interrupt->signum) == 0;
    if (graceful) {
        g_atomic_int_set(&interrupt->signum, signum);
        g_autofree char *why = g_strdup_printf("interrupted by %s", name);
        exec_pipeline_interrupt(interrupt->pipeline, why);
    }
    g_mutex_unlock(&interrupt->lock);
    if (graceful)
        return;
    /* The default action, as without the watcher: the process ends by the signal. */
    if (g_atomic_int_get(&interrupt->signum) != 0)
        fprintf(stderr, "pacer-train: second %s: stopping now\n", name);
    signal(signum, SIG_DFL);
    raise(signum);
}

static gboolean exec_interrupt_on_sigint(gpointer user_data) {
    exec_interrupt_on(user_data, SIGINT);
    return G_SOURCE_CONTINUE;
}

static gboolean exec_interrupt_on_sigterm(gpointer user_data) {
    exec_interrupt_on(user_data, SIGTERM);
    return G_SOURCE_CONTINUE;
}

static gpointer exec_interrupt_thread(gpointer user_data) {
    ExecInterrupt *interrupt = user_data;
    g_main_context_push_thread_default(interrupt->context);
    while (!g_atomic_int_get(&interrupt->quit))
        g_main_context_iteration(interrupt->context, TRUE);
    g_main_context_pop_thread_default(interrupt->context);
    return NULL;
}

static gboolean exec_interrupt_quit(gpointer user_data) {
    ExecInterrupt *interrupt = user_data;
    g_atomic_int_set(&interrupt->quit, 1);
    return G_SOURCE_REMOVE;
}

ExecInterrupt *exec_interrupt_new(void) {
    ExecInterrupt *interrupt = g_new0(ExecInterrupt, 1);
    g_mutex_init(&interrupt->lock);
    interrupt->context = g_main_context_new();
    const struct {
        int         signum;
        GSourceFunc fn;
    } watched[] = {{SIGINT, exec_interrupt_on_sigint}, {SIGTERM, exec_interrupt_on_sigterm}};
    for (size_t i = 0; i < G_N_ELEMENTS(watched); i++) {
        GSource *source = g_unix_signal_source_new(watched[i].signum);
        g_source_set_callback(source, watched[i].fn, interrupt, NULL);
        g_source_attach(source, interrupt->context);
        g_source_unref(source); /* the context holds it until it is destroyed */
    }
    interrupt->thread = g_thread_new("pacer-interrupt", exec_interrupt_thread, interrupt);
    return interrupt;
}

void exec_interrupt_free(ExecInterrupt *interrupt) {
    if (!interrupt)
        return;
    /* An idle source on the watcher's context: dispatched by its next iteration. */
    GSource *quit = g_idle_source_new();
    g_source_set_callback(quit, exec_interrupt_quit, interrupt, NULL);
    g_source_attach(quit, interrupt->context);
    g_source_unref(quit);
    g_thread_join(interrupt->thread);
    g_main_context_unref(interrupt->context);
    g_mutex_clear(&interrupt->lock);
    g_free(interrupt);
}

ExecInterruptAttachment *exec_interrupt_attach(ExecInterrupt *interrupt, ExecPipeline *pipeline) {
    if (!interrupt)
        return NULL;
    g_mutex_lock(&interrupt->lock);
    interrupt->pipeline = pipeline;
    g_mutex_unlock(&interrupt->lock);
    ExecInterruptAttachment *attachment = g_new0(ExecInterruptAttachment, 1);
    attachment->interrupt = interrupt;
    return attachment;
}

void exec_interrupt_attachment_free(ExecInterruptAttachment *attachment) {
    if (!attachment)
        return;
    g_mutex_lock(&attachment->interrupt->lock);
    attachment->interrupt->pipeline = NULL;
    g_mutex_unlock(&attachment->interrupt->lock);
    g_free(attachment);
}

int exec_interrupt_signal(const ExecInterrupt *interrupt) {
    return interrupt ? g_atomic_int_get(&interrupt->signum) : 0;
}
