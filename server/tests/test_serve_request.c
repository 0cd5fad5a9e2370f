/* test_serve_request.c — parsing and validation of `llmrt serve`'s request bodies: every
 * accepted form of a prompt, OpenAI's and vLLM's sampling fields landing in the engine's
 * values, defaults, and every rejection naming its field (message and param) with status
 * 400; plus thousands of truncated and corrupted bodies that must each either parse or be
 * rejected cleanly (ASan watches for the rest). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_request.h"

static llmrt_serve_request *parse_ok(llmrt_serve_kind kind, const char *body)
{
    llmrt_serve_request *r = NULL;
    llmrt_serve_error e = {0};
    llmrt_status st = llmrt_serve_request_parse(kind, body, strlen(body), &r, &e);
    ck_assert_msg(st == LLMRT_OK, "'%s' rejected: %s", body, e.message);
    return r;
}

/* A 400 whose param is `param` ("" = null) and whose message contains `text`. */
static void parse_bad(llmrt_serve_kind kind, const char *body, const char *param,
                      const char *text)
{
    llmrt_serve_request *r = NULL;
    llmrt_serve_error e = {0};
    llmrt_status st = llmrt_serve_request_parse(kind, body, strlen(body), &r, &e);
    ck_assert_msg(st != LLMRT_OK, "'%s' accepted", body);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(e.status, 400);
    ck_assert_str_eq(e.type, "invalid_request_error");
    ck_assert_msg(strcmp(e.param, param) == 0, "'%s': param '%s', expected '%s' (%s)", body,
                  e.param, param, e.message);
    ck_assert_msg(strstr(e.message, text), "'%s': message '%s' lacks '%s'", body, e.message,
                  text);
}

START_TEST(test_completion_fields)
{
    llmrt_serve_request *r = parse_ok(
        LLMRT_SERVE_COMPLETIONS,
        "{\"model\": \"m\", \"prompt\": \"hi\", \"max_tokens\": 7, \"temperature\": 0.5, "
        "\"top_p\": 0.9, \"top_k\": 40, \"min_p\": 0.1, \"seed\": -3, \"stop\": [\"a\", \"\", "
        "\"bc\"], \"n\": 2, \"stream\": true, \"stream_options\": {\"include_usage\": true}, "
        "\"logprobs\": 3, \"echo\": false, \"ignore_eos\": true, \"presence_penalty\": -1, "
        "\"frequency_penalty\": 2, \"repetition_penalty\": 1.2, \"min_tokens\": 2, "
        "\"stop_token_ids\": [5, 6], \"user\": \"u\", \"unknown_field\": {\"x\": 1}}");
    ck_assert_str_eq(r->model, "m");
    ck_assert_int_eq(r->n_prompts, 1);
    ck_assert_str_eq(r->prompts[0].text, "hi");
    ck_assert_int_eq(r->has_max_tokens, 1);
    ck_assert_int_eq(r->sampling.max_tokens, 7);
    ck_assert_float_eq_tol(r->sampling.temperature, 0.5, 1e-6);
    ck_assert_float_eq_tol(r->sampling.top_p, 0.9, 1e-6);
    ck_assert_int_eq(r->sampling.top_k, 40);
    ck_assert_float_eq_tol(r->sampling.min_p, 0.1, 1e-6);
    ck_assert_int_eq(r->sampling.has_seed, 1);
    ck_assert_uint_eq(r->sampling.seed, (uint64_t)-3);
    ck_assert_int_eq(r->sampling.n_stop, 2); /* the empty string is dropped */
    ck_assert_str_eq(r->sampling.stop[0], "a");
    ck_assert_str_eq(r->sampling.stop[1], "bc");
    ck_assert_int_eq(r->n, 2);
    ck_assert_int_eq(r->stream, 1);
    ck_assert_int_eq(r->include_usage, 1);
    ck_assert_int_eq(r->sampling.logprobs, 3);
    ck_assert_int_eq(r->sampling.ignore_eos, 1);
    ck_assert_float_eq_tol(r->sampling.presence_penalty, -1, 1e-6);
    ck_assert_float_eq_tol(r->sampling.frequency_penalty, 2, 1e-6);
    ck_assert_float_eq_tol(r->sampling.repetition_penalty, 1.2, 1e-6);
    ck_assert_int_eq(r->sampling.min_tokens, 2);
    ck_assert_int_eq(r->sampling.n_stop_ids, 2);
    ck_assert_int_eq(r->sampling.stop_ids[1], 6);
    llmrt_serve_request_free(r);
}
END_TEST

START_TEST(test_defaults)
{
    llmrt_serve_request *r = parse_ok(LLMRT_SERVE_COMPLETIONS, "{\"prompt\": \"x\", \"max_tokens\": null}");
    llmrt_sampling d;
    llmrt_sampling_init(&d);
    ck_assert_ptr_null(r->model);
    ck_assert_int_eq(r->has_max_tokens, 0);
    ck_assert_int_eq(r->n, 1);
    ck_assert_int_eq(r->stream, 0);
    ck_assert_int_eq(r->sampling.logprobs, d.logprobs);
    ck_assert_float_eq(r->sampling.temperature, d.temperature);
    ck_assert_int_eq(r->sampling.has_seed, 0);
    ck_assert_int_eq(r->sampling.n_stop, 0);
    llmrt_serve_request_free(r);
    /* an integral number is an integer; top_k -1 means off */
    r = parse_ok(LLMRT_SERVE_COMPLETIONS, "{\"prompt\": \"x\", \"max_tokens\": 16.0, \"top_k\": -1}");
    ck_assert_int_eq(r->sampling.max_tokens, 16);
    ck_assert_int_eq(r->sampling.top_k, 0);
    llmrt_serve_request_free(r);
    r = parse_ok(LLMRT_SERVE_COMPLETIONS, "{\"prompt\": \"x\", \"stop\": \"END\"}");
    ck_assert_int_eq(r->sampling.n_stop, 1);
    ck_assert_str_eq(r->sampling.stop[0], "END");
    llmrt_serve_request_free(r);
}
END_TEST

START_TEST(test_prompt_forms)
{
    llmrt_serve_request *r = parse_ok(LLMRT_SERVE_COMPLETIONS, "{\"prompt\": [1, 2, 3]}");
    ck_assert_int_eq(r->n_prompts, 1);
    ck_assert_ptr_null(r->prompts[0].text);
    ck_assert_int_eq(r->prompts[0].n_ids, 3);
    ck_assert_int_eq(r->prompts[0].ids[2], 3);
    llmrt_serve_request_free(r);
    r = parse_ok(LLMRT_SERVE_COMPLETIONS, "{\"prompt\": [[7, 8]]}");
    ck_assert_int_eq(r->n_prompts, 1);
    ck_assert_int_eq(r->prompts[0].n_ids, 2);
    llmrt_serve_request_free(r);
    r = parse_ok(LLMRT_SERVE_COMPLETIONS, "{\"prompt\": [\"a\", [4], \"b\\u00e9\"]}");
    ck_assert_int_eq(r->n_prompts, 3);
    ck_assert_str_eq(r->prompts[0].text, "a");
    ck_assert_int_eq(r->prompts[1].ids[0], 4);
    ck_assert_str_eq(r->prompts[2].text, "b\xc3\xa9");
    ck_assert_uint_eq(r->prompts[2].text_len, 3);
    llmrt_serve_request_free(r);
}
END_TEST

START_TEST(test_rejections_name_the_field)
{
    const llmrt_serve_kind C = LLMRT_SERVE_COMPLETIONS;
    parse_bad(C, "{\"prompt\": ", "", "not valid JSON");
    parse_bad(C, "", "", "not valid JSON");
    parse_bad(C, "[1]", "", "must be a JSON object");
    parse_bad(C, "{}", "prompt", "'prompt' is required");
    parse_bad(C, "{\"prompt\": 3}", "prompt", "got an integer");
    parse_bad(C, "{\"prompt\": \"\"}", "prompt", "must not be empty");
    parse_bad(C, "{\"prompt\": []}", "prompt", "empty array");
    parse_bad(C, "{\"prompt\": [[]]}", "prompt", "'prompt[0]' must not be an empty array");
    parse_bad(C, "{\"prompt\": [1, \"a\"]}", "prompt", "'prompt[1]' must be a token id");
    parse_bad(C, "{\"prompt\": [1, -2]}", "prompt", "got -2");
    parse_bad(C, "{\"prompt\": [\"a\", {}]}", "prompt", "'prompt[1]' must be a string or an array");
    parse_bad(C, "{\"prompt\": \"x\", \"model\": 4}", "model", "must be a string");
    parse_bad(C, "{\"prompt\": \"x\", \"max_tokens\": \"8\"}", "max_tokens", "must be an integer, got a string");
    parse_bad(C, "{\"prompt\": \"x\", \"max_tokens\": -5}", "max_tokens", "at least 1, got -5");
    parse_bad(C, "{\"prompt\": \"x\", \"max_tokens\": 2.5}", "max_tokens", "must be an integer");
    parse_bad(C, "{\"prompt\": \"x\", \"temperature\": \"hot\"}", "temperature", "must be a number");
    parse_bad(C, "{\"prompt\": \"x\", \"temperature\": -0.1}", "temperature", "at least 0");
    parse_bad(C, "{\"prompt\": \"x\", \"top_p\": 0}", "top_p", "(0, 1]");
    parse_bad(C, "{\"prompt\": \"x\", \"top_p\": 1.01}", "top_p", "(0, 1]");
    parse_bad(C, "{\"prompt\": \"x\", \"top_k\": -2}", "top_k", "at least -1");
    parse_bad(C, "{\"prompt\": \"x\", \"min_p\": 2}", "min_p", "[0, 1]");
    parse_bad(C, "{\"prompt\": \"x\", \"presence_penalty\": 3}", "presence_penalty", "[-2, 2]");
    parse_bad(C, "{\"prompt\": \"x\", \"frequency_penalty\": -2.5}", "frequency_penalty", "[-2, 2]");
    parse_bad(C, "{\"prompt\": \"x\", \"repetition_penalty\": 0}", "repetition_penalty", "greater than 0");
    parse_bad(C, "{\"prompt\": \"x\", \"seed\": \"s\"}", "seed", "integer");
    parse_bad(C, "{\"prompt\": \"x\", \"n\": 0}", "n", "between 1 and");
    parse_bad(C, "{\"prompt\": \"x\", \"stream\": 1}", "stream", "boolean");
    parse_bad(C, "{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": true}}", "stream_options", "only allowed");
    parse_bad(C, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": 1}", "stream_options", "must be an object");
    parse_bad(C, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": {\"include_usage\": \"y\"}}", "stream_options.include_usage", "boolean");
    parse_bad(C, "{\"prompt\": \"x\", \"stop\": 5}", "stop", "string or an array");
    parse_bad(C, "{\"prompt\": \"x\", \"stop\": [\"a\", 5]}", "stop", "'stop[1]' must be a string");
    parse_bad(C, "{\"prompt\": \"x\", \"stop_token_ids\": [1, \"a\"]}", "stop_token_ids", "token id");
    parse_bad(C, "{\"prompt\": \"x\", \"logprobs\": true}", "logprobs", "must be an integer");
    parse_bad(C, "{\"prompt\": \"x\", \"logprobs\": 21}", "logprobs", "between 0 and 20");
    parse_bad(C, "{\"prompt\": \"x\", \"echo\": true}", "echo", "not supported");
    parse_bad(C, "{\"prompt\": \"x\", \"suffix\": \"s\"}", "suffix", "not supported");
    parse_bad(C, "{\"prompt\": \"x\", \"logit_bias\": {\"5\": 1}}", "logit_bias", "not supported");
    parse_bad(C, "{\"prompt\": \"x\", \"best_of\": 3}", "best_of", "larger than 'n'");
    parse_bad(C, "{\"prompt\": \"x\", \"ignore_eos\": \"yes\"}", "ignore_eos", "boolean");
    parse_bad(C, "{\"prompt\": \"x\", \"min_tokens\": 9, \"max_tokens\": 3}", "min_tokens", "must not exceed");
    /* absurd numbers: the limit they pass is named, with the field */
    parse_bad(C, "{\"prompt\": \"x\", \"temperature\": 1e300}", "temperature",
              "'temperature' must be at most 3.40282e+38, got 1e+300");
    parse_bad(C, "{\"prompt\": \"x\", \"repetition_penalty\": 1e39}", "repetition_penalty",
              "must be at most");
    parse_bad(C, "{\"prompt\": \"x\", \"top_k\": 99999999999}", "top_k",
              "between -1 and 2147483647, got 99999999999");
    parse_bad(C, "{\"prompt\": \"x\", \"seed\": 1e30}", "seed", "must be at most");
    parse_bad(C, "{\"prompt\": \"x\", \"n\": 1e30}", "n", "must be at most 4096, got 1e+30");
}
END_TEST

/* max_tokens of any size parses: the server compares it with what the context leaves and
 * names that limit (a parse cannot know it). */
START_TEST(test_huge_max_tokens)
{
    llmrt_serve_request *r = parse_ok(LLMRT_SERVE_COMPLETIONS,
                                      "{\"prompt\": \"x\", \"max_tokens\": 9223372036854775807}");
    ck_assert_int_eq(r->has_max_tokens, 1);
    ck_assert_int_eq(r->max_tokens_asked, INT64_MAX);
    ck_assert_int_eq(r->sampling.max_tokens, INT32_MAX);
    llmrt_serve_request_free(r);
}
END_TEST

START_TEST(test_chat)
{
    const llmrt_serve_kind K = LLMRT_SERVE_CHAT;
    llmrt_serve_request *r = parse_ok(
        K, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 9, "
           "\"max_completion_tokens\": 4, \"logprobs\": true, \"top_logprobs\": 5, "
           "\"chat_template_kwargs\": {\"enable_thinking\": false, \"other\": 1}, "
           "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], "
           "\"tool_choice\": \"auto\", \"response_format\": {\"type\": \"text\"}}");
    ck_assert_ptr_nonnull(r->messages);
    ck_assert_uint_eq(json_array_size(r->messages), 1);
    ck_assert_ptr_nonnull(r->tools);
    ck_assert_int_eq(r->sampling.max_tokens, 4); /* max_completion_tokens wins */
    ck_assert_int_eq(r->chat_logprobs, 1);
    ck_assert_int_eq(r->sampling.logprobs, 5);
    ck_assert_int_eq(r->enable_thinking, 0);
    ck_assert_int_eq(r->add_generation_prompt, 1);
    ck_assert_int_eq(r->add_special_tokens, 0);
    llmrt_serve_request_free(r);
    r = parse_ok(K, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"logprobs\": true}");
    ck_assert_int_eq(r->sampling.logprobs, 0); /* the sampled token's logprob only */
    ck_assert_int_eq(r->enable_thinking, 1);
    llmrt_serve_request_free(r);

    parse_bad(K, "{}", "messages", "'messages' is required");
    parse_bad(K, "{\"messages\": {}}", "messages", "must be an array");
    parse_bad(K, "{\"messages\": []}", "messages", "at least one message");
    parse_bad(K, "{\"messages\": [\"hi\"]}", "messages[0]", "must be an object");
    parse_bad(K, "{\"messages\": [{\"content\": \"hi\"}]}", "messages[0]", "'messages[0].role' must be a string");
    parse_bad(K, "{\"messages\": [{\"role\": \"user\"}], \"tools\": {}}", "tools", "must be an array");
    parse_bad(K, "{\"messages\": [{\"role\": \"user\"}], \"top_logprobs\": 2}", "top_logprobs", "needs \"logprobs\": true");
    parse_bad(K, "{\"messages\": [{\"role\": \"user\"}], \"logprobs\": 2}", "logprobs", "boolean");
    parse_bad(K, "{\"messages\": [{\"role\": \"user\"}], \"max_completion_tokens\": 0}", "max_completion_tokens", "at least 1");
    parse_bad(K, "{\"messages\": [{\"role\": \"user\"}], \"chat_template_kwargs\": []}", "chat_template_kwargs", "must be an object");
    parse_bad(K, "{\"messages\": [{\"role\": \"user\"}], \"chat_template_kwargs\": {\"enable_thinking\": 1}}", "chat_template_kwargs.enable_thinking", "boolean");
    parse_bad(K, "{\"messages\": [{\"role\": \"user\"}], \"tool_choice\": \"required\"}", "tool_choice", "needs 'tools'");
}
END_TEST

/* tool_choice / parallel_tool_calls as PART B's constrained decoding reads them, the
 * sampling fields the body set (the rest take the model's defaults), unknown field names. */
START_TEST(test_tools_and_given)
{
    const llmrt_serve_kind K = LLMRT_SERVE_CHAT;
#define MSG "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]"
#define TOOLS "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, " \
              "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}]"
    llmrt_serve_request *r = parse_ok(K, "{" MSG "}");
    ck_assert_int_eq(r->tool_choice.kind, LLMRT_SERVE_TOOL_CHOICE_NONE); /* no tools: none */
    ck_assert_int_eq(r->parallel_tool_calls, 1);
    ck_assert_uint_eq(r->sampling_given, 0);
    ck_assert_int_eq(r->n_unknown, 0);
    llmrt_serve_request_free(r);
    r = parse_ok(K, "{" MSG ", " TOOLS "}");
    ck_assert_int_eq(r->tool_choice.kind, LLMRT_SERVE_TOOL_CHOICE_AUTO); /* tools: auto */
    llmrt_serve_request_free(r);
    r = parse_ok(K, "{" MSG ", " TOOLS ", \"tool_choice\": \"none\", \"parallel_tool_calls\": false}");
    ck_assert_int_eq(r->tool_choice.kind, LLMRT_SERVE_TOOL_CHOICE_NONE);
    ck_assert_int_eq(r->parallel_tool_calls, 0);
    llmrt_serve_request_free(r);
    r = parse_ok(K, "{" MSG ", " TOOLS ", \"tool_choice\": \"required\"}");
    ck_assert_int_eq(r->tool_choice.kind, LLMRT_SERVE_TOOL_CHOICE_REQUIRED);
    ck_assert_ptr_null(r->tool_choice.name);
    llmrt_serve_request_free(r);
    r = parse_ok(K, "{" MSG ", " TOOLS ", \"tool_choice\": {\"type\": \"function\", "
                    "\"function\": {\"name\": \"g\"}}}");
    ck_assert_int_eq(r->tool_choice.kind, LLMRT_SERVE_TOOL_CHOICE_FUNCTION);
    ck_assert_str_eq(r->tool_choice.name, "g");
    llmrt_serve_request_free(r);
    parse_bad(K, "{" MSG ", " TOOLS ", \"tool_choice\": \"always\"}", "tool_choice", "\"always\"");
    parse_bad(K, "{" MSG ", " TOOLS ", \"tool_choice\": 1}", "tool_choice", "string or an object");
    parse_bad(K, "{" MSG ", " TOOLS ", \"tool_choice\": {\"type\": \"function\"}}", "tool_choice", "{\"type\": \"function\"");
    parse_bad(K, "{" MSG ", " TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"h\"}}}", "tool_choice", "\"h\", which is not one of 'tools'");
    parse_bad(K, "{" MSG ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"h\"}}}", "tool_choice", "needs 'tools'");
    parse_bad(K, "{" MSG ", " TOOLS ", \"parallel_tool_calls\": 1}", "parallel_tool_calls", "boolean");

    /* explicit sampling values are marked given, 0 included */
    r = parse_ok(K, "{" MSG ", \"temperature\": 0, \"top_k\": -1, \"presence_penalty\": 1}");
    ck_assert_uint_eq(r->sampling_given, LLMRT_SAMPLING_TEMPERATURE | LLMRT_SAMPLING_TOP_K);
    ck_assert_float_eq(r->sampling.temperature, 0);
    llmrt_serve_request_free(r);
    r = parse_ok(LLMRT_SERVE_COMPLETIONS, "{\"prompt\": \"x\", \"top_p\": 0.5, \"min_p\": 0.1, "
                                          "\"repetition_penalty\": 1.1, \"temperature\": null}");
    ck_assert_uint_eq(r->sampling_given, LLMRT_SAMPLING_TOP_P | LLMRT_SAMPLING_MIN_P |
                                             LLMRT_SAMPLING_REPETITION_PENALTY);
    llmrt_serve_request_free(r);

    /* unknown fields are listed (known-but-ignored ones are not) */
    r = parse_ok(K, "{" MSG ", \"user\": \"u\", \"guided_decoding_backend\": \"x\", \"frobnicate\": 1, "
                    "\"prompt\": \"a completions field\"}");
    ck_assert_int_eq(r->n_unknown, 3);
    ck_assert_str_eq(r->unknown[0], "guided_decoding_backend");
    ck_assert_str_eq(r->unknown[1], "frobnicate");
    ck_assert_str_eq(r->unknown[2], "prompt");
    llmrt_serve_request_free(r);
    r = parse_ok(LLMRT_SERVE_COMPLETIONS, "{\"prompt\": \"x\", \"tools\": []}");
    ck_assert_int_eq(r->n_unknown, 1);
    ck_assert_str_eq(r->unknown[0], "tools");
    llmrt_serve_request_free(r);
    char body[4096];
    int n = snprintf(body, sizeof body, "{\"prompt\": \"x\"");
    for (int i = 0; i < 40; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, ", \"x%d\": 1", i);
    snprintf(body + n, sizeof body - (size_t)n, "}");
    r = parse_ok(LLMRT_SERVE_COMPLETIONS, body);
    ck_assert_int_eq(r->n_unknown, LLMRT_SERVE_MAX_UNKNOWN); /* bounded */
    llmrt_serve_request_free(r);
#undef MSG
#undef TOOLS
}
END_TEST

/* response_format, structured_outputs and the older guided_* fields: what the reply must be,
 * in /v1/chat/completions and /v1/completions alike. */
START_TEST(test_structured_outputs)
{
    const llmrt_serve_kind K = LLMRT_SERVE_CHAT, C = LLMRT_SERVE_COMPLETIONS;
#define MSG "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
    llmrt_serve_request *r = parse_ok(K, MSG "\"response_format\": {\"type\": \"text\"}}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_TEXT);
    llmrt_serve_request_free(r);
    r = parse_ok(K, MSG "\"response_format\": {\"type\": \"json_object\"}}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_JSON_OBJECT);
    ck_assert_str_eq(r->format.param, "response_format");
    llmrt_serve_request_free(r);
    r = parse_ok(K, MSG "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
                        "{\"name\": \"p\", \"strict\": true, \"schema\": {\"type\": \"object\", "
                        "\"properties\": {\"a\": {\"type\": \"integer\"}}}}}}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_JSON_SCHEMA);
    ck_assert_int_eq(r->format.strict, 1);
    json_t *sch = json_loads(r->format.schema, 0, NULL);
    ck_assert(json_is_object(json_object_get(json_object_get(sch, "properties"), "a")));
    json_decref(sch);
    llmrt_serve_request_free(r);
    /* no schema: any JSON object */
    r = parse_ok(K, MSG "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
                        "{\"name\": \"p\"}}}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_JSON_OBJECT);
    llmrt_serve_request_free(r);
    /* vLLM's structured_outputs, in completions too; json as an object or as text */
    r = parse_ok(C, "{\"prompt\": \"x\", \"structured_outputs\": {\"json\": {\"type\": "
                    "\"boolean\"}, \"disable_additional_properties\": true}}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_JSON_SCHEMA);
    ck_assert_str_eq(r->format.schema, "{\"type\":\"boolean\"}");
    ck_assert_int_eq(r->format.strict, 1);
    ck_assert_str_eq(r->format.param, "structured_outputs");
    llmrt_serve_request_free(r);
    r = parse_ok(C, "{\"prompt\": \"x\", \"structured_outputs\": {\"json\": \"{\\\"type\\\": "
                    "\\\"null\\\"}\"}}");
    ck_assert_str_eq(r->format.schema, "{\"type\": \"null\"}");
    llmrt_serve_request_free(r);
    r = parse_ok(K, MSG "\"structured_outputs\": {\"regex\": \"[a-z]+\"}}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_REGEX);
    ck_assert_str_eq(r->format.regex, "[a-z]+");
    llmrt_serve_request_free(r);
    r = parse_ok(K, MSG "\"structured_outputs\": {\"choice\": [\"yes\", \"no\"]}}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_CHOICE);
    ck_assert_int_eq(r->format.n_choices, 2);
    ck_assert_str_eq(r->format.choices[1], "no");
    llmrt_serve_request_free(r);
    r = parse_ok(K, MSG "\"structured_outputs\": {\"json_object\": true}}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_JSON_OBJECT);
    llmrt_serve_request_free(r);
    r = parse_ok(C, "{\"prompt\": \"x\", \"guided_choice\": [\"a\"]}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_CHOICE);
    ck_assert_str_eq(r->format.param, "guided_choice");
    llmrt_serve_request_free(r);
    r = parse_ok(C, "{\"prompt\": \"x\", \"guided_json\": {\"type\": \"string\"}, "
                    "\"response_format\": {\"type\": \"text\"}}");
    ck_assert_int_eq(r->format.kind, LLMRT_SERVE_FORMAT_JSON_SCHEMA);
    llmrt_serve_request_free(r);

    parse_bad(K, MSG "\"response_format\": {\"type\": \"yaml\"}}", "response_format", "\"yaml\"");
    parse_bad(K, MSG "\"response_format\": \"json\"}", "response_format", "must be an object");
    parse_bad(K, MSG "\"response_format\": {\"type\": \"json_schema\"}}", "response_format", "json_schema");
    parse_bad(K, MSG "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"schema\": 3}}}",
              "response_format.json_schema.schema", "JSON schema");
    parse_bad(K, MSG "\"response_format\": {\"type\": \"json_object\"}, \"structured_outputs\": "
                     "{\"regex\": \"a\"}}",
              "structured_outputs", "give one");
    parse_bad(K, MSG "\"structured_outputs\": {\"regex\": \"a\", \"choice\": [\"b\"]}}",
              "structured_outputs", "exactly one");
    parse_bad(K, MSG "\"structured_outputs\": {}}", "structured_outputs", "exactly one");
    parse_bad(K, MSG "\"structured_outputs\": {\"grammar\": \"root ::= x\"}}", "structured_outputs",
              "'structured_outputs.grammar' is not supported");
    parse_bad(K, MSG "\"structured_outputs\": {\"choice\": []}}", "structured_outputs.choice", "non-empty");
    parse_bad(K, MSG "\"structured_outputs\": {\"choice\": [\"\"]}}", "structured_outputs.choice", "non-empty");
    parse_bad(K, MSG "\"structured_outputs\": {\"regex\": 5}}", "structured_outputs.regex", "regular expression");
    parse_bad(K, MSG "\"structured_outputs\": {\"json\": \"{bad\"}}", "structured_outputs.json", "not a valid JSON schema");
    parse_bad(K, MSG "\"structured_outputs\": {\"json\": {}, \"disable_any_whitespace\": true}}",
              "structured_outputs", "disable_any_whitespace");
    parse_bad(C, "{\"prompt\": \"x\", \"guided_grammar\": \"root ::= x\"}", "guided_grammar", "not supported");
#undef MSG
}
END_TEST

/* tool_choice: none / auto / required / a named function, checked against the tools. */
START_TEST(test_tool_choice)
{
    const llmrt_serve_kind K = LLMRT_SERVE_CHAT;
#define TOOLS "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": " \
              "\"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}, " \
              "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}], "
    llmrt_serve_request *r = parse_ok(K, TOOLS "\"tool_choice\": \"none\"}");
    ck_assert_int_eq(r->tool_choice.kind, LLMRT_SERVE_TOOL_CHOICE_NONE);
    ck_assert_int_eq(r->parallel_tool_calls, 1);
    llmrt_serve_request_free(r);
    r = parse_ok(K, TOOLS "\"tool_choice\": \"required\", \"parallel_tool_calls\": false}");
    ck_assert_int_eq(r->tool_choice.kind, LLMRT_SERVE_TOOL_CHOICE_REQUIRED);
    ck_assert_int_eq(r->parallel_tool_calls, 0);
    llmrt_serve_request_free(r);
    r = parse_ok(K, TOOLS "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}}");
    ck_assert_int_eq(r->tool_choice.kind, LLMRT_SERVE_TOOL_CHOICE_FUNCTION);
    ck_assert_str_eq(r->tool_choice.name, "g");
    llmrt_serve_request_free(r);
    r = parse_ok(K, TOOLS "\"tool_choice\": \"auto\"}");
    ck_assert_int_eq(r->tool_choice.kind, LLMRT_SERVE_TOOL_CHOICE_AUTO);
    llmrt_serve_request_free(r);

    parse_bad(K, TOOLS "\"tool_choice\": \"always\"}", "tool_choice", "\"always\"");
    parse_bad(K, TOOLS "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"h\"}}}",
              "tool_choice", "\"h\", which is not one of 'tools'");
    parse_bad(K, TOOLS "\"tool_choice\": {\"type\": \"function\"}}", "tool_choice", "{\"type\": \"function\"");
    parse_bad(K, TOOLS "\"tool_choice\": 1}", "tool_choice", "a string or an object");
    parse_bad(K, TOOLS "\"tool_choice\": \"required\", \"response_format\": {\"type\": \"json_object\"}}",
              "tool_choice", "both constrain the reply");
    parse_bad(K, TOOLS "\"parallel_tool_calls\": 1}", "parallel_tool_calls", "boolean");
    parse_bad(K, "{\"messages\": [{\"role\": \"user\"}], \"tools\": [{\"function\": {\"name\": 3}}], "
                 "\"tool_choice\": \"required\"}",
              "tools[0]", "function.name");
    parse_bad(K, "{\"messages\": [{\"role\": \"user\"}], \"tools\": [{\"function\": {\"name\": \"f\", "
                 "\"parameters\": []}}], \"tool_choice\": \"required\"}",
              "tools[0]", "parameters");
#undef TOOLS
}
END_TEST

START_TEST(test_tokenize_detokenize)
{
    llmrt_serve_request *r = parse_ok(LLMRT_SERVE_TOKENIZE, "{\"prompt\": \"a b\", \"return_token_strs\": true}");
    ck_assert_int_eq(r->n_prompts, 1);
    ck_assert_int_eq(r->add_special_tokens, 1);
    ck_assert_int_eq(r->return_token_strs, 1);
    llmrt_serve_request_free(r);
    r = parse_ok(LLMRT_SERVE_TOKENIZE, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"add_generation_prompt\": false}");
    ck_assert_ptr_nonnull(r->messages);
    ck_assert_int_eq(r->add_special_tokens, 0);
    ck_assert_int_eq(r->add_generation_prompt, 0);
    llmrt_serve_request_free(r);
    r = parse_ok(LLMRT_SERVE_DETOKENIZE, "{\"tokens\": [1, 2, 151645]}");
    ck_assert_int_eq(r->n_tokens, 3);
    ck_assert_int_eq(r->tokens[2], 151645);
    llmrt_serve_request_free(r);
    r = parse_ok(LLMRT_SERVE_DETOKENIZE, "{\"tokens\": []}");
    ck_assert_int_eq(r->n_tokens, 0);
    llmrt_serve_request_free(r);

    parse_bad(LLMRT_SERVE_TOKENIZE, "{}", "prompt", "exactly one of");
    parse_bad(LLMRT_SERVE_TOKENIZE, "{\"prompt\": \"a\", \"messages\": []}", "messages", "got both");
    parse_bad(LLMRT_SERVE_TOKENIZE, "{\"prompt\": [1]}", "prompt", "must be a string");
    parse_bad(LLMRT_SERVE_DETOKENIZE, "{}", "tokens", "required");
    parse_bad(LLMRT_SERVE_DETOKENIZE, "{\"tokens\": \"1 2\"}", "tokens", "must be an array");
    parse_bad(LLMRT_SERVE_DETOKENIZE, "{\"tokens\": [1, 2147483648]}", "tokens", "'tokens[1]'");
}
END_TEST

/* Every prefix of a valid body, and bodies with bytes replaced, either parse or come back
 * as a 400 with a message; never a crash, a leak (ASan) or a half-filled request. */
START_TEST(test_corrupted_bodies)
{
    static const char *const bodies[] = {
        "{\"model\": \"m\", \"prompt\": [\"ab\", [1, 2]], \"max_tokens\": 7, \"temperature\": 0.5, "
        "\"stop\": [\"x\", \"yz\"], \"stop_token_ids\": [3], \"stream\": true, "
        "\"stream_options\": {\"include_usage\": true}, \"logprobs\": 2, \"n\": 2}",
        "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}], "
        "\"tools\": [{\"type\": \"function\"}], \"chat_template_kwargs\": {\"enable_thinking\": true}, "
        "\"logprobs\": true, \"top_logprobs\": 2, \"max_completion_tokens\": 3}",
    };
    static const char junk[] = "\"{}[],:0-1e9x\\\x01\xff ";
    uint64_t rng = 12345;
    for (size_t b = 0; b < sizeof bodies / sizeof *bodies; b++) {
        llmrt_serve_kind kind = b == 0 ? LLMRT_SERVE_COMPLETIONS : LLMRT_SERVE_CHAT;
        const char *body = bodies[b];
        size_t len = strlen(body);
        char *buf = malloc(len + 1);
        for (size_t cut = 0; cut <= len; cut++) {
            llmrt_serve_request *r = NULL;
            llmrt_serve_error e = {0};
            llmrt_status st = llmrt_serve_request_parse(kind, body, cut, &r, &e);
            ck_assert(st == LLMRT_OK ? r != NULL : (r == NULL && e.status == 400 && e.message[0]));
            llmrt_serve_request_free(r);
        }
        for (int iter = 0; iter < 3000; iter++) {
            memcpy(buf, body, len + 1);
            for (int k = 0; k < 3; k++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                size_t pos = (size_t)(rng >> 33) % len;
                buf[pos] = junk[(rng >> 17) % (sizeof junk - 1)];
            }
            llmrt_serve_request *r = NULL;
            llmrt_serve_error e = {0};
            llmrt_status st = llmrt_serve_request_parse(kind, buf, len, &r, &e);
            ck_assert(st == LLMRT_OK ? r != NULL : (r == NULL && e.status == 400 && e.message[0]));
            llmrt_serve_request_free(r);
        }
        free(buf);
    }
}
END_TEST

START_TEST(test_error_set)
{
    llmrt_serve_error e;
    ck_assert_int_eq(llmrt_serve_error_set(&e, 404, NULL, "model_not_found", "model", "no %s", "x"),
                     LLMRT_ERR_NOT_FOUND);
    ck_assert_int_eq(e.status, 404);
    ck_assert_str_eq(e.type, "invalid_request_error");
    ck_assert_str_eq(e.code, "model_not_found");
    ck_assert_str_eq(e.param, "model");
    ck_assert_str_eq(e.message, "no x");
    ck_assert_int_eq(llmrt_serve_error_set(&e, 401, NULL, NULL, NULL, "k"), LLMRT_ERR_STATE);
    ck_assert_str_eq(e.type, "authentication_error");
    ck_assert_int_eq(llmrt_serve_error_set(&e, 503, NULL, NULL, NULL, "busy"), LLMRT_ERR_LIMIT);
    ck_assert_str_eq(e.type, "server_error");
    ck_assert_str_eq(e.param, "");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("serve_request");
    TCase *tc = tcase_create("serve_request");
    tcase_add_test(tc, test_completion_fields);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_prompt_forms);
    tcase_add_test(tc, test_rejections_name_the_field);
    tcase_add_test(tc, test_huge_max_tokens);
    tcase_add_test(tc, test_chat);
    tcase_add_test(tc, test_tools_and_given);
    tcase_add_test(tc, test_structured_outputs);
    tcase_add_test(tc, test_tool_choice);
    tcase_add_test(tc, test_tokenize_detokenize);
    tcase_add_test(tc, test_corrupted_bodies);
    tcase_add_test(tc, test_error_set);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
