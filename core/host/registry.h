/* registry.h — the plugin loader and registry: every plugin the host knows, keyed kind:name.
 *
 * Plugins come from .so files found on the search path (runtime.plugin_dir,
 * LLMRT_PLUGIN_PATH, <exe>/../lib/llmrt/plugins, the install folder) or are registered
 * built-in (tests with mock plugins). Each file is validated; a bad one is recorded with
 * the reason and skipped — it never crashes the host or hides the good ones. */
#ifndef LLMRT_CORE_REGISTRY_H
#define LLMRT_CORE_REGISTRY_H

#include <stddef.h>

#include <llmrt/plugin.h>

typedef struct llmrt_plugin_entry {
    const llmrt_plugin_desc *desc;
    const char *path; /* the .so, or "<builtin>" */
} llmrt_plugin_entry;

typedef struct llmrt_rejection {
    const char *path;
    const char *reason;
} llmrt_rejection;

typedef struct llmrt_registry llmrt_registry;

/* host: the services handed to plugin init(); must outlive the registry. */
llmrt_status llmrt_registry_new(const llmrt_host *host, llmrt_registry **out, llmrt_error *err);
void llmrt_registry_free(llmrt_registry *reg);

/* Validate and register a descriptor (built-in or from a .so at `path`). On failure err says
 * why (the caller decides whether that is fatal). */
llmrt_status llmrt_registry_add(llmrt_registry *reg, const llmrt_plugin_desc *desc,
                                const char *path, llmrt_error *err);
/* Load one .so file; failures are recorded as rejections and returned. */
llmrt_status llmrt_registry_load_file(llmrt_registry *reg, const char *path, llmrt_error *err);
/* Load every *.so in a folder, in name order (a missing folder is not an error). */
void llmrt_registry_scan_dir(llmrt_registry *reg, const char *dir);
/* The whole search path, in order; plugin_dir may be NULL or "". */
void llmrt_registry_scan_default(llmrt_registry *reg, const char *plugin_dir);
/* The folders scan_default searches, ':'-separated, for messages. */
const char *llmrt_registry_search_path(const llmrt_registry *reg);

const llmrt_plugin_entry *llmrt_registry_find(const llmrt_registry *reg, llmrt_plugin_kind kind,
                                              const char *name);
/* Entries sorted by kind, then name. */
size_t llmrt_registry_count(const llmrt_registry *reg);
const llmrt_plugin_entry *llmrt_registry_at(const llmrt_registry *reg, size_t i);
size_t llmrt_registry_rejected_count(const llmrt_registry *reg);
const llmrt_rejection *llmrt_registry_rejected_at(const llmrt_registry *reg, size_t i);
/* "pageable, pinned, uva" — the names of one kind, for error messages. */
void llmrt_registry_names(const llmrt_registry *reg, llmrt_plugin_kind kind, char *buf,
                          size_t n);

const char *llmrt_plugin_kind_name(llmrt_plugin_kind kind);

#endif
