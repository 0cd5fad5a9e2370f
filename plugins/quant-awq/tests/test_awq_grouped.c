/* test_awq_grouped.c — quant-awq's grouped linears (quant.h linear_group_create /
 * linear_forward_grouped, a MoE layer's experts): on random shapes, group sizes, expert
 * counts and row counts, each row of a grouped call equals that row's expert run alone
 * through linear_forward on x[row_src] — rows given in any order or sorted by expert with
 * linear_start, with and without the SwiGLU fold, with NULL experts whose rows stay as they
 * were — and the dense double-precision product of the exact weights.
 *   test_quant_awq_grouped cpu    the CPU kernels (equal bit for bit: a row's value does not
 *                                 depend on the rows beside it)
 *   test_quant_awq_grouped cuda   the CUDA kernels (awq_cuda_grouped.cu) on backend-cuda,
 *                                 against the CUDA linear_forward (1e-4: other K-splitting
 *                                 warps sum in another order) and the reference (2e-3: f16
 *                                 activations); exits 77 when no CUDA device is visible
 * Also: the group refuses linears of different shapes and asks of more rows than it was made
 * for. CUDA cannot survive fork(), so the suite runs without forking. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awq_test_common.h"
#include "mock_backend.h"
#include "test_util.h"

static llmrt_backend_ref be;
static int on_cuda;

#define OK(call)                                                                              \
    do {                                                                                      \
        llmrt_status st_ = (call);                                                            \
        ck_assert_msg(st_ == LLMRT_OK, "%s failed (%s): %s", #call, llmrt_status_str(st_),   \
                      err.msg);                                                               \
    } while (0)

static void *dev_alloc(size_t bytes)
{
    llmrt_error err = {0};
    void *p = NULL;
    OK(be.vt->dev_alloc(be.b, bytes ? bytes : 4, &p, &err));
    return p;
}

static void upload(void *dev, const void *h, size_t bytes)
{
    llmrt_error err = {0};
    OK(be.vt->copy(be.b, dev, h, bytes, LLMRT_COPY_H2D, &err));
    OK(be.vt->synchronize(be.b, &err));
}

static void download(void *h, const void *dev, size_t bytes)
{
    llmrt_error err = {0};
    OK(be.vt->copy(be.b, h, dev, bytes, LLMRT_COPY_D2H, &err));
    OK(be.vt->synchronize(be.b, &err));
}

static float silu(float g) { return g / (1.0f + expf(-g)); }

/* One case: E experts [out, in] (every `null_every`-th left out of the group), n_rows rows with
 * random experts over n_src input rows. */
static void grouped_case(int E, int64_t in, int64_t out, int group, int n_rows, int sorted,
                         int swiglu, int null_every, uint64_t seed)
{
    llmrt_error err = {0};
    const llmrt_quant_vtable *vt = at_awq();
    llmrt_quant *q = at_quant(&be, group);
    at_ckpt *ck = at_ckpt_new();
    at_linear *src = calloc((size_t)E, sizeof *src);
    llmrt_qlinear **ql = calloc((size_t)E, sizeof *ql);
    for (int e = 0; e < E; e++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "e%d.proj", e);
        src[e] = at_linear_random(in, out, group, seed * 131 + (uint64_t)e);
        at_linear_add(ck, prefix, &src[e]);
        OK(vt->linear_load(q, at_ckpt_view(ck), prefix, in, out, &ql[e], &err));
    }
    const llmrt_qlinear **members = calloc((size_t)E, sizeof *members);
    for (int e = 0; e < E; e++)
        members[e] = null_every && e % null_every == 1 ? NULL : ql[e];

    /* rows: random experts and sources, sorted by expert (stably) when asked */
    at_rng r = {seed};
    const int n_src = n_rows > 3 ? n_rows / 2 + 1 : n_rows;
    int32_t *rl = malloc((size_t)n_rows * 4), *rs = malloc((size_t)n_rows * 4);
    int32_t *start = calloc((size_t)E + 1, 4);
    for (int i = 0; i < n_rows; i++) {
        rl[i] = (int32_t)(at_next(&r) % (uint64_t)E);
        rs[i] = (int32_t)(at_next(&r) % (uint64_t)n_src);
    }
    if (sorted) {
        int32_t *l2 = malloc((size_t)n_rows * 4), *s2 = malloc((size_t)n_rows * 4), k = 0;
        for (int e = 0; e < E; e++) {
            start[e] = k;
            for (int i = 0; i < n_rows; i++)
                if (rl[i] == e)
                    l2[k] = e, s2[k++] = rs[i];
        }
        start[E] = k;
        memcpy(rl, l2, (size_t)n_rows * 4);
        memcpy(rs, s2, (size_t)n_rows * 4);
        free(l2), free(s2);
    }
    float *x = malloc((size_t)(n_src * in) * 4);
    for (int64_t i = 0; i < n_src * in; i++)
        x[i] = at_uniform(&r, -1.0f, 1.0f);
    const int64_t yw = swiglu ? out / 2 : out;
    const float SENTINEL = 12345.0f;
    float *y = malloc((size_t)(n_rows * yw) * 4), *want = malloc((size_t)(n_rows * yw) * 4);
    for (int64_t i = 0; i < n_rows * yw; i++)
        y[i] = SENTINEL;

    float *d_x = dev_alloc((size_t)(n_src * in) * 4), *d_y = dev_alloc((size_t)(n_rows * yw) * 4);
    int32_t *d_rl = dev_alloc((size_t)n_rows * 4), *d_rs = dev_alloc((size_t)n_rows * 4);
    int32_t *d_start = dev_alloc((size_t)(E + 1) * 4);
    upload(d_x, x, (size_t)(n_src * in) * 4);
    upload(d_y, y, (size_t)(n_rows * yw) * 4);
    upload(d_rl, rl, (size_t)n_rows * 4);
    upload(d_rs, rs, (size_t)n_rows * 4);
    upload(d_start, start, (size_t)(E + 1) * 4);

    llmrt_qgroup *g = NULL;
    const uint32_t flags = swiglu ? LLMRT_FUSE_OUT_SWIGLU : 0;
    OK(vt->linear_group_create(q, members, E, n_rows, flags, &g, &err));
    OK(vt->linear_forward_grouped(q, g, d_y, d_x, d_rl, d_rs, sorted ? d_start : NULL, n_rows,
                                  flags, &err));
    download(y, d_y, (size_t)(n_rows * yw) * 4);

    /* the same rows one by one through linear_forward (n = 1) */
    float *d_one = dev_alloc((size_t)out * 4), *one = malloc((size_t)out * 4);
    double worst_lf = 0, worst_ref = 0;
    for (int i = 0; i < n_rows; i++) {
        float *yr = y + (int64_t)i * yw;
        if (!members[rl[i]]) {
            for (int64_t k = 0; k < yw; k++)
                ck_assert_msg(yr[k] == SENTINEL, "row %d (a NULL expert) was written", i);
            continue;
        }
        OK(vt->linear_forward(q, ql[rl[i]], d_one, d_x + (int64_t)rs[i] * in, 1, &err));
        download(one, d_one, (size_t)out * 4);
        double nref = 0, dref = 0, nlf = 0, dlf = 0;
        for (int64_t k = 0; k < yw; k++) {
            const float lf = swiglu ? silu(one[k]) * one[yw + k] : one[k];
            /* the exact weights in double */
            double ref[2] = {0, 0};
            for (int h = 0; h < (swiglu ? 2 : 1); h++) {
                const float *w = src[rl[i]].w + (k + h * yw) * in;
                for (int64_t j = 0; j < in; j++)
                    ref[h] += (double)w[j] * x[(int64_t)rs[i] * in + j];
            }
            const double rv = swiglu ? ref[0] / (1.0 + exp(-ref[0])) * ref[1] : ref[0];
            if (!on_cuda)
                ck_assert_msg(yr[k] == lf, "row %d output %lld: grouped %.9g, alone %.9g", i,
                              (long long)k, yr[k], lf);
            nlf += ((double)yr[k] - lf) * ((double)yr[k] - lf), dlf += (double)lf * lf;
            nref += ((double)yr[k] - rv) * ((double)yr[k] - rv), dref += rv * rv;
        }
        worst_lf = fmax(worst_lf, sqrt(nlf / (dlf > 0 ? dlf : 1)));
        worst_ref = fmax(worst_ref, sqrt(nref / (dref > 0 ? dref : 1)));
    }
    ck_assert_msg(worst_lf < 1e-4, "grouped vs linear_forward: relative error %.3g", worst_lf);
    ck_assert_msg(worst_ref < (on_cuda ? 2e-3 : 1e-5), "grouped vs reference: relative error %.3g",
                  worst_ref);
    printf("E %d [%lld, %lld] g%d rows %d%s%s%s: vs alone %.2g, vs reference %.2g\n", E,
           (long long)out, (long long)in, group, n_rows, sorted ? " sorted" : "",
           swiglu ? " swiglu" : "", null_every ? " (NULL experts)" : "", worst_lf, worst_ref);

    vt->linear_group_destroy(q, g);
    void *bufs[] = {d_x, d_y, d_rl, d_rs, d_start, d_one};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        be.vt->dev_free(be.b, bufs[i]);
    for (int e = 0; e < E; e++) {
        vt->linear_free(q, ql[e]);
        at_linear_free(&src[e]);
    }
    vt->destroy(q);
    at_ckpt_free(ck);
    free(src), free(ql), free(members), free(rl), free(rs), free(start), free(x), free(y);
    free(want), free(one);
}

START_TEST(grouped_matches_each_expert)
{
    /* decode (few rows, per-row kernel), batched decode and prefill (sorted: per expert),
     * K-splitting from one to eight warps, every group size, the fold, NULL experts */
    grouped_case(8, 256, 64, 128, 1, 0, 0, 0, 1);
    grouped_case(8, 512, 96, 64, 8, 1, 0, 0, 2);
    grouped_case(8, 512, 128, 32, 8, 1, 1, 0, 3);
    grouped_case(16, 2048, 64, 128, 16, 1, 1, 3, 4);
    grouped_case(6, 768, 96, 128, 37, 1, 0, 0, 5);
    grouped_case(6, 768, 96, 128, 37, 0, 0, 4, 6);
    grouped_case(4, 1024, 64, 64, 100, 1, 1, 0, 7);
    grouped_case(3, 4096, 32, 128, 20, 1, 0, 0, 8); /* wide inputs: fewer tokens per chunk */
}
END_TEST

START_TEST(group_refuses_bad_input)
{
    llmrt_error err = {0};
    const llmrt_quant_vtable *vt = at_awq();
    llmrt_quant *q = at_quant(&be, 32);
    at_ckpt *ck = at_ckpt_new();
    at_linear a = at_linear_random(64, 32, 32, 1), b = at_linear_random(64, 48, 32, 2);
    at_linear_add(ck, "a.proj", &a);
    at_linear_add(ck, "b.proj", &b);
    llmrt_qlinear *la = NULL, *lb = NULL;
    OK(vt->linear_load(q, at_ckpt_view(ck), "a.proj", 64, 32, &la, &err));
    OK(vt->linear_load(q, at_ckpt_view(ck), "b.proj", 64, 48, &lb, &err));
    const llmrt_qlinear *mixed[2] = {la, lb}, *none[2] = {NULL, NULL}, *one[2] = {la, NULL};
    llmrt_qgroup *g = NULL;
    ck_assert_int_eq(vt->linear_group_create(q, mixed, 2, 4, 0, &g, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "linear 1"), "%s", err.msg);
    ck_assert_int_eq(vt->linear_group_create(q, none, 2, 4, 0, &g, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_int_eq(vt->linear_group_create(q, one, 2, 4, 1u << 7, &g, &err), LLMRT_ERR_UNSUPPORTED);
    OK(vt->linear_group_create(q, one, 2, 4, 0, &g, &err));
    int32_t *d = dev_alloc(64);
    float *f = dev_alloc(64 * 64 * 4);
    ck_assert_int_eq(vt->linear_forward_grouped(q, g, f, f, d, NULL, NULL, 5, 0, &err),
                     LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "5 rows") && strstr(err.msg, "0..4"), "%s", err.msg);
    ck_assert_int_eq(vt->linear_forward_grouped(q, g, f, f, d, NULL, NULL, 2,
                                                LLMRT_FUSE_OUT_SWIGLU, &err),
                     LLMRT_ERR_INVALID_ARG);
    vt->linear_group_destroy(q, g);
    be.vt->dev_free(be.b, d);
    be.vt->dev_free(be.b, f);
    vt->linear_free(q, la);
    vt->linear_free(q, lb);
    vt->destroy(q);
    at_ckpt_free(ck);
    at_linear_free(&a), at_linear_free(&b);
}
END_TEST

/* backend-cuda (exit 77 without a device). */
static void open_cuda(void)
{
    static const char *const kv[] = {NULL};
    llmrt_host host = mock_host(kv);
    char *path = tu_plugin_path("backend-cuda.so");
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    free(path);
    if (!d || d->kind != LLMRT_PLUGIN_BACKEND) {
        printf("SKIP: backend-cuda.so is not built\n");
        exit(77);
    }
    be = (llmrt_backend_ref){d->vtable, NULL, "cuda"};
    llmrt_device_info info;
    int32_t count = 0;
    llmrt_error err = {0};
    if (be.vt->probe(&info, 1, &count, &err) != LLMRT_OK || count == 0) {
        printf("SKIP: no CUDA device visible (%s)\n", err.msg);
        exit(77);
    }
    llmrt_section empty = {.name = "backend.cuda"};
    if (be.vt->create(&host, &empty, &be.b, &err) != LLMRT_OK) {
        fprintf(stderr, "creating the CUDA backend failed: %s\n", err.msg);
        exit(1);
    }
    printf("device: %s\n", info.name);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "cpu";
    on_cuda = strcmp(mode, "cuda") == 0;
    if (on_cuda)
        open_cuda();
    else
        be = at_cpu_backend(2);
    Suite *s = suite_create("quant-awq grouped");
    TCase *tc = tcase_create(mode);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, grouped_matches_each_expert);
    tcase_add_test(tc, group_refuses_bad_input);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    be.vt->destroy(be.b);
    return failed ? 1 : 0;
}
