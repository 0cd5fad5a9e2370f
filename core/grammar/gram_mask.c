/* gram_mask.c — token masks (grammar.h): the per-top-state split of the vocabulary into
 * accepted / rejected / to-check, cached, and a step's mask from it.
 *
 * The split of top state p is one walk over the trie from the stack [p] alone, where
 * "complete" means p's rule has ended (the caller would take the remaining bytes). At a node
 * reached with bytes x: if some stack is alive, or the rule ended exactly at x's last byte,
 * the tokens ending there are accepted whatever lies below p; if the rule could end before
 * (at a proper prefix of x), they are to be checked against the real stack; else rejected.
 * A subtree where nothing is alive is skipped, its tokens all to-check when the rule could
 * end on the way, else all rejected. */
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "error.h"
#include "grammar.h"
#include "gram_vocab.h"

typedef struct top_entry {
    int32_t top;
    uint32_t *acc;  /* [words] accepted without leaving top's rule */
    int32_t *unc;   /* [n_unc] to check against the whole stack */
    int32_t n_unc;
    size_t bytes;
    UT_hash_handle hh;
} top_entry;

struct llmrt_gram_masker {
    const llmrt_gram *g;
    const llmrt_gram_vocab *v;
    size_t max_bytes;
    top_entry *map;
    size_t bytes;
    llmrt_gram_state *lvl; /* [max_len + 1] the walk's state at each depth ... */
    int32_t *single;       /* [max_len + 1] ... or, when >= 0, just the stack [single]
                              (a top with byte edges only: the common case, kept cheap) */
    uint8_t *esc;          /* [max_len + 1] the rule could end above this depth */
    int32_t *unc;          /* growing list while walking */
    int32_t n_unc, cap_unc;
    llmrt_gram_state a, b; /* scratch of checks */
    llmrt_gram_mask_stats stats;
};

llmrt_status llmrt_gram_masker_new(const llmrt_gram *g, const llmrt_gram_vocab *v,
                                   size_t max_cache_bytes, llmrt_gram_masker **out,
                                   llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_gram_masker *m = calloc(1, sizeof *m);
    TRY_ALLOC(err, m, "a grammar masker");
    m->g = g;
    m->v = v;
    m->max_bytes = max_cache_bytes;
    m->lvl = calloc((size_t)v->max_len + 1, sizeof *m->lvl);
    m->single = calloc((size_t)v->max_len + 1, sizeof *m->single);
    m->esc = calloc((size_t)v->max_len + 1, 1);
    TRY_ALLOC(err, m->lvl && m->single && m->esc, "a grammar masker");
    *out = m;
    m = NULL;
cleanup:
    llmrt_gram_masker_free(m);
    return st;
}

static void clear_cache(llmrt_gram_masker *m)
{
    top_entry *e, *t;
    HASH_ITER(hh, m->map, e, t) {
        HASH_DEL(m->map, e);
        free(e->acc);
        free(e->unc);
        free(e);
    }
    m->bytes = 0;
}

void llmrt_gram_masker_free(llmrt_gram_masker *m)
{
    if (!m)
        return;
    clear_cache(m);
    for (int32_t d = 0; m->lvl && d <= m->v->max_len; d++)
        llmrt_gram_state_free(&m->lvl[d]);
    free(m->lvl);
    free(m->single);
    free(m->esc);
    free(m->unc);
    llmrt_gram_state_free(&m->a);
    llmrt_gram_state_free(&m->b);
    free(m);
}

void llmrt_gram_masker_stats(const llmrt_gram_masker *m, llmrt_gram_mask_stats *out)
{
    *out = m->stats;
    out->cache_bytes = m->bytes;
}

static int unc_add(llmrt_gram_masker *m, const int32_t *ids, int32_t n)
{
    if (m->n_unc + n > m->cap_unc) {
        int32_t c = m->cap_unc ? m->cap_unc : 1024;
        while (c < m->n_unc + n)
            c *= 2;
        int32_t *u = realloc(m->unc, (size_t)c * sizeof *u);
        if (!u)
            return -1;
        m->unc = u, m->cap_unc = c;
    }
    memcpy(m->unc + m->n_unc, ids, (size_t)n * sizeof *ids);
    m->n_unc += n;
    return 0;
}

/* Walk the trie from [top]; NULL when out of memory. */
static top_entry *compute(llmrt_gram_masker *m, int32_t top)
{
    const llmrt_gram *g = m->g;
    const llmrt_gram_vocab *v = m->v;
    top_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->top = top;
    e->acc = calloc((size_t)v->n_words, sizeof *e->acc);
    if (!e->acc)
        goto oom;
    m->n_unc = 0;
    m->esc[0] = 0;
    m->single[0] = top; /* [top] itself, not expanded: its pops and calls are other stacks */
    for (int32_t i = 0; i < v->n_nodes;) {
        const int32_t d = v->depth[i];
        llmrt_gram_state *s = &m->lvl[d];
        int alive, complete, parent_complete;
        if (m->single[d - 1] >= 0) {
            parent_complete = 0;
            int32_t t = llmrt_gram_next(g, m->single[d - 1], v->byte[i]);
            if (t >= 0 && g->st[t].simple) { /* one edge, nothing to expand */
                m->single[d] = t;
                alive = 1, complete = 0;
            } else if (t < 0) {
                m->single[d] = -1;
                s->n = 0, s->complete = 0, s->len = 0;
                alive = 0, complete = 0;
            } else { /* the general step, from the parent written out */
                if (llmrt_gram_state_at(g, m->single[d - 1], &m->lvl[d - 1]))
                    goto oom;
                m->single[d - 1] = -1;
                if (llmrt_gram_advance(g, &m->lvl[d - 1], v->byte[i], s) < 0)
                    goto oom;
                m->single[d] = -1;
                alive = s->n > 0, complete = s->complete;
            }
        } else {
            parent_complete = m->lvl[d - 1].complete;
            if (llmrt_gram_advance(g, &m->lvl[d - 1], v->byte[i], s) < 0)
                goto oom;
            m->single[d] = -1;
            alive = s->n > 0, complete = s->complete;
            if (s->n == 1 && !complete && s->buf[0] == 1 && g->st[s->buf[1]].simple)
                m->single[d] = s->buf[1];
        }
        const int esc = m->esc[d - 1] || parent_complete;
        m->esc[d] = (uint8_t)esc;
        const int32_t *t = v->tids + v->tstart[i], *tz = v->tids + v->tstart[i + 1];
        if (alive || complete) {
            for (; t < tz; t++)
                llmrt_gram_set_bit(e->acc, *t);
        } else if (esc && t < tz && unc_add(m, t, (int32_t)(tz - t))) {
            goto oom;
        }
        if (alive) {
            i++;
            continue;
        }
        if (esc || complete) { /* everything below passes a point where the rule ended */
            int32_t a = v->tstart[i + 1], z = v->tstart[v->end[i]];
            if (z > a && unc_add(m, v->tids + a, z - a))
                goto oom;
        }
        i = v->end[i];
    }
    e->n_unc = m->n_unc;
    if (m->n_unc) {
        e->unc = malloc((size_t)m->n_unc * sizeof *e->unc);
        if (!e->unc)
            goto oom;
        memcpy(e->unc, m->unc, (size_t)m->n_unc * sizeof *e->unc);
    }
    e->bytes = sizeof *e + (size_t)v->n_words * 4 + (size_t)e->n_unc * 4;
    return e;
oom:
    free(e->acc);
    free(e);
    return NULL;
}

static top_entry *entry(llmrt_gram_masker *m, int32_t top)
{
    top_entry *e = NULL;
    HASH_FIND_INT(m->map, &top, e);
    if (e) {
        m->stats.tops_cached++;
        return e;
    }
    e = compute(m, top);
    if (!e)
        return NULL;
    m->stats.tops_computed++;
    if (m->bytes + e->bytes > m->max_bytes && m->map) {
        clear_cache(m);
        m->stats.cache_clears++;
    }
    HASH_ADD_INT(m->map, top, e);
    m->bytes += e->bytes;
    return e;
}

/* One stack of s (at buf offset off) alone, then the token's bytes: alive? */
static int check_stack(llmrt_gram_masker *m, const llmrt_gram_state *s, int32_t off,
                       const uint8_t *bytes, uint32_t n, int32_t max_dist)
{
    llmrt_gram_state *a = &m->a;
    const int32_t depth = s->buf[off];
    a->n = 1, a->complete = 0, a->overflow = 0, a->len = 0;
    if (a->cap < depth + 1) {
        int32_t *b = realloc(a->buf, (size_t)(depth + 64) * sizeof *b);
        if (!b)
            return -1;
        a->buf = b, a->cap = depth + 64;
    }
    memcpy(a->buf, s->buf + off, (size_t)(depth + 1) * sizeof *a->buf);
    a->len = depth + 1;
    int r = llmrt_gram_advance_bytes(m->g, a, bytes, n, &m->b);
    if (r <= 0)
        return r;
    if (max_dist >= 0 && llmrt_gram_dist(m->g, a) > max_dist)
        return 0;
    return 1;
}

static int32_t popcount_words(const uint32_t *w, int32_t n)
{
    int32_t c = 0;
    for (int32_t i = 0; i < n; i++)
        c += __builtin_popcount(w[i]);
    return c;
}

int32_t llmrt_gram_mask(llmrt_gram_masker *m, const llmrt_gram_state *s, uint32_t *words)
{
    const llmrt_gram_vocab *v = m->v;
    memset(words, 0, (size_t)v->n_words * sizeof *words);
    m->stats.masks++;
    for (int32_t off = 0, i = 0; i < s->n; i++) {
        const int32_t depth = s->buf[off];
        top_entry *e = entry(m, s->buf[off + depth]);
        if (!e)
            return -1;
        for (int32_t w = 0; w < v->n_words; w++)
            words[w] |= e->acc[w];
        for (int32_t k = 0; k < e->n_unc; k++) {
            int32_t t = e->unc[k];
            if (llmrt_gram_bit(words, t))
                continue;
            m->stats.checks++;
            int r = check_stack(m, s, off, v->tb[t], v->tl[t], -1);
            if (r < 0)
                return -1;
            if (r)
                llmrt_gram_set_bit(words, t);
        }
        off += depth + 1;
    }
    return popcount_words(words, v->n_words);
}

int llmrt_gram_token_ok(llmrt_gram_masker *m, const llmrt_gram_state *s, int32_t id,
                        int32_t max_dist)
{
    uint32_t n;
    const uint8_t *b = llmrt_gram_vocab_token(m->v, id, &n);
    if (!b)
        return 0;
    for (int32_t off = 0, i = 0; i < s->n; i++) {
        int r = check_stack(m, s, off, b, n, max_dist);
        if (r)
            return r;
        off += s->buf[off] + 1;
    }
    return 0;
}

int32_t llmrt_gram_mask_exact(llmrt_gram_masker *m, const llmrt_gram_state *s,
                              int32_t max_dist, uint32_t *words)
{
    const llmrt_gram_vocab *v = m->v;
    memset(words, 0, (size_t)v->n_words * sizeof *words);
    for (int32_t t = 0; t < v->n_tokens; t++) {
        int r = llmrt_gram_token_ok(m, s, t, max_dist);
        if (r < 0)
            return -1;
        if (r)
            llmrt_gram_set_bit(words, t);
    }
    return popcount_words(words, v->n_words);
}
