/* test_cuda_mask.c — the CUDA backend's "llmrt.logits_mask" extension against the CPU
 * backend's: the same logits after the same masks (bit for bit: -inf or untouched), rows
 * without a slot untouched, vocabularies that are not a multiple of 32 and Qwen3's 151936,
 * captured in a graph with argmax and replayed with new masks (the mask is read at replay,
 * not baked in). Exits 77 without a CUDA device. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/logits_mask.h>

#include "cuda_test_common.h"

static const llmrt_logits_mask_ops *ops_of(const llmrt_backend_ref *b)
{
    const llmrt_logits_mask_ops *o =
        llmrt_backend_extension(b->vt, b->b, LLMRT_EXT_LOGITS_MASK, LLMRT_EXT_LOGITS_MASK_VERSION);
    ck_assert_ptr_nonnull(o);
    return o;
}

static void random_masks(ct_rng *r, uint32_t *w, int slots, int V, int density)
{
    const int W = (V + 31) / 32;
    memset(w, 0, sizeof(uint32_t) * (size_t)slots * (size_t)W);
    for (int s = 0; s < slots; s++)
        for (int v = 0; v < V; v++)
            if ((int)(ct_next(r) % 100) < density)
                w[s * W + v / 32] |= 1u << (v % 32);
}

START_TEST(test_against_cpu)
{
    static const int vocabs[] = {1, 33, 1000, 151936};
    static const int32_t slot[7] = {0, -1, 1, 2, -1, 0, 1};
    const int rows = 7;
    ct_rng r = {99};
    llmrt_error err = {0};
    for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
        const int V = vocabs[vi], W = (V + 31) / 32;
        float *lg = ct_rand_f32(&r, (size_t)rows * V, -8, 8);
        uint32_t *words = malloc(sizeof(uint32_t) * 3 * (size_t)W);
        random_masks(&r, words, 3, V, vi % 2 ? 90 : 5);
        float *got[2];
        const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
        for (int b = 0; b < 2; b++) {
            float *dl = ct_dup(bes[b], lg, sizeof(float) * (size_t)rows * V);
            int32_t *ds = ct_dup(bes[b], slot, sizeof slot);
            uint32_t *dw = ct_dup(bes[b], words, sizeof(uint32_t) * 3 * (size_t)W);
            CT_OK(ops_of(bes[b])->apply(bes[b]->b, dl, ds, dw, rows, V, &err));
            got[b] = malloc(sizeof(float) * (size_t)rows * V);
            ct_download(bes[b], got[b], dl, sizeof(float) * (size_t)rows * V);
            ct_free(bes[b], dl), ct_free(bes[b], ds), ct_free(bes[b], dw);
        }
        for (int i = 0; i < rows * V; i++)
            ck_assert_msg(memcmp(&got[0][i], &got[1][i], sizeof(float)) == 0,
                          "vocab %d element %d: cuda %g, cpu %g", V, i, (double)got[0][i],
                          (double)got[1][i]);
        for (int v = 0; v < V; v++) /* row 1 has no slot */
            ck_assert(got[0][V + v] == lg[V + v]);
        free(got[0]), free(got[1]), free(lg), free(words);
    }
}
END_TEST

START_TEST(test_graph_replay)
{
    const int rows = 4, V = 151936, W = (V + 31) / 32;
    const int32_t slot[4] = {1, 0, -1, 2};
    ct_rng r = {5};
    llmrt_error err = {0};
    const llmrt_logits_mask_ops *ops = ops_of(&CT.cuda);
    float *dl = ct_alloc(&CT.cuda, sizeof(float) * (size_t)rows * V);
    int32_t *ds = ct_dup(&CT.cuda, slot, sizeof slot);
    uint32_t *dw = ct_alloc(&CT.cuda, sizeof(uint32_t) * 3 * (size_t)W);
    int32_t *dout = ct_alloc(&CT.cuda, sizeof(int32_t) * rows);
    uint32_t *words = malloc(sizeof(uint32_t) * 3 * (size_t)W);
    float *lg = ct_rand_f32(&r, (size_t)rows * V, -8, 8);
    ct_upload(&CT.cuda, dl, lg, sizeof(float) * (size_t)rows * V);
    random_masks(&r, words, 3, V, 1);
    ct_upload(&CT.cuda, dw, words, sizeof(uint32_t) * 3 * (size_t)W);
    CT_OK(ops->apply(CT.cuda.b, dl, ds, dw, rows, V, &err)); /* warm (argmax scratch) */
    CT_OK(CT.cuda_vt->argmax(CT.cuda.b, dout, dl, rows, V, &err));
    ct_sync(&CT.cuda);
    llmrt_graph *g = NULL;
    CT_OK(CT.cuda_vt->graph_begin(CT.cuda.b, &err));
    CT_OK(ops->apply(CT.cuda.b, dl, ds, dw, rows, V, &err));
    CT_OK(CT.cuda_vt->argmax(CT.cuda.b, dout, dl, rows, V, &err));
    CT_OK(CT.cuda_vt->graph_end(CT.cuda.b, &g, &err));
    for (int it = 0; it < 5; it++) {
        free(lg);
        lg = ct_rand_f32(&r, (size_t)rows * V, -8, 8);
        random_masks(&r, words, 3, V, 1 + it);
        ct_upload(&CT.cuda, dl, lg, sizeof(float) * (size_t)rows * V);
        ct_upload(&CT.cuda, dw, words, sizeof(uint32_t) * 3 * (size_t)W);
        CT_OK(CT.cuda_vt->graph_launch(CT.cuda.b, g, &err));
        int32_t out[4];
        ct_download(&CT.cuda, out, dout, sizeof out);
        for (int row = 0; row < rows; row++) { /* the argmax among the allowed tokens */
            int best = -1;
            for (int v = 0; v < V; v++) {
                int ok = slot[row] < 0 || ((words[slot[row] * W + v / 32] >> (v % 32)) & 1u);
                if (ok && (best < 0 || lg[row * V + v] > lg[row * V + best]))
                    best = v;
            }
            ck_assert_msg(out[row] == best, "replay %d row %d: %d, expected %d", it, row, out[row],
                          best);
        }
    }
    CT.cuda_vt->graph_destroy(CT.cuda.b, g);
    ct_free(&CT.cuda, dl), ct_free(&CT.cuda, ds), ct_free(&CT.cuda, dw), ct_free(&CT.cuda, dout);
    free(words), free(lg);
}
END_TEST

int main(void)
{
    ct_open(1);
    Suite *s = suite_create("backend-cuda.mask");
    TCase *tc = tcase_create("mask");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_against_cpu);
    tcase_add_test(tc, test_graph_replay);
    suite_add_tcase(s, tc);
    int rc = ct_run(s);
    ct_close();
    return rc;
}
