/* fake_checkpoint.c — see fake_checkpoint.h. */
#include "fake_checkpoint.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t rng_state;

double rnd_uniform(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

double rnd_sym(double a) { return (2.0 * rnd_uniform() - 1.0) * a; }

ftensor *fk_get(fckpt *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0)
            return &f->t[i];
    return NULL;
}

static llmrt_status fk_find(void *ctx, const char *name, llmrt_tensor_view *out, llmrt_error *err)
{
    fckpt *f = ctx;
    ftensor *t = fk_get(f, name);
    if (!t)
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "tensor %s not found in %s", name, f->ck.dir);
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->dtype = t->dtype;
    out->ndim = t->ndim;
    memcpy(out->shape, t->shape, sizeof out->shape);
    out->data = t->data;
    out->bytes = t->bytes;
    out->file = "fake.safetensors";
    f->finds++;
    return LLMRT_OK;
}

static int fk_has(void *ctx, const char *name) { return fk_get(ctx, name) != NULL; }

fckpt *fk_new(const char *dir)
{
    fckpt *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    f->ck.ctx = f;
    f->ck.dir = dir;
    f->ck.config_json = f->config;
    f->ck.find = fk_find;
    f->ck.has = fk_has;
    return f;
}

void fk_free(fckpt *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->t[i].data);
    free(f);
}

ftensor *fk_slot(fckpt *f, const char *name, llmrt_dtype dtype, int32_t ndim, int64_t d0,
                 int64_t d1)
{
    ck_assert_int_lt(f->n, FK_MAX_TENSORS);
    ftensor *t = &f->t[f->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = ndim > 1 ? d1 : 0;
    t->bytes = (size_t)(ndim > 1 ? d0 * d1 : d0) * llmrt_dtype_size(dtype);
    t->data = calloc(1, t->bytes ? t->bytes : 1);
    ck_assert_ptr_nonnull(t->data);
    return t;
}

ftensor *fk_add(fckpt *f, const char *name, llmrt_dtype dtype, int32_t ndim, int64_t d0,
                int64_t d1, double center, double a)
{
    ftensor *t = fk_slot(f, name, dtype, ndim, d0, d1);
    const int64_t n = ndim > 1 ? d0 * d1 : d0;
    for (int64_t i = 0; i < n; i++) {
        const double v = center + rnd_sym(a);
        if (dtype == LLMRT_DTYPE_I8)
            ((int8_t *)t->data)[i] = (int8_t)lrint(v);
        else
            llmrt_store_f(t->data, dtype, i, (float)v);
    }
    return t;
}

void fk_add_data(fckpt *f, const char *name, llmrt_dtype dtype, int64_t d0, int64_t d1,
                 const void *data)
{
    ftensor *t = fk_slot(f, name, dtype, 2, d0, d1);
    memcpy(t->data, data, t->bytes);
}

void fk_remove(fckpt *f, const char *name)
{
    ftensor *t = fk_get(f, name);
    ck_assert_msg(t != NULL, "fk_remove: no %s", name);
    free(t->data);
    *t = f->t[--f->n];
}
