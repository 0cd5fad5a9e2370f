/* serve_request.c — parse and validate OpenAI-compatible request bodies (see
 * serve_request.h). Every rejection names the field in the message and in `param`, says
 * what was found and what would be right. */
#include "serve_request.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

#define MAX_N 4096 /* most choices per prompt (the server's max_queue caps it further) */

llmrt_status llmrt_serve_error_set(llmrt_serve_error *e, int status, const char *type,
                                   const char *code, const char *param, const char *fmt, ...)
{
    llmrt_status st = LLMRT_ERR_STATE;
    switch (status) {
    case 400: st = LLMRT_ERR_INVALID_ARG; break;
    case 404: st = LLMRT_ERR_NOT_FOUND; break;
    case 413: case 429: case 503: st = LLMRT_ERR_LIMIT; break;
    case 500: st = LLMRT_ERR_INTERNAL; break;
    }
    if (!e)
        return st;
    if (!type)
        type = status == 401   ? "authentication_error"
               : status >= 500 ? "server_error"
                               : "invalid_request_error";
    e->status = status;
    snprintf(e->type, sizeof e->type, "%s", type);
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return st;
}

#define BAD(param, ...) llmrt_serve_error_set(err, 400, NULL, NULL, (param), __VA_ARGS__)

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* The getters return 0 when the field is absent or null (the default stays), 1 when set,
 * -1 on a bad value (err filled). */

static int get_bool(const json_t *root, const char *key, int *out, llmrt_serve_error *err)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v)) {
        BAD(key, "'%s' must be a boolean (true or false), got %s", key, json_kind(v));
        return -1;
    }
    *out = json_is_true(v);
    return 1;
}

/* An integer (a number with an integral value is accepted, as pydantic does) in [lo, hi]. */
static int int_value(const json_t *v, const char *name, int64_t lo, int64_t hi, int64_t *out,
                     llmrt_serve_error *err)
{
    int64_t x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && isfinite(json_real_value(v)) &&
               floor(json_real_value(v)) == json_real_value(v)) {
        double d = json_real_value(v);
        if (fabs(d) >= 9.0e18) { /* past int64: say the limit that was passed */
            if (d > 0)
                BAD(name, "'%s' must be at most %lld, got %g", name, (long long)hi, d);
            else
                BAD(name, "'%s' must be at least %lld, got %g", name, (long long)lo, d);
            return -1;
        }
        x = (int64_t)d;
    } else {
        BAD(name, "'%s' must be an integer, got %s", name, json_kind(v));
        return -1;
    }
    if (x < lo || x > hi) {
        int open_top = hi == INT64_MAX || hi == INT32_MAX, open_bottom = lo == INT64_MIN;
        if (x < lo && open_top)
            BAD(name, "'%s' must be at least %lld, got %lld", name, (long long)lo, (long long)x);
        else if (x > hi && open_bottom)
            BAD(name, "'%s' must be at most %lld, got %lld", name, (long long)hi, (long long)x);
        else
            BAD(name, "'%s' must be between %lld and %lld, got %lld", name, (long long)lo,
                (long long)hi, (long long)x);
        return -1;
    }
    *out = x;
    return 1;
}

static int get_int(const json_t *root, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   llmrt_serve_error *err)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    return int_value(v, key, lo, hi, out, err);
}

/* A number in [lo, hi] (lo excluded when lo_open). */
static int get_num(const json_t *root, const char *key, double lo, int lo_open, double hi,
                   float *out, llmrt_serve_error *err)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v)) {
        BAD(key, "'%s' must be a number, got %s", key, json_kind(v));
        return -1;
    }
    double x = json_number_value(v);
    if (isfinite(x) && fabs(x) > FLT_MAX && !(x < lo)) { /* would be inf as a float */
        BAD(key, "'%s' must be at most %g, got %g", key, isinf(hi) ? (double)FLT_MAX : hi, x);
        return -1;
    }
    if (!isfinite(x) || x < lo || (lo_open && x == lo) || x > hi) {
        if (isinf(hi))
            BAD(key, "'%s' must be %s %g, got %g", key, lo_open ? "greater than" : "at least",
                lo, x);
        else
            BAD(key, "'%s' must be in %s%g, %g], got %g", key, lo_open ? "(" : "[", lo, hi, x);
        return -1;
    }
    *out = (float)x;
    return 1;
}

static int get_string(const json_t *root, const char *key, const char **out,
                      llmrt_serve_error *err)
{
    const json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        BAD(key, "'%s' must be a string, got %s", key, json_kind(v));
        return -1;
    }
    *out = json_string_value(v);
    return 1;
}

/* A JSON array of token ids (integers in [0, INT32_MAX]) → malloc'd int32 array. */
static int ids_from_json(const json_t *arr, const char *param, int32_t **out, int32_t *n_out,
                         llmrt_serve_error *err)
{
    size_t n = json_array_size(arr);
    if (n > INT32_MAX) {
        BAD(param, "'%s' has too many token ids (%zu)", param, n);
        return -1;
    }
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        llmrt_serve_error_set(err, 500, NULL, NULL, NULL, "out of memory reading '%s'", param);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(arr, i);
        char name[96];
        snprintf(name, sizeof name, "%s[%zu]", param, i);
        int64_t x;
        if (!json_is_integer(v)) {
            BAD(param, "'%s' must be a token id (an integer), got %s", name, json_kind(v));
            free(ids);
            return -1;
        }
        x = json_integer_value(v);
        if (x < 0 || x > INT32_MAX) {
            BAD(param, "'%s' must be a token id (>= 0), got %lld", name, (long long)x);
            free(ids);
            return -1;
        }
        ids[i] = (int32_t)x;
    }
    *out = ids;
    *n_out = (int32_t)n;
    return 1;
}

static int is_id_array(const json_t *v)
{
    return json_is_array(v) && json_array_size(v) > 0 && json_is_integer(json_array_get(v, 0));
}

/* "prompt": a string, an array of ids, or a list of either (a batch). */
static llmrt_status parse_prompts(llmrt_serve_request *r, llmrt_serve_error *err)
{
    const json_t *p = json_object_get(r->root, "prompt");
    if (!p || json_is_null(p))
        return BAD("prompt", "'prompt' is required: a string, an array of token ids, or a "
                             "list of either");
    size_t n;
    if (json_is_string(p) || is_id_array(p)) {
        n = 1;
    } else if (json_is_array(p)) {
        n = json_array_size(p);
        if (n == 0)
            return BAD("prompt", "'prompt' must not be an empty array");
        if (n > MAX_N)
            return BAD("prompt", "'prompt' holds %zu prompts; at most %d are accepted", n,
                       MAX_N);
    } else {
        return BAD("prompt", "'prompt' must be a string, an array of token ids, or a list of "
                             "either, got %s",
                   json_kind(p));
    }
    r->prompts = calloc(n, sizeof *r->prompts);
    if (!r->prompts)
        return llmrt_serve_error_set(err, 500, NULL, NULL, NULL, "out of memory");
    r->n_prompts = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = (n == 1 && (json_is_string(p) || is_id_array(p)))
                              ? p
                              : json_array_get(p, i);
        char name[48];
        if (v == p)
            snprintf(name, sizeof name, "prompt");
        else
            snprintf(name, sizeof name, "prompt[%zu]", i);
        llmrt_serve_prompt *pr = &r->prompts[i];
        if (json_is_string(v)) {
            pr->text_len = json_string_length(v);
            if (pr->text_len == 0)
                return BAD("prompt", "'%s' must not be empty", name);
            pr->text = malloc(pr->text_len + 1);
            if (!pr->text)
                return llmrt_serve_error_set(err, 500, NULL, NULL, NULL, "out of memory");
            memcpy(pr->text, json_string_value(v), pr->text_len + 1);
        } else if (json_is_array(v)) {
            if (json_array_size(v) == 0)
                return BAD("prompt", "'%s' must not be an empty array of token ids", name);
            if (ids_from_json(v, name, &pr->ids, &pr->n_ids, err) < 0)
                return LLMRT_ERR_INVALID_ARG;
        } else {
            return BAD("prompt", "'%s' must be a string or an array of token ids, got %s", name,
                       json_kind(v));
        }
    }
    return LLMRT_OK;
}

static llmrt_status parse_tool_choice(llmrt_serve_request *r, llmrt_serve_error *err);

/* "messages" (+ "tools"): kept as JSON for llmrt_chat_messages_from_json, which checks
 * roles and contents against the template. */
static llmrt_status parse_messages(llmrt_serve_request *r, int required,
                                   llmrt_serve_error *err)
{
    json_t *m = json_object_get(r->root, "messages");
    if (!m || json_is_null(m)) {
        if (required)
            return BAD("messages", "'messages' is required: an array of {\"role\", "
                                   "\"content\"} objects");
        return LLMRT_OK;
    }
    if (!json_is_array(m))
        return BAD("messages", "'messages' must be an array of {\"role\", \"content\"} "
                               "objects, got %s",
                   json_kind(m));
    if (json_array_size(m) == 0)
        return BAD("messages", "'messages' must hold at least one message");
    for (size_t i = 0; i < json_array_size(m); i++) {
        const json_t *msg = json_array_get(m, i);
        char name[48];
        snprintf(name, sizeof name, "messages[%zu]", i);
        if (!json_is_object(msg))
            return BAD(name, "'%s' must be an object with \"role\" and \"content\", got %s",
                       name, json_kind(msg));
        const json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role))
            return BAD(name, "'%s.role' must be a string (\"system\", \"user\", \"assistant\" "
                             "or \"tool\"), got %s",
                       name, role ? json_kind(role) : "nothing");
    }
    r->messages = m;
    json_t *t = json_object_get(r->root, "tools");
    if (t && !json_is_null(t)) {
        if (!json_is_array(t))
            return BAD("tools", "'tools' must be an array, got %s", json_kind(t));
        if (json_array_size(t) > 0)
            r->tools = t;
    }
    return parse_tool_choice(r, err);
}

/* The name of tools[i] ({"type": "function", "function": {"name": ...}}), or NULL. */
static const char *tool_name(const json_t *tool)
{
    const json_t *fn = json_object_get(tool, "function");
    return json_string_value(json_object_get(json_is_object(fn) ? fn : tool, "name"));
}

/* tool_choice and parallel_tool_calls (after "tools"). */
static llmrt_status parse_tool_choice(llmrt_serve_request *r, llmrt_serve_error *err)
{
    const json_t *v = json_object_get(r->root, "tool_choice");
    llmrt_serve_tool_choice *tc = &r->tool_choice;
    tc->kind = r->tools ? LLMRT_SERVE_TOOL_CHOICE_AUTO : LLMRT_SERVE_TOOL_CHOICE_NONE;
    tc->name = NULL;
    r->parallel_tool_calls = 1;
    if (get_bool(r->root, "parallel_tool_calls", &r->parallel_tool_calls, err) < 0)
        return LLMRT_ERR_INVALID_ARG;
    if (!v || json_is_null(v))
        return LLMRT_OK;
    if (json_is_string(v)) {
        const char *k = json_string_value(v);
        if (strcmp(k, "none") == 0)
            tc->kind = LLMRT_SERVE_TOOL_CHOICE_NONE;
        else if (strcmp(k, "auto") == 0)
            tc->kind = LLMRT_SERVE_TOOL_CHOICE_AUTO;
        else if (strcmp(k, "required") == 0)
            tc->kind = LLMRT_SERVE_TOOL_CHOICE_REQUIRED;
        else
            return BAD("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" "
                                      "or {\"type\": \"function\", \"function\": {\"name\": "
                                      "...}}, got \"%s\"",
                       k);
    } else if (json_is_object(v)) {
        const json_t *type = json_object_get(v, "type"), *fn = json_object_get(v, "function");
        const json_t *name = json_object_get(fn, "name");
        if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0 ||
            !json_is_object(fn) || !json_is_string(name) || !json_string_length(name))
            return BAD("tool_choice", "'tool_choice' as an object must be {\"type\": "
                                      "\"function\", \"function\": {\"name\": \"<a tool's "
                                      "name>\"}}");
        tc->kind = LLMRT_SERVE_TOOL_CHOICE_FUNCTION;
        tc->name = json_string_value(name);
    } else {
        return BAD("tool_choice", "'tool_choice' must be a string or an object, got %s",
                   json_kind(v));
    }
    if (tc->kind == LLMRT_SERVE_TOOL_CHOICE_NONE || tc->kind == LLMRT_SERVE_TOOL_CHOICE_AUTO)
        return LLMRT_OK;
    if (!r->tools)
        return BAD("tool_choice", "'tool_choice' %s%s%s needs 'tools' with at least one tool",
                   tc->name ? "naming \"" : "\"required\"", tc->name ? tc->name : "",
                   tc->name ? "\"" : "");
    /* the forced call's grammar is built from every tool's name and parameters schema */
    for (size_t i = 0; i < json_array_size(r->tools); i++) {
        const json_t *t = json_array_get(r->tools, i);
        const json_t *fn = json_is_object(t) ? json_object_get(t, "function") : NULL;
        const json_t *params = json_is_object(fn) ? json_object_get(fn, "parameters") : NULL;
        char p[48];
        snprintf(p, sizeof p, "tools[%zu]", i);
        if (!json_is_object(fn) || !json_is_string(json_object_get(fn, "name")))
            return BAD(p, "'tools[%zu].function.name' must be a string", i);
        if (params && !json_is_null(params) && !json_is_object(params))
            return BAD(p, "'tools[%zu].function.parameters' must be a JSON schema (an object)", i);
    }
    if (tc->name) {
        for (size_t i = 0; i < json_array_size(r->tools); i++) {
            const char *n = tool_name(json_array_get(r->tools, i));
            if (n && strcmp(n, tc->name) == 0)
                return LLMRT_OK;
        }
        return BAD("tool_choice", "'tool_choice' names the function \"%s\", which is not one of "
                                  "'tools'",
                   tc->name);
    }
    return LLMRT_OK;
}

/* Top-level fields of each kind this server reads, or knows and ignores on purpose (OpenAI's
 * bookkeeping: user, metadata, store, service_tier). Others are listed in r->unknown. */
static void list_unknown(llmrt_serve_request *r)
{
    static const char *const common[] = {
        "model", "max_tokens", "min_tokens", "temperature", "top_p", "top_k", "min_p",
        "presence_penalty", "frequency_penalty", "repetition_penalty", "seed", "ignore_eos",
        "n", "stream", "stream_options", "logprobs", "return_tokens_as_token_ids", "stop",
        "stop_token_ids", "echo", "suffix", "logit_bias", "best_of", "response_format",
        "structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
        "user", "metadata", "store", "service_tier", NULL};
    static const char *const completions[] = {"prompt", NULL};
    static const char *const chat[] = {
        "messages", "tools", "tool_choice", "parallel_tool_calls", "max_completion_tokens",
        "top_logprobs", "chat_template_kwargs", "add_generation_prompt", NULL};
    static const char *const tokenize[] = {
        "model", "prompt", "messages", "tools", "tool_choice", "chat_template_kwargs",
        "add_special_tokens", "add_generation_prompt", "return_token_strs", NULL};
    static const char *const detokenize[] = {"model", "tokens", NULL};
    const char *const *lists[3] = {NULL, NULL, NULL};
    switch (r->kind) {
    case LLMRT_SERVE_COMPLETIONS: lists[0] = common, lists[1] = completions; break;
    case LLMRT_SERVE_CHAT: lists[0] = common, lists[1] = chat; break;
    case LLMRT_SERVE_TOKENIZE: lists[0] = tokenize; break;
    case LLMRT_SERVE_DETOKENIZE: lists[0] = detokenize; break;
    }
    const char *key;
    json_t *val;
    json_object_foreach(r->root, key, val)
    {
        int known = 0;
        for (int l = 0; l < 3 && lists[l] && !known; l++)
            for (const char *const *k = lists[l]; *k && !known; k++)
                known = strcmp(*k, key) == 0;
        if (!known && r->n_unknown < LLMRT_SERVE_MAX_UNKNOWN)
            r->unknown[r->n_unknown++] = key;
    }
}

static llmrt_status parse_chat_template_kwargs(llmrt_serve_request *r, llmrt_serve_error *err)
{
    const json_t *kw = json_object_get(r->root, "chat_template_kwargs");
    if (!kw || json_is_null(kw))
        return LLMRT_OK;
    if (!json_is_object(kw))
        return BAD("chat_template_kwargs", "'chat_template_kwargs' must be an object, got %s",
                   json_kind(kw));
    const json_t *et = json_object_get(kw, "enable_thinking");
    if (et && !json_is_null(et)) {
        if (!json_is_boolean(et))
            return BAD("chat_template_kwargs.enable_thinking",
                       "'chat_template_kwargs.enable_thinking' must be a boolean, got %s",
                       json_kind(et));
        r->enable_thinking = json_is_true(et);
    }
    return LLMRT_OK;
}

static llmrt_status parse_stop(llmrt_serve_request *r, llmrt_serve_error *err)
{
    const json_t *s = json_object_get(r->root, "stop");
    if (s && !json_is_null(s)) {
        size_t n = json_is_string(s) ? 1 : json_is_array(s) ? json_array_size(s) : 0;
        if (!json_is_string(s) && !json_is_array(s))
            return BAD("stop", "'stop' must be a string or an array of strings, got %s",
                       json_kind(s));
        if (n) {
            r->stop_storage = calloc(n, sizeof *r->stop_storage);
            if (!r->stop_storage)
                return llmrt_serve_error_set(err, 500, NULL, NULL, NULL, "out of memory");
        }
        /* n_stop counts the strings stored so far, so a rejection frees exactly those */
        r->sampling.stop = (const char *const *)r->stop_storage;
        r->sampling.n_stop = 0;
        for (size_t i = 0; i < n; i++) {
            const json_t *v = json_is_string(s) ? s : json_array_get(s, i);
            if (!json_is_string(v))
                return BAD("stop", "'stop[%zu]' must be a string, got %s", i, json_kind(v));
            if (json_string_length(v) == 0)
                continue; /* an empty stop string can never end anything */
            if (strlen(json_string_value(v)) != json_string_length(v))
                return BAD("stop", "'stop[%zu]' must not contain a NUL character", i);
            char *copy = strdup(json_string_value(v));
            if (!copy)
                return llmrt_serve_error_set(err, 500, NULL, NULL, NULL, "out of memory");
            r->stop_storage[r->sampling.n_stop++] = copy;
        }
    }
    const json_t *ids = json_object_get(r->root, "stop_token_ids");
    if (ids && !json_is_null(ids)) {
        if (!json_is_array(ids))
            return BAD("stop_token_ids", "'stop_token_ids' must be an array of token ids, got %s",
                       json_kind(ids));
        if (json_array_size(ids) > 0) {
            if (ids_from_json(ids, "stop_token_ids", &r->stop_ids_storage,
                              &r->sampling.n_stop_ids, err) < 0)
                return LLMRT_ERR_INVALID_ARG;
            r->sampling.stop_ids = r->stop_ids_storage;
        }
    }
    return LLMRT_OK;
}

/* Fields of OpenAI's API that this server cannot honour: reject them by name. */
static llmrt_status reject_unsupported(llmrt_serve_request *r, llmrt_serve_error *err)
{
    int b = 0;
    if (get_bool(r->root, "echo", &b, err) < 0)
        return LLMRT_ERR_INVALID_ARG;
    if (b)
        return BAD("echo", "'echo': true is not supported by this server (the prompt is not "
                           "returned); leave it out or set it to false");
    const json_t *v = json_object_get(r->root, "suffix");
    if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
        return BAD("suffix", "'suffix' is not supported by this server (no fill-in-the-middle)");
    v = json_object_get(r->root, "logit_bias");
    if (v && !json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0))
        return BAD("logit_bias", "'logit_bias' is not supported by this server");
    int64_t best_of = 0;
    if (get_int(r->root, "best_of", 1, MAX_N, &best_of, err) < 0)
        return LLMRT_ERR_INVALID_ARG;
    if (best_of > r->n)
        return BAD("best_of", "'best_of' (%lld) larger than 'n' (%d) is not supported; use n",
                   (long long)best_of, r->n);
    return LLMRT_OK;
}

/* ---- structured outputs ---- */

static llmrt_status oom(llmrt_serve_error *err)
{
    return llmrt_serve_error_set(err, 500, NULL, NULL, NULL, "out of memory");
}

/* A schema given as an object (or, where vLLM allows it, as JSON text) → f->schema. */
static llmrt_status take_schema(llmrt_serve_format *f, const json_t *v, int text_ok,
                                const char *param, llmrt_serve_error *err)
{
    if (json_is_string(v) && text_ok) {
        json_error_t je;
        json_t *parsed = json_loads(json_string_value(v), JSON_DECODE_ANY, &je);
        if (!parsed)
            return BAD(param, "'%s' is not a valid JSON schema: %s", param, je.text);
        int ok = json_is_object(parsed) || json_is_boolean(parsed);
        json_decref(parsed);
        if (!ok)
            return BAD(param, "'%s' must be a JSON schema (an object)", param);
        f->schema = strdup(json_string_value(v));
    } else if (json_is_object(v) || json_is_boolean(v)) {
        f->schema = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    } else {
        return BAD(param, "'%s' must be a JSON schema (an object), got %s", param, json_kind(v));
    }
    if (!f->schema)
        return oom(err);
    f->kind = LLMRT_SERVE_FORMAT_JSON_SCHEMA;
    return LLMRT_OK;
}

static llmrt_status take_regex(llmrt_serve_format *f, const json_t *v, const char *param,
                               llmrt_serve_error *err)
{
    if (!json_is_string(v) || json_string_length(v) == 0)
        return BAD(param, "'%s' must be a non-empty string (a regular expression)", param);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return BAD(param, "'%s' must not contain a NUL character", param);
    if (!(f->regex = strdup(json_string_value(v))))
        return oom(err);
    f->kind = LLMRT_SERVE_FORMAT_REGEX;
    return LLMRT_OK;
}

static llmrt_status take_choice(llmrt_serve_format *f, const json_t *v, const char *param,
                                llmrt_serve_error *err)
{
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n == 0)
        return BAD(param, "'%s' must be a non-empty array of strings", param);
    if (n > MAX_N)
        return BAD(param, "'%s' holds %zu choices; at most %d are accepted", param, n, MAX_N);
    if (!(f->choices = calloc(n, sizeof *f->choices)))
        return oom(err);
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(v, i);
        if (!json_is_string(c) || json_string_length(c) == 0 ||
            strlen(json_string_value(c)) != json_string_length(c))
            return BAD(param, "'%s[%zu]' must be a non-empty string", param, i);
        if (!(f->choices[i] = strdup(json_string_value(c))))
            return oom(err);
        f->n_choices = (int32_t)i + 1;
    }
    f->kind = LLMRT_SERVE_FORMAT_CHOICE;
    return LLMRT_OK;
}

/* OpenAI's response_format. */
static llmrt_status parse_response_format(llmrt_serve_request *r, const json_t *v,
                                          llmrt_serve_error *err)
{
    llmrt_serve_format *f = &r->format;
    if (!json_is_object(v))
        return BAD("response_format", "'response_format' must be an object, got %s", json_kind(v));
    const json_t *t = json_object_get(v, "type");
    if (!json_is_string(t))
        return BAD("response_format", "'response_format.type' must be \"text\", \"json_object\" "
                                      "or \"json_schema\"");
    const char *type = json_string_value(t);
    snprintf(f->param, sizeof f->param, "response_format");
    if (strcmp(type, "text") == 0)
        return LLMRT_OK;
    if (strcmp(type, "json_object") == 0) {
        f->kind = LLMRT_SERVE_FORMAT_JSON_OBJECT;
        return LLMRT_OK;
    }
    if (strcmp(type, "json_schema") != 0)
        return BAD("response_format", "'response_format.type' \"%s\" is not supported (use "
                                      "\"text\", \"json_object\" or \"json_schema\")",
                   type);
    const json_t *js = json_object_get(v, "json_schema");
    if (!json_is_object(js))
        return BAD("response_format", "'response_format.json_schema' must be an object "
                                      "{\"name\", \"schema\", \"strict\"}");
    const json_t *name = json_object_get(js, "name");
    if (name && !json_is_null(name) && !json_is_string(name))
        return BAD("response_format", "'response_format.json_schema.name' must be a string");
    const json_t *strict = json_object_get(js, "strict");
    if (strict && !json_is_null(strict) && !json_is_boolean(strict))
        return BAD("response_format", "'response_format.json_schema.strict' must be a boolean");
    f->strict = json_is_true(strict);
    const json_t *schema = json_object_get(js, "schema");
    if (!schema || json_is_null(schema)) { /* no schema: any JSON object */
        f->kind = LLMRT_SERVE_FORMAT_JSON_OBJECT;
        return LLMRT_OK;
    }
    return take_schema(f, schema, 0, "response_format.json_schema.schema", err);
}

/* vLLM's structured_outputs {json | regex | choice | json_object}, and its older top-level
 * guided_json / guided_regex / guided_choice. */
static llmrt_status parse_structured_outputs(llmrt_serve_request *r, const json_t *v,
                                             llmrt_serve_error *err)
{
    llmrt_serve_format *f = &r->format;
    const char *P = "structured_outputs";
    snprintf(f->param, sizeof f->param, "%s", P);
    if (!json_is_object(v))
        return BAD(P, "'structured_outputs' must be an object, got %s", json_kind(v));
    static const char *unsupported[] = {"grammar", "structural_tag", "whitespace_pattern"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        const json_t *x = json_object_get(v, unsupported[i]);
        if (x && !json_is_null(x))
            return BAD(P, "'structured_outputs.%s' is not supported by this server (structured "
                          "outputs take json, regex, choice or json_object)",
                       unsupported[i]);
    }
    const json_t *daw = json_object_get(v, "disable_any_whitespace");
    if (daw && json_is_true(daw))
        return BAD(P, "'structured_outputs.disable_any_whitespace' is not supported (whitespace "
                      "between JSON tokens is allowed, at most %d bytes at a time)",
                   LLMRT_GRAM_JSON_WS_MAX);
    const json_t *dap = json_object_get(v, "disable_additional_properties");
    if (dap && !json_is_null(dap) && !json_is_boolean(dap))
        return BAD(P, "'structured_outputs.disable_additional_properties' must be a boolean");
    f->strict = json_is_true(dap);
    const json_t *js = json_object_get(v, "json"), *re = json_object_get(v, "regex");
    const json_t *ch = json_object_get(v, "choice"), *jo = json_object_get(v, "json_object");
    int n = (js && !json_is_null(js)) + (re && !json_is_null(re)) + (ch && !json_is_null(ch)) +
            (jo && json_is_true(jo));
    if (jo && !json_is_null(jo) && !json_is_boolean(jo))
        return BAD(P, "'structured_outputs.json_object' must be a boolean");
    if (n != 1)
        return BAD(P, "'structured_outputs' needs exactly one of 'json', 'regex', 'choice' or "
                      "'json_object', got %d",
                   n);
    if (js && !json_is_null(js))
        return take_schema(f, js, 1, "structured_outputs.json", err);
    if (re && !json_is_null(re))
        return take_regex(f, re, "structured_outputs.regex", err);
    if (ch && !json_is_null(ch))
        return take_choice(f, ch, "structured_outputs.choice", err);
    f->kind = LLMRT_SERVE_FORMAT_JSON_OBJECT;
    return LLMRT_OK;
}

static llmrt_status parse_format(llmrt_serve_request *r, llmrt_serve_error *err)
{
    static const char *sources[] = {"response_format", "structured_outputs", "guided_json",
                                    "guided_regex", "guided_choice", "guided_grammar"};
    const char *given = NULL;
    for (size_t i = 0; i < sizeof sources / sizeof *sources; i++) {
        const json_t *v = json_object_get(r->root, sources[i]);
        if (!v || json_is_null(v))
            continue;
        if (i == 0 && json_is_object(v) && json_is_string(json_object_get(v, "type")) &&
            strcmp(json_string_value(json_object_get(v, "type")), "text") == 0)
            continue; /* {"type": "text"}: nothing to constrain, and no conflict */
        if (given)
            return BAD(sources[i], "'%s' and '%s' both constrain the reply; give one", given,
                       sources[i]);
        given = sources[i];
        llmrt_status st = LLMRT_OK;
        switch (i) {
        case 0: st = parse_response_format(r, v, err); break;
        case 1: st = parse_structured_outputs(r, v, err); break;
        case 2: st = take_schema(&r->format, v, 1, "guided_json", err); break;
        case 3: st = take_regex(&r->format, v, "guided_regex", err); break;
        case 4: st = take_choice(&r->format, v, "guided_choice", err); break;
        default:
            return BAD("guided_grammar", "'guided_grammar' is not supported by this server (use "
                                         "guided_json, guided_regex or guided_choice)");
        }
        if (st)
            return st;
        if (i >= 2)
            snprintf(r->format.param, sizeof r->format.param, "%s", sources[i]);
    }
    return LLMRT_OK;
}

static llmrt_status parse_generation(llmrt_serve_request *r, llmrt_serve_error *err)
{
    llmrt_serve_kind kind = r->kind;
    const json_t *root = r->root;
    llmrt_sampling *s = &r->sampling;
    int64_t x;
    int rc;

    /* max_completion_tokens (chat) is OpenAI's newer name; it wins over max_tokens */
    /* any size is accepted here: the server compares it with what the context leaves and
     * says that limit (a request cannot know max_model_len) */
    rc = 0;
    if (kind == LLMRT_SERVE_CHAT)
        rc = get_int(root, "max_completion_tokens", 1, INT64_MAX, &x, err);
    if (rc == 0)
        rc = get_int(root, "max_tokens", 1, INT64_MAX, &x, err);
    if (rc < 0)
        return LLMRT_ERR_INVALID_ARG;
    if (rc > 0) {
        s->max_tokens = x > INT32_MAX ? INT32_MAX : (int32_t)x;
        r->max_tokens_asked = x;
        r->has_max_tokens = 1;
    }
    rc = get_int(root, "min_tokens", 0, INT32_MAX, &x, err);
    if (rc < 0)
        return LLMRT_ERR_INVALID_ARG;
    if (rc > 0)
        s->min_tokens = (int32_t)x;
    if (r->has_max_tokens && s->min_tokens > s->max_tokens)
        return BAD("min_tokens", "'min_tokens' (%d) must not exceed 'max_tokens' (%d)",
                   s->min_tokens, s->max_tokens);

    /* which of the fields a model may give defaults for the body set (explicitly, so a
     * temperature of 0 stays greedy) */
    static const struct {
        const char *key;
        double lo;
        int lo_open;
        double hi;
        size_t off;
        uint32_t bit;
    } nums[] = {
        {"temperature", 0, 0, INFINITY, offsetof(llmrt_sampling, temperature), LLMRT_SAMPLING_TEMPERATURE},
        {"top_p", 0, 1, 1, offsetof(llmrt_sampling, top_p), LLMRT_SAMPLING_TOP_P},
        {"min_p", 0, 0, 1, offsetof(llmrt_sampling, min_p), LLMRT_SAMPLING_MIN_P},
        {"presence_penalty", -2, 0, 2, offsetof(llmrt_sampling, presence_penalty), 0},
        {"frequency_penalty", -2, 0, 2, offsetof(llmrt_sampling, frequency_penalty), 0},
        {"repetition_penalty", 0, 1, INFINITY, offsetof(llmrt_sampling, repetition_penalty),
         LLMRT_SAMPLING_REPETITION_PENALTY},
    };
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        rc = get_num(root, nums[i].key, nums[i].lo, nums[i].lo_open, nums[i].hi,
                     (float *)((char *)s + nums[i].off), err);
        if (rc < 0)
            return LLMRT_ERR_INVALID_ARG;
        if (rc > 0)
            r->sampling_given |= nums[i].bit;
    }
    rc = get_int(root, "top_k", -1, INT32_MAX, &x, err);
    if (rc < 0)
        return LLMRT_ERR_INVALID_ARG;
    if (rc > 0) {
        s->top_k = x < 0 ? 0 : (int32_t)x;
        r->sampling_given |= LLMRT_SAMPLING_TOP_K;
    }
    rc = get_int(root, "seed", INT64_MIN, INT64_MAX, &x, err);
    if (rc < 0)
        return LLMRT_ERR_INVALID_ARG;
    if (rc > 0) {
        s->has_seed = 1;
        s->seed = (uint64_t)x;
    }
    int ignore_eos = 0;
    if (get_bool(root, "ignore_eos", &ignore_eos, err) < 0)
        return LLMRT_ERR_INVALID_ARG;
    s->ignore_eos = ignore_eos;

    rc = get_int(root, "n", 1, MAX_N, &x, err);
    if (rc < 0)
        return LLMRT_ERR_INVALID_ARG;
    r->n = rc > 0 ? (int32_t)x : 1;

    if (get_bool(root, "stream", &r->stream, err) < 0)
        return LLMRT_ERR_INVALID_ARG;
    const json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return BAD("stream_options", "'stream_options' must be an object, got %s",
                       json_kind(so));
        if (!r->stream)
            return BAD("stream_options", "'stream_options' is only allowed with \"stream\": "
                                         "true");
        if (get_bool(so, "include_usage", &r->include_usage, err) < 0) {
            snprintf(err->param, sizeof err->param, "stream_options.include_usage");
            return LLMRT_ERR_INVALID_ARG;
        }
    }

    /* logprobs: completions take an int (alternatives per token); chat takes a boolean and
     * top_logprobs */
    if (kind == LLMRT_SERVE_COMPLETIONS) {
        const json_t *lp = json_object_get(root, "logprobs");
        if (lp && json_is_boolean(lp))
            return BAD("logprobs", "'logprobs' of /v1/completions must be an integer "
                                   "(alternatives per token, 0..%d), got a boolean",
                       LLMRT_MAX_TOP_LOGPROBS);
        rc = get_int(root, "logprobs", 0, LLMRT_MAX_TOP_LOGPROBS, &x, err);
        if (rc < 0)
            return LLMRT_ERR_INVALID_ARG;
        if (rc > 0)
            s->logprobs = (int32_t)x;
    } else {
        int want = 0;
        if (get_bool(root, "logprobs", &want, err) < 0)
            return LLMRT_ERR_INVALID_ARG;
        rc = get_int(root, "top_logprobs", 0, LLMRT_MAX_TOP_LOGPROBS, &x, err);
        if (rc < 0)
            return LLMRT_ERR_INVALID_ARG;
        if (rc > 0 && !want && x > 0)
            return BAD("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
        r->chat_logprobs = want;
        if (want)
            s->logprobs = rc > 0 ? (int32_t)x : 0;
    }
    if (get_bool(root, "return_tokens_as_token_ids", &r->tokens_as_ids, err) < 0)
        return LLMRT_ERR_INVALID_ARG;
    if (parse_stop(r, err) != LLMRT_OK)
        return LLMRT_ERR_INVALID_ARG;
    llmrt_status st = reject_unsupported(r, err);
    if (st == LLMRT_OK)
        st = parse_format(r, err);
    if (st == LLMRT_OK && kind == LLMRT_SERVE_CHAT && r->format.kind != LLMRT_SERVE_FORMAT_TEXT &&
        (r->tool_choice.kind == LLMRT_SERVE_TOOL_CHOICE_REQUIRED ||
         r->tool_choice.kind == LLMRT_SERVE_TOOL_CHOICE_FUNCTION))
        return BAD("tool_choice", "'tool_choice' forcing a tool call and '%s' both constrain the "
                                  "reply; give one",
                   r->format.param);
    return st;
}

static void free_prompts(llmrt_serve_request *r)
{
    for (int32_t i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
}

void llmrt_serve_request_free(llmrt_serve_request *r)
{
    if (!r)
        return;
    free(r->model);
    free_prompts(r);
    if (r->stop_storage) {
        for (int32_t i = 0; i < r->sampling.n_stop; i++)
            free(r->stop_storage[i]);
        free(r->stop_storage);
    }
    free(r->stop_ids_storage);
    free(r->format.schema);
    free(r->format.regex);
    for (int32_t i = 0; i < r->format.n_choices; i++)
        free(r->format.choices[i]);
    free(r->format.choices);
    free(r->tokens);
    if (r->root)
        json_decref(r->root);
    free(r);
}

llmrt_status llmrt_serve_request_parse(llmrt_serve_kind kind, const char *body, size_t len,
                                       llmrt_serve_request **out, llmrt_serve_error *err)
{
    llmrt_status st = LLMRT_OK;
    *out = NULL;
    llmrt_serve_request *r = calloc(1, sizeof *r);
    if (!r)
        return llmrt_serve_error_set(err, 500, NULL, NULL, NULL, "out of memory");
    r->kind = kind;
    llmrt_sampling_init(&r->sampling);
    r->n = 1;
    r->add_generation_prompt = 1;
    r->enable_thinking = 1;

    json_error_t jerr;
    r->root = json_loadb(body ? body : "", len, 0, &jerr);
    if (!r->root) {
        st = llmrt_serve_error_set(err, 400, NULL, "invalid_json", NULL,
                                   "request body is not valid JSON: %s (line %d, column %d)",
                                   jerr.text, jerr.line, jerr.column);
        goto cleanup;
    }
    if (!json_is_object(r->root)) {
        st = BAD(NULL, "request body must be a JSON object, got %s", json_kind(r->root));
        goto cleanup;
    }

    const char *model = NULL;
    if (get_string(r->root, "model", &model, err) < 0) {
        st = LLMRT_ERR_INVALID_ARG;
        goto cleanup;
    }
    if (model && !(r->model = strdup(model))) {
        st = llmrt_serve_error_set(err, 500, NULL, NULL, NULL, "out of memory");
        goto cleanup;
    }

    switch (kind) {
    case LLMRT_SERVE_COMPLETIONS:
        if ((st = parse_prompts(r, err)) != LLMRT_OK ||
            (st = parse_generation(r, err)) != LLMRT_OK)
            goto cleanup;
        break;
    case LLMRT_SERVE_CHAT:
        if ((st = parse_messages(r, 1, err)) != LLMRT_OK ||
            (st = parse_chat_template_kwargs(r, err)) != LLMRT_OK ||
            (st = parse_generation(r, err)) != LLMRT_OK)
            goto cleanup;
        if (get_bool(r->root, "add_generation_prompt", &r->add_generation_prompt, err) < 0) {
            st = LLMRT_ERR_INVALID_ARG;
            goto cleanup;
        }
        break;
    case LLMRT_SERVE_TOKENIZE: {
        const json_t *p = json_object_get(r->root, "prompt");
        const json_t *m = json_object_get(r->root, "messages");
        int has_p = p && !json_is_null(p), has_m = m && !json_is_null(m);
        if (has_p == has_m) {
            st = BAD(has_p ? "messages" : "prompt",
                     "/tokenize needs exactly one of 'prompt' (a string) or 'messages' (an "
                     "array), got %s",
                     has_p ? "both" : "neither");
            goto cleanup;
        }
        if (has_p) {
            if (!json_is_string(p)) {
                st = BAD("prompt", "'prompt' must be a string, got %s", json_kind(p));
                goto cleanup;
            }
            if ((st = parse_prompts(r, err)) != LLMRT_OK)
                goto cleanup;
            r->add_special_tokens = 1;
        } else {
            if ((st = parse_messages(r, 1, err)) != LLMRT_OK ||
                (st = parse_chat_template_kwargs(r, err)) != LLMRT_OK)
                goto cleanup;
            r->add_special_tokens = 0;
        }
        if (get_bool(r->root, "add_special_tokens", &r->add_special_tokens, err) < 0 ||
            get_bool(r->root, "add_generation_prompt", &r->add_generation_prompt, err) < 0 ||
            get_bool(r->root, "return_token_strs", &r->return_token_strs, err) < 0) {
            st = LLMRT_ERR_INVALID_ARG;
            goto cleanup;
        }
        break;
    }
    case LLMRT_SERVE_DETOKENIZE: {
        const json_t *t = json_object_get(r->root, "tokens");
        if (!t || json_is_null(t)) {
            st = BAD("tokens", "'tokens' is required: an array of token ids");
            goto cleanup;
        }
        if (!json_is_array(t)) {
            st = BAD("tokens", "'tokens' must be an array of token ids, got %s", json_kind(t));
            goto cleanup;
        }
        if (ids_from_json(t, "tokens", &r->tokens, &r->n_tokens, err) < 0) {
            st = LLMRT_ERR_INVALID_ARG;
            goto cleanup;
        }
        break;
    }
    default:
        st = llmrt_serve_error_set(err, 500, NULL, NULL, NULL, "unknown request kind %d",
                                   (int)kind);
        goto cleanup;
    }
    list_unknown(r);
    *out = r;
    r = NULL;
cleanup:
    llmrt_serve_request_free(r);
    return st;
}
