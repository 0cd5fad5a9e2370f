/* test_prefix_cache.c — automatic prefix caching's block bookkeeping, below the engine:
 * the chained hash; the index never matching another prefix (a forced hash collision, a
 * different parent, a parent that was evicted and reused); shared blocks and their
 * reference counts; only full blocks shared, and never the one holding the last token;
 * released blocks staying cached and reclaimable; eviction in least-recently-released
 * order (a sequence's last block first), with never-cached free blocks used before any
 * cached one; a duplicate computed beside a cached block not indexed twice; and the
 * scheduler starting a joining sequence after its cached blocks. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "mock_backend.h"
#include "prefix_cache.h"
#include "scheduler.h"
#include "test_util.h"

/* ---- the index alone ---- */

START_TEST(test_hash_chain)
{
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5}, c[3] = {1, 2, 3};
    uint64_t ha = llmrt_prefix_hash(LLMRT_PREFIX_ROOT, a, 4);
    ck_assert_uint_eq(ha, llmrt_prefix_hash(LLMRT_PREFIX_ROOT, a, 4)); /* a function */
    ck_assert_uint_ne(ha, llmrt_prefix_hash(LLMRT_PREFIX_ROOT, b, 4)); /* every token counts */
    ck_assert_uint_ne(ha, llmrt_prefix_hash(LLMRT_PREFIX_ROOT, c, 3)); /* and the length */
    /* the same tokens after another prefix are another block */
    ck_assert_uint_ne(llmrt_prefix_hash(ha, a, 4),
                      llmrt_prefix_hash(llmrt_prefix_hash(LLMRT_PREFIX_ROOT, b, 4), a, 4));
    ck_assert_uint_ne(llmrt_prefix_hash(ha, a, 4), ha);
    /* token order matters */
    int32_t r[4] = {2, 1, 3, 4};
    ck_assert_uint_ne(ha, llmrt_prefix_hash(LLMRT_PREFIX_ROOT, r, 4));
}
END_TEST

/* The hash only picks a bucket: blocks with one hash (a forced collision) are told apart by
 * their tokens and parents, and a parent's new content never adopts its old children. */
START_TEST(test_index_exact_under_collisions)
{
    llmrt_prefix_cache pc;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_prefix_init(&pc, 10, 2, &err), LLMRT_OK);
    const uint64_t H = 12345, G = 999;
    int32_t t[2] = {7, 8}, u[2] = {7, 9}, w[2] = {1, 1};
    llmrt_prefix_insert(&pc, 5, H, 0, t);
    llmrt_prefix_insert(&pc, 6, H, 0, u); /* same hash, other tokens */
    ck_assert_int_eq(llmrt_prefix_find(&pc, H, 0, t), 5);
    ck_assert_int_eq(llmrt_prefix_find(&pc, H, 0, u), 6);
    ck_assert_int_eq(llmrt_prefix_find(&pc, H, 0, w), 0);
    ck_assert_int_eq(llmrt_prefix_find(&pc, H + 1, 0, t), 0);
    /* a child of 5; the same hash and tokens under parent 6 is not it */
    llmrt_prefix_insert(&pc, 7, G, 5, w);
    ck_assert_int_eq(llmrt_prefix_find(&pc, G, 5, w), 7);
    ck_assert_int_eq(llmrt_prefix_find(&pc, G, 6, w), 0);
    ck_assert_int_eq(llmrt_prefix_find(&pc, G, 0, w), 0);
    ck_assert_int_eq(pc.n_indexed, 3);
    /* 5 is released and evicted, then indexed again (its id now holds new KV): 7 was
     * computed after the old 5 and must not be found after the new one */
    llmrt_prefix_lru_push(&pc, 5);
    ck_assert_int_eq(pc.n_lru, 1);
    ck_assert_int_eq(llmrt_prefix_evict(&pc), 5);
    ck_assert_int_eq(llmrt_prefix_evict(&pc), 0); /* the list is empty */
    ck_assert_int_eq(pc.n_lru, 0);
    ck_assert_uint_eq(pc.evictions, 1);
    ck_assert_int_eq(llmrt_prefix_find(&pc, H, 0, t), 0);
    ck_assert_int_eq(llmrt_prefix_find(&pc, H, 0, u), 6); /* its bucket neighbour stays */
    llmrt_prefix_insert(&pc, 5, H, 0, t);
    ck_assert_int_eq(llmrt_prefix_find(&pc, H, 0, t), 5);
    ck_assert_int_eq(llmrt_prefix_find(&pc, G, 5, w), 0);
    llmrt_prefix_free(&pc);
}
END_TEST

START_TEST(test_lru_order)
{
    llmrt_prefix_cache pc;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_prefix_init(&pc, 8, 1, &err), LLMRT_OK);
    for (int32_t b = 1; b <= 4; b++) {
        int32_t tok = b;
        llmrt_prefix_insert(&pc, b, (uint64_t)b, 0, &tok);
        llmrt_prefix_lru_push(&pc, b);
    }
    llmrt_prefix_lru_remove(&pc, 2); /* held again ... */
    llmrt_prefix_lru_push(&pc, 2);   /* ... and released: now the most recent */
    ck_assert_int_eq(llmrt_prefix_evict(&pc), 1);
    ck_assert_int_eq(llmrt_prefix_evict(&pc), 3);
    ck_assert_int_eq(llmrt_prefix_evict(&pc), 4);
    ck_assert_int_eq(llmrt_prefix_evict(&pc), 2);
    ck_assert_int_eq(llmrt_prefix_evict(&pc), 0);
    ck_assert_int_eq(pc.n_indexed, 0);
    llmrt_prefix_free(&pc);
}
END_TEST

/* ---- blocks and tables ---- */

typedef struct kvfx {
    llmrt_backend_ref be;
    llmrt_kv kv;
} kvfx;

static void kv_open(kvfx *f, int32_t blocks, int32_t bs)
{
    llmrt_error err = {0};
    f->be = mock_backend_new(-1, 1);
    ck_assert_int_eq(llmrt_kv_init(&f->kv, &f->be, 1, 1, 4, bs, blocks, LLMRT_DTYPE_F32, &err),
                     LLMRT_OK);
    ck_assert_int_eq(llmrt_kv_prefix_enable(&f->kv, &err), LLMRT_OK);
}

static void kv_close(kvfx *f)
{
    llmrt_kv_free(&f->kv);
    mock_backend_free(&f->be);
}

/* A sequence that computed tokens [n]: blocks reserved and its full blocks indexed. */
static void computed(llmrt_kv *kv, llmrt_block_table *t, const int32_t *tokens, int32_t n)
{
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, t, n, &err), LLMRT_OK);
    llmrt_kv_prefix_commit(kv, t, tokens, n);
}

static void seq_tokens(int32_t *t, int32_t n, int32_t base)
{
    for (int32_t i = 0; i < n; i++)
        t[i] = base + i;
}

START_TEST(test_share_refcounts_and_release)
{
    kvfx f;
    kv_open(&f, 10, 4);
    llmrt_kv *kv = &f.kv;
    int32_t T[16];
    seq_tokens(T, 16, 100);
    llmrt_block_table a = {0}, b = {0}, c = {0};
    computed(kv, &a, T, 10); /* blocks: 2 full + a partial one */
    ck_assert_int_eq(a.n, 3);
    ck_assert_int_eq(a.n_indexed, 2); /* the partial block is never indexed */
    ck_assert_int_eq(kv->pc.n_indexed, 2);
    ck_assert_int_eq(kv->n_free, 7);
    /* a lookup stops before the block that holds the last token */
    int32_t unheld = -1;
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, T, 10, &unheld), 2);
    ck_assert_int_eq(unheld, 0);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, T, 9, NULL), 2);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, T, 8, NULL), 1); /* 8 tokens = 2 full blocks:
                                                                   the second is computed */
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, T, 4, NULL), 0);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, T, 1, NULL), 0);
    /* b starts the same way: it holds a's first two blocks */
    ck_assert_int_eq(llmrt_kv_prefix_attach(kv, &b, T, 12), 2);
    ck_assert_int_eq(b.n, 2);
    ck_assert_int_eq(b.ids[0], a.ids[0]);
    ck_assert_int_eq(b.ids[1], a.ids[1]);
    ck_assert_int_eq(kv->refs[a.ids[0]], 2);
    ck_assert_int_eq(kv->refs[a.ids[2]], 1);
    ck_assert_int_eq(kv->n_free, 7); /* held blocks: nothing taken */
    ck_assert_uint_eq(kv->prefix_queries, 12);
    ck_assert_uint_eq(kv->prefix_hits, 8);
    /* b computes its third block itself: its own block, never a's partial one */
    computed(kv, &b, T, 12);
    ck_assert_int_eq(b.n, 3);
    ck_assert_int_ne(b.ids[2], a.ids[2]);
    ck_assert_int_eq(b.n_indexed, 3);
    ck_assert_int_eq(kv->pc.n_indexed, 3);
    /* a goes: its partial block is free again, the shared ones are still b's */
    llmrt_kv_table_release(kv, &a);
    ck_assert_int_eq(kv->refs[b.ids[0]], 1);
    ck_assert_int_eq(kv->n_free, 7);
    ck_assert_int_eq(kv->pc.n_lru, 0);
    ck_assert_int_eq(llmrt_kv_used_blocks(kv), 3);
    /* b goes: its three blocks stay cached, free to take, found by the next lookup */
    llmrt_kv_table_release(kv, &b);
    ck_assert_int_eq(kv->n_free, 10);
    ck_assert_int_eq(kv->pc.n_lru, 3);
    ck_assert_int_eq(kv->pc.n_indexed, 3);
    ck_assert_int_eq(llmrt_kv_used_blocks(kv), 0);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, T, 16, &unheld), 3);
    ck_assert_int_eq(unheld, 3);
    ck_assert_int_eq(llmrt_kv_prefix_attach(kv, &c, T, 16), 3);
    ck_assert_int_eq(kv->n_free, 7); /* reclaimable blocks are held again */
    ck_assert_int_eq(kv->pc.n_lru, 0);
    /* a prompt that differs in its second block shares only the first */
    int32_t U[16];
    memcpy(U, T, sizeof U);
    U[5] = 1;
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, U, 16, NULL), 1);
    U[0] = 1;
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, U, 16, NULL), 0);
    llmrt_kv_table_release(kv, &c);
    llmrt_kv_table_free(&a);
    llmrt_kv_table_free(&b);
    llmrt_kv_table_free(&c);
    kv_close(&f);
}
END_TEST

START_TEST(test_eviction_lru)
{
    kvfx f;
    kv_open(&f, 6, 4);
    llmrt_kv *kv = &f.kv;
    int32_t A[8], B[8];
    seq_tokens(A, 8, 10);
    seq_tokens(B, 8, 50);
    llmrt_block_table a = {0}, b = {0}, h = {0}, d = {0};
    computed(kv, &a, A, 8);
    computed(kv, &b, B, 8);
    ck_assert_int_eq(kv->pc.n_indexed, 4);
    int32_t a0 = a.ids[0], a1 = a.ids[1], b0 = b.ids[0], b1 = b.ids[1];
    llmrt_kv_table_release(kv, &a); /* LRU: a1, a0 */
    llmrt_kv_table_release(kv, &b); /* LRU: a1, a0, b1, b0 */
    ck_assert_int_eq(kv->n_free, 6);
    /* never-cached free blocks are used first: nothing evicted */
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, &h, 8, &err), LLMRT_OK);
    ck_assert_uint_eq(kv->pc.evictions, 0);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, A, 9, NULL), 2);
    /* then the least recently released: a's last block before its first */
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, &d, 4, &err), LLMRT_OK);
    ck_assert_int_eq(d.ids[0], a1);
    ck_assert_uint_eq(kv->pc.evictions, 1);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, A, 9, NULL), 1);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, B, 9, NULL), 2);
    /* b is used again (held and released): it becomes the most recent, so a0 goes next */
    llmrt_block_table b2 = {0};
    ck_assert_int_eq(llmrt_kv_prefix_attach(kv, &b2, B, 9), 2);
    llmrt_kv_table_release(kv, &b2); /* LRU: a0, b1, b0 */
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, &d, 8, &err), LLMRT_OK);
    ck_assert_int_eq(d.ids[1], a0);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, A, 9, NULL), 0);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, B, 9, NULL), 2);
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, &d, 12, &err), LLMRT_OK);
    ck_assert_int_eq(d.ids[2], b1);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, B, 9, NULL), 1);
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, &d, 16, &err), LLMRT_OK);
    ck_assert_int_eq(d.ids[3], b0);
    ck_assert_int_eq(kv->n_free, 0);
    ck_assert_int_eq(kv->pc.n_indexed, 0);
    ck_assert_uint_eq(kv->pc.evictions, 4);
    /* all or nothing still */
    llmrt_block_table x = {0};
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, &x, 1, &err), LLMRT_ERR_LIMIT);
    llmrt_kv_table_release(kv, &h);
    llmrt_kv_table_release(kv, &d);
    ck_assert_int_eq(kv->n_free, 6);
    llmrt_kv_table_free(&a), llmrt_kv_table_free(&b), llmrt_kv_table_free(&h);
    llmrt_kv_table_free(&d), llmrt_kv_table_free(&b2), llmrt_kv_table_free(&x);
    kv_close(&f);
}
END_TEST

/* Two sequences computed the same first block side by side: it is indexed once; the second
 * one's next block is indexed after the first one's block, so both prefixes are found. A
 * token still being computed (-1) stops indexing at its block. */
START_TEST(test_duplicates_and_placeholders)
{
    kvfx f;
    kv_open(&f, 12, 4);
    llmrt_kv *kv = &f.kv;
    int32_t P[12], Q[12];
    seq_tokens(P, 12, 1);
    memcpy(Q, P, sizeof Q);
    for (int i = 4; i < 12; i++)
        Q[i] = 200 + i;
    llmrt_block_table a = {0}, c = {0};
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, &a, 8, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, &c, 8, &err), LLMRT_OK);
    llmrt_kv_prefix_commit(kv, &a, P, 8);
    llmrt_kv_prefix_commit(kv, &c, Q, 8);
    ck_assert_int_eq(kv->pc.n_indexed, 3); /* a0, a1, c1; c0 duplicates a0 */
    ck_assert(!kv->pc.indexed[c.ids[0]]);
    ck_assert_int_eq(c.last_node, c.ids[1]);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, P, 9, NULL), 2);
    ck_assert_int_eq(llmrt_kv_prefix_probe(kv, Q, 9, NULL), 2);
    llmrt_block_table q = {0};
    ck_assert_int_eq(llmrt_kv_prefix_attach(kv, &q, Q, 9), 2);
    ck_assert_int_eq(q.ids[0], a.ids[0]);
    ck_assert_int_eq(q.ids[1], c.ids[1]);
    llmrt_kv_table_release(kv, &q);
    /* c's duplicate goes back to the plain free list when c is released */
    int32_t c0 = c.ids[0];
    int32_t before = kv->n_unindexed;
    llmrt_kv_table_release(kv, &c);
    ck_assert_int_eq(kv->n_unindexed, before + 1);
    ck_assert_int_eq(kv->free_ids[kv->n_unindexed - 1], c0);
    /* placeholders: the third block's last token is not known yet */
    ck_assert_int_eq(llmrt_kv_table_reserve(kv, &a, 12, &err), LLMRT_OK);
    P[11] = -1;
    llmrt_kv_prefix_commit(kv, &a, P, 12);
    ck_assert_int_eq(a.n_indexed, 2);
    P[11] = 12;
    llmrt_kv_prefix_commit(kv, &a, P, 11); /* known, but not all computed */
    ck_assert_int_eq(a.n_indexed, 2);
    llmrt_kv_prefix_commit(kv, &a, P, 12);
    ck_assert_int_eq(a.n_indexed, 3);
    llmrt_kv_table_release(kv, &a);
    llmrt_kv_table_free(&a), llmrt_kv_table_free(&c), llmrt_kv_table_free(&q);
    kv_close(&f);
}
END_TEST

/* Prefix caching off: nothing is indexed or found, and the free stack behaves as before. */
START_TEST(test_off_is_plain)
{
    llmrt_backend_ref be = mock_backend_new(-1, 1);
    llmrt_kv kv;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_kv_init(&kv, &be, 1, 1, 4, 4, 6, LLMRT_DTYPE_F32, &err), LLMRT_OK);
    int32_t T[12];
    seq_tokens(T, 12, 3);
    llmrt_block_table a = {0}, b = {0};
    computed(&kv, &a, T, 12);
    ck_assert_int_eq(a.n_indexed, 0);
    ck_assert_int_eq(llmrt_kv_prefix_probe(&kv, T, 12, NULL), 0);
    ck_assert_int_eq(llmrt_kv_prefix_attach(&kv, &b, T, 12), 0);
    ck_assert_uint_eq(kv.prefix_queries, 0);
    int32_t first = a.ids[0];
    llmrt_kv_table_release(&kv, &a);
    ck_assert_int_eq(kv.n_free, 6);
    ck_assert_int_eq(kv.n_unindexed, 6);
    ck_assert_int_eq(llmrt_kv_table_reserve(&kv, &b, 1, &err), LLMRT_OK);
    ck_assert_int_eq(b.ids[0], first);
    llmrt_kv_table_release(&kv, &b);
    llmrt_kv_table_free(&a), llmrt_kv_table_free(&b);
    llmrt_kv_free(&kv);
    mock_backend_free(&be);
}
END_TEST

/* ---- the scheduler ---- */

START_TEST(test_scheduler_starts_after_cached_blocks)
{
    kvfx f;
    kv_open(&f, 40, 4);
    llmrt_scheduler s;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sched_init(&s, &f.kv, 4, 64, &err), LLMRT_OK);
    int32_t T[40];
    seq_tokens(T, 40, 7);
    llmrt_sched_seq a = {.order = 1, .n_tokens = 18, .tokens = T};
    llmrt_sched_seq b = {.order = 2, .n_tokens = 18, .tokens = T};
    llmrt_sched_seq c = {.order = 3, .n_tokens = 16, .tokens = T};
    llmrt_sched_item it[4];
    int32_t nt, np;
    /* a and b arrive together: both compute everything (no block is shared while the step
     * that writes it is being planned) */
    llmrt_sched_add(&s, &a, &err);
    llmrt_sched_add(&s, &b, &err);
    ck_assert_int_eq(llmrt_sched_schedule(&s, it, &nt, &np), 2);
    ck_assert_int_eq(it[0].start, 0);
    ck_assert_int_eq(it[1].start, 0);
    ck_assert_int_eq(it[1].n_new, 18);
    ck_assert_int_eq(nt, 36);
    ck_assert_int_eq(a.n_cached, 0);
    ck_assert_int_eq(b.n_cached, 0);
    ck_assert_int_eq(f.kv.pc.n_indexed, 4); /* a's 4 full blocks; b's equal ones are not */
    /* c, later: its 16 tokens are 4 cached blocks, but its last token is computed, so it
     * takes 3 of them and computes the fourth block */
    llmrt_sched_add(&s, &c, &err);
    a.n_tokens++, b.n_tokens++; /* their sampled tokens */
    T[18] = 5;
    int32_t n = llmrt_sched_schedule(&s, it, &nt, &np);
    ck_assert_int_eq(n, 3);
    ck_assert_ptr_eq(it[2].seq, &c);
    ck_assert_int_eq(it[2].start, 12);
    ck_assert_int_eq(it[2].n_new, 4);
    ck_assert_int_eq(it[2].samples, 1);
    ck_assert_int_eq(c.n_cached, 12);
    ck_assert_int_eq(nt, 1 + 1 + 4); /* cached tokens cost no budget */
    ck_assert_int_eq(c.table.ids[0], a.table.ids[0]);
    ck_assert_int_eq(c.table.ids[2], a.table.ids[2]);
    ck_assert_int_ne(c.table.ids[3], a.table.ids[3]);
    ck_assert_int_eq(f.kv.refs[a.table.ids[0]], 2);
    ck_assert_uint_eq(f.kv.prefix_hits, 12);
    ck_assert_uint_eq(f.kv.prefix_queries, 18 + 18 + 16);
    llmrt_sched_remove(&s, &a);
    llmrt_sched_remove(&s, &b);
    llmrt_sched_remove(&s, &c);
    ck_assert_int_eq(f.kv.n_free, 40);
    llmrt_kv_table_free(&a.table), llmrt_kv_table_free(&b.table), llmrt_kv_table_free(&c.table);
    llmrt_sched_free(&s);
    kv_close(&f);
}
END_TEST

/* The free-block check counts cached blocks nobody holds as free, except those the joining
 * sequence is about to hold itself. */
START_TEST(test_scheduler_admission_counts_cached_blocks)
{
    kvfx f;
    kv_open(&f, 6, 4);
    llmrt_scheduler s;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sched_init(&s, &f.kv, 4, 64, &err), LLMRT_OK);
    int32_t T[40];
    seq_tokens(T, 40, 7);
    llmrt_sched_seq a = {.order = 1, .n_tokens = 16, .tokens = T};
    llmrt_sched_item it[4];
    int32_t nt, np;
    llmrt_sched_add(&s, &a, &err);
    ck_assert_int_eq(llmrt_sched_schedule(&s, it, &nt, &np), 1);
    llmrt_sched_remove(&s, &a); /* its 4 blocks are cached and free */
    ck_assert_int_eq(f.kv.n_free, 6);
    ck_assert_int_eq(f.kv.pc.n_lru, 4);
    /* b: 24 tokens = 6 blocks, the first 4 cached (b's last token is in its 6th): it needs
     * 2 more, and 6 free less the 4 it is about to hold leaves exactly 2 */
    llmrt_sched_seq b = {.order = 2, .n_tokens = 24, .tokens = T};
    llmrt_sched_add(&s, &b, &err);
    ck_assert(llmrt_sched_can_admit(&s));
    ck_assert_int_eq(llmrt_sched_schedule(&s, it, &nt, &np), 1);
    ck_assert_int_eq(it[0].start, 16);
    ck_assert_int_eq(it[0].n_new, 8);
    ck_assert_int_eq(f.kv.n_free, 0);
    llmrt_sched_remove(&s, &b);
    /* c: 28 tokens = 7 blocks, its first 6 cached (all of b's): it needs 1 more, and the 6
     * free blocks are the 6 it would hold — it does not fit (counting them free would say
     * it does) */
    llmrt_sched_seq c = {.order = 3, .n_tokens = 28, .tokens = T};
    llmrt_sched_add(&s, &c, &err);
    ck_assert(!llmrt_sched_can_admit(&s));
    ck_assert_int_eq(llmrt_sched_schedule(&s, it, &nt, &np), 0);
    llmrt_sched_remove(&s, &c);
    llmrt_kv_table_free(&a.table), llmrt_kv_table_free(&b.table), llmrt_kv_table_free(&c.table);
    llmrt_sched_free(&s);
    kv_close(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prefix_cache");
    TCase *tc = tcase_create("prefix_cache");
    tcase_add_test(tc, test_hash_chain);
    tcase_add_test(tc, test_index_exact_under_collisions);
    tcase_add_test(tc, test_lru_order);
    tcase_add_test(tc, test_share_refcounts_and_release);
    tcase_add_test(tc, test_eviction_lru);
    tcase_add_test(tc, test_duplicates_and_placeholders);
    tcase_add_test(tc, test_off_is_plain);
    tcase_add_test(tc, test_scheduler_starts_after_cached_blocks);
    tcase_add_test(tc, test_scheduler_admission_counts_cached_blocks);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
