/* test_tokenizer.c — the tokenizer on small hand-built tokenizer.json files, where every
 * expected id can be worked out by hand: BPE merge order (rank, then leftmost; stale
 * entries), both merge spellings, long runs, byte fallback / unk, ignore_merges, the five
 * Split behaviors and invert, normalizers, added-token options (lstrip, rstrip,
 * single_word, normalized, special-as-text), the Oniguruma \s dialect, TemplateProcessing,
 * decoding (lossy UTF-8, skip special), the streaming detokenizer against whole decodes,
 * tokenizer_config.json, and malformed files that must fail with a specific message.
 *
 * The real Qwen3 tokenizer is tested in test_tokenizer_qwen3.c. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "tokenizer.h"
#include "tokenizer_impl.h"

/* A tokenizer.json from its parts (each a JSON text). */
static char *tj(const char *normalizer, const char *pre, const char *vocab, const char *merges,
                const char *added, const char *post, const char *decoder, const char *model_extra)
{
    char *s = NULL;
    int n = asprintf(&s,
                     "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
                     "\"added_tokens\":%s,\"normalizer\":%s,\"pre_tokenizer\":%s,"
                     "\"post_processor\":%s,\"decoder\":%s,\"model\":{\"type\":\"BPE\","
                     "\"dropout\":null,\"unk_token\":null,\"vocab\":%s,\"merges\":%s%s}}",
                     added ? added : "[]", normalizer ? normalizer : "null", pre ? pre : "null",
                     post ? post : "null", decoder ? decoder : "null", vocab, merges,
                     model_extra ? model_extra : "");
    ck_assert_int_ge(n, 0);
    return s;
}

static llmrt_tokenizer *load_ok(char *json)
{
    llmrt_tokenizer *t = NULL;
    llmrt_error err = {0};
    llmrt_status st = llmrt_tokenizer_parse(json, strlen(json), "test.json", &t, &err);
    ck_assert_msg(st == LLMRT_OK, "parse failed: %s", err.msg);
    free(json);
    return t;
}

static void load_fails(char *json, llmrt_status code, const char *needle)
{
    llmrt_tokenizer *t = NULL;
    llmrt_error err = {0};
    llmrt_status st = llmrt_tokenizer_parse(json, strlen(json), "test.json", &t, &err);
    ck_assert_msg(st == code, "expected status %d, got %d (%s) for %s", code, st, err.msg, json);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, needle), "message \"%s\" lacks \"%s\"", err.msg, needle);
    ck_assert_msg(strstr(err.msg, "test.json"), "message \"%s\" does not name the file", err.msg);
    free(json);
}

/* Encode and compare with an expected id list (terminated by -1). */
static void expect_ids(const llmrt_tokenizer *t, const char *text, size_t len, uint32_t flags,
                       const int32_t *want)
{
    int32_t *ids;
    size_t n, nw = 0;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_tokenizer_encode(t, text, len, flags, &ids, &n, &err) == LLMRT_OK,
                  "encode failed: %s", err.msg);
    while (want[nw] >= 0)
        nw++;
    char got[512] = "", exp[512] = "";
    for (size_t i = 0; i < n && strlen(got) < 480; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%d ", ids[i]);
    for (size_t i = 0; i < nw && strlen(exp) < 480; i++)
        snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%d ", want[i]);
    ck_assert_msg(n == nw && memcmp(ids, want, n * sizeof *ids) == 0,
                  "\"%.*s\": got [%s], want [%s]", (int)(len > 60 ? 60 : len), text, got, exp);
    free(ids);
}
#define EXPECT(t, text, flags, ...)                                                           \
    do {                                                                                      \
        static const int32_t want_[] = {__VA_ARGS__, -1};                                     \
        expect_ids((t), (text), strlen(text), (flags), want_);                                \
    } while (0)

static char *decode_str(const llmrt_tokenizer *t, const int32_t *ids, size_t n, int skip)
{
    char *text;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_tokenizer_decode(t, ids, n, skip, &text, NULL, &err) == LLMRT_OK,
                  "decode failed: %s", err.msg);
    return text;
}

/* ---- BPE ---- */

static const char abc_vocab[] =
    "{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"bc\":4,\"abc\":5,\"aa\":6,\"aaaa\":7,\"aaaaaaaa\":8}";

START_TEST(bpe_merge_rank_order)
{
    /* "b c" outranks "a b": abc → a + bc → abc. */
    llmrt_tokenizer *t = load_ok(tj(NULL, NULL, abc_vocab, "[\"b c\",\"a b\",\"a bc\"]", NULL, NULL, NULL, NULL));
    EXPECT(t, "abc", 0, 5);
    EXPECT(t, "ab", 0, 3);
    EXPECT(t, "cab", 0, 2, 3);
    llmrt_tokenizer_free(t);
    /* Now "a b" first: ab + c, and there is no "ab c" merge. */
    t = load_ok(tj(NULL, NULL, abc_vocab, "[\"a b\",\"b c\",\"a bc\"]", NULL, NULL, NULL, NULL));
    EXPECT(t, "abc", 0, 3, 2);
    EXPECT(t, "bc", 0, 4);
    EXPECT(t, "abcbc", 0, 3, 2, 4);
    llmrt_tokenizer_free(t);
}
END_TEST

START_TEST(bpe_leftmost_first_and_pairs_spelling)
{
    /* Equal ranks (the same pair twice): the leftmost merges first, so aaa = aa + a. */
    const char *merges[] = {"[\"a a\",\"aa aa\",\"aaaa aaaa\"]",
                            "[[\"a\",\"a\"],[\"aa\",\"aa\"],[\"aaaa\",\"aaaa\"]]"};
    for (int i = 0; i < 2; i++) {
        llmrt_tokenizer *t = load_ok(tj(NULL, NULL, abc_vocab, merges[i], NULL, NULL, NULL, NULL));
        EXPECT(t, "a", 0, 0);
        EXPECT(t, "aaa", 0, 6, 0);
        EXPECT(t, "aaaaa", 0, 7, 0);
        EXPECT(t, "aaaaaaaaaaa", 0, 8, 6, 0);
        llmrt_tokenizer_free(t);
    }
}
END_TEST

START_TEST(bpe_long_run)
{
    /* 10,001 letters: 1250 × "aaaaaaaa" + "a". Quadratic merging would take seconds. */
    llmrt_tokenizer *t = load_ok(tj(NULL, NULL, abc_vocab, "[\"a a\",\"aa aa\",\"aaaa aaaa\"]", NULL, NULL, NULL, NULL));
    size_t len = 10001;
    char *text = malloc(len);
    memset(text, 'a', len);
    int32_t *ids;
    size_t n;
    llmrt_error err = {0};
    for (int pass = 0; pass < 2; pass++) { /* second pass: too long for the cache, same answer */
        ck_assert_int_eq(llmrt_tokenizer_encode(t, text, len, 0, &ids, &n, &err), LLMRT_OK);
        ck_assert_uint_eq(n, 1251);
        for (size_t i = 0; i < 1250; i++)
            ck_assert_int_eq(ids[i], 8);
        ck_assert_int_eq(ids[1250], 0);
        free(ids);
    }
    free(text);
    llmrt_tokenizer_free(t);
}
END_TEST

START_TEST(bpe_unknown_chars)
{
    /* No unk, no fallback: unknown chars vanish before merging (as in HF), so the a and b
     * around the x become neighbours and merge. */
    llmrt_tokenizer *t = load_ok(tj(NULL, NULL, abc_vocab, "[\"a b\"]", NULL, NULL, NULL, NULL));
    EXPECT(t, "axb", 0, 3);
    llmrt_tokenizer_free(t);
    /* unk_token, fused and not. */
    char *j;
    j = strdup("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2},\"merges\":[],"
               "\"unk_token\":\"<unk>\",\"fuse_unk\":true}}");
    t = load_ok(j);
    EXPECT(t, "axyb\xC3\xA9" "a", 0, 1, 0, 2, 0, 1);
    llmrt_tokenizer_free(t);
    j = strdup("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2},\"merges\":[],"
               "\"unk_token\":\"<unk>\",\"fuse_unk\":false}}");
    t = load_ok(j);
    EXPECT(t, "axyb", 0, 1, 0, 0, 2);
    llmrt_tokenizer_free(t);
    /* byte_fallback: é = C3 A9 → <0xC3> <0xA9>. */
    j = strdup("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"<unk>\":0,\"a\":1,\"<0xC3>\":2,\"<0xA9>\":3},"
               "\"merges\":[],\"unk_token\":\"<unk>\",\"byte_fallback\":true}}");
    t = load_ok(j);
    EXPECT(t, "a\xC3\xA9z", 0, 1, 2, 3, 0);
    llmrt_tokenizer_free(t);
}
END_TEST

START_TEST(bpe_ignore_merges)
{
    /* "abc" is in the vocab: with ignore_merges it is one token even though no merge
     * sequence reaches it. */
    const char *vocab = "{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"abc\":4}";
    llmrt_tokenizer *t = load_ok(tj(NULL, NULL, vocab, "[\"a b\"]", NULL, NULL, NULL, NULL));
    EXPECT(t, "abc", 0, 3, 2);
    llmrt_tokenizer_free(t);
    t = load_ok(tj(NULL, NULL, vocab, "[\"a b\"]", NULL, NULL, NULL, ",\"ignore_merges\":true"));
    EXPECT(t, "abc", 0, 4);
    EXPECT(t, "abcc", 0, 3, 2, 2);
    llmrt_tokenizer_free(t);
}
END_TEST

/* ---- pre-tokenizers ---- */

static const char dash_vocab[] = "{\"a\":0,\"b\":1,\"-\":2,\"a-\":3,\"-b\":4,\"a-b\":5,\"--\":6}";
static const char dash_merges[] = "[\"a -\",\"- b\",\"a- b\",\"- -\"]";

static llmrt_tokenizer *split_tok(const char *behavior, int invert, const char *pattern)
{
    char pre[256];
    snprintf(pre, sizeof pre,
             "{\"type\":\"Split\",\"pattern\":%s,\"behavior\":\"%s\",\"invert\":%s}", pattern,
             behavior, invert ? "true" : "false");
    return load_ok(tj(NULL, pre, dash_vocab, dash_merges, NULL, NULL, NULL, NULL));
}

START_TEST(split_behaviors)
{
    /* Without a pre-tokenizer the whole text is one word: a-b merges to one token. */
    llmrt_tokenizer *t = load_ok(tj(NULL, NULL, dash_vocab, dash_merges, NULL, NULL, NULL, NULL));
    EXPECT(t, "a-b", 0, 5);
    llmrt_tokenizer_free(t);
    const char *lit = "{\"String\":\"-\"}", *rx = "{\"Regex\":\"-\"}";
    for (int k = 0; k < 2; k++) {
        const char *pat = k ? rx : lit;
        t = split_tok("Isolated", 0, pat);
        EXPECT(t, "a-b", 0, 0, 2, 1);
        EXPECT(t, "a--b", 0, 0, 2, 2, 1);
        llmrt_tokenizer_free(t);
        t = split_tok("Removed", 0, pat);
        EXPECT(t, "a-b", 0, 0, 1);
        EXPECT(t, "-a--b-", 0, 0, 1);
        llmrt_tokenizer_free(t);
        t = split_tok("MergedWithPrevious", 0, pat);
        EXPECT(t, "a-b", 0, 3, 1);
        EXPECT(t, "a--b", 0, 3, 2, 1); /* the second - follows a match: alone */
        EXPECT(t, "-b", 0, 2, 1);
        llmrt_tokenizer_free(t);
        t = split_tok("MergedWithNext", 0, pat);
        EXPECT(t, "a-b", 0, 0, 4);
        EXPECT(t, "a--b", 0, 0, 2, 4);
        EXPECT(t, "a-", 0, 0, 2);
        llmrt_tokenizer_free(t);
        t = split_tok("Contiguous", 0, pat);
        EXPECT(t, "a--b", 0, 0, 6, 1);
        EXPECT(t, "a-b", 0, 0, 2, 1);
        llmrt_tokenizer_free(t);
        /* invert: the pattern names the pieces to keep; Removed drops the rest. */
        t = split_tok("Removed", 1, pat);
        EXPECT(t, "a-b", 0, 2);
        llmrt_tokenizer_free(t);
    }
    /* Sequence of two Splits: split on "-" then on "b". */
    t = load_ok(tj(NULL,
                   "{\"type\":\"Sequence\",\"pretokenizers\":["
                   "{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"MergedWithNext\",\"invert\":false},"
                   "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"b\"},\"behavior\":\"Isolated\",\"invert\":false}]}",
                   dash_vocab, dash_merges, NULL, NULL, NULL, NULL));
    EXPECT(t, "a-b", 0, 0, 2, 1);
    llmrt_tokenizer_free(t);
}
END_TEST

/* A byte-level tokenizer over all 256 byte chars plus the given merges (array JSON, each
 * merge given as raw bytes in "a b" form and mapped here), with the Qwen3 pre-tokenizer. */
static char *bytelevel_json(const char *const *merge_pairs, size_t n_merges, int qwen_regex)
{
    json_t *vocab = json_object(), *merges = json_array();
    int next = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        int k = llmrt__utf8_encode(llmrt__bytelevel_char((uint8_t)b), u);
        char key[8];
        memcpy(key, u, (size_t)k);
        key[k] = 0;
        json_object_set_new(vocab, key, json_integer(next++));
    }
    for (size_t i = 0; i < n_merges; i++) {
        /* merge_pairs[2i], [2i+1]: raw byte strings → byte-level spelling */
        char parts[2][64];
        for (int h = 0; h < 2; h++) {
            const uint8_t *s = (const uint8_t *)merge_pairs[2 * i + h];
            size_t k = 0;
            for (; *s; s++)
                k += (size_t)llmrt__utf8_encode(llmrt__bytelevel_char(*s), (uint8_t *)parts[h] + k);
            parts[h][k] = 0;
        }
        char joined[128];
        snprintf(joined, sizeof joined, "%s%s", parts[0], parts[1]);
        if (!json_object_get(vocab, joined))
            json_object_set_new(vocab, joined, json_integer(next++));
        json_t *pair = json_array();
        json_array_append_new(pair, json_string(parts[0]));
        json_array_append_new(pair, json_string(parts[1]));
        json_array_append_new(merges, pair);
    }
    char *v = json_dumps(vocab, JSON_COMPACT), *m = json_dumps(merges, JSON_COMPACT);
    json_decref(vocab);
    json_decref(merges);
    const char *pre =
        qwen_regex
            ? "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
              "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "
              "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
              "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
              "\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]}"
            : "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}";
    char *j = tj("{\"type\":\"NFC\"}", pre, v, m,
                 "[{\"id\":1000,\"content\":\"<|end|>\",\"special\":true,\"normalized\":false,"
                 "\"lstrip\":false,\"rstrip\":false,\"single_word\":false}]",
                 "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}",
                 "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}",
                 NULL);
    free(v);
    free(m);
    return j;
}

START_TEST(oniguruma_whitespace_dialect)
{
    int32_t *ids;
    size_t n;
    llmrt_error err = {0};
    /* Oniguruma's \s does not match U+180E (Unicode made it a format char); PCRE2's does,
     * so llmrt spells \s out. In "a" " " U+180E "b", Oniguruma sees " " U+180E as one piece
     * (" ?[^\s\p{L}\p{N}]+"), which the merges below make a single token; PCRE2's own \s
     * would split " " | U+180E "b" instead. */
    const char *m[] = {"\xE1", "\xA0", "\xE1\xA0", "\x8E", " ", "\xE1\xA0\x8E"};
    llmrt_tokenizer *t = load_ok(bytelevel_json(m, 3, 1));
    int32_t id = llmrt_tokenizer_token_id(t, "\xC4\xA0\xC3\xA1\xC5\x82\xC4\xB0"); /* Ġáłİ */
    ck_assert_int_ge(id, 256);
    ck_assert_int_eq(llmrt_tokenizer_encode(t, "a \xE1\xA0\x8E" "b", 6, 0, &ids, &n, &err), LLMRT_OK);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ids[0], 'a'); /* byte b is vocab id b */
    ck_assert_int_eq(ids[1], id);
    ck_assert_int_eq(ids[2], 'b');
    free(ids);
    llmrt_tokenizer_free(t);
    /* U+0085 (NEL) is whitespace for both: "x" NEL " " "\n" → "x" + NEL" \n" (\s*[\r\n]+). */
    const char *m1[] = {"\xC2", "\x85", "\xC2\x85", " ", "\xC2\x85 ", "\n"};
    t = load_ok(bytelevel_json(m1, 3, 1));
    id = llmrt_tokenizer_token_id(t, "\xC3\x82\xC4\xA7\xC4\xA0\xC4\x8A"); /* ÂħĠĊ */
    ck_assert_int_ge(id, 256);
    ck_assert_int_eq(llmrt_tokenizer_encode(t, "x\xC2\x85 \n", 5, 0, &ids, &n, &err), LLMRT_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 'x');
    ck_assert_int_eq(ids[1], id);
    free(ids);
    llmrt_tokenizer_free(t);
    /* U+FEFF is not whitespace for Oniguruma: after "a", BOM + "\n" is one piece through
     * " ?[^\s\p{L}\p{N}]+[\r\n]*", and merges to one token. */
    const char *m2[] = {"\xEF", "\xBB", "\xEF\xBB", "\xBF", "\xEF\xBB\xBF", "\n"};
    t = load_ok(bytelevel_json(m2, 3, 1));
    id = llmrt_tokenizer_token_id(t, "\xC3\xAF\xC2\xBB\xC2\xBF\xC4\x8A"); /* ï»¿Ċ */
    ck_assert_int_ge(id, 256);
    ck_assert_int_eq(llmrt_tokenizer_encode(t, "a\xEF\xBB\xBF\n", 5, 0, &ids, &n, &err), LLMRT_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[1], id);
    free(ids);
    llmrt_tokenizer_free(t);
}
END_TEST

START_TEST(bytelevel_gpt2_regex_and_roundtrip)
{
    /* ByteLevel with use_regex: GPT-2 pieces. " hello" merges to one token only when the
     * space and the letters share a piece. */
    const char *m[] = {"h", "e", "he", "l", "hel", "l", "hell", "o", " ", "hello"};
    llmrt_tokenizer *t = load_ok(bytelevel_json(m, 5, 0));
    int32_t sp_hello = llmrt_tokenizer_token_id(t, "\xC4\xA0hello"); /* Ġhello */
    int32_t hello = llmrt_tokenizer_token_id(t, "hello");
    ck_assert_int_ge(sp_hello, 256);
    {
        int32_t want[] = {hello, sp_hello, sp_hello, -1};
        expect_ids(t, "hello hello hello", 17, 0, want);
    }
    /* Every byte string that is valid UTF-8 round-trips (NFC text stays as it is). */
    unsigned seed = 7;
    for (int iter = 0; iter < 300; iter++) {
        char text[64];
        size_t len = 0;
        int n = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 20;
        static const char *pieces[] = {"a", " ", "\n", "\t", "h", "hello", " hello", "\xC3\xA9",
                                       "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "1", "!!", "\r\n", "<|end|>"};
        for (int i = 0; i < n; i++) {
            const char *p = pieces[((seed = seed * 1103515245u + 12345u) >> 16) % 14];
            if (len + strlen(p) < sizeof text) {
                memcpy(text + len, p, strlen(p));
                len += strlen(p);
            }
        }
        int32_t *ids;
        size_t k;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_tokenizer_encode(t, text, len, 0, &ids, &k, &err), LLMRT_OK);
        char *back = decode_str(t, ids, k, 0);
        ck_assert_uint_eq(strlen(back), len);
        ck_assert(memcmp(back, text, len) == 0);
        free(back);
        free(ids);
    }
    llmrt_tokenizer_free(t);
}
END_TEST

/* ---- normalizers ---- */

START_TEST(normalizers)
{
    /* vocab: single chars, é precomposed (U+00E9), e + combining acute, f, i, fi ligature. */
    const char *vocab = "{\"e\":0,\"\\u00e9\":1,\"\\u0301\":2,\"f\":3,\"i\":4,\"\\ufb01\":5,"
                        "\"\\u0307\":6,\"a\":7,\"\\u00c5\":8,\"A\":9,\"\\u030a\":10,"
                        "\"\\u1ed1\":11,\"o\":12,\"\\u0302\":13}";
    llmrt_tokenizer *t = load_ok(tj("{\"type\":\"NFC\"}", NULL, vocab, "[]", NULL, NULL, NULL, NULL));
    EXPECT(t, "e\xCC\x81", 0, 1);      /* e + U+0301 → é */
    EXPECT(t, "ae\xCC\x81" "e", 0, 7, 1, 0);
    EXPECT(t, "o\xCC\x82\xCC\x81o", 0, 11, 12); /* o + circumflex + acute → ố, two marks */
    EXPECT(t, "\xC3\xA9\xCC\x82", 0, 1, 13);  /* é + circumflex: nothing to compose */
    EXPECT(t, "\xE2\x84\xAB", 0, 8);   /* U+212B ANGSTROM SIGN → Å */
    EXPECT(t, "\xEF\xAC\x81", 0, 5);   /* NFC keeps the ligature */
    llmrt_tokenizer_free(t);
    t = load_ok(tj("{\"type\":\"NFD\"}", NULL, vocab, "[]", NULL, NULL, NULL, NULL));
    EXPECT(t, "\xC3\xA9", 0, 0, 2);
    llmrt_tokenizer_free(t);
    t = load_ok(tj("{\"type\":\"NFKC\"}", NULL, vocab, "[]", NULL, NULL, NULL, NULL));
    EXPECT(t, "\xEF\xAC\x81", 0, 3, 4); /* ﬁ → f i */
    llmrt_tokenizer_free(t);
    t = load_ok(tj("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFD\"},{\"type\":\"Lowercase\"}]}",
                   NULL, vocab, "[]", NULL, NULL, NULL, NULL));
    EXPECT(t, "\xC3\x85", 0, 7, 10);     /* Å → A + ring → a + ring */
    EXPECT(t, "\xC4\xB0", 0, 4, 6);
    llmrt_tokenizer_free(t);
    t = load_ok(tj("{\"type\":\"Lowercase\"}", NULL, vocab, "[]", NULL, NULL, NULL, NULL));
    EXPECT(t, "\xC4\xB0", 0, 4, 6); /* İ → i + U+0307, the one lowercase longer than a char */
    EXPECT(t, "A\xC3\x85" "a", 0, 7, 7); /* å is not in the vocab: dropped, as HF drops it */
    llmrt_tokenizer_free(t);
}
END_TEST

/* ---- added tokens ---- */

/* Printable ASCII as single-char tokens (id = char - 32), and two Unicode spaces. */
static char *ascii_vocab(void)
{
    json_t *v = json_object();
    for (int c = 32; c < 127; c++) {
        char k[2] = {(char)c, 0};
        json_object_set_new(v, k, json_integer(c - 32));
    }
    json_object_set_new(v, "\xE2\x80\x80", json_integer(150)); /* U+2000 EN QUAD */
    json_object_set_new(v, "\xE3\x80\x80", json_integer(151)); /* U+3000 */
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    return s;
}

#define ADDED(id, content, special, lstrip, rstrip, normalized, single)                        \
    "{\"id\":" #id ",\"content\":\"" content "\",\"special\":" #special ",\"lstrip\":" #lstrip \
    ",\"rstrip\":" #rstrip ",\"normalized\":" #normalized ",\"single_word\":" #single "}"

START_TEST(added_token_options)
{
    char *v = ascii_vocab();
    llmrt_tokenizer *t = load_ok(tj(
        "{\"type\":\"Lowercase\"}", NULL, v, "[]",
        "[" ADDED(100, "[START]", true, false, false, false, false) ","
            ADDED(101, "[END]", true, false, false, false, false) ","
            ADDED(102, "me", false, true, true, true, false) ","
            ADDED(103, "cat", false, false, false, true, false) ","
            ADDED(104, "ox", false, false, false, true, true) "]",
        NULL, NULL, NULL));
    free(v);
    /* Normalized tokens match the lowercased text; "me" eats the spaces around it;
     * "ox" is single_word, so it does not match inside "box". */
#define C(ch) ((ch)-32)
    EXPECT(t, "[START] Call ME cat box ox [END]", 0, 100, C(' '), C('c'), C('a'), C('l'), C('l'), 102,
           103, C(' '), C('b'), C('o'), C('x'), C(' '), 104, C(' '), 101);
    /* Special tokens are matched before normalization: "[start]" is not "[START]". */
    EXPECT(t, "[start]", 0, C('['), C('s'), C('t'), C('a'), C('r'), C('t'), C(']'));
    /* special-as-text: "[END]" is lowercased text, "cat" is still an added token. */
    EXPECT(t, "cat[END]", LLMRT_ENCODE_SPECIAL_AS_TEXT, 103, C('['), C('e'), C('n'), C('d'), C(']'));
    /* single_word at the edges and next to punctuation. */
    EXPECT(t, "ox,ox", 0, 104, C(','), 104);
    EXPECT(t, "oxen", 0, C('o'), C('x'), C('e'), C('n'));
    llmrt_tokenizer_free(t);

    /* lstrip/rstrip take Unicode whitespace, but never what an earlier match took. */
    v = ascii_vocab();
    t = load_ok(tj(NULL, NULL, v, "[]",
                   "[" ADDED(200, "<m>", false, true, true, false, false) "]", NULL, NULL, NULL));
    free(v);
    EXPECT(t, "hi\xE2\x80\x80<m>\xE3\x80\x80x <m>  <m> y", 0, C('h'), C('i'), 200, C('x'), 200,
           200, C('y'));
    /* Leftmost-longest: with "<m>" and "<m>>" both present the longer wins. */
    llmrt_tokenizer_free(t);
    v = ascii_vocab();
    t = load_ok(tj(NULL, NULL, v, "[]",
                   "[" ADDED(200, "<m>", false, false, false, false, false) ","
                       ADDED(201, "<m>>", false, false, false, false, false) "]",
                   NULL, NULL, NULL));
    free(v);
    EXPECT(t, "<m>><m>", 0, 201, 200);
    ck_assert_int_eq(llmrt_tokenizer_token_id(t, "<m>>"), 201);
    ck_assert_str_eq(llmrt_tokenizer_token_str(t, 200), "<m>");
    ck_assert_int_eq(llmrt_tokenizer_vocab_size(t), 202);
    ck_assert_ptr_null(llmrt_tokenizer_token_str(t, 170)); /* a hole between 151 and 200 */
    llmrt_tokenizer_free(t);
#undef C
}
END_TEST

/* Literal spans (llmrt_tokenizer_encode_spans): a special token overlapping one is plain
 * text there and a special token everywhere else; non-special added tokens are untouched;
 * the rest is tokenized as a whole. The added-token accessors list them. */
START_TEST(literal_spans)
{
    char *v = ascii_vocab();
    llmrt_tokenizer *t = load_ok(tj(
        NULL, NULL, v, "[]",
        "[" ADDED(100, "<s>", true, false, false, false, false) ","
            ADDED(101, "<t>", false, false, false, false, false) "]",
        NULL, NULL, NULL));
    free(v);
#define C(ch) ((ch)-32)
    const char *text = "a<s>b<s>c<t>";
    struct {
        llmrt_text_span spans[2];
        size_t n;
        int32_t want[16];
    } cases[] = {
        {{{0, 0}}, 0, {C('a'), 100, C('b'), 100, C('c'), 101, -1}},
        /* the second <s> is content: text there, the first stays special */
        {{{5, 3}}, 1, {C('a'), 100, C('b'), C('<'), C('s'), C('>'), C('c'), 101, -1}},
        /* a span touching one byte of a token (an edge a template could complete) */
        {{{3, 1}}, 1, {C('a'), C('<'), C('s'), C('>'), C('b'), 100, C('c'), 101, -1}},
        /* a non-special added token inside a span stays an added token */
        {{{0, 1}, {9, 3}}, 2, {C('a'), 100, C('b'), 100, C('c'), 101, -1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int32_t *ids;
        size_t n, nw = 0;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_tokenizer_encode_spans(t, text, strlen(text), 0, cases[i].spans,
                                                      cases[i].n, &ids, &n, &err),
                         LLMRT_OK);
        while (cases[i].want[nw] >= 0)
            nw++;
        ck_assert_msg(n == nw && memcmp(ids, cases[i].want, n * sizeof *ids) == 0,
                      "case %zu: %zu ids, want %zu", i, n, nw);
        free(ids);
    }
    ck_assert_uint_eq(llmrt_tokenizer_added_count(t), 2);
    size_t len = 0;
    int special = 0;
    ck_assert_str_eq(llmrt_tokenizer_added_at(t, 0, &len, &special), "<s>");
    ck_assert_uint_eq(len, 3);
    ck_assert_int_eq(special, 1);
    ck_assert_str_eq(llmrt_tokenizer_added_at(t, 1, NULL, &special), "<t>");
    ck_assert_int_eq(special, 0);
    ck_assert_ptr_null(llmrt_tokenizer_added_at(t, 2, NULL, NULL));
    llmrt_tokenizer_free(t);
#undef C
}
END_TEST

START_TEST(template_processing)
{
    char *v = ascii_vocab();
    llmrt_tokenizer *t = load_ok(tj(
        NULL, NULL, v, "[]",
        "[" ADDED(95, "<s>", true, false, false, false, false) ","
            ADDED(96, "</s>", true, false, false, false, false) "]",
        "{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\",\"trim_offsets\":false},"
        "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"</s>\",\"type_id\":0}}],"
        "\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[95],\"tokens\":[\"<s>\"]},"
        "\"</s>\":{\"id\":\"</s>\",\"ids\":[96],\"tokens\":[\"</s>\"]}}}]}",
        NULL, NULL));
    free(v);
    EXPECT(t, "hi", 0, 'h' - 32, 'i' - 32);
    EXPECT(t, "hi", LLMRT_ENCODE_ADD_SPECIAL, 95, 'h' - 32, 'i' - 32, 96);
    EXPECT(t, "", LLMRT_ENCODE_ADD_SPECIAL, 95, 96);
    int32_t ids[] = {95, 'o' - 32, 'k' - 32, 96, 9999};
    char *s = decode_str(t, ids, 5, 0);
    ck_assert_str_eq(s, "<s> o k </s>"); /* no decoder: HF joins tokens with spaces */
    free(s);
    s = decode_str(t, ids, 5, 1);
    ck_assert_str_eq(s, "o k");
    free(s);
    llmrt_tokenizer_free(t);
}
END_TEST

START_TEST(encode_rejects_invalid_utf8)
{
    char *v = ascii_vocab();
    llmrt_tokenizer *t = load_ok(tj(NULL, NULL, v, "[]", NULL, NULL, NULL, NULL));
    free(v);
    int32_t *ids = (int32_t *)1;
    size_t n = 7;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_tokenizer_encode(t, "ab\xC3(", 4, 0, &ids, &n, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_null(ids);
    ck_assert_msg(strstr(err.msg, "byte 2"), "%s", err.msg);
    ck_assert_int_eq(llmrt_tokenizer_encode(t, "\xED\xA0\x80", 3, 0, &ids, &n, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(llmrt_tokenizer_encode(t, "", 0, 0, &ids, &n, &err), LLMRT_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_nonnull(ids);
    free(ids);
    llmrt_tokenizer_free(t);
}
END_TEST

/* ---- decoding ---- */

START_TEST(decode_lossy_and_stream)
{
    const char *m[] = {"\xF0", "\x9F", "\xF0\x9F", "\x98"};
    llmrt_tokenizer *t = load_ok(bytelevel_json(m, 2, 1));
    int32_t end = llmrt_tokenizer_token_id(t, "<|end|>");
    ck_assert_int_eq(end, 1000);
    ck_assert(llmrt_tokenizer_is_special(t, end));
    /* Bytes as ids (byte-level vocab entry of byte b). */
    int32_t byte_id[256];
    for (int b = 0; b < 256; b++) {
        uint8_t u[5] = {0};
        llmrt__utf8_encode(llmrt__bytelevel_char((uint8_t)b), u);
        byte_id[b] = llmrt_tokenizer_token_id(t, (const char *)u);
        ck_assert_int_ge(byte_id[b], 0);
        size_t len;
        const uint8_t *raw = llmrt_tokenizer_token_bytes(t, byte_id[b], &len);
        ck_assert_uint_eq(len, 1);
        ck_assert_int_eq(raw[0], b);
    }
    int32_t smile3 = llmrt_tokenizer_token_id(t, "\xC3\xB0\xC5\x81\xC4\xBA"); /* ðŁĺ = F0 9F 98 */
    ck_assert_int_ge(smile3, 256);
    /* U+1F600 split as F0 9F 98 | 80, with a special token and invalid bytes around. */
    int32_t ids[] = {byte_id['a'], smile3, byte_id[0x80], end, byte_id[0xC3], byte_id['b'],
                     byte_id[0xE2], byte_id[0x82], end, 123456, byte_id[0xAC]};
    size_t n = sizeof ids / sizeof *ids;
    char *s = decode_str(t, ids, n, 0);
    ck_assert_str_eq(s, "a\xF0\x9F\x98\x80<|end|>\xEF\xBF\xBD" "b\xEF\xBF\xBD<|end|>\xEF\xBF\xBD");
    free(s);
    s = decode_str(t, ids, n, 1); /* without the specials E2 82 AC is a whole € */
    ck_assert_str_eq(s, "a\xF0\x9F\x98\x80\xEF\xBF\xBD" "b\xE2\x82\xAC");
    free(s);

    /* The stream gives the same text in pieces, never part of a character. */
    for (int skip = 0; skip < 2; skip++) {
        llmrt_detok *d;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_detok_new(t, skip, &d, &err), LLMRT_OK);
        char acc[256] = "";
        for (size_t i = 0; i < n; i++) {
            const char *piece;
            size_t len;
            ck_assert_int_eq(llmrt_detok_push(d, ids[i], &piece, &len, &err), LLMRT_OK);
            ck_assert_uint_eq(strlen(piece), len);
            ck_assert_uint_eq(llmrt__utf8_valid_prefix((const uint8_t *)piece, len), len);
            if (i == 1)
                ck_assert_str_eq(piece, ""); /* F0 9F 98 held */
            strcat(acc, piece);
        }
        strcat(acc, llmrt_detok_flush(d, NULL));
        s = decode_str(t, ids, n, skip);
        ck_assert_str_eq(acc, s);
        free(s);
        /* flush of an unfinished character: one U+FFFD; then the detokenizer is empty */
        const char *piece;
        ck_assert_int_eq(llmrt_detok_push(d, byte_id[0xE2], &piece, NULL, &err), LLMRT_OK);
        ck_assert_str_eq(piece, "");
        ck_assert_str_eq(llmrt_detok_flush(d, NULL), "\xEF\xBF\xBD");
        ck_assert_str_eq(llmrt_detok_flush(d, NULL), "");
        llmrt_detok_reset(d);
        llmrt_detok_free(d);
    }

    /* Random byte streams: stream == whole decode, and every piece is valid UTF-8. */
    unsigned seed = 99;
    static const uint8_t interesting[] = {'a', ' ', 0x80, 0x9F, 0xBF, 0xC2, 0xC3, 0xE0, 0xE2, 0xED,
                                          0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0xA0, 0x98, 0x82, 0xAC};
    for (int iter = 0; iter < 2000; iter++) {
        int32_t r[24];
        size_t k = 1 + ((seed = seed * 1103515245u + 12345u) >> 16) % 24;
        for (size_t i = 0; i < k; i++) {
            unsigned x = (seed = seed * 1103515245u + 12345u) >> 16;
            r[i] = x % 23 == 0 ? end : x % 29 == 0 ? smile3 : byte_id[interesting[x % sizeof interesting]];
        }
        llmrt_detok *d;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_detok_new(t, iter & 1, &d, &err), LLMRT_OK);
        char acc[512] = "";
        for (size_t i = 0; i < k; i++) {
            const char *piece;
            size_t len;
            ck_assert_int_eq(llmrt_detok_push(d, r[i], &piece, &len, &err), LLMRT_OK);
            ck_assert_uint_eq(llmrt__utf8_valid_prefix((const uint8_t *)piece, len), len);
            strcat(acc, piece);
        }
        strcat(acc, llmrt_detok_flush(d, NULL));
        s = decode_str(t, r, k, iter & 1);
        ck_assert_str_eq(acc, s);
        free(s);
        llmrt_detok_free(d);
    }
    llmrt_tokenizer_free(t);
}
END_TEST

/* ---- tokenizer_config.json and files ---- */

START_TEST(config_and_files)
{
    char *v = ascii_vocab();
    char *json = tj(NULL, NULL, v, "[]",
                    "[" ADDED(95, "<|endoftext|>", true, false, false, false, false) ","
                        ADDED(96, "<|im_end|>", true, false, false, false, false) "]",
                    NULL, NULL, NULL);
    free(v);
    llmrt_tokenizer *t = load_ok(strdup(json));
    llmrt_error err = {0};
    const char cfg1[] = "{\"eos_token\":\"<|im_end|>\",\"pad_token\":{\"__type\":\"AddedToken\","
                        "\"content\":\"<|endoftext|>\"},\"bos_token\":null,\"chat_template\":\"T1\"}";
    ck_assert_int_eq(llmrt_tokenizer_parse_config(t, cfg1, strlen(cfg1), "cfg", &err), LLMRT_OK);
    const int32_t *eos;
    ck_assert_uint_eq(llmrt_tokenizer_eos_ids(t, &eos), 1);
    ck_assert_int_eq(eos[0], 96);
    ck_assert_int_eq(llmrt_tokenizer_pad_id(t), 95);
    ck_assert_int_eq(llmrt_tokenizer_bos_id(t), -1);
    ck_assert_str_eq(llmrt_tokenizer_chat_template(t), "T1");
    /* Llama 3's config writes model_max_length as a 31-digit integer: not an error. */
    const char big[] = "{\"model_max_length\": 1000000000000000019884624838656, \"eos_token\": \"<|im_end|>\"}";
    ck_assert_msg(llmrt_tokenizer_parse_config(t, big, strlen(big), "big", &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_str_eq(llmrt_tokenizer_chat_template(t) ? "set" : "none", "none"); /* replaced */
    ck_assert_int_eq(llmrt_tokenizer_parse_config(t, cfg1, strlen(cfg1), "cfg", &err), LLMRT_OK);
    const char cfg2[] = "{\"eos_token\":\"</s>\"}";
    ck_assert_int_eq(llmrt_tokenizer_parse_config(t, cfg2, strlen(cfg2), "cfg2", &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "cfg2") && strstr(err.msg, "eos_token \"</s>\""), "%s", err.msg);
    const char cfg3[] = "{\"chat_template\":[{\"name\":\"tool_use\",\"template\":\"T\"},"
                        "{\"name\":\"default\",\"template\":\"D\"}]}";
    ck_assert_int_eq(llmrt_tokenizer_parse_config(t, cfg3, strlen(cfg3), "cfg3", &err), LLMRT_OK);
    ck_assert_str_eq(llmrt_tokenizer_chat_template(t), "D");
    ck_assert_uint_eq(llmrt_tokenizer_eos_ids(t, &eos), 0);
    const char cfg4[] = "{\"chat_template\":[{\"name\":\"tool_use\",\"template\":\"T\"}]}";
    ck_assert_int_eq(llmrt_tokenizer_parse_config(t, cfg4, strlen(cfg4), "cfg4", &err), LLMRT_ERR_FORMAT);
    ck_assert_int_eq(llmrt_tokenizer_parse_config(t, "{", 1, "cfg5", &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "cfg5:"), "%s", err.msg);
    llmrt_tokenizer_free(t);

    /* A model folder: tokenizer.json + tokenizer_config.json, then chat_template.jinja wins. */
    char *dir = tu_mkdtemp();
    free(tu_write_file(dir, "tokenizer.json", json));
    free(tu_write_file(dir, "tokenizer_config.json", cfg1));
    ck_assert_int_eq(llmrt_tokenizer_load(dir, &t, &err), LLMRT_OK);
    ck_assert_str_eq(llmrt_tokenizer_chat_template(t), "T1");
    ck_assert_int_eq(llmrt_tokenizer_eos_ids(t, &eos), 1);
    llmrt_tokenizer_free(t);
    free(tu_write_file(dir, "chat_template.jinja", "J"));
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    ck_assert_int_eq(llmrt_tokenizer_load(path, &t, &err), LLMRT_OK);
    ck_assert_str_eq(llmrt_tokenizer_chat_template(t), "J");
    llmrt_tokenizer_free(t);
    snprintf(path, sizeof path, "%s/nope", dir);
    ck_assert_int_eq(llmrt_tokenizer_load(path, &t, &err), LLMRT_ERR_NOT_FOUND);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.msg, "nope"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/sub", dir);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(llmrt_tokenizer_load(path, &t, &err), LLMRT_ERR_NOT_FOUND);
    ck_assert_msg(strstr(err.msg, "no tokenizer.json"), "%s", err.msg);
    free(tu_write_file(dir, "tokenizer_config.json", "{\"eos_token\": 5"));
    ck_assert_int_eq(llmrt_tokenizer_load(dir, &t, &err), LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "tokenizer_config.json:"), "%s", err.msg);
    tu_rmtree(dir);
    free(dir);
    free(json);
}
END_TEST

/* ---- malformed tokenizer.json ---- */

START_TEST(malformed_files)
{
    const char *v = "{\"a\":0,\"b\":1,\"ab\":2}";
    load_fails(strdup("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,}}"), LLMRT_ERR_FORMAT, "not valid JSON");
    load_fails(strdup(""), LLMRT_ERR_FORMAT, "not valid JSON");
    load_fails(strdup("[1, 2]"), LLMRT_ERR_FORMAT, "top level");
    load_fails(strdup("{\"normalizer\": null}"), LLMRT_ERR_FORMAT, "no \"model\"");
    load_fails(strdup("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}"), LLMRT_ERR_UNSUPPORTED,
               "model.type \"WordPiece\"");
    load_fails(strdup("{\"model\": {\"type\": \"BPE\", \"merges\": []}}"), LLMRT_ERR_FORMAT, "model.vocab");
    load_fails(strdup("{\"model\": {\"type\": \"BPE\", \"vocab\": {}}}"), LLMRT_ERR_FORMAT, "model.merges");
    load_fails(tj(NULL, NULL, v, "[\"a x\"]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT,
               "names \"x\", which is not in the vocab");
    load_fails(tj(NULL, NULL, v, "[\"a b\", [\"b\", \"zz\"]]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT,
               "model.merges[1]");
    load_fails(tj(NULL, NULL, v, "[\"b a\"]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT,
               "merged token \"ba\" is not in the vocab");
    load_fails(tj(NULL, NULL, v, "[\"a b c\"]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT,
               "two tokens separated by one space");
    load_fails(tj(NULL, NULL, v, "[[\"a\"]]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT, "model.merges[0]");
    load_fails(tj(NULL, NULL, v, "[42]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT, "model.merges[0]");
    load_fails(tj(NULL, NULL, "{\"a\":\"zero\"}", "[]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT,
               "model.vocab[\"a\"] must be an id");
    load_fails(tj(NULL, NULL, "{\"a\":-3}", "[]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT, "must be an id");
    load_fails(tj(NULL, NULL, "{\"a\":0,\"b\":0}", "[]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT, "share id 0");
    load_fails(tj("{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"\"}", NULL, v, "[]", NULL, NULL, NULL, NULL),
               LLMRT_ERR_UNSUPPORTED, "normalizer.type \"Precompiled\"");
    load_fails(tj("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Strip\"}]}", NULL, v, "[]",
                  NULL, NULL, NULL, NULL),
               LLMRT_ERR_UNSUPPORTED, "normalizer.normalizers[1].type \"Strip\"");
    load_fails(tj("{\"kind\":\"NFC\"}", NULL, v, "[]", NULL, NULL, NULL, NULL), LLMRT_ERR_FORMAT, "has no \"type\"");
    load_fails(tj(NULL, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Whitespace\"}]}",
                  v, "[]", NULL, NULL, NULL, NULL),
               LLMRT_ERR_UNSUPPORTED, "pre_tokenizer.pretokenizers[1].type \"Whitespace\"");
    load_fails(tj(NULL, "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(a\"},\"behavior\":\"Isolated\"}", v, "[]",
                  NULL, NULL, NULL, NULL),
               LLMRT_ERR_FORMAT, "pre_tokenizer.pattern: the regex \"(a\" does not compile");
    load_fails(tj(NULL, "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Sideways\"}", v, "[]",
                  NULL, NULL, NULL, NULL),
               LLMRT_ERR_FORMAT, "behavior \"Sideways\"");
    load_fails(tj(NULL, "{\"type\":\"Split\",\"pattern\":\"a\",\"behavior\":\"Isolated\"}", v, "[]", NULL, NULL,
                  NULL, NULL),
               LLMRT_ERR_FORMAT, "pre_tokenizer.pattern must be");
    load_fails(tj(NULL, "{\"type\":\"ByteLevel\",\"use_regex\":\"yes\"}", v, "[]", NULL, NULL, NULL, NULL),
               LLMRT_ERR_FORMAT, "use_regex must be true or false");
    load_fails(tj(NULL, NULL, v, "[]", NULL, NULL, "{\"type\":\"WordPiece\",\"prefix\":\"##\"}", NULL),
               LLMRT_ERR_UNSUPPORTED, "decoder.type \"WordPiece\"");
    load_fails(tj(NULL, NULL, v, "[]", NULL, "{\"type\":\"RobertaProcessing\"}", NULL, NULL),
               LLMRT_ERR_UNSUPPORTED, "post_processor.type \"RobertaProcessing\"");
    load_fails(tj(NULL, NULL, v, "[]", NULL,
                  "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},"
                  "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{}}",
                  NULL, NULL),
               LLMRT_ERR_FORMAT, "names special token \"<s>\"");
    load_fails(tj(NULL, NULL, v, "[]", "[{\"id\":5,\"content\":\"\"}]", NULL, NULL, NULL), LLMRT_ERR_FORMAT,
               "added_tokens[0].content must be a non-empty string");
    load_fails(tj(NULL, NULL, v, "[]", "[{\"content\":\"<x>\"}]", NULL, NULL, NULL), LLMRT_ERR_FORMAT,
               "added_tokens[0].id");
    load_fails(tj(NULL, NULL, v, "[]", "[{\"id\":5,\"content\":\"<x>\"},{\"id\":6,\"content\":\"<x>\"}]", NULL,
                  NULL, NULL),
               LLMRT_ERR_FORMAT, "also added_tokens[0]");
    load_fails(tj(NULL, NULL, v, "[]", "[{\"id\":5,\"content\":\"<x>\"},{\"id\":5,\"content\":\"<y>\"}]", NULL,
                  NULL, NULL),
               LLMRT_ERR_FORMAT, "share id 5");
    load_fails(tj(NULL, NULL, v, "[]", "{\"id\":5}", NULL, NULL, NULL), LLMRT_ERR_FORMAT, "added_tokens must be an array");
    load_fails(tj(NULL, NULL, v, "[]", NULL, NULL, NULL, ",\"continuing_subword_prefix\":\"##\""),
               LLMRT_ERR_UNSUPPORTED, "continuing_subword_prefix");
    load_fails(strdup("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"dropout\":0.1}}"),
               LLMRT_ERR_UNSUPPORTED, "dropout");
    load_fails(strdup("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"unk_token\":\"<unk>\"}}"),
               LLMRT_ERR_FORMAT, "unk_token \"<unk>\" is not in model.vocab");
}
END_TEST

/* ---- ids that would size absurd tables, files that are not regular ---- */

START_TEST(absurd_ids_refused)
{
    const char *v = "{\"a\":0,\"b\":1,\"ab\":2}";
    /* per-id tables are sized by the largest id: 1e9 would be gigabytes */
    load_fails(tj(NULL, NULL, v, "[]", "[{\"id\":3,\"content\":\"<s>\"},{\"id\":1000000000,"
                  "\"content\":\"<x>\",\"special\":true}]", NULL, NULL, NULL),
               LLMRT_ERR_FORMAT, "added_tokens[1].id is 1000000000, but a tokenizer of 3 "
               "model.vocab entries and 2 added_tokens numbers its tokens below 65541");
    load_fails(tj(NULL, NULL, "{\"a\":0,\"b\":2147483000}", "[]", NULL, NULL, NULL, NULL),
               LLMRT_ERR_FORMAT, "model.vocab[\"b\"] is 2147483000");
    /* holes up to the slack stay fine (the hand-built tokenizers here use id 1000) */
    llmrt_tokenizer *t =
        load_ok(tj(NULL, NULL, v, "[]", "[{\"id\":65539,\"content\":\"<x>\"}]", NULL, NULL, NULL));
    ck_assert_int_eq(llmrt_tokenizer_vocab_size(t), 65540);
    ck_assert_int_eq(llmrt_tokenizer_token_id(t, "<x>"), 65539);
    llmrt_tokenizer_free(t);
}
END_TEST

START_TEST(files_must_be_regular)
{
    char *json = tj(NULL, NULL, "{\"a\":0,\"b\":1}", "[]", NULL, NULL, NULL, NULL);
    char *dir = tu_mkdtemp();
    llmrt_tokenizer *t = NULL;
    llmrt_error err = {0};
    tu_guard(20); /* a reader that blocks on the FIFOs fails instead of hanging */
    char *f = tu_mkfifo(dir, "tokenizer.json");
    ck_assert_int_eq(llmrt_tokenizer_load(dir, &t, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "tokenizer.json: not a regular file (a FIFO)"), "%s", err.msg);
    ck_assert_int_eq(llmrt_tokenizer_load(f, &t, &err), LLMRT_ERR_IO);
    ck_assert_ptr_null(t);
    remove(f);
    free(f);
    free(tu_write_file(dir, "tokenizer.json", json));
    /* an optional file that is there but not regular is an error, not skipped */
    f = tu_mkfifo(dir, "tokenizer_config.json");
    ck_assert_int_eq(llmrt_tokenizer_load(dir, &t, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "tokenizer_config.json: not a regular file (a FIFO)"), "%s",
                  err.msg);
    remove(f);
    free(f);
    tu_guard(0);
    f = tu_symlink(dir, "chat_template.jinja", "/dev/zero");
    ck_assert_int_eq(llmrt_tokenizer_load(dir, &t, &err), LLMRT_ERR_IO);
    ck_assert_msg(strstr(err.msg, "chat_template.jinja: not a regular file (a character device)"),
                  "%s", err.msg);
    remove(f);
    free(f);
    free(tu_sized_file(dir, "tokenizer_config.json", 17ll << 20));
    ck_assert_int_eq(llmrt_tokenizer_load(dir, &t, &err), LLMRT_ERR_LIMIT);
    ck_assert_msg(strstr(err.msg, "tokenizer_config.json: 17.0 MiB is larger than the 16 MiB a "
                                  "tokenizer_config.json may be"),
                  "%s", err.msg);
    free(tu_write_file(dir, "tokenizer_config.json", "{}"));
    free(tu_sized_file(dir, "tokenizer.json", 257ll << 20));
    ck_assert_int_eq(llmrt_tokenizer_load(dir, &t, &err), LLMRT_ERR_LIMIT);
    ck_assert_msg(strstr(err.msg, "tokenizer.json: 257.0 MiB is larger than the 256 MiB a "
                                  "tokenizer.json may be"),
                  "%s", err.msg);
    ck_assert_ptr_null(t);
    tu_rmtree(dir);
    free(dir);
    free(json);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, bpe_merge_rank_order);
    tcase_add_test(tc, literal_spans);
    tcase_add_test(tc, bpe_leftmost_first_and_pairs_spelling);
    tcase_add_test(tc, bpe_long_run);
    tcase_add_test(tc, bpe_unknown_chars);
    tcase_add_test(tc, bpe_ignore_merges);
    tcase_add_test(tc, split_behaviors);
    tcase_add_test(tc, oniguruma_whitespace_dialect);
    tcase_add_test(tc, bytelevel_gpt2_regex_and_roundtrip);
    tcase_add_test(tc, normalizers);
    tcase_add_test(tc, added_token_options);
    tcase_add_test(tc, template_processing);
    tcase_add_test(tc, encode_rejects_invalid_utf8);
    tcase_add_test(tc, decode_lossy_and_stream);
    tcase_add_test(tc, config_and_files);
    tcase_add_test(tc, malformed_files);
    tcase_add_test(tc, absurd_ids_refused);
    tcase_add_test(tc, files_must_be_regular);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
