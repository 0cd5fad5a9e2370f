/* error.c — helpers for caller-owned error messages. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void llmrt_error_prefix(llmrt_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[512], old[LLMRT_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
}
