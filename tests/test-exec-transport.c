/* SPDX-License-Identifier: MIT
 * test-exec-transport.c: the stage inbox (exec/transport/exec-inbox.h) and the host-queue transport
 * (exec/transport/exec-transport.h) in one process: messages taken in any arrival order by key, a
 * deadline that marks the inbox late, abort and reset, dynamic mode's poll and has, and a
 * transport round trip between two worker threads that carries every byte of every message
 * once (mb x vstage x kind) and drops an aborted replay's leftovers.
 */
#include <check.h>
#include <string.h>

#include "exec-inbox.h"
#include "exec-transport.h"

/* A message of the tests: the inbox's head and a payload to check. */
typedef struct {
    ExecInboxMsg head;
    int32_t      value;
} TestMsg;

static int n_dropped;

static void test_msg_drop(gpointer p) {
    n_dropped++;
    g_free(p);
}

static TestMsg *test_msg_new(ExecMsgKind kind, int32_t mb, int32_t vstage) {
    TestMsg *m = g_new(TestMsg, 1);
    m->head.key = exec_msg_key(kind, mb, vstage);
    m->value = mb * 100 + vstage * 10 + kind;
    return m;
}

/* Pushed 0..7 in reverse, taken 0..7 in order: each by its key, with its own payload. */
START_TEST(test_inbox_any_order) {
    ExecInbox box;
    exec_inbox_init(&box, test_msg_drop);
    for (int32_t mb = 7; mb >= 0; mb--)
        exec_inbox_push(&box, &test_msg_new(EXEC_MSG_GRAD, mb, 3)->head);
    for (int32_t mb = 0; mb < 8; mb++) {
        gboolean late = FALSE;
        TestMsg *m =
            (TestMsg *)exec_inbox_take(&box, exec_msg_key(EXEC_MSG_GRAD, mb, 3), -1, &late);
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->value, mb * 100 + 31);
        ck_assert(!late);
        g_free(m);
    }
    ck_assert(!exec_inbox_has(&box, exec_msg_key(EXEC_MSG_GRAD, 0, 3)));
    exec_inbox_clear(&box);
    exec_inbox_clear(&box); /* twice: a no-op */
}
END_TEST

/* A wait past its deadline: NULL, late, and the inbox stays aborted until reset. */
START_TEST(test_inbox_deadline) {
    ExecInbox box;
    exec_inbox_init(&box, test_msg_drop);
    gboolean late = FALSE;
    gint64   t0 = g_get_monotonic_time();
    ck_assert_ptr_null(exec_inbox_take(&box, 1, 20000, &late));
    ck_assert(late);
    ck_assert_int_ge(g_get_monotonic_time() - t0, 20000);
    ck_assert(box.aborted);
    exec_inbox_push(&box, &test_msg_new(EXEC_MSG_ACT, 0, 1)->head);
    ck_assert(!exec_inbox_poll(&box, FALSE, -1, NULL));
    n_dropped = 0;
    exec_inbox_reset(&box);
    ck_assert_int_eq(n_dropped, 1);
    ck_assert(!box.aborted);
    exec_inbox_clear(&box);
}
END_TEST

/* Abort wakes a blocked take; poll files arrivals for has; reset drops pushed and filed
 * messages alike, and the abort marker is never dropped as a message. */
START_TEST(test_inbox_abort_poll_reset) {
    ExecInbox box;
    exec_inbox_init(&box, test_msg_drop);
    exec_inbox_push(&box, &test_msg_new(EXEC_MSG_ACT, 2, 1)->head);
    ck_assert(!exec_inbox_has(&box, exec_msg_key(EXEC_MSG_ACT, 2, 1)));
    ck_assert(exec_inbox_poll(&box, FALSE, -1, NULL));
    ck_assert(exec_inbox_has(&box, exec_msg_key(EXEC_MSG_ACT, 2, 1)));
    exec_inbox_push(&box, &test_msg_new(EXEC_MSG_ACT, 3, 1)->head);
    exec_inbox_abort(&box);
    exec_inbox_push(&box, &test_msg_new(EXEC_MSG_ACT, 4, 1)->head);
    ck_assert_ptr_null(exec_inbox_take(&box, exec_msg_key(EXEC_MSG_ACT, 9, 1), -1, NULL));
    ck_assert(!exec_inbox_poll(&box, TRUE, -1, NULL));
    n_dropped = 0;
    exec_inbox_reset(&box);
    ck_assert_int_eq(n_dropped, 3); /* mb 2 filed, mb 3 filed before the marker, mb 4 queued */
    ck_assert(exec_inbox_poll(&box, FALSE, -1, NULL));
    exec_inbox_clear(&box);
}
END_TEST

/* Two stages, four virtual stages (0, 2 on stage 0; 1, 3 on stage 1), N_MB micro-batches:
 * every activation goes up and every gradient down, filled with a pattern of (kind, mb,
 * vstage) that the consumer checks byte by byte. */
enum { N_MB = 6, N_VS = 4, MSG_FLOATS = 257 };
static const int32_t vstage_stage[N_VS] = {0, 1, 0, 1};

typedef struct {
    ExecTransport *t;
    int32_t        stage;
    int            received;
    int            wrong;
} Worker;

static float pattern(ExecMsgKind kind, int32_t mb, int32_t vstage, int i) {
    return (float)(kind * 100000 + mb * 1000 + vstage * 100 + i % 97);
}

static gpointer worker_main(gpointer p) {
    Worker *w = p;
    /* Send everything this stage produces, then receive everything it consumes. */
    for (int32_t vs = 0; vs < N_VS; vs++) {
        if (vstage_stage[vs] != w->stage)
            continue;
        for (int32_t mb = 0; mb < N_MB; mb++) {
            for (int kind = 0; kind < EXEC_MSG_N_KINDS; kind++) {
                int32_t to = kind == EXEC_MSG_ACT ? vs + 1 : vs - 1;
                if (to < 0 || to >= N_VS)
                    continue;
                ExecTransportMsg *msg = NULL;
                float            *data = w->t->ops->take(w->t, kind, mb, to, NULL, &msg);
                for (int i = 0; i < MSG_FLOATS; i++)
                    data[i] = pattern(kind, mb, to, i);
                w->t->ops->send(w->t, msg, NULL);
            }
        }
    }
    for (int32_t vs = 0; vs < N_VS; vs++) {
        if (vstage_stage[vs] != w->stage)
            continue;
        for (int32_t mb = N_MB - 1; mb >= 0; mb--) {
            for (int kind = 0; kind < EXEC_MSG_N_KINDS; kind++) {
                if (exec_msg_producer(kind, vs) < 0 || exec_msg_producer(kind, vs) >= N_VS)
                    continue;
                ExecTransportMsg *msg = NULL;
                const void       *data = NULL;
                if (!w->t->ops->recv(w->t, kind, "F", mb, vs, NULL, &msg, &data)) {
                    w->wrong++;
                    continue;
                }
                const float *f = data;
                for (int i = 0; i < MSG_FLOATS; i++)
                    w->wrong += f[i] != pattern(kind, mb, vs, i);
                w->received++;
                w->t->ops->release(w->t, msg, NULL);
            }
        }
    }
    return NULL;
}

START_TEST(test_queue_round_trip) {
    const gboolean local[2] = {TRUE, TRUE};
    ExecTransport *t =
        exec_transport_queue_new(2, N_VS, vstage_stage, local, MSG_FLOATS * sizeof(float), NULL);
    Worker   w[2] = {{.t = t, .stage = 0}, {.t = t, .stage = 1}};
    GThread *th[2];
    for (int s = 0; s < 2; s++)
        th[s] = g_thread_new("stage", worker_main, &w[s]);
    for (int s = 0; s < 2; s++)
        g_thread_join(th[s]);
    /* Activations into vstages 1..3, gradients into 0..2: 3 + 3 per micro-batch. */
    ck_assert_int_eq(w[0].received + w[1].received, N_MB * 6);
    ck_assert_int_eq(w[0].wrong + w[1].wrong, 0);
    /* An aborted replay: a message sent and never received, a consumer woken empty-handed. */
    ExecTransportMsg *msg = NULL;
    t->ops->take(t, EXEC_MSG_ACT, 0, 1, NULL, &msg);
    t->ops->send(t, msg, NULL);
    t->ops->abort(t);
    const void *data = NULL;
    ck_assert(!t->ops->recv(t, EXEC_MSG_GRAD, "B", 0, 0, NULL, &msg, &data));
    ck_assert(!t->ops->poll(t, 1, FALSE));
    t->ops->reset(t);
    ck_assert(t->ops->poll(t, 1, FALSE));
    ck_assert(!t->ops->has(t, EXEC_MSG_ACT, 0, 1));
    t->ops->free(t);
}
END_TEST

int main(void) {
    Suite *s = suite_create("exec-transport");
    TCase *tc = tcase_create("inbox");
    tcase_add_test(tc, test_inbox_any_order);
    tcase_add_test(tc, test_inbox_deadline);
    tcase_add_test(tc, test_inbox_abort_poll_reset);
    suite_add_tcase(s, tc);
    TCase *tq = tcase_create("queue");
    tcase_add_test(tq, test_queue_round_trip);
    suite_add_tcase(s, tq);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
