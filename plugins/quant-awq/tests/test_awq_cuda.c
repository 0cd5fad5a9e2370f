/* test_awq_cuda.c — quant-awq's CUDA kernels (awq_cuda.cu) on the CUDA backend, through the
 * plugin on each backend: the CUDA dequantisation (from the repacked layout) equals the source
 * weights exactly, and CUDA forward equals the CPU kernel for several shapes, group sizes and
 * token counts (the tensor-core GEMV for n <= 32, dequant + cuBLAS above); a graph replay
 * equals eager; fused loads (several linears as one) and every GEMV configuration
 * (K-splitting warps, x staged in shared memory or not, forced through [quant.awq] tune) agree
 * with the CPU too, and so does the GEMV that finishes SwiGLU (linear_forward_fused) with the
 * separate ops.
 *
 * The plugin finds the backend's stream, device and launch protocol through its "llmrt.cuda"
 * extension, as any plugin with CUDA kernels would: this test needs backend-cuda.so and
 * backend-cpu.so built beside quant-awq.so, and nothing of backend-cuda's sources.
 *
 * The batch kernel (awq_cuda_mma.cu, 9..256 rows by default) is checked against the CPU on
 * ragged token counts, partial row and input tiles, every group size, forced row-warp counts,
 * split-K ranges and K splits, with and without SwiGLU; and for batch invariance: each token's
 * outputs from a batch equal, bit for bit, those of the decode GEMV for that token alone.
 *
 * Tolerance: the CUDA path multiplies f16-rounded activations (2^-11 relative) with exact
 * q - z on the tensor cores in f32, so 2e-3 relative L2; 3e-3 above 32 tokens, where the
 * dequantised weights are f16 too. Exits 77 when no CUDA device is visible. CUDA cannot
 * survive fork(), so the suite runs without forking. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/cuda.h>

#include "awq_test_common.h"
#include "mock_backend.h"
#include "test_util.h"

/* ---- the two backends ---- */

static llmrt_backend_ref cuda, cpu;
static llmrt_host host;

#define CT_OK(call)                                                                           \
    do {                                                                                      \
        llmrt_status st_ = (call);                                                            \
        ck_assert_msg(st_ == LLMRT_OK, "%s failed (%s): %s", #call, llmrt_status_str(st_),   \
                      err.msg);                                                               \
    } while (0)

/* Load backend-cuda.so and create it (exit 77 when no CUDA device is visible), with
 * LLMRT_BACKEND_CUDA_PDL / LLMRT_BACKEND_CUDA_TUNE from the environment as its pdl and tune,
 * as the host would give them (a sweep runs the suite with PDL off); and a backend-cpu (the
 * reference). */
static void open_backends(void)
{
    host = mock_host(NULL);
    char *path = tu_plugin_path("backend-cuda.so");
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    if (!d || d->kind != LLMRT_PLUGIN_BACKEND) {
        fprintf(stderr, "cannot load %s\n", path);
        exit(1);
    }
    free(path);
    cuda = (llmrt_backend_ref){d->vtable, NULL, "cuda"};
    llmrt_device_info info;
    int32_t count = 0;
    llmrt_error err = {0};
    if (cuda.vt->probe(&info, 1, &count, &err) != LLMRT_OK) {
        fprintf(stderr, "backend-cuda probe failed: %s\n", err.msg);
        exit(1);
    }
    if (count == 0) {
        printf("SKIP: no CUDA device visible (%s)\n", err.msg);
        exit(77);
    }
    printf("device: %s (cc %d.%d, %d SMs)\n", info.name, info.cc_major, info.cc_minor,
           info.multiprocessors);
    static const char *const env[][2] = {{"pdl", "LLMRT_BACKEND_CUDA_PDL"},
                                         {"tune", "LLMRT_BACKEND_CUDA_TUNE"}};
    const char *keys[2], *values[2], *where[2];
    size_t n = 0;
    for (size_t i = 0; i < 2; i++)
        if (getenv(env[i][1])) {
            keys[n] = env[i][0], values[n] = getenv(env[i][1]), where[n++] = env[i][1];
            printf("[backend.cuda] %s = %s (env %s)\n", env[i][0], getenv(env[i][1]), env[i][1]);
        }
    llmrt_section sec = {"backend.cuda", n, keys, values, where};
    if (cuda.vt->create(&host, &sec, &cuda.b, &err) != LLMRT_OK) {
        fprintf(stderr, "creating the CUDA backend failed: %s\n", err.msg);
        exit(1);
    }
    if (!llmrt_cuda_ext_of(&cuda)) {
        fprintf(stderr, "backend-cuda does not offer the \"" LLMRT_EXT_CUDA "\" extension\n");
        exit(1);
    }
    cpu = at_cpu_backend(0);
}

static void close_backends(void)
{
    cuda.vt->destroy(cuda.b);
    cpu.vt->destroy(cpu.b);
}

/* ---- buffers on a backend (synchronous) ---- */

static void *ct_alloc(const llmrt_backend_ref *b, size_t bytes)
{
    llmrt_error err = {0};
    void *p = NULL;
    CT_OK(b->vt->dev_alloc(b->b, bytes, &p, &err));
    return p;
}

static void ct_free(const llmrt_backend_ref *b, void *p) { b->vt->dev_free(b->b, p); }

static void ct_sync(const llmrt_backend_ref *b)
{
    llmrt_error err = {0};
    CT_OK(b->vt->synchronize(b->b, &err));
}

static void ct_upload(const llmrt_backend_ref *b, void *dev, const void *h, size_t bytes)
{
    llmrt_error err = {0};
    CT_OK(b->vt->copy(b->b, dev, h, bytes, LLMRT_COPY_H2D, &err));
    ct_sync(b);
}

static void ct_download(const llmrt_backend_ref *b, void *h, const void *dev, size_t bytes)
{
    llmrt_error err = {0};
    CT_OK(b->vt->copy(b->b, h, dev, bytes, LLMRT_COPY_D2H, &err));
    ct_sync(b);
}

static void *ct_dup(const llmrt_backend_ref *b, const void *h, size_t bytes)
{
    void *p = ct_alloc(b, bytes);
    ct_upload(b, p, h, bytes);
    return p;
}

/* n floats of device memory set to NaN, so an unwritten output fails the comparison */
static void ct_poison(const llmrt_backend_ref *b, void *dev, size_t n)
{
    float *h = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++)
        h[i] = NAN;
    ct_upload(b, dev, h, n * sizeof(float));
    free(h);
}

/* ---- random inputs (splitmix64, deterministic per seed) ---- */

typedef struct ct_rng {
    uint64_t s;
} ct_rng;

static uint64_t ct_next(ct_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float *ct_rand_f32(ct_rng *r, size_t n, float lo, float hi)
{
    float *p = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++)
        p[i] = lo + (hi - lo) * (float)((ct_next(r) >> 40) * (1.0 / 16777216.0));
    return p;
}

/* ---- comparison ---- */

/* Assert a matches ref within tol (relative L2) and has no NaN/inf where ref is finite. */
static void ct_assert_close(const float *a, const float *ref, size_t n, double tol,
                            const char *what)
{
    double num = 0, den = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) && isfinite(ref[i])) {
            bad++;
            continue;
        }
        if (!isfinite(ref[i]))
            continue;
        const double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    const double e = den > 0 ? sqrt(num / den) : sqrt(num);
    size_t first = 0;
    for (; first < n && !(fabsf(a[first] - ref[first]) > 0 || (isnan(a[first]) != isnan(ref[first]))); first++)
        ;
    ck_assert_msg(bad == 0, "%s: %zu of %zu values are NaN/inf where the reference is finite "
                  "(unwritten output?); first difference at %zu: %g vs %g",
                  what, bad, n, first, first < n ? a[first] : 0.0, first < n ? ref[first] : 0.0);
    ck_assert_msg(e <= tol, "%s: relative error %.3g > %.3g (n = %zu; first difference at %zu: %.9g "
                  "vs %.9g)", what, e, tol, n, first, first < n ? a[first] : 0.0,
                  first < n ? ref[first] : 0.0);
}

#define TOL_AWQ 2e-3
#define TOL_AWQ_PREFILL 3e-3

typedef struct awq_case {
    int64_t in, out, group;
} awq_case;

static const awq_case cases[] = {
    {4096, 4096, 128}, /* q/o_proj of Qwen3-8B */
    {4096, 1024, 128}, /* k/v_proj: few rows, split K */
    {12288, 512, 128}, /* down_proj-like: long K, few rows (16 warps: 3 iterations each) */
    {8192, 512, 128},  /* 16 warps with 2 iterations each (the double-buffered loop's end) */
    {1024, 3072, 64},
    {96, 24, 32},      /* padding in both dimensions */
    {512, 200, 32},
};

static const int ns[] = {1, 2, 7, 8, 9, 16, 17, 32, 33, 100};

/* Free one linear loaded on both backends, and the two quant instances. */
static void free_pair(llmrt_quant *q_cuda, llmrt_qlinear *l_cuda, llmrt_quant *q_cpu,
                      llmrt_qlinear *l_cpu)
{
    const llmrt_quant_vtable *qv = at_awq();
    qv->linear_free(q_cuda, l_cuda);
    qv->linear_free(q_cpu, l_cpu);
    qv->destroy(q_cuda);
    qv->destroy(q_cpu);
}

START_TEST(test_awq_vs_cpu)
{
    const awq_case *c = &cases[_i];
    llmrt_error err = {0};
    at_linear lin = at_linear_random(c->in, c->out, c->group, 1000 + (uint64_t)_i);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "layer", &lin);
    const llmrt_quant_vtable *qv = at_awq();
    llmrt_quant *q_cuda = at_quant(&cuda, (int)c->group);
    llmrt_quant *q_cpu = at_quant(&cpu, (int)c->group);
    llmrt_qlinear *l_cuda = NULL, *l_cpu = NULL;
    CT_OK(qv->linear_load(q_cuda, at_ckpt_view(ck), "layer", c->in, c->out, &l_cuda, &err));
    CT_OK(qv->linear_load(q_cpu, at_ckpt_view(ck), "layer", c->in, c->out, &l_cpu, &err));
    ck_assert_uint_gt(qv->linear_bytes(q_cuda, l_cuda), (uint64_t)(c->in * c->out / 2));

    /* the repacked layout dequantises to exactly the source weights */
    if (qv->linear_dequant) {
        float *w = malloc((size_t)(c->in * c->out) * sizeof(float));
        CT_OK(qv->linear_dequant(q_cuda, l_cuda, w, &err));
        for (int64_t i = 0; i < c->in * c->out; i++)
            ck_assert_msg(w[i] == lin.w[i], "[%lld x %lld] g%lld dequant at row %lld col %lld: %g vs %g",
                          (long long)c->out, (long long)c->in, (long long)c->group,
                          (long long)(i / c->in), (long long)(i % c->in), w[i], lin.w[i]);
        free(w);
    }

    ct_rng r = {2000 + (uint64_t)_i};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        const int n = ns[ni];
        float *x = ct_rand_f32(&r, (size_t)(n * c->in), -2, 2);
        float *res[2];
        const llmrt_backend_ref *bes[2] = {&cuda, &cpu};
        llmrt_quant *qs[2] = {q_cuda, q_cpu};
        llmrt_qlinear *ls[2] = {l_cuda, l_cpu};
        for (int b = 0; b < 2; b++) {
            float *dx = ct_dup(bes[b], x, (size_t)(n * c->in) * sizeof(float));
            float *dy = ct_alloc(bes[b], (size_t)(n * c->out) * sizeof(float));
            res[b] = malloc((size_t)(n * c->out) * sizeof(float));
            for (int rep = 0; rep < 2; rep++) { /* split-K counters must reset */
                ct_poison(bes[b], dy, (size_t)(n * c->out));
                CT_OK(qv->linear_forward(qs[b], ls[b], dy, dx, n, &err));
                ct_download(bes[b], res[b], dy, (size_t)(n * c->out) * sizeof(float));
            }
            ct_free(bes[b], dx), ct_free(bes[b], dy);
        }
        char what[128];
        snprintf(what, sizeof what, "awq [%lld x %lld] g%lld n=%d", (long long)c->out,
                 (long long)c->in, (long long)c->group, n);
        ct_assert_close(res[0], res[1], (size_t)(n * c->out), n > 32 ? TOL_AWQ_PREFILL : TOL_AWQ, what);
        free(res[0]), free(res[1]), free(x);
    }
    free_pair(q_cuda, l_cuda, q_cpu, l_cpu);
    at_ckpt_free(ck);
    at_linear_free(&lin);
}
END_TEST

/* Two linears in one graph (they share the split-K scratch), replayed on new inputs. */
START_TEST(test_awq_graph)
{
    llmrt_error err = {0};
    at_linear la = at_linear_random(4096, 1024, 128, 7), lb = at_linear_random(1024, 4096, 128, 8);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "a", &la);
    at_linear_add(ck, "b", &lb);
    const llmrt_quant_vtable *qv = at_awq();
    llmrt_quant *q = at_quant(&cuda, 128);
    llmrt_qlinear *a = NULL, *b = NULL;
    CT_OK(qv->linear_load(q, at_ckpt_view(ck), "a", 4096, 1024, &a, &err));
    CT_OK(qv->linear_load(q, at_ckpt_view(ck), "b", 1024, 4096, &b, &err));
    ct_rng r = {31};
    const int n = 1;
    float *x = ct_alloc(&cuda, 4096 * 4), *h = ct_alloc(&cuda, 1024 * 4), *y = ct_alloc(&cuda, 4096 * 4);
    float *ye = malloc(4096 * 4), *yg = malloc(4096 * 4);
    float *xh = ct_rand_f32(&r, 4096, -1, 1);
    ct_upload(&cuda, x, xh, 4096 * 4);
    CT_OK(qv->linear_forward(q, a, h, x, n, &err)); /* warm-up */
    CT_OK(qv->linear_forward(q, b, y, h, n, &err));
    ct_sync(&cuda);
    llmrt_graph *g = NULL;
    CT_OK(cuda.vt->graph_begin(cuda.b, &err));
    CT_OK(qv->linear_forward(q, a, h, x, n, &err));
    CT_OK(qv->linear_forward(q, b, y, h, n, &err));
    CT_OK(cuda.vt->graph_end(cuda.b, &g, &err));
    for (int it = 0; it < 3; it++) {
        free(xh);
        xh = ct_rand_f32(&r, 4096, -1, 1);
        ct_upload(&cuda, x, xh, 4096 * 4);
        ct_poison(&cuda, y, 4096);
        CT_OK(qv->linear_forward(q, a, h, x, n, &err));
        CT_OK(qv->linear_forward(q, b, y, h, n, &err));
        ct_download(&cuda, ye, y, 4096 * 4);
        ct_poison(&cuda, y, 4096);
        ct_poison(&cuda, h, 1024);
        CT_OK(cuda.vt->graph_launch(cuda.b, g, &err));
        ct_download(&cuda, yg, y, 4096 * 4);
        ct_assert_close(yg, ye, 4096, 0.0, "awq graph replay vs eager");
    }
    cuda.vt->graph_destroy(cuda.b, g);
    qv->linear_free(q, a);
    qv->linear_free(q, b);
    qv->destroy(q);
    ct_free(&cuda, x), ct_free(&cuda, h), ct_free(&cuda, y);
    free(ye), free(yg), free(xh);
    at_ckpt_free(ck);
    at_linear_free(&la);
    at_linear_free(&lb);
}
END_TEST

/* A fused load (q/k/v-like parts of one input) dequantises to the parts' weights stacked in
 * order, and computes what the CPU computes for the same fused load. */
START_TEST(test_awq_fused)
{
    static const struct {
        int64_t in, group;
        int n_parts;
        int64_t outs[3];
    } fc[] = {
        {4096, 128, 3, {4096, 1024, 1024}}, /* Qwen3-8B q/k/v */
        {1024, 64, 2, {3072, 3072}},        /* gate/up */
        {96, 32, 3, {48, 32, 24}},          /* small, padded last part */
    };
    const int i = _i;
    llmrt_error err = {0};
    at_ckpt *ck = at_ckpt_new();
    at_linear parts[3];
    char names[3][16];
    const char *prefixes[3];
    int64_t total = 0;
    for (int p = 0; p < fc[i].n_parts; p++) {
        parts[p] = at_linear_random(fc[i].in, fc[i].outs[p], fc[i].group, 300 + 10 * (uint64_t)i + (uint64_t)p);
        snprintf(names[p], sizeof names[p], "part%d", p);
        prefixes[p] = names[p];
        at_linear_add(ck, names[p], &parts[p]);
        total += fc[i].outs[p];
    }
    const llmrt_quant_vtable *qv = at_awq();
    ck_assert_ptr_nonnull(qv->linear_load_fused);
    llmrt_quant *q_cuda = at_quant(&cuda, (int)fc[i].group);
    llmrt_quant *q_cpu = at_quant(&cpu, (int)fc[i].group);
    llmrt_qlinear *l_cuda = NULL, *l_cpu = NULL;
    CT_OK(qv->linear_load_fused(q_cuda, at_ckpt_view(ck), prefixes, fc[i].n_parts, fc[i].in,
                                fc[i].outs, &l_cuda, &err));
    CT_OK(qv->linear_load_fused(q_cpu, at_ckpt_view(ck), prefixes, fc[i].n_parts, fc[i].in,
                                fc[i].outs, &l_cpu, &err));
    const int64_t in = fc[i].in;
    float *w = malloc((size_t)(total * in) * sizeof(float));
    CT_OK(qv->linear_dequant(q_cuda, l_cuda, w, &err));
    int64_t row0 = 0;
    for (int p = 0; p < fc[i].n_parts; p++) {
        ck_assert_msg(memcmp(w + row0 * in, parts[p].w, (size_t)(fc[i].outs[p] * in) * sizeof(float)) == 0,
                      "fused case %d: part %d's rows differ from its weights", i, p);
        row0 += fc[i].outs[p];
    }
    free(w);
    ct_rng r = {77 + (uint64_t)i};
    static const int fns[] = {1, 3, 8, 12, 32, 40};
    for (size_t ni = 0; ni < sizeof fns / sizeof *fns; ni++) {
        const int n = fns[ni];
        float *x = ct_rand_f32(&r, (size_t)(n * in), -2, 2);
        float *res[2];
        const llmrt_backend_ref *bes[2] = {&cuda, &cpu};
        llmrt_quant *qs[2] = {q_cuda, q_cpu};
        llmrt_qlinear *ls[2] = {l_cuda, l_cpu};
        for (int bk = 0; bk < 2; bk++) {
            float *dx = ct_dup(bes[bk], x, (size_t)(n * in) * sizeof(float));
            float *dy = ct_alloc(bes[bk], (size_t)(n * total) * sizeof(float));
            ct_poison(bes[bk], dy, (size_t)(n * total));
            CT_OK(qv->linear_forward(qs[bk], ls[bk], dy, dx, n, &err));
            res[bk] = malloc((size_t)(n * total) * sizeof(float));
            ct_download(bes[bk], res[bk], dy, (size_t)(n * total) * sizeof(float));
            ct_free(bes[bk], dx), ct_free(bes[bk], dy);
        }
        char what[96];
        snprintf(what, sizeof what, "awq fused case %d n=%d", i, n);
        ct_assert_close(res[0], res[1], (size_t)(n * total), n > 32 ? TOL_AWQ_PREFILL : TOL_AWQ, what);
        free(res[0]), free(res[1]), free(x);
    }
    free_pair(q_cuda, l_cuda, q_cpu, l_cpu);
    for (int p = 0; p < fc[i].n_parts; p++)
        at_linear_free(&parts[p]);
    at_ckpt_free(ck);
}
END_TEST

/* Every GEMV configuration the loader may pick (K-splitting warps 1..16, forced through
 * [quant.awq] tune, read when an awq instance is created), and x read from global memory
 * instead of staged in shared memory (sx=0), compute the same as the CPU. */
START_TEST(test_awq_configs)
{
    static const char *const tunes[] = {"kw=1", "kw=2", "kw=4", "kw=8", "kw=16", "sx=0,kw=4"};
    const char *tune = tunes[_i];
    llmrt_error err = {0};
    at_linear lin = at_linear_random(2048, 512, 128, 4242);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "l", &lin);
    const llmrt_quant_vtable *qv = at_awq();
    llmrt_quant *q_cuda = at_quant_tune(&cuda, 128, tune);
    llmrt_quant *q_cpu = at_quant(&cpu, 128);
    llmrt_qlinear *l_cuda = NULL, *l_cpu = NULL;
    CT_OK(qv->linear_load(q_cuda, at_ckpt_view(ck), "l", 2048, 512, &l_cuda, &err));
    CT_OK(qv->linear_load(q_cpu, at_ckpt_view(ck), "l", 2048, 512, &l_cpu, &err));
    ct_rng r = {55};
    static const int cns[] = {1, 5, 8, 9, 16, 20, 32};
    for (size_t ni = 0; ni < sizeof cns / sizeof *cns; ni++) {
        const int n = cns[ni];
        float *x = ct_rand_f32(&r, (size_t)n * 2048, -2, 2);
        float *res[2];
        const llmrt_backend_ref *bes[2] = {&cuda, &cpu};
        llmrt_quant *qs[2] = {q_cuda, q_cpu};
        llmrt_qlinear *ls[2] = {l_cuda, l_cpu};
        for (int bk = 0; bk < 2; bk++) {
            float *dx = ct_dup(bes[bk], x, (size_t)n * 2048 * sizeof(float));
            float *dy = ct_alloc(bes[bk], (size_t)n * 512 * sizeof(float));
            res[bk] = malloc((size_t)n * 512 * sizeof(float));
            for (int rep = 0; rep < 2; rep++) {
                ct_poison(bes[bk], dy, (size_t)n * 512);
                CT_OK(qv->linear_forward(qs[bk], ls[bk], dy, dx, n, &err));
                ct_download(bes[bk], res[bk], dy, (size_t)n * 512 * sizeof(float));
            }
            ct_free(bes[bk], dx), ct_free(bes[bk], dy);
        }
        char what[96];
        snprintf(what, sizeof what, "awq %s n=%d", tune, n);
        ct_assert_close(res[0], res[1], (size_t)n * 512, TOL_AWQ, what);
        free(res[0]), free(res[1]), free(x);
    }
    free_pair(q_cuda, l_cuda, q_cpu, l_cpu);
    at_ckpt_free(ck);
    at_linear_free(&lin);
}
END_TEST

/* linear_forward_fused with LLMRT_FUSE_OUT_SWIGLU (the decode GEMV finishing the MLP's
 * SwiGLU, and past 8 rows the batch kernel's GLU epilogue) equals the CPU linear followed by
 * silu(gate) * up, at the K split the loader picks and at forced ones, x staged or read from
 * global memory; the CPU takes no folds, and past the largest row count the call is refused. */
static const struct {
    int64_t in, out;
    const char *tune;
} glu_cases[] = {
    {4096, 3072, NULL},        /* gate/up of a 1536-wide MLP */
    {1024, 2048, NULL},        /* short K: many K-splitting warps */
    {2048, 512, "kw=1"},       /* one warp per block (no split) */
    {2048, 512, "kw=4"},
    {2048, 512, "sx=0,kw=8"},  /* x from global memory */
    {2048, 512, "mma=0"},      /* the GEMV alone: 8 rows */
    {4096, 3072, "mma_split=4"}, /* the batch kernel's split-K, SwiGLU after the sum */
};

START_TEST(test_awq_swiglu)
{
    const int64_t in = glu_cases[_i].in, out = glu_cases[_i].out, half = out / 2;
    llmrt_error err = {0};
    at_linear lin = at_linear_random(in, out, 128, 5000 + (uint64_t)_i);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "l", &lin);
    const llmrt_quant_vtable *qv = at_awq();
    ck_assert_ptr_nonnull(qv->linear_forward_fused);
    llmrt_quant *q_cuda = at_quant_tune(&cuda, 128, glu_cases[_i].tune);
    llmrt_quant *q_cpu = at_quant(&cpu, 128);
    llmrt_qlinear *l_cuda = NULL, *l_cpu = NULL;
    CT_OK(qv->linear_load(q_cuda, at_ckpt_view(ck), "l", in, out, &l_cuda, &err));
    CT_OK(qv->linear_load(q_cpu, at_ckpt_view(ck), "l", in, out, &l_cpu, &err));
    /* the GEMV folds 1..8 rows; the batch kernel, unless switched off, up to its 256 */
    const int max_rows = glu_cases[_i].tune && strstr(glu_cases[_i].tune, "mma=0") ? 8 : 256;
    ck_assert_int_eq(qv->linear_fused_max_rows(q_cpu, l_cpu, LLMRT_FUSE_OUT_SWIGLU), 0);
    ck_assert_int_eq(qv->linear_fused_max_rows(q_cuda, l_cuda, LLMRT_FUSE_OUT_SWIGLU), max_rows);
    ck_assert_int_eq(qv->linear_fused_max_rows(q_cuda, l_cuda, 1u << 30), 0); /* unknown fold */

    ct_rng r = {77 + (uint64_t)_i};
    static const int gns[] = {1, 2, 5, 8, 9, 24, 33, 100};
    for (size_t ni = 0; ni < sizeof gns / sizeof *gns; ni++) {
        const int n = gns[ni];
        if (n > max_rows)
            continue;
        float *x = ct_rand_f32(&r, (size_t)(n * in), -2, 2);
        /* the reference: the CPU linear, then silu(gate) * up as the backends' swiglu */
        float *cx = ct_dup(&cpu, x, (size_t)(n * in) * sizeof(float));
        float *cy = ct_alloc(&cpu, (size_t)(n * out) * sizeof(float));
        CT_OK(qv->linear_forward(q_cpu, l_cpu, cy, cx, n, &err));
        float *gu = malloc((size_t)(n * out) * sizeof(float));
        ct_download(&cpu, gu, cy, (size_t)(n * out) * sizeof(float));
        float *want = malloc((size_t)(n * half) * sizeof(float));
        for (int t = 0; t < n; t++)
            for (int64_t i = 0; i < half; i++) {
                const float g = gu[t * out + i];
                want[t * half + i] = g / (1.0f + expf(-g)) * gu[t * out + half + i];
            }
        float *dx = ct_dup(&cuda, x, (size_t)(n * in) * sizeof(float));
        float *dy = ct_alloc(&cuda, (size_t)(n * half) * sizeof(float));
        float *got = malloc((size_t)(n * half) * sizeof(float));
        for (int rep = 0; rep < 2; rep++) {
            ct_poison(&cuda, dy, (size_t)(n * half));
            CT_OK(qv->linear_forward_fused(q_cuda, l_cuda, dy, dx, n, LLMRT_FUSE_OUT_SWIGLU, &err));
            ct_download(&cuda, got, dy, (size_t)(n * half) * sizeof(float));
            char what[128];
            snprintf(what, sizeof what, "awq swiglu [%lld x %lld] %s n=%d", (long long)out,
                     (long long)in, glu_cases[_i].tune ? glu_cases[_i].tune : "", n);
            ct_assert_close(got, want, (size_t)(n * half), TOL_AWQ, what);
        }
        free(x), free(gu), free(want), free(got);
        ct_free(&cpu, cx), ct_free(&cpu, cy), ct_free(&cuda, dx), ct_free(&cuda, dy);
    }
    /* past the largest: refused, with nothing enqueued */
    ck_assert_int_eq(qv->linear_forward_fused(q_cuda, l_cuda, NULL, NULL, max_rows + 1,
                                              LLMRT_FUSE_OUT_SWIGLU, &err),
                     LLMRT_ERR_UNSUPPORTED);
    free_pair(q_cuda, l_cuda, q_cpu, l_cpu);
    at_ckpt_free(ck);
    at_linear_free(&lin);
}
END_TEST

/* x staged in more shared memory (tune sx_kb: every decode row count of these shapes staged,
 * where by default only a few rows fit) gives the bits of x read from global memory, plain
 * and with the SwiGLU fold: staging changes where B fragments come from, not their values. */
START_TEST(test_awq_sx_kb)
{
    static const struct {
        int64_t in, out;
        int glu;
    } sk[] = {{12288, 512, 0}, {4096, 3072, 1}};
    const int64_t in = sk[_i].in, out = sk[_i].out, yw = sk[_i].glu ? out / 2 : out;
    llmrt_error err = {0};
    at_linear lin = at_linear_random(in, out, 128, 6100 + (uint64_t)_i);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "l", &lin);
    const llmrt_quant_vtable *qv = at_awq();
    llmrt_quant *qs[2] = {at_quant_tune(&cuda, 128, "mma=0"),
                          at_quant_tune(&cuda, 128, "mma=0,sx_kb=224")};
    llmrt_qlinear *ls[2] = {NULL, NULL};
    for (int v = 0; v < 2; v++)
        CT_OK(qv->linear_load(qs[v], at_ckpt_view(ck), "l", in, out, &ls[v], &err));
    ct_rng r = {91 + (uint64_t)_i};
    static const int ns[] = {1, 2, 5, 8};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        const int n = ns[ni];
        float *x = ct_rand_f32(&r, (size_t)(n * in), -2, 2);
        float *dx = ct_dup(&cuda, x, (size_t)(n * in) * sizeof(float));
        float *dy = ct_alloc(&cuda, (size_t)(n * yw) * sizeof(float));
        float *got[2];
        for (int v = 0; v < 2; v++) {
            got[v] = malloc((size_t)(n * yw) * sizeof(float));
            ct_poison(&cuda, dy, (size_t)(n * yw));
            if (sk[_i].glu)
                CT_OK(qv->linear_forward_fused(qs[v], ls[v], dy, dx, n, LLMRT_FUSE_OUT_SWIGLU,
                                               &err));
            else
                CT_OK(qv->linear_forward(qs[v], ls[v], dy, dx, n, &err));
            ct_download(&cuda, got[v], dy, (size_t)(n * yw) * sizeof(float));
        }
        for (int64_t i = 0; i < n * yw; i++)
            ck_assert_msg(memcmp(&got[0][i], &got[1][i], sizeof(float)) == 0,
                          "[%lld x %lld]%s n=%d: output %lld is %.9g with sx_kb=224, %.9g without",
                          (long long)out, (long long)in, sk[_i].glu ? " swiglu" : "", n,
                          (long long)i, got[1][i], got[0][i]);
        free(got[0]), free(got[1]), free(x);
        ct_free(&cuda, dx), ct_free(&cuda, dy);
    }
    for (int v = 0; v < 2; v++)
        qv->linear_free(qs[v], ls[v]), qv->destroy(qs[v]);
    at_ckpt_free(ck);
    at_linear_free(&lin);
}
END_TEST

/* ---- the batch kernel (9..256 rows) ---- */

/* Shapes with partial tiles: rows not a multiple of a block's 128 or 256, inputs not a
 * multiple of an iteration's 256 (the last one zero-padded), every group size; each under the
 * plan the kernel picks and under forced row warps, split-K ranges and K splits. */
static const struct {
    int64_t in, out, group;
    const char *tune;
} mma_cases[] = {
    {4096, 6144, 128, NULL},          /* q/k/v of Qwen3-8B */
    {4096, 4096, 128, NULL},          /* o_proj: split-K by default (few row blocks) */
    {12288, 512, 128, NULL},          /* down-like: long K, few rows */
    {544, 200, 32, NULL},             /* partial rows and a partial last iteration */
    {1088, 3000, 64, "mma_w=8"},      /* partial row block of 8 warps */
    {2048, 1040, 128, "mma_w=4,mma_split=8"}, /* kw 8: one slice per range */
    {2048, 512, 128, "kw=2,mma_split=2"},
    {2048, 512, 128, "kw=1"},         /* one slice: stored as it is */
    {96, 24, 32, "mma_split=16"},     /* tiny; the split is capped at the K split */
    {4096, 1024, 128, "mma_stages=4"}, /* a deeper weight ring */
    {4096, 1024, 128, "mma_bn=16"},    /* 16-token column blocks */
    {4096, 6144, 128, "mma_smem_kb=99,mma_w=8"}, /* sm_86's 99 KB: 4 row warps, not 8 */
    {3008, 640, 64, "mma_stages=5,mma_w=8"}, /* the deepest, past a slice's iterations */
    {4096, 4096, 128, "mma_xdb=1"},    /* one x stage */
};

static const int mma_ns[] = {9, 13, 16, 17, 24, 31, 32, 33, 47, 64, 65, 100, 129, 200, 256};

START_TEST(test_awq_mma_vs_cpu)
{
    const int64_t in = mma_cases[_i].in, out = mma_cases[_i].out, group = mma_cases[_i].group;
    llmrt_error err = {0};
    at_linear lin = at_linear_random(in, out, group, 9100 + (uint64_t)_i);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "l", &lin);
    const llmrt_quant_vtable *qv = at_awq();
    llmrt_quant *q_cuda = at_quant_tune(&cuda, (int)group, mma_cases[_i].tune);
    llmrt_quant *q_cpu = at_quant(&cpu, (int)group);
    llmrt_qlinear *l_cuda = NULL, *l_cpu = NULL;
    CT_OK(qv->linear_load(q_cuda, at_ckpt_view(ck), "l", in, out, &l_cuda, &err));
    CT_OK(qv->linear_load(q_cpu, at_ckpt_view(ck), "l", in, out, &l_cpu, &err));
    ct_rng r = {9200 + (uint64_t)_i};
    for (size_t ni = 0; ni < sizeof mma_ns / sizeof *mma_ns; ni++) {
        const int n = mma_ns[ni];
        float *x = ct_rand_f32(&r, (size_t)n * (size_t)in, -2, 2);
        float *res[2];
        const llmrt_backend_ref *bes[2] = {&cuda, &cpu};
        llmrt_quant *qs[2] = {q_cuda, q_cpu};
        llmrt_qlinear *ls[2] = {l_cuda, l_cpu};
        for (int bk = 0; bk < 2; bk++) {
            float *dx = ct_dup(bes[bk], x, (size_t)n * (size_t)in * sizeof(float));
            float *dy = ct_alloc(bes[bk], (size_t)n * (size_t)out * sizeof(float));
            res[bk] = malloc((size_t)n * (size_t)out * sizeof(float));
            for (int rep = 0; rep < 2; rep++) { /* the partials are reused: a second call agrees */
                ct_poison(bes[bk], dy, (size_t)n * (size_t)out);
                CT_OK(qv->linear_forward(qs[bk], ls[bk], dy, dx, n, &err));
                ct_download(bes[bk], res[bk], dy, (size_t)n * (size_t)out * sizeof(float));
            }
            ct_free(bes[bk], dx), ct_free(bes[bk], dy);
        }
        char what[160];
        snprintf(what, sizeof what, "awq batch kernel [%lld x %lld] g%lld %s n=%d",
                 (long long)out, (long long)in, (long long)group,
                 mma_cases[_i].tune ? mma_cases[_i].tune : "", n);
        ct_assert_close(res[0], res[1], (size_t)n * (size_t)out, TOL_AWQ, what);
        free(res[0]), free(res[1]), free(x);
    }
    free_pair(q_cuda, l_cuda, q_cpu, l_cpu);
    at_ckpt_free(ck);
    at_linear_free(&lin);
}
END_TEST

/* Batch invariance: token j's outputs in a batch of n (the batch kernel, or the GEMV for
 * n <= 8) equal bit for bit those of the GEMV for token j alone — with and without SwiGLU,
 * under split-K and forced row warps. Greedy decoding of a batch then picks the tokens each
 * request would pick alone. */
static const struct {
    int64_t in, out;
    const char *tune;
    int glu;
} inv_cases[] = {
    {4096, 1024, NULL, 0},               /* kw 16: 16 slices, split-K */
    {1024, 3072, NULL, 1},               /* gate/up of a 1536-wide MLP, SwiGLU */
    {2048, 1536, "mma_w=8", 0},
    {2048, 1536, "mma_w=4,mma_split=4", 1},
    {4096, 512, "kw=4,mma_split=2", 0},
    {1024, 1024, "kw=1", 0},             /* one slice, stored without the 0 + sum */
    {1024, 1024, "kw=1", 1},             /* GLU adds from 0 even for one slice */
    {2048, 1536, "mma_stages=3", 1},     /* the ring's depth changes no sum */
    {2048, 1536, "mma_bn=8,mma_w=8", 0}, /* nor the column blocks' width */
    {2048, 1536, "mma_smem_kb=99,mma_w=8", 1}, /* sm_86's 99 KB: the kernel still serves
                                                 (4 row warps): past 32 rows the fallback,
                                                 cuBLAS, would not be invariant */
    {4096, 1024, "mma_xdb=1", 0},        /* one x stage */
    {4096, 1024, "mma_tune=0", 0},       /* the built-in launch shapes, not timed ones */
    {1024, 3072, "mma_xdb=1,mma_stages=4", 1},
};

START_TEST(test_awq_mma_invariant)
{
    const int64_t in = inv_cases[_i].in, out = inv_cases[_i].out;
    const int glu = inv_cases[_i].glu;
    const int64_t ow = glu ? out / 2 : out;
    llmrt_error err = {0};
    at_linear lin = at_linear_random(in, out, 128, 9300 + (uint64_t)_i);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "l", &lin);
    const llmrt_quant_vtable *qv = at_awq();
    llmrt_quant *q = at_quant_tune(&cuda, 128, inv_cases[_i].tune);
    llmrt_qlinear *l = NULL;
    CT_OK(qv->linear_load(q, at_ckpt_view(ck), "l", in, out, &l, &err));
    ct_rng r = {9400 + (uint64_t)_i};
    static const int ins[] = {3, 9, 20, 37, 64, 130};
    for (size_t ni = 0; ni < sizeof ins / sizeof *ins; ni++) {
        const int n = ins[ni];
        float *x = ct_rand_f32(&r, (size_t)n * (size_t)in, -2, 2);
        float *dx = ct_dup(&cuda, x, (size_t)n * (size_t)in * sizeof(float));
        float *dy = ct_alloc(&cuda, (size_t)n * (size_t)ow * sizeof(float));
        float *batch = malloc((size_t)n * (size_t)ow * sizeof(float));
        float *alone = malloc((size_t)ow * sizeof(float));
        ct_poison(&cuda, dy, (size_t)n * (size_t)ow);
        if (glu)
            CT_OK(qv->linear_forward_fused(q, l, dy, dx, n, LLMRT_FUSE_OUT_SWIGLU, &err));
        else
            CT_OK(qv->linear_forward(q, l, dy, dx, n, &err));
        ct_download(&cuda, batch, dy, (size_t)n * (size_t)ow * sizeof(float));
        for (int j = 0; j < n; j++) {
            float *xj = ct_dup(&cuda, x + (size_t)j * (size_t)in, (size_t)in * sizeof(float));
            ct_poison(&cuda, dy, (size_t)ow);
            if (glu)
                CT_OK(qv->linear_forward_fused(q, l, dy, xj, 1, LLMRT_FUSE_OUT_SWIGLU, &err));
            else
                CT_OK(qv->linear_forward(q, l, dy, xj, 1, &err));
            ct_download(&cuda, alone, dy, (size_t)ow * sizeof(float));
            for (int64_t i = 0; i < ow; i++)
                ck_assert_msg(memcmp(&alone[i], &batch[(size_t)j * (size_t)ow + (size_t)i],
                                     sizeof(float)) == 0,
                              "[%lld x %lld] %s%s n=%d: token %d output %lld is %.9g in the "
                              "batch, %.9g alone",
                              (long long)out, (long long)in,
                              inv_cases[_i].tune ? inv_cases[_i].tune : "", glu ? " swiglu" : "",
                              n, j, (long long)i, batch[(size_t)j * (size_t)ow + (size_t)i],
                              alone[i]);
            ct_free(&cuda, xj);
        }
        ct_free(&cuda, dx), ct_free(&cuda, dy);
        free(x), free(batch), free(alone);
    }
    qv->linear_free(q, l);
    qv->destroy(q);
    at_ckpt_free(ck);
    at_linear_free(&lin);
}
END_TEST

/* Two instances with other batch-kernel knobs in one process (as `llmrt bench` loads two
 * configs): each launches with the shared memory its knobs need — a kernel's shared-memory
 * attribute is per process, so the one made last must not shrink it for the other — and the
 * double-buffered x stage, the ring's depth and the launch shapes timed at load give the bits
 * of the single stage and the built-in shapes. */
static const struct {
    int64_t in, out;
    int glu;
} two_cases[] = {
    {4096, 4096, 0}, /* o_proj: split-K at every row count */
    {1024, 3072, 1}, /* SwiGLU */
    {12288, 512, 0}, /* long K, few rows */
};

START_TEST(test_awq_mma_two_instances)
{
    const int64_t in = two_cases[_i].in, out = two_cases[_i].out;
    const int glu = two_cases[_i].glu;
    const int64_t ow = glu ? out / 2 : out;
    llmrt_error err = {0};
    at_linear lin = at_linear_random(in, out, 128, 9500 + (uint64_t)_i);
    at_ckpt *ck = at_ckpt_new();
    at_linear_add(ck, "l", &lin);
    const llmrt_quant_vtable *qv = at_awq();
    llmrt_quant *qs[2] = {at_quant_tune(&cuda, 128, NULL),
                          at_quant_tune(&cuda, 128, "mma_xdb=1,mma_stages=3,mma_tune=0")};
    llmrt_qlinear *ls[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++)
        CT_OK(qv->linear_load(qs[k], at_ckpt_view(ck), "l", in, out, &ls[k], &err));
    ct_rng r = {9600 + (uint64_t)_i};
    static const int ns[] = {9, 16, 32, 64, 100};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        const int n = ns[ni];
        float *x = ct_rand_f32(&r, (size_t)n * (size_t)in, -2, 2);
        float *dx = ct_dup(&cuda, x, (size_t)n * (size_t)in * sizeof(float));
        float *dy = ct_alloc(&cuda, (size_t)n * (size_t)ow * sizeof(float));
        float *res[2];
        for (int k = 0; k < 2; k++) {
            res[k] = malloc((size_t)n * (size_t)ow * sizeof(float));
            for (int rep = 0; rep < 3; rep++) {
                ct_poison(&cuda, dy, (size_t)n * (size_t)ow);
                if (glu)
                    CT_OK(qv->linear_forward_fused(qs[k], ls[k], dy, dx, n,
                                                   LLMRT_FUSE_OUT_SWIGLU, &err));
                else
                    CT_OK(qv->linear_forward(qs[k], ls[k], dy, dx, n, &err));
                ct_download(&cuda, res[k], dy, (size_t)n * (size_t)ow * sizeof(float));
            }
        }
        for (int64_t i = 0; i < (int64_t)n * ow; i++)
            ck_assert_msg(memcmp(&res[0][i], &res[1][i], sizeof(float)) == 0,
                          "[%lld x %lld]%s n=%d: output %lld is %.9g by default, %.9g with "
                          "mma_xdb=1,mma_stages=3,mma_tune=0 (the instance made second)",
                          (long long)out, (long long)in, glu ? " swiglu" : "", n, (long long)i,
                          res[0][i], res[1][i]);
        ct_free(&cuda, dx), ct_free(&cuda, dy);
        free(x), free(res[0]), free(res[1]);
    }
    for (int k = 0; k < 2; k++) {
        qv->linear_free(qs[k], ls[k]);
        qv->destroy(qs[k]);
    }
    at_ckpt_free(ck);
    at_linear_free(&lin);
}
END_TEST

int main(void)
{
    open_backends();
    Suite *s = suite_create("quant-awq.cuda");
    TCase *tc = tcase_create("awq");
    tcase_set_timeout(tc, 900);
    tcase_add_loop_test(tc, test_awq_vs_cpu, 0, (int)(sizeof cases / sizeof *cases));
    tcase_add_test(tc, test_awq_graph);
    tcase_add_loop_test(tc, test_awq_fused, 0, 3);
    tcase_add_loop_test(tc, test_awq_configs, 0, 6);
    tcase_add_loop_test(tc, test_awq_swiglu, 0, (int)(sizeof glu_cases / sizeof *glu_cases));
    tcase_add_loop_test(tc, test_awq_sx_kb, 0, 2);
    tcase_add_loop_test(tc, test_awq_mma_vs_cpu, 0, (int)(sizeof mma_cases / sizeof *mma_cases));
    tcase_add_loop_test(tc, test_awq_mma_invariant, 0, (int)(sizeof inv_cases / sizeof *inv_cases));
    tcase_add_loop_test(tc, test_awq_mma_two_instances, 0,
                        (int)(sizeof two_cases / sizeof *two_cases));
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    close_backends();
    return failed ? 1 : 0;
}
