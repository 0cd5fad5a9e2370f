/* test_fp8_cpu.c — quant-fp8 on the CPU backend (ctest quant-fp8.cpu):
 *   probe      accepts Qwen's quantization_config and its defaults; refuses other fmt,
 *              activation_scheme and block sizes naming the field; not ours: NOT_FOUND
 *   keys       the descriptor's key table; create validates [quant.fp8] naming key and place;
 *              a backend with neither llmrt.cuda nor host-addressable memory is refused
 *   dequant    loads dequantize to exactly e4m3 * scale (F32 and BF16 scales, partial blocks)
 *   w8a16      the kernel equals linear_dequant + backend-cpu's dense gemm bit for bit, for
 *              n = 1..70 rows, on 1 and 2 threads, AVX2 and baseline, a row alone as in a batch
 *   w8a8       equals a double-precision reference of the dynamic-activation semantics, and is
 *              not W8A16; activations = auto on the CPU is W8A16
 *   fused      q/k/v loaded as one equal the separate loads; refusals of unfusable parts
 *   malformed  every malformed linear fails naming the tensor and what was expected */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_test_common.h"
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
    llmrt_status st = ft_fp8()->probe(json, &err);
    ck_assert_msg(st == want, "probe(%s) = %d (%s), want %d", json, st, err.msg, want);
    for (int i = 0; needles && needles[i]; i++)
        ck_assert_msg(strstr(err.msg, needles[i]) != NULL, "probe(%s): message '%s' lacks '%s'",
                      json, err.msg, needles[i]);
}

START_TEST(probe_accepts)
{
    expect_probe(FT_QWEN_CONFIG, LLMRT_OK, NULL);
    /* FineGrainedFP8Config's defaults: fmt e4m3, activation_scheme dynamic */
    expect_probe("{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}", LLMRT_OK, NULL);
    expect_probe("{\"quant_method\": \"FP8\", \"fmt\": \"E4M3\", \"activation_scheme\": "
                 "\"Dynamic\", \"weight_block_size\": [128, 128], \"modules_to_not_convert\": "
                 "[\"lm_head\", \"model.layers.0.mlp.gate\"]}",
                 LLMRT_OK, NULL);
    expect_probe("{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128], "
                 "\"ignored_layers\": [\"lm_head\"], \"modules_to_not_convert\": null}",
                 LLMRT_OK, NULL);
}
END_TEST

START_TEST(probe_refusals)
{
    const char *e5[] = {"fmt = \"e5m2\"", "fmt = \"e4m3\"", NULL};
    expect_probe("{\"quant_method\": \"fp8\", \"fmt\": \"e5m2\", \"weight_block_size\": [128, 128]}",
                 LLMRT_ERR_UNSUPPORTED, e5);
    const char *st[] = {"activation_scheme = \"static\"", "\"dynamic\"", NULL};
    expect_probe("{\"quant_method\": \"fp8\", \"activation_scheme\": \"static\", "
                 "\"weight_block_size\": [128, 128]}",
                 LLMRT_ERR_UNSUPPORTED, st);
    const char *b64[] = {"weight_block_size = [64, 64]", "[128, 128]", NULL};
    expect_probe("{\"quant_method\": \"fp8\", \"weight_block_size\": [64, 64]}",
                 LLMRT_ERR_UNSUPPORTED, b64);
    const char *b128_64[] = {"weight_block_size = [128, 64]", NULL};
    expect_probe("{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 64]}",
                 LLMRT_ERR_UNSUPPORTED, b128_64);
    const char *bnull[] = {"weight_block_size is null", "per-tensor", NULL};
    expect_probe("{\"quant_method\": \"fp8\", \"weight_block_size\": null}", LLMRT_ERR_UNSUPPORTED,
                 bnull);
    const char *babsent[] = {"weight_block_size is absent", NULL};
    expect_probe("{\"quant_method\": \"fp8\", \"activation_scheme\": \"dynamic\"}",
                 LLMRT_ERR_UNSUPPORTED, babsent);
    const char *bform[] = {"weight_block_size must be [rows, columns]", NULL};
    expect_probe("{\"quant_method\": \"fp8\", \"weight_block_size\": 128}", LLMRT_ERR_FORMAT, bform);
    expect_probe("{\"quant_method\": \"fp8\", \"weight_block_size\": [128]}", LLMRT_ERR_FORMAT, bform);
    expect_probe("{\"quant_method\": \"fp8\", \"weight_block_size\": [128, \"128\"]}",
                 LLMRT_ERR_FORMAT, bform);
    const char *fform[] = {"fmt must be a string", NULL};
    expect_probe("{\"quant_method\": \"fp8\", \"fmt\": 3, \"weight_block_size\": [128, 128]}",
                 LLMRT_ERR_FORMAT, fform);
    const char *mform[] = {"modules_to_not_convert must be a list", NULL};
    expect_probe("{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128], "
                 "\"modules_to_not_convert\": \"lm_head\"}",
                 LLMRT_ERR_FORMAT, mform);
    /* not this format */
    expect_probe("{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": 128}", LLMRT_ERR_NOT_FOUND,
                 NULL);
    expect_probe("{\"quant_method\": \"compressed-tensors\", \"format\": \"float-quantized\"}",
                 LLMRT_ERR_NOT_FOUND, NULL);
    expect_probe("{\"quant_method\": \"fbgemm_fp8\"}", LLMRT_ERR_NOT_FOUND, NULL);
    expect_probe("{}", LLMRT_ERR_NOT_FOUND, NULL);
    expect_probe("[1, 2]", LLMRT_ERR_NOT_FOUND, NULL);
    expect_probe("{\"quant_method\": ", LLMRT_ERR_FORMAT, NULL);
}
END_TEST

/* ---- key table and create ---- */

START_TEST(key_table)
{
    const llmrt_plugin_desc *d = ft_fp8_desc();
    ck_assert_str_eq(d->name, "fp8");
    ck_assert_uint_eq(d->n_keys, 3);
    ck_assert_str_eq(d->keys[0].name, "activations");
    ck_assert_int_eq(d->keys[0].type, LLMRT_KEY_ENUM);
    ck_assert_str_eq(d->keys[0].def, "auto");
    ck_assert_str_eq(d->keys[0].allowed, "auto|w8a16|w8a8");
    ck_assert_uint_eq(d->keys[0].flags & LLMRT_KEY_DEVELOPER, 0);
    ck_assert_str_eq(d->keys[1].name, "w8a8_min_rows");
    ck_assert_int_eq(d->keys[1].type, LLMRT_KEY_INT);
    ck_assert_uint_ne(d->keys[1].flags & LLMRT_KEY_DEVELOPER, 0);
    ck_assert_str_eq(llmrt_key_value(NULL, d->keys, d->n_keys, "w8a8_min_rows"), "17");
    ck_assert_str_eq(d->keys[2].name, "tune");
    ck_assert_int_eq(d->keys[2].type, LLMRT_KEY_STRING);
    ck_assert_uint_ne(d->keys[2].flags & LLMRT_KEY_DEVELOPER, 0);
    ck_assert_str_eq(llmrt_key_value(NULL, d->keys, d->n_keys, "tune"), "");
}
END_TEST

static llmrt_status try_create(const llmrt_backend_ref *be, const char *key, const char *val,
                               llmrt_error *err)
{
    const char *keys[] = {key}, *vals[] = {val}, *where[] = {"conf/x.ini:9"};
    llmrt_section sec = {"quant.fp8", key ? 1 : 0, keys, vals, where};
    llmrt_quant *q = NULL;
    llmrt_status st = ft_fp8()->create(NULL, &sec, FT_QWEN_CONFIG, be, &q, err);
    if (st == LLMRT_OK)
        ft_fp8()->destroy(q);
    else
        ck_assert_ptr_null(q);
    return st;
}

/* A CPU backend that claims the llmrt.cuda extension (a stand-in table) and no host memory. */
#ifndef FP8_TEST_HAVE_CUDA
static llmrt_backend_vtable fake_cuda_vt;
#endif
static struct {
    uint32_t struct_size;
    void *fn[3];
} fake_cuda_ext = {sizeof fake_cuda_ext, {NULL, NULL, NULL}};
static const void *fake_extension(llmrt_backend *b, const char *name, uint32_t version)
{
    return strcmp(name, "llmrt.cuda") == 0 ? &fake_cuda_ext : NULL;
}
static uint32_t fake_caps(llmrt_backend *b) { return LLMRT_BACKEND_CAP_ASYNC; }

START_TEST(create_checks)
{
    llmrt_backend_ref be = ft_cpu_backend(1, "auto");
    llmrt_error err = {0};
    ck_assert_int_eq(try_create(&be, NULL, NULL, &err), LLMRT_OK);
    ck_assert_int_eq(try_create(&be, "activations", "w8a8", &err), LLMRT_OK);
    ck_assert_int_eq(try_create(&be, "activations", "w8a16", &err), LLMRT_OK);
    ck_assert_int_eq(try_create(&be, "w8a8_min_rows", "1", &err), LLMRT_OK);
    /* an unknown key, a bad value: the place and the key named */
    ck_assert_int_eq(try_create(&be, "kernel", "fast", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "conf/x.ini:9") && strstr(err.msg, "'kernel'") &&
                      strstr(err.msg, "activations"),
                  "%s", err.msg);
    ck_assert_int_eq(try_create(&be, "activations", "w4a8", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "conf/x.ini:9") && strstr(err.msg, "'w4a8'") &&
                      strstr(err.msg, "auto, w8a16, w8a8"),
                  "%s", err.msg);
    ck_assert_int_eq(try_create(&be, "w8a8_min_rows", "0", &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "w8a8_min_rows") && strstr(err.msg, "'0'"), "%s", err.msg);
    /* create refuses what probe refuses */
    llmrt_quant *q = NULL;
    ck_assert_int_eq(ft_fp8()->create(NULL, NULL, "{\"quant_method\": \"fp8\", \"fmt\": \"e5m2\", "
                                                  "\"weight_block_size\": [128, 128]}",
                                      &be, &q, &err),
                     LLMRT_ERR_UNSUPPORTED);
    ck_assert_ptr_null(q);
    /* the backend's name does not matter, what it offers does */
    llmrt_backend_ref renamed = {be.vt, be.b, "metal"};
    ck_assert_int_eq(try_create(&renamed, NULL, NULL, &err), LLMRT_OK);
    llmrt_backend_ref mock = mock_backend_new(-1, 1);
    ck_assert_int_eq(try_create(&mock, NULL, NULL, &err), LLMRT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "'mock'") && strstr(err.msg, "llmrt.cuda") &&
                      strstr(err.msg, "HOST_IS_DEVICE"),
                  "%s", err.msg);
    mock_backend_free(&mock);
#ifndef FP8_TEST_HAVE_CUDA
    /* built without CUDA: a backend offering llmrt.cuda is refused, naming why */
    fake_cuda_vt = *be.vt;
    fake_cuda_vt.extension = fake_extension;
    fake_cuda_vt.caps = fake_caps;
    llmrt_backend_ref cuda = {&fake_cuda_vt, be.b, "cuda"};
    ck_assert_int_eq(try_create(&cuda, NULL, NULL, &err), LLMRT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "built without CUDA") && strstr(err.msg, "'cuda'"), "%s", err.msg);
#else
    (void)fake_extension, (void)fake_caps;
#endif
    be.vt->destroy(be.b);
}
END_TEST

/* ---- loading and dequantizing ---- */

static const int64_t shapes[][2] = {
    /* in, out: partial blocks in either dimension or both, one block, many blocks */
    {128, 128}, {320, 192}, {200, 72}, {100, 9}, {384, 256}, {1000, 136}, {64, 300},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static llmrt_qlinear *load(llmrt_quant *q, ft_ckpt *ck, const char *prefix, int64_t in,
                           int64_t out)
{
    llmrt_qlinear *l = NULL;
    llmrt_error err = {0};
    ck_assert_msg(ft_fp8()->linear_load(q, ft_ckpt_view(ck), prefix, in, out, &l, &err) == LLMRT_OK,
                  "%s", err.msg);
    return l;
}

START_TEST(dequant_exact)
{
    llmrt_backend_ref be = ft_cpu_backend(2, "auto");
    llmrt_quant *q = ft_quant(&be, NULL);
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int bf = 0; bf < 2; bf++) {
            const int64_t in = shapes[s][0], out = shapes[s][1];
            ft_linear src = ft_linear_random(in, out, bf ? LLMRT_DTYPE_BF16 : LLMRT_DTYPE_F32, 10 + s);
            ft_ckpt *ck = ft_ckpt_new();
            ft_linear_add(ck, "model.layers.0.mlp.up_proj", &src);
            llmrt_qlinear *l = load(q, ck, "model.layers.0.mlp.up_proj", in, out);
            float *w = xmalloc((size_t)(in * out) * sizeof(float));
            for (int64_t i = 0; i < in * out; i++)
                w[i] = NAN;
            llmrt_error err = {0};
            ck_assert_int_eq(ft_fp8()->linear_dequant(q, l, w, &err), LLMRT_OK);
            for (int64_t i = 0; i < in * out; i++)
                ck_assert_msg(w[i] == src.w[i], "[%lld, %lld] %s scales: w[%lld][%lld] = %g, "
                              "e4m3 0x%02x * scale = %g",
                              (long long)out, (long long)in, bf ? "BF16" : "F32",
                              (long long)(i / in), (long long)(i % in), (double)w[i],
                              src.codes[i], (double)src.w[i]);
            const uint64_t bytes = ft_fp8()->linear_bytes(q, l);
            ck_assert_uint_ge(bytes, (uint64_t)(in * out + src.rb * src.kb * 4));
            ck_assert_uint_le(bytes, (uint64_t)(in * out + 16 + src.rb * src.kb * 4));
            ft_fp8()->linear_free(q, l);
            ft_ckpt_free(ck);
            ft_linear_free(&src);
            free(w);
        }
    ft_fp8()->destroy(q);
    be.vt->destroy(be.b);
}
END_TEST

/* y of a linear loaded on `be` with activations `act`. */
static void forward(const llmrt_backend_ref *be, const char *act, ft_ckpt *ck, int64_t in,
                    int64_t out, const float *x, int32_t n, float *y)
{
    llmrt_quant *q = ft_quant(be, act);
    llmrt_qlinear *l = load(q, ck, "p", in, out);
    for (int64_t i = 0; i < n * out; i++)
        y[i] = NAN;
    llmrt_error err = {0};
    ck_assert_msg(ft_fp8()->linear_forward(q, l, y, x, n, &err) == LLMRT_OK, "%s", err.msg);
    ft_fp8()->linear_free(q, l);
    ft_fp8()->destroy(q);
}

static const int32_t row_counts[] = {1, 2, 3, 5, 8, 17, 33, 70};
#define N_ROWS (sizeof row_counts / sizeof row_counts[0])

START_TEST(w8a16_equals_dequant_gemm)
{
    /* the reference gemm is the exact path's: the fast paths' prefill-sized gemm runs FMA
     * tiles (another order), while W8A16 keeps the exact order on every path */
    llmrt_backend_ref b1 = ft_cpu_backend(1, "auto"), b2 = ft_cpu_backend(2, "auto"),
                      bb = ft_cpu_backend(2, "baseline"), be = ft_cpu_backend(2, "exact");
    llmrt_error err = {0};
    for (size_t s = 0; s < N_SHAPES; s++) {
        const int64_t in = shapes[s][0], out = shapes[s][1];
        ft_linear src = ft_linear_random(in, out, s % 2 ? LLMRT_DTYPE_BF16 : LLMRT_DTYPE_F32, 40 + s);
        ft_ckpt *ck = ft_ckpt_new();
        ft_linear_add(ck, "p", &src);
        /* the dequantized weights through the plugin, multiplied by the backend's dense gemm */
        llmrt_quant *q = ft_quant(&b2, "w8a16");
        llmrt_qlinear *l = load(q, ck, "p", in, out);
        float *wd = xmalloc((size_t)(in * out) * sizeof(float));
        ck_assert_int_eq(ft_fp8()->linear_dequant(q, l, wd, &err), LLMRT_OK);
        ft_fp8()->linear_free(q, l);
        ft_fp8()->destroy(q);
        llmrt_tensor wt = {LLMRT_DTYPE_F32, 2, {out, in}, wd};
        ft_rng r = {500 + s};
        for (size_t k = 0; k < N_ROWS; k++) {
            const int32_t n = row_counts[k];
            float *x = ft_activations(&r, n, in);
            float *ref = xmalloc((size_t)(n * out) * sizeof(float)), *y = xmalloc((size_t)(n * out) * sizeof(float));
            ck_assert_int_eq(be.vt->gemm(be.b, ref, x, &wt, n, &err), LLMRT_OK);
            const llmrt_backend_ref *bes[] = {&b1, &b2, &bb};
            const char *names[] = {"1 thread", "2 threads", "baseline kernel"};
            for (int b = 0; b < 3; b++) {
                forward(bes[b], "w8a16", ck, in, out, x, n, y);
                ck_assert_msg(memcmp(y, ref, (size_t)(n * out) * sizeof(float)) == 0,
                              "w8a16 [%lld, %lld] n=%d (%s): differs from dequantize + gemm "
                              "(first: y[0] = %.9g vs %.9g)",
                              (long long)out, (long long)in, n, names[b], (double)y[0],
                              (double)ref[0]);
            }
            /* and near the exact product (the gemm's f32 rounding only) */
            double *yd = xmalloc((size_t)(n * out) * sizeof(double)), *mag = xmalloc((size_t)(n * out) * sizeof(double));
            ft_ref_w8a16(&src, x, n, yd, mag);
            for (int64_t i = 0; i < n * out; i++)
                ck_assert_msg(fabs(y[i] - yd[i]) <= 4e-6 * mag[i] + 1e-30,
                              "w8a16 [%lld, %lld] n=%d: y[%lld] = %.9g, double reference %.9g",
                              (long long)out, (long long)in, n, (long long)i, (double)y[i], yd[i]);
            /* a row alone gives the bits it gave inside the batch */
            float *yr = xmalloc((size_t)out * sizeof(float));
            for (int32_t t = 0; t < n; t += 4) {
                forward(&b2, "w8a16", ck, in, out, x + t * in, 1, yr);
                ck_assert_msg(memcmp(yr, y + t * out, (size_t)out * sizeof(float)) == 0,
                              "row %d alone differs from row %d of a batch of %d", t, t, n);
            }
            free(yr), free(yd), free(mag), free(x), free(ref), free(y);
        }
        free(wd);
        ft_ckpt_free(ck);
        ft_linear_free(&src);
    }
    b1.vt->destroy(b1.b);
    b2.vt->destroy(b2.b);
    bb.vt->destroy(bb.b);
    be.vt->destroy(be.b);
}
END_TEST

START_TEST(w8a8_matches_reference)
{
    llmrt_backend_ref b1 = ft_cpu_backend(1, "auto"), b2 = ft_cpu_backend(2, "auto"),
                      bb = ft_cpu_backend(2, "baseline");
    for (size_t s = 0; s < N_SHAPES; s++) {
        const int64_t in = shapes[s][0], out = shapes[s][1];
        ft_linear src = ft_linear_random(in, out, s % 2 ? LLMRT_DTYPE_F32 : LLMRT_DTYPE_BF16, 80 + s);
        ft_ckpt *ck = ft_ckpt_new();
        ft_linear_add(ck, "p", &src);
        ft_rng r = {900 + s};
        for (size_t k = 0; k < N_ROWS; k++) {
            const int32_t n = row_counts[k];
            float *x = ft_activations(&r, n, in);
            if (k == 1) /* a group of zeros: the 1e-10 floor of amax, no NaN */
                memset(x, 0, (size_t)(in < 128 ? in : 128) * sizeof(float));
            const size_t ny = (size_t)(n * out);
            float *y = xmalloc(ny * sizeof(float)), *y2 = xmalloc(ny * sizeof(float)),
                  *y16 = xmalloc(ny * sizeof(float));
            double *yd = xmalloc(ny * sizeof(double)), *mag = xmalloc(ny * sizeof(double));
            forward(&b2, "w8a8", ck, in, out, x, n, y);
            ft_ref_w8a8(&src, x, n, yd, mag);
            for (size_t i = 0; i < ny; i++)
                ck_assert_msg(isfinite(y[i]) && fabs(y[i] - yd[i]) <= 8e-6 * mag[i] + 1e-30,
                              "w8a8 [%lld, %lld] n=%d: y[%zu] = %.9g, double reference %.9g "
                              "(bound %.3g)",
                              (long long)out, (long long)in, n, i, (double)y[i], yd[i],
                              8e-6 * mag[i]);
            forward(&b1, "w8a8", ck, in, out, x, n, y2);
            ck_assert_msg(memcmp(y, y2, ny * sizeof(float)) == 0, "w8a8: 1 and 2 threads differ");
            forward(&bb, "w8a8", ck, in, out, x, n, y2);
            ck_assert_msg(memcmp(y, y2, ny * sizeof(float)) == 0, "w8a8: baseline kernel differs");
            /* quantized activations are not the W8A16 product: the difference is e4m3's
             * rounding, a few percent of the outputs' size */
            forward(&b2, "w8a16", ck, in, out, x, n, y16);
            double num = 0, den = 0;
            for (size_t i = 0; i < ny; i++) {
                num += ((double)y[i] - y16[i]) * ((double)y[i] - y16[i]);
                den += (double)y16[i] * y16[i];
            }
            const double rel = sqrt(num / den);
            ck_assert_msg(rel > 1e-3 && rel < 0.1,
                          "w8a8 vs w8a16 [%lld, %lld] n=%d: relative difference %.3g (expected "
                          "e4m3 activation rounding, ~1e-2)",
                          (long long)out, (long long)in, n, rel);
            free(x), free(y), free(y2), free(y16), free(yd), free(mag);
        }
        ft_ckpt_free(ck);
        ft_linear_free(&src);
    }
    b1.vt->destroy(b1.b);
    b2.vt->destroy(b2.b);
    bb.vt->destroy(bb.b);
}
END_TEST

START_TEST(auto_is_w8a16_on_cpu)
{
    llmrt_backend_ref be = ft_cpu_backend(2, "auto");
    const int64_t in = 384, out = 136;
    ft_linear src = ft_linear_random(in, out, LLMRT_DTYPE_BF16, 3);
    ft_ckpt *ck = ft_ckpt_new();
    ft_linear_add(ck, "p", &src);
    ft_rng r = {77};
    const int32_t ns[] = {1, 9, 64};
    for (int k = 0; k < 3; k++) {
        const int32_t n = ns[k];
        float *x = ft_activations(&r, n, in);
        float *a = xmalloc((size_t)(n * out) * sizeof(float)), *b = xmalloc((size_t)(n * out) * sizeof(float));
        forward(&be, NULL, ck, in, out, x, n, a);
        forward(&be, "w8a16", ck, in, out, x, n, b);
        ck_assert_msg(memcmp(a, b, (size_t)(n * out) * sizeof(float)) == 0,
                      "activations = auto on the CPU must be W8A16 (n = %d)", n);
        free(x), free(a), free(b);
    }
    /* n = 0 does nothing; n < 0 is refused */
    llmrt_quant *q = ft_quant(&be, NULL);
    llmrt_qlinear *l = load(q, ck, "p", in, out);
    llmrt_error err = {0};
    float y[1] = {42.0f};
    ck_assert_int_eq(ft_fp8()->linear_forward(q, l, y, y, 0, &err), LLMRT_OK);
    ck_assert_int_eq(ft_fp8()->linear_forward(q, l, y, y, -1, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(ft_fp8()->linear_fused_max_rows(q, l, LLMRT_FUSE_OUT_SWIGLU), 0);
    ck_assert_int_eq(ft_fp8()->linear_forward_fused(q, l, y, y, 1, LLMRT_FUSE_OUT_SWIGLU, &err),
                     LLMRT_ERR_UNSUPPORTED);
    ft_fp8()->linear_free(q, l);
    ft_fp8()->destroy(q);
    ft_ckpt_free(ck);
    ft_linear_free(&src);
    be.vt->destroy(be.b);
}
END_TEST

/* ---- fused loads ---- */

START_TEST(fused_equals_separate)
{
    llmrt_backend_ref be = ft_cpu_backend(2, "auto");
    const int64_t in = 320, outs[3] = {256, 128, 72}; /* the last part partial */
    ft_linear parts[3];
    ft_ckpt *ck = ft_ckpt_new();
    const char *names[3] = {"a.q_proj", "a.k_proj", "a.v_proj"};
    for (int p = 0; p < 3; p++) {
        parts[p] = ft_linear_random(in, outs[p], p == 1 ? LLMRT_DTYPE_BF16 : LLMRT_DTYPE_F32, 60 + p);
        ft_linear_add(ck, names[p], &parts[p]);
    }
    const int64_t total = outs[0] + outs[1] + outs[2];
    ft_rng r = {61};
    const int32_t n = 5;
    float *x = ft_activations(&r, n, in);
    for (int mode = 0; mode < 2; mode++) {
        const char *act = mode ? "w8a8" : "w8a16";
        llmrt_quant *q = ft_quant(&be, act);
        llmrt_qlinear *f = NULL;
        llmrt_error err = {0};
        ck_assert_msg(ft_fp8()->linear_load_fused(q, ft_ckpt_view(ck), names, 3, in, outs, &f,
                                                  &err) == LLMRT_OK,
                      "%s", err.msg);
        float *yf = xmalloc((size_t)(n * total) * sizeof(float));
        ck_assert_int_eq(ft_fp8()->linear_forward(q, f, yf, x, n, &err), LLMRT_OK);
        float *w = xmalloc((size_t)(total * in) * sizeof(float));
        ck_assert_int_eq(ft_fp8()->linear_dequant(q, f, w, &err), LLMRT_OK);
        int64_t row0 = 0;
        for (int p = 0; p < 3; p++) {
            float *yp = xmalloc((size_t)(n * outs[p]) * sizeof(float));
            llmrt_qlinear *l = load(q, ck, names[p], in, outs[p]);
            ck_assert_int_eq(ft_fp8()->linear_forward(q, l, yp, x, n, &err), LLMRT_OK);
            for (int32_t t = 0; t < n; t++)
                ck_assert_msg(memcmp(yp + t * outs[p], yf + t * total + row0,
                                     (size_t)outs[p] * sizeof(float)) == 0,
                              "%s: fused part %d, row %d differs from the separate linear", act,
                              p, t);
            ck_assert_msg(memcmp(w + row0 * in, parts[p].w, (size_t)(outs[p] * in) * sizeof(float)) == 0,
                          "fused dequant of part %d", p);
            ft_fp8()->linear_free(q, l);
            free(yp);
            row0 += outs[p];
        }
        ft_fp8()->linear_free(q, f);
        free(yf), free(w);
        /* a part before the last that is not whole 128-row blocks cannot be fused */
        const int64_t bad_outs[2] = {72, 256};
        const char *bad_names[2] = {"a.v_proj", "a.q_proj"};
        ck_assert_int_eq(ft_fp8()->linear_load_fused(q, ft_ckpt_view(ck), bad_names, 2, in,
                                                     bad_outs, &f, &err),
                         LLMRT_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(err.msg, "a.v_proj") && strstr(err.msg, "128"), "%s", err.msg);
        ck_assert_ptr_null(f);
        /* a dense part: NOT_FOUND, nothing loaded */
        const char *dense_names[2] = {"a.q_proj", "a.o_proj"};
        ck_assert_int_eq(ft_fp8()->linear_load_fused(q, ft_ckpt_view(ck), dense_names, 2, in,
                                                     outs, &f, &err),
                         LLMRT_ERR_NOT_FOUND);
        ck_assert_ptr_null(f);
        ft_fp8()->destroy(q);
    }
    for (int p = 0; p < 3; p++)
        ft_linear_free(&parts[p]);
    free(x);
    ft_ckpt_free(ck);
    be.vt->destroy(be.b);
}
END_TEST

/* ---- malformed checkpoints ---- */

static llmrt_status try_load(ft_ckpt *ck, const char *config, int64_t in, int64_t out,
                             llmrt_error *err)
{
    llmrt_backend_ref be = ft_cpu_backend(1, "auto");
    llmrt_quant *q = NULL;
    ck_assert_int_eq(ft_fp8()->create(NULL, NULL, config ? config : FT_QWEN_CONFIG, &be, &q, err),
                     LLMRT_OK);
    llmrt_qlinear *l = NULL;
    llmrt_status st = ft_fp8()->linear_load(q, ft_ckpt_view(ck), "m.proj", in, out, &l, err);
    if (st == LLMRT_OK)
        ft_fp8()->linear_free(q, l);
    else
        ck_assert_ptr_null(l);
    ft_fp8()->destroy(q);
    be.vt->destroy(be.b);
    return st;
}

#define EXPECT_LOAD(ck, cfg, in, out, code, ...)                                              \
    do {                                                                                      \
        llmrt_error e_ = {0};                                                                 \
        llmrt_status s_ = try_load(ck, cfg, in, out, &e_);                                    \
        ck_assert_msg(s_ == code, "line %d: status %d (%s), expected %d", __LINE__, s_,      \
                      e_.msg, code);                                                          \
        const char *needles_[] = {__VA_ARGS__, NULL};                                         \
        for (int i_ = 0; needles_[i_]; i_++)                                                  \
            ck_assert_msg(strstr(e_.msg, needles_[i_]), "line %d: message '%s' lacks '%s'",   \
                          __LINE__, e_.msg, needles_[i_]);                                    \
        printf("ok: %s\n", e_.msg);                                                           \
    } while (0)

START_TEST(malformed_tensors_named)
{
    const int64_t in = 384, out = 256; /* scale [2, 3] */
    ft_linear src = ft_linear_random(in, out, LLMRT_DTYPE_F32, 5);
    const int64_t wshape[2] = {out, in}, sshape[2] = {2, 3}, stransposed[2] = {3, 2};
    ft_ckpt *ck;

    /* a dense linear: NOT_FOUND, so the model loads it */
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_BF16, 2, wshape, src.w); /* any bytes */
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_NOT_FOUND, "m.proj.weight", "dense");
    ft_ckpt_free(ck);
    ck = ft_ckpt_new();
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_NOT_FOUND, "m.proj.weight");
    ft_ckpt_free(ck);

    /* missing scale */
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E4M3, 2, wshape, src.codes);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight_scale_inv is missing",
                "F32 or BF16 [ceil(out / 128), ceil(in / 128)]");
    ft_ckpt_free(ck);

    /* scale without weight */
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, sshape, src.scales);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight is missing",
                "m.proj.weight_scale_inv");
    ft_ckpt_free(ck);

    /* scale of the wrong shape (transposed), of the wrong dtype */
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E4M3, 2, wshape, src.codes);
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, stransposed, src.scales);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight_scale_inv",
                "expected F32 [2, 3], found F32 [3, 2]", "128x128 block");
    ft_ckpt_free(ck);
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E4M3, 2, wshape, src.codes);
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F16, 2, sshape, src.scales);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight_scale_inv", "is F16",
                "expected F32 or BF16");
    ft_ckpt_free(ck);
    /* a scale block for 64x64 blocks (block size other than 128) */
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E4M3, 2, wshape, src.codes);
    float many[4 * 6] = {0};
    const int64_t s64[2] = {4, 6};
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, s64, many);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight_scale_inv",
                "expected F32 [2, 3], found F32 [4, 6]");
    ft_ckpt_free(ck);

    /* weight not F8 although the linear has a scale; e5m2; wrong rank; wrong shape */
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_I8, 2, wshape, src.codes);
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, sshape, src.scales);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight is I8", "expected F8_E4M3");
    ft_ckpt_free(ck);
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E5M2, 2, wshape, src.codes);
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, sshape, src.scales);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight is F8_E5M2", "e4m3");
    ft_ckpt_free(ck);
    ck = ft_ckpt_new();
    const int64_t w3[3] = {2, out / 2, in};
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E4M3, 3, w3, src.codes);
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, sshape, src.scales);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight",
                "expected F8_E4M3 [256, 384], found F8_E4M3 [2, 128, 384]");
    ft_ckpt_free(ck);
    ck = ft_ckpt_new();
    const int64_t wt[2] = {in, out};
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E4M3, 2, wt, src.codes);
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, sshape, src.scales);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight",
                "expected F8_E4M3 [256, 384], found F8_E4M3 [384, 256]");
    ft_ckpt_free(ck);

    /* a NaN code in the weight; a non-finite scale */
    uint8_t *codes = xmalloc((size_t)(in * out));
    memcpy(codes, src.codes, (size_t)(in * out));
    codes[130 * in + 7] = 0xff;
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E4M3, 2, wshape, codes);
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, sshape, src.scales);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight holds a NaN", "[130, 7]");
    ft_ckpt_free(ck);
    free(codes);
    float bad_scales[6];
    memcpy(bad_scales, src.scales, sizeof bad_scales);
    bad_scales[4] = INFINITY;
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E4M3, 2, wshape, src.codes);
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, sshape, bad_scales);
    EXPECT_LOAD(ck, NULL, in, out, LLMRT_ERR_FORMAT, "m.proj.weight_scale_inv", "block [1, 1]",
                "finite");
    ft_ckpt_free(ck);

    /* modules_to_not_convert: a listed linear is dense (NOT_FOUND); listed but F8: an error */
    const char *skip_cfg = "{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128], "
                           "\"modules_to_not_convert\": [\"proj\"]}";
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_BF16, 2, wshape, src.w);
    EXPECT_LOAD(ck, skip_cfg, in, out, LLMRT_ERR_NOT_FOUND, "m.proj", "modules_to_not_convert");
    ft_ckpt_free(ck);
    ck = ft_ckpt_new();
    ft_ckpt_add(ck, "m.proj.weight", LLMRT_DTYPE_F8_E4M3, 2, wshape, src.codes);
    ft_ckpt_add(ck, "m.proj.weight_scale_inv", LLMRT_DTYPE_F32, 2, sshape, src.scales);
    EXPECT_LOAD(ck, skip_cfg, in, out, LLMRT_ERR_FORMAT, "m.proj.weight is stored as F8_E4M3",
                "modules_to_not_convert");
    /* a name that only shares a prefix with the entry is not skipped */
    EXPECT_LOAD(ck, "{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128], "
                    "\"modules_to_not_convert\": [\"pro\", \"m.proj.x\"]}",
                in, out, LLMRT_OK, "");
    ft_ckpt_free(ck);
    ft_linear_free(&src);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("quant-fp8");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, probe_accepts);
    tcase_add_test(tc, probe_refusals);
    tcase_add_test(tc, key_table);
    tcase_add_test(tc, create_checks);
    tcase_add_test(tc, dequant_exact);
    tcase_add_test(tc, w8a16_equals_dequant_gemm);
    tcase_add_test(tc, w8a8_matches_reference);
    tcase_add_test(tc, auto_is_w8a16_on_cpu);
    tcase_add_test(tc, fused_equals_separate);
    tcase_add_test(tc, malformed_tensors_named);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
