/* serve_response.c — OpenAI-shaped JSON for `llmrt serve` (see serve_response.h). */
#include "serve_response.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

char *llmrt_serve_error_text(const llmrt_serve_error *e, size_t *len)
{
    json_t *inner = json_object();
    json_t *root = json_object();
    char *text = NULL;
    if (!inner || !root)
        goto cleanup;
    json_object_set_new(inner, "message", llmrt_serve_json_string(e->message, strlen(e->message)));
    json_object_set_new(inner, "type", json_string(e->type[0] ? e->type : "server_error"));
    json_object_set_new(inner, "param", e->param[0] ? json_string(e->param) : json_null());
    json_object_set_new(inner, "code", e->code[0] ? json_string(e->code) : json_null());
    json_object_set(root, "error", inner);
    text = json_dumps(root, JSON_COMPACT);
    if (text && len)
        *len = strlen(text);
cleanup:
    json_decref(inner);
    json_decref(root);
    return text;
}

/* Length of the invalid sequence at p that one U+FFFD replaces: the "maximal subpart" of
 * Unicode's recommendation (as Rust's from_utf8_lossy and HF tokenizers do), so a
 * character cut short counts once. */
static size_t bad_prefix(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t want = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                  : c >= 0xF0 && c <= 0xF4                             ? 4
                                                                       : 1;
    size_t k = 1;
    while (k < want && k < n) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (k == 1) {
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        }
        if (p[k] < lo || p[k] > hi)
            break;
        k++;
    }
    return k;
}

json_t *llmrt_serve_json_string(const char *s, size_t len)
{
    json_t *j = json_stringn(s, len);
    if (j)
        return j;
    /* invalid UTF-8: rebuild with U+FFFD for each bad sequence */
    char *buf = malloc(len * 3 + 1);
    if (!buf)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
                                              (utf8proc_ssize_t)(len - i), &cp);
        if (k > 0) {
            memcpy(buf + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += bad_prefix((const unsigned char *)s + i, len - i);
        }
    }
    j = json_stringn(buf, o);
    free(buf);
    return j;
}

json_t *llmrt_serve_usage(int64_t prompt_tokens, int64_t completion_tokens,
                          int64_t cached_tokens)
{
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)prompt_tokens,
                     "completion_tokens", (json_int_t)completion_tokens, "total_tokens",
                     (json_int_t)(prompt_tokens + completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)cached_tokens);
}

json_t *llmrt_serve_object(const char *id, const char *object, int64_t created,
                           const char *model)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer((json_int_t)created));
    json_object_set_new(o, "model", llmrt_serve_json_string(model, strlen(model)));
    return o;
}

char *llmrt_serve_token_string(const llmrt_tokenizer *tok, int32_t id)
{
    if (tok) {
        char *text = NULL;
        llmrt_error err = {0};
        if (llmrt_tokenizer_decode(tok, &id, 1, 0, &text, NULL, &err) == LLMRT_OK)
            return text;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "token_id:%d", (int)id);
    return strdup(buf);
}

const char *llmrt_serve_finish_str(llmrt_finish_reason r)
{
    switch (r) {
    case LLMRT_FINISH_NONE: return NULL;
    case LLMRT_FINISH_STOP: return "stop";
    case LLMRT_FINISH_LENGTH: return "length";
    case LLMRT_FINISH_CANCELLED: return "cancelled";
    case LLMRT_FINISH_ERROR: return "error";
    }
    return "error";
}

/* JSON logprob: -inf (a token the model gave probability 0) is not valid JSON; clamp it to
 * the most negative finite float, as vLLM does with -9999.0. */
static json_t *lp_value(float lp)
{
    return json_real(lp < -9999.0f ? -9999.0 : (double)lp);
}

json_t *llmrt_serve_lp_completion_new(void)
{
    return json_pack("{s:[], s:[], s:[], s:[]}", "tokens", "token_logprobs", "top_logprobs",
                     "text_offset");
}

int llmrt_serve_lp_completion_add(json_t *lp, const llmrt_tokenizer *tok,
                                  const llmrt_serve_token_lp *t, int64_t text_offset)
{
    int rc = -1;
    char *s = llmrt_serve_token_string(tok, t->token);
    json_t *top = json_object();
    if (!s || !top)
        goto cleanup;
    for (int32_t i = 0; i < t->n_top; i++) {
        char *alt = llmrt_serve_token_string(tok, t->top_ids[i]);
        if (!alt)
            goto cleanup;
        if (!json_object_get(top, alt))
            json_object_set_new(top, alt, lp_value(t->top_lps[i]));
        free(alt);
    }
    if (!json_object_get(top, s))
        json_object_set_new(top, s, lp_value(t->logprob));
    if (json_array_append_new(json_object_get(lp, "tokens"), llmrt_serve_json_string(s, strlen(s))) ||
        json_array_append_new(json_object_get(lp, "token_logprobs"), lp_value(t->logprob)) ||
        json_array_append(json_object_get(lp, "top_logprobs"), top) ||
        json_array_append_new(json_object_get(lp, "text_offset"),
                              json_integer((json_int_t)text_offset)))
        goto cleanup;
    rc = 0;
cleanup:
    free(s);
    json_decref(top);
    return rc;
}

json_t *llmrt_serve_lp_chat_new(void)
{
    return json_pack("{s:[]}", "content");
}

/* {"token", "logprob", "bytes"} of one id */
static json_t *chat_token(const llmrt_tokenizer *tok, int32_t id, float logprob)
{
    char *s = llmrt_serve_token_string(tok, id);
    json_t *o = json_object(), *bytes = json_array();
    if (!s || !o || !bytes) {
        free(s);
        json_decref(o);
        json_decref(bytes);
        return NULL;
    }
    size_t n = 0;
    const uint8_t *b = tok ? llmrt_tokenizer_token_bytes(tok, id, &n) : NULL;
    if (!b) {
        b = (const uint8_t *)s;
        n = strlen(s);
    }
    for (size_t i = 0; i < n; i++)
        json_array_append_new(bytes, json_integer(b[i]));
    json_object_set_new(o, "token", llmrt_serve_json_string(s, strlen(s)));
    json_object_set_new(o, "logprob", lp_value(logprob));
    json_object_set_new(o, "bytes", bytes);
    free(s);
    return o;
}

int llmrt_serve_lp_chat_add(json_t *lp, const llmrt_tokenizer *tok,
                            const llmrt_serve_token_lp *t)
{
    json_t *entry = chat_token(tok, t->token, t->logprob);
    json_t *top = json_array();
    if (!entry || !top)
        goto fail;
    for (int32_t i = 0; i < t->n_top; i++) {
        json_t *alt = chat_token(tok, t->top_ids[i], t->top_lps[i]);
        if (!alt || json_array_append_new(top, alt))
            goto fail;
    }
    json_object_set_new(entry, "top_logprobs", top);
    top = NULL;
    if (json_array_append_new(json_object_get(lp, "content"), entry))
        return -1;
    return 0;
fail:
    json_decref(entry);
    json_decref(top);
    return -1;
}

static json_t *tool_call_json(const llmrt_serve_tool_call *t, int chunk)
{
    json_t *o = json_object(), *fn = json_object();
    if (!o || !fn) {
        json_decref(o);
        json_decref(fn);
        return NULL;
    }
    if (chunk)
        json_object_set_new(o, "index", json_integer(t->index));
    if (t->id) {
        json_object_set_new(o, "id", json_string(t->id));
        json_object_set_new(o, "type", json_string("function"));
    }
    if (t->name)
        json_object_set_new(fn, "name", llmrt_serve_json_string(t->name, strlen(t->name)));
    json_object_set_new(fn, "arguments", llmrt_serve_json_string(t->arguments ? t->arguments : "",
                                                                 t->arguments ? t->arguments_len : 0));
    json_object_set_new(o, "function", fn);
    return o;
}

json_t *llmrt_serve_choice(const llmrt_serve_choice_desc *d)
{
    json_t *c = json_object();
    if (!c) {
        json_decref(d->logprobs);
        return NULL;
    }
    json_object_set_new(c, "index", json_integer(d->index));
    json_t *text = d->text ? llmrt_serve_json_string(d->text, d->text_len) : NULL;
    if (d->kind == LLMRT_SERVE_CHAT) {
        json_t *msg = json_object();
        if (!d->chunk || d->with_role)
            json_object_set_new(msg, "role", json_string("assistant"));
        if (text)
            json_object_set_new(msg, "content", text);
        else if (!d->chunk)
            json_object_set_new(msg, "content", json_null());
        if (d->reasoning)
            json_object_set_new(msg, "reasoning_content",
                                llmrt_serve_json_string(d->reasoning, d->reasoning_len));
        if (d->n_tool_calls > 0) {
            json_t *calls = json_array();
            for (int32_t i = 0; calls && i < d->n_tool_calls; i++)
                json_array_append_new(calls, tool_call_json(&d->tool_calls[i], d->chunk));
            json_object_set_new(msg, "tool_calls", calls);
        }
        json_object_set_new(c, d->chunk ? "delta" : "message", msg);
    } else {
        json_object_set_new(c, "text", text ? text : json_string(""));
    }
    json_object_set_new(c, "logprobs", d->logprobs ? d->logprobs : json_null());
    const char *fr = d->finish == LLMRT_FINISH_STOP && d->tool_calls_finish
                         ? "tool_calls"
                         : llmrt_serve_finish_str(d->finish);
    json_object_set_new(c, "finish_reason", fr ? json_string(fr) : json_null());
    if (d->finish != LLMRT_FINISH_NONE || !d->chunk) {
        json_t *sr = d->stop_reason   ? llmrt_serve_json_string(d->stop_reason,
                                                                strlen(d->stop_reason))
                     : d->stop_token >= 0 ? json_integer(d->stop_token)
                                          : json_null();
        json_object_set_new(c, "stop_reason", sr);
    }
    return c;
}

char *llmrt_serve_sse_event(const json_t *obj, size_t *len)
{
    char *js = json_dumps(obj, JSON_COMPACT);
    if (!js)
        return NULL;
    size_t n = strlen(js);
    char *out = malloc(n + 9);
    if (out) {
        memcpy(out, "data: ", 6);
        memcpy(out + 6, js, n);
        memcpy(out + 6 + n, "\n\n", 3);
        if (len)
            *len = n + 8;
    }
    free(js);
    return out;
}
