/* cmd_mkmodel.c — placeholder until this subcommand lands (see the open issues). */
#include <stdio.h>

#include "commands.h"

int cmd_mkmodel(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "llmrt mkmodel: not available in this build yet\n");
    return 2;
}
