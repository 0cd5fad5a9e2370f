/* test_fused.c — backend-cpu's fused ops (the "llmrt.fused" extension: add_rmsnorm,
 * qk_norm_rope_store, swiglu) against the composition of the separate ops they replace, on
 * random inputs of several shapes and dtypes, outputs poisoned with NaN first.
 *
 * Why exact: the model uses the fused ops when a backend has them, and the CPU backend is the
 * reference every other backend is checked against, so on the CPU fused and separate must
 * agree bit for bit (cpu_fused.c repeats the separate ops' arithmetic in the same order). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test_common.h"

#include "test_util.h"

static const llmrt_dtype types[3] = {LLMRT_DTYPE_F32, LLMRT_DTYPE_F16, LLMRT_DTYPE_BF16};

static float *rand_f32(ct_rng *r, size_t n, float lo, float hi)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = ct_uniform(r, lo, hi);
    return p;
}

/* A 1-D weight tensor of dtype dt from f32 values (owned by the caller: free t.data). */
static llmrt_tensor weight(const float *v, int64_t d, llmrt_dtype dt)
{
    llmrt_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = 1;
    t.shape[0] = d;
    t.data = malloc((size_t)d * llmrt_dtype_size(dt));
    for (int64_t i = 0; i < d; i++)
        llmrt_store_f(t.data, dt, i, v[i]);
    return t;
}

static float *dup(const float *p, size_t n)
{
    float *q = malloc(n * sizeof *q);
    memcpy(q, p, n * sizeof *q);
    return q;
}

START_TEST(test_add_rmsnorm)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    llmrt_backend *b = ct_create(2);
    const llmrt_fused_ops *fops = ct_fused(b);
    llmrt_error err = {0};
    ct_rng r = {41};
    static const int shapes[][2] = {{1, 4096}, {3, 1000}, {5, 33}, {64, 256}};
    ck_assert_ptr_nonnull(fops->add_rmsnorm);
    for (int di = 0; di < 3; di++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
            for (int with_res = 0; with_res < 2; with_res++) {
                const int rows = shapes[si][0], d = shapes[si][1];
                const size_t n = (size_t)rows * d;
                float *x = rand_f32(&r, n, -3, 3), *res = rand_f32(&r, n, -3, 3);
                float *wv = rand_f32(&r, d, 0.5f, 1.5f);
                llmrt_tensor w = weight(wv, d, types[di]);
                float *fx = dup(x, n), *fout = malloc(n * sizeof *fout);
                float *sx = dup(x, n), *sout = malloc(n * sizeof *sout);
                ct_poison(fout, (int64_t)n);
                ct_poison(sout, (int64_t)n);
                ck_assert_int_eq(fops->add_rmsnorm(b, fout, fx, with_res ? res : NULL, &w, rows, d,
                                                 1e-6f, &err), LLMRT_OK);
                if (with_res)
                    ck_assert_int_eq(vt->add(b, sx, sx, res, (int64_t)n, &err), LLMRT_OK);
                ck_assert_int_eq(vt->rmsnorm(b, sout, sx, &w, rows, d, 1e-6f, &err), LLMRT_OK);
                ck_assert_msg(memcmp(fout, sout, n * sizeof *fout) == 0 &&
                                  memcmp(fx, sx, n * sizeof *fx) == 0,
                              "add_rmsnorm %s [%d, %d]%s differs from add + rmsnorm",
                              llmrt_dtype_name(types[di]), rows, d, with_res ? "" : " (no residual)");
                ck_assert(fout[0] == fout[0]); /* written (not the NaN poison) */
                free(x), free(res), free(wv), free(w.data), free(fx), free(fout), free(sx), free(sout);
            }
    vt->destroy(b);
}
END_TEST

START_TEST(test_qk_norm_rope_store)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    llmrt_backend *b = ct_create(2);
    const llmrt_fused_ops *fops = ct_fused(b);
    llmrt_error err = {0};
    ct_rng r = {42};
    static const int shapes[][4] = {{1, 32, 8, 128}, {7, 4, 2, 32}, {9, 12, 4, 96}, {3, 2, 1, 10}};
    ck_assert_ptr_nonnull(fops->qk_norm_rope_store);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int di = 0; di < 3; di++)
            for (int normed = 0; normed < 2; normed++) {
                const int n = shapes[si][0], H = shapes[si][1], KV = shapes[si][2], hd = shapes[si][3];
                const llmrt_dtype cdt = types[di], wdt = types[(di + 2) % 3];
                const int heads = H + 2 * KV, kv_row = KV * hd, slots_total = 3 * n + 2;
                const size_t qkv_n = (size_t)n * heads * hd, q_n = (size_t)n * H * hd;
                const size_t cache_bytes = (size_t)slots_total * kv_row * llmrt_dtype_size(cdt);
                float *qkv = rand_f32(&r, qkv_n, -3, 3);
                float *qwv = rand_f32(&r, hd, 0.5f, 1.5f), *kwv = rand_f32(&r, hd, 0.5f, 1.5f);
                llmrt_tensor qw = weight(qwv, hd, wdt), kw = weight(kwv, hd, wdt);
                int32_t *pos = malloc(n * sizeof *pos), *slots = malloc(n * sizeof *slots);
                for (int i = 0; i < n; i++) {
                    pos[i] = ct_int(&r, 5000);
                    slots[i] = (i % 3 == 2) ? -1 : 3 * i + 1;
                }
                unsigned char *init = malloc(cache_bytes);
                for (size_t i = 0; i < cache_bytes; i++)
                    init[i] = (unsigned char)ct_next(&r);
                /* fused */
                float *fq = malloc(q_n * sizeof *fq);
                ct_poison(fq, (int64_t)q_n);
                unsigned char *fk = malloc(cache_bytes), *fv = malloc(cache_bytes);
                memcpy(fk, init, cache_bytes), memcpy(fv, init, cache_bytes);
                ck_assert_int_eq(fops->qk_norm_rope_store(b, fq, qkv, normed ? &qw : NULL,
                                                        normed ? &kw : NULL, pos, slots, n, H, KV,
                                                        hd, 1e-6f, 1000000.0f, fk, fv, cdt, &err),
                                 LLMRT_OK);
                /* separate: split, rmsnorm per head, rope, kv_store */
                float *sq = malloc(q_n * sizeof *sq), *sk = malloc((size_t)n * kv_row * sizeof *sk);
                float *sv = malloc((size_t)n * kv_row * sizeof *sv);
                for (int t = 0; t < n; t++) {
                    memcpy(sq + (size_t)t * H * hd, qkv + (size_t)t * heads * hd, (size_t)H * hd * 4);
                    memcpy(sk + (size_t)t * kv_row, qkv + ((size_t)t * heads + H) * hd, (size_t)kv_row * 4);
                    memcpy(sv + (size_t)t * kv_row, qkv + ((size_t)t * heads + H + KV) * hd,
                           (size_t)kv_row * 4);
                }
                unsigned char *ck_ = malloc(cache_bytes), *cv = malloc(cache_bytes);
                memcpy(ck_, init, cache_bytes), memcpy(cv, init, cache_bytes);
                if (normed) {
                    ck_assert_int_eq(vt->rmsnorm(b, sq, sq, &qw, n * H, hd, 1e-6f, &err), LLMRT_OK);
                    ck_assert_int_eq(vt->rmsnorm(b, sk, sk, &kw, n * KV, hd, 1e-6f, &err), LLMRT_OK);
                }
                ck_assert_int_eq(vt->rope(b, sq, pos, n, H, hd, 1000000.0f, &err), LLMRT_OK);
                ck_assert_int_eq(vt->rope(b, sk, pos, n, KV, hd, 1000000.0f, &err), LLMRT_OK);
                ck_assert_int_eq(vt->kv_store(b, ck_, cv, cdt, sk, sv, slots, n, KV, hd, &err), LLMRT_OK);
                ck_assert_msg(memcmp(fq, sq, q_n * 4) == 0 && memcmp(fk, ck_, cache_bytes) == 0 &&
                                  memcmp(fv, cv, cache_bytes) == 0,
                              "qk_norm_rope_store n=%d H=%d KV=%d hd=%d %s%s differs from rmsnorm + "
                              "rope + kv_store",
                              n, H, KV, hd, llmrt_dtype_name(cdt), normed ? "" : " (no norm)");
                ck_assert_msg(memcmp(fk, init, cache_bytes) != 0, "nothing stored");
                free(qkv), free(qwv), free(kwv), free(qw.data), free(kw.data), free(pos), free(slots);
                free(init), free(fq), free(fk), free(fv), free(sq), free(sk), free(sv), free(ck_), free(cv);
            }
    vt->destroy(b);
}
END_TEST

START_TEST(test_swiglu)
{
    const llmrt_backend_vtable *vt = ct_vtable();
    llmrt_backend *b = ct_create(2);
    const llmrt_fused_ops *fops = ct_fused(b);
    llmrt_error err = {0};
    ct_rng r = {43};
    static const int shapes[][2] = {{1, 12288}, {5, 1000}, {3, 33}};
    ck_assert_ptr_nonnull(fops->swiglu);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int n = shapes[si][0], d = shapes[si][1];
        float *gu = rand_f32(&r, (size_t)n * 2 * d, -8, 8);
        float *out = malloc((size_t)n * d * sizeof *out), *ref = malloc((size_t)n * d * sizeof *ref);
        ct_poison(out, (int64_t)n * d);
        ck_assert_int_eq(fops->swiglu(b, out, gu, n, d, &err), LLMRT_OK);
        for (int t = 0; t < n; t++)
            ck_assert_int_eq(vt->silu_mul(b, ref + (size_t)t * d, gu + (size_t)t * 2 * d,
                                          gu + (size_t)t * 2 * d + d, d, &err), LLMRT_OK);
        ck_assert_msg(memcmp(out, ref, (size_t)n * d * sizeof *out) == 0,
                      "swiglu [%d, %d] differs from silu_mul", n, d);
        free(gu), free(out), free(ref);
    }
    vt->destroy(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend-cpu.fused");
    TCase *tc = tcase_create("fused");
    tcase_add_test(tc, test_add_rmsnorm);
    tcase_add_test(tc, test_qk_norm_rope_store);
    tcase_add_test(tc, test_swiglu);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
