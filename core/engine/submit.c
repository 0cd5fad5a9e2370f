/* submit.c — requests in: a request checked and copied into an engine sequence
 * (llmrt_engine_submit), cancellation (llmrt_engine_cancel), waiting for work, the published
 * stats and the accessors (include/llmrt/engine.h), and the stepping thread's side of the
 * hand-over (engine_drain_inbox, engine_apply_cancels).
 *
 * Why one file: every call another thread may make is here, with both sides of its hand-over
 * to the stepping thread (the inbox, the cancel list, the work flags under the engine lock),
 * so the threading protocol reads in one place. A request is checked, tokenized and copied
 * before the lock is taken. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "engine_internal.h"
#include "error.h"

const char *llmrt_finish_reason_str(llmrt_finish_reason r)
{
    switch (r) {
    case LLMRT_FINISH_NONE: return "";
    case LLMRT_FINISH_STOP: return "stop";
    case LLMRT_FINISH_LENGTH: return "length";
    case LLMRT_FINISH_CANCELLED: return "cancelled";
    case LLMRT_FINISH_ERROR: return "error";
    }
    return "";
}

void llmrt_request_init(llmrt_request *r)
{
    memset(r, 0, sizeof *r);
    llmrt_sampling_init(&r->sampling);
}

void engine_seq_free(eseq *s)
{
    if (!s)
        return;
    llmrt_kv_table_free(&s->sched.table);
    free(s->tokens);
    free(s->stop_ids);
    for (int32_t i = 0; s->stops && i < s->sp.n_stop; i++)
        free(s->stops[i]);
    free(s->stops);
    if (s->detok)
        llmrt_detok_free(s->detok);
    llmrt_stopper_free(s->stopper);
    llmrt_grammar_free(s->grammar);
    free(s);
}

int engine_seq_list_push(eseq ***list, int32_t *n, int32_t *cap, eseq *s)
{
    if (*n == *cap) {
        int32_t c = *cap ? *cap * 2 : 16;
        eseq **l = realloc(*list, sizeof *l * (size_t)c);
        if (!l)
            return -1;
        *list = l, *cap = c;
    }
    (*list)[(*n)++] = s;
    return 0;
}

static llmrt_status check_sampling(const llmrt_engine *e, const llmrt_sampling *sp,
                                   llmrt_error *err)
{
    if (!(sp->temperature >= 0.0f) || isinf(sp->temperature))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "temperature = %g: must be a finite number >= 0 (0 = greedy)",
                          (double)sp->temperature);
    if (sp->top_k < -1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "top_k = %d: must be >= 1, or 0 / -1 for no limit", sp->top_k);
    if (!(sp->top_p > 0.0f && sp->top_p <= 1.0f))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "top_p = %g: must be in (0, 1]",
                          (double)sp->top_p);
    if (!(sp->min_p >= 0.0f && sp->min_p <= 1.0f))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "min_p = %g: must be in [0, 1]",
                          (double)sp->min_p);
    if (!(sp->repetition_penalty > 0.0f) || isinf(sp->repetition_penalty))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "repetition_penalty = %g: must be > 0 (1 = off)",
                          (double)sp->repetition_penalty);
    if (!(sp->presence_penalty >= -2.0f && sp->presence_penalty <= 2.0f))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "presence_penalty = %g: must be in [-2, 2]", (double)sp->presence_penalty);
    if (!(sp->frequency_penalty >= -2.0f && sp->frequency_penalty <= 2.0f))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "frequency_penalty = %g: must be in [-2, 2]",
                          (double)sp->frequency_penalty);
    if (sp->max_tokens < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "max_tokens = %d: must be >= 1",
                          sp->max_tokens);
    if (sp->min_tokens < 0 || sp->min_tokens > sp->max_tokens)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "min_tokens = %d: must be in [0, max_tokens = %d]", sp->min_tokens,
                          sp->max_tokens);
    if (sp->logprobs < -1 || sp->logprobs > LLMRT_MAX_TOP_LOGPROBS)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "logprobs = %d: must be -1 (none) or 0..%d", sp->logprobs,
                          LLMRT_MAX_TOP_LOGPROBS);
    if (sp->n_stop_ids < 0 || (sp->n_stop_ids > 0 && !sp->stop_ids))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "stop token ids: bad array");
    for (int32_t i = 0; i < sp->n_stop_ids; i++)
        if (sp->stop_ids[i] < 0 || sp->stop_ids[i] >= e->info.vocab)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "stop token id %d (entry %d) is outside the vocabulary [0, %d)",
                              sp->stop_ids[i], i, e->info.vocab);
    if (sp->n_stop < 0 || (sp->n_stop > 0 && !sp->stop))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "stop strings: bad array");
    if (sp->n_stop > 0 && !e->parts.tokenizer)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "stop strings need a tokenizer, and the model folder has no "
                          "tokenizer.json (use stop token ids instead)");
    for (int32_t i = 0; i < sp->n_stop; i++)
        if (!sp->stop[i] || !sp->stop[i][0])
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "stop string %d is empty (each needs at least one character)", i);
    return LLMRT_OK;
}

/* Build a sequence from a request (outside the engine lock: tokenization can take a while). */
static llmrt_status seq_from_request(llmrt_engine *e, const llmrt_request *req, eseq **out,
                                     llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    int32_t *ids = NULL;
    size_t n = 0;
    eseq *s = NULL;
    /* the grammar is the engine's from here on, whatever happens */
    llmrt_grammar *grammar = req ? req->sampling.grammar : NULL;
    if (!req)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "no request");
    if (grammar && (st = engine_grammar_take(e, grammar, err)) != LLMRT_OK) {
        grammar = NULL; /* another request's, or another engine's: not ours to free */
        goto cleanup;
    }
    TRY(check_sampling(e, &req->sampling, err));
    if (req->prompt_ids) {
        if (req->n_prompt < 0)
            FAIL(err, LLMRT_ERR_INVALID_ARG, "prompt length %d", req->n_prompt);
        n = (size_t)req->n_prompt;
    } else if (req->prompt_text) {
        if (!e->parts.tokenizer)
            FAIL(err, LLMRT_ERR_INVALID_ARG,
                 "a text prompt needs a tokenizer, and the model folder has no tokenizer.json "
                 "(give the prompt as token ids)");
        TRY(llmrt_tokenizer_encode(e->parts.tokenizer, req->prompt_text,
                                   strlen(req->prompt_text), 0, &ids, &n, err));
    }
    if (n == 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "the prompt is empty (give at least one token)");
    if ((int64_t)n >= e->max_model_len)
        FAIL(err, LLMRT_ERR_LIMIT,
             "the prompt has %zu tokens but cache.max_model_len = %d allows at most %d "
             "(prompt plus at least one generated token); shorten the prompt or raise "
             "cache.max_model_len / cache.kv_tokens",
             n, e->max_model_len, e->max_model_len - 1);
    const int32_t *p = req->prompt_ids ? req->prompt_ids : ids;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0 || p[i] >= e->info.vocab)
            FAIL(err, LLMRT_ERR_INVALID_ARG,
                 "prompt token %zu is id %d, outside the model's vocabulary [0, %d)", i, p[i],
                 e->info.vocab);
    s = calloc(1, sizeof *s);
    TRY_ALLOC(err, s, "a request");
    s->sched.owner = s;
    s->n_prompt = (int32_t)n;
    int64_t room = (int64_t)e->max_model_len - (int64_t)n;
    int64_t gen = req->sampling.max_tokens < room ? req->sampling.max_tokens : room;
    s->cap = (int32_t)(n + (size_t)gen + 1);
    s->tokens = malloc(sizeof *s->tokens * (size_t)s->cap);
    TRY_ALLOC(err, s->tokens, "the request's tokens");
    memcpy(s->tokens, p, sizeof *p * n);
    s->sched.n_tokens = (int32_t)n;
    s->sched.tokens = s->tokens;
    s->sp = req->sampling;
    s->sp.grammar = NULL; /* held in s->grammar */
    s->grammar = grammar;
    grammar = NULL;
    s->cb = req->on_token;
    s->user = req->user;
    if (s->sp.top_k < 0)
        s->sp.top_k = 0;
    if (s->sp.n_stop_ids > 0) {
        s->stop_ids = malloc(sizeof *s->stop_ids * (size_t)s->sp.n_stop_ids);
        TRY_ALLOC(err, s->stop_ids, "stop ids");
        memcpy(s->stop_ids, s->sp.stop_ids, sizeof *s->stop_ids * (size_t)s->sp.n_stop_ids);
    }
    s->sp.stop_ids = s->stop_ids;
    int32_t n_stop = s->sp.n_stop;
    s->sp.n_stop = 0;
    s->sp.stop = NULL;
    if (n_stop > 0) {
        s->stops = calloc((size_t)n_stop, sizeof *s->stops);
        TRY_ALLOC(err, s->stops, "stop strings");
        for (int32_t i = 0; i < n_stop; i++) {
            size_t len = strlen(req->sampling.stop[i]);
            s->stops[i] = malloc(len + 1);
            TRY_ALLOC(err, s->stops[i], "a stop string");
            memcpy(s->stops[i], req->sampling.stop[i], len + 1);
            s->sp.n_stop = i + 1;
        }
        s->sp.stop = (const char *const *)s->stops;
    }
    TRY(llmrt_stopper_new(s->sp.stop, s->sp.n_stop, &s->stopper, err));
    if (e->parts.tokenizer)
        TRY(llmrt_detok_new(e->parts.tokenizer, 1, &s->detok, err));
    *out = s;
    s = NULL;
cleanup:
    free(ids);
    engine_seq_free(s);
    llmrt_grammar_free(grammar);
    return st;
}

llmrt_status llmrt_engine_submit(llmrt_engine *e, const llmrt_request *req, uint64_t *id,
                                 llmrt_error *err)
{
    eseq *s = NULL;
    llmrt_status st = seq_from_request(e, req, &s, err);
    if (st)
        return st;
    pthread_mutex_lock(&e->mu);
    if (e->failed) {
        pthread_mutex_unlock(&e->mu);
        engine_seq_free(s);
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "the engine has failed and takes no more requests (see the earlier "
                          "error)");
    }
    s->id = ++e->next_id;
    s->sched.order = s->id;
    s->seed = s->sp.has_seed ? s->sp.seed : llmrt_sampler_mix(e->seed_base ^ s->id);
    HASH_ADD(hh, e->by_id, id, sizeof s->id, s);
    if (!e->inbox)
        e->t_inbox_first = llmrt_now_s();
    if (e->inbox_tail)
        e->inbox_tail->next = s;
    else
        e->inbox = s;
    e->inbox_tail = s;
    e->work_pending = 1;
    e->pub.requests_submitted++;
    e->pub.prompt_tokens += (uint64_t)s->n_prompt;
    e->pub.waiting++;
    if (id)
        *id = s->id;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return LLMRT_OK;
}

llmrt_status llmrt_engine_cancel(llmrt_engine *e, uint64_t id)
{
    llmrt_status st = LLMRT_OK;
    pthread_mutex_lock(&e->mu);
    eseq *s = NULL;
    HASH_FIND(hh, e->by_id, &id, sizeof id, s);
    if (!s) {
        st = LLMRT_ERR_NOT_FOUND;
    } else if (!s->cancel_queued) {
        if (engine_seq_list_push(&e->cancels, &e->n_cancels, &e->cap_cancels, s) != 0) {
            pthread_mutex_unlock(&e->mu);
            return LLMRT_ERR_NOMEM;
        }
        s->cancel = 1;
        s->cancel_queued = 1;
        e->work_pending = 1;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return st;
}

int llmrt_engine_has_work(llmrt_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int w = e->work_pending || e->active_count > 0;
    pthread_mutex_unlock(&e->mu);
    return w;
}

int llmrt_engine_wait_work(llmrt_engine *e, int32_t timeout_ms)
{
    pthread_mutex_lock(&e->mu);
    struct timespec until;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
    }
    while (!(e->work_pending || e->active_count > 0) && !e->wake) {
        if (timeout_ms < 0)
            pthread_cond_wait(&e->cv, &e->mu);
        else if (pthread_cond_timedwait(&e->cv, &e->mu, &until) != 0)
            break;
    }
    e->wake = 0;
    int w = e->work_pending || e->active_count > 0;
    pthread_mutex_unlock(&e->mu);
    return w;
}

void llmrt_engine_wake(llmrt_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->wake = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void llmrt_engine_set_step_callback(llmrt_engine *e, llmrt_step_cb cb, void *user)
{
    e->on_step = cb;
    e->step_user = user;
}

void llmrt_engine_stats_get(llmrt_engine *e, llmrt_engine_stats *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->pub;
    pthread_mutex_unlock(&e->mu);
}

void llmrt_engine_model_info(llmrt_engine *e, llmrt_model_info *out) { *out = e->info; }

int32_t llmrt_engine_eos_ids(llmrt_engine *e, const int32_t **ids)
{
    *ids = e->eos;
    return e->n_eos;
}

int32_t llmrt_engine_max_model_len(llmrt_engine *e) { return e->max_model_len; }

llmrt_tokenizer *llmrt_engine_tokenizer(llmrt_engine *e) { return e->parts.tokenizer; }

uint32_t llmrt_engine_sampling_defaults(llmrt_engine *e, llmrt_sampling *s, uint32_t given)
{
    const llmrt_hf_sampling *g = &e->parts.sampling;
    uint32_t take = g->set & ~given;
    if (take & LLMRT_SAMPLING_TEMPERATURE)
        s->temperature = g->temperature;
    if (take & LLMRT_SAMPLING_TOP_P)
        s->top_p = g->top_p;
    if (take & LLMRT_SAMPLING_TOP_K)
        s->top_k = g->top_k;
    if (take & LLMRT_SAMPLING_MIN_P)
        s->min_p = g->min_p;
    if (take & LLMRT_SAMPLING_REPETITION_PENALTY)
        s->repetition_penalty = g->repetition_penalty;
    return take;
}

const char *llmrt_engine_sampling_defaults_text(llmrt_engine *e)
{
    return e->sampling_text;
}

llmrt_status llmrt_engine_chat_render(llmrt_engine *e, const llmrt_chat_message *msgs,
                                      uint32_t n, const llmrt_chat_options *opt, char **text,
                                      llmrt_error *err)
{
    static const llmrt_chat_ref none = {NULL, NULL, "the engine was built without a chat format"};
    return llmrt_chat_render_text(e->parts.chat ? e->parts.chat : &none, msgs, n, opt, text, err);
}

llmrt_status llmrt_engine_chat_tokenize(llmrt_engine *e, const llmrt_chat_message *msgs,
                                        uint32_t n, const llmrt_chat_options *opt,
                                        uint32_t flags, int32_t **ids, size_t *n_ids,
                                        llmrt_error *err)
{
    static const llmrt_chat_ref none = {NULL, NULL, "the engine was built without a chat format"};
    uint32_t cf = ((flags & LLMRT_CHAT_TRUST_CONTENT) ? LLMRT_CHAT_CONTENT_SPECIAL : 0) |
                  ((flags & LLMRT_CHAT_BOS) ? LLMRT_CHAT_ADD_SPECIAL : 0);
    *ids = NULL;
    *n_ids = 0;
    if (!e->parts.tokenizer)
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "the model folder has no tokenizer.json, so chat is not available");
    return llmrt_chat_encode(e->parts.chat ? e->parts.chat : &none, e->parts.tokenizer, msgs, n,
                             opt, cf, ids, n_ids, NULL, err);
}

const llmrt_chat_syntax *llmrt_engine_chat_syntax(llmrt_engine *e)
{
    return llmrt_chat_syntax_of(e->parts.chat);
}

int llmrt_engine_chat_prompt_in_reasoning(llmrt_engine *e, const char *prompt)
{
    return llmrt_chat_prompt_in_reasoning(e->parts.chat, prompt);
}

llmrt_status llmrt_engine_chat_parser_new(llmrt_engine *e, const llmrt_reply_options *opt,
                                          llmrt_chat_parser **out, llmrt_error *err)
{
    return llmrt_chat_parser_open(e->parts.chat, opt, out, err);
}

const char *llmrt_engine_chat_unavailable(llmrt_engine *e)
{
    if (e->parts.chat && e->parts.chat->vt)
        return NULL;
    return e->parts.chat && e->parts.chat->why[0] ? e->parts.chat->why
                                                  : "the model has no chat format";
}

void engine_publish(llmrt_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->pub.kv_blocks_used = llmrt_kv_used_blocks(&e->kv);
    e->pub.kv_blocks_free = e->kv.n_free;
    e->pub.running = e->sched.n_running;
    int32_t inbox = 0;
    for (eseq *s = e->inbox; s; s = s->next)
        inbox++;
    e->pub.waiting = e->sched.n_waiting + inbox;
    e->pub.preemptions = e->sched.preemptions;
    e->pub.prefix_cache_blocks = e->kv.pc.n_indexed;
    e->pub.prefix_cache_queries = e->kv.prefix_queries;
    e->pub.prefix_cache_hits = e->kv.prefix_hits;
    e->pub.prefix_cache_evictions = e->kv.pc.evictions;
    if (e->parts.memory.vt)
        e->parts.memory.vt->stats(e->parts.memory.m, &e->pub.mem);
    snprintf(e->pub.memory_path, sizeof e->pub.memory_path, "%s", e->pub.mem.path_in_use);
    pthread_mutex_unlock(&e->mu);
}

void engine_drain_inbox(llmrt_engine *e, eseq ***cancels, int32_t *n_cancels)
{
    pthread_mutex_lock(&e->mu);
    eseq *in = e->inbox;
    e->inbox = e->inbox_tail = NULL;
    if (in && e->t_arrival == 0)
        e->t_arrival = e->t_inbox_first;
    e->t_inbox_first = 0;
    *n_cancels = e->n_cancels;
    *cancels = NULL;
    if (e->n_cancels) {
        *cancels = malloc(sizeof **cancels * (size_t)e->n_cancels);
        if (*cancels)
            memcpy(*cancels, e->cancels, sizeof **cancels * (size_t)e->n_cancels);
        else
            *n_cancels = 0; /* keep them queued for the next step */
        if (*cancels)
            e->n_cancels = 0;
    }
    int added = 0;
    for (eseq *s = in; s; s = s->next)
        added++;
    e->active_count += added;
    e->work_pending = e->n_cancels > 0;
    pthread_mutex_unlock(&e->mu);
    for (eseq *s = in, *nx; s; s = nx) {
        nx = s->next;
        s->next = NULL;
        llmrt_error err = {0};
        if (llmrt_sched_add(&e->sched, &s->sched, &err) != LLMRT_OK) {
            engine_finish_without_token(e, s, LLMRT_FINISH_ERROR, err.msg);
            continue;
        }
        s->in_sched = 1;
    }
}

void engine_apply_cancels(llmrt_engine *e, eseq **cancels, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        eseq *s = cancels[i];
        s->cancel_applied = 1;
        if (s->done) { /* it finished on its own after the cancel was queued */
            s->cancel_held = 0;
            continue;
        }
        /* in a launched step: its result is discarded; its blocks are free at once (any
         * later user of them is ordered after that step on the stream) */
        s->placeholder = 0;
        engine_finish_without_token(e, s, LLMRT_FINISH_CANCELLED, NULL);
    }
    engine_reap_zombies(e, REAP_UNREFERENCED);
}
