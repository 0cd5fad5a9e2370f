/* cpu_test_common.c — see cpu_test_common.h. */
#include "cpu_test_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_util.h"

const llmrt_backend_vtable *ct_vtable(void)
{
    static const llmrt_backend_vtable *vt;
    if (!vt) {
        char *path = tu_plugin_path("backend-cpu.so");
        const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
        if (!d || d->kind != LLMRT_PLUGIN_BACKEND) {
            fprintf(stderr, "cannot load the cpu backend from %s\n", path);
            abort();
        }
        free(path);
        vt = d->vtable;
    }
    return vt;
}

llmrt_backend *ct_create(int threads)
{
    return ct_create_simd(threads, "exact");
}

llmrt_backend *ct_try_create_simd(int threads, const char *simd)
{
    char val[16];
    snprintf(val, sizeof val, "%d", threads);
    const char *keys[] = {"threads", "simd"}, *vals[] = {val, simd}, *where[] = {"test", "test"};
    llmrt_section sec = {"backend.cpu", 2, keys, vals, where};
    llmrt_backend *b = NULL;
    llmrt_error err = {0};
    llmrt_status st = ct_vtable()->create(NULL, &sec, &b, &err);
    if (st == LLMRT_ERR_UNSUPPORTED)
        return NULL;
    if (st != LLMRT_OK) {
        fprintf(stderr, "cpu backend create(threads=%d, simd=%s): %s\n", threads, simd, err.msg);
        abort();
    }
    return b;
}

llmrt_backend *ct_create_simd(int threads, const char *simd)
{
    llmrt_backend *b = ct_try_create_simd(threads, simd);
    if (!b) {
        fprintf(stderr, "cpu backend create(threads=%d, simd=%s): this CPU lacks the path\n",
                threads, simd);
        abort();
    }
    return b;
}

static const void *extension(llmrt_backend *b, const char *name, uint32_t version)
{
    const void *t = llmrt_backend_extension(ct_vtable(), b, name, version);
    if (!t) {
        fprintf(stderr, "the cpu backend does not offer the \"%s\" extension\n", name);
        abort();
    }
    return t;
}

const llmrt_cpu_ext *ct_cpu_ext(llmrt_backend *b)
{
    return extension(b, LLMRT_EXT_CPU, LLMRT_EXT_CPU_VERSION);
}

const llmrt_fused_ops *ct_fused(llmrt_backend *b)
{
    return extension(b, LLMRT_EXT_FUSED, LLMRT_EXT_FUSED_VERSION);
}

const llmrt_argmax_head_ops *ct_argmax_head(llmrt_backend *b)
{
    return extension(b, LLMRT_EXT_ARGMAX_HEAD, LLMRT_EXT_ARGMAX_HEAD_VERSION);
}

void ct_poison(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
}
