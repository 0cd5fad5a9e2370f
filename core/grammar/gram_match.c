/* gram_match.c — a reply's state in a grammar: the set of call stacks it may be in.
 *
 * A stack is [return states of the callers ..., the current state]. States are kept
 * "normalized": every top has byte edges, so one byte moves each stack along one edge (the
 * rules are DFAs) and the closure that follows expands what needs no byte: a top that may
 * end its rule also pops to its caller (or completes the document at the bottom), and each
 * call edge pushes its rule. Identical stacks are merged, so ambiguity costs only as many
 * stacks as there are distinct ways to be. */
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

#define INF (INT32_MAX / 4)
#define CLOSURE_BUDGET 100000 /* expansions per closure: a guard against a bad grammar */

void llmrt_gram_state_init(llmrt_gram_state *s) { memset(s, 0, sizeof *s); }

void llmrt_gram_state_free(llmrt_gram_state *s)
{
    free(s->buf);
    memset(s, 0, sizeof *s);
}

static int reserve(llmrt_gram_state *s, int32_t more)
{
    if (s->len + more <= s->cap)
        return 0;
    int32_t c = s->cap ? s->cap : 64;
    while (c < s->len + more)
        c *= 2;
    int32_t *b = realloc(s->buf, (size_t)c * sizeof *b);
    if (!b)
        return -1;
    s->buf = b, s->cap = c;
    return 0;
}

static void clear(llmrt_gram_state *s)
{
    s->n = 0;
    s->complete = 0;
    s->len = 0;
    s->overflow = 0;
}

int llmrt_gram_state_copy(llmrt_gram_state *dst, const llmrt_gram_state *src)
{
    clear(dst);
    if (reserve(dst, src->len))
        return -1;
    if (src->len)
        memcpy(dst->buf, src->buf, (size_t)src->len * sizeof *dst->buf);
    dst->n = src->n, dst->complete = src->complete, dst->len = src->len;
    dst->overflow = src->overflow;
    return 0;
}

/* The closure's working stack: frames below the top. */
typedef struct work {
    int32_t *w;
    int32_t cap;
    int budget;
    int oom;
} work;

/* Append stack w[0..d) + [top] to out unless it is there already. */
static void emit(llmrt_gram_state *out, const int32_t *w, int32_t d, int32_t top, work *k)
{
    const int32_t depth = d + 1;
    for (int32_t off = 0, i = 0; i < out->n; i++) {
        int32_t od = out->buf[off];
        if (od == depth && out->buf[off + depth] == top &&
            memcmp(out->buf + off + 1, w, (size_t)d * sizeof *w) == 0)
            return;
        off += od + 1;
    }
    if (reserve(out, depth + 1)) {
        k->oom = 1;
        return;
    }
    int32_t *p = out->buf + out->len;
    p[0] = depth;
    memcpy(p + 1, w, (size_t)d * sizeof *w);
    p[depth] = top;
    out->len += depth + 1;
    out->n++;
}

static void closure(const llmrt_gram *g, work *k, int32_t d, int32_t top, llmrt_gram_state *out)
{
    if (--k->budget < 0 || k->oom)
        return;
    const llmrt_gram_st *s = &g->st[top];
    if (s->nr)
        emit(out, k->w, d, top, k);
    if (s->accept) {
        if (d == 0) {
            out->complete = 1;
        } else {
            int32_t saved = k->w[d - 1];
            closure(g, k, d - 1, saved, out);
            k->w[d - 1] = saved;
        }
    }
    for (uint32_t i = 0; i < s->nc; i++) {
        const llmrt_gram_invoke *c = &g->cl[s->c0 + i];
        if (d + 1 >= LLMRT_GRAM_MAX_DEPTH) {
            out->overflow = 1;
            continue;
        }
        if (d + 1 > k->cap) {
            int32_t nc = k->cap * 2 > d + 1 ? k->cap * 2 : d + 64;
            int32_t *w = realloc(k->w, (size_t)nc * sizeof *w);
            if (!w) {
                k->oom = 1;
                return;
            }
            k->w = w, k->cap = nc;
        }
        k->w[d] = c->to;
        closure(g, k, d + 1, g->rules[c->rule].start, out);
    }
}

/* A per-thread working stack is not needed: each call allocates only when a stack is deeper
 * than the small one on the C stack. */
#define SMALL_WORK 64

static int run_closure(const llmrt_gram *g, const int32_t *below, int32_t d, int32_t top,
                       llmrt_gram_state *out)
{
    int32_t small[SMALL_WORK];
    work k = {small, SMALL_WORK, CLOSURE_BUDGET, 0};
    if (d > SMALL_WORK) {
        k.w = malloc((size_t)(d + 64) * sizeof *k.w);
        if (!k.w)
            return -1;
        k.cap = d + 64;
    }
    if (d)
        memcpy(k.w, below, (size_t)d * sizeof *k.w);
    closure(g, &k, d, top, out);
    if (k.w != small)
        free(k.w);
    return k.oom ? -1 : 0;
}

int llmrt_gram_state_start(const llmrt_gram *g, llmrt_gram_state *s)
{
    clear(s);
    return run_closure(g, NULL, 0, g->rules[g->root].start, s);
}

int llmrt_gram_state_at(const llmrt_gram *g, int32_t top, llmrt_gram_state *s)
{
    clear(s);
    if (!g->st[top].nr)
        return 0;
    if (reserve(s, 2))
        return -1;
    s->buf[0] = 1;
    s->buf[1] = top;
    s->len = 2;
    s->n = 1;
    return 0;
}

int llmrt_gram_advance(const llmrt_gram *g, const llmrt_gram_state *in, uint8_t c,
                       llmrt_gram_state *out)
{
    clear(out);
    for (int32_t off = 0, i = 0; i < in->n; i++) {
        const int32_t depth = in->buf[off];
        const int32_t *e = in->buf + off + 1;
        off += depth + 1;
        int32_t t = llmrt_gram_next(g, e[depth - 1], c);
        if (t < 0)
            continue;
        if (g->st[t].simple) { /* the common case: one edge, nothing to expand */
            int32_t dup = 0;
            for (int32_t o2 = 0, j = 0; j < out->n && !dup; j++) {
                int32_t od = out->buf[o2];
                dup = od == depth && out->buf[o2 + depth] == t &&
                      memcmp(out->buf + o2 + 1, e, (size_t)(depth - 1) * sizeof *e) == 0;
                o2 += od + 1;
            }
            if (dup)
                continue;
            if (reserve(out, depth + 1))
                return -1;
            int32_t *p = out->buf + out->len;
            p[0] = depth;
            memcpy(p + 1, e, (size_t)(depth - 1) * sizeof *e);
            p[depth] = t;
            out->len += depth + 1;
            out->n++;
            continue;
        }
        if (run_closure(g, e, depth - 1, t, out))
            return -1;
    }
    return out->n > 0 || out->complete;
}

int llmrt_gram_advance_bytes(const llmrt_gram *g, llmrt_gram_state *s, const uint8_t *bytes,
                             size_t n, llmrt_gram_state *scratch)
{
    for (size_t i = 0; i < n; i++) {
        int r = llmrt_gram_advance(g, s, bytes[i], scratch);
        if (r < 0)
            return -1;
        llmrt_gram_state t = *s;
        *s = *scratch;
        *scratch = t;
        if (r == 0)
            return 0;
    }
    return 1;
}

int llmrt_gram_matches(const llmrt_gram *g, const void *text, size_t n)
{
    llmrt_gram_state s, t;
    llmrt_gram_state_init(&s);
    llmrt_gram_state_init(&t);
    int ok = llmrt_gram_state_start(g, &s) == 0 &&
             llmrt_gram_advance_bytes(g, &s, text, n, &t) == 1 && s.complete;
    llmrt_gram_state_free(&s);
    llmrt_gram_state_free(&t);
    return ok;
}

int32_t llmrt_gram_dist(const llmrt_gram *g, const llmrt_gram_state *s)
{
    if (s->complete)
        return 0;
    int64_t best = INT32_MAX;
    for (int32_t off = 0, i = 0; i < s->n; i++) {
        const int32_t depth = s->buf[off];
        const int32_t *e = s->buf + off + 1;
        off += depth + 1;
        int64_t d = 0;
        for (int32_t j = 0; j < depth; j++)
            d += g->st[e[j]].dist;
        if (d < best)
            best = d;
    }
    return (int32_t)best;
}
