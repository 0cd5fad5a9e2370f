/* test_engine.c — the engine's step loop on the mock model (tests/support/mock_model.h):
 * greedy outputs equal an independent reference alone and batched, across memory plugins
 * (pageable, pinned, uva), device / host sampling, async scheduling and graph replay;
 * chunked prefill; preemption with a cache too small for everyone; cancellation frees
 * blocks; limits and validation errors; eos / stop ids / min_tokens / max_model_len;
 * seeded sampling independent of the batch; logprobs; step records. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "mock_model.h"
#include "sampler.h"
#include "test_util.h"

/* ---- collecting events ---- */

#define MAXT 600
typedef struct out_t {
    int32_t ids[MAXT];
    int n;
    float lp[MAXT];
    int32_t top0[MAXT];
    int n_top[MAXT];
    llmrt_finish_reason fin;
    int finals;
    int events_after_final;
    int32_t stop_token;
    int32_t prompt_tokens, completion_tokens;
    int bad_index;
} out_t;

static void on_token(void *user, const llmrt_token_event *ev)
{
    out_t *o = user;
    if (o->finals)
        o->events_after_final++;
    if (ev->token >= 0) {
        if (ev->index != o->n)
            o->bad_index++;
        if (o->n < MAXT) {
            o->ids[o->n] = ev->token;
            o->lp[o->n] = ev->logprob;
            o->n_top[o->n] = ev->n_top;
            o->top0[o->n] = ev->n_top > 0 ? ev->top_ids[0] : -1;
        }
        o->n++;
    }
    if (ev->completion_tokens != o->n)
        o->bad_index++;
    if (ev->finish != LLMRT_FINISH_NONE) {
        o->finals++;
        o->fin = ev->finish;
        o->stop_token = ev->stop_token;
        o->prompt_tokens = ev->prompt_tokens;
        o->completion_tokens = ev->completion_tokens;
    }
}

static void make_prompt(int32_t *p, int n, unsigned seed, int vocab)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (int32_t)((seed >> 8) % (unsigned)vocab);
    }
}

static uint64_t submit_greedy(llmrt_engine *e, const int32_t *p, int n, int max_tokens, out_t *o)
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
    llmrt_status st = llmrt_engine_run(e, &err);
    ck_assert_msg(st == LLMRT_OK, "run: %s", err.msg);
}

static void open_ok(mock_rig *r, const mock_rig_opts *o)
{
    llmrt_error err = {0};
    llmrt_status st = mock_rig_open(r, o, &err);
    ck_assert_msg(st == LLMRT_OK, "rig: %s", err.msg);
}

static void check_reference(const mock_model_cfg *cfg, const int32_t *p, int n, int max_tokens,
                            const out_t *o, const char *what)
{
    int32_t ref[MAXT];
    int nr = mock_model_greedy(cfg, p, n, max_tokens, ref);
    ck_assert_msg(o->finals == 1 && o->events_after_final == 0 && o->bad_index == 0,
                  "%s: finals %d, after %d, bad index %d", what, o->finals,
                  o->events_after_final, o->bad_index);
    ck_assert_msg(o->n == nr, "%s: %d tokens, reference %d", what, o->n, nr);
    for (int i = 0; i < nr; i++)
        ck_assert_msg(o->ids[i] == ref[i], "%s: token %d is %d, reference %d", what, i,
                      o->ids[i], ref[i]);
}

/* The reference log-probability of token id after the context tokens [n]: log-softmax of
 * the mock model's logits. */
static double ref_logprob(const mock_model_cfg *cfg, const int32_t *ctx, int n, int32_t id)
{
    float lg[256];
    ck_assert_int_le(cfg->vocab, (int)(sizeof lg / sizeof *lg));
    mock_model_logits(cfg, ctx, n, lg);
    double z = 0, mx = -1e9;
    for (int v = 0; v < cfg->vocab; v++)
        mx = fmax(mx, lg[v]);
    for (int v = 0; v < cfg->vocab; v++)
        z += exp(lg[v] - mx);
    return lg[id] - mx - log(z);
}

/* ---- configurations the loop must be correct in ---- */

typedef struct variant {
    const char *name;
    const char *memory;
    int argmax, sample, graphs, async, host_is_device, graph_events;
} variant;

static const variant VARIANTS[] = {
    {"pageable, argmax, sync", "pageable", 1, 1, 0, 0, 0, 0},
    {"pageable, host sampling (no device ops)", "pageable", 0, 0, 0, 0, 0, 0},
    {"host memory is device memory, argmax only", "pageable", 1, 0, 0, 0, 1, 0},
    {"pinned, async", "pinned", 1, 1, 0, 1, 0, 0},
    {"uva (zero-copy), async", "uva", 1, 1, 0, 1, 0, 0},
    {"pageable, async (shared output buffer)", "pageable", 1, 1, 0, 1, 0, 0},
    {"pinned, graphs", "pinned", 1, 1, 1, 0, 0, 0},
    {"pinned, graphs + async", "pinned", 1, 1, 1, 1, 0, 0},
    {"uva, graphs + async", "uva", 1, 1, 1, 1, 0, 0},
    {"pageable, graphs + async", "pageable", 1, 1, 1, 1, 0, 0},
    {"pinned, graphs + async, events in graphs", "pinned", 1, 1, 1, 1, 0, 1},
    {"uva, graphs + async, events in graphs", "uva", 1, 1, 1, 1, 0, 1},
    {"uva, host memory is device memory", "uva", 1, 1, 0, 0, 1, 0},
};
#define N_VARIANTS (int)(sizeof VARIANTS / sizeof *VARIANTS)

static mock_rig_opts variant_opts(const variant *v)
{
    mock_rig_opts o = mock_rig_default_opts();
    o.memory = v->memory;
    o.ops.argmax = v->argmax;
    o.ops.sample = v->sample;
    o.ops.graphs = v->graphs;
    o.ops.async = v->async;
    o.ops.host_is_device = v->host_is_device;
    o.ops.graph_events = v->graph_events;
    o.set.async_scheduling = v->async;
    o.set.cuda_graphs = v->graphs;
    return o;
}

START_TEST(test_single_greedy_matches_reference)
{
    const variant *v = &VARIANTS[_i];
    mock_rig r;
    mock_rig_opts o = variant_opts(v);
    open_ok(&r, &o);
    int32_t p[7];
    make_prompt(p, 7, 1, o.model.vocab);
    out_t out = {0};
    submit_greedy(r.e, p, 7, 30, &out);
    run_ok(r.e);
    check_reference(&o.model, p, 7, 30, &out, v->name);
    ck_assert_int_eq(out.fin, LLMRT_FINISH_LENGTH);
    ck_assert_int_eq(out.prompt_tokens, 7);
    ck_assert_int_eq(out.completion_tokens, 30);
    llmrt_engine_stats st;
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_int_eq(st.kv_blocks_used, 0);
    ck_assert_int_eq(st.running, 0);
    ck_assert_int_eq(st.waiting, 0);
    ck_assert_uint_eq(st.generated_tokens, 30);
    ck_assert_uint_eq(st.requests_finished, 1);
    if (v->graphs) {
        mock_ops_stats os = mock_ops_get_stats(&r.be);
        ck_assert_msg(os.graph_launches > 0, "%s: no graph replay", v->name);
        ck_assert(st.cuda_graphs);
    }
    if (v->async && v->argmax)
        ck_assert_msg(st.async_scheduling, "%s: async scheduling not in effect", v->name);
    /* greedy steps with a device argmax go through the model's forward_argmax */
    if (v->argmax)
        ck_assert_msg(mock_model_argmax_forwards(r.model) > 0, "%s: no forward_argmax", v->name);
    else
        ck_assert_int_eq(mock_model_argmax_forwards(r.model), 0);
    llmrt_engine_destroy(r.e);
    r.e = NULL;
    ck_assert_int_eq(mock_ops_get_stats(&r.be).live_dev, 0);
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_batched_equals_reference)
{
    const variant *v = &VARIANTS[_i];
    mock_rig r;
    mock_rig_opts o = variant_opts(v);
    o.set.max_num_seqs = 6; /* more requests than seats: some wait and join later */
    o.set.max_num_batched_tokens = 48;
    open_ok(&r, &o);
    enum { N = 10 };
    int32_t p[N][60];
    int len[N], maxt[N];
    out_t out[N];
    memset(out, 0, sizeof out);
    for (int i = 0; i < N; i++) {
        len[i] = 1 + (i * 13) % 60; /* up to 59 tokens: chunked against 48 */
        maxt[i] = 5 + (i * 7) % 25;
        make_prompt(p[i], len[i], 100 + (unsigned)i, o.model.vocab);
        submit_greedy(r.e, p[i], len[i], maxt[i], &out[i]);
    }
    run_ok(r.e);
    for (int i = 0; i < N; i++)
        check_reference(&o.model, p[i], len[i], maxt[i], &out[i], v->name);
    int64_t fw;
    int32_t mrows, mseqs;
    mock_model_counts(r.model, &fw, &mrows, &mseqs);
    ck_assert_int_le(mrows, 48);
    ck_assert_int_le(mseqs, 6);
    ck_assert_int_gt(mseqs, 1); /* it did batch */
    llmrt_engine_stats st;
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_int_eq(st.kv_blocks_used, 0);
    mock_rig_close(&r);
}
END_TEST

/* Requests arriving while others run join between steps. */
START_TEST(test_join_between_steps)
{
    const variant *v = &VARIANTS[_i];
    mock_rig r;
    mock_rig_opts o = variant_opts(v);
    open_ok(&r, &o);
    int32_t p[4][9];
    out_t out[4];
    memset(out, 0, sizeof out);
    llmrt_error err = {0};
    for (int i = 0; i < 4; i++)
        make_prompt(p[i], 9, 7 + (unsigned)i, o.model.vocab);
    submit_greedy(r.e, p[0], 9, 40, &out[0]);
    for (int s = 0; s < 60 && llmrt_engine_has_work(r.e); s++) {
        if (s == 3)
            submit_greedy(r.e, p[1], 9, 20, &out[1]);
        if (s == 7) {
            submit_greedy(r.e, p[2], 9, 5, &out[2]);
            submit_greedy(r.e, p[3], 9, 25, &out[3]);
        }
        ck_assert_msg(llmrt_engine_step(r.e, &err) == LLMRT_OK, "%s", err.msg);
    }
    run_ok(r.e);
    int maxt[4] = {40, 20, 5, 25};
    for (int i = 0; i < 4; i++)
        check_reference(&o.model, p[i], 9, maxt[i], &out[i], v->name);
    mock_rig_close(&r);
}
END_TEST

/* A cache too small for all sequences at once: preemption, recomputation, same outputs. */
START_TEST(test_preemption_same_outputs)
{
    const variant *v = &VARIANTS[_i];
    mock_rig r;
    mock_rig_opts o = variant_opts(v);
    o.set.kv_tokens = 96; /* 24 blocks of 4 */
    o.set.block_size = 4;
    o.set.max_num_seqs = 8;
    open_ok(&r, &o);
    enum { N = 8 };
    int32_t p[N][12];
    out_t out[N];
    memset(out, 0, sizeof out);
    for (int i = 0; i < N; i++) {
        make_prompt(p[i], 12, 300 + (unsigned)i, o.model.vocab);
        submit_greedy(r.e, p[i], 12, 30, &out[i]); /* 8 x 42 tokens >> 96 */
    }
    run_ok(r.e);
    for (int i = 0; i < N; i++)
        check_reference(&o.model, p[i], 12, 30, &out[i], v->name);
    llmrt_engine_stats st;
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_msg(st.preemptions > 0, "%s: no preemption happened", v->name);
    ck_assert_int_eq(st.kv_blocks_used, 0);
    ck_assert_uint_eq(st.requests_finished, N);
    ck_assert_uint_gt(st.prefill_tokens, N * 12); /* recomputation counted */
    mock_rig_close(&r);
}
END_TEST

typedef struct step_log {
    int n;
    int max_tokens_seen;
    int async_steps, graph_steps;
    double wall, busy;
    int bad;
} step_log;

static void on_step(void *user, const llmrt_step_record *rec)
{
    step_log *l = user;
    if (rec->step != (uint64_t)l->n)
        l->bad++;
    l->n++;
    if (rec->n_tokens > l->max_tokens_seen)
        l->max_tokens_seen = rec->n_tokens;
    l->async_steps += rec->async;
    l->graph_steps += rec->graph;
    if (rec->wall_ms < 0 || rec->gpu_busy_ms < 0 || rec->idle_ms < 0 ||
        fabs(rec->gpu_busy_ms - (rec->h2d_ms + rec->compute_ms + rec->d2h_ms)) > 1e-6 ||
        rec->n_prefill_tokens + rec->n_decode_seqs > rec->n_tokens)
        l->bad++;
    l->wall += rec->wall_ms;
    l->busy += rec->gpu_busy_ms;
}

START_TEST(test_chunked_prefill_and_step_records)
{
    mock_rig r;
    mock_rig_opts o = mock_rig_default_opts();
    step_log log = {0};
    o.set.max_num_batched_tokens = 16;
    o.on_step = on_step;
    o.step_user = &log;
    open_ok(&r, &o);
    int32_t p[70];
    make_prompt(p, 70, 9, o.model.vocab);
    out_t out = {0};
    submit_greedy(r.e, p, 70, 10, &out);
    run_ok(r.e);
    check_reference(&o.model, p, 70, 10, &out, "chunked");
    /* 70 prompt tokens in chunks of <= 16: 5 prefill steps, then 9 decode steps */
    ck_assert_int_eq(log.n, 5 + 9);
    ck_assert_int_eq(log.max_tokens_seen, 16);
    ck_assert_int_eq(log.bad, 0);
    llmrt_engine_stats st;
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_uint_eq(st.steps, 14);
    ck_assert_uint_eq(st.prefill_tokens, 70);
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_async_steps_are_chained)
{
    mock_rig r;
    step_log log = {0};
    mock_rig_opts o = variant_opts(&VARIANTS[3]); /* pinned, async */
    o.on_step = on_step;
    o.step_user = &log;
    open_ok(&r, &o);
    int32_t p[5];
    make_prompt(p, 5, 3, o.model.vocab);
    out_t a = {0}, b = {0};
    submit_greedy(r.e, p, 5, 50, &a);
    submit_greedy(r.e, p, 3, 50, &b);
    run_ok(r.e);
    check_reference(&o.model, p, 5, 50, &a, "async a");
    check_reference(&o.model, p, 3, 50, &b, "async b");
    ck_assert_int_eq(log.bad, 0);
    ck_assert_msg(log.async_steps > 40, "only %d of %d steps chained", log.async_steps, log.n);
    /* chained steps read the previous step's sampled ids in place: no device copy */
    ck_assert_int_eq(mock_ops_get_stats(&r.be).d2d_copies, 0);
    mock_rig_close(&r);
}
END_TEST

/* Bus bytes and timing of decode steps. */
typedef struct bus_log {
    int decode_steps, bad;
    uint64_t h2d_bytes, d2h_bytes;
} bus_log;

static void on_step_bus(void *user, const llmrt_step_record *rec)
{
    bus_log *l = user;
    if (rec->n_prefill_tokens > 0)
        return;
    l->decode_steps++;
    l->h2d_bytes += rec->h2d_bytes;
    l->d2h_bytes += rec->d2h_bytes;
    if (rec->h2d_ms < 0 || rec->compute_ms < 0 || rec->d2h_ms < 0 ||
        fabs(rec->gpu_busy_ms - (rec->h2d_ms + rec->compute_ms + rec->d2h_ms)) > 1e-6)
        l->bad++;
}

/* uva as vLLM's Model Runner V2 uses it: the step inputs the host wrote into mapped memory are
 * read once per step by the device into device buffers (a gather, inside the decode graph), so
 * no kernel of the forward reads host memory; what that costs stays visible (input bytes
 * over the bus in every step, and with graph events the gather timed as H2D); the sampled ids
 * still land in mapped memory without a copy. Same ids as pinned. Where device memory is
 * host memory (the CPU backend), uva reads the inputs in place: nothing to gather. */
START_TEST(test_uva_gathers_inputs)
{
    const int which[] = {10, 11, 8, 12}; /* pinned / uva with graph events, uva, uva on host */
    int32_t ref_ids[40];
    for (int k = 0; k < 4; k++) {
        const variant *v = &VARIANTS[which[k]];
        mock_rig r;
        bus_log log = {0};
        mock_rig_opts o = variant_opts(v);
        o.on_step = on_step_bus;
        o.step_user = &log;
        open_ok(&r, &o);
        int32_t p[9];
        make_prompt(p, 9, 5, o.model.vocab);
        out_t out = {0};
        submit_greedy(r.e, p, 9, 40, &out);
        run_ok(r.e);
        check_reference(&o.model, p, 9, 40, &out, v->name);
        if (k == 0)
            memcpy(ref_ids, out.ids, sizeof ref_ids);
        else
            ck_assert_msg(memcmp(ref_ids, out.ids, sizeof ref_ids) == 0, "%s: ids differ from pinned",
                          v->name);
        ck_assert_int_eq(log.bad, 0);
        ck_assert_int_ge(log.decode_steps, 30);
        int64_t host_reads = mock_model_host_input_forwards(r.model);
        if (v->host_is_device) {
            ck_assert_msg(host_reads > 0, "%s: inputs not read in place", v->name);
            ck_assert_uint_eq(log.d2h_bytes, 0); /* nothing crosses a bus */
        } else {
            ck_assert_msg(host_reads == 0, "%s: %lld forwards read their inputs in host memory",
                          v->name, (long long)host_reads);
            ck_assert_msg(log.h2d_bytes >= (uint64_t)log.decode_steps * 16, "%s: %llu input bytes",
                          v->name, (unsigned long long)log.h2d_bytes);
            /* one sampled id per row and step, copied (pinned) or written in place (uva) */
            ck_assert_uint_eq(log.d2h_bytes, (uint64_t)log.decode_steps * 4);
        }
        if (v->graph_events)
            ck_assert_msg(mock_ops_get_stats(&r.be).graph_event_records >= 2 * 30,
                          "%s: the graph recorded %d events", v->name,
                          mock_ops_get_stats(&r.be).graph_event_records);
        mock_rig_close(&r);
    }
}
END_TEST

/* The most wall and idle time of any step. */
typedef struct step_max {
    double wall, idle;
    int n;
} step_max;

static void on_step_max(void *user, const llmrt_step_record *rec)
{
    step_max *m = user;
    m->wall = fmax(m->wall, rec->wall_ms);
    m->idle = fmax(m->idle, rec->idle_ms);
    m->n++;
}

/* A pause without requests is nobody's idle time: after the engine ran out of work, the next
 * step's period starts when the next request arrives, not at the last step's outputs (an idle
 * server once reported 26 s without requests as 497 ms of device idle per step). A request
 * queued while another runs is work waiting: its steps keep counting from the last outputs. */
START_TEST(test_idle_engine_is_not_idle_device)
{
    for (int v = 0; v < 2; v++) { /* synchronous, and async with graphs */
        mock_rig r;
        step_max mx = {0};
        mock_rig_opts o = v ? variant_opts(&VARIANTS[8]) : mock_rig_default_opts();
        o.on_step = on_step_max;
        o.step_user = &mx;
        open_ok(&r, &o);
        int32_t p[6];
        make_prompt(p, 6, 11, o.model.vocab);
        out_t a = {0}, b = {0};
        submit_greedy(r.e, p, 6, 5, &a);
        run_ok(r.e);
        ck_assert_int_eq(llmrt_engine_has_work(r.e), 0);
        double t0 = llmrt_now_s();
        struct timespec pause = {0, 300 * 1000 * 1000};
        nanosleep(&pause, NULL);
        memset(&mx, 0, sizeof mx);
        submit_greedy(r.e, p, 6, 5, &b);
        run_ok(r.e);
        check_reference(&o.model, p, 6, 5, &b, "after a pause");
        ck_assert_int_eq(mx.n >= 5, 1);
        ck_assert_msg(llmrt_now_s() - t0 >= 0.3, "the pause did not happen");
        ck_assert_msg(mx.wall < 150 && mx.idle < 150,
                      "variant %d: after 300 ms without requests a step reports wall %.1f ms, "
                      "idle %.1f ms",
                      v, mx.wall, mx.idle);
        mock_rig_close(&r);
    }
}
END_TEST

START_TEST(test_cancel_frees_blocks)
{
    const variant *v = &VARIANTS[_i];
    mock_rig r;
    mock_rig_opts o = variant_opts(v);
    o.set.block_size = 4;
    open_ok(&r, &o);
    llmrt_error err = {0};
    int32_t p[3][20];
    out_t out[3];
    memset(out, 0, sizeof out);
    uint64_t id[3];
    for (int i = 0; i < 3; i++) {
        make_prompt(p[i], 20, 50 + (unsigned)i, o.model.vocab);
        id[i] = submit_greedy(r.e, p[i], 20, 100, &out[i]);
    }
    for (int s = 0; s < 6; s++)
        ck_assert(llmrt_engine_step(r.e, &err) == LLMRT_OK);
    llmrt_engine_stats before, after;
    llmrt_engine_stats_get(r.e, &before);
    ck_assert_int_eq(before.running, 3);
    ck_assert_int_eq(llmrt_engine_cancel(r.e, id[1]), LLMRT_OK);
    ck_assert_int_eq(llmrt_engine_cancel(r.e, id[1]), LLMRT_OK); /* twice: harmless */
    ck_assert(llmrt_engine_step(r.e, &err) == LLMRT_OK);
    llmrt_engine_stats_get(r.e, &after);
    ck_assert_int_eq(after.running, 2);
    /* request 1 held ceil(26/4) = 7 blocks (its next token's block included); the two others
     * grew by at most one block each */
    ck_assert_int_le(after.kv_blocks_used, before.kv_blocks_used - 7 + 2);
    ck_assert_int_eq(out[1].finals, 1);
    ck_assert_int_eq(out[1].fin, LLMRT_FINISH_CANCELLED);
    int n_at_cancel = out[1].n;
    ck_assert_int_eq(llmrt_engine_cancel(r.e, id[1]), LLMRT_ERR_NOT_FOUND);
    ck_assert_int_eq(llmrt_engine_cancel(r.e, 999999), LLMRT_ERR_NOT_FOUND);
    ck_assert_uint_eq(after.requests_cancelled, 1);
    /* cancel one that is still queued */
    out_t q = {0};
    uint64_t qid = submit_greedy(r.e, p[0], 20, 5, &q);
    ck_assert_int_eq(llmrt_engine_cancel(r.e, qid), LLMRT_OK);
    run_ok(r.e);
    ck_assert_int_eq(q.fin, LLMRT_FINISH_CANCELLED);
    ck_assert_int_eq(q.n, 0);
    ck_assert_int_eq(out[1].n, n_at_cancel);
    ck_assert_int_eq(out[1].events_after_final, 0);
    check_reference(&o.model, p[0], 20, 100, &out[0], v->name);
    check_reference(&o.model, p[2], 20, 100, &out[2], v->name);
    llmrt_engine_stats_get(r.e, &after);
    ck_assert_int_eq(after.kv_blocks_used, 0);
    ck_assert_int_eq(after.kv_blocks_free, after.kv_blocks_total);
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_limits_and_validation)
{
    mock_rig r;
    mock_rig_opts o = mock_rig_default_opts();
    o.set.max_model_len = 64;
    open_ok(&r, &o);
    ck_assert_int_eq(llmrt_engine_max_model_len(r.e), 64);
    int32_t p[100];
    make_prompt(p, 100, 2, o.model.vocab);
    llmrt_request q;
    llmrt_error err = {0};
    uint64_t id;
    llmrt_request_init(&q);
    q.prompt_ids = p;
    q.n_prompt = 64;
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, &id, &err), LLMRT_ERR_LIMIT);
    ck_assert_msg(strstr(err.msg, "64 tokens") && strstr(err.msg, "max_model_len = 64"),
                  "%s", err.msg);
    q.n_prompt = 0;
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, &id, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "empty"));
    q.n_prompt = 5;
    p[2] = 97; /* vocab is 97 */
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, &id, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "token 2 is id 97"));
    p[2] = 3;
    struct {
        const char *field;
        void (*set)(llmrt_sampling *);
    } bad[] = {
        {"temperature", NULL}, {"top_p", NULL}, {"top_k", NULL}, {"min_p", NULL},
        {"max_tokens", NULL}, {"repetition_penalty", NULL}, {"presence_penalty", NULL},
        {"logprobs", NULL}, {"stop strings need a tokenizer", NULL}, {"min_tokens", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        llmrt_request_init(&q);
        q.prompt_ids = p;
        q.n_prompt = 5;
        const char *stops[] = {"x"};
        switch (i) {
        case 0: q.sampling.temperature = -0.5f; break;
        case 1: q.sampling.top_p = 0.0f; break;
        case 2: q.sampling.top_k = -2; break;
        case 3: q.sampling.min_p = 1.5f; break;
        case 4: q.sampling.max_tokens = 0; break;
        case 5: q.sampling.repetition_penalty = 0.0f; break;
        case 6: q.sampling.presence_penalty = 2.5f; break;
        case 7: q.sampling.logprobs = LLMRT_MAX_TOP_LOGPROBS + 1; break;
        case 8: q.sampling.stop = stops, q.sampling.n_stop = 1; break;
        case 9: q.sampling.min_tokens = 20, q.sampling.max_tokens = 10; break;
        }
        err.msg[0] = 0;
        ck_assert_int_eq(llmrt_engine_submit(r.e, &q, &id, &err), LLMRT_ERR_INVALID_ARG);
        ck_assert_msg(strstr(err.msg, bad[i].field), "case %zu: %s", i, err.msg);
    }
    /* text prompt without a tokenizer */
    llmrt_request_init(&q);
    q.prompt_text = "hello";
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, &id, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "tokenizer"));
    /* nothing was queued by the failures */
    ck_assert(!llmrt_engine_has_work(r.e));
    /* a sequence that reaches max_model_len ends with "length" */
    out_t out = {0};
    submit_greedy(r.e, p, 60, 100, &out);
    run_ok(r.e);
    ck_assert_int_eq(out.n, 4);
    ck_assert_int_eq(out.fin, LLMRT_FINISH_LENGTH);
    check_reference(&o.model, p, 60, 4, &out, "max_model_len");
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_capacity_settings)
{
    llmrt_error err = {0};
    mock_rig r;
    /* explicit max_model_len larger than the cache: a clear error */
    mock_rig_opts o = mock_rig_default_opts();
    o.set.kv_tokens = 100;
    o.set.block_size = 16;
    o.set.max_model_len = 200;
    ck_assert_int_eq(mock_rig_open(&r, &o, &err), LLMRT_ERR_LIMIT);
    ck_assert_msg(strstr(err.msg, "cache.max_model_len = 200") && strstr(err.msg, "112 tokens"),
                  "%s", err.msg);
    mock_rig_close(&r);
    /* longer than the model's positions */
    o = mock_rig_default_opts();
    o.model.max_position = 128;
    o.set.max_model_len = 129;
    ck_assert_int_eq(mock_rig_open(&r, &o, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "max_position_embeddings = 128"));
    mock_rig_close(&r);
    /* default: min(max_position, capacity); capacity rounded up to whole blocks */
    o = mock_rig_default_opts();
    o.set.kv_tokens = 1000;
    o.model.max_position = 4096;
    open_ok(&r, &o);
    llmrt_engine_stats st;
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_int_eq(st.kv_capacity_tokens, 1008);
    ck_assert_int_eq(st.kv_blocks_total, 63);
    ck_assert_int_eq(st.max_model_len, 1008);
    ck_assert_str_eq(st.kv_dtype, "F32");
    ck_assert_str_eq(st.kv_capacity_source, "cache.kv_tokens");
    ck_assert_str_eq(st.memory_path, "pageable");
    ck_assert_str_eq(st.memory_plugin, "pageable");
    ck_assert_uint_eq(st.kv_bytes, 2ull * 2 * 64 * 16 * 2 * 4 * 4); /* K+V, layers, blocks, ... */
    mock_rig_close(&r);
    /* GPU: sized from gpu_memory_utilization of the device memory after loading */
    o = mock_rig_default_opts();
    o.set.kv_tokens = 0;
    o.set.gpu_memory_utilization = 0.5;
    o.ops.is_gpu = 1;
    o.ops.mem_total = 1000000;
    o.ops.mem_free = 900000; /* 100000 used: budget 400000 bytes / 64 bytes per token */
    o.model.weight_dtype = LLMRT_DTYPE_BF16;
    open_ok(&r, &o);
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_str_eq(st.kv_dtype, "BF16"); /* auto on a GPU: the model's dtype */
    ck_assert_int_eq(st.kv_capacity_tokens, (400000 / 64 / 16 - 1) * 16); /* whole blocks, one reserved */
    ck_assert_ptr_nonnull(strstr(st.kv_capacity_source, "gpu_memory_utilization"));
    mock_rig_close(&r);
    o.ops.mem_free = 400000; /* more than half used already */
    ck_assert_int_eq(mock_rig_open(&r, &o, &err), LLMRT_ERR_LIMIT);
    ck_assert_ptr_nonnull(strstr(err.msg, "gpu_memory_utilization = 0.50"));
    mock_rig_close(&r);
    /* CPU default when kv_tokens = 0 */
    o = mock_rig_default_opts();
    o.set.kv_tokens = 0;
    open_ok(&r, &o);
    llmrt_engine_stats_get(r.e, &st);
    ck_assert_int_eq(st.kv_capacity_tokens, 8192);
    ck_assert_int_eq(st.max_model_len, 4096);
    mock_rig_close(&r);
}
END_TEST

START_TEST(test_eos_stop_ids_min_tokens)
{
    mock_rig r;
    mock_rig_opts o = mock_rig_default_opts();
    o.model.eos_id = 5;
    o.model.eos_after = 12; /* eos once the context holds 12 tokens */
    open_ok(&r, &o);
    int32_t p[4];
    make_prompt(p, 4, 77, o.model.vocab);
    p[1] = 6;
    out_t a = {0}, b = {0}, c = {0}, d = {0};
    submit_greedy(r.e, p, 4, 50, &a);
    llmrt_request q;
    llmrt_request_init(&q);
    q.prompt_ids = p, q.n_prompt = 4, q.on_token = on_token;
    q.sampling.max_tokens = 20;
    q.sampling.ignore_eos = 1;
    q.user = &b;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, NULL, &err), LLMRT_OK);
    /* a stop id that the greedy path produces early */
    int32_t ref[50];
    int nr = mock_model_greedy(&o.model, p, 4, 50, ref);
    ck_assert_int_eq(nr, 9); /* 8 tokens then eos at context 12 */
    ck_assert_int_eq(ref[8], 5);
    int32_t stop_ids[] = {ref[3]};
    q.sampling.ignore_eos = 0;
    q.sampling.stop_ids = stop_ids, q.sampling.n_stop_ids = 1;
    q.user = &c;
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, NULL, &err), LLMRT_OK);
    /* min_tokens: neither the stop id nor eos count before 10 tokens */
    q.sampling.min_tokens = 10;
    q.user = &d;
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, NULL, &err), LLMRT_OK);
    run_ok(r.e);
    ck_assert_int_eq(a.n, 9);
    ck_assert_int_eq(a.fin, LLMRT_FINISH_STOP);
    ck_assert_int_eq(a.stop_token, 5);
    ck_assert_int_eq(a.ids[8], 5);
    ck_assert_int_eq(a.completion_tokens, 9); /* the eos counts, like vLLM's usage */
    ck_assert_int_eq(b.n, 20);
    ck_assert_int_eq(b.fin, LLMRT_FINISH_LENGTH);
    int first = 0;
    while (ref[first] != ref[3])
        first++;
    ck_assert_int_eq(c.n, first + 1);
    ck_assert_int_eq(c.fin, LLMRT_FINISH_STOP);
    ck_assert_int_eq(c.stop_token, ref[3]);
    ck_assert_int_ge(d.n, 10);
    ck_assert_int_le(d.n, 20);
    ck_assert_int_eq(d.ids[8], 5); /* eos generated at 9 but ignored before min_tokens */
    mock_rig_close(&r);
}
END_TEST

/* Seeded sampling: the same request gives the same ids alone, batched with others, with
 * host or device sampling, synchronous or chained. */
START_TEST(test_seeded_sampling_batch_invariant)
{
    int32_t ref_ids[MAXT];
    int ref_n = -1;
    int32_t p[6];
    for (int vi = 0; vi < N_VARIANTS; vi++) {
        const variant *v = &VARIANTS[vi];
        if (!v->sample && v->argmax)
            continue; /* no device sampler, argmax only: host samples, covered by others */
        mock_rig r;
        mock_rig_opts o = variant_opts(v);
        open_ok(&r, &o);
        make_prompt(p, 6, 5, o.model.vocab);
        llmrt_request q;
        llmrt_request_init(&q);
        q.prompt_ids = p, q.n_prompt = 6, q.on_token = on_token;
        q.sampling.temperature = 0.9f;
        q.sampling.top_p = 0.95f;
        q.sampling.top_k = 40;
        q.sampling.has_seed = 1;
        q.sampling.seed = 1234;
        q.sampling.max_tokens = 40;
        out_t alone = {0}, batched = {0}, other[5];
        memset(other, 0, sizeof other);
        llmrt_error err = {0};
        q.user = &alone;
        ck_assert_int_eq(llmrt_engine_submit(r.e, &q, NULL, &err), LLMRT_OK);
        run_ok(r.e);
        /* the same, among other requests that start earlier and later */
        int32_t po[5][10];
        for (int i = 0; i < 5; i++) {
            make_prompt(po[i], 10, 900 + (unsigned)i, o.model.vocab);
            if (i == 2) {
                q.user = &batched;
                ck_assert_int_eq(llmrt_engine_submit(r.e, &q, NULL, &err), LLMRT_OK);
            }
            llmrt_request z;
            llmrt_request_init(&z);
            z.prompt_ids = po[i], z.n_prompt = 10, z.on_token = on_token, z.user = &other[i];
            z.sampling.temperature = 1.0f;
            z.sampling.max_tokens = 30;
            ck_assert_int_eq(llmrt_engine_submit(r.e, &z, NULL, &err), LLMRT_OK);
            llmrt_engine_step(r.e, &err);
        }
        run_ok(r.e);
        ck_assert_int_eq(alone.n, 40);
        ck_assert_int_eq(batched.n, 40);
        for (int i = 0; i < 40; i++)
            ck_assert_msg(alone.ids[i] == batched.ids[i], "%s: token %d differs in a batch",
                          v->name, i);
        if (ref_n < 0) {
            ref_n = alone.n;
            memcpy(ref_ids, alone.ids, sizeof ref_ids);
            /* and it is not just greedy */
            int32_t greedy[40];
            mock_model_greedy(&o.model, p, 6, 40, greedy);
            int diff = 0;
            for (int i = 0; i < 40; i++)
                diff += greedy[i] != alone.ids[i];
            ck_assert_int_gt(diff, 5);
        } else {
            for (int i = 0; i < 40; i++)
                ck_assert_msg(alone.ids[i] == ref_ids[i], "%s: token %d differs from %s",
                              v->name, i, VARIANTS[0].name);
        }
        mock_rig_close(&r);
    }
}
END_TEST

START_TEST(test_logprobs_and_penalties)
{
    mock_rig r;
    mock_rig_opts o = mock_rig_default_opts();
    open_ok(&r, &o);
    int32_t p[5];
    make_prompt(p, 5, 8, o.model.vocab);
    llmrt_request q;
    llmrt_request_init(&q);
    q.prompt_ids = p, q.n_prompt = 5, q.on_token = on_token;
    q.sampling.max_tokens = 12;
    q.sampling.logprobs = 3;
    out_t a = {0}, b = {0};
    q.user = &a;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, NULL, &err), LLMRT_OK);
    /* penalties: a strong repetition penalty changes the greedy path exactly as the host
     * reference says */
    llmrt_request q2 = q;
    q2.sampling.logprobs = -1;
    q2.sampling.repetition_penalty = 50.0f;
    q2.user = &b;
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q2, NULL, &err), LLMRT_OK);
    /* a plain greedy request in the same steps: its row takes the device argmax while the
     * others are sampled on the host from the logits, so the steps must not go through
     * forward_argmax (the mock poisons the logits after it) */
    llmrt_request q3 = q;
    q3.sampling.logprobs = -1;
    out_t c3 = {0};
    q3.user = &c3;
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q3, NULL, &err), LLMRT_OK);
    run_ok(r.e);
    check_reference(&o.model, p, 5, 12, &a, "logprobs");
    check_reference(&o.model, p, 5, 12, &c3, "greedy beside host rows");
    float lg[97];
    int32_t ctx[40];
    memcpy(ctx, p, sizeof p);
    for (int i = 0; i < 12; i++) {
        ck_assert_int_eq(a.n_top[i], 3);
        ck_assert_int_eq(a.top0[i], a.ids[i]); /* greedy: the top alternative is the token */
        ck_assert_float_eq_tol(a.lp[i], ref_logprob(&o.model, ctx, 5 + i, a.ids[i]), 1e-4);
        ctx[5 + i] = a.ids[i];
    }
    /* penalty reference */
    llmrt_sampler *s;
    ck_assert_int_eq(llmrt_sampler_new(97, &s, &err), LLMRT_OK);
    memcpy(ctx, p, sizeof p);
    llmrt_sampling sp;
    llmrt_sampling_init(&sp);
    sp.repetition_penalty = 50.0f;
    int changed = 0;
    for (int i = 0; i < 12; i++) {
        mock_model_logits(&o.model, ctx, 5 + i, lg);
        llmrt_sampler_apply_penalties(s, lg, &sp, ctx, 5, ctx + 5, i);
        int32_t t = llmrt_sampler_argmax(lg, 97);
        ck_assert_int_eq(b.ids[i], t);
        for (int k = 0; k < 5 + i; k++) /* nothing seen before is repeated */
            ck_assert_int_ne(t, ctx[k]);
        changed += b.ids[i] != a.ids[i];
        ctx[5 + i] = t;
    }
    ck_assert_int_gt(changed, 0);
    llmrt_sampler_free(s);
    mock_rig_close(&r);
}
END_TEST

/* With graphs, a step whose rows are all greedy (the model's forward_argmax) and a step of
 * the same size with a row sampled on the host (forward: that row needs the logits) must not
 * share a captured graph: two greedy requests first, then a greedy one beside a logprobs one
 * — the logprobs must be those of the reference (the mock poisons its logits after
 * forward_argmax, so a replay of the first graph would give NaN). */
START_TEST(test_graph_greedy_then_host_rows)
{
    const variant *v = &VARIANTS[6 + _i]; /* the graph variants */
    ck_assert(v->graphs);
    mock_rig r;
    mock_rig_opts o = variant_opts(v);
    open_ok(&r, &o);
    int32_t p[3][6];
    for (int i = 0; i < 3; i++)
        make_prompt(p[i], 6, 40 + (unsigned)i, o.model.vocab);
    out_t g0 = {0}, g1 = {0}, g2 = {0}, lp = {0};
    submit_greedy(r.e, p[0], 6, 10, &g0);
    submit_greedy(r.e, p[1], 6, 10, &g1);
    run_ok(r.e);
    const int64_t argmax_steps = mock_model_argmax_forwards(r.model);
    ck_assert_msg(argmax_steps > 0, "%s: all-greedy steps did not use forward_argmax", v->name);
    submit_greedy(r.e, p[2], 6, 10, &g2);
    llmrt_request q;
    llmrt_request_init(&q);
    q.prompt_ids = p[0], q.n_prompt = 6, q.on_token = on_token, q.user = &lp;
    q.sampling.max_tokens = 10;
    q.sampling.logprobs = 0;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_engine_submit(r.e, &q, NULL, &err), LLMRT_OK);
    run_ok(r.e);
    ck_assert_int_eq(mock_model_argmax_forwards(r.model), argmax_steps);
    check_reference(&o.model, p[0], 6, 10, &g0, v->name);
    check_reference(&o.model, p[1], 6, 10, &g1, v->name);
    check_reference(&o.model, p[2], 6, 10, &g2, v->name);
    check_reference(&o.model, p[0], 6, 10, &lp, v->name);
    int32_t ctx[16];
    memcpy(ctx, p[0], sizeof p[0]);
    for (int i = 0; i < 10; i++) {
        const double want = ref_logprob(&o.model, ctx, 6 + i, lp.ids[i]);
        ck_assert_msg(fabs(lp.lp[i] - want) < 1e-4, "%s: token %d logprob %g, reference %g",
                      v->name, i, lp.lp[i], want);
        ctx[6 + i] = lp.ids[i];
    }
    mock_rig_close(&r);
}
END_TEST

/* Destroying an engine with work left delivers CANCELLED to everyone. */
START_TEST(test_destroy_cancels)
{
    mock_rig r;
    mock_rig_opts o = variant_opts(&VARIANTS[3]);
    open_ok(&r, &o);
    int32_t p[8];
    make_prompt(p, 8, 1, o.model.vocab);
    out_t a = {0}, b = {0};
    submit_greedy(r.e, p, 8, 50, &a);
    llmrt_error err = {0};
    for (int i = 0; i < 5; i++)
        llmrt_engine_step(r.e, &err);
    submit_greedy(r.e, p, 8, 50, &b);
    mock_rig_close(&r);
    ck_assert_int_eq(a.finals, 1);
    ck_assert_int_eq(a.fin, LLMRT_FINISH_CANCELLED);
    ck_assert_int_eq(b.finals, 1);
    ck_assert_int_eq(b.fin, LLMRT_FINISH_CANCELLED);
}
END_TEST

/* The model folder's sampling defaults: fields the caller did not give take them, given ones
 * (a temperature of 0 too) stay; an engine without defaults changes nothing. */
START_TEST(test_sampling_defaults)
{
    mock_rig r;
    mock_rig_opts o = variant_opts(&VARIANTS[0]);
    o.sampling = (llmrt_hf_sampling){.set = LLMRT_SAMPLING_TEMPERATURE | LLMRT_SAMPLING_TOP_K |
                                            LLMRT_SAMPLING_REPETITION_PENALTY,
                                     .temperature = 0.6f, .top_k = 20, .repetition_penalty = 1.1f};
    open_ok(&r, &o);
    llmrt_sampling s;
    llmrt_sampling_init(&s);
    uint32_t took = llmrt_engine_sampling_defaults(r.e, &s, 0);
    ck_assert_uint_eq(took, o.sampling.set);
    ck_assert_float_eq_tol(s.temperature, 0.6, 1e-6);
    ck_assert_int_eq(s.top_k, 20);
    ck_assert_float_eq_tol(s.repetition_penalty, 1.1, 1e-6);
    ck_assert_float_eq(s.top_p, 1.0f); /* not in the file: llmrt_sampling_init's */
    ck_assert_str_eq(llmrt_engine_sampling_defaults_text(r.e),
                     "temperature 0.6, top_k 20, repetition_penalty 1.1");
    llmrt_sampling_init(&s); /* greedy, explicitly */
    took = llmrt_engine_sampling_defaults(r.e, &s, LLMRT_SAMPLING_TEMPERATURE | LLMRT_SAMPLING_TOP_K);
    ck_assert_uint_eq(took, LLMRT_SAMPLING_REPETITION_PENALTY);
    ck_assert_float_eq(s.temperature, 0.0f);
    ck_assert_int_eq(s.top_k, 0);
    mock_rig_close(&r);
    o = variant_opts(&VARIANTS[0]);
    open_ok(&r, &o);
    llmrt_sampling_init(&s);
    ck_assert_uint_eq(llmrt_engine_sampling_defaults(r.e, &s, 0), 0);
    ck_assert_float_eq(s.temperature, 0.0f);
    ck_assert_str_eq(llmrt_engine_sampling_defaults_text(r.e), "");
    mock_rig_close(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_single_greedy_matches_reference, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_batched_equals_reference, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_join_between_steps, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_preemption_same_outputs, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_cancel_frees_blocks, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_graph_greedy_then_host_rows, 0, 4);
    tcase_add_test(tc, test_chunked_prefill_and_step_records);
    tcase_add_test(tc, test_async_steps_are_chained);
    tcase_add_test(tc, test_idle_engine_is_not_idle_device);
    tcase_add_test(tc, test_uva_gathers_inputs);
    tcase_add_test(tc, test_limits_and_validation);
    tcase_add_test(tc, test_capacity_settings);
    tcase_add_test(tc, test_eos_stop_ids_min_tokens);
    tcase_add_test(tc, test_seeded_sampling_batch_invariant);
    tcase_add_test(tc, test_logprobs_and_penalties);
    tcase_add_test(tc, test_destroy_cancels);
    tcase_add_test(tc, test_sampling_defaults);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
