/* engine.h — the inference engine: requests in, tokens out. The one generation loop that
 * `llmrt generate`, `chat`, `bench` and `serve` all drive.
 *
 * Why: continuous batching, the paged KV cache, sampling, stop handling and per-step timing
 * must behave identically in every front end, so they live behind this API and no front end
 * has a loop of its own.
 *
 * Threading model:
 *  - One thread (the "stepping thread") calls llmrt_engine_step / llmrt_engine_run.
 *    Token and step callbacks run on that thread, with no engine lock held, so they may
 *    call submit / cancel / stats.
 *  - llmrt_engine_submit, llmrt_engine_cancel, llmrt_engine_stats, llmrt_engine_has_work and
 *    llmrt_engine_wait_work are thread-safe and may be called from any thread at any time.
 *  - Everything else (create, destroy, accessors) belongs to the owning thread.
 *
 * Lifecycle of a request: submit → (queued) → running → finished. Its callback sees zero or
 * more token events with finish == LLMRT_FINISH_NONE and then exactly one final event with
 * finish != LLMRT_FINISH_NONE (also for cancel and engine errors). After the final event the
 * engine never mentions the id again and holds no pointer into the request. */
#ifndef LLMRT_ENGINE_H
#define LLMRT_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "chat.h"
#include "memory.h"
#include "model.h"
#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llmrt_engine llmrt_engine;
typedef struct llmrt_runtime llmrt_runtime;     /* a config and the plugins it finds */
typedef struct llmrt_tokenizer llmrt_tokenizer; /* a model folder's tokenizer (internal API) */

/* The library's version ("0.1.0"). */
const char *llmrt_version(void);

/* ---- the runtime: what every engine is created from ----
 * runtime.ini (ini_path; NULL: built-in defaults) with `sets` ("section.key=value", applied
 * last) and the environment (LLMRT_<SECTION>_<KEY>), and every plugin found on the search
 * path (runtime.plugin_dir, LLMRT_PLUGIN_PATH, <exe>/../lib/llmrt/plugins, the install
 * folder). Errors name the file:line or key. */
llmrt_status llmrt_runtime_open(const char *ini_path, const char *const *sets, int n_sets,
                                llmrt_runtime **out, llmrt_error *err);
void llmrt_runtime_close(llmrt_runtime *rt);

typedef enum llmrt_finish_reason {
    LLMRT_FINISH_NONE = 0,      /* not finished: more tokens follow */
    LLMRT_FINISH_STOP = 1,      /* an eos / stop token id or a stop string */
    LLMRT_FINISH_LENGTH = 2,    /* max_tokens reached, or the sequence reached max_model_len */
    LLMRT_FINISH_CANCELLED = 3, /* llmrt_engine_cancel, or engine destroyed while running */
    LLMRT_FINISH_ERROR = 4      /* the step failed (device error ...); event.error says why */
} llmrt_finish_reason;

/* "stop", "length", "cancelled", "error", "" (none): OpenAI's spelling where it has one. */
const char *llmrt_finish_reason_str(llmrt_finish_reason r);

#define LLMRT_MAX_TOP_LOGPROBS 20 /* most top logprobs per token (OpenAI allows 20) */

/* A grammar a reply must follow (structured outputs), compiled by the engine
 * (llmrt_engine_grammar_*, below) and handed to one request in llmrt_sampling.grammar. */
typedef struct llmrt_grammar llmrt_grammar;

/* Sampling parameters of one request (vLLM semantics). llmrt_sampling_init sets the defaults
 * noted on each field; the engine copies everything at submit. */
typedef struct llmrt_sampling {
    float temperature;        /* 0 = greedy (default 0) */
    int32_t top_k;            /* keep the k most likely; 0 or -1 = off (default 0) */
    float top_p;              /* nucleus mass in (0, 1]; 1 = off (default 1) */
    float min_p;              /* drop tokens with p < min_p * p_max, [0, 1]; 0 = off */
    float repetition_penalty; /* > 0; 1 = off. Logits of prompt+output tokens: /p if >0, *p if <0 */
    float presence_penalty;   /* [-2, 2]; subtracted once from each token seen in the output */
    float frequency_penalty;  /* [-2, 2]; subtracted per occurrence in the output */
    int32_t has_seed;         /* 0: the engine picks a seed (different per request) */
    uint64_t seed;            /* same seed + same prompt → same ids, whatever the batch */
    int32_t max_tokens;       /* >= 1: most generated tokens (default 16) */
    int32_t min_tokens;       /* stop ids/eos/stop strings ignored before this many (default 0) */
    int32_t ignore_eos;       /* 1: the model's eos ids do not stop (stop_ids still do) */
    int32_t logprobs;         /* -1 = none (default); 0 = the sampled token's logprob;
                                 1..LLMRT_MAX_TOP_LOGPROBS = plus that many top alternatives */
    const int32_t *stop_ids;  /* [n_stop_ids] extra stop token ids (copied at submit) */
    int32_t n_stop_ids;
    const char *const *stop;  /* [n_stop] stop strings, matched on the detokenized output and
                                 never included in it (copied at submit; needs a tokenizer) */
    int32_t n_stop;
    /* (appended) Structured outputs: the reply follows this grammar — only tokens whose bytes
     * continue it are sampled, eos and stop ids only where the reply may end, and the request
     * ends (FINISH_STOP) when the reply is complete and nothing may follow. It also ends
     * within max_tokens when it can: near the end of the budget only tokens that leave room
     * to finish are taken. NULL = unconstrained (default). Submit takes the handle (the
     * engine frees it when the request ends, or at once when submit fails); one handle
     * serves one request. */
    llmrt_grammar *grammar;
} llmrt_sampling;

void llmrt_sampling_init(llmrt_sampling *s);

/* Fields of llmrt_sampling a model folder may give defaults for (generation_config.json). */
enum {
    LLMRT_SAMPLING_TEMPERATURE = 1u << 0,
    LLMRT_SAMPLING_TOP_P = 1u << 1,
    LLMRT_SAMPLING_TOP_K = 1u << 2,
    LLMRT_SAMPLING_MIN_P = 1u << 3,
    LLMRT_SAMPLING_REPETITION_PENALTY = 1u << 4
};

/* One event for one request, delivered on the stepping thread. Pointers are valid only
 * during the callback. */
typedef struct llmrt_token_event {
    uint64_t id;                /* the request id from submit */
    void *user;                 /* the request's user pointer */
    int32_t token;              /* the new token id; -1 when the event carries no token
                                   (cancelled, error, or text released at the end) */
    int32_t index;              /* 0-based index of `token` in the completion */
    /* Text this event releases: UTF-8, whole characters only, stop strings withheld (text
     * that could still begin a stop string is held back until it cannot). Concatenating
     * every event's text gives the completion. Empty (len 0, never NULL) without a tokenizer. */
    const char *text;
    size_t text_len;
    /* Log-probabilities (log-softmax of the model's raw logits), when the request asked. */
    float logprob;              /* of `token`; 0 when not asked */
    int32_t n_top;              /* number of alternatives below (0 when not asked) */
    const int32_t *top_ids;     /* [n_top] most likely first */
    const float *top_logprobs;  /* [n_top] */
    llmrt_finish_reason finish; /* NONE, or why the request ended with this event */
    const char *stop_reason;    /* final event: the stop string matched, or NULL */
    int32_t stop_token;         /* final event: the stop token id that ended it, or -1 */
    const char *error;          /* FINISH_ERROR: the message; NULL otherwise */
    int32_t prompt_tokens;      /* prompt length */
    int32_t completion_tokens;  /* tokens generated so far, including this one */
    double time_s;              /* monotonic clock (CLOCK_MONOTONIC seconds) when the token
                                   reached the host */
    int32_t cached_tokens;      /* prompt tokens found in the prefix cache (not computed) when
                                   the request was admitted; 0 with cache.prefix_caching off */
    double time_scheduled_s;    /* the same clock when the request's first prompt tokens went
                                   into a step (queue time ends there); 0 while it waited */
} llmrt_token_event;

typedef void (*llmrt_token_cb)(void *user, const llmrt_token_event *ev);

/* A generation request. Give the prompt as ids, or as text (tokenized with the engine's
 * tokenizer, special tokens such as <|im_start|> recognised, nothing added). */
typedef struct llmrt_request {
    const int32_t *prompt_ids; /* [n_prompt] */
    int32_t n_prompt;
    const char *prompt_text;   /* used when prompt_ids is NULL */
    llmrt_sampling sampling;
    llmrt_token_cb on_token;   /* may be NULL (fire and forget) */
    void *user;
} llmrt_request;

void llmrt_request_init(llmrt_request *r); /* zeroes it and calls llmrt_sampling_init */

/* Timing and size of one step, through the optional step callback. Times in milliseconds.
 * Device times come from backend events recorded on the stream around the step's device
 * work: [h2d][forward + sampling][d2h]. */
typedef struct llmrt_step_record {
    uint64_t step;              /* 0, 1, ... */
    int32_t n_seqs;             /* sequences in the step */
    int32_t n_tokens;           /* token rows in the forward */
    int32_t n_prefill_tokens;   /* of which prompt (or recomputed) tokens */
    int32_t n_decode_seqs;      /* sequences decoding one token */
    int32_t graph;              /* 1: replayed from a captured graph */
    int32_t async;              /* 1: launched before the previous step's tokens were read */
    double t_start;             /* monotonic seconds when host preparation began */
    double host_prepare_ms;     /* scheduling + filling step buffers on the host */
    double h2d_ms;              /* input copies on the device stream (0 for zero-copy) */
    double compute_ms;          /* forward + sampling on the device stream */
    double d2h_ms;              /* output copies on the device stream (0 for zero-copy) */
    double gpu_busy_ms;         /* h2d + compute + d2h: the stream's time on this step */
    double wall_ms;             /* this step's period, until its outputs are on the host:
                                   from the previous step's outputs being on the host when
                                   work was waiting since then; when the engine had run out
                                   of work, from the arrival of the next request (a pause
                                   without requests is nobody's idle time) */
    double idle_ms;             /* wall − busy (>= 0): device time lost to the host */
    uint64_t h2d_bytes;         /* bytes of step inputs moved host → device */
    uint64_t d2h_bytes;         /* bytes of step outputs moved device → host */
    /* (appended) structured outputs */
    int32_t n_masked;           /* rows sampled under a grammar's token mask */
    double mask_ms;             /* host time computing their masks (while the forward runs on
                                   an asynchronous backend) */
    /* (appended) CPU weight offload (memory.cpu_offload_gb) */
    uint64_t offload_bytes;     /* of h2d_bytes, the offloaded layers' weights: copied into
                                   staging slots, or read in place over the bus (uva) */
} llmrt_step_record;

typedef void (*llmrt_step_cb)(void *user, const llmrt_step_record *rec);

typedef struct llmrt_engine_options {
    int32_t show_progress;  /* 1: load progress bar on stderr (default 0) */
    int32_t no_tokenizer;   /* 1: ids only, even when the model folder has tokenizer.json */
    int32_t quiet;          /* 1: no load / capacity lines on the log at INFO, no progress */
    llmrt_step_cb on_step;  /* optional */
    void *step_user;
} llmrt_engine_options;

void llmrt_engine_options_init(llmrt_engine_options *o);

/* Load the model in rt's config (model.path) on the configured backend and memory plugin,
 * size and allocate the KV cache, allocate the step buffers. rt must outlive the engine. */
llmrt_status llmrt_engine_create(llmrt_runtime *rt, const llmrt_engine_options *opts,
                                 llmrt_engine **out, llmrt_error *err);
/* Requests still queued or running get their final event (CANCELLED) first. */
void llmrt_engine_destroy(llmrt_engine *e);

/* Queue a request; *id identifies it in events and cancel. Thread-safe. Fails without
 * queueing when the prompt is empty or leaves no room for a generated token within
 * max_model_len (at most max_model_len - 1 tokens: LLMRT_ERR_LIMIT, the message gives both
 * numbers), holds an id outside the vocabulary, a sampling value is out of range, a stop
 * string is empty or not UTF-8, stop strings or a text prompt come without a tokenizer, or
 * the engine has failed (LLMRT_ERR_STATE). max_tokens beyond max_model_len is not an error:
 * the request ends with FINISH_LENGTH there. */
llmrt_status llmrt_engine_submit(llmrt_engine *e, const llmrt_request *req, uint64_t *id,
                                 llmrt_error *err);
/* Cancel a queued or running request; its KV blocks are freed before the next step and its
 * final event (CANCELLED) is delivered by the next step. Thread-safe. LLMRT_ERR_NOT_FOUND
 * when the id is unknown or already finished. */
llmrt_status llmrt_engine_cancel(llmrt_engine *e, uint64_t id);

/* One scheduler step: admit queued requests, apply cancellations, run one forward over the
 * batch, sample, deliver events. Returns LLMRT_OK with nothing done when there is no work.
 * On a device failure every request finishes with FINISH_ERROR, the engine is marked failed
 * and the error is returned. Stepping thread only. */
llmrt_status llmrt_engine_step(llmrt_engine *e, llmrt_error *err);
/* Step until every submitted request has finished (generate, bench). */
llmrt_status llmrt_engine_run(llmrt_engine *e, llmrt_error *err);
/* 1 when a step would do something (requests queued/running, cancellations pending).
 * Thread-safe. */
int llmrt_engine_has_work(llmrt_engine *e);
/* Block until there is work or timeout_ms passes (< 0: no timeout). Returns has_work.
 * Thread-safe; for a server's stepping thread. llmrt_engine_wake interrupts a waiter. */
int llmrt_engine_wait_work(llmrt_engine *e, int32_t timeout_ms);
void llmrt_engine_wake(llmrt_engine *e);

/* Install or remove (NULL) the step callback. Stepping thread only. */
void llmrt_engine_set_step_callback(llmrt_engine *e, llmrt_step_cb cb, void *user);

typedef struct llmrt_engine_stats {
    /* KV cache (fixed at create) */
    int64_t kv_capacity_tokens;  /* n_blocks * block_size */
    int32_t kv_blocks_total;
    int32_t kv_block_size;
    uint64_t kv_bytes;           /* K and V of every layer */
    char kv_dtype[8];            /* "F32", "F16", "BF16" */
    char kv_capacity_source[64]; /* "cache.kv_tokens", "gpu_memory_utilization 0.80", ... */
    int32_t max_model_len;
    /* KV cache and queues, now */
    int32_t kv_blocks_used;      /* held by sequences */
    int32_t kv_blocks_free;      /* free for sequences: includes cached blocks nobody holds */
    int32_t running;             /* sequences holding KV blocks */
    int32_t waiting;             /* queued, including preempted sequences */
    /* totals since create */
    uint64_t requests_submitted, requests_finished, requests_cancelled, requests_failed;
    uint64_t preemptions;
    uint64_t prompt_tokens;      /* prompt tokens of submitted requests */
    uint64_t prefill_tokens;     /* token rows computed as prefill (prompt + recomputation) */
    uint64_t generated_tokens;
    uint64_t steps;
    double busy_s;               /* wall time of all steps */
    int32_t failed;              /* 1 after a step failure: the engine takes no more requests */
    /* configuration in use */
    int32_t max_num_seqs, max_num_batched_tokens;
    int32_t async_scheduling;    /* effective (off when the backend cannot use it) */
    int32_t cuda_graphs;         /* effective */
    char backend[32];            /* "cpu", "cuda" */
    char device[128];            /* llmrt_device_info.name */
    char memory_plugin[64];      /* memory.plugin as requested */
    char memory_path[64];        /* the host-memory path actually used, after any fallback */
    llmrt_mem_stats mem;         /* from the memory plugin */
    char model_arch[64];
    char model_path[512];
    char quant[32];              /* "awq", or "none" */
    uint64_t weight_bytes;
    uint64_t device_mem_total;   /* bytes; 0 when unknown */
    uint64_t device_mem_free;    /* bytes, measured after the KV cache was allocated */
    double load_time_s;          /* create: model + cache + buffers */
    /* prefix caching (cache.prefix_caching); counts in tokens as vLLM's: each admission of a
     * sequence (a preempted one again when readmitted) queries its known tokens */
    int32_t prefix_caching;          /* 1: on */
    int32_t prefix_cache_blocks;     /* KV blocks cached now (held or reclaimable) */
    uint64_t prefix_cache_queries;   /* tokens looked up, since create */
    uint64_t prefix_cache_hits;      /* of them, found cached (not computed) */
    uint64_t prefix_cache_evictions; /* cached blocks reclaimed for other tokens */
    /* device memory this engine took: weights, KV cache, buffers (device free memory just
     * before its weights loaded minus after create), unlike device_mem_total − free, which
     * is the whole device's (every engine of the process, other processes); 0: unknown */
    uint64_t device_mem_engine;
} llmrt_engine_stats;

/* A consistent snapshot. Thread-safe. */
void llmrt_engine_stats_get(llmrt_engine *e, llmrt_engine_stats *out);

/* ---- accessors (the owning thread; values fixed after create) ---- */
void llmrt_engine_model_info(llmrt_engine *e, llmrt_model_info *out);
/* The model's eos ids (config.json + generation_config.json). */
int32_t llmrt_engine_eos_ids(llmrt_engine *e, const int32_t **ids);
int32_t llmrt_engine_max_model_len(llmrt_engine *e);
/* The model's own sampling defaults, as vLLM applies them: each of temperature, top_p, top_k,
 * min_p and repetition_penalty that generation_config.json sets and `given` (LLMRT_SAMPLING_*
 * bits: what the caller was told explicitly) does not name is set in *s from the file. An
 * explicit value always wins, so a given temperature 0 stays greedy. Returns the bits it set.
 * Thread-safe. */
uint32_t llmrt_engine_sampling_defaults(llmrt_engine *e, llmrt_sampling *s, uint32_t given);
/* The defaults as text for messages ("temperature 0.6, top_p 0.95, top_k 20"), "" when the
 * model folder sets none. */
const char *llmrt_engine_sampling_defaults_text(llmrt_engine *e);
/* The tokenizer of the model folder, or NULL when it has none (ids only). The engine only
 * reads it (encoding text prompts in submit, decoding on the stepping thread), so callers
 * may use it from any thread as far as core/tokenizer.h allows concurrent reads. */
llmrt_tokenizer *llmrt_engine_tokenizer(llmrt_engine *e);

/* ---- text (a model folder with tokenizer.json) ---- */
enum {
    /* Special tokens written in the text (<|im_end|>) stay plain text instead of becoming
     * their ids (for untrusted content). */
    LLMRT_TEXT_SPECIAL_AS_TEXT = 1u << 0
};
/* Text → ids with the model's tokenizer (malloc'd *ids, free() it). LLMRT_ERR_STATE when the
 * model folder has no tokenizer; invalid UTF-8 is an error naming the byte offset.
 * Thread-safe. */
llmrt_status llmrt_engine_tokenize(llmrt_engine *e, const char *text, size_t len, uint32_t flags,
                                   int32_t **ids, size_t *n_ids, llmrt_error *err);
/* Ids → text (malloc'd, NUL-terminated, free() it; *len may be NULL); special tokens are
 * skipped when skip_special. Thread-safe. */
llmrt_status llmrt_engine_detokenize(llmrt_engine *e, const int32_t *ids, size_t n_ids,
                                     int skip_special, char **text, size_t *len,
                                     llmrt_error *err);

/* ---- structured outputs: grammars for llmrt_sampling.grammar ----
 * Each call compiles (or finds in the engine's cache of recent grammars) an automaton over
 * bytes and returns a fresh handle for one request. Errors: LLMRT_ERR_UNSUPPORTED for a
 * keyword or construct outside the subset (the message names it and where it is),
 * LLMRT_ERR_INVALID_ARG for a malformed schema / pattern, LLMRT_ERR_LIMIT for one too large
 * to compile, LLMRT_ERR_STATE when the model folder has no tokenizer. Thread-safe. Free a
 * handle that is never submitted with llmrt_grammar_free, before the engine is destroyed. */
typedef struct llmrt_grammar_options {
    uint32_t struct_size;   /* sizeof(llmrt_grammar_options) */
    const char *prefix;     /* literal text before the document (a tool-call opening tag) */
    const char *suffix;     /* after it */
    const char *separator;  /* between documents when more than one may come */
    int32_t min_count;      /* documents: at least (default 1) ... */
    int32_t max_count;      /* ... at most (default: min_count) */
    const char *lead_open;  /* an optional block before the first document: lead_open, text */
    const char *lead_close; /*   without lead_close, lead_close, a little whitespace (a
                                 reasoning section such as <think> ... </think>) */
    int32_t strict;         /* JSON schema: objects without additionalProperties take no
                               other keys (default 0: they may) */
} llmrt_grammar_options;

void llmrt_grammar_options_init(llmrt_grammar_options *o);

/* A JSON schema (JSON text, `len` bytes). The subset: type (object, array, string, integer,
 * number, boolean, null, or a list), properties, required, additionalProperties, items,
 * minItems, maxItems, enum, const, anyOf, allOf of one, $ref to "#..." (recursion allowed),
 * minLength, maxLength, pattern, format (date, time, date-time, uuid, email, ipv4),
 * minimum, maximum, exclusiveMinimum, exclusiveMaximum (whole bounds for numbers); title,
 * description, default and other annotations are ignored. "{"type": "object"}" is any JSON
 * object. Properties are written in the schema's order. opt may be NULL. */
llmrt_status llmrt_engine_grammar_json_schema(llmrt_engine *e, const char *schema, size_t len,
                                              const llmrt_grammar_options *opt,
                                              llmrt_grammar **out, llmrt_error *err);
/* The whole reply matches a regular expression (Python / PCRE syntax; the regular subset:
 * no back-references, look-around or \b). */
llmrt_status llmrt_engine_grammar_regex(llmrt_engine *e, const char *pattern, size_t len,
                                        const llmrt_grammar_options *opt, llmrt_grammar **out,
                                        llmrt_error *err);
/* The reply is exactly one of choices [n] (UTF-8, NUL-terminated). */
llmrt_status llmrt_engine_grammar_choice(llmrt_engine *e, const char *const *choices, int32_t n,
                                         const llmrt_grammar_options *opt, llmrt_grammar **out,
                                         llmrt_error *err);
void llmrt_grammar_free(llmrt_grammar *g);

/* ---- chat: the model plugin's chat format over the folder's chat template ---- */
/* Render messages [n] into the prompt text the model expects (malloc'd, NUL-terminated; the
 * caller frees it with free()). opt may be NULL (a generation prompt, thinking allowed, no
 * tools). Fails with LLMRT_ERR_UNSUPPORTED or NOT_FOUND when the model has no chat format
 * (the message says why), INVALID_ARG for messages the format rejects. Thread-safe. */
llmrt_status llmrt_engine_chat_render(llmrt_engine *e, const llmrt_chat_message *msgs,
                                      uint32_t n, const llmrt_chat_options *opt, char **text,
                                      llmrt_error *err);
/* Render messages and tokenize the prompt (malloc'd *ids, free() it): what to submit as
 * prompt_ids. Special-token text that the messages carry (<|im_end|> in a user's content)
 * stays plain text; only the template's own special tokens become special ids, so a message
 * cannot forge chat structure. Flags: LLMRT_CHAT_TRUST_CONTENT lets special-token text in
 * contents become special tokens (trusted clients only); LLMRT_CHAT_BOS adds the
 * tokenizer's post-processor tokens (e.g. a BOS). Thread-safe. */
enum { LLMRT_CHAT_TRUST_CONTENT = 1u << 0, LLMRT_CHAT_BOS = 1u << 1 };
llmrt_status llmrt_engine_chat_tokenize(llmrt_engine *e, const llmrt_chat_message *msgs,
                                        uint32_t n, const llmrt_chat_options *opt,
                                        uint32_t flags, int32_t **ids, size_t *n_ids,
                                        llmrt_error *err);
/* NULL when chat works; else why it does not ("... has no tokenizer.json"). */
const char *llmrt_engine_chat_unavailable(llmrt_engine *e);
/* The chat format's reply markup (tool-call and reasoning tags, llmrt/chat.h), or NULL when
 * the model has no chat format or its family declares none. Valid while the engine lives. */
const llmrt_chat_syntax *llmrt_engine_chat_syntax(llmrt_engine *e);

/* ---- replies: the model family's markup of replies (chat.h since 1.2) ---- */
/* The family's reply markup (tool-call and reasoning tags), or NULL when it has none. */
const llmrt_chat_syntax *llmrt_engine_chat_syntax(llmrt_engine *e);
/* 1 when the rendered `prompt` ends inside an open think block (its last think_open comes
 * after its last think_close): the reply starts inside reasoning (llmrt_reply_options'
 * starts_in_reasoning). 0 for a family without reasoning markup. */
int llmrt_engine_chat_prompt_in_reasoning(llmrt_engine *e, const char *prompt);
/* A streaming parser for one reply: push the reply's text as the engine releases it, then
 * finish; the sink hears content, reasoning and tool calls (chat.h's llmrt_reply_sink). When
 * the family has no parser every byte is content. Thread-safe; a parser belongs to one
 * thread. Free it with llmrt_chat_parser_free. */
typedef struct llmrt_chat_parser llmrt_chat_parser;
llmrt_status llmrt_engine_chat_parser_new(llmrt_engine *e, const llmrt_reply_options *opt,
                                          llmrt_chat_parser **out, llmrt_error *err);
llmrt_status llmrt_chat_parser_push(llmrt_chat_parser *p, const char *text, size_t n,
                                    const llmrt_reply_sink *sink, llmrt_error *err);
llmrt_status llmrt_chat_parser_finish(llmrt_chat_parser *p, const llmrt_reply_sink *sink,
                                      llmrt_error *err);
void llmrt_chat_parser_free(llmrt_chat_parser *p);

#ifdef __cplusplus
}
#endif
#endif
