/* chat_template.c — recognise a chat template's family and render messages with a
 * hand-written renderer per family (see chat_template.h for why there is no Jinja).
 *
 * Recognition compares the template with the whitespace removed against the fragments of
 * the known template that produce output or decide what is produced; every fragment must
 * be present. A variant that changes any of those lines is therefore "not recognised"
 * instead of rendered wrongly.
 *
 * The Qwen3 renderer below mirrors the template statement by statement, with Python's
 * string semantics for split / strip / lstrip / rstrip. */
#include "chat_template.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef enum chat_family { CHAT_QWEN3 } chat_family;

struct llmrt_chat_template {
    chat_family family;
};

/* Qwen3 (hybrid thinking) template fragments, whitespace removed. */
static const char *const qwen3_fragments[] = {
    "{%-iftools%}{{-'<|im_start|>system\\n'}}{%-ifmessages[0].role=='system'%}"
    "{{-messages[0].content+'\\n\\n'}}{%-endif%}",
    "{{-\"#Tools\\n\\nYoumaycalloneormorefunctionstoassistwiththeuserquery.\\n\\nYouareprovided"
    "withfunctionsignatureswithin<tools></tools>XMLtags:\\n<tools>\"}}",
    "{%-fortoolintools%}{{-\"\\n\"}}{{-tool|tojson}}{%-endfor%}",
    "{{-\"\\n</tools>\\n\\nForeachfunctioncall,returnajsonobjectwithfunctionnameandarguments"
    "within<tool_call></tool_call>XMLtags:\\n<tool_call>\\n{\\\"name\\\":<function-name>,"
    "\\\"arguments\\\":<args-json-object>}\\n</tool_call><|im_end|>\\n\"}}",
    "{%-else%}{%-ifmessages[0].role=='system'%}"
    "{{-'<|im_start|>system\\n'+messages[0].content+'<|im_end|>\\n'}}{%-endif%}{%-endif%}",
    "{%-setns=namespace(multi_step_tool=true,last_query_index=messages|length-1)%}",
    "{%-formessageinmessages[::-1]%}{%-setindex=(messages|length-1)-loop.index0%}",
    "{%-ifns.multi_step_toolandmessage.role==\"user\"andnot(message.content.startswith("
    "'<tool_response>')andmessage.content.endswith('</tool_response>'))%}"
    "{%-setns.multi_step_tool=false%}{%-setns.last_query_index=index%}",
    "{%-formessageinmessages%}{%-if(message.role==\"user\")or(message.role==\"system\"and"
    "notloop.first)%}{{-'<|im_start|>'+message.role+'\\n'+message.content+'<|im_end|>'+'\\n'}}",
    "{%-elifmessage.role==\"assistant\"%}{%-setcontent=message.content%}"
    "{%-setreasoning_content=''%}",
    "{%-ifmessage.reasoning_contentisdefinedandmessage.reasoning_contentisnotnone%}"
    "{%-setreasoning_content=message.reasoning_content%}{%-else%}{%-if'</think>'inmessage."
    "content%}{%-setcontent=message.content.split('</think>')[-1].lstrip('\\n')%}"
    "{%-setreasoning_content=message.content.split('</think>')[0].rstrip('\\n').split("
    "'<think>')[-1].lstrip('\\n')%}{%-endif%}{%-endif%}",
    "{%-ifloop.index0>ns.last_query_index%}{%-ifloop.lastor(notloop.lastandreasoning_content)%}"
    "{{-'<|im_start|>'+message.role+'\\n<think>\\n'+reasoning_content.strip('\\n')+"
    "'\\n</think>\\n\\n'+content.lstrip('\\n')}}{%-else%}{{-'<|im_start|>'+message.role+'\\n'"
    "+content}}{%-endif%}{%-else%}{{-'<|im_start|>'+message.role+'\\n'+content}}{%-endif%}",
    "{%-ifmessage.tool_calls%}{%-fortool_callinmessage.tool_calls%}{%-if(loop.firstand"
    "content)or(notloop.first)%}{{-'\\n'}}{%-endif%}{%-iftool_call.function%}"
    "{%-settool_call=tool_call.function%}{%-endif%}",
    "{{-'<tool_call>\\n{\"name\":\"'}}{{-tool_call.name}}{{-'\",\"arguments\":'}}"
    "{%-iftool_call.argumentsisstring%}{{-tool_call.arguments}}{%-else%}"
    "{{-tool_call.arguments|tojson}}{%-endif%}{{-'}\\n</tool_call>'}}{%-endfor%}{%-endif%}"
    "{{-'<|im_end|>\\n'}}",
    "{%-elifmessage.role==\"tool\"%}{%-ifloop.firstor(messages[loop.index0-1].role!=\"tool\")%}"
    "{{-'<|im_start|>user'}}{%-endif%}{{-'\\n<tool_response>\\n'}}{{-message.content}}"
    "{{-'\\n</tool_response>'}}{%-ifloop.lastor(messages[loop.index0+1].role!=\"tool\")%}"
    "{{-'<|im_end|>\\n'}}{%-endif%}{%-endif%}{%-endfor%}",
    "{%-ifadd_generation_prompt%}{{-'<|im_start|>assistant\\n'}}{%-ifenable_thinkingis"
    "definedandenable_thinkingisfalse%}{{-'<think>\\n\\n</think>\\n\\n'}}{%-endif%}{%-endif%}",
};

static char *strip_ws(const char *s)
{
    char *o = malloc(strlen(s) + 1);
    if (!o)
        return NULL;
    size_t k = 0;
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
            o[k++] = *s;
    o[k] = 0;
    return o;
}

llmrt_status llmrt_chat_template_new(const char *text, const char *where,
                                     llmrt_chat_template **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char *flat = NULL;
    *out = NULL;
    where = where ? where : "chat template";
    if (!text)
        FAIL(err, LLMRT_ERR_NOT_FOUND, "%s: no chat_template", where);
    flat = strip_ws(text);
    TRY_ALLOC(err, flat, "chat template");
    size_t missing = 0, n = sizeof qwen3_fragments / sizeof *qwen3_fragments, first_missing = n;
    for (size_t i = 0; i < n; i++) {
        char *frag = strip_ws(qwen3_fragments[i]);
        TRY_ALLOC(err, frag, "chat template");
        if (!strstr(flat, frag)) {
            missing++;
            if (first_missing == n)
                first_missing = i;
        }
        free(frag);
    }
    if (missing) {
        if (missing < n && strstr(flat, "<|im_start|>"))
            FAIL(err, LLMRT_ERR_UNSUPPORTED,
                 "%s: the chat template is not recognised: it looks like ChatML but differs from "
                 "the Qwen3 template in %zu place(s) (first: fragment %zu). llmrt renders known "
                 "templates only (supported: qwen3); use the model's original "
                 "tokenizer_config.json",
                 where, missing, first_missing + 1);
        FAIL(err, LLMRT_ERR_UNSUPPORTED,
             "%s: the chat template is not recognised (supported families: qwen3). llmrt has no "
             "Jinja engine; it renders templates it knows",
             where);
    }
    *out = calloc(1, sizeof **out);
    TRY_ALLOC(err, *out, "chat template");
    (*out)->family = CHAT_QWEN3;
cleanup:
    free(flat);
    return st;
}

llmrt_status llmrt_chat_template_from_tokenizer(const llmrt_tokenizer *tok,
                                                llmrt_chat_template **out, llmrt_error *err)
{
    const char *text = llmrt_tokenizer_chat_template(tok);
    if (!text) {
        *out = NULL;
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                          "the tokenizer has no chat template (tokenizer_config.json has no "
                          "chat_template and there is no chat_template.jinja)");
    }
    return llmrt_chat_template_new(text, "tokenizer_config.json chat_template", out, err);
}

const char *llmrt_chat_template_family(const llmrt_chat_template *t)
{
    (void)t;
    return "qwen3";
}

void llmrt_chat_template_free(llmrt_chat_template *t) { free(t); }

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

/* ---- Python string semantics ---- */

typedef struct span {
    const char *p;
    size_t n;
} span;

static span sp(const char *s) { return (span){s ? s : "", s ? strlen(s) : 0}; }

static span lstrip_nl(span s)
{
    while (s.n && s.p[0] == '\n')
        s.p++, s.n--;
    return s;
}

static span rstrip_nl(span s)
{
    while (s.n && s.p[s.n - 1] == '\n')
        s.n--;
    return s;
}

static const char *find(span s, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= s.n; i++)
        if (memcmp(s.p + i, needle, k) == 0)
            return s.p + i;
    return NULL;
}

static const char *rfind(span s, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = s.n + 1; i-- > 0;)
        if (i + k <= s.n && memcmp(s.p + i, needle, k) == 0)
            return s.p + i;
    return NULL;
}

static int starts_with(span s, const char *x)
{
    size_t k = strlen(x);
    return s.n >= k && memcmp(s.p, x, k) == 0;
}

static int ends_with(span s, const char *x)
{
    size_t k = strlen(x);
    return s.n >= k && memcmp(s.p + s.n - k, x, k) == 0;
}

static int role_is(const llmrt_chat_message *m, const char *r)
{
    return m->role && strcmp(m->role, r) == 0;
}

static llmrt_status render_qwen3(const llmrt_chat_message *msgs, size_t n,
                                 const llmrt_chat_options *opt, sbuf *b, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    if (n == 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "chat: no messages (the Qwen3 template needs at least one)");
    for (size_t i = 0; i < n; i++)
        if (!role_is(&msgs[i], "system") && !role_is(&msgs[i], "user") &&
            !role_is(&msgs[i], "assistant") && !role_is(&msgs[i], "tool"))
            FAIL(err, LLMRT_ERR_INVALID_ARG,
                 "chat: messages[%zu] has role \"%s\"; the Qwen3 template knows system, user, "
                 "assistant and tool%s",
                 i, msgs[i].role ? msgs[i].role : "(none)",
                 msgs[i].role && strcmp(msgs[i].role, "developer") == 0 ? " (use system)" : "");
    int first_system = role_is(&msgs[0], "system");
    if (opt->n_tools) {
        sb_add(b, "<|im_start|>system\n");
        if (first_system) {
            sb_add(b, msgs[0].content ? msgs[0].content : "");
            sb_add(b, "\n\n");
        }
        sb_add(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                  "You are provided with function signatures within <tools></tools> XML tags:\n"
                  "<tools>");
        for (size_t i = 0; i < opt->n_tools; i++) {
            sb_add(b, "\n");
            sb_add(b, opt->tools[i]);
        }
        sb_add(b, "\n</tools>\n\nFor each function call, return a json object with function name "
                  "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                  "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
                  "</tool_call><|im_end|>\n");
    } else if (first_system) {
        sb_add(b, "<|im_start|>system\n");
        sb_add(b, msgs[0].content ? msgs[0].content : "");
        sb_add(b, "<|im_end|>\n");
    }
    /* The last user turn that is a real query (not a tool response wrapped as user). */
    size_t last_query = n - 1;
    for (size_t k = n; k-- > 0;) {
        span c = sp(msgs[k].content);
        if (role_is(&msgs[k], "user") &&
            !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const llmrt_chat_message *m = &msgs[i];
        if (role_is(m, "user") || (role_is(m, "system") && i != 0)) {
            sb_add(b, "<|im_start|>");
            sb_add(b, m->role);
            sb_add(b, "\n");
            sb_add(b, m->content ? m->content : "");
            sb_add(b, "<|im_end|>\n");
        } else if (role_is(m, "assistant")) {
            span content = sp(m->content), reasoning = sp("");
            if (m->reasoning_content) {
                reasoning = sp(m->reasoning_content);
            } else if (find(content, "</think>")) {
                span whole = content;
                const char *last_end = rfind(whole, "</think>");
                content = lstrip_nl((span){last_end + 8, (size_t)(whole.p + whole.n - last_end - 8)});
                const char *first_end = find(whole, "</think>");
                span before = rstrip_nl((span){whole.p, (size_t)(first_end - whole.p)});
                const char *open = rfind(before, "<think>");
                if (open)
                    before = (span){open + 7, (size_t)(before.p + before.n - open - 7)};
                reasoning = lstrip_nl(before);
            }
            sb_add(b, "<|im_start|>assistant\n");
            if (i > last_query && (i == n - 1 || reasoning.n)) {
                span r = rstrip_nl(lstrip_nl(reasoning));
                sb_add(b, "<think>\n");
                sb_addn(b, r.p, r.n);
                sb_add(b, "\n</think>\n\n");
                span c = lstrip_nl(content);
                sb_addn(b, c.p, c.n);
            } else {
                sb_addn(b, content.p, content.n);
            }
            for (size_t j = 0; j < m->n_tool_calls; j++) {
                const llmrt_chat_tool_call *tc = &m->tool_calls[j];
                if ((j == 0 && content.n) || j > 0)
                    sb_add(b, "\n");
                sb_add(b, "<tool_call>\n{\"name\": \"");
                sb_add(b, tc->name ? tc->name : "");
                sb_add(b, "\", \"arguments\": ");
                sb_add(b, tc->arguments ? tc->arguments : "{}");
                sb_add(b, "}\n</tool_call>");
            }
            sb_add(b, "<|im_end|>\n");
        } else if (role_is(m, "tool")) {
            if (i == 0 || !role_is(&msgs[i - 1], "tool"))
                sb_add(b, "<|im_start|>user");
            sb_add(b, "\n<tool_response>\n");
            sb_add(b, m->content ? m->content : "");
            sb_add(b, "\n</tool_response>");
            if (i == n - 1 || !role_is(&msgs[i + 1], "tool"))
                sb_add(b, "<|im_end|>\n");
        }
    }
    if (opt->add_generation_prompt) {
        sb_add(b, "<|im_start|>assistant\n");
        if (!opt->enable_thinking)
            sb_add(b, "<think>\n\n</think>\n\n");
    }
cleanup:
    return st;
}

llmrt_status llmrt_chat_render(const llmrt_chat_template *t, const llmrt_chat_message *msgs,
                               size_t n, const llmrt_chat_options *opt, char **text,
                               llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    static const llmrt_chat_options defaults = {1, 1, NULL, 0};
    sbuf b = {0};
    *text = NULL;
    (void)t; /* one family so far */
    TRY(render_qwen3(msgs, n, opt ? opt : &defaults, &b, err));
    sb_add(&b, ""); /* a non-NULL buffer even when nothing was written */
    if (b.oom)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory rendering the chat template");
    *text = b.p;
    b.p = NULL;
cleanup:
    free(b.p);
    return st;
}

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
            cm->n_tool_calls = nc;
        }
    }
    m->n = n;
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools))
            FAIL(err, LLMRT_ERR_INVALID_ARG, "%s: \"tools\" must be an array", where);
        size_t nt = json_array_size(tools);
        m->tools = keep(o, calloc(nt ? nt : 1, sizeof *m->tools));
        TRY_ALLOC(err, m->tools, "tools");
        for (size_t j = 0; j < nt; j++) {
            m->tools[j] = keep_json(o, json_array_get(tools, j));
            TRY_ALLOC(err, m->tools[j], "tool");
        }
        m->n_tools = nt;
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
