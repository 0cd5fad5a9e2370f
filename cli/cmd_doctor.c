/* cmd_doctor.c — placeholder, replaced in this change. */
#include <stdio.h>
#include "commands.h"
int cmd_doctor(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "llmrt doctor: not available yet\n"); return 2; }
