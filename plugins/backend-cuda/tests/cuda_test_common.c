/* cuda_test_common.c — see cuda_test_common.h. */
#include "cuda_test_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_backend.h"
#include "test_util.h"

ct_env CT;

const llmrt_plugin_desc *ct_plugin(const char *file)
{
    char *path = tu_plugin_path(file);
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    if (!d)
        fprintf(stderr, "cannot load plugin %s\n", path);
    free(path);
    return d;
}

/* [backend.cuda] as the host hands it over: key = value when key is not NULL, plus
 * LLMRT_BACKEND_CUDA_PDL / LLMRT_BACKEND_CUDA_TUNE from the environment for the other keys (so
 * a sweep runs the suite with PDL off, as it runs `llmrt`). The strings live in the caller's
 * arrays of 3. */
static llmrt_section cuda_section(const char *key, const char *value, const char **keys,
                                  const char **values, const char **where)
{
    static const char *const env_keys[][2] = {{"pdl", "LLMRT_BACKEND_CUDA_PDL"},
                                               {"tune", "LLMRT_BACKEND_CUDA_TUNE"}};
    size_t n = 0;
    if (key) {
        keys[n] = key, values[n] = value, where[n++] = "conf/test.ini:7";
    }
    for (size_t i = 0; i < 2; i++) {
        const char *v = getenv(env_keys[i][1]);
        if (v && (!key || strcmp(key, env_keys[i][0]) != 0)) {
            keys[n] = env_keys[i][0], values[n] = v, where[n++] = env_keys[i][1];
        }
    }
    llmrt_section sec = {"backend.cuda", n, keys, values, where};
    return sec;
}

void ct_open(int need_cpu)
{
    memset(&CT, 0, sizeof CT);
    CT.host = mock_host(NULL);
    const llmrt_plugin_desc *d = ct_plugin("backend-cuda.so");
    if (!d)
        exit(1);
    CT.cuda_vt = d->vtable;
    int32_t count = 0;
    llmrt_error err = {0};
    if (CT.cuda_vt->probe(&CT.info, 1, &count, &err) != LLMRT_OK) {
        fprintf(stderr, "backend-cuda probe failed: %s\n", err.msg);
        exit(1);
    }
    if (count == 0) {
        printf("SKIP: no CUDA device visible (%s)\n", err.msg);
        exit(77);
    }
    printf("device: %s (cc %d.%d, %d SMs, %.1f GiB)\n", CT.info.name, CT.info.cc_major,
           CT.info.cc_minor, CT.info.multiprocessors, CT.info.mem_total / 1073741824.0);
    const char *keys[3], *values[3], *where[3];
    llmrt_section sec = cuda_section(NULL, NULL, keys, values, where);
    for (size_t i = 0; i < sec.n; i++)
        printf("[backend.cuda] %s = %s (env %s)\n", keys[i], values[i], where[i]);
    if (CT.cuda_vt->create(&CT.host, &sec, &CT.cuda.b, &err) != LLMRT_OK) {
        fprintf(stderr, "creating the CUDA backend failed: %s\n", err.msg);
        exit(1);
    }
    CT.cuda.vt = CT.cuda_vt;
    CT.cuda.name = "cuda";
    if (need_cpu) {
        d = ct_plugin("backend-cpu.so");
        if (!d)
            exit(1);
        CT.cpu_vt = d->vtable;
        /* the reference: backend-cpu's exact path (its default, auto, may run the fast
         * kernels, which are only within bounds of it) */
        const char *keys[] = {"simd"}, *vals[] = {"exact"};
        llmrt_section exact = {"backend.cpu", 1, keys, vals, NULL};
        if (CT.cpu_vt->create(&CT.host, &exact, &CT.cpu.b, &err) != LLMRT_OK) {
            fprintf(stderr, "creating the CPU backend failed: %s\n", err.msg);
            exit(1);
        }
        CT.cpu.vt = CT.cpu_vt;
        CT.cpu.name = "cpu";
    }
}

void ct_close(void)
{
    if (CT.cuda.b)
        CT.cuda_vt->destroy(CT.cuda.b);
    if (CT.cpu.b)
        CT.cpu_vt->destroy(CT.cpu.b);
    memset(&CT, 0, sizeof CT);
}

const llmrt_fused_ops *ct_fused(const llmrt_backend_ref *b)
{
    const llmrt_fused_ops *f =
        llmrt_backend_extension(b->vt, b->b, LLMRT_EXT_FUSED, LLMRT_EXT_FUSED_VERSION);
    ck_assert_msg(f && f->struct_size >= sizeof *f, "backend %s offers no \"%s\" extension",
                  b->name, LLMRT_EXT_FUSED);
    return f;
}

const llmrt_argmax_head_ops *ct_argmax_head(const llmrt_backend_ref *b)
{
    const llmrt_argmax_head_ops *h = llmrt_backend_extension(b->vt, b->b, LLMRT_EXT_ARGMAX_HEAD,
                                                             LLMRT_EXT_ARGMAX_HEAD_VERSION);
    ck_assert_msg(h && h->struct_size >= sizeof *h, "backend %s offers no \"%s\" extension",
                  b->name, LLMRT_EXT_ARGMAX_HEAD);
    return h;
}

llmrt_status ct_create_cuda(const char *key, const char *value, llmrt_backend **out,
                            llmrt_error *err)
{
    const char *keys[3], *values[3], *where[3];
    llmrt_section sec = cuda_section(key, value, keys, values, where);
    *out = NULL;
    return CT.cuda_vt->create(&CT.host, &sec, out, err);
}

int ct_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

/* ---- buffers ---- */

void *ct_alloc(const llmrt_backend_ref *b, size_t bytes)
{
    llmrt_error err = {0};
    void *p = NULL;
    CT_OK(b->vt->dev_alloc(b->b, bytes, &p, &err));
    return p;
}

void ct_free(const llmrt_backend_ref *b, void *p)
{
    b->vt->dev_free(b->b, p);
}

void ct_sync(const llmrt_backend_ref *b)
{
    llmrt_error err = {0};
    CT_OK(b->vt->synchronize(b->b, &err));
}

void ct_upload(const llmrt_backend_ref *b, void *dev, const void *host, size_t bytes)
{
    llmrt_error err = {0};
    CT_OK(b->vt->copy(b->b, dev, host, bytes, LLMRT_COPY_H2D, &err));
    ct_sync(b);
}

void ct_download(const llmrt_backend_ref *b, void *host, const void *dev, size_t bytes)
{
    llmrt_error err = {0};
    CT_OK(b->vt->copy(b->b, host, dev, bytes, LLMRT_COPY_D2H, &err));
    ct_sync(b);
}

void *ct_dup(const llmrt_backend_ref *b, const void *host, size_t bytes)
{
    void *p = ct_alloc(b, bytes);
    ct_upload(b, p, host, bytes);
    return p;
}

void ct_poison(const llmrt_backend_ref *b, void *dev, size_t n)
{
    float *h = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++)
        h[i] = NAN;
    ct_upload(b, dev, h, n * sizeof(float));
    free(h);
}

/* ---- random ---- */

uint64_t ct_next(ct_rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float ct_uniform(ct_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((ct_next(r) >> 40) * (1.0 / 16777216.0));
}

int32_t ct_int(ct_rng *r, int32_t lo, int32_t hi)
{
    return lo + (int32_t)(ct_next(r) % (uint64_t)(hi - lo + 1));
}

float *ct_rand_f32(ct_rng *r, size_t n, float lo, float hi)
{
    float *p = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++)
        p[i] = ct_uniform(r, lo, hi);
    return p;
}

void *ct_to_dtype(const float *src, size_t n, llmrt_dtype dt, float *rounded)
{
    size_t es = llmrt_dtype_size(dt);
    void *p = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++) {
        llmrt_store_f(p, dt, (int64_t)i, src[i]);
        if (rounded)
            rounded[i] = llmrt_load_f(p, dt, (int64_t)i);
    }
    return p;
}

/* ---- comparison ---- */

double ct_rel_err(const float *a, const float *ref, size_t n, size_t *nan_count)
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
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    if (nan_count)
        *nan_count = bad;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

void ct_assert_close(const float *a, const float *ref, size_t n, double tol, const char *what)
{
    size_t bad = 0;
    double e = ct_rel_err(a, ref, n, &bad);
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

/* ---- sampling reference ---- */

/* The rules of cuda_sample.cu (and core/sampler.c) in double precision: temperature, min-p
 * (relative to the most likely token), top-k, top-p over what is left (ties at a threshold
 * kept); the inverse CDF at u runs over the kept tokens in ascending id order when neither
 * top-k nor top-p filters, most likely first (ties by id) when one does. */
static const float *cmp_base;
static int cmp_desc(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (cmp_base[i] != cmp_base[j])
        return cmp_base[i] > cmp_base[j] ? -1 : 1;
    return i - j;
}

int ct_ref_sample(const float *x, int vocab, llmrt_sample_params sp, double top_p_delta,
                  double u_delta)
{
    int amax = 0;
    for (int i = 1; i < vocab; i++)
        if (x[i] > x[amax])
            amax = i;
    if (!(sp.temperature >= 1e-5f))
        return amax;
    const double m = x[amax];
    double *e = malloc(vocab * sizeof *e);
    int *ord = malloc(vocab * sizeof *ord); /* kept tokens, most likely first */
    int nk = 0;
    for (int i = 0; i < vocab; i++) {
        e[i] = exp(((double)x[i] - m) / sp.temperature);
        if (!isnan(x[i]) && e[i] > 0 && (sp.min_p <= 0 || e[i] >= sp.min_p))
            ord[nk++] = i;
    }
    cmp_base = x;
    qsort(ord, nk, sizeof *ord, cmp_desc);
    int sorted = 0;
    if (sp.top_k > 0 && sp.top_k < nk) {
        const float thr = x[ord[sp.top_k - 1]];
        while (nk > 0 && x[ord[nk - 1]] < thr)
            nk--;
        sorted = 1;
    }
    if (sp.top_p > 0 && sp.top_p < 1) {
        double q = 0, cum = 0;
        for (int j = 0; j < nk; j++)
            q += e[ord[j]];
        const double want = (sp.top_p + top_p_delta) * q;
        int j = 0;
        while (j < nk) {
            cum += e[ord[j++]];
            if (cum >= want)
                break;
        }
        const float thr = x[ord[j - 1]];
        while (nk > 0 && x[ord[nk - 1]] < thr)
            nk--;
        sorted = 1;
    }
    if (!sorted) { /* back to id order */
        for (int i = 1; i < nk; i++) {
            int v = ord[i], k = i - 1;
            while (k >= 0 && ord[k] > v)
                ord[k + 1] = ord[k], k--;
            ord[k + 1] = v;
        }
    }
    double tot = 0;
    for (int j = 0; j < nk; j++)
        tot += e[ord[j]];
    const double target = (sp.uniform + u_delta) * tot;
    double cum = 0;
    int pick = amax;
    for (int j = 0; j < nk; j++) {
        cum += e[ord[j]];
        if (cum > target) {
            pick = ord[j];
            break;
        }
    }
    free(e), free(ord);
    return pick;
}

