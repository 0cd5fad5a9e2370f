/* log.c — the log sink. The level is process-wide configuration set once at start
 * (runtime.log_level); writes are serialised so lines from threads do not interleave. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static llmrt_log_level g_level = LLMRT_LOG_INFO;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void llmrt_log_set_level(llmrt_log_level level) { g_level = level; }
llmrt_log_level llmrt_log_get_level(void) { return g_level; }

int llmrt_log_parse_level(const char *s, llmrt_log_level *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (llmrt_log_level)i;
            return 1;
        }
    return 0;
}

void llmrt_vlog(llmrt_log_level level, const char *who, const char *fmt, va_list ap)
{
    static const char *const tags[] = {"error", "warn", "info", "debug"};
    if (level > g_level)
        return;
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n')
        line[--n] = 0;
    pthread_mutex_lock(&g_lock);
    fprintf(stderr, "llmrt: [%s] %s%s%s\n", tags[level], who ? who : "", who ? ": " : "", line);
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
}

void llmrt_log(llmrt_log_level level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    llmrt_vlog(level, who, fmt, ap);
    va_end(ap);
}
