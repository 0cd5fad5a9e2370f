/* test_cuda_ops.c — every op of backend-cuda against backend-cpu (the reference) on the same
 * random inputs, several shapes each, outputs poisoned with NaN before every run.
 *
 * Tolerances (relative L2 error, ||cuda - cpu|| / ||cpu||), and why:
 *   exact (0)  embedding, kv_store (both round f32 → f16/bf16 to nearest even), argmax
 *   1e-5       rmsnorm, silu_mul, add, attention, gemm n <= 8 and F32 gemm: fp32 math on the
 *              same values, only the summation order differs
 *   5e-4       rope at positions < 4096: powf may differ by an ulp between CUDA and glibc,
 *              and the angle is position x inv_freq
 *   3e-3 / 1e-2  prefill attention on the tensor cores (f16 / bf16 caches): the queries and
 *              the softmax weights P are rounded to the cache type before each mma
 *   2e-3 / 8e-3  gemm n > 8 with F16 / BF16 weights: cuBLAS multiplies the activations cast
 *              to the weight dtype (2^-11 / 2^-9 relative rounding per element)
 * argmax_head has no CPU counterpart either: its ids must equal CUDA gemm + argmax exactly.
 * sample has no CPU counterpart (backend-cpu leaves it NULL): it is checked against a
 * double-precision reference of the same rules (cuda_test_common.c) and core's host sampler,
 * and its fast path against its one-block path, token for token.
 * Exits 77 when no CUDA device is visible. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_common.h"
#include "sampler.h" /* core's host sampler: device and host must draw the same token */

#define TOL_FP32 1e-5
#define TOL_ROPE 5e-4
#define TOL_GEMM_F16 2e-3
#define TOL_GEMM_BF16 8e-3

static const llmrt_dtype float_types[3] = {LLMRT_DTYPE_F32, LLMRT_DTYPE_F16, LLMRT_DTYPE_BF16};

/* A weight-like tensor on a backend from f32 host values (converted to dt). */
static llmrt_tensor make_tensor(const llmrt_backend_ref *b, const float *vals, llmrt_dtype dt,
                                int64_t d0, int64_t d1)
{
    llmrt_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = d1 > 0 ? 2 : 1;
    t.shape[0] = d0;
    t.shape[1] = d1 > 0 ? d1 : 0;
    size_t n = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    void *host = ct_to_dtype(vals, n, dt, NULL);
    t.data = ct_dup(b, host, n * llmrt_dtype_size(dt));
    free(host);
    return t;
}

/* ---- embedding ---- */

START_TEST(test_embedding)
{
    static const int shapes[][3] = {{1000, 4096, 1}, {517, 65, 7}, {300, 128, 33}};
    llmrt_error err = {0};
    ct_rng r = {11};
    for (int di = 0; di < 3; di++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            const int rows = shapes[si][0], d = shapes[si][1], n = shapes[si][2];
            float *table = ct_rand_f32(&r, (size_t)rows * d, -1, 1);
            int32_t *ids = malloc(n * sizeof *ids);
            for (int i = 0; i < n; i++)
                ids[i] = ct_int(&r, 0, rows - 1);
            float *res[2];
            const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
            for (int k = 0; k < 2; k++) {
                llmrt_tensor t = make_tensor(bes[k], table, float_types[di], rows, d);
                int32_t *dids = ct_dup(bes[k], ids, n * sizeof *ids);
                float *out = ct_alloc(bes[k], (size_t)n * d * sizeof(float));
                ct_poison(bes[k], out, (size_t)n * d);
                CT_OK(bes[k]->vt->embedding(bes[k]->b, out, &t, dids, n, &err));
                res[k] = malloc((size_t)n * d * sizeof(float));
                ct_download(bes[k], res[k], out, (size_t)n * d * sizeof(float));
                ct_free(bes[k], t.data);
                ct_free(bes[k], dids);
                ct_free(bes[k], out);
            }
            char what[96];
            snprintf(what, sizeof what, "embedding %s [%d, %d] n=%d",
                     llmrt_dtype_name(float_types[di]), rows, d, n);
            ct_assert_close(res[0], res[1], (size_t)n * d, 0.0, what);
            free(res[0]), free(res[1]), free(table), free(ids);
        }
}
END_TEST

/* ---- rmsnorm ---- */

START_TEST(test_rmsnorm)
{
    static const int shapes[][2] = {{1, 4096}, {3, 1000}, {17, 128}, {5, 33}, {2, 8192}, {40, 256}};
    llmrt_error err = {0};
    ct_rng r = {12};
    for (int di = 0; di < 3; di++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
            for (int inplace = 0; inplace < 2; inplace++) {
                const int rows = shapes[si][0], d = shapes[si][1];
                float *x = ct_rand_f32(&r, (size_t)rows * d, -3, 3);
                float *w = ct_rand_f32(&r, d, 0.5f, 1.5f);
                float *res[2];
                const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
                for (int k = 0; k < 2; k++) {
                    llmrt_tensor t = make_tensor(bes[k], w, float_types[di], d, 0);
                    float *dx = ct_dup(bes[k], x, (size_t)rows * d * sizeof(float));
                    float *out = dx;
                    if (!inplace) {
                        out = ct_alloc(bes[k], (size_t)rows * d * sizeof(float));
                        ct_poison(bes[k], out, (size_t)rows * d);
                    }
                    CT_OK(bes[k]->vt->rmsnorm(bes[k]->b, out, dx, &t, rows, d, 1e-6f, &err));
                    res[k] = malloc((size_t)rows * d * sizeof(float));
                    ct_download(bes[k], res[k], out, (size_t)rows * d * sizeof(float));
                    ct_free(bes[k], t.data);
                    if (!inplace)
                        ct_free(bes[k], out);
                    ct_free(bes[k], dx);
                }
                char what[96];
                snprintf(what, sizeof what, "rmsnorm %s [%d, %d]%s",
                         llmrt_dtype_name(float_types[di]), rows, d, inplace ? " in place" : "");
                ct_assert_close(res[0], res[1], (size_t)rows * d, TOL_FP32, what);
                free(res[0]), free(res[1]), free(x), free(w);
            }
}
END_TEST

/* ---- rope ---- */

START_TEST(test_rope)
{
    static const int shapes[][3] = {{1, 32, 128}, {7, 8, 64}, {33, 4, 128}, {3, 2, 256}};
    static const float thetas[2] = {1000000.0f, 10000.0f};
    llmrt_error err = {0};
    ct_rng r = {13};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int ti = 0; ti < 2; ti++) {
            const int n = shapes[si][0], heads = shapes[si][1], hd = shapes[si][2];
            const size_t cnt = (size_t)n * heads * hd;
            float *x = ct_rand_f32(&r, cnt, -2, 2);
            int32_t *pos = malloc(n * sizeof *pos);
            for (int i = 0; i < n; i++)
                pos[i] = i == 0 ? 0 : ct_int(&r, 0, 4095);
            float *res[2];
            const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
            for (int k = 0; k < 2; k++) {
                float *dx = ct_dup(bes[k], x, cnt * sizeof(float));
                int32_t *dp = ct_dup(bes[k], pos, n * sizeof *pos);
                CT_OK(bes[k]->vt->rope(bes[k]->b, dx, dp, n, heads, hd, thetas[ti], &err));
                res[k] = malloc(cnt * sizeof(float));
                ct_download(bes[k], res[k], dx, cnt * sizeof(float));
                ct_free(bes[k], dx);
                ct_free(bes[k], dp);
            }
            char what[96];
            snprintf(what, sizeof what, "rope n=%d heads=%d head_dim=%d theta=%g", n, heads, hd,
                     (double)thetas[ti]);
            ct_assert_close(res[0], res[1], cnt, TOL_ROPE, what);
            /* position 0 is the identity */
            ct_assert_close(res[0], x, (size_t)heads * hd, 0.0, "rope at position 0");
            free(res[0]), free(res[1]), free(x), free(pos);
        }
}
END_TEST

/* ---- kv_store ---- */

START_TEST(test_kv_store)
{
    llmrt_error err = {0};
    ct_rng r = {14};
    static const int shapes[][3] = {{5, 2, 64}, {33, 8, 128}, {1, 4, 256}};
    for (int di = 0; di < 3; di++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            const llmrt_dtype dt = float_types[di];
            const int n = shapes[si][0], kvh = shapes[si][1], hd = shapes[si][2];
            const int slots_total = 4 * n + 16, row = kvh * hd;
            const size_t es = llmrt_dtype_size(dt), cache_bytes = (size_t)slots_total * row * es;
            float *k = ct_rand_f32(&r, (size_t)n * row, -4, 4);
            float *v = ct_rand_f32(&r, (size_t)n * row, -4, 4);
            int32_t *slots = malloc(n * sizeof *slots);
            /* distinct slots in random order (a shuffle of all slots: two tokens writing one
             * slot would race on the GPU); every fourth token skipped (-1) */
            int32_t *perm = malloc(slots_total * sizeof *perm);
            for (int i = 0; i < slots_total; i++)
                perm[i] = i;
            for (int i = slots_total - 1; i > 0; i--) {
                int j = ct_int(&r, 0, i);
                int32_t t = perm[i];
                perm[i] = perm[j], perm[j] = t;
            }
            for (int i = 0; i < n; i++)
                slots[i] = (i % 4 == 3) ? -1 : perm[i];
            free(perm);
            unsigned char *init = malloc(cache_bytes);
            for (size_t i = 0; i < cache_bytes; i++)
                init[i] = (unsigned char)ct_next(&r);
            unsigned char *res_k[2], *res_v[2];
            const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
            for (int b = 0; b < 2; b++) {
                void *kc = ct_dup(bes[b], init, cache_bytes), *vc = ct_dup(bes[b], init, cache_bytes);
                float *dk = ct_dup(bes[b], k, (size_t)n * row * sizeof(float));
                float *dv = ct_dup(bes[b], v, (size_t)n * row * sizeof(float));
                int32_t *ds = ct_dup(bes[b], slots, n * sizeof *slots);
                CT_OK(bes[b]->vt->kv_store(bes[b]->b, kc, vc, dt, dk, dv, ds, n, kvh, hd, &err));
                res_k[b] = malloc(cache_bytes);
                res_v[b] = malloc(cache_bytes);
                ct_download(bes[b], res_k[b], kc, cache_bytes);
                ct_download(bes[b], res_v[b], vc, cache_bytes);
                ct_free(bes[b], kc), ct_free(bes[b], vc), ct_free(bes[b], dk), ct_free(bes[b], dv);
                ct_free(bes[b], ds);
            }
            ck_assert_msg(memcmp(res_k[0], res_k[1], cache_bytes) == 0,
                          "kv_store %s n=%d kvh=%d hd=%d: K caches differ", llmrt_dtype_name(dt), n,
                          kvh, hd);
            ck_assert_msg(memcmp(res_v[0], res_v[1], cache_bytes) == 0,
                          "kv_store %s n=%d kvh=%d hd=%d: V caches differ", llmrt_dtype_name(dt), n,
                          kvh, hd);
            /* the test is not vacuous: written slots changed */
            ck_assert_msg(memcmp(res_k[0] + (size_t)slots[0] * row * es, init + (size_t)slots[0] * row * es,
                                 (size_t)row * es) != 0, "kv_store wrote nothing");
            for (int b = 0; b < 2; b++)
                free(res_k[b]), free(res_v[b]);
            free(k), free(v), free(slots), free(init);
        }
}
END_TEST

/* A second CUDA backend made with [backend.cuda] tune = `tune`. */
static llmrt_backend *create_tuned(const char *tune)
{
    llmrt_error err = {0};
    llmrt_backend *b = NULL;
    llmrt_status st = ct_create_cuda("tune", tune, &b, &err);
    ck_assert_msg(st == LLMRT_OK, "CUDA backend with tune = %s: %s", tune, err.msg);
    return b;
}

/* ---- attention ---- */

typedef struct att_case {
    const char *name;
    int n_seqs;
    int qlen[4], ctx[4];
    int n_heads, n_kv_heads, head_dim, block_size;
    llmrt_dtype dt;
    int max_seq_len; /* 0: the largest ctx; else a larger bucket bound (graph style) */
} att_case;

static const att_case att_cases[] = {
    /* decode */
    {"decode qwen3-8b ctx 128", 1, {1}, {128}, 32, 8, 128, 16, LLMRT_DTYPE_F16, 0},
    {"decode 3 seqs split-K", 3, {1, 1, 1}, {1, 77, 2100}, 8, 2, 64, 16, LLMRT_DTYPE_BF16, 0},
    {"decode MHA f32", 4, {1, 1, 1, 1}, {5, 300, 1000, 33}, 16, 16, 128, 32, LLMRT_DTYPE_F32, 0},
    {"decode G=16 hd 256", 2, {1, 1}, {700, 50}, 16, 1, 256, 16, LLMRT_DTYPE_F16, 0},
    {"decode bucket bound 4096", 2, {1, 1}, {10, 200}, 8, 4, 128, 16, LLMRT_DTYPE_F16, 4096},
    {"decode G=8 bf16 long", 2, {1, 1}, {129, 4000}, 32, 4, 128, 16, LLMRT_DTYPE_BF16, 0},
    {"decode G=3", 2, {1, 1}, {100, 9}, 12, 4, 128, 16, LLMRT_DTYPE_F16, 0},
    /* prefill and mixed */
    {"prefill 100", 1, {100}, {100}, 8, 2, 128, 16, LLMRT_DTYPE_F16, 0},
    {"mixed prefix + decode f32", 3, {37, 1, 64}, {37, 500, 200}, 4, 4, 64, 16, LLMRT_DTYPE_F32, 0},
    {"prefill G=8 hd 256 bf16", 2, {130, 5}, {130, 2000}, 16, 2, 256, 16, LLMRT_DTYPE_BF16, 0},
    {"prefill G=16 hd 64", 1, {65}, {300}, 16, 1, 64, 16, LLMRT_DTYPE_F16, 0},
    {"prefill G=3 mixed", 2, {20, 1}, {20, 100}, 12, 4, 128, 32, LLMRT_DTYPE_F16, 2048},
    /* the head_dims of the test fixtures (32) and of Phi-3 (96) */
    {"decode hd 32 graph bound", 2, {1, 1}, {20, 90}, 4, 2, 32, 16, LLMRT_DTYPE_F16, 256},
    {"decode hd 32 f32 split-K", 1, {1}, {700}, 4, 2, 32, 16, LLMRT_DTYPE_F32, 0},
    {"prefill hd 32 mixed f32", 2, {17, 1}, {17, 60}, 4, 2, 32, 16, LLMRT_DTYPE_F32, 0},
    {"decode hd 96 G=4 bf16", 2, {1, 1}, {300, 45}, 16, 4, 96, 16, LLMRT_DTYPE_BF16, 0},
    {"decode hd 96 f32 long", 1, {1}, {1500}, 12, 4, 96, 32, LLMRT_DTYPE_F32, 0},
    {"prefill hd 96 f16", 1, {70}, {150}, 8, 2, 96, 16, LLMRT_DTYPE_F16, 0},
    /* the tensor-core prefill: chunks after a cached prefix, ragged tiles, GQA packings */
    {"chunked qwen3 f16", 2, {64, 33}, {300, 733}, 32, 8, 128, 16, LLMRT_DTYPE_F16, 0},
    {"mixed 4 seqs bf16", 4, {1, 130, 1, 17}, {2000, 500, 40, 17}, 32, 8, 128, 16,
     LLMRT_DTYPE_BF16, 4096},
    {"prefill 1100 G=4", 1, {1100}, {1100}, 16, 4, 128, 16, LLMRT_DTYPE_F16, 0},
    {"prefill MHA hd 64 bf16", 2, {77, 2}, {77, 90}, 8, 8, 64, 32, LLMRT_DTYPE_BF16, 0},
    {"prefill G=2 hd 96 chunk", 1, {45}, {1045}, 8, 4, 96, 16, LLMRT_DTYPE_F16, 0},
};

/* The relative error a case may have against the CPU: fp32 math everywhere but in prefill
 * rows on the tensor cores (f16 / bf16 caches of head_dim 64, 96, 128, unless the variant
 * sends prefill to the fp32 kernel). */
static double att_tolerance(const att_case *c, int pf_fp32)
{
    int max_q = 0;
    for (int s = 0; s < c->n_seqs; s++)
        max_q = c->qlen[s] > max_q ? c->qlen[s] : max_q;
    const int mma = !pf_fp32 && max_q > 1 && c->dt != LLMRT_DTYPE_F32 &&
                    (c->head_dim == 64 || c->head_dim == 96 || c->head_dim == 128);
    return !mma ? TOL_FP32 * 10 : c->dt == LLMRT_DTYPE_BF16 ? 1e-2 : 3e-3;
}

static void run_att_case(const att_case *c, uint64_t seed, const llmrt_backend_ref *cuda,
                         const char *variant, int pf_fp32)
{
    llmrt_error err = {0};
    ct_rng r = {seed};
    const int hd = c->head_dim, bs = c->block_size;
    int n_tokens = 0, max_q = 0, max_ctx = 0, mbps = 0, total_blocks = 0;
    for (int s = 0; s < c->n_seqs; s++) {
        n_tokens += c->qlen[s];
        max_q = c->qlen[s] > max_q ? c->qlen[s] : max_q;
        max_ctx = c->ctx[s] > max_ctx ? c->ctx[s] : max_ctx;
        int nb = (c->ctx[s] + bs - 1) / bs;
        total_blocks += nb;
        mbps = nb > mbps ? nb : mbps;
    }
    const int max_seq = c->max_seq_len ? c->max_seq_len : max_ctx;
    if ((max_seq + bs - 1) / bs > mbps)
        mbps = (max_seq + bs - 1) / bs;
    const int n_blocks = total_blocks + 3; /* a few never used */
    /* block ids: a random permutation, so tables are not in order */
    int32_t *perm = malloc(n_blocks * sizeof *perm);
    for (int i = 0; i < n_blocks; i++)
        perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        int j = ct_int(&r, 0, i), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int32_t *tables = malloc((size_t)c->n_seqs * mbps * sizeof *tables);
    int used = 0;
    for (int s = 0; s < c->n_seqs; s++)
        for (int j = 0; j < mbps; j++)
            tables[s * mbps + j] = j < (c->ctx[s] + bs - 1) / bs ? perm[used++] : perm[n_blocks - 1];
    int32_t qs[5], lens[4];
    qs[0] = 0;
    for (int s = 0; s < c->n_seqs; s++) {
        qs[s + 1] = qs[s] + c->qlen[s];
        lens[s] = c->ctx[s];
    }
    const size_t cache_elems = (size_t)n_blocks * bs * c->n_kv_heads * hd;
    float *kf = ct_rand_f32(&r, cache_elems, -1, 1), *vf = ct_rand_f32(&r, cache_elems, -1, 1);
    void *kh = ct_to_dtype(kf, cache_elems, c->dt, NULL), *vh = ct_to_dtype(vf, cache_elems, c->dt, NULL);
    const size_t qn = (size_t)n_tokens * c->n_heads * hd;
    float *q = ct_rand_f32(&r, qn, -2, 2);
    const size_t cache_bytes = cache_elems * llmrt_dtype_size(c->dt);

    float *res[2];
    const llmrt_backend_ref *bes[2] = {cuda, &CT.cpu};
    for (int b = 0; b < 2; b++) {
        llmrt_attn_params p;
        memset(&p, 0, sizeof p);
        p.n_tokens = n_tokens;
        p.n_seqs = c->n_seqs;
        p.n_heads = c->n_heads;
        p.n_kv_heads = c->n_kv_heads;
        p.head_dim = hd;
        p.scale = 1.0f / sqrtf((float)hd);
        p.query_start = ct_dup(bes[b], qs, (c->n_seqs + 1) * sizeof(int32_t));
        p.seq_lens = ct_dup(bes[b], lens, c->n_seqs * sizeof(int32_t));
        p.block_tables = ct_dup(bes[b], tables, (size_t)c->n_seqs * mbps * sizeof(int32_t));
        p.max_blocks_per_seq = mbps;
        p.block_size = bs;
        p.max_seq_len = max_seq;
        p.max_query_len = max_q;
        p.kv_dtype = c->dt;
        p.k_cache = ct_dup(bes[b], kh, cache_bytes);
        p.v_cache = ct_dup(bes[b], vh, cache_bytes);
        float *dq = ct_dup(bes[b], q, qn * sizeof(float));
        float *out = ct_alloc(bes[b], qn * sizeof(float));
        res[b] = malloc(qn * sizeof(float));
        for (int rep = 0; rep < 2; rep++) { /* twice: scratch reuse must not leak state */
            ct_poison(bes[b], out, qn);
            CT_OK(bes[b]->vt->attention(bes[b]->b, out, dq, &p, &err));
            ct_download(bes[b], res[b], out, qn * sizeof(float));
        }
        ct_free(bes[b], (void *)p.query_start), ct_free(bes[b], (void *)p.seq_lens);
        ct_free(bes[b], (void *)p.block_tables), ct_free(bes[b], (void *)p.k_cache);
        ct_free(bes[b], (void *)p.v_cache), ct_free(bes[b], dq), ct_free(bes[b], out);
    }
    char what[160];
    snprintf(what, sizeof what, "attention '%s' (%s, H %d / KV %d, hd %d, bs %d%s)", c->name,
             llmrt_dtype_name(c->dt), c->n_heads, c->n_kv_heads, hd, bs, variant);
    ct_assert_close(res[0], res[1], qn, att_tolerance(c, pf_fp32), what);
    free(res[0]), free(res[1]), free(kf), free(vf), free(kh), free(vh), free(q), free(perm);
    free(tables);
}

START_TEST(test_attention)
{
    run_att_case(&att_cases[_i], 100 + (uint64_t)_i, &CT.cuda, "", 0);
}
END_TEST

/* Decode attention stages the first K/V rows of each split in shared memory before waiting
 * on the previous kernel ([backend.cuda] tune att_win = its KB): every case again with a 2 KB
 * window (splits read partly from the window, partly from the cache) and with none. */
START_TEST(test_attention_windows)
{
    static const char *tunes[] = {"att_win=2", "att_win=-1"};
    for (int v = 0; v < 2; v++) {
        llmrt_backend_ref ref = CT.cuda;
        ref.b = create_tuned(tunes[v]);
        char variant[32];
        snprintf(variant, sizeof variant, ", %s", tunes[v]);
        for (size_t i = 0; i < sizeof att_cases / sizeof *att_cases; i++)
            run_att_case(&att_cases[i], 100 + (uint64_t)i, &ref, variant, 0);
        CT.cuda_vt->destroy(ref.b);
    }
}
END_TEST

/* The kernels the batch work added can be switched off ([backend.cuda] tune): prefill on the
 * fp32 kernel, decode splits capped by the batch, a mixed step's decode rows through the
 * prefill kernel; prefill keys in splits of one tile, of 512 keys, of 512 never in split
 * blocks; batch decode without its one-step-ahead loads; every case still equals the CPU. */
START_TEST(test_attention_variants)
{
    static const char *tunes[] = {"att_pf_mma=0", "att_inv=0", "att_mixed=0",
                                  "att_mixed=0,att_pf_mma=0", "att_pf_split=64",
                                  "att_pf_split=512", "att_pf_split=512,att_pf_fill=-1", "att_bpf=0"};
    for (int v = 0; v < (int)(sizeof tunes / sizeof *tunes); v++) {
        llmrt_backend_ref ref = CT.cuda;
        ref.b = create_tuned(tunes[v]);
        char variant[48];
        snprintf(variant, sizeof variant, ", %s", tunes[v]);
        for (size_t i = 0; i < sizeof att_cases / sizeof *att_cases; i++)
            run_att_case(&att_cases[i], 100 + (uint64_t)i, &ref, variant,
                         strstr(tunes[v], "att_pf_mma=0") != NULL);
        CT.cuda_vt->destroy(ref.b);
    }
}
END_TEST

/* ---- attention: batch and chunk invariance ---- */

/* A paged cache of n_seqs sequences (random K/V, tables over a shuffled block pool, on the
 * CUDA backend) and a query for every position of every sequence (or for its last qtail
 * positions), so the same rows can be asked for in different batches and chunks. */
#define AW_MAX_SEQS 64
typedef struct att_world {
    int n_seqs, n_heads, n_kv, hd, bs, mbps;
    llmrt_dtype dt;
    int ctx[AW_MAX_SEQS], qoff[AW_MAX_SEQS]; /* qoff: row of position qpos0 of a sequence */
    int qpos0[AW_MAX_SEQS];                   /* first position with a query */
    int32_t *tables;                          /* host [n_seqs][mbps] */
    float *q;                                 /* host [sum ctx][n_heads][hd] */
    void *kc, *vc;                            /* device */
} att_world;

static att_world aw_make(int n_seqs, const int *ctx, int n_heads, int n_kv, int hd, int bs,
                         llmrt_dtype dt, int max_len, int qtail, uint64_t seed)
{
    att_world w;
    memset(&w, 0, sizeof w);
    w.n_seqs = n_seqs, w.n_heads = n_heads, w.n_kv = n_kv, w.hd = hd, w.bs = bs, w.dt = dt;
    w.mbps = (max_len + bs - 1) / bs;
    ct_rng r = {seed};
    int total_blocks = 0, rows = 0;
    for (int s = 0; s < n_seqs; s++) {
        w.ctx[s] = ctx[s];
        w.qpos0[s] = qtail > 0 && ctx[s] > qtail ? ctx[s] - qtail : 0;
        w.qoff[s] = rows;
        rows += ctx[s] - w.qpos0[s];
        total_blocks += (ctx[s] + bs - 1) / bs;
    }
    const int n_blocks = total_blocks + 1;
    int32_t *perm = malloc((size_t)n_blocks * sizeof *perm);
    for (int i = 0; i < n_blocks; i++)
        perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) {
        int j = ct_int(&r, 0, i), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    w.tables = malloc((size_t)n_seqs * w.mbps * sizeof *w.tables);
    int used = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int j = 0; j < w.mbps; j++)
            w.tables[s * w.mbps + j] = j < (ctx[s] + bs - 1) / bs ? perm[used++] : perm[n_blocks - 1];
    free(perm);
    const size_t elems = (size_t)n_blocks * bs * n_kv * hd;
    float *kf = ct_rand_f32(&r, elems, -1, 1), *vf = ct_rand_f32(&r, elems, -1, 1);
    void *kh = ct_to_dtype(kf, elems, dt, NULL), *vh = ct_to_dtype(vf, elems, dt, NULL);
    w.kc = ct_dup(&CT.cuda, kh, elems * llmrt_dtype_size(dt));
    w.vc = ct_dup(&CT.cuda, vh, elems * llmrt_dtype_size(dt));
    free(kf), free(vf), free(kh), free(vh);
    w.q = ct_rand_f32(&r, (size_t)rows * n_heads * hd, -2, 2);
    return w;
}

static void aw_free(att_world *w)
{
    ct_free(&CT.cuda, w->kc), ct_free(&CT.cuda, w->vc);
    free(w->tables), free(w->q);
}

/* Attention for one call of n items: item i is sequence seq[i]'s query rows at positions
 * start[i] .. start[i] + qlen[i] - 1 (context start + qlen). Returns the output rows
 * [sum qlen][n_heads * hd] (malloc'd). */
static float *aw_run(const att_world *w, const llmrt_backend_ref *be, int n, const int *seq,
                     const int *start, const int *qlen, int max_seq_len)
{
    llmrt_error err = {0};
    const size_t rowf = (size_t)w->n_heads * w->hd;
    int32_t qs[AW_MAX_SEQS + 1], lens[AW_MAX_SEQS];
    int32_t *bt = malloc((size_t)n * w->mbps * sizeof *bt);
    qs[0] = 0;
    int max_q = 0;
    for (int i = 0; i < n; i++) {
        qs[i + 1] = qs[i] + qlen[i];
        lens[i] = start[i] + qlen[i];
        max_q = qlen[i] > max_q ? qlen[i] : max_q;
        memcpy(bt + (size_t)i * w->mbps, w->tables + (size_t)seq[i] * w->mbps,
               (size_t)w->mbps * sizeof *bt);
    }
    const int rows = qs[n];
    float *qh = malloc((size_t)rows * rowf * sizeof(float));
    for (int i = 0; i < n; i++)
        memcpy(qh + (size_t)qs[i] * rowf,
               w->q + (size_t)(w->qoff[seq[i]] + start[i] - w->qpos0[seq[i]]) * rowf,
               (size_t)qlen[i] * rowf * sizeof(float));
    llmrt_attn_params p;
    memset(&p, 0, sizeof p);
    p.n_tokens = rows;
    p.n_seqs = n;
    p.n_heads = w->n_heads;
    p.n_kv_heads = w->n_kv;
    p.head_dim = w->hd;
    p.scale = 1.0f / sqrtf((float)w->hd);
    p.query_start = ct_dup(be, qs, (size_t)(n + 1) * sizeof(int32_t));
    p.seq_lens = ct_dup(be, lens, (size_t)n * sizeof(int32_t));
    p.block_tables = ct_dup(be, bt, (size_t)n * w->mbps * sizeof(int32_t));
    p.max_blocks_per_seq = w->mbps;
    p.block_size = w->bs;
    p.max_seq_len = max_seq_len;
    p.max_query_len = max_q;
    p.kv_dtype = w->dt;
    p.k_cache = w->kc;
    p.v_cache = w->vc;
    float *dq = ct_dup(be, qh, (size_t)rows * rowf * sizeof(float));
    float *out = ct_alloc(be, (size_t)rows * rowf * sizeof(float));
    ct_poison(be, out, (size_t)rows * rowf);
    CT_OK(be->vt->attention(be->b, out, dq, &p, &err));
    float *res = malloc((size_t)rows * rowf * sizeof(float));
    ct_download(be, res, out, (size_t)rows * rowf * sizeof(float));
    ct_free(be, (void *)p.query_start), ct_free(be, (void *)p.seq_lens);
    ct_free(be, (void *)p.block_tables), ct_free(be, dq), ct_free(be, out);
    free(qh), free(bt);
    return res;
}

static void aw_assert_same(const float *a, const float *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&a[i], &b[i], sizeof(float)) == 0,
                      "%s: element %zu is %.9g, %.9g alone", what, i, a[i], b[i]);
}

/* A decode row's output does not depend on its batch: 48 sequences decoded together (the
 * batch kernel walks the batch-1 kernel's splits), in batches of 5, and beside a prefill
 * chunk (a mixed step) equal each sequence decoded alone (the batch-1 kernel), bit for bit;
 * under a graph-style max_seq_len too. */
START_TEST(test_attention_batch_invariant)
{
    static const struct {
        int n_heads, n_kv, hd;
        llmrt_dtype dt;
    } geo[] = {{32, 8, 128, LLMRT_DTYPE_F16}, {8, 8, 64, LLMRT_DTYPE_BF16}, {12, 4, 96, LLMRT_DTYPE_F32}};
    for (size_t gi = 0; gi < sizeof geo / sizeof *geo; gi++) {
        enum { N = 48 };
        int ctx[N];
        ct_rng r = {700 + gi};
        for (int s = 0; s < N; s++)
            ctx[s] = ct_int(&r, 1, 3000);
        ctx[0] = 1, ctx[1] = 32, ctx[2] = 33; /* one split, the first two */
        att_world w = aw_make(N, ctx, geo[gi].n_heads, geo[gi].n_kv, geo[gi].hd, 16, geo[gi].dt,
                              4096, 41, 800 + gi);
        const size_t rowf = (size_t)w.n_heads * w.hd;
        int seq[N], start[N], qlen[N];
        for (int s = 0; s < N; s++)
            seq[s] = s, start[s] = ctx[s] - 1, qlen[s] = 1;
        for (int bound = 0; bound < 2; bound++) {
            int max_len = 0;
            for (int s = 0; s < N; s++)
                max_len = ctx[s] > max_len ? ctx[s] : max_len;
            const int msl = bound ? 4096 : max_len;
            float *all = aw_run(&w, &CT.cuda, N, seq, start, qlen, msl);
            for (int s = 0; s < N; s++) {
                float *alone = aw_run(&w, &CT.cuda, 1, &seq[s], &start[s], &qlen[s], msl);
                char what[128];
                snprintf(what, sizeof what, "decode hd %d %s seq %d (ctx %d) of %d, max_seq_len %d",
                         w.hd, llmrt_dtype_name(w.dt), s, ctx[s], N, msl);
                aw_assert_same(all + (size_t)s * rowf, alone, rowf, what);
                free(alone);
            }
            /* batches of 5 */
            for (int s0 = 0; s0 + 5 <= N; s0 += 5) {
                float *five = aw_run(&w, &CT.cuda, 5, &seq[s0], &start[s0], &qlen[s0], msl);
                aw_assert_same(five, all + (size_t)s0 * rowf, 5 * rowf, "decode batch of 5");
                free(five);
            }
            free(all);
        }
        /* mixed: decode rows 3..9 and a 40-token chunk of sequence 10 ending at its context */
        {
            int mseq[8], mstart[8], mq[8];
            for (int i = 0; i < 7; i++)
                mseq[i] = 3 + i, mstart[i] = ctx[3 + i] - 1, mq[i] = 1;
            const int c = ctx[10] < 41 ? ctx[10] - 1 : 40;
            mseq[7] = 10, mstart[7] = ctx[10] - c, mq[7] = c;
            if (c >= 2) {
                float *mix = aw_run(&w, &CT.cuda, 8, mseq, mstart, mq, 4096);
                for (int i = 0; i < 7; i++) {
                    float *alone = aw_run(&w, &CT.cuda, 1, &mseq[i], &mstart[i], &mq[i], 4096);
                    aw_assert_same(mix + (size_t)i * rowf, alone, rowf, "decode row of a mixed step");
                    free(alone);
                }
                free(mix);
            }
        }
        aw_free(&w);
    }
}
END_TEST

/* A prompt's prefill rows do not depend on how it is chunked or batched: the whole prompt in
 * one call, the same rows in chunks after their cached prefix (2..130 tokens), and chunks of
 * three sequences in one call agree bit for bit (tensor-core kernel: key tiles from position
 * 0 for every row; the fp32 kernel under att_pf_mma=0 likewise; with key splits, whole
 * prompts fold in one block and chunks in split blocks). */
START_TEST(test_attention_chunk_invariant)
{
    static const struct {
        int n_heads, n_kv, hd;
        llmrt_dtype dt;
        const char *tune;
    } geo[] = {{32, 8, 128, LLMRT_DTYPE_F16, NULL},
               {16, 2, 64, LLMRT_DTYPE_BF16, NULL},
               {12, 4, 96, LLMRT_DTYPE_F16, NULL},
               {8, 2, 128, LLMRT_DTYPE_F16, "att_pf_mma=0"},
               {32, 8, 128, LLMRT_DTYPE_F16, "att_pf_split=512"},
               {16, 2, 64, LLMRT_DTYPE_BF16, "att_pf_split=128"}};
    for (size_t gi = 0; gi < sizeof geo / sizeof *geo; gi++) {
        llmrt_backend_ref be = CT.cuda;
        if (geo[gi].tune)
            be.b = create_tuned(geo[gi].tune);
        const int ctx[3] = {300, 129, 1000};
        att_world w = aw_make(3, ctx, geo[gi].n_heads, geo[gi].n_kv, geo[gi].hd, 16, geo[gi].dt,
                              1024, 0, 900 + gi);
        const size_t rowf = (size_t)w.n_heads * w.hd;
        float *whole[3];
        for (int s = 0; s < 3; s++) {
            const int st = 0;
            whole[s] = aw_run(&w, &be, 1, &s, &st, &ctx[s], ctx[s]);
        }
        ct_rng r = {1000 + gi};
        for (int s = 0; s < 3; s++) {
            for (int pos = 0; pos < ctx[s];) {
                int c = ct_int(&r, 2, 130);
                if (pos + c > ctx[s])
                    c = ctx[s] - pos;
                if (c < 2) { /* a one-token chunk goes to the decode kernel: not compared */
                    pos += c;
                    continue;
                }
                float *part = aw_run(&w, &be, 1, &s, &pos, &c, 1024);
                char what[128];
                snprintf(what, sizeof what, "prefill hd %d %s seq %d rows %d..%d%s%s", w.hd,
                         llmrt_dtype_name(w.dt), s, pos, pos + c - 1, geo[gi].tune ? ", " : "",
                         geo[gi].tune ? geo[gi].tune : "");
                aw_assert_same(part, whole[s] + (size_t)pos * rowf, (size_t)c * rowf, what);
                free(part);
                pos += c;
            }
        }
        /* three chunks of three sequences in one call */
        const int seq[3] = {0, 1, 2}, start[3] = {100, 0, 870}, qlen[3] = {64, 129, 130};
        float *batch = aw_run(&w, &be, 3, seq, start, qlen, 1024);
        size_t row = 0;
        for (int i = 0; i < 3; i++) {
            aw_assert_same(batch + row * rowf, whole[seq[i]] + (size_t)start[i] * rowf,
                           (size_t)qlen[i] * rowf, "prefill chunks of three sequences in one call");
            row += (size_t)qlen[i];
        }
        free(batch);
        for (int s = 0; s < 3; s++)
            free(whole[s]);
        aw_free(&w);
        if (geo[gi].tune)
            CT.cuda_vt->destroy(be.b);
    }
}
END_TEST

/* The tensor-core prefill's key splits give the same bits whichever schedule walks them:
 * split blocks and a merge (few query rows over a long context: att_pf_fill=1000 forces it
 * for every call) and one block per tile folding in registers (att_pf_fill=-1), for whole
 * prompts, chunks after a cached prefix and a mixed call, at the default split and at 128
 * keys (and 192); a row before a split's first key folds an empty split in as a no-op. */
START_TEST(test_attention_split_schedules)
{
    static const struct {
        int n_heads, n_kv, hd;
        llmrt_dtype dt;
        const char *split;
    } geo[] = {{32, 8, 128, LLMRT_DTYPE_F16, "att_pf_split=512,"},
               {16, 2, 64, LLMRT_DTYPE_BF16, "att_pf_split=128,"},
               {12, 4, 96, LLMRT_DTYPE_F16, "att_pf_split=192,"}};
    for (size_t gi = 0; gi < sizeof geo / sizeof *geo; gi++) {
        char tune[2][64];
        snprintf(tune[0], sizeof tune[0], "%satt_pf_fill=1000", geo[gi].split);
        snprintf(tune[1], sizeof tune[1], "%satt_pf_fill=-1", geo[gi].split);
        llmrt_backend_ref be[2] = {CT.cuda, CT.cuda};
        for (int v = 0; v < 2; v++)
            be[v].b = create_tuned(tune[v]);
        const int ctx[3] = {1300, 600, 90};
        att_world w = aw_make(3, ctx, geo[gi].n_heads, geo[gi].n_kv, geo[gi].hd, 16, geo[gi].dt,
                              2048, 0, 1100 + gi);
        const size_t rowf = (size_t)w.n_heads * w.hd;
        /* whole prompts; 64- and 7-token chunks at the end of a long context; the three
         * sequences' tails in one call beside a decode row */
        const struct {
            int n, seq[3], start[3], qlen[3];
        } calls[] = {{1, {0}, {0}, {1300}},
                     {1, {1}, {0}, {600}},
                     {1, {0}, {1236}, {64}},
                     {1, {0}, {1293}, {7}},
                     {1, {1}, {512}, {88}},
                     {3, {0, 1, 2}, {1000, 599, 50}, {300, 1, 40}}};
        for (size_t ci = 0; ci < sizeof calls / sizeof *calls; ci++) {
            int msl = 0; /* the tightest bound: the partials of whole prompts fit */
            for (int i = 0; i < calls[ci].n; i++)
                if (calls[ci].start[i] + calls[ci].qlen[i] > msl)
                    msl = calls[ci].start[i] + calls[ci].qlen[i];
            float *res[2];
            for (int v = 0; v < 2; v++)
                res[v] = aw_run(&w, &be[v], calls[ci].n, calls[ci].seq, calls[ci].start,
                                calls[ci].qlen, msl);
            int rows = 0;
            for (int i = 0; i < calls[ci].n; i++)
                rows += calls[ci].qlen[i];
            char what[160];
            snprintf(what, sizeof what, "prefill hd %d %s call %zu: %s vs %s", w.hd,
                     llmrt_dtype_name(w.dt), ci, tune[0], tune[1]);
            aw_assert_same(res[0], res[1], (size_t)rows * rowf, what);
            free(res[0]), free(res[1]);
        }
        aw_free(&w);
        for (int v = 0; v < 2; v++)
            CT.cuda_vt->destroy(be[v].b);
    }
}
END_TEST

/* ---- silu_mul, add ---- */

START_TEST(test_silu_mul_add)
{
    static const int64_t sizes[] = {1, 1023, 4096 * 3 + 1, 12288 * 8};
    llmrt_error err = {0};
    ct_rng r = {15};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int off = 0; off < 2; off++) /* off = 1: misaligned pointers, the scalar path */
            for (int op = 0; op < 2; op++) {
                const int64_t n = sizes[si];
                float *a = ct_rand_f32(&r, n, -8, 8), *c = ct_rand_f32(&r, n, -8, 8);
                float *res[2];
                const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
                for (int b = 0; b < 2; b++) {
                    float *da = ct_alloc(bes[b], (n + 1) * sizeof(float));
                    float *dc = ct_alloc(bes[b], (n + 1) * sizeof(float));
                    float *dout = ct_alloc(bes[b], (n + 1) * sizeof(float));
                    ct_upload(bes[b], da + off, a, n * sizeof(float));
                    ct_upload(bes[b], dc + off, c, n * sizeof(float));
                    ct_poison(bes[b], dout, n + 1);
                    if (op == 0)
                        CT_OK(bes[b]->vt->silu_mul(bes[b]->b, dout + off, da + off, dc + off, n, &err));
                    else
                        CT_OK(bes[b]->vt->add(bes[b]->b, dout + off, da + off, dc + off, n, &err));
                    res[b] = malloc(n * sizeof(float));
                    ct_download(bes[b], res[b], dout + off, n * sizeof(float));
                    ct_free(bes[b], da), ct_free(bes[b], dc), ct_free(bes[b], dout);
                }
                char what[64];
                snprintf(what, sizeof what, "%s n=%lld offset %d", op ? "add" : "silu_mul",
                         (long long)n, off);
                ct_assert_close(res[0], res[1], n, TOL_FP32, what);
                free(res[0]), free(res[1]), free(a), free(c);
            }
    /* in place: out aliases a */
    const int64_t n = 5000;
    float *a = ct_rand_f32(&r, n, -8, 8), *c = ct_rand_f32(&r, n, -8, 8), *got = malloc(n * 4);
    float *da = ct_dup(&CT.cuda, a, n * 4), *dc = ct_dup(&CT.cuda, c, n * 4);
    CT_OK(CT.cuda_vt->add(CT.cuda.b, da, da, dc, n, &err));
    ct_download(&CT.cuda, got, da, n * 4);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == a[i] + c[i], "add in place at %lld", (long long)i);
    ct_free(&CT.cuda, da), ct_free(&CT.cuda, dc);
    free(a), free(c), free(got);
}
END_TEST

/* ---- fused ops: each against backend-cpu's fused op, which must equal the composition of
 * the separate CPU ops bit for bit ---- */

static const llmrt_backend_vtable *cpu_vt(void) { return CT.cpu.vt; }

START_TEST(test_add_rmsnorm)
{
    static const int shapes[][2] = {{1, 4096}, {3, 1000}, {2, 8192}, {5, 33}, {1, 16384}, {4, 64}};
    llmrt_error err = {0};
    ct_rng r = {17};
    ck_assert_ptr_nonnull(ct_fused(&CT.cuda)->add_rmsnorm);
    ck_assert_ptr_nonnull(ct_fused(&CT.cpu)->add_rmsnorm);
    for (int di = 0; di < 3; di++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
            for (int with_res = 0; with_res < 2; with_res++) {
                const int rows = shapes[si][0], d = shapes[si][1];
                const size_t cnt = (size_t)rows * d;
                float *x = ct_rand_f32(&r, cnt, -3, 3), *res = ct_rand_f32(&r, cnt, -3, 3);
                float *w = ct_rand_f32(&r, d, 0.5f, 1.5f);
                float *got_out[2], *got_x[2];
                const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
                for (int b = 0; b < 2; b++) {
                    llmrt_tensor t = make_tensor(bes[b], w, float_types[di], d, 0);
                    float *dx = ct_dup(bes[b], x, cnt * 4), *dr = ct_dup(bes[b], res, cnt * 4);
                    float *dout = ct_alloc(bes[b], cnt * 4);
                    ct_poison(bes[b], dout, cnt);
                    CT_OK(ct_fused(bes[b])->add_rmsnorm(bes[b]->b, dout, dx, with_res ? dr : NULL, &t,
                                                  rows, d, 1e-6f, &err));
                    got_out[b] = malloc(cnt * 4), got_x[b] = malloc(cnt * 4);
                    ct_download(bes[b], got_out[b], dout, cnt * 4);
                    ct_download(bes[b], got_x[b], dx, cnt * 4);
                    ct_free(bes[b], dx), ct_free(bes[b], dr), ct_free(bes[b], dout);
                    ct_free(bes[b], t.data);
                }
                /* CPU composition: add, then rmsnorm */
                llmrt_tensor t = make_tensor(&CT.cpu, w, float_types[di], d, 0);
                float *cx = ct_dup(&CT.cpu, x, cnt * 4), *cr = ct_dup(&CT.cpu, res, cnt * 4);
                float *cout = ct_alloc(&CT.cpu, cnt * 4);
                if (with_res)
                    CT_OK(cpu_vt()->add(CT.cpu.b, cx, cx, cr, (int64_t)cnt, &err));
                CT_OK(cpu_vt()->rmsnorm(CT.cpu.b, cout, cx, &t, rows, d, 1e-6f, &err));
                char what[96];
                snprintf(what, sizeof what, "add_rmsnorm %s [%d, %d]%s", llmrt_dtype_name(float_types[di]),
                         rows, d, with_res ? "" : " (no residual)");
                ck_assert_msg(memcmp(got_out[1], cout, cnt * 4) == 0 && memcmp(got_x[1], cx, cnt * 4) == 0,
                              "%s: CPU fused op differs from add + rmsnorm", what);
                ct_assert_close(got_out[0], got_out[1], cnt, TOL_FP32, what);
                ct_assert_close(got_x[0], got_x[1], cnt, 0.0, what); /* x + r is exact */
                ct_free(&CT.cpu, cx), ct_free(&CT.cpu, cr), ct_free(&CT.cpu, cout), ct_free(&CT.cpu, t.data);
                for (int b = 0; b < 2; b++)
                    free(got_out[b]), free(got_x[b]);
                free(x), free(res), free(w);
            }
}
END_TEST

/* Cache contents as f32 (for comparisons with a tolerance). */
static float *cache_f32(const void *raw, llmrt_dtype dt, size_t n)
{
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        f[i] = llmrt_load_f(raw, dt, (int64_t)i);
    return f;
}

START_TEST(test_qk_norm_rope_store)
{
    static const int shapes[][4] = {{1, 32, 8, 128}, {7, 4, 2, 32}, {33, 16, 4, 64},
                                    {3, 12, 4, 96}, {2, 8, 1, 256}};
    llmrt_error err = {0};
    ct_rng r = {18};
    ck_assert_ptr_nonnull(ct_fused(&CT.cuda)->qk_norm_rope_store);
    ck_assert_ptr_nonnull(ct_fused(&CT.cpu)->qk_norm_rope_store);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int di = 0; di < 3; di++)
            for (int normed = 0; normed < 2; normed++) {
                const int n = shapes[si][0], H = shapes[si][1], KV = shapes[si][2], hd = shapes[si][3];
                const llmrt_dtype cdt = float_types[di], wdt = float_types[(di + 1) % 3];
                const int heads = H + 2 * KV, kv_row = KV * hd;
                const size_t qkv_n = (size_t)n * heads * hd, q_n = (size_t)n * H * hd;
                const int slots_total = 2 * n + 5;
                const size_t cache_n = (size_t)slots_total * kv_row;
                const size_t cache_bytes = cache_n * llmrt_dtype_size(cdt);
                float *qkv = ct_rand_f32(&r, qkv_n, -3, 3);
                float *qw = ct_rand_f32(&r, hd, 0.5f, 1.5f), *kw = ct_rand_f32(&r, hd, 0.5f, 1.5f);
                float *init_f = ct_rand_f32(&r, cache_n, -1, 1);
                void *init = ct_to_dtype(init_f, cache_n, cdt, NULL);
                int32_t *pos = malloc(n * sizeof *pos), *slots = malloc(n * sizeof *slots);
                for (int i = 0; i < n; i++) {
                    pos[i] = i == 0 ? 0 : ct_int(&r, 0, 4095);
                    slots[i] = (i % 5 == 4) ? -1 : 2 * i + 1; /* distinct; some skipped */
                }
                float *q_res[3];
                unsigned char *k_res[3], *v_res[3];
                /* 0: CUDA fused, 1: CPU fused, 2: CPU composition */
                for (int v = 0; v < 3; v++) {
                    const llmrt_backend_ref *be = v == 0 ? &CT.cuda : &CT.cpu;
                    llmrt_tensor tq = make_tensor(be, qw, wdt, hd, 0), tk = make_tensor(be, kw, wdt, hd, 0);
                    void *kc = ct_dup(be, init, cache_bytes), *vc = ct_dup(be, init, cache_bytes);
                    int32_t *dp = ct_dup(be, pos, n * sizeof *pos), *ds = ct_dup(be, slots, n * sizeof *slots);
                    float *dq = ct_alloc(be, q_n * 4);
                    ct_poison(be, dq, q_n);
                    if (v < 2) {
                        float *dqkv = ct_dup(be, qkv, qkv_n * 4);
                        CT_OK(ct_fused(be)->qk_norm_rope_store(be->b, dq, dqkv, normed ? &tq : NULL,
                                                         normed ? &tk : NULL, dp, ds, n, H, KV, hd,
                                                         1e-6f, 1000000.0f, kc, vc, cdt, &err));
                        ct_free(be, dqkv);
                    } else { /* split on the host, then the separate ops */
                        float *hq = malloc(q_n * 4), *hk = malloc((size_t)n * kv_row * 4),
                              *hv = malloc((size_t)n * kv_row * 4);
                        for (int t = 0; t < n; t++) {
                            memcpy(hq + (size_t)t * H * hd, qkv + (size_t)t * heads * hd, (size_t)H * hd * 4);
                            memcpy(hk + (size_t)t * kv_row, qkv + ((size_t)t * heads + H) * hd, (size_t)kv_row * 4);
                            memcpy(hv + (size_t)t * kv_row, qkv + ((size_t)t * heads + H + KV) * hd, (size_t)kv_row * 4);
                        }
                        ct_upload(be, dq, hq, q_n * 4);
                        float *dk = ct_dup(be, hk, (size_t)n * kv_row * 4), *dv = ct_dup(be, hv, (size_t)n * kv_row * 4);
                        if (normed) {
                            CT_OK(be->vt->rmsnorm(be->b, dq, dq, &tq, n * H, hd, 1e-6f, &err));
                            CT_OK(be->vt->rmsnorm(be->b, dk, dk, &tk, n * KV, hd, 1e-6f, &err));
                        }
                        CT_OK(be->vt->rope(be->b, dq, dp, n, H, hd, 1000000.0f, &err));
                        CT_OK(be->vt->rope(be->b, dk, dp, n, KV, hd, 1000000.0f, &err));
                        CT_OK(be->vt->kv_store(be->b, kc, vc, cdt, dk, dv, ds, n, KV, hd, &err));
                        ct_free(be, dk), ct_free(be, dv);
                        free(hq), free(hk), free(hv);
                    }
                    q_res[v] = malloc(q_n * 4);
                    k_res[v] = malloc(cache_bytes), v_res[v] = malloc(cache_bytes);
                    ct_download(be, q_res[v], dq, q_n * 4);
                    ct_download(be, k_res[v], kc, cache_bytes);
                    ct_download(be, v_res[v], vc, cache_bytes);
                    ct_free(be, kc), ct_free(be, vc), ct_free(be, dp), ct_free(be, ds), ct_free(be, dq);
                    ct_free(be, tq.data), ct_free(be, tk.data);
                }
                char what[128];
                snprintf(what, sizeof what, "qk_norm_rope_store n=%d H=%d KV=%d hd=%d cache %s%s", n, H,
                         KV, hd, llmrt_dtype_name(cdt), normed ? "" : " (no norm)");
                ck_assert_msg(memcmp(q_res[1], q_res[2], q_n * 4) == 0 &&
                                  memcmp(k_res[1], k_res[2], cache_bytes) == 0 &&
                                  memcmp(v_res[1], v_res[2], cache_bytes) == 0,
                              "%s: CPU fused op differs from rmsnorm + rope + kv_store", what);
                ct_assert_close(q_res[0], q_res[1], q_n, TOL_ROPE, what);
                ck_assert_msg(memcmp(v_res[0], v_res[1], cache_bytes) == 0, "%s: V caches differ", what);
                float *kg = cache_f32(k_res[0], cdt, cache_n), *kr = cache_f32(k_res[1], cdt, cache_n);
                ct_assert_close(kg, kr, cache_n, TOL_ROPE, what);
                ck_assert_msg(memcmp(k_res[0] + (size_t)slots[0] * kv_row * llmrt_dtype_size(cdt),
                                     (unsigned char *)init + (size_t)slots[0] * kv_row * llmrt_dtype_size(cdt),
                                     (size_t)kv_row * llmrt_dtype_size(cdt)) != 0, "%s: K not written", what);
                free(kg), free(kr);
                for (int v = 0; v < 3; v++)
                    free(q_res[v]), free(k_res[v]), free(v_res[v]);
                free(qkv), free(qw), free(kw), free(init_f), free(init), free(pos), free(slots);
            }
}
END_TEST

START_TEST(test_swiglu)
{
    static const int shapes[][2] = {{1, 12288}, {5, 1000}, {3, 33}, {17, 256}};
    llmrt_error err = {0};
    ct_rng r = {19};
    ck_assert_ptr_nonnull(ct_fused(&CT.cuda)->swiglu);
    ck_assert_ptr_nonnull(ct_fused(&CT.cpu)->swiglu);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int off = 0; off < 2; off++) {
            const int n = shapes[si][0], d = shapes[si][1];
            const size_t gn = (size_t)n * 2 * d, on = (size_t)n * d;
            float *gu = ct_rand_f32(&r, gn, -8, 8);
            float *res[2];
            const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
            for (int b = 0; b < 2; b++) {
                float *dgu = ct_alloc(bes[b], (gn + 1) * 4), *dout = ct_alloc(bes[b], (on + 1) * 4);
                ct_upload(bes[b], dgu + off, gu, gn * 4);
                ct_poison(bes[b], dout, on + 1);
                CT_OK(ct_fused(bes[b])->swiglu(bes[b]->b, dout + off, dgu + off, n, d, &err));
                res[b] = malloc(on * 4);
                ct_download(bes[b], res[b], dout + off, on * 4);
                ct_free(bes[b], dgu), ct_free(bes[b], dout);
            }
            /* CPU composition: silu_mul row by row */
            float *ref = malloc(on * 4);
            float *dg = ct_alloc(&CT.cpu, (size_t)d * 4), *du = ct_alloc(&CT.cpu, (size_t)d * 4);
            float *dout = ct_alloc(&CT.cpu, (size_t)d * 4);
            for (int t = 0; t < n; t++) {
                ct_upload(&CT.cpu, dg, gu + (size_t)t * 2 * d, (size_t)d * 4);
                ct_upload(&CT.cpu, du, gu + (size_t)t * 2 * d + d, (size_t)d * 4);
                CT_OK(cpu_vt()->silu_mul(CT.cpu.b, dout, dg, du, d, &err));
                ct_download(&CT.cpu, ref + (size_t)t * d, dout, (size_t)d * 4);
            }
            char what[64];
            snprintf(what, sizeof what, "swiglu [%d, %d] offset %d", n, d, off);
            ck_assert_msg(memcmp(res[1], ref, on * 4) == 0, "%s: CPU fused op differs from silu_mul", what);
            ct_assert_close(res[0], res[1], on, TOL_FP32, what);
            ct_free(&CT.cpu, dg), ct_free(&CT.cpu, du), ct_free(&CT.cpu, dout);
            free(ref), free(res[0]), free(res[1]), free(gu);
        }
}
END_TEST

/* ---- gemm ---- */

START_TEST(test_gemm)
{
    static const int shapes[][2] = {{257, 4096}, {100, 1000}, {4099, 512}, {64, 8}, {33, 4100}};
    static const int ns[] = {1, 2, 3, 5, 8, 9, 17, 40};
    llmrt_error err = {0};
    ct_rng r = {16};
    for (int di = 0; di < 3; di++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            const llmrt_dtype dt = float_types[di];
            const int out = shapes[si][0], in = shapes[si][1];
            float *w = ct_rand_f32(&r, (size_t)out * in, -1, 1);
            llmrt_tensor tw[2] = {make_tensor(&CT.cuda, w, dt, out, in),
                                  make_tensor(&CT.cpu, w, dt, out, in)};
            for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
                for (int off = 0; off < (ns[ni] <= 8 ? 2 : 1); off++) {
                    const int n = ns[ni];
                    float *x = ct_rand_f32(&r, (size_t)n * in, -1, 1);
                    float *res[2];
                    const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
                    for (int b = 0; b < 2; b++) {
                        float *dx = ct_alloc(bes[b], ((size_t)n * in + 1) * sizeof(float));
                        ct_upload(bes[b], dx + off, x, (size_t)n * in * sizeof(float));
                        float *dy = ct_alloc(bes[b], (size_t)n * out * sizeof(float));
                        ct_poison(bes[b], dy, (size_t)n * out);
                        CT_OK(bes[b]->vt->gemm(bes[b]->b, dy, dx + off, &tw[b], n, &err));
                        res[b] = malloc((size_t)n * out * sizeof(float));
                        ct_download(bes[b], res[b], dy, (size_t)n * out * sizeof(float));
                        ct_free(bes[b], dx), ct_free(bes[b], dy);
                    }
                    double tol = TOL_FP32;
                    if (n > 8 && dt == LLMRT_DTYPE_F16)
                        tol = TOL_GEMM_F16;
                    if (n > 8 && dt == LLMRT_DTYPE_BF16)
                        tol = TOL_GEMM_BF16;
                    char what[96];
                    snprintf(what, sizeof what, "gemm %s [%d, %d] n=%d%s", llmrt_dtype_name(dt), out,
                             in, n, off ? " misaligned x" : "");
                    ct_assert_close(res[0], res[1], (size_t)n * out, tol, what);
                    free(res[0]), free(res[1]), free(x);
                }
            ct_free(&CT.cuda, tw[0].data), ct_free(&CT.cpu, tw[1].data);
            free(w);
        }
}
END_TEST

/* ---- argmax ---- */

START_TEST(test_argmax)
{
    static const int shapes[][2] = {{1, 151936}, {3, 1000}, {8, 7}, {5, 5000}, {2, 151936}};
    llmrt_error err = {0};
    ct_rng r = {17};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int rows = shapes[si][0], vocab = shapes[si][1];
        float *lg = ct_rand_f32(&r, (size_t)rows * vocab, -10, 10);
        if (vocab > 600) { /* row 0: a tie between 500 and 100 (lowest index wins) */
            lg[500] = 50.0f;
            lg[100] = 50.0f;
        }
        if (rows > 1) /* row 1: all -inf but one NaN: NaN never wins */
            for (int i = 0; i < vocab; i++)
                lg[vocab + i] = i == vocab / 2 ? NAN : -INFINITY;
        int32_t got[2][8];
        const llmrt_backend_ref *bes[2] = {&CT.cuda, &CT.cpu};
        for (int b = 0; b < 2; b++) {
            float *dl = ct_dup(bes[b], lg, (size_t)rows * vocab * sizeof(float));
            int32_t *dout = ct_alloc(bes[b], rows * sizeof(int32_t));
            for (int rep = 0; rep < 3; rep++) { /* the completion counters must reset */
                int32_t junk[8] = {-7, -7, -7, -7, -7, -7, -7, -7};
                ct_upload(bes[b], dout, junk, rows * sizeof(int32_t));
                CT_OK(bes[b]->vt->argmax(bes[b]->b, dout, dl, rows, vocab, &err));
                ct_download(bes[b], got[b], dout, rows * sizeof(int32_t));
                if (b == 1)
                    break;
            }
            ct_free(bes[b], dl), ct_free(bes[b], dout);
        }
        for (int i = 0; i < rows; i++)
            ck_assert_msg(got[0][i] == got[1][i], "argmax rows=%d vocab=%d row %d: cuda %d, cpu %d",
                          rows, vocab, i, got[0][i], got[1][i]);
        if (vocab > 600)
            ck_assert_int_eq(got[0][0], 100);
        free(lg);
    }
}
END_TEST

/* ---- argmax_head ---- */

/* The argmax_head extension's forward gives, for each row, the id of gemm + argmax of that
 * row alone on the same backend, bit for bit (every candidate's logit is computed as the GEMV
 * computes it): random weights of every float dtype, x with an outlier, n = 1..8 (the int8
 * screen) and 9..256 (the gemm screen: a batch's ids equal each row's alone), exact ties
 * (lowest index wins), a near tie one f16 ulp apart, and a flat matrix where every row is a
 * candidate; three calls each (the maxima must reset). Refusals: rows per call, a width that
 * is not a multiple of 32, too many rows. */
static void check_head_case(llmrt_dtype dt, int vocab, int d, int n, int pattern, uint64_t seed)
{
    llmrt_error err = {0};
    const llmrt_backend_ref *cu = &CT.cuda;
    ct_rng r = {seed};
    float *w = ct_rand_f32(&r, (size_t)vocab * d, -1, 1);
    float *x = ct_rand_f32(&r, (size_t)n * d, -1, 1);
    x[d / 3] *= 40.0f; /* an outlier activation */
    if (pattern == 1) { /* rows 10 and vocab-3 equal, both the best for x row 0 */
        for (int k = 0; k < d; k++)
            w[(size_t)10 * d + k] = w[(size_t)(vocab - 3) * d + k] = x[k] > 0 ? 1.0f : -1.0f;
    } else if (pattern == 2) { /* row 7 = row 5 one step larger in one element */
        for (int k = 0; k < d; k++)
            w[(size_t)5 * d + k] = w[(size_t)7 * d + k] = x[k] > 0 ? 0.5f : -0.5f;
        w[(size_t)7 * d + d / 3] += x[d / 3] > 0 ? 0.00048828125f : -0.00048828125f; /* 2^-11 */
    } else if (pattern == 3) { /* every row the same */
        for (size_t i = (size_t)d; i < (size_t)vocab * d; i++)
            w[i] = w[i % (size_t)d];
    }
    llmrt_tensor t = make_tensor(cu, w, dt, vocab, d);
    float *dx = ct_dup(cu, x, (size_t)n * d * sizeof(float));
    float *logits = ct_alloc(cu, (size_t)vocab * sizeof(float));
    int32_t *dout = ct_alloc(cu, (size_t)n * sizeof(int32_t));
    int32_t *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    for (int i = 0; i < n; i++) { /* each row alone: the GEMV */
        CT_OK(cu->vt->gemm(cu->b, logits, dx + (size_t)i * d, &t, 1, &err));
        CT_OK(cu->vt->argmax(cu->b, dout + i, logits, 1, vocab, &err));
    }
    ct_download(cu, want, dout, (size_t)n * sizeof(int32_t));
    llmrt_argmax_head *h = NULL;
    CT_OK(ct_argmax_head(cu)->create(cu->b, &t, n > 8 ? n : 8, &h, &err));
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < n; i++)
            got[i] = -7;
        ct_upload(cu, dout, got, (size_t)n * sizeof(int32_t));
        CT_OK(ct_argmax_head(cu)->forward(cu->b, h, dout, dx, n, &err));
        ct_download(cu, got, dout, (size_t)n * sizeof(int32_t));
        for (int i = 0; i < n; i++)
            ck_assert_msg(got[i] == want[i],
                          "argmax_head %s [%d, %d] n=%d pattern %d call %d row %d: %d, gemm + "
                          "argmax %d",
                          llmrt_dtype_name(dt), vocab, d, n, pattern, rep, i, got[i], want[i]);
    }
    if (pattern == 1)
        ck_assert_int_eq(got[0], 10);
    if (pattern == 2)
        ck_assert_int_eq(got[0], 7);
    if (pattern == 3)
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(got[i], 0);
    ct_argmax_head(cu)->destroy(cu->b, h);
    ct_free(cu, t.data), ct_free(cu, dx), ct_free(cu, logits), ct_free(cu, dout);
    free(w), free(x), free(want), free(got);
}

START_TEST(test_argmax_head)
{
    ck_assert_ptr_nonnull(ct_argmax_head(&CT.cuda)->create);
    static const int ns[] = {1, 2, 3, 5, 8};
    for (int di = 0; di < 3; di++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            check_head_case(float_types[di], 1000, 256, ns[ni], 0, 100 + (uint64_t)(di * 10 + ni));
    for (int p = 1; p <= 3; p++)
        check_head_case(LLMRT_DTYPE_F16, 2000, 128, 2, p, 200 + (uint64_t)p);
    check_head_case(LLMRT_DTYPE_F16, 32768, 4096, 1, 0, 301); /* Qwen3-8B's width */
    check_head_case(LLMRT_DTYPE_BF16, 151936, 64, 3, 0, 302); /* Qwen3's vocabulary */
    /* past 8 rows: the gemm screen */
    static const int many[] = {9, 33, 256};
    for (int di = 0; di < 3; di++)
        for (size_t ni = 0; ni < sizeof many / sizeof *many; ni++)
            check_head_case(float_types[di], 1000, 256, many[ni], 0, 400 + (uint64_t)(di * 10 + ni));
    for (int p = 1; p <= 3; p++)
        check_head_case(LLMRT_DTYPE_F16, 2000, 128, 20, p, 500 + (uint64_t)p);
    check_head_case(LLMRT_DTYPE_F16, 32768, 4096, 40, 0, 601);
    check_head_case(LLMRT_DTYPE_BF16, 151936, 64, 12, 0, 602);

    llmrt_error err = {0};
    const llmrt_backend_ref *cu = &CT.cuda;
    float vals[48 * 40];
    for (int i = 0; i < 48 * 40; i++)
        vals[i] = (float)(i % 7) - 3.0f;
    llmrt_argmax_head *h = NULL;
    llmrt_tensor t = make_tensor(cu, vals, LLMRT_DTYPE_F16, 48, 40); /* 40 columns */
    ck_assert_int_eq(ct_argmax_head(cu)->create(cu->b, &t, 1, &h, &err), LLMRT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "multiple of 32"), "%s", err.msg);
    ct_free(cu, t.data);
    t = make_tensor(cu, vals, LLMRT_DTYPE_F16, 30, 64);
    ck_assert_int_eq(ct_argmax_head(cu)->create(cu->b, &t, 1025, &h, &err), LLMRT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.msg, "1025 rows"), "%s", err.msg);
    CT_OK(ct_argmax_head(cu)->create(cu->b, &t, 2, &h, &err));
    float *dx = ct_alloc(cu, 3 * 64 * sizeof(float));
    int32_t *dout = ct_alloc(cu, 3 * sizeof(int32_t));
    ck_assert_int_eq(ct_argmax_head(cu)->forward(cu->b, h, dout, dx, 3, &err), LLMRT_ERR_INVALID_ARG);
    ck_assert_msg(strstr(err.msg, "1..2"), "%s", err.msg);
    ct_argmax_head(cu)->destroy(cu->b, h);
    ct_free(cu, t.data), ct_free(cu, dx), ct_free(cu, dout);
}
END_TEST

/* ---- sample ---- */

START_TEST(test_sample)
{
    llmrt_error err = {0};
    ct_rng r = {18};
    static const llmrt_sample_params kinds[] = {
        {0.0f, 0, 1.0f, 0.0f, 0, 0},      /* greedy */
        {1.0f, 0, 1.0f, 0.0f, 0, 0},      /* plain softmax */
        {0.8f, 50, 0.9f, 0.05f, 0, 0},    /* the usual mix */
        {0.7f, 20, 1.0f, 0.0f, 0, 0},     /* top-k only */
        {1.0f, 0, 0.5f, 0.0f, 0, 0},      /* top-p only */
        {1.3f, 0, 1.0f, 0.2f, 0, 0},      /* min-p only */
        {0.5f, 1, 1.0f, 0.0f, 0, 0},      /* top-k 1 = greedy */
        {1.0f, 0, 1e-4f, 0.0f, 0, 0},     /* tiny top-p = greedy */
        {0.6f, 20, 0.95f, 0.0f, 0, 0},    /* chat defaults */
        {0.8f, 0, 0.9f, 0.05f, 0, 0},     /* top-p and min-p, no top-k */
    };
    const int nk = sizeof kinds / sizeof *kinds;
    static const int vocabs[] = {151936, 1000, 13};
    for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
        const int vocab = vocabs[vi], rows = 2 * nk;
        float *lg = ct_rand_f32(&r, (size_t)rows * vocab, -4, 4);
        for (int i = 0; i < rows * vocab; i++) /* a peaked tail, like real logits */
            lg[i] = lg[i] * lg[i] * lg[i] * 0.5f;
        llmrt_sample_params *sp = malloc(rows * sizeof *sp);
        for (int i = 0; i < rows; i++) {
            sp[i] = kinds[i % nk];
            sp[i].uniform = ct_uniform(&r, 0, 1);
        }
        float *dl = ct_dup(&CT.cuda, lg, (size_t)rows * vocab * sizeof(float));
        llmrt_sample_params *dp = ct_dup(&CT.cuda, sp, rows * sizeof *sp);
        int32_t *dout = ct_alloc(&CT.cuda, rows * sizeof(int32_t));
        int32_t *got = malloc(rows * sizeof *got);
        for (int i = 0; i < rows; i++)
            got[i] = -7;
        ct_upload(&CT.cuda, dout, got, rows * sizeof(int32_t));
        CT_OK(CT.cuda_vt->sample(CT.cuda.b, dout, dl, dp, rows, vocab, &err));
        ct_download(&CT.cuda, got, dout, rows * sizeof(int32_t));
        llmrt_sampler *hs = NULL;
        CT_OK(llmrt_sampler_new(vocab, &hs, &err));
        for (int i = 0; i < rows; i++) {
            const float *x = lg + (size_t)i * vocab;
            int ok = 0, want = ct_ref_sample(x, vocab, sp[i], 0, 0);
            /* accept a neighbour decision only at a rounding boundary */
            static const double d[][2] = {{0, 0}, {1e-5, 0}, {-1e-5, 0}, {0, 1e-5}, {0, -1e-5}};
            for (size_t k = 0; k < 5 && !ok; k++)
                ok = got[i] == ct_ref_sample(x, vocab, sp[i], d[k][0], d[k][1]);
            ck_assert_msg(ok, "sample vocab %d row %d (T %g, top_k %d, top_p %g, min_p %g, u %g): "
                          "cuda %d, reference %d", vocab, i, (double)sp[i].temperature,
                          sp[i].top_k, (double)sp[i].top_p, (double)sp[i].min_p,
                          (double)sp[i].uniform, got[i], want);
            /* and the host sampler picks the same token, boundaries aside */
            llmrt_sampling hp;
            memset(&hp, 0, sizeof hp);
            hp.temperature = sp[i].temperature;
            hp.top_k = sp[i].top_k;
            hp.top_p = sp[i].top_p;
            hp.min_p = sp[i].min_p;
            const int host = llmrt_sampler_pick(hs, x, &hp, sp[i].uniform);
            int same = host == got[i];
            for (size_t k = 1; k < 5 && !same; k++)
                same = host == ct_ref_sample(x, vocab, sp[i], d[k][0], d[k][1]);
            ck_assert_msg(same, "sample vocab %d row %d (T %g, top_k %d, top_p %g, min_p %g, u %g): "
                          "cuda %d, host sampler %d", vocab, i, (double)sp[i].temperature,
                          sp[i].top_k, (double)sp[i].top_p, (double)sp[i].min_p,
                          (double)sp[i].uniform, got[i], host);
        }
        llmrt_sampler_free(hs);
        ct_free(&CT.cuda, dl), ct_free(&CT.cuda, dp), ct_free(&CT.cuda, dout);
        free(lg), free(sp), free(got);
    }
}
END_TEST

/* The inverse CDF exactly: a 6-token vocabulary with known probabilities, u on a grid of
 * 6000 points; each token must be drawn for its share of the grid (±2 points). */
START_TEST(test_sample_distribution)
{
    llmrt_error err = {0};
    const int vocab = 6, rows = 6000;
    const float logits[6] = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f, -30.0f};
    float *lg = malloc((size_t)rows * vocab * sizeof(float));
    llmrt_sample_params *sp = calloc(rows, sizeof *sp);
    for (int i = 0; i < rows; i++) {
        memcpy(lg + (size_t)i * vocab, logits, sizeof logits);
        sp[i].temperature = 1.0f;
        sp[i].top_p = 1.0f;
        sp[i].uniform = (i + 0.5f) / rows;
    }
    float *dl = ct_dup(&CT.cuda, lg, (size_t)rows * vocab * sizeof(float));
    llmrt_sample_params *dp = ct_dup(&CT.cuda, sp, rows * sizeof *sp);
    int32_t *dout = ct_alloc(&CT.cuda, rows * sizeof(int32_t));
    int32_t *got = malloc(rows * sizeof *got);
    CT_OK(CT.cuda_vt->sample(CT.cuda.b, dout, dl, dp, rows, vocab, &err));
    ct_download(&CT.cuda, got, dout, rows * sizeof(int32_t));
    double z = 0, p[6];
    for (int i = 0; i < vocab; i++)
        z += exp(logits[i]);
    int count[6] = {0};
    for (int i = 0; i < rows; i++) {
        ck_assert_msg(got[i] >= 0 && got[i] < vocab, "draw %d out of range: %d", i, got[i]);
        count[got[i]]++;
        if (i > 0) /* ascending u, ascending token ids */
            ck_assert_msg(got[i] >= got[i - 1], "inverse CDF not monotone at %d", i);
    }
    for (int t = 0; t < vocab; t++) {
        p[t] = exp(logits[t]) / z;
        ck_assert_msg(fabs(count[t] - p[t] * rows) <= 2.0, "token %d drawn %d times, expected %.1f",
                      t, count[t], p[t] * rows);
    }
    /* top-k 3 (tokens 3, 1, 4): the draw runs most likely first, as the host sampler's does */
    for (int i = 0; i < rows; i++)
        sp[i].top_k = 3;
    ct_upload(&CT.cuda, dp, sp, rows * sizeof *sp);
    CT_OK(CT.cuda_vt->sample(CT.cuda.b, dout, dl, dp, rows, vocab, &err));
    ct_download(&CT.cuda, got, dout, rows * sizeof(int32_t));
    static const int order[3] = {3, 1, 4};
    const double zk = exp(logits[3]) + exp(logits[1]) + exp(logits[4]);
    for (int i = 0; i < rows; i++) {
        const double u = (i + 0.5) / rows;
        double cdf = 0, gap = 1;
        int want = order[2];
        for (int k = 0; k < 3; k++) {
            cdf += exp(logits[order[k]]) / zk;
            gap = fmin(gap, fabs(cdf - u));
            if (u < cdf) {
                want = order[k];
                break;
            }
        }
        if (gap * rows < 1.0) /* at a boundary: rounding may go either way */
            continue;
        ck_assert_msg(got[i] == want, "top-k draw at u = %g: %d, want %d", u, got[i], want);
    }
    ct_free(&CT.cuda, dl), ct_free(&CT.cuda, dp), ct_free(&CT.cuda, dout);
    free(lg), free(sp), free(got);
}
END_TEST

/* The fast path (cuda_sample.cu: max, histogram, candidates) must draw exactly what the
 * one-block path over the whole row draws (the original algorithm; [backend.cuda] tune
 * sample_full=1 sends every row there), bit for bit, whatever the route a row takes: top-k
 * and top-p candidates, the id-order draw, greedy, and the one-block fallback when too many
 * candidates survive. Logits include exact ties (the draw order among equal logits), NaN and
 * -inf, all-equal rows, and u at both ends. Each call is made twice: the completion counters
 * and candidate counts must reset. */
START_TEST(test_sample_paths_agree)
{
    llmrt_error err = {0};
    llmrt_backend *full = create_tuned("sample_full=1");
    static const llmrt_sample_params kinds[] = {
        {0.8f, 50, 0.9f, 0.05f, 0, 0}, {0.8f, 0, 0.9f, 0.05f, 0, 0}, {0.6f, 20, 0.95f, 0.0f, 0, 0},
        {1.0f, 0, 1.0f, 0.0f, 0, 0},   {1.0f, 0, 0.95f, 0.0f, 0, 0}, {0.7f, 20, 1.0f, 0.0f, 0, 0},
        {1.0f, 0, 0.5f, 0.0f, 0, 0},   {1.3f, 0, 1.0f, 0.2f, 0, 0},  {0.5f, 1, 1.0f, 0.0f, 0, 0},
        {1.0f, 0, 1e-4f, 0.0f, 0, 0},  {2.0f, 3, 0.3f, 0.0f, 0, 0},  {0.9f, 2000, 1.0f, 0.01f, 0, 0},
        {0.05f, 40, 0.9f, 0.0f, 0, 0}, {3.0f, 0, 0.99f, 0.0f, 0, 0}, {0.0f, 0, 1.0f, 0.0f, 0, 0},
        {1.0f, 5000, 0.95f, 0.0f, 0, 0}, /* too many candidates: the one-block fallback */
        {1.0f, 10, 1.0f, 2.0f, 0, 0},  /* min-p above 1: nothing kept, greedy */
    };
    const int nk = sizeof kinds / sizeof *kinds, n_dist = 6, rows = 40;
    static const int vocabs[] = {151936, 32000, 1000, 13};
    ct_rng r = {19};
    int mismatches = 0;
    for (size_t vi = 0; vi < sizeof vocabs / sizeof *vocabs; vi++) {
        const int vocab = vocabs[vi];
        float *lg = malloc((size_t)rows * vocab * sizeof *lg);
        llmrt_sample_params *sp = malloc(rows * sizeof *sp);
        for (int i = 0; i < rows; i++) {
            float *x = lg + (size_t)i * vocab;
            int dist = (i + (int)vi) % n_dist;
            if (dist == 5 && vocab > 2000) /* all equal on the one-block path is slow */
                dist = 0;
            for (int t = 0; t < vocab; t++) {
                const float v = ct_uniform(&r, -4, 4);
                switch (dist) {
                case 0: x[t] = ct_uniform(&r, -10, 10); break;                 /* flat (the bench) */
                case 1: x[t] = v * v * v * 0.5f; break;                        /* peaked tail */
                case 2: x[t] = roundf(ct_uniform(&r, -10, 10) * 4) / 4; break; /* exact ties */
                case 3: {                                                      /* holes */
                    const uint64_t h = ct_next(&r) % 64;
                    x[t] = h == 0 ? -INFINITY : h == 1 ? NAN : v;
                    break;
                }
                case 4: x[t] = v + (ct_next(&r) % 500 == 0 ? 12.0f : 0.0f); break; /* a few stand out */
                default: x[t] = 1.5f; break;                                   /* all equal */
                }
            }
            sp[i] = kinds[(i * 7 + (int)vi) % nk];
            sp[i].uniform = i % 10 == 0 ? 0.0f : i % 10 == 1 ? 0.99999994f : ct_uniform(&r, 0, 1);
        }
        float *dl = ct_dup(&CT.cuda, lg, (size_t)rows * vocab * sizeof(float));
        llmrt_sample_params *dp = ct_dup(&CT.cuda, sp, rows * sizeof *sp);
        int32_t *dout = ct_alloc(&CT.cuda, rows * sizeof(int32_t));
        int32_t *fast[2], *ref = malloc(rows * sizeof *ref);
        for (int rep = 0; rep < 2; rep++) {
            fast[rep] = malloc(rows * sizeof(int32_t));
            for (int i = 0; i < rows; i++)
                fast[rep][i] = -7;
            ct_upload(&CT.cuda, dout, fast[rep], rows * sizeof(int32_t));
            CT_OK(CT.cuda_vt->sample(CT.cuda.b, dout, dl, dp, rows, vocab, &err));
            ct_download(&CT.cuda, fast[rep], dout, rows * sizeof(int32_t));
        }
        for (int i = 0; i < rows; i++)
            ref[i] = -7;
        ct_upload(&CT.cuda, dout, ref, rows * sizeof(int32_t));
        CT_OK(CT.cuda_vt->sample(full, dout, dl, dp, rows, vocab, &err));
        CT_OK(CT.cuda_vt->synchronize(full, &err));
        ct_download(&CT.cuda, ref, dout, rows * sizeof(int32_t));
        for (int i = 0; i < rows; i++) {
            ck_assert_msg(fast[0][i] >= 0 && fast[0][i] < vocab, "vocab %d row %d: token %d out of "
                          "range (unwritten?)", vocab, i, fast[0][i]);
            ck_assert_msg(fast[1][i] == fast[0][i], "vocab %d row %d: a second identical call drew "
                          "%d after %d (state not reset?)", vocab, i, fast[1][i], fast[0][i]);
            if (fast[0][i] != ref[i]) {
                mismatches++;
                fprintf(stderr, "vocab %d row %d (T %g, top_k %d, top_p %g, min_p %g, u %.9g): "
                        "fast path %d, one-block path %d\n", vocab, i, (double)sp[i].temperature,
                        sp[i].top_k, (double)sp[i].top_p, (double)sp[i].min_p,
                        (double)sp[i].uniform, fast[0][i], ref[i]);
            }
        }
        ct_free(&CT.cuda, dl), ct_free(&CT.cuda, dp), ct_free(&CT.cuda, dout);
        free(lg), free(sp), free(fast[0]), free(fast[1]), free(ref);
    }
    CT.cuda_vt->destroy(full);
    ck_assert_msg(mismatches == 0, "%d rows drew differently on the fast and one-block paths",
                  mismatches);
}
END_TEST

/* Sampling inside a captured graph, replayed on new logits and new uniforms, draws what the
 * eager calls draw (fixed scratch, counters reset by the kernels themselves). */
START_TEST(test_sample_graph_replay)
{
    llmrt_error err = {0};
    const int rows = 5, vocab = 151936;
    static const llmrt_sample_params kinds[5] = {
        {0.8f, 50, 0.9f, 0.05f, 0, 0}, /* top-k candidates */
        {0.8f, 0, 0.9f, 0.05f, 0, 0},  /* top-p candidates */
        {1.0f, 0, 1.0f, 0.0f, 0, 0},   /* id-order draw */
        {0.0f, 0, 1.0f, 0.0f, 0, 0},   /* greedy */
        {1.0f, 9000, 0.9f, 0.0f, 0, 0} /* one-block fallback */
    };
    ct_rng r = {20};
    float *dl = ct_alloc(&CT.cuda, (size_t)rows * vocab * sizeof(float));
    llmrt_sample_params *dp = ct_alloc(&CT.cuda, sizeof kinds);
    int32_t *dout = ct_alloc(&CT.cuda, rows * sizeof(int32_t));
    llmrt_sample_params sp[5];
    memcpy(sp, kinds, sizeof sp);
    ct_upload(&CT.cuda, dp, sp, sizeof sp);
    float *lg = ct_rand_f32(&r, (size_t)rows * vocab, -10, 10);
    ct_upload(&CT.cuda, dl, lg, (size_t)rows * vocab * sizeof(float));
    CT_OK(CT.cuda_vt->sample(CT.cuda.b, dout, dl, dp, rows, vocab, &err)); /* scratch */
    ct_sync(&CT.cuda);
    llmrt_graph *g = NULL;
    CT_OK(CT.cuda_vt->graph_begin(CT.cuda.b, &err));
    CT_OK(CT.cuda_vt->sample(CT.cuda.b, dout, dl, dp, rows, vocab, &err));
    CT_OK(CT.cuda_vt->graph_end(CT.cuda.b, &g, &err));
    for (int it = 0; it < 4; it++) {
        free(lg);
        lg = ct_rand_f32(&r, (size_t)rows * vocab, -10, 10);
        for (int i = 0; i < rows; i++)
            sp[i].uniform = ct_uniform(&r, 0, 1);
        ct_upload(&CT.cuda, dl, lg, (size_t)rows * vocab * sizeof(float));
        ct_upload(&CT.cuda, dp, sp, sizeof sp);
        int32_t eager[5], replay[5] = {-7, -7, -7, -7, -7};
        CT_OK(CT.cuda_vt->sample(CT.cuda.b, dout, dl, dp, rows, vocab, &err));
        ct_download(&CT.cuda, eager, dout, sizeof eager);
        ct_upload(&CT.cuda, dout, replay, sizeof replay);
        CT_OK(CT.cuda_vt->graph_launch(CT.cuda.b, g, &err));
        ct_download(&CT.cuda, replay, dout, sizeof replay);
        for (int i = 0; i < rows; i++) {
            ck_assert_msg(replay[i] == eager[i], "replay %d row %d: graph %d, eager %d", it, i,
                          replay[i], eager[i]);
            /* and the rules' token, a neighbour decision only at a rounding boundary */
            static const double d[][2] = {{0, 0}, {1e-5, 0}, {-1e-5, 0}, {0, 1e-5}, {0, -1e-5}};
            int ok = 0;
            for (size_t k = 0; k < 5 && !ok; k++)
                ok = eager[i] == ct_ref_sample(lg + (size_t)i * vocab, vocab, sp[i], d[k][0], d[k][1]);
            ck_assert_msg(ok, "replay %d row %d: drew %d, the reference %d", it, i, eager[i],
                          ct_ref_sample(lg + (size_t)i * vocab, vocab, sp[i], 0, 0));
        }
    }
    CT.cuda_vt->graph_destroy(CT.cuda.b, g);
    ct_free(&CT.cuda, dl), ct_free(&CT.cuda, dp), ct_free(&CT.cuda, dout);
    free(lg);
}
END_TEST

int main(void)
{
    ct_open(1);
    Suite *s = suite_create("backend-cuda.ops");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_embedding);
    tcase_add_test(tc, test_rmsnorm);
    tcase_add_test(tc, test_rope);
    tcase_add_test(tc, test_kv_store);
    tcase_add_loop_test(tc, test_attention, 0, (int)(sizeof att_cases / sizeof *att_cases));
    tcase_add_test(tc, test_attention_windows);
    tcase_add_test(tc, test_attention_variants);
    tcase_add_test(tc, test_attention_batch_invariant);
    tcase_add_test(tc, test_attention_chunk_invariant);
    tcase_add_test(tc, test_attention_split_schedules);
    tcase_add_test(tc, test_silu_mul_add);
    tcase_add_test(tc, test_add_rmsnorm);
    tcase_add_test(tc, test_qk_norm_rope_store);
    tcase_add_test(tc, test_swiglu);
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_argmax);
    tcase_add_test(tc, test_argmax_head);
    tcase_add_test(tc, test_sample);
    tcase_add_test(tc, test_sample_distribution);
    tcase_add_test(tc, test_sample_paths_agree);
    tcase_add_test(tc, test_sample_graph_replay);
    suite_add_tcase(s, tc);
    int rc = ct_run(s);
    ct_close();
    return rc;
}
