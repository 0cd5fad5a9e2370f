/* cpu_gemm_fma.c — the fast paths' prefill GEMM on AVX2 + FMA: y [n, out] = x [n, in] · Wᵀ
 * for W [out, in] in F32/F16/BF16, in register tiles.
 *
 * Why: a prefill-sized call does n multiply-adds per weight, so it is bound by arithmetic and
 * by the caches, not by memory. The exact kernels (cpu_gemm.c) keep mul and add apart and load
 * every x vector again for each weight row; here a tile of FMA_ROWS rows of x by FMA_COLS
 * weight rows keeps its FMA_ROWS x FMA_COLS accumulators in registers, so each vector loaded
 * feeds several FMAs. Work is split over output columns (as the exact kernels): each thread
 * walks its columns for a block of FMA_ROW_BLOCK rows (whose x stays in L2), FMA_COLS weight
 * rows at a time (which stay in L1 while they meet every row of the block).
 *
 * Arithmetic: each y element is its own chain — 8 lanes of FMAs over i ≡ l (mod 8) in
 * increasing i, the lanes added in a fixed tree, the tail (in % 8) added in order — whatever
 * the tile, the thread or the block it falls in: 1 and 2 threads give the same bits, and a row
 * gets the same bits whichever other rows share a call of this kernel. Against the exact
 * kernels (another order, mul and add rounded apart) the difference is rounding only: each is
 * within about (in / 8 + 4) 2^-24 sum_i |x_i w_i| of the exact sum, far inside the fast paths'
 * documented bound 2^-8 sum_i |x_i w_i| (tests/test_ops.c). Calls with fewer than FMA_MIN_ROWS rows (the decode GEMVs, bound by
 * memory) stay on the exact kernels. */
#include "cpu_internal.h"

#define FMA_ROWS 4
#define FMA_COLS 3
#define FMA_ROW_BLOCK 64
#define FMA_MIN_ROWS 16

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_HAVE_FMA_KERNEL 1
#define FMA_TARGET __attribute__((target("avx2,fma,f16c")))
#define ALWAYS_INLINE __attribute__((always_inline))

typedef struct {
    float *y;       /* [n, out] */
    const float *x; /* [n, in] */
    const void *w;  /* [out, in] */
    llmrt_dtype dt;
    int64_t n, in, out;
} fma_ctx;

/* 8 weights from element i of row w, as f32 (bf16 and f16 convert exactly) */
FMA_TARGET static inline ALWAYS_INLINE __m256 w8(const void *w, int64_t i, const int DT)
{
    if (DT == LLMRT_DTYPE_F32)
        return _mm256_loadu_ps((const float *)w + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (DT == LLMRT_DTYPE_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

FMA_TARGET static inline ALWAYS_INLINE float w1(const void *w, int64_t i, const int DT)
{
    if (DT == LLMRT_DTYPE_F32)
        return ((const float *)w)[i];
    if (DT == LLMRT_DTYPE_BF16)
        return cpu_bf16_to_f32(((const uint16_t *)w)[i]);
    return cpu_f16_to_f32(((const uint16_t *)w)[i]);
}

FMA_TARGET static inline ALWAYS_INLINE float lanes_sum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* y[r * out + c] = x[r] · w[c] for R rows of x (in apart) and C weight rows (in apart) */
FMA_TARGET static inline ALWAYS_INLINE void tile(const void *w, const float *restrict x,
                                                 int64_t in, float *restrict y, int64_t out,
                                                 const int R, const int C, const int DT)
{
    const size_t es = DT == LLMRT_DTYPE_F32 ? 4 : 2;
    __m256 acc[FMA_ROWS][FMA_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= in; i += 8) {
        __m256 wv[FMA_COLS];
        for (int c = 0; c < C; c++)
            wv[c] = w8((const char *)w + (size_t)(c * in) * es, i, DT);
        for (int r = 0; r < R; r++) {
            const __m256 xv = _mm256_loadu_ps(x + r * in + i);
            for (int c = 0; c < C; c++)
                acc[r][c] = _mm256_fmadd_ps(xv, wv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            const void *wc = (const char *)w + (size_t)(c * in) * es;
            float s = lanes_sum(acc[r][c]);
            for (int64_t j = i; j < in; j++)
                s += x[r * in + j] * w1(wc, j, DT);
            y[r * out + c] = s;
        }
}

/* the tile for C weight rows, by the rows left (a constant R for each call of tile) */
FMA_TARGET static inline ALWAYS_INLINE void rows_tiles(const fma_ctx *g, const void *wr,
                                                       int64_t o, int64_t r0, int64_t r1,
                                                       const int C, const int DT)
{
    const int64_t in = g->in, out = g->out;
    int64_t r = r0;
    for (; r + FMA_ROWS <= r1; r += FMA_ROWS)
        tile(wr, g->x + r * in, in, g->y + r * out + o, out, FMA_ROWS, C, DT);
    switch (r1 - r) {
    case 3: tile(wr, g->x + r * in, in, g->y + r * out + o, out, 3, C, DT); break;
    case 2: tile(wr, g->x + r * in, in, g->y + r * out + o, out, 2, C, DT); break;
    case 1: tile(wr, g->x + r * in, in, g->y + r * out + o, out, 1, C, DT); break;
    default: break;
    }
}

FMA_TARGET static inline ALWAYS_INLINE void cols_dt(const fma_ctx *g, int64_t o0, int64_t o1,
                                                    const int DT)
{
    const size_t es = DT == LLMRT_DTYPE_F32 ? 4 : 2;
    for (int64_t r0 = 0; r0 < g->n; r0 += FMA_ROW_BLOCK) {
        const int64_t r1 = r0 + FMA_ROW_BLOCK < g->n ? r0 + FMA_ROW_BLOCK : g->n;
        for (int64_t o = o0; o < o1;) {
            const void *wr = (const char *)g->w + (size_t)(o * g->in) * es;
            const int64_t left = o1 - o;
            if (left >= FMA_COLS)
                rows_tiles(g, wr, o, r0, r1, FMA_COLS, DT);
            else if (left == 2)
                rows_tiles(g, wr, o, r0, r1, 2, DT);
            else
                rows_tiles(g, wr, o, r0, r1, 1, DT);
            o += left >= FMA_COLS ? FMA_COLS : left;
        }
    }
}

FMA_TARGET static void fma_cols(void *c, int64_t o0, int64_t o1)
{
    const fma_ctx *g = c;
    switch (g->dt) {
    case LLMRT_DTYPE_F32: cols_dt(g, o0, o1, LLMRT_DTYPE_F32); break;
    case LLMRT_DTYPE_BF16: cols_dt(g, o0, o1, LLMRT_DTYPE_BF16); break;
    default: cols_dt(g, o0, o1, LLMRT_DTYPE_F16); break;
    }
}
#endif

int cpu_gemm_fma_takes(const llmrt_backend *b, int32_t n)
{
#ifdef CPU_HAVE_FMA_KERNEL
    return (b->simd == CPU_SIMD_AVX2 || b->simd == CPU_SIMD_AVX512 ||
            b->simd == CPU_SIMD_AMX) &&
           n >= FMA_MIN_ROWS;
#else
    (void)b, (void)n;
    return 0;
#endif
}

void cpu_gemm_fma(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w, int32_t n)
{
#ifdef CPU_HAVE_FMA_KERNEL
    fma_ctx c = {y, x, w->data, w->dtype, n, w->shape[1], w->shape[0]};
    /* chunks of whole tiles, four per thread (as the exact kernels: balanced when another
     * process takes a core for a while) */
    int64_t grain = (c.out + 4 * b->n_threads - 1) / (4 * b->n_threads);
    grain = (grain + FMA_COLS - 1) / FMA_COLS * FMA_COLS;
    if (grain < 4 * FMA_COLS)
        grain = 4 * FMA_COLS;
    cpu_parallel(b, c.out, c.in * n, grain, fma_cols, &c);
#else
    (void)b, (void)y, (void)x, (void)w, (void)n;
#endif
}
