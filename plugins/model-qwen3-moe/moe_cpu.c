/* moe_cpu.c — the MoE block's own ops on a backend whose device memory is host memory (the
 * CPU backend): routing, sorting rows by expert, the dense experts' grouped linear, SwiGLU and
 * the weighted combine. The CUDA versions (moe_cuda.cu) compute the same; tests compare them.
 *
 * Why in the plugin: routing (softmax, top-k, norm_topk_prob) and the combine are this
 * architecture's arithmetic, a few floats per token; the dense experts' linears are the
 * backend's gemm over each expert's rows. Everything is f32 in a fixed order per row, so a
 * row's result does not depend on the batch it is in. */
#include <math.h>
#include <string.h>

#include "moe.h"

static void run_parallel(const llmrt_backend_ref *be, int64_t n,
                         void (*fn)(void *, int64_t, int64_t), void *ctx)
{
    if (LLMRT_VT_HAS(be->vt, llmrt_backend_vtable, parallel_for))
        be->vt->parallel_for(be->b, n, fn, ctx);
    else
        fn(ctx, 0, n);
}

/* ---- routing ---- */

typedef struct route_ctx {
    const float *logits;
    int32_t E, K, norm_topk;
    int32_t *topk_id;
    float *topk_w;
} route_ctx;

static void route_rows(void *c, int64_t t0, int64_t t1)
{
    const route_ctx *r = c;
    const int32_t E = r->E, K = r->K;
    for (int64_t t = t0; t < t1; t++) {
        const float *l = r->logits + t * E;
        int32_t *ids = r->topk_id + t * K;
        float *w = r->topk_w + t * K;
        float mx = l[0];
        for (int32_t e = 1; e < E; e++)
            mx = l[e] > mx ? l[e] : mx;
        float sum = 0.0f;
        for (int32_t e = 0; e < E; e++)
            sum += expf(l[e] - mx);
        /* the K largest logits, best first; the lowest index among equal logits */
        for (int32_t k = 0; k < K; k++) {
            int32_t best = -1;
            for (int32_t e = 0; e < E; e++) {
                int taken = 0;
                for (int32_t j = 0; j < k && !taken; j++)
                    taken = ids[j] == e;
                if (!taken && (best < 0 || l[e] > l[best]))
                    best = e;
            }
            ids[k] = best;
            w[k] = expf(l[best] - mx) / sum;
        }
        if (r->norm_topk) {
            float s = 0.0f;
            for (int32_t k = 0; k < K; k++)
                s += w[k];
            for (int32_t k = 0; k < K; k++)
                w[k] /= s;
        }
    }
}

void moe_cpu_route(const llmrt_backend_ref *be, const float *logits, int32_t T, int32_t E,
                   int32_t K, int norm_topk, int32_t *topk_id, float *topk_w)
{
    route_ctx r = {logits, E, K, norm_topk, topk_id, topk_w};
    run_parallel(be, T, route_rows, &r);
}

void moe_cpu_sort(const int32_t *topk_id, int32_t T, int32_t K, int32_t E, int32_t *row_expert,
                  int32_t *row_src, int32_t *expert_start, int32_t *row_of, int32_t *cursor)
{
    const int32_t N = T * K;
    memset(expert_start, 0, (size_t)(E + 1) * sizeof *expert_start);
    for (int32_t i = 0; i < N; i++)
        expert_start[topk_id[i] + 1]++;
    for (int32_t e = 0; e < E; e++)
        expert_start[e + 1] += expert_start[e];
    memcpy(cursor, expert_start, (size_t)E * sizeof *cursor);
    for (int32_t i = 0; i < N; i++) { /* in token order: stable */
        const int32_t e = topk_id[i], pos = cursor[e]++;
        row_expert[pos] = e;
        row_src[pos] = i / K;
        row_of[i] = pos;
    }
}

/* ---- the dense experts ---- */

static float silu(float g) { return g / (1.0f + expf(-g)); }

void moe_cpu_swiglu(float *out, const float *gu, int32_t n, int32_t d)
{
    for (int64_t r = 0; r < n; r++)
        for (int32_t i = 0; i < d; i++)
            out[r * d + i] = silu(gu[r * 2 * d + i]) * gu[r * 2 * d + d + i];
}

llmrt_status moe_cpu_dense_grouped(const llmrt_backend_ref *be, const moe_experts *ex, float *y,
                                   const float *x, const int32_t *row_src,
                                   const int32_t *expert_start, int glu, float *xg, float *yg,
                                   llmrt_error *err)
{
    const int64_t in = ex->in, out = ex->out, yw = glu ? out / 2 : out;
    for (int32_t e = 0; e < ex->n; e++) {
        const qwen3_linear *l = &ex->lin[e];
        const int32_t r0 = expert_start[e], cnt = expert_start[e + 1] - r0;
        if (l->q || cnt <= 0)
            continue;
        const float *xe = x + (int64_t)r0 * in; /* rows of x in order: no gather */
        if (row_src) {
            for (int32_t i = 0; i < cnt; i++)
                memcpy(xg + (int64_t)i * in, x + (int64_t)row_src[r0 + i] * in,
                       (size_t)in * sizeof *xg);
            xe = xg;
        }
        float *ye = glu ? yg : y + (int64_t)r0 * yw;
        llmrt_status st = be->vt->gemm(be->b, ye, xe, &l->w, cnt, err);
        if (st)
            return st;
        if (glu)
            moe_cpu_swiglu(y + (int64_t)r0 * yw, yg, cnt, (int32_t)yw);
    }
    return LLMRT_OK;
}

/* ---- combine ---- */

typedef struct combine_ctx {
    float *out;
    const float *rows, *topk_w;
    const int32_t *row_of;
    int32_t K, H;
} combine_ctx;

static void combine_rows(void *c, int64_t t0, int64_t t1)
{
    const combine_ctx *m = c;
    for (int64_t t = t0; t < t1; t++) {
        float *o = m->out + t * m->H;
        for (int32_t h = 0; h < m->H; h++)
            o[h] = 0.0f;
        for (int32_t k = 0; k < m->K; k++) {
            const float w = m->topk_w[t * m->K + k];
            const float *r = m->rows + (int64_t)m->row_of[t * m->K + k] * m->H;
            for (int32_t h = 0; h < m->H; h++)
                o[h] += w * r[h];
        }
    }
}

void moe_cpu_combine(const llmrt_backend_ref *be, float *out, const float *rows,
                     const float *topk_w, const int32_t *row_of, int32_t T, int32_t K, int32_t H)
{
    combine_ctx c = {out, rows, topk_w, row_of, K, H};
    run_parallel(be, T, combine_rows, &c);
}
