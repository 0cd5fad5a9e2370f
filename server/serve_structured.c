/* serve_structured.c — structured outputs for one generation request: the grammar each of
 * its choices follows, from response_format / structured_outputs (a JSON object, a JSON
 * schema, a regex, a list of choices) or from tool_choice "required" / a named function
 * (the model family's tool-call markup around {"name": NAME, "arguments": <the function's
 * parameters schema>}), compiled through the engine (llmrt_engine_grammar_*).
 *
 * Why here: what a request asks for is the server's to read; how a grammar constrains a
 * reply is the engine's. The tool-call markup comes from the model plugin's chat syntax
 * (llmrt/chat.h), so the server names no model family. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define MAX_PARALLEL_CALLS 8 /* tool calls one reply may make with parallel_tool_calls */

/* ---- tool calls as a JSON schema ---- */

/* Point every "$ref" of a function's parameters at the combined schema's $defs: "#" →
 * "#/$defs/tI", "#/$defs/X" and "#/definitions/X" → "#/$defs/tI_X". */
static void rewrite_refs(json_t *v, size_t tool)
{
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            rewrite_refs(json_array_get(v, i), tool);
        return;
    }
    if (!json_is_object(v))
        return;
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
        if (strcmp(k, "$ref") == 0 && json_is_string(x)) {
            const char *p = json_string_value(x);
            char buf[512];
            if (strcmp(p, "#") == 0)
                snprintf(buf, sizeof buf, "#/$defs/t%zu", tool);
            else if (strncmp(p, "#/$defs/", 8) == 0)
                snprintf(buf, sizeof buf, "#/$defs/t%zu_%s", tool, p + 8);
            else if (strncmp(p, "#/definitions/", 14) == 0)
                snprintf(buf, sizeof buf, "#/$defs/t%zu_%s", tool, p + 14);
            else
                continue; /* not local: the compiler refuses it by name */
            json_string_set(x, buf);
        } else {
            rewrite_refs(x, tool);
        }
    }
}

static int has_ref(const json_t *v)
{
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (has_ref(json_array_get(v, i)))
                return 1;
        return 0;
    }
    if (!json_is_object(v))
        return 0;
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x) {
        if (strcmp(k, "$ref") == 0 || has_ref(x))
            return 1;
    }
    return 0;
}

/* {"name": NAME, "arguments": PARAMETERS} of tools[i]; $defs it needs go into defs. */
static json_t *call_schema(const json_t *tool, size_t i, json_t *defs)
{
    const json_t *fn = json_object_get(tool, "function");
    const json_t *params = json_object_get(fn, "parameters");
    json_t *args;
    if (!params || json_is_null(params)) { /* no parameters: an empty object */
        args = json_pack("{s:s, s:{}, s:b}", "type", "object", "properties",
                         "additionalProperties", 0);
    } else if (!has_ref(params)) {
        args = json_deep_copy(params);
    } else { /* its references need a root: the combined schema's $defs */
        json_t *p = json_deep_copy(params);
        static const char *holders[] = {"$defs", "definitions"};
        for (int h = 0; p && h < 2; h++) {
            json_t *d = json_object_get(p, holders[h]);
            const char *k;
            json_t *x;
            char name[512];
            json_object_foreach(d, k, x) {
                snprintf(name, sizeof name, "t%zu_%s", i, k);
                json_t *c = json_deep_copy(x);
                rewrite_refs(c, i);
                json_object_set_new(defs, name, c);
            }
            json_object_del(p, holders[h]);
        }
        rewrite_refs(p, i);
        char name[32];
        snprintf(name, sizeof name, "t%zu", i);
        json_object_set_new(defs, name, p);
        char ref[48];
        snprintf(ref, sizeof ref, "#/$defs/t%zu", i);
        args = json_pack("{s:s}", "$ref", ref);
    }
    return json_pack("{s:s, s:{s:{s:O}, s:o}, s:[s,s], s:b}", "type", "object", "properties",
                     "name", "const", json_object_get(fn, "name"), "arguments", args, "required",
                     "name", "arguments", "additionalProperties", 0);
}

/* The schema of one call of the request's forced tool(s), as JSON text (malloc'd). */
static char *tools_schema(const llmrt_serve_request *req)
{
    json_t *defs = json_object(), *alts = json_array(), *root = NULL;
    for (size_t i = 0; i < json_array_size(req->tools); i++) {
        const json_t *t = json_array_get(req->tools, i);
        const char *name = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (req->tool_choice.kind == LLMRT_SERVE_TOOL_CHOICE_FUNCTION &&
            strcmp(name, req->tool_choice.name) != 0)
            continue;
        json_array_append_new(alts, call_schema(t, i, defs));
    }
    if (json_array_size(alts) == 1)
        root = json_incref(json_array_get(alts, 0));
    else
        root = json_pack("{s:O}", "anyOf", alts);
    if (root && json_object_size(defs))
        json_object_set(root, "$defs", defs);
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    json_decref(alts);
    json_decref(defs);
    return text;
}

/* A compiler message about the combined tool schema, in the request's terms: its paths
 * ("/anyOf/K/properties/arguments...", "/properties/arguments...", "/$defs/tI...",
 * "/$defs/tI_X...") become "tools[I].function.parameters...". */
static void tool_message(const llmrt_serve_request *req, const char *msg, char *out, size_t n)
{
    snprintf(out, n, "%s", msg);
    const char *at = strstr(msg, " at /");
    if (!at)
        return;
    const char *p = at + 4;
    size_t tool = 0;
    int len = 0;
    char rest[512];
    rest[0] = 0;
    if (sscanf(p, "/$defs/t%zu%n", &tool, &len) == 1) {
        if (p[len] == '_')
            snprintf(rest, sizeof rest, "/$defs/%s", p + len + 1);
        else
            snprintf(rest, sizeof rest, "%s", p + len);
    } else if (sscanf(p, "/anyOf/%zu/properties/arguments%n", &tool, &len) == 1 && len > 0) {
        snprintf(rest, sizeof rest, "%s", p + len);
    } else if (strncmp(p, "/properties/arguments", 21) == 0) {
        /* one call schema: the named function, or the only tool */
        for (size_t i = 0; req->tool_choice.name && i < json_array_size(req->tools); i++) {
            const json_t *fn = json_object_get(json_array_get(req->tools, i), "function");
            const char *name = json_string_value(json_object_get(fn, "name"));
            if (name && strcmp(name, req->tool_choice.name) == 0)
                tool = i;
        }
        snprintf(rest, sizeof rest, "%s", p + 21);
    } else {
        return;
    }
    snprintf(out, n, "%.*s at tools[%zu].function.parameters%s", (int)(at - msg), msg, tool, rest);
}

/* ---- the grammars of a request ---- */

static int wants_grammar(const llmrt_serve_request *req)
{
    return req->format.kind != LLMRT_SERVE_FORMAT_TEXT ||
           req->tool_choice.kind == LLMRT_SERVE_TOOL_CHOICE_REQUIRED ||
           req->tool_choice.kind == LLMRT_SERVE_TOOL_CHOICE_FUNCTION;
}

llmrt_status serve_grammars(llmrt_server *s, const llmrt_serve_request *req, int n,
                            llmrt_grammar **out, llmrt_serve_error *e)
{
    llmrt_status st = LLMRT_OK;
    char *tool_text = NULL;
    llmrt_error err = {0};
    const char *param = req->format.param;
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    if (!wants_grammar(req))
        return LLMRT_OK;
    if (!s->tok)
        return llmrt_serve_error_set(e, 400, NULL, NULL, param[0] ? param : "tool_choice",
                                     "the model `%s` has no tokenizer.json, so its replies "
                                     "cannot be constrained",
                                     s->model_name);
    llmrt_grammar_options opt;
    llmrt_grammar_options_init(&opt);
    opt.strict = req->format.strict;
    const int tools = req->format.kind == LLMRT_SERVE_FORMAT_TEXT;
    const llmrt_chat_syntax *syn = llmrt_engine_chat_syntax(s->engine);
    if (tools) {
        param = "tool_choice";
        if (!syn || !syn->tool_call_open || !syn->tool_call_close)
            return llmrt_serve_error_set(e, 400, NULL, NULL, param,
                                         "the model's chat format declares no tool-call markup, "
                                         "so a tool call cannot be required of it; use "
                                         "tool_choice \"auto\"");
        tool_text = tools_schema(req);
        if (!tool_text)
            return llmrt_serve_error_set(e, 500, NULL, NULL, NULL, "out of memory");
        opt.prefix = syn->tool_call_open;
        opt.suffix = syn->tool_call_close;
        opt.separator = "\n";
        opt.min_count = 1;
        opt.max_count = req->tool_choice.kind == LLMRT_SERVE_TOOL_CHOICE_REQUIRED &&
                                req->parallel_tool_calls
                            ? MAX_PARALLEL_CALLS
                            : 1;
    }
    /* a reasoning section first, where the server splits it out of the reply */
    if (req->kind == LLMRT_SERVE_CHAT && s->reasoning_split && syn && syn->thinks_by_default &&
        req->enable_thinking && syn->think_open && syn->think_close) {
        opt.lead_open = syn->think_open;
        opt.lead_close = syn->think_close;
    }
    for (int i = 0; i < n; i++) {
        llmrt_status cs;
        if (tools) {
            cs = llmrt_engine_grammar_json_schema(s->engine, tool_text, strlen(tool_text), &opt,
                                                  &out[i], &err);
        } else {
            switch (req->format.kind) {
            case LLMRT_SERVE_FORMAT_JSON_OBJECT:
                cs = llmrt_engine_grammar_json_schema(s->engine, "{\"type\":\"object\"}", 17,
                                                      &opt, &out[i], &err);
                break;
            case LLMRT_SERVE_FORMAT_JSON_SCHEMA:
                cs = llmrt_engine_grammar_json_schema(s->engine, req->format.schema,
                                                      strlen(req->format.schema), &opt, &out[i],
                                                      &err);
                break;
            case LLMRT_SERVE_FORMAT_REGEX:
                cs = llmrt_engine_grammar_regex(s->engine, req->format.regex,
                                                strlen(req->format.regex), &opt, &out[i], &err);
                break;
            default:
                cs = llmrt_engine_grammar_choice(s->engine, (const char *const *)req->format.choices,
                                                 req->format.n_choices, &opt, &out[i], &err);
                break;
            }
        }
        if (cs != LLMRT_OK) {
            char msg[LLMRT_ERROR_MSG_MAX];
            if (tools)
                tool_message(req, err.msg, msg, sizeof msg);
            else
                snprintf(msg, sizeof msg, "%s", err.msg);
            if (cs == LLMRT_ERR_NOMEM || cs == LLMRT_ERR_INTERNAL)
                st = llmrt_serve_error_set(e, 500, NULL, NULL, NULL, "%s", msg);
            else
                st = llmrt_serve_error_set(e, 400, NULL,
                                           cs == LLMRT_ERR_UNSUPPORTED ? "unsupported_schema" : NULL,
                                           param, "%s: %s", param, msg);
            for (int k = 0; k <= i; k++) {
                llmrt_grammar_free(out[k]);
                out[k] = NULL;
            }
            break;
        }
    }
    free(tool_text);
    return st;
}
