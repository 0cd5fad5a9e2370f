/* serve_response.h — the JSON that `llmrt serve` answers with, shaped exactly like
 * OpenAI's (and vLLM's) so the official clients parse it: error objects, usage, choices
 * of completions and chat completions (whole and as stream chunks), both logprobs styles,
 * and the server-sent-event framing of stream chunks.
 *
 * Why a module: the shapes are the compatibility contract with every client; keeping them
 * in one place, separate from sockets and threads, lets unit tests check them field by
 * field. */
#ifndef LLMRT_SERVER_SERVE_RESPONSE_H
#define LLMRT_SERVER_SERVE_RESPONSE_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/engine.h>

#include "serve_request.h"
#include "tokenizer.h"

struct json_t; /* jansson */

/* {"error": {"message", "type", "param", "code"}} (empty param/code → null), as compact JSON
 * text; malloc'd, NUL-terminated; *len may be NULL. NULL only when out of memory. */
char *llmrt_serve_error_text(const llmrt_serve_error *e, size_t *len);

/* A JSON string from bytes that should be UTF-8: each invalid sequence becomes U+FFFD, so
 * a half-decoded token can never make the response unserialisable. NULL only on OOM. */
struct json_t *llmrt_serve_json_string(const char *s, size_t len);

/* {"prompt_tokens", "completion_tokens", "total_tokens",
 *  "prompt_tokens_details": {"cached_tokens"}} (cached: prompt tokens found in the prefix
 * cache, as OpenAI reports them) */
struct json_t *llmrt_serve_usage(int64_t prompt_tokens, int64_t completion_tokens,
                                 int64_t cached_tokens);

/* {"id", "object", "created", "model"}: the head of every completion, chunk and list entry.
 * object: "text_completion", "chat.completion", "chat.completion.chunk". */
struct json_t *llmrt_serve_object(const char *id, const char *object, int64_t created,
                                  const char *model);

/* The string a client sees for one token: its text decoded alone (lossy UTF-8), or
 * "token_id:<id>" without a tokenizer (vLLM's spelling). malloc'd. */
char *llmrt_serve_token_string(const llmrt_tokenizer *tok, int32_t id);

/* One generated token's log-probabilities, as the engine reports them. */
typedef struct llmrt_serve_token_lp {
    int32_t token;
    float logprob;
    int32_t n_top;
    const int32_t *top_ids;  /* [n_top] */
    const float *top_lps;    /* [n_top] */
} llmrt_serve_token_lp;

/* Completions style: {"tokens": [], "token_logprobs": [], "top_logprobs": [],
 * "text_offset": []}; add appends one token (top_logprobs entry: {token string: logprob}
 * for the alternatives and the sampled token). Return 0, or -1 when out of memory. */
struct json_t *llmrt_serve_lp_completion_new(void);
int llmrt_serve_lp_completion_add(struct json_t *lp, const llmrt_tokenizer *tok,
                                  const llmrt_serve_token_lp *t, int64_t text_offset);
/* Chat style: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
 * "logprob", "bytes"}]}]}. */
struct json_t *llmrt_serve_lp_chat_new(void);
int llmrt_serve_lp_chat_add(struct json_t *lp, const llmrt_tokenizer *tok,
                            const llmrt_serve_token_lp *t);

/* A tool call of a chat reply.
 *   whole: {"id", "type": "function", "function": {"name", "arguments"}}
 *   chunk: {"index", "id", "type": "function", "function": {"name", "arguments"}} for its
 *          first delta (id and name set), {"index", "function": {"arguments"}} after it. */
typedef struct llmrt_serve_tool_call {
    int32_t index;         /* chunk: the call's index in the reply */
    const char *id;        /* "call_..."; NULL in a chunk after the first */
    const char *name;      /* NULL in a chunk after the first */
    const char *arguments; /* JSON text (a fragment of it in a chunk); NULL = "" */
    size_t arguments_len;
} llmrt_serve_tool_call;

/* One choice.
 *   completions, whole or chunk: {"index", "text", "logprobs", "finish_reason", "stop_reason"}
 *   chat, whole:  {"index", "message": {"role": "assistant", "content", "reasoning_content"?,
 *                  "tool_calls"?}, "logprobs", "finish_reason", "stop_reason"}
 *   chat, chunk:  {"index", "delta": {"role"?, "content"?, "reasoning_content"?,
 *                  "tool_calls"?}, "logprobs", "finish_reason"}
 * text may be NULL (chat chunk: no "content"; whole: content null, as for a reply that is
 * only tool calls); with_role adds "role": "assistant" to a chat delta. reasoning: NULL = no
 * reasoning_content. logprobs is stolen (NULL → null). finish NONE → null, STOP with
 * tool_calls_finish → "tool_calls"; stop_reason: the stop string, else stop_token when >= 0,
 * else null. */
typedef struct llmrt_serve_choice_desc {
    llmrt_serve_kind kind;   /* COMPLETIONS or CHAT */
    int chunk;               /* 1: a stream chunk's choice */
    int32_t index;
    const char *text;
    size_t text_len;
    int with_role;
    struct json_t *logprobs;
    llmrt_finish_reason finish;
    const char *stop_reason;
    int32_t stop_token;
    /* chat */
    const char *reasoning;
    size_t reasoning_len;
    const llmrt_serve_tool_call *tool_calls; /* [n_tool_calls] */
    int32_t n_tool_calls;
    int tool_calls_finish;   /* the reply called tools: finish STOP reads "tool_calls" */
} llmrt_serve_choice_desc;
struct json_t *llmrt_serve_choice(const llmrt_serve_choice_desc *d);

/* OpenAI's spelling of a finish reason: "stop", "length"; ours otherwise ("cancelled",
 * "error"). NULL for NONE. */
const char *llmrt_serve_finish_str(llmrt_finish_reason r);

/* "data: <compact JSON>\n\n" (malloc'd, *len its length). Steals nothing. NULL on OOM. */
char *llmrt_serve_sse_event(const struct json_t *obj, size_t *len);

#endif
