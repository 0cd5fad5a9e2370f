/* cpu_gemm.c — dense y [n, out] = x [n, in] · Wᵀ with W [out, in] in F32/F16/BF16.
 *
 * Why: decode on the CPU is a stream of GEMVs limited by memory bandwidth, so the weight
 * row is converted to f32 on the fly (never materialised) and read once per block of rows.
 * Work is split over output columns; each thread walks its columns for a block of up to
 * GEMM_ROW_BLOCK rows, R_MAX rows at a time, so a weight row loaded from memory stays in L1
 * while it meets every row of the block.
 *
 * These are the exact kernels: GNU C vector types (GCC, Clang) with VW floats per vector, an
 * AVX-512 kernel (VW 16) and an AVX2+F16C one (VW 8) picked at run time and a baseline one
 * (VW 4: SSE2, NEON). Accumulation runs in 16 lanes, lane l taking elements i ≡ l (mod 16) in
 * increasing i, lanes added in a fixed order: every y element gets the same f32 operations in
 * the same order whatever the ISA, the thread count, the block it falls in, or n (mul and add
 * stay separate: -ffp-contract=off). On the fast paths (cpu_simd.c) the same kernels run the
 * decode GEMVs, which are bound by memory, not arithmetic; prefill-sized calls go to FMA
 * register tiles (cpu_gemm_fma.c), on the amx path bf16 weights to the AMX tiles
 * (cpu_gemm_amx.c). */
#include "cpu_internal.h"

#define LANES 16
#define GEMM_ROW_BLOCK 64
#define GEMM_PREFETCH_BYTES 16384 /* dot1 (kernels defined with PF): how far ahead it prefetches */
#define ALWAYS_INLINE __attribute__((always_inline))


static inline float lane_sum(const float *acc)
{
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

/* Scalar conversion for the tail, by dtype (DT is a constant after inlining). */
static inline ALWAYS_INLINE float w_scalar(const void *w, int64_t i, const int DT)
{
    if (DT == LLMRT_DTYPE_F32)
        return ((const float *)w)[i];
    if (DT == LLMRT_DTYPE_BF16)
        return cpu_bf16_to_f32(((const uint16_t *)w)[i]);
    return cpu_f16_to_f32(((const uint16_t *)w)[i]);
}

/* DEFINE_GEMM_KERNEL(SUF, VW, R_MAX, PF, ATTR) defines cols_<SUF>(g, o0, o1): outputs [o0, o1)
 * for all rows. The f16 conversion is cpu_f16_to_f32's formula on vectors. */
#define DEFINE_GEMM_KERNEL(SUF, VW, R_MAX, PF, ATTR)                                           \
    typedef float f32v_##SUF __attribute__((vector_size(VW * 4)));                             \
    typedef uint32_t u32v_##SUF __attribute__((vector_size(VW * 4)));                          \
    typedef int32_t i32v_##SUF __attribute__((vector_size(VW * 4)));                           \
    typedef uint16_t u16v_##SUF __attribute__((vector_size(VW * 2)));                          \
                                                                                               \
    /* VW weights from element i, as f32 */                                                    \
    ATTR static inline ALWAYS_INLINE f32v_##SUF wvec_##SUF(const void *w, int64_t i,           \
                                                           const int DT)                       \
    {                                                                                          \
        f32v_##SUF out;                                                                        \
        if (DT == LLMRT_DTYPE_F32) {                                                           \
            memcpy(&out, (const float *)w + i, sizeof out);                                    \
            return out;                                                                        \
        }                                                                                      \
        if (DT == LLMRT_DTYPE_BF16 && BF16_VEC_##SUF(&out, (const uint16_t *)w + i))           \
            return out;                                                                        \
        if (DT == LLMRT_DTYPE_F16 && HALF_VEC_##SUF(&out, (const uint16_t *)w + i))            \
            return out;                                                                        \
        u16v_##SUF h;                                                                          \
        memcpy(&h, (const uint16_t *)w + i, sizeof h);                                         \
        u32v_##SUF u = __builtin_convertvector(h, u32v_##SUF);                                 \
        if (DT == LLMRT_DTYPE_BF16) {                                                          \
            u <<= 16;                                                                          \
            memcpy(&out, &u, sizeof out);                                                      \
            return out;                                                                        \
        }                                                                                      \
        u32v_##SUF em = (u & 0x7fffu) << 13;                                                   \
        u32v_##SUF infnan = (u32v_##SUF)((u & 0x7c00u) == 0x7c00u) & 0x7f800000u;              \
        u32v_##SUF bits = em | infnan;                                                         \
        f32v_##SUF mag;                                                                        \
        memcpy(&mag, &bits, sizeof mag);                                                       \
        mag *= 0x1p112f;                                                                       \
        memcpy(&bits, &mag, sizeof bits);                                                      \
        bits |= (u & 0x8000u) << 16;                                                           \
        memcpy(&out, &bits, sizeof out);                                                       \
        return out;                                                                            \
    }                                                                                          \
                                                                                               \
    /* weight row w against R rows of x: y[r * y_stride] = x[r] · w */                         \
    ATTR static inline ALWAYS_INLINE void dot_##SUF(const void *w, const float *restrict x,    \
                                                    int64_t in, float *restrict y,             \
                                                    int64_t y_stride, const int R,             \
                                                    const int DT)                              \
    {                                                                                          \
        enum { NV = LANES / VW };                                                              \
        const f32v_##SUF zero = {0};                                                           \
        f32v_##SUF acc[R_MAX][NV];                                                             \
        for (int r = 0; r < R; r++)                                                            \
            for (int v = 0; v < NV; v++)                                                       \
                acc[r][v] = zero;                                                              \
        int64_t i = 0;                                                                         \
        for (; i + LANES <= in; i += LANES) {                                                  \
            f32v_##SUF wv[NV];                                                                 \
            for (int v = 0; v < NV; v++)                                                       \
                wv[v] = wvec_##SUF(w, i + v * VW, DT);                                         \
            for (int r = 0; r < R; r++)                                                        \
                for (int v = 0; v < NV; v++) {                                                 \
                    f32v_##SUF xv;                                                             \
                    memcpy(&xv, x + r * in + i + v * VW, sizeof xv);                           \
                    acc[r][v] += xv * wv[v];                                                   \
                }                                                                              \
        }                                                                                      \
        for (int r = 0; r < R; r++) {                                                          \
            float lanes[LANES];                                                                \
            memcpy(lanes, acc[r], sizeof lanes);                                               \
            for (int64_t j = i; j < in; j++)                                                   \
                lanes[j - i] += x[r * in + j] * w_scalar(w, j, DT);                            \
            y[r * y_stride] = lane_sum(lanes);                                                 \
        }                                                                                      \
    }                                                                                          \
                                                                                               \
    /* one row of x against C weight rows (w_stride elements apart): C independent chains of   \
     * adds, so a single-row GEMV is not held up by the latency of one; each output still gets \
     * its lanes' operations in the fixed order */                                             \
    ATTR static inline ALWAYS_INLINE void dot1_##SUF(const void *w, int64_t w_stride,          \
                                                     const float *restrict x, int64_t in,      \
                                                     float *restrict y, const int C,           \
                                                     const int DT, const int pf)               \
    {                                                                                          \
        enum { NV = LANES / VW };                                                              \
        const size_t es = DT == LLMRT_DTYPE_F32 ? 4 : 2;                                       \
        const f32v_##SUF zero = {0};                                                           \
        f32v_##SUF acc[4][NV];                                                                 \
        for (int c = 0; c < C; c++)                                                            \
            for (int v = 0; v < NV; v++)                                                       \
                acc[c][v] = zero;                                                              \
        int64_t i = 0;                                                                         \
        for (; i + LANES <= in; i += LANES) {                                                  \
            f32v_##SUF xv[NV];                                                                 \
            for (int v = 0; v < NV; v++)                                                       \
                memcpy(&xv[v], x + i + v * VW, sizeof xv[v]);                                  \
            /* a later pass's rows at these inputs (pf passes ahead, into L2): the hardware \
             * prefetcher alone leaves a decode GEMV's stream latency-bound */               \
            if (C == 4 && pf)                                                                  \
                for (int c = 0; c < C; c++)                                                    \
                    __builtin_prefetch((const char *)w +                                       \
                                           (size_t)((pf * C + c) * w_stride + i) * es,         \
                                       0, 2);                                                  \
            for (int c = 0; c < C; c++) {                                                      \
                const void *wc = (const char *)w + (size_t)(c * w_stride) * es;                \
                for (int v = 0; v < NV; v++)                                                   \
                    acc[c][v] += xv[v] * wvec_##SUF(wc, i + v * VW, DT);                       \
            }                                                                                  \
        }                                                                                      \
        for (int c = 0; c < C; c++) {                                                          \
            const void *wc = (const char *)w + (size_t)(c * w_stride) * es;                    \
            float lanes[LANES];                                                                \
            memcpy(lanes, acc[c], sizeof lanes);                                               \
            for (int64_t j = i; j < in; j++)                                                   \
                lanes[j - i] += x[j] * w_scalar(wc, j, DT);                                    \
            y[c] = lane_sum(lanes);                                                            \
        }                                                                                      \
    }                                                                                          \
                                                                                               \
    /* outputs [o0, o1): R_MAX-row tiles per weight row (and one of R_MAX / 2), then the rows  \
     * left over four weight rows at a time (which stay in L1 while they meet every leftover   \
     * row) */                                                                                 \
    ATTR static inline ALWAYS_INLINE void cols_dt_##SUF(const cpu_gemm_ctx *g, int64_t o0,         \
                                                        int64_t o1, const int DT)              \
    {                                                                                          \
        const int64_t in = g->in, out = g->out;                                                \
        const size_t es = DT == LLMRT_DTYPE_F32 ? 4 : 2;                                       \
        /* dot1's prefetch: about GEMM_PREFETCH_BYTES ahead, in passes of four rows */         \
        int pf_passes = (int)(GEMM_PREFETCH_BYTES / (4 * (size_t)in * es));                    \
        pf_passes = !PF ? 0 : pf_passes < 1 ? 1 : pf_passes > 8 ? 8 : pf_passes;               \
        for (int64_t r0 = 0; r0 < g->n; r0 += GEMM_ROW_BLOCK) {                                \
            const int64_t r1 = r0 + GEMM_ROW_BLOCK < g->n ? r0 + GEMM_ROW_BLOCK : g->n;        \
            int64_t rfull = r0 + (r1 - r0) / R_MAX * R_MAX;                                    \
            const int half = R_MAX >= 8 && r1 - rfull >= R_MAX / 2; /* one tile of R_MAX/2 */  \
            for (int64_t o = o0; o < o1;) {                                                    \
                const int C = o1 - o >= 4 ? 4 : 1;                                             \
                for (int c = 0; c < C; c++) {                                                  \
                    const void *wr = (const char *)g->w + (size_t)((o + c) * in) * es;         \
                    for (int64_t r = r0; r < rfull; r += R_MAX)                                \
                        dot_##SUF(wr, g->x + r * in, in, g->y + r * out + o + c, out, R_MAX,   \
                                  DT);                                                         \
                    if (half)                                                                  \
                        dot_##SUF(wr, g->x + rfull * in, in, g->y + rfull * out + o + c, out,  \
                                  R_MAX / 2, DT);                                              \
                }                                                                              \
                const void *wr = (const char *)g->w + (size_t)(o * in) * es;                   \
                for (int64_t r = rfull + (half ? R_MAX / 2 : 0); r < r1; r++) {                \
                    if (C == 4)                                                                \
                        dot1_##SUF(wr, in, g->x + r * in, in, g->y + r * out + o, 4, DT,       \
                                   o + (pf_passes + 1) * 4 <= o1 ? pf_passes : 0);             \
                    else                                                                       \
                        dot1_##SUF(wr, in, g->x + r * in, in, g->y + r * out + o, 1, DT, 0);   \
                }                                                                              \
                o += C;                                                                        \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
                                                                                               \
    ATTR static void cols_##SUF(const cpu_gemm_ctx *g, int64_t o0, int64_t o1)                     \
    {                                                                                          \
        switch (g->dt) {                                                                       \
        case LLMRT_DTYPE_F32: cols_dt_##SUF(g, o0, o1, LLMRT_DTYPE_F32); break;                \
        case LLMRT_DTYPE_BF16: cols_dt_##SUF(g, o0, o1, LLMRT_DTYPE_BF16); break;              \
        default: cols_dt_##SUF(g, o0, o1, LLMRT_DTYPE_F16); break;                             \
        }                                                                                      \
    }

/* Baseline: 16-byte vectors (SSE2 on x86-64, NEON on arm64); f16 by the formula. */
#define HALF_VEC_base(out, p) 0
#define BF16_VEC_base(out, p) 0
DEFINE_GEMM_KERNEL(base, 4, 2, 0, )

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_HAVE_X86_KERNELS 1
/* AVX2 + F16C: 32-byte vectors, four rows per weight pass, f16 by vcvtph2ps (exact, like the
 * formula). */
__attribute__((target("avx2,f16c"))) static inline ALWAYS_INLINE int half_vec_f16c(void *out,
                                                                                 const uint16_t *p)
{
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    memcpy(out, &v, sizeof v);
    return 1;
}
/* bf16: zero-extend straight from memory (vpmovzxwd) and shift; GCC's generic widening
 * of a 16-byte vector goes through two 128-bit halves. */
__attribute__((target("avx2"))) static inline ALWAYS_INLINE int bf16_vec_avx2(void *out,
                                                                           const uint16_t *p)
{
    __m256i v = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16);
    memcpy(out, &v, sizeof v);
    return 1;
}
#define HALF_VEC_avx2(out, p) half_vec_f16c(out, p)
#define BF16_VEC_avx2(out, p) bf16_vec_avx2(out, p)
/* (the prefetch: BENCHMARKS.md, 2026-12-02 fourth session and 2026-12-03) */
DEFINE_GEMM_KERNEL(avx2, 8, 4, 1, __attribute__((target("avx2,f16c"))))

/* AVX-512: one 64-byte vector holds the 16 lanes, eight rows per weight pass. */
#define CPU_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
CPU_AVX512_TARGET static inline ALWAYS_INLINE int half_vec_512(void *out, const uint16_t *p)
{
    __m512 v = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    memcpy(out, &v, sizeof v);
    return 1;
}
CPU_AVX512_TARGET static inline ALWAYS_INLINE int bf16_vec_512(void *out, const uint16_t *p)
{
    __m512i v =
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16);
    memcpy(out, &v, sizeof v);
    return 1;
}
#define HALF_VEC_avx512(out, p) half_vec_512(out, p)
#define BF16_VEC_avx512(out, p) bf16_vec_512(out, p)
DEFINE_GEMM_KERNEL(avx512, 16, 8, 1, CPU_AVX512_TARGET)
#endif

static void gemm_cols(void *c, int64_t o0, int64_t o1)
{
    const cpu_gemm_ctx *g = c;
#ifdef CPU_HAVE_X86_KERNELS
    if (g->isa == CPU_ISA_AVX512) {
        cols_avx512(g, o0, o1);
        return;
    }
    if (g->isa == CPU_ISA_AVX2) {
        cols_avx2(g, o0, o1);
        return;
    }
#endif
    cols_base(g, o0, o1);
}

void cpu_gemm_exact_cols(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                         int32_t n, int64_t o0, int64_t o1)
{
    cpu_gemm_ctx c = {y, x, w->data, w->dtype, n, w->shape[1], w->shape[0], b->isa};
    gemm_cols(&c, o0, o1);
}

llmrt_status cpu_gemm(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                      int32_t n, llmrt_error *err)
{
    if (!w || !w->data)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: gemm: weight is NULL");
    if (!cpu_is_float_dtype(w->dtype))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cpu backend: gemm: weight dtype %s is not supported (F32, F16, BF16)",
                          llmrt_dtype_name(w->dtype));
    if (w->ndim != 2 || w->shape[0] <= 0 || w->shape[1] <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: gemm: weight must be 2-D [out, in] with positive sizes "
                          "(ndim %d)", w->ndim);
    if (n < 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: gemm: n = %d", n);
    if (n == 0)
        return LLMRT_OK;
    if (cpu_gemm_amx_takes(b, w, n))
        return cpu_gemm_amx(b, y, x, w, n, err);
    if (cpu_gemm_fma_takes(b, n)) {
        cpu_gemm_fma(b, y, x, w, n);
        return LLMRT_OK;
    }
    cpu_gemm_ctx c = {y, x, w->data, w->dtype, n, w->shape[1], w->shape[0], b->isa};
    /* four chunks per thread: balanced even when another process takes a core for a while,
     * few enough to amortise the hand-off */
    int64_t grain = (c.out + 4 * b->n_threads - 1) / (4 * b->n_threads);
    if (grain < 16)
        grain = 16;
    cpu_parallel(b, c.out, c.in * n, grain, gemm_cols, &c);
    return LLMRT_OK;
}
