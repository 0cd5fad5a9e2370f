/* cpu_gemm_amx.c — the amx path's prefill GEMM: y [n, out] = x [n, in] · Wᵀ for bf16 W on
 * AMX-BF16 tiles.
 *
 * Why: a prefill GEMM does n multiply-adds per weight, which the f32 vector kernels run at
 * 16 per cycle and a core's AMX unit at several hundred; the weights still come from memory
 * once per call.
 *
 * The tiles compute Cᵀ: a C tile is 16 outputs x 16 tokens (f32), the A tile 16 outputs x 32
 * inputs loaded straight from W (row stride in), the B tile 16 input pairs x 16 tokens x 2
 * from x, converted to bf16 (round to nearest even) and packed once per call as
 *   xp [n_pad / 16][in / 2][16][2] bf16: token block, input pair, token, pair member
 * so each B tile is 1 KiB of contiguous memory. Four C tiles (2 output x 2 token blocks) use
 * each loaded A and B tile twice; a C tile holds its whole sum over `in` and is written out
 * once, transposed into y. Work is split over blocks of 32 outputs; W's 32 rows stay in L2
 * while they meet every token block.
 *
 * Accuracy: every product x_i w_i has x_i rounded to bf16 (relative error <= 2^-9), sums in
 * f32: |y - y_exact| <= 2^-8 sum_i |x_i w_i|. Outputs past the last multiple of 16, and calls
 * with in % 32 != 0, run on the exact kernels. */
#include "cpu_internal.h"

#include <stdlib.h>

/* Fewest rows worth the conversion and packing of x (below: the exact GEMV, memory-bound). */
#define AMX_MIN_ROWS 16

#if defined(__x86_64__) && defined(__GNUC__) && (__GNUC__ >= 11 || defined(__clang__))
#include <immintrin.h>
#define CPU_HAVE_AMX 1
#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl")))
#define ALWAYS_INLINE __attribute__((always_inline))

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

typedef struct {
    float *y;           /* [n, out] */
    const float *x;     /* [n, in] */
    const uint16_t *w;  /* [out, in] bf16 */
    const uint32_t *xp; /* packed x, see above */
    int64_t n, n_tb, in, out;
} amx_ctx;

/* x rows [t0, t1) of token block tb into xp: pairs of bf16 as one 32-bit word. */
AMX_TARGET static void pack_x(uint32_t *xp, const float *x, int64_t n, int64_t in, int64_t tb)
{
    const int64_t kp_n = in / 2;
    uint32_t *dst = xp + tb * kp_n * 16;
    for (int t = 0; t < 16; t++) {
        int64_t row = tb * 16 + t;
        if (row >= n) {
            for (int64_t kp = 0; kp < kp_n; kp++)
                dst[kp * 16 + t] = 0;
            continue;
        }
        const float *xr = x + row * in;
        for (int64_t k = 0; k < in; k += 32) {
            /* 32 floats → 32 bf16 (round to nearest even; NaN kept quiet) → 16 pairs */
            __m512i lo = _mm512_castps_si512(_mm512_loadu_ps(xr + k));
            __m512i hi = _mm512_castps_si512(_mm512_loadu_ps(xr + k + 16));
            const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
            __m512i rlo = _mm512_add_epi32(lo, _mm512_add_epi32(bias, _mm512_and_si512(
                                                   _mm512_srli_epi32(lo, 16), one)));
            __m512i rhi = _mm512_add_epi32(hi, _mm512_add_epi32(bias, _mm512_and_si512(
                                                   _mm512_srli_epi32(hi, 16), one)));
            const __m512i absmask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
            __mmask16 nlo = _mm512_cmpgt_epu32_mask(_mm512_and_si512(lo, absmask), inf);
            __mmask16 nhi = _mm512_cmpgt_epu32_mask(_mm512_and_si512(hi, absmask), inf);
            rlo = _mm512_mask_or_epi32(rlo, nlo, lo, _mm512_set1_epi32(0x400000));
            rhi = _mm512_mask_or_epi32(rhi, nhi, hi, _mm512_set1_epi32(0x400000));
            /* words: low half = element 2j, high half = element 2j + 1 */
            __m256i blo = _mm512_cvtepi32_epi16(_mm512_srli_epi32(rlo, 16));
            __m256i bhi = _mm512_cvtepi32_epi16(_mm512_srli_epi32(rhi, 16));
            uint32_t pairs[16];
            _mm256_storeu_si256((__m256i *)pairs, blo);
            _mm256_storeu_si256((__m256i *)(pairs + 8), bhi);
            for (int j = 0; j < 16; j++)
                dst[(k / 2 + j) * 16 + t] = pairs[j];
        }
    }
}

/* 16 x 16 floats at c (row o = output, column t = token) into y[t][o0 + o] for t < nt. */
AMX_TARGET static void store_transposed(float *y, int64_t out, int64_t o0, const float *c, int nt)
{
    __m512 r[16], a[16], b[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps(c + i * 16);
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        __m512d a0 = _mm512_castps_pd(a[i]), a1 = _mm512_castps_pd(a[i + 1]);
        __m512d a2 = _mm512_castps_pd(a[i + 2]), a3 = _mm512_castps_pd(a[i + 3]);
        b[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        b[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        b[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        b[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    /* b[4i + j], 128-bit lane L: column 4L + j of rows 4i .. 4i+3 */
    for (int j = 0; j < 4; j++) {
        __m512 d0 = _mm512_shuffle_f32x4(b[j], b[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
        __m512 d1 = _mm512_shuffle_f32x4(b[j], b[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
        __m512 e0 = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
        __m512 e1 = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
        __m512 col[4] = {_mm512_shuffle_f32x4(d0, e0, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(d1, e1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(d0, e0, _MM_SHUFFLE(3, 1, 3, 1)),
                         _mm512_shuffle_f32x4(d1, e1, _MM_SHUFFLE(3, 1, 3, 1))};
        for (int L = 0; L < 4; L++) {
            int t = 4 * L + j;
            if (t < nt)
                _mm512_storeu_ps(y + (int64_t)t * out + o0, col[L]);
        }
    }
}

/* NO output tiles (1 or 2) x NT token tiles (1 or 2) at outputs o0, token block tb; the
 * tile numbers must be constants, hence the unrolled forms. */
AMX_TARGET static inline ALWAYS_INLINE void amx_block(const amx_ctx *a, int64_t o0, int64_t tb,
                                                      const int NO, const int NT)
{
    const int64_t in = a->in, kp_n = in / 2;
    const uint16_t *w0 = a->w + o0 * in, *w1 = w0 + 16 * in;
    const uint32_t *b0 = a->xp + tb * kp_n * 16, *b1 = b0 + kp_n * 16;
    const size_t wstride = (size_t)in * 2;
    _tile_zero(0);
    if (NT == 2)
        _tile_zero(1);
    if (NO == 2)
        _tile_zero(2);
    if (NO == 2 && NT == 2)
        _tile_zero(3);
    for (int64_t k = 0; k < in; k += 32) {
        _tile_loadd(4, w0 + k, wstride);
        _tile_loadd(6, b0 + k / 2 * 16, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (NT == 2) {
            _tile_loadd(7, b1 + k / 2 * 16, 64);
            _tile_dpbf16ps(1, 4, 7);
        }
        if (NO == 2) {
            _tile_loadd(5, w1 + k, wstride);
            _tile_dpbf16ps(2, 5, 6);
            if (NT == 2)
                _tile_dpbf16ps(3, 5, 7);
        }
    }
    float c[16 * 16] __attribute__((aligned(64)));
    const int64_t t0 = tb * 16;
    int nt0 = a->n - t0 < 16 ? (int)(a->n - t0) : 16;
    int nt1 = a->n - t0 - 16 < 16 ? (int)(a->n - t0 - 16) : 16;
    float *yb = a->y + t0 * a->out;
    _tile_stored(0, c, 64);
    store_transposed(yb, a->out, o0, c, nt0);
    if (NT == 2) {
        _tile_stored(1, c, 64);
        store_transposed(yb + 16 * a->out, a->out, o0, c, nt1);
    }
    if (NO == 2) {
        _tile_stored(2, c, 64);
        store_transposed(yb, a->out, o0 + 16, c, nt0);
        if (NT == 2) {
            _tile_stored(3, c, 64);
            store_transposed(yb + 16 * a->out, a->out, o0 + 16, c, nt1);
        }
    }
}

/* Items are blocks of 32 outputs (the last one may hold 16). */
AMX_TARGET static void amx_items(void *ctx, int64_t i0, int64_t i1)
{
    const amx_ctx *a = ctx;
    amx_config cfg = {.palette = 1};
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    const int64_t out16 = a->out / 16 * 16;
    for (int64_t it = i0; it < i1; it++) {
        const int64_t o0 = it * 32;
        const int two = o0 + 32 <= out16;
        int64_t tb = 0;
        for (; tb + 2 <= a->n_tb; tb += 2) {
            if (two)
                amx_block(a, o0, tb, 2, 2);
            else
                amx_block(a, o0, tb, 1, 2);
        }
        if (tb < a->n_tb) {
            if (two)
                amx_block(a, o0, tb, 2, 1);
            else
                amx_block(a, o0, tb, 1, 1);
        }
    }
    _tile_release();
}

AMX_TARGET static void pack_items(void *ctx, int64_t tb0, int64_t tb1)
{
    const amx_ctx *a = ctx;
    for (int64_t tb = tb0; tb < tb1; tb++)
        pack_x((uint32_t *)a->xp, a->x, a->n, a->in, tb);
}
#endif

int cpu_gemm_amx_takes(const llmrt_backend *b, const llmrt_tensor *w, int32_t n)
{
#ifdef CPU_HAVE_AMX
    return b->simd == CPU_SIMD_AMX && w->dtype == LLMRT_DTYPE_BF16 && n >= AMX_MIN_ROWS &&
           w->shape[1] % 32 == 0 && w->shape[0] >= 16;
#else
    (void)b, (void)w, (void)n;
    return 0;
#endif
}

llmrt_status cpu_gemm_amx(llmrt_backend *b, float *y, const float *x, const llmrt_tensor *w,
                          int32_t n, llmrt_error *err)
{
#ifdef CPU_HAVE_AMX
    const int64_t in = w->shape[1], out = w->shape[0], out16 = out / 16 * 16;
    const int64_t n_tb = (n + 15) / 16;
    uint32_t *xp = aligned_alloc(64, (size_t)(n_tb * 16 * in) * 2);
    if (!xp)
        return llmrt_fail(err, LLMRT_ERR_NOMEM,
                          "cpu backend: gemm: out of memory for %lld x %lld packed activations",
                          (long long)(n_tb * 16), (long long)in);
    amx_ctx c = {y, x, w->data, xp, n, n_tb, in, out};
    cpu_parallel(b, n_tb, 16 * in, 1, pack_items, &c);
    cpu_parallel(b, (out16 + 31) / 32, (int64_t)n * in * 32, 1, amx_items, &c);
    if (out16 < out)
        cpu_gemm_exact_cols(b, y, x, w, n, out16, out);
    free(xp);
    return LLMRT_OK;
#else
    (void)b, (void)y, (void)x, (void)w, (void)n;
    return llmrt_fail(err, LLMRT_ERR_INTERNAL, "cpu backend: gemm: built without AMX");
#endif
}
