/* memory.h — host-memory strategy plugins (pageable, pinned, uva, ...).
 *
 * Why: the memory path between host and device (pageable copies, page-locked async copies,
 * or zero-copy mapped memory) changes decode latency and differs by platform, so it is a
 * plugin picked in runtime.ini. A memory plugin is *policy*: which host memory backs the
 * per-step buffers, whether and how data is copied, double buffering, fallback when pinning
 * fails, and accounting. The *mechanisms* (pinning, mapping, copies) are backend calls. */
#ifndef LLMRT_MEMORY_H
#define LLMRT_MEMORY_H

#include "backend.h"
#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llmrt_memory llmrt_memory; /* a memory-plugin instance, opaque */

/* Direction of a step buffer's data. */
typedef enum llmrt_mem_dir {
    LLMRT_MEM_TO_DEVICE = 1, /* host writes, device reads (token ids, positions, ...) */
    LLMRT_MEM_TO_HOST = 2    /* device writes, host reads (sampled ids, logprobs) */
} llmrt_mem_dir;

/* Which host memory actually backs a buffer (after any fallback). */
typedef enum llmrt_mem_path {
    LLMRT_MEM_PATH_PAGEABLE = 1,
    LLMRT_MEM_PATH_PINNED = 2,
    LLMRT_MEM_PATH_MAPPED = 3
} llmrt_mem_path;

/* Plugin capabilities after allocation (caps()). */
enum {
    LLMRT_MEM_CAP_ZERO_COPY = 1u << 0,         /* device reads/writes host memory; no copies */
    LLMRT_MEM_CAP_COPIES_CAPTURABLE = 1u << 1, /* to_device/to_host may be captured in a graph */
    LLMRT_MEM_CAP_DOUBLE_BUFFERED = 1u << 2,   /* host[0] and host[1] are distinct halves */
    /* (since 1.2) With ZERO_COPY: TO_DEVICE buffers are not read in place but gathered once
     * per step: device[] is a device mirror, and to_device enqueues the device's read of the
     * mapped memory into it (a kernel or copy, capturable), so the step's kernels read device
     * memory and never cross the bus layer after layer (vLLM's Model Runner V2). TO_HOST
     * buffers stay zero-copy: the device writes them in place. */
    LLMRT_MEM_CAP_INPUTS_GATHERED = 1u << 3
};

/* A per-step buffer, allocated once at a fixed address. The engine writes inputs into
 * host[h] for step parity h, calls to_device(h), and kernels read device[h]. With a single
 * buffer host[1] == host[0]; with a device-side copy device[0] == device[1]. */
typedef struct llmrt_mem_buffer {
    size_t bytes;
    llmrt_mem_dir dir;
    void *host[2];
    void *device[2];
    llmrt_mem_path path;
    void *priv; /* plugin's own */
} llmrt_mem_buffer;

typedef struct llmrt_mem_stats {
    uint64_t host_pageable_bytes; /* host bytes by kind, currently allocated */
    uint64_t host_pinned_bytes;
    uint64_t host_mapped_bytes;
    uint64_t device_bytes;        /* device mirrors of step buffers */
    uint64_t h2d_copies, h2d_bytes;
    uint64_t d2h_copies, d2h_bytes;
    uint64_t fallbacks;           /* allocations that fell back to pageable */
    char path_in_use[64];         /* "pinned", "pageable", "uva", "pageable (fallback from pinned)" */
} llmrt_mem_stats;

/* Every member is required (the 1.0 set); the loader checks them. */
typedef struct llmrt_memory_vtable {
    uint32_t struct_size;
    /* cfg: the plugin's own section ([memory.<name>]); memory.fallback via host->config_get. */
    llmrt_status (*create)(const llmrt_host *host, const llmrt_section *cfg,
                           const llmrt_backend_ref *backend, llmrt_memory **out, llmrt_error *err);
    void (*destroy)(llmrt_memory *m);
    llmrt_status (*buffer_alloc)(llmrt_memory *m, size_t bytes, llmrt_mem_dir dir,
                                 llmrt_mem_buffer *out, llmrt_error *err);
    void (*buffer_free)(llmrt_memory *m, llmrt_mem_buffer *buf);
    /* Enqueue host[half] → device[half] for the first `bytes` (no-op when zero-copy). */
    llmrt_status (*to_device)(llmrt_memory *m, llmrt_mem_buffer *buf, int half, size_t bytes,
                              llmrt_error *err);
    /* Enqueue device[half] → host[half] (no-op when zero-copy). The host may read host[half]
     * once the backend's stream has passed this point (synchronize or an event). */
    llmrt_status (*to_host)(llmrt_memory *m, llmrt_mem_buffer *buf, int half, size_t bytes,
                            llmrt_error *err);
    uint32_t (*caps)(llmrt_memory *m);
    void (*stats)(llmrt_memory *m, llmrt_mem_stats *out);
} llmrt_memory_vtable;

#define LLMRT_MEMORY_REQUIRED(X)                                                             \
    X(create) X(destroy) X(buffer_alloc) X(buffer_free) X(to_device) X(to_host) X(caps) X(stats)

#ifdef __cplusplus
}
#endif
#endif
