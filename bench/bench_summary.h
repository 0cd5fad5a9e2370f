/* bench_summary.h — from raw bench samples to figures and verdicts: per config and level,
 * latency distributions (ITL, TTFT, TPOT, end-to-end), throughput and per-step device
 * timing; and for every config against the first, the relative difference in median ITL,
 * median TTFT and median batch throughput with an interval, one of three outcomes and a
 * plain sentence.
 *
 * Why three outcomes and a margin: a difference can be real and still not matter (two
 * engines of one config hold two copies of the weights, at other addresses: on the H200 an
 * A/A run once read "0.2% slower [0.2%, 0.3%]"), and an interval can be too wide to say
 * anything. So a verdict is a difference only when its whole interval lies beyond
 * +-settings.margin, "no meaningful difference" when it lies within, and inconclusive
 * otherwise. Why Bonferroni: the verdicts of one run are a family (levels x configs x
 * metrics); each interval is at 1 - (1 - ci_level) / family size, so that every verdict of
 * the run holds together with probability >= ci_level (stats.h says why that bounds wrong
 * differences and wrong equivalences alike). Bonferroni rather than Holm's step-down: it
 * needs no p-values (a percentile bootstrap gives intervals, and equivalence needs the
 * intervals themselves), it is valid under any dependence between metrics, and every printed
 * interval is the one the decision used. Its price, wider intervals, is small for the few
 * comparisons a bench makes (3 metrics: 98.3% each instead of 95%).
 *
 * The interval: batch k of every config ran in block k, so each metric gives n pairs of
 * per-batch values (the batch's median inter-token gap, its median TTFT, its throughput),
 * and the relative change is the Hodges-Lehmann estimate of their log ratios with Wilcoxon's
 * signed-rank interval (stats.h: exact and distribution-free; in random order an A/A is
 * symmetric by construction).
 *
 * Why per batch: the tokens of one batch share its KV cache, prompt and moment, so their
 * latencies are correlated; a batch (a request in latency mode) is the unit that varies
 * independently, and batch k of each config ran in the same block, moments apart
 * (background load that comes and goes then hits both sides of a pair alike). Summaries and verdicts live
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
    double offload_bytes_per_step; /* of h2d, offloaded weights (memory.cpu_offload_gb) */
    double bus_gbps;               /* (h2d + d2h bytes) / device busy time over decode steps */
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
    /* Values per batch, in batch order (offsets [n_batches + 1]). */
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


typedef struct bench_verdict {
    int32_t config, baseline, level;
    bench_metric metric;
    int32_t ok;            /* 0: no interval (why says so, e.g. no ITL with --output-len 1) */
    char why[160];
    llmrt_paired_diff d;   /* medians and (config − baseline) / baseline with its interval
                              (at bench_result.interval_level) */
    double improvement;    /* d.rel made "positive = config is better" */
    double imp_lo, imp_hi; /* its interval */
    llmrt_outcome outcome; /* of [d.lo, d.hi] against +-margin (INCONCLUSIVE when !ok) */
    double margin;         /* settings.margin */
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
    size_t n_verdicts;        /* the family: every verdict, with an interval or not */
    double interval_level;    /* of each interval: Bonferroni over n_verdicts at ci_level */
} bench_result;

/* Fill cells and verdicts from r->data (settings, configs, data, diff must be set). */
llmrt_status bench_summarize(bench_result *r, llmrt_error *err);
void bench_result_free(bench_result *r);
const bench_cell *bench_cell_at(const bench_result *r, int level, int config);

/* The plain sentence of a verdict into v->sentence, one per outcome:
 *   "pinned is 12.1% faster than pageable in ITL [10.8%, 13.5%]"
 *   "pinned is 3.0% slower than pageable in TTFT [1.2%, 4.9%]"
 *   "no meaningful difference between pinned and pageable in ITL (-0.4% [-0.8%, +0.1%],
 *    within ±1%)"
 *   "inconclusive between pinned and pageable in ITL (+0.6% [-0.3%, +1.5%], neither within
 *    nor beyond ±1%)"
 * The percentages of the first two are the improvement (or slowdown) relative to the
 * baseline; in the others they are the change of the metric itself (negative: lower). */
void bench_verdict_sentence(bench_verdict *v, const char *name, const char *baseline);

#endif
