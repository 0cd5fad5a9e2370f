/* cpu_gemm.c — dense y [n, out] = x [n, in] · Wᵀ with W [out, in] in F32/F16/BF16.
 *
 * Why: decode on the CPU is a stream of GEMVs limited by memory bandwidth, so the weight
 * row is converted to f32 on the fly (never materialised) and read exactly once per block
 * of rows. Work is split over output columns; each thread walks its columns for a block of
 * up to GEMM_ROW_BLOCK rows, four rows at a time, so a weight row loaded from memory stays
 * in L1 while it meets every row of the block.
 *
 * Every y element is produced by the same sequence of f32 operations (16 lanes, added in a
 * fixed order) whatever the thread count, the block it falls in, or n. */
#include "cpu_internal.h"

#define LANES 16
#define GEMM_ROW_BLOCK 64
/* kernels are inlined into the per-ISA clones below, so each clone gets its own code */
#define ALWAYS_INLINE __attribute__((always_inline))

typedef struct {
    float *y;          /* [n, out] */
    const float *x;    /* [n, in] */
    const void *w;     /* [out, in] */
    llmrt_dtype dt;
    int64_t n, in, out;
} gemm_ctx;

static inline float lane_sum(const float *acc)
{
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

/* One weight row w (converted by CONV) against R rows of x: y[r * y_stride] = x[r] · w.
 * Weights are converted 64 at a time into wf (a plain loop the compiler vectorises), then
 * meet each of the R rows. Lane l accumulates elements i ≡ l (mod 16) in increasing i for
 * every R, so a row gives the same bits whether it is computed alone or in a block of four. */
#define DEFINE_DOT(NAME, WT, CONV, R)                                                          \
    static inline ALWAYS_INLINE void NAME(const WT *restrict w, const float *restrict x,      \
                                          int64_t in, float *restrict y, int64_t y_stride)   \
    {                                                                                          \
        float acc[R][LANES];                                                                   \
        for (int r = 0; r < R; r++)                                                            \
            for (int l = 0; l < LANES; l++)                                                    \
                acc[r][l] = 0.0f;                                                              \
        int64_t i = 0;                                                                         \
        for (; i + 64 <= in; i += 64) {                                                        \
            float wf[64];                                                                      \
            for (int k = 0; k < 64; k++)                                                       \
                wf[k] = CONV(w[i + k]);                                                        \
            for (int r = 0; r < R; r++)                                                        \
                for (int k = 0; k < 64; k += LANES)                                            \
                    for (int l = 0; l < LANES; l++)                                            \
                        acc[r][l] += x[r * in + i + k + l] * wf[k + l];                        \
        }                                                                                      \
        for (int l = 0; i < in; i++, l = (l + 1) % LANES) {                                    \
            float wv = CONV(w[i]);                                                             \
            for (int r = 0; r < R; r++)                                                        \
                acc[r][l] += x[r * in + i] * wv;                                               \
        }                                                                                      \
        for (int r = 0; r < R; r++)                                                            \
            y[r * y_stride] = lane_sum(acc[r]);                                                \
    }

#define CONV_F32(v) (v)
DEFINE_DOT(dot1_f32, float, CONV_F32, 1)
DEFINE_DOT(dot4_f32, float, CONV_F32, 4)
DEFINE_DOT(dot1_bf16, uint16_t, cpu_bf16_to_f32, 1)
DEFINE_DOT(dot4_bf16, uint16_t, cpu_bf16_to_f32, 4)
DEFINE_DOT(dot1_f16, uint16_t, cpu_f16_to_f32, 1)
DEFINE_DOT(dot4_f16, uint16_t, cpu_f16_to_f32, 4)

/* Columns [o0, o1) for all rows. Compiled twice (AVX2 and baseline x86-64) and picked at
 * load time; both do the same f32 operations in the same order, so results are equal. */
#define DEFINE_COLS(NAME, WT, DOT1, DOT4)                                                     \
    static inline ALWAYS_INLINE void NAME(const gemm_ctx *g, int64_t o0, int64_t o1)          \
    {                                                                                          \
        const WT *w = g->w;                                                                    \
        const int64_t in = g->in, out = g->out;                                                \
        for (int64_t r0 = 0; r0 < g->n; r0 += GEMM_ROW_BLOCK) {                                \
            int64_t r1 = r0 + GEMM_ROW_BLOCK < g->n ? r0 + GEMM_ROW_BLOCK : g->n;              \
            for (int64_t o = o0; o < o1; o++) {                                                \
                const WT *wr = w + o * in;                                                     \
                int64_t r = r0;                                                                \
                for (; r + 4 <= r1; r += 4)                                                    \
                    DOT4(wr, g->x + r * in, in, g->y + r * out + o, out);                      \
                for (; r < r1; r++)                                                            \
                    DOT1(wr, g->x + r * in, in, g->y + r * out + o, out);                      \
            }                                                                                  \
        }                                                                                      \
    }

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

DEFINE_COLS(cols_f32_impl, float, dot1_f32, dot4_f32)
DEFINE_COLS(cols_bf16_impl, uint16_t, dot1_bf16, dot4_bf16)
DEFINE_COLS(cols_f16_impl, uint16_t, dot1_f16, dot4_f16)

CLONES static void cols_f32(const gemm_ctx *g, int64_t o0, int64_t o1) { cols_f32_impl(g, o0, o1); }
CLONES static void cols_bf16(const gemm_ctx *g, int64_t o0, int64_t o1) { cols_bf16_impl(g, o0, o1); }
CLONES static void cols_f16(const gemm_ctx *g, int64_t o0, int64_t o1) { cols_f16_impl(g, o0, o1); }

static void gemm_cols(void *c, int64_t o0, int64_t o1)
{
    const gemm_ctx *g = c;
    switch (g->dt) {
    case LLMRT_DTYPE_F32: cols_f32(g, o0, o1); break;
    case LLMRT_DTYPE_BF16: cols_bf16(g, o0, o1); break;
    default: cols_f16(g, o0, o1); break;
    }
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
    gemm_ctx c = {y, x, w->data, w->dtype, n, w->shape[1], w->shape[0]};
    /* chunks of 16 columns: small enough to balance, large enough to amortise the call */
    int64_t grain = (c.out + 2 * b->n_threads - 1) / (2 * b->n_threads);
    if (grain < 16)
        grain = 16;
    cpu_parallel(b, c.out, c.in * n, grain, gemm_cols, &c);
    return LLMRT_OK;
}
