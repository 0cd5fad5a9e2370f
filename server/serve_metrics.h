/* serve_metrics.h — what `llmrt serve` counts, and its /metrics page in the Prometheus text
 * exposition format (version 0.0.4).
 *
 * Why: operators watch a server through Prometheus; the figures that matter for an
 * inference server are vLLM's (requests and tokens, TTFT, inter-token latency, end-to-end
 * latency, queue / prefill / decode time, running/waiting, KV-cache usage) plus what this
 * project is about: how long the device was busy and idle per step, which host-memory
 * path is really in use, and the bytes steps move over the bus (CPU weight offload).
 *
 * Names: every series carries the label model_name (the served model's name). With
 * metrics_prefix "llmrt" the series are llmrt_*; with "vllm" those vLLM has carry vLLM's
 * names and labels (vllm:num_requests_waiting, vllm:request_success_total{finished_reason},
 * ...), so vLLM's Grafana dashboard and the routers that read vLLM's gauges work unchanged,
 * and the rest keep their llmrt_ names. The process_* series (memory, CPU, start time, file
 * descriptors) are Prometheus's standard ones either way.
 *
 * Counters and histograms are recorded here (thread-safe: HTTP threads and the stepping
 * thread record concurrently); gauges come from an engine stats snapshot at render time. */
#ifndef LLMRT_SERVER_SERVE_METRICS_H
#define LLMRT_SERVER_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/engine.h>
#include <llmrt/plugin.h>

typedef struct llmrt_serve_metrics llmrt_serve_metrics;

llmrt_status llmrt_serve_metrics_new(llmrt_serve_metrics **out, llmrt_error *err);
void llmrt_serve_metrics_free(llmrt_serve_metrics *m);

/* One HTTP response: route ("/v1/completions", ...; anything else is counted as "other")
 * and status code. */
void llmrt_serve_metrics_http(llmrt_serve_metrics *m, const char *route, int status);
/* A generation request (one choice) finished: why, its prompt and completion lengths and
 * end-to-end latency (arrival → final event). */
void llmrt_serve_metrics_finished(llmrt_serve_metrics *m, llmrt_finish_reason reason,
                                  int64_t prompt_tokens, int64_t completion_tokens,
                                  double e2e_s);
/* The phases of a finished choice, in seconds (a negative value: the phase did not happen,
 * e.g. a request cancelled while it waited): waiting for its first step (queue), from then
 * to its first token (prefill), from the first token to the last (decode), and from the
 * first step to the last token (inference). */
typedef struct llmrt_serve_phases {
    double queue_s, prefill_s, decode_s, inference_s;
} llmrt_serve_phases;
void llmrt_serve_metrics_phases(llmrt_serve_metrics *m, const llmrt_serve_phases *p);
/* A generation HTTP request's parameters (n, max_tokens of each choice) when it is
 * submitted, and when it is over the most tokens any of its choices generated. */
void llmrt_serve_metrics_params(llmrt_serve_metrics *m, int32_t n, int64_t max_tokens);
void llmrt_serve_metrics_max_generation(llmrt_serve_metrics *m, int64_t tokens);
/* Time to first token and inter-token latency, in seconds. */
void llmrt_serve_metrics_ttft(llmrt_serve_metrics *m, double seconds);
void llmrt_serve_metrics_itl(llmrt_serve_metrics *m, double seconds);
/* A connection the server closed: "request_timeout" (server.request_timeout_s) or
 * "evicted" (to keep room for new clients). */
void llmrt_serve_metrics_conn_closed(llmrt_serve_metrics *m, const char *reason);
/* One engine step (device busy and idle time, tokens computed, bytes over the bus and of them
 * offloaded weights: llmrt_bus_bytes_total, llmrt_offload_bytes_total, the latest step's
 * llmrt_step_bus_bytes / llmrt_step_offload_bytes, and llmrt_bus_gbps over decode steps). */
void llmrt_serve_metrics_step(llmrt_serve_metrics *m, const llmrt_step_record *rec);

/* Server-level facts for the page. */
typedef struct llmrt_serve_metrics_info {
    const char *model_name;
    int vllm_names;                  /* 1: server.metrics_prefix = vllm */
    int ready;                       /* 1: engine loaded and not failed */
    const llmrt_engine_stats *stats; /* NULL while the engine is loading */
    int64_t http_in_flight;          /* HTTP requests being served now */
} llmrt_serve_metrics_info;

/* The whole page (malloc'd, NUL-terminated, *len its length). NULL only on OOM. */
char *llmrt_serve_metrics_render(llmrt_serve_metrics *m, const llmrt_serve_metrics_info *info,
                                 size_t *len);

/* Prometheus label value escaping (\\, \", \n) into out[cap]; returns out. */
char *llmrt_serve_metrics_escape(const char *s, char *out, size_t cap);

#endif
