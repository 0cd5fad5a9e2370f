/* sampler.c — see sampler.h. Top-k / top-p need the candidates in descending order, but only
 * the head of it: a binary heap over the candidates gives them one at a time in O(log n)
 * after an O(n) build, so a 151936-token vocabulary is never fully sorted. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct llmrt_sampler {
    int32_t vocab;
    double *w;        /* [vocab] unnormalised probabilities of the current row */
    int32_t *idx;     /* [vocab] candidate indices (heap, then the kept prefix) */
    int32_t *counts;  /* [vocab] output occurrence counts, all zero between calls */
    uint8_t *seen;    /* [vocab] prompt-or-output flags, all zero between calls */
};

void llmrt_sampling_init(llmrt_sampling *s)
{
    memset(s, 0, sizeof *s);
    s->temperature = 0.0f;
    s->top_p = 1.0f;
    s->repetition_penalty = 1.0f;
    s->max_tokens = 16;
    s->logprobs = -1;
}

uint64_t llmrt_sampler_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

float llmrt_sampler_uniform(uint64_t seed, uint64_t index)
{
    uint64_t x = llmrt_sampler_mix(llmrt_sampler_mix(seed) ^ (index * 0xd1b54a32d192ed03ull));
    return (float)(x >> 40) * (1.0f / 16777216.0f); /* 24 bits: exactly representable */
}

llmrt_status llmrt_sampler_new(int32_t vocab, llmrt_sampler **out, llmrt_error *err)
{
    if (vocab <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "sampler: vocabulary size %d", vocab);
    llmrt_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->vocab = vocab;
        s->w = malloc(sizeof *s->w * (size_t)vocab);
        s->idx = malloc(sizeof *s->idx * (size_t)vocab);
        s->counts = calloc((size_t)vocab, sizeof *s->counts);
        s->seen = calloc((size_t)vocab, 1);
    }
    if (!s || !s->w || !s->idx || !s->counts || !s->seen) {
        llmrt_sampler_free(s);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory for the sampler (vocab %d)", vocab);
    }
    *out = s;
    return LLMRT_OK;
}

void llmrt_sampler_free(llmrt_sampler *s)
{
    if (!s)
        return;
    free(s->w);
    free(s->idx);
    free(s->counts);
    free(s->seen);
    free(s);
}

int32_t llmrt_sampler_argmax(const float *logits, int32_t vocab)
{
    int32_t best = 0;
    float bv = -INFINITY;
    int found = 0;
    for (int32_t i = 0; i < vocab; i++) {
        float v = logits[i];
        if (v != v)
            continue; /* NaN */
        if (!found || v > bv) {
            bv = v, best = i, found = 1;
        }
    }
    return best;
}

int llmrt_sampler_has_penalties(const llmrt_sampling *sp)
{
    return sp->repetition_penalty != 1.0f || sp->presence_penalty != 0.0f ||
           sp->frequency_penalty != 0.0f;
}

void llmrt_sampler_apply_penalties(llmrt_sampler *s, float *logits, const llmrt_sampling *sp,
                                   const int32_t *prompt, int32_t n_prompt,
                                   const int32_t *output, int32_t n_output)
{
    const int32_t V = s->vocab;
    if (sp->repetition_penalty != 1.0f && sp->repetition_penalty > 0.0f) {
        const float p = sp->repetition_penalty;
        for (int pass = 0; pass < 2; pass++) {
            const int32_t *ids = pass ? output : prompt;
            int32_t n = pass ? n_output : n_prompt;
            for (int32_t i = 0; i < n; i++) {
                int32_t t = ids[i];
                if (t < 0 || t >= V || s->seen[t])
                    continue;
                s->seen[t] = 1;
                logits[t] = logits[t] > 0 ? logits[t] / p : logits[t] * p;
            }
        }
        for (int pass = 0; pass < 2; pass++) { /* leave the flags all zero */
            const int32_t *ids = pass ? output : prompt;
            int32_t n = pass ? n_output : n_prompt;
            for (int32_t i = 0; i < n; i++)
                if (ids[i] >= 0 && ids[i] < V)
                    s->seen[ids[i]] = 0;
        }
    }
    if (sp->presence_penalty != 0.0f || sp->frequency_penalty != 0.0f) {
        for (int32_t i = 0; i < n_output; i++)
            if (output[i] >= 0 && output[i] < V)
                s->counts[output[i]]++;
        for (int32_t i = 0; i < n_output; i++) {
            int32_t t = output[i];
            if (t < 0 || t >= V || s->counts[t] == 0)
                continue;
            logits[t] -= sp->frequency_penalty * (float)s->counts[t] + sp->presence_penalty;
            s->counts[t] = 0; /* each distinct token once; leaves counts all zero */
        }
    }
}

/* ---- candidates in descending order: a max-heap over idx[0..n) keyed by w ---- */

static int better(const double *w, int32_t a, int32_t b)
{
    return w[a] > w[b] || (w[a] == w[b] && a < b);
}

static void sift_down(const double *w, int32_t *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && better(w, h[l], h[m]))
            m = l;
        if (r < n && better(w, h[r], h[m]))
            m = r;
        if (m == i)
            return;
        int32_t t = h[i];
        h[i] = h[m], h[m] = t;
        i = m;
    }
}

/* The largest logit that is not NaN (-inf when there is none). */
static double max_logit(const float *logits, int32_t vocab)
{
    double m = -INFINITY;
    for (int32_t i = 0; i < vocab; i++)
        if (logits[i] == logits[i] && logits[i] > m)
            m = logits[i];
    return m;
}

/* Fill s->w with the row's unnormalised probabilities after temperature and min_p, and
 * s->idx[0..*n_kept) with the tokens top_k / top_p keep. Returns their total mass. When
 * neither top_k nor top_p filters, the kept tokens are in index order, else most likely
 * first. */
static double kept_candidates(llmrt_sampler *s, const float *logits, const llmrt_sampling *sp,
                              int32_t *n_kept)
{
    const int32_t V = s->vocab;
    const double m = max_logit(logits, V);
    const double inv_t = 1.0 / sp->temperature;
    const double min_w = sp->min_p > 0 ? sp->min_p : 0; /* relative to w_max = 1 */
    int32_t n = 0;
    double z = 0;
    for (int32_t i = 0; i < V; i++) {
        double v = logits[i];
        double w = (v == v && m > -INFINITY) ? exp((v - m) * inv_t) : 0.0;
        if (w < min_w || w <= 0)
            w = 0;
        s->w[i] = w;
        if (w > 0) {
            s->idx[n++] = i;
            z += w;
        }
    }
    if (n == 0) { /* every logit NaN or -inf: fall back to the argmax */
        int32_t a = llmrt_sampler_argmax(logits, V);
        s->w[a] = 1;
        s->idx[0] = a;
        *n_kept = 1;
        return 1;
    }
    int top_k = sp->top_k > 0 && sp->top_k < n;
    int top_p = sp->top_p > 0 && sp->top_p < 1;
    if (!top_k && !top_p) {
        *n_kept = n;
        return z;
    }
    /* Heapify, then pop: each popped token goes to the slot the shrinking heap frees. */
    int32_t *h = s->idx;
    for (int32_t i = n / 2 - 1; i >= 0; i--)
        sift_down(s->w, h, n, i);
    int32_t limit = top_k ? sp->top_k : n;
    /* With top_k, top_p applies to the renormalised top-k set: pop k first. */
    int32_t heap_n = n, popped = 0;
    double mass = 0, target = top_p && !top_k ? sp->top_p * z : INFINITY;
    while (popped < limit && heap_n > 0 && mass < target) {
        int32_t best = h[0];
        h[0] = h[--heap_n];
        sift_down(s->w, h, heap_n, 0);
        h[heap_n] = best; /* the tail grows downward, most likely at n-1 */
        popped++;
        mass += s->w[best];
    }
    /* The popped tokens sit in h[n-popped..n), most likely last: reverse, move to front. */
    for (int32_t i = 0, j = popped - 1; i < j; i++, j--) {
        int32_t t = h[n - popped + i];
        h[n - popped + i] = h[n - popped + j], h[n - popped + j] = t;
    }
    memmove(s->idx, s->idx + (n - popped), sizeof *s->idx * (size_t)popped);
    if (top_k && top_p) {
        double zk = mass, cum = 0, tgt = sp->top_p * zk;
        int32_t k = 0;
        while (k < popped) {
            cum += s->w[s->idx[k++]];
            if (cum >= tgt)
                break;
        }
        popped = k;
        mass = cum;
    }
    *n_kept = popped;
    return mass;
}

int32_t llmrt_sampler_pick(llmrt_sampler *s, const float *logits, const llmrt_sampling *sp,
                           float uniform)
{
    if (llmrt_sampler_greedy(sp))
        return llmrt_sampler_argmax(logits, s->vocab);
    int32_t n;
    double z = kept_candidates(s, logits, sp, &n);
    double target = (double)uniform * z, cum = 0;
    for (int32_t i = 0; i < n; i++) {
        cum += s->w[s->idx[i]];
        if (target < cum)
            return s->idx[i];
    }
    return s->idx[n - 1]; /* rounding at the very top of the range */
}

void llmrt_sampler_distribution(llmrt_sampler *s, const float *logits, const llmrt_sampling *sp,
                                double *probs)
{
    memset(probs, 0, sizeof *probs * (size_t)s->vocab);
    if (llmrt_sampler_greedy(sp)) {
        probs[llmrt_sampler_argmax(logits, s->vocab)] = 1;
        return;
    }
    int32_t n;
    double z = kept_candidates(s, logits, sp, &n);
    for (int32_t i = 0; i < n; i++)
        probs[s->idx[i]] = s->w[s->idx[i]] / z;
}

void llmrt_sampler_logprobs(llmrt_sampler *s, const float *logits, int32_t token, int32_t n_top,
                            float *logprob, int32_t *top_ids, float *top_logprobs)
{
    const int32_t V = s->vocab;
    const double m = max_logit(logits, V);
    double sum = 0;
    for (int32_t i = 0; i < V; i++)
        if (logits[i] == logits[i])
            sum += exp((double)logits[i] - m);
    double lse = m + log(sum);
    if (logprob)
        *logprob = (token >= 0 && token < V) ? (float)((double)logits[token] - lse) : -INFINITY;
    if (n_top > LLMRT_MAX_TOP_LOGPROBS)
        n_top = LLMRT_MAX_TOP_LOGPROBS;
    if (n_top > V)
        n_top = V;
    /* Keep a sorted list of the best n_top while scanning once. */
    int32_t k = 0;
    for (int32_t i = 0; i < V && n_top > 0; i++) {
        float v = logits[i];
        if (v != v)
            v = -INFINITY;
        if (k == n_top && !(v > logits[top_ids[k - 1]]))
            continue;
        int32_t j = k < n_top ? k++ : k - 1;
        while (j > 0 && v > logits[top_ids[j - 1]]) {
            top_ids[j] = top_ids[j - 1];
            j--;
        }
        top_ids[j] = i;
    }
    for (int32_t i = 0; i < k; i++)
        top_logprobs[i] = (float)((double)logits[top_ids[i]] - lse);
}
