/* cmd_serve.c — placeholder until this subcommand lands (see the open issues). */
#include <stdio.h>

#include "commands.h"

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "llmrt serve: not available in this build yet\n");
    return 2;
}
