/* cmd_bench.c — `llmrt bench`: A/B two or more runtime configs side by side, with latency
 * distributions, per-step busy/idle time, memory figures and a verdict with a confidence
 * interval.
 *
 * Why: the reason llmrt exists is that a user swaps one line of runtime.ini and learns, with
 * confidence, what it changed. This file parses the options; the bench itself is the bench
 * library's llmrt_bench_execute (bench/bench.h). */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include "bench.h"
#include "bench_configs.h"
#include "commands.h"
#include "common.h"

static const char usage[] =
    "usage: llmrt bench -c A.ini [-c B.ini ...] [options]\n\n"
    "Runs the same synthetic requests through each config (each its own engine, loaded once,\n"
    "in this process), interleaving configs so drift hits all alike: a round is --requests\n"
    "blocks, each running every config once, back to back. Each config is compared with the\n"
    "first: ITL, TTFT and throughput, each as the relative change of batch k of the config\n"
    "against batch k of the first (they ran in the same block), with an exact interval\n"
    "(Wilcoxon signed-rank, Hodges-Lehmann estimate), and a plain sentence: a difference\n"
    "(the interval lies beyond ±--margin), no meaningful difference (it lies within) or\n"
    "inconclusive. The intervals are widened for the number of comparisons (Bonferroni), so\n"
    "that all verdicts of a run hold together 95% of the time.\n\n"
    "Latency mode (default): one request at a time. Load mode (--concurrency): at each level,\n"
    "batches of that many requests submitted together.\n\n"
    "Before loading, bench prints every setting in which the configs differ and refuses\n"
    "(exit 2) differences outside the A/B knobs unless --allow-diff. The knobs:\n"
    "  memory.* and every [memory.<plugin>] key, scheduler.async_scheduling,\n"
    "  scheduler.cuda_graphs, cache.prefix_caching, [backend.cpu] threads.\n"
    "runtime.log_level and server.* are ignored (not used by the measurement). After loading,\n"
    "the engines must also agree on the model and the KV capacity in tokens (set the same\n"
    "cache.kv_tokens), again unless --allow-diff.\n\n"
    "options:\n"
    "  -c, --config FILE      a config to compare (repeat; the first is the baseline)\n"
    "  --set SECTION.KEY=VAL  override a key in every config (repeatable)\n"
    "  --model DIR            model folder for every config\n"
    "  --input-len N          prompt tokens per request (default 128; synthetic ids)\n"
    "  --prefix-len N         the first N of them are the same in every request (a shared\n"
    "                         system prompt: with cache.prefix_caching on, requests after\n"
    "                         the first find it cached); N < --input-len, default 0\n"
    "  --output-len N         generated tokens per request (default 128)\n"
    "  --ignore-eos           keep generating past eos (default)\n"
    "  --no-ignore-eos        stop at eos (requests may end early)\n"
    "  --warmup N             unrecorded batches per config before measuring (default 2)\n"
    "  --rounds R             rounds (default 3)\n"
    "  --requests N           requests (batches in load mode) per config per round (default 5)\n"
    "  --order random|abab    order of configs in each block of a round: a fresh seeded\n"
    "                         shuffle per block (default: no config always runs first),\n"
    "                         or fixed\n"
    "  --seed S               seed of prompts and of the random order (default 0)\n"
    "  --concurrency LIST     load mode at these levels, e.g. 1,2,4,8,16,32\n"
    "  --resamples N          accepted for old command lines; verdicts no longer resample\n"
    "  --margin PCT           changes within ±PCT percent are no meaningful difference\n"
    "                         (default 1)\n"
    "  --allow-diff           run even when configs differ beyond the knobs\n"
    "  --json FILE            everything, raw samples included (docs/bench-json.md; - = stdout)\n"
    "  --csv DIR              raw samples: DIR/tokens.csv, DIR/steps.csv\n"
    "  --plot FILE            ITL CDF and per-step busy/idle bars (.png or .svg)\n"
    "  --help                 this text\n\n"
    "Exit status: 0 done, 1 runtime error, 2 usage error or configs refused.\n";

enum {
    OPT_INPUT_LEN = CLI_OPT_FIRST_OWN,
    OPT_PREFIX_LEN,
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
    OPT_MARGIN,
    OPT_ALLOW_DIFF,
    OPT_JSON,
    OPT_CSV,
    OPT_PLOT
};

static const struct option long_opts[] = {
    CLI_COMMON_OPTIONS,
    {"input-len", required_argument, 0, OPT_INPUT_LEN},
    {"prefix-len", required_argument, 0, OPT_PREFIX_LEN},
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
    {"margin", required_argument, 0, OPT_MARGIN},
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
    llmrt_bench_options b;
    const char *ini[BENCH_MAX_CONFIGS];
    const char *sets[CLI_MAX_SETS + 1]; /* --model first, so an explicit --set model.path wins */
    cli_common common;
} options;

/* Returns 0 to go on, or the exit code. */
static int parse(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    bench_settings *s = &o->b.settings;
    llmrt_bench_settings_init(s);
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "c:", long_opts, NULL)) != -1) {
        if (opt == 'c') {
            if (o->b.n_configs == BENCH_MAX_CONFIGS)
                return cli_usage_error("bench", usage, "too many -c (at most %d configs)",
                                       BENCH_MAX_CONFIGS);
            o->ini[o->b.n_configs++] = optarg;
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
        case OPT_PREFIX_LEN:
            if (int_opt("prefix-len", optarg, 0, 10000000, &s->prefix_len))
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
        case OPT_MARGIN: {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || errno || !(v >= 0 && v <= 50))
                return cli_usage_error("bench", usage,
                                       "--margin %s: expected a percentage from 0 to 50, e.g. 1 "
                                       "or 0.5",
                                       optarg);
            s->margin = v / 100.0;
            break;
        }
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
            o->b.json = optarg;
            break;
        case OPT_CSV:
            o->b.csv = optarg;
            break;
        case OPT_PLOT:
            o->b.plot = optarg;
            break;
        default:
            return cli_bad_option("bench", long_opts, argv);
        }
    }
    if (optind < argc)
        return cli_usage_error("bench", usage, "unexpected argument '%s'", argv[optind]);
    if (s->prefix_len >= s->input_len)
        return cli_usage_error("bench", usage,
                               "--prefix-len %d: must be shorter than --input-len %d (every "
                               "request has its own tokens after the shared ones)",
                               s->prefix_len, s->input_len);
    if (o->b.n_configs == 0)
        return cli_usage_error("bench", usage,
                               "no config given: name each config to compare with -c FILE "
                               "(e.g. -c conf/pageable.ini -c conf/pinned.ini)");
    const char *plot = o->b.plot;
    if (plot) {
        size_t n = strlen(plot);
        if (n < 4 || (strcasecmp(plot + n - 4, ".png") && strcasecmp(plot + n - 4, ".svg")))
            return cli_usage_error("bench", usage, "--plot %s: the file name must end in .png "
                                                   "or .svg", plot);
    }
    o->b.configs = o->ini;
    if (o->common.model_set[0])
        o->sets[o->b.n_sets++] = o->common.model_set;
    for (int i = 0; i < o->common.n_sets; i++)
        o->sets[o->b.n_sets++] = o->common.sets[i];
    o->b.sets = o->sets;
    o->b.argc = argc;
    o->b.argv = argv;
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    options o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    FILE *report = o.b.json && strcmp(o.b.json, "-") == 0 ? stderr : stdout;
    llmrt_error err = {0};
    rc = llmrt_bench_execute(&o.b, report, &err);
    if (rc == 1)
        cli_fail("bench", &err);
    return rc;
}
