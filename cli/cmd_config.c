/* cmd_config.c — `llmrt config`: the effective configuration (--show, the default action),
 * or the fully commented template that conf/runtime.ini is generated from (--template). Both
 * scan the plugins first: their key tables are part of the configuration. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "common.h"

static const char usage[] =
    "usage: llmrt config [-c FILE] [--set K=V] [--show | --template]\n\n"
    "Values come, lowest first, from the defaults, the system file (etc/llmrt/runtime.ini of\n"
    "the installation: /etc/llmrt/runtime.ini for /usr/bin/llmrt; LLMRT_SYSTEM_CONFIG=PATH\n"
    "reads another, LLMRT_SYSTEM_CONFIG= none), -c FILE, LLMRT_<SECTION>_<KEY> variables,\n"
    "the short flags (--model, --max-model-len, ...) and --set.\n\n"
    "  --show      print every effective value and where it came from (default, file:line,\n"
    "              env, --set), the installed plugins' keys too; validates the file: errors\n"
    "              exit 1\n"
    "  --template  print a runtime.ini with every key at its default and its help: core's\n"
    "              and the installed plugins' (developer keys commented out)\n\n" CLI_COMMON_USAGE;

int cmd_config(int argc, char **argv)
{
    enum { OPT_SHOW = CLI_OPT_FIRST_OWN, OPT_TEMPLATE };
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                          {"show", no_argument, 0, OPT_SHOW},
                                          {"template", no_argument, 0, OPT_TEMPLATE},
                                          {0, 0, 0, 0}};
    cli_common c = {0};
    int opt, template = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        if (opt == OPT_SHOW)
            continue;
        if (opt == OPT_TEMPLATE) {
            template = 1;
            continue;
        }
        int r = cli_common_opt(&c, opt, optarg, "config", usage);
        if (r < 0)
            return 2;
        if (r == 0)
            return cli_bad_option("config", opts, argv);
    }
    if (optind < argc)
        return cli_usage_error("config", usage, "unexpected argument '%s'", argv[optind]);
    llmrt_runtime *rt = NULL;
    if (cli_open_runtime(&c, &rt) != 0)
        return 1;
    if (template) {
        llmrt_config_write_template(rt->cfg, stdout);
    } else {
        const char *path = llmrt_config_path(rt->cfg);
        const char *sys = llmrt_config_system_file(rt->cfg);
        if (path && sys)
            printf("; effective configuration (files: %s, then %s)\n", sys, path);
        else if (path || sys)
            printf("; effective configuration (file: %s)\n", path ? path : sys);
        else
            printf("; effective configuration (no file: defaults, environment and --set)\n");
        llmrt_config_show(rt->cfg, stdout);
    }
    llmrt_runtime_close(rt);
    return 0;
}
