/* serve_http.c — `llmrt serve`'s HTTP layer on libmicrohttpd: bind, route, check the API
 * key, receive bodies under server.max_body_bytes (never buffering past it), answer errors
 * in OpenAI's shape, and hand complete requests to the endpoint handlers.
 *
 * libmicrohttpd runs a thread per connection (MHD_USE_THREAD_PER_CONNECTION), so a
 * handler may block while its tokens are generated; a client that goes away is noticed
 * by polling its socket (serve_client_gone) and by MHD's request-completed callback. */
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "serve.h"
#include "serve_response.h"

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
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    llmrt_serve_metrics_http(cx->srv->metrics, cx->route_name, status);
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
    llmrt_log(level, "serve", "%s: %d %s", cx->route_name ? cx->route_name : "?", e->status,
              e->message);
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
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
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
        cx->route = find_route(url);
        cx->route_name = cx->route >= 0 ? routes[cx->route].metric : "other";
        *con_cls = cx;
        atomic_fetch_add(&s->http_active, 1);
        /* With a body coming, refuse early (MHD then closes the connection instead of
         * reading a body nobody wants); without one, answer on the next call, once MHD
         * knows the request is complete and can keep the connection alive. */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_TRANSFER_ENCODING);
        cx->checked = (cl && strtoull(cl, NULL, 10) > 0) || te;
        if (cx->checked && first_call(c, cx, url, method, &rc))
            return rc;
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

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    llmrt_server *s = cls;
    serve_conn *cx = *con_cls;
    (void)c;
    if (!cx)
        return;
    if (cx->gen)
        serve_generate_done(cx->gen, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    free(cx->body);
    free(cx);
    *con_cls = NULL;
    atomic_fetch_sub(&s->http_active, 1);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    llmrt_server *s = cls;
    char line[256];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = 0;
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
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)s->max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->timeout_s,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon)
        return llmrt_fail(err, LLMRT_ERR_IO,
                          "cannot listen on %s port %d (server.host, server.port): %s", s->host,
                          s->port,
                          s->mhd_last_error[0] ? s->mhd_last_error
                                               : "libmicrohttpd could not start");
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->bound_port = di && di->port ? di->port : s->port;
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
}
