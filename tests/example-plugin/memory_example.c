/* memory_example.c — a complete third-party memory plugin in one file, built against the
 * installed SDK only. Policy: plain pageable host memory with a device-side copy, single
 * buffered, copies outside graphs; it counts its copies. A template for your own plugin. */
#include <stdlib.h>
#include <string.h>

#include <llmrt/memory.h>

struct llmrt_memory {
    llmrt_backend_ref be;
    llmrt_mem_stats st;
};

static llmrt_status ex_create(const llmrt_host *host, const llmrt_section *cfg,
                              const llmrt_backend_ref *backend, llmrt_memory **out,
                              llmrt_error *err)
{
    if (cfg && cfg->n) /* this plugin has no keys: reject any, saying where it came from */
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "%s: unknown key '%s' in [memory.example]",
                          cfg->where[0], cfg->keys[0]);
    llmrt_memory *m = calloc(1, sizeof *m);
    if (!m)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory");
    m->be = *backend;
    strcpy(m->st.path_in_use, "example");
    *out = m;
    return LLMRT_OK;
}

static void ex_destroy(llmrt_memory *m) { free(m); }

static llmrt_status ex_alloc(llmrt_memory *m, size_t bytes, llmrt_mem_dir dir,
                             llmrt_mem_buffer *out, llmrt_error *err)
{
    memset(out, 0, sizeof *out);
    llmrt_status st = m->be.vt->host_alloc(m->be.b, bytes, 0, &out->host[0], err);
    if (st)
        return st;
    st = m->be.vt->dev_alloc(m->be.b, bytes, &out->device[0], err);
    if (st) {
        m->be.vt->host_free(m->be.b, out->host[0]);
        return st;
    }
    out->host[1] = out->host[0];
    out->device[1] = out->device[0];
    out->bytes = bytes;
    out->dir = dir;
    out->path = LLMRT_MEM_PATH_PAGEABLE;
    m->st.host_pageable_bytes += bytes;
    m->st.device_bytes += bytes;
    return LLMRT_OK;
}

static void ex_free(llmrt_memory *m, llmrt_mem_buffer *b)
{
    m->be.vt->dev_free(m->be.b, b->device[0]);
    m->be.vt->host_free(m->be.b, b->host[0]);
    m->st.host_pageable_bytes -= b->bytes;
    m->st.device_bytes -= b->bytes;
    memset(b, 0, sizeof *b);
}

static llmrt_status ex_to_device(llmrt_memory *m, llmrt_mem_buffer *b, int half, size_t bytes,
                                 llmrt_error *err)
{
    m->st.h2d_copies++;
    m->st.h2d_bytes += bytes;
    return m->be.vt->copy(m->be.b, b->device[half], b->host[half], bytes, LLMRT_COPY_H2D, err);
}

static llmrt_status ex_to_host(llmrt_memory *m, llmrt_mem_buffer *b, int half, size_t bytes,
                               llmrt_error *err)
{
    m->st.d2h_copies++;
    m->st.d2h_bytes += bytes;
    return m->be.vt->copy(m->be.b, b->host[half], b->device[half], bytes, LLMRT_COPY_D2H, err);
}

static uint32_t ex_caps(llmrt_memory *m) { return 0; }
static void ex_stats(llmrt_memory *m, llmrt_mem_stats *out) { *out = m->st; }

static const llmrt_memory_vtable vtable = {
    .struct_size = sizeof(llmrt_memory_vtable),
    .create = ex_create, .destroy = ex_destroy, .buffer_alloc = ex_alloc, .buffer_free = ex_free,
    .to_device = ex_to_device, .to_host = ex_to_host, .caps = ex_caps, .stats = ex_stats,
};

static const llmrt_plugin_desc desc = {
    .struct_size = sizeof(llmrt_plugin_desc),
    .abi_version = LLMRT_ABI_VERSION,
    .kind = LLMRT_PLUGIN_MEMORY,
    .name = "example",
    .version = "0.1.0",
    .description = "Example third-party memory plugin (pageable, counts copies)",
    .license = "MIT",
    .vtable = &vtable,
};

LLMRT_EXPORT const llmrt_plugin_desc *llmrt_plugin_get(uint32_t index)
{
    return index == 0 ? &desc : NULL;
}
