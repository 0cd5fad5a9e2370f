/* awq_cpu.c — see awq_cpu.h.
 *
 * CPU layout, per output o (all arrays in one dev_alloc):
 *   q      uint32 [out, n_blocks, 16]: block b covers inputs 128b .. 128b+127; word l of the
 *          block holds, in nibble k (bits 4k..4k+3), the value for input 128b + 16k + l.
 *          A last, partial block (in % 128 = 32, 64 or 96) fills nibbles k < (in % 128)/16.
 *   scales uint16 [out, n_groups] (f16 bits), zeros uint8 [out, n_groups]
 * so for a fixed k the sixteen words yield sixteen consecutive inputs with one shift and one
 * mask on a vector of words. Group boundaries (32, 64, 128) fall on nibble boundaries, since
 * every group size is a multiple of 16 dividing 128.
 *
 * The dot product for output o and row x, with group sums xs[g] = Σ_{i in g} x[i]:
 *   y = Σ_g s_g Σ_{i in g} x_i (q_i - z_g) = Σ_g s_g (Σ_{i in g} x_i q_i) - Σ_g s_g z_g xs[g]
 * which leaves one multiply-add per weight (the zero point is applied once per group).
 * Everything is f32, in a fixed order per output and row: results do not depend on the
 * thread count or on which rows share a call. */
#include "awq_cpu.h"

#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/cpu.h>

#include "awq_pack.h"

#define LANES 16
#define BLOCK 128
#define ROW_BLOCK 64    /* rows of x that meet a repacked weight row while it is in L1 */
#define COLS_CHUNK 16   /* outputs per parallel_for item */
#define ALWAYS_INLINE __attribute__((always_inline))
#if defined(__x86_64__) && defined(__GNUC__)
#define AWQ_HAVE_AVX2_KERNEL 1
#endif

struct awq_cpu_linear {
    int64_t in, out, group, n_groups, n_blocks;
    int avx2;         /* run the AVX2 kernel (awq_cpu_choose_simd) */
    uint32_t *q;      /* [out, n_blocks, 16] */
    uint16_t *scales; /* [out, n_groups] f16 */
    uint8_t *zeros;   /* [out, n_groups] */
    void *mem;        /* the dev_alloc holding all three */
    size_t bytes;
};

static uint32_t load_u32(const void *base, int64_t index)
{
    uint32_t v;
    memcpy(&v, (const char *)base + index * 4, 4);
    return v;
}

static uint16_t load_u16(const void *base, int64_t index)
{
    uint16_t v;
    memcpy(&v, (const char *)base + index * 2, 2);
    return v;
}

/* ---- load: repack in parallel over chunks of outputs ---- */

typedef struct {
    awq_cpu_linear *l;
    const void *qweight, *qzeros, *scales;
} repack_ctx;

#define REPACK_CHUNK 64

static void repack_chunk(void *c, int64_t c0, int64_t c1)
{
    const repack_ctx *r = c;
    awq_cpu_linear *l = r->l;
    const int64_t in = l->in, out = l->out, words = out / 8;
    int64_t o0 = c0 * REPACK_CHUNK, o1 = c1 * REPACK_CHUNK < out ? c1 * REPACK_CHUNK : out;
    for (int64_t oc = o0; oc < o1; oc += REPACK_CHUNK) {
        const int64_t oe = oc + REPACK_CHUNK < o1 ? oc + REPACK_CHUNK : o1;
        /* each destination word (o, blk, lane) gathers the nibbles of inputs
         * 128 blk + 16 k + lane, k < 8: assemble them in registers, store once */
        for (int64_t blk = 0; blk < l->n_blocks; blk++) {
            const int kmax = in - blk * BLOCK >= BLOCK ? 8 : (int)((in - blk * BLOCK) / 16);
            for (int lane = 0; lane < 16; lane++) {
                uint32_t acc[REPACK_CHUNK] = {0};
                for (int k = 0; k < kmax; k++) {
                    const int64_t i = blk * BLOCK + 16 * k + lane;
                    for (int64_t o = oc; o < oe; o += 8) {
                        uint32_t word = load_u32(r->qweight, i * words + o / 8);
                        for (int j = 0; j < 8; j++)
                            acc[o - oc + j] |= awq_nibble(word, j) << (4 * k);
                    }
                }
                for (int64_t o = oc; o < oe; o++)
                    l->q[(o * l->n_blocks + blk) * 16 + lane] = acc[o - oc];
            }
        }
    }
    for (int64_t g = 0; g < l->n_groups; g++)
        for (int64_t o = o0; o < o1; o++) {
            l->zeros[o * l->n_groups + g] =
                (uint8_t)awq_nibble(load_u32(r->qzeros, g * words + o / 8), (int)(o % 8));
            l->scales[o * l->n_groups + g] = load_u16(r->scales, g * out + o);
        }
}

static void run_parallel(const llmrt_backend_ref *be, int64_t n,
                         void (*fn)(void *, int64_t, int64_t), void *ctx)
{
    if (be->vt->parallel_for)
        be->vt->parallel_for(be->b, n, fn, ctx);
    else
        fn(ctx, 0, n);
}

awq_cpu_simd awq_cpu_choose_simd(const llmrt_backend_ref *be)
{
    const llmrt_cpu_ext *cx =
        llmrt_backend_extension(be->vt, be->b, LLMRT_EXT_CPU, LLMRT_EXT_CPU_VERSION);
    const char *simd = LLMRT_VT_HAS(cx, llmrt_cpu_ext, simd) ? cx->simd(be->b) : NULL;
#ifdef AWQ_HAVE_AVX2_KERNEL
    if (simd && strcmp(simd, "avx2") == 0)
        return AWQ_CPU_AVX2;
#else
    (void)simd;
#endif
    return AWQ_CPU_BASELINE;
}

llmrt_status awq_cpu_load(const llmrt_backend_ref *be, awq_cpu_simd simd, const void *qweight,
                          const void *qzeros, const void *scales, int64_t in, int64_t out,
                          int64_t group, awq_cpu_linear **out_linear, llmrt_error *err)
{
    *out_linear = NULL;
    awq_cpu_linear *l = calloc(1, sizeof *l);
    if (!l)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "quant-awq: out of memory");
    l->in = in;
    l->out = out;
    l->group = group;
    l->n_groups = in / group;
    l->n_blocks = (in + BLOCK - 1) / BLOCK;
    size_t qb = (size_t)(out * l->n_blocks * 16) * 4, sb = (size_t)(out * l->n_groups) * 2,
           zb = (size_t)(out * l->n_groups);
    l->bytes = qb + sb + zb;
    llmrt_status st = be->vt->dev_alloc(be->b, l->bytes, &l->mem, err);
    if (st != LLMRT_OK) {
        free(l);
        return st;
    }
    l->q = l->mem;
    l->scales = (uint16_t *)((char *)l->mem + qb);
    l->zeros = (uint8_t *)((char *)l->mem + qb + sb);
#ifdef AWQ_HAVE_AVX2_KERNEL
    l->avx2 = simd == AWQ_CPU_AVX2;
#else
    (void)simd;
#endif
    repack_ctx c = {l, qweight, qzeros, scales};
    run_parallel(be, (out + REPACK_CHUNK - 1) / REPACK_CHUNK, repack_chunk, &c);
    *out_linear = l;
    return LLMRT_OK;
}

void awq_cpu_free(const llmrt_backend_ref *be, awq_cpu_linear *l)
{
    if (!l)
        return;
    be->vt->dev_free(be->b, l->mem);
    free(l);
}

uint64_t awq_cpu_bytes(const awq_cpu_linear *l)
{
    return l->bytes;
}

void awq_cpu_dequant(const awq_cpu_linear *l, float *out)
{
    for (int64_t o = 0; o < l->out; o++)
        for (int64_t i = 0; i < l->in; i++) {
            int64_t blk = i / BLOCK, k = (i % BLOCK) / 16, lane = i % 16, g = i / l->group;
            uint32_t q = (l->q[(o * l->n_blocks + blk) * 16 + lane] >> (4 * k)) & 0xfu;
            int z = l->zeros[o * l->n_groups + g];
            float s = llmrt_f16_to_f32(l->scales[o * l->n_groups + g]);
            out[o * l->in + i] = (float)((int)q - z) * s;
        }
}

/* ---- forward ---- */

int64_t awq_cpu_scratch_floats(const awq_cpu_linear *l, int32_t n)
{
    return (int64_t)n * l->n_groups;
}

static inline float lane_sum(const float *acc)
{
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

/* The dot products use GNU C vector types (GCC and Clang): `VW` floats per vector, 16 lanes
 * in 16 / VW vectors. Lane l of slice t is input 16t + l, so for any VW lane l sees the same
 * f32 operations in the same order: the AVX2 kernel (VW 8) and the baseline one (VW 4, SSE2 or
 * NEON) give identical results, and so does any number of rows R processed together.
 *
 * Output o against R rows of x ([R, in], row stride in) with their group sums xs ([R,
 * n_groups]) writes y[r * y_stride]; cols_<SUF> runs outputs [o0, o1) for all rows, R_MAX rows
 * at a time. */
#define DEFINE_AWQ_KERNEL(SUF, VW, R_MAX, ATTR)                                                 \
    typedef float f32v_##SUF __attribute__((vector_size(VW * 4)));                             \
    typedef uint32_t u32v_##SUF __attribute__((vector_size(VW * 4)));                          \
    typedef int32_t i32v_##SUF __attribute__((vector_size(VW * 4)));                           \
    ATTR static inline ALWAYS_INLINE void dot_##SUF(const awq_cpu_linear *L, int64_t o,        \
                                                    const float *restrict x,                   \
                                                    const float *restrict xs,                  \
                                                    float *restrict y, int64_t y_stride,       \
                                                    const int R)                               \
    {                                                                                          \
        enum { NV = LANES / VW };                                                              \
        const int64_t in = L->in, ng = L->n_groups;                                            \
        const int slices_per_group = (int)(L->group / 16);                                     \
        const uint32_t *restrict qw = L->q + o * L->n_blocks * 16;                             \
        const uint16_t *sc = L->scales + o * ng;                                               \
        const uint8_t *zp = L->zeros + o * ng;                                                 \
        const f32v_##SUF zero = {0};                                                           \
        u32v_##SUF m15;                                                                        \
        for (int l = 0; l < VW; l++)                                                           \
            m15[l] = 0xfu;                                                                     \
        f32v_##SUF acc[R_MAX][NV], part[R_MAX][NV];                                            \
        float zt[R_MAX];                                                                       \
        for (int r = 0; r < R; r++) {                                                          \
            zt[r] = 0.0f;                                                                      \
            for (int v = 0; v < NV; v++)                                                       \
                acc[r][v] = part[r][v] = zero;                                                 \
        }                                                                                      \
        int64_t g = 0;                                                                         \
        int in_group = 0; /* slices of group g seen so far */                                  \
        for (int64_t b = 0; b < L->n_blocks; b++) {                                            \
            const float *xb = x + b * BLOCK;                                                   \
            const int kmax = in - b * BLOCK >= BLOCK ? 8 : (int)((in - b * BLOCK) / 16);       \
            u32v_##SUF w[NV]; /* one load per vector (an array-wide copy stalls forwarding) */ \
            for (int v = 0; v < NV; v++)                                                       \
                memcpy(&w[v], qw + b * 16 + v * VW, sizeof w[v]);                              \
            for (int k = 0; k < kmax; k++) {                                                   \
                f32v_##SUF qf[NV];                                                             \
                for (int v = 0; v < NV; v++) {                                                 \
                    qf[v] = __builtin_convertvector((i32v_##SUF)(w[v] & m15), f32v_##SUF);     \
                    w[v] >>= 4;                                                                \
                }                                                                              \
                for (int r = 0; r < R; r++)                                                    \
                    for (int v = 0; v < NV; v++) {                                             \
                        f32v_##SUF xv;                                                         \
                        memcpy(&xv, xb + r * in + 16 * k + v * VW, sizeof xv);                 \
                        part[r][v] += xv * qf[v];                                              \
                    }                                                                          \
                if (++in_group == slices_per_group) { /* end of group g */                     \
                    const float s = llmrt_f16_to_f32(sc[g]), sz = s * (float)zp[g];            \
                    for (int r = 0; r < R; r++) {                                              \
                        for (int v = 0; v < NV; v++) {                                         \
                            acc[r][v] += s * part[r][v];                                       \
                            part[r][v] = zero;                                                 \
                        }                                                                      \
                        zt[r] += sz * xs[r * ng + g];                                          \
                    }                                                                          \
                    in_group = 0;                                                              \
                    g++;                                                                       \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        for (int r = 0; r < R; r++) {                                                          \
            float lanes[LANES];                                                                \
            memcpy(lanes, acc[r], sizeof lanes);                                               \
            y[r * y_stride] = lane_sum(lanes) - zt[r];                                         \
        }                                                                                      \
    }                                                                                          \
    ATTR static void cols_##SUF(const fwd_ctx *f, int64_t o0, int64_t o1)                      \
    {                                                                                          \
        const awq_cpu_linear *L = f->l;                                                        \
        const int64_t in = L->in, out = L->out, ng = L->n_groups;                              \
        for (int64_t r0 = 0; r0 < f->n; r0 += ROW_BLOCK) {                                     \
            int64_t r1 = r0 + ROW_BLOCK < f->n ? r0 + ROW_BLOCK : f->n;                        \
            for (int64_t o = o0; o < o1; o++) {                                                \
                int64_t r = r0;                                                                \
                for (; r + R_MAX <= r1; r += R_MAX)                                            \
                    dot_##SUF(L, o, f->x + r * in, f->xs + r * ng, f->y + r * out + o, out,    \
                              R_MAX);                                                          \
                for (; r < r1; r++)                                                            \
                    dot_##SUF(L, o, f->x + r * in, f->xs + r * ng, f->y + r * out + o, out,    \
                              1);                                                              \
            }                                                                                  \
        }                                                                                      \
    }

typedef struct {
    const awq_cpu_linear *l;
    float *y;        /* [n, out] */
    const float *x;  /* [n, in] */
    const float *xs; /* [n, n_groups] */
    int64_t n;
} fwd_ctx;

/* Baseline: 16-byte vectors (SSE2 on x86-64, NEON on arm64), two rows per weight pass. */
DEFINE_AWQ_KERNEL(base, 4, 2, )

#ifdef AWQ_HAVE_AVX2_KERNEL
/* AVX2: 32-byte vectors and four rows per pass; used when the backend's "llmrt.cpu" extension
 * says "avx2" ([backend.cpu] simd), else the baseline kernel. */
DEFINE_AWQ_KERNEL(avx2, 8, 4, __attribute__((target("avx2"))))
#endif

static void fwd_chunk(void *c, int64_t c0, int64_t c1)
{
    const fwd_ctx *f = c;
    int64_t o0 = c0 * COLS_CHUNK, o1 = c1 * COLS_CHUNK;
    if (o1 > f->l->out)
        o1 = f->l->out;
#ifdef AWQ_HAVE_AVX2_KERNEL
    if (f->l->avx2) {
        cols_avx2(f, o0, o1);
        return;
    }
#endif
    cols_base(f, o0, o1);
}

void awq_cpu_forward(const llmrt_backend_ref *be, const awq_cpu_linear *l, float *y,
                     const float *x, int32_t n, float *scratch)
{
    const int64_t in = l->in, g = l->group;
    for (int64_t r = 0; r < n; r++)
        for (int64_t j = 0; j < l->n_groups; j++) {
            const float *xg = x + r * in + j * g;
            float acc[LANES] = {0};
            for (int64_t i = 0; i < g; i += LANES)
                for (int t = 0; t < LANES; t++)
                    acc[t] += xg[i + t];
            scratch[r * l->n_groups + j] = lane_sum(acc);
        }
    fwd_ctx f = {l, y, x, scratch, n};
    run_parallel(be, (l->out + COLS_CHUNK - 1) / COLS_CHUNK, fwd_chunk, &f);
}
