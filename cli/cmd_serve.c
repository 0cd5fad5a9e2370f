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
    "usage: llmrt serve [MODEL_DIR] [-c FILE] [--port N] [--host ADDR] [--set K=V] [options]\n\n"
    "OpenAI-compatible HTTP server for the model in MODEL_DIR (or model.path):\n"
    "  GET  /v1/models             POST /v1/completions      POST /v1/chat/completions\n"
    "  POST /tokenize              POST /detokenize          GET  /health\n"
    "  GET  /metrics (Prometheus)  GET  /version\n"
    "Streaming (\"stream\": true) uses server-sent events. Every request goes through the\n"
    "engine's continuous batching. Settings are the [server] keys of runtime.ini (host,\n"
    "port, api_key, served_model_name, timeouts, connection limits, logging, CORS, metrics;\n"
    "`llmrt config --show` lists them).\n\n"
    "Prints \"listening on http://HOST:PORT\" on stdout once the port is bound; the model\n"
    "loads after that and /health answers 503 until it is ready. A model folder that does\n"
    "not exist (or has no config.json) fails before anything listens. SIGINT/SIGTERM: stop\n"
    "accepting, let in-flight requests finish, exit 0; a second signal cancels them.\n\n"
    "options (each short for a --set of its key; an explicit --set wins over them):\n"
    "  MODEL_DIR              the model folder (as --model DIR)\n"
    "  --port N               server.port (0 picks a free one)\n"
    "  --host ADDR            server.host (127.0.0.1 by default; 0.0.0.0 exposes the server)\n"
    "  --api-key KEY          server.api_key (requests need 'Authorization: Bearer KEY')\n"
    "  --served-model-name N  server.served_model_name\n" CLI_COMMON_USAGE;

/* Wait up to ms for SIGINT/SIGTERM; returns the signal or 0. */
static int wait_signal(const sigset_t *set, long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    int sig = sigtimedwait(set, NULL, &ts);
    return sig > 0 ? sig : 0;
}

int cmd_serve(int argc, char **argv)
{
    enum { OPT_PORT = CLI_OPT_FIRST_OWN, OPT_HOST, OPT_API_KEY, OPT_SERVED_NAME };
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                          {"port", required_argument, 0, OPT_PORT},
                                          {"host", required_argument, 0, OPT_HOST},
                                          {"api-key", required_argument, 0, OPT_API_KEY},
                                          {"served-model-name", required_argument, 0,
                                           OPT_SERVED_NAME},
                                          {0, 0, 0, 0}};
    static const char *const keys[] = {[OPT_PORT - CLI_OPT_FIRST_OWN] = "server.port",
                                       [OPT_HOST - CLI_OPT_FIRST_OWN] = "server.host",
                                       [OPT_API_KEY - CLI_OPT_FIRST_OWN] = "server.api_key",
                                       [OPT_SERVED_NAME - CLI_OPT_FIRST_OWN] =
                                           "server.served_model_name"};
    cli_common c = {0};
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        if (opt >= OPT_PORT && opt <= OPT_SERVED_NAME) {
            if (cli_common_alias(&c, keys[opt - CLI_OPT_FIRST_OWN], optarg, "serve"))
                return 2;
            continue;
        }
        int r = cli_common_opt(&c, opt, optarg, "serve", usage);
        if (r < 0)
            return 2;
        if (r == 0)
            return cli_bad_option("serve", opts, argv);
    }
    /* `llmrt serve MODEL_DIR`, as `vllm serve MODEL` */
    if (optind < argc) {
        if (c.model_set[0])
            return cli_usage_error("serve", usage, "the model is given twice: '%s' and --model",
                                   argv[optind]);
        snprintf(c.model_set, sizeof c.model_set, "model.path=%s", argv[optind++]);
    }
    if (optind < argc)
        return cli_usage_error("serve", usage, "unexpected argument '%s' (one model folder "
                               "only)", argv[optind]);

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
