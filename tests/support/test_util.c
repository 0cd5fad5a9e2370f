/* test_util.c — see test_util.h. */
#include "test_util.h"

#include <check.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

char *tu_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/llmrt-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(buf)) {
        fprintf(stderr, "mkdtemp failed\n");
        abort();
    }
    return strdup(buf);
}

void tu_rmtree(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", dir);
}

char *tu_write_file(const char *dir, const char *name, const char *text)
{
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        abort();
    }
    fputs(text, f);
    fclose(f);
    return path;
}

static char *join(const char *dir, const char *name)
{
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    return path;
}

char *tu_mkfifo(const char *dir, const char *name)
{
    char *path = join(dir, name);
    if (mkfifo(path, 0600) != 0) {
        fprintf(stderr, "mkfifo %s failed\n", path);
        abort();
    }
    return path;
}

char *tu_symlink(const char *dir, const char *name, const char *target)
{
    char *path = join(dir, name);
    if (symlink(target, path) != 0) {
        fprintf(stderr, "symlink %s failed\n", path);
        abort();
    }
    return path;
}

void tu_guard(unsigned seconds) { alarm(seconds); }

char *tu_sized_file(const char *dir, const char *name, long long bytes)
{
    char *path = join(dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || ftruncate(fileno(f), (off_t)bytes) != 0) {
        fprintf(stderr, "cannot make %s\n", path);
        abort();
    }
    fclose(f);
    return path;
}

int tu_run(const char *cmd, char **out)
{
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p)
        return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (cap - n < 1024)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int status = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

const char *tu_env(const char *name)
{
    const char *v = getenv(name);
    if (!v || !v[0]) {
        fprintf(stderr, "test environment variable %s is not set (run through ctest)\n", name);
        abort();
    }
    return v;
}

const llmrt_plugin_desc *tu_load_plugin(const char *path, unsigned index)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return NULL;
    }
    void *sym = dlsym(h, LLMRT_PLUGIN_ENTRY);
    if (!sym)
        return NULL;
    llmrt_plugin_get_fn get;
    memcpy(&get, &sym, sizeof get);
    return get(index);
}

char *tu_plugin_path(const char *file)
{
    const char *dir = tu_env("LLMRT_PLUGIN_DIR");
    char *p = malloc(strlen(dir) + strlen(file) + 2);
    sprintf(p, "%s/%s", dir, file);
    return p;
}

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
