/* cpu_gemm_fma.c — the fast paths' prefill GEMM on AVX2 + FMA: y [n, out] = x [n, in] · Wᵀ
 * for W [out, in] in F32/F16/BF16, in register tiles; bf16 W on AVX512-BF16 dot products.
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
 * documented bound 2^-8 sum_i |x_i w_i| (tests/test_ops.c). Calls with fewer than
 * FMA_MIN_ROWS rows (the decode GEMVs, bound by memory) stay on the exact kernels.
 *
 * bf16 W on the avx512 and amx paths of a CPU with AVX512-BF16 (where AMX does not take the
 * call): x is rounded to bf16 once per call (round to nearest even, zero-padded to a multiple
 * of 32 inputs) and each vdpbf16ps adds 32 products of raw weights into 16 f32 lanes — twice
 * the multiply-adds of an f32 FMA and no conversion of W. Tiles of BF_ROWS x BF_COLS, the
 * lanes summed by _mm512_reduce_add_ps; again each y element is its own chain (the same bits
 * whatever the tile, thread or rows beside it). Accuracy as the AMX kernel's: x's rounding
 * (2^-9 relative) and f32 sums, |y - y_exact| <= 2^-8 sum_i |x_i w_i|. */
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
FMA_TARGET static inline ALWAYS_INLINE void rows_tiles(const cpu_gemm_ctx *g, const void *wr,
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

FMA_TARGET static inline ALWAYS_INLINE void cols_dt(const cpu_gemm_ctx *g, int64_t o0, int64_t o1,
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
    const cpu_gemm_ctx *g = c;
    switch (g->dt) {
    case LLMRT_DTYPE_F32: cols_dt(g, o0, o1, LLMRT_DTYPE_F32); break;
    case LLMRT_DTYPE_BF16: cols_dt(g, o0, o1, LLMRT_DTYPE_BF16); break;
    default: cols_dt(g, o0, o1, LLMRT_DTYPE_F16); break;
    }
}

/* ---- bf16 W on AVX512-BF16 ---- */

#define BF_ROWS 4
#define BF_COLS 4
#define BF_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")))

typedef struct {
    float *y;          /* [n, out] */
    const float *x;    /* [n, in] */
    uint16_t *xb;      /* [n, in_pad] x in bf16, zeros past in */
    const uint16_t *w; /* [out, in] bf16 */
    int64_t n, in, in_pad, out;
} bf_ctx;

/* rows [r0, r1) of x into xb */
BF_TARGET static void bf_pack_rows(void *c, int64_t r0, int64_t r1)
{
    const bf_ctx *g = c;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = g->x + r * g->in;
        uint16_t *xb = g->xb + r * g->in_pad;
        for (int64_t i = 0; i < g->in_pad; i += 32) {
            const int64_t left = g->in - i;
            const __mmask16 mlo = left >= 16 ? (__mmask16)0xffff
                                  : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
            const __mmask16 mhi = left >= 32 ? (__mmask16)0xffff
                                  : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
            const __m512 lo = _mm512_maskz_loadu_ps(mlo, x + i);
            const __m512 hi = _mm512_maskz_loadu_ps(mhi, x + i + 16);
            _mm512_storeu_si512((void *)(xb + i), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
    }
}

/* y[r * out + c] for R rows of x from row r0 and C weight rows from o */
BF_TARGET static inline ALWAYS_INLINE void bf_tile(const bf_ctx *g, int64_t r0, int64_t o,
                                                   const int R, const int C)
{
    const int64_t in = g->in, full = in / 32 * 32;
    __m512 acc[BF_ROWS][BF_COLS];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < g->in_pad; i += 32) {
        /* a last partial slice: weights past in read as zeros (x is zero there too) */
        const __mmask32 m = i < full ? (__mmask32)0xffffffffu
                                     : (__mmask32)((1u << (in - full)) - 1);
        __m512bh wv[BF_COLS];
        for (int c = 0; c < C; c++)
            wv[c] = (__m512bh)_mm512_maskz_loadu_epi16(m, g->w + (o + c) * in + i);
        for (int r = 0; r < R; r++) {
            const __m512bh xv =
                (__m512bh)_mm512_loadu_si512((const void *)(g->xb + (r0 + r) * g->in_pad + i));
            for (int c = 0; c < C; c++)
                acc[r][c] = _mm512_dpbf16_ps(acc[r][c], xv, wv[c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            g->y[(r0 + r) * g->out + o + c] = _mm512_reduce_add_ps(acc[r][c]);
}

BF_TARGET static inline ALWAYS_INLINE void bf_rows(const bf_ctx *g, int64_t o, int64_t r0,
                                                   int64_t r1, const int C)
{
    int64_t r = r0;
    for (; r + BF_ROWS <= r1; r += BF_ROWS)
        bf_tile(g, r, o, BF_ROWS, C);
    switch (r1 - r) {
    case 3: bf_tile(g, r, o, 3, C); break;
    case 2: bf_tile(g, r, o, 2, C); break;
    case 1: bf_tile(g, r, o, 1, C); break;
    default: break;
    }
}

BF_TARGET static void bf_cols(void *c, int64_t o0, int64_t o1)
{
    const bf_ctx *g = c;
    for (int64_t r0 = 0; r0 < g->n; r0 += FMA_ROW_BLOCK) {
        const int64_t r1 = r0 + FMA_ROW_BLOCK < g->n ? r0 + FMA_ROW_BLOCK : g->n;
        for (int64_t o = o0; o < o1;) {
            const int64_t left = o1 - o;
            switch (left >= BF_COLS ? BF_COLS : left) {
            case 4: bf_rows(g, o, r0, r1, 4); break;
            case 3: bf_rows(g, o, r0, r1, 3); break;
            case 2: bf_rows(g, o, r0, r1, 2); break;
            default: bf_rows(g, o, r0, r1, 1); break;
            }
            o += left >= BF_COLS ? BF_COLS : left;
        }
    }
}

/* The bf16 kernel, if x's bf16 copy can be had (else 0: the f32 tiles take the call). */
static int gemm_bf16_dot(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                         int32_t n)
{
    const int64_t in = w->shape[1], in_pad = (in + 31) / 32 * 32;
    uint16_t *xb = aligned_alloc(64, (size_t)(n * in_pad) * sizeof(uint16_t));
    if (!xb)
        return 0;
    bf_ctx c = {y, x, xb, w->data, n, in, in_pad, w->shape[0]};
    cpu_parallel(b, n, in, 0, bf_pack_rows, &c);
    int64_t grain = (c.out + 4 * b->n_threads - 1) / (4 * b->n_threads);
    grain = (grain + BF_COLS - 1) / BF_COLS * BF_COLS;
    if (grain < 4 * BF_COLS)
        grain = 4 * BF_COLS;
    cpu_parallel(b, c.out, in * n, grain, bf_cols, &c);
    free(xb);
    return 1;
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
    if (b->bf16_dot && w->dtype == LLMRT_DTYPE_BF16 && gemm_bf16_dot(b, y, x, w, n))
        return;
    cpu_gemm_ctx c = {y, x, w->data, w->dtype, n, w->shape[1], w->shape[0], b->isa};
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
