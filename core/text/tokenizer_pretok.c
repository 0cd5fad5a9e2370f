/* tokenizer_pretok.c — the text stages before BPE: normalizers (utf8proc) and
 * pre-tokenizers (PCRE2 Split, ByteLevel), run as HF runs them.
 *
 * Pre-tokenizers are a flat list (Sequence is flattened at load); each stage splits its
 * input and hands every piece to the next stage, depth first, so no list of pieces is
 * ever materialised and a stage's buffers are reused piece after piece.
 *
 * Regex dialect: HF compiles Split patterns with Oniguruma, whose Unicode \s is exactly
 * \t \n \v \f \r, U+0085 and the Zs/Zl/Zp separators. PCRE2's \s (with UCP) also
 * matches U+180E, which Unicode no longer calls a space. Patterns are rewritten so that \s
 * and \S name Oniguruma's list explicitly, and both libraries split text the same way.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "error.h"
#include "tokenizer_impl.h"

/* Oniguruma's \s (doc/RE, "Unicode case"), spelled out for PCRE2. */
#define ONIG_SPACE                                                                            \
    "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"         \
    "\\x{202F}\\x{205F}\\x{3000}"

/* Oniguruma → PCRE2: \s and \S become the explicit list (inside a class only \s can be
 * rewritten; a \S inside a class keeps PCRE2's meaning, a difference only at U+180E). */
static char *onig_to_pcre(const char *p, size_t n, size_t *out_len)
{
    char *o = malloc(n * (sizeof ONIG_SPACE + 4) + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[++i];
            const char *rep = NULL;
            if (d == 's')
                rep = depth ? ONIG_SPACE : "[" ONIG_SPACE "]";
            else if (d == 'S' && !depth)
                rep = "[^" ONIG_SPACE "]";
            if (rep) {
                memcpy(o + k, rep, strlen(rep));
                k += strlen(rep);
            } else {
                o[k++] = c;
                o[k++] = d;
            }
            continue;
        }
        if (depth) {
            if (c == '[' && i + 1 < n && p[i + 1] == ':') { /* POSIX [:alpha:] */
                const char *end = strstr(p + i, ":]");
                size_t stop = end && (size_t)(end - p) < n ? (size_t)(end - p) + 2 : i + 1;
                memcpy(o + k, p + i, stop - i);
                k += stop - i;
                i = stop - 1;
                continue;
            }
            if (c == ']') /* PCRE2 classes do not nest: '[' inside is literal */
                depth = 0;
            o[k++] = c;
            continue;
        }
        o[k++] = c;
        if (c == '[') {
            depth = 1;
            if (i + 1 < n && p[i + 1] == '^')
                o[k++] = p[++i];
            if (i + 1 < n && p[i + 1] == ']') /* a leading ] is a literal */
                o[k++] = p[++i];
        }
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

pcre2_code *llmrt__tok_regex(const char *pattern, size_t len, int literal, const char *where,
                             const char *json_path, llmrt_error *err)
{
    size_t plen = len;
    char *conv = literal ? NULL : onig_to_pcre(pattern, len, &plen);
    if (!literal && !conv) {
        llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory compiling the regex at %s", json_path);
        return NULL;
    }
    int code;
    PCRE2_SIZE off;
    uint32_t flags = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(literal ? pattern : conv), plen, flags, &code,
                                   &off, NULL);
    free(conv);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        llmrt_fail(err, LLMRT_ERR_FORMAT,
                   "%s: %s: the regex \"%.*s\" does not compile: %s (near offset %zu)", where,
                   json_path, (int)(len > 200 ? 200 : len), pattern, (const char *)msg,
                   (size_t)off);
        return NULL;
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* no JIT: the interpreter still works */
    return re;
}

void llmrt__tok_pre_free(tok_pre *p)
{
    if (p->re)
        pcre2_code_free(p->re);
    p->re = NULL;
}

/* ---- normalizers ---- */

static int all_below(const char *s, size_t n, uint8_t limit)
{
    for (size_t i = 0; i < n; i++)
        if ((uint8_t)s[i] >= limit)
            return 0;
    return 1;
}

static llmrt_status lowercase(const char *s, size_t n, char **out, size_t *out_len,
                              llmrt_error *err)
{
    /* Each char's full lowercase mapping (Rust char::to_lowercase); the only mapping longer
     * than one char is U+0130 → "i\u0307". At most 3 bytes out per input byte. */
    uint8_t *o = malloc(3 * n + 1);
    if (!o)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory lowercasing %zu bytes", n);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        i += (size_t)llmrt__utf8_decode((const uint8_t *)s + i, &cp);
        if (cp == 0x130) {
            memcpy(o + k, "i\xCC\x87", 3);
            k += 3;
            continue;
        }
        k += (size_t)llmrt__utf8_encode(utf8proc_tolower(cp), o + k);
    }
    o[k] = 0;
    *out = (char *)o;
    *out_len = k;
    return LLMRT_OK;
}

/* One Unicode normalization form over s. Only the stretches that can change go through
 * utf8proc: a char below `clean` (U+0300 for NFC, U+0080 otherwise) is a starter that
 * never composes with what precedes it and is unchanged by the form, so text splits
 * safely before it. A dirty stretch starts one char early (a base letter may compose with
 * the marks after it) and ends before the next clean char. */
static llmrt_status normalize_form(tok_norm_kind k, const char *s, size_t n, char **out,
                                   size_t *out_len, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    uint8_t clean = k == TOK_NORM_NFC ? 0xCC : 0x80; /* lead bytes below this are clean */
    int opt = UTF8PROC_STABLE;
    opt |= (k == TOK_NORM_NFC || k == TOK_NORM_NFKC) ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
    if (k == TOK_NORM_NFKC || k == TOK_NORM_NFKD)
        opt |= UTF8PROC_COMPAT;
    char *o = NULL;
    size_t ol = 0, cap = 0;
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        size_t j = i, prev = i;
        while (j < n && u[j] < clean) {
            prev = j;
            j += u[j] < 0x80 ? 1 : 2; /* clean chars are ASCII or 2-byte */
        }
        size_t start = j > i ? prev : j, e = j;
        while (e < n && u[e] >= clean) /* whole chars: step by the lead byte's length */
            e += u[e] < 0xE0 ? 2 : u[e] < 0xF0 ? 3 : 4;
        if (e > n)
            e = n;
        if (llmrt__grow(&o, &cap, ol + (start - i) + 1) != 0)
            FAIL(err, LLMRT_ERR_NOMEM, "out of memory normalizing %zu bytes", n);
        memcpy(o + ol, s + i, start - i);
        ol += start - i;
        if (e > start) {
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t r = utf8proc_map(u + start, (utf8proc_ssize_t)(e - start), &dst,
                                              (utf8proc_option_t)opt);
            if (r < 0)
                FAIL(err, r == UTF8PROC_ERROR_NOMEM ? LLMRT_ERR_NOMEM : LLMRT_ERR_INVALID_ARG,
                     "normalizing text: %s", utf8proc_errmsg(r));
            int grown = llmrt__grow(&o, &cap, ol + (size_t)r + 1);
            if (grown == 0) {
                memcpy(o + ol, dst, (size_t)r);
                ol += (size_t)r;
            }
            free(dst);
            if (grown != 0)
                FAIL(err, LLMRT_ERR_NOMEM, "out of memory normalizing %zu bytes", n);
        }
        i = e;
    }
    if (llmrt__grow(&o, &cap, ol + 1) != 0)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory normalizing %zu bytes", n);
    o[ol] = 0;
    *out = o;
    *out_len = ol;
    o = NULL;
cleanup:
    free(o);
    return st;
}

llmrt_status llmrt__tok_normalize(const llmrt_tokenizer *tok, const char *text, size_t len,
                                  char **out, size_t *out_len, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char *cur = malloc(len + 1);
    TRY_ALLOC(err, cur, "normalized text");
    memcpy(cur, text, len);
    cur[len] = 0;
    size_t n = len;
    for (int i = 0; i < tok->n_norm; i++) {
        tok_norm_kind k = tok->norm[i];
        char *next = NULL;
        size_t nl = 0;
        if (k == TOK_NORM_LOWERCASE)
            TRY(lowercase(cur, n, &next, &nl, err));
        else if (k == TOK_NORM_NFC ? all_below(cur, n, 0xCC) : all_below(cur, n, 0x80))
            continue;
        else
            TRY(normalize_form(k, cur, n, &next, &nl, err));
        free(cur);
        cur = next;
        n = nl;
    }
    *out = cur;
    *out_len = n;
    cur = NULL;
cleanup:
    free(cur);
    return st;
}

/* ---- pre-tokenizers ---- */

/* One regex search; JIT first, the interpreter when the JIT stack runs out. */
static int find(const pcre2_code *re, const char *text, size_t len, size_t off,
                pcre2_match_data *md)
{
    int rc = pcre2_match(re, (PCRE2_SPTR)text, len, off, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(re, (PCRE2_SPTR)text, len, off, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                         NULL);
    return rc;
}

static llmrt_status run_stage(const llmrt_tokenizer *tok, llmrt__pretok_scratch *s, int stage,
                              const char *text, size_t len, llmrt__tok_word_fn word, void *ctx,
                              llmrt_error *err);

/* Streams the pieces of a split under one of HF's five delimiter behaviors. Intervals
 * arrive in order (gaps and matches alternate or repeat); `pending` holds the one piece
 * that a later interval may still extend. */
typedef struct split_state {
    const llmrt_tokenizer *tok;
    llmrt__pretok_scratch *s;
    int next_stage;
    const char *text;
    tok_split_behavior behavior;
    llmrt__tok_word_fn word;
    void *ctx;
    llmrt_error *err;
    int has_pending, pending_match, prev_match;
    size_t ps, pe;
} split_state;

static llmrt_status emit(split_state *z, size_t a, size_t b)
{
    if (b <= a)
        return LLMRT_OK;
    return run_stage(z->tok, z->s, z->next_stage, z->text + a, b - a, z->word, z->ctx, z->err);
}

static llmrt_status flush_pending(split_state *z)
{
    if (!z->has_pending)
        return LLMRT_OK;
    z->has_pending = 0;
    return emit(z, z->ps, z->pe);
}

static llmrt_status interval(split_state *z, size_t a, size_t b, int is_match)
{
    llmrt_status st = LLMRT_OK;
    switch (z->behavior) {
    case TOK_SPLIT_ISOLATED:
        return emit(z, a, b);
    case TOK_SPLIT_REMOVED:
        return is_match ? LLMRT_OK : emit(z, a, b);
    case TOK_SPLIT_MERGED_WITH_PREVIOUS:
        if (is_match && !z->prev_match && z->has_pending) {
            z->pe = b;
        } else {
            st = flush_pending(z);
            z->has_pending = 1, z->ps = a, z->pe = b;
        }
        z->prev_match = is_match;
        return st;
    case TOK_SPLIT_MERGED_WITH_NEXT:
        if (z->has_pending && z->pending_match && !is_match) {
            z->has_pending = 0;
            return emit(z, z->ps, b);
        }
        st = flush_pending(z);
        z->has_pending = 1, z->pending_match = is_match, z->ps = a, z->pe = b;
        return st;
    case TOK_SPLIT_CONTIGUOUS:
        if (z->has_pending && is_match == z->prev_match) {
            z->pe = b;
        } else {
            st = flush_pending(z);
            z->has_pending = 1, z->ps = a, z->pe = b;
        }
        z->prev_match = is_match;
        return st;
    }
    return st;
}

static llmrt_status split_stage(const llmrt_tokenizer *tok, llmrt__pretok_scratch *s,
                                int stage, const pcre2_code *re, tok_split_behavior behavior,
                                int invert, const char *text, size_t len,
                                llmrt__tok_word_fn word, void *ctx, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    split_state z = {tok, s, stage + 1, text, behavior, word, ctx, err, 0, 0, 0, 0, 0};
    size_t off = 0, last = 0;
    while (off < len) {
        int rc = find(re, text, len, off, s->md);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            FAIL(err, LLMRT_ERR_INTERNAL, "pre-tokenizer regex failed at byte %zu: %s", off,
                 (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* empty match: no piece; step over one character */
            off = ms + 1;
            while (off < len && ((uint8_t)text[off] & 0xC0) == 0x80)
                off++;
            continue;
        }
        if (ms > last)
            TRY(interval(&z, last, ms, invert));
        TRY(interval(&z, ms, me, !invert));
        last = off = me;
    }
    if (last < len)
        TRY(interval(&z, last, len, invert));
    TRY(flush_pending(&z));
cleanup:
    return st;
}

static llmrt_status bytelevel_piece(const llmrt_tokenizer *tok, llmrt__pretok_scratch *s,
                                    int stage, const char *text, size_t len,
                                    llmrt__tok_word_fn word, void *ctx, llmrt_error *err)
{
    char **buf = &s->buf[2 * stage + 1];
    size_t *cap = &s->cap[2 * stage + 1];
    if (llmrt__grow(buf, cap, 2 * len + 1) != 0)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory mapping %zu bytes", len);
    uint8_t *o = (uint8_t *)*buf;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        const uint8_t *m = tok->bytelevel_utf8[(uint8_t)text[i]];
        o[k] = m[0];
        o[k + 1] = m[1];
        k += m[0] < 0x80 ? 1 : 2; /* the alphabet is U+0021..U+0143: 1 or 2 bytes */
    }
    return run_stage(tok, s, stage + 1, *buf, k, word, ctx, err);
}

static llmrt_status run_stage(const llmrt_tokenizer *tok, llmrt__pretok_scratch *s, int stage,
                              const char *text, size_t len, llmrt__tok_word_fn word, void *ctx,
                              llmrt_error *err)
{
    if (len == 0)
        return LLMRT_OK;
    if (stage == tok->n_pre)
        return word(ctx, text, len);
    const tok_pre *p = &tok->pre[stage];
    if (p->kind == TOK_PRE_SPLIT)
        return split_stage(tok, s, stage, p->re, p->behavior, p->invert, text, len, word, ctx,
                           err);
    /* ByteLevel: optional prefix space, optional GPT-2 split, then bytes → alphabet. */
    if (p->add_prefix_space && text[0] != ' ') {
        char **buf = &s->buf[2 * stage];
        if (llmrt__grow(buf, &s->cap[2 * stage], len + 2) != 0)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory for a prefix space");
        (*buf)[0] = ' ';
        memcpy(*buf + 1, text, len);
        text = *buf;
        len++;
    }
    if (!p->re)
        return bytelevel_piece(tok, s, stage, text, len, word, ctx, err);
    /* Split with the GPT-2 regex (Isolated); each piece goes through bytelevel_piece. The
     * split runs as a virtual stage whose "next stage" is the mapping. */
    llmrt_status st = LLMRT_OK;
    size_t off = 0, last = 0;
    while (off < len) {
        int rc = find(p->re, text, len, off, s->md);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return llmrt_fail(err, LLMRT_ERR_INTERNAL, "ByteLevel regex failed at byte %zu", off);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) {
            off = ms + 1;
            while (off < len && ((uint8_t)text[off] & 0xC0) == 0x80)
                off++;
            continue;
        }
        if (ms > last && (st = bytelevel_piece(tok, s, stage, text + last, ms - last, word, ctx, err)))
            return st;
        if ((st = bytelevel_piece(tok, s, stage, text + ms, me - ms, word, ctx, err)))
            return st;
        last = off = me;
    }
    if (last < len)
        st = bytelevel_piece(tok, s, stage, text + last, len - last, word, ctx, err);
    return st;
}

llmrt_status llmrt__tok_pretokenize(const llmrt_tokenizer *tok, llmrt__pretok_scratch *s,
                                    const char *text, size_t len, llmrt__tok_word_fn word,
                                    void *ctx, llmrt_error *err)
{
    if (!s->md) {
        s->md = pcre2_match_data_create(1, NULL);
        if (!s->md)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory for regex match data");
    }
    return run_stage(tok, s, 0, text, len, word, ctx, err);
}

void llmrt__pretok_scratch_free(llmrt__pretok_scratch *s)
{
    if (s->md)
        pcre2_match_data_free(s->md);
    for (int i = 0; i < 2 * TOK_MAX_STAGES; i++)
        free(s->buf[i]);
    memset(s, 0, sizeof *s);
}
