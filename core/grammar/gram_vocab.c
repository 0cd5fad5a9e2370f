/* gram_vocab.c — the vocabulary as a byte trie, for token masks (grammar.h).
 *
 * Layout: the trie's nodes in preorder, each with its byte, its depth and the end of its
 * subtree (the index after it), so a walk is a scan that can skip a subtree in one step;
 * the tokens ending at each node are listed in the same order, so the tokens of a subtree
 * are one contiguous run. Built from the tokens sorted by their bytes: each token adds the
 * nodes past its common prefix with the one before it. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grammar.h"
#include "gram_vocab.h"
#include "tokenizer.h"

typedef struct sort_ctx {
    const uint8_t *const *b;
    const uint32_t *l;
} sort_ctx;

static int cmp_tok(const void *x, const void *y, void *ctx)
{
    const sort_ctx *c = ctx;
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    uint32_t la = c->l[a], lb = c->l[b];
    int r = memcmp(c->b[a], c->b[b], la < lb ? la : lb);
    if (r)
        return r;
    if (la != lb)
        return la < lb ? -1 : 1;
    return (a > b) - (a < b);
}

void llmrt_gram_vocab_free(llmrt_gram_vocab *v)
{
    if (!v)
        return;
    free(v->tb);
    free(v->tl);
    free(v->arena);
    free(v->byte);
    free(v->depth);
    free(v->end);
    free(v->tstart);
    free(v->tids);
    free(v);
}

llmrt_status llmrt_gram_vocab_new(const uint8_t *const *bytes, const uint32_t *lens, int32_t n,
                                  int32_t n_bits, llmrt_gram_vocab **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    int32_t *order = NULL, *path = NULL;
    llmrt_gram_vocab *v = NULL;
    *out = NULL;
    if (n < 0 || n_bits < n || n_bits <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "grammar vocabulary: %d tokens in a mask of %d bits", n, n_bits);
    v = calloc(1, sizeof *v);
    TRY_ALLOC(err, v, "the grammar vocabulary");
    v->n_tokens = n;
    v->n_bits = n_bits;
    v->n_words = (n_bits + 31) / 32;
    size_t total = 0;
    int32_t n_ok = 0;
    for (int32_t i = 0; i < n; i++)
        if (bytes[i] && lens[i] > 0 && lens[i] <= 0xFFFF) {
            total += lens[i];
            n_ok++;
        }
    v->tb = calloc((size_t)(n ? n : 1), sizeof *v->tb);
    v->tl = calloc((size_t)(n ? n : 1), sizeof *v->tl);
    v->arena = malloc(total ? total : 1);
    order = malloc((size_t)(n_ok ? n_ok : 1) * sizeof *order);
    TRY_ALLOC(err, v->tb && v->tl && v->arena && order, "the grammar vocabulary");
    size_t at = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!(bytes[i] && lens[i] > 0 && lens[i] <= 0xFFFF))
            continue;
        memcpy(v->arena + at, bytes[i], lens[i]);
        v->tb[i] = v->arena + at;
        v->tl[i] = lens[i];
        at += lens[i];
        order[k++] = i;
        if ((int32_t)lens[i] > v->max_len)
            v->max_len = (int32_t)lens[i];
    }
    sort_ctx sc = {(const uint8_t *const *)v->tb, v->tl};
    qsort_r(order, (size_t)n_ok, sizeof *order, cmp_tok, &sc);
    /* nodes: at most the total bytes */
    size_t cap = total ? total : 1;
    v->byte = malloc(cap);
    v->depth = malloc(cap * sizeof *v->depth);
    v->end = malloc(cap * sizeof *v->end);
    v->tstart = malloc((cap + 1) * sizeof *v->tstart);
    v->tids = malloc((size_t)(n_ok ? n_ok : 1) * sizeof *v->tids);
    path = malloc((size_t)(v->max_len + 1) * sizeof *path);
    TRY_ALLOC(err, v->byte && v->depth && v->end && v->tstart && v->tids && path,
              "the grammar vocabulary trie");
    int32_t nn = 0, nt = 0, plen = 0; /* path[0..plen) open nodes of the previous token */
    const uint8_t *prev = NULL;
    for (int32_t j = 0; j < n_ok; j++) {
        int32_t id = order[j];
        const uint8_t *b = v->tb[id];
        int32_t len = (int32_t)v->tl[id];
        int32_t lcp = 0;
        if (prev)
            while (lcp < plen && lcp < len && prev[lcp] == b[lcp])
                lcp++;
        for (int32_t d = plen - 1; d >= lcp; d--) /* close the nodes left behind */
            v->end[path[d]] = nn;
        for (int32_t d = lcp; d < len; d++) {
            v->byte[nn] = b[d];
            v->depth[nn] = (uint16_t)(d + 1);
            v->tstart[nn] = nt;
            path[d] = nn++;
        }
        plen = len;
        prev = b;
        v->tids[nt++] = id;
    }
    for (int32_t d = plen - 1; d >= 0; d--)
        v->end[path[d]] = nn;
    v->tstart[nn] = nt;
    v->n_nodes = nn;
    *out = v;
    v = NULL;
cleanup:
    free(order);
    free(path);
    llmrt_gram_vocab_free(v);
    return st;
}

llmrt_status llmrt_gram_vocab_from_tokenizer(const llmrt_tokenizer *tok, int32_t n_bits,
                                             llmrt_gram_vocab **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    int32_t n = llmrt_tokenizer_vocab_size(tok);
    if (n > n_bits)
        n = n_bits; /* ids past the model's vocabulary can never be sampled */
    const uint8_t **b = calloc((size_t)(n ? n : 1), sizeof *b);
    uint32_t *l = calloc((size_t)(n ? n : 1), sizeof *l);
    TRY_ALLOC(err, b && l, "the grammar vocabulary");
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        const uint8_t *p = llmrt_tokenizer_token_bytes(tok, i, &len);
        if (!p || llmrt_tokenizer_is_special(tok, i) || len > 0xFFFF)
            continue;
        b[i] = p;
        l[i] = (uint32_t)len;
    }
    st = llmrt_gram_vocab_new(b, l, n, n_bits, out, err);
cleanup:
    free(b);
    free(l);
    return st;
}

int32_t llmrt_gram_vocab_words(const llmrt_gram_vocab *v) { return v->n_words; }
int32_t llmrt_gram_vocab_bits(const llmrt_gram_vocab *v) { return v->n_bits; }
int32_t llmrt_gram_vocab_nodes(const llmrt_gram_vocab *v) { return v->n_nodes; }

const uint8_t *llmrt_gram_vocab_token(const llmrt_gram_vocab *v, int32_t id, uint32_t *len)
{
    if (id < 0 || id >= v->n_tokens || !v->tb[id]) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = v->tl[id];
    return v->tb[id];
}
