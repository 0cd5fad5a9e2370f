/* memory_common.h — the policy machinery shared by the pageable, pinned and uva memory
 * plugins. Each plugin is its own .so (so it can be swapped in runtime.ini) but the three
 * differ only in a small policy: which host memory to ask the backend for, whether to
 * double-buffer, and whether kernels read the host memory directly (zero-copy). Pinning
 * can fail; then the buffer falls back to the pageable policy (memory.fallback = pageable)
 * or allocation fails (memory.fallback = error). Compiled into each memory plugin. */
#ifndef LLMRT_MEMORY_COMMON_H
#define LLMRT_MEMORY_COMMON_H

#include <llmrt/memory.h>

typedef struct memc_policy {
    const char *name;       /* plugin name: "pinned" */
    uint32_t host_flags;    /* backend host_alloc flags: 0, PINNED, PINNED|MAPPED */
    int double_buffer;      /* two host halves, so the host fills step N+1 while N runs */
    int zero_copy;          /* kernels use the mapped device address of the host memory */
    int copies_capturable;  /* copies from this memory may be captured in a graph */
    int gather_inputs;      /* with zero_copy: step inputs are read once per step into a
                               device mirror (LLMRT_MEM_CAP_INPUTS_GATHERED) instead of in
                               place by every kernel; not where device memory is host memory */
} memc_policy;

/* The keys of a memory plugin's section: double_buffer and delay_us (memc_double_buffer_keys,
 * for the policies that double-buffer) or delay_us alone (memc_plain_keys). The host
 * validates them and fills in the defaults.
 *   delay_us (developer): host time added to every to_device call of a step-input buffer —
 *   one per step (on a backend whose copies run inside a replayed graph, only while
 *   capturing). A planted, known slowdown for testing A/B verdicts (tests/integration/
 *   test_bench_ab.sh): a developer key, so configs that differ in it are a fair A/B. */
#define MEMC_N_DOUBLE_BUFFER_KEYS 2
#define MEMC_N_PLAIN_KEYS 1
extern const llmrt_key memc_double_buffer_keys[MEMC_N_DOUBLE_BUFFER_KEYS];
extern const llmrt_key memc_plain_keys[MEMC_N_PLAIN_KEYS];

/* Create an instance following `policy`; reads double_buffer (when the policy
 * double-buffers) and delay_us from the section (absent: the defaults) and memory.fallback
 * from the host. */
llmrt_status memc_create(const memc_policy *policy, const llmrt_host *host,
                         const llmrt_section *cfg, const llmrt_backend_ref *backend,
                         llmrt_memory **out, llmrt_error *err);
void memc_destroy(llmrt_memory *m);
llmrt_status memc_buffer_alloc(llmrt_memory *m, size_t bytes, llmrt_mem_dir dir,
                               llmrt_mem_buffer *out, llmrt_error *err);
void memc_buffer_free(llmrt_memory *m, llmrt_mem_buffer *buf);
llmrt_status memc_to_device(llmrt_memory *m, llmrt_mem_buffer *buf, int half, size_t bytes,
                            llmrt_error *err);
llmrt_status memc_to_host(llmrt_memory *m, llmrt_mem_buffer *buf, int half, size_t bytes,
                          llmrt_error *err);
uint32_t memc_caps(llmrt_memory *m);
/* CPU weight offload (memory.h offload_*): host memory of the policy's kind for each layer
 * (page-locked; page-locked and mapped; malloc), falling back as the step buffers do. */
llmrt_status memc_offload_init(llmrt_memory *m, int32_t n_layers, size_t layer_bytes,
                               llmrt_error *err);
llmrt_status memc_offload_place(llmrt_memory *m, int32_t k, size_t off, const void *dev,
                                size_t bytes, void **kernel_ptr, llmrt_error *err);
llmrt_status memc_offload_fetch(llmrt_memory *m, int32_t k, llmrt_error *err);
void memc_stats(llmrt_memory *m, llmrt_mem_stats *out);

/* The vtable every memory plugin exports (all members are the memc_* functions above, with
 * create bound to the plugin's policy by the plugin's own create). */
#define MEMC_VTABLE(create_fn)                                                               \
    {                                                                                        \
        .struct_size = sizeof(llmrt_memory_vtable), .create = (create_fn),                   \
        .destroy = memc_destroy, .buffer_alloc = memc_buffer_alloc,                          \
        .buffer_free = memc_buffer_free, .to_device = memc_to_device,                        \
        .to_host = memc_to_host, .caps = memc_caps, .stats = memc_stats,                     \
        .offload_init = memc_offload_init, .offload_place = memc_offload_place,              \
        .offload_fetch = memc_offload_fetch,                                                 \
    }

/* Everything a memory plugin .so defines, from its policy and key table: the create
 * function bound to it, the vtable, the descriptor and the one exported symbol. */
#define MEMC_PLUGIN(policy_var, desc_text, keys_, n_keys_)                                   \
    static llmrt_status memc_plugin_create(const llmrt_host *host, const llmrt_section *cfg,   \
                                           const llmrt_backend_ref *backend,                  \
                                           llmrt_memory **out, llmrt_error *err)              \
    {                                                                                         \
        return memc_create(&(policy_var), host, cfg, backend, out, err);                      \
    }                                                                                         \
    static const llmrt_memory_vtable memc_plugin_vtable = MEMC_VTABLE(memc_plugin_create);   \
    static const llmrt_plugin_desc memc_plugin_desc = {                                       \
        .struct_size = sizeof(llmrt_plugin_desc),                                             \
        .abi_version = LLMRT_ABI_VERSION,                                                     \
        .kind = LLMRT_PLUGIN_MEMORY,                                                          \
        .name = (policy_var).name,                                                            \
        .version = "1.0.0",                                                                   \
        .description = (desc_text),                                                           \
        .license = "MIT",                                                                     \
        .vtable = &memc_plugin_vtable,                                                        \
        .init = NULL,                                                                         \
        .keys = (keys_),                                                                      \
        .n_keys = (n_keys_),                                                                  \
    };                                                                                        \
    LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)                    \
    {                                                                                         \
        return index == 0 ? &memc_plugin_desc : NULL;                                         \
    }

#endif
