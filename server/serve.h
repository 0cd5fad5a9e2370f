/* serve.h — the server library's parts and the state they share (server.h is its API).
 *
 *   server.c          the life cycle: settings, listen, load, ready, drain, abort, close
 *   serve_http.c      libmicrohttpd: listening, routing, auth, body limit, replies
 *   serve_generate.c  /v1/completions and /v1/chat/completions: engine requests, token
 *                     events, whole responses and SSE streams, cancel on disconnect
 *   serve_structured.c  structured outputs: the grammar of each choice (response_format,
 *                     structured_outputs, tool_choice required / a named function)
 *   serve_tokenize.c  /tokenize and /detokenize
 *   serve_stepper.c   the stepping thread (continuous batching) and the periodic log line
 *   serve_request.c, serve_response.c, serve_metrics.c
 *                     request parsing, response shapes and metrics (no sockets, no model)
 *
 * Threads: libmicrohttpd runs one thread per connection (they parse, tokenize, submit, and
 * block waiting for their tokens); a loader thread creates the engine; one stepping thread
 * runs it; the caller's thread drives the life cycle. The engine's token callback (stepping
 * thread) only copies each event into its HTTP request's queue and signals; all formatting
 * happens on connection threads, so the step loop never waits on a client. Times are
 * llmrt_now_s() (clock.h), the engine's clock. */
#ifndef LLMRT_SERVER_SERVE_H
#define LLMRT_SERVER_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <llmrt/engine.h>

#include "chat_messages.h"
#include "runtime.h"
#include "serve_metrics.h"
#include "serve_request.h"
#include "server.h"
#include "tokenizer.h"

struct MHD_Daemon;
struct MHD_Connection;
struct MHD_Response;
struct serve_track;

struct llmrt_server {
    /* settings, fixed by llmrt_server_open */
    llmrt_runtime *rt;
    const char *host;        /* server.host */
    int port;                /* server.port (0: any free port) */
    const char *api_key;     /* server.api_key; "" = no auth */
    char model_name[256];    /* served_model_name, or the model folder's name */
    size_t max_body;         /* server.max_body_bytes */
    int max_connections;     /* server.max_connections */
    int max_queue;           /* server.max_queue */
    int timeout_s;           /* server.timeout_s */
    int max_per_ip;          /* server.max_connections_per_ip (0: none) */
    int request_timeout_s;   /* server.request_timeout_s */
    int access_log;          /* server.access_log */
    int vllm_metrics;        /* server.metrics_prefix = vllm */
    int allow_special;       /* server.allow_special_tokens_in_content */
    const char *cors;        /* server.cors_origins ("" none, "*" any, or a list) */
    double log_interval_s;   /* server.log_interval_s */
    int reasoning_split;     /* server.reasoning: 1 splits reasoning out of chat replies (a
                              * constrained reply may then think first) */
    int64_t started;         /* unix time the server started ("created" of /v1/models) */
    char url[600];           /* "http://HOST:PORT" once listening */

    /* the loader thread (server.c): creates the engine, starts the stepper, sets ready */
    pthread_t loader;
    int loader_started;      /* not yet joined */
    atomic_int load_done;    /* 1 once the loader has finished, well or not */
    llmrt_status load_st;    /* written by the loader before load_done */
    llmrt_error load_err;

    /* the model: written once before `ready` becomes 1, read-only afterwards */
    llmrt_engine *engine;
    llmrt_tokenizer *tok;        /* NULL: the model has no tokenizer (ids only) */
    int32_t max_model_len;
    int32_t vocab_size;

    atomic_int ready;            /* 1 once the engine is loaded */
    atomic_int draining;         /* 1 after llmrt_server_drain: new requests get 503 */
    atomic_int abort_all;        /* 1 after llmrt_server_abort: in-flight requests cancel */
    atomic_long queued;          /* engine requests submitted whose final event is pending */
    atomic_long http_active;     /* HTTP requests started and not yet completed */
    atomic_ullong next_id;       /* response ids */
    uint64_t id_salt;

    /* unknown request fields already warned about (serve_warn_unknown_field) */
    pthread_mutex_t warn_mu;
    char **warned;               /* [n_warned] */
    int n_warned;

    llmrt_serve_metrics *metrics;
    struct MHD_Daemon *daemon;
    int bound_port;
    pthread_mutex_t mhd_log_mu;
    char mhd_last_error[256];    /* libmicrohttpd's last message, for start-up failures */

    /* connections (serve_http.c): every one while open, the request deadline's watchdog */
    pthread_mutex_t conn_mu;
    struct serve_track *tracks;  /* under conn_mu: open connections, oldest first */
    int n_reading;               /* under conn_mu: of them, reading a request (not shut) */
    pthread_t watchdog;
    int watchdog_running;
    atomic_int watchdog_stop;
    atomic_ullong next_request_id;
    /* 503s are logged at most once a second (under overload there are thousands) */
    pthread_mutex_t rl_mu;
    double rl_last;
    long rl_suppressed;

    /* stepping thread (serve_stepper.c) */
    pthread_t stepper;
    int stepper_running;
    atomic_int stepper_stop;
    atomic_int engine_failed;    /* a step failed: /health answers 503 */
    char engine_error[LLMRT_ERROR_MSG_MAX];
    /* the stepping thread's own tallies for the periodic log line */
    double log_last_t;
    uint64_t log_last_prefill, log_last_gen, log_last_steps;
    uint64_t log_last_pc_queries, log_last_pc_hits;
    double log_busy_ms, log_idle_ms;
    uint64_t log_steps;
};

/* One HTTP request while MHD serves it (MHD's per-request pointer). */
typedef struct serve_gen serve_gen;
typedef struct serve_conn {
    llmrt_server *srv;
    struct MHD_Connection *conn;
    int route;               /* serve_http.c's route index, -1 unknown */
    const char *route_name;  /* for metrics */
    char *body;              /* [len] the request body so far (NUL-terminated) */
    size_t len, cap;
    int too_large;           /* the body passed max_body: the rest is discarded, 413 follows */
    int close_after;         /* answer with Connection: close */
    int checked;             /* route, method, auth and size were checked */
    serve_gen *gen;          /* generation endpoints: the request's shared state */
    /* for the access log and the response headers */
    double t_start;          /* llmrt_now_s() when the headers were in */
    int status;              /* the status sent (0: none yet) */
    char method[16];
    char path[256];          /* the URL as the client sent it (unprintable bytes as '?') */
    char request_id[80];     /* X-Request-Id: the client's (when sane), else ours */
    char client[64];         /* the client's address */
    const char *origin;      /* Origin when CORS allows it (MHD's copy, valid meanwhile) */
} serve_conn;

/* ---- serve_http.c ---- */
/* Listen on host:port; s->bound_port is the port actually bound. */
llmrt_status serve_http_start(llmrt_server *s, llmrt_error *err);
/* Stop accepting connections (the listening socket is closed); open ones keep going. */
void serve_http_quiesce(llmrt_server *s);
/* Close every connection and join the connection threads. */
void serve_http_stop(llmrt_server *s);
/* Replies. Each records the status in the metrics and returns MHD's result. */
int serve_reply(struct MHD_Connection *c, serve_conn *cx, int status, const char *content_type,
                char *body /* malloc'd, taken */, size_t len);
int serve_reply_json(struct MHD_Connection *c, serve_conn *cx, int status,
                     struct json_t *obj /* taken */);
int serve_reply_error(struct MHD_Connection *c, serve_conn *cx, const llmrt_serve_error *e);
/* The headers every response of a request carries (X-Request-Id, CORS), and the status
 * recorded for the metrics and the access log: for responses built outside serve_reply
 * (streams). */
void serve_response_headers(serve_conn *cx, struct MHD_Response *resp);
void serve_record_status(serve_conn *cx, int status);
/* 1 when the client is gone (checked without blocking). A client that only half-closed (sent
 * its request, then shut its writing side) is not gone: while no response has started, an
 * HTTP/1.1 client's end is probed once with an interim "100 Continue", which a client that
 * really closed answers with a reset. */
int serve_client_gone(struct MHD_Connection *c);
/* Log once per name (at warn level) that a request field is unknown and ignored. */
void serve_warn_unknown_field(llmrt_server *s, const char *name);
/* 0 when the request's "model" is absent or ours; else fills a 404. */
int serve_check_model(const llmrt_server *s, const char *model, llmrt_serve_error *e);
/* 0 when the engine takes requests; else fills a 503 (loading, failed, draining). */
int serve_check_ready(llmrt_server *s, llmrt_serve_error *e);

/* ---- serve_generate.c ---- */
/* Handle a complete request body of /v1/completions or /v1/chat/completions. */
int serve_generate(struct MHD_Connection *c, serve_conn *cx, llmrt_serve_kind kind);
/* The HTTP request is over (toe: MHD's termination code; 0 = completed OK). A request that
 * did not complete cancels its engine requests. Drops the HTTP side's reference. */
void serve_generate_done(serve_gen *g, int completed_ok);
/* Usage so far (prompt tokens, completion tokens of the choices that ended), for the access
 * log. */
void serve_generate_usage(serve_gen *g, int64_t *prompt, int64_t *completion);
/* Render messages through the chat template and tokenize the result (chat and
 * /tokenize). *ids is malloc'd; *in_reasoning (may be NULL) says whether the prompt left a
 * think block open. Fills e (400) on a bad message list. */
llmrt_status serve_chat_prompt(llmrt_server *s, const llmrt_serve_request *req, int32_t **ids,
                               size_t *n_ids, int *in_reasoning, llmrt_serve_error *e);

/* ---- serve_structured.c ---- */
/* The grammar handles of the request's n choices into out [n] (all NULL when its replies are
 * unconstrained); on failure none is kept and e says why (400 naming the field and the
 * schema keyword). */
llmrt_status serve_grammars(llmrt_server *s, const llmrt_serve_request *req, int n,
                            llmrt_grammar **out, llmrt_serve_error *e);

/* ---- serve_tokenize.c ---- */
int serve_tokenize(struct MHD_Connection *c, serve_conn *cx);
int serve_detokenize(struct MHD_Connection *c, serve_conn *cx);

/* ---- serve_stepper.c ---- */
llmrt_status serve_stepper_start(llmrt_server *s, llmrt_error *err);
void serve_stepper_stop(llmrt_server *s);
/* The engine's step callback (installed at engine creation): metrics + log tallies. */
void serve_on_step(void *user, const llmrt_step_record *rec);

#endif
