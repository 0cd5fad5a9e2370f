/* test_ops.c — every op of backend-cpu against a naive double-precision reference written
 * here, on random inputs of several shapes (odd sizes included), outputs poisoned with NaN
 * before each run, and with 1 and 2 threads giving bit-identical results (and the baseline
 * vector kernels giving the bits of the exact path's widest ones). The fast paths the CPU has
 * (avx2, avx512, amx) are checked against the same reference within their documented bounds. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_test_common.h"

#include "test_util.h"

static const llmrt_backend_vtable *vt;
static llmrt_backend *b1, *b2, *bb; /* exact path, 1 and 2 threads; 2 threads on baseline */

static void setup(void)
{
    vt = ct_vtable();
    b1 = ct_create(1);
    b2 = ct_create(2);
    bb = ct_create_simd(2, "baseline");
}

static void teardown(void)
{
    vt->destroy(b1);
    vt->destroy(b2);
    vt->destroy(bb);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Weights in a dtype, with the exact values as doubles for the reference. */
typedef struct wbuf {
    llmrt_tensor t;
    double *ref; /* [numel] */
} wbuf;

static wbuf make_weights(ct_rng *r, llmrt_dtype dt, int64_t d0, int64_t d1, float scale)
{
    wbuf w = {{dt, d1 ? 2 : 1, {d0, d1}, NULL}, NULL};
    int64_t n = d0 * (d1 ? d1 : 1);
    w.t.data = xmalloc((size_t)n * llmrt_dtype_size(dt));
    w.ref = xmalloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        llmrt_store_f(w.t.data, dt, i, ct_uniform(r, -scale, scale));
        w.ref[i] = llmrt_load_f(w.t.data, dt, i);
    }
    return w;
}

static void free_weights(wbuf *w)
{
    free(w->t.data);
    free(w->ref);
}

/* Σ x[k] w[k] in double precision, and Σ |x[k] w[k]| in *mag (the scale of its rounding). */
static double ref_dot(const float *x, const double *w, int64_t in, double *mag)
{
    double ref = 0, m = 0;
    for (int64_t k = 0; k < in; k++) {
        ref += (double)x[k] * w[k];
        m += fabs((double)x[k] * w[k]);
    }
    *mag = m;
    return ref;
}

static float *rand_f32(ct_rng *r, int64_t n, float lo, float hi)
{
    float *p = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        p[i] = ct_uniform(r, lo, hi);
    return p;
}

static const llmrt_dtype float_types[3] = {LLMRT_DTYPE_F32, LLMRT_DTYPE_F16, LLMRT_DTYPE_BF16};

/* ---- gemm ---- */

static void check_gemm(int64_t n, int64_t in, int64_t out, llmrt_dtype dt, uint64_t seed)
{
    ct_rng r = {seed};
    wbuf w = make_weights(&r, dt, out, in, 0.5f);
    float *x = rand_f32(&r, n * in, -1.0f, 1.0f);
    float *y1 = xmalloc((size_t)(n * out) * sizeof(float));
    float *y2 = xmalloc((size_t)(n * out) * sizeof(float));
    ct_poison(y1, n * out);
    ct_poison(y2, n * out);
    llmrt_error err = {0};
    ck_assert_int_eq(vt->gemm(b1, y1, x, &w.t, (int32_t)n, &err), LLMRT_OK);
    ck_assert_int_eq(vt->gemm(b2, y2, x, &w.t, (int32_t)n, &err), LLMRT_OK);
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < out; o++) {
            double mag;
            const double ref = ref_dot(x + i * in, w.ref + o * in, in, &mag);
            double got = y1[i * out + o];
            CT_CHECK(fabs(got - ref) <= 1e-6 * mag + 1e-7,
                     "gemm %s n=%lld in=%lld out=%lld: y[%lld][%lld] = %.9g, reference %.9g",
                     llmrt_dtype_name(dt), (long long)n, (long long)in, (long long)out,
                     (long long)i, (long long)o, got, ref);
        }
    CT_CHECK(memcmp(y1, y2, (size_t)(n * out) * sizeof(float)) == 0,
             "gemm %s n=%lld: 1 and 2 threads differ", llmrt_dtype_name(dt), (long long)n);
    ct_poison(y2, n * out);
    ck_assert_int_eq(vt->gemm(bb, y2, x, &w.t, (int32_t)n, &err), LLMRT_OK);
    CT_CHECK(memcmp(y1, y2, (size_t)(n * out) * sizeof(float)) == 0,
             "gemm %s n=%lld: baseline and %s kernels differ", llmrt_dtype_name(dt),
             (long long)n, ct_cpu_ext(b1)->simd(b1));
    free_weights(&w);
    free(x);
    free(y1);
    free(y2);
}

START_TEST(gemm_matches_reference)
{
    const int64_t shapes[][3] = {{1, 64, 48},   {1, 257, 131}, {2, 300, 257}, {3, 17, 5},
                                 {4, 128, 96},  {5, 1000, 67}, {17, 96, 130}, {70, 33, 41},
                                 {1, 4096, 64}, {9, 1, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 3; d++)
            check_gemm(shapes[s][0], shapes[s][1], shapes[s][2], float_types[d], 100 + s * 3 + d);
}
END_TEST

/* A row's result does not depend on which other rows share the call. */
START_TEST(gemm_rows_independent_of_batch)
{
    ct_rng r = {7};
    const int64_t in = 203, out = 77, n = 11;
    wbuf w = make_weights(&r, LLMRT_DTYPE_BF16, out, in, 0.5f);
    float *x = rand_f32(&r, n * in, -1, 1);
    float *yall = xmalloc((size_t)(n * out) * sizeof(float)), *y1 = xmalloc((size_t)out * sizeof(float));
    llmrt_error err = {0};
    ck_assert_int_eq(vt->gemm(b2, yall, x, &w.t, (int32_t)n, &err), LLMRT_OK);
    for (int64_t i = 0; i < n; i++) {
        ct_poison(y1, out);
        ck_assert_int_eq(vt->gemm(b2, y1, x + i * in, &w.t, 1, &err), LLMRT_OK);
        CT_CHECK(memcmp(y1, yall + i * out, (size_t)out * sizeof(float)) == 0,
                 "row %lld alone differs from row %lld in a batch of %lld", (long long)i,
                 (long long)i, (long long)n);
    }
    free_weights(&w);
    free(x);
    free(yall);
    free(y1);
}
END_TEST

/* The fastest path this CPU has (auto), and avx2: the GEMV shapes (n < 16) run the exact
 * kernels, so their bits are the exact path's; prefill shapes run other kernels (cpu_gemm_fma.c:
 * FMA tiles, bf16 on AVX512-BF16 where the CPU has it; amx: x rounded to bf16), within
 * |y - y_exact| <= 2^-8 sum_i |x_i w_i| (cpu_gemm_amx.c). Either way 1 and 2 threads agree, and on the FMA tiles a row gets the same
 * bits whichever rows share its call (the call on rows 1.. of x against the full call). */
START_TEST(gemm_fast_paths_within_bound)
{
    const char *paths[] = {"auto", "avx2"}; /* avx2: its FMA tiles on every dtype */
    const int64_t shapes[][3] = {{1, 256, 48},  {3, 1000, 67}, {16, 64, 48},  {17, 96, 130},
                                 {33, 256, 47}, {70, 32, 41},  {40, 512, 100}, {16, 33, 20},
                                 {64, 128, 16}, {31, 64, 15}};
    for (int p = 0; p < 2; p++) {
        llmrt_backend *f1 = ct_try_create_simd(1, paths[p]), *f2 = ct_try_create_simd(2, paths[p]);
        if (!f1)
            continue;
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
            for (int d = 0; d < 3; d++) {
                const int64_t n = shapes[sh][0], in = shapes[sh][1], out = shapes[sh][2];
                const llmrt_dtype dt = float_types[d];
                ct_rng r = {900 + sh * 3 + d};
                wbuf w = make_weights(&r, dt, out, in, 0.5f);
                float *x = rand_f32(&r, n * in, -1.0f, 1.0f);
                float *y1 = xmalloc((size_t)(n * out) * sizeof(float));
                float *y2 = xmalloc((size_t)(n * out) * sizeof(float));
                float *ye = xmalloc((size_t)(n * out) * sizeof(float));
                ct_poison(y1, n * out);
                ct_poison(y2, n * out);
                llmrt_error err = {0};
                ck_assert_int_eq(vt->gemm(f1, y1, x, &w.t, (int32_t)n, &err), LLMRT_OK);
                ck_assert_int_eq(vt->gemm(f2, y2, x, &w.t, (int32_t)n, &err), LLMRT_OK);
                ck_assert_int_eq(vt->gemm(b2, ye, x, &w.t, (int32_t)n, &err), LLMRT_OK);
                for (int64_t i = 0; i < n; i++)
                    for (int64_t o = 0; o < out; o++) {
                        double mag;
                        const double ref = ref_dot(x + i * in, w.ref + o * in, in, &mag);
                        double got = y1[i * out + o];
                        CT_CHECK(fabs(got - ref) <= 0x1p-8 * mag + 1e-6 * mag + 1e-7,
                                 "gemm on %s, %s n=%lld in=%lld out=%lld: y[%lld][%lld] = "
                                 "%.9g, reference %.9g (sum |x w| %.3g)",
                                 paths[p], llmrt_dtype_name(dt), (long long)n,
                                 (long long)in, (long long)out, (long long)i, (long long)o,
                                 got, ref, mag);
                    }
                CT_CHECK(memcmp(y1, y2, (size_t)(n * out) * sizeof(float)) == 0,
                         "gemm on %s, %s n=%lld: 1 and 2 threads differ", paths[p],
                         llmrt_dtype_name(dt), (long long)n);
                if (n < 16)
                    CT_CHECK(memcmp(y1, ye, (size_t)(n * out) * sizeof(float)) == 0,
                             "gemm on %s, %s n=%lld: a GEMV differs from the exact path",
                             paths[p], llmrt_dtype_name(dt), (long long)n);
                const char *simd = ct_cpu_ext(f1)->simd(f1);
                if (n > 16 && (strcmp(simd, "avx2") == 0 || strcmp(simd, "avx512") == 0)) {
                    ck_assert_int_eq(vt->gemm(f2, ye, x + in, &w.t, (int32_t)(n - 1), &err),
                                     LLMRT_OK);
                    CT_CHECK(memcmp(y1 + out, ye, (size_t)((n - 1) * out) * sizeof(float)) == 0,
                             "gemm on %s, %s n=%lld: rows 1.. alone differ from the full call",
                             simd, llmrt_dtype_name(dt), (long long)n);
                }
                free_weights(&w);
                free(x);
                free(y1);
                free(y2);
                free(ye);
            }
        vt->destroy(f1);
        vt->destroy(f2);
    }
}
END_TEST

START_TEST(gemm_rejects_bad_weights)
{
    llmrt_error err = {0};
    int32_t data[4] = {0};
    float x[2] = {0}, y[2];
    llmrt_tensor w = {LLMRT_DTYPE_I32, 2, {2, 2}, data};
    ck_assert_int_eq(vt->gemm(b1, y, x, &w, 1, &err), LLMRT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.msg, "I32"));
    llmrt_tensor w3 = {LLMRT_DTYPE_F32, 3, {1, 2, 2}, data};
    ck_assert_int_eq(vt->gemm(b1, y, x, &w3, 1, &err), LLMRT_ERR_INVALID_ARG);
}
END_TEST

/* ---- argmax_head ---- */

/* The "llmrt.argmax_head" extension gives the ids of gemm + argmax, bit for bit, on every
 * path (the avx2 screen in integers): random w in each dtype, 1..8 rows, odd d; duplicated rows of w (ties: the lowest
 * index), a row of w with a NaN (never the argmax), a row of x with a NaN (id 0, as argmax of
 * NaN logits gives); each row alone gets the id it got in the batch. */
START_TEST(argmax_head_equals_gemm_argmax)
{
    /* exact, avx2 and baseline run the three screen kernels (AVX-512, AVX2, SSE2) */
    const char *paths[] = {"exact", "avx2", "baseline"};
    /* d 4500: the avx2 screen's int16 x below 32767 (no int32 lane may overflow) */
    const int64_t shapes[][2] = {{1000, 64}, {517, 33}, {1501, 96}, {431, 4500}}; /* vocab > 400: row 400 is a tie */
    for (int p = 0; p < 3; p++) {
        llmrt_backend *b = ct_try_create_simd(2, paths[p]);
        if (!b)
            continue;
        const llmrt_argmax_head_ops *ah = ct_argmax_head(b);
        for (size_t sh = 0; sh < sizeof shapes / sizeof *shapes; sh++)
            for (int d = 0; d < 3; d++) {
                const int64_t vocab = shapes[sh][0], dim = shapes[sh][1];
                ct_rng r = {1300 + sh * 3 + d};
                wbuf w = make_weights(&r, float_types[d], vocab, dim, 0.5f);
                size_t es = llmrt_dtype_size(float_types[d]);
                /* ties: row 400 repeats row 7; row 11 is row 7 with its smallest positive
                 * weight raised a little (the same int8 copy, so the screen cannot tell the
                 * two apart: only the exact logits can); a NaN in row 3 */
                memcpy((char *)w.t.data + 400 * dim * es, (char *)w.t.data + 7 * dim * es,
                       (size_t)dim * es);
                memcpy((char *)w.t.data + 11 * dim * es, (char *)w.t.data + 7 * dim * es,
                       (size_t)dim * es);
                int64_t small = -1;
                for (int64_t i = 0; i < dim; i++) {
                    double v = llmrt_load_f(w.t.data, float_types[d], 7 * dim + i);
                    if (v > 0.01 && (small < 0 ||
                                     v < llmrt_load_f(w.t.data, float_types[d], 7 * dim + small)))
                        small = i;
                }
                ck_assert(small >= 0);
                double ws = llmrt_load_f(w.t.data, float_types[d], 7 * dim + small);
                llmrt_store_f(w.t.data, float_types[d], 11 * dim + small, (float)(ws * 1.03));
                ck_assert(llmrt_load_f(w.t.data, float_types[d], 11 * dim + small) > ws);
                llmrt_store_f(w.t.data, float_types[d], 3 * dim + 1, NAN);
                llmrt_argmax_head *h = NULL;
                llmrt_error err = {0};
                CT_CHECK(ah->create(b, &w.t, 8, &h, &err) == LLMRT_OK, "%s",
                         err.msg);
                const int32_t ns[] = {1, 3, 8};
                for (int k = 0; k < 3; k++) {
                    const int32_t n = ns[k];
                    float *x = rand_f32(&r, n * dim, -1.0f, 1.0f);
                    /* row 0 of x along row 7 of w: row 11 just ahead of rows 7 and 400 */
                    for (int64_t i = 0; i < dim; i++)
                        x[i] = 4.0f * (float)llmrt_load_f(w.t.data, float_types[d], 7 * dim + i);
                    if (n > 1)
                        x[dim + 2] = NAN;
                    float *logits = xmalloc((size_t)(n * vocab) * sizeof(float));
                    int32_t ids_g[8], ids_h[8];
                    ck_assert_int_eq(vt->gemm(b, logits, x, &w.t, n, &err), LLMRT_OK);
                    ck_assert_int_eq(vt->argmax(b, ids_g, logits, n, (int32_t)vocab, &err),
                                     LLMRT_OK);
                    for (int32_t i = 0; i < n; i++)
                        ids_h[i] = -1;
                    CT_CHECK(ah->forward(b, h, ids_h, x, n, &err) == LLMRT_OK, "%s", err.msg);
                    for (int32_t i = 0; i < n; i++)
                        CT_CHECK(ids_h[i] == ids_g[i],
                                 "argmax_head on %s, %s [%lld, %lld], n=%d: row %d id %d, "
                                 "gemm + argmax %d",
                                 paths[p], llmrt_dtype_name(float_types[d]),
                                 (long long)vocab, (long long)dim, n, i, ids_h[i], ids_g[i]);
                    for (int32_t i = 0; i < n && n > 1; i++) {
                        int32_t alone = -1;
                        ck_assert_int_eq(ah->forward(b, h, &alone, x + i * dim, 1, &err),
                                         LLMRT_OK);
                        CT_CHECK(alone == ids_h[i],
                                 "argmax_head on %s, n=%d: row %d alone gives %d, in the batch %d",
                                 paths[p], n, i, alone, ids_h[i]);
                    }
                    if (dim < 1000) /* (at d 4500 the raise is below f32's rounding of L) */
                        ck_assert_int_eq(ids_g[0], 11);
                    if (n > 1)
                        ck_assert_int_eq(ids_h[1], 0);
                    free(x);
                    free(logits);
                }
                int32_t id;
                float x1[200] = {0};
                ck_assert_int_eq(ah->forward(b, h, &id, x1, 9, &err), LLMRT_ERR_INVALID_ARG);
                ah->destroy(b, h);
                free_weights(&w);
            }
        vt->destroy(b);
    }
    llmrt_argmax_head *h = NULL;
    llmrt_error err = {0};
    float wd[4] = {0};
    llmrt_tensor w = {LLMRT_DTYPE_F32, 2, {2, 2}, wd};
    /* more rows than the head takes: unsupported (qwen3 then asks for 8) */
    ck_assert_int_eq(ct_argmax_head(b1)->create(b1, &w, 9, &h, &err), LLMRT_ERR_UNSUPPORTED);
    ck_assert_ptr_null(h);
}
END_TEST

/* ---- embedding ---- */

START_TEST(embedding_matches_reference)
{
    for (int d = 0; d < 3; d++) {
        ct_rng r = {11 + d};
        const int64_t rows = 37, dim = 53;
        const int32_t n = 9;
        wbuf t = make_weights(&r, float_types[d], rows, dim, 3.0f);
        int32_t ids[9] = {0, 36, 5, 5, 17, 1, 35, 0, 20};
        float *o1 = xmalloc(n * dim * sizeof(float)), *o2 = xmalloc(n * dim * sizeof(float));
        ct_poison(o1, n * dim);
        ct_poison(o2, n * dim);
        llmrt_error err = {0};
        ck_assert_int_eq(vt->embedding(b1, o1, &t.t, ids, n, &err), LLMRT_OK);
        ck_assert_int_eq(vt->embedding(b2, o2, &t.t, ids, n, &err), LLMRT_OK);
        for (int i = 0; i < n; i++)
            for (int64_t k = 0; k < dim; k++)
                CT_CHECK((double)o1[i * dim + k] == t.ref[ids[i] * dim + k],
                         "embedding %s row %d col %lld", llmrt_dtype_name(float_types[d]), i,
                         (long long)k);
        ck_assert(memcmp(o1, o2, n * dim * sizeof(float)) == 0);
        int32_t bad[2] = {3, 37};
        ck_assert_int_eq(vt->embedding(b1, o1, &t.t, bad, 2, &err), LLMRT_ERR_INVALID_ARG);
        CT_CHECK(strstr(err.msg, "37") != NULL, "message: %s", err.msg);
        free_weights(&t);
        free(o1);
        free(o2);
    }
}
END_TEST

/* Every f16 and bf16 bit pattern converts exactly like the SDK's scalar converter (the
 * vectorised converter the ops use is a different formula). */
START_TEST(half_conversion_exhaustive)
{
    for (int d = 1; d < 3; d++) {
        uint16_t *table = xmalloc(65536 * sizeof(uint16_t));
        for (int i = 0; i < 65536; i++)
            table[i] = (uint16_t)i;
        llmrt_tensor t = {float_types[d], 2, {1, 65536}, table};
        float *out = xmalloc(65536 * sizeof(float));
        int32_t id = 0;
        llmrt_error err = {0};
        ck_assert_int_eq(vt->embedding(b1, out, &t, &id, 1, &err), LLMRT_OK);
        for (int i = 0; i < 65536; i++) {
            float want = llmrt_load_f(table, float_types[d], i);
            if (isnan(want))
                CT_CHECK(isnan(out[i]), "%s 0x%04x should be NaN",
                         llmrt_dtype_name(float_types[d]), i);
            else
                CT_CHECK(memcmp(&want, &out[i], 4) == 0, "%s 0x%04x: got %a want %a",
                         llmrt_dtype_name(float_types[d]), i, (double)out[i], (double)want);
        }
        free(table);
        free(out);
    }
}
END_TEST

/* The GEMM converts weights with vector code of its own: every f16/bf16 bit pattern, each
 * alone in its row at a different lane, times x = 1 must come out as the SDK's conversion. */
START_TEST(gemm_half_conversion_exhaustive)
{
    for (int d = 1; d < 3; d++)
        for (int k = 0; k < 2; k++) { /* the default kernels, then the baseline ones */
            const int64_t rows = 65536, in = 16;
            uint16_t *w = calloc((size_t)(rows * in), sizeof(uint16_t));
            for (int64_t o = 0; o < rows; o++)
                w[o * in + o % in] = (uint16_t)o;
            llmrt_tensor t = {float_types[d], 2, {rows, in}, w};
            float x[16], *y = xmalloc((size_t)rows * sizeof(float));
            for (int i = 0; i < 16; i++)
                x[i] = 1.0f;
            ct_poison(y, rows);
            llmrt_error err = {0};
            ck_assert_int_eq(vt->gemm(k ? bb : b2, y, x, &t, 1, &err), LLMRT_OK);
            for (int64_t o = 0; o < rows; o++) {
                float want = llmrt_load_f(w, float_types[d], o * in + o % in);
                if (isnan(want))
                    CT_CHECK(isnan(y[o]), "%s 0x%04x should be NaN",
                             llmrt_dtype_name(float_types[d]), (unsigned)o);
                else
                    CT_CHECK(y[o] == want, "%s 0x%04x (%s kernels): got %a want %a",
                             llmrt_dtype_name(float_types[d]), (unsigned)o,
                             k ? "baseline" : "default", (double)y[o], (double)want);
            }
            free(w);
            free(y);
        }
}
END_TEST

/* ---- rmsnorm ---- */

START_TEST(rmsnorm_matches_reference)
{
    const int shapes[][2] = {{1, 64}, {3, 17}, {64, 1000}, {5, 1}, {2, 4097}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 3; d++) {
            ct_rng r = {300 + s * 3 + d};
            const int rows = shapes[s][0], dim = shapes[s][1];
            const float eps = 1e-6f;
            wbuf w = make_weights(&r, float_types[d], dim, 0, 2.0f);
            float *x = rand_f32(&r, (int64_t)rows * dim, -4, 4);
            float *o1 = xmalloc((size_t)rows * dim * sizeof(float)),
                  *o2 = xmalloc((size_t)rows * dim * sizeof(float));
            ct_poison(o1, (int64_t)rows * dim);
            ct_poison(o2, (int64_t)rows * dim);
            llmrt_error err = {0};
            ck_assert_int_eq(vt->rmsnorm(b1, o1, x, &w.t, rows, dim, eps, &err), LLMRT_OK);
            ck_assert_int_eq(vt->rmsnorm(b2, o2, x, &w.t, rows, dim, eps, &err), LLMRT_OK);
            for (int i = 0; i < rows; i++) {
                double ss = 0;
                for (int k = 0; k < dim; k++)
                    ss += (double)x[i * dim + k] * x[i * dim + k];
                double inv = 1.0 / sqrt(ss / dim + eps);
                for (int k = 0; k < dim; k++) {
                    double ref = (double)x[i * dim + k] * inv * w.ref[k];
                    CT_CHECK(fabs(o1[i * dim + k] - ref) <= 2e-6 * fabs(ref) + 1e-7,
                             "rmsnorm rows=%d d=%d %s [%d][%d]: %.9g vs %.9g", rows, dim,
                             llmrt_dtype_name(float_types[d]), i, k, (double)o1[i * dim + k],
                             ref);
                }
            }
            ck_assert(memcmp(o1, o2, (size_t)rows * dim * sizeof(float)) == 0);
            /* in place gives the same result */
            ck_assert_int_eq(vt->rmsnorm(b2, x, x, &w.t, rows, dim, eps, &err), LLMRT_OK);
            ck_assert(memcmp(o1, x, (size_t)rows * dim * sizeof(float)) == 0);
            free_weights(&w);
            free(x);
            free(o1);
            free(o2);
        }
}
END_TEST

/* ---- rope ---- */

START_TEST(rope_matches_reference)
{
    const int shapes[][3] = {{1, 1, 64}, {5, 3, 128}, {33, 8, 64}, {4, 2, 6}};
    const float thetas[] = {10000.0f, 1000000.0f};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int th = 0; th < 2; th++) {
            ct_rng r = {500 + s * 2 + th};
            const int n = shapes[s][0], heads = shapes[s][1], hd = shapes[s][2], half = hd / 2;
            int64_t total = (int64_t)n * heads * hd;
            float *x = rand_f32(&r, total, -2, 2);
            float *x1 = xmalloc(total * sizeof(float)), *x2 = xmalloc(total * sizeof(float));
            memcpy(x1, x, total * sizeof(float));
            memcpy(x2, x, total * sizeof(float));
            int32_t *pos = xmalloc(n * sizeof(int32_t));
            for (int i = 0; i < n; i++)
                pos[i] = ct_int(&r, 5000);
            llmrt_error err = {0};
            ck_assert_int_eq(vt->rope(b1, x1, pos, n, heads, hd, thetas[th], &err), LLMRT_OK);
            ck_assert_int_eq(vt->rope(b2, x2, pos, n, heads, hd, thetas[th], &err), LLMRT_OK);
            for (int i = 0; i < n; i++)
                for (int h = 0; h < heads; h++)
                    for (int k = 0; k < half; k++) {
                        /* the angle as transformers forms it, in f32:
                         * inv_freq = 1 / theta^(2k/d); angle = position * inv_freq */
                        float inv = 1.0f / powf(thetas[th], (float)(2 * k) / (float)hd);
                        double ang = (double)((float)pos[i] * inv);
                        const float *v = x + ((int64_t)i * heads + h) * hd;
                        double lo = v[k] * cos(ang) - v[k + half] * sin(ang);
                        double hi = v[k + half] * cos(ang) + v[k] * sin(ang);
                        const float *g = x1 + ((int64_t)i * heads + h) * hd;
                        CT_CHECK(fabs(g[k] - lo) <= 1e-5 && fabs(g[k + half] - hi) <= 1e-5,
                                 "rope n=%d h=%d d=%d pos=%d k=%d: (%g, %g) vs (%g, %g)", n,
                                 heads, hd, pos[i], k, (double)g[k], (double)g[k + half], lo, hi);
                    }
            ck_assert(memcmp(x1, x2, total * sizeof(float)) == 0);
            free(x);
            free(x1);
            free(x2);
            free(pos);
        }
    llmrt_error err = {0};
    float v[3];
    int32_t p0 = 0;
    ck_assert_int_eq(vt->rope(b1, v, &p0, 1, 1, 3, 10000.0f, &err), LLMRT_ERR_INVALID_ARG);
}
END_TEST

/* ---- silu_mul, add ---- */

START_TEST(elementwise_match_reference)
{
    const int64_t sizes[] = {1, 15, 1000, 40001};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        ct_rng r = {700 + s};
        int64_t n = sizes[s];
        float *g = rand_f32(&r, n, -20, 20), *u = rand_f32(&r, n, -3, 3);
        float *o1 = xmalloc(n * sizeof(float)), *o2 = xmalloc(n * sizeof(float));
        llmrt_error err = {0};
        ct_poison(o1, n);
        ct_poison(o2, n);
        ck_assert_int_eq(vt->silu_mul(b1, o1, g, u, n, &err), LLMRT_OK);
        ck_assert_int_eq(vt->silu_mul(b2, o2, g, u, n, &err), LLMRT_OK);
        for (int64_t i = 0; i < n; i++) {
            double ref = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
            CT_CHECK(fabs(o1[i] - ref) <= 1e-6 * fabs(ref) + 1e-30, "silu_mul[%lld]: %g vs %g",
                     (long long)i, (double)o1[i], ref);
        }
        ck_assert(memcmp(o1, o2, n * sizeof(float)) == 0);
        ct_poison(o1, n);
        ck_assert_int_eq(vt->add(b2, o1, g, u, n, &err), LLMRT_OK);
        for (int64_t i = 0; i < n; i++)
            CT_CHECK((double)o1[i] == (double)(float)((double)g[i] + u[i]), "add element %lld",
                (long long)i);
        /* out aliasing an input */
        memcpy(o2, g, n * sizeof(float));
        ck_assert_int_eq(vt->add(b2, o2, o2, u, n, &err), LLMRT_OK);
        ck_assert(memcmp(o1, o2, n * sizeof(float)) == 0);
        free(g);
        free(u);
        free(o1);
        free(o2);
    }
}
END_TEST

/* ---- argmax ---- */

START_TEST(argmax_lowest_index_on_ties)
{
    ct_rng r = {900};
    const int rows = 7, vocab = 5003;
    float *l = rand_f32(&r, (int64_t)rows * vocab, -10, 10);
    int32_t want[7];
    for (int i = 0; i < rows; i++) {
        int a = ct_int(&r, vocab), c = ct_int(&r, vocab);
        float top = 11.0f + i;
        l[i * vocab + a] = top;
        l[i * vocab + c] = top;
        want[i] = a < c ? a : c;
    }
    /* row 0: the max at index 0 and the last index */
    l[0] = 30.0f;
    l[vocab - 1] = 30.0f;
    want[0] = 0;
    /* row 1: the max only at the last index */
    l[vocab + vocab - 1] = 40.0f;
    want[1] = vocab - 1;
    int32_t o1[7], o2[7];
    memset(o1, 0xff, sizeof o1);
    memset(o2, 0xff, sizeof o2);
    llmrt_error err = {0};
    ck_assert_int_eq(vt->argmax(b1, o1, l, rows, vocab, &err), LLMRT_OK);
    ck_assert_int_eq(vt->argmax(b2, o2, l, rows, vocab, &err), LLMRT_OK);
    for (int i = 0; i < rows; i++) {
        ck_assert_int_eq(o1[i], want[i]);
        ck_assert_int_eq(o2[i], want[i]);
    }
    free(l);
}
END_TEST

/* ---- kv_store ---- */

START_TEST(kv_store_writes_only_mapped_slots)
{
    for (int d = 0; d < 3; d++) {
        ct_rng r = {1000 + d};
        llmrt_dtype dt = float_types[d];
        const int n_blocks = 6, bs = 4, kvh = 3, hd = 10, n = 7;
        const int64_t row = kvh * hd, slots = (int64_t)n_blocks * bs;
        size_t es = llmrt_dtype_size(dt), bytes = (size_t)(slots * row) * es;
        unsigned char *kc = xmalloc(bytes), *vc = xmalloc(bytes);
        memset(kc, 0x5a, bytes);
        memset(vc, 0x5a, bytes);
        unsigned char *kc0 = xmalloc(bytes);
        memcpy(kc0, kc, bytes);
        float *k = rand_f32(&r, n * row, -3, 3), *v = rand_f32(&r, n * row, -3, 3);
        int32_t map[7] = {5, -1, 0, 23, 12, -1, 7};
        llmrt_error err = {0};
        ck_assert_int_eq(vt->kv_store(b2, kc, vc, dt, k, v, map, n, kvh, hd, &err), LLMRT_OK);
        for (int64_t s = 0; s < slots; s++) {
            int t = -1;
            for (int i = 0; i < n; i++)
                if (map[i] == s)
                    t = i;
            for (int64_t e = 0; e < row; e++) {
                size_t off = (size_t)(s * row + e) * es;
                if (t < 0) {
                    CT_CHECK(memcmp(kc + off, kc0 + off, es) == 0 &&
                                 memcmp(vc + off, kc0 + off, es) == 0,
                             "%s slot %lld was not mapped but was written", llmrt_dtype_name(dt),
                             (long long)s);
                } else {
                    unsigned char want[4];
                    llmrt_store_f(want, dt, 0, k[t * row + e]);
                    CT_CHECK(memcmp(kc + off, want, es) == 0, "k slot %lld", (long long)s);
                    llmrt_store_f(want, dt, 0, v[t * row + e]);
                    CT_CHECK(memcmp(vc + off, want, es) == 0, "v slot %lld", (long long)s);
                }
            }
        }
        int32_t bad = -2;
        ck_assert_int_eq(vt->kv_store(b2, kc, vc, dt, k, v, &bad, 1, kvh, hd, &err),
                         LLMRT_ERR_INVALID_ARG);
        free(kc);
        free(vc);
        free(kc0);
        free(k);
        free(v);
    }
}
END_TEST

/* ---- attention ---- */

typedef struct attn_case {
    int n_heads, n_kv_heads, head_dim, block_size;
    int n_seqs;
    int qlen[4], seq_len[4];
} attn_case;

static void check_attention(const attn_case *c, llmrt_dtype dt, uint64_t seed)
{
    ct_rng r = {seed};
    const int D = c->head_dim, H = c->n_heads, KVH = c->n_kv_heads, bs = c->block_size;
    int32_t qs[5] = {0}, lens[4];
    int max_len = 0, max_q = 0, mbps = 0;
    for (int s = 0; s < c->n_seqs; s++) {
        qs[s + 1] = qs[s] + c->qlen[s];
        lens[s] = c->seq_len[s];
        max_len = lens[s] > max_len ? lens[s] : max_len;
        max_q = c->qlen[s] > max_q ? c->qlen[s] : max_q;
        int nb = (lens[s] + bs - 1) / bs;
        mbps = nb > mbps ? nb : mbps;
    }
    mbps += 1; /* a spare column, left at -1 */
    const int n_tokens = qs[c->n_seqs];
    /* blocks handed out in a shuffled order, plus unused blocks full of noise */
    int n_blocks = c->n_seqs * mbps + 3;
    int *perm = xmalloc(n_blocks * sizeof(int));
    for (int i = 0; i < n_blocks; i++)
        perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        int j = ct_int(&r, i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int32_t *tables = xmalloc((size_t)c->n_seqs * mbps * sizeof(int32_t));
    int next = 0;
    for (int s = 0; s < c->n_seqs; s++)
        for (int k = 0; k < mbps; k++)
            tables[s * mbps + k] = k * bs < lens[s] ? perm[next++] : -1;
    const int64_t row = (int64_t)KVH * D, cache_elems = (int64_t)n_blocks * bs * row;
    size_t es = llmrt_dtype_size(dt);
    void *kc = xmalloc(cache_elems * es), *vc = xmalloc(cache_elems * es);
    for (int64_t i = 0; i < cache_elems; i++) {
        llmrt_store_f(kc, dt, i, ct_uniform(&r, -2, 2));
        llmrt_store_f(vc, dt, i, ct_uniform(&r, -2, 2));
    }
    float *q = rand_f32(&r, (int64_t)n_tokens * H * D, -2, 2);
    int64_t on = (int64_t)n_tokens * H * D;
    float *o1 = xmalloc(on * sizeof(float)), *o2 = xmalloc(on * sizeof(float));
    ct_poison(o1, on);
    ct_poison(o2, on);
    llmrt_attn_params p = {
        .n_tokens = n_tokens, .n_seqs = c->n_seqs, .n_heads = H, .n_kv_heads = KVH,
        .head_dim = D, .scale = 1.0f / sqrtf((float)D), .query_start = qs, .seq_lens = lens,
        .block_tables = tables, .max_blocks_per_seq = mbps, .block_size = bs,
        .max_seq_len = max_len, .max_query_len = max_q, .kv_dtype = dt, .k_cache = kc,
        .v_cache = vc};
    llmrt_error err = {0};
    CT_CHECK(vt->attention(b1, o1, q, &p, &err) == LLMRT_OK, "%s", err.msg);
    CT_CHECK(vt->attention(b2, o2, q, &p, &err) == LLMRT_OK, "%s", err.msg);

    double *sc = xmalloc((size_t)max_len * sizeof(double));
    double *ref_out = xmalloc((size_t)on * sizeof(double));
    for (int s = 0; s < c->n_seqs; s++)
        for (int t = qs[s]; t < qs[s + 1]; t++) {
            int pos = lens[s] - c->qlen[s] + (t - qs[s]);
            for (int h = 0; h < H; h++) {
                int kh = h / (H / KVH);
                const float *qv = q + ((int64_t)t * H + h) * D;
                double mx = -INFINITY;
                for (int j = 0; j <= pos; j++) {
                    int64_t base = ((int64_t)tables[s * mbps + j / bs] * bs + j % bs) * row + kh * D;
                    double dotp = 0;
                    for (int d = 0; d < D; d++)
                        dotp += (double)qv[d] * llmrt_load_f(kc, dt, base + d);
                    sc[j] = dotp * p.scale;
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                double sum = 0;
                for (int j = 0; j <= pos; j++)
                    sum += (sc[j] = exp(sc[j] - mx));
                for (int d = 0; d < D; d++) {
                    double ref = 0;
                    for (int j = 0; j <= pos; j++) {
                        int64_t base =
                            ((int64_t)tables[s * mbps + j / bs] * bs + j % bs) * row + kh * D;
                        ref += sc[j] / sum * llmrt_load_f(vc, dt, base + d);
                    }
                    ref_out[((int64_t)t * H + h) * D + d] = ref;
                    double got = o1[((int64_t)t * H + h) * D + d];
                    CT_CHECK(fabs(got - ref) <= 2e-5,
                             "attention %s H=%d KVH=%d D=%d bs=%d: seq %d token %d head %d "
                             "dim %d: %.8g vs %.8g",
                             llmrt_dtype_name(dt), H, KVH, D, bs, s, t, h, d, got, ref);
                }
            }
        }
    CT_CHECK(memcmp(o1, o2, on * sizeof(float)) == 0, "attention: 1 and 2 threads differ");
    /* the fastest path (auto: on avx512 and amx the tiled kernel, FMAs, a vector exp) against
     * the same reference, at the same tolerance, with 1 and 2 threads agreeing */
    const char *paths[] = {"auto", "avx2"}; /* avx2: its FMA tiles on every dtype */
    for (int fp = 0; fp < 1; fp++) {
        llmrt_backend *f1 = ct_try_create_simd(1, paths[fp]);
        llmrt_backend *f2 = ct_try_create_simd(2, paths[fp]);
        if (!f1)
            continue;
        float *f1o = xmalloc(on * sizeof(float)), *f2o = xmalloc(on * sizeof(float));
        ct_poison(f1o, on);
        ct_poison(f2o, on);
        CT_CHECK(vt->attention(f1, f1o, q, &p, &err) == LLMRT_OK, "%s", err.msg);
        CT_CHECK(vt->attention(f2, f2o, q, &p, &err) == LLMRT_OK, "%s", err.msg);
        for (int64_t i = 0; i < on; i++)
            CT_CHECK(fabs((double)f1o[i] - ref_out[i]) <= 2e-5,
                     "attention on %s, %s H=%d KVH=%d D=%d bs=%d: element %lld: %.8g vs "
                     "%.8g",
                     paths[fp], llmrt_dtype_name(dt), H, KVH, D, bs, (long long)i,
                     f1o[i], ref_out[i]);
        CT_CHECK(memcmp(f1o, f2o, on * sizeof(float)) == 0,
                 "attention on %s: 1 and 2 threads differ", paths[fp]);
        free(f1o);
        free(f2o);
        vt->destroy(f1);
        vt->destroy(f2);
    }
    free(ref_out);
    free(sc);
    free(perm);
    free(tables);
    free(kc);
    free(vc);
    free(q);
    free(o1);
    free(o2);
}

START_TEST(attention_matches_reference)
{
    /* decode, prefill and a continued (chunked) prefill in one call; GQA 1, 2, 4 */
    const attn_case cases[] = {
        {4, 4, 64, 16, 3, {1, 13, 5}, {37, 13, 20}},
        {8, 4, 32, 5, 3, {1, 1, 1}, {1, 9, 64}},
        {8, 2, 20, 7, 4, {6, 1, 0, 3}, {6, 50, 8, 3}},
        {2, 1, 128, 16, 2, {40, 1}, {40, 100}},
        {12, 3, 24, 3, 1, {17}, {40}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < 3; d++)
            check_attention(&cases[i], float_types[d], 1200 + i * 3 + d);
}
END_TEST

START_TEST(attention_rejects_bad_params)
{
    int32_t qs[2] = {0, 3}, lens[1] = {2}, table[2] = {0, 1};
    float kc[64] = {0}, q[3 * 4] = {0}, out[3 * 4];
    llmrt_attn_params p = {.n_tokens = 3, .n_seqs = 1, .n_heads = 1, .n_kv_heads = 1,
                           .head_dim = 4, .scale = 0.5f, .query_start = qs, .seq_lens = lens,
                           .block_tables = table, .max_blocks_per_seq = 2, .block_size = 2,
                           .max_seq_len = 2, .max_query_len = 3, .kv_dtype = LLMRT_DTYPE_F32,
                           .k_cache = kc, .v_cache = kc};
    llmrt_error err = {0};
    ck_assert_int_eq(vt->attention(b1, out, q, &p, &err), LLMRT_ERR_INVALID_ARG); /* qlen > len */
    ck_assert_ptr_nonnull(strstr(err.msg, "seq_len"));
    lens[0] = 5;
    ck_assert_int_eq(vt->attention(b1, out, q, &p, &err), LLMRT_ERR_INVALID_ARG); /* > 2 blocks */
    lens[0] = 3;
    p.n_kv_heads = 3;
    ck_assert_int_eq(vt->attention(b1, out, q, &p, &err), LLMRT_ERR_INVALID_ARG);
    p.n_kv_heads = 1;
    table[1] = -1;
    ck_assert_int_eq(vt->attention(b1, out, q, &p, &err), LLMRT_ERR_INVALID_ARG);
    table[1] = 1;
    ck_assert_int_eq(vt->attention(b1, out, q, &p, &err), LLMRT_OK);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("backend-cpu.ops");
    TCase *tc = tcase_create("ops");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, gemm_matches_reference);
    tcase_add_test(tc, gemm_rows_independent_of_batch);
    tcase_add_test(tc, gemm_fast_paths_within_bound);
    tcase_add_test(tc, gemm_rejects_bad_weights);
    tcase_add_test(tc, argmax_head_equals_gemm_argmax);
    tcase_add_test(tc, embedding_matches_reference);
    tcase_add_test(tc, half_conversion_exhaustive);
    tcase_add_test(tc, gemm_half_conversion_exhaustive);
    tcase_add_test(tc, rmsnorm_matches_reference);
    tcase_add_test(tc, rope_matches_reference);
    tcase_add_test(tc, elementwise_match_reference);
    tcase_add_test(tc, argmax_lowest_index_on_ties);
    tcase_add_test(tc, kv_store_writes_only_mapped_slots);
    tcase_add_test(tc, attention_matches_reference);
    tcase_add_test(tc, attention_rejects_bad_params);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
