/* SPDX-License-Identifier: MIT
 * exec-train-lock.c: one run per output folder. A run holds an exclusive flock() on
 * OUT/pacer.lock for its life (under MPI, rank 0 alone), with its PID and host written in the
 * file; the kernel releases the lock when the process ends however it ends, so a lock whose
 * holder is gone is simply taken. A normal end empties the file: text left in it names a
 * holder that died holding it, said when the next run takes it over.
 */
#include "exec-train-private.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "pp-error.h"

/* The holder's line is "PID HOST\n"; longer text is cut for messages. */
#define EXEC_TRAIN_LOCK_MAX_TEXT 256

struct _ExecTrainLock {
    int      fd;
    char    *path;
    gboolean held; /* the flock() was taken: the file is this run's to write */
};

/* The holder named in the open lock file @fd ("" when it is empty). Returns: (transfer full). */
static char *exec_train_lock_read(int fd) {
    char    text[EXEC_TRAIN_LOCK_MAX_TEXT + 1];
    ssize_t n = pread(fd, text, EXEC_TRAIN_LOCK_MAX_TEXT, 0);
    text[MAX(n, 0)] = '\0';
    int  pid = 0;
    char host[EXEC_TRAIN_LOCK_MAX_TEXT + 1];
    if (sscanf(text, "%d %256s", &pid, host) == 2 && pid > 0)
        return g_strdup_printf("PID %d on host %s", pid, host);
    return g_strdup(g_strstrip(text));
}

/* Writes this process's PID and host into the held lock file. */
static gboolean exec_train_lock_record(ExecTrainLock *lock, GError **error) {
    g_autofree char *text = g_strdup_printf("%d %s\n", (int)getpid(), g_get_host_name());
    size_t           n = strlen(text);
    if (ftruncate(lock->fd, 0) != 0 || pwrite(lock->fd, text, n, 0) != (ssize_t)n) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot write %s: %s", lock->path,
                    g_strerror(errno));
        return FALSE;
    }
    return TRUE;
}

ExecTrainLock *exec_train_lock_take(const char *dir, GError **error) {
    if (g_mkdir_with_parents(dir, 0755) != 0) {
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot create --out %s: %s", dir,
                    g_strerror(errno));
        return NULL;
    }
    g_autoptr(ExecTrainLock) lock = g_new0(ExecTrainLock, 1);
    lock->fd = -1;
    lock->path = g_build_filename(dir, EXEC_TRAIN_LOCK_FILE, NULL);
    /* O_NOFOLLOW: a link of that name is not pacer's to write through. */
    lock->fd = open(lock->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (lock->fd < 0) {
        int en = errno;
        g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot open %s%s: %s", lock->path,
                    en == ELOOP ? " (a symbolic link: pacer-train does not write through one)" : "",
                    g_strerror(en));
        return NULL;
    }
    int rc;
    while ((rc = flock(lock->fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    if (rc != 0) {
        int              en = errno;
        g_autofree char *holder = exec_train_lock_read(lock->fd);
        if (en == EWOULDBLOCK)
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_EXISTS,
                        "--out %s is in use by another run, pacer-train %s (it holds %s): nothing "
                        "was changed; wait for that run to end or stop it, or give another --out",
                        dir, holder[0] ? holder : "that has not written its PID yet", lock->path);
        else
            g_set_error(error, PP_IO_ERROR, PP_IO_ERROR_WRITE, "cannot lock %s: %s", lock->path,
                        g_strerror(en));
        return NULL;
    }
    lock->held = TRUE;
    g_autofree char *stale = exec_train_lock_read(lock->fd);
    if (stale[0])
        g_message("took over %s from pacer-train %s, which ended without releasing it", lock->path,
                  stale);
    if (!exec_train_lock_record(lock, error))
        return NULL;
    return g_steal_pointer(&lock);
}

void exec_train_lock_free(ExecTrainLock *lock) {
    if (!lock)
        return;
    /* Still held: no other run reads the file until close() releases it. */
    if (lock->held && ftruncate(lock->fd, 0) != 0)
        g_warning("cannot empty %s: %s", lock->path, g_strerror(errno));
    if (lock->fd >= 0)
        close(lock->fd);
    g_free(lock->path);
    g_free(lock);
}
