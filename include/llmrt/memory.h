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
    /* (since 1.3) With ZERO_COPY: TO_DEVICE buffers are not read in place but gathered once
     * per step: device[] is a device mirror, and to_device enqueues the device's read of the
     * mapped memory into it (a kernel or copy, capturable), so the step's kernels read device
     * memory and never cross the bus layer after layer (vLLM's Model Runner V2). TO_HOST
     * buffers stay zero-copy: the device writes them in place. */
    LLMRT_MEM_CAP_INPUTS_GATHERED = 1u << 3,
    /* (since 1.3) With offloaded layers (offload_init): offload_fetch may be captured in a
     * graph (absent: the forward of a step cannot be captured; the engine runs it eagerly) */
    LLMRT_MEM_CAP_OFFLOAD_CAPTURABLE = 1u << 4
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
    /* (since 1.3) CPU weight offload (offload_* below); zero without it */
    uint64_t offload_bytes;       /* host bytes of offloaded weights: every forward moves them
                                     over the bus once (copied, or read in place) */
    int32_t offload_layers;       /* layers whose weights stay in host memory */
    char offload_path[64];        /* "prefetch (pinned)", "mapped", "sync (pageable)", or
                                     "sync (pageable, fallback from pinned)" */
} llmrt_mem_stats;

/* (since 1.3) CPU weight offload, memory.cpu_offload_gb: the LAST layers' weights stay in host
 * memory, as few layers as hold at least the bytes asked (all when asked for more). The last,
 * not the first: each forward runs the resident layers first, so the first two offloaded
 * layers' copies overlap with their compute and the pipeline starts full. Layers are taken
 * as of one size, layer_bytes (the model measures the first it loads). Returns the index of
 * the first offloaded layer: n_layers when none is. */
static inline int32_t llmrt_offload_first_layer(int32_t n_layers, uint64_t layer_bytes,
                                                uint64_t offload_bytes)
{
    if (n_layers <= 0 || offload_bytes == 0)
        return n_layers > 0 ? n_layers : 0;
    if (layer_bytes == 0)
        return 0;
    uint64_t n = (offload_bytes + layer_bytes - 1) / layer_bytes;
    return n >= (uint64_t)n_layers ? 0 : n_layers - (int32_t)n;
}

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

    /* ---- CPU weight offload (optional, since 1.3: all three or none) ----
     * The model loads an offloaded layer on the device as usual, then hands each of its
     * buffers to offload_place, which moves it into host memory and says where kernels read
     * it from now on; in every forward it calls offload_fetch before each offloaded layer's
     * kernels. pinned: page-locked host copies; two device staging slots of layer_bytes;
     * fetch(k) waits for layer k's copy and starts layer k + 1's into the other slot on the
     * backend's copy stream (copy_side), so it runs while layer k computes — graph nodes when
     * captured. uva: mapped host memory, kernels read it in place over the bus; fetch does
     * nothing. pageable: malloc'd host copies copied synchronously into one slot by fetch
     * (not capturable: caps lacks COPIES_CAPTURABLE for the engine's graphs). Pinning that
     * fails follows memory.fallback (pageable: the sync path; error: offload_init fails). */
    /* Hold n_layers offloaded layers of at most layer_bytes each. Once per instance. */
    llmrt_status (*offload_init)(llmrt_memory *m, int32_t n_layers, size_t layer_bytes,
                                 llmrt_error *err);
    /* Move `bytes` of device memory at dev (a buffer of offloaded layer k, 0 <= k < n_layers,
     * at offset off of the layer's bytes; off 256-aligned, off + bytes <= layer_bytes) into
     * layer k's host memory; *kernel_ptr: the device address kernels read it at from now on.
     * The caller then frees dev. Synchronises (load time only). */
    llmrt_status (*offload_place)(llmrt_memory *m, int32_t k, size_t off, const void *dev,
                                  size_t bytes, void **kernel_ptr, llmrt_error *err);
    /* Enqueue what makes offloaded layer k's weights readable at their kernel addresses:
     * k = -1 when a forward begins, then k = 0, 1, ..., n_layers - 1 just before each
     * offloaded layer's kernels. Never synchronises with the host. */
    llmrt_status (*offload_fetch)(llmrt_memory *m, int32_t k, llmrt_error *err);
} llmrt_memory_vtable;

/* The memory plugin instance a model plugin places offloaded weights through (model.h's
 * llmrt_model_params.offload). */
typedef struct llmrt_weight_offload {
    uint32_t struct_size;
    const llmrt_memory_vtable *vt; /* has offload_init, offload_place, offload_fetch */
    llmrt_memory *m;
    uint64_t bytes;                /* memory.cpu_offload_gb in bytes (> 0) */
} llmrt_weight_offload;

#define LLMRT_MEMORY_REQUIRED(X)                                                             \
    X(create) X(destroy) X(buffer_alloc) X(buffer_free) X(to_device) X(to_host) X(caps) X(stats)

#ifdef __cplusplus
}
#endif
#endif
