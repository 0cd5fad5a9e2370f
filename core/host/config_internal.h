/* config_internal.h — what the config's files share (config.c: the store, overrides,
 * lookups, show and template; config_key.c: keys and values; config_ini.c: reading a file):
 * its sections and entries, and the setter the INI reader calls. Internal to libllmrt. */
#ifndef LLMRT_CORE_CONFIG_INTERNAL_H
#define LLMRT_CORE_CONFIG_INTERNAL_H

#include "config.h"

/* Where a value came from, lowest first: a value only replaces one of the same or a lower
 * level, so the order in which sources are read does not matter (plugin keys' environment
 * is read after --set). */
enum { LVL_DEFAULT = 0, LVL_SYSTEM = 1, LVL_FILE = 2, LVL_ENV = 3, LVL_SET = 4 };

typedef struct cfg_entry {
    char *key, *value, *origin;
    int level;
    const llmrt_key *decl; /* NULL in a section without a table */
} cfg_entry;

typedef struct cfg_section {
    char *name;
    int core;                   /* one of core's sections */
    int declared;               /* core, or a plugin declared it (with or without a table) */
    const llmrt_key *keys;      /* [n_keys] the table; NULL: none (yet) */
    uint32_t n_keys;
    char *about;                /* the plugin's description, or NULL */
    char *header;               /* where its [header] was ("t.ini:3"), or NULL */
    cfg_entry *e;               /* [n] */
    size_t n, cap;
    const char **vk, **vv, **vw; /* [n] the arrays of `view` */
    int dirty;                  /* entries changed since `view` was built */
    llmrt_section view;
} cfg_section;

struct llmrt_config {
    cfg_section **s; /* [n] core's sections first, then plugin sections as first named */
    size_t n, cap, n_core;
    char *path;
    char *dir; /* the loaded file's folder: relative PATH values resolve against it */
    char *sys_path, *sys_dir; /* the same for the system file (LVL_SYSTEM), when read */
    llmrt_section empty;
};

/* ---- config_key.c ---- */
int cfg_parse_bool(const char *v, int *out);
/* A whole decimal 64-bit integer: 1; not one: 0; one that does not fit: -1. */
int cfg_parse_i64(const char *v, int64_t *out);
int cfg_parse_f64(const char *v, double *out);
/* Equal as settings of key k ("16" and "+16", "0.8" and "0.80", "on" and "true"). */
int cfg_values_equal(const llmrt_key *k, const char *a, const char *b);

/* ---- config.c ---- */
char *cfg_strdup(const char *s);
/* "memory.pinned" → 1 (a plugin section's name), "memory" → 0. */
int cfg_is_plugin_section(const char *section);
cfg_section *cfg_find_section(const llmrt_config *cfg, const char *name);
cfg_section *cfg_add_section(llmrt_config *cfg, const char *name, llmrt_error *err);
/* The error for a section that is neither core's nor a plugin's, with "did you mean". */
llmrt_status cfg_unknown_section(const llmrt_config *cfg, const char *section,
                                 const char *where, llmrt_error *err);
/* Set section.key = value from `where` at `level` (LVL_*), validated when the section has a
 * table; `base_dir` resolves relative PATH values (NULL: keep as given). */
llmrt_status cfg_set_value(llmrt_config *cfg, const char *section, const char *key,
                           const char *value, const char *where, int level,
                           const char *base_dir, llmrt_error *err);

#endif
