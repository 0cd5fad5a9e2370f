/* serve_generate.c — /v1/completions and /v1/chat/completions: one HTTP request becomes
 * n_prompts × n engine requests (its "choices"), each fed by the engine's continuous
 * batching; their tokens come back as a whole response or as a server-sent-event stream.
 *
 * Who does what:
 *  - connection thread (MHD): parse, tokenize, check lengths and the queue, submit; then
 *    wait for events (non-streaming) or hand MHD a reader that waits for them (streaming);
 *    format every chunk and response.
 *  - stepping thread (engine token callback, on_token): record TTFT/ITL/e2e, copy the event
 *    into the request's queue, wake the connection thread. Nothing else, so a slow client
 *    never slows a step.
 * Chat replies go through the model family's reply parser (llmrt_engine_chat_parser_new) on
 * the connection thread: its content, reasoning and tool calls become message fields, or
 * delta chunks as they are known.
 * Lifetime: a serve_gen is reference-counted: the HTTP request holds one reference, a
 * streaming response one, and every submitted choice one until its final event. A client
 * that disconnects (socket poll, or MHD's completed callback with an error) cancels its
 * choices; the engine frees their KV blocks and sends their final events, which drop the
 * last references. */
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "serve.h"
#include "serve_response.h"

#define WAIT_SLICE_MS 200 /* how often a waiting connection checks for a gone client */

/* One token event, copied off the stepping thread. */
typedef struct serve_event {
    struct serve_event *next;
    int32_t choice;
    int32_t token; /* -1: no token */
    float logprob;
    int32_t n_top;
    int32_t top_ids[LLMRT_MAX_TOP_LOGPROBS];
    float top_lps[LLMRT_MAX_TOP_LOGPROBS];
    size_t text_len;
    char text[]; /* [text_len] */
} serve_event;

typedef struct serve_choice {
    serve_gen *g;
    int32_t index;    /* choice index in the response */
    int32_t prompt;   /* which prompt it continues */
    uint64_t engine_id;
    int submitted;
    /* stepping thread only */
    int seen_first;
    double t_first, t_last;
    /* written once under g->mu by the final event, read after final_seen was seen */
    int final_seen;
    llmrt_finish_reason finish;
    int32_t stop_token;
    char *stop_reason;
    char *error;
    int32_t completion_tokens;
    int32_t cached_tokens;  /* prompt tokens found in the prefix cache */
    /* connection thread only */
    int done;
    char *text;       /* whole text (non-streaming) or the delta not yet sent (streaming);
                         chat: the reply's content */
    size_t len, cap;
    int64_t text_total; /* bytes of text released so far (completions text_offset) */
    json_t *lp;       /* logprobs: whole, or not yet sent */
    /* chat: the reply parser and what it found beside content */
    llmrt_chat_parser *parser;
    char *reason;     /* reasoning: whole, or not yet sent */
    size_t rlen, rcap;
    int any_reasoning;
    struct serve_call *calls; /* [n_calls] */
    int n_calls, calls_cap;
} serve_choice;

/* A tool call of a chat reply. */
typedef struct serve_call {
    char id[48];      /* "call_..." */
    char *name;
    char *args;       /* arguments JSON: whole, or (streaming) the part not yet sent */
    size_t len, cap;
    int announced;    /* streaming: its first delta (id, type, name) was sent */
} serve_call;

struct serve_gen {
    llmrt_server *srv;
    struct MHD_Connection *conn;
    serve_conn *cx;
    llmrt_serve_request *req;
    llmrt_serve_kind kind;
    char id[64];
    int64_t created;
    double t_arrival;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;                  /* under mu */
    serve_event *head, *tail;  /* under mu */
    int n_final;               /* under mu: choices whose final event arrived */
    int lost;                  /* under mu: an event could not be stored (out of memory) */
    int cancelled;             /* under mu */
    serve_choice *choices;     /* [n_choices] */
    int n_choices;
    int n_done;                /* connection thread */
    int64_t prompt_tokens;     /* usage: each prompt counted once */
    /* streaming output not yet handed to MHD */
    char *out;
    size_t out_len, out_off, out_cap;
    int ended;
    int failed;                /* building output ran out of memory */
};

/* ---- lifetime ---- */

static void gen_free(serve_gen *g)
{
    for (serve_event *e = g->head, *next; e; e = next) {
        next = e->next;
        free(e);
    }
    for (int i = 0; i < g->n_choices; i++) {
        serve_choice *c = &g->choices[i];
        free(c->stop_reason);
        free(c->error);
        free(c->text);
        json_decref(c->lp);
        llmrt_chat_parser_free(c->parser);
        free(c->reason);
        for (int k = 0; k < c->n_calls; k++) {
            free(c->calls[k].name);
            free(c->calls[k].args);
        }
        free(c->calls);
    }
    free(g->choices);
    free(g->out);
    llmrt_serve_request_free(g->req);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

static void gen_release(serve_gen *g, int n)
{
    pthread_mutex_lock(&g->mu);
    g->refs -= n;
    int last = g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last)
        gen_free(g);
}

/* Cancel every submitted choice whose final event has not arrived. */
static void gen_cancel(serve_gen *g)
{
    uint64_t *ids = malloc((size_t)g->n_choices * sizeof *ids);
    int n = 0;
    pthread_mutex_lock(&g->mu);
    g->cancelled = 1;
    for (int i = 0; ids && i < g->n_choices; i++)
        if (g->choices[i].submitted && !g->choices[i].final_seen)
            ids[n++] = g->choices[i].engine_id;
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < n; i++)
        llmrt_engine_cancel(g->srv->engine, ids[i]);
    free(ids);
}

void serve_generate_usage(serve_gen *g, int64_t *prompt, int64_t *completion)
{
    int64_t c = 0;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n_choices; i++)
        c += g->choices[i].completion_tokens;
    pthread_mutex_unlock(&g->mu);
    *prompt = g->prompt_tokens;
    *completion = c;
}

void serve_generate_done(serve_gen *g, int completed_ok)
{
    int64_t most = 0;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n_choices; i++)
        if (g->choices[i].completion_tokens > most)
            most = g->choices[i].completion_tokens;
    pthread_mutex_unlock(&g->mu);
    llmrt_serve_metrics_max_generation(g->srv->metrics, most);
    if (!completed_ok)
        gen_cancel(g);
    gen_release(g, 1);
}

/* ---- the stepping thread's side ---- */

static void on_token(void *user, const llmrt_token_event *ev)
{
    serve_choice *c = user;
    serve_gen *g = c->g;
    llmrt_server *s = g->srv;
    int final = ev->finish != LLMRT_FINISH_NONE;

    if (ev->token >= 0) {
        if (!c->seen_first) {
            llmrt_serve_metrics_ttft(s->metrics, ev->time_s - g->t_arrival);
            c->t_first = ev->time_s;
        } else {
            llmrt_serve_metrics_itl(s->metrics, ev->time_s - c->t_last);
        }
        c->seen_first = 1;
        c->t_last = ev->time_s;
    }
    if (final) {
        llmrt_serve_metrics_finished(s->metrics, ev->finish, ev->prompt_tokens,
                                     ev->completion_tokens, ev->time_s - g->t_arrival);
        double ts = ev->time_scheduled_s;
        llmrt_serve_phases ph = {
            .queue_s = ts > 0 ? ts - g->t_arrival : -1,
            .prefill_s = ts > 0 && c->seen_first ? c->t_first - ts : -1,
            .decode_s = c->seen_first ? c->t_last - c->t_first : -1,
            .inference_s = ts > 0 && c->seen_first ? c->t_last - ts : -1,
        };
        llmrt_serve_metrics_phases(s->metrics, &ph);
    }

    serve_event *e = NULL;
    if (ev->token >= 0 || ev->text_len) {
        e = malloc(sizeof *e + ev->text_len);
        if (e) {
            e->next = NULL;
            e->choice = c->index;
            e->token = ev->token;
            e->logprob = ev->logprob;
            e->n_top = ev->n_top < 0 ? 0
                       : ev->n_top > LLMRT_MAX_TOP_LOGPROBS ? LLMRT_MAX_TOP_LOGPROBS
                                                            : ev->n_top;
            if (e->n_top) {
                memcpy(e->top_ids, ev->top_ids, (size_t)e->n_top * sizeof *e->top_ids);
                memcpy(e->top_lps, ev->top_logprobs, (size_t)e->n_top * sizeof *e->top_lps);
            }
            e->text_len = ev->text_len;
            if (ev->text_len)
                memcpy(e->text, ev->text, ev->text_len);
        }
    }
    char *stop_reason = final && ev->stop_reason ? strdup(ev->stop_reason) : NULL;
    char *error = final && ev->error ? strdup(ev->error) : NULL;

    pthread_mutex_lock(&g->mu);
    if (e) {
        if (g->tail)
            g->tail->next = e;
        else
            g->head = e;
        g->tail = e;
    } else if (ev->token >= 0 || ev->text_len) {
        g->lost = 1;
    }
    if (final) {
        c->final_seen = 1;
        c->finish = ev->finish;
        c->stop_token = ev->stop_token;
        c->stop_reason = stop_reason;
        c->error = error;
        c->completion_tokens = ev->completion_tokens;
        c->cached_tokens = ev->cached_tokens;
        g->n_final++;
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);

    if (final) {
        atomic_fetch_sub(&s->queued, 1);
        gen_release(g, 1);
    }
}

/* ---- the connection thread's side ---- */

static int append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1)
            c *= 2;
        char *g = realloc(*buf, c);
        if (!g)
            return -1;
        *buf = g;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

/* ---- the reply parser's sink (connection thread): chat replies ---- */

static llmrt_status reply_content(void *ctx, const char *s, size_t n)
{
    serve_choice *c = ctx;
    return append(&c->text, &c->len, &c->cap, s, n) ? LLMRT_ERR_NOMEM : LLMRT_OK;
}

static llmrt_status reply_reasoning(void *ctx, const char *s, size_t n)
{
    serve_choice *c = ctx;
    c->any_reasoning = 1;
    return append(&c->reason, &c->rlen, &c->rcap, s, n) ? LLMRT_ERR_NOMEM : LLMRT_OK;
}

/* A call the response keeps: all of them, or only the first with parallel_tool_calls false. */
static int keeps_call(const serve_choice *c, uint32_t index)
{
    return c->g->req->parallel_tool_calls || index == 0;
}

/* "call_" and 24 hex digits, unique per server run (as OpenAI's ids look). */
static void call_id(serve_gen *g, char *out, size_t cap)
{
    llmrt_server *s = g->srv;
    uint64_t x = s->id_salt ^ (atomic_fetch_add(&s->next_id, 1) * 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    snprintf(out, cap, "call_%016llx%08llx", (unsigned long long)x,
             (unsigned long long)((x * 0xD6E8FEB86659FD93ull) >> 32));
}

static llmrt_status reply_call_begin(void *ctx, uint32_t index, const char *name)
{
    serve_choice *c = ctx;
    if (!keeps_call(c, index))
        return LLMRT_OK;
    if (c->n_calls == c->calls_cap) {
        int cap = c->calls_cap ? 2 * c->calls_cap : 4;
        serve_call *g = realloc(c->calls, (size_t)cap * sizeof *g);
        if (!g)
            return LLMRT_ERR_NOMEM;
        c->calls = g;
        c->calls_cap = cap;
    }
    serve_call *k = &c->calls[c->n_calls];
    memset(k, 0, sizeof *k);
    if (!(k->name = strdup(name)))
        return LLMRT_ERR_NOMEM;
    call_id(c->g, k->id, sizeof k->id);
    c->n_calls++;
    return LLMRT_OK;
}

static llmrt_status reply_call_args(void *ctx, uint32_t index, const char *s, size_t n)
{
    serve_choice *c = ctx;
    if (!keeps_call(c, index) || c->n_calls == 0)
        return LLMRT_OK;
    serve_call *k = &c->calls[c->n_calls - 1];
    return append(&k->args, &k->len, &k->cap, s, n) ? LLMRT_ERR_NOMEM : LLMRT_OK;
}

static llmrt_status reply_call_end(void *ctx, uint32_t index)
{
    (void)ctx;
    (void)index;
    return LLMRT_OK;
}

/* Text of a chat choice through its parser (or, for completions, as it is). */
static int choice_text(serve_choice *c, const char *text, size_t n, int final)
{
    if (!c->parser)
        return n ? append(&c->text, &c->len, &c->cap, text, n) : 0;
    llmrt_reply_sink sink = {c, reply_content, reply_reasoning, reply_call_begin,
                             reply_call_args, reply_call_end};
    llmrt_error err = {0};
    llmrt_status st = LLMRT_OK;
    if (n)
        st = llmrt_chat_parser_push(c->parser, text, n, &sink, &err);
    if (st == LLMRT_OK && final)
        st = llmrt_chat_parser_finish(c->parser, &sink, &err);
    if (st != LLMRT_OK)
        llmrt_log(LLMRT_LOG_ERROR, "serve", "%s: parsing the reply: %s", c->g->id, err.msg);
    return st == LLMRT_OK ? 0 : -1;
}

static int out_event(serve_gen *g, json_t *obj /* taken */)
{
    size_t n = 0;
    char *sse = obj ? llmrt_serve_sse_event(obj, &n) : NULL;
    json_decref(obj);
    int rc = sse ? append(&g->out, &g->out_len, &g->out_cap, sse, n) : -1;
    free(sse);
    if (rc)
        g->failed = 1;
    return rc;
}

static json_t *chunk_head(serve_gen *g)
{
    llmrt_server *s = g->srv;
    json_t *o = llmrt_serve_object(g->id,
                                   g->kind == LLMRT_SERVE_CHAT ? "chat.completion.chunk"
                                                               : "text_completion",
                                   g->created, s->model_name);
    if (o)
        json_object_set_new(o, "choices", json_array());
    if (o && g->req->include_usage)
        json_object_set_new(o, "usage", json_null());
    return o;
}

static json_t *error_obj(int status, const char *code, const char *msg)
{
    llmrt_serve_error e;
    llmrt_serve_error_set(&e, status, NULL, code, NULL, "%s", msg);
    size_t n;
    char *text = llmrt_serve_error_text(&e, &n);
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return o;
}

/* Streaming: one chunk for choice c with its pending text/logprobs and, when `final`, its
 * finish reason. Engine errors and cancellations travel as an "error" event, which the
 * OpenAI clients raise as an exception. */
static void stream_choice(serve_gen *g, serve_choice *c, int final)
{
    if (final && (c->finish == LLMRT_FINISH_ERROR || c->finish == LLMRT_FINISH_CANCELLED)) {
        if (c->finish == LLMRT_FINISH_ERROR)
            out_event(g, error_obj(500, "engine_error", c->error ? c->error : "the engine failed"));
        else
            out_event(g, error_obj(503, "cancelled",
                                   "the request was cancelled: the server is shutting down"));
        return;
    }
    int has_lp = c->lp && json_array_size(json_object_get(c->lp, g->kind == LLMRT_SERVE_CHAT
                                                                      ? "content"
                                                                      : "tokens")) > 0;
    if (!c->len && !has_lp && !final)
        return;
    json_t *o = chunk_head(g);
    llmrt_serve_choice_desc d = {
        .kind = g->kind,
        .chunk = 1,
        .index = c->index,
        .text = (c->len || g->kind == LLMRT_SERVE_COMPLETIONS) ? (c->text ? c->text : "") : NULL,
        .text_len = c->len,
        .logprobs = has_lp ? c->lp : NULL,
        .finish = final ? c->finish : LLMRT_FINISH_NONE,
        .stop_reason = final ? c->stop_reason : NULL,
        .stop_token = final ? c->stop_token : -1,
    };
    if (has_lp)
        c->lp = NULL; /* taken by the choice */
    json_t *ch = llmrt_serve_choice(&d);
    if (o && ch)
        json_array_append_new(json_object_get(o, "choices"), ch);
    else
        json_decref(ch);
    out_event(g, o);
    c->len = 0;
    if (c->text)
        c->text[0] = 0;
}

/* One chat chunk for choice c from desc d (its kind, chunk and index filled in here). */
static void chat_chunk(serve_gen *g, serve_choice *c, llmrt_serve_choice_desc *d)
{
    json_t *o = chunk_head(g);
    d->kind = LLMRT_SERVE_CHAT;
    d->chunk = 1;
    d->index = c->index;
    json_t *ch = llmrt_serve_choice(d);
    if (o && ch)
        json_array_append_new(json_object_get(o, "choices"), ch);
    else
        json_decref(ch);
    out_event(g, o);
}

/* Streaming chat: what choice c's reply gave since the last chunks — reasoning, content (with
 * the pending logprobs), each tool call's first delta (id, type, name) and its arguments —
 * and, when `final`, a chunk with the finish reason. */
static void stream_chat_choice(serve_gen *g, serve_choice *c, int final)
{
    if (final && (c->finish == LLMRT_FINISH_ERROR || c->finish == LLMRT_FINISH_CANCELLED)) {
        stream_choice(g, c, final);
        return;
    }
    if (c->rlen) {
        llmrt_serve_choice_desc d = {.reasoning = c->reason, .reasoning_len = c->rlen,
                                     .stop_token = -1};
        chat_chunk(g, c, &d);
        c->rlen = 0;
    }
    int has_lp = c->lp && json_array_size(json_object_get(c->lp, "content")) > 0;
    if (c->len || has_lp) {
        llmrt_serve_choice_desc d = {.text = c->len ? c->text : NULL, .text_len = c->len,
                                     .logprobs = has_lp ? c->lp : NULL, .stop_token = -1};
        if (has_lp)
            c->lp = NULL; /* taken by the choice */
        chat_chunk(g, c, &d);
        c->len = 0;
    }
    for (int i = 0; i < c->n_calls; i++) {
        serve_call *k = &c->calls[i];
        if (!k->announced) {
            llmrt_serve_tool_call t = {.index = i, .id = k->id, .name = k->name};
            llmrt_serve_choice_desc d = {.tool_calls = &t, .n_tool_calls = 1, .stop_token = -1};
            chat_chunk(g, c, &d);
            k->announced = 1;
        }
        if (k->len) {
            llmrt_serve_tool_call t = {.index = i, .arguments = k->args, .arguments_len = k->len};
            llmrt_serve_choice_desc d = {.tool_calls = &t, .n_tool_calls = 1, .stop_token = -1};
            chat_chunk(g, c, &d);
            k->len = 0;
        }
    }
    if (final) {
        llmrt_serve_choice_desc d = {.finish = c->finish, .stop_reason = c->stop_reason,
                                     .stop_token = c->stop_token,
                                     .tool_calls_finish = c->n_calls > 0};
        chat_chunk(g, c, &d);
    }
}

static int lp_add(serve_gen *g, serve_choice *c, const serve_event *e)
{
    const llmrt_tokenizer *tok = g->req->tokens_as_ids ? NULL : g->srv->tok;
    llmrt_serve_token_lp t = {.token = e->token, .logprob = e->logprob, .n_top = e->n_top,
                              .top_ids = e->top_ids, .top_lps = e->top_lps};
    if (!c->lp)
        c->lp = g->kind == LLMRT_SERVE_CHAT ? llmrt_serve_lp_chat_new()
                                            : llmrt_serve_lp_completion_new();
    if (!c->lp)
        return -1;
    return g->kind == LLMRT_SERVE_CHAT ? llmrt_serve_lp_chat_add(c->lp, tok, &t)
                                       : llmrt_serve_lp_completion_add(c->lp, tok, &t,
                                                                       c->text_total);
}

/* Take what the engine delivered, waiting up to one slice when nothing is there, and apply
 * it: text and logprobs to each choice, and (streaming) chunks to the output. Returns -1
 * when out of memory. */
static int gen_pump(serve_gen *g, int wait)
{
    pthread_mutex_lock(&g->mu);
    if (wait && !g->head && g->n_final == g->n_done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WAIT_SLICE_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    serve_event *list = g->head;
    g->head = g->tail = NULL;
    int lost = g->lost;
    /* finals seen now: their events are all in `list` or were taken earlier */
    char *newly = calloc((size_t)g->n_choices, 1);
    for (int i = 0; newly && i < g->n_choices; i++)
        newly[i] = g->choices[i].final_seen && !g->choices[i].done;
    pthread_mutex_unlock(&g->mu);

    int rc = newly && !lost ? 0 : -1;
    for (serve_event *e = list, *next; e; e = next) {
        next = e->next;
        serve_choice *c = &g->choices[e->choice];
        if (rc == 0 && e->token >= 0 && g->req->sampling.logprobs >= 0 && lp_add(g, c, e))
            rc = -1;
        if (rc == 0 && e->text_len && choice_text(c, e->text, e->text_len, 0))
            rc = -1;
        c->text_total += (int64_t)e->text_len;
        free(e);
    }
    for (int i = 0; newly && i < g->n_choices; i++)
        if (newly[i]) {
            if (rc == 0 && g->choices[i].parser && choice_text(&g->choices[i], NULL, 0, 1))
                rc = -1; /* the reply is over: what the parser held back */
            g->choices[i].done = 1;
            g->n_done++;
        }
    if (g->req->stream && rc == 0)
        for (int i = 0; i < g->n_choices; i++) {
            if (g->kind == LLMRT_SERVE_CHAT)
                stream_chat_choice(g, &g->choices[i], newly && newly[i]);
            else
                stream_choice(g, &g->choices[i], newly && newly[i]);
        }
    free(newly);
    if (g->failed)
        rc = -1;
    return rc;
}

/* Prompt tokens read from the prefix cache, each prompt counted once like its tokens: by its
 * first choice (with n > 1 the choices are admitted together and compute alike). */
static int64_t cached_tokens(const serve_gen *g)
{
    int64_t cached = 0;
    for (int i = 0; i < g->n_choices; i++)
        if (i == 0 || g->choices[i].prompt != g->choices[i - 1].prompt)
            cached += g->choices[i].cached_tokens;
    return cached;
}

/* The end of a stream: the usage chunk when asked, then [DONE]. */
static void stream_finish(serve_gen *g)
{
    if (g->req->include_usage) {
        int64_t completion = 0;
        for (int i = 0; i < g->n_choices; i++)
            completion += g->choices[i].completion_tokens;
        json_t *o = chunk_head(g);
        if (o)
            json_object_set_new(o, "usage",
                                llmrt_serve_usage(g->prompt_tokens, completion, cached_tokens(g)));
        out_event(g, o);
    }
    static const char done[] = "data: [DONE]\n\n";
    if (append(&g->out, &g->out_len, &g->out_cap, done, sizeof done - 1))
        g->failed = 1;
    g->ended = 1;
}

/* Between waits: a client that went away (checked on the socket when `socket` is set), or
 * a forced shutdown, cancels the request. Returns -1 when the client is gone. */
static int gen_check_abort(serve_gen *g, int socket)
{
    if (socket && serve_client_gone(g->conn)) {
        llmrt_log(LLMRT_LOG_DEBUG, "serve", "%s: client went away; cancelling", g->id);
        gen_cancel(g);
        return -1;
    }
    if (atomic_load(&g->srv->abort_all)) {
        pthread_mutex_lock(&g->mu);
        int already = g->cancelled;
        pthread_mutex_unlock(&g->mu);
        if (!already)
            gen_cancel(g);
    }
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    serve_gen *g = cls;
    (void)pos;
    for (;;) {
        if (g->out_off < g->out_len) {
            size_t n = g->out_len - g->out_off;
            if (n > max)
                n = max;
            memcpy(buf, g->out + g->out_off, n);
            g->out_off += n;
            return (ssize_t)n;
        }
        g->out_off = g->out_len = 0;
        if (g->ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (g->n_done == g->n_choices) {
            stream_finish(g);
        } else {
            if (gen_pump(g, 1) < 0) {
                llmrt_log(LLMRT_LOG_ERROR, "serve", "%s: out of memory while streaming", g->id);
                gen_cancel(g);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            /* with output pending, a gone client shows up as a failed write instead */
            if (gen_check_abort(g, g->out_len == 0) < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls)
{
    gen_release(cls, 1);
}

/* Non-streaming: the whole response once every choice has finished. */
static int reply_whole(struct MHD_Connection *conn, serve_gen *g)
{
    llmrt_server *s = g->srv;
    llmrt_serve_error e;
    while (g->n_done < g->n_choices) {
        if (gen_pump(g, 1) < 0) {
            gen_cancel(g);
            llmrt_serve_error_set(&e, 500, NULL, "internal_error", NULL,
                                  "out of memory collecting the completion");
            return serve_reply_error(conn, g->cx, &e);
        }
        if (g->n_done < g->n_choices && gen_check_abort(g, 1) < 0)
            return MHD_NO; /* the client is gone: close */
    }
    int64_t completion = 0;
    for (int i = 0; i < g->n_choices; i++) {
        serve_choice *c = &g->choices[i];
        completion += c->completion_tokens;
        if (c->finish == LLMRT_FINISH_ERROR) {
            llmrt_serve_error_set(&e, 500, NULL, "engine_error", NULL, "generation failed: %s",
                                  c->error ? c->error : "the engine failed");
            return serve_reply_error(conn, g->cx, &e);
        }
        if (c->finish == LLMRT_FINISH_CANCELLED) {
            llmrt_serve_error_set(&e, 503, NULL, "cancelled", NULL,
                                  "the request was cancelled: the server is shutting down");
            return serve_reply_error(conn, g->cx, &e);
        }
    }
    json_t *o = llmrt_serve_object(g->id, g->kind == LLMRT_SERVE_CHAT ? "chat.completion"
                                                                     : "text_completion",
                                   g->created, s->model_name);
    json_t *choices = json_array();
    for (int i = 0; o && choices && i < g->n_choices; i++) {
        serve_choice *c = &g->choices[i];
        llmrt_serve_tool_call *calls = NULL;
        if (c->n_calls) {
            calls = calloc((size_t)c->n_calls, sizeof *calls);
            if (!calls) {
                json_decref(o);
                json_decref(choices);
                gen_cancel(g);
                llmrt_serve_error_set(&e, 500, NULL, "internal_error", NULL,
                                      "out of memory collecting the completion");
                return serve_reply_error(conn, g->cx, &e);
            }
            for (int k = 0; k < c->n_calls; k++)
                calls[k] = (llmrt_serve_tool_call){.index = k, .id = c->calls[k].id,
                                                   .name = c->calls[k].name,
                                                   .arguments = c->calls[k].args,
                                                   .arguments_len = c->calls[k].len};
        }
        /* a reply of tool calls only has content null, as OpenAI's */
        int no_content = c->n_calls > 0 && c->len == 0;
        llmrt_serve_choice_desc d = {.kind = g->kind,
                                     .index = c->index,
                                     .text = no_content ? NULL : c->text ? c->text : "",
                                     .text_len = c->len,
                                     .logprobs = c->lp,
                                     .finish = c->finish,
                                     .stop_reason = c->stop_reason,
                                     .stop_token = c->stop_token,
                                     .reasoning = c->any_reasoning ? c->reason : NULL,
                                     .reasoning_len = c->rlen,
                                     .tool_calls = calls,
                                     .n_tool_calls = c->n_calls,
                                     .tool_calls_finish = c->n_calls > 0};
        c->lp = NULL;
        json_array_append_new(choices, llmrt_serve_choice(&d));
        free(calls);
    }
    if (o) {
        json_object_set_new(o, "choices", choices);
        json_object_set_new(o, "usage",
                            llmrt_serve_usage(g->prompt_tokens, completion, cached_tokens(g)));
    } else {
        json_decref(choices);
    }
    return serve_reply_json(conn, g->cx, 200, o);
}

/* ---- prompts ---- */

llmrt_status serve_chat_prompt(llmrt_server *s, const llmrt_serve_request *req, int32_t **ids,
                               size_t *n_ids, int *in_reasoning, llmrt_serve_error *e)
{
    llmrt_status st = LLMRT_OK;
    llmrt_chat_messages *msgs = NULL;
    char *text = NULL;
    llmrt_error err = {0};
    if (!s->tok)
        return llmrt_serve_error_set(e, 400, NULL, NULL, "messages",
                                     "the model `%s` has no tokenizer.json, so chat is not "
                                     "available; use /v1/completions with token ids",
                                     s->model_name);
    const char *why = llmrt_engine_chat_unavailable(s->engine);
    if (why)
        return llmrt_serve_error_set(e, 400, NULL, NULL, "messages",
                                     "the model `%s` has no usable chat format (%s); use "
                                     "/v1/completions",
                                     s->model_name, why);
    if (llmrt_chat_messages_from_json(req->messages, req->tools, "request", &msgs, &err) !=
        LLMRT_OK) {
        st = llmrt_serve_error_set(e, 400, NULL, NULL, "messages", "%s", err.msg);
        goto cleanup;
    }
    /* tool_choice "none": the model is offered no tools */
    int offer = req->tool_choice.kind != LLMRT_SERVE_TOOL_CHOICE_NONE;
    llmrt_chat_options opt = {.struct_size = sizeof opt,
                              .add_generation_prompt = req->add_generation_prompt,
                              .enable_thinking = req->enable_thinking,
                              .tools = offer ? (const char *const *)msgs->tools : NULL,
                              .n_tools = offer ? msgs->n_tools : 0};
    /* special-token text in the messages stays text unless the deployment trusts clients */
    uint32_t cf = (s->allow_special ? LLMRT_CHAT_TRUST_CONTENT : 0) |
                  (req->add_special_tokens ? LLMRT_CHAT_BOS : 0);
    if (llmrt_engine_chat_tokenize(s->engine, msgs->msgs, msgs->n, &opt, cf, ids, n_ids, &err) !=
        LLMRT_OK) {
        st = llmrt_serve_error_set(e, err.code == LLMRT_ERR_INTERNAL ? 500 : 400, NULL, NULL,
                                   "messages", "%s", err.msg);
        goto cleanup;
    }
    /* does the prompt leave a think block open (the reply then starts inside reasoning)? */
    if (in_reasoning) {
        if (llmrt_engine_chat_render(s->engine, msgs->msgs, msgs->n, &opt, &text, &err) !=
            LLMRT_OK) {
            st = llmrt_serve_error_set(e, 400, NULL, NULL, "messages", "%s", err.msg);
            goto cleanup;
        }
        *in_reasoning = llmrt_engine_chat_prompt_in_reasoning(s->engine, text);
        goto cleanup;
    }
cleanup:
    free(text);
    llmrt_chat_messages_free(msgs);
    return st;
}

/* Token ids of prompt i (malloc'd). */
static llmrt_status prompt_ids(llmrt_server *s, const llmrt_serve_request *req, int i,
                               int32_t **ids, size_t *n, int *in_reasoning, llmrt_serve_error *e)
{
    if (req->kind == LLMRT_SERVE_CHAT)
        return serve_chat_prompt(s, req, ids, n, in_reasoning, e);
    const llmrt_serve_prompt *p = &req->prompts[i];
    if (p->ids) {
        for (int32_t k = 0; k < p->n_ids; k++)
            if (p->ids[k] >= s->vocab_size)
                return llmrt_serve_error_set(e, 400, NULL, NULL, "prompt",
                                             "token id %d at prompt position %d is out of range: "
                                             "the model's vocabulary has %d tokens",
                                             p->ids[k], k, s->vocab_size);
        *ids = malloc((size_t)p->n_ids * sizeof **ids);
        if (!*ids)
            return llmrt_serve_error_set(e, 500, NULL, NULL, NULL, "out of memory");
        memcpy(*ids, p->ids, (size_t)p->n_ids * sizeof **ids);
        *n = (size_t)p->n_ids;
        return LLMRT_OK;
    }
    if (!s->tok)
        return llmrt_serve_error_set(e, 400, NULL, NULL, "prompt",
                                     "the model `%s` has no tokenizer.json: give the prompt as "
                                     "an array of token ids",
                                     s->model_name);
    llmrt_error err = {0};
    if (llmrt_tokenizer_encode(s->tok, p->text, p->text_len, LLMRT_ENCODE_ADD_SPECIAL, ids, n,
                               &err) != LLMRT_OK)
        return llmrt_serve_error_set(e, 400, NULL, NULL, "prompt", "%s", err.msg);
    if (*n == 0) {
        free(*ids);
        *ids = NULL;
        return llmrt_serve_error_set(e, 400, NULL, NULL, "prompt",
                                     "the prompt encodes to no tokens");
    }
    return LLMRT_OK;
}

/* max_tokens for a prompt of n tokens: what was asked, within max_model_len. */
static llmrt_status budget(llmrt_server *s, const llmrt_serve_request *req, size_t n,
                           int32_t *max_tokens, llmrt_serve_error *e)
{
    const char *what = req->kind == LLMRT_SERVE_CHAT ? "messages" : "prompt";
    int64_t room = (int64_t)s->max_model_len - (int64_t)n;
    if (room < 1)
        return llmrt_serve_error_set(
            e, 400, NULL, "context_length_exceeded", what,
            "This model's maximum context length is %d tokens. However, your %s has %zu "
            "tokens, which leaves no room for the completion. Shorten the %s.",
            s->max_model_len, what, n, what);
    if (req->has_max_tokens) {
        int64_t asked = req->max_tokens_asked > 0 ? req->max_tokens_asked
                                                  : req->sampling.max_tokens;
        if (asked > room) {
            const char *param =
                req->kind == LLMRT_SERVE_CHAT ? "max_completion_tokens" : "max_tokens";
            if (asked <= INT64_MAX - (int64_t)n)
                return llmrt_serve_error_set(
                    e, 400, NULL, "context_length_exceeded", param,
                    "This model's maximum context length is %d tokens. However, you requested "
                    "%lld tokens (%zu in the %s, %lld for the completion). Reduce the %s or "
                    "%s (at most %lld here).",
                    s->max_model_len, (long long)n + asked, n, what, (long long)asked, what,
                    param, (long long)room);
            return llmrt_serve_error_set(
                e, 400, NULL, "context_length_exceeded", param,
                "This model's maximum context length is %d tokens. However, you requested %lld "
                "tokens for the completion (and the %s has %zu). Reduce %s to at most %lld "
                "here.",
                s->max_model_len, (long long)asked, what, n, param, (long long)room);
        }
        *max_tokens = req->sampling.max_tokens;
    } else {
        /* OpenAI's defaults: 16 for completions; chat may use the rest of the context */
        *max_tokens = req->kind == LLMRT_SERVE_CHAT ? (int32_t)room
                                                    : (int32_t)(room < 16 ? room : 16);
    }
    return LLMRT_OK;
}

static void make_id(llmrt_server *s, serve_gen *g)
{
    uint64_t x = s->id_salt + atomic_fetch_add(&s->next_id, 1) * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    snprintf(g->id, sizeof g->id, "%s-%016llx%08llx",
             g->kind == LLMRT_SERVE_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)x,
             (unsigned long long)(atomic_load(&s->next_id) & 0xffffffffu));
}

static llmrt_status submit_error(const llmrt_error *err, llmrt_serve_kind kind,
                                 llmrt_serve_error *e)
{
    const char *param = kind == LLMRT_SERVE_CHAT ? "messages" : "prompt";
    switch (err->code) {
    case LLMRT_ERR_LIMIT:
        return llmrt_serve_error_set(e, 400, NULL, "context_length_exceeded", param, "%s",
                                     err->msg);
    case LLMRT_ERR_INVALID_ARG:
        return llmrt_serve_error_set(e, 400, NULL, NULL, NULL, "%s", err->msg);
    case LLMRT_ERR_STATE:
        return llmrt_serve_error_set(e, 503, NULL, "engine_failed", NULL, "%s", err->msg);
    default:
        return llmrt_serve_error_set(e, 500, NULL, "internal_error", NULL, "%s", err->msg);
    }
}

int serve_generate(struct MHD_Connection *conn, serve_conn *cx, llmrt_serve_kind kind)
{
    llmrt_server *s = cx->srv;
    llmrt_serve_error e;
    llmrt_serve_request *req = NULL;
    serve_gen *g = NULL;
    int32_t **ids = NULL;
    size_t *n_ids = NULL;
    int32_t *max_tokens = NULL;
    llmrt_grammar **grammars = NULL; /* [n_choices] until each is submitted */
    int64_t n_grammars = 0;
    int n_prompts = 0, rc;
    double t_arrival = llmrt_now_s();

    if (serve_check_ready(s, &e) != 0)
        goto fail;
    if (llmrt_serve_request_parse(kind, cx->body, cx->len, &req, &e) != LLMRT_OK)
        goto fail;
    if (serve_check_model(s, req->model, &e) != 0)
        goto fail;
    for (int i = 0; i < req->n_unknown; i++)
        serve_warn_unknown_field(s, req->unknown[i]);
    /* the model's sampling defaults (generation_config.json) for what the body left out */
    llmrt_engine_sampling_defaults(s->engine, &req->sampling, req->sampling_given);

    n_prompts = kind == LLMRT_SERVE_CHAT ? 1 : req->n_prompts;
    ids = calloc((size_t)n_prompts, sizeof *ids);
    n_ids = calloc((size_t)n_prompts, sizeof *n_ids);
    max_tokens = calloc((size_t)n_prompts, sizeof *max_tokens);
    if (!ids || !n_ids || !max_tokens) {
        llmrt_serve_error_set(&e, 500, NULL, "internal_error", NULL, "out of memory");
        goto fail;
    }
    int64_t prompt_tokens = 0;
    int in_reasoning = 0;
    for (int i = 0; i < n_prompts; i++) {
        if (prompt_ids(s, req, i, &ids[i], &n_ids[i], &in_reasoning, &e) != LLMRT_OK ||
            budget(s, req, n_ids[i], &max_tokens[i], &e) != LLMRT_OK)
            goto fail;
        prompt_tokens += (int64_t)n_ids[i];
        llmrt_serve_metrics_params(s->metrics, req->n, max_tokens[i]);
    }

    /* the queue: every choice is one engine request; one that can never fit is the
     * client's mistake (400), not a reason to retry (503) */
    int64_t n_choices = (int64_t)n_prompts * req->n;
    if (n_choices > s->max_queue) {
        llmrt_serve_error_set(&e, 400, NULL, NULL, "n",
                              "this request needs %lld engine requests (%d prompt(s) x n = %d) "
                              "but the server holds at most %d at once (server.max_queue): "
                              "lower 'n' or send fewer prompts per request",
                              (long long)n_choices, n_prompts, req->n, s->max_queue);
        goto fail;
    }

    /* structured outputs: a grammar per choice (400 for a schema outside the subset) */
    grammars = calloc((size_t)n_choices, sizeof *grammars);
    if (!grammars) {
        llmrt_serve_error_set(&e, 500, NULL, "internal_error", NULL, "out of memory");
        goto fail;
    }
    n_grammars = n_choices;
    if (serve_grammars(s, req, (int)n_choices, grammars, &e) != LLMRT_OK)
        goto fail;

    long before = atomic_fetch_add(&s->queued, (long)n_choices);
    if (before + n_choices > s->max_queue) {
        atomic_fetch_sub(&s->queued, (long)n_choices);
        llmrt_serve_error_set(&e, 503, NULL, "queue_full", NULL,
                              "the server is at capacity: %ld requests are queued or running "
                              "and this one adds %lld (server.max_queue = %d); retry later",
                              before, (long long)n_choices, s->max_queue);
        goto fail;
    }

    g = calloc(1, sizeof *g);
    if (g)
        g->choices = calloc((size_t)n_choices, sizeof *g->choices);
    if (!g || !g->choices) {
        atomic_fetch_sub(&s->queued, (long)n_choices);
        free(g);
        g = NULL;
        llmrt_serve_error_set(&e, 500, NULL, "internal_error", NULL, "out of memory");
        goto fail;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->srv = s;
    g->conn = conn;
    g->cx = cx;
    g->req = req;
    req = NULL;
    g->kind = kind;
    g->created = (int64_t)time(NULL);
    g->t_arrival = t_arrival;
    g->n_choices = (int)n_choices;
    g->prompt_tokens = prompt_tokens;
    make_id(s, g);
    /* references: the HTTP request, a streaming response, and each choice until final */
    g->refs = 1 + (g->req->stream ? 1 : 0) + g->n_choices;
    cx->gen = g;

    int submitted = 0;
    llmrt_error err = {0};
    /* chat: one reply parser per choice, before anything is submitted */
    for (int i = 0; kind == LLMRT_SERVE_CHAT && i < g->n_choices; i++) {
        llmrt_reply_options ro = {
            .struct_size = sizeof ro,
            .reasoning = s->reasoning_split,
            .starts_in_reasoning = in_reasoning,
            .tool_calls = g->req->tools && g->req->tool_choice.kind != LLMRT_SERVE_TOOL_CHOICE_NONE};
        if (llmrt_engine_chat_parser_new(s->engine, &ro, &g->choices[i].parser, &err) !=
            LLMRT_OK) {
            atomic_fetch_sub(&s->queued, (long)g->n_choices);
            gen_release(g, g->n_choices + (g->req->stream ? 1 : 0));
            llmrt_serve_error_set(&e, 500, NULL, "internal_error", NULL, "%s", err.msg);
            goto fail;
        }
    }
    for (int p = 0; p < n_prompts; p++)
        for (int j = 0; j < g->req->n; j++) {
            serve_choice *c = &g->choices[submitted];
            c->g = g;
            c->index = submitted;
            c->prompt = p;
            c->stop_token = -1;
            llmrt_request r;
            llmrt_request_init(&r);
            r.prompt_ids = ids[p];
            r.n_prompt = (int32_t)n_ids[p];
            r.sampling = g->req->sampling;
            r.sampling.max_tokens = max_tokens[p];
            if (r.sampling.has_seed)
                r.sampling.seed += (uint64_t)j; /* n > 1: distinct, reproducible samples */
            r.sampling.grammar = grammars[submitted];
            grammars[submitted] = NULL; /* the engine's now, whatever submit says */
            r.on_token = on_token;
            r.user = c;
            if (llmrt_engine_submit(s->engine, &r, &c->engine_id, &err) != LLMRT_OK)
                goto submit_failed;
            c->submitted = 1;
            submitted++;
        }
    for (int i = 0; i < n_prompts; i++)
        free(ids[i]);
    free(ids);
    free(n_ids);
    free(max_tokens);
    free(grammars);
    ids = NULL;

    if (!g->req->stream)
        return reply_whole(conn, g);

    /* streaming: chat opens every choice with the assistant role, as OpenAI does */
    if (kind == LLMRT_SERVE_CHAT)
        for (int i = 0; i < g->n_choices; i++) {
            json_t *o = chunk_head(g);
            llmrt_serve_choice_desc d = {.kind = kind, .chunk = 1, .index = i, .text = "",
                                         .with_role = 1, .stop_token = -1};
            json_t *ch = llmrt_serve_choice(&d);
            if (o && ch)
                json_array_append_new(json_object_get(o, "choices"), ch);
            else
                json_decref(ch);
            out_event(g, o);
        }
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, g,
                                          stream_free);
    if (!resp) {
        gen_cancel(g);
        gen_release(g, 1); /* the response's reference */
        llmrt_serve_error_set(&e, 500, NULL, "internal_error", NULL,
                              "could not create the streaming response");
        return serve_reply_error(conn, cx, &e);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    serve_response_headers(cx, resp);
    rc = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    serve_record_status(cx, 200);
    return rc;

submit_failed:
    submit_error(&err, kind, &e);
    {
        int missing = g->n_choices - submitted;
        atomic_fetch_sub(&s->queued, (long)missing);
        if (g->req->stream)
            missing++; /* no response will hold its reference */
        gen_cancel(g);
        gen_release(g, missing);
    }
fail:
    if (ids)
        for (int i = 0; i < n_prompts; i++)
            free(ids[i]);
    free(ids);
    free(n_ids);
    free(max_tokens);
    for (int64_t i = 0; grammars && i < n_grammars; i++)
        llmrt_grammar_free(grammars[i]);
    free(grammars);
    llmrt_serve_request_free(req);
    return serve_reply_error(conn, cx, &e);
}
