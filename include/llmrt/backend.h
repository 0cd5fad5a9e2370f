/* backend.h — the compute backend vtable (cpu, cuda, ...).
 *
 * Why: the model and quant plugins describe *what* to compute; a backend decides *where*.
 * It provides mechanisms (device memory, host memory that is page-locked or mapped,
 * async copies, events, graphs) and the ops a dense decoder needs. Host-memory *policy*
 * lives in memory plugins (memory.h), which call these mechanisms.
 *
 * Conventions for every op:
 *  - Activations are f32, row-major, contiguous. Weights are llmrt_tensor (F32/F16/BF16).
 *  - Pointers are device addresses of this backend (for the CPU backend, plain host memory).
 *  - Ops are enqueued on the backend's single stream and may return before they finish;
 *    call synchronize() (or an event) before reading results on the host.
 *  - Ops never synchronize with the host, so a sequence of them can be captured in a graph.
 *  - Ops may allocate: an op that needs device scratch (attention's split partials, argmax's
 *    block maxima, sampling state, a converted gemm input) allocates it the first time it
 *    meets a shape larger than any before, and keeps it until destroy(); a buffer a captured
 *    graph may use is never freed before then. So the first run (or capture) of each shape
 *    may allocate, and a replayed graph never does. Run the largest shapes once at start-up
 *    (the engine's warm-up does) when allocation during serving matters.
 *
 * The vtable holds the stable ops a dense decoder needs. Fused and experimental ops are
 * extensions: extension(b, name, version) returns a function table (include/llmrt/ext/,
 * llmrt/cuda.h), or NULL when the backend does not offer it; an experiment defines its own
 * table in its plugin and never edits this header. */
#ifndef LLMRT_BACKEND_H
#define LLMRT_BACKEND_H

#include "plugin.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llmrt_backend llmrt_backend; /* a backend instance, opaque */
typedef struct llmrt_event llmrt_event;     /* a timing / ordering point on the stream */
typedef struct llmrt_graph llmrt_graph;     /* a captured, replayable op sequence */
typedef struct llmrt_argmax_head llmrt_argmax_head; /* see ext/argmax_head.h */

typedef struct llmrt_device_info {
    char name[128];             /* "NVIDIA H200", "x86_64 CPU (2 threads)" */
    int32_t is_gpu;
    int32_t cc_major, cc_minor; /* compute capability; 0 on CPU */
    int32_t multiprocessors;    /* SMs, or CPU threads */
    uint64_t mem_total;         /* bytes */
    uint64_t mem_free;          /* bytes */
    int32_t driver_version;     /* e.g. 13000; 0 when not applicable */
    int32_t runtime_version;
} llmrt_device_info;

/* Backend capabilities (caps()). */
enum {
    LLMRT_BACKEND_CAP_HOST_IS_DEVICE = 1u << 0, /* device pointers are host pointers (CPU) */
    LLMRT_BACKEND_CAP_ASYNC = 1u << 1,          /* ops run asynchronously to the host */
    LLMRT_BACKEND_CAP_GRAPHS = 1u << 2,         /* graph_begin/end/launch work */
    LLMRT_BACKEND_CAP_MAPPED_HOST = 1u << 3,    /* host_alloc(MAPPED) gives device-readable memory */
    /* (since 1.3) event_record during a graph capture is captured: the event is recorded at
     * that point of the graph each time it is launched (and can be timed like any other), so
     * a step replayed from a graph can still tell its input copies from its compute. */
    LLMRT_BACKEND_CAP_GRAPH_EVENTS = 1u << 4
};

/* host_alloc / host_register flags. */
enum {
    LLMRT_HOST_PINNED = 1u << 0, /* page-locked (CUDA: cudaHostAlloc; CPU: mlock) */
    LLMRT_HOST_MAPPED = 1u << 1  /* also addressable by the device (zero-copy) */
};

typedef enum llmrt_copy_kind {
    LLMRT_COPY_H2D = 1,
    LLMRT_COPY_D2H = 2,
    LLMRT_COPY_D2D = 3
} llmrt_copy_kind;

/* Paged attention over the KV cache. The cache of one layer is
 * [n_blocks, block_size, n_kv_heads, head_dim] in kv_dtype; the token at position p of a
 * sequence lives in block block_tables[s][p / block_size], row p % block_size.
 * Query token i of sequence s (i in [0, qlen), qlen = query_start[s+1]-query_start[s])
 * sits at position seq_lens[s] - qlen + i and attends causally to positions 0..that one. */
typedef struct llmrt_attn_params {
    int32_t n_tokens;            /* rows of q/out */
    int32_t n_seqs;
    int32_t n_heads, n_kv_heads, head_dim;
    float scale;                 /* usually head_dim^-0.5 */
    const int32_t *query_start;  /* [n_seqs + 1] device */
    const int32_t *seq_lens;     /* [n_seqs] device: context length including this step */
    const int32_t *block_tables; /* [n_seqs, max_blocks_per_seq] device */
    int32_t max_blocks_per_seq;
    int32_t block_size;
    int32_t max_seq_len;         /* host upper bound of seq_lens (grid sizing) */
    int32_t max_query_len;       /* host upper bound of query lengths (1 = pure decode) */
    llmrt_dtype kv_dtype;
    const void *k_cache;         /* [n_blocks, block_size, n_kv_heads, head_dim] */
    const void *v_cache;         /* same shape */
} llmrt_attn_params;

/* Per-sequence sampling parameters for on-device sampling. temperature 0 = greedy. */
typedef struct llmrt_sample_params {
    float temperature;
    int32_t top_k;  /* 0 = off */
    float top_p;    /* 1 = off */
    float min_p;    /* 0 = off */
    float uniform;  /* a U[0,1) draw from the request's own seeded generator */
    int32_t _pad;
} llmrt_sample_params;

typedef struct llmrt_backend_vtable {
    uint32_t struct_size; /* (required) sizeof(llmrt_backend_vtable) as the plugin was built */

    /* ---- lifecycle (required) ---- */
    /* Enumerate devices without an instance (doctor, runtime.backend=auto). Fills up to
     * `max` entries and sets *count to the number present (0 = none; not an error). */
    llmrt_status (*probe)(llmrt_device_info *out, int32_t max, int32_t *count, llmrt_error *err);
    llmrt_status (*create)(const llmrt_host *host, const llmrt_section *cfg, llmrt_backend **out,
                           llmrt_error *err);
    void (*destroy)(llmrt_backend *b);
    uint32_t (*caps)(llmrt_backend *b);
    llmrt_status (*device_info)(llmrt_backend *b, llmrt_device_info *out, llmrt_error *err);

    /* ---- device memory (required) ---- */
    llmrt_status (*dev_alloc)(llmrt_backend *b, size_t bytes, void **out, llmrt_error *err);
    void (*dev_free)(llmrt_backend *b, void *p);

    /* ---- host memory mechanisms, used by memory plugins (required) ---- */
    /* LLMRT_ERR_LIMIT when the platform refuses to pin (RLIMIT_MEMLOCK, WSL2 cap). */
    llmrt_status (*host_alloc)(llmrt_backend *b, size_t bytes, uint32_t flags, void **out,
                               llmrt_error *err);
    void (*host_free)(llmrt_backend *b, void *p);
    llmrt_status (*host_register)(llmrt_backend *b, void *p, size_t bytes, uint32_t flags,
                                  llmrt_error *err);
    void (*host_unregister)(llmrt_backend *b, void *p);
    /* The device address of MAPPED host memory. */
    llmrt_status (*host_device_ptr)(llmrt_backend *b, void *host, void **dev, llmrt_error *err);

    /* ---- copies, stream, events (required) ---- */
    llmrt_status (*copy)(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                         llmrt_copy_kind kind, llmrt_error *err);
    llmrt_status (*synchronize)(llmrt_backend *b, llmrt_error *err);
    llmrt_status (*event_create)(llmrt_backend *b, llmrt_event **out, llmrt_error *err);
    void (*event_destroy)(llmrt_backend *b, llmrt_event *e);
    llmrt_status (*event_record)(llmrt_backend *b, llmrt_event *e, llmrt_error *err);
    llmrt_status (*event_sync)(llmrt_backend *b, llmrt_event *e, llmrt_error *err);
    /* Milliseconds between two recorded (and completed) events. */
    llmrt_status (*event_elapsed_ms)(llmrt_backend *b, llmrt_event *start, llmrt_event *end,
                                     float *ms, llmrt_error *err);

    /* ---- graphs (optional, since 1.0: all four or none, and caps has GRAPHS) ---- */
    llmrt_status (*graph_begin)(llmrt_backend *b, llmrt_error *err);
    llmrt_status (*graph_end)(llmrt_backend *b, llmrt_graph **out, llmrt_error *err);
    llmrt_status (*graph_launch)(llmrt_backend *b, llmrt_graph *g, llmrt_error *err);
    void (*graph_destroy)(llmrt_backend *b, llmrt_graph *g);

    /* ---- ops (shapes in comments; all f32 activations): required unless marked ---- */
    /* out[n, d] = table[ids[i], :] converted to f32; table [rows, d] F32/F16/BF16 */
    llmrt_status (*embedding)(llmrt_backend *b, float *out, const llmrt_tensor *table,
                              const int32_t *ids, int32_t n, llmrt_error *err);
    /* out[r, :] = x[r, :] / sqrt(mean(x[r,:]^2) + eps) * w; w [d] F32/F16/BF16. In place ok. */
    llmrt_status (*rmsnorm)(llmrt_backend *b, float *out, const float *x, const llmrt_tensor *w,
                            int32_t rows, int32_t d, float eps, llmrt_error *err);
    /* Neox rotate-half RoPE in place on x [n, heads, head_dim] at positions [n]. */
    llmrt_status (*rope)(llmrt_backend *b, float *x, const int32_t *positions, int32_t n,
                         int32_t heads, int32_t head_dim, float theta, llmrt_error *err);
    /* Write k, v [n, n_kv_heads, head_dim] into the caches at slot_mapping[n]
     * (slot = block * block_size + row; -1 = skip). */
    llmrt_status (*kv_store)(llmrt_backend *b, void *k_cache, void *v_cache, llmrt_dtype kv_dtype,
                             const float *k, const float *v, const int32_t *slot_mapping,
                             int32_t n, int32_t n_kv_heads, int32_t head_dim, llmrt_error *err);
    /* out [n_tokens, n_heads, head_dim] = softmax(q k^T * scale) v over the paged cache */
    llmrt_status (*attention)(llmrt_backend *b, float *out, const float *q,
                              const llmrt_attn_params *p, llmrt_error *err);
    /* out[i] = silu(gate[i]) * up[i], i < n */
    llmrt_status (*silu_mul)(llmrt_backend *b, float *out, const float *gate, const float *up,
                             int64_t n, llmrt_error *err);
    /* out[i] = a[i] + c[i], i < n (out may alias a or c) */
    llmrt_status (*add)(llmrt_backend *b, float *out, const float *a, const float *c, int64_t n,
                        llmrt_error *err);
    /* y [n, out] = x [n, in] · wᵀ, w [out, in] F32/F16/BF16, fp32 accumulation */
    llmrt_status (*gemm)(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                         int32_t n, llmrt_error *err);
    /* out[r] = argmax logits[r, :] (lowest index on ties) */
    llmrt_status (*argmax)(llmrt_backend *b, int32_t *out, const float *logits, int32_t rows,
                           int32_t vocab, llmrt_error *err);
    /* (optional, since 1.0; absent: the engine samples on the host) out[r] drawn from logits[r, :] with
     * params[r] (device-readable) — temperature, top-k, top-p, min-p; greedy at temperature 0. */
    llmrt_status (*sample)(llmrt_backend *b, int32_t *out, const float *logits,
                           const llmrt_sample_params *params, int32_t rows, int32_t vocab,
                           llmrt_error *err);

    /* ---- services for other plugins ---- */
    /* (optional, since 1.0; deprecated since 1.1: untyped. Backends built against 1.1 leave it
     * NULL; CUDA-using plugins take the stream, device and launch protocol from the
     * "llmrt.cuda" extension, llmrt/cuda.h) Native handles by name. */
    void *(*native_handle)(llmrt_backend *b, const char *what);
    /* (optional, since 1.0) Run fn over [0, n) split across the backend's host threads (CPU
     * backend); NULL elsewhere. Blocks until all chunks are done. */
    void (*parallel_for)(llmrt_backend *b, int64_t n,
                         void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx);
    /* (optional, since 1.0) Device memory: free and total bytes (for
     * cache.gpu_memory_utilization). */
    llmrt_status (*mem_info)(llmrt_backend *b, uint64_t *free_bytes, uint64_t *total_bytes,
                             llmrt_error *err);

    /* ---- deprecated since 1.1 (optional, since 1.0) ----
     * Fused ops and greedy decoding's output projection, appended in 1.0 before extensions
     * existed. The slots stay so that 1.0 plugins keep their offsets; backends built against
     * 1.1 leave them NULL and offer the same ops as the "llmrt.fused" and "llmrt.argmax_head"
     * extensions (ext/fused.h, ext/argmax_head.h), where their contracts are written. */
    llmrt_status (*add_rmsnorm)(llmrt_backend *b, float *out, float *x, const float *res,
                                const llmrt_tensor *w, int32_t rows, int32_t d, float eps,
                                llmrt_error *err);
    llmrt_status (*qk_norm_rope_store)(llmrt_backend *b, float *q_out, const float *qkv,
                                       const llmrt_tensor *q_norm, const llmrt_tensor *k_norm,
                                       const int32_t *positions, const int32_t *slot_mapping,
                                       int32_t n, int32_t n_heads, int32_t n_kv_heads,
                                       int32_t head_dim, float eps, float theta, void *k_cache,
                                       void *v_cache, llmrt_dtype kv_dtype, llmrt_error *err);
    llmrt_status (*swiglu)(llmrt_backend *b, float *out, const float *gu, int32_t n, int32_t d,
                           llmrt_error *err);
    llmrt_status (*argmax_head_create)(llmrt_backend *b, const llmrt_tensor *w, int32_t max_rows,
                                       llmrt_argmax_head **out, llmrt_error *err);
    llmrt_status (*argmax_head_forward)(llmrt_backend *b, llmrt_argmax_head *h, int32_t *out,
                                        const float *x, int32_t n, llmrt_error *err);
    void (*argmax_head_destroy)(llmrt_backend *b, llmrt_argmax_head *h);

    /* ---- extensions (optional, since 1.1) ----
     * The function table of extension `name` ("llmrt.fused", "llmrt.cuda", ...) at `version`,
     * or NULL when this backend does not offer it. Each table starts with uint32_t
     * struct_size; a later version of a table only appends, so a backend answers a request for
     * version v with its table of version >= v. The table lives as long as the backend. */
    const void *(*extension)(llmrt_backend *b, const char *name, uint32_t version);

    /* ---- a second stream for copies (optional, since 1.3: both or neither) ----
     * Weight prefetch (memory.h offload_*): a copy that runs while the stream computes.
     * copy_side enqueues on the backend's copy stream: wait until the stream has reached this
     * point, copy `bytes` host → device (src page-locked), record `done`. event_wait makes the
     * stream wait for `done`. Both are captured into a graph during graph_begin/end (the copy
     * stream forks from and joins the captured stream); a capture must wait for every
     * copy_side it enqueued before graph_end. */
    llmrt_status (*copy_side)(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                              llmrt_event *done, llmrt_error *err);
    llmrt_status (*event_wait)(llmrt_backend *b, llmrt_event *e, llmrt_error *err);
} llmrt_backend_vtable;

/* The members the loader requires of every backend (the 1.0 set). */
#define LLMRT_BACKEND_REQUIRED(X)                                                            \
    X(probe) X(create) X(destroy) X(caps) X(device_info) X(dev_alloc) X(dev_free)          \
    X(host_alloc) X(host_free) X(host_register) X(host_unregister) X(host_device_ptr)       \
    X(copy) X(synchronize) X(event_create) X(event_destroy) X(event_record) X(event_sync)   \
    X(event_elapsed_ms) X(embedding) X(rmsnorm) X(rope) X(kv_store) X(attention)            \
    X(silu_mul) X(add) X(gemm) X(argmax)

/* The extension table `name` at `version` of a backend (NULL when it has none). */
static inline const void *llmrt_backend_extension(const llmrt_backend_vtable *vt,
                                                  llmrt_backend *b, const char *name,
                                                  uint32_t version)
{
    return LLMRT_VT_HAS(vt, llmrt_backend_vtable, extension) ? vt->extension(b, name, version)
                                                             : NULL;
}

/* A backend instance together with its vtable, as handed to other plugins. */
typedef struct llmrt_backend_ref {
    const llmrt_backend_vtable *vt;
    llmrt_backend *b;
    const char *name; /* "cpu", "cuda" */
} llmrt_backend_ref;

#ifdef __cplusplus
}
#endif
#endif
