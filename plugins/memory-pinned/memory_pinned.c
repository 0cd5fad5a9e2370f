/* memory_pinned.c — the "pinned" host-memory strategy plugin.
 * Page-locked host memory: truly async copies, double-buffered so the host prepares step N+1 while step N runs; copies captured in the decode graph.
 * The policy is the table below; the machinery is shared (../memory-common). */
#include <llmrt/memory.h>

#include "memory_common.h"

static const memc_policy policy = {
    .name = "pinned",
    .host_flags = LLMRT_HOST_PINNED,
    .double_buffer = 1,
    .zero_copy = 0,
    .copies_capturable = 1,
};

static llmrt_status create(const llmrt_host *host, const llmrt_section *cfg,
                           const llmrt_backend_ref *backend, llmrt_memory **out, llmrt_error *err)
{
    return memc_create(&policy, host, cfg, backend, out, err);
}

static const llmrt_memory_vtable vtable = MEMC_VTABLE(create);

static const llmrt_plugin_desc desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_MEMORY,
    .name = "pinned",
    .version = "1.0.0",
    .description = "Page-locked host memory: truly async copies, double-buffered so the host prepares step N+1 while step N runs; copies captured in the decode graph.",
    .license = "MIT",
    .vtable = &vtable,
    .init = NULL,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &desc : NULL;
}
