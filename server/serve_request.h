/* serve_request.h — the request bodies of `llmrt serve`'s OpenAI-compatible endpoints
 * (/v1/completions, /v1/chat/completions, /tokenize, /detokenize), parsed and validated
 * into plain C values, plus the HTTP-flavoured error every endpoint answers with.
 *
 * Why here and not in the HTTP layer: a request body is untrusted input; parsing it is a
 * pure function of its bytes, so it is unit-tested and fuzzed without a socket or a model.
 * Everything that needs the model (tokenizing, the chat template, max_model_len, the vocab
 * size) happens later, in the server, on the values parsed here.
 *
 * Field semantics follow OpenAI's API and vLLM's extensions (top_k, min_p,
 * repetition_penalty, ignore_eos, min_tokens, stop_token_ids, chat_template_kwargs,
 * structured_outputs). Unknown fields are ignored, as OpenAI-compatible servers do, and listed
 * in `unknown` so the server can say so (once per name); fields we cannot honour (echo: true,
 * suffix, logit_bias, best_of > n, an EBNF grammar) are 400s that say so, never silently
 * dropped. */
#ifndef LLMRT_SERVER_SERVE_REQUEST_H
#define LLMRT_SERVER_SERVE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/engine.h>
#include <llmrt/plugin.h>

struct json_t; /* jansson */

/* An error as the server reports it: HTTP status and OpenAI's error object
 * {"error": {"message", "type", "param", "code"}}. Empty param/code are sent as null. */
typedef struct llmrt_serve_error {
    int status;        /* 400, 401, 404, 405, 413, 500, 503 */
    char type[40];     /* "invalid_request_error", "authentication_error", "server_error" */
    char code[40];     /* "model_not_found", "invalid_api_key", ... or "" */
    char param[64];    /* the offending field ("max_tokens", "messages[2].role") or "" */
    char message[1024];
} llmrt_serve_error;

/* Fill e and return the llmrt_status that matches the HTTP status (400 → INVALID_ARG,
 * 404 → NOT_FOUND, 413/503 → LIMIT, 500 → INTERNAL, others → STATE). type: NULL picks the
 * usual one for the status. code and param may be NULL. */
llmrt_status llmrt_serve_error_set(llmrt_serve_error *e, int status, const char *type,
                                   const char *code, const char *param, const char *fmt, ...)
    LLMRT_PRINTF(6, 7);

typedef enum llmrt_serve_kind {
    LLMRT_SERVE_COMPLETIONS = 0, /* POST /v1/completions */
    LLMRT_SERVE_CHAT = 1,        /* POST /v1/chat/completions */
    LLMRT_SERVE_TOKENIZE = 2,    /* POST /tokenize   (vLLM's shape) */
    LLMRT_SERVE_DETOKENIZE = 3   /* POST /detokenize (vLLM's shape) */
} llmrt_serve_kind;

/* One prompt of /v1/completions (or /tokenize): text or token ids. */
typedef struct llmrt_serve_prompt {
    char *text;   /* UTF-8 (NUL-terminated, may hold no NUL inside); NULL when given as ids */
    size_t text_len;
    int32_t *ids; /* [n_ids] when given as ids, else NULL */
    int32_t n_ids;
} llmrt_serve_prompt;

/* Structured outputs: what the reply must be (response_format, or vLLM's
 * structured_outputs and its older guided_* fields). */
typedef enum llmrt_serve_format_kind {
    LLMRT_SERVE_FORMAT_TEXT = 0,    /* anything (no grammar) */
    LLMRT_SERVE_FORMAT_JSON_OBJECT, /* any JSON object */
    LLMRT_SERVE_FORMAT_JSON_SCHEMA, /* a document of `schema` */
    LLMRT_SERVE_FORMAT_REGEX,       /* the whole reply matches `regex` */
    LLMRT_SERVE_FORMAT_CHOICE       /* exactly one of `choices` */
} llmrt_serve_format_kind;

typedef struct llmrt_serve_format {
    llmrt_serve_format_kind kind;
    char *schema;         /* JSON_SCHEMA: the schema as JSON text */
    int strict;           /* objects without additionalProperties take no other keys */
    char *regex;          /* REGEX */
    char **choices;       /* CHOICE: [n_choices] */
    int32_t n_choices;
    char param[48];       /* the field it came from, for errors ("response_format") */
} llmrt_serve_format;

/* tool_choice (chat): "none" — no tools are offered to the model (none are rendered into
 * the prompt, none are parsed from the reply); "auto" — the model may call them; "required"
 * and {"type": "function", "function": {"name"}} — it must call one (any, or that one),
 * enforced by a grammar over the model family's tool-call markup.
 * Absent: auto with tools, none without (OpenAI's default). */
typedef enum llmrt_serve_tool_choice_kind {
    LLMRT_SERVE_TOOL_CHOICE_AUTO = 0,
    LLMRT_SERVE_TOOL_CHOICE_NONE = 1,
    LLMRT_SERVE_TOOL_CHOICE_REQUIRED = 2,
    LLMRT_SERVE_TOOL_CHOICE_FUNCTION = 3
} llmrt_serve_tool_choice_kind;

typedef struct llmrt_serve_tool_choice {
    llmrt_serve_tool_choice_kind kind;
    const char *name; /* FUNCTION: the function's name (borrowed from root; one of tools) */
} llmrt_serve_tool_choice;

#define LLMRT_SERVE_MAX_UNKNOWN 16 /* unknown field names kept per request */

typedef struct llmrt_serve_request {
    llmrt_serve_kind kind;
    char *model;                  /* "model", NULL when absent or null */

    /* completions, and tokenize with "prompt": [n_prompts] (OpenAI allows a batch) */
    llmrt_serve_prompt *prompts;
    int32_t n_prompts;

    /* chat, and tokenize with "messages": borrowed from `root`, valid while the request
     * lives; hand them to llmrt_chat_messages_from_json */
    struct json_t *messages;      /* JSON array, non-empty */
    struct json_t *tools;         /* JSON array or NULL */
    int add_generation_prompt;    /* chat template: end with the assistant header (default 1) */
    int enable_thinking;          /* chat_template_kwargs.enable_thinking (default 1) */
    llmrt_serve_tool_choice tool_choice; /* chat, tokenize with messages */
    int parallel_tool_calls;      /* chat: 0 keeps only the first tool call (default 1) */
    int add_special_tokens;       /* tokenize: completions default 1, chat default 0 */
    int return_token_strs;        /* tokenize: also return each token's string */

    /* generation (completions and chat) */
    llmrt_sampling sampling;      /* stop/stop_ids point into this struct's storage;
                                     logprobs: engine value (-1 none, 0..20 alternatives) */
    uint32_t sampling_given;      /* LLMRT_SAMPLING_* bits of the sampling fields the body
                                     gave; the others take the model's defaults
                                     (llmrt_engine_sampling_defaults) */
    int has_max_tokens;           /* 0: not given; the server picks the default */
    int64_t max_tokens_asked;     /* max_tokens as given (sampling.max_tokens is it capped at
                                     INT32_MAX), for the error that states the real limit */
    int32_t n;                    /* choices per prompt, >= 1 */
    int stream;
    int include_usage;            /* stream_options.include_usage */
    int chat_logprobs;            /* chat: "logprobs": true (top_logprobs in sampling.logprobs) */
    int tokens_as_ids;            /* return_tokens_as_token_ids (vLLM): logprob tokens are
                                     spelled "token_id:<id>" */

    /* structured outputs (a forced tool call is tool_choice's, above) */
    llmrt_serve_format format;

    /* detokenize: [n_tokens] */
    int32_t *tokens;
    int32_t n_tokens;

    /* top-level fields this server does not know (borrowed from root), at most
     * LLMRT_SERVE_MAX_UNKNOWN of them */
    const char *unknown[LLMRT_SERVE_MAX_UNKNOWN];
    int n_unknown;

    /* owned storage */
    char **stop_storage;          /* [sampling.n_stop] */
    int32_t *stop_ids_storage;    /* [sampling.n_stop_ids] */
    struct json_t *root;          /* the parsed body */
} llmrt_serve_request;

/* Parse and validate one request body (`len` bytes, need not be NUL-terminated). On failure
 * nothing is allocated and err (status 400) names the field in both message and param. */
llmrt_status llmrt_serve_request_parse(llmrt_serve_kind kind, const char *body, size_t len,
                                       llmrt_serve_request **out, llmrt_serve_error *err);
void llmrt_serve_request_free(llmrt_serve_request *r);

#endif
