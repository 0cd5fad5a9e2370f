/* bench_configs.h — the configs `llmrt bench` compares: opening one runtime and engine per
 * -c FILE, the difference between their effective settings, and the checks that make the
 * comparison fair (same model, same KV capacity).
 *
 * Why: an A/B is only meaningful when the configs differ in the knob under test and nothing
 * else. The bench prints every difference before it starts and refuses (exit 2) a difference
 * outside the A/B knobs unless --allow-diff. The knobs are the settings that change how the
 * same computation is executed, never what is computed or how much cache it gets:
 *   memory.* and every [memory.<plugin>] key   (the host-memory path under test)
 *   scheduler.async_scheduling, scheduler.cuda_graphs
 *   cache.prefix_caching                        (reuse, not recompute, a cached prefix)
 *   backend.cpu.threads                         ([backend.cpu] threads)
 *   every developer key of a plugin             (LLMRT_KEY_DEVELOPER: kernel choices)
 * runtime.log_level and server.* are not used by the measurement: their differences are
 * shown but never refused. Everything else (model, quant, backend, cache, batch limits,
 * plugin_dir, other plugin sections) must be equal. model.path is compared as a resolved
 * path. */
#ifndef LLMRT_BENCH_BENCH_CONFIGS_H
#define LLMRT_BENCH_BENCH_CONFIGS_H

#include <stdint.h>
#include <stdio.h>

#include <llmrt/engine.h>

#include "runtime.h"

#define BENCH_MAX_CONFIGS 16

/* One config under test: its runtime (config + plugins) and, once loaded, its engine. */
typedef struct bench_config {
    char name[64];                /* label in tables and sentences: the INI file's base name */
    const char *ini_path;         /* as given to -c */
    llmrt_runtime *rt;            /* owned */
    llmrt_engine *engine;         /* owned; NULL until bench_configs_load */
    llmrt_engine_stats stats;     /* right after load */
    llmrt_engine_stats stats_end; /* after the measurement (totals, memory counters) */
    uint64_t rss_before_load;     /* process RSS in bytes just before this engine loaded */
    uint64_t rss_after_load;      /* ... and just after (engines share one process) */
    uint64_t rss_end;             /* process RSS after the measurement */
} bench_config;

typedef enum bench_key_class {
    BENCH_KEY_SAME = 0,   /* equal in every config */
    BENCH_KEY_KNOB = 1,   /* differs, and is an A/B knob */
    BENCH_KEY_UNUSED = 2, /* differs, but the bench does not use it */
    BENCH_KEY_DIFF = 3    /* differs where configs must agree */
} bench_key_class;

const char *bench_key_class_str(bench_key_class c); /* "same", "knob", "unused", "differs" */
/* The class a differing key gets (never SAME). Keys are "section.key" or
 * "section.plugin.key" for plugin sections; flags are its declaration's (LLMRT_KEY_*, 0 when
 * undeclared). */
bench_key_class bench_key_classify(const char *key, uint32_t flags);

typedef struct bench_diff_row {
    char *key;                              /* "memory.plugin", "memory.pinned.double_buffer" */
    bench_key_class cls;
    const char *values[BENCH_MAX_CONFIGS];  /* [n_configs] effective value as it may be shown
                                               (secrets "(set)"/"(unset)"), NULL when unset */
} bench_diff_row;

/* Every key of every config (core's keys, then plugin-section keys in first-seen order). */
typedef struct bench_diff {
    bench_diff_row *rows;
    size_t n_rows;
    int n_knob, n_unused, n_diff; /* rows of each differing class */
} bench_diff;

/* Open one runtime per INI path with the shared --set list (model_set first, may be "").
 * Names are the files' base names without ".ini"; repeats get "#2", "#3". On failure the
 * error names the config file and everything opened is closed. */
llmrt_status bench_configs_open(bench_config *cfgs, int n, const char *const *paths,
                                const char *const *sets, int n_sets, llmrt_error *err);
/* Destroy engines and runtimes. */
void bench_configs_close(bench_config *cfgs, int n);

/* Compare the effective settings of the configs (values point into the configs). */
llmrt_status bench_configs_diff(const bench_config *cfgs, int n, bench_diff *out,
                                llmrt_error *err);
void bench_diff_free(bench_diff *d);
/* Print the differing rows as a table with their class, or one line saying the configs are
 * identical. */
void bench_diff_print(const bench_diff *d, const bench_config *cfgs, int n, FILE *out);

/* Create every engine in order (quiet, step callback installed later), recording load
 * stats and RSS; a line per config goes to progress (NULL: silent). */
llmrt_status bench_configs_load(bench_config *cfgs, int n, FILE *progress, llmrt_error *err);
/* After load: the engines must agree on the model (architecture, resolved folder, quant)
 * and the KV capacity in tokens. Returns the number of mismatches and prints each to out
 * (naming both configs and both values). */
int bench_configs_check_loaded(const bench_config *cfgs, int n, FILE *out);

#endif
