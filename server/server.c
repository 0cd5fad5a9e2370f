/* server.c — the server's life cycle behind server.h: its settings from the [server] keys,
 * listening, loading the model on a thread of its own while /health answers 503, the
 * stepping thread, draining, cancelling and stopping.
 *
 * Why a thread for the load: the port is bound first (a script using port 0 learns it, a
 * load balancer sees "loading"), and the caller's thread stays free for what it must watch
 * meanwhile (`llmrt serve`: its signals). The process stays the caller's: the server never
 * exits, installs no signal handler and prints nothing but log lines. */
#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "serve.h"

/* The model's name for clients: server.served_model_name, else the folder's last part. */
static void pick_model_name(llmrt_server *s)
{
    const char *name = llmrt_config_get(s->rt->cfg, "server.served_model_name");
    if (name && name[0]) {
        snprintf(s->model_name, sizeof s->model_name, "%s", name);
        return;
    }
    char path[4096];
    const char *p = llmrt_config_get(s->rt->cfg, "model.path");
    snprintf(path, sizeof path, "%s", p ? p : "");
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        path[--n] = 0;
    snprintf(s->model_name, sizeof s->model_name, "%s", n ? basename(path) : "model");
}

/* Before anything listens: a model folder that cannot be loaded at all is an error now, not
 * a 503 forever after "listening". */
static llmrt_status check_model_folder(const llmrt_config *cfg, const char *dir,
                                       llmrt_error *err)
{
    struct stat sb;
    char path[4200];
    const char *origin = llmrt_config_origin(cfg, "model.path");
    if (stat(dir, &sb) != 0)
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "model.path = %s (%s): %s", dir, origin,
                          strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "model.path = %s (%s) is not a folder (give a Hugging Face model "
                          "folder with config.json)",
                          dir, origin);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (access(path, R_OK) != 0)
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                          "model.path = %s (%s) has no readable config.json (%s): is it a "
                          "Hugging Face model folder?",
                          dir, origin, strerror(errno));
    return LLMRT_OK;
}

llmrt_status llmrt_server_open(llmrt_runtime *rt, llmrt_server **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_server *s = NULL;
    const llmrt_config *cfg = rt->cfg;
    *out = NULL;
    const char *model_path = llmrt_config_get(cfg, "model.path");
    if (!model_path || !model_path[0])
        FAIL(err, LLMRT_ERR_INVALID_ARG, "no model to serve: set [model] path (model.path)");
    TRY(check_model_folder(cfg, model_path, err));
    s = calloc(1, sizeof *s);
    TRY_ALLOC(err, s, "the server");
    pthread_mutex_init(&s->mhd_log_mu, NULL);
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_mutex_init(&s->rl_mu, NULL);
    pthread_mutex_init(&s->warn_mu, NULL);
    s->rt = rt;
    s->host = llmrt_config_get(cfg, "server.host");
    s->port = (int)llmrt_config_int(cfg, "server.port");
    s->api_key = llmrt_config_get(cfg, "server.api_key");
    if (!s->api_key)
        s->api_key = "";
    s->max_body = (size_t)llmrt_config_int(cfg, "server.max_body_bytes");
    s->max_connections = (int)llmrt_config_int(cfg, "server.max_connections");
    s->max_queue = (int)llmrt_config_int(cfg, "server.max_queue");
    s->timeout_s = (int)llmrt_config_int(cfg, "server.timeout_s");
    s->max_per_ip = (int)llmrt_config_int(cfg, "server.max_connections_per_ip");
    s->request_timeout_s = (int)llmrt_config_int(cfg, "server.request_timeout_s");
    s->access_log = llmrt_config_bool(cfg, "server.access_log");
    s->allow_special = llmrt_config_bool(cfg, "server.allow_special_tokens_in_content");
    const char *mp = llmrt_config_get(cfg, "server.metrics_prefix");
    s->vllm_metrics = mp && strcmp(mp, "vllm") == 0;
    s->cors = llmrt_config_get(cfg, "server.cors_origins");
    if (!s->cors)
        s->cors = "";
    const char *lf = llmrt_config_get(cfg, "server.log_format");
    llmrt_log_set_format(lf && strcmp(lf, "json") == 0 ? LLMRT_LOG_JSON : LLMRT_LOG_TEXT);
    s->log_interval_s = llmrt_config_float(cfg, "server.log_interval_s");
    const char *reasoning = llmrt_config_get(cfg, "server.reasoning");
    s->reasoning_split = !reasoning || strcmp(reasoning, "off") != 0;
    s->started = (int64_t)time(NULL);
    pick_model_name(s);
    if (getrandom(&s->id_salt, sizeof s->id_salt, 0) != (ssize_t)sizeof s->id_salt)
        s->id_salt = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    TRY(llmrt_serve_metrics_new(&s->metrics, err));
    *out = s;
    s = NULL;
cleanup:
    llmrt_server_close(s);
    return st;
}

/* 1 for an address only this machine reaches: 127.0.0.0/8, ::1, localhost. */
static int is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6) ||
               (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    return strcmp(host, "localhost") == 0;
}

llmrt_status llmrt_server_listen(llmrt_server *s, const char **url, llmrt_error *err)
{
    llmrt_status st = serve_http_start(s, err);
    if (st != LLMRT_OK)
        return st;
    int v6 = strchr(s->host, ':') != NULL;
    snprintf(s->url, sizeof s->url, "http://%s%s%s:%d", v6 ? "[" : "", s->host, v6 ? "]" : "",
             s->bound_port);
    *url = s->url;
    if (!s->api_key[0] && !is_loopback(s->host))
        llmrt_log(LLMRT_LOG_WARN, "serve",
                  "listening on %s (server.host = %s) without server.api_key: anyone who can "
                  "reach this port can use the model; set server.api_key (--api-key) or bind "
                  "127.0.0.1",
                  s->url, s->host);
    return LLMRT_OK;
}

/* After the engine is in: what the endpoints need from it, the stepping thread, ready. */
static llmrt_status start_serving(llmrt_server *s, llmrt_error *err)
{
    s->tok = llmrt_engine_tokenizer(s->engine);
    if (!s->tok)
        llmrt_log(LLMRT_LOG_WARN, "serve",
                  "the model folder has no tokenizer.json: prompts must be token ids and chat "
                  "is unavailable");
    else if (llmrt_engine_chat_unavailable(s->engine))
        llmrt_log(LLMRT_LOG_WARN, "serve", "/v1/chat/completions is unavailable: %s",
                  llmrt_engine_chat_unavailable(s->engine));
    llmrt_model_info mi;
    llmrt_engine_model_info(s->engine, &mi);
    s->vocab_size = mi.vocab;
    s->max_model_len = llmrt_engine_max_model_len(s->engine);

    const char *defaults = llmrt_engine_sampling_defaults_text(s->engine);
    if (defaults[0])
        llmrt_log(LLMRT_LOG_INFO, "serve",
                  "sampling defaults from the model's generation_config.json, for requests that "
                  "leave them out: %s",
                  defaults);
    const llmrt_chat_syntax *sx = llmrt_engine_chat_syntax(s->engine);
    if (sx && sx->think_open && !s->reasoning_split)
        llmrt_log(LLMRT_LOG_INFO, "serve",
                  "server.reasoning = off: chat replies keep their %s...%s reasoning in content",
                  sx->think_open, sx->think_close ? sx->think_close : "");

    llmrt_status st = serve_stepper_start(s, err);
    if (st != LLMRT_OK)
        return st;
    atomic_store(&s->ready, 1);
    llmrt_engine_stats es;
    llmrt_engine_stats_get(s->engine, &es);
    llmrt_log(LLMRT_LOG_INFO, "serve",
              "ready: `%s` on %s (max_model_len %d, KV cache %lld tokens, max_num_seqs %d, "
              "backend %s, memory path %s%s)",
              s->model_name, s->url, s->max_model_len, (long long)es.kv_capacity_tokens,
              es.max_num_seqs, es.backend, es.memory_path,
              s->api_key[0] ? ", API key required" : "");
    return LLMRT_OK;
}

static void *loader_main(void *arg)
{
    llmrt_server *s = arg;
    llmrt_engine_options o;
    llmrt_engine_options_init(&o);
    o.show_progress = 1; /* a bar on a terminal, plain lines (no control codes) in a log */
    o.on_step = serve_on_step;
    o.step_user = s;
    llmrt_engine *e = NULL;
    s->load_st = llmrt_engine_create(s->rt, &o, &e, &s->load_err);
    if (s->load_st == LLMRT_OK) {
        s->engine = e;
        s->load_st = start_serving(s, &s->load_err);
    }
    atomic_store(&s->load_done, 1);
    return NULL;
}

llmrt_status llmrt_server_load(llmrt_server *s, llmrt_error *err)
{
    if (s->loader_started || s->engine)
        return llmrt_fail(err, LLMRT_ERR_STATE, "llmrt_server_load: the model is already loaded "
                                                "or loading");
    llmrt_log(LLMRT_LOG_INFO, "serve", "loading the model from %s (served as `%s`)",
              llmrt_config_get(s->rt->cfg, "model.path"), s->model_name);
    int rc = pthread_create(&s->loader, NULL, loader_main, s);
    if (rc != 0)
        return llmrt_fail(err, LLMRT_ERR_INTERNAL, "cannot start the model-loading thread: %s",
                          strerror(rc));
    s->loader_started = 1;
    return LLMRT_OK;
}

/* Wait for the loader thread (it ends on its own; the load cannot be interrupted). */
static void join_loader(llmrt_server *s)
{
    if (!s->loader_started)
        return;
    pthread_join(s->loader, NULL);
    s->loader_started = 0;
}

llmrt_status llmrt_server_loaded(llmrt_server *s, int *done, llmrt_error *err)
{
    *done = atomic_load(&s->load_done);
    if (!*done)
        return LLMRT_OK;
    join_loader(s);
    if (s->load_st != LLMRT_OK)
        *err = s->load_err;
    return s->load_st;
}

void llmrt_server_drain(llmrt_server *s)
{
    atomic_store(&s->draining, 1);
    serve_http_quiesce(s);
}

void llmrt_server_abort(llmrt_server *s) { atomic_store(&s->abort_all, 1); }

int llmrt_server_busy(const llmrt_server *s, long *http, long *engine)
{
    long h = atomic_load(&s->http_active), e = atomic_load(&s->queued);
    if (http)
        *http = h;
    if (engine)
        *engine = e;
    return h > 0 || e > 0;
}

void llmrt_server_close(llmrt_server *s)
{
    if (!s)
        return;
    join_loader(s);
    serve_http_stop(s);
    serve_stepper_stop(s);
    if (s->engine)
        llmrt_engine_destroy(s->engine); /* requests still held get their final events here */
    llmrt_serve_metrics_free(s->metrics);
    pthread_mutex_destroy(&s->mhd_log_mu);
    pthread_mutex_destroy(&s->conn_mu);
    pthread_mutex_destroy(&s->rl_mu);
    for (int i = 0; i < s->n_warned; i++)
        free(s->warned[i]);
    free(s->warned);
    pthread_mutex_destroy(&s->warn_mu);
    free(s);
}

#define MAX_WARNED 256 /* distinct unknown field names remembered */

void serve_warn_unknown_field(llmrt_server *s, const char *name)
{
    pthread_mutex_lock(&s->warn_mu);
    int seen = 0;
    for (int i = 0; i < s->n_warned && !seen; i++)
        seen = strcmp(s->warned[i], name) == 0;
    if (!seen && s->n_warned < MAX_WARNED) {
        char **g = realloc(s->warned, (size_t)(s->n_warned + 1) * sizeof *g);
        char *copy = strdup(name);
        if (g)
            s->warned = g;
        if (g && copy) {
            s->warned[s->n_warned++] = copy;
            llmrt_log(LLMRT_LOG_WARN, "serve",
                      "request field '%.200s' is not known to this server and is ignored "
                      "(logged once per field name)",
                      name);
            if (s->n_warned == MAX_WARNED)
                llmrt_log(LLMRT_LOG_WARN, "serve",
                          "%d distinct unknown request fields seen: no more are logged",
                          MAX_WARNED);
        } else {
            free(copy);
        }
    }
    pthread_mutex_unlock(&s->warn_mu);
}
