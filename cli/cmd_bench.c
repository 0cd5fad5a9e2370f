/* cmd_bench.c — placeholder until this subcommand lands (see the open issues). */
#include <stdio.h>

#include "commands.h"

int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "llmrt bench: not available in this build yet\n");
    return 2;
}
