/* common.c — shared option handling and error reporting for subcommands. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "llmrt %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "; see 'llmrt %s --help'\n", cmd);
    va_end(ap);
    (void)usage;
    return 2;
}

const char *cli_nearest_option(const struct option *opts, const char *name)
{
    const char *best = NULL;
    int bd = 99;
    size_t n = strlen(name);
    for (const struct option *o = opts; o->name; o++) {
        int d = llmrt_edit_distance(name, o->name);
        /* a prefix that getopt found ambiguous, or a near spelling */
        if (n >= 3 && strncmp(o->name, name, n) == 0)
            d = 1;
        if (d < bd)
            bd = d, best = o->name;
    }
    int allowed = n < 6 ? 2 : (int)(n / 3);
    return bd <= allowed ? best : NULL;
}

int cli_bad_option(const char *cmd, const struct option *opts, char **argv)
{
    const char *arg = optind > 0 ? argv[optind - 1] : NULL;
    /* a known option without its value: getopt sets optopt to its code */
    for (const struct option *o = opts; optopt && o->name; o++)
        if (o->val == optopt && o->has_arg == required_argument) {
            fprintf(stderr, "llmrt %s: option --%s needs a value; see 'llmrt %s --help'\n", cmd,
                    o->name, cmd);
            return 2;
        }
    if (optopt && optopt < 256) {
        fprintf(stderr, "llmrt %s: %s '-%c'; see 'llmrt %s --help'\n", cmd,
                arg && arg[0] == '-' && arg[1] == optopt && !arg[2] ? "option needs a value:"
                                                                    : "unknown option",
                optopt, cmd);
        return 2;
    }
    if (!arg || strncmp(arg, "--", 2) != 0) {
        fprintf(stderr, "llmrt %s: bad option '%s'; see 'llmrt %s --help'\n", cmd,
                arg ? arg : "?", cmd);
        return 2;
    }
    char name[128];
    snprintf(name, sizeof name, "%s", arg + 2);
    name[strcspn(name, "=")] = 0;
    /* several options start with it: getopt calls that ambiguous */
    char matches[512] = "";
    int n_match = 0;
    size_t used = 0, nl = strlen(name);
    for (const struct option *o = opts; o->name && nl; o++)
        if (strncmp(o->name, name, nl) == 0 && used < sizeof matches) {
            used += (size_t)snprintf(matches + used, sizeof matches - used, "%s--%s",
                                     n_match ? ", " : "", o->name);
            n_match++;
        }
    if (n_match > 1) {
        fprintf(stderr, "llmrt %s: option '--%s' is ambiguous (%s); see 'llmrt %s --help'\n",
                cmd, name, matches, cmd);
        return 2;
    }
    for (const struct option *o = opts; o->name; o++)
        if (strcmp(o->name, name) == 0 && o->has_arg == no_argument && strchr(arg, '=')) {
            fprintf(stderr, "llmrt %s: option --%s takes no value; see 'llmrt %s --help'\n",
                    cmd, name, cmd);
            return 2;
        }
    const char *near = cli_nearest_option(opts, name);
    if (near)
        fprintf(stderr, "llmrt %s: unknown option '--%s' (did you mean --%s?); see 'llmrt %s "
                        "--help'\n",
                cmd, name, near, cmd);
    else
        fprintf(stderr, "llmrt %s: unknown option '--%s'; see 'llmrt %s --help'\n", cmd, name,
                cmd);
    return 2;
}

int cli_common_alias(cli_common *c, const char *key, const char *value, const char *cmd)
{
    if (c->n_alias_sets >= CLI_MAX_ALIASES || c->n_sets >= CLI_MAX_SETS) {
        fprintf(stderr, "llmrt %s: too many options setting keys (at most %d short flags and "
                        "%d in all); see 'llmrt %s --help'\n",
                cmd, CLI_MAX_ALIASES, CLI_MAX_SETS, cmd);
        return -1;
    }
    char *slot = c->alias_store[c->n_alias_sets];
    snprintf(slot, sizeof c->alias_store[0], "%s=%s", key, value);
    /* before the explicit --set options, after the short flags seen so far */
    memmove(&c->sets[c->n_alias_sets + 1], &c->sets[c->n_alias_sets],
            (size_t)(c->n_sets - c->n_alias_sets) * sizeof c->sets[0]);
    c->sets[c->n_alias_sets++] = slot;
    c->n_sets++;
    return 0;
}

int cli_common_opt(cli_common *c, int opt, const char *arg, const char *cmd, const char *usage)
{
    switch (opt) {
    case 'c':
        c->config_path = arg;
        return 1;
    case CLI_OPT_SET:
        if (c->n_sets >= CLI_MAX_SETS) {
            cli_usage_error(cmd, usage, "too many --set options (at most %d)", CLI_MAX_SETS);
            return -1;
        }
        c->sets[c->n_sets++] = arg;
        return 1;
    case CLI_OPT_MODEL:
        snprintf(c->model_set, sizeof c->model_set, "model.path=%s", arg);
        return 1;
    case CLI_OPT_MAX_MODEL_LEN:
        return cli_common_alias(c, "cache.max_model_len", arg, cmd) ? -1 : 1;
    case CLI_OPT_GPU_MEM_UTIL:
        return cli_common_alias(c, "cache.gpu_memory_utilization", arg, cmd) ? -1 : 1;
    case CLI_OPT_MAX_NUM_SEQS:
        return cli_common_alias(c, "scheduler.max_num_seqs", arg, cmd) ? -1 : 1;
    case CLI_OPT_MAX_BATCHED:
        return cli_common_alias(c, "scheduler.max_num_batched_tokens", arg, cmd) ? -1 : 1;
    case CLI_OPT_HELP:
        fputs(usage, stdout);
        exit(0);
    }
    return 0;
}

int cli_sampling_opt(cli_sampling *s, int opt, const char *arg, const char *cmd,
                     const char *usage)
{
    int bad;
    switch (opt) {
    case CLI_OPT_MAX_TOKENS:
        bad = cli_parse_number(cmd, usage, "--max-tokens", arg, 1, 1e9, 1, &s->max_tokens);
        break;
    case CLI_OPT_TEMPERATURE:
        bad = cli_parse_number(cmd, usage, "--temperature", arg, 0, 100, 0, &s->temperature);
        s->given |= LLMRT_SAMPLING_TEMPERATURE;
        break;
    case CLI_OPT_TOP_P:
        bad = cli_parse_number(cmd, usage, "--top-p", arg, 1e-9, 1, 0, &s->top_p);
        s->given |= LLMRT_SAMPLING_TOP_P;
        break;
    case CLI_OPT_TOP_K:
        bad = cli_parse_number(cmd, usage, "--top-k", arg, 0, 1e9, 1, &s->top_k);
        s->given |= LLMRT_SAMPLING_TOP_K;
        break;
    case CLI_OPT_MIN_P:
        bad = cli_parse_number(cmd, usage, "--min-p", arg, 0, 1, 0, &s->min_p);
        s->given |= LLMRT_SAMPLING_MIN_P;
        break;
    case CLI_OPT_SEED:
        bad = cli_parse_number(cmd, usage, "--seed", arg, 0, 1.8e19, 1, &s->seed);
        s->have_seed = 1;
        break;
    default: return 0;
    }
    return bad ? -1 : 1;
}

void cli_sampling_fill(const cli_sampling *s, llmrt_engine *e, llmrt_sampling *out,
                       const char *cmd, int quiet)
{
    if (s->given & LLMRT_SAMPLING_TEMPERATURE)
        out->temperature = (float)s->temperature;
    if (s->given & LLMRT_SAMPLING_TOP_P)
        out->top_p = (float)s->top_p;
    if (s->given & LLMRT_SAMPLING_TOP_K)
        out->top_k = (int32_t)s->top_k;
    if (s->given & LLMRT_SAMPLING_MIN_P)
        out->min_p = (float)s->min_p;
    uint32_t took = llmrt_engine_sampling_defaults(e, out, s->given);
    if (quiet || !took)
        return;
    static int said;
    if (said++)
        return;
    char text[256];
    size_t n = 0;
    text[0] = 0;
#define ITEM(bit, fmt, v)                                                                     \
    if ((took & (bit)) && n < sizeof text)                                                    \
        n += (size_t)snprintf(text + n, sizeof text - n, "%s" fmt, n ? ", " : "", v);
    ITEM(LLMRT_SAMPLING_TEMPERATURE, "temperature %g", (double)out->temperature)
    ITEM(LLMRT_SAMPLING_TOP_P, "top-p %g", (double)out->top_p)
    ITEM(LLMRT_SAMPLING_TOP_K, "top-k %d", (int)out->top_k)
    ITEM(LLMRT_SAMPLING_MIN_P, "min-p %g", (double)out->min_p)
    ITEM(LLMRT_SAMPLING_REPETITION_PENALTY, "repetition penalty %g",
         (double)out->repetition_penalty)
#undef ITEM
    fprintf(stderr, "llmrt %s: sampling with the model's defaults (generation_config.json): %s%s\n",
            cmd, text, (took & LLMRT_SAMPLING_TEMPERATURE) ? " (--temperature 0 for greedy)" : "");
}

int cli_fail(const char *cmd, const llmrt_error *err)
{
    fprintf(stderr, "llmrt %s: error: %s\n", cmd, err->msg[0] ? err->msg : llmrt_status_str(err->code));
    return 1;
}

int cli_open_runtime(cli_common *c, llmrt_runtime **out)
{
    llmrt_error err = {0};
    const char *sets[CLI_MAX_SETS + 1];
    int n = 0;
    if (c->model_set[0])
        sets[n++] = c->model_set; /* --model first, so an explicit --set model.path wins */
    for (int i = 0; i < c->n_sets; i++)
        sets[n++] = c->sets[i];
    if (llmrt_runtime_open(c->config_path, sets, n, out, &err) != LLMRT_OK) {
        fprintf(stderr, "llmrt: error: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int cli_model_has_tokenizer(llmrt_runtime *rt, const char *cmd)
{
    const char *dir = llmrt_config_get(rt->cfg, "model.path");
    char path[4200];
    if (!dir || !dir[0])
        return 1; /* no model at all: the engine says so */
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (access(path, F_OK) == 0 || access(dir, F_OK) != 0)
        return 1; /* a missing folder is the loader's error, with its own message */
    fprintf(stderr,
            "llmrt %s: %s has no tokenizer.json, so text cannot be turned into token ids; "
            "give token ids%s, or put the model's tokenizer.json (and tokenizer_config.json) "
            "in the folder (tools/fetch-qwen3-tokenizer.sh fetches Qwen3's)\n",
            cmd, dir, strcmp(cmd, "generate") == 0 ? " (--prompt-ids, or --prompts-file with --ids)"
                                                  : " (llmrt generate --prompt-ids)");
    return 0;
}

int cli_parse_ids(const char *s, int32_t **out)
{
    size_t cap = 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return -1;
    const char *p = s;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX ||
            (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n')) {
            free(ids);
            return -1;
        }
        if (n == cap) {
            int32_t *g = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!g) {
                free(ids);
                return -1;
            }
            ids = g;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    return (int)n;
}

int cli_parse_number(const char *cmd, const char *usage, const char *opt, const char *arg,
                     double lo, double hi, int whole, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= lo && v <= hi) || (whole && v != floor(v))) {
        cli_usage_error(cmd, usage, "%s '%s': expected a%s number in [%g, %g]", opt, arg,
                        whole ? " whole" : "", lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}
