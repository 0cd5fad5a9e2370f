/* fp8_test_common.c — see fp8_test_common.h. */
#include "fp8_test_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const llmrt_plugin_desc *load_desc(const char *file, llmrt_plugin_kind kind)
{
    char *path = tu_plugin_path(file);
    const llmrt_plugin_desc *d = tu_load_plugin(path, 0);
    if (!d || d->kind != kind) {
        fprintf(stderr, "cannot load %s\n", path);
        abort();
    }
    free(path);
    return d;
}

const llmrt_plugin_desc *ft_fp8_desc(void)
{
    static const llmrt_plugin_desc *d;
    if (!d)
        d = load_desc("quant-fp8.so", LLMRT_PLUGIN_QUANT);
    return d;
}

const llmrt_quant_vtable *ft_fp8(void)
{
    return ft_fp8_desc()->vtable;
}

const llmrt_backend_vtable *ft_cpu(void)
{
    static const llmrt_backend_vtable *vt;
    if (!vt)
        vt = load_desc("backend-cpu.so", LLMRT_PLUGIN_BACKEND)->vtable;
    return vt;
}

llmrt_backend_ref ft_cpu_backend(int threads, const char *simd)
{
    char val[16];
    snprintf(val, sizeof val, "%d", threads);
    const char *keys[] = {"threads", "simd"}, *vals[] = {val, simd}, *where[] = {"test", "test"};
    llmrt_section sec = {"backend.cpu", 2, keys, vals, where};
    llmrt_backend_ref ref = {ft_cpu(), NULL, "cpu"};
    llmrt_error err = {0};
    if (ref.vt->create(NULL, &sec, &ref.b, &err) != LLMRT_OK) {
        fprintf(stderr, "backend-cpu create: %s\n", err.msg);
        abort();
    }
    return ref;
}

const char *const FT_QWEN_CONFIG = "{\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", "
                                   "\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}";

llmrt_quant *ft_quant(const llmrt_backend_ref *be, const char *act)
{
    const char *keys[] = {"activations"}, *vals[] = {act}, *where[] = {"test"};
    llmrt_section sec = {"quant.fp8", act ? 1 : 0, keys, vals, where};
    llmrt_quant *q = NULL;
    llmrt_error err = {0};
    if (ft_fp8()->create(NULL, &sec, FT_QWEN_CONFIG, be, &q, &err) != LLMRT_OK) {
        fprintf(stderr, "quant-fp8 create: %s\n", err.msg);
        abort();
    }
    return q;
}

/* ---- checkpoint ---- */

#define FT_MAX_TENSORS 64

struct ft_ckpt {
    llmrt_checkpoint view;
    int n;
    struct {
        char name[256];
        llmrt_dtype dt;
        int32_t ndim;
        int64_t shape[LLMRT_MAX_DIMS];
        void *data;
        size_t bytes;
    } t[FT_MAX_TENSORS];
};

static int find_index(ft_ckpt *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0)
            return i;
    return -1;
}

static llmrt_status ck_find(void *ctx, const char *name, llmrt_tensor_view *out, llmrt_error *err)
{
    ft_ckpt *c = ctx;
    int i = find_index(c, name);
    if (i < 0)
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "tensor %s not in the test checkpoint", name);
    memset(out, 0, sizeof *out);
    out->name = c->t[i].name;
    out->dtype = c->t[i].dt;
    out->ndim = c->t[i].ndim;
    memcpy(out->shape, c->t[i].shape, sizeof out->shape);
    out->data = c->t[i].data;
    out->bytes = c->t[i].bytes;
    out->file = "test.safetensors";
    return LLMRT_OK;
}

static int ck_has(void *ctx, const char *name)
{
    return find_index(ctx, name) >= 0;
}

ft_ckpt *ft_ckpt_new(void)
{
    ft_ckpt *c = calloc(1, sizeof *c);
    c->view.ctx = c;
    c->view.dir = "test";
    c->view.config_json = "{}";
    c->view.find = ck_find;
    c->view.has = ck_has;
    return c;
}

void ft_ckpt_add(ft_ckpt *c, const char *name, llmrt_dtype dt, int32_t ndim, const int64_t *shape,
                 const void *data)
{
    if (c->n == FT_MAX_TENSORS)
        abort();
    int i = c->n++;
    snprintf(c->t[i].name, sizeof c->t[i].name, "%s", name);
    c->t[i].dt = dt;
    c->t[i].ndim = ndim;
    size_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        c->t[i].shape[d] = shape[d];
        numel *= (size_t)shape[d];
    }
    c->t[i].bytes = numel * llmrt_dtype_size(dt);
    char *buf = malloc(c->t[i].bytes + 1);
    memcpy(buf + 1, data, c->t[i].bytes);
    c->t[i].data = buf + 1;
}

void ft_ckpt_free(ft_ckpt *c)
{
    for (int i = 0; i < c->n; i++)
        free((char *)c->t[i].data - 1);
    free(c);
}

const llmrt_checkpoint *ft_ckpt_view(ft_ckpt *c)
{
    return &c->view;
}

/* ---- random linears ---- */

uint64_t ft_next(ft_rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float ft_uniform(ft_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((ft_next(r) >> 40) * (1.0 / 16777216.0));
}

ft_linear ft_linear_random(int64_t in, int64_t out, llmrt_dtype scale_dtype, uint64_t seed)
{
    ft_rng r = {seed * 0x9e3779b97f4a7c15ull + 7};
    ft_linear l = {in, out, (out + 127) / 128, (in + 127) / 128, scale_dtype, NULL, NULL, NULL, NULL};
    l.codes = malloc((size_t)(in * out));
    l.scales = malloc((size_t)(l.rb * l.kb) * llmrt_dtype_size(scale_dtype));
    l.sf = malloc((size_t)(l.rb * l.kb) * sizeof(float));
    l.w = malloc((size_t)(in * out) * sizeof(float));
    for (int64_t i = 0; i < in * out; i++) {
        uint8_t c;
        do
            c = (uint8_t)(ft_next(&r) & 0xff);
        while ((c & 0x7f) == 0x7f);
        l.codes[i] = c;
    }
    for (int64_t i = 0; i < l.rb * l.kb; i++) {
        llmrt_store_f(l.scales, scale_dtype, i, ft_uniform(&r, 1e-3f, 4e-3f));
        l.sf[i] = llmrt_load_f(l.scales, scale_dtype, i);
    }
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++)
            l.w[o * in + i] = llmrt_e4m3_to_f32(l.codes[o * in + i]) * l.sf[(o / 128) * l.kb + i / 128];
    return l;
}

void ft_linear_free(ft_linear *l)
{
    free(l->codes);
    free(l->scales);
    free(l->sf);
    free(l->w);
}

void ft_linear_add(ft_ckpt *c, const char *prefix, const ft_linear *l)
{
    char name[300];
    int64_t shape[2] = {l->out, l->in};
    snprintf(name, sizeof name, "%s.weight", prefix);
    ft_ckpt_add(c, name, LLMRT_DTYPE_F8_E4M3, 2, shape, l->codes);
    shape[0] = l->rb;
    shape[1] = l->kb;
    snprintf(name, sizeof name, "%s.weight_scale_inv", prefix);
    ft_ckpt_add(c, name, l->scale_dtype, 2, shape, l->scales);
}

/* ---- references ---- */

void ft_ref_w8a16(const ft_linear *l, const float *x, int32_t n, double *y, double *mag)
{
    for (int32_t t = 0; t < n; t++)
        for (int64_t o = 0; o < l->out; o++) {
            double acc = 0, m = 0;
            for (int64_t i = 0; i < l->in; i++) {
                double p = (double)x[t * l->in + i] * (double)l->w[o * l->in + i];
                acc += p;
                m += fabs(p);
            }
            y[t * l->out + o] = acc;
            if (mag)
                mag[t * l->out + o] = m;
        }
}

void ft_ref_w8a8(const ft_linear *l, const float *x, int32_t n, double *y, double *mag)
{
    const int64_t in = l->in;
    float *xq = malloc((size_t)in * sizeof(float)), *sx = malloc((size_t)l->kb * sizeof(float));
    for (int32_t t = 0; t < n; t++) {
        /* the definition, written out here rather than through fp8_act_quant_row */
        for (int64_t b = 0; b < l->kb; b++) {
            const int64_t b0 = b * 128, b1 = b0 + 128 < in ? b0 + 128 : in;
            float amax = 0;
            for (int64_t i = b0; i < b1; i++)
                if (fabsf(x[t * in + i]) > amax)
                    amax = fabsf(x[t * in + i]);
            if (amax < 1e-10f)
                amax = 1e-10f;
            sx[b] = amax / 448.0f;
            for (int64_t i = b0; i < b1; i++) {
                float v = x[t * in + i] / sx[b];
                v = v > 448.0f ? 448.0f : v < -448.0f ? -448.0f : v;
                xq[i] = llmrt_e4m3_to_f32(llmrt_f32_to_e4m3(v));
            }
        }
        for (int64_t o = 0; o < l->out; o++) {
            double acc = 0, m = 0;
            for (int64_t b = 0; b < l->kb; b++) {
                const int64_t b0 = b * 128, b1 = b0 + 128 < in ? b0 + 128 : in;
                double part = 0, pm = 0;
                for (int64_t i = b0; i < b1; i++) {
                    double p = (double)xq[i] * (double)llmrt_e4m3_to_f32(l->codes[o * in + i]);
                    part += p;
                    pm += fabs(p);
                }
                const double s = (double)sx[b] * (double)l->sf[(o / 128) * l->kb + b];
                acc += part * s;
                m += pm * s;
            }
            y[t * l->out + o] = acc;
            if (mag)
                mag[t * l->out + o] = m;
        }
    }
    free(xq);
    free(sx);
}

float *ft_activations(ft_rng *r, int32_t n, int64_t in)
{
    float *x = malloc((size_t)(n * in) * sizeof(float) + 1);
    for (int64_t i = 0; i < n * in; i++) {
        x[i] = ft_uniform(r, -2.0f, 2.0f) + (i % 7 == 0 ? 0.5f : 0.0f);
        if (ft_next(r) % 97 == 0)
            x[i] *= 40.0f; /* an outlier: its group's scale is larger */
    }
    return x;
}
