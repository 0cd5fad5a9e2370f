/* awq_cpu.c — see awq_cpu.h.
 *
 * CPU layout, per output o (all arrays in one dev_alloc):
 *   q      uint8 [out, n_blocks, 64]: block b covers inputs 128b .. 128b+127; byte p of the
 *          block holds input 128b + p in its low nibble and input 128b + 64 + p in its high
 *          nibble. A last, partial block (in % 128 = 32, 64 or 96) is padded with zeros.
 *   scales uint16 [out, n_groups] (f16 bits), zeros uint8 [out, n_groups]
 * so one 64-byte load, a mask and a shift give 128 weights as bytes in input order, and 16
 * consecutive bytes widened give 16 consecutive inputs. Group boundaries (32, 64, 128) fall on
 * 32-input boundaries. The AVX-512 int8 kernel reads sixteen outputs at a time instead
 * (interleaved layout, in the same allocation):
 *   q      uint8 [out/16, n_blocks, 16 steps, 16 outputs, 4]: step t of block b covers inputs
 *          128b + 8t .. +7; byte j of output l's 4 holds input 128b + 8t + j in its low nibble
 *          and 128b + 8t + 4 + j in its high nibble
 *   scales uint16 [out/16, n_groups, 16], zeros uint8 [out/16, n_groups, 16]
 * so a 64-byte load masked (or shifted) is one vpdpbusd operand: four consecutive inputs of
 * sixteen outputs, against four bytes of x broadcast; the lanes are outputs, so no sum across
 * lanes is needed and y is written sixteen floats at a time. A last group of 8 outputs is
 * padded with zero weights and scales.
 *
 * Two families of kernels, chosen by the backend's simd path (awq_cpu_choose_simd, kernel_for):
 *
 * exact (simd = exact, baseline, or a name this plugin does not know): all f32, in a fixed
 *   order per output and row, so results do not depend on the ISA, the thread count or which
 *   rows share a call. With group sums xs[g] = Σ_{i in g} x[i]:
 *     y = Σ_g s_g Σ_{i in g} x_i (q_i - z_g) = Σ_g s_g (Σ_{i in g} x_i q_i) - Σ_g s_g z_g xs[g]
 *   which leaves one multiply-add per weight (the zero point is applied once per group).
 *
 * int8 (simd = avx2, avx512, amx): each row of x is quantized per 32 inputs j to
 *   x'_i = d_j qx_i, d_j = max|x_j| / 127, qx_i = round(x_i / d_j) in -127..127, so the inner
 *   loop is integer dot products of the weight bytes with qx (vpdpbusd on AVX-512 VNNI,
 *   vpmaddubsw + vpmaddwd on AVX2), scaled per 32 inputs in f32:
 *     y' = Σ_g s_g Σ_{j in g} d_j (Σ_{i in j} q_i qx_i) - Σ_g s_g z_g c_g,  c_g = Σ_{i in g} x'_i
 *   y' is the exact result for x' instead of x, so
 *     |y' - y| <= Σ_i |x'_i - x_i| |w_i| <= Σ_i (d_{j(i)} / 2) |s_g (q_i - z_g)|
 *   plus f32 rounding: at most half a quantization step of x per weight, the bound the tests
 *   check. The rows are independent of each other, not of the ISA (lane counts differ). */
#include "awq_cpu.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <llmrt/ext/cpu.h>

#include "awq_pack.h"

#define LANES 16
#define BLOCK 128
#define BLOCK_BYTES 64
#define ROW_BLOCK 64    /* rows of x that meet a repacked weight row while it is in L1 */
#define COLS_CHUNK 16   /* outputs per parallel_for item */
#define ALWAYS_INLINE __attribute__((always_inline))
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define AWQ_HAVE_X86_KERNELS 1
#endif
#define AMX_MIN_ROWS 16 /* fewest rows for the AMX kernel (below: the vpdpbusd one) */

/* The kernels (kernel_for picks one per linear). */
typedef enum awq_kernel {
    AWQ_EXACT_BASE,   /* exact, 16-byte vectors (SSE2, NEON) */
    AWQ_EXACT_AVX2,   /* exact, AVX2: the bits of AWQ_EXACT_BASE */
    AWQ_EXACT_AVX512, /* exact, AVX-512: the same bits */
    AWQ_INT8_AVX2,    /* int8 activations, AVX2 + FMA + F16C */
    AWQ_INT8_AVX512,  /* int8 activations, AVX-512 F/BW/VL/VNNI */
} awq_kernel;

struct awq_cpu_linear {
    int64_t in, out, group, n_groups, n_blocks;
    int64_t n_og;     /* groups of 16 outputs (interleaved layout) */
    awq_kernel kernel;
    int interleaved;  /* the layout: 0 by output row, 1 sixteen outputs interleaved */
    int amx;          /* prefill-sized calls on AMX-INT8 tiles (interleaved, group 128) */
    /* by output row:  q [out, n_blocks, 64], scales [out, n_groups], zeros [out, n_groups]
     * interleaved:    q [n_og, n_blocks, 16 steps, 16 outputs, 4], scales and zeros
     *                 [n_og, n_groups, 16] (outputs past out: zeros) */
    uint8_t *q;
    uint16_t *scales; /* f16 */
    uint8_t *zeros;
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

/* AMX-INT8 (CPUID.7.0:EDX bit 25) with AMX-TILE (bit 24); the backend's amx path has asked
 * the OS for tile data already (it is granted per process). */
static int amx_int8(void)
{
#ifdef AWQ_HAVE_X86_KERNELS
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 25));
#else
    return 0;
#endif
}

awq_cpu_simd awq_cpu_choose_simd(const llmrt_backend_ref *be)
{
    const llmrt_cpu_ext *cx =
        llmrt_backend_extension(be->vt, be->b, LLMRT_EXT_CPU, LLMRT_EXT_CPU_VERSION);
    const char *simd = LLMRT_VT_HAS(cx, llmrt_cpu_ext, simd) ? cx->simd(be->b) : NULL;
    static const struct {
        const char *name;
        awq_cpu_simd simd;
    } names[] = {{"baseline", AWQ_CPU_BASELINE},
                 {"avx2", AWQ_CPU_AVX2},
                 {"avx512", AWQ_CPU_AVX512},
                 {"amx", AWQ_CPU_AMX}};
    for (size_t i = 0; simd && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(simd, names[i].name) == 0)
            return names[i].simd;
    return AWQ_CPU_EXACT; /* "exact", a name not known here, or no extension */
}

const char *awq_cpu_simd_name(awq_cpu_simd simd)
{
    switch (simd) {
    case AWQ_CPU_BASELINE: return "baseline";
    case AWQ_CPU_AVX2: return "avx2";
    case AWQ_CPU_AVX512: return "avx512";
    case AWQ_CPU_AMX: return "amx";
    default: return "exact";
    }
}

/* The kernel for the backend's simd path: the int8 kernels on the fast paths, the widest
 * exact one on exact, the 16-byte one on baseline. The backend only names a path its CPU
 * has; the checks here keep a wrong name from reaching an instruction the CPU lacks. */
static awq_kernel kernel_for(awq_cpu_simd simd)
{
#ifdef AWQ_HAVE_X86_KERNELS
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                     __builtin_cpu_supports("f16c");
    const int avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    const int vnni = avx512 && __builtin_cpu_supports("avx512vnni");
    if ((simd == AWQ_CPU_AVX512 || simd == AWQ_CPU_AMX) && vnni)
        return AWQ_INT8_AVX512;
    if (simd == AWQ_CPU_AVX2 && avx2)
        return AWQ_INT8_AVX2;
    if (simd == AWQ_CPU_BASELINE)
        return AWQ_EXACT_BASE;
    return avx512 ? AWQ_EXACT_AVX512 : avx2 ? AWQ_EXACT_AVX2 : AWQ_EXACT_BASE;
#else
    (void)simd;
    return AWQ_EXACT_BASE;
#endif
}

/* ---- load: repack in parallel over chunks of outputs ---- */

typedef struct {
    awq_cpu_linear *l;
    const void *qweight, *qzeros, *scales;
} repack_ctx;

#define REPACK_CHUNK 64

/* The 4-bit value of input i, output o in AutoAWQ's qweight [in, out/8]. */
static inline uint8_t awq_value(const void *qweight, int64_t words, int64_t i, int64_t o)
{
    return (uint8_t)awq_nibble(load_u32(qweight, i * words + o / 8), (int)(o % 8));
}

static void repack_chunk(void *c, int64_t c0, int64_t c1)
{
    const repack_ctx *r = c;
    awq_cpu_linear *l = r->l;
    const int64_t in = l->in, out = l->out, words = out / 8;
    int64_t o0 = c0 * REPACK_CHUNK, o1 = c1 * REPACK_CHUNK < out ? c1 * REPACK_CHUNK : out;
    for (int64_t oc = o0; oc < o1; oc += REPACK_CHUNK) {
        const int64_t oe = oc + REPACK_CHUNK < o1 ? oc + REPACK_CHUNK : o1;
        /* byte p of block blk: inputs 128 blk + p (low nibble) and 128 blk + 64 + p (high);
         * one pass over two rows of qweight fills that byte for every output of the chunk */
        for (int64_t blk = 0; blk < l->n_blocks; blk++)
            for (int p = 0; p < BLOCK_BYTES; p++) {
                const int64_t ilo = blk * BLOCK + p, ihi = ilo + 64;
                for (int64_t o = oc; o < oe; o++) {
                    uint8_t lo = ilo < in ? awq_value(r->qweight, words, ilo, o) : 0;
                    uint8_t hi = ihi < in ? awq_value(r->qweight, words, ihi, o) : 0;
                    l->q[(o * l->n_blocks + blk) * BLOCK_BYTES + p] = (uint8_t)(lo | hi << 4);
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

/* Interleaved layout: chunks of output groups of 16. For each input of a block, the two
 * qweight words of the group's outputs give sixteen nibbles, one per output lane. */
static void repack_interleaved(void *c, int64_t g0, int64_t g1)
{
    const repack_ctx *r = c;
    awq_cpu_linear *l = r->l;
    const int64_t in = l->in, out = l->out, words = out / 8, nb = l->n_blocks, ng = l->n_groups;
    for (int64_t og = g0; og < g1; og++) {
        const int lanes = out - 16 * og >= 16 ? 16 : (int)(out - 16 * og);
        for (int64_t blk = 0; blk < nb; blk++) {
            uint8_t *dst = l->q + (og * nb + blk) * 1024;
            for (int st = 0; st < 16; st++) {
                /* inputs 8 st .. +7 of the block: output lane's dword holds input 8 st + j in
                 * byte j's low nibble, 8 st + 4 + j in its high nibble; the two qweight words
                 * of each input hold columns 8c + jj in nibble awq_nibble_of_column(jj) */
                const int64_t i0 = blk * BLOCK + 8 * st;
                uint32_t dw[16] = {0};
                for (int h = 0; h < 2 && 8 * h < lanes; h++) {
                    uint32_t w[8];
                    for (int k = 0; k < 8; k++)
                        w[k] = i0 + k < in ? load_u32(r->qweight, (i0 + k) * words + 2 * og + h) : 0;
                    for (int jj = 0; jj < 8; jj++) {
                        const int sh = 4 * awq_nibble_of_column(jj);
                        uint32_t d = 0;
                        for (int j = 0; j < 4; j++)
                            d |= (((w[j] >> sh) & 0xfu) | ((w[4 + j] >> sh) & 0xfu) << 4) << (8 * j);
                        dw[8 * h + jj] = d;
                    }
                }
                memcpy(dst + st * 64, dw, 64);
            }
        }
        for (int64_t g = 0; g < ng; g++)
            for (int lane = 0; lane < 16; lane++) {
                const int64_t o = 16 * og + lane, at = (og * ng + g) * 16 + lane;
                l->zeros[at] = lane < lanes ? (uint8_t)awq_nibble(
                                                  load_u32(r->qzeros, g * words + o / 8), (int)(o % 8))
                                            : 0;
                l->scales[at] = lane < lanes ? load_u16(r->scales, g * out + o) : 0;
            }
    }
}

/* fn over [0, n) on the backend's pool, or inline when the job (n items of about `cost`
 * operations each) is too small to pay for waking the pool's threads (backend-cpu's rule). */
#define PARALLEL_MIN_WORK 32768
static void run_parallel(const llmrt_backend_ref *be, int64_t n, int64_t cost,
                         void (*fn)(void *, int64_t, int64_t), void *ctx)
{
    if (be->vt->parallel_for && n > 1 && n * cost >= PARALLEL_MIN_WORK)
        be->vt->parallel_for(be->b, n, fn, ctx);
    else
        fn(ctx, 0, n);
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
    l->n_og = (out + 15) / 16;
    /* the kernel family follows the backend's [backend.cpu] simd (awq_cpu_choose_simd) */
    l->kernel = kernel_for(simd);
    l->interleaved = l->kernel == AWQ_INT8_AVX512;
    l->amx = l->interleaved && group == 128 && simd == AWQ_CPU_AMX && amx_int8();
    const int64_t rows = l->interleaved ? 16 * l->n_og : out; /* outputs, padded */
    size_t qb = (size_t)(rows * l->n_blocks) * BLOCK_BYTES, sb = (size_t)(rows * l->n_groups) * 2,
           zb = (size_t)(rows * l->n_groups);
    l->bytes = qb + sb + zb;
    llmrt_status st = be->vt->dev_alloc(be->b, l->bytes, &l->mem, err);
    if (st != LLMRT_OK) {
        free(l);
        return st;
    }
#if defined(MADV_HUGEPAGE)
    /* on the cpu backend device memory is host memory: ask for huge pages before the repack
     * first touches it (the kernels stream it every step; backend-cpu does the same for
     * weights it copies in) */
    {
        const uintptr_t hp = (uintptr_t)2 << 20, lo = ((uintptr_t)l->mem + hp - 1) & ~(hp - 1);
        const uintptr_t hi = ((uintptr_t)l->mem + l->bytes) & ~(hp - 1);
        if (l->bytes >= ((size_t)4 << 20) && hi > lo)
            madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
#endif
    l->q = l->mem;
    l->scales = (uint16_t *)((char *)l->mem + qb);
    l->zeros = (uint8_t *)((char *)l->mem + qb + sb);
    repack_ctx c = {l, qweight, qzeros, scales};
    if (l->interleaved)
        run_parallel(be, l->n_og, 16 * in, repack_interleaved, &c);
    else
        run_parallel(be, (out + REPACK_CHUNK - 1) / REPACK_CHUNK, REPACK_CHUNK * in, repack_chunk,
                     &c);
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

static inline uint32_t q_at(const awq_cpu_linear *l, int64_t o, int64_t i)
{
    const int64_t blk = i / BLOCK, p = i % BLOCK;
    if (l->interleaved) {
        const uint8_t byte = l->q[((o / 16 * l->n_blocks + blk) * 16 + p / 8) * 64 + (o % 16) * 4 +
                                  p % 4];
        return (p % 8) < 4 ? byte & 0xfu : byte >> 4;
    }
    uint8_t byte = l->q[(o * l->n_blocks + blk) * BLOCK_BYTES + p % 64];
    return p < 64 ? byte & 0xfu : byte >> 4;
}

/* Scale and zero of output o, group g, in either layout. */
static inline int64_t sz_at(const awq_cpu_linear *l, int64_t o, int64_t g)
{
    return l->interleaved ? (o / 16 * l->n_groups + g) * 16 + o % 16 : o * l->n_groups + g;
}

void awq_cpu_dequant(const awq_cpu_linear *l, float *out)
{
    for (int64_t o = 0; o < l->out; o++)
        for (int64_t i = 0; i < l->in; i++) {
            int64_t g = i / l->group;
            int z = l->zeros[sz_at(l, o, g)];
            float s = llmrt_f16_to_f32(l->scales[sz_at(l, o, g)]);
            out[o * l->in + i] = (float)((int)q_at(l, o, i) - z) * s;
        }
}

/* ---- scratch ---- */

/* Per row of x, in floats (each part a multiple of 16 floats):
 *   exact: xs [n_groups] group sums
 *   int8:  c [n_groups] group sums of x', d [4 n_blocks] the scale of each 32 inputs,
 *          qx [128 n_blocks] int8 */
typedef struct {
    int64_t stride, c, d, qx; /* offsets in floats within a row */
} scratch_layout;

static int64_t up16(int64_t v)
{
    return (v + 15) / 16 * 16;
}

static scratch_layout layout_of(const awq_cpu_linear *l)
{
    scratch_layout s;
    s.c = 0;
    s.d = up16(l->n_groups);
    s.qx = s.d + up16(4 * l->n_blocks);
    s.stride = s.qx + 32 * l->n_blocks;
    return s;
}

/* Rows of scratch for n rows of x: the AMX kernel reads tiles of 32 rows (zero past n). */
static int64_t scratch_rows(const awq_cpu_linear *l, int32_t n)
{
    return l->amx && n >= AMX_MIN_ROWS ? (n + 31) / 32 * 32 : n;
}

int64_t awq_cpu_scratch_floats(const awq_cpu_linear *l, int32_t n)
{
    return scratch_rows(l, n) * layout_of(l).stride;
}

static inline float lane_sum(const float *acc)
{
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

typedef struct {
    const awq_cpu_linear *l;
    float *y;        /* [n, out] */
    const float *x;  /* [n, in] */
    float *scratch;  /* [scratch_rows, layout.stride] */
    scratch_layout sl;
    int64_t n;
    int span;        /* int8: inputs per activation scale, 32 (or 128 for the AMX kernel) */
} fwd_ctx;

/* ---- exact kernels ----
 *
 * GNU C vector types (GCC and Clang): `VW` floats per vector, 16 lanes in 16 / VW vectors.
 * Lane l of slice t is input 16t + l, so for any VW lane l sees the same f32 operations in
 * the same order: the AVX-512 (VW 16), AVX2 (VW 8) and baseline (VW 4, SSE2 or NEON) kernels
 * give identical results, and so does any number of rows R processed together.
 *
 * Output o against R rows of x ([R, in], row stride in) with their group sums xs (row stride
 * xs_stride) writes y[r * y_stride]; cols_<SUF> runs outputs [o0, o1) for all rows, R_MAX
 * rows at a time. Slice t < 4 of a block is the low nibbles of its bytes 16t .. 16t+15,
 * slice t >= 4 the high nibbles of bytes 16(t-4) ... */
#define DEFINE_AWQ_KERNEL(SUF, VW, R_MAX, ATTR)                                                 \
    typedef float f32v_##SUF __attribute__((vector_size(VW * 4)));                             \
    typedef uint32_t u32v_##SUF __attribute__((vector_size(VW * 4)));                          \
    typedef int32_t i32v_##SUF __attribute__((vector_size(VW * 4)));                           \
    ATTR static inline ALWAYS_INLINE void dot_##SUF(const awq_cpu_linear *L, int64_t o,        \
                                                    const float *restrict x,                   \
                                                    const float *restrict xs,                  \
                                                    int64_t xs_stride, float *restrict y,      \
                                                    int64_t y_stride, const int R)             \
    {                                                                                          \
        enum { NV = LANES / VW };                                                              \
        const int64_t in = L->in, ng = L->n_groups;                                            \
        const int slices_per_group = (int)(L->group / 16);                                     \
        const uint8_t *restrict qw = L->q + o * L->n_blocks * BLOCK_BYTES;                     \
        const uint16_t *sc = L->scales + o * ng;                                               \
        const uint8_t *zp = L->zeros + o * ng;                                                 \
        const f32v_##SUF zero = {0};                                                           \
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
            const uint8_t *qb = qw + b * BLOCK_BYTES;                                          \
            const int kmax = in - b * BLOCK >= BLOCK ? 8 : (int)((in - b * BLOCK) / 16);       \
            for (int k = 0; k < kmax; k++) {                                                   \
                f32v_##SUF qf[NV];                                                             \
                for (int v = 0; v < NV; v++) {                                                 \
                    u32v_##SUF u;                                                              \
                    U8_WIDEN_##SUF(&u, qb + 16 * (k & 3) + v * VW);                            \
                    u = k < 4 ? u & 0xfu : u >> 4;                                             \
                    qf[v] = __builtin_convertvector((i32v_##SUF)u, f32v_##SUF);                \
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
                        zt[r] += sz * xs[r * xs_stride + g];                                   \
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
        const int64_t in = L->in, out = L->out, xss = f->sl.stride;                            \
        for (int64_t r0 = 0; r0 < f->n; r0 += ROW_BLOCK) {                                     \
            int64_t r1 = r0 + ROW_BLOCK < f->n ? r0 + ROW_BLOCK : f->n;                        \
            for (int64_t o = o0; o < o1; o++) {                                                \
                int64_t r = r0;                                                                \
                for (; r + R_MAX <= r1; r += R_MAX)                                            \
                    dot_##SUF(L, o, f->x + r * in, f->scratch + r * xss, xss,                  \
                              f->y + r * out + o, out, R_MAX);                                 \
                if (R_MAX >= 8 && r + 4 <= r1) {                                               \
                    dot_##SUF(L, o, f->x + r * in, f->scratch + r * xss, xss,                  \
                              f->y + r * out + o, out, R_MAX >= 8 ? 4 : 1);                    \
                    r += 4;                                                                    \
                }                                                                              \
                for (; r < r1; r++)                                                            \
                    dot_##SUF(L, o, f->x + r * in, f->scratch + r * xss, xss,                  \
                              f->y + r * out + o, out, 1);                                     \
            }                                                                                  \
        }                                                                                      \
    }

/* U8_WIDEN_<SUF>(out, p): VW bytes from p zero-extended to 32-bit lanes (GCC widens a
 * generic byte vector element by element; these are one or two instructions). */
#ifdef AWQ_HAVE_X86_KERNELS
static inline ALWAYS_INLINE void widen_sse2(void *out, const uint8_t *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    const __m128i z = _mm_setzero_si128();
    __m128i v = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128((int)w), z), z);
    memcpy(out, &v, 16);
}
#define U8_WIDEN_base(out, p) widen_sse2(out, p)
#else
#define U8_WIDEN_base(out, p)                                                                  \
    do {                                                                                       \
        for (int e_ = 0; e_ < 4; e_++)                                                         \
            (*(out))[e_] = (p)[e_];                                                            \
    } while (0)
#endif
/* Baseline: 16-byte vectors (SSE2 on x86-64, NEON on arm64), two rows per weight pass. */
DEFINE_AWQ_KERNEL(base, 4, 2, )

#ifdef AWQ_HAVE_X86_KERNELS
#define EXACT_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2")))
__attribute__((target("avx2"))) static inline ALWAYS_INLINE void widen_avx2(void *out,
                                                                          const uint8_t *p)
{
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    memcpy(out, &v, 32);
}
EXACT_512 static inline ALWAYS_INLINE void widen_avx512(void *out, const uint8_t *p)
{
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    memcpy(out, &v, 64);
}
#define U8_WIDEN_avx2(out, p) widen_avx2(out, p)
#define U8_WIDEN_avx512(out, p) widen_avx512(out, p)
/* AVX2: 32-byte vectors and four rows per pass; AVX-512: one vector per 16 lanes, eight rows. */
DEFINE_AWQ_KERNEL(avx2, 8, 4, __attribute__((target("avx2"))))
DEFINE_AWQ_KERNEL(avx512, 16, 8, EXACT_512)
#endif

/* Group sums of rows [r0, r1) for the exact kernels. */
static void exact_prep(void *c, int64_t r0, int64_t r1)
{
    const fwd_ctx *f = c;
    const awq_cpu_linear *l = f->l;
    const int64_t in = l->in, g = l->group;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t j = 0; j < l->n_groups; j++) {
            const float *xg = f->x + r * in + j * g;
            float acc[LANES] = {0};
            for (int64_t i = 0; i < g; i += LANES)
                for (int t = 0; t < LANES; t++)
                    acc[t] += xg[i + t];
            f->scratch[r * f->sl.stride + j] = lane_sum(acc);
        }
}

#ifdef AWQ_HAVE_X86_KERNELS
/* ---- int8 kernels ---- */

#define I8_256 __attribute__((target("avx2,fma,f16c")))
#define I8_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

I8_256 static inline float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Rows [r0, r1) of x into their scratch: per span (32 or 128) inputs the scale d (stored for
 * each of its 32-input slices j as d_j), the int8 values and the group sums c_g of x' (NaN and
 * infinity in x make d NaN, so they reach y). Rows at or past n (the AMX kernel's padding) get
 * zero int8 values. */
I8_256 static void int8_prep(void *c, int64_t r0, int64_t r1)
{
    const fwd_ctx *f = c;
    const awq_cpu_linear *l = f->l;
    const int64_t in = l->in, nb = l->n_blocks, n32 = 4 * nb, per = f->span / 32;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t r = r0; r < r1; r++) {
        float *row = f->scratch + r * f->sl.stride;
        float *cg = row + f->sl.c, *d = row + f->sl.d;
        int8_t *qx = (int8_t *)(row + f->sl.qx);
        if (r >= f->n) {
            memset(qx, 0, (size_t)(BLOCK * nb));
            continue;
        }
        const float *x = f->x + r * in;
        for (int64_t g = 0; g < l->n_groups; g++)
            cg[g] = 0.0f;
        for (int64_t j0 = 0; j0 < n32; j0 += per) {
            /* the span's max |x| (and 0 x sum, NaN for a NaN or infinity) */
            __m256 m = _mm256_setzero_ps(), sum = _mm256_setzero_ps();
            for (int64_t j = j0; j < j0 + per && 32 * j < in; j++)
                for (int k = 0; k < 4; k++) {
                    const __m256 v = _mm256_loadu_ps(x + 32 * j + 8 * k);
                    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v));
                    sum = _mm256_add_ps(sum, v);
                }
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            const float amax = _mm_cvtss_f32(m4) + 0.0f * hsum256(sum); /* NaN, inf → NaN */
            const float dj = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
            for (int64_t j = j0; j < j0 + per; j++) {
                if (32 * j >= in) { /* padding of the last block */
                    d[j] = 0.0f;
                    memset(qx + 32 * j, 0, 32);
                    continue;
                }
                __m256i q[4], isum = _mm256_setzero_si256();
                for (int k = 0; k < 4; k++) {
                    const __m256 v = _mm256_loadu_ps(x + 32 * j + 8 * k);
                    q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v, _mm256_set1_ps(id)));
                    isum = _mm256_add_epi32(isum, q[k]);
                }
                __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
                                               _mm256_packs_epi32(q[2], q[3]));
                _mm256_storeu_si256((__m256i *)(qx + 32 * j),
                                    _mm256_permutevar8x32_epi32(p, order));
                __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(isum),
                                           _mm256_extracti128_si256(isum, 1));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
                d[j] = dj;
                cg[32 * j / l->group] += dj * (float)_mm_cvtsi128_si32(s4);
            }
        }
    }
}

/* AVX2: outputs o .. o + O - 1 against R rows. Per 32 inputs j: vpmaddubsw + vpmaddwd give
 * eight int32 sums of four products, scaled by d_j into the group's f32 partial P; at the
 * end of group g, P scaled by s_g into the accumulator; the zero points come last, eight
 * groups at a time. Each (row, output) runs the same operations in the same order for any R
 * and O, so a row's result does not depend on the rows or outputs beside it. The scales are
 * converted with F16C once per output and call, the group of a slice found by counting (no
 * division), several outputs share each load of x, and each block's 64 bytes load at once with
 * a software prefetch a few KB ahead: with the hardware prefetcher alone the decode stream was
 * latency-bound (BENCHMARKS.md, 2026-12-02 fourth session). */
#define I8_256_MAX_GROUPS 512 /* in / group for the stack copy of the scales (else per use) */
#define I8_256_PREFETCH 2048  /* bytes of weights ahead of the loads */
I8_256 static inline ALWAYS_INLINE void dot_i8_256(const awq_cpu_linear *L, int64_t o,
                                                   const float *rows, int64_t rs,
                                                   scratch_layout sl, float *y,
                                                   int64_t y_stride, const int R, const int O)
{
    const int64_t nb = L->n_blocks, ng = L->n_groups, n32 = L->in / 32;
    const int spg = (int)(L->group / 32); /* 32-input slices per group */
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const uint8_t *qw[2];
    const uint16_t *sc[2];
    float sf[2][I8_256_MAX_GROUPS];
    const int stack_scales = ng <= I8_256_MAX_GROUPS;
    for (int u = 0; u < O; u++) {
        qw[u] = L->q + (o + u) * nb * BLOCK_BYTES;
        sc[u] = L->scales + (o + u) * ng;
        if (stack_scales) {
            int64_t g = 0;
            for (; g + 8 <= ng; g += 8)
                _mm256_storeu_ps(sf[u] + g, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc[u] + g))));
            for (; g < ng; g++)
                sf[u][g] = _cvtsh_ss(sc[u][g]);
        }
    }
    __m256 acc[4][2], P[4][2];
    for (int r = 0; r < R; r++)
        for (int u = 0; u < O; u++)
            acc[r][u] = P[r][u] = _mm256_setzero_ps();
    int64_t g = 0;
    int in_group = 0;
    for (int64_t b = 0; b < nb; b++) {
        /* the block's 64 bytes at once, and the stream I8_256_PREFETCH bytes ahead (the rows
         * of a chunk of outputs are contiguous) */
        __m256i w0[2], w1[2];
        for (int u = 0; u < O; u++) {
            const uint8_t *qb = qw[u] + b * BLOCK_BYTES;
            _mm_prefetch((const char *)qb + I8_256_PREFETCH, _MM_HINT_T0);
            w0[u] = _mm256_loadu_si256((const __m256i *)qb);
            w1[u] = _mm256_loadu_si256((const __m256i *)(qb + 32));
        }
        const int mmax = 4 * b + 4 <= n32 ? 4 : (int)(n32 - 4 * b); /* a partial last block */
#pragma GCC unroll 4
        for (int m = 0; m < mmax; m++) {
            const int64_t j = 4 * b + m;
            __m256i q[2];
            for (int u = 0; u < O; u++) /* slice m: low nibbles of bytes 0-31, 32-63, then high */
                q[u] = _mm256_and_si256(m == 0   ? w0[u]
                                        : m == 1 ? w1[u]
                                        : m == 2 ? _mm256_srli_epi16(w0[u], 4)
                                                 : _mm256_srli_epi16(w1[u], 4),
                                        m4);
            for (int r = 0; r < R; r++) {
                const float *row = rows + r * rs;
                const __m256i xq = _mm256_loadu_si256((const __m256i *)((const int8_t *)(row + sl.qx) + 32 * j));
                const __m256 d = _mm256_broadcast_ss(row + sl.d + j);
                for (int u = 0; u < O; u++) {
                    const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q[u], xq), ones);
                    P[r][u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), d, P[r][u]);
                }
            }
            if (++in_group == spg) { /* end of group g */
                for (int u = 0; u < O; u++) {
                    const __m256 sv = _mm256_set1_ps(stack_scales ? sf[u][g] : _cvtsh_ss(sc[u][g]));
                    for (int r = 0; r < R; r++) {
                        acc[r][u] = _mm256_fmadd_ps(P[r][u], sv, acc[r][u]);
                        P[r][u] = _mm256_setzero_ps();
                    }
                }
                in_group = 0;
                g++;
            }
        }
    }
    for (int u = 0; u < O; u++) {
        const uint16_t *scu = sc[u];
        const uint8_t *zp = L->zeros + (o + u) * ng;
        float zt[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        int64_t gz = 0;
        for (; gz + 8 <= ng; gz += 8) {
            __m256 sv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scu + gz)));
            __m256 z = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(zp + gz))));
            __m256 sz = _mm256_mul_ps(sv, z);
            for (int r = 0; r < R; r++)
                acc[r][u] = _mm256_fnmadd_ps(sz, _mm256_loadu_ps(rows + r * rs + sl.c + gz), acc[r][u]);
        }
        for (; gz < ng; gz++) {
            const float sz = _cvtsh_ss(scu[gz]) * (float)zp[gz];
            for (int r = 0; r < R; r++)
                zt[r] += sz * rows[r * rs + sl.c + gz];
        }
        for (int r = 0; r < R; r++)
            y[r * y_stride + u] = hsum256(acc[r][u]) - zt[r];
    }
}

/* Rows in fours, then twos, then one; outputs one at a time beside four rows, in pairs
 * beside fewer (the accumulators fit the sixteen ymm registers). */
I8_256 static void cols_i8_256(const fwd_ctx *f, int64_t o0, int64_t o1)
{
    const awq_cpu_linear *L = f->l;
    const int64_t out = L->out, rs = f->sl.stride;
    int64_t r = 0;
#define I8_256_ROWS(RR)                                                                            do {                                                                                               const float *rows_ = f->scratch + r * rs;                                                      float *y_ = f->y + r * out;                                                                    int64_t o = o0;                                                                                if (RR < 4)                                                                                        for (; o + 2 <= o1; o += 2)                                                                        dot_i8_256(L, o, rows_, rs, f->sl, y_ + o, out, RR, 2);                                for (; o < o1; o++)                                                                                dot_i8_256(L, o, rows_, rs, f->sl, y_ + o, out, RR, 1);                                } while (0)
    for (; r + 4 <= f->n; r += 4)
        I8_256_ROWS(4);
    if (r + 2 <= f->n) {
        I8_256_ROWS(2);
        r += 2;
    }
    if (r < f->n)
        I8_256_ROWS(1);
#undef I8_256_ROWS
}


/* AVX-512 (interleaved layout): the sixteen outputs of group og against T rows of x from
 * row r0. Per 32 inputs j: four steps of two vpdpbusd per row (lanes = outputs, each summing
 * four products of a weight byte and x broadcast), the int32 sums scaled by d_j into P; at
 * the end of each group, P scaled by s_g into y and the zero points' term subtracted. The
 * first tile of rows prefetches the stream I8_512_PREFETCH bytes ahead (the output groups'
 * weights are contiguous). */
#define I8_512_PREFETCH 2048
I8_512 static inline ALWAYS_INLINE void tile_i8_512(const fwd_ctx *f, int64_t og, int64_t r0,
                                                    const int T, const int G)
{
    const awq_cpu_linear *L = f->l;
    const int64_t nb = L->n_blocks, ng = L->n_groups, rs = f->sl.stride, n32 = L->in / 32;
    const uint8_t *qw = L->q + og * nb * 1024;
    const uint16_t *sc = L->scales + og * ng * 16;
    const uint8_t *zp = L->zeros + og * ng * 16;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const float *row[8];
    const int8_t *qx[8];
    __m512 y[8], P[8];
    for (int t = 0; t < T; t++) {
        row[t] = f->scratch + (r0 + t) * rs;
        qx[t] = (const int8_t *)(row[t] + f->sl.qx);
        y[t] = P[t] = _mm512_setzero_ps();
    }
    int in_group = 0;
    int64_t g = 0;
    for (int64_t j = 0; j < n32; j++) {
        __m512i I[8];
        for (int t = 0; t < T; t++)
            I[t] = _mm512_setzero_si512();
        const uint8_t *wj = qw + j * 256; /* steps 4 (j % 4) .. +3 of block j / 4 */
        for (int st = 0; st < 4; st++) {
            if (r0 == 0) /* the stream a few KB ahead, once per call (as the AVX2 kernel) */
                _mm_prefetch((const char *)(wj + 64 * st) + I8_512_PREFETCH, _MM_HINT_T0);
            const __m512i w = _mm512_loadu_si512((const void *)(wj + 64 * st));
            const __m512i lo = _mm512_and_si512(w, m4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
            for (int t = 0; t < T; t++) {
                int32_t x0, x1;
                memcpy(&x0, qx[t] + 32 * j + 8 * st, 4);
                memcpy(&x1, qx[t] + 32 * j + 8 * st + 4, 4);
                I[t] = _mm512_dpbusd_epi32(I[t], lo, _mm512_set1_epi32(x0));
                I[t] = _mm512_dpbusd_epi32(I[t], hi, _mm512_set1_epi32(x1));
            }
        }
        for (int t = 0; t < T; t++)
            P[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[t]), _mm512_set1_ps(row[t][f->sl.d + j]),
                                   P[t]);
        if (++in_group == G / 32) {
            const __m512 sv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + g * 16)));
            const __m512 zv = _mm512_cvtepi32_ps(
                _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(zp + g * 16))));
            const __m512 szv = _mm512_mul_ps(sv, zv);
            for (int t = 0; t < T; t++) {
                y[t] = _mm512_fmadd_ps(P[t], sv, y[t]);
                y[t] = _mm512_fnmadd_ps(szv, _mm512_set1_ps(row[t][f->sl.c + g]), y[t]);
                P[t] = _mm512_setzero_ps();
            }
            in_group = 0;
            g++;
        }
    }
    const int64_t out = L->out;
    const __mmask16 m = out - 16 * og >= 16 ? (__mmask16)0xffff : (__mmask16)0x00ff;
    for (int t = 0; t < T; t++)
        _mm512_mask_storeu_ps(f->y + (r0 + t) * out + 16 * og, m, y[t]);
}

/* Output groups [g0, g1): the rows eight at a time (then 4, 2, 1); the group's weights
 * (in / 2 x 16 bytes) stay in L1 while they meet every tile of rows. */
#define TILES_512(G)                                                                           \
    do {                                                                                       \
        int64_t r = 0;                                                                         \
        for (; r + 8 <= f->n; r += 8)                                                          \
            tile_i8_512(f, og, r, 8, G);                                                       \
        if (r + 4 <= f->n)                                                                     \
            tile_i8_512(f, og, r, 4, G), r += 4;                                               \
        if (r + 2 <= f->n)                                                                     \
            tile_i8_512(f, og, r, 2, G), r += 2;                                               \
        if (r < f->n)                                                                          \
            tile_i8_512(f, og, r, 1, G);                                                       \
    } while (0)

I8_512 static void cols_i8_512(const fwd_ctx *f, int64_t g0, int64_t g1)
{
    for (int64_t og = g0; og < g1; og++) {
        if (f->l->group == 128)
            TILES_512(128);
        else if (f->l->group == 64)
            TILES_512(64);
        else
            TILES_512(32);
    }
}
#endif

#if defined(AWQ_HAVE_X86_KERNELS) && (__GNUC__ >= 11 || defined(__clang__))
#define AWQ_HAVE_AMX 1
/* ---- the AMX kernel (simd = amx, group 128, calls of >= AMX_MIN_ROWS rows) ----
 *
 * TDPBSUD C += A · B: A = 16 rows of int8 x (signed) x 64 inputs, loaded straight from the
 * rows' scratch; B = 64 inputs x 16 outputs of weight bytes (unsigned) in the four-byte groups
 * AMX wants, which are exactly the interleaved layout's steps: step t's low nibbles are inputs
 * 8t .. 8t+3 of the 16 outputs, its high nibbles 8t+4 .. 8t+7, so a B tile is eight steps
 * unpacked into 16 rows of 64 bytes; C = 16 rows x 16 outputs of int32, in y's orientation.
 * x is quantized per 128 inputs (span 128), so one group's C (two TDPBSUD) is scaled once:
 *   y[t][o] += s_g[o] (d_g[t] C[t][o]) - s_g[o] z_g[o] c_g[t]
 * Tiles: 2 row tiles x 2 output groups (C0..C3), A0/A1, B0/B1; y accumulates in memory. */
#define AMX_I8 __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* C tile (int32 [16][16] at c) of rows r0.., output group og, group g into y. */
AMX_I8 static inline ALWAYS_INLINE void amx_flush(const fwd_ctx *f, const int32_t *c, int64_t r0,
                                                  int64_t og, int64_t g, __m512 sv, __m512 szv)
{
    const int64_t out = f->l->out, rs = f->sl.stride;
    const __mmask16 m = out - 16 * og >= 16 ? (__mmask16)0xffff : (__mmask16)0x00ff;
    for (int t = 0; t < 16 && r0 + t < f->n; t++) {
        const float *row = f->scratch + (r0 + t) * rs;
        float *yr = f->y + (r0 + t) * out + 16 * og;
        __m512 acc = _mm512_maskz_loadu_ps(m, yr);
        const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * t)), sv);
        acc = _mm512_fmadd_ps(v, _mm512_set1_ps(row[f->sl.d + 4 * g]), acc);
        acc = _mm512_fnmadd_ps(szv, _mm512_set1_ps(row[f->sl.c + g]), acc);
        _mm512_mask_storeu_ps(yr, m, acc);
    }
}

/* Rows [r0, r0 + 16 NT) against output groups og0 (.. og0 + 1 when NO = 2) for group g; the
 * tile numbers must be constants, hence the unrolled forms. */
AMX_I8 static inline ALWAYS_INLINE void amx_block(const fwd_ctx *f, const uint8_t *bt,
                                                  int64_t r0, int64_t og0, int64_t g,
                                                  const __m512 *sv, const __m512 *szv,
                                                  const int NO, const int NT)
{
    const size_t rsb = (size_t)f->sl.stride * 4;
    const int8_t *a0 = (const int8_t *)(f->scratch + r0 * f->sl.stride + f->sl.qx) + BLOCK * g;
    const int8_t *a1 = a0 + 16 * rsb;
    int32_t c[16 * 16] __attribute__((aligned(64)));
    _tile_zero(0);
    if (NT == 2)
        _tile_zero(1);
    if (NO == 2)
        _tile_zero(2);
    if (NO == 2 && NT == 2)
        _tile_zero(3);
    for (int kh = 0; kh < 2; kh++) {
        _tile_loadd(4, a0 + 64 * kh, rsb);
        _tile_loadd(6, bt + kh * 1024, 64);
        _tile_dpbsud(0, 4, 6);
        if (NT == 2) {
            _tile_loadd(5, a1 + 64 * kh, rsb);
            _tile_dpbsud(1, 5, 6);
        }
        if (NO == 2) {
            _tile_loadd(7, bt + 2048 + kh * 1024, 64);
            _tile_dpbsud(2, 4, 7);
            if (NT == 2)
                _tile_dpbsud(3, 5, 7);
        }
    }
    _tile_stored(0, c, 64);
    amx_flush(f, c, r0, og0, g, sv[0], szv[0]);
    if (NT == 2) {
        _tile_stored(1, c, 64);
        amx_flush(f, c, r0 + 16, og0, g, sv[0], szv[0]);
    }
    if (NO == 2) {
        _tile_stored(2, c, 64);
        amx_flush(f, c, r0, og0 + 1, g, sv[1], szv[1]);
        if (NT == 2) {
            _tile_stored(3, c, 64);
            amx_flush(f, c, r0 + 16, og0 + 1, g, sv[1], szv[1]);
        }
    }
}

/* Items: pairs of output groups (32 outputs). */
AMX_I8 static void amx_pairs(void *ctx, int64_t p0, int64_t p1)
{
    const fwd_ctx *f = ctx;
    const awq_cpu_linear *L = f->l;
    const int64_t nb = L->n_blocks, ng = L->n_groups, out = L->out;
    const int64_t n_rt = (f->n + 15) / 16; /* row tiles */
    amx_cfg cfg = {.palette = 1};
    for (int t = 0; t < 8; t++)
        cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
    uint8_t bt[4 * 1024] __attribute__((aligned(64))); /* [output group][input half] B tiles */
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int64_t pr = p0; pr < p1; pr++) {
        const int64_t og0 = 2 * pr;
        const int no = og0 + 1 < L->n_og ? 2 : 1;
        const int64_t cols = 16 * og0 + 16 * no <= out ? 16 * no : out - 16 * og0;
        for (int64_t r = 0; r < f->n; r++)
            memset(f->y + r * out + 16 * og0, 0, (size_t)cols * sizeof(float));
        for (int64_t g = 0; g < ng; g++) { /* group 128: group g is block g */
            __m512 sv[2], szv[2];
            for (int h = 0; h < no; h++) {
                const uint8_t *src = L->q + ((og0 + h) * nb + g) * 1024;
                for (int st = 0; st < 16; st++) {
                    const __m512i w = _mm512_load_si512((const void *)(src + 64 * st));
                    uint8_t *dst = bt + h * 2048 + (st / 8) * 1024 + (st % 8) * 128;
                    _mm512_store_si512((void *)dst, _mm512_and_si512(w, m4));
                    _mm512_store_si512((void *)(dst + 64),
                                       _mm512_and_si512(_mm512_srli_epi16(w, 4), m4));
                }
                const int64_t at = ((og0 + h) * ng + g) * 16;
                sv[h] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(L->scales + at)));
                szv[h] = _mm512_mul_ps(sv[h], _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                                  _mm_loadu_si128((const __m128i *)(L->zeros + at)))));
            }
            int64_t rt = 0;
            for (; rt + 2 <= n_rt; rt += 2) {
                if (no == 2)
                    amx_block(f, bt, 16 * rt, og0, g, sv, szv, 2, 2);
                else
                    amx_block(f, bt, 16 * rt, og0, g, sv, szv, 1, 2);
            }
            if (rt < n_rt) {
                if (no == 2)
                    amx_block(f, bt, 16 * rt, og0, g, sv, szv, 2, 1);
                else
                    amx_block(f, bt, 16 * rt, og0, g, sv, szv, 1, 1);
            }
        }
    }
    _tile_release();
}
#endif

static void fwd_chunk(void *c, int64_t c0, int64_t c1)
{
    const fwd_ctx *f = c;
    int64_t o0 = c0 * COLS_CHUNK, o1 = c1 * COLS_CHUNK;
    if (o1 > f->l->out)
        o1 = f->l->out;
    switch (f->l->kernel) {
#ifdef AWQ_HAVE_X86_KERNELS
    case AWQ_EXACT_AVX512: cols_avx512(f, o0, o1); break;
    case AWQ_EXACT_AVX2: cols_avx2(f, o0, o1); break;
    case AWQ_INT8_AVX2: cols_i8_256(f, o0, o1); break;
    case AWQ_INT8_AVX512: cols_i8_512(f, c0, c1 < f->l->n_og ? c1 : f->l->n_og); break;
#endif
    default: cols_base(f, o0, o1); break;
    }
}

void awq_cpu_forward(const llmrt_backend_ref *be, const awq_cpu_linear *l, float *y,
                     const float *x, int32_t n, float *scratch)
{
    fwd_ctx f = {l, y, x, scratch, layout_of(l), n, 32};
    void (*prep)(void *, int64_t, int64_t) = exact_prep;
    int64_t prep_rows = n;
#ifdef AWQ_HAVE_X86_KERNELS
    if (l->kernel == AWQ_INT8_AVX2 || l->kernel == AWQ_INT8_AVX512)
        prep = int8_prep;
#endif
#ifdef AWQ_HAVE_AMX
    const int amx = l->amx && n >= AMX_MIN_ROWS;
    if (amx) {
        f.span = 128;
        prep_rows = scratch_rows(l, n);
    }
#endif
    /* the rows' preparation is ~in operations each: parallel only for prefill-sized calls */
    if (n >= 16)
        run_parallel(be, prep_rows, l->in, prep, &f);
    else
        prep(&f, 0, prep_rows);
#ifdef AWQ_HAVE_AMX
    if (amx) {
        run_parallel(be, (l->n_og + 1) / 2, 32 * l->in * n / 8, amx_pairs, &f);
        return;
    }
#endif
    run_parallel(be, (l->out + COLS_CHUNK - 1) / COLS_CHUNK, COLS_CHUNK * l->in * n / 2,
                 fwd_chunk, &f);
}
