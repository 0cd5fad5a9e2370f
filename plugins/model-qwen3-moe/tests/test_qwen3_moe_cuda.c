/* test_qwen3_moe_cuda.c — the model-qwen3-moe plugin's CUDA kernels (moe_cuda.cu, compiled
 * into this test with moe_cpu.c) against its CPU code, on random inputs, on backend-cuda
 * (exit 77 when no CUDA device is visible):
 *   route       top-k ids equal the CPU's exactly — also with many tied logits (lowest index
 *               first) — and weights within 1e-6, for expert counts 8..1024 and top-k 1..32,
 *               norm_topk_prob on and off, small steps (one launch) and large (two)
 *   sort        expert ranges equal the CPU's; every (token, choice) sits in its expert's range
 *               with its token, each row exactly once
 *   dense GEMV  bf16 / f16 / f32 experts, per row and per expert, with the SwiGLU fold, NULL
 *               experts untouched, inputs the vector path takes and ones it does not: within
 *               1e-5 of a double-precision product
 *   swiglu, combine  within 1e-6 of the CPU; the combine also bit for bit fmaf in k order
 * The kernels run on the backend's stream through its "llmrt.cuda" extension, as in the
 * plugin. CUDA cannot survive fork(), so the suite runs without forking. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/cuda.h>

#include "mock_backend.h"
#include "moe.h"
#include "moe_cuda.h"
#include "test_util.h"

static llmrt_backend_ref cuda;
static moe_cuda *mc;
static llmrt_backend_ref nothreads; /* moe_cpu's ops without a thread pool */

#define OK(call)                                                                              \
    do {                                                                                      \
        llmrt_status st_ = (call);                                                            \
        ck_assert_msg(st_ == LLMRT_OK, "%s failed (%s): %s", #call, llmrt_status_str(st_),   \
                      err.msg);                                                               \
    } while (0)

static uint64_t rs = 1;
static double urand(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rs >> 11) * (1.0 / 9007199254740992.0);
}

static void *dalloc(size_t bytes)
{
    llmrt_error err = {0};
    void *p = NULL;
    OK(cuda.vt->dev_alloc(cuda.b, bytes ? bytes : 4, &p, &err));
    return p;
}

static void up(void *d, const void *h, size_t n)
{
    llmrt_error err = {0};
    OK(cuda.vt->copy(cuda.b, d, h, n, LLMRT_COPY_H2D, &err));
    OK(cuda.vt->synchronize(cuda.b, &err));
}

static void down(void *h, const void *d, size_t n)
{
    llmrt_error err = {0};
    OK(cuda.vt->synchronize(cuda.b, &err));
    OK(cuda.vt->copy(cuda.b, h, d, n, LLMRT_COPY_D2H, &err));
    OK(cuda.vt->synchronize(cuda.b, &err));
}

static void dfree(void *p) { cuda.vt->dev_free(cuda.b, p); }

/* ---- routing and sorting ---- */

static void route_case(int T, int E, int K, int norm, int ties)
{
    llmrt_error err = {0};
    const int N = T * K;
    float *l = malloc((size_t)T * E * 4), *w_cpu = malloc((size_t)N * 4), *w_gpu = malloc((size_t)N * 4);
    int32_t *id_cpu = malloc((size_t)N * 4), *id_gpu = malloc((size_t)N * 4);
    for (int i = 0; i < T * E; i++) {
        const double v = 6.0 * urand() - 3.0;
        l[i] = ties ? (float)(floor(v * 2.0) / 2.0) : (float)v; /* ties: 12 distinct values */
    }
    moe_cpu_route(&nothreads, l, T, E, K, norm, id_cpu, w_cpu);
    float *dl = dalloc((size_t)T * E * 4), *dw = dalloc((size_t)N * 4);
    int32_t *did = dalloc((size_t)N * 4), *dre = dalloc((size_t)N * 4), *drs = dalloc((size_t)N * 4);
    int32_t *dst = dalloc((size_t)(E + 1) * 4), *dro = dalloc((size_t)N * 4);
    up(dl, l, (size_t)T * E * 4);
    OK(moe_cuda_route_sort(mc, dl, T, E, K, norm, did, dw, dre, drs, dst, dro, &err));
    down(id_gpu, did, (size_t)N * 4);
    down(w_gpu, dw, (size_t)N * 4);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(id_gpu[i] == id_cpu[i], "T %d E %d K %d%s: token %d choice %d: GPU expert %d, CPU %d",
                      T, E, K, ties ? " (ties)" : "", i / K, i % K, id_gpu[i], id_cpu[i]);
        ck_assert_msg(fabsf(w_gpu[i] - w_cpu[i]) <= 1e-6f + 1e-6f * fabsf(w_cpu[i]),
                      "T %d E %d K %d: token %d choice %d: weight %.9g vs %.9g", T, E, K, i / K,
                      i % K, w_gpu[i], w_cpu[i]);
    }
    /* the sort: the CPU's ranges; each (token, choice) in its expert's range, once */
    int32_t *start_cpu = malloc((size_t)(E + 1) * 4), *start_gpu = malloc((size_t)(E + 1) * 4);
    int32_t *re = malloc((size_t)N * 4), *rsrc = malloc((size_t)N * 4), *ro = malloc((size_t)N * 4);
    int32_t *cre = malloc((size_t)N * 4), *crs = malloc((size_t)N * 4), *cro = malloc((size_t)N * 4);
    int32_t *cur = malloc((size_t)E * 4);
    moe_cpu_sort(id_cpu, T, K, E, cre, crs, start_cpu, cro, cur);
    down(start_gpu, dst, (size_t)(E + 1) * 4);
    down(re, dre, (size_t)N * 4);
    down(rsrc, drs, (size_t)N * 4);
    down(ro, dro, (size_t)N * 4);
    ck_assert_int_eq(memcmp(start_cpu, start_gpu, (size_t)(E + 1) * 4), 0);
    char *seen = calloc((size_t)N, 1);
    for (int i = 0; i < N; i++) {
        const int p = ro[i], e = id_cpu[i];
        ck_assert(p >= 0 && p < N && !seen[p]);
        seen[p] = 1;
        ck_assert_int_eq(re[p], e);
        ck_assert_int_eq(rsrc[p], i / K);
        ck_assert(p >= start_gpu[e] && p < start_gpu[e + 1]);
    }
    /* routing alone, the rows left in (token, choice) order: the same choices and weights
     * (every output overwritten first, so nothing the sort left can pass for it) */
    memset(re, 0xff, (size_t)N * 4);
    up(did, re, (size_t)N * 4), up(dre, re, (size_t)N * 4), up(drs, re, (size_t)N * 4);
    up(dro, re, (size_t)N * 4), up(dw, re, (size_t)N * 4);
    OK(moe_cuda_route_rows(mc, dl, T, E, K, norm, did, dw, dre, drs, dro, &err));
    down(id_gpu, did, (size_t)N * 4);
    down(w_gpu, dw, (size_t)N * 4);
    down(re, dre, (size_t)N * 4);
    down(rsrc, drs, (size_t)N * 4);
    down(ro, dro, (size_t)N * 4);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(id_gpu[i] == id_cpu[i] && re[i] == id_cpu[i],
                      "route_rows T %d E %d K %d: row %d: expert %d / row expert %d, CPU %d", T,
                      E, K, i, id_gpu[i], re[i], id_cpu[i]);
        ck_assert_msg(fabsf(w_gpu[i] - w_cpu[i]) <= 1e-6f + 1e-6f * fabsf(w_cpu[i]),
                      "route_rows T %d E %d K %d: row %d: weight %.9g vs %.9g", T, E, K, i,
                      w_gpu[i], w_cpu[i]);
        ck_assert_int_eq(rsrc[i], i / K);
        ck_assert_int_eq(ro[i], i);
    }
    void *d[] = {dl, dw, did, dre, drs, dst, dro};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        dfree(d[i]);
    free(l), free(w_cpu), free(w_gpu), free(id_cpu), free(id_gpu), free(start_cpu), free(start_gpu);
    free(re), free(rsrc), free(ro), free(cre), free(crs), free(cro), free(cur), free(seen);
}

START_TEST(route_and_sort_match_cpu)
{
    const int shapes[][2] = {{8, 2}, {8, 8}, {33, 5}, {60, 4}, {128, 8}, {512, 16}, {1024, 32}, {1, 1}};
    const int steps[] = {1, 7, 64, 65, 300};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t t = 0; t < sizeof steps / sizeof *steps; t++)
            for (int ties = 0; ties < 2; ties++)
                route_case(steps[t], shapes[s][0], shapes[s][1], (int)((s + t) & 1), ties);
    printf("routing: %zu shapes x %zu step sizes, with and without ties: ids equal the CPU's\n",
           sizeof shapes / sizeof *shapes, sizeof steps / sizeof *steps);
}
END_TEST

/* ---- the dense grouped GEMV ---- */

static void gemv_case(llmrt_dtype dt, int E, int64_t w_rows, int64_t in, int n_rows, int sorted,
                      int glu, int null_every)
{
    llmrt_error err = {0};
    const size_t es = llmrt_dtype_size(dt);
    void **hw = calloc((size_t)E, sizeof *hw);
    const void **table = calloc((size_t)E, sizeof *table);
    float **wf = calloc((size_t)E, sizeof *wf);
    for (int e = 0; e < E; e++) {
        hw[e] = malloc((size_t)(w_rows * in) * es);
        wf[e] = malloc((size_t)(w_rows * in) * 4);
        for (int64_t i = 0; i < w_rows * in; i++) {
            llmrt_store_f(hw[e], dt, i, (float)(urand() - 0.5));
            wf[e][i] = llmrt_load_f(hw[e], dt, i);
        }
        if (null_every && e % null_every == 1)
            continue;
        void *d = dalloc((size_t)(w_rows * in) * es);
        up(d, hw[e], (size_t)(w_rows * in) * es);
        table[e] = d;
    }
    void *dtable = dalloc((size_t)E * sizeof(void *));
    up(dtable, table, (size_t)E * sizeof(void *));
    const int n_src = n_rows / 2 + 1;
    int32_t *re = malloc((size_t)n_rows * 4), *rsrc = malloc((size_t)n_rows * 4);
    int32_t *start = calloc((size_t)E + 1, 4);
    for (int i = 0; i < n_rows; i++)
        re[i] = (int32_t)(urand() * E), rsrc[i] = (int32_t)(urand() * n_src);
    if (sorted) { /* counting sort by expert */
        int32_t *a = malloc((size_t)n_rows * 4), *b = malloc((size_t)n_rows * 4), k = 0;
        for (int e = 0; e < E; e++) {
            start[e] = k;
            for (int i = 0; i < n_rows; i++)
                if (re[i] == e)
                    a[k] = e, b[k++] = rsrc[i];
        }
        start[E] = k;
        memcpy(re, a, (size_t)n_rows * 4), memcpy(rsrc, b, (size_t)n_rows * 4);
        free(a), free(b);
    }
    float *x = malloc((size_t)(n_src * in) * 4);
    for (int64_t i = 0; i < n_src * in; i++)
        x[i] = (float)(2 * urand() - 1);
    const int64_t n_out = glu ? w_rows / 2 : w_rows;
    float *y = malloc((size_t)(n_rows * n_out) * 4);
    for (int64_t i = 0; i < n_rows * n_out; i++)
        y[i] = -7.0f;
    float *dx = dalloc((size_t)(n_src * in) * 4), *dy = dalloc((size_t)(n_rows * n_out) * 4);
    int32_t *dre = dalloc((size_t)n_rows * 4), *drs = dalloc((size_t)n_rows * 4);
    int32_t *dst = dalloc((size_t)(E + 1) * 4);
    up(dx, x, (size_t)(n_src * in) * 4);
    up(dy, y, (size_t)(n_rows * n_out) * 4);
    up(dre, re, (size_t)n_rows * 4);
    up(drs, rsrc, (size_t)n_rows * 4);
    up(dst, start, (size_t)(E + 1) * 4);
    OK(moe_cuda_dense_grouped(mc, dtable, dt, w_rows, in, dy, dx, dre, drs, sorted ? dst : NULL,
                              n_rows, E, glu, &err));
    down(y, dy, (size_t)(n_rows * n_out) * 4);
    double worst = 0;
    for (int r = 0; r < n_rows; r++) {
        const int e = re[r];
        for (int64_t o = 0; o < n_out; o++) {
            const float got = y[(int64_t)r * n_out + o];
            if (!table[e]) {
                ck_assert_msg(got == -7.0f, "row %d (a NULL expert) was written", r);
                continue;
            }
            double acc[2] = {0, 0};
            for (int h = 0; h < (glu ? 2 : 1); h++)
                for (int64_t k = 0; k < in; k++)
                    acc[h] += (double)wf[e][(o + h * n_out) * in + k] * x[(int64_t)rsrc[r] * in + k];
            const double want = glu ? acc[0] / (1.0 + exp(-acc[0])) * acc[1] : acc[0];
            const double scale = sqrt((double)in) * 0.3 + 1e-3;
            worst = fmax(worst, fabs(got - want) / scale);
        }
    }
    ck_assert_msg(worst < 1e-5, "%s E %d [%lld, %lld] rows %d: error %.3g", llmrt_dtype_name(dt), E,
                  (long long)w_rows, (long long)in, n_rows, worst);
    printf("dense GEMV %s E %d [%lld, %lld] rows %d%s%s%s: error %.2g\n", llmrt_dtype_name(dt), E,
           (long long)w_rows, (long long)in, n_rows, sorted ? " sorted" : "", glu ? " glu" : "",
           null_every ? " (NULL experts)" : "", worst);
    for (int e = 0; e < E; e++) {
        if (table[e])
            dfree((void *)table[e]);
        free(hw[e]), free(wf[e]);
    }
    void *d[] = {dtable, dx, dy, dre, drs, dst};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        dfree(d[i]);
    free(hw), free(table), free(wf), free(re), free(rsrc), free(start), free(x), free(y);
}

START_TEST(dense_gemv_matches_reference)
{
    gemv_case(LLMRT_DTYPE_BF16, 8, 1536, 2048, 8, 0, 1, 0);  /* decode: gate|up, SwiGLU */
    gemv_case(LLMRT_DTYPE_BF16, 8, 2048, 768, 8, 1, 0, 0);   /* decode: down */
    gemv_case(LLMRT_DTYPE_BF16, 16, 256, 512, 64, 1, 1, 3);  /* batched: per expert, NULLs */
    gemv_case(LLMRT_DTYPE_F16, 6, 96, 256, 37, 1, 0, 0);
    gemv_case(LLMRT_DTYPE_F32, 6, 64, 128, 37, 0, 1, 4);
    gemv_case(LLMRT_DTYPE_BF16, 4, 30, 40, 9, 1, 0, 0);      /* in % 8 != 0: the scalar path */
    gemv_case(LLMRT_DTYPE_F16, 4, 30, 44, 9, 0, 1, 0);
}
END_TEST

START_TEST(swiglu_and_combine_match_cpu)
{
    llmrt_error err = {0};
    enum { T = 13, K = 4, H = 72, N = T * K, D = 40 };
    float *gu = malloc((size_t)N * 2 * D * 4), *a = malloc((size_t)N * D * 4), *b = malloc((size_t)N * D * 4);
    for (int i = 0; i < N * 2 * D; i++)
        gu[i] = (float)(8 * urand() - 4);
    moe_cpu_swiglu(a, gu, N, D);
    float *dgu = dalloc((size_t)N * 2 * D * 4), *dout = dalloc((size_t)N * D * 4);
    up(dgu, gu, (size_t)N * 2 * D * 4);
    OK(moe_cuda_swiglu(mc, dout, dgu, N, D, &err));
    down(b, dout, (size_t)N * D * 4);
    for (int i = 0; i < N * D; i++)
        ck_assert_msg(fabsf(a[i] - b[i]) <= 1e-6f * (1 + fabsf(a[i])), "swiglu %d: %g vs %g", i, b[i], a[i]);
    float *rows = malloc((size_t)N * H * 4), *w = malloc((size_t)N * 4);
    float *oc = malloc((size_t)T * H * 4), *og = malloc((size_t)T * H * 4);
    int32_t *row_of = malloc((size_t)N * 4);
    for (int i = 0; i < N * H; i++)
        rows[i] = (float)(2 * urand() - 1);
    for (int i = 0; i < N; i++)
        w[i] = (float)urand(), row_of[i] = (i * 7 + 3) % N; /* a permutation: 7 and N coprime */
    moe_cpu_combine(&nothreads, oc, rows, w, row_of, T, K, H);
    float *drows = dalloc((size_t)N * H * 4), *dw = dalloc((size_t)N * 4), *dout2 = dalloc((size_t)T * H * 4);
    int32_t *dro = dalloc((size_t)N * 4);
    up(drows, rows, (size_t)N * H * 4);
    up(dw, w, (size_t)N * 4);
    up(dro, row_of, (size_t)N * 4);
    OK(moe_cuda_combine(mc, dout2, drows, dw, dro, T, K, H, &err));
    down(og, dout2, (size_t)T * H * 4);
    for (int i = 0; i < T * H; i++)
        ck_assert_msg(fabsf(oc[i] - og[i]) <= 1e-6f * (1 + fabsf(oc[i])), "combine %d: %g vs %g", i, og[i], oc[i]);
    void *d[] = {dgu, dout, drows, dw, dout2, dro};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        dfree(d[i]);
    free(gu), free(a), free(b), free(rows), free(w), free(oc), free(og), free(row_of);
}
END_TEST

/* The combine against fmaf in k order from 0.0f on the host (C's fmaf rounds once, as the
 * GPU's): the same bits; and within 1e-6 of moe_cpu_combine. Decode (T 1, K 8, H 2048), a
 * step of 16, H not a multiple of a block, K 1 and the most, a batch larger than a block. */
static void combine_case(int T, int K, int H)
{
    llmrt_error err = {0};
    const int N = T * K;
    float *rows = malloc((size_t)N * H * 4), *w = malloc((size_t)N * 4);
    float *ref = malloc((size_t)T * H * 4), *oc = malloc((size_t)T * H * 4);
    float *og = malloc((size_t)T * H * 4);
    int32_t *row_of = malloc((size_t)N * 4);
    for (int i = 0; i < N * H; i++)
        rows[i] = (float)(2 * urand() - 1);
    for (int i = 0; i < N; i++) /* rows in another order (repeats where 7 divides N) */
        w[i] = (float)urand(), row_of[i] = (int32_t)(((int64_t)i * 7 + 3) % N);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++)
                s = fmaf(w[t * K + k], rows[(int64_t)row_of[t * K + k] * H + h], s);
            ref[(int64_t)t * H + h] = s;
        }
    moe_cpu_combine(&nothreads, oc, rows, w, row_of, T, K, H);
    float *drows = dalloc((size_t)N * H * 4), *dw = dalloc((size_t)N * 4);
    float *dout = dalloc((size_t)T * H * 4);
    int32_t *dro = dalloc((size_t)N * 4);
    up(drows, rows, (size_t)N * H * 4);
    up(dw, w, (size_t)N * 4);
    up(dro, row_of, (size_t)N * 4);
    OK(moe_cuda_combine(mc, dout, drows, dw, dro, T, K, H, &err));
    down(og, dout, (size_t)T * H * 4);
    for (int i = 0; i < T * H; i++) {
        ck_assert_msg(memcmp(&og[i], &ref[i], 4) == 0,
                      "combine T %d K %d H %d: [%d, %d] %.9g, fmaf in k order %.9g", T, K, H,
                      i / H, i % H, og[i], ref[i]);
        ck_assert_msg(fabsf(oc[i] - og[i]) <= 1e-6f * (1 + fabsf(oc[i])),
                      "combine T %d K %d H %d: %d: %g vs the CPU's %g", T, K, H, i, og[i], oc[i]);
    }
    dfree(drows), dfree(dw), dfree(dout), dfree(dro);
    free(rows), free(w), free(ref), free(oc), free(og), free(row_of);
}

START_TEST(combine_bit_identical)
{
    const int shapes[][3] = {{1, 8, 2048}, {16, 8, 2048}, {3, 1, 100}, {5, 32, 300},
                             {13, 4, 72}, {70, 9, 257}, {2, 16, 4096}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        combine_case(shapes[i][0], shapes[i][1], shapes[i][2]);
    printf("combine: %zu shapes, the bits of fmaf in k order\n", sizeof shapes / sizeof *shapes);
}
END_TEST

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
    cuda = (llmrt_backend_ref){d->vtable, NULL, "cuda"};
    llmrt_device_info info;
    int32_t count = 0;
    llmrt_error err = {0};
    if (cuda.vt->probe(&info, 1, &count, &err) != LLMRT_OK || count == 0) {
        printf("SKIP: no CUDA device visible (%s)\n", err.msg);
        exit(77);
    }
    llmrt_section empty = {.name = "backend.cuda"};
    if (cuda.vt->create(&host, &empty, &cuda.b, &err) != LLMRT_OK ||
        moe_cuda_create(&cuda, &mc, &err) != LLMRT_OK) {
        fprintf(stderr, "CUDA backend: %s\n", err.msg);
        exit(1);
    }
    printf("device: %s\n", info.name);
    static llmrt_backend_vtable no_pool; /* zeroed: parallel_for absent, moe_cpu runs serially */
    no_pool.struct_size = sizeof no_pool;
    nothreads = (llmrt_backend_ref){&no_pool, NULL, "none"};
}

int main(void)
{
    open_cuda();
    Suite *s = suite_create("model-qwen3-moe cuda");
    TCase *tc = tcase_create("cuda");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, route_and_sort_match_cpu);
    tcase_add_test(tc, dense_gemv_matches_reference);
    tcase_add_test(tc, swiglu_and_combine_match_cpu);
    tcase_add_test(tc, combine_bit_identical);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    moe_cuda_destroy(mc);
    cuda.vt->destroy(cuda.b);
    return failed ? 1 : 0;
}
