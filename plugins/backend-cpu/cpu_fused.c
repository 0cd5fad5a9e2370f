/* cpu_fused.c — the "llmrt.fused" extension (ext/fused.h) on the CPU: add + RMSNorm, the
 * attention prologue over a fused qkv projection (per-head q/k RMSNorm, RoPE, KV-cache
 * store), and SwiGLU over a fused gate|up projection.
 *
 * Why on the CPU too: the model plugin fuses its q/k/v and gate/up projections only when the
 * backend has these ops, so the CPU (the reference, and CI's backend) runs the same model
 * code path as the GPU. The fused ops use the same row primitives as the separate ops
 * (cpu_norm_row, cpu_rotate_half, cpu_store_row in cpu_internal.h), so fused and separate
 * results are bit-identical here. */
#include "cpu_internal.h"

#include <math.h>

#define FUSED_MAX_HEAD_DIM 1024

static llmrt_status check_weight(const llmrt_tensor *w, int64_t d, const char *op,
                                 const char *what, llmrt_error *err)
{
    if (!w || !w->data || !cpu_is_float_dtype(w->dtype) || llmrt_tensor_numel(w) != d)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: %s: %s must be an F32/F16/BF16 tensor of %lld elements",
                          op, what, (long long)d);
    return LLMRT_OK;
}

/* ---- add + rmsnorm ---- */

typedef struct {
    float *out, *x;
    const float *res;
    const llmrt_tensor *w;
    int64_t d;
    float eps;
} arn_ctx;

static void arn_rows(void *c, int64_t r0, int64_t r1)
{
    const arn_ctx *a = c;
    for (int64_t r = r0; r < r1; r++) {
        float *x = a->x + r * a->d;
        if (a->res) {
            const float *res = a->res + r * a->d;
            for (int64_t i = 0; i < a->d; i++)
                x[i] = x[i] + res[i];
        }
        cpu_norm_row(a->out + r * a->d, x, a->w, a->d, a->eps);
    }
}

llmrt_status cpu_add_rmsnorm(llmrt_backend *b, float *out, float *x, const float *res,
                             const llmrt_tensor *w, int32_t rows, int32_t d, float eps,
                             llmrt_error *err)
{
    llmrt_status st = check_weight(w, d, "add_rmsnorm", "weight", err);
    if (st != LLMRT_OK)
        return st;
    if (d <= 0 || rows < 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: add_rmsnorm: rows %d, d %d",
                          rows, d);
    arn_ctx c = {out, x, res, w, d, eps};
    cpu_parallel(b, rows, 4 * (int64_t)d, 0, arn_rows, &c);
    return LLMRT_OK;
}

/* ---- q/k norm + rope + kv store ---- */

typedef struct {
    float *q_out;
    const float *qkv;
    const llmrt_tensor *qn, *kn;
    const int32_t *pos, *slots;
    void *kc, *vc;
    llmrt_dtype dt;
    int32_t n_heads, n_kv, hd;
    float eps;
    const float *inv_freq; /* [hd / 2] */
} qkr_ctx;

static void qkr_rows(void *c, int64_t t0, int64_t t1)
{
    const qkr_ctx *q = c;
    const int hd = q->hd, half = hd / 2;
    const int heads = q->n_heads + 2 * q->n_kv;
    const int64_t kv_row = (int64_t)q->n_kv * hd;
    float cs[FUSED_MAX_HEAD_DIM / 2], sn[FUSED_MAX_HEAD_DIM / 2], tmp[FUSED_MAX_HEAD_DIM];
    for (int64_t t = t0; t < t1; t++) {
        const float p = (float)q->pos[t];
        for (int i = 0; i < half; i++) {
            float f = p * q->inv_freq[i];
            cs[i] = cosf(f);
            sn[i] = sinf(f);
        }
        const float *src = q->qkv + t * heads * (int64_t)hd;
        for (int h = 0; h < q->n_heads; h++) {
            float *dst = q->q_out + (t * q->n_heads + h) * (int64_t)hd;
            if (q->qn)
                cpu_norm_row(dst, src + (int64_t)h * hd, q->qn, hd, q->eps);
            else
                memcpy(dst, src + (int64_t)h * hd, (size_t)hd * sizeof(float));
            cpu_rotate_half(dst, cs, sn, half);
        }
        const int32_t slot = q->slots[t];
        if (slot < 0)
            continue;
        for (int h = 0; h < q->n_kv; h++) {
            const float *k = src + (int64_t)(q->n_heads + h) * hd;
            if (q->kn)
                cpu_norm_row(tmp, k, q->kn, hd, q->eps);
            else
                memcpy(tmp, k, (size_t)hd * sizeof(float));
            cpu_rotate_half(tmp, cs, sn, half);
            cpu_store_row(q->kc, q->dt, (int64_t)slot * kv_row + (int64_t)h * hd, tmp, hd);
        }
        cpu_store_row(q->vc, q->dt, (int64_t)slot * kv_row,
                  src + (int64_t)(q->n_heads + q->n_kv) * hd, kv_row);
    }
}

llmrt_status cpu_qk_norm_rope_store(llmrt_backend *b, float *q_out, const float *qkv,
                                    const llmrt_tensor *q_norm, const llmrt_tensor *k_norm,
                                    const int32_t *positions, const int32_t *slot_mapping,
                                    int32_t n, int32_t n_heads, int32_t n_kv_heads,
                                    int32_t head_dim, float eps, float theta, void *k_cache,
                                    void *v_cache, llmrt_dtype kv_dtype, llmrt_error *err)
{
    llmrt_status st;
    if (head_dim <= 0 || head_dim % 2 || head_dim > FUSED_MAX_HEAD_DIM || n_heads <= 0 ||
        n_kv_heads <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: qk_norm_rope_store: head_dim %d must be even and in [2, "
                          "%d]; n_heads %d and n_kv_heads %d must be > 0",
                          head_dim, FUSED_MAX_HEAD_DIM, n_heads, n_kv_heads);
    if (!cpu_is_float_dtype(kv_dtype))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cpu backend: qk_norm_rope_store: cache dtype %s is not supported "
                          "(F32, F16, BF16)", llmrt_dtype_name(kv_dtype));
    if (q_norm && (st = check_weight(q_norm, head_dim, "qk_norm_rope_store", "q_norm", err)))
        return st;
    if (k_norm && (st = check_weight(k_norm, head_dim, "qk_norm_rope_store", "k_norm", err)))
        return st;
    if (!(theta > 0.0f))
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: qk_norm_rope_store: theta %g must be > 0", (double)theta);
    for (int32_t t = 0; t < n; t++)
        if (slot_mapping[t] < -1)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "cpu backend: qk_norm_rope_store: slot_mapping[%d] = %d (must be >= "
                              "0, or -1 to skip)", t, slot_mapping[t]);
    /* cpu_rope: 1.0 / (base ** (arange(0, dim, 2) / dim)) in f32 */
    float inv_freq[FUSED_MAX_HEAD_DIM / 2];
    for (int i = 0; i < head_dim / 2; i++)
        inv_freq[i] = 1.0f / powf(theta, (float)(2 * i) / (float)head_dim);
    qkr_ctx c = {q_out, qkv, q_norm, k_norm, positions, slot_mapping, k_cache, v_cache,
                 kv_dtype, n_heads, n_kv_heads, head_dim, eps, inv_freq};
    cpu_parallel(b, n, (int64_t)(n_heads + 2 * n_kv_heads) * head_dim * 4, 0, qkr_rows, &c);
    return LLMRT_OK;
}

/* ---- swiglu ---- */

typedef struct {
    float *out;
    const float *gu;
    int64_t d;
} swiglu_ctx;

static void swiglu_rows(void *c, int64_t t0, int64_t t1)
{
    const swiglu_ctx *s = c;
    for (int64_t t = t0; t < t1; t++) {
        const float *g = s->gu + t * 2 * s->d, *u = g + s->d;
        float *o = s->out + t * s->d;
        for (int64_t i = 0; i < s->d; i++)
            o[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i]; /* cpu_silu_mul's expression */
    }
}

llmrt_status cpu_swiglu(llmrt_backend *b, float *out, const float *gu, int32_t n, int32_t d,
                        llmrt_error *err)
{
    if (n < 0 || d <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: swiglu: n %d, d %d", n, d);
    swiglu_ctx c = {out, gu, d};
    cpu_parallel(b, n, 16 * (int64_t)d, 0, swiglu_rows, &c);
    return LLMRT_OK;
}
