/* bench_gemm.c — a benchmark command (not a test): backend-cpu GEMM throughput.
 *
 *   LLMRT_PLUGIN_DIR=build/lib/llmrt/plugins bench_backend_cpu [threads] [out] [in] [simd]
 *
 * For each weight dtype and n in {1, 4, 16, 128}: median time of many runs, weight GB/s (bytes
 * of W read per call / time) and GFLOP/s, on [backend.cpu] simd = simd (default auto). The
 * weight is larger than the caches, so n = 1 measures the memory path of a decode GEMV. "cpu ms" is the process CPU time per call (all threads):
 * on a shared machine, wall time / cpu time shows how much of the machine the run had. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cpu_test_common.h"
#include "stats.h"

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    int64_t out = argc > 2 ? atoll(argv[2]) : 4096, in = argc > 3 ? atoll(argv[3]) : 4096;
    const char *simd = argc > 4 ? argv[4] : "auto";
    const llmrt_backend_vtable *vt = ct_vtable();
    llmrt_backend *b = ct_create_simd(threads, simd);
    llmrt_device_info info;
    llmrt_error err = {0};
    vt->device_info(b, &info, &err);
    printf("backend-cpu gemm: %s, simd %s, W [%lld, %lld]\n", info.name,
           ct_cpu_ext(b)->simd(b), (long long)out, (long long)in);
    printf("%-5s %4s %10s %10s %10s %10s\n", "dtype", "n", "ms", "cpu ms", "W GB/s", "GFLOP/s");
    const llmrt_dtype types[3] = {LLMRT_DTYPE_BF16, LLMRT_DTYPE_F16, LLMRT_DTYPE_F32};
    const int ns[4] = {1, 4, 16, 128};
    ct_rng r = {42};
    for (int d = 0; d < 3; d++) {
        size_t wbytes = (size_t)(out * in) * llmrt_dtype_size(types[d]);
        llmrt_tensor w = {types[d], 2, {out, in}, NULL};
        if (vt->dev_alloc(b, wbytes, &w.data, &err) != LLMRT_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        for (int64_t i = 0; i < out * in; i++)
            llmrt_store_f(w.data, types[d], i, ct_uniform(&r, -0.1f, 0.1f));
        for (int k = 0; k < 4; k++) {
            int n = ns[k];
            float *x = malloc((size_t)(n * in) * sizeof(float));
            float *y = malloc((size_t)(n * out) * sizeof(float));
            for (int64_t i = 0; i < n * in; i++)
                x[i] = ct_uniform(&r, -1, 1);
            int reps = n == 1 ? 60 : n < 128 ? 20 : 7;
            double t[60], c[60];
            vt->gemm(b, y, x, &w, n, &err); /* warm-up */
            for (int rep = 0; rep < reps; rep++) {
                double t0 = llmrt_now_s(), c0 = llmrt_cpu_s();
                vt->gemm(b, y, x, &w, n, &err);
                t[rep] = llmrt_now_s() - t0;
                c[rep] = llmrt_cpu_s() - c0;
            }
            double med = llmrt_stats_median_inplace(t, (size_t)reps);
            double cpu_med = llmrt_stats_median_inplace(c, (size_t)reps);
            printf("%-5s %4d %10.3f %10.3f %10.2f %10.2f\n", llmrt_dtype_name(types[d]), n,
                   med * 1e3, cpu_med * 1e3,
                   (double)wbytes / med * 1e-9, 2.0 * n * out * in / med * 1e-9);
            free(x);
            free(y);
        }
        vt->dev_free(b, w.data);
    }
    vt->destroy(b);
    return 0;
}
