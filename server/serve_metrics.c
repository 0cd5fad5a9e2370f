/* serve_metrics.c — counters and histograms of `llmrt serve`, rendered as Prometheus text
 * (see serve_metrics.h). One mutex guards everything: recording is a few additions, far
 * off any hot path compared with a model step.
 *
 * Each family has its llmrt_ name and, where vLLM has one, vLLM's: the renderer picks by
 * the page's naming (info->vllm_names). Every sample line starts its labels with
 * model_name. */
#include "serve_metrics.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---- histograms ---- */

#define MAX_BUCKETS 32

typedef struct histogram {
    const char *name;  /* llmrt_ name */
    const char *vllm;  /* vLLM's name, or NULL */
    const char *vllm2; /* a second vLLM name for the same data (an older or newer one) */
    const char *help;
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
static const double iteration_bounds[] = {1,   8,    16,   32,   64,   128,   256,
                                          512, 1024, 2048, 4096, 8192, 16384};
static const double n_bounds[] = {1, 2, 5, 10, 20};

#define NB(a) ((int)(sizeof(a) / sizeof *(a)))

enum {
    H_TTFT,
    H_ITL,
    H_E2E,
    H_QUEUE,
    H_PREFILL,
    H_DECODE,
    H_INFERENCE,
    H_PROMPT,
    H_GEN,
    H_MAX_GEN,
    H_PARAMS_N,
    H_PARAMS_MAX_TOKENS,
    H_ITERATION,
    H_BUSY,
    H_IDLE,
    H_COUNT
};

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

static const char *const closed_reasons[] = {"request_timeout", "evicted"};
#define N_CLOSED NB(closed_reasons)

struct llmrt_serve_metrics {
    pthread_mutex_t mu;
    histogram h[H_COUNT];
    http_count http[MAX_HTTP_KEYS];
    int n_http;
    uint64_t finished[LLMRT_FINISH_ERROR + 1]; /* by finish reason */
    uint64_t closed[N_CLOSED];
    double process_start; /* unix seconds */
    /* bus traffic of engine steps (step records' h2d + d2h bytes, of them offloaded weights) */
    uint64_t bus_bytes, offload_bytes;
    uint64_t last_bus_bytes, last_offload_bytes; /* of the latest step */
    double decode_bus_bytes, decode_busy_s;      /* over decode steps: the achieved GB/s */
};

static void hist_init(histogram *h, const char *name, const char *vllm, const char *vllm2,
                      const char *help, const double *b, int n)
{
    h->name = name;
    h->vllm = vllm;
    h->vllm2 = vllm2;
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

/* When the process started, in unix seconds: /proc/self/stat's start time (clock ticks
 * after boot) plus /proc/stat's btime; now when they cannot be read. */
static double process_start_time(void)
{
    double now = (double)time(NULL);
    FILE *f = fopen("/proc/self/stat", "r");
    char buf[1024];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long start = 0;
    for (int field = 2; p && *p && field < 22; p++)
        if (*p == ' ' && ++field == 22)
            start = strtoull(p + 1, NULL, 10);
    unsigned long long btime = 0;
    f = fopen("/proc/stat", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1)
            break;
    if (f)
        fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (!start || !btime || hz <= 0)
        return now;
    return (double)btime + (double)start / (double)hz;
}

llmrt_status llmrt_serve_metrics_new(llmrt_serve_metrics **out, llmrt_error *err)
{
    llmrt_serve_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory allocating server metrics");
    pthread_mutex_init(&m->mu, NULL);
    histogram *h = m->h;
    hist_init(&h[H_TTFT], "llmrt_time_to_first_token_seconds", "vllm:time_to_first_token_seconds",
              NULL, "Time from request arrival to its first generated token.", latency_bounds,
              NB(latency_bounds));
    hist_init(&h[H_ITL], "llmrt_inter_token_latency_seconds", "vllm:inter_token_latency_seconds",
              "vllm:time_per_output_token_seconds",
              "Time between consecutive generated tokens of a request.", itl_bounds,
              NB(itl_bounds));
    hist_init(&h[H_E2E], "llmrt_e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds",
              NULL, "Time from request arrival to its last token (per choice).", e2e_bounds,
              NB(e2e_bounds));
    hist_init(&h[H_QUEUE], "llmrt_request_queue_time_seconds", "vllm:request_queue_time_seconds",
              NULL, "Time a request waited (from arrival) before its first engine step.",
              latency_bounds, NB(latency_bounds));
    hist_init(&h[H_PREFILL], "llmrt_request_prefill_time_seconds",
              "vllm:request_prefill_time_seconds", NULL,
              "Time from a request's first engine step to its first token.", latency_bounds,
              NB(latency_bounds));
    hist_init(&h[H_DECODE], "llmrt_request_decode_time_seconds",
              "vllm:request_decode_time_seconds", NULL,
              "Time from a request's first token to its last.", e2e_bounds, NB(e2e_bounds));
    hist_init(&h[H_INFERENCE], "llmrt_request_inference_time_seconds",
              "vllm:request_inference_time_seconds", NULL,
              "Time from a request's first engine step to its last token.", e2e_bounds,
              NB(e2e_bounds));
    hist_init(&h[H_PROMPT], "llmrt_request_prompt_tokens", "vllm:request_prompt_tokens", NULL,
              "Prompt length of finished requests, in tokens.", token_bounds, NB(token_bounds));
    hist_init(&h[H_GEN], "llmrt_request_generation_tokens", "vllm:request_generation_tokens",
              NULL, "Generated tokens of finished requests.", token_bounds, NB(token_bounds));
    hist_init(&h[H_MAX_GEN], "llmrt_request_max_num_generation_tokens",
              "vllm:request_max_num_generation_tokens", NULL,
              "The most tokens any choice of an HTTP request generated.", token_bounds,
              NB(token_bounds));
    hist_init(&h[H_PARAMS_N], "llmrt_request_params_n", "vllm:request_params_n", NULL,
              "The n (choices per prompt) of generation requests.", n_bounds, NB(n_bounds));
    hist_init(&h[H_PARAMS_MAX_TOKENS], "llmrt_request_params_max_tokens",
              "vllm:request_params_max_tokens", NULL,
              "The max_tokens of generation requests (after the server's default).",
              token_bounds, NB(token_bounds));
    hist_init(&h[H_ITERATION], "llmrt_iteration_tokens_total", "vllm:iteration_tokens_total",
              NULL, "Tokens computed by one engine step (prefill and decode).",
              iteration_bounds, NB(iteration_bounds));
    hist_init(&h[H_BUSY], "llmrt_step_device_busy_seconds", NULL, NULL,
              "Device stream time of one engine step (inputs copy + forward + sampling + "
              "outputs copy).",
              step_bounds, NB(step_bounds));
    hist_init(&h[H_IDLE], "llmrt_step_device_idle_seconds", NULL, NULL,
              "Device time lost to the host in one engine step (step period minus busy time).",
              step_bounds, NB(step_bounds));
    m->process_start = process_start_time();
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

void llmrt_serve_metrics_phases(llmrt_serve_metrics *m, const llmrt_serve_phases *p)
{
    pthread_mutex_lock(&m->mu);
    if (p->queue_s >= 0)
        hist_observe(&m->h[H_QUEUE], p->queue_s);
    if (p->prefill_s >= 0)
        hist_observe(&m->h[H_PREFILL], p->prefill_s);
    if (p->decode_s >= 0)
        hist_observe(&m->h[H_DECODE], p->decode_s);
    if (p->inference_s >= 0)
        hist_observe(&m->h[H_INFERENCE], p->inference_s);
    pthread_mutex_unlock(&m->mu);
}

void llmrt_serve_metrics_params(llmrt_serve_metrics *m, int32_t n, int64_t max_tokens)
{
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->h[H_PARAMS_N], (double)n);
    hist_observe(&m->h[H_PARAMS_MAX_TOKENS], (double)max_tokens);
    pthread_mutex_unlock(&m->mu);
}

void llmrt_serve_metrics_max_generation(llmrt_serve_metrics *m, int64_t tokens)
{
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->h[H_MAX_GEN], (double)tokens);
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

void llmrt_serve_metrics_conn_closed(llmrt_serve_metrics *m, const char *reason)
{
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < N_CLOSED; i++)
        if (reason && strcmp(reason, closed_reasons[i]) == 0)
            m->closed[i]++;
    pthread_mutex_unlock(&m->mu);
}

void llmrt_serve_metrics_step(llmrt_serve_metrics *m, const llmrt_step_record *rec)
{
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->h[H_BUSY], rec->gpu_busy_ms / 1000.0);
    hist_observe(&m->h[H_IDLE], rec->idle_ms / 1000.0);
    hist_observe(&m->h[H_ITERATION], (double)rec->n_tokens);
    const uint64_t bus = rec->h2d_bytes + rec->d2h_bytes;
    m->bus_bytes += bus;
    m->offload_bytes += rec->offload_bytes;
    m->last_bus_bytes = bus;
    m->last_offload_bytes = rec->offload_bytes;
    if (rec->n_prefill_tokens == 0) { /* as bench's steps.bus_gbps: decode steps only */
        m->decode_bus_bytes += (double)bus;
        m->decode_busy_s += rec->gpu_busy_ms * 1e-3;
    }
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

/* What every sample of a page shares: its naming and the model_name label. */
typedef struct page {
    sbuf b;
    int vllm;
    char model[300]; /* escaped */
} page;

/* The name of a family on this page: vLLM's when the page uses them and it has one. */
static const char *pick(const page *pg, const char *llmrt, const char *vllm)
{
    return pg->vllm && vllm ? vllm : llmrt;
}

static void head(page *pg, const char *name, const char *type, const char *help)
{
    sb_printf(&pg->b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A sample: name{model_name="...",labels} value (labels: "" or ",k=\"v\"..."). */
static void sample(page *pg, const char *name, const char *labels, double v)
{
    sb_printf(&pg->b, "%s{model_name=\"%s\"%s} %.17g\n", name, pg->model, labels, v);
}

static void one(page *pg, const char *llmrt, const char *vllm, const char *type,
                const char *help, double v)
{
    const char *name = pick(pg, llmrt, vllm);
    head(pg, name, type, help);
    sample(pg, name, "", v);
}

static void hist_render_as(page *pg, const histogram *h, const char *name)
{
    head(pg, name, "histogram", h->help);
    uint64_t cum = 0;
    char le[64];
    for (int i = 0; i < h->n; i++) {
        cum += h->counts[i];
        snprintf(le, sizeof le, ",le=\"%g\"", h->bounds[i]);
        sb_printf(&pg->b, "%s_bucket{model_name=\"%s\"%s} %llu\n", name, pg->model, le,
                  (unsigned long long)cum);
    }
    cum += h->counts[h->n];
    sb_printf(&pg->b, "%s_bucket{model_name=\"%s\",le=\"+Inf\"} %llu\n", name, pg->model,
              (unsigned long long)cum);
    sb_printf(&pg->b, "%s_sum{model_name=\"%s\"} %.17g\n%s_count{model_name=\"%s\"} %llu\n",
              name, pg->model, h->sum, name, pg->model, (unsigned long long)h->count);
}

static void hist_render(page *pg, const histogram *h)
{
    hist_render_as(pg, h, pick(pg, h->name, h->vllm));
    if (pg->vllm && h->vllm2)
        hist_render_as(pg, h, h->vllm2);
}

/* The process_* series Prometheus clients export: memory, CPU, start time, descriptors. */
static void process_metrics(page *pg, const llmrt_serve_metrics *m)
{
    long page_size = sysconf(_SC_PAGESIZE);
    unsigned long long vm = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &vm, &rss) != 2)
            vm = rss = 0;
        fclose(f);
    }
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    int fds = 0;
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        fds += e->d_name[0] != '.';
    if (d) {
        closedir(d);
        fds--; /* the one opendir itself holds */
    }
    struct rlimit rl;
    double max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                         ? (double)rl.rlim_cur
                         : -1;
    one(pg, "process_resident_memory_bytes", NULL, "gauge", "Resident memory size in bytes.",
        (double)rss * (double)page_size);
    one(pg, "process_virtual_memory_bytes", NULL, "gauge", "Virtual memory size in bytes.",
        (double)vm * (double)page_size);
    one(pg, "process_cpu_seconds_total", NULL, "counter",
        "Total user and system CPU time spent in seconds.",
        (double)cpu.tv_sec + (double)cpu.tv_nsec * 1e-9);
    one(pg, "process_start_time_seconds", NULL, "gauge",
        "Start time of the process since unix epoch in seconds.", m->process_start);
    one(pg, "process_open_fds", NULL, "gauge", "Number of open file descriptors.", fds);
    if (max_fds >= 0)
        one(pg, "process_max_fds", NULL, "gauge", "Maximum number of open file descriptors.",
            max_fds);
}

/* vLLM's finished_reason values: stop, length, abort. */
static const char *vllm_reason(llmrt_finish_reason r)
{
    return r == LLMRT_FINISH_CANCELLED ? "abort" : llmrt_finish_reason_str(r);
}

char *llmrt_serve_metrics_render(llmrt_serve_metrics *m, const llmrt_serve_metrics_info *info,
                                 size_t *len)
{
    page pg = {.b = {.p = malloc(32768), .cap = 32768}, .vllm = info->vllm_names};
    if (!pg.b.p)
        return NULL;
    pg.b.p[0] = 0;
    llmrt_serve_metrics_escape(info->model_name ? info->model_name : "", pg.model,
                               sizeof pg.model);
    const llmrt_engine_stats *st = info->stats;
    char e1[256], e2[256], e3[256], e4[256], e5[256], lb[1600];

    one(&pg, "llmrt_engine_ready", NULL, "gauge",
        "1 when the model is loaded and the engine has not failed (what /health reports).",
        info->ready ? 1 : 0);
    one(&pg, "llmrt_http_requests_in_flight", NULL, "gauge", "HTTP requests being served now.",
        (double)info->http_in_flight);

    pthread_mutex_lock(&m->mu);
    head(&pg, "llmrt_http_requests_total", "counter", "HTTP responses by route and status.");
    for (int i = 0; i < m->n_http; i++) {
        snprintf(lb, sizeof lb, ",route=\"%s\",status=\"%d\"", routes[m->http[i].route],
                 m->http[i].status);
        sample(&pg, "llmrt_http_requests_total", lb, (double)m->http[i].n);
    }
    head(&pg, "llmrt_http_connections_closed_total", "counter",
         "Connections the server closed: request_timeout (a request slower than "
         "server.request_timeout_s), evicted (to keep room for new clients).");
    for (int i = 0; i < N_CLOSED; i++) {
        snprintf(lb, sizeof lb, ",reason=\"%s\"", closed_reasons[i]);
        sample(&pg, "llmrt_http_connections_closed_total", lb, (double)m->closed[i]);
    }
    const char *fin = pick(&pg, "llmrt_requests_finished_total", "vllm:request_success_total");
    head(&pg, fin, "counter", "Generation requests (one per choice) finished, by finish reason.");
    for (int r = LLMRT_FINISH_STOP; r <= LLMRT_FINISH_ERROR; r++) {
        snprintf(lb, sizeof lb, ",%s=\"%s\"", pg.vllm ? "finished_reason" : "finish_reason",
                 pg.vllm ? vllm_reason((llmrt_finish_reason)r)
                         : llmrt_finish_reason_str((llmrt_finish_reason)r));
        sample(&pg, fin, lb, (double)m->finished[r]);
    }
    for (int i = 0; i < H_COUNT; i++)
        hist_render(&pg, &m->h[i]);
    one(&pg, "llmrt_bus_bytes_total", NULL, "counter",
        "Bytes engine steps moved over the host-device bus: step inputs and outputs, and the "
        "offloaded layers' weights (memory.cpu_offload_gb), copied or read in place.",
        (double)m->bus_bytes);
    one(&pg, "llmrt_offload_bytes_total", NULL, "counter",
        "Of llmrt_bus_bytes_total, the offloaded layers' weights (memory.cpu_offload_gb).",
        (double)m->offload_bytes);
    one(&pg, "llmrt_step_bus_bytes", NULL, "gauge",
        "Bytes the latest engine step moved over the bus (inputs, outputs, offloaded weights).",
        (double)m->last_bus_bytes);
    one(&pg, "llmrt_step_offload_bytes", NULL, "gauge",
        "Of llmrt_step_bus_bytes, the offloaded layers' weights: every forward moves them once.",
        (double)m->last_offload_bytes);
    one(&pg, "llmrt_bus_gbps", NULL, "gauge",
        "Achieved bus bandwidth over the decode steps so far, GB/s (1e9 bytes/s): their bytes "
        "over the bus over their device busy time (bench's steps.bus_gbps); 0 before any.",
        m->decode_busy_s > 0 ? m->decode_bus_bytes / m->decode_busy_s / 1e9 : 0.0);
    pthread_mutex_unlock(&m->mu);

    process_metrics(&pg, m);

    if (st) {
        one(&pg, "llmrt_prompt_tokens_total", "vllm:prompt_tokens_total", "counter",
            "Prompt tokens of submitted requests.", (double)st->prompt_tokens);
        one(&pg, "llmrt_generation_tokens_total", "vllm:generation_tokens_total", "counter",
            "Generated tokens.", (double)st->generated_tokens);
        one(&pg, "llmrt_prefill_tokens_total", NULL, "counter",
            "Token rows computed as prefill (prompts and recomputation after preemption).",
            (double)st->prefill_tokens);
        one(&pg, "llmrt_engine_steps_total", NULL, "counter", "Engine steps run.",
            (double)st->steps);
        one(&pg, "llmrt_preemptions_total", "vllm:num_preemptions_total", "counter",
            "Sequences preempted (KV blocks taken back) to make room.", (double)st->preemptions);
        one(&pg, "llmrt_num_requests_running", "vllm:num_requests_running", "gauge",
            "Sequences holding KV-cache blocks.", st->running);
        one(&pg, "llmrt_num_requests_waiting", "vllm:num_requests_waiting", "gauge",
            "Sequences queued, including preempted ones.", st->waiting);
        double usage =
            st->kv_blocks_total ? (double)st->kv_blocks_used / st->kv_blocks_total : 0.0;
        one(&pg, "llmrt_kv_cache_usage_perc", "vllm:kv_cache_usage_perc", "gauge",
            "Fraction of KV-cache blocks in use (1 = full).", usage);
        if (pg.vllm) /* the name vLLM's own Grafana dashboard still reads */
            one(&pg, "vllm:gpu_cache_usage_perc", NULL, "gauge",
                "Fraction of KV-cache blocks in use (1 = full); vLLM's older name.", usage);
        one(&pg, "llmrt_kv_cache_blocks_used", NULL, "gauge", "KV-cache blocks in use.",
            st->kv_blocks_used);
        one(&pg, "llmrt_kv_cache_blocks_total", NULL, "gauge", "KV-cache blocks in all.",
            st->kv_blocks_total);
        one(&pg, "llmrt_prefix_cache_queries_total", "vllm:prefix_cache_queries_total",
            "counter",
            "Tokens looked up in the prefix cache when sequences were admitted (vLLM's "
            "prefix_cache_queries).",
            (double)st->prefix_cache_queries);
        one(&pg, "llmrt_prefix_cache_hits_total", "vllm:prefix_cache_hits_total", "counter",
            "Of them, tokens found in the prefix cache and not computed (vLLM's "
            "prefix_cache_hits).",
            (double)st->prefix_cache_hits);
        one(&pg, "llmrt_prefix_cache_evictions_total", NULL, "counter",
            "Cached KV blocks reclaimed for other tokens (least recently used first).",
            (double)st->prefix_cache_evictions);
        one(&pg, "llmrt_prefix_cache_blocks", NULL, "gauge",
            "KV-cache blocks whose tokens are cached now (held by requests or reclaimable).",
            st->prefix_cache_blocks);
        one(&pg, "llmrt_prefix_caching_enabled", NULL, "gauge",
            "1 when cache.prefix_caching is on.", st->prefix_caching ? 1 : 0);
        one(&pg, "llmrt_memory_h2d_bytes_total", NULL, "counter",
            "Step input bytes copied host to device by the memory plugin.",
            (double)st->mem.h2d_bytes);
        one(&pg, "llmrt_memory_d2h_bytes_total", NULL, "counter",
            "Step output bytes copied device to host by the memory plugin.",
            (double)st->mem.d2h_bytes);
        one(&pg, "llmrt_offload_layers", NULL, "gauge",
            "Decoder layers whose weights stay in host memory (memory.cpu_offload_gb; 0: none).",
            st->mem.offload_layers);
        one(&pg, "llmrt_offload_weight_bytes", NULL, "gauge",
            "Host bytes of the offloaded layers' weights (what each forward moves over the bus).",
            (double)st->mem.offload_bytes);

        /* "pageable (fallback from pinned)" → path="pageable", fallback="true" */
        char path[64];
        snprintf(path, sizeof path, "%s", st->memory_path);
        char *sp = strchr(path, ' ');
        if (sp)
            *sp = 0;
        head(&pg, "llmrt_memory_path_info", "gauge",
             "The host-memory path in use for step buffers (after any fallback); plugin is "
             "the one requested.");
        snprintf(lb, sizeof lb, ",plugin=\"%s\",path=\"%s\",fallback=\"%s\"",
                 llmrt_serve_metrics_escape(st->memory_plugin, e1, sizeof e1),
                 llmrt_serve_metrics_escape(path, e2, sizeof e2),
                 strstr(st->memory_path, "fallback") ? "true" : "false");
        sample(&pg, "llmrt_memory_path_info", lb, 1);
        head(&pg, "llmrt_model_info", "gauge", "The model being served.");
        snprintf(lb, sizeof lb,
                 ",arch=\"%s\",quant=\"%s\",backend=\"%s\",device=\"%s\",kv_dtype=\"%s\","
                 "max_model_len=\"%d\"",
                 llmrt_serve_metrics_escape(st->model_arch, e1, sizeof e1),
                 llmrt_serve_metrics_escape(st->quant, e2, sizeof e2),
                 llmrt_serve_metrics_escape(st->backend, e3, sizeof e3),
                 llmrt_serve_metrics_escape(st->device, e4, sizeof e4),
                 llmrt_serve_metrics_escape(st->kv_dtype, e5, sizeof e5), st->max_model_len);
        sample(&pg, "llmrt_model_info", lb, 1);
        if (pg.vllm) {
            head(&pg, "vllm:cache_config_info", "gauge", "The KV cache's configuration.");
            snprintf(lb, sizeof lb, ",block_size=\"%d\",num_gpu_blocks=\"%d\",cache_dtype=\"%s\"",
                     st->kv_block_size, st->kv_blocks_total,
                     llmrt_serve_metrics_escape(st->kv_dtype, e1, sizeof e1));
            sample(&pg, "vllm:cache_config_info", lb, 1);
        }
    }
    if (pg.b.oom) {
        free(pg.b.p);
        return NULL;
    }
    if (len)
        *len = pg.b.len;
    return pg.b.p;
}
