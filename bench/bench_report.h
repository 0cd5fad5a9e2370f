/* bench_report.h — writing a bench result: the terminal table and verdict sentences
 * (bench_report.c), the JSON document described in docs/bench-json.md and
 * docs/bench.schema.json (bench_json.c), and raw samples as CSV (bench_csv.c).
 *
 * Why: the same summaries feed a person (a table and one sentence per comparison), a script
 * (JSON with every raw sample, validated against a published schema) and a spreadsheet
 * (CSV); none of them computes anything of its own. */
#ifndef LLMRT_BENCH_BENCH_REPORT_H
#define LLMRT_BENCH_BENCH_REPORT_H

#include <stdio.h>

#include "bench_summary.h"

/* Settings line, per-config environment, the figures table and the verdicts. */
void bench_report_print(const bench_result *r, FILE *out);

/* Write the JSON document (schema "llmrt-bench/1") to path ("-" is stdout). */
llmrt_status bench_report_json(const bench_result *r, const char *path, llmrt_error *err);

/* Write dir/tokens.csv (one row per token) and dir/steps.csv (one row per step record),
 * creating dir when missing. */
llmrt_status bench_report_csv(const bench_result *r, const char *dir, llmrt_error *err);

#define BENCH_CSV_TOKENS_HEADER                                                              \
    "config,concurrency,round,batch,request,token,time_s,since_submit_ms,itl_ms"
#define BENCH_CSV_STEPS_HEADER                                                               \
    "config,concurrency,round,batch,step,n_seqs,n_tokens,n_prefill_tokens,n_decode_seqs,"    \
    "graph,async,t_start_s,host_prepare_ms,h2d_ms,compute_ms,d2h_ms,gpu_busy_ms,wall_ms,"    \
    "idle_ms,h2d_bytes,d2h_bytes"

#endif
