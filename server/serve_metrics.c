/* serve_metrics.c — counters and histograms of `llmrt serve`, rendered as Prometheus text
 * (see serve_metrics.h). One mutex guards everything: recording is a few additions, far
 * off any hot path compared with a model step. */
#include "serve_metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- histograms ---- */

#define MAX_BUCKETS 32

typedef struct histogram {
    const char *name, *help;
    const double *bounds; /* [n] upper bounds, increasing; +Inf is implicit */
    int n;
    uint64_t counts[MAX_BUCKETS + 1]; /* [n + 1] per bucket (not cumulative) */
    double sum;
    uint64_t count;
} histogram;

static const double latency_bounds[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                        0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                        20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
static const double itl_bounds[] = {0.0005, 0.001, 0.002, 0.003, 0.004, 0.005, 0.0075,
                                    0.01,   0.015, 0.02,  0.03,  0.05,  0.075, 0.1,
                                    0.15,   0.2,   0.3,   0.5,   0.75,  1.0,   2.5,
                                    5.0,    10.0,  20.0,  40.0,  80.0};
static const double e2e_bounds[] = {0.05, 0.1,  0.3,  0.5,  0.8,   1.0,   1.5,   2.0,
                                    2.5,  5.0,  10.0, 15.0, 20.0,  30.0,  40.0,  50.0,
                                    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
static const double step_bounds[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002,
                                     0.003,   0.005,  0.0075,  0.01,   0.015, 0.025,
                                     0.05,    0.1,    0.25,    0.5,    1.0,   2.5};
static const double token_bounds[] = {1,    2,    5,    10,    20,    50,    100,   200,
                                      500,  1000, 2000, 5000,  10000, 20000, 50000, 100000};

#define NB(a) ((int)(sizeof(a) / sizeof *(a)))

enum { H_TTFT, H_ITL, H_E2E, H_PROMPT, H_GEN, H_BUSY, H_IDLE, H_COUNT };

/* ---- HTTP responses by route and status ---- */

static const char *const routes[] = {"/v1/models",   "/v1/completions", "/v1/chat/completions",
                                     "/tokenize",    "/detokenize",     "/health",
                                     "/metrics",     "other"};
#define N_ROUTES NB(routes)
#define MAX_HTTP_KEYS 128

typedef struct http_count {
    int route, status;
    uint64_t n;
} http_count;

struct llmrt_serve_metrics {
    pthread_mutex_t mu;
    histogram h[H_COUNT];
    http_count http[MAX_HTTP_KEYS];
    int n_http;
    uint64_t finished[LLMRT_FINISH_ERROR + 1]; /* by finish reason */
};

static void hist_init(histogram *h, const char *name, const char *help, const double *b, int n)
{
    h->name = name;
    h->help = help;
    h->bounds = b;
    h->n = n;
}

static void hist_observe(histogram *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

llmrt_status llmrt_serve_metrics_new(llmrt_serve_metrics **out, llmrt_error *err)
{
    llmrt_serve_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory allocating server metrics");
    pthread_mutex_init(&m->mu, NULL);
    hist_init(&m->h[H_TTFT], "llmrt_time_to_first_token_seconds",
              "Time from request arrival to its first generated token.", latency_bounds,
              NB(latency_bounds));
    hist_init(&m->h[H_ITL], "llmrt_inter_token_latency_seconds",
              "Time between consecutive generated tokens of a request.", itl_bounds,
              NB(itl_bounds));
    hist_init(&m->h[H_E2E], "llmrt_e2e_request_latency_seconds",
              "Time from request arrival to its last token (per choice).", e2e_bounds,
              NB(e2e_bounds));
    hist_init(&m->h[H_PROMPT], "llmrt_request_prompt_tokens",
              "Prompt length of finished requests, in tokens.", token_bounds, NB(token_bounds));
    hist_init(&m->h[H_GEN], "llmrt_request_generation_tokens",
              "Generated tokens of finished requests.", token_bounds, NB(token_bounds));
    hist_init(&m->h[H_BUSY], "llmrt_step_device_busy_seconds",
              "Device stream time of one engine step (inputs copy + forward + sampling + "
              "outputs copy).",
              step_bounds, NB(step_bounds));
    hist_init(&m->h[H_IDLE], "llmrt_step_device_idle_seconds",
              "Device time lost to the host in one engine step (step period minus busy time).",
              step_bounds, NB(step_bounds));
    *out = m;
    return LLMRT_OK;
}

void llmrt_serve_metrics_free(llmrt_serve_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void llmrt_serve_metrics_http(llmrt_serve_metrics *m, const char *route, int status)
{
    int r = N_ROUTES - 1;
    for (int i = 0; i < N_ROUTES - 1; i++)
        if (route && strcmp(route, routes[i]) == 0)
            r = i;
    pthread_mutex_lock(&m->mu);
    int i;
    for (i = 0; i < m->n_http; i++)
        if (m->http[i].route == r && m->http[i].status == status)
            break;
    if (i == m->n_http && m->n_http < MAX_HTTP_KEYS)
        m->http[m->n_http++] = (http_count){.route = r, .status = status};
    if (i < m->n_http)
        m->http[i].n++;
    pthread_mutex_unlock(&m->mu);
}

void llmrt_serve_metrics_finished(llmrt_serve_metrics *m, llmrt_finish_reason reason,
                                  int64_t prompt_tokens, int64_t completion_tokens, double e2e_s)
{
    pthread_mutex_lock(&m->mu);
    if ((int)reason >= 0 && reason <= LLMRT_FINISH_ERROR)
        m->finished[reason]++;
    hist_observe(&m->h[H_E2E], e2e_s);
    hist_observe(&m->h[H_PROMPT], (double)prompt_tokens);
    hist_observe(&m->h[H_GEN], (double)completion_tokens);
    pthread_mutex_unlock(&m->mu);
}

void llmrt_serve_metrics_ttft(llmrt_serve_metrics *m, double seconds)
{
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->h[H_TTFT], seconds);
    pthread_mutex_unlock(&m->mu);
}

void llmrt_serve_metrics_itl(llmrt_serve_metrics *m, double seconds)
{
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->h[H_ITL], seconds);
    pthread_mutex_unlock(&m->mu);
}

void llmrt_serve_metrics_step(llmrt_serve_metrics *m, const llmrt_step_record *rec)
{
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->h[H_BUSY], rec->gpu_busy_ms / 1000.0);
    hist_observe(&m->h[H_IDLE], rec->idle_ms / 1000.0);
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ---- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) LLMRT_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *g = realloc(b->p, cap);
        if (!g) {
            b->oom = 1;
            return;
        }
        b->p = g;
        b->cap = cap;
    }
}

char *llmrt_serve_metrics_escape(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; s && *s && o + 3 < cap; s++) {
        if (*s == '\\' || *s == '"') {
            out[o++] = '\\';
            out[o++] = *s;
        } else if (*s == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else {
            out[o++] = *s;
        }
    }
    out[o] = 0;
    return out;
}

static void head(sbuf *b, const char *name, const char *type, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void one(sbuf *b, const char *name, const char *type, const char *help, double v)
{
    head(b, name, type, help);
    sb_printf(b, "%s %.17g\n", name, v);
}

static void hist_render(sbuf *b, const histogram *h)
{
    head(b, h->name, "histogram", h->help);
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        sb_printf(b, "%s_bucket{le=\"%g\"} %llu\n", h->name, h->bounds[i],
                  (unsigned long long)cum);
    }
    cum += h->counts[h->n];
    sb_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", h->name, (unsigned long long)cum);
    sb_printf(b, "%s_sum %.17g\n%s_count %llu\n", h->name, h->sum, h->name,
              (unsigned long long)h->count);
}

char *llmrt_serve_metrics_render(llmrt_serve_metrics *m, const llmrt_serve_metrics_info *info,
                                 size_t *len)
{
    sbuf b = {.p = malloc(16384), .cap = 16384};
    if (!b.p)
        return NULL;
    b.p[0] = 0;
    const llmrt_engine_stats *st = info->stats;
    char e1[256], e2[256], e3[256], e4[256], e5[256], e6[256];

    one(&b, "llmrt_engine_ready", "gauge",
        "1 when the model is loaded and the engine has not failed (what /health reports).",
        info->ready ? 1 : 0);
    one(&b, "llmrt_http_requests_in_flight", "gauge", "HTTP requests being served now.",
        (double)info->http_in_flight);

    pthread_mutex_lock(&m->mu);
    head(&b, "llmrt_http_requests_total", "counter", "HTTP responses by route and status.");
    for (int i = 0; i < m->n_http; i++)
        sb_printf(&b, "llmrt_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                  routes[m->http[i].route], m->http[i].status,
                  (unsigned long long)m->http[i].n);
    head(&b, "llmrt_requests_finished_total", "counter",
         "Generation requests (one per choice) finished, by finish reason.");
    for (int r = LLMRT_FINISH_STOP; r <= LLMRT_FINISH_ERROR; r++)
        sb_printf(&b, "llmrt_requests_finished_total{finish_reason=\"%s\"} %llu\n",
                  llmrt_finish_reason_str((llmrt_finish_reason)r),
                  (unsigned long long)m->finished[r]);
    for (int i = 0; i < H_COUNT; i++)
        hist_render(&b, &m->h[i]);
    pthread_mutex_unlock(&m->mu);

    if (st) {
        one(&b, "llmrt_prompt_tokens_total", "counter", "Prompt tokens of submitted requests.",
            (double)st->prompt_tokens);
        one(&b, "llmrt_generation_tokens_total", "counter", "Generated tokens.",
            (double)st->generated_tokens);
        one(&b, "llmrt_prefill_tokens_total", "counter",
            "Token rows computed as prefill (prompts and recomputation after preemption).",
            (double)st->prefill_tokens);
        one(&b, "llmrt_engine_steps_total", "counter", "Engine steps run.", (double)st->steps);
        one(&b, "llmrt_preemptions_total", "counter",
            "Sequences preempted (KV blocks taken back) to make room.", (double)st->preemptions);
        one(&b, "llmrt_num_requests_running", "gauge", "Sequences holding KV-cache blocks.",
            st->running);
        one(&b, "llmrt_num_requests_waiting", "gauge",
            "Sequences queued, including preempted ones.", st->waiting);
        one(&b, "llmrt_kv_cache_usage_perc", "gauge",
            "Fraction of KV-cache blocks in use (1 = full).",
            st->kv_blocks_total ? (double)st->kv_blocks_used / st->kv_blocks_total : 0.0);
        one(&b, "llmrt_kv_cache_blocks_used", "gauge", "KV-cache blocks in use.",
            st->kv_blocks_used);
        one(&b, "llmrt_kv_cache_blocks_total", "gauge", "KV-cache blocks in all.",
            st->kv_blocks_total);
        one(&b, "llmrt_prefix_cache_queries_total", "counter",
            "Tokens looked up in the prefix cache when sequences were admitted (vLLM's "
            "prefix_cache_queries).",
            (double)st->prefix_cache_queries);
        one(&b, "llmrt_prefix_cache_hits_total", "counter",
            "Of them, tokens found in the prefix cache and not computed (vLLM's "
            "prefix_cache_hits).",
            (double)st->prefix_cache_hits);
        one(&b, "llmrt_prefix_cache_evictions_total", "counter",
            "Cached KV blocks reclaimed for other tokens (least recently used first).",
            (double)st->prefix_cache_evictions);
        one(&b, "llmrt_prefix_cache_blocks", "gauge",
            "KV-cache blocks whose tokens are cached now (held by requests or reclaimable).",
            st->prefix_cache_blocks);
        one(&b, "llmrt_prefix_caching_enabled", "gauge", "1 when cache.prefix_caching is on.",
            st->prefix_caching ? 1 : 0);
        one(&b, "llmrt_memory_h2d_bytes_total", "counter",
            "Step input bytes copied host to device by the memory plugin.",
            (double)st->mem.h2d_bytes);
        one(&b, "llmrt_memory_d2h_bytes_total", "counter",
            "Step output bytes copied device to host by the memory plugin.",
            (double)st->mem.d2h_bytes);

        /* "pageable (fallback from pinned)" → path="pageable", fallback="true" */
        char path[64];
        snprintf(path, sizeof path, "%s", st->memory_path);
        char *sp = strchr(path, ' ');
        if (sp)
            *sp = 0;
        head(&b, "llmrt_memory_path_info", "gauge",
             "The host-memory path in use for step buffers (after any fallback); plugin is "
             "the one requested.");
        sb_printf(&b, "llmrt_memory_path_info{plugin=\"%s\",path=\"%s\",fallback=\"%s\"} 1\n",
                  llmrt_serve_metrics_escape(st->memory_plugin, e1, sizeof e1),
                  llmrt_serve_metrics_escape(path, e2, sizeof e2),
                  strstr(st->memory_path, "fallback") ? "true" : "false");
        head(&b, "llmrt_model_info", "gauge", "The model being served.");
        sb_printf(&b,
                  "llmrt_model_info{model_name=\"%s\",arch=\"%s\",quant=\"%s\",backend=\"%s\","
                  "device=\"%s\",kv_dtype=\"%s\",max_model_len=\"%d\"} 1\n",
                  llmrt_serve_metrics_escape(info->model_name, e1, sizeof e1),
                  llmrt_serve_metrics_escape(st->model_arch, e2, sizeof e2),
                  llmrt_serve_metrics_escape(st->quant, e3, sizeof e3),
                  llmrt_serve_metrics_escape(st->backend, e4, sizeof e4),
                  llmrt_serve_metrics_escape(st->device, e5, sizeof e5),
                  llmrt_serve_metrics_escape(st->kv_dtype, e6, sizeof e6), st->max_model_len);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.len;
    return b.p;
}
