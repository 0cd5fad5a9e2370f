/* bench_run.c — the bench schedule and sample collection (see bench_run.h).
 *
 * Only one engine works at a time: a batch is submitted to one config's engine and stepped to
 * completion before the next batch starts, so configs never compete for the device or the
 * cores. Token and step callbacks only append to preallocated arrays (steps grow by
 * doubling), so measuring adds no work to the step loop beyond a store. */
#include "bench_run.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "progress.h"

/* ---- schedule ---- */

void bench_round_order(bench_order order, int n_configs, int requests, llmrt_rng *rng,
                       int32_t *out)
{
    for (int b = 0; b < requests; b++) {
        int32_t *blk = out + (size_t)b * (size_t)n_configs;
        for (int i = 0; i < n_configs; i++)
            blk[i] = i;
        if (order == BENCH_ORDER_RANDOM)
            for (int i = n_configs - 1; i > 0; i--) { /* Fisher–Yates within the block */
                int j = (int)llmrt_rng_below(rng, (uint64_t)i + 1);
                int32_t t = blk[i];
                blk[i] = blk[j];
                blk[j] = t;
            }
    }
}

void bench_prompt(uint64_t seed, int level, int unit, int slot, int32_t vocab, int32_t *ids,
                  int32_t n, int32_t prefix_len)
{
    llmrt_rng rng;
    if (prefix_len > n)
        prefix_len = n;
    llmrt_rng_seed(&rng, seed * 0x9e3779b97f4a7c15ull ^ 0x7072656669780000ull); /* "prefix" */
    for (int32_t i = 0; i < prefix_len; i++)
        ids[i] = (int32_t)llmrt_rng_below(&rng, (uint64_t)vocab);
    uint64_t key = seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t)(uint32_t)level << 48) ^
                   ((uint64_t)(uint32_t)unit << 20) ^ (uint64_t)(uint32_t)slot;
    llmrt_rng_seed(&rng, key);
    for (int32_t i = prefix_len; i < n; i++)
        ids[i] = (int32_t)llmrt_rng_below(&rng, (uint64_t)vocab);
}

/* ---- callbacks ---- */

typedef struct run_ctx {
    bench_data *d;
    int32_t output_len;
    int recording;                     /* 0 during warm-up */
    int32_t config, level, round, unit; /* the batch being run */
    int oom;                            /* a step record could not be stored */
    char error[512];                    /* first request error */
} run_ctx;

typedef struct pending {
    run_ctx *ctx;
    bench_request *r;
} pending;

static void on_token(void *user, const llmrt_token_event *ev)
{
    pending *p = user;
    bench_request *r = p->r;
    if (ev->token >= 0 && r->n_tok < p->ctx->output_len)
        r->t_tok[r->n_tok++] = ev->time_s;
    r->cached_tokens = ev->cached_tokens;
    if (ev->finish != LLMRT_FINISH_NONE) {
        r->finish = (int32_t)ev->finish;
        if (ev->finish == LLMRT_FINISH_ERROR && !p->ctx->error[0])
            snprintf(p->ctx->error, sizeof p->ctx->error, "%s",
                     ev->error ? ev->error : "request failed");
    }
}

static void on_step(void *user, const llmrt_step_record *rec)
{
    run_ctx *c = user;
    bench_data *d = c->d;
    if (!c->recording)
        return;
    if (d->n_steps == d->cap_steps) {
        size_t nc = d->cap_steps ? d->cap_steps * 2 : 4096;
        bench_step *ns = realloc(d->steps, nc * sizeof *ns);
        if (!ns) {
            c->oom = 1;
            return;
        }
        d->steps = ns;
        d->cap_steps = nc;
    }
    bench_step *s = &d->steps[d->n_steps++];
    s->config = c->config;
    s->level = c->level;
    s->round = c->round;
    s->unit = c->unit;
    s->rec = *rec;
}

/* ---- progress ---- */

typedef struct progress {
    FILE *out;
    int tty;
    double t0, last;
    size_t done, total;
} progress;

static void progress_show(progress *p, const bench_settings *s, int level, int round,
                          const char *name, int warm, int final_line)
{
    if (!p->out)
        return;
    double now = llmrt_now_s();
    if (p->tty && !final_line && now - p->last < 0.1 && p->done != p->total)
        return;
    p->last = now;
    char where[64] = "";
    if (s->load_mode)
        snprintf(where, sizeof where, "concurrency %d (%d/%d)  ", s->levels[level], level + 1,
                 s->n_levels);
    char line[256];
    if (warm)
        snprintf(line, sizeof line, "bench: %swarm-up  %s", where, name);
    else
        snprintf(line, sizeof line, "bench: %sround %d/%d  %s %zu/%zu (%.0f%%)  %s  %.1fs", where,
                 round + 1, s->rounds, s->load_mode ? "batch" : "request", p->done, p->total,
                 100.0 * (double)p->done / (double)(p->total ? p->total : 1), name, now - p->t0);
    if (p->tty)
        fprintf(p->out, "\r\033[K%s", line);
    else if (final_line)
        fprintf(p->out, "%s\n", line);
    fflush(p->out);
}

static void progress_clear(progress *p)
{
    if (p->out && p->tty) {
        fputs("\r\033[K", p->out);
        fflush(p->out);
    }
}

/* ---- running ---- */

/* Submit one batch of `conc` requests to cfg's engine and run it to completion. reqs[conc]
 * receive the timelines (their t_tok must hold output_len values). */
static llmrt_status run_batch(const bench_settings *s, bench_config *cfg, run_ctx *ctx,
                              bench_request *reqs, int conc, int32_t *prompt, int32_t vocab,
                              pending *pend, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_engine_set_step_callback(cfg->engine, on_step, ctx);
    for (int slot = 0; slot < conc; slot++) {
        bench_request *r = &reqs[slot];
        r->slot = slot;
        r->n_tok = 0;
        r->finish = LLMRT_FINISH_NONE;
        r->cached_tokens = 0;
        pend[slot] = (pending){ctx, r};
        bench_prompt(s->seed, ctx->level, ctx->unit, slot, vocab, prompt, s->input_len,
                     s->prefix_len);
        llmrt_request q;
        llmrt_request_init(&q);
        q.prompt_ids = prompt;
        q.n_prompt = s->input_len;
        q.sampling.temperature = 0;
        q.sampling.max_tokens = s->output_len;
        q.sampling.ignore_eos = s->ignore_eos;
        q.on_token = on_token;
        q.user = &pend[slot];
        uint64_t id;
        r->t_submit = llmrt_now_s();
        st = llmrt_engine_submit(cfg->engine, &q, &id, err);
        if (st != LLMRT_OK) {
            llmrt_error_prefix(err, "%s: submitting a request", cfg->name);
            goto cleanup;
        }
    }
    st = llmrt_engine_run(cfg->engine, err);
    if (st != LLMRT_OK) {
        llmrt_error_prefix(err, "%s: running a batch", cfg->name);
        goto cleanup;
    }
    if (ctx->error[0])
        FAIL(err, LLMRT_ERR_DEVICE, "%s: a request failed: %s", cfg->name, ctx->error);
    if (ctx->oom)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory storing step records");
    for (int slot = 0; slot < conc; slot++)
        if (reqs[slot].n_tok == 0)
            FAIL(err, LLMRT_ERR_INTERNAL, "%s: a request finished (%s) without any token",
                 cfg->name, llmrt_finish_reason_str((llmrt_finish_reason)reqs[slot].finish));
cleanup:
    llmrt_engine_set_step_callback(cfg->engine, NULL, NULL);
    return st;
}

llmrt_status bench_run(const bench_settings *s, bench_config *cfgs, int n_cfg, bench_data *out,
                       FILE *progress_out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    int32_t max_conc = 1;
    for (int l = 0; l < s->n_levels; l++)
        if (s->levels[l] > max_conc)
            max_conc = s->levels[l];
    size_t per_level_batches = (size_t)n_cfg * (size_t)s->rounds * (size_t)s->requests;
    size_t n_req = 0;
    for (int l = 0; l < s->n_levels; l++)
        n_req += per_level_batches * (size_t)s->levels[l];

    int32_t *prompt = NULL, *order = NULL;
    pending *pend = NULL;
    bench_request *warm = NULL;
    double *warm_tok = NULL;
    int32_t *next_unit = NULL;
    progress pr = {0};
    memset(out, 0, sizeof *out);
    out->req = calloc(n_req, sizeof *out->req);
    out->tok_store = malloc(n_req * (size_t)s->output_len * sizeof *out->tok_store);
    prompt = malloc((size_t)s->input_len * sizeof *prompt);
    order = malloc((size_t)n_cfg * (size_t)s->requests * sizeof *order);
    pend = malloc((size_t)max_conc * sizeof *pend);
    warm = calloc((size_t)max_conc, sizeof *warm);
    warm_tok = malloc((size_t)max_conc * (size_t)s->output_len * sizeof *warm_tok);
    next_unit = calloc((size_t)n_cfg, sizeof *next_unit);
    TRY_ALLOC(err, out->req && out->tok_store && prompt && order && pend && warm && warm_tok &&
                       next_unit,
              "bench sample buffers");
    for (size_t i = 0; i < n_req; i++)
        out->req[i].t_tok = out->tok_store + i * (size_t)s->output_len;
    for (int i = 0; i < max_conc; i++)
        warm[i].t_tok = warm_tok + (size_t)i * (size_t)s->output_len;

    llmrt_model_info mi;
    llmrt_engine_model_info(cfgs[0].engine, &mi);
    int32_t vocab = mi.vocab > 0 ? mi.vocab : 1;

    llmrt_rng rng;
    llmrt_rng_seed(&rng, s->seed ^ 0x6f72646572ull); /* "order": independent of prompts */
    run_ctx ctx = {.d = out, .output_len = s->output_len};
    pr.out = progress_out;
    pr.tty = progress_out && llmrt_progress_is_tty(progress_out);
    pr.t0 = llmrt_now_s();
    pr.total = per_level_batches * (size_t)s->n_levels;

    for (int l = 0; l < s->n_levels; l++) {
        int conc = s->levels[l];
        ctx.level = l;
        /* warm-up: configs interleaved, nothing recorded */
        ctx.recording = 0;
        for (int w = 0; w < s->warmup; w++)
            for (int c = 0; c < n_cfg; c++) {
                ctx.config = c;
                ctx.round = -1;
                ctx.unit = -1 - w;
                progress_show(&pr, s, l, 0, cfgs[c].name, 1, 0);
                TRY(run_batch(s, &cfgs[c], &ctx, warm, conc, prompt, vocab, pend, err));
            }
        if (l == 0)
            out->t0 = llmrt_now_s();
        memset(next_unit, 0, (size_t)n_cfg * sizeof *next_unit);
        ctx.recording = 1;
        for (int r = 0; r < s->rounds; r++) {
            bench_round_order(s->order, n_cfg, s->requests, &rng, order);
            for (int t = 0; t < n_cfg * s->requests; t++) {
                int c = order[t];
                ctx.config = c;
                ctx.round = r;
                ctx.unit = next_unit[c]++;
                bench_request *reqs = &out->req[out->n_req];
                for (int k = 0; k < conc; k++) {
                    reqs[k].config = c;
                    reqs[k].level = l;
                    reqs[k].round = r;
                    reqs[k].unit = ctx.unit;
                }
                TRY(run_batch(s, &cfgs[c], &ctx, reqs, conc, prompt, vocab, pend, err));
                out->n_req += (size_t)conc;
                pr.done++;
                progress_show(&pr, s, l, r, cfgs[c].name, 0, t == n_cfg * s->requests - 1);
            }
        }
    }
    out->t_end = llmrt_now_s();
cleanup:
    progress_clear(&pr);
    free(prompt);
    free(order);
    free(pend);
    free(warm);
    free(warm_tok);
    free(next_unit);
    return st;
}

void bench_data_free(bench_data *d)
{
    free(d->req);
    free(d->tok_store);
    free(d->steps);
    memset(d, 0, sizeof *d);
}
