/* test_serve_response.c — the JSON shapes `llmrt serve` answers with, field by field, as
 * OpenAI's clients expect them: error objects (null param/code), usage, choices of
 * completions and chat (whole and chunk), both logprobs styles, invalid UTF-8 never making
 * a response unserialisable, and SSE framing. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve_response.h"

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    ck_assert_msg(j != NULL, "not JSON (%s): %s", je.text, text);
    return j;
}

START_TEST(test_error_object)
{
    llmrt_serve_error e;
    llmrt_serve_error_set(&e, 400, NULL, NULL, "max_tokens", "'max_tokens' must be at least 1, got -5");
    size_t len = 0;
    char *text = llmrt_serve_error_text(&e, &len);
    ck_assert_uint_eq(len, strlen(text));
    json_t *j = parse(text);
    json_t *err = json_object_get(j, "error");
    ck_assert_uint_eq(json_object_size(j), 1);
    ck_assert_str_eq(json_string_value(json_object_get(err, "message")), e.message);
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), "invalid_request_error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "param")), "max_tokens");
    ck_assert(json_is_null(json_object_get(err, "code")));
    json_decref(j);
    free(text);
}
END_TEST

START_TEST(test_invalid_utf8_is_replaced)
{
    json_t *s = llmrt_serve_json_string("a\xe4\xb8" "b\xff" "c\xe4\xb8\x96", 9);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(json_string_value(s), "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xe4\xb8\x96");
    json_decref(s);
    s = llmrt_serve_json_string("x\0y\xc0", 4); /* an embedded NUL is valid JSON (\u0000) */
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(json_string_length(s), 6);
    char *text = json_dumps(s, JSON_ENCODE_ANY);
    ck_assert_str_eq(text, "\"x\\u0000y\xef\xbf\xbd\"");
    free(text);
    json_decref(s);
}
END_TEST

START_TEST(test_usage_and_head)
{
    json_t *u = llmrt_serve_usage(5, 7, 4);
    ck_assert_int_eq(json_integer_value(json_object_get(u, "prompt_tokens")), 5);
    ck_assert_int_eq(json_integer_value(json_object_get(u, "completion_tokens")), 7);
    ck_assert_int_eq(json_integer_value(json_object_get(u, "total_tokens")), 12);
    json_t *details = json_object_get(u, "prompt_tokens_details");
    ck_assert(json_is_object(details));
    ck_assert_int_eq(json_integer_value(json_object_get(details, "cached_tokens")), 4);
    json_decref(u);
    json_t *o = llmrt_serve_object("cmpl-1", "text_completion", 1700000000, "tiny");
    ck_assert_str_eq(json_string_value(json_object_get(o, "id")), "cmpl-1");
    ck_assert_str_eq(json_string_value(json_object_get(o, "object")), "text_completion");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "created")), 1700000000);
    ck_assert_str_eq(json_string_value(json_object_get(o, "model")), "tiny");
    json_decref(o);
}
END_TEST

START_TEST(test_choices)
{
    /* completions, whole: text, null logprobs, finish and stop_reason */
    llmrt_serve_choice_desc d = {.kind = LLMRT_SERVE_COMPLETIONS, .index = 2, .text = "abc",
                                 .text_len = 2, .finish = LLMRT_FINISH_STOP,
                                 .stop_reason = "END", .stop_token = -1};
    json_t *c = llmrt_serve_choice(&d);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "index")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(c, "text")), "ab");
    ck_assert(json_is_null(json_object_get(c, "logprobs")));
    ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "stop");
    ck_assert_str_eq(json_string_value(json_object_get(c, "stop_reason")), "END");
    json_decref(c);
    /* a stop token id as stop_reason; length */
    d.stop_reason = NULL;
    d.stop_token = 151645;
    c = llmrt_serve_choice(&d);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "stop_reason")), 151645);
    json_decref(c);
    d.finish = LLMRT_FINISH_LENGTH;
    d.stop_token = -1;
    c = llmrt_serve_choice(&d);
    ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "length");
    ck_assert(json_is_null(json_object_get(c, "stop_reason")));
    json_decref(c);
    /* completions chunk, not final: finish_reason null, no stop_reason */
    d = (llmrt_serve_choice_desc){.kind = LLMRT_SERVE_COMPLETIONS, .chunk = 1, .text = "x",
                                  .text_len = 1, .stop_token = -1};
    c = llmrt_serve_choice(&d);
    ck_assert(json_is_null(json_object_get(c, "finish_reason")));
    ck_assert_ptr_null(json_object_get(c, "stop_reason"));
    json_decref(c);
    /* chat, whole: message with role and content */
    d = (llmrt_serve_choice_desc){.kind = LLMRT_SERVE_CHAT, .text = "hi", .text_len = 2,
                                  .finish = LLMRT_FINISH_LENGTH, .stop_token = -1};
    c = llmrt_serve_choice(&d);
    json_t *m = json_object_get(c, "message");
    ck_assert_str_eq(json_string_value(json_object_get(m, "role")), "assistant");
    ck_assert_str_eq(json_string_value(json_object_get(m, "content")), "hi");
    ck_assert_ptr_null(json_object_get(c, "delta"));
    json_decref(c);
    /* chat chunks: the opening one has the role; a final one with no text has an empty delta */
    d = (llmrt_serve_choice_desc){.kind = LLMRT_SERVE_CHAT, .chunk = 1, .text = "",
                                  .with_role = 1, .stop_token = -1};
    c = llmrt_serve_choice(&d);
    m = json_object_get(c, "delta");
    ck_assert_str_eq(json_string_value(json_object_get(m, "role")), "assistant");
    ck_assert_str_eq(json_string_value(json_object_get(m, "content")), "");
    json_decref(c);
    d = (llmrt_serve_choice_desc){.kind = LLMRT_SERVE_CHAT, .chunk = 1, .text = NULL,
                                  .finish = LLMRT_FINISH_STOP, .stop_token = -1};
    c = llmrt_serve_choice(&d);
    ck_assert_uint_eq(json_object_size(json_object_get(c, "delta")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "stop");
    json_decref(c);
}
END_TEST

/* Reasoning and tool calls, whole and as deltas, in OpenAI's (and vLLM's) shapes. */
START_TEST(test_tool_calls_and_reasoning)
{
    llmrt_serve_tool_call calls[2] = {
        {.index = 0, .id = "call_a", .name = "get_weather", .arguments = "{\"city\": \"Paris\"}",
         .arguments_len = 18},
        {.index = 1, .id = "call_b", .name = "now", .arguments = "{}", .arguments_len = 2},
    };
    /* whole: content null, reasoning_content, tool_calls, finish "tool_calls" */
    llmrt_serve_choice_desc d = {.kind = LLMRT_SERVE_CHAT, .text = NULL, .reasoning = "hmm",
                                 .reasoning_len = 3, .tool_calls = calls, .n_tool_calls = 2,
                                 .tool_calls_finish = 1, .finish = LLMRT_FINISH_STOP,
                                 .stop_token = 151645};
    json_t *c = llmrt_serve_choice(&d);
    json_t *m = json_object_get(c, "message");
    ck_assert(json_is_null(json_object_get(m, "content")));
    ck_assert_str_eq(json_string_value(json_object_get(m, "reasoning_content")), "hmm");
    json_t *tc = json_object_get(m, "tool_calls");
    ck_assert_uint_eq(json_array_size(tc), 2);
    json_t *t0 = json_array_get(tc, 0);
    ck_assert_ptr_null(json_object_get(t0, "index")); /* whole calls carry no index */
    ck_assert_str_eq(json_string_value(json_object_get(t0, "id")), "call_a");
    ck_assert_str_eq(json_string_value(json_object_get(t0, "type")), "function");
    json_t *fn = json_object_get(t0, "function");
    ck_assert_str_eq(json_string_value(json_object_get(fn, "name")), "get_weather");
    ck_assert_str_eq(json_string_value(json_object_get(fn, "arguments")), "{\"city\": \"Paris\"}");
    ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "tool_calls");
    json_decref(c);
    /* cut off by max_tokens: still "length" */
    d.finish = LLMRT_FINISH_LENGTH;
    c = llmrt_serve_choice(&d);
    ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "length");
    json_decref(c);
    /* a reply without calls has neither tool_calls nor reasoning_content */
    d = (llmrt_serve_choice_desc){.kind = LLMRT_SERVE_CHAT, .text = "hi", .text_len = 2,
                                  .finish = LLMRT_FINISH_STOP, .stop_token = -1};
    c = llmrt_serve_choice(&d);
    m = json_object_get(c, "message");
    ck_assert_ptr_null(json_object_get(m, "tool_calls"));
    ck_assert_ptr_null(json_object_get(m, "reasoning_content"));
    ck_assert_str_eq(json_string_value(json_object_get(c, "finish_reason")), "stop");
    json_decref(c);
    /* deltas: the first of a call has index, id, type, name and empty arguments; later ones
     * only index and an arguments fragment; reasoning travels as delta.reasoning_content */
    llmrt_serve_tool_call first = {.index = 1, .id = "call_b", .name = "now"};
    d = (llmrt_serve_choice_desc){.kind = LLMRT_SERVE_CHAT, .chunk = 1, .tool_calls = &first,
                                  .n_tool_calls = 1, .stop_token = -1};
    c = llmrt_serve_choice(&d);
    t0 = json_array_get(json_object_get(json_object_get(c, "delta"), "tool_calls"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(t0, "index")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(t0, "id")), "call_b");
    ck_assert_str_eq(json_string_value(json_object_get(t0, "type")), "function");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(t0, "function"), "name")), "now");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(t0, "function"), "arguments")), "");
    ck_assert_ptr_null(json_object_get(json_object_get(c, "delta"), "content"));
    json_decref(c);
    llmrt_serve_tool_call more = {.index = 1, .arguments = "{}", .arguments_len = 2};
    d.tool_calls = &more;
    c = llmrt_serve_choice(&d);
    t0 = json_array_get(json_object_get(json_object_get(c, "delta"), "tool_calls"), 0);
    ck_assert_ptr_null(json_object_get(t0, "id"));
    ck_assert_ptr_null(json_object_get(t0, "type"));
    ck_assert_ptr_null(json_object_get(json_object_get(t0, "function"), "name"));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(t0, "function"), "arguments")), "{}");
    json_decref(c);
    d = (llmrt_serve_choice_desc){.kind = LLMRT_SERVE_CHAT, .chunk = 1, .reasoning = "so",
                                  .reasoning_len = 2, .stop_token = -1};
    c = llmrt_serve_choice(&d);
    m = json_object_get(c, "delta");
    ck_assert_str_eq(json_string_value(json_object_get(m, "reasoning_content")), "so");
    ck_assert_ptr_null(json_object_get(m, "content"));
    json_decref(c);
}
END_TEST

START_TEST(test_logprobs)
{
    int32_t top_ids[2] = {9, 4};
    float top_lps[2] = {-0.5f, -INFINITY};
    llmrt_serve_token_lp t = {.token = 4, .logprob = -INFINITY, .n_top = 2, .top_ids = top_ids,
                              .top_lps = top_lps};
    /* without a tokenizer tokens read "token_id:<id>" (vLLM's spelling) */
    json_t *lp = llmrt_serve_lp_completion_new();
    ck_assert_int_eq(llmrt_serve_lp_completion_add(lp, NULL, &t, 0), 0);
    t.token = 9;
    t.logprob = -0.5f;
    ck_assert_int_eq(llmrt_serve_lp_completion_add(lp, NULL, &t, 10), 0);
    json_t *tokens = json_object_get(lp, "tokens");
    ck_assert_uint_eq(json_array_size(tokens), 2);
    ck_assert_str_eq(json_string_value(json_array_get(tokens, 0)), "token_id:4");
    /* -inf is not JSON: clamped */
    ck_assert(json_real_value(json_array_get(json_object_get(lp, "token_logprobs"), 0)) <= -9999.0);
    json_t *top = json_array_get(json_object_get(lp, "top_logprobs"), 1);
    ck_assert_uint_eq(json_object_size(top), 2);
    ck_assert_double_eq_tol(json_real_value(json_object_get(top, "token_id:9")), -0.5, 1e-6);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(lp, "text_offset"), 1)), 10);
    char *text = json_dumps(lp, JSON_COMPACT);
    ck_assert_ptr_nonnull(text); /* serialisable */
    free(text);
    json_decref(lp);

    lp = llmrt_serve_lp_chat_new();
    ck_assert_int_eq(llmrt_serve_lp_chat_add(lp, NULL, &t), 0);
    json_t *e = json_array_get(json_object_get(lp, "content"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(e, "token")), "token_id:9");
    ck_assert_double_eq_tol(json_real_value(json_object_get(e, "logprob")), -0.5, 1e-6);
    ck_assert_uint_eq(json_array_size(json_object_get(e, "bytes")), strlen("token_id:9"));
    json_t *alts = json_object_get(e, "top_logprobs");
    ck_assert_uint_eq(json_array_size(alts), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(alts, 1), "token")), "token_id:4");
    json_decref(lp);
}
END_TEST

START_TEST(test_sse)
{
    json_t *o = json_pack("{s:s, s:[]}", "id", "x", "choices");
    size_t len = 0;
    char *ev = llmrt_serve_sse_event(o, &len);
    ck_assert_str_eq(ev, "data: {\"id\":\"x\",\"choices\":[]}\n\n");
    ck_assert_uint_eq(len, strlen(ev));
    free(ev);
    json_decref(o);
    ck_assert_str_eq(llmrt_serve_finish_str(LLMRT_FINISH_LENGTH), "length");
    ck_assert_ptr_null(llmrt_serve_finish_str(LLMRT_FINISH_NONE));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("serve_response");
    TCase *tc = tcase_create("serve_response");
    tcase_add_test(tc, test_error_object);
    tcase_add_test(tc, test_invalid_utf8_is_replaced);
    tcase_add_test(tc, test_usage_and_head);
    tcase_add_test(tc, test_tool_calls_and_reasoning);
    tcase_add_test(tc, test_choices);
    tcase_add_test(tc, test_logprobs);
    tcase_add_test(tc, test_sse);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
