/* cpu_ops.c — the small ops of the CPU backend: embedding, rmsnorm, rope, silu·mul, add,
 * argmax (attention and GEMM have files of their own).
 *
 * Why: these are the reference every other backend is checked against, so each follows
 * transformers' rounding points (RMSNorm: normalise in f32, then multiply by the weight;
 * RoPE: inv_freq, cos and sin computed in f32 exactly as transformers computes them).
 * Sums use 16 independent f32 lanes so the compiler vectorises them without -ffast-math;
 * the lanes are added in a fixed order, so results do not depend on the thread count. */
#include "cpu_internal.h"

#include <math.h>

#define CPU_MAX_HEAD_DIM 1024
#define LANES 16

static llmrt_status check_float_tensor(const llmrt_tensor *t, const char *op, const char *what,
                                       llmrt_error *err)
{
    if (!t || !t->data)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: %s: %s tensor is NULL", op,
                          what);
    if (!cpu_is_float_dtype(t->dtype))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cpu backend: %s: %s has dtype %s (supported: F32, F16, BF16)", op, what,
                          llmrt_dtype_name(t->dtype));
    return LLMRT_OK;
}

/* ---- embedding ---- */

typedef struct {
    float *out;
    const llmrt_tensor *table;
    const int32_t *ids;
    int64_t d;
} embed_ctx;

static void embed_rows(void *c, int64_t i0, int64_t i1)
{
    const embed_ctx *e = c;
    size_t es = llmrt_dtype_size(e->table->dtype);
    for (int64_t i = i0; i < i1; i++) {
        const char *row = (const char *)e->table->data + (size_t)e->ids[i] * (size_t)e->d * es;
        cpu_row_to_f32(e->out + i * e->d, row, e->table->dtype, e->d);
    }
}

llmrt_status cpu_embedding(llmrt_backend *b, float *out, const llmrt_tensor *table,
                           const int32_t *ids, int32_t n, llmrt_error *err)
{
    llmrt_status st = check_float_tensor(table, "embedding", "table", err);
    if (st != LLMRT_OK)
        return st;
    if (table->ndim != 2)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: embedding: table must be 2-D [rows, d], got %d dims",
                          table->ndim);
    int64_t rows = table->shape[0];
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= rows)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "cpu backend: embedding: token id %d at row %d is outside the table "
                              "[0, %lld)",
                              ids[i], i, (long long)rows);
    embed_ctx c = {out, table, ids, table->shape[1]};
    cpu_parallel(b, n, c.d, 0, embed_rows, &c);
    return LLMRT_OK;
}

/* ---- rmsnorm ---- */

typedef struct {
    float *out;
    const float *x;
    const llmrt_tensor *w;
    int64_t d;
    float eps;
} rms_ctx;

static float sum_squares(const float *restrict x, int64_t d)
{
    float acc[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= d; i += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += x[i + l] * x[i + l];
    for (int l = 0; i < d; i++, l++)
        acc[l] += x[i] * x[i];
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

void cpu_norm_row(float *out, const float *x, const llmrt_tensor *w, int64_t d, float eps)
{
    float ms = sum_squares(x, d) / (float)d;
    float inv = 1.0f / sqrtf(ms + eps);
    switch (w->dtype) {
    case LLMRT_DTYPE_F32: {
        const float *wf = w->data;
        for (int64_t i = 0; i < d; i++)
            out[i] = wf[i] * (x[i] * inv);
        break;
    }
    case LLMRT_DTYPE_BF16: {
        const uint16_t *wh = w->data;
        for (int64_t i = 0; i < d; i++)
            out[i] = cpu_bf16_to_f32(wh[i]) * (x[i] * inv);
        break;
    }
    default: {
        const uint16_t *wh = w->data;
        for (int64_t i = 0; i < d; i++)
            out[i] = cpu_f16_to_f32(wh[i]) * (x[i] * inv);
        break;
    }
    }
}

static void rms_rows(void *c, int64_t r0, int64_t r1)
{
    const rms_ctx *r = c;
    for (int64_t row = r0; row < r1; row++) /* x may alias out */
        cpu_norm_row(r->out + row * r->d, r->x + row * r->d, r->w, r->d, r->eps);
}

llmrt_status cpu_rmsnorm(llmrt_backend *b, float *out, const float *x, const llmrt_tensor *w,
                         int32_t rows, int32_t d, float eps, llmrt_error *err)
{
    llmrt_status st = check_float_tensor(w, "rmsnorm", "weight", err);
    if (st != LLMRT_OK)
        return st;
    if (llmrt_tensor_numel(w) != d)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: rmsnorm: weight has %lld elements, expected d = %d",
                          (long long)llmrt_tensor_numel(w), d);
    if (d <= 0 || rows < 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: rmsnorm: rows %d, d %d", rows, d);
    rms_ctx c = {out, x, w, d, eps};
    cpu_parallel(b, rows, 3 * (int64_t)d, 0, rms_rows, &c);
    return LLMRT_OK;
}

/* ---- rope (neox rotate-half) ---- */

typedef struct {
    float *x;
    const int32_t *pos;
    int32_t heads, head_dim;
    const float *inv_freq; /* [head_dim / 2] */
} rope_ctx;

void cpu_rotate_half(float *v, const float *cs, const float *sn, int half)
{
    float *restrict lo = v, *restrict hi = v + half;
    for (int i = 0; i < half; i++) {
        float a = lo[i], bb = hi[i];
        lo[i] = a * cs[i] - bb * sn[i];
        hi[i] = bb * cs[i] + a * sn[i];
    }
}

static void rope_rows(void *c, int64_t t0, int64_t t1)
{
    const rope_ctx *r = c;
    const int half = r->head_dim / 2;
    float cs[CPU_MAX_HEAD_DIM / 2], sn[CPU_MAX_HEAD_DIM / 2];
    for (int64_t t = t0; t < t1; t++) {
        float p = (float)r->pos[t];
        for (int i = 0; i < half; i++) {
            float f = p * r->inv_freq[i];
            cs[i] = cosf(f);
            sn[i] = sinf(f);
        }
        for (int h = 0; h < r->heads; h++)
            cpu_rotate_half(r->x + (t * r->heads + h) * (int64_t)r->head_dim, cs, sn, half);
    }
}

llmrt_status cpu_rope(llmrt_backend *b, float *x, const int32_t *positions, int32_t n,
                      int32_t heads, int32_t head_dim, float theta, llmrt_error *err)
{
    if (head_dim <= 0 || head_dim % 2 || head_dim > CPU_MAX_HEAD_DIM)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: rope: head_dim %d must be even and in [2, %d]", head_dim,
                          CPU_MAX_HEAD_DIM);
    if (!(theta > 0.0f))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: rope: theta %g must be > 0",
                          (double)theta);
    /* transformers: 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), all in f32 */
    float inv_freq[CPU_MAX_HEAD_DIM / 2];
    for (int i = 0; i < head_dim / 2; i++)
        inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
    rope_ctx c = {x, positions, heads, head_dim, inv_freq};
    cpu_parallel(b, n, (int64_t)heads * head_dim + 20 * head_dim, 0, rope_rows, &c);
    return LLMRT_OK;
}

/* ---- silu·mul, add ---- */

typedef struct {
    float *out;
    const float *a, *c;
} ew_ctx;

static void silu_mul_range(void *ctx, int64_t i0, int64_t i1)
{
    const ew_ctx *e = ctx;
    for (int64_t i = i0; i < i1; i++) {
        float g = e->a[i];
        e->out[i] = (g / (1.0f + expf(-g))) * e->c[i]; /* torch: x / (1 + exp(-x)) */
    }
}

static void add_range(void *ctx, int64_t i0, int64_t i1)
{
    const ew_ctx *e = ctx;
    for (int64_t i = i0; i < i1; i++)
        e->out[i] = e->a[i] + e->c[i];
}

llmrt_status cpu_silu_mul(llmrt_backend *b, float *out, const float *gate, const float *up,
                          int64_t n, llmrt_error *err)
{
    ew_ctx c = {out, gate, up};
    cpu_parallel(b, n, 16, 0, silu_mul_range, &c);
    return LLMRT_OK;
}

llmrt_status cpu_add(llmrt_backend *b, float *out, const float *a, const float *c, int64_t n,
                     llmrt_error *err)
{
    ew_ctx e = {out, a, c};
    cpu_parallel(b, n, 1, 0, add_range, &e);
    return LLMRT_OK;
}

/* ---- argmax ---- */

typedef struct {
    int32_t *out;
    const float *logits;
    int64_t vocab;
} argmax_ctx;

static void argmax_rows(void *ctx, int64_t r0, int64_t r1)
{
    const argmax_ctx *a = ctx;
    for (int64_t r = r0; r < r1; r++) {
        const float *l = a->logits + r * a->vocab;
        int64_t best = 0;
        float bv = l[0];
        for (int64_t i = 1; i < a->vocab; i++)
            if (l[i] > bv || (bv != bv && l[i] == l[i])) /* strictly greater: lowest index wins; a NaN never does */
                bv = l[i], best = i;
        a->out[r] = (int32_t)best;
    }
}

llmrt_status cpu_argmax(llmrt_backend *b, int32_t *out, const float *logits, int32_t rows,
                        int32_t vocab, llmrt_error *err)
{
    if (vocab <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: argmax: vocab %d must be > 0",
                          vocab);
    argmax_ctx c = {out, logits, vocab};
    cpu_parallel(b, rows, vocab, 0, argmax_rows, &c);
    return LLMRT_OK;
}
