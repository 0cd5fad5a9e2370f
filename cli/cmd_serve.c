/* cmd_serve.c — `llmrt serve`: an OpenAI-compatible HTTP server on the engine, a drop-in
 * for clients of vLLM's server (curl, the openai SDKs, chat UIs). The server is the server
 * library (server/server.h); this file is its options and the process's signals.
 *
 * Start-up order: bind the port first (and print "listening on http://HOST:PORT", so a
 * script using port 0 learns the port), then load the model while /health answers 503,
 * then answer 200. Shutdown: the first SIGINT/SIGTERM stops accepting connections and lets
 * every in-flight request finish (new requests on open connections get 503), then exits 0;
 * a second signal cancels what is still running. Signals are blocked in every thread and
 * taken synchronously here with sigtimedwait, so no handler runs in an arbitrary thread. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "commands.h"
#include "common.h"
#include "log.h"
#include "server.h"

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

/* Wait up to ms for SIGINT/SIGTERM; returns the signal or 0. */
static int wait_signal(const sigset_t *set, long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
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

    llmrt_runtime *rt = NULL;
    llmrt_server *srv = NULL;
    llmrt_error err = {0};
    const char *url;
    int rc = 1;

    if (cli_open_runtime(&c, &rt))
        return 1;
    const char *model_path = llmrt_config_get(rt->cfg, "model.path");
    if (!model_path || !model_path[0]) {
        llmrt_runtime_close(rt);
        return cli_usage_error("serve", usage,
                               "no model: pass --model DIR or set [model] path in runtime.ini");
    }
    if (llmrt_server_open(rt, &srv, &err) != LLMRT_OK)
        goto fail;

    /* every thread started from here on inherits the blocked set */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (llmrt_server_listen(srv, &url, &err) != LLMRT_OK)
        goto fail;
    printf("listening on %s\n", url);
    fflush(stdout);
    if (llmrt_server_load(srv, &err) != LLMRT_OK)
        goto fail;
    for (int done = 0; !done;) {
        int sig = wait_signal(&sigs, 100);
        if (sig) {
            /* nothing is in flight yet (generation answers 503 until ready); the engine
             * cannot be interrupted mid-load, so stop accepting and leave without
             * unwinding it */
            llmrt_log(LLMRT_LOG_INFO, "serve", "%s while loading the model: exiting",
                      strsignal(sig));
            llmrt_server_drain(srv);
            _exit(0);
        }
        if (llmrt_server_loaded(srv, &done, &err) != LLMRT_OK)
            goto fail;
    }

    int sig = 0;
    while (!(sig = wait_signal(&sigs, 1000)))
        ;
    llmrt_server_drain(srv);
    long http = 0, engine = 0;
    llmrt_server_busy(srv, &http, NULL);
    llmrt_log(LLMRT_LOG_INFO, "serve",
              "%s: no new connections; draining %ld HTTP request(s) in flight (signal again to "
              "cancel them)",
              strsignal(sig), http);
    double abort_deadline = 0;
    while (llmrt_server_busy(srv, NULL, NULL)) {
        if (wait_signal(&sigs, 50) && !abort_deadline) {
            llmrt_server_abort(srv);
            abort_deadline = llmrt_now_s() + 10.0;
            llmrt_server_busy(srv, NULL, &engine);
            llmrt_log(LLMRT_LOG_WARN, "serve", "second signal: cancelling %ld request(s)",
                      engine);
        }
        /* cancelled requests end within a step; a client that stopped reading is cut off
         * when the connections close below */
        if (abort_deadline && llmrt_now_s() > abort_deadline)
            break;
    }
    llmrt_server_busy(srv, &http, NULL);
    llmrt_log(LLMRT_LOG_INFO, "serve", "%s; stopping",
              http ? "closing the remaining connections" : "drained");
    rc = 0;

fail:
    if (rc != 0)
        cli_fail("serve", &err);
    llmrt_server_close(srv);
    llmrt_runtime_close(rt);
    return rc;
}
