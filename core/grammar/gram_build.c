/* gram_build.c — see gram_build.h: NFA fragments, then per rule the subset construction
 * (byte intervals and call symbols), the fewest bytes that finish each state (Dijkstra over
 * reversed edges, repeated until the rules' shortest matches settle: a call's weight is its
 * rule's shortest match), and the removal of edges into states that can never finish. */
#include "gram_build.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "error.h"

#define INF (INT32_MAX / 4)

typedef enum edge_kind { EDGE_EPS = 0, EDGE_RANGE = 1, EDGE_CALL = 2 } edge_kind;

typedef struct nfa_edge {
    int32_t from, to, call;
    uint8_t lo, hi, kind;
} nfa_edge;

struct llmrt_gram_builder {
    nfa_edge *e;
    size_t ne, cap_e;
    int32_t n_states;
    llmrt_gram_frag *rules; /* [n_rules] body; start < 0: not set yet */
    int32_t n_rules, cap_rules;
    int failed;
    llmrt_status code;
    char why[LLMRT_ERROR_MSG_MAX];
};

void llmrt_gram_builder_fail(llmrt_gram_builder *b, llmrt_status code, const char *fmt, ...)
{
    if (b->failed)
        return;
    b->failed = 1;
    b->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why, sizeof b->why, fmt, ap);
    va_end(ap);
}

int llmrt_gram_builder_failed(const llmrt_gram_builder *b) { return b->failed; }

llmrt_gram_builder *llmrt_gram_builder_new(void)
{
    llmrt_gram_builder *b = calloc(1, sizeof *b);
    if (b)
        b->n_states = 1; /* state 0: where failed calls point; never part of a rule */
    return b;
}

void llmrt_gram_builder_free(llmrt_gram_builder *b)
{
    if (!b)
        return;
    free(b->e);
    free(b->rules);
    free(b);
}

static int32_t new_state(llmrt_gram_builder *b)
{
    if (b->failed)
        return 0;
    if (b->n_states >= LLMRT_GRAM_MAX_NFA) {
        llmrt_gram_builder_fail(b, LLMRT_ERR_LIMIT, "the grammar is too large (more than %d automaton states); "
                                   "lower maxLength / maxItems / repetition counts",
                                LLMRT_GRAM_MAX_NFA);
        return 0;
    }
    return b->n_states++;
}

static void add_edge(llmrt_gram_builder *b, int32_t from, int32_t to, edge_kind kind, uint8_t lo,
                     uint8_t hi, int32_t call)
{
    if (b->failed)
        return;
    if (b->ne == b->cap_e) {
        size_t c = b->cap_e ? b->cap_e * 2 : 256;
        nfa_edge *e = realloc(b->e, c * sizeof *e);
        if (!e) {
            llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory building the grammar");
            return;
        }
        b->e = e, b->cap_e = c;
    }
    b->e[b->ne++] = (nfa_edge){from, to, call, lo, hi, (uint8_t)kind};
}

static llmrt_gram_frag frag2(llmrt_gram_builder *b)
{
    llmrt_gram_frag f = {new_state(b), 0};
    f.end = new_state(b);
    return f;
}

int32_t llmrt_gram_rule_new(llmrt_gram_builder *b)
{
    if (b->failed)
        return 0;
    if (b->n_rules == b->cap_rules) {
        int32_t c = b->cap_rules ? b->cap_rules * 2 : 16;
        llmrt_gram_frag *r = realloc(b->rules, (size_t)c * sizeof *r);
        if (!r) {
            llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory building the grammar");
            return 0;
        }
        b->rules = r, b->cap_rules = c;
    }
    b->rules[b->n_rules] = (llmrt_gram_frag){-1, -1};
    return b->n_rules++;
}

void llmrt_gram_rule_set(llmrt_gram_builder *b, int32_t rule, llmrt_gram_frag body)
{
    if (b->failed || rule < 0 || rule >= b->n_rules)
        return;
    b->rules[rule] = body;
}

llmrt_gram_frag llmrt_gram_empty(llmrt_gram_builder *b)
{
    llmrt_gram_frag f = frag2(b);
    add_edge(b, f.start, f.end, EDGE_EPS, 0, 0, -1);
    return f;
}

llmrt_gram_frag llmrt_gram_none(llmrt_gram_builder *b) { return frag2(b); }

int32_t llmrt_gram_junction(llmrt_gram_builder *b) { return new_state(b); }

void llmrt_gram_link(llmrt_gram_builder *b, int32_t from, int32_t to)
{
    add_edge(b, from, to, EDGE_EPS, 0, 0, -1);
}

llmrt_gram_frag llmrt_gram_bytes(llmrt_gram_builder *b, const void *s, size_t n)
{
    const uint8_t *p = s;
    llmrt_gram_frag f;
    f.start = new_state(b);
    int32_t cur = f.start;
    for (size_t i = 0; i < n; i++) {
        int32_t nx = new_state(b);
        add_edge(b, cur, nx, EDGE_RANGE, p[i], p[i], -1);
        cur = nx;
    }
    f.end = cur;
    return f;
}

llmrt_gram_frag llmrt_gram_str(llmrt_gram_builder *b, const char *s)
{
    return llmrt_gram_bytes(b, s, strlen(s));
}

llmrt_gram_frag llmrt_gram_range(llmrt_gram_builder *b, uint8_t lo, uint8_t hi)
{
    llmrt_gram_frag f = frag2(b);
    if (lo <= hi)
        add_edge(b, f.start, f.end, EDGE_RANGE, lo, hi, -1);
    return f;
}

llmrt_gram_frag llmrt_gram_set(llmrt_gram_builder *b, const uint8_t bits[32])
{
    llmrt_gram_frag f = frag2(b);
    for (int c = 0; c < 256;) {
        if (!(bits[c >> 3] & (1u << (c & 7)))) {
            c++;
            continue;
        }
        int lo = c;
        while (c < 256 && (bits[c >> 3] & (1u << (c & 7))))
            c++;
        add_edge(b, f.start, f.end, EDGE_RANGE, (uint8_t)lo, (uint8_t)(c - 1), -1);
    }
    return f;
}

llmrt_gram_frag llmrt_gram_call(llmrt_gram_builder *b, int32_t rule)
{
    llmrt_gram_frag f = frag2(b);
    add_edge(b, f.start, f.end, EDGE_CALL, 0, 0, rule);
    return f;
}

llmrt_gram_frag llmrt_gram_cat(llmrt_gram_builder *b, llmrt_gram_frag x, llmrt_gram_frag y)
{
    add_edge(b, x.end, y.start, EDGE_EPS, 0, 0, -1);
    return (llmrt_gram_frag){x.start, y.end};
}

llmrt_gram_frag llmrt_gram_alts(llmrt_gram_builder *b, const llmrt_gram_frag *f, int n)
{
    llmrt_gram_frag r = frag2(b);
    for (int i = 0; i < n; i++) {
        add_edge(b, r.start, f[i].start, EDGE_EPS, 0, 0, -1);
        add_edge(b, f[i].end, r.end, EDGE_EPS, 0, 0, -1);
    }
    return r;
}

llmrt_gram_frag llmrt_gram_alt(llmrt_gram_builder *b, llmrt_gram_frag x, llmrt_gram_frag y)
{
    llmrt_gram_frag f[2] = {x, y};
    return llmrt_gram_alts(b, f, 2);
}

llmrt_gram_frag llmrt_gram_opt(llmrt_gram_builder *b, llmrt_gram_frag x)
{
    add_edge(b, x.start, x.end, EDGE_EPS, 0, 0, -1);
    return x;
}

llmrt_gram_frag llmrt_gram_star(llmrt_gram_builder *b, llmrt_gram_frag x)
{
    llmrt_gram_frag r = frag2(b);
    add_edge(b, r.start, x.start, EDGE_EPS, 0, 0, -1);
    add_edge(b, r.start, r.end, EDGE_EPS, 0, 0, -1);
    add_edge(b, x.end, x.start, EDGE_EPS, 0, 0, -1);
    add_edge(b, x.end, r.end, EDGE_EPS, 0, 0, -1);
    return r;
}

llmrt_gram_frag llmrt_gram_plus(llmrt_gram_builder *b, llmrt_gram_frag x)
{
    llmrt_gram_frag r = frag2(b);
    add_edge(b, r.start, x.start, EDGE_EPS, 0, 0, -1);
    add_edge(b, x.end, x.start, EDGE_EPS, 0, 0, -1);
    add_edge(b, x.end, r.end, EDGE_EPS, 0, 0, -1);
    return r;
}

llmrt_gram_frag llmrt_gram_repeat(llmrt_gram_builder *b, llmrt_gram_make_fn make, void *ctx,
                                  int32_t min, int32_t max)
{
    llmrt_gram_frag r = llmrt_gram_empty(b);
    for (int32_t i = 0; i < min && !b->failed; i++)
        r = llmrt_gram_cat(b, r, make(b, ctx));
    if (max < 0)
        return llmrt_gram_cat(b, r, llmrt_gram_star(b, make(b, ctx)));
    /* optional copies nest: (x (x (x)?)?)? — every prefix count, one way each */
    if (max > min && !b->failed) {
        int32_t n = max - min;
        llmrt_gram_frag tail = llmrt_gram_opt(b, make(b, ctx));
        for (int32_t i = 1; i < n && !b->failed; i++)
            tail = llmrt_gram_opt(b, llmrt_gram_cat(b, make(b, ctx), tail));
        r = llmrt_gram_cat(b, r, tail);
    }
    return r;
}

/* ---- UTF-8 ranges (RE2's split: pieces whose bytes are each one range) ---- */

static int utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* lo and hi encode to the same length. */
static llmrt_gram_frag utf8_same_len(llmrt_gram_builder *b, uint32_t lo, uint32_t hi)
{
    uint8_t L[4], H[4];
    int n = utf8_encode(lo, L);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0)
                return llmrt_gram_alt(b, utf8_same_len(b, lo, lo | m),
                                      utf8_same_len(b, (lo | m) + 1, hi));
            if ((hi & m) != m)
                return llmrt_gram_alt(b, utf8_same_len(b, lo, (hi & ~m) - 1),
                                      utf8_same_len(b, hi & ~m, hi));
        }
    }
    utf8_encode(hi, H);
    llmrt_gram_frag f = llmrt_gram_range(b, L[0], H[0]);
    for (int i = 1; i < n; i++)
        f = llmrt_gram_cat(b, f, llmrt_gram_range(b, L[i], H[i]));
    return f;
}

llmrt_gram_frag llmrt_gram_utf8_range(llmrt_gram_builder *b, uint32_t lo, uint32_t hi)
{
    static const uint32_t bounds[][2] = {{0, 0x7F},          {0x80, 0x7FF},
                                         {0x800, 0xD7FF},    {0xE000, 0xFFFF},
                                         {0x10000, 0x10FFFF}};
    llmrt_gram_frag parts[5];
    int n = 0;
    if (hi > 0x10FFFF)
        hi = 0x10FFFF;
    for (int i = 0; i < 5; i++) {
        uint32_t a = lo > bounds[i][0] ? lo : bounds[i][0];
        uint32_t z = hi < bounds[i][1] ? hi : bounds[i][1];
        if (a <= z)
            parts[n++] = utf8_same_len(b, a, z);
    }
    if (n == 1)
        return parts[0];
    return llmrt_gram_alts(b, parts, n);
}

/* ---- determinization ---- */

typedef struct dset {
    int32_t *key; /* sorted NFA states (owned) */
    int32_t n;
    int32_t id;   /* DFA state */
    UT_hash_handle hh;
} dset;

typedef struct det {
    llmrt_gram_builder *b;
    int32_t *off;      /* [n_states + 1] CSR over edges sorted by from */
    nfa_edge *ed;      /* sorted edges */
    int32_t *stamp;    /* [n_states] */
    int32_t cur_stamp;
    int32_t *work;     /* [n_states] */
    int32_t *tmp;      /* [n_states] */
    /* the automaton under construction */
    llmrt_gram_st *st;
    int32_t n_st, cap_st;
    llmrt_gram_span *rg;
    int32_t n_rg, cap_rg;
    llmrt_gram_invoke *cl;
    int32_t n_cl, cap_cl;
    int32_t **sets;    /* [n_st] the NFA set of each DFA state (borrowed from dset) */
    int32_t *set_n;
    int32_t cap_sets;
    int64_t set_ints;  /* NFA states summed over the DFA states' sets */
    int too_big;       /* past LLMRT_GRAM_MAX_DFA(_SETS) */
    int oom;
} det;

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_from(const void *a, const void *b)
{
    const nfa_edge *x = a, *y = b;
    return (x->from > y->from) - (x->from < y->from);
}

/* Epsilon closure of seeds [n] into d->tmp (sorted); returns its size. */
static int32_t closure(det *d, const int32_t *seeds, int32_t n)
{
    int32_t top = 0, out = 0;
    d->cur_stamp++;
    for (int32_t i = 0; i < n; i++)
        if (d->stamp[seeds[i]] != d->cur_stamp) {
            d->stamp[seeds[i]] = d->cur_stamp;
            d->work[top++] = seeds[i];
        }
    while (top > 0) {
        int32_t s = d->work[--top];
        d->tmp[out++] = s;
        for (int32_t k = d->off[s]; k < d->off[s + 1]; k++) {
            const nfa_edge *e = &d->ed[k];
            if (e->kind == EDGE_EPS && d->stamp[e->to] != d->cur_stamp) {
                d->stamp[e->to] = d->cur_stamp;
                d->work[top++] = e->to;
            }
        }
    }
    qsort(d->tmp, (size_t)out, sizeof *d->tmp, cmp_i32);
    return out;
}

static int grow(void **p, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int32_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return -1;
    *p = q, *cap = c;
    return 0;
}

/* The DFA state of set d->tmp[0..n) in rule r (new ones are queued by being appended). */
static int32_t dfa_state(det *d, dset **map, int32_t n, int32_t rule, int32_t accept_nfa)
{
    dset *f = NULL;
    HASH_FIND(hh, *map, d->tmp, (unsigned)((size_t)n * sizeof(int32_t)), f);
    if (f)
        return f->id;
    d->set_ints += n;
    if (d->n_st >= LLMRT_GRAM_MAX_DFA || d->set_ints > LLMRT_GRAM_MAX_DFA_SETS) {
        d->too_big = 1;
        return -1;
    }
    f = calloc(1, sizeof *f);
    int32_t *key = malloc((size_t)(n ? n : 1) * sizeof *key);
    int32_t cap_n = d->cap_sets;
    if (!f || !key || grow((void **)&d->st, &d->cap_st, d->n_st + 1, sizeof *d->st) ||
        grow((void **)&d->set_n, &cap_n, d->n_st + 1, sizeof *d->set_n) ||
        grow((void **)&d->sets, &d->cap_sets, d->n_st + 1, sizeof *d->sets)) {
        free(f);
        free(key);
        d->oom = 1;
        return -1;
    }
    memcpy(key, d->tmp, (size_t)n * sizeof *key);
    f->key = key, f->n = n, f->id = d->n_st;
    HASH_ADD_KEYPTR(hh, *map, f->key, (unsigned)((size_t)n * sizeof(int32_t)), f);
    llmrt_gram_st *s = &d->st[d->n_st];
    memset(s, 0, sizeof *s);
    s->rule = rule;
    s->accept = bsearch(&accept_nfa, key, (size_t)n, sizeof *key, cmp_i32) != NULL;
    d->sets[d->n_st] = key;
    d->set_n[d->n_st] = n;
    return d->n_st++;
}

typedef struct ivl_edge {
    uint8_t lo, hi;
    int32_t to;
} ivl_edge;

typedef struct call_edge {
    int32_t rule, to;
} call_edge;

static int cmp_call(const void *a, const void *b)
{
    const call_edge *x = a, *y = b;
    if (x->rule != y->rule)
        return (x->rule > y->rule) - (x->rule < y->rule);
    return (x->to > y->to) - (x->to < y->to);
}

static llmrt_status determinize_rule(det *d, int32_t rule, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_gram_frag body = d->b->rules[rule];
    dset *map = NULL, *it, *tmp_it;
    ivl_edge *ie = NULL;
    call_edge *ce = NULL;
    int32_t cap_ie = 0, cap_ce = 0;
    int32_t *seeds = NULL;
    int32_t cap_seeds = 0;
    int32_t n = closure(d, &body.start, 1);
    int32_t first = dfa_state(d, &map, n, rule, body.end);
    if (first < 0)
        goto too_big_or_oom;
    for (int32_t cur = first; cur < d->n_st; cur++) {
        const int32_t *set = d->sets[cur];
        const int32_t set_n = d->set_n[cur];
        int32_t nie = 0, nce = 0;
        for (int32_t i = 0; i < set_n; i++) {
            int32_t s = set[i];
            for (int32_t k = d->off[s]; k < d->off[s + 1]; k++) {
                const nfa_edge *e = &d->ed[k];
                if (e->kind == EDGE_RANGE) {
                    if (grow((void **)&ie, &cap_ie, nie + 1, sizeof *ie))
                        FAIL(err, LLMRT_ERR_NOMEM, "out of memory determinizing the grammar");
                    ie[nie++] = (ivl_edge){e->lo, e->hi, e->to};
                } else if (e->kind == EDGE_CALL) {
                    if (grow((void **)&ce, &cap_ce, nce + 1, sizeof *ce))
                        FAIL(err, LLMRT_ERR_NOMEM, "out of memory determinizing the grammar");
                    ce[nce++] = (call_edge){e->call, e->to};
                }
            }
        }
        /* byte intervals between the edges' bounds */
        uint8_t mark[257];
        memset(mark, 0, sizeof mark);
        for (int32_t i = 0; i < nie; i++)
            mark[ie[i].lo] = 1, mark[ie[i].hi + 1] = 1;
        int32_t r0 = d->n_rg;
        int c = 0;
        while (c < 256) {
            int z = c + 1;
            while (z < 256 && !mark[z])
                z++;
            /* interval [c, z) */
            int32_t ns = 0;
            for (int32_t i = 0; i < nie; i++)
                if (ie[i].lo <= c && c <= ie[i].hi) {
                    if (grow((void **)&seeds, &cap_seeds, ns + 1, sizeof *seeds))
                        FAIL(err, LLMRT_ERR_NOMEM, "out of memory determinizing the grammar");
                    seeds[ns++] = ie[i].to;
                }
            if (ns > 0) {
                int32_t cn = closure(d, seeds, ns);
                int32_t to = dfa_state(d, &map, cn, rule, body.end);
                if (to < 0)
                    goto too_big_or_oom;
                set = d->sets[cur]; /* the arrays may have moved */
                if (d->n_rg > r0 && d->rg[d->n_rg - 1].to == to && d->rg[d->n_rg - 1].hi + 1 == c) {
                    d->rg[d->n_rg - 1].hi = (uint8_t)(z - 1);
                } else {
                    if (grow((void **)&d->rg, &d->cap_rg, d->n_rg + 1, sizeof *d->rg))
                        FAIL(err, LLMRT_ERR_NOMEM, "out of memory determinizing the grammar");
                    d->rg[d->n_rg++] = (llmrt_gram_span){(uint8_t)c, (uint8_t)(z - 1), to};
                }
            }
            c = z;
        }
        if (d->n_rg - r0 > 256)
            FAIL(err, LLMRT_ERR_INTERNAL, "grammar: %d ranges from one state", d->n_rg - r0);
        /* calls, grouped by rule */
        if (nce > 1)
            qsort(ce, (size_t)nce, sizeof *ce, cmp_call);
        int32_t c0 = d->n_cl;
        for (int32_t i = 0; i < nce;) {
            int32_t j = i, ns = 0;
            while (j < nce && ce[j].rule == ce[i].rule) {
                if (grow((void **)&seeds, &cap_seeds, ns + 1, sizeof *seeds))
                    FAIL(err, LLMRT_ERR_NOMEM, "out of memory determinizing the grammar");
                seeds[ns++] = ce[j].to;
                j++;
            }
            int32_t cn = closure(d, seeds, ns);
            int32_t to = dfa_state(d, &map, cn, rule, body.end);
            if (to < 0)
                goto too_big_or_oom;
            if (grow((void **)&d->cl, &d->cap_cl, d->n_cl + 1, sizeof *d->cl))
                FAIL(err, LLMRT_ERR_NOMEM, "out of memory determinizing the grammar");
            d->cl[d->n_cl++] = (llmrt_gram_invoke){ce[i].rule, to};
            i = j;
        }
        if (d->n_cl - c0 > 65535)
            FAIL(err, LLMRT_ERR_INTERNAL, "grammar: too many calls from one state");
        d->st[cur].r0 = (uint32_t)r0;
        d->st[cur].nr = (uint16_t)(d->n_rg - r0);
        d->st[cur].c0 = (uint32_t)c0;
        d->st[cur].nc = (uint16_t)(d->n_cl - c0);
    }
    goto cleanup;
too_big_or_oom:
    if (d->too_big)
        st = llmrt_fail(err, LLMRT_ERR_LIMIT,
                        "the grammar is too large as an automaton (more than %d states): a "
                        "pattern such as \".*a.{20}\" multiplies states; simplify it, or lower "
                        "maxLength / maxItems",
                        LLMRT_GRAM_MAX_DFA);
    else
        st = llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory determinizing the grammar");
cleanup:
    HASH_ITER(hh, map, it, tmp_it) {
        HASH_DEL(map, it);
        free(it->key);
        free(it);
    }
    free(ie);
    free(ce);
    free(seeds);
    return st;
}

/* ---- the fewest bytes to the end of each state's rule ---- */

typedef struct rev_edge {
    int32_t from; /* the state whose distance this edge may lower */
    int32_t call; /* -1: one byte; else the called rule (its shortest match) */
} rev_edge;

static void heap_push(int32_t *h, int32_t *n, const int32_t *dist, int32_t *pos, int32_t s)
{
    int32_t i = pos[s] >= 0 ? pos[s] : (*n)++;
    h[i] = s;
    pos[s] = i;
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (dist[h[p]] <= dist[h[i]])
            break;
        int32_t t = h[p];
        h[p] = h[i], h[i] = t;
        pos[h[p]] = p, pos[h[i]] = i;
        i = p;
    }
}

static int32_t heap_pop(int32_t *h, int32_t *n, const int32_t *dist, int32_t *pos)
{
    int32_t top = h[0];
    pos[top] = -2;
    (*n)--;
    if (*n > 0) {
        h[0] = h[*n];
        pos[h[0]] = 0;
        int32_t i = 0;
        for (;;) {
            int32_t l = 2 * i + 1, r = l + 1, m = i;
            if (l < *n && dist[h[l]] < dist[h[m]])
                m = l;
            if (r < *n && dist[h[r]] < dist[h[m]])
                m = r;
            if (m == i)
                break;
            int32_t t = h[m];
            h[m] = h[i], h[i] = t;
            pos[h[m]] = m, pos[h[i]] = i;
            i = m;
        }
    }
    return top;
}

static llmrt_status distances(llmrt_gram *g, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const int32_t N = g->n_st;
    int32_t *roff = calloc((size_t)N + 1, sizeof *roff);
    rev_edge *re = NULL;
    int32_t *dist = malloc((size_t)(N ? N : 1) * sizeof *dist);
    int32_t *heap = malloc((size_t)(N ? N : 1) * sizeof *heap);
    int32_t *pos = malloc((size_t)(N ? N : 1) * sizeof *pos);
    TRY_ALLOC(err, roff && dist && heap && pos, "grammar distances");
    int64_t ne = 0;
    for (int32_t s = 0; s < N; s++) {
        const llmrt_gram_st *x = &g->st[s];
        for (uint32_t i = 0; i < x->nr; i++)
            roff[g->rg[x->r0 + i].to + 1]++;
        for (uint32_t i = 0; i < x->nc; i++)
            roff[g->cl[x->c0 + i].to + 1]++;
        ne += x->nr + x->nc;
    }
    for (int32_t s = 0; s < N; s++)
        roff[s + 1] += roff[s];
    re = malloc((size_t)(ne ? ne : 1) * sizeof *re);
    int32_t *fill = calloc((size_t)N + 1, sizeof *fill);
    TRY_ALLOC(err, re && fill, "grammar distances");
    for (int32_t s = 0; s < N; s++) {
        const llmrt_gram_st *x = &g->st[s];
        for (uint32_t i = 0; i < x->nr; i++) {
            int32_t t = g->rg[x->r0 + i].to;
            re[roff[t] + fill[t]++] = (rev_edge){s, -1};
        }
        for (uint32_t i = 0; i < x->nc; i++) {
            int32_t t = g->cl[x->c0 + i].to;
            re[roff[t] + fill[t]++] = (rev_edge){s, g->cl[x->c0 + i].rule};
        }
    }
    free(fill);
    for (int32_t r = 0; r < g->n_rules; r++)
        g->rules[r].min_len = INF;
    for (int iter = 0;; iter++) {
        if (iter > g->n_rules + 64)
            FAIL(err, LLMRT_ERR_INTERNAL, "grammar: rule lengths do not settle");
        int32_t hn = 0;
        for (int32_t s = 0; s < N; s++) {
            dist[s] = g->st[s].accept ? 0 : INF;
            pos[s] = -1;
        }
        for (int32_t s = 0; s < N; s++)
            if (dist[s] == 0)
                heap_push(heap, &hn, dist, pos, s);
        while (hn > 0) {
            int32_t t = heap_pop(heap, &hn, dist, pos);
            for (int32_t k = roff[t]; k < roff[t + 1]; k++) {
                int32_t w = re[k].call < 0 ? 1 : g->rules[re[k].call].min_len;
                if (w >= INF)
                    continue;
                int32_t s = re[k].from;
                int32_t nd = dist[t] + w;
                if (nd < dist[s] && pos[s] != -2) {
                    dist[s] = nd;
                    heap_push(heap, &hn, dist, pos, s);
                }
            }
        }
        int changed = 0;
        for (int32_t r = 0; r < g->n_rules; r++) {
            int32_t m = dist[g->rules[r].start];
            if (m < g->rules[r].min_len) {
                g->rules[r].min_len = m;
                changed = 1;
            }
        }
        if (!changed)
            break;
    }
    for (int32_t s = 0; s < N; s++)
        g->st[s].dist = dist[s];
cleanup:
    free(roff);
    free(re);
    free(dist);
    free(heap);
    free(pos);
    return st;
}

/* Drop edges into states that can never finish; compute `simple`. */
static void trim(llmrt_gram *g)
{
    int32_t nr = 0, nc = 0;
    for (int32_t s = 0; s < g->n_st; s++) {
        llmrt_gram_st *x = &g->st[s];
        uint32_t r0 = (uint32_t)nr, c0 = (uint32_t)nc;
        for (uint32_t i = 0; i < x->nr; i++) {
            llmrt_gram_span r = g->rg[x->r0 + i];
            if (g->st[r.to].dist < INF)
                g->rg[nr++] = r;
        }
        for (uint32_t i = 0; i < x->nc; i++) {
            llmrt_gram_invoke c = g->cl[x->c0 + i];
            if (g->st[c.to].dist < INF && g->rules[c.rule].min_len < INF)
                g->cl[nc++] = c;
        }
        x->r0 = r0, x->nr = (uint16_t)(nr - (int32_t)r0);
        x->c0 = c0, x->nc = (uint16_t)(nc - (int32_t)c0);
        x->simple = x->nr > 0 && !x->accept && x->nc == 0;
    }
    g->n_rg = nr;
    g->n_cl = nc;
}

void llmrt_gram_free(llmrt_gram *g)
{
    if (!g)
        return;
    free(g->st);
    free(g->rg);
    free(g->cl);
    free(g->rules);
    free(g);
}

llmrt_status llmrt_gram_builder_finish(llmrt_gram_builder *b, int32_t root, llmrt_gram **out,
                                       llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    det d;
    memset(&d, 0, sizeof d);
    llmrt_gram *g = NULL;
    *out = NULL;
    if (b->failed)
        return llmrt_fail(err, b->code, "%s", b->why);
    if (root < 0 || root >= b->n_rules)
        return llmrt_fail(err, LLMRT_ERR_INTERNAL, "grammar: no root rule");
    for (int32_t r = 0; r < b->n_rules; r++)
        if (b->rules[r].start < 0)
            return llmrt_fail(err, LLMRT_ERR_INTERNAL, "grammar: rule %d has no body", r);
    d.b = b;
    d.off = calloc((size_t)b->n_states + 1, sizeof *d.off);
    d.stamp = calloc((size_t)b->n_states, sizeof *d.stamp);
    d.work = malloc((size_t)b->n_states * sizeof *d.work);
    d.tmp = malloc((size_t)b->n_states * sizeof *d.tmp);
    d.ed = malloc((b->ne ? b->ne : 1) * sizeof *d.ed);
    TRY_ALLOC(err, d.off && d.stamp && d.work && d.tmp && d.ed, "the grammar's automaton");
    memcpy(d.ed, b->e, b->ne * sizeof *d.ed);
    qsort(d.ed, b->ne, sizeof *d.ed, cmp_from);
    for (size_t i = 0; i < b->ne; i++)
        d.off[d.ed[i].from + 1]++;
    for (int32_t s = 0; s < b->n_states; s++)
        d.off[s + 1] += d.off[s];
    g = calloc(1, sizeof *g);
    TRY_ALLOC(err, g, "the grammar");
    g->rules = calloc((size_t)b->n_rules, sizeof *g->rules);
    TRY_ALLOC(err, g->rules, "the grammar's rules");
    g->n_rules = b->n_rules;
    for (int32_t r = 0; r < b->n_rules; r++) {
        g->rules[r].start = d.n_st;
        TRY(determinize_rule(&d, r, err));
    }
    g->st = d.st, g->n_st = d.n_st, d.st = NULL;
    g->rg = d.rg, g->n_rg = d.n_rg, d.rg = NULL;
    g->cl = d.cl, g->n_cl = d.n_cl, d.cl = NULL;
    g->root = root;
    TRY(distances(g, err));
    if (g->rules[root].min_len >= INF)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "the grammar matches no text at all");
    trim(g);
    *out = g;
    g = NULL;
cleanup:
    free(d.off);
    free(d.stamp);
    free(d.work);
    free(d.tmp);
    free(d.ed);
    free(d.st);
    free(d.rg);
    free(d.cl);
    free(d.sets);
    free(d.set_n);
    llmrt_gram_free(g);
    return st;
}
