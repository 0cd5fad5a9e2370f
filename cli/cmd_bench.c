/* cmd_bench.c — `llmrt bench`: A/B two or more runtime configs side by side, with latency
 * distributions, per-step busy/idle time, memory figures and a verdict with a confidence
 * interval.
 *
 * Why: the reason llmrt exists is that a user swaps one line of runtime.ini and learns, with
 * confidence, what it changed. This file is the conductor: options, the settings check,
 * loading, running (bench_run), summarizing (bench_summary) and writing (bench_report,
 * bench_plot).
 *
 * All configs run in this one process, each with its own runtime and engine, loaded once
 * before measuring. Only one engine works at a time, so they never compete; one process
 * keeps the interleaving cheap (no IPC) and the clocks identical. The cost: process RSS and
 * device memory in use are whole-process figures, so they are reported as measured just
 * after each load (with the growth that load caused). */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include "bench_configs.h"
#include "bench_env.h"
#include "bench_plot.h"
#include "bench_report.h"
#include "bench_run.h"
#include "bench_summary.h"
#include "commands.h"
#include "common.h"

static const char usage[] =
    "usage: llmrt bench -c A.ini [-c B.ini ...] [options]\n\n"
    "Runs the same synthetic requests through each config (each its own engine, loaded once,\n"
    "in this process), interleaving configs so drift hits all alike: a round is --requests\n"
    "blocks, each running every config once, back to back. Each config is compared with the\n"
    "first: median ITL, TTFT and throughput, each with a 95% interval from a bootstrap that\n"
    "resamples blocks (keeping each request's tokens together), and a plain sentence.\n\n"
    "Latency mode (default): one request at a time. Load mode (--concurrency): at each level,\n"
    "batches of that many requests submitted together.\n\n"
    "Before loading, bench prints every setting in which the configs differ and refuses\n"
    "(exit 2) differences outside the A/B knobs unless --allow-diff. The knobs:\n"
    "  memory.* and every [memory.<plugin>] key, scheduler.async_scheduling,\n"
    "  scheduler.cuda_graphs, [backend.cpu] threads.\n"
    "runtime.log_level and server.* are ignored (not used by the measurement). After loading,\n"
    "the engines must also agree on the model and the KV capacity in tokens (set the same\n"
    "cache.kv_tokens), again unless --allow-diff.\n\n"
    "options:\n"
    "  -c, --config FILE      a config to compare (repeat; the first is the baseline)\n"
    "  --set SECTION.KEY=VAL  override a key in every config (repeatable)\n"
    "  --model DIR            model folder for every config\n"
    "  --input-len N          prompt tokens per request (default 128; synthetic ids)\n"
    "  --output-len N         generated tokens per request (default 128)\n"
    "  --ignore-eos           keep generating past eos (default)\n"
    "  --no-ignore-eos        stop at eos (requests may end early)\n"
    "  --warmup N             unrecorded batches per config before measuring (default 2)\n"
    "  --rounds R             rounds (default 3)\n"
    "  --requests N           requests (batches in load mode) per config per round (default 5)\n"
    "  --order abab|random    order of configs in each block of a round: fixed, or a\n"
    "                         fresh shuffle per block (default abab)\n"
    "  --seed S               seed of prompts, random order and bootstrap (default 0)\n"
    "  --concurrency LIST     load mode at these levels, e.g. 1,2,4,8,16,32\n"
    "  --resamples N          bootstrap resamples (default 2000)\n"
    "  --allow-diff           run even when configs differ beyond the knobs\n"
    "  --json FILE            everything, raw samples included (docs/bench-json.md; - = stdout)\n"
    "  --csv DIR              raw samples: DIR/tokens.csv, DIR/steps.csv\n"
    "  --plot FILE            ITL CDF and per-step busy/idle bars (.png or .svg)\n"
    "  --help                 this text\n\n"
    "Exit status: 0 done, 1 runtime error, 2 usage error or configs refused.\n";

enum {
    OPT_INPUT_LEN = CLI_OPT_FIRST_OWN,
    OPT_OUTPUT_LEN,
    OPT_IGNORE_EOS,
    OPT_NO_IGNORE_EOS,
    OPT_WARMUP,
    OPT_ROUNDS,
    OPT_REQUESTS,
    OPT_ORDER,
    OPT_SEED,
    OPT_CONCURRENCY,
    OPT_RESAMPLES,
    OPT_ALLOW_DIFF,
    OPT_JSON,
    OPT_CSV,
    OPT_PLOT
};

static const struct option long_opts[] = {
    CLI_COMMON_OPTIONS,
    {"input-len", required_argument, 0, OPT_INPUT_LEN},
    {"output-len", required_argument, 0, OPT_OUTPUT_LEN},
    {"ignore-eos", no_argument, 0, OPT_IGNORE_EOS},
    {"no-ignore-eos", no_argument, 0, OPT_NO_IGNORE_EOS},
    {"warmup", required_argument, 0, OPT_WARMUP},
    {"rounds", required_argument, 0, OPT_ROUNDS},
    {"requests", required_argument, 0, OPT_REQUESTS},
    {"order", required_argument, 0, OPT_ORDER},
    {"seed", required_argument, 0, OPT_SEED},
    {"concurrency", required_argument, 0, OPT_CONCURRENCY},
    {"resamples", required_argument, 0, OPT_RESAMPLES},
    {"allow-diff", no_argument, 0, OPT_ALLOW_DIFF},
    {"json", required_argument, 0, OPT_JSON},
    {"csv", required_argument, 0, OPT_CSV},
    {"plot", required_argument, 0, OPT_PLOT},
    {0, 0, 0, 0}};

/* Parse an integer option in [lo, hi]; prints the usage error and returns -1 when bad. */
static int int_opt(const char *name, const char *arg, long lo, long hi, int32_t *out)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || errno || v < lo || v > hi) {
        cli_usage_error("bench", usage, "--%s %s: expected an integer from %ld to %ld", name, arg,
                        lo, hi);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

typedef struct options {
    bench_settings s;
    const char *ini[BENCH_MAX_CONFIGS];
    int n_ini;
    cli_common common;
    const char *json, *csv, *plot;
} options;

/* Returns 0 to go on, or the exit code. */
static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    bench_settings *s = &o->s;
    s->input_len = 128;
    s->output_len = 128;
    s->ignore_eos = 1;
    s->warmup = 2;
    s->rounds = 3;
    s->requests = 5;
    s->order = BENCH_ORDER_ABAB;
    s->n_levels = 1;
    s->levels[0] = 1;
    s->resamples = 2000;
    s->ci_level = 0.95;
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "c:", long_opts, NULL)) != -1) {
        if (opt == 'c') {
            if (o->n_ini == BENCH_MAX_CONFIGS)
                return cli_usage_error("bench", usage, "too many -c (at most %d configs)",
                                       BENCH_MAX_CONFIGS);
            o->ini[o->n_ini++] = optarg;
            continue;
        }
        int r = cli_common_opt(&o->common, opt, optarg, "bench", usage);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        switch (opt) {
        case OPT_INPUT_LEN:
            if (int_opt("input-len", optarg, 1, 10000000, &s->input_len))
                return 2;
            break;
        case OPT_OUTPUT_LEN:
            if (int_opt("output-len", optarg, 1, 10000000, &s->output_len))
                return 2;
            break;
        case OPT_IGNORE_EOS:
            s->ignore_eos = 1;
            break;
        case OPT_NO_IGNORE_EOS:
            s->ignore_eos = 0;
            break;
        case OPT_WARMUP:
            if (int_opt("warmup", optarg, 0, 100000, &s->warmup))
                return 2;
            break;
        case OPT_ROUNDS:
            if (int_opt("rounds", optarg, 1, 100000, &s->rounds))
                return 2;
            break;
        case OPT_REQUESTS:
            if (int_opt("requests", optarg, 1, 100000, &s->requests))
                return 2;
            break;
        case OPT_RESAMPLES:
            if (int_opt("resamples", optarg, 10, 10000000, &s->resamples))
                return 2;
            break;
        case OPT_ORDER:
            if (strcmp(optarg, "abab") == 0)
                s->order = BENCH_ORDER_ABAB;
            else if (strcmp(optarg, "random") == 0)
                s->order = BENCH_ORDER_RANDOM;
            else
                return cli_usage_error("bench", usage, "--order %s: expected abab or random",
                                       optarg);
            break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (end == optarg || *end || errno || optarg[0] == '-' || v > (unsigned long long)INT64_MAX)
                return cli_usage_error("bench", usage,
                                       "--seed %s: expected an integer from 0 to %lld", optarg,
                                       (long long)INT64_MAX);
            s->seed = v;
            break;
        }
        case OPT_CONCURRENCY: {
            int32_t *ids = NULL;
            int n = cli_parse_ids(optarg, &ids);
            int bad = n <= 0 || n > (int)(sizeof s->levels / sizeof s->levels[0]);
            for (int i = 0; i < n && !bad; i++)
                bad = ids[i] < 1 || ids[i] > 65536;
            if (!bad) {
                s->n_levels = n;
                memcpy(s->levels, ids, (size_t)n * sizeof *ids);
                s->load_mode = 1;
            }
            free(ids);
            if (bad)
                return cli_usage_error("bench", usage,
                                       "--concurrency %s: expected 1 to 32 comma-separated "
                                       "integers from 1 to 65536, e.g. 1,2,4,8",
                                       optarg);
            break;
        }
        case OPT_ALLOW_DIFF:
            s->allow_diff = 1;
            break;
        case OPT_JSON:
            o->json = optarg;
            break;
        case OPT_CSV:
            o->csv = optarg;
            break;
        case OPT_PLOT:
            o->plot = optarg;
            break;
        default:
            return cli_bad_option("bench", usage);
        }
    }
    if (optind < argc)
        return cli_usage_error("bench", usage, "unexpected argument '%s'", argv[optind]);
    if (o->n_ini == 0)
        return cli_usage_error("bench", usage,
                               "no config given: name each config to compare with -c FILE "
                               "(e.g. -c conf/pageable.ini -c conf/pinned.ini)");
    if (o->plot) {
        size_t n = strlen(o->plot);
        if (n < 4 || (strcasecmp(o->plot + n - 4, ".png") && strcasecmp(o->plot + n - 4, ".svg")))
            return cli_usage_error("bench", usage, "--plot %s: the file name must end in .png "
                                                   "or .svg", o->plot);
    }
    return 0;
}

/* Refuse (2), or warn and go on (0), over `n_bad` differences. */
static int refuse_or_warn(const options *o, int n_bad, const char *what)
{
    if (n_bad == 0)
        return 0;
    if (o->s.allow_diff) {
        fprintf(stderr, "llmrt bench: warning: the configs differ in %s (see above); "
                        "running anyway because of --allow-diff\n", what);
        return 0;
    }
    fprintf(stderr, "llmrt bench: refusing to compare configs that differ in %s (see above): "
                    "make them equal, or pass --allow-diff to compare anyway\n", what);
    return 2;
}

static int fail(const llmrt_error *err) { return cli_fail("bench", err); }

int cmd_bench(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    bench_settings *s = &o.s;
    FILE *report = o.json && strcmp(o.json, "-") == 0 ? stderr : stdout;

    bench_config cfgs[BENCH_MAX_CONFIGS];
    bench_diff diff = {0};
    bench_data data = {0};
    bench_result res = {0};
    llmrt_error err = {0};
    int n = o.n_ini;
    int opened = 0;

    const char *sets[CLI_MAX_SETS + 1];
    int n_sets = 0;
    if (o.common.model_set[0])
        sets[n_sets++] = o.common.model_set;
    for (int i = 0; i < o.common.n_sets; i++)
        sets[n_sets++] = o.common.sets[i];

    if (bench_configs_open(cfgs, n, o.ini, sets, n_sets, &err) != LLMRT_OK)
        return fail(&err);
    opened = 1;
    if (bench_configs_diff(cfgs, n, &diff, &err) != LLMRT_OK) {
        rc = fail(&err);
        goto done;
    }
    bench_diff_print(&diff, cfgs, n, report);
    fflush(report); /* before progress lines on stderr */
    if (diff.n_diff) {
        char keys[1024] = "";
        size_t len = 0;
        for (size_t i = 0; i < diff.n_rows && len + 2 < sizeof keys; i++)
            if (diff.rows[i].cls == BENCH_KEY_DIFF)
                len += (size_t)snprintf(keys + len, sizeof keys - len, "%s%s", len ? ", " : "",
                                        diff.rows[i].key);
        if ((rc = refuse_or_warn(&o, diff.n_diff, keys)))
            goto done;
    }

    if (bench_configs_load(cfgs, n, stderr, &err) != LLMRT_OK) {
        rc = fail(&err);
        goto done;
    }
    int mismatches = bench_configs_check_loaded(cfgs, n, stderr);
    if ((rc = refuse_or_warn(&o, mismatches, "model or KV capacity")))
        goto done;

    int32_t max_len = llmrt_engine_max_model_len(cfgs[0].engine);
    if ((int64_t)s->input_len + s->output_len > max_len) {
        fprintf(stderr, "llmrt bench: --input-len %d + --output-len %d = %lld tokens is longer "
                        "than max_model_len %d; shorten them or raise cache.max_model_len\n",
                s->input_len, s->output_len, (long long)s->input_len + s->output_len, max_len);
        rc = 2;
        goto done;
    }
    for (int l = 0; l < s->n_levels; l++) {
        int64_t need = (int64_t)s->levels[l] * (s->input_len + s->output_len);
        if (need > cfgs[0].stats.kv_capacity_tokens)
            fprintf(stderr, "llmrt bench: warning: concurrency %d needs %lld KV tokens but the "
                            "cache holds %lld: requests will be preempted and recomputed\n",
                    s->levels[l], (long long)need, (long long)cfgs[0].stats.kv_capacity_tokens);
        if (s->levels[l] > cfgs[0].stats.max_num_seqs)
            fprintf(stderr, "llmrt bench: warning: concurrency %d exceeds scheduler.max_num_seqs "
                            "%d: the rest wait in the queue\n",
                    s->levels[l], cfgs[0].stats.max_num_seqs);
    }

    if (bench_run(s, cfgs, n, &data, stderr, &err) != LLMRT_OK) {
        rc = fail(&err);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        llmrt_engine_stats_get(cfgs[i].engine, &cfgs[i].stats_end);
        cfgs[i].rss_end = bench_rss_bytes();
    }

    res.settings = s;
    res.configs = cfgs;
    res.n_configs = n;
    res.data = &data;
    res.diff = &diff;
    res.argc = argc;
    res.argv = argv;
    bench_env_collect(&res.env);
    if (bench_summarize(&res, &err) != LLMRT_OK) {
        rc = fail(&err);
        goto done;
    }
    bench_report_print(&res, report);
    if (o.json && bench_report_json(&res, o.json, &err) != LLMRT_OK) {
        rc = fail(&err);
        goto done;
    }
    if (o.csv && bench_report_csv(&res, o.csv, &err) != LLMRT_OK) {
        rc = fail(&err);
        goto done;
    }
    if (o.plot && bench_plot_write(&res, o.plot, &err) != LLMRT_OK) {
        rc = fail(&err);
        goto done;
    }
    if (o.json && strcmp(o.json, "-"))
        fprintf(report, "wrote %s\n", o.json);
    if (o.csv)
        fprintf(report, "wrote %s/tokens.csv and %s/steps.csv\n", o.csv, o.csv);
    if (o.plot)
        fprintf(report, "wrote %s\n", o.plot);
    rc = 0;
done:
    bench_result_free(&res);
    bench_data_free(&data);
    bench_diff_free(&diff);
    if (opened)
        bench_configs_close(cfgs, n);
    return rc;
}
