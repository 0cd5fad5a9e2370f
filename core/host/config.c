/* config.c — the configuration: core's sections and the plugins' declared ones, every value
 * with its origin and level, overrides (environment, --set), lookups, and `llmrt config`'s
 * --show and --template. Keys are checked in config_key.c, files read in config_ini.c.
 * Every rejection says where (file:line, env variable, --set) and what would be right. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_internal.h"
#include "error.h"
#include "log.h"

char *cfg_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* ---- sections and entries ---- */

static const char *const plugin_kinds[] = {"backend", "memory", "quant", "model"};

int cfg_is_plugin_section(const char *section)
{
    const char *dot = strchr(section, '.');
    if (!dot || dot[1] == 0 || strchr(dot + 1, '.'))
        return 0;
    for (size_t i = 0; i < 4; i++)
        if (strlen(plugin_kinds[i]) == (size_t)(dot - section) &&
            strncmp(section, plugin_kinds[i], (size_t)(dot - section)) == 0)
            return 1;
    return 0;
}

cfg_section *cfg_find_section(const llmrt_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n; i++)
        if (strcmp(cfg->s[i]->name, name) == 0)
            return cfg->s[i];
    return NULL;
}

cfg_section *cfg_add_section(llmrt_config *cfg, const char *name, llmrt_error *err)
{
    if (cfg->n == cfg->cap) {
        size_t cap = cfg->cap ? 2 * cfg->cap : 16;
        cfg_section **ns = realloc(cfg->s, cap * sizeof *ns);
        if (!ns)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory"), NULL;
        cfg->s = ns;
        cfg->cap = cap;
    }
    cfg_section *s = calloc(1, sizeof *s);
    if (!s || !(s->name = cfg_strdup(name))) {
        free(s);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory"), NULL;
    }
    s->dirty = 1;
    cfg->s[cfg->n++] = s;
    return s;
}

static void free_section(cfg_section *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->e[i].key), free(s->e[i].value), free(s->e[i].origin);
    free(s->e), free(s->vk), free(s->vv), free(s->vw);
    free(s->name), free(s->about), free(s->header);
    free(s);
}

static const llmrt_key *find_decl(const cfg_section *s, const char *key)
{
    for (uint32_t i = 0; s->keys && i < s->n_keys; i++)
        if (strcmp(s->keys[i].name, key) == 0)
            return &s->keys[i];
    return NULL;
}

static cfg_entry *find_entry(const cfg_section *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->e[i].key, key) == 0)
            return &s->e[i];
    return NULL;
}

/* Store key = value from `origin` at `level`, unless a higher level already set it. */
static llmrt_status put_entry(cfg_section *s, const char *key, const char *value,
                              const char *origin, int level, const llmrt_key *decl,
                              llmrt_error *err)
{
    cfg_entry *e = find_entry(s, key);
    if (e && e->level > level)
        return LLMRT_OK;
    char *v = cfg_strdup(value), *o = cfg_strdup(origin), *k = e ? NULL : cfg_strdup(key);
    if (!v || !o || (!e && !k)) {
        free(v), free(o), free(k);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    }
    if (!e) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 8;
            cfg_entry *ne = realloc(s->e, cap * sizeof *ne);
            if (!ne) {
                free(v), free(o), free(k);
                return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
            }
            s->e = ne;
            s->cap = cap;
        }
        e = &s->e[s->n++];
        e->key = k;
    } else {
        free(e->value), free(e->origin);
    }
    e->value = v;
    e->origin = o;
    e->level = level;
    e->decl = decl;
    s->dirty = 1;
    return LLMRT_OK;
}

/* Suggestion for an unknown section: the nearest core section. */
static const char *nearest_section(const llmrt_config *cfg, const char *section)
{
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; i < cfg->n_core; i++) {
        int d = llmrt_edit_distance(section, cfg->s[i]->name);
        if (d < bd)
            bd = d, best = cfg->s[i]->name;
    }
    return bd <= 3 ? best : NULL;
}

llmrt_status cfg_unknown_section(const llmrt_config *cfg, const char *section,
                                 const char *where, llmrt_error *err)
{
    const char *near = nearest_section(cfg, section);
    if (near)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: unknown section [%s] (did you mean [%s]?)", where, section, near);
    return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                      "%s: unknown section [%s] (sections: runtime, model, memory, cache, "
                      "scheduler, server, or <kind>.<plugin> for a plugin's own keys)",
                      where, section);
}

/* Suggestion for an unknown key: the nearest declared key in the same section, else in any. */
static void nearest_key(const llmrt_config *cfg, const char *section, const char *key,
                        char *out, size_t n)
{
    int bd = 99;
    out[0] = 0;
    for (size_t i = 0; i < cfg->n; i++) {
        const cfg_section *s = cfg->s[i];
        for (uint32_t j = 0; s->keys && j < s->n_keys; j++) {
            int d = llmrt_edit_distance(key, s->keys[j].name) + (strcmp(section, s->name) ? 2 : 0);
            if (d < bd) {
                bd = d;
                snprintf(out, n, "%s.%s", s->name, s->keys[j].name);
            }
        }
    }
    if (bd > 4)
        out[0] = 0;
}

static llmrt_status unknown_key(const llmrt_config *cfg, const char *section, const char *key,
                                const char *where, llmrt_error *err)
{
    const cfg_section *s = cfg_find_section(cfg, section);
    if (s && s->keys && !s->n_keys)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: unknown key '%s' in [%s] (plugin '%s' has no keys of its own)",
                          where, key, section, strchr(section, '.') + 1);
    char near[256];
    nearest_key(cfg, section, key, near, sizeof near);
    if (near[0])
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: unknown key '%s' in [%s] (did you mean %s?)", where, key, section,
                          near);
    return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                      "%s: unknown key '%s' in [%s] (see `llmrt config --show` for the keys)",
                      where, key, section);
}

/* base_dir/value for a relative PATH value (NULL: keep the value). */
static char *resolve(const llmrt_key *k, const char *value, const char *base_dir)
{
    if (k->type != LLMRT_KEY_PATH || !base_dir || !value[0] || value[0] == '/')
        return NULL;
    size_t n = strlen(base_dir) + strlen(value) + 2;
    char *v = malloc(n);
    if (v)
        snprintf(v, n, "%s/%s", base_dir, value);
    return v;
}

llmrt_status cfg_set_value(llmrt_config *cfg, const char *section, const char *key,
                           const char *value, const char *where, int level,
                           const char *base_dir, llmrt_error *err)
{
    cfg_section *s = cfg_find_section(cfg, section);
    if (!s) {
        if (!cfg_is_plugin_section(section))
            return cfg_unknown_section(cfg, section, where, err);
        if (!(s = cfg_add_section(cfg, section, err)))
            return err ? err->code : LLMRT_ERR_NOMEM;
    }
    if (!s->keys) /* a plugin section without a table (yet): kept as written */
        return put_entry(s, key, value, where, level, NULL, err);
    const llmrt_key *k = find_decl(s, key);
    if (!k)
        return unknown_key(cfg, section, key, where, err);
    llmrt_status st = llmrt_key_check_value(section, k, value, where, err);
    if (st)
        return st;
    char *resolved = resolve(k, value, base_dir);
    st = put_entry(s, key, resolved ? resolved : value, where, level, k, err);
    free(resolved);
    return st;
}

/* LLMRT_<SECTION>_<KEY>, upper-cased, '.' and '-' as '_'. */
static void env_name(const char *section, const char *key, char *out, size_t n)
{
    int len = snprintf(out, n, "LLMRT_%s_%s", section, key);
    for (int j = 0; j < len && (size_t)j < n; j++)
        out[j] = out[j] == '.' || out[j] == '-' ? '_' : (char)toupper((unsigned char)out[j]);
}

static llmrt_status apply_env_section(llmrt_config *cfg, cfg_section *s, llmrt_error *err)
{
    for (uint32_t i = 0; s->keys && i < s->n_keys; i++) {
        char name[256];
        env_name(s->name, s->keys[i].name, name, sizeof name);
        const char *v = getenv(name);
        if (v) {
            char where[280];
            snprintf(where, sizeof where, "env %s", name);
            llmrt_status st =
                cfg_set_value(cfg, s->name, s->keys[i].name, v, where, LVL_ENV, NULL, err);
            if (st)
                return st;
        }
    }
    return LLMRT_OK;
}

/* Every declared key present, in table order (defaults for the absent ones). */
static llmrt_status fill_defaults(cfg_section *s, llmrt_error *err)
{
    cfg_entry *ne = calloc(s->n_keys ? s->n_keys : 1, sizeof *ne);
    if (!ne)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < s->n_keys; i++) { /* the defaults first: nothing moved yet */
        if (find_entry(s, s->keys[i].name))
            continue;
        ne[i].key = cfg_strdup(s->keys[i].name);
        ne[i].value = cfg_strdup(s->keys[i].def);
        ne[i].origin = cfg_strdup("default");
        ne[i].level = LVL_DEFAULT;
        ne[i].decl = &s->keys[i];
        if (!ne[i].key || !ne[i].value || !ne[i].origin) {
            for (uint32_t j = 0; j <= i; j++)
                free(ne[j].key), free(ne[j].value), free(ne[j].origin);
            free(ne);
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
        }
    }
    for (uint32_t i = 0; i < s->n_keys; i++) { /* then the values set: every one is declared */
        cfg_entry *old = find_entry(s, s->keys[i].name);
        if (old)
            ne[i] = *old;
    }
    free(s->e);
    s->e = ne;
    s->cap = s->n_keys ? s->n_keys : 1;
    s->n = s->n_keys;
    s->dirty = 1;
    return LLMRT_OK;
}

llmrt_status llmrt_config_new(llmrt_config **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_config *cfg = calloc(1, sizeof *cfg);
    TRY_ALLOC(err, cfg, "config");
    for (size_t i = 0; i < llmrt_config_schema_len; i++) {
        const llmrt_cfg_section *cs = &llmrt_config_schema[i];
        llmrt_error terr = {0};
        if (llmrt_key_table_check(cs->name, cs->keys, cs->n_keys, &terr) != LLMRT_OK)
            FAIL(err, LLMRT_ERR_INTERNAL, "core's key table: %s", terr.msg);
        cfg_section *s = cfg_add_section(cfg, cs->name, err);
        if (!s)
            FAIL(err, LLMRT_ERR_NOMEM, "out of memory");
        s->core = s->declared = 1;
        s->keys = cs->keys;
        s->n_keys = cs->n_keys;
        TRY(fill_defaults(s, err));
    }
    cfg->n_core = cfg->n;
    *out = cfg;
    return LLMRT_OK;
cleanup:
    llmrt_config_free(cfg);
    return st;
}

void llmrt_config_free(llmrt_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n; i++)
        free_section(cfg->s[i]);
    free(cfg->s);
    free(cfg->path);
    free(cfg->dir);
    free(cfg->sys_path);
    free(cfg->sys_dir);
    free(cfg);
}

llmrt_status llmrt_config_apply_env(llmrt_config *cfg, llmrt_error *err)
{
    for (size_t i = 0; i < cfg->n; i++) {
        llmrt_status st = apply_env_section(cfg, cfg->s[i], err);
        if (st)
            return st;
    }
    const char *mem = getenv("LLMRT_MEMORY");
    if (mem)
        return cfg_set_value(cfg, "memory", "plugin", mem, "env LLMRT_MEMORY", LVL_ENV, NULL, err);
    return LLMRT_OK;
}

llmrt_status llmrt_config_set(llmrt_config *cfg, const char *assignment, const char *origin,
                              llmrt_error *err)
{
    const char *eq = strchr(assignment, '=');
    const char *dot = NULL; /* the key is after the last dot before '=' */
    for (const char *p = assignment; eq && p < eq; p++)
        if (*p == '.')
            dot = p;
    if (!eq || !dot || dot == assignment || dot + 1 == eq)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s '%s': expected section.key=value (e.g. memory.plugin=pinned)",
                          origin, assignment);
    char section[256], key[256];
    size_t sl = (size_t)(dot - assignment), kl = (size_t)(eq - dot - 1);
    if (sl >= sizeof section || kl >= sizeof key)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "%s '%s': name too long", origin,
                          assignment);
    memcpy(section, assignment, sl);
    section[sl] = 0;
    memcpy(key, dot + 1, kl);
    key[kl] = 0;
    return cfg_set_value(cfg, section, key, eq + 1, origin, LVL_SET, NULL, err);
}

llmrt_status llmrt_config_build(const char *path, const char *const *sets, int n_sets,
                                llmrt_config **out, llmrt_error *err)
{
    llmrt_status st;
    llmrt_config *cfg = NULL;
    TRY(llmrt_config_new(&cfg, err));
    char sys[4200];
    const char *sys_path = llmrt_config_system_path(sys, sizeof sys);
    if (sys_path && access(sys_path, F_OK) == 0)
        TRY(llmrt_config_load_system_file(cfg, sys_path, err));
    if (path)
        TRY(llmrt_config_load_file(cfg, path, err));
    TRY(llmrt_config_apply_env(cfg, err));
    for (int i = 0; i < n_sets; i++)
        TRY(llmrt_config_set(cfg, sets[i], "--set", err));
    *out = cfg;
    return LLMRT_OK;
cleanup:
    llmrt_config_free(cfg);
    return st;
}

llmrt_status llmrt_config_declare(llmrt_config *cfg, const char *section, const llmrt_key *keys,
                                  uint32_t n_keys, const char *about, llmrt_error *err)
{
    if (!cfg_is_plugin_section(section))
        return llmrt_fail(err, LLMRT_ERR_INTERNAL,
                          "declare [%s]: not a plugin section (<kind>.<name>)", section);
    cfg_section *s = cfg_find_section(cfg, section);
    if (!s && !(s = cfg_add_section(cfg, section, err)))
        return err ? err->code : LLMRT_ERR_NOMEM;
    if (s->declared)
        return llmrt_fail(err, LLMRT_ERR_INTERNAL, "[%s] declared twice", section);
    s->declared = 1;
    if (about && !(s->about = cfg_strdup(about)))
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    if (!keys)
        return LLMRT_OK; /* validates its section itself */
    s->keys = keys;
    s->n_keys = n_keys;
    /* what the file and --set gave the section, now that its keys are known */
    for (size_t i = 0; i < s->n; i++) {
        cfg_entry *e = &s->e[i];
        const llmrt_key *k = find_decl(s, e->key);
        if (!k)
            return unknown_key(cfg, section, e->key, e->origin, err);
        llmrt_status st = llmrt_key_check_value(section, k, e->value, e->origin, err);
        if (st)
            return st;
        char *resolved = e->level == LVL_FILE     ? resolve(k, e->value, cfg->dir)
                         : e->level == LVL_SYSTEM ? resolve(k, e->value, cfg->sys_dir)
                                                  : NULL;
        if (resolved)
            free(e->value), e->value = resolved;
        e->decl = k;
    }
    llmrt_status st = apply_env_section(cfg, s, err);
    return st ? st : fill_defaults(s, err);
}

/* ---- unknown LLMRT_* variables ---- */

/* LLMRT_* variables that are not keys: what llmrt, its tools and its test harness read. */
static const char *const non_key_vars[] = {
    "LLMRT_MEMORY",         /* short for memory.plugin */
    "LLMRT_SYSTEM_CONFIG",  /* the system config file's path (config_ini.c) */
    "LLMRT_RUN_NO_BUILD",   /* scripts/run.sh */
    "LLMRT_RUN_MODEL",
    "LLMRT_PLUGIN_PATH",    /* plugin search folders (registry.c) */
    "LLMRT_BENCH_COMMIT",   /* the commit a bench report names (bench_env.c) */
    "LLMRT_CUPTI_TRACE",    /* backend-cuda's benchmark tool */
    "LLMRT_SOURCE_DIR",     /* the test harness (tests/CMakeLists.txt: LLMRT_TEST_ENV) */
    "LLMRT_BUILD_DIR",
    "LLMRT_PLUGIN_DIR",
    "LLMRT_CUDA",           /* scripts/build.sh, scripts/test.sh */
    "LLMRT_JOBS",
    "LLMRT_SKIP_SANITIZE",
    "LLMRT_SKIP_TSAN",
    "LLMRT_ASAN_EXCLUDE",
    "LLMRT_BUNDLE_LIBS",    /* scripts/gpu-pack.sh */
    "LLMRT_8B_DIR",         /* scripts/gpu-check.sh, backend-cuda's gpu-sweep.sh */
    "LLMRT_TOKENIZER_DIR",  /* the tokenizer folder of tools/fetch-*-tokenizer.sh and tests */
    "LLMRT_LOGITS_BACKEND", /* tests/integration/test_logits.sh, test_moe_logits.sh */
    "LLMRT_LOGITS_TOL",
    "LLMRT_LOGITS_ROUTER_BAND",
};

extern char **environ;

void llmrt_config_warn_env(const llmrt_config *cfg)
{
    for (char **ev = environ; ev && *ev; ev++) {
        const char *eq = strchr(*ev, '=');
        size_t len = eq ? (size_t)(eq - *ev) : strlen(*ev);
        if (strncmp(*ev, "LLMRT_", 6) != 0 || len >= 256)
            continue;
        char name[256];
        memcpy(name, *ev, len);
        name[len] = 0;
        int known = 0;
        for (size_t i = 0; !known && i < sizeof non_key_vars / sizeof *non_key_vars; i++)
            known = strcmp(name, non_key_vars[i]) == 0;
        const char *tail = name + 5; /* "_CUDA_TUNE" of LLMRT_CUDA_TUNE */
        char best[256] = "", cand[256];
        int bd = 4, suffix = 0;
        for (size_t i = 0; !known && i < cfg->n; i++) {
            const cfg_section *s = cfg->s[i];
            for (uint32_t j = 0; !known && s->keys && j < s->n_keys; j++) {
                env_name(s->name, s->keys[j].name, cand, sizeof cand);
                if (strcmp(cand, name) == 0) {
                    known = 1;
                    break;
                }
                size_t cl = strlen(cand), tl = strlen(tail);
                if (!suffix && cl > tl && strcmp(cand + cl - tl, tail) == 0) {
                    snprintf(best, sizeof best, "%s", cand); /* a renamed knob's new name */
                    suffix = 1;
                }
                int d = llmrt_edit_distance(name, cand);
                if (!suffix && d < bd)
                    bd = d, snprintf(best, sizeof best, "%s", cand);
            }
        }
        if (known)
            continue;
        if (best[0])
            llmrt_log(LLMRT_LOG_WARN, "config",
                      "environment variable %s matches no configuration key (did you mean "
                      "%s?); it is ignored",
                      name, best);
        else
            llmrt_log(LLMRT_LOG_WARN, "config",
                      "environment variable %s matches no configuration key of llmrt or of an "
                      "installed plugin; it is ignored",
                      name);
    }
}

/* ---- lookups ---- */

/* "section.key" → its section and entry (split at the last dot). */
static int lookup(const llmrt_config *cfg, const char *full, cfg_section **sec, cfg_entry **ent)
{
    const char *dot = strrchr(full, '.');
    char section[256];
    if (!dot || (size_t)(dot - full) >= sizeof section)
        return 0;
    memcpy(section, full, (size_t)(dot - full));
    section[dot - full] = 0;
    cfg_section *s = cfg_find_section(cfg, section);
    cfg_entry *e = s ? find_entry(s, dot + 1) : NULL;
    if (!e)
        return 0;
    if (sec)
        *sec = s;
    *ent = e;
    return 1;
}

const char *llmrt_config_get(const llmrt_config *cfg, const char *full)
{
    cfg_entry *e;
    return lookup(cfg, full, NULL, &e) ? e->value : NULL;
}

static const char *shown(const cfg_entry *e)
{
    if (e->decl && (e->decl->flags & LLMRT_KEY_SECRET))
        return e->value[0] ? "(set)" : "(unset)";
    return e->value;
}

const char *llmrt_config_shown(const llmrt_config *cfg, const char *full)
{
    cfg_entry *e;
    return lookup(cfg, full, NULL, &e) ? shown(e) : NULL;
}

const char *llmrt_config_origin(const llmrt_config *cfg, const char *full)
{
    cfg_entry *e;
    return lookup(cfg, full, NULL, &e) ? e->origin : NULL;
}

const llmrt_key *llmrt_config_decl(const llmrt_config *cfg, const char *full)
{
    cfg_entry *e;
    return lookup(cfg, full, NULL, &e) ? e->decl : NULL;
}

int llmrt_config_is_default(const llmrt_config *cfg, const char *full)
{
    cfg_entry *e;
    return lookup(cfg, full, NULL, &e) && e->decl &&
           cfg_values_equal(e->decl, e->value, e->decl->def);
}

/* The entry of a declared key of `type`; NULL (and an error logged: a caller's bug) else. */
static const cfg_entry *typed(const llmrt_config *cfg, const char *full, llmrt_key_type type)
{
    cfg_entry *e;
    if (lookup(cfg, full, NULL, &e) && e->decl && e->decl->type == type)
        return e;
    llmrt_log(LLMRT_LOG_ERROR, "config", "internal: %s is not a declared key of type %d", full,
              (int)type);
    return NULL;
}

int64_t llmrt_config_int(const llmrt_config *cfg, const char *key)
{
    const cfg_entry *e = typed(cfg, key, LLMRT_KEY_INT);
    int64_t x = 0;
    return e && cfg_parse_i64(e->value, &x) == 1 ? x : 0;
}

double llmrt_config_float(const llmrt_config *cfg, const char *key)
{
    const cfg_entry *e = typed(cfg, key, LLMRT_KEY_FLOAT);
    double x = 0;
    return e && cfg_parse_f64(e->value, &x) ? x : 0.0;
}

int llmrt_config_bool(const llmrt_config *cfg, const char *key)
{
    const cfg_entry *e = typed(cfg, key, LLMRT_KEY_BOOL);
    int b = 0;
    return e && cfg_parse_bool(e->value, &b) ? b : 0;
}

const char *llmrt_config_path(const llmrt_config *cfg) { return cfg->path; }
const char *llmrt_config_system_file(const llmrt_config *cfg) { return cfg->sys_path; }

static const llmrt_section *section_view(cfg_section *s)
{
    if (s->dirty) {
        size_t n = s->n ? s->n : 1;
        const char **k = realloc(s->vk, n * sizeof *k);
        if (k)
            s->vk = k;
        const char **v = realloc(s->vv, n * sizeof *v);
        if (v)
            s->vv = v;
        const char **w = realloc(s->vw, n * sizeof *w);
        if (w)
            s->vw = w;
        if (!k || !v || !w) { /* out of memory: an empty view rather than a wrong one */
            s->view = (llmrt_section){.name = s->name};
            return &s->view;
        }
        for (size_t i = 0; i < s->n; i++)
            k[i] = s->e[i].key, v[i] = s->e[i].value, w[i] = s->e[i].origin;
        s->dirty = 0;
    }
    s->view.name = s->name;
    s->view.n = s->n;
    s->view.keys = s->vk;
    s->view.values = s->vv;
    s->view.where = s->vw;
    return &s->view;
}

const llmrt_section *llmrt_config_plugin_section(const llmrt_config *cfg, const char *name)
{
    cfg_section *s = cfg_find_section(cfg, name);
    if (s && !s->core)
        return section_view(s);
    llmrt_config *mut = (llmrt_config *)cfg;
    mut->empty.name = NULL;
    mut->empty.n = 0;
    return &mut->empty;
}

size_t llmrt_config_plugin_section_count(const llmrt_config *cfg) { return cfg->n - cfg->n_core; }

const llmrt_section *llmrt_config_plugin_section_at(const llmrt_config *cfg, size_t i)
{
    return i < cfg->n - cfg->n_core ? section_view(cfg->s[cfg->n_core + i]) : NULL;
}

int llmrt_config_section_declared(const llmrt_config *cfg, const char *name)
{
    cfg_section *s = cfg_find_section(cfg, name);
    return s && s->declared;
}

const char *llmrt_config_section_origin(const llmrt_config *cfg, const char *name)
{
    cfg_section *s = cfg_find_section(cfg, name);
    if (!s)
        return NULL;
    if (s->header)
        return s->header;
    for (size_t i = 0; i < s->n; i++)
        if (s->e[i].level > LVL_DEFAULT)
            return s->e[i].origin;
    return NULL;
}

size_t llmrt_config_entry_count(const llmrt_config *cfg)
{
    size_t n = 0;
    for (size_t i = 0; i < cfg->n; i++)
        n += cfg->s[i]->n;
    return n;
}

int llmrt_config_entry_at(const llmrt_config *cfg, size_t i, llmrt_config_entry *out)
{
    for (size_t j = 0; j < cfg->n; j++) {
        const cfg_section *s = cfg->s[j];
        if (i < s->n) {
            const cfg_entry *e = &s->e[i];
            *out = (llmrt_config_entry){s->name, e->key, e->value, shown(e), e->origin, e->decl};
            return 1;
        }
        i -= s->n;
    }
    return 0;
}

/* ---- show and template ---- */

void llmrt_config_show(const llmrt_config *cfg, FILE *out)
{
    for (size_t i = 0; i < cfg->n; i++) {
        const cfg_section *s = cfg->s[i];
        const char *plugin = s->core ? NULL : strchr(s->name, '.') + 1;
        if (!s->core && !s->n && !s->header)
            continue; /* a plugin that has no keys, or declares none and was given none */
        if (i)
            fputc('\n', out);
        if (s->core)
            fprintf(out, "[%s]\n", s->name);
        else if (s->keys && s->n_keys)
            fprintf(out, "[%s]    ; the keys of plugin '%s'\n", s->name, plugin);
        else if (s->keys)
            fprintf(out, "[%s]    ; plugin '%s' has no keys\n", s->name, plugin);
        else if (s->declared)
            fprintf(out, "[%s]    ; plugin '%s' declares no key table: it checks these itself\n",
                    s->name, plugin);
        else
            fprintf(out, "[%s]    ; no installed plugin declares this section: ignored\n",
                    s->name);
        for (size_t j = 0; j < s->n; j++) {
            const cfg_entry *e = &s->e[j];
            char kv[512];
            snprintf(kv, sizeof kv, "%s = %s", e->key, shown(e));
            fprintf(out, "%-44s ; %s%s\n", kv, e->origin,
                    e->decl && (e->decl->flags & LLMRT_KEY_DEVELOPER) ? " (developer key)" : "");
        }
    }
}

/* Wrap text at ~90 columns as "; " comment lines. */
static void write_comment(FILE *out, const char *text)
{
    const char *p = text;
    while (*p) {
        size_t take = strlen(p);
        if (take > 88) {
            take = 88;
            while (take > 0 && p[take] != ' ')
                take--;
            if (take == 0)
                take = 88;
        }
        fprintf(out, "; %.*s\n", (int)take, p);
        p += take;
        while (*p == ' ')
            p++;
    }
}

void llmrt_config_write_template(const llmrt_config *cfg, FILE *out)
{
    fprintf(out, "; runtime.ini — llmrt configuration. Every key, at its default.\n");
    write_comment(out, "Written by `llmrt config --template` from core's key tables "
                       "(core/host/config_schema.c) and those of the plugins installed where "
                       "it ran; keep them equal.");
    write_comment(out, "Overrides: LLMRT_<SECTION>_<KEY>=value in the environment (a plugin's "
                       "keys: LLMRT_<KIND>_<NAME>_<KEY>), then --set section.key=value. A "
                       "section for a plugin that is not installed is ignored with a warning. "
                       "Developer keys (tuning knobs) are commented out.");
    for (size_t i = 0; i < cfg->n; i++) {
        const cfg_section *s = cfg->s[i];
        if (!s->keys || !s->n_keys)
            continue;
        fprintf(out, "\n[%s]\n", s->name);
        if (s->about) {
            const char *dot = strchr(s->name, '.');
            char line[1024];
            snprintf(line, sizeof line, "%.*s plugin '%s': %s", (int)(dot - s->name), s->name,
                     dot + 1, s->about);
            write_comment(out, line);
            fprintf(out, ";\n");
        }
        for (uint32_t j = 0; j < s->n_keys; j++) {
            const llmrt_key *k = &s->keys[j];
            int dev = (k->flags & LLMRT_KEY_DEVELOPER) != 0;
            write_comment(out, k->help);
            if (k->allowed)
                fprintf(out, "; allowed: %s\n", k->allowed);
            if (dev)
                fprintf(out, "; developer key (bench reports record it); uncomment to set:\n");
            fprintf(out, "%s%s = %s\n", dev ? "; " : "", k->name, k->def);
        }
    }
}
