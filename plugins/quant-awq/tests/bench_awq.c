/* bench_awq.c — a benchmark command (not a test): quant-awq CPU kernel throughput.
 *
 *   LLMRT_PLUGIN_DIR=build/lib/llmrt/plugins bench_quant_awq [threads] [out] [in] [group] [simd]
 *
 * Loads a random AWQ linear W [out, in] (default 12288 x 4096, group 128: Qwen3-8B's
 * gate/up projection) on backend-cpu with [backend.cpu] simd = simd (default auto: the int8
 * kernels where the CPU has them; exact: the f32 ones) and reports, for n in {1, 4, 16, 128},
 * the median time of
 * linear_forward, GB/s of the checkpoint's packed weights (qweight + qzeros + scales) and of
 * the repacked bytes actually read, and GFLOP/s. "cpu ms" is the process CPU time per call
 * (all threads): on a machine shared with other work, wall time / cpu time shows how much of
 * the machine the benchmark actually had. */
#include <stdio.h>
#include <stdlib.h>

#include "awq_test_common.h"
#include "clock.h"
#include "stats.h"

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    int64_t out = argc > 2 ? atoll(argv[2]) : 12288, in = argc > 3 ? atoll(argv[3]) : 4096;
    int group = argc > 4 ? atoi(argv[4]) : 128;
    const char *simd = argc > 5 ? argv[5] : "auto";
    llmrt_backend_ref be = at_cpu_backend_simd(threads, simd);
    llmrt_device_info info;
    llmrt_error err = {0};
    be.vt->device_info(be.b, &info, &err);
    at_linear src = at_linear_random(in, out, group, 1);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "bench", &src);
    llmrt_quant *q = at_quant(&be, group);
    llmrt_qlinear *l = NULL;
    double t0 = llmrt_now_s();
    if (at_awq()->linear_load(q, at_ckpt_view(ck), "bench", in, out, &l, &err) != LLMRT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double load_s = llmrt_now_s() - t0;
    double packed = (double)in * out / 2 + (double)(in / group) * out * (0.5 + 2);
    double repacked = (double)at_awq()->linear_bytes(q, l);
    printf("quant-awq cpu: %s, simd %s, W [%lld, %lld] group %d: packed %.1f MB, repacked %.1f "
           "MB, load %.1f ms\n",
           info.name, at_cpu_simd(&be), (long long)out, (long long)in, group, packed * 1e-6,
           repacked * 1e-6, load_s * 1e3);
    printf("%4s %10s %10s %14s %16s %10s\n", "n", "ms", "cpu ms", "packed GB/s", "repacked GB/s",
           "GFLOP/s");
    const int ns[4] = {1, 4, 16, 128};
    at_rng r = {3};
    for (int k = 0; k < 4; k++) {
        int n = ns[k];
        float *x = malloc((size_t)(n * in) * sizeof(float)), *y = malloc((size_t)(n * out) * sizeof(float));
        for (int64_t i = 0; i < n * in; i++)
            x[i] = at_uniform(&r, -1, 1);
        int reps = n == 1 ? 50 : n < 128 ? 15 : 5;
        double t[50], c[50];
        at_awq()->linear_forward(q, l, y, x, n, &err);
        for (int rep = 0; rep < reps; rep++) {
            double s = llmrt_now_s(), cs = llmrt_cpu_s();
            at_awq()->linear_forward(q, l, y, x, n, &err);
            t[rep] = llmrt_now_s() - s;
            c[rep] = llmrt_cpu_s() - cs;
        }
        double med = llmrt_stats_median_inplace(t, (size_t)reps);
        double cpu_med = llmrt_stats_median_inplace(c, (size_t)reps);
        printf("%4d %10.3f %10.3f %14.2f %16.2f %10.2f\n", n, med * 1e3, cpu_med * 1e3,
               packed / med * 1e-9,
               repacked / med * 1e-9, 2.0 * n * in * out / med * 1e-9);
        free(x);
        free(y);
    }
    at_awq()->linear_free(q, l);
    at_awq()->destroy(q);
    at_ckpt_free(ck);
    at_linear_free(&src);
    be.vt->destroy(be.b);
    return 0;
}
