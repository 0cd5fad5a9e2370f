/* chat_messages.c — OpenAI "messages" (and "tools") JSON into the llmrt_chat_message structs
 * a model plugin's chat renderer takes (llmrt/chat.h).
 *
 * Tools are kept as the text transformers' `tojson` filter prints (Python's json.dumps with
 * ensure_ascii=False, separators ", " and ": ", keys in the request's order), because that
 * text goes verbatim into the prompt of every template that lists tools. */
#include "chat_messages.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* ---- output buffer ---- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_addn(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *g = realloc(b->p, cap);
        if (!g) {
            b->oom = 1;
            return;
        }
        b->p = g;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_add(sbuf *b, const char *s) { sb_addn(b, s, strlen(s)); }

/* ---- JSON → messages ---- */

/* Python's json.dumps (as transformers' tojson filter calls it: ensure_ascii=False,
 * separators ", " and ": ", keys in their given order). */
static void py_float(sbuf *b, double x)
{
    char buf[64], digits[32];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    /* buf = [-]d[.ddd]e±XX → digits and decimal exponent */
    const char *s = buf;
    int neg = *s == '-';
    if (neg)
        s++;
    size_t nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.')
            digits[nd++] = *s;
    digits[nd] = 0;
    int exp10 = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = 0;
    if (neg)
        sb_add(b, "-");
    if (exp10 < -4 || exp10 >= 16) {
        sb_addn(b, digits, 1);
        if (nd > 1) {
            sb_add(b, ".");
            sb_add(b, digits + 1);
        }
        snprintf(buf, sizeof buf, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
        sb_add(b, buf);
    } else if (exp10 < 0) {
        sb_add(b, "0.");
        for (int i = -1; i > exp10; i--)
            sb_add(b, "0");
        sb_add(b, digits);
    } else {
        for (int i = 0; i <= exp10; i++)
            sb_addn(b, i < (int)nd ? digits + i : "0", 1);
        sb_add(b, ".");
        sb_add(b, (int)nd > exp10 + 1 ? digits + exp10 + 1 : "0");
    }
}

static void py_string(sbuf *b, const char *s, size_t n)
{
    sb_add(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"': sb_add(b, "\\\""); break;
        case '\\': sb_add(b, "\\\\"); break;
        case '\n': sb_add(b, "\\n"); break;
        case '\r': sb_add(b, "\\r"); break;
        case '\t': sb_add(b, "\\t"); break;
        case '\b': sb_add(b, "\\b"); break;
        case '\f': sb_add(b, "\\f"); break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                sb_add(b, esc);
            } else {
                sb_addn(b, (const char *)&c, 1);
            }
        }
    }
    sb_add(b, "\"");
}

static void py_json(sbuf *b, const json_t *v)
{
    char buf[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        size_t klen;
        json_t *val;
        int first = 1;
        sb_add(b, "{");
        json_object_keylen_foreach((json_t *)v, key, klen, val)
        {
            if (!first)
                sb_add(b, ", ");
            first = 0;
            py_string(b, key, klen);
            sb_add(b, ": ");
            py_json(b, val);
        }
        sb_add(b, "}");
        break;
    }
    case JSON_ARRAY:
        sb_add(b, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                sb_add(b, ", ");
            py_json(b, json_array_get(v, i));
        }
        sb_add(b, "]");
        break;
    case JSON_STRING:
        py_string(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        sb_add(b, buf);
        break;
    case JSON_REAL:
        py_float(b, json_real_value(v));
        break;
    case JSON_TRUE: sb_add(b, "true"); break;
    case JSON_FALSE: sb_add(b, "false"); break;
    case JSON_NULL: sb_add(b, "null"); break;
    }
}

/* Everything a llmrt_chat_messages points to: one list of allocations. */
typedef struct owned {
    void **p;
    size_t n, cap;
} owned;

static void *keep(owned *o, void *p)
{
    if (!p)
        return NULL;
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 16;
        void **g = realloc(o->p, cap * sizeof *g);
        if (!g) {
            free(p);
            return NULL;
        }
        o->p = g;
        o->cap = cap;
    }
    o->p[o->n++] = p;
    return p;
}

static char *keep_str(owned *o, const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (!c)
        return NULL;
    memcpy(c, s, n);
    c[n] = 0;
    return keep(o, c);
}

static char *keep_json(owned *o, const json_t *v)
{
    sbuf b = {0};
    py_json(&b, v);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return keep(o, b.p);
}

/* A message's "content": string, null/absent, or an array of text parts. */
static llmrt_status content_of(owned *o, const json_t *c, const char *where, size_t i,
                               const char **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    sbuf b = {0};
    *out = NULL;
    if (!c || json_is_null(c))
        return LLMRT_OK;
    if (json_is_string(c)) {
        *out = keep_str(o, json_string_value(c), json_string_length(c));
        TRY_ALLOC(err, *out, "message content");
        return LLMRT_OK;
    }
    if (!json_is_array(c))
        FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: messages[%zu].content must be a string, null or an array of text parts",
             where, i);
    for (size_t k = 0; k < json_array_size(c); k++) {
        const json_t *part = json_array_get(c, k);
        const char *type = json_string_value(json_object_get(part, "type"));
        const json_t *text = json_object_get(part, "text");
        if (!type || strcmp(type, "text") != 0 || !json_is_string(text))
            FAIL(err, LLMRT_ERR_UNSUPPORTED, "%s: messages[%zu].content[%zu] is not a {\"type\": \"text\", \"text\": ...} part (only text is supported)",
                 where, i, k);
        if (k)
            sb_add(&b, "\n"); /* parts are joined with newlines, as vLLM does */
        sb_addn(&b, json_string_value(text), json_string_length(text));
    }
    sb_add(&b, "");
    if (b.oom)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory for message content");
    *out = keep(o, b.p);
    b.p = NULL;
    TRY_ALLOC(err, *out, "message content");
cleanup:
    free(b.p);
    return st;
}

void llmrt_chat_messages_free(llmrt_chat_messages *m)
{
    if (!m)
        return;
    owned *o = m->priv;
    if (o) {
        for (size_t i = 0; i < o->n; i++)
            free(o->p[i]);
        free(o->p);
        free(o);
    }
    free(m);
}

llmrt_status llmrt_chat_messages_from_json(const struct json_t *messages,
                                           const struct json_t *tools, const char *where,
                                           llmrt_chat_messages **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    where = where ? where : "messages";
    *out = NULL;
    llmrt_chat_messages *m = calloc(1, sizeof *m);
    TRY_ALLOC(err, m, "messages");
    owned *o = m->priv = calloc(1, sizeof *o);
    TRY_ALLOC(err, o, "messages");
    if (!json_is_array(messages))
        FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: \"messages\" must be an array of {role, content}", where);
    size_t n = json_array_size(messages);
    if (n > LLMRT_CHAT_MAX_MESSAGES)
        FAIL(err, LLMRT_ERR_LIMIT, "%s: %zu messages (at most %d)", where, n,
             LLMRT_CHAT_MAX_MESSAGES);
    m->msgs = keep(o, calloc(n ? n : 1, sizeof *m->msgs));
    TRY_ALLOC(err, m->msgs, "messages");
    for (size_t i = 0; i < n; i++) {
        const json_t *msg = json_array_get(messages, i);
        llmrt_chat_message *cm = &m->msgs[i];
        if (!json_is_object(msg))
            FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: messages[%zu] must be an object", where, i);
        const json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role))
            FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: messages[%zu] has no \"role\" string", where, i);
        cm->role = keep_str(o, json_string_value(role), json_string_length(role));
        TRY_ALLOC(err, cm->role, "role");
        TRY(content_of(o, json_object_get(msg, "content"), where, i, &cm->content, err));
        const json_t *rc = json_object_get(msg, "reasoning_content");
        if (json_is_string(rc)) {
            cm->reasoning_content = keep_str(o, json_string_value(rc), json_string_length(rc));
            TRY_ALLOC(err, cm->reasoning_content, "reasoning_content");
        } else if (rc && !json_is_null(rc)) {
            FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: messages[%zu].reasoning_content must be a string or null", where, i);
        }
        const json_t *calls = json_object_get(msg, "tool_calls");
        if (calls && !json_is_null(calls)) {
            if (!json_is_array(calls))
                FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: messages[%zu].tool_calls must be an array", where, i);
            size_t nc = json_array_size(calls);
            if (nc > LLMRT_CHAT_MAX_MESSAGES)
                FAIL(err, LLMRT_ERR_LIMIT, "%s: messages[%zu] has %zu tool calls (at most %d)",
                     where, i, nc, LLMRT_CHAT_MAX_MESSAGES);
            llmrt_chat_tool_call *tc = keep(o, calloc(nc ? nc : 1, sizeof *tc));
            TRY_ALLOC(err, tc, "tool calls");
            for (size_t j = 0; j < nc; j++) {
                const json_t *call = json_array_get(calls, j), *fn = json_object_get(call, "function");
                if (json_is_object(fn))
                    call = fn;
                const json_t *name = json_object_get(call, "name"), *args = json_object_get(call, "arguments");
                if (!json_is_string(name) || !args)
                    FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: messages[%zu].tool_calls[%zu] needs function.name and function.arguments",
                         where, i, j);
                tc[j].name = keep_str(o, json_string_value(name), json_string_length(name));
                if (json_is_string(args)) {
                    tc[j].arguments = keep_str(o, json_string_value(args), json_string_length(args));
                    tc[j].arguments_is_string = 1;
                } else {
                    tc[j].arguments = keep_json(o, args);
                }
                TRY_ALLOC(err, tc[j].name && tc[j].arguments, "tool call");
            }
            cm->tool_calls = tc;
            cm->n_tool_calls = (uint32_t)nc;
        }
    }
    m->n = (uint32_t)n;
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools))
            FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: \"tools\" must be an array", where);
        size_t nt = json_array_size(tools);
        if (nt > LLMRT_CHAT_MAX_MESSAGES)
            FAIL(err, LLMRT_ERR_LIMIT, "%s: %zu tools (at most %d)", where, nt,
                 LLMRT_CHAT_MAX_MESSAGES);
        m->tools = keep(o, calloc(nt ? nt : 1, sizeof *m->tools));
        TRY_ALLOC(err, m->tools, "tools");
        for (size_t j = 0; j < nt; j++) {
            m->tools[j] = keep_json(o, json_array_get(tools, j));
            TRY_ALLOC(err, m->tools[j], "tool");
        }
        m->n_tools = (uint32_t)nt;
    }
    *out = m;
    m = NULL;
cleanup:
    llmrt_chat_messages_free(m);
    return st;
}

llmrt_status llmrt_chat_messages_parse(const char *json, size_t len, const char *where,
                                       llmrt_chat_messages **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    json_error_t jerr;
    where = where ? where : "messages";
    *out = NULL;
    json_t *root = json_loadb(json, len, JSON_DECODE_ANY, &jerr);
    if (!root)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "%s:%d:%d: not valid JSON: %s", where, jerr.line,
             jerr.column, jerr.text);
    if (json_is_array(root))
        TRY(llmrt_chat_messages_from_json(root, NULL, where, out, err));
    else if (json_is_object(root))
        TRY(llmrt_chat_messages_from_json(json_object_get(root, "messages"),
                                          json_object_get(root, "tools"), where, out, err));
    else
        FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: expected a messages array or an object with \"messages\"",
             where);
cleanup:
    json_decref(root);
    return st;
}
