/* server.h — the OpenAI-compatible HTTP server on the engine (libllmrt_server), as a program
 * embeds it: `llmrt serve` is option parsing and signal handling around these calls.
 *
 * Life cycle, in this order:
 *   llmrt_server_open    read the [server] keys and pick the model's name for clients
 *   llmrt_server_listen  bind server.host:server.port and answer HTTP; /health says 503
 *   llmrt_server_load    load model.path on a thread of the server's own; once it is in,
 *                        the stepping thread starts and /health answers 200 (ready)
 *   llmrt_server_loaded  poll that load (never blocks)
 *   llmrt_server_drain   stop accepting; requests in flight go on, new ones get 503
 *   llmrt_server_busy    what is still in flight (a drain is over when nothing is)
 *   llmrt_server_abort   cancel what is still in flight (streams end with an error event)
 *   llmrt_server_close   close the connections, stop the stepping thread, free everything
 * Binding first lets a caller using port 0 learn the port before the (long) load, and a
 * load balancer see "loading" rather than "connection refused".
 *
 * Threads: the server runs its own (libmicrohttpd's, the loader, the stepping thread), which
 * inherit the caller's signal mask: a caller that takes signals synchronously (sigtimedwait)
 * blocks them before llmrt_server_listen. Loading cannot be interrupted; a caller that must
 * leave mid-load drains and exits the process. */
#ifndef LLMRT_SERVER_SERVER_H
#define LLMRT_SERVER_SERVER_H

#include <llmrt/plugin.h>

#include "runtime.h"

typedef struct llmrt_server llmrt_server;

/* A server for rt's config (borrowed: close the server before the runtime). Fails
 * (INVALID_ARG) when model.path is unset. */
llmrt_status llmrt_server_open(llmrt_runtime *rt, llmrt_server **out, llmrt_error *err);

/* Start answering HTTP on server.host:server.port. *url ("http://HOST:PORT", an IPv6 host
 * in brackets, the port actually bound) stays valid until llmrt_server_close. */
llmrt_status llmrt_server_listen(llmrt_server *s, const char **url, llmrt_error *err);

/* Start loading the model on the server's own thread; returns at once. Call once, after
 * llmrt_server_listen. */
llmrt_status llmrt_server_load(llmrt_server *s, llmrt_error *err);

/* Whether the load has ended, without waiting: *done is 0 while the model loads, 1 once
 * the server is ready. Fails with the load's own error (*done 1) when the model did not
 * load or the stepping thread could not start. */
llmrt_status llmrt_server_loaded(llmrt_server *s, int *done, llmrt_error *err);

/* Stop accepting connections; open connections get 503 for new requests, requests in
 * flight go on to their end. */
void llmrt_server_drain(llmrt_server *s);

/* Cancel every request in flight: the engine drops them within a step; streams end with a
 * "cancelled" error event, whole responses with an error. */
void llmrt_server_abort(llmrt_server *s);

/* 1 while anything is in flight, else 0. *http (may be NULL): HTTP requests received and
 * not yet completed; *engine (may be NULL): engine requests whose final event is pending. */
int llmrt_server_busy(const llmrt_server *s, long *http, long *engine);

/* Close every connection, stop the threads (waiting for a load still running), destroy the
 * engine (requests still held get their final events) and free the server. NULL is a
 * no-op. */
void llmrt_server_close(llmrt_server *s);

#endif
