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
    char val[16];
    snprintf(val, sizeof val, "%d", threads);
    const char *keys[] = {"threads", "simd"}, *vals[] = {val, simd}, *where[] = {"test", "test"};
    llmrt_section sec = {"backend.cpu", 2, keys, vals, where};
    llmrt_backend *b = NULL;
    llmrt_error err = {0};
    if (ct_vtable()->create(NULL, &sec, &b, &err) != LLMRT_OK) {
        fprintf(stderr, "cpu backend create(threads=%d): %s\n", threads, err.msg);
        abort();
    }
    return b;
}

void ct_poison(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
}
