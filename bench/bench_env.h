/* bench_env.h — what machine and build a bench result came from: llmrt version, commit, date,
 * OS, CPU; and process RSS.
 *
 * Why: a number without its context cannot be compared later. Every bench report (terminal,
 * JSON) carries this block, so BENCHMARKS.md entries can be traced to a commit and machine. */
#ifndef LLMRT_BENCH_BENCH_ENV_H
#define LLMRT_BENCH_BENCH_ENV_H

#include <stdint.h>

typedef struct bench_env {
    char version[32];   /* LLMRT_VERSION */
    char commit[64];    /* short hash (+"-dirty"), or "unknown" */
    char date_utc[32];  /* ISO 8601, e.g. "2025-01-31T12:00:00Z" */
    char hostname[128];
    char os[256];       /* uname: sysname release machine */
    char cpu[256];      /* /proc/cpuinfo "model name", or "" */
    int32_t n_cpus;     /* online CPUs */
} bench_env;

/* The commit is `git rev-parse --short HEAD` when the current folder is an llmrt source
 * tree, else the LLMRT_COMMIT compile definition (stamped at configure time), else
 * "unknown". */
void bench_env_collect(bench_env *e);
/* Resident set size of this process in bytes (0 when /proc is unavailable). */
uint64_t bench_rss_bytes(void);

#endif
