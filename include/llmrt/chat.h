/* chat.h — a model family's chat format, as its model plugin provides it (since 1.1).
 *
 * Why in the model plugin: the prompt format of a chat (roles, special tokens, where tools
 * and reasoning go) belongs to the model family, like its weights. The host parses OpenAI
 * "messages" JSON into the structs below and asks the model plugin to render them exactly as
 * the checkpoint's chat template (tokenizer_config.json's chat_template, or
 * chat_template.jinja) would with transformers' apply_chat_template. The next family brings
 * its own renderer; the host never learns the format.
 *
 * A model plugin offers this through its vtable's `chat` member (model.h). */
#ifndef LLMRT_CHAT_H
#define LLMRT_CHAT_H

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llmrt_chat llmrt_chat; /* a recognised template, opaque */

/* Frozen (arrays of it are passed). */
typedef struct llmrt_chat_tool_call {
    const char *name;      /* function name */
    const char *arguments; /* JSON text of the arguments (an object), or the verbatim string
                              when arguments_is_string */
    int32_t arguments_is_string;
} llmrt_chat_tool_call;

/* Frozen (arrays of it are passed). */
typedef struct llmrt_chat_message {
    const char *role;              /* "system" | "user" | "assistant" | "tool" */
    const char *content;           /* UTF-8; NULL is rendered as "" */
    const char *reasoning_content; /* assistant only; NULL when absent (a renderer then splits
                                      <think> blocks out of content as its template does) */
    const llmrt_chat_tool_call *tool_calls; /* [n_tool_calls], assistant only */
    uint32_t n_tool_calls;
} llmrt_chat_message;

typedef struct llmrt_chat_options {
    uint32_t struct_size;          /* sizeof(llmrt_chat_options) as the host was built */
    int32_t add_generation_prompt; /* end with the assistant turn's opening */
    int32_t enable_thinking;       /* 1 = the model may think (default); 0 = not */
    const char *const *tools;      /* [n_tools] each tool's JSON text as `tool | tojson` prints
                                      it (compact, keys in the request's order) */
    uint32_t n_tools;
} llmrt_chat_options;

/* How a family's replies are marked up (since 1.2): the host's constrained decoding (a tool
 * call the request requires) and its reply parsing build on these strings. NULL = the family
 * has no such markup. Frozen. */
typedef struct llmrt_chat_syntax {
    const char *tool_call_open;  /* before a call's JSON: "<tool_call>\n" */
    const char *tool_call_close; /* after it: "\n</tool_call>" */
    const char *think_open;      /* reasoning starts: "<think>" */
    const char *think_close;     /* reasoning ends: "</think>" */
    int32_t thinks_by_default;   /* 1: a reply starts inside reasoning unless the prompt closed
                                    it (enable_thinking = false) */
} llmrt_chat_syntax;

typedef struct llmrt_chat_vtable {
    uint32_t struct_size; /* (required) */
    /* (required) Recognise a chat template's text. `where` names its source in messages
     * ("DIR/tokenizer_config.json"). LLMRT_ERR_NOT_FOUND: not a template of this family;
     * LLMRT_ERR_UNSUPPORTED: this family's, in a variant the plugin does not render. */
    llmrt_status (*create)(const llmrt_host *host, const char *template_text, const char *where,
                           llmrt_chat **out, llmrt_error *err);
    /* (required) */
    void (*destroy)(llmrt_chat *c);
    /* (required) The family's name ("qwen3"), for messages and reports. */
    const char *(*family)(const llmrt_chat *c);
    /* (required) Render msgs [n] to text through `out`. A role the template does not know, or
     * a shape it rejects (no messages, a system message not first), is an error naming the
     * message index. Thread-safe for concurrent calls on one llmrt_chat. */
    llmrt_status (*render)(const llmrt_chat *c, const llmrt_chat_message *msgs, uint32_t n,
                           const llmrt_chat_options *opt, const llmrt_sink *out,
                           llmrt_error *err);

    /* (optional, since 1.2) The family's markup of replies (see llmrt_chat_syntax). */
    const llmrt_chat_syntax *(*syntax)(const llmrt_chat *c);
} llmrt_chat_vtable;

#define LLMRT_CHAT_REQUIRED(X) X(create) X(destroy) X(family) X(render)

#ifdef __cplusplus
}
#endif
#endif
