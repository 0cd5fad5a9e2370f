/* fp8_cpu.c — see fp8_cpu.h.
 *
 * Layout (one dev_alloc): w uint8 [out, in] e4m3 as in the checkpoint (row o's inputs are
 * contiguous: a dot product streams one row), then scale f32 [ceil(out/128), ceil(in/128)].
 *
 * e4m3 -> f32 on vectors: for a code c, the bits ((c & 0x7f) << 20) | ((c & 0x80) << 24) are
 * an f32 whose exponent field is e4m3's (bias 127 instead of 7) and whose top mantissa bits
 * are e4m3's; multiplying by 2^120 rebiases it exactly — subnormal codes (exponent 0) become
 * f32 subnormals that the multiply turns into the right normal numbers. NaN codes (0x7f,
 * 0xff) are refused at load, so every weight converts exactly to llmrt_e4m3_to_f32's value.
 *
 * The kernels use GNU C vector types (GCC, Clang), VW floats per vector, accumulating in 16
 * lanes (lane l: inputs i = l mod 16 in increasing order, the tail of a row that is not a
 * multiple of 16 added to its lane at the end, lanes summed 0..15): backend-cpu's exact gemm
 * order, which is what makes W8A16 equal to dequantize-then-gemm on the exact path bit for bit
 * (on every path: W8A16 does not take the fast paths' FMA tiles). No FMA contraction
 * (built with -ffp-contract=off, like -std=c11 gives). */
#include "fp8_cpu.h"

#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/cpu.h>

#include "fp8_act.h"

#define LANES 16
#define ROW_BLOCK 64  /* rows of x that meet a weight row while it is in L1 */
#define COLS_CHUNK 16 /* outputs per parallel_for item */
#define ALWAYS_INLINE __attribute__((always_inline))
#if defined(__x86_64__) && defined(__GNUC__)
#define FP8_HAVE_AVX2_KERNEL 1
#endif

struct fp8_cpu_linear {
    int64_t in, out, nkb, nrb; /* inputs, outputs, K blocks, row blocks */
    int avx2;                  /* run the AVX2 kernel */
    uint8_t *w;                /* [out, in] */
    float *scale;              /* [nrb, nkb] */
    void *mem;
    size_t bytes;
};

static void run_parallel(const llmrt_backend_ref *be, int64_t n,
                         void (*fn)(void *, int64_t, int64_t), void *ctx)
{
    if (LLMRT_VT_HAS(be->vt, llmrt_backend_vtable, parallel_for))
        be->vt->parallel_for(be->b, n, fn, ctx);
    else
        fn(ctx, 0, n);
}

/* The backend's vector path: the "llmrt.cpu" extension, else its native handle "cpu.simd"
 * (1.0 backends), else what this CPU supports. Both kernels give the same bits, so every path
 * but "baseline" (exact and the fast ones alike) runs the AVX2 kernel where the CPU has it. */
static int want_avx2(const llmrt_backend_ref *be)
{
#ifdef FP8_HAVE_AVX2_KERNEL
    const llmrt_cpu_ext *cx = (const llmrt_cpu_ext *)llmrt_backend_extension(
        be->vt, be->b, LLMRT_EXT_CPU, LLMRT_EXT_CPU_VERSION);
    const char *simd = NULL;
    if (cx && cx->struct_size >= sizeof *cx && cx->simd)
        simd = cx->simd(be->b);
    else if (LLMRT_VT_HAS(be->vt, llmrt_backend_vtable, native_handle))
        simd = be->vt->native_handle(be->b, "cpu.simd");
    return (!simd || strcmp(simd, "baseline") != 0) && __builtin_cpu_supports("avx2");
#else
    (void)be;
    return 0;
#endif
}

/* ---- load ---- */

typedef struct {
    fp8_cpu_linear *l;
    const fp8_part *parts;
    int n_parts;
    int64_t *first_nan; /* per chunk: first NaN element (row * in + col), or -1 */
} load_ctx;

#define LOAD_CHUNK 64 /* rows per parallel_for item */

static void load_chunk(void *c, int64_t c0, int64_t c1)
{
    const load_ctx *lc = c;
    fp8_cpu_linear *l = lc->l;
    const int64_t in = l->in;
    for (int64_t ch = c0; ch < c1; ch++) {
        int64_t r0 = ch * LOAD_CHUNK, r1 = r0 + LOAD_CHUNK < l->out ? r0 + LOAD_CHUNK : l->out;
        lc->first_nan[ch] = -1;
        for (int64_t r = r0; r < r1; r++) {
            /* the part holding row r */
            int64_t base = 0;
            int p = 0;
            while (p + 1 < lc->n_parts && r >= base + lc->parts[p].out)
                base += lc->parts[p++].out;
            const uint8_t *src = lc->parts[p].weight + (size_t)(r - base) * (size_t)in;
            uint8_t *dst = l->w + (size_t)r * (size_t)in;
            memcpy(dst, src, (size_t)in);
            if (lc->first_nan[ch] < 0)
                for (int64_t i = 0; i < in; i++)
                    if ((dst[i] & 0x7fu) == 0x7fu) {
                        lc->first_nan[ch] = r * in + i;
                        break;
                    }
        }
    }
}

llmrt_status fp8_cpu_load(const llmrt_backend_ref *be, const fp8_part *parts, int n_parts,
                          int64_t in, fp8_cpu_linear **out_l, llmrt_error *err)
{
    *out_l = NULL;
    int64_t out = 0;
    for (int p = 0; p < n_parts; p++)
        out += parts[p].out;
    fp8_cpu_linear *l = calloc(1, sizeof *l);
    if (!l)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-fp8: out of memory");
    l->in = in;
    l->out = out;
    l->nkb = fp8_blocks(in);
    l->nrb = fp8_blocks(out);
    const size_t wb = ((size_t)out * (size_t)in + 15) / 16 * 16;
    l->bytes = wb + (size_t)(l->nrb * l->nkb) * sizeof(float);
    llmrt_status st = be->vt->dev_alloc(be->b, l->bytes, &l->mem, err);
    if (st != LLMRT_OK) {
        free(l);
        return st;
    }
    l->w = l->mem;
    l->scale = (float *)((char *)l->mem + wb);
    l->avx2 = want_avx2(be);

    const int64_t n_chunks = (out + LOAD_CHUNK - 1) / LOAD_CHUNK;
    int64_t *first_nan = malloc((size_t)n_chunks * sizeof *first_nan);
    if (!first_nan) {
        fp8_cpu_free(be, l);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-fp8: out of memory");
    }
    load_ctx lc = {l, parts, n_parts, first_nan};
    run_parallel(be, n_chunks, load_chunk, &lc);
    int64_t bad = -1;
    for (int64_t c = 0; c < n_chunks && bad < 0; c++)
        bad = first_nan[c];
    free(first_nan);
    if (bad >= 0) {
        int64_t r = bad / in, base = 0;
        int p = 0;
        while (p + 1 < n_parts && r >= base + parts[p].out)
            base += parts[p++].out;
        fp8_cpu_free(be, l);
        return llmrt_fail(err, LLMRT_ERR_FORMAT,
                          "quant-fp8: %s holds a NaN (e4m3 code 0x7f or 0xff) at [%lld, %lld]",
                          parts[p].name, (long long)(r - base), (long long)(bad % in));
    }
    /* scale rows of each part (whole blocks before the last part) */
    int64_t rb = 0;
    for (int p = 0; p < n_parts; p++) {
        const int64_t prb = fp8_blocks(parts[p].out);
        for (int64_t i = 0; i < prb * l->nkb; i++)
            l->scale[rb * l->nkb + i] = fp8_part_scale(&parts[p], i);
        rb += prb;
    }
    *out_l = l;
    return LLMRT_OK;
}

void fp8_cpu_free(const llmrt_backend_ref *be, fp8_cpu_linear *l)
{
    if (!l)
        return;
    be->vt->dev_free(be->b, l->mem);
    free(l);
}

uint64_t fp8_cpu_bytes(const fp8_cpu_linear *l)
{
    return l->bytes;
}

void fp8_cpu_dequant(const fp8_cpu_linear *l, float *out)
{
    for (int64_t o = 0; o < l->out; o++)
        for (int64_t i = 0; i < l->in; i++)
            out[o * l->in + i] = llmrt_e4m3_to_f32(l->w[o * l->in + i]) *
                                 l->scale[(o / FP8_BLOCK) * l->nkb + i / FP8_BLOCK];
}

/* ---- forward ---- */

static inline float lane_sum(const float *acc)
{
    float s = 0.0f;
    for (int i = 0; i < LANES; i++)
        s += acc[i];
    return s;
}

/* An e4m3 code as f32 (scalar, for row tails): the vector formula's value. */
static inline float code_f32(uint8_t c)
{
    union { uint32_t u; float f; } v;
    v.u = ((uint32_t)(c & 0x7fu) << 20) | ((uint32_t)(c & 0x80u) << 24);
    return v.f * 0x1p120f;
}

typedef struct {
    const fp8_cpu_linear *l;
    float *y;        /* [n, out] */
    const float *x;  /* [n, in]: x (W8A16) or the quantized codes as f32 (W8A8) */
    const float *sx; /* W8A8: [n, nkb] activation scales */
    int64_t n;
} fwd_ctx;

/* DEFINE_FP8_KERNEL(SUF, VW, R_MAX, ATTR): dot16_<SUF> (W8A16) and dot8_<SUF> (W8A8) of one
 * weight row o against R rows of x, and cols_<SUF> running outputs [o0, o1) for every row. */
#define DEFINE_FP8_KERNEL(SUF, VW, R_MAX, ATTR)                                                 \
    typedef float f32v_##SUF __attribute__((vector_size(VW * 4)));                             \
    typedef uint32_t u32v_##SUF __attribute__((vector_size(VW * 4)));                          \
    typedef uint8_t u8v_##SUF __attribute__((vector_size(VW)));                                \
                                                                                               \
    /* VW codes from p as f32 (exact e4m3 values) */                                           \
    ATTR static inline ALWAYS_INLINE f32v_##SUF codes_##SUF(const uint8_t *p)                  \
    {                                                                                          \
        u8v_##SUF b;                                                                           \
        memcpy(&b, p, sizeof b);                                                               \
        u32v_##SUF u = __builtin_convertvector(b, u32v_##SUF);                                 \
        u32v_##SUF bits = ((u & 0x7fu) << 20) | ((u & 0x80u) << 24);                           \
        f32v_##SUF f;                                                                          \
        memcpy(&f, &bits, sizeof f);                                                           \
        return f * 0x1p120f;                                                                   \
    }                                                                                          \
                                                                                               \
    ATTR static inline ALWAYS_INLINE void dot16_##SUF(const fp8_cpu_linear *L, int64_t o,      \
                                                      const float *restrict x,                 \
                                                      float *restrict y, int64_t y_stride,     \
                                                      const int R)                             \
    {                                                                                          \
        enum { NV = LANES / VW };                                                              \
        const int64_t in = L->in;                                                              \
        const uint8_t *wr = L->w + o * in;                                                     \
        const float *sr = L->scale + (o / FP8_BLOCK) * L->nkb;                                 \
        const f32v_##SUF zero = {0};                                                           \
        f32v_##SUF acc[R_MAX][NV];                                                             \
        for (int r = 0; r < R; r++)                                                            \
            for (int v = 0; v < NV; v++)                                                       \
                acc[r][v] = zero;                                                              \
        int64_t i = 0;                                                                         \
        for (int64_t kb = 0; kb < L->nkb; kb++) {                                              \
            const float s = sr[kb];                                                            \
            const int64_t e = (kb + 1) * FP8_BLOCK < in ? (kb + 1) * FP8_BLOCK : in;           \
            for (; i + LANES <= e; i += LANES) {                                               \
                f32v_##SUF wv[NV];                                                             \
                for (int v = 0; v < NV; v++)                                                   \
                    wv[v] = codes_##SUF(wr + i + v * VW) * s;                                  \
                for (int r = 0; r < R; r++)                                                    \
                    for (int v = 0; v < NV; v++) {                                             \
                        f32v_##SUF xv;                                                         \
                        memcpy(&xv, x + r * in + i + v * VW, sizeof xv);                       \
                        acc[r][v] += xv * wv[v];                                               \
                    }                                                                          \
            }                                                                                  \
        }                                                                                      \
        const float s_last = sr[L->nkb - 1];                                                   \
        for (int r = 0; r < R; r++) {                                                          \
            float lanes[LANES];                                                                \
            memcpy(lanes, acc[r], sizeof lanes);                                               \
            for (int64_t j = i; j < in; j++)                                                   \
                lanes[j - i] += x[r * in + j] * (code_f32(wr[j]) * s_last);                    \
            y[r * y_stride] = lane_sum(lanes);                                                 \
        }                                                                                      \
    }                                                                                          \
                                                                                               \
    ATTR static inline ALWAYS_INLINE void dot8_##SUF(const fp8_cpu_linear *L, int64_t o,       \
                                                     const float *restrict xq,                 \
                                                     const float *restrict sx,                 \
                                                     float *restrict y, int64_t y_stride,      \
                                                     const int R)                              \
    {                                                                                          \
        enum { NV = LANES / VW };                                                              \
        const int64_t in = L->in, nkb = L->nkb;                                                \
        const uint8_t *wr = L->w + o * in;                                                     \
        const float *sr = L->scale + (o / FP8_BLOCK) * nkb;                                    \
        const f32v_##SUF zero = {0};                                                           \
        float yr[R_MAX];                                                                       \
        for (int r = 0; r < R; r++)                                                            \
            yr[r] = 0.0f;                                                                      \
        for (int64_t kb = 0; kb < nkb; kb++) {                                                 \
            const int64_t b0 = kb * FP8_BLOCK;                                                 \
            const int64_t e = b0 + FP8_BLOCK < in ? b0 + FP8_BLOCK : in;                       \
            f32v_##SUF part[R_MAX][NV];                                                        \
            for (int r = 0; r < R; r++)                                                        \
                for (int v = 0; v < NV; v++)                                                   \
                    part[r][v] = zero;                                                         \
            int64_t i = b0;                                                                    \
            for (; i + LANES <= e; i += LANES) {                                               \
                f32v_##SUF wv[NV];                                                             \
                for (int v = 0; v < NV; v++)                                                   \
                    wv[v] = codes_##SUF(wr + i + v * VW);                                      \
                for (int r = 0; r < R; r++)                                                    \
                    for (int v = 0; v < NV; v++) {                                             \
                        f32v_##SUF xv;                                                         \
                        memcpy(&xv, xq + r * in + i + v * VW, sizeof xv);                      \
                        part[r][v] += xv * wv[v];                                              \
                    }                                                                          \
            }                                                                                  \
            for (int r = 0; r < R; r++) {                                                      \
                float lanes[LANES];                                                            \
                memcpy(lanes, part[r], sizeof lanes);                                          \
                for (int64_t j = i; j < e; j++)                                                \
                    lanes[j - i] += xq[r * in + j] * code_f32(wr[j]);                          \
                yr[r] += (lane_sum(lanes) * sx[r * nkb + kb]) * sr[kb];                        \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < R; r++)                                                            \
            y[r * y_stride] = yr[r];                                                           \
    }                                                                                          \
                                                                                               \
    ATTR static void cols_##SUF(const fwd_ctx *f, int64_t o0, int64_t o1)                      \
    {                                                                                          \
        const fp8_cpu_linear *L = f->l;                                                        \
        const int64_t in = L->in, out = L->out, nkb = L->nkb;                                  \
        for (int64_t r0 = 0; r0 < f->n; r0 += ROW_BLOCK) {                                     \
            const int64_t r1 = r0 + ROW_BLOCK < f->n ? r0 + ROW_BLOCK : f->n;                  \
            for (int64_t o = o0; o < o1; o++) {                                                \
                int64_t r = r0;                                                                \
                if (f->sx) {                                                                   \
                    for (; r + R_MAX <= r1; r += R_MAX)                                        \
                        dot8_##SUF(L, o, f->x + r * in, f->sx + r * nkb, f->y + r * out + o,   \
                                   out, R_MAX);                                                \
                    for (; r < r1; r++)                                                        \
                        dot8_##SUF(L, o, f->x + r * in, f->sx + r * nkb, f->y + r * out + o,   \
                                   out, 1);                                                    \
                } else {                                                                       \
                    for (; r + R_MAX <= r1; r += R_MAX)                                        \
                        dot16_##SUF(L, o, f->x + r * in, f->y + r * out + o, out, R_MAX);      \
                    for (; r < r1; r++)                                                        \
                        dot16_##SUF(L, o, f->x + r * in, f->y + r * out + o, out, 1);          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

/* Baseline: 16-byte vectors (SSE2 on x86-64, NEON on arm64), two rows per weight pass. */
DEFINE_FP8_KERNEL(base, 4, 2, )

#ifdef FP8_HAVE_AVX2_KERNEL
/* AVX2: 32-byte vectors, four rows per weight pass. */
DEFINE_FP8_KERNEL(avx2, 8, 4, __attribute__((target("avx2"))))
#endif

static void fwd_chunk(void *c, int64_t c0, int64_t c1)
{
    const fwd_ctx *f = c;
    int64_t o0 = c0 * COLS_CHUNK, o1 = c1 * COLS_CHUNK;
    if (o1 > f->l->out)
        o1 = f->l->out;
#ifdef FP8_HAVE_AVX2_KERNEL
    if (f->l->avx2) {
        cols_avx2(f, o0, o1);
        return;
    }
#endif
    cols_base(f, o0, o1);
}

void fp8_cpu_forward_w8a16(const llmrt_backend_ref *be, const fp8_cpu_linear *l, float *y,
                           const float *x, int32_t n)
{
    fwd_ctx f = {l, y, x, NULL, n};
    run_parallel(be, (l->out + COLS_CHUNK - 1) / COLS_CHUNK, fwd_chunk, &f);
}

int64_t fp8_cpu_scratch_floats(const fp8_cpu_linear *l, int32_t n)
{
    return (int64_t)n * (l->in + l->nkb);
}

typedef struct {
    const fp8_cpu_linear *l;
    const float *x;
    float *xq, *sx;
} quant_ctx;

static void quant_rows(void *c, int64_t r0, int64_t r1)
{
    const quant_ctx *q = c;
    const int64_t in = q->l->in, nkb = q->l->nkb;
    for (int64_t r = r0; r < r1; r++)
        fp8_act_quant_row(q->x + r * in, in, q->xq + r * in, q->sx + r * nkb);
}

void fp8_cpu_forward_w8a8(const llmrt_backend_ref *be, const fp8_cpu_linear *l, float *y,
                          const float *x, int32_t n, float *scratch)
{
    quant_ctx q = {l, x, scratch, scratch + (int64_t)n * l->in};
    run_parallel(be, n, quant_rows, &q);
    fwd_ctx f = {l, y, q.xq, q.sx, n};
    run_parallel(be, (l->out + COLS_CHUNK - 1) / COLS_CHUNK, fwd_chunk, &f);
}
