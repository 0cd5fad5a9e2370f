/* config.h — runtime.ini: one schema table drives parsing, validation, `llmrt config --show`
 * and the comments of conf/runtime.ini.
 *
 * Precedence, lowest first: schema default < INI file < LLMRT_<SECTION>_<KEY> environment
 * (LLMRT_MEMORY is short for memory.plugin) < --set section.key=value. Plugin sections
 * ([backend.cpu], [memory.pinned], ...) are not in the schema: they are kept as given and
 * handed to that plugin, which validates its own keys. */
#ifndef LLMRT_CORE_CONFIG_H
#define LLMRT_CORE_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include <llmrt/plugin.h>

typedef enum llmrt_cfg_type {
    LLMRT_CFG_STRING,
    LLMRT_CFG_PATH, /* a file or folder; relative paths in a file resolve against its folder */
    LLMRT_CFG_INT,
    LLMRT_CFG_FLOAT,
    LLMRT_CFG_BOOL,
    LLMRT_CFG_ENUM
} llmrt_cfg_type;

typedef struct llmrt_cfg_key {
    const char *section;
    const char *key;
    llmrt_cfg_type type;
    const char *def;     /* default, as text */
    const char *allowed; /* ENUM: "a|b|c"; INT/FLOAT: "min..max"; else NULL */
    const char *help;    /* one or two sentences */
} llmrt_cfg_key;

extern const llmrt_cfg_key llmrt_config_schema[];
extern const size_t llmrt_config_schema_len;

typedef struct llmrt_config llmrt_config;

/* A config holding the schema defaults. */
llmrt_status llmrt_config_new(llmrt_config **out, llmrt_error *err);
void llmrt_config_free(llmrt_config *cfg);
/* Parse an INI file over the current values. Errors name file:line. */
llmrt_status llmrt_config_load_file(llmrt_config *cfg, const char *path, llmrt_error *err);
/* Apply LLMRT_<SECTION>_<KEY> and LLMRT_MEMORY from the environment. */
llmrt_status llmrt_config_apply_env(llmrt_config *cfg, llmrt_error *err);
/* Apply one "section.key=value" (plugin sections: "memory.pinned.key=value"). */
llmrt_status llmrt_config_set(llmrt_config *cfg, const char *assignment, const char *origin,
                              llmrt_error *err);
/* defaults + file (when path != NULL) + environment + sets, in that order. */
llmrt_status llmrt_config_build(const char *path, const char *const *sets, int n_sets,
                                llmrt_config **out, llmrt_error *err);

/* Effective value of "section.key" (schema keys and plugin-section keys); NULL if unknown. */
const char *llmrt_config_get(const llmrt_config *cfg, const char *key);
/* Where it came from: "default", "conf/runtime.ini:12", "env LLMRT_X", "--set". */
const char *llmrt_config_origin(const llmrt_config *cfg, const char *key);
/* Typed getters for schema keys (values were validated when set). */
int64_t llmrt_config_int(const llmrt_config *cfg, const char *key);
double llmrt_config_float(const llmrt_config *cfg, const char *key);
int llmrt_config_bool(const llmrt_config *cfg, const char *key);
/* The file the config was loaded from, or NULL. */
const char *llmrt_config_path(const llmrt_config *cfg);

/* A plugin's section ("memory.pinned"); never NULL (empty when absent). */
const llmrt_section *llmrt_config_plugin_section(const llmrt_config *cfg, const char *name);
/* Number of plugin sections and the i-th (for --show and validation of unknown plugins). */
size_t llmrt_config_plugin_section_count(const llmrt_config *cfg);
const llmrt_section *llmrt_config_plugin_section_at(const llmrt_config *cfg, size_t i);

/* Print every effective value and where it came from. */
void llmrt_config_show(const llmrt_config *cfg, FILE *out);
/* Print a fully commented runtime.ini with every key at its default (conf/runtime.ini). */
void llmrt_config_write_template(FILE *out);

/* Levenshtein distance, for "did you mean" suggestions. */
int llmrt_edit_distance(const char *a, const char *b);

#endif
