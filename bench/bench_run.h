/* bench_run.h — running the bench: the schedule (warm-up, rounds, configs interleaved) and the
 * raw samples it collects (per-token timestamps of every request, every step record).
 *
 * Why: drift (thermals, other processes, clocks) must hit every config alike, so configs
 * take turns within each round rather than running one after the other; and everything a
 * summary, verdict, CSV or plot shows is derived from these raw samples, never from numbers
 * averaged on the fly.
 *
 * The unit of the schedule is a batch: `concurrency` requests submitted together to one
 * config's engine and run until all finish. Latency mode is concurrency 1. At each level,
 * each config runs `warmup` batches (not recorded), then `rounds` rounds of `requests`
 * blocks; a block runs one batch of every config back to back. Batch k of every config runs
 * in the same block, moments apart, so a verdict can pair them. */
#ifndef LLMRT_BENCH_BENCH_RUN_H
#define LLMRT_BENCH_BENCH_RUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <llmrt/engine.h>

#include "bench_configs.h"
#include "stats.h"

typedef enum bench_order { BENCH_ORDER_ABAB = 0, BENCH_ORDER_RANDOM = 1 } bench_order;

typedef struct bench_settings {
    int32_t input_len;      /* prompt tokens per request */
    int32_t prefix_len;     /* of them, the first this many are the same in every request
                               (a shared system prompt; 0: none) */
    int32_t output_len;     /* max_tokens per request */
    int32_t ignore_eos;     /* 1: every request generates output_len tokens */
    int32_t warmup;         /* batches per config per level before measuring */
    int32_t rounds;
    int32_t requests;       /* batches per config per round */
    bench_order order;
    uint64_t seed;          /* prompts, random order */
    int32_t load_mode;      /* 0: latency mode (levels = {1}); 1: --concurrency given */
    int32_t n_levels;
    int32_t levels[32];     /* [n_levels] concurrency per level, ascending as given */
    int32_t resamples;      /* --resamples: recorded, no longer used (verdicts do not resample) */
    double ci_level;        /* 0.95: the family-wise level of all verdicts together */
    double margin;          /* 0.01: relative changes within +-margin are no meaningful
                               difference (--margin PCT) */
    int32_t allow_diff;
} bench_settings;

/* One request's timeline. Times are CLOCK_MONOTONIC seconds. */
typedef struct bench_request {
    int32_t config;     /* index into the configs */
    int32_t level;      /* index into settings.levels */
    int32_t round;
    int32_t unit;       /* batch index within (config, level): 0 .. rounds * requests − 1 */
    int32_t slot;       /* request within its batch: 0 .. concurrency − 1 */
    double t_submit;    /* just before llmrt_engine_submit */
    int32_t n_tok;      /* tokens received */
    double *t_tok;      /* [n_tok] arrival of each token (llmrt_token_event.time_s) */
    int32_t finish;     /* llmrt_finish_reason of the final event */
    int32_t cached_tokens; /* prompt tokens found in the prefix cache */
} bench_request;

typedef struct bench_step {
    int32_t config, level, round, unit;
    llmrt_step_record rec;
} bench_step;

/* Everything measured. Requests are stored in run order. */
typedef struct bench_data {
    bench_request *req;
    size_t n_req;
    double *tok_store;   /* backing store of every t_tok (output_len per request) */
    bench_step *steps;
    size_t n_steps, cap_steps;
    double t0;           /* monotonic time the measured part began (after warm-up of level 0) */
    double t_end;
} bench_data;

/* The order configs take within one round, as config indices written to
 * out[n_configs * requests]: `requests` blocks, each holding every config once, so batch k of
 * every config runs in block k, back to back (the verdict pairs them). abab: every block in
 * config order (0 1 2 0 1 2 ...); random: each block a fresh shuffle drawn from rng
 * (advanced), so no config always goes first. */
void bench_round_order(bench_order order, int n_configs, int requests, llmrt_rng *rng,
                       int32_t *out);
/* The synthetic prompt of request `slot` of batch `unit` at `level`: n ids below vocab,
 * pseudo-random from the seed, identical for every config (warm-up batches use unit < 0);
 * the first prefix_len come from the seed alone, the same in every request. */
void bench_prompt(uint64_t seed, int level, int unit, int slot, int32_t vocab, int32_t *ids,
                  int32_t n, int32_t prefix_len);

/* Run the whole schedule over the loaded configs. Progress goes to `progress` (a line
 * redrawn in place on a terminal; a line per round otherwise; NULL: silent). Fails with the
 * engine's message when a request ends in error. */
llmrt_status bench_run(const bench_settings *s, bench_config *cfgs, int n_cfg, bench_data *out,
                       FILE *progress, llmrt_error *err);
void bench_data_free(bench_data *d);

#endif
