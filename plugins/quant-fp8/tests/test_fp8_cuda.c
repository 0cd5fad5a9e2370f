/* test_fp8_cuda.c — quant-fp8's CUDA kernels against its CPU kernels (ctest quant-fp8.cuda;
 * exits 77 when no CUDA device is visible). The same linear is loaded on backend-cuda and on
 * backend-cpu through the plugin, and every CUDA path is compared with the CPU path of the
 * same semantics, on shapes with partial blocks (in, out not multiples of 128; in not a
 * multiple of 4) and n = 1..8, 16, 17, 32, 33, 128 rows:
 *   dequant     the repacked device layout dequantizes to exactly the CPU's weights
 *   w8a16       the tensor-core GEMV (n <= 16 by default; x rounded to f16): relative L2
 *               <= 2e-3; dequantization to f16 + the backend's gemm (above): <= 3e-3
 *   w8a8        the GEMV (n <= 16) and the FP8 tensor-core GEMM (above, sm_89+) quantize the
 *               activations to the CPU's e4m3 codes bit for bit, so only the accumulation
 *               differs: <= 1e-3 (the FP8 MMA's accumulator keeps fewer bits than f32)
 *   sm_86 paths tune mma=0 (W8A8 above 16 rows through the GEMV), kw=1/2/16, and the GEMV
 *               serving 8 or 32 rows (gemv_rows), x read from global memory with a block per
 *               row block (sx=0,pers=0)
 *   defaults    the decode GEMV's staged x and one-wave grid == x from global memory and a
 *               block per row block (sx=0, pers=0), bit for bit, plain and SwiGLU
 *   auto        activations = auto is exactly W8A16 below w8a8_min_rows and W8A8 from it on
 *               FP8 tensor cores (W8A16 without them)
 *   swiglu      linear_forward_fused on [gate; up] equals forward + silu * up (twice the
 *               linear's tolerance: gate and up both carry it)
 *   fused       q/k/v loaded as one: rows equal to the separate linears' (1e-5: another K split)
 *   graph       a captured forward replays bit for bit
 *   unaligned   x not 16-byte aligned gives the aligned result
 * The backend must offer the "llmrt.cuda" extension (llmrt/cuda.h): a device without it is a
 * failure here, not a skip. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_config.h"
#include "fp8_test_common.h"
#include "mock_backend.h"
#include "test_util.h"

#define TOL_W8A16 2e-3
#define TOL_W8A16_PREFILL 3e-3
#define TOL_W8A8 1e-3

static llmrt_backend_ref CUDA, CPU;
static llmrt_device_info INFO;
static llmrt_host HOST;

static void *dalloc(size_t bytes)
{
    void *p = NULL;
    llmrt_error err = {0};
    ck_assert_msg(CUDA.vt->dev_alloc(CUDA.b, bytes ? bytes : 16, &p, &err) == LLMRT_OK, "%s",
                  err.msg);
    return p;
}

static void copy(void *dst, const void *src, size_t bytes, llmrt_copy_kind kind)
{
    llmrt_error err = {0};
    ck_assert_msg(CUDA.vt->copy(CUDA.b, dst, src, bytes, kind, &err) == LLMRT_OK, "%s", err.msg);
    ck_assert_msg(CUDA.vt->synchronize(CUDA.b, &err) == LLMRT_OK, "%s", err.msg);
}

static void poison(float *d, size_t n)
{
    float *h = malloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++)
        h[i] = NAN;
    copy(d, h, n * sizeof(float), LLMRT_COPY_H2D);
    free(h);
}

/* [quant.fp8] tune for the instances quant_on makes ("" = the built-in choices). */
static const char *TUNE = "";

static llmrt_quant *quant_on(const llmrt_backend_ref *be, const char *act)
{
    const char *keys[] = {"tune", "activations"}, *vals[] = {TUNE, act};
    const char *where[] = {"test", "test"};
    llmrt_section sec = {"quant.fp8", act ? 2 : 1, keys, vals, where};
    llmrt_quant *q = NULL;
    llmrt_error err = {0};
    ck_assert_msg(ft_fp8()->create(&HOST, &sec, FT_QWEN_CONFIG, be, &q, &err) == LLMRT_OK,
                  "quant-fp8 on %s: %s", be->name, err.msg);
    return q;
}

static llmrt_qlinear *load(llmrt_quant *q, ft_ckpt *ck, const char *prefix, int64_t in,
                           int64_t out)
{
    llmrt_qlinear *l = NULL;
    llmrt_error err = {0};
    ck_assert_msg(ft_fp8()->linear_load(q, ft_ckpt_view(ck), prefix, in, out, &l, &err) == LLMRT_OK,
                  "%s", err.msg);
    return l;
}

/* y [n, out] on the GPU (x from the host, offset floats into the device buffer). */
static void cuda_forward(llmrt_quant *q, const llmrt_qlinear *l, const float *x, int32_t n,
                         int64_t in, int64_t out, size_t offset, float *y)
{
    float *dx = dalloc(((size_t)(n * in) + offset) * sizeof(float));
    float *dy = dalloc((size_t)(n * out) * sizeof(float));
    copy(dx + offset, x, (size_t)(n * in) * sizeof(float), LLMRT_COPY_H2D);
    for (int rep = 0; rep < 2; rep++) { /* nothing left over from a previous call */
        poison(dy, (size_t)(n * out));
        llmrt_error err = {0};
        ck_assert_msg(ft_fp8()->linear_forward(q, l, dy, dx + offset, n, &err) == LLMRT_OK, "%s",
                      err.msg);
        copy(y, dy, (size_t)(n * out) * sizeof(float), LLMRT_COPY_D2H);
    }
    CUDA.vt->dev_free(CUDA.b, dx);
    CUDA.vt->dev_free(CUDA.b, dy);
}

static void cpu_forward(llmrt_quant *q, const llmrt_qlinear *l, const float *x, int32_t n,
                        int64_t out, float *y)
{
    llmrt_error err = {0};
    for (int64_t i = 0; i < n * out; i++)
        y[i] = NAN;
    ck_assert_msg(ft_fp8()->linear_forward(q, l, y, x, n, &err) == LLMRT_OK, "%s", err.msg);
}

static double rel_l2(const float *a, const float *ref, size_t n, size_t *bad)
{
    double num = 0, den = 0;
    *bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) {
            (*bad)++;
            continue;
        }
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void assert_close(const float *a, const float *ref, size_t n, double tol, const char *what)
{
    size_t bad;
    double e = rel_l2(a, ref, n, &bad);
    ck_assert_msg(bad == 0, "%s: %zu of %zu outputs are not finite (unwritten?)", what, bad, n);
    ck_assert_msg(e <= tol, "%s: relative error %.3g > %.3g (y[0] %.7g vs %.7g)", what, e, tol,
                  (double)a[0], (double)ref[0]);
}

/* ---- every path against the CPU ---- */

static const int64_t shapes[][2] = {
    /* in, out */
    {4096, 4096}, /* Qwen3-8B q/o_proj */
    {4096, 1024}, /* k/v_proj: few rows, the GEMV splits K */
    {12288, 512}, /* down_proj-like: long K */
    {320, 192},   /* partial blocks both ways */
    {200, 72},    /* in not a multiple of 4 or 16 */
    {1000, 136},
    {128, 8},
};
static const int32_t ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 17, 32, 33, 128};

START_TEST(test_vs_cpu)
{
    TUNE = ""; /* the built-in choices */
    const int64_t in = shapes[_i][0], out = shapes[_i][1];
    ft_linear src = ft_linear_random(in, out, _i % 2 ? LLMRT_DTYPE_BF16 : LLMRT_DTYPE_F32,
                                     100 + (uint64_t)_i);
    ft_ckpt *ck = ft_ckpt_new();
    ft_linear_add(ck, "p", &src);
    const char *modes[2] = {"w8a16", "w8a8"};
    ft_rng r = {200 + (uint64_t)_i};
    float *w = malloc((size_t)(in * out) * sizeof(float));
    for (int m = 0; m < 2; m++) {
        llmrt_quant *qg = quant_on(&CUDA, modes[m]), *qc = quant_on(&CPU, modes[m]);
        llmrt_qlinear *lg = load(qg, ck, "p", in, out), *lc = load(qc, ck, "p", in, out);
        if (m == 0) {
            llmrt_error err = {0};
            ck_assert_msg(ft_fp8()->linear_dequant(qg, lg, w, &err) == LLMRT_OK, "%s", err.msg);
            for (int64_t i = 0; i < in * out; i++)
                ck_assert_msg(w[i] == src.w[i], "[%lld, %lld] dequant at [%lld, %lld]: %g vs %g",
                              (long long)out, (long long)in, (long long)(i / in),
                              (long long)(i % in), (double)w[i], (double)src.w[i]);
            ck_assert_uint_ge(ft_fp8()->linear_bytes(qg, lg), (uint64_t)(in * out));
        }
        for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
            const int32_t n = ns[k];
            float *x = ft_activations(&r, n, in);
            float *yg = malloc((size_t)(n * out) * sizeof(float)), *yc = malloc((size_t)(n * out) * sizeof(float));
            cuda_forward(qg, lg, x, n, in, out, 0, yg);
            cpu_forward(qc, lc, x, n, out, yc);
            char what[160];
            snprintf(what, sizeof what, "%s [%lld, %lld] n=%d on %s", modes[m], (long long)out,
                     (long long)in, n, INFO.name);
            const double tol = m ? TOL_W8A8 : n > FP8_GEMV_ROWS ? TOL_W8A16_PREFILL : TOL_W8A16;
            assert_close(yg, yc, (size_t)(n * out), tol, what);
            if (n == 3 || n == 128) { /* x not 16-byte aligned */
                float *yu = malloc((size_t)(n * out) * sizeof(float));
                cuda_forward(qg, lg, x, n, in, out, 1, yu);
                ck_assert_msg(memcmp(yu, yg, (size_t)(n * out) * sizeof(float)) == 0 ||
                                  rel_l2(yu, yg, (size_t)(n * out), &(size_t){0}) <= 1e-6,
                              "%s: x at an unaligned address gives another result", what);
                free(yu);
            }
            free(x), free(yg), free(yc);
        }
        ft_fp8()->linear_free(qg, lg);
        ft_fp8()->linear_free(qc, lc);
        ft_fp8()->destroy(qg);
        ft_fp8()->destroy(qc);
    }
    free(w);
    ft_ckpt_free(ck);
    ft_linear_free(&src);
}
END_TEST

/* The paths a device without FP8 tensor cores takes, and forced GEMV splits. */
START_TEST(test_tune_paths)
{
    static const char *const tunes[] = {"mma=0", "kw=1", "kw=2", "kw=16", "gemv_rows=8",
                                        "gemv_rows=32", "mma=0,gemv_rows=32", "sx=0,pers=0"};
    const int64_t in = 1000, out = 264;
    ft_linear src = ft_linear_random(in, out, LLMRT_DTYPE_F32, 7);
    ft_ckpt *ck = ft_ckpt_new();
    ft_linear_add(ck, "p", &src);
    ft_rng r = {8};
    for (size_t t = 0; t < sizeof tunes / sizeof *tunes; t++) {
        TUNE = tunes[t];
        for (int m = 0; m < 2; m++) {
            const char *mode = m ? "w8a8" : "w8a16";
            llmrt_quant *qg = quant_on(&CUDA, mode), *qc = quant_on(&CPU, mode);
            llmrt_qlinear *lg = load(qg, ck, "p", in, out), *lc = load(qc, ck, "p", in, out);
            const int32_t tn[] = {1, 8, 9, 16, 17, 32, 33, 77};
            for (int k = 0; k < 8; k++) {
                const int32_t n = tn[k];
                float *x = ft_activations(&r, n, in);
                float *yg = malloc((size_t)(n * out) * sizeof(float)), *yc = malloc((size_t)(n * out) * sizeof(float));
                cuda_forward(qg, lg, x, n, in, out, 0, yg);
                cpu_forward(qc, lc, x, n, out, yc);
                char what[160];
                snprintf(what, sizeof what, "tune=%s %s n=%d", tunes[t], mode, n);
                assert_close(yg, yc, (size_t)(n * out),
                             m ? TOL_W8A8 : n > 8 ? TOL_W8A16_PREFILL : TOL_W8A16, what);
                free(x), free(yg), free(yc);
            }
            ft_fp8()->linear_free(qg, lg);
            ft_fp8()->linear_free(qc, lc);
            ft_fp8()->destroy(qg);
            ft_fp8()->destroy(qc);
        }
    }
    TUNE = "";
    ft_ckpt_free(ck);
    ft_linear_free(&src);
}
END_TEST

/* The decode GEMV's defaults — x staged in shared memory, a grid of one wave walking the row
 * blocks (n <= 8) — give the same bits as x read from global memory (tune sx=0) and one block
 * per row block (pers=0): the same f16 values or e4m3 codes and scales, the same sums in the
 * same order — plain and SwiGLU, aligned and not, in a multiple of 128 and not, with more row
 * blocks than a wave holds. */
static void swiglu_forward(llmrt_quant *q, const llmrt_qlinear *g, const float *x, int32_t n,
                           int64_t in, int64_t half, float *y)
{
    float *dx = dalloc((size_t)(n * in) * 4), *dy = dalloc((size_t)(n * half) * 4);
    copy(dx, x, (size_t)(n * in) * 4, LLMRT_COPY_H2D);
    poison(dy, (size_t)(n * half));
    llmrt_error err = {0};
    ck_assert_msg(ft_fp8()->linear_forward_fused(q, g, dy, dx, n, LLMRT_FUSE_OUT_SWIGLU, &err) ==
                      LLMRT_OK,
                  "%s", err.msg);
    copy(y, dy, (size_t)(n * half) * 4, LLMRT_COPY_D2H);
    CUDA.vt->dev_free(CUDA.b, dx), CUDA.vt->dev_free(CUDA.b, dy);
}

START_TEST(test_gemv_defaults)
{
    static const int64_t sh[][2] = {{4096, 8192}, {12288, 256}, {1000, 264}, {200, 72}};
    static const char *const variants[] = {"", "sx=0", "pers=0", "sx=0,pers=0"};
    enum { NV = sizeof variants / sizeof *variants };
    const char *gu_names[2] = {"gate", "up"};
    for (size_t si = 0; si < sizeof sh / sizeof *sh; si++) {
        const int64_t in = sh[si][0], out = sh[si][1], gu[2] = {out, out};
        ft_ckpt *ck = ft_ckpt_new();
        ft_linear src = ft_linear_random(in, out, LLMRT_DTYPE_F32, 30 + (uint64_t)si);
        ft_linear gate = ft_linear_random(in, out, LLMRT_DTYPE_F32, 40 + (uint64_t)si);
        ft_linear up = ft_linear_random(in, out, LLMRT_DTYPE_F32, 50 + (uint64_t)si);
        ft_linear_add(ck, "p", &src);
        ft_linear_add(ck, "gate", &gate);
        ft_linear_add(ck, "up", &up);
        ft_rng r = {60 + (uint64_t)si};
        for (int m = 0; m < 2; m++) {
            const char *mode = m ? "w8a8" : "w8a16";
            llmrt_quant *q[NV];
            llmrt_qlinear *l[NV], *g[NV];
            for (int v = 0; v < NV; v++) {
                TUNE = variants[v];
                q[v] = quant_on(&CUDA, mode);
                l[v] = load(q[v], ck, "p", in, out);
                g[v] = NULL; /* [gate; up] fuses where its parts are whole 128-row blocks */
                llmrt_error err = {0};
                if (out % 128 == 0)
                    ck_assert_msg(ft_fp8()->linear_load_fused(q[v], ft_ckpt_view(ck), gu_names, 2,
                                                              in, gu, &g[v], &err) == LLMRT_OK,
                                  "%s", err.msg);
            }
            TUNE = "";
            const int32_t glu_rows =
                g[0] ? ft_fp8()->linear_fused_max_rows(q[0], g[0], LLMRT_FUSE_OUT_SWIGLU) : 0;
            ck_assert_int_eq(glu_rows, g[0] ? 8 : 0);
            for (int32_t n = 1; n <= 8; n++) {
                float *x = ft_activations(&r, n, in);
                float *y[NV], *ys[NV];
                for (int v = 0; v < NV; v++) {
                    y[v] = malloc((size_t)(n * out) * 4);
                    ys[v] = malloc((size_t)(n * out) * 4);
                    cuda_forward(q[v], l[v], x, n, in, out, n == 3, y[v]);
                    if (n <= glu_rows)
                        swiglu_forward(q[v], g[v], x, n, in, out, ys[v]);
                    else
                        memset(ys[v], 0, (size_t)(n * out) * 4);
                }
                for (int v = 1; v < NV; v++)
                    for (int64_t i = 0; i < n * out; i++) {
                        ck_assert_msg(memcmp(&y[0][i], &y[v][i], 4) == 0,
                                      "%s [%lld, %lld] n=%d: the default gives %.9g at %lld, "
                                      "tune %s %.9g",
                                      mode, (long long)out, (long long)in, n, (double)y[0][i],
                                      (long long)i, variants[v], (double)y[v][i]);
                        ck_assert_msg(memcmp(&ys[0][i], &ys[v][i], 4) == 0,
                                      "%s SwiGLU [%lld, %lld] n=%d: the default gives %.9g at "
                                      "%lld, tune %s %.9g",
                                      mode, (long long)out, (long long)in, n, (double)ys[0][i],
                                      (long long)i, variants[v], (double)ys[v][i]);
                    }
                for (int v = 0; v < NV; v++)
                    free(y[v]), free(ys[v]);
                free(x);
            }
            for (int v = 0; v < NV; v++) {
                ft_fp8()->linear_free(q[v], l[v]);
                if (g[v])
                    ft_fp8()->linear_free(q[v], g[v]);
                ft_fp8()->destroy(q[v]);
            }
        }
        ft_linear_free(&src), ft_linear_free(&gate), ft_linear_free(&up);
        ft_ckpt_free(ck);
    }
}
END_TEST

/* activations = auto: exactly one of the two semantics at each row count. */
START_TEST(test_auto_policy)
{
    TUNE = ""; /* the built-in choices */
    const int64_t in = 512, out = 384;
    ft_linear src = ft_linear_random(in, out, LLMRT_DTYPE_BF16, 9);
    ft_ckpt *ck = ft_ckpt_new();
    ft_linear_add(ck, "p", &src);
    llmrt_quant *qa = quant_on(&CUDA, "auto"), *q16 = quant_on(&CUDA, "w8a16"),
                *q8 = quant_on(&CUDA, "w8a8");
    llmrt_qlinear *la = load(qa, ck, "p", in, out), *l16 = load(q16, ck, "p", in, out),
                  *l8 = load(q8, ck, "p", in, out);
    const int fp8_mma = INFO.cc_major * 10 + INFO.cc_minor >= 89;
    const int min_rows = atoi(llmrt_key_value(NULL, ft_fp8_desc()->keys, ft_fp8_desc()->n_keys,
                                              "w8a8_min_rows"));
    ft_rng r = {10};
    const int32_t tn[] = {1, 8, 9, 16, 17, 32, 33, 128};
    for (int k = 0; k < 8; k++) {
        const int32_t n = tn[k];
        float *x = ft_activations(&r, n, in);
        float *ya = malloc((size_t)(n * out) * 4), *yw = malloc((size_t)(n * out) * 4);
        cuda_forward(qa, la, x, n, in, out, 0, ya);
        const int w8a8 = fp8_mma && n >= min_rows;
        cuda_forward(w8a8 ? q8 : q16, w8a8 ? l8 : l16, x, n, in, out, 0, yw);
        ck_assert_msg(memcmp(ya, yw, (size_t)(n * out) * 4) == 0,
                      "activations = auto at n = %d on %s (cc %d.%d) is not %s", n, INFO.name,
                      INFO.cc_major, INFO.cc_minor, w8a8 ? "W8A8" : "W8A16");
        free(x), free(ya), free(yw);
    }
    ft_fp8()->linear_free(qa, la), ft_fp8()->linear_free(q16, l16), ft_fp8()->linear_free(q8, l8);
    ft_fp8()->destroy(qa), ft_fp8()->destroy(q16), ft_fp8()->destroy(q8);
    ft_ckpt_free(ck);
    ft_linear_free(&src);
}
END_TEST

/* q/k/v as one linear, and [gate; up] with SwiGLU folded into the GEMV. */
START_TEST(test_fused)
{
    TUNE = ""; /* the built-in choices */
    const int64_t in = 640;
    const int64_t qkv[3] = {512, 128, 128}, gu[2] = {384, 384};
    const char *qkv_names[3] = {"q", "k", "v"}, *gu_names[2] = {"gate", "up"};
    ft_ckpt *ck = ft_ckpt_new();
    ft_linear parts[5];
    for (int p = 0; p < 5; p++) {
        parts[p] = ft_linear_random(in, p < 3 ? qkv[p] : gu[p - 3], LLMRT_DTYPE_F32, 20 + (uint64_t)p);
        ft_linear_add(ck, p < 3 ? qkv_names[p] : gu_names[p - 3], &parts[p]);
    }
    ft_rng r = {21};
    for (int m = 0; m < 2; m++) {
        const char *mode = m ? "w8a8" : "w8a16";
        llmrt_quant *q = quant_on(&CUDA, mode), *qc = quant_on(&CPU, mode);
        llmrt_error err = {0};
        llmrt_qlinear *f = NULL, *g = NULL, *gc = NULL;
        ck_assert_msg(ft_fp8()->linear_load_fused(q, ft_ckpt_view(ck), qkv_names, 3, in, qkv, &f,
                                                  &err) == LLMRT_OK,
                      "%s", err.msg);
        ck_assert_msg(ft_fp8()->linear_load_fused(q, ft_ckpt_view(ck), gu_names, 2, in, gu, &g,
                                                  &err) == LLMRT_OK,
                      "%s", err.msg);
        ck_assert_msg(ft_fp8()->linear_load_fused(qc, ft_ckpt_view(ck), gu_names, 2, in, gu, &gc,
                                                  &err) == LLMRT_OK,
                      "%s", err.msg);
        for (int32_t n = 1; n <= 33; n += n < 8 ? 1 : 25) {
            float *x = ft_activations(&r, n, in);
            /* q/k/v: each part's rows of the fused output equal the part alone */
            float *yf = malloc((size_t)(n * 768) * 4);
            cuda_forward(q, f, x, n, in, 768, 0, yf);
            int64_t row0 = 0;
            for (int p = 0; p < 3; p++) {
                llmrt_qlinear *l = load(q, ck, qkv_names[p], in, qkv[p]);
                float *yp = malloc((size_t)(n * qkv[p]) * 4);
                cuda_forward(q, l, x, n, in, qkv[p], 0, yp);
                float *yfp = malloc((size_t)(n * qkv[p]) * 4);
                for (int32_t t = 0; t < n; t++)
                    memcpy(yfp + t * qkv[p], yf + t * 768 + row0, (size_t)qkv[p] * 4);
                char what[96];
                snprintf(what, sizeof what, "%s fused q/k/v part %d n=%d", mode, p, n);
                assert_close(yfp, yp, (size_t)(n * qkv[p]), 1e-5, what);
                free(yp), free(yfp);
                ft_fp8()->linear_free(q, l);
                row0 += qkv[p];
            }
            free(yf);
            /* SwiGLU folded into the GEMV */
            const int32_t max_rows = ft_fp8()->linear_fused_max_rows(q, g, LLMRT_FUSE_OUT_SWIGLU);
            ck_assert_int_ge(max_rows, 8);
            if (n <= max_rows) {
                float *dx = dalloc((size_t)(n * in) * 4), *dy = dalloc((size_t)(n * 384) * 4);
                copy(dx, x, (size_t)(n * in) * 4, LLMRT_COPY_H2D);
                poison(dy, (size_t)(n * 384));
                ck_assert_msg(ft_fp8()->linear_forward_fused(q, g, dy, dx, n, LLMRT_FUSE_OUT_SWIGLU,
                                                             &err) == LLMRT_OK,
                              "%s", err.msg);
                float *ys = malloc((size_t)(n * 384) * 4), *ygu = malloc((size_t)(n * 768) * 4),
                      *ref = malloc((size_t)(n * 384) * 4);
                copy(ys, dy, (size_t)(n * 384) * 4, LLMRT_COPY_D2H);
                cpu_forward(qc, gc, x, n, 768, ygu);
                for (int32_t t = 0; t < n; t++)
                    for (int i = 0; i < 384; i++) {
                        const float gt = ygu[t * 768 + i], up = ygu[t * 768 + 384 + i];
                        ref[t * 384 + i] = gt / (1.0f + expf(-gt)) * up;
                    }
                char what[96];
                snprintf(what, sizeof what, "%s SwiGLU GEMV n=%d", mode, n);
                assert_close(ys, ref, (size_t)(n * 384), 2 * (m ? TOL_W8A8 : TOL_W8A16), what);
                free(ys), free(ygu), free(ref);
                CUDA.vt->dev_free(CUDA.b, dx), CUDA.vt->dev_free(CUDA.b, dy);
            } else {
                ck_assert_int_eq(ft_fp8()->linear_forward_fused(q, g, NULL, NULL, n,
                                                                LLMRT_FUSE_OUT_SWIGLU, &err),
                                 LLMRT_ERR_UNSUPPORTED);
            }
            free(x);
        }
        ft_fp8()->linear_free(q, f), ft_fp8()->linear_free(q, g), ft_fp8()->linear_free(qc, gc);
        ft_fp8()->destroy(q), ft_fp8()->destroy(qc);
    }
    for (int p = 0; p < 5; p++)
        ft_linear_free(&parts[p]);
    ft_ckpt_free(ck);
}
END_TEST

/* A captured forward (decode GEMV and the W8A8 GEMM with its activation quantization) replays
 * bit for bit on new inputs. */
START_TEST(test_graph)
{
    TUNE = ""; /* the built-in choices */
    if (!LLMRT_VT_HAS(CUDA.vt, llmrt_backend_vtable, graph_begin)) {
        printf("note: the backend has no graphs; test_graph not run\n");
        return;
    }
    const int64_t in = 1024, out = 512;
    ft_linear src = ft_linear_random(in, out, LLMRT_DTYPE_F32, 30);
    ft_ckpt *ck = ft_ckpt_new();
    ft_linear_add(ck, "p", &src);
    llmrt_quant *q = quant_on(&CUDA, "auto");
    llmrt_qlinear *l = load(q, ck, "p", in, out);
    ft_rng r = {31};
    const int32_t tn[] = {2, 128};
    for (int k = 0; k < 2; k++) {
        const int32_t n = tn[k];
        float *dx = dalloc((size_t)(n * in) * 4), *dy = dalloc((size_t)(n * out) * 4);
        float *ye = malloc((size_t)(n * out) * 4), *yg = malloc((size_t)(n * out) * 4);
        float *x = ft_activations(&r, n, in);
        copy(dx, x, (size_t)(n * in) * 4, LLMRT_COPY_H2D);
        llmrt_error err = {0};
        ck_assert_int_eq(ft_fp8()->linear_forward(q, l, dy, dx, n, &err), LLMRT_OK); /* warm-up */
        ck_assert_int_eq(CUDA.vt->synchronize(CUDA.b, &err), LLMRT_OK);
        llmrt_graph *g = NULL;
        ck_assert_msg(CUDA.vt->graph_begin(CUDA.b, &err) == LLMRT_OK, "%s", err.msg);
        ck_assert_msg(ft_fp8()->linear_forward(q, l, dy, dx, n, &err) == LLMRT_OK, "%s", err.msg);
        ck_assert_msg(CUDA.vt->graph_end(CUDA.b, &g, &err) == LLMRT_OK, "%s", err.msg);
        for (int it = 0; it < 3; it++) {
            free(x);
            x = ft_activations(&r, n, in);
            copy(dx, x, (size_t)(n * in) * 4, LLMRT_COPY_H2D);
            poison(dy, (size_t)(n * out));
            ck_assert_int_eq(ft_fp8()->linear_forward(q, l, dy, dx, n, &err), LLMRT_OK);
            copy(ye, dy, (size_t)(n * out) * 4, LLMRT_COPY_D2H);
            poison(dy, (size_t)(n * out));
            ck_assert_msg(CUDA.vt->graph_launch(CUDA.b, g, &err) == LLMRT_OK, "%s", err.msg);
            copy(yg, dy, (size_t)(n * out) * 4, LLMRT_COPY_D2H);
            ck_assert_msg(memcmp(ye, yg, (size_t)(n * out) * 4) == 0,
                          "n = %d: graph replay differs from the eager forward", n);
        }
        CUDA.vt->graph_destroy(CUDA.b, g);
        free(x), free(ye), free(yg);
        CUDA.vt->dev_free(CUDA.b, dx), CUDA.vt->dev_free(CUDA.b, dy);
    }
    ft_fp8()->linear_free(q, l);
    ft_fp8()->destroy(q);
    ft_ckpt_free(ck);
    ft_linear_free(&src);
}
END_TEST

/* A NaN code is found on the device path too. */
START_TEST(test_nan_refused)
{
    TUNE = ""; /* the built-in choices */
    ft_linear src = ft_linear_random(256, 256, LLMRT_DTYPE_F32, 40);
    src.codes[200 * 256 + 3] = 0x7f;
    ft_ckpt *ck = ft_ckpt_new();
    ft_linear_add(ck, "m.proj", &src);
    llmrt_quant *q = quant_on(&CUDA, NULL);
    llmrt_qlinear *l = NULL;
    llmrt_error err = {0};
    ck_assert_int_eq(ft_fp8()->linear_load(q, ft_ckpt_view(ck), "m.proj", 256, 256, &l, &err),
                     LLMRT_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "m.proj.weight") && strstr(err.msg, "[200, 3]"), "%s", err.msg);
    ck_assert_ptr_null(l);
    ft_fp8()->destroy(q);
    ft_ckpt_free(ck);
    ft_linear_free(&src);
}
END_TEST

int main(void)
{
    HOST = mock_host(NULL);
    char *path = tu_plugin_path("backend-cuda.so");
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    if (!d) {
        printf("SKIP: %s is not built (no CUDA toolkit)\n", path);
        free(path);
        return 77;
    }
    free(path);
    CUDA.vt = d->vtable;
    CUDA.name = "cuda";
    int32_t count = 0;
    llmrt_error err = {0};
    if (CUDA.vt->probe(&INFO, 1, &count, &err) != LLMRT_OK || count == 0) {
        printf("SKIP: no CUDA device visible (%s)\n", err.msg);
        return 77;
    }
    if (CUDA.vt->create(&HOST, NULL, &CUDA.b, &err) != LLMRT_OK) {
        fprintf(stderr, "creating the CUDA backend failed: %s\n", err.msg);
        return 1;
    }
    if (!llmrt_backend_extension(CUDA.vt, CUDA.b, "llmrt.cuda", 1)) {
        fprintf(stderr, "FAIL: backend-cuda offers no \"llmrt.cuda\" extension (llmrt/cuda.h), "
                        "which quant-fp8 chooses its CUDA kernels by\n");
        return 1;
    }
    printf("device: %s (cc %d.%d)\n", INFO.name, INFO.cc_major, INFO.cc_minor);
    CPU = ft_cpu_backend(0, "exact"); /* the reference: backend-cpu's exact path */
    Suite *s = suite_create("quant-fp8 cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, test_vs_cpu, 0, (int)(sizeof shapes / sizeof *shapes));
    tcase_add_test(tc, test_tune_paths);
    tcase_add_test(tc, test_gemv_defaults);
    tcase_add_test(tc, test_auto_policy);
    tcase_add_test(tc, test_fused);
    tcase_add_test(tc, test_graph);
    tcase_add_test(tc, test_nan_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK); /* CUDA does not survive fork() */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    CPU.vt->destroy(CPU.b);
    CUDA.vt->destroy(CUDA.b);
    return failed ? 1 : 0;
}
