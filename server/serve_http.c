/* serve_http.c — `llmrt serve`'s HTTP layer on libmicrohttpd: bind, route, check the API
 * key, receive bodies under server.max_body_bytes (never buffering past it), answer errors
 * in OpenAI's shape, CORS, request ids and the access log, and hand complete requests to
 * the endpoint handlers.
 *
 * libmicrohttpd runs a thread per connection (MHD_USE_THREAD_PER_CONNECTION), so a
 * handler may block while its tokens are generated; a client that goes away is noticed
 * by polling its socket (serve_client_gone) and by MHD's request-completed callback.
 *
 * Careless and hostile clients: MHD's idle timeout restarts with every byte, so a client
 * that trickles a header line now and then would hold its connection (and, 256 of them,
 * the server) forever. Every connection is therefore tracked from accept to close: while
 * it is reading a request it has request_timeout_s to deliver headers and body (a watchdog
 * shuts down the late ones), connections still reading are closed oldest first before they
 * leave fewer than an eighth of max_connections free, and MHD caps connections per client
 * address. Closing is a shutdown() of the socket under conn_mu; MHD reports a connection
 * closed (and our record goes) before it closes the descriptor, so the descriptor shut down
 * is always the connection's own. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "serve.h"
#include "serve_response.h"

/* One open connection, from accept to close (MHD's socket context). Under conn_mu. */
typedef struct serve_track {
    struct serve_track *prev, *next;
    int fd;
    double t_phase;    /* when it began reading its current request */
    int reading;       /* 1 while it reads a request (its deadline runs) */
    int shut;          /* we shut it down (late, or evicted) */
    int http11;        /* the current request is HTTP/1.1 (may be sent a 1xx) */
    int replying;      /* a response has been queued for the current request */
    int probed;        /* a half-closed client was sent "100 Continue" */
} serve_track;

#define WATCHDOG_TICK_MS 200

enum {
    R_MODELS,
    R_MODEL_ONE, /* /v1/models/{id} */
    R_COMPLETIONS,
    R_CHAT,
    R_TOKENIZE,
    R_DETOKENIZE,
    R_HEALTH,
    R_METRICS,
    R_VERSION,
    R_COUNT
};

static const struct {
    const char *path;   /* exact path, or a prefix when it ends with '/' */
    const char *method; /* "GET" or "POST" (GET routes also answer HEAD) */
    int auth;           /* needs the API key when one is set */
    const char *metric; /* route label in /metrics */
} routes[R_COUNT] = {
    [R_MODELS] = {"/v1/models", "GET", 1, "/v1/models"},
    [R_MODEL_ONE] = {"/v1/models/", "GET", 1, "/v1/models"},
    [R_COMPLETIONS] = {"/v1/completions", "POST", 1, "/v1/completions"},
    [R_CHAT] = {"/v1/chat/completions", "POST", 1, "/v1/chat/completions"},
    [R_TOKENIZE] = {"/tokenize", "POST", 1, "/tokenize"},
    [R_DETOKENIZE] = {"/detokenize", "POST", 1, "/detokenize"},
    [R_HEALTH] = {"/health", "GET", 0, "/health"},
    [R_METRICS] = {"/metrics", "GET", 0, "/metrics"},
    [R_VERSION] = {"/version", "GET", 0, "other"},
};

static int find_route(const char *url)
{
    size_t n = strlen(url);
    while (n > 1 && url[n - 1] == '/') /* "/v1/models/" is "/v1/models" */
        n--;
    for (int r = 0; r < R_COUNT; r++) {
        const char *p = routes[r].path;
        size_t k = strlen(p);
        if (p[k - 1] == '/') {
            if (n > k && strncmp(url, p, k) == 0)
                return r;
        } else if (n == k && strncmp(url, p, k) == 0) {
            return r;
        }
    }
    return -1;
}

/* ---- replies ---- */

static serve_track *track_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void serve_record_status(serve_conn *cx, int status)
{
    serve_track *t = cx->conn ? track_of(cx->conn) : NULL;
    if (t)
        t->replying = 1;
    cx->status = status;
    llmrt_serve_metrics_http(cx->srv->metrics, cx->route_name, status);
}

void serve_response_headers(serve_conn *cx, struct MHD_Response *resp)
{
    if (cx->request_id[0])
        MHD_add_response_header(resp, "X-Request-Id", cx->request_id);
    if (cx->origin) {
        int any = strcmp(cx->srv->cors, "*") == 0;
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", any ? "*" : cx->origin);
        if (!any)
            MHD_add_response_header(resp, "Vary", "Origin");
        MHD_add_response_header(resp, "Access-Control-Expose-Headers", "X-Request-Id");
    }
}

int serve_reply(struct MHD_Connection *c, serve_conn *cx, int status, const char *content_type,
                char *body, size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body ? body : (char *)"",
                                        body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (status == 405 && cx->route >= 0)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
                                strcmp(routes[cx->route].method, "GET") == 0 ? "GET, HEAD"
                                                                               : "POST");
    if (status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (cx->close_after)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    serve_response_headers(cx, resp);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    serve_record_status(cx, status);
    return rc;
}

int serve_reply_json(struct MHD_Connection *c, serve_conn *cx, int status, json_t *obj)
{
    char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    if (!text) {
        llmrt_serve_error e;
        llmrt_serve_error_set(&e, 500, NULL, "internal_error", NULL,
                              "out of memory building the response");
        return serve_reply_error(c, cx, &e);
    }
    return serve_reply(c, cx, status, "application/json", text, strlen(text));
}

int serve_reply_error(struct MHD_Connection *c, serve_conn *cx, const llmrt_serve_error *e)
{
    size_t len = 0;
    char *text = llmrt_serve_error_text(e, &len);
    if (!text)
        return MHD_NO;
    /* internal failures are warnings; a full queue or a refusal while loading or draining
     * is worth a line; client mistakes only at debug level */
    llmrt_log_level level = e->status == 500                              ? LLMRT_LOG_WARN
                            : e->status == 503 && cx->route != R_HEALTH ? LLMRT_LOG_INFO
                                                                        : LLMRT_LOG_DEBUG;
    llmrt_server *s = cx->srv;
    long more = 0;
    int say = 1;
    if (level == LLMRT_LOG_INFO) { /* under overload: one line a second, with a count */
        double now = llmrt_now_s();
        pthread_mutex_lock(&s->rl_mu);
        if (s->rl_last > 0 && now - s->rl_last < 1.0) {
            s->rl_suppressed++;
            say = 0;
        } else {
            more = s->rl_suppressed;
            s->rl_suppressed = 0;
            s->rl_last = now;
        }
        pthread_mutex_unlock(&s->rl_mu);
    }
    if (say && more)
        llmrt_log(level, "serve", "%s: %d %s (and %ld more 503 responses not logged in the "
                  "second before)", cx->route_name ? cx->route_name : "?", e->status,
                  e->message, more);
    else if (say)
        llmrt_log(level, "serve", "%s: %d %s", cx->route_name ? cx->route_name : "?",
                  e->status, e->message);
    return serve_reply(c, cx, e->status, "application/json", text, len);
}

int serve_client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
        return 1; /* reset, or closed both ways */
    if (!(p.revents & POLLRDHUP))
        return 0;
    /* The client sent FIN: a half-close (it still reads) or a close (it does not). Only a
     * write tells them apart: a closed socket answers it with a reset, seen by the next poll.
     * Before a response has started, HTTP/1.1 lets the server send an interim 1xx response,
     * which clients skip; once one has started, a failed write of the response says it. */
    serve_track *t = track_of(c);
    if (t && t->http11 && !t->replying && !t->probed) {
        static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
        t->probed = 1;
        if (send(ci->connect_fd, probe, sizeof probe - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
            errno != EAGAIN && errno != EWOULDBLOCK)
            return 1;
    }
    return 0;
}

int serve_check_model(const llmrt_server *s, const char *model, llmrt_serve_error *e)
{
    if (!model || strcmp(model, s->model_name) == 0)
        return 0;
    llmrt_serve_error_set(e, 404, NULL, "model_not_found", "model",
                          "The model `%s` does not exist; this server serves `%s`.", model,
                          s->model_name);
    return -1;
}

int serve_check_ready(llmrt_server *s, llmrt_serve_error *e)
{
    if (atomic_load(&s->draining)) {
        llmrt_serve_error_set(e, 503, NULL, "shutting_down", NULL,
                              "the server is shutting down and takes no new requests");
        return -1;
    }
    if (!atomic_load(&s->ready)) {
        llmrt_serve_error_set(e, 503, NULL, "model_loading", NULL,
                              "the model `%s` is still loading; retry when /health answers 200",
                              s->model_name);
        return -1;
    }
    if (atomic_load(&s->engine_failed)) {
        llmrt_serve_error_set(e, 503, NULL, "engine_failed", NULL,
                              "the engine has failed and takes no new requests: %s",
                              s->engine_error);
        return -1;
    }
    return 0;
}

/* ---- small endpoints ---- */

static json_t *model_card(llmrt_server *s)
{
    json_t *m = json_pack("{s:s, s:s, s:I, s:s, s:n}", "id", s->model_name, "object", "model",
                          "created", (json_int_t)s->started, "owned_by", "llmrt", "parent");
    if (!m)
        return NULL;
    const char *root = llmrt_config_get(s->rt->cfg, "model.path");
    json_object_set_new(m, "root", llmrt_serve_json_string(root ? root : "", root ? strlen(root) : 0));
    if (atomic_load(&s->ready))
        json_object_set_new(m, "max_model_len", json_integer(s->max_model_len));
    return m;
}

static int handle_models(struct MHD_Connection *c, serve_conn *cx, const char *url)
{
    llmrt_server *s = cx->srv;
    if (cx->route == R_MODEL_ONE) {
        const char *id = url + strlen(routes[R_MODEL_ONE].path);
        char want[512];
        snprintf(want, sizeof want, "%s", id);
        size_t n = strlen(want);
        while (n && want[n - 1] == '/')
            want[--n] = 0;
        llmrt_serve_error e;
        if (serve_check_model(s, want, &e) != 0)
            return serve_reply_error(c, cx, &e);
        return serve_reply_json(c, cx, 200, model_card(s));
    }
    json_t *list = json_pack("{s:s, s:[o]}", "object", "list", "data", model_card(s));
    return serve_reply_json(c, cx, 200, list);
}

static int handle_health(struct MHD_Connection *c, serve_conn *cx)
{
    llmrt_server *s = cx->srv;
    llmrt_serve_error e;
    /* not ready, failed, or draining: a load balancer should send its traffic elsewhere */
    if (serve_check_ready(s, &e) != 0)
        return serve_reply_error(c, cx, &e);
    return serve_reply_json(c, cx, 200, json_pack("{s:s}", "status", "ok"));
}

static int handle_metrics(struct MHD_Connection *c, serve_conn *cx)
{
    llmrt_server *s = cx->srv;
    llmrt_engine_stats st;
    llmrt_serve_metrics_info info = {.model_name = s->model_name,
                                     .vllm_names = s->vllm_metrics,
                                     .http_in_flight = atomic_load(&s->http_active)};
    if (atomic_load(&s->ready)) {
        llmrt_engine_stats_get(s->engine, &st);
        info.stats = &st;
        info.ready = !atomic_load(&s->engine_failed) && !st.failed;
    }
    size_t len = 0;
    char *text = llmrt_serve_metrics_render(s->metrics, &info, &len);
    if (!text)
        return MHD_NO;
    return serve_reply(c, cx, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

/* ---- the access handler ---- */

/* Constant-time comparison, so the key cannot be guessed byte by byte from timings. */
static int key_equal(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = (unsigned char)(na != nb);
    for (size_t i = 0; i < nb; i++)
        d |= (unsigned char)(a[i < na ? i : 0] ^ b[i]);
    return d == 0;
}

static int check_auth(llmrt_server *s, struct MHD_Connection *c, llmrt_serve_error *e)
{
    if (!s->api_key[0])
        return 0;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h) {
        llmrt_serve_error_set(e, 401, "invalid_request_error", "invalid_api_key", NULL,
                              "missing API key: send the header 'Authorization: Bearer <key>' "
                              "(server.api_key is set)");
        return -1;
    }
    if (strncasecmp(h, "Bearer ", 7) != 0) {
        llmrt_serve_error_set(e, 401, "invalid_request_error", "invalid_api_key", NULL,
                              "the Authorization header must read 'Bearer <key>'");
        return -1;
    }
    h += 7;
    while (*h == ' ')
        h++;
    if (!key_equal(h, s->api_key)) {
        llmrt_serve_error_set(e, 401, "invalid_request_error", "invalid_api_key", NULL,
                              "incorrect API key provided");
        return -1;
    }
    return 0;
}

/* First call of a request: the headers are in, the body (if any) is not. Returns 1 when an
 * answer was queued (the request ends here), 0 to go on. */
/* A CORS preflight (OPTIONS): 204 with what the route allows; the CORS headers only for an
 * allowed Origin (a browser then refuses the call itself). No API key: browsers send none. */
static int reply_options(struct MHD_Connection *c, serve_conn *cx)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    const char *allow = strcmp(routes[cx->route].method, "GET") == 0 ? "GET, HEAD, OPTIONS"
                                                                     : "POST, OPTIONS";
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    if (cx->origin) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", allow);
        const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                       "Access-Control-Request-Headers");
        int sane = want && strlen(want) < 512;
        for (const char *p = want; sane && *p; p++)
            sane = isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == ',' || *p == ' ';
        MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                sane ? want : "Authorization, Content-Type, X-Request-Id");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    }
    serve_response_headers(cx, resp);
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, resp);
    MHD_destroy_response(resp);
    serve_record_status(cx, 204);
    return rc;
}

/* Every Content-Length header of the request: all digits (MHD takes the first; conflicting
 * ones could be read differently by a proxy in front: request smuggling). Returns 0 when
 * they are fine, 1 when MHD could parse the first (the request can still be answered the
 * normal way), 2 when MHD could not: it has queued an error response of its own already,
 * which libmicrohttpd 0.9.75 then sends with its status line twice. */
typedef struct cl_scan {
    const char *first;
    int n, bad_first, conflict, bad_other;
} cl_scan;

static enum MHD_Result scan_cl(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    cl_scan *sc = cls;
    (void)kind;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0)
        return MHD_YES;
    size_t n = strlen(value ? value : "");
    int digits = n > 0 && n <= 19 && strspn(value, "0123456789") == n;
    if (sc->n == 0) {
        sc->first = value;
        sc->bad_first = !digits;
    } else if (!digits) {
        sc->bad_other = 1;
    } else if (strtoull(value, NULL, 10) != strtoull(sc->first, NULL, 10)) {
        sc->conflict = 1;
    }
    sc->n++;
    return MHD_YES;
}

/* Answer `status` ourselves, on the socket, before MHD sends its own (malformed) one: the
 * error object, then a lingering close (our side shut, what the client still sends read
 * and dropped for up to a second) so the client reads the answer rather than a reset.
 * MHD's own response then fails to write and MHD closes the connection. */
static void raw_answer(llmrt_server *s, struct MHD_Connection *c, int status, const char *code,
                       const char *msg, const char *request_id)
{
    llmrt_serve_error e;
    llmrt_serve_error_set(&e, status, NULL, code, NULL, "%s", msg);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    size_t len = 0;
    char *body = llmrt_serve_error_text(&e, &len);
    if (!ci || !body) {
        free(body);
        return;
    }
    char head[512];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu"
                      "\r\nConnection: close\r\nX-Request-Id: %s\r\n\r\n",
                      status, status == 413 ? "Content Too Large" : "Bad Request", len,
                      request_id);
    int fd = ci->connect_fd;
    if (send(fd, head, (size_t)hl, MSG_NOSIGNAL) == hl &&
        send(fd, body, len, MSG_NOSIGNAL) == (ssize_t)len) {
        shutdown(fd, SHUT_WR);
        char sink[4096];
        double until = llmrt_now_s() + 1.0;
        for (size_t got = 0; got < (1u << 20) && llmrt_now_s() < until;) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 100) <= 0)
                continue;
            ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
    }
    shutdown(fd, SHUT_RDWR);
    free(body);
    (void)s;
}

/* The request's framing, at its very first call (before MHD acts on a Content-Length it
 * could not parse). Returns 1 when an answer was given (the request ends here). */
static int check_framing(struct MHD_Connection *c, serve_conn *cx, enum MHD_Result *rc)
{
    cl_scan sc = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, scan_cl, &sc);
    if (sc.n && sc.bad_first) { /* a libmicrohttpd that lets us answer this one */
        raw_answer(cx->srv, c, 400, "invalid_content_length",
                   "the Content-Length header must be a decimal number of bytes (0 or more)",
                   cx->request_id);
        serve_record_status(cx, 400);
        *rc = MHD_NO;
        return 1;
    }
    if (sc.conflict || sc.bad_other ||
        (sc.n && MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                             MHD_HTTP_HEADER_TRANSFER_ENCODING))) {
        llmrt_serve_error e;
        cx->close_after = 1;
        llmrt_serve_error_set(&e, 400, NULL, "invalid_content_length", NULL,
                              sc.conflict || sc.bad_other
                                  ? "the request has Content-Length headers that disagree; "
                                    "send one"
                                  : "the request has both Content-Length and "
                                    "Transfer-Encoding; send one of them");
        *rc = (enum MHD_Result)serve_reply_error(c, cx, &e);
        return 1;
    }
    return 0;
}

static int first_call(struct MHD_Connection *c, serve_conn *cx, const char *url,
                      const char *method, enum MHD_Result *rc)
{
    llmrt_server *s = cx->srv;
    llmrt_serve_error e;
    if (cx->route < 0) {
        llmrt_serve_error_set(&e, 404, NULL, "not_found", NULL,
                              "no route %s %s; this server has GET /v1/models, POST "
                              "/v1/completions, POST /v1/chat/completions, POST /tokenize, "
                              "POST /detokenize, GET /health, GET /metrics, GET /version",
                              method, url);
        goto reply;
    }
    if (strcmp(method, "OPTIONS") == 0) {
        *rc = (enum MHD_Result)reply_options(c, cx);
        return 1;
    }
    const char *want = routes[cx->route].method;
    int is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (strcmp(want, "GET") == 0 ? !is_get : strcmp(method, want) != 0) {
        llmrt_serve_error_set(&e, 405, NULL, "method_not_allowed", NULL,
                              "method %s is not allowed on %s; use %s", method,
                              routes[cx->route].path, want);
        goto reply;
    }
    if (routes[cx->route].auth && check_auth(s, c, &e) != 0)
        goto reply;
    if (atomic_load(&s->draining) && cx->route != R_HEALTH && cx->route != R_METRICS) {
        cx->close_after = 1;
        llmrt_serve_error_set(&e, 503, NULL, "shutting_down", NULL,
                              "the server is shutting down and takes no new requests");
        goto reply;
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno == 0 && end != cl && n > s->max_body) {
            llmrt_serve_error_set(&e, 413, NULL, "request_too_large", NULL,
                                  "request body of %llu bytes is larger than the limit of %zu "
                                  "bytes (server.max_body_bytes)",
                                  n, s->max_body);
            goto reply;
        }
    }
    return 0;
reply:
    *rc = (enum MHD_Result)serve_reply_error(c, cx, &e);
    return 1;
}

/* A connection's reading phase: 1 when it starts reading a request (its deadline starts),
 * 0 when the request is in (or answered). */
static void track_reading(llmrt_server *s, struct MHD_Connection *c, int reading)
{
    serve_track *t = track_of(c);
    if (!t)
        return;
    pthread_mutex_lock(&s->conn_mu);
    if (!t->shut && t->reading != reading)
        s->n_reading += reading ? 1 : -1;
    t->reading = reading;
    if (reading)
        t->t_phase = llmrt_now_s();
    pthread_mutex_unlock(&s->conn_mu);
}

/* The request id: the client's X-Request-Id when it is a sane token, else a fresh one. */
static void pick_request_id(llmrt_server *s, struct MHD_Connection *c, serve_conn *cx)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    size_t n = h ? strlen(h) : 0;
    int sane = n > 0 && n < sizeof cx->request_id;
    for (size_t i = 0; sane && i < n; i++)
        sane = isalnum((unsigned char)h[i]) || strchr("-_.:/+=@", h[i]);
    if (sane) {
        memcpy(cx->request_id, h, n + 1);
        return;
    }
    uint64_t x = s->id_salt ^ (atomic_fetch_add(&s->next_request_id, 1) * 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    snprintf(cx->request_id, sizeof cx->request_id, "req-%016llx", (unsigned long long)x);
}

/* 1 when CORS allows this Origin (server.cors_origins: "*" or a comma-separated list). */
static int origin_allowed(const char *cors, const char *origin)
{
    if (!cors[0] || !origin)
        return 0;
    if (strcmp(cors, "*") == 0)
        return 1;
    size_t on = strlen(origin);
    for (const char *p = cors; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t k = strcspn(p, ", ");
        if (k == on && strncmp(p, origin, k) == 0)
            return 1;
        p += k;
    }
    return 0;
}

/* What the access log and the response headers need, at the request's first call. */
static void request_start(struct MHD_Connection *c, serve_conn *cx, const char *url,
                          const char *method, const char *version)
{
    llmrt_server *s = cx->srv;
    cx->t_start = llmrt_now_s();
    snprintf(cx->method, sizeof cx->method, "%s", method);
    size_t i = 0;
    for (; url[i] && i + 1 < sizeof cx->path; i++)
        cx->path[i] = (unsigned char)url[i] < 0x21 || (unsigned char)url[i] > 0x7e ? '?' : url[i];
    cx->path[i] = 0;
    pick_request_id(s, c, cx);
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    cx->origin = origin_allowed(s->cors, origin) ? origin : NULL;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr &&
        getnameinfo(ci->client_addr,
                    ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                           : sizeof(struct sockaddr_in),
                    cx->client, sizeof cx->client, NULL, 0, NI_NUMERICHOST) != 0)
        cx->client[0] = 0;
    serve_track *t = track_of(c);
    if (t) {
        t->http11 = version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
        t->replying = 0;
        t->probed = 0;
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    llmrt_server *s = cls;
    serve_conn *cx = *con_cls;
    enum MHD_Result rc = MHD_YES;
    (void)version;

    if (!cx) {
        cx = calloc(1, sizeof *cx);
        if (!cx)
            return MHD_NO;
        cx->srv = s;
        cx->conn = c;
        cx->route = find_route(url);
        cx->route_name = cx->route >= 0 ? routes[cx->route].metric : "other";
        *con_cls = cx;
        atomic_fetch_add(&s->http_active, 1);
        request_start(c, cx, url, method, version);
        if (check_framing(c, cx, &rc)) {
            track_reading(s, c, 0);
            return rc;
        }
        /* With a body coming, refuse early (MHD then closes the connection instead of
         * reading a body nobody wants); without one, answer on the next call, once MHD
         * knows the request is complete and can keep the connection alive. */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_TRANSFER_ENCODING);
        cx->checked = (cl && strtoull(cl, NULL, 10) > 0) || te;
        if (cx->checked && first_call(c, cx, url, method, &rc)) {
            track_reading(s, c, 0);
            return rc;
        }
        return MHD_YES;
    }

    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cx->too_large || cx->len + n > s->max_body) {
            /* no Content-Length (chunked): discard the rest, answer 413 at the end */
            cx->too_large = 1;
            free(cx->body);
            cx->body = NULL;
            cx->len = cx->cap = 0;
            return MHD_YES;
        }
        if (cx->len + n + 1 > cx->cap) {
            size_t cap = cx->cap ? cx->cap : 4096;
            while (cap < cx->len + n + 1)
                cap *= 2;
            if (cap > s->max_body + 1)
                cap = s->max_body + 1;
            char *g = realloc(cx->body, cap);
            if (!g)
                return MHD_NO;
            cx->body = g;
            cx->cap = cap;
        }
        memcpy(cx->body + cx->len, upload_data, n);
        cx->len += n;
        cx->body[cx->len] = 0;
        return MHD_YES;
    }

    track_reading(s, c, 0); /* the whole request is in: its deadline stops */
    if (!cx->checked) {
        cx->checked = 1;
        if (first_call(c, cx, url, method, &rc))
            return rc;
    }
    if (cx->too_large) {
        llmrt_serve_error e;
        cx->close_after = 1;
        llmrt_serve_error_set(&e, 413, NULL, "request_too_large", NULL,
                              "request body is larger than the limit of %zu bytes "
                              "(server.max_body_bytes)",
                              s->max_body);
        return (enum MHD_Result)serve_reply_error(c, cx, &e);
    }

    switch (cx->route) {
    case R_MODELS:
    case R_MODEL_ONE:
        return (enum MHD_Result)handle_models(c, cx, url);
    case R_HEALTH:
        return (enum MHD_Result)handle_health(c, cx);
    case R_METRICS:
        return (enum MHD_Result)handle_metrics(c, cx);
    case R_VERSION:
        return (enum MHD_Result)serve_reply_json(c, cx, 200,
                                                 json_pack("{s:s}", "version", LLMRT_VERSION));
    case R_COMPLETIONS:
        return (enum MHD_Result)serve_generate(c, cx, LLMRT_SERVE_COMPLETIONS);
    case R_CHAT:
        return (enum MHD_Result)serve_generate(c, cx, LLMRT_SERVE_CHAT);
    case R_TOKENIZE:
        return (enum MHD_Result)serve_tokenize(c, cx);
    case R_DETOKENIZE:
        return (enum MHD_Result)serve_detokenize(c, cx);
    }
    return MHD_NO;
}

static const char *outcome(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK: return "completed";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return "timeout";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
    case MHD_REQUEST_TERMINATED_READ_ERROR: return "client_gone";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return "shutdown";
    default: return "error";
    }
}

/* One line per HTTP request. */
static void access_log(const serve_conn *cx, enum MHD_RequestTerminationCode toe,
                       int64_t prompt, int64_t completion)
{
    double ms = (llmrt_now_s() - cx->t_start) * 1e3;
    llmrt_log_field f[] = {
        {"method", cx->method, 0},
        {"path", cx->path, 0},
        {"route", cx->route_name, 0},
        {"status", NULL, cx->status},
        {"duration_ms", NULL, (double)(int64_t)(ms * 1000.0 + 0.5) / 1000.0},
        {"prompt_tokens", NULL, prompt >= 0 ? (double)prompt : NAN},
        {"completion_tokens", NULL, completion >= 0 ? (double)completion : NAN},
        {"client", cx->client[0] ? cx->client : NULL, 0},
        {"request_id", cx->request_id, 0},
        {"outcome", outcome(toe), 0},
    };
    llmrt_log_fields(LLMRT_LOG_INFO, "access", f, sizeof f / sizeof *f, "%s %s %d %.1f ms",
                     cx->method, cx->path, cx->status, ms);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    llmrt_server *s = cls;
    serve_conn *cx = *con_cls;
    if (!cx)
        return;
    int64_t prompt = -1, completion = -1;
    if (cx->gen)
        serve_generate_usage(cx->gen, &prompt, &completion);
    if (s->access_log)
        access_log(cx, toe, prompt, completion);
    if (cx->gen)
        serve_generate_done(cx->gen, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    free(cx->body);
    free(cx);
    *con_cls = NULL;
    atomic_fetch_sub(&s->http_active, 1);
    track_reading(s, c, 1); /* a kept-alive connection now waits for its next request */
}

/* Shut down a connection's socket (conn_mu held): its MHD thread sees the end and closes it. */
static void track_shut(llmrt_server *s, serve_track *t, const char *why)
{
    if (t->shut)
        return;
    if (t->reading)
        s->n_reading--;
    t->shut = 1;
    shutdown(t->fd, SHUT_RDWR);
    llmrt_serve_metrics_conn_closed(s->metrics, why);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    llmrt_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        serve_track *t = calloc(1, sizeof *t);
        if (!t || !ci) {
            free(t);
            return; /* untracked: only its deadline is lost */
        }
        t->fd = ci->connect_fd;
        t->reading = 1;
        t->t_phase = llmrt_now_s();
        pthread_mutex_lock(&s->conn_mu);
        /* append (newest last) and make room: connections still reading their request may
         * take all but an eighth of max_connections; beyond that the oldest goes */
        serve_track **tail = &s->tracks;
        while (*tail)
            tail = &(*tail)->next;
        *tail = t;
        s->n_reading++;
        int reserve = s->max_connections / 8 > 0 ? s->max_connections / 8 : 1;
        for (serve_track *o = s->tracks; o && s->n_reading > s->max_connections - reserve;
             o = o->next)
            if (o != t && o->reading && !o->shut)
                track_shut(s, o, "evicted");
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = t;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        serve_track *t = *socket_context;
        if (!t)
            return;
        pthread_mutex_lock(&s->conn_mu);
        for (serve_track **pp = &s->tracks; *pp; pp = &(*pp)->next)
            if (*pp == t) {
                *pp = t->next;
                break;
            }
        if (t->reading && !t->shut)
            s->n_reading--;
        pthread_mutex_unlock(&s->conn_mu);
        free(t);
        *socket_context = NULL;
    }
}

/* Every tick: shut down connections whose request is later than request_timeout_s, and say
 * how many 503s went unlogged once their second is over. */
static void *watchdog_main(void *arg)
{
    llmrt_server *s = arg;
    while (!atomic_load(&s->watchdog_stop)) {
        struct timespec ts = {0, WATCHDOG_TICK_MS * 1000000L};
        nanosleep(&ts, NULL);
        double now = llmrt_now_s();
        pthread_mutex_lock(&s->rl_mu);
        long more = now - s->rl_last >= 1.0 ? s->rl_suppressed : 0;
        if (more)
            s->rl_suppressed = 0;
        pthread_mutex_unlock(&s->rl_mu);
        if (more)
            llmrt_log(LLMRT_LOG_INFO, "serve",
                      "%ld more 503 responses not logged in the second after the last one "
                      "(the server is at capacity; see the access log)",
                      more);
        pthread_mutex_lock(&s->conn_mu);
        for (serve_track *t = s->tracks; t; t = t->next)
            if (t->reading && !t->shut && now - t->t_phase > s->request_timeout_s) {
                llmrt_log(LLMRT_LOG_DEBUG, "serve",
                          "a connection took more than %d s to send its request "
                          "(server.request_timeout_s): closed",
                          s->request_timeout_s);
                track_shut(s, t, "request_timeout");
            }
        pthread_mutex_unlock(&s->conn_mu);
    }
    return NULL;
}

/* libmicrohttpd 0.9.75 answers a Content-Length it cannot parse (-5, abc) itself, before any
 * handler of ours runs, and sends that answer's status line and headers twice. It logs the
 * reason first, from the connection's own thread (one thread per connection), and the URI
 * callback has told that thread which connection it serves: the logger answers first, with
 * one well-formed response. */
static _Thread_local struct MHD_Connection *tls_conn;
static _Thread_local char tls_uri[256];

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    tls_conn = c;
    snprintf(tls_uri, sizeof tls_uri, "%s", uri ? uri : "");
    return NULL; /* the request's state is made at its first call */
}

static void answer_bad_length(llmrt_server *s, int too_large)
{
    serve_conn cx = {.srv = s, .conn = tls_conn};
    cx.route = find_route(tls_uri);
    cx.route_name = cx.route >= 0 ? routes[cx.route].metric : "other";
    cx.t_start = llmrt_now_s();
    snprintf(cx.method, sizeof cx.method, "-");
    snprintf(cx.path, sizeof cx.path, "%s", tls_uri);
    pick_request_id(s, tls_conn, &cx);
    int status = too_large ? 413 : 400;
    raw_answer(s, tls_conn, status, too_large ? "request_too_large" : "invalid_content_length",
               too_large ? "the Content-Length header is larger than any body this server takes"
                         : "the Content-Length header must be a decimal number of bytes (0 or "
                           "more)",
               cx.request_id);
    serve_record_status(&cx, status);
    if (s->access_log)
        access_log(&cx, MHD_REQUEST_TERMINATED_WITH_ERROR, -1, -1);
    tls_conn = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    llmrt_server *s = cls;
    char line[256];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = 0;
    if (tls_conn && strstr(line, "Content-Length") &&
        (strstr(line, "Failed to parse") || strstr(line, "Too large value")))
        answer_bad_length(s, strstr(line, "Too large value") != NULL);
    pthread_mutex_lock(&s->mhd_log_mu);
    snprintf(s->mhd_last_error, sizeof s->mhd_last_error, "%s", line);
    pthread_mutex_unlock(&s->mhd_log_mu);
    /* client resets and timeouts are routine for a server: debug level */
    llmrt_log(LLMRT_LOG_DEBUG, "serve", "libmicrohttpd: %s", line);
}

llmrt_status serve_http_start(llmrt_server *s, llmrt_error *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    int g = getaddrinfo(s->host, port, &hints, &ai);
    if (g != 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "server.host '%s' is not an address this machine can bind: %s (use "
                          "an IP address such as 127.0.0.1, ::1 or 0.0.0.0)",
                          s->host, gai_strerror(g));
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->mhd_last_error[0] = 0;
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)s->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, s, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->max_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->timeout_s, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon)
        return llmrt_fail(err, LLMRT_ERR_IO,
                          "cannot listen on %s port %d (server.host, server.port): %s", s->host,
                          s->port,
                          s->mhd_last_error[0] ? s->mhd_last_error
                                               : "libmicrohttpd could not start");
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->bound_port = di && di->port ? di->port : s->port;
    atomic_store(&s->watchdog_stop, 0);
    int rc = pthread_create(&s->watchdog, NULL, watchdog_main, s);
    if (rc != 0) {
        MHD_stop_daemon(s->daemon);
        s->daemon = NULL;
        return llmrt_fail(err, LLMRT_ERR_INTERNAL, "cannot start the connection watchdog: %s",
                          strerror(rc));
    }
    s->watchdog_running = 1;
    return LLMRT_OK;
}

void serve_http_quiesce(llmrt_server *s)
{
    if (!s->daemon)
        return;
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void serve_http_stop(llmrt_server *s)
{
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    if (s->watchdog_running) {
        atomic_store(&s->watchdog_stop, 1);
        pthread_join(s->watchdog, NULL);
        s->watchdog_running = 0;
    }
}
