/* broken_plugin.c — one source, built many times with a different BREAK_* define, giving
 * the deliberately broken plugins the loader tests need. Each must be rejected with its
 * own specific message; GOOD builds a valid memory plugin that must still load beside them. */
#include <llmrt/memory.h>
#include <stdlib.h>

#ifdef BREAK_UNRESOLVED
/* Never defined anywhere: dlopen(RTLD_NOW) must fail with dlerror's "undefined symbol". */
extern int llmrt_test_symbol_that_does_not_exist(void);
LLMRT_EXPORT int force_reference(void) { return llmrt_test_symbol_that_does_not_exist(); }
#endif

static llmrt_status m_create(const llmrt_host *h, const llmrt_section *c,
                             const llmrt_backend_ref *b, llmrt_memory **out, llmrt_error *err)
{
    return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED, "test plugin: not for real use");
}
static void m_destroy(llmrt_memory *m) {}
static llmrt_status m_alloc(llmrt_memory *m, size_t n, llmrt_mem_dir d, llmrt_mem_buffer *o,
                            llmrt_error *err)
{
    return LLMRT_ERR_UNSUPPORTED;
}
static void m_free(llmrt_memory *m, llmrt_mem_buffer *b) {}
static llmrt_status m_copy(llmrt_memory *m, llmrt_mem_buffer *b, int h, size_t n, llmrt_error *e)
{
    return LLMRT_OK;
}
static uint32_t m_caps(llmrt_memory *m) { return 0; }
static void m_stats(llmrt_memory *m, llmrt_mem_stats *s) {}

__attribute__((used)) static const llmrt_memory_vtable vtable = {
    .struct_size = sizeof(llmrt_memory_vtable),
    .create = m_create,
    .destroy = m_destroy,
    .buffer_alloc = m_alloc,
    .buffer_free = m_free,
#ifndef BREAK_NULL_MEMBER
    .to_device = m_copy,
#endif
    .to_host = m_copy,
    .caps = m_caps,
    .stats = m_stats,
};

#ifdef BREAK_INIT
static llmrt_status failing_init(const llmrt_host *host, llmrt_error *err)
{
    return llmrt_fail(err, LLMRT_ERR_DEVICE, "simulated init failure: no widget attached");
}
#endif

#ifndef PLUGIN_NAME
#define PLUGIN_NAME "broken"
#endif

__attribute__((used)) static const llmrt_plugin_desc desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
#if defined(BREAK_ABI_MAJOR)
    .abi_version = (2u << 16) | 0u,
#elif defined(BREAK_ABI_MINOR)
    .abi_version = (1u << 16) | 99u,
#else
    .abi_version = LLMRT_ABI_VERSION,
#endif
#ifdef BREAK_KIND
    .kind = (llmrt_plugin_kind)9,
#else
    .kind = LLMRT_PLUGIN_MEMORY,
#endif
    .name = PLUGIN_NAME,
    .version = "0.0.1",
    .description = "a deliberately broken plugin for loader tests",
    .license = "MIT",
#ifdef BREAK_NULL_VTABLE
    .vtable = NULL,
#else
    .vtable = &vtable,
#endif
#ifdef BREAK_INIT
    .init = failing_init,
#endif
};

#ifndef BREAK_NO_SYMBOL
LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
#ifdef BREAK_NULL_DESC
    return NULL;
#else
    return index == 0 ? &desc : NULL;
#endif
}
#else
LLMRT_EXPORT const llmrt_plugin_desc *some_other_symbol(uint32_t index) { return &desc; }
#endif
