/* registry.c — load, validate and index plugins (see registry.h).
 * Learned from SQLite's loadext.c: every failure path names the file and what was wrong. */
#include "registry.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

#include <llmrt/backend.h>
#include <llmrt/chat.h>
#include <llmrt/memory.h>
#include <llmrt/model.h>
#include <llmrt/quant.h>

#include "config.h"
#include "error.h"
#include "fileutil.h"
#include "log.h"

typedef struct entry {
    char key[160]; /* "memory:pinned" */
    llmrt_plugin_entry pub;
    char *path;
    UT_hash_handle hh;
} entry;

struct llmrt_registry {
    const llmrt_host *host;
    entry *table;          /* uthash by key */
    entry **sorted;        /* rebuilt on change */
    size_t n_sorted;
    llmrt_rejection *rejected;
    size_t n_rejected;
    char **seen;           /* realpaths of loaded files, so a file found twice loads once */
    size_t n_seen;
    char search_path[4096];
};

const char *llmrt_plugin_kind_name(llmrt_plugin_kind kind)
{
    switch (kind) {
    case LLMRT_PLUGIN_BACKEND: return "backend";
    case LLMRT_PLUGIN_MEMORY: return "memory";
    case LLMRT_PLUGIN_QUANT: return "quant";
    case LLMRT_PLUGIN_MODEL: return "model";
    }
    return "unknown";
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

llmrt_status llmrt_registry_new(const llmrt_host *host, llmrt_registry **out, llmrt_error *err)
{
    llmrt_registry *reg = calloc(1, sizeof *reg);
    if (!reg)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    reg->host = host;
    *out = reg;
    return LLMRT_OK;
}

void llmrt_registry_free(llmrt_registry *reg)
{
    if (!reg)
        return;
    entry *e, *tmp;
    HASH_ITER(hh, reg->table, e, tmp)
    {
        HASH_DEL(reg->table, e);
        free(e->path);
        free(e);
    }
    for (size_t i = 0; i < reg->n_rejected; i++) {
        free((char *)reg->rejected[i].path);
        free((char *)reg->rejected[i].reason);
    }
    for (size_t i = 0; i < reg->n_seen; i++)
        free(reg->seen[i]);
    free(reg->seen);
    free(reg->rejected);
    free(reg->sorted);
    /* Plugin handles are deliberately never dlclosed: plugins with CUDA code must stay
     * mapped until exit, and the descriptors point into them. */
    free(reg);
}

static void reject(llmrt_registry *reg, const char *path, const char *reason)
{
    llmrt_rejection *r = realloc(reg->rejected, sizeof *r * (reg->n_rejected + 1));
    if (!r)
        return;
    reg->rejected = r;
    r[reg->n_rejected].path = xstrdup(path);
    r[reg->n_rejected].reason = xstrdup(reason);
    if (r[reg->n_rejected].path && r[reg->n_rejected].reason)
        reg->n_rejected++;
    llmrt_log(LLMRT_LOG_DEBUG, "loader", "rejected %s: %s", path, reason);
}

/* ---- descriptor validation ---- */

typedef struct member {
    size_t offset;
    const char *name;
} member;

/* The required members, as the SDK headers list them (LLMRT_*_REQUIRED). */
#define M_BACKEND(f) {offsetof(llmrt_backend_vtable, f), #f},
#define M_MEMORY(f) {offsetof(llmrt_memory_vtable, f), #f},
#define M_QUANT(f) {offsetof(llmrt_quant_vtable, f), #f},
#define M_MODEL(f) {offsetof(llmrt_model_vtable, f), #f},
#define M_CHAT(f) {offsetof(llmrt_chat_vtable, f), #f},
static const member backend_required[] = {LLMRT_BACKEND_REQUIRED(M_BACKEND)};
static const member memory_required[] = {LLMRT_MEMORY_REQUIRED(M_MEMORY)};
static const member quant_required[] = {LLMRT_QUANT_REQUIRED(M_QUANT)};
static const member model_required[] = {LLMRT_MODEL_REQUIRED(M_MODEL)};
static const member chat_required[] = {LLMRT_CHAT_REQUIRED(M_CHAT)};
#undef M_BACKEND
#undef M_MEMORY
#undef M_QUANT
#undef M_MODEL
#undef M_CHAT

/* Every member of req[n] inside the table (vt, whose first field is its struct_size) and set;
 * `what` names the table in messages. */
static llmrt_status check_members(const void *vt, const member *req, size_t n, const char *what,
                                  const llmrt_plugin_desc *d, llmrt_error *err)
{
    uint32_t vt_size = *(const uint32_t *)vt;
    for (size_t i = 0; i < n; i++) {
        if (req[i].offset + sizeof(void *) > vt_size)
            return llmrt_fail(err, LLMRT_ERR_ABI,
                              "%s plugin '%s': %s struct_size %u is too small to hold "
                              "required member '%s'",
                              llmrt_plugin_kind_name(d->kind), d->name, what, vt_size,
                              req[i].name);
        void *fn;
        memcpy(&fn, (const char *)vt + req[i].offset, sizeof fn);
        if (!fn)
            return llmrt_fail(err, LLMRT_ERR_ABI,
                              "%s plugin '%s': required %s member '%s' is NULL",
                              llmrt_plugin_kind_name(d->kind), d->name, what, req[i].name);
    }
    return LLMRT_OK;
}

static int name_ok(const char *name)
{
    if (!name || !name[0] || strlen(name) > 64)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
            return 0;
    return 1;
}

static llmrt_status validate_desc(const llmrt_plugin_desc *d, llmrt_error *err)
{
    const size_t min_size = offsetof(llmrt_plugin_desc, init);
    if (d->struct_size < min_size)
        return llmrt_fail(err, LLMRT_ERR_ABI,
                          "descriptor struct_size is %u bytes, expected at least %zu",
                          d->struct_size, min_size);
    uint32_t maj = LLMRT_ABI_MAJOR_OF(d->abi_version), min = LLMRT_ABI_MINOR_OF(d->abi_version);
    if (maj != LLMRT_ABI_MAJOR)
        return llmrt_fail(err, LLMRT_ERR_ABI,
                          "ABI major version mismatch: expected %d.x, found %u.%u (rebuild the "
                          "plugin against this llmrt SDK)",
                          LLMRT_ABI_MAJOR, maj, min);
    if (min > LLMRT_ABI_MINOR)
        return llmrt_fail(err, LLMRT_ERR_ABI,
                          "plugin needs ABI %u.%u but this host provides %d.%d (expected "
                          "minor <= %d; upgrade llmrt)",
                          maj, min, LLMRT_ABI_MAJOR, LLMRT_ABI_MINOR, LLMRT_ABI_MINOR);
    const member *req;
    size_t n_req;
    switch (d->kind) {
    case LLMRT_PLUGIN_BACKEND: req = backend_required, n_req = sizeof backend_required / sizeof *req; break;
    case LLMRT_PLUGIN_MEMORY: req = memory_required, n_req = sizeof memory_required / sizeof *req; break;
    case LLMRT_PLUGIN_QUANT: req = quant_required, n_req = sizeof quant_required / sizeof *req; break;
    case LLMRT_PLUGIN_MODEL: req = model_required, n_req = sizeof model_required / sizeof *req; break;
    default:
        return llmrt_fail(err, LLMRT_ERR_ABI,
                          "unknown plugin kind %d (expected 1=backend, 2=memory, 3=quant, "
                          "4=model)",
                          (int)d->kind);
    }
    if (!name_ok(d->name))
        return llmrt_fail(err, LLMRT_ERR_ABI,
                          "invalid plugin name '%s' (expected 1-64 characters of a-z, 0-9, - "
                          "or _)",
                          d->name ? d->name : "(null)");
    if (!d->version || !d->description || !d->license)
        return llmrt_fail(err, LLMRT_ERR_ABI,
                          "%s plugin '%s': version, description and license must all be set",
                          llmrt_plugin_kind_name(d->kind), d->name);
    if (!d->vtable)
        return llmrt_fail(err, LLMRT_ERR_ABI, "%s plugin '%s' has a NULL vtable",
                          llmrt_plugin_kind_name(d->kind), d->name);
    llmrt_status st;
    if (LLMRT_VT_HAS(d, llmrt_plugin_desc, keys)) { /* its key table, checked like core's */
        if (d->struct_size < offsetof(llmrt_plugin_desc, n_keys) + sizeof d->n_keys)
            return llmrt_fail(err, LLMRT_ERR_ABI,
                              "%s plugin '%s': descriptor struct_size %u holds keys but not "
                              "n_keys",
                              llmrt_plugin_kind_name(d->kind), d->name, d->struct_size);
        char section[96];
        llmrt_error kerr = {0};
        snprintf(section, sizeof section, "%s.%s", llmrt_plugin_kind_name(d->kind), d->name);
        if (llmrt_key_table_check(section, d->keys, d->n_keys, &kerr) != LLMRT_OK)
            return llmrt_fail(err, LLMRT_ERR_ABI, "%s plugin '%s': bad key table: %s",
                              llmrt_plugin_kind_name(d->kind), d->name, kerr.msg);
    }
    st = check_members(d->vtable, req, n_req, "vtable", d, err);
    if (st)
        return st;
    if (d->kind == LLMRT_PLUGIN_MODEL) {
        const llmrt_model_vtable *mvt = d->vtable;
        if (LLMRT_VT_HAS(mvt, llmrt_model_vtable, chat) &&
            (st = check_members(mvt->chat, chat_required,
                                sizeof chat_required / sizeof *chat_required, "chat vtable", d,
                                err)) != LLMRT_OK)
            return st;
        if (LLMRT_VT_HAS(mvt, llmrt_model_vtable, synth_preset) !=
            LLMRT_VT_HAS(mvt, llmrt_model_vtable, synthesize))
            return llmrt_fail(err, LLMRT_ERR_ABI,
                              "model plugin '%s': synth_preset and synthesize come together "
                              "(one is set, the other is not)",
                              d->name);
    }
    if (d->kind == LLMRT_PLUGIN_QUANT) {
        const llmrt_quant_vtable *qvt = d->vtable;
        if (LLMRT_VT_HAS(qvt, llmrt_quant_vtable, synth_config) !=
            LLMRT_VT_HAS(qvt, llmrt_quant_vtable, synth_linear))
            return llmrt_fail(err, LLMRT_ERR_ABI,
                              "quant plugin '%s': synth_config and synth_linear come together "
                              "(one is set, the other is not)",
                              d->name);
    }
    return LLMRT_OK;
}

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = *(entry *const *)a, *y = *(entry *const *)b;
    if (x->pub.desc->kind != y->pub.desc->kind)
        return (int)x->pub.desc->kind - (int)y->pub.desc->kind;
    return strcmp(x->pub.desc->name, y->pub.desc->name);
}

static void rebuild_sorted(llmrt_registry *reg)
{
    size_t n = HASH_COUNT(reg->table);
    entry **s = realloc(reg->sorted, sizeof *s * (n ? n : 1));
    if (!s)
        return;
    reg->sorted = s;
    size_t i = 0;
    for (entry *e = reg->table; e; e = e->hh.next)
        s[i++] = e;
    qsort(s, n, sizeof *s, entry_cmp);
    reg->n_sorted = n;
}

llmrt_status llmrt_registry_add(llmrt_registry *reg, const llmrt_plugin_desc *desc,
                                const char *path, llmrt_error *err)
{
    llmrt_status st = validate_desc(desc, err);
    if (st)
        return st;
    char key[160];
    snprintf(key, sizeof key, "%s:%s", llmrt_plugin_kind_name(desc->kind), desc->name);
    entry *e;
    HASH_FIND_STR(reg->table, key, e);
    if (e)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "duplicate plugin %s: %s (already loaded from %s)", key, path,
                          e->path);
    if (LLMRT_VT_HAS(desc, llmrt_plugin_desc, init)) {
        llmrt_error ierr = {0};
        if (desc->init(reg->host, &ierr) != LLMRT_OK)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "%s plugin '%s': init failed: %s",
                              llmrt_plugin_kind_name(desc->kind), desc->name,
                              ierr.msg[0] ? ierr.msg : "(no message)");
    }
    e = calloc(1, sizeof *e);
    if (!e)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    snprintf(e->key, sizeof e->key, "%s", key);
    e->path = xstrdup(path);
    e->pub.desc = desc;
    e->pub.path = e->path;
    HASH_ADD_STR(reg->table, key, e);
    rebuild_sorted(reg);
    return LLMRT_OK;
}

llmrt_status llmrt_registry_load_file(llmrt_registry *reg, const char *path, llmrt_error *err)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        snprintf(real, sizeof real, "%s", path);
    for (size_t i = 0; i < reg->n_seen; i++)
        if (strcmp(reg->seen[i], real) == 0)
            return LLMRT_OK; /* the same file reached through two search folders */
    char **seen = realloc(reg->seen, sizeof *seen * (reg->n_seen + 1));
    if (seen) {
        reg->seen = seen;
        if ((seen[reg->n_seen] = xstrdup(real)))
            reg->n_seen++;
    }

    /* A regular file (a FIFO named x.so would block the open, and dlopen, forever) that
     * starts like an ELF object; any size, dlopen maps it. */
    llmrt_status st = LLMRT_OK;
    unsigned char magic[4] = {0};
    ssize_t got = 0;
    int fd = -1;
    llmrt_error oerr = {0};
    st = llmrt_open_regular(path, O_RDONLY, 0, "plugin", &fd, NULL, &oerr);
    if (st != LLMRT_OK) {
        /* the rejection list names the path already: keep only what follows "PATH: " */
        size_t pl = strlen(path);
        const char *why = strncmp(oerr.msg, path, pl) == 0 && strncmp(oerr.msg + pl, ": ", 2) == 0
                              ? oerr.msg + pl + 2
                              : oerr.msg;
        st = llmrt_fail(err, st, "%s", why);
        goto done;
    }
    do
        got = read(fd, magic, 4);
    while (got < 0 && errno == EINTR);
    close(fd);
    if (got < 4 || memcmp(magic, "\x7f" "ELF", 4) != 0) {
        st = llmrt_fail(err, LLMRT_ERR_FORMAT, "not an ELF shared object");
        goto done;
    }
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        st = llmrt_fail(err, LLMRT_ERR_FORMAT, "dlopen failed: %s", e ? e : "unknown error");
        goto done;
    }
    llmrt_plugin_get_fn get;
    void *sym = dlsym(h, LLMRT_PLUGIN_ENTRY);
    memcpy(&get, &sym, sizeof get);
    if (!sym) {
        st = llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                        "missing symbol %s (not an llmrt plugin, or the symbol is not "
                        "exported with LLMRT_EXPORT)",
                        LLMRT_PLUGIN_ENTRY);
        goto done; /* not dlclosed: see llmrt_registry_free */
    }
    const llmrt_plugin_desc *d = get(0);
    if (!d) {
        st = llmrt_fail(err, LLMRT_ERR_ABI, "%s(0) returned NULL: the plugin has no descriptor",
                        LLMRT_PLUGIN_ENTRY);
        goto done;
    }
    for (uint32_t i = 0; d && i < 256; d = get(++i)) {
        llmrt_error e2 = {0};
        if (llmrt_registry_add(reg, d, path, &e2) != LLMRT_OK) {
            reject(reg, path, e2.msg);
            if (st == LLMRT_OK) {
                st = e2.code;
                if (err)
                    *err = e2;
            }
        }
    }
    return st;
done:
    if (st != LLMRT_OK)
        reject(reg, path, err ? err->msg : "rejected");
    return st;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void llmrt_registry_scan_dir(llmrt_registry *reg, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 4 || strcmp(de->d_name + len - 3, ".so") != 0)
            continue;
        char **nn = realloc(names, sizeof *nn * (n + 1));
        if (!nn)
            break;
        names = nn;
        if ((names[n] = xstrdup(de->d_name)))
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        llmrt_error err = {0};
        llmrt_registry_load_file(reg, path, &err);
        free(names[i]);
    }
    free(names);
}

static void append_search(llmrt_registry *reg, const char *dir)
{
    size_t used = strlen(reg->search_path);
    snprintf(reg->search_path + used, sizeof reg->search_path - used, "%s%s", used ? ":" : "",
             dir);
}

void llmrt_registry_scan_default(llmrt_registry *reg, const char *plugin_dir)
{
    reg->search_path[0] = 0;
    if (plugin_dir && plugin_dir[0]) {
        append_search(reg, plugin_dir);
        llmrt_registry_scan_dir(reg, plugin_dir);
    }
    const char *env = getenv("LLMRT_PLUGIN_PATH");
    if (env && env[0]) {
        char *copy = xstrdup(env), *save = NULL;
        for (char *tok = copy ? strtok_r(copy, ":", &save) : NULL; tok;
             tok = strtok_r(NULL, ":", &save)) {
            append_search(reg, tok);
            llmrt_registry_scan_dir(reg, tok);
        }
        free(copy);
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            char dir[PATH_MAX + 64];
            snprintf(dir, sizeof dir, "%s/%s", exe, LLMRT_EXE_PLUGIN_SUBDIR);
            append_search(reg, dir);
            llmrt_registry_scan_dir(reg, dir);
        }
    }
    /* beside libllmrt itself (<libdir>/llmrt/plugins): what a program embedding the engine
     * finds, wherever it runs from */
    Dl_info info;
    if (dladdr((void *)llmrt_registry_scan_default, &info) && info.dli_fname) {
        char lib[PATH_MAX];
        snprintf(lib, sizeof lib, "%s", info.dli_fname);
        char *slash = strrchr(lib, '/');
        if (slash) {
            *slash = 0;
            char dir[PATH_MAX + 32];
            snprintf(dir, sizeof dir, "%s/llmrt/plugins", lib);
            append_search(reg, dir);
            llmrt_registry_scan_dir(reg, dir);
        }
    }
    append_search(reg, LLMRT_INSTALL_PLUGIN_DIR);
    llmrt_registry_scan_dir(reg, LLMRT_INSTALL_PLUGIN_DIR);
}

const char *llmrt_registry_search_path(const llmrt_registry *reg) { return reg->search_path; }

const llmrt_plugin_entry *llmrt_registry_find(const llmrt_registry *reg, llmrt_plugin_kind kind,
                                              const char *name)
{
    char key[160];
    snprintf(key, sizeof key, "%s:%s", llmrt_plugin_kind_name(kind), name);
    entry *e;
    HASH_FIND_STR(reg->table, key, e);
    return e ? &e->pub : NULL;
}

size_t llmrt_registry_count(const llmrt_registry *reg) { return reg->n_sorted; }

const llmrt_plugin_entry *llmrt_registry_at(const llmrt_registry *reg, size_t i)
{
    return i < reg->n_sorted ? &reg->sorted[i]->pub : NULL;
}

size_t llmrt_registry_rejected_count(const llmrt_registry *reg) { return reg->n_rejected; }

const llmrt_rejection *llmrt_registry_rejected_at(const llmrt_registry *reg, size_t i)
{
    return i < reg->n_rejected ? &reg->rejected[i] : NULL;
}

void llmrt_registry_names(const llmrt_registry *reg, llmrt_plugin_kind kind, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < reg->n_sorted; i++) {
        const llmrt_plugin_desc *d = reg->sorted[i]->pub.desc;
        if (d->kind != kind)
            continue;
        int w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", d->name);
        if (w < 0 || (size_t)w >= n - used)
            break;
        used += (size_t)w;
    }
    if (!used)
        snprintf(buf, n, "(none)");
}
