/* constrain.c — structured outputs in the engine: grammars compiled through the engine's
 * cache (llmrt_engine_grammar_*, engine.h), a request's state in its grammar, the token
 * masks of a step, and the end-of-budget rule.
 *
 * The step (step.c): a constrained row's mask depends on its previous token, so a flight
 * holding one is never chained behind the previous step. Its forward is launched first
 * (a captured graph without the sampling when graphs are on), the host computes the masks
 * while the device runs it (core/grammar: bitsets cached per automaton state), and the masks
 * go to the device in their own step buffer, where the backend's "llmrt.logits_mask" sets
 * the other tokens' logits to -inf before the usual argmax / sample. Without that extension,
 * and for rows sampled on the host anyway (penalties, logprobs), the host applies the mask.
 *
 * The budget: a reply should finish within max_tokens. Each token the sampler picks is
 * checked (one token: cheap): its state must be at most R - 1 bytes from a complete
 * document, R being the tokens left after it (one fewer when a stop token can end the
 * reply: room for it). Only when it is not — near the end of the budget —
 * the row's logits come to the host and the token is drawn again among those that fit
 * (a full check of the vocabulary; single-byte tokens always exist in a byte-level
 * vocabulary, so a reply that started with room to finish can). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/logits_mask.h>

#include "engine_internal.h"
#include "error.h"
#include "grammar.h"

#define GRAMMAR_CACHE_ENTRIES 16          /* compiled grammars kept for reuse */
#define GRAMMAR_MASK_CACHE (16u << 20)    /* bytes of cached masks per grammar */

struct engine_gram {
    struct engine_gram *next;
    char *key;
    size_t key_len;
    llmrt_gram *g;
    llmrt_gram_masker *mk; /* stepping thread only */
    int refs;              /* under gmu: the cache's one, and each handle's */
};

struct llmrt_grammar {
    llmrt_engine *e;
    engine_gram *eg;
    llmrt_gram_state st, tmp;
    atomic_int taken; /* submitted once */
};

void llmrt_grammar_options_init(llmrt_grammar_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

static size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

llmrt_status engine_grammar_init(llmrt_engine *e, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    pthread_mutex_init(&e->gmu, NULL);
    e->gmu_ok = 1;
    if (!e->parts.tokenizer)
        return LLMRT_OK; /* no grammars without token bytes */
    const int32_t rows = e->set.max_num_seqs;
    e->mask_words = (e->info.vocab + 31) / 32;
    e->mask_map_bytes = align16((size_t)rows * sizeof(int32_t));
    size_t bytes = e->mask_map_bytes + (size_t)rows * (size_t)e->mask_words * sizeof(uint32_t);
    st = e->parts.memory.vt->buffer_alloc(e->parts.memory.m, bytes, LLMRT_MEM_TO_DEVICE,
                                          &e->masks, err);
    if (st) {
        llmrt_error_prefix(err, "allocating %zu bytes of token masks", bytes);
        return st;
    }
    e->masks_ok = 1;
    e->mask_slot = malloc((size_t)rows * sizeof *e->mask_slot);
    TRY_ALLOC(err, e->mask_slot, "token mask slots");
    const llmrt_logits_mask_ops *ops = llmrt_backend_extension(
        e->bvt, e->b, LLMRT_EXT_LOGITS_MASK, LLMRT_EXT_LOGITS_MASK_VERSION);
    if (ops && ops->struct_size >= offsetof(llmrt_logits_mask_ops, apply) + sizeof ops->apply &&
        ops->apply)
        e->mask_ops = ops;
cleanup:
    return st;
}

static void gram_release_locked(engine_gram *g)
{
    if (--g->refs > 0)
        return;
    llmrt_gram_masker_free(g->mk);
    llmrt_gram_free(g->g);
    free(g->key);
    free(g);
}

void engine_grammar_free_all(llmrt_engine *e)
{
    if (!e->gmu_ok)
        return;
    pthread_mutex_lock(&e->gmu);
    for (engine_gram *g = e->gcache, *nx; g; g = nx) {
        nx = g->next;
        gram_release_locked(g);
    }
    e->gcache = NULL;
    e->n_gcache = 0;
    pthread_mutex_unlock(&e->gmu);
    llmrt_gram_vocab_free(e->gvocab);
    e->gvocab = NULL;
    if (e->masks_ok)
        e->parts.memory.vt->buffer_free(e->parts.memory.m, &e->masks);
    e->masks_ok = 0;
    free(e->mask_slot);
    e->mask_slot = NULL;
    pthread_mutex_destroy(&e->gmu);
    e->gmu_ok = 0;
}

/* ---- compiling ---- */

typedef struct keybuf {
    char *p;
    size_t n, cap;
    int oom;
} keybuf;

static void key_add(keybuf *k, const void *s, size_t n)
{
    if (k->oom)
        return;
    if (k->n + n + 16 > k->cap) {
        size_t c = k->cap ? k->cap : 256;
        while (c < k->n + n + 16)
            c *= 2;
        char *p = realloc(k->p, c);
        if (!p) {
            k->oom = 1;
            return;
        }
        k->p = p, k->cap = c;
    }
    char len[16];
    int l = snprintf(len, sizeof len, "%zu:", n); /* length-prefixed: no two keys collide */
    memcpy(k->p + k->n, len, (size_t)l);
    k->n += (size_t)l;
    if (n)
        memcpy(k->p + k->n, s, n);
    k->n += n;
}

static void key_str(keybuf *k, const char *s)
{
    if (s)
        key_add(k, s, strlen(s));
    else
        key_add(k, "\xff", 1); /* NULL differs from "" */
}

static llmrt_status compile(llmrt_engine *e, llmrt_gram_kind kind, const char *text, size_t len,
                            const char *const *choices, int32_t n,
                            const llmrt_grammar_options *opt, llmrt_grammar **out,
                            llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_grammar_options o;
    llmrt_grammar_options_init(&o);
    if (opt)
        memcpy(&o, opt, opt->struct_size < sizeof o ? opt->struct_size : sizeof o);
    keybuf k = {0};
    engine_gram *eg = NULL, *fresh = NULL;
    llmrt_gram_vocab *v = NULL;
    llmrt_gram *g = NULL;
    llmrt_grammar *h = NULL;
    *out = NULL;
    if (!e->parts.tokenizer)
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "structured outputs need the model's tokenizer, and the model folder "
                          "has no tokenizer.json");
    if (kind == LLMRT_GRAM_CHOICE && (n <= 0 || !choices))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "choice: give at least one string");
    char kc = (char)('0' + kind);
    key_add(&k, &kc, 1);
    key_str(&k, o.prefix), key_str(&k, o.suffix), key_str(&k, o.separator);
    key_str(&k, o.lead_open), key_str(&k, o.lead_close);
    char nums[64];
    snprintf(nums, sizeof nums, "%d,%d,%d", o.min_count, o.max_count, o.strict);
    key_str(&k, nums);
    if (kind == LLMRT_GRAM_CHOICE)
        for (int32_t i = 0; i < n; i++) {
            if (!choices[i])
                FAIL(err, LLMRT_ERR_INVALID_ARG, "choice %d is NULL", i);
            key_str(&k, choices[i]);
        }
    else
        key_add(&k, text ? text : "", text ? len : 0);
    TRY_ALLOC(err, !k.oom, "a grammar's key");

    /* the vocabulary trie, once (built outside the lock: it takes a while) */
    pthread_mutex_lock(&e->gmu);
    int have_vocab = e->gvocab != NULL;
    pthread_mutex_unlock(&e->gmu);
    if (!have_vocab) {
        TRY(llmrt_gram_vocab_from_tokenizer(e->parts.tokenizer, e->info.vocab, &v, err));
        pthread_mutex_lock(&e->gmu);
        if (!e->gvocab)
            e->gvocab = v, v = NULL;
        pthread_mutex_unlock(&e->gmu);
    }

    /* a cached grammar, else compile one (outside the lock) */
    pthread_mutex_lock(&e->gmu);
    for (engine_gram **pp = &e->gcache; *pp; pp = &(*pp)->next)
        if ((*pp)->key_len == k.n && memcmp((*pp)->key, k.p, k.n) == 0) {
            eg = *pp;
            *pp = eg->next; /* to the front */
            eg->next = e->gcache;
            e->gcache = eg;
            eg->refs++;
            break;
        }
    pthread_mutex_unlock(&e->gmu);
    if (!eg) {
        llmrt_gram_wrap w = {o.prefix, o.suffix, o.separator, o.min_count, o.max_count,
                             o.lead_open, o.lead_close, o.strict};
        TRY(llmrt_gram_compile(kind, text, len, choices, NULL, n, &w, &g, err));
        fresh = calloc(1, sizeof *fresh);
        TRY_ALLOC(err, fresh, "a grammar");
        fresh->key = k.p, fresh->key_len = k.n;
        k.p = NULL;
        fresh->g = g;
        g = NULL;
        TRY(llmrt_gram_masker_new(fresh->g, e->gvocab, GRAMMAR_MASK_CACHE, &fresh->mk, err));
        fresh->refs = 2; /* the cache's and the handle's */
        pthread_mutex_lock(&e->gmu);
        fresh->next = e->gcache;
        e->gcache = fresh;
        if (++e->n_gcache > GRAMMAR_CACHE_ENTRIES) { /* drop the least recently used */
            engine_gram **pp = &e->gcache;
            while ((*pp)->next)
                pp = &(*pp)->next;
            engine_gram *last = *pp;
            *pp = NULL;
            e->n_gcache--;
            gram_release_locked(last);
        }
        pthread_mutex_unlock(&e->gmu);
        eg = fresh;
        fresh = NULL;
    }
    h = calloc(1, sizeof *h);
    TRY_ALLOC(err, h, "a grammar handle");
    h->e = e;
    h->eg = eg;
    eg = NULL;
    if (llmrt_gram_state_start(h->eg->g, &h->st))
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory starting a grammar");
    *out = h;
    h = NULL;
cleanup:
    if (eg) {
        pthread_mutex_lock(&e->gmu);
        gram_release_locked(eg);
        pthread_mutex_unlock(&e->gmu);
    }
    if (fresh) {
        llmrt_gram_masker_free(fresh->mk);
        llmrt_gram_free(fresh->g);
        free(fresh->key);
        free(fresh);
    }
    llmrt_grammar_free(h);
    llmrt_gram_free(g);
    llmrt_gram_vocab_free(v);
    free(k.p);
    return st;
}

llmrt_status llmrt_engine_grammar_json_schema(llmrt_engine *e, const char *schema, size_t len,
                                              const llmrt_grammar_options *opt,
                                              llmrt_grammar **out, llmrt_error *err)
{
    return compile(e, LLMRT_GRAM_JSON_SCHEMA, schema, len, NULL, 0, opt, out, err);
}

llmrt_status llmrt_engine_grammar_regex(llmrt_engine *e, const char *pattern, size_t len,
                                        const llmrt_grammar_options *opt, llmrt_grammar **out,
                                        llmrt_error *err)
{
    return compile(e, LLMRT_GRAM_REGEX, pattern, len, NULL, 0, opt, out, err);
}

llmrt_status llmrt_engine_grammar_choice(llmrt_engine *e, const char *const *choices, int32_t n,
                                         const llmrt_grammar_options *opt, llmrt_grammar **out,
                                         llmrt_error *err)
{
    return compile(e, LLMRT_GRAM_CHOICE, NULL, 0, choices, n, opt, out, err);
}

void llmrt_grammar_free(llmrt_grammar *h)
{
    if (!h)
        return;
    if (h->eg) {
        pthread_mutex_lock(&h->e->gmu);
        gram_release_locked(h->eg);
        pthread_mutex_unlock(&h->e->gmu);
    }
    llmrt_gram_state_free(&h->st);
    llmrt_gram_state_free(&h->tmp);
    free(h);
}

/* ---- requests ---- */

llmrt_status engine_grammar_take(llmrt_engine *e, llmrt_grammar *h, llmrt_error *err)
{
    if (h->e != e)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "the request's grammar was compiled by another engine");
    if (atomic_exchange(&h->taken, 1))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "the request's grammar was already given to another request (compile "
                          "one handle per request)");
    return LLMRT_OK;
}

int engine_grammar_complete(const llmrt_grammar *h) { return h->st.complete; }

int engine_grammar_finished(const llmrt_grammar *h) { return h->st.complete && h->st.n == 0; }

int engine_grammar_advance(llmrt_grammar *h, int32_t token)
{
    uint32_t n;
    const uint8_t *b = llmrt_gram_vocab_token(h->e->gvocab, token, &n);
    if (!b)
        return 0;
    return llmrt_gram_advance_bytes(h->eg->g, &h->st, b, n, &h->tmp) == 1;
}

/* Can the reply end with a stop token (eos, or a stop id)? */
static int can_stop(const llmrt_engine *e, const eseq *s)
{
    return (!s->sp.ignore_eos && e->n_eos > 0) || s->sp.n_stop_ids > 0;
}

/* Bytes the document may still need after the token being sampled now: the tokens left
 * after it (each byte is a token), less one for the stop token that ends the reply when
 * there is one, so a reply complete at the end of its budget ends with it (FINISH_STOP)
 * rather than by length. */
static int32_t budget_after(const llmrt_engine *e, const eseq *s)
{
    int32_t a = s->sp.max_tokens - s->n_generated - 1;
    int32_t b = e->max_model_len - s->n_prompt - s->n_generated - 1;
    return (a < b ? a : b) - (can_stop(e, s) ? 1 : 0); /* < 0: only a stop token fits */
}

static int stop_allowed(const llmrt_engine *e, const eseq *s, int32_t t)
{
    if (s->n_generated + 1 < s->sp.min_tokens)
        return 0;
    if (!s->sp.ignore_eos)
        for (int32_t i = 0; i < e->n_eos; i++)
            if (e->eos[i] == t)
                return 1;
    for (int32_t i = 0; i < s->sp.n_stop_ids; i++)
        if (s->stop_ids[i] == t)
            return 1;
    return 0;
}

static void set_to(uint32_t *w, int32_t t, int on)
{
    if (on)
        w[t >> 5] |= 1u << (t & 31);
    else
        w[t >> 5] &= ~(1u << (t & 31));
}

/* The stop tokens (eos, stop ids) into a mask: allowed where the reply may end, else not —
 * also a stop id that is an ordinary token the grammar would take. Before min_tokens they
 * are no stops, and the grammar alone decides. */
static void mask_stops(const llmrt_engine *e, const eseq *s, uint32_t *w, int complete)
{
    if (s->n_generated + 1 < s->sp.min_tokens)
        return;
    if (!s->sp.ignore_eos)
        for (int32_t i = 0; i < e->n_eos; i++)
            if (e->eos[i] >= 0 && e->eos[i] < e->info.vocab)
                set_to(w, e->eos[i], complete);
    for (int32_t i = 0; i < s->sp.n_stop_ids; i++)
        set_to(w, s->stop_ids[i], complete);
}

uint32_t *engine_mask_words(llmrt_engine *e, int half, int32_t slot)
{
    return (uint32_t *)((char *)e->masks.host[half] + e->mask_map_bytes) +
           (size_t)slot * (size_t)e->mask_words;
}

int32_t engine_masks_fill(llmrt_engine *e, flight *f, size_t *bytes)
{
    const int h = f->half;
    int32_t *map = e->masks.host[h];
    int32_t k = 0, n_dev = 0;
    for (int32_t i = 0; i < f->n_rows; i++) {
        map[i] = -1;
        e->mask_slot[i] = -1;
    }
    for (int32_t i = 0; i < f->n_items; i++) {
        eseq *s = f->items[i].seq->owner;
        if (!f->items[i].samples || !s->grammar)
            continue;
        uint32_t *w = engine_mask_words(e, h, k);
        llmrt_grammar *g = s->grammar;
        if (llmrt_gram_mask(g->eg->mk, &g->st, w) < 0)
            memset(w, 0, (size_t)e->mask_words * sizeof *w); /* out of memory: collect says */
        mask_stops(e, s, w, g->st.complete);
        e->mask_slot[i] = k;
        if (!f->row_host[i]) {
            map[i] = k;
            n_dev++;
        }
        k++;
    }
    *bytes = e->mask_map_bytes + (size_t)k * (size_t)e->mask_words * sizeof(uint32_t);
    return n_dev;
}

void engine_mask_apply_host(const llmrt_engine *e, int half, int32_t slot, float *logits)
{
    const uint32_t *w = (const uint32_t *)((const char *)e->masks.host[half] +
                                           e->mask_map_bytes) +
                        (size_t)slot * (size_t)e->mask_words;
    for (int32_t v = 0; v < e->info.vocab; v++)
        if (!llmrt_gram_bit(w, v))
            logits[v] = -INFINITY;
}

int engine_grammar_fits(llmrt_engine *e, const eseq *s, int32_t t)
{
    llmrt_grammar *g = s->grammar;
    if (t < 0 || t >= e->info.vocab)
        return 0;
    if (stop_allowed(e, s, t))
        return g->st.complete;
    int32_t left = budget_after(e, s);
    return left >= 0 && llmrt_gram_token_ok(g->eg->mk, &g->st, t, left) == 1;
}

int32_t engine_grammar_allowed(llmrt_engine *e, const eseq *s, uint32_t *w)
{
    llmrt_grammar *g = s->grammar;
    int32_t left = budget_after(e, s);
    if (left < 0)
        memset(w, 0, (size_t)e->mask_words * sizeof *w);
    else if (llmrt_gram_mask_exact(g->eg->mk, &g->st, left, w) < 0)
        return -1;
    mask_stops(e, s, w, g->st.complete); /* ending here always fits */
    int32_t n = 0;
    for (int32_t i = 0; i < e->mask_words; i++)
        n += __builtin_popcount(w[i]);
    if (n == 0) { /* nothing fits any more: any token that continues the reply */
        if (llmrt_gram_mask(g->eg->mk, &g->st, w) < 0)
            return -1;
        mask_stops(e, s, w, g->st.complete);
        n = 0;
        for (int32_t i = 0; i < e->mask_words; i++)
            n += __builtin_popcount(w[i]);
    }
    return n;
}
