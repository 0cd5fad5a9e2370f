/* cpu_attention.c — the paged KV cache on the CPU: kv_store and causal paged attention
 * (prefill and decode in one call, GQA).
 *
 * Why: this is the reference attention: every query row is computed independently with an
 * online softmax in f32, so prefill, decode and mixed batches share one code path and no
 * scratch the size of the context is needed. One work item is (query token, kv head): the
 * query heads of a GQA group are processed together, so each K/V row is read (and converted
 * from f16/bf16) once per group rather than once per query head.
 *
 * Layout (backend.h): cache [n_blocks, block_size, n_kv_heads, head_dim]; position p of
 * sequence s lives in block block_tables[s][p / block_size], row p % block_size. */
#include "cpu_internal.h"

#include <math.h>

#define ATT_MAX_HEAD_DIM 1024
#define ATT_BUF 4096 /* floats per scratch array: (heads of a group or keys of a chunk) x head_dim */
#define ATT_MAX_CHUNK 32 /* keys per online-softmax step */
#define ATT_MAX_GROUP 64 /* query heads processed together */
#define LANES 16

/* ---- kv_store ---- */

typedef struct {
    void *kc, *vc;
    llmrt_dtype dt;
    const float *k, *v;
    const int32_t *slots;
    int64_t row; /* n_kv_heads * head_dim */
} kvs_ctx;

void cpu_store_row(void *cache, llmrt_dtype dt, int64_t off, const float *src, int64_t n)
{
    if (dt == LLMRT_DTYPE_F32) {
        memcpy((float *)cache + off, src, (size_t)n * sizeof(float));
    } else if (dt == LLMRT_DTYPE_BF16) {
        uint16_t *d = (uint16_t *)cache + off;
        for (int64_t i = 0; i < n; i++)
            d[i] = llmrt_f32_to_bf16(src[i]);
    } else {
        uint16_t *d = (uint16_t *)cache + off;
        for (int64_t i = 0; i < n; i++)
            d[i] = llmrt_f32_to_f16(src[i]);
    }
}

static void kvs_rows(void *c, int64_t t0, int64_t t1)
{
    const kvs_ctx *s = c;
    for (int64_t t = t0; t < t1; t++) {
        int32_t slot = s->slots[t];
        if (slot < 0)
            continue;
        cpu_store_row(s->kc, s->dt, (int64_t)slot * s->row, s->k + t * s->row, s->row);
        cpu_store_row(s->vc, s->dt, (int64_t)slot * s->row, s->v + t * s->row, s->row);
    }
}

llmrt_status cpu_kv_store(llmrt_backend *b, void *k_cache, void *v_cache, llmrt_dtype kv_dtype,
                          const float *k, const float *v, const int32_t *slot_mapping, int32_t n,
                          int32_t n_kv_heads, int32_t head_dim, llmrt_error *err)
{
    if (!cpu_is_float_dtype(kv_dtype))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cpu backend: kv_store: cache dtype %s is not supported (F32, F16, BF16)",
                          llmrt_dtype_name(kv_dtype));
    if (n_kv_heads <= 0 || head_dim <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cpu backend: kv_store: n_kv_heads %d and head_dim %d must be > 0",
                          n_kv_heads, head_dim);
    for (int32_t t = 0; t < n; t++)
        if (slot_mapping[t] < -1)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "cpu backend: kv_store: slot_mapping[%d] = %d (must be >= 0, or -1 "
                              "to skip)",
                              t, slot_mapping[t]);
    kvs_ctx c = {k_cache, v_cache, kv_dtype, k, v, slot_mapping, (int64_t)n_kv_heads * head_dim};
    cpu_parallel(b, n, 4 * c.row, 0, kvs_rows, &c);
    return LLMRT_OK;
}

/* ---- attention ---- */

typedef struct {
    float *out;
    const float *q;
    const llmrt_attn_params *p;
    int32_t group; /* query heads per kv head */
    cpu_isa isa;
} attn_ctx;

/* The sequence whose query rows contain token t (query_start is non-decreasing). */
static int32_t seq_of(const int32_t *qs, int32_t n_seqs, int32_t t)
{
    int32_t lo = 0, hi = n_seqs - 1;
    while (lo < hi) {
        int32_t mid = (lo + hi + 1) / 2;
        if (qs[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* DEFINE_ATTN(SUF, ATTR): attn_items_<SUF>, the item function compiled for one ISA. The
 * arithmetic is written once: sums in 16 lanes added in a fixed order, so every ISA gives
 * the same bits (the vectorizer maps the lanes onto its registers). */
#define DEFINE_ATTN(SUF, ATTR)                                                                 \
ATTR static inline ALWAYS_INLINE float dot_##SUF(const float *restrict a,                      \
                                                 const float *restrict b, int64_t n)           \
{                                                                                              \
    float acc[LANES] = {0};                                                                    \
    int64_t i = 0;                                                                             \
    for (; i + LANES <= n; i += LANES)                                                         \
        for (int l = 0; l < LANES; l++)                                                        \
            acc[l] += a[i + l] * b[i + l];                                                     \
    for (int l = 0; i < n; i++, l++)                                                           \
        acc[l] += a[i] * b[i];                                                                 \
    float s = 0.0f;                                                                            \
    for (int l = 0; l < LANES; l++)                                                            \
        s += acc[l];                                                                           \
    return s;                                                                                  \
}                                                                                              \
                                                                                               \
/* `count` cache rows of one kv head (first element, then every row_stride), converted from    \
 * f16/bf16 into buf as [count, head_dim] f32. */                                              \
ATTR static inline ALWAYS_INLINE const float *cache_rows_##SUF(                                \
    const void *cache, llmrt_dtype dt, int64_t first_elem, int64_t row_stride, int count,      \
    int head_dim, float *buf)                                                                  \
{                                                                                              \
    const char *base = cache;                                                                  \
    size_t es = llmrt_dtype_size(dt);                                                          \
    for (int r = 0; r < count; r++)                                                            \
        cpu_row_to_f32(buf + (int64_t)r * head_dim,                                            \
                       base + (size_t)(first_elem + r * row_stride) * es, dt, head_dim);       \
    return buf;                                                                                \
}                                                                                              \
                                                                                               \
ATTR static void attn_items_##SUF(void *c, int64_t i0, int64_t i1)                             \
{                                                                                              \
    const attn_ctx *a = c;                                                                     \
    const llmrt_attn_params *p = a->p;                                                         \
    const int D = p->head_dim, G = a->group, bs = p->block_size;                               \
    const int64_t row_stride = (int64_t)p->n_kv_heads * D; /* elements between cache rows */   \
    /* heads of the group processed together, and keys per chunk, so buffers fit ATT_BUF */    \
    int GB = G < ATT_BUF / D ? G : ATT_BUF / D;                                                \
    if (GB > ATT_MAX_GROUP)                                                                    \
        GB = ATT_MAX_GROUP;                                                                    \
    const int CH = ATT_MAX_CHUNK < ATT_BUF / D ? ATT_MAX_CHUNK : ATT_BUF / D;                  \
    float acc[ATT_BUF], kbuf[ATT_BUF], vbuf[ATT_BUF];                                          \
    float scores[ATT_MAX_CHUNK], m[ATT_MAX_GROUP], l[ATT_MAX_GROUP];                           \
                                                                                               \
    for (int64_t item = i0; item < i1; item++) {                                               \
        const int32_t t = (int32_t)(item / p->n_kv_heads);                                     \
        const int32_t kvh = (int32_t)(item % p->n_kv_heads);                                   \
        const int32_t s = seq_of(p->query_start, p->n_seqs, t);                                \
        const int32_t qlen = p->query_start[s + 1] - p->query_start[s];                        \
        const int32_t pos = p->seq_lens[s] - qlen + (t - p->query_start[s]);                   \
        const int32_t *table = p->block_tables + (int64_t)s * p->max_blocks_per_seq;           \
                                                                                               \
        for (int h0 = 0; h0 < G; h0 += GB) {                                                   \
            const int nh = G - h0 < GB ? G - h0 : GB;                                          \
            for (int h = 0; h < nh; h++) {                                                     \
                m[h] = -INFINITY;                                                              \
                l[h] = 0.0f;                                                                   \
                for (int d = 0; d < D; d++)                                                    \
                    acc[h * D + d] = 0.0f;                                                     \
            }                                                                                  \
            for (int32_t j0 = 0; j0 <= pos;) {                                                 \
                /* a chunk of keys inside one block */                                         \
                int32_t row0 = j0 % bs, cnt = bs - row0;                                       \
                if (cnt > CH)                                                                  \
                    cnt = CH;                                                                  \
                if (cnt > pos + 1 - j0)                                                        \
                    cnt = pos + 1 - j0;                                                        \
                int64_t first =                                                                \
                    ((int64_t)table[j0 / bs] * bs + row0) * row_stride + (int64_t)kvh * D;     \
                const float *kr =                                                              \
                    p->kv_dtype == LLMRT_DTYPE_F32 ? (const float *)p->k_cache + first         \
                                                   : cache_rows_##SUF(p->k_cache,              \
                                                         p->kv_dtype, first, row_stride,       \
                                                         cnt, D, kbuf);                        \
                const float *vr =                                                              \
                    p->kv_dtype == LLMRT_DTYPE_F32 ? (const float *)p->v_cache + first         \
                                                   : cache_rows_##SUF(p->v_cache,              \
                                                         p->kv_dtype, first, row_stride,       \
                                                         cnt, D, vbuf);                        \
                const int64_t kstride = p->kv_dtype == LLMRT_DTYPE_F32 ? row_stride : D;       \
                for (int h = 0; h < nh; h++) {                                                 \
                    const int qh = kvh * G + h0 + h;                                           \
                    const float *qv = a->q + ((int64_t)t * p->n_heads + qh) * D;               \
                    float cmax = -INFINITY;                                                    \
                    for (int r = 0; r < cnt; r++) {                                            \
                        scores[r] = dot_##SUF(qv, kr + r * kstride, D) * p->scale;             \
                        if (scores[r] > cmax)                                                  \
                            cmax = scores[r];                                                  \
                    }                                                                          \
                    float mnew = cmax > m[h] ? cmax : m[h];                                    \
                    float corr = expf(m[h] - mnew);                                            \
                    float *ac = acc + h * D;                                                   \
                    if (corr != 1.0f) {                                                        \
                        l[h] *= corr;                                                          \
                        for (int d = 0; d < D; d++)                                            \
                            ac[d] *= corr;                                                     \
                    }                                                                          \
                    m[h] = mnew;                                                               \
                    for (int r = 0; r < cnt; r++) {                                            \
                        float pr = expf(scores[r] - mnew);                                     \
                        const float *vv = vr + r * kstride;                                    \
                        l[h] += pr;                                                            \
                        for (int d = 0; d < D; d++)                                            \
                            ac[d] += pr * vv[d];                                               \
                    }                                                                          \
                }                                                                              \
                j0 += cnt;                                                                     \
            }                                                                                  \
            for (int h = 0; h < nh; h++) {                                                     \
                const int qh = kvh * G + h0 + h;                                               \
                float *o = a->out + ((int64_t)t * p->n_heads + qh) * D;                        \
                float inv = 1.0f / l[h];                                                       \
                for (int d = 0; d < D; d++)                                                    \
                    o[d] = acc[h * D + d] * inv;                                               \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
}

#define ALWAYS_INLINE __attribute__((always_inline))
DEFINE_ATTN(base, )
#if defined(__x86_64__) && defined(__GNUC__)
#define CPU_HAVE_X86_ATTN 1
DEFINE_ATTN(avx2, __attribute__((target("avx2,f16c"))))
DEFINE_ATTN(avx512, __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c"))))
#endif

static void attn_items(void *c, int64_t i0, int64_t i1)
{
    const attn_ctx *a = c;
#ifdef CPU_HAVE_X86_ATTN
    if (a->isa == CPU_ISA_AVX512) {
        attn_items_avx512(c, i0, i1);
        return;
    }
    if (a->isa == CPU_ISA_AVX2) {
        attn_items_avx2(c, i0, i1);
        return;
    }
#endif
    attn_items_base(c, i0, i1);
}

llmrt_status cpu_attention(llmrt_backend *b, float *out, const float *q,
                           const llmrt_attn_params *p, llmrt_error *err)
{
#define BAD(...) return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: attention: " __VA_ARGS__)
    if (!cpu_is_float_dtype(p->kv_dtype))
        return llmrt_fail(err, LLMRT_ERR_UNSUPPORTED,
                          "cpu backend: attention: cache dtype %s is not supported (F32, F16, BF16)",
                          llmrt_dtype_name(p->kv_dtype));
    if (p->n_heads <= 0 || p->n_kv_heads <= 0 || p->n_heads % p->n_kv_heads)
        BAD("n_heads %d must be a positive multiple of n_kv_heads %d", p->n_heads, p->n_kv_heads);
    if (p->head_dim <= 0 || p->head_dim > ATT_MAX_HEAD_DIM)
        BAD("head_dim %d must be in [1, %d]", p->head_dim, ATT_MAX_HEAD_DIM);
    if (p->block_size <= 0 || p->max_blocks_per_seq <= 0)
        BAD("block_size %d and max_blocks_per_seq %d must be > 0", p->block_size,
            p->max_blocks_per_seq);
    if (p->n_seqs <= 0 || p->n_tokens < 0)
        BAD("n_seqs %d must be > 0 (n_tokens %d)", p->n_seqs, p->n_tokens);
    if (p->query_start[0] != 0 || p->query_start[p->n_seqs] != p->n_tokens)
        BAD("query_start must run from 0 to n_tokens = %d, got %d .. %d", p->n_tokens,
            p->query_start[0], p->query_start[p->n_seqs]);
    for (int32_t s = 0; s < p->n_seqs; s++) {
        int32_t qlen = p->query_start[s + 1] - p->query_start[s], len = p->seq_lens[s];
        if (qlen < 0)
            BAD("query_start is decreasing at sequence %d", s);
        if (qlen > len)
            BAD("sequence %d has %d query tokens but seq_len %d (must be >= the query length)", s,
                qlen, len);
        if (len > (int64_t)p->max_blocks_per_seq * p->block_size)
            BAD("sequence %d: seq_len %d exceeds max_blocks_per_seq %d x block_size %d", s, len,
                p->max_blocks_per_seq, p->block_size);
        for (int32_t blk = 0; qlen > 0 && blk * (int64_t)p->block_size < len; blk++)
            if (p->block_tables[(int64_t)s * p->max_blocks_per_seq + blk] < 0)
                BAD("sequence %d: block_tables[%d][%d] = %d is not a block", s, s, blk,
                    p->block_tables[(int64_t)s * p->max_blocks_per_seq + blk]);
    }
#undef BAD
    if (cpu_attention_fast_takes(b, p))
        return cpu_attention_fast(b, out, q, p, err);
    attn_ctx c = {out, q, p, p->n_heads / p->n_kv_heads, b->isa};
    int64_t items = (int64_t)p->n_tokens * p->n_kv_heads;
    int64_t cost = (int64_t)(p->max_seq_len > 0 ? p->max_seq_len : 1) * p->head_dim * 2 * c.group;
    cpu_parallel(b, items, cost, 1, attn_items, &c);
    return LLMRT_OK;
}
