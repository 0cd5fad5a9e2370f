/* bench.h — `llmrt bench` as a library call (libllmrt_bench): A/B two or more runtime
 * configs side by side and report latency distributions, per-step busy/idle time, memory
 * figures and a verdict with a confidence interval. cmd_bench.c only parses options.
 *
 * The conductor, in order: open one runtime per config, print where their settings differ
 * and refuse differences outside the A/B knobs (bench_configs.h), load every engine, check
 * they agree on the model and KV capacity, run the interleaved schedule (bench_run.h),
 * summarize (bench_summary.h) and write the table, verdicts, JSON, CSV and plot
 * (bench_report.h, bench_plot.h).
 *
 * All configs run in this one process, each with its own runtime and engine, loaded once
 * before measuring. Only one engine works at a time, so they never compete; one process
 * keeps the interleaving cheap (no IPC) and the clocks identical. The cost: process RSS and
 * device memory in use are whole-process figures, so each config also reports what its own
 * load added (RSS growth; the device memory its engine took, measured by the engine from
 * just before its weights loaded to after it was created). */
#ifndef LLMRT_BENCH_BENCH_H
#define LLMRT_BENCH_BENCH_H

#include <stdio.h>

#include <llmrt/plugin.h>

#include "bench_run.h"

typedef struct llmrt_bench_options {
    bench_settings settings;
    const char *const *configs; /* [n_configs] INI paths; the first is the baseline */
    int n_configs;              /* 1 .. BENCH_MAX_CONFIGS */
    const char *const *sets;    /* [n_sets] "section.key=value" for every config, in order */
    int n_sets;
    const char *json;           /* write the JSON document here ("-": stdout), or NULL */
    const char *csv;            /* write DIR/tokens.csv and DIR/steps.csv, or NULL */
    const char *plot;           /* write the plot (.png or .svg), or NULL */
    int argc;                   /* the command line, recorded in the report */
    char **argv;
} llmrt_bench_options;

/* bench_settings' defaults: 128 tokens in and out, ignore eos, 2 warm-up batches, 3 rounds
 * of 5 requests, random order, seed 0, latency mode, 95% family-wise, a 1%
 * margin. */
void llmrt_bench_settings_init(bench_settings *s);

/* Run the whole bench. The diff of the settings, the table, the verdicts and the "wrote"
 * lines go to report; progress, warnings and refusals to stderr. Returns the exit code:
 * 0 done; 1 a runtime error (in err, not yet printed); 2 the configs were refused or the
 * lengths do not fit the model (the reason already on stderr). */
int llmrt_bench_execute(const llmrt_bench_options *o, FILE *report, llmrt_error *err);

#endif
