/* SPDX-License-Identifier: MIT
 * test-sim-queue.c: the simulator's event queue pops in (time_ns, stage, seq) order, with
 * first-in first-out ties, for hand-made and seeded random insertion orders.
 */
#include <check.h>
#include <stdlib.h>

#include "sim-queue.h"

/* xorshift64 (Marsaglia), explicit state. */
static uint64_t test_rng_next(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

static int test_event_cmp(const void *pa, const void *pb) {
    const SimEvent *a = pa, *b = pb;
    if (a->time_ns != b->time_ns)
        return a->time_ns < b->time_ns ? -1 : 1;
    if (a->stage != b->stage)
        return a->stage < b->stage ? -1 : 1;
    return a->seq < b->seq ? -1 : (a->seq > b->seq ? 1 : 0);
}

START_TEST(test_queue_empty) {
    g_autoptr(SimQueue) q = sim_queue_new(0);
    SimEvent ev;
    ck_assert_uint_eq(sim_queue_length(q), 0);
    ck_assert_ptr_null(sim_queue_peek(q));
    ck_assert(!sim_queue_pop(q, &ev));
    sim_queue_push(q, 5, 0, 42);
    ck_assert_uint_eq(sim_queue_length(q), 1);
    ck_assert_int_eq(sim_queue_peek(q)->payload, 42);
    ck_assert(sim_queue_pop(q, &ev));
    ck_assert_int_eq(ev.time_ns, 5);
    ck_assert_int_eq(ev.payload, 42);
    ck_assert_uint_eq(ev.seq, 0);
    ck_assert(!sim_queue_pop(q, &ev));
    ck_assert_uint_eq(sim_queue_n_pushed(q), 1);
}
END_TEST

/* Time first, then stage, then insertion order. */
START_TEST(test_queue_key_order) {
    g_autoptr(SimQueue) q = sim_queue_new(2);
    sim_queue_push(q, 10, 1, 0); /* seq 0 */
    sim_queue_push(q, 10, 0, 1); /* seq 1: same time, lower stage: before payload 0 */
    sim_queue_push(q, 5, 3, 2);  /* earliest time */
    sim_queue_push(q, 10, 1, 3); /* ties payload 0 on (time, stage): after it (FIFO) */
    sim_queue_push(q, 10, 0, 4); /* ties payload 1: after it */
    sim_queue_push(q, 11, 0, 5);
    const int32_t expected[] = {2, 1, 4, 0, 3, 5};
    SimEvent      ev;
    for (size_t i = 0; i < G_N_ELEMENTS(expected); i++) {
        ck_assert(sim_queue_pop(q, &ev));
        ck_assert_int_eq(ev.payload, expected[i]);
    }
    ck_assert(!sim_queue_pop(q, &ev));
}
END_TEST

/* Random insertions (seeded xorshift, few distinct times and stages so ties are common),
 * interleaved with pops: every pop returns the least remaining event, and draining returns
 * the rest sorted by (time, stage, seq). Loop index = seed. */
START_TEST(test_queue_random) {
    uint64_t     rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)(_i + 1) * 0xBF58476D1CE4E5B9ull;
    const size_t n = 5000;
    g_autoptr(SimQueue) q = sim_queue_new(1);
    SimEvent *live = g_new(SimEvent, n); /* (n) reference multiset of queued events */
    size_t    n_live = 0;
    int64_t   floor_ns = 0;
    SimEvent  ev;
    for (size_t i = 0; i < n; i++) {
        int64_t  t = floor_ns + (int64_t)(test_rng_next(&rng) % 8);
        int32_t  stage = (int32_t)(test_rng_next(&rng) % 4);
        uint64_t seq = sim_queue_n_pushed(q);
        sim_queue_push(q, t, stage, (int32_t)i);
        live[n_live++] =
            (SimEvent){.time_ns = t, .seq = seq, .stage = stage, .payload = (int32_t)i};
        if (test_rng_next(&rng) % 3 == 0) {
            /* Pop and check against the least live event; keep times non-decreasing as
             * the engine does. */
            qsort(live, n_live, sizeof(SimEvent), test_event_cmp);
            ck_assert(sim_queue_pop(q, &ev));
            ck_assert_int_eq(ev.payload, live[0].payload);
            ck_assert_uint_eq(ev.seq, live[0].seq);
            floor_ns = ev.time_ns;
            memmove(live, live + 1, (n_live - 1) * sizeof(SimEvent));
            n_live--;
        }
    }
    ck_assert_uint_eq(sim_queue_length(q), n_live);
    qsort(live, n_live, sizeof(SimEvent), test_event_cmp);
    for (size_t i = 0; i < n_live; i++) {
        ck_assert(sim_queue_pop(q, &ev));
        ck_assert_int_eq(ev.time_ns, live[i].time_ns);
        ck_assert_int_eq(ev.stage, live[i].stage);
        ck_assert_uint_eq(ev.seq, live[i].seq);
        ck_assert_int_eq(ev.payload, live[i].payload);
    }
    ck_assert(!sim_queue_pop(q, &ev));
    g_free(live);
}
END_TEST

/* Push everything first, then drain: the sequence is sorted and FIFO within equal keys. */
START_TEST(test_queue_bulk_fifo) {
    uint64_t      rng = 88172645463325252ull;
    const int32_t n = 20000;
    g_autoptr(SimQueue) q = sim_queue_new(4);
    for (int32_t i = 0; i < n; i++)
        sim_queue_push(q, (int64_t)(test_rng_next(&rng) % 16), (int32_t)(test_rng_next(&rng) % 3),
                       i);
    SimEvent prev, ev;
    ck_assert(sim_queue_pop(q, &prev));
    for (int32_t i = 1; i < n; i++) {
        ck_assert(sim_queue_pop(q, &ev));
        ck_assert_int_lt(test_event_cmp(&prev, &ev), 0);
        /* payload = insertion index: equal keys come out in insertion order */
        if (ev.time_ns == prev.time_ns && ev.stage == prev.stage)
            ck_assert_int_gt(ev.payload, prev.payload);
        prev = ev;
    }
    ck_assert_uint_eq(sim_queue_length(q), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sim-queue");
    TCase *tc = tcase_create("queue");
    tcase_add_test(tc, test_queue_empty);
    tcase_add_test(tc, test_queue_key_order);
    tcase_add_loop_test(tc, test_queue_random, 0, 8);
    tcase_add_test(tc, test_queue_bulk_fifo);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int n_failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return n_failed > 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
