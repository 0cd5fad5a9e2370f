/* bench_summary.h — from raw bench samples to figures and verdicts: per config and level,
 * latency distributions (ITL, TTFT, TPOT, end-to-end), throughput and per-step device
 * timing; and for every config against the first, the relative difference in median ITL,
 * median TTFT and median batch throughput with a 95% paired cluster bootstrap interval and a
 * plain sentence.
 *
 * Why clusters: the tokens of one batch share its KV cache, prompt and moment, so their
 * latencies are correlated; the bootstrap resamples whole batches (a request in latency mode),
 * and pairs batch k of each config, which ran in the same block, moments apart (background
 * load that comes and goes then hits both sides of a pair alike). Summaries and verdicts live
 * apart from the renderers (terminal, JSON, CSV, plot), which only format them. */
#ifndef LLMRT_BENCH_BENCH_SUMMARY_H
#define LLMRT_BENCH_BENCH_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "bench_configs.h"
#include "bench_env.h"
#include "bench_run.h"
#include "stats.h"

/* Per-step device timing. Decode steps (no prefill rows) are summarized separately because
 * they are what ITL is made of; prefill steps are counted. */
typedef struct bench_step_summary {
    size_t n_decode, n_prefill;
    llmrt_summary host_prepare_ms, h2d_ms, compute_ms, d2h_ms, gpu_busy_ms, wall_ms, idle_ms;
    double h2d_bytes_per_step, d2h_bytes_per_step; /* mean over decode steps */
    uint64_t h2d_bytes, d2h_bytes;                 /* totals over every recorded step */
    double graph_share, async_share;               /* fraction of decode steps */
} bench_step_summary;

/* One config at one concurrency level. */
typedef struct bench_cell {
    int32_t config, level, concurrency;
    size_t n_requests, n_batches, n_tokens;
    uint64_t prompt_tokens, cached_tokens; /* of its requests; cached: found in the prefix
                                              cache */
    llmrt_summary itl_ms;       /* every inter-token gap */
    llmrt_summary ttft_ms;      /* per request: first token − submit */
    llmrt_summary tpot_ms;      /* per request: (last − first token) / (tokens − 1) */
    llmrt_summary e2e_ms;       /* per request: last token − submit */
    llmrt_summary batch_tok_s;  /* per batch: tokens / (last token − first submit) */
    double output_tok_s;        /* all tokens / total batch time */
    bench_step_summary steps;
    /* Clusters for the bootstrap, one per batch in batch order (offsets [n_batches + 1]). */
    double *itl, *ttft, *tput;
    size_t *itl_off, *ttft_off, *tput_off;
} bench_cell;

typedef enum bench_metric {
    BENCH_METRIC_ITL = 0,  /* median inter-token latency: lower is better */
    BENCH_METRIC_TTFT = 1, /* median time to first token: lower is better */
    BENCH_METRIC_TPUT = 2, /* median batch output tok/s: higher is better */
    BENCH_N_METRICS = 3
} bench_metric;

const char *bench_metric_name(bench_metric m);  /* "ITL", "TTFT", "throughput" */
const char *bench_metric_key(bench_metric m);   /* "itl", "ttft", "throughput" (JSON/CSV) */
const char *bench_metric_unit(bench_metric m);  /* "ms", "ms", "tok/s" */
int bench_metric_higher_is_better(bench_metric m);

/* Fewer batches per config than this give no interval: a bootstrap over a handful of
 * clusters cannot tell noise from an effect. */
#define BENCH_MIN_BATCHES 5

typedef struct bench_verdict {
    int32_t config, baseline, level;
    bench_metric metric;
    int32_t ok;            /* 0: no interval (why says so, e.g. no ITL with --output-len 1) */
    char why[160];
    llmrt_rel_diff d;      /* medians and (config − baseline) / baseline with its interval */
    double improvement;    /* d.rel made "positive = config is better" */
    double imp_lo, imp_hi; /* its interval */
    char sentence[384];
} bench_verdict;

typedef struct bench_result {
    const bench_settings *settings;
    const bench_config *configs;
    int n_configs;
    const bench_data *data;
    const bench_diff *diff;
    bench_env env;
    int argc;
    char **argv;              /* the command line, for the report */
    bench_cell *cells;        /* [n_levels * n_configs]: bench_cell_at */
    bench_verdict *verdicts;  /* [n_levels * (n_configs − 1) * BENCH_N_METRICS] */
    size_t n_verdicts;
} bench_result;

/* Fill cells and verdicts from r->data (settings, configs, data, diff must be set). */
llmrt_status bench_summarize(bench_result *r, llmrt_error *err);
void bench_result_free(bench_result *r);
const bench_cell *bench_cell_at(const bench_result *r, int level, int config);

/* The plain sentence of a verdict into v->sentence, e.g.
 *   "pinned is 12.1% faster than pageable in ITL [10.8%, 13.5%]"
 *   "pinned is 3.0% slower than pageable in TTFT [1.2%, 4.9%]"
 *   "no significant difference between pinned and pageable in ITL (-0.4% [-1.2%, +0.5%])"
 * The percentages of the first two are the improvement (or slowdown) relative to the
 * baseline; in the third they are the change of the metric itself (negative: lower). */
void bench_verdict_sentence(bench_verdict *v, const char *name, const char *baseline);

#endif
