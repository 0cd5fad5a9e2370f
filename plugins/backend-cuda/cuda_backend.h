/* cuda_backend.h — what the files of the CUDA backend share: the instance struct, scratch
 * buffers, error helpers, and the entry points of the ops (implemented in the .cu files,
 * called from the vtable and the extension tables in cuda_plugin.c).
 *
 * Why: the plumbing (lifecycle, memory, stream, events, graphs) is plain C against the
 * CUDA runtime API; only the kernels need C++/CUDA. This header is included by both, so it
 * is C with extern "C" around it. Nothing here is visible outside the .so. */
#ifndef LLMRT_CUDA_BACKEND_H
#define LLMRT_CUDA_BACKEND_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <llmrt/backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch buffers owned by the backend, one per purpose (backend.h: ops may allocate). An op
 * allocates its buffer the first time it meets a shape larger than any before; buffers only
 * grow, and a replaced one is kept until destroy because a captured graph may still point at
 * it. So only a first run (or capture) of a larger shape allocates; a graph replay never does. */
typedef enum cuda_scratch_slot {
    CUDA_SCRATCH_GEMM_X = 0,  /* gemm n > 8: activations cast to the weight dtype */
    CUDA_SCRATCH_ATTN = 1,    /* split-K decode attention partials */
    CUDA_SCRATCH_ARGMAX = 2,  /* argmax per-block partials + completion counters */
    CUDA_SCRATCH_SAMPLE = 3,  /* sample: per-row histogram, plan, candidates, counters */
    CUDA_SCRATCH_ATTN_PREFILL = 4, /* prefill attention: split blocks' partials */
    CUDA_SCRATCH_COUNT
} cuda_scratch_slot;

typedef struct cuda_scratch {
    void *p;
    size_t bytes;
} cuda_scratch;

/* Developer tuning knobs ([backend.cuda] tune = "key=value,..."; 0 = the built-in choice), for
 * benchmark sweeps without a rebuild. Not a user setting. */
typedef struct cuda_tune {
    int att_cmin; /* decode attention: fewest context tokens per split */
    int att_fill; /* decode attention: target blocks per SM when splitting */
    int att_maxs; /* decode attention: most splits per sequence and head group */
    int att_win;  /* decode attention: KB of K/V each block stages before its wait (-1: none) */
    int sample_full; /* sample: 1 = every row on the one-block path (tests, A/B) */
    int copy_kernel; /* -1: every copy on the copy engine (cuda_copy.cu) */
    int ah_stats;    /* argmax_head: count candidates, print per row at destroy */
    int att_pf_mma;  /* -1: prefill attention on the fp32 FMA kernel, not the tensor cores */
    int att_inv;     /* -1: decode splits capped by the batch (the plan before the batch kernel:
                      * a token's bits then depend on its batch) */
    int att_bpf;     /* -1: the batch decode kernel loads each step's K/V rows in that step */
    int att_mixed;   /* -1: a mixed step's decode rows through the prefill kernel too */
    int ah_rows;     /* argmax_head: most rows per call past the int8 screen's 8 (default 1024) */
    int att_pf_split; /* prefill attention: keys per split (multiple of 64; -1: one split;
                       * default PFM_SPLIT_KEYS) */
    int att_pf_fill;  /* prefill attention: split blocks while the tiles are fewer than this
                       * many blocks per SM (default 2; -1: never, one block walks all splits) */
    int att_gb;       /* decode attention: most query heads one block serves (1, 2, 4, 8;
                       * default ATT_GB_CAP) */
} cuda_tune;

struct llmrt_backend {
    const llmrt_host *host; /* may be NULL (tests) */
    int device;
    cudaStream_t stream;        /* every op, copy and event runs on this one stream */
    cublasHandle_t cublas;      /* bound to `stream`, with a fixed workspace (graph-safe) */
    void *cublas_ws;
    size_t cublas_ws_bytes;

    /* device properties read once at create */
    char name[128];
    int cc_major, cc_minor;
    int sm_count;
    size_t l2_bytes;
    size_t smem_optin;          /* max dynamic shared memory per block after opt-in */
    size_t att_window;          /* decode attention: bytes of K/V a block stages (0: none) */
    int can_map_host;

    int capturing;              /* between graph_begin and graph_end */
    cudaStream_t copy_stream;   /* copy_side's stream (weight prefetch) */
    cudaEvent_t fork_ev;        /* where copy_side's copy may start on `stream` */
    int pdl;                    /* the launch protocol (llmrt/cuda.h): programmatic dependent
                                 * launch ([backend.cuda] pdl) */
    cuda_tune tune;

    cuda_scratch scratch[CUDA_SCRATCH_COUNT];
    void **retired;             /* replaced scratch buffers, freed at destroy */
    size_t n_retired, cap_retired;

    pthread_mutex_t mu;         /* guards pinned[] */
    void **pinned;              /* host_alloc'd page-locked buffers (cudaFreeHost on free) */
    size_t n_pinned, cap_pinned;

    void *nccl_comm;            /* ncclComm_t of the tensor-parallel group, or NULL */
    int32_t tp_rank, tp_size;   /* its rank and size (0 and 1 outside a group) */
};

/* ---- collectives (cuda_collective.c; NULL when built without NCCL) ---- */
extern const struct llmrt_collective_ops *const cuda_collective_ext;

/* ---- errors (cuda_plugin.c) ---- */
/* Fill err with "<what>: <cudaGetErrorName> (<cudaGetErrorString>)" and return `code`. */
llmrt_status cuda_fail(llmrt_error *err, llmrt_status code, cudaError_t e, const char *what);
/* Check the last launch: LLMRT_ERR_DEVICE naming the kernel when it failed
 * (llmrt_cuda_check_launch). */
llmrt_status cuda_check_launch(llmrt_error *err, const char *kernel);
/* Make b's device current for this thread (cheap when it already is). */
llmrt_status cuda_use(llmrt_backend *b, llmrt_error *err);

/* ---- scratch (cuda_memory.c) ---- */
/* A device buffer of at least `bytes` for `slot`, grown (never shrunk) on demand with
 * cudaMalloc, and zeroed: in stream order, or inside a graph capture on a side stream that is
 * waited for (so the buffer is zero before the first replay and is not re-zeroed by each).
 * Allocating is allowed inside a capture (the backend captures in relaxed mode). */
llmrt_status cuda_scratch_get(llmrt_backend *b, cuda_scratch_slot slot, size_t bytes, void **out,
                              llmrt_error *err);
void cuda_scratch_release_all(llmrt_backend *b);

/* ---- memory mechanisms (cuda_memory.c) ---- */
llmrt_status cuda_dev_alloc(llmrt_backend *b, size_t bytes, void **out, llmrt_error *err);
void cuda_dev_free(llmrt_backend *b, void *p);
llmrt_status cuda_host_alloc(llmrt_backend *b, size_t bytes, uint32_t flags, void **out,
                             llmrt_error *err);
void cuda_host_free(llmrt_backend *b, void *p);
llmrt_status cuda_host_register(llmrt_backend *b, void *p, size_t bytes, uint32_t flags,
                                llmrt_error *err);
void cuda_host_unregister(llmrt_backend *b, void *p);
llmrt_status cuda_host_device_ptr(llmrt_backend *b, void *host, void **dev, llmrt_error *err);
llmrt_status cuda_mem_info(llmrt_backend *b, uint64_t *free_bytes, uint64_t *total_bytes,
                           llmrt_error *err);
void cuda_pinned_release_all(llmrt_backend *b);

/* ---- stream, copies, events, graphs (cuda_stream.c) ---- */
llmrt_status cuda_copy(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                       llmrt_copy_kind kind, llmrt_error *err);
llmrt_status cuda_synchronize(llmrt_backend *b, llmrt_error *err);
llmrt_status cuda_event_create(llmrt_backend *b, llmrt_event **out, llmrt_error *err);
void cuda_event_destroy(llmrt_backend *b, llmrt_event *e);
llmrt_status cuda_event_record(llmrt_backend *b, llmrt_event *e, llmrt_error *err);
llmrt_status cuda_event_sync(llmrt_backend *b, llmrt_event *e, llmrt_error *err);
llmrt_status cuda_event_elapsed_ms(llmrt_backend *b, llmrt_event *start, llmrt_event *end,
                                   float *ms, llmrt_error *err);
/* The copy stream (backend.h copy_side / event_wait, since 1.3). */
llmrt_status cuda_copy_side(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                            llmrt_event *done, llmrt_error *err);
llmrt_status cuda_event_wait(llmrt_backend *b, llmrt_event *e, llmrt_error *err);
llmrt_status cuda_graph_begin(llmrt_backend *b, llmrt_error *err);
llmrt_status cuda_graph_end(llmrt_backend *b, llmrt_graph **out, llmrt_error *err);
llmrt_status cuda_graph_launch(llmrt_backend *b, llmrt_graph *g, llmrt_error *err);
void cuda_graph_destroy(llmrt_backend *b, llmrt_graph *g);

/* ---- ops (contracts in backend.h) ---- */
/* cuda_elementwise.cu */
llmrt_status cuda_embedding(llmrt_backend *b, float *out, const llmrt_tensor *table,
                            const int32_t *ids, int32_t n, llmrt_error *err);
llmrt_status cuda_rmsnorm(llmrt_backend *b, float *out, const float *x, const llmrt_tensor *w,
                          int32_t rows, int32_t d, float eps, llmrt_error *err);
llmrt_status cuda_rope(llmrt_backend *b, float *x, const int32_t *positions, int32_t n,
                       int32_t heads, int32_t head_dim, float theta, llmrt_error *err);
llmrt_status cuda_kv_store(llmrt_backend *b, void *k_cache, void *v_cache, llmrt_dtype kv_dtype,
                           const float *k, const float *v, const int32_t *slot_mapping, int32_t n,
                           int32_t n_kv_heads, int32_t head_dim, llmrt_error *err);
llmrt_status cuda_silu_mul(llmrt_backend *b, float *out, const float *gate, const float *up,
                           int64_t n, llmrt_error *err);
llmrt_status cuda_add(llmrt_backend *b, float *out, const float *a, const float *c, int64_t n,
                      llmrt_error *err);
/* cuda_fused.cu (the "llmrt.fused" extension, ext/fused.h) */
llmrt_status cuda_add_rmsnorm(llmrt_backend *b, float *out, float *x, const float *res,
                              const llmrt_tensor *w, int32_t rows, int32_t d, float eps,
                              llmrt_error *err);
llmrt_status cuda_qk_norm_rope_store(llmrt_backend *b, float *q_out, const float *qkv,
                                     const llmrt_tensor *q_norm, const llmrt_tensor *k_norm,
                                     const int32_t *positions, const int32_t *slot_mapping,
                                     int32_t n, int32_t n_heads, int32_t n_kv_heads,
                                     int32_t head_dim, float eps, float theta, void *k_cache,
                                     void *v_cache, llmrt_dtype kv_dtype, llmrt_error *err);
llmrt_status cuda_swiglu(llmrt_backend *b, float *out, const float *gu, int32_t n, int32_t d,
                         llmrt_error *err);
/* cuda_copy.cu: copies of at most CUDA_COPY_KERNEL_MAX bytes between device memory and
 * page-locked host memory run as a kernel; returns 1 when it took the copy (*st its status),
 * 0 when the copy is not one of those (the caller uses cudaMemcpyAsync). */
#define CUDA_COPY_KERNEL_MAX 65536
int cuda_copy_by_kernel(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                        llmrt_copy_kind kind, llmrt_error *err, llmrt_status *st);
/* cuda_attention.cu */
llmrt_status cuda_attention(llmrt_backend *b, float *out, const float *q,
                            const llmrt_attn_params *p, llmrt_error *err);
/* Raise the dynamic shared-memory limit of the attention kernels (once, at create). */
llmrt_status cuda_attention_init(llmrt_backend *b, llmrt_error *err);
/* cuda_gemm.cu */
llmrt_status cuda_gemm(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                       int32_t n, llmrt_error *err);
/* cuda_logits_mask.cu: the "llmrt.logits_mask" extension's table */
extern const struct llmrt_logits_mask_ops cuda_logits_mask_ext;

/* cuda_sample.cu */
llmrt_status cuda_argmax(llmrt_backend *b, int32_t *out, const float *logits, int32_t rows,
                         int32_t vocab, llmrt_error *err);
llmrt_status cuda_sample(llmrt_backend *b, int32_t *out, const float *logits,
                         const llmrt_sample_params *params, int32_t rows, int32_t vocab,
                         llmrt_error *err);

/* cuda_argmax_head.cu (the "llmrt.argmax_head" extension, ext/argmax_head.h) */
llmrt_status cuda_argmax_head_create(llmrt_backend *b, const llmrt_tensor *w, int32_t max_rows,
                                     llmrt_argmax_head **out, llmrt_error *err);
llmrt_status cuda_argmax_head_forward(llmrt_backend *b, llmrt_argmax_head *h, int32_t *out,
                                      const float *x, int32_t n, llmrt_error *err);
void cuda_argmax_head_destroy(llmrt_backend *b, llmrt_argmax_head *h);

/* 1 when t is a float dtype a weight or cache may have. */
static inline int cuda_is_float_dtype(llmrt_dtype t)
{
    return t == LLMRT_DTYPE_F32 || t == LLMRT_DTYPE_F16 || t == LLMRT_DTYPE_BF16;
}

#ifdef __cplusplus
}
#endif
#endif
