/* cpu_gemm.c — dense y [n, out] = x [n, in] · Wᵀ with W [out, in] in F32/F16/BF16.
 *
 * Why: decode on the CPU is a stream of GEMVs limited by memory bandwidth, so the weight
 * row is converted to f32 on the fly (never materialised) and read once per block of rows.
 * Work is split over output columns; each thread walks its columns for a block of up to
 * GEMM_ROW_BLOCK rows, R_MAX rows at a time, so a weight row loaded from memory stays in L1
 * while it meets every row of the block.
 *
 * The kernels use GNU C vector types (GCC, Clang) with VW floats per vector: an AVX2+F16C
 * kernel (VW 8) picked at run time and a baseline one (VW 4: SSE2, NEON). Accumulation runs in 16
 * lanes, lane l taking elements i ≡ l (mod 16) in increasing i, lanes added in a fixed order:
 * every y element gets the same f32 operations in the same order whatever the ISA, the
 * thread count, the block it falls in, or n. (-std=c11 keeps mul and add separate: no FMA.) */
#include "cpu_internal.h"

#define LANES 16
#define GEMM_ROW_BLOCK 64
#define ALWAYS_INLINE __attribute__((always_inline))

typedef struct {
    float *y;          /* [n, out] */
    const float *x;    /* [n, in] */
    const void *w;     /* [out, in] */
    llmrt_dtype dt;
    int64_t n, in, out;
    cpu_simd simd;
} gemm_ctx;

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

/* DEFINE_GEMM_KERNEL(SUF, VW, R_MAX, ATTR) defines cols_<SUF>(g, o0, o1): outputs [o0, o1)
 * for all rows. The f16 conversion is cpu_f16_to_f32's formula on vectors. */
#define DEFINE_GEMM_KERNEL(SUF, VW, R_MAX, ATTR)                                               \
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
    ATTR static inline ALWAYS_INLINE void cols_dt_##SUF(const gemm_ctx *g, int64_t o0,         \
                                                        int64_t o1, const int DT)              \
    {                                                                                          \
        const int64_t in = g->in, out = g->out;                                                \
        const size_t es = DT == LLMRT_DTYPE_F32 ? 4 : 2;                                       \
        for (int64_t r0 = 0; r0 < g->n; r0 += GEMM_ROW_BLOCK) {                                \
            int64_t r1 = r0 + GEMM_ROW_BLOCK < g->n ? r0 + GEMM_ROW_BLOCK : g->n;              \
            for (int64_t o = o0; o < o1; o++) {                                                \
                const void *wr = (const char *)g->w + (size_t)(o * in) * es;                   \
                int64_t r = r0;                                                                \
                for (; r + R_MAX <= r1; r += R_MAX)                                            \
                    dot_##SUF(wr, g->x + r * in, in, g->y + r * out + o, out, R_MAX, DT);      \
                for (; r < r1; r++)                                                            \
                    dot_##SUF(wr, g->x + r * in, in, g->y + r * out + o, out, 1, DT);          \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
                                                                                               \
    ATTR static void cols_##SUF(const gemm_ctx *g, int64_t o0, int64_t o1)                     \
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
DEFINE_GEMM_KERNEL(base, 4, 2, )

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define CPU_HAVE_AVX2_KERNEL 1
/* AVX2 + F16C: 32-byte vectors, four rows per weight pass, f16 by vcvtph2ps (exact, like the
 * formula); picked at run time. */
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
DEFINE_GEMM_KERNEL(avx2, 8, 4, __attribute__((target("avx2,f16c"))))
#endif

cpu_simd cpu_simd_detect(void)
{
#ifdef CPU_HAVE_AVX2_KERNEL
    /* AVX2 (the builtin also checks that the OS saves ymm registers) and F16C (CPUID.1:ECX
     * bit 29; not every compiler's builtin knows the name) */
    unsigned a, b, c, d;
    if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C))
        return CPU_SIMD_AVX2;
#endif
    return CPU_SIMD_BASELINE;
}

const char *cpu_simd_name(cpu_simd s)
{
    return s == CPU_SIMD_AVX2 ? "avx2" : "baseline";
}

static void gemm_cols(void *c, int64_t o0, int64_t o1)
{
    const gemm_ctx *g = c;
#ifdef CPU_HAVE_AVX2_KERNEL
    if (g->simd == CPU_SIMD_AVX2) {
        cols_avx2(g, o0, o1);
        return;
    }
#endif
    cols_base(g, o0, o1);
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
    gemm_ctx c = {y, x, w->data, w->dtype, n, w->shape[1], w->shape[0], b->simd};
    /* four chunks per thread: balanced even when another process takes a core for a while,
     * few enough to amortise the hand-off */
    int64_t grain = (c.out + 4 * b->n_threads - 1) / (4 * b->n_threads);
    if (grain < 16)
        grain = 16;
    cpu_parallel(b, c.out, c.in * n, grain, gemm_cols, &c);
    return LLMRT_OK;
}
