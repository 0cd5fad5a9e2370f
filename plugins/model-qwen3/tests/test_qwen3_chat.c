/* test_qwen3_chat.c — the qwen3 plugin's chat format (its vtable's chat member, loaded from
 * the built model-qwen3.so) and the host's messages JSON, without the tokenizer:
 * every chat case of tests/fixtures/tokenizer/qwen3_refs.json (rendered by
 * @huggingface/jinja from the real Qwen3 template) must come out byte for byte; templates
 * that are not Qwen3's are refused with a message that says so; messages JSON is parsed
 * with errors that name the message; tool arguments are printed as Python's json.dumps
 * prints them (what transformers' tojson filter does). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/model.h>

#include "chat_messages.h"
#include "test_util.h"

static char *qwen3_template;
static json_t *refs;

static const char *src_dir(void)
{
    const char *s = getenv("LLMRT_SOURCE_DIR");
    return s ? s : ".";
}

static char *read_text(const char *rel)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", src_dir(), rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static const llmrt_chat_vtable *CV; /* the plugin's chat format */

static llmrt_status chat_new(const char *text, const char *where, llmrt_chat **t, llmrt_error *err)
{
    *t = (llmrt_chat *)1;
    llmrt_status st = CV->create(NULL, text, where, t, err);
    if (st != LLMRT_OK)
        ck_assert_ptr_null(*t);
    return st;
}

static llmrt_chat *qwen3(void)
{
    llmrt_chat *t;
    llmrt_error err = {0};
    ck_assert_msg(chat_new(qwen3_template, "fixture", &t, &err) == LLMRT_OK, "%s", err.msg);
    return t;
}

typedef struct buf {
    char *p;
    size_t n;
} buf;

static llmrt_status buf_write(void *ctx, const char *s, size_t n)
{
    buf *b = ctx;
    b->p = realloc(b->p, b->n + n + 1);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return LLMRT_OK;
}

/* Render into a malloc'd string; NULL on failure. */
static llmrt_status render(llmrt_chat *t, const llmrt_chat_message *m, uint32_t n,
                           const llmrt_chat_options *o, char **text, llmrt_error *err)
{
    buf b = {calloc(1, 1), 0};
    llmrt_sink sink = {&b, buf_write};
    llmrt_status st = CV->render(t, m, n, o, &sink, err);
    if (st != LLMRT_OK) {
        free(b.p);
        b.p = NULL;
    }
    *text = b.p;
    return st;
}

/* Replace the first `from` in s (malloc'd result). */
static char *replace(const char *s, const char *from, const char *to)
{
    const char *p = strstr(s, from);
    ck_assert_ptr_nonnull(p);
    char *o = malloc(strlen(s) - strlen(from) + strlen(to) + 1);
    size_t a = (size_t)(p - s);
    memcpy(o, s, a);
    strcpy(o + a, to);
    strcat(o, p + strlen(from));
    return o;
}

START_TEST(renders_reference_cases)
{
    llmrt_chat *t = qwen3();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(refs, "chat"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        llmrt_chat_messages *m;
        llmrt_error err = {0};
        ck_assert_msg(llmrt_chat_messages_from_json(json_object_get(c, "messages"), json_object_get(c, "tools"),
                                                    name, &m, &err) == LLMRT_OK,
                      "%s: %s", name, err.msg);
        const json_t *et = json_object_get(c, "enable_thinking");
        llmrt_chat_options o = {sizeof o, json_is_true(json_object_get(c, "add_generation_prompt")),
                                et ? json_is_true(et) : 1, (const char *const *)m->tools, m->n_tools};
        char *text;
        ck_assert_msg(render(t, m->msgs, m->n, &o, &text, &err) == LLMRT_OK, "%s: %s", name, err.msg);
        const char *want = json_string_value(json_object_get(c, "text"));
        if (strcmp(text, want) != 0) {
            size_t k = 0;
            while (text[k] && text[k] == want[k])
                k++;
            ck_abort_msg("%s: differs at byte %zu:\n got: ...%.60s\nwant: ...%.60s", name, k, text + k, want + k);
        }
        free(text);
        llmrt_chat_messages_free(m);
    }
    CV->destroy(t);
}
END_TEST

START_TEST(recognition)
{
    llmrt_chat *t;
    llmrt_error err = {0};
    t = qwen3();
    ck_assert_str_eq(CV->family(t), "qwen3");
    CV->destroy(t);
    /* Layout does not matter: all indentation and newlines removed still matches. */
    char *flat = strdup(qwen3_template);
    size_t k = 0;
    for (char *p = flat; *p; p++)
        if (*p != '\n' && *p != ' ')
            flat[k++] = *p;
    flat[k] = 0;
    ck_assert_int_eq(chat_new(flat, "flat", &t, &err), LLMRT_OK);
    CV->destroy(t);
    free(flat);
    /* A changed rule is not Qwen3 any more. */
    char *v = replace(qwen3_template, "'<think>\\n\\n</think>\\n\\n'", "'<think></think>'");
    ck_assert_int_eq(chat_new(v, "variant.json", &t, &err), LLMRT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "variant.json") && strstr(err.msg, "not recognised") &&
                      strstr(err.msg, "ChatML"),
                  "%s", err.msg);
    free(v);
    v = replace(qwen3_template, "'<|im_start|>assistant\\n'", "'<|im_start|>assistant\\n<think>\\n'");
    ck_assert_int_eq(chat_new(v, "thinking-only", &t, &err), LLMRT_ERR_UNSUPPORTED);
    free(v);
    /* Not ChatML at all: not this family's template (the host tries other plugins). */
    ck_assert_int_eq(chat_new("{% for m in messages %}{{ m.content }}{% endfor %}", "other",
                                             &t, &err),
                     LLMRT_ERR_NOT_FOUND);
    ck_assert_msg(strstr(err.msg, "not recognised") && strstr(err.msg, "qwen3"), "%s", err.msg);
    ck_assert_int_eq(chat_new(NULL, "none", &t, &err), LLMRT_ERR_NOT_FOUND);
}
END_TEST

START_TEST(render_rules_and_errors)
{
    llmrt_chat *t = qwen3();
    llmrt_error err = {0};
    char *text;
    llmrt_chat_message one[] = {{"user", "hi", NULL, NULL, 0}};
    /* NULL options: generation prompt on, thinking allowed. */
    ck_assert_int_eq(render(t, one, 1, NULL, &text, &err), LLMRT_OK);
    ck_assert_str_eq(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    free(text);
    llmrt_chat_options off = {sizeof off, 1, 0, NULL, 0};
    ck_assert_int_eq(render(t, one, 1, &off, &text, &err), LLMRT_OK);
    ck_assert_str_eq(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    free(text);
    text = (char *)1;
    ck_assert_int_eq(render(t, one, 0, NULL, &text, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_ptr_null(text);
    llmrt_chat_message dev[] = {{"user", "a", NULL, NULL, 0}, {"developer", "b", NULL, NULL, 0}};
    ck_assert_int_eq(render(t, dev, 2, NULL, &text, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "messages[1]") && strstr(err.msg, "\"developer\"") && strstr(err.msg, "use system"),
                  "%s", err.msg);
    /* NULL content renders as empty. */
    llmrt_chat_message empty[] = {{"user", NULL, NULL, NULL, 0}};
    ck_assert_int_eq(render(t, empty, 1, &off, &text, &err), LLMRT_OK);
    ck_assert_str_eq(text, "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    free(text);
    CV->destroy(t);
}
END_TEST

START_TEST(messages_json)
{
    llmrt_chat_messages *m;
    llmrt_error err = {0};
    const char ok[] =
        "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"},"
        "{\"type\": \"text\", \"text\": \"b\"}]}, {\"role\": \"assistant\", \"content\": null,"
        "\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"b\": 1.0, \"a\": [1, 2.5e-07, true, null],"
        "\"s\": \"\\u00e9\\\"\\n\\u0001/\", \"big\": 1e16, \"small\": 0.0001, \"tiny\": 1e-05, \"x\": 123.456,"
        "\"neg\": -0.5, \"huge\": 12345678901234567890.0, \"e\": {}, \"l\": []}}]}],"
        "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}]}";
    ck_assert_msg(llmrt_chat_messages_parse(ok, strlen(ok), "req", &m, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_uint_eq(m->n, 2);
    ck_assert_str_eq(m->msgs[0].content, "a\nb"); /* text parts joined with newlines */
    ck_assert_ptr_null(m->msgs[1].content);
    ck_assert_uint_eq(m->msgs[1].n_tool_calls, 1);
    ck_assert_str_eq(m->msgs[1].tool_calls[0].name, "f");
    ck_assert(!m->msgs[1].tool_calls[0].arguments_is_string);
    /* Python: json.dumps(args, ensure_ascii=False) */
    ck_assert_str_eq(m->msgs[1].tool_calls[0].arguments,
                     "{\"b\": 1.0, \"a\": [1, 2.5e-07, true, null], \"s\": \"\xC3\xA9\\\"\\n\\u0001/\", "
                     "\"big\": 1e+16, \"small\": 0.0001, \"tiny\": 1e-05, \"x\": 123.456, \"neg\": -0.5, "
                     "\"huge\": 1.2345678901234567e+19, \"e\": {}, \"l\": []}");
    ck_assert_uint_eq(m->n_tools, 1);
    ck_assert_str_eq(m->tools[0], "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}");
    llmrt_chat *t = qwen3();
    llmrt_chat_options o = {sizeof o, 0, 1, (const char *const *)m->tools, m->n_tools};
    char *text;
    ck_assert_int_eq(render(t, m->msgs, m->n, &o, &text, &err), LLMRT_OK);
    /* the assistant turn is the last message (after the last user query): empty think
     * block, then the call with no newline before it (empty content) */
    ck_assert_msg(strstr(text, "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"f\", "
                               "\"arguments\": {\"b\": 1.0,"),
                  "%s", text);
    free(text);
    CV->destroy(t);
    llmrt_chat_messages_free(m);

    /* A bare array works too. */
    const char arr[] = "[{\"role\": \"system\", \"content\": \"s\"}]";
    ck_assert_int_eq(llmrt_chat_messages_parse(arr, strlen(arr), "arr", &m, &err), LLMRT_OK);
    ck_assert_uint_eq(m->n, 1);
    ck_assert_uint_eq(m->n_tools, 0);
    llmrt_chat_messages_free(m);

    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"[{\"role\": \"user\", \"content\": \"x\"},", "bad.json:1:"},
        {"42", "messages array"},
        {"{\"messages\": {}}", "must be an array"},
        {"[{\"content\": \"x\"}]", "messages[0] has no \"role\""},
        {"[{\"role\": \"user\", \"content\": 5}]", "messages[0].content"},
        {"[{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]",
         "messages[0].content[0]"},
        {"[{\"role\": \"user\"}, {\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\"}}]}]",
         "messages[1].tool_calls[0]"},
        {"[{\"role\": \"assistant\", \"reasoning_content\": 3}]", "reasoning_content"},
        {"{\"messages\": [], \"tools\": {}}", "\"tools\" must be an array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        m = (llmrt_chat_messages *)1;
        ck_assert_int_ne(llmrt_chat_messages_parse(bad[i].json, strlen(bad[i].json), "bad.json", &m, &err), LLMRT_OK);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(err.msg, bad[i].needle) && strstr(err.msg, "bad.json"), "%s: \"%s\" lacks \"%s\"",
                      bad[i].json, err.msg, bad[i].needle);
    }
}
END_TEST

int main(void)
{
    char *so = tu_plugin_path("model-qwen3.so");
    const llmrt_plugin_desc *d = tu_load_plugin(so, 0);
    free(so);
    if (!d) {
        printf("SKIP: model-qwen3.so is not built (looked in $LLMRT_PLUGIN_DIR)\n");
        return 77;
    }
    const llmrt_model_vtable *mvt = d->vtable;
    if (!LLMRT_VT_HAS(mvt, llmrt_model_vtable, chat)) {
        fprintf(stderr, "model-qwen3.so has no chat format\n");
        return 1;
    }
    CV = mvt->chat;
    qwen3_template = read_text("tests/fixtures/tokenizer/qwen3_chat_template.jinja");
    json_error_t je;
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/fixtures/tokenizer/qwen3_refs.json", src_dir());
    refs = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!refs) {
        fprintf(stderr, "cannot read %s: %s\n", path, je.text);
        return 1;
    }
    Suite *s = suite_create("qwen3_chat");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, renders_reference_cases);
    tcase_add_test(tc, recognition);
    tcase_add_test(tc, render_rules_and_errors);
    tcase_add_test(tc, messages_json);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    json_decref(refs);
    free(qwen3_template);
    return failed ? 1 : 0;
}
