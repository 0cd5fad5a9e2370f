/* test_engine_prefix.c — automatic prefix caching through the whole step loop (mock model,
 * mock ops backend, real memory plugins): greedy ids with cache.prefix_caching on equal
 * those with it off and the independent reference, for prompts that share no, some or all
 * full blocks with earlier ones (a next turn that resends the previous reply included),
 * after evictions in a small cache, with concurrent and staggered requests on one prefix,
 * with preemption, and after a cancellation in the middle of a chunked prefill — under
 * synchronous and async scheduling, graphs, host sampling and every memory plugin. Each
 * request's cached_tokens is the exact count the rules give (whole blocks, never the one
 * holding the last prompt token), the engine's counters agree, and cached tokens cost no
 * prefill. The mock model reads every position's token and position back from the KV
 * cache through the block table, so a wrong shared block changes the output. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "mock_model.h"
#include "test_util.h"

#define MAXT 128
#define MAXP 160

typedef struct out_t {
    int32_t ids[MAXT];
    int n, finals;
    llmrt_finish_reason fin;
    int32_t cached, prompt_tokens;
    int cached_changed; /* cached_tokens differed between events */
} out_t;

static void on_token(void *user, const llmrt_token_event *ev)
{
    out_t *o = user;
    if (o->n + o->finals > 0 && ev->cached_tokens != o->cached)
        o->cached_changed++;
    o->cached = ev->cached_tokens;
    if (ev->token >= 0 && o->n < MAXT)
        o->ids[o->n++] = ev->token;
    if (ev->finish != LLMRT_FINISH_NONE) {
        o->finals++;
        o->fin = ev->finish;
        o->prompt_tokens = ev->prompt_tokens;
    }
}

static void make_prompt(int32_t *p, int n, unsigned seed, int vocab)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (int32_t)((seed >> 8) % (unsigned)vocab);
    }
}

static uint64_t submit(llmrt_engine *e, const int32_t *p, int n, int max_tokens, out_t *o)
{
    llmrt_request r;
    llmrt_request_init(&r);
    r.prompt_ids = p;
    r.n_prompt = n;
    r.sampling.max_tokens = max_tokens;
    r.on_token = on_token;
    r.user = o;
    uint64_t id = 0;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_engine_submit(e, &r, &id, &err) == LLMRT_OK, "submit: %s", err.msg);
    return id;
}

static void run_ok(llmrt_engine *e)
{
    llmrt_error err = {0};
    ck_assert_msg(llmrt_engine_run(e, &err) == LLMRT_OK, "run: %s", err.msg);
}

static void step_ok(llmrt_engine *e)
{
    llmrt_error err = {0};
    ck_assert_msg(llmrt_engine_step(e, &err) == LLMRT_OK, "step: %s", err.msg);
}

static void check_reference(const mock_model_cfg *cfg, const int32_t *p, int n, int max_tokens,
                            const out_t *o, const char *what, int k)
{
    int32_t ref[MAXT];
    int nr = mock_model_greedy(cfg, p, n, max_tokens, ref);
    ck_assert_msg(o->finals == 1, "%s request %d: %d final events", what, k, o->finals);
    ck_assert_msg(o->n == nr, "%s request %d: %d tokens, reference %d", what, k, o->n, nr);
    for (int i = 0; i < nr; i++)
        ck_assert_msg(o->ids[i] == ref[i], "%s request %d: token %d is %d, reference %d", what, k,
                      i, o->ids[i], ref[i]);
    ck_assert_msg(o->cached_changed == 0, "%s request %d: cached_tokens changed", what, k);
}

typedef struct variant {
    const char *name;
    const char *memory;
    int argmax, sample, graphs, async;
} variant;

static const variant VARIANTS[] = {
    {"pageable, sync", "pageable", 1, 1, 0, 0},
    {"pageable, host sampling", "pageable", 0, 0, 0, 0},
    {"pinned, async", "pinned", 1, 1, 0, 1},
    {"uva, graphs + async", "uva", 1, 1, 1, 1},
    {"pinned, graphs", "pinned", 1, 1, 1, 0},
};
#define N_VARIANTS (int)(sizeof VARIANTS / sizeof *VARIANTS)

static mock_rig_opts variant_opts(const variant *v, int prefix_caching)
{
    mock_rig_opts o = mock_rig_default_opts();
    o.memory = v->memory;
    o.ops.argmax = v->argmax;
    o.ops.sample = v->sample;
    o.ops.graphs = v->graphs;
    o.ops.async = v->async;
    o.set.async_scheduling = v->async;
    o.set.cuda_graphs = v->graphs;
    o.set.block_size = 4;
    o.set.prefix_caching = prefix_caching;
    return o;
}

static void open_ok(mock_rig *r, const mock_rig_opts *o)
{
    llmrt_error err = {0};
    ck_assert_msg(mock_rig_open(r, o, &err) == LLMRT_OK, "rig: %s", err.msg);
}

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb)
{
    int i = 0;
    while (i < na && i < nb && a[i] == b[i])
        i++;
    return i;
}

/* ---- prompts that share no, some or all blocks, one after the other ---- */

enum { N_SEQ = 9 };
typedef struct seq_case {
    int32_t p[N_SEQ][MAXP];
    int len[N_SEQ];
} seq_case;

/* The prompts; prompt 6 is prompt 0, its greedy reply and 7 new tokens (a next turn), so it
 * is built from the reference reply. */
static void sequential_prompts(seq_case *c, const mock_model_cfg *cfg)
{
    int32_t base[64];
    make_prompt(base, 64, 11, cfg->vocab);
    memcpy(c->p[0], base, 37 * sizeof *base), c->len[0] = 37; /* 9 blocks + 1 token */
    memcpy(c->p[1], base, 37 * sizeof *base), c->len[1] = 37; /* the same prompt */
    memcpy(c->p[2], base, 36 * sizeof *base), c->len[2] = 36; /* exactly 9 blocks */
    memcpy(c->p[3], base, 22 * sizeof *base), c->len[3] = 30; /* 5 blocks + 2 shared */
    make_prompt(c->p[3] + 22, 8, 12, cfg->vocab);
    make_prompt(c->p[4], 25, 13, cfg->vocab), c->len[4] = 25; /* nothing shared */
    memcpy(c->p[5], base, 3 * sizeof *base), c->len[5] = 3;   /* shorter than a block */
    int32_t reply[MAXT];
    int nr = mock_model_greedy(cfg, c->p[0], 37, 20, reply);
    memcpy(c->p[6], c->p[0], 37 * sizeof *base);
    memcpy(c->p[6] + 37, reply, (size_t)nr * sizeof *reply);
    make_prompt(c->p[6] + 37 + nr, 7, 14, cfg->vocab);
    c->len[6] = 37 + nr + 7;
    memcpy(c->p[7], c->p[4], 25 * sizeof *base), c->len[7] = 25; /* again, after the others */
    c->p[8][0] = c->p[0][0] == 0 ? 1 : 0; /* differs in its first token only */
    memcpy(c->p[8] + 1, base + 1, 36 * sizeof *base), c->len[8] = 37;
}

START_TEST(test_sequential_hits_equal_off)
{
    const variant *v = &VARIANTS[_i];
    seq_case c;
    mock_model_cfg cfg = mock_model_default_cfg();
    sequential_prompts(&c, &cfg);
    const int max_tokens = 20;
    out_t out[2][N_SEQ];
    memset(out, 0, sizeof out);
    llmrt_engine_stats st[2];
    for (int on = 0; on < 2; on++) {
        mock_rig r;
        mock_rig_opts o = variant_opts(v, on);
        open_ok(&r, &o);
        for (int k = 0; k < N_SEQ; k++) {
            submit(r.e, c.p[k], c.len[k], max_tokens, &out[on][k]);
            run_ok(r.e);
        }
        llmrt_engine_stats_get(r.e, &st[on]);
        mock_rig_close(&r);
    }
    uint64_t hits = 0, queries = 0, prompts = 0;
    for (int k = 0; k < N_SEQ; k++) {
        check_reference(&cfg, c.p[k], c.len[k], max_tokens, &out[1][k], v->name, k);
        ck_assert_int_eq(out[0][k].n, out[1][k].n);
        ck_assert_mem_eq(out[0][k].ids, out[1][k].ids, sizeof out[0][k].ids);
        ck_assert_int_eq(out[0][k].cached, 0);
        /* expected: the longest run of whole blocks shared with an earlier sequence's
         * computed tokens (its prompt and all but its last generated token), stopping
         * before the block that holds this prompt's last token */
        int best = 0;
        for (int j = 0; j < k; j++) {
            int32_t ctx[MAXP + MAXT];
            memcpy(ctx, c.p[j], (size_t)c.len[j] * sizeof *ctx);
            memcpy(ctx + c.len[j], out[1][j].ids, (size_t)out[1][j].n * sizeof *ctx);
            int m = common_prefix(ctx, c.len[j] + out[1][j].n - 1, c.p[k], c.len[k]);
            best = m > best ? m : best;
        }
        int most = (c.len[k] - 1) / 4 * 4;
        int want = best / 4 * 4 < most ? best / 4 * 4 : most;
        ck_assert_msg(out[1][k].cached == want, "%s request %d: cached_tokens %d, expected %d",
                      v->name, k, out[1][k].cached, want);
        hits += (uint64_t)want;
        queries += (uint64_t)c.len[k];
        prompts += (uint64_t)c.len[k];
    }
    /* the cases above really are what they say */
    ck_assert_int_eq(out[1][1].cached, 36);
    ck_assert_int_eq(out[1][2].cached, 32);
    ck_assert_int_eq(out[1][3].cached, 20);
    ck_assert_int_eq(out[1][4].cached, 0);
    ck_assert_int_eq(out[1][5].cached, 0);
    ck_assert_int_ge(out[1][6].cached, 52); /* past the prompt, into the reply */
    ck_assert_int_eq(out[1][7].cached, 24);
    ck_assert_int_eq(out[1][8].cached, 0);
    ck_assert_uint_eq(st[1].prefix_cache_hits, hits);
    ck_assert_uint_eq(st[1].prefix_cache_queries, queries);
    ck_assert_uint_eq(st[1].prefill_tokens, prompts - hits); /* cached tokens are not computed */
    ck_assert_uint_eq(st[0].prefill_tokens, prompts);
    ck_assert_uint_eq(st[0].prefix_cache_queries, 0);
    ck_assert_int_eq(st[0].prefix_caching, 0);
    ck_assert_int_eq(st[1].prefix_caching, 1);
    ck_assert_int_gt(st[1].prefix_cache_blocks, 0);
    ck_assert_int_eq(st[1].kv_blocks_used, 0);
    ck_assert_int_eq(st[1].kv_blocks_free, st[1].kv_blocks_total); /* cached but reclaimable */
    ck_assert_uint_eq(st[1].prefix_cache_evictions, 0);
}
END_TEST

/* ---- a small cache: evictions, then preemption, on shared prefixes ---- */

START_TEST(test_evictions_equal_off)
{
    const variant *v = &VARIANTS[_i];
    mock_model_cfg cfg = mock_model_default_cfg();
    enum { N = 12 };
    int32_t p[N][40];
    int32_t sys[3][24];
    for (int s = 0; s < 3; s++)
        make_prompt(sys[s], 24, 70 + (unsigned)s, cfg.vocab);
    for (int k = 0; k < N; k++) { /* "system prompts" 0 1 0 2 0 1 0 2 ..., each with a new tail */
        memcpy(p[k], sys[k % 4 == 3 ? 2 : k % 2], sizeof sys[0]);
        make_prompt(p[k] + 24, 6, 90 + (unsigned)k, cfg.vocab);
    }
    out_t out[2][N];
    memset(out, 0, sizeof out);
    llmrt_engine_stats st;
    for (int on = 0; on < 2; on++) {
        mock_rig r;
        mock_rig_opts o = variant_opts(v, on);
        o.set.kv_tokens = 80; /* 20 blocks: about two sequences' worth */
        open_ok(&r, &o);
        for (int k = 0; k < N; k++) {
            submit(r.e, p[k], 30, 16, &out[on][k]);
            run_ok(r.e);
        }
        if (on)
            llmrt_engine_stats_get(r.e, &st);
        mock_rig_close(&r);
    }
    for (int k = 0; k < N; k++) {
        check_reference(&cfg, p[k], 30, 16, &out[1][k], v->name, k);
        ck_assert_mem_eq(out[0][k].ids, out[1][k].ids, sizeof out[0][k].ids);
        /* system prompt 0 comes every other request and stays (recently used); 1 and 2
         * come every fourth, and the two sequences in between evict them (LRU) */
        int want = k % 2 == 0 && k > 0 ? 24 : 0;
        ck_assert_msg(out[1][k].cached == want, "%s request %d: cached_tokens %d, expected %d",
                      v->name, k, out[1][k].cached, want);
    }
    ck_assert_msg(st.prefix_cache_evictions > 0, "%s: nothing was evicted", v->name);
    ck_assert_int_eq(st.preemptions, 0);
}
END_TEST

START_TEST(test_preemption_equal_off)
{
    const variant *v = &VARIANTS[_i];
    mock_model_cfg cfg = mock_model_default_cfg();
    enum { N = 8 };
    int32_t p[N][20];
    for (int k = 0; k < N; k++) {
        make_prompt(p[k], 12, 300, cfg.vocab); /* a shared 12-token prefix */
        make_prompt(p[k] + 12, 4, 310 + (unsigned)k, cfg.vocab);
    }
    out_t out[2][N];
    memset(out, 0, sizeof out);
    llmrt_engine_stats st[2];
    for (int on = 0; on < 2; on++) {
        mock_rig r;
        mock_rig_opts o = variant_opts(v, on);
        o.set.kv_tokens = 96; /* 24 blocks of 4, for 8 x 46 tokens */
        o.set.max_num_seqs = 8;
        open_ok(&r, &o);
        submit(r.e, p[0], 16, 30, &out[on][0]);
        step_ok(r.e); /* the first one alone, so the others find its prefix */
        for (int k = 1; k < N; k++)
            submit(r.e, p[k], 16, 30, &out[on][k]);
        run_ok(r.e);
        llmrt_engine_stats_get(r.e, &st[on]);
        mock_rig_close(&r);
    }
    for (int k = 0; k < N; k++) {
        check_reference(&cfg, p[k], 16, 30, &out[1][k], v->name, k);
        ck_assert_mem_eq(out[0][k].ids, out[1][k].ids, sizeof out[0][k].ids);
        ck_assert_int_eq(out[1][k].cached, k ? 12 : 0);
    }
    ck_assert_msg(st[1].preemptions > 0, "%s: no preemption happened", v->name);
    ck_assert_int_eq(st[1].kv_blocks_used, 0);
    /* recomputation after preemption finds the preempted sequence's own blocks */
    ck_assert_uint_lt(st[1].prefill_tokens, st[0].prefill_tokens);
}
END_TEST

/* ---- concurrent requests on one prefix ---- */

START_TEST(test_concurrent_same_prefix)
{
    const variant *v = &VARIANTS[_i];
    mock_model_cfg cfg = mock_model_default_cfg();
    enum { N = 7 };
    int32_t p[N][48];
    for (int k = 0; k < N; k++) {
        make_prompt(p[k], 30, 500, cfg.vocab);
        make_prompt(p[k] + 30, 10, 510 + (unsigned)k, cfg.vocab);
    }
    memcpy(p[N - 1], p[0], sizeof p[0]); /* two identical prompts among them */
    out_t out[2][N];
    memset(out, 0, sizeof out);
    for (int on = 0; on < 2; on++) {
        mock_rig r;
        mock_rig_opts o = variant_opts(v, on);
        o.set.max_num_batched_tokens = 24; /* chunked: joining sequences overlap prefills */
        o.set.max_num_seqs = 4;
        open_ok(&r, &o);
        for (int k = 0; k < 3; k++) /* three at once */
            submit(r.e, p[k], 40, 25, &out[on][k]);
        for (int s = 0; s < 3; s++)
            step_ok(r.e);
        for (int k = 3; k < N; k++) { /* then the rest, staggered, while others decode */
            submit(r.e, p[k], 40, 25, &out[on][k]);
            step_ok(r.e);
        }
        run_ok(r.e);
        mock_rig_close(&r);
    }
    int hits = 0;
    for (int k = 0; k < N; k++) {
        check_reference(&cfg, p[k], 40, 25, &out[1][k], v->name, k);
        ck_assert_mem_eq(out[0][k].ids, out[1][k].ids, sizeof out[0][k].ids);
        if (k < N - 1)
            ck_assert_int_le(out[1][k].cached, 28); /* whole blocks of the shared 30 */
        hits += out[1][k].cached > 0;
    }
    ck_assert_int_eq(out[1][0].cached, 0);
    ck_assert_msg(hits >= 5, "%s: only %d requests found the shared prefix", v->name, hits);
    ck_assert_int_eq(out[1][N - 1].cached, 36); /* its twin's whole prompt but the last block */
}
END_TEST

/* ---- cancellation in the middle of a chunked prefill ---- */

START_TEST(test_cancel_mid_prefill)
{
    const variant *v = &VARIANTS[_i];
    mock_model_cfg cfg = mock_model_default_cfg();
    int32_t p[70];
    make_prompt(p, 70, 600, cfg.vocab);
    mock_rig r;
    mock_rig_opts o = variant_opts(v, 1);
    o.set.max_num_batched_tokens = 16;
    open_ok(&r, &o);
    out_t a = {0}, b = {0}, c = {0};
    uint64_t id = submit(r.e, p, 70, 10, &a);
    step_ok(r.e);
    step_ok(r.e); /* 32 of 70 prompt tokens computed */
    ck_assert_int_eq(llmrt_engine_cancel(r.e, id), LLMRT_OK);
    step_ok(r.e); /* the cancel is applied before anything else runs */
    ck_assert_int_eq(a.fin, LLMRT_FINISH_CANCELLED);
    ck_assert_int_eq(a.n, 0);
    llmrt_engine_stats st;
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_int_eq(st.kv_blocks_used, 0);
    ck_assert_int_eq(st.prefix_cache_blocks, 8);
    submit(r.e, p, 70, 10, &b);
    run_ok(r.e);
    check_reference(&cfg, p, 70, 10, &b, v->name, 1);
    ck_assert_int_eq(b.cached, 32); /* what the cancelled one had computed */
    /* and one cancelled while queued, never admitted, leaves the cache as it was */
    uint64_t qid = submit(r.e, p, 70, 10, &c);
    ck_assert_int_eq(llmrt_engine_cancel(r.e, qid), LLMRT_OK);
    run_ok(r.e);
    ck_assert_int_eq(c.fin, LLMRT_FINISH_CANCELLED);
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_int_eq(st.kv_blocks_used, 0);
    ck_assert_int_eq(st.kv_blocks_free, st.kv_blocks_total);
    mock_rig_close(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine_prefix");
    TCase *tc = tcase_create("engine_prefix");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_sequential_hits_equal_off, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_evictions_equal_off, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_preemption_equal_off, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_concurrent_same_prefix, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_cancel_mid_prefill, 0, N_VARIANTS);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
