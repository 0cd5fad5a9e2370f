/* cmd_serve.c — `llmrt serve`: an OpenAI-compatible HTTP server on the engine, a drop-in
 * for clients of vLLM's server (curl, the openai SDKs, chat UIs).
 *
 * Start-up order: bind the port first (and print "listening on http://HOST:PORT", so a
 * script using port 0 learns the port), then load the model while /health answers 503,
 * then start the stepping thread and answer 200. Shutdown: the first SIGINT/SIGTERM stops
 * accepting connections and lets every in-flight request finish (new requests on open
 * connections get 503), then exits 0; a second signal cancels what is still running.
 * Signals are blocked in every thread and taken synchronously here with sigtimedwait, so
 * no handler runs in an arbitrary thread. */
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "common.h"
#include "log.h"
#include "serve.h"

static const char usage[] =
    "usage: llmrt serve [-c FILE] [--model DIR] [--port N] [--host ADDR] [--set K=V]\n\n"
    "OpenAI-compatible HTTP server for the model in model.path:\n"
    "  GET  /v1/models             POST /v1/completions      POST /v1/chat/completions\n"
    "  POST /tokenize              POST /detokenize          GET  /health\n"
    "  GET  /metrics (Prometheus)  GET  /version\n"
    "Streaming (\"stream\": true) uses server-sent events. Every request goes through the\n"
    "engine's continuous batching. Settings are the [server] keys of runtime.ini (host,\n"
    "port, api_key, served_model_name, max_body_bytes, max_connections, max_queue,\n"
    "timeout_s, log_interval_s).\n\n"
    "Prints \"listening on http://HOST:PORT\" on stdout once the port is bound; the model\n"
    "loads after that and /health answers 503 until it is ready. SIGINT/SIGTERM: stop\n"
    "accepting, let in-flight requests finish, exit 0; a second signal cancels them.\n\n"
    "options:\n"
    "  --port N               TCP port (short for --set server.port=N; 0 picks a free one)\n"
    "  --host ADDR            address to bind (short for --set server.host=ADDR)\n" CLI_COMMON_USAGE;

typedef struct loader {
    serve_server *s;
    llmrt_engine *engine;
    llmrt_error err;
    llmrt_status st;
    atomic_int done;
} loader;

static void *load_main(void *arg)
{
    loader *l = arg;
    llmrt_engine_options o;
    llmrt_engine_options_init(&o);
    o.show_progress = isatty(STDERR_FILENO);
    o.on_step = serve_on_step;
    o.step_user = l->s;
    l->st = llmrt_engine_create(l->s->rt, &o, &l->engine, &l->err);
    atomic_store(&l->done, 1);
    return NULL;
}

/* Wait up to ms for SIGINT/SIGTERM; returns the signal or 0. */
static int wait_signal(const sigset_t *set, long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
}

/* The model's name for clients: server.served_model_name, else the folder's last part. */
static void pick_model_name(serve_server *s)
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

static void print_url(const serve_server *s, FILE *f, const char *prefix)
{
    int v6 = strchr(s->host, ':') != NULL;
    fprintf(f, "%shttp://%s%s%s:%d\n", prefix, v6 ? "[" : "", s->host, v6 ? "]" : "",
            s->bound_port);
    fflush(f);
}

int cmd_serve(int argc, char **argv)
{
    enum { OPT_PORT = CLI_OPT_FIRST_OWN, OPT_HOST };
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                          {"port", required_argument, 0, OPT_PORT},
                                          {"host", required_argument, 0, OPT_HOST},
                                          {0, 0, 0, 0}};
    cli_common c = {0};
    char port_set[64] = "", host_set[300] = "";
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        if (opt == OPT_PORT) {
            snprintf(port_set, sizeof port_set, "server.port=%s", optarg);
            continue;
        }
        if (opt == OPT_HOST) {
            snprintf(host_set, sizeof host_set, "server.host=%s", optarg);
            continue;
        }
        int r = cli_common_opt(&c, opt, optarg, "serve", usage);
        if (r < 0)
            return 2;
        if (r == 0)
            return cli_bad_option("serve", usage);
    }
    if (optind < argc)
        return cli_usage_error("serve", usage, "unexpected argument '%s'", argv[optind]);
    /* --port/--host are --set overrides, applied after the explicit ones */
    if (port_set[0] && c.n_sets < CLI_MAX_SETS)
        c.sets[c.n_sets++] = port_set;
    if (host_set[0] && c.n_sets < CLI_MAX_SETS)
        c.sets[c.n_sets++] = host_set;

    serve_server s = {0};
    llmrt_error err = {0};
    int rc = 1;
    pthread_t load_thread;
    int load_started = 0;
    loader ld = {.s = &s};
    pthread_mutex_init(&s.mhd_log_mu, NULL);

    if (cli_open_runtime(&c, &s.rt))
        return 1;
    const llmrt_config *cfg = s.rt->cfg;
    const char *model_path = llmrt_config_get(cfg, "model.path");
    if (!model_path || !model_path[0]) {
        llmrt_runtime_close(s.rt);
        return cli_usage_error("serve", usage,
                               "no model: pass --model DIR or set [model] path in runtime.ini");
    }
    s.host = llmrt_config_get(cfg, "server.host");
    s.port = (int)llmrt_config_int(cfg, "server.port");
    s.api_key = llmrt_config_get(cfg, "server.api_key");
    if (!s.api_key)
        s.api_key = "";
    s.max_body = (size_t)llmrt_config_int(cfg, "server.max_body_bytes");
    s.max_connections = (int)llmrt_config_int(cfg, "server.max_connections");
    s.max_queue = (int)llmrt_config_int(cfg, "server.max_queue");
    s.timeout_s = (int)llmrt_config_int(cfg, "server.timeout_s");
    s.log_interval_s = llmrt_config_float(cfg, "server.log_interval_s");
    s.started = (int64_t)time(NULL);
    pick_model_name(&s);
    if (getrandom(&s.id_salt, sizeof s.id_salt, 0) != (ssize_t)sizeof s.id_salt)
        s.id_salt = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

    if (llmrt_serve_metrics_new(&s.metrics, &err) != LLMRT_OK)
        goto fail;

    /* every thread started from here on inherits the blocked set */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (serve_http_start(&s, &err) != LLMRT_OK)
        goto fail;
    print_url(&s, stdout, "listening on ");
    llmrt_log(LLMRT_LOG_INFO, "serve", "loading the model from %s (served as `%s`)", model_path,
              s.model_name);

    if (pthread_create(&load_thread, NULL, load_main, &ld) != 0) {
        llmrt_fail(&err, LLMRT_ERR_INTERNAL, "cannot start the model-loading thread");
        goto fail;
    }
    load_started = 1;
    while (!atomic_load(&ld.done)) {
        int sig = wait_signal(&sigs, 100);
        if (sig) {
            /* nothing is in flight yet, so there is nothing to drain; the engine cannot be
             * interrupted mid-load, so leave without unwinding it */
            llmrt_log(LLMRT_LOG_INFO, "serve", "%s while loading the model: exiting",
                      strsignal(sig));
            serve_http_stop(&s);
            _exit(0);
        }
    }
    pthread_join(load_thread, NULL);
    load_started = 0;
    if (ld.st != LLMRT_OK) {
        err = ld.err;
        goto fail;
    }
    s.engine = ld.engine;

    s.tok = llmrt_engine_tokenizer(s.engine);
    if (!s.tok)
        llmrt_log(LLMRT_LOG_WARN, "serve",
                  "the model folder has no tokenizer.json: prompts must be token ids and chat "
                  "is unavailable");
    else if (llmrt_engine_chat_unavailable(s.engine))
        llmrt_log(LLMRT_LOG_WARN, "serve", "/v1/chat/completions is unavailable: %s",
                  llmrt_engine_chat_unavailable(s.engine));
    llmrt_model_info mi;
    llmrt_engine_model_info(s.engine, &mi);
    s.vocab_size = mi.vocab;
    s.max_model_len = llmrt_engine_max_model_len(s.engine);

    if (serve_stepper_start(&s, &err) != LLMRT_OK)
        goto fail;
    atomic_store(&s.ready, 1);
    {
        llmrt_engine_stats st;
        llmrt_engine_stats_get(s.engine, &st);
        char url[600];
        snprintf(url, sizeof url, "%s%s%s:%d", strchr(s.host, ':') ? "[" : "", s.host,
                 strchr(s.host, ':') ? "]" : "", s.bound_port);
        llmrt_log(LLMRT_LOG_INFO, "serve",
                  "ready: `%s` on http://%s (max_model_len %d, KV cache %lld tokens, "
                  "max_num_seqs %d, backend %s, memory path %s%s)",
                  s.model_name, url, s.max_model_len, (long long)st.kv_capacity_tokens,
                  st.max_num_seqs, st.backend, st.memory_path,
                  s.api_key[0] ? ", API key required" : "");
    }

    int sig = 0;
    while (!(sig = wait_signal(&sigs, 1000)))
        ;
    atomic_store(&s.draining, 1);
    serve_http_quiesce(&s);
    llmrt_log(LLMRT_LOG_INFO, "serve",
              "%s: no new connections; draining %ld HTTP request(s) in flight (signal again to "
              "cancel them)",
              strsignal(sig), atomic_load(&s.http_active));
    double abort_deadline = 0;
    while (atomic_load(&s.http_active) > 0 || atomic_load(&s.queued) > 0) {
        if (wait_signal(&sigs, 50) && !atomic_load(&s.abort_all)) {
            atomic_store(&s.abort_all, 1);
            abort_deadline = serve_now() + 10.0;
            llmrt_log(LLMRT_LOG_WARN, "serve", "second signal: cancelling %ld request(s)",
                      atomic_load(&s.queued));
        }
        /* cancelled requests end within a step; a client that stopped reading is cut off
         * when the connections close below */
        if (abort_deadline && serve_now() > abort_deadline)
            break;
    }
    llmrt_log(LLMRT_LOG_INFO, "serve", "%s; stopping",
              atomic_load(&s.http_active) ? "closing the remaining connections" : "drained");
    rc = 0;

fail:
    if (rc != 0)
        cli_fail("serve", &err);
    if (load_started) {
        pthread_join(load_thread, NULL);
        if (ld.st == LLMRT_OK)
            s.engine = ld.engine;
    }
    serve_http_stop(&s);
    if (s.engine)
        serve_stepper_stop(&s);
    if (s.engine)
        llmrt_engine_destroy(s.engine); /* requests still held get their final events here */
    llmrt_serve_metrics_free(s.metrics);
    llmrt_runtime_close(s.rt);
    pthread_mutex_destroy(&s.mhd_log_mu);
    return rc;
}
