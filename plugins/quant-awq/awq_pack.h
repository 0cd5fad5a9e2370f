/* awq_pack.h — where each 4-bit value sits inside an AutoAWQ "gemm" int32 word.
 *
 * Why: the order is not the obvious one, and three pieces of code must agree on it (the CPU
 * loader, the CUDA kernels, the tests' packer), so it is written down once, here.
 *
 * AutoAWQ (awq/modules/linear/gemm.py, WQLinear_GEMM.from_linear) packs output columns
 * 8c..8c+7 of row i into qweight[i][c] like this:
 *     order_map = [0, 2, 4, 6, 1, 3, 5, 7]
 *     for k in 0..7:  word |= q[i][8c + order_map[k]] << (4 k)
 * so nibble k (bits 4k..4k+3) holds column 8c + order_map[k]: nibbles 0..7 hold columns
 * 0,2,4,6,1,3,5,7 of the group of eight. Inverting the map, column 8c + j sits in nibble
 *     AWQ_REVERSE_ORDER[j] = [0, 4, 1, 5, 2, 6, 3, 7][j]
 * which is vLLM's AWQ_REVERSE_ORDER (its dequant unpacks nibbles 0..7 with shifts 0,4,...,28
 * and then reorders with that table). qzeros uses the same packing over its columns. Values
 * are unsigned 0..15; the word is an int32, so shift it as uint32. */
#ifndef LLMRT_QUANT_AWQ_PACK_H
#define LLMRT_QUANT_AWQ_PACK_H

#include <stdint.h>

#if defined(__CUDACC__)
#define AWQ_HD __host__ __device__
#else
#define AWQ_HD
#endif

/* Column j (0..7 within its group of eight) → nibble index: 0,4,1,5,2,6,3,7. */
static inline AWQ_HD int awq_nibble_of_column(int j)
{
    return (j >> 1) + 4 * (j & 1);
}

/* Nibble index k → column: AutoAWQ's order_map, 0,2,4,6,1,3,5,7. */
static inline AWQ_HD int awq_column_of_nibble(int k)
{
    return 2 * (k & 3) + (k >> 2);
}

/* The 4-bit value of column j (0..7) of a packed word. */
static inline AWQ_HD uint32_t awq_nibble(uint32_t word, int j)
{
    return (word >> (4 * awq_nibble_of_column(j))) & 0xfu;
}

#endif
