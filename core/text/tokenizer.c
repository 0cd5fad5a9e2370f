/* tokenizer.c — loading a Hugging Face tokenizer.json (and tokenizer_config.json) into the
 * read-only tables of tokenizer_impl.h, and the lookups on them.
 *
 * Why strict: a tokenizer that silently skips a component it does not know produces
 * plausible but wrong ids, and the model then quietly answers worse. Every component type
 * is checked; anything unknown is an error naming the type and where it is in the file. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "fileutil.h"
#include "tokenizer_impl.h"

/* GPT-2's pre-tokenizer regex, used by ByteLevel when use_regex is true. */
static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Ids index dense per-id tables (tokenizer_impl.h), so the largest id sizes them: an id is
 * refused unless it is below the number of model.vocab entries plus added_tokens plus this
 * many unused ids. Real tokenizers number their tokens densely (a few holes at most), so the
 * tables stay proportional to what the file holds; an id of 1e9 never allocates gigabytes.
 * (A hash map for sparse ids would put a lookup on every decode for files that do not exist.) */
#define TOK_ID_SLACK 65536

typedef struct loader {
    llmrt_tokenizer *t;
    const char *where;
    llmrt_error *err;
    size_t n_vocab, n_added; /* entries in model.vocab and added_tokens */
    int64_t id_limit;        /* ids must be below: n_vocab + n_added + TOK_ID_SLACK */
} loader;

/* The id bound's failure, naming the key (`key` as printf'd by the caller). */
static llmrt_status id_too_large(const loader *L, const char *key, int64_t id)
{
    return llmrt_fail(L->err, LLMRT_ERR_FORMAT,
                      "%s: %s is %lld, but a tokenizer of %zu model.vocab entries and %zu "
                      "added_tokens numbers its tokens below %lld (ids may leave at most %d "
                      "unused)",
                      L->where, key, (long long)id, L->n_vocab, L->n_added,
                      (long long)L->id_limit, TOK_ID_SLACK);
}

static const char *type_of(const json_t *o)
{
    return json_string_value(json_object_get(o, "type"));
}

/* Optional boolean field: absent or null → def; otherwise must be a boolean. */
static llmrt_status get_bool(loader *L, const json_t *o, const char *key, int def, int *out,
                             const char *path)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return LLMRT_OK;
    }
    if (!json_is_boolean(v))
        return llmrt_fail(L->err, LLMRT_ERR_FORMAT, "%s: %s.%s must be true or false", L->where,
                          path, key);
    *out = json_is_true(v);
    return LLMRT_OK;
}

/* ---- normalizer ---- */

static llmrt_status parse_normalizer(loader *L, const json_t *n, const char *path)
{
    llmrt_status st = LLMRT_OK;
    llmrt_tokenizer *t = L->t;
    if (!n || json_is_null(n))
        return LLMRT_OK;
    if (!json_is_object(n))
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s must be an object or null", L->where, path);
    const char *type = type_of(n);
    if (!type)
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s has no \"type\"", L->where, path);
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.normalizers must be an array", L->where, path);
        for (size_t i = 0; i < json_array_size(list); i++) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.normalizers[%zu]", path, i);
            TRY(parse_normalizer(L, json_array_get(list, i), sub));
        }
        return LLMRT_OK;
    }
    static const struct {
        const char *name;
        tok_norm_kind kind;
    } known[] = {{"NFC", TOK_NORM_NFC},
                 {"NFD", TOK_NORM_NFD},
                 {"NFKC", TOK_NORM_NFKC},
                 {"NFKD", TOK_NORM_NFKD},
                 {"Lowercase", TOK_NORM_LOWERCASE}};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        if (strcmp(type, known[i].name) != 0)
            continue;
        if (t->n_norm == TOK_MAX_STAGES)
            FAIL(L->err, LLMRT_ERR_UNSUPPORTED, "%s: %s: more than %d normalizers", L->where,
                 path, TOK_MAX_STAGES);
        t->norm[t->n_norm++] = known[i].kind;
        return LLMRT_OK;
    }
    FAIL(L->err, LLMRT_ERR_UNSUPPORTED,
         "%s: %s.type \"%s\" is not supported (supported normalizers: NFC, NFD, NFKC, NFKD, "
         "Lowercase, Sequence)",
         L->where, path, type);
cleanup:
    return st;
}

/* ---- pre-tokenizer ---- */

static llmrt_status parse_pre(loader *L, const json_t *p, const char *path)
{
    llmrt_status st = LLMRT_OK;
    llmrt_tokenizer *t = L->t;
    if (!p || json_is_null(p))
        return LLMRT_OK;
    if (!json_is_object(p))
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s must be an object or null", L->where, path);
    const char *type = type_of(p);
    if (!type)
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s has no \"type\"", L->where, path);
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list))
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.pretokenizers must be an array", L->where,
                 path);
        for (size_t i = 0; i < json_array_size(list); i++) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", path, i);
            TRY(parse_pre(L, json_array_get(list, i), sub));
        }
        return LLMRT_OK;
    }
    if (strcmp(type, "Split") != 0 && strcmp(type, "ByteLevel") != 0)
        FAIL(L->err, LLMRT_ERR_UNSUPPORTED,
             "%s: %s.type \"%s\" is not supported (supported pre-tokenizers: Split, ByteLevel, "
             "Sequence)",
             L->where, path, type);
    if (t->n_pre == TOK_MAX_STAGES)
        FAIL(L->err, LLMRT_ERR_UNSUPPORTED, "%s: %s: more than %d pre-tokenizers", L->where,
             path, TOK_MAX_STAGES);
    tok_pre *pre = &t->pre[t->n_pre];
    memset(pre, 0, sizeof *pre);
    char sub[300];
    if (strcmp(type, "ByteLevel") == 0) {
        int use_regex;
        pre->kind = TOK_PRE_BYTELEVEL;
        TRY(get_bool(L, p, "add_prefix_space", 1, &pre->add_prefix_space, path));
        TRY(get_bool(L, p, "use_regex", 1, &use_regex, path));
        if (use_regex) {
            snprintf(sub, sizeof sub, "%s (GPT-2 regex)", path);
            pre->re = llmrt__tok_regex(gpt2_regex, sizeof gpt2_regex - 1, 0, L->where, sub, L->err);
            if (!pre->re)
                return L->err ? L->err->code : LLMRT_ERR_INTERNAL;
        }
        t->n_pre++;
        return LLMRT_OK;
    }
    pre->kind = TOK_PRE_SPLIT;
    const json_t *pat = json_object_get(p, "pattern");
    const json_t *rx = json_object_get(pat, "Regex"), *str = json_object_get(pat, "String");
    if (!json_is_object(pat) || (!json_is_string(rx) && !json_is_string(str)))
        FAIL(L->err, LLMRT_ERR_FORMAT,
             "%s: %s.pattern must be {\"Regex\": \"...\"} or {\"String\": \"...\"}", L->where, path);
    const json_t *pv = json_is_string(rx) ? rx : str;
    snprintf(sub, sizeof sub, "%s.pattern", path);
    pre->re = llmrt__tok_regex(json_string_value(pv), json_string_length(pv), pv == str,
                               L->where, sub, L->err);
    if (!pre->re)
        return L->err ? L->err->code : LLMRT_ERR_INTERNAL;
    t->n_pre++; /* owned by the tokenizer from here on, freed with it */
    const char *beh = json_string_value(json_object_get(p, "behavior"));
    static const struct {
        const char *name;
        tok_split_behavior b;
    } behaviors[] = {{"Removed", TOK_SPLIT_REMOVED},
                     {"Isolated", TOK_SPLIT_ISOLATED},
                     {"MergedWithPrevious", TOK_SPLIT_MERGED_WITH_PREVIOUS},
                     {"MergedWithNext", TOK_SPLIT_MERGED_WITH_NEXT},
                     {"Contiguous", TOK_SPLIT_CONTIGUOUS}};
    size_t bi = 0;
    while (beh && bi < sizeof behaviors / sizeof *behaviors && strcmp(beh, behaviors[bi].name))
        bi++;
    if (!beh || bi == sizeof behaviors / sizeof *behaviors)
        FAIL(L->err, LLMRT_ERR_FORMAT,
             "%s: %s.behavior \"%s\" is not one of Removed, Isolated, MergedWithPrevious, "
             "MergedWithNext, Contiguous",
             L->where, path, beh ? beh : "(missing)");
    pre->behavior = behaviors[bi].b;
    TRY(get_bool(L, p, "invert", 0, &pre->invert, path));
cleanup:
    return st;
}

/* ---- post-processor ---- */

static llmrt_status append_ids(loader *L, int32_t **v, size_t *n, const json_t *ids,
                               const char *path)
{
    llmrt_status st = LLMRT_OK;
    if (!json_is_array(ids))
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.ids must be an array of ids", L->where, path);
    for (size_t i = 0; i < json_array_size(ids); i++) {
        const json_t *x = json_array_get(ids, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.ids[%zu] is not a valid id", L->where, path, i);
        int32_t *g = realloc(*v, (*n + 1) * sizeof *g);
        TRY_ALLOC(L->err, g, "post-processor ids");
        *v = g;
        g[(*n)++] = (int32_t)json_integer_value(x);
    }
cleanup:
    return st;
}

static llmrt_status parse_post(loader *L, const json_t *p, const char *path)
{
    llmrt_status st = LLMRT_OK;
    llmrt_tokenizer *t = L->t;
    if (!p || json_is_null(p))
        return LLMRT_OK;
    const char *type = json_is_object(p) ? type_of(p) : NULL;
    if (!type)
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s must be null or an object with a \"type\"",
             L->where, path);
    if (strcmp(type, "ByteLevel") == 0)
        return LLMRT_OK; /* only adjusts offsets, which llmrt does not report */
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(p, "processors");
        if (!json_is_array(list))
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.processors must be an array", L->where, path);
        for (size_t i = 0; i < json_array_size(list); i++) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.processors[%zu]", path, i);
            TRY(parse_post(L, json_array_get(list, i), sub));
        }
        return LLMRT_OK;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        FAIL(L->err, LLMRT_ERR_UNSUPPORTED,
             "%s: %s.type \"%s\" is not supported (supported post-processors: ByteLevel, "
             "TemplateProcessing, Sequence)",
             L->where, path, type);
    if (t->post_prefix || t->post_suffix)
        FAIL(L->err, LLMRT_ERR_UNSUPPORTED, "%s: %s: only one TemplateProcessing is supported",
             L->where, path);
    const json_t *single = json_object_get(p, "single");
    const json_t *specials = json_object_get(p, "special_tokens");
    if (!json_is_array(single))
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.single must be an array", L->where, path);
    int seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        const json_t *item = json_array_get(single, i);
        const json_t *sp = json_object_get(item, "SpecialToken");
        const json_t *sq = json_object_get(item, "Sequence");
        char sub[300];
        snprintf(sub, sizeof sub, "%s.single[%zu]", path, i);
        if (json_is_object(sq)) {
            const char *id = json_string_value(json_object_get(sq, "id"));
            if (!id || strcmp(id, "A") != 0 || seen_a)
                FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s: a single-sequence template has exactly one Sequence \"A\"",
                     L->where, sub);
            seen_a = 1;
        } else if (json_is_object(sp)) {
            const char *name = json_string_value(json_object_get(sp, "id"));
            const json_t *def = name ? json_object_get(specials, name) : NULL;
            if (!json_is_object(def))
                FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s names special token \"%s\", which %s.special_tokens does not define",
                     L->where, sub, name ? name : "(missing)", path);
            if (seen_a)
                TRY(append_ids(L, &t->post_suffix, &t->n_post_suffix, json_object_get(def, "ids"), sub));
            else
                TRY(append_ids(L, &t->post_prefix, &t->n_post_prefix, json_object_get(def, "ids"), sub));
        } else {
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s must be {\"SpecialToken\": ...} or {\"Sequence\": ...}",
                 L->where, sub);
        }
    }
    if (!seen_a)
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.single has no Sequence \"A\"", L->where, path);
cleanup:
    return st;
}

/* ---- model ---- */

static llmrt_status parse_model(loader *L, const json_t *m)
{
    llmrt_status st = LLMRT_OK;
    llmrt_tokenizer *t = L->t;
    if (!json_is_object(m))
        FAIL(L->err, LLMRT_ERR_FORMAT,
             "%s: no \"model\" object (a tokenizer.json has model: {type: \"BPE\", vocab, merges})",
             L->where);
    const char *type = type_of(m);
    if (type && strcmp(type, "BPE") != 0)
        FAIL(L->err, LLMRT_ERR_UNSUPPORTED, "%s: model.type \"%s\" is not supported (only BPE)",
             L->where, type);
    const json_t *vocab = json_object_get(m, "vocab"), *merges = json_object_get(m, "merges");
    if (!json_is_object(vocab))
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: model.vocab must be an object of token: id", L->where);
    if (!json_is_array(merges))
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: model.merges must be an array", L->where);
    const json_t *dropout = json_object_get(m, "dropout");
    if (dropout && !json_is_null(dropout) && json_number_value(dropout) > 0)
        FAIL(L->err, LLMRT_ERR_UNSUPPORTED, "%s: model.dropout %g: BPE dropout is a training option; set it to null",
             L->where, json_number_value(dropout));
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const char *a = json_string_value(json_object_get(m, affixes[i]));
        if (a && a[0])
            FAIL(L->err, LLMRT_ERR_UNSUPPORTED, "%s: model.%s \"%s\" is not supported (only empty)",
                 L->where, affixes[i], a);
    }
    size_t bytes = 0;
    const char *key;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach((json_t *)vocab, key, klen, val) bytes += klen;
    TRY(llmrt_bpe_new(json_object_size(vocab), bytes, json_array_size(merges), &t->bpe, L->err));
    json_object_keylen_foreach((json_t *)vocab, key, klen, val)
    {
        if (!json_is_integer(val) || json_integer_value(val) < 0 ||
            json_integer_value(val) >= INT32_MAX)
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: model.vocab[\"%.*s\"] must be an id (an integer >= 0)",
                 L->where, (int)klen, key);
        if (json_integer_value(val) >= L->id_limit) {
            char k[160];
            snprintf(k, sizeof k, "model.vocab[\"%.*s\"]", klen > 100 ? 100 : (int)klen, key);
            return id_too_large(L, k, json_integer_value(val));
        }
        if (llmrt_bpe_add_token(t->bpe, key, klen, (int32_t)json_integer_value(val), L->err)) {
            llmrt_error_prefix(L->err, "%s: model.vocab", L->where);
            return L->err ? L->err->code : LLMRT_ERR_FORMAT;
        }
    }
    for (size_t i = 0; i < json_array_size(merges); i++) {
        const json_t *mg = json_array_get(merges, i);
        const char *a, *b;
        size_t al, bl;
        if (json_is_string(mg)) { /* "a b": exactly one space */
            const char *s = json_string_value(mg), *sp = memchr(s, ' ', json_string_length(mg));
            if (!sp || memchr(sp + 1, ' ', json_string_length(mg) - (size_t)(sp + 1 - s)))
                FAIL(L->err, LLMRT_ERR_FORMAT, "%s: model.merges[%zu] \"%s\" must be two tokens separated by one space",
                     L->where, i, s);
            a = s, al = (size_t)(sp - s), b = sp + 1, bl = json_string_length(mg) - al - 1;
        } else if (json_is_array(mg) && json_array_size(mg) == 2 &&
                   json_is_string(json_array_get(mg, 0)) && json_is_string(json_array_get(mg, 1))) {
            a = json_string_value(json_array_get(mg, 0)), al = json_string_length(json_array_get(mg, 0));
            b = json_string_value(json_array_get(mg, 1)), bl = json_string_length(json_array_get(mg, 1));
        } else {
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: model.merges[%zu] must be \"a b\" or [\"a\", \"b\"]",
                 L->where, i);
        }
        if (i > INT32_MAX)
            FAIL(L->err, LLMRT_ERR_LIMIT, "%s: too many merges", L->where);
        if (llmrt_bpe_add_merge(t->bpe, a, al, b, bl, (int32_t)i, L->err)) {
            llmrt_error_prefix(L->err, "%s: model.merges[%zu]", L->where, i);
            return L->err ? L->err->code : LLMRT_ERR_FORMAT;
        }
    }
    llmrt_bpe_options opt = {.unk_id = -1, .cache = 1};
    TRY(get_bool(L, m, "ignore_merges", 0, &opt.ignore_merges, "model"));
    TRY(get_bool(L, m, "byte_fallback", 0, &opt.byte_fallback, "model"));
    TRY(get_bool(L, m, "fuse_unk", 0, &opt.fuse_unk, "model"));
    const json_t *unk = json_object_get(m, "unk_token");
    if (unk && !json_is_null(unk)) {
        if (!json_is_string(unk))
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: model.unk_token must be a string or null", L->where);
        opt.unk_id = llmrt_bpe_lookup(t->bpe, json_string_value(unk), json_string_length(unk));
        if (opt.unk_id < 0)
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: model.unk_token \"%s\" is not in model.vocab",
                 L->where, json_string_value(unk));
    }
    if (llmrt_bpe_finish(t->bpe, &opt, L->err)) {
        llmrt_error_prefix(L->err, "%s: model", L->where);
        return L->err ? L->err->code : LLMRT_ERR_FORMAT;
    }
cleanup:
    return st;
}

/* ---- added tokens ---- */

static int added_cmp_ctx_sort(const void *x, const void *y, void *ctx)
{
    const llmrt_tokenizer *t = ctx;
    const tok_added *a = &t->added[*(const uint32_t *)x], *b = &t->added[*(const uint32_t *)y];
    uint8_t fa = (uint8_t)a->match[0], fb = (uint8_t)b->match[0];
    if (fa != fb)
        return fa < fb ? -1 : 1;
    if (a->match_len != b->match_len)
        return a->match_len > b->match_len ? -1 : 1; /* longest first */
    return 0;
}

static llmrt_status build_set(loader *L, tok_added_set *set, int normalized)
{
    llmrt_status st = LLMRT_OK;
    llmrt_tokenizer *t = L->t;
    set->idx = malloc((t->n_added ? t->n_added : 1) * sizeof *set->idx);
    TRY_ALLOC(L->err, set->idx, "added-token index");
    set->n = 0;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].normalized == normalized && t->added[i].match_len > 0)
            set->idx[set->n++] = (uint32_t)i;
    qsort_r(set->idx, set->n, sizeof *set->idx, added_cmp_ctx_sort, t);
    size_t k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < set->n && b < 256 && (uint8_t)t->added[set->idx[k]].match[0] < b)
            k++;
        set->start[b] = (uint32_t)(b == 256 ? set->n : k);
    }
cleanup:
    return st;
}

static llmrt_status parse_added(loader *L, const json_t *list)
{
    llmrt_status st = LLMRT_OK;
    llmrt_tokenizer *t = L->t;
    if (list && !json_is_null(list) && !json_is_array(list))
        FAIL(L->err, LLMRT_ERR_FORMAT, "%s: added_tokens must be an array", L->where);
    size_t n = json_array_size(list);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    TRY_ALLOC(L->err, t->added, "added tokens");
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(list, i);
        const json_t *id = json_object_get(a, "id"), *content = json_object_get(a, "content");
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX)
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.id must be an integer >= 0", L->where, path);
        if (json_integer_value(id) >= L->id_limit) {
            char k[80];
            snprintf(k, sizeof k, "%s.id", path);
            return id_too_large(L, k, json_integer_value(id));
        }
        if (!json_is_string(content) || json_string_length(content) == 0)
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.content must be a non-empty string", L->where, path);
        tok_added *ta = &t->added[t->n_added];
        ta->id = (int32_t)json_integer_value(id);
        ta->len = json_string_length(content);
        ta->content = malloc(ta->len + 1);
        TRY_ALLOC(L->err, ta->content, "added token");
        memcpy(ta->content, json_string_value(content), ta->len + 1);
        t->n_added++;
        int special, lstrip, rstrip, normalized, single_word;
        TRY(get_bool(L, a, "special", 0, &special, path));
        TRY(get_bool(L, a, "lstrip", 0, &lstrip, path));
        TRY(get_bool(L, a, "rstrip", 0, &rstrip, path));
        TRY(get_bool(L, a, "normalized", !special, &normalized, path));
        TRY(get_bool(L, a, "single_word", 0, &single_word, path));
        ta->special = (uint8_t)special, ta->lstrip = (uint8_t)lstrip, ta->rstrip = (uint8_t)rstrip;
        ta->normalized = (uint8_t)normalized, ta->single_word = (uint8_t)single_word;
        if (llmrt__utf8_valid_prefix((const uint8_t *)ta->content, ta->len) != ta->len)
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s.content is not valid UTF-8", L->where, path);
        for (size_t j = 0; j + 1 < t->n_added; j++)
            if (t->added[j].len == ta->len && memcmp(t->added[j].content, ta->content, ta->len) == 0)
                FAIL(L->err, LLMRT_ERR_FORMAT, "%s: %s: \"%s\" is also added_tokens[%zu]", L->where,
                     path, ta->content, j);
        if (normalized && t->n_norm) {
            TRY(llmrt__tok_normalize(t, ta->content, ta->len, &ta->match, &ta->match_len, L->err));
        } else {
            ta->match = ta->content;
            ta->match_len = ta->len;
        }
    }
    TRY(build_set(L, &t->raw_set, 0));
    TRY(build_set(L, &t->norm_set, 1));
cleanup:
    return st;
}

/* ---- per-id tables ---- */

static llmrt_status build_id_tables(loader *L)
{
    llmrt_status st = LLMRT_OK;
    llmrt_tokenizer *t = L->t;
    int32_t vs = llmrt_bpe_vocab_size(t->bpe);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id >= vs)
            vs = t->added[i].id + 1;
    t->vocab_size = vs;
    size_t n = (size_t)(vs ? vs : 1);
    t->id_str = calloc(n, sizeof *t->id_str);
    t->id_bytes = calloc(n, sizeof *t->id_bytes);
    t->id_len = calloc(n, sizeof *t->id_len);
    t->id_special = calloc(n, 1);
    t->id_added = malloc(n * sizeof *t->id_added);
    TRY_ALLOC(L->err, t->id_str && t->id_bytes && t->id_len && t->id_special && t->id_added,
              "token tables");
    for (size_t i = 0; i < n; i++)
        t->id_added[i] = -1;
    for (size_t i = 0; i < t->n_added; i++) {
        if (t->id_added[t->added[i].id] >= 0)
            FAIL(L->err, LLMRT_ERR_FORMAT, "%s: added_tokens \"%s\" and \"%s\" share id %d", L->where,
                 t->added[t->id_added[t->added[i].id]].content, t->added[i].content, t->added[i].id);
        t->id_added[t->added[i].id] = (int32_t)i;
        t->id_special[t->added[i].id] = t->added[i].special;
    }
    size_t total = 0;
    for (int32_t id = 0; id < vs; id++) {
        size_t len = 0;
        if (t->id_added[id] >= 0)
            len = t->added[t->id_added[id]].len;
        else
            (void)llmrt_bpe_token(t->bpe, id, &len);
        total += 2 * len + 2;
    }
    t->arena = malloc(total ? total : 1);
    TRY_ALLOC(L->err, t->arena, "token strings");
    char *p = t->arena;
    for (int32_t id = 0; id < vs; id++) {
        size_t len = 0;
        const char *s;
        if (t->id_added[id] >= 0)
            s = t->added[t->id_added[id]].content, len = t->added[t->id_added[id]].len;
        else if (!(s = llmrt_bpe_token(t->bpe, id, &len)))
            continue;
        memcpy(p, s, len);
        p[len] = 0;
        t->id_str[id] = p;
        p += len + 1;
        /* Decoder output: with ByteLevel, each char maps back to its byte — unless some
         * char is outside the alphabet, then the token's own UTF-8 (HF's rule). */
        uint8_t *o = (uint8_t *)p;
        size_t k = 0;
        int mapped = t->decoder == TOK_DECODER_BYTELEVEL;
        for (size_t i = 0; mapped && i < len;) {
            int32_t cp;
            i += (size_t)llmrt__utf8_decode((const uint8_t *)s + i, &cp);
            int b = llmrt__bytelevel_byte(cp);
            if (b < 0)
                mapped = 0;
            else
                o[k++] = (uint8_t)b;
        }
        if (!mapped) {
            memcpy(o, s, len);
            k = len;
        }
        t->id_bytes[id] = o;
        t->id_len[id] = (uint32_t)k;
        p += k + 1;
    }
cleanup:
    return st;
}

llmrt_status llmrt_tokenizer_parse(const char *json, size_t len, const char *where,
                                   llmrt_tokenizer **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    json_t *root = NULL;
    *out = NULL;
    llmrt_tokenizer *t = calloc(1, sizeof *t);
    TRY_ALLOC(err, t, "tokenizer");
    t->bos_id = t->pad_id = -1;
    for (int b = 0; b < 256; b++) {
        uint8_t u[4] = {0};
        llmrt__utf8_encode(llmrt__bytelevel_char((uint8_t)b), u);
        t->bytelevel_utf8[b][0] = u[0], t->bytelevel_utf8[b][1] = u[1];
    }
    t->where = strdup(where ? where : "tokenizer.json");
    TRY_ALLOC(err, t->where, "tokenizer name");
    loader L = {t, t->where, err, 0, 0, 0};
    json_error_t jerr;
    root = json_loadb(json, len, JSON_ALLOW_NUL, &jerr);
    if (!root)
        FAIL(err, LLMRT_ERR_FORMAT, "%s:%d:%d: not valid JSON: %s", t->where, jerr.line,
             jerr.column, jerr.text);
    if (!json_is_object(root))
        FAIL(err, LLMRT_ERR_FORMAT, "%s: the top level must be a JSON object", t->where);
    /* json_*_size are 0 for a missing or mistyped member (reported by the parsers below) */
    L.n_vocab = json_object_size(json_object_get(json_object_get(root, "model"), "vocab"));
    L.n_added = json_array_size(json_object_get(root, "added_tokens"));
    L.id_limit = (int64_t)L.n_vocab + (int64_t)L.n_added + TOK_ID_SLACK;
    TRY(parse_normalizer(&L, json_object_get(root, "normalizer"), "normalizer"));
    TRY(parse_pre(&L, json_object_get(root, "pre_tokenizer"), "pre_tokenizer"));
    TRY(parse_model(&L, json_object_get(root, "model")));
    TRY(parse_added(&L, json_object_get(root, "added_tokens")));
    TRY(parse_post(&L, json_object_get(root, "post_processor"), "post_processor"));
    const json_t *dec = json_object_get(root, "decoder");
    if (dec && !json_is_null(dec)) {
        const char *type = json_is_object(dec) ? type_of(dec) : NULL;
        if (!type)
            FAIL(err, LLMRT_ERR_FORMAT, "%s: decoder must be null or an object with a \"type\"",
                 t->where);
        if (strcmp(type, "ByteLevel") != 0)
            FAIL(err, LLMRT_ERR_UNSUPPORTED,
                 "%s: decoder.type \"%s\" is not supported (supported decoders: ByteLevel)",
                 t->where, type);
        t->decoder = TOK_DECODER_BYTELEVEL;
    }
    /* truncation and padding shape batches for training; llmrt never truncates prompts. */
    TRY(build_id_tables(&L));
    *out = t;
    t = NULL;
cleanup:
    json_decref(root);
    llmrt_tokenizer_free(t);
    return st;
}

void llmrt_tokenizer_free(llmrt_tokenizer *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_pre; i++)
        llmrt__tok_pre_free(&t->pre[i]);
    free(t->post_prefix);
    free(t->post_suffix);
    llmrt_bpe_free(t->bpe);
    for (size_t i = 0; i < t->n_added; i++) {
        if (t->added[i].match != t->added[i].content)
            free(t->added[i].match);
        free(t->added[i].content);
    }
    free(t->added);
    free(t->raw_set.idx);
    free(t->norm_set.idx);
    free(t->id_str);
    free(t->id_bytes);
    free(t->id_len);
    free(t->id_special);
    free(t->id_added);
    free(t->arena);
    free(t->chat_template);
    free(t->where);
    free(t);
}

/* ---- files ---- */

llmrt_status llmrt_tokenizer_load(const char *path, llmrt_tokenizer **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char *file = NULL, *dir = NULL, *data = NULL, *cfg = NULL;
    llmrt_tokenizer *t = NULL;
    size_t len;
    struct stat sb;
    *out = NULL;
    if (stat(path, &sb) != 0)
        FAIL(err, LLMRT_ERR_NOT_FOUND, "tokenizer %s: %s (give a tokenizer.json or a model folder holding one)",
             path, strerror(errno));
    size_t pl = strlen(path);
    file = malloc(pl + 32), dir = malloc(pl + 32), cfg = malloc(pl + 64);
    TRY_ALLOC(err, file && dir && cfg, "paths");
    if (S_ISDIR(sb.st_mode)) {
        snprintf(dir, pl + 32, "%s", path);
        snprintf(file, pl + 32, "%s/tokenizer.json", path);
        if (!llmrt_path_exists(file))
            FAIL(err, LLMRT_ERR_NOT_FOUND, "%s holds no tokenizer.json (is it a Hugging Face model folder?)",
                 path);
    } else {
        snprintf(file, pl + 32, "%s", path);
        snprintf(dir, pl + 32, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(dir, pl + 32, ".");
    }
    TRY(llmrt_read_file_bounded(file, LLMRT_MAX_TOKENIZER_BYTES, "tokenizer.json", &data, &len,
                                err));
    TRY(llmrt_tokenizer_parse(data, len, file, &t, err));
    snprintf(cfg, pl + 64, "%s/tokenizer_config.json", dir);
    if (llmrt_path_exists(cfg))
        TRY(llmrt_tokenizer_load_config(t, cfg, err));
    /* transformers >= 4.43 may save the template beside the config; it then wins. */
    snprintf(cfg, pl + 64, "%s/chat_template.jinja", dir);
    if (llmrt_path_exists(cfg)) {
        char *tpl;
        size_t tl;
        TRY(llmrt_read_file_bounded(cfg, LLMRT_MAX_CONFIG_BYTES, "chat_template.jinja", &tpl,
                                    &tl, err));
        free(t->chat_template);
        t->chat_template = tpl;
    }
    *out = t;
    t = NULL;
cleanup:
    llmrt_tokenizer_free(t);
    free(file);
    free(dir);
    free(data);
    free(cfg);
    return st;
}

/* A special-token field of tokenizer_config.json: "str", {"content": "str", ...}, null. */
static llmrt_status config_token(llmrt_tokenizer *t, const json_t *root, const char *key,
                                 const char *where, int32_t *id, llmrt_error *err)
{
    const json_t *v = json_object_get(root, key);
    *id = -1;
    if (!v || json_is_null(v))
        return LLMRT_OK;
    if (json_is_object(v))
        v = json_object_get(v, "content");
    if (!json_is_string(v))
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s: %s must be a token string, {\"content\": ...} or null", where, key);
    *id = llmrt_tokenizer_token_id(t, json_string_value(v));
    if (*id < 0)
        return llmrt_fail(err, LLMRT_ERR_FORMAT, "%s: %s \"%s\" is not a token of %s", where, key,
                          json_string_value(v), t->where);
    return LLMRT_OK;
}

llmrt_status llmrt_tokenizer_parse_config(llmrt_tokenizer *t, const char *json, size_t len,
                                          const char *where, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    json_error_t jerr;
    char *tpl = NULL;
    /* ints as reals: some configs carry model_max_length = 1e30 as an integer literal */
    json_t *root = json_loadb(json, len, JSON_DECODE_INT_AS_REAL, &jerr);
    if (!root)
        FAIL(err, LLMRT_ERR_FORMAT, "%s:%d:%d: not valid JSON: %s", where, jerr.line, jerr.column,
             jerr.text);
    if (!json_is_object(root))
        FAIL(err, LLMRT_ERR_FORMAT, "%s: the top level must be a JSON object", where);
    int32_t eos, bos, pad;
    TRY(config_token(t, root, "eos_token", where, &eos, err));
    TRY(config_token(t, root, "bos_token", where, &bos, err));
    TRY(config_token(t, root, "pad_token", where, &pad, err));
    const json_t *ct = json_object_get(root, "chat_template");
    if (json_is_string(ct)) {
        tpl = strdup(json_string_value(ct));
        TRY_ALLOC(err, tpl, "chat template");
    } else if (json_is_array(ct)) { /* [{name, template}]: the "default" one */
        for (size_t i = 0; i < json_array_size(ct); i++) {
            const json_t *e = json_array_get(ct, i);
            const char *name = json_string_value(json_object_get(e, "name"));
            const char *text = json_string_value(json_object_get(e, "template"));
            if (name && text && strcmp(name, "default") == 0) {
                tpl = strdup(text);
                TRY_ALLOC(err, tpl, "chat template");
            }
        }
        if (!tpl)
            FAIL(err, LLMRT_ERR_FORMAT, "%s: chat_template is a list without a \"default\" entry",
                 where);
    } else if (ct && !json_is_null(ct)) {
        FAIL(err, LLMRT_ERR_FORMAT, "%s: chat_template must be a string or a list of {name, template}",
             where);
    }
    t->n_eos = 0;
    if (eos >= 0)
        t->eos_ids[t->n_eos++] = eos;
    t->bos_id = bos;
    t->pad_id = pad;
    free(t->chat_template);
    t->chat_template = tpl;
    tpl = NULL;
cleanup:
    free(tpl);
    json_decref(root);
    return st;
}

llmrt_status llmrt_tokenizer_load_config(llmrt_tokenizer *t, const char *path, llmrt_error *err)
{
    char *data;
    size_t len;
    llmrt_status st = llmrt_read_file_bounded(path, LLMRT_MAX_CONFIG_BYTES,
                                              "tokenizer_config.json", &data, &len, err);
    if (st != LLMRT_OK)
        return st;
    st = llmrt_tokenizer_parse_config(t, data, len, path, err);
    free(data);
    return st;
}

/* ---- lookups ---- */

int32_t llmrt_tokenizer_vocab_size(const llmrt_tokenizer *t) { return t->vocab_size; }

int32_t llmrt_tokenizer_token_id(const llmrt_tokenizer *t, const char *token)
{
    size_t len = strlen(token);
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && memcmp(t->added[i].content, token, len) == 0)
            return t->added[i].id;
    return llmrt_bpe_lookup(t->bpe, token, len);
}

const char *llmrt_tokenizer_token_str(const llmrt_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->vocab_size ? t->id_str[id] : NULL;
}

int llmrt_tokenizer_is_special(const llmrt_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->vocab_size && t->id_special[id];
}

size_t llmrt_tokenizer_added_count(const llmrt_tokenizer *t) { return t->n_added; }

const char *llmrt_tokenizer_added_at(const llmrt_tokenizer *t, size_t i, size_t *len,
                                     int *special)
{
    if (i >= t->n_added)
        return NULL;
    if (len)
        *len = t->added[i].len;
    if (special)
        *special = t->added[i].special;
    return t->added[i].content;
}

const uint8_t *llmrt_tokenizer_token_bytes(const llmrt_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->vocab_size || !t->id_str[id])
        return NULL;
    *len = t->id_len[id];
    return t->id_bytes[id];
}

size_t llmrt_tokenizer_eos_ids(const llmrt_tokenizer *t, const int32_t **ids)
{
    *ids = t->eos_ids;
    return t->n_eos;
}

int32_t llmrt_tokenizer_bos_id(const llmrt_tokenizer *t) { return t->bos_id; }
int32_t llmrt_tokenizer_pad_id(const llmrt_tokenizer *t) { return t->pad_id; }
const char *llmrt_tokenizer_chat_template(const llmrt_tokenizer *t) { return t->chat_template; }
