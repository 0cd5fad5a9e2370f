/* config_ini.c — reading runtime.ini: a regular file of a config's size, parsed by inih
 * through a line reader of ours (see below), each value set at file level. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_internal.h"
#include "error.h"

/* inih (Debian's build: 200-byte lines, multi-line values, no callback for a section header)
 * parses; its line reader is ours, so that every line is checked before inih sees it: a line
 * longer than inih's buffer would be split into two (the tail read as a setting of its own),
 * an indented line continues the previous value (or, first in a section, is a key), and a
 * [header] — which inih never reports on its own — is where an unknown or repeated section is
 * named. The reader stops at its first error. */

typedef struct seen_name {
    char *name; /* a section, or "section\nkey" */
    int line;
} seen_name;

typedef struct ini_ctx {
    llmrt_config *cfg;
    int level;       /* LVL_FILE or LVL_SYSTEM */
    const char *dir; /* the file's folder (relative PATH values) */
    FILE *f;
    const char *path;
    int line;
    size_t bytes;
    int err_line; /* line of the first error the reader or handler found */
    llmrt_status st;
    llmrt_error *err;
    seen_name *seen; /* sections and keys of this file, for duplicates */
    size_t n_seen, cap_seen;
} ini_ctx;

static void ini_fail(ini_ctx *c, llmrt_status code, const char *fmt, ...) LLMRT_PRINTF(3, 4);
static void ini_fail(ini_ctx *c, llmrt_status code, const char *fmt, ...)
{
    char msg[LLMRT_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->st = llmrt_fail(c->err, code, "%s:%d: %s", c->path, c->line, msg);
    c->err_line = c->line;
}

/* The line where `name` was first seen in this file, or 0 (and records it at this line). */
static int seen_before(ini_ctx *c, const char *name)
{
    for (size_t i = 0; i < c->n_seen; i++)
        if (strcmp(c->seen[i].name, name) == 0)
            return c->seen[i].line;
    if (c->n_seen == c->cap_seen) {
        size_t cap = c->cap_seen ? 2 * c->cap_seen : 32;
        seen_name *ns = realloc(c->seen, cap * sizeof *ns);
        if (!ns)
            return 0; /* only a duplicate goes unnoticed */
        c->seen = ns;
        c->cap_seen = cap;
    }
    if ((c->seen[c->n_seen].name = cfg_strdup(name)))
        c->seen[c->n_seen++].line = c->line;
    return 0;
}

/* A [name] header at the current line. */
static void ini_section(ini_ctx *c, const char *name)
{
    char where[1200];
    snprintf(where, sizeof where, "%s:%d", c->path, c->line);
    int first = seen_before(c, name);
    if (first) {
        ini_fail(c, LLMRT_ERR_INVALID_ARG,
                 "duplicate section [%s] (first at line %d; keep one [%s] with all its keys)",
                 name, first, name);
        return;
    }
    cfg_section *s = cfg_find_section(c->cfg, name);
    if (!s && !cfg_is_plugin_section(name)) {
        c->st = cfg_unknown_section(c->cfg, name, where, c->err);
        c->err_line = c->line;
        return;
    }
    if (!s && !(s = cfg_add_section(c->cfg, name, c->err))) {
        c->st = LLMRT_ERR_NOMEM;
        return;
    }
    if (!s->core && !s->header && !(s->header = cfg_strdup(where)))
        c->st = llmrt_fail(c->err, LLMRT_ERR_NOMEM, "out of memory");
}

static char *ini_read_line(char *str, int num, void *stream)
{
    ini_ctx *c = stream;
    if (c->st != LLMRT_OK || num < 3)
        return NULL;
    int n = 0, ch = 0, nul = 0;
    while (n < num - 1 && (ch = getc(c->f)) != EOF) {
        str[n++] = (char)ch;
        nul |= ch == 0;
        if (ch == '\n')
            break;
    }
    if (n == 0)
        return NULL; /* end of file (a read error is seen by ferror afterwards) */
    str[n] = 0;
    c->line++;
    c->bytes += (size_t)n;
    if (str[n - 1] != '\n' && n == num - 1 && (ch = getc(c->f)) != EOF && ch != '\n') {
        ini_fail(c, LLMRT_ERR_FORMAT,
                 "line longer than %d characters (the INI reader would cut it in two and read "
                 "the rest as a line of its own); shorten it",
                 num - 1);
        return NULL;
    }
    if (nul) {
        ini_fail(c, LLMRT_ERR_FORMAT, "a NUL byte (is this a text file?)");
        return NULL;
    }
    if (c->bytes > LLMRT_CONFIG_MAX_BYTES) {
        ini_fail(c, LLMRT_ERR_LIMIT, "the file grew beyond %u bytes while being read",
                 LLMRT_CONFIG_MAX_BYTES);
        return NULL;
    }
    const char *start = str;
    if (c->line == 1 && (unsigned char)str[0] == 0xEF && (unsigned char)str[1] == 0xBB &&
        (unsigned char)str[2] == 0xBF)
        start += 3; /* a UTF-8 byte order mark, as inih skips it */
    const char *p = start;
    while (*p && isspace((unsigned char)*p))
        p++;
    if (!*p || *p == ';' || *p == '#')
        return str; /* blank or a comment */
    if (p != start) {
        ini_fail(c, LLMRT_ERR_FORMAT,
                 "the line starts with whitespace: INI reads an indented line as the "
                 "continuation of the value above it, which llmrt does not accept (remove the "
                 "indentation)");
        return NULL;
    }
    if (*p == '[') { /* find the ']' as inih does: an inline "; comment" ends the search */
        const char *e = p + 1;
        int was_space = 0;
        while (*e && *e != ']' && !(was_space && *e == ';'))
            was_space = isspace((unsigned char)*e), e++;
        if (*e == ']') { /* else inih reports the syntax error */
            char name[128];
            size_t len = (size_t)(e - p - 1);
            if (len >= 50) { /* inih keeps 49 characters of a section name */
                ini_fail(c, LLMRT_ERR_FORMAT, "section name of %zu characters (at most 49)", len);
                return NULL;
            }
            memcpy(name, p + 1, len);
            name[len] = 0;
            ini_section(c, name);
            if (c->st != LLMRT_OK)
                return NULL;
        }
    }
    return str;
}

static int ini_on_value(void *user, const char *section, const char *name, const char *value)
{
    ini_ctx *c = user;
    if (c->st != LLMRT_OK || !name)
        return 1; /* keep only the first error; a header alone (not in Debian's build) */
    char where[1200];
    snprintf(where, sizeof where, "%s:%d", c->path, c->line);
    if (!section[0]) {
        ini_fail(c, LLMRT_ERR_INVALID_ARG, "key '%s' is outside any [section]", name);
        return 1;
    }
    char full[512];
    snprintf(full, sizeof full, "%s\n%s", section, name);
    int first = seen_before(c, full);
    if (first) {
        ini_fail(c, LLMRT_ERR_INVALID_ARG,
                 "duplicate key '%s' in [%s] (first set at line %d; keep one)", name, section,
                 first);
        return 1;
    }
    c->st = cfg_set_value(c->cfg, section, name, value ? value : "", where, c->level, c->dir,
                          c->err);
    if (c->st != LLMRT_OK)
        c->err_line = c->line;
    return 1;
}

/* Open a config file for reading: a regular file (a FIFO would block, a folder reads as
 * empty), of a config's size at most. */
static llmrt_status open_config(const char *path, FILE **out, llmrt_error *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return llmrt_fail(err, LLMRT_ERR_IO, "cannot open config file %s: %s", path,
                          strerror(errno));
    struct stat sb;
    llmrt_status st = LLMRT_OK;
    if (fstat(fd, &sb) != 0)
        st = llmrt_fail(err, LLMRT_ERR_IO, "cannot read config file %s: %s", path,
                        strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        st = llmrt_fail(err, LLMRT_ERR_IO,
                        "config file %s is a folder (give the path of an INI file)", path);
    else if (!S_ISREG(sb.st_mode))
        st = llmrt_fail(err, LLMRT_ERR_IO,
                        "config file %s is not a regular file (a FIFO, socket or device); give "
                        "the path of an INI file",
                        path);
    else if ((uintmax_t)sb.st_size > LLMRT_CONFIG_MAX_BYTES)
        st = llmrt_fail(err, LLMRT_ERR_LIMIT,
                        "config file %s is %jd bytes; a config file is at most %u bytes", path,
                        (intmax_t)sb.st_size, LLMRT_CONFIG_MAX_BYTES);
    int fl = st ? -1 : fcntl(fd, F_GETFL);
    if (!st && (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0))
        st = llmrt_fail(err, LLMRT_ERR_IO, "cannot read config file %s: %s", path,
                        strerror(errno));
    FILE *f = st ? NULL : fdopen(fd, "r");
    if (!st && !f)
        st = llmrt_fail(err, LLMRT_ERR_IO, "cannot read config file %s: %s", path,
                        strerror(errno));
    if (st) {
        close(fd);
        return st;
    }
    *out = f;
    return LLMRT_OK;
}

static llmrt_status load_file(llmrt_config *cfg, const char *path, int level, llmrt_error *err)
{
    ini_ctx c = {.cfg = cfg, .level = level, .path = path, .err = err, .st = LLMRT_OK};
    llmrt_status st = open_config(path, &c.f, err);
    if (st)
        return st;
    char *dir = cfg_strdup(path);
    if (!dir) {
        fclose(c.f);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = 0; /* "/t.ini": the root */
    else if (slash)
        *slash = 0;
    else
        strcpy(dir, ".");
    char **dir_slot = level == LVL_SYSTEM ? &cfg->sys_dir : &cfg->dir;
    free(*dir_slot);
    *dir_slot = dir;
    c.dir = dir;
    int bad_line = ini_parse_stream(ini_read_line, &c, ini_on_value, &c);
    int read_error = ferror(c.f);
    fclose(c.f);
    for (size_t i = 0; i < c.n_seen; i++)
        free(c.seen[i].name);
    free(c.seen);
    if (c.st != LLMRT_OK && !(bad_line > 0 && bad_line < c.err_line))
        return c.st; /* the earlier of our error and a syntax error is reported */
    if (bad_line > 0)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s:%d: syntax error (expected '[section]', 'key = value' or a "
                          "comment starting with ; or #)",
                          path, bad_line);
    if (bad_line < 0)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory reading config file %s", path);
    if (read_error)
        return llmrt_fail(err, LLMRT_ERR_IO, "cannot read config file %s", path);
    char **path_slot = level == LVL_SYSTEM ? &cfg->sys_path : &cfg->path;
    free(*path_slot);
    *path_slot = cfg_strdup(path);
    return LLMRT_OK;
}

llmrt_status llmrt_config_load_file(llmrt_config *cfg, const char *path, llmrt_error *err)
{
    return load_file(cfg, path, LVL_FILE, err);
}

llmrt_status llmrt_config_load_system_file(llmrt_config *cfg, const char *path,
                                           llmrt_error *err)
{
    llmrt_status st = load_file(cfg, path, LVL_SYSTEM, err);
    if (st)
        llmrt_error_prefix(err, "the system config (LLMRT_SYSTEM_CONFIG= to skip it)");
    return st;
}

const char *llmrt_config_system_path(char *buf, size_t n)
{
    const char *env = getenv("LLMRT_SYSTEM_CONFIG");
    if (env) {
        if (!env[0])
            return NULL;
        snprintf(buf, n, "%s", env);
        return buf;
    }
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return NULL;
    exe[len] = 0;
    for (int up = 0; up < 2; up++) { /* <prefix>/bin/llmrt → <prefix> */
        char *slash = strrchr(exe, '/');
        if (!slash)
            return NULL;
        *slash = 0;
    }
    size_t el = strlen(exe);
    if (el >= 4 && strcmp(exe + el - 4, "/usr") == 0)
        exe[el - 4] = 0; /* /usr/bin/llmrt → /etc, as Debian's packages put it */
    snprintf(buf, n, "%s/etc/llmrt/runtime.ini", exe);
    return buf;
}
