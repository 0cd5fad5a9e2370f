/* test_qwen3_reply.c — the qwen3 plugin's reply parser (chat.h since 1.2, loaded from the
 * built model-qwen3.so): reasoning, content and tool calls out of Qwen3 replies, malformed
 * calls kept as text, the options (reasoning off, tool calls off, a prompt that left the
 * think block open), and — for every case — the same result whatever the split: the whole
 * reply in one push, every split into two pushes, every split into three (short replies),
 * and one byte per push. Also the syntax member's strings, and the host's side
 * (core/text/chat.c): whether a prompt left a think block open, and the parser it opens for
 * a family without one (every byte is content). */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/model.h>

#include "chat.h"
#include "test_util.h"

static const llmrt_chat_vtable *CV;
static llmrt_chat *chat;

/* What a sink received: content and reasoning concatenated, calls as "name(args)" joined
 * by ";", and an event log that checks begin/args/end order. */
typedef struct got {
    char content[4096], reasoning[4096], calls[4096];
    size_t nc, nr, nk;
    int open_call; /* index of the call between begin and end, -1 none */
    int bad_order;
    int n_calls;
} got;

static void add(char *dst, size_t *n, const char *s, size_t k)
{
    ck_assert_uint_lt(*n + k, 4096);
    memcpy(dst + *n, s, k);
    *n += k;
    dst[*n] = 0;
}

static llmrt_status on_content(void *ctx, const char *s, size_t n)
{
    got *g = ctx;
    ck_assert_uint_gt(n, 0);
    if (g->open_call >= 0)
        g->bad_order = 1;
    add(g->content, &g->nc, s, n);
    return LLMRT_OK;
}

static llmrt_status on_reasoning(void *ctx, const char *s, size_t n)
{
    got *g = ctx;
    ck_assert_uint_gt(n, 0);
    if (g->open_call >= 0)
        g->bad_order = 1;
    add(g->reasoning, &g->nr, s, n);
    return LLMRT_OK;
}

static llmrt_status on_begin(void *ctx, uint32_t index, const char *name)
{
    got *g = ctx;
    if (g->open_call >= 0 || (int)index != g->n_calls || !name[0])
        g->bad_order = 1;
    g->open_call = (int)index;
    if (g->nk)
        add(g->calls, &g->nk, ";", 1);
    add(g->calls, &g->nk, name, strlen(name));
    add(g->calls, &g->nk, "(", 1);
    return LLMRT_OK;
}

static llmrt_status on_args(void *ctx, uint32_t index, const char *s, size_t n)
{
    got *g = ctx;
    if ((int)index != g->open_call)
        g->bad_order = 1;
    add(g->calls, &g->nk, s, n);
    return LLMRT_OK;
}

static llmrt_status on_end(void *ctx, uint32_t index)
{
    got *g = ctx;
    if ((int)index != g->open_call)
        g->bad_order = 1;
    g->open_call = -1;
    g->n_calls++;
    add(g->calls, &g->nk, ")", 1);
    return LLMRT_OK;
}

typedef struct opts {
    int reasoning, starts_in_reasoning, tool_calls;
} opts;

static const opts DEFAULT = {1, 0, 1};

/* Parse `text` pushed in pieces that end at cuts[0] < cuts[1] < ... (n_cuts of them). */
static void parse(const char *text, const size_t *cuts, int n_cuts, opts o, got *g)
{
    memset(g, 0, sizeof *g);
    g->open_call = -1;
    llmrt_reply_sink sink = {g, on_content, on_reasoning, on_begin, on_args, on_end};
    llmrt_reply_options ro = {sizeof ro, o.reasoning, o.starts_in_reasoning, o.tool_calls};
    llmrt_reply_parser *p = NULL;
    llmrt_error err = {0};
    ck_assert_msg(CV->parser_create(chat, &ro, &p, &err) == LLMRT_OK, "%s", err.msg);
    size_t at = 0, n = strlen(text);
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : n;
        ck_assert_msg(CV->parser_push(p, text + at, to - at, &sink, &err) == LLMRT_OK, "%s",
                      err.msg);
        at = to;
    }
    ck_assert_msg(CV->parser_finish(p, &sink, &err) == LLMRT_OK, "%s", err.msg);
    CV->parser_destroy(p);
    ck_assert_msg(!g->bad_order && g->open_call < 0, "tool call events out of order for %s",
                  text);
}

static void same(const got *a, const got *b, const char *text, const char *how)
{
    ck_assert_msg(strcmp(a->content, b->content) == 0 && strcmp(a->reasoning, b->reasoning) == 0 &&
                      strcmp(a->calls, b->calls) == 0,
                  "%s: %s differs from one push: content [%s] vs [%s], reasoning [%s] vs [%s], "
                  "calls [%s] vs [%s]",
                  text, how, b->content, a->content, b->reasoning, a->reasoning, b->calls,
                  a->calls);
}

/* The expected result in one push, and the same for every way of splitting the text. */
static void expect(const char *text, opts o, const char *content, const char *reasoning,
                   const char *calls)
{
    got whole, part;
    parse(text, NULL, 0, o, &whole);
    ck_assert_msg(strcmp(whole.content, content) == 0, "%s: content [%s], expected [%s]", text,
                  whole.content, content);
    ck_assert_msg(strcmp(whole.reasoning, reasoning) == 0, "%s: reasoning [%s], expected [%s]",
                  text, whole.reasoning, reasoning);
    ck_assert_msg(strcmp(whole.calls, calls) == 0, "%s: calls [%s], expected [%s]", text,
                  whole.calls, calls);
    size_t n = strlen(text);
    char how[64];
    for (size_t i = 0; i <= n; i++) {
        size_t cut[1] = {i};
        parse(text, cut, 1, o, &part);
        snprintf(how, sizeof how, "a split at %zu", i);
        same(&whole, &part, text, how);
    }
    if (n <= 120)
        for (size_t i = 0; i <= n; i++)
            for (size_t j = i; j <= n; j++) {
                size_t cut[2] = {i, j};
                parse(text, cut, 2, o, &part);
                snprintf(how, sizeof how, "splits at %zu and %zu", i, j);
                same(&whole, &part, text, how);
            }
    size_t *bytes = malloc((n + 1) * sizeof *bytes);
    for (size_t i = 0; i < n; i++)
        bytes[i] = i + 1;
    parse(text, bytes, n ? (int)n - 1 : 0, o, &part);
    free(bytes);
    same(&whole, &part, text, "one byte per push");
}

START_TEST(syntax_strings)
{
    ck_assert(LLMRT_VT_HAS(CV, llmrt_chat_vtable, syntax));
    const llmrt_chat_syntax *sx = CV->syntax(chat);
    ck_assert_str_eq(sx->tool_call_open, "<tool_call>\n");
    ck_assert_str_eq(sx->tool_call_close, "\n</tool_call>");
    ck_assert_str_eq(sx->think_open, "<think>");
    ck_assert_str_eq(sx->think_close, "</think>");
    ck_assert_int_eq(sx->thinks_by_default, 1);
    ck_assert(LLMRT_VT_HAS(CV, llmrt_chat_vtable, parser_create) &&
              LLMRT_VT_HAS(CV, llmrt_chat_vtable, parser_push) &&
              LLMRT_VT_HAS(CV, llmrt_chat_vtable, parser_finish) &&
              LLMRT_VT_HAS(CV, llmrt_chat_vtable, parser_destroy));
}
END_TEST

START_TEST(reasoning)
{
    const char *r = "<think>\nLet me think.\nIt is 2+2.\n</think>\n\nThe answer is 4.";
    expect(r, DEFAULT, "The answer is 4.", "Let me think.\nIt is 2+2.", "");
    /* server.reasoning = off: all of it is content */
    expect(r, (opts){0, 0, 1}, r, "", "");
    /* an empty think block (what enable_thinking = false leaves in history) */
    expect("<think>\n\n</think>\n\nHi", DEFAULT, "Hi", "", "");
    /* <think> counts only as the reply's first bytes */
    expect("Hello <think>x</think> there", DEFAULT, "Hello <think>x</think> there", "", "");
    expect(" <think>x</think>", DEFAULT, " <think>x</think>", "", "");
    /* cut off while thinking (max_tokens): what there is is reasoning */
    expect("<think>\nthinking about it\n", DEFAULT, "", "thinking about it", "");
    expect("<think>abc</thi", DEFAULT, "", "abc</thi", "");
    expect("<thi", DEFAULT, "<thi", "", "");
    /* the prompt left the think block open: the reply starts inside it */
    expect("I am thinking.\n</think>\n\nHello", (opts){1, 1, 1}, "Hello", "I am thinking.", "");
    expect("Still thinking\n", (opts){1, 1, 1}, "", "Still thinking", "");
    expect("I am thinking.\n</think>\n\nHello", (opts){0, 1, 1},
           "I am thinking.\n</think>\n\nHello", "", "");
    /* tags inside reasoning are reasoning */
    expect("<think>\nmaybe <tool_call> here\n</think>\n\nok", DEFAULT, "ok",
           "maybe <tool_call> here", "");
    /* UTF-8 passes through unchanged, whatever the split */
    expect("<think>\nGrüße 👋\n</think>\n\nŻółw 🐢\n", DEFAULT, "Żółw 🐢\n", "Grüße 👋", "");
}
END_TEST

START_TEST(tool_calls)
{
    expect("<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": "
           "\"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 0.1}}\n</tool_call>",
           DEFAULT, "", "The user wants the weather.",
           "get_weather({\"city\": \"Paris\", \"days\": 0.1})");
    /* two calls: the newlines between them belong to the markup */
    expect("<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>\n"
           "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>\n",
           DEFAULT, "", "", "a({\"x\": [1, 2]});b({})");
    /* text around the calls stays content */
    expect("Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"x\"}}\n"
           "</tool_call>\nDone.",
           DEFAULT, "Let me check.\nDone.", "", "f({\"q\": \"x\"})");
    /* arguments as the model wrote them (spacing, order, number spelling) */
    expect("<tool_call>\n{\"arguments\":{\"b\":1e2,  \"a\":\"\\u00e9\"},\"name\":\"g\"}\n</tool_call>",
           DEFAULT, "", "", "g({\"b\":1e2,  \"a\":\"\\u00e9\"})");
    /* arguments absent, or a string holding an object */
    expect("<tool_call>\n{\"name\": \"now\"}\n</tool_call>", DEFAULT, "", "", "now({})");
    expect("<tool_call>\n{\"name\": \"h\", \"arguments\": \"{\\\"a\\\": 1}\"}\n</tool_call>",
           DEFAULT, "", "", "h({\"a\": 1})");
    /* a call cut off after a whole JSON object (no closing tag) still counts */
    expect("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", DEFAULT, "", "", "f({})");
    /* tool calls off (no tools, or tool_choice none): the markup is content */
    const char *c = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    expect(c, (opts){1, 0, 0}, c, "", "");
    /* a partial tag at the end is content */
    expect("Hello <tool_c", DEFAULT, "Hello <tool_c", "", "");
    expect("Hello\n\n", DEFAULT, "Hello\n\n", "", "");
}
END_TEST

START_TEST(malformed_calls_stay_text)
{
    const char *bad[] = {
        "Sure.\n<tool_call>\n{\"name\": broken}\n</tool_call>",
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": 7, \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>",
        "<tool_call>\n[\"f\"]\n</tool_call>",
        "<tool_call>\n\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {}} trailing\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\",",
        "x\n\n<tool_call>{\"name\": \"f\\u0000\", \"arguments\": {}}</tool_call>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect(bad[i], DEFAULT, bad[i], "", "");
    /* a NUL byte in the body (jansson would read it as a blank): text, whatever the split */
    const char nul[] = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1\0, 2]}}\n</tool_call>";
    for (size_t cut = 0; cut <= sizeof nul - 1; cut++) {
        got g;
        memset(&g, 0, sizeof g);
        g.open_call = -1;
        llmrt_reply_sink sink = {&g, on_content, on_reasoning, on_begin, on_args, on_end};
        llmrt_reply_options ro = {sizeof ro, 1, 0, 1};
        llmrt_reply_parser *p = NULL;
        llmrt_error err = {0};
        ck_assert_int_eq(CV->parser_create(chat, &ro, &p, &err), LLMRT_OK);
        ck_assert_int_eq(CV->parser_push(p, nul, cut, &sink, &err), LLMRT_OK);
        ck_assert_int_eq(CV->parser_push(p, nul + cut, sizeof nul - 1 - cut, &sink, &err), LLMRT_OK);
        ck_assert_int_eq(CV->parser_finish(p, &sink, &err), LLMRT_OK);
        CV->parser_destroy(p);
        ck_assert_int_eq(g.n_calls, 0);
        ck_assert_uint_eq(g.nc, sizeof nul - 1);
        ck_assert(memcmp(g.content, nul, sizeof nul - 1) == 0);
    }
    /* one good call, then a broken one: the broken one (with its newline) is content */
    expect("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
           "{oops}\n</tool_call>",
           DEFAULT, "\n<tool_call>\n{oops}\n</tool_call>", "", "f({})");
}
END_TEST

START_TEST(errors)
{
    llmrt_reply_parser *p = NULL;
    llmrt_error err = {0};
    got g;
    memset(&g, 0, sizeof g);
    g.open_call = -1;
    llmrt_reply_sink sink = {&g, on_content, on_reasoning, on_begin, on_args, on_end};
    ck_assert_int_eq(CV->parser_create(chat, NULL, &p, &err), LLMRT_OK); /* defaults: plain */
    ck_assert_int_eq(CV->parser_push(p, "<think>x", 8, &sink, &err), LLMRT_OK);
    ck_assert_int_eq(CV->parser_finish(p, &sink, &err), LLMRT_OK);
    ck_assert_str_eq(g.content, "<think>x");
    ck_assert_int_eq(CV->parser_push(p, "y", 1, &sink, &err), LLMRT_ERR_STATE);
    ck_assert_int_eq(CV->parser_finish(p, &sink, &err), LLMRT_ERR_STATE);
    CV->parser_destroy(p);
    CV->parser_destroy(NULL);
}
END_TEST

START_TEST(host_side)
{
    llmrt_chat_ref ref = {.vt = CV, .c = chat};
    /* Qwen3's hybrid template: the model opens <think> itself; a prompt of
     * enable_thinking=false closes it; a thinking-only template leaves it open */
    ck_assert_int_eq(llmrt_chat_prompt_in_reasoning(&ref, "<|im_start|>assistant\n"), 0);
    ck_assert_int_eq(llmrt_chat_prompt_in_reasoning(&ref, "<|im_start|>assistant\n<think>\n\n</think>\n\n"), 0);
    ck_assert_int_eq(llmrt_chat_prompt_in_reasoning(&ref, "<|im_start|>assistant\n<think>\n"), 1);
    ck_assert_int_eq(llmrt_chat_prompt_in_reasoning(&ref, "a<think>x</think>b<|im_start|>assistant\n<think>\n"), 1);
    ck_assert_int_eq(llmrt_chat_prompt_in_reasoning(NULL, "<think>"), 0);
    ck_assert_ptr_eq(llmrt_chat_syntax_of(&ref), CV->syntax(chat));

    got g;
    memset(&g, 0, sizeof g);
    g.open_call = -1;
    llmrt_reply_sink sink = {&g, on_content, on_reasoning, on_begin, on_args, on_end};
    llmrt_reply_options ro = {sizeof ro, 1, 1, 1};
    llmrt_chat_parser *p = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_chat_parser_open(&ref, &ro, &p, &err), LLMRT_OK);
    const char *r = "hmm\n</think>\n\nok";
    ck_assert_int_eq(llmrt_chat_parser_push(p, r, strlen(r), &sink, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_chat_parser_finish(p, &sink, &err), LLMRT_OK);
    llmrt_chat_parser_free(p);
    ck_assert_str_eq(g.reasoning, "hmm");
    ck_assert_str_eq(g.content, "ok");

    /* a family whose vtable predates the parser (struct_size without it): all content */
    llmrt_chat_vtable old = *CV;
    old.struct_size = (uint32_t)offsetof(llmrt_chat_vtable, parser_create);
    llmrt_chat_ref ref_old = {.vt = &old, .c = chat};
    memset(&g, 0, sizeof g);
    g.open_call = -1;
    ck_assert_int_eq(llmrt_chat_parser_open(&ref_old, &ro, &p, &err), LLMRT_OK);
    r = "<think>x</think><tool_call>{}</tool_call>";
    ck_assert_int_eq(llmrt_chat_parser_push(p, r, strlen(r), &sink, &err), LLMRT_OK);
    ck_assert_int_eq(llmrt_chat_parser_finish(p, &sink, &err), LLMRT_OK);
    llmrt_chat_parser_free(p);
    ck_assert_str_eq(g.content, r);
    ck_assert_str_eq(g.reasoning, "");
    /* no chat format at all: the same */
    ck_assert_int_eq(llmrt_chat_parser_open(NULL, &ro, &p, &err), LLMRT_OK);
    llmrt_chat_parser_free(p);
}
END_TEST

static char *read_text(const char *rel)
{
    char path[4200];
    const char *src = getenv("LLMRT_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/%s", src ? src : ".", rel);
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
    char *tmpl = read_text("tests/fixtures/tokenizer/qwen3_chat_template.jinja");
    llmrt_error err = {0};
    if (CV->create(NULL, tmpl, "fixture", &chat, &err) != LLMRT_OK) {
        fprintf(stderr, "the Qwen3 template is not recognised: %s\n", err.msg);
        return 1;
    }
    free(tmpl);
    Suite *s = suite_create("qwen3_reply");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, syntax_strings);
    tcase_add_test(tc, reasoning);
    tcase_add_test(tc, tool_calls);
    tcase_add_test(tc, malformed_calls_stay_text);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, host_side);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    CV->destroy(chat);
    return failed ? 1 : 0;
}
