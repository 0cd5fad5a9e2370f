/* gram_compile.c — the compilers' entry points (grammar.h): a JSON schema, a regex or a list
 * of choices as the document, and the wrapper around it (literal text before and after,
 * repeats with a separator, an optional leading free-text block that ends with a given
 * string, as a reasoning section does). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "grammar.h"
#include "gram_json.h"
#include "gram_regex.h"

/* Any bytes without `close` inside, then `close`: the string-search automaton of close
 * (Knuth-Morris-Pratt), state q = how much of close was just seen. */
static llmrt_gram_frag until(llmrt_gram_builder *b, const char *close)
{
    const size_t m = strlen(close);
    if (m == 0)
        return llmrt_gram_empty(b);
    int32_t *fail = malloc(m * sizeof *fail);
    int32_t *q = malloc((m + 1) * sizeof *q);
    if (!fail || !q) {
        free(fail);
        free(q);
        llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
        return llmrt_gram_none(b);
    }
    fail[0] = 0;
    for (size_t i = 1, k = 0; i < m; i++) {
        while (k > 0 && close[i] != close[k])
            k = (size_t)fail[k - 1];
        if (close[i] == close[k])
            k++;
        fail[i] = (int32_t)k;
    }
    for (size_t i = 0; i <= m; i++)
        q[i] = llmrt_gram_junction(b);
    for (size_t s = 0; s < m; s++) {
        /* the next state for each byte, as ranges of equal targets */
        int32_t next[256];
        for (int c = 0; c < 256; c++) {
            size_t k = s;
            while (k > 0 && (unsigned char)close[k] != c)
                k = (size_t)fail[k - 1];
            next[c] = (unsigned char)close[k] == c ? (int32_t)k + 1 : 0;
        }
        for (int c = 0; c < 256;) {
            int z = c;
            while (z + 1 < 256 && next[z + 1] == next[c])
                z++;
            llmrt_gram_frag r = llmrt_gram_range(b, (uint8_t)c, (uint8_t)z);
            llmrt_gram_link(b, q[s], r.start);
            llmrt_gram_link(b, r.end, q[next[c]]);
            c = z + 1;
        }
    }
    llmrt_gram_frag f = {q[0], q[m]};
    free(fail);
    free(q);
    return f;
}

typedef struct doc_ctx {
    llmrt_gram_kind kind;
    const json_t *schema;
    llmrt_gram_schema_ctx *sc;
    const char *text;
    size_t len;
    const char *const *choices;
    const size_t *lens;
    int32_t n;
} doc_ctx;

static llmrt_gram_frag document(llmrt_gram_builder *b, doc_ctx *d)
{
    switch (d->kind) {
    case LLMRT_GRAM_JSON_SCHEMA:
        return llmrt_gram_schema_value(d->sc, d->schema, "");
    case LLMRT_GRAM_REGEX: {
        int a0, a1;
        return llmrt_gram_regex_frag(b, d->text, d->len, 0, &a0, &a1);
    }
    case LLMRT_GRAM_CHOICE: {
        if (d->n <= 0) {
            llmrt_gram_builder_fail(b, LLMRT_ERR_INVALID_ARG, "choice: give at least one string");
            return llmrt_gram_none(b);
        }
        llmrt_gram_frag *f = malloc((size_t)d->n * sizeof *f);
        if (!f) {
            llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
            return llmrt_gram_none(b);
        }
        for (int32_t i = 0; i < d->n; i++)
            f[i] = llmrt_gram_bytes(b, d->choices[i],
                                    d->lens ? d->lens[i] : strlen(d->choices[i]));
        llmrt_gram_frag a = llmrt_gram_alts(b, f, d->n);
        free(f);
        return a;
    }
    }
    return llmrt_gram_none(b);
}

typedef struct rep_ctx {
    const llmrt_gram_wrap *w;
    int32_t doc_rule;
} rep_ctx;

static llmrt_gram_frag one_doc(llmrt_gram_builder *b, const llmrt_gram_wrap *w, llmrt_gram_frag d)
{
    if (w && w->prefix)
        d = llmrt_gram_cat(b, llmrt_gram_str(b, w->prefix), d);
    if (w && w->suffix)
        d = llmrt_gram_cat(b, d, llmrt_gram_str(b, w->suffix));
    return d;
}

static llmrt_gram_frag more_doc(llmrt_gram_builder *b, void *ctx)
{
    rep_ctx *r = ctx;
    llmrt_gram_frag d = one_doc(b, r->w, llmrt_gram_call(b, r->doc_rule));
    if (r->w->separator)
        d = llmrt_gram_cat(b, llmrt_gram_str(b, r->w->separator), d);
    return d;
}

llmrt_status llmrt_gram_compile(llmrt_gram_kind kind, const char *text, size_t len,
                                const char *const *choices, const size_t *lens, int32_t n,
                                const llmrt_gram_wrap *wrap, llmrt_gram **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_gram_builder *b = llmrt_gram_builder_new();
    json_t *schema = NULL;
    doc_ctx d = {.kind = kind, .text = text, .len = len, .choices = choices, .lens = lens, .n = n};
    *out = NULL;
    TRY_ALLOC(err, b, "a grammar builder");
    if (kind == LLMRT_GRAM_JSON_SCHEMA) {
        json_error_t je;
        schema = json_loadb(text ? text : "", len, JSON_DECODE_ANY, &je);
        if (!schema)
            FAIL(err, LLMRT_ERR_INVALID_ARG, "the JSON schema is not valid JSON: %s (line %d, "
                                             "column %d)",
                 je.text, je.line, je.column);
        d.schema = schema;
        d.sc = llmrt_gram_schema_ctx_new(b, schema, wrap && wrap->strict);
        TRY_ALLOC(err, d.sc, "a schema compiler");
    }
    int32_t lo = wrap && wrap->min_count > 0 ? wrap->min_count : 1;
    int32_t hi = wrap && wrap->max_count > 0 ? wrap->max_count : lo;
    if (hi < lo)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "grammar: at most %d documents but at least %d", hi, lo);
    int32_t root = llmrt_gram_rule_new(b);
    llmrt_gram_frag body;
    if (hi == 1) {
        body = one_doc(b, wrap, document(b, &d));
    } else {
        rep_ctx r = {wrap, llmrt_gram_rule_new(b)};
        llmrt_gram_rule_set(b, r.doc_rule, document(b, &d));
        body = one_doc(b, wrap, llmrt_gram_call(b, r.doc_rule));
        body = llmrt_gram_cat(b, body, llmrt_gram_repeat(b, more_doc, &r, lo - 1, hi - 1));
    }
    if (wrap && wrap->lead_open && wrap->lead_close) {
        llmrt_gram_frag lead = llmrt_gram_cat(b, llmrt_gram_str(b, wrap->lead_open),
                                              until(b, wrap->lead_close));
        lead = llmrt_gram_cat(b, lead, llmrt_gram_json_ws(b));
        body = llmrt_gram_cat(b, llmrt_gram_opt(b, lead), body);
    }
    llmrt_gram_rule_set(b, root, body);
    TRY(llmrt_gram_builder_finish(b, root, out, err));
cleanup:
    llmrt_gram_schema_ctx_free(d.sc);
    llmrt_gram_builder_free(b);
    json_decref(schema);
    return st;
}

llmrt_status llmrt_gram_json_schema(const char *schema, size_t len, llmrt_gram **out,
                                    llmrt_error *err)
{
    return llmrt_gram_compile(LLMRT_GRAM_JSON_SCHEMA, schema, len, NULL, NULL, 0, NULL, out, err);
}

llmrt_status llmrt_gram_json_schema_value(const json_t *schema, llmrt_gram **out,
                                          llmrt_error *err)
{
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    llmrt_status st = llmrt_gram_json_schema(text, strlen(text), out, err);
    free(text);
    return st;
}

llmrt_status llmrt_gram_regex(const char *pattern, size_t len, llmrt_gram **out,
                              llmrt_error *err)
{
    return llmrt_gram_compile(LLMRT_GRAM_REGEX, pattern, len, NULL, NULL, 0, NULL, out, err);
}

llmrt_status llmrt_gram_choice(const char *const *choices, const size_t *lens, int32_t n,
                               llmrt_gram **out, llmrt_error *err)
{
    return llmrt_gram_compile(LLMRT_GRAM_CHOICE, NULL, 0, choices, lens, n, NULL, out, err);
}
