/* awq_cuda_layout.cuh — the device layout awq_cuda.cu repacks AWQ linears into, as plain
 * index functions (C and CUDA; host tests check them without a GPU).
 *
 * Why repack: the decode kernel feeds int4 weights to the tensor cores with
 * mma.sync.m16n8k16 (A = 16 output rows x 16 inputs, f16; B = 16 inputs x 8 tokens; f32
 * accumulators). A thread's A fragment for one 16x16 tile is exactly 8 values, so each 32-bit
 * word of the repacked tensor holds one thread's fragment, nibbles placed so that the
 * 0x6400 magic-number trick (x & 0x000f000f | 0x64006400 is the f16 pair 1024+a, 1024+b)
 * yields the four f16x2 registers a0..a3 directly:
 *
 *   thread lane: g = lane / 4 (row in 0..7), t = lane % 4;  tile rows r0 = 16 mt + g, r1 = r0 + 8
 *   inputs of k-tile kt: ka = 16 kt + 2 t, and ka + 1, ka + 8, ka + 9
 *   nibble 0: q(r0, ka)     nibble 4: q(r0, ka + 1)   → a0 = (w & 0x000f000f) | 0x64006400
 *   nibble 1: q(r1, ka)     nibble 5: q(r1, ka + 1)   → a1 = (w & 0x00f000f0) | 0x64006400 (x16)
 *   nibble 2: q(r0, ka + 8) nibble 6: q(r0, ka + 9)   → a2 from w >> 8, as a0
 *   nibble 3: q(r1, ka + 8) nibble 7: q(r1, ka + 9)   → a3 from w >> 8, as a1
 *
 * A lane's 16-byte load holds the words of four consecutive k-tiles of one m-tile (16 rows),
 * so a warp's load of 512 contiguous bytes covers 16 rows x 64 inputs:
 *   wq   u32 [n_mtiles][kpad / 64][32 lanes][4]       word j of lane l = k-tile 4c + j
 * Scales and zeros of each (m-tile, group) sit in 8 entries, one per g, each two u32:
 *   meta u32 [n_mtiles][kpad / group][8][2]   [0] = f16 pair (s[r0], s[r1])
 *                                             [1] = f16 pair (1024 + z[r0], 1024 + z[r1])
 * Rows are padded to a multiple of AWQ_CL_MPAD and inputs to a multiple of AWQ_CL_KPAD;
 * padding has q = z = 0 and s = 0, so it contributes nothing. */
#ifndef LLMRT_AWQ_CUDA_LAYOUT_CUH
#define LLMRT_AWQ_CUDA_LAYOUT_CUH

#include <stdint.h>

#include "awq_pack.h"

#define AWQ_CL_MPAD 32  /* rows: two m-tiles per warp */
#define AWQ_CL_KPAD 256 /* inputs: one kernel iteration */

static inline AWQ_HD int64_t awq_cl_round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

/* The 4-bit q of output row r, input k of an AutoAWQ qweight [in, out/8]; 0 in the padding. */
static inline AWQ_HD uint32_t awq_cl_q(const int32_t *qweight, int64_t out, int64_t in, int64_t r,
                                       int64_t k)
{
    if (r >= out || k >= in)
        return 0;
    return awq_nibble((uint32_t)qweight[k * (out / 8) + r / 8], (int)(r % 8));
}

/* Nibble index (0..7) of the fragment word holding (row half hi (0: r0, 1: r1), input kk of
 * the 16-input tile). */
static inline AWQ_HD int awq_cl_nibble(int hi, int kk)
{
    return (kk & 1) * 4 + (kk >= 8 ? 2 : 0) + hi;
}

/* The fragment word of lane `lane` for m-tile mt, k-tile kt. */
static inline AWQ_HD uint32_t awq_cl_word(const int32_t *qweight, int64_t out, int64_t in,
                                          int64_t mt, int64_t kt, int lane)
{
    const int g = lane >> 2, t = lane & 3;
    const int64_t r0 = 16 * mt + g;
    uint32_t w = 0;
    for (int hi = 0; hi < 2; hi++)
        for (int p = 0; p < 4; p++) { /* kk = 2t, 2t+1, 2t+8, 2t+9 */
            const int kk = 2 * t + (p & 1) + (p >> 1) * 8;
            const uint32_t q = awq_cl_q(qweight, out, in, r0 + 8 * hi, 16 * kt + kk);
            w |= q << (4 * awq_cl_nibble(hi, kk));
        }
    return w;
}

/* Index of that word in wq (u32 units). kpad: padded input count. */
static inline AWQ_HD int64_t awq_cl_word_index(int64_t kpad, int64_t mt, int64_t kt, int lane)
{
    return ((mt * (kpad / 64) + kt / 4) * 32 + lane) * 4 + kt % 4;
}

/* f16 bits of 1024 + z (z in 0..15): 1024 is 0x6400 and one unit of the mantissa there. */
static inline AWQ_HD uint32_t awq_cl_zero_bits(uint32_t z)
{
    return 0x6400u | z;
}

/* The two meta words of (m-tile mt, group grp, row g); scales are f16 bits [in/group, out],
 * qzeros packed [in/group, out/8]. */
static inline AWQ_HD void awq_cl_meta(const int32_t *qzeros, const uint16_t *scales, int64_t out,
                                      int64_t in, int64_t group, int64_t mt, int64_t grp, int g,
                                      uint32_t *m0, uint32_t *m1)
{
    uint32_t s[2] = {0, 0}, z[2] = {0, 0};
    for (int hi = 0; hi < 2; hi++) {
        const int64_t r = 16 * mt + g + 8 * hi;
        if (r < out && grp < in / group) {
            s[hi] = scales[grp * out + r];
            z[hi] = awq_nibble((uint32_t)qzeros[grp * (out / 8) + r / 8], (int)(r % 8));
        }
    }
    *m0 = s[0] | (s[1] << 16);
    *m1 = awq_cl_zero_bits(z[0]) | (awq_cl_zero_bits(z[1]) << 16);
}

/* Index of the first meta word of (mt, grp, g) (u32 units). */
static inline AWQ_HD int64_t awq_cl_meta_index(int64_t kpad, int64_t group, int64_t mt,
                                               int64_t grp, int g)
{
    return ((mt * (kpad / group) + grp) * 8 + g) * 2;
}

/* The raw f16x2 register a_i (i = 0..3) the kernel builds from a fragment word before the
 * zero point is subtracted: halves are 1024 + q (i = 0, 2) or 1024 + 16 q (i = 1, 3).
 * On the device (v & mask) | 0x64006400 is written as one LOP3: from C the compiler emits an
 * AND and an OR (a LOP3 takes one immediate), four instructions more per weight word in the
 * decode GEMV's loop (H200: decode 2.25 -> 2.15 ms). */
static inline AWQ_HD uint32_t awq_cl_frag_raw(uint32_t w, int i)
{
    const uint32_t v = (i >= 2) ? (w >> 8) : w;
#if defined(__CUDA_ARCH__)
    uint32_t r;
    if (i & 1)
        asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(v), "n"(0x00f000f0), "n"(0x64006400));
    else
        asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(r) : "r"(v), "n"(0x000f000f), "n"(0x64006400));
    return r;
#else
    const uint32_t mask = (i & 1) ? 0x00f000f0u : 0x000f000fu;
    return (v & mask) | 0x64006400u;
#endif
}

#endif
