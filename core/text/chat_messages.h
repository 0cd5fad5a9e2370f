/* chat_messages.h — OpenAI-style "messages" (and "tools") JSON, from CLI files and HTTP
 * request bodies, as the llmrt_chat_message structs a model plugin renders (llmrt/chat.h).
 *
 * Why in core: the JSON shape is OpenAI's, the same for every model family; how the messages
 * become a prompt is the model plugin's (core/text/chat.h opens it). */
#ifndef LLMRT_CORE_CHAT_MESSAGES_H
#define LLMRT_CORE_CHAT_MESSAGES_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/chat.h>

struct json_t; /* jansson */

#define LLMRT_CHAT_MAX_MESSAGES 1000000 /* messages, tool calls per message, tools */

/* Owns everything the message structs point to. */
typedef struct llmrt_chat_messages {
    llmrt_chat_message *msgs; /* [n] */
    uint32_t n;
    char **tools;             /* [n_tools] tojson text of each tool; pass to the options */
    uint32_t n_tools;
    void *priv;
} llmrt_chat_messages;

/* `messages`: a JSON array of {"role", "content" (string, null, or an array of
 * {"type":"text","text":...} parts, joined with "\n" as vLLM does), "reasoning_content"?,
 * "tool_calls"?: [{"function": {"name", "arguments" (string or object)}}]}. `tools` may be
 * NULL or a JSON array (OpenAI "tools"). Errors name `where` and the message index. */
llmrt_status llmrt_chat_messages_from_json(const struct json_t *messages,
                                           const struct json_t *tools, const char *where,
                                           llmrt_chat_messages **out, llmrt_error *err);
/* JSON text: either a messages array, or an object with "messages" (and optional "tools"). */
llmrt_status llmrt_chat_messages_parse(const char *json, size_t len, const char *where,
                                       llmrt_chat_messages **out, llmrt_error *err);
void llmrt_chat_messages_free(llmrt_chat_messages *m);

#endif
