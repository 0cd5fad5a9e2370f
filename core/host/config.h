/* config.h — runtime.ini: one key mechanism for core's sections and every plugin's.
 *
 * A key is an llmrt_key (include/llmrt/plugin.h) in a section: core's tables are
 * llmrt_config_schema (config_schema.c), a plugin's is its descriptor's `keys`, declared to
 * the config once the registry has been scanned (llmrt_config_declare). Validation, "did you
 * mean", environment overrides, provenance, masking of secrets, `llmrt config --show` and
 * `--template` are written once, here, for both.
 *
 * Precedence, lowest first: default < the system file (etc/llmrt/runtime.ini beside the
 * installation, /etc/llmrt/runtime.ini for /usr/bin/llmrt; LLMRT_SYSTEM_CONFIG overrides
 * its path, empty: none) < INI file (-c) < environment LLMRT_<SECTION>_<KEY>
 * (LLMRT_BACKEND_CPU_THREADS for [backend.cpu] threads; LLMRT_MEMORY is short for
 * memory.plugin) < --set section.key=value. The file and --set are read before the plugins
 * are known, so every value keeps the level it came from: a plugin's environment overrides,
 * applied when it is declared, never replace a --set.
 *
 * Plugin sections ([backend.cpu], [memory.pinned], ...) of plugins that are not declared
 * yet, or that declare no table (ABI 1.0), are kept as written and handed to that plugin,
 * which validates them itself. */
#ifndef LLMRT_CORE_CONFIG_H
#define LLMRT_CORE_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include <llmrt/plugin.h>

/* One of core's sections: its name and its keys. */
typedef struct llmrt_cfg_section {
    const char *name; /* "cache" */
    const llmrt_key *keys;
    uint32_t n_keys;
} llmrt_cfg_section;

extern const llmrt_cfg_section llmrt_config_schema[];
extern const size_t llmrt_config_schema_len;

/* The largest config file read (a config is a few KiB; this bounds a mistaken -c). */
#define LLMRT_CONFIG_MAX_BYTES (1u << 20)
/* The most keys one plugin may declare. */
#define LLMRT_CONFIG_MAX_PLUGIN_KEYS 256

typedef struct llmrt_config llmrt_config;

/* A config holding core's defaults. */
llmrt_status llmrt_config_new(llmrt_config **out, llmrt_error *err);
void llmrt_config_free(llmrt_config *cfg);
/* Parse an INI file (a regular file of at most LLMRT_CONFIG_MAX_BYTES) over the current
 * values. Errors name file:line: unknown or duplicate sections (at their header), unknown or
 * duplicate keys, bad values, lines longer than the INI reader takes, indented lines. */
llmrt_status llmrt_config_load_file(llmrt_config *cfg, const char *path, llmrt_error *err);
/* The same at the system file's level (below a -c file, whatever the order they are read
 * in). */
llmrt_status llmrt_config_load_system_file(llmrt_config *cfg, const char *path,
                                           llmrt_error *err);
/* The system file's path into buf[n]: LLMRT_SYSTEM_CONFIG when set (NULL when it is empty),
 * else etc/llmrt/runtime.ini of the installation the running executable belongs to
 * (<exe>/../etc/..., with <prefix>/usr/bin/llmrt reading <prefix>/etc/...: /usr/bin/llmrt
 * reads /etc/llmrt/runtime.ini). The file need not exist. */
const char *llmrt_config_system_path(char *buf, size_t n);
/* Apply LLMRT_<SECTION>_<KEY> of every declared key and LLMRT_MEMORY from the environment. */
llmrt_status llmrt_config_apply_env(llmrt_config *cfg, llmrt_error *err);
/* Apply one "section.key=value" (plugin sections: "memory.pinned.key=value") at --set level;
 * origin names it in messages ("--set"). */
llmrt_status llmrt_config_set(llmrt_config *cfg, const char *assignment, const char *origin,
                              llmrt_error *err);
/* defaults + the system file (when it exists) + file (when path != NULL) + environment +
 * sets. */
llmrt_status llmrt_config_build(const char *path, const char *const *sets, int n_sets,
                                llmrt_config **out, llmrt_error *err);

/* Declare a plugin's section ("backend.cpu") and its key table: what the file and --set gave
 * it is validated against the table (errors as for core keys), LLMRT_<KIND>_<NAME>_<KEY> is
 * applied from the environment, and every key absent gets its default, so the section then
 * holds every declared key. keys == NULL: the plugin has no table (ABI 1.0) and validates
 * its section itself. `about` (may be NULL) describes the plugin in --show and --template.
 * The table must outlive the config and have passed llmrt_key_table_check. */
llmrt_status llmrt_config_declare(llmrt_config *cfg, const char *section, const llmrt_key *keys,
                                  uint32_t n_keys, const char *about, llmrt_error *err);
/* Log a warning for every LLMRT_* environment variable that is no declared key's (nor one of
 * the variables llmrt reads otherwise), with the nearest key's variable when one is close. */
void llmrt_config_warn_env(const llmrt_config *cfg);

/* Effective value of "section.key"; NULL if unknown. Secret keys give their real value:
 * never print it, use llmrt_config_shown. */
const char *llmrt_config_get(const llmrt_config *cfg, const char *key);
/* The value as it may be printed: "(set)" or "(unset)" for a secret key, else the value. */
const char *llmrt_config_shown(const llmrt_config *cfg, const char *key);
/* Where it came from: "default", "conf/runtime.ini:12", "env LLMRT_X", "--set". */
const char *llmrt_config_origin(const llmrt_config *cfg, const char *key);
/* The declaration of "section.key"; NULL when it is not declared (a key of a plugin section
 * without a table). */
const llmrt_key *llmrt_config_decl(const llmrt_config *cfg, const char *key);
/* 1 when the effective value of a declared key equals its default (compared as its type). */
int llmrt_config_is_default(const llmrt_config *cfg, const char *key);
/* Typed getters for declared keys. The value was validated against the key's range when it
 * was set; a key that is not of that type (a bug) logs an error and gives 0. */
int64_t llmrt_config_int(const llmrt_config *cfg, const char *key);
double llmrt_config_float(const llmrt_config *cfg, const char *key);
int llmrt_config_bool(const llmrt_config *cfg, const char *key);
/* The file the config was loaded from (-c), or NULL. */
const char *llmrt_config_path(const llmrt_config *cfg);
/* The system file that was read, or NULL. */
const char *llmrt_config_system_file(const llmrt_config *cfg);

/* A plugin's section ("memory.pinned"); never NULL (empty when absent). */
const llmrt_section *llmrt_config_plugin_section(const llmrt_config *cfg, const char *name);
/* Number of plugin sections and the i-th (declared ones and those the file or --set named). */
size_t llmrt_config_plugin_section_count(const llmrt_config *cfg);
const llmrt_section *llmrt_config_plugin_section_at(const llmrt_config *cfg, size_t i);
/* 1 when a plugin declared the section (with or without a table). */
int llmrt_config_section_declared(const llmrt_config *cfg, const char *name);
/* Where a section was first named: its [header]'s file:line, else its first key's origin;
 * NULL when nothing named it. */
const char *llmrt_config_section_origin(const llmrt_config *cfg, const char *name);

/* Every key of the config in order (core's sections, then plugin sections), for reports. */
typedef struct llmrt_config_entry {
    const char *section;   /* "cache", "backend.cpu" */
    const char *key;       /* "block_size" */
    const char *value;     /* the effective value (a secret's too: print `shown`) */
    const char *shown;     /* what may be printed (llmrt_config_shown) */
    const char *origin;    /* as llmrt_config_origin */
    const llmrt_key *decl; /* NULL: a key of a plugin section without a table */
} llmrt_config_entry;
size_t llmrt_config_entry_count(const llmrt_config *cfg);
/* Fills *out and returns 1 for i < count, else 0. */
int llmrt_config_entry_at(const llmrt_config *cfg, size_t i, llmrt_config_entry *out);

/* Print every effective value and where it came from (secrets as set/unset). */
void llmrt_config_show(const llmrt_config *cfg, FILE *out);
/* Print a fully commented runtime.ini with every declared key at its default: core's
 * sections, then one section per declared plugin table (developer keys commented out). */
void llmrt_config_write_template(const llmrt_config *cfg, FILE *out);

/* Check a key table (a plugin's, or core's): names valid (1-64 of a-z, 0-9, _ and -,
 * starting with a letter) and unique (also as environment names), types and flags known,
 * `allowed` well formed for the type, help set, the default valid. err says which key and
 * what is wrong. */
llmrt_status llmrt_key_table_check(const char *section, const llmrt_key *keys, uint32_t n,
                                   llmrt_error *err);
/* Check one value against key k of `section`; err names `where` ("t.ini:3", "--set"). */
llmrt_status llmrt_key_check_value(const char *section, const llmrt_key *k, const char *value,
                                   const char *where, llmrt_error *err);

/* Levenshtein distance (case-insensitive), for "did you mean" suggestions; 99 for strings
 * longer than 128 characters. */
int llmrt_edit_distance(const char *a, const char *b);

#endif
