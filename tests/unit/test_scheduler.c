/* test_scheduler.c — continuous batching decisions: token budget and chunked prefill,
 * max_num_seqs, FIFO admission without overtaking, preemption of the newest running
 * sequence with recomputation, decode rows and a prefill chunk in one step (the chunk shrinks
 * rather than take a block from the step's own rows), the by-backend default limits, and no
 * request lost or duplicated under a random workload. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "mock_backend.h"
#include "scheduler.h"
#include "test_util.h"

typedef struct fixture {
    llmrt_backend_ref be;
    llmrt_kv kv;
    llmrt_scheduler s;
    llmrt_sched_item items[64];
} fixture;

static void setup_fx(fixture *f, int32_t blocks, int32_t block_size, int32_t max_seqs,
                     int32_t max_tokens)
{
    llmrt_error err = {0};
    f->be = mock_backend_new(-1, 1);
    ck_assert_int_eq(llmrt_kv_init(&f->kv, &f->be, 1, 1, 4, block_size, blocks,
                                   LLMRT_DTYPE_F32, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_sched_init(&f->s, &f->kv, max_seqs, max_tokens, &err), LLMRT_OK);
}

static void teardown_fx(fixture *f)
{
    llmrt_sched_free(&f->s);
    llmrt_kv_free(&f->kv);
    mock_backend_free(&f->be);
}

static llmrt_sched_seq *mkseq(uint64_t order, int32_t n_tokens)
{
    llmrt_sched_seq *q = calloc(1, sizeof *q);
    q->order = order;
    q->n_tokens = n_tokens;
    return q;
}

static void freeseq(llmrt_sched_seq *q)
{
    llmrt_kv_table_free(&q->table);
    free(q);
}

/* What the engine does after a step: every sampling item gets one more token. */
static void after_step(llmrt_sched_item *it, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        if (it[i].samples)
            it[i].seq->n_tokens++;
}

START_TEST(test_chunked_prefill_and_budget)
{
    fixture f;
    setup_fx(&f, 100, 4, 8, 16);
    llmrt_error err = {0};
    llmrt_sched_seq *a = mkseq(1, 40), *b = mkseq(2, 3);
    llmrt_sched_add(&f.s, a, &err);
    llmrt_sched_add(&f.s, b, &err);
    int32_t nt, np;
    /* step 1: a takes the whole budget as its first chunk; b must wait (FIFO, no budget) */
    int32_t n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_eq(f.items[0].seq, a);
    ck_assert_int_eq(f.items[0].start, 0);
    ck_assert_int_eq(f.items[0].n_new, 16);
    ck_assert_int_eq(f.items[0].samples, 0);
    ck_assert_int_eq(nt, 16);
    ck_assert_int_eq(a->table.n, 4);
    /* step 2: the next chunk */
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(f.items[0].start, 16);
    ck_assert_int_eq(f.items[0].n_new, 16);
    /* step 3: a's last 8 tokens and b's prompt share the step */
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(f.items[0].n_new, 8);
    ck_assert_int_eq(f.items[0].samples, 1);
    ck_assert_ptr_eq(f.items[1].seq, b);
    ck_assert_int_eq(f.items[1].n_new, 3);
    ck_assert_int_eq(f.items[1].samples, 1);
    ck_assert_int_eq(nt, 11);
    after_step(f.items, n);
    /* step 4: both decode one token */
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(f.items[0].start, 40);
    ck_assert_int_eq(f.items[0].n_new, 1);
    ck_assert_int_eq(f.items[1].start, 3);
    ck_assert_int_eq(nt, 2);
    llmrt_sched_remove(&f.s, a);
    llmrt_sched_remove(&f.s, b);
    ck_assert_int_eq(f.kv.n_free, 100);
    freeseq(a), freeseq(b);
    teardown_fx(&f);
}
END_TEST

START_TEST(test_max_seqs_and_fifo)
{
    fixture f;
    setup_fx(&f, 6, 4, 2, 64);
    llmrt_error err = {0};
    llmrt_sched_seq *q[4];
    for (int i = 0; i < 4; i++) {
        q[i] = mkseq((uint64_t)(10 + i), i == 2 ? 20 : 2);
        llmrt_sched_add(&f.s, q[i], &err);
    }
    int32_t nt, np;
    int32_t n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 2); /* max_num_seqs */
    ck_assert_ptr_eq(f.items[0].seq, q[0]);
    ck_assert_ptr_eq(f.items[1].seq, q[1]);
    after_step(f.items, n);
    llmrt_sched_remove(&f.s, q[0]);
    /* q[2] (20 tokens = 5 blocks) does not fit in the 5 free blocks minus q[1]'s needs?
     * q[1] holds 1 block, 5 are free: q[2] fits exactly; q[3] must not overtake anyway. */
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 2);
    ck_assert_ptr_eq(f.items[1].seq, q[2]);
    after_step(f.items, n);
    llmrt_sched_remove(&f.s, q[1]);
    /* now 1 seq running with 5 blocks (needs a 6th at 21 tokens): q[3] needs 1 block but
     * there is 1 free and q[2] needs it: q[2] keeps decoding, q[3] may join only if room */
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_ge(n, 1);
    ck_assert_ptr_eq(f.items[0].seq, q[2]);
    ck_assert_int_eq(np, 0);
    for (int i = 0; i < 4; i++) {
        llmrt_sched_remove(&f.s, q[i]);
        freeseq(q[i]);
    }
    ck_assert_int_eq(f.kv.n_free, 6);
    teardown_fx(&f);
}
END_TEST

START_TEST(test_fifo_head_blocks_admission)
{
    fixture f;
    setup_fx(&f, 4, 4, 8, 64);
    llmrt_error err = {0};
    llmrt_sched_seq *a = mkseq(1, 8), *big = mkseq(2, 12), *small = mkseq(3, 2);
    llmrt_sched_add(&f.s, a, &err);
    int32_t nt, np;
    ck_assert_int_eq(llmrt_sched_schedule(&f.s, f.items, &nt, &np), 1);
    after_step(f.items, 1);
    llmrt_sched_add(&f.s, big, &err);
    llmrt_sched_add(&f.s, small, &err);
    /* a holds 2 blocks and needs a 3rd; big needs 3 of the 1 left: nobody is admitted, and
     * small (which would fit) does not overtake big */
    int32_t n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_eq(f.items[0].seq, a);
    ck_assert_int_eq(f.s.n_waiting, 2);
    ck_assert(!llmrt_sched_can_admit(&f.s));
    llmrt_sched_remove(&f.s, a);
    ck_assert(llmrt_sched_can_admit(&f.s));
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 2); /* big takes 3 blocks, small the last one, in arrival order */
    ck_assert_ptr_eq(f.items[0].seq, big);
    ck_assert_ptr_eq(f.items[1].seq, small);
    llmrt_sched_remove(&f.s, big);
    llmrt_sched_remove(&f.s, small);
    freeseq(a), freeseq(big), freeseq(small);
    teardown_fx(&f);
}
END_TEST

START_TEST(test_preempt_newest)
{
    fixture f;
    setup_fx(&f, 4, 2, 8, 64); /* 8 tokens of cache */
    llmrt_error err = {0};
    llmrt_sched_seq *a = mkseq(1, 4), *b = mkseq(2, 4);
    llmrt_sched_add(&f.s, a, &err);
    llmrt_sched_add(&f.s, b, &err);
    int32_t nt, np;
    ck_assert_int_eq(llmrt_sched_schedule(&f.s, f.items, &nt, &np), 2);
    after_step(f.items, 2); /* a, b: 5 tokens each (4 computed), 2 blocks each, 0 free */
    ck_assert_int_eq(f.kv.n_free, 0);
    /* both need a 3rd block: b (newest) is preempted, a continues */
    int32_t n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(np, 1);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_eq(f.items[0].seq, a);
    ck_assert_int_eq(b->n_computed, 0);
    ck_assert_int_eq(b->table.n, 0);
    ck_assert_int_eq(b->n_preempted, 1);
    ck_assert_int_eq(f.s.n_waiting, 1);
    ck_assert_int_eq(f.s.preemptions, 1);
    after_step(f.items, n);
    llmrt_sched_remove(&f.s, a);
    /* b comes back: its 5 tokens (prompt + generated) are recomputed in one prefill */
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_eq(f.items[0].seq, b);
    ck_assert_int_eq(f.items[0].start, 0);
    ck_assert_int_eq(f.items[0].n_new, 5);
    ck_assert_int_eq(f.items[0].samples, 1);
    llmrt_sched_remove(&f.s, b);
    freeseq(a), freeseq(b);
    teardown_fx(&f);
}
END_TEST

START_TEST(test_preempt_self_when_newest)
{
    fixture f;
    setup_fx(&f, 3, 2, 8, 64);
    llmrt_error err = {0};
    llmrt_sched_seq *a = mkseq(1, 4), *b = mkseq(2, 1);
    llmrt_sched_add(&f.s, a, &err);
    llmrt_sched_add(&f.s, b, &err);
    int32_t nt, np;
    ck_assert_int_eq(llmrt_sched_schedule(&f.s, f.items, &nt, &np), 2);
    after_step(f.items, 2); /* a: 5 tokens, 2 blocks; b: 2 tokens, 1 block; 0 free */
    /* a needs a 3rd block: b is preempted; b itself is not scheduled */
    int32_t n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_eq(f.items[0].seq, a);
    ck_assert_int_eq(np, 1);
    ck_assert_int_eq(b->running, 0);
    ck_assert_int_eq(b->queued, 1);
    llmrt_sched_remove(&f.s, a);
    llmrt_sched_remove(&f.s, b);
    freeseq(a), freeseq(b);
    teardown_fx(&f);
}
END_TEST

/* A mixed step: the decode row first, then the prefill chunk with the budget left; when the
 * chunk's blocks are short it shrinks to what is free instead of preempting itself (the old
 * rule threw its computed tokens away), and it preempts itself only when nothing fits. */
START_TEST(test_mixed_step_and_shrinking_chunk)
{
    fixture f;
    setup_fx(&f, 6, 4, 8, 12); /* 24 tokens of cache, 12 per step */
    llmrt_error err = {0};
    llmrt_sched_seq *a = mkseq(1, 2), *b = mkseq(2, 30);
    llmrt_sched_add(&f.s, a, &err);
    llmrt_sched_add(&f.s, b, &err);
    int32_t nt, np;
    int32_t n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 2); /* a's prompt, b's first 10 tokens */
    ck_assert_int_eq(f.items[1].n_new, 10);
    after_step(f.items, n);
    /* a decodes; b wants 11 more (6 blocks) but 3 + 2 free hold 20 tokens: 10 more */
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(np, 0);
    ck_assert_ptr_eq(f.items[0].seq, a);
    ck_assert_int_eq(f.items[0].n_new, 1);
    ck_assert_ptr_eq(f.items[1].seq, b);
    ck_assert_int_eq(f.items[1].start, 10);
    ck_assert_int_eq(f.items[1].n_new, 10);
    ck_assert_int_eq(f.items[1].samples, 0);
    ck_assert_int_eq(nt, 11);
    ck_assert_int_eq(f.kv.n_free, 0);
    after_step(f.items, n);
    /* no block left for b at all: a still decodes, b (the newest) is preempted */
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_eq(f.items[0].seq, a);
    ck_assert_int_eq(np, 1);
    ck_assert_int_eq(b->queued, 1);
    ck_assert_int_eq(b->n_computed, 0);
    llmrt_sched_remove(&f.s, a);
    llmrt_sched_remove(&f.s, b);
    ck_assert_int_eq(f.kv.n_free, 6);
    freeseq(a), freeseq(b);
    teardown_fx(&f);
}
END_TEST

/* Decode rows are planned before any prefill chunk, whatever the arrival order: a decode row
 * newer than a running prefill still gets its token, and the chunk the rest of the budget. */
START_TEST(test_decode_rows_before_prefill)
{
    fixture f;
    setup_fx(&f, 100, 4, 8, 16);
    llmrt_error err = {0};
    llmrt_sched_seq *a = mkseq(1, 3), *b = mkseq(2, 3);
    llmrt_sched_add(&f.s, a, &err);
    llmrt_sched_add(&f.s, b, &err);
    int32_t nt, np;
    int32_t n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 2);
    after_step(f.items, n);
    /* a (the older) gets 40 more tokens to compute, as a readmitted recomputation would */
    a->n_tokens += 40;
    n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
    ck_assert_int_eq(n, 2);
    ck_assert_ptr_eq(f.items[0].seq, b);
    ck_assert_int_eq(f.items[0].n_new, 1);
    ck_assert_ptr_eq(f.items[1].seq, a);
    ck_assert_int_eq(f.items[1].n_new, 15);
    ck_assert_int_eq(nt, 16);
    llmrt_sched_remove(&f.s, a);
    llmrt_sched_remove(&f.s, b);
    freeseq(a), freeseq(b);
    teardown_fx(&f);
}
END_TEST

/* scheduler.max_num_seqs / max_num_batched_tokens = 0: by backend (docs: README, the keys). */
START_TEST(test_default_limits)
{
    int32_t seqs = 0, tokens = 0;
    llmrt_sched_default_limits(1, &seqs, &tokens);
    ck_assert_int_eq(seqs, 256);
    ck_assert_int_eq(tokens, 8192);
    seqs = 0, tokens = 0;
    llmrt_sched_default_limits(0, &seqs, &tokens);
    ck_assert_int_eq(seqs, 32);
    ck_assert_int_eq(tokens, 2048);
    seqs = 5, tokens = 64; /* set values stay */
    llmrt_sched_default_limits(1, &seqs, &tokens);
    ck_assert_int_eq(seqs, 5);
    ck_assert_int_eq(tokens, 64);
}
END_TEST

/* Random workload: every sequence reaches its target length exactly once, the cache never
 * over-commits, and all blocks come back. */
START_TEST(test_random_workload)
{
    fixture f;
    setup_fx(&f, 12, 4, 5, 24);
    llmrt_error err = {0};
    enum { N = 60 };
    llmrt_sched_seq *q[N];
    int32_t target[N], finished[N] = {0};
    unsigned rng = 12345;
    int next = 0, done = 0, steps = 0;
    while (done < N && steps < 100000) {
        steps++;
        if (next < N && (rng = rng * 1103515245u + 12345u) % 3 == 0) {
            q[next] = mkseq((uint64_t)next + 1, 1 + (int32_t)((rng >> 8) % 20));
            target[next] = q[next]->n_tokens + 1 + (int32_t)((rng >> 16) % 20);
            if (target[next] > 48)
                target[next] = 48; /* one sequence fits in the cache: 12 blocks x 4 */
            llmrt_sched_add(&f.s, q[next], &err);
            next++;
        }
        int32_t nt, np;
        int32_t n = llmrt_sched_schedule(&f.s, f.items, &nt, &np);
        ck_assert_int_le(nt, 24);
        ck_assert_int_le(n, 5);
        ck_assert_int_ge(f.kv.n_free, 0);
        for (int32_t i = 0; i < n; i++) {
            /* no sequence twice in a step */
            for (int32_t j = 0; j < i; j++)
                ck_assert_ptr_ne(f.items[i].seq, f.items[j].seq);
            ck_assert_int_le(f.items[i].seq->n_computed, f.items[i].seq->n_tokens);
            ck_assert_int_ge(f.items[i].seq->table.n * 4, f.items[i].seq->n_computed);
        }
        after_step(f.items, n);
        for (int32_t i = 0; i < n; i++) {
            llmrt_sched_seq *s = f.items[i].seq;
            int idx = (int)s->order - 1;
            if (f.items[i].samples && s->n_tokens >= target[idx]) {
                ck_assert_int_eq(finished[idx], 0);
                finished[idx] = 1;
                llmrt_sched_remove(&f.s, s);
                done++;
            }
        }
        if (next == N && n == 0)
            ck_assert_msg(f.s.n_waiting == 0 && f.s.n_running == 0, "stuck with work left");
    }
    ck_assert_int_eq(done, N);
    ck_assert_int_eq(f.kv.n_free, 12);
    ck_assert_int_gt((int)f.s.preemptions, 0); /* the workload does exercise preemption */
    for (int i = 0; i < N; i++)
        freeseq(q[i]);
    teardown_fx(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scheduler");
    TCase *tc = tcase_create("scheduler");
    tcase_add_test(tc, test_chunked_prefill_and_budget);
    tcase_add_test(tc, test_max_seqs_and_fifo);
    tcase_add_test(tc, test_fifo_head_blocks_admission);
    tcase_add_test(tc, test_preempt_newest);
    tcase_add_test(tc, test_preempt_self_when_newest);
    tcase_add_test(tc, test_mixed_step_and_shrinking_chunk);
    tcase_add_test(tc, test_decode_rows_before_prefill);
    tcase_add_test(tc, test_default_limits);
    tcase_add_test(tc, test_random_workload);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
