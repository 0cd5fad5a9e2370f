/* cmd_plugins.c — `llmrt plugins`: every discovered plugin, one line each, then the files
 * that were rejected and why. */
#include <stdio.h>

#include "commands.h"
#include "common.h"

static const char usage[] =
    "usage: llmrt plugins [-c FILE] [--set K=V]\n\n"
    "Lists plugins found on the search path (runtime.plugin_dir, LLMRT_PLUGIN_PATH,\n"
    "<exe>/../lib/llmrt/plugins, the install folder): kind, name, version, ABI, path;\n"
    "then each rejected file with the reason. Exit 1 when nothing was found.\n\n" CLI_COMMON_USAGE;

int cmd_plugins(int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS, {0, 0, 0, 0}};
    cli_common c = {0};
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
        int r = cli_common_opt(&c, opt, optarg, "plugins", usage);
        if (r < 0)
            return 2;
        if (r == 0)
            return cli_bad_option("plugins", opts, argv);
    }
    if (optind < argc)
        return cli_usage_error("plugins", usage, "unexpected argument '%s'", argv[optind]);
    llmrt_runtime *rt;
    if (cli_open_runtime(&c, &rt))
        return 1;
    size_t n = llmrt_registry_count(rt->reg);
    printf("%-8s %-10s %-8s %-5s %s\n", "KIND", "NAME", "VERSION", "ABI", "PATH");
    for (size_t i = 0; i < n; i++) {
        const llmrt_plugin_entry *e = llmrt_registry_at(rt->reg, i);
        printf("%-8s %-10s %-8s %u.%-3u %s\n", llmrt_plugin_kind_name(e->desc->kind),
               e->desc->name, e->desc->version, LLMRT_ABI_MAJOR_OF(e->desc->abi_version),
               LLMRT_ABI_MINOR_OF(e->desc->abi_version), e->path);
    }
    size_t nr = llmrt_registry_rejected_count(rt->reg);
    if (nr) {
        printf("\nrejected:\n");
        for (size_t i = 0; i < nr; i++) {
            const llmrt_rejection *r = llmrt_registry_rejected_at(rt->reg, i);
            printf("  %s: %s\n", r->path, r->reason);
        }
    }
    if (n == 0)
        fprintf(stderr, "llmrt plugins: no plugins found (searched %s)\n",
                llmrt_registry_search_path(rt->reg));
    llmrt_runtime_close(rt);
    return n ? 0 : 1;
}
