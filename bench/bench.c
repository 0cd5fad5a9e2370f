/* bench.c — the bench conductor behind bench.h: the settings check, loading, running
 * (bench_run), summarizing (bench_summary) and writing (bench_report, bench_plot). */
#include "bench.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench_configs.h"
#include "bench_env.h"
#include "bench_plot.h"
#include "bench_report.h"
#include "bench_summary.h"

void llmrt_bench_settings_init(bench_settings *s)
{
    memset(s, 0, sizeof *s);
    s->input_len = 128;
    s->output_len = 128;
    s->ignore_eos = 1;
    s->warmup = 2;
    s->rounds = 3;
    s->requests = 5;
    s->order = BENCH_ORDER_RANDOM;
    s->n_levels = 1;
    s->levels[0] = 1;
    s->resamples = 2000;
    s->ci_level = 0.95;
    s->margin = 0.01;
}

/* Refuse (1), or warn and go on (0), over `n_bad` differences. */
static int refuse(const bench_settings *s, int n_bad, const char *what)
{
    if (n_bad == 0)
        return 0;
    if (s->allow_diff) {
        fprintf(stderr, "llmrt bench: warning: the configs differ in %s (see above); "
                        "running anyway because of --allow-diff\n", what);
        return 0;
    }
    fprintf(stderr, "llmrt bench: refusing to compare configs that differ in %s (see above): "
                    "make them equal, or pass --allow-diff to compare anyway\n", what);
    return 1;
}

/* 1 when a request cannot fit the model; warnings when a level overflows the cache or the
 * batch limit. */
static int lengths_too_long(const bench_settings *s, const bench_config *c0)
{
    int32_t max_len = llmrt_engine_max_model_len(c0->engine);
    if ((int64_t)s->input_len + s->output_len > max_len) {
        fprintf(stderr, "llmrt bench: --input-len %d + --output-len %d = %lld tokens is longer "
                        "than max_model_len %d; shorten them or raise cache.max_model_len\n",
                s->input_len, s->output_len, (long long)s->input_len + s->output_len, max_len);
        return 1;
    }
    for (int l = 0; l < s->n_levels; l++) {
        int64_t need = (int64_t)s->levels[l] * (s->input_len + s->output_len);
        if (need > c0->stats.kv_capacity_tokens)
            fprintf(stderr, "llmrt bench: warning: concurrency %d needs %lld KV tokens but the "
                            "cache holds %lld: requests will be preempted and recomputed\n",
                    s->levels[l], (long long)need, (long long)c0->stats.kv_capacity_tokens);
        if (s->levels[l] > c0->stats.max_num_seqs)
            fprintf(stderr, "llmrt bench: warning: concurrency %d exceeds scheduler.max_num_seqs "
                            "%d: the rest wait in the queue\n",
                    s->levels[l], c0->stats.max_num_seqs);
    }
    return 0;
}

int llmrt_bench_execute(const llmrt_bench_options *o, FILE *report, llmrt_error *err)
{
    const bench_settings *s = &o->settings;
    bench_config cfgs[BENCH_MAX_CONFIGS];
    bench_diff diff = {0};
    bench_data data = {0};
    bench_result res = {0};
    int n = o->n_configs;
    int rc = 1; /* until done; 2 when refused */

    if (n < 1 || n > BENCH_MAX_CONFIGS) {
        llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "bench: %d configs given; compare 1 to %d", n,
                   BENCH_MAX_CONFIGS);
        return 1;
    }
    if (bench_configs_open(cfgs, n, o->configs, o->sets, o->n_sets, err) != LLMRT_OK)
        return 1;
    if (bench_configs_diff(cfgs, n, &diff, err) != LLMRT_OK)
        goto done;
    bench_diff_print(&diff, cfgs, n, report);
    fflush(report); /* before progress lines on stderr */
    if (diff.n_diff) {
        char keys[1024] = "";
        size_t len = 0;
        for (size_t i = 0; i < diff.n_rows && len + 2 < sizeof keys; i++)
            if (diff.rows[i].cls == BENCH_KEY_DIFF)
                len += (size_t)snprintf(keys + len, sizeof keys - len, "%s%s", len ? ", " : "",
                                        diff.rows[i].key);
        if (refuse(s, diff.n_diff, keys)) {
            rc = 2;
            goto done;
        }
    }

    if (bench_configs_load(cfgs, n, stderr, err) != LLMRT_OK)
        goto done;
    if (refuse(s, bench_configs_check_loaded(cfgs, n, stderr), "model or KV capacity") ||
        lengths_too_long(s, &cfgs[0])) {
        rc = 2;
        goto done;
    }

    if (bench_run(s, cfgs, n, &data, stderr, err) != LLMRT_OK)
        goto done;
    for (int i = 0; i < n; i++) {
        llmrt_engine_stats_get(cfgs[i].engine, &cfgs[i].stats_end);
        cfgs[i].rss_end = bench_rss_bytes();
    }

    res.settings = s;
    res.configs = cfgs;
    res.n_configs = n;
    res.data = &data;
    res.diff = &diff;
    res.argc = o->argc;
    res.argv = o->argv;
    bench_env_collect(&res.env);
    if (bench_summarize(&res, err) != LLMRT_OK)
        goto done;
    bench_report_print(&res, report);
    if (o->json && bench_report_json(&res, o->json, err) != LLMRT_OK)
        goto done;
    if (o->csv && bench_report_csv(&res, o->csv, err) != LLMRT_OK)
        goto done;
    if (o->plot && bench_plot_write(&res, o->plot, err) != LLMRT_OK)
        goto done;
    if (o->json && strcmp(o->json, "-"))
        fprintf(report, "wrote %s\n", o->json);
    if (o->csv)
        fprintf(report, "wrote %s/tokens.csv and %s/steps.csv\n", o->csv, o->csv);
    if (o->plot)
        fprintf(report, "wrote %s\n", o->plot);
    rc = 0;
done:
    bench_result_free(&res);
    bench_data_free(&data);
    bench_diff_free(&diff);
    bench_configs_close(cfgs, n);
    return rc;
}
