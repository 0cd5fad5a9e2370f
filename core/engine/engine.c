/* engine.c — the step loop: requests in, tokens out (include/llmrt/engine.h).
 *
 * One step, as data (DESIGN.md §3): the scheduler picks the batch; the host writes token
 * ids, positions, slot mapping, query starts, sequence lengths, block tables and sampling
 * parameters into half h of the step buffers; the memory plugin moves them (or not, for
 * zero-copy); the model runs its forward into device logits; the backend samples on the
 * device (argmax / sample) into the output buffer; the host reads the sampled ids, appends,
 * detokenizes, checks stops, calls the request's callback, frees finished sequences.
 *
 * Async scheduling: while the same sequences keep decoding, step N+1 is launched before the
 * host has read step N's tokens — its token ids are copied on the device from step N's
 * sampled ids — and the host processes step N's tokens one step behind. A sequence that
 * stops at N has its N+1 result discarded. Anything else (new requests to admit, a
 * cancellation, host-side sampling, a length limit reached) falls back to the plain
 * synchronous step.
 *
 * CUDA graphs: decode steps of 1, 2, 4, ... sequences (padded with rows that write nowhere
 * and read the zero block) are captured once per shape and replayed. */
#include "engine_parts.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>

#include "clock.h"
#include "error.h"
#include "kv_cache.h"
#include "log.h"
#include "sampler.h"
#include "scheduler.h"
#include "step_buffers.h"
#include "stop_strings.h"

#define CPU_DEFAULT_KV_TOKENS 8192
#define MAX_GRAPHS 64

/* ---- one request while the engine holds it ---- */
typedef struct eseq {
    llmrt_sched_seq sched;   /* scheduler bookkeeping; sched.owner == this */
    uint64_t id;
    void *user;
    llmrt_token_cb cb;
    llmrt_sampling sp;       /* stop_ids / stop point at the copies below */
    int32_t *stop_ids;
    char **stops;
    uint64_t seed;
    int32_t *tokens;         /* [cap] prompt then generated; -1 = not known yet */
    int32_t cap;
    int32_t n_prompt;
    int32_t n_generated;     /* known generated tokens */
    int32_t placeholder;     /* 1: a launched step is computing an unknown token */
    int32_t refs;            /* launched, not yet collected steps that include it */
    int done;                /* final event delivered */
    int cancel;              /* cancel requested (engine lock) */
    int cancel_queued;       /* a pointer to it sits in a cancel list (engine lock) */
    int cancel_applied;      /* its cancel has been processed (stepping thread) */
    int cancel_held;         /* finished with a cancel still queued: apply_cancels will read it,
                                so it is not freed before then (stepping thread) */
    int in_sched;            /* handed to the scheduler */
    llmrt_detok *detok;
    llmrt_stopper *stopper;
    struct eseq *next;       /* inbox link */
    UT_hash_handle hh;       /* by id (engine lock) */
} eseq;

/* ---- a launched step ---- */
typedef struct flight {
    int active;
    int half;
    int chained;             /* token ids: the previous step's sampled ids, on the device */
    int graph;
    int d2h_done;            /* outputs' copy enqueued */
    int device_op;           /* 0 none, 1 argmax, 2 sample, 3 model forward_argmax */
    int any_host;            /* rows sampled on the host */
    llmrt_sched_item *items; /* [max_seqs] */
    uint8_t *row_host;       /* [max_seqs] 1: sampled on the host */
    int32_t n_items;
    int32_t n_rows;          /* sequences in the batch, including padding */
    int32_t n_tokens, n_prefill, n_decode;
    llmrt_step_layout lay;
    double t_start, t_prepared;
    uint64_t h2d_bytes, d2h_bytes;
} flight;

typedef struct graph_entry {
    int32_t rows;
    int half;
    int chained;
    int op;
    llmrt_graph *g;
} graph_entry;

struct llmrt_engine {
    llmrt_engine_parts parts;
    llmrt_engine_settings set;
    llmrt_engine_options opts;
    llmrt_model_info info;
    llmrt_device_info dev;
    const llmrt_backend_vtable *bvt;
    llmrt_backend *b;
    uint32_t be_caps;
    int32_t max_model_len;
    int32_t max_bt_width;
    int32_t graph_max_rows;
    int async_on, graphs_on, copies_in_graph;
    int out_shared;          /* out.host[0] == out.host[1] */
    int in_shared_async;     /* in.host shared and its copies are truly asynchronous */
    char capacity_source[64];

    llmrt_kv kv;
    int kv_ok;
    llmrt_scheduler sched;
    int sched_ok;
    llmrt_step_buffers sb;
    int sb_ok;
    llmrt_sampler *sampler;
    float *row_scratch;      /* [vocab] */
    int32_t *sampled;        /* [max_seqs] */
    float *lp_buf;           /* [max_seqs] */
    int32_t *top_ids;        /* [max_seqs * LLMRT_MAX_TOP_LOGPROBS] */
    float *top_lps;
    int32_t *eos;
    int32_t n_eos;
    llmrt_event *ev[2][4];
    flight fl[2];
    int cur;                 /* index of the flight in the air, -1 when none */
    int next_half;           /* half of the next synchronous launch */
    graph_entry graphs[MAX_GRAPHS];
    int n_graphs;
    llmrt_sched_item *plan;  /* [max_seqs] scratch for scheduling */
    eseq **zombies;          /* finished sequences still referenced by a flight */
    int32_t n_zombies, cap_zombies;
    uint64_t step_no;
    double t_prev_out;
    uint64_t seed_base;
    char *text;
    size_t text_len, text_cap;
    llmrt_step_cb on_step;
    void *step_user;
    int warned_preempt, warned_graph;

    /* ---- shared with other threads: under mu ---- */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    eseq *by_id;
    eseq *inbox, *inbox_tail;
    eseq **cancels;
    int32_t n_cancels, cap_cancels;
    uint64_t next_id;
    int failed;
    int wake;
    int work_pending;        /* inbox or cancels non-empty (the stepping thread's view is
                                in the fields below) */
    int active_count;        /* sequences admitted and not finished (stepping thread writes) */
    llmrt_engine_stats pub;
};

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

void llmrt_engine_options_init(llmrt_engine_options *o) { memset(o, 0, sizeof *o); }

void llmrt_engine_settings_default(llmrt_engine_settings *s)
{
    memset(s, 0, sizeof *s);
    s->block_size = 16;
    s->gpu_memory_utilization = 0.80;
    s->kv_dtype = LLMRT_DTYPE_INVALID;
    s->max_num_seqs = 32;
    s->max_num_batched_tokens = 2048;
    s->async_scheduling = 1;
    s->cuda_graphs = 1;
}

/* ---------------------------------------------------------------- text scratch */

static void text_reset(llmrt_engine *e) { e->text_len = 0; }

static void text_add(llmrt_engine *e, const char *s, size_t n)
{
    if (!n)
        return;
    if (e->text_len + n + 1 > e->text_cap) {
        size_t cap = e->text_cap ? e->text_cap : 256;
        while (cap < e->text_len + n + 1)
            cap *= 2;
        char *t = realloc(e->text, cap);
        if (!t)
            return; /* out of memory: this piece of text is lost, the tokens are not */
        e->text = t, e->text_cap = cap;
    }
    memcpy(e->text + e->text_len, s, n);
    e->text_len += n;
    e->text[e->text_len] = 0;
}

/* ---------------------------------------------------------------- sequences */

static void seq_free(eseq *s)
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
    free(s);
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
    if (!req)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "no request");
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
    s->sp = req->sampling;
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
    seq_free(s);
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
        seq_free(s);
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "the engine has failed and takes no more requests (see the earlier "
                          "error)");
    }
    s->id = ++e->next_id;
    s->sched.order = s->id;
    s->seed = s->sp.has_seed ? s->sp.seed : llmrt_sampler_mix(e->seed_base ^ s->id);
    HASH_ADD(hh, e->by_id, id, sizeof s->id, s);
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
        if (e->n_cancels == e->cap_cancels) {
            int32_t cap = e->cap_cancels ? e->cap_cancels * 2 : 16;
            eseq **c = realloc(e->cancels, sizeof *c * (size_t)cap);
            if (!c) {
                pthread_mutex_unlock(&e->mu);
                return LLMRT_ERR_NOMEM;
            }
            e->cancels = c, e->cap_cancels = cap;
        }
        s->cancel = 1;
        s->cancel_queued = 1;
        e->cancels[e->n_cancels++] = s;
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

llmrt_status llmrt_engine_chat_render(llmrt_engine *e, const llmrt_chat_message *msgs,
                                      uint32_t n, const llmrt_chat_options *opt, char **text,
                                      llmrt_error *err)
{
    static const llmrt_chat_ref none = {NULL, NULL, "the engine was built without a chat format"};
    return llmrt_chat_render_text(e->parts.chat ? e->parts.chat : &none, msgs, n, opt, text, err);
}

const char *llmrt_engine_chat_unavailable(llmrt_engine *e)
{
    if (e->parts.chat && e->parts.chat->vt)
        return NULL;
    return e->parts.chat && e->parts.chat->why[0] ? e->parts.chat->why
                                                  : "the model has no chat format";
}

/* Refresh the published counters that the stepping thread owns. */
static void publish(llmrt_engine *e)
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
    if (e->parts.memory.vt)
        e->parts.memory.vt->stats(e->parts.memory.m, &e->pub.mem);
    snprintf(e->pub.memory_path, sizeof e->pub.memory_path, "%s", e->pub.mem.path_in_use);
    pthread_mutex_unlock(&e->mu);
}

/* ---------------------------------------------------------------- events */

static void add_zombie(llmrt_engine *e, eseq *s)
{
    if (e->n_zombies == e->cap_zombies) {
        int32_t cap = e->cap_zombies ? e->cap_zombies * 2 : 16;
        eseq **z = realloc(e->zombies, sizeof *z * (size_t)cap);
        if (!z)
            return; /* leaks one sequence rather than freeing memory still referenced */
        e->zombies = z, e->cap_zombies = cap;
    }
    e->zombies[e->n_zombies++] = s;
}

/* Free finished sequences nothing refers to any more: no launched step (refs) and no queued
 * cancel (cancel_held). force: the engine is failing or going away, every list is dropped. */
static void reap_zombies(llmrt_engine *e, int force)
{
    for (int32_t i = 0; i < e->n_zombies;) {
        if (force || (e->zombies[i]->refs == 0 && !e->zombies[i]->cancel_held)) {
            seq_free(e->zombies[i]);
            e->zombies[i] = e->zombies[--e->n_zombies];
        } else {
            i++;
        }
    }
}

/* Deliver one event. A final event takes the sequence out of the engine: out of the id
 * table (so cancel reports NOT_FOUND), out of the scheduler (its blocks are free again), and
 * frees it once no launched step refers to it. */
static void emit(llmrt_engine *e, eseq *s, int32_t token, const char *text, size_t text_len,
                 float logprob, int32_t n_top, const int32_t *top_ids, const float *top_lps,
                 llmrt_finish_reason finish, const char *stop_reason, int32_t stop_token,
                 const char *error)
{
    llmrt_token_event ev;
    memset(&ev, 0, sizeof ev);
    ev.id = s->id;
    ev.user = s->user;
    ev.token = token;
    ev.index = token >= 0 ? s->n_generated - 1 : s->n_generated;
    ev.text = text ? text : "";
    ev.text_len = text ? text_len : 0;
    ev.logprob = logprob;
    ev.n_top = n_top;
    ev.top_ids = top_ids;
    ev.top_logprobs = top_lps;
    ev.finish = finish;
    ev.stop_reason = stop_reason;
    ev.stop_token = stop_token;
    ev.error = error;
    ev.prompt_tokens = s->n_prompt;
    ev.completion_tokens = s->n_generated;
    ev.time_s = llmrt_now_s();
    if (finish != LLMRT_FINISH_NONE) {
        s->done = 1;
        if (s->in_sched) {
            llmrt_sched_remove(&e->sched, &s->sched);
            s->in_sched = 0;
        }
        pthread_mutex_lock(&e->mu);
        HASH_DELETE(hh, e->by_id, s); /* from here on no thread can queue a cancel for it */
        s->cancel_held = s->cancel_queued && !s->cancel_applied;
        e->active_count--;
        e->pub.requests_finished++;
        if (finish == LLMRT_FINISH_CANCELLED)
            e->pub.requests_cancelled++;
        if (finish == LLMRT_FINISH_ERROR)
            e->pub.requests_failed++;
        pthread_mutex_unlock(&e->mu);
    }
    if (s->cb)
        s->cb(s->user, &ev);
    if (finish != LLMRT_FINISH_NONE) {
        if (s->refs == 0 && !s->cancel_held)
            seq_free(s);
        else
            add_zombie(e, s);
    }
}

/* End a sequence without a new token (cancel, error): release any held text first. */
static void finish_without_token(llmrt_engine *e, eseq *s, llmrt_finish_reason why,
                                 const char *error)
{
    text_reset(e);
    if (s->detok) {
        size_t n = 0;
        const char *t = llmrt_detok_flush(s->detok, &n);
        const char *o;
        size_t on;
        llmrt_stopper_push(s->stopper, t, n, &o, &on);
        text_add(e, o, on);
    }
    const char *o;
    size_t on;
    llmrt_stopper_flush(s->stopper, &o, &on);
    text_add(e, o, on);
    emit(e, s, -1, e->text, e->text_len, 0, 0, NULL, NULL, why, NULL, -1, error);
}

static int is_stop_token(const llmrt_engine *e, const eseq *s, int32_t t, int *by_eos)
{
    *by_eos = 0;
    if (!s->sp.ignore_eos)
        for (int32_t i = 0; i < e->n_eos; i++)
            if (e->eos[i] == t)
                return *by_eos = 1, 1;
    for (int32_t i = 0; i < s->sp.n_stop_ids; i++)
        if (s->stop_ids[i] == t)
            return 1;
    return 0;
}

/* A sampled token reached the host: append it, detokenize, check every stop rule, emit. */
static void accept_token(llmrt_engine *e, eseq *s, int32_t t, float lp, int32_t n_top,
                         const int32_t *top_ids, const float *top_lps)
{
    s->tokens[s->n_prompt + s->n_generated] = t;
    s->n_generated++;
    if (s->placeholder)
        s->placeholder = 0; /* the launched step already counted this token */
    else
        s->sched.n_tokens++;
    pthread_mutex_lock(&e->mu);
    e->pub.generated_tokens++;
    pthread_mutex_unlock(&e->mu);

    llmrt_finish_reason fin = LLMRT_FINISH_NONE;
    int32_t stop_token = -1;
    int by_eos = 0;
    int checks = s->n_generated >= s->sp.min_tokens;
    if (checks && is_stop_token(e, s, t, &by_eos)) {
        fin = LLMRT_FINISH_STOP;
        stop_token = t;
    } else if (s->n_generated >= s->sp.max_tokens ||
               s->n_prompt + s->n_generated >= e->max_model_len) {
        fin = LLMRT_FINISH_LENGTH;
    }
    text_reset(e);
    const char *stop_reason = NULL;
    if (s->detok) {
        const char *piece = "";
        size_t n = 0;
        if (fin != LLMRT_FINISH_STOP) { /* the text of a stop token is never part of the output */
            llmrt_error derr = {0};
            if (llmrt_detok_push(s->detok, t, &piece, &n, &derr) != LLMRT_OK)
                piece = "", n = 0;
        }
        const char *o;
        size_t on;
        int32_t m = -1;
        if (checks) {
            m = llmrt_stopper_push(s->stopper, piece, n, &o, &on);
        } else {
            o = piece, on = n;
        }
        text_add(e, o, on);
        if (m >= 0) {
            fin = LLMRT_FINISH_STOP;
            stop_token = -1;
            stop_reason = llmrt_stopper_matched(s->stopper);
        } else if (fin != LLMRT_FINISH_NONE) {
            const char *ft = llmrt_detok_flush(s->detok, &n);
            m = llmrt_stopper_push(s->stopper, ft, n, &o, &on);
            text_add(e, o, on);
            if (m >= 0) {
                fin = LLMRT_FINISH_STOP;
                stop_token = -1;
                stop_reason = llmrt_stopper_matched(s->stopper);
            } else {
                llmrt_stopper_flush(s->stopper, &o, &on);
                text_add(e, o, on);
            }
        }
    }
    emit(e, s, t, e->text, e->text_len, lp, n_top, top_ids, top_lps, fin, stop_reason,
         stop_token, NULL);
}

/* ---------------------------------------------------------------- failure */

/* Every request ends with FINISH_ERROR; the engine takes no more. */
static void fail_all(llmrt_engine *e, const char *msg)
{
    pthread_mutex_lock(&e->mu);
    e->failed = 1;
    e->pub.failed = 1;
    eseq *inbox = e->inbox;
    e->inbox = e->inbox_tail = NULL;
    e->n_cancels = 0;
    e->work_pending = 0;
    pthread_mutex_unlock(&e->mu);
    for (eseq *s = inbox, *nx; s; s = nx) {
        nx = s->next;
        pthread_mutex_lock(&e->mu);
        e->active_count++;
        pthread_mutex_unlock(&e->mu);
        finish_without_token(e, s, LLMRT_FINISH_ERROR, msg);
    }
    for (int f = 0; f < 2; f++)
        e->fl[f].active = 0;
    e->cur = -1;
    for (int32_t i = 0; i < e->n_zombies; i++)
        e->zombies[i]->refs = 0;
    /* Running and waiting sequences. */
    while (e->sched.n_running > 0 || e->sched.n_waiting > 0) {
        llmrt_sched_seq *q = e->sched.n_running ? e->sched.running[0] : e->sched.waiting[0];
        eseq *s = q->owner;
        s->refs = 0;
        s->placeholder = 0;
        finish_without_token(e, s, LLMRT_FINISH_ERROR, msg);
    }
    reap_zombies(e, 1); /* the dropped cancel lists hold no one any more */
    publish(e);
}

/* ---------------------------------------------------------------- one step: host side */

static int row_needs_host(const llmrt_engine *e, const eseq *s)
{
    if (s->sp.logprobs >= 0 || llmrt_sampler_has_penalties(&s->sp))
        return 1;
    if (s->sp.temperature >= 1e-5f)
        return e->bvt->sample == NULL;
    return e->bvt->argmax == NULL && e->bvt->sample == NULL;
}

static int32_t graph_bucket(const llmrt_engine *e, int32_t n)
{
    int32_t b = 1;
    while (b < n)
        b *= 2;
    return b < e->graph_max_rows ? b : e->graph_max_rows;
}

/* Fill half h's inputs for flight f (items set). */
static void fill_inputs(llmrt_engine *e, flight *f, int32_t *max_seq_len, int32_t *max_q)
{
    const int h = f->half;
    int32_t n_seqs = f->n_rows, n_tok = 0, width = 0, mq = 0, ms = 0;
    for (int32_t i = 0; i < f->n_items; i++) {
        n_tok += f->items[i].n_new;
        int32_t len = f->items[i].start + f->items[i].n_new;
        int32_t w = (len + e->kv.block_size - 1) / e->kv.block_size;
        width = w > width ? w : width;
        mq = f->items[i].n_new > mq ? f->items[i].n_new : mq;
        ms = len > ms ? len : ms;
    }
    int32_t pad = f->n_rows - f->n_items; /* graph padding: one token each */
    if (f->graph)
        width = e->max_bt_width;
    if (width < 1)
        width = 1;
    llmrt_step_layout_make(&f->lay, n_tok + pad, n_seqs, width);
    const llmrt_step_layout *L = &f->lay;
    int32_t *tok = llmrt_step_host_i32(&e->sb, h, L->token_ids);
    int32_t *pos = llmrt_step_host_i32(&e->sb, h, L->positions);
    int32_t *slot = llmrt_step_host_i32(&e->sb, h, L->slot_mapping);
    int32_t *qs = llmrt_step_host_i32(&e->sb, h, L->query_start);
    int32_t *lens = llmrt_step_host_i32(&e->sb, h, L->seq_lens);
    int32_t *lrows = llmrt_step_host_i32(&e->sb, h, L->logits_rows);
    int32_t *bt = llmrt_step_host_i32(&e->sb, h, L->block_tables);
    llmrt_sample_params *sp =
        (llmrt_sample_params *)((char *)e->sb.in.host[h] + L->sample_params);
    int32_t row = 0;
    qs[0] = 0;
    f->any_host = 0;
    for (int32_t i = 0; i < f->n_items; i++) {
        const llmrt_sched_item *it = &f->items[i];
        eseq *s = it->seq->owner;
        for (int32_t j = 0; j < it->n_new; j++, row++) {
            int32_t p = it->start + j;
            tok[row] = s->tokens[p];
            pos[row] = p;
            slot[row] = llmrt_kv_slot(&e->kv, &s->sched.table, p);
        }
        qs[i + 1] = row;
        int32_t len = it->start + it->n_new;
        lens[i] = len;
        lrows[i] = row - 1;
        int32_t nb = (len + e->kv.block_size - 1) / e->kv.block_size;
        memcpy(bt + (size_t)i * (size_t)width, s->sched.table.ids, sizeof *bt * (size_t)nb);
        memset(bt + (size_t)i * (size_t)width + nb, 0, sizeof *bt * (size_t)(width - nb));
        llmrt_sample_params *q = &sp[i];
        memset(q, 0, sizeof *q);
        q->temperature = s->sp.temperature >= 1e-5f ? s->sp.temperature : 0.0f;
        q->top_k = s->sp.top_k;
        q->top_p = s->sp.top_p;
        q->min_p = s->sp.min_p;
        /* the token sampled here is generated token number len - n_prompt */
        q->uniform = llmrt_sampler_uniform(s->seed, (uint64_t)(len - s->n_prompt));
        f->row_host[i] = it->samples && row_needs_host(e, s);
        f->any_host |= f->row_host[i];
    }
    for (int32_t i = f->n_items; i < f->n_rows; i++, row++) { /* padding rows */
        tok[row] = 0;
        pos[row] = 0;
        slot[row] = -1;
        qs[i + 1] = row + 1;
        lens[i] = 1;
        lrows[i] = row;
        memset(bt + (size_t)i * (size_t)width, 0, sizeof *bt * (size_t)width);
        memset(&sp[i], 0, sizeof sp[i]);
        f->row_host[i] = 0;
    }
    f->n_tokens = row;
    *max_seq_len = f->graph ? e->max_model_len : ms;
    *max_q = f->graph ? 1 : mq;
}


/* Which device op samples this flight: 0 none (all on the host), 1 argmax, 2 sample, 3 the
 * model's forward_argmax (every row greedy on the device and none sampled on the host, which
 * would read the logits: the model may find the argmax without them). A captured graph is
 * keyed by this op, so steps of the two argmax kinds never replay each other's graph. */
static int pick_device_op(const llmrt_engine *e, const flight *f)
{
    int any_dev = 0, any_temp = 0;
    for (int32_t i = 0; i < f->n_items; i++) {
        const eseq *s = f->items[i].seq->owner;
        if (!f->items[i].samples || f->row_host[i])
            continue;
        any_dev = 1;
        any_temp |= s->sp.temperature >= 1e-5f;
    }
    if (!any_dev)
        return 0;
    if (any_temp)
        return 2; /* row_needs_host guarantees sample exists for these rows */
    if (e->bvt->argmax && !f->any_host && LLMRT_VT_HAS(e->parts.model_vt, llmrt_model_vtable, forward_argmax))
        return 3;
    return e->bvt->argmax ? 1 : 2;
}

static llmrt_status enqueue_device_work(llmrt_engine *e, flight *f, const llmrt_batch *batch,
                                        llmrt_error *err)
{
    int32_t *out = e->sb.out.device[f->half];
    llmrt_status st;
    if (f->device_op == 3) {
        st = e->parts.model_vt->forward_argmax(e->parts.model, batch, &e->kv.view, e->sb.logits,
                                               out, err);
        if (st)
            llmrt_error_prefix(err, "model forward_argmax (%d tokens, %d sequences)",
                               batch->n_tokens, batch->n_seqs);
        return st;
    }
    st = e->parts.model_vt->forward(e->parts.model, batch, &e->kv.view, e->sb.logits, err);
    if (st) {
        llmrt_error_prefix(err, "model forward (%d tokens, %d sequences)", batch->n_tokens,
                           batch->n_seqs);
        return st;
    }
    if (f->device_op == 1)
        st = e->bvt->argmax(e->b, out, e->sb.logits, f->n_rows, e->info.vocab, err);
    else if (f->device_op == 2)
        st = e->bvt->sample(e->b, out, e->sb.logits,
                            (const llmrt_sample_params *)llmrt_step_dev(&e->sb, f->half,
                                                                        f->lay.sample_params),
                            f->n_rows, e->info.vocab, err);
    if (st)
        llmrt_error_prefix(err, "sampling on the device");
    return st;
}

/* The step inputs to the device. A chained step's token ids are not among them: its embedding
 * reads the previous step's sampled ids where that step wrote them (launch). */
static llmrt_status enqueue_inputs(llmrt_engine *e, flight *f, llmrt_error *err)
{
    return e->parts.memory.vt->to_device(e->parts.memory.m, &e->sb.in, f->half, f->lay.bytes,
                                         err);
}

static llmrt_status enqueue_outputs(llmrt_engine *e, flight *f, llmrt_error *err)
{
    if (!f->device_op)
        return LLMRT_OK;
    return e->parts.memory.vt->to_host(e->parts.memory.m, &e->sb.out, f->half,
                                       sizeof(int32_t) * (size_t)f->n_rows, err);
}

static graph_entry *find_graph(llmrt_engine *e, const flight *f)
{
    /* A graph bakes in addresses: those of the device buffers, and with the copies inside
     * it those of the host halves too. One graph per half when they differ. */
    int per_half = e->sb.in.device[0] != e->sb.in.device[1] ||
                   e->sb.out.device[0] != e->sb.out.device[1] ||
                   (e->copies_in_graph &&
                    (e->sb.in.host[0] != e->sb.in.host[1] || e->sb.out.host[0] != e->sb.out.host[1]));
    int half = per_half ? f->half : 0;
    for (int i = 0; i < e->n_graphs; i++) {
        graph_entry *g = &e->graphs[i];
        if (g->rows == f->n_rows && g->half == half && g->chained == f->chained &&
            g->op == f->device_op)
            return g;
    }
    if (e->n_graphs == MAX_GRAPHS)
        return NULL;
    graph_entry *g = &e->graphs[e->n_graphs];
    memset(g, 0, sizeof *g);
    g->rows = f->n_rows, g->half = half, g->chained = f->chained, g->op = f->device_op;
    return g;
}

/* Launch flight f: inputs already filled in its half. */
static llmrt_status launch(llmrt_engine *e, flight *f, const flight *prev, int32_t max_seq_len,
                           int32_t max_q, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const int h = f->half;
    const llmrt_step_layout *L = &f->lay;
    llmrt_batch batch;
    memset(&batch, 0, sizeof batch);
    batch.n_tokens = f->n_tokens;
    batch.n_seqs = f->n_rows;
    /* chained: the previous step's sampled ids, one per row in row order (its half's output
     * buffer stays untouched until the step after this one) */
    batch.token_ids = f->chained ? (int32_t *)e->sb.out.device[prev->half]
                                 : llmrt_step_dev(&e->sb, h, L->token_ids);
    batch.positions = llmrt_step_dev(&e->sb, h, L->positions);
    batch.slot_mapping = llmrt_step_dev(&e->sb, h, L->slot_mapping);
    batch.query_start = llmrt_step_dev(&e->sb, h, L->query_start);
    batch.seq_lens = llmrt_step_dev(&e->sb, h, L->seq_lens);
    batch.block_tables = llmrt_step_dev(&e->sb, h, L->block_tables);
    batch.logits_rows = llmrt_step_dev(&e->sb, h, L->logits_rows);
    batch.max_blocks_per_seq = L->bt_width;
    batch.max_seq_len = max_seq_len;
    batch.max_query_len = max_q;
    batch.all_logits = 0;
    const int zero_copy = (e->sb.mem_caps & LLMRT_MEM_CAP_ZERO_COPY) != 0;
    f->h2d_bytes = zero_copy ? 0 : L->bytes;
    f->d2h_bytes = 0;
    f->d2h_done = 0;
    TRY(e->bvt->event_record(e->b, e->ev[h][0], err));
    graph_entry *g = f->graph ? find_graph(e, f) : NULL;
    if (f->graph && !g)
        f->graph = 0;
    const int in_graph_copies = f->graph && e->copies_in_graph;
    if (!in_graph_copies)
        TRY(enqueue_inputs(e, f, err));
    TRY(e->bvt->event_record(e->b, e->ev[h][1], err));
    if (f->graph) {
        if (!g->g) { /* capture this shape once */
            llmrt_error gerr = {0};
            llmrt_status gs = e->bvt->graph_begin(e->b, &gerr);
            if (gs == LLMRT_OK) {
                if (in_graph_copies)
                    gs = enqueue_inputs(e, f, &gerr);
                if (gs == LLMRT_OK)
                    gs = enqueue_device_work(e, f, &batch, &gerr);
                if (gs == LLMRT_OK && in_graph_copies)
                    gs = enqueue_outputs(e, f, &gerr);
                llmrt_graph *cg = NULL;
                llmrt_status es = e->bvt->graph_end(e->b, &cg, gs == LLMRT_OK ? &gerr : NULL);
                if (gs == LLMRT_OK && es == LLMRT_OK && cg) {
                    g->g = cg;
                    e->n_graphs++;
                } else {
                    if (cg)
                        e->bvt->graph_destroy(e->b, cg);
                    if (gs == LLMRT_OK)
                        gs = es ? es : LLMRT_ERR_DEVICE;
                }
            }
            if (gs != LLMRT_OK) {
                /* Capture failed: say so once, run this and every later step eagerly. */
                if (!e->warned_graph)
                    LOG_WARN("CUDA graph capture of a %d-sequence decode step failed (%s); "
                             "running decode steps without graphs",
                             f->n_rows, gerr.msg[0] ? gerr.msg : llmrt_status_str(gs));
                e->warned_graph = 1;
                e->graphs_on = 0;
                f->graph = 0;
                if (in_graph_copies)
                    TRY(enqueue_inputs(e, f, err));
                TRY(enqueue_device_work(e, f, &batch, err));
                TRY(e->bvt->event_record(e->b, e->ev[h][2], err));
                goto outputs;
            }
        }
        st = e->bvt->graph_launch(e->b, g->g, err);
        if (st) {
            llmrt_error_prefix(err, "replaying the %d-sequence decode graph", f->n_rows);
            goto cleanup;
        }
        if (in_graph_copies && f->device_op) {
            f->d2h_done = 1;
            f->d2h_bytes = zero_copy ? 0 : sizeof(int32_t) * (size_t)f->n_rows;
        }
    } else {
        TRY(enqueue_device_work(e, f, &batch, err));
    }
    TRY(e->bvt->event_record(e->b, e->ev[h][2], err));
outputs:
    (void)0;
cleanup:
    return st;
}

/* Enqueue the flight's output copy (unless it is already in the graph) and its last event. */
static llmrt_status finish_launch(llmrt_engine *e, flight *f, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    if (!f->d2h_done) {
        TRY(enqueue_outputs(e, f, err));
        if (f->device_op && !(e->sb.mem_caps & LLMRT_MEM_CAP_ZERO_COPY))
            f->d2h_bytes = sizeof(int32_t) * (size_t)f->n_rows;
        f->d2h_done = 1;
    }
    TRY(e->bvt->event_record(e->b, e->ev[f->half][3], err));
cleanup:
    return st;
}

/* The host-side sampling of rows that need it (penalties, logprobs, no device op). */
static llmrt_status host_sample(llmrt_engine *e, flight *f, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const int32_t V = e->info.vocab;
    const int host_mem = (e->be_caps & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) != 0;
    /* Rows come to the host in chunks of the staging buffer's size. */
    int32_t chunk = host_mem ? f->n_items : e->sb.staging_rows;
    for (int32_t r0 = 0; r0 < f->n_items; r0 += chunk) {
        int32_t r1 = r0 + chunk < f->n_items ? r0 + chunk : f->n_items;
        int any = 0;
        for (int32_t i = r0; i < r1; i++)
            any |= f->row_host[i];
        if (!any)
            continue;
        const float *rows;
        if (host_mem) {
            rows = e->sb.logits + (size_t)r0 * (size_t)V;
        } else {
            size_t bytes = sizeof(float) * (size_t)V * (size_t)(r1 - r0);
            TRY(e->bvt->copy(e->b, e->sb.staging.device[0], e->sb.logits + (size_t)r0 * (size_t)V,
                             bytes, LLMRT_COPY_D2D, err));
            TRY(e->parts.memory.vt->to_host(e->parts.memory.m, &e->sb.staging, 0, bytes, err));
            TRY(e->bvt->synchronize(e->b, err));
            f->d2h_bytes += (e->sb.mem_caps & LLMRT_MEM_CAP_ZERO_COPY) ? 0 : bytes;
            rows = e->sb.staging.host[0];
        }
        for (int32_t i = r0; i < r1; i++) {
            if (!f->row_host[i])
                continue;
            eseq *s = f->items[i].seq->owner;
            const float *raw = rows + (size_t)(i - r0) * (size_t)V;
            const float *use = raw;
            if (llmrt_sampler_has_penalties(&s->sp)) {
                memcpy(e->row_scratch, raw, sizeof(float) * (size_t)V);
                llmrt_sampler_apply_penalties(e->sampler, e->row_scratch, &s->sp, s->tokens,
                                              s->n_prompt, s->tokens + s->n_prompt,
                                              s->n_generated);
                use = e->row_scratch;
            }
            int32_t len = f->items[i].start + f->items[i].n_new;
            float u = llmrt_sampler_uniform(s->seed, (uint64_t)(len - s->n_prompt));
            int32_t t = llmrt_sampler_pick(e->sampler, use, &s->sp, u);
            e->sampled[i] = t;
            if (s->sp.logprobs >= 0)
                llmrt_sampler_logprobs(e->sampler, raw, t, s->sp.logprobs, &e->lp_buf[i],
                                       e->top_ids + (size_t)i * LLMRT_MAX_TOP_LOGPROBS,
                                       e->top_lps + (size_t)i * LLMRT_MAX_TOP_LOGPROBS);
        }
    }
cleanup:
    return st;
}

static double elapsed_ms(llmrt_engine *e, llmrt_event *a, llmrt_event *b)
{
    float ms = 0;
    llmrt_error err = {0};
    if (e->bvt->event_elapsed_ms(e->b, a, b, &ms, &err) != LLMRT_OK || !(ms >= 0))
        return 0;
    return ms;
}

/* Wait for flight f, deliver its tokens, report its timing. */
static llmrt_status collect(llmrt_engine *e, flight *f, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const int h = f->half;
    TRY(e->bvt->event_sync(e->b, e->ev[h][3], err));
    double t_out = llmrt_now_s();
    if (f->device_op) {
        const int32_t *out = e->sb.out.host[h];
        for (int32_t i = 0; i < f->n_items; i++)
            if (!f->row_host[i])
                e->sampled[i] = out[i];
    }
    if (f->any_host)
        TRY(host_sample(e, f, err));
    f->active = 0;
    if (e->cur >= 0 && &e->fl[e->cur] == f)
        e->cur = -1;

    llmrt_step_record rec;
    memset(&rec, 0, sizeof rec);
    rec.step = e->step_no++;
    rec.n_seqs = f->n_items;
    rec.n_tokens = f->n_tokens;
    rec.n_prefill_tokens = f->n_prefill;
    rec.n_decode_seqs = f->n_decode;
    rec.graph = f->graph;
    rec.async = f->chained;
    rec.t_start = f->t_start;
    rec.host_prepare_ms = (f->t_prepared - f->t_start) * 1e3;
    rec.h2d_ms = elapsed_ms(e, e->ev[h][0], e->ev[h][1]);
    rec.compute_ms = elapsed_ms(e, e->ev[h][1], e->ev[h][2]);
    rec.d2h_ms = elapsed_ms(e, e->ev[h][2], e->ev[h][3]);
    rec.gpu_busy_ms = rec.h2d_ms + rec.compute_ms + rec.d2h_ms;
    double from = e->t_prev_out > 0 ? e->t_prev_out : f->t_start;
    rec.wall_ms = (t_out - from) * 1e3;
    rec.idle_ms = rec.wall_ms > rec.gpu_busy_ms ? rec.wall_ms - rec.gpu_busy_ms : 0;
    rec.h2d_bytes = f->h2d_bytes;
    rec.d2h_bytes = f->d2h_bytes;
    e->t_prev_out = t_out;

    pthread_mutex_lock(&e->mu);
    e->pub.steps++;
    e->pub.busy_s += rec.wall_ms * 1e-3;
    e->pub.prefill_tokens += (uint64_t)f->n_prefill;
    pthread_mutex_unlock(&e->mu);

    for (int32_t i = 0; i < f->n_items; i++) {
        eseq *s = f->items[i].seq->owner;
        s->refs--;
        if (s->done || !f->items[i].samples)
            continue;
        int asked = s->sp.logprobs >= 0;
        int32_t n_top = asked ? s->sp.logprobs : 0;
        accept_token(e, s, e->sampled[i], asked ? e->lp_buf[i] : 0, n_top,
                     e->top_ids + (size_t)i * LLMRT_MAX_TOP_LOGPROBS,
                     e->top_lps + (size_t)i * LLMRT_MAX_TOP_LOGPROBS);
    }
    reap_zombies(e, 0);
    if (e->on_step)
        e->on_step(e->step_user, &rec);
cleanup:
    return st;
}

/* Shape bookkeeping shared by both ways of launching. */
static void count_rows(flight *f)
{
    f->n_prefill = f->n_decode = 0;
    for (int32_t i = 0; i < f->n_items; i++) {
        const llmrt_sched_item *it = &f->items[i];
        const eseq *s = it->seq->owner;
        if (it->n_new == 1 && it->start >= s->n_prompt)
            f->n_decode++;
        else
            f->n_prefill += it->n_new;
    }
}

static int all_sample(const flight *f)
{
    for (int32_t i = 0; i < f->n_items; i++)
        if (!f->items[i].samples)
            return 0;
    return 1;
}

static int active_count(llmrt_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int n = e->active_count;
    pthread_mutex_unlock(&e->mu);
    return n;
}

static int decode_only(const flight *f)
{
    for (int32_t i = 0; i < f->n_items; i++)
        if (f->items[i].n_new != 1 || !f->items[i].samples)
            return 0;
    return 1;
}

/* Can step N+1 be launched from the device-side ids of flight p, before collecting it?
 * Every sequence in p samples on the device, none stops by length at p, none is cancelled,
 * nobody waits to be admitted, and each one has room for one more token without
 * preemption. */
static int can_chain(llmrt_engine *e, const flight *p, int cancels_pending)
{
    if (!e->async_on || cancels_pending || p->any_host || !p->device_op)
        return 0;
    if (llmrt_sched_can_admit(&e->sched))
        return 0;
    if (e->sched.n_running != p->n_items)
        return 0;
    int32_t need = 0;
    for (int32_t i = 0; i < p->n_items; i++) {
        const eseq *s = p->items[i].seq->owner;
        if (!p->items[i].samples || s->done || s->placeholder)
            return 0;
        int32_t gen_after = s->n_generated + 1;
        if (gen_after >= s->sp.max_tokens || s->n_prompt + gen_after >= e->max_model_len)
            return 0;
        /* the next step computes the token sampled at p, at position n_tokens */
        need += llmrt_kv_blocks_needed(&e->kv, &s->sched.table, s->sched.n_tokens + 1);
    }
    return need <= e->kv.n_free;
}

/* Launch N+1 = the same sequences, one token each, ids from p's device output. */
static llmrt_status launch_chained(llmrt_engine *e, flight *p, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    flight *f = &e->fl[p->half ^ 1];
    f->t_start = llmrt_now_s();
    e->next_half = p->half;
    f->half = p->half ^ 1;
    f->chained = 1;
    f->n_items = p->n_items;
    for (int32_t i = 0; i < p->n_items; i++) {
        eseq *s = p->items[i].seq->owner;
        llmrt_kv_table_reserve(&e->kv, &s->sched.table, s->sched.n_tokens + 1, NULL);
        s->tokens[s->n_prompt + s->n_generated] = -1; /* filled when p is collected */
        s->placeholder = 1;
        s->sched.n_tokens++;
        f->items[i].seq = &s->sched;
        f->items[i].start = s->sched.n_tokens - 1;
        f->items[i].n_new = 1;
        f->items[i].samples = 1;
        s->sched.n_computed = s->sched.n_tokens;
        s->refs++;
    }
    f->graph = e->graphs_on && f->n_items <= e->graph_max_rows;
    f->n_rows = f->graph ? graph_bucket(e, f->n_items) : f->n_items;
    int32_t max_seq_len, max_q;
    fill_inputs(e, f, &max_seq_len, &max_q);
    count_rows(f);
    f->device_op = pick_device_op(e, f);
    /* Inputs shared between halves and copied asynchronously: wait until p consumed them. */
    if (e->in_shared_async)
        TRY(e->bvt->event_sync(e->b, e->ev[p->half][(e->sb.mem_caps & LLMRT_MEM_CAP_ZERO_COPY) ? 2 : 1], err));
    f->t_prepared = llmrt_now_s();
    f->active = 1;
    TRY(launch(e, f, p, max_seq_len, max_q, err));
    if (!e->out_shared)
        TRY(finish_launch(e, f, err));
cleanup:
    return st;
}

/* Take the inbox and the cancellations from other threads. */
static void drain_inbox(llmrt_engine *e, eseq ***cancels, int32_t *n_cancels)
{
    pthread_mutex_lock(&e->mu);
    eseq *in = e->inbox;
    e->inbox = e->inbox_tail = NULL;
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
            finish_without_token(e, s, LLMRT_FINISH_ERROR, err.msg);
            continue;
        }
        s->in_sched = 1;
    }
}

static void apply_cancels(llmrt_engine *e, eseq **cancels, int32_t n)
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
        finish_without_token(e, s, LLMRT_FINISH_CANCELLED, NULL);
    }
    reap_zombies(e, 0);
}

llmrt_status llmrt_engine_step(llmrt_engine *e, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    eseq **cancels = NULL;
    int32_t n_cancels = 0;
    pthread_mutex_lock(&e->mu);
    int failed = e->failed;
    pthread_mutex_unlock(&e->mu);
    if (failed)
        return llmrt_fail(err, LLMRT_ERR_STATE, "the engine has failed (see the earlier error)");
    double t0 = llmrt_now_s();
    drain_inbox(e, &cancels, &n_cancels);

    /* A step in the air: chain the next one behind it, or collect it first. */
    if (e->cur >= 0) {
        flight *p = &e->fl[e->cur];
        if (can_chain(e, p, n_cancels > 0)) {
            TRY(launch_chained(e, p, err));
            flight *f = &e->fl[p->half ^ 1];
            TRY(collect(e, p, err));
            if (e->out_shared) /* outputs share one host buffer: copy N+1's after reading N's */
                TRY(finish_launch(e, f, err));
            e->cur = f->half;
            e->next_half = f->half ^ 1;
            goto done;
        }
        TRY(collect(e, p, err));
    }
    apply_cancels(e, cancels, n_cancels);

    /* The synchronous path: schedule, launch, and collect now unless the next step may be
     * chained behind this one. */
    int32_t n_tok = 0, n_pre = 0;
    flight *f = &e->fl[e->next_half];
    int32_t n = llmrt_sched_schedule(&e->sched, f->items, &n_tok, &n_pre);
    if (n_pre && !e->warned_preempt) {
        LOG_WARN("KV cache full (%d blocks of %d tokens): preempted %d sequence(s) for "
                 "recomputation; raise cache.kv_tokens or lower scheduler.max_num_seqs",
                 llmrt_kv_usable_blocks(&e->kv), e->kv.block_size, n_pre);
        e->warned_preempt = 1;
    }
    if (n == 0) {
        e->t_prev_out = 0; /* idle: the next step's period starts with it */
        goto done;
    }
    f->t_start = t0;
    f->half = e->next_half;
    e->next_half ^= 1;
    f->chained = 0;
    f->n_items = n;
    for (int32_t i = 0; i < n; i++)
        ((eseq *)f->items[i].seq->owner)->refs++;
    f->graph = e->graphs_on && decode_only(f) && n <= e->graph_max_rows;
    f->n_rows = f->graph ? graph_bucket(e, n) : n;
    int32_t max_seq_len, max_q;
    fill_inputs(e, f, &max_seq_len, &max_q);
    count_rows(f);
    f->device_op = pick_device_op(e, f);
    f->t_prepared = llmrt_now_s();
    f->active = 1;
    e->cur = f->half;
    TRY(launch(e, f, NULL, max_seq_len, max_q, err));
    TRY(finish_launch(e, f, err));
    if (!e->async_on || f->any_host || !all_sample(f))
        TRY(collect(e, f, err));
done:
    /* Nobody left to read a step still in the air (all of its sequences ended): collect it
     * now, so has_work can go false. */
    if (e->cur >= 0 && active_count(e) == 0)
        TRY(collect(e, &e->fl[e->cur], err));
    free(cancels);
    publish(e);
    return LLMRT_OK;
cleanup:
    free(cancels);
    fail_all(e, err->msg);
    return st;
}

llmrt_status llmrt_engine_run(llmrt_engine *e, llmrt_error *err)
{
    while (llmrt_engine_has_work(e)) {
        llmrt_status st = llmrt_engine_step(e, err);
        if (st)
            return st;
    }
    return LLMRT_OK;
}

/* ---------------------------------------------------------------- create / destroy */

static const char *gib(uint64_t bytes, char *buf, size_t n)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, n, "%.2f GiB", (double)bytes / (double)(1ull << 30));
    else
        snprintf(buf, n, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    return buf;
}

/* Capacity in tokens from the device's memory (cache.gpu_memory_utilization). */
static llmrt_status gpu_capacity(llmrt_engine *e, uint64_t bytes_per_token, int64_t *tokens,
                                 llmrt_error *err)
{
    uint64_t free_b = e->dev.mem_free, total = e->dev.mem_total;
    if (e->bvt->mem_info) {
        llmrt_status st = e->bvt->mem_info(e->b, &free_b, &total, err);
        if (st) {
            llmrt_error_prefix(err, "measuring device memory for the KV cache");
            return st;
        }
    }
    if (total == 0)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "the backend reports no device memory size, so the KV cache cannot "
                          "be sized from cache.gpu_memory_utilization; set cache.kv_tokens");
    double util = e->set.gpu_memory_utilization;
    double used = (double)(total - (free_b < total ? free_b : total));
    double budget = util * (double)total - used;
    char a[32], b[32], c[32];
    if (budget < (double)bytes_per_token * e->set.block_size)
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          "no room for a KV cache: cache.gpu_memory_utilization = %.2f allows "
                          "%s of %s device memory, but %s is already used after loading the "
                          "model (raise cache.gpu_memory_utilization, or set cache.kv_tokens)",
                          util, gib((uint64_t)(util * (double)total), a, sizeof a),
                          gib(total, b, sizeof b), gib((uint64_t)used, c, sizeof c));
    /* whole blocks only, and one of them is the reserved zero block */
    int64_t blocks = (int64_t)(budget / ((double)bytes_per_token * e->set.block_size)) - 1;
    if (blocks < 1)
        return llmrt_fail(err, LLMRT_ERR_LIMIT,
                          "no room for a KV cache: cache.gpu_memory_utilization = %.2f leaves "
                          "%.0f bytes after loading, less than two blocks of %d tokens (raise "
                          "cache.gpu_memory_utilization, or set cache.kv_tokens)",
                          util, budget, e->set.block_size);
    *tokens = blocks * e->set.block_size;
    snprintf(e->capacity_source, sizeof e->capacity_source,
             "cache.gpu_memory_utilization = %.2f", util);
    return LLMRT_OK;
}

llmrt_status llmrt_engine_create_from_parts(const llmrt_engine_parts *parts,
                                            const llmrt_engine_settings *settings,
                                            const llmrt_engine_options *opts,
                                            llmrt_engine **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    double t0 = llmrt_now_s();
    llmrt_engine *e = calloc(1, sizeof *e);
    if (!e) {
        if (parts->release)
            parts->release(parts->release_ctx);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    }
    e->parts = *parts;
    e->set = *settings;
    if (opts)
        e->opts = *opts;
    e->cur = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->bvt = parts->backend.vt;
    e->b = parts->backend.b;
    e->on_step = e->opts.on_step;
    e->step_user = e->opts.step_user;
    if (!e->bvt || !e->b || !parts->memory.vt || !parts->model_vt || !parts->model)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "engine: backend, memory plugin and model are required");
    e->be_caps = e->bvt->caps(e->b);
    {
        llmrt_error derr = {0};
        if (e->bvt->device_info(e->b, &e->dev, &derr) != LLMRT_OK)
            snprintf(e->dev.name, sizeof e->dev.name, "unknown device");
    }
    parts->model_vt->info(parts->model, &e->info);
    const llmrt_model_info *mi = &e->info;
    if (mi->n_layers <= 0 || mi->n_kv_heads <= 0 || mi->head_dim <= 0 || mi->vocab <= 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "the model reports an unusable geometry (layers %d, kv heads %d, head dim %d, "
             "vocab %d)",
             mi->n_layers, mi->n_kv_heads, mi->head_dim, mi->vocab);
    const llmrt_engine_settings *S = &e->set;
    if (S->block_size < 1 || S->max_num_seqs < 1 || S->max_num_batched_tokens < 1)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "engine settings: cache.block_size %d, scheduler.max_num_seqs %d, "
             "scheduler.max_num_batched_tokens %d (each must be >= 1)",
             S->block_size, S->max_num_seqs, S->max_num_batched_tokens);
    if (parts->n_eos > 0) {
        e->eos = malloc(sizeof *e->eos * (size_t)parts->n_eos);
        TRY_ALLOC(err, e->eos, "eos ids");
        memcpy(e->eos, parts->eos_ids, sizeof *e->eos * (size_t)parts->n_eos);
        e->n_eos = parts->n_eos;
    }

    /* KV element type: auto = f32 where device memory is host memory (cpu), else the model's
     * f16/bf16 */
    llmrt_dtype kv_dtype = S->kv_dtype;
    if (kv_dtype == LLMRT_DTYPE_INVALID)
        kv_dtype = !(e->be_caps & LLMRT_BACKEND_CAP_HOST_IS_DEVICE) &&
                           (mi->weight_dtype == LLMRT_DTYPE_F16 ||
                            mi->weight_dtype == LLMRT_DTYPE_BF16)
                       ? mi->weight_dtype
                       : LLMRT_DTYPE_F32; /* the rule `llmrt logits` uses too */
    uint64_t per_token = llmrt_kv_bytes_per_token(mi->n_layers, mi->n_kv_heads, mi->head_dim,
                                                  kv_dtype);

    /* Longest sequence: the user's, else the model's; capacity may lower it below. */
    int64_t want_len = S->max_model_len > 0 ? S->max_model_len : mi->max_position;
    if (S->max_model_len > 0 && mi->max_position > 0 && S->max_model_len > mi->max_position)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "cache.max_model_len = %d is longer than the model's max_position_embeddings = "
             "%d (use at most %d, or 0 for the model's own)",
             S->max_model_len, mi->max_position, mi->max_position);

    int64_t capacity = 0;
    int gpu_auto = S->kv_tokens <= 0 && e->dev.is_gpu;
    if (S->kv_tokens > 0) {
        capacity = S->kv_tokens;
        snprintf(e->capacity_source, sizeof e->capacity_source, "cache.kv_tokens");
    } else if (!gpu_auto) {
        capacity = CPU_DEFAULT_KV_TOKENS > S->max_model_len ? CPU_DEFAULT_KV_TOKENS
                                                            : S->max_model_len;
        snprintf(e->capacity_source, sizeof e->capacity_source,
                 "default for the cpu backend");
    }
    if (want_len <= 0 && capacity <= 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG,
             "the model reports no max_position_embeddings; set cache.max_model_len");
    if (want_len <= 0)
        want_len = capacity;

    /* Step buffers first, so a GPU-sized cache accounts for them. */
    int64_t len_bound = capacity > 0 && capacity < want_len ? capacity : want_len;
    int32_t width = (int32_t)((len_bound + S->block_size - 1) / S->block_size);
    TRY(llmrt_step_buffers_init(&e->sb, &parts->backend, &parts->memory,
                                S->max_num_batched_tokens, S->max_num_seqs, width, mi->vocab,
                                err));
    e->sb_ok = 1;
    if (gpu_auto)
        TRY(gpu_capacity(e, per_token, &capacity, err));
    int64_t blocks = (capacity + S->block_size - 1) / S->block_size;
    if (blocks > INT32_MAX - 1)
        blocks = INT32_MAX - 1;
    capacity = blocks * S->block_size;
    if (S->max_model_len > 0 && S->max_model_len > capacity)
        FAIL(err, LLMRT_ERR_LIMIT,
             "cache.max_model_len = %d does not fit in the KV cache of %lld tokens (%s); raise "
             "cache.kv_tokens or lower cache.max_model_len",
             S->max_model_len, (long long)capacity, e->capacity_source);
    e->max_model_len = (int32_t)(want_len < capacity ? want_len : capacity);
    e->max_bt_width = (e->max_model_len + S->block_size - 1) / S->block_size;
    if (e->max_bt_width > width)
        FAIL(err, LLMRT_ERR_INTERNAL, "block table width %d > allocated %d", e->max_bt_width,
             width);
    TRY(llmrt_kv_init(&e->kv, &parts->backend, mi->n_layers, mi->n_kv_heads, mi->head_dim,
                      S->block_size, (int32_t)blocks, kv_dtype, err));
    e->kv_ok = 1;
    TRY(llmrt_sched_init(&e->sched, &e->kv, S->max_num_seqs, S->max_num_batched_tokens, err));
    e->sched_ok = 1;
    TRY(llmrt_sampler_new(mi->vocab, &e->sampler, err));
    e->row_scratch = malloc(sizeof(float) * (size_t)mi->vocab);
    e->sampled = calloc((size_t)S->max_num_seqs, sizeof *e->sampled);
    e->lp_buf = calloc((size_t)S->max_num_seqs, sizeof *e->lp_buf);
    e->top_ids = calloc((size_t)S->max_num_seqs * LLMRT_MAX_TOP_LOGPROBS, sizeof *e->top_ids);
    e->top_lps = calloc((size_t)S->max_num_seqs * LLMRT_MAX_TOP_LOGPROBS, sizeof *e->top_lps);
    TRY_ALLOC(err, e->row_scratch && e->sampled && e->lp_buf && e->top_ids && e->top_lps,
              "sampling buffers");
    for (int f = 0; f < 2; f++) {
        e->fl[f].items = calloc((size_t)S->max_num_seqs, sizeof *e->fl[f].items);
        e->fl[f].row_host = calloc((size_t)S->max_num_seqs, 1);
        TRY_ALLOC(err, e->fl[f].items && e->fl[f].row_host, "step bookkeeping");
        for (int k = 0; k < 4; k++)
            TRY(e->bvt->event_create(e->b, &e->ev[f][k], err));
    }

    /* What the backend and memory path allow. */
    const uint32_t mc = e->sb.mem_caps;
    e->out_shared = e->sb.out.host[0] == e->sb.out.host[1];
    e->in_shared_async = e->sb.in.host[0] == e->sb.in.host[1] &&
                         e->sb.in.path != LLMRT_MEM_PATH_PAGEABLE;
    e->async_on = S->async_scheduling && (e->be_caps & LLMRT_BACKEND_CAP_ASYNC) &&
                  !(e->out_shared && (mc & LLMRT_MEM_CAP_ZERO_COPY));
    e->graphs_on = S->cuda_graphs && (e->be_caps & LLMRT_BACKEND_CAP_GRAPHS) &&
                   e->bvt->graph_begin && e->bvt->graph_end && e->bvt->graph_launch &&
                   e->bvt->graph_destroy;
    e->copies_in_graph = (mc & LLMRT_MEM_CAP_COPIES_CAPTURABLE) &&
                         (mc & LLMRT_MEM_CAP_DOUBLE_BUFFERED);
    e->graph_max_rows = S->max_num_seqs < S->max_num_batched_tokens ? S->max_num_seqs
                                                                     : S->max_num_batched_tokens;
    {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        e->seed_base = llmrt_sampler_mix((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
    }

    /* Published facts. */
    llmrt_engine_stats *P = &e->pub;
    P->kv_capacity_tokens = (int64_t)llmrt_kv_usable_blocks(&e->kv) * S->block_size;
    P->kv_blocks_total = llmrt_kv_usable_blocks(&e->kv);
    P->kv_block_size = S->block_size;
    P->kv_bytes = e->kv.bytes;
    snprintf(P->kv_dtype, sizeof P->kv_dtype, "%s", llmrt_dtype_name(kv_dtype));
    snprintf(P->kv_capacity_source, sizeof P->kv_capacity_source, "%s", e->capacity_source);
    P->max_model_len = e->max_model_len;
    P->max_num_seqs = S->max_num_seqs;
    P->max_num_batched_tokens = S->max_num_batched_tokens;
    P->async_scheduling = e->async_on;
    P->cuda_graphs = e->graphs_on;
    snprintf(P->backend, sizeof P->backend, "%s", parts->backend.name ? parts->backend.name : "?");
    snprintf(P->device, sizeof P->device, "%s", e->dev.name);
    snprintf(P->memory_plugin, sizeof P->memory_plugin, "%s",
             parts->memory.name ? parts->memory.name : "?");
    snprintf(P->model_arch, sizeof P->model_arch, "%s", mi->arch);
    snprintf(P->model_path, sizeof P->model_path, "%s", parts->model_path ? parts->model_path : "");
    snprintf(P->quant, sizeof P->quant, "%s", parts->quant_name ? parts->quant_name : "none");
    P->weight_bytes = mi->weight_bytes;
    if (e->bvt->mem_info) {
        llmrt_error merr = {0};
        uint64_t fr = 0, tot = 0;
        if (e->bvt->mem_info(e->b, &fr, &tot, &merr) == LLMRT_OK)
            P->device_mem_total = tot, P->device_mem_free = fr;
    } else {
        P->device_mem_total = e->dev.mem_total;
        P->device_mem_free = e->dev.mem_free;
    }
    P->load_time_s = parts->load_time_s + (llmrt_now_s() - t0);
    publish(e);
    if (!e->opts.quiet) {
        char a[32];
        LOG_INFO("KV cache: %lld tokens (%d blocks of %d), %s %s (%s); max_model_len %d",
                 (long long)P->kv_capacity_tokens, P->kv_blocks_total, S->block_size,
                 gib(e->kv.bytes, a, sizeof a), P->kv_dtype, e->capacity_source,
                 e->max_model_len);
        LOG_INFO("engine: backend %s (%s), memory path %s, async scheduling %s, graphs %s",
                 P->backend, P->device, P->memory_path, e->async_on ? "on" : "off",
                 e->graphs_on ? "on" : "off");
    }
    *out = e;
    return LLMRT_OK;
cleanup:
    llmrt_engine_destroy(e);
    return st;
}

void llmrt_engine_destroy(llmrt_engine *e)
{
    if (!e)
        return;
    if (e->bvt && e->b) {
        llmrt_error err = {0};
        e->bvt->synchronize(e->b, &err);
    }
    /* Everything still held ends as cancelled; results in the air are dropped. */
    for (int f = 0; f < 2; f++)
        e->fl[f].active = 0;
    e->cur = -1;
    for (int32_t i = 0; i < e->n_zombies; i++)
        e->zombies[i]->refs = 0;
    eseq **cancels = NULL;
    int32_t n_cancels = 0;
    if (e->sched_ok) {
        drain_inbox(e, &cancels, &n_cancels);
        free(cancels);
        while (e->sched.n_running > 0 || e->sched.n_waiting > 0) {
            llmrt_sched_seq *q = e->sched.n_running ? e->sched.running[0] : e->sched.waiting[0];
            eseq *s = q->owner;
            s->refs = 0;
            finish_without_token(e, s, LLMRT_FINISH_CANCELLED, NULL);
        }
    }
    reap_zombies(e, 1);
    free(e->zombies);
    for (int i = 0; i < e->n_graphs; i++)
        if (e->graphs[i].g)
            e->bvt->graph_destroy(e->b, e->graphs[i].g);
    for (int f = 0; f < 2; f++) {
        for (int k = 0; k < 4; k++)
            if (e->ev[f][k])
                e->bvt->event_destroy(e->b, e->ev[f][k]);
        free(e->fl[f].items);
        free(e->fl[f].row_host);
    }
    llmrt_sampler_free(e->sampler);
    free(e->row_scratch);
    free(e->sampled);
    free(e->lp_buf);
    free(e->top_ids);
    free(e->top_lps);
    if (e->sched_ok)
        llmrt_sched_free(&e->sched);
    if (e->kv_ok)
        llmrt_kv_free(&e->kv);
    if (e->sb_ok)
        llmrt_step_buffers_free(&e->sb);
    free(e->eos);
    free(e->cancels);
    free(e->text);
    HASH_CLEAR(hh, e->by_id);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    if (e->parts.release)
        e->parts.release(e->parts.release_ctx);
    free(e);
}
