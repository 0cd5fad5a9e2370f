/* tokenizer_encode.c — text → ids, in HF's order: added tokens are cut out of the raw text
 * first (leftmost-longest, with their lstrip/rstrip/single_word options), the rest is
 * normalized, normalized added tokens are cut out of that, and what remains is
 * pre-tokenized into words that BPE turns into ids. Last, the post-processor's special
 * tokens when asked for.
 *
 * Thread safety: all working memory lives in a per-call `enc`; the tokenizer is only
 * read (its BPE cache locks itself). */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "tokenizer_impl.h"

typedef struct enc {
    const llmrt_tokenizer *tok;
    uint32_t flags;
    const char *text;                /* the whole input: spans are offsets into it */
    const llmrt_text_span *lit;      /* [n_lit] where special tokens are plain text */
    size_t n_lit;
    int seg_literal;                 /* the raw segment being normalized touches a span */
    llmrt_bpe_scratch bs;
    llmrt__pretok_scratch ps;
    int32_t *ids;
    size_t n, cap;
    llmrt_error *err;
} enc;

typedef llmrt_status (*plain_fn)(enc *e, const char *s, size_t len);

static llmrt_status push_id(enc *e, int32_t id)
{
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 64;
        int32_t *g = realloc(e->ids, cap * sizeof *g);
        if (!g)
            return llmrt_fail(e->err, LLMRT_ERR_NOMEM, "out of memory growing the id list");
        e->ids = g;
        e->cap = cap;
    }
    e->ids[e->n++] = id;
    return LLMRT_OK;
}

static llmrt_status on_word(void *ctx, const char *w, size_t len)
{
    enc *e = ctx;
    return llmrt_bpe_encode_word(e->tok->bpe, &e->bs, w, len, &e->ids, &e->n, &e->cap, e->err);
}

static llmrt_status pretokenize(enc *e, const char *s, size_t len)
{
    return llmrt__tok_pretokenize(e->tok, &e->ps, s, len, on_word, e, e->err);
}

static int32_t cp_before(const char *s, size_t pos)
{
    size_t i = pos;
    do
        i--;
    while (i > 0 && ((uint8_t)s[i] & 0xC0) == 0x80);
    int32_t cp;
    llmrt__utf8_decode((const uint8_t *)s + i, &cp);
    return cp;
}

/* 1 when [start, stop) of the input text overlaps a literal span. */
static int overlaps_literal(const enc *e, size_t start, size_t stop)
{
    for (size_t i = 0; i < e->n_lit; i++) {
        const llmrt_text_span *sp = &e->lit[i];
        if (sp->start >= stop)
            break;
        if (sp->start + sp->len > start && sp->len > 0)
            return 1;
    }
    return 0;
}

/* Cut the added tokens of `set` out of s; hand the text between them to `plain`. This is
 * HF's AddedVocabulary::find_matches: matches are found leftmost-longest and never
 * overlap; a match rejected by single_word is skipped, not searched again shorter. `raw`:
 * s lies in the input text (literal spans apply by position), else it is a normalized
 * segment (they apply through seg_literal). */
static llmrt_status split_added(enc *e, const tok_added_set *set, const char *s, size_t len,
                                plain_fn plain, int raw)
{
    llmrt_status st = LLMRT_OK;
    const llmrt_tokenizer *t = e->tok;
    size_t start_offset = 0, i = 0;
    if (set->n == 0)
        return plain(e, s, len);
    while (i < len) {
        const tok_added *hit = NULL;
        size_t p = i;
        for (; p < len && !hit; p++) {
            uint8_t b = (uint8_t)s[p];
            for (uint32_t k = set->start[b]; k < set->start[b + 1]; k++) {
                const tok_added *a = &t->added[set->idx[k]];
                if (a->match_len <= len - p && memcmp(s + p, a->match, a->match_len) == 0) {
                    hit = a;
                    break;
                }
            }
        }
        if (!hit)
            break;
        size_t start = p - 1, stop = start + hit->match_len;
        i = stop;
        if ((e->flags & LLMRT_ENCODE_SPECIAL_AS_TEXT) && hit->special)
            continue;
        if (hit->special && e->n_lit &&
            (raw ? overlaps_literal(e, (size_t)(s - e->text) + start,
                                    (size_t)(s - e->text) + stop)
                 : e->seg_literal))
            continue;
        if (start < start_offset)
            continue; /* inside the whitespace an rstrip already took */
        if (hit->single_word) {
            int32_t next = 0;
            if (stop < len)
                llmrt__utf8_decode((const uint8_t *)s + stop, &next);
            int left_ok = start == 0 || !llmrt__is_word_char(cp_before(s, start));
            int right_ok = stop == len || !llmrt__is_word_char(next);
            if (!left_ok || !right_ok)
                continue;
        }
        if (hit->lstrip) {
            size_t ns = start;
            while (ns > start_offset && llmrt__is_whitespace(cp_before(s, ns))) {
                ns--;
                while (ns > 0 && ((uint8_t)s[ns] & 0xC0) == 0x80)
                    ns--;
            }
            start = ns;
        }
        if (hit->rstrip) {
            int32_t cp;
            while (stop < len) {
                int cl = llmrt__utf8_decode((const uint8_t *)s + stop, &cp);
                if (!llmrt__is_whitespace(cp))
                    break;
                stop += (size_t)cl;
            }
            if (stop > i)
                i = stop;
        }
        if (start > start_offset)
            TRY(plain(e, s + start_offset, start - start_offset));
        TRY(push_id(e, hit->id));
        start_offset = stop;
    }
    if (start_offset < len)
        TRY(plain(e, s + start_offset, len - start_offset));
cleanup:
    return st;
}

/* A segment of raw text without (non-normalized) added tokens. */
static llmrt_status encode_segment(enc *e, const char *s, size_t len)
{
    llmrt_status st = LLMRT_OK;
    const llmrt_tokenizer *t = e->tok;
    char *norm = NULL;
    size_t nl;
    e->seg_literal = e->n_lit && overlaps_literal(e, (size_t)(s - e->text),
                                                  (size_t)(s - e->text) + len);
    if (t->n_norm == 0) {
        if (t->norm_set.n)
            return split_added(e, &t->norm_set, s, len, pretokenize, 1);
        return pretokenize(e, s, len);
    }
    TRY(llmrt__tok_normalize(t, s, len, &norm, &nl, e->err));
    if (t->norm_set.n)
        TRY(split_added(e, &t->norm_set, norm, nl, pretokenize, 0));
    else
        TRY(pretokenize(e, norm, nl));
cleanup:
    free(norm);
    return st;
}

llmrt_status llmrt_tokenizer_encode(const llmrt_tokenizer *tok, const char *text, size_t len,
                                    uint32_t flags, int32_t **ids, size_t *n_ids,
                                    llmrt_error *err)
{
    return llmrt_tokenizer_encode_spans(tok, text, len, flags, NULL, 0, ids, n_ids, err);
}

llmrt_status llmrt_tokenizer_encode_spans(const llmrt_tokenizer *tok, const char *text,
                                          size_t len, uint32_t flags,
                                          const llmrt_text_span *literal, size_t n_literal,
                                          int32_t **ids, size_t *n_ids, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    enc e = {.tok = tok, .flags = flags, .text = text, .lit = literal, .n_lit = n_literal,
             .err = err};
    *ids = NULL;
    *n_ids = 0;
    size_t valid = llmrt__utf8_valid_prefix((const uint8_t *)text, len);
    if (valid != len)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "text to encode is not valid UTF-8 at byte %zu (0x%02x)",
             valid, (unsigned)(uint8_t)text[valid]);
    if (flags & LLMRT_ENCODE_ADD_SPECIAL)
        for (size_t i = 0; i < tok->n_post_prefix; i++)
            TRY(push_id(&e, tok->post_prefix[i]));
    if (len > 0)
        TRY(split_added(&e, &tok->raw_set, text, len, encode_segment, 1));
    if (flags & LLMRT_ENCODE_ADD_SPECIAL)
        for (size_t i = 0; i < tok->n_post_suffix; i++)
            TRY(push_id(&e, tok->post_suffix[i]));
    if (!e.ids) {
        e.ids = malloc(sizeof *e.ids);
        TRY_ALLOC(err, e.ids, "id list");
    }
    *ids = e.ids;
    *n_ids = e.n;
    e.ids = NULL;
cleanup:
    free(e.ids);
    llmrt_bpe_scratch_free(&e.bs);
    llmrt__pretok_scratch_free(&e.ps);
    return st;
}
