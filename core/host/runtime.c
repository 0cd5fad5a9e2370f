/* runtime.c — config + host services + registry, and opening backend/memory instances. */
#include "runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"

static void host_log(void *ctx, llmrt_log_level level, const char *who, const char *fmt, ...)
{
    (void)ctx;
    va_list ap;
    va_start(ap, fmt);
    llmrt_vlog(level, who, fmt, ap);
    va_end(ap);
}

static const char *host_config_get(void *ctx, const char *key)
{
    return llmrt_config_get((const llmrt_config *)ctx, key);
}

/* Each installed plugin's section: its key table (the config validates what the file and
 * --set gave it, applies its environment variables and fills in its defaults), or none (an
 * ABI 1.0 plugin validates its section itself). */
static llmrt_status declare_plugin_sections(llmrt_runtime *rt, llmrt_error *err)
{
    for (size_t i = 0; i < llmrt_registry_count(rt->reg); i++) {
        const llmrt_plugin_desc *d = llmrt_registry_at(rt->reg, i)->desc;
        char section[96];
        snprintf(section, sizeof section, "%s.%s", llmrt_plugin_kind_name(d->kind), d->name);
        /* the registry checked the table and that n_keys lies inside struct_size */
        const llmrt_key *keys = LLMRT_VT_HAS(d, llmrt_plugin_desc, keys) ? d->keys : NULL;
        llmrt_status st = llmrt_config_declare(rt->cfg, section, keys, keys ? d->n_keys : 0,
                                               d->description, err);
        if (st)
            return st;
    }
    return LLMRT_OK;
}

/* A plugin section whose plugin is not installed is not an error (one runtime.ini may serve a
 * GPU and a CPU-only machine), but a typo must not pass silently: say so, with the nearest
 * installed name of that kind. */
static void warn_orphan_sections(llmrt_runtime *rt)
{
    static const llmrt_plugin_kind kinds[] = {LLMRT_PLUGIN_BACKEND, LLMRT_PLUGIN_MEMORY,
                                              LLMRT_PLUGIN_QUANT, LLMRT_PLUGIN_MODEL};
    for (size_t i = 0; i < llmrt_config_plugin_section_count(rt->cfg); i++) {
        const llmrt_section *sec = llmrt_config_plugin_section_at(rt->cfg, i);
        const char *dot = strchr(sec->name, '.');
        if (llmrt_config_section_declared(rt->cfg, sec->name))
            continue;
        for (size_t k = 0; dot && k < sizeof kinds / sizeof *kinds; k++) {
            const char *kname = llmrt_plugin_kind_name(kinds[k]);
            if (strlen(kname) != (size_t)(dot - sec->name) ||
                strncmp(kname, sec->name, strlen(kname)) != 0)
                continue;
            const char *best = NULL;
            int bd = 3; /* suggest only close names */
            for (size_t j = 0; j < llmrt_registry_count(rt->reg); j++) {
                const llmrt_plugin_desc *d = llmrt_registry_at(rt->reg, j)->desc;
                int dist = d->kind == kinds[k] ? llmrt_edit_distance(dot + 1, d->name) : 99;
                if (dist < bd)
                    bd = dist, best = d->name;
            }
            char names[512];
            llmrt_registry_names(rt->reg, kinds[k], names, sizeof names);
            const char *where = llmrt_config_section_origin(rt->cfg, sec->name);
            llmrt_log(LLMRT_LOG_WARN, "config",
                      "%s: section [%s] is for %s plugin '%s', which is not installed "
                      "(%s%s%s%s); its keys are ignored",
                      where ? where : "config", sec->name, kname, dot + 1,
                      best ? "did you mean " : "installed: ", best ? best : names,
                      best ? "? installed: " : "", best ? names : "");
            break;
        }
    }
}

llmrt_status llmrt_runtime_open_config(llmrt_config *cfg, llmrt_runtime **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_runtime *rt = calloc(1, sizeof *rt);
    if (!rt) {
        llmrt_config_free(cfg);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    }
    rt->cfg = cfg;
    llmrt_log_level level;
    if (llmrt_log_parse_level(llmrt_config_get(cfg, "runtime.log_level"), &level))
        llmrt_log_set_level(level);
    rt->host.struct_size = sizeof rt->host;
    rt->host.abi_version = LLMRT_ABI_VERSION;
    rt->host.ctx = cfg;
    rt->host.log = host_log;
    rt->host.config_get = host_config_get;
    TRY(llmrt_registry_new(&rt->host, &rt->reg, err));
    llmrt_registry_scan_default(rt->reg, llmrt_config_get(cfg, "runtime.plugin_dir"));
    TRY(declare_plugin_sections(rt, err));
    llmrt_config_warn_env(cfg);
    warn_orphan_sections(rt);
    *out = rt;
    return LLMRT_OK;
cleanup:
    llmrt_runtime_close(rt);
    return st;
}

llmrt_status llmrt_runtime_open(const char *ini_path, const char *const *sets, int n_sets,
                                llmrt_runtime **out, llmrt_error *err)
{
    llmrt_config *cfg = NULL;
    llmrt_status st = llmrt_config_build(ini_path, sets, n_sets, &cfg, err);
    if (st)
        return st;
    return llmrt_runtime_open_config(cfg, out, err);
}

void llmrt_runtime_close(llmrt_runtime *rt)
{
    if (!rt)
        return;
    llmrt_registry_free(rt->reg);
    llmrt_config_free(rt->cfg);
    free(rt);
}

/* "not found" message listing what is there and where we looked. */
static llmrt_status missing_plugin(llmrt_runtime *rt, llmrt_plugin_kind kind, const char *name,
                                   const char *key, llmrt_error *err)
{
    char names[512];
    llmrt_registry_names(rt->reg, kind, names, sizeof names);
    return llmrt_fail(err, LLMRT_ERR_NOT_FOUND,
                      "%s = %s (%s): no %s plugin named '%s' (available: %s; searched %s; "
                      "`llmrt plugins` lists rejected files)",
                      key, llmrt_config_get(rt->cfg, key), llmrt_config_origin(rt->cfg, key),
                      llmrt_plugin_kind_name(kind), name, names,
                      llmrt_registry_search_path(rt->reg));
}

llmrt_status llmrt_runtime_backend_open(llmrt_runtime *rt, llmrt_backend_ref *out,
                                        llmrt_error *err)
{
    const char *want = llmrt_config_get(rt->cfg, "runtime.backend");
    const char *name = want;
    if (strcmp(want, "auto") == 0) {
        name = "cpu";
        const llmrt_plugin_entry *cuda = llmrt_registry_find(rt->reg, LLMRT_PLUGIN_BACKEND, "cuda");
        if (cuda) {
            const llmrt_backend_vtable *vt = cuda->desc->vtable;
            llmrt_device_info info;
            int32_t count = 0;
            llmrt_error perr = {0};
            if (vt->probe(&info, 1, &count, &perr) == LLMRT_OK && count > 0)
                name = "cuda";
            else
                LOG_DEBUG("runtime.backend = auto: no CUDA device (%s); using cpu",
                          perr.msg[0] ? perr.msg : "none visible");
        }
    }
    const llmrt_plugin_entry *e = llmrt_registry_find(rt->reg, LLMRT_PLUGIN_BACKEND, name);
    if (!e)
        return missing_plugin(rt, LLMRT_PLUGIN_BACKEND, name, "runtime.backend", err);
    const llmrt_backend_vtable *vt = e->desc->vtable;
    char section[96];
    snprintf(section, sizeof section, "backend.%s", name);
    llmrt_backend *b = NULL;
    llmrt_status st = vt->create(&rt->host, llmrt_config_plugin_section(rt->cfg, section), &b, err);
    if (st) {
        llmrt_error_prefix(err, "backend '%s'", name);
        return st;
    }
    out->vt = vt;
    out->b = b;
    out->name = e->desc->name;
    return LLMRT_OK;
}

void llmrt_runtime_backend_close(llmrt_backend_ref *b)
{
    if (b && b->b) {
        b->vt->destroy(b->b);
        b->b = NULL;
    }
}

llmrt_status llmrt_runtime_memory_open(llmrt_runtime *rt, const llmrt_backend_ref *b,
                                       llmrt_memory_ref *out, llmrt_error *err)
{
    const char *name = llmrt_config_get(rt->cfg, "memory.plugin");
    const llmrt_plugin_entry *e = llmrt_registry_find(rt->reg, LLMRT_PLUGIN_MEMORY, name);
    if (!e)
        return missing_plugin(rt, LLMRT_PLUGIN_MEMORY, name, "memory.plugin", err);
    const llmrt_memory_vtable *vt = e->desc->vtable;
    char section[96];
    snprintf(section, sizeof section, "memory.%s", name);
    llmrt_memory *m = NULL;
    llmrt_status st = vt->create(&rt->host, llmrt_config_plugin_section(rt->cfg, section), b, &m, err);
    if (st) {
        llmrt_error_prefix(err, "memory plugin '%s'", name);
        return st;
    }
    out->vt = vt;
    out->m = m;
    out->name = e->desc->name;
    return LLMRT_OK;
}

void llmrt_runtime_memory_close(llmrt_memory_ref *m)
{
    if (m && m->m) {
        m->vt->destroy(m->m);
        m->m = NULL;
    }
}

const char *llmrt_version(void) { return LLMRT_VERSION; }
