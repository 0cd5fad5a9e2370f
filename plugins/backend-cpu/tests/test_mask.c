/* test_mask.c — the CPU backend's "llmrt.logits_mask" extension: offered through the
 * vtable's extension lookup (not for a newer version), a row with a slot keeps exactly the
 * logits whose mask bit is set (the rest -inf), rows without one are untouched, with 1 and
 * several threads, a vocabulary that is not a multiple of 32, and then argmax picks an
 * allowed token. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/logits_mask.h>

#include "cpu_test_common.h"
#include "test_util.h"

START_TEST(test_apply)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    ck_assert(LLMRT_VT_HAS(vt, llmrt_backend_vtable, extension) && vt->extension);
    for (int threads = 1; threads <= 3; threads += 2) {
        llmrt_backend *b = ct_create(threads);
        const llmrt_logits_mask_ops *ops =
            vt->extension(b, LLMRT_EXT_LOGITS_MASK, LLMRT_EXT_LOGITS_MASK_VERSION);
        ck_assert_ptr_nonnull(ops);
        ck_assert_ptr_nonnull(ops->apply);
        ck_assert_ptr_null(vt->extension(b, LLMRT_EXT_LOGITS_MASK, LLMRT_EXT_LOGITS_MASK_VERSION + 1));
        ck_assert_ptr_null(vt->extension(b, "llmrt.no_such_thing", 1));
        static const int vocabs[] = {1, 31, 33, 1000, 151936};
        ct_rng r = {(uint64_t)threads * 77 + 1};
        for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
            const int V = vocabs[vi], rows = 6, W = (V + 31) / 32;
            float *lg = malloc(sizeof(float) * (size_t)rows * (size_t)V);
            float *orig = malloc(sizeof(float) * (size_t)rows * (size_t)V);
            uint32_t *words = calloc((size_t)3 * (size_t)W, 4);
            for (int i = 0; i < rows * V; i++)
                orig[i] = lg[i] = ct_uniform(&r, -5, 5);
            for (int s = 0; s < 3; s++)
                for (int v = 0; v < V; v++)
                    if (s == 2 ? v == V - 1 : ct_int(&r, 3) == 0)
                        words[s * W + v / 32] |= 1u << (v % 32);
            const int32_t slot[6] = {-1, 0, 2, -1, 1, 0};
            llmrt_error err = {0};
            ck_assert_int_eq(ops->apply(b, lg, slot, words, rows, V, &err), LLMRT_OK);
            for (int row = 0; row < rows; row++)
                for (int v = 0; v < V; v++) {
                    float x = lg[row * V + v], o = orig[row * V + v];
                    int keep = slot[row] < 0 ||
                               ((words[slot[row] * W + v / 32] >> (v % 32)) & 1u);
                    ck_assert_msg(keep ? x == o : x == -INFINITY,
                                  "vocab %d row %d token %d: %g (was %g, keep %d)", V, row, v,
                                  (double)x, (double)o, keep);
                }
            int32_t out[6];
            ck_assert_int_eq(vt->argmax(b, out, lg, rows, V, &err), LLMRT_OK);
            ck_assert_int_eq(out[2], V - 1); /* slot 2 allows only the last token */
            for (int row = 0; row < rows; row++)
                if (slot[row] >= 0 && words[slot[row] * W])
                    ck_assert(((words[slot[row] * W + out[row] / 32] >> (out[row] % 32)) & 1u));
            ck_assert_int_eq(ops->apply(b, lg, slot, words, rows, 0, &err), LLMRT_ERR_INVALID_ARG);
            free(lg), free(orig), free(words);
        }
        vt->destroy(b);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend-cpu.mask");
    TCase *t = tcase_create("mask");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_apply);
    suite_add_tcase(s, t);
    return tu_run_suite(s);
}
