/* cpu_attention_fast.c — the fast paths' attention (simd = avx512 or amx): causal paged
 * attention in tiles, query rows against blocks of 16 keys, with FlashAttention-2's online
 * softmax in f32.
 *
 * Why: the exact path (cpu_attention.c) computes one query token at a time, so a prefill of n
 * tokens reads every key and value n times and sums each score across the lanes of a vector.
 * Here an item is one sequence's block of query tokens for one kv head: up to FA_ROWS rows
 * (tokens x the query heads of the GQA group) meet each block of 16 keys once. The keys are
 * transposed into [d][16] so a row's 16 scores are one vector of FMAs (no sums across lanes);
 * the softmax's exponentials are a vector polynomial (Cephes' expf, within 2 ulp); P·V adds
 * 16 scaled value rows into each row's f32 accumulator.
 *
 * Accuracy: f32 throughout, FMAs and a different order of summation than the exact path: the
 * tests hold it to the exact path's tolerance against a double-precision reference. */
#include "cpu_internal.h"

#include <math.h>
#include <stdlib.h>

#define FA_KB 16          /* keys per block */
#define FA_ROWS 32        /* query rows per item */
#define FA_MAX_HEAD_DIM 256

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_HAVE_FA 1
#define FA_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

typedef struct {
    float *out;
    const float *q;
    const llmrt_attn_params *p;
    int32_t group, qb;       /* query heads per kv head; query tokens per item */
    const int32_t *first;    /* [n_seqs + 1] the first item index of each sequence */
} fa_ctx;

/* e^x for x <= 0 (larger x is not asked for): 2^n p(r), x = n ln 2 + r, |r| <= ln 2 / 2. */
FA_TARGET static inline __m512 exp512(__m512 x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(y, n);
}

FA_TARGET static void fa_item(const fa_ctx *c, int32_t s, int32_t qblk, int32_t kvh)
{
    const llmrt_attn_params *p = c->p;
    const int D = p->head_dim, G = c->group, bs = p->block_size;
    const int64_t row_stride = (int64_t)p->n_kv_heads * D;
    const int32_t qlen = p->query_start[s + 1] - p->query_start[s];
    const int32_t t0 = p->query_start[s] + qblk * c->qb;
    const int nq = qlen - qblk * c->qb < c->qb ? qlen - qblk * c->qb : c->qb;
    const int rows = nq * G;
    const int32_t pos0 = p->seq_lens[s] - qlen + (t0 - p->query_start[s]);
    const int32_t *table = p->block_tables + (int64_t)s * p->max_blocks_per_seq;
    const size_t es = llmrt_dtype_size(p->kv_dtype);

    float o[FA_ROWS * FA_MAX_HEAD_DIM] __attribute__((aligned(64)));
    float kbuf[FA_KB * FA_MAX_HEAD_DIM], vbuf[FA_KB * FA_MAX_HEAD_DIM] __attribute__((aligned(64)));
    float kt[FA_MAX_HEAD_DIM * FA_KB] __attribute__((aligned(64)));
    float pr[FA_ROWS][FA_KB] __attribute__((aligned(64)));
    float m[FA_ROWS], l[FA_ROWS], corr[FA_ROWS];
    const float *qrow[FA_ROWS];
    int32_t pos[FA_ROWS];
    for (int r = 0; r < rows; r++) { /* row r: token r / G of the block, head r % G */
        qrow[r] = c->q + ((int64_t)(t0 + r / G) * p->n_heads + (int64_t)kvh * G + r % G) * D;
        pos[r] = pos0 + r / G;
        m[r] = -INFINITY;
        l[r] = 0.0f;
        memset(o + (int64_t)r * D, 0, (size_t)D * sizeof(float));
    }
    const int32_t last = pos0 + nq - 1;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int32_t k0 = 0; k0 <= last; k0 += FA_KB) {
        const int nk = last + 1 - k0 < FA_KB ? last + 1 - k0 : FA_KB;
        for (int k = 0; k < FA_KB; k++) {
            if (k >= nk) {
                memset(kbuf + k * D, 0, (size_t)D * sizeof(float));
                continue;
            }
            const int32_t j = k0 + k;
            const int64_t at = ((int64_t)table[j / bs] * bs + j % bs) * row_stride + (int64_t)kvh * D;
            cpu_row_to_f32(kbuf + k * D, (const char *)p->k_cache + (size_t)at * es, p->kv_dtype, D);
            cpu_row_to_f32(vbuf + k * D, (const char *)p->v_cache + (size_t)at * es, p->kv_dtype, D);
        }
        for (int d = 0; d < D; d++)
            for (int k = 0; k < FA_KB; k++)
                kt[d * FA_KB + k] = kbuf[k * D + d];
        /* scores, eight rows at a time (a short last group repeats its first row) */
        for (int r0 = 0; r0 < rows; r0 += 8) {
            __m512 sc[8];
            const float *qr[8];
            for (int i = 0; i < 8; i++) {
                sc[i] = _mm512_setzero_ps();
                qr[i] = qrow[r0 + i < rows ? r0 + i : r0];
            }
            for (int d = 0; d < D; d++) {
                const __m512 kd = _mm512_load_ps(kt + d * FA_KB);
                for (int i = 0; i < 8; i++)
                    sc[i] = _mm512_fmadd_ps(_mm512_set1_ps(qr[i][d]), kd, sc[i]);
            }
            for (int i = 0; i < 8 && r0 + i < rows; i++) {
                const int r = r0 + i;
                /* key k0 + k is visible to row r when k < nk and k0 + k <= pos[r] */
                const int vis = pos[r] - k0 + 1 < nk ? pos[r] - k0 + 1 : nk;
                const __mmask16 mk = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(vis));
                const __m512 x = _mm512_mul_ps(sc[i], _mm512_set1_ps(p->scale));
                const float bmax = vis > 0 ? _mm512_mask_reduce_max_ps(mk, x) : -INFINITY;
                const float mnew = bmax > m[r] ? bmax : m[r];
                const __m512 e = _mm512_maskz_mov_ps(mk, exp512(_mm512_sub_ps(x, _mm512_set1_ps(mnew))));
                corr[r] = m[r] == mnew ? 1.0f : expf(m[r] - mnew);
                l[r] = l[r] * corr[r] + _mm512_reduce_add_ps(e);
                m[r] = mnew;
                _mm512_store_ps(pr[r], e);
            }
        }
        /* o_r = o_r corr_r + Σ_k p_rk v_k */
        for (int r = 0; r < rows; r++) {
            float *orow = o + (int64_t)r * D;
            if (corr[r] != 1.0f)
                for (int d = 0; d < D; d++)
                    orow[d] *= corr[r];
            for (int k = 0; k < nk; k++) {
                const float pk = pr[r][k];
                const float *v = vbuf + k * D;
                for (int d = 0; d < D; d++)
                    orow[d] = fmaf(pk, v[d], orow[d]);
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        float *dst = c->out + ((int64_t)(t0 + r / G) * p->n_heads + (int64_t)kvh * G + r % G) * D;
        const float inv = 1.0f / l[r];
        for (int d = 0; d < D; d++)
            dst[d] = o[(int64_t)r * D + d] * inv;
    }
}

/* Items: for each sequence its blocks of query tokens, each for every kv head. */
FA_TARGET static void fa_items(void *ctx, int64_t i0, int64_t i1)
{
    const fa_ctx *c = ctx;
    const int32_t n_kv = c->p->n_kv_heads;
    int32_t s = 0;
    for (int64_t it = i0; it < i1; it++) {
        while (it >= c->first[s + 1])
            s++;
        const int64_t local = it - c->first[s];
        fa_item(c, s, (int32_t)(local / n_kv), (int32_t)(local % n_kv));
    }
}
#endif

int cpu_attention_fast_takes(const llmrt_backend *b, const llmrt_attn_params *p)
{
#ifdef CPU_HAVE_FA
    return b->simd >= CPU_SIMD_AVX512 && p->head_dim <= FA_MAX_HEAD_DIM &&
           p->n_heads / p->n_kv_heads <= FA_ROWS;
#else
    (void)b, (void)p;
    return 0;
#endif
}

llmrt_status cpu_attention_fast(llmrt_backend *b, float *out, const float *q,
                                const llmrt_attn_params *p, llmrt_error *err)
{
#ifdef CPU_HAVE_FA
    const int32_t group = p->n_heads / p->n_kv_heads, qb = FA_ROWS / group;
    int32_t *first = malloc((size_t)(p->n_seqs + 1) * sizeof(int32_t));
    if (!first)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu backend: attention: out of memory");
    first[0] = 0;
    for (int32_t s = 0; s < p->n_seqs; s++) {
        const int32_t qlen = p->query_start[s + 1] - p->query_start[s];
        first[s + 1] = first[s] + (qlen + qb - 1) / qb * p->n_kv_heads;
    }
    fa_ctx c = {out, q, p, group, qb, first};
    const int64_t cost = (int64_t)(p->max_seq_len > 0 ? p->max_seq_len : 1) * p->head_dim * 2 * FA_ROWS;
    cpu_parallel(b, first[p->n_seqs], cost, 1, fa_items, &c);
    free(first);
    return LLMRT_OK;
#else
    (void)b, (void)out, (void)q, (void)p;
    return llmrt_fail(err, LLMRT_ERR_INTERNAL, "cpu backend: attention: built without AVX-512");
#endif
}
