/* awq_test_common.c — see awq_test_common.h. */
#include "awq_test_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llmrt/ext/cpu.h>

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

static const void *load_vtable(const char *file, llmrt_plugin_kind kind)
{
    return load_desc(file, kind)->vtable;
}

const llmrt_plugin_desc *at_awq_desc(void)
{
    static const llmrt_plugin_desc *d;
    if (!d)
        d = load_desc("quant-awq.so", LLMRT_PLUGIN_QUANT);
    return d;
}

const llmrt_quant_vtable *at_awq(void)
{
    return at_awq_desc()->vtable;
}

const llmrt_backend_vtable *at_cpu(void)
{
    static const llmrt_backend_vtable *vt;
    if (!vt)
        vt = load_vtable("backend-cpu.so", LLMRT_PLUGIN_BACKEND);
    return vt;
}

llmrt_backend_ref at_cpu_backend(int threads)
{
    return at_cpu_backend_simd(threads, "exact");
}

int at_try_cpu_backend_simd(int threads, const char *simd, llmrt_backend_ref *out)
{
    char val[16];
    snprintf(val, sizeof val, "%d", threads);
    const char *keys[] = {"threads", "simd"}, *vals[] = {val, simd}, *where[] = {"test", "test"};
    llmrt_section sec = {"backend.cpu", 2, keys, vals, where};
    *out = (llmrt_backend_ref){at_cpu(), NULL, "cpu"};
    llmrt_error err = {0};
    llmrt_status st = out->vt->create(NULL, &sec, &out->b, &err);
    if (st == LLMRT_ERR_UNSUPPORTED)
        return 0;
    if (st != LLMRT_OK) {
        fprintf(stderr, "backend-cpu create: %s\n", err.msg);
        abort();
    }
    return 1;
}

llmrt_backend_ref at_cpu_backend_simd(int threads, const char *simd)
{
    char val[16];
    snprintf(val, sizeof val, "%d", threads);
    const char *keys[] = {"threads", "simd"}, *vals[] = {val, simd}, *where[] = {"test", "test"};
    llmrt_section sec = {"backend.cpu", 2, keys, vals, where};
    llmrt_backend_ref ref = {at_cpu(), NULL, "cpu"};
    llmrt_error err = {0};
    if (ref.vt->create(NULL, &sec, &ref.b, &err) != LLMRT_OK) {
        fprintf(stderr, "backend-cpu create: %s\n", err.msg);
        abort();
    }
    return ref;
}

const char *at_cpu_simd(const llmrt_backend_ref *be)
{
    const llmrt_cpu_ext *cx =
        llmrt_backend_extension(be->vt, be->b, LLMRT_EXT_CPU, LLMRT_EXT_CPU_VERSION);
    return cx ? cx->simd(be->b) : "?";
}

const char *at_config(int group)
{
    static char cfg[256];
    snprintf(cfg, sizeof cfg,
             "{\"quant_method\": \"awq\", \"bits\": 4, \"group_size\": %d, \"version\": \"gemm\", "
             "\"zero_point\": true}",
             group);
    return cfg;
}

llmrt_quant *at_quant(const llmrt_backend_ref *be, int group)
{
    return at_quant_tune(be, group, NULL);
}

llmrt_quant *at_quant_tune(const llmrt_backend_ref *be, int group, const char *tune)
{
    const char *keys[] = {"tune"}, *vals[] = {tune}, *where[] = {"test"};
    llmrt_section sec = {"quant.awq", 1, keys, vals, where};
    llmrt_quant *q = NULL;
    llmrt_error err = {0};
    if (at_awq()->create(NULL, tune ? &sec : NULL, at_config(group), be, &q, &err) != LLMRT_OK) {
        fprintf(stderr, "quant-awq create (tune = %s): %s\n", tune ? tune : "(none)", err.msg);
        abort();
    }
    return q;
}

/* ---- checkpoint ---- */

#define AT_MAX_TENSORS 64

struct at_ckpt {
    llmrt_checkpoint view;
    int n;
    struct {
        char name[256];
        llmrt_dtype dt;
        int64_t shape[2];
        void *data;
        size_t bytes;
    } t[AT_MAX_TENSORS];
};

static int find_index(at_ckpt *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->t[i].name, name) == 0)
            return i;
    return -1;
}

static llmrt_status ck_find(void *ctx, const char *name, llmrt_tensor_view *out, llmrt_error *err)
{
    at_ckpt *c = ctx;
    int i = find_index(c, name);
    if (i < 0)
        return llmrt_fail(err, LLMRT_ERR_NOT_FOUND, "tensor %s not in the test checkpoint", name);
    memset(out, 0, sizeof *out);
    out->name = c->t[i].name;
    out->dtype = c->t[i].dt;
    out->ndim = 2;
    out->shape[0] = c->t[i].shape[0];
    out->shape[1] = c->t[i].shape[1];
    out->data = c->t[i].data;
    out->bytes = c->t[i].bytes;
    out->file = "test.safetensors";
    return LLMRT_OK;
}

static int ck_has(void *ctx, const char *name)
{
    return find_index(ctx, name) >= 0;
}

at_ckpt *at_ckpt_new(void)
{
    at_ckpt *c = calloc(1, sizeof *c);
    c->view.ctx = c;
    c->view.dir = "test";
    c->view.config_json = "{}";
    c->view.find = ck_find;
    c->view.has = ck_has;
    return c;
}

void at_ckpt_add(at_ckpt *c, const char *name, llmrt_dtype dt, int64_t d0, int64_t d1,
                 const void *data)
{
    if (c->n == AT_MAX_TENSORS)
        abort();
    int i = c->n++;
    snprintf(c->t[i].name, sizeof c->t[i].name, "%s", name);
    c->t[i].dt = dt;
    c->t[i].shape[0] = d0;
    c->t[i].shape[1] = d1;
    c->t[i].bytes = (size_t)(d0 * d1) * llmrt_dtype_size(dt);
    /* one byte past the start: checkpoint data need not be aligned */
    char *buf = malloc(c->t[i].bytes + 1);
    memcpy(buf + 1, data, c->t[i].bytes);
    c->t[i].data = buf + 1;
}

void at_ckpt_free(at_ckpt *c)
{
    for (int i = 0; i < c->n; i++)
        free((char *)c->t[i].data - 1);
    free(c);
}

const llmrt_checkpoint *at_ckpt_view(at_ckpt *c)
{
    return &c->view;
}

/* ---- random linears ---- */

uint64_t at_next(at_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 2685821657736338717ull;
}

float at_uniform(at_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((at_next(r) >> 40) * (1.0 / 16777216.0));
}

void at_pack(const uint8_t *vals, int64_t rows, int64_t cols, int32_t *packed)
{
    static const int order_map[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols / 8; c++) {
            uint32_t word = 0;
            for (int k = 0; k < 8; k++)
                word |= (uint32_t)(vals[r * cols + 8 * c + order_map[k]] & 0xf) << (4 * k);
            memcpy(&packed[r * (cols / 8) + c], &word, 4);
        }
}

at_linear at_linear_random(int64_t in, int64_t out, int64_t group, uint64_t seed)
{
    at_rng r = {seed * 0x9e3779b97f4a7c15ull + 1};
    at_linear l = {in, out, group, NULL, NULL, NULL, NULL};
    int64_t ng = in / group;
    uint8_t *q = malloc((size_t)(in * out)), *z = malloc((size_t)(ng * out));
    l.qweight = malloc((size_t)(in * out / 8) * 4);
    l.qzeros = malloc((size_t)(ng * out / 8) * 4);
    l.scales = malloc((size_t)(ng * out) * 2);
    l.w = malloc((size_t)(in * out) * sizeof(float));
    for (int64_t i = 0; i < in * out; i++)
        q[i] = (uint8_t)(at_next(&r) & 0xf);
    for (int64_t i = 0; i < ng * out; i++) {
        z[i] = (uint8_t)(at_next(&r) & 0xf);
        l.scales[i] = llmrt_f32_to_f16(at_uniform(&r, 0.001f, 0.05f));
    }
    at_pack(q, in, out, l.qweight);
    at_pack(z, ng, out, l.qzeros);
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++) {
            int64_t g = i / group;
            float s = llmrt_f16_to_f32(l.scales[g * out + o]);
            l.w[o * in + i] = (float)((int)q[i * out + o] - (int)z[g * out + o]) * s;
        }
    free(q);
    free(z);
    return l;
}

void at_linear_free(at_linear *l)
{
    free(l->qweight);
    free(l->qzeros);
    free(l->scales);
    free(l->w);
}

void at_linear_add(at_ckpt *c, const char *prefix, const at_linear *l)
{
    char name[300];
    int64_t ng = l->in / l->group;
    snprintf(name, sizeof name, "%s.qweight", prefix);
    at_ckpt_add(c, name, LLMRT_DTYPE_I32, l->in, l->out / 8, l->qweight);
    snprintf(name, sizeof name, "%s.qzeros", prefix);
    at_ckpt_add(c, name, LLMRT_DTYPE_I32, ng, l->out / 8, l->qzeros);
    snprintf(name, sizeof name, "%s.scales", prefix);
    at_ckpt_add(c, name, LLMRT_DTYPE_F16, ng, l->out, l->scales);
}
