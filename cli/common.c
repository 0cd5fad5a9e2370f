/* common.c — shared option handling and error reporting for subcommands. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "llmrt %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n%s", usage);
    va_end(ap);
    return 2;
}

int cli_bad_option(const char *cmd, const char *usage)
{
    fprintf(stderr, "\n%s", usage);
    (void)cmd;
    return 2;
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
