/* runtime.h — what every subcommand starts with: the effective config, the host services
 * handed to plugins, and the registry of discovered plugins; plus opening the configured
 * backend and memory plugin instances.
 *
 * Why: one place decides how a config becomes live plugin instances, so generate, bench,
 * serve and doctor all pick the same backend and memory path the same way. */
#ifndef LLMRT_CORE_RUNTIME_H
#define LLMRT_CORE_RUNTIME_H

#include <llmrt/backend.h>
#include <llmrt/engine.h>
#include <llmrt/memory.h>

#include "config.h"
#include "registry.h"

typedef struct llmrt_runtime {
    llmrt_config *cfg;
    llmrt_host host;
    llmrt_registry *reg;
} llmrt_runtime;

/* llmrt_runtime_open / llmrt_runtime_close are public (llmrt/engine.h). Open builds the
 * config (file may be NULL), sets the log level, scans the plugin search path, then declares
 * every installed plugin's section to the config (its key table validates the section,
 * applies LLMRT_<KIND>_<NAME>_<KEY>, fills in defaults: an error here fails the open), and
 * warns about LLMRT_* variables that match no key and sections of plugins that are not
 * installed. */
/* Same, over a config the caller built (ownership passes to the runtime). */
llmrt_status llmrt_runtime_open_config(llmrt_config *cfg, llmrt_runtime **out, llmrt_error *err);

/* Resolve runtime.backend (auto: cuda when its probe sees a device, else cpu) and create it. */
llmrt_status llmrt_runtime_backend_open(llmrt_runtime *rt, llmrt_backend_ref *out,
                                        llmrt_error *err);
void llmrt_runtime_backend_close(llmrt_backend_ref *b);

typedef struct llmrt_memory_ref {
    const llmrt_memory_vtable *vt;
    llmrt_memory *m;
    const char *name; /* requested plugin name */
} llmrt_memory_ref;

/* Create memory.plugin on the given backend. */
llmrt_status llmrt_runtime_memory_open(llmrt_runtime *rt, const llmrt_backend_ref *b,
                                       llmrt_memory_ref *out, llmrt_error *err);
void llmrt_runtime_memory_close(llmrt_memory_ref *m);

#endif
