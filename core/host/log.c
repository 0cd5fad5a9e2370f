/* log.c — the log sink. Level and format are process-wide configuration set once at start
 * (runtime.log_level, server.log_format); writes are serialised so lines from threads do not
 * interleave. JSON lines are built with jansson, so every message is escaped as JSON. */
#include "log.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static llmrt_log_level g_level = LLMRT_LOG_INFO;
static llmrt_log_format g_format = LLMRT_LOG_TEXT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const g_tags[] = {"error", "warn", "info", "debug"};

void llmrt_log_set_level(llmrt_log_level level) { g_level = level; }
llmrt_log_level llmrt_log_get_level(void) { return g_level; }
void llmrt_log_set_format(llmrt_log_format format) { g_format = format; }
llmrt_log_format llmrt_log_get_format(void) { return g_format; }

int llmrt_log_parse_level(const char *s, llmrt_log_level *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, g_tags[i]) == 0) {
            *out = (llmrt_log_level)i;
            return 1;
        }
    return 0;
}

char *llmrt_log_timestamp(char *buf, size_t n)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L);
    return buf;
}

/* A text field value: as is, or in double quotes when it holds a space, quote or '='. */
static void text_field(char *out, size_t cap, size_t *used, const llmrt_log_field *f)
{
    if (*used >= cap)
        return;
    if (!f->str) {
        if (f->num == floor(f->num) && fabs(f->num) < 1e15)
            *used += (size_t)snprintf(out + *used, cap - *used, " %s=%.0f", f->key, f->num);
        else
            *used += (size_t)snprintf(out + *used, cap - *used, " %s=%.3f", f->key, f->num);
        return;
    }
    int quote = !f->str[0] || strpbrk(f->str, " \"=\t") != NULL;
    *used += (size_t)snprintf(out + *used, cap - *used, " %s=%s", f->key, quote ? "\"" : "");
    for (const char *p = f->str; *p && *used + 3 < cap; p++) {
        if (*p == '"' || *p == '\\')
            out[(*used)++] = '\\';
        out[(*used)++] = *p == '\n' ? ' ' : *p;
    }
    if (quote && *used + 1 < cap)
        out[(*used)++] = '"';
    if (*used < cap)
        out[*used] = 0;
}

static void emit(llmrt_log_level level, const char *who, const llmrt_log_field *fields,
                 size_t n, const char *fmt, va_list ap)
{
    if (level > g_level)
        return;
    char msg[2048], ts[32];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t ml = strlen(msg);
    while (ml && msg[ml - 1] == '\n')
        msg[--ml] = 0;
    llmrt_log_timestamp(ts, sizeof ts);
    char *json = NULL;
    if (g_format == LLMRT_LOG_JSON) {
        json_t *o = json_object();
        json_object_set_new(o, "time", json_string(ts));
        json_object_set_new(o, "level", json_string(g_tags[level]));
        json_object_set_new(o, "logger", json_string(who ? who : "llmrt"));
        /* invalid UTF-8 (a client's bytes) is kept readable rather than dropped */
        json_t *m = json_stringn_nocheck(msg, ml);
        json_object_set_new(o, "message", m);
        for (size_t i = 0; i < n; i++) {
            if (!fields[i].key || (fields[i].str == NULL && isnan(fields[i].num)))
                continue;
            json_object_set_new(o, fields[i].key,
                                fields[i].str ? json_stringn_nocheck(fields[i].str,
                                                                     strlen(fields[i].str))
                                : fields[i].num == floor(fields[i].num) &&
                                        fabs(fields[i].num) < 1e15
                                    ? json_integer((json_int_t)fields[i].num)
                                    : json_real(fields[i].num));
        }
        json = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(9));
        json_decref(o);
    }
    char extra[1024] = "";
    size_t used = 0;
    for (size_t i = 0; !json && i < n; i++)
        if (fields[i].key && !(fields[i].str == NULL && isnan(fields[i].num)))
            text_field(extra, sizeof extra, &used, &fields[i]);
    pthread_mutex_lock(&g_lock);
    if (json)
        fprintf(stderr, "%s\n", json);
    else
        fprintf(stderr, "%s llmrt: [%s] %s%s%s%s\n", ts, g_tags[level], who ? who : "",
                who ? ": " : "", msg, extra);
    fflush(stderr);
    pthread_mutex_unlock(&g_lock);
    free(json);
}

void llmrt_vlog(llmrt_log_level level, const char *who, const char *fmt, va_list ap)
{
    emit(level, who, NULL, 0, fmt, ap);
}

void llmrt_log(llmrt_log_level level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(level, who, NULL, 0, fmt, ap);
    va_end(ap);
}

void llmrt_log_fields(llmrt_log_level level, const char *who, const llmrt_log_field *fields,
                      size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emit(level, who, fields, n, fmt, ap);
    va_end(ap);
}
