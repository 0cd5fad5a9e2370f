/* chat_template.h — render an OpenAI-style messages array into the prompt text a chat
 * model expects, exactly as transformers' apply_chat_template would with the model's
 * tokenizer_config.json chat_template.
 *
 * Why no Jinja: the templates we serve are few and known. The template text is recognised
 * by distinctive substrings (its "family") and rendered by a small hand-written renderer
 * that follows that template's rules line by line. A template we do not recognise is an
 * error that says so, never a silent approximation.
 *
 * Families:
 *   "qwen3"  Qwen3 hybrid-thinking ChatML: <|im_start|>role\n...<|im_end|>\n, tools in the
 *            system turn, <tool_call>/<tool_response>, reasoning kept only for assistant
 *            turns after the last real user query, enable_thinking=false adds an empty
 *            <think>\n\n</think>\n\n after the generation prompt. */
#ifndef LLMRT_CORE_CHAT_TEMPLATE_H
#define LLMRT_CORE_CHAT_TEMPLATE_H

#include <stddef.h>

#include <llmrt/plugin.h>

#include "tokenizer.h"

struct json_t; /* jansson */

typedef struct llmrt_chat_tool_call {
    const char *name;      /* function name */
    const char *arguments; /* JSON text of the arguments (object), or the verbatim string
                              when arguments_is_string */
    int arguments_is_string;
} llmrt_chat_tool_call;

typedef struct llmrt_chat_message {
    const char *role;              /* "system" | "user" | "assistant" | "tool" */
    const char *content;           /* UTF-8; NULL is rendered as "" */
    const char *reasoning_content; /* assistant only; NULL when absent (then <think> blocks
                                      inside content are split out as the template does) */
    const llmrt_chat_tool_call *tool_calls; /* [n_tool_calls], assistant only */
    size_t n_tool_calls;
} llmrt_chat_message;

typedef struct llmrt_chat_options {
    int add_generation_prompt; /* end with "<|im_start|>assistant\n" */
    int enable_thinking;       /* 1 = model may think (default); 0 = empty think block */
    const char *const *tools;  /* [n_tools] each tool's JSON text as `tool | tojson` prints
                                  it (llmrt_chat_messages_parse produces these) */
    size_t n_tools;
} llmrt_chat_options;

typedef struct llmrt_chat_template llmrt_chat_template;

/* Recognise a chat template's family from its text. `where` names the source in messages
 * ("model/tokenizer_config.json"). Unknown templates → LLMRT_ERR_UNSUPPORTED. */
llmrt_status llmrt_chat_template_new(const char *template_text, const char *where,
                                     llmrt_chat_template **out, llmrt_error *err);
/* From a loaded tokenizer's tokenizer_config.json (error when it has no chat_template). */
llmrt_status llmrt_chat_template_from_tokenizer(const llmrt_tokenizer *tok,
                                                llmrt_chat_template **out, llmrt_error *err);
const char *llmrt_chat_template_family(const llmrt_chat_template *t);
void llmrt_chat_template_free(llmrt_chat_template *t);

/* Render messages [n] to text (malloc'd, NUL-terminated, caller frees). A role the
 * template does not know, or a shape it rejects (e.g. no messages), is an error naming the
 * message index. `opt` may be NULL: add_generation_prompt=1, enable_thinking=1, no tools. */
llmrt_status llmrt_chat_render(const llmrt_chat_template *t, const llmrt_chat_message *msgs,
                               size_t n, const llmrt_chat_options *opt, char **text,
                               llmrt_error *err);

/* ---- messages from JSON (CLI files, HTTP request bodies) ---- */

/* Owns everything the message structs point to. */
typedef struct llmrt_chat_messages {
    llmrt_chat_message *msgs; /* [n] */
    size_t n;
    char **tools;             /* [n_tools] tojson text of each tool; pass to options */
    size_t n_tools;
    void *priv;
} llmrt_chat_messages;

/* `messages`: a JSON array of {"role", "content" (string, null, or an array of
 * {"type":"text","text":...} parts, joined with "\n" as vLLM does), "reasoning_content"?,
 * "tool_calls"?:
 * [{"function": {"name", "arguments" (string or object)}}]}. `tools` may be NULL or a JSON
 * array (OpenAI "tools"). Errors name `where` and the message index. */
llmrt_status llmrt_chat_messages_from_json(const struct json_t *messages,
                                           const struct json_t *tools, const char *where,
                                           llmrt_chat_messages **out, llmrt_error *err);
/* JSON text: either a messages array, or an object with "messages" (and optional
 * "tools"). */
llmrt_status llmrt_chat_messages_parse(const char *json, size_t len, const char *where,
                                       llmrt_chat_messages **out, llmrt_error *err);
void llmrt_chat_messages_free(llmrt_chat_messages *m);

#endif
