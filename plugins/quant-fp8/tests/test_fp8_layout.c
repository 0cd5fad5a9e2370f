/* test_fp8_layout.c — quant-fp8's CUDA kernels emulated on the CPU (ctest quant-fp8.layout):
 * the repack, the GEMV (both semantics, every n-tile count, K-splitting warps, SwiGLU, x staged
 * in shared memory, the items of a one-wave grid), the activation quantization and the FP8
 * GEMM, written warp by warp and lane by lane as
 * fp8_cuda.cu does them, with the index arithmetic of fp8_cuda_layout.h (the kernels' own),
 * the registers built from the packed words with the kernels' shifts, and mma.sync emulated
 * from the PTX ISA's fragment layouts. The emulated outputs must equal the plugin's CPU
 * kernels (the reference) on shapes with partial blocks.
 *
 * Why: no GPU in CI, and a wrong lane, byte or token in a fragment mapping is exactly the bug
 * that a GPU test would show as garbage. The mma layouts themselves are the PTX ISA's; the
 * k32 test is also run with another k assignment (registers 0/2 of A and 0/1 of B swapping
 * k halves), since the kernels' correctness must not depend on which one the hardware uses:
 * A and B take the same inputs in the same register slots. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_act.h"
#include "fp8_cuda_layout.h"
#include "fp8_test_common.h"
#include "test_util.h"

/* ---- the layout ---- */

/* wq as 32-bit words [n_mt][n_kc][32][4], as fp8_repack_kernel writes it. */
static uint32_t *emu_repack(const uint8_t *codes, int64_t out, int64_t in, int64_t n_mt,
                            int64_t n_kc)
{
    const int64_t total = n_mt * n_kc * 128;
    uint32_t *wq = calloc((size_t)total, 4);
    for (int64_t i = 0; i < total; i++) {
        const int j = (int)(i & 3), lane = (int)((i >> 2) & 31);
        const int64_t kc = (i >> 7) % n_kc, mt = (i >> 7) / n_kc;
        int64_t r, k0;
        fp8_cl_word_pos(mt, kc, lane, j, &r, &k0);
        uint32_t word = 0;
        for (int b = 0; b < 4; b++)
            if (r < out && k0 + b < in)
                word |= (uint32_t)codes[r * in + k0 + b] << (8 * b);
        wq[i] = word;
    }
    return wq;
}

/* ---- mma.sync, from the PTX ISA's fragment layouts ---- */

/* m16n8k16 f16: a[lane][4 regs][2 halves], b[lane][2][2]; d[lane][4] += A B. */
static void emu_mma16816(double d[32][4], const float a[32][4][2], const float b[32][2][2])
{
    double A[16][16], B[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 4; i++)
            for (int e = 0; e < 2; e++)
                A[g + 8 * (i & 1)][2 * t + e + 8 * (i >> 1)] = a[lane][i][e];
        for (int i = 0; i < 2; i++)
            for (int e = 0; e < 2; e++)
                B[2 * t + e + 8 * i][g] = b[lane][i][e];
    }
    for (int lane = 0; lane < 32; lane++)
        for (int c = 0; c < 4; c++) {
            const int row = (lane >> 2) + 8 * (c >> 1), col = 2 * (lane & 3) + (c & 1);
            double s = 0;
            for (int k = 0; k < 16; k++)
                s += A[row][k] * B[k][col];
            d[lane][c] += s;
        }
}

static int K32_ALT; /* 1: the alternative k assignment (see the header) */

/* m16n8k32 e4m3: a[lane][4] and b[lane][2] packed words; d[lane][4] += A B. */
static void emu_mma16832(double d[32][4], const uint32_t a[32][4], const uint32_t b[32][2])
{
    double A[16][32], B[32][8];
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane & 3;
        for (int i = 0; i < 4; i++)
            for (int e = 0; e < 4; e++) {
                const int k = K32_ALT ? 8 * t + e + 4 * (i >> 1) : 4 * t + e + 16 * (i >> 1);
                A[g + 8 * (i & 1)][k] = llmrt_e4m3_to_f32((uint8_t)(a[lane][i] >> (8 * e)));
            }
        for (int i = 0; i < 2; i++)
            for (int e = 0; e < 4; e++) {
                const int k = K32_ALT ? 8 * t + e + 4 * i : 4 * t + e + 16 * i;
                B[k][g] = llmrt_e4m3_to_f32((uint8_t)(b[lane][i] >> (8 * e)));
            }
    }
    for (int lane = 0; lane < 32; lane++)
        for (int c = 0; c < 4; c++) {
            const int row = (lane >> 2) + 8 * (c >> 1), col = 2 * (lane & 3) + (c & 1);
            double s = 0;
            for (int k = 0; k < 32; k++)
                s += A[row][k] * B[k][col];
            d[lane][c] += s;
        }
}

/* ---- the kernels' register helpers ---- */

/* e4m3x2_h2: the two codes in the low 16 bits, as an f16 pair (exact). */
static void pair_of_codes(uint32_t two, float out[2])
{
    out[0] = llmrt_e4m3_to_f32((uint8_t)(two & 0xff));
    out[1] = llmrt_e4m3_to_f32((uint8_t)((two >> 8) & 0xff));
}

static float f16(float v)
{
    return llmrt_f16_to_f32(llmrt_f32_to_f16(v));
}

/* load_x4 */
static void load_x4(const float *x, int tok, int n, int in, int k, float v[4])
{
    for (int i = 0; i < 4; i++)
        v[i] = tok < n && k + i < in ? x[(int64_t)tok * in + k + i] : 0.0f;
}

/* ---- the GEMV, as fp8_gemv_kernel ---- */

typedef struct emu_linear {
    int64_t in, out, inp, outp, n_mt, n_kc, nkb;
    uint32_t *wq;
    float *scale; /* [ceil(outp/128)][nkb] */
} emu_linear;

static emu_linear emu_load(const ft_linear *src)
{
    emu_linear l;
    l.in = src->in;
    l.out = src->out;
    l.inp = (src->in + 127) / 128 * 128;
    l.outp = (src->out + FP8_GM_BM - 1) / FP8_GM_BM * FP8_GM_BM;
    l.n_mt = l.outp / 16;
    l.n_kc = l.inp / 32;
    l.nkb = l.inp / 128;
    l.wq = emu_repack(src->codes, src->out, src->in, l.n_mt, l.n_kc);
    const int64_t nrb = (l.outp + 127) / 128;
    l.scale = calloc((size_t)(nrb * l.nkb), sizeof(float));
    for (int64_t i = 0; i < src->rb * src->kb; i++)
        l.scale[i] = src->sf[i];
    return l;
}

static void emu_free(emu_linear *l)
{
    free(l->wq);
    free(l->scale);
}

/* One warp's 128 inputs of token tok, K block kb (lane L: inputs 4 L .. 4 L + 3, zeros past n
 * or in) and the activation scale of their amax over the warp. */
static float emu_warp_block(const float *x, int tok, int n, int in, int kb, float v[32][4])
{
    float amax = 0;
    for (int lane = 0; lane < 32; lane++) {
        load_x4(x, tok, n, in, kb * 128 + 4 * lane, v[lane]);
        for (int i = 0; i < 4; i++)
            amax = fmaxf(amax, fabsf(v[lane][i]));
    }
    return fp8_act_scale(amax);
}

/* gv_stage: x [n, in] staged as f16 values, [n][xstride words][2 halves], and (W8A8) the
 * scales [n][nkb], warp by warp as the kernel writes them (lane L: inputs 4 L .. 4 L + 3 of
 * K block kb; the block's amax over the warp). */
static void emu_stage(const emu_linear *l, const float *x, int n, int w8a8, float *xs, float *sxs)
{
    const int in = (int)l->in, nkb = (int)l->nkb, xstride = fp8_xs_words(l->n_kc);
    for (int i = 0; i < n * xstride * 2; i++)
        xs[i] = NAN; /* a word the staging does not write, read, fails the test */
    for (int tok = 0; tok < n; tok++)
        for (int kb = 0; kb < nkb; kb++) {
            float v[32][4];
            const float s = emu_warp_block(x, tok, n, in, kb, v);
            if (w8a8)
                sxs[tok * nkb + kb] = s;
            for (int lane = 0; lane < 32; lane++)
                for (int i = 0; i < 4; i++) {
                    const int word = fp8_xs_stage_word(kb, lane) + i / 2;
                    xs[(tok * xstride + word) * 2 + i % 2] =
                        w8a8 ? llmrt_e4m3_to_f32(fp8_act_quant(v[lane][i], s)) : f16(v[lane][i]);
                }
        }
}

/* staged: x staged (n <= 8), as the decode kernel reads it. */
static void emu_gemv(const emu_linear *l, float *y, const float *x, int n, int kw, int w8a8,
                     int glu, int staged)
{
    const int NT = n <= 8 ? 1 : n <= 16 ? 2 : 4;
    while (kw * NT > FP8_KW_MAX)
        kw /= 2;
    const int out = (int)l->out, in = (int)l->in, nkb = (int)l->nkb;
    const int xstride = fp8_xs_words(l->n_kc);
    float *xs = NULL, *sxs = NULL;
    if (staged) {
        ck_assert_int_eq(NT, 1);
        xs = malloc((size_t)(n * xstride * 2) * sizeof(float));
        sxs = malloc((size_t)(n * nkb) * sizeof(float));
        emu_stage(l, x, n, w8a8, xs, sxs);
    }
    const int blocks = glu ? out / 32 : (int)(l->outp / 32);
    typedef double accv[FP8_GV_MT][4][32][4]; /* [mt][nt][lane][c] */
    accv *red = calloc((size_t)kw, sizeof(accv));
    for (int mb = 0; mb < blocks; mb++) {
        int64_t m[FP8_GV_MT];
        m[0] = glu ? mb : 2 * (int64_t)mb;
        m[1] = glu ? out / 32 + mb : 2 * (int64_t)mb + 1;
        memset(red, 0, (size_t)kw * sizeof(accv));
        for (int w = 0; w < kw; w++) {
            for (int kb = w; kb < nkb; kb += kw) {
                const int k_blk = kb * 128;
                float sx[32][4];
                if (w8a8)
                    for (int nt = 0; nt < NT; nt++) {
                        float amax[32];
                        for (int lane = 0; lane < 32; lane++) {
                            const int g = lane >> 2, t = lane & 3;
                            amax[lane] = 0;
                            for (int c = 0; c < 4; c++)
                                for (int h = 0; h < 2; h++) {
                                    float v[4];
                                    load_x4(x, nt * 8 + g, n, in, k_blk + fp8_cl_x_k(c, h, t), v);
                                    for (int i = 0; i < 4; i++)
                                        amax[lane] = fmaxf(amax[lane], fabsf(v[i]));
                                }
                        }
                        for (int lane = 0; lane < 32; lane++) { /* shfl_xor 1, 2 */
                            float a = amax[lane];
                            a = fmaxf(a, amax[lane ^ 1]);
                            a = fmaxf(a, fmaxf(amax[lane ^ 2], amax[lane ^ 3]));
                            sx[lane][nt] = fp8_act_scale(a);
                        }
                    }
                double pacc[FP8_GV_MT][4][32][4];
                memset(pacc, 0, sizeof pacc);
                for (int c = 0; c < 4; c++) {
                    float b[4][2][32][2][2]; /* [nt][h][lane][reg][half] */
                    for (int nt = 0; nt < NT; nt++)
                        for (int h = 0; h < 2; h++)
                            for (int lane = 0; lane < 32; lane++) {
                                const int g = lane >> 2, t = lane & 3;
                                if (staged) { /* one 16-byte load: words 2 h + reg */
                                    const int tok = g < n ? g : 0;
                                    const int w0 = fp8_xs_chunk_word(kb * 4 + c, t) + 2 * h;
                                    for (int i = 0; i < 4; i++)
                                        b[nt][h][lane][i / 2][i % 2] =
                                            xs[(tok * xstride + w0 + i / 2) * 2 + i % 2];
                                    continue;
                                }
                                float v[4];
                                load_x4(x, nt * 8 + g, n, in, k_blk + fp8_cl_x_k(c, h, t), v);
                                for (int i = 0; i < 4; i++)
                                    b[nt][h][lane][i / 2][i % 2] =
                                        w8a8 ? llmrt_e4m3_to_f32(fp8_act_quant(v[i], sx[lane][nt]))
                                             : f16(v[i]);
                            }
                    for (int mt = 0; mt < FP8_GV_MT; mt++)
                        for (int h = 0; h < 2; h++) {
                            float a[32][4][2];
                            for (int lane = 0; lane < 32; lane++) {
                                const uint32_t *wv = l->wq + ((m[mt] * l->n_kc + kb * 4 + c) * 32 + lane) * 4;
                                const uint32_t lo = h ? wv[2] : wv[0], hi = h ? wv[3] : wv[1];
                                pair_of_codes(lo, a[lane][0]);
                                pair_of_codes(hi, a[lane][1]);
                                pair_of_codes(lo >> 16, a[lane][2]);
                                pair_of_codes(hi >> 16, a[lane][3]);
                            }
                            for (int nt = 0; nt < NT; nt++)
                                emu_mma16816(pacc[mt][nt], (const float (*)[4][2])a,
                                             (const float (*)[2][2])b[nt][h]);
                        }
                }
                for (int mt = 0; mt < FP8_GV_MT; mt++) {
                    const float sw = l->scale[((m[mt] * 16) / 128) * nkb + kb];
                    for (int nt = 0; nt < NT; nt++)
                        for (int lane = 0; lane < 32; lane++) {
                            const int t = lane & 3;
                            for (int c = 0; c < 4; c++) {
                                double s = sw;
                                const int tok = fp8_cl_c_tok(t, c);
                                if (w8a8 && staged)
                                    s *= sxs[(tok < n ? tok : 0) * nkb + kb];
                                else if (w8a8)
                                    s *= sx[fp8_cl_tok_lane(tok)][nt];
                                red[w][mt][nt][lane][c] += pacc[mt][nt][lane][c] * s;
                            }
                        }
                }
            }
        }
        /* gv_reduce */
        for (int mt = 0; mt < (glu ? 1 : FP8_GV_MT); mt++)
            for (int nt = 0; nt < NT; nt++)
                for (int ln = 0; ln < 32; ln++)
                    for (int c = 0; c < 4; c++) {
                        const int rr = fp8_cl_c_row(ln >> 2, c);
                        const int tok = nt * 8 + fp8_cl_c_tok(ln & 3, c);
                        if (tok >= n)
                            continue;
                        double s = 0, up = 0;
                        for (int k = 0; k < kw; k++) {
                            s += red[k][mt][nt][ln][c];
                            up += red[k][1][nt][ln][c];
                        }
                        if (glu) {
                            y[(int64_t)tok * (out / 2) + 16 * mb + rr] =
                                (float)(s / (1.0 + exp(-s)) * up);
                        } else {
                            const int64_t r = 16 * m[mt] + rr;
                            if (r < out)
                                y[(int64_t)tok * out + r] = (float)s;
                        }
                    }
    }
    free(red);
    free(xs), free(sxs);
}

/* ---- the activation quantization and the GEMM, as fp8_quant_kernel + fp8_gemm_kernel ---- */

static void emu_gemm_w8a8(const emu_linear *l, float *y, const float *x, int n)
{
    const int in = (int)l->in, out = (int)l->out, nkb = (int)l->nkb;
    const int ldn = (n + FP8_GM_BN - 1) / FP8_GM_BN * FP8_GM_BN;
    uint8_t *xq = calloc((size_t)ldn * (size_t)l->inp, 1);
    float *sxt = calloc((size_t)(nkb * ldn), sizeof(float));
    for (int tok = 0; tok < ldn; tok++)
        for (int kb = 0; kb < nkb; kb++) { /* one warp */
            float v[32][4];
            const float s = emu_warp_block(x, tok, n, in, kb, v);
            for (int lane = 0; lane < 32; lane++)
                for (int i = 0; i < 4; i++)
                    xq[(int64_t)tok * l->inp + kb * 128 + 4 * lane + i] = fp8_act_quant(v[lane][i], s);
            sxt[(int64_t)kb * ldn + tok] = tok < n ? s : 0.0f;
        }
    uint8_t *stage_b = malloc((size_t)FP8_GM_BN * FP8_GM_BSTRIDE);
    for (int64_t bx = 0; bx < l->outp / FP8_GM_BM; bx++)
        for (int by = 0; by < ldn / FP8_GM_BN; by++) {
            const int64_t mt0 = bx * 4;
            const int n0 = by * FP8_GM_BN;
            const float *srow = l->scale + ((mt0 * 16) / 128) * nkb;
            double acc[4][2][4][32][4]; /* [warp][mt][nt][lane][c] */
            memset(acc, 0, sizeof acc);
            for (int kb = 0; kb < nkb; kb++) {
                for (int tok = 0; tok < FP8_GM_BN; tok++) /* the staged B tile */
                    memcpy(stage_b + tok * FP8_GM_BSTRIDE,
                           xq + (int64_t)(n0 + tok) * l->inp + (int64_t)kb * 128, 128);
                for (int w = 0; w < 4; w++) {
                    const int wm = w & 1, wn = w >> 1;
                    double pacc[2][4][32][4];
                    memset(pacc, 0, sizeof pacc);
                    for (int kc = 0; kc < 4; kc++)
                        for (int nt = 0; nt < 4; nt++) {
                            uint32_t b[32][2];
                            for (int lane = 0; lane < 32; lane++) {
                                const int row = 32 * wn + 8 * nt + (lane >> 2);
                                for (int h = 0; h < 2; h++)
                                    memcpy(&b[lane][h],
                                           stage_b + fp8_cl_gemm_b_offset(row, kc, h, lane & 3, FP8_GM_BSTRIDE), 4);
                            }
                            for (int mt = 0; mt < 2; mt++) {
                                uint32_t a[32][4];
                                for (int lane = 0; lane < 32; lane++)
                                    memcpy(a[lane],
                                           l->wq + (((mt0 + 2 * wm + mt) * l->n_kc + (int64_t)kb * 4 + kc) * 32 + lane) * 4,
                                           16);
                                emu_mma16832(pacc[mt][nt], (const uint32_t (*)[4])a,
                                             (const uint32_t (*)[2])b);
                            }
                        }
                    const float sw = srow[kb];
                    for (int nt = 0; nt < 4; nt++)
                        for (int lane = 0; lane < 32; lane++)
                            for (int c = 0; c < 4; c++) {
                                const int tk = 32 * wn + 8 * nt + fp8_cl_c_tok(lane & 3, c);
                                const float sx = sxt[(int64_t)kb * ldn + n0 + tk];
                                for (int mt = 0; mt < 2; mt++)
                                    acc[w][mt][nt][lane][c] += pacc[mt][nt][lane][c] * sx * sw;
                            }
                }
            }
            for (int w = 0; w < 4; w++) {
                const int wm = w & 1, wn = w >> 1;
                for (int mt = 0; mt < 2; mt++)
                    for (int nt = 0; nt < 4; nt++)
                        for (int lane = 0; lane < 32; lane++)
                            for (int c = 0; c < 4; c++) {
                                const int64_t r = 16 * (mt0 + 2 * wm + mt) + fp8_cl_c_row(lane >> 2, c);
                                const int tok = n0 + 32 * wn + 8 * nt + fp8_cl_c_tok(lane & 3, c);
                                if (r < out && tok < n)
                                    y[(int64_t)tok * out + r] = (float)acc[w][mt][nt][lane][c];
                            }
            }
        }
    free(stage_b);
    free(xq);
    free(sxt);
}

/* ---- checks ---- */

static double rel_l2(const float *a, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]))
            return INFINITY;
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / den);
}

/* The plugin's CPU kernel, the reference. */
static void cpu_forward(const llmrt_backend_ref *be, const char *act, const ft_linear *src,
                        const float *x, int n, float *y)
{
    ft_ckpt *ck = ft_ckpt_new();
    ft_linear_add(ck, "p", src);
    llmrt_quant *q = ft_quant(be, act);
    llmrt_qlinear *l = NULL;
    llmrt_error err = {0};
    ck_assert_msg(ft_fp8()->linear_load(q, ft_ckpt_view(ck), "p", src->in, src->out, &l, &err) ==
                      LLMRT_OK,
                  "%s", err.msg);
    ck_assert_msg(ft_fp8()->linear_forward(q, l, y, x, n, &err) == LLMRT_OK, "%s", err.msg);
    ft_fp8()->linear_free(q, l);
    ft_fp8()->destroy(q);
    ft_ckpt_free(ck);
}

static const int64_t shapes[][2] = {{320, 192}, {200, 72}, {384, 136}, {128, 64}};

START_TEST(test_layout_inverse)
{
    /* fp8_cl_word_index inverts fp8_cl_word_pos, and the repack places every code once */
    const int64_t in = 200, out = 72;
    ft_linear src = ft_linear_random(in, out, LLMRT_DTYPE_F32, 1);
    emu_linear l = emu_load(&src);
    for (int64_t r = 0; r < l.outp; r++)
        for (int64_t k = 0; k < l.inp; k++) {
            int b;
            const int64_t at = fp8_cl_word_index(l.n_kc, r, k, &b);
            const uint8_t code = (uint8_t)(l.wq[at] >> (8 * b));
            const uint8_t want = r < out && k < in ? src.codes[r * in + k] : 0;
            ck_assert_msg(code == want, "element [%lld, %lld]: 0x%02x in the layout, 0x%02x in the "
                          "checkpoint", (long long)r, (long long)k, code, want);
            int64_t row, k0;
            fp8_cl_word_pos(at / 4 / 32 / l.n_kc, (at / 4 / 32) % l.n_kc, (int)((at / 4) % 32),
                            (int)(at % 4), &row, &k0);
            ck_assert(row == r && k0 + b == k);
        }
    emu_free(&l);
    ft_linear_free(&src);
}
END_TEST

START_TEST(test_gemv_emulated)
{
    llmrt_backend_ref be = ft_cpu_backend(2, "auto");
    const int64_t in = shapes[_i][0], out = shapes[_i][1];
    ft_linear src = ft_linear_random(in, out, LLMRT_DTYPE_BF16, 10 + (uint64_t)_i);
    emu_linear l = emu_load(&src);
    ft_rng r = {20 + (uint64_t)_i};
    const int ns[] = {1, 5, 8, 9, 16, 17, 32};
    const int kws[] = {1, 2, 16};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        const int n = ns[k];
        float *x = ft_activations(&r, n, in);
        float *xh = malloc((size_t)(n * in) * sizeof(float));
        for (int64_t i = 0; i < n * in; i++)
            xh[i] = f16(x[i]);
        float *ref16 = malloc((size_t)(n * out) * 4), *ref8 = malloc((size_t)(n * out) * 4);
        float *y = malloc((size_t)(n * out) * 4);
        cpu_forward(&be, "w8a16", &src, xh, n, ref16); /* W8A16 on the f16-rounded x */
        cpu_forward(&be, "w8a8", &src, x, n, ref8);
        for (size_t kk = 0; kk < sizeof kws / sizeof *kws; kk++) {
            for (int64_t i = 0; i < n * out; i++)
                y[i] = NAN;
            for (int staged = 0; staged <= (n <= 8); staged++) {
                for (int64_t i = 0; i < n * out; i++)
                    y[i] = NAN;
                emu_gemv(&l, y, x, n, kws[kk], 0, 0, staged);
                double e = rel_l2(y, ref16, (size_t)(n * out));
                ck_assert_msg(e < 1e-6, "emulated W8A16 GEMV [%lld, %lld] n=%d kw=%d staged=%d: "
                              "relative error %.3g against the CPU kernel on f16-rounded x",
                              (long long)out, (long long)in, n, kws[kk], staged, e);
                for (int64_t i = 0; i < n * out; i++)
                    y[i] = NAN;
                emu_gemv(&l, y, x, n, kws[kk], 1, 0, staged);
                e = rel_l2(y, ref8, (size_t)(n * out));
                ck_assert_msg(e < 1e-6, "emulated W8A8 GEMV [%lld, %lld] n=%d kw=%d staged=%d: "
                              "relative error %.3g against the CPU kernel",
                              (long long)out, (long long)in, n, kws[kk], staged, e);
            }
        }
        free(x), free(xh), free(ref16), free(ref8), free(y);
    }
    emu_free(&l);
    ft_linear_free(&src);
    be.vt->destroy(be.b);
}
END_TEST

/* The decode GEMV's grid of one wave: each warp's cursor (fp8_gv_next, the weights it loads
 * one item ahead) walks its items in the order its loops compute them (row blocks bx, bx +
 * grid, ...; K blocks w, w + kw, ...) and then says none is left, and the blocks' warps cover
 * every (row block, K block) once. */
START_TEST(test_gemv_items)
{
    static const int cases[][4] = {/* nkb, kw, row blocks, grid */
                                   {32, 16, 768, 132}, {96, 16, 128, 132}, {3, 16, 40, 7},
                                   {32, 4, 384, 528},  {1, 1, 9, 4},       {8, 2, 5, 5}};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const int nkb = cases[ci][0], kw = cases[ci][1], n_mb = cases[ci][2];
        const int grid = cases[ci][3] < n_mb ? cases[ci][3] : n_mb;
        int *seen = calloc((size_t)(n_mb * nkb), sizeof(int));
        for (int bx = 0; bx < grid; bx++)
            for (int w = 0; w < kw; w++) { /* the kernel's loops */
                const int cnt = w < nkb ? (nkb - w + kw - 1) / kw : 0;
                const int n_my = (n_mb - bx + grid - 1) / grid;
                int lmb = cnt > 0 ? bx : n_mb, lkb = w;
                for (int r = 0; r < n_my; r++)
                    for (int i = 0; i < cnt; i++) {
                        const int mb = bx + r * grid, kb = w + i * kw;
                        ck_assert_msg(lmb == mb && lkb == kb,
                                      "case %zu block %d warp %d: loads (%d, %d), computes (%d, %d)",
                                      ci, bx, w, lmb, lkb, mb, kb);
                        fp8_gv_next(&lmb, &lkb, w, kw, nkb, grid);
                        ck_assert(mb < n_mb && kb < nkb);
                        seen[mb * nkb + kb]++;
                    }
                ck_assert_msg(lmb >= n_mb, "case %zu block %d warp %d: a load past the last item",
                              ci, bx, w);
            }
        for (int i = 0; i < n_mb * nkb; i++)
            ck_assert_msg(seen[i] == 1, "case %zu: row block %d K block %d computed %d times", ci,
                          i / nkb, i % nkb, seen[i]);
        free(seen);
    }
}
END_TEST

START_TEST(test_gemv_swiglu_emulated)
{
    llmrt_backend_ref be = ft_cpu_backend(2, "auto");
    const int64_t in = 320, half = 256;
    ft_linear src = ft_linear_random(in, 2 * half, LLMRT_DTYPE_F32, 30);
    emu_linear l = emu_load(&src);
    ft_rng r = {31};
    for (int n = 1; n <= 8; n += 7) {
        float *x = ft_activations(&r, n, in);
        float *gu = malloc((size_t)(n * 2 * half) * 4), *y = malloc((size_t)(n * half) * 4);
        cpu_forward(&be, "w8a8", &src, x, n, gu);
        emu_gemv(&l, y, x, n, 2, 1, 1, n == 8);
        float *ref = malloc((size_t)(n * half) * 4);
        for (int t = 0; t < n; t++)
            for (int64_t i = 0; i < half; i++) {
                const double gt = gu[t * 2 * half + i], up = gu[t * 2 * half + half + i];
                ref[t * half + i] = (float)(gt / (1 + exp(-gt)) * up);
            }
        const double e = rel_l2(y, ref, (size_t)(n * half));
        ck_assert_msg(e < 1e-5, "emulated SwiGLU GEMV n=%d: relative error %.3g", n, e);
        free(x), free(gu), free(y), free(ref);
    }
    emu_free(&l);
    ft_linear_free(&src);
    be.vt->destroy(be.b);
}
END_TEST

START_TEST(test_gemm_emulated)
{
    llmrt_backend_ref be = ft_cpu_backend(2, "auto");
    const int64_t in = shapes[_i][0], out = shapes[_i][1];
    ft_linear src = ft_linear_random(in, out, LLMRT_DTYPE_F32, 40 + (uint64_t)_i);
    emu_linear l = emu_load(&src);
    ft_rng r = {50 + (uint64_t)_i};
    const int ns[] = {33, 64, 100};
    for (int alt = 0; alt < 2; alt++) {
        K32_ALT = alt;
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            const int n = ns[k];
            float *x = ft_activations(&r, n, in);
            float *ref = malloc((size_t)(n * out) * 4), *y = malloc((size_t)(n * out) * 4);
            cpu_forward(&be, "w8a8", &src, x, n, ref);
            for (int64_t i = 0; i < n * out; i++)
                y[i] = NAN;
            emu_gemm_w8a8(&l, y, x, n);
            const double e = rel_l2(y, ref, (size_t)(n * out));
            ck_assert_msg(e < 1e-6, "emulated W8A8 GEMM [%lld, %lld] n=%d (k assignment %d): "
                          "relative error %.3g against the CPU kernel",
                          (long long)out, (long long)in, n, alt, e);
            free(x), free(ref), free(y);
        }
    }
    K32_ALT = 0;
    emu_free(&l);
    ft_linear_free(&src);
    be.vt->destroy(be.b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant-fp8 layout");
    TCase *tc = tcase_create("emulated");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_layout_inverse);
    tcase_add_loop_test(tc, test_gemv_emulated, 0, (int)(sizeof shapes / sizeof *shapes));
    tcase_add_test(tc, test_gemv_items);
    tcase_add_test(tc, test_gemv_swiglu_emulated);
    tcase_add_loop_test(tc, test_gemm_emulated, 0, (int)(sizeof shapes / sizeof *shapes));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
