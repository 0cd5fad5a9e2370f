/* awq_cuda_internal.cuh — what the CUDA files of quant-awq share: the context and loaded-linear
 * structs, the tuning knobs, and the device helpers both the decode GEMV (awq_cuda.cu) and the
 * batch tensor-core kernel (awq_cuda_mma.cu) use to read the repacked layout
 * (awq_cuda_layout.cuh) and feed mma.sync.
 *
 * Why one header: the batch kernel must reproduce the GEMV's arithmetic exactly (batch
 * invariance: a token's outputs do not depend on how many tokens share the launch), so both
 * take the same mma instruction, the same f16 rounding of x and the same dequantisation. */
#ifndef LLMRT_AWQ_CUDA_INTERNAL_CUH
#define LLMRT_AWQ_CUDA_INTERNAL_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "awq_cuda.h"
#include "awq_cuda_layout.cuh"

#define AWQ_MT 2            /* m-tiles (16 rows each) per warp: AWQ_CL_MPAD / 16 */
#define AWQ_MAX_N 32        /* tokens the tensor-core GEMV handles (4 n-tiles of 8) */
#define AWQ_ITK AWQ_CL_KPAD /* inputs per warp iteration */
#define AWQ_KW_MAX 16       /* K-splitting warps per block */
#define AWQ_SX_MAX_BYTES 32768 /* decode: x staged in shared memory up to this size */

/* Developer tuning knobs ([quant.awq] tune = "key=value,..."; 0 = built-in choice), for
 * benchmark sweeps without a rebuild. Not a user setting. */
typedef struct awq_tune {
    int kw;       /* force K-splitting warps per block (1..16, a power of two) */
    int sx;       /* -1: never stage x in shared memory (sx=0); default: when it fits */
    int sx_kb;    /* stage x in shared memory up to this many KB (default AWQ_SX_MAX_BYTES) */
    int fx;       /* -1: no folds (fx=0: awq_cuda_fused_max_rows says 0) */
    int mma;      /* -1: no batch tensor-core kernel (mma=0): GEMV to 32 rows, then cuBLAS */
    int mma_min;  /* fewest rows for the batch kernel (default 9: the GEMV below) */
    int mma_max;  /* most rows for the batch kernel (default 256: dequant + cuBLAS above) */
    int mma_w;    /* force the batch kernel's row warps per block (4 or 8) */
    int mma_split;/* force its split of K across blocks (1..16, a power of two) */
    int mma_fill; /* its target resident blocks per SM when choosing W and the split (2) */
    int mma_stages; /* its weight ring depth in iterations (2..5; 2) */
    int mma_bn;   /* its most token columns per block (8..32, a multiple of 8; by shape) */
    int mma_smem_kb; /* cap its shared memory per block at this many KB (a smaller GPU's) */
    int mma_xdb;  /* its x stages: 2 = double-buffered, one barrier per iteration; 1 = one */
    int mma_tune; /* -1 (mma_tune=0): its launch shapes by the built-in rule, not timed at load */
} awq_tune;

/* The batch kernel's launch shape chosen for the rows of one bucket (awq_cuda_mma.cu): token
 * columns per block, row warps, the blocks per SM its K split aims at; bn 0 = the built-in
 * rule. */
#define AWQ_MMA_BUCKETS 9
typedef struct awq_mma_pick {
    uint8_t bn, w, fill;
} awq_mma_pick;

/* Shapes already timed, so the layers of a model that share one are timed once. */
#define AWQ_MMA_CACHE 16
typedef struct awq_mma_shape {
    int64_t out, in, group;
    int kw;
    awq_mma_pick pick[AWQ_MMA_BUCKETS];
} awq_mma_shape;

struct awq_cuda_ctx {
    llmrt_backend_ref be;
    cudaStream_t stream;
    int device;
    int sm_count;
    int pdl;                  /* the backend's launch protocol (llmrt_cuda_ext.pdl) */
    awq_tune tune;
    void *staging;            /* raw qweight | qzeros | scales of one part during a load */
    size_t staging_bytes;
    __half *deq;              /* dequantised f16 [out, in] for the cuBLAS path */
    size_t deq_bytes;
    float *mma_part;          /* batch kernel's split-K partial sums (grown at load) */
    size_t mma_part_bytes;
    int mma_w8;               /* its 8-row-warp blocks fit the device's shared memory */
    size_t sx_max_bytes;      /* the decode GEMV stages x in shared memory up to this size */
    awq_mma_shape mma_shapes[AWQ_MMA_CACHE]; /* launch shapes timed at load */
    int n_mma_shapes;
};

struct awq_cuda_linear {
    int64_t in, out, group;
    int64_t kpad, outp;       /* padded inputs and rows */
    int64_t n_mtiles;
    int kw;                   /* K-splitting warps per block */
    uint32_t *wq;             /* [n_mtiles][kpad/64][32][4] */
    uint32_t *meta;           /* [n_mtiles][kpad/group][8][2] */
    size_t wq_bytes, meta_bytes;
    int wq_moved, meta_moved; /* handed to a mover (linear_move): not ours to free */
    awq_mma_pick mma_pick[AWQ_MMA_BUCKETS]; /* the batch kernel's shapes by row bucket */
};

/* ---- device helpers ---- */

__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t h2_bits(__half2 h) { return *reinterpret_cast<uint32_t *>(&h); }
__device__ __forceinline__ __half2 bits_h2(uint32_t u) { return *reinterpret_cast<__half2 *>(&u); }

__device__ __forceinline__ uint4 ld_stream16(const void *p)
{
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

__device__ __forceinline__ uint32_t word_of(const uint4 &v, int j)
{
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

/* Word of the staged x row holding input pair p (inputs 2p, 2p + 1): per k-tile of 16 inputs
 * 8 words, ordered so that lane t's B fragment — pairs t (b0) and t + 4 (b1) — is the two
 * adjacent words 2t, 2t + 1. */
__device__ __forceinline__ int awq_stage_word(int p)
{
    const int q = p & 7; /* pair within the k-tile */
    return (p >> 3) * 8 + 2 * (q & 3) + (q >> 2);
}

/* The A fragment (q - z per weight, exact in f16) of fragment word w for a lane whose meta
 * word pair is zz = (1024 + z[r0], 1024 + z[r1]) (awq_cuda_layout.cuh). */
__device__ __forceinline__ void awq_dequant_frag(uint32_t (&a)[4], uint32_t w, __half2 zlo,
                                                 __half2 nzhi)
{
    const __half2 sixteenth = __float2half2_rn(0.0625f);
    a[0] = h2_bits(__hsub2(bits_h2(awq_cl_frag_raw(w, 0)), zlo));
    a[1] = h2_bits(__hfma2(bits_h2(awq_cl_frag_raw(w, 1)), sixteenth, nzhi));
    a[2] = h2_bits(__hsub2(bits_h2(awq_cl_frag_raw(w, 2)), zlo));
    a[3] = h2_bits(__hfma2(bits_h2(awq_cl_frag_raw(w, 3)), sixteenth, nzhi));
}

/* zlo and nzhi of a meta zero-point word: (1024 + z[r0]) broadcast, and -(64 + z[r1]). */
__device__ __forceinline__ void awq_zero_pair(uint32_t zbits, __half2 *zlo, __half2 *nzhi)
{
    const __half2 zz = bits_h2(zbits);
    *zlo = __low2half2(zz);
    *nzhi = __hsub2(__float2half2_rn(960.0f), __high2half2(zz));
}

/* SwiGLU as the backends' swiglu and the GLU GEMV write it. */
__device__ __forceinline__ float awq_silu_mul(float gate, float up)
{
    return gate / (1.0f + expf(-gate)) * up;
}

/* ---- the batch kernel (awq_cuda_mma.cu) ---- */

/* Set the kernels' shared-memory limits (once, at create). */
llmrt_status awq_mma_init(awq_cuda_ctx *ctx, llmrt_error *err);
/* 1 when the batch kernel serves n rows of l (tune, K split, alignment of x). */
int awq_mma_serves(const awq_cuda_ctx *ctx, const awq_cuda_linear *l, int n, const float *x);
/* Bytes of split-K partials the batch kernel needs for l at any n it serves (sized at load). */
size_t awq_mma_part_bytes(const awq_cuda_ctx *ctx, const awq_cuda_linear *l);
llmrt_status awq_mma_tune_linear(awq_cuda_ctx *ctx, awq_cuda_linear *l, llmrt_error *err);
llmrt_status awq_cuda_grow(awq_cuda_ctx *ctx, void **p, size_t *have, size_t want,
                           const char *what, llmrt_error *err);
/* y = x · Wᵀ (or silu(gate) * up with glu) by the batch kernel; enqueued, no allocation. */
llmrt_status awq_mma_forward(awq_cuda_ctx *ctx, const awq_cuda_linear *l, float *y,
                             const float *x, int n, int glu, llmrt_error *err);
/* The tuning knob's value, or def when unset. */
static inline int awq_knob(int v, int def) { return v != 0 ? v : def; }

#endif
