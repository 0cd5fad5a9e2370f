/* config.c — parse runtime.ini with inih, validate against the schema, apply overrides.
 * Every rejection says where (file:line, env variable, --set) and what would be right. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct plugin_section {
    char *name;
    size_t n, cap;
    char **keys, **values, **where;
    llmrt_section view; /* points into the arrays above */
} plugin_section;

struct llmrt_config {
    char **values;  /* [schema_len] effective value */
    char **origins; /* [schema_len] where it came from */
    plugin_section *sections;
    size_t n_sections;
    char *path;
    llmrt_section empty;
};

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int llmrt_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 99;
    int prev[65], cur[65];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb];
}

static const char *const plugin_kinds[] = {"backend", "memory", "quant", "model"};

/* "memory.pinned" → 1 (a plugin section), "memory" → 0. */
static int is_plugin_section(const char *section)
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

static int schema_index(const char *section, const char *key)
{
    for (size_t i = 0; i < llmrt_config_schema_len; i++)
        if (strcmp(llmrt_config_schema[i].section, section) == 0 &&
            strcmp(llmrt_config_schema[i].key, key) == 0)
            return (int)i;
    return -1;
}

static int section_known(const char *section)
{
    for (size_t i = 0; i < llmrt_config_schema_len; i++)
        if (strcmp(llmrt_config_schema[i].section, section) == 0)
            return 1;
    return 0;
}

/* Suggestion for an unknown section: the nearest schema section. */
static const char *nearest_section(const char *section)
{
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; i < llmrt_config_schema_len; i++) {
        int d = llmrt_edit_distance(section, llmrt_config_schema[i].section);
        if (d < bd) {
            bd = d;
            best = llmrt_config_schema[i].section;
        }
    }
    return bd <= 3 ? best : NULL;
}

/* Suggestion for an unknown key: the nearest key in the same section, else anywhere. */
static void nearest_key(const char *section, const char *key, char *out, size_t n)
{
    int bd = 99;
    out[0] = 0;
    for (size_t i = 0; i < llmrt_config_schema_len; i++) {
        const llmrt_cfg_key *k = &llmrt_config_schema[i];
        int d = llmrt_edit_distance(key, k->key) + (strcmp(section, k->section) ? 2 : 0);
        if (d < bd) {
            bd = d;
            snprintf(out, n, "%s.%s", k->section, k->key);
        }
    }
    if (bd > 4)
        out[0] = 0;
}

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 1;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 1;
    }
    return 0;
}

static int parse_int(const char *v, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return 0;
    *out = x;
    return 1;
}

static int parse_float(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x))
        return 0;
    *out = x;
    return 1;
}

/* Check `value` against schema entry k; on failure explain with `where`. */
static llmrt_status validate(const llmrt_cfg_key *k, const char *value, const char *where,
                             llmrt_error *err)
{
    switch (k->type) {
    case LLMRT_CFG_STRING:
    case LLMRT_CFG_PATH:
        return LLMRT_OK;
    case LLMRT_CFG_BOOL: {
        int b;
        if (!parse_bool(value, &b))
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: %s.%s = '%s' is not a boolean (use true or false)", where,
                              k->section, k->key, value);
        return LLMRT_OK;
    }
    case LLMRT_CFG_ENUM: {
        const char *p = k->allowed;
        size_t vl = strlen(value);
        while (p && *p) {
            const char *bar = strchr(p, '|');
            size_t len = bar ? (size_t)(bar - p) : strlen(p);
            if (len == vl && strncmp(p, value, len) == 0)
                return LLMRT_OK;
            p = bar ? bar + 1 : NULL;
        }
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: %s.%s = '%s' is not allowed (allowed: %s)", where, k->section,
                          k->key, value, k->allowed);
    }
    case LLMRT_CFG_INT:
    case LLMRT_CFG_FLOAT: {
        double x, lo = -INFINITY, hi = INFINITY;
        long long ix;
        int ok = k->type == LLMRT_CFG_INT ? parse_int(value, &ix) : parse_float(value, &x);
        if (!ok)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "%s: %s.%s = '%s' is not %s", where,
                              k->section, k->key, value,
                              k->type == LLMRT_CFG_INT ? "an integer" : "a number");
        if (k->type == LLMRT_CFG_INT)
            x = (double)ix;
        if (k->allowed)
            sscanf(k->allowed, "%lf..%lf", &lo, &hi);
        if (x < lo || x > hi)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: %s.%s = %s is out of range (allowed: %s)", where, k->section,
                              k->key, value, k->allowed);
        return LLMRT_OK;
    }
    }
    return LLMRT_OK;
}

static plugin_section *find_section(const llmrt_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_sections; i++)
        if (strcmp(cfg->sections[i].name, name) == 0)
            return &cfg->sections[i];
    return NULL;
}

static llmrt_status set_plugin_key(llmrt_config *cfg, const char *section, const char *key,
                                   const char *value, const char *where, llmrt_error *err)
{
    plugin_section *s = find_section(cfg, section);
    if (!s) {
        plugin_section *ns = realloc(cfg->sections, sizeof *ns * (cfg->n_sections + 1));
        if (!ns)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
        cfg->sections = ns;
        s = &ns[cfg->n_sections++];
        memset(s, 0, sizeof *s);
        s->name = xstrdup(section);
        if (!s->name)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->n; i++) /* later assignments replace earlier ones */
        if (strcmp(s->keys[i], key) == 0) {
            char *v = xstrdup(value), *w = xstrdup(where);
            if (!v || !w) {
                free(v), free(w);
                return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
            }
            free(s->values[i]), free(s->where[i]);
            s->values[i] = v, s->where[i] = w;
            return LLMRT_OK;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        char **k = realloc(s->keys, cap * sizeof *k);
        if (k)
            s->keys = k;
        char **v = realloc(s->values, cap * sizeof *v);
        if (v)
            s->values = v;
        char **w = realloc(s->where, cap * sizeof *w);
        if (w)
            s->where = w;
        if (!k || !v || !w)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
        s->cap = cap;
    }
    s->keys[s->n] = xstrdup(key);
    s->values[s->n] = xstrdup(value);
    s->where[s->n] = xstrdup(where);
    if (!s->keys[s->n] || !s->values[s->n] || !s->where[s->n])
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    s->n++;
    return LLMRT_OK;
}

/* Set section.key = value from `where`, validating against the schema. `base_dir` resolves
 * relative PATH values (NULL: keep as given). */
static llmrt_status set_value(llmrt_config *cfg, const char *section, const char *key,
                              const char *value, const char *where, const char *base_dir,
                              llmrt_error *err)
{
    if (is_plugin_section(section))
        return set_plugin_key(cfg, section, key, value, where, err);
    if (!section_known(section)) {
        const char *near = nearest_section(section);
        if (near)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: unknown section [%s] (did you mean [%s]?)", where, section,
                              near);
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: unknown section [%s] (sections: runtime, model, memory, cache, "
                          "scheduler, server, or <kind>.<plugin> for a plugin's own keys)",
                          where, section);
    }
    int idx = schema_index(section, key);
    if (idx < 0) {
        char near[128];
        nearest_key(section, key, near, sizeof near);
        if (near[0])
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: unknown key '%s' in [%s] (did you mean %s?)", where, key,
                              section, near);
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "%s: unknown key '%s' in [%s] (see `llmrt config --show` for the "
                          "keys)",
                          where, key, section);
    }
    const llmrt_cfg_key *k = &llmrt_config_schema[idx];
    llmrt_status st = validate(k, value, where, err);
    if (st)
        return st;
    char *v;
    if (k->type == LLMRT_CFG_PATH && base_dir && value[0] && value[0] != '/') {
        size_t n = strlen(base_dir) + strlen(value) + 2;
        v = malloc(n);
        if (v)
            snprintf(v, n, "%s/%s", base_dir, value);
    } else {
        v = xstrdup(value);
    }
    char *o = xstrdup(where);
    if (!v || !o) {
        free(v), free(o);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    }
    free(cfg->values[idx]);
    free(cfg->origins[idx]);
    cfg->values[idx] = v;
    cfg->origins[idx] = o;
    return LLMRT_OK;
}

llmrt_status llmrt_config_new(llmrt_config **out, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    llmrt_config *cfg = calloc(1, sizeof *cfg);
    TRY_ALLOC(err, cfg, "config");
    cfg->values = calloc(llmrt_config_schema_len, sizeof(char *));
    cfg->origins = calloc(llmrt_config_schema_len, sizeof(char *));
    TRY_ALLOC(err, cfg->values && cfg->origins ? cfg : NULL, "config values");
    for (size_t i = 0; i < llmrt_config_schema_len; i++) {
        cfg->values[i] = xstrdup(llmrt_config_schema[i].def);
        cfg->origins[i] = xstrdup("default");
        TRY_ALLOC(err, cfg->values[i] && cfg->origins[i] ? cfg : NULL, "config values");
    }
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
    for (size_t i = 0; i < llmrt_config_schema_len; i++) {
        if (cfg->values)
            free(cfg->values[i]);
        if (cfg->origins)
            free(cfg->origins[i]);
    }
    free(cfg->values);
    free(cfg->origins);
    for (size_t i = 0; i < cfg->n_sections; i++) {
        plugin_section *s = &cfg->sections[i];
        for (size_t j = 0; j < s->n; j++)
            free(s->keys[j]), free(s->values[j]), free(s->where[j]);
        free(s->keys), free(s->values), free(s->where), free(s->name);
    }
    free(cfg->sections);
    free(cfg->path);
    free(cfg);
}

/* inih reading state: counts lines so the handler knows where it is. */
typedef struct ini_ctx {
    llmrt_config *cfg;
    FILE *f;
    const char *path;
    char *dir;
    int line;
    int err_line; /* line of the first error the handler found */
    llmrt_status st;
    llmrt_error *err;
} ini_ctx;

static char *ini_read_line(char *str, int num, void *stream)
{
    ini_ctx *c = stream;
    char *r = fgets(str, num, c->f);
    if (r)
        c->line++;
    return r;
}

static int ini_on_value(void *user, const char *section, const char *name, const char *value)
{
    ini_ctx *c = user;
    if (c->st != LLMRT_OK)
        return 1; /* keep only the first error */
    char where[1200];
    snprintf(where, sizeof where, "%s:%d", c->path, c->line);
    if (!name) /* section header alone (INI_CALL_HANDLER_ON_NEW_SECTION builds) */
        return 1;
    if (!section[0])
        c->st = llmrt_fail(c->err, LLMRT_ERR_INVALID_ARG,
                           "%s: key '%s' is outside any [section]", where, name);
    else
        c->st = set_value(c->cfg, section, name, value ? value : "", where, c->dir, c->err);
    if (c->st != LLMRT_OK)
        c->err_line = c->line;
    return 1;
}

llmrt_status llmrt_config_load_file(llmrt_config *cfg, const char *path, llmrt_error *err)
{
    ini_ctx c = {.cfg = cfg, .path = path, .err = err, .st = LLMRT_OK};
    c.f = fopen(path, "r");
    if (!c.f)
        return llmrt_fail(err, LLMRT_ERR_IO, "cannot open config file %s: %s", path,
                          strerror(errno));
    c.dir = xstrdup(path);
    if (!c.dir) {
        fclose(c.f);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    }
    char *slash = strrchr(c.dir, '/');
    if (slash)
        *slash = 0;
    else
        strcpy(c.dir, ".");
    int bad_line = ini_parse_stream(ini_read_line, &c, ini_on_value, &c);
    fclose(c.f);
    free(c.dir);
    if (c.st != LLMRT_OK && !(bad_line > 0 && bad_line < c.err_line))
        return c.st; /* the earlier of a value error and a syntax error is reported */
    if (bad_line > 0)
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "%s:%d: syntax error (expected '[section]', 'key = value' or a "
                          "comment starting with ; or #)",
                          path, bad_line);
    if (bad_line < 0)
        return llmrt_fail(err, LLMRT_ERR_IO, "cannot read config file %s", path);
    free(cfg->path);
    cfg->path = xstrdup(path);
    return LLMRT_OK;
}

llmrt_status llmrt_config_apply_env(llmrt_config *cfg, llmrt_error *err)
{
    for (size_t i = 0; i < llmrt_config_schema_len; i++) {
        const llmrt_cfg_key *k = &llmrt_config_schema[i];
        char name[128];
        int n = snprintf(name, sizeof name, "LLMRT_%s_%s", k->section, k->key);
        for (int j = 0; j < n; j++)
            name[j] = (char)toupper((unsigned char)name[j]);
        const char *v = getenv(name);
        if (v) {
            char where[160];
            snprintf(where, sizeof where, "env %s", name);
            llmrt_status st = set_value(cfg, k->section, k->key, v, where, NULL, err);
            if (st)
                return st;
        }
    }
    const char *mem = getenv("LLMRT_MEMORY");
    if (mem)
        return set_value(cfg, "memory", "plugin", mem, "env LLMRT_MEMORY", NULL, err);
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
    return set_value(cfg, section, key, eq + 1, origin, NULL, err);
}

llmrt_status llmrt_config_build(const char *path, const char *const *sets, int n_sets,
                                llmrt_config **out, llmrt_error *err)
{
    llmrt_status st;
    llmrt_config *cfg = NULL;
    TRY(llmrt_config_new(&cfg, err));
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

static int split_key(const char *full, char *section, size_t ns, const char **key)
{
    const char *dot = strrchr(full, '.');
    if (!dot || (size_t)(dot - full) >= ns)
        return 0;
    memcpy(section, full, (size_t)(dot - full));
    section[dot - full] = 0;
    *key = dot + 1;
    return 1;
}

/* Find "section.key": its value and origin (schema keys and plugin-section keys). */
static int lookup(const llmrt_config *cfg, const char *full, const char **value,
                  const char **origin)
{
    char section[256];
    const char *key;
    if (!split_key(full, section, sizeof section, &key))
        return 0;
    int idx = schema_index(section, key);
    if (idx >= 0) {
        *value = cfg->values[idx];
        *origin = cfg->origins[idx];
        return 1;
    }
    plugin_section *s = find_section(cfg, section);
    for (size_t i = 0; s && i < s->n; i++)
        if (strcmp(s->keys[i], key) == 0) {
            *value = s->values[i];
            *origin = s->where[i];
            return 1;
        }
    return 0;
}

const char *llmrt_config_get(const llmrt_config *cfg, const char *full)
{
    const char *value, *origin;
    return lookup(cfg, full, &value, &origin) ? value : NULL;
}

const char *llmrt_config_origin(const llmrt_config *cfg, const char *full)
{
    const char *value, *origin;
    return lookup(cfg, full, &value, &origin) ? origin : NULL;
}

int64_t llmrt_config_int(const llmrt_config *cfg, const char *key)
{
    const char *v = llmrt_config_get(cfg, key);
    return v ? strtoll(v, NULL, 10) : 0;
}

double llmrt_config_float(const llmrt_config *cfg, const char *key)
{
    const char *v = llmrt_config_get(cfg, key);
    return v ? strtod(v, NULL) : 0.0;
}

int llmrt_config_bool(const llmrt_config *cfg, const char *key)
{
    const char *v = llmrt_config_get(cfg, key);
    int b = 0;
    return v && parse_bool(v, &b) ? b : 0;
}

const char *llmrt_config_path(const llmrt_config *cfg) { return cfg->path; }

static const llmrt_section *section_view(plugin_section *s)
{
    s->view.name = s->name;
    s->view.n = s->n;
    s->view.keys = (const char *const *)s->keys;
    s->view.values = (const char *const *)s->values;
    s->view.where = (const char *const *)s->where;
    return &s->view;
}

const llmrt_section *llmrt_config_plugin_section(const llmrt_config *cfg, const char *name)
{
    plugin_section *s = find_section(cfg, name);
    if (s)
        return section_view(s);
    llmrt_config *mut = (llmrt_config *)cfg;
    mut->empty.name = NULL;
    mut->empty.n = 0;
    return &mut->empty;
}

size_t llmrt_config_plugin_section_count(const llmrt_config *cfg) { return cfg->n_sections; }

const llmrt_section *llmrt_config_plugin_section_at(const llmrt_config *cfg, size_t i)
{
    return i < cfg->n_sections ? section_view(&cfg->sections[i]) : NULL;
}

void llmrt_config_show(const llmrt_config *cfg, FILE *out)
{
    const char *last = "";
    for (size_t i = 0; i < llmrt_config_schema_len; i++) {
        const llmrt_cfg_key *k = &llmrt_config_schema[i];
        if (strcmp(k->section, last) != 0) {
            fprintf(out, "%s[%s]\n", i ? "\n" : "", k->section);
            last = k->section;
        }
        char kv[512];
        snprintf(kv, sizeof kv, "%s = %s", k->key, cfg->values[i]);
        fprintf(out, "%-44s ; %s\n", kv, cfg->origins[i]);
    }
    for (size_t i = 0; i < cfg->n_sections; i++) {
        plugin_section *s = &cfg->sections[i];
        fprintf(out, "\n[%s]    ; plugin section, validated by the plugin\n", s->name);
        for (size_t j = 0; j < s->n; j++) {
            char kv[512];
            snprintf(kv, sizeof kv, "%s = %s", s->keys[j], s->values[j]);
            fprintf(out, "%-44s ; %s\n", kv, s->where[j]);
        }
    }
}

/* Wrap help text at ~90 columns as "; " comment lines. */
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

void llmrt_config_write_template(FILE *out)
{
    fprintf(out, "; runtime.ini — llmrt configuration. Every key, at its default.\n"
                 "; Written by `llmrt config --template` from the schema in "
                 "core/config_schema.c; keep them equal.\n"
                 "; Overrides: LLMRT_<SECTION>_<KEY>=value in the environment, then "
                 "--set section.key=value.\n"
                 "; Plugin sections such as [backend.cpu] or [memory.pinned] hold that "
                 "plugin's own keys.\n");
    const char *last = "";
    for (size_t i = 0; i < llmrt_config_schema_len; i++) {
        const llmrt_cfg_key *k = &llmrt_config_schema[i];
        if (strcmp(k->section, last) != 0) {
            fprintf(out, "\n[%s]\n", k->section);
            last = k->section;
        }
        write_comment(out, k->help);
        if (k->allowed)
            fprintf(out, "; allowed: %s\n", k->allowed);
        fprintf(out, "%s = %s\n", k->key, k->def);
    }
    fprintf(out, "\n[backend.cpu]\n"
                 "; Worker threads for the CPU backend (0: one per core).\n"
                 "threads = 0\n"
                 "; Kernel path: exact and baseline give the reference f32 bits; avx2, avx512\n"
                 "; and amx are the fast paths (AMX prefill with bf16 activations, AWQ with\n"
                 "; int8 ones), within documented bounds of exact; auto = the fastest here.\n"
                 "; allowed: auto|amx|avx512|avx2|exact|baseline\n"
                 "simd = auto\n"
                 "\n; The CUDA backend's keys (uncomment where it is built; a section for a plugin\n"
                 "; that is not installed is ignored with a warning):\n"
                 "; [backend.cuda]\n"
                 "; CUDA device index.\n"
                 "; device = 0\n"
                 "; Programmatic dependent launch (overlaps each kernel's start with the previous\n"
                 "; one's end; Hopper). LLMRT_CUDA_PDL=0/1 overrides it. allowed: auto|on|off\n"
                 "; pdl = auto\n"
                 "\n[memory.pinned]\n"
                 "; Two host buffers per step buffer, so the host fills step N+1 while N runs.\n"
                 "double_buffer = true\n"
                 "\n[memory.uva]\n"
                 "double_buffer = true\n"
                 "\n[model.qwen3]\n"
                 "; Load q/k/v and gate/up as one linear each and use the fused small ops when the\n"
                 "; backend has them (off: separate ones, for A/B).\n"
                 "; allowed: auto|off\n"
                 "fuse = auto\n"
                 "; Greedy steps of up to 8 sequences find their argmax through the backend's\n"
                 "; argmax_head (CUDA: an int8 copy of lm_head screens, the candidates are\n"
                 "; recomputed exactly: the same ids; vocab x hidden bytes more device memory).\n"
                 "; off: lm_head + argmax always. allowed: auto|off\n"
                 "greedy_head = auto\n");
}
