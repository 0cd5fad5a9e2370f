/* fileutil.c — see fileutil.h. The descriptor is checked, not the name, so a file swapped
 * between a stat and the open cannot slip through; reads stop one byte past the bound, so a
 * file that grows while read (or a /proc file, whose size reads as 0) stays bounded too. */
#include "fileutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

static const char *type_name(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a file";
}

/* "17.0 MiB"; with `whole`, a whole number of units prints without the decimal ("16 MiB"). */
static const char *size_str(char *buf, size_t n, uint64_t bytes, int whole)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
    if (bytes < 1024) {
        snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
        return buf;
    }
    int u = 0;
    uint64_t div = 1024;
    while (u < 3 && bytes >= div * 1024)
        u++, div *= 1024;
    if (whole && bytes % div == 0)
        snprintf(buf, n, "%llu %s", (unsigned long long)(bytes / div), unit[u]);
    else
        snprintf(buf, n, "%.1f %s", (double)bytes / (double)div, unit[u]);
    return buf;
}

/* "PATH: 17.0 MiB is larger than the 16 MiB a config.json may be"; got == 0: a stream (or a
 * growing file) that went past the limit while read, "PATH: longer than the 16 MiB ...". */
static llmrt_status too_large(llmrt_error *err, const char *path, uint64_t got, uint64_t max,
                              const char *what)
{
    char a[32], b[32];
    const char *article = strchr("aeiouAEIOU", what[0]) ? "an" : "a";
    if (!got)
        return llmrt_fail(err, LLMRT_ERR_LIMIT, "%s: longer than the %s %s %s may be", path,
                          size_str(b, sizeof b, max, 1), article, what);
    size_str(a, sizeof a, got, 0);
    size_str(b, sizeof b, max, 0);
    if (strcmp(a, b) == 0) /* just over: "16.0 MiB is larger than 16 MiB" would puzzle */
        snprintf(a, sizeof a, "%llu bytes", (unsigned long long)got);
    return llmrt_fail(err, LLMRT_ERR_LIMIT, "%s: %s is larger than the %s %s %s may be", path, a,
                      size_str(b, sizeof b, max, 1), article, what);
}

llmrt_status llmrt_open_regular(const char *path, int flags, uint64_t max_bytes,
                                const char *what, int *fd, uint64_t *size, llmrt_error *err)
{
    *fd = -1;
    int f = open(path, flags | O_NONBLOCK | O_CLOEXEC);
    if (f < 0)
        return llmrt_fail(err, LLMRT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    llmrt_status st = LLMRT_OK;
    if (fstat(f, &sb) != 0)
        st = llmrt_fail(err, LLMRT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = llmrt_fail(err, LLMRT_ERR_IO, "%s: not a regular file (%s)", path,
                        type_name(sb.st_mode));
    else if (max_bytes && (uint64_t)sb.st_size > max_bytes)
        st = too_large(err, path, (uint64_t)sb.st_size, max_bytes, what);
    else if (fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK) != 0)
        st = llmrt_fail(err, LLMRT_ERR_IO, "%s: fcntl: %s", path, strerror(errno));
    if (st != LLMRT_OK) {
        close(f);
        return st;
    }
    *fd = f;
    if (size)
        *size = (uint64_t)sb.st_size;
    return LLMRT_OK;
}

llmrt_status llmrt_read_file_bounded(const char *path, size_t max_bytes, const char *what,
                                     char **data, size_t *len, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "standard input" : path;
    int fd = is_stdin ? STDIN_FILENO : -1;
    uint64_t size = 0;
    char *buf = NULL;
    *data = NULL;
    if (!is_stdin)
        TRY(llmrt_open_regular(path, O_RDONLY, max_bytes, what, &fd, &size, err));
    /* Room for the whole file, one byte to see it end (or grow) and the NUL; never more
     * than `most`, the bound plus those two. */
    const size_t most = max_bytes < SIZE_MAX - 2 ? max_bytes + 2 : SIZE_MAX;
    size_t cap = is_stdin || size == 0 ? 1 << 16 : (size_t)size + 2, n = 0;
    if (cap > most)
        cap = most;
    buf = malloc(cap);
    TRY_ALLOC(err, buf, name);
    for (;;) {
        if (cap - n < 2) {
            size_t grown = cap > most / 2 ? most : cap * 2;
            char *g = realloc(buf, grown);
            TRY_ALLOC(err, g, name);
            buf = g, cap = grown;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            FAIL(err, LLMRT_ERR_IO, "%s: read error: %s", name, strerror(errno));
        if (got == 0)
            break;
        n += (size_t)got;
        if (n > max_bytes) {
            st = too_large(err, name, 0, max_bytes, what);
            goto cleanup;
        }
    }
    buf[n] = 0;
    *data = buf;
    if (len)
        *len = n;
    buf = NULL;
cleanup:
    free(buf);
    if (fd >= 0 && !is_stdin)
        close(fd);
    return st;
}

llmrt_status llmrt_read_file(const char *path, char **data, size_t *len, llmrt_error *err)
{
    return llmrt_read_file_bounded(path, LLMRT_MAX_INPUT_BYTES, "input file", data, len, err);
}

int llmrt_path_exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}
