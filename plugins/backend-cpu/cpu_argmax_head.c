/* cpu_argmax_head.c — greedy decoding's output projection without computing every logit
 * exactly (the "llmrt.argmax_head" extension, contract in ext/argmax_head.h).
 *
 * Why: a decode step reads the whole lm_head [vocab, d] (Qwen3-0.6B: 311 MB of bf16 or f16,
 * a quarter to over half of the step's bytes), yet a greedy step needs only the argmax. An
 * int8 copy (one scale per row) is half the bytes, and its logit is provably close to the
 * logit L_j that cpu_gemm computes (the design of backend-cuda's cuda_argmax_head.cu, with x
 * kept in f32 here, so there is no activation error term):
 *   A_j = s_j Σ_i x_i q_ji,   q_j = round(w_j / s_j), s_j = max|w_j| / 127
 *   |L_j - A_j| <= b_j = c1_j ||x||,   c1_j = ||w_j - s_j q_j|| + 2γ (||w_j|| + ||s_j q_j||)
 * (Cauchy-Schwarz on the weight error, and γ = d u / (1 - d u), u = 2^-24, for the f32
 * rounding of gemm's sum and of the screen's, in any order). So the argmax of L is among the
 * rows with A_j + b_j >= T = max_i (A_i - b_i), and only those are recomputed, by cpu_gemm
 * itself on a one-row view of w: the ids gemm + argmax give, lowest index on ties. Slack: b
 * is taken x (1 + 1e-3) plus |A| 2^-20, for the rounding of the norms and of A ± b. A row of w
 * that is not finite is always a candidate (c1 = inf); a row of x that is not finite is
 * answered by gemm + argmax over the whole vocabulary.
 *
 *   screen (parallel over chunks of the vocabulary): A [n, vocab] and, per chunk and row,
 *           max_j (A_j - b_j); four weight rows per pass, each row of x against them
 *   select: T_r = max over chunks; the candidates' exact logits; the largest, lowest j
 *
 * Where the CPU has AVX2 the screen multiplies integers (vpmaddwd, or vpdpwssd on the avx512
 * and amx paths; the f32 screen is left to other CPUs): x is rounded to int16 per row,
 * x'_i = t qx_i, t = max|x| / Q (Q <= 32767, small enough that no int32 lane of the sums can
 * overflow), and Σ q_ji qx_i is exact (vpmaddwd, int32 lanes, an int64 total), so A_j =
 * s_j t Σ q_ji qx_i, and the rounding of x adds |Σ_i (x_i - x'_i) s_j q_ji| <= (t / 2) c2_j,
 * c2_j = s_j Σ_i |q_ji|, to the bound: b_j = c1_j ||x|| + c2_j t / 2. It reads each weight
 * byte with one sign extension and one multiply-add for two, where the f32 screen converts
 * every weight to a float; the candidates, and so the ids, are those of the same rule. */
#include "cpu_internal.h"

#include <math.h>
#include <stdlib.h>

#define AH_MAX_ROWS 8
#define AH_CHUNK 256 /* vocabulary rows per parallel item */
#define AH_PREP_CHUNK 4096 /* elements of a row of w converted at a time */
#define ALWAYS_INLINE __attribute__((always_inline))

struct llmrt_argmax_head {
    llmrt_tensor w;   /* [vocab, d] the caller's weights (the exact logits) */
    int64_t vocab, d;
    int32_t max_rows;
    int8_t *q;        /* [vocab, d] */
    float *scale;     /* [vocab] s_j */
    float *c1;        /* [vocab] */
    float *c2;        /* [vocab] s_j Σ_i |q_ji| (the integer screens' x rounding) */
    int16_t *qx;      /* [max_rows, d] x rounded for the integer screens */
    float *approx;    /* [max_rows, vocab] A */
    float *part;      /* [max_rows, n_chunks] max (A - b) per chunk */
    int64_t n_chunks;
    uint64_t calls, candidates; /* statistics (debug log at destroy) */
};

/* ---- create ---- */

typedef struct {
    llmrt_argmax_head *h;
    double gamma;
    cpu_isa isa;
} prep_ctx;

/* Rows [j0, j1) of w into q, scale and c1. Written once and compiled per ISA (the double
 * sums in 8 explicit lanes, so they vectorize without reassociation; rintf inlines as a
 * rounding instruction where the ISA has one). */
typedef float f32v8_ah __attribute__((vector_size(32)));
typedef int32_t i32v8_ah __attribute__((vector_size(32)));
typedef double f64v8_ah __attribute__((vector_size(64)));
#define DEFINE_PREP(SUF, ATTR)                                                                 \
    ATTR static void prep_rows_##SUF(void *c, int64_t j0, int64_t j1)                          \
    {                                                                                          \
        const prep_ctx *p = c;                                                                 \
        llmrt_argmax_head *h = p->h;                                                           \
        const int64_t d = h->d;                                                                \
        const size_t es = llmrt_dtype_size(h->w.dtype);                                        \
        float row[AH_PREP_CHUNK];                                                              \
        int8_t qrow[AH_PREP_CHUNK];                                                            \
        for (int64_t j = j0; j < j1; j++) {                                                    \
            const char *src = (const char *)h->w.data + (size_t)(j * d) * es;                  \
            /* max |w| and 0 * w (NaN for a NaN or infinite w) in 16 lanes, zero padded */     \
            float mx[16] = {0}, fin[16] = {0};                                                 \
            for (int64_t i0 = 0; i0 < d; i0 += AH_PREP_CHUNK) {                                \
                const int64_t m = d - i0 < AH_PREP_CHUNK ? d - i0 : AH_PREP_CHUNK;             \
                const int64_t m16 = (m + 15) / 16 * 16;                                        \
                cpu_row_to_f32(row, src + (size_t)i0 * es, h->w.dtype, m);                     \
                memset(row + m, 0, (size_t)(m16 - m) * sizeof(float));                         \
                for (int64_t i = 0; i < m16; i += 16)                                          \
                    for (int l = 0; l < 16; l++) {                                             \
                        const float a = fabsf(row[i + l]);                                     \
                        mx[l] = a > mx[l] ? a : mx[l];                                         \
                        fin[l] += 0.0f * row[i + l];                                           \
                    }                                                                          \
            }                                                                                  \
            float mxa = 0.0f, fina = 0.0f;                                                     \
            for (int l = 0; l < 16; l++)                                                       \
                mxa = mx[l] > mxa ? mx[l] : mxa, fina += fin[l];                               \
            if (!(fina == 0.0f && mxa <= 3.4e38f)) { /* not finite: always a candidate */      \
                memset(h->q + j * d, 0, (size_t)d);                                            \
                h->scale[j] = 0.0f;                                                            \
                h->c1[j] = INFINITY;                                                           \
                h->c2[j] = 0.0f;                                                               \
                continue;                                                                      \
            }                                                                                  \
            const float s = mxa / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;                    \
            f64v8_ah ee = {0}, ww = {0}, qq = {0};                                             \
            int64_t qa = 0; /* Σ |q| */                                                        \
            for (int64_t i0 = 0; i0 < d; i0 += AH_PREP_CHUNK) {                                \
                const int64_t m = d - i0 < AH_PREP_CHUNK ? d - i0 : AH_PREP_CHUNK;             \
                const int64_t m8 = (m + 7) / 8 * 8;                                            \
                cpu_row_to_f32(row, src + (size_t)i0 * es, h->w.dtype, m);                     \
                memset(row + m, 0, (size_t)(m8 - m) * sizeof(float));                          \
                for (int64_t i = 0; i < m8; i += 8) {                                          \
                    f32v8_ah v;                                                                \
                    memcpy(&v, row + i, sizeof v);                                             \
                    /* round to nearest even: |v / s| <= 127 < 2^22 */                         \
                    f32v8_ah qf = (v * inv + 0x1.8p23f) - 0x1.8p23f;                           \
                    i32v8_ah qi = __builtin_convertvector(qf, i32v8_ah);                       \
                    for (int l = 0; l < 8; l++) {                                              \
                        qrow[i + l] = (int8_t)qi[l];                                           \
                        qa += qi[l] < 0 ? -qi[l] : qi[l];                                      \
                    }                                                                          \
                    /* exact in double: s q is 24 x 8 bits, v - s q then exact */              \
                    f64v8_ah vd = __builtin_convertvector(v, f64v8_ah);                        \
                    f64v8_ah ws = (double)s * __builtin_convertvector(qf, f64v8_ah);           \
                    f64v8_ah e = vd - ws;                                                      \
                    ee += e * e, ww += vd * vd, qq += ws * ws;                                 \
                }                                                                              \
                memcpy(h->q + j * d + i0, qrow, (size_t)m);                                    \
            }                                                                                  \
            double se = 0, sw = 0, sq = 0;                                                     \
            for (int l = 0; l < 8; l++)                                                        \
                se += ee[l], sw += ww[l], sq += qq[l];                                         \
            h->scale[j] = s;                                                                   \
            h->c2[j] = (float)((double)s * (double)qa * 1.0001);                               \
            const double c1 = sqrt(se) + 2.0 * p->gamma * (sqrt(sw) + sqrt(sq));               \
            h->c1[j] = (float)(c1 * 1.0001);                                                   \
        }                                                                                      \
    }

DEFINE_PREP(base, )
#if defined(__x86_64__) && defined(__GNUC__)
DEFINE_PREP(avx2, __attribute__((target("avx2,f16c"))))
DEFINE_PREP(avx512, __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c"))))
#endif

static void prep_rows(void *c, int64_t j0, int64_t j1)
{
    const prep_ctx *p = c;
#if defined(__x86_64__) && defined(__GNUC__)
    if (p->isa == CPU_ISA_AVX512) {
        prep_rows_avx512(c, j0, j1);
        return;
    }
    if (p->isa == CPU_ISA_AVX2) {
        prep_rows_avx2(c, j0, j1);
        return;
    }
#endif
    prep_rows_base(c, j0, j1);
}

llmrt_status cpu_argmax_head_create(llmrt_backend *b, const llmrt_tensor *w, int32_t max_rows,
                                    llmrt_argmax_head **out, llmrt_error *err)
{
    *out = NULL;
    if (!w || !w->data || w->ndim != 2 || !cpu_is_float_dtype(w->dtype))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cpu argmax_head: w must be a 2-D F32/F16/BF16 tensor");
    const int64_t vocab = w->shape[0], d = w->shape[1];
    if (vocab < 1 || vocab > INT32_MAX || d < 1 || d > (1 << 20))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cpu argmax_head: w [%lld, %lld] is outside [1, 2^31) x [1, 2^20]",
                          (long long)vocab, (long long)d);
    if (max_rows < 1 || max_rows > AH_MAX_ROWS)
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cpu argmax_head: %d rows per call; 1..%d are supported", max_rows,
                          AH_MAX_ROWS);
    llmrt_argmax_head *h = calloc(1, sizeof *h);
    if (!h)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu argmax_head: out of memory");
    h->w = *w;
    h->vocab = vocab, h->d = d, h->max_rows = max_rows;
    h->n_chunks = (vocab + AH_CHUNK - 1) / AH_CHUNK;
    void *qmem = NULL; /* huge pages, like the weights (cpu_memory.c) */
    if (cpu_dev_alloc(b, (size_t)(vocab * d), &qmem, err) != LLMRT_OK) {
        free(h);
        return LLMRT_ERR_NOMEM;
    }
    h->q = qmem;
    cpu_advise_huge(qmem, (size_t)(vocab * d));
    h->scale = malloc((size_t)vocab * sizeof(float));
    h->c1 = malloc((size_t)vocab * sizeof(float));
    h->c2 = malloc((size_t)vocab * sizeof(float));
    h->qx = malloc((size_t)(max_rows * d) * sizeof(int16_t));
    h->approx = malloc((size_t)(max_rows * vocab) * sizeof(float));
    h->part = malloc((size_t)(max_rows * h->n_chunks) * sizeof(float));
    if (!h->q || !h->scale || !h->c1 || !h->c2 || !h->qx || !h->approx || !h->part) {
        cpu_argmax_head_destroy(b, h);
        return llmrt_fail(err, LLMRT_ERR_NOMEM,
                          "cpu argmax_head: out of memory for an int8 copy of w [%lld, %lld] "
                          "(%.1f MB)",
                          (long long)vocab, (long long)d, (double)(vocab * d) * 1e-6);
    }
    const double u = 0x1p-24;
    prep_ctx c = {h, (double)d * u / (1.0 - (double)d * u), b->isa};
    cpu_parallel(b, vocab, 4 * d, 64, prep_rows, &c);
    *out = h;
    return LLMRT_OK;
}

void cpu_argmax_head_destroy(llmrt_backend *b, llmrt_argmax_head *h)
{
    if (!h)
        return;
    if (b && b->host && b->host->log && h->calls)
        b->host->log(b->host->ctx, LLMRT_LOG_DEBUG, "cpu",
                     "cpu argmax_head: %llu rows, %.1f candidates per row",
                     (unsigned long long)h->calls, (double)h->candidates / (double)h->calls);
    if (h->q)
        cpu_dev_free(b, h->q);
    free(h->scale);
    free(h->c1);
    free(h->c2);
    free(h->qx);
    free(h->approx);
    free(h->part);
    free(h);
}

/* ---- forward ---- */

typedef struct {
    llmrt_argmax_head *h;
    const float *x; /* [n, d] */
    const float *bx; /* [n] ||x_r|| (1 + 1e-3) */
    const float *bt; /* [n] integer screens: t_r / 2 (1 + 1e-3), x's rounding; else 0 */
    const float *tq; /* [n] integer screens: t_r (x_r = t_r qx_r) */
    int32_t n;
    cpu_isa isa;
    int vnni; /* the integer screen on AVX-512 VNNI (the avx512 and amx paths) */
} screen_ctx;

/* A for vocabulary rows [j0, j1) (j1 - j0 a multiple of C, or the tail with C = 1) of every
 * row of x, in VW-float vectors: C weight rows per pass, so C independent sums per row of x. */
#define DEFINE_SCREEN(SUF, VW, ATTR)                                                           \
    typedef float f32v_##SUF __attribute__((vector_size(VW * 4)));                             \
    ATTR static inline ALWAYS_INLINE void screen_rows_##SUF(const screen_ctx *s, int64_t j,    \
                                                            const int C)                       \
    {                                                                                          \
        const llmrt_argmax_head *h = s->h;                                                     \
        const int64_t d = h->d;                                                                \
        for (int32_t r = 0; r < s->n; r++) {                                                   \
            const float *x = s->x + r * d;                                                     \
            const f32v_##SUF zero = {0};                                                       \
            f32v_##SUF acc[4] = {zero, zero, zero, zero};                                      \
            float tail[4] = {0, 0, 0, 0};                                                      \
            int64_t i = 0;                                                                     \
            for (; i + VW <= d; i += VW) {                                                     \
                f32v_##SUF xv;                                                                 \
                memcpy(&xv, x + i, sizeof xv);                                                 \
                for (int c = 0; c < C; c++) {                                                  \
                    acc[c] += xv * Q_TO_F32_##SUF(h->q + (j + c) * d + i);                     \
                }                                                                              \
            }                                                                                  \
            for (; i < d; i++)                                                                 \
                for (int c = 0; c < C; c++)                                                    \
                    tail[c] += x[i] * (float)h->q[(j + c) * d + i];                            \
            for (int c = 0; c < C; c++) {                                                      \
                float sum = tail[c];                                                           \
                for (int l = 0; l < VW; l++)                                                   \
                    sum += acc[c][l];                                                          \
                h->approx[r * h->vocab + j + c] = h->scale[j + c] * sum;                       \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    ATTR static void screen_##SUF(const screen_ctx *s, int64_t j0, int64_t j1)                 \
    {                                                                                          \
        int64_t j = j0;                                                                        \
        for (; j + 4 <= j1; j += 4)                                                            \
            screen_rows_##SUF(s, j, 4);                                                        \
        for (; j < j1; j++)                                                                    \
            screen_rows_##SUF(s, j, 1);                                                        \
    }

/* VW int8 weights from p as floats (GCC widens a generic int8 vector element by element:
 * the x86 kernels sign-extend with one instruction) */
typedef float f32v4_ah __attribute__((vector_size(16)));
static inline ALWAYS_INLINE f32v4_ah q_to_f32_base(const int8_t *p)
{
    f32v4_ah v = {(float)p[0], (float)p[1], (float)p[2], (float)p[3]};
    return v;
}
#define Q_TO_F32_base(p) q_to_f32_base(p)
DEFINE_SCREEN(base, 4, )
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_HAVE_X86_SCREEN 1
/* The integer screens (the header comment): x rounded to int16 (s->h->qx), each weight
 * byte sign-extended and multiplied in pairs into int32 lanes — vpmaddwd + vpaddd on avx2,
 * vpdpwssd on AVX-512 VNNI (the avx512 and amx paths). The sums are exact integers, so their
 * order is free: one weight row at a time against all N rows of x, U accumulators per row of
 * x so the chains do not wait on each other, and the weights read as one stream, prefetched
 * AH_PREFETCH_BYTES ahead (four rows side by side, the first layout, made four short streams
 * the hardware prefetcher did not follow). Each lane takes at most as many products as
 * round_x_avx2's Q allows for. DEFINE_INT_SCREEN(SUF, ATTR, VI, VT, ZERO, WLOAD, MAC) defines
 * screen_<SUF>(s, j0, j1): VI inputs per step, VT an accumulator of VI / 2 int32 lanes,
 * ZERO() its zero, WLOAD(p) VI weight bytes as int16, MAC(acc, w, p) acc + w x (VI int16
 * at p) summed in pairs. */
#define AH_PREFETCH_BYTES 4096
#define DEFINE_INT_SCREEN(SUF, ATTR, VI, VT, ZERO, WLOAD, MAC)                                 \
    ATTR static inline ALWAYS_INLINE void screen_rows_##SUF(const screen_ctx *s, int64_t j0,   \
                                                            int64_t j1, const int N)           \
    {                                                                                          \
        const llmrt_argmax_head *h = s->h;                                                     \
        const int64_t d = h->d, end = h->vocab * d;                                            \
        enum { UMAX = 4 };                                                                     \
        const int U = N >= 4 ? 1 : N >= 2 ? 2 : 4;                                             \
        for (int64_t j = j0; j < j1; j++) {                                                    \
            const int8_t *q = h->q + j * d;                                                    \
            VT acc[AH_MAX_ROWS][UMAX];                                                         \
            for (int r = 0; r < N; r++)                                                        \
                for (int u = 0; u < U; u++)                                                    \
                    acc[r][u] = ZERO();                                                        \
            int64_t i = 0;                                                                     \
            for (; i + VI * U <= d; i += VI * U)                                               \
                for (int u = 0; u < U; u++) {                                                  \
                    const int64_t k = i + VI * u;                                              \
                    if ((k & 63) == 0 && j * d + k + AH_PREFETCH_BYTES < end)                  \
                        _mm_prefetch((const char *)(q + k) + AH_PREFETCH_BYTES, _MM_HINT_T0);  \
                    const VT w = WLOAD(q + k);                                                 \
                    for (int r = 0; r < N; r++)                                                \
                        acc[r][u] = MAC(acc[r][u], w, h->qx + r * d + k);                      \
                }                                                                              \
            for (; i + VI <= d; i += VI) {                                                     \
                const VT w = WLOAD(q + i);                                                     \
                for (int r = 0; r < N; r++)                                                    \
                    acc[r][0] = MAC(acc[r][0], w, h->qx + r * d + i);                          \
            }                                                                                  \
            for (int r = 0; r < N; r++) {                                                      \
                const int16_t *xq = h->qx + r * d;                                             \
                int64_t sum = 0;                                                               \
                for (int64_t t = i; t < d; t++)                                                \
                    sum += (int64_t)xq[t] * q[t];                                              \
                for (int u = 0; u < U; u++) {                                                  \
                    int32_t lanes[VI / 2];                                                     \
                    memcpy(lanes, &acc[r][u], sizeof lanes);                                   \
                    for (int l = 0; l < VI / 2; l++)                                           \
                        sum += lanes[l];                                                       \
                }                                                                              \
                h->approx[r * h->vocab + j] = h->scale[j] * s->tq[r] * (float)sum;             \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    ATTR static void screen_##SUF(const screen_ctx *s, int64_t j0, int64_t j1)                 \
    {                                                                                          \
        switch (s->n) {                                                                        \
        case 1: screen_rows_##SUF(s, j0, j1, 1); break;                                        \
        case 2: screen_rows_##SUF(s, j0, j1, 2); break;                                        \
        case 3: screen_rows_##SUF(s, j0, j1, 3); break;                                        \
        case 4: screen_rows_##SUF(s, j0, j1, 4); break;                                        \
        case 5: screen_rows_##SUF(s, j0, j1, 5); break;                                        \
        case 6: screen_rows_##SUF(s, j0, j1, 6); break;                                        \
        case 7: screen_rows_##SUF(s, j0, j1, 7); break;                                        \
        default: screen_rows_##SUF(s, j0, j1, 8); break;                                       \
        }                                                                                      \
    }

#define AH_AVX2 __attribute__((target("avx2")))
#define AH_ZERO_256() _mm256_setzero_si256()
#define AH_WLOAD_256(p) _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p)))
#define AH_MAC_256(acc, w, p)                                                                  \
    _mm256_add_epi32(acc, _mm256_madd_epi16(w, _mm256_loadu_si256((const __m256i *)(p))))
DEFINE_INT_SCREEN(avx2, AH_AVX2, 16, __m256i, AH_ZERO_256, AH_WLOAD_256, AH_MAC_256)

#define AH_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx2")))
#define AH_ZERO_512() _mm512_setzero_si512()
#define AH_WLOAD_512(p) _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(p)))
#define AH_MAC_512(acc, w, p) _mm512_dpwssd_epi32(acc, w, _mm512_loadu_si512((const void *)(p)))
DEFINE_INT_SCREEN(vnni, AH_VNNI, 32, __m512i, AH_ZERO_512, AH_WLOAD_512, AH_MAC_512)

/* Row x of d floats as int16 for the integer screens: qx = round(x / t), t = max|x| / Q with Q
 * the largest value (at most 32767) for which no int32 lane of screen_rows_avx2 can overflow
 * (d / 16 multiply-adds of two products of at most 127 Q each). Returns t. */
AH_AVX2 static float round_x_avx2(int16_t *qx, const float *x, int64_t d)
{
    const int64_t steps = (d + 15) / 16;
    int64_t qmax = (INT32_MAX / 254) / steps;
    if (qmax > 32767)
        qmax = 32767;
    float amax = 0.0f;
    for (int64_t i = 0; i < d; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    const float t = amax / (float)qmax, inv = amax > 0.0f ? (float)qmax / amax : 0.0f;
    for (int64_t i = 0; i < d; i++) {
        float v = rintf(x[i] * inv);
        v = v > (float)qmax ? (float)qmax : v < -(float)qmax ? -(float)qmax : v;
        qx[i] = (int16_t)v;
    }
    return t;
}
#endif

/* b_j for approximation a of row j (the header comment), with the slack for the rounding of
 * the norms and of A ± b: the screen's threshold and the select's test use the same one. */
static inline float ah_bound(const llmrt_argmax_head *h, int64_t j, float a, float bx, float bt)
{
    return h->c1[j] * bx + h->c2[j] * bt + fabsf(a) * 0x1p-20f;
}

static void screen_chunks(void *c, int64_t k0, int64_t k1)
{
    const screen_ctx *s = c;
    llmrt_argmax_head *h = s->h;
    for (int64_t k = k0; k < k1; k++) {
        const int64_t j0 = k * AH_CHUNK, j1 = j0 + AH_CHUNK < h->vocab ? j0 + AH_CHUNK : h->vocab;
#ifdef CPU_HAVE_X86_SCREEN
        if (s->vnni)
            screen_vnni(s, j0, j1);
        else if (s->isa >= CPU_ISA_AVX2)
            screen_avx2(s, j0, j1);
        else
#endif
            screen_base(s, j0, j1);
        for (int32_t r = 0; r < s->n; r++) {
            const float *a = h->approx + r * h->vocab;
            float t = -INFINITY;
            for (int64_t j = j0; j < j1; j++) {
                const float lo = a[j] - ah_bound(h, j, a[j], s->bx[r], s->bt[r]);
                t = lo > t ? lo : t; /* NaN (an infinite c1) never raises t */
            }
            h->part[r * h->n_chunks + k] = t;
        }
    }
}

/* gemm's logit of vocabulary row j for x, by gemm on a one-row view of w. */
static llmrt_status exact_logit(llmrt_backend *b, const llmrt_argmax_head *h, const float *x,
                                int64_t j, float *out, llmrt_error *err)
{
    llmrt_tensor row = h->w;
    row.shape[0] = 1;
    row.data = (char *)h->w.data + (size_t)(j * h->d) * llmrt_dtype_size(h->w.dtype);
    return cpu_gemm(b, out, x, &row, 1, err);
}

llmrt_status cpu_argmax_head_forward(llmrt_backend *b, llmrt_argmax_head *h, int32_t *out,
                                     const float *x, int32_t n, llmrt_error *err)
{
    if (n < 1 || n > h->max_rows)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu argmax_head: n = %d rows (this head takes 1..%d)", n, h->max_rows);
    float bx[AH_MAX_ROWS];
    int finite_rows = 1;
    for (int32_t r = 0; r < n; r++) {
        double ss = 0.0;
        for (int64_t i = 0; i < h->d; i++)
            ss += (double)x[r * h->d + i] * x[r * h->d + i];
        bx[r] = (float)(sqrt(ss) * 1.001);
        finite_rows &= isfinite(bx[r]) != 0;
    }
    if (!finite_rows) { /* a NaN or infinity in x: what gemm + argmax give, the long way */
        float *logits = malloc((size_t)(n * h->vocab) * sizeof(float));
        if (!logits)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu argmax_head: out of memory");
        llmrt_status st = cpu_gemm(b, logits, x, &h->w, n, err);
        if (st == LLMRT_OK)
            st = cpu_argmax(b, out, logits, n, (int32_t)h->vocab, err);
        free(logits);
        return st;
    }
    /* the integer screens' x in int16 (its rounding joins the bound); elsewhere f32 x */
    float bt[AH_MAX_ROWS], tq[AH_MAX_ROWS];
    for (int32_t r = 0; r < n; r++) {
        bt[r] = tq[r] = 0.0f;
#ifdef CPU_HAVE_X86_SCREEN
        if (b->isa >= CPU_ISA_AVX2) {
            tq[r] = round_x_avx2(h->qx + r * h->d, x + r * h->d, h->d);
            bt[r] = tq[r] * 0.5f * 1.001f;
        }
#endif
    }
    screen_ctx s = {h, x, bx, bt, tq, n, b->isa,
                    b->simd == CPU_SIMD_AVX512 || b->simd == CPU_SIMD_AMX};
    cpu_parallel(b, h->n_chunks, (int64_t)AH_CHUNK * h->d * n, 1, screen_chunks, &s);
    for (int32_t r = 0; r < n; r++) {
        float t = -INFINITY;
        for (int64_t k = 0; k < h->n_chunks; k++)
            t = h->part[r * h->n_chunks + k] > t ? h->part[r * h->n_chunks + k] : t;
        const float *a = h->approx + r * h->vocab;
        const float *xr = x + r * h->d;
        int64_t best = -1;
        float bv = 0.0f;
        for (int64_t j = 0; j < h->vocab; j++) {
            const float hi = a[j] + ah_bound(h, j, a[j], bx[r], bt[r]);
            if (!(hi >= t) && !isnan(hi)) /* a NaN bound: w_j not finite, always a candidate */
                continue;
            float l;
            llmrt_status st = exact_logit(b, h, xr, j, &l, err);
            if (st)
                return st;
            h->candidates++;
            /* cpu_argmax's rule: strictly greater wins (lowest index on ties), a NaN never */
            if (best < 0 ? l == l : l > bv) {
                best = j;
                bv = l;
            }
        }
        out[r] = best < 0 ? 0 : (int32_t)best;
        h->calls++;
    }
    return LLMRT_OK;
}
