/* main.c — the llmrt executable: dispatch to one subcommand per file (cmd_<name>.c). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "config.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"generate", cmd_generate, "generate text or token ids from a prompt (batched with --prompts-file)"},
    {"chat", cmd_chat, "interactive multi-turn chat with streaming output"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server"},
    {"bench", cmd_bench, "A/B benchmark of two or more configs, with a verdict"},
    {"doctor", cmd_doctor, "check this machine: GPU, WSL2, pinned memory, /dev/shm, limits"},
    {"plugins", cmd_plugins, "list discovered plugins and rejected files"},
    {"config", cmd_config, "show the effective configuration and where each value came from"},
    {"tokenize", cmd_tokenize, "tokenize text, decode ids, render chat templates"},
    {"mkmodel", cmd_mkmodel, "write a synthetic Qwen3 checkpoint in Hugging Face layout"},
    {"logits", cmd_logits, "teacher-forced logits for a token sequence (for reference checks)"},
};

static void usage(FILE *out)
{
    fprintf(out, "llmrt %s — a small, fast LLM inference runtime with pluggable memory paths\n\n"
                 "usage: llmrt <command> [options]   (llmrt <command> --help for details)\n\n"
                 "commands:\n",
            LLMRT_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    opterr = 0; /* usage errors are reported by cli_bad_option, in one line */
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("llmrt %s\n", LLMRT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    const char *best = NULL;
    int bd = 3; /* suggest only close names */
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        int d = llmrt_edit_distance(argv[1], commands[i].name);
        if (d < bd)
            bd = d, best = commands[i].name;
    }
    if (best)
        fprintf(stderr, "llmrt: unknown command '%s' (did you mean %s?); see 'llmrt --help'\n",
                argv[1], best);
    else
        fprintf(stderr, "llmrt: unknown command '%s'; see 'llmrt --help' for the commands\n",
                argv[1]);
    return 2;
}
