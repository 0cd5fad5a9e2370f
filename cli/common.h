/* common.h — what every subcommand shares: -c FILE, --set k=v, --model DIR, --help,
 * usage errors (exit 2) and runtime errors (exit 1). */
#ifndef LLMRT_CLI_COMMON_H
#define LLMRT_CLI_COMMON_H

#include <getopt.h>
#include <stdint.h>

#include <llmrt/engine.h>

#include "runtime.h"

#define CLI_MAX_SETS 64

typedef struct cli_common {
    const char *config_path;
    const char *sets[CLI_MAX_SETS + 1];
    int n_sets;
    char model_set[4200]; /* "model.path=<dir>" from --model */
} cli_common;

/* Long options every subcommand accepts; put CLI_COMMON_OPTIONS first in its table. */
enum { CLI_OPT_SET = 1000, CLI_OPT_MODEL, CLI_OPT_HELP, CLI_OPT_FIRST_OWN };
#define CLI_COMMON_OPTIONS                                                                    \
    {"config", required_argument, 0, 'c'}, {"set", required_argument, 0, CLI_OPT_SET},         \
        {"model", required_argument, 0, CLI_OPT_MODEL}, {"help", no_argument, 0, CLI_OPT_HELP}
#define CLI_COMMON_USAGE                                                                      \
    "common options:\n"                                                                       \
    "  -c, --config FILE      runtime.ini to read (default: built-in defaults)\n"             \
    "  --set SECTION.KEY=VAL  override one config key (repeatable)\n"                         \
    "  --model DIR            model folder (short for --set model.path=DIR)\n"                \
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
/* Print "llmrt <cmd>: <message>" and the usage; returns 2 (exit code for usage errors). */
int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* getopt's own complaint (unknown option / missing argument) → usage, exit code 2. */
int cli_bad_option(const char *cmd, const char *usage);
/* Open config + registry from the common options. Prints the error and returns 1 on failure. */
int cli_open_runtime(cli_common *c, llmrt_runtime **out);
/* Print "llmrt <cmd>: error: <msg>" for a runtime failure; returns 1. */
int cli_fail(const char *cmd, const llmrt_error *err);

/* Parse a numeric option value in [lo, hi] (whole: an integer). On failure prints a usage
 * error for `cmd` ("--top-p 'x': expected a number in [0, 1]") and returns -1. */
int cli_parse_number(const char *cmd, const char *usage, const char *opt, const char *arg,
                     double lo, double hi, int whole, double *out);

/* Parse "1,2,3" (or space separated) into ids; returns count or -1 on a bad token. */
int cli_parse_ids(const char *s, int32_t **out);

#endif
