/* events.c — tokens and final events out: a sampled token appended, detokenized and checked
 * against every stop rule (eos and stop ids, stop strings, max_tokens, max_model_len), the
 * text delivered with it through the detokenizer and the stop-string holder, the request's
 * callback, what a final event releases, and the engine's failure (every request ends with
 * an error).
 *
 * Why the zombies: a sequence can finish (stop, cancel) while a launched step still computes
 * a token for it; it leaves the id table and the scheduler at once but is freed only when no
 * launched step and no queued cancel refers to it any more. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine_internal.h"

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

/* ---------------------------------------------------------------- events */

void engine_reap_zombies(llmrt_engine *e, reap_mode mode)
{
    for (int32_t i = 0; i < e->n_zombies;) {
        if (mode == REAP_ALL || (e->zombies[i]->refs == 0 && !e->zombies[i]->cancel_held)) {
            engine_seq_free(e->zombies[i]);
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
    ev.cached_tokens = s->sched.n_cached;
    ev.time_scheduled_s = s->t_scheduled;
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
            engine_seq_free(s);
        else /* out of memory for the list: it leaks rather than freeing memory still in use */
            (void)engine_seq_list_push(&e->zombies, &e->n_zombies, &e->cap_zombies, s);
    }
}

void engine_finish_without_token(llmrt_engine *e, eseq *s, llmrt_finish_reason why,
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
    emit(e, s, NO_TOKEN, e->text, e->text_len, 0, 0, NULL, NULL, why, NULL, NO_TOKEN, error);
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

void engine_accept_token(llmrt_engine *e, eseq *s, int32_t t, float lp, int32_t n_top,
                         const int32_t *top_ids, const float *top_lps)
{
    s->tokens[s->n_prompt + s->n_generated] = t;
    s->n_generated++;
    if (s->placeholder)
        s->placeholder = 0; /* the launched step already counted this token */
    else
        s->sched.n_tokens++;
    if (s->in_sched) {
        /* A launched step may already be computing this token's KV (async scheduling): its
         * block can join the prefix cache now that its tokens are all known. */
        int32_t known = s->n_prompt + s->n_generated;
        llmrt_kv_prefix_commit(&e->kv, &s->sched.table, s->tokens,
                               s->sched.n_computed < known ? s->sched.n_computed : known);
    }
    pthread_mutex_lock(&e->mu);
    e->pub.generated_tokens++;
    pthread_mutex_unlock(&e->mu);

    llmrt_finish_reason fin = LLMRT_FINISH_NONE;
    int32_t stop_token = NO_TOKEN;
    const char *error = NULL;
    int by_eos = 0;
    int checks = s->n_generated >= s->sp.min_tokens;
    if (checks && is_stop_token(e, s, t, &by_eos)) {
        fin = LLMRT_FINISH_STOP;
        stop_token = t;
    } else if (s->n_generated >= s->sp.max_tokens ||
               s->n_prompt + s->n_generated >= e->max_model_len) {
        fin = LLMRT_FINISH_LENGTH;
    }
    if (s->grammar && stop_token == NO_TOKEN) {
        /* the reply's grammar: it ends here when it is complete and nothing may follow */
        if (!engine_grammar_advance(s->grammar, t)) {
            fin = LLMRT_FINISH_ERROR;
            error = "structured output: the sampled token does not continue the reply's grammar";
        } else if (engine_grammar_finished(s->grammar)) {
            fin = LLMRT_FINISH_STOP;
        }
    }
    text_reset(e);
    const char *stop_reason = NULL;
    if (s->detok) {
        const char *piece = "";
        size_t n = 0;
        if (stop_token == NO_TOKEN) { /* the text of a stop token is never part of the output */
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
        if (m < 0 && fin != LLMRT_FINISH_NONE) { /* finished: the text both still hold */
            const char *ft = llmrt_detok_flush(s->detok, &n);
            m = llmrt_stopper_push(s->stopper, ft, n, &o, &on);
            text_add(e, o, on);
            if (m < 0) {
                llmrt_stopper_flush(s->stopper, &o, &on);
                text_add(e, o, on);
            }
        }
        if (m >= 0) { /* a stop string matched */
            fin = LLMRT_FINISH_STOP;
            stop_token = NO_TOKEN;
            stop_reason = llmrt_stopper_matched(s->stopper);
        }
    }
    emit(e, s, t, e->text, e->text_len, lp, n_top, top_ids, top_lps, fin, stop_reason,
         stop_token, error);
}

/* ---------------------------------------------------------------- the end of everything */

void engine_fail_all(llmrt_engine *e, const char *msg)
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
        engine_finish_without_token(e, s, LLMRT_FINISH_ERROR, msg);
    }
    engine_end_all(e, LLMRT_FINISH_ERROR, msg); /* the dropped cancel lists hold no one */
    engine_publish(e);
}

void engine_end_all(llmrt_engine *e, llmrt_finish_reason why, const char *msg)
{
    for (int f = 0; f < 2; f++)
        e->fl[f].active = 0;
    e->cur = NO_FLIGHT;
    for (int32_t i = 0; i < e->n_zombies; i++)
        e->zombies[i]->refs = 0;
    while (e->sched.n_running > 0 || e->sched.n_waiting > 0) {
        llmrt_sched_seq *q = e->sched.n_running ? e->sched.running[0] : e->sched.waiting[0];
        eseq *s = q->owner;
        s->refs = 0;
        s->placeholder = 0;
        engine_finish_without_token(e, s, why, msg);
    }
    engine_reap_zombies(e, REAP_ALL);
}
