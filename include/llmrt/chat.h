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

/* ---- reply parsing (since 1.2) ----
 * A family's replies carry markup (Qwen3: <think>...</think> reasoning, <tool_call>{...}
 * </tool_call> calls). The host streams the reply's text into a parser of the family as the
 * engine releases it; the parser says what the text is through the sink: content, reasoning,
 * and tool calls (a begin with the function's name, the arguments' JSON text in fragments, an
 * end). Concatenating what the sink got gives the same content, reasoning and calls however
 * the text was split into pushes. Text that may begin a tag is held back until the parser
 * knows (as stop strings are); a call that does not parse stays content, never an error. */

/* Where a parser reports (since 1.2). Strings are valid during the call only. A callback may
 * fail only for lack of memory (LLMRT_ERR_NOMEM), which the parser returns. */
typedef struct llmrt_reply_sink {
    void *ctx;
    llmrt_status (*content)(void *ctx, const char *s, size_t n);
    llmrt_status (*reasoning)(void *ctx, const char *s, size_t n);
    /* Call number `index` (0, 1, ... in reply order) to the function `name` (NUL-terminated,
     * non-empty) begins. */
    llmrt_status (*tool_call_begin)(void *ctx, uint32_t index, const char *name);
    /* More of call `index`'s arguments: the fragments concatenate to a JSON object's text. */
    llmrt_status (*tool_call_args)(void *ctx, uint32_t index, const char *s, size_t n);
    llmrt_status (*tool_call_end)(void *ctx, uint32_t index);
} llmrt_reply_sink;

typedef struct llmrt_reply_options {
    uint32_t struct_size;        /* sizeof(llmrt_reply_options) as the host was built */
    int32_t reasoning;           /* 1: reasoning markup becomes reasoning; 0: it stays content */
    int32_t starts_in_reasoning; /* 1: the prompt opened reasoning (it ends inside an open
                                    think block), so the reply starts inside it */
    int32_t tool_calls;          /* 1: tool-call markup becomes calls; 0: it stays content (the
                                    request offered no tools, or tool_choice "none") */
} llmrt_reply_options;

typedef struct llmrt_reply_parser llmrt_reply_parser; /* one reply's parse state, opaque */

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

    /* ---- a streaming parser of replies (optional, since 1.2: all four or none) ---- */
    /* A parser for one reply. opt as the host knows it (struct_size). */
    llmrt_status (*parser_create)(const llmrt_chat *c, const llmrt_reply_options *opt,
                                  llmrt_reply_parser **out, llmrt_error *err);
    /* The next n bytes of the reply (UTF-8, any split). What is certain goes to `sink` now;
     * text that may begin or end a tag waits for the next push or finish. */
    llmrt_status (*parser_push)(llmrt_reply_parser *p, const char *text, size_t n,
                                const llmrt_reply_sink *sink, llmrt_error *err);
    /* The reply is over: everything held back goes to `sink` (an unclosed call that parses is
     * a call, else content). Once per parser; push is not called after it. */
    llmrt_status (*parser_finish)(llmrt_reply_parser *p, const llmrt_reply_sink *sink,
                                  llmrt_error *err);
    void (*parser_destroy)(llmrt_reply_parser *p);
} llmrt_chat_vtable;

#define LLMRT_CHAT_REQUIRED(X) X(create) X(destroy) X(family) X(render)

#ifdef __cplusplus
}
#endif
#endif
