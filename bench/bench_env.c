/* bench_env.c — the environment block of a bench report (see bench_env.h). */
#include "bench_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* First line of a shell command's output, or "" (stderr discarded). */
static void first_line_of(const char *cmd, char *out, size_t n)
{
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (!fgets(out, (int)n, p))
        out[0] = 0;
    out[strcspn(out, "\n")] = 0;
    if (pclose(p) != 0)
        out[0] = 0;
}

/* The commit a report names: $LLMRT_BENCH_COMMIT when set (a copied tree whose git metadata
 * is not the build's, as on the GPU machine: scripts/gpu-check.sh sets it from the packed
 * build's .device/COMMIT), else git in the source tree, else the one stamped at configure. */
static void commit_of(char *out, size_t n)
{
    const char *env = getenv("LLMRT_BENCH_COMMIT");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return;
    }
    char top[4096], hash[64], dirty[8];
    first_line_of("git rev-parse --show-toplevel 2>/dev/null", top, sizeof top);
    if (top[0]) {
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/include/llmrt/engine.h", top);
        if (access(probe, R_OK) == 0) {
            first_line_of("git rev-parse --short HEAD 2>/dev/null", hash, sizeof hash);
            if (hash[0]) {
                first_line_of("git status --porcelain --untracked-files=no 2>/dev/null | head -1",
                              dirty, sizeof dirty);
                snprintf(out, n, "%s%s", hash, dirty[0] ? "-dirty" : "");
                return;
            }
        }
    }
#ifdef LLMRT_COMMIT
    snprintf(out, n, "%s", LLMRT_COMMIT);
#else
    snprintf(out, n, "unknown");
#endif
}

void bench_env_collect(bench_env *e)
{
    memset(e, 0, sizeof *e);
#ifdef LLMRT_VERSION
    snprintf(e->version, sizeof e->version, "%s", LLMRT_VERSION);
#endif
    commit_of(e->commit, sizeof e->commit);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(e->date_utc, sizeof e->date_utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (gethostname(e->hostname, sizeof e->hostname - 1) != 0)
        e->hostname[0] = 0;
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(e->os, sizeof e->os, "%s %s %s", u.sysname, u.release, u.machine);
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t')
                    c++;
                snprintf(e->cpu, sizeof e->cpu, "%s", c);
                e->cpu[strcspn(e->cpu, "\n")] = 0;
            }
            break;
        }
    }
    if (f)
        fclose(f);
    e->n_cpus = (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
}

uint64_t bench_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    int ok = f && fscanf(f, "%llu %llu", &size, &resident) == 2;
    if (f)
        fclose(f);
    return ok ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}
