/* test_cuda_host.c — what of the CUDA side can be checked on the host, no GPU needed:
 *  1. the AWQ tensor-core fragment layout (quant-awq/awq_cuda_layout.cuh);
 *  2. the sampling rules the device sampler implements (ct_ref_sample, which backend-cuda.ops
 *     compares the kernel with) against core's host sampler.
 *
 * Why (1): the decode kernel's correctness rests on bit positions: which nibble of which word
 * holds which (row, input) and how the magic-number extraction turns them into the
 * mma.m16n8k16 A-fragment registers. Here a random AWQ linear is repacked with the same
 * functions the repack kernel uses, and every fragment register of every lane is decoded the
 * way the PTX ISA defines the A fragment (a0: row g, cols 2t..2t+1; a1: row g+8; a2: row g,
 * cols 2t+8..; a3: row g+8, cols 2t+8..) and compared with the source q values; the meta
 * words with the source scales and zeros; the padding must be zero. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "../../quant-awq/awq_cuda_layout.cuh"
#include "cuda_test_common.h"
#include "sampler.h"

/* q values [in, out] (row-major over inputs, like AutoAWQ before packing) → qweight */
static void pack(const uint8_t *q, int64_t rows, int64_t cols, int32_t *packed)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols / 8; c++) {
            uint32_t w = 0;
            for (int j = 0; j < 8; j++)
                w |= (uint32_t)q[r * cols + 8 * c + j] << (4 * awq_nibble_of_column(j));
            packed[r * (cols / 8) + c] = (int32_t)w;
        }
}

/* An f16 half of a raw fragment register: 1024 + v (plain) or 1024 + 16 v (x16) → v. */
static int half_value(uint32_t raw, int upper, int x16)
{
    uint32_t h = upper ? raw >> 16 : raw & 0xffffu;
    ck_assert_msg((h & 0xfc00u) == 0x6400u, "fragment half 0x%04x is not 1024 + small", h);
    uint32_t mant = h & 0x3ffu; /* 1024 + m has mantissa bits m at exponent 10 */
    if (x16) {
        ck_assert_msg((mant & 0xfu) == 0, "x16 half has low bits set");
        return (int)(mant >> 4);
    }
    ck_assert_msg(mant < 16, "plain half out of range");
    return (int)mant;
}

START_TEST(test_fragment_layout)
{
    static const int64_t shapes[][3] = {{256, 32, 128}, {96, 24, 32}, {512, 200, 64}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int64_t in = shapes[si][0], out = shapes[si][1], group = shapes[si][2];
        const int64_t kpad = awq_cl_round_up(in, AWQ_CL_KPAD), outp = awq_cl_round_up(out, AWQ_CL_MPAD);
        ct_rng r = {40 + si};
        uint8_t *q = malloc(in * out), *z = malloc((in / group) * out);
        for (int64_t i = 0; i < in * out; i++)
            q[i] = ct_next(&r) & 15;
        for (int64_t i = 0; i < (in / group) * out; i++)
            z[i] = ct_next(&r) & 15;
        int32_t *qw = malloc(in * out / 2), *qz = malloc((in / group) * out / 2);
        uint16_t *sc = malloc((in / group) * out * 2);
        for (int64_t i = 0; i < (in / group) * out; i++)
            sc[i] = (uint16_t)(0x2000 + (ct_next(&r) & 0x0fff)); /* any f16 bits */
        pack(q, in, out, qw);
        pack(z, in / group, out, qz);

        const int64_t n_mt = outp / 16, n_words = n_mt * (kpad / 16) * 32;
        uint32_t *wq = calloc(n_words, 4);
        char *seen = calloc(n_words, 1);
        for (int64_t mt = 0; mt < n_mt; mt++)
            for (int64_t kt = 0; kt < kpad / 16; kt++)
                for (int lane = 0; lane < 32; lane++) {
                    int64_t at = awq_cl_word_index(kpad, mt, kt, lane);
                    ck_assert(at >= 0 && at < n_words && !seen[at]);
                    seen[at] = 1;
                    wq[at] = awq_cl_word(qw, out, in, mt, kt, lane);
                }
        /* decode as the tensor core sees it */
        for (int64_t mt = 0; mt < n_mt; mt++)
            for (int64_t kt = 0; kt < kpad / 16; kt++)
                for (int lane = 0; lane < 32; lane++) {
                    const int g = lane >> 2, t = lane & 3;
                    const uint32_t w = wq[awq_cl_word_index(kpad, mt, kt, lane)];
                    for (int i = 0; i < 4; i++) {
                        const uint32_t raw = awq_cl_frag_raw(w, i);
                        const int64_t row = 16 * mt + g + ((i & 1) ? 8 : 0);
                        const int64_t col0 = 16 * kt + 2 * t + ((i & 2) ? 8 : 0);
                        for (int up = 0; up < 2; up++) {
                            const int64_t col = col0 + up;
                            const int want = (row < out && col < in) ? q[col * out + row] : 0;
                            const int got = half_value(raw, up, i & 1);
                            ck_assert_msg(got == want,
                                          "[%lld x %lld] mt %lld kt %lld lane %d a%d.%d: %d, want "
                                          "q[row %lld][in %lld] = %d",
                                          (long long)out, (long long)in, (long long)mt, (long long)kt,
                                          lane, i, up, got, (long long)row, (long long)col, want);
                        }
                    }
                }
        /* the 16-byte load of lane l for (mt, 64-input stretch c) is words 4l..4l+3 there, and
         * a warp's 32 loads are 512 contiguous bytes */
        for (int lane = 0; lane < 32; lane++)
            for (int j = 0; j < 4; j++)
                ck_assert_int_eq(awq_cl_word_index(kpad, 1, 4 + j, lane),
                                 awq_cl_word_index(kpad, 1, 4, 0) + lane * 4 + j);
        /* meta */
        for (int64_t mt = 0; mt < n_mt; mt++)
            for (int64_t grp = 0; grp < kpad / group; grp++)
                for (int g = 0; g < 8; g++) {
                    uint32_t m0, m1;
                    awq_cl_meta(qz, sc, out, in, group, mt, grp, g, &m0, &m1);
                    for (int hi = 0; hi < 2; hi++) {
                        const int64_t row = 16 * mt + g + 8 * hi;
                        const int valid = row < out && grp < in / group;
                        const uint32_t s = (m0 >> (16 * hi)) & 0xffffu, zb = (m1 >> (16 * hi)) & 0xffffu;
                        ck_assert_uint_eq(s, valid ? sc[grp * out + row] : 0);
                        ck_assert_uint_eq(zb, 0x6400u + (valid ? z[grp * out + row] : 0));
                    }
                }
        free(q), free(z), free(qw), free(qz), free(sc), free(wq), free(seen);
    }
}
END_TEST

/* Why (2): the device sampler must draw the token the host sampler draws for the same logits,
 * parameters and u, so a seed gives the same text on either path. */
START_TEST(test_sampling_rules_match_host)
{
    static const llmrt_sample_params kinds[] = {
        {1.0f, 0, 1.0f, 0.0f, 0, 0},   {0.8f, 50, 0.9f, 0.05f, 0, 0}, {0.7f, 20, 1.0f, 0.0f, 0, 0},
        {1.0f, 0, 0.5f, 0.0f, 0, 0},   {1.3f, 0, 1.0f, 0.2f, 0, 0},   {0.5f, 1, 1.0f, 0.0f, 0, 0},
        {1.0f, 5000, 0.95f, 0, 0, 0},  {2.0f, 3, 0.3f, 0.0f, 0, 0},   {0.9f, 2000, 1.0f, 0.01f, 0, 0},
    };
    const int vocab = 20000, nk = sizeof kinds / sizeof *kinds;
    ct_rng r = {77};
    float *x = malloc(vocab * sizeof *x);
    llmrt_sampler *hs = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(llmrt_sampler_new(vocab, &hs, &err), LLMRT_OK);
    int boundary = 0;
    for (int it = 0; it < 40 * nk; it++) {
        for (int i = 0; i < vocab; i++) {
            float v = ct_uniform(&r, -4, 4);
            x[i] = v * v * v * 0.5f;
        }
        llmrt_sample_params sp = kinds[it % nk];
        sp.uniform = ct_uniform(&r, 0, 1);
        llmrt_sampling hp;
        memset(&hp, 0, sizeof hp);
        hp.temperature = sp.temperature, hp.top_k = sp.top_k, hp.top_p = sp.top_p;
        hp.min_p = sp.min_p;
        const int host = llmrt_sampler_pick(hs, x, &hp, sp.uniform);
        const int ref = ct_ref_sample(x, vocab, sp, 0, 0);
        if (host == ref)
            continue;
        static const double d[][2] = {{1e-5, 0}, {-1e-5, 0}, {0, 1e-5}, {0, -1e-5}};
        int near = 0;
        for (int k = 0; k < 4 && !near; k++)
            near = host == ct_ref_sample(x, vocab, sp, d[k][0], d[k][1]);
        ck_assert_msg(near, "draw %d (T %g, top_k %d, top_p %g, min_p %g, u %g): host sampler %d, "
                      "device rules %d", it, (double)sp.temperature, sp.top_k, (double)sp.top_p,
                      (double)sp.min_p, (double)sp.uniform, host, ref);
        boundary++;
    }
    ck_assert_msg(boundary <= 2, "%d boundary disagreements out of %d", boundary, 40 * nk);
    llmrt_sampler_free(hs);
    free(x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend-cuda.host");
    TCase *tc = tcase_create("host");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fragment_layout);
    tcase_add_test(tc, test_sampling_rules_match_host);
    suite_add_tcase(s, tc);
    return ct_run(s);
}
