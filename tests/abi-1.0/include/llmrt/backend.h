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
 *  - Ops never allocate or synchronize, so a sequence of them can be captured in a graph. */
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
typedef struct llmrt_argmax_head llmrt_argmax_head; /* a prepared output projection (optional ops) */

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
    LLMRT_BACKEND_CAP_MAPPED_HOST = 1u << 3     /* host_alloc(MAPPED) gives device-readable memory */
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
    uint32_t struct_size;

    /* ---- lifecycle ---- */
    /* Enumerate devices without an instance (doctor, runtime.backend=auto). Fills up to
     * `max` entries and sets *count to the number present (0 = none; not an error). */
    llmrt_status (*probe)(llmrt_device_info *out, int32_t max, int32_t *count, llmrt_error *err);
    llmrt_status (*create)(const llmrt_host *host, const llmrt_section *cfg, llmrt_backend **out,
                           llmrt_error *err);
    void (*destroy)(llmrt_backend *b);
    uint32_t (*caps)(llmrt_backend *b);
    llmrt_status (*device_info)(llmrt_backend *b, llmrt_device_info *out, llmrt_error *err);

    /* ---- device memory ---- */
    llmrt_status (*dev_alloc)(llmrt_backend *b, size_t bytes, void **out, llmrt_error *err);
    void (*dev_free)(llmrt_backend *b, void *p);

    /* ---- host memory mechanisms (used by memory plugins) ---- */
    /* LLMRT_ERR_LIMIT when the platform refuses to pin (RLIMIT_MEMLOCK, WSL2 cap). */
    llmrt_status (*host_alloc)(llmrt_backend *b, size_t bytes, uint32_t flags, void **out,
                               llmrt_error *err);
    void (*host_free)(llmrt_backend *b, void *p);
    llmrt_status (*host_register)(llmrt_backend *b, void *p, size_t bytes, uint32_t flags,
                                  llmrt_error *err);
    void (*host_unregister)(llmrt_backend *b, void *p);
    /* The device address of MAPPED host memory. */
    llmrt_status (*host_device_ptr)(llmrt_backend *b, void *host, void **dev, llmrt_error *err);

    /* ---- copies, stream, events ---- */
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

    /* ---- graphs (optional: NULL when caps lacks GRAPHS) ---- */
    llmrt_status (*graph_begin)(llmrt_backend *b, llmrt_error *err);
    llmrt_status (*graph_end)(llmrt_backend *b, llmrt_graph **out, llmrt_error *err);
    llmrt_status (*graph_launch)(llmrt_backend *b, llmrt_graph *g, llmrt_error *err);
    void (*graph_destroy)(llmrt_backend *b, llmrt_graph *g);

    /* ---- ops (shapes in comments; all f32 activations) ---- */
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
    /* Optional (NULL = the engine samples on the host): out[r] drawn from logits[r, :] with
     * params[r] (device-readable) — temperature, top-k, top-p, min-p; greedy at temperature 0. */
    llmrt_status (*sample)(llmrt_backend *b, int32_t *out, const float *logits,
                           const llmrt_sample_params *params, int32_t rows, int32_t vocab,
                           llmrt_error *err);

    /* ---- services for other plugins ---- */
    /* Native handles by name: "cuda.stream" → cudaStream_t. NULL when unknown. */
    void *(*native_handle)(llmrt_backend *b, const char *what);
    /* Run fn over [0, n) split across the backend's host threads (CPU backend); NULL elsewhere.
     * Blocks until all chunks are done. */
    void (*parallel_for)(llmrt_backend *b, int64_t n,
                         void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx);
    /* Device memory: free and total bytes (for cache.gpu_memory_utilization). */
    llmrt_status (*mem_info)(llmrt_backend *b, uint64_t *free_bytes, uint64_t *total_bytes,
                             llmrt_error *err);

    /* ---- optional fused ops (appended; NULL or beyond struct_size = absent) ----
     * Each computes exactly what the named composition of the ops above computes, in one
     * pass: fewer launches and fewer trips through memory at decode. A model uses them when
     * present and falls back to the separate ops otherwise. */

    /* x[r, :] += res[r, :] (skipped when res is NULL), then
     * out[r, :] = rmsnorm(x[r, :]) * w — i.e. add(x, x, res) followed by rmsnorm(out, x, w).
     * x, res, out [rows, d]; out must not alias x or res; w [d] F32/F16/BF16. */
    llmrt_status (*add_rmsnorm)(llmrt_backend *b, float *out, float *x, const float *res,
                                const llmrt_tensor *w, int32_t rows, int32_t d, float eps,
                                llmrt_error *err);
    /* The attention prologue on a fused projection qkv [n, (n_heads + 2 n_kv_heads) * head_dim]
     * (per token: the q heads, then the k heads, then the v heads):
     *   q_out [n, n_heads, head_dim] = rope(rmsnorm(q) * q_norm) at positions[n]
     *   k = rope(rmsnorm(k) * k_norm); v as is; both stored at slot_mapping[n] as kv_store does
     * — rmsnorm per head, rope and kv_store over the split q, k, v. q_norm / k_norm [head_dim]
     * may be NULL (no per-head norm: rope only). q_out must not alias qkv. */
    llmrt_status (*qk_norm_rope_store)(llmrt_backend *b, float *q_out, const float *qkv,
                                       const llmrt_tensor *q_norm, const llmrt_tensor *k_norm,
                                       const int32_t *positions, const int32_t *slot_mapping,
                                       int32_t n, int32_t n_heads, int32_t n_kv_heads,
                                       int32_t head_dim, float eps, float theta, void *k_cache,
                                       void *v_cache, llmrt_dtype kv_dtype, llmrt_error *err);
    /* out [n, d] = silu(gu[:, :d]) * gu[:, d:] for gu [n, 2d] (a fused gate|up projection)
     * — silu_mul over the two halves of each row. */
    llmrt_status (*swiglu)(llmrt_backend *b, float *out, const float *gu, int32_t n, int32_t d,
                           llmrt_error *err);

    /* ---- optional: greedy decoding's output projection (appended; NULL or beyond
     * struct_size = absent, all three or none) ----
     * A backend may find the argmax of each row of x · wᵀ without computing every logit.
     * argmax_head_create prepares w [vocab, d] (its memory must outlive the head; the backend
     * may keep a compact copy of it) for calls of up to max_rows rows, or returns
     * LLMRT_ERR_UNSUPPORTED for a w it cannot take. argmax_head_forward then writes, for
     * x [n, d], 0 < n <= max_rows,
     *   out[r] = argmax_j (x[r, :] · w[j, :]), lowest j on ties
     * — the ids that gemm followed by argmax give: every row that could be the argmax has its
     * logit computed as gemm computes it. Enqueued like the ops above, capturable in a graph. */
    llmrt_status (*argmax_head_create)(llmrt_backend *b, const llmrt_tensor *w, int32_t max_rows,
                                       llmrt_argmax_head **out, llmrt_error *err);
    llmrt_status (*argmax_head_forward)(llmrt_backend *b, llmrt_argmax_head *h, int32_t *out,
                                        const float *x, int32_t n, llmrt_error *err);
    void (*argmax_head_destroy)(llmrt_backend *b, llmrt_argmax_head *h);
} llmrt_backend_vtable;

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
