/* test_awq.c — quant-awq on the CPU backend: probe accepts and rejects with the right
 * field named; linears packed by the test's own AutoAWQ packer load and dequantise to exactly
 * the source weights; the CPU kernel matches a double-precision reference for group sizes
 * 32/64/128 and n = 1, 3, 17, identically on 1 and 2 threads and on the baseline and AVX2
 * kernels; malformed tensors give errors naming the tensor and what was expected; [quant.awq]
 * declares tune and refuses unknown keys; the kernels are chosen by what the backend offers
 * (host memory: the CPU kernels, in the "llmrt.cpu" extension's vector path; the "llmrt.cuda"
 * extension: the CUDA kernels; neither: refused), never by the backend's name. */
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/cpu.h>

#include "awq_test_common.h"

#include "mock_backend.h"
#include "test_util.h"

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* ---- probe ---- */

static void expect_probe(const char *json, llmrt_status want, const char *const *needles)
{
    llmrt_error err = {0};
    llmrt_status st = at_awq()->probe(json, &err);
    AT_CHECK(st == want, "probe(%s) = %d (%s), want %d", json, st, err.msg, want);
    for (int i = 0; needles && needles[i]; i++)
        AT_CHECK(strstr(err.msg, needles[i]) != NULL, "probe(%s): message '%s' lacks '%s'",
                 json, err.msg, needles[i]);
}

START_TEST(probe_accepts_awq_gemm)
{
    expect_probe("{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, "
                 "\"version\": \"gemm\", \"zero_point\": true}",
                 LLMRT_OK, NULL);
    expect_probe("{\"quant_method\": \"AWQ\", \"bits\": 4, \"group_size\": 32, "
                 "\"version\": \"GEMM\", \"zero_point\": true, \"modules_to_not_convert\": null}",
                 LLMRT_OK, NULL);
    expect_probe("{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 64, "
                 "\"version\": \"Gemm\", \"zero_point\": true}",
                 LLMRT_OK, NULL);
}
END_TEST

START_TEST(probe_rejects_unsupported_awq)
{
    const char *bits[] = {"bits = 8", "bits = 4", NULL};
    expect_probe("{\"quant_method\": \"awq\", \"bits\": 8, \"group_size\": 128, "
                 "\"version\": \"gemm\", \"zero_point\": true}",
                 LLMRT_ERR_UNSUPPORTED, bits);
    const char *gemv[] = {"version = \"gemv\"", "\"gemm\"", NULL};
    expect_probe("{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, "
                 "\"version\": \"gemv\", \"zero_point\": true}",
                 LLMRT_ERR_UNSUPPORTED, gemv);
    const char *other_versions[] = {"gemv_fast", "marlin", "exllama", "ipex"};
    for (int i = 0; i < 4; i++) {
        char json[256];
        snprintf(json, sizeof json,
                 "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, "
                 "\"version\": \"%s\", \"zero_point\": true}",
                 other_versions[i]);
        const char *n[] = {"version", other_versions[i], NULL};
        expect_probe(json, LLMRT_ERR_UNSUPPORTED, n);
    }
    const char *zp[] = {"zero_point = false", "zero_point = true", NULL};
    expect_probe("{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128, "
                 "\"version\": \"gemm\", \"zero_point\": false}",
                 LLMRT_ERR_UNSUPPORTED, zp);
    const int groups[] = {-1, 16, 256, 100};
    for (int i = 0; i < 4; i++) {
        char json[256], want[64];
        snprintf(json, sizeof json,
                 "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": %d, "
                 "\"version\": \"gemm\", \"zero_point\": true}",
                 groups[i]);
        snprintf(want, sizeof want, "group_size = %d", groups[i]);
        const char *n[] = {want, "32, 64, 128", NULL};
        expect_probe(json, LLMRT_ERR_UNSUPPORTED, n);
    }
}
END_TEST

START_TEST(probe_compressed_tensors_and_others)
{
    const char *ct[] = {"compressed-tensors pack-quantized checkpoints are not supported (AWQ "
                        "GEMM layout only)",
                        NULL};
    /* as llm-compressor writes it: format at the top and in each config group */
    expect_probe("{\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\", "
                 "\"config_groups\": {\"group_0\": {\"format\": \"pack-quantized\", "
                 "\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"group_size\": 128, "
                 "\"strategy\": \"group\", \"symmetric\": false, \"type\": \"int\"}}}, "
                 "\"ignore\": [\"lm_head\"], \"quantization_status\": \"compressed\"}",
                 LLMRT_ERR_UNSUPPORTED, ct);
    /* only inside a config group */
    expect_probe("{\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"group_0\": "
                 "{\"format\": \"pack-quantized\", \"weights\": {\"num_bits\": 4}}}}",
                 LLMRT_ERR_UNSUPPORTED, ct);
    /* compressed-tensors in another format is not ours */
    expect_probe("{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\"}",
                 LLMRT_ERR_NOT_FOUND, NULL);
    expect_probe("{\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 128}",
                 LLMRT_ERR_NOT_FOUND, NULL);
    expect_probe("{\"quant_method\": \"fp8\"}", LLMRT_ERR_NOT_FOUND, NULL);
    expect_probe("{}", LLMRT_ERR_NOT_FOUND, NULL);
    expect_probe("[1, 2]", LLMRT_ERR_NOT_FOUND, NULL);
    expect_probe("{\"quant_method\": ", LLMRT_ERR_FORMAT, NULL);
}
END_TEST

/* ---- loading and dequantising ---- */

static const int64_t shapes[][3] = {
    /* in, out, group: partial 128-blocks (96, 160, 64 + ...), several groups per block */
    {96, 24, 32}, {256, 40, 64}, {384, 136, 128}, {160, 8, 32}, {192, 16, 64}, {1024, 72, 128},
};

/* On every path: each kernel family has its own layout (awq_cpu.c). */
START_TEST(dequant_equals_source_weights)
{
    const char *paths[] = {"exact", "avx2", "avx512"};
    for (int p = 0; p < 3; p++) {
        llmrt_backend_ref be;
        if (!at_try_cpu_backend_simd(2, paths[p], &be))
            continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t in = shapes[s][0], out = shapes[s][1], g = shapes[s][2];
            at_linear src = at_linear_random(in, out, g, 10 + s);
            at_ckpt *ck = at_ckpt_new();
            at_linear_add(ck, "model.layers.0.mlp.up_proj", &src);
            llmrt_quant *q = at_quant(&be, (int)g);
            llmrt_qlinear *l = NULL;
            llmrt_error err = {0};
            AT_CHECK(at_awq()->linear_load(q, at_ckpt_view(ck), "model.layers.0.mlp.up_proj",
                                           in,
                                           out, &l, &err) == LLMRT_OK,
                     "%s", err.msg);
            float *w = xmalloc((size_t)(in * out) * sizeof(float));
            for (int64_t i = 0; i < in * out; i++)
                w[i] = NAN;
            ck_assert_int_eq(at_awq()->linear_dequant(q, l, w, &err), LLMRT_OK);
            for (int64_t o = 0; o < out; o++)
                for (int64_t i = 0; i < in; i++)
                    AT_CHECK(w[o * in + i] == src.w[o * in + i],
                             "in=%lld out=%lld g=%lld: w[%lld][%lld] = %g, source %g",
                             (long long)in, (long long)out, (long long)g, (long long)o,
                             (long long)i, (double)w[o * in + i], (double)src.w[o * in + i]);
            /* the repacked weights: half a byte per weight plus per-group scale and zero (the
             * outputs padded to 16 in the interleaved layout) */
            uint64_t bytes = at_awq()->linear_bytes(q, l);
            const int64_t po = (out + 15) / 16 * 16;
            ck_assert_uint_ge(bytes, (uint64_t)(in * out / 2 + 3 * (in / g) * out));
            ck_assert_uint_le(bytes,
                              (uint64_t)((in + 127) / 128 * 128 * po / 2 + 3 * (in / g) * po));
            at_awq()->linear_free(q, l);
            at_awq()->destroy(q);
            at_ckpt_free(ck);
            at_linear_free(&src);
            free(w);
        }
        be.vt->destroy(be.b);
    }
}
END_TEST

/* ---- the CPU kernel ---- */

static void forward_case(int64_t in, int64_t out, int64_t g, int32_t n, uint64_t seed)
{
    llmrt_backend_ref b1 = at_cpu_backend(1), b2 = at_cpu_backend(2),
                      bb = at_cpu_backend_simd(2, "baseline");
    at_linear src = at_linear_random(in, out, g, seed);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "p", &src);
    llmrt_quant *q1 = at_quant(&b1, (int)g), *q2 = at_quant(&b2, (int)g), *qb = at_quant(&bb, (int)g);
    llmrt_qlinear *l1 = NULL, *l2 = NULL, *lb = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(at_awq()->linear_load(q1, at_ckpt_view(ck), "p", in, out, &l1, &err), LLMRT_OK);
    ck_assert_int_eq(at_awq()->linear_load(q2, at_ckpt_view(ck), "p", in, out, &l2, &err), LLMRT_OK);
    ck_assert_int_eq(at_awq()->linear_load(qb, at_ckpt_view(ck), "p", in, out, &lb, &err), LLMRT_OK);
    at_rng r = {seed + 77};
    float *x = xmalloc((size_t)(n * in) * sizeof(float));
    for (int64_t i = 0; i < n * in; i++)
        x[i] = at_uniform(&r, -1.0f, 1.0f) + (i % 7 == 0 ? 0.5f : 0.0f); /* a nonzero mean */
    float *y1 = xmalloc((size_t)(n * out) * sizeof(float)), *y2 = xmalloc((size_t)(n * out) * sizeof(float));
    for (int64_t i = 0; i < n * out; i++)
        y1[i] = y2[i] = NAN;
    ck_assert_int_eq(at_awq()->linear_forward(q1, l1, y1, x, n, &err), LLMRT_OK);
    ck_assert_int_eq(at_awq()->linear_forward(q2, l2, y2, x, n, &err), LLMRT_OK);
    for (int32_t t = 0; t < n; t++)
        for (int64_t o = 0; o < out; o++) {
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < in; i++) {
                double xi = x[t * in + i], wi = src.w[o * in + i];
                ref += xi * wi;
                /* bound for the kernel's Σ s·x·q − s·z·Σx: both terms at most 15·s·|x| */
                double s = llmrt_f16_to_f32(src.scales[(i / g) * out + o]);
                mag += fabs(xi) * 30.0 * s;
            }
            double got = y1[t * out + o];
            AT_CHECK(fabs(got - ref) <= 2e-6 * mag + 1e-6,
                     "awq forward in=%lld out=%lld g=%lld n=%d: y[%d][%lld] = %.9g, "
                     "reference %.9g",
                     (long long)in, (long long)out, (long long)g, n, t, (long long)o, got, ref);
        }
    AT_CHECK(memcmp(y1, y2, (size_t)(n * out) * sizeof(float)) == 0,
             "awq forward g=%lld n=%d: 1 and 2 threads differ", (long long)g, n);
    for (int64_t i = 0; i < n * out; i++)
        y2[i] = NAN;
    ck_assert_int_eq(at_awq()->linear_forward(qb, lb, y2, x, n, &err), LLMRT_OK);
    AT_CHECK(memcmp(y1, y2, (size_t)(n * out) * sizeof(float)) == 0,
             "awq forward g=%lld n=%d: baseline and default kernels differ", (long long)g, n);
    /* each row alone gives the bits it gave inside the batch */
    float *yr = xmalloc((size_t)out * sizeof(float));
    for (int32_t t = 0; t < n; t += 5) {
        ck_assert_int_eq(at_awq()->linear_forward(q2, l2, yr, x + t * in, 1, &err), LLMRT_OK);
        AT_CHECK(memcmp(yr, y1 + t * out, (size_t)out * sizeof(float)) == 0,
                 "row %d alone differs from row %d of a batch of %d", t, t, n);
    }
    at_awq()->linear_free(q1, l1);
    at_awq()->linear_free(q2, l2);
    at_awq()->linear_free(qb, lb);
    at_awq()->destroy(q1);
    at_awq()->destroy(q2);
    at_awq()->destroy(qb);
    at_ckpt_free(ck);
    at_linear_free(&src);
    free(x);
    free(y1);
    free(y2);
    free(yr);
    b1.vt->destroy(b1.b);
    b2.vt->destroy(b2.b);
    bb.vt->destroy(bb.b);
}

START_TEST(forward_matches_reference)
{
    const int32_t ns[] = {1, 3, 17};
    const int64_t groups[] = {32, 64, 128};
    for (int gi = 0; gi < 3; gi++)
        for (int k = 0; k < 3; k++) {
            forward_case(512, 264, groups[gi], ns[k], 100 + gi * 3 + k);
            /* a partial last block, and a single row of 8 outputs */
            forward_case(groups[gi] == 128 ? 640 : 7 * groups[gi], 8, groups[gi], ns[k],
                         200 + gi * 3 + k);
        }
    forward_case(4096, 96, 128, 1, 300); /* long rows: many groups into one accumulator */
}
END_TEST

/* The int8 kernels of the fast paths (awq_cpu.c): x quantized per span of inputs j (32; 128
 * for the AMX kernel: amx, group 128, 16 rows or more) with step d_j = max|x_j| / 127, so
 * |y' - y| <= Σ_i (d_j(i) / 2) |w_i| plus f32 rounding. Results do not depend on the thread
 * count; on the vpdpbusd kernel a row alone gives the bits it gives in a batch; a NaN in a row
 * reaches its outputs. */
static llmrt_backend_ref int8_b1, int8_b2; /* the path under test, 1 and 2 threads */

static void int8_case(const char *path, int64_t in, int64_t out, int64_t g, int32_t n,
                      uint64_t seed)
{
    llmrt_backend_ref b1 = int8_b1, b2 = int8_b2;
    at_linear src = at_linear_random(in, out, g, seed);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "p", &src);
    llmrt_quant *q1 = at_quant(&b1, (int)g), *q2 = at_quant(&b2, (int)g);
    llmrt_qlinear *l1 = NULL, *l2 = NULL;
    llmrt_error err = {0};
    const llmrt_checkpoint *view = at_ckpt_view(ck);
    ck_assert_int_eq(at_awq()->linear_load(q1, view, "p", in, out, &l1, &err), LLMRT_OK);
    ck_assert_int_eq(at_awq()->linear_load(q2, view, "p", in, out, &l2, &err), LLMRT_OK);
    at_rng r = {seed + 99};
    float *x = xmalloc((size_t)(n * in) * sizeof(float));
    for (int64_t i = 0; i < n * in; i++) /* a nonzero mean, and outliers that set a block's step */
        x[i] = at_uniform(&r, -1.0f, 1.0f) + (i % 7 == 0 ? 0.5f : 0.0f) +
               (i % 97 == 3 ? 20.0f : 0.0f);
    float *y1 = xmalloc((size_t)(n * out) * sizeof(float));
    float *y2 = xmalloc((size_t)(n * out) * sizeof(float));
    for (int64_t i = 0; i < n * out; i++)
        y1[i] = y2[i] = NAN;
    ck_assert_int_eq(at_awq()->linear_forward(q1, l1, y1, x, n, &err), LLMRT_OK);
    ck_assert_int_eq(at_awq()->linear_forward(q2, l2, y2, x, n, &err), LLMRT_OK);
    const int amx = strcmp(path, "amx") == 0 && g == 128 && n >= 16;
    const int64_t span = amx ? 128 : 32;
    float *amax = xmalloc((size_t)(in / 32 + 4) * sizeof(float)); /* per span of row t */
    for (int32_t t = 0; t < n; t++) {
        for (int64_t k0 = 0; k0 < in; k0 += span) {
            float m = 0.0f;
            for (int64_t k = k0; k < k0 + span && k < in; k++)
                m = fabsf(x[t * in + k]) > m ? fabsf(x[t * in + k]) : m;
            amax[k0 / span] = m;
        }
        for (int64_t o = 0; o < out; o++) {
            double ref = 0, bound = 0, mag = 0;
            for (int64_t i = 0; i < in; i++) {
                double xi = x[t * in + i], wi = src.w[o * in + i];
                ref += xi * wi;
                bound += amax[i / span] / 127.0 / 2.0 * fabs(wi);
                mag += fabs(xi) * 30.0 * llmrt_f16_to_f32(src.scales[(i / g) * out + o]);
            }
            double got = y1[t * out + o];
            AT_CHECK(fabs(got - ref) <= 1.0001 * bound + 4e-6 * mag + 1e-6,
                     "awq int8 (%s) in=%lld out=%lld g=%lld n=%d: y[%d][%lld] = %.9g, "
                     "reference %.9g, bound %.3g",
                     path, (long long)in, (long long)out, (long long)g, n, t, (long long)o,
                     got, ref, bound);
        }
    }
    free(amax);
    AT_CHECK(memcmp(y1, y2, (size_t)(n * out) * sizeof(float)) == 0,
             "awq int8 (%s) g=%lld n=%d: 1 and 2 threads differ", path, (long long)g, n);
    float *yr = xmalloc((size_t)out * sizeof(float));
    for (int32_t t = 0; t < n && !amx; t += 5) {
        ck_assert_int_eq(at_awq()->linear_forward(q2, l2, yr, x + t * in, 1, &err), LLMRT_OK);
        AT_CHECK(memcmp(yr, y1 + t * out, (size_t)out * sizeof(float)) == 0,
                 "awq int8 (%s): row %d alone differs from row %d of a batch of %d", path, t,
                 t, n);
    }
    x[in / 2] = NAN; /* row 0 */
    ck_assert_int_eq(at_awq()->linear_forward(q2, l2, y2, x, n, &err), LLMRT_OK);
    for (int64_t o = 0; o < out; o++)
        AT_CHECK(isnan(y2[o]), "awq int8 (%s): a NaN in x gave y[0][%lld] = %g", path,
                 (long long)o, (double)y2[o]);
    at_awq()->linear_free(q1, l1);
    at_awq()->linear_free(q2, l2);
    at_awq()->destroy(q1);
    at_awq()->destroy(q2);
    at_ckpt_free(ck);
    at_linear_free(&src);
    free(x);
    free(y1);
    free(y2);
    free(yr);
}

/* The backends of a path for int8_case; 0 when this CPU lacks it. */
static int int8_open(const char *path)
{
    if (!at_try_cpu_backend_simd(1, path, &int8_b1))
        return 0;
    ck_assert(at_try_cpu_backend_simd(2, path, &int8_b2));
    return 1;
}

static void int8_close(void)
{
    int8_b1.vt->destroy(int8_b1.b);
    int8_b2.vt->destroy(int8_b2.b);
}

START_TEST(int8_paths_within_bound)
{
    const char *paths[] = {"avx2", "avx512"}; /* amx: the same kernels below 16 rows */
    const int32_t ns[] = {1, 3, 17};
    const int64_t groups[] = {32, 64, 128};
    for (int p = 0; p < 2; p++) {
        if (!int8_open(paths[p]))
            continue;
        for (int k = 0; k < 3; k++) {
            for (int gi = 0; gi < 3; gi++) {
                int8_case(paths[p], 256, 72, groups[gi], ns[k], 400 + gi * 3 + k);
                /* partial last blocks: 5 groups of 32 (in % 128 = 32), 5 of 64 (64), 640 */
                int8_case(paths[p], groups[gi] == 128 ? 640 : 5 * groups[gi], 8, groups[gi],
                          ns[k], 500 + gi * 3 + k);
            }
            int8_case(paths[p], 7 * 32, 16, 32, ns[k], 600 + k); /* in % 128 = 96 */
        }
        if (p == 1)
            int8_case(paths[p], 4096, 24, 128, 1, 700); /* long rows */
        int8_close();
    }
    /* the AMX kernel: row tiles of 16 and 32, a last tile of 1 row, an odd output group,
     * group 64 (the vpdpbusd kernel) at 17 rows */
    if (int8_open("amx")) {
        int8_case("amx", 384, 40, 128, 16, 701);
        int8_case("amx", 320, 24, 64, 17, 704);
        int8_case("amx", 256, 72, 128, 33, 702);
        int8_case("amx", 512, 32, 128, 64, 703);
        int8_close();
    }
}
END_TEST

/* ---- malformed checkpoints ---- */

static llmrt_status try_load(at_ckpt *ck, int64_t in, int64_t out, int g, llmrt_error *err)
{
    llmrt_backend_ref be = at_cpu_backend(1);
    llmrt_quant *q = at_quant(&be, g);
    llmrt_qlinear *l = NULL;
    llmrt_status st = at_awq()->linear_load(q, at_ckpt_view(ck), "m.proj", in, out, &l, err);
    if (st == LLMRT_OK)
        at_awq()->linear_free(q, l);
    else
        ck_assert_ptr_null(l);
    at_awq()->destroy(q);
    be.vt->destroy(be.b);
    return st;
}

START_TEST(malformed_tensors_named)
{
    const int64_t in = 256, out = 64, g = 128;
    at_linear src = at_linear_random(in, out, g, 5);
    llmrt_error err = {0};

    /* no qweight: the linear is dense */
    at_ckpt *ck = at_ckpt_new();
    at_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F16, out, in, src.w); /* any bytes */
    ck_assert_int_eq(try_load(ck, in, out, (int)g, &err), LLMRT_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.msg, "m.proj.qweight"));
    at_ckpt_free(ck);

    /* qweight with the wrong dtype */
    ck = at_ckpt_new();
    at_ckpt_add(ck, "m.proj.qweight", LLMRT_DTYPE_F16, in, out / 8, src.qweight);
    at_ckpt_add(ck, "m.proj.qzeros", LLMRT_DTYPE_I32, in / g, out / 8, src.qzeros);
    at_ckpt_add(ck, "m.proj.scales", LLMRT_DTYPE_F16, in / g, out, src.scales);
    ck_assert_int_eq(try_load(ck, in, out, (int)g, &err), LLMRT_ERR_FORMAT);
    AT_CHECK(strstr(err.msg, "m.proj.qweight") && strstr(err.msg, "expected I32 [256, 8]") &&
                 strstr(err.msg, "found F16 [256, 8]"),
             "message: %s", err.msg);
    at_ckpt_free(ck);

    /* scales with the wrong shape (transposed) */
    ck = at_ckpt_new();
    at_ckpt_add(ck, "m.proj.qweight", LLMRT_DTYPE_I32, in, out / 8, src.qweight);
    at_ckpt_add(ck, "m.proj.qzeros", LLMRT_DTYPE_I32, in / g, out / 8, src.qzeros);
    at_ckpt_add(ck, "m.proj.scales", LLMRT_DTYPE_F16, out, in / g, src.scales);
    ck_assert_int_eq(try_load(ck, in, out, (int)g, &err), LLMRT_ERR_FORMAT);
    AT_CHECK(strstr(err.msg, "m.proj.scales") && strstr(err.msg, "expected F16 [2, 64]") &&
                 strstr(err.msg, "found F16 [64, 2]"),
             "message: %s", err.msg);
    at_ckpt_free(ck);

    /* qzeros for a different group size */
    ck = at_ckpt_new();
    at_ckpt_add(ck, "m.proj.qweight", LLMRT_DTYPE_I32, in, out / 8, src.qweight);
    at_ckpt_add(ck, "m.proj.qzeros", LLMRT_DTYPE_I32, in / g, out / 8, src.qzeros);
    at_ckpt_add(ck, "m.proj.scales", LLMRT_DTYPE_F16, in / g, out, src.scales);
    ck_assert_int_eq(try_load(ck, in, out, 64, &err), LLMRT_ERR_FORMAT);
    AT_CHECK(strstr(err.msg, "m.proj.qzeros") && strstr(err.msg, "expected I32 [4, 8]"),
             "message: %s", err.msg);
    /* shapes not divisible */
    ck_assert_int_eq(try_load(ck, 200, out, (int)g, &err), LLMRT_ERR_UNSUPPORTED);
    AT_CHECK(strstr(err.msg, "200") && strstr(err.msg, "group_size 128"), "message: %s", err.msg);
    ck_assert_int_eq(try_load(ck, in, 60, (int)g, &err), LLMRT_ERR_UNSUPPORTED);
    AT_CHECK(strstr(err.msg, "60") && strstr(err.msg, "multiple of 8"), "message: %s", err.msg);
    at_ckpt_free(ck);

    /* scales missing */
    ck = at_ckpt_new();
    at_ckpt_add(ck, "m.proj.qweight", LLMRT_DTYPE_I32, in, out / 8, src.qweight);
    at_ckpt_add(ck, "m.proj.qzeros", LLMRT_DTYPE_I32, in / g, out / 8, src.qzeros);
    ck_assert_int_eq(try_load(ck, in, out, (int)g, &err), LLMRT_ERR_FORMAT);
    AT_CHECK(strstr(err.msg, "m.proj.scales is missing"), "message: %s", err.msg);
    at_ckpt_free(ck);
    at_linear_free(&src);
}
END_TEST

START_TEST(create_checks_section)
{
    const char *cfg = at_config(128);
    llmrt_backend_ref be = at_cpu_backend(1);
    llmrt_quant *q = NULL;
    llmrt_error err = {0};
    /* [quant.awq] declares one key, tune, a developer's knob */
    const llmrt_plugin_desc *d = at_awq_desc();
    ck_assert_uint_ge(d->struct_size, offsetof(llmrt_plugin_desc, n_keys) + sizeof d->n_keys);
    ck_assert_uint_eq(d->n_keys, 1);
    ck_assert_str_eq(d->keys[0].name, "tune");
    ck_assert_int_eq(d->keys[0].type, LLMRT_KEY_STRING);
    ck_assert_str_eq(d->keys[0].def, "");
    ck_assert(d->keys[0].flags & LLMRT_KEY_DEVELOPER);
    /* an unknown key is refused naming it and where it was (a host that passes the section as
     * written) */
    const char *keys[] = {"tune", "kernel"}, *vals[] = {"kw=4", "fast"},
               *where[] = {"conf/x.ini:8", "conf/x.ini:9"};
    llmrt_section sec = {"quant.awq", 2, keys, vals, where};
    ck_assert_int_eq(at_awq()->create(NULL, &sec, cfg, &be, &q, &err), LLMRT_ERR_INVALID_ARG);
    AT_CHECK(strstr(err.msg, "conf/x.ini:9") && strstr(err.msg, "'kernel'") &&
                 strstr(err.msg, "tune"),
             "message: %s", err.msg);
    /* tune alone is accepted (its knobs steer the CUDA kernels; the CPU ignores them) */
    sec.n = 1;
    ck_assert_int_eq(at_awq()->create(NULL, &sec, cfg, &be, &q, &err), LLMRT_OK);
    at_awq()->destroy(q);
    /* an unsupported config is refused by create as by probe */
    ck_assert_int_eq(at_awq()->create(NULL, NULL, "{\"quant_method\": \"awq\", \"bits\": 3}", &be,
                                      &q, &err),
                     LLMRT_ERR_UNSUPPORTED);
    be.vt->destroy(be.b);
}
END_TEST

/* ---- kernels chosen by what the backend offers ---- */

/* A host whose log keeps the last line: create reports the kernels it chose. */
static char last_log[1024];
static void keep_log(void *ctx, llmrt_log_level level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_log, sizeof last_log, fmt, ap);
    va_end(ap);
}
static const llmrt_host log_host = {sizeof(llmrt_host), LLMRT_ABI_VERSION, NULL, keep_log, NULL};

/* backend-cpu behind a vtable of its own: its extension() offers a "llmrt.cpu" table whose
 * simd() answers fake.simd (fake.offer_cpu = 0: no such table), and, with fake.offer_cuda, a
 * "llmrt.cuda" table whose members count their calls; every other extension is
 * backend-cpu's. fake.caps_mask clears capability bits. */
static struct {
    llmrt_backend_vtable vt;
    const llmrt_backend_vtable *cpu;
    int offer_cpu, offer_cuda;
    const char *simd;
    uint32_t caps_mask;
    int simd_calls, cuda_calls;
} fake;

static const char *fake_simd(llmrt_backend *b)
{
    fake.simd_calls++;
    return fake.simd;
}
static int32_t fake_threads(llmrt_backend *b) { return 1; }
static const llmrt_cpu_ext fake_cpu_ext = {sizeof(llmrt_cpu_ext), fake_simd, fake_threads};

/* The "llmrt.cuda" table: its members are opaque here (this file is built without CUDA
 * headers); a table of the right size and members that count their calls. */
static void *fake_cuda_member(llmrt_backend *b)
{
    fake.cuda_calls++;
    return NULL;
}
static int fake_cuda_int(llmrt_backend *b)
{
    fake.cuda_calls++;
    return 0;
}
static const struct {
    uint32_t struct_size;
    void *(*stream)(llmrt_backend *);
    int (*device)(llmrt_backend *);
    int (*pdl)(llmrt_backend *);
} fake_cuda_ext = {sizeof fake_cuda_ext, fake_cuda_member, fake_cuda_int, fake_cuda_int};

static const void *fake_extension(llmrt_backend *b, const char *name, uint32_t version)
{
    if (name && strcmp(name, LLMRT_EXT_CPU) == 0)
        return fake.offer_cpu ? &fake_cpu_ext : NULL;
    if (name && strcmp(name, "llmrt.cuda") == 0)
        return fake.offer_cuda && version <= 1 ? &fake_cuda_ext : NULL;
    return llmrt_backend_extension(fake.cpu, b, name, version);
}

static uint32_t fake_caps(llmrt_backend *b) { return fake.cpu->caps(b) & ~fake.caps_mask; }

/* `name` over a backend-cpu instance, through the fake vtable. */
static llmrt_backend_ref fake_backend(const llmrt_backend_ref *cpu, const char *name)
{
    fake.cpu = cpu->vt;
    fake.vt = *cpu->vt;
    fake.vt.extension = fake_extension;
    fake.vt.caps = fake_caps;
    fake.simd_calls = fake.cuda_calls = 0;
    return (llmrt_backend_ref){&fake.vt, cpu->b, name};
}

/* y = x · Wᵀ of a small linear through the quant instance q, against the exact weights. */
/* q's forward against the f64 reference: within f32 rounding, or on an int8 path (x in
 * [-1, 1], so a step of at most 1/127 per span) within half a step per weight more. */
static void check_forward(llmrt_quant *q, const char *what, int int8)
{
    at_linear src = at_linear_random(256, 48, 128, 9);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "p", &src);
    llmrt_qlinear *l = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(at_awq()->linear_load(q, at_ckpt_view(ck), "p", 256, 48, &l, &err), LLMRT_OK);
    float x[3 * 256], y[3 * 48];
    at_rng r = {5};
    for (int i = 0; i < 3 * 256; i++)
        x[i] = at_uniform(&r, -1.0f, 1.0f);
    ck_assert_int_eq(at_awq()->linear_forward(q, l, y, x, 3, &err), LLMRT_OK);
    for (int t = 0; t < 3; t++)
        for (int o = 0; o < 48; o++) {
            double ref = 0, bound = 0;
            for (int i = 0; i < 256; i++) {
                ref += (double)x[t * 256 + i] * src.w[o * 256 + i];
                bound += int8 ? 1.0 / 127.0 / 2.0 * fabs(src.w[o * 256 + i]) : 0.0;
            }
            ck_assert_msg(fabs(y[t * 48 + o] - ref) <= 1.0001 * bound + 1e-4 * (1 + fabs(ref)),
                          "%s: y[%d][%d] = %g, reference %g", what, t, o, y[t * 48 + o], ref);
        }
    at_awq()->linear_free(q, l);
    at_ckpt_free(ck);
    at_linear_free(&src);
}

/* A backend with neither host-addressable memory nor the "llmrt.cuda" extension (the mock
 * backend: device memory apart from host memory) is refused, naming both. */
START_TEST(refuses_backend_without_kernels)
{
    llmrt_backend_ref mock = mock_backend_new(-1, 1);
    llmrt_quant *q = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(at_awq()->create(NULL, NULL, at_config(128), &mock, &q, &err),
                     LLMRT_ERR_UNSUPPORTED);
    ck_assert_ptr_null(q);
    ck_assert_msg(strstr(err.msg, "'mock'") && strstr(err.msg, "\"llmrt.cuda\"") &&
                      strstr(err.msg, "LLMRT_BACKEND_CAP_HOST_IS_DEVICE"),
                  "message: %s", err.msg);
    mock_backend_free(&mock);
    /* the same for backend-cpu with its host memory capability hidden */
    llmrt_backend_ref cpu = at_cpu_backend(1);
    llmrt_backend_ref be = fake_backend(&cpu, "cpu-without-host");
    fake.offer_cpu = 1;
    fake.caps_mask = LLMRT_BACKEND_CAP_HOST_IS_DEVICE;
    ck_assert_int_eq(at_awq()->create(NULL, NULL, at_config(128), &be, &q, &err),
                     LLMRT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "'cpu-without-host'") && strstr(err.msg, "neither"), "message: %s",
                  err.msg);
    fake.caps_mask = 0;
    cpu.vt->destroy(cpu.b);
}
END_TEST

/* backend-cpu gets the CPU kernels whatever it is called (the name decides nothing). */
START_TEST(cpu_kernels_on_backend_cpu)
{
    llmrt_backend_ref cpu = at_cpu_backend(2);
    const char *names[] = {"cpu", "metal", "cuda"};
    for (int i = 0; i < 3; i++) {
        llmrt_backend_ref be = {cpu.vt, cpu.b, names[i]};
        llmrt_quant *q = NULL;
        llmrt_error err = {0};
        last_log[0] = 0;
        ck_assert_msg(at_awq()->create(&log_host, NULL, at_config(128), &be, &q, &err) == LLMRT_OK,
                      "backend-cpu named '%s': %s", names[i], err.msg);
        ck_assert_msg(strstr(last_log, "CPU"), "backend-cpu named '%s': %s", names[i], last_log);
        check_forward(q, names[i], 0);
        at_awq()->destroy(q);
    }
    cpu.vt->destroy(cpu.b);
}
END_TEST

/* The CPU kernel path follows the backend's "llmrt.cpu" simd: the int8 kernels on avx2
 * (where this CPU has AVX2, FMA and F16C), baseline when it says baseline, exact when it says
 * exact, names a path not known here, or the backend has no such extension. */
START_TEST(cpu_kernels_follow_llmrt_cpu_simd)
{
    llmrt_backend_ref cpu = at_cpu_backend(1);
#if defined(__x86_64__) && defined(__GNUC__)
    const int have_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
#else
    const int have_avx2 = 0;
#endif
    static const struct {
        int offer;
        const char *simd, *want;
        int avx2; /* needs the AVX2 kernel to run; its activations are int8 */
    } cases[] = {
        {1, "avx2", "CPU (avx2)", 1},
        {1, "baseline", "CPU (baseline)", 0},
        {1, "exact", "CPU (exact)", 0},
        {1, "sve2", "CPU (exact)", 0},
        {0, NULL, "CPU (exact)", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].avx2 && !have_avx2)
            continue;
        llmrt_backend_ref be = fake_backend(&cpu, "cpu");
        fake.offer_cpu = cases[i].offer;
        fake.simd = cases[i].simd;
        llmrt_quant *q = NULL;
        llmrt_error err = {0};
        last_log[0] = 0;
        ck_assert_msg(at_awq()->create(&log_host, NULL, at_config(128), &be, &q, &err) == LLMRT_OK,
                      "simd %s: %s", cases[i].simd ? cases[i].simd : "(no extension)", err.msg);
        ck_assert_msg(strstr(last_log, cases[i].want), "simd %s: log '%s', want '%s'",
                      cases[i].simd ? cases[i].simd : "(no extension)", last_log, cases[i].want);
        ck_assert_int_eq(fake.simd_calls > 0, cases[i].offer);
        check_forward(q, cases[i].simd ? cases[i].simd : "(no extension)", cases[i].avx2);
        at_awq()->destroy(q);
    }
    cpu.vt->destroy(cpu.b);
}
END_TEST

/* A backend that offers "llmrt.cuda" gets the CUDA kernels: this build asks the extension for
 * the stream and device (on this fake, with no GPU behind it, that may fail, but not as "no
 * kernels"); a build without CUDA refuses it, saying so — unless the backend's memory is host
 * memory too, where the CPU kernels run. */
START_TEST(cuda_extension_chooses_cuda_kernels)
{
    llmrt_backend_ref cpu = at_cpu_backend(1);
    llmrt_backend_ref be = fake_backend(&cpu, "gpu");
    fake.offer_cpu = 1;
    fake.simd = "baseline";
    fake.offer_cuda = 1;
    fake.caps_mask = LLMRT_BACKEND_CAP_HOST_IS_DEVICE;
    llmrt_quant *q = NULL;
    llmrt_error err = {0};
    llmrt_status st = at_awq()->create(NULL, NULL, at_config(128), &be, &q, &err);
#ifdef AWQ_TEST_HAVE_CUDA
    ck_assert_msg(fake.cuda_calls > 0, "the CUDA kernels were not chosen (%s)", err.msg);
    ck_assert_msg(!strstr(err.msg, "built without CUDA") && !strstr(err.msg, "neither"), "%s",
                  err.msg);
    if (st == LLMRT_OK)
        at_awq()->destroy(q);
#else
    ck_assert_int_eq(st, LLMRT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "quant-awq was built without CUDA") && strstr(err.msg, "'gpu'"),
                  "message: %s", err.msg);
    ck_assert_int_eq(fake.cuda_calls, 0);
    /* host-addressable memory as well: the CPU kernels */
    fake.caps_mask = 0;
    ck_assert_int_eq(at_awq()->create(&log_host, NULL, at_config(128), &be, &q, &err), LLMRT_OK);
    ck_assert_msg(strstr(last_log, "CPU"), "%s", last_log);
    check_forward(q, "cuda extension and host memory, no CUDA build", 0);
    at_awq()->destroy(q);
#endif
    (void)st;
    fake.caps_mask = 0;
    fake.offer_cuda = 0;
    cpu.vt->destroy(cpu.b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant-awq");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, probe_accepts_awq_gemm);
    tcase_add_test(tc, probe_rejects_unsupported_awq);
    tcase_add_test(tc, probe_compressed_tensors_and_others);
    tcase_add_test(tc, dequant_equals_source_weights);
    tcase_add_test(tc, forward_matches_reference);
    tcase_add_test(tc, int8_paths_within_bound);
    tcase_add_test(tc, malformed_tensors_named);
    tcase_add_test(tc, create_checks_section);
    tcase_add_test(tc, refuses_backend_without_kernels);
    tcase_add_test(tc, cpu_kernels_on_backend_cpu);
    tcase_add_test(tc, cpu_kernels_follow_llmrt_cpu_simd);
    tcase_add_test(tc, cuda_extension_chooses_cuda_kernels);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
