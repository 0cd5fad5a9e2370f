/* cpu_internal.h — what the files of the CPU backend share: the instance struct, the op
 * entry points the vtable (cpu_backend.c) points at, and row converters.
 *
 * Why: one concept per file (pool, memory mechanisms, elementwise ops, attention, GEMM),
 * one vtable. Nothing here is visible outside the .so (-fvisibility=hidden). */
#ifndef LLMRT_CPU_INTERNAL_H
#define LLMRT_CPU_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <llmrt/backend.h>

#include "cpu_pool.h"

typedef struct cpu_host_range cpu_host_range; /* cpu_memory.c */
typedef struct cpu_group cpu_group;           /* cpu_collective.c */

/* The kernel path, [backend.cpu] simd (cpu_simd.c says what each one computes). baseline and
 * exact give the reference bits; avx2, avx512 and amx are the fast paths, ordered: a CPU
 * that has one has those below it. */
typedef enum cpu_simd {
    CPU_SIMD_BASELINE = 0,
    CPU_SIMD_EXACT = 1,
    CPU_SIMD_AVX2 = 2,
    CPU_SIMD_AVX512 = 3,
    CPU_SIMD_AMX = 4,
} cpu_simd;
/* The vector instructions a kernel of the exact arithmetic is compiled for (all give the
 * same bits). */
typedef enum cpu_isa { CPU_ISA_BASE = 0, CPU_ISA_AVX2 = 1, CPU_ISA_AVX512 = 2 } cpu_isa;
cpu_simd cpu_simd_detect(void); /* the fastest path this CPU and build support ("auto") */
int cpu_has_avx512bf16(void);   /* the CPU (and build) has AVX512-BF16 */
cpu_isa cpu_isa_detect(void);   /* the widest exact kernels this CPU and build support */
cpu_isa cpu_simd_isa(cpu_simd s); /* the ISA of path s's vector code */
const char *cpu_simd_name(cpu_simd s);
/* A [backend.cpu] simd value: 0 and *out; -1 not a name, -2 a path this CPU lacks (*why
 * says which and what is expected). */
int cpu_simd_parse(const char *val, cpu_simd *out, const char **why);

struct llmrt_backend {
    const llmrt_host *host; /* may be NULL (tests) */
    cpu_pool *pool;
    int n_threads;
    cpu_simd simd; /* the path ([backend.cpu] simd) */
    cpu_isa isa;   /* the vector instructions of its kernels */
    int bf16_dot;  /* the avx512 / amx path on a CPU with AVX512-BF16 (cpu_gemm_fma.c) */
    pthread_mutex_t mem_mu;   /* guards ranges */
    cpu_host_range *ranges;   /* host_alloc'd and registered host memory (uthash) */
    cpu_group *group;         /* the tensor-parallel group this instance is a rank of, or NULL */
    int32_t rank;             /* its rank in group */
};

/* Run fn over [0, n) on the pool (chunks of `grain` items; 0 = about four per thread), or inline
 * when the job is too small to pay for the hand-off: n * cost < CPU_PAR_MIN_WORK, where cost
 * is a rough count of multiply-adds (or bytes moved) per item. */
#define CPU_PAR_MIN_WORK 32768
static inline void cpu_parallel(llmrt_backend *b, int64_t n, int64_t cost, int64_t grain,
                                cpu_pool_fn fn, void *ctx)
{
    if (n * cost < CPU_PAR_MIN_WORK)
        fn(ctx, 0, n);
    else
        cpu_pool_run(b->pool, n, grain, fn, ctx);
}

/* ---- memory mechanisms (cpu_memory.c) ---- */
llmrt_status cpu_dev_alloc(llmrt_backend *b, size_t bytes, void **out, llmrt_error *err);
void cpu_dev_free(llmrt_backend *b, void *p);
/* Ask for transparent huge pages over the whole 2 MiB pages of [p, p + bytes), for memory
 * about to be filled once and streamed (weights); nothing below 4 MiB. */
void cpu_advise_huge(void *p, size_t bytes);
llmrt_status cpu_host_alloc(llmrt_backend *b, size_t bytes, uint32_t flags, void **out,
                            llmrt_error *err);
void cpu_host_free(llmrt_backend *b, void *p);
llmrt_status cpu_host_register(llmrt_backend *b, void *p, size_t bytes, uint32_t flags,
                               llmrt_error *err);
void cpu_host_unregister(llmrt_backend *b, void *p);
llmrt_status cpu_host_device_ptr(llmrt_backend *b, void *host, void **dev, llmrt_error *err);
void cpu_memory_release_all(llmrt_backend *b);
llmrt_status cpu_copy(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                      llmrt_copy_kind kind, llmrt_error *err);
llmrt_status cpu_event_create(llmrt_backend *b, llmrt_event **out, llmrt_error *err);
void cpu_event_destroy(llmrt_backend *b, llmrt_event *e);
llmrt_status cpu_event_record(llmrt_backend *b, llmrt_event *e, llmrt_error *err);
llmrt_status cpu_event_sync(llmrt_backend *b, llmrt_event *e, llmrt_error *err);
llmrt_status cpu_event_elapsed_ms(llmrt_backend *b, llmrt_event *start, llmrt_event *end,
                                  float *ms, llmrt_error *err);
/* MemTotal / MemAvailable from /proc/meminfo, in bytes. */
llmrt_status cpu_meminfo(uint64_t *total, uint64_t *available, llmrt_error *err);

/* ---- ops (cpu_ops.c, cpu_attention.c, cpu_gemm.c); contracts in backend.h ---- */
/* Row primitives shared by the separate ops and the fused ones (cpu_fused.c), so both do the
 * same arithmetic in the same order and give bit-identical results. */
/* out[i] = w[i] * (x[i] / sqrt(mean(x^2) + eps)) over one row of d (16-lane sum of squares);
 * out may alias x. */
void cpu_norm_row(float *out, const float *x, const llmrt_tensor *w, int64_t d, float eps);
/* Neox rotate-half of one head in place with the token's cos / sin [half]. */
void cpu_rotate_half(float *v, const float *cs, const float *sn, int half);
/* Write n floats of src into a KV cache of dtype dt at element offset off. */
void cpu_store_row(void *cache, llmrt_dtype dt, int64_t off, const float *src, int64_t n);

llmrt_status cpu_embedding(llmrt_backend *b, float *out, const llmrt_tensor *table,
                           const int32_t *ids, int32_t n, llmrt_error *err);
llmrt_status cpu_rmsnorm(llmrt_backend *b, float *out, const float *x, const llmrt_tensor *w,
                         int32_t rows, int32_t d, float eps, llmrt_error *err);
llmrt_status cpu_rope(llmrt_backend *b, float *x, const int32_t *positions, int32_t n,
                      int32_t heads, int32_t head_dim, float theta, llmrt_error *err);
llmrt_status cpu_silu_mul(llmrt_backend *b, float *out, const float *gate, const float *up,
                          int64_t n, llmrt_error *err);
llmrt_status cpu_add(llmrt_backend *b, float *out, const float *a, const float *c, int64_t n,
                     llmrt_error *err);
/* cpu_collective.c: the "llmrt.collective" extension's table */
extern const struct llmrt_collective_ops cpu_collective_ext;
/* cpu_logits_mask.c: the "llmrt.logits_mask" extension's table */
extern const struct llmrt_logits_mask_ops cpu_logits_mask_ext;

llmrt_status cpu_argmax(llmrt_backend *b, int32_t *out, const float *logits, int32_t rows,
                        int32_t vocab, llmrt_error *err);
llmrt_status cpu_kv_store(llmrt_backend *b, void *k_cache, void *v_cache, llmrt_dtype kv_dtype,
                          const float *k, const float *v, const int32_t *slot_mapping, int32_t n,
                          int32_t n_kv_heads, int32_t head_dim, llmrt_error *err);
llmrt_status cpu_attention(llmrt_backend *b, float *out, const float *q,
                           const llmrt_attn_params *p, llmrt_error *err);
llmrt_status cpu_gemm(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                      int32_t n, llmrt_error *err);
/* The fast paths' tiled attention (cpu_attention_fast.c), for calls cpu_attention validated. */
int cpu_attention_fast_takes(const llmrt_backend *b, const llmrt_attn_params *p);
llmrt_status cpu_attention_fast(llmrt_backend *b, float *out, const float *q,
                                const llmrt_attn_params *p, llmrt_error *err);
/* The exact kernel for outputs [o0, o1) of every row, on the calling thread. */
void cpu_gemm_exact_cols(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                         int32_t n, int64_t o0, int64_t o1);
/* One dense GEMM call for the kernels of cpu_gemm.c and cpu_gemm_fma.c. */
typedef struct cpu_gemm_ctx {
    float *y;       /* [n, out] */
    const float *x; /* [n, in] */
    const void *w;  /* [out, in] */
    llmrt_dtype dt;
    int64_t n, in, out;
    cpu_isa isa;    /* the exact kernels' vector instructions */
} cpu_gemm_ctx;

/* The fast paths' FMA-tiled prefill GEMM (cpu_gemm_fma.c): whether it takes a call of n
 * rows (validated by cpu_gemm), and the call. */
int cpu_gemm_fma_takes(const llmrt_backend *b, int32_t n);
void cpu_gemm_fma(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w, int32_t n);
/* amx path (cpu_gemm_amx.c): whether it takes this call, and the call. */
int cpu_gemm_amx_takes(const llmrt_backend *b, const llmrt_tensor *w, int32_t n);
llmrt_status cpu_gemm_amx(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                          int32_t n, llmrt_error *err);
/* the "llmrt.argmax_head" extension's ops (cpu_argmax_head.c) */
llmrt_status cpu_argmax_head_create(llmrt_backend *b, const llmrt_tensor *w, int32_t max_rows,
                                    llmrt_argmax_head **out, llmrt_error *err);
llmrt_status cpu_argmax_head_forward(llmrt_backend *b, llmrt_argmax_head *h, int32_t *out,
                                     const float *x, int32_t n, llmrt_error *err);
void cpu_argmax_head_destroy(llmrt_backend *b, llmrt_argmax_head *h);
/* the "llmrt.fused" extension's ops (cpu_fused.c) */
llmrt_status cpu_add_rmsnorm(llmrt_backend *b, float *out, float *x, const float *res,
                             const llmrt_tensor *w, int32_t rows, int32_t d, float eps,
                             llmrt_error *err);
llmrt_status cpu_qk_norm_rope_store(llmrt_backend *b, float *q_out, const float *qkv,
                                    const llmrt_tensor *q_norm, const llmrt_tensor *k_norm,
                                    const int32_t *positions, const int32_t *slot_mapping,
                                    int32_t n, int32_t n_heads, int32_t n_kv_heads,
                                    int32_t head_dim, float eps, float theta, void *k_cache,
                                    void *v_cache, llmrt_dtype kv_dtype, llmrt_error *err);
llmrt_status cpu_swiglu(llmrt_backend *b, float *out, const float *gu, int32_t n, int32_t d,
                        llmrt_error *err);

/* ---- row converters: vectorisable, bit-identical to llmrt_load_f ---- */

static inline uint32_t cpu_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float cpu_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE half → float without branches: shift exponent+mantissa into place and rescale by
 * 2^112 (exact for normals and subnormals); exponent 31 (inf/nan) is forced to 255 first. */
static inline float cpu_f16_to_f32(uint16_t h)
{
    uint32_t em = (uint32_t)(h & 0x7fffu) << 13;
    uint32_t infnan = ((h & 0x7c00u) == 0x7c00u) ? 0x7f800000u : 0u;
    float mag = cpu_bits_f32(em | infnan) * 0x1p112f;
    return cpu_bits_f32(cpu_f32_bits(mag) | ((uint32_t)(h & 0x8000u) << 16));
}

static inline float cpu_bf16_to_f32(uint16_t h)
{
    return cpu_bits_f32((uint32_t)h << 16);
}

/* dst[i] = src[i] as f32, i < n; src F32/F16/BF16. */
static inline void cpu_row_to_f32(float *restrict dst, const void *restrict src, llmrt_dtype t,
                                  int64_t n)
{
    if (t == LLMRT_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (t == LLMRT_DTYPE_BF16) {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = cpu_bf16_to_f32(s[i]);
    } else {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++)
            dst[i] = cpu_f16_to_f32(s[i]);
    }
}

/* 1 when t is a float dtype a weight or cache may have. */
static inline int cpu_is_float_dtype(llmrt_dtype t)
{
    return t == LLMRT_DTYPE_F32 || t == LLMRT_DTYPE_F16 || t == LLMRT_DTYPE_BF16;
}

#endif
