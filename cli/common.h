/* common.h — what every subcommand shares: -c FILE, --set k=v, --model DIR, the short flags
 * of engine keys (--max-model-len ...), --help, usage errors (exit 2: one line, "did you
 * mean" for a misspelt option, and where the help is) and runtime errors (exit 1).
 *
 * Short flags are --set overrides of their keys, applied before every explicit --set: in
 * `--port 1 --set server.port=2` the --set wins (as `--set model.path` wins over --model). */
#ifndef LLMRT_CLI_COMMON_H
#define LLMRT_CLI_COMMON_H

#include <getopt.h>
#include <stdint.h>

#include <llmrt/engine.h>

#include "runtime.h"

#define CLI_MAX_SETS 64

#define CLI_MAX_ALIASES 16

typedef struct cli_common {
    const char *config_path;
    const char *sets[CLI_MAX_SETS + 1]; /* the short flags' first, then the explicit --set */
    int n_sets;
    int n_alias_sets;     /* how many of sets[] are short flags (they come first) */
    char model_set[4200]; /* "model.path=<dir>" from --model */
    char alias_store[CLI_MAX_ALIASES][4200]; /* "section.key=value" of each short flag */
} cli_common;

/* Long options every subcommand accepts; put CLI_COMMON_OPTIONS first in its table. */
enum {
    CLI_OPT_SET = 1000,
    CLI_OPT_MODEL,
    CLI_OPT_HELP,
    CLI_OPT_MAX_MODEL_LEN,
    CLI_OPT_GPU_MEM_UTIL,
    CLI_OPT_MAX_NUM_SEQS,
    CLI_OPT_MAX_BATCHED,
    CLI_OPT_FIRST_OWN
};
#define CLI_COMMON_OPTIONS                                                                    \
    {"config", required_argument, 0, 'c'}, {"set", required_argument, 0, CLI_OPT_SET},         \
        {"model", required_argument, 0, CLI_OPT_MODEL}, {"help", no_argument, 0, CLI_OPT_HELP}, \
        {"max-model-len", required_argument, 0, CLI_OPT_MAX_MODEL_LEN},                        \
        {"gpu-memory-utilization", required_argument, 0, CLI_OPT_GPU_MEM_UTIL},               \
        {"max-num-seqs", required_argument, 0, CLI_OPT_MAX_NUM_SEQS},                          \
        {"max-num-batched-tokens", required_argument, 0, CLI_OPT_MAX_BATCHED}
#define CLI_COMMON_USAGE                                                                      \
    "common options:\n"                                                                       \
    "  -c, --config FILE      runtime.ini to read, over /etc/llmrt/runtime.ini when present\n" \
    "                         (default: built-in defaults)\n"                                 \
    "  --set SECTION.KEY=VAL  override one config key (repeatable; wins over the short\n"      \
    "                         flags below)\n"                                                 \
    "  --model DIR            model folder (short for --set model.path=DIR)\n"                \
    "  --max-model-len N      short for --set cache.max_model_len=N\n"                        \
    "  --gpu-memory-utilization F  short for --set cache.gpu_memory_utilization=F\n"          \
    "  --max-num-seqs N       short for --set scheduler.max_num_seqs=N\n"                     \
    "  --max-num-batched-tokens N  short for --set scheduler.max_num_batched_tokens=N\n"      \
    "  --help                 this text\n"

/* Sampling options of generate and chat: list the ones a command takes in its table with
 * these codes, and hand every option to cli_sampling_opt (absent ones keep the command's
 * defaults, set in its cli_sampling before parsing). */
enum {
    CLI_OPT_MAX_TOKENS = 1100,
    CLI_OPT_TEMPERATURE,
    CLI_OPT_TOP_P,
    CLI_OPT_TOP_K,
    CLI_OPT_MIN_P,
    CLI_OPT_SEED
};
typedef struct cli_sampling {
    double max_tokens, temperature, top_p, top_k, min_p, seed;
    int have_seed;  /* --seed was given */
    uint32_t given; /* LLMRT_SAMPLING_* bits of the options given (temperature, top-p, ...) */
} cli_sampling;
/* Returns 1 when `opt` was a sampling option (value checked and stored), 0 when not, -1 on a
 * bad value (usage error printed). */
int cli_sampling_opt(cli_sampling *s, int opt, const char *arg, const char *cmd,
                     const char *usage);
/* A request's temperature, top_p, top_k and min_p: the options given, the model's own
 * defaults (generation_config.json, llmrt_engine_sampling_defaults) for the others, and
 * llmrt_sampling_init's (greedy) where the model has none. Says on stderr which of the
 * model's defaults it took (once, unless quiet). */
void cli_sampling_fill(const cli_sampling *s, llmrt_engine *e, llmrt_sampling *out,
                       const char *cmd, int quiet);
/* The help text's line about it. */
#define CLI_SAMPLING_DEFAULTS_USAGE                                                           \
    "Sampling options not given take the model's own defaults from its\n"                     \
    "generation_config.json (temperature, top_p, top_k, min_p, repetition_penalty, as vLLM\n"  \
    "does); where it has none, decoding is greedy. --temperature 0 is always greedy.\n"

/* Handle a common option from getopt_long. Returns 1 when consumed, 0 when not a common
 * option, -1 on error (message printed). --help prints `usage` and exits 0. */
int cli_common_opt(cli_common *c, int opt, const char *arg, const char *cmd, const char *usage);
/* A short flag of a key ("server.port"): a --set of it, placed before the explicit --set
 * options. Returns 0, or -1 with a usage error printed (too many). */
int cli_common_alias(cli_common *c, const char *key, const char *value, const char *cmd);
/* Print "llmrt <cmd>: <message>; see 'llmrt <cmd> --help'" (one line; `usage` is not
 * printed); returns 2 (exit code for usage errors). */
int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* getopt_long returned '?' (main sets opterr = 0, so getopt printed nothing): say which
 * option of argv was wrong and how — unknown ("did you mean --prompt-ids?" from `opts`),
 * ambiguous, or missing its value — in one line; returns 2. */
int cli_bad_option(const char *cmd, const struct option *opts, char **argv);
/* The nearest long option of `opts` to `name` (no dashes), or NULL when none is close. */
const char *cli_nearest_option(const struct option *opts, const char *name);
/* Open config + registry from the common options. Prints the error and returns 1 on failure. */
int cli_open_runtime(cli_common *c, llmrt_runtime **out);
/* 1 when the configured model folder (model.path) has tokenizer.json; else prints why text
 * needs one (and what to do instead) for `cmd` and returns 0. Checked before loading. */
int cli_model_has_tokenizer(llmrt_runtime *rt, const char *cmd);
/* Print "llmrt <cmd>: error: <msg>" for a runtime failure; returns 1. */
int cli_fail(const char *cmd, const llmrt_error *err);

/* Parse a numeric option value in [lo, hi] (whole: an integer). On failure prints a usage
 * error for `cmd` ("--top-p 'x': expected a number in [0, 1]") and returns -1. */
int cli_parse_number(const char *cmd, const char *usage, const char *opt, const char *arg,
                     double lo, double hi, int whole, double *out);

/* Parse "1,2,3" (or space separated) into ids; returns count or -1 on a bad token. */
int cli_parse_ids(const char *s, int32_t **out);

#endif
