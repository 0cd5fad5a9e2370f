/* fp8_cuda_layout.h — the index arithmetic of quant-fp8's device layout and of its tensor-core
 * fragments, shared by the CUDA kernels (fp8_cuda.cu) and the CPU test that emulates them
 * (tests/test_fp8_layout.c), so the mapping a kernel relies on is checked without a GPU.
 *
 * The weight is repacked in fragment order (fp8_cuda.cu's header comment): word j (0..3) of
 * lane L = 4 g + t for m-tile mt and k-chunk kc holds four consecutive inputs of one row:
 *     row  16 mt + g + 8 (j & 1)          inputs 32 kc + 16 (j >> 1) + 4 t + 0..3
 * Fragments (PTX ISA, mma.sync, g = lane >> 2, t = lane & 3):
 *   m16n8k16 f16  A reg i, half e: row g + 8 (i & 1), k 2 t + e + 8 (i >> 1)
 *                 B reg i, half e: k 2 t + e + 8 i, column g
 *   m16n8k32 e4m3 A reg i, byte e: row g + 8 (i & 1), k 4 t + e + 16 (i >> 1)
 *                 B reg i, byte e: k 4 t + e + 16 i, column g
 *   C (both)      value c: row g + 8 (c >> 1), column 2 t + (c & 1)
 * The kernels hand the weight words to k32 as they stand; for k16 (two per 32 inputs: half h)
 * they take bytes 0-1 / 2-3 of words 2h, 2h + 1 as A regs 0, 1 / 2, 3 and the token's inputs
 * 16 h + 4 t + 0..3 as B regs 0 (first two) and 1 (last two): the k16 tile's inputs are
 * permuted alike in A and B, so the sum is the same. */
#ifndef LLMRT_QUANT_FP8_CUDA_LAYOUT_H
#define LLMRT_QUANT_FP8_CUDA_LAYOUT_H

#include <stdint.h>

#ifdef __CUDACC__
#define FP8_HD __host__ __device__ __forceinline__
#else
#define FP8_HD static inline
#endif

#define FP8_GEMV_MAX_N 32 /* most rows the GEMV can serve in one launch (4 n-tiles of 8) */
#define FP8_KW_MAX 16     /* K-splitting warps per GEMV block */
#define FP8_GV_MT 2       /* m-tiles (16 rows) per GEMV block */
#define FP8_GM_BM 64      /* GEMM block tile: rows */
#define FP8_GM_BN 64      /* GEMM block tile: tokens */
#define FP8_GM_BSTRIDE 144 /* bytes per token row of the GEMM's staged codes (128 + 16: the
                              eight rows a warp reads start in different banks) */

/* Row and first input of word j of lane `lane` in (mt, kc). */
FP8_HD void fp8_cl_word_pos(int64_t mt, int64_t kc, int lane, int j, int64_t *row, int64_t *k0)
{
    const int g = lane >> 2, t = lane & 3;
    *row = 16 * mt + g + 8 * (j & 1);
    *k0 = 32 * kc + 16 * (j >> 1) + 4 * t;
}

/* The word (index into the 32-bit words of wq [n_mt][n_kc][32][4]) and byte holding the code
 * of element (r, k). */
FP8_HD int64_t fp8_cl_word_index(int64_t n_kc, int64_t r, int64_t k, int *byte)
{
    const int64_t mt = r / 16, kc = k / 32;
    const int rr = (int)(r % 16), kk = (int)(k % 32);
    const int g = rr % 8, hi = rr / 8, half = kk / 16, t = (kk % 16) / 4;
    *byte = kk % 4;
    return ((mt * n_kc + kc) * 32 + 4 * g + t) * 4 + 2 * half + hi;
}

/* First input, relative to the 128-input block, of the four that lane t feeds to B for
 * k-chunk c, k16 half h (k32: h = 0 for B reg 0, 1 for B reg 1). */
FP8_HD int fp8_cl_x_k(int c, int h, int t)
{
    return 32 * c + 16 * h + 4 * t;
}

/* Row within the m-tile and column (token) within the n-tile of C value c of lane (g, t). */
FP8_HD int fp8_cl_c_row(int g, int c)
{
    return g + 8 * (c >> 1);
}
FP8_HD int fp8_cl_c_tok(int t, int c)
{
    return 2 * t + (c & 1);
}

/* A lane whose B column is token `tok` of the n-tile (it holds that token's activation
 * scale in the W8A8 GEMV). */
FP8_HD int fp8_cl_tok_lane(int tok)
{
    return 4 * tok;
}

/* Byte offset of the B operand (k32: reg h) of token row `row` of the GEMM's staged codes,
 * k-chunk kc, lane t; rows are `stride` bytes apart. */
FP8_HD int fp8_cl_gemm_b_offset(int row, int kc, int h, int t, int stride)
{
    return row * stride + kc * 32 + 16 * h + 4 * t;
}

/* The decode GEMV's x staged in shared memory (fp8_cuda.cu, gv_stage): per token a row of
 * fp8_xs_words 32-bit words, f16 pairs (inp / 2 of them) and 16 words of padding, so the rows
 * the eight tokens of a quarter-warp read start 64 bytes apart in the banks. */
FP8_HD int fp8_xs_words(int64_t n_kc)
{
    return (int)(n_kc * 16 + 16);
}

/* The word of a staged row where k-chunk kc's B fragment for lane t starts: four words, the
 * pairs of inputs 32 kc + 4 t + {0, 1}, {2, 3}, 32 kc + 16 + 4 t + {0, 1}, {2, 3} (B regs 0
 * and 1 of k16 half 0, then of half 1), one 16-byte load. */
FP8_HD int fp8_xs_chunk_word(int kc, int t)
{
    return kc * 16 + 4 * t;
}

/* The word where staging lane `lane` of K block kb puts the pair of inputs 128 kb + 4 lane +
 * {0, 1} (the next word: + {2, 3}): chunk lane / 8, half (lane / 4) % 2, lane t = lane % 4. */
FP8_HD int fp8_xs_stage_word(int kb, int lane)
{
    return fp8_xs_chunk_word(kb * 4 + (lane >> 3), lane & 3) + 2 * ((lane >> 2) & 1);
}

/* The decode GEMV's cursor over the items of warp w in block bx of a grid of `grid` blocks:
 * row blocks bx, bx + grid, ... and in each the K blocks w, w + kw, ... below nkb, starting at
 * (bx, w). fp8_gv_next moves (mb, kb) to the next item; mb past the last row block: none. */
FP8_HD void fp8_gv_next(int *mb, int *kb, int w, int kw, int nkb, int grid)
{
    *kb += kw;
    if (*kb >= nkb) {
        *kb = w;
        *mb += grid;
    }
}

#endif
