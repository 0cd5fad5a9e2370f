/* fileutil.c — see fileutil.h. Reads in growing chunks, so pipes and /proc files work too. */
#include "fileutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

llmrt_status llmrt_read_file(const char *path, char **data, size_t *len, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    char *buf = NULL;
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    *data = NULL;
    if (!f)
        FAIL(err, LLMRT_ERR_IO, "%s: cannot open: %s",
             path, strerror(errno));
    size_t cap = 1 << 16, n = 0, got;
    buf = malloc(cap);
    TRY_ALLOC(err, buf, path);
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n < 2) {
            char *g = realloc(buf, cap *= 2);
            TRY_ALLOC(err, g, path);
            buf = g;
        }
    }
    if (ferror(f))
        FAIL(err, LLMRT_ERR_IO, "%s: read error: %s", path, strerror(errno));
    buf[n] = 0;
    *data = buf;
    if (len)
        *len = n;
    buf = NULL;
cleanup:
    free(buf);
    if (f && !is_stdin)
        fclose(f);
    return st;
}
