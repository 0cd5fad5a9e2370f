/* qwen3_chat.c — the Qwen3 chat format (llmrt/chat.h): recognise the Qwen3 hybrid-thinking
 * chat template and render messages exactly as transformers' apply_chat_template does with it.
 *
 * Why no Jinja: the template is known. It is recognised by comparing its text, with the
 * whitespace removed, against the fragments that produce output or decide what is produced;
 * every fragment must be present, so a variant that changes any of those lines is refused
 * ("not recognised") instead of rendered wrongly. The renderer mirrors the template statement
 * by statement, with Python's string semantics for split / strip / lstrip / rstrip:
 * <|im_start|>role\n...<|im_end|>\n turns, tools in the system turn,
 * <tool_call>/<tool_response>, reasoning kept only for assistant turns after the last real
 * user query, and enable_thinking = false adding an empty <think>\n\n</think>\n\n after the
 * generation prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/chat.h>

#include "qwen3_common.h"

#define FAIL(err, code, ...)                                                                  \
    do {                                                                                      \
        st = llmrt_fail((err), (code), __VA_ARGS__);                                          \
        goto cleanup;                                                                         \
    } while (0)

struct llmrt_chat {
    int unused; /* one family, no state */
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

static llmrt_status render_qwen3(const llmrt_chat_message *msgs, uint32_t n,
                                 const llmrt_chat_options *opt, sbuf *b, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    if (n == 0)
        FAIL(err, LLMRT_ERR_INVALID_ARG, "chat: no messages (the Qwen3 template needs at least one)");
    for (uint32_t i = 0; i < n; i++)
        if (!role_is(&msgs[i], "system") && !role_is(&msgs[i], "user") &&
            !role_is(&msgs[i], "assistant") && !role_is(&msgs[i], "tool"))
            FAIL(err, LLMRT_ERR_INVALID_ARG,
                 "chat: messages[%u] has role \"%s\"; the Qwen3 template knows system, user, "
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
        for (uint32_t i = 0; i < opt->n_tools; i++) {
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
    uint32_t last_query = n - 1;
    for (uint32_t k = n; k-- > 0;) {
        span c = sp(msgs[k].content);
        if (role_is(&msgs[k], "user") &&
            !(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
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
            for (uint32_t j = 0; j < m->n_tool_calls; j++) {
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

/* ---- the chat vtable ---- */

static llmrt_status qwen3_chat_create(const llmrt_host *host, const char *text, const char *where,
                                      llmrt_chat **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char *flat = NULL;
    (void)host;
    *out = NULL;
    where = where ? where : "chat template";
    if (!text)
        FAIL(err, LLMRT_ERR_NOT_FOUND, "%s: no chat_template", where);
    flat = strip_ws(text);
    if (!flat)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory reading the chat template");
    size_t missing = 0, n = sizeof qwen3_fragments / sizeof *qwen3_fragments, first_missing = n;
    for (size_t i = 0; i < n; i++) {
        char *frag = strip_ws(qwen3_fragments[i]);
        if (!frag)
            FAIL(err, LLMRT_ERR_NOMEM, "out of memory reading the chat template");
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
        FAIL(err, LLMRT_ERR_NOT_FOUND,
             "%s: the chat template is not recognised (the qwen3 model plugin renders the "
             "Qwen3 template). llmrt has no Jinja engine; it renders templates it knows",
             where);
    }
    *out = calloc(1, sizeof **out);
    if (!*out)
        FAIL(err, LLMRT_ERR_NOMEM, "out of memory");
cleanup:
    free(flat);
    return st;
}

static void qwen3_chat_destroy(llmrt_chat *c) { free(c); }

static const char *qwen3_chat_family(const llmrt_chat *c)
{
    (void)c;
    return "qwen3";
}

static llmrt_status qwen3_chat_render(const llmrt_chat *c, const llmrt_chat_message *msgs,
                                      uint32_t n, const llmrt_chat_options *opt,
                                      const llmrt_sink *out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_chat_options o = {sizeof o, 1, 1, NULL, 0};
    sbuf b = {0};
    (void)c;
    if (opt) /* the host's options, as far as both know them */
        memcpy(&o, opt, opt->struct_size < sizeof o ? opt->struct_size : sizeof o);
    st = render_qwen3(msgs, n, &o, &b, err);
    if (st == LLMRT_OK && b.oom)
        st = llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory rendering the chat template");
    if (st == LLMRT_OK && b.n)
        st = out->write(out->ctx, b.p, b.n);
    free(b.p);
    return st;
}

const llmrt_chat_vtable qwen3_chat_vtable = {
    .struct_size = sizeof(llmrt_chat_vtable),
    .create = qwen3_chat_create,
    .destroy = qwen3_chat_destroy,
    .family = qwen3_chat_family,
    .render = qwen3_chat_render,
    .syntax = qwen3_reply_syntax,
    .parser_create = qwen3_reply_create,
    .parser_push = qwen3_reply_push,
    .parser_finish = qwen3_reply_finish,
    .parser_destroy = qwen3_reply_destroy,
};
