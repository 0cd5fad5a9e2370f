/* bench_report.c — the terminal report of `llmrt bench`: what was run, on what, the figures
 * per config (one column each; in load mode one row per level and config) and one verdict
 * sentence per comparison. */
#include "bench_report.h"

#include <math.h>
#include <string.h>

#define COLW 16 /* width of a config column */

static void fmt_ms(char *b, size_t n, double v)
{
    if (isnan(v))
        snprintf(b, n, "-");
    else if (v >= 100)
        snprintf(b, n, "%.1f", v);
    else
        snprintf(b, n, "%.3f", v);
}

static void fmt_bytes(char *b, size_t n, double v)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(b, n, "%.0f B", v);
    else
        snprintf(b, n, "%.1f %s", v, u[i]);
}

static void fmt_pair(char *b, size_t n, double x, double y)
{
    char bx[32], by[32];
    fmt_ms(bx, sizeof bx, x);
    fmt_ms(by, sizeof by, y);
    snprintf(b, n, "%s / %s", bx, by);
}

/* One table row: a label and one pre-formatted cell per config. */
typedef void (*cell_fn)(const bench_result *r, const bench_cell *c, char *b, size_t n);

static void row(const bench_result *r, int level, FILE *out, const char *label, cell_fn fn)
{
    fprintf(out, "  %-30s", label);
    for (int c = 0; c < r->n_configs; c++) {
        char b[64];
        fn(r, bench_cell_at(r, level, c), b, sizeof b);
        fprintf(out, " %*s", COLW, b);
    }
    fputc('\n', out);
}

#define CELL(name, expr)                                                                      \
    static void name(const bench_result *r, const bench_cell *c, char *b, size_t n)          \
    {                                                                                         \
        (void)r;                                                                              \
        expr;                                                                                 \
    }
CELL(c_itl50, fmt_ms(b, n, c->itl_ms.p50))
CELL(c_itl90, fmt_ms(b, n, c->itl_ms.p90))
CELL(c_itl99, fmt_ms(b, n, c->itl_ms.p99))
CELL(c_itlmean, fmt_pair(b, n, c->itl_ms.mean, c->itl_ms.stdev))
CELL(c_tpot, fmt_ms(b, n, c->tpot_ms.mean))
CELL(c_ttft50, fmt_ms(b, n, c->ttft_ms.p50))
CELL(c_ttft90, fmt_ms(b, n, c->ttft_ms.p90))
CELL(c_e2e50, fmt_ms(b, n, c->e2e_ms.p50))
CELL(c_tput, snprintf(b, n, "%.1f", c->output_tok_s))
CELL(c_steps, snprintf(b, n, "%zu + %zu", c->steps.n_decode, c->steps.n_prefill))
CELL(c_hit, r->configs[c->config].stats.prefix_caching
                ? (void)snprintf(b, n, "%.1f%%", c->prompt_tokens ? 100.0 * (double)c->cached_tokens /
                                                                          (double)c->prompt_tokens
                                                                    : 0.0)
                : (void)snprintf(b, n, "off"))
CELL(c_wall, fmt_pair(b, n, c->steps.wall_ms.mean, c->steps.wall_ms.p90))
CELL(c_prep, fmt_pair(b, n, c->steps.host_prepare_ms.mean, c->steps.host_prepare_ms.p90))
CELL(c_h2d, fmt_pair(b, n, c->steps.h2d_ms.mean, c->steps.h2d_ms.p90))
CELL(c_comp, fmt_pair(b, n, c->steps.compute_ms.mean, c->steps.compute_ms.p90))
CELL(c_d2h, fmt_pair(b, n, c->steps.d2h_ms.mean, c->steps.d2h_ms.p90))
CELL(c_busy, fmt_pair(b, n, c->steps.gpu_busy_ms.mean, c->steps.gpu_busy_ms.p90))
CELL(c_idle, fmt_pair(b, n, c->steps.idle_ms.mean, c->steps.idle_ms.p90))
CELL(c_bytes, snprintf(b, n, "%.0f / %.0f", c->steps.h2d_bytes_per_step,
                       c->steps.d2h_bytes_per_step))
CELL(c_graph, snprintf(b, n, "%.0f%% / %.0f%%", 100 * c->steps.graph_share,
                       100 * c->steps.async_share))

static void header(const bench_result *r, FILE *out, const char *title)
{
    fprintf(out, "  %-30s", title);
    for (int c = 0; c < r->n_configs; c++)
        fprintf(out, " %*s", COLW, r->configs[c].name);
    fputc('\n', out);
}

static void level_table(const bench_result *r, int l, FILE *out)
{
    const bench_cell *c0 = bench_cell_at(r, l, 0);
    char title[64];
    snprintf(title, sizeof title, "concurrency %d", c0->concurrency);
    header(r, out, title);
    row(r, l, out, "ITL p50 (ms)", c_itl50);
    row(r, l, out, "ITL p90 (ms)", c_itl90);
    row(r, l, out, "ITL p99 (ms)", c_itl99);
    row(r, l, out, "ITL mean / stdev (ms)", c_itlmean);
    row(r, l, out, "TPOT mean (ms)", c_tpot);
    row(r, l, out, "TTFT p50 (ms)", c_ttft50);
    row(r, l, out, "TTFT p90 (ms)", c_ttft90);
    row(r, l, out, "end-to-end p50 (ms)", c_e2e50);
    row(r, l, out, "output tok/s", c_tput);
    row(r, l, out, "prefix cache hit rate", c_hit);
    row(r, l, out, "steps: decode + prefill", c_steps);
    fprintf(out, "  per decode step, mean / p90:\n");
    row(r, l, out, "  wall (ms)", c_wall);
    row(r, l, out, "  host prepare (ms)", c_prep);
    row(r, l, out, "  H2D (ms)", c_h2d);
    row(r, l, out, "  compute (ms)", c_comp);
    row(r, l, out, "  D2H (ms)", c_d2h);
    row(r, l, out, "  device busy (ms)", c_busy);
    row(r, l, out, "  idle = wall - busy (ms)", c_idle);
    row(r, l, out, "  bytes H2D / D2H", c_bytes);
    row(r, l, out, "  graph / async steps", c_graph);
}

/* Load mode: one line per level and config. */
static void load_table(const bench_result *r, FILE *out)
{
    fprintf(out, "  %5s %-16s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "conc", "config", "tok/s",
            "ITL p50", "ITL p90", "ITL p99", "TTFT p50", "wall", "busy", "idle", "prefix");
    fprintf(out, "  %5s %-16s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "", "", "", "(ms)", "(ms)",
            "(ms)", "(ms)", "(ms/step)", "(ms/step)", "(ms/step)", "hit rate");
    for (int l = 0; l < r->settings->n_levels; l++)
        for (int c = 0; c < r->n_configs; c++) {
            const bench_cell *x = bench_cell_at(r, l, c);
            char v[8][32], hit[64];
            c_hit(r, x, hit, sizeof hit);
            fmt_ms(v[0], 32, x->itl_ms.p50);
            fmt_ms(v[1], 32, x->itl_ms.p90);
            fmt_ms(v[2], 32, x->itl_ms.p99);
            fmt_ms(v[3], 32, x->ttft_ms.p50);
            fmt_ms(v[4], 32, x->steps.wall_ms.mean);
            fmt_ms(v[5], 32, x->steps.gpu_busy_ms.mean);
            fmt_ms(v[6], 32, x->steps.idle_ms.mean);
            fprintf(out, "  %5d %-16s %9.1f %9s %9s %9s %9s %9s %9s %9s %9s\n", x->concurrency,
                    r->configs[c].name, x->output_tok_s, v[0], v[1], v[2], v[3], v[4], v[5], v[6],
                    hit);
        }
}

static void configs_block(const bench_result *r, FILE *out)
{
    fprintf(out, "  %-30s", "");
    for (int c = 0; c < r->n_configs; c++)
        fprintf(out, " %*s", COLW, r->configs[c].name);
    fputc('\n', out);
#define LINE(label, ...)                                                                      \
    do {                                                                                      \
        fprintf(out, "  %-30s", label);                                                       \
        for (int c = 0; c < r->n_configs; c++) {                                              \
            const bench_config *k = &r->configs[c];                                           \
            const llmrt_engine_stats *s = &k->stats, *e = &k->stats_end;                      \
            char b[128];                                                                      \
            (void)s;                                                                          \
            (void)e;                                                                          \
            __VA_ARGS__;                                                                      \
            fprintf(out, " %*s", COLW, b);                                                    \
        }                                                                                     \
        fputc('\n', out);                                                                     \
    } while (0)
    LINE("memory path in use", snprintf(b, sizeof b, "%s", e->mem.path_in_use[0]
                                                              ? e->mem.path_in_use
                                                              : s->memory_path));
    LINE("backend", snprintf(b, sizeof b, "%s", s->backend));
    LINE("async scheduling / graphs",
         snprintf(b, sizeof b, "%s / %s", s->async_scheduling ? "on" : "off",
                  s->cuda_graphs ? "on" : "off"));
    LINE("prefix caching", snprintf(b, sizeof b, "%s", s->prefix_caching ? "on" : "off"));
    LINE("host pinned", fmt_bytes(b, sizeof b, (double)e->mem.host_pinned_bytes));
    LINE("host mapped", fmt_bytes(b, sizeof b, (double)e->mem.host_mapped_bytes));
    LINE("host pageable", fmt_bytes(b, sizeof b, (double)e->mem.host_pageable_bytes));
    LINE("device step buffers", fmt_bytes(b, sizeof b, (double)e->mem.device_bytes));
    LINE("device memory, this engine", s->device_mem_engine
                                           ? fmt_bytes(b, sizeof b, (double)s->device_mem_engine)
                                           : (void)snprintf(b, sizeof b, "-"));
    LINE("device memory used (device)", s->device_mem_total
                                   ? fmt_bytes(b, sizeof b,
                                               (double)(s->device_mem_total - s->device_mem_free))
                                   : (void)snprintf(b, sizeof b, "-"));
    LINE("process RSS after load", fmt_bytes(b, sizeof b, (double)k->rss_after_load));
    LINE("  of which this load", fmt_bytes(b, sizeof b,
                                           (double)(k->rss_after_load > k->rss_before_load
                                                        ? k->rss_after_load - k->rss_before_load
                                                        : 0)));
    LINE("KV capacity (tokens)", snprintf(b, sizeof b, "%lld", (long long)s->kv_capacity_tokens));
    LINE("KV cache", fmt_bytes(b, sizeof b, (double)s->kv_bytes));
    LINE("weights", fmt_bytes(b, sizeof b, (double)s->weight_bytes));
    LINE("load time (s)", snprintf(b, sizeof b, "%.2f", s->load_time_s));
#undef LINE
    const llmrt_engine_stats *s0 = &r->configs[0].stats;
    fprintf(out, "  device: %s; model: %s (%s, quant %s)\n", s0->device, s0->model_path,
            s0->model_arch, s0->quant);
}

void bench_report_print(const bench_result *r, FILE *out)
{
    const bench_settings *s = r->settings;
    char shared[64] = "";
    if (s->prefix_len)
        snprintf(shared, sizeof shared, " (the first %d shared)", s->prefix_len);
    fprintf(out, "\nllmrt bench — %s mode: prompt %d tokens%s, output %d tokens%s; %d warm-up, "
                 "%d round%s x %d %s per config, order %s, seed %llu\n",
            s->load_mode ? "load" : "latency", s->input_len, shared, s->output_len,
            s->ignore_eos ? " (eos ignored)" : "", s->warmup, s->rounds, s->rounds == 1 ? "" : "s",
            s->requests,
            s->load_mode ? "batches" : "requests", s->order == BENCH_ORDER_ABAB ? "abab" : "random",
            (unsigned long long)s->seed);
    fprintf(out, "llmrt %s, commit %s, %s, %s, %s (%d CPUs)\n\n", r->env.version, r->env.commit,
            r->env.date_utc, r->env.os, r->env.cpu[0] ? r->env.cpu : "unknown CPU", r->env.n_cpus);
    configs_block(r, out);
    fputc('\n', out);
    if (s->load_mode) {
        load_table(r, out);
        fputc('\n', out);
        for (int l = 0; l < s->n_levels; l++) {
            level_table(r, l, out);
            fputc('\n', out);
        }
    } else {
        level_table(r, 0, out);
        fputc('\n', out);
    }
    if (r->n_verdicts == 0) {
        fprintf(out, "one config: no comparison (give two or more -c to get a verdict)\n");
        return;
    }
    fprintf(out, "verdicts against %s (margin ±%.4g%%; %.4g%% intervals, Bonferroni over %zu "
                 "comparison%s for %.4g%% together; Wilcoxon signed-rank over %d paired %s "
                 "per config):\n",
            r->configs[0].name, 100 * s->margin, 100 * r->interval_level, r->n_verdicts,
            r->n_verdicts == 1 ? "" : "s", 100 * s->ci_level, s->rounds * s->requests,
            s->load_mode ? "batches" : "requests");
    for (size_t i = 0; i < r->n_verdicts; i++) {
        const bench_verdict *v = &r->verdicts[i];
        if (s->load_mode)
            fprintf(out, "  [concurrency %d] %s\n", s->levels[v->level], v->sentence);
        else
            fprintf(out, "  %s\n", v->sentence);
    }
}
