/* test_engine_threads.c — submissions, cancellations and stats from several threads while one
 * thread steps (the server's pattern): every request ends with exactly one final event,
 * uncancelled ones with the reference greedy output, cancelled ones with a prefix of it, and
 * the KV cache is empty at the end. Every fourth request is a "target": its first token's
 * callback holds the stepping thread until the canceller thread has cancelled it, so those
 * cancellations always land mid-generation (the others are cancelled at random moments).
 * Also run under ThreadSanitizer (see the report). */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mock_model.h"
#include "test_util.h"

enum { N_SUBMITTERS = 4, PER_THREAD = 25, N = N_SUBMITTERS * PER_THREAD };

typedef struct req {
    int32_t prompt[32];
    int n_prompt, max_tokens;
    int32_t ids[64];
    int n;
    int finals;
    llmrt_finish_reason fin;
    _Atomic uint64_t id;  /* 0 until submitted */
    _Atomic int cancel_sent;
    int target;           /* cancelled deterministically after its first token */
    _Atomic int started;
    _Atomic int cancel_done;
} req;

typedef struct shared {
    llmrt_engine *e;
    req reqs[N];
    _Atomic int submitted;
    _Atomic int finished;
    _Atomic int stop;
    int variant;
} shared;

static void on_token(void *user, const llmrt_token_event *ev)
{
    req *r = user;
    if (ev->token >= 0 && r->n < 64)
        r->ids[r->n++] = ev->token;
    if (r->target && !ev->finish && !atomic_load(&r->started)) {
        atomic_store(&r->started, 1);
        for (int waited = 0; !atomic_load(&r->cancel_done) && waited < 50000; waited++) {
            struct timespec ts = {0, 100000L}; /* up to 5 s, then the test fails below */
            nanosleep(&ts, NULL);
        }
    }
    if (ev->finish) {
        r->finals++;
        r->fin = ev->finish;
    }
}

typedef struct sub_arg {
    shared *s;
    int t;
} sub_arg;

static void *submitter(void *arg)
{
    sub_arg *a = arg;
    shared *s = a->s;
    unsigned seed = 77u + (unsigned)a->t;
    for (int k = 0; k < PER_THREAD; k++) {
        req *r = &s->reqs[a->t * PER_THREAD + k];
        seed = seed * 1103515245u + 12345u;
        r->n_prompt = 1 + (int)((seed >> 8) % 30);
        r->max_tokens = r->target ? 60 : 1 + (int)((seed >> 16) % 40);
        for (int i = 0; i < r->n_prompt; i++)
            r->prompt[i] = (int32_t)(((seed >> (i % 16)) + (unsigned)i * 7u) % 97u);
        llmrt_request q;
        llmrt_request_init(&q);
        q.prompt_ids = r->prompt;
        q.n_prompt = r->n_prompt;
        q.sampling.max_tokens = r->max_tokens;
        q.on_token = on_token;
        q.user = r;
        uint64_t id = 0;
        llmrt_error err = {0};
        if (llmrt_engine_submit(s->e, &q, &id, &err) != LLMRT_OK)
            abort();
        atomic_store(&r->id, id);
        atomic_fetch_add(&s->submitted, 1);
        if (k % 5 == 0)
            sched_yield();
    }
    return NULL;
}

static void *canceller(void *arg)
{
    shared *s = arg;
    unsigned seed = 5;
    while (!atomic_load(&s->stop)) {
        for (int i = 0; i < N; i++) { /* targets: right after their first token */
            req *r = &s->reqs[i];
            if (r->target && atomic_load(&r->started) && atomic_load(&r->id) &&
                !atomic_load(&r->cancel_done)) {
                atomic_store(&r->cancel_sent, 1);
                if (llmrt_engine_cancel(s->e, atomic_load(&r->id)) != LLMRT_OK)
                    abort(); /* it is blocked mid-generation: it must be found */
                atomic_store(&r->cancel_done, 1);
            }
        }
        seed = seed * 1103515245u + 12345u;
        req *r = &s->reqs[(seed >> 8) % N];
        uint64_t id = atomic_load(&r->id);
        if (id && !r->target && (seed >> 20) % 4 == 0 && !atomic_load(&r->cancel_sent)) {
            atomic_store(&r->cancel_sent, 1);
            llmrt_status st = llmrt_engine_cancel(s->e, id);
            if (st != LLMRT_OK && st != LLMRT_ERR_NOT_FOUND)
                abort();
        }
        sched_yield();
    }
    return NULL;
}

static void *stats_reader(void *arg)
{
    shared *s = arg;
    while (!atomic_load(&s->stop)) {
        llmrt_engine_stats st;
        llmrt_engine_stats_get(s->e, &st);
        if (st.kv_blocks_used < 0 || st.kv_blocks_used > st.kv_blocks_total ||
            st.requests_finished > st.requests_submitted)
            abort();
        (void)llmrt_engine_has_work(s->e);
        sched_yield();
    }
    return NULL;
}

START_TEST(test_concurrent_submit_cancel_stats)
{
    static const struct {
        const char *memory;
        int async;
    } variants[] = {{"pageable", 0}, {"pinned", 1}};
    shared *s = calloc(1, sizeof *s);
    mock_rig r;
    mock_rig_opts o = mock_rig_default_opts();
    o.memory = variants[_i].memory;
    o.ops.async = variants[_i].async;
    o.set.async_scheduling = variants[_i].async;
    o.set.max_num_seqs = 8;
    o.set.kv_tokens = 256; /* small: preemption happens too */
    o.set.block_size = 4;
    llmrt_error err = {0};
    ck_assert_msg(mock_rig_open(&r, &o, &err) == LLMRT_OK, "%s", err.msg);
    s->e = r.e;
    for (int i = 0; i < N; i++) /* before any thread starts: read by all of them */
        s->reqs[i].target = (i % PER_THREAD) % 4 == 1;
    pthread_t subs[N_SUBMITTERS], canc, stats;
    sub_arg args[N_SUBMITTERS];
    for (int t = 0; t < N_SUBMITTERS; t++) {
        args[t].s = s, args[t].t = t;
        pthread_create(&subs[t], NULL, submitter, &args[t]);
    }
    pthread_create(&canc, NULL, canceller, s);
    pthread_create(&stats, NULL, stats_reader, s);
    /* the stepping thread */
    while (atomic_load(&s->submitted) < N || llmrt_engine_has_work(r.e)) {
        if (!llmrt_engine_wait_work(r.e, 5))
            continue;
        llmrt_status st = llmrt_engine_step(r.e, &err);
        ck_assert_msg(st == LLMRT_OK, "%s", err.msg);
    }
    for (int t = 0; t < N_SUBMITTERS; t++)
        pthread_join(subs[t], NULL);
    atomic_store(&s->stop, 1);
    pthread_join(canc, NULL);
    pthread_join(stats, NULL);
    int cancelled = 0;
    for (int i = 0; i < N; i++) {
        req *q = &s->reqs[i];
        ck_assert_int_eq(q->finals, 1);
        int32_t ref[64];
        int nr = mock_model_greedy(&o.model, q->prompt, q->n_prompt, q->max_tokens, ref);
        if (q->target)
            ck_assert_msg(q->fin == LLMRT_FINISH_CANCELLED, "target %d ended with %d", i, q->fin);
        if (q->fin == LLMRT_FINISH_CANCELLED) {
            cancelled++;
            ck_assert(atomic_load(&q->cancel_sent));
            ck_assert_int_le(q->n, nr);
        } else {
            ck_assert_int_eq(q->fin, LLMRT_FINISH_LENGTH);
            ck_assert_int_eq(q->n, nr);
        }
        for (int k = 0; k < q->n; k++)
            ck_assert_int_eq(q->ids[k], ref[k]);
    }
    ck_assert_int_ge(cancelled, N / 4);
    llmrt_engine_stats st;
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_int_eq(st.kv_blocks_used, 0);
    ck_assert_int_eq(st.running, 0);
    ck_assert_int_eq(st.waiting, 0);
    ck_assert_uint_eq(st.requests_submitted, N);
    ck_assert_uint_eq(st.requests_finished, N);
    ck_assert_uint_eq(st.requests_cancelled, (uint64_t)cancelled);
    mock_rig_close(&r);
    free(s);
}
END_TEST

/* wait_work wakes on submit from another thread, and llmrt_engine_wake interrupts it. */
static void *late_submit(void *arg)
{
    shared *s = arg;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    req *r = &s->reqs[0];
    r->n_prompt = 3;
    r->prompt[0] = 1, r->prompt[1] = 2, r->prompt[2] = 3;
    llmrt_request q;
    llmrt_request_init(&q);
    q.prompt_ids = r->prompt;
    q.n_prompt = 3;
    q.sampling.max_tokens = 4;
    q.on_token = on_token;
    q.user = r;
    llmrt_error err = {0};
    llmrt_engine_submit(s->e, &q, NULL, &err);
    return NULL;
}

static void *late_wake(void *arg)
{
    shared *s = arg;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    llmrt_engine_wake(s->e);
    return NULL;
}

START_TEST(test_wait_and_wake)
{
    shared *s = calloc(1, sizeof *s);
    mock_rig r;
    mock_rig_opts o = mock_rig_default_opts();
    llmrt_error err = {0};
    ck_assert_msg(mock_rig_open(&r, &o, &err) == LLMRT_OK, "%s", err.msg);
    s->e = r.e;
    ck_assert_int_eq(llmrt_engine_wait_work(r.e, 0), 0);
    pthread_t t;
    pthread_create(&t, NULL, late_submit, s);
    ck_assert_int_eq(llmrt_engine_wait_work(r.e, -1), 1); /* no timeout: the submit wakes it */
    pthread_join(t, NULL);
    ck_assert_int_eq(llmrt_engine_run(r.e, &err), LLMRT_OK);
    ck_assert_int_eq(s->reqs[0].n, 4);
    pthread_create(&t, NULL, late_wake, s);
    ck_assert_int_eq(llmrt_engine_wait_work(r.e, -1), 0); /* woken with nothing to do */
    pthread_join(t, NULL);
    mock_rig_close(&r);
    free(s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("engine_threads");
    TCase *tc = tcase_create("engine_threads");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_concurrent_submit_cancel_stats, 0, 2);
    tcase_add_test(tc, test_wait_and_wake);
    suite_add_tcase(su, tc);
    return tu_run_suite(su);
}
